"""The plugin's device, dtype and host-copy grid, as an outside package meets it (#21).

Each test writes a user's test module with pytester and runs it in a fresh
process (the variants import the libraries they run), then reads the
outcome of each test id:

- ``array_api_strict-device1`` and ``-no_float64`` catch an array created
  without ``device=``; the fixed function passes on every variant;
- a NumPy float64 reference follows a device that narrows float64
  (``jax-cpu`` without x64, ``no_float64``), and nothing else;
- ``lazy_xp_function(func, host_copies=0)`` fails where ``func`` converts
  to NumPy, naming the place, and passes on NumPy;
- ``xpkit_dtype`` and ``torch-meta`` (``xpkit_shapes_only``) make the ids
  they should;
- ``--xpkit-uncovered`` finds the statement no test covers, and fails.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from plugin_runs import needs, outcomes

from xpkit._adapters import ADAPTERS
from xpkit.testing._variants import (
    available_backend_params,
    libraries_named,
    selected,
    unmatched,
)

#: The documentation site.
DOCS = Path(__file__).resolve().parents[2] / "docs"


def _failure(result: pytest.RunResult, test_id: str) -> str:
    """The ``E`` lines of one failed test's report."""
    text = result.stdout.str()
    start = text.index(f"_ {test_id} _")
    end = text.find("\n____", start + 1)
    block = text[start : end if end > 0 else len(text)]
    return "\n".join(ln for ln in block.splitlines() if ln.startswith("E "))


DEVICES = textwrap.dedent(
    """\
    import numpy as np
    import array_api_compat
    from xpkit.testing import assert_close


    def center(x, xp):  # the bug: zeros land on the default device
        return x - xp.mean(x, axis=0) + xp.zeros(x.shape[1])


    def center_fixed(x, xp):
        device = array_api_compat.device(x)
        return x - xp.mean(x, axis=0) + xp.zeros(x.shape[1], device=device)


    def offsets(x, xp):  # the bug alone: nothing mixes the devices
        return xp.zeros(x.shape[1], dtype=x.dtype)


    def test_center(xpkit_backend, xp):
        x = xpkit_backend.asarray([[1.0, 2.0], [3.0, 4.0]])
        assert_close(center(x, xp), np.array([[-1.0, -1.0], [1.0, 1.0]]))


    def test_center_fixed(xpkit_backend, xp):
        x = xpkit_backend.asarray([[1.0, 2.0], [3.0, 4.0]])
        assert_close(center_fixed(x, xp), np.array([[-1.0, -1.0], [1.0, 1.0]]))


    def test_offsets(xpkit_backend, xp):
        x = xpkit_backend.asarray([[1.0, 2.0], [3.0, 4.0]])
        assert_close(offsets(x, xp), np.zeros(2))


    def test_sum_reference(xpkit_backend, xp):
        x = xpkit_backend.asarray([1.0, 2.0, 3.0])
        assert_close(xp.sum(x), np.asarray(6.0))


    def test_host_copy(xpkit_backend, xp):  # the result left the variant's library
        x = xpkit_backend.asarray([1.0, 2.0, 3.0])
        assert_close(xpkit_backend.to_numpy(xp.sum(x)), np.asarray(6.0))


    def test_host_copy_on_purpose(xpkit_backend, xp):
        x = xpkit_backend.asarray([1.0, 2.0, 3.0])
        got = xpkit_backend.to_numpy(xp.sum(x))
        assert_close(got, np.asarray(6.0), check_namespace=False)


    def test_sum_reference_off_by_more_than_float32(xpkit_backend, xp):
        x = xpkit_backend.asarray([1.0, 2.0, 3.0])
        assert_close(xp.sum(x), np.asarray(6.01))


    def test_integer_reference_of_a_float_result(xpkit_backend, xp):
        x = xpkit_backend.asarray([1.0, 2.0, 3.0])
        assert_close(xp.sum(x), np.asarray(6))
    """
)


