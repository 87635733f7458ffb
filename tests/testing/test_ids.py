"""xpkit.testing._ids: the variant ids a marker or a statement may name, on any machine."""

from __future__ import annotations

import pytest

from xpkit._adapters import ADAPTERS
from xpkit.testing._ids import is_known_name, known_ids, known_names_text
from xpkit.testing._variants import available_backend_params


def test_every_variant_of_this_machine_has_a_known_id():
    """The grammar of ids is the adapters' own: it misses none found here."""
    for param in available_backend_params():
        assert param.id in ADAPTERS or param.id in known_ids(param.key), param.id


@pytest.mark.parametrize("key", list(ADAPTERS))
def test_the_strictest_variant_is_known_without_importing(key):
    adapter = ADAPTERS[key]
    if not adapter.is_installed():
        pytest.skip(f"{adapter.label} is not installed")
    assert adapter.test_strictest is (adapter.strictest_mode() is not None)


def test_ids_of_devices_and_libraries_not_here_are_known():
    for name in ("torch-cuda", "torch-mps-compile", "jax-gpu-jit", "cupy", "torch*"):
        assert is_known_name(name), name
    for name in ("torch-cpu-compiled", "jax-cpu-jitt", "jax-cuda", "cupy-cuda", "*-x"):
        assert not is_known_name(name), name
    assert is_known_name("jax-metal", frozenset({"jax-metal"}))  # (found here)


def test_the_text_lists_the_library_ids_or_the_keys():
    assert "jax-cpu-jit" in known_names_text("jax-cpu-jitt")
    assert "numpy, torch" in known_names_text("tourch")
    assert "numpy, torch" in known_names_text(123)
