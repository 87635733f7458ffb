"""What the asserts refuse to compare: data whose conversion to NumPy drops something."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._adapters._registry import adapter_for_array
from .._args import refuse_lossy

if TYPE_CHECKING:
    from .._typing import Value

__all__ = ["refuse_lossy_data"]


def refuse_lossy_data(x: Value, param: str) -> None:
    """`refuse_lossy` for an array of any library, or each array a list holds.

    A list or tuple (nested too) of arrays would go through ``np.asarray``,
    which drops a masked array's mask silently: each array in it is checked,
    named by its place (``desired[1]``).
    """
    adapter = adapter_for_array(x)
    if adapter is not None:
        refuse_lossy(adapter, x, param)
    elif isinstance(x, (list, tuple)):
        for i, item in enumerate(x):
            refuse_lossy_data(item, f"{param}[{i}]")
