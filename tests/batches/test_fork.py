"""map_batches in a forked child (``os.fork``, multiprocessing's "fork").

The child of a process that planned before it forked measures its own
memory, and finds no measurement and no plan memory's lock held by a
thread of its parent it does not have. Each case runs in a child process
of the test (whose own child the fork makes), so that a hang is the
test's timeout and a crash its failure.
"""

from __future__ import annotations

import os
import textwrap

import pytest
from helpers import run_python

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")

#: A fn the shape-only trace cannot follow (it reads a value): the probe
#: measures it with the host's meter. About 8 kB a row.
_SETUP = """
import os, sys, threading, time
import numpy as np
import xpkit

def measured(x):
    if float(x[0, 0]) > 1e300:
        return x[:, 0]
    return np.ones((x.shape[0], 1000)).sum(axis=1)

X = np.ones((20_000, 4))
BUDGET = 4e6 / 2**30  # 4 MB: about 500 rows
"""


def _run(body: str) -> str:
    proc = run_python(
        _SETUP + textwrap.dedent(body),
        timeout=120,
        extra_env={"PYTHONFAULTHANDLER": "1"},
    )
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr[-3000:])
    return proc.stdout


def test_a_child_measures_itself_after_its_parent_exited():
    """The host meter read the parent's /proc/self/statm through the file it
    had opened: ProcessLookupError once the parent had exited."""
    out = _run(
        """
        xpkit.plan_batches(measured, X, budget_gb=BUDGET, remember=False)
        parent = os.getpid()
        if os.fork() == 0:
            while os.getppid() == parent:  # (until the parent is gone)
                time.sleep(0.01)
            plan = xpkit.plan_batches(measured, X, budget_gb=BUDGET, remember=False)
            print(plan.source.split(" (")[0], plan.batch_size, flush=True)
            os._exit(0)
        os._exit(0)
        """
    )
    source, batch = out.split()[:-1], int(out.split()[-1])
    assert " ".join(source).startswith("measured by"), out
    assert batch > 100, out  # (about 500: the child's own 8 kB a row)


def test_a_child_s_jax_meter_wraps_its_own_host_meter():
    """JAX's warmed host meter kept the parent's, and its open statm file."""
    pytest.importorskip("jax")
    out = _run(
        """
        from xpkit._adapters import _jax_memory, _peak
        parents = _jax_memory.warmed_host_meter()
        pid = os.fork()
        if pid == 0:
            mine = _jax_memory.warmed_host_meter()
            print(mine is not parents, _peak.host_meter() is not None, flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        """
    )
    assert out.split() == ["True", "True"], out


def test_a_child_forked_while_a_thread_measured_measures_at_once():
    """The parent's lock stayed held in the child, by a thread it has not:
    every measured probe waited 30 s, then planned from the input rows."""
    out = _run(
        """
        started, done = threading.Event(), threading.Event()

        def waits(x):
            if float(x[0, 0]) > 1e300:
                return x[:, 0]
            started.set()
            done.wait(60)
            return x[:, 0] * 2.0

        worker = threading.Thread(
            target=xpkit.plan_batches, args=(waits, X), kwargs={"remember": False}
        )
        worker.start()
        started.wait(60)  # (the thread measures: it holds the meter)
        pid = os.fork()
        if pid == 0:
            plan = xpkit.plan_batches(measured, X, budget_gb=BUDGET, remember=False)
            print(plan.source, flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        done.set()
        worker.join()
        """
    )
    assert out.startswith("measured by"), out  # (not "input rows (another ...")


def test_a_child_forked_while_the_plan_memory_was_locked_plans():
    """The plan memory's lock, held at the fork, was held for good in the child."""
    out = _run(
        """
        xpkit.map_batches(lambda x: x * 2.0, X[:100])
        xpkit.plan_memory._lock.acquire()  # (as a thread of the parent might hold it)
        pid = os.fork()
        if pid == 0:
            got = xpkit.map_batches(lambda x: x + 1.0, X[:100])
            print(float(got.sum()), len(xpkit.plan_memory.entries()), flush=True)
            os._exit(0)
        xpkit.plan_memory._lock.release()
        os.waitpid(pid, 0)
        """
    )
    total, entries = out.split()
    assert float(total) == 800.0
    assert int(entries) >= 1
