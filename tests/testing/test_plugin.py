"""The pytest plugin as an outside user meets it: only ``import xpkit`` and fixture names."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest
from plugin_runs import needs, outcomes

USER_TEST = """
import xpkit

def test_sum(xpkit_backend, xp):
    x = xpkit_backend.asarray([[1.0, 2.0], [3.0, 4.0]])
    assert float(xpkit_backend.to_numpy(xp.sum(x))) == 10.0
    assert xp is xpkit_backend.xp
"""


HYPOTHESIS_TEST = """
from hypothesis import given, settings, strategies as st
from xpkit.testing import assert_close

class TestShift:  # a new instance per variant: Hypothesis's differing_executors
    @settings(deadline=None, max_examples=10)  # (no timing: the first call compiles)
    @given(v=st.integers(-10, 10))  # (exact in float32 too)
    def test_shift(self, xpkit_backend, v):
        x = xpkit_backend.asarray([v / 2, 1.0])
        assert_close(x + 1.0, xpkit_backend.asarray([v / 2 + 1.0, 2.0]))
"""


def expected_cpu_ids() -> set[str]:
    ids = {"numpy"}
    if importlib.util.find_spec("torch"):
        ids.add("torch-cpu")
    if importlib.util.find_spec("array_api_strict"):
        ids |= {
            "array_api_strict",
            "array_api_strict-strictest",
            "array_api_strict-device1",
            "array_api_strict-no_float64",
        }
    if importlib.util.find_spec("jax"):
        ids.add("jax-cpu")
    if importlib.util.find_spec("dask"):
        ids.add("dask")
    return ids


def written_wrong(result: pytest.RunResult, said: str) -> None:
    """The run ended as a usage error saying ``said`` (a glob), no test run."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"ERROR: *{said}*"])


def passed_ids(result: pytest.RunResult) -> set[str]:
    return set(re.findall(r"test_sum\[([\w-]+)\] PASSED", result.stdout.str()))


def test_runs_once_per_available_backend(pytester):
    pytester.makepyfile(test_user=USER_TEST, test_hypothesis=HYPOTHESIS_TEST)
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider", "-rs")
    assert expected_cpu_ids() <= passed_ids(result)
    # A Hypothesis test of a class passes on every variant (it failed the
    # differing_executors health check after the first: issue #30).
    given = re.findall(r"test_shift\[([\w-]+)\] PASSED", result.stdout.str())
    assert expected_cpu_ids() <= set(given)
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0
    if not importlib.util.find_spec("cupy"):  # (a plain substring: [cupy] is no glob)
        assert (
            "CuPy is not installed (pip install 'xpkit[cupy]')" in result.stdout.str()
        )


def test_option_narrows_the_backends(pytester):
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess(
        "-v", "-p", "no:cacheprovider", "--xpkit-backends=numpy"
    )
    result.assert_outcomes(passed=1)
    assert passed_ids(result) == {"numpy"}


def test_environment_variable_narrows_the_backends(pytester, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv("XPKIT_BACKENDS", "numpy,torch-cpu")
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider")
    assert passed_ids(result) == {"numpy", "torch-cpu"}


@pytest.mark.parametrize(
    ("selection", "said"),
    [
        ("numpy,tensorflow", "*names unknown backends ?'tensorflow'?*"),
        # (every test was skipped, "got empty parameter set", and the run passed)
        ("numpy,-numpy", "*selects no variant: numpy,-numpy leaves out all*"),
        # (commas alone ran every variant, and hid XPKIT_BACKENDS)
        (",", "*--xpkit-backends names no backend: ','*"),
    ],
)
def test_a_selection_that_names_or_leaves_nothing_is_a_usage_error(
    pytester, selection, said
):
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--xpkit-backends={selection}"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([said])


def test_the_command_line_s_selection_replaces_the_one_in_addopts(pytester):
    """Given more than once, the last counts, as for pytest's own options."""
    needs("array_api_strict")
    pytester.makeini("[pytest]\naddopts = --xpkit-backends=numpy\n")
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess(
        "-v", "-p", "no:cacheprovider", "--xpkit-backends=array_api_strict"
    )
    assert result.ret == pytest.ExitCode.OK
    assert passed_ids(result) == {"array_api_strict"}


def test_an_environment_variable_of_commas_alone_is_a_usage_error(
    pytester, monkeypatch
):
    monkeypatch.setenv("XPKIT_BACKENDS", " , ")
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*XPKIT_BACKENDS names no backend: ' , '*"])


def test_a_backend_this_machine_lacks_is_not_called_unknown(pytester, monkeypatch):
    from xpkit._select import find_gpus

    if find_gpus():
        pytest.skip("this machine has a GPU")
    monkeypatch.setenv("XPKIT_BACKENDS", "torch-cuda,tensorflow")
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            (
                "*backends not available on this machine ?'torch-cuda'? and "
                "unknown backends ?'tensorflow'?; available here: *numpy*"
            )
        ]
    )


