"""`LostOnHost`: a host copy found to drop masks only once computed, named by its caller.

A Dask array whose meta is plain but whose chunks compute to NumPy masked
arrays was refused as "x is ...", whatever it was: ``fn``'s result, an
assert's ``actual`` (an adversarial pass).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import xpkit
from xpkit._adapters._host_loss import LostOnHost
from xpkit.testing import assert_close

LOST = "is a Dask array whose chunks compute to NumPy masked arrays"


@pytest.fixture
def masked_behind_plain_meta():
    da = pytest.importorskip("dask.array")
    x = np.arange(12.0).reshape(6, 2)
    return da.from_array(
        np.ma.masked_array(x, mask=x > 5), chunks=(2, 2), meta=np.empty((0, 0))
    )


@pytest.mark.parametrize(
    ("fn", "label", "options"),
    [
        (lambda r: r * 2, "result", {"bytes_per_item": 16}),
        (lambda r: (r, r * 2), "result[0]", {"bytes_per_item": 16}),
        (lambda r: {"a": r * 2}, "result['a']", {}),
        (lambda r: r * 2, "result", {"executor": "joblib", "bytes_per_item": 16}),
    ],
    ids=["array", "tuple", "dict", "joblib"],
)
def test_fn_s_result_is_named(masked_behind_plain_meta, fn, label, options):
    with pytest.raises(
        TypeError, match=rf"^fn=.*'s {re.escape(label)} for rows \d+:\d+ {LOST}"
    ):
        xpkit.map_batches(fn, masked_behind_plain_meta, **options)


def test_the_facade_and_the_asserts_name_their_parameter(masked_behind_plain_meta):
    with pytest.raises(TypeError, match=rf"^arr {LOST}"):
        xpkit.Backend("dask").to_numpy(masked_behind_plain_meta)
    with pytest.raises(TypeError, match=rf"^x {LOST}"):
        xpkit.Backend("numpy").asarray(masked_behind_plain_meta)
    with pytest.raises(TypeError, match=rf"^actual {LOST}"):
        assert_close(masked_behind_plain_meta, masked_behind_plain_meta)


def test_inputs_moved_to_a_backend_are_named(masked_behind_plain_meta):
    """A review found two more paths that said "x": the rows and whole
    operands moved to ``backend``, and `check_arrays`' inputs."""
    b = xpkit.Backend("numpy")
    plain = np.ones((6, 2))
    runs = {
        "arrays[0]": lambda: xpkit.map_batches(
            lambda r: r, masked_behind_plain_meta, backend=b, bytes_per_item=16
        ),
        "whole[0]": lambda: xpkit.map_batches(
            lambda r, w: r,
            plain,
            whole=(masked_behind_plain_meta,),
            backend=b,
            bytes_per_item=16,
        ),
        "whole['w']": lambda: xpkit.map_batches(
            lambda r, w: r,
            plain,
            whole={"w": masked_behind_plain_meta},
            backend=b,
            bytes_per_item=16,
        ),
        "inputs[1]": lambda: b.check_arrays(
            plain, masked_behind_plain_meta, convert=True
        ),
    }
    for name, run in runs.items():
        with pytest.raises(TypeError, match=rf"^{re.escape(name)} {LOST}"):
            run()


def test_the_error_renames_and_stays_a_type_error():
    error = LostOnHost("a masked thing")
    assert str(error) == "x is a masked thing"
    named = error.named("whole[1]")
    assert isinstance(named, TypeError)
    assert str(named) == "whole[1] is a masked thing"
    assert named.reason == error.reason
