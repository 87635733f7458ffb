"""The ``xpkit`` command: info (and --json), check, demo."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from helpers import run_python, run_xpkit

import xpkit
from xpkit._cli import main
from xpkit._demo import run_demo


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_info_json_parses_back():
    proc = run_xpkit("info", "--json", check=True)
    info = json.loads(proc.stdout)
    assert info["xpkit"] == xpkit.__version__
    assert info["libraries"]["numpy"] == np.__version__
    by_name = {b["name"]: b for b in info["backends"]}
    numpy_row = by_name["numpy"]
    assert numpy_row["available"] is True
    assert numpy_row["device"] == "cpu"
    assert numpy_row["float64"] is True
    assert 0 < numpy_row["budget_capped_gb"] <= info["batch_ceiling_gb"]
    assert numpy_row["budget_capped_gb"] <= numpy_row["budget_gb"]
    assert info["host"]["available_gb"] <= info["host"]["total_gb"]
    for row in info["backends"]:
        assert row["available"] or row["reason"]


def test_info_text_lists_libraries_and_budgets():
    code, text = run("info")
    assert code == 0
    assert "Array libraries" in text
    assert f"numpy              {np.__version__}" in text
    assert "budget GB" in text


def test_check_passes_here():
    code, text = run("check")
    assert code == 0, text
    assert "all checks passed on numpy" in text
    assert "numpy                matmul             ok" in text


def test_to_gpu_says_what_it_checked_or_why_it_skipped():
    code, text = run("check", "--json")
    assert code == 0, text
    rows = [row for row in json.loads(text)["checks"] if row["check"] == "to_gpu"]
    assert rows
    for row in rows:
        if row["ok"] is None:  # a CPU device: skipped, and why
            assert row["detail"].startswith("no GPU: "), row
            assert "to_gpu leaves arrays as they are" in row["detail"]
        else:  # a GPU backend: where the array went
            assert row["ok"] is True, row
            assert "a NumPy array moved to " in row["detail"], row
    numpy_row = next(row for row in rows if row["backend"] == "numpy")
    assert numpy_row["ok"] is None
    code, text = run("check", "--backends", "numpy")
    assert "to_gpu             skipped: no GPU: numpy runs on cpu" in text


@pytest.mark.parametrize("command", ["check", "demo"])
def test_a_command_that_ran_no_backend_fails_and_says_why(monkeypatch, command):
    """A backend asked for that is not installed here: nothing ran, exit 1."""
    from xpkit._adapters import ADAPTERS

    # dask stands for a library missing here (CuPy, on a machine without it).
    monkeypatch.setattr(type(ADAPTERS["dask"]), "is_installed", lambda self: False)
    argv = [command, "--backends", "dask"]
    if command == "demo":
        argv += ["--permutations", "20", "--samples", "10", "--features", "2"]
    code, text = run(*argv)
    assert code == 1, text
    last = text.strip().splitlines()[-1]
    assert last.startswith(f"nothing to {command}: none of the backends asked for"), (
        last
    )
    assert "dask: " in last
    assert "xpkit[dask]" in last
    assert "NumPy alone ran" not in text  # (nothing ran: it said NumPy did)
    code, text = run(*argv, "--json")
    assert code == 1
    assert json.loads(text)["error"].startswith(f"nothing to {command}")


def test_check_of_an_uninstalled_backend_exits_non_zero():
    """The command as a user types it, in a fresh process, where CuPy is missing."""
    from xpkit._adapters import ADAPTERS

    if ADAPTERS["cupy"].is_installed():
        pytest.skip("CuPy is installed here")
    proc = run_xpkit("check", "--backends", "cupy")
    assert proc.returncode == 1, proc.stdout
    assert "nothing to check" in proc.stdout
    assert "all checks passed" not in proc.stdout


def test_check_fails_where_an_installed_library_fails_to_load(tmp_path):
    """A broken torch was 'skipped' and the run said 'all checks passed', rc 0."""
    pytest.importorskip("torch")
    (tmp_path / "torch.py").write_text(
        'raise OSError("libcudart.so.12: cannot open")\n'
    )
    proc = _xpkit(
        "check", "--backends", "numpy,torch", env={"PYTHONPATH": str(tmp_path)}
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "PyTorch is installed, but loading it failed: OSError" in proc.stdout
    assert "1 check(s) failed" in proc.stdout


def test_info_exits_non_zero_when_the_scheduler_is_unreachable():
    pytest.importorskip("distributed")
    proc = run_xpkit("info", "--scheduler", "tcp://127.0.0.1:1", timeout=120)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout == ""
    assert proc.stderr.startswith(
        "xpkit info: the scheduler tcp://127.0.0.1:1 is not reachable: "
        "ConnectionRefusedError"
    ), proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("nonsense", "ValueError: missing port number in address 'nonsense'"),
        ("tcp://[::1", "ValueError: invalid address '[::1'"),
        ("tcp://127.0.0.1:1", "ConnectionRefusedError"),
        # (gathered everything, Dask's own ValueError last, then a traceback)
        ("inproc://x", "ValueError: not enough values to unpack"),
    ],
)
def test_info_tells_a_bad_scheduler_address_without_making_a_client(
    address, why, monkeypatch, capsys
):
    """A Client made for it took 24 s and left a traceback from ``Client.__del__``."""
    distributed = pytest.importorskip("distributed")

    def no_client(*args, **kwargs):
        raise AssertionError("a Client was made for a scheduler that cannot answer")

    monkeypatch.setattr(distributed, "Client", no_client)
    out = io.StringIO()
    assert main(["info", "--scheduler", address], out=out) == 1
    assert out.getvalue() == ""
    err = capsys.readouterr().err
    assert err.startswith(
        f"xpkit info: the scheduler {address} is not reachable: {why}"
    )


def test_an_in_process_address_is_reachable_where_its_scheduler_listens(capsys):
    """In another process, or once its scheduler is gone, nothing listens."""
    distributed = pytest.importorskip("distributed")
    from xpkit._info import scheduler_problem

    with distributed.LocalCluster(
        n_workers=0, processes=False, dashboard_address=":0"
    ) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("inproc://")
        assert scheduler_problem(address) is None
    out = io.StringIO()
    assert main(["info", "--scheduler", address], out=out) == 1
    assert out.getvalue() == ""
    assert capsys.readouterr().err.startswith(
        f"xpkit info: the scheduler {address} is not reachable: "
        f"nothing listens at {address} in this process"
    )


def test_info_gives_up_on_a_scheduler_that_never_answers(monkeypatch, capsys):
    """A port that accepts and never speaks held ``xpkit info`` forever
    (distributed's handshake is not bounded by the Client's timeout)."""
    pytest.importorskip("distributed")
    import socket

    from xpkit import _info

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held: list[object] = []
    accepting = threading.Thread(
        target=lambda: held.extend(server.accept() for _ in range(8)), daemon=True
    )
    accepting.start()
    monkeypatch.setattr(_info, "CONNECT_S", 1.0)
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    try:
        assert main(["info", "--scheduler", address], out=io.StringIO()) == 1
    finally:
        server.close()
    err = capsys.readouterr().err
    assert err == (
        f"xpkit info: the scheduler {address} is not reachable: "
        "TimeoutError: no answer within 2 s\n"
    )


def test_info_tells_a_port_that_speaks_another_protocol():
    """An SSH-like banner was read as a frame's length: "MemoryError: Unable
    to allocate 2.82 EiB", then the half-made Client's traceback."""
    pytest.importorskip("distributed")
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def speak() -> None:
        for _ in range(8):
            try:
                conn, _ = server.accept()
                with conn:
                    conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n" + b"\xff" * 64)
            except OSError:  # (closed at the end of the test)
                return

    threading.Thread(target=speak, daemon=True).start()
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    try:
        proc = run_xpkit("info", "--scheduler", address, timeout=120)
    finally:
        server.close()
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith(
        f"xpkit info: the scheduler {address} is not reachable: it does not "
        "answer as a Dask scheduler (its reply could not be read: "
    ), proc.stderr
    assert "Traceback" not in proc.stderr