def test_skip_and_xfail_markers(pytester):
    pytester.makepyfile(
        test_user="""
        import pytest

        @pytest.mark.xpkit_skip(["torch"], reason="not on torch")
        @pytest.mark.xpkit_xfail(["numpy"], reason="numpy gets it wrong")
        def test_marked(xpkit_backend):
            assert xpkit_backend.library != "numpy"
        """
    )
    result = pytester.runpytest_subprocess(
        "-v", "-rsx", "-p", "no:cacheprovider", "--xpkit-backends=numpy,torch,dask"
    )
    text = result.stdout.str()
    assert "test_marked[numpy] XFAIL" in text
    if importlib.util.find_spec("torch"):
        assert "test_marked[torch-cpu] SKIPPED" in text
        assert "not on torch" in text
    if importlib.util.find_spec("dask"):
        assert "test_marked[dask] PASSED" in text


def test_markers_name_backends_as_the_option_does_and_apply_on_a_param(pytester):
    """``array_api_strict`` is that variant alone, a pattern every id it
    matches; a marker on a ``pytest.param`` applies (it was ignored)."""
    needs_strict = pytest.importorskip("array_api_strict")
    assert needs_strict
    pytester.makepyfile(
        test_user="""
        import pytest

        @pytest.mark.xpkit_skip(["array_api_strict"], reason="the plain one")
        def test_plain(xpkit_backend):
            pass

        @pytest.mark.xpkit_skip(["array_api_strict*"], reason="every strict one")
        def test_pattern(xpkit_backend):
            pass

        @pytest.mark.parametrize("n", [
            pytest.param(1, id="one"),
            pytest.param(2, id="two", marks=pytest.mark.xpkit_skip(
                ["numpy"], reason="not two on numpy")),
            pytest.param(3, id="three", marks=pytest.mark.xpkit_xfail(
                ["numpy"], reason="three fails on numpy")),
        ])
        def test_param(xpkit_backend, n):
            assert not (n == 3 and xpkit_backend.library == "numpy")
        """
    )
    result = pytester.runpytest_subprocess(
        "-v",
        "-rsx",
        "-p",
        "no:cacheprovider",
        "--xpkit-backends=numpy,array_api_strict*",
    )
    got = dict(
        re.findall(
            r"::(test_\w+\[[\w-]+\]) (PASSED|SKIPPED|XFAIL|FAILED)", result.stdout.str()
        )
    )
    strict = [
        "array_api_strict",
        "array_api_strict-strictest",
        "array_api_strict-device1",
    ]
    assert got["test_plain[array_api_strict]"] == "SKIPPED"
    assert got["test_plain[array_api_strict-strictest]"] == "PASSED"
    assert got["test_plain[array_api_strict-device1]"] == "PASSED"
    assert {got[f"test_pattern[{v}]"] for v in strict} == {"SKIPPED"}
    assert got["test_pattern[numpy]"] == "PASSED"

    def param(variant: str, n: str) -> str:  # (either order of the ids)
        return (
            got.get(f"test_param[{variant}-{n}]") or got[f"test_param[{n}-{variant}]"]
        )

    assert [param("numpy", n) for n in ("one", "two", "three")] == [
        "PASSED",
        "SKIPPED",
        "XFAIL",
    ]
    assert {param(v, n) for v in strict for n in ("one", "two", "three")} == {"PASSED"}
    assert "not two on numpy" in result.stdout.str()
    assert result.parseoutcomes().get("failed", 0) == 0


FIXTURES_AND_MARKERS = """
import pytest


@pytest.mark.xpkit_only(["numpy", "torch"], reason="a feature of the two")
def test_only(xpkit_backend):
    pass


@pytest.mark.xpkit_xfail(["numpy"], reason="may pass", strict=False)
def test_loose_passes(xpkit_backend):
    pass


@pytest.mark.xpkit_xfail(["numpy"], reason="fails on numpy", strict=False)
def test_loose_fails(xpkit_backend):
    assert xpkit_backend.library != "numpy"


def test_variant(xpkit_variant, xp, xpkit_device):
    x = xp.asarray([1.0], device=xpkit_device)
    v = xpkit_variant
    print(f"VARIANT {v.id}|{v.key}|{v.mode}|{x.device!r}")
"""


