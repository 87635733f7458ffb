"""`Backend.move` and `check_arrays(convert=True)` over generated layouts.

For every pair of libraries installed here (a source and a target, the
same library included) Hypothesis draws a NumPy base array (every dtype
both libraries hold, special values included) and a recipe of views
(steps, reversals, offsets, transposes, broadcasts, byte swaps, read-only
flags, read-only memory maps, torch's lazy conjugate and negative bits),
builds the source in its library the way a user would, and checks:

- the result equals the NumPy reference, computed from the base with
  NumPy alone, before the move;
- the source is never changed by writing into the result where it must
  not be: a read-only, broadcast or immutable (JAX) source, and any source
  moved with ``copy=True``;
- ``copy=False`` either shares memory or raises ValueError saying why;
- a dtype the target cannot hold is a TypeError naming it.

A move runs in this process; a layout that crashes a library would end the
test run, so `tests/facade/test_moves.py` runs the known crash cases in a child
process first. Default run: the profile's few examples per pair;
``nox -s fuzz``: 2,000 per pair.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import xpkit
from xpkit._adapters import ADAPTERS

LIBRARIES = ["numpy", "torch", "array_api_strict", "jax", "dask", "ndonnx"]
#: Targets: each library's CPU device, and array-api-strict's device without
#: float64 (moves there narrow, as to MPS).
TARGETS = [*LIBRARIES, "array_api_strict-no_float64"]
DTYPES = [
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
    "float32",
    "float64",
    "complex64",
    "complex128",
]
#: Libraries whose arrays can be written in place (the others are immutable
#: or lazy: a write makes a new array).
WRITABLE = {"numpy", "torch", "array_api_strict"}
_MAPS = Path(tempfile.mkdtemp(prefix="xpkit-move-maps-"))


def _backend(key: str) -> xpkit.Backend:
    lib, _, device = key.partition("-")
    adapter = ADAPTERS[lib]
    if not adapter.is_installed():
        pytest.skip(f"needs {adapter.label}: pip install 'xpkit[{adapter.extra}]'")
    return xpkit.Backend(lib, device=device or "cpu")


def _held(b: xpkit.Backend) -> frozenset[str]:
    """Dtypes arrays of ``b`` can have: the standard's and float16 where held."""
    extra = {"float16"} if b.library in {"numpy", "torch", "jax", "dask"} else set()
    return b.dtypes | extra


# -- the recipe of views ------------------------------------------------------
#: (step name, axis-or-parameter) applied in order to the base array.
Step = tuple[str, int]


@st.composite
def _recipes(draw: st.DrawFn, ndim: int, complex_: bool) -> list[Step]:
    names = ["step", "reverse", "offset", "transpose", "broadcast"]
    steps: list[Step] = []
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(names))
        steps.append((name, draw(st.integers(0, max(ndim - 1, 0)))))
    if complex_ and draw(st.booleans()):
        steps.append((draw(st.sampled_from(["conj", "neg_imag"])), 0))
    for flag in ("byteswap", "read_only", "memmap"):
        if draw(st.integers(0, 4)) == 0:
            steps.append((flag, 0))
    return steps


def _np_view(base: np.ndarray, steps: list[Step], for_source: str) -> Any:
    """The recipe applied with NumPy: the reference (``for_source=""``) or a source.

    For the reference, lazy bits become their values (conj, -imag); for a
    NumPy source, so do they (NumPy has none), and the flags apply.
    """
    x = base
    for name, axis in steps:
        if name in {"byteswap", "read_only", "memmap"}:
            continue
        x = _apply(np, x, name, axis)
    if for_source != "numpy":
        return x
    for name, _ in steps:
        if name == "byteswap":
            x = x.astype(x.dtype.newbyteorder("S"))
        elif name == "memmap":
            x = _memmap(x, read_only=("read_only", 0) in steps)
        elif name == "read_only":
            x = x.view()
            x.flags.writeable = False
    return x


