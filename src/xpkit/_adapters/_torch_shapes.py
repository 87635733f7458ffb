"""How torch allocates, for a shape-only trace of ``fn`` (`Adapter.shape_traits`).

Views as NumPy's, but ``flip`` copies and a sort makes its indices too; the
dtypes torch gives where the standard leaves them open (`DtypeRules`); on
the CPU each tensor holds its C++ tensor and storage and its Python object
beside its data, and a kernel's workspace where one was measured
(`shape_workspace`); on CUDA and XPU the caching allocator hands out 512-byte
blocks (MPS: 256), and only the device's bytes count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._torch_workspace import shape_workspace
from ._trace import DtypeRules

if TYPE_CHECKING:
    from ._trace import Traits

__all__ = ["torch_traits"]

#: torch's dtypes where the standard leaves them open: a bool operand of
#: arithmetic stays one, the sum of an unsigned integer is the default int,
#: a 0-d operand of an operator is a scalar, an int beside an index array a
#: basic index.
_DTYPE_RULES = DtypeRules(
    bool_arithmetic="bool",
    uint_sum_widens=False,
    zero_d_as_scalar=True,
    ints_advanced=False,
    numpy_scalars="python",
)
#: Bytes a CPU tensor holds beyond its data (its C++ tensor and storage and
#: its Python object), and a view (a tensor of its own over a shared storage).
_CPU_TENSOR_BYTES = 460
_CPU_VIEW_BYTES = 600


def torch_traits(kind: str, caching_allocator: bool) -> Traits:
    """The traits of torch's device ``kind`` (``caching_allocator``: CUDA, XPU)."""
    traits: Traits = {
        "mixed_kinds": "float",
        "flip_views": False,
        "sort_indices": True,
        "casts_whole": True,
        "strided_matmul_copies": True,
        "dtype_rules": _DTYPE_RULES,
        "bounded_masks": False,  # (its operations' meter sees the true size)
        "norms": "fused",
    }
    if kind == "cpu":
        traits["granule"] = 64
        traits["array_bytes"] = _CPU_TENSOR_BYTES
        traits["view_bytes"] = _CPU_VIEW_BYTES
        traits["workspace"] = shape_workspace  # (measured on the CPU only)
    else:
        traits["granule"] = 512 if caching_allocator else 256
    return traits
