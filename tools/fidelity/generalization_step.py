"""One local step and one server step of FedRep, FedFA and FedDG-GA: the authors' code and fednbs on the same weights and inputs.

    python tools/fidelity/generalization_step.py [--seed S] [--source-fedrep GIT] [--source-fedfa GIT] [--source-feddg-ga GIT]

Each authors' repository is cloned into the cache folder of `run_authors.py` (outside the project,
FEDNBS_FIDELITY_CACHE, default ~/.cache/fednbs-fidelity), and the files this check reads are written there from the
pinned commit below (the large data files some of them hold are never checked out); nothing of it is copied into
this project. `--source-*` clones from another place (a local mirror) instead of GitHub. Every change
needed to run their code is made at run time by this file and listed in tools/fidelity/README.md. Writes
nbs/tutorials/fidelity_results/step_generalization.json: a list of {method, quantity, max_abs_diff, authors_commit}.
"""
import argparse, copy, json, sys, textwrap, types
from pathlib import Path
from types import SimpleNamespace
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_authors as ra

PINS = {  # method -> (public repository, pinned commit)
    "fedrep": ("https://github.com/lgcollins/FedRep", "d82e62982e107bb3322541604f059c0ff28bd289"),
    "fedfa": ("https://github.com/tfzhou/FedFA", "57e95822e4df90a77cfa9402d03f09e094be9094"),
    "feddg_ga": ("https://github.com/MediaBrain-SJTU/FedDG-GA", "8d03a24a2af2155dc0b8978afacfdb659146bf62"),
}
FILES = {  # method -> the files of the pinned commit that this check reads
    "fedrep": ["models", "FedProx.py", "comm_helpers.py", "main_fedrep.py"],
    "fedfa": ["pyfed/utils/ffa_layer.py", "pyfed/manager/comm.py"],
    "feddg_ga": ["utils", "network", "configs"],
}

def checkout(method: str, source: str|None = None) -> Path:
    "Clone the authors' repository of `method` into run_authors.py's cache (once, no work tree) and write the pinned commit's `FILES` there."
    url, pin = PINS[method]
    dest = ra.CACHE / method
    if not (dest / ".git").exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        ra.sh("git", "clone", "--quiet", "--no-checkout", source or url, str(dest))
    ra.sh("git", "checkout", "--quiet", pin, "--", *FILES[method], cwd=dest)   # exactly the authors' files at the pin
    return dest

def maxdiff(a, b) -> float:
    "Largest absolute difference of two tensors, or of two dicts of tensors over their common float entries."
    if isinstance(a, dict):
        return max((maxdiff(a[k], b[k]) for k in a if k in b and torch.is_tensor(a[k]) and a[k].is_floating_point()), default=0.0)
    return float((torch.as_tensor(a).double() - torch.as_tensor(b).double()).abs().max())

def row(method, quantity, d):
    print(f"  {method:9s} {quantity:58s} max |diff| {d:.1e}")
    return {"method": method, "quantity": quantity, "max_abs_diff": d, "authors_commit": PINS[method][1]}

def digits(n: int, seed: int):
    "The first `n` training images and labels of the offline benchmark's first client (14 px, from scikit-learn's digits)."
    from fednbs.data import DATASETS
    c = DATASETS["skdigits"](size=14, font_images=100, seed=seed).clients[0]
    return c.x_train[:n], c.y_train[:n]

def small_cnn():
    from fednbs.models import SmallCNN
    return SmallCNN(10, (3, 14, 14), width=8)

def drop_modules(prefixes):
    "Forget already imported modules named `prefixes` (the three repositories share package names such as `utils`)."
    for name in list(sys.modules):
        if name.split(".")[0] in prefixes: del sys.modules[name]

# --------------------------------------------------------------------------------------------------------------------
_FEDREP_TRAIN = "    def train(self, net, w_glob_keys, last=False, dataset_test=None, ind=-1, idx=-1, lr=0.1):\n"
_FEDREP_OPT = ("        bias_p=[]\n        weight_p=[]\n        for name, p in net.named_parameters():\n            if 'bias' in name:\n"
               "                bias_p += [p]\n            else:\n                weight_p += [p]\n        optimizer = torch.optim.SGD(\n"
               "        [     \n            {'params': weight_p, 'weight_decay':")
