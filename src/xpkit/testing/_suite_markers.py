"""The per-backend markers of suites moving onto the plugin, read as written.

Peer libraries mark their tests per backend with markers of their own, read
by their own backend fixture. A suite that replaces that fixture with the
plugin's keeps its markers, and the plugin reads them:

array-api-extra's
    ``skip_xp_backend(library, /, *, reason=None)`` and
    ``xfail_xp_backend(library, /, *, reason=None, strict=None)``:
    ``library`` is a member of the suite's own enum of backends whose value
    is ``"<module>[:<tag>]"`` (``"dask.array"``,
    ``"array_api_strict:strictest"``, ``"torch:gpu"``).
SciPy's
    ``skip_xp_backends(backend=None, condition=None, /, *, reason=None,
    np_only=False, cpu_only=False, eager_only=False, exceptions=())`` and
    ``xfail_xp_backends`` with the same arguments: ``backend`` is a
    namespace's module name (``"jax.numpy"``), and a condition needs a
    reason. Its xfail does not run the test, as SciPy's fixture xfails it
    before the test starts.

Each is checked as the test is collected (`suite_marks`: written wrong, a
usage error naming it) and acts as the test is set up
(`apply_suite_marks`), where the suite's own fixture acts: a static xfail
of the test's own takes precedence as it does there.

What a name means (`names_variant`): a module names the library whose
top-level package it is in (`Adapter.module`: ``dask.array`` is Dask); a
tag names the variants whose mode it is (``strictest``, ``readonly``,
``jit``, ...) or whose device is of that kind (``gpu``, ``cpu``, or a
device's own name before its index); an enum member without a tag names
the library's variants that no other member of its enum names by its tag
(array-api-extra's ``Backend.ARRAY_API_STRICT`` is not the ``-strictest``
variant, which ``Backend.ARRAY_API_STRICTEST`` names, and it is the
plugin's ``-device1`` and ``-no_float64`` ones). A member of a library
xpkit does not run (``Backend.SPARSE``) names no variant here. SciPy's
``np_only`` names every library but the one of module ``numpy``,
``cpu_only`` every variant on a GPU, ``eager_only`` every variant of a
library its peer harnesses run lazily (`Adapter.module_fixture_mode`),
each but the libraries in ``exceptions``. The same rule answers the other
way (`member_of`): the member of a suite's enum that names a variant, for
a fixture that aliases the suite's own ``library`` fixture.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, NoReturn

import pytest

from .._adapters._registry import ADAPTERS

if TYPE_CHECKING:
    from ._variants import BackendParam

__all__ = [
    "SUITE_MARKERS",
    "SUITE_MARKER_LINES",
    "apply_suite_marks",
    "member_of",
    "suite_marks",
]

#: The markers of other suites that the plugin reads.
SUITE_MARKERS = frozenset(
    {"skip_xp_backend", "xfail_xp_backend", "skip_xp_backends", "xfail_xp_backends"}
)

#: ``config.addinivalue_line("markers", line)`` for each of them.
SUITE_MARKER_LINES = (
    (
        "skip_xp_backend(library, /, *, reason=None): array-api-extra's marker, "
        "read by xpkit's plugin: skip on the variants that library names (a "
        "member of the suite's enum, valued '<module>[:<tag>]')"
    ),
    (
        "xfail_xp_backend(library, /, *, reason=None, strict=None): "
        "array-api-extra's marker, read by xpkit's plugin: expect failure there"
    ),
    (
        "skip_xp_backends(backend=None, condition=None, /, *, reason=None, "
        "np_only=False, cpu_only=False, eager_only=False, exceptions=()): "
        "SciPy's marker, read by xpkit's plugin: skip on that module's library"
    ),
    (
        "xfail_xp_backends(backend=None, condition=None, /, *, reason=None, "
        "np_only=False, cpu_only=False, eager_only=False, exceptions=()): "
        "SciPy's marker, read by xpkit's plugin: xfail there, not run"
    ),
)


def suite_marks(mark: pytest.Mark, param: BackendParam) -> list[pytest.MarkDecorator]:
    """The skip or xfail that one of `SUITE_MARKERS` makes of ``param``'s variant."""
    if mark.name.endswith("_backends"):
        reason = _scipy_reason(mark, param)
        if reason is None:
            return []
        if mark.name.startswith("skip"):
            return [pytest.mark.skip(reason=reason)]
        return [pytest.mark.xfail(reason=reason, run=False)]
    reason, strict = _extra_reason(mark, param)
    if reason is None:
        return []
    if mark.name.startswith("skip"):
        return [pytest.mark.skip(reason=reason)]
    if strict is None:  # (the ini's xfail_strict decides, as in that suite)
        return [pytest.mark.xfail(reason=reason)]
    return [pytest.mark.xfail(reason=reason, strict=strict)]


def apply_suite_marks(node: pytest.Item, param: BackendParam) -> None:
    """Skip or xfail the running test as its suite's own backend fixture would.

    Called as the test is set up (in the plugin's autouse fixture), where
    those fixtures act: a skip first, then SciPy's xfail at once (the test
    is not run) and array-api-extra's as a marker (pytest takes it only
    where no xfail marker of the test's own was found at setup, as it does
    for the marker that suite's fixture adds). The markers were checked
    when the test was collected (`suite_marks`).
    """
    made = [
        decorator
        for mark in node.iter_markers()
        if mark.name in SUITE_MARKERS
        for decorator in suite_marks(mark, param)
    ]
    for decorator in made:
        if decorator.name == "skip":
            pytest.skip(decorator.kwargs["reason"])
    for decorator in made:
        if decorator.kwargs.get("run", True) is False:
            pytest.xfail(decorator.kwargs["reason"])
        node.add_marker(decorator)