def test_info_without_distributed_says_what_to_install(monkeypatch, capsys):
    import builtins

    real_import = builtins.__import__

    def without_distributed(name, *args, **kwargs):
        if name == "distributed" or name.startswith("distributed."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_distributed)
    for name in [
        m for m in sys.modules if m == "distributed" or m.startswith("distributed.")
    ]:
        monkeypatch.delitem(sys.modules, name)
    assert main(["info", "--scheduler", "tcp://127.0.0.1:1"], out=io.StringIO()) == 1
    assert "pip install 'xpkit[distributed]'" in capsys.readouterr().err


def test_check_fails_on_a_mismatch(monkeypatch):
    real_sort = xpkit.Backend.sort

    def broken_sort(self, array, axis=-1):
        return real_sort(self, array, axis=axis) + 1.0

    monkeypatch.setattr(xpkit.Backend, "sort", broken_sort)
    code, text = run("check")
    assert code == 1
    assert "numpy                sort               FAIL  max |diff| 1" in text
    assert "check(s) failed" in text


def test_demo_runs_on_every_backend():
    code, text = run(
        "demo", "--permutations", "300", "--samples", "40", "--features", "12", "--json"
    )
    assert code == 0
    result = json.loads(text)
    rows = {row["backend"]: row for row in result["backends"]}
    assert rows["numpy"]["dtype"] == "float64"
    assert rows["numpy"]["max_deviation_from_numpy"] == 0.0
    for row in rows.values():
        if "skipped" not in row:  # every backend installed here agrees with NumPy
            assert row["max_deviation_from_numpy"] < 1e-5
    assert 1 / 301 <= result["p"] <= 1.0


