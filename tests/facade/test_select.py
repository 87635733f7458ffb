"""auto_select_backend takes any integer size, NumPy's included (issue #19)."""

from __future__ import annotations

import numpy as np
import pytest

import xpkit


@pytest.mark.parametrize("kind", [np.int64, np.int32, np.uint16, int])
def test_auto_select_backend_takes_numpy_integers(kind):
    chosen = xpkit.auto_select_backend(kind(10**4), kind(10), cv=kind(2))
    assert chosen.name == "numpy"  # 2 * 10**5 elements: far below the GPU's share


def test_auto_select_backend_multiplies_without_int64_overflow(monkeypatch):
    # 2**40 * 2**40 overflows int64; Python ints do not, so the work is large.
    seen = []
    monkeypatch.setattr("xpkit._select.find_gpus", lambda: seen.append(True) or [])
    xpkit.auto_select_backend(np.int64(2**40), np.int64(2**40))
    assert seen, "a wrapped-around (negative) work count would never look for a GPU"
