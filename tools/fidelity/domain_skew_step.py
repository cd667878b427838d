"""One local step and one server step of FPL and FedHEAL: fednbs against the authors' code on the same weights and batches.

    python tools/fidelity/domain_skew_step.py [--seed S] [--fpl-source GIT] [--fedheal-source GIT] [--out DIR]

Four clients (two "domains": inputs shifted by domain), 16 images of 3x8x8 and 3 classes each, one batch per local
epoch; a small network with the authors' interface (`features`: conv-BN-ReLU-global pooling to an 8-d embedding,
`classifier`: one linear layer), the same initial weights on both sides.

FPL (WenkeHuang/RethinkFL): two rounds of `FPL._train_net` (SGD lr 0.01, momentum 0.9, weight decay 1e-5, one epoch),
`proto_aggregation` (their FINCH) and `aggregate_nets`; round 0 trains on cross-entropy, round 1 with the cluster
prototypes of round 0. Their loss value is `CE + sum_i hierarchical_info_loss / B` on the start weights (their functions,
summed as their loop sums). Also their `FINCH` against fednbs's `finch` on 300 random sets of 2-20 vectors.
FedHEAL (yuhangchen0/FedHEAL): three rounds (round 0 with empty histories, then random hand-set sign histories,
the same on both sides, so that the masks drop elements; the script prints the fraction kept) of `FedAvGHEAL.loc_update` (their local step with lr 0.001, momentum 0.9,
weight decay 1e-5; `consistency_mask`, `compute_distance`, `get_params_diff_weights`, `aggregate_nets_parameter`).

Prints the largest absolute difference of every quantity and writes them to
nbs/tutorials/fidelity_results/step_domain_skew.json. The repositories are cloned into a temporary folder outside the
project at the pinned commits; nothing of theirs is copied into the project. Run-time changes (listed in
tools/fidelity/README.md): `utils.args` (argparse helpers that import their dataset and model registries) is a stand-in holding only
`ArgumentParser`, and
`torchvision` (only a type annotation) is an empty stand-in module; the `models` and `utils` packages are entered
without running `models/__init__.py` (which imports every model file); FedHEAL's `self.increase_history = None` becomes
`{}` (the released code crashes in round 0 without it); in FPL's `hierarchical_info_loss`, `np.array(all_f)` and
`np.array(mean_f)` become a 1-d object array of the same tensors (what numpy < 1.24 built; newer numpy refuses).
"""
import argparse, contextlib, copy, io, json, os, sys, tempfile, types, warnings
from argparse import Namespace
from pathlib import Path
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, SubsetRandomSampler
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_authors as ra

PINS = {  # method -> (public repository, pinned commit)
    "fpl": ("https://github.com/WenkeHuang/RethinkFL", "74201b3762746e6328fdf5b8fc6cb8ecca768aef"),
    "fedheal": ("https://github.com/yuhangchen0/FedHEAL", "770e094b1f9b5158dc6a339654f16f7d80b96313"),
}
FEDHEAL_PATCHES = [("self.increase_history = None", "self.increase_history = {}")]
# numpy >= 1.24 refuses np.array() of differently shaped tensors; older numpy made the 1-d object array that the code indexes
OBJECT_ARRAY = "\ndef _object_array(items):\n    out = np.empty(len(items), dtype=object)\n    for i, v in enumerate(items): out[i] = v\n    return out\n"
FPL_PATCHES = [("import numpy as np\n", "import numpy as np\n" + OBJECT_ARRAY),
               ("f_pos = np.array(all_f)", "f_pos = _object_array(all_f)"),
               ("f_neg = torch.cat(list(np.array(all_f)", "f_neg = torch.cat(list(_object_array(all_f)"),
               ("mean_f_pos = np.array(mean_f)", "mean_f_pos = _object_array(mean_f)")]
K, N, C, B = 4, 16, 3, 16

def checkout(method: str, source: str|None, into: Path) -> Path:
    "Clone the authors' repository of `method` into `into` and check out the pinned commit."
    url, pin = PINS[method]
    dest = into / method
    ra.sh("git", "clone", "--quiet", source or url, str(dest))
    ra.sh("git", "checkout", "--quiet", "--detach", pin, cwd=dest)
    return dest

