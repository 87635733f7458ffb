"""The code blocks of the README and the docs pages, run as a reader runs them.

A block followed by "It prints:" and a ``text`` block must print exactly
that (`printed_as_stated`).

A reader copies a block into a file and runs it, so each Python block runs
as a saved script in a fresh process (``python example.py``, in an empty
folder): it may not use a name from an earlier block, and a block that
starts processes (a dask ``LocalCluster``) must do so under ``if __name__ ==
"__main__":``. A block that defines ``test_`` functions is a test file: it
runs under pytest, in a project that keeps ``filterwarnings = error``.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(
    r"^(?P<exec>% xpkit: exec\n)?```(?P<lang>[\w-]+)\n(?P<code>.*?)^```$"
    r"(?:\n\nIt prints:\n\n```text\n(?P<prints>.*?)\n```$)?",
    flags=re.DOTALL | re.MULTILINE,
)
#: Array libraries a block names with Backend("...") -> the module it needs.
BACKEND_MODULES = {
    "torch": "torch",
    "jax": "jax",
    "dask": "dask",
    "cupy": "cupy",
    "array_api_strict": "array_api_strict",
    "ndonnx": "ndonnx",
}


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown file."""

    path: Path
    index: int
    lang: str
    code: str
    #: Preceded by ``% xpkit: exec``: the docs build runs it too.
    executed_by_build: bool
    #: What the text says the block prints (an "It prints:" text block right
    #: after it), or None where it says nothing.
    prints: str | None = None

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.index}"

    @property
    def is_test_file(self) -> bool:
        return bool(re.search(r"^def test_", self.code, flags=re.MULTILINE))


def blocks(path: Path, lang: str = "python") -> list[Block]:
    """The ``lang`` blocks of the Markdown file ``path``, in order."""
    text = path.read_text(encoding="utf-8")
    found = [
        Block(path, i, m["lang"], m["code"], bool(m["exec"]), m["prints"])
        for i, m in enumerate(FENCE.finditer(text))
    ]
    return [b for b in found if b.lang == lang]


def missing_modules(code: str) -> list[str]:
    """Top-level modules the block imports, or backends it names, not installed here."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    for key in re.findall(r"Backend\(\"(\w+)\"", code):
        if key in BACKEND_MODULES:
            names.add(BACKEND_MODULES[key])
    return sorted(n for n in names if importlib.util.find_spec(n) is None)


def plugins_left_out(code: str) -> list[str]:
    """``-p no:...`` options for an inner pytest run of ``code``.

    zarr's pytest plugin (``zarr.testing``, for zarr's own suite) and, where
    ``code`` never names Hypothesis, Hypothesis's: importing each takes
    0.7 s of every inner run, about a minute of the default run. The inner
    run then sees what a user without them sees; xpkit's plugin reads
    neither.
    """
    left_out = ["-p", "no:zarr"]
    if "hypothesis" not in code:
        left_out += ["-p", "no:hypothesispytest"]
    return left_out


def run_block(
    block: Block, folder: Path, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Save ``block`` in ``folder`` and run it: ``python`` a script, pytest a test file."""
    if block.is_test_file:
        (folder / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
        script = folder / "test_example.py"
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        argv += ["-p", "no:xdist", str(script)]
    else:
        script = folder / "example.py"
        argv = [sys.executable, str(script)]
    script.write_text(block.code, encoding="utf-8")
    # (a script of the block may run pytest too: PYTEST_ADDOPTS reaches it)
    addopts = " ".join(
        [os.environ.get("PYTEST_ADDOPTS", ""), *plugins_left_out(block.code)]
    )
    return subprocess.run(
        argv,
        env={**os.environ, "PYTEST_ADDOPTS": addopts},
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def printed_as_stated(block: Block, stdout: str) -> str | None:
    """Where ``stdout`` differs from what the text says ``block`` prints; None: it agrees."""
    if block.prints is None or stdout.rstrip("\n") == block.prints:
        return None
    return f"the text says it prints:\n{block.prints}\nit printed:\n{stdout.rstrip()}"
