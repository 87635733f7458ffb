"""The import graph of ``src/xpkit``, as ``tools/house_figures.py`` builds it.

One reading of the imports (from the AST; module-level and function-local
imports, ``TYPE_CHECKING`` blocks left out) for every test that asks which
xpkit module imports which: the layers, the adapters' floor, ``_dtypes``.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "xpkit"


@functools.cache
def house_figures() -> ModuleType:
    """``tools/house_figures.py``, loaded as a module."""
    spec = importlib.util.spec_from_file_location(
        "house_figures", ROOT / "tools" / "house_figures.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("house_figures", module)
    spec.loader.exec_module(module)
    return module


@functools.cache
def xpkit_imports() -> dict[str, frozenset[str]]:
    """Module name -> the xpkit modules it imports at run time."""
    edges = house_figures().import_graph(SRC)
    return {module: frozenset(targets) for module, targets in edges.items()}
