"""Typing cases for array-api-strict (checked only where it is installed)."""

from __future__ import annotations

from typing import assert_type

# array-api-strict exports no public name for its array class.
from array_api_strict._array_object import Array  # pyright: ignore[reportPrivateUsage]

from xpkit import Backend

b = Backend("array_api_strict")
assert_type(b, Backend[Array])
x = b.asarray([1.0, 2.0])
assert_type(x, Array)
assert_type(b.concatenate([x, x]), Array)
assert_type(Backend.from_arrays(x), Backend[Array])
