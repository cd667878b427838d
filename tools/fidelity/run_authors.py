"""Run the authors' public code and fednbs on the same clients, seeds and settings; write per-round test accuracy per client.

    python tools/fidelity/run_authors.py SETTING SIDE --seed S [--rounds R] [--source GIT] [--out DIR]

SETTING is one of SETTINGS below, SIDE is `authors` or `fednbs`. The authors' repository is cloned into a cache folder
outside the project (FEDNBS_FIDELITY_CACHE, default ~/.cache/fednbs-fidelity) and checked out at the pinned commit;
nothing of it is copied into this project. Every change needed to run it is made at run time by this file and listed
in tools/fidelity/README.md.
"""
import argparse, contextlib, copy, csv, io, json, os, re, shutil, subprocess, sys, tempfile, time, types
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
    "fednn": ("https://github.com/myeongkyunkang/FedNN", "9ae13a734730c51de891a1213ab6b6d158a10d97"),
    "fedco": ("https://github.com/zhyczy/Fed-CO2", "21f52558c2d12cba52dae5f0d29374fcb0e85572"),
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
    # the authors' own Digits budget (main.py): T = 20 iterations of batch 64 a round; `fraug-digits3` above is reduced
    "fraug-digits3-full": dict(method="fraug", data="digits3", options=dict(budget=256), test_cap=300, rounds=30,
                               lr=0.01, batch_size=64, momentum=0.5, local_iters=20, gen_lr=0.05, rt_lr=0.05, alpha=1.0,
                               beta=1.0, latent_dim=64, gamma=0.002),
    # FedNN's Digit protocol (main.py defaults, the paper's E = 5): FedAvg of every entry over Bernoulli(0.4) clients
    "fednn-digits3": dict(method="fednn", data="digits3", options=dict(budget=256), test_cap=300, rounds=30,
                          lr=0.1, lr_decay=0.998, weight_decay=1e-3, grad_clip=10.0, batch_size=50, momentum=0.0,
                          local_epochs=5, sampling="bernoulli", fraction=0.4, weighting="samples", tau0=5.0),
    # Fed-CO's Digits configuration (main.py --mode fed-co2 defaults)
    "fedco-digits3": dict(method="fedco", data="digits3", options=dict(budget=256), test_cap=300, rounds=30,
                          lr=0.01, batch_size=32, momentum=0.0, local_epochs=1, model_width=8),   # 8/16/16 channels
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

@contextlib.contextmanager
def work_folder():
    """A temporary folder whose path holds neither 'pt' nor 'user': the authors' FRAug code derives its log paths from the
    checkpoint path with `.replace('user', ...)` and `.replace('pt', 'txt')`, which would rewrite such a folder's name."""
    for _ in range(100):
        tmp = tempfile.mkdtemp(prefix="fednbs-")
        if "pt" not in tmp and "user" not in tmp: break
        os.rmdir(tmp)
    else:
        raise SystemExit(f"every temporary folder under {tempfile.gettempdir()} contains 'pt' or 'user', which the authors' "
                         "FRAug code rewrites in its log paths; set TMPDIR to a folder whose path contains neither")
    try: yield tmp
    finally: shutil.rmtree(tmp, ignore_errors=True)

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

def fednbs_model(fd, width: int = COMMON["model_width"]):
    "The small CNN both sides train (fednbs's `cnn`, at `width` channels)."
    from fednbs.models import SmallCNN
    return SmallCNN(fd.num_classes, tuple(fd.clients[0].x_train.shape[1:]), width=width)

def fednbs_model_name(width: int) -> str:
    "The fednbs model name of the `cnn` at `width` (registered here when it is not the default width)."
    from fednbs.core import MODELS
    from fednbs.models import SmallCNN
    if width == COMMON["model_width"]: return COMMON["model"]
    name = f"cnn_w{width}"
    if name not in MODELS:
        MODELS.register(name, f"fednbs's small CNN at width {width}")(
            lambda num_classes=10, input_shape=(3, 28, 28), norm=None: SmallCNN(num_classes, input_shape, norm, width=width))
    return name

