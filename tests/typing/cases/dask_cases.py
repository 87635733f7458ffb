"""Typing cases for Dask (checked only where dask is installed)."""

from __future__ import annotations

from typing import assert_type

import dask.array as da

from xpkit import Backend

b = Backend("dask")
assert_type(b, Backend[da.Array])
x = b.asarray([[1.0, 2.0], [3.0, 4.0]])
assert_type(x, da.Array)
assert_type(b.sort(x), da.Array)
assert_type(Backend.from_arrays(x), Backend[da.Array])
