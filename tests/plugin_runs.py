"""For tests that run xpkit's pytest plugin on a test file (``pytester``)."""

from __future__ import annotations

import re

import pytest

from xpkit._adapters import ADAPTERS


def needs(*keys: str) -> None:
    """Skip, naming the extra, unless every library of ``keys`` is installed."""
    for key in keys:
        adapter = ADAPTERS[key]
        if not adapter.is_installed():
            pytest.skip(f"needs {adapter.label}: pip install 'xpkit[{adapter.extra}]'")


def outcomes(result: pytest.RunResult) -> dict[str, str]:
    """Test id -> PASSED/FAILED/SKIPPED/XFAIL, from a ``-v`` run's output."""
    found = {}
    for line in result.stdout.lines:
        match = re.match(r"\S+::(\S+) (PASSED|FAILED|SKIPPED|XFAIL)", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found
