"""Fault injection: make torch believe it has CUDA or MPS devices.

Only the device *queries* are faked (``torch.cuda.is_available``,
``device_count``, ``torch.backends.mps.is_available``); nothing allocates on
the fake device, so tests using these exercise xpkit's decisions, not torch.
"""

from __future__ import annotations

import pytest


def fake_cuda(monkeypatch: pytest.MonkeyPatch, count: int = 2) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: f"Fake GPU {i}")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


def fake_mps(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)


def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hide every GPU (real ones too) from every library."""
    from xpkit._adapters import ADAPTERS

    for adapter in ADAPTERS.values():
        real = adapter.devices
        monkeypatch.setattr(
            adapter,
            "devices",
            lambda real=real, adapter=adapter: tuple(
                d for d in real() if not adapter.is_gpu(d)
            ),
        )
