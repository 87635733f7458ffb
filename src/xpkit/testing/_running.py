"""The variant the running test runs on, as the pytest plugin sets it.

The plugin enters `running_on` around each test parametrized by
``xpkit_backend``; the asserts read `running_variant` to compare a result
with a NumPy reference the way that variant's device allows (its device,
its narrowed dtypes). Outside such a test there is none, and nothing changes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .._backend import Backend

__all__ = [
    "RunningVariant",
    "forget_loosened",
    "loosened",
    "note_loosened",
    "running_on",
    "running_variant",
]


class RunningVariant(NamedTuple):
    """The `Backend` a test runs on, and the variant's id (``"jax-cpu"``)."""

    backend: Backend
    ident: str


_STACK: list[RunningVariant] = []


def running_variant() -> RunningVariant | None:
    """The variant of the test running now, or None outside the plugin's tests."""
    return _STACK[-1] if _STACK else None


@contextlib.contextmanager
def running_on(backend: Backend, ident: str) -> Iterator[None]:
    """Within the block, `running_variant` is ``backend`` with id ``ident``."""
    _STACK.append(RunningVariant(backend, ident))
    try:
        yield
    finally:
        _STACK.pop()


#: Device -> {decimal asked for: decimal compared at}, where
#: `assert_array_almost_equal` loosened a comparison inside a variant's test.
_LOOSENED: dict[str, dict[int, int]] = {}


def note_loosened(where: str, asked: int, used: int) -> None:
    """Record that a comparison on ``where`` ran at ``used`` decimals, not ``asked``."""
    _LOOSENED.setdefault(where, {})[asked] = used


def loosened() -> dict[str, dict[int, int]]:
    """What `note_loosened` recorded: device -> {decimal asked for: used}."""
    return {where: dict(pairs) for where, pairs in _LOOSENED.items()}


def forget_loosened() -> None:
    """Empty what `loosened` returns (a new pytest session in this process)."""
    _LOOSENED.clear()
