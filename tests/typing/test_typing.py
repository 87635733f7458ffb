"""The typing cases pass mypy --strict and pyright; a misspelt name fails both.

``cases/`` holds ``assert_type`` cases (``core.py`` needs only NumPy; each
``<library>_cases.py`` is checked where its library is installed) and
``user_lib.py``, a user's module the others call into. ``errors/`` holds
snippets whose lines marked ``# error`` each checker must report, and no
other line. The checkers run in a subprocess, with this interpreter's
packages; one that is not installed is skipped, saying so.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CASES = Path(__file__).parent / "cases"
ERRORS = Path(__file__).parent / "errors"

#: Case file -> the library it needs (None: the core dependencies).
NEEDS = {
    "core.py": None,
    "user_lib.py": None,
    "torch_cases.py": "torch",
    "jax_cases.py": "jax",
    "dask_cases.py": "dask",
    "strict_cases.py": "array_api_strict",
    "ndonnx_cases.py": "ndonnx",
}
#: CuPy ships no type information (its ndarray is a Cython class): checkers
#: see ``Backend("cupy")`` as ``Backend[Any]`` (mypy) or Unknown (pyright),
#: so it has no case file.
NO_TYPES = {"cupy"}


def _installed(module: str | None) -> bool:
    return module is None or importlib.util.find_spec(module) is not None


def case_files() -> list[Path]:
    """The cases this interpreter can check (their library is installed)."""
    return [CASES / name for name, lib in NEEDS.items() if _installed(lib)]


def _mypy(files: list[Path]) -> subprocess.CompletedProcess[str]:
    if not _installed("mypy"):
        pytest.skip("mypy is not installed (pip install -e '.[dev]')")
    env = {**os.environ, "MYPYPATH": str(CASES)}
    cmd = [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent"]
    cmd += ["--config-file", str(ROOT / "pyproject.toml"), "--no-error-summary"]
    return subprocess.run(
        [*cmd, *map(str, files)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _pyright_exe() -> str:
    here = Path(sys.executable).parent
    for name in ("basedpyright", "pyright"):
        exe = shutil.which(name, path=str(here)) or shutil.which(name)
        if exe:
            return exe
    pytest.skip(
        "neither basedpyright nor pyright is installed (pip install -e '.[dev]')"
    )


def _pyright(files: list[Path]) -> subprocess.CompletedProcess[str]:
    # Settings from [tool.pyright] in pyproject.toml (strict, extraPaths).
    cmd = [_pyright_exe(), "--pythonpath", sys.executable, *map(str, files)]
    return subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )


CHECKERS = {"mypy": _mypy, "pyright": _pyright}


def _error_lines(checker: str, output: str, path: Path) -> set[int]:
    """Lines of ``path`` the checker reported an error on."""
    name = re.escape(path.name)
    if checker == "mypy":
        pattern = rf"{name}:(\d+): error:"
    else:
        pattern = rf"{name}:(\d+):\d+ - error:"
    return {int(n) for n in re.findall(pattern, output)}


@pytest.mark.slow
@pytest.mark.parametrize("checker", sorted(CHECKERS))
def test_typing_cases_pass(checker):
    files = case_files()
    result = CHECKERS[checker](files)
    assert result.returncode == 0, (
        f"{checker} on {[f.name for f in files]}:\n{result.stdout}{result.stderr}"
    )


@pytest.mark.slow
@pytest.mark.parametrize("checker", sorted(CHECKERS))
def test_a_misspelt_backend_name_is_a_type_error(checker):
    snippet = ERRORS / "misspelt_name.py"
    expected = {
        number
        for number, line in enumerate(snippet.read_text().splitlines(), 1)
        if line.endswith("# error")
    }
    result = CHECKERS[checker]([snippet])
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert _error_lines(checker, output, snippet) == expected, output
    assert "nosuch" in output or checker == "mypy", output
    if checker == "mypy":
        assert 'No overload variant of "Backend" matches argument type' in output
    else:
        assert "Literal['nosuch']" in output
        assert 'No overloads for "__init__" match' in output


def test_backend_name_lists_the_runtime_names():
    """`BackendName` (for checkers) and `BACKEND_NAMES` (at run time) agree."""
    from typing import get_args

    import xpkit

    assert get_args(xpkit.BackendName) == xpkit.BACKEND_NAMES


def test_every_library_has_a_case_file():
    import xpkit

    libraries = {lib for lib in NEEDS.values() if lib is not None}
    assert {*libraries, *NO_TYPES, "numpy", "auto"} == set(xpkit.BACKEND_NAMES)
    assert {p.name for p in CASES.glob("*.py")} == set(NEEDS)
