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

import array
import cmath
import collections.abc
import functools
import math
import threading
import time
import types
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ._adapters._registry import adapter_for_array

if TYPE_CHECKING:
    from ._adapters._base import Adapter
    from ._typing import Array, UserFunction, Value

__all__ = [
    "GROW_AFTER",
    "Learned",
    "PlanMemory",
    "Signature",
    "exact_signature",
    "plan_memory",
    "signature",
]

#: Successful batches in a row at a size an OOM taught, before `map_batches`
#: tries twice that size (up to the planned size).
GROW_AFTER = 16

#: A hashable description of one call's signature (see the module docstring).
Signature = tuple[Hashable, ...]
#: A call that ran as one batch: the memory's version then, the state it was
#: planned under, weak references to what its key names by identity.
_OneBatch = tuple[int, Hashable, tuple[Callable[[], object], ...]]


class _Unkeyable(Exception):
    """A value that cannot be part of a signature (nothing is remembered)."""


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
        ``maxsize`` is not a positive int (given or assigned; a smaller
        bound drops the least recently used at once).
    TypeError
        ``enabled`` is assigned anything but a bool.

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

    # (Read as _maxsize and _enabled where a call reads them: a property's
    # getter is a Python call on every map_batches.)

    @property
    def maxsize(self) -> int:
        """Signatures kept; the least recently used go first."""
        return self._maxsize

    @maxsize.setter
    def maxsize(self, maxsize: int) -> None:
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
            msg = f"maxsize must be a positive int, got {maxsize!r}"
            raise ValueError(msg)
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
    ) -> None:
        """``call`` ran as one batch with room, planned under ``state`` at ``version``.

        Nothing is kept when something was learned since ``version`` (the
        plan may be out of date already).
        """
        if not self._enabled:
            return
        with self._lock:
            if version != self._version:
                return
            self._one_batch.pop(call, None)
            self._one_batch[call] = (version, state, alive)
            while len(self._one_batch) > self._maxsize:
                self._one_batch.popitem(last=False)

    def one_batch(self, call: Hashable, state: Hashable) -> bool:
        """Whether ``call`` runs as one batch again: same ``state``, nothing learned since."""
        if not self._enabled:
            return False
        entry = self._one_batch.get(call)  # (a dict read needs no lock)
        if entry is None or entry[0] != self._version or entry[1] != state:
            return False
        refs = entry[2]
        return not refs or _living(refs)  # (most calls name no object)

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


#: The process's plan memory (`xpkit.plan_memory`).
plan_memory = PlanMemory()


# -- signatures ---------------------------------------------------------------
def signature(
    fn: UserFunction,
    arrays: tuple[Array, ...],
    whole: tuple[Array, ...] | Mapping[str, Array],
    where: Hashable,
) -> tuple[Signature | None, tuple[Callable[[], object], ...]]:
    """``(key, weak references)`` of a call, or ``(None, ())`` when it has none.

    ``where`` names the backend and device. The weak references are to the
    objects the key names by identity.
    """
    refs: list[Callable[[], object]] = []
    try:
        key: Signature = (
            _callable_key(fn, refs, 0),
            tuple([_row_key(a) for a in arrays]),
            _operands_key(whole, refs) if whole else (),
            where,
        )
        hash(key)
    except Exception:  # noqa: BLE001 - any object that cannot be keyed: no key
        return None, ()
    return key, tuple(refs)


def exact_signature(
    fn: UserFunction,
    arrays: tuple[Array, ...],
    whole: tuple[Array, ...] | Mapping[str, Array],
    where: Hashable,
) -> tuple[Signature | None, tuple[Callable[[], object], ...]]:
    """`signature`, with every input also by device, library settings and shape.

    Two calls with one exact key have the same inputs but for their values
    (their rows too, not only their row shape): ``fn``'s key, ``where``,
    the whole operands' key, then each input's `Adapter.input_key`, in one
    tuple.
    """
    refs: list[Callable[[], object]] = []
    try:
        parts = [
            _callable_key(fn, refs, 0),
            where,
            _operands_key(whole, refs) if whole else (),
        ]
        for a in arrays:
            adapter = adapter_for_array(a)
            if adapter is None:
                return None, ()
            key = adapter.input_key(a)
            parts.append((key, adapter.cost_mode()) if adapter.has_cost_mode else key)
        key = tuple(parts)
        hash(key)
    except Exception:  # noqa: BLE001 - any object that cannot be keyed: no key
        return None, ()
    return key, tuple(refs)


def _operands_key(
    whole: tuple[Array, ...] | Mapping[str, Array], refs: list[Callable[[], object]]
) -> Hashable:
    named = (
        enumerate(whole)
        if isinstance(whole, (tuple, list))
        else sorted(whole.items())  # keyword operands, by name
    )
    return tuple([(k, _value_key(v, refs, 0)) for k, v in named])


