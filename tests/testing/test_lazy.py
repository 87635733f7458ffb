"""The plugin's lazy variants, as an outside user's test file meets them.

Each test writes a user's test module with pytester and runs it in a fresh
process: functions declared with `xpkit.testing.lazy_xp_function` run under
``jax.jit`` (``jax-cpu-jit``), with Dask computes counted (``dask-lazy``) or
under ``torch.compile`` (``torch-cpu-compile``).
"""

from __future__ import annotations

import textwrap

import pytest
from plugin_runs import needs, outcomes

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
