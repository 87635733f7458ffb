"""pytest plugin: run a test once per backend available on this machine.

Registered through the ``pytest11`` entry point, so installing xpkit is
enough. Fixtures: ``xpkit_backend`` (a `Backend`) and ``xp`` (its namespace).
Choose backends with ``--xpkit-backends=numpy,torch`` or the
``XPKIT_BACKENDS`` environment variable (library keys or backend ids).
"""

from __future__ import annotations

import functools
import os
from typing import Any

import pytest

from .._adapters import ADAPTERS

__all__ = ["BackendParam", "available_backend_params"]

ENV_VAR = "XPKIT_BACKENDS"


class BackendParam:
    """One backend to run tests on: a library key, a device, an id."""

    def __init__(
        self, key: str, device: str | None, ident: str, skip: str = ""
    ) -> None:
        self.key = key
        self.device = device
        self.id = ident
        self.skip = skip

    def __repr__(self) -> str:
        return f"BackendParam({self.id!r})"


@functools.cache
def available_backend_params() -> tuple[BackendParam, ...]:
    """Every library in the registry; its CPU device and each GPU kind.

    A library that is not installed (or has no device) gives one parameter
    that is skipped with the reason, never silently dropped.
    """
    params: list[BackendParam] = []
    for adapter in ADAPTERS.values():
        if not adapter.is_installed():
            reason = f"{adapter.label} is not installed (pip install 'xpkit[{adapter.extra}]')"
            params.append(BackendParam(adapter.key, None, adapter.key, reason))
            continue
        try:
            devices = adapter.devices()
        except Exception as exc:  # noqa: BLE001 - a broken driver: report, skip
            params.append(BackendParam(adapter.key, None, adapter.key, f"{exc}"))
            continue
        if not devices:
            reason = f"{adapter.label} sees no device on this machine"
            params.append(BackendParam(adapter.key, None, adapter.key, reason))
            continue
        seen: set[str] = set()
        for dev in devices:
            name = adapter.backend_name(dev)
            if name in seen:
                continue  # one parameter per backend name (cuda, not cuda:1)
            seen.add(name)
            params.append(BackendParam(adapter.key, dev, name))
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
            "comma-separated backends for the xpkit_backend fixture (library keys "
            f"such as numpy,torch or ids such as torch-cpu); env var {ENV_VAR}"
        ),
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``xpkit_backend`` over the chosen available backends."""
    if "xpkit_backend" not in metafunc.fixturenames:
        return
    params = available_backend_params()
    wanted = _selected(metafunc.config)
    if wanted is not None:
        known = {p.key for p in params} | {p.id for p in params}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            msg = (
                f"--xpkit-backends names unknown backends {unknown}; "
                f"known: {', '.join(sorted(known))}"
            )
            raise pytest.UsageError(msg)
        params = tuple(p for p in params if p.key in wanted or p.id in wanted)
    values = [
        pytest.param(
            p, id=p.id, marks=pytest.mark.skip(reason=p.skip) if p.skip else ()
        )
        for p in params
    ]
    metafunc.parametrize("xpkit_backend", values, indirect=True, scope="session")


@pytest.fixture(scope="session")
def xpkit_backend(request: pytest.FixtureRequest) -> Any:
    """The `Backend` this test instance runs on."""
    from .._backend import Backend

    param = getattr(request, "param", None)
    if param is None:
        return Backend("numpy")
    return Backend(param.key, device=param.device)


@pytest.fixture(scope="session")
def xp(xpkit_backend: Any) -> Any:
    """The Array API namespace of ``xpkit_backend``."""
    return xpkit_backend.xp
