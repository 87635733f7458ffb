"""Helpers shared by xpkit's tests."""

from __future__ import annotations


def tolerance(dtype_name: str) -> float:
    """Relative tolerance for comparing a backend's result with NumPy's."""
    return 1e-5 if dtype_name in {"float32", "complex64"} else 1e-10
