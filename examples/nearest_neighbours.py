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
beside the same algorithm written by hand in that library alone: a
function of one batch called in a loop over batches of the size xpkit
chose ("by hand"), and the same loop holding each batch's distance block
until the next one is made, as a loop written inline holds it ("held": see
`by_hand` for why glibc's heap makes that differ). Each is timed in turn
``--repeats`` times (5): the median seconds of each, the median of each
round's ratio (xpkit's seconds over the other's) and the minor page faults
of a call. Where scikit-learn is installed, its brute-force
``NearestNeighbors`` too, with whether the indices agree.
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


def by_hand_numpy(points: np.ndarray, k: int):
    """The same algorithm in NumPy alone, one batch: argpartition, then a sort of the k.

    Returns ``batch(start, stop)``: the indices of rows ``start:stop``'s k
    nearest rows, and the batch's distance block (for `by_hand`'s ``hold``).
    """
    squares = (points * points).sum(axis=1)

    def batch(start: int, stop: int):
        rows = points[start:stop]
        d = squares[None, :] - 2 * rows @ points.T
        d[np.arange(stop - start), np.arange(start, stop)] = np.inf
        part = np.argpartition(d, k - 1, axis=1)[:, :k]
        order = np.argsort(np.take_along_axis(d, part, axis=1), axis=1)
        return np.take_along_axis(part, order, axis=1), d

    return batch


def by_hand_torch(points: np.ndarray, k: int):
    """The same algorithm in torch alone, one batch: ``torch.topk``."""
    import torch

    p = torch.from_numpy(points)
    squares = (p * p).sum(dim=1)

    def batch(start: int, stop: int):
        d = squares[None, :] - 2 * p[start:stop] @ p.T
        d[torch.arange(stop - start), torch.arange(start, stop)] = np.inf
        return torch.topk(d, k, dim=1, largest=False).indices.numpy(), d

    return batch


BY_HAND = {"numpy": by_hand_numpy, "torch": by_hand_torch}


def by_hand(
    batch, n: int, k: int, batch_size: int, *, hold: bool = False
) -> np.ndarray:
    """Every batch of ``batch`` in a loop, each batch's indices written into one array.

    ``hold``: the loop holds each batch's distance block until the next
    one is made, as a loop written inline does (its ``d`` outlives the
    iteration). glibc then finds no large free block at the heap's top
    when a batch ends, keeps the heap, and the next batch makes its
    temporaries without new page faults; where every temporary dies with
    the batch (a function per batch, as ``map_batches`` calls ``fn``), it
    gives that memory back and the next batch faults it in again.
    """
    out = np.empty((n, k), dtype=np.int64)
    held = None
    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)
        out[start:stop], d = batch(start, stop)
        held = d if hold else None
        del d
    del held
    return out


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


def _minor_faults() -> int:
    """The process's minor page faults so far (-1 where ``resource`` is missing)."""
    try:
        import resource
    except ImportError:  # (Windows)
        return -1
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _ratio(seconds: dict[str, list[float]], who: str) -> float:
    """The median of each round's xpkit seconds over ``who``'s."""
    pairs = zip(seconds["xpkit"], seconds[who], strict=True)
    return statistics.median(a / b for a, b in pairs)


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
        f"{'ratio':>6} {'held s':>7} {'ratio':>6}  agrees"
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
        hand = partial(by_hand, BY_HAND[backend.library](points, args.k))
        runs = {  # xpkit (the plan remembered), by hand, by hand holding blocks
            "xpkit": partial(_on_host, points, args.k, backend),
            "by hand": partial(hand, args.n, args.k, size),
            "held": partial(hand, args.n, args.k, size, hold=True),
        }
        seconds, agrees = {who: [] for who in runs}, True
        faulted = {who: [] for who in runs}
        for _ in range(max(args.repeats, 1)):  # in turn: a drift slows each
            for who, run in runs.items():
                before, start = _minor_faults(), time.perf_counter()
                got = run()
                seconds[who].append(time.perf_counter() - start)
                faulted[who].append(_minor_faults() - before)
                if who == "xpkit":
                    ours = got
                else:
                    agrees = agrees and _agree(ours, got, points)
        reference = ours if reference is None else reference
        agrees = agrees and _agree(ours, reference, points)
        xp_s, hand_s, held_s = (statistics.median(seconds[w]) for w in runs)
        print(
            f"{backend.name:<12} {first:8.2f} {xp_s:8.2f} {hand_s:10.2f} "
            f"{_ratio(seconds, 'by hand'):6.2f} {held_s:7.2f} "
            f"{_ratio(seconds, 'held'):6.2f}  {'yes' if agrees else 'NO'}"
        )
        faults.append((backend.name, [statistics.median(faulted[w]) for w in runs]))
    if faults and faults[0][1][0] >= 0:
        print("\nminor page faults per call (median): xpkit, by hand, held")
        for name, (xp_f, hand_f, held_f) in faults:
            print(f"{name:<12} {xp_f:>10,.0f} {hand_f:>10,.0f} {held_f:>10,.0f}")
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
