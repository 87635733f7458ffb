"""The plugin's markers: what each means for a variant, and where it is written.

A marker names backends as ``--xpkit-backends`` does (`matches`): a variant
id that variant alone (``array_api_strict`` is not also its ``-strictest``
and ``-device1`` siblings; ``dask`` is eager Dask), a pattern the ids it
matches (``array_api_strict*``), and a library key that is no variant's id
(``torch``, ``jax``) every variant of that library. It applies where it is
written: on the test, its class or module, or on one ``pytest.param`` of
the test's own parametrization (`param_marks`).

The plugin parametrizes ``xpkit_backend`` in ``pytest_generate_tests``, not
with a ``parametrize`` marker. Plugins that treat parametrized tests apart
look for that marker: Hypothesis gives each parametrized test its own
database key and turns its ``differing_executors`` health check off for it
(a ``@given`` method of a test class runs on a new instance per variant), so
without the marker every variant after the first failed that check.
`mark_parametrized` adds the marker that says, truthfully, how the test was
parametrized.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from .._adapters._base import CAPABILITIES
from ._capabilities import is_backend
from ._ids import is_known_name, known_names_text
from ._lazy import tagged
from ._suite_markers import SUITE_MARKER_LINES, SUITE_MARKERS, suite_marks
from ._variants import (
    BackendParam,
    available_backend_params,
    matches,
    variant_backend,
)

__all__ = [
    "MARKER_LINES",
    "hold_written_wrong",
    "mark_parametrized",
    "mark_thread_unsafe",
    "marks_for",
    "param_marks",
    "raise_written_wrong",
]

#: The markers that skip or xfail a test on some variants.
_PER_VARIANT = (
    frozenset(
        {"xpkit_skip", "xpkit_xfail", "xpkit_only", "xpkit_requires", "xpkit_cpu_only"}
    )
    | SUITE_MARKERS
)

#: ``config.addinivalue_line("markers", line)`` for each of the plugin's markers.
MARKER_LINES = (
    (
        "xpkit_skip(backends, reason): skip on these backends, named as "
        "--xpkit-backends names them (a variant id that variant alone, a pattern "
        "with *, a library key that is no variant's id all of its variants)"
    ),
    (
        "xpkit_xfail(backends, reason, strict=True, raises=None, run=True): expect "
        "failure on these backends (strict=False: a pass is no failure; raises "
        "and run as pytest's xfail)"
    ),
    "xpkit_only(backends, reason=''): skip on every backend but these",
    (
        "xpkit_requires(*capabilities): skip on backends without these "
        "(linalg, data_dependent_shapes, float64)"
    ),
    "xpkit_cpu_only(reason): skip on GPU backends",
    (
        "xpkit_shapes_only: the test needs shapes and dtypes only; it also "
        "runs on devices whose arrays have no values"
    ),
    "xpkit_covers(func): the test covers func's @capabilities statement",
    *SUITE_MARKER_LINES,
)


def mark_parametrized(items: list[pytest.Item]) -> None:
    """Give each item parametrized by the plugin a ``parametrize`` marker saying so."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or "xpkit_backend" not in callspec.params:
            continue
        if item.get_closest_marker("parametrize") is not None:
            continue  # already seen as parametrized
        names = [n for n in ("xpkit_backend", "xpkit_dtype") if n in callspec.params]
        values = tuple(callspec.params[n] for n in names)
        item.add_marker(
            pytest.mark.parametrize(
                names, [values if len(values) > 1 else values[0]], indirect=True
            )
        )


def mark_thread_unsafe(items: list[pytest.Item], config: pytest.Config) -> None:
    """Mark ``thread_unsafe`` the tests whose variant replaces declared functions.

    Where pytest-run-parallel is in play (its ``thread_unsafe`` marker is
    registered): the lazy variants (``-jit``, ``-lazy``, ``-compile``) and
    the variants that count host copies replace the test module's declared
    functions around the test and count calls in shared state, so the
    threads of one test would count each other's computes and copies
    (array-api-extra asks the same of its lazy backends).
    """
    registered = any(
        line.split("(")[0].split(":")[0].strip() == "thread_unsafe"
        for line in config.getini("markers")
    )
    if not registered:
        return
    for item in items:
        callspec = getattr(item, "callspec", None)
        param = callspec.params.get("xpkit_backend") if callspec is not None else None
        module = getattr(item, "module", None)
        if not isinstance(param, BackendParam) or param.skip or module is None:
            continue
        declared = tagged(module)
        counted = any(tags.host_copies is not None for _, tags in declared)
        # (host copies are counted on every eager variant but NumPy's)
        if declared and (param.lazy or (counted and param.key != "numpy")):
            reason = f"{param.id} replaces the module's declared functions"
            item.add_marker(pytest.mark.thread_unsafe(reason=reason))


