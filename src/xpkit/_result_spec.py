"""The structure of what ``fn`` returned, or of what ``out`` is, in words too.

`xpkit._rows.ResultSpec` describes the structure of ``fn``'s result: a
tuple's or a list's is its type's name and its length, a named tuple's
holds its class (`NamedTupleKind`), and a subclass's of either holds it
(`SequenceKind`), so that the outputs are given back as one. Both ``fn``'s results (`xpkit._rows`) and ``out`` (`xpkit._into`)
are described here, and named in errors (`describe_spec`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._rows import ResultSpec

__all__ = [
    "NamedTupleKind",
    "SequenceKind",
    "describe_spec",
    "rebuilt",
    "sequence_spec",
]


class NamedTupleKind:
    """A named tuple's class in a spec, equal to any class of its name and fields.

    A ``fn`` that makes its class on each call returns a new class each
    batch: the same structure. ``make`` builds one from its fields in
    order (``_make``: a subclass's own ``__new__`` is not called).
    """

    __slots__ = ("cls",)

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def _identity(self) -> tuple[str, tuple[str, ...]]:
        return self.cls.__qualname__, tuple(getattr(self.cls, "_fields", ()))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, NamedTupleKind) and self._identity() == other._identity()
        )

    def __hash__(self) -> int:
        return hash(self._identity())

    def make(self, leaves: Sequence[object]) -> tuple[object, ...]:
        """A named tuple of this class holding ``leaves``."""
        made: tuple[object, ...] = self.cls._make(leaves)  # type: ignore[attr-defined]
        return made


class SequenceKind:
    """A subclass of ``list`` or ``tuple`` in a spec (not a named tuple), by identity.

    ``make`` builds one holding the leaves, as `rebuilt` does.
    """

    __slots__ = ("cls",)

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SequenceKind) and self.cls is other.cls

    def __hash__(self) -> int:
        return id(self.cls)

    def make(self, leaves: Sequence[object]) -> tuple[object, ...] | list[object]:
        """One of this class holding ``leaves``."""
        return _of_class(self.cls, list(leaves))


def _is_named(result: object) -> bool:
    """A named tuple (``_fields`` and ``_make``, as ``collections.namedtuple`` makes)."""
    return hasattr(result, "_fields") and callable(getattr(result, "_make", None))


def sequence_spec(result: tuple[object, ...] | list[object]) -> ResultSpec:
    """The `ResultSpec` of a tuple or list (a named tuple's holds its class)."""
    if _is_named(result):
        return ("namedtuple", len(result), NamedTupleKind(type(result)))
    cls = type(result)
    if cls is tuple or cls is list:
        return (cls.__name__, len(result))
    # (a subclass, by itself: its name may be any, "array" or "dict" too)
    return ("sequence", len(result), SequenceKind(cls))


def rebuilt(
    result: tuple[object, ...] | list[object], items: list[object]
) -> tuple[object, ...] | list[object]:
    """``items`` in a sequence of ``result``'s type (a named tuple's from its fields)."""
    if _is_named(result):
        return NamedTupleKind(type(result)).make(items)
    return _of_class(type(result), items)


def _of_class(cls: type, items: list[object]) -> tuple[object, ...] | list[object]:
    """``items`` in a ``cls``, a subclass of ``tuple`` or ``list`` (or one of them)."""
    try:
        made: tuple[object, ...] | list[object] = cls(items)
    except TypeError:  # (a subclass whose constructor takes other arguments)
        pass
    else:
        return made
    if issubclass(cls, tuple):  # (its type kept: the spec names it)
        kept_tuple: tuple[object, ...] = tuple.__new__(cls, items)
        return kept_tuple
    kept: list[object] = list.__new__(cls)  # type: ignore[arg-type]
    kept.extend(items)
    return kept


def describe_spec(spec: ResultSpec) -> str:
    """``spec`` in words, for an error: "one array", "a tuple of 2 arrays", ..."""
    if spec[0] == "array":
        return "one array"
    if spec[0] == "dict":
        return f"a dict with keys {list(spec[1])}"
    if spec[0] == "namedtuple":
        cls = spec[2].cls
        return f"a named tuple {cls.__name__}{tuple(cls._fields)} of {spec[1]} arrays"
    if spec[0] == "sequence":
        return f"a {spec[2].cls.__qualname__} of {spec[1]} arrays"
    return f"a {spec[0]} of {spec[1]} arrays"
