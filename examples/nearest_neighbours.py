"""Each row's k nearest neighbours, written once, batched to the device's memory.

Run it: ``python examples/nearest_neighbours.py`` (``--n 20000 --d 32 --k 5``;
``--backends numpy,torch``). For every backend named (NumPy and torch's CPU
by default) it finds, for each row of an (n, d) matrix, the k other rows
nearest to it: ``map_batches`` cuts the rows into batches sized to the
device's memory, ``Backend.top_k`` keeps the k smallest distances of each
row without sorting them all, and ``xpkit.current_rows`` says where a
batch's rows are in the whole input, so that each row leaves itself out.
It prints the seconds per backend, of the first call (which plans: it
traces what ``fn`` costs) and of the calls after it (the plan remembered),
beside the same algorithm written by hand in that library alone, an
inline loop over batches of the size xpkit chose ("by hand"), and that
loop with each batch's temporaries deleted at its end ("dropped"), as
``fn``'s are when it returns. Each is timed in turn ``--repeats`` times
(5), each first in some rounds: the median seconds of each, the median and
range of each round's ratio (xpkit's seconds over the other's), and the
minor page faults of a call (where ``resource`` is). glibc gives the
heap's free top back to the system where a batch's temporaries all die at
its end, and the next batch faults that memory in again: an inline loop,
whose last blocks live on until the next batch rebinds them, escapes that.
Where scikit-learn is installed, its brute-force ``NearestNeighbors`` too,
with whether the indices agree.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from functools import partial

import numpy as np

import xpkit


def nearest(points, k: int, backend: xpkit.Backend):
    """Indices of the ``k`` rows of ``points`` nearest to each row (itself left out)."""
    batch, points = neighbours_of_rows(points, k, backend)
    return xpkit.map_batches(batch, points, backend=backend, result_on="device")


def neighbours_of_rows(points, k: int, backend: xpkit.Backend):
    """``fn`` for `map_batches`: a batch of rows -> their k nearest rows' indices."""
    xp = backend.xp
    points = backend.asarray(points)
    squares = xp.sum(points * points, axis=1)

    def batch(rows):
        where = xpkit.current_rows()  # these rows' positions in ``points``
        # |a - b|^2 = |a|^2 - 2 a.b + |b|^2, one (batch, n) block at a time
        # (2 scales the batch's rows, not the block: one pass over it less)
        d = squares[None, :] - backend.matmul(2 * rows, xp.permute_dims(points, (1, 0)))
        # never its own neighbour: the diagonal of the batch's own columns
        own = (slice(None), slice(where.start, where.stop))
        eye = xp.eye(rows.shape[0], dtype=xp.bool, device=backend.native_device)
        d = backend.at(d, own).set(xp.where(eye, xp.inf, d[own]))
        return backend.top_k(d, k, mode="smallest")[1]

    return batch, points


def by_hand_numpy(
    points: np.ndarray, k: int, batch_size: int, *, drop: bool = False
) -> np.ndarray:
    """The same distances in NumPy alone, selected as NumPy code does: argpartition,
    then a sort of the k (xpkit's top_k takes a threshold's candidates on long rows).

    ``drop``: each batch's temporaries are deleted at its end, as a
    function's return deletes them (see `main` for why that costs time).
    """
    squares = (points * points).sum(axis=1)
    out = np.empty((len(points), k), dtype=np.int64)
    for start in range(0, len(points), batch_size):
        rows = points[start : start + batch_size]
        d = squares[None, :] - 2 * rows @ points.T
        d[np.arange(len(rows)), np.arange(start, start + len(rows))] = np.inf
        part = np.argpartition(d, k - 1, axis=1)[:, :k]
        order = np.argsort(np.take_along_axis(d, part, axis=1), axis=1)
        out[start : start + len(rows)] = np.take_along_axis(part, order, axis=1)
        if drop:
            del d, part, order
    return out


def by_hand_torch(
    points: np.ndarray, k: int, batch_size: int, *, drop: bool = False
) -> np.ndarray:
    """The same algorithm in torch alone: ``torch.topk`` (``drop`` as for NumPy)."""
    import torch

    p = torch.from_numpy(points)
    squares = (p * p).sum(dim=1)
    out = torch.empty((len(p), k), dtype=torch.int64)
    for start in range(0, len(p), batch_size):
        rows = p[start : start + batch_size]
        d = squares[None, :] - 2 * rows @ p.T
        d[torch.arange(len(rows)), torch.arange(start, start + len(rows))] = np.inf
        out[start : start + len(rows)] = torch.topk(d, k, dim=1, largest=False).indices
        if drop:
            del d
    return out.numpy()


BY_HAND = {"numpy": by_hand_numpy, "torch": by_hand_torch}


