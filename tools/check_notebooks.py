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
- `stderr-output`: a committed output on stderr or naming a warning (`UserWarning`, `TqdmWarning`, ...): machine noise.
- `abs-path`: a committed output showing an absolute or temporary path (`/home/...`, `/tmp/...`, `C:\\...`).
- `wide-output`: a line of text output wider than the page column (default 110 characters): show a table.
- `list-no-blank`: a markdown list right after a paragraph line, with no blank line between (renders as one paragraph).
- `colon-hidden`: a markdown cell ending in ":" whose next visible cell shows no code or output.
- `main-signature`: `__main__.` in a rendered output, or an exported function annotated with a union (`Job|None`) of a
  class the notebook defines: show_doc prints such a union with its module, `__main__.Job | None`; quote it (`"Job|None"`).
- `long-float`: a float in an output with more than 4 decimals (`0.949999988079071`): round what you print.

Exit status 1 when anything is reported. Usage: python tools/check_notebooks.py [--max-output N] [--max-width N] [--self-test] [paths...]
"""
import argparse, ast, json, re, sys
from pathlib import Path

DRAWS = re.compile(r"\bplt\.|\bplot_\w+\(|\.imshow\(|\bshow_\w*figure\w*\(|\bdraw_\w+\(")
INTERNAL = re.compile(r"spec\s*§|methods\.md")
EXPORT = re.compile(r"^#\|\s*(export|exports|exporti|exec_doc)\b", re.M)
NO_EVAL = re.compile(r"^#\|\s*eval:\s*false", re.M | re.I)
WARNING = re.compile(r"\b[A-Z]\w*Warning\b(?=:)|^\s*warnings\.warn\(", re.M)
ABS_PATH = re.compile(r"(?:^|[\s'\"(=\[,:])(/(?:home|tmp|usr|work|var|opt|root|Users|private|mnt|srv|scratch)/|[A-Za-z]:\\\\?[\w])|\btmp[a-z0-9_]{8}\b")
LONG_FLOAT = re.compile(r"(?<![\w.])-?\d+\.\d{5,}(?![\d.])")
LIST_ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d+[.)])\s+\S")
FENCE = re.compile(r"^\s*(```|~~~)")

def _code(src: str) -> str:
    "Cell source without notebook directives and shell/magic lines, for parsing."
    return "\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("#|", "!", "%")))

def docs_would_execute(src: str) -> bool:
    "Whether nbdev's docs processing would run this non-export cell for more than its imports (it warns 'Found cells containing imports and other code')."
    if EXPORT.search(src) or NO_EVAL.search(src): return False
    try: tree = ast.parse(_code(src))
    except SyntaxError: return False
    nodes = list(ast.walk(tree))
    return any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in nodes) and any(isinstance(n, (ast.Expr, ast.Assign)) for n in nodes)

def list_without_blank(md: str) -> str|None:
    "The first list item of markdown `md` that directly follows a paragraph line (no blank line), else None."
    prev, fenced = "", False
    for line in md.splitlines():
        if FENCE.match(line): fenced = not fenced; prev = ""; continue
        if fenced: continue
        if LIST_ITEM.match(line) and prev.strip() and not LIST_ITEM.match(prev) and not prev.startswith((" ", "\t", "|", "#", ">")):
            return line.strip()
        if line.strip() and not line.startswith((" ", "\t")) or not line.strip(): prev = line
    return None

def _visible(cell) -> bool:
    "Whether the docs site shows anything of `cell`: markdown, code, outputs, or the show_doc of a public name it exports."
    if cell["cell_type"] == "markdown": return bool("".join(cell.get("source", "")).strip())
    src = "".join(cell.get("source", ""))
    dirs = set(re.findall(r"^#\|\s*([\w-]+)", src, re.M))
    if re.search(r"^#\|\s*include:\s*false", src, re.M | re.I): return False
    if dirs & {"export", "exporti", "hide", "default_exp"} and "exports" not in dirs:  # nbdev removes these cells
        if "export" not in dirs: return False
        try: tree = ast.parse(_code(src))
        except SyntaxError: return True
        return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not n.name.startswith("_") for n in tree.body)
    return bool(cell.get("outputs")) or bool(_code(src).strip())

def next_visible_shows_code(cells: list, i: int) -> bool:
    "Whether the first visible cell after cell `i` is a code cell (its code or its output shows)."
    for c in cells[i + 1:]:
        if _visible(c): return c["cell_type"] == "code"
    return False

def output_problems(out: dict, text: str, max_width: int = 110) -> list[str]:
    "Problems of one committed output whose shown text is `text`: stderr or warnings, paths, wide lines, __main__, long floats."
    probs = []
    if out.get("output_type") == "stream" and out.get("name") == "stderr":
        probs.append(f"stderr-output: {text.strip()[:80]!r}: commit outputs without stderr (fix the warning's cause, or log to stdout)")
    elif WARNING.search(text): probs.append(f"stderr-output: a warning in the output ({WARNING.search(text).group(0)}): fix its cause")
    m = ABS_PATH.search(text)
    if m: probs.append(f"abs-path: {m.group(0).strip()!r}: print paths relative to the run folder")
    data = out.get("data", {})
    plain = "".join(out.get("text", "")) if out.get("output_type") == "stream" else (
        "" if any(k in data for k in ("text/markdown", "text/html", "image/png")) else "".join(data.get("text/plain", "")))
    wide = [l for l in plain.splitlines() if len(l) > max_width]  # text shown as preformatted lines; markdown and HTML wrap
    if wide:
        probs.append(f"wide-output: {len(wide)} line(s) wider than {max_width} characters ({wide[0][:40]!r}...): show a table or wrap")
    if "__main__." in text: probs.append("main-signature: '__main__.' in a rendered output: define the type in an exported cell or set its __module__")
    m = LONG_FLOAT.search(text)
    if m: probs.append(f"long-float: {m.group(0)} has more than 4 decimals: round what you print")
    return probs

def main_unions(sources: list[str]) -> list[str]:
    "`function(param)` for each exported annotation that unions a class defined in these export cells (show_doc prints it as `__main__.X | ...`)."
    trees = []
    for src in sources:
        try: trees.append(ast.parse(_code(src)))
        except SyntaxError: pass
    own = {n.name for t in trees for n in ast.walk(t) if isinstance(n, ast.ClassDef)}
    found = []
    for t in trees:
        for fn in (n for n in ast.walk(t) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs + [a for a in (fn.args.vararg, fn.args.kwarg) if a]
            for name, anno in [(a.arg, a.annotation) for a in args] + [("return", fn.returns)]:
                if anno is None: continue
                unions = [n for n in ast.walk(anno) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr)]
                if any(isinstance(m, ast.Name) and m.id in own for u in unions for m in ast.walk(u)): found.append(f"{fn.name}({name})")
    return found

def check_notebook(path: Path, max_output: int = 20_000, max_width: int = 110) -> list[str]:
    "Problems found in one notebook, one line each."
    nb, problems = json.loads(path.read_text()), []
    draws, images = False, 0
    for i, cell in enumerate(nb["cells"]):
        src = "".join(cell.get("source", ""))
        if cell["cell_type"] == "markdown":
            if INTERNAL.search(src): problems.append(f"{path}: cell {i}: internal-ref: cite the paper or the authors' code, not internal notes")
            line = list_without_blank(src)
            if line: problems.append(f"{path}: cell {i}: list-no-blank: the list item {line!r} follows a paragraph line; put a blank line before the list")
            if src.rstrip().endswith(":") and not next_visible_shows_code(nb["cells"], i):
                problems.append(f"{path}: cell {i}: colon-hidden: the text ends in ':' but the next visible cell shows no code or output; show the cell or reword")
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
            shown = text + "".join(data.get("text/markdown", ""))
            problems += [f"{path}: cell {i}: {msg}" for msg in output_problems(out, shown, max_width)]
    for where in main_unions(["".join(c.get("source", "")) for c in nb["cells"] if c["cell_type"] == "code" and EXPORT.search("".join(c.get("source", "")))]):
        problems.append(f"{path}: main-signature: {where} is annotated with a union of a class this notebook defines; show_doc renders it as __main__.X: quote the annotation")
    if draws and not images: problems.append(f"{path}: no-figure: a cell draws a figure but no image output is committed; execute the notebook and commit it")
    return problems

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("paths", nargs="*", default=["nbs"])
    p.add_argument("--max-output", type=int, default=20_000)
    p.add_argument("--max-width", type=int, default=110, help="widest output line the page column shows")
    p.add_argument("--self-test", action="store_true", help="check that every check fires on a bad notebook and not on a good one")
    a = p.parse_args(argv)
    if a.self_test: return self_test()
    files = sorted(f for q in map(Path, a.paths) for f in ([q] if q.is_file() else q.rglob("*.ipynb"))
                   if not any(part.startswith((".", "_")) for part in f.parts))
    problems = [msg for f in files for msg in check_notebook(f, a.max_output, a.max_width)]
    print("\n".join(problems) or f"ok: {len(files)} notebooks")
    return 1 if problems else 0

def _nb(*cells) -> dict:
    "A notebook of `cells`: ('md', text) or ('code', source, outputs)."
    mk = lambda c: ({"cell_type": "markdown", "metadata": {}, "source": c[1]} if c[0] == "md" else
                    {"cell_type": "code", "metadata": {}, "execution_count": None, "source": c[1], "outputs": c[2] if len(c) > 2 else []})
    return {"cells": [mk(c) for c in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}

def _out(text: str, name: str = "stdout") -> dict: return {"output_type": "stream", "name": name, "text": text}
def _res(text: str) -> dict: return {"output_type": "execute_result", "data": {"text/plain": text}, "metadata": {}}

# each check: a notebook it must flag, and the fixed notebook it must pass
SELF_TESTS = {
    "stderr-output": (_nb(("code", "run()", [_out("a.py:3: UserWarning: something\n", "stderr")])), _nb(("code", "run()", [_out("done\n")]))),
    "stderr-output ": (_nb(("code", "run()", [_out("x.py:21: TqdmWarning: IProgress not found\n")])), _nb(("code", "run()", [_out("Warnings are off\n")]))),
    "abs-path": (_nb(("code", "print(out)", [_out("results in /tmp/tmpab12cd34/run\n")])), _nb(("code", "print(out)", [_out("results in runs/fedbn\n")]))),
    "wide-output": (_nb(("code", "d", [_res("{" + ", ".join(f"'k{i}': {i}" for i in range(30)) + "}")])), _nb(("code", "d", [_res("k0  0\nk1  1")]))),
    "list-no-blank": (_nb(("md", "Ablation switches:\n- `a=False`\n- `b=False`")), _nb(("md", "Ablation switches:\n\n- `a=False`\n- `b=False`"))),
    "colon-hidden ": (_nb(("md", "Settings are checked:"), ("code", "#| export\n@patch\ndef _validate(self: A): pass"), ("md", "Next.")),
                      _nb(("md", "Settings are checked:"), ("code", "#| export\n@patch\ndef _validate(self: A): pass"), ("code", "A(x=-1)", [_out("error\n")]))),
    "colon-hidden": (_nb(("md", "The settings:"), ("code", "#| hide\nsetup()"), ("md", "Next.")),
                     _nb(("md", "The settings:"), ("code", "#| hide\nsetup()"), ("code", "show()", [_out("ok\n")]))),
    "main-signature": (_nb(("code", "show_doc(f)", [{"output_type": "display_data", "metadata": {}, "data": {"text/markdown": "f(x:__main__.Job)"}}])),
                       _nb(("code", "show_doc(f)", [{"output_type": "display_data", "metadata": {}, "data": {"text/markdown": "f(x:fednbs.bench.Job)"}}]))),
    "main-signature ": (_nb(("code", "#| export\nclass Job: pass\ndef f(x: int) -> Job|None: pass")),
                        _nb(("code", "#| export\nclass Job: pass\ndef f(x: int) -> \"Job|None\": pass\ndef g(t: int|None) -> Job: pass"))),
    "docs-exec": (_nb(("code", "import torch\ntorch.set_num_threads(1)")), _nb(("code", "import torch"), ("code", "torch.set_num_threads(1)"))),
    "long-float": (_nb(("code", "acc", [_res("0.949999988079071")])), _nb(("code", "acc", [_res("0.95")]))),
}

def self_test() -> int:
    "Run every check on its bad and its good notebook; exit 1 if one misses or misfires."
    import tempfile
    failed = []
    with tempfile.TemporaryDirectory() as d:
        for kind, (bad, good) in SELF_TESTS.items():
            kind = kind.strip()
            for label, nb, want in (("bad", bad, True), ("good", good, False)):
                f = Path(d) / f"{kind}-{label}.ipynb"; f.write_text(json.dumps(nb))
                got = any(f": {kind}:" in m for m in check_notebook(f))
                if got != want: failed.append(f"{kind}: the {label} notebook was {'not ' if want else ''}flagged")
    print("\n".join(failed) or f"ok: {len(SELF_TESTS)} self-tests")
    return 1 if failed else 0

if __name__ == "__main__": sys.exit(main())
