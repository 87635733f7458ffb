"""A backend's real arrays beside shape-only arrays that impersonate it.

`twin_mismatches` runs each case twice: on real arrays of an ``xpkit_backend``
and, inside a `Trace` of that backend's `Profile` (its adapter's
``shape_profile``), on shape-only arrays of the same shapes and dtypes. A
case the library itself refuses (it raises) is not compared: the
shape-only arrays may answer it or not. Where both answer, the shapes and
the dtypes (by the standard's names) must be equal; anything else (a
refusal of the shape-only array, another result) is a mismatch.
"""

from __future__ import annotations

import math
import re
import tracemalloc
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from xpkit._adapters._registry import get_adapter
from xpkit._adapters._shapes._array import NAMESPACE, ShapeArray, given
from xpkit._adapters._trace import CannotFollow, Profile, Trace, tracing
from xpkit._dtypes import dtype_name

#: One input: its shape and the standard's name of its dtype.
Spec = tuple[tuple[int, ...], str]
#: ``(label, inputs, fn)``: ``fn(xp, *arrays)``.
Case = tuple[str, Sequence[Spec], Callable[..., Any]]

#: Every dtype of the standard, and bfloat16.
ALL_DTYPES = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
)

#: Dtypes of the pairwise promotion tables (every kind and width that differ).
PAIRED = (
    "bool",
    "int8",
    "int32",
    "int64",
    "uint8",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
)
#: Pairs within a kind and their neighbours (the tables that are not pairwise).
SOME_PAIRS = [
    ("int8", "int8"),
    ("int8", "int64"),
    ("uint8", "int16"),
    ("int32", "float32"),
    ("float32", "float64"),
    ("float16", "float32"),
    ("bool", "bool"),
    ("float32", "complex64"),
    ("bool", "float32"),
]


#: A Python scalar of each kind.
SCALARS = (True, 3, 1.5, 2j)

#: Cases where a library's answer is not modelled: ``{library: {label pattern: why}}``.
NOT_MODELLED = {
    "ndonnx": {
        r"^equal\(\w+, 2j\)$": (
            "ndonnx compares an array with a complex scalar as Python objects: "
            "one 0-d False, whatever the array's shape"
        ),
        r"^tensordot\(axes=2\)$": (
            "ndonnx contracts axes of different lengths, (3, 4) with (4, 3), "
            "where the others raise"
        ),
        r"\bnp\.\w+": (
            "ndonnx's way with NumPy scalars is not modelled: the trace refuses "
            "them, and measures (DtypeRules.numpy_scalars)"
        ),
    },
}

_PROFILES: dict[tuple[str, str], Profile] = {}


def not_modelled(library: str, label: str) -> str | None:
    """Why ``label``'s case is not compared on ``library`` (None: it is)."""
    for pattern, why in NOT_MODELLED.get(library, {}).items():
        if re.search(pattern, label):
            return why
    return None


def profile_of(backend: Any) -> Profile:
    """The `Profile` shape-only arrays impersonating ``backend`` take."""
    key = (backend.library, backend.device)
    if key not in _PROFILES:
        profile = get_adapter(backend.library).shape_profile(backend.device)
        if profile is None:
            pytest.skip(f"{backend.name} has no shape profile")
        _PROFILES[key] = profile
    return _PROFILES[key]


def values(shape: tuple[int, ...], name: str) -> np.ndarray:
    """Harmless values: ones (0.5 for floats), a positive definite matrix when square."""
    host = "float32" if name == "bfloat16" else name
    if name == "bool" or name.startswith(("int", "uint")):
        return np.ones(shape, dtype=host)
    out = np.full(shape, 0.5, dtype=host)
    if len(shape) >= 2 and shape[-1] == shape[-2]:
        out = out * 0.1 + np.eye(shape[-1], dtype=host) * 2
    return out


def real_inputs(backend: Any, xp: Any, specs: Sequence[Spec]) -> list[Any]:
    """Arrays of ``backend`` of ``specs``' shapes and dtypes."""
    arrays = []
    for shape, name in specs:
        x = backend.asarray(values(shape, name))
        if name == "bfloat16":
            x = xp.astype(x, xp.bfloat16)
        arrays.append(x)
    return arrays


def _abstract(
    backend: Any, xp: Any, specs: Sequence[Spec], fn: Callable[..., Any]
) -> Any:
    """``fn`` on the library's own arrays without values, where it has them.

    JAX traces ``fn`` (``jax.eval_shape``: no compilation per dtype) and
    ndonnx builds its graph on placeholders (no onnxruntime run); both
    promote and shape as their eager arrays do. None where the library has
    none, or ``fn`` needs values (then the case runs on real values).
    """
    if backend.library == "jax":
        import jax

        structs = [jax.ShapeDtypeStruct(shape, name) for shape, name in specs]
        try:
            return jax.eval_shape(lambda *xs: fn(xp, *xs), *structs)
        except (AttributeError, jax.errors.ConcretizationTypeError):
            return None  # (it reads a value, or an array's device)
    if backend.library == "ndonnx":
        try:
            args = [xp.argument(shape=s, dtype=getattr(xp, n)) for s, n in specs]
            result = fn(xp, *args)
        except Exception:  # noqa: BLE001 - it needs values: run it on them
            return None
        return result if None not in _shapes_of(result) else None
    return None


