"""Typing cases for JAX (checked only where jax is installed)."""

from __future__ import annotations

from typing import assert_type

import jax
import user_lib

from xpkit import Backend

b = Backend("jax")
assert_type(b, Backend[jax.Array])
x = b.asarray([[1.0, 2.0], [3.0, 4.0]])
assert_type(x, jax.Array)
assert_type(b.svd(x), tuple[jax.Array, jax.Array, jax.Array])
assert_type(b.xp.mean(x), jax.Array)
assert_type(Backend.from_arrays(x), Backend[jax.Array])
assert_type(user_lib.standardize(x), jax.Array)
