"""One local step of FedSR, FedIIR and FedGMA: the authors' code and fednbs on the same weights and batch.

    python tools/fidelity/invariance_step.py [--seed S] [--source-fedsr GIT] [--source-fediir GIT] [--source-fedgma GIT]

Each authors' repository is cloned into the cache folder of `run_authors.py` (outside the project,
FEDNBS_FIDELITY_CACHE, default ~/.cache/fednbs-fidelity), and the files this check reads are written there from the
pinned commit below; nothing of it is copied into this project. `--source-*` clones from another place (a local
mirror) instead of GitHub. Every change needed to run their code is made at run time by this file and listed in
tools/fidelity/README.md. Writes nbs/tutorials/fidelity_results/step_invariance.json: a list of
{method, quantity, max_abs_diff, authors_commit}.
"""
import argparse, copy, json, sys, types
from pathlib import Path
from types import SimpleNamespace
import torch
from torch import nn
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_authors as ra
import generalization_step as gs

PINS = {  # method -> (public repository, pinned commit)
    "fedsr": ("https://github.com/atuannguyen/FedSR", "ba8d894a90fab9da3d62cce570bc8fe17a312a2d"),
    "fediir": ("https://github.com/YamingGuo98/FedIIR", "3e7a785e30002ac75d9b3575e3e9062d8e22ea42"),
    "fedgma": ("https://github.com/inouye-lab/FedDG_Benchmark", "da58f764cffc98e537209dc799009ffdf2f36574"),
}
FILES = {  # method -> the files of the pinned commit that this check reads
    "fedsr": ["src/methods", "src/util.py"],
    "fediir": ["domainbed"],
    "fedgma": ["src/server.py", "src/utils.py"],
}

gs.PINS.update(PINS); gs.FILES.update(FILES)
checkout = gs.checkout   # the same cache and the same rule: only `FILES`, written from the pinned commit

def row(method, quantity, d):
    print(f"  {method:7s} {quantity:60s} max |diff| {d:.1e}")
    return {"method": method, "quantity": quantity, "max_abs_diff": d, "authors_commit": PINS[method][1]}

# ------------------------------------------------------------------------------------------- FedSR (atuannguyen/FedSR)
class Backbone(nn.Module):
    "What their `Base` expects of `torchvision.models.resnet18(...)`: a network whose last layer is the attribute `fc`."
    def __init__(self, body: nn.Module, width: int):
        super().__init__()
        self.body, self.fc = body, nn.Linear(width, 1)
    def forward(self, x): return self.fc(self.body(x))

