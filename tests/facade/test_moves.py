"""Arrays created on, and moved to, a backend's device.

``b.create`` binds the namespace's creation functions to the backend's
device; ``b.move`` brings an array of any library there (DLPack first, the
host where no DLPack path exists); ``check_arrays(convert=True)`` follows
the first array. array-api-strict's second device (``device1``) shows that
nothing lands on the default device by accident.
"""

from __future__ import annotations

import inspect
import itertools
import re
import textwrap
from typing import Any

import numpy as np
import pytest
from helpers import run_python

import xpkit
from xpkit._adapters import ADAPTERS, adapter_for_array

#: (function, args) of every creation function ``b.create`` binds.
CREATIONS: list[tuple[str, tuple[Any, ...]]] = [
    ("asarray", ([1.0, 2.0],)),
    ("zeros", ((2, 3),)),
    ("ones", (4,)),
    ("empty", ((2,),)),
    ("full", ((2, 2), 1.5)),
    ("arange", (5,)),
    ("linspace", (0.0, 1.0, 5)),
    ("eye", (3,)),
]

#: Libraries with a CPU device, for the moves this machine can make.
CPU_LIBRARIES = ["numpy", "torch", "array_api_strict", "jax", "dask", "ndonnx"]


def _cpu_backend(key: str) -> xpkit.Backend:
    adapter = ADAPTERS[key]
    if not adapter.is_installed():
        pytest.skip(f"needs {adapter.label}: pip install 'xpkit[{adapter.extra}]'")
    return xpkit.Backend(key, device="cpu")


def _device(b: xpkit.Backend, x: Any) -> str:
    adapter = ADAPTERS[b.library]
    return adapter.device_str(adapter.device_of(x))


@pytest.mark.parametrize(("fn", "args"), CREATIONS)
def test_create_lands_on_the_backend_s_device(xpkit_backend, fn, args):
    b = xpkit_backend
    x = getattr(b.create, fn)(*args)
    assert adapter_for_array(x) is ADAPTERS[b.library]
    assert _device(b, x) == b.device
    expected = getattr(b.xp, fn)(*args, device=b.native_device)
    np.testing.assert_array_equal(
        b.to_numpy(x).shape, b.to_numpy(expected).shape
    )  # same call, same result shape
    if fn != "empty":
        np.testing.assert_array_equal(b.to_numpy(x), b.to_numpy(expected))


@pytest.mark.parametrize(("fn", "args"), CREATIONS)
def test_create_on_a_second_device_never_lands_on_the_default(fn, args):
    b = _cpu_backend("array_api_strict")
    b = xpkit.Backend("array_api_strict", device="device1")
    x = getattr(b.create, fn)(*args)
    default = getattr(b.xp, fn)(*args)  # what forgetting device= gives
    assert x.device == b.native_device == b.xp.Device("device1")
    assert default.device != x.device
    cpu = b.xp.Device("CPU_DEVICE")
    assert getattr(b.create, fn)(*args, device=cpu).device == cpu  # explicit wins


def test_create_is_the_namespace_untouched(xpkit_backend):
    """``b.xp`` stays the compliant namespace: its functions take no bound device."""
    b = xpkit_backend
    assert b.create.zeros.func is b.xp.zeros
    assert b.create.zeros.keywords == {"device": b.native_device}


