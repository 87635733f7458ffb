"""Each library's array type, for the type checker only: `Backend[ArrayT]`.

`Backend("torch")` is a ``Backend[torch.Tensor]`` to mypy and pyright: the
overloads of ``Backend.__init__`` map each `BackendName` to the alias here.
The libraries are imported under ``TYPE_CHECKING`` only, so nothing optional
is imported at run time; where a library is not installed, its alias is
``Any`` to mypy (``ignore_missing_imports``) and Unknown to pyright.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeAlias

from .._typing import HostArray

__all__ = [
    "AutoName",
    "BackendName",
    "CupyName",
    "DaskName",
    "JaxName",
    "NdonnxName",
    "NumpyArray",
    "NumpyName",
    "StrictName",
    "TorchName",
]

#: Each library's name in ``Backend(...)``.
NumpyName: TypeAlias = Literal["numpy"]
TorchName: TypeAlias = Literal["torch"]
StrictName: TypeAlias = Literal["array_api_strict"]
CupyName: TypeAlias = Literal["cupy"]
JaxName: TypeAlias = Literal["jax"]
DaskName: TypeAlias = Literal["dask"]
NdonnxName: TypeAlias = Literal["ndonnx"]
AutoName: TypeAlias = Literal["auto"]

#: The names ``Backend(...)`` accepts: a misspelt name is a type error.
#: (`xpkit.BACKEND_NAMES` holds the same names at run time, in this order;
#: a test keeps the two equal.)
BackendName: TypeAlias = Literal[
    AutoName,
    NumpyName,
    TorchName,
    StrictName,
    CupyName,
    JaxName,
    DaskName,
    NdonnxName,
]

#: NumPy's array type (NumPy is a core dependency).
NumpyArray: TypeAlias = HostArray

if TYPE_CHECKING:
    import array_api_strict._array_object
    import cupy
    import dask.array
    import jax
    import ndonnx
    import torch

    TorchArray: TypeAlias = torch.Tensor
    StrictArray: TypeAlias = array_api_strict._array_object.Array
    CupyArray: TypeAlias = cupy.ndarray
    JaxArray: TypeAlias = jax.Array
    DaskArray: TypeAlias = dask.array.Array
    NdonnxArray: TypeAlias = ndonnx.Array
