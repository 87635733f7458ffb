"""The variants the pytest plugin runs a test on, and how a user chooses them.

A variant is a library on a device in a mode, with an id: ``numpy``,
``torch-cpu``, ``torch-cpu-compile``, ``array_api_strict-device1``. Every
adapter says which of its devices and modes make variants (`Adapter.test_modes`,
`Adapter.test_devices`, `Adapter.shape_only_devices`); this module lists them
for this machine and picks the ones ``--xpkit-backends`` names.
"""

from __future__ import annotations

import fnmatch
import functools
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

import pytest

from .._adapters._registry import ADAPTERS
from .._backend import Backend
from .._facts import read_only as read_only_facts
from .._resolve import is_backend_name
from ._suite_markers import member_of

if TYPE_CHECKING:
    import enum

    from .._adapters._base import Adapter
    from .._adapters._types import BackendName

__all__ = [
    "BackendParam",
    "available_backend_params",
    "lazy_in_place",
    "libraries_named",
    "matches",
    "other_device",
    "selected",
    "unmatched",
    "variant_backend",
]

#: A suite's own enum of backends (`BackendParam.member_of`).
E = TypeVar("E", bound="enum.Enum")

#: The variants that change how the test module's declared functions run.
LAZY_MODES = frozenset({"jit", "lazy", "compile"})
#: The floating dtypes the ``xpkit_dtype`` fixture runs a test in, where held.
FLOATING = ("float32", "float64")


class BackendParam:
    """One variant to run tests on: a library key, a device, an id, a mode."""

    def __init__(
        self,
        key: str,
        device: str | None,
        ident: str,
        skip: str = "",
        mode: str = "",
        *,
        shape_only: bool = False,
    ) -> None:
        self.key = key
        self.device = device
        self.id = ident
        self.skip = skip
        #: "" (as written), "strictest", "readonly", or one of the adapter's
        #: `test_modes`.
        self.mode = mode
        #: A device without values (torch's meta): for marked tests only.
        self.shape_only = shape_only

    @property
    def strictest(self) -> bool:
        """Whether this runs array-api-strict at its strictest flags."""
        return self.mode == "strictest"

    @property
    def read_only(self) -> bool:
        """Whether every array ``xp`` returns is read-only (``numpy-readonly``)."""
        return self.mode == "readonly"

    @property
    def lazy(self) -> bool:
        """Whether this runs the declared functions jitted, lazily or compiled."""
        return self.mode in LAZY_MODES

    @property
    def on_gpu(self) -> bool:
        """Whether this runs on a GPU."""
        return self.device is not None and ADAPTERS[self.key].is_gpu(self.device)

    def member_of(self, members: type[E]) -> E:
        """The member of a suite's own enum of backends that names this variant.

        For a fixture that aliases the suite's own (array-api-extra's
        ``library``: ``return xpkit_variant.member_of(Backend)``): members
        valued ``"<module>[:<tag>]"`` name variants as the suite's own
        markers do (`xpkit.testing._suite_markers`). A variant that no
        member names (a library the suite does not run) is skipped, saying so.
        """
        member = member_of(members, self)
        if member is None:
            pytest.skip(f"{self.id}: no member of {members.__qualname__} names it")
        return member  # type: ignore[return-value]

    @property
    def capabilities(self) -> frozenset[str]:
        """What the library has of `CAPABILITIES` in this variant.

        The strictest flags switch data-dependent shapes and the ``linalg``
        extension off (`Adapter.strictest_lacks`).
        """
        adapter = ADAPTERS[self.key]
        has = adapter.capabilities
        return has - adapter.strictest_lacks if self.strictest else has

    def __repr__(self) -> str:
        return f"BackendParam({self.id!r})"


