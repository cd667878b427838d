"""Run the authors' public code and fednbs on the same clients, seeds and settings; write per-round test accuracy per client.

    python tools/fidelity/run_authors.py SETTING SIDE --seed S [--rounds R] [--source GIT] [--out DIR]

SETTING is one of SETTINGS below, SIDE is `authors` or `fednbs`. The authors' repository is cloned into a cache folder
outside the project (FEDNBS_FIDELITY_CACHE, default ~/.cache/fednbs-fidelity) and checked out at the pinned commit;
nothing of it is copied into this project. Every change needed to run it is made at run time by this file and listed
in tools/fidelity/README.md.
"""
import argparse, contextlib, copy, csv, io, json, os, re, subprocess, sys, tempfile, time, types
from collections import OrderedDict
from pathlib import Path
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

HERE = Path(__file__).resolve().parent
DATA_DIR = os.environ.get("FEDNBS_DATA_DIR", str(HERE.parents[1].parent / "shared" / "data"))   # or --data-dir
CACHE = Path(os.environ.get("FEDNBS_FIDELITY_CACHE", Path.home() / ".cache" / "fednbs-fidelity"))

PINS = {  # method -> (public repository, pinned commit)
    "fedbn": ("https://github.com/med-air/FedBN", "2fa38adf627a8c8ba71c5fb515b1f2ba00aa8812"),
    "fraug": ("https://github.com/HaokunChen245/FRAug", "816e8beceffc607a5aea4ad61c09c3ef7a6df9aa"),
}

# One setting = the data (a fednbs dataset, its options, a cap on each client's test split), the model and the
# hyper-parameters, given once and used by both sides.
COMMON = dict(model="cnn", model_width=32)
SETTINGS = {
    "fedbn-digits3": dict(method="fedbn", data="digits3", options=dict(budget=256), test_cap=300, rounds=30,
                          lr=0.01, batch_size=32, momentum=0.0, local_epochs=1),
    "fraug-digits3": dict(method="fraug", data="digits3", options=dict(budget=256), test_cap=300, rounds=30,
                          lr=0.01, batch_size=32, momentum=0.5, local_iters=8, gen_lr=0.05, rt_lr=0.05, alpha=1.0, beta=1.0,
                          latent_dim=64, gamma=0.002),
}

def sh(*cmd, cwd=None) -> str: return subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()

def checkout(method: str, source: str|None = None) -> Path:
    "Clone the authors' repository of `method` into the cache (once) and check out its pinned commit."
    url, pin = PINS[method]
    dest = CACHE / method
    if not (dest / ".git").exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        sh("git", "clone", "--quiet", source or url, str(dest))
    sh("git", "checkout", "--quiet", "--detach", pin, cwd=dest)
    sh("git", "reset", "--quiet", "--hard", pin, cwd=dest)          # the checkout stays exactly the authors' files
    return dest

def partition_file(setting: str, seed: int, out: Path) -> Path:
    "The clients of `setting` at `seed` as a fednbs partition file (each client's test split capped at `test_cap`)."
    from fednbs.datasets import load_dataset
    s = SETTINGS[setting]
    p = out / f"partition_{setting}_seed{seed}.json"
    if p.exists(): return p
    fd = load_dataset(s["data"], data_dir=DATA_DIR, seed=seed, **s["options"])
    part = fd.partition
    for c in part.names:
        te = part.clients[c]["test"]
        part.clients[c]["test"] = np.asarray(te[: s["test_cap"]], np.int64)   # the split's order is already shuffled
    part.save(p)
    return p

def load_clients(setting: str, seed: int, out: Path):
    "fednbs's `FederatedData` for `setting`: the very tensors both sides train and test on."
    from fednbs.datasets import load_dataset
    s = SETTINGS[setting]
    opts = {k: v for k, v in s["options"].items() if k not in ("budget", "percent")}
    return load_dataset(s["data"], data_dir=DATA_DIR, seed=seed, partition_file=str(partition_file(setting, seed, out)), **opts)

