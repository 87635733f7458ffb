"""Test configuration shared by xpkit's own tests.

The ``xpkit_backend`` and ``xp`` fixtures come from xpkit's own pytest plugin
(registered by installing xpkit). JAX runs with float64 enabled here, as in
SciPy's and scikit-learn's test suites, so every backend is compared with
NumPy at float64.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

if importlib.util.find_spec("jax") is not None:
    import jax

    jax.config.update("jax_enable_x64", True)

# Libraries built with pybind11 must be in sys.modules before any test runs.
# The pytester fixture restores sys.modules after each test, dropping what
# that test imported first; a library dropped and imported again leaves
# functions whose method tables went with the old module, and a later garbage
# collection segfaults on them (torch, first imported in a pytester test, did
# this in tests/testing/test_plugin.py).
for _name in ("torch", "onnxruntime"):
    if importlib.util.find_spec(_name) is not None:
        importlib.import_module(_name)


# Property tests: a quick pass in the default run, thousands in `nox -s fuzz`.
settings.register_profile(
    "default",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "fuzz",
    max_examples=int(os.environ.get("XPKIT_FUZZ_EXAMPLES", "2000")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture
def host_memory(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """A setter: ``host_memory(gb)`` makes the host report ``gb`` GiB available.

    It patches ``host_available_bytes`` where ``xpkit._memory`` reads it, for
    this test only.
    """
    from xpkit import _memory

    def set_available(gb: float) -> None:
        monkeypatch.setattr(_memory, "host_available_bytes", lambda: int(gb * 1024**3))

    return set_available


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


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Any:
    """pytest's ``pytester``, its inner runs without the plugins xpkit's tests
    leave out (`code_blocks.plugins_left_out`, for what its files hold)."""
    from code_blocks import plugins_left_out

    run = pytester.runpytest_subprocess

    def without_unread_plugins(*args: Any, timeout: float | None = None) -> Any:
        files = [p for p in pytester.path.rglob("*") if p.suffix in (".py", ".ini")]
        code = "\n".join(p.read_text() for p in files)
        return run(*plugins_left_out(code), *args, timeout=timeout)

    monkeypatch.setattr(pytester, "runpytest_subprocess", without_unread_plugins)
    return pytester


@pytest.fixture(autouse=True)
def _forget_plans() -> None:
    """Each test starts with an empty plan memory (what map_batches remembers)."""
    import xpkit

    xpkit.plan_memory.clear()


@pytest.fixture
def host_reading_held(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host's memory reading does not age in this test (its clock stands).

    A repeated `map_batches` call needs the reading its plan came from
    (reused for 0.1 s); on a loaded machine a slow call could outlive it.
    """
    from types import SimpleNamespace

    from xpkit import _memory

    monkeypatch.setattr(_memory, "_host_reading", (None, -float("inf"), 0))
    monkeypatch.setattr(_memory, "time", SimpleNamespace(monotonic=lambda: 0.0))


@pytest.fixture
def writing_holds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Writing into ``out`` holds nothing beside the budget, in this test's plans.

    For tests of how batches meet a store's chunks with budgets of a few
    bytes, which what a store holds while writing (tens of kB at least,
    `xpkit._into.held_while_writing`) would swamp; that figure is tested on
    its own (``tests/batches/test_out_held.py``).
    """
    from xpkit import _plan

    monkeypatch.setattr(_plan, "held_while_writing", lambda out, batch: 0)
