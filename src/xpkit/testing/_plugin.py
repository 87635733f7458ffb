"""pytest plugin: run a test once per backend variant available on this machine.

Registered through the ``pytest11`` entry point, so installing xpkit is
enough. Fixtures: ``xpkit_backend`` (a `Backend`), ``xp`` (its namespace)
and ``xpkit_dtype`` (each floating dtype the variant's device holds).

- Variants: each library's backends (``numpy``, ``torch-cpu``,
  ``torch-cuda``, ``jax-cpu``, ``dask``, ...); array-api-strict's emulated
  devices (``array_api_strict-device1``: anything created without
  ``device=`` lands elsewhere; ``array_api_strict-no_float64``: no float64,
  as on MPS) and its strictest flags (``array_api_strict-strictest``);
  NumPy with every array ``xp`` and ``xpkit_backend`` make read-only
  (``numpy-readonly``: a write into an input fails there);
  torch's ``meta`` device (``torch-meta``) for tests marked
  ``xpkit_shapes_only``; and ``<backend>-jit``, ``-lazy``, ``-compile`` for
  test modules that declare functions with `xpkit.testing.lazy_xp_function`.
- Choose with ``--xpkit-backends`` or ``XPKIT_BACKENDS``: variant ids
  (``dask`` is eager Dask alone), patterns (``dask*``, ``*-compile``), or
  library keys that are no variant's id (``torch``: all of torch's);
  ``all`` is every variant and ``-<name>`` leaves out what ``<name>``
  selects (``all,-ndonnx``; ``-ndonnx`` alone means the same).
- Fixtures beside ``xpkit_backend`` and ``xp``: ``xpkit_variant`` (the
  variant: ``.id``, library ``.key``, ``.device``, ``.mode``) and
  ``xpkit_device`` (a native device of the variant's library other than the
  one it runs on, where the library has one).
- ``@pytest.mark.xpkit_skip(backends, reason=...)`` and
  ``@pytest.mark.xpkit_xfail(backends, reason=..., strict=True)`` skip or
  xfail a test on some backends, ``xpkit_only(backends)`` skips it on every
  other; ``xpkit_requires``, ``xpkit_cpu_only``.
- Inside a test, `assert_close` compares a result with a NumPy reference
  on the variant's terms (its device; its narrowed dtypes). Narrowing
  (float64 to float32 where the device has none) is reported once, in the
  session's summary, for the dtypes tests asked for, instead of as a
  `PrecisionWarning` inside whichever test narrows first.
- ``lazy_xp_function(func, host_copies=N)`` fails a test in which ``func``
  converts arrays to NumPy more than N times per call (eager variants).
- ``--xpkit-uncovered=mylib`` reports (and fails on) the `capabilities`
  statements of ``mylib`` that no collected test covers (`covers`).
- A library that is not installed, or has no device here, is listed and
  skipped with the reason, never silently dropped; a GPU backend appears only
  where the GPU does.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from .._adapters._registry import ADAPTERS
from .._dtypes import collected_narrowings, collecting_narrowings, forget_narrowings
from ._capabilities import uncovered_statements
from ._host_copies import counted_host_copies
from ._lazy import (
    has_lazy_functions,
    replaced_functions,
    tagged,
    unseen_declarations,
)
from ._markers import (
    MARKER_LINES,
    hold_written_wrong,
    mark_parametrized,
    mark_thread_unsafe,
    marks_for,
    param_marks,
    raise_written_wrong,
)
from ._running import forget_loosened, loosened, running_on
from ._selection import ENV_VAR, check_selection, none_chosen, selected_names
from ._session import switch_back, switch_for_session
from ._suite_markers import apply_suite_marks
from ._variants import (
    FLOATING,
    IMPORT_WARNINGS,
    BackendParam,
    available_backend_params,
    lazy_in_place,
    libraries_named,
    other_device,
    selected,
    variant_backend,
)

if TYPE_CHECKING:
    from types import ModuleType

    from .._adapters._base import Adapter
    from .._adapters._lazy_tags import LazyTags
    from .._backend import Backend
    from .._typing import DType, Namespace, NativeDevice, UserFunction

__all__ = ["BackendParam", "available_backend_params"]


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--xpkit-backends``, ``--xpkit-uncovered`` and the ini options."""
    parser.addini(
        "xpkit_x64",
        type="bool",
        default=False,
        help=(
            "switch on the 64-bit dtypes of the libraries that hold them off by "
            "a process-wide setting ("
            + ", ".join(a.label for a in ADAPTERS.values() if a.has_64_bit_switch)
            + ") for the session, and back off at its end"
        ),
    )
    parser.addini(
        "xpkit_default_float",
        default="",
        help=(
            "float32 or float64: the default floating dtype, for the session, of "
            "the libraries that hold one process-wide ("
            + ", ".join(a.label for a in ADAPTERS.values() if a.has_default_float)
            + "), set back at its end"
        ),
    )
    parser.addini(
        "xpkit_lazy_in_place",
        type="bool",
        default=False,
        help=(
            "in a test module that declares lazy functions, run the "
            + ", ".join(
                f"{a.label} {a.module_fixture_mode}"
                for a in ADAPTERS.values()
                if a.module_fixture_mode is not None
            )
            + " variants in place of their eager ones (as array-api-extra's "
            "harness does), not beside them"
        ),
    )
    group = parser.getgroup("xpkit")
    group.addoption(
        "--xpkit-backends",
        dest="xpkit_backends",
        default=None,
        help=(
            "comma-separated variants for the xpkit_backend fixture: ids as the "
            "test ids show them (<key>-<device>[-<mode>]), patterns with * "
            f"(*-{'{mode}'}), or library keys ({','.join(ADAPTERS)}) that are no "
            "variant's id (all of the library's variants); all: every variant; "
            f"-<name> leaves out what <name> selects (all,-<key>); given more than "
            f"once, the last counts (the command line's over addopts'); env var "
            f"{ENV_VAR}"
        ),
    )
    group.addoption(
        "--xpkit-uncovered",
        dest="xpkit_uncovered",
        default=None,
        help=(
            "comma-separated modules whose @capabilities statements every one "
            "need a collected test that @covers them; the session fails, "
            "naming the rest (try with --collect-only)"
        ),
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers; reject names in ``--xpkit-backends`` that select nothing."""
    wanted = selected_names(config)
    if wanted is not None:
        check_selection(wanted)
    for line in MARKER_LINES:
        config.addinivalue_line("markers", line)
    switch_for_session(config, wanted)


def pytest_sessionstart(session: pytest.Session) -> None:  # noqa: ARG001 - pytest's
    """Forget the narrowings an earlier session in this process met (pytester's)."""
    forget_narrowings()
    forget_loosened()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """The fixtures a variant's test sets up narrow as the test does, any scope.

    (A module-scoped fixture is set up before the test's `_xpkit_mode`:
    its narrowing would be a PrecisionWarning, an error under
    ``filterwarnings = error``.)
    """
    callspec = getattr(item, "callspec", None)
    param = callspec.params.get("xpkit_backend") if callspec is not None else None
    if not isinstance(param, BackendParam) or param.skip:
        yield
        return
    backend = variant_backend(param.key, param.device, param.read_only)
    with collecting_narrowings(ADAPTERS[param.key].variant_name(backend.device)):
        yield


def pytest_unconfigure(config: pytest.Config) -> None:
    """Set back what ``xpkit_x64`` and ``xpkit_default_float`` switched."""
    switch_back(config)


#: The test modules whose unseen declarations were told (once a module).
_TOLD: set[str] = set()


def _warn_unseen(module: ModuleType) -> None:
    """A warning for each function ``module`` declared lazy that it does not hold."""
    if module.__name__ in _TOLD:
        return
    _TOLD.add(module.__name__)
    for name in unseen_declarations(module):
        warnings.warn(
            f"lazy_xp_function({name}) in {module.__name__}: the test module "
            f"does not hold it by a name, so its lazy variants would run it "
            f"eagerly; import it by name (from ... import ...) or list its "
            f"module in lazy_xp_modules",
            pytest.PytestConfigWarning,
            stacklevel=1,
        )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``xpkit_backend`` (and ``xpkit_dtype``) over the chosen variants."""
    if "xpkit_backend" not in metafunc.fixturenames or _overridden(metafunc):
        return
    try:
        _parametrize(metafunc)
    except pytest.UsageError as exc:  # (named by its test: the run stops before any)
        said = pytest.UsageError(f"{exc} (test {metafunc.definition.nodeid})")
        hold_written_wrong(metafunc.config, said)


def _parametrize(metafunc: pytest.Metafunc) -> None:
    wanted = selected_names(metafunc.config)
    if wanted is None:
        params = everything = available_backend_params()
    else:  # only the libraries named are imported
        everything = available_backend_params(libraries_named(wanted))
        params = selected(everything, wanted)
    ids = frozenset(p.id for p in everything)  # what a marker's names mean
    written = list(metafunc.definition.iter_markers())
    _warn_unseen(metafunc.module)
    if not has_lazy_functions(metafunc.module):  # the lazy variants would be copies
        params = tuple(p for p in params if not p.lazy)
    elif metafunc.config.getini("xpkit_lazy_in_place"):
        params = lazy_in_place(params)
    if metafunc.definition.get_closest_marker("xpkit_shapes_only") is None:
        params = tuple(p for p in params if not p.shape_only)
    if not params:  # (an empty parameter set would skip without a reason)
        params = (none_chosen(wanted),)
    if "xpkit_dtype" not in metafunc.fixturenames:
        values = [
            pytest.param(p, id=p.id, marks=marks_for(written, p, ids)) for p in params
        ]
        metafunc.parametrize("xpkit_backend", values, indirect=True, scope="session")
        return
    pairs = []
    for p in params:
        marks = marks_for(written, p, ids)
        if p.skip:
            pairs.append(pytest.param(p, None, id=p.id, marks=marks))
            continue
        held = variant_backend(p.key, p.device).dtypes
        pairs += [
            pytest.param(p, name, id=f"{p.id}-{name}", marks=marks)
            for name in FLOATING
            if name in held
        ]
    metafunc.parametrize(
        ("xpkit_backend", "xpkit_dtype"), pairs, indirect=True, scope="session"
    )


def _overridden(metafunc: pytest.Metafunc) -> bool:
    """Whether a conftest's (or module's) own ``xpkit_backend`` replaces the plugin's.

    Its backend is then the test's: the plugin parametrizes nothing, so
    that no test id names a variant the test did not run on. A fixture of
    that name that takes ``xpkit_backend`` itself wraps the plugin's.
    """
    # (pytest's fixture closure: it has no public form; the closest is last)
    defs = getattr(metafunc, "_arg2fixturedefs", {}).get("xpkit_backend", ())
    for fixturedef in reversed(defs):
        if getattr(fixturedef.func, "__module__", None) == __name__:
            return False
        if "xpkit_backend" not in fixturedef.argnames:
            return True
    return False


def _narrowing_lines() -> list[str]:
    """One line per variant that narrowed a dtype a test asked for, or a comparison."""
    lines = []
    for where, pairs in sorted(collected_narrowings().items()):
        wide = " or ".join(pairs)
        them = "it" if len(pairs) == 1 else "them"
        shown = ", ".join(f"{w} -> {n}" for w, n in pairs.items())
        lines.append(
            f"xpkit: {where} has no {wide}: tests that requested {them} got {shown}"
        )
    for where, decimals in sorted(loosened().items()):
        shown = ", ".join(f"{u} instead of {a}" for a, u in sorted(decimals.items()))
        lines.append(
            f"xpkit: {where} has no float64: assert_array_almost_equal compared "
            f"float32 arrays with float64 ones at decimal={shown}"
        )
    return lines


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Markers on a ``pytest.param`` apply; parametrized tests say they are.

    See `param_marks`, `mark_parametrized` and `mark_thread_unsafe`. A
    marker written wrong (`marks_for`) is a usage error here.
    """
    raise_written_wrong(config)
    param_marks(items)
    mark_parametrized(items)
    mark_thread_unsafe(items, config)


def pytest_collection_finish(session: pytest.Session) -> None:
    """With ``--xpkit-uncovered``: the statements no collected test covers."""
    option = session.config.getoption("xpkit_uncovered")
    if not option:
        return
    covered = [
        mark.args[0]
        for item in session.items
        for mark in item.iter_markers("xpkit_covers")
        if mark.args
    ]
    left: list[str] = []
    for module in (m.strip() for m in option.split(",") if m.strip()):
        try:
            names = uncovered_statements(module, covered)
        except (ImportError, ValueError) as exc:
            msg = f"--xpkit-uncovered: cannot import {module!r} ({exc})"
            raise pytest.UsageError(msg) from exc
        left += [f"{module}.{name}" for name in names]
    session.config.stash[_UNCOVERED] = left


_UNCOVERED = pytest.StashKey[list[str]]()


def _import_lines() -> list[str]:
    return [
        f"xpkit: importing {key} warned (recorded, not raised): {line}"
        for key, found in sorted(IMPORT_WARNINGS.items())
        for line in found
    ]


_FROM_WORKERS = pytest.StashKey[list[str]]()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:  # noqa: ARG001 - xdist's
    """pytest-xdist: keep a worker's summary lines for the controller's summary."""
    lines = getattr(node, "workeroutput", {}).get("xpkit_lines", [])
    node.config.stash.setdefault(_FROM_WORKERS, []).extend(lines)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Uncovered statements fail the session; a worker hands its lines on.

    With ``--xpkit-uncovered``, a session with statements no test covers
    fails; a pytest-xdist worker hands its summary lines to the controller.
    """
    output = getattr(session.config, "workeroutput", None)
    if isinstance(output, dict):
        output["xpkit_lines"] = [*_narrowing_lines(), *_import_lines()]
    if session.config.stash.get(_UNCOVERED, []) and session.exitstatus in (
        pytest.ExitCode.OK,
        pytest.ExitCode.NO_TESTS_COLLECTED,
    ):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The narrowings tests met, the libraries' import warnings, and more.

    Also the statements no test covers (``--xpkit-uncovered``).
    """
    lines = [*_narrowing_lines(), *_import_lines()]
    for line in terminalreporter.config.stash.get(_FROM_WORKERS, []):
        if line not in lines:  # (pytest-xdist: what the workers met)
            lines.append(line)
    for line in lines:
        terminalreporter.write_line(line)
    left = terminalreporter.config.stash.get(_UNCOVERED, None)
    if left is None:
        return
    if not left:
        terminalreporter.write_line(
            "xpkit: every @capabilities statement has a test that covers it"
        )
        return
    terminalreporter.write_line(
        f"xpkit: {len(left)} @capabilities statement(s) no test covers "
        "(mark a test with @covers(func)):"
    )
    for name in left:
        terminalreporter.write_line(f"  {name}")


@pytest.fixture(scope="session")
def xpkit_backend(request: pytest.FixtureRequest) -> Backend:
    """The `Backend` this test instance runs on (NumPy when not parametrized)."""
    param = getattr(request, "param", None)
    if param is None:
        return variant_backend("numpy", None)
    return variant_backend(param.key, param.device, param.read_only)


@pytest.fixture(scope="session")
def xp(xpkit_backend: Backend) -> Namespace:
    """The Array API namespace of ``xpkit_backend``."""
    return xpkit_backend.xp


@pytest.fixture
def xpkit_variant(
    request: pytest.FixtureRequest, xpkit_backend: Backend
) -> BackendParam:
    """The variant this test instance runs on (`BackendParam`).

    ``.id`` as the test id shows it (``array_api_strict-strictest``), the
    library ``.key``, ``.device`` (None: the library's default) and
    ``.mode`` (``""``, ``"strictest"``, ``"readonly"``, ``"jit"``,
    ``"lazy"``, ``"compile"``): what tells ``array_api_strict`` from its
    ``-strictest`` and ``-device1`` siblings, or ``jax-cpu`` from
    ``jax-cpu-jit``.
    """
    callspec = getattr(request.node, "callspec", None)
    param = callspec.params.get("xpkit_backend") if callspec is not None else None
    if isinstance(param, BackendParam):
        return param
    return BackendParam(xpkit_backend.library, None, xpkit_backend.library)


@pytest.fixture
def xpkit_device(xpkit_variant: BackendParam, xpkit_backend: Backend) -> NativeDevice:
    """A native device of the variant's library other than the one it runs on.

    Where the library has one: array-api-strict's ``device1`` from its CPU,
    torch's ``meta`` from the CPU, the CPU from a GPU or an emulated device
    (`other_device`); else (and on ``-strictest``, which tests
    strictness alone) the variant's own device. For tests that an array
    made on a device stays there (array-api-extra's ``device``).
    """
    name = other_device(xpkit_variant)
    if name is None:
        return xpkit_backend.native_device
    return ADAPTERS[xpkit_variant.key].native_device(name)


def _library_namespace(key: str, config: pytest.Config) -> Namespace:
    """The standard namespace of library ``key``; a skip where it does not apply.

    It does not where the library is not installed, or where
    ``--xpkit-backends`` selects none of its variants.
    """
    adapter = ADAPTERS[key]
    if not adapter.is_installed():
        pytest.skip(
            f"{adapter.label} is not installed (pip install 'xpkit[{adapter.extra}]')"
        )
    wanted = selected_names(config)
    if wanted is not None:
        chosen = selected(available_backend_params(libraries_named(wanted)), wanted)
        if not any(p.key == key and not p.skip for p in chosen):
            pytest.skip(f"--xpkit-backends selects no {adapter.label} variant")
    return variant_backend(key, None).xp


def _library_fixture(adapter: Adapter, name: str) -> Callable[..., Namespace]:
    """The fixture ``name``: `_library_namespace` of ``adapter``'s library.

    Where the library has a `Adapter.module_fixture_mode` and the test
    module declares functions, the test runs with them in that mode (JAX's
    jitted, Dask's computes counted), as array-api-extra's ``jnp`` and
    ``da`` fixtures run them.
    """
    mode = adapter.module_fixture_mode

    def fixture(request: pytest.FixtureRequest) -> Iterator[Namespace]:
        xp = _library_namespace(adapter.key, request.config)
        module = request.module
        if mode is None or not has_lazy_functions(module):
            yield xp
            return
        with adapter.lazy_context(
            mode,
            request,
            xp,
            tagged(module),
            functools.partial(replaced_functions, module),
        ):
            yield xp

    fixture.__name__ = name
    fixture.__doc__ = (
        f"{adapter.label}'s standard namespace, for tests of {adapter.label} "
        f"alone; skipped where it is not installed or --xpkit-backends selects "
        "none of its variants (a fixture of this name in a conftest wins)."
        + (
            ""
            if mode is None
            else f" The test module's declared functions run in the {mode!r} "
            "mode, as in that variant."
        )
    )
    made: Callable[..., Namespace] = pytest.fixture(name=name)(fixture)
    return made  # (typed: without pytest installed, mypy reads it as Any)


# A fixture per library that names one (`Adapter.module_fixture`: torch, jnp,
# da), as array-api-extra's and SciPy's suites ask for them.
for _adapter in ADAPTERS.values():
    if _adapter.module_fixture is not None:
        globals()[_adapter.module_fixture] = _library_fixture(
            _adapter, _adapter.module_fixture
        )


@pytest.fixture(scope="session")
def xpkit_dtype(request: pytest.FixtureRequest, xpkit_backend: Backend) -> DType:
    """A floating dtype of ``xp`` the device holds: float32, and float64 where it can.

    The test runs once per dtype (ids ``<variant>-float32``,
    ``<variant>-float64``), as scikit-learn's namespace x device x dtype grid.
    """
    name = getattr(request, "param", None) or "float64"
    return ADAPTERS[xpkit_backend.library].dtype_object(xpkit_backend.xp, name)


@pytest.fixture(autouse=True)
def _xpkit_mode(request: pytest.FixtureRequest) -> Iterator[None]:
    """Run the test in its variant: strictest flags, jit, lazy, compiled, counted."""
    callspec = getattr(request.node, "callspec", None)
    param = callspec.params.get("xpkit_backend") if callspec is not None else None
    if not isinstance(param, BackendParam):
        yield
        return
    apply_suite_marks(request.node, param)
    backend = variant_backend(param.key, param.device, param.read_only)
    adapter = ADAPTERS[param.key]
    with contextlib.ExitStack() as stack:
        stack.enter_context(running_on(backend, param.id))
        where = adapter.variant_name(backend.device)
        stack.enter_context(collecting_narrowings(where))
        if param.strictest:
            stack.enter_context(adapter.strictest_mode())
        if param.lazy:
            module = request.module
            stack.enter_context(
                adapter.lazy_context(
                    param.mode,
                    request,
                    backend.xp,
                    tagged(module),
                    functools.partial(replaced_functions, module),
                )
            )
        elif adapter.key != "numpy" and request.module is not None:
            stack.enter_context(
                replaced_functions(request.module, _host_copies_counted(param, adapter))
            )
        yield


def _host_copies_counted(
    param: BackendParam, adapter: Adapter
) -> Callable[[UserFunction, LazyTags], UserFunction | None]:
    """How `replaced_functions` wraps a function declared with ``host_copies``."""

    def wrap(func: UserFunction, tags: LazyTags) -> UserFunction | None:
        if tags.host_copies is None:
            return None
        return counted_host_copies(func, tags.host_copies, adapter, param.id)

    return wrap