def fednbs_model(fd):
    "The small CNN both sides train (fednbs's `cnn`)."
    from fednbs.models import SmallCNN
    return SmallCNN(fd.num_classes, tuple(fd.clients[0].x_train.shape[1:]), width=COMMON["model_width"])

class AuthorsNet(nn.Module):
    "fednbs's `cnn` with the module names the authors' code keys on: BatchNorm layers named `bn*`, the last layer `classifier`."
    def __init__(self, split_model):
        super().__init__()
        layers = list(split_model.features) + list(split_model.head)[:-1]
        self.features = nn.Sequential(OrderedDict(
            (f"bn{i}" if isinstance(m, nn.modules.batchnorm._BatchNorm) else f"layer{i}", m) for i, m in enumerate(layers)))
        self.classifier = list(split_model.head)[-1]
        self.feature_dim = self.classifier.in_features
    def forward(self, x): return self.classifier(self.features(x))

def write_rows(path: Path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f); w.writerow(["impl", "setting", "seed", "round", "client", "test_acc"])
        for r in rows: w.writerow(r)

# ----------------------------------------------------------------------------------------------- FedBN (med-air/FedBN)
FEDBN_PATCHES = [  # (exact text of federated/fed_digits.py, what it becomes); each must occur exactly once
    ("    seed= 1\n", "    seed= _FIDELITY['seed']\n"),
    ("train_loaders, test_loaders = prepare_data(args)", "train_loaders, test_loaders = _FIDELITY['loaders'](args)"),
    ("datasets = ['MNIST', 'SVHN', 'USPS', 'SynthDigits', 'MNIST-M']", "datasets = _FIDELITY['names']"),
    ("server_model = DigitModel().to(device)", "server_model = _FIDELITY['model']().to(device)"),
    ("            'model_3': models[3].state_dict(),\n            'model_4': models[4].state_dict(),\n", ""),
]

