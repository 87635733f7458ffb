"""Hypothesis strategies that draw arrays and dtypes for a `Backend`.

Built on ``hypothesis.extra.array_api.make_strategies_namespace``. Arrays are
drawn through NumPy's compliant namespace (``array_api_compat.numpy``) and then
placed on the backend with `Backend.asarray`: Hypothesis fills arrays by item
assignment, which immutable libraries (JAX, Dask) lack, and it does not
recognise every compat namespace as an Array API library. The dtypes drawn are
the ones the backend's *device* supports (its ``__array_namespace_info__``),
without float64/complex128 where the device has none (MPS), so a drawn array
never needs narrowing.

Requires ``hypothesis`` (the ``test`` extra).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import SimpleNamespace
from typing import TYPE_CHECKING

import array_api_compat.numpy as np_xp
from hypothesis import strategies as st
from hypothesis.extra.array_api import make_strategies_namespace

from .._adapters._registry import ADAPTERS
from .._backend import Backend
from .._dtypes import DTYPE_KINDS, dtype_name, narrow_for_device

if TYPE_CHECKING:
    from .._typing import Array, DType

__all__ = ["arrays", "dtype_names", "dtypes"]


@functools.cache
def _numpy_strategies() -> SimpleNamespace:
    namespace: SimpleNamespace = make_strategies_namespace(np_xp)
    return namespace


def dtype_names(backend: Backend, kind: str | None = None) -> list[str]:
    """Names of the dtypes ``backend``'s device supports (optionally of one kind).

    ``kind`` is one of the standard's kinds: ``"bool"``, ``"integral"``,
    ``"real floating"``, ``"complex floating"``, or ``"numeric"``.
    """
    _check_backend(backend)
    names = set(backend.dtypes)
    if kind is not None:
        if kind == "numeric":
            wanted = {
                n for k, group in DTYPE_KINDS.items() if k != "bool" for n in group
            }
        elif kind in DTYPE_KINDS:
            wanted = set(DTYPE_KINDS[kind])
        else:
            msg = f"kind={kind!r} is not one of {', '.join([*DTYPE_KINDS, 'numeric'])}"
            raise ValueError(msg)
        names &= wanted
    order = [n for group in DTYPE_KINDS.values() for n in group]
    return [n for n in order if n in names]


def dtypes(backend: Backend, kind: str | None = None) -> st.SearchStrategy[DType]:
    """Dtype objects of ``backend``'s namespace that its device supports."""
    names = dtype_names(backend, kind)
    return st.sampled_from([getattr(backend.xp, n) for n in names])


def arrays(
    backend: Backend,
    *,
    dtype: DType | st.SearchStrategy[DType] = None,
    shape: int | tuple[int, ...] | st.SearchStrategy[tuple[int, ...]] | None = None,
    elements: st.SearchStrategy[object] | Mapping[str, object] | None = None,
) -> st.SearchStrategy[Array]:
    """Arrays of ``backend``'s library, on its device.

    Parameters
    ----------
    backend : Backend
        Where the arrays live.
    dtype : dtype, str or strategy, optional
        A dtype of any library or its name, or a strategy of those; by default
        any dtype the device supports. A 64-bit dtype the device lacks is
        narrowed as `Backend.asarray` narrows it (float64 to float32 on JAX
        without x64, MPS, array-api-strict's ``no_float64``).
    shape : int, tuple or strategy, optional
        By default Hypothesis' ``array_shapes()`` (1 to 3 dimensions, up to
        10 per side).
    elements : strategy or dict, optional
        Passed to Hypothesis' ``arrays`` (e.g. ``{"allow_nan": False}``).
    """
    _check_backend(backend)
    xps = _numpy_strategies()
    allowed = set(dtype_names(backend))
    if dtype is None:
        names: st.SearchStrategy[str] = st.sampled_from(dtype_names(backend))
    elif isinstance(dtype, st.SearchStrategy):
        names = dtype.map(lambda d: _allowed_name(d, allowed, backend))
    else:
        names = st.just(_allowed_name(dtype, allowed, backend))
    shapes = xps.array_shapes() if shape is None else shape
    return names.flatmap(
        lambda name: xps.arrays(getattr(np_xp, name), shapes, elements=elements).map(
            lambda host: backend.asarray(host, dtype=name)
        )
    )


def _allowed_name(dtype: DType, allowed: set[str], backend: Backend) -> str:
    """The dtype drawn for ``dtype``: narrowed as `Backend.asarray` narrows it.

    A 64-bit dtype the device lacks becomes its 32-bit sibling (with
    asarray's `PrecisionWarning`, or the plugin's summary line); a dtype the
    device cannot hold at all is a ValueError.
    """
    name = dtype_name(dtype)
    assert name is not None
    adapter = ADAPTERS[backend.library]
    name = narrow_for_device(
        name, frozenset(allowed), adapter.variant_name(backend.device)
    )
    if name not in allowed:
        msg = f"dtype={dtype!r} is not supported on {backend.name} ({backend.device})"
        raise ValueError(msg)
    return name


def _check_backend(backend: object) -> None:
    if not isinstance(backend, Backend):
        msg = f"backend must be a Backend, got {backend!r}"
        raise TypeError(msg)
