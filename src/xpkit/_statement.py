"""A function's capability statement: the record, and reading it off a function.

The bottom of the statements: the batching functions carry their own,
`xpkit.testing.capabilities` builds them for any library's functions and
`xpkit.testing.lazy_xp_function` reads a function's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["ATTRIBUTE", "MODES", "Capabilities", "check_host_copies", "statement_of"]

#: The attribute a declared function carries its `Capabilities` in.
ATTRIBUTE = "__xpkit_capabilities__"

#: The modes a statement may refuse, and the plugin variants they name.
MODES = ("jit", "lazy", "compile")


@dataclass(frozen=True)
class Capabilities:
    """One function's statement (see `capabilities`).

    Parameters
    ----------
    skip, xfail, requires, cpu_only, modes, computes, host_copies
        As `capabilities` takes them (it builds this record; use it).

    Raises
    ------
    Nothing: a statement is a record.

    Examples
    --------
    >>> from xpkit.testing import capabilities
    >>> @capabilities(requires=("linalg",))
    ... def solve(a, b):
    ...     return a
    >>> solve.__xpkit_capabilities__.requires
    ('linalg',)
    """

    skip: Mapping[str, str] = field(default_factory=dict)
    xfail: Mapping[str, str] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    cpu_only: str = ""
    modes: Mapping[str, str] = field(default_factory=dict)
    computes: bool | int = False
    host_copies: int | None = None


def check_host_copies(value: object) -> int | None:
    """``host_copies`` checked: None or a non-negative int (not a bool)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"host_copies must be a non-negative int or None, got {value!r}"
        raise TypeError(msg)
    if value < 0:
        msg = f"host_copies must be a non-negative int or None, got {value!r}"
        raise ValueError(msg)
    return value


def statement_of(func: object) -> Capabilities | None:
    """``func``'s `capabilities` statement, or None when it has none."""
    found = getattr(func, ATTRIBUTE, None)
    return found if isinstance(found, Capabilities) else None