def test_device_slips_and_references_across_every_variant(pytester):
    """One run over every variant this machine has, filterwarnings = error."""
    needs("array_api_strict")
    pytester.makeini("[pytest]\nfilterwarnings = error\n")
    pytester.makepyfile(test_user=DEVICES)
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider")
    got = outcomes(result)
    variants = sorted({key.split("[", 1)[1][:-1] for key in got})
    usable = [v for v in variants if got[f"test_center_fixed[{v}]"] != "SKIPPED"]
    assert {"numpy", "array_api_strict-device1", "array_api_strict-no_float64"} <= set(
        usable
    )
    off_device = {"array_api_strict-device1", "array_api_strict-no_float64"}
    for v in usable:
        assert got[f"test_center_fixed[{v}]"] == "PASSED", v
        assert got[f"test_sum_reference[{v}]"] == "PASSED", v
        assert got[f"test_host_copy_on_purpose[{v}]"] == "PASSED", v
        host = "PASSED" if v in ("numpy", "numpy-readonly") else "FAILED"
        assert got[f"test_host_copy[{v}]"] == host, v
        expected = "FAILED" if v in off_device else "PASSED"
        assert got[f"test_center[{v}]"] == expected, v
        assert got[f"test_offsets[{v}]"] == expected, v
        assert got[f"test_sum_reference_off_by_more_than_float32[{v}]"] == "FAILED"
        assert got[f"test_integer_reference_of_a_float_result[{v}]"] == "FAILED"

    mixed = _failure(result, "test_center[array_api_strict-device1]")
    assert "Device('device1')" in mixed
    assert "Device('CPU_DEVICE')" in mixed
    slipped = _failure(result, "test_offsets[array_api_strict-device1]")
    assert (
        "devices differ: actual on 'cpu', but the test runs on "
        "array_api_strict-device1 (device 'device1')" in slipped
    )
    left = _failure(result, "test_host_copy[array_api_strict-device1]")
    assert (
        "actual is NumPy, but the test runs on array_api_strict-device1 "
        "(array-api-strict): the result left the variant's library (compare host "
        "copies on purpose with check_namespace=False)" in left
    )
    # The narrowed reference is compared at float32's tolerance, not excused.
    far = _failure(
        result,
        "test_sum_reference_off_by_more_than_float32[array_api_strict-no_float64]",
    )
    assert "1 of 1 elements differ (rtol=0.00138" in far
    wrong = _failure(
        result, "test_integer_reference_of_a_float_result[array_api_strict-no_float64]"
    )
    assert "dtypes differ: actual float32, desired int64" in wrong
    # Only what tests asked for and the device narrowed (issue #23).
    lines = sorted(ln for ln in result.stdout.lines if ln.startswith("xpkit: "))
    expected_lines = [
        (
            "xpkit: array_api_strict-no_float64 has no float64: tests that "
            "requested it got float64 -> float32"
        )
    ]
    if "jax-cpu" in usable:
        expected_lines.append(
            "xpkit: jax-cpu has no float64: tests that requested it got float64 "
            "-> float32"
        )
    assert lines == sorted(expected_lines)


HOST_COPIES = textwrap.dedent(
    """\
    import numpy as np
    import array_api_compat
    from xpkit.testing import lazy_xp_function


    def host_mean(x, xp):
        m = np.asarray(x).mean(axis=0)
        return x - xp.asarray(m, device=array_api_compat.device(x))


    def unchecked_host_mean(x, xp):
        return x - xp.asarray(np.asarray(x).mean(axis=0))


    def one_copy(b, x):
        return b.to_numpy(x).sum()


    def two_copies(b, x):
        return b.to_numpy(x).sum() + b.to_numpy(x).sum()


    def on_device(x, xp):
        return x - xp.mean(x, axis=0)


    lazy_xp_function(host_mean, host_copies=0)
    lazy_xp_function(unchecked_host_mean)
    lazy_xp_function(one_copy, host_copies=1)
    lazy_xp_function(two_copies, host_copies=1)
    lazy_xp_function(on_device, host_copies=0)


    def test_host_mean(xpkit_backend, xp):
        host_mean(xpkit_backend.asarray([[1.0, 2.0], [3.0, 4.0]]), xp)


    def test_unchecked(xpkit_backend, xp):
        unchecked_host_mean(xpkit_backend.asarray([[1.0, 2.0], [3.0, 4.0]]), xp)


    def test_one_copy(xpkit_backend):
        assert one_copy(xpkit_backend, xpkit_backend.asarray([1.0, 2.0])) == 3.0


    def test_two_copies(xpkit_backend):
        two_copies(xpkit_backend, xpkit_backend.asarray([1.0, 2.0]))


    def test_on_device(xpkit_backend, xp):
        on_device(xpkit_backend.asarray([[1.0, 2.0], [3.0, 4.0]]), xp)
    """
)


def _line_of(fragment: str) -> int:
    """The line of HOST_COPIES that holds ``fragment`` (1-based)."""
    lines = HOST_COPIES.splitlines()
    return next(i for i, line in enumerate(lines, 1) if fragment in line)