def _row_key(a: Array) -> Hashable:
    """An input by library, row shape, dtype, layout and the library's modes.

    The modes are those that change a call's cost (`Adapter.cost_mode`).
    The dtype is the library's own object (hashable on every library, and
    never compared with another library's: the library's key comes first).
    Contiguous rows are traced; others are measured (`xpkit._cost`): a
    Fortran-order input's cost is not a C-order one's.
    """
    adapter = adapter_for_array(a)
    if adapter is None:
        raise _Unkeyable
    return (
        adapter.key,
        tuple(a.shape[1:]),
        a.dtype,
        adapter.rows_contiguous(a),
        adapter.cost_mode() if adapter.has_cost_mode else None,
    )


#: The types whose values are their own keys (each equal only to itself).
_PLAIN = (type(None), bool, int, str, bytes)
#: Python's number and text types, whose subclasses are keyed by plain value.
_BASES = (int, float, complex, str, bytes)
#: What a NaN is keyed by: ``nan != nan``, and a tuple holding two NaN
#: objects made apart compares unequal (the same object compares equal).
_NAN = "nan"
#: Containers whose contents may change while they live: no identity key
#: (their cost would outlive a change), so no signature.
_MUTABLE = (
    list,
    dict,
    bytearray,
    array.array,
    collections.abc.MutableSequence,
    collections.abc.MutableSet,
    collections.abc.MutableMapping,
)
#: How deep a closure over closures is followed before giving up.
_DEPTH = 4


def _value_key(v: Value, refs: list[Callable[[], object]], depth: int) -> Hashable:
    """``v`` as part of a signature (see the module docstring).

    Numbers and strings by type and value; NumPy scalars by type, dtype and
    value; arrays by library, shape, dtype and layout (a 0-d array in host memory
    by its value too); tuples by their items; classes and modules by
    themselves; functions by their code and what they hold; other objects by
    identity, through a weak reference appended to ``refs``.
    """
    cls = type(v)
    if cls in _PLAIN:
        return (cls.__name__, v)
    if cls is float:
        return ("float", _NAN if math.isnan(v) else v)
    if cls is complex:
        return ("complex", _number(v))
    if isinstance(v, np.generic):
        return _scalar_key(v)
    if isinstance(v, _BASES):  # a subclass: an IntEnum member, a str subclass
        return (_class_key(cls, refs), _subclass_key(v))
    adapter = adapter_for_array(v)
    if adapter is not None:
        shape = tuple(v.shape)
        if shape:  # (its layout: one that is not contiguous is measured)
            return ("array", adapter.key, shape, v.dtype, adapter.rows_contiguous(v))
        return _scalar_array_key(adapter, v)
    if isinstance(v, tuple):
        return ("tuple", tuple(_value_key(i, refs, depth + 1) for i in v))
    if isinstance(v, _MUTABLE):  # (a list subclass, a set, a deque: it may change)
        raise _Unkeyable
    if isinstance(v, types.ModuleType):
        return ("named", v)
    if isinstance(v, type):
        return _class_key(v, refs)
    if callable(v):
        return _callable_key(v, refs, depth + 1)
    return _identity(v, refs)


def _number(v: Hashable) -> Hashable:
    """A Python value as a key: itself, but NaN (of a float or a complex) as `_NAN`."""
    if isinstance(v, float):
        return _NAN if math.isnan(v) else v
    if isinstance(v, complex) and cmath.isnan(v):
        return ("complex", _number(v.real), _number(v.imag))
    return v


def _scalar_key(v: np.generic) -> Hashable:
    """A NumPy scalar by its type, dtype and value (``np.int64(8)`` is not 8).

    The value is the Python one (`numpy.generic.item`): the key holds no
    NumPy object but the dtype (a long double, which ``item`` keeps, as the
    nearest Python float or complex). A value that cannot be hashed makes
    the signature unknown.
    """
    value = v.item()
    if isinstance(value, np.generic):
        value = (
            complex(value) if isinstance(value, np.complexfloating) else float(value)
        )
    return ("numpy", type(v), v.dtype, _number(value))


def _subclass_key(v: complex | str | bytes) -> Hashable:
    """The plain value of an instance of a subclass of a number or text type.

    The key holds it (with the class, `_class_key`), not the instance
    (which may carry attributes of its own).
    """
    plain: complex | str | bytes
    try:  # (a subclass may convert itself by a method of its own)
        if isinstance(v, int):  # (bool has no subclasses)
            plain = int(v)
        elif isinstance(v, float):
            plain = float(v)
        elif isinstance(v, complex):
            plain = complex(v)
        elif isinstance(v, str):
            plain = str(v)
        else:
            plain = bytes(v)
    except (TypeError, ValueError, OverflowError):
        raise _Unkeyable from None
    return _number(plain)


