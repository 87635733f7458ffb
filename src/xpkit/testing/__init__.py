"""Testing tools for code written with xpkit.

- `assert_close` / `assert_equal`: namespace, shape, dtype and device checked
  before values, with a tolerance derived from the dtype.
- `assert_array_almost_equal`: the seed's precision-aware assert.
- `xpkit.testing.strategies`: Hypothesis strategies per backend (needs
  ``hypothesis``; imported on its own).
- A pytest plugin (``xpkit_backend`` and ``xp`` fixtures), registered when
  xpkit is installed.
"""

from ._asserts import assert_array_almost_equal
from ._close import assert_close, assert_equal, default_tolerance

__all__ = [
    "assert_array_almost_equal",
    "assert_close",
    "assert_equal",
    "default_tolerance",
]