@functools.cache
def available_backend_params(
    keys: frozenset[str] | None = None,
) -> tuple[BackendParam, ...]:
    """Every variant of every library on this machine, skipped ones with the reason.

    Per backend of a library (its CPU, each kind of GPU): the backend
    itself; array-api-strict's strictest variant; NumPy's read-only one
    (`Adapter.read_only_namespace`); one variant per emulated
    device (`Adapter.test_devices`) and per device without values
    (`Adapter.shape_only_devices`, for marked tests); one per mode of
    `Adapter.test_modes` (``<id>-<mode>``). A library that is not installed
    (or has no device) gives one parameter, skipped with the reason.
    ``keys``: only these libraries (the others are not imported).
    """
    params: list[BackendParam] = []
    for key, adapter in ADAPTERS.items():
        if keys is not None and key not in keys:
            continue
        for device, name, reason in _backends_of(adapter):
            params.append(BackendParam(key, device, name, reason))
            if reason:
                continue
            if adapter.test_strictest:
                params.append(
                    BackendParam(key, device, f"{name}-strictest", mode="strictest")
                )
            if adapter.test_read_only:
                params.append(
                    BackendParam(key, device, f"{name}-readonly", mode="readonly")
                )
            if device is not None and not adapter.is_gpu(device):
                params += _device_params(key)
            for mode in adapter.test_modes:
                params.append(BackendParam(key, device, f"{name}-{mode}", mode=mode))
    return tuple(params)


def _backends_of(adapter: Adapter) -> list[tuple[str | None, str, str]]:
    """(device, backend name, why not) per backend of the library, as `xpkit info` lists them.

    Its CPU device and each kind of GPU, first device of each; a library
    that is not installed or sees no device gives one entry with the reason.
    """
    if not adapter.is_installed():
        reason = (
            f"{adapter.label} is not installed (pip install 'xpkit[{adapter.extra}]')"
        )
        return [(None, adapter.key, reason)]
    try:
        devices = adapter.devices()
    except Exception as exc:  # noqa: BLE001 - a broken install: report it
        said = f"{adapter.label} is installed but fails to load: {type(exc).__name__}: {exc}"
        return [(None, adapter.key, said)]
    if not devices:
        return [(None, adapter.key, f"{adapter.label} sees no device on this machine")]
    found: dict[str, str] = {}
    for device in devices:  # one per backend name (cuda, not also cuda:1)
        found.setdefault(adapter.backend_name(device), device)
    return [(device, name, "") for name, device in found.items()]


def libraries_named(names: Sequence[str]) -> frozenset[str] | None:
    """The libraries ``--xpkit-backends`` names can select; None: any of them.

    A pattern, ``all``, or names that only leave out (``-ndonnx``) may
    select any library; an id or key names its library
    (``array_api_strict-device1``: ``array_api_strict``); a name of no
    library selects nothing.
    """
    keys = set()
    taken = [n for n in names if not n.startswith("-")]
    for name in taken:
        if name == "all" or any(c in name for c in "*?["):
            return None
        key = name.split("-", 1)[0]
        if key in ADAPTERS:
            keys.add(key)
    return frozenset(keys) if taken else None


def _device_params(key: str) -> list[BackendParam]:
    """The emulated and shape-only devices of library ``key`` (once, with its CPU)."""
    adapter = ADAPTERS[key]
    listed = {adapter.canonical_device(d) for d in adapter.devices()}
    params = []
    for device in adapter.test_devices:
        ident = adapter.variant_name(device)
        reason = ""
        if adapter.canonical_device(device) not in listed:
            version = adapter.version() or "installed here"
            reason = f"{adapter.label} {version} has no device {device!r}"
        params.append(BackendParam(key, device, ident, reason))
    params += [
        BackendParam(key, device, adapter.variant_name(device), shape_only=True)
        for device in adapter.shape_only_devices
    ]
    return params


def matches(name: str, param: BackendParam, ids: frozenset[str]) -> bool:
    """Whether ``--xpkit-backends`` name ``name`` selects ``param``.

    A variant id selects that variant alone (``dask``, ``torch-cpu``); a
    pattern with ``*``, ``?`` or ``[`` selects the ids it matches
    (``dask*``, ``*-compile``); a library key that is no variant's id
    (``torch``, ``jax``) selects all of that library's variants.
    """
    if any(c in name for c in "*?["):
        return fnmatch.fnmatchcase(param.id, name)
    if name == param.id:
        return True
    return name not in ids and name == param.key


def lazy_in_place(params: Sequence[BackendParam]) -> tuple[BackendParam, ...]:
    """``params`` with each eager variant left out where its lazy one replaces it.

    For a test module that declares lazy functions, under the
    ``xpkit_lazy_in_place`` ini option: a library whose lazy mode is the one
    array-api-extra's harness runs its namespace in (`Adapter.module_fixture_mode`:
    JAX jitted, Dask lazy) runs that variant alone on each device, as such
    a harness means "jax" and "dask" there. Other variants (torch's
    ``-compile``, which adds to the eager one; ``-strictest``,
    ``-readonly``) are kept.
    """
    replaced = {
        (p.key, p.device)
        for p in params
        if p.lazy and p.mode == ADAPTERS[p.key].module_fixture_mode
    }
    return tuple(p for p in params if p.mode or (p.key, p.device) not in replaced)


