"""The JAX adapter's GPU paths on a CPU-only host, by faking its device queries.

JAX's real exception classes are used; only the device queries are replaced
(``fakes.fake_jax_gpus``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from fakes import fake_jax_gpus
from helpers import run_python

import xpkit
from xpkit import _memory

GB = 1024**3


def test_jax_backend_on_fake_gpus(monkeypatch):
    gpus = fake_jax_gpus(
        monkeypatch, count=2, stats={"bytes_limit": 16 * GB, "bytes_in_use": 4 * GB}
    )
    b = xpkit.Backend("jax")
    assert (b.name, b.device, b.is_gpu) == ("jax-gpu", "gpu", True)
    assert b.native_device is gpus[0]
    b1 = xpkit.Backend("jax", device="cuda:1")  # "cuda" is an alias of "gpu"
    assert (b1.device, b1.native_device) == ("gpu:1", gpus[1])
    assert xpkit.Backend("jax", device="cpu").name == "jax-cpu"
    assert xpkit.device_memory_budget(b1) == pytest.approx(12 * _memory.HEADROOM)


def test_jax_gpu_without_memory_stats_uses_host_memory(monkeypatch, host_memory):
    fake_jax_gpus(monkeypatch, count=1, stats=None)
    host_memory(3)
    assert xpkit.device_memory_budget(xpkit.Backend("jax")) == pytest.approx(
        3 * _memory.HEADROOM
    )


def test_jax_real_resource_exhausted():
    pytest.importorskip("jax")
    from jax.errors import JaxRuntimeError

    assert xpkit.is_oom_error(
        JaxRuntimeError(
            "RESOURCE_EXHAUSTED: Out of memory allocating 8589934592 bytes."
        )
    )
    assert not xpkit.is_oom_error(JaxRuntimeError("INVALID_ARGUMENT: shapes differ"))


def test_jax_asarray_lands_on_cpu_when_pinned(monkeypatch):
    fake_jax_gpus(monkeypatch, count=1)
    b = xpkit.Backend("jax", device="cpu")
    x = b.asarray(np.arange(3.0))
    assert xpkit.Backend.from_arrays(x).device == "cpu"


_ANOTHER_DEVICE = """
import json
import jax, jax.numpy as jnp
import json

import numpy as np
import xpkit

x1 = jax.device_put(jnp.arange(3.0, dtype=jnp.float32), jax.devices()[1])
b = xpkit.Backend("jax")  # its first CPU device
first = str(jax.devices()[0])
ways = {
    "move": lambda: b.move(x1),
    "asarray": lambda: b.asarray(x1),
    "asarray float16": lambda: b.asarray(x1, dtype="float16"),
    "to_device": lambda: b.to_device(x1),
    "map_batches": lambda: xpkit.map_batches(
        lambda r: r * 2, x1, backend=b, result_on="device"
    ),
}
got = {}
for name, way in ways.items():
    y = way()
    got[name] = [[str(d) for d in y.devices()] == [first], np.asarray(y).tolist()]
print(json.dumps(got))
"""


def test_an_array_on_another_device_moves_to_the_backend_s():
    """``jnp.asarray(x, dtype=..., device=...)`` of an array committed to
    another device raised "Received incompatible devices for jitted
    computation": move, asarray, to_device and map_batches all failed."""
    pytest.importorskip("jax")
    done = run_python(
        _ANOTHER_DEVICE,
        extra_env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    for name, (on_the_first, values) in got.items():
        assert on_the_first, name
        want = [0.0, 2.0, 4.0] if name == "map_batches" else [0.0, 1.0, 2.0]
        assert values == want, name


_X64_SWITCHED = """
import json
import jax
import xpkit
from xpkit.testing import strategies

said = {}
jax.config.update("jax_enable_x64", False)
b = xpkit.Backend("jax")
jax.config.update("jax_enable_x64", True)
said["on"] = [b.has_float64, "float64" in b.dtypes, str(b.asarray([1.0]).dtype)]
jax.config.update("jax_enable_x64", False)
said["off"] = [b.has_float64, "float64" in b.dtypes, str(b.asarray([1.0]).dtype)]
said["strategies"] = strategies.dtype_names(b, "real floating")
print(json.dumps(said))
"""


def test_the_dtypes_follow_x64_switched_after_the_backend_was_made():
    """``has_float64``, ``dtypes`` and the strategies' dtypes were those of
    the bind: True while asarray gave float32, and the reverse."""
    pytest.importorskip("jax")
    done = run_python(_X64_SWITCHED)
    assert done.returncode == 0, done.stderr[-2000:]
    said = json.loads(done.stdout)
    assert said["on"] == [True, True, "float64"]
    assert said["off"] == [False, False, "float32"]
    assert "float64" not in said["strategies"]
