"""Ctrl-C (SIGINT) while a pool starts or stops its workers.

A Ctrl-C raises ``KeyboardInterrupt`` wherever the main thread happens to be.
Two steps of a pool must not stop half-way: stopping its workers (a worker
left running, or dead but never reaped), and starting worker processes (one
whose handle is lost mid-start is orphaned). `interrupts_held` holds a
Ctrl-C until a (time-bounded) step is done; `block_sigint` keeps it from
a thread that starts processes, and from those processes as they start.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

__all__ = ["PATIENCE_SECONDS", "block_sigint", "interrupts_held", "unblock_sigint"]

_Handler = Callable[[int, FrameType | None], object]


#: Seconds a held step may take before a further Ctrl-C stops waiting for it
#: (more than any pool's steps take: they are bounded in time).
PATIENCE_SECONDS = 10.0


@contextlib.contextmanager
def interrupts_held(
    *, then_raise: bool = True, patience: float = PATIENCE_SECONDS
) -> Iterator[None]:
    """Hold Ctrl-C during the block, for steps that must not stop half-way.

    A Ctrl-C during the block takes effect when the block ends
    (``then_raise=False`` drops it: the caller is already on its way out for
    one). Further ones are ignored, so that pressing Ctrl-C again and again
    cannot cut the step short, unless the block has run for more than
    ``patience`` seconds: then one takes effect at once (the step looks
    stuck, and the user insists), and any after it are ignored, so that a
    ``finally`` of the block finishes. Outside the main thread (which alone
    receives ``KeyboardInterrupt``), or where SIGINT is not handled in
    Python (ignored, default), the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):
        yield
        return
    outer: _Handler = previous
    held: list[tuple[int, FrameType | None]] = []
    began = time.monotonic()
    escaped = False

    def hold(signum: int, frame: FrameType | None) -> None:
        nonlocal escaped
        held.append((signum, frame))
        if len(held) > 1 and not escaped and time.monotonic() - began > patience:
            escaped = True
            outer(signum, frame)

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, outer)
        if held and not escaped and then_raise:
            outer(*held[0])


def block_sigint() -> None:
    """Block SIGINT in the calling thread, for good.

    For a thread that starts processes: they start with it blocked (a thread's
    signal mask is inherited through fork and exec), and no Ctrl-C can end
    one before it has read what it was sent. The process unblocks it when
    ready (`unblock_sigint`). A no-op where signal masks do not exist.
    """
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def unblock_sigint() -> None:
    """Undo `block_sigint` (in a process started with SIGINT blocked).

    A Ctrl-C that arrived meanwhile takes effect now.
    """
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