def test_create_asarray_keeps_a_mask_or_refuses_it(xpkit_backend):
    """NumPy's and torch's own asarray dropped a masked array's mask; ndonnx's
    keeps it into its nullable dtypes, and there it is taken. Given by the
    namespace's keyword (JAX's ``a``: an internal TypeError), or into a
    dtype the mask cannot follow (ndonnx's float32: the mask dropped), or
    by JAX's positional dtype, it is refused naming the parameter alike."""
    b = xpkit_backend
    masked = np.ma.masked_array([1.0, 2.0], mask=[True, False])
    said = "is a NumPy masked array, whose mask the conversion would drop"
    params = inspect.signature(b.xp.asarray).parameters
    first = next(iter(params))
    float32 = b.asarray([1.0], dtype="float32").dtype
    calls = [
        (lambda: b.create.asarray(masked), first),
        (lambda: b.create.asarray(masked, dtype=float32), first),
        (lambda: b.create.asarray([masked, masked]), f"{first}\\[0\\]"),
    ]
    if params[first].kind is not inspect.Parameter.POSITIONAL_ONLY:
        calls.append((lambda: b.create.asarray(**{first: masked}), first))
    if params["dtype"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
        calls.append((lambda: b.create.asarray(masked, float32), first))
    for call, name in calls:
        try:
            kept = call()
        except TypeError as exc:
            assert re.search(f"^{name} {said}", str(exc)), exc
            continue
        host = kept.unwrap_numpy()  # (a library whose arrays hold a mask)
        assert np.ma.getmaskarray(host).tolist() == [True, False], name


@pytest.mark.parametrize(
    ("src", "dst"),
    [p for p in itertools.product(CPU_LIBRARIES, repeat=2) if p[0] != p[1]],
)
def test_move_between_every_cpu_pair(src, dst):
    source, target = _cpu_backend(src), _cpu_backend(dst)
    values = np.array([[1.5, -0.0], [np.inf, 3.25]], dtype=np.float32)
    x = source.asarray(values)
    moved = target.move(x)
    assert adapter_for_array(moved) is ADAPTERS[dst]
    assert target.dtype_to_str(moved.dtype) == "float32"
    assert _device(target, moved) == target.device
    got = target.to_numpy(moved)
    np.testing.assert_array_equal(got, values)
    assert np.signbit(got[0, 1])  # -0.0 kept


ZERO_COPY = [("numpy", "torch"), ("torch", "numpy"), ("numpy", "array_api_strict")]


@pytest.mark.parametrize(("src", "dst"), ZERO_COPY)
def test_move_shares_memory_where_dlpack_allows(src, dst):
    source, target = _cpu_backend(src), _cpu_backend(dst)
    x = source.asarray(np.arange(4.0))
    shared = target.move(x)
    assert np.shares_memory(target.to_numpy(shared), source.to_numpy(x))
    assert np.shares_memory(
        target.to_numpy(target.move(x, copy=False)), source.to_numpy(x)
    )
    copied = target.move(x, copy=True)
    assert not np.shares_memory(target.to_numpy(copied), source.to_numpy(x))
    np.testing.assert_array_equal(target.to_numpy(copied), np.arange(4.0))


def _writable_source(src: str, offset: int) -> Any:
    """Eight float32 values 0..7 of ``src`` at ``offset`` elements into a
    buffer that starts on a 64-byte boundary (JAX's ``from_dlpack`` views
    what is aligned so and copies the rest)."""
    buf = np.zeros(48, dtype=np.float32)
    start = (-buf.ctypes.data % 64) // 4 + offset
    host = buf[start : start + 8]
    host[:] = np.arange(8.0)
    if src == "torch":
        torch = pytest.importorskip("torch")
        return torch.from_numpy(host)
    return host


@pytest.mark.parametrize("offset", [0, 1, 16])
@pytest.mark.parametrize("dst", CPU_LIBRARIES)
@pytest.mark.parametrize("src", ["numpy", "torch"])
def test_copy_true_never_changes_with_its_source_and_copy_false_never_copies(
    src, dst, offset
):
    """``move(copy=True)`` is new memory, and ``copy=False`` shares or raises
    ValueError. JAX's ``from_dlpack`` ignores ``copy=``: a torch tensor, and
    a NumPy array on a 64-byte boundary, moved to JAX with copy=True changed
    when their source did ([99, 1, 2, ...]); an offset view moved with
    copy=False was copied silently."""
    if src == dst:
        pytest.skip("a move within one library: test_move_within_one_library")
    target = _cpu_backend(dst)
    x = _writable_source(src, offset)
    copied = target.move(x, copy=True)
    try:
        shared = target.move(x, copy=False)
    except ValueError as exc:
        assert "copy=False" in str(exc) or "without a copy" in str(exc)
        shared = None
    x[0] = 99.0
    assert target.to_numpy(copied).tolist() == list(range(8))
    if shared is not None:
        assert target.to_numpy(shared).tolist()[:2] == [99.0, 1.0]


@pytest.mark.parametrize("dst", ["dask", "ndonnx"])
def test_copy_false_without_a_dlpack_path_is_a_value_error(dst):
    target = _cpu_backend(dst)
    x = np.arange(3.0)
    with pytest.raises(ValueError, match=r"without a copy .*does not import DLPack"):
        target.move(x, copy=False)
    np.testing.assert_array_equal(target.to_numpy(target.move(x)), x)


def test_copy_false_of_a_library_without_dlpack_export():
    source, target = _cpu_backend("ndonnx"), _cpu_backend("numpy")
    x = source.asarray([1.0, 2.0])
    with pytest.raises(ValueError, match="ndonnx arrays do not export DLPack"):
        target.move(x, copy=False)
    np.testing.assert_array_equal(target.move(x), [1.0, 2.0])


def test_move_within_one_library():
    b = _cpu_backend("array_api_strict")
    on1 = xpkit.Backend("array_api_strict", device="device1")
    x = b.asarray([1.0, 2.0])
    assert b.move(x) is x
    assert b.move(x, copy=True) is not x
    moved = on1.move(x)
    assert moved.device == on1.native_device
    with pytest.raises(
        ValueError, match="not .device1.: it cannot move to .device1. with copy=False"
    ):
        on1.move(x, copy=False)


def test_move_refuses_what_is_not_an_array():
    b = xpkit.Backend("numpy")
    with pytest.raises(
        TypeError, match="x must be an array of a supported library, got list"
    ):
        b.move([1.0, 2.0])
    with pytest.raises(TypeError, match="copy must be True, False or None, got 'yes'"):
        b.move(np.ones(2), copy="yes")


def test_check_arrays_refuses_mixed_libraries_unless_asked():
    torch_b, jax_b = _cpu_backend("torch"), _cpu_backend("jax")
    X = torch_b.asarray(np.ones((2, 2), dtype=np.float32))
    y = jax_b.asarray(np.array([1.0, 2.0], dtype=np.float32))
    with pytest.raises(TypeError, match=r"inputs\[1\] is a JAX array .*convert=True"):
        torch_b.check_arrays(X, y)
    X2, y2 = torch_b.check_arrays(X, y, convert=True)
    assert X2 is X
    assert adapter_for_array(y2) is ADAPTERS["torch"]
    np.testing.assert_array_equal(torch_b.to_numpy(y2), [1.0, 2.0])
    with pytest.raises(TypeError, match="convert must be a bool, got 1"):
        torch_b.check_arrays(X, y, convert=1)


def test_check_arrays_convert_follows_the_first_array_s_device_and_dtype():
    _cpu_backend("array_api_strict")
    b = xpkit.Backend("array_api_strict", device="device1")
    cpu = xpkit.Backend("array_api_strict")
    X = b.asarray(np.ones(2, dtype=np.float32))
    y = cpu.asarray([1.0, 2.0])  # float64, on the CPU device
    with pytest.raises(ValueError, match="on device 'cpu' but the first input"):
        b.check_arrays(X, y)
    _, y2 = b.check_arrays(X, y, convert=True)
    assert y2.device == X.device
    assert b.dtype_to_str(y2.dtype) == "float32"


# -- moves are exactly as safe as asarray (issue #19) ---------------------------
#: Cases that crashed the interpreter (torch aborts on negative strides; a
#: tensor over a read-only memory map segfaults when written): each runs in
#: a child process, so a crash is this test's failure, with its output.
CRASH_CASES = {
    "reversed": """
        t = xpkit.Backend("torch").move(np.arange(3.0)[::-1])
        assert t.tolist() == [2.0, 1.0, 0.0], t
    """,
    "reversed_2d": """
        x = np.arange(12.0).reshape(3, 4)[:, ::-2]
        t = xpkit.Backend("torch").move(x)
        assert t.tolist() == x.tolist(), t
    """,
    "reversed_one_element": """
        b = xpkit.Backend("torch")
        x = np.array([5.0])[::-1]  # a negative stride, on an axis never stepped
        assert b.move(x).tolist() == [5.0]
        (y,) = b.check_arrays(x)
        assert y.tolist() == [5.0], y
        z = np.arange(6.0).reshape(1, 6)[::-1]
        assert b.move(z).tolist() == z.tolist()
    """,
    "field_of_one_record": """
        record = np.zeros(1, dtype=[("a", "f8"), ("b", "i1")])
        x = record["a"]  # a stride of 9 bytes, not a whole float64
        assert xpkit.Backend("torch").move(x).tolist() == [0.0]
    """,
    "reversed_copy_false": """
        try:
            xpkit.Backend("torch").move(np.arange(3.0)[::-1], copy=False)
        except ValueError as exc:
            assert "negative strides" in str(exc) and "copy=False" in str(exc), exc
        else:
            raise AssertionError("copy=False of a reversed view did not raise")
    """,
    "strict_reversed": """
        import array_api_strict as s
        t = xpkit.Backend("torch").move(s.asarray([1.0, 2.0, 3.0])[::-1])
        assert t.tolist() == [3.0, 2.0, 1.0], t
    """,
    "check_arrays_strict_reversed": """
        import array_api_strict as s
        import torch
        b = xpkit.Backend("torch")
        _, y = b.check_arrays(
            torch.zeros(3, dtype=torch.float64),
            s.asarray([1.0, 2.0, 3.0])[::-1],
            convert=True,
        )
        assert y.tolist() == [3.0, 2.0, 1.0], y
    """,
    "read_only_memmap": """
        import os, tempfile
        path = os.path.join(tempfile.mkdtemp(), "m.bin")
        np.arange(4.0).tofile(path)
        m = np.memmap(path, dtype="f8", mode="r")
        t = xpkit.Backend("torch").move(m)
        t += 1
        assert t.tolist() == [1.0, 2.0, 3.0, 4.0], t
        assert m.tolist() == [0.0, 1.0, 2.0, 3.0], m
    """,
    "tensor_over_read_only_memmap_updated": """
        import os, tempfile, torch
        path = os.path.join(tempfile.mkdtemp(), "m.bin")
        np.arange(4.0).tofile(path)
        t = torch.from_numpy(np.memmap(path, dtype="f8", mode="r"))
        b = xpkit.Backend("torch", device="cpu")
        assert b.at(t, 0).set(9.0).tolist() == [9.0, 1.0, 2.0, 3.0]  # (a copy)
        try:
            b.at(t, 0).set(9.0, copy=False)
        except ValueError as exc:
            assert "read-only memory" in str(exc), exc
        else:
            raise AssertionError("copy=False over read-only memory did not raise")
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0], t
    """,
    "tensor_over_read_only_memmap_moved": """
        import os, tempfile, torch
        path = os.path.join(tempfile.mkdtemp(), "m.bin")
        np.arange(4.0).tofile(path)
        t = torch.from_numpy(np.memmap(path, dtype="f8", mode="r"))
        b = xpkit.Backend("numpy")
        moved = b.move(t)
        assert b.at(moved, 0).set(9.0).tolist() == [9.0, 1.0, 2.0, 3.0]
        moved += 1  # (a copy of its own: writable)
        import importlib.util
        for target in ("array_api_strict", "jax", "dask"):
            if importlib.util.find_spec(target) is None:
                continue
            there = xpkit.Backend(target)
            moved = there.move(t)
            assert there.to_numpy(moved).tolist() == [0.0, 1.0, 2.0, 3.0]
            updated = there.at(moved, 0).set(9.0)  # (in place where it can be)
            assert there.to_numpy(updated).tolist() == [9.0, 1.0, 2.0, 3.0]
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0], t
    """,
    # (to_numpy handed back the read-only pages flagged writable: a write
    # through xpkit into what asarray / to_numpy / to_device gave ended the
    # process, map_batches(out=) too)
    # (a review: owners that are no array, a DLPack capsule or a memoryview,
    # hid the tensor; an array-api-strict out was not asked)
    "tensor_over_read_only_memmap_behind_other_owners": """
        import os, tempfile, torch
        path = os.path.join(tempfile.mkdtemp(), "m.bin")
        np.arange(16.0).tofile(path)
        t = torch.from_numpy(np.memmap(path, dtype="f8", mode="r", shape=(4, 4)))
        nb, sb = xpkit.Backend("numpy"), xpkit.Backend("array_api_strict")
        made = {
            "np from strict": lambda: nb.asarray(sb.asarray(t)),
            "np.from_dlpack of strict": lambda: np.from_dlpack(sb.asarray(t)),
            "np.from_dlpack of the tensor": lambda: np.from_dlpack(t),
            "a memoryview": lambda: np.asarray(memoryview(nb.asarray(t))),
            "frombuffer": lambda: np.frombuffer(
                memoryview(t.numpy()), dtype="f8"
            ).reshape(4, 4),
            "strict asarray": lambda: sb.asarray(t),
            "strict to_device": lambda: sb.to_device(t),
        }
        for name, make in made.items():
            b = sb if name.startswith("strict") else nb
            x = make()
            assert b.to_numpy(b.at(x, (0, 0)).add(1.0))[0, 0] == 1.0, name
            try:
                b.at(x, (0, 0)).add(1.0, copy=False)
            except ValueError as exc:
                assert "is a view of read-only memory" in str(exc), (name, exc)
            else:
                raise AssertionError(f"{name}: copy=False was taken")
            try:
                xpkit.map_batches(lambda a: a * 2, np.ones((4, 4)), out=x)
            except ValueError as exc:
                assert "lies over read-only memory" in str(exc), (name, exc)
            else:
                raise AssertionError(f"{name}: out was taken")
        assert t[0, 0].item() == 0.0, t
    """,
    "tensor_over_read_only_memmap_converted": """
        import importlib.util, os, tempfile, torch
        path = os.path.join(tempfile.mkdtemp(), "m.bin")
        np.arange(4.0).tofile(path)
        t = torch.from_numpy(np.memmap(path, dtype="f8", mode="r"))
        for name in ("numpy", "array_api_strict"):
            if importlib.util.find_spec(name) is None:
                continue
            b = xpkit.Backend(name)
            own = (b.to_numpy,) if name == "numpy" else ()  # (NumPy's, not its own)
            for convert in (b.asarray, b.to_device, *own):
                x = convert(t)
                updated = b.at(x, 0).set(9.0)
                assert b.to_numpy(updated).tolist() == [9.0, 1.0, 2.0, 3.0]
        host = xpkit.Backend("numpy").to_numpy(t)  # (as torch holds it: shared)
        try:
            xpkit.map_batches(lambda r: r * 2, np.arange(4.0), out=host)
        except ValueError as exc:
            assert "out lies over read-only memory" in str(exc), exc
        else:
            raise AssertionError("out over read-only memory was taken")
        try:
            xpkit.Backend("numpy").at(host, 0).set(9.0, copy=False)
        except ValueError as exc:
            assert "is a view of read-only memory" in str(exc), exc
        else:
            raise AssertionError("copy=False over read-only memory was taken")
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0], t
        writable = torch.from_numpy(np.zeros(4))  # (updated in place, still)
        view = xpkit.Backend("numpy").to_numpy(writable)
        assert xpkit.Backend("numpy").at(view, 0).set(9.0) is view
        assert writable.tolist() == [9.0, 0.0, 0.0, 0.0]
    """,
}


@pytest.mark.parametrize("case", sorted(CRASH_CASES))
def test_layouts_torch_cannot_view_are_copied_not_crashed_on(case):
    pytest.importorskip("torch")
    if "strict" in case:
        pytest.importorskip("array_api_strict")
    body = textwrap.dedent(CRASH_CASES[case])
    proc = run_python(
        "import numpy as np\nimport xpkit\n" + body + "\nprint('ok')",
        extra_env={"PYTHONFAULTHANDLER": "1"},
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    assert proc.stdout.strip() == "ok"


def _lazy_bits(torch: Any) -> dict[str, tuple[Any, np.ndarray]]:
    """torch views whose conjugate or negative bit DLPack would drop, and their values."""
    z = torch.tensor([1 + 2j, -3 - 0.5j])
    values = np.array([1 + 2j, -3 - 0.5j])
    return {
        "conj": (z.conj(), np.conj(values)),
        "conj_imag": (z.conj().imag, -values.imag),
        "neg": (torch.neg(z.conj()).conj(), -values),
    }


@pytest.mark.parametrize("dst", ["numpy", "array_api_strict", "jax", "dask"])
@pytest.mark.parametrize("view", ["conj", "conj_imag", "neg"])
def test_torch_s_lazy_bits_arrive_as_values(dst, view):
    torch = pytest.importorskip("torch")
    target = _cpu_backend(dst)
    x, expected = _lazy_bits(torch)[view]
    assert x.is_conj() or x.is_neg()
    np.testing.assert_array_equal(target.to_numpy(target.move(x)), expected)
    first = target.asarray(np.zeros(1, dtype=expected.dtype))
    _, y = target.check_arrays(first, x, convert=True)
    np.testing.assert_array_equal(target.to_numpy(y), expected)
    with pytest.raises(ValueError, match=r"DLPack drops.*copy=False"):
        target.move(x, copy=False)


def _read_only_sources() -> dict[str, Any]:
    ro = np.arange(3.0)
    ro.flags.writeable = False
    return {
        "read_only": lambda: ro,
        "broadcast": lambda: np.broadcast_to(np.arange(3.0), (2, 3)),
    }


@pytest.mark.parametrize("kind", ["read_only", "broadcast"])
def test_writing_into_a_moved_tensor_never_reaches_a_read_only_source(kind):
    target = _cpu_backend("torch")
    source = _read_only_sources()[kind]()
    before = np.array(source, copy=True)
    moved = target.move(source)
    moved += 1
    np.testing.assert_array_equal(source, before)
    np.testing.assert_array_equal(target.to_numpy(moved), before + 1)
    with pytest.raises(ValueError, match="copy=False"):
        target.move(source, copy=False)


def test_a_jax_array_is_never_handed_to_torch_as_writable():
    jnp = pytest.importorskip("jax.numpy")
    target = _cpu_backend("torch")
    for convert in (False, True):
        j = jnp.arange(3.0)
        if convert:
            _, moved = target.check_arrays(target.asarray(np.zeros(1)), j, convert=True)
        else:
            moved = target.move(j)
        moved += 1
        np.testing.assert_array_equal(np.asarray(j), [0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="must never change.*copy=False"):
        target.move(jnp.arange(3.0), copy=False)


_HOST_WAYS = {
    "to_numpy": lambda b, w: b.to_numpy(w),
    "asarray": lambda b, w: b.asarray(w),
    "to_device": lambda b, w: b.to_device(w),
    "move": lambda b, w: b.move(w),
}


@pytest.mark.parametrize(
    ("dst", "way"),
    [("numpy", way) for way in sorted(_HOST_WAYS)]
    + [("array_api_strict", way) for way in sorted(_HOST_WAYS) if way != "to_numpy"],
)
def test_a_tensor_that_requires_grad_is_never_written_through_its_host_array(dst, way):
    """torch refuses ``w.numpy()`` for it; xpkit's conversions detached it and
    shared its memory writable, so an update through xpkit changed what
    autograd had saved: the gradient came out wrong, silently."""
    torch = pytest.importorskip("torch")
    target = _cpu_backend(dst)
    w = torch.arange(6.0).requires_grad_()
    loss = (w**2).sum()  # (saves w for its gradient, 2 w)
    host = _HOST_WAYS[way](target, w)
    target.at(host, 0).set(42.0)  # (copy=None: in place where it may be)
    out = host if dst == "numpy" else target.asarray(np.zeros(6, dtype=np.float32))
    try:
        xpkit.map_batches(
            lambda r: r + 100.0, np.zeros(6, dtype=np.float32), out=out, backend=target
        )
    except ValueError as exc:
        assert "out" in str(exc)  # (refused: it cannot be written)
    loss.backward()
    np.testing.assert_array_equal(w.detach().numpy(), np.arange(6.0))
    np.testing.assert_array_equal(w.grad.numpy(), 2 * np.arange(6.0))
    if dst == "numpy" and way == "to_numpy":  # (still zero-copy: read-only)
        assert np.shares_memory(host, w.detach().numpy())
        assert not host.flags.writeable


def test_a_host_copy_of_a_tensor_that_requires_grad_stays_writable():
    """Only the view that shares the tensor's memory is read-only: the
    float32 copy of a bfloat16 tensor (or of a conjugate view) was marked
    read-only too, and Backend.asarray copied it a second time."""
    torch = pytest.importorskip("torch")
    b = _cpu_backend("numpy")
    for t in (
        torch.arange(4.0, dtype=torch.bfloat16).requires_grad_(),
        torch.tensor([1 + 2j, 3 - 1j]).requires_grad_().conj(),
    ):
        wide = torch.complex64 if t.is_complex() else torch.float32
        before = t.detach().resolve_conj().to(wide)
        host = b.to_numpy(t)
        assert host.flags.writeable
        host[0] = 7  # (a copy: the tensor keeps its values)
        assert torch.equal(t.detach().resolve_conj().to(wide), before)
        assert b.asarray(t).flags.writeable


def test_read_only_memory_is_shared_with_libraries_that_keep_it_read_only():
    """NumPy and array-api-strict keep a read-only source read-only: no copy needed."""
    ro = np.arange(4.0)
    ro.flags.writeable = False
    strict = _cpu_backend("array_api_strict")
    shared = strict.move(ro, copy=False)
    assert np.shares_memory(np.from_dlpack(shared), ro)
    with pytest.raises(ValueError, match="read-only"):
        shared[0] = 5.0
    np.testing.assert_array_equal(ro, np.arange(4.0))


@pytest.mark.filterwarnings("ignore::xpkit.PrecisionWarning")
@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ([1e300], "overflow to inf"),
        ([1e-50], "underflow to 0"),
        ([1.5, 2.0**-150], "underflow to 0"),
    ],
)
def test_move_narrows_only_what_keeps_its_value(values, reason):
    _cpu_backend("array_api_strict")
    target = xpkit.Backend("array_api_strict", device="no_float64")
    x = np.array(values)
    with pytest.raises(ValueError, match=rf"x holds .*{reason}"):
        target.move(x)
    with pytest.raises(ValueError, match=rf"inputs\[1\] holds .*{reason}"):
        target.check_arrays(target.asarray(np.zeros(1, np.float32)), x, convert=True)
    ok = np.array([1.5, 2.0**-140, -0.0])  # rounding, a subnormal and -0.0 pass
    got = np.from_dlpack(target.move(ok))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, ok.astype(np.float32))