class AuthorsNet(nn.Module):
    "fednbs's `cnn` with the module names the authors' code keys on: BatchNorm layers named `bn*`, the last layer `classifier`."
    def __init__(self, split_model):
        super().__init__()
        layers = list(split_model.features) + list(split_model.head)[:-1]
        self.features = bn_named(layers)
        self.classifier = list(split_model.head)[-1]
        self.feature_dim = self.classifier.in_features
    def forward(self, x): return self.classifier(self.features(x))

def write_rows(path: Path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f); w.writerow(["impl", "setting", "seed", "round", "client", "test_acc"])
        for r in rows: w.writerow(r)

def bn_named(layers) -> nn.Sequential:
    "`layers` in a Sequential whose BatchNorm modules are named `bn<i>` (the authors' rule keeps entries with `bn` in the key local)."
    return nn.Sequential(OrderedDict(
        (f"bn{i}" if isinstance(m, nn.modules.batchnorm._BatchNorm) else f"layer{i}", m) for i, m in enumerate(layers)))

def client_loaders(fd):
    "The authors' `prepare_data(args)` on our clients: shuffled training and ordered test loaders of batch `args.batch`."
    def loaders(args):
        tr = [DataLoader(TensorDataset(c.x_train, c.y_train), batch_size=args.batch, shuffle=True) for c in fd.clients]
        te = [DataLoader(TensorDataset(c.x_test, c.y_test), batch_size=args.batch, shuffle=False) for c in fd.clients]
        return tr, te
    return loaders

def patched_source(path: Path, patches) -> str:
    "The text of `path` with each (exact text, replacement) of `patches` applied; each text must occur exactly once."
    src = path.read_text()
    for old, new in patches:
        assert src.count(old) == 1, f"the pinned {path.name} no longer holds {old!r}"
        src = src.replace(old, new)
    return src

def run_main_block(src: str, repo: Path, script: Path, argv: list, fidelity: dict) -> str:
    "Run `src` (the authors' script) as `__main__` with `argv`, in a temporary folder; what it printed."
    sys.path[:0] = [str(repo)]
    glb = {"__name__": "__main__", "__file__": str(script), "_FIDELITY": fidelity}
    log = io.StringIO()
    with work_folder() as tmp:
        old_argv, cwd = sys.argv, os.getcwd()
        sys.argv = [script.name, *[a.replace("{tmp}", tmp) for a in argv]]
        os.chdir(tmp)
        try:
            with contextlib.redirect_stdout(log): exec(compile(src, str(script), "exec"), glb)
        finally: sys.argv = old_argv; os.chdir(cwd)
    return log.getvalue()

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
    script = repo / "federated" / "fed_digits.py"
    log = run_main_block(patched_source(script, FEDBN_PATCHES), repo, script,
                         ["--mode", "fedbn", "--iters", str(rounds), "--wk_iters", str(s["local_epochs"]), "--lr", str(s["lr"]),
                          "--batch", str(s["batch_size"]), "--save_path", "{tmp}"],
                         dict(seed=seed, loaders=client_loaders(fd), names=names, model=lambda: AuthorsNet(fednbs_model(fd))))
    accs = [(m.group(1).strip(), float(m.group(2))) for m in re.finditer(r"^ (\S+)\s*\| Test  Loss: \S+ \| Test  Acc: (\S+)$", log, re.M)]
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
    with work_folder() as tmp:
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

# ------------------------------------------------------------------------------------ FedNN (myeongkyunkang/FedNN)
FEDNN_PATCHES = {  # file -> [(exact text, what it becomes)]; each must occur exactly once
    "Models.py": [("self.select_weight_ = torch.cuda.FloatTensor([1., 1.])", "self.select_weight_ = torch.tensor([1., 1.])")],
    "algo/base.py": [("shuffle=False, num_workers=2)", "shuffle=False, num_workers=0)")],
    "algo/fedavg.py": [("shuffle=True, num_workers=2)", "shuffle=True, num_workers=0)")],
}