FEDREP_PATCHES = [  # (exact text of models/Update.py, what it becomes); each must occur exactly once
    (_FEDREP_TRAIN + _FEDREP_OPT + "0.0001},", _FEDREP_TRAIN + _FEDREP_OPT + "0.0},"),   # LocalUpdate.train: no weight decay
]
FEDREP_SERVER = ("            if len(w_glob) == 0:\n", "            times_in.append( time.time() - start_in )\n")   # main_fedrep.py: one client's share
FEDREP_DIVIDE = ("        for k in net_glob.state_dict().keys():\n            w_glob[k] = torch.div(w_glob[k], total_len)\n")

def between(src: str, start: str, end: str) -> str:
    "The text of `src` from `start` up to `end` (each occurring exactly once), dedented."
    assert src.count(start) == 1 and src.count(end) == 1, (start, end)
    i = src.index(start); return textwrap.dedent(src[i:src.index(end, i)])

def check_fedrep(seed: int, source=None) -> list:
    "FedRep: one round of local updates (1 head epoch, then 1 body epoch), the final head fit, and the body average."
    from fednbs.algorithm import Task
    from fednbs.personalized import FedRep, part_names
    repo = checkout("fedrep", source)
    drop_modules({"models", "utils", "FedProx", "comm_helpers"}); sys.path.insert(0, str(repo))
    stand_in = types.ModuleType("models.test"); stand_in.test_img_local = None   # models/test.py does not compile on Python 3.11
    sys.modules["models.test"] = stand_in
    ra.load_patched(repo, "models/Update.py", "models.Update", FEDREP_PATCHES)
    Update = sys.modules["models.Update"]
    main_src = (repo / "main_fedrep.py").read_text()
    x, y = digits(32, seed)
    torch.manual_seed(seed); base = small_cnn()
    head = part_names(base, "last"); body = [n for n, _ in base.named_parameters() if n not in head]
    out = []
    for last in (False, True):
        theirs = copy.deepcopy(base)
        args = SimpleNamespace(local_ep=2, local_rep_ep=1, alg="fedrep", dataset="cifar10", local_bs=32, device="cpu",
                               local_updates=10 ** 9)
        local = Update.LocalUpdate(args=args, dataset=TensorDataset(x, y), idxs=range(len(y)))
        sd_theirs, _, _ = local.train(net=theirs, w_glob_keys=body, lr=0.01, last=last)
        algo = FedRep(final_head_epochs=10).setup(Task(small_cnn, ["c0"], 10, rounds=2, lr=0.01, momentum=0.5, weight_decay=0.0,
                                                       batch_size=32))
        state = {"local": {k: v.clone() for k, v in base.state_dict().items() if k in head}}
        msg = {f"model/{k}": v.clone() for k, v in base.state_dict().items() if k not in head}
        from fednbs.data import ClientData
        client = ClientData("c0", x, y, x[:0], y[:0])
        if last:   # the authors' final round: fednbs's final head fit at the last evaluation (the state is left as it was)
            ours = algo.final_head(state, msg, client, 1).state_dict()
        else:
            up, _ = algo.local_update(state, msg, client, 0)
            ours = {**{k[6:]: v for k, v in up.items() if k.startswith("model/")}, **state["local"]}
        what = "final round: 10 head epochs" if last else "local update: 1 head epoch, then 1 body epoch"
        out.append(row("fedrep", f"{what}: body", maxdiff({k: ours[k] for k in body}, {k: sd_theirs[k] for k in body})))
        out.append(row("fedrep", f"{what}: head", maxdiff({k: ours[k] for k in head}, {k: sd_theirs[k] for k in head})))
    # the server: three clients' trained states averaged by sample count, their loop's lines against FedAvg's aggregate
    torch.manual_seed(seed + 1)
    states = [{k: v + 0.1 * torch.randn_like(v) if v.is_floating_point() else v for k, v in base.state_dict().items()} for _ in range(3)]
    lens = {0: 30.0, 1: 12.0, 2: 50.0}
    ns = dict(w_glob={}, lens=lens, net_glob=base, w_glob_keys=body, w_locals={i: {} for i in lens}, copy=copy, torch=torch, time=__import__("time"),
              start_in=0.0, times_in=[], total_len=0)
    share = between(main_src, *FEDREP_SERVER)
    for idx, sd in enumerate(states):
        ns.update(idx=idx, w_local=sd); ns["total_len"] += lens[idx]
        exec(share, ns)
    exec(textwrap.dedent(FEDREP_DIVIDE), ns)
    assert main_src.count(FEDREP_DIVIDE) == 1
    algo = FedRep().setup(Task(small_cnn, ["c0", "c1", "c2"], 10, rounds=2))
    server = algo.init_server()
    ups = {f"c{i}": {**{f"model/{k}": v for k, v in sd.items() if k not in head}, "num_samples": torch.tensor(lens[i])} for i, sd in enumerate(states)}
    server = algo.aggregate(server, ups, 0)
    shared = [k for k in base.state_dict() if k not in head]
    out.append(row("fedrep", "server: sample-weighted body average", maxdiff({k: server["model"][k] for k in shared}, {k: ns["w_glob"][k] for k in shared})))
    drop_modules({"models", "utils", "FedProx", "comm_helpers"}); sys.path.remove(str(repo))
    return out

