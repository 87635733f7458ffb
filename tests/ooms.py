"""Checks on the row counts ``fn`` was called with when some of them ran out of memory.

An OOM at ``n`` rows is never followed by ``n`` rows or more in the same
call: the next attempt has at most ``n // 2`` rows (or fewer, what the OOM
taught), and no size as large as one that failed is tried again.
"""

from __future__ import annotations

from collections.abc import Sequence


def assert_no_failed_size_again(sizes: Sequence[int], fails_above: int) -> None:
    """Each call after an OOM (a size above ``fails_above``) is smaller than it.

    The call right after an OOM at ``n`` rows has at most ``n // 2`` rows, and
    none after it has as many rows as the smallest size that failed so far.
    """
    smallest_failed: int | None = None
    for i, rows in enumerate(sizes):
        calls = f"call {i} of {list(sizes[max(i - 8, 0) : i + 1])} (the last 9)"
        if smallest_failed is not None:
            assert rows < smallest_failed, (
                f"{calls}: {rows} rows after {smallest_failed} failed"
            )
        if i and sizes[i - 1] > fails_above:
            assert rows <= sizes[i - 1] // 2, (
                f"{calls}: {rows} rows right after {sizes[i - 1]} failed"
            )
        if rows > fails_above:
            smallest_failed = (
                rows if smallest_failed is None else min(smallest_failed, rows)
            )
