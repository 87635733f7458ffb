"""The plugin's lazy variants, as an outside user's test file meets them.

Each test writes a user's test module with pytester and runs it in a fresh
process: functions declared with `xpkit.testing.lazy_xp_function` run under
``jax.jit`` (``jax-cpu-jit``), with Dask computes counted (``dask-lazy``) or
under ``torch.compile`` (``torch-cpu-compile``).
"""

from __future__ import annotations

import re
import sys
import textwrap
import types

import numpy as np
import pytest
from plugin_runs import needs, outcomes

from xpkit.testing import lazy_xp_function
from xpkit.testing._lazy import (
    has_lazy_functions,
    method_of,
    replaced_functions,
    tagged,
)

pytest.importorskip(
    "array_api_extra", reason="needs array-api-extra: pip install 'xpkit[test]'"
)

BRANCHY = textwrap.dedent(
    """
    from xpkit.testing import lazy_xp_function


    def clip_negative(x, xp):
        if xp.any(x < 0):  # a Python `if` on an array value
            x = xp.where(x < 0, xp.zeros_like(x), x)
        return x


    lazy_xp_function(clip_negative)


    def test_clip(xpkit_backend, xp):
        x = xpkit_backend.asarray([-1.0, 2.0])
        got = xpkit_backend.to_numpy(clip_negative(x, xp))
        assert got.tolist() == [0.0, 2.0]
    """
)

COMPUTES = textwrap.dedent(
    """
    from xpkit.testing import lazy_xp_function


    def scale_by_mean(x):
        return x / x.mean().compute()


    lazy_xp_function(scale_by_mean)


    def test_scale(xpkit_backend):
        x = xpkit_backend.asarray([1.0, 2.0, 3.0])
        got = xpkit_backend.to_numpy(scale_by_mean(x))
        assert got.tolist() == [0.5, 1.0, 1.5]
    """
)

PLAIN = textwrap.dedent(
    """
    def test_plain(xpkit_backend):
        assert xpkit_backend.to_numpy(xpkit_backend.asarray([1.0])).tolist() == [1.0]
    """
)


@pytest.mark.parametrize(
    ("library", "backends", "message"),
    [
        ("jax", ["numpy", "jax-cpu", "jax-cpu-jit"], "*TracerBoolConversionError*"),
        ("torch", ["torch-cpu", "torch-cpu-compile"], "*data-dependent*"),
    ],
    ids=["jit", "compile"],
)
def test_an_if_on_an_array_value_fails_jitted_or_compiled(
    pytester, library, backends, message
):
    """Eager variants pass; the last (jitted or compiled) fails, saying why."""
    needs(library)
    pytester.makepyfile(test_user=BRANCHY)
    result = pytester.runpytest_subprocess(
        "-v", "-p", "no:cacheprovider", f"--xpkit-backends={','.join(backends)}"
    )
    expected = {f"test_clip[{b}]": "PASSED" for b in backends[:-1]}
    expected[f"test_clip[{backends[-1]}]"] = "FAILED"
    assert outcomes(result) == expected
    result.stdout.fnmatch_lines([message])


def test_a_compute_fails_on_dask_lazy_with_the_count(pytester):
    needs("dask")
    pytester.makepyfile(test_user=COMPUTES)
    result = pytester.runpytest_subprocess(
        "-v", "-p", "no:cacheprovider", "--xpkit-backends=dask,dask-lazy"
    )
    assert outcomes(result) == {
        "test_scale[dask]": "PASSED",
        "test_scale[dask-lazy]": "FAILED",
    }
    # The refusal names xpkit's keyword, not array-api-extra's (issue #21).
    result.stdout.fnmatch_lines(
        [
            (
                "*scale_by_mean computed its Dask graph (dask.compute() or persist()) "
                "more than the 0 time(s) one call may; where that is intended, declare "
                "it with lazy_xp_function(scale_by_mean, computes=1)*"
            )
        ]
    )
    assert "allow_dask_compute" not in result.stdout.str()


