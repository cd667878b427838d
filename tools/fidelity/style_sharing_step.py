"""The parts of CCST and FedDG-ELCFS that run offline on a CPU: the authors' code and fednbs on the same inputs.

    python tools/fidelity/style_sharing_step.py [--seed S] [--source-ccst GIT] [--source-feddg-elcfs GIT]

Each authors' repository is cloned into the cache folder of `run_authors.py` (outside the project,
FEDNBS_FIDELITY_CACHE, default ~/.cache/fednbs-fidelity), and the files this check reads are written there from the
pinned commit below; nothing of it is copied into this project. `--source-*` clones from another place (a local
mirror) instead of GitHub. Their scripts run their work at import time (argument parsing, data loading, CUDA), so
this file executes only the functions and lines named below, taken from the pinned files, in a namespace of ours;
every change needed is listed in tools/fidelity/README.md. Their AdaIN networks are given seeded random weights
(the pretrained files cannot be downloaded here): the check is of the arithmetic, which does not depend on them.
Writes nbs/tutorials/fidelity_results/step_style_sharing.json: a list of {method, quantity, max_abs_diff,
authors_commit}.
"""
import argparse, copy, json, math, random, sys, textwrap
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_authors as ra
import generalization_step as gs

PINS = {  # method -> (public repository, pinned commit)
    "ccst": ("https://github.com/JeremyCJM/CCST", "87c3e448cfa28c366b58d17f8dffc5d3d83574e5"),
    "feddg_elcfs": ("https://github.com/liuquande/FedDG-ELCFS", "0a281e408a43d5ab4486f213dd286dacc733dd41"),
}
FILES = {  # method -> the files of the pinned commit that this check reads
    "ccst": ["style_transfer/AdaIN/function.py", "style_transfer/AdaIN/net.py",
             "style_transfer/AdaIN/mean_std_computation_effcientMem.py", "style_transfer/AdaIN/CCST_OverallStyleTransfer.py",
             "federated/fed_run.py", "data/ImageLoader.py"],
    "feddg_elcfs": ["freq_space_interpolation_demo.py", "dataloaders/fundus_dataloader.py", "train_ELCFS.py"],
}
gs.PINS.update(PINS); gs.FILES.update(FILES)
checkout = gs.checkout   # the same cache and the same rule: only `FILES`, written from the pinned commit

def row(method, quantity, d):
    print(f"  {method:11s} {quantity:56s} max |diff| {d:.1e}")
    return {"method": method, "quantity": quantity, "max_abs_diff": d, "authors_commit": PINS[method][1]}

def block(src: str, start: str, end: str) -> str:
    "The whole lines of `src` from the one holding `start` (occurring exactly once) up to the next `end`, dedented."
    assert src.count(start) == 1 and end in src[src.index(start):], (start, end)
    i = src.rindex("\n", 0, src.index(start)) + 1
    return textwrap.dedent(src[i:src.index(end, i)])

