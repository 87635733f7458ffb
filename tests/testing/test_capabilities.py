"""Per-function capability statements: checked, turned into marks, tabled."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from helpers import run_xpkit
from plugin_runs import outcomes

from xpkit._adapters import ADAPTERS
from xpkit.testing import (
    capabilities,
    capabilities_table,
    covers,
    facade_capabilities,
)

ROOT = Path(__file__).resolve().parents[2]


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
    # array_api_strict is an id: that variant alone (not -strictest, -device1...)
    result.assert_outcomes(skipped=1, xfailed=1)
    result.stdout.fnmatch_lines(["*not for NumPy*"])


def test_cli_prints_the_table_and_json():
    table = run_xpkit("capabilities", "xpkit", check=True).stdout
    assert table == capabilities_table("xpkit")
    rows = json.loads(run_xpkit("capabilities", "xpkit", "--json", check=True).stdout)
    assert rows["Backend.svd"]["requires"] == ["linalg"]
    missing = run_xpkit("capabilities", "nosuch_module_here")
    assert missing.returncode == 2
    assert missing.stdout == ""
    assert missing.stderr.startswith(
        "xpkit capabilities: cannot import 'nosuch_module_here'"
    )


def test_console_script_finds_a_module_in_the_working_directory(tmp_path):
    """``xpkit capabilities mylib`` as ``python -m xpkit`` finds it: from the cwd."""
    script = Path(sys.executable).parent / "xpkit"
    if not script.exists():
        pytest.skip(f"no console script at {script} (not an installed environment)")
    (tmp_path / "mylib_here.py").write_text(
        "from xpkit.testing import capabilities\n\n"
        "@capabilities(requires=('linalg',))\n"
        "def solve(a):\n    return a\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [str(script), "capabilities", "mylib_here", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["solve"]["requires"] == ["linalg"]


def test_lazy_xp_function_takes_the_functions_own_statement():
    """``lazy_xp_function(f)`` follows f's @capabilities, as @covers does (#21)."""
    from xpkit.testing import lazy_xp_function
    from xpkit.testing._lazy import tagged

    @capabilities(modes={"jit": "a Python if on a value"}, computes=2, host_copies=1)
    def branchy(x):
        return x

    @capabilities(modes={"compile": "a graph break"})
    def overridden(x):
        return x

    module = types.ModuleType("user_tests")
    module.branchy = branchy
    module.overridden = overridden
    lazy_xp_function(branchy)
    lazy_xp_function(overridden, compiled=True, host_copies=0)
    tags = dict(tagged(module))
    assert tags[branchy].jit is False
    assert tags[branchy].compiled is True
    assert tags[branchy].computes == 2
    assert tags[branchy].host_copies == 1
    # what the call says wins over the statement
    assert tags[overridden].compiled is True
    assert tags[overridden].host_copies == 0


@pytest.mark.parametrize(
    ("value", "exc"),
    [(-1, ValueError), (True, TypeError), ("1", TypeError), (1.0, TypeError)],
)
def test_bad_host_copies_are_refused(value, exc):
    from xpkit.testing import lazy_xp_function

    with pytest.raises(
        exc, match=f"host_copies must be a non-negative int or None, got {value!r}"
    ):
        capabilities(host_copies=value)
    with pytest.raises(exc, match="host_copies must be a non-negative int"):
        lazy_xp_function(len, host_copies=value)


DOCUMENTED = """Scale the rows.

    Parameters
    ----------
    x : array
        The rows.

    Returns
    -------
    array

    Examples
    --------
    >>> 1 + 1
    2
    """


