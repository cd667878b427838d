"""Check, apart from any training, the two parts that fednbs and the authors' code share in the fidelity runs.

1. Networks: fednbs's `digitmodel` and `alexnet` against FedBN's own `DigitModel` and `AlexNet` (the authors'
   `nets/models.py`, imported as written): parameter and buffer shapes in order, then the same weights copied in and
   the logits compared in training and evaluation mode on one batch.
2. Data: fednbs's `digits3` image tensors against FedBN's own preprocessing of the same raw images: the transforms
   of the authors' `prepare_data` (taken from `federated/fed_digits.py` as written, by running the function with a
   recording stand-in for their dataset class) applied through their `DigitsDataset.__getitem__` (PIL image, then
   the transforms), beside `fednbs.data.images_to_tensor`, which `digits3` uses.

Usage: python tools/fidelity/shared_parts.py [--source /path/to/FedBN] [--data-dir DATA] [--out FILE.json]
The authors' repository is checked out at the pinned commit outside the project (see run_authors.py); nothing of it
is copied here.
"""
import argparse, ast, json, sys, types
from pathlib import Path
import numpy as np
import torch
from PIL import Image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run_authors import checkout, PINS, DATA_DIR   # noqa: E402  (the same cache, pins and data folder)

def load_module(path: Path, name: str, replace=()) -> types.ModuleType:
    "Import the file `path` as module `name`, with exact text replacements (each must occur once)."
    src = path.read_text()
    for old, new in replace:
        assert src.count(old) == 1, (path, old)
        src = src.replace(old, new)
    mod = types.ModuleType(name); mod.__file__ = str(path)
    sys.modules[name] = mod
    exec(compile(src, str(path), "exec"), mod.__dict__)
    return mod

def copy_by_order(src: torch.nn.Module, dst: torch.nn.Module):
    "Copy `src`'s state into `dst` entry by entry in registration order (the names differ, the shapes must not)."
    a, b = src.state_dict(), dst.state_dict()
    assert [tuple(v.shape) for v in a.values()] == [tuple(v.shape) for v in b.values()], "the entries differ in shape"
    dst.load_state_dict({kb: va.clone() for kb, va in zip(b, a.values())})

def compare_networks(repo: Path) -> list[dict]:
    "fednbs's digitmodel and alexnet against FedBN's DigitModel and AlexNet on the same weights and batch."
    from fednbs.models import build_model
    theirs = load_module(repo / "nets" / "models.py", "fedbn_models")
    rows = []
    for ours_name, cls, shape in (("digitmodel", theirs.DigitModel, (3, 28, 28)), ("alexnet", theirs.AlexNet, (3, 256, 256))):
        torch.manual_seed(0)
        ours, ref = build_model(ours_name, 10, shape), cls(num_classes=10)
        n_ours = sum(p.numel() for p in ours.parameters()); n_ref = sum(p.numel() for p in ref.parameters())
        copy_by_order(ref, ours)
        x = torch.randn(8, *shape)
        diffs = {}
        for mode in ("train", "eval"):
            ours.train(mode == "train"); ref.train(mode == "train")
            with torch.no_grad(): diffs[mode] = (ours(x) - ref(x)).abs().max().item()
        rows.append(dict(part=f"network {ours_name}", against=f"FedBN nets/models.py {cls.__name__}",
                         parameters=f"{n_ours} vs {n_ref}", max_abs_diff=max(diffs.values()),
                         note="logits, training and evaluation mode, same weights"))
    return rows

def authors_transforms(repo: Path) -> dict:
    "The transforms FedBN's `prepare_data` gives each Digits domain, by running it with a recording dataset class."
    import torchvision.transforms as transforms
    tree = ast.parse((repo / "federated" / "fed_digits.py").read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "prepare_data")
    seen = {}
    class Recorder(torch.utils.data.Dataset):
        def __init__(self, data_path, channels, percent=0.1, train=True, transform=None, filename=None):
            seen[data_path.rstrip("/").split("/")[-1]] = (channels, transform)
        def __len__(self): return 1
    ns = {"torch": torch, "transforms": transforms, "data_utils": types.SimpleNamespace(DigitsDataset=Recorder)}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "fed_digits.py", "exec"), ns)
    ns["prepare_data"](types.SimpleNamespace(percent=0.1, batch=32))
    return seen

def compare_data(repo: Path, data_dir: str, n: int = 500) -> list[dict]:
    "fednbs's image tensors against the authors' DigitsDataset + transforms on the same raw images (first `n`)."
    from fednbs.data import images_to_tensor
    du = load_module(repo / "utils" / "data_utils.py", "fedbn_data_utils",
                     replace=[("self.labels.astype(np.long)", "self.labels.astype(np.int64)")])  # np.long left numpy in 1.24
    seen = authors_transforms(repo)
    root = Path(data_dir) / "digits"
    raw = {"MNIST": np.load(root / "mnist.npz")["x_train"][:n, ..., 0],      # FedBN's pickles hold (N, 28, 28) grey digits
           "USPS": np.load(root / "usps.npz")["x_train"][:n, ..., 0],        # (N, 16, 16), resized to 28 by the transform
           "MNIST_M": np.load(root / "mnist_m.npz")["x_test"][:n]}           # (N, 32, 32, 3) here; FedBN's pickle holds 28 px
    rows = []
    for dom, x in raw.items():
        channels, tf = seen[dom]
        ds = du.DigitsDataset.__new__(du.DigitsDataset)
        ds.images, ds.labels, ds.transform, ds.channels = x, np.zeros(len(x), np.int64), tf, channels
        if dom == "MNIST_M":   # FedBN's pickle is already 28 px: bring our 32 px images there the way fednbs does, as uint8
            small = images_to_tensor(x, size=28, channels=3, mean=(0, 0, 0), std=(1, 1, 1))
            ds.images = (small.permute(0, 2, 3, 1).numpy() * 255).round().astype(np.uint8)
        theirs = torch.stack([ds[i][0] for i in range(len(x))])
        ours = images_to_tensor(x, size=28, channels=3)
        d = (ours - theirs).abs()
        rows.append(dict(part=f"data {dom}", against="FedBN fed_digits.py transforms + DigitsDataset",
                         parameters=f"{len(x)} images", max_abs_diff=d.max().item(),
                         note=f"mean abs diff {d.mean().item():.2e} on the [-1, 1] scale"
                              + ("; the transform only: FedBN's pickle is 28 px, this release 32 px" if dom == "MNIST_M" else "")))
    return rows

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", default=None, help="where to clone FedBN from (default: its GitHub URL)")
    p.add_argument("--data-dir", default=DATA_DIR)
    p.add_argument("--out", default=str(HERE.parents[1] / "nbs" / "tutorials" / "fidelity_results" / "shared_parts.json"))
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    repo = checkout("fedbn", a.source)
    rows = compare_networks(repo) + compare_data(repo, a.data_dir)
    for r in rows: print(f"{r['part']:<22} {r['max_abs_diff']:.3g}  ({r['parameters']}; {r['note']})")
    Path(a.out).write_text(json.dumps(dict(authors_commit=PINS["fedbn"][1], rows=rows), indent=1) + "\n")

if __name__ == "__main__":
    main()