def test_leaving_out_only_on_loose_xfail_and_the_variant_and_device_fixtures(
    pytester,
):
    """``-<name>`` in the option, ``xpkit_only``, ``xpkit_xfail(strict=False)``,
    and what ``xpkit_variant`` and ``xpkit_device`` hand a test."""
    needs("torch", "array_api_strict")
    pytester.makeini("[pytest]\nfilterwarnings = error\nxfail_strict = true\n")
    pytester.makepyfile(test_user=FIXTURES_AND_MARKERS)
    result = pytester.runpytest_subprocess(
        "-v",
        "-s",
        "-rs",
        "-p",
        "no:cacheprovider",
        "--xpkit-backends=numpy,torch-cpu,array_api_strict*,-array_api_strict-no_float64",
    )
    variants = [
        "numpy",
        "torch-cpu",
        "array_api_strict",
        "array_api_strict-strictest",
        "array_api_strict-device1",
    ]
    expected = {}
    for v in variants:
        expected[f"test_only[{v}]"] = (
            "PASSED" if v in ("numpy", "torch-cpu") else "SKIPPED"
        )
        expected[f"test_loose_fails[{v}]"] = "XFAIL" if v == "numpy" else "PASSED"
        if v != "numpy":  # (numpy: XPASS, a loose xfail that passes fails nothing)
            expected[f"test_loose_passes[{v}]"] = "PASSED"
    got = outcomes(result)
    assert {k: got[k] for k in expected} == expected
    assert set(got) - set(expected) == set()  # (test_variant's lines print first)
    result.assert_outcomes(passed=15, skipped=3, xfailed=1, xpassed=1)
    reason = "array_api_strict: only on ['numpy', 'torch']: a feature of the two"
    assert any(line.endswith(reason) for line in result.stdout.lines)
    seen = dict(
        re.findall(r"VARIANT ([^|\s]+)\|(.*)$", result.stdout.str(), re.MULTILINE)
    )
    assert seen == {
        "numpy": "numpy||'cpu'",
        "torch-cpu": "torch||device(type='meta')",
        "array_api_strict": "array_api_strict||array_api_strict.Device('device1')",
        # (its own device: strictness is what the variant tests, as the
        # strictest backend of array-api-extra's harness has no other)
        "array_api_strict-strictest": (
            "array_api_strict|strictest|array_api_strict.Device('CPU_DEVICE')"
        ),
        "array_api_strict-device1": (
            "array_api_strict||array_api_strict.Device('CPU_DEVICE')"
        ),
    }


def test_marker_without_reason_is_an_error(pytester):
    pytester.makepyfile(
        test_user="""
        import pytest

        @pytest.mark.xpkit_skip(["numpy"])
        def test_marked(xpkit_backend):
            pass
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--xpkit-backends=numpy"
    )
    written_wrong(result, "xpkit_skip needs a reason (test test_user.py::test_marked)")


def test_marker_with_unknown_backend_is_an_error(pytester):
    pytester.makepyfile(
        test_user="""
        import pytest

        @pytest.mark.xpkit_skip(["tensorflw"], reason="typo")
        def test_marked(xpkit_backend):
            pass
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--xpkit-backends=numpy"
    )
    written_wrong(result, "xpkit_skip names unknown backend 'tensorflw'")


def test_strictest_variant_switches_flags_for_the_test_only(pytester):
    pytest.importorskip("array_api_strict")
    pytester.makepyfile(
        test_user="""
        import array_api_strict

        def test_flags(xpkit_backend, request):
            flags = array_api_strict.get_array_api_strict_flags()
            strictest = request.node.callspec.id == "array_api_strict-strictest"
            assert flags["data_dependent_shapes"] is (not strictest)
            assert flags["boolean_indexing"] is (not strictest)

        def test_after():
            assert array_api_strict.get_array_api_strict_flags()["data_dependent_shapes"]
        """
    )
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--xpkit-backends=array_api_strict,array_api_strict-strictest",
    )
    result.assert_outcomes(passed=3)


def test_requires_marker_skips_backends_without_a_capability(pytester, monkeypatch):
    pytest.importorskip("array_api_strict")
    monkeypatch.setenv(
        "XPKIT_BACKENDS", "numpy,array_api_strict,array_api_strict-strictest"
    )
    pytester.makepyfile(
        test_user="""
        import pytest

        @pytest.mark.xpkit_requires("data_dependent_shapes")
        def test_nonzero(xpkit_backend, xp):
            assert xpkit_backend.to_numpy(xp.nonzero(xpkit_backend.asarray([0, 3]))[0]).tolist() == [1]
        """
    )
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider", "-rs")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 2  # numpy, array_api_strict
    assert outcomes.get("skipped") == 1
    result.stdout.fnmatch_lines(
        ["*array_api_strict-strictest has no data_dependent_shapes*"]
    )


