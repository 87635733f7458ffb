"""Where `map_batches` runs its batches besides this process: executors.

One module per executor (`dask`: a ``dask.distributed`` cluster; `joblib`:
joblib's worker processes on this host), each a `Pool`
(``_base.py``: the interface and the task); `each_task_on_pool` (``_driver.py``, task by task)
drives any of them, and abandons the pool on an error or a Ctrl-C, which
cannot cut its start or stop short (``_interrupts.py``); `pool_for` picks
the one ``executor=`` names. The executors' own libraries are imported only
when one is asked for.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from .._memory import array_nbytes, n_jobs_for_item_bytes
from .._shown import shown
from ._base import EXECUTORS, Pool
from ._driver import each_task_on_pool
from .dask import (
    DaskPool,
    cluster_info,
    current_client,
    unreachable_scheduler,
    usable_client,
)
from .joblib import JoblibPool

if TYPE_CHECKING:
    from .._typing import Array, DaskClient

__all__ = [
    "EXECUTORS",
    "Pool",
    "cluster_info",
    "each_task_on_pool",
    "pool_for",
    "unreachable_scheduler",
]


def pool_for(
    executor: str | DaskClient | None, arrays: tuple[Array, ...]
) -> Pool | None:
    """The pool ``executor`` names (None: run in this process)."""
    if executor is None:
        return None
    if isinstance(executor, str):
        if executor == "joblib":  # every worker process holds all the inputs
            inputs = sum(array_nbytes(a) for a in arrays)
            return JoblibPool(n_jobs_for_item_bytes(inputs, None, 1))
        if executor == "dask":
            return DaskPool(
                usable_client(current_client(), "'dask' (the current client)")
            )
        msg = (
            f"executor must be None, 'dask', 'joblib' or a dask.distributed.Client, "
            f"got {executor!r}"
        )
        raise ValueError(msg)
    distributed = sys.modules.get("distributed")
    if distributed is not None and isinstance(executor, distributed.Client):
        return DaskPool(usable_client(executor, repr(executor)))
    msg = (
        "executor must be None, 'dask', 'joblib' or a dask.distributed.Client, "
        f"got {shown(executor)} of type {type(executor).__qualname__}"
    )
    raise TypeError(msg)