def load_patched(repo: Path, rel: str, name: str, patches=()) -> types.ModuleType:
    "Import `repo/rel` as module `name` from its source text with the exact replacements `patches`."
    path = repo / rel; src = patched_source(path, patches)
    mod = types.ModuleType(name); mod.__file__ = str(path); mod.__package__ = name.rpartition(".")[0]
    sys.modules[name] = mod
    exec(compile(src, str(path), "exec"), mod.__dict__)
    return mod

class FedNNAuthorsNet(nn.Module):
    "fednbs's `cnn` built from the authors' FedNN layers: every conv their weight-standardised `Conv2d`, every BatchNorm their `AGN(2 groups)`."
    def __init__(self, M, split_model):
        super().__init__()
        layers = []
        for m in split_model.features:
            if isinstance(m, nn.Conv2d):
                c = M.Conv2d(m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding, bias=m.bias is not None)
                c.load_state_dict(m.state_dict()); m = c
            elif isinstance(m, nn.BatchNorm2d): m = M.AGN(num_groups=2, num_channels=m.num_features)
            layers.append(m)
        self.features, self.head = nn.Sequential(*layers), split_model.head
    def forward(self, x): return self.head(self.features(x))

def run_fednn_authors(setting: str, seed: int, rounds: int, out: Path, source=None):
    "Run the authors' `train_FedAvg` on our clients; record the global model's test accuracy per client after every round."
    s = SETTINGS[setting]; repo = checkout("fednn", source)
    fd = load_clients(setting, seed, out)
    names = [c.name for c in fd.clients]
    sys.path[:0] = [str(repo)]
    import Datasets                                                     # noqa: F401  (the authors' Dataset class)
    M = load_patched(repo, "Models.py", "Models", FEDNN_PATCHES["Models.py"])
    load_patched(repo, "algo/base.py", "algo.base", FEDNN_PATCHES["algo/base.py"])
    fedavg = load_patched(repo, "algo/fedavg.py", "algo.fedavg", FEDNN_PATCHES["algo/fedavg.py"])
    data_obj = types.SimpleNamespace(                                   # what their DatasetObject holds, from our clients
        dataset="DIGIT", n_client=len(names), name=f"DIGIT_{len(names)}_{seed}",
        clnt_x=[c.x_train.numpy() for c in fd.clients], clnt_y=[c.y_train.numpy() for c in fd.clients],
        tst_x=[x for c in fd.clients for x in c.x_test.numpy()], tst_y=np.concatenate([c.y_test.numpy() for c in fd.clients]))
    record, test_calls, original = [], [0], fedavg.get_acc_loss
    def get_acc_loss(data_x, data_y, model, dataset_name, w_decay=None):
        # per round: the test data is scored with the selected-clients model, then with the all-clients model; only the
        # first is computed (per client, pooled as the authors pool it); the other five scores of the round are not
        if data_x is not data_obj.tst_x: return float("nan"), float("nan")
        test_calls[0] += 1
        if test_calls[0] % 2 == 0: return float("nan"), float("nan")
        res = [original(c.x_test.numpy(), c.y_test.numpy(), model, dataset_name, w_decay) for c in fd.clients]
        record.append([a for _, a in res])
        n = np.array([len(c.y_test) for c in fd.clients])
        return float(np.dot(n, [l for l, _ in res]) / n.sum()), float(np.dot(n, record[-1]) / n.sum())
    fedavg.get_acc_loss = get_acc_loss
    args = types.SimpleNamespace(act_prob=s["fraction"], learning_rate=s["lr"], batch_size=s["batch_size"], epoch=s["local_epochs"],
                                 com_amount=rounds, weight_decay=s["weight_decay"], sch_step=1, sch_gamma=1, save_period=50,
                                 model_name="LeNet_fednn", lr_decay_per_round=s["lr_decay"], tau=s["tau0"], seed=seed, data_seed=seed)
    with work_folder() as tmp:
        args.result_path = tmp + "/"
        # main(): seed everything, build the initial model, train
        import random
        random.seed(seed); np.random.seed(seed); torch.manual_seed(seed); torch.cuda.manual_seed_all(seed)
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
        model_func = lambda: FedNNAuthorsNet(M, fednbs_model(fd))
        init_model = model_func()
        os.makedirs(f"{tmp}/Model/{data_obj.name}/", exist_ok=True)
        with contextlib.redirect_stdout(io.StringIO()): fedavg.train_FedAvg(args, data_obj, model_func, init_model)
    accs = record
    assert len(accs) == rounds, (len(accs), rounds)
    return [("authors", setting, seed, r + 1, n, a) for r in range(rounds) for n, a in zip(names, accs[r])]