def test_modules_without_lazy_functions_get_no_lazy_variants(pytester):
    needs("dask")
    pytester.makepyfile(test_user=PLAIN)
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider")
    ids = set(outcomes(result))
    assert "test_plain[dask]" in ids
    assert not any(i.endswith(("-jit]", "-lazy]", "-compile]")) for i in ids)


#: A module declared with array-api-extra's own `lazy_xp_function`, as a
#: suite moved onto the plugin keeps it: a function, a method, its keywords.
THEIRS = textwrap.dedent(
    """
    import pytest
    from array_api_extra.testing import lazy_xp_function


    def clip_negative(x, xp):
        if xp.any(x < 0):  # a Python `if` on an array value
            x = xp.where(x < 0, xp.zeros_like(x), x)
        return x


    def scale_by_mean(x):
        return x / x.mean().compute()


    class Ops:
        @staticmethod
        def clip(x, xp):  # (the same `if`)
            if xp.any(x < 0):
                x = xp.where(x < 0, xp.zeros_like(x), x)
            return x

        @staticmethod
        def clip_eagerly(x, xp):
            if xp.any(x < 0):
                x = xp.where(x < 0, xp.zeros_like(x), x)
            return x


    lazy_xp_function(clip_negative)
    lazy_xp_function(scale_by_mean)
    lazy_xp_function((Ops, "clip"))
    lazy_xp_function((Ops, "clip_eagerly"), jax_jit=False)


    @pytest.mark.xpkit_only(["jax*"], reason="jit")
    def test_clip(xpkit_backend, xp):
        x = xpkit_backend.asarray([-1.0, 2.0])
        assert xpkit_backend.to_numpy(clip_negative(x, xp)).tolist() == [0.0, 2.0]


    @pytest.mark.xpkit_only(["jax*"], reason="jit")
    def test_method(xpkit_backend, xp):
        x = xpkit_backend.asarray([-1.0, 2.0])
        assert xpkit_backend.to_numpy(Ops.clip(x, xp)).tolist() == [0.0, 2.0]


    @pytest.mark.xpkit_only(["jax*"], reason="jit")
    def test_method_not_jitted(xpkit_backend, xp):
        x = xpkit_backend.asarray([-1.0, 2.0])
        assert xpkit_backend.to_numpy(Ops.clip_eagerly(x, xp)).tolist() == [0.0, 2.0]


    @pytest.mark.xpkit_only(["dask*"], reason="computes")
    def test_scale(xpkit_backend):
        x = xpkit_backend.asarray([1.0, 2.0, 3.0])
        assert xpkit_backend.to_numpy(scale_by_mean(x)).tolist() == [0.5, 1.0, 1.5]


    def test_fixtures(jnp, da):
        # As array-api-extra's own `jnp` and `da` fixtures: the module's
        # declared functions run jitted, and with their computes counted.
        with pytest.raises(Exception, match="TracerBoolConversionError|concret"):
            clip_negative(jnp.asarray([-1.0, 2.0]), jnp)
        with pytest.raises(AssertionError, match="allow_dask_compute"):
            scale_by_mean(da.asarray([1.0, 2.0]))
    """
)


def test_a_suite_declared_with_array_api_extra_gets_the_lazy_variants(pytester):
    """Its declarations were ignored: no ``-jit``/``-lazy`` variant was made,
    and the functions ran eagerly (58 cells of its own suite differed)."""
    needs("jax")
    needs("dask")
    pytester.makepyfile(test_user=THEIRS)
    pytester.makeini("[pytest]\nxpkit_x64 = true\n")
    result = pytester.runpytest_subprocess(
        "-v", "-p", "no:cacheprovider", "--xpkit-backends=jax*,dask*"
    )
    got = outcomes(result)
    assert got["test_clip[jax-cpu]"] == "PASSED"
    assert got["test_clip[jax-cpu-jit]"] == "FAILED"  # jitted: the `if` fails
    assert got["test_method[jax-cpu-jit]"] == "FAILED"  # a method, jitted
    assert got["test_method_not_jitted[jax-cpu-jit]"] == "PASSED"  # jax_jit=False
    assert got["test_scale[dask]"] == "PASSED"
    assert got["test_scale[dask-lazy]"] == "FAILED"  # a compute, none allowed
    # Declared with array-api-extra's keyword, refused in its own words.
    result.stdout.fnmatch_lines(["*allow_dask_compute*"])
    assert got["test_fixtures"] == "PASSED"


