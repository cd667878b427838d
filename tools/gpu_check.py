"""The prepared GPU check: recorded vs ordinary training steps, then the PACS comparison table, in one command.

    python tools/gpu_check.py --data-dir DATA --out OUT --minutes 8.5

1. `speed`: seconds per PACS round (ResNet-18, 64 px) of FedBN, FedNN and Fed-CO on one GPU, with the training steps
   replayed from CUDA graphs and without (`--cuda-graphs on|off`), each pair in one process, one after the other.
2. `table`: every row of `fednbs reproduce table-pacs` for its seeds, as many at once as `--jobs auto` picks (or
   `--jobs N|all`) on the GPU (CUDA MPS started first when the machine has it, so that the runs' kernels share the device instead of
   taking turns), stopped at the deadline; what each run finished stays.
   Then, per method of `--floor-rows` and precision of `--precisions`: a round beside its floor (`fednbs.round_floors.floor_ratio`,
   the same arithmetic in plain PyTorch), one round under `torch.profiler` (`fednbs.round_floors.profile_round`), and on a GPU
   the host synchronisations of one round caught by `torch.cuda.set_sync_debug_mode("warn")`.
Writes OUT/speed.jsonl, OUT/floors.jsonl, OUT/pacs_acc.csv (what `fednbs.reproduce.write_results` writes) and
OUT/pacs_runs.json.
Check it on a CPU with a tiny setting: `--rounds 1 --seeds 0 --rows FedBN,Fed-CO --extra "--data-option budget=40"`.
"""
import argparse, json, os, shlex, shutil, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def table_engine(row: str, data_dir: str, device: str, flags: list[str]):
    "The engine of the PACS table's command for `row` (seed 0), in this process, with `flags` added."
    from fednbs.run_flags import build_parser, run_config
    from fednbs.experiment import resolve, load_data, make_engine
    from fednbs.reproduce import table_commands
    (_, _, argv), = table_commands("pacs", (0,), 30, "unused", data_dir, device, [row])
    cfg = resolve(run_config(build_parser().parse_args([*argv, *flags])))
    key = (cfg.data, json.dumps(cfg.data_options, sort_keys=True), cfg.seed)
    if key not in _DATA: _DATA[key] = load_data(cfg)
    return make_engine(cfg, _DATA[key])

_DATA = {}   # the loaded data, by its settings: every engine of a check reads the same images


def sync_warnings(engine) -> int:
    "Host synchronisations of one round of `engine` on a GPU, as `torch.cuda.set_sync_debug_mode('warn')` reports them."
    import warnings, torch
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always"); engine.run_round(); torch.cuda.synchronize()
    finally: torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def floors(data_dir: str, device: str, rows: list[str], precisions: list[str], extra: list[str], path: Path) -> list[dict]:
    "Per row and precision: the round beside its floor, the profile of one round, and on a GPU its host synchronisations; each a line of `path` as it is measured."
    from fednbs.round_floors import floor_ratio, profile_round
    out = []
    for row in rows:
        for precision in precisions:
            eng = table_engine(row, data_dir, device, ["--engine", "inprocess", "--precision", precision, *extra])
            res = dict(row=row, precision=precision, **floor_ratio(eng), profile=profile_round(eng))
            if device.startswith("cuda"): res["sync_warnings"] = sync_warnings(eng)
            out.append(res); print(json.dumps(res), flush=True)
            with path.open("a") as f: f.write(json.dumps(res) + "\n")
            del eng
    return out


def speed_pairs(data_dir: str, device: str, rows: list[str], extra: list[str], rounds: int = 1) -> list[dict]:
    "Seconds per round after a warm-up round, graphs on then off, for each of `rows`, in this process."
    import torch
    out = []
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    def engine(row, graphs):   # the table's own command for `row` (seed 0), in this process, in process, graphs on or off
        return table_engine(row, data_dir, device, ["--engine", "inprocess", "--cuda-graphs", graphs, *extra])
    def trained(graphs):   # the server state after round 0 of FedBN
        eng = engine("FedBN", graphs); eng.train_round(0); sync()
        return {k: v.float() for k, v in eng.server["model"].items() if v.is_floating_point()}
    def gap(a, b): return max(float((a[k] - b[k]).abs().max()) for k in a)
    off1, off2, on = trained("off"), trained("off"), trained("on")
    out.append(dict(check="FedBN round 0, largest weight difference", off_vs_off=gap(off1, off2), on_vs_off=gap(on, off1)))
    print(json.dumps(out[-1]), flush=True)
    for row in rows:
        for graphs in ("on", "off"):
            eng = engine(row, graphs)
            t0 = time.perf_counter(); eng.run_round(); sync(); warm = time.perf_counter() - t0
            ts = []
            for _ in range(rounds):
                t0 = time.perf_counter(); eng.run_round(); sync(); ts.append(time.perf_counter() - t0)
            out.append(dict(row=row, cuda_graphs=graphs, warm_s=round(warm, 3), round_s=[round(t, 3) for t in ts]))
            print(json.dumps(out[-1]), flush=True)
            del eng
    return out


def start_mps() -> bool:
    "Start the CUDA MPS control daemon if the machine has one; True if it runs."
    if shutil.which("nvidia-cuda-mps-control") is None: return False
    for k, v in (("CUDA_MPS_PIPE_DIRECTORY", "/tmp/fednbs-mps"), ("CUDA_MPS_LOG_DIRECTORY", "/tmp/fednbs-mps-log")):
        os.environ[k] = v; Path(v).mkdir(parents=True, exist_ok=True)
    return subprocess.run(["nvidia-cuda-mps-control", "-d"]).returncode == 0


def stop_mps():
    subprocess.run(["nvidia-cuda-mps-control"], input=b"quit\n")