# ---------------------------------------------------------------------------------------------- Fed-CO (zhyczy/Fed-CO2)
FEDCO_PATCHES = [  # (exact text of main.py, what it becomes); each must occur exactly once
    ("    seed = 1\n", "    seed = _FIDELITY['seed']\n"),
    ("            train_loaders, test_loaders = prepare_data_digits(args)", "            train_loaders, test_loaders = _FIDELITY['loaders'](args)"),
    ("datasets = ['MNIST', 'SVHN', 'USPS', 'SynthDigits', 'MNIST-M']", "datasets = _FIDELITY['names']"),
    ("    elif args.mode == 'fed-co2':\n        if args.dataset == 'digits':\n            server_model = DigitModel().to(device)",
     "    elif args.mode == 'fed-co2':\n        if args.dataset == 'digits':\n            server_model = _FIDELITY['model']().to(device)"),
    ("                if a_iter<=15 or (a_iter+1)%50==0:", "                if True:"),
]

class FedCOAuthorsNet(nn.Module):
    "fednbs's `cnn` with the interface of the authors' `DigitModel`: `produce_feature` (the feature extractor, BatchNorm layers named `bn*`) and `classifier` (the head)."
    def __init__(self, split_model):
        super().__init__()
        self.features = bn_named(split_model.features)
        self.classifier = split_model.head
    def produce_feature(self, x): return self.features(x)
    def forward(self, x): return self.classifier(self.features(x))

def run_fedco_authors(setting: str, seed: int, rounds: int, out: Path, source=None):
    "Run the authors' `main.py --mode fed-co2 --dataset digits` on our clients; parse its per-round test log (fused accuracy)."
    s = SETTINGS[setting]; repo = checkout("fedco", source)
    fd = load_clients(setting, seed, out)
    names = [c.name for c in fd.clients]
    script = repo / "main.py"
    log = run_main_block(patched_source(script, FEDCO_PATCHES), repo, script,
                         ["--mode", "fed-co2", "--dataset", "digits", "--log", "--iters", str(rounds), "--wk_iters", str(s["local_epochs"]),
                          "--lr", str(s["lr"]), "--momentum", str(s["momentum"]), "--batch", str(s["batch_size"]), "--save_path", "{tmp}"],
                         dict(seed=seed, loaders=client_loaders(fd), names=names, model=lambda: FedCOAuthorsNet(fednbs_model(fd, s["model_width"]))))
    accs = [(m.group(1).strip(), int(m.group(2)), float(m.group(3)))
            for m in re.finditer(r"^ Test site-(\S+)\s*\| Epoch:(\d+) \| Test Acc: (\S+) \|", log, re.M)]
    assert len(accs) == rounds * len(names), f"expected {rounds * len(names)} test lines, parsed {len(accs)}"
    return [("authors", setting, seed, e + 1, n, a) for n, e, a in accs]