def test_check_and_demo_narrow_to_the_backends_named():
    code, text = run("check", "--backends", "numpy", "--json")
    assert code == 0
    checks = json.loads(text)["checks"]
    assert {row["backend"] for row in checks} == {"numpy"}
    assert len(checks) > 10
    assert json.loads(text)["failures"] == 0
    code, text = run(
        "demo",
        "--backends",
        "numpy",
        "--permutations",
        "50",
        "--samples",
        "20",
        "--features",
        "3",
        "--json",
    )
    assert code == 0
    assert [row["backend"] for row in json.loads(text)["backends"]] == ["numpy"]


def test_auto_runs_the_backend_auto_picks():
    """'auto' is a backend name, which --backends refused ('names no backend')."""
    code, text = run("check", "--backends", "auto", "--json")
    assert code == 0
    assert json.loads(text)["backends_run"] == [xpkit.Backend("auto").name]


def test_repeated_backends_options_add_up():
    """``--backends numpy --backends array_api_strict`` runs both, not the last."""
    pytest.importorskip("array_api_strict")
    code, text = run(
        "check", "--backends", "numpy", "--backends", "array_api_strict", "--json"
    )
    assert code == 0
    assert {row["backend"] for row in json.loads(text)["checks"]} == {
        "numpy",
        "array_api_strict",
    }
    code, text = run(
        "info", "--json", "--backends", "array_api_strict", "--backends", "numpy"
    )
    assert code == 0
    names = {b["name"] for b in json.loads(text)["backends"]}
    assert names == {"numpy", "array_api_strict"}


def test_demo_batches_follow_the_budget():
    code, text = run(
        "demo",
        "--permutations",
        "400",
        "--samples",
        "50",
        "--features",
        "10",
        "--budget-gb",
        "0.0002",
    )
    assert code == 0
    numpy_row = next(
        line.split() for line in text.splitlines() if line.startswith("numpy")
    )
    assert int(numpy_row[3]) > 1


@pytest.mark.parametrize("argv", [["demo", "--permutations", "0"], ["frobnicate"], []])
def test_bad_arguments_exit_2(argv):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2


@pytest.mark.parametrize("samples", ["1", "0", "-3", "two"])
def test_the_demo_refuses_a_sample_count_it_cannot_compute_with(samples, capsys):
    """One sample standardises to 0 / 0: it printed ``observed max |r| = nan`` and exit 0."""
    with pytest.raises(SystemExit) as info:
        main(["demo", "--samples", samples])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert (
        f"--samples: must be an integer of at least 2 (a correlation needs two samples), got '{samples}'"
        in err
    )


