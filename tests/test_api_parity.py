"""Every name and signature of the seed API exists in xpkit, unchanged.

The table below is transcribed from the seed document
(``shared/seed/backends-api.txt``): parameter names, order, kinds, defaults.
When that document is present beside the checkout, a second test checks that
the table still lists every name it documents.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import xpkit

P = inspect.Parameter
POS, KW, VAR = P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY, P.VAR_POSITIONAL
NO = P.empty

# name -> [(param, kind, default), ...]
SEED_FUNCTIONS = {
    "assert_array_almost_equal": [
        ("x", POS, NO),
        ("y", POS, NO),
        ("decimal", POS, 6),
        ("err_msg", POS, ""),
        ("verbose", POS, True),
        ("backend", POS, None),
    ],
    "auto_batch_size": [
        ("n_items", POS, NO),
        ("bytes_per_item", POS, NO),
        ("budget_gb", KW, NO),
        ("overhead", KW, 1.0),
        ("min_batch", KW, 1),
    ],
    "auto_n_jobs_for_arrays": [
        ("arrays", POS, NO),
        ("max_memory_gb", KW, None),
        ("min_jobs", KW, 1),
    ],
    "auto_select_backend": [
        ("n_samples", POS, NO),
        ("n_features", POS, NO),
        ("cv", POS, 1),
    ],
    "check_gpu_available": [],
    "compute_oom_safe": [("fn", POS, NO), ("arrays", VAR, NO), ("min_chunk", KW, 1)],
    "device_memory_budget": [
        ("backend", POS, None),
        ("max_gpu_memory_gb", POS, None),
        ("cap_for_batching", KW, False),
    ],
    "empty_device_cache": [],
    "gb_to_bytes": [("gb", POS, NO)],
    "is_oom_error": [("exc", POS, NO)],
    "resolve_backend": [("parallel", POS, NO)],
}

SEED_METHODS = {
    "asarray": [("x", POS, NO), ("dtype", POS, None), ("device", POS, None)],
    "asarray_like": [("x", POS, NO), ("ref", POS, NO)],
    "check_arrays": [("inputs", VAR, NO)],
    "concatenate": [("arrays", POS, NO), ("axis", POS, 0)],
    "copy": [("array", POS, NO)],
    "dtype_to_str": [("dtype", POS, NO)],
    "expand_dims": [("array", POS, NO), ("axis", POS, NO)],
    "flatnonzero": [("array", POS, NO)],
    "full": [("shape", POS, NO), ("fill_value", POS, NO), ("dtype", POS, None)],
    "full_like": [
        ("array", POS, NO),
        ("fill_value", POS, NO),
        ("shape", POS, None),
        ("dtype", POS, None),
        ("device", POS, None),
    ],
    "matmul": [("A", POS, NO), ("B", POS, NO)],
    "ones_like": [
        ("array", POS, NO),
        ("shape", POS, None),
        ("dtype", POS, None),
        ("device", POS, None),
    ],
    "sort": [("array", POS, NO), ("axis", POS, -1)],
    "svd": [("X", POS, NO), ("full_matrices", POS, False)],
    "to_cpu": [("array", POS, NO)],
    "to_device": [("arr", POS, NO)],
    "to_gpu": [("array", POS, NO), ("device", POS, None)],
    "to_numpy": [("arr", POS, NO)],
    "zeros_like": [
        ("array", POS, NO),
        ("shape", POS, None),
        ("dtype", POS, None),
        ("device", POS, None),
    ],
}

SEED_ATTRIBUTES = ["BATCH_WORKING_SET_CEILING_GB", "Backend"]


def _params(fn) -> list[tuple[str, object, object]]:
    sig = inspect.signature(fn)
    return [
        (p.name, p.kind, p.default) for p in sig.parameters.values() if p.name != "self"
    ]


@pytest.mark.parametrize("name", sorted(SEED_FUNCTIONS))
def test_seed_function_signature(name):
    assert name in xpkit.__all__
    assert _params(getattr(xpkit, name)) == SEED_FUNCTIONS[name]


@pytest.mark.parametrize("name", sorted(SEED_METHODS))
def test_seed_method_signature(name):
    """The seed's parameters, in order; anything added is keyword-only with a
    default, so every call the seed allows keeps its meaning."""
    params = _params(getattr(xpkit.Backend, name))
    seed = SEED_METHODS[name]
    assert params[: len(seed)] == seed
    for added, kind, default in params[len(seed) :]:
        assert kind is KW, f"{name}: added parameter {added} is not keyword-only"
        assert default is not inspect.Parameter.empty, f"{name}: {added} has no default"


def test_backend_constructor_keeps_seed_default():
    params = inspect.signature(xpkit.Backend).parameters
    assert list(params)[0] == "backend"
    assert params["backend"].default == "numpy"
    assert params["device"].kind is KW
    assert params["device"].default is None


def test_seed_attributes_exported():
    for name in SEED_ATTRIBUTES:
        assert name in xpkit.__all__
    assert isinstance(xpkit.BATCH_WORKING_SET_CEILING_GB, float)
    assert xpkit.BATCH_WORKING_SET_CEILING_GB > 0


def _isort_key(name: str) -> tuple[int, str]:
    """ruff's RUF022 order: CONSTANTS, then Classes, then everything else."""
    if name.isupper():
        return 0, name
    return (1 if name[0].isupper() else 2), name


def test_all_is_sorted_and_defined():
    assert sorted(xpkit.__all__, key=_isort_key) == list(xpkit.__all__)
    for name in xpkit.__all__:
        assert hasattr(xpkit, name), name


def test_table_matches_seed_document():
    seed = Path(__file__).resolve().parents[2] / "shared" / "seed" / "backends-api.txt"
    if not seed.exists():
        # The reason names no path outside the checkout (a user's folders).
        pytest.skip("the seed document (shared/seed/backends-api.txt) is not here")
    text = seed.read_text()
    block = text.split("Methods¶")[1]
    documented = set(re.findall(r"^`(\w+)`¶$", text, flags=re.MULTILINE))
    documented -= {"backends", "Backend"}
    assert documented, "no names found in the seed document"
    assert documented == set(SEED_FUNCTIONS) | set(SEED_METHODS)
    assert "BATCH_WORKING_SET_CEILING_GB" in text
    assert block
