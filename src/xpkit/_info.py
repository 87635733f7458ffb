"""What ``xpkit info`` reports: libraries, devices, memory budgets, thread pools.

Gathered as plain data (`collect_info`, what ``--json`` prints) and printed
for people (`print_info`).
"""

from __future__ import annotations

import os
import platform
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from ._adapters._registry import ADAPTERS, get_adapter
from ._backend import Backend
from ._device_budget import device_memory_budget
from ._executors import cluster_info, unreachable_scheduler
from ._host_memory import cgroup_available_bytes
from ._memory import BATCH_WORKING_SET_CEILING_GB, BYTES_PER_GB, host_available_bytes
from ._resolve import find_gpus
from ._select import InventoryEntry, backend_inventory
from ._version import __version__

if TYPE_CHECKING:
    from collections.abc import Collection

    from ._adapters._base import Adapter
    from ._typing import DaskClient, JSONObject

__all__ = [
    "ANSWER_S",
    "CONNECT_S",
    "collect_info",
    "print_info",
    "scheduler_problem",
]

#: Seconds ``xpkit info`` waits for a scheduler to answer.
CONNECT_S = 3.0
#: Seconds `xpkit info` waits for a scheduler's whole answer (handshake and
#: the cluster's description).
ANSWER_S = 15.0


def collect_info(
    scheduler: str | None = None, backends: Collection[str] | None = None
) -> JSONObject:
    """What xpkit finds on this machine, as plain data (what ``--json`` prints).

    ``cluster`` describes the dask cluster at ``scheduler``, else the one of
    the client active in this process, else the one ``DASK_SCHEDULER_ADDRESS``
    names; None when there is none. ``backends``: describe only those
    backends and their GPUs (library keys or backend names: only their
    libraries are imported); None: every backend here. Every library's
    version is read from its installed metadata, without importing it;
    ``not_described`` names the installed libraries left out.
    """
    import psutil

    keys = None if backends is None else {name.split("-", 1)[0] for name in backends}
    entries = [
        entry
        for entry in backend_inventory(keys)
        if backends is None or entry.key in backends or entry.name in backends
    ]

    cgroup = cgroup_available_bytes("/")
    info: JSONObject = {
        "xpkit": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "libraries": {a.key: a.version() for a in ADAPTERS.values()},
        "host": {
            "total_gb": psutil.virtual_memory().total / BYTES_PER_GB,
            "available_gb": host_available_bytes() / BYTES_PER_GB,
            "cgroup_available_gb": None if cgroup is None else cgroup / BYTES_PER_GB,
        },
        "batch_ceiling_gb": BATCH_WORKING_SET_CEILING_GB,
        "backends": [_backend_info(entry) for entry in entries],
        "not_described": [
            a.key
            for a in ADAPTERS.values()
            if keys is not None and a.key not in keys and a.is_installed()
        ],
        "gpu_memory": [_device_memory(a, d) for a, d in find_gpus(keys)],
        "threadpools": _threadpools(),
        "cluster": _cluster(scheduler),
    }
    return info


def scheduler_problem(address: str) -> str | None:
    """Why no dask scheduler can answer at ``address`` (within `CONNECT_S`); None: one may."""
    try:
        return unreachable_scheduler(address, CONNECT_S)
    except ImportError as exc:
        return f"{type(exc).__name__}: {exc} (pip install 'xpkit[distributed]')"


def _cluster(address: str | None) -> JSONObject | None:
    distributed = sys.modules.get("distributed")
    if address is None and distributed is not None:
        try:
            client = distributed.get_client()
        except ValueError:  # no client in this process
            client = None
        if client is not None:
            try:
                return cluster_info(client)
            except Exception as exc:  # noqa: BLE001 - report, don't crash
                return {"scheduler": None, "error": f"{type(exc).__name__}: {exc}"}
    address = address or os.environ.get("DASK_SCHEDULER_ADDRESS") or None
    if address is None:
        return None
    try:
        import importlib

        client_class: type[DaskClient] = importlib.import_module("distributed").Client
        why = scheduler_problem(address)
        if why is not None:
            return {"scheduler": address, "error": why}

        def ask() -> JSONObject:
            with client_class(
                address, timeout=CONNECT_S, set_as_default=False
            ) as client:
                return cluster_info(client)

        return _within(ask, ANSWER_S, address)
    except Exception as exc:  # noqa: BLE001 - report, don't crash
        return {"scheduler": address, "error": f"{type(exc).__name__}: {exc}"}


