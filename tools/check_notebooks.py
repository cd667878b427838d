#!/usr/bin/env python
"""Checks that the notebooks render into a docs site that shows what they claim.

For every notebook under nbs/ (or the paths given) it reports:

- `docs-exec`: a code cell that the docs build would execute although it is neither an export cell nor an
  import cell. nbdev's docs processing runs every cell that contains an import statement; a cell that imports
  *and* trains or uses earlier variables breaks the build or makes it slow. Keep imports in import cells.
- `no-figure`: a notebook with a cell that draws a figure but no image committed in its outputs.
- `figure-as-text`: an output that shows a figure as its text (`<Figure size ...>`) with no image: the kernel had no
  figure display (add `%matplotlib inline` to the notebook's import cell so Jupyter shows figures as images).
- `error-output`: a committed output that is a traceback.
- `huge-output`: a committed text output longer than the limit (default 20,000 characters).
- `internal-ref`: a markdown cell that cites internal notes ("spec §") instead of the papers or the authors' code.

Exit status 1 when anything is reported. Usage: python tools/check_notebooks.py [--max-output N] [paths...]
"""
import argparse, ast, json, re, sys
from pathlib import Path

DRAWS = re.compile(r"\bplt\.|\bplot_\w+\(|\.imshow\(|\bshow_\w*figure\w*\(|\bdraw_\w+\(")
INTERNAL = re.compile(r"spec\s*§|methods\.md")
SETUP_CALL = re.compile(r"^\s*[\w.]+\.(set_num_threads|filterwarnings|manual_seed|set_printoptions)\(")
EXPORT = re.compile(r"^#\|\s*(export|exports|exporti|exec_doc)\b", re.M)
NO_EVAL = re.compile(r"^#\|\s*eval:\s*false", re.M | re.I)

def _code(src: str) -> str:
    "Cell source without notebook directives and shell/magic lines, for parsing."
    return "\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("#|", "!", "%")))

def docs_would_execute(src: str) -> bool:
    "Whether nbdev's docs processing would run this non-export cell for anything but imports."
    if EXPORT.search(src) or NO_EVAL.search(src): return False
    try: tree = ast.parse(_code(src))
    except SyntaxError: return False
    has_import = any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(tree))
    setup = lambda n: isinstance(n, (ast.Import, ast.ImportFrom)) or (
        isinstance(n, ast.Expr) and SETUP_CALL.match(ast.unparse(n)) is not None)
    return has_import and not all(setup(n) for n in tree.body)

def check_notebook(path: Path, max_output: int = 20_000) -> list[str]:
    "Problems found in one notebook, one line each."
    nb, problems = json.loads(path.read_text()), []
    draws, images = False, 0
    for i, cell in enumerate(nb["cells"]):
        src = "".join(cell.get("source", ""))
        if cell["cell_type"] == "markdown":
            if INTERNAL.search(src): problems.append(f"{path}: cell {i}: internal-ref: cite the paper or the authors' code, not internal notes")
            continue
        if cell["cell_type"] != "code": continue
        if docs_would_execute(src):
            problems.append(f"{path}: cell {i}: docs-exec: imports beside other code; move the imports into an import cell")
        if not EXPORT.search(src) and not NO_EVAL.search(src) and DRAWS.search(_code(src)): draws = True
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                problems.append(f"{path}: cell {i}: error-output: {out.get('ename')}: commit the notebook executed without errors")
            data = out.get("data", {})
            images += any(k.startswith("image/") for k in data)
            text = "".join(out.get("text", "")) + "".join(data.get("text/plain", ""))
            if text.startswith("<Figure size") and not any(k.startswith("image/") for k in data):
                problems.append(f"{path}: cell {i}: figure-as-text: the figure was committed as text; add %matplotlib inline to the import cell and execute the notebook again")
            if len(text) > max_output: problems.append(f"{path}: cell {i}: huge-output: {len(text)} characters (limit {max_output})")
    if draws and not images: problems.append(f"{path}: no-figure: a cell draws a figure but no image output is committed; execute the notebook and commit it")
    return problems

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("paths", nargs="*", default=["nbs"])
    p.add_argument("--max-output", type=int, default=20_000)
    a = p.parse_args(argv)
    files = sorted(f for q in map(Path, a.paths) for f in ([q] if q.is_file() else q.rglob("*.ipynb"))
                   if not any(part.startswith((".", "_")) for part in f.parts))
    problems = [msg for f in files for msg in check_notebook(f, a.max_output)]
    print("\n".join(problems) or f"ok: {len(files)} notebooks")
    return 1 if problems else 0

if __name__ == "__main__": sys.exit(main())
