"""Library settings a test session's ini asks for: switched for the session, then back.

``xpkit_x64`` (JAX's ``jax_enable_x64`` on) and ``xpkit_default_float``
(torch's default dtype): the one place the plugin changes a process-wide
setting, because the user's pytest configuration asks for it. Each is
switched only for the libraries a selected variant runs, only where it is
not so already, and back at the session's end (`switch_back`), as a peer
suite's own harness sets them (SciPy's makes torch's default float64).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from .._adapters._registry import ADAPTERS
from ._variants import available_backend_params, libraries_named, selected

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["DEFAULT_FLOATS", "switch_back", "switch_for_session"]

#: What ``xpkit_default_float`` takes ("": the libraries' own default).
DEFAULT_FLOATS = ("", "float32", "float64")

#: What switches each setting back, in the order they were switched.
_UNDO = pytest.StashKey[list["Callable[[], None]"]]()


def switch_for_session(config: pytest.Config, wanted: list[str] | None) -> None:
    """Switch what ``xpkit_x64`` and ``xpkit_default_float`` ask for."""
    x64 = bool(_flag(config, "xpkit_x64"))
    _flag(config, "xpkit_lazy_in_place")  # (read in modules that declare lazy
    # functions: checked here, once)
    default_float = str(config.getini("xpkit_default_float")).strip()
    if default_float not in DEFAULT_FLOATS:
        msg = (
            f"xpkit_default_float takes float32 or float64 (or nothing), "
            f"got {default_float!r}"
        )
        raise pytest.UsageError(msg)
    switches = [
        a
        for a in ADAPTERS.values()
        if ((x64 and a.has_64_bit_switch) or (default_float and a.has_default_float))
        and a.is_installed()
    ]
    if not switches:
        return
    # (the variants that run: selected, and not skipped, as for a library
    # that is installed but fails to import)
    if wanted is None:
        chosen = available_backend_params()
    else:  # (all,-jax, numpy*: only the variants selected say)
        chosen = selected(available_backend_params(libraries_named(wanted)), wanted)
    keys = {p.key for p in chosen if not p.skip}
    undo = config.stash.setdefault(_UNDO, [])
    for adapter in switches:
        if adapter.key not in keys:
            continue
        backs = (
            adapter.switch_on_64_bit() if x64 and adapter.has_64_bit_switch else None,
            adapter.set_default_float(default_float)
            if default_float and adapter.has_default_float
            else None,
        )
        undo += [back for back in backs if back is not None]


def _flag(config: pytest.Config, name: str) -> object:
    """A bool ini option, or a usage error that names it (pytest's did not)."""
    try:
        return config.getini(name)
    except (ValueError, pytest.UsageError) as exc:  # (pytest 9 raises the latter)
        msg = f"{name}: {exc}"
        raise pytest.UsageError(msg) from exc


def switch_back(config: pytest.Config) -> None:
    """Set back what `switch_for_session` switched (the plugin is a guest)."""
    undo: list[Callable[[], None]] = config.stash.get(_UNDO, [])
    for back in reversed(undo):
        back()
    config.stash[_UNDO] = []
