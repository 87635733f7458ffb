"""pytest plugin: run a test once per backend available on this machine.

Registered through the ``pytest11`` entry point, so installing xpkit is
enough. Fixtures: ``xpkit_backend`` (a `Backend`) and ``xp`` (its namespace).

- Choose backends with ``--xpkit-backends=numpy,torch`` or the
  ``XPKIT_BACKENDS`` environment variable (library keys such as ``torch`` or
  ids such as ``torch-cpu``).
- ``@pytest.mark.xpkit_skip(backends, reason=...)`` and
  ``@pytest.mark.xpkit_xfail(backends, reason=...)`` skip or (strictly) xfail a
  test on some backends.
- ``array_api_strict-strictest`` runs array-api-strict with boolean indexing
  and data-dependent shapes switched off, for the duration of each test.
- ``<backend>-jit``, ``<backend>-lazy`` and ``<backend>-compile`` (the modes
  each adapter lists) run the functions a test module declares with
  `xpkit.testing.lazy_xp_function` jitted, with lazy computes counted, or
  compiled whole; they are offered to the tests of modules that declare
  such functions.
- On a device without float64 (JAX without x64, MPS) the float64 narrowing
  is reported once, in the session's summary, instead of as a
  `PrecisionWarning` inside whichever test narrows first.
- A library that is not installed, or has no device here, is listed and
  skipped with the reason, never silently dropped; a GPU backend appears only
  where the GPU does.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from typing import Any

import pytest

from .._adapters import ADAPTERS
from ._lazy import has_lazy_functions, replaced_functions, tagged

__all__ = ["BackendParam", "available_backend_params"]

ENV_VAR = "XPKIT_BACKENDS"


class BackendParam:
    """One backend to run tests on: a library key, a device, an id."""

    def __init__(
        self,
        key: str,
        device: str | None,
        ident: str,
        skip: str = "",
        mode: str = "",
    ) -> None:
        self.key = key
        self.device = device
        self.id = ident
        self.skip = skip
        #: "" (as written), "strictest", or one of the adapter's `test_modes`.
        self.mode = mode

    @property
    def strictest(self) -> bool:
        """Whether this runs array-api-strict at its strictest flags."""
        return self.mode == "strictest"

    @property
    def capabilities(self) -> frozenset[str]:
        """What the library has of `CAPABILITIES` in this variant.

        The strictest flags switch data-dependent shapes off.
        """
        has = ADAPTERS[self.key].capabilities
        return has - {"data_dependent_shapes"} if self.strictest else has

    def __repr__(self) -> str:
        return f"BackendParam({self.id!r})"


@functools.cache
def available_backend_params() -> tuple[BackendParam, ...]:
    """`backend_inventory`, array-api-strict's strictest variant, the lazy variants.

    A library that is not installed (or has no device) gives one parameter
    that is skipped with the reason. Each usable backend whose adapter has
    `Adapter.test_modes` (``jit``, ``lazy``, ``compile``) adds one variant per
    mode, ``<id>-<mode>``.
    """
    from .._select import backend_inventory

    params: list[BackendParam] = []
    for entry in backend_inventory():
        params.append(BackendParam(entry.key, entry.device, entry.name, entry.reason))
        if entry.reason:
            continue
        adapter = ADAPTERS[entry.key]
        if adapter.strictest_mode() is not None:
            ident = f"{entry.name}-strictest"
            params.append(
                BackendParam(entry.key, entry.device, ident, mode="strictest")
            )
        for mode in adapter.test_modes:
            ident = f"{entry.name}-{mode}"
            params.append(BackendParam(entry.key, entry.device, ident, mode=mode))
    return tuple(params)


def _selected(config: pytest.Config) -> list[str] | None:
    raw = config.getoption("xpkit_backends") or os.environ.get(ENV_VAR, "")
    names = [n.strip() for n in raw.split(",") if n.strip()]
    return names or None


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--xpkit-backends``."""
    group = parser.getgroup("xpkit")
    group.addoption(
        "--xpkit-backends",
        dest="xpkit_backends",
        default=None,
        help=(
            "comma-separated backends for the xpkit_backend fixture: library keys "
            f"({','.join(ADAPTERS)}) or backend ids (<key>-<device>, as the test "
            f"ids show); env var {ENV_VAR}"
        ),
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers; reject unknown names in ``--xpkit-backends``."""
    wanted = _selected(config)
    if wanted is not None:
        params = available_backend_params()
        known = {p.key for p in params} | {p.id for p in params}
        missing = [w for w in wanted if w not in known]
        if missing:
            # "torch-cuda" on a host without CUDA: a library xpkit knows, on a
            # device this machine lacks; anything else is not a backend at all.
            absent = [w for w in missing if w.split("-", 1)[0] in ADAPTERS]
            unknown = [w for w in missing if w not in absent]
            parts = []
            if absent:
                parts.append(f"backends not available on this machine {absent}")
            if unknown:
                parts.append(f"unknown backends {unknown}")
            msg = (
                f"--xpkit-backends / {ENV_VAR} names {' and '.join(parts)}; "
                f"available here: {', '.join(sorted(known))}"
            )
            raise pytest.UsageError(msg)
    config.addinivalue_line(
        "markers",
        "xpkit_skip(backends, reason): skip on these backends (library keys or ids)",
    )
    config.addinivalue_line(
        "markers",
        "xpkit_xfail(backends, reason): expect failure (strictly) on these backends",
    )
    config.addinivalue_line(
        "markers",
        "xpkit_requires(*capabilities): skip on backends without these "
        "(linalg, data_dependent_shapes)",
    )
    config.addinivalue_line("markers", "xpkit_cpu_only(reason): skip on GPU backends")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``xpkit_backend`` over the chosen available backends."""
    if "xpkit_backend" not in metafunc.fixturenames:
        return
    params = available_backend_params()
    wanted = _selected(metafunc.config)
    if wanted is not None:
        params = tuple(p for p in params if p.key in wanted or p.id in wanted)
    if not has_lazy_functions(metafunc.module):  # the lazy variants would be copies
        params = tuple(p for p in params if p.mode not in _LAZY_MODES)
    values = [pytest.param(p, id=p.id, marks=_marks_for(metafunc, p)) for p in params]
    metafunc.parametrize("xpkit_backend", values, indirect=True, scope="session")


def _marks_for(
    metafunc: pytest.Metafunc, param: BackendParam
) -> list[pytest.MarkDecorator]:
    marks: list[pytest.MarkDecorator] = []
    if param.skip:
        marks.append(pytest.mark.skip(reason=param.skip))
    for mark in metafunc.definition.iter_markers("xpkit_skip"):
        if _matches(mark, param):
            marks.append(pytest.mark.skip(reason=_reason(mark, "xpkit_skip")))
    for mark in metafunc.definition.iter_markers("xpkit_cpu_only"):
        if param.device is not None and ADAPTERS[param.key].is_gpu(param.device):
            reason = mark.kwargs.get("reason") or (mark.args[0] if mark.args else "")
            if not reason:
                msg = "@pytest.mark.xpkit_cpu_only needs a reason"
                raise pytest.UsageError(msg)
            marks.append(pytest.mark.skip(reason=f"{param.id}: {reason}"))
    for mark in metafunc.definition.iter_markers("xpkit_requires"):
        missing = _missing(mark, param)
        if missing:
            marks.append(
                pytest.mark.skip(reason=f"{param.id} has no {' and no '.join(missing)}")
            )
    for mark in metafunc.definition.iter_markers("xpkit_xfail"):
        if _matches(mark, param):
            marks.append(
                pytest.mark.xfail(reason=_reason(mark, "xpkit_xfail"), strict=True)
            )
    return marks


def _missing(mark: pytest.Mark, param: BackendParam) -> list[str]:
    """The capabilities ``xpkit_requires`` names that ``param``'s backend lacks."""
    from .._adapters import CAPABILITIES

    unknown = [c for c in mark.args if c not in CAPABILITIES]
    if unknown or not mark.args:
        msg = (
            f"@pytest.mark.xpkit_requires names {unknown or 'nothing'}; capabilities: "
            f"{', '.join(CAPABILITIES)}"
        )
        raise pytest.UsageError(msg)
    return [c for c in mark.args if c not in param.capabilities]


def _matches(mark: pytest.Mark, param: BackendParam) -> bool:
    backends = mark.args[0] if mark.args else mark.kwargs.get("backends", ())
    if isinstance(backends, str):
        backends = [backends]
    for name in backends:
        key = next((k for k in ADAPTERS if name == k or name.startswith(f"{k}-")), None)
        if key is None:
            msg = (
                f"@pytest.mark.{mark.name} names unknown backend {name!r}; use library "
                f"keys ({', '.join(ADAPTERS)}) or backend ids (<key>-<device>)"
            )
            raise pytest.UsageError(msg)
    return any(b in (param.key, param.id) for b in backends)


def _reason(mark: pytest.Mark, name: str) -> str:
    reason = mark.kwargs.get("reason") or (mark.args[1] if len(mark.args) > 1 else "")
    if not reason:
        msg = f"@pytest.mark.{name} needs a reason"
        raise pytest.UsageError(msg)
    return str(reason)


#: Backend name -> the narrowings its device makes (reported in the summary).
_NARROWED: dict[str, list[tuple[str, str]]] = {}


@functools.cache
def _backend(key: str, device: str | None) -> Any:
    from .._backend import Backend
    from .._dtypes import announce_narrowing
    from .._resolve import is_backend_name

    if not is_backend_name(key):  # registry keys always are
        msg = f"{key!r} is not a backend name"
        raise ValueError(msg)
    backend = Backend(key, device=device)
    narrowed = announce_narrowing(backend.name, backend.dtypes)
    if narrowed:
        _NARROWED[backend.name] = narrowed
    return backend


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line per backend that narrowed 64-bit dtypes during the session."""
    for name, pairs in sorted(_NARROWED.items()):
        shown = ", ".join(f"{wide} -> {narrow}" for wide, narrow in pairs)
        terminalreporter.write_line(
            f"xpkit: {name} has no 64-bit dtypes; requests became 32-bit ({shown})"
        )


@pytest.fixture(scope="session")
def xpkit_backend(request: pytest.FixtureRequest) -> Any:
    """The `Backend` this test instance runs on (NumPy when not parametrized)."""
    param = getattr(request, "param", None)
    if param is None:
        return _backend("numpy", None)
    return _backend(param.key, param.device)


@pytest.fixture(scope="session")
def xp(xpkit_backend: Any) -> Any:
    """The Array API namespace of ``xpkit_backend``."""
    return xpkit_backend.xp


#: The variants that change how the test module's tagged functions run.
_LAZY_MODES = frozenset({"jit", "lazy", "compile"})


@pytest.fixture(autouse=True)
def _xpkit_mode(request: pytest.FixtureRequest) -> Iterator[None]:
    """Run the test in its variant's mode: strictest flags, jit, lazy, compiled."""
    callspec = getattr(request.node, "callspec", None)
    param = callspec.params.get("xpkit_backend") if callspec is not None else None
    mode = getattr(param, "mode", "")
    if not mode:
        yield
        return
    assert param is not None
    adapter = ADAPTERS[param.key]
    context: contextlib.AbstractContextManager[Any]
    if mode == "strictest":
        context = adapter.strictest_mode()
    else:  # one of the adapter's test modes
        module = request.module
        context = adapter.lazy_context(
            mode,
            request,
            _backend(param.key, param.device).xp,
            tagged(module),
            functools.partial(replaced_functions, module),
        )
    with context:
        yield
