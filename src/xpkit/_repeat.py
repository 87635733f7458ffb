"""Repeated calls that ran as one batch: ``fn`` runs again, nothing is planned.

Library code calls `map_batches` in loops (folds, permutations, subjects):
the same ``fn`` on inputs of the same shapes, again and again. A plan is a
function of the call's arguments and of its `PlanState`: the plan memory's
version (the costs and fits it holds), the host reading the budget came
from (reused for `HOST_READING_REUSED_FOR` seconds) and the configured
budget. When a call was planned as one batch from a cost known before it
ran (given or remembered), with its outputs fitting, on a device whose
memory is the host's, the plan memory keeps its key
(`PlanMemory.learn_one_batch`). The next call with the same exact key (the
same ``fn`` by signature, inputs of the same library, device, shape and
dtype, the same options) under the same state would get the same plan:
it runs ``fn`` on all rows at once and hands the result to
`xpkit._outputs.outputs_of_all_rows`, as that plan would, without checking
the arguments again (the same values passed those checks) or planning.

A new host reading, another budget in force, anything learned or cleared
in the plan memory, or an object the key names by identity gone ends it.
An OOM in such a call goes to the planned path with the rows that failed
(`Repeat.failed`): it plans again, in batches of at most half of them
(``min_batch`` where half is under it, as a split runs ``min_batch`` rows,
then the rest), and splits further where those run out of memory too;
where they are ``min_batch`` rows or fewer the error is raised at once.
"""

from __future__ import annotations

import logging
import sys
import traceback
from typing import TYPE_CHECKING, NamedTuple

from ._adapters._registry import adapter_for_array
from ._backend import Backend
from ._current_rows import ROWS
from ._log import logger
from ._memory import (
    TRIM_ABOVE_BYTES,
    HostReading,
    configured_budget_gb,
    fresh_host_reading,
    host_reading,
)
from ._oom import at_min_batch, splittable
from ._outputs import outputs_of_all_rows
from ._plan_memory import plan_memory
from ._rows import TRACING_ADAPTERS, held_items, refuse_compiled_rows, refuse_traced
from ._signatures import exact_signature

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Mapping

    from ._plan import BatchPlan
    from ._request import BatchCall, BatchRequest
    from ._typing import Array, UserResult

__all__ = [
    "NO_REPEAT",
    "PlanState",
    "Repeat",
    "as_if_no_backend",
    "before_planning",
    "learn_repeat",
    "repeat",
]

#: The values of the number options a repeated call can be known by, and
#: its whole operands' containers (anything else is checked on every call).
_NUMBERS = (type(None), int, float)
_PAD = (type(None), bool)
_WHOLE = (tuple, list, dict)


class Repeat(NamedTuple):
    """A call that did not repeat one: what the planned path needs to learn it.

    Attributes
    ----------
    call : hashable or None
        The call's key (its signature, rows, device and options); None when
        it has none (it is never repeated).
    alive : tuple of weak references
        To the objects the key names by identity.
    failed : int
        Rows of the repeat's own attempt that ran out of memory (0: none
        ran, or it did not fail): the planned path runs at most half of
        them at once.
    """

    call: Hashable | None
    alive: tuple[Callable[[], object], ...] = ()
    failed: int = 0


#: What a call that is never repeated returns (it has no key).
NO_REPEAT = Repeat(None)


def as_if_no_backend(call: BatchCall) -> BatchCall | None:
    """``call`` without its ``backend``, where that changes nothing; else None.

    A `Backend` (not a name, which would be resolved anew) whose device
    holds every input as it is moves nothing: the call is the one without
    it, and repeats as it does.
    """
    backend = call.backend
    if backend.__class__ is not Backend:
        return None
    own = backend._is_own  # (the facade's own fast test)
    whole = call.whole
    operands = whole.values() if whole.__class__ is dict else whole
    for a in call.arrays:
        if not own(a):
            return None
    for a in operands:
        if not own(a):
            return None
    return call._replace(backend=None)