def enter(repo: Path, patches: dict = {}):
    "Import the authors' `models.utils.federated_model` and model files from `repo` (fresh `models`/`utils` packages)."
    for k in [k for k in sys.modules if k.split(".")[0] in ("models", "utils", "torchvision")]: del sys.modules[k]
    for name, path in (("models", repo / "models"), ("models.utils", repo / "models" / "utils"), ("utils", repo / "utils")):
        pkg = types.ModuleType(name); pkg.__path__ = [str(path)]; sys.modules[name] = pkg
    stand_in = types.ModuleType("utils.args"); stand_in.ArgumentParser = argparse.ArgumentParser; sys.modules["utils.args"] = stand_in
    tv = types.ModuleType("torchvision"); tv.transforms = None; sys.modules["torchvision"] = tv
    sys.path.insert(0, str(repo))
    return lambda rel, name: ra.load_patched(repo, rel, name, patches.get(rel, ()))

class Net(nn.Module):
    "The shared network in the authors' form: `features` (conv-BN-ReLU-pool to 8-d) and `classifier`."
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(8, C)
    def forward(self, x): return self.classifier(self.features(x))

def split_model():
    "The same network as a fednbs `SplitModel` (its head's last layer is the classifier)."
    from fednbs.models import SplitModel
    n = Net(); return SplitModel(n.features, nn.Sequential(n.classifier))

ours_key = lambda k: k.replace("classifier.", "head.0.")

