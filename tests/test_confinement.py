"""Library knowledge lives in the adapters: no other module of xpkit names an
array library or a device family in its code.

Docstrings and comments may (they explain); identifiers, attribute names,
imports and other string constants may not. The executors' package
(``_executors/``, one module per executor as ``_adapters/`` has one per
library) may name dask, whose ``dask.distributed`` it drives, and talk of
that executor ("the dask cluster at ...") may appear anywhere.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from import_graph import xpkit_imports

import xpkit

SRC = Path(xpkit.__file__).parent
WORDS = re.compile(
    r"(?i)\b(torch|cupy|jax|jaxlib|dask|ndonnx|array_api_strict|array-api-strict"
    r"|cuda|mps|xpu|rocm|hip)\b"
)


def _docstrings(tree: ast.AST) -> list[ast.Constant]:
    """The docstring constants of a module, its classes and functions."""
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, kinds) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.append(first.value)
    return found


def library_names(path: Path) -> list[str]:
    """Every ``file:line: text`` of ``path`` whose code names a library."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(doc) for doc in _docstrings(tree)}
    executor = "_executors" in path.parts
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            text = node.id.replace("_", " ")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            text = node.name.replace("_", " ")
        elif isinstance(node, ast.arg):
            text = node.arg.replace("_", " ")
        elif isinstance(node, ast.Attribute):
            text = node.attr.replace("_", " ")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            text = " ".join(
                [getattr(node, "module", None) or "", *(a.name for a in node.names)]
            )
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in docs:
                continue
            text = node.value
        else:
            continue
        if executor:
            text = re.sub(r"(?i)dask", "", text)
        # Talk of the executor anywhere ("the dask cluster at ...") is not a library.
        text = re.sub(r"(?i)dask(\.distributed| cluster)", "", text)
        if WORDS.search(text):
            hits.append(f"{path.relative_to(SRC)}:{node.lineno}: {text[:60]!r}")
    return hits


MODULES = sorted(p for p in SRC.rglob("*.py") if "_adapters" not in p.parts)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_outside_the_adapters_names_a_library(path):
    assert library_names(path) == []


def test_the_check_can_fail(tmp_path):
    leaky = tmp_path / "leaky.py"
    leaky.write_text(
        '"""Docstrings may say torch."""\n'
        "import importlib\n"
        "# comments may say cupy\n"
        'lib = importlib.import_module("jax")\n'
        "def on_cuda(x):\n"
        "    return x.is_cuda\n",
        encoding="utf-8",
    )
    original = SRC
    globals()["SRC"] = tmp_path
    try:
        hits = library_names(leaky)
    finally:
        globals()["SRC"] = original
    assert sorted(h.split(":")[1] for h in hits) == ["4", "5", "6"]


def lines_of_code(path: Path) -> int:
    """Lines that are neither blank, comments nor inside docstrings."""
    text = path.read_text(encoding="utf-8")
    doc_lines = {
        number
        for doc in _docstrings(ast.parse(text))
        for number in range(doc.lineno, (doc.end_lineno or 0) + 1)
    }
    return sum(
        1
        for number, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.strip().startswith("#") and number not in doc_lines
    )


def test_every_module_holds_one_concern_in_at_most_400_lines_of_code():
    sizes = {str(p.relative_to(SRC)): lines_of_code(p) for p in SRC.rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > 400} == {}
    assert max(sizes.values()) > 100  # the count counts


#: What the adapters may import of xpkit besides each other: the basics
#: (``_current_rows``: the tracers say which rows they trace ``fn`` on;
#: ``_shown``: how a message quotes a value or ``fn``'s error, importing
#: nothing of xpkit).
BASICS = {"xpkit._dtypes", "xpkit._typing", "xpkit._current_rows", "xpkit._shown"}


def _imported_modules(path: Path) -> set[str]:
    """xpkit modules ``path`` imports at run time (``TYPE_CHECKING`` left out)."""
    relative = path.relative_to(SRC).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return set(xpkit_imports()[".".join(("xpkit", *parts))])


ADAPTER_MODULES = sorted((SRC / "_adapters").glob("*.py"))


@pytest.mark.parametrize("path", ADAPTER_MODULES, ids=lambda p: p.name)
def test_the_adapters_sit_on_the_ground_floor(path):
    """They import one another and the basics, nothing of the facade or above."""
    above = {
        name
        for name in _imported_modules(path)
        if not name.startswith("xpkit._adapters") and name not in BASICS
    }
    assert above == set()


def test_the_floor_check_sees_imports():
    package = _imported_modules(SRC / "_adapters" / "__init__.py")
    assert {"xpkit._adapters._registry", "xpkit._adapters.torch"} <= package
    assert "xpkit._dtypes" in _imported_modules(SRC / "_adapters" / "_registry.py")