# ------------------------------------------------------------------------------------------------ CCST (JeremyCJM/CCST)
def check_ccst(seed: int, source=None) -> list:
    "CCST: AdaIN's networks, the overall and single-image styles, AdaIN and the transfer, theirs against fednbs's."
    from fednbs.style_sharing import adain_networks, adain, channel_stats, image_styles, style_transfer, to_unit
    repo = checkout("ccst", source)
    adain_dir = repo / "style_transfer" / "AdaIN"
    gs.drop_modules({"net", "function"}); sys.path.insert(0, str(adain_dir))
    import net as their_net, function as their_fn
    out = []
    enc, dec = adain_networks("random", seed=seed)
    vgg = nn.Sequential(*list(their_net.vgg.children())[:31])   # as their scripts cut it
    vgg.load_state_dict(enc.state_dict()); their_net.decoder.load_state_dict(dec.state_dict())   # strict: same layout
    vgg.eval(); their_net.decoder.eval()
    x, _ = gs.digits(12, seed)
    u = to_unit(x, x.min(), x.max())                             # 16 px RGB in [0, 1]
    with torch.no_grad():
        out.append(row("ccst", "relu4_1 features, our weights in their vgg[:31]", gs.maxdiff(enc(u), vgg(u))))
        # overall style: their calc_sum over batches, then their three closing lines
        src = (adain_dir / "mean_std_computation_effcientMem.py").read_text()
        ns = {"torch": torch}
        exec(block(src, "def calc_sum(feat):", "all_feat_sum, all_feat_square_sum, all_count, img_count = 0, 0, 0, 0"), ns)
        all_feat_sum = all_feat_square_sum = all_count = 0
        for i in range(0, len(u), 5):                            # their loop over the loader, in batches of 5
            s, s2, n = ns["calc_sum"](vgg(u[i:i + 5]))
            all_feat_sum, all_feat_square_sum, all_count = all_feat_sum + s, all_feat_square_sum + s2, all_count + n
        ns.update(all_feat_sum=all_feat_sum, all_feat_square_sum=all_feat_square_sum, all_count=all_count)
        exec(block(src, "feat_mean = all_feat_sum / float(all_count)", "end_time = datetime.now()"), ns)
        mean, std = image_styles(enc, u, pooled=True, chunk=5)
        out.append(row("ccst", "overall style: pooled mean (12 images)", gs.maxdiff(mean, ns["feat_mean"].flatten(1))))
        out.append(row("ccst", "overall style: pooled std (12 images)", gs.maxdiff(std, ns["feat_std"].flatten(1))))
        # single-image style: their calc_sum on one image, as CCST_SingleStyleTransfer.py computes it
        s, s2, n = ns["calc_sum"](vgg(u[:1]))
        m1 = s / float(n); sd1 = torch.sqrt(s2 / float(n) - m1 ** 2 + 1e-5)
        mine = image_styles(enc, u[:1], pooled=False)
        out.append(row("ccst", "single-image style: mean and std", max(gs.maxdiff(mine[0], m1.flatten(1)), gs.maxdiff(mine[1], sd1.flatten(1)))))
        # AdaIN with given statistics, and the whole transfer (their `style_transfer` of CCST_OverallStyleTransfer.py)
        f = vgg(u)
        out.append(row("ccst", "AdaIN to given statistics",
                       gs.maxdiff(adain(f, mean, std), their_fn.adaIN_StyleStat_ContentFeat(f, [ns["feat_mean"], ns["feat_std"]]))))
        tsrc = (adain_dir / "CCST_OverallStyleTransfer.py").read_text()
        ts = {"torch": torch, "adaIN_StyleStat_ContentFeat": their_fn.adaIN_StyleStat_ContentFeat, "device": "cpu"}
        exec(block(tsrc, "def style_transfer(vgg, decoder, content, style_stat, alpha=1.0,", "parser = argparse.ArgumentParser()"), ts)
        for alpha in (1.0, 0.6):
            theirs = ts["style_transfer"](vgg, their_net.decoder, u, [ns["feat_mean"], ns["feat_std"]], alpha)
            out.append(row("ccst", f"style transfer: decoded image, alpha = {alpha}", gs.maxdiff(style_transfer(enc, dec, u, mean, std, alpha), theirs)))
    gs.drop_modules({"net", "function"}); sys.path.remove(str(adain_dir))
    return out

# ------------------------------------------------------------------------------------- FedDG-ELCFS (liuquande/FedDG-ELCFS)
def meta_batch(seed: int):
    "A batch of 16 digits, its amplitude-transferred copy (fednbs's interpolation) and the small CNN's start."
    from fednbs.style_sharing import amplitude_interpolate
    x, y = gs.digits(32, seed)
    amp = torch.fft.fft2(x[16:]).abs()
    x_meta = amplitude_interpolate(x[:16], amp, torch.full((16,), 0.7), 0.1).clamp(-1, 1)
    torch.manual_seed(seed); model = gs.small_cnn()
    return x[:16], x_meta, y[:16], model

def sgd_step(model, loss, lr):
    model.zero_grad(); loss.backward()
    with torch.no_grad():
        for p in model.parameters(): p -= lr * p.grad

