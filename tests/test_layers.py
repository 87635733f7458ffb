"""The layers of ``src/xpkit``: imports go down, never in a circle.

The import graph is built from the AST by ``tools/house_figures.py``
(module-level and function-local imports; ``TYPE_CHECKING`` blocks left
out), the same script whose figures CI prints. Every module belongs to one
layer of `LAYERS`; a module imports only from its own layer or the layers
below it. A new module must be placed in a layer here, which is the moment
to decide where it belongs.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from import_graph import house_figures, xpkit_imports

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "xpkit"

figures = house_figures()

#: The layers, lowest first: a short name (the one docs/development.md's
#: picture gives) and the modules it holds (``*`` ends a prefix: a package
#: and everything in it).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "basics",
        (
            "xpkit._typing",
            "xpkit._version",
            "xpkit._log",
            "xpkit._namespace",
            "xpkit._dtypes",
            "xpkit._args",
            "xpkit._budget_stack",
            "xpkit._shown",
            "xpkit._cast_checks",
            "xpkit._host_memory",
            "xpkit._executors._interrupts",
            "xpkit._statement",
            "xpkit._current_rows",
            "xpkit._result_spec",
        ),
    ),
    ("adapters", ("xpkit._adapters*",)),
    (
        "below the facade",
        (
            "xpkit._facts",
            "xpkit._convert",
            "xpkit._creation",
            "xpkit._moves",
            "xpkit._operations",
            "xpkit._at",
            "xpkit._at_index",
            "xpkit._at_shape",
            "xpkit._top_k",
            "xpkit._inputs",
            "xpkit._resolve",
            "xpkit._memory",
            "xpkit._oom",
            "xpkit._rows",
            "xpkit._result_memory",
            "xpkit._outputs",
            "xpkit._into",
            "xpkit._written",
            "xpkit._plan_memory",
            "xpkit._signatures",
            "xpkit._cost_model",
            "xpkit._probe",
            "xpkit._plan",
            "xpkit._local",
        ),
    ),
    ("facade and executors", ("xpkit._backend", "xpkit._executors*")),
    ("takes a Backend", ("xpkit._select", "xpkit._device_budget")),
    (
        "batching",
        (
            "xpkit._request",
            "xpkit._cost",
            "xpkit._repeat",
            "xpkit._batches",
            "xpkit._stream",
        ),
    ),
    ("testing tools", ("xpkit.testing*",)),
    # The package's face: its lazy table (xpkit/__init__.py) loads the
    # batching functions and xpkit.testing by name, which no import shows.
    (
        "face, command line",
        (
            "xpkit",
            "xpkit._check",
            "xpkit._demo",
            "xpkit._info",
            "xpkit._cli",
            "xpkit.__main__",
        ),
    ),
]

#: The longest chain of imports may not grow (issue #22: at most 10). A
#: ratchet: lower it when the graph flattens.
MAX_FLOORS = 10


def layer_of(module: str, layers=LAYERS) -> int:
    """The index in ``layers`` of the layer holding ``module``; KeyError if none."""
    best: tuple[int, int] | None = None  # (length of the matching pattern, layer)
    for index, (_, patterns) in enumerate(layers):
        for pattern in patterns:
            prefix = pattern.removesuffix("*")
            matches = (
                module == prefix or module.startswith(prefix + ".")
                if pattern.endswith("*")
                else module == pattern
            )
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    if best is None:
        raise KeyError(module)
    return best[1]


def climbs(edges, layers=LAYERS) -> list[str]:
    """Every import that goes up a layer, as ``a (layer) -> b (layer)``."""
    found = []
    for module, targets in sorted(edges.items()):
        for target in sorted(targets):
            if layer_of(target, layers) > layer_of(module, layers):
                found.append(
                    f"{module} ({layer_of(module, layers)}) -> "
                    f"{target} ({layer_of(target, layers)})"
                )
    return found


@pytest.fixture(scope="module")
def edges():
    return xpkit_imports()


def test_every_module_has_a_layer(edges):
    unplaced = []
    for module in edges:
        try:
            layer_of(module)
        except KeyError:
            unplaced.append(module)
    assert unplaced == []


def test_imports_go_down_the_layers(edges):
    assert climbs(edges) == []


def test_no_import_cycle(edges):
    assert figures.cycles(edges) == []


def test_the_floors_do_not_grow(edges):
    floors = figures.floors(edges)
    assert 1 < max(floors.values()) <= MAX_FLOORS


#: What the layers above the adapters may import of them: the registry and
#: the interface (with the records and helpers it is made of), no adapter;
#: and the shape-only trace the cost stage runs (its tracer and records).
ADAPTER_FACES = frozenset(
    {
        "xpkit._adapters._registry",
        "xpkit._adapters._base",
        "xpkit._adapters._lazy_tags",
        "xpkit._adapters._types",
        "xpkit._adapters._device_memory",
        "xpkit._adapters._peak",
        "xpkit._adapters._stores",
        "xpkit._adapters._trace",
        "xpkit._adapters._shapes._run",
    }
)


def test_above_the_adapters_only_the_registry_and_interface_are_imported(edges):
    reached = {
        f"{module} -> {target}"
        for module, targets in edges.items()
        if not module.startswith("xpkit._adapters")
        for target in targets
        if target.startswith("xpkit._adapters") and target not in ADAPTER_FACES
    }
    assert reached == set()
    assert "xpkit._adapters._registry" in edges["xpkit._convert"]  # (it can see)


def test_the_graph_sees_function_local_imports_and_skips_type_checking(edges):
    # _batches imports _request at module level; both are in the graph.
    assert "xpkit._request" in edges["xpkit._batches"]
    # _typing is imported under TYPE_CHECKING almost everywhere; no arrow
    # leaves it.
    assert edges["xpkit._typing"] == set()


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def test_the_checks_can_fail(tmp_path):
    """A cycle, an upward import (function-local) and an unplaced module are seen."""
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": """\
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from .high import H  # not an arrow
                def f():
                    from .high import H  # an arrow, and it climbs
                    return H
            """,
            "high.py": "from .low import f\nH = 1\n",
            "a.py": "from . import b\n",
            "b.py": "from . import a\n",
        },
    )
    edges = figures.import_graph(root)
    assert edges["pkg.low"] == {"pkg.high"}
    assert sorted(figures.cycles(edges)) == [
        ["pkg.a", "pkg.b"],
        ["pkg.high", "pkg.low"],
    ]
    layers = [("low", ("pkg.low", "pkg", "pkg.a", "pkg.b")), ("high", ("pkg.high",))]
    assert climbs(edges, layers) == ["pkg.low (0) -> pkg.high (1)"]
    with pytest.raises(KeyError):
        layer_of("pkg.elsewhere", layers)


def _picture() -> list[str]:
    """The lines of the layers' picture in docs/development.md, top layer first."""
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    block = text.split("<!-- layers -->", 2)[1]
    drawing = block.split("```")[1].splitlines()[1:]  # after the "text" tag
    return [line for line in drawing if line.strip()]


def test_the_docs_picture_is_the_layers():
    """docs/development.md draws these layers, top first, naming their modules."""
    drawn: dict[str, str] = {}
    current = ""
    for line in _picture():
        head = line[:24].strip()
        if head:
            current = head.split(maxsplit=1)[1]  # "8  command line" -> name
            drawn[current] = ""
        drawn[current] += " " + line[24:]
    assert list(drawn) == [name for name, _ in reversed(LAYERS)]
    for name, modules in LAYERS:
        for module in modules:
            short = module.removesuffix("*").rsplit(".", 1)[-1]  # "_plan", "testing"
            assert re.search(rf"(?<![\w.]){re.escape(short)}\b", drawn[name]), (
                name,
                module,
            )