def check_fedsr(seed: int, source=None) -> list:
    "FedSR: one SGD step of `Model.train_client` against `FedSR.local_update`, and the 20-sample prediction."
    from fednbs.algorithm import Task
    from fednbs.data import ClientData
    from fednbs.invariance import FedSR
    repo = checkout("fedsr", source)
    gs.drop_modules({"methods", "util"}); sys.path.insert(0, str(repo / "src"))
    x, y = gs.digits(32, seed)
    lr, wd, a_l2r, a_cmi = 0.01, 5e-4, 0.01, 5e-4
    algo = FedSR(fedsr_l2r=a_l2r, fedsr_cmi=a_cmi).setup(Task(gs.small_cnn, ["c0"], 10, rounds=2, seed=seed, lr=lr,
                                                              momentum=0.9, weight_decay=wd, batch_size=32))
    ours = algo.new_model()
    with torch.no_grad():   # a reference distribution away from its start, so that every term of the KL counts
        ours.prior.mean.normal_(0, 0.3); ours.prior.rho.normal_(1, 0.3); ours.prior.scale.fill_(1.2)
    start = {k: v.clone() for k, v in ours.state_dict().items()}
    tv, tvm = types.ModuleType("torchvision"), types.ModuleType("torchvision.models")   # their Base builds an ImageNet ResNet
    tvm.resnet18 = lambda pretrained=True: Backbone(copy.deepcopy(ours.encoder[0]), ours.encoder[1].in_features)
    tv.models = tvm; saved = {k: sys.modules.get(k) for k in ("torchvision", "torchvision.models")}
    sys.modules.update({"torchvision": tv, "torchvision.models": tvm})
    try:
        import methods.FedSR as their_fedsr
        args = SimpleNamespace(z_dim=ours.z_dim, num_classes=10, back_bone="resnet18", device="cpu", optim="SGD", lr=lr,
                               weight_decay=wd, L2R_coeff=a_l2r, CMI_coeff=a_cmi, num_samples=20)
        theirs = their_fedsr.Model(args)
    finally:
        for k, v in saved.items():
            if v is None: sys.modules.pop(k, None)
            else: sys.modules[k] = v
    names = {"net.body": "encoder.0", "net.fc": "encoder.1", "cls": "classifier"}   # their module -> ours
    def theirs_as_ours():
        sd = {}
        for k, v in theirs.model.state_dict().items():
            mod, rest = ("net.body", k[len("0.body."):]) if k.startswith("0.body.") else (("net.fc", k[len("0.fc."):]) if k.startswith("0.fc.") else ("cls", k[2:]))
            sd[f"{names[mod]}.{rest}"] = v
        return {**sd, "prior.mean": theirs.r_mu.data, "prior.rho": theirs.r_sigma.data, "prior.scale": theirs.C.data}
    with torch.no_grad():
        mine = dict(start)
        for k, v in theirs.model.state_dict().items():
            src = ("encoder.0." + k[len("0.body."):]) if k.startswith("0.body.") else (("encoder.1." + k[len("0.fc."):]) if k.startswith("0.fc.") else "classifier." + k[2:])
            v.copy_(mine[src])
        theirs.r_mu.copy_(mine["prior.mean"]); theirs.r_sigma.copy_(mine["prior.rho"]); theirs.C.copy_(mine["prior.scale"])
    out = [row("fedsr", "weights copied to their model", gs.maxdiff(theirs_as_ours(), start))]
    # the batch: fednbs shuffles it (one randperm of torch's generator), then draws the representation's noise
    torch.manual_seed(seed + 1); order = torch.randperm(32)
    r = theirs.train_client([(x[order], y[order])], steps=1)   # `next(iter(loader))`: a list holds the one batch
    theirs_loss = float(r["loss"] + a_l2r * r["regL2R"] + a_cmi * r["regCMI"])
    client = ClientData("c0", x, y, x[:0], y[:0])
    state = {"local": {k: v.clone() for k, v in start.items() if k.startswith("prior.")}}
    msg = {f"model/{k}": v.clone() for k, v in start.items() if not k.startswith("prior.")}
    torch.manual_seed(seed + 1)
    up, metrics = algo.local_update(state, msg, client, 0)
    after = {**{k[6:]: v for k, v in up.items() if k.startswith("model/")}, **state["local"]}
    print(f"  (the step moved the weights by up to {gs.maxdiff(after, start):.1e})")
    out.append(row("fedsr", "local step: loss (CE + L2R + CMI terms)", abs(metrics["loss"] - theirs_loss)))
    got = theirs_as_ours()
    enc = {k: v for k, v in after.items() if not k.startswith("prior.")}
    out.append(row("fedsr", "local step: encoder and classifier (every entry)", gs.maxdiff(enc, got)))
    out.append(row("fedsr", "local step: reference distribution and scale c", gs.maxdiff({k: after[k] for k in after if k.startswith("prior.")}, got)))
    # prediction: log of the mean softmax over 20 samples, from the same noise
    model = algo.new_model(); model.load_state_dict(after); model.eval(); theirs.eval()
    model.generator = torch.Generator().manual_seed(seed + 2)
    torch.manual_seed(seed + 2)
    with torch.no_grad(): out.append(row("fedsr", "prediction: log mean softmax over 20 samples", gs.maxdiff(model(x), theirs(x))))
    gs.drop_modules({"methods", "util"}); sys.path.remove(str(repo / "src"))
    return out