def _within(ask: Callable[[], JSONObject], seconds: float, address: str) -> JSONObject:
    """``ask()``, or an error where it has not answered within ``seconds``.

    A port that accepts the connection and never speaks (a hung scheduler,
    another service) held ``Client`` in its handshake, which its own
    timeout does not bound: ``xpkit info`` waited forever. The question runs
    in a daemon thread, left behind where it does not answer.
    """
    answers: list[JSONObject] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            answers.append(ask())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            errors.append(exc)

    thread = threading.Thread(target=run, name="xpkit-info-scheduler", daemon=True)
    thread.start()
    thread.join(seconds)
    if answers:
        return answers[0]
    if errors:
        raise errors[0]
    return {
        "scheduler": address,
        "error": f"TimeoutError: no answer from the scheduler within {seconds:g} s",
    }


def _backend_info(entry: InventoryEntry) -> JSONObject:
    row: JSONObject = {
        "name": entry.name,
        "library": entry.key,
        "device": entry.device,
    }
    if entry.reason:
        return {**row, "available": False, "reason": entry.reason}
    try:
        b = Backend(entry.key, device=entry.device)
        adapter = get_adapter(b.library)
        memory = _device_memory(adapter, b.device)
        queried = memory["queried"]
        return {
            **row,
            "available": True,
            "devices": list(adapter.devices()),
            "device_name": adapter.device_name(b.device),
            "is_gpu": b.is_gpu,
            "float64": b.has_float64,
            "budget_gb": device_memory_budget(b) if queried else None,
            # map_batches' per-batch budget (the GPU and CPU ceilings applied)
            "budget_capped_gb": (
                device_memory_budget(b, cap_for_batching=True) if queried else None
            ),
            "memory_cap": memory["cap"],
        }
    except Exception as exc:  # noqa: BLE001 - report, don't crash
        return {**row, "available": False, "reason": f"{type(exc).__name__}: {exc}"}


def _device_memory(adapter: Adapter, device: str) -> JSONObject:
    """Free/total memory of one device, the cap that applies and their sources.

    A device the process does not use, where asking would create a driver
    context (which holds device memory), is not queried: ``queried`` is
    False and ``note`` says why.
    """
    probe = adapter.memory_probe(device)
    row: JSONObject = {
        "library": adapter.key,
        "device": adapter.canonical_device(device),
        "source": probe.source,
        "in_use": probe.in_use,
        "note": probe.context_cost,
        "queried": probe.in_use or probe.context_cost is None,
        "free_gb": None,
        "total_gb": None,
        "cap": None,
    }
    if not row["queried"]:
        return row
    try:
        info = adapter.memory_info(device)
        cap = adapter.memory_cap(device)
    except Exception as exc:  # noqa: BLE001 - report, don't crash
        return {**row, "error": f"{type(exc).__name__}: {exc}"}
    if info is not None:
        row["free_gb"], row["total_gb"] = (
            info.free / BYTES_PER_GB,
            info.total / BYTES_PER_GB,
        )
    if cap is not None:
        row["cap"] = {
            "limit_gb": cap.limit / BYTES_PER_GB,
            "held_gb": cap.held / BYTES_PER_GB,
            "room_gb": cap.room / BYTES_PER_GB,
            "source": cap.source,
        }
    return row


def _threadpools() -> list[JSONObject] | None:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    keys = ("user_api", "internal_api", "num_threads", "version", "prefix")
    return [{k: pool.get(k) for k in keys} for pool in threadpool_info()]


