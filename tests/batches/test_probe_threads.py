"""map_batches' cost, traced and measured, in many threads and asyncio tasks at once.

Half the workers map a ``fn`` the shape-only trace follows (issue #28: each
trace is a call's own, nothing shared), half one that reads a value, which
the probe measures under the host's meter (it reads process-wide statistics,
one measurement at a time, and switches nothing on or off that another
thread may be using: it started and stopped tracemalloc once, which crashed
CPython 3.11 in this test, issue #19). A crash kills the interpreter, so the
test runs in a child process: a crash fails the test with the child's output
(and its faulthandler traceback) instead of ending the test run.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

#: fn, its input and the budgets of the workers, shared by the child scripts.
_SETUP = """
import sys
import numpy as np
import xpkit
from xpkit._adapters import _peak

WORKERS, CALLS, ROWS, REMEMBER = (int(arg) for arg in sys.argv[1:])
REMEMBER = bool(REMEMBER)  # off: every call probes; on: threads share the memory
X = np.random.default_rng(0).standard_normal((ROWS, 16))


def traced(a):
    return np.tanh(a) * 3 + a.sum(1, keepdims=True)


def reads(a):  # a value read: the trace cannot follow it, the probe measures
    return traced(a) if float(a[0, 0]) < 1e300 else a


EXPECTED = traced(X)
BUDGETS = [0.05 + 0.01 * i for i in range(WORKERS)]
FNS = [traced if i % 2 else reads for i in range(WORKERS)]
MEASURED = "measured by sampled RSS" if _peak.host_meter() else "input rows"
SOURCES = {traced: ("traced by shape-only arrays",),
           reads: (MEASURED, "input rows (another peak")}
failures = []


def check(i, got, plan):
    if not np.array_equal(got, EXPECTED):
        failures.append(f"worker {i}: a result differs from fn(X)")
    allowed = SOURCES[FNS[i]]
    if REMEMBER:
        allowed += tuple("remembered: " + a for a in allowed)
    if not plan.source.startswith(allowed):
        failures.append(f"worker {i}: planned by {plan.source!r}")
"""

_THREADS = (
    _SETUP
    + """
import threading

start = threading.Barrier(WORKERS)


def work(i):
    try:
        start.wait()
        for _ in range(CALLS):
            with xpkit.memory_budget(BUDGETS[i]):  # each thread its own budget
                got = xpkit.map_batches(FNS[i], X, remember=REMEMBER)
                plan = xpkit.plan_batches(FNS[i], X, remember=REMEMBER)
            check(i, got, plan)
    except BaseException as exc:
        failures.append(f"worker {i}: {exc!r}")


threads = [threading.Thread(target=work, args=(i,)) for i in range(WORKERS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(failures[:10] if failures else "ok")
"""
)

_TASKS = (
    _SETUP
    + """
import asyncio


async def direct(i):
    for _ in range(CALLS):
        with xpkit.memory_budget(BUDGETS[i]):
            got = xpkit.map_batches(FNS[i], X, remember=REMEMBER)
            plan = xpkit.plan_batches(FNS[i], X, remember=REMEMBER)
        check(i, got, plan)
        await asyncio.sleep(0)


async def in_a_thread(i):
    for _ in range(CALLS):
        with xpkit.memory_budget(BUDGETS[i]):  # the thread runs in a copy of it
            got = await asyncio.to_thread(
                xpkit.map_batches, FNS[i], X, remember=REMEMBER
            )
            plan = await asyncio.to_thread(
                xpkit.plan_batches, FNS[i], X, remember=REMEMBER
            )
        check(i, got, plan)


async def main():
    tasks = [(direct if i % 2 else in_a_thread)(i) for i in range(WORKERS)]
    for outcome in await asyncio.gather(*tasks, return_exceptions=True):
        if isinstance(outcome, BaseException):
            failures.append(repr(outcome))


asyncio.run(main())
print(failures[:10] if failures else "ok")
"""
)


def _run_child(
    script: str, workers: int, calls: int, rows: int = 10_000, *, remember: bool = False
) -> str:
    """Run ``script`` in a fresh interpreter; its output; fail on a crash.

    ``remember=False``: every call traces or probes (the stress on the meters).
    """
    argv = [sys.executable, "-X", "faulthandler", "-c", script]
    done = subprocess.run(
        [*argv, str(workers), str(calls), str(rows), str(int(remember))],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = f"exit status {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert done.returncode == 0, output
    assert done.stdout.strip() == "ok", output
    return output


@pytest.mark.parametrize(
    ("calls", "rows"),
    [
        (30, 10_000),  # issue #19's reproducer
        (10, 100_000),  # longer NumPy loops: the old meter crashed 7 runs in 8
    ],
)
def test_map_batches_in_eight_threads_at_once(calls, rows):
    """8 threads call map_batches, each in its own budget."""
    _run_child(_THREADS, 8, calls, rows)


def test_map_batches_in_asyncio_tasks_and_their_threads_at_once():
    _run_child(_TASKS, 8, 10)


def test_threads_sharing_the_plan_memory_get_exact_results():
    """With the plan memory on, 8 threads recall and learn the same signature."""
    _run_child(_THREADS, 8, 30, remember=True)


def test_the_thread_script_fails_when_a_result_is_wrong():
    broken = _THREADS.replace("EXPECTED = traced(X)", "EXPECTED = traced(X) + 1.0")
    with pytest.raises(AssertionError, match="a result differs from fn"):
        _run_child(broken, 2, 1)


@pytest.mark.slow
def test_map_batches_in_eight_threads_twenty_runs_in_a_row():
    for run in range(20):
        try:
            _run_child(_THREADS, 8, 30)
        except AssertionError as exc:
            msg = f"run {run + 1} of 20 failed:\n{exc}"
            raise AssertionError(msg) from None
