"""Memory caps that array libraries read from environment variables.

Each function reads what its library reads, as that library parses it, and
says where the cap came from. Values the library would refuse give None here
(the library raises its own error when it starts).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

__all__ = [
    "JAX_DEFAULT_FRACTION",
    "alloc_conf_fraction",
    "cupy_env_limit",
    "jax_arena",
]

#: The share of a GPU's memory JAX's allocator may hold unless told otherwise.
JAX_DEFAULT_FRACTION = 0.75


def _fraction(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and 0 <= value <= 1 else None


def _conf_items(conf: str) -> list[tuple[str, str]]:
    """``key:value`` pairs of an allocator config; commas inside [] belong to a value."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(f"{conf},"):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            key, _, value = conf[start:i].partition(":")
            if key.strip():
                items.append((key.strip(), value.strip()))
            start = i + 1
    return items


def alloc_conf_fraction(
    names: tuple[str, ...], environ: Mapping[str, str] | None = None
) -> tuple[float, str] | None:
    """``per_process_memory_fraction`` of torch's allocator config, and its source.

    torch reads the first of ``names`` that is set (torch 2.13:
    ``PYTORCH_CUDA_ALLOC_CONF``, on ROCm ``PYTORCH_HIP_ALLOC_CONF``, then
    ``PYTORCH_ALLOC_CONF``), a comma-separated list of ``key:value``.
    """
    env = os.environ if environ is None else environ
    for name in names:
        conf = env.get(name)
        if conf is None:
            continue
        for key, value in _conf_items(conf):
            if key == "per_process_memory_fraction":
                fraction = _fraction(value)
                if fraction is None:
                    return None
                return fraction, f"{name} per_process_memory_fraction={value}"
        return None  # torch reads only the first one set
    return None


def cupy_env_limit(
    total: int, environ: Mapping[str, str] | None = None
) -> tuple[int, str] | None:
    """``CUPY_GPU_MEMORY_LIMIT`` in bytes (a byte count or ``"50%"`` of ``total``).

    None when unset, zero (no limit) or unreadable.
    """
    env = os.environ if environ is None else environ
    raw = env.get("CUPY_GPU_MEMORY_LIMIT", "").strip()
    if not raw:
        return None
    if raw.endswith("%"):
        try:
            share = float(raw[:-1]) / 100
        except ValueError:
            return None
        limit = int(total * share) if math.isfinite(share) and 0 <= share <= 1 else 0
    else:
        limit = int(raw) if raw.isdigit() else 0
    if not limit:
        return None
    return limit, f"CUPY_GPU_MEMORY_LIMIT={raw}"


def jax_arena(environ: Mapping[str, str] | None = None) -> str:
    """How JAX's allocator sized its arena on each GPU, as jaxlib reads it.

    ``XLA_PYTHON_CLIENT_ALLOCATOR=platform`` allocates on demand, with no
    arena; otherwise ``XLA_CLIENT_MEM_FRACTION`` or its deprecated spelling
    ``XLA_PYTHON_CLIENT_MEM_FRACTION`` (jaxlib refuses both at once), else
    75%, preallocated at start unless ``XLA_PYTHON_CLIENT_PREALLOCATE`` is
    ``false`` or ``0``.
    """
    env = os.environ if environ is None else environ
    allocator = env.get("XLA_PYTHON_CLIENT_ALLOCATOR", "default").strip().lower()
    if allocator == "platform":
        return "XLA_PYTHON_CLIENT_ALLOCATOR=platform (no arena)"
    source = f"JAX's default fraction {JAX_DEFAULT_FRACTION:g}"
    for name, note in (
        ("XLA_CLIENT_MEM_FRACTION", ""),
        ("XLA_PYTHON_CLIENT_MEM_FRACTION", " (deprecated spelling)"),
    ):
        raw = env.get(name, "").strip()
        if raw:  # the first one set is the one read
            if _fraction(raw) is not None:
                source = f"{name}={raw}{note}"
            break
    prealloc = env.get("XLA_PYTHON_CLIENT_PREALLOCATE", "").strip()
    if prealloc in {"false", "False", "0"}:
        return f"{source}, XLA_PYTHON_CLIENT_PREALLOCATE={prealloc} (grown on demand)"
    return f"{source}, preallocated"