def _scalar_array_key(adapter: Adapter, v: Array) -> Hashable:
    """A 0-d array by library and dtype, and by value where its memory is the host's.

    A 0-d array closed over may be a size (``np.ones((n, k))``): its value is
    read where that is cheap and has no side effects, from its host memory
    (`Adapter.host_view`: NumPy, a CPU tensor, array-api-strict). One on a
    device, lazy or traced is keyed by its dtype only, as other arrays are.
    """
    host = adapter.host_view(v) if adapter.values_at_hand(v) else None
    if host is None:
        return ("array", adapter.key, (), v.dtype)
    return ("array", adapter.key, (), v.dtype, _number(host.item()))


def _callable_key(fn: object, refs: list[Callable[[], object]], depth: int) -> Hashable:
    if fn.__class__ is types.FunctionType and not (
        fn.__closure__ or fn.__defaults__ or fn.__kwdefaults__
    ):  # a plain function, the common case, by its code and file at once
        code = fn.__code__
        return (code, code.co_filename)  # (equal code of two files is equal)
    if depth > _DEPTH:
        raise _Unkeyable
    if isinstance(fn, types.FunctionType):
        closure, given, named = fn.__closure__, fn.__defaults__, fn.__kwdefaults__
        try:
            cells = (
                ()
                if closure is None
                else tuple([_value_key(c.cell_contents, refs, depth) for c in closure])
            )
        except ValueError:  # an empty cell (a name not bound yet)
            raise _Unkeyable from None
        defaults = (
            () if given is None else tuple([_value_key(d, refs, depth) for d in given])
        )
        keywords = (
            ()
            if not named
            else tuple(
                [(k, _value_key(v, refs, depth)) for k, v in sorted(named.items())]
            )
        )
        code = fn.__code__
        return ("function", code, code.co_filename, cells, defaults, keywords)
    if isinstance(fn, types.MethodType):
        return (
            "method",
            _callable_key(fn.__func__, refs, depth + 1),
            _value_key(fn.__self__, refs, depth + 1),
        )
    if isinstance(fn, functools.partial):
        return (
            "partial",
            _callable_key(fn.func, refs, depth + 1),
            tuple(_value_key(a, refs, depth + 1) for a in fn.args),
            tuple(
                (k, _value_key(v, refs, depth + 1))
                for k, v in sorted(fn.keywords.items())
            ),
        )
    if isinstance(fn, _BUILTIN_METHODS):
        return _builtin_method_key(fn, refs, depth)
    if isinstance(fn, type):
        return _class_key(fn, refs)
    if isinstance(fn, _DESCRIPTORS):
        return ("named", fn)
    return _identity(fn, refs)


#: Functions written in C, bound to what their ``__self__`` is: ``len`` and
#: ``math.sqrt`` (a module), ``tensor.mul`` and ``ndarray.sum`` (an array),
#: ``ndarray.__mul__`` (a method-wrapper).
_BUILTIN_METHODS = (types.BuiltinFunctionType, types.MethodWrapperType)
#: A class's own functions written in C, bound to nothing (``ndarray.sum``,
#: ``torch.Tensor.mul``): each holds only its class.
_DESCRIPTORS = (
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.ClassMethodDescriptorType,
)


def _builtin_method_key(
    fn: types.BuiltinFunctionType | types.MethodWrapperType,
    refs: list[Callable[[], object]],
    depth: int,
) -> Hashable:
    """A function written in C: by itself where a module holds it, else by its owner.

    ``w.mul`` holds the tensor ``w``: its key is its type, its name and
    ``w``'s key (an array by library, shape, dtype and layout; an object by weak
    identity), never the bound method, which would keep ``w`` alive.
    """
    owner = fn.__self__
    if owner is None or isinstance(owner, types.ModuleType):
        return ("named", fn)
    return (
        "builtin method",
        fn.__class__,
        fn.__qualname__,
        _value_key(owner, refs, depth + 1),
    )


def _identity(v: object, refs: list[Callable[[], object]]) -> Hashable:
    """``v`` by identity, while it lives (a weak reference checks that).

    Its class by ``id`` too, never the class itself: a class made per call
    (a factory's, a test's) would hold what its methods close over; while
    ``v`` lives, so does its class.
    """
    try:
        refs.append(weakref.ref(v))
    except TypeError:
        raise _Unkeyable from None
    return ("object", id(type(v)), id(v))


def _class_key(cls: type, refs: list[Callable[[], object]]) -> Hashable:
    """A class by identity, while it lives (a weak reference checks that).

    A key holding a class made per call kept it, and all its methods close
    over, alive (240 MB of 30 folds' weights). A class that cannot be
    weakly referenced is held (a C type).
    """
    try:
        refs.append(weakref.ref(cls))
    except TypeError:
        return ("named", cls)
    return ("class", id(cls))