def _agree(a: np.ndarray, b: np.ndarray, points: np.ndarray) -> bool:
    """Whether two answers pick neighbours at the same distances (ties aside)."""
    if np.array_equal(a, b):
        return True
    rows = np.arange(len(points))[:, None]

    def dist(i: np.ndarray) -> np.ndarray:
        return ((points[rows] - points[i]) ** 2).sum(axis=-1)

    return bool(np.allclose(dist(a), dist(b), rtol=1e-9, atol=1e-9))


def _on_host(points: np.ndarray, k: int, backend: xpkit.Backend) -> np.ndarray:
    """`nearest`'s indices, as a NumPy array."""
    return backend.to_numpy(nearest(points, k, backend))


def _minor_faults() -> int | None:
    """The process's minor page faults so far (None where ``resource`` is missing)."""
    try:
        import resource
    except ImportError:  # (Windows)
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _ratio(seconds: dict[str, list[float]], who: str) -> str:
    """The median of each round's xpkit seconds over ``who``'s, and their range."""
    ratios = sorted(a / b for a, b in zip(seconds["xpkit"], seconds[who], strict=True))
    return f"{statistics.median(ratios):.2f} ({ratios[0]:.2f}-{ratios[-1]:.2f})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--d", type=int, default=32)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--backends", default="numpy,torch")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    points = np.random.default_rng(0).standard_normal((args.n, args.d))
    print(f"{args.k} nearest neighbours of each of {args.n} rows of {args.d} features")
    print()
    print(
        f"{'backend':<12} {'first s':>8} {'xpkit s':>8} {'by hand s':>10} "
        f"{'xpkit/hand':>18} {'dropped s':>10} {'xpkit/dropped':>18}  agrees"
    )
    reference, faults = None, []
    for name in args.backends.split(","):
        try:
            backend = xpkit.Backend(name)
        except ImportError as exc:
            print(f"{name:<12} skipped: {exc}")
            continue
        start = time.perf_counter()  # the first call plans: traces fn's cost
        backend.to_numpy(nearest(points, args.k, backend))
        first = time.perf_counter() - start
        fn, on_device = neighbours_of_rows(points, args.k, backend)
        size = xpkit.plan_batches(fn, on_device, backend=backend).batch_size
        hand = BY_HAND[backend.library]
        runs = {  # xpkit (the plan remembered); by hand in batches of its size
            "xpkit": partial(_on_host, points, args.k, backend),
            "by hand": partial(hand, points, args.k, size),
            "dropped": partial(hand, points, args.k, size, drop=True),
        }
        seconds = {who: [] for who in runs}
        faulted = {who: [] for who in runs}
        results = {}
        for round_ in range(max(args.repeats, 1)):  # in turn, each first in a round
            names = [*runs][round_ % 3 :] + [*runs][: round_ % 3]
            for who in names:
                before, start = _minor_faults(), time.perf_counter()
                results[who] = runs[who]()
                seconds[who].append(time.perf_counter() - start)
                if before is not None:
                    faulted[who].append(_minor_faults() - before)
        ours = results["xpkit"]
        reference = ours if reference is None else reference
        agrees = all(_agree(ours, got, points) for got in results.values())
        agrees = agrees and _agree(ours, reference, points)
        xp_s, hand_s, dropped_s = (statistics.median(seconds[w]) for w in runs)
        print(
            f"{backend.name:<12} {first:8.2f} {xp_s:8.2f} {hand_s:10.2f} "
            f"{_ratio(seconds, 'by hand'):>18} {dropped_s:10.2f} "
            f"{_ratio(seconds, 'dropped'):>18}  {'yes' if agrees else 'NO'}"
        )
        if faulted["xpkit"]:
            faults.append((backend.name, [statistics.median(faulted[w]) for w in runs]))
    if faults:
        print("\nminor page faults per call (median): xpkit, by hand, dropped")
        for name, (xp_f, hand_f, dropped_f) in faults:
            print(f"{name:<12} {xp_f:>10,.0f} {hand_f:>10,.0f} {dropped_f:>10,.0f}")
    if importlib.util.find_spec("sklearn") is None:
        print("\nscikit-learn is not installed: no comparison with NearestNeighbors")
        return
    from sklearn.neighbors import NearestNeighbors

    start = time.perf_counter()
    fitted = NearestNeighbors(n_neighbors=args.k + 1, algorithm="brute").fit(points)
    theirs = fitted.kneighbors(points, return_distance=False)[:, 1:]
    took = time.perf_counter() - start
    agrees = reference is not None and _agree(reference, theirs, points)
    print(
        f"\nscikit-learn NearestNeighbors(algorithm='brute'): {took:.2f} s, "
        f"indices agree with xpkit's: {'yes' if agrees else 'NO'}"
    )


if __name__ == "__main__":
    main()
