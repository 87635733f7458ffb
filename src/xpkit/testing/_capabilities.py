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
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from .._adapters._base import CAPABILITIES
from .._adapters._registry import ADAPTERS
from .._statement import (
    ATTRIBUTE,
    MODES,
    Capabilities,
    check_host_copies,
)
from .._typing import UserFunction, Value
from ._docstring import with_support_notes
from ._ids import is_known_name, known_names_text
from ._lazy import lazy_xp_function, method_function

__all__ = [
    "Capabilities",
    "capabilities",
    "capabilities_table",
    "checked_statement",
    "covers",
    "statements_of",
    "support_rows",
    "uncovered_statements",
]

F = TypeVar("F", bound=UserFunction)


def _check_reasons(
    param: str, value: Value, allowed: Callable[[str], bool]
) -> dict[str, str]:
    if not isinstance(value, Mapping):
        msg = f"{param} must map names to reasons, got {type(value).__qualname__}"
        raise TypeError(msg)
    out: dict[str, str] = {}
    for name, reason in value.items():
        if not isinstance(name, str) or not allowed(name):
            msg = f"{param} names {name!r}, which is not one of: {_known(param, name)}"
            raise ValueError(msg)
        if not isinstance(reason, str) or not reason.strip() or "\n" in reason:
            msg = (
                f"{param}[{name!r}] needs a reason (a non-empty string of one "
                f"line: it is a cell of the table), got {reason!r}"
            )
            raise ValueError(msg)
        out[name] = reason
    return out


def is_backend(name: str) -> bool:
    """Whether ``name`` is a library key or a variant id of one (``<key>-...``)."""
    return name.split("-", 1)[0] in ADAPTERS


#: The plugin's own variant modes beside the adapters' `test_modes` (its ids).
_PLUGIN_MODES = ("strictest", "readonly")


def _split_id(key: str, rest: str) -> tuple[str | None, str]:
    """``(device, mode)`` of the variant id ``<key>-<rest>`` (either may be absent)."""
    modes = (*ADAPTERS[key].test_modes, *_PLUGIN_MODES)
    if rest in modes:
        return None, rest
    for mode in modes:
        if rest.endswith(f"-{mode}"):
            return rest[: -len(mode) - 1], mode
    return rest, ""


def _stated_name(name: str) -> bool:
    """A library key or a variant id xpkit knows (`known_ids`); no pattern.

    ``torch-cdua``, ``torch-cpu-compiled`` and ``jax-cpu-jitt`` are not, on
    any machine; nor is ``torch-cuda:1`` (a variant runs on the first
    device of each kind: no test would be skipped).
    """
    return not any(c in name for c in "*?[") and is_known_name(name)


def _known(param: str, name: object) -> str:
    if param == "modes":
        return ", ".join(MODES)
    return (
        f"library keys ({', '.join(ADAPTERS)}) or variant ids "
        f"(<key>-<device>[-<mode>]); {known_names_text(name)}"
    )


