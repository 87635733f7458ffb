"""What one call of ``fn`` costs: peak bytes as a function of its rows.

The cost stage of `map_batches` (`xpkit._cost`) makes a `Cost`; the plan
(`xpkit._plan`) reads it. A cost is a quadratic in the rows,
``fixed + per_item * rows + squared * rows**2``: a straight line for
row-wise work, a curve for work that grows with the rows squared (an outer
product, a pairwise distance of the batch's rows). Where a tracer stands
behind the cost (the shape-only trace, a compiler's analysis), the plan
checks its batch size against the tracer itself (`Cost.exact`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Cost", "fit"]


@dataclass(slots=True)
class Cost:
    """Peak bytes of one call of ``fn`` on ``rows`` rows, and where it came from.

    Attributes
    ----------
    per_item, fixed, squared : float
        The model ``fixed + per_item * rows + squared * rows**2``.
    source : str
        How it was obtained (`BatchPlan.source`).
    probe_rows : int
        Rows a measured probe computed (their results are in the outputs).
    limit : int or None
        Rows that ran out of memory in the probe, halved.
    remembered : bool
        Whether it came from the plan memory.
    exact : callable or None
        The tracer's peak at any row count (None: only the model; it returns
        None for a row count it cannot afford to trace).
    output_row_bytes : int or None
        Bytes of one row of ``fn``'s outputs, where the tracer or the probe
        saw them (None: not known yet).
    rows_seen : int
        The most rows the model was fitted at (traced or measured; 0: none).
        Beyond them it is an extrapolation, which a remembered cost is not
        stretched to (`xpkit._cost.cost_of`).
    """

    per_item: float
    fixed: float
    source: str
    squared: float = 0.0
    probe_rows: int = 0
    limit: int | None = None
    remembered: bool = False
    exact: Callable[[int], int | None] | None = None
    output_row_bytes: int | None = None
    rows_seen: int = 0

    def peak(self, rows: float) -> float:
        """The model's peak bytes at ``rows`` rows."""
        return self.fixed + rows * self.per_item + rows * rows * self.squared

    def rows_within(self, budget_bytes: float, overhead: float) -> int:
        """The most rows whose ``overhead * peak`` fits ``budget_bytes`` (0: none)."""
        room = budget_bytes / overhead - self.fixed
        if room <= 0.0:
            return 0
        a, b = self.squared, self.per_item
        if a > 0.0:  # the positive root of a r^2 + b r - room
            rows = 2.0 * room / (b + math.sqrt(b * b + 4.0 * a * room))
        else:
            rows = room / b
        rows *= 1 + 1e-12
        # (A subnormal per_item makes rows infinite; NaN is impossible.)
        return int(rows) if rows < 2.0**62 else 2**62


def fit(points: Sequence[tuple[int, float]]) -> tuple[float, float, float]:
    """``(fixed, per_item, squared)`` through measured ``(rows, peak)`` points.

    Three or more points give a quadratic through the three largest (its
    coefficients kept non-negative: a negative curvature is refit as a line,
    a negative slope as ``fixed + squared * rows**2`` through the two
    largest); two give a line; one a cost proportional to the rows. A
    per-item cost is at least 1 byte.

    A fixed cost is one every call pays, so it is at most the smallest
    reading: a larger one is noise in two close probes (a line through
    1,024 and 1,643 rows, the first read 0.5 MB high, gave 112 bytes a row
    and 1.5 MB fixed for ``np.gradient``'s 1,024), and the curve is refit
    through the largest probe with the fixed cost at that reading.
    """
    fixed, per_item, squared = _fit(points)
    readings = [p for k, p in points if k > 0]
    floor = max(min(readings), 0.0) if readings else 0.0
    if fixed <= floor:
        return fixed, per_item, squared
    ranked = sorted({k: p for k, p in points if k > 0}.items())
    k3, p3 = ranked[-1]
    if squared > 0.0 and len(ranked) >= 2:  # (the curve through the last two)
        k2, p2 = ranked[-2]
        a2, a3 = (p2 - floor) / k2, (p3 - floor) / k3  # = per_item + squared * k
        squared = max((a3 - a2) / (k3 - k2), 0.0)
        per_item = a3 - squared * k3
        if per_item < 1.0:
            per_item, squared = 1.0, max((p3 - floor - k3) / (k3 * k3), 0.0)
        return floor, per_item, squared
    return floor, max((p3 - floor) / k3, 1.0), 0.0


def _fit(points: Sequence[tuple[int, float]]) -> tuple[float, float, float]:
    """`fit` before the fixed cost is held to what every probe paid."""
    ranked = sorted({k: p for k, p in points if k > 0}.items())
    if not ranked:
        return 0.0, 1.0, 0.0
    if len(ranked) >= 3:
        (k1, p1), (k2, p2), (k3, p3) = ranked[-3:]
        squared = ((p3 - p2) / (k3 - k2) - (p2 - p1) / (k2 - k1)) / (k3 - k1)
        if squared > 0.0:
            per_item = (p3 - p2) / (k3 - k2) - squared * (k3 + k2)
            fixed = p3 - per_item * k3 - squared * k3 * k3
            if per_item >= 0.0 and fixed >= 0.0:
                return fixed, max(per_item, 1.0), squared
            if per_item < 0.0:
                if p3 <= p2:  # (readings that fall: the line's rules)
                    return _line(ranked)
                # no slope: fixed + squared * rows**2 through the last two
                squared = (p3 - p2) / (k3 * k3 - k2 * k2)
                fixed = p3 - squared * k3 * k3
                if fixed < 0.0:  # (steeper than a square: through the origin)
                    return 0.0, 1.0, p3 / (k3 * k3)
                return fixed, 1.0, squared
            return 0.0, max((p3 - squared * k3 * k3) / k3, 1.0), squared
    return _line(ranked)


def _line(ranked: Sequence[tuple[int, float]]) -> tuple[float, float, float]:
    """The line through the two largest of ``ranked`` (by rows, ascending)."""
    k2, p2 = ranked[-1]
    smaller = [(k, p) for k, p in ranked if k < k2]
    if not smaller:
        return 0.0, max(p2 / k2, 1.0), 0.0
    k1, p1 = smaller[-1]
    slope = (p2 - p1) / (k2 - k1)
    if slope <= 0:  # no growth with the rows (noise, or fn allocates per call)
        return 0.0, max(p2 / k2, 1.0), 0.0
    return max(p2 - slope * k2, 0.0), max(slope, 1.0), 0.0
