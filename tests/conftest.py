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


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Skip ``@pytest.mark.gpu`` tests where this machine has no GPU."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    from xpkit._select import find_gpus

    if find_gpus():
        return
    skip = pytest.mark.skip(
        reason="needs a GPU (CUDA, MPS or a JAX GPU); none found here"
    )
    for item in gpu_items:
        item.add_marker(skip)