def test_requires_marker_refuses_an_unknown_capability(pytester):
    pytester.makepyfile(
        test_user="""
        import pytest

        @pytest.mark.xpkit_requires("fft")
        def test_fft(xpkit_backend):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    written_wrong(
        result,
        "xpkit_requires names ?'fft'?; capabilities: linalg, data_dependent_shapes, "
        "float64",
    )


HIDE_ONNXRUNTIME = """
import importlib.util

_real = importlib.util.find_spec


def _find_spec(name, package=None):  # as on a machine without onnxruntime
    if name == "onnxruntime" or name.startswith("onnxruntime."):
        return None
    return _real(name, package)


importlib.util.find_spec = _find_spec
"""


@pytest.mark.parametrize("onnxruntime", ["hidden", "installed"])
def test_a_library_that_warns_at_import_fails_no_test(pytester, onnxruntime):
    """ndonnx without onnxruntime warns at import: under filterwarnings = error
    every ndonnx test was an error (in the session fixture, kept for all)."""
    # (find_spec, not importorskip: pytester drops from sys.modules what a test
    # imports, and protobuf imported twice segfaults; see tests/conftest.py)
    if importlib.util.find_spec("ndonnx") is None:
        pytest.skip("ndonnx is not installed")
    if onnxruntime == "installed":
        if importlib.util.find_spec("onnxruntime") is None:
            pytest.skip("onnxruntime is not installed")
    else:
        pytester.makeconftest(HIDE_ONNXRUNTIME)
    pytester.makeini("[pytest]\nfilterwarnings = error\n")
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess(
        "-v", "-p", "no:cacheprovider", "--xpkit-backends=numpy,ndonnx"
    )
    result.assert_outcomes(passed=2)
    warned = [ln for ln in result.stdout.lines if "importing ndonnx warned" in ln]
    if onnxruntime == "hidden":
        expected = (
            "xpkit: importing ndonnx warned (recorded, not raised): UserWarning: "
            "onnxruntime is not installed. ndonnx will use the (incomplete) "
            "reference implementation for value propagation."
        )
        assert warned == [expected]
    else:
        assert warned == []


def test_variants_that_replace_functions_are_marked_thread_unsafe(pytester):
    """Where pytest-run-parallel registers ``thread_unsafe`` (its registration
    injected here by a conftest), the variants that replace a module's
    declared functions carry it: compiled ones, and those counting copies."""
    needs("torch")
    pytester.makeconftest(
        """
        def pytest_configure(config):
            config.addinivalue_line("markers", "thread_unsafe: run in one thread")


        def pytest_collection_finish(session):
            for item in session.items:
                mark = item.get_closest_marker("thread_unsafe")
                reason = mark.kwargs["reason"] if mark else "-"
                print(f"MARK {item.name} {reason}")
        """
    )
    pytester.makepyfile(
        test_declared="""
        from xpkit.testing import lazy_xp_function

        def double(x):
            return x * 2

        lazy_xp_function(double)

        def test_double(xp):
            assert double(xp.asarray(1.0)) == 2.0
        """,
        test_counted="""
        from xpkit.testing import lazy_xp_function

        def triple(x):
            return x * 3

        lazy_xp_function(triple, host_copies=0)

        def test_triple(xp):
            assert triple(xp.asarray(1.0)) == 3.0
        """,
        test_plain="""
        def test_plain(xp):
            pass
        """,
    )
    result = pytester.runpytest_subprocess(
        "-s", "-p", "no:cacheprovider", "--xpkit-backends=numpy,torch*"
    )
    result.assert_outcomes(passed=8)
    marks = dict(re.findall(r"^MARK (\S+) (.*)$", result.stdout.str(), re.MULTILINE))
    unsafe = "{} replaces the module's declared functions"
    assert marks == {
        "test_double[numpy]": "-",
        "test_double[torch-cpu]": "-",
        "test_double[torch-cpu-compile]": unsafe.format("torch-cpu-compile"),
        "test_triple[numpy]": "-",
        "test_triple[torch-cpu]": unsafe.format("torch-cpu"),
        "test_triple[torch-cpu-compile]": unsafe.format("torch-cpu-compile"),
        "test_plain[numpy]": "-",
        "test_plain[torch-cpu]": "-",
    }


LIBRARY_FIXTURES = """
def test_torch(torch):
    assert torch.__name__ == "array_api_compat.torch"
    assert type(torch.asarray([1.0])).__module__ == "torch"


def test_jnp(jnp):
    assert jnp.__name__ == "jax.numpy"


def test_da(da):
    assert da.__name__ == "array_api_compat.dask.array"
"""


def test_library_fixtures_give_the_namespace_or_say_why_not(pytester):
    """``torch``, ``jnp``, ``da`` (#30: array-api-extra's suite asks for them):
    the library's standard namespace, skipped where it is not installed or not
    selected."""
    needs("torch")
    from xpkit._adapters._registry import ADAPTERS

    pytester.makeini("[pytest]\nfilterwarnings = error\n")
    pytester.makepyfile(test_user=LIBRARY_FIXTURES)
    result = pytester.runpytest_subprocess("-v", "-rs", "-p", "no:cacheprovider")
    installed = {key: ADAPTERS[key].is_installed() for key in ("jax", "dask")}
    assert outcomes(result) == {
        "test_torch": "PASSED",
        "test_jnp": "PASSED" if installed["jax"] else "SKIPPED",
        "test_da": "PASSED" if installed["dask"] else "SKIPPED",
    }
    if not installed["jax"]:
        assert "is not installed (pip install 'xpkit[jax]')" in result.stdout.str()
    left_out = pytester.runpytest_subprocess(
        "-v", "-rs", "-p", "no:cacheprovider", "--xpkit-backends=numpy"
    )
    assert set(outcomes(left_out).values()) == {"SKIPPED"}
    left_out.stdout.fnmatch_lines(["*--xpkit-backends selects no PyTorch variant*"])


X64_TEST = """
def test_float64(xp, xpkit_backend):
    assert xpkit_backend.has_float64
    assert xp.asarray(1.0).dtype == xp.float64
"""

X64_CONFTEST = """
import pytest


def pytest_collection_finish(session):
    import jax

    print("x64 during the session:", jax.config.jax_enable_x64)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    import jax

    # the plugin's own pytest_unconfigure has switched it back by now
    print("x64 after the session:", jax.config.jax_enable_x64)
"""


@pytest.mark.parametrize(
    ("ini", "chosen"),
    [("xpkit_x64 = true", "jax-cpu"), ("", "jax-cpu"), ("xpkit_x64 = true", "-jax")],
)
def test_the_x64_ini_option_switches_jax_64_bit_on_for_the_session(
    pytester, monkeypatch, ini, chosen
):
    """array-api-extra's harness switches JAX's x64 on by hand; ``xpkit_x64``
    does it for the session, and switches it back off at its end."""
    needs("jax")
    monkeypatch.delenv("JAX_ENABLE_X64", raising=False)
    pytester.makeini(f"[pytest]\nfilterwarnings = error\n{ini}\n")
    pytester.makeconftest(X64_CONFTEST)
    pytester.makepyfile(test_user=X64_TEST)
    result = pytester.runpytest_subprocess(
        "-v", "-s", "-p", "no:cacheprovider", f"--xpkit-backends={chosen}"
    )
    text = result.stdout.str()
    if chosen == "-jax":  # no JAX variant runs: nothing switched
        assert "test_user.py::test_float64[numpy] PASSED" in text
        assert "[jax" not in text
        assert "x64 during the session: False" in text
    elif ini:
        assert "test_user.py::test_float64[jax-cpu] PASSED" in text
        assert "x64 during the session: True" in text
        assert "x64 after the session: False" in text
    else:
        assert "test_user.py::test_float64[jax-cpu] FAILED" in text


@pytest.mark.parametrize(
    ("key", "switch", "read", "already", "expected"),
    [
        (
            "jax",
            "a.switch_on_64_bit()",
            "jax.config.jax_enable_x64",
            "jax.config.update('jax_enable_x64', True)",
            ["True", "False", "None", "True"],
        ),
        (
            "torch",
            "a.set_default_float('float64')",
            "torch.get_default_dtype()",
            "torch.set_default_dtype(torch.float64)",
            ["torch.float64", "torch.float32", "None", "torch.float64"],
        ),
    ],
    ids=["x64", "default_float"],
)
def test_a_session_setting_is_set_back_and_left_alone_where_it_already_is(
    monkeypatch, key, switch, read, already, expected
):
    """In a child: switched from the library's default, the undo sets it
    back; already so, nothing is switched (and nothing to undo)."""
    import subprocess
    import sys

    needs(key)
    monkeypatch.delenv("JAX_ENABLE_X64", raising=False)
    code = (
        f"import {key}; from xpkit._adapters import ADAPTERS; a = ADAPTERS['{key}']\n"
        f"undo = {switch}; on = {read}\n"
        f"undo(); off = {read}\n"
        f"{already}\n"
        f"again = {switch}\n"
        f"print(on, off, again, {read})\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == expected


DEFAULT_FLOAT_TEST = """
def test_python_floats(xp):
    assert xp.asarray([1.0, 2.0]).dtype == xp.float64
"""

DEFAULT_FLOAT_CONFTEST = """
import pytest


def pytest_collection_finish(session):
    import torch

    print("default during the session:", torch.get_default_dtype())


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    import torch

    # the plugin's own pytest_unconfigure has set it back by now
    print("default after the session:", torch.get_default_dtype())
"""


@pytest.mark.parametrize(
    ("ini", "chosen"),
    [
        ("xpkit_default_float = float64", "torch-cpu"),
        ("", "torch-cpu"),
        ("xpkit_default_float = float64", "numpy"),
    ],
)
def test_the_default_float_ini_option_sets_torchs_default_for_the_session(
    pytester, ini, chosen
):
    """SciPy's harness makes torch's default dtype float64 by hand;
    ``xpkit_default_float`` does it for the session, and sets it back."""
    needs("torch")
    pytester.makeini(f"[pytest]\nfilterwarnings = error\n{ini}\n")
    pytester.makeconftest(DEFAULT_FLOAT_CONFTEST)
    pytester.makepyfile(test_user=DEFAULT_FLOAT_TEST)
    result = pytester.runpytest_subprocess(
        "-v", "-s", "-p", "no:cacheprovider", f"--xpkit-backends={chosen}"
    )
    text = result.stdout.str()
    assert "default after the session: torch.float32" in text
    if chosen == "numpy":  # no torch variant runs: nothing set
        assert "test_user.py::test_python_floats[numpy] PASSED" in text
        assert "default during the session: torch.float32" in text
    elif ini:
        assert "test_user.py::test_python_floats[torch-cpu] PASSED" in text
        assert "default during the session: torch.float64" in text
    else:
        assert "test_user.py::test_python_floats[torch-cpu] FAILED" in text
        assert "default during the session: torch.float32" in text


@pytest.mark.parametrize(
    ("ini", "said"),
    [
        (
            "xpkit_default_float = double",
            "xpkit_default_float takes float32 or float64 (or nothing), got 'double'",
        ),
        # (pytest's own words named no option: "invalid truth value 'maybe'")
        ("xpkit_x64 = maybe", "xpkit_x64: invalid truth value 'maybe'"),
    ],
)
def test_an_ini_value_the_option_does_not_take_is_a_usage_error(pytester, ini, said):
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(test_user=DEFAULT_FLOAT_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{said}*"])


def test_a_library_that_fails_to_import_is_not_switched(pytester, monkeypatch):
    """An installed torch whose import fails: its variants skip, saying why,
    and ``xpkit_default_float`` leaves it alone (it ended the session)."""
    fake = pytester.mkdir("fake")
    (fake / "torch").mkdir()
    (fake / "torch" / "__init__.py").write_text(
        'raise ImportError("libtorch_cuda.so: cannot open shared object file")\n'
    )
    monkeypatch.setenv("PYTHONPATH", str(fake))
    pytester.makeini("[pytest]\nxpkit_default_float = float64\n")
    pytester.makepyfile(test_user="def test_any(xp):\n    assert xp.asarray(1.0)\n")
    monkeypatch.delenv("XPKIT_BACKENDS", raising=False)
    # (every variant: no --xpkit-backends, the way it ended the session)
    result = pytester.runpytest_subprocess("-v", "-rs", "-p", "no:cacheprovider")
    got = outcomes(result)
    assert got["test_any[numpy]"] == "PASSED"
    assert {v for k, v in got.items() if "torch" in k} == {"SKIPPED"}
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert "libtorch_cuda.so" in result.stdout.str()
    assert result.ret == 0


# -- markers written wrong: a usage error, not a marker that does nothing -----


def _marks(decorator, param_id="numpy"):
    from xpkit.testing._markers import marks_for
    from xpkit.testing._variants import BackendParam

    library = param_id.split("-")[0]
    param = BackendParam(library, None, param_id)
    return marks_for([decorator.mark], param, frozenset({"numpy", "torch-cpu"}))


@pytest.mark.parametrize(
    ("decorator", "message"),
    [
        (pytest.mark.xpkit_skip("tourch*", reason="r"), "unknown backend 'tourch\\*'"),
        (pytest.mark.xpkit_skip(reason="r"), "names no backends"),
        (pytest.mark.xpkit_skip([], reason="r"), "names no backends"),
        (
            pytest.mark.xpkit_skip("numpy", "torch-cpu", reason="r"),
            "it takes \\(backends, reason\\)",
        ),
        (pytest.mark.xpkit_only("numpy", "torch-cpu"), "names a backend"),
        (
            pytest.mark.xpkit_skip("numpy", reason="r", condition=False),
            "no 'condition'",
        ),
        (pytest.mark.xpkit_xfail("numpy", reason="r", stict=False), "no 'stict'"),
        (pytest.mark.xpkit_skip(123, reason="r"), "unknown backend 123"),
        (
            pytest.mark.xpkit_only(["torch-cpu-compiled"], reason="r"),
            "xpkit_only names unknown backend 'torch-cpu-compiled'.*torch-cpu-compile,",
        ),
        (
            pytest.mark.xpkit_skip(["jax-cpu-jitt"], reason="r"),
            "xpkit_skip names unknown backend 'jax-cpu-jitt'.*jax-cpu-jit,",
        ),
        (
            pytest.mark.xpkit_xfail(["numpy", "numpy-cpu"], reason="r"),
            "xpkit_xfail names unknown backend 'numpy-cpu'.*numpy, numpy-readonly",
        ),
        (pytest.mark.xpkit_skip("*-compiled", reason="r"), "'\\*-compiled'"),
        (pytest.mark.xpkit_skip("torch-cuda:1", reason="r"), "'torch-cuda:1'"),
        # (a list second was the reason: xpkit_only ran torch-cpu nowhere)
        (
            pytest.mark.xpkit_only(["numpy"], ["torch"]),
            "the reason must be a string, got \\['torch'\\]",
        ),
        (pytest.mark.xpkit_skip("numpy", reason=5), "must be a string, got 5"),
        (pytest.mark.xpkit_cpu_only(reason=5), "needs a reason \\(a string\\), got 5"),
    ],
)
def test_a_marker_written_wrong_is_a_usage_error(decorator, message):
    """Each was accepted and did nothing, or something else (the second
    backend taken as the reason, condition=False skipping all the same)."""
    with pytest.raises(pytest.UsageError, match=message):
        _marks(decorator)


def test_a_marker_written_wrong_ends_the_run_as_a_usage_error(pytester):
    """It was a collection error: pytest's traceback, and exit status 1, as
    a failing test's."""
    pytester.makepyfile(
        test_user="""
import pytest

@pytest.mark.xpkit_skip(["NumPy"], reason="r")
def test_skipped(xpkit_backend):
    pass

def test_plain():
    pass
""",
        test_other="""
import pytest

@pytest.mark.xpkit_only(["numpy"], ["torch"])
def test_only(xpkit_backend):
    pass
""",
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--xpkit-backends=numpy"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(  # (each of them, not the first alone)
        [
            "ERROR: @pytest.mark.xpkit_only: the reason must be a string*",
            "ERROR: @pytest.mark.xpkit_skip names unknown backend 'NumPy'*",
        ],
        consecutive=False,
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "ERROR collecting" not in result.stdout.str()
    # pytest-xdist: a worker's collection error, as before (a usage error
    # raised after a worker's collection is xdist's INTERNALERROR)
    workers = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--xpkit-backends=numpy", "-n", "1"
    )
    assert workers.ret == pytest.ExitCode.TESTS_FAILED
    assert "INTERNALERROR" not in workers.stdout.str() + workers.stderr.str()
    workers.stdout.fnmatch_lines(
        ["*UsageError: @pytest.mark.xpkit_skip names unknown*"]
    )


def test_xpkit_xfail_hands_raises_and_run_to_pytest():
    """They were dropped: a TypeError passed as the ValueError expected."""
    (mark,) = _marks(
        pytest.mark.xpkit_xfail("numpy", reason="r", raises=ValueError, run=False)
    )
    assert mark.mark.name == "xfail"
    assert mark.mark.kwargs == {
        "reason": "r",
        "strict": True,
        "raises": ValueError,
        "run": False,
    }
    assert _marks(
        pytest.mark.xpkit_skip("numpy*", reason="r")
    )  # (a pattern that matches)
    assert _marks(pytest.mark.xpkit_skip("*-cuda", reason="r")) == []  # (none here)


def test_a_marker_takes_every_variant_id_on_any_machine():
    """Ids of GPUs and of libraries not installed here are no misspellings."""
    known = [
        "torch-cuda",
        "torch-mps-compile",
        "torch-meta",
        "jax-gpu",
        "jax-tpu-jit",
        "cupy",
        "dask-lazy",
        "numpy-readonly",
        "array_api_strict-no_float64",
        "array_api_strict-strictest",
        "ndonnx",
        "*-compile",
    ]
    assert _marks(pytest.mark.xpkit_skip(known, reason="r")) == []
    assert _marks(pytest.mark.xpkit_only(known, reason="r"))  # (skips numpy)


ONLY_MISSPELT = """
import pytest

@pytest.mark.xpkit_only(["torch-cpu-compiled"], reason="compiled only")
def test_marked(xpkit_backend):
    pass
"""


def test_a_misspelt_variant_id_in_a_marker_is_a_usage_error(pytester):
    """It skipped the test on every variant (xpkit_skip: on none), silently."""
    pytester.makepyfile(test_user=ONLY_MISSPELT)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--xpkit-backends=numpy"
    )
    written_wrong(result, "xpkit_only names unknown backend 'torch-cpu-compiled'")


OVERRIDDEN = """
import pytest
import xpkit

@pytest.fixture(scope="session")
def xpkit_backend():
    return xpkit.Backend("numpy")

def test_where(xpkit_backend, request):
    assert xpkit_backend.library == "numpy"
    assert not hasattr(request.node, "callspec")  # no variant id to lie
"""

WRAPPED = """
import pytest

@pytest.fixture(scope="session")
def xpkit_backend(xpkit_backend):
    return xpkit_backend  # (wraps the plugin's: its variants stand)

def test_where(xpkit_backend, request):
    assert request.node.callspec.id.split("-")[0] == xpkit_backend.library
"""


def test_a_fixture_that_replaces_xpkit_backend_is_not_parametrized(pytester):
    """Each test id named a variant, and every one ran on the conftest's backend."""
    pytester.makeconftest(OVERRIDDEN.split("def test_where", maxsplit=1)[0])
    pytester.makepyfile(
        test_user="def test_where" + OVERRIDDEN.split("def test_where")[1]
    )
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    assert outcomes(result) == {"test_where": "PASSED"}


def test_a_fixture_that_wraps_xpkit_backend_keeps_the_variants(pytester):
    needs("array_api_strict")
    pytester.makeconftest(WRAPPED.split("def test_where", maxsplit=1)[0])
    pytester.makepyfile(test_user="def test_where" + WRAPPED.split("def test_where")[1])
    result = pytester.runpytest_subprocess(
        "-v", "-p", "no:cacheprovider", "--xpkit-backends=numpy,array_api_strict"
    )
    assert result.ret == pytest.ExitCode.OK
    assert {"test_where[numpy]", "test_where[array_api_strict]"} <= set(
        outcomes(result)
    )


def test_a_library_asked_for_that_cannot_run_is_a_usage_error(pytester):
    """--xpkit-backends=cupy without CuPy skipped every test and exited 0."""
    needs("numpy")
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here")
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--xpkit-backends=cupy"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*(cupy) chooses no variant that can run here: CuPy is not installed*"]
    )
    beside = pytester.runpytest_subprocess(  # (NumPy runs; CuPy is skipped, saying so)
        "-p", "no:cacheprovider", "-rs", "--xpkit-backends=numpy,cupy"
    )
    assert beside.ret == pytest.ExitCode.OK
    beside.stdout.fnmatch_lines(["*CuPy is not installed*"])


