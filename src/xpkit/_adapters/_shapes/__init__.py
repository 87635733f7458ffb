"""Shape-only arrays: what ``fn`` would allocate, traced without computing.

`map_batches` asks what ``fn`` costs per row. Where ``fn`` is written
against the Array API standard (or with NumPy's own functions, or torch's),
it can run on arrays that have a shape and a dtype but no values: every
operation makes its result's shape and dtype and charges its bytes, as the
impersonated library would allocate them (`Profile`). `ShapeTracer` returns
the peak of one call at any row count: nothing is computed and no memory of
the data's size is taken, and nothing outside the trace is touched (no
process-wide statistic, no switch), so traces in several threads run at
once.

This package registers what its modules need of each other before they
run: the namespace that ``__array_namespace__`` returns, NumPy's and other
libraries' function protocols, indexing, the array's complex parts (``x.real``,
``x.imag``, ``x.conj()``), torch's tensor methods (``x.clone()``,
``x.transpose(1, 2)``), and the adapter that `Backend.from_arrays`
finds for shape-only arrays.
"""

from __future__ import annotations

from .._registry import register_guest
from .._trace import CannotFollow, Profile
from . import _namespace
from ._adapter import ShapesAdapter
from ._array import INDEXED, NAMESPACE, PROTOCOLS, REDUCTION, ShapeArray
from ._complex_parts import ATTRIBUTES
from ._foreign import OWN, foreign_call
from ._indexing import indexed
from ._linalg import METHODS
from ._manipulation import TRANSPOSES
from ._numpy import array_function, array_ufunc
from ._run import InputSpec, ShapeTracer
from ._statistics import reduction
from ._torch_methods import FUNCTIONS, methods

__all__ = ["CannotFollow", "InputSpec", "Profile", "ShapeArray", "ShapeTracer"]

NAMESPACE.append(_namespace)
PROTOCOLS.update(ufunc=array_ufunc, function=array_function, foreign=foreign_call)
REDUCTION.append(reduction)
INDEXED.append(indexed)
OWN.update(FUNCTIONS)
_TORCH = methods(ShapeArray)  # (torch's methods, where NumPy's differ)
for _name, _attribute in {**ATTRIBUTES, **METHODS, **TRANSPOSES, **_TORCH}.items():
    setattr(ShapeArray, _name, _attribute)  # (x.T)
register_guest(ShapeArray, ShapesAdapter())