def selected(
    params: Sequence[BackendParam], names: Sequence[str]
) -> tuple[BackendParam, ...]:
    """The variants of ``params`` that ``names`` select (see `matches`).

    ``all`` selects every variant; ``-<name>`` leaves out what ``<name>``
    selects (``all,-ndonnx``, ``torch,-*-compile``); names that only leave
    out start from every variant. ``params`` holds every variant of each
    library it holds any of.
    """
    ids = frozenset(p.id for p in params)
    taken = [n for n in names if not n.startswith("-")] or ["all"]
    left_out = [n[1:] for n in names if n.startswith("-")]
    return tuple(
        p
        for p in params
        if any(_picks(n, p, ids) for n in taken)
        and not any(_picks(n, p, ids) for n in left_out)
    )


def unmatched(params: Sequence[BackendParam], names: Sequence[str]) -> list[str]:
    """The names of ``names`` that select no variant of ``params`` (nor leave one out)."""
    ids = frozenset(p.id for p in params)
    return [
        n for n in names if not any(_picks(n.removeprefix("-"), p, ids) for p in params)
    ]


def _picks(name: str, param: BackendParam, ids: frozenset[str]) -> bool:
    return name == "all" or matches(name, param, ids)


def other_device(param: BackendParam) -> str | None:
    """A device of ``param``'s library other than the one it runs on; None: none.

    From the CPU, an emulated device (array-api-strict's ``device1``), then
    one without values (torch's ``meta``); from any other device (a GPU, an
    emulated one, meta), the library's first device. None on a variant
    that tests strictness (``-strictest``): a second device there would
    mix two concerns, and array-api-extra's harness gives it none.
    """
    if param.skip or param.strictest:
        return None
    adapter = ADAPTERS[param.key]
    listed = [adapter.canonical_device(d) for d in adapter.devices()]
    own = adapter.canonical_device(param.device) if param.device else listed[0]
    extra = [*adapter.test_devices, *adapter.shape_only_devices]
    order = [*extra, *listed] if own == listed[0] else [*listed, *extra]
    for device in order:
        name = adapter.canonical_device(device)
        if name != own and (name in listed or device in adapter.shape_only_devices):
            return device
    return None


#: What a library warned while a variant's `Backend` was first made (it is
#: imported then): library key -> "Category: message" lines, for the summary.
IMPORT_WARNINGS: dict[str, list[str]] = {}


def variant_backend(key: str, device: str | None, read_only: bool = False) -> Backend:
    """The `Backend` of a variant, made once per session (per library settings).

    ``read_only``: the library's `Backend` whose namespace and creation
    functions return read-only arrays (`Adapter.read_only_namespace`); its
    computations (``matmul``, ``sort``, ...) are the library's own.

    A warning the library raises meanwhile (ndonnx without onnxruntime
    warns at import) is recorded in `IMPORT_WARNINGS`, not raised: under
    ``filterwarnings = error`` it failed every test of the library, in the
    session fixture whose error pytest keeps for them all, and it is no
    test's doing.
    """
    if not is_backend_name(key):  # registry keys always are
        msg = f"{key!r} is not a backend name"
        raise ValueError(msg)
    # (JAX's x64, which the plugin's xpkit_x64 switches, changes the Backend)
    return _made(key, device, read_only, ADAPTERS[key].config_token())


@functools.cache
def _made(
    key: BackendName, device: str | None, read_only: bool, token: object
) -> Backend:
    """`variant_backend`'s Backends, one per library settings ``token``."""
    if read_only:
        plain = _made(key, device, False, token)
        return Backend._of(read_only_facts(plain._facts))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        backend = Backend(key, device=device)
    lines = IMPORT_WARNINGS.setdefault(key, [])
    for w in seen:
        line = f"{w.category.__name__}: {w.message}"
        if line not in lines:
            lines.append(line)
    if not lines:
        del IMPORT_WARNINGS[key]
    return backend