def test_run_demo_refuses_one_sample_and_runs_two():
    with pytest.raises(ValueError, match=r"^n_samples must be at least 2, got 1$"):
        run_demo(io.StringIO(), n_perm=5, n_samples=1, n_features=3, budget_gb=None)
    out = io.StringIO()
    code = run_demo(
        out, n_perm=5, n_samples=2, n_features=3, budget_gb=None, only=["numpy"]
    )
    assert code == 0
    assert "nan" not in out.getvalue()


@pytest.mark.parametrize("blank", ["", "   "])
def test_info_refuses_a_blank_scheduler_address_as_a_usage_error(blank, capsys):
    """It was read as an address: "not reachable: missing port number", exit 1."""
    with pytest.raises(SystemExit) as info:
        main(["info", "--scheduler", blank])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"--scheduler: must be a scheduler's address, got {blank!r}" in err


@pytest.mark.parametrize("bad", ["-1", "nan", "inf", "abc"])
def test_cli_rejects_bad_budget(bad):
    with pytest.raises(SystemExit) as info:
        main(["demo", "--budget-gb", bad])
    assert info.value.code == 2


def test_module_entry_point_version():
    proc = run_xpkit("--version", check=True)
    assert proc.stdout.strip() == f"xpkit {xpkit.__version__}"


def test_console_script_runs_info():
    """The ``xpkit`` executable the install put next to this Python."""
    from pathlib import Path

    script = Path(sys.executable).parent / "xpkit"
    if not script.exists():
        pytest.skip(f"no console script at {script} (not an installed environment)")
    proc = subprocess.run(
        [str(script), "info", "--json"], capture_output=True, text=True, check=True
    )
    assert json.loads(proc.stdout)["xpkit"] == xpkit.__version__


def test_demo_p_value_is_never_printed_as_zero(monkeypatch):
    """With no permutation reaching the observed statistic, p = 1 / (1 + n)."""
    from xpkit import _demo

    def null_of_zeros(backend, X, y, perms, **kwargs):
        return np.zeros(perms.shape[0]), 1

    monkeypatch.setattr(_demo, "max_correlation_null", null_of_zeros)
    monkeypatch.setenv("XPKIT_BACKENDS", "numpy")
    code, text = run(
        "demo", "--permutations", "20000", "--samples", "40", "--features", "3"
    )
    assert code == 0
    printed = text.rsplit("permutation p = ", 1)[1].split()[0]
    assert float(printed) == pytest.approx(1 / 20001, rel=1e-3)


def test_check_skips_what_a_library_lacks(monkeypatch):
    from xpkit._adapters import ADAPTERS

    numpy_adapter = type(ADAPTERS["numpy"])
    monkeypatch.setattr(
        numpy_adapter, "capabilities", frozenset({"data_dependent_shapes"})
    )
    code, text = run("check", "--backends", "numpy", "--json")
    assert code == 0  # a skipped check is no failure
    rows = {row["check"]: row for row in json.loads(text)["checks"]}
    for name in ("svd (values)", "svd (U s Vt)"):
        assert rows[name]["ok"] is None
        assert rows[name]["detail"] == "numpy has no linalg"
    assert rows["flatnonzero"]["ok"] is True
    code, text = run("check", "--backends", "numpy")
    assert "svd (values)       skipped: numpy has no linalg" in text


_ONLY_NUMPY = """
import io, sys
from xpkit._cli import main
libraries = ("torch", "jax", "dask", "array_api_strict", "ndonnx", "cupy")
for argv in (["check", "--backends", "numpy"], ["demo", "--backends", "numpy"]):
    status = main(argv, io.StringIO())
    print(argv[0], status, sorted(m for m in libraries if m in sys.modules))
"""


_INFO_ALONE = """
import io, json, sys
from xpkit._adapters._registry import ADAPTERS
from xpkit._cli import main
out = io.StringIO()
status = main(["info", "--json"], out)
libraries = [a.key for a in ADAPTERS.values() if a.key != "numpy"]
print(json.dumps({
    "status": status,
    "imported": sorted(m for m in libraries if m in sys.modules),
    "installed": [a.key for a in ADAPTERS.values() if a.key != "numpy" and a.is_installed()],
    "info": json.loads(out.getvalue()),
}))
"""