def test_the_statement_goes_into_the_docstring_on_request():
    def scale(x):
        return x

    scale.__doc__ = DOCUMENTED
    plain = capabilities(skip={"dask": "needs the values"})(scale)
    assert plain.__doc__ == DOCUMENTED  # only when asked

    def scale2(x):
        return x

    scale2.__doc__ = DOCUMENTED
    documented = capabilities(
        skip={"dask": "needs the values"},
        modes={"jit": "a shape from values"},
        in_docstring=True,
    )(scale2)
    lines = documented.__doc__.splitlines()
    notes, examples = lines.index("Notes"), lines.index("Examples")
    assert lines[notes + 1] == "-----"
    assert notes < examples  # numpydoc's order: Notes before Examples
    table = lines[notes:examples]
    assert "Array API support (stated with ``xpkit.testing.capabilities``):" in table
    rows = {
        ln.split("  ", 1)[0]: ln.split("  ", 1)[1].strip()
        for ln in table
        if ln and not ln.startswith(("=", "Array", "Notes", "-----", "backend"))
    }
    assert rows[ADAPTERS["numpy"].label] == "yes"
    assert rows[ADAPTERS["dask"].label] == "no: needs the values"
    assert rows[f"{ADAPTERS['jax'].label} jit"] == "eager: a shape from values"
    assert ">>> 1 + 1" in lines  # the rest is kept


def test_the_statement_joins_an_existing_notes_section():
    def f(x):
        """Do it.

        Notes
        -----
        Already noted.

        References
        ----------
        .. [1] A paper.
        """
        return x

    doc = capabilities(cpu_only="host memory maps", in_docstring=True)(f).__doc__
    lines = doc.splitlines()
    assert lines.count("Notes") == 1
    assert (
        lines.index("Already noted.")
        < lines.index("Array API support (stated with ``xpkit.testing.capabilities``):")
        < lines.index("References")
    )
    assert any(ln.endswith("no: host memory maps") for ln in lines)
    with pytest.raises(TypeError, match="in_docstring must be a bool, got 'yes'"):
        capabilities(in_docstring="yes")


def test_uncovered_statements_name_the_function_no_test_covers():
    from xpkit.testing import uncovered_statements

    module = types.ModuleType("two_functions")

    @capabilities()
    def first(x):
        return x

    @capabilities()
    def second(x):
        return x

    module.first, module.second = first, second
    module.__all__ = ["first", "second"]
    sys.modules["two_functions"] = module
    try:
        assert uncovered_statements("two_functions", [first]) == ["second"]
        assert uncovered_statements("two_functions", [first, second]) == []
    finally:
        del sys.modules["two_functions"]
    with pytest.raises(TypeError, match="module_name must be a module name"):
        uncovered_statements(module, [])


def test_a_variant_id_with_a_mode_marks_that_mode_s_column_alone():
    """The table said 'JAX jit: yes' where the tests skipped jax-cpu-jit, and
    'JAX GPU: no' (the mode read as a GPU device) where nothing was said."""

    @capabilities(skip={"jax-cpu-jit": "tracing fails", "dask-lazy": "graph too big"})
    def double(a):
        return a

    cells = _cells(capabilities_table({"double": double}), "double")
    jax, dask = ADAPTERS["jax"].label, ADAPTERS["dask"].label
    assert cells[f"{jax} jit"].startswith("no [")
    assert cells[f"{dask} lazy"].startswith("no [")
    assert cells[jax] == cells[f"{jax} GPU"] == cells[dask] == "yes"

    @capabilities(skip={"jax-cpu": "no CPU kernel"})
    def solve(a):
        return a

    cells = _cells(capabilities_table({"solve": solve}), "solve")
    assert cells[jax].startswith("no [")
    assert cells[f"{jax} jit"].startswith("no [")  # (jax-cpu-* is skipped too)
    assert cells[f"{jax} GPU"] == "yes"


@pytest.mark.parametrize(
    "name",
    [
        "torch-cdua",
        "numpy-gpu",
        "numpy-cpu-jit",
        "torch-cpu-compiled",
        "jax-cpu-jitt",  # (was taken: JAX's any platform but cpu is a GPU)
        "jax-cuda",  # (JAX's variant is jax-gpu: no test was skipped)
        "torch-cuda:1",  # (a variant runs on the first device of a kind)
        "jax*",
    ],
)
def test_a_statement_names_devices_its_library_can_have(name):
    with pytest.raises(ValueError, match=f"skip names '{re.escape(name)}'"):
        capabilities(skip={name: "why"})
    with pytest.raises(ValueError, match=f"xfail names '{re.escape(name)}'"):
        capabilities(xfail={name: "why"})


