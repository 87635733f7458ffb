"""What each public function of a library supports, said once, used twice.

A library author states per function which backends, devices and modes
(``jit``, ``lazy``, ``compile``) it supports and why not (`capabilities`);
the tests of that function take the statement as pytest marks
(`covers`: skips, strict xfails, the lazy variants), and
`capabilities_table` turns the statements into the Markdown table of the
author's docs (``xpkit capabilities mylib``).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .._adapters import ADAPTERS, CAPABILITIES

__all__ = [
    "Capabilities",
    "capabilities",
    "capabilities_table",
    "covers",
    "statements_of",
]

F = TypeVar("F", bound=Callable[..., Any])

#: The attribute a declared function carries its `Capabilities` in.
ATTRIBUTE = "__xpkit_capabilities__"

#: The modes a statement may refuse, and the plugin variants they name.
MODES = ("jit", "lazy", "compile")


@dataclass(frozen=True)
class Capabilities:
    """One function's statement (see `capabilities`).

    Parameters
    ----------
    skip, xfail, requires, cpu_only, modes, computes
        As `capabilities` takes them (it builds this record; use it).

    Raises
    ------
    Nothing: a statement is a record.

    Examples
    --------
    >>> from xpkit.testing import capabilities
    >>> @capabilities(requires=("linalg",))
    ... def solve(a, b):
    ...     return a
    >>> solve.__xpkit_capabilities__.requires
    ('linalg',)
    """

    skip: Mapping[str, str] = field(default_factory=dict)
    xfail: Mapping[str, str] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    cpu_only: str = ""
    modes: Mapping[str, str] = field(default_factory=dict)
    computes: bool | int = False


def _check_reasons(
    param: str, value: Any, allowed: Callable[[str], bool]
) -> dict[str, str]:
    if not isinstance(value, Mapping):
        msg = f"{param} must map names to reasons, got {type(value).__qualname__}"
        raise TypeError(msg)
    out: dict[str, str] = {}
    for name, reason in value.items():
        if not isinstance(name, str) or not allowed(name):
            msg = f"{param} names {name!r}, which is not one of: {_known(param)}"
            raise ValueError(msg)
        if not isinstance(reason, str) or not reason.strip():
            msg = (
                f"{param}[{name!r}] needs a reason (a non-empty string), got {reason!r}"
            )
            raise ValueError(msg)
        out[name] = reason
    return out


def _is_backend(name: str) -> bool:
    return any(name == k or name.startswith(f"{k}-") for k in ADAPTERS)


def _known(param: str) -> str:
    if param == "modes":
        return ", ".join(MODES)
    return f"library keys ({', '.join(ADAPTERS)}) or backend ids (<key>-<device>)"


def capabilities(
    *,
    requires: tuple[str, ...] = (),
    skip: Mapping[str, str] | None = None,
    xfail: Mapping[str, str] | None = None,
    cpu_only: str = "",
    modes: Mapping[str, str] | None = None,
    computes: bool | int = False,
) -> Callable[[F], F]:
    """Decorator: state what a public function supports, and why not.

    Parameters
    ----------
    requires : tuple of str, optional
        Library capabilities the function needs (``"linalg"``,
        ``"data_dependent_shapes"``): the backends whose adapter lacks one
        are unsupported, with that reason (`Backend.capabilities`).
    skip : mapping of str to str, optional
        Backends (library keys such as ``"dask"`` or ids such as
        ``"torch-cuda"``) the function does not support, each with the reason.
    xfail : mapping of str to str, optional
        Backends where it is known to fail today (strict xfails in tests).
    cpu_only : str, optional
        A reason, when the function runs on CPU devices only.
    modes : mapping of str to str, optional
        Modes it cannot run in (``"jit"``, ``"lazy"``, ``"compile"``), each
        with the reason: it then runs eagerly in those variants.
    computes : bool or int, default False
        How many computes of a lazy graph one call may make (``*-lazy``).

    Returns
    -------
    callable
        A decorator that records the statement on the function and returns it.

    Raises
    ------
    TypeError, ValueError
        A name that is no backend or mode, or a missing reason.

    Examples
    --------
    >>> from xpkit.testing import capabilities
    >>> @capabilities(skip={"ndonnx": "needs linalg"}, modes={"jit": "data-dependent shape"})
    ... def my_solver(a, b):
    ...     return a
    >>> my_solver.__xpkit_capabilities__.modes["jit"]
    'data-dependent shape'
    """
    stated = checked_statement(
        requires=requires,
        skip=skip,
        xfail=xfail,
        cpu_only=cpu_only,
        modes=modes,
        computes=computes,
    )

    def declare(func: F) -> F:
        setattr(func, ATTRIBUTE, stated)
        return func

    return declare


def checked_statement(
    *,
    requires: tuple[str, ...] = (),
    skip: Mapping[str, str] | None = None,
    xfail: Mapping[str, str] | None = None,
    cpu_only: str = "",
    modes: Mapping[str, str] | None = None,
    computes: bool | int = False,
) -> Capabilities:
    """The `Capabilities` `capabilities` records, its arguments checked."""
    if not isinstance(cpu_only, str):
        msg = f"cpu_only must be a reason (str), got {cpu_only!r}"
        raise TypeError(msg)
    if not isinstance(computes, (bool, int)):
        msg = f"computes must be a bool or an int, got {computes!r}"
        raise TypeError(msg)
    unknown = [c for c in requires if c not in CAPABILITIES]
    if not isinstance(requires, tuple) or unknown:
        msg = f"requires must be a tuple of {CAPABILITIES}, got {requires!r}"
        raise ValueError(msg)
    return Capabilities(
        requires=requires,
        skip=_check_reasons("skip", skip or {}, _is_backend),
        xfail=_check_reasons("xfail", xfail or {}, _is_backend),
        cpu_only=cpu_only,
        modes=_check_reasons("modes", modes or {}, lambda m: m in MODES),
        computes=computes,
    )


def _stated(func: Any) -> Capabilities:
    found = getattr(func, ATTRIBUTE, None)
    if not isinstance(found, Capabilities):
        msg = f"{func!r} has no @capabilities statement"
        raise TypeError(msg)
    return found


def covers(func: Callable[..., Any]) -> Callable[[F], F]:
    """Decorator for a test of ``func``: its statement as pytest marks.

    The test is skipped where ``func`` is declared unsupported, strictly
    xfailed where it is declared failing, skipped on GPUs for a CPU-only
    function; and ``func`` is declared to the lazy variants with the modes
    it supports (`lazy_xp_function`), so write the test in the module that
    imports ``func`` by name.

    Parameters
    ----------
    func : callable
        A function with a `capabilities` statement.

    Returns
    -------
    callable
        A decorator for the test function.

    Raises
    ------
    TypeError
        ``func`` has no statement.

    Examples
    --------
    >>> from xpkit.testing import capabilities, covers
    >>> @capabilities(skip={"dask": "needs values"})
    ... def head(x):
    ...     return x[:1]
    >>> @covers(head)
    ... def test_head(xpkit_backend): ...
    >>> [m.name for m in test_head.pytestmark]
    ['xpkit_skip']
    """
    import pytest

    stated = _stated(func)
    marks = [
        pytest.mark.xpkit_skip([name], reason=reason)
        for name, reason in stated.skip.items()
    ]
    marks += [
        pytest.mark.xpkit_xfail([name], reason=reason)
        for name, reason in stated.xfail.items()
    ]
    if stated.requires:
        marks.append(pytest.mark.xpkit_requires(*stated.requires))
    if stated.cpu_only:
        marks.append(pytest.mark.xpkit_cpu_only(reason=stated.cpu_only))
    from ._lazy import lazy_xp_function

    lazy_xp_function(
        func,
        jit="jit" not in stated.modes,
        compiled="compile" not in stated.modes,
        computes=stated.computes,
    )

    def decorate(test: F) -> F:
        for mark in marks:
            test = mark(test)
        return test

    return decorate


def _columns() -> list[tuple[str, str, str, bool]]:
    """(library key, heading, mode, GPU?): each library, its GPUs, its modes."""
    columns = []
    for key, adapter in ADAPTERS.items():
        gpu_only = adapter.is_gpu("cpu")
        columns.append((key, adapter.label, "", gpu_only))
        if adapter.gpu_kinds and not gpu_only:
            columns.append((key, f"{adapter.label} GPU", "", True))
        columns += [(key, f"{adapter.label} {m}", m, False) for m in adapter.test_modes]
    return columns


def _applies(names: Mapping[str, str], key: str, gpu: bool) -> str | None:
    """The reason ``names`` gives for library ``key`` on a (non-)GPU column."""
    for name, reason in names.items():
        if name == key:
            return reason
        if name.startswith(f"{key}-"):
            device = name[len(key) + 1 :]
            if device in ADAPTERS[key].test_modes:
                continue
            if ADAPTERS[key].is_gpu(device) is gpu:
                return reason
    return None


def _cell(
    stated: Capabilities, column: tuple[str, str, str, bool], notes: list[str]
) -> str:
    key, _, mode, gpu = column

    def note(reason: str) -> str:
        if reason not in notes:
            notes.append(reason)
        return f"[{notes.index(reason) + 1}]"

    adapter = ADAPTERS[key]
    for need in stated.requires:
        if need not in adapter.capabilities:
            return f"no {note(f'{adapter.label} has no {need}')}"
    reason = _applies(stated.skip, key, gpu)
    if reason is not None:
        return f"no {note(reason)}"
    if gpu and stated.cpu_only:
        return f"no {note(stated.cpu_only)}"
    reason = _applies(stated.xfail, key, gpu)
    if reason is not None:
        return f"fails {note(reason)}"
    if mode and mode in stated.modes:
        return f"eager {note(stated.modes[mode])}"
    return "yes"


def capabilities_table(functions: Mapping[str, Callable[..., Any]] | str) -> str:
    """The Markdown table of every declared function's capabilities.

    Parameters
    ----------
    functions : mapping of str to callable, or str
        Names and functions; or a module name, whose public functions (its
        ``__all__``, else its names without a leading underscore) and the
        public methods of its public classes that carry a `capabilities`
        statement are listed.

    Returns
    -------
    str
        A Markdown table, one row per function, one column per backend and
        mode (``yes``, ``no``, ``fails``, or ``eager`` for a mode it runs
        outside of), with the reasons as numbered notes below it.

    Raises
    ------
    ModuleNotFoundError
        ``functions`` names a module that cannot be imported.
    ValueError
        Nothing declared is found.

    Examples
    --------
    >>> from xpkit.testing import capabilities, capabilities_table
    >>> @capabilities(skip={"dask": "needs values"})
    ... def head(x):
    ...     return x[:1]
    >>> print(capabilities_table({"head": head}).splitlines()[2].split("|")[2])
     yes
    """
    found = _declared(functions) if isinstance(functions, str) else dict(functions)
    rows = {n: getattr(f, ATTRIBUTE) for n, f in found.items() if hasattr(f, ATTRIBUTE)}
    if not rows:
        msg = f"no function with a @capabilities statement in {functions!r}"
        raise ValueError(msg)
    notes: list[str] = []
    columns = _columns()
    lines = [
        "| function | " + " | ".join(heading for _, heading, _, _ in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for name in sorted(rows):
        cells = [_cell(rows[name], column, notes) for column in columns]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"{i}. {reason}" for i, reason in enumerate(notes, 1)]
    return "\n".join(lines) + "\n"


def statements_of(module_name: str) -> dict[str, Capabilities]:
    """Name -> statement of each declared public function of a module.

    Raises
    ------
    ModuleNotFoundError
        The module cannot be imported.

    Parameters
    ----------
    module_name : str
        The module to import and read.

    Returns
    -------
    dict of str to Capabilities
        ``"name"`` or ``"Class.method"`` -> its statement.

    Examples
    --------
    >>> from xpkit.testing import statements_of
    >>> statements_of("xpkit")["Backend.svd"].requires
    ('linalg',)
    """
    return {name: _stated(f) for name, f in _declared(module_name).items()}


def _declared(module_name: str) -> dict[str, Callable[..., Any]]:
    module = importlib.import_module(module_name)
    names = getattr(
        module, "__all__", [n for n in vars(module) if not n.startswith("_")]
    )
    out: dict[str, Callable[..., Any]] = {}
    for name in names:
        obj = getattr(module, name, None)
        if inspect.isclass(obj):
            for attr, member in inspect.getmembers(obj):
                if not attr.startswith("_") and hasattr(member, ATTRIBUTE):
                    out[f"{name}.{attr}"] = member
        elif callable(obj) and hasattr(obj, ATTRIBUTE):
            out[name] = obj
    return out
