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
- `internal-ref`: a markdown cell that cites internal notes ("spec §", the specification files) instead of the papers or
  the authors' code.
- `stderr-output`: a committed output on stderr or naming a warning (`UserWarning`, `TqdmWarning`, ...): machine noise.
- `abs-path`: a committed output showing an absolute or temporary path (`/home/...`, `/tmp/...`, `C:\\...`).
- `wide-output`: a line of text output wider than the page column (`COLUMN`, 82 characters): show a table or wrap.
- `list-no-blank`: a markdown list right after a paragraph line, with no blank line between (renders as one paragraph).
- `colon-hidden`: a markdown cell ending in ":" whose next visible cell shows no code or output.
- `main-signature`: `__main__.` in a rendered output, or an exported function annotated with a union (`Job|None`) of a
  class the notebook defines: show_doc prints such a union with its module, `__main__.Job | None`; quote it (`"Job|None"`).
- `long-float`: a float in an output with more than 4 decimals (`0.949999988079071`): round what you print.
- `wide-code`: a line of shown code wider than the page column: in a code cell the page shows (nbdev shows a code
  cell unless it is exported with `#| export`, hidden, or `#| echo: false` / `#| include: false`) or in a fenced code
  block of a markdown cell.
- `unbacked-number`: a number in a markdown cell with a decimal point and 3+ significant digits (`0.735`, `48.8`) that no
  output of the same notebook prints (rounded to the prose's decimals; a fraction printed as `0.735` backs `73.5`).
  A number quoted from a paper or another page is marked as such: its paragraph names the source (`paper`, `reports`,
  `reported`, `et al.`, `Table N`), or the cell carries the marker `<!-- quoted -->` (invisible on the page).
  Code spans, LaTeX and link targets are not read.
- `changelog-voice`: prose (markdown or an output) that narrates the project's history: "used to" (not "is used to"),
  "earlier version", "for one release", "lived here", "before moving", "moved to `...`", "was renamed", "old name",
  "load average". Pages describe what is.
- `duplicate-cell`: two cells with the same source (30+ characters), or one sentence of 12+ words written twice.
- `nonetype-signature`: an exported function (or the `__init__` of an exported class, or a method given to `show_doc`)
  with a parameter that defaults to `None` and has no annotation: show_doc prints its type as `NoneType`
  (`device:NoneType=None`). Annotate it, `device: str|None = None`. Also `NoneType` in a committed output.
- `private-show-doc`: a show_doc entry for a dunder or private name: an explicit `show_doc(X.__call__)` or
  `show_doc(_helper)`, or an exported top-level `def __getattr__` (nbdev documents top-level dunders; a module
  `__getattr__` renders as "Call self as a function.").
- `cross-page-number`: a number in prose (3+ significant digits) that no output of its page prints but an output of
  another page does: a page that shows our numbers renders them itself, from the committed results file both pages read.
- `quoted-own-number`: a number in a paragraph marked quoted (`<!-- quoted -->`, or one that says another page
  "reports" it) that an output of one of our pages prints: the quoted mark is for other people's numbers (papers);
  ours are printed by a cell. A paragraph that names a paper (`paper`, `et al.`, `Table N`) is left alone.
- `wide-signature`: a line of a signature as the site renders it (`fednbs.core.DocRenderer`, the renderer
  `settings.ini` names) wider than the column; `signature-markup`: a markdown link or backticks inside a rendered
  signature (a code block prints them as typed); `class-signature`: a class whose signature opens with `def`.
- `wide-inline`: an inline code span or inline math wider than the column; `wide-math`: display math wider than the
  column (its width estimated from its symbols); `wide-table`: a markdown table row whose unbreakable contents (code
  spans, math, the longest word of each cell) are together wider than the column, so the table runs past it.
- `broken-link`: a link to a page that does not exist, or to an anchor (`page.ipynb#anchor`, `#anchor`) that no
  heading of that page gives (a markdown heading, or the show_doc heading of a name the page documents).
- `pip-install`: a `pip install fednbs` command (with or without extras) where fednbs installs from a clone
  (`git clone`, then `pip install -e .` in it, as the README shows).
- `changelog-voice` also reads docstrings, and knows machine-load phrases ("shared with other work", "the wait for a
  core", "a busy CPU").
- `heading-showdoc`: a markdown cell with a heading `X` right before the cell that documents `X` (nbdev gives the
  show_doc its own heading, so the page shows the name twice, one under the other).
- `tall-page`: a page whose rendered height, estimated by `page_height`, is over `MAX_PAGE_PX` (21,000 px: about
  20,000, with the estimate's margin): split it into pages of one idea each. The estimate counts wrapped prose lines
  (92 characters a line), shown code and output lines, figures and one signature block per exported function or
  class; its weights are the site's line heights, scaled to the heights measured on the rendered site: four pages of
  23,300-28,400 px come out within 4 %, nine pages measured at 20,000-22,700 px at 19,700-22,600.

The page column (`COLUMN`, 82 characters) is measured from the site's CSS: Quarto sets the root font size to 17px
(`$font-size-root`), the floating-sidebar grid gives the body column `calc(800px - 3em)` = 749px once the window is
wider than about 1350px (at 1400px every other track is at its maximum), code blocks and outputs use
`$code-block-font-size` = 0.875em = 14.875px, and the widest monospace font of Bootstrap's stack (Menlo, DejaVu Sans
Mono) advances 0.602em = 8.955px a character. A code block pads 0.4em (11.9px in all): (749 - 11.9) / 8.955 = 82.3.
An output block is indented by nbs/styles.css (0.6rem margin + 2px border = 12.2px): (749 - 12.2) / 8.955 = 82.3.
So 82 characters show without a scroll bar, in both. In narrower windows (a 1280px window leaves a 676px column)
nbs/styles.css shrinks every code block's font to the column's width / 49.4 (82 x 0.602em, after ~13px of padding),
so the same 82 characters still fit.

`--report FILE` writes every finding, per notebook and cell, as markdown.

Exit status 1 when anything is reported.
Usage: python tools/check_notebooks.py [--max-output N] [--max-width N] [--report FILE] [--self-test] [paths...]
"""
import argparse, ast, collections, json, re, sys
from pathlib import Path

DRAWS = re.compile(r"\bplt\.|\bplot_\w+\(|\.imshow\(|\bshow_\w*figure\w*\(|\bdraw_\w+\(")
INTERNAL = re.compile(r"spec\s*§|methods\.md|baselines-2023\.md")
EXPORT = re.compile(r"^#\|\s*(export|exports|exporti|exec_doc)\b", re.M)
NO_EVAL = re.compile(r"^#\|\s*eval:\s*false", re.M | re.I)
WARNING = re.compile(r"\b[A-Z]\w*Warning\b(?=:)|^\s*warnings\.warn\(", re.M)
ABS_PATH = re.compile(r"(?:^|[\s'\"(=\[,:])(/(?:home|tmp|usr|work|var|opt|root|Users|private|mnt|srv|scratch)/|[A-Za-z]:\\\\?[\w])|\btmp[a-z0-9_]{8}\b")
LONG_FLOAT = re.compile(r"(?<![\w.])-?\d+\.\d{5,}(?![\d.])")
LIST_ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d+[.)])\s+\S")
FENCE = re.compile(r"^\s*(```|~~~)")
COLUMN = 82          # characters the page column shows in a code block or an output (derivation in the docstring)

PROSE_NUMBER = re.compile(r"(?<![\w.\-/])(\d+\.\d+)(?![\w]|\.\d)")
ANY_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
QUOTED_MARK = "<!-- quoted -->"
QUOTED_SOURCE = re.compile(r"\bpapers?\b|\breport(?:s|ed)?\b|\bet al\.|\bTable \d", re.I)
CHANGELOG = re.compile(r"\bused to\b|\b(?:earlier|previous|older|old) versions?\b|\bfor one (?:more )?release\b|"
                       r"\blived (?:here|there|in)\b|\bbefore moving\b|\bmoved (?:here|there|from\b|to `|into `)|"
                       r"\bthat moved\b|\b(?:was|were|been|is) renamed\b|\brenamed (?:to|from|as)\b|\bold names?\b|\bload average\b|"
                       r"\b(?:is|are) now\b|\bno longer\b|\bonce (?:gave|raised|failed|crashed|printed)\b|\bas (?:it|they) (?:ran|did|was|were) before\b|"
                       r"\b(?:runs?|files?|checkpoints?) made before\b|\bbecame the default\b|"
                       # the load of the machine a page was executed on is not the reader's
                       r"\bshared with other (?:work|jobs|sessions|processes|users)\b|\bwait(?:ing)? for a core\b|\bbusy (?:CPU|machine|host)\b|"
                       r"\bsmall, busy\b|\bother sessions?\b|\bmachine'?s load\b", re.I)
PASSIVE = {"is", "are", "was", "were", "be", "been", "being", "get", "gets", "got", "getting"}
SHOW_DOC = re.compile(r"\bshow_doc\(\s*([\w.]+)")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")

def _strip_md(md: str) -> str:
    "Markdown prose without code fences, code spans, LaTeX, HTML comments and link targets."
    md = re.sub(r"^\s*(```|~~~).*?^\s*\1", "", md, flags=re.S | re.M)
    md = re.sub(r"\$\$.*?\$\$", "", md, flags=re.S)
    md = re.sub(r"(?<!\\)\$[^$\n]+\$", "", md)
    md = re.sub(r"`[^`\n]*`", "", md)
    md = re.sub(r"<!--.*?-->", "", md, flags=re.S)
    return re.sub(r"\]\([^)\s]*\)", "]", md)

def _sig_digits(num: str) -> int: return len(num.replace(".", "").lstrip("0"))

def output_numbers(nb: dict) -> set[str]:
    "Every number printed in a committed output of `nb` (text, markdown or HTML), as written."
    found = set()
    for c in nb["cells"]:
        for o in c.get("outputs", []):
            d = o.get("data", {})
            text = "".join(o.get("text", "")) + "".join(d.get("text/plain", "")) + "".join(d.get("text/markdown", "")) + "".join(d.get("text/html", ""))
            found |= set(ANY_NUMBER.findall(text))
    return found

def backed(num: str, printed: set[str]) -> bool:
    "Whether prose number `num` is a printed number rounded to `num`'s decimals (or a printed fraction shown in %)."
    decimals = len(num.split(".")[1]) if "." in num else 0
    want = float(num)
    for p in printed:
        try: v = float(p)
        except ValueError: continue
        for x in (v, v * 100):
            if abs(round(x, decimals) - want) < 10 ** -(decimals + 3): return True
    return False

def unbacked_numbers(md: str, printed: set[str]) -> list[str]:
    "Numbers of 3+ significant digits in markdown `md` that no output backs, outside quoted paragraphs."
    if QUOTED_MARK in md: return []
    found = []
    for para in re.split(r"\n\s*\n", _strip_md(md)):
        if QUOTED_SOURCE.search(para): continue
        found += [m.group(1) for m in PROSE_NUMBER.finditer(para) if _sig_digits(m.group(1)) >= 3
                  and not VERSION_BEFORE.search(para[:m.start()]) and not backed(m.group(1), printed)]
    return found

OUR_SOURCE = re.compile(r"\bpapers?\b|\bet al\.|\bTable \d", re.I)

def page_numbers(md: str, printed: set[str], elsewhere: set[str]) -> tuple[list[str], list[str]]:
    "Prose numbers of `md` that another page prints: (unquoted ones not printed here, quoted ones)."
    cross, quoted = [], []
    marked = QUOTED_MARK in md
    for para in re.split(r"\n\s*\n", _strip_md(md)):
        if OUR_SOURCE.search(para): continue
        is_quoted = marked or bool(QUOTED_SOURCE.search(para))
        for m in PROSE_NUMBER.finditer(para):
            num = m.group(1)
            if _sig_digits(num) < 3 or VERSION_BEFORE.search(para[:m.start()]) or backed(num, printed): continue
            if backed(num, elsewhere): (quoted if is_quoted else cross).append(num)
    return cross, quoted

def docstrings(src: str) -> list[str]:
    "The docstrings of the functions and classes an export cell defines."
    if not EXPORT.search(src): return []
    try: tree = ast.parse(_code(src))
    except SyntaxError: return []
    return [d for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            for d in [ast.get_docstring(n)] if d]

PX_PER_CODE_CHAR, PX_PER_CHAR, PX_PER_MATH_CHAR, COLUMN_PX = 8.955, 8.3, 10.5, 749   # see the module docstring

def math_width(tex: str) -> float:
    "Estimated rendered width in pixels of LaTeX `tex`: a command counts as one symbol, a fraction as its wider part."
    tex = re.sub(r"\\(?:left|right|big|Big|bigg|Bigg|displaystyle|mathrm|mathbf|mathcal|operatorname|text|quad|qquad)(?![A-Za-z])|\\[,;!]", " ", tex)
    while True:
        new = re.sub(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", lambda m: max(m.group(1), m.group(2), key=len), tex)
        if new == tex: break
        tex = new
    tex = re.sub(r"\\[A-Za-z]+", "x", tex)
    sub = len(re.findall(r"[_^]\{?[^{}\s]*\}?", tex))
    visible = len(re.sub(r"[{}\s_^&\\]", "", tex))
    return (visible - 0.3 * sub) * PX_PER_MATH_CHAR

def wide_spans(md: str, column_px: float = COLUMN_PX) -> list[str]:
    "Inline code, inline math and display math of markdown `md` wider than the column (tables are measured apart)."
    text = re.sub(r"^\s*(```|~~~).*?^\s*\1", "", md, flags=re.S | re.M)
    widest = lambda tex: max(math_width(line) for line in re.split(r"\\\\", tex))   # an aligned block breaks at \\\\
    found = [f"display math ({round(widest(m))} px)" for m in re.findall(r"\$\$(.*?)\$\$", text, re.S) if widest(m) > column_px]
    text = re.sub(r"\$\$.*?\$\$", "", text, flags=re.S)
    rows = [l for l in text.splitlines() if l.lstrip().startswith("|")]
    text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("|"))
    found += [f"inline code `{c[:30]}...`" for c in re.findall(r"`([^`\n]+)`", text) if len(c) * PX_PER_CODE_CHAR > column_px]
    found += [f"inline math ${m[:30]}...$" for m in re.findall(r"(?<![\\$])\$([^$\n]+)\$", text) if math_width(m) > column_px]
    return found

def row_width(row: str) -> float:
    "Width in pixels a markdown table row needs at least: per cell its widest unbreakable piece, plus padding."
    cells = [c for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]
    total = 0.0
    for c in cells:
        pieces = [len(x) * PX_PER_CODE_CHAR for x in re.findall(r"`([^`]+)`", c)]
        pieces += [math_width(x) for x in re.findall(r"\$([^$]+)\$", c)]
        words = re.sub(r"`[^`]+`|\$[^$]+\$|\]\([^)]*\)", " ", c).split()
        pieces += [len(w) * PX_PER_CHAR for w in words]
        total += max(pieces, default=0) + 16
    return total

def wide_table_rows(md: str, column_px: float = COLUMN_PX) -> list[str]:
    "Rows of the markdown tables in `md` that cannot fit the column however the cells wrap."
    text = re.sub(r"^\s*(```|~~~).*?^\s*\1", "", md, flags=re.S | re.M)
    return [l.strip() for l in text.splitlines() if l.lstrip().startswith("|") and not re.match(r"^\s*\|[\s:|-]+\|?\s*$", l)
            and row_width(l) > column_px]

def heading_id(text: str) -> str:
    "The identifier pandoc (Quarto) gives a heading: plain text, lower case, spaces to hyphens, leading non-letters dropped."
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[`*]", "", text).strip().lower()
    text = re.sub(r"[^\w\s.-]", "", text)
    text = re.sub(r"\s+", "-", text)
    return re.sub(r"^[^a-z]+", "", text)

def page_anchors(nb: dict) -> set[str]:
    "Anchors of a notebook's page: its markdown headings (explicit `{#id}` ones too) and its show_doc headings."
    ids = set()
    for c in nb["cells"]:
        src = "".join(c.get("source", ""))
        if c["cell_type"] == "markdown":
            for line in _strip_fences(src).splitlines():
                m = HEADING.match(line)
                if not m: continue
                explicit = re.search(r"\{#([\w.-]+)[^}]*\}\s*$", m.group(1))
                ids.add(explicit.group(1) if explicit else heading_id(m.group(1)))
        else:
            ids |= {heading_id(n) for n in documented_names(src)}
            ids |= {t.lower() for t in _showdoc_targets(src)}
            for o in c.get("outputs", []):
                for h in re.findall(r"^#+\s+(.+)$", "".join(o.get("data", {}).get("text/markdown", "")), re.M): ids.add(heading_id(h))
    return ids

SITE_URL, SITE_ROOT = "https://fednbs.github.io/fednbs/", Path("nbs")   # settings.ini's doc_host/doc_baseurl, the notebooks
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")

def broken_links(md: str, here: Path, anchors_of) -> list[str]:
    "Relative links of markdown `md` (in notebook `here`) to a missing page or to an anchor its page lacks."
    found = []
    for target in LINK.findall(_strip_fences(md)):
        on_site = target.startswith(SITE_URL)   # the docs site's own address: the page of nbs/ it renders
        if re.match(r"^[a-z]+:|^/|^mailto:", target) and not on_site: continue
        page, _, anchor = (target[len(SITE_URL):] if on_site else target).partition("#")
        dest = here if not page else ((SITE_ROOT if on_site else here.parent) / page)
        if page and dest.suffix == ".html":   # nbdev names a page after its notebook without the number: 31_fedco -> fedco.html
            dest = next((f for f in sorted(dest.parent.glob("*.ipynb")) if re.sub(r"^\d+_", "", f.stem) == dest.stem), dest.with_suffix(".ipynb"))
        if not dest.exists():
            found.append(f"{target} (no such page)"); continue
        if anchor and dest.suffix == ".ipynb" and anchor not in anchors_of(dest): found.append(f"{target} (no such anchor)")
    return found

PIP_FEDNBS = re.compile(r"\bpip3? install\s+(?:-[-\w]+\s+)*[\"']?fednbs\b(?!\S*\.git|\s*@\s*git\+)")   # from PyPI, not from git

def changelog_phrases(text: str) -> list[str]:
    "History-telling phrases in `text` ('is used to' and 'used to' after a comma describe a use, not a past)."
    found = []
    for m in CHANGELOG.finditer(text):
        if m.group(0).lower() == "used to":
            before = text[:m.start()].rstrip()
            prev = re.findall(r"[\w']+$", before)
            if before.endswith(",") or (prev and prev[0].lower() in PASSIVE): continue
        found.append(m.group(0))
    return found

def _sentences(md: str) -> list[str]:
    return [" ".join(s.split()) for s in re.split(r"(?<=[.!?])\s+", _strip_md(md)) if len(s.split()) >= 12]

def _directives(src: str) -> dict[str, str]:
    return {m.group(1).lower(): m.group(2).strip() for m in re.finditer(r"^#\|\s*([\w-]+):?\s*(.*)$", src, re.M)}

def code_shown(src: str) -> bool:
    "Whether the docs site shows this code cell's source (not exported, hidden, echo: false or include: false)."
    d = _directives(src)
    if "hide" in d or d.get("echo", "").lower() == "false" or d.get("include", "").lower() == "false": return False
    if {"export", "exporti", "default_exp"} & set(d) and "exports" not in d: return False
    return True

def _showdoc_targets(src: str) -> list[str]: return SHOW_DOC.findall(_code(src))

def _auto_doc_defs(src: str) -> list[ast.AST]:
    "Top-level definitions nbdev documents after an export cell: public names and dunders (its `_def_names`)."
    d = _directives(src)
    if not ({"export", "exports", "exec_doc"} & set(d)) or "hide" in d or d.get("include", "").lower() == "false": return []
    try: tree = ast.parse(_code(src))
    except SyntaxError: return []
    return [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and (not n.name.startswith("_") or n.name.startswith("__"))]

def _none_unannotated(fn) -> list[str]:
    a = fn.args
    pos = a.posonlyargs + a.args
    pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults)) + [(p, dflt) for p, dflt in zip(a.kwonlyargs, a.kw_defaults) if dflt is not None]
    return [p.arg for p, dflt in pairs if p.annotation is None and isinstance(dflt, ast.Constant) and dflt.value is None]

def nonetype_params(cells: list[str]) -> list[str]:
    "`name(param)` for each documented signature whose parameter defaults to None without an annotation."
    found, classes = [], {}
    trees = []
    for src in cells:
        try: trees.append((src, ast.parse(_code(src))))
        except SyntaxError: pass
    for _, t in trees:
        for n in ast.walk(t):
            if isinstance(n, ast.ClassDef): classes[n.name] = n
    for src, t in trees:
        for n in _auto_doc_defs(src):
            fns = [n] if not isinstance(n, ast.ClassDef) else [f for f in n.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"]
            found += [f"{n.name}({p})" for f in fns for p in _none_unannotated(f)]
        for target in _showdoc_targets(src):
            parts = target.split(".")
            if len(parts) == 2 and parts[0] in classes:
                for f in classes[parts[0]].body:
                    if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == parts[1]:
                        found += [f"{target}({p})" for p in _none_unannotated(f)]
    return sorted(set(found), key=found.index)

def private_docs(src: str) -> list[str]:
    "Dunder or private names this cell puts on the page as show_doc entries."
    names = [t for t in _showdoc_targets(src) if t.split(".")[-1].startswith("_")]
    return names + [n.name for n in _auto_doc_defs(src) if n.name.startswith("__")]

def documented_names(src: str) -> list[str]:
    "Names whose show_doc heading this code cell puts on the page."
    return [n.name for n in _auto_doc_defs(src)] + [t.split(".")[-1] for t in _showdoc_targets(src)]

def heading_names(md: str) -> list[str]:
    "The names the headings of markdown `md` give (backticks, emphasis and a trailing `()` dropped)."
    return [re.sub(r"[`*]|\(\)$", "", m.group(1)).strip().split(".")[-1] for m in map(HEADING.match, _strip_fences(md).splitlines()) if m]

def fenced_lines(md: str) -> list[str]:
    "The lines inside the fenced code blocks of markdown `md`."
    out, fenced = [], False
    for line in md.splitlines():
        if FENCE.match(line): fenced = not fenced; continue
        if fenced: out.append(line)
    return out

def _strip_fences(md: str) -> str: return re.sub(r"^\s*(```|~~~).*?^\s*\1", "", md, flags=re.S | re.M)

VERSION_BEFORE = re.compile(r"(?:==|>=|<=|~=|\bv|\b(?:version|python|flwr|flower|torch|pytorch|nbdev|quarto|numpy|release)\s*)$", re.I)

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

CHECKS_BOOL = ("allclose", "equal", "isclose", "array_equal", "isinstance", "issubclass", "isnan", "isfinite")

def _is_check(node) -> bool:
    "Whether the expression `node` is a comparison or a call that answers yes or no (`torch.allclose(a, b)`, `isinstance(x, T)`)."
    if isinstance(node, ast.Compare) or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)): return True
    if isinstance(node, ast.Call):
        f = node.func
        return (f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None) in CHECKS_BOOL
    return False

def printed_checks(src: str) -> list[str]:
    "The `print(...)` calls of a test cell (a code cell that is not exported) that print a check instead of asserting it (`print(a == b)`)."
    if EXPORT.search(src): return []
    try: tree = ast.parse(_code(src))
    except SyntaxError: return []
    found, todo = [], list(tree.body)
    while todo:
        n = todo.pop(0)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)): continue   # code that a test calls
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print"
                and any(_is_check(a) for a in n.args)):
            found.append(ast.unparse(n)[:60])
        todo += list(ast.iter_child_nodes(n))
    return found

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

def output_problems(out: dict, text: str, max_width: int = COLUMN) -> list[str]:
    "Problems of one committed output whose shown text is `text`: stderr or warnings, paths, wide lines, __main__, long floats, NoneType, history."
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
        widest = max(map(len, wide))
        probs.append(f"wide-output: {len(wide)} line(s) wider than {max_width} characters (widest {widest}: {wide[0][:40]!r}...): show a table or wrap")
    if "__main__." in text: probs.append("main-signature: '__main__.' in a rendered output: define the type in an exported cell or set its __module__")
    m = LONG_FLOAT.search(text)
    if m: probs.append(f"long-float: {m.group(0)} has more than 4 decimals: round what you print")
    if "NoneType" in text: probs.append("nonetype-signature: 'NoneType' in an output: annotate the parameter (`x: T|None = None`)")
    for phrase in changelog_phrases(text): probs.append(f"changelog-voice: {phrase!r} in an output: print what is, not its history")
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

def check_notebook(path: Path, max_output: int = 20_000, max_width: int = COLUMN, elsewhere: set[str] = frozenset(),
                   anchors_of=None, signatures: bool = False) -> list[str]:
    """Problems found in one notebook, one line each: `path: cell i: check: message`. `elsewhere`: the numbers other pages
    print; `anchors_of`: a page's anchors (for links); `signatures`: render the documented names' signatures."""
    nb, problems = json.loads(path.read_text()), []
    anchors_of = anchors_of or (lambda f: page_anchors(json.loads(Path(f).read_text())))
    cells = nb["cells"]
    draws, images = False, 0
    printed = output_numbers(nb)
    seen_cells, seen_sentences = {}, {}
    for i, cell in enumerate(cells):
        src = "".join(cell.get("source", ""))
        where = f"{path}: cell {i}"
        key = (cell["cell_type"], " ".join(src.split()))
        if len(key[1]) >= 30 and not src.lstrip().startswith("#| default_exp"):
            if key in seen_cells: problems.append(f"{where}: duplicate-cell: the same source as cell {seen_cells[key]}: keep one")
            else: seen_cells[key] = i
        if cell["cell_type"] == "markdown":
            if INTERNAL.search(src): problems.append(f"{where}: internal-ref: cite the paper or the authors' code, not internal notes")
            line = list_without_blank(src)
            if line: problems.append(f"{where}: list-no-blank: the list item {line!r} follows a paragraph line; put a blank line before the list")
            if src.rstrip().endswith(":") and not next_visible_shows_code(cells, i):
                problems.append(f"{where}: colon-hidden: the text ends in ':' but the next visible cell shows no code or output; show the cell or reword")
            fenced = [l for l in fenced_lines(src) if len(l) > max_width]
            if fenced: problems.append(f"{where}: wide-code: {len(fenced)} line(s) of a code block wider than {max_width} characters ({fenced[0].strip()[:40]!r}...): wrap the line")
            nums = unbacked_numbers(src, printed)
            if nums: problems.append(f"{where}: unbacked-number: {', '.join(nums[:6])} not printed by any output of this notebook: print it from a cell, or mark it quoted (name the paper, or add {QUOTED_MARK})")
            for phrase in changelog_phrases(_strip_md(src)):
                problems.append(f"{where}: changelog-voice: {phrase!r}: describe what is, for a reader arriving today")
            cross, quoted = page_numbers(src, printed, elsewhere)
            if cross: problems.append(f"{where}: cross-page-number: {', '.join(cross[:6])} printed by another page, not by this one: render it here from the committed results file")
            if quoted: problems.append(f"{where}: quoted-own-number: {', '.join(quoted[:6])} marked quoted but printed by one of our pages: print it from a cell (quoted is for papers' numbers)")
            for what in wide_spans(src): problems.append(f"{where}: wide-inline: {what} wider than the column: shorten it or show it as a code block" if not what.startswith("display") else f"{where}: wide-math: {what} wider than the column ({COLUMN_PX} px): split the equation over lines (aligned)")
            rows = wide_table_rows(src)
            if rows: problems.append(f"{where}: wide-table: {len(rows)} table row(s) wider than the column however they wrap ({rows[0][:40]!r}...): shorten code spans and math in the cells")
            for link in broken_links(src, path, anchors_of): problems.append(f"{where}: broken-link: {link}: link to a page and a heading that exist")
            for s in _sentences(src):
                if s in seen_sentences and seen_sentences[s] != i:
                    problems.append(f"{where}: duplicate-cell: a sentence of cell {seen_sentences[s]} written again ({s[:50]!r}...): keep one")
                seen_sentences.setdefault(s, i)
            names = heading_names(src)
            nxt = next((j for j in range(i + 1, len(cells)) if _visible(cells[j])), None)
            if names and nxt is not None and cells[nxt]["cell_type"] == "code":
                docs = documented_names("".join(cells[nxt].get("source", "")))
                name = docs[0] if docs else None
                if name in names:
                    problems.append(f"{where}: heading-showdoc: the section heading {name!r} is followed at once by show_doc's own heading {name!r}: drop or rename the section heading")
            continue
        if cell["cell_type"] != "code": continue
        for doc in docstrings(src):
            for phrase in changelog_phrases(doc): problems.append(f"{where}: changelog-voice: {phrase!r} in a docstring: describe what is")
        if docs_would_execute(src):
            problems.append(f"{where}: docs-exec: imports beside other code; move the imports into an import cell")
        if not EXPORT.search(src) and not NO_EVAL.search(src) and DRAWS.search(_code(src)): draws = True
        if code_shown(src):
            wide = [l for l in src.splitlines() if len(l) > max_width and not l.lstrip().startswith("#|")]
            if wide: problems.append(f"{where}: wide-code: {len(wide)} shown code line(s) wider than {max_width} characters ({wide[0].strip()[:40]!r}...): wrap the line")
        for shown in printed_checks(src):
            problems.append(f"{where}: print-check: `{shown}` prints a check that nothing asserts; assert it (assert, test_eq, test_close)")
        for name in private_docs(src):
            problems.append(f"{where}: private-show-doc: {name!r} gets a show_doc entry: document public names only (a module __getattr__ belongs in an exporti cell)")
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                problems.append(f"{where}: error-output: {out.get('ename')}: commit the notebook executed without errors")
            data = out.get("data", {})
            images += any(k.startswith("image/") for k in data)
            text = "".join(out.get("text", "")) + "".join(data.get("text/plain", ""))
            if text.startswith("<Figure size") and not any(k.startswith("image/") for k in data):
                problems.append(f"{where}: figure-as-text: the figure was committed as text; add %matplotlib inline to the import cell and execute the notebook again")
            if len(text) > max_output: problems.append(f"{where}: huge-output: {len(text)} characters (limit {max_output})")
            shown = text + "".join(data.get("text/markdown", ""))
            problems += [f"{where}: {msg}" for msg in output_problems(out, shown, max_width)]
    code_cells = ["".join(c.get("source", "")) for c in cells if c["cell_type"] == "code"]
    for where in main_unions([s for s in code_cells if EXPORT.search(s)]):
        problems.append(f"{path}: main-signature: {where} is annotated with a union of a class this notebook defines; show_doc renders it as __main__.X: quote the annotation")
    for where in nonetype_params(code_cells):
        problems.append(f"{path}: nonetype-signature: {where} defaults to None without an annotation; show_doc prints NoneType: annotate it (`x: T|None = None`)")
    for i, cell in enumerate(cells):
        text = "".join(cell.get("source", "")) if cell["cell_type"] == "markdown" else "\n".join(
            l for l in "".join(cell.get("source", "")).splitlines() if l.lstrip().startswith(("!", "#", "%")) or "pip install" in l)
        if PIP_FEDNBS.search(text): problems.append(f"{path}: cell {i}: pip-install: {PIP_FEDNBS.search(text).group(0)!r}: fednbs installs from a clone (git clone, then pip install -e . in it)")
    if signatures:
        for name, md, is_class in rendered_signatures(nb):
            problems += [f"{path}: {name}: {msg}" for msg in signature_problems(md, is_class, max_width)]
    if draws and not images: problems.append(f"{path}: no-figure: a cell draws a figure but no image output is committed; execute the notebook and commit it")
    if (h := page_height(nb)) > MAX_PAGE_PX:
        problems.append(f"{path}: tall-page: about {h / 1000:.1f}k px rendered (limit {MAX_PAGE_PX / 1000:.0f}k): split it into pages of one idea each")
    return problems

def signature_problems(md: str, is_class: bool, max_width: int = COLUMN) -> list[str]:
    "Problems of one show_doc entry as the site renders it (markdown `md`): wide lines, markup, a class shown as def."
    m = re.search(r"```python\n(.*?)\n```", md, re.S)
    if not m: return []
    sig, probs = m.group(1), []
    wide = [l for l in sig.splitlines() if len(l) > max_width]
    if wide: probs.append(f"wide-signature: {len(wide)} line(s) wider than {max_width} characters ({wide[0].strip()[:40]!r}...): shorten the parameter's comment and explain it in the docstring")
    if "`" in sig or re.search(r"\]\(", sig): probs.append("signature-markup: a markdown link or backticks in the signature (a code block shows them as typed): write the comment as plain text")
    if is_class and re.match(r"\s*(?:async )?def ", sig): probs.append("class-signature: a class's signature opens with 'def': render it with fednbs.core.DocRenderer")
    return probs

def rendered_signatures(nb: dict) -> list[tuple[str, str, bool]]:
    "(name, show_doc markdown, is a class) for each name the notebook's page documents, rendered by the site's renderer."
    import importlib, inspect
    from fednbs.core import DocRenderer
    cells = ["".join(c.get("source", "")) for c in nb["cells"] if c["cell_type"] == "code"]
    mod = next((m.group(1) for s in cells for m in [re.search(r"^#\|\s*default_exp\s+(\S+)", s, re.M)] if m), None)
    if mod is None: return []
    module = importlib.import_module(f"fednbs.{mod}")
    out = []
    for src in cells:
        for name in [n.name for n in _auto_doc_defs(src)] + _showdoc_targets(src):
            obj = module
            for part in name.split("."): obj = getattr(obj, part, None)
            if obj is None or not callable(obj) or name.split(".")[-1].startswith("_"): continue
            out.append((name, DocRenderer(obj)._repr_markdown_(), inspect.isclass(obj)))
    return out

FINDING = re.compile(r"^(?P<path>.+?\.ipynb): (?:cell (?P<cell>\d+): |[\w.]+: )?(?P<kind>[\w-]+): (?P<msg>.*)$")

def write_report(findings: list[str], files: list[Path], out: Path):
    "Every finding, per notebook and cell, as markdown."
    by_nb: dict[str, list[str]] = {}
    for f in findings:
        m = FINDING.match(f)
        by_nb.setdefault(m["path"] if m else "?", []).append(f)
    lines = [f"# Notebook check report", "", f"{len(findings)} findings in {len(by_nb)} of {len(files)} notebooks.", ""]
    for nb in sorted(by_nb):
        lines += [f"## {nb}", ""]
        for f in by_nb[nb]:
            m = FINDING.match(f)
            cell = f"cell {m['cell']}" if m and m["cell"] else "notebook"
            lines.append(f"- {cell}: **{m['kind'] if m else '?'}**: {m['msg'] if m else f}")
        lines.append("")
    out.write_text("\n".join(lines))

MARKDOWN_FILES = ("README.md", "tools/README.md", "tools/fidelity/README.md")

def markdown_file_problems(files: list[Path], anchors_of) -> list[str]:
    "pip-install and broken-link findings in the project's markdown files (README, examples)."
    found = []
    for f in files:
        md = f.read_text()
        m = PIP_FEDNBS.search(md)
        if m: found.append(f"{f}: pip-install: {m.group(0)!r}: fednbs installs from a clone (git clone, then pip install -e . in it)")
        found += [f"{f}: broken-link: {link}: link to a page and a heading that exist" for link in broken_links(md, f, anchors_of)
                  if not link.split(" (")[0].startswith("nbs/") or "anchor" in link]
    return found

def navbar_version_problems(quarto: Path, settings: Path) -> list[str]:
    "`navbar-version`: the version the site's navbar shows differs from settings.ini's."
    if not (quarto.exists() and settings.exists()): return []
    shown = re.search(r'text:\s*"v([\d.]+\w*)"', quarto.read_text())
    version = re.search(r"^version\s*=\s*(\S+)", settings.read_text(), re.M)
    if shown and version and shown.group(1) != version.group(1):
        return [f"{quarto}: navbar-version: the navbar shows v{shown.group(1)}, settings.ini says {version.group(1)}: update the navbar"]
    return []

def sidebar_problems(sidebar: Path, files: list[Path]) -> list[str]:
    "`sidebar`: a page the sidebar lists that does not exist, or a notebook of the site the sidebar leaves out."
    if not sidebar.exists(): return []
    listed = re.findall(r"(?:^\s*-\s*|href:\s*)([\w./-]+\.(?:ipynb|md|qmd))\s*$", sidebar.read_text(), re.M)
    found = [f"{sidebar}: sidebar: {x} is listed but does not exist" for x in listed if not (sidebar.parent / x).exists()]
    pages = {str(f.relative_to(sidebar.parent)) for f in files if f.is_relative_to(sidebar.parent)}
    found += [f"{sidebar}: sidebar: {x} is not in the sidebar: add it to its section" for x in sorted(pages - set(listed))]
    return found

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("paths", nargs="*", default=["nbs"])
    p.add_argument("--max-output", type=int, default=20_000)
    p.add_argument("--max-width", type=int, default=COLUMN, help="widest code or output line the page column shows")
    p.add_argument("--no-signatures", action="store_true", help="skip rendering the signatures (needs fednbs importable)")
    p.add_argument("--report", type=Path, help="write every finding, per notebook and cell, to this markdown file")
    p.add_argument("--self-test", action="store_true", help="check that every check fires on a bad notebook and not on a good one")
    a = p.parse_args(argv)
    if a.self_test: return self_test()
    files = sorted(f for q in map(Path, a.paths) for f in ([q] if q.is_file() else q.rglob("*.ipynb"))
                   if not any(part.startswith((".", "_")) for part in f.parts))
    notebooks = {f: json.loads(f.read_text()) for f in files}
    printed = {f: output_numbers(nb) for f, nb in notebooks.items()}
    anchors = {}
    def anchors_of(f):
        f = Path(f)
        if f not in anchors: anchors[f] = page_anchors(notebooks.get(f) or json.loads(f.read_text()))
        return anchors[f]
    pages_printing = collections.Counter(n for nums in printed.values() for n in nums)   # number -> pages that print it
    elsewhere = lambda f: {n for n, k in pages_printing.items() if k > (n in printed[f])}
    findings = [msg for f in files for msg in check_notebook(
        f, a.max_output, a.max_width, elsewhere=elsewhere(f),
        anchors_of=anchors_of, signatures=not a.no_signatures)]
    findings += navbar_version_problems(Path("_quarto.yml"), Path("settings.ini"))
    if a.paths == ["nbs"]: findings += sidebar_problems(Path("nbs/sidebar.yml"), files)
    findings += markdown_file_problems([Path(x) for x in MARKDOWN_FILES if Path(x).exists()] + sorted(Path("examples").glob("**/*.md")), anchors_of)
    if a.report: write_report(findings, files, a.report)
    print("\n".join(findings) or f"ok: {len(files)} notebooks")
    return 1 if findings else 0

MAX_PAGE_PX = 21_000
PAGE_PX = {"prose": 28.0, "code": 23.1, "output": 23.1, "figure": 418.0, "signature": 132.0}   # px per unit (docstring)

def page_height(nb: dict) -> float:
    "The estimated rendered height of notebook `nb` in px: its prose, shown code, outputs, figures and signatures."
    n = dict.fromkeys(PAGE_PX, 0.0)
    for c in nb["cells"]:
        src = "".join(c.get("source", ""))
        if c["cell_type"] == "markdown":
            for para in re.split(r"\n\s*\n", src):
                lines = para.split("\n")
                if FENCE.match(para): n["code"] += len(lines) + 1.5; continue
                if HEADING.match(lines[0]): n["prose"] += 2.2; lines = lines[1:]
                if not any(l.strip() for l in lines): continue
                if all(l.startswith("|") for l in lines if l.strip()): n["prose"] += 1.4 * len(lines); continue
                text = " ".join(l.strip() for l in lines)
                items = sum(1 for l in lines if LIST_ITEM.match(l))
                n["prose"] += max(1, -(-len(text) // 92)) + 0.3 * items + 0.6
            continue
        first = src.split("\n", 1)[0]
        if re.match(r"#\|\s*(export|exports|exporti|hide)\b", first):
            if re.match(r"#\|\s*exports?\b", first): n["signature"] += len(re.findall(r"^(?:def|class) [A-Za-z]\w*", src, re.M))
            continue
        if code_shown(src): n["code"] += len([l for l in src.split("\n") if not l.startswith("#|")]) + 1.5
        for out in c.get("outputs", []):
            data = out.get("data", {})
            if any(k.startswith("image/") for k in data): n["figure"] += 1
            elif "text/markdown" in data: n["prose"] += 1.4 * len("".join(data["text/markdown"]).splitlines())
            else: n["output"] += len("".join(out.get("text", "")).splitlines() or "".join(data.get("text/plain", "")).splitlines()) + 1.5
    return sum(PAGE_PX[k] * v for k, v in n.items())

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
    "wide-output ": (_nb(("code", "print(row)", [_out("fedbn " + "0.8840 " * 12 + "\n")])), _nb(("code", "print(row)", [_out("fedbn " + "0.8840 " * 6 + "\n")]))),
    "wide-code": (_nb(("code", "r = run(RunConfig(algo='fedbn', dataset='digits5', rounds=5, seed=0, clients_per_round=4, lr=0.01))")),
                  _nb(("code", "r = run(RunConfig(algo='fedbn', dataset='digits5', rounds=5, seed=0,\n                  clients_per_round=4, lr=0.01))"),
                      ("code", "#| export\ndef f(): return 'an exported cell shows its show_doc, not its source, so its width is free ....'"))),
    "wide-code ": (_nb(("md", "Run:\n\n```sh\nfednbs run --algo fedbn --data digits3 --data-dir DATA --data-option holdout=mnistm  # unseen MNIST-M\n```")),
                   _nb(("md", "Run:\n\n```sh\n# unseen MNIST-M\nfednbs run --algo fedbn --data digits3 --data-dir DATA \\\n  --data-option holdout=mnistm\n```"))),
    "unbacked-number": (_nb(("md", "The fused model ends at 0.711."), ("code", "acc", [_res("{'fused': 0.85}")])),
                        _nb(("md", "The fused model ends at 0.850, the online one at 73.5 %."), ("code", "acc", [_res("{'fused': 0.8501, 'online': 0.735}")]),
                            ("md", "The paper reports 88.43 for FedBN."), ("md", "<!-- quoted -->\nThe bench page measured 48.8 s."),
                            ("md", "Python 3.10 or later; `lr=0.125`; $\\tau = 0.333$."))),
    "changelog-voice": (_nb(("md", "A checkpoint used to hold every client's state; `f` lived here before moving to `fednbs.bench`.")),
                        _nb(("md", "A checkpoint holds the clients that trained; the split is used to cut pools, and the weights moved in K steps."))),
    "changelog-voice ": (_nb(("code", "bench()", [_out("48.8 s (load average about 10)\n")])), _nb(("code", "bench()", [_out("48.8 s\n")]))),
    "duplicate-cell": (_nb(("code", "test_eq(split(10, 3, seed=0), split(10, 3, seed=0))"), ("code", "test_eq(split(10, 3, seed=0), split(10, 3, seed=0))")),
                       _nb(("code", "test_eq(split(10, 3, seed=0), split(10, 3, seed=0))"), ("code", "test_eq(split(10, 4, seed=0), split(10, 4, seed=0))"))),
    "duplicate-cell ": (_nb(("md", "The DigitModel splits into a feature extractor and a classifier head of two linear layers."),
                         ("md", "Note. The DigitModel splits into a feature extractor and a classifier head of two linear layers.")),
                        _nb(("md", "The DigitModel splits into a feature extractor and a classifier head of two linear layers."), ("md", "Note."))),
    "nonetype-signature": (_nb(("code", "#| export\ndef train(model, device=None, steps: int = 1): pass")),
                           _nb(("code", "#| export\ndef train(model, device: str|None = None, steps: int = 1): pass\ndef _helper(x=None): pass"))),
    "nonetype-signature ": (_nb(("code", "#| export\nclass Task:\n    def __init__(self, root=None): pass\n    def fit(self, x=None): pass"), ("code", "show_doc(Task.fit)")),
                            _nb(("code", "#| export\nclass Task:\n    def __init__(self, root: str|None = None): pass\n    def fit(self, x: int|None = None): pass"), ("code", "show_doc(Task.fit)"))),
    "nonetype-signature  ": (_nb(("code", "show_doc(f)", [{"output_type": "display_data", "metadata": {}, "data": {"text/markdown": "f(x:NoneType=None)"}}])),
                             _nb(("code", "show_doc(f)", [{"output_type": "display_data", "metadata": {}, "data": {"text/markdown": "f(x:int|None=None)"}}]))),
    "private-show-doc": (_nb(("code", "show_doc(Engine.__call__)"), ("code", "#| export\ndef __getattr__(name): return find(name)")),
                         _nb(("code", "show_doc(Engine.run)"), ("code", "#| exporti\ndef __getattr__(name): return find(name)"))),
    "print-check": (_nb(("code", "out = run()\nprint(out == expected)")),
                    _nb(("code", "out = run()\ntest_eq(out, expected)\nprint(out)"), ("code", "#| export\ndef f(a, b): print(a == b)"))),
    "print-check ": (_nb(("code", "for k in keys:\n    print(k, torch.allclose(a[k], b[k]))")),
                     _nb(("code", "for k in keys:\n    assert torch.allclose(a[k], b[k]), k\n    print(k, ' '.join(names[k]) or '-')"))),
    "cross-page-number": (_nb(("md", "FedBN reaches 61.4 ± 2.5 on PACS with fednbs."), ("code", "acc", [_res("0.70")])),
                          _nb(("md", "FedBN reaches 61.4 ± 2.5 on PACS with fednbs."), ("code", "table", [_res("fedbn 61.4 ± 2.5")]))),
    "quoted-own-number": (_nb(("md", "<!-- quoted -->\nThe batched engine takes 0.499 s a round."), ("code", "x", [_res("1")])),
                          _nb(("md", "<!-- quoted -->\nThe paper's Table 2 gives 0.499 for FedBN."), ("code", "x", [_res("1")]))),
    "changelog-voice  ": (_nb(("code", '#| export\ndef f():\n    "Runs made before auto became the default ran in process."')),
                          _nb(("code", '#| export\ndef f():\n    "Runs in process unless the engine is given."'))),
    "changelog-voice   ": (_nb(("md", "Measured on a 2-core CPU shared with other work, so the wall seconds are the wait for a core.")),
                           _nb(("md", "Measured on a 2-core CPU; the CPU seconds compare, the wall seconds depend on the machine."))),
    "wide-math": (_nb(("md", "$$\\mathcal L = \\sum_{k=1}^{K} \\frac{n_k}{n} \\Big( \\mathrm{CE}(h_k(f_k(x)), y) + \\lambda_1 \\mathrm{KL}(p_{on} \\| p_{off}) + \\lambda_2 \\mathrm{KL}(p_{off} \\| p_{on}) + \\lambda_3 \\sum_{j \\ne k} \\mathrm{CE}(h_j(f_k(x)), y) + \\lambda_4 \\|\\theta_k - \\bar\\theta\\|^2 + \\lambda_5 \\|\\phi_k\\|^2 \\Big)$$")),
                  _nb(("md", "$$\\mathcal L = \\sum_{k=1}^{K} \\frac{n_k}{n} \\mathcal L_k$$"))),
    "wide-inline": (_nb(("md", "Run `fednbs run --algo fedco --rounds 100 --data digits --data-option percent=0.1 --lr 0.01 --seed 3` to see it.")),
                    _nb(("md", "Run it:\n\n```sh\nfednbs run --algo fedco --rounds 100 --data digits\n```"))),
    "wide-table": (_nb(("md", "| step | command |\n|---|---|\n| A | `--data-option=percent=0.1,holdout=mnistm,font_images=200,font_size=28,skew=rotate,skew_severity=3` |")),
                   _nb(("md", "| step | command |\n|---|---|\n| A | `--data-option percent=0.1` |"))),
    "broken-link": (_nb(("md", "## Held-out domains\n\nSee [below](#held-out-domain) and [the runner](no_such_page.ipynb).")),
                    _nb(("md", "## Held-out domains\n\nSee [below](#held-out-domains)."))),
    "pip-install": (_nb(("md", "Install it with `pip install \"fednbs[flower]\"`.")), _nb(("md", "Clone it, then `pip install -e \".[flower]\"`."))),
    "tall-page": (_nb(*[("code", "\n".join(f"step({i})" for i in range(100)))] * 12), _nb(("code", "\n".join(f"step({i})" for i in range(100))))),
    "internal-ref": (_nb(("md", "The equations follow `baselines-2023.md`, which recovered them from the code.")),
                     _nb(("md", "The equations follow the authors' released code ([yuhangchen0/FedHEAL](https://github.com/yuhangchen0/FedHEAL))."))),
    "heading-showdoc": (_nb(("md", "## FedBN\n\nBatchNorm stays on each client."), ("code", "#| export\nclass FedBN(FedAvg): pass")),
                        _nb(("md", "## Local BatchNorm\n\nBatchNorm stays on each client."), ("code", "#| export\nclass FedBN(FedAvg): pass"))),
}

SELF_TEST_ELSEWHERE = {"61.4", "2.5", "0.499"}   # numbers "another page" prints in the self-tests

def _sig(text: str) -> str: return f"---\n\n### X\n\n```python\n{text}\n```\n\n*Doc.*"

SIGNATURE_TESTS = {   # kind: (bad rendering, good rendering, the symbol is a class)
    "wide-signature": (_sig("def run(\n    rounds:int=20, # communication rounds; each samples clients_per_round clients and trains them\n):"),
                       _sig("def run(\n    rounds:int=20, # communication rounds; each samples clients_per_round\n                   # clients and trains them\n):"), False),
    "signature-markup": (_sig("def run(\n    data:str='digits', # see [Datasets](07_datasets.ipynb) and `SKEW_OPTIONS`\n):"),
                         _sig("def run(\n    data:str='digits', # see Datasets and SKEW_OPTIONS\n):"), False),
    "class-signature": (_sig("def FedBN(\n    lr:float=0.01, # learning rate\n):"), _sig("class FedBN(\n    lr:float=0.01, # learning rate\n):"), True),
}

def markdown_problems_of(md: str) -> list[str]:
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "README.md"; f.write_text(md)
        return markdown_file_problems([f], lambda x: set())

def self_test() -> int:
    "Run every check on its bad and its good notebook; exit 1 if one misses or misfires."
    import tempfile
    failed = []
    with tempfile.TemporaryDirectory() as d:
        for kind, (bad, good) in SELF_TESTS.items():
            kind = kind.strip()
            for label, nb, want in (("bad", bad, True), ("good", good, False)):
                f = Path(d) / f"{kind}-{label}.ipynb"; f.write_text(json.dumps(nb))
                got = any(f": {kind}:" in m for m in check_notebook(f, elsewhere=SELF_TEST_ELSEWHERE))
                if got != want: failed.append(f"{kind}: the {label} notebook was {'not ' if want else ''}flagged")
    for kind, (bad, good, is_class) in SIGNATURE_TESTS.items():
        for label, md, want in (("bad", bad, True), ("good", good, False)):
            got = any(m.startswith(kind + ":") for m in signature_problems(md, is_class))
            if got != want: failed.append(f"{kind}: the {label} signature was {'not ' if want else ''}flagged")
    bad_md = "Install with `pip install fednbs[flower]`."
    if not markdown_problems_of(bad_md) or markdown_problems_of("Clone it, then `pip install -e \".[dev]\"`."):
        failed.append("pip-install: the markdown file check missed or misfired")
    print("\n".join(failed) or f"ok: {len(SELF_TESTS) + len(SIGNATURE_TESTS) + 1} self-tests")
    return 1 if failed else 0

if __name__ == "__main__": sys.exit(main())