JAX_NARROWING = textwrap.dedent(
    """
    import numpy as np
    import warnings
    import xpkit

    warnings.simplefilter("ignore", xpkit.PrecisionWarning)
    b = xpkit.Backend("jax")  # without x64: float64 and int64 narrow
    for bad in (np.array([1e300]), np.array([2**40]), np.array([1e-50])):
        first = b.asarray(np.zeros(1, dtype=bad.dtype))  # narrowed alike
        for move in (b.move, lambda x: b.check_arrays(first, x, convert=True)):
            try:
                move(bad)
            except ValueError as exc:
                assert "does not fit dtype" in str(exc), exc
            else:
                raise AssertionError(f"{bad!r} moved to JAX without x64")
    got = b.move(np.array([1.5, 2**20]))
    assert str(got.dtype) == "float32" and got.tolist() == [1.5, 2**20], got
    print("ok")
    """
)


def test_move_to_jax_without_x64_refuses_values_that_would_change():
    pytest.importorskip("jax")
    proc = run_python(JAX_NARROWING)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"


def test_a_numpy_scalar_moves_as_a_0_d_array():
    target = _cpu_backend("torch")
    t = target.move(np.float64(3.5))
    assert t.shape == ()
    assert t.item() == 3.5
    with pytest.raises(ValueError, match="NumPy scalar.*copy=False"):
        target.move(np.float64(3.5), copy=False)


