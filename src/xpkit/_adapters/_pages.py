"""Whether host memory can be written: the process's own map of its pages.

A tensor made over memory that NumPy holds read-only (``torch.from_numpy``
of a read-only ``np.memmap``) is writable as torch sees it; a write into
it is a segmentation fault that ends the process. The kernel's map of the
process (``/proc/self/maps``, Linux) says which pages are writable.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["read_only_host_memory"]

#: The kernel's map of this process's pages (Linux; elsewhere absent).
MAPS = "/proc/self/maps"


def read_only_host_memory(low: int, high: int) -> bool:
    """Whether a byte of ``[low, high)`` lies in a page the process cannot write.

    False where every byte lies in writable pages, and where the map cannot
    be read (off Linux): not known, not refused.
    """
    if high <= low:
        return False
    try:
        lines = Path(MAPS).read_text(encoding="ascii").splitlines()
    except OSError:
        return False
    covered = low  # every byte below it lies in writable pages
    for line in lines:
        fields = line.split(maxsplit=2)
        if len(fields) < 2:
            continue
        start, _, end = fields[0].partition("-")
        try:
            first, last = int(start, 16), int(end, 16)
        except ValueError:
            return False  # (a map of another form: not known)
        if last <= covered:
            continue
        if first > covered:
            return True  # (a byte in no mapping: not writable)
        if "w" not in fields[1]:
            return True
        covered = last
        if covered >= high:
            return False
    return covered < high
