"""One local FedNN step on the same weights: fednbs's FedNN form of the `cnn` against the same network built from the authors' layers.

    python tools/fidelity/fednn_step.py [--seed S] [--source GIT]

Both models start from the same weights, every AGN layer held at the same fixed mixing (0.3 GN, 0.7 BN) so that no
Gumbel noise enters; one SGD step of FedNN's optimiser (lr 0.1, weight decay 1e-3, gradient norm clipped at 10) on
one batch of 50 digits3 images. Prints the largest difference of the training logits, the loss, the clipped gradient
norm, and of every state entry after the step.
"""
import argparse, copy, sys
from pathlib import Path
import torch
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_authors as ra

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0); p.add_argument("--source", default=None)
    p.add_argument("--out", default=str(ra.HERE.parents[1] / "nbs" / "tutorials" / "fidelity_results"))
    a = p.parse_args(argv)
    from fednbs.normalization import convert_to_fednn, agn_layers, set_agn_options
    repo = ra.checkout("fednn", a.source); sys.path[:0] = [str(repo)]
    M = ra.load_patched(repo, "Models.py", "Models", ra.FEDNN_PATCHES["Models.py"])
    fd = ra.load_clients("fednn-digits3", a.seed, Path(a.out))
    torch.manual_seed(a.seed); torch.set_num_threads(1)
    base = ra.fednbs_model(fd)
    ours = set_agn_options(convert_to_fednn(copy.deepcopy(base)), merge="soft")   # soft: the fixed mixing is pi itself
    theirs = ra.FedNNAuthorsNet(M, copy.deepcopy(base))
    pi = torch.tensor([0.3, 0.7])
    with torch.no_grad():
        for m in agn_layers(ours).values(): m.pi.copy_(pi); m.fixed.fill_(1)
        for m in theirs.modules():
            if isinstance(m, M.AGN): m.select_weight.copy_(pi); m.fixed.fill_(1)
    x, y = fd.clients[0].x_train[:50], fd.clients[0].y_train[:50]
    res = {}
    for name, m in (("fednbs", ours), ("authors", theirs)):
        m.train(); opt = torch.optim.SGD(m.parameters(), lr=0.1, weight_decay=1e-3)
        z = m(x); loss = torch.nn.functional.cross_entropy(z, y); opt.zero_grad(); loss.backward()
        g = torch.nn.utils.clip_grad_norm_(m.parameters(), 10.0); opt.step()
        res[name] = (z.detach(), loss.item(), g.item(), {k: v.flatten().double() for k, v in m.state_dict().items()})
    (zo, lo, go, so), (zt, lt, gt, st) = res["fednbs"], res["authors"]
    print(f"training logits: max |diff| {(zo - zt).abs().max().item():.1e}; loss {lo:.6f} vs {lt:.6f}; clipped grad norm {go:.6f} vs {gt:.6f}")
    names = {"pi": "select_weight", "tau": "temperature"}
    for k, v in so.items():
        mod, _, leaf = k.rpartition("."); k2 = f"{mod}.{names.get(leaf, leaf)}"
        if leaf == "tau": continue                                       # the round's temperature, set by the FL loop
        d = (v - st[k2]).abs().max().item()
        print(f"  {k:28s} max |diff| after the step {d:.1e}")

if __name__ == "__main__": main()
