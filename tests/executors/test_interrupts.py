"""Ctrl-C during `map_batches`, on every executor, ends cleanly.

Each test runs a long ``map_batches`` in a child process
(`pool_jobs.interrupted_run`, whose batches sleep), interrupts it once a batch
has begun (or while joblib's workers start, or again and again), and checks
that the child raised ``KeyboardInterrupt`` promptly, that no worker process
it started outlives the run (or is left unreaped), that the child exits
within seconds, and on a dask cluster that xpkit's tasks and scattered
inputs are gone while the cluster (the user's) still computes.

A Ctrl-C arrives two ways: ``SIGINT`` to the process alone (``kill -INT``),
or, from a terminal, to the whole foreground process group, so that the
worker processes are interrupted too. A hang is a failing test with the
child's output (and its threads' stacks, from faulthandler), never a hung run.
The last tests hold a Ctrl-C in this process (`interrupts_held`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from xpkit._executors._interrupts import interrupts_held

pytestmark = pytest.mark.skipif(
    sys.platform == "win32", reason="POSIX signals and process groups"
)

TESTS = Path(__file__).resolve().parents[1]  # tests/, where pool_jobs is
#: The child, with Python's own Ctrl-C handler whatever the suite inherited: a
#: suite started in the background by a shell without job control (``cmd &``
#: in a script, CI) inherits SIGINT ignored, and so would the child, which
#: then never meets a Ctrl-C (every test here failed so).
CHILD = (
    "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "import sys; sys.path.insert(0, sys.argv[1]); import pool_jobs; "
    "pool_jobs.interrupted_run(*sys.argv[2:])"
)
#: Seconds from the Ctrl-C to map_batches raising KeyboardInterrupt in the
#: child; while workers start, the one starting (which cannot be stopped half
#: way) first gets its job: a Python start-up and xpkit's import, slow on a
#: busy machine.
RAISE_S, STARTING_RAISE_S = 3.0, 8.0
#: Seconds from the Ctrl-C to the child's exit (a LocalCluster takes longer to close).
EXIT_S, STARTING_EXIT_S, CLUSTER_EXIT_S = 6.0, 10.0, 20.0
#: Seconds a batch sleeps.
BATCH_S, CLUSTER_BATCH_S = 30.0, 2.0
#: How a Ctrl-C arrives: to the child alone, or to its process group (a terminal's).
WAYS = ["process", "group"]


def _is_tracker(command: str) -> bool:
    """Whether a child is a resource tracker (loky's or multiprocessing's): one
    per interpreter, kept between runs and ended at exit; not a worker."""
    return "resource_tracker" in command


def _own_lines(err: str) -> list[str]:
    """The child's stderr less what a resource tracker wrote there.

    A tracker is a process of its own that shares the child's stderr and may
    warn after the child's traceback, at its own exit: after a Ctrl-C to the
    process group, loky's warns of a semaphore whose unlinking it was not told
    of (``UserWarning: resource_tracker: ...``, then the ``warnings.warn(``
    source line)."""
    lines = err.strip().splitlines()
    own: list[str] = []
    skip_source = False
    for line in lines:
        if "resource_tracker" in line and "Warning:" in line:
            skip_source = True
            continue
        if skip_source and line.startswith("  ") and "warnings.warn(" in line:
            skip_source = False
            continue
        skip_source = False
        if line.strip():
            own.append(line)
    return own


class Child:
    """A child process running `pool_jobs.interrupted_run`, in its own session."""

    def __init__(self, tmp_path: Path, kind: str, cluster_survives: bool = True):
        # A batch outlasts any wait here: only a run that stops its workers
        # rather than waiting for their batches ends in time. (On a cluster,
        # the batch running when cancelled holds its worker thread to its end.)
        seconds = CLUSTER_BATCH_S if kind == "dask" else BATCH_S
        self.markers = tmp_path / "markers"
        self.markers.mkdir()
        self._out = (tmp_path / "stdout").open("w+")
        self._err = (tmp_path / "stderr").open("w+")
        env = {**os.environ, "LOKY_MAX_CPU_COUNT": "2", "PYTHONFAULTHANDLER": "1"}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-X",
                "faulthandler",
                "-c",
                CHILD,
                str(TESTS),
                kind,
                str(self.markers),
                str(seconds),
                "yes" if cluster_survives else "no",
            ],
            stdout=self._out,
            stderr=self._err,
            start_new_session=True,  # its own process group, as a terminal's job
            env=env,
        )
        self.sent_at = 0.0

    def output(self) -> str:
        self._out.flush()
        self._err.flush()
        out = Path(self._out.name).read_text()
        err = Path(self._err.name).read_text()
        return f"--- stdout\n{out}\n--- stderr\n{err[-8000:]}"

    def _check_running(self, what: str) -> None:
        if self.proc.poll() is not None:
            pytest.fail(
                f"the child exited ({self.proc.returncode}) before {what}\n"
                f"{self.output()}"
            )

    def batch_pids(self) -> set[int]:
        """The processes that began a batch so far."""
        return {int(p.name.split("-")[0]) for p in self.markers.iterdir()}

    def wait_for_a_batch(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while not any(self.markers.iterdir()):
            self._check_running("a batch began")
            if time.monotonic() > deadline:
                pytest.fail(f"no batch began within {timeout} s\n{self.output()}")
            time.sleep(0.01)

    def wait_for_a_worker_process(self, timeout: float = 90) -> set[int]:
        """Return as soon as the child has started a joblib worker: their pids."""
        deadline = time.monotonic() + timeout
        child = psutil.Process(self.proc.pid)
        while True:
            self._check_running("it started a worker process")
            workers = set()
            for p in child.children(recursive=True):
                with contextlib.suppress(psutil.NoSuchProcess):
                    command = " ".join(p.cmdline())  # (the parent's until exec)
                    if "loky" in command and not _is_tracker(command):
                        workers.add(p.pid)
            if workers:
                return workers
            if time.monotonic() > deadline:
                pytest.fail(f"no worker started within {timeout} s\n{self.output()}")
            time.sleep(0.002)

    def ctrl_c_at(self) -> float | None:
        """When the Ctrl-C made to come in a future's lock came ("joblib-lock")."""
        self._out.flush()
        for line in Path(self._out.name).read_text().splitlines():
            if line.startswith("CTRL-C "):
                if not self.sent_at:
                    self.sent_at = float(line.split()[1])
                return float(line.split()[1])
        return None

    def interrupt(self, way: str, times: int = 1, every: float = 0.025) -> None:
        """Ctrl-C, ``times`` times: to the child alone, or to its process group."""
        self.sent_at = time.time()
        for i in range(times):
            if i:
                time.sleep(every)
            if way == "group":
                os.killpg(self.proc.pid, signal.SIGINT)
            else:
                os.kill(self.proc.pid, signal.SIGINT)

    def finish(self, limit: float, raised: float = RAISE_S) -> tuple[float, dict]:
        """Wait for the child's exit: the seconds it took after the Ctrl-C, and
        its report. A child that does not exit within ``limit`` fails the test,
        with its threads' stacks (SIGABRT, for faulthandler), as does one that
        took more than ``raised`` seconds to raise KeyboardInterrupt."""
        try:
            self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGABRT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            self.kill()
            pytest.fail(
                f"the child did not exit within {limit} s of the Ctrl-C\n"
                f"{self.output()}"
            )
        took = time.time() - self.sent_at
        lines = Path(self._out.name).read_text().splitlines()
        reports = [
            line.split(" ", 1)[1] for line in lines if line.startswith("REPORT ")
        ]
        if not reports:
            pytest.fail(f"map_batches never raised KeyboardInterrupt\n{self.output()}")
        report = json.loads(reports[0])
        err = _own_lines(Path(self._err.name).read_text())
        assert err[-1:] == ["KeyboardInterrupt"], self.output()
        assert self.proc.returncode == -signal.SIGINT, self.output()
        caught = report["caught_at"] - self.sent_at
        assert caught < raised, (
            f"KeyboardInterrupt after {caught:.1f} s\n{self.output()}"
        )
        return took, report

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        self._out.close()
        self._err.close()


@pytest.fixture
def start(tmp_path):
    children: list[Child] = []

    def start(kind: str, cluster_survives: bool = True) -> Child:
        children.append(Child(tmp_path, kind, cluster_survives))
        return children[-1]

    yield start
    for child in children:
        child.close()


def _workers_left(report: dict) -> list:
    """The child's descendants when map_batches had raised, trackers aside."""
    return [c for c in report["children"] if not _is_tracker(c[2])]


def _still_there(pids: set[int], within: float = 2.0) -> list[tuple[int, str]]:
    """Those of ``pids`` that still exist after ``within`` seconds (zombies too:
    a worker must be reaped by the process that started it)."""
    deadline = time.monotonic() + within
    while True:
        left = []
        for pid in pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                left.append((pid, psutil.Process(pid).status()))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def test_ctrl_c_stops_the_local_loop(start):
    child = start("none")
    child.wait_for_a_batch()
    assert child.batch_pids() == {child.proc.pid}  # the batches run here
    child.interrupt("process")
    took, report = child.finish(EXIT_S)
    assert _workers_left(report) == []
    assert took < EXIT_S


@pytest.mark.parametrize("way", WAYS)
def test_ctrl_c_stops_joblib_and_its_workers(start, way):
    child = start("joblib")
    child.wait_for_a_batch()
    child.interrupt(way)
    took, report = child.finish(EXIT_S)
    # When map_batches raised, its workers were gone and reaped ...
    assert _workers_left(report) == []
    # ... and none outlived the child.
    workers = child.batch_pids() - {child.proc.pid}
    assert workers
    assert _still_there(workers) == []
    assert took < EXIT_S


@pytest.mark.parametrize("way", WAYS)
def test_ctrl_c_while_joblib_starts_its_workers(start, way):
    child = start("joblib")
    started = child.wait_for_a_worker_process()
    child.interrupt(way)  # while the other worker starts, or this one gets its job
    took, report = child.finish(STARTING_EXIT_S, STARTING_RAISE_S)
    assert _workers_left(report) == []
    assert _still_there(started | child.batch_pids()) == []
    assert took < STARTING_EXIT_S


@pytest.mark.parametrize("when", ["starting", "running"])
def test_repeated_ctrl_c_during_joblib(start, when):
    """Ctrl-C pressed again and again while map_batches stops its workers."""
    child = start("joblib")
    if when == "starting":
        started = child.wait_for_a_worker_process()
    else:
        child.wait_for_a_batch()
        started = set()
    child.interrupt("group", times=4)
    took, report = child.finish(STARTING_EXIT_S, STARTING_RAISE_S)
    assert _workers_left(report) == []
    assert _still_there(started | child.batch_pids()) == []
    assert took < STARTING_EXIT_S


def test_ctrl_c_while_the_caller_holds_a_futures_lock(start):
    """A Ctrl-C that lands just after the caller's thread took a task future's
    lock (chance, made certain here: `pool_jobs._ctrl_c_in_a_future_lock`)
    ends the run as any other: the lock is not left taken, where loky's
    thread would wait for it at the process's exit, for ever."""
    child = start("joblib-lock")
    # The caller's thread takes a future's lock in its first submit once the
    # workers have started (the submit that starts them runs in a thread of
    # its own). A Ctrl-C sent on the first batch instead landed, under load,
    # while that start still ran (a worker began a batch before the second
    # had started): no future to take, and no Ctrl-C in a lock.
    deadline = time.monotonic() + 90
    while not child.ctrl_c_at():
        if child.proc.poll() is not None and not child.ctrl_c_at():
            child._check_running("a Ctrl-C")
        if time.monotonic() > deadline:
            pytest.fail(f"no Ctrl-C in a lock within 90 s\n{child.output()}")
        time.sleep(0.01)
    took, report = child.finish(STARTING_EXIT_S, STARTING_RAISE_S)
    assert child.ctrl_c_at(), child.output()  # the Ctrl-C came in a lock
    assert _workers_left(report) == []
    assert _still_there(child.batch_pids() - {child.proc.pid}) == []
    assert took < STARTING_EXIT_S


@pytest.mark.cluster
@pytest.mark.parametrize("way", WAYS)
def test_ctrl_c_on_a_dask_cluster(start, way):
    """xpkit's tasks and inputs leave the cluster, which stays the user's.

    A terminal's Ctrl-C also reaches the worker processes of a LocalCluster
    started from it (same process group), which dask's nannies restart:
    whether that cluster computes again is dask's business, not checked.
    """
    pytest.importorskip("distributed")
    child = start("dask", cluster_survives=way == "process")
    child.wait_for_a_batch()
    child.interrupt(way)
    took, report = child.finish(CLUSTER_EXIT_S)
    assert report["scheduler_tasks"] == 0  # cancelled, inputs released
    if way == "process":
        assert report["cluster_computes"]
    assert took < CLUSTER_EXIT_S


# -- holding a Ctrl-C, in this process ------------------------------------------
@pytest.fixture(autouse=True)
def _python_ctrl_c():
    """Python's own Ctrl-C handler for the test (a suite started without job
    control inherits SIGINT ignored), the inherited one back after it."""
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, inherited)


