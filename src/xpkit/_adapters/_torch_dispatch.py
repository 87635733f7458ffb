"""torch's meter: the live bytes of the tensors a call's operations make, per thread.

Every aten operation of the calling thread passes through a
``TorchDispatchMode`` for the call's duration (torch keeps modes per thread:
other threads run as they do). Each tensor an operation returns whose
storage is new (not one of the operation's inputs', not seen before) on the
measured device is counted, rounded up to the allocator's block; a storage is
released when torch frees it (a weak reference to it expires). The peak is
the most bytes live at once, factories (``torch.zeros``) and moves included.

It sees what the operations return; the workspace a kernel takes and gives
back within one operation it adds only where it was measured (on the CPU:
`_torch_workspace`, ``kthvalue``'s copy, LAPACK's, ``mm`` of a strided
operand; not cuBLAS's), and it does not see memory other threads allocate; it resets nothing (``max_memory_allocated`` and
``memory_stats`` read what they would have read without it). A ``fn``
compiled by ``torch.compile`` runs its compiled code as it would, and what
that code's operations return is counted.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ._peak import PeakMeter
from ._torch_workspace import has_workspace, tensor_operand, workspace_bytes

if TYPE_CHECKING:
    from .._typing import Value

__all__ = ["DispatchPeak"]

T = TypeVar("T")

#: The ``TorchDispatchMode`` subclasses, made on first use (torch imported):
#: by whether ``torch._dynamo`` was imported then (`_mode_type`).
_MODE: dict[bool, type] = {}


class _Live:
    """Storages made during one call: their weak references and sizes."""

    def __init__(self, device_type: str, index: int | None, granule: int) -> None:
        self.device_type = device_type
        self.index = index
        self.granule = granule
        self.storages: dict[int, tuple[Value, int]] = {}
        self.live = 0
        self.peak = 0

    def expire(self) -> None:
        """Release the storages torch has freed since the last operation."""
        gone = [key for key, (ref, _) in self.storages.items() if ref.expired()]
        for key in gone:
            self.live -= self.storages.pop(key)[1]

    def add(
        self,
        tensors: list[Value],
        inputs: set[int],
        weak_ref: Callable[[Value], Value],
        cast: int = 0,
    ) -> None:
        """Count the new storages among ``tensors`` (an operation's outputs).

        ``cast``: bytes the operation held beside them while it ran (its
        operands cast whole to the result's dtype, `_cast_bytes`; its
        kernel's workspace, `_workspace`).
        """
        for t in tensors:
            device = t.device
            if device.type != self.device_type or (
                self.index is not None and device.index not in (None, self.index)
            ):
                continue
            try:
                storage = t.untyped_storage()
            except (NotImplementedError, RuntimeError):
                continue  # (a sparse tensor has no storage of its own: not counted)
            key = storage._cdata
            if key in inputs or key in self.storages:
                continue
            size = -(-int(storage.nbytes()) // self.granule) * self.granule
            self.storages[key] = (weak_ref(storage), size)
            self.live += size
        self.peak = max(self.peak, self.live + cast)


#: Operations that cast an operand of another dtype whole to the result's
#: first (``cumsum`` of int8 or int32 into int64, ``x_int + 0.5``): a kernel's
#: workspace that its outputs do not show. Measured against a counting
#: malloc at 2x the result; comparisons and ``argmax`` (whose result's dtype
#: is their own) make none.
_CASTING = frozenset(
    {"add", "sub", "mul", "div", "pow", "sum", "prod", "mean", "cumsum", "cumprod"}
    | {"clamp", "clamp_min", "clamp_max", "maximum", "minimum"}
)


#: Of those, the elementwise ones: written in place (``mul_``) or into
#: ``out=``, they compute in their operands' common dtype where it is wider
#: than the output's, and cast back.
_ELEMENTWISE = frozenset({"add", "sub", "mul", "div", "pow"})


def _cast_bytes(name: str, inputs: list[Value], outputs: list[Value]) -> int:
    """Bytes operation ``name`` casts: each operand whose dtype is not its result's.

    Written in place or into ``out=`` from operands of a wider common
    dtype (``y_f32.mul_(w_f64)``): a result in that dtype beside each
    operand cast whole to it (4 times ``y`` uncounted).
    """
    in_place = name.endswith("_")
    base = name[:-1] if in_place else name
    if base not in _CASTING or not outputs:
        return 0
    out = outputs[0]
    dtype = out.dtype
    if dtype.itemsize == 1 and not dtype.is_floating_point:
        return 0  # (a bool or byte result: nothing is widened into it)
    written = in_place or any(t is o for t in inputs for o in outputs)
    if written and base in _ELEMENTWISE:
        read = [t for t in inputs if in_place or all(t is not o for o in outputs)]
        common = _common_dtype(read)
        if common is not None and common.itemsize > dtype.itemsize:
            size: int = common.itemsize
            cast: int = sum(t.numel() * size for t in read if t.dtype != common)
            return int(out.numel()) * size + cast
        return 0
    return sum(
        t.numel() * dtype.itemsize
        for t in inputs
        if t.dtype != dtype and t.layout == out.layout
    )


def _common_dtype(tensors: list[Value]) -> Value:
    """The dtype torch computes ``tensors`` in (0-d ones count where all are)."""
    import torch  # (imported: its operations are being counted)

    shaped = [t for t in tensors if t.dim()] or tensors
    if not shaped:
        return None
    return functools.reduce(torch.promote_types, (t.dtype for t in shaped))


def _workspace(
    func: Value,
    args: tuple[Value, ...],
    kwargs: dict[str, Value],
    inputs: list[Value],
    outputs: list[Value],
) -> int:
    """Bytes a CPU kernel's workspace holds beside operation ``func``'s results.

    Its tensors (in order) and non-tensor arguments by name, to
    `workspace_bytes`; a tensor without strides (sparse) makes none.
    """
    options = dict(zip((a.name for a in func._schema.arguments), args, strict=False))
    options.update(kwargs)
    try:
        ins = [tensor_operand(t) for t in inputs]
        outs = [tensor_operand(t) for t in outputs]
    except (NotImplementedError, RuntimeError):
        return 0
    return workspace_bytes(func._overloadpacket.__name__, ins, outs, options)


def _mode_type() -> type:
    """A ``TorchDispatchMode`` that feeds each operation's outputs to a `_Live`.

    torch wraps a mode's ``__torch_dispatch__`` in ``torch._dynamo.disable``,
    which imports ``torch._dynamo`` at its first call, and that import sets
    ``TORCHINDUCTOR_CACHE_DIR`` in ``os.environ`` and adds a warnings
    filter: a probe changed the caller's process state. Where the process
    has not imported dynamo, the mode asks torch not to wrap it (its
    documented ``_should_skip_dynamo`` switch); where it has, torch's
    default stands (nothing more is imported).
    """
    dynamo = "torch._dynamo" in sys.modules
    if dynamo not in _MODE:
        import torch
        from torch.multiprocessing.reductions import StorageWeakRef
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_flatten

        def storages_of(values: Value) -> list[Value]:
            leaves, _ = tree_flatten(values)
            return [v for v in leaves if isinstance(v, torch.Tensor)]

        base_init: Callable[[Value], None] = TorchDispatchMode.__init__

        def init(self: Value, live: _Live) -> None:
            base_init(self)
            self.live = live

        def dispatch(
            self: Value,
            func: Value,
            _types: Value,
            args: Value = (),
            kwargs: Value = None,
        ) -> Value:
            live = self.live
            live.expire()
            operands = storages_of((args, kwargs))
            inputs = {t.untyped_storage()._cdata for t in operands}
            out = func(*args, **(kwargs or {}))
            results = storages_of(out)
            name = func._overloadpacket.__name__
            cast = _cast_bytes(name, operands, results)
            if live.device_type == "cpu" and has_workspace(name):
                cast += _workspace(func, args, kwargs or {}, operands, results)
            live.add(results, inputs, StorageWeakRef, cast)
            return out

        def skip_dynamo(cls: type) -> bool:  # noqa: ARG001 - torch's signature
            return dynamo

        # (made with type(): the class exists only once torch is imported)
        _MODE[dynamo] = type(
            "CountingMode",
            (TorchDispatchMode,),
            {
                "__init__": init,
                "__torch_dispatch__": dispatch,
                "_should_skip_dynamo": classmethod(skip_dynamo),
            },
        )
    return _MODE[dynamo]


class DispatchPeak(PeakMeter):
    """The live bytes of what a call's torch operations return on one device."""

    process_wide = False
    cheap = True

    def __init__(self, device_type: str, index: int | None, granule: int) -> None:
        self._device = (device_type, index, granule)
        self.name = "torch dispatch (live tensors)"

    def _measure(self, run: Callable[[], T]) -> tuple[T, int]:
        live = _Live(*self._device)
        mode = _mode_type()(live)
        try:
            with mode:
                result = run()
        finally:
            _left(mode)
        return result, live.peak


def _left(mode: Value) -> None:
    """``mode`` off the thread's dispatch stack, where a Ctrl-C left it on.

    An interrupt that lands as ``with`` enters the mode (after torch pushed
    it) or as it leaves (before ``__exit__`` pops it) left xpkit's counting
    mode on the caller's thread: every later torch operation of the thread
    went through it, several times slower. Its ``__exit__`` runs where it
    had not begun (it restores torch's flags, then pops), else the pop
    alone.
    """
    from torch.utils._python_dispatch import (
        _get_current_dispatch_mode_stack,
        _pop_mode,
    )

    stack = _get_current_dispatch_mode_stack()
    if not stack or stack[-1] is not mode:
        return
    if getattr(mode, "old_dispatch_mode_flags", None):
        leave: Callable[[None, None, None], object] = mode.__exit__
        leave(None, None, None)
    else:
        _pop_mode()