def clients(seed: int):
    "K clients of N images (two domains: the second two clients' inputs are shifted), every class present."
    from fednbs.data import ClientData
    g = torch.Generator().manual_seed(seed); out = []
    for k in range(K):
        x = torch.randn(N, 3, 8, 8, generator=g) + (1.5 if k >= K // 2 else 0.0)
        y = torch.cat([torch.arange(C), torch.randint(0, C, (N - C,), generator=g)])
        out.append(ClientData(f"c{k}", x, y, x[:4], y[:4]))
    return out

def loaders(cl):
    "The authors' training loaders: one batch of all N images (their `sampler.indices` give the client sizes)."
    return [DataLoader(TensorDataset(c.x_train, c.y_train), batch_size=B, sampler=SubsetRandomSampler(np.arange(len(c.y_train)))) for c in cl]

def maxdiff(a, b) -> float: return float((torch.as_tensor(a).double() - torch.as_tensor(b).double()).abs().max())

def state_diff(ours: dict, theirs: dict) -> float:
    "Largest difference over the floating entries (BatchNorm's integer batch counter is not compared)."
    return max(maxdiff(ours[ours_key(k)], v) for k, v in theirs.items() if v.is_floating_point())

def ours_task(cl, lr, rounds):
    from fednbs.algorithm import Task
    return Task(split_model, [c.name for c in cl], C, rounds=rounds, lr=lr, momentum=0.9, weight_decay=1e-5, batch_size=B, local_epochs=1)

def run_fpl(repo: Path, seed: int, rows: list):
    from fednbs.domain_skew import FPL, finch, cluster_prototypes
    imp = enter(repo, {"models/fpl.py": FPL_PATCHES})
    imp("models/utils/federated_model.py", "models.utils.federated_model")
    finch_mod = imp("utils/finch.py", "utils.finch")
    fpl = imp("models/fpl.py", "models.fpl")
    cl = clients(seed)
    algo = FPL(); algo.setup(ours_task(cl, 0.01, 2))
    server = algo.init_server(); states = {c.name: algo.init_client(c.name) for c in cl}
    start = Net(); start.load_state_dict({k: server["model"][ours_key(k)] for k in start.state_dict()})
    args = Namespace(parti_num=K, online_ratio=1.0, device_id=0, local_epoch=1, local_lr=0.01, dataset="toy", structure="homogeneity",
                     infoNCET=0.02, averaing="weight")
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        theirs = fpl.FPL([copy.deepcopy(start) for _ in cl], args, None)
    theirs.device = torch.device("cpu"); theirs.ini(); theirs.trainloaders = loaders(cl); theirs.online_clients = list(range(K))
    for rnd in range(2):
        # the authors' loss on the start weights, as their loop sums it
        diffs, all_ups = {"loss": 0.0, "weights after the local step": 0.0, "local prototypes": 0.0}, {}
        for k, c in enumerate(cl):
            net = copy.deepcopy(theirs.nets_list[k]).train()
            f = net.features(c.x_train); lossCE = nn.functional.cross_entropy(net.classifier(f), c.y_train)
            if len(theirs.global_protos):
                keys = np.array(list(theirs.global_protos.keys()))
                all_f = [torch.cat(theirs.global_protos[q], 0).detach() for q in keys]
                mean_f = [a.mean(0).detach() for a in all_f]
                extra = sum(theirs.hierarchical_info_loss(f[i:i + 1], c.y_train[i], all_f, mean_f, keys) for i in range(N)) / N
            else: extra = 0.0
            their_loss = float((lossCE + extra).detach())
            with contextlib.redirect_stderr(io.StringIO()): theirs._train_net(k, theirs.nets_list[k], theirs.trainloaders[k])
            torch.manual_seed(seed)
            up, met = algo.local_update(states[c.name], algo.broadcast(server, c.name, rnd), c, rnd)
            diffs["loss"] = max(diffs["loss"], abs(met["loss"] - their_loss))
            diffs["weights after the local step"] = max(diffs["weights after the local step"],
                                                        state_diff({k2[6:]: v for k2, v in up.items() if k2.startswith("model/")}, theirs.nets_list[k].state_dict()))
            lp = theirs.local_protos[k]
            diffs["local prototypes"] = max(diffs["local prototypes"], max(maxdiff(up["proto/mean"][q], lp[q].detach().reshape(-1)) for q in lp))
            all_ups[c.name] = up
        with contextlib.redirect_stdout(io.StringIO()):
            theirs.global_protos = theirs.proto_aggregation(theirs.local_protos)
        theirs.aggregate_nets(None)
        server = algo.aggregate(server, all_ups, rnd)
        pd, count_ok = 0.0, True
        for q, plist in theirs.global_protos.items():
            mine = server["proto"]["clusters"][q][server["proto"]["mask"][q] > 0].double()
            t = torch.cat([p.reshape(1, -1) for p in plist]).double()
            count_ok &= len(mine) == len(t)
            if len(mine) == len(t): pd = max(pd, float(torch.cdist(t, mine).min(1).values.max()))
        tag = "round 0 (CE only)" if rnd == 0 else "round 1 (with cluster prototypes)"
        print(f"FPL {tag}: cluster prototypes per class {server['proto']['mask'].sum(1).int().tolist()}")
        for q, v in diffs.items(): rows.append(("FPL", f"{q}, {tag}", v))
        rows.append(("FPL", f"cluster prototypes (server), {tag}", pd if count_ok else float("inf")))
        rows.append(("FPL", f"global model (server), {tag}", state_diff(server["model"], theirs.global_net.state_dict())))
    # FINCH alone on random sets
    g = np.random.default_rng(seed); same, worst = 0, 0.0
    for t in range(300):
        n, d = int(g.integers(2, 21)), 8
        centers = g.normal(size=(int(g.integers(1, 5)), d))
        x = (centers[g.integers(0, len(centers), n)] + 0.3 * g.normal(size=(n, d))).astype(np.float32)
        with contextlib.redirect_stdout(io.StringIO()):
            c_, _, _ = finch_mod.FINCH(x, initial_rank=None, req_clust=None, distance="cosine", ensure_early_exit=False, verbose=False)
        ours = [p.numpy() for p in finch(torch.from_numpy(x))]
        canon = lambda lab: np.array([list(dict.fromkeys(lab.tolist())).index(v) for v in lab.tolist()])   # labels by first appearance
        ok = len(ours) == c_.shape[1] and all((canon(a) == canon(c_[:, i])).all() for i, a in enumerate(ours))
        same += ok
        mine = cluster_prototypes(torch.from_numpy(x)).double()
        lab = c_[:, -1]; theirs_p = torch.tensor(np.stack([x[lab == u].mean(0) for u in np.unique(lab)])).double()
        if len(mine) == len(theirs_p): worst = max(worst, float(torch.cdist(theirs_p, mine).min(1).values.max()))
        else: worst = float("inf")
    rows.append(("FPL", f"FINCH: sets with a different partition (of 300)", float(300 - same)))
    rows.append(("FPL", "FINCH: cluster prototypes over the 300 sets", worst))

def run_fedheal(repo: Path, seed: int, rows: list):
    import fednbs.domain_skew as ds
    imp = enter(repo)
    imp("models/utils/federated_model.py", "models.utils.federated_model")
    heal = ra.load_patched(repo, "models/fedavgheal.py", "models.fedavgheal", FEDHEAL_PATCHES)
    cl = clients(seed + 1)
    algo = ds.FedHEAL(); algo.setup(ours_task(cl, 0.001, 3))
    server = algo.init_server(); states = {c.name: algo.init_client(c.name) for c in cl}
    start = Net(); start.load_state_dict({k: server["model"][ours_key(k)] for k in start.state_dict()})
    args = Namespace(parti_num=K, online_ratio=1.0, device_id=0, local_epoch=1, local_lr=0.001, dataset="toy", structure="homogeneity",
                     beta=0.4, threshold=0.3, wHEAL=1, averaging="weight")
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        theirs = heal.FedAvGHEAL([copy.deepcopy(start) for _ in cl], args, None)
    theirs.device = torch.device("cpu"); theirs.ini(); theirs.trainloaders = loaders(cl)
    theirs.online_clients_sequence = {r: list(range(K)) for r in range(3)}
    record, orig = [], ds.heal_server_step
    ds.heal_server_step = lambda *a, **kw: record.append(orig(*a, **kw)) or record[-1]
    try:
        hist_gen = torch.Generator().manual_seed(seed)
        for rnd in range(3):
            theirs.epoch_index = rnd
            if rnd == 1:   # hand-set sign histories (multiples of 1/4), the same on both sides, so that the masks drop elements
                for k, c in enumerate(cl):
                    for key, v in theirs.increase_history[k].items():
                        if "num_batches" in key: continue
                        h = torch.randint(0, 5, v.shape, generator=hist_gen).float() / 4
                        theirs.increase_history[k][key] = h.clone(); server["heal"]["history"][c.name][ours_key(key)] = h.clone()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()): theirs.loc_update(theirs.trainloaders)
            ups = {}
            for k, c in enumerate(cl):
                torch.manual_seed(seed)
                ups[c.name], _ = algo.local_update(states[c.name], algo.broadcast(server, c.name, rnd), c, rnd)
            g_ours = {key: v.clone() for key, v in server["model"].items()}
            server = algo.aggregate(server, ups, rnd)
            new, info = record[-1]
            g_before = {k: v for k, v in theirs.global_net.state_dict().items()}
            m = max(maxdiff(info["mask"][c.name][ours_key(key)], theirs.mask_dict[k][key]) for k, c in enumerate(cl)
                    for key in theirs.mask_dict[k] if theirs.mask_dict[k][key].is_floating_point() and "num_batches" not in key)
            du = max(maxdiff((g_ours[ours_key(key)] - unpack_model(ups[c.name])[ours_key(key)]) * info["mask"][c.name][ours_key(key)],
                             theirs.client_update[k][key]) for k, c in enumerate(cl) for key in theirs.client_update[k] if "num_batches" not in key)
            dd = max(abs(info["distance"][c.name] - theirs.euclidean_distance[k]) for k, c in enumerate(cl))
            p_ours = {c.name: server["heal"]["raw"][c.name] / sum(server["heal"]["raw"].values()) for c in cl}
            p_theirs = {k: theirs.previous_weights[k] / sum(theirs.previous_weights.values()) for k in range(K)}
            dp = max(abs(p_ours[c.name] - p_theirs[k]) for k, c in enumerate(cl))
            tag = f"round {rnd}"
            kept = torch.cat([v.flatten() for c in cl for k2, v in info["mask"][c.name].items()]).mean()
            print(f"FedHEAL {tag}: fraction of update elements kept by the masks {float(kept):.3f}")
            rows += [("FedHEAL", f"masked updates θ_g − θ_k after the local step, {tag}", du), ("FedHEAL", f"consistency masks, {tag}", m),
                     ("FedHEAL", f"distances d_k, {tag}", dd), ("FedHEAL", f"weights p_k, {tag}", dp),
                     ("FedHEAL", f"global model (server), {tag}", state_diff(server["model"], g_before))]
    finally:
        ds.heal_server_step = orig