def check_feddg_elcfs(seed: int, source=None, ccst_source=None) -> list:
    "FedDG-ELCFS: the amplitude interpolation of the demo, of the training loader and of the CCST port; one episodic step."
    from fednbs.style_sharing import amplitude_interpolate, episodic_loss
    repo = checkout("feddg_elcfs", source)
    out = []
    rng = np.random.default_rng(seed)
    local, target = rng.uniform(0, 255, (3, 40, 40)), rng.uniform(0, 255, (3, 40, 40))   # float64 (numpy keeps float32 in float32)
    ns = {"np": np}
    exec(block((repo / "freq_space_interpolation_demo.py").read_text(), "def extract_amp_spectrum(trg_img):", "def draw_image(image):"), ns)
    amp_t = ns["extract_amp_spectrum"](target)
    for L, ratio in ((0.003, 0.4), (0.1, 0.4), (0.25, 0.0)):   # their `ratio` is the local amplitude's weight: lambda = 1 - ratio
        theirs = ns["freq_space_interpolation"](local, amp_t, L=L, ratio=ratio)
        mine = amplitude_interpolate(torch.from_numpy(local)[None], torch.from_numpy(amp_t)[None], torch.tensor([1 - ratio], dtype=torch.float64), L)[0]
        out.append(row("feddg_elcfs", f"interpolation, demo, L = {L}, lambda = {1 - ratio:.1f}", gs.maxdiff(mine, theirs)))
    # the training loader: source_to_target_freq (H, W, C images), L = 0, the amplitude replaced
    ld = {"np": np, "random": random}
    exec(block((repo / "dataloaders/fundus_dataloader.py").read_text(), "def low_freq_mutate_np( amp_src, amp_trg, L=0.1 ):", "\n    return src_in_trg.transpose(1, 2, 0)") + "    return src_in_trg.transpose(1, 2, 0)\n", ld)
    theirs = ld["source_to_target_freq"](local.transpose(1, 2, 0), amp_t, L=0)
    mine = amplitude_interpolate(torch.from_numpy(local)[None], torch.from_numpy(amp_t)[None], torch.ones(1), 0.0)[0]
    out.append(row("feddg_elcfs", "interpolation, training loader, L = 0, replaced", gs.maxdiff(mine.permute(1, 2, 0), theirs)))
    # the CCST authors' port (data/ImageLoader.py): lambda = 1 - randint(1, 10) / 10, drawn inside their function
    crepo = checkout("ccst", ccst_source)
    cp = {"np": np}
    exec(block((crepo / "data/ImageLoader.py").read_text(), "def low_freq_mutate_np( amp_src, amp_trg, L=0.1 ,ratio=1.0):", "class PACS_AMP():"), cp)
    np.random.seed(seed); theirs = cp["source_to_target_freq"](local.transpose(1, 2, 0), amp_t, L=0.1)
    np.random.seed(seed); lam = 1 - np.random.randint(1, 10) / 10
    mine = amplitude_interpolate(torch.from_numpy(local)[None], torch.from_numpy(amp_t)[None], torch.tensor([lam], dtype=torch.float64), 0.1)[0]
    out.append(row("feddg_elcfs", f"interpolation, CCST port, L = 0.1, lambda = {lam:.1f}", gs.maxdiff(mine.permute(1, 2, 0), theirs)))
    # one episodic step: their fast-weight lines of train_ELCFS.py, on our network, the meta-test forward through an
    # adapter (their `net_current(x, fast_weights)` is torch.func.functional_call), then one SGD step
    x, x_meta, y, start = meta_batch(seed)
    step, clip, lr = 0.05, 100.0, 0.1
    lines = block((repo / "train_ELCFS.py").read_text(), "grads = torch.autograd.grad(loss_inner, net_current.parameters(), retain_graph=True)", "# outer loop evaluation")
    theirs = copy.deepcopy(start)
    loss_inner = F.cross_entropy(theirs(x), y)   # their dice_loss on segmentation masks; the classification loss here
    env = {"torch": torch, "OrderedDict": OrderedDict, "loss_inner": loss_inner, "net_current": theirs, "meta_step_size": step, "clip_value": clip}
    exec(lines, env)
    loss_outer = F.cross_entropy(torch.func.functional_call(theirs, dict(env["fast_weights"]), (x_meta,)), y)
    sgd_step(theirs, loss_inner + loss_outer, lr)   # their boundary-oriented contrastive term is left out on both sides
    ours = copy.deepcopy(start)
    sgd_step(ours, episodic_loss(ours, x, x_meta, y, step, clip), lr)
    print(f"  (the step moved the weights by up to {gs.maxdiff(ours.state_dict(), start.state_dict()):.1e})")
    out.append(row("feddg_elcfs", "episodic step, train_ELCFS.py's lines: every entry", gs.maxdiff(ours.state_dict(), theirs.state_dict())))
    # the CCST port's `train_meta` (federated/fed_run.py): its meta-test loss has no path to the weights
    fsrc = (crepo / "federated/fed_run.py").read_text()
    fr = {"torch": torch, "OrderedDict": OrderedDict, "copy": copy, "math": math, "print": lambda *a, **k: None}   # quiet
    exec(block(fsrc, "def train_meta(model, train_loader, optimizer, loss_fun, client_num, device, args, iter_idx, logger):",
               "def train_fedprox(args, model, train_loader, optimizer, loss_fun, client_num, device):"), fr)
    port = copy.deepcopy(start)
    fr["train_meta"](port, [(x, x_meta, y)], torch.optim.SGD(port.parameters(), lr=lr), nn.CrossEntropyLoss(), 1, "cpu",
                     SimpleNamespace(meta_step_size=step, clip_value=clip), 0, SimpleNamespace(log=lambda *a, **k: None))
    params = lambda m: {k: v.detach() for k, v in m.named_parameters()}
    out.append(row("feddg_elcfs", "CCST port's train_meta vs fednbs: every weight", gs.maxdiff(params(ours), params(port))))
    inner_only = copy.deepcopy(start)
    sgd_step(inner_only, F.cross_entropy(inner_only(x), y), lr)
    out.append(row("feddg_elcfs", "CCST port's train_meta vs inner loss alone: every weight", gs.maxdiff(params(inner_only), params(port))))
    return out

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--source-ccst", default=None)
    p.add_argument("--source-feddg-elcfs", default=None)
    p.add_argument("--out", default=str(ra.HERE.parents[1] / "nbs" / "tutorials" / "fidelity_results" / "step_style_sharing.json"))
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    rows = check_ccst(a.seed, a.source_ccst) + check_feddg_elcfs(a.seed, a.source_feddg_elcfs, a.source_ccst)
    for r in rows: r["max_abs_diff"] = float(f"{r['max_abs_diff']:.3g}")
    Path(a.out).write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {len(rows)} rows to {Path(a.out).name}")

if __name__ == "__main__": main()
