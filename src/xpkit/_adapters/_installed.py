"""Which library an adapter stands for, and whether it is installed.

Asked without importing the library (`xpkit info` and the registry ask
every adapter): its name, its extra, its version from the installed
distribution.
"""

from __future__ import annotations

import sys
from typing import ClassVar

__all__ = ["Installed"]


class Installed:
    """An adapter's library: its names, and whether it can be imported."""

    #: Key used in ``Backend(key)`` and in the registry.
    key: ClassVar[str] = ""
    #: Top-level module whose presence decides "installed" / "imported".
    module: ClassVar[str] = ""
    #: The optional-dependency extra that installs the library.
    extra: ClassVar[str] = ""
    #: Human name used in messages.
    label: ClassVar[str] = ""

    def is_installed(self) -> bool:
        """Whether the library can be imported, without importing it.

        A ``None`` entry in `sys.modules` (``sys.modules["torch"] = None``, how
        Python and test suites mark a package unavailable) counts as not
        installed: importing it would raise `ImportError`.
        """
        if self.module in sys.modules:
            return sys.modules[self.module] is not None
        import importlib.util

        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):  # pragma: no cover - broken installs
            return False

    def is_imported(self) -> bool:
        """Whether the library has already been imported by someone."""
        return sys.modules.get(self.module) is not None

    def version(self) -> str | None:
        """The library's version, or None when it is not installed."""
        if not self.is_installed():
            return None
        from importlib.metadata import PackageNotFoundError, version

        for dist in self.distributions():
            try:
                return version(dist)
            except PackageNotFoundError:
                continue
        return None

    def distributions(self) -> tuple[str, ...]:
        """Names of the distributions that may install the library."""
        return (self.module.replace("_", "-"),)

    def require(self) -> None:
        """Raise ImportError naming the extra when the library is missing."""
        if not self.is_installed():
            msg = (
                f"backend {self.key!r} needs {self.label}, which is not installed; "
                f"install it with: pip install 'xpkit[{self.extra}]'"
            )
            raise ImportError(msg)