def test_host_copies_are_counted_and_named(pytester):
    needs("torch", "array_api_strict")
    pytester.makepyfile(test_user=HOST_COPIES)
    result = pytester.runpytest_subprocess(
        "-v",
        "-p",
        "no:cacheprovider",
        "--xpkit-backends=numpy,torch-cpu,array_api_strict",
    )
    got = outcomes(result)
    for test in ("test_unchecked", "test_one_copy", "test_on_device"):
        for v in ("numpy", "torch-cpu", "array_api_strict"):
            assert got[f"{test}[{v}]"] == "PASSED", (test, v)
    for test in ("test_host_mean", "test_two_copies"):
        assert got[f"{test}[numpy]"] == "PASSED"  # not a copy on NumPy
        assert got[f"{test}[torch-cpu]"] == "FAILED"
        assert got[f"{test}[array_api_strict]"] == "FAILED"
    for v, label in (
        ("torch-cpu", "PyTorch"),
        ("array_api_strict", "array-api-strict"),
    ):
        text = _failure(result, f"test_host_mean[{v}]")
        assert (
            f"host_mean turned {label} arrays into NumPy arrays 1 time(s) in one "
            f"call on {v}; host_copies=0 allows 0:" in text
        )
        assert (
            f"numpy.asarray at test_user.py:{_line_of('m = np.asarray')} in "
            "host_mean: m = np.asarray(x).mean(axis=0)" in text
        )
        two = _failure(result, f"test_two_copies[{v}]")
        assert "2 time(s) in one call" in two
        place = (
            f"at test_user.py:{_line_of('return b.to_numpy(x).sum() +')} in two_copies"
        )
        assert two.count(place) == 2


SEEN_ON_JAX_CPU = """
import numpy as np
import pytest
from xpkit.testing import lazy_xp_function

def by_asarray(x):
    return np.asarray(x)

def by_dunder(x):
    return x.__array__()

def by_dot(x):
    return np.dot(x, x)

def by_stack(x):
    return np.stack([x, x])

def by_ufunc(x):
    return np.add(x, 1)

FUNCS = [by_asarray, by_dunder, by_dot, by_stack, by_ufunc]
for f in FUNCS:
    lazy_xp_function(f, host_copies=0)

@pytest.mark.parametrize("name", [f.__name__ for f in FUNCS])
def test_copy(xpkit_backend, name):
    globals()[name](xpkit_backend.asarray([1.0, 2.0]))
"""


def test_the_host_copies_seen_on_jax_cpu_are_those_the_docs_list(pytester):
    """The guide said JAX's CPU "is seen through NumPy's own functions":
    np.dot or np.stack of a JAX array copied it unseen. It now lists what is
    counted there (np.asarray and its kin, __array__); torch counts them all."""
    needs("jax", "torch")
    pytester.makepyfile(test_user=SEEN_ON_JAX_CPU)
    result = pytester.runpytest_subprocess(
        "-v", "-p", "no:cacheprovider", "--xpkit-backends=jax-cpu,torch-cpu"
    )
    got = outcomes(result)
    seen = {"by_asarray", "by_dunder"}
    for name in ("by_asarray", "by_dunder", "by_dot", "by_stack", "by_ufunc"):
        assert got[f"test_copy[jax-cpu-{name}]"] == (
            "FAILED" if name in seen else "PASSED"
        ), name
        assert got[f"test_copy[torch-cpu-{name}]"] == "FAILED", name
    guide = (DOCS / "guide" / "testing-devices.md").read_text(encoding="utf-8")
    said = " ".join(guide.split())
    assert "Any other NumPy function given a JAX array (`np.dot(x, x)`" in said


def test_dtype_axis_and_the_meta_device(pytester):
    """xpkit_dtype: float32 everywhere, float64 where held; torch-meta on request."""
    needs("torch", "array_api_strict")
    pytester.makepyfile(
        test_user="""
        import pytest


        def test_ones(xpkit_backend, xp, xpkit_dtype):
            x = xp.ones(3, dtype=xpkit_dtype, device=xpkit_backend.native_device)
            assert x.dtype == xpkit_dtype


        def center(x, xp):
            return x - xp.mean(x, axis=0) + xp.zeros(x.shape[1])


        @pytest.mark.xpkit_shapes_only
        def test_center_shape(xpkit_backend, xp):
            x = xpkit_backend.asarray([[1.0, 2.0], [3.0, 4.0]])
            assert center(x, xp).shape == (2, 2)
        """
    )
    result = pytester.runpytest_subprocess(
        "-v",
        "-p",
        "no:cacheprovider",
        "--xpkit-backends=numpy,torch-cpu,torch-meta,array_api_strict-no_float64",
    )
    assert outcomes(result) == {
        "test_ones[numpy-float32]": "PASSED",
        "test_ones[numpy-float64]": "PASSED",
        "test_ones[torch-cpu-float32]": "PASSED",
        "test_ones[torch-cpu-float64]": "PASSED",
        "test_ones[array_api_strict-no_float64-float32]": "PASSED",
        "test_center_shape[numpy]": "PASSED",
        "test_center_shape[torch-cpu]": "PASSED",
        "test_center_shape[torch-meta]": "FAILED",
        "test_center_shape[array_api_strict-no_float64]": "FAILED",
    }
    meta = _failure(result, "test_center_shape[torch-meta]")
    assert "Tensor on device cpu is not on the expected device meta" in meta