def _apply(lib: Any, x: Any, name: str, axis: int) -> Any:
    """One view step, in NumPy or torch (``lib`` is the module)."""
    ndim = x.ndim
    if ndim == 0:
        return x
    axis %= ndim
    index: list[Any] = [slice(None)] * ndim
    if name == "step":
        index[axis] = slice(None, None, 2)
    elif name == "offset":
        index[axis] = slice(1, None)
    elif name == "reverse":
        if lib is np:
            index[axis] = slice(None, None, -1)
        else:  # torch has no negative strides; flip copies
            return lib.flip(x, dims=(axis,))
    elif name == "transpose":
        return x.T if lib is np else x.permute(*reversed(range(ndim)))
    elif name == "broadcast":
        if x.shape[axis] == 0:
            return x  # nothing to broadcast
        index[axis] = slice(0, 1)
        shape = list(x.shape)
        shape[axis] = 3
        first = x[tuple(index)]
        return np.broadcast_to(first, shape) if lib is np else first.expand(*shape)
    elif name == "conj":
        return np.conj(x) if lib is np else x.conj()
    elif name == "neg_imag":
        return np.conj(x).imag if lib is np else x.conj().imag
    return x[tuple(index)]


_MAP_COUNT = itertools.count()


def _memmap(x: np.ndarray, *, read_only: bool) -> np.ndarray:
    path = _MAPS / f"{next(_MAP_COUNT)}.bin"
    data = np.ascontiguousarray(x)
    data.tofile(path)
    if data.size == 0:
        return data  # an empty file cannot be mapped
    mode = "r" if read_only else "r+"
    if data.ndim == 0:  # a memory map has at least one dimension
        return np.memmap(path, dtype=data.dtype, mode=mode, shape=(1,))
    return np.memmap(path, dtype=data.dtype, mode=mode, shape=data.shape)


def _source(lib: str, b: xpkit.Backend, base: np.ndarray, steps: list[Step]) -> Any:
    """The source array in library ``lib``, built from ``base`` by ``steps``."""
    if lib == "numpy":
        return _np_view(base, steps, "numpy")
    if lib == "torch":
        import torch

        x = torch.from_numpy(base.copy())
        for name, axis in steps:
            if name not in {"byteswap", "read_only", "memmap"}:
                x = _apply(torch, x, name, axis)
        return x
    host = _np_view(base, steps, "")
    if lib == "array_api_strict":
        # array-api-strict wraps the NumPy array it is given, layout and
        # read-only flag included (it holds no swapped bytes).
        if ("read_only", 0) in steps:
            host = host.view()
            host.flags.writeable = False
        return b.xp.asarray(host)
    return b.asarray(host)  # JAX, Dask, ndonnx: their own buffers


def _protected(lib: str, source: Any, steps: list[Step]) -> bool:
    """Whether writes must never reach the source (read-only, broadcast, immutable)."""
    if lib not in WRITABLE:
        return True
    if lib == "torch":  # an expand()ed view: several elements share memory
        return any(
            n > 1 and s == 0 for n, s in zip(source.shape, source.stride(), strict=True)
        )
    host = np.from_dlpack(source) if lib == "array_api_strict" else source
    return (
        not host.flags.writeable
        or any(n > 1 and s == 0 for n, s in zip(host.shape, host.strides, strict=True))
        or ("read_only", 0) in steps
    )


def _snapshot(lib: str, b: xpkit.Backend, source: Any) -> np.ndarray:
    """The source's values now, as a NumPy copy."""
    if lib == "torch":
        return source.resolve_conj().resolve_neg().numpy().copy()
    return np.array(b.to_numpy(source), copy=True)


def _write_into(lib: str, moved: Any, reference: np.ndarray) -> bool:
    """Write a value some element does not hold into ``moved``; whether it was."""
    if lib not in WRITABLE or reference.size == 0:
        return False
    flat = reference.reshape(-1)
    candidates = [True, False] if reference.dtype == bool else [1, 2, 3]
    value = next(v for v in candidates if np.any(flat != v))
    if lib == "torch":
        moved.fill_(value)
    elif lib == "numpy":
        if not moved.flags.writeable:
            return False
        moved[...] = value
    else:
        try:
            moved[...] = value
        except ValueError:  # array-api-strict over read-only memory refuses
            return False
    return True


def _narrowed(reference: np.ndarray, b: xpkit.Backend) -> tuple[np.ndarray, bool]:
    """The reference in the dtype it arrives in on ``b``, and whether that loses values.

    Lost, by NumPy's own casts: a finite value that becomes infinite, or a
    non-zero value that becomes zero.
    """
    name = reference.dtype.name
    if b.has_float64 or name not in {"float64", "complex128"}:
        return reference, False
    with np.errstate(over="ignore", under="ignore"):
        narrow = reference.astype(np.float32 if name == "float64" else np.complex64)
    parts = [reference] if name == "float64" else [reference.real, reference.imag]
    narrow_parts = [narrow] if name == "float64" else [narrow.real, narrow.imag]
    lost = False
    for wide, thin in zip(parts, narrow_parts, strict=True):
        with np.errstate(over="ignore", under="ignore"):
            lost |= bool(np.any(np.isfinite(wide) & ~np.isfinite(thin)))
            lost |= bool(np.any((wide != 0) & (thin == 0)))
    return narrow, lost


