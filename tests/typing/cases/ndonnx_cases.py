"""Typing cases for ndonnx (checked only where it is installed)."""

from __future__ import annotations

from typing import assert_type

import ndonnx

from xpkit import Backend

b = Backend("ndonnx")
assert_type(b, Backend[ndonnx.Array])
x = b.asarray([1.0, 2.0])
assert_type(x, ndonnx.Array)
assert_type(b.expand_dims(x, 0), ndonnx.Array)
