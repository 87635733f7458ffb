"""`map_batches` on a dask.distributed cluster: the pool, and what xpkit info shows."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from .._log import logger
from .._memory import BYTES_PER_GB, HEADROOM, MIN_BUDGET_GB, host_available_bytes
from .._rows import run_rows
from ._base import InputsLost, Pool, travels_back

if TYPE_CHECKING:
    from .._rows import Job, Rows
    from .._typing import Array, DaskClient, JSONObject, TaskFuture
    from ._base import Finished

__all__ = [
    "DaskPool",
    "cluster_info",
    "current_client",
    "unreachable_scheduler",
    "usable_client",
    "worker_task_budget_gb",
]


#: Seconds `DaskPool` waits for a worker to ship the inputs to again.
WORKERS_BACK_S = 60.0
#: How many times `scheduler_workers` asks for a list as long as its count.
_ASKS = 5
#: Seconds between two questions to the scheduler while waiting for a worker.
POLL_S = 0.1
#: Scatters of the inputs tried while workers die under them, before giving up.
_SHIP_TRIES = 5


class _Escaped(Exception):
    """A ``SystemExit`` or ``KeyboardInterrupt`` that ``fn`` raised on a worker.

    Raised there as it is, either ends the worker's thread and kills the
    worker: xpkit read that as a death for memory and split the rows again
    and again (the user's cluster lost its workers). It travels back as
    this exception, and `DaskPool.wait` raises the original in its stead.
    """

    def __init__(self, kind: str, args: tuple[object, ...]) -> None:
        super().__init__(kind, args)
        self.kind, self.exc_args = kind, args

    def original(self) -> BaseException:
        """The exception ``fn`` raised, made again here."""
        if self.kind == "SystemExit":
            return SystemExit(*self.exc_args)
        return KeyboardInterrupt(*self.exc_args)


def _run_on_worker(
    job: Job,
    start: int,
    stop: int,
    *arrays: Array,
    pad: bool,
    travels: Callable[[BaseException], bool],
) -> Rows:
    """`run_rows` on a worker, ``fn``'s exit or interrupt sent back as `_Escaped`.

    The worker holds the rows until the client gathers them (``held``).
    """
    try:
        return run_rows(job, start, stop, *arrays, pad=pad, travels=travels, held=True)
    except (SystemExit, KeyboardInterrupt) as exc:
        raise _Escaped(type(exc).__name__, exc.args) from None


def unreachable_scheduler(address: str, timeout: float) -> str | None:
    """Why no scheduler can answer at ``address``, found within ``timeout`` s; None: one may.

    A malformed address is told at once, and a TCP or TLS address whose
    port does not accept a connection within ``timeout`` seconds: a
    ``Client`` made for either takes its own timeout to fail and then up to
    20 s more to close. At a TCP address, what answers must answer Dask's
    ``identity`` request as a scheduler (`_not_a_scheduler`).
    """
    addressing = importlib.import_module("distributed.comm.addressing")
    try:
        scheme, location = addressing.parse_address(address)
        if scheme == "inproc":
            return _no_inproc_scheduler(address, location)
        if scheme not in ("tcp", "tls"):
            return None
        host, port = addressing.parse_host_port(location)
    except ValueError as exc:
        return f"ValueError: {exc}"
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None if scheme == "tls" else _not_a_scheduler(address, timeout)


def _no_inproc_scheduler(address: str, location: str) -> str | None:
    """Why nothing listens at ``inproc://`` ``location``; None: a scheduler may.

    An in-process address is answered in its own process only (``xpkit
    info`` in another got Dask's unpacking ``ValueError`` after gathering
    everything else, and a ``Client`` that timed out as it was collected).
    """
    inproc = importlib.import_module("distributed.comm.inproc")
    try:  # (its host, this process's id and a number; ValueError otherwise)
        listening = inproc.global_manager.get_listener_for(location)
    except ValueError as exc:
        form = "inproc://<host>/<process id>/<n>, in its own process"
        return f"ValueError: {exc} (an in-process address is {form})"
    if listening is None:
        return f"nothing listens at {address} in this process"
    return None


def _not_a_scheduler(address: str, timeout: float) -> str | None:
    """Why what answers at TCP ``address`` is not a Dask scheduler; None: it is one.

    Asked for its identity, as a ``Client`` would first: another service
    (an HTTP or SSH server) gave a ``Client`` bytes it read as a frame's
    length ("Unable to allocate 2.82 EiB"), and the half-made ``Client``
    printed a traceback as it was collected. Asked in a thread of its own
    (the caller's may run an event loop), within ``timeout`` s to connect
    and as long to answer.
    """
    why: list[str] = []

    def ask() -> None:
        try:
            reply = asyncio.run(
                asyncio.wait_for(_identity(address, timeout), 2 * timeout)
            )
        except BaseException as exc:  # noqa: BLE001 - said, not raised
            if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
                why.append(f"TimeoutError: no answer within {2 * timeout:g} s")
            else:
                why.append(
                    "it does not answer as a Dask scheduler (its reply could "
                    f"not be read: {type(exc).__name__}: {exc})"
                )
            return
        kind = reply.get("type") if isinstance(reply, dict) else None
        if kind != "Scheduler":
            what = f"a Dask {kind}" if isinstance(kind, str) else f"{reply!r:.80}"
            why.append(f"it answers as {what}, not as a Dask scheduler")

    thread = threading.Thread(target=ask, name="xpkit-scheduler-identity", daemon=True)
    thread.start()
    thread.join(3 * timeout)
    if thread.is_alive():
        return f"TimeoutError: no answer within {3 * timeout:g} s"
    return why[0] if why else None


async def _identity(address: str, timeout: float) -> object:
    """The reply of the server at ``address`` to Dask's ``identity`` request."""
    comm = await importlib.import_module("distributed.comm").connect(
        address, timeout=timeout
    )
    try:
        await comm.write({"op": "identity", "reply": True})
        return await asyncio.wait_for(comm.read(), timeout)
    finally:
        comm.abort()


def worker_task_budget_gb(workers: dict[str, JSONObject], input_bytes: int) -> float:
    """Memory one task may use on the tightest worker of a cluster, in GB.

    For each worker (``Client.scheduler_info()["workers"]``): its
    ``memory_limit`` with `HEADROOM`, less what the worker process already
    holds and the inputs every worker receives, shared by its threads. A
    worker without a limit counts this host's available memory instead.
    """
    budgets = []
    for info in workers.values():
        limit = info.get("memory_limit") or host_available_bytes()
        held = info.get("metrics", {}).get("memory", 0) or 0
        free = limit * HEADROOM - held - input_bytes
        budgets.append(free / max(int(info.get("nthreads", 1)), 1))
    if not budgets:
        msg = "the dask cluster has no workers"
        raise RuntimeError(msg)
    return max(min(budgets) / BYTES_PER_GB, MIN_BUDGET_GB)


def scheduler_workers(client: DaskClient) -> dict[str, JSONObject]:
    """Every worker's entry of ``client.scheduler_info()``.

    That call fetches the scheduler's identity and returns the client's
    cached copy, which the client's own periodic update (listing no
    workers, only their count ``n_workers``) can replace in between: a
    healthy cluster read as one without workers once in CI. A copy whose
    list is shorter than its count is asked for again.
    """
    workers: dict[str, JSONObject] = {}
    for _ in range(_ASKS):
        try:
            info = client.scheduler_info(n_workers=-1)  # some list 5 by default
        except TypeError:  # versions without the argument list them all
            info = client.scheduler_info()
        workers = dict(info["workers"])
        if len(workers) >= int(info.get("n_workers", 0) or 0):
            break
    return workers


class Idle(NamedTuple):
    """Why no worker of a cluster takes a task now (`idle_workers`).

    Attributes
    ----------
    why : str
        As a message says it.
    paused : bool
        Whether workers are paused for memory (they resume as it frees),
        rather than gone or stopped.
    """

    why: str
    paused: bool = False


def idle_workers(workers: dict[str, JSONObject]) -> Idle | None:
    """Why none of ``workers`` (`scheduler_workers`) takes a task now; None if one does.

    None running: all gone ("its workers died"), paused for memory (with
    what the first holds of its ``memory_limit``), or else their statuses.
    """
    statuses = [w.get("status", "running") for w in workers.values()]
    if "running" in statuses:
        return None
    if not statuses:
        return Idle("its workers died")
    paused = [w for w in workers.values() if w.get("status") == "paused"]
    if not paused:
        return Idle(
            f"none of its workers is running ({', '.join(sorted(set(statuses)))})"
        )
    first = paused[0]
    held = (first.get("metrics", {}).get("memory", 0) or 0) / 2**20
    limit = first.get("memory_limit")
    of = f" of its {limit / 2**20:.0f} MiB memory_limit" if limit else ""
    if len(paused) < len(statuses):
        why = (
            f"{len(paused)} of its {len(statuses)} workers are paused for memory "
            f"(one holds {held:.0f} MiB{of}), the others not running"
        )
    else:
        why = (
            f"its {len(statuses)} workers are paused for memory (one holds "
            f"{held:.0f} MiB{of}): a paused worker takes no task until its "
            "memory frees"
        )
    return Idle(why, paused=True)


class DaskPool(Pool):
    """Batches as tasks of a ``dask.distributed.Client``."""

    def __init__(self, client: DaskClient) -> None:
        from distributed import wait
        from distributed.scheduler import KilledWorker

        self._client, self._killed = client, KilledWorker
        self._wait: Callable[..., object] = wait
        workers = scheduler_workers(client)
        if not workers:
            msg = (
                f"executor={client!r} has no workers (start some, or wait_for_workers)"
            )
            raise ValueError(msg)
        self.slots = max(sum(int(w.get("nthreads", 1)) for w in workers.values()), 1)
        self.where = f"the dask cluster at {client.scheduler.address}"
        self._workers = workers
        self._shipped: list[TaskFuture] = []
        self._job: tuple[Job | None, tuple[Array, ...]] = (None, ())

    def task_budget_gb(self, input_bytes: int) -> float:
        return worker_task_budget_gb(self._workers, input_bytes)

    def ship_input(self, x: Array) -> None:
        """Through Dask's serializer, as ``Client.scatter`` sends an input.

        (Its torch serializer reads a tensor through ``numpy()``, which
        refuses bfloat16, float8 and conj or neg views.)
        """
        protocol = importlib.import_module("distributed.protocol")
        protocol.deserialize(*protocol.serialize(x))

    def start(self, job: Job, arrays: tuple[Array, ...]) -> None:
        self._job = (job, arrays)
        if idle_workers(self._workers) is not None:  # (paused: the scatter would
            self._await_a_worker(None)  # wait 30 s, then say "No valid workers")
        self._ship()

    def _ship(self, rows: tuple[int, int] | None = None) -> None:
        """Scatter the job and the inputs to every worker.

        Broadcast warms every worker, but the scheduler may drop replicas
        (its active memory manager), so a killed worker can take the only
        copy with it: `submit` ships again when that happened. A scatter
        that meets a worker dying (the connection closed, no worker left,
        dask's "Can not use replicate to delete data" where the workers
        changed under it) is tried again once a worker runs, up to
        `_SHIP_TRIES` times in all; then a RuntimeError names the rows
        (``rows``: those about to run) and the last error.
        """
        job, arrays = self._job
        last: Exception | None = None
        for attempt in range(_SHIP_TRIES):
            if attempt:
                self._await_a_worker(rows)
            scattered: list[TaskFuture] = []
            try:
                scattered.append(self._client.scatter(job, broadcast=True, hash=False))
                scattered.extend(
                    self._client.scatter(list(arrays), broadcast=True, hash=False)
                )
            except (OSError, ValueError) as exc:  # (TimeoutError is an OSError)
                if isinstance(exc, ValueError) and "replicate" not in str(exc):
                    raise  # (not the workers changing under the scatter)
                last = exc
                logger().info(
                    "map_batches: shipping the inputs to %s failed (%s: %s); "
                    "trying again once a worker runs",
                    self.where,
                    type(exc).__name__,
                    exc,
                )
                if scattered:
                    self._client.cancel(scattered)
                continue
            self._shipped = scattered
            return
        which = "" if rows is None else f" for rows {rows[0]}:{rows[1]}"
        msg = (
            f"could not ship the inputs to {self.where}{which} in "
            f"{_SHIP_TRIES} tries: its workers kept dying (last: "
            f"{type(last).__name__}: {last}); see the workers' logs"
        )
        raise RuntimeError(msg) from last

    def submit(self, start: int, stop: int, *, pad: bool = True) -> TaskFuture:
        if any(f.status != "finished" for f in self._shipped):
            logger().info("map_batches: inputs lost with a worker; shipping them again")
            self._await_a_worker((start, stop))
            self._ship((start, stop))
        return self._client.submit(
            _run_on_worker,
            self._shipped[0],
            start,
            stop,
            *self._shipped[1:],
            pad=pad,
            travels=travels_back,
            pure=False,
        )

    def _await_a_worker(self, rows: tuple[int, int] | None) -> None:
        """A running worker to ship the inputs to (again), within `WORKERS_BACK_S`.

        Where every worker died (a nanny restarts them, slowly on a busy
        machine, or not at all), the scatter raised dask's "No valid workers
        found"; where every worker is paused for memory (over dask's pause
        fraction of its ``memory_limit``: it takes no task until its memory
        frees), the scatter waited 30 s first. A warning says at once that
        they are paused and that it waits for one to resume; a RuntimeError
        says what happened (`idle_workers`), naming the rows.

        (It asks the scheduler through the client, not
        ``Client.wait_for_workers``: for a client of a cluster object that
        replaces the cluster's record of its workers with a snapshot, so a
        worker the scheduler has already removed, and whose removal the
        cluster has yet to hear of, later fails the cluster's own watch with
        a KeyError raised at the caller's ``cluster.close()``.)
        """
        deadline = time.monotonic() + WORKERS_BACK_S
        told = False
        while (idle := idle_workers(scheduler_workers(self._client))) is not None:
            which = "" if rows is None else f" rows {rows[0]}:{rows[1]}"
            if not told and idle.paused:
                told = True
                logger().warning(
                    "map_batches: %s has no worker to run%s on now: %s; waiting "
                    "up to %g s for one to resume",
                    self.where,
                    which,
                    idle.why,
                    WORKERS_BACK_S,
                )
            if time.monotonic() > deadline:
                if idle.paused:
                    left, back = "", "resumed"
                    advice = (
                        "free memory on the workers or give them a larger memory_limit"
                    )
                else:
                    left, back, advice = " left", "came back", "see the workers' logs"
                msg = (
                    f"{self.where} has no worker{left} to run{which} on: {idle.why} "
                    f"and none {back} within {WORKERS_BACK_S:g} s; {advice}"
                )
                raise RuntimeError(msg)
            time.sleep(POLL_S)

    def wait(self, futures: list[TaskFuture]) -> list[Finished]:
        from concurrent.futures import CancelledError

        # Newer versions raise when one of the futures was cancelled.
        with contextlib.suppress(CancelledError):
            self._wait(futures, return_when="FIRST_COMPLETED")
        out: list[Finished] = []
        for future in futures:  # by status: a "lost" result is not done yet
            status = future.status
            if status == "finished":
                try:
                    out.append((future, future.result(), None))
                except CancelledError:  # its inputs went with a worker meanwhile
                    out.append((future, None, InputsLost("cancelled")))
            elif status == "error":
                error = future.exception()
                if isinstance(error, _Escaped):  # fn's own exit or interrupt
                    error = error.original()
                out.append((future, None, error))
            elif status == "cancelled":  # e.g. its inputs went with a worker
                out.append((future, None, InputsLost("cancelled")))
        if not out:  # woken by a result that was lost: it will be recomputed
            time.sleep(0.05)
        return out

    def lost_worker(self, exc: BaseException) -> bool:
        return isinstance(exc, self._killed)

    def close(self) -> None:
        self.abandon([])

    def abandon(self, futures: list[TaskFuture]) -> None:
        # The cluster is the user's: only xpkit's tasks and inputs leave it (a
        # task already running finishes on its worker, its result dropped).
        shipped, self._shipped = self._shipped, []
        self._job = (None, ())
        if futures or shipped:
            self._client.cancel([*futures, *shipped])


def usable_client(client: DaskClient, what: str) -> DaskClient:
    """``client``, if map_batches can block on it here."""
    if client.status != "running":
        msg = f"executor={what} is not running (status {client.status!r})"
        raise ValueError(msg)
    if client.asynchronous:
        msg = (
            f"executor={what} is an asynchronous client; map_batches needs a "
            "synchronous one (it blocks until the results are in)"
        )
        raise ValueError(msg)
    return client


def current_client() -> DaskClient:
    try:
        from distributed import get_client
    except ImportError:
        msg = "executor='dask' needs dask.distributed: pip install 'xpkit[distributed]'"
        raise ImportError(msg) from None
    from distributed import get_worker

    try:
        get_worker()
    except ValueError:  # not inside a task: good
        pass
    else:
        msg = (
            "executor='dask' inside a dask task would block its worker thread; "
            "use `with distributed.worker_client() as client:` and executor=client"
        )
        raise ValueError(msg)
    try:
        return get_client()
    except ValueError:
        msg = (
            "executor='dask' needs an active dask.distributed Client "
            "(create one with distributed.Client(...), or pass it as executor=)"
        )
        raise ValueError(msg) from None


def cluster_info(client: DaskClient) -> JSONObject:
    """The scheduler address and each worker's threads and memory limit."""
    workers = scheduler_workers(client)
    return {
        "scheduler": client.scheduler.address,
        "workers": [
            {
                "address": address,
                "nthreads": w.get("nthreads"),
                "memory_limit_bytes": w.get("memory_limit") or None,
                "memory_used_bytes": w.get("metrics", {}).get("memory"),
            }
            for address, w in sorted(workers.items())
        ],
    }