def run_fedbn_authors(setting: str, seed: int, rounds: int, out: Path, source=None):
    "Run the authors' `federated/fed_digits.py` main block on our clients; parse its per-round test log."
    s = SETTINGS[setting]; repo = checkout("fedbn", source)
    fd = load_clients(setting, seed, out)
    names = [c.name for c in fd.clients]
    def loaders(args):
        tr = [DataLoader(TensorDataset(c.x_train, c.y_train), batch_size=args.batch, shuffle=True) for c in fd.clients]
        te = [DataLoader(TensorDataset(c.x_test, c.y_test), batch_size=args.batch, shuffle=False) for c in fd.clients]
        return tr, te
    src = (repo / "federated" / "fed_digits.py").read_text()
    for old, new in FEDBN_PATCHES:
        assert src.count(old) == 1, f"the pinned fed_digits.py no longer holds {old!r}"
        src = src.replace(old, new)
    sys.path[:0] = [str(repo)]
    glb = {"__name__": "__main__", "__file__": str(repo / "federated" / "fed_digits.py"),
           "_FIDELITY": dict(seed=seed, loaders=loaders, names=names, model=lambda: AuthorsNet(fednbs_model(fd)))}
    log = io.StringIO()
    with tempfile.TemporaryDirectory() as tmp:
        argv, cwd = sys.argv, os.getcwd()
        sys.argv = ["fed_digits.py", "--mode", "fedbn", "--iters", str(rounds), "--wk_iters", str(s["local_epochs"]),
                    "--lr", str(s["lr"]), "--batch", str(s["batch_size"]), "--save_path", tmp]
        os.chdir(tmp)
        try:
            with contextlib.redirect_stdout(log): exec(compile(src, glb["__file__"], "exec"), glb)
        finally: sys.argv = argv; os.chdir(cwd)
    accs = [(m.group(1).strip(), float(m.group(2))) for m in re.finditer(r"^ (\S+)\s*\| Test  Loss: \S+ \| Test  Acc: (\S+)$", log.getvalue(), re.M)]
    assert len(accs) == rounds * len(names), f"expected {rounds * len(names)} test lines, parsed {len(accs)}"
    return [("authors", setting, seed, i // len(names) + 1, n, a) for i, (n, a) in enumerate(accs)]

# ----------------------------------------------------------------------------------------- FRAug (HaokunChen245/FRAug)
def _stub_modules(record):
    "Stand-ins for `ray`/`ray.tune` (tune.report records the metrics) and for the `datasets` package (unused here)."
    ray = types.ModuleType("ray"); tune = types.ModuleType("ray.tune")
    tune.report = lambda **kw: record.append(dict(kw)); tune.grid_search = lambda v: v[0]
    ray.tune = tune; ray.init = lambda *a, **k: None
    ds = types.ModuleType("datasets")
    for n in ("PACS", "Digits", "VLCS", "OfficeHome", "miniDomainNet", "DomainNet_FedBN"): setattr(ds, n, None)
    sys.modules.update({"ray": ray, "ray.tune": tune, "datasets": ds})

def fraug_config(s: dict, rounds: int, seed: int, names, model_path: str) -> dict:
    "The authors' Digits configuration (main.py), with the budget of `s`."
    return dict(device="cpu", dataset="Digits", num_users=-1, global_epochs=rounds, local_epochs=s["local_iters"],
                class_names=None, class_num=10, source_domains=names, img_size=None, lr=s["lr"], optimizer="SGD",
                local_momentum=s["momentum"], algorithm="FRAug", cls_mean_momentum=0.3, steps_using_G=1, start_add_G=0,
                use_G=True, use_FTNet=True, user_per_domain=1, model_share="no_bn_running_stats", model_share_G="all",
                use_homo_label_aug=2, cls_criterion_type_FT="entropy", use_feature_inter=False, model="CNN_Digits",
                batch_size=s["batch_size"], portion=1.0, lr_G=s["gen_lr"], lr_FTNet=s["rt_lr"], L_G_dist_lambda=s["alpha"],
                L_FT_dist_lambda=s["beta"], FTNet_with_BN=True, FTNet_with_cls=True, seed=seed, inter_gamma=s["gamma"],
                inter_form="exp", distance_metric_G="L2", distance_metric_FT="MMD_kernel", latent_dim=s["latent_dim"],
                model_path=model_path)

def run_fraug_authors(setting: str, seed: int, rounds: int, out: Path, source=None):
    "Run the authors' FRAug server and users on our clients; record each client's test accuracy after every round."
    s = SETTINGS[setting]; repo = checkout("fraug", source)
    fd = load_clients(setting, seed, out)
    names = [c.name for c in fd.clients]
    record = []; _stub_modules(record)
    sys.path[:0] = [str(repo)]
    from users.user_base import User
    from servers.server_FRAug import FRAug
    from utils.main_utils import setup_seed
    def prepare_data_loader(self, config, id):         # our clients in place of the authors' dataset classes
        c = fd.clients[id]
        xtr, ytr = c.x_train, c.y_train
        self.train_loader = DataLoader(AugmentedTensors(xtr, ytr, fd.augment), batch_size=config["batch_size"], shuffle=True)
        self.val_loader = DataLoader(TensorDataset(c.x_test, c.y_test), batch_size=256)
        self.num_train_samples = len(ytr)
        self.iter_trainloader = iter(self.train_loader)
    User.prepare_data_loader = prepare_data_loader
    with tempfile.TemporaryDirectory() as tmp:
        setup_seed(seed)
        cfg = fraug_config(s, rounds, seed, names, tmp)
        server = FRAug(cfg, AuthorsNet(fednbs_model(fd)))
        with contextlib.redirect_stdout(io.StringIO()):
            server.train(cfg)
            # the authors' loop evaluates at the start of each round, so the last round's training is scored here
            server.selected_users = server.users
            with torch.no_grad():
                server.communicate(mode=cfg["model_share"]); server.communicate(model_name="G", mode=cfg["model_share_G"])
                server.evaluate()
    per_round = [r for r in record if "comm_round" in r]        # report_results() after round r holds round r's start-of-round eval
    accs = [[r[f"local_acc_{i}"] for i in range(len(names))] for r in per_round] + [[server.metrics[f"local_acc_{i}"] for i in range(len(names))]]
    assert len(accs) == rounds + 1, (len(accs), rounds)
    # accs[0] is the untrained synchronised model; accs[r] is after r rounds of training
    return [("authors", setting, seed, r, n, a) for r in range(1, rounds + 1) for n, a in zip(names, accs[r])]

class AugmentedTensors(torch.utils.data.Dataset):
    "Tensor images with fednbs's per-image training augmentation (none for digits3)."
    def __init__(self, x, y, augment): self.x, self.y, self.augment = x, y, augment
    def __len__(self): return len(self.y)
    def __getitem__(self, i):
        x = self.x[i]
        if self.augment is not None: x = self.augment(x[None])[0]
        return x, self.y[i]

# ------------------------------------------------------------------------------------------------------------ fednbs
def run_fednbs(setting: str, seed: int, rounds: int, out: Path):
    "The same setting through `fednbs.experiment.run_experiment`; rows from its metrics file."
    from fednbs.experiment import RunConfig, run_experiment, read_metrics
    s = SETTINGS[setting]
    params = {k: s[k] for k in ("local_iters", "gen_lr", "rt_lr", "alpha", "beta", "latent_dim", "gamma") if k in s}
    opts = {k: v for k, v in s["options"].items() if k not in ("budget", "percent")}
    with tempfile.TemporaryDirectory() as tmp:
        cfg = RunConfig(algo=s["method"], data=s["data"], data_dir=DATA_DIR, model=COMMON["model"], rounds=rounds,
                        local_epochs=s.get("local_epochs", 1), lr=s["lr"], batch_size=s["batch_size"], momentum=s["momentum"],
                        seed=seed, out=str(Path(tmp) / "run"), quiet=True, algo_params=params,
                        data_options={**opts, "partition_file": str(partition_file(setting, seed, out))})
        run_experiment(cfg)
        rows = read_metrics(Path(tmp) / "run" / "metrics.csv")
    names = [c for c in dict.fromkeys(r["client"] for r in rows) if c not in ("mean", "weighted", "pooled")]
    acc = {(int(r["round"]), r["client"]): float(r["value"]) for r in rows if r["split"] == "test" and r["metric"] == "acc_personal"}
    # fednbs numbers rounds from 0: its round r is scored after r + 1 rounds of training
    return [("fednbs", setting, seed, r, n, acc[(r - 1, n)]) for r in range(1, rounds + 1) for n in names]

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("setting", choices=sorted(SETTINGS)); p.add_argument("side", choices=["authors", "fednbs"])
    p.add_argument("--seed", type=int, default=0); p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--source", default=None, help="where to clone the authors' repository from (default: its GitHub URL)")
    p.add_argument("--data-dir", default=None, help="folder holding digits/ (default: $FEDNBS_DATA_DIR, else ../shared/data)")
    p.add_argument("--out", default=str(HERE.parents[1] / "nbs" / "tutorials" / "fidelity_results"))
    a = p.parse_args(argv)
    global DATA_DIR
    if a.data_dir: DATA_DIR = a.data_dir
    s = SETTINGS[a.setting]; rounds = a.rounds or s["rounds"]; out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    t0 = time.time()
    if a.side == "fednbs": rows = run_fednbs(a.setting, a.seed, rounds, out)
    else: rows = {"fedbn": run_fedbn_authors, "fraug": run_fraug_authors}[s["method"]](a.setting, a.seed, rounds, out, a.source)
    path = out / f"{a.setting}_{a.side}_seed{a.seed}.csv"
    write_rows(path, rows)
    last = [r[-1] for r in rows if r[3] == rounds]
    print(f"{a.setting} {a.side} seed {a.seed}: {rounds} rounds in {time.time() - t0:.0f} s, final mean acc {np.mean(last):.4f} -> {path}")

if __name__ == "__main__": main()