def _shapes_of(result: Any) -> list[Any]:
    parts = list(result) if isinstance(result, tuple | list) else [result]
    return [d for part in parts for d in part.shape]


def real_run(
    backend: Any, xp: Any, specs: Sequence[Spec], fn: Callable[..., Any]
) -> Any:
    """What `described` makes of ``fn`` on the library's arrays of ``specs``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = _abstract(backend, xp, specs, fn)
        if result is None:
            result = fn(xp, *real_inputs(backend, xp, specs))
            if backend.library == "dask":  # an answer only if it computes
                import dask

                parts = result if isinstance(result, tuple | list) else [result]
                dask.compute(*parts, scheduler="sync")
        return described(result)


def described(result: Any) -> list[tuple[tuple[float, ...], str | None]]:
    """``[(shape, dtype name)]`` of an array or of a tuple or list of arrays."""
    parts = list(result) if isinstance(result, tuple | list) else [result]
    out = []
    for part in parts:
        shape = tuple(float("nan") if d is None else d for d in part.shape)
        out.append((shape, dtype_name(part.dtype)))
    return out


def shape_only(profile: Profile, specs: Sequence[Spec], fn: Callable[..., Any]) -> Any:
    """``fn(xp, *arrays)`` on shape-only arrays of ``specs``, impersonating ``profile``.

    Returns what `described` makes of the result; raises what ``fn``
    raised, or `CannotFollow` when a refusal was caught inside ``fn``.
    """
    trace = Trace(profile)

    def run() -> Any:
        arrays = [given(trace, shape, name) for shape, name in specs]
        xp = arrays[0].__array_namespace__() if arrays else NAMESPACE[0]
        result = fn(xp, *arrays)
        parts = list(result) if isinstance(result, tuple | list) else [result]
        assert all(isinstance(p, ShapeArray) for p in parts), result
        return described(result)

    out = tracing(trace, run)
    if trace.failure is not None:
        raise CannotFollow(trace.failure)
    return out


def library_and_trace(
    backend: Any, xp: Any, profile: Profile, cases: Sequence[Case]
) -> Iterator[tuple[str, Sequence[Spec], Callable[..., Any], Any, Any]]:
    """``(label, specs, fn, the library's answer, the trace's)`` of each case the
    library answers; the trace's is the `CannotFollow` it raised, if it refused.
    """
    for label, specs, fn in cases:
        try:
            want = real_run(backend, xp, specs, fn)
        except Exception:  # noqa: BLE001, S112 - the library refuses: not compared
            continue
        try:
            got = shape_only(profile, specs, fn)
        except CannotFollow as exc:
            got = exc
        yield label, specs, fn, want, got


def twin_mismatches(
    backend: Any, xp: Any, cases: Sequence[Case]
) -> tuple[int, list[str]]:
    """``(cases compared, mismatches)`` of ``cases`` on ``backend``.

    A case whose inputs the device cannot hold, or that the library raises
    on, is not compared.
    """
    profile = profile_of(backend)
    compared, wrong = 0, []
    for label, specs, fn in cases:
        if any(name not in profile.dtypes for _, name in specs):
            continue
        if not_modelled(backend.library, label):
            continue
        try:
            expected = real_run(backend, xp, specs, fn)
        except Exception:  # noqa: BLE001, S112 - the library refuses: not compared
            continue
        if any(math.isnan(d) for shape, _ in expected for d in shape):
            continue  # (a lazy library that does not know the shape)
        compared += 1
        try:
            got = shape_only(profile, specs, fn)
        except Exception as exc:  # noqa: BLE001 - a mismatch to report
            wrong.append(f"{label}: {type(exc).__name__}: {exc} (want {expected})")
            continue
        if got != expected:
            wrong.append(f"{label}: got {got}, want {expected}")
    return compared, wrong


def assert_twins(backend: Any, xp: Any, cases: Sequence[Case]) -> None:
    """Every case the library answers, the shape-only arrays answer alike."""
    compared, wrong = twin_mismatches(backend, xp, cases)
    if not compared:
        pytest.skip(f"{backend.name} answers none of these cases")
    assert wrong == [], f"{len(wrong)} of {compared} differ:\n" + "\n".join(wrong)


def numpy_peak(fn: Callable[[Any], Any], x: Any) -> int:
    """The bytes NumPy itself allocates at most while ``fn(x)`` runs (tracemalloc)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = fn(x)
        peak: int = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    del result
    return peak