def marks_for(
    written: Sequence[pytest.Mark], param: BackendParam, ids: frozenset[str]
) -> list[pytest.MarkDecorator]:
    """The skips and xfails the ``written`` markers make of ``param``'s variant.

    ``ids``: every variant id of the libraries in play (what a name means).
    """
    marks: list[pytest.MarkDecorator] = []
    if param.skip:
        marks.append(pytest.mark.skip(reason=param.skip))
    for mark in written:
        if mark.name in _TAKES:
            _check_written(mark)
        if mark.name in SUITE_MARKERS:
            suite_marks(mark, param)  # (checked here; applied at setup)
        elif mark.name == "xpkit_skip" and _matches(mark, param, ids):
            marks.append(pytest.mark.skip(reason=_reason(mark, "xpkit_skip")))
        elif mark.name == "xpkit_cpu_only":
            reason = mark.kwargs.get("reason") or (mark.args[0] if mark.args else "")
            if not reason or not isinstance(reason, str):  # (on every machine)
                msg = f"@pytest.mark.xpkit_cpu_only needs a reason (a string), got {reason!r}"
                raise pytest.UsageError(msg)
            if param.on_gpu:
                marks.append(pytest.mark.skip(reason=f"{param.id}: {reason}"))
        elif mark.name == "xpkit_requires":
            missing = _missing(mark, param)
            if missing:
                reason = f"{param.id} has no {' and no '.join(missing)}"
                marks.append(pytest.mark.skip(reason=reason))
        elif mark.name == "xpkit_only" and not _matches(mark, param, ids):
            names = mark.args[0] if mark.args else mark.kwargs.get("backends", ())
            why = mark.kwargs.get("reason") or (
                mark.args[1] if len(mark.args) > 1 else ""
            )
            reason = f"{param.id}: only on {names}" + (f": {why}" if why else "")
            marks.append(pytest.mark.skip(reason=reason))
        elif mark.name == "xpkit_xfail" and _matches(mark, param, ids):
            reason = _reason(mark, "xpkit_xfail")
            strict = mark.kwargs.get("strict", True)
            if not isinstance(strict, bool):
                msg = f"@pytest.mark.xpkit_xfail strict= takes True or False, not {strict!r}"
                raise pytest.UsageError(msg)
            extra = {k: mark.kwargs[k] for k in ("raises", "run") if k in mark.kwargs}
            marks.append(pytest.mark.xfail(reason=reason, strict=strict, **extra))
    return marks


#: The keyword arguments each of xpkit's per-backend markers takes.
_TAKES = {
    "xpkit_skip": frozenset({"backends", "reason"}),
    "xpkit_only": frozenset({"backends", "reason"}),
    "xpkit_xfail": frozenset({"backends", "reason", "strict", "raises", "run"}),
}


#: What each marker written wrong said, met while parametrizing: one usage
#: error at the end of the collection (raised where it was met, it was a
#: collection error, with pytest's traceback, "Interrupted").
_WRITTEN_WRONG = pytest.StashKey[dict[str, None]]()


def hold_written_wrong(config: pytest.Config, error: pytest.UsageError) -> None:
    """Keep ``error`` for `raise_written_wrong`; in a pytest-xdist worker, raise it.

    (A usage error after a worker's collection is xdist's INTERNALERROR; in
    its collection, a collection error, as before.)
    """
    if hasattr(config, "workerinput"):
        raise error
    config.stash.setdefault(_WRITTEN_WRONG, {})[str(error)] = None


def raise_written_wrong(config: pytest.Config) -> None:
    """One usage error saying what every `hold_written_wrong` kept, if any."""
    said = config.stash.get(_WRITTEN_WRONG, {})
    if said:
        raise pytest.UsageError(*said)  # (pytest says each on a line of its own)


