"""Per-function capability statements: checked, turned into marks, tabled."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from xpkit._adapters import ADAPTERS
from xpkit.testing import capabilities, capabilities_table, facade_capabilities

from .helpers import run_xpkit

ROOT = Path(__file__).resolve().parents[1]


def _cells(table: str, function: str) -> dict[str, str]:
    """Column heading -> cell of ``function``'s row."""
    lines = table.splitlines()
    headings = [h.strip() for h in lines[0].strip("|").split("|")]
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == f"`{function}`":
            return dict(zip(headings, cells, strict=True))
    raise AssertionError(f"no row for {function}")


def test_the_published_facade_table_is_current():
    published = (ROOT / "docs" / "capabilities.md").read_text(encoding="utf-8")
    assert published == capabilities_table("xpkit"), (
        "docs/capabilities.md is stale: regenerate it with "
        "`xpkit capabilities xpkit > docs/capabilities.md`"
    )


def test_table_cells_follow_the_statement():
    @capabilities(
        requires=("linalg",),
        skip={"dask": "needs the values"},
        xfail={"torch-cuda": "a known bug"},
        cpu_only="",
        modes={"jit": "a data-dependent shape"},
    )
    def solve(a):
        return a

    table = capabilities_table({"solve": solve})
    cells = _cells(table, "solve")
    torch, jax, dask = (
        ADAPTERS["torch"].label,
        ADAPTERS["jax"].label,
        ADAPTERS["dask"].label,
    )
    assert cells[ADAPTERS["numpy"].label] == "yes"
    assert cells[dask].startswith("no [")
    assert cells[f"{torch} GPU"].startswith("fails [")
    assert cells[torch] == "yes"  # the xfail names the GPU only
    assert cells[f"{jax} jit"].startswith("eager [")
    assert cells[jax] == "yes"
    assert cells[ADAPTERS["ndonnx"].label].startswith("no [")  # it lacks linalg
    for reason in ("needs the values", "a known bug", "a data-dependent shape"):
        assert reason in table


def test_cpu_only_marks_every_gpu_column():
    @capabilities(cpu_only="uses host memory maps")
    def mapped(a):
        return a

    cells = _cells(capabilities_table({"mapped": mapped}), "mapped")
    assert cells[f"{ADAPTERS['torch'].label} GPU"].startswith("no [")
    assert cells[ADAPTERS["cupy"].label].startswith("no [")  # GPU-only library
    assert cells[ADAPTERS["torch"].label] == "yes"


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"skip": {"nosuch": "why"}}, ValueError, "skip names 'nosuch'"),
        ({"skip": {"dask": ""}}, ValueError, r"skip\['dask'\] needs a reason"),
        ({"xfail": ["dask"]}, TypeError, "xfail must map names to reasons"),
        ({"modes": {"eager": "why"}}, ValueError, "modes names 'eager'"),
        ({"requires": ("fft",)}, ValueError, "requires must be a tuple of"),
        ({"cpu_only": True}, TypeError, "cpu_only must be a reason"),
        ({"computes": "x"}, TypeError, "computes must be a bool or an int"),
    ],
)
def test_bad_statements_are_refused(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        capabilities(**kwargs)


def test_the_facade_states_only_what_it_cannot_do():
    stated = facade_capabilities()
    assert stated["svd"].requires == ("linalg",)
    assert set(stated["to_numpy"].modes) == {"jit"}
    assert stated["to_numpy"].computes == 1
    assert set(stated["flatnonzero"].modes) == {"jit"}
    plain = [n for n, s in stated.items() if s.modes or s.requires or s.skip]
    assert sorted(plain) == ["at", "flatnonzero", "svd", "to_numpy"]


def test_covers_turns_the_statement_into_marks(pytester):
    pytest.importorskip(
        "array_api_strict", reason="needs array-api-strict: pip install 'xpkit[strict]'"
    )
    pytester.makepyfile(
        test_user=textwrap.dedent(
            """
            from xpkit.testing import capabilities, covers


            @capabilities(
                skip={"numpy": "not for NumPy"},
                xfail={"array_api_strict": "fails there"},
            )
            def first(x):
                return x[0]


            @covers(first)
            def test_first(xpkit_backend):
                x = xpkit_backend.asarray([3.0, 4.0])
                if xpkit_backend.library == "array_api_strict":
                    raise AssertionError("the declared failure")
                assert float(xpkit_backend.to_numpy(first(x))) == 3.0
            """
        )
    )
    result = pytester.runpytest_subprocess(
        "-rsx", "-p", "no:cacheprovider", "--xpkit-backends=numpy,array_api_strict"
    )
    result.assert_outcomes(skipped=1, xfailed=2)  # array_api_strict and -strictest
    result.stdout.fnmatch_lines(["*not for NumPy*"])


def test_cli_prints_the_table_and_json():
    table = run_xpkit("capabilities", "xpkit", check=True).stdout
    assert table == capabilities_table("xpkit")
    rows = json.loads(run_xpkit("capabilities", "xpkit", "--json", check=True).stdout)
    assert rows["Backend.svd"]["requires"] == ["linalg"]
    missing = run_xpkit("capabilities", "nosuch_module_here")
    assert missing.returncode == 2
    assert "cannot import 'nosuch_module_here'" in missing.stdout
