"""Both checkers must report every line marked ``# error`` (and no other)."""

from __future__ import annotations

from typing import assert_type

from xpkit import Backend

Backend("nosuch")  # error
Backend("Numpy")  # error
Backend("numpy")


def from_config(name: str) -> None:
    Backend(name)  # error


# The assertions can fail: a wrong assert_type is reported too.
assert_type(Backend("numpy").asarray([1.0]), int)  # error