def test_a_test_no_chosen_variant_runs_says_why(pytester):
    """It was skipped as pytest's 'got empty parameter set'."""
    needs("torch")
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-rs", "--xpkit-backends=torch-meta"
    )
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["*SKIPPED*(torch-meta) selects no variant for this test*xpkit_shapes_only*"]
    )


NARROWED_IN_A_MODULE_FIXTURE = """
import pytest

@pytest.fixture(scope="module")
def data(xpkit_backend):
    return xpkit_backend.asarray([1.0, 2.0], dtype="float64")

def test_data(data, xpkit_backend):
    assert xpkit_backend.dtype_to_str(data.dtype) == "float32"
"""


def test_a_module_scoped_fixture_narrows_as_its_test_does(pytester):
    """Its narrowing was a PrecisionWarning: an error under -W error."""
    needs("array_api_strict")
    pytester.makepyfile(test_user=NARROWED_IN_A_MODULE_FIXTURE)
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-W",
        "error",
        "--xpkit-backends=array_api_strict-no_float64",
    )
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*array_api_strict-no_float64 has no float64*"])


def test_the_narrowings_of_an_earlier_session_are_not_reported_again(pytester):
    """A second pytest.main in one process repeated the first one's narrowings."""
    needs("array_api_strict")
    pytester.makepyfile(
        test_user="""
def test_data(xpkit_backend):
    xpkit_backend.asarray([1.0, 2.0], dtype="float64")
"""
    )
    pytester.makepyfile(
        run="""
import pytest

for backends in ("array_api_strict-no_float64", "numpy"):
    print("SESSION", backends)
    pytest.main(["-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                 "--xpkit-backends=" + backends, "test_user.py"])
"""
    )
    result = pytester.run(sys.executable, "run.py")
    out = result.stdout.str()
    first, second = out.split("SESSION numpy")
    said = "array_api_strict-no_float64 has no float64: tests that requested it"
    assert said in first
    assert said not in second


def test_cpu_only_without_a_reason_is_a_usage_error_on_every_machine(pytester):
    """It was checked only on GPU variants: the error first showed on GPU CI."""
    pytester.makepyfile(
        test_user="""
import pytest

@pytest.mark.xpkit_cpu_only
def test_marked(xpkit_backend):
    pass
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    written_wrong(result, "xpkit_cpu_only needs a reason")
