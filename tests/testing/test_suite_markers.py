"""Peer suites' own per-backend markers, read by the plugin as they are written (#30).

array-api-extra marks its tests with ``skip_xp_backend(Backend.X)`` and
``xfail_xp_backend(Backend.X)``, SciPy with ``skip_xp_backends("x")`` and
``xfail_xp_backends(np_only=True, ...)``; their own backend fixtures read
them. A suite that replaces those fixtures with the plugin's keeps its
markers: each test here writes them as those suites do and checks the
outcome on every variant, or calls the rule on variants made by hand
(devices this machine lacks).
"""

from __future__ import annotations

import enum
import textwrap

import pytest
from plugin_runs import needs, outcomes

from xpkit.testing._suite_markers import member_of, suite_marks
from xpkit.testing._variants import BackendParam


class Backend(enum.Enum):
    """array-api-extra's enum of backends, as its suite writes it."""

    ARRAY_API_STRICT = "array_api_strict"
    ARRAY_API_STRICTEST = "array_api_strict:strictest"
    NUMPY = "numpy"
    NUMPY_READONLY = "numpy:readonly"
    CUPY = "cupy"
    TORCH = "torch"
    TORCH_GPU = "torch:gpu"
    DASK = "dask.array"
    SPARSE = "sparse"
    JAX = "jax.numpy"
    JAX_GPU = "jax.numpy:gpu"


# (the variants by hand: a library key, a device, an id, a mode)
NUMPY = BackendParam("numpy", None, "numpy")
READONLY = BackendParam("numpy", None, "numpy-readonly", mode="readonly")
STRICT = BackendParam("array_api_strict", None, "array_api_strict")
STRICTEST = BackendParam(
    "array_api_strict", None, "array_api_strict-strictest", mode="strictest"
)
DEVICE1 = BackendParam("array_api_strict", "device1", "array_api_strict-device1")
TORCH_CPU = BackendParam("torch", "cpu", "torch-cpu")
TORCH_COMPILE = BackendParam("torch", "cpu", "torch-cpu-compile", mode="compile")
TORCH_CUDA = BackendParam("torch", "cuda:0", "torch-cuda")
TORCH_MPS = BackendParam("torch", "mps", "torch-mps")
JAX_CPU = BackendParam("jax", "cpu:0", "jax-cpu")
JAX_JIT = BackendParam("jax", "cpu:0", "jax-cpu-jit", mode="jit")
JAX_CUDA = BackendParam("jax", "cuda:0", "jax-cuda")
DASK = BackendParam("dask", None, "dask")
DASK_LAZY = BackendParam("dask", None, "dask-lazy", mode="lazy")
EVERY = (
    NUMPY,
    READONLY,
    STRICT,
    STRICTEST,
    DEVICE1,
    TORCH_CPU,
    TORCH_COMPILE,
    TORCH_CUDA,
    TORCH_MPS,
    JAX_CPU,
    JAX_JIT,
    JAX_CUDA,
    DASK,
    DASK_LAZY,
)


def _named(decorator: pytest.MarkDecorator) -> set[str]:
    """The ids of the variants of `EVERY` that ``decorator``'s marker skips or xfails."""
    return {p.id for p in EVERY if suite_marks(decorator.mark, p)}


def test_each_member_names_its_variants_and_leaves_its_siblings_theirs():
    """A member without a tag is its library less what a sibling's tag names."""
    named = {member: _named(pytest.mark.skip_xp_backend(member)) for member in Backend}
    assert named[Backend.NUMPY] == {"numpy"}
    assert named[Backend.NUMPY_READONLY] == {"numpy-readonly"}
    assert named[Backend.ARRAY_API_STRICT] == {
        "array_api_strict",
        "array_api_strict-device1",
    }
    assert named[Backend.ARRAY_API_STRICTEST] == {"array_api_strict-strictest"}
    assert named[Backend.TORCH] == {"torch-cpu", "torch-cpu-compile"}
    assert named[Backend.TORCH_GPU] == {"torch-cuda", "torch-mps"}
    assert named[Backend.JAX] == {"jax-cpu", "jax-cpu-jit"}
    assert named[Backend.JAX_GPU] == {"jax-cuda"}
    assert named[Backend.DASK] == {"dask", "dask-lazy"}
    assert named[Backend.SPARSE] == named[Backend.CUPY] == set()  # (none here)

    class Devices(enum.Enum):  # a device's own name and a mode are tags too
        TORCH = "torch"
        TORCH_MPS = "torch:mps"
        JAX = "jax.numpy"
        JAX_JIT = "jax.numpy:jit"

    named = {member: _named(pytest.mark.skip_xp_backend(member)) for member in Devices}
    assert named[Devices.TORCH] == {"torch-cpu", "torch-cpu-compile", "torch-cuda"}
    assert named[Devices.TORCH_MPS] == {"torch-mps"}
    assert named[Devices.JAX] == {"jax-cpu", "jax-cuda"}
    assert named[Devices.JAX_JIT] == {"jax-cpu-jit"}