# ------------------------------------------------------------------------------------------------------------ fednbs
def run_fednbs(setting: str, seed: int, rounds: int, out: Path, device: str = "cpu"):
    "The same setting through `fednbs.experiment.run_experiment`; rows from its metrics file."
    from fednbs.experiment import RunConfig, run_experiment, read_metrics
    s = SETTINGS[setting]
    params = {k: s[k] for k in ("local_iters", "gen_lr", "rt_lr", "alpha", "beta", "latent_dim", "gamma", "tau0") if k in s}
    extra = {k: s[k] for k in ("weight_decay", "lr_decay", "grad_clip", "sampling", "fraction", "weighting") if k in s}
    opts = {k: v for k, v in s["options"].items() if k not in ("budget", "percent")}
    with work_folder() as tmp:
        cfg = RunConfig(algo=s["method"], data=s["data"], data_dir=DATA_DIR, model=fednbs_model_name(s.get("model_width", COMMON["model_width"])), rounds=rounds,
                        local_epochs=s.get("local_epochs", 1), lr=s["lr"], batch_size=s["batch_size"], momentum=s["momentum"],
                        seed=seed, out=str(Path(tmp) / "run"), quiet=True, algo_params=params, device=device, threads=1, **extra,
                        data_options={**opts, "partition_file": str(partition_file(setting, seed, out))})
        run_experiment(cfg)
        rows = read_metrics(Path(tmp) / "run" / "metrics.csv")
    names = [c for c in dict.fromkeys(r["client"] for r in rows) if c not in ("mean", "weighted", "pooled")]
    # the method's headline accuracy: personalised models (FedBN, FRAug), fused prediction (Fed-CO), global model (FedNN)
    metric = next(m for m in ("acc_personal", "acc_fused", "acc_global") if any(r["metric"] == m for r in rows))
    acc = {(int(r["round"]), r["client"]): float(r["value"]) for r in rows if r["split"] == "test" and r["metric"] == metric}
    # fednbs numbers rounds from 0: its round r is scored after r + 1 rounds of training
    return [("fednbs", setting, seed, r, n, acc[(r - 1, n)]) for r in range(1, rounds + 1) for n in names]

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("setting", choices=sorted(SETTINGS)); p.add_argument("side", choices=["authors", "fednbs"])
    p.add_argument("--seed", type=int, default=0); p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--source", default=None, help="where to clone the authors' repository from (default: its GitHub URL)")
    p.add_argument("--data-dir", default=None, help="folder holding digits/ (default: $FEDNBS_DATA_DIR, else ../shared/data)")
    p.add_argument("--out", default=str(HERE.parents[1] / "nbs" / "tutorials" / "fidelity_results"))
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="fednbs's device; the authors' FedBN, FedNN and Fed-CO code takes the GPU whenever one is visible")
    a = p.parse_args(argv)
    global DATA_DIR
    if a.data_dir: DATA_DIR = a.data_dir
    s = SETTINGS[a.setting]; rounds = a.rounds or s["rounds"]; out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    t0 = time.time()
    if a.side == "authors" and a.device == "cpu": os.environ["CUDA_VISIBLE_DEVICES"] = ""   # before torch first looks
    if a.side == "fednbs": rows = run_fednbs(a.setting, a.seed, rounds, out, a.device)
    else: rows = {"fedbn": run_fedbn_authors, "fraug": run_fraug_authors, "fednn": run_fednn_authors,
                "fedco": run_fedco_authors}[s["method"]](a.setting, a.seed, rounds, out, a.source)
    path = out / f"{a.setting}_{a.side}_seed{a.seed}.csv"
    write_rows(path, rows)
    last = [r[-1] for r in rows if r[3] == rounds]
    print(f"{a.setting} {a.side} seed {a.seed}: {rounds} rounds in {time.time() - t0:.0f} s, final mean acc {np.mean(last):.4f} -> {path}")

if __name__ == "__main__": main()