def _print_gpu_memory(rows: list[JSONObject], out: TextIO, partial: bool) -> None:
    """The GPU memory section: free/total, the cap and where each came from.

    ``partial``: some installed libraries were not asked for their GPUs.
    """
    w = out.write
    w("\nGPU memory (budgets use the smaller of free memory and the cap's room)\n")
    if not rows:
        w(f"  no GPU found{' by the libraries described' if partial else ''}\n")
        return
    w(f"  {'library':<8} {'device':<8} {'free GB':>8} {'total GB':>9}  read by\n")
    for row in rows:
        head = f"  {row['library']:<8} {row['device']:<8} "
        if not row["queried"]:
            w(f"{head}not queried: {row['note']}\n")
            continue
        if "error" in row:
            w(f"{head}failed: {row['error']}\n")
            continue
        free, total = row["free_gb"], row["total_gb"]
        w(
            f"{head}{'?' if free is None else f'{free:.2f}':>8} "
            f"{'?' if total is None else f'{total:.2f}':>9}  {row['source']}\n"
        )
        if row["note"]:
            w(f"  {'':<17} the device in use, so queried: {row['note']}\n")
        cap = row["cap"]
        if cap is not None:
            w(
                f"  {'':<17} cap {cap['limit_gb']:.2f} GB, {cap['held_gb']:.2f} GB "
                f"held, {cap['room_gb']:.2f} GB room: {cap['source']}\n"
            )


def print_info(info: JSONObject, out: TextIO) -> None:
    """The human-readable form of `collect_info`."""
    w = out.write
    w(f"xpkit {info['xpkit']} on Python {info['python']} ({info['platform']})\n\n")
    w("Array libraries\n")
    for key, version in info["libraries"].items():
        w(f"  {key:<18} {version or 'not installed'}\n")
    host = info["host"]
    cg = host["cgroup_available_gb"]
    w(
        f"\nHost memory: {host['total_gb']:.1f} GB total, {host['available_gb']:.1f} GB "
        f"available{'' if cg is None else f' (cgroup limit leaves {cg:.1f} GB)'}\n"
    )
    w(
        f"Batch working-set ceiling: {info['batch_ceiling_gb']:.1f} GB on GPUs; "
        "map_batches' per-batch budget on each device in the 'batch GB' column "
        "(device_memory_budget(b, cap_for_batching=True))\n\n"
    )
    w(
        f"{'backend':<20} {'device':<10} {'budget GB':>10} {'batch GB':>8}"
        "  float64  name\n"
    )
    for b in info["backends"]:
        if not b["available"]:
            w(f"{b['name']:<20} {'-':<10} {'':>10} {'':>8}  {'':7}  ({b['reason']})\n")
            continue
        budget, capped = b["budget_gb"], b["budget_capped_gb"]
        w(
            f"{b['name']:<20} {b['device']:<10} "
            f"{'not queried' if budget is None else f'{budget:.2f}':>10} "
            f"{'-' if capped is None else f'{capped:.3f}':>8}  "
            f"{'yes' if b['float64'] else 'no':<7}  "
            f"{b['device_name']}\n"
        )
    left = info["not_described"]
    if left:
        w(
            f"(not described: {', '.join(left)}; `xpkit info --backends all` "
            "describes every backend, importing each library, and "
            "`--backends NAMES` those named)\n"
        )
    _print_gpu_memory(info["gpu_memory"], out, bool(left))
    pools = info["threadpools"]
    w("\nThread pools (threadpoolctl)\n")
    if pools is None:
        w("  threadpoolctl is not installed\n")
    for pool in pools or []:
        w(
            f"  {pool['user_api']:<8} {pool['internal_api']:<10} "
            f"{pool['num_threads']} threads  {pool['version'] or ''}\n"
        )
    cluster = info["cluster"]
    if cluster is None:
        return
    w(f"\nDask cluster at {cluster['scheduler']}\n")
    if "error" in cluster:
        w(f"  not reachable: {cluster['error']}\n")
        return
    w(f"  {'worker':<28} {'threads':>7} {'memory limit GB':>16} {'used GB':>8}\n")
    for worker in cluster["workers"]:
        limit, used = worker["memory_limit_bytes"], worker["memory_used_bytes"]
        w(
            f"  {worker['address']:<28} {worker['nthreads']:>7} "
            f"{'none' if limit is None else f'{limit / BYTES_PER_GB:.2f}':>16} "
            f"{'?' if used is None else f'{used / BYTES_PER_GB:.2f}':>8}\n"
        )