def last_round(metrics: Path) -> int:
    "Rounds a run finished: one more than the last round in its metrics.csv (0: none)."
    from fednbs.experiment import read_metrics
    rounds = [r["round"] for r in read_metrics(metrics)] if metrics.exists() else []
    return max(rounds) + 1 if rounds else 0


def table(data_dir: str, device: str, seeds: list[int], rounds: int|None, rows: list[str]|None, extra: list[str],
          runs_dir: Path, seconds: float, engine: str, jobs: str = "auto") -> dict:
    "Every (row, seed) run of the PACS table, `jobs` at a time ('all', a number or 'auto'), stopped after `seconds`; what ran and how far."
    from fednbs.reproduce import table_commands, run_commands, command_text, error_line
    from fednbs.run_needs import choose_jobs
    cmds = table_commands("pacs", seeds, rounds, str(runs_dir), data_dir, device, rows)
    argvs = [[*a, "--engine", engine, *extra] for _, _, a in cmds]
    jobs, why = (len(argvs), f"all {len(argvs)} at once") if jobs == "all" else choose_jobs(jobs, argvs)
    print(f"table: {len(argvs)} runs, {why}", flush=True)
    logs = [Path(a[a.index("--out") + 1]) / "run.log" for a in argvs]
    t0 = time.perf_counter()
    codes = run_commands(argvs, jobs=jobs, logs=logs, timeout=seconds)
    wall = time.perf_counter() - t0
    runs = {f"{label}/s{s}": dict(exit=code, last_round=last_round(Path(a[a.index("--out") + 1]) / "metrics.csv"),
                                  **({"error": error_line(log)} if code not in (0, -15) else {}))
            for (label, s, _), a, code, log in zip(cmds, argvs, codes, logs)}
    for (label, s, _), a in zip(cmds, argvs):
        summary = Path(a[a.index("--out") + 1]) / "summary.json"
        if summary.exists(): runs[f"{label}/s{s}"]["s_per_round"] = round(json.loads(summary.read_text())["seconds_per_round_this_session"], 2)
    return dict(commands=[command_text(a) for a in argvs], runs=runs, wall_s=round(wall, 1), time_limit_s=seconds, runs_at_once=min(jobs, len(argvs)), runs_at_once_why=why)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", required=True); p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda"); p.add_argument("--minutes", type=float, default=8.5, help="the whole command's budget")
    p.add_argument("--seeds", default="0,1,2"); p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--rows", default=None, help="table rows (default: all)"); p.add_argument("--extra", default="", help="flags added to every run")
    p.add_argument("--speed-rows", default="FedBN,FedNN,Fed-CO", help="methods timed with recorded steps on and off ('' for none)"); p.add_argument("--skip-speed", action="store_true")
    p.add_argument("--engine", default="inprocess"); p.add_argument("--speed-only", action="store_true")
    p.add_argument("--jobs", default="auto", help="runs at once: a number, all, or auto (fednbs.run_needs.auto_jobs; the default)")
    p.add_argument("--floor-rows", default="FedBN,FedNN,Fed-CO,FRAug", help="methods timed beside their floor and profiled ('' for none)")
    p.add_argument("--precisions", default="fp32,bf16", help="precisions of the floors and profiles")
    p.add_argument("--runs", default=None, help="folder of the table's run folders (default: a new temporary one)")
    a = p.parse_args()
    t_start, out = time.perf_counter(), Path(a.out); out.mkdir(parents=True, exist_ok=True)
    extra = shlex.split(a.extra)
    os.environ.setdefault("MPLBACKEND", "Agg")
    import torch
    device_name = torch.cuda.get_device_name(0) if a.device.startswith("cuda") else "CPU"
    if a.speed_only:
        if a.speed_rows:   # --speed-rows '': the floors and profiles alone
            r = speed_pairs(a.data_dir, a.device, a.speed_rows.split(","), extra)
            (out / "speed.jsonl").write_text("".join(json.dumps(x) + "\n" for x in r))
        if a.floor_rows:
            (out / "floors.jsonl").unlink(missing_ok=True)
            floors(a.data_dir, a.device, a.floor_rows.split(","), a.precisions.split(","), extra, out / "floors.jsonl")
        return
    if not a.skip_speed:   # in a process of its own, so that the table's runs start on a fresh device
        argv = [sys.executable, __file__, "--speed-only", *sys.argv[1:]]
        try: code = subprocess.run(argv, timeout=max(30, a.minutes * 60 * 0.3)).returncode
        except subprocess.TimeoutExpired: code = "timeout"
        print(f"speed pairs: exit {code} after {time.perf_counter() - t_start:.0f} s", flush=True)
    runs = Path(a.runs or tempfile.mkdtemp(prefix="fednbs-gpu-runs-"))
    mps = a.device.startswith("cuda") and start_mps()
    print(f"MPS: {'on' if mps else 'off'}", flush=True)
    try:
        left = a.minutes * 60 - (time.perf_counter() - t_start) - 25   # leave time to write the results
        res = table(a.data_dir, a.device, [int(s) for s in a.seeds.split(",")], a.rounds, a.rows.split(",") if a.rows else None,
                    extra, runs, left, a.engine, a.jobs)
    finally:
        if mps: stop_mps()
    from fednbs.reproduce import collect_runs, write_results
    write_results(collect_runs(runs / "pacs"), out / "pacs_acc.csv")
    res.update(device=f"one {device_name}", mps=mps, torch=torch.__version__)
    (out / "pacs_runs.json").write_text(json.dumps(res, indent=1))
    done = sorted(v["last_round"] for v in res["runs"].values())
    print(f"table: {len(done)} runs in {res['wall_s']} s; rounds finished: min {done[0]}, max {done[-1]}", flush=True)


if __name__ == "__main__":
    main()
