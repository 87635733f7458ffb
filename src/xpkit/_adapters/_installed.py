"""Whether a library is installed, and its version, asked without importing it.

What `Adapter.is_installed`, `Adapter.version` and `Adapter.require` answer
with (`xpkit info` and the registry ask every adapter).
"""

from __future__ import annotations

import sys

__all__ = ["installed", "missing_library", "version_of"]


def installed(module: str) -> bool:
    """Whether the top-level ``module`` can be imported, without importing it.

    A ``None`` entry in `sys.modules` (``sys.modules["torch"] = None``, how
    Python and test suites mark a package unavailable) counts as not
    installed: importing it would raise `ImportError`.
    """
    if module in sys.modules:
        return sys.modules[module] is not None
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # pragma: no cover - broken installs
        return False


def version_of(distributions: tuple[str, ...]) -> str | None:
    """The version of the first of ``distributions`` that is installed, or None."""
    from importlib.metadata import PackageNotFoundError, version

    for dist in distributions:
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None


def missing_library(key: str, label: str, extra: str) -> ImportError:
    """The error of a backend whose library is not installed, naming its extra."""
    msg = (
        f"backend {key!r} needs {label}, which is not installed; "
        f"install it with: pip install 'xpkit[{extra}]'"
    )
    return ImportError(msg)
