"""Record a finished `fednbs lodo --table NAME` folder for the docs: the table the command wrote (CSV, LaTeX and its
Markdown as compare_table.txt), and runs.json with the per-seed held-out accuracies and the CPU seconds each method's
runs spent in their rounds (from the runs' summary.json).

    python tools/record_lodo.py lodo-digits3 nbs/lodo_results/digits3 --table digits3 --command "fednbs lodo ..."
"""
import argparse, json, shutil
from pathlib import Path
from fednbs.lodo import lodo_table, LODO_TABLES, parse_methods, parse_run, dataset_domains, shlex


def record(out: Path, dest: Path, table: str, command: str, device: str):
    t = LODO_TABLES[table]
    methods = list(parse_methods([f"{k}={v}" for k, v in t["methods"].items()]))
    seeds = [int(s) for s in t["seeds"].split(",")]
    first = json.loads((next(out.glob(f"*/{methods[0]}/s{seeds[0]}")) / "config.json").read_text())
    domains = dataset_domains(parse_run(["run", *shlex.split(t["run"]), "--data-dir", first["data_dir"]]))
    agg = lodo_table(out, methods, domains, seeds)
    per_seed = {m: {c: {str(s): round(v, 5) for s, v in agg[m]["per_seed"][c].items()} for c in agg[m]["per_seed"]}
                for m in methods}
    cpu = {}
    for m in methods:
        folders = [out / d / m / f"s{s}" for d in domains for s in seeds]
        cpu[m] = round(sum(json.loads((f / "summary.json").read_text())["cpu_seconds_per_round_this_session"]
                           * json.loads((f / "config.json").read_text())["rounds"] for f in folders), 1)
    dest.mkdir(parents=True, exist_ok=True)
    runs = dict(command=command, table=table, methods=methods, domains=domains, seeds=seeds, rounds=first["rounds"],
                runs=len(methods) * len(domains) * len(seeds), device=device, cpu_seconds_in_rounds=cpu, per_seed=per_seed)
    (dest / "runs.json").write_text(json.dumps(runs, indent=1) + "\n")
    for f in ["compare.csv", "compare.tex"]: shutil.copy(out / "compare" / f, dest / f)
    shutil.copy(out / "compare" / "compare.md", dest / "compare_table.txt")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="the --out folder of the finished fednbs lodo command")
    p.add_argument("dest", type=Path, help="where the record goes, e.g. nbs/lodo_results/digits3")
    p.add_argument("--table", required=True, help="the --table the command ran")
    p.add_argument("--command", required=True, help="the command as the docs show it")
    p.add_argument("--device", required=True, help="what it ran on, in words")
    a = p.parse_args()
    record(a.out, a.dest, a.table, a.command, a.device)