# ------------------------------------------------------------------------------------- FedIIR (YamingGuo98/FedIIR)
def check_fediir(seed: int, source=None) -> list:
    "FedIIR: the smoothed mean head gradient, one client's local step and the server's mean, their `FedIIR` against fednbs's."
    from fednbs.algorithm import Task
    from fednbs.data import ClientData
    from fednbs.invariance import FedIIR
    repo = checkout("fediir", source)
    gs.drop_modules({"domainbed"}); sys.path.insert(0, str(repo))
    from domainbed import algorithms as A
    x, y = gs.digits(64, seed)
    data = {"a": (x[:32], y[:32]), "b": (x[32:], y[32:])}
    lr, penalty, ema = 0.01, 0.1, 0.95
    torch.manual_seed(seed); base = gs.small_cnn()
    head = [f"head.{n}" for n, _ in base.head.named_parameters()]
    torch.manual_seed(seed + 1)
    gbar = {n: 0.05 * torch.randn_like(p) for n, p in base.named_parameters() if n in head}   # a mean gradient of last round
    hp = dict(lr=lr, weight_decay=0.0, penalty=penalty, ema=ema, nonlinear_classifier=False)
    def their_algorithm():
        t = A.FedIIR((1, 28, 28), 10, 2, hp, SimpleNamespace(device="cpu"))   # built on their MNIST net, then given ours
        t.featurizer, t.classifier = copy.deepcopy(base.features), copy.deepcopy(base.head)
        t.grad_mean = tuple(gbar[n].clone() for n in head)
        return t
    def their_state(t):
        return {**{f"features.{k}": v for k, v in t.featurizer.state_dict().items()},
                **{f"head.{k}": v for k, v in t.classifier.state_dict().items()}}
    # fednbs: each client's gradient pass, then its step (one batch each: the order of each shuffle is given to theirs)
    algo = FedIIR(iir_penalty=penalty, iir_ema=ema).setup(Task(gs.small_cnn, list(data), 10, rounds=2, seed=seed, lr=lr,
                                                              momentum=0.9, weight_decay=0.0, batch_size=32))
    server = algo.init_server()
    server["model"] = {k: v.clone() for k, v in base.state_dict().items()}; server["iir_grad"] = {n: g.clone() for n, g in gbar.items()}
    ups, orders = {}, {}
    for i, (c, (xc, yc)) in enumerate(data.items()):
        torch.manual_seed(seed + 10 + i); orders[c] = (torch.randperm(32), torch.randperm(32))
        torch.manual_seed(seed + 10 + i)
        ups[c], _ = algo.local_update(algo.init_client(c), algo.broadcast(server, c, 0), ClientData(c, xc, yc, xc[:0], yc[:0]), 0)
    batch = lambda c, k: [(data[c][0][orders[c][k]], data[c][1][orders[c][k]])]
    out = []
    # the mean gradient: their pass over both clients (their global model in training mode), smoothed with beta
    theirs = their_algorithm()
    their_mean = theirs.mean_grad([(0, batch("a", 0)), (1, batch("b", 0))])
    server = algo.aggregate(server, ups, 0)
    out.append(row("fediir", "mean head gradient, smoothed (two clients)", gs.maxdiff(dict(zip(head, their_mean)), server["iir_grad"])))
    # one client's local step against the same mean gradient (their gradient pass left out: it is compared above)
    theirs = their_algorithm(); theirs.mean_grad = lambda clients: tuple(gbar[n].clone() for n in head)
    r = theirs.update([(0, batch("a", 1))], 1)
    mine = {k[6:]: v for k, v in ups["a"].items() if k.startswith("model/")}
    print(f"  (the step moved the weights by up to {gs.maxdiff(mine, base.state_dict()):.1e}; their penalty {r['penalty']:.3g})")
    out.append(row("fediir", "local step: every weight and BatchNorm entry", gs.maxdiff(mine, their_state(theirs))))
    # both clients' steps and their equal-weight mean
    theirs = their_algorithm(); theirs.mean_grad = lambda clients: tuple(gbar[n].clone() for n in head)
    theirs.update([(0, batch("a", 1)), (1, batch("b", 1))], 1)
    out.append(row("fediir", "server: equal-weight mean of the two trained models", gs.maxdiff(server["model"], their_state(theirs))))
    gs.drop_modules({"domainbed"}); sys.path.remove(str(repo))
    return out