@pytest.mark.parametrize(
    "name",
    [
        "torch-cuda",
        "torch-mps",
        "torch-meta",
        "torch-cpu-compile",
        "jax-gpu",
        "jax-cpu-jit",
        "dask-lazy",
        "numpy-readonly",
        "array_api_strict-device1",
        "array_api_strict-strictest",
        "array_api_strict-no_float64",
        "cupy",
        "jax-tpu-jit",
        "torch-xpu-compile",
    ],
)
def test_every_variant_id_is_a_name_a_statement_takes(name):
    capabilities(skip={name: "why"})


def _module_of_methods(name):
    module = types.ModuleType(name)

    class Scaler:
        @capabilities(skip={"dask": "why"})
        @classmethod
        def from_config(cls):
            return cls

        @capabilities(skip={"dask": "why"})
        @staticmethod
        def check(x):
            return x

        @classmethod
        @capabilities(skip={"dask": "why"})
        def below(cls):
            return cls

    module.Scaler = Scaler
    module.__all__ = ["Scaler"]
    return module


def test_classmethods_and_staticmethods_are_stated_and_covered(monkeypatch):
    """A statement above @classmethod was lost; a covered classmethod was
    reported uncovered (each access makes a new bound method)."""
    from xpkit.testing import statements_of, uncovered_statements

    module = _module_of_methods("methods_stated")
    monkeypatch.setitem(sys.modules, "methods_stated", module)
    assert set(statements_of("methods_stated")) == {
        "Scaler.from_config",
        "Scaler.check",
        "Scaler.below",
    }
    scaler = module.Scaler
    assert uncovered_statements("methods_stated", [scaler.from_config]) == [
        "Scaler.below",
        "Scaler.check",
    ]
    covered = [scaler.from_config, scaler.check, scaler.below]
    assert uncovered_statements("methods_stated", covered) == []


