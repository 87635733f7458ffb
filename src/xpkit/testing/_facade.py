"""xpkit's own facade, stated with `capabilities` like any library's functions.

The statements follow from the adapters (which library lacks ``linalg`` or
data-dependent shapes) and from what the runs show: ``tests/facade/test_facade_lazy.py``
runs every method in every mode, and each method a statement keeps out of
a mode forced into it, so a statement can neither claim a mode that fails
(``to_numpy`` under ``jax.jit``: its values must leave the graph) nor
refuse one that works (``torch.compile`` captures ``to_numpy`` and
``flatnonzero``). ``xpkit capabilities xpkit`` prints them as a table.
"""

from __future__ import annotations

from .._backend import Backend
from .._statement import ATTRIBUTE, Capabilities
from ._capabilities import checked_statement

__all__ = ["declare_facade", "facade_capabilities"]

#: The facade methods a statement covers (the seed's array methods, `move`, `top_k`).
METHODS = (
    "asarray",
    "asarray_like",
    "at",
    "check_arrays",
    "concatenate",
    "copy",
    "expand_dims",
    "flatnonzero",
    "full",
    "full_like",
    "matmul",
    "move",
    "ones_like",
    "sort",
    "svd",
    "to_cpu",
    "to_device",
    "to_gpu",
    "to_numpy",
    "top_k",
    "zeros_like",
)

_HOST = "returns a NumPy array: its values must leave the graph"
_SHAPE = "the result's shape depends on the values"


def facade_capabilities() -> dict[str, Capabilities]:
    """Method name -> the facade's statement for it (see `capabilities`).

    Returns
    -------
    dict of str to Capabilities
        One entry per facade method; most state nothing (they run everywhere).

    Raises
    ------
    Nothing: the statements follow from the adapters' class attributes.

    Examples
    --------
    >>> from xpkit.testing import facade_capabilities
    >>> sorted(facade_capabilities()["to_numpy"].modes)
    ['jit']
    """
    special = {
        "svd": checked_statement(requires=("linalg",)),
        "flatnonzero": checked_statement(
            requires=("data_dependent_shapes",), modes={"jit": _SHAPE}
        ),
        "at": checked_statement(
            modes={
                "compile": "array-api-extra's at cannot be traced (its index checks)"
            }
        ),
        "to_numpy": checked_statement(modes={"jit": _HOST}, computes=1),
    }
    plain = checked_statement()
    return {name: special.get(name, plain) for name in METHODS}


def declare_facade() -> None:
    """Record the statements on `Backend`'s methods (the batching functions carry theirs)."""
    for name, stated in facade_capabilities().items():
        setattr(getattr(Backend, name), ATTRIBUTE, stated)