# ------------------------------------------------------------------- FedGMA (inouye-lab/FedDG_Benchmark, Bai et al.)
def check_fedgma(seed: int, source=None) -> list:
    "FedGMA: their server step (`FedGMA.aggregate`, `ParamDict`) against `FedGMA.aggregate` on three clients' trained models."
    from collections import OrderedDict
    from numbers import Number
    import operator
    from fednbs.algorithm import Task
    from fednbs.data import ClientData
    from fednbs.invariance import FedGMA
    repo = checkout("fedgma", source)
    ns = dict(OrderedDict=OrderedDict, Number=Number, operator=operator, torch=torch, nn=nn, tqdm=lambda it, **kw: it,
              FedAvg=object)   # their server.py imports wandb, wilds and every model: only the two classes are executed
    exec(gs.between((repo / "src/utils.py").read_text(), "class ParamDict(OrderedDict):", "# class TransformSubset"), ns)
    exec(gs.between((repo / "src/server.py").read_text(), "class FedGMA(FedAvg):", "class ScaffoldServer(FedAvg):"), ns)
    x, y = gs.digits(48, seed)
    sizes = {"a": 16, "b": 24, "c": 8}
    torch.manual_seed(seed); base = gs.small_cnn()
    out = []
    for tau, label in ((0.1, "the benchmark's PACS value"), (0.6, "a threshold that masks")):
        algo = FedGMA(gma_threshold=tau).setup(Task(gs.small_cnn, list(sizes), 10, rounds=2, seed=seed, lr=0.05, batch_size=8))
        server = algo.init_server(); server["model"] = {k: v.clone() for k, v in base.state_dict().items()}
        ups, start = {}, 0
        for c, n in sizes.items():   # each client trains (FedAvg's local step) on its own images
            torch.manual_seed(seed + n)
            data = ClientData(c, x[start:start + n], y[start:start + n], x[:0], y[:0]); start += n
            ups[c], _ = algo.local_update(algo.init_client(c), algo.broadcast(server, c, 0), data, 0)
        theirs = ns["FedGMA"].__new__(ns["FedGMA"])
        theirs.hparam, theirs.model = {"hparam1": tau}, copy.deepcopy(base)
        theirs.clients = []
        for c in sizes:
            m = copy.deepcopy(base); m.load_state_dict({k[6:]: v for k, v in ups[c].items() if k.startswith("model/")})
            theirs.clients.append(SimpleNamespace(model=m))
        total = sum(sizes.values())
        theirs.aggregate([0, 1, 2], [n / total for n in sizes.values()])
        server = algo.aggregate(server, ups, 0)
        moved = gs.maxdiff(server["model"], base.state_dict())
        print(f"  (tau {tau}: the server step moved the weights by up to {moved:.1e})")
        out.append(row("fedgma", f"server step, tau = {tau} ({label})", gs.maxdiff(server["model"], theirs.model.state_dict())))
    return out

CHECKS = {"fedsr": check_fedsr, "fediir": check_fediir, "fedgma": check_fedgma}

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    for m in CHECKS: p.add_argument(f"--source-{m}", default=None)
    p.add_argument("--out", default=str(ra.HERE.parents[1] / "nbs" / "tutorials" / "fidelity_results" / "step_invariance.json"))
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    rows = [r for m, check in CHECKS.items() for r in check(a.seed, getattr(a, f"source_{m}"))]
    for r in rows: r["max_abs_diff"] = float(f"{r['max_abs_diff']:.3g}")
    Path(a.out).write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {len(rows)} rows to {Path(a.out).name}")

if __name__ == "__main__": main()
