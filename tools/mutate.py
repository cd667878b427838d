#!/usr/bin/env python
"""Mutation testing for the notebook tests: plant a known bug, rerun the notebooks' tests, see if they fail.

The registry is `tools/mutations.py`: a list `MUTATIONS` of dicts with keys
`name`, `notebook`, `find` (an exact snippet occurring once in that notebook), `replace`, `tests`
(notebooks whose tests should catch the bug) and `what` (one line). Append entries there.

For each mutation this script builds a fresh copy of the project in a temporary folder (the working tree's
tracked and untracked-but-not-ignored files, or `git archive REV` with `--rev REV`), replaces the snippet in
the notebook there, runs `nbdev_export` in the copy so that its `fednbs/` matches, and runs
`nbdev_test --path <nb>` for each listed notebook with PYTHONPATH pointing at the copy (so `import fednbs`
loads the mutated library). A mutation is *caught* when at least one of those test runs fails. The project
folder itself is never modified.

    python tools/mutate.py --list
    python tools/mutate.py                      # all mutations, one at a time
    python tools/mutate.py --only moon_mu0 --only copa_lam0 -j 2
    python tools/mutate.py --rev HEAD           # against the last commit instead of the working tree
    python tools/mutate.py --baseline           # also run each listed notebook unmutated (a failing baseline is flagged)
    python tools/mutate.py --only moon_swap -v  # show the error that made the test fail
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutations import MUTATIONS


def copy_project(dest: Path, rev: str | None) -> None:
    "Fill `dest` with the project: `git archive rev`, or the working tree's tracked and unignored untracked files."
    if rev:
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        return
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src = ROOT / f
        if not src.is_file(): continue  # deleted in the working tree
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / f)


def plant(nb_path: Path, find: str, replace: str) -> None:
    "Replace the one occurrence of `find` in the code cells of notebook `nb_path`."
    nb = json.loads(nb_path.read_text())
    hits = [c for c in nb["cells"] if c["cell_type"] == "code" and find in "".join(c["source"])]
    total = sum("".join(c["source"]).count(find) for c in hits)
    if total != 1: raise ValueError(f"snippet found {total} times in {nb_path.name} (must be exactly once)")
    cell = hits[0]
    cell["source"] = "".join(cell["source"]).replace(find, replace).splitlines(keepends=True)
    nb_path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def env_for(copy: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(copy) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND="Agg")
    return env


def run_tests(copy: Path, notebooks: list[str], timeout: int, why: dict | None = None) -> dict[str, str]:
    "nbdev_test of each notebook in the copy: 'pass', 'fail' or 'timeout' (the failing error's last lines go in `why`)."
    out = {}
    for nb in notebooks:
        try:
            r = subprocess.run(["nbdev_test", "--path", nb], cwd=copy, env=env_for(copy), capture_output=True,
                               text=True, timeout=timeout)
            out[nb] = "pass" if r.returncode == 0 else "fail"
            if r.returncode and why is not None:
                lines = [l for l in (r.stderr + r.stdout).splitlines() if l.strip()]
                err = [i for i, l in enumerate(lines) if "Error" in l and "Traceback" not in l]
                cell = [l.strip() for l in lines if l.startswith("While Executing Cell")]
                why[nb] = (cell[0].rstrip(":") + ": " if cell else "") + " | ".join(lines[err[-1] if err else -1:][:2])[:300]
        except subprocess.TimeoutExpired:
            out[nb] = "timeout"
    return out


def run_one(m: dict, rev: str | None, timeout: int, baseline: bool, keep: bool) -> dict:
    t0 = time.time()
    tmp = Path(tempfile.mkdtemp(prefix=f"mutate-{m['name']}-"))
    res = {"name": m["name"], "what": m.get("what", ""), "tests": m["tests"]}
    try:
        copy_project(tmp, rev)
        if baseline:
            subprocess.run(["nbdev_export"], cwd=tmp, env=env_for(tmp), capture_output=True, check=True)
            res["baseline"] = run_tests(tmp, m["tests"], timeout)
        try: plant(tmp / m["notebook"], m["find"], m["replace"])
        except (ValueError, FileNotFoundError) as e:
            res.update(result="stale", detail=str(e)); return res
        subprocess.run(["nbdev_export"], cwd=tmp, env=env_for(tmp), capture_output=True, check=True)
        probe = subprocess.run([sys.executable, "-c", "import fednbs, sys; print(fednbs.__file__)"], cwd=tmp / "nbs",
                               env=env_for(tmp), capture_output=True, text=True).stdout.strip()
        if not probe.startswith(str(tmp)):
            res.update(result="error", detail=f"fednbs imported from {probe}, not the copy"); return res
        res["why"] = {}
        res["runs"] = run_tests(tmp, m["tests"], timeout, res["why"])
        bad_base = baseline and any(v != "pass" for v in res["baseline"].values())
        caught = any(v != "pass" for v in res["runs"].values())
        res["result"] = "base-fails" if bad_base else ("caught" if caught else "SURVIVED")
        return res
    finally:
        res["seconds"] = round(time.time() - t0, 1)
        if keep: res["copy"] = str(tmp)
        else: shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None):
    p = argparse.ArgumentParser(description="Plant the registered mutations and report which the notebook tests catch.")
    p.add_argument("--only", action="append", default=[], help="run only this mutation (repeatable; a comma-separated list works too)")
    p.add_argument("--list", action="store_true", help="list the registered mutations and exit")
    p.add_argument("-j", "--jobs", type=int, default=1, help="mutations run in parallel (default 1)")
    p.add_argument("--rev", default=None, help="test this git revision (git archive) instead of the working tree")
    p.add_argument("--timeout", type=int, default=900, help="seconds per nbdev_test run (default 900)")
    p.add_argument("--baseline", action="store_true", help="also run the listed notebooks unmutated first")
    p.add_argument("--keep", action="store_true", help="keep the temporary copies (their paths are printed)")
    p.add_argument("-v", "--verbose", action="store_true", help="show the error that made each caught mutation's test fail")
    p.add_argument("--json", default=None, help="write the results to this JSON file")
    a = p.parse_args(argv)
    a.only = [n for o in a.only for n in o.split(",") if n]
    names = [m["name"] for m in MUTATIONS]
    if len(set(names)) != len(names): sys.exit("duplicate mutation names in tools/mutations.py")
    if a.list:
        for m in MUTATIONS: print(f"{m['name']:24} {m['notebook']:34} {m.get('what', '')}")
        return 0
    unknown = [n for n in a.only if n not in names]
    if unknown: sys.exit(f"unknown mutation(s): {', '.join(unknown)}; see --list")
    todo = [m for m in MUTATIONS if not a.only or m["name"] in a.only]
    def one(m):
        r = run_one(m, a.rev, a.timeout, a.baseline, a.keep)
        print(f"[{r['result']}] {r['name']} ({r['seconds']:.0f} s)", flush=True)
        return r
    with ThreadPoolExecutor(max(a.jobs, 1)) as ex:
        results = list(ex.map(one, todo))
    print(f"\n{'mutation':24} {'result':10} {'secs':>6}  tests")
    for r in results:
        runs = ", ".join(f"{Path(k).stem}:{v}" for k, v in r.get("runs", {}).items()) or r.get("detail", "")
        print(f"{r['name']:24} {r['result']:10} {r['seconds']:6.0f}  {runs}")
        if a.verbose:
            for nb, w in r.get("why", {}).items(): print(f"{'':24} {Path(nb).stem}: {w}")
    caught = sum(r["result"] == "caught" for r in results)
    print(f"\ncaught {caught} of {len(results)}" + (f" (at {a.rev})" if a.rev else " (working tree)"))
    if a.json: Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