def _ctrl_c() -> None:
    signal.raise_signal(signal.SIGINT)
    time.sleep(0.01)  # the handler runs between bytecodes, here


def test_a_held_ctrl_c_takes_effect_when_the_step_ends():
    steps = []

    def step():
        with interrupts_held():
            _ctrl_c()
            steps.append("finished")  # not cut short
            _ctrl_c()  # pressed again: still held, and raised once
            steps.append("still finished")

    with pytest.raises(KeyboardInterrupt):
        step()
    assert steps == ["finished", "still finished"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_held_ctrl_c_can_be_dropped():
    with interrupts_held(then_raise=False):
        _ctrl_c()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_again_after_the_patience_acts_at_once():
    steps = []

    def step():
        with interrupts_held(patience=0.0):
            _ctrl_c()
            steps.append("held")
            try:
                _ctrl_c()  # the step looks stuck: this one acts now
                steps.append("not reached")
            finally:
                _ctrl_c()  # later ones are ignored: the finally completes
                steps.append("cleaned up")

    with pytest.raises(KeyboardInterrupt):
        step()
    assert steps == ["held", "cleaned up"]


def test_outside_the_main_thread_nothing_is_held():
    import threading

    seen = []

    def step():
        with interrupts_held():
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=step)
    thread.start()
    thread.join()
    assert seen == [signal.default_int_handler]


def test_own_lines_drop_a_trackers_warning_and_keep_the_childs():
    err = (
        "Traceback (most recent call last):\n"
        '  File "<string>", line 1, in <module>\n'
        "KeyboardInterrupt\n"
        "/v/loky/backend/resource_tracker.py:444: UserWarning: resource_tracker: "
        "There appear to be 1 leaked semlock objects\n"
        "  warnings.warn(\n"
        "/v/loky/backend/resource_tracker.py:468: UserWarning: resource_tracker: "
        "/loky-1: FileNotFoundError(2, 'No such file or directory')\n"
        "  warnings.warn('resource_tracker: %s: %r' % (name, e))\n"
    )
    assert _own_lines(err)[-1] == "KeyboardInterrupt"
    # ... and what the child itself printed after its traceback still counts.
    assert _own_lines(err + "RuntimeError: later\n")[-1] == "RuntimeError: later"
    assert _own_lines("") == []