def _check_written(mark: pytest.Mark) -> None:
    """UsageError for a marker written so that it would not do what it says.

    An unknown keyword (``stict=``, ``condition=``: it would be ignored),
    no backends named, a reason given twice, or a second positional
    argument that names a backend (it is the reason: name several backends
    in a list).
    """
    unknown = sorted(set(mark.kwargs) - _TAKES[mark.name])
    if unknown:
        msg = (
            f"@pytest.mark.{mark.name} takes no {', '.join(map(repr, unknown))} "
            f"(it takes backends, then {', '.join(sorted(_TAKES[mark.name] - {'backends'}))})"
        )
        raise pytest.UsageError(msg)
    named = mark.args[0] if mark.args else mark.kwargs.get("backends")
    if not named:
        msg = f"@pytest.mark.{mark.name} names no backends: give them first (a name or a list)"
        raise pytest.UsageError(msg)
    if len(mark.args) > 2 or (len(mark.args) == 2 and "reason" in mark.kwargs):
        msg = (
            f"@pytest.mark.{mark.name}{mark.args!r}: it takes (backends, reason); "
            "name several backends in a list"
        )
        raise pytest.UsageError(msg)
    second = mark.args[1] if len(mark.args) == 2 else None
    reason = mark.kwargs.get("reason", second)
    if reason is not None and not isinstance(reason, str):  # (a list: more backends?)
        msg = (
            f"@pytest.mark.{mark.name}: the reason must be a string, got "
            f"{reason!r}; name several backends in one list, first"
        )
        raise pytest.UsageError(msg)
    if isinstance(second, str) and is_backend(second):
        msg = (
            f"@pytest.mark.{mark.name}({mark.args[0]!r}, {second!r}): the second "
            f"argument is the reason, but {second!r} names a backend; name several "
            "backends in a list"
        )
        raise pytest.UsageError(msg)


def param_marks(items: list[pytest.Item]) -> None:
    """Apply the plugin's markers written on a ``pytest.param`` to its items.

    pytest puts a ``pytest.param``'s marks on the items it makes, after the
    plugin parametrized ``xpkit_backend`` from the test's own markers; they
    were silently ignored.
    """
    ids_of: dict[str, frozenset[str]] = {}
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None:
            continue
        param = callspec.params.get("xpkit_backend")
        written = [m for m in callspec.marks if m.name in _PER_VARIANT]
        if not isinstance(param, BackendParam) or param.skip or not written:
            continue  # (a variant skipped for its library is skipped already)
        if param.key not in ids_of:
            found = available_backend_params(frozenset({param.key}))
            ids_of[param.key] = frozenset(p.id for p in found)
        for mark in marks_for(written, param, ids_of[param.key]):
            item.add_marker(mark)


def _missing(mark: pytest.Mark, param: BackendParam) -> list[str]:
    """What ``xpkit_requires`` names that ``param``'s variant lacks.

    Library capabilities (`CAPABILITIES`), and ``"float64"``: a device that
    holds it (not JAX without x64, MPS, array-api-strict's ``no_float64``).
    """
    known = (*CAPABILITIES, "float64")
    unknown = [c for c in mark.args if c not in known]
    if unknown or not mark.args:
        msg = (
            f"@pytest.mark.xpkit_requires names {unknown or 'nothing'}; capabilities: "
            f"{', '.join(known)}"
        )
        raise pytest.UsageError(msg)
    has = set(param.capabilities)
    if not param.skip and "float64" in variant_backend(param.key, param.device).dtypes:
        has.add("float64")
    return [c for c in mark.args if c not in has]


def _matches(mark: pytest.Mark, param: BackendParam, ids: frozenset[str]) -> bool:
    """Whether ``mark`` names ``param``'s variant (the rule of `matches`)."""
    backends = mark.args[0] if mark.args else mark.kwargs.get("backends", ())
    if not isinstance(backends, (list, tuple, set, frozenset)):
        backends = [backends]  # (a name, or what is none: refused below)
    for name in backends:
        # (what xpkit knows of any library, installed or not, and the ids of
        # this machine: "torch-cpu-compiled" or "tourch*" match nothing)
        if not isinstance(name, str) or not is_known_name(name, ids):
            msg = (
                f"@pytest.mark.{mark.name} names unknown backend {name!r}; use library "
                f"keys, variant ids (<key>-<device>[-<mode>]) or patterns of them "
                f"(<key>*); {known_names_text(name)}"
            )
            raise pytest.UsageError(msg)
    return any(matches(name, param, ids) for name in backends)


def _reason(mark: pytest.Mark, name: str) -> str:
    reason = mark.kwargs.get("reason") or (mark.args[1] if len(mark.args) > 1 else "")
    if not reason:
        msg = f"@pytest.mark.{name} needs a reason"
        raise pytest.UsageError(msg)
    return str(reason)
