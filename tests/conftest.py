"""Test configuration shared by xpkit's own tests.

The ``xpkit_backend`` and ``xp`` fixtures come from xpkit's own pytest plugin
(registered by installing xpkit). JAX runs with float64 enabled here, as in
SciPy's and scikit-learn's test suites, so every backend is compared with
NumPy at float64.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("jax") is not None:
    import jax

    jax.config.update("jax_enable_x64", True)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
