"""The house's figures for ``src/xpkit``, printed in CI's log.

- the import graph of the package's modules (module-level and function-local
  imports; ``TYPE_CHECKING`` blocks left out): its floors (the longest chain
  of imports) and its cycles;
- ``Any`` per 1,000 code lines (docstrings, comments and blank lines not
  counted);
- function-local imports of xpkit's own modules;
- classes that inherit another xpkit class that is not an interface.

Usage: ``python tools/house_figures.py [src/xpkit]``. ``tests/test_layers.py``
holds the graph to its targets; this prints the figures.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

#: Base classes meant to be inherited (one subclass per library or executor).
INTERFACES = frozenset({"Adapter", "Pool", "PeakMeter"})


def module_names(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``package``."""
    found: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.body:
                end = statement.end_lineno or statement.lineno
                lines.update(range(statement.lineno, end + 1))
    return lines


def _imported(module: str, path: Path, node: ast.ImportFrom | ast.Import) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = module.split(".")
    if path.name != "__init__.py":
        base = base[:-1]
    if node.level:
        base = base[: len(base) - (node.level - 1)]
        root = ".".join([*base, *([node.module] if node.module else [])])
    else:
        root = node.module or ""
    return [root, *(f"{root}.{alias.name}" for alias in node.names)]


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (a package's face excluded)."""
    modules = module_names(package)
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_lines(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if node.lineno in skip:
                continue
            for imported in _imported(name, path, node):
                target = imported
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                # A module importing its own package's face is no arrow.
                if target and target != name and not name.startswith(target + "."):
                    edges[name].add(target)
    return edges


def components(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            groups.append(sorted(group))

    for v in edges:
        if v not in index:
            visit(v)
    return groups


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of more than one module that import each other, in a circle."""
    return [group for group in components(edges) if len(group) > 1]


def floors(edges: dict[str, set[str]]) -> dict[str, int]:
    """Module -> its floor: 1 + the highest floor it imports (1: imports none).

    A cycle's modules share one floor (the graph of groups has no cycle).
    """
    group_of = {v: i for i, group in enumerate(components(edges)) for v in group}
    above: dict[int, set[int]] = {}
    for v, targets in edges.items():
        above.setdefault(group_of[v], set()).update(
            group_of[w] for w in targets if group_of[w] != group_of[v]
        )
    memo: dict[int, int] = {}

    def floor(group: int) -> int:
        if group not in memo:
            memo[group] = 1 + max((floor(g) for g in above.get(group, ())), default=0)
        return memo[group]

    return {v: floor(group_of[v]) for v in edges}


def _docstring_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        if isinstance(node, kinds) and node.body:
            first = node.body[0]
            constant = isinstance(first, ast.Expr) and isinstance(
                first.value, ast.Constant
            )
            if constant and isinstance(first.value.value, str):  # type: ignore[attr-defined]
                end = first.end_lineno or first.lineno
                lines.update(range(first.lineno, end + 1))
    return lines


def figures(package: Path) -> dict[str, object]:
    """Every figure the module docstring lists."""
    code = anys = local = 0
    classes: set[str] = set()
    bases: list[tuple[str, list[str]]] = []
    for path in sorted(package.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        docs = _docstring_lines(tree)
        for number, line in enumerate(source.splitlines(), 1):
            stripped = line.strip()
            if stripped and not stripped.startswith("#") and number not in docs:
                code += 1
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.NAME and token.string == "Any":
                anys += 1
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    own = isinstance(inner, ast.ImportFrom) and (
                        inner.level
                        or (inner.module or "").split(".")[0] == package.name
                    )
                    local += bool(own)
            if isinstance(node, ast.ClassDef):
                classes.add(node.name)
                bases.append((node.name, [ast.unparse(b) for b in node.bases]))
    inheriting = [
        f"{name}({base})"
        for name, names in bases
        for base in names
        if base.split("[")[0].split(".")[-1] in classes - INTERFACES
    ]
    edges = import_graph(package)
    return {
        "code lines": code,
        "Any": anys,
        "Any per 1,000 code lines": round(1000 * anys / max(code, 1), 1),
        "function-local imports of xpkit's own modules": local,
        "classes inheriting an xpkit class (not an interface)": inheriting,
        "modules": len(edges),
        "floors": max(floors(edges).values(), default=0),
        "cycles": cycles(edges),
    }


def main(argv: list[str]) -> int:
    """Print the figures of the package ``argv[1]`` (default ``src/xpkit``)."""
    package = Path(argv[1] if len(argv) > 1 else "src/xpkit").resolve()
    for name, value in figures(package).items():
        print(f"{name}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