def capabilities(
    *,
    requires: tuple[str, ...] = (),
    skip: Mapping[str, str] | None = None,
    xfail: Mapping[str, str] | None = None,
    cpu_only: str = "",
    modes: Mapping[str, str] | None = None,
    computes: bool | int = False,
    host_copies: int | None = None,
    in_docstring: bool = False,
) -> Callable[[F], F]:
    """Decorator: state what a public function supports, and why not.

    Parameters
    ----------
    requires : tuple of str, optional
        Library capabilities the function needs (``"linalg"``,
        ``"data_dependent_shapes"``): the backends whose adapter lacks one
        are unsupported, with that reason (`Backend.capabilities`).
    skip : mapping of str to str, optional
        Backends (library keys such as ``"dask"`` or variant ids such as
        ``"torch-cuda"``, ``"jax-cpu-jit"``: those xpkit knows, installed
        here or not) the function does not support, each with the reason.
    xfail : mapping of str to str, optional
        Backends where it is known to fail today (strict xfails in tests).
    cpu_only : str, optional
        A reason, when the function runs on CPU devices only.
    modes : mapping of str to str, optional
        Modes it cannot run in (``"jit"``, ``"lazy"``, ``"compile"``), each
        with the reason: it then runs eagerly in those variants.
    computes : bool or int, default False
        How many computes of a lazy graph one call may make (``*-lazy``).
    host_copies : int, optional
        How many times one call may turn an array into a NumPy array in the
        eager variants (see `lazy_xp_function`); None: not counted.
    in_docstring : bool, default False
        Also write the statement into the function's docstring: a table of
        every backend, GPU column and mode with its verdict and reason,
        in the ``Notes`` section (made where there is none).

    Returns
    -------
    callable
        A decorator that records the statement on the function and returns it.

    Raises
    ------
    TypeError, ValueError
        A name that is no backend or mode, a missing reason, a negative
        ``host_copies``, or an ``in_docstring`` that is not a bool.

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
        host_copies=host_copies,
    )
    if not isinstance(in_docstring, bool):
        msg = f"in_docstring must be a bool, got {in_docstring!r}"
        raise TypeError(msg)

    def declare(func: F) -> F:
        # (above @staticmethod or @classmethod: on the function they hold,
        # which the class's attribute gives back)
        target = (
            func.__func__ if isinstance(func, (staticmethod, classmethod)) else func
        )
        try:
            marked = callable(target)
            if marked:
                setattr(target, ATTRIBUTE, stated)
        except AttributeError:  # (a builtin, a bound method)
            marked = False
        if not marked:
            msg = (
                "capabilities decorates a function, method or class it can "
                f"mark (a def, not a builtin or a bound method), got {func!r}"
            )
            raise TypeError(msg)
        if in_docstring:
            target.__doc__ = with_support_notes(target.__doc__, support_rows(stated))
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
    host_copies: int | None = None,
) -> Capabilities:
    """The `Capabilities` `capabilities` records, its arguments checked."""
    if not isinstance(cpu_only, str):
        msg = f"cpu_only must be a reason (str), got {cpu_only!r}"
        raise TypeError(msg)
    if cpu_only != cpu_only.strip() or "\n" in cpu_only:
        msg = f"cpu_only must be a reason of one line or '', got {cpu_only!r}"
        raise ValueError(msg)
    if not isinstance(computes, (bool, int)):
        msg = f"computes must be a bool or an int, got {computes!r}"
        raise TypeError(msg)
    unknown = [c for c in requires if c not in CAPABILITIES]
    if not isinstance(requires, tuple) or unknown:
        msg = f"requires must be a tuple of {CAPABILITIES}, got {requires!r}"
        raise ValueError(msg)
    return Capabilities(
        requires=requires,
        skip=_check_reasons("skip", skip or {}, _stated_name),
        xfail=_check_reasons("xfail", xfail or {}, _stated_name),
        cpu_only=cpu_only,
        modes=_check_reasons("modes", modes or {}, lambda m: m in MODES),
        computes=computes,
        host_copies=check_host_copies(host_copies),
    )


def _stated(func: object) -> Capabilities:
    found = getattr(func, ATTRIBUTE, None)
    if not isinstance(found, Capabilities):
        msg = f"{func!r} has no @capabilities statement"
        raise TypeError(msg)
    return found


def covers(func: UserFunction | tuple[type, str]) -> Callable[[F], F]:
    """Decorator for a test of ``func``: its statement as pytest marks.

    The test is skipped where ``func`` is declared unsupported, strictly
    xfailed where it is declared failing, skipped on GPUs for a CPU-only
    function; and ``func`` is declared to the lazy variants with the modes
    it supports (`lazy_xp_function`), so write the test in the module that
    imports ``func`` (or, for a method, its class) by name. The test is
    marked as covering ``func`` (``xpkit_covers``): ``pytest
    --xpkit-uncovered=mylib`` reports the statements of ``mylib`` that no
    test covers.

    Parameters
    ----------
    func : callable or (class, str)
        A function with a `capabilities` statement, or a method of one:
        ``Class.method``, or ``(Class, "method")`` as `lazy_xp_function`
        takes it (both declare the method on its class).

    Returns
    -------
    callable
        A decorator for the test function.

    Raises
    ------
    TypeError
        ``func`` has no statement, or names no method of its class.

    Examples
    --------
    >>> from xpkit.testing import capabilities, covers
    >>> @capabilities(skip={"dask": "needs values"})
    ... def head(x):
    ...     return x[:1]
    >>> @covers(head)
    ... def test_head(xpkit_backend): ...
    >>> [m.name for m in test_head.pytestmark]
    ['xpkit_covers', 'xpkit_skip']
    """
    import pytest

    declared = func
    if isinstance(func, tuple):
        func = method_function(func)
    stated = _stated(func)
    marks = [pytest.mark.xpkit_covers.with_args(func)]
    # A statement names a backend and every variant of it (a marker's plain
    # "array_api_strict" is that variant alone).
    marks += [
        pytest.mark.xpkit_skip(_and_its_variants(name), reason=reason)
        for name, reason in stated.skip.items()
    ]
    marks += [
        pytest.mark.xpkit_xfail(_and_its_variants(name), reason=reason)
        for name, reason in stated.xfail.items()
    ]
    if stated.requires:
        marks.append(pytest.mark.xpkit_requires(*stated.requires))
    if stated.cpu_only:
        marks.append(pytest.mark.xpkit_cpu_only(reason=stated.cpu_only))
    lazy_xp_function(
        declared,
        jit="jit" not in stated.modes,
        compiled="compile" not in stated.modes,
        # (a lazy mode it cannot run in: Dask computes as often as it needs)
        computes=True if "lazy" in stated.modes else stated.computes,
        host_copies=stated.host_copies,
    )

    def decorate(test: F) -> F:
        for mark in marks:
            test = mark(test)
        return test

    return decorate


def _and_its_variants(name: str) -> list[str]:
    """``name`` and the pattern of its variants (``name-*``), where it has any."""
    pattern = f"{name}-*"
    return [name, pattern] if is_known_name(pattern) else [name]


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


def _applies(names: Mapping[str, str], key: str, gpu: bool, mode: str) -> str | None:
    """The reason ``names`` gives for library ``key`` on a (non-)GPU column of ``mode``.

    As the plugin's marks read them: a name with a mode (``jax-cpu-jit``,
    ``dask-lazy``) that mode's variants alone, one without (``jax-cpu``)
    that device's variants in every mode.
    """
    for name, reason in names.items():
        if name == key:
            return reason
        if not name.startswith(f"{key}-"):
            continue
        device, named_mode = _split_id(key, name[len(key) + 1 :])
        if named_mode and named_mode != mode:
            continue
        if device is None or ADAPTERS[key].is_gpu(device) is gpu:
            return reason
    return None


def _verdict(
    stated: Capabilities, column: tuple[str, str, str, bool]
) -> tuple[str, str]:
    """(``"yes"``, ``"no"``, ``"fails"`` or ``"eager"``; the reason) for one column."""
    key, _, mode, gpu = column
    adapter = ADAPTERS[key]
    for need in stated.requires:
        if need not in adapter.capabilities:
            return "no", f"{adapter.label} has no {need}"
    reason = _applies(stated.skip, key, gpu, mode)
    if reason is not None:
        return "no", reason
    if gpu and stated.cpu_only:
        return "no", stated.cpu_only
    reason = _applies(stated.xfail, key, gpu, mode)
    if reason is not None:
        return "fails", reason
    if mode and mode in stated.modes:
        return "eager", stated.modes[mode]
    return "yes", ""


def _cell(
    stated: Capabilities, column: tuple[str, str, str, bool], notes: list[str]
) -> str:
    word, reason = _verdict(stated, column)
    if not reason:
        return word
    if reason not in notes:
        notes.append(reason)
    return f"{word} [{notes.index(reason) + 1}]"


def support_rows(stated: Capabilities) -> list[tuple[str, str]]:
    """(column heading, verdict with its reason) for each backend, GPU and mode."""
    rows = []
    for column in _columns():
        word, reason = _verdict(stated, column)
        rows.append((column[1], f"{word}: {reason}" if reason else word))
    return rows


def capabilities_table(functions: Mapping[str, UserFunction] | str) -> str:
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
    ImportError
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
    if not isinstance(functions, (str, Mapping)):
        msg = (
            "functions must be a module name (str) or a mapping of names to "
            f"functions, got {functions!r}"
        )
        raise TypeError(msg)
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
    ImportError
        The module cannot be imported (ModuleNotFoundError: it is not
        found), or its import raised.

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


def _declared(module_name: str) -> dict[str, UserFunction]:
    """Name -> function of each statement of the module (a class's own too)."""
    out: dict[str, UserFunction] = {}
    module = _imported(module_name)
    names = getattr(
        module, "__all__", [n for n in vars(module) if not n.startswith("_")]
    )
    for name in names:
        obj = getattr(module, name, None)
        if inspect.isclass(obj):
            if ATTRIBUTE in vars(obj):  # (a statement of the class itself)
                out[name] = obj
            for attr, member in inspect.getmembers(obj):
                if not attr.startswith("_") and hasattr(member, ATTRIBUTE):
                    out[f"{name}.{attr}"] = member
        elif callable(obj) and hasattr(obj, ATTRIBUTE):
            out[name] = obj
    return out


def _imported(module_name: str) -> object:
    """The module; ImportError (ModuleNotFoundError) where it cannot be imported.

    A module whose import raises something else (its own code fails) is an
    ImportError saying so; a name that is empty or relative a ValueError.
    """
    if not isinstance(module_name, str):
        msg = f"module_name must be a module name (str), got {module_name!r}"
        raise TypeError(msg)
    if not module_name.strip() or module_name.startswith("."):
        msg = f"module_name must be an absolute module name, got {module_name!r}"
        raise ValueError(msg)
    try:
        return importlib.import_module(module_name)
    except ImportError:
        raise
    except Exception as exc:
        msg = f"importing {module_name!r} raised {type(exc).__name__}: {exc}"
        raise ImportError(msg) from exc


def _own(func: object) -> object:
    """A bound method's function (``Class.from_config`` is a new object each time)."""
    return getattr(func, "__func__", func)


def uncovered_statements(
    module_name: str, covered: Iterable[UserFunction]
) -> list[str]:
    """The declared functions of a module that none of ``covered`` is.

    SciPy's "untested" check: every public function with a `capabilities`
    statement should have a test that covers it (`covers`). The pytest
    plugin collects the functions its tests cover, so ``pytest
    --collect-only -q --xpkit-uncovered=mylib`` runs this and exits non-zero
    when something is left.

    Parameters
    ----------
    module_name : str
        The module whose statements must be covered (as `statements_of`).
    covered : iterable of callable
        The functions that tests cover.

    Returns
    -------
    list of str
        ``"name"`` or ``"Class.method"`` of each uncovered statement, sorted.

    Raises
    ------
    ImportError
        The module cannot be imported (ModuleNotFoundError: it is not
        found), or its import raised.
    TypeError
        ``module_name`` is not a string.

    Examples
    --------
    >>> from xpkit.testing import uncovered_statements
    >>> from xpkit import Backend
    >>> "Backend.svd" in uncovered_statements("xpkit", [Backend.asarray])
    True
    >>> "Backend.asarray" in uncovered_statements("xpkit", [Backend.asarray])
    False
    """
    declared = _declared(module_name)
    done = {id(_own(f)) for f in covered}
    return sorted(n for n, f in declared.items() if id(_own(f)) not in done)