def test_the_member_of_a_variant_is_the_one_whose_marker_names_it():
    expected = {
        "numpy": Backend.NUMPY,
        "numpy-readonly": Backend.NUMPY_READONLY,
        "array_api_strict": Backend.ARRAY_API_STRICT,
        "array_api_strict-strictest": Backend.ARRAY_API_STRICTEST,
        "array_api_strict-device1": Backend.ARRAY_API_STRICT,
        "torch-cpu": Backend.TORCH,
        "torch-cpu-compile": Backend.TORCH,
        "torch-cuda": Backend.TORCH_GPU,
        "torch-mps": Backend.TORCH_GPU,
        "jax-cpu": Backend.JAX,
        "jax-cpu-jit": Backend.JAX,
        "jax-cuda": Backend.JAX_GPU,
        "dask": Backend.DASK,
        "dask-lazy": Backend.DASK,
    }
    assert {p.id: member_of(Backend, p) for p in EVERY} == expected

    class NoGpu(enum.Enum):
        NUMPY = "numpy"

    assert member_of(NoGpu, TORCH_CPU) is None
    with pytest.raises(TypeError, match=r"members must be an Enum class, got 'numpy'"):
        member_of("numpy", NUMPY)  # type: ignore[arg-type]


def test_scipys_marker_names_modules_and_kinds_of_library():
    mark = pytest.mark
    every = {p.id for p in EVERY}
    assert _named(mark.skip_xp_backends("jax.numpy")) == {
        "jax-cpu",
        "jax-cpu-jit",
        "jax-cuda",
    }
    assert _named(mark.skip_xp_backends("numpy", reason="why")) == {
        "numpy",
        "numpy-readonly",
    }
    assert _named(mark.skip_xp_backends("numpy", True, reason="why")) == {
        "numpy",
        "numpy-readonly",
    }
    assert _named(mark.skip_xp_backends("numpy", False, reason="why")) == set()
    not_numpy = every - {"numpy", "numpy-readonly"}
    assert _named(mark.skip_xp_backends(np_only=True)) == not_numpy
    assert _named(
        mark.skip_xp_backends(
            np_only=True, exceptions=["array_api_strict", "dask.array"]
        )
    ) == not_numpy - {
        "array_api_strict",
        "array_api_strict-strictest",
        "array_api_strict-device1",
        "dask",
        "dask-lazy",
    }
    assert _named(mark.skip_xp_backends(cpu_only=True)) == {
        "torch-cuda",
        "torch-mps",
        "jax-cuda",
    }
    assert _named(mark.skip_xp_backends(cpu_only=True, exceptions=["torch"])) == {
        "jax-cuda"
    }
    assert _named(mark.skip_xp_backends(eager_only=True)) == {
        "jax-cpu",
        "jax-cpu-jit",
        "jax-cuda",
        "dask",
        "dask-lazy",
    }
    assert _named(mark.skip_xp_backends(reason="nothing named")) == set()


def test_what_each_marker_makes_of_a_named_variant():
    skip = suite_marks(
        pytest.mark.skip_xp_backend(Backend.NUMPY, reason="r").mark, NUMPY
    )
    assert [(m.name, m.kwargs) for m in skip] == [("skip", {"reason": "numpy: r"})]
    plain = suite_marks(pytest.mark.xfail_xp_backend(Backend.DASK).mark, DASK_LAZY)
    assert [(m.name, m.kwargs) for m in plain] == [
        ("xfail", {"reason": "dask-lazy: Backend.DASK"})
    ]
    strict = pytest.mark.xfail_xp_backend(Backend.DASK, reason="r", strict=False)
    assert [m.kwargs for m in suite_marks(strict.mark, DASK)] == [
        {"reason": "dask: r", "strict": False}
    ]
    scipy = suite_marks(pytest.mark.xfail_xp_backends("dask.array").mark, DASK)
    assert [(m.name, m.kwargs) for m in scipy] == [
        ("xfail", {"reason": "dask: not run with dask.array", "run": False})
    ]
    assert suite_marks(pytest.mark.skip_xp_backend(Backend.NUMPY).mark, STRICT) == []


