"""What `map_batches` learned about a function, kept for its next call.

A probe measures ``fn``'s cost (bytes per row and per call); an OOM teaches
the largest batch that fits. Both hold for the next call with the same
signature: the same function (its code, and the values it closes over,
binds or takes by default), the same row shape and dtype of every input,
the same ``whole`` operands and the same backend and device. A second call
with that signature plans without probing, and starts from the batch size
that worked, as long as it plans no more rows than the cost was fitted at
(`Learned.rows_seen`; beyond them ``fn`` is costed afresh).

What a function holds is keyed so that the memory keeps nothing of the
caller's alive: numbers of every type by type and value (Python's, NumPy
scalars by their dtype too, a 0-d array in host memory by library, dtype
and value; ``np.int64(8)``, ``8`` and ``np.int32(8)`` are three keys, and
NaN is one), strings by value, other arrays by library, shape, dtype and
layout, modules by themselves, a builtin bound method (``tensor.mul``,
``ndarray.sum``) by its name and its owner's key, and classes and any
other object by identity through a weak reference: its entries hold only
while it lives. A key holds numbers, strings, dtypes, code objects,
modules and the C functions and types of modules and classes; an entry,
weak references.

A call that ran as one batch with room to spare is also remembered as such
(`PlanMemory.learn_one_batch`), with the state it was planned under (the
host reading, the configured budget): `map_batches` repeats it without
planning while that state holds and nothing was learned since.

The memory is bounded (least recently used entries go first), safe to use
from many threads, and can be read (`PlanMemory.entries`), cleared and
switched off (`PlanMemory.enabled`, or ``remember=False`` for one call). A
global that ``fn`` reads is not part of its signature: after changing one
that changes ``fn``'s cost, clear the memory (the OOM recovery behind every
batch catches what a stale cost would let through).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import NamedTuple

from ._args import check_count

__all__ = [
    "GROW_AFTER",
    "Learned",
    "PlanMemory",
    "Signature",
    "plan_memory",
]

#: Successful batches in a row at a size an OOM taught, before `map_batches`
#: tries twice that size (up to the planned size).
GROW_AFTER = 16

#: A hashable description of one call's signature (see the module docstring).
Signature = tuple[Hashable, ...]
#: A call that ran as one batch: the memory's version then, the state it was
#: planned under, weak references to what its key names by identity, and
#: where it ran (its Backend's name).
_OneBatch = tuple[int, Hashable, tuple[Callable[[], object], ...], str]


class Learned(NamedTuple):
    """What one signature taught: its cost, and the batch size that fits.

    Attributes
    ----------
    bytes_per_item, fixed_bytes : float
        The cost ``fixed_bytes + rows * bytes_per_item + rows**2 *
        squared_bytes`` of one call.
    source : str
        How the cost was obtained (``"traced by shape-only arrays"``); ``""`` when
        only a batch size is known (the caller gave the cost).
    output_row_bytes : int or None
        Bytes of one row of all the outputs, once ``fn`` has run.
    learned_at : float
        When the cost was measured (``time.time()``).
    fits : int or None
        The largest batch that ran after an OOM (None: no OOM yet, or the
        planned size ran again since).
    alive : tuple of weak references
        To the objects the signature names by identity: the entry holds
        only while they are alive.
    recalled_as : str
        What `BatchPlan.source` says of a plan made from this entry
        (``"remembered: traced by shape-only arrays at 14:03:12"``).
    squared_bytes : float
        The cost's term in the rows squared (0: a straight line).
    rows_seen : int
        The most rows a batch was fitted at, or planned at when the cost was
        new (all the rows, where that plan's batch took all the probe left;
        0: not known): a later plan from it of larger batches (more rows, a
        larger budget) costs ``fn`` afresh (`PlanMemory.learn_rows_seen`).
    """

    bytes_per_item: float
    fixed_bytes: float
    source: str
    output_row_bytes: int | None = None
    learned_at: float = 0.0
    fits: int | None = None
    alive: tuple[Callable[[], object], ...] = ()
    recalled_as: str = ""
    squared_bytes: float = 0.0
    rows_seen: int = 0


class PlanMemory:
    """The costs and batch sizes `map_batches` remembers, per signature.

    Parameters
    ----------
    maxsize : int, default 256
        Signatures kept; the least recently used go first.

    Attributes
    ----------
    enabled : bool
        Whether calls recall and learn (default True). Switching it off
        leaves what was learned in place.
    maxsize : int
        The bound.

    Raises
    ------
    ValueError
        ``maxsize`` is not positive (given or assigned; a smaller bound
        drops the least recently used at once).
    TypeError
        ``maxsize`` is not an int (a NumPy integer is one); ``enabled`` is
        assigned anything but a bool.

    Examples
    --------
    >>> import numpy as np
    >>> import xpkit
    >>> def fn(x):
    ...     if x.shape[0] > 50:
    ...         raise MemoryError  # as a device with room for 50 rows would
    ...     return x * 2.0
    >>> xpkit.plan_memory.clear()
    >>> _ = xpkit.map_batches(fn, np.ones((100, 8)), bytes_per_item=8.0)
    >>> xpkit.plan_memory.entries()[-1].fits  # what the OOM taught
    50
    >>> xpkit.plan_batches(fn, np.ones((100, 8)), bytes_per_item=8.0).batch_size
    50
    """

    def __init__(self, maxsize: int = 256) -> None:
        self._entries: OrderedDict[Signature, Learned] = OrderedDict()
        # call -> (version, state, weak references): calls that ran as one batch.
        self._one_batch: OrderedDict[Hashable, _OneBatch] = OrderedDict()
        self._version = 0
        self._lock = threading.Lock()
        self._enabled = True
        self.maxsize = maxsize
        _LIVE.add(self)

    # (Read as _maxsize and _enabled where a call reads them: a property's
    # getter is a Python call on every map_batches.)

    @property
    def maxsize(self) -> int:
        """Signatures kept; the least recently used go first."""
        return self._maxsize

    @maxsize.setter
    def maxsize(self, maxsize: int) -> None:
        maxsize = check_count("maxsize", maxsize)  # (np.int64 too; no array([2]))
        with self._lock:
            self._maxsize = maxsize
            for kept in (self._entries, self._one_batch):
                while len(kept) > maxsize:
                    kept.popitem(last=False)

    @property
    def enabled(self) -> bool:
        """Whether calls recall and learn."""
        return self._enabled

    @enabled.setter
    def enabled(self, enabled: bool) -> None:
        if not isinstance(enabled, bool):
            msg = f"enabled must be a bool, got {enabled!r}"
            raise TypeError(msg)
        self._enabled = enabled

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __repr__(self) -> str:
        state = "on" if self.enabled else "off"
        return f"<xpkit.PlanMemory: {len(self)} of {self.maxsize} signatures, {state}>"

    def clear(self) -> None:
        """Forget everything learned."""
        with self._lock:
            self._entries.clear()
            self._one_batch.clear()
            self._version += 1

    @property
    def version(self) -> int:
        """A number that changes whenever something is learned or forgotten."""
        return self._version

    def learn_one_batch(
        self,
        call: Hashable,
        state: Hashable,
        alive: tuple[Callable[[], object], ...],
        version: int,
        where: str,
    ) -> None:
        """``call`` ran as one batch with room on ``where``, planned under ``state`` at ``version``.

        ``where`` is the name of the Backend it ran on (what a repeat's
        error names). Nothing is kept when something was learned since
        ``version`` (the plan may be out of date already).
        """
        if not self._enabled:
            return
        with self._lock:
            if version != self._version:
                return
            self._one_batch.pop(call, None)
            self._one_batch[call] = (version, state, alive, where)
            while len(self._one_batch) > self._maxsize:
                self._one_batch.popitem(last=False)

    def one_batch(self, call: Hashable, state: Hashable) -> str | None:
        """Where ``call`` runs as one batch again: same ``state``, nothing learned since.

        The name of the Backend it ran on; None where it does not repeat.
        """
        if not self._enabled:
            return None
        entry = self._one_batch.get(call)  # (a dict read needs no lock)
        if entry is None or entry[0] != self._version or entry[1] != state:
            return None
        refs = entry[2]
        if not refs or _living(refs):  # (most calls name no object)
            return entry[3]
        return None

    def entries(self) -> list[Learned]:
        """What is remembered, least recently used first.

        An entry whose objects are gone is forgotten here.
        """
        with self._lock:
            for key in [k for k, e in self._entries.items() if not _living(e.alive)]:
                del self._entries[key]
            return list(self._entries.values())

    def recall(self, key: Signature | None) -> Learned | None:
        """What ``key`` taught (now the most recently used); None if unknown."""
        if key is None or not self._enabled:
            return None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry.alive and not _living(entry.alive):
                del self._entries[key]  # an object it named by identity is gone
                return None
            self._entries.move_to_end(key)
            return entry

    def _living_entry(self, key: Signature) -> Learned | None:
        """``key``'s entry; None, and forgotten, where an object it names is gone.

        (Its key then names by identity an object that died: another object
        given the same ``id`` later is not the one it learned from.) The
        lock is held.
        """
        entry = self._entries.get(key)
        if entry is None or not entry.alive or _living(entry.alive):
            return entry
        del self._entries[key]
        return None

    def learn_cost(
        self,
        key: Signature | None,
        learned: Learned,
    ) -> None:
        """Remember a measured cost for ``key`` (what an OOM taught stays)."""
        if key is None or not self._enabled:
            return
        when = learned.learned_at or time.time()
        clock = time.strftime("%H:%M:%S", time.localtime(when))
        learned = learned._replace(
            learned_at=when, recalled_as=f"remembered: {learned.source} at {clock}"
        )
        with self._lock:
            old = self._living_entry(key)
            if old is not None:
                del self._entries[key]
                learned = learned._replace(fits=old.fits)
            self._entries[key] = learned
            self._version += 1
            while len(self._entries) > self._maxsize:
                self._entries.popitem(last=False)

    def learn_rows_seen(self, key: Signature | None, rows: int) -> None:
        """A plan made from ``key``'s new cost planned batches of ``rows``."""
        if key is None or not self._enabled:
            return
        with self._lock:
            entry = self._living_entry(key)
            if entry is not None and entry.source and rows > entry.rows_seen:
                self._entries[key] = entry._replace(rows_seen=rows)

    def learn_fit(
        self,
        key: Signature | None,
        rows: int,
        alive: tuple[Callable[[], object], ...] = (),
    ) -> None:
        """An OOM taught that batches of ``rows`` fit (and larger ones did not).

        A signature not seen yet gets an entry with no cost (``alive``: the
        weak references its key names objects by).
        """
        if key is None or not self._enabled:
            return
        with self._lock:
            entry = self._living_entry(key)
            if entry is None:
                entry = Learned(0.0, 0.0, "", learned_at=time.time(), alive=alive)
            fits = rows if entry.fits is None else min(entry.fits, rows)
            self._entries[key] = entry._replace(fits=fits)
            self._version += 1
            self._entries.move_to_end(key)
            while len(self._entries) > self._maxsize:
                self._entries.popitem(last=False)

    def relax_fit(self, key: Signature | None, rows: int, planned: int) -> None:
        """Batches of ``rows`` ran again and again: allow them (all, at ``planned``)."""
        self._update(key, lambda e: e._replace(fits=None if rows >= planned else rows))

    def _update(
        self, key: Signature | None, change: Callable[[Learned], Learned]
    ) -> None:
        if key is None or not self._enabled:
            return
        with self._lock:
            entry = self._living_entry(key)
            if entry is not None:
                self._entries[key] = change(entry)
                self._version += 1


def _living(refs: tuple[Callable[[], object], ...]) -> bool:
    """Whether every object ``refs`` refer to is alive."""
    return all(ref() is not None for ref in refs)


def _after_fork_in_child() -> None:
    """Each plan memory of a forked child starts empty, with a lock of its own.

    A thread of the parent may have held a memory's lock at the fork (the
    child then waited on it for good) or been halfway through an update.
    """
    for memory in list(_LIVE):
        memory._lock = threading.Lock()
        memory._entries.clear()
        memory._one_batch.clear()
        memory._version += 1


#: Every plan memory alive, for `_after_fork_in_child`.
_LIVE: weakref.WeakSet[PlanMemory] = weakref.WeakSet()
if hasattr(os, "register_at_fork"):  # (not on Windows)
    os.register_at_fork(after_in_child=_after_fork_in_child)

#: The process's plan memory (`xpkit.plan_memory`).
plan_memory = PlanMemory()
