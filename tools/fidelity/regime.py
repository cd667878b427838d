"""FRAug against FedBN in FRAug's own Digits regime, on exactly the same budget; per-round accuracy per client to CSV.

    python tools/fidelity/regime.py {fraug,fedbn} --seed S [--rounds R] [--width W] [--data-dir DIR] [--out DIR]

Both methods see the same clients (`fraug_digits`: MNIST, MNIST-M, USPS; 1 % of each domain's training pool),
the same augmentation (RandomResizedCrop 0.7-1 + ColorJitter 0.3 + RandomGrayscale 0.1), the same optimiser
(SGD lr 0.01, momentum 0.5), batch 64 and T = 20 iterations a round drawn from a data iterator that persists
across rounds. FedBN here is fednbs's `fedbn` with FRAug's budget: `fedbn_iters` below runs T iterations a round
instead of whole epochs (FedBN's local loop otherwise unchanged: new optimiser each round, BatchNorm local).
"""
import argparse, csv, math, os, tempfile, time
from pathlib import Path
import numpy as np
import torch
import torch.nn.functional as F
from fednbs.core import ALGORITHMS, MODELS
from fednbs.algorithm import NonFiniteLoss
from fednbs.classic import FedBN
from fednbs.fraug_parts import next_batch
from fednbs.aggregation import split_state
from fednbs.algorithm import clone_state
from fednbs.models import SmallCNN, set_round

HERE = Path(__file__).resolve().parent

class FedBNIters(FedBN):
    "FedBN whose local work is `local_iters` mini-batches a round from a persistent shuffled iterator (FRAug's budget unit)."
    name = "fedbn_iters"
    hparams = {"local_iters": (20, "local iterations T per round; the data iterator persists across rounds")}
    def init_client(self, client): return {**super().init_client(client), "cursor": {}}
    def local_update(self, state, message, data, rnd):
        t = self.task
        model = self.load(state, message); set_round(model, rnd, t.rounds); model.train()
        opt = self.make_optimizer(list(model.parameters()), rnd)
        total = 0.0
        for _ in range(self.local_iters):
            idx = next_batch(state["cursor"], data.n_train, t.batch_size, data.y_train.device)
            x, y = data.x_train[idx], data.y_train[idx]
            if t.augment is not None: x = t.augment(x)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
            total += float(loss.detach())
        if not math.isfinite(total): raise NonFiniteLoss(f"training loss is {total}")
        shared, local = split_state(model.state_dict(), self.local_names())
        state["local"] = clone_state(local)
        return self.model_message("model", shared, data), {"loss": total / self.local_iters}

if "fedbn_iters" not in ALGORITHMS:
    ALGORITHMS.register("fedbn_iters", "FedBN with FRAug's budget: T local iterations a round from a persistent iterator")(FedBNIters)

def tiny_cnn(width: int):
    "fednbs's `cnn` at `width` channels (a backbone this CPU runs for hundreds of rounds)."
    def build(num_classes: int = 10, input_shape=(3, 32, 32), norm=None): return SmallCNN(num_classes, input_shape, norm, width=width)
    return build

def run(method: str, seed: int, rounds: int, width: int, data_dir: str, eval_every: int):
    "One run through `run_experiment`; rows (impl, method, seed, round, client, split, acc) for every evaluated round."
    from fednbs.experiment import RunConfig, run_experiment, read_metrics
    name = f"cnn_w{width}"
    if name not in MODELS: MODELS.register(name, f"fednbs's small CNN at width {width}")(tiny_cnn(width))
    common = dict(data="fraug_digits", data_dir=data_dir, model=name, rounds=rounds, lr=0.01, momentum=0.5, batch_size=64,
                  seed=seed, eval_every=eval_every, quiet=True, data_options={"domains": "mnist,mnistm,usps"})
    params = (dict(local_iters=20, gamma=0.002, feature_interp=False, gen_distance="l2", alpha=1.0, rt_distance="mmd",
                   beta=1.0, gen_lr=0.05, rt_lr=0.05) if method == "fraug" else dict(local_iters=20))
    with tempfile.TemporaryDirectory() as tmp:
        cfg = RunConfig(algo="fraug" if method == "fraug" else "fedbn_iters", out=str(Path(tmp) / "run"), algo_params=params, **common)
        run_experiment(cfg)
        rows = read_metrics(Path(tmp) / "run" / "metrics.csv")
    out = []
    for r in rows:
        if r["metric"] == "acc_personal" and r["split"] in ("val", "test") and r["client"] not in ("mean", "weighted", "pooled"):
            out.append(("fednbs", method, seed, int(r["round"]) + 1, r["client"], r["split"], float(r["value"])))
    return out

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("method", choices=["fraug", "fedbn"]); p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=300); p.add_argument("--width", type=int, default=8)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--data-dir", default=os.environ.get("FEDNBS_DATA_DIR", str(HERE.parents[1].parent / "shared" / "data")))
    p.add_argument("--out", default=str(HERE.parents[1] / "nbs" / "tutorials" / "fidelity_results"))
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    t0 = time.time()
    rows = run(a.method, a.seed, a.rounds, a.width, a.data_dir, a.eval_every)
    path = Path(a.out) / f"regime_{a.method}_seed{a.seed}.csv"; path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f); w.writerow(["impl", "method", "seed", "round", "client", "split", "acc"]); w.writerows(rows)
    last = max(r[3] for r in rows)
    print(f"regime {a.method} seed {a.seed}: {a.rounds} rounds in {time.time() - t0:.0f} s, final mean test acc "
          f"{np.mean([r[-1] for r in rows if r[3] == last and r[5] == 'test']):.4f} -> {path}")

if __name__ == "__main__": main()