# --------------------------------------------------------------------------------------------------------------------
FFA_NAMES = {"running_mean": "running_mean_bmic", "running_std": "running_std_bmic", "var_mean": "running_var_mean_bmic",
             "var_std": "running_var_std_bmic"}

def ffa_net(make_ffa):
    "A small conv net with an augmentation layer after each of its two conv blocks (the layer built by `make_ffa(channels)`)."
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), make_ffa(8),
                         nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), make_ffa(8),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))

def to_theirs(sd: dict) -> dict:
    "A state dict of the fednbs net with its FFA buffers renamed as the authors' layer names them."
    out = {}
    for k, v in sd.items():
        mod, _, leaf = k.rpartition(".")
        out[f"{mod}.{FFA_NAMES[leaf]}" if leaf in FFA_NAMES and mod in ("3", "7") else k] = v
    return out

def tname(k: str) -> str: return next(iter(to_theirs({k: 0})))   # the authors' name of entry `k`

def check_fedfa(seed: int, source=None) -> list:
    "FedFA: the FFA layers' forward and one SGD step through them; the server's average and (per-layer) variance."
    from fednbs.generalization import FFA
    from fednbs.aggregation import average_model_states
    repo = checkout("fedfa", source)
    ffa_mod = ra.load_patched(repo, "pyfed/utils/ffa_layer.py", "fedfa_ffa_layer")
    comm_mod = ra.load_patched(repo, "pyfed/manager/comm.py", "fedfa_comm")
    x, y = digits(16, seed)
    torch.manual_seed(seed)
    ours = ffa_net(lambda c: FFA(c, p=1.0, server_var="layer"))
    with torch.no_grad():   # server variances as after some rounds, different per channel
        for i in (3, 7): ours[i].var_mean.uniform_(0.01, 2.0); ours[i].var_std.uniform_(0.01, 2.0); ours[i].running_mean.normal_()
    theirs = ffa_net(lambda c: ffa_mod.FFALayer(prob=1.0, nfeat=c))
    theirs.load_state_dict(to_theirs(ours.state_dict()))
    base_sd = copy.deepcopy(ours.state_dict())
    res = {}
    for name, m in (("fednbs", ours), ("authors", theirs)):
        m.train(); opt = torch.optim.SGD(m.parameters(), lr=0.01)
        torch.manual_seed(seed + 10); z = m(x); loss = F.cross_entropy(z, y)
        opt.zero_grad(); loss.backward(); opt.step()
        res[name] = (z.detach(), loss.item(), m.state_dict())
    (zo, lo, so), (zt, lt, st) = res["fednbs"], res["authors"]
    plain = ffa_net(lambda c: nn.Identity()); plain.load_state_dict({k: v for k, v in base_sd.items() if k.rpartition(".")[0] not in ("3", "7")})
    assert (plain.train()(x) - zo).abs().max() > 1e-3, "the FFA layers did not augment: the check would compare nothing"
    stats = [k for k in so if k.rpartition(".")[0] in ("3", "7")]
    out = [row("fedfa", "local step: training logits through 2 FFA layers (p = 1)", maxdiff(zo, zt)),
           row("fedfa", "local step: loss", abs(lo - lt)),
           row("fedfa", "local step: weights and BatchNorm statistics after one SGD step",
               maxdiff({k: so[k] for k in so if k not in stats}, {k: st[tname(k)] for k in so if k not in stats})),
           row("fedfa", "local step: FFA running statistics", maxdiff({k: so[k] for k in stats}, {k: st[tname(k)] for k in stats}))]
    # the server: three clients (perturbed weights, their own running statistics), uniform weights
    torch.manual_seed(seed + 2)
    clients = []
    for _ in range(3):
        sd = {k: (v + 0.1 * torch.randn_like(v)) if v.is_floating_point() else v.clone() for k, v in ours.state_dict().items()}
        clients.append(sd)
    avg = average_model_states(ours, clients, [1 / 3] * 3)
    t_clients = []
    for sd in clients:
        m = ffa_net(lambda c: ffa_mod.FFALayer(prob=1.0, nfeat=c)); m.load_state_dict(to_theirs(sd)); t_clients.append(m)
    server = ffa_net(lambda c: ffa_mod.FFALayer(prob=1.0, nfeat=c))
    server = comm_mod.Comm(comm_type="FedFA")(t_clients, [1 / 3] * 3, server) or server
    ts = server.state_dict()
    var_keys = [k for k in avg if k.endswith(("var_mean", "var_std"))]
    out.append(row("fedfa", "server: averaged entries", maxdiff({k: avg[k] for k in avg if k not in var_keys},
                                                                {k: ts[tname(k)] for k in avg if k not in var_keys})))
    out.append(row("fedfa", "server: variances (ffa_var='layer', the authors' rule)", maxdiff({k: avg[k] for k in var_keys},
                                                                                          {k: ts[tname(k)] for k in var_keys})))
    for m in (3, 7): ours[m].server_var = "channel"
    per_channel = average_model_states(ours, clients, [1 / 3] * 3)
    print(f"  (by design, not a fidelity row) per-channel default against the authors' per-layer variance: "
          f"max |diff| {maxdiff({k: per_channel[k] for k in var_keys}, {k: ts[tname(k)] for k in var_keys}):.1e}")
    return out