def test_info_describes_numpy_alone_and_imports_no_other_library():
    """`xpkit info` reads each library's version without importing it (#31:
    importing every library took 3.8 s); the rest it names as not described."""
    done = run_python(_INFO_ALONE)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    assert got["status"] == 0
    assert got["imported"] == []
    info = got["info"]
    assert [b["name"] for b in info["backends"]] == ["numpy"]
    assert info["not_described"] == got["installed"]
    for key in got["installed"]:
        assert info["libraries"][key]  # a version, read without importing it


def test_info_backends_describes_those_named_or_all():
    code, text = run("info", "--json", "--backends", "numpy")
    assert code == 0
    assert [b["name"] for b in json.loads(text)["backends"]] == ["numpy"]
    code, text = run("info", "--json", "--backends", "all")
    assert code == 0
    info = json.loads(text)
    assert info["not_described"] == []
    listed = {b["library"] for b in info["backends"]}
    assert listed == set(info["libraries"])  # each library: a row or its reason
    code, text = run("info", "--backends", "numpy")
    left = [k for k, v in info["libraries"].items() if v and k != "numpy"]
    if left:
        assert f"(not described: {', '.join(left)}; `xpkit info --backends all`" in text
        assert "no GPU found by the libraries described" in text
    else:
        assert "not described" not in text


def test_check_and_demo_on_numpy_import_no_other_library():
    """`--backends numpy` imports numpy's adapter alone (#31: it imported all)."""
    done = run_python(_ONLY_NUMPY)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["check 0 []", "demo 0 []"]


_UNKNOWN_NAME = """
import io, sys
from contextlib import redirect_stderr
from xpkit._cli import main
libraries = ("torch", "jax", "dask", "array_api_strict", "ndonnx", "cupy")
err = io.StringIO()
with redirect_stderr(err):
    try:
        main(["check", "--backends", "bogus"], io.StringIO())
    except SystemExit as stop:
        print(stop.code)
print(sorted(m for m in libraries if m in sys.modules))
print(err.getvalue().splitlines()[-1])
"""


def test_an_unknown_backend_name_is_refused_without_importing_the_libraries():
    """The refusal listed every device of every library, importing each to
    find them (seconds, for a typo)."""
    done = run_python(_UNKNOWN_NAME)
    assert done.returncode == 0, done.stderr[-2000:]
    code, imported, message = done.stdout.splitlines()
    assert (code, imported) == ("2", "[]")
    assert "names no backend known here: ['bogus']; known: " in message
    for key in ("numpy", "torch", "jax", "dask", "array_api_strict"):
        assert key in message
    assert "key-device" in message


def test_the_demo_says_what_its_data_and_columns_are():
    """Issue #31: the planted signal, p's floor, and what the deviation column
    compares when NumPy alone ran."""
    out = io.StringIO()
    assert main(["demo", "--backends", "numpy"], out) == 0
    text = out.getvalue()
    assert "a planted signal: y depends on the first feature" in text
    assert "NumPy alone ran, so it is 0 by construction" in text
    p = float(text.split("permutation p = ")[1].split()[0])
    assert p == pytest.approx(1 / 5001, rel=1e-3)  # every permutation below it
    assert "(the smallest p it can give: 1 / (1 + permutations))" in text


def test_info_gives_the_batch_columns_unit():
    out = io.StringIO()
    main(["info"], out)
    assert " budget GB batch GB " in out.getvalue()