@st.composite
def _cases(draw: st.DrawFn, src: str, via: str) -> tuple[np.ndarray, list[Step], Any]:
    source_b = _backend(src)
    dtypes = sorted(_held(source_b) & set(DTYPES))
    if src == "torch":  # torch's uint16/32/64 hold values but few operations
        dtypes = [d for d in dtypes if d not in {"uint16", "uint32", "uint64"}]
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    base = draw(hnp.arrays(np.dtype(dtype), shape, elements=_elements(np.dtype(dtype))))
    steps = draw(_recipes(base.ndim, base.dtype.kind == "c"))
    if base.ndim == 0:  # a memory map has at least one dimension
        steps = [s for s in steps if s[0] != "memmap"]
    if src != "numpy":
        steps = [s for s in steps if s[0] not in {"byteswap", "memmap"}]
    if src not in {"numpy", "array_api_strict"}:
        steps = [s for s in steps if s[0] != "read_only"]
    copy = draw(st.sampled_from([None, True, False])) if via == "move" else None
    return base, steps, copy


def _elements(dtype: np.dtype) -> st.SearchStrategy[Any]:
    # Values float32 cannot hold (narrowing refuses them), for float64 only.
    wide = st.sampled_from([1e-50, 1e300, 2.0**-150, 2.0**-149])
    if dtype.kind == "f":
        values = st.floats(width=8 * dtype.itemsize, allow_subnormal=True)
        specials = st.sampled_from([0.0, -0.0])
        return values | specials | wide if dtype.itemsize == 8 else values | specials
    if dtype.kind == "c":
        part = 4 * dtype.itemsize
        values = st.complex_numbers(width=8 * dtype.itemsize, allow_subnormal=True)
        parts = st.floats(width=part) | st.just(-0.0)
        if part == 64:
            parts |= wide
        return values | st.builds(complex, parts, parts)
    return hnp.from_dtype(dtype)


PAIRS = list(itertools.product(LIBRARIES, TARGETS))


@pytest.mark.filterwarnings("ignore::xpkit.PrecisionWarning")
@pytest.mark.parametrize(("src", "dst"), PAIRS)
@pytest.mark.parametrize("via", ["move", "check_arrays"])
@given(data=st.data())
def test_move_gives_the_values_and_never_writes_into_a_protected_source(
    src, dst, via, data
):
    _backend(src)
    if via == "check_arrays" and _backend(dst).library == src:
        pytest.skip("check_arrays converts other libraries' arrays only")
    _check_case(src, dst, via, data.draw(_cases(src, via), label="case"))


def _check_case(src: str, dst: str, via: str, case: Any) -> None:
    base, steps, copy = case
    note(f"base dtype {base.dtype}, shape {base.shape}, steps {steps}, copy {copy}")
    source_b, target = _backend(src), _backend(dst)
    source = _source(src, source_b, base, steps)
    reference = np.array(_np_view(base, steps, ""), copy=True)
    protected = copy is True or _protected(src, source, steps)
    before = _snapshot(src, source_b, source)
    np.testing.assert_array_equal(before, reference)  # the recipe itself agrees
    expected, lossy = _narrowed(reference, target)
    try:
        if via == "move":
            moved = target.move(source, copy=copy)
        else:
            first = target.asarray(np.zeros((), dtype=expected.dtype))
            moved = target.check_arrays(first, source, convert=True)[1]
    except TypeError as exc:
        assert base.dtype.name not in target.dtypes, exc
        assert base.dtype.name in str(exc)
        return
    except ValueError as exc:
        if lossy and "does not fit dtype" in str(exc):
            return
        assert copy is False, exc
        assert "copy" in str(exc), exc
        return
    assert not lossy, f"a lossy narrowing passed: {expected!r} from {reference!r}"
    got = target.to_numpy(moved)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    np.testing.assert_array_equal(got, expected, strict=True)
    if expected.dtype.kind in "fc":  # -0.0 keeps its sign
        np.testing.assert_array_equal(
            np.signbit(got.real), np.signbit(expected.real), strict=True
        )
    if moved is source:  # the same library and device: the array itself
        assert copy is not True
        return
    if _write_into(target.library, moved, reference) and protected:
        after = _snapshot(src, source_b, source)
        np.testing.assert_array_equal(after, before, strict=True)
