"""``examples/nearest_neighbours.py``: exact neighbours on every backend, and the script runs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import load_script, run_python

import xpkit

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "nearest_neighbours.py"


def _load_example():
    return load_script(EXAMPLE, "xpkit_example_neighbours")


def _reference(points: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Brute force in float64: every distance, itself left out, a stable sort."""
    d = ((points[:, None, :] - points[None, :, :]) ** 2).sum(axis=-1)
    np.fill_diagonal(d, np.inf)
    return np.argsort(d, axis=1, kind="stable")[:, :k], np.sort(d, axis=1)[:, :k]


def test_the_neighbours_are_exact_on_every_backend(xpkit_backend):
    b = xpkit_backend
    points = np.random.default_rng(1).standard_normal((150, 6))
    k = 4
    got = b.to_numpy(_load_example().nearest(points, k, b))
    indices, distances = _reference(points, k)
    assert got.shape == (150, k)
    assert (got != np.arange(150)[:, None]).all()  # never itself
    rows = np.arange(150)[:, None]
    theirs = ((points[rows] - points[got]) ** 2).sum(axis=-1)
    tol = 1e-9 if "float64" in b.dtypes else 1e-4  # (narrowed to float32)
    np.testing.assert_allclose(theirs, distances, rtol=tol, atol=tol)
    if "float64" in b.dtypes:
        assert (got == indices).mean() > 0.99  # ties of distance aside


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_the_example_s_cost_is_traced(library):
    """fn calls ``b.matmul``, ``b.at`` and ``b.top_k``: the shape-only trace
    follows them (#28: it gave up at the first facade call), and its figure
    is the peak of the real batch as tracemalloc sees it, on NumPy."""
    if library == "torch":
        pytest.importorskip("torch")
    b = xpkit.Backend(library)
    points = np.random.default_rng(2).standard_normal((3000, 16))
    fn, on_device = _load_example().neighbours_of_rows(points, 5, b)
    plan = xpkit.plan_batches(fn, on_device, backend=b)
    assert plan.source == "traced by shape-only arrays"
    if library == "numpy":
        rows = plan.batch_size
        done = run_python(_TRUE_PEAK.format(example=str(EXAMPLE), rows=rows))
        assert done.returncode == 0, done.stderr[-2000:]
        true_peak = int(done.stdout.split()[-1])
        assert 0.9 <= plan.batch_peak_bytes / true_peak <= 1.15


_TRUE_PEAK = """
import importlib.util, tracemalloc
import numpy as np
import xpkit
from xpkit._current_rows import ROWS
spec = importlib.util.spec_from_file_location("example", {example!r})
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)
points = np.random.default_rng(2).standard_normal((3000, 16))
fn, on_device = example.neighbours_of_rows(points, 5, xpkit.Backend("numpy"))
rows = on_device[:{rows}]
ROWS.set((range({rows}), None))
tracemalloc.start()
fn(rows)
print(tracemalloc.get_traced_memory()[1])
"""


def test_the_script_runs_and_agrees():
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--n", "600", "--d", "8", "--k", "3"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("numpy ")]
    assert rows, proc.stdout
    assert rows[0].endswith("yes"), proc.stdout
    assert " NO" not in proc.stdout, proc.stdout
    if importlib.util.find_spec("sklearn") is not None:
        assert "indices agree with xpkit's: yes" in proc.stdout


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_by_hand_agrees_with_or_without_its_temporaries(library):
    if library == "torch":
        pytest.importorskip("torch")
    example = _load_example()
    points = np.random.default_rng(4).standard_normal((90, 5))
    indices, _ = _reference(points, 3)
    for drop in (False, True):
        got = example.BY_HAND[library](points, 3, 16, drop=drop)
        assert (got == indices).mean() > 0.99  # ties of distance aside


def test_without_resource_the_script_prints_no_fault_table(monkeypatch, capsys):
    """Off Unix (no ``resource``) there are no page faults to print, not zeros."""
    example = _load_example()
    assert example._minor_faults() is not None
    monkeypatch.setitem(sys.modules, "resource", None)  # (import raises)
    assert example._minor_faults() is None
    example.main(["--n", "200", "--d", "4", "--k", "2", "--backends", "numpy"])
    out = capsys.readouterr().out
    assert "numpy " in out
    assert "page faults" not in out