def test_a_byte_swapped_array_moves_as_a_plain_one_within_numpy():
    b = xpkit.Backend("numpy")
    x = np.arange(3, dtype=">i4")
    moved = b.move(x)
    assert moved.dtype == np.dtype("int32")
    assert moved.dtype.isnative
    np.testing.assert_array_equal(moved, [0, 1, 2])
    with pytest.raises(ValueError, match="not a plain array.*copy=False"):
        b.move(x, copy=False)


def test_a_meta_tensor_is_refused_by_name():
    torch = pytest.importorskip("torch")
    meta = torch.empty(2, device="meta")
    for convert in (
        xpkit.Backend("torch").asarray,
        xpkit.Backend("numpy").asarray,
        xpkit.Backend("numpy").move,
    ):
        with pytest.raises(TypeError, match="x is a meta tensor.*no values"):
            convert(meta)
    for backend in ("numpy", "torch"):  # (to_cpu raised torch's NotImplementedError)
        with pytest.raises(TypeError, match="^array is a meta tensor.*no values"):
            xpkit.Backend(backend).to_cpu(meta)


def test_a_library_whose_from_dlpack_takes_no_device_still_shares(monkeypatch):
    """CuPy's ``from_dlpack`` refuses ``device=``: an array already there arrives anyway."""
    target = _cpu_backend("torch")
    real = target.xp.from_dlpack

    def no_device(x, *, device=None, copy=None):
        if device is not None:
            msg = "from_dlpack() does not support device yet."
            raise NotImplementedError(msg)
        return real(x, copy=copy)

    monkeypatch.setattr(target.xp, "from_dlpack", no_device)
    x = np.arange(4.0)
    shared = target.move(x, copy=False)
    assert np.shares_memory(shared.numpy(), x)
    copied = target.move(x, copy=True)
    assert not np.shares_memory(copied.numpy(), x)
    np.testing.assert_array_equal(copied.numpy(), x)


