"""The ``xpkit`` logger, made on first use (importing ``logging`` costs import time)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

__all__ = ["logger"]


_LOGGER: list[logging.Logger] = []


def logger() -> logging.Logger:
    """``logging.getLogger("xpkit")`` (made once)."""
    if not _LOGGER:
        import logging

        _LOGGER.append(logging.getLogger("xpkit"))
    return _LOGGER[0]