def test_a_budget_past_2_63_bytes_is_refused_as_the_option(capsys):
    """It was refused while running, as 'budget_gb must be at most ...'."""
    with pytest.raises(SystemExit) as info:
        main(["demo", "--budget-gb", "1e30"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--budget-gb: must be at most 8589934592 GB (2**63 bytes), got '1e30'" in err
    assert "usage: xpkit demo" in err


@pytest.mark.parametrize(
    ("argv", "need"),
    [
        (["--samples", "100000000000", "--features", "100000"], 8.4e16),
        (["--permutations", "3000000000", "--samples", "2"], 4.8e10),
        (["--permutations", "10", "--samples", "1000", "--features", "1000"], 8.08e6),
    ],
)
def test_a_demo_larger_than_memory_is_refused_before_it_allocates(
    monkeypatch, capsys, argv, need
):
    """It raised MemoryError from NumPy, as a traceback (or was killed).

    ``need``: X's float64 items and the permutations' int64 ones, the least
    the data holds (500 features and 5000 permutations by default).
    """
    import xpkit._demo as demo

    def refused(*_args):
        raise AssertionError("demo_data ran")

    monkeypatch.setattr(demo, "demo_data", refused)
    monkeypatch.setattr(demo, "host_available_bytes", lambda: int(need / 2))
    code = main(["demo", "--backends", "numpy", *argv], out=io.StringIO())
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("xpkit demo: the demo's data (--permutations ")
    assert "more than the" in err
    monkeypatch.setattr(demo, "host_available_bytes", lambda: int(need * 10))
    with pytest.raises(AssertionError, match="demo_data ran"):
        main(["demo", "--backends", "numpy", *argv], out=io.StringIO())


def test_memory_the_machine_cannot_give_is_a_message_not_a_traceback(
    monkeypatch, capsys
):
    import xpkit._demo as demo

    def no_memory(*_args):
        raise MemoryError("Unable to allocate 44.7 GiB")

    monkeypatch.setattr(demo, "demo_data", no_memory)
    code = main(["demo", "--backends", "numpy"], out=io.StringIO())
    assert code == 1
    err = capsys.readouterr().err
    assert err == "xpkit demo: out of memory: Unable to allocate 44.7 GiB\n"

    def bare(*_args):
        raise MemoryError

    monkeypatch.setattr(demo, "demo_data", bare)
    assert main(["demo", "--backends", "numpy"], out=io.StringIO()) == 1
    assert capsys.readouterr().err == "xpkit demo: out of memory: MemoryError\n"


def _xpkit(*argv: str, env: dict[str, str] | None = None, stdout=subprocess.PIPE):
    """``python -m xpkit *argv``: its stdout to ``stdout``, its stderr kept."""
    return subprocess.run(
        [sys.executable, "-m", "xpkit", *argv],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("argv", "env", "said"),
    [
        (
            ("demo", "--backends", "numpy"),
            {"XPKIT_MEMORY_BUDGET_GB": "abc"},
            "xpkit demo: XPKIT_MEMORY_BUDGET_GB must be a finite positive number",
        ),
        (
            ("demo", "--backends", "numpy", "--budget-gb", "1e-12"),
            None,
            "xpkit demo: one item requires",
        ),
        # (check passed, and info exited 0, the error inside its table)
        (
            ("check", "--backends", "numpy"),
            {"XPKIT_MEMORY_BUDGET_GB": "-1"},
            "xpkit check: XPKIT_MEMORY_BUDGET_GB must be a finite positive number",
        ),
        (
            ("info",),
            {"XPKIT_MEMORY_BUDGET_GB": "nan"},
            "xpkit info: XPKIT_MEMORY_BUDGET_GB must be a finite positive number",
        ),
    ],
)
def test_a_setting_met_while_running_is_a_message_not_a_traceback(argv, env, said):
    proc = _xpkit(*argv, env=env)
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_output_that_cannot_be_written_is_said(tmp_path):
    """A full disk was a traceback (OSError: No space left on device)."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    with Path("/dev/full").open("w") as full:
        proc = _xpkit("check", "--backends", "numpy", stdout=full)
    assert proc.returncode == 1
    assert (
        "xpkit check: cannot write the output: No space left on device" in proc.stderr
    )
    assert "Traceback" not in proc.stderr


def test_a_reader_that_leaves_ends_the_command_quietly():
    """`xpkit check | head -1` was a BrokenPipeError traceback."""
    read, write = os.pipe()
    os.close(read)  # (the reader is gone before the first write: no timing)
    try:
        proc = _xpkit("check", "--backends", "numpy", stdout=write)
    finally:
        os.close(write)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "BrokenPipeError" not in proc.stderr