# --------------------------------------------------------------------------------------------------------------------
class _NoLog:
    def add_scalar(self, *a, **k): pass
    def info(self, *a, **k): pass

def check_feddg_ga(seed: int, source=None) -> list:
    "FedDG-GA: one local epoch and the validation scores; the weight update from fixed before/after metrics and the weighted average."
    from fednbs.algorithm import Task
    from fednbs.data import ClientData
    from fednbs.aggregation import average_model_states
    from fednbs.generalization import FedDGGA, ga_adjust, ga_step_size
    repo = checkout("feddg_ga", source)
    drop_modules({"utils", "network", "configs", "data"}); sys.path.insert(0, str(repo))
    cuda = torch.Tensor.cuda
    torch.Tensor.cuda = lambda self, *a, **k: self          # their loops call .cuda() on every batch: stay on the CPU
    try:
        import utils.trainval_func as TV, utils.weight_adjust as WA, utils.fed_merge as FM, utils.classification_metric as CM
        x, y = digits(48, seed); xt, yt, xv, yv = x[:32], y[:32], x[32:], y[32:]
        torch.manual_seed(seed); base = small_cnn()
        # local: one epoch of one batch with their optimiser, then the validation loss and accuracy of the trained model
        theirs = copy.deepcopy(base)
        opt = torch.optim.SGD(theirs.parameters(), lr=0.001, momentum=0.9, weight_decay=5e-4)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.1)
        args = SimpleNamespace(local_epochs=1)
        loader = lambda a, b, **k: DataLoader(TensorDataset(a, b, torch.zeros_like(b)), batch_size=32, **k)
        TV.site_train(0, "a", args, theirs, opt, sched, loader(xt, yt, shuffle=True), _NoLog(), CM.Classification())
        before = TV.site_evaluation(0, "a", args, theirs, loader(xv, yv), _NoLog(), _NoLog(), CM.Classification())
        algo = FedDGGA().setup(Task(small_cnn, ["a"], 10, rounds=2, lr=0.001, momentum=0.9, weight_decay=5e-4, batch_size=32))
        state = algo.init_client("a")
        up, _ = algo.local_update(state, {f"model/{k}": v.clone() for k, v in base.state_dict().items()},
                                  ClientData("a", xt, yt, xt[:0], yt[:0], xv, yv), 0)
        ours = {k[6:]: v for k, v in up.items() if k.startswith("model/")}
        out = [row("feddg_ga", "local epoch (SGD lr 0.001, momentum 0.9, wd 5e-4): weights", maxdiff(ours, theirs.state_dict())),
               row("feddg_ga", "validation loss of the trained local model", abs(float(up["ga_before"]) - before["loss"]))]
        # server: fixed before/after metrics for K = 3, both gap metrics, a step of their schedule; then the weighted average
        comm = 40
        for metric, bef, aft in (("loss", {"p": 0.9, "a": 1.1, "c": 0.7}, {"p": 1.3, "a": 1.15, "c": 0.6}),
                                 ("acc", {"p": 0.62, "a": 0.55, "c": 0.71}, {"p": 0.58, "a": 0.56, "c": 0.66})):
            for i in (0, 7, 40):
                w0 = {"p": 0.30, "a": 0.25, "c": 0.45}
                step = 0.2 - (i - 1) * (0.2 / comm)                  # the step their loop passes in round i
                want = WA.refine_weight_dict_by_GA(dict(w0), {k: {metric: v} for k, v in bef.items()},
                                                   {k: {metric: v} for k, v in aft.items()}, step, fair_metric=metric)
                got = ga_adjust(w0, bef, aft, ga_step_size(0.2, i, comm + 1), metric, None)
                out.append(row("feddg_ga", f"server: weights, {metric} gap, round {i} of {comm}", max(abs(got[k] - want[k]) for k in w0)))
        torch.manual_seed(seed + 3)
        models = {k: copy.deepcopy(base) for k in ("p", "a", "c")}
        with torch.no_grad():
            for m in models.values():
                for p in m.parameters(): p.add_(0.1 * torch.randn_like(p))
        w = {"p": 0.2, "a": 0.5, "c": 0.3}
        glob = copy.deepcopy(base); FM.FedAvg(models, w, glob)
        algo = FedDGGA().setup(Task(small_cnn, list(w), 10, rounds=2))
        server = algo.init_server(); server["ga_weights"] = dict(w)
        ups = {k: {**{f"model/{n}": v for n, v in m.state_dict().items()}, "num_samples": torch.tensor(1.0), "ga_before": torch.tensor(0.0)}
               for k, m in models.items()}
        server = algo.aggregate(server, ups, 0)
        out.append(row("feddg_ga", "server: model averaged with the weights p", maxdiff(server["model"], glob.state_dict())))
        return out
    finally:
        torch.Tensor.cuda = cuda
        drop_modules({"utils", "network", "configs", "data"}); sys.path.remove(str(repo))

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--source-fedrep", default=None); p.add_argument("--source-fedfa", default=None); p.add_argument("--source-feddg-ga", default=None)
    p.add_argument("--out", default=str(ra.HERE.parents[1] / "nbs" / "tutorials" / "fidelity_results" / "step_generalization.json"))
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    rows = check_fedrep(a.seed, a.source_fedrep) + check_fedfa(a.seed, a.source_fedfa) + check_feddg_ga(a.seed, a.source_feddg_ga)
    for r in rows: r["max_abs_diff"] = float(f"{r['max_abs_diff']:.3g}")
    Path(a.out).write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {len(rows)} rows to {a.out}")

if __name__ == "__main__": main()
