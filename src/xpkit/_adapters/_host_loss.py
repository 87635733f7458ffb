"""`LostOnHost`: a host copy that would drop what an array holds, found late.

Most such arrays are refused before anything is converted
(`Adapter.lost_in_conversion` reads a NumPy masked array's class, a Dask
array's meta). A Dask array whose meta is plain may still compute to masked
chunks: only its computed value tells. Its adapter's ``to_numpy`` then
raises `LostOnHost`, whose ``reason`` completes "<parameter> is ...", so
that the caller who knows the array's name (`to_host`'s ``name``: ``fn``'s
result for some rows, an assert's ``actual``) says it.
"""

from __future__ import annotations

__all__ = ["LostOnHost"]


class LostOnHost(TypeError):
    """A TypeError: converting the array to the host would drop ``reason``'s part."""

    def __init__(self, reason: str, name: str = "x") -> None:
        super().__init__(f"{name} is {reason}")
        self.reason = reason

    def named(self, name: str) -> LostOnHost:
        """The same error, naming the array ``name``."""
        return LostOnHost(self.reason, name)
