#!/usr/bin/env python
"""The layering check: each fednbs module may import only modules of notebooks numbered before its own.

A module's number is its notebook's (`nbs/NN_name.ipynb`, read from the header nbdev writes into the module). Every
import counts: `import fednbs.x`, `from fednbs.x import ...`, relative imports, imports inside functions, and
`__import__("fednbs.x")` / `importlib.import_module("fednbs.x")` with a literal name. The check prints each import of
a later notebook's module ("upward") and each cycle between modules, then a summary line, and exits 1 if it found any.

Usage: python tools/layering.py [PROJECT_DIR]
"""
import ast, re, sys
from pathlib import Path

HEADER = re.compile(r"File to edit: \.\./nbs/(?:[\w/]*/)?(\d+)_\w+\.ipynb")
HIDDEN = re.compile(r"(?:__import__|import_module)\(\s*[\"']fednbs\.(\w+)")

def imported_modules(src: str) -> set[str]:
    "Names of the fednbs modules that the module source `src` imports, however it imports them."
    found = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("fednbs.")}
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 1: found |= {mod.split(".")[0]} if mod else {a.name for a in node.names}
            elif mod.startswith("fednbs."): found.add(mod.split(".")[1])
            elif mod == "fednbs": found |= {a.name for a in node.names}
    return found | set(HIDDEN.findall(src))

def layers(pkg: Path) -> tuple[dict, dict]:
    "Each module's notebook number and the fednbs modules it imports."
    number, deps = {}, {}
    for f in sorted(pkg.glob("*.py")):
        if f.name.startswith("_"): continue
        src = f.read_text()
        m = HEADER.search(src)
        number[f.stem] = int(m.group(1)) if m else None
        deps[f.stem] = imported_modules(src) - {f.stem}
    return number, deps

def cycles(deps: dict) -> list[list[str]]:
    "The strongly connected components with more than one module (Tarjan's algorithm)."
    index, low, stack, on, out = {}, {}, [], set(), []
    def visit(v):
        index[v] = low[v] = len(index); stack.append(v); on.add(v)
        for w in deps.get(v, ()):
            if w not in deps: continue
            if w not in index: visit(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(sorted(comp))
    for v in sorted(deps):
        if v not in index: visit(v)
    return out

def main(root: Path) -> int:
    number, deps = layers(root / "fednbs")
    problems = 0
    for mod in sorted(m for m, n in number.items() if n is None):
        print(f"no notebook: {mod}.py has no 'File to edit: ../nbs/NN_...' header"); problems += 1
    upward = sorted((a, b) for a in deps for b in deps[a] if number.get(a) is not None and number.get(b) is not None and number[b] > number[a])
    for a, b in upward: print(f"upward: {a} ({number[a]:02d}) imports {b} ({number[b]:02d})")
    found = cycles(deps)
    for comp in found: print("cycle: " + " <-> ".join(comp))
    print(f"{len(deps)} modules, {len(upward)} upward imports, {len(found)} cycles")
    return 1 if upward or found or problems else 0

if __name__ == "__main__": sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
