"""Import cycles among samsa's modules, TYPE_CHECKING imports included.

    .venv/bin/python scripts/import_cycles.py            # every cycle in samsa/
    .venv/bin/python scripts/import_cycles.py server     # only cycles touching samsa/server

Reads the source (nothing is imported), builds the graph of module -> samsa modules it
imports (at any depth of the file: inside functions and `if TYPE_CHECKING:` too, since those
still tie the modules together for a reader and for mypy), and prints each strongly connected
component of more than one module. Exits 1 if any is printed.

`from samsa.x import y` counts as an import of `samsa.x.y` when that is a module, else of
`samsa.x`; a package's `__init__` is the package itself. import-linter's `acyclic_siblings`
contracts in pyproject.toml check the same for CI; this script shows whole cycles.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "samsa"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def build_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for t in targets:
                while t and t not in files:  # `import samsa.a.b` of a non-module: its nearest module
                    t = t.rpartition(".")[0]
                if t and t.startswith("samsa") and t != mod:
                    graph[mod].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    scc = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        scc.append(m)
                        if m == node:
                            break
                    if len(scc) > 1:
                        out.append(sorted(scc))
    return sorted(out)


def main(argv: list[str]) -> int:
    graph = build_graph()
    found = cycles(graph)
    if argv:
        found = [c for c in found if any(m.startswith(tuple(f"samsa.{a}" for a in argv)) for m in c)]
    for scc in found:
        print(f"cycle of {len(scc)} modules:")
        for m in scc:
            print(f"  {m} -> {', '.join(sorted(graph[m] & set(scc)))}")
    print(f"{len(graph)} modules, {sum(map(len, graph.values()))} imports, {len(found)} cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
