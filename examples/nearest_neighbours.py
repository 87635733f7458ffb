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
beside the same algorithm written by hand in that library alone (in batches
of the size xpkit chose), timed in turn ``--repeats`` times (3): the median
seconds of each and the median of each round's ratio. Where scikit-learn is
installed, its brute-force ``NearestNeighbors`` too, with whether the
indices agree.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time

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


def by_hand_numpy(points: np.ndarray, k: int, batch_size: int) -> np.ndarray:
    """The same algorithm in NumPy alone: argpartition, then a sort of the k."""
    squares = (points * points).sum(axis=1)
    out = np.empty((len(points), k), dtype=np.int64)
    for start in range(0, len(points), batch_size):
        rows = points[start : start + batch_size]
        d = squares[None, :] - 2 * rows @ points.T
        d[np.arange(len(rows)), np.arange(start, start + len(rows))] = np.inf
        part = np.argpartition(d, k - 1, axis=1)[:, :k]
        order = np.argsort(np.take_along_axis(d, part, axis=1), axis=1)
        out[start : start + len(rows)] = np.take_along_axis(part, order, axis=1)
    return out


def by_hand_torch(points: np.ndarray, k: int, batch_size: int) -> np.ndarray:
    """The same algorithm in torch alone: ``torch.topk``."""
    import torch

    p = torch.from_numpy(points)
    squares = (p * p).sum(dim=1)
    out = torch.empty((len(p), k), dtype=torch.int64)
    for start in range(0, len(p), batch_size):
        rows = p[start : start + batch_size]
        d = squares[None, :] - 2 * rows @ p.T
        d[torch.arange(len(rows)), torch.arange(start, start + len(rows))] = np.inf
        out[start : start + len(rows)] = torch.topk(d, k, dim=1, largest=False).indices
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--d", type=int, default=32)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--backends", default="numpy,torch")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    points = np.random.default_rng(0).standard_normal((args.n, args.d))
    print(f"{args.k} nearest neighbours of each of {args.n} rows of {args.d} features")
    print()
    print(
        f"{'backend':<12} {'first s':>8} {'xpkit s':>8} {'by hand s':>10} "
        f"{'ratio':>6}  agrees"
    )
    reference = None
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
        batch = xpkit.plan_batches(fn, on_device, backend=backend).batch_size
        ours, theirs = [], []
        for _ in range(max(args.repeats, 1)):  # in turn: a drift slows both
            start = time.perf_counter()  # again: the plan remembered
            got = backend.to_numpy(nearest(points, args.k, backend))
            ours.append(time.perf_counter() - start)
            start = time.perf_counter()
            hand = BY_HAND[backend.library](points, args.k, batch)
            theirs.append(time.perf_counter() - start)
        ratio = statistics.median(a / b for a, b in zip(ours, theirs, strict=True))
        reference = got if reference is None else reference
        agrees = _agree(got, hand, points) and _agree(got, reference, points)
        print(
            f"{backend.name:<12} {first:8.2f} {statistics.median(ours):8.2f} "
            f"{statistics.median(theirs):10.2f} {ratio:6.2f}  "
            f"{'yes' if agrees else 'NO'}"
        )
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