def repeat(call: BatchCall) -> UserResult | Repeat:
    """``fn``'s outputs when ``call`` repeats one that ran as one batch.

    Otherwise (or after an OOM) a `Repeat` for `learn_repeat`. The caller
    passes only calls that run here with outputs on the host. Only values of
    the types the planned path takes as they are can be part of a repeat
    (``min_batch`` an int, ``pad`` a bool or None, ``budget_gb``,
    ``bytes_per_item``, ``overhead`` and ``fallback_bytes_per_item`` an int,
    a float or None): ``True == 1 == 1.0`` would repeat a call that a check
    refuses.
    """
    fn, arrays, _, _, bytes_per_item, overhead, budget_gb, min_batch, _, _, pad = call[
        :11
    ]
    whole: tuple[Array, ...] | Mapping[str, Array] = call[3]
    fallback = call.fallback_bytes_per_item
    numbers = _NUMBERS
    if (
        min_batch.__class__ is not int
        or pad.__class__ not in _PAD
        or budget_gb.__class__ not in numbers
        or whole.__class__ not in _WHOLE
    ):
        return NO_REPEAT
    if (
        bytes_per_item.__class__ not in numbers
        or overhead.__class__ not in numbers
        or fallback.__class__ not in numbers
    ):
        return NO_REPEAT
    if whole.__class__ is dict and not all(k.__class__ is str for k in whole):
        return NO_REPEAT  # (a dict keyed 0 would have the key of a tuple)
    options = (budget_gb, bytes_per_item, overhead, fallback, min_batch, pad)
    try:  # (the planned path raises what a bad value raises here, in order)
        key, alive = exact_signature(fn, arrays, whole, options)
    except (TypeError, ValueError):
        return NO_REPEAT
    # A call learned was checked: one with the same exact key passes the
    # same checks (its inputs share their rows, library and device).
    configured = configured_budget_gb() if budget_gb is None else None  # (given wins)
    state = (fresh_host_reading(), configured)
    where = None if key is None else plan_memory.one_batch(key, state)
    if where is None:
        return Repeat(key, alive)
    if whole or adapter_for_array(arrays[0]) in TRACING_ADAPTERS:
        refuse_traced(arrays, whole, "map_batches")
    n = arrays[0].shape[0]
    token = ROWS.set(
        (range(n), refuse_compiled_rows)
    )  # what `current_rows` says: every row
    handled = sys.exception()  # (the caller's, if any: not fn's)
    try:
        if whole.__class__ is dict:
            result = fn(*arrays, **whole)
        else:
            result = fn(*arrays, *whole)
    except BaseException as exc:
        if not splittable(exc, handled):
            raise
        if n <= min_batch:  # (named as the planned path names them: ``where``)
            error = at_min_batch("map_batches", (0, n), where, min_batch, exc)
            raise error from exc
        traceback.clear_frames(exc.__traceback__)
        logger().info(
            "map_batches: out of memory repeating a one-batch call of %d rows; "
            "planning it again in batches of at most %d",
            n,
            max(n // 2, min_batch),
        )
        return Repeat(key, alive, n)
    finally:
        ROWS.reset(token)
    log = logger()
    if log.isEnabledFor(logging.INFO):
        log.info("map_batches: %d items in one batch, as the last call planned", n)
    if whole:
        operands = whole.values() if whole.__class__ is dict else whole
        arrays = (*arrays, *held_items(tuple(operands)))
    return outputs_of_all_rows(result, n, fn, arrays)


class PlanState(NamedTuple):
    """What a plan made now depends on, besides the call's own arguments.

    Attributes
    ----------
    version : int
        The plan memory's `PlanMemory.version` (the costs and fits it holds).
    reading : tuple or None
        The host reading the budget came from (None: none is fresh).
    configured_gb : float or None
        The budget in force (`configured_budget_gb`) where the call gives
        none.
    """

    version: int
    reading: HostReading | None
    configured_gb: float | None


def before_planning(
    repeat: Repeat, request: BatchRequest
) -> tuple[int | None, PlanState | None]:
    """What the planned path of ``request`` takes from ``repeat``, before its plan.

    The most rows a batch may have (None where nothing failed): after the
    repeat's ``failed`` rows ran out of memory, half of them (the repeat
    raised where that is under ``min_batch``), and the plan memory learns
    that they fit, so that this plan and the next call's start from it.
    Then the `PlanState` the plan is made under (None for a call that is
    never repeated): the host reading is the one the plan will use (taken
    now where the last is stale, as the plan would); taken before the plan,
    a reading or a lesson that arrives while it is made can only make the
    state stale (never repeated), never newer than the plan.
    """
    most = None
    if repeat.failed:
        most = max(repeat.failed // 2, request.min_batch)
        plan_memory.learn_fit(request.key, most, request.alive)
    if repeat.call is None:
        return most, None
    budget_gb = request.budget_gb
    configured = configured_budget_gb() if budget_gb is None else None
    return most, PlanState(plan_memory.version, host_reading(), configured)


def learn_repeat(
    repeat: Repeat, request: BatchRequest, plan: BatchPlan, state: PlanState | None
) -> None:
    """Remember ``request``'s call when it ran as one batch, as planned.

    ``state`` is the `PlanState` when ``plan`` was made: a call that taught
    the plan memory something since (an OOM), or whose plan came from no
    fresh host reading, is not kept; nor one that probed (it taught a cost).
    """
    if repeat.call is None or state is None or state.reading is None:
        return
    if plan.probe_rows or plan.n_batches != 1 or plan.outputs_fit is False:
        return
    if request.adapter.keeps_freed_host_memory and plan.batch_peak_bytes > (
        TRIM_ABOVE_BYTES
    ):
        return  # the planned path hands the freed memory back after it
    if request.adapter.memory_info(request.owner.device) is not None:
        return  # a device's memory is measured on every call (device_free_bytes)
    plan_memory.learn_one_batch(
        repeat.call,
        (state.reading, state.configured_gb),
        repeat.alive,
        state.version,
        request.owner.name,
    )