def test_a_move_of_non_numeric_data_names_x(xpkit_backend):
    """It named a ``dtype=`` argument the caller never passed."""
    with pytest.raises(TypeError, match=r"^x has dtype <U1, which is not a numeric"):
        xpkit_backend.move(np.array(["a"]))


# -- another library's bfloat16 through asarray and copy (adversarial pass) --
# ``Backend("torch").asarray(a JAX bfloat16 array)`` said "non-numeric dtype
# bfloat16" (JAX's host copy has ml_dtypes' bfloat16, of NumPy kind "V"), and
# ``Backend("jax").asarray(a torch bfloat16 tensor)`` gave float32 (torch's
# host copy is float32), while `move` kept bfloat16 both ways.


def _sources():
    out = {}
    torch = pytest.importorskip("torch")
    out["torch"] = torch.tensor([1.5, -2.25, 3.0], dtype=torch.bfloat16)
    jnp = pytest.importorskip("jax.numpy")
    out["jax"] = jnp.asarray([1.5, -2.25, 3.0], dtype=jnp.bfloat16)
    return out


@pytest.mark.parametrize(("source", "target"), [("jax", "torch"), ("torch", "jax")])
@pytest.mark.parametrize("how", ["asarray", "copy"])
def test_a_bfloat16_array_keeps_its_dtype_where_the_target_holds_it(
    source, target, how
):
    x = _sources()[source]
    b = xpkit.Backend(target)
    got = getattr(b, how)(x)
    assert b.dtype_to_str(got.dtype) == "bfloat16"
    host = np.asarray(b.to_numpy(got), dtype=np.float64)
    np.testing.assert_array_equal(host, [1.5, -2.25, 3.0])