@pytest.mark.parametrize(
    ("decorator", "says"),
    [
        (pytest.mark.skip_xp_backend(), r"skip_xp_backend takes one library, got \(\)"),
        (
            pytest.mark.skip_xp_backend(Backend.NUMPY, Backend.DASK),
            r"skip_xp_backend takes one library",
        ),
        (
            pytest.mark.skip_xp_backend(Backend.NUMPY, strict=True),
            r"skip_xp_backend takes \['reason'\] by keyword, got \['strict'\]",
        ),
        (
            pytest.mark.xfail_xp_backend(Backend.NUMPY, strict="yes"),
            r"xfail_xp_backend takes strict=True, False or None, got 'yes'",
        ),
        (
            pytest.mark.skip_xp_backend(3),
            r"skip_xp_backend takes an enum member valued '<module>\[:<tag>\]', got 3",
        ),
        (  # (as array-api-extra's own reader, which takes its enum alone)
            pytest.mark.skip_xp_backend("numpy"),
            (
                r"skip_xp_backend takes an enum member valued '<module>\[:<tag>\]', "
                r"got 'numpy'"
            ),
        ),
        (  # (SciPy's reader fails on it too)
            pytest.mark.skip_xp_backends("numpy", True),
            r"skip_xp_backends takes a reason with its condition, got \('numpy', True\)",
        ),
        (
            pytest.mark.skip_xp_backends("nump"),
            r"skip_xp_backends names 'nump', a module of no library xpkit knows",
        ),
        (
            pytest.mark.xfail_xp_backends("numpy", "torch"),
            (
                r"xfail_xp_backends takes one backend \(and a condition\), got "
                r"\('numpy', 'torch'\)"
            ),
        ),
        (
            pytest.mark.skip_xp_backends("numpy", np_only=True),
            r"skip_xp_backends takes np_only= or a backend, not both",
        ),
        (
            pytest.mark.skip_xp_backends(np_only=True, exceptions=["nump"]),
            r"skip_xp_backends exceptions names 'nump', a module of no library",
        ),
        (
            pytest.mark.skip_xp_backends(gpu_only=True),
            r"skip_xp_backends takes \[.*\] by keyword, got \['gpu_only'\]",
        ),
    ],
)
def test_a_marker_written_wrong_is_refused_naming_it(decorator, says):
    with pytest.raises(pytest.UsageError, match=says):
        suite_marks(decorator.mark, NUMPY)


BACKENDS = """
import enum


class Backend(enum.Enum):
    ARRAY_API_STRICT = "array_api_strict"
    ARRAY_API_STRICTEST = "array_api_strict:strictest"
    NUMPY = "numpy"
    NUMPY_READONLY = "numpy:readonly"
    DASK = "dask.array"
    SPARSE = "sparse"
"""

# The conftest of a suite moved onto the plugin: aliases only.
CONFTEST = """
import pytest
from backends import Backend


@pytest.fixture
def library(xpkit_variant):
    return xpkit_variant.member_of(Backend)
"""

SUITE = """
import pytest
from backends import Backend


@pytest.mark.skip_xp_backend(Backend.ARRAY_API_STRICT, reason="not strictest")
@pytest.mark.skip_xp_backend(Backend.SPARSE, reason="not run here")
def test_extra_skip(xp, library):
    assert library is not Backend.ARRAY_API_STRICT


@pytest.mark.xfail_xp_backend(Backend.NUMPY_READONLY, reason="writes into its input")
def test_extra_xfail(xp):
    x = xp.asarray([1.0, 2.0])
    x[0] = 5.0
    assert float(x[0]) == 5.0


@pytest.mark.parametrize(
    "n",
    [
        pytest.param(1, id="one"),
        pytest.param(
            2, id="two", marks=pytest.mark.skip_xp_backend(Backend.NUMPY, reason="p")
        ),
    ],
)
def test_extra_param(xp, n):
    assert n in (1, 2)


def test_library_alias(library, xpkit_variant):
    assert library.name == {
        "numpy": "NUMPY",
        "numpy-readonly": "NUMPY_READONLY",
        "array_api_strict": "ARRAY_API_STRICT",
        "array_api_strict-strictest": "ARRAY_API_STRICTEST",
        "array_api_strict-device1": "ARRAY_API_STRICT",
        "array_api_strict-no_float64": "ARRAY_API_STRICT",
    }[xpkit_variant.id]


@pytest.mark.skip_xp_backends("array_api_strict", reason="SciPy's way")
def test_scipy_skip(xp):
    pass


@pytest.mark.skip_xp_backends(np_only=True)
def test_scipy_np_only(xp):
    pass


@pytest.mark.skip_xp_backends(np_only=True, exceptions=["array_api_strict"])
def test_scipy_np_only_but(xp):
    pass


@pytest.mark.xfail_xp_backends("numpy", reason="SciPy does not run it")
def test_scipy_xfail(xp):
    pass


# A static xfail of the test's own takes precedence as with the suites' own
# fixtures, which act as the test is set up: array-api-extra's marker is
# added then (pytest keeps the xfail it found at setup), SciPy's xfails then.
@pytest.mark.xfail(True, reason="its own, not strict", strict=False)
@pytest.mark.xfail_xp_backend(Backend.NUMPY, reason="the suite's, strict", strict=True)
def test_extra_after_own(xp):
    pass


@pytest.mark.xfail(True, reason="its own, strict", strict=True)
@pytest.mark.xfail_xp_backends("numpy", reason="SciPy's, at setup")
def test_scipy_after_own(xp, xpkit_variant):
    assert xpkit_variant.key == "numpy"
"""