def test_a_variant_id_selects_that_variant_alone():
    """``dask`` is eager Dask alone, as ``torch-cpu`` is torch-cpu alone (#21)."""
    params = available_backend_params()
    ids = {p.id for p in params}

    def chosen(*names: str) -> set[str]:
        return {p.id for p in selected(params, names)}

    for ident in ids:
        assert chosen(ident) == {ident}
    if {"dask", "dask-lazy"} <= ids:
        assert chosen("dask*") == {i for i in ids if i.startswith("dask")}
        assert chosen("dask*") > {"dask"}
    if "torch-cpu" in ids:
        assert chosen("torch") == {i for i in ids if i.startswith("torch-")}
        assert "torch-cpu-compile" in chosen("*-compile")
    if "array_api_strict-device1" in ids:  # (array-api-strict installed)
        assert chosen("array_api_strict*") == {
            "array_api_strict",
            "array_api_strict-strictest",
            "array_api_strict-device1",
            "array_api_strict-no_float64",
        }
    assert chosen("tensorflow") == set()


def test_all_and_names_that_leave_out():
    """``all`` is every variant, ``-<name>`` leaves out what ``<name>`` selects."""
    params = available_backend_params()
    ids = {p.id for p in params}

    def chosen(*names: str) -> set[str]:
        return {p.id for p in selected(params, names)}

    assert chosen("all") == ids
    for ident in ids:
        assert chosen("all", f"-{ident}") == ids - {ident}
        assert chosen(f"-{ident}") == ids - {ident}  # (leaving out starts from all)
        assert chosen(ident, f"-{ident}") == set()
    torch_ids = {p.id for p in params if p.key == "torch"}
    assert chosen("-torch") == ids - torch_ids
    assert chosen("all", "-*-compile") == {i for i in ids if not i.endswith("-compile")}
    # every library may be in play once a name only leaves out, or says all
    assert libraries_named(["-ndonnx"]) is None
    assert libraries_named(["all", "-ndonnx"]) is None
    assert libraries_named(["numpy", "-numpy-x"]) == frozenset({"numpy"})
    assert unmatched(params, ["all", "-numpy", "-tensorflow", "numpy", "cupy-x"]) == [
        "-tensorflow",
        "cupy-x",
    ]


MYLIB = textwrap.dedent(
    """\
    from xpkit.testing import capabilities

    __all__ = ["covered", "forgotten"]


    @capabilities(skip={"dask": "needs the values"})
    def covered(x):
        return x


    @capabilities()
    def forgotten(x):
        return x
    """
)


def test_uncovered_statements_fail_the_session(pytester):
    pytester.makepyfile(mylib=MYLIB)
    tests = """
        from mylib import covered, forgotten
        from xpkit.testing import covers


        @covers(covered)
        def test_covered(xpkit_backend):
            assert covered(1) == 1
        """
    pytester.makepyfile(test_user=tests)
    pytester.syspathinsert()
    args = ("--collect-only", "-q", "-p", "no:cacheprovider", "--xpkit-backends=numpy")
    result = pytester.runpytest_subprocess(*args, "--xpkit-uncovered=mylib")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            (
                "xpkit: 1 @capabilities statement(s) no test covers (mark a test "
                "with @covers(func)):"
            ),
            "  mylib.forgotten",
        ]
    )
    assert "mylib.covered" not in result.stdout.str()

    pytester.makepyfile(
        test_user=tests
        + """

        @covers(forgotten)
        def test_forgotten(xpkit_backend):
            assert forgotten(1) == 1
        """
    )
    result = pytester.runpytest_subprocess(*args, "--xpkit-uncovered=mylib")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["xpkit: every @capabilities statement has a test that covers it"]
    )
    missing = pytester.runpytest_subprocess(*args, "--xpkit-uncovered=nosuchlib")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    assert "--xpkit-uncovered: cannot import 'nosuchlib'" in missing.stderr.str()


