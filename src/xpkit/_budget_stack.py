"""The stack of `memory_budget` blocks in force, and generators that keep their own.

A block's budget lives in a `contextvars.ContextVar` (per thread and
asyncio task): `xpkit._memory`'s `memory_budget` pushes and pops its
entries. A generator runs in its caller's context; a decorated one runs
each resumption on a stack of its own (`generator_in_budget`).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._typing import UserFunction

__all__ = [
    "ACTIVE_BUDGET",
    "BudgetEntry",
    "async_generator_in_budget",
    "generator_in_budget",
    "in_budget",
]

#: One block in force: the object that entered it, its budget (GB) and the
#: id of the frame whose ``with`` statement entered it.
BudgetEntry = tuple[object, float, int]

#: The enclosing `memory_budget` blocks, innermost last.
ACTIVE_BUDGET: ContextVar[tuple[BudgetEntry, ...]] = ContextVar(
    "xpkit_memory_budget", default=()
)


@contextmanager
def in_budget(gb: float) -> Iterator[None]:
    """``gb`` in force for the block: an entry of its own, no ``with`` leaves it."""
    token = ACTIVE_BUDGET.set((*ACTIVE_BUDGET.get(), (object(), gb, 0)))
    try:
        yield
    finally:
        ACTIVE_BUDGET.reset(token)


class _OwnBudget:
    """A generator's budget stack, its own: in force while its code runs.

    A generator runs in its caller's context: a ``with memory_budget(...)``
    it holds across a ``yield`` pushed its budget onto its caller's stack
    (the caller saw it between resumptions) and lay under the decorator's at
    the next one (the generator saw the decorator's). Each resumption here
    runs on the caller's stack, the decorator's budget and the generator's
    own blocks; the caller's stack is given back as it was, and the
    generator's blocks are kept for the next resumption.
    """

    __slots__ = ("inner", "marker")

    def __init__(self, gb: float) -> None:
        #: The decorator's entry (a block no ``with`` leaves).
        self.marker: BudgetEntry = (object(), gb, 0)
        self.inner: tuple[BudgetEntry, ...] = ()

    def enter(self) -> Token[tuple[BudgetEntry, ...]]:
        return ACTIVE_BUDGET.set((*ACTIVE_BUDGET.get(), self.marker, *self.inner))

    def leave(self, token: Token[tuple[BudgetEntry, ...]]) -> None:
        now = ACTIVE_BUDGET.get()
        at = [i for i, entry in enumerate(now) if entry is self.marker]
        self.inner = now[at[-1] + 1 :] if at else ()
        ACTIVE_BUDGET.reset(token)


def generator_in_budget(func: UserFunction, gb: float) -> UserFunction:
    """``func``, a generator function, with ``gb`` in force while its code runs."""

    @functools.wraps(func)
    def run(*args: object, **kwargs: object) -> Generator[object, object, object]:
        with in_budget(gb):
            gen = func(*args, **kwargs)
        own = _OwnBudget(gb)
        resume: Callable[[object], object] = gen.send
        value: object = None
        while True:
            token = own.enter()
            try:
                item = resume(value)
            except StopIteration as stop:
                return stop.value
            finally:
                own.leave(token)
            try:
                value = yield item
                resume = gen.send
            except GeneratorExit:
                token = own.enter()
                try:
                    gen.close()
                finally:
                    own.leave(token)
                raise
            except BaseException as exc:  # noqa: BLE001 - thrown in: pass it on
                resume, value = gen.throw, exc

    return run


def async_generator_in_budget(func: UserFunction, gb: float) -> UserFunction:
    """`generator_in_budget` of an async generator function."""

    @functools.wraps(func)
    async def run(*args: object, **kwargs: object) -> AsyncGenerator[object, object]:
        with in_budget(gb):
            agen = func(*args, **kwargs)
        own = _OwnBudget(gb)
        resume: Callable[[object], Awaitable[object]] = agen.asend
        value: object = None
        while True:
            token = own.enter()
            try:
                item = await resume(value)
            except StopAsyncIteration:
                return
            finally:
                own.leave(token)
            try:
                value = yield item
                resume = agen.asend
            except GeneratorExit:
                token = own.enter()
                try:
                    await agen.aclose()
                finally:
                    own.leave(token)
                raise
            except BaseException as exc:  # noqa: BLE001 - thrown in: pass it on
                resume, value = agen.athrow, exc

    return run