@pytest.mark.parametrize("source", ["jax", "torch"])
def test_a_bfloat16_array_comes_to_numpy_as_float32(source):
    """NumPy holds no bfloat16: the host copy's float32, every value kept."""
    got = xpkit.Backend("numpy").asarray(_sources()[source])
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [1.5, -2.25, 3.0])


def test_a_host_dtype_outside_the_standard_names_the_parameter():
    """torch's asarray of a float128 array named a ``dtype=`` never passed."""
    pytest.importorskip("torch")
    x = np.array([1.0], dtype=np.longdouble)
    if x.dtype == np.float64:
        pytest.skip("longdouble is float64 here")
    with pytest.raises(TypeError, match=r"^x has dtype float128, which is not"):
        xpkit.Backend("torch").asarray(x)


def test_copy_false_refuses_a_move_that_narrows():
    """JAX without 64-bit types narrowed float64 to float32 with copy=False:
    a copy, silently (writing into the source left the result as it was);
    array-api-strict's no_float64 device raised. Both raise, saying why."""
    narrowing = []
    if ADAPTERS["array_api_strict"].is_installed():
        narrowing.append(xpkit.Backend("array_api_strict", device="no_float64"))
    if ADAPTERS["jax"].is_installed():
        import jax

        if not jax.config.jax_enable_x64:
            narrowing.append(xpkit.Backend("jax"))
    if not narrowing:
        pytest.skip("neither array-api-strict nor JAX (without x64) is here")
    for b in narrowing:
        with pytest.raises(ValueError, match=r"^x has dtype float64, which becomes "):
            b.move(np.arange(8.0), copy=False)
        moved = b.move(np.arange(8.0))  # (copy=None narrows, every value kept)
        np.testing.assert_array_equal(b.to_numpy(moved), np.arange(8.0))
        assert b.dtype_to_str(moved.dtype) == "float32"


@pytest.mark.parametrize("dst", ["torch", "array_api_strict"])
@pytest.mark.parametrize("shape", [(0, 3), (2, 0), (0, 3, 4)])
def test_an_array_of_no_elements_moves_without_a_copy(dst, shape):
    """NumPy 2 gives it zero strides: copy=False refused it as a broadcast view."""
    target = _cpu_backend(dst)
    empty = np.empty(shape)
    moved = target.move(empty, copy=False)
    assert tuple(moved.shape) == shape