def test_lazy_in_place_runs_jax_jitted_and_dask_lazily_alone(pytester):
    """``xpkit_lazy_in_place``: as array-api-extra's harness means "jax" and
    "dask" in a module that declares functions (its eager twins failed 10
    of its tests written for that meaning); modules that declare nothing,
    and torch's compile variant, are as before."""
    needs("jax")
    needs("dask")
    needs("torch")
    pytester.makepyfile(test_theirs=THEIRS, test_plain=PLAIN)
    pytester.makeini("[pytest]\nxpkit_x64 = true\nxpkit_lazy_in_place = true\n")
    result = pytester.runpytest_subprocess(
        "-v", "-p", "no:cacheprovider", "--xpkit-backends=jax*,dask*,torch*"
    )
    ids = set(outcomes(result))
    assert {"test_clip[jax-cpu-jit]", "test_scale[dask-lazy]"} <= ids
    assert not {"test_clip[jax-cpu]", "test_scale[dask]"} & ids
    assert {"test_plain[jax-cpu]", "test_plain[dask]"} <= ids
    # (torch's compile variant adds to the eager one: both stay)
    assert {"test_clip[torch-cpu]", "test_clip[torch-cpu-compile]"} <= ids


def test_narrowing_is_reported_once_in_the_summary(pytester):
    """JAX without x64 narrows float64: a summary line, no warning in the test.

    The line names the dtypes tests asked for and got narrowed, and only
    those (issue #23): nothing for int64, which no test asked for, nor for
    torch-cpu, which holds every dtype asked for.
    """
    needs("jax", "torch")
    pytester.makeini("[pytest]\nfilterwarnings = error\n")
    pytester.makepyfile(
        test_user="""
        def test_float64(xpkit_backend):
            x = xpkit_backend.asarray([1.0, 2.0], dtype="float64")
            assert xpkit_backend.to_numpy(x).tolist() == [1.0, 2.0]
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--xpkit-backends=jax-cpu,torch-cpu", "-rA"
    )
    result.assert_outcomes(passed=2)
    lines = [ln for ln in result.stdout.lines if ln.startswith("xpkit: ")]
    assert lines == [
        (
            "xpkit: jax-cpu has no float64: tests that requested it got float64 -> "
            "float32"
        )
    ]


A_SUITE = textwrap.dedent(
    """
    import pytest
    from xpkit.testing import lazy_xp_function


    def total(x, axis, k=1):
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        return x.sum(axis) * k


    lazy_xp_function(total)


    @pytest.mark.parametrize("rank", range(1, 11))
    def test_total(xpkit_backend, xp, rank):
        x = xp.ones((2,) * rank)
        assert float(total(x, tuple(range(rank)))) == 2.0**rank


    @pytest.mark.parametrize("k", [-1, -2])
    def test_a_bad_k_raises_its_own_error(xpkit_backend, xp, k):
        with pytest.raises(ValueError, match=f"k must be >= 0, got {k}"):
            total(xp.ones(2), 0, k=k)
    """
)


def test_the_compile_variant_across_a_suite(pytester):
    """Ten tests of one function with new shapes each; its own errors reach raises.

    Dynamo's recompile limit (8) counts on the function's code object,
    across tests: the ninth and tenth failed ``FailOnRecompileLimitHit``.
    A function's own ValueError came as Dynamo's "Observed exception".
    """
    needs("torch")
    pytester.makeini("[pytest]\nfilterwarnings = error\n")
    pytester.makepyfile(test_user=A_SUITE)
    result = pytester.runpytest_subprocess(
        "-v", "-p", "no:cacheprovider", "--xpkit-backends=torch-cpu-compile"
    )
    expected = {f"test_total[torch-cpu-compile-{r}]": "PASSED" for r in range(1, 11)}
    expected |= {
        f"test_a_bad_k_raises_its_own_error[torch-cpu-compile-{k}]": "PASSED"
        for k in (-1, -2)
    }
    assert outcomes(result) == expected


METHODS = textwrap.dedent(
    """
    from xpkit.testing import lazy_xp_function


    def _clip(x, xp):
        if xp.any(x < 0):  # a Python `if` on an array value
            x = xp.where(x < 0, xp.zeros_like(x), x)
        return x


    class Clipper:
        def clip(self, x, xp):
            return _clip(x, xp)

        @staticmethod
        def static_clip(x, xp):
            return _clip(x, xp)

        @classmethod
        def class_clip(cls, x, xp):
            return _clip(x, xp)


    for name in ("clip", "static_clip", "class_clip"):
        lazy_xp_function((Clipper, name))


    def test_method(xpkit_backend, xp):
        x = xpkit_backend.asarray([-1.0, 2.0])
        assert xpkit_backend.to_numpy(Clipper().clip(x, xp)).tolist() == [0.0, 2.0]


    def test_static(xpkit_backend, xp):
        x = xpkit_backend.asarray([-1.0, 2.0])
        assert xpkit_backend.to_numpy(Clipper.static_clip(x, xp)).tolist() == [0, 2]


    def test_class(xpkit_backend, xp):
        x = xpkit_backend.asarray([-1.0, 2.0])
        assert xpkit_backend.to_numpy(Clipper.class_clip(x, xp)).tolist() == [0, 2]
    """
)


def test_declared_methods_run_jitted_lazily_and_compiled(pytester):
    """``(cls, "name")``: a method, a static and a class method, in every mode."""
    needs("torch", "jax", "dask")
    pytester.makeini("[pytest]\nfilterwarnings = error\n")
    pytester.makepyfile(test_user=METHODS)
    eager = ["torch-cpu", "jax-cpu", "dask"]
    lazy = ["torch-cpu-compile", "jax-cpu-jit", "dask-lazy"]
    result = pytester.runpytest_subprocess(
        "-v", "-p", "no:cacheprovider", f"--xpkit-backends={','.join(eager + lazy)}"
    )
    assert outcomes(result) == {
        f"test_{kind}[{v}]": "PASSED" if v in eager else "FAILED"
        for kind in ("method", "static", "class")
        for v in eager + lazy
    }


def test_a_method_is_declared_on_its_class_and_a_ufunc_is_held():
    """An inherited method is cloned into the class named, its parent untouched;
    a callable with no weak reference (a NumPy ufunc) is declared too."""
    np = pytest.importorskip("numpy")

    class Parent:
        def scale(self, x):
            return x * 2

    class Child(Parent):
        pass

    module = types.ModuleType("user_module")
    module.Child = Child
    module.add = np.add
    assert not has_lazy_functions(module)
    lazy_xp_function((Child, "scale"), host_copies=0)
    lazy_xp_function(np.add, jit=False)
    assert "scale" in vars(Child)
    assert Child.scale is not Parent.scale
    declared = dict(tagged(module))
    assert set(declared) == {(Child, "scale"), np.add}
    assert declared[(Child, "scale")].host_copies == 0
    assert declared[np.add].jit is False

    def doubled(func, tags):
        return lambda *args: 2 * func(*args)

    with replaced_functions(module, doubled):
        assert Child().scale(3) == 12
        assert Parent().scale(3) == 6
        assert module.add(1, 2) == 6
    assert Child().scale(3) == 6
    assert module.add is np.add


def test_a_method_given_as_class_dot_name_is_declared_on_its_class(monkeypatch):
    """``lazy_xp_function(Thing.double)`` tagged the function alone, which no
    test module holds: no lazy variant ran it (`covers` declares this way)."""
    lib = types.ModuleType("user_lib_of_methods")
    source = """
class Thing:
    def double(self, x):
        return x * 2

    @staticmethod
    def triple(x):
        return x * 3

    @classmethod
    def make(cls):
        return cls()

def free(x):
    return x
"""
    exec(compile(source, "user_lib_of_methods.py", "exec"), vars(lib))  # noqa: S102
    monkeypatch.setitem(sys.modules, lib.__name__, lib)
    thing = lib.Thing
    assert method_of(thing.double) == (thing, "double")
    assert method_of(thing.triple) == (thing, "triple")
    assert method_of(thing.make) == (thing, "make")
    assert method_of(lib.free) is None
    assert method_of(np.add) is None

    class Local:  # (in a function: no path from its module)
        def double(self, x):
            return x * 2

    assert method_of(Local.double) is None
    user = types.ModuleType("user_module")
    user.Thing = thing
    for method in (thing.double, thing.triple, thing.make):
        lazy_xp_function(method, jit=False)
    assert set(dict(tagged(user))) == {
        (thing, "double"),
        (thing, "triple"),
        (thing, "make"),
    }


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ((int, "no_such_method"), "int.no_such_method, which does not exist"),
        (
            (1, "real"),
            "func must be callable or (class, 'method name'), got (1, 'real')",
        ),
        ((int, "real"), "int.real, which is not a method"),
        ((int,), "func must be callable or (class, 'method name'), got"),
    ],
)
def test_a_method_declaration_that_names_no_method_is_refused(declared, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        lazy_xp_function(declared)


@pytest.mark.parametrize(
    ("keywords", "error"),
    [
        ({"computes": -1}, ValueError),
        ({"host_copies": -1}, ValueError),
        ({"computes": "1"}, TypeError),
    ],
)
def test_a_negative_count_is_a_value_error_a_wrong_type_a_type_error(keywords, error):
    """computes=-1 was a TypeError while host_copies=-1 was a ValueError."""
    from xpkit.testing import lazy_xp_function

    def func(x):
        return x

    name = next(iter(keywords))
    with pytest.raises(error, match=f"{name} must be"):
        lazy_xp_function(func, **keywords)


def test_a_bad_lazy_in_place_value_is_a_usage_error_at_the_start(pytester):
    """It passed silently, then failed at collection of a lazy module only."""
    pytester.makeini("[pytest]\nxpkit_lazy_in_place = xyz\n")
    pytester.makepyfile(test_user="def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*xpkit_lazy_in_place: invalid truth value 'xyz'*"])


BY_ATTRIBUTE = textwrap.dedent(
    """
    import mylib_branchy
    from xpkit.testing import lazy_xp_function

    lazy_xp_function(mylib_branchy.clip_negative)


    def test_clip(xpkit_backend, xp):
        x = xpkit_backend.asarray([-1.0, 2.0])
        got = xpkit_backend.to_numpy(mylib_branchy.clip_negative(x, xp))
        assert got.tolist() == [0.0, 2.0]
    """
)


@pytest.mark.parametrize("listed", [False, True], ids=["by attribute", "listed"])
def test_a_declaration_the_test_module_does_not_hold_is_told(pytester, listed):
    """lazy_xp_function(mylib.f) in a module that calls mylib.f: its lazy
    variants were dropped without a word, and -k '*-jit' skipped the test as
    'declares no lazy functions'."""
    needs("jax")
    pytester.makepyfile(mylib_branchy=BRANCHY.split("lazy_xp_function(")[0])
    source = BY_ATTRIBUTE + ("lazy_xp_modules = [mylib_branchy]\n" if listed else "")
    pytester.makepyfile(test_user=source)
    result = pytester.runpytest_subprocess(
        "-v", "-p", "no:cacheprovider", "--xpkit-backends=numpy,jax-cpu-jit"
    )
    told = (
        "*PytestConfigWarning: lazy_xp_function(mylib_branchy.clip_negative) in "
        "test_user: the test module does not hold it by a name, so its lazy "
        "variants would run it eagerly; import it by name*"
    )
    if listed:  # (the declaration is seen: the jitted variant runs and fails)
        assert outcomes(result) == {
            "test_clip[numpy]": "PASSED",
            "test_clip[jax-cpu-jit]": "FAILED",
        }
        result.stdout.no_fnmatch_line(told)
    else:
        assert outcomes(result) == {"test_clip[numpy]": "PASSED"}
        result.stdout.fnmatch_lines([told])