def unpack_model(up: dict) -> dict: return {k[6:]: v for k, v in up.items() if k.startswith("model/")}

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fpl-source", default=None, help="clone RethinkFL from here instead of GitHub (a local mirror)")
    p.add_argument("--fedheal-source", default=None, help="clone FedHEAL from here instead of GitHub (a local mirror)")
    p.add_argument("--out", default=str(ra.HERE.parents[1] / "nbs" / "tutorials" / "fidelity_results"))
    a = p.parse_args(argv)
    torch.set_num_threads(1); torch.manual_seed(a.seed)
    warnings.filterwarnings("ignore", message="pynndescent not installed")   # their FINCH's optional nearest-neighbour index (not used below 70000 points)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        run_fpl(checkout("fpl", a.fpl_source, Path(tmp)), a.seed, rows)
        run_fedheal(checkout("fedheal", a.fedheal_source, Path(tmp)), a.seed, rows)
    for m, q, v in rows: print(f"{m:8} {q:60} max |diff| {v:.1e}")
    out = Path(a.out) / "step_domain_skew.json"
    out.write_text(json.dumps({"command": "python tools/fidelity/domain_skew_step.py" + (f" --seed {a.seed}" if a.seed else ""),
                               "commits": {m: {"repository": u, "commit": c} for m, (u, c) in PINS.items()},
                               "rows": [{"method": m, "quantity": q, "max_abs_diff": v} for m, q, v in rows]}, indent=1) + "\n")
    print("written", out.relative_to(ra.HERE.parents[1]) if out.is_relative_to(ra.HERE.parents[1]) else out)

if __name__ == "__main__": main()