def member_of(members: type[enum.Enum], param: BackendParam) -> enum.Enum | None:
    """The first member of ``members`` that names ``param``'s variant, or None."""
    if not (isinstance(members, type) and issubclass(members, enum.Enum)):
        msg = f"members must be an Enum class, got {members!r}"
        raise TypeError(msg)
    for member in members:
        value = member.value
        if isinstance(value, str) and names_variant(value, param, _siblings(member)):
            return member
    return None


def names_variant(
    value: str, param: BackendParam, sibling_tags: tuple[str, ...]
) -> bool:
    """Whether ``"<module>[:<tag>]"`` names ``param`` (see the module's docstring).

    ``sibling_tags``: the tags of the other names of the same module (the
    variants they name are not the untagged name's).
    """
    module, _, tag = value.partition(":")
    if _library(module) != param.key:
        return False
    if tag:
        return _tag_names(tag, param)
    return not any(_tag_names(t, param) for t in sibling_tags)


def _tag_names(tag: str, param: BackendParam) -> bool:
    if tag == param.mode:
        return True
    if tag in ("gpu", "cpu"):
        return param.on_gpu == (tag == "gpu")
    return (param.device or "").partition(":")[0] == tag


def _library(module: str) -> str | None:
    """The key of the library whose top-level package ``module`` is in."""
    top = module.partition(".")[0]
    for adapter in ADAPTERS.values():
        if adapter.module == top:
            return adapter.key
    return None


def _siblings(member: enum.Enum) -> tuple[str, ...]:
    """The tags of the other members of ``member``'s enum with its module."""
    module = str(member.value).partition(":")[0]
    tags = []
    for other in type(member):
        value = other.value
        if other is member or not isinstance(value, str):
            continue
        other_module, _, tag = value.partition(":")
        if other_module == module and tag:
            tags.append(tag)
    return tuple(tags)


def _extra_reason(
    mark: pytest.Mark, param: BackendParam
) -> tuple[str | None, bool | None]:
    """array-api-extra's marker: the reason where it names ``param``, and ``strict``."""
    allowed = {"reason"} | ({"strict"} if mark.name.startswith("xfail") else set())
    if len(mark.args) != 1:
        _refuse(mark, f"takes one library, got {mark.args!r}")
    if set(mark.kwargs) - allowed:
        _refuse(mark, f"takes {sorted(allowed)} by keyword, got {sorted(mark.kwargs)}")
    strict = mark.kwargs.get("strict")
    if strict is not None and not isinstance(strict, bool):
        _refuse(mark, f"takes strict=True, False or None, got {strict!r}")
    library = mark.args[0]
    if not (isinstance(library, enum.Enum) and isinstance(library.value, str)):
        _refuse(
            mark, f"takes an enum member valued '<module>[:<tag>]', got {library!r}"
        )
    named = names_variant(library.value, param, _siblings(library))
    if not named:
        return None, strict
    reason = mark.kwargs.get("reason")
    return f"{param.id}: {reason or library}", strict


#: SciPy's marker: its keywords.
_SCIPY_KEYWORDS = frozenset(
    {"cpu_only", "np_only", "eager_only", "reason", "exceptions"}
)


def _scipy_reason(mark: pytest.Mark, param: BackendParam) -> str | None:
    """SciPy's marker: the reason where it names ``param``'s variant, else None."""
    if set(mark.kwargs) - _SCIPY_KEYWORDS:
        extra = sorted(set(mark.kwargs) - _SCIPY_KEYWORDS)
        _refuse(mark, f"takes {sorted(_SCIPY_KEYWORDS)} by keyword, got {extra}")
    reason = mark.kwargs.get("reason")
    args = mark.args
    if args:
        if len(args) > 2 or (len(args) == 2 and not isinstance(args[1], bool | None)):
            _refuse(mark, f"takes one backend (and a condition), got {args!r}")
        backend = args[0]
        if not isinstance(backend, str) or _library(backend) is None:
            _refuse(mark, f"names {backend!r}, a module of no library xpkit knows")
        both = [
            k
            for k in ("cpu_only", "np_only", "eager_only", "exceptions")
            if k in mark.kwargs
        ]
        if both:
            _refuse(mark, f"takes {both[0]}= or a backend, not both")
        if len(args) == 2 and not reason:
            _refuse(mark, f"takes a reason with its condition, got {args!r}")
        if (len(args) == 2 and not args[1]) or _library(backend) != param.key:
            return None
        return f"{param.id}: {reason or f'not run with {backend}'}"
    excepted = set()
    for name in mark.kwargs.get("exceptions", ()):
        key = _library(name) if isinstance(name, str) else None
        if key is None:
            _refuse(
                mark, f"exceptions names {name!r}, a module of no library xpkit knows"
            )
        excepted.add(key)
    if param.key in excepted:
        return None
    if mark.kwargs.get("np_only", False):
        named, why = param.key != _library("numpy"), "only run with NumPy"
    elif mark.kwargs.get("cpu_only", False):
        named, why = param.on_gpu, "only run on a CPU"
    elif mark.kwargs.get("eager_only", False):
        lazy = ADAPTERS[param.key].module_fixture_mode is not None
        named, why = lazy, "only run with libraries that compute eagerly"
    else:
        return None
    return f"{param.id}: {reason or why}" if named else None


def _refuse(mark: pytest.Mark, what: str) -> NoReturn:
    msg = f"@pytest.mark.{mark.name} {what}"
    raise pytest.UsageError(msg)
