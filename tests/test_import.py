"""``import xpkit`` imports no optional array library (checked in a fresh process)."""

from __future__ import annotations

import json

import pytest
from helpers import run_python

OPTIONAL = ["torch", "cupy", "jax", "jaxlib", "dask", "array_api_strict"]


def _modules_after(code: str) -> dict[str, bool]:
    script = (
        f"import sys\n{code}\nimport json\n"
        f"print(json.dumps({{m: m in sys.modules for m in {OPTIONAL!r}}}))"
    )
    out = run_python(script, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_xpkit_imports_no_optional_library():
    loaded = _modules_after("import xpkit")
    assert loaded == dict.fromkeys(OPTIONAL, False)


def test_numpy_backend_and_host_budget_import_nothing_optional():
    code = (
        "import xpkit\n"
        "b = xpkit.Backend('numpy')\n"
        "b.matmul(b.asarray([[1.0]]), b.asarray([[2.0]]))\n"
        "xpkit.device_memory_budget()\n"
        "xpkit.empty_device_cache()\n"
        "xpkit.is_oom_error(MemoryError())\n"
        "xpkit.Backend.from_arrays(b.asarray([1.0]))\n"
    )
    assert _modules_after(code) == dict.fromkeys(OPTIONAL, False)


def test_the_probe_sees_an_import():
    """The check can fail: importing a library is noticed."""
    pytest.importorskip("array_api_strict")
    loaded = _modules_after("import xpkit, array_api_strict")
    assert loaded["array_api_strict"] is True


def test_xpkit_testing_is_reachable_and_dir_is_clean():
    out = run_python(
        "import xpkit; print(xpkit.testing.assert_close.__name__); print(sorted(dir(xpkit)))",
        check=True,
    ).stdout.splitlines()
    assert out[0] == "assert_close"
    names = eval(out[1])
    assert "Any" not in names
    assert "importlib" not in names
    assert {"Backend", "map_batches", "testing"} <= set(names)
