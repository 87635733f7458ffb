"""One session per concern: tests, conformance, fuzz, lint, docs, bench.

Extras come from pyproject.toml. ``XPKIT_TORCH_SPEC`` (default: torch from
the extras) lets a machine pin the torch build it installs first, e.g.
``XPKIT_TORCH_SPEC=torch==2.13.0`` for a CPU wheel already on disk. Without
it, the sessions that install torch say so, since PyPI's default torch for
Linux is a CUDA build of several GB (docs/development.md, the README).
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

PYPROJECT = nox.project.load_toml("pyproject.toml")
EXTRAS = PYPROJECT["project"]["optional-dependencies"]

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["lint", "minimal", "tests", "conformance"]


def _install(session: nox.Session, extras: str) -> None:
    torch_spec = os.environ.get("XPKIT_TORCH_SPEC")
    if torch_spec:
        session.install(torch_spec)
    elif any(x in extras for x in ("all", "torch")):
        session.log(
            "XPKIT_TORCH_SPEC is not set: torch comes from the extras (on Linux, "
            "a CUDA build); set it to pin a build, e.g. XPKIT_TORCH_SPEC="
            '"torch==2.13.0" (docs/development.md)'
        )
    session.install("-e", f".[{extras}]")


@nox.session
def tests(session: nox.Session) -> None:
    """The unit tests on every backend installed by the ``all`` extra, then the slow ones."""
    _install(session, "all")
    session.run("python", "-m", "pytest", *session.posargs)
    if not session.posargs:
        session.run("python", "-m", "pytest", "-m", "slow")


@nox.session
def minimal(session: nox.Session) -> None:
    """mypy --strict and the tests with only the core dependencies and test tools."""
    session.install("-e", ".[test-core]", "mypy>=1.13")
    session.run("mypy", "--strict", "src")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session
def conformance(session: nox.Session) -> None:
    """The facade on array-api-strict at its strictest flags."""
    _install(session, "test")
    session.run("python", "-m", "pytest", "conformance", *session.posargs)


@nox.session
def fuzz(session: nox.Session) -> None:
    """Property tests with thousands of examples each (XPKIT_FUZZ_EXAMPLES, default 2000).

    Hypothesis' statistics (``--hypothesis-show-statistics``) print how many
    examples each property passed. Narrow the backends with posargs, e.g.
    ``nox -s fuzz -- --xpkit-backends=numpy,torch``.
    """
    _install(session, "all")
    session.run(
        "python",
        "-m",
        "pytest",
        "tests/property",
        "--hypothesis-show-statistics",
        "-q",
        *session.posargs,
        env={"HYPOTHESIS_PROFILE": "fuzz"},
    )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint and format) and mypy --strict on src/."""
    _install(session, "dev,test,progress")  # mypy needs the typed test tools too
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy", "--strict", "src")


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site in docs/_build/html, warnings as errors, nitpicky.

    Every backend of the ``all`` extra is installed, so the examples run at
    build time show them all. ``nox -s docs -- --fast`` skips running the
    example scripts (``DOCS_FAST=1``); other posargs go to sphinx-build.
    """
    _install(session, "all,docs")
    fast = "--fast" in session.posargs
    args = [a for a in session.posargs if a != "--fast"]
    session.run(
        "python", "-m", "sphinx", "-W", "--keep-going", "-n", "-E",
        "-b", "html", "docs", "docs/_build/html", *args,
        env={"DOCS_FAST": "1" if fast else "0"},
    )  # fmt: skip
    session.log(f"open {Path('docs/_build/html/index.html').resolve().as_uri()}")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks, side by side in one process each; tables and a plot in benchmarks/results/.

    The peers compared against (POT, scikit-learn) and matplotlib come from
    the ``bench`` extra.
    """
    _install(session, "all,bench")
    session.run("python", "benchmarks/bench_dispatch.py", "--write")
    session.run("python", "benchmarks/bench_batches.py", "--write")
    session.run(
        "python",
        "benchmarks/bench_cluster.py",
        "--out",
        "benchmarks/results/cluster.md",
    )
    session.run(
        "python", "benchmarks/bench_oom.py", "--out", "benchmarks/results/oom.md"
    )
    session.run("python", "benchmarks/bench_top_k.py")
    # (writes an output of 1.5x the machine's memory to a temporary directory:
    # --dir DIR for another disk)
    session.run("python", "benchmarks/bench_out_of_core.py", "--write")


#: uv's --python-platform, and pip's --platform tags (pip does not widen
#: them to older ones) of the platforms `all` must install on; no tags: the
#: wheels are not downloaded (Linux: torch's CUDA packages are gigabytes).
PLATFORMS: dict[str, tuple[str, list[str]]] = {
    "macos-arm64": (
        "aarch64-apple-darwin",
        [f"macosx_{v}_0_arm64" for v in range(11, 15)],
    ),
    "windows-x86_64": ("x86_64-pc-windows-msvc", ["win_amd64"]),
    "linux-x86_64": ("x86_64-manylinux_2_28", []),
}


@nox.session
def platforms(session: nox.Session) -> None:
    """The ``all`` extra resolves to wheels on every platform the README names.

    ``pip install --dry-run --platform`` evaluates environment markers for
    this machine, not the target (torch's Linux-only CUDA packages then make
    a macOS resolution fail), so uv resolves for each platform with binaries
    only, and pip downloads every pinned wheel for macOS and Windows (no
    dependencies, no constraints file). A Linux resolution must not contain
    CuPy. Needs network access.
    """
    session.install("uv")
    python = "3.11"
    for name, (triple, wheel_tags) in PLATFORMS.items():
        pins = f"{session.create_tmp()}/{name}.txt"
        session.run(
            "uv", "pip", "compile", "--no-config", "--quiet", "--only-binary",
            ":all:", "--python-version", python, "--python-platform", triple,
            "--extra", "all", "--no-header", "--no-annotate", "pyproject.toml",
            "-o", pins,
        )  # fmt: skip
        lines = Path(pins).read_text(encoding="utf-8").splitlines()
        names = [line.split("==")[0].lower() for line in lines if "==" in line]
        if any(n.startswith("cupy") for n in names):
            session.error(f"the all extra pulls CuPy on {name}")
        if wheel_tags:
            session.run(
                "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                *(f"--platform={tag}" for tag in wheel_tags),
                "--python-version", python,
                "-d", f"{session.create_tmp()}/{name}", "-r", pins,
                env={"PIP_CONSTRAINT": os.devnull},
            )  # fmt: skip
        session.log(f"{name}: {len(names)} packages resolved to wheels")
