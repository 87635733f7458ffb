"""Testing tools for code written with xpkit.

- `assert_close` / `assert_equal`: namespace, shape, dtype and device checked
  before values, with a tolerance derived from the dtype.
- `assert_array_almost_equal`: the seed's precision-aware assert.
- `xpkit.testing.strategies`: Hypothesis strategies per backend (needs
  ``hypothesis``; imported on its own).
- A pytest plugin (``xpkit_backend``, ``xp`` and ``xpkit_dtype``
  fixtures), registered when xpkit is installed: a test runs on every
  backend, emulated device and dtype variant, with lazy variants and host
  copies counted for the functions a test module declares with
  `lazy_xp_function`.
- `capabilities` / `covers` / `capabilities_table` /
  `uncovered_statements`: what each public function supports, stated once,
  turned into test marks, a table (or its docstring), and a check that
  every statement has a test.
"""

from ._asserts import assert_array_almost_equal
from ._capabilities import (
    Capabilities,
    capabilities,
    capabilities_table,
    covers,
    statements_of,
    uncovered_statements,
)
from ._close import assert_close, assert_equal, default_tolerance
from ._facade import declare_facade, facade_capabilities
from ._lazy import lazy_xp_function

__all__ = [
    "Capabilities",
    "assert_array_almost_equal",
    "assert_close",
    "assert_equal",
    "capabilities",
    "capabilities_table",
    "covers",
    "default_tolerance",
    "facade_capabilities",
    "lazy_xp_function",
    "statements_of",
    "uncovered_statements",
]

declare_facade()