def test_the_meta_device_is_a_backend_without_values():
    """``Backend("torch", device="meta")``: shapes and dtypes; values refused."""
    needs("torch")
    import numpy as np

    import xpkit

    b = xpkit.Backend("torch", device="meta")
    assert (b.name, b.device, b.is_gpu) == ("torch-meta", "meta", False)
    x = b.asarray(np.ones((3, 2)))
    assert (tuple(x.shape), str(x.device)) == ((3, 2), "meta")
    assert xpkit.Backend.from_arrays(x) == b
    with pytest.raises(TypeError, match="arr is a meta tensor: it has a shape"):
        b.to_numpy(x)
    # meta is valid, but not offered as a device to run on (issue #31)
    with pytest.raises(ValueError, match="available devices: cpu") as refused:
        xpkit.Backend("torch", device="metal")
    assert "meta" not in str(refused.value).split("available devices:")[1]


def test_variant_names_say_the_device_where_the_name_does_not():
    needs("array_api_strict", "torch")
    strict, torch = ADAPTERS["array_api_strict"], ADAPTERS["torch"]
    assert strict.variant_name("cpu") == "array_api_strict"
    assert strict.variant_name("device1") == "array_api_strict-device1"
    assert torch.variant_name("cpu") == "torch-cpu"
    assert torch.variant_name("meta") == "torch-meta"
    assert ADAPTERS["numpy"].variant_name("cpu") == "numpy"


READ_ONLY = textwrap.dedent(
    """
    import numpy as np
    from array_api_compat import array_namespace

    from xpkit.testing import assert_close


    def center_in_place(x):  # writes into the caller's array
        xp = array_namespace(x)
        x -= xp.mean(x)
        return x


    def center(x):
        xp = array_namespace(x)
        out = xp.zeros(x.shape, dtype=x.dtype)  # its own array: writeable
        out[...] = x - xp.mean(x)
        return out


    def test_center_in_place(xp):
        x = xp.asarray([1.0, 2.0, 3.0])
        assert_close(center_in_place(x), np.asarray([-1.0, 0.0, 1.0]))


    def test_center(xp):
        x = xp.asarray([1.0, 2.0, 3.0])
        assert_close(center(x), np.asarray([-1.0, 0.0, 1.0]))


    def test_the_variant_says_so(xp, xpkit_backend, xpkit_variant):
        made = xpkit_backend.asarray([1.0])
        flag = getattr(getattr(made, "flags", None), "writeable", None)
        if xpkit_variant.read_only:
            assert xpkit_variant.mode == "readonly"
            assert flag is False
        else:
            assert flag is not False
    """
)


def test_the_read_only_variant_catches_a_write_into_an_input(pytester):
    """numpy-readonly: every array xp (and the Backend) makes is read-only, so
    code under test that writes into its input fails there, and only there."""
    pytester.makeini("[pytest]\nfilterwarnings = error\n")
    pytester.makepyfile(test_user=READ_ONLY)
    result = pytester.runpytest_subprocess(
        "-v", "-p", "no:cacheprovider", "--xpkit-backends=numpy*"
    )
    got = outcomes(result)
    assert got == {
        "test_center_in_place[numpy]": "PASSED",
        "test_center_in_place[numpy-readonly]": "FAILED",
        "test_center[numpy]": "PASSED",
        "test_center[numpy-readonly]": "PASSED",
        "test_the_variant_says_so[numpy]": "PASSED",
        "test_the_variant_says_so[numpy-readonly]": "PASSED",
    }
    assert "output array is read-only" in _failure(
        result, "test_center_in_place[numpy-readonly]"
    )
    plain = pytester.runpytest_subprocess(
        "-v", "-p", "no:cacheprovider", "--xpkit-backends=numpy"
    )
    assert sorted(outcomes(plain)) == [
        "test_center[numpy]",
        "test_center_in_place[numpy]",
        "test_the_variant_says_so[numpy]",
    ]


def test_a_library_that_fails_to_load_is_skipped_naming_it(monkeypatch):
    """The skip reason was the library's own words alone (``libcudart.so.12:
    cannot open shared object file``), naming no library."""
    adapter = ADAPTERS["numpy"]

    def broken():
        raise ImportError("libcudart.so.12: cannot open shared object file")

    monkeypatch.setattr(adapter, "devices", broken)
    # (the uncached parameters: the cached ones stay the machine's)
    (param,) = available_backend_params.__wrapped__(frozenset({"numpy"}))
    assert param.skip == (
        "NumPy is installed but fails to load: ImportError: libcudart.so.12: "
        "cannot open shared object file"
    )
