"""A function's support statement written into its docstring, as SciPy does.

``@capabilities(..., in_docstring=True)`` adds a reStructuredText table
(backend, GPU column or mode -> verdict and reason) to the numpydoc
``Notes`` section of the function's docstring, making that section where
the docstring has none (before ``References`` and ``Examples``).
"""

from __future__ import annotations

import inspect
import sys

__all__ = ["with_support_notes"]

#: numpydoc's sections that come after Notes.
_AFTER_NOTES = ("References", "Examples")

_INTRO = "Array API support (stated with ``xpkit.testing.capabilities``):"


def _table(rows: list[tuple[str, str]]) -> list[str]:
    """A reStructuredText simple table of (backend, support) rows."""
    head = ("backend", "support")
    left = max(len(head[0]), *(len(r[0]) for r in rows))
    right = max(len(head[1]), *(len(r[1]) for r in rows))
    rule = f"{'=' * left}  {'=' * right}"
    lines = [rule, f"{head[0]:<{left}}  {head[1]}", rule]
    lines += [f"{name:<{left}}  {verdict}" for name, verdict in rows]
    return [*lines, rule]


def _section_starts(lines: list[str]) -> dict[str, int]:
    """The title of each numpydoc section -> the index of its title line."""
    found = {}
    for i in range(len(lines) - 1):
        title, rule = lines[i].strip(), lines[i + 1].strip()
        if title and rule and set(rule) == {"-"} and len(rule) == len(title):
            found[title] = i
    return found


def with_support_notes(doc: str | None, rows: list[tuple[str, str]]) -> str | None:
    """``doc`` (cleaned of its indentation) with the support table in its Notes.

    A table written before (a function stated twice) is replaced; under
    ``python -OO``, which strips docstrings, none is written.
    """
    if doc is None and sys.flags.optimize >= 2:
        return None
    lines = _without_table(inspect.cleandoc(doc or "").splitlines())
    block = [_INTRO, "", *_table(rows)]
    starts = _section_starts(lines)
    later = [starts[t] for t in starts if starts[t] > starts.get("Notes", -1)]
    if "Notes" in starts:
        at = min(later, default=len(lines))
    else:
        after = [starts[t] for t in _AFTER_NOTES if t in starts]
        at = min(after, default=len(lines))
        block = ["Notes", "-----", *block]
    before, rest = lines[:at], lines[at:]
    while before and not before[-1].strip():
        before.pop()
    while rest and not rest[0].strip():
        rest.pop(0)
    lines = [*before, *([""] if before else []), *block, *([""] if rest else []), *rest]
    return "\n".join(lines).strip() + "\n"


def _without_table(lines: list[str]) -> list[str]:
    """``lines`` less the support table an earlier statement wrote, if any."""
    if _INTRO not in lines:
        return lines
    start = lines.index(_INTRO)
    rules = [
        i for i in range(start, len(lines)) if lines[i] and set(lines[i]) <= {"=", " "}
    ]
    end = rules[2] + 1 if len(rules) >= 3 else start + 1
    while end < len(lines) and not lines[end].strip():
        end += 1
    return lines[:start] + lines[end:]