def test_a_module_whose_import_raises_is_an_import_error(tmp_path, monkeypatch):
    """It raised the module's own ZeroDivisionError (a traceback from the CLI)."""
    from xpkit.testing import statements_of

    (tmp_path / "raises_on_import.py").write_text("1 / 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match="raised ZeroDivisionError"):
        statements_of("raises_on_import")
    for bad in ("", ".relative"):
        with pytest.raises(ValueError, match="module_name must be an absolute"):
            statements_of(bad)


@pytest.mark.parametrize("thing", [len, 3, "abc", property(lambda self: 1)])
def test_what_cannot_be_marked_is_a_type_error(thing):
    """It was an AttributeError ('int' object has no attribute ...)."""
    with pytest.raises(TypeError, match="capabilities decorates a function"):
        capabilities()(thing)


def test_a_table_of_something_else_is_a_type_error():
    with pytest.raises(TypeError, match="functions must be a module name"):
        capabilities_table(types.ModuleType("m"))


def test_a_lazy_mode_stated_runs_the_lazy_variant_eagerly(pytester):
    """covers() dropped modes={"lazy": ...}: dask-lazy failed on the compute."""
    if not ADAPTERS["dask"].is_installed():  # (not imported here: pytester's
        pytest.skip("needs Dask")  # snapshot would drop its modules after)
    pytester.makepyfile(
        lib_total="""
import numpy as np
from xpkit.testing import capabilities

@capabilities(modes={"lazy": "reads values on the host"})
def total(x):
    return float(np.asarray(x).sum())
""",
        test_total="""
from xpkit.testing import covers
from lib_total import total

@covers(total)
def test_total(xpkit_backend):
    assert total(xpkit_backend.asarray([1.0, 2.0])) == 3.0
""",
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--xpkit-backends=dask-lazy"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    result.assert_outcomes(passed=1)


def test_a_function_stated_twice_keeps_one_table():
    """Both tables stayed, the stale one first."""

    @capabilities(skip={"dask": "one"}, in_docstring=True)
    @capabilities(skip={"jax": "two"}, in_docstring=True)
    def f(x):
        """Do it.

        Parameters
        ----------
        x : int
        """
        return x

    doc = f.__doc__
    assert doc.count("Array API support") == 1
    assert "one" in doc
    assert "two" not in doc
    assert doc.startswith("Do it.\n\nParameters\n----------\nx : int\n\nNotes\n-----\n")


def test_the_rest_of_the_docstring_is_left_as_written():
    """Every run of blank lines in it was collapsed to one."""

    @capabilities(skip={"dask": "why"}, in_docstring=True)
    def f(x):
        """Do it.

        Examples
        --------
        ::

            a


            b
        """
        return x

    assert "    a\n\n\n    b" in f.__doc__
    assert f.__doc__.index("Notes") < f.__doc__.index("Examples")


@pytest.mark.parametrize(
    "kwargs",
    [{"skip": {"dask": "line one\nline two"}}, {"cpu_only": "   "}],
)
def test_a_reason_is_one_line(kwargs):
    """A newline made a table row of its own ("line two" as a backend)."""
    with pytest.raises(ValueError, match="one line"):
        capabilities(**kwargs)


def test_under_python_oo_no_docstring_is_written():
    code = (
        "from xpkit.testing import capabilities\n"
        "@capabilities(skip={'dask': 'why'}, in_docstring=True)\n"
        "def f(x):\n"
        "    '''Do it.'''\n"
        "print(repr(f.__doc__))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-OO", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "None"


METHODS_LIB = """
from xpkit.testing import capabilities

__all__ = ["Thing"]


class Thing:
    @capabilities()
    def double(self, x, xp):
        if xp.any(x < 0):  # (a value read: fails jitted, in a graph, compiled)
            return x * 0
        return x * 2

    @capabilities()
    @staticmethod
    def triple(x, xp):
        if xp.any(x < 0):
            return x * 0
        return x * 3

    @capabilities(modes={"jit": "reads a value", "lazy": "reads a value"})
    @classmethod
    def quadruple(cls, x, xp):
        if xp.any(x < 0):
            return x * 0
        return x * 4
"""

METHODS_TESTS = """
from xpkit.testing import covers
from lib_thing import Thing

@covers(Thing.double)
def test_double(xpkit_backend, xp):
    Thing().double(xpkit_backend.asarray([1.0, 2.0]), xp)

@covers((Thing, "triple"))
def test_triple(xpkit_backend, xp):
    Thing.triple(xpkit_backend.asarray([1.0, 2.0]), xp)

@covers(Thing.quadruple)
def test_quadruple(xpkit_backend, xp):
    Thing.quadruple(xpkit_backend.asarray([1.0, 2.0]), xp)
"""


def test_covers_declares_a_method_on_its_class(pytester):
    """covers(Thing.double) made no lazy variant (the method ran eagerly
    where its statement said jit: yes), and covers((Thing, "double")) was a
    TypeError; as a module-level function it worked."""
    if not ADAPTERS["jax"].is_installed():  # (not imported here: pytester's
        pytest.skip("needs JAX")  # snapshot would drop its modules after)
    pytester.makepyfile(lib_thing=METHODS_LIB, test_thing=METHODS_TESTS)
    result = pytester.runpytest_subprocess(
        "-v",
        "-p",
        "no:cacheprovider",
        "--xpkit-backends=jax*",
        "--xpkit-uncovered=lib_thing",
    )
    assert outcomes(result) == {
        "test_double[jax-cpu]": "PASSED",
        "test_double[jax-cpu-jit]": "FAILED",  # jitted: the `if` fails
        "test_triple[jax-cpu]": "PASSED",
        "test_triple[jax-cpu-jit]": "FAILED",
        "test_quadruple[jax-cpu]": "PASSED",
        "test_quadruple[jax-cpu-jit]": "PASSED",  # (stated: eager under jit)
    }
    result.stdout.fnmatch_lines(["*every @capabilities statement has a test*"])


def test_covers_refuses_a_pair_that_names_no_method():
    class Thing:
        pass

    with pytest.raises(TypeError, match="Thing.nothing, which does not exist"):
        covers((Thing, "nothing"))
