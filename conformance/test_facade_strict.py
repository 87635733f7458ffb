"""Every public facade method, and the memory layer, on array-api-strict at its
strictest flags (latest API version, no boolean indexing, no data-dependent
shapes).

Any call outside the standard (a NumPy-only keyword, flat indexing, a
non-standard function) fails here. The checks are the ones ``xpkit check``
runs (``xpkit._check.CHECKS``), compared with NumPy's answers.
"""

from __future__ import annotations

import numpy as np
import pytest

import xpkit
from xpkit._check import CHECKS, run_check
from xpkit.testing import assert_equal

BY_NAME = {c.name: c for c in CHECKS}


@pytest.mark.parametrize("name", [c.name for c in CHECKS if not c.data_dependent])
def test_check_on_strictest(strict_backend, name):
    result = run_check(strict_backend, BY_NAME[name])
    if result.ok is None:  # to_gpu on a CPU device: nothing to check, and why
        pytest.skip(result.detail)
    assert result.ok, result.detail


@pytest.mark.parametrize("name", [c.name for c in CHECKS if c.data_dependent])
def test_data_dependent_check_is_refused_on_strictest(strict_backend, name):
    """``nonzero`` is data-dependent by definition: strictest mode refuses it.

    The Backend says so under the strictest flags (`Backend.capabilities`
    reads them), so the check is not run, and the library refuses the
    operation itself where it is run.
    """
    result = run_check(strict_backend, BY_NAME[name])
    assert result.ok is None
    assert result.detail == "array_api_strict has no data_dependent_shapes"
    assert "data_dependent_shapes" not in strict_backend.capabilities
    with pytest.raises(RuntimeError, match="data-dependent shapes"):
        getattr(strict_backend, name)(strict_backend.asarray(np.array([0.0, 1.0])))


def test_dtype_to_str_on_strict_dtypes(strict_backend):
    assert strict_backend.dtype_to_str(strict_backend.xp.float32) == "float32"
    assert strict_backend.dtype_to_str(strict_backend.xp.int16) == "int16"


def test_flatnonzero_with_data_dependent_shapes_on():
    strict = pytest.importorskip("array_api_strict")
    a = np.array([[0.0, 1.0], [2.0, 0.0]])
    with strict.ArrayAPIStrictFlags(boolean_indexing=False, data_dependent_shapes=True):
        b = xpkit.Backend("array_api_strict")
        got = b.flatnonzero(b.asarray(a))
    assert_equal(b.to_numpy(got), np.flatnonzero(a))


def test_every_public_method_is_checked():
    public = {
        n
        for n in dir(xpkit.Backend)
        if not n.startswith("_") and callable(getattr(xpkit.Backend, n))
    }
    checked = {c.name.split(" ")[0].split("(")[0] for c in CHECKS}
    # dtype_to_str is checked above; from_arrays runs inside every check;
    # require_usable takes no array (test_backend checks it on every backend)
    assert public - checked == {"dtype_to_str", "from_arrays", "require_usable"}


def test_svd_without_the_linalg_extension_is_a_clear_error():
    """Under flags that switch the extension off, the documented
    NotImplementedError (it was array-api-strict's AttributeError)."""
    strict = pytest.importorskip("array_api_strict")
    with strict.ArrayAPIStrictFlags(enabled_extensions=()):
        b = xpkit.Backend("array_api_strict")
        x = b.asarray(np.ones((3, 2)))
        with pytest.raises(NotImplementedError, match="needs the linalg extension"):
            b.svd(x)