def test_a_suite_with_its_own_markers_and_aliases_only(pytester):
    """array-api-extra's and SciPy's markers, as written, on every variant of two libraries."""
    needs("array_api_strict")
    pytester.makeini("[pytest]\nfilterwarnings = error\nxfail_strict = true\n")
    pytester.makepyfile(backends=BACKENDS, conftest=CONFTEST, test_suite=SUITE)
    result = pytester.runpytest_subprocess(
        "-v",
        "-rx",
        "-p",
        "no:cacheprovider",
        "--strict-markers",
        "--xpkit-backends=numpy*,array_api_strict*",
    )
    got = outcomes(result)
    variants = (
        "numpy",
        "numpy-readonly",
        "array_api_strict",
        "array_api_strict-strictest",
        "array_api_strict-device1",
        "array_api_strict-no_float64",
    )
    assert {key.split("[", 1)[1][:-1] for key in got if "library" in key} == set(
        variants
    )
    for v in variants:
        strict = v.startswith("array_api_strict")
        # (Backend.ARRAY_API_STRICT: the plain variant and the plugin's
        # emulated devices, not -strictest, which its sibling names)
        plain_strict = strict and v != "array_api_strict-strictest"
        assert got[f"test_extra_skip[{v}]"] == (
            "SKIPPED" if plain_strict else "PASSED"
        ), v
        assert got[f"test_extra_xfail[{v}]"] == (
            "XFAIL" if v == "numpy-readonly" else "PASSED"
        ), v
        assert got[f"test_extra_param[{v}-one]"] == "PASSED", v
        assert got[f"test_extra_param[{v}-two]"] == (
            "SKIPPED" if v == "numpy" else "PASSED"
        ), v
        assert got[f"test_library_alias[{v}]"] == "PASSED", v
        assert got[f"test_scipy_skip[{v}]"] == ("SKIPPED" if strict else "PASSED"), v
        assert got[f"test_scipy_np_only[{v}]"] == ("SKIPPED" if strict else "PASSED"), v
        assert got[f"test_scipy_np_only_but[{v}]"] == "PASSED", v
        assert got[f"test_scipy_xfail[{v}]"] == ("PASSED" if strict else "XFAIL"), v
    text = result.stdout.str()
    # (SciPy's xfail is not run: a passing body is XFAIL, not XPASS)
    assert "XFAIL at setup of test_suite.py::test_scipy_xfail[numpy]" in text
    for v in variants:
        assert f"test_suite.py::test_extra_after_own[{v}] XPASS" in text, v
        assert got[f"test_scipy_after_own[{v}]"] == "XFAIL", v
    assert "test_scipy_after_own[numpy] - numpy: SciPy's, at setup" in text
    assert result.ret == 0


def test_a_variant_no_member_names_is_skipped_saying_so(pytester):
    pytester.makepyfile(
        backends="""
        import enum

        class Backend(enum.Enum):
            NUMPY = "numpy"
        """,
        conftest=CONFTEST,
        test_alias=textwrap.dedent(
            """
            def test_alias(library):
                assert library.name == "NUMPY"
            """
        ),
    )
    result = pytester.runpytest_subprocess(
        "-v", "-rs", "-p", "no:cacheprovider", "--xpkit-backends=numpy*"
    )
    got = outcomes(result)
    assert got == {
        "test_alias[numpy]": "PASSED",
        "test_alias[numpy-readonly]": "PASSED",
    }
    needs("array_api_strict")
    result = pytester.runpytest_subprocess(
        "-v", "-rs", "-p", "no:cacheprovider", "--xpkit-backends=array_api_strict"
    )
    assert outcomes(result) == {"test_alias[array_api_strict]": "SKIPPED"}
    assert "array_api_strict: no member of Backend names it" in result.stdout.str()
