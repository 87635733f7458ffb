"""Every code block of the README runs, exactly as printed.

Python blocks run in order in one namespace, as a reader pastes them into
one session (a later block may use what an earlier one defined); the
plugin's example runs as a test file under pytest. Shell blocks: the
quickstart's command runs; the test command must be what ``.ci/run`` runs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import run_xpkit

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```(\w+)\n(.*?)^```$", README, flags=re.DOTALL | re.MULTILINE)
PYTHON = [code for lang, code in BLOCKS if lang == "python"]
SHELL = [code.strip() for lang, code in BLOCKS if lang == "bash"]


def _is_plugin_example(code: str) -> bool:
    return bool(re.search(r"^def test_", code, flags=re.MULTILINE))


def test_the_readme_has_the_blocks_this_file_runs():
    assert len(PYTHON) >= 4
    assert sum(_is_plugin_example(c) for c in PYTHON) == 2
    assert {lang for lang, _ in BLOCKS} <= {"python", "bash"}


def test_python_blocks_run_in_order(capsys):
    namespace: dict[str, object] = {"__name__": "readme"}
    ran = 0
    for code in PYTHON:
        if _is_plugin_example(code):
            continue
        if "distributed" in code:
            pytest.importorskip("distributed")
        exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102
        ran += 1
    assert ran == len(PYTHON) - 2
    # The map_batches example printed its p-value and how the cost was measured.
    out = capsys.readouterr().out
    assert re.search(r"p = 0\.\d{4}; (measured by peak RSS|input rows \(.*\)): \d+ bytes per", out), out


@pytest.mark.parametrize(
    "code",
    [
        pytest.param(c, id=f"example{i}")
        for i, c in enumerate(filter(_is_plugin_example, PYTHON))
    ],
)
def test_the_plugin_examples_pass_as_test_files(pytester, code):
    """As printed, in a project that keeps ``filterwarnings = error``."""
    pytester.makeini("[pytest]\nfilterwarnings = error\n")
    pytester.makepyfile(test_readme_example=code)
    # A fresh process, as a user runs it (an in-process run would also drop the
    # array libraries it imports from sys.modules, and onnx cannot load twice).
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 1, result.stdout.str()
    assert "failed" not in outcomes, result.stdout.str()
    assert not {"error", "errors"} & set(outcomes), result.stdout.str()


def test_the_quickstart_command_runs():
    (quickstart,) = [c for c in SHELL if "xpkit demo" in c]
    install, _, command = quickstart.partition(" && ")
    assert install == "pip install -e ."  # what .ci/run installs, plus the extras
    argv = command.split()
    assert argv[0] == "xpkit"
    proc = run_xpkit(*argv[1:], timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "permutation p = " in proc.stdout


def test_the_test_command_is_what_ci_runs():
    (command,) = [c for c in SHELL if "pytest" in c]
    install, _, tests = command.partition(" && ")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert f"python -m {install}" in [line.replace(" --quiet", "") for line in ci]
    assert ci[-1] == tests
