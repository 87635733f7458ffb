"""The ``xpkit`` logger, made on first use (importing ``logging`` costs import time)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

__all__ = ["logger"]


def logger() -> logging.Logger:
    """``logging.getLogger("xpkit")``."""
    import logging

    return logging.getLogger("xpkit")
