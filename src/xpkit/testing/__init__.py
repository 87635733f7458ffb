"""Testing tools for code written with xpkit."""

from ._asserts import assert_array_almost_equal

__all__ = ["assert_array_almost_equal"]
