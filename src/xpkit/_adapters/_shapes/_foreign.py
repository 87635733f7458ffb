"""Another library's own functions on shape-only arrays (``__torch_function__``).

``torch.tanh(x)``, ``torch.sum(x, dim=1)`` or a tensor's operator with a
shape-only operand reach `foreign_call` through torch's function protocol.
A function of the standard's name (or a known alias) runs the standard's,
with torch's keywords renamed (``dim`` -> ``axis``, ``keepdim`` ->
``keepdims``); another is refused, naming it. Called by ``fn`` itself (not
by array-api-compat's function of the same name, which promotes as the
standard does), it promotes as torch does (`Trace.native`): a 0-d tensor
beside a dimensioned one of its kind is a scalar (``torch.maximum(x32,
torch.tensor(2.0, dtype=torch.float64))`` is float32). torch's functions
the standard has not (``torch.clone``, ``torch.softmax``) take the rules of
the tensor's methods of their names (`OWN`), and those methods reach this
handler for the standard's names (``x.exp()``, ``x.sum(1, True)``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from .._trace import active_trace
from . import _namespace as namespace
from . import _rules as rules
from ._array import ShapeArray, binary, lift, made

if TYPE_CHECKING:
    from ..._typing import Value
    from .._trace import Trace

__all__ = ["foreign_call"]


#: torch's names for the standard's functions.
_ALIASES = {
    "mul": "multiply",
    "sub": "subtract",
    "div": "divide",
    "true_divide": "divide",
    "clamp": "clip",
    "cat": "concat",
    "concatenate": "concat",
    "permute": "permute_dims",
    "unsqueeze": "expand_dims",
    "mm": "matmul",
    "bmm": "matmul",
    "mv": "matmul",
    "neg": "negative",
    "amax": "max",
    "amin": "min",
    "topk": "top_k",
    "absolute": "abs",
    "arccos": "acos",
    "arcsin": "asin",
    "arctan": "atan",
    "ge": "greater_equal",
    "gt": "greater",
    "le": "less_equal",
    "lt": "less",
    "eq": "equal",
    "ne": "not_equal",
}

#: torch's ``linalg`` functions the trace follows by the standard's, and
#: their positional arguments after the first: under a dispatch mode (the
#: meter after the trace) torch's ``svdvals`` computes U and Vh too, which
#: the call it stands for does not (``matrix_norm`` of ord 2 and "nuc" call it).
_LINALG = {
    "linalg_svdvals": ("svdvals", ()),
    "linalg_matrix_norm": ("matrix_norm", ("ord", "dim", "keepdim")),
    "linalg_vector_norm": ("vector_norm", ("ord", "dim", "keepdim")),
}

#: torch's functions of its own (``torch.clone``, ``torch.transpose``):
#: name -> rule, ``rule(x, *args, **kwargs)`` with torch's arguments
#: (registered by the package: `_torch_methods.FUNCTIONS`).
OWN: dict[str, Callable[..., object]] = {}

#: A tensor's operators, by their method names.
_OPERATORS = {
    "__add__": "+",
    "__sub__": "-",
    "__mul__": "*",
    "__truediv__": "/",
    "__floordiv__": "//",
    "__mod__": "%",
    "__pow__": "**",
    "__and__": "&",
    "__or__": "|",
    "__xor__": "^",
    "__lt__": "<",
    "__le__": "<=",
    "__gt__": ">",
    "__ge__": ">=",
    "__eq__": "==",
    "__ne__": "!=",
}

#: torch's keywords, as the standard spells them.
_KEYWORDS = {"dim": "axis", "keepdim": "keepdims", "input": None}
#: torch's keywords that change no shape or dtype (``add(x, y, alpha=2)``;
#: ``std(x, 1, unbiased=False)``).
_UNSHAPED = frozenset({"out", "alpha", "unbiased"})


def _keywords(kwargs: dict[str, Value]) -> dict[str, Value]:
    renamed: dict[str, Value] = {}
    for given, v in kwargs.items():
        k = _KEYWORDS.get(given, given) or given
        if k not in _UNSHAPED:
            renamed[k] = v
    if kwargs.get("out") is not None:
        msg = "a function writing into out="
        raise active_trace().refuse(msg)
    return renamed


def _operator(symbol: str, reflected: bool) -> Callable[..., ShapeArray]:
    def apply(a: Value, b: Value) -> ShapeArray:
        return binary(symbol, b, a) if reflected else binary(symbol, a, b)

    return apply


class _Pair(NamedTuple):
    """What torch's ``sort``, ``topk`` and ``max(x, dim)`` return: values, indices."""

    values: Value
    indices: Value


#: torch's functions that also return indices: ``torch.sort``, ``torch.max(x, dim)``.
_WITH_INDICES = frozenset({"sort", "max", "min"})


def _with_indices(
    trace: Trace, name: str, args: list[Value], kw: dict[str, Value]
) -> object:
    """The ``(values, indices)`` of torch's ``sort``, and of ``max``/``min`` along a dim.

    ``max(a, b)`` of two arrays is the elementwise maximum; ``max(x)`` (no
    dim) one value: None, for the standard's function.
    """
    if name != "sort" and len(args) > 1 and hasattr(args[1], "shape"):
        return binary("maximum" if name == "max" else "minimum", args[0], args[1])
    axis = args[1] if len(args) > 1 else kw.get("axis", -1 if name == "sort" else None)
    if axis is None:
        return None
    x = lift(trace, args[0])
    given = args[2] if len(args) > 2 else False  # (torch's keepdim, positional)
    keep = bool(kw.get("keepdims", given)) and name != "sort"
    shape = x.shape if name == "sort" else rules.reduced(x.shape, axis, keep)
    values = made(trace, shape, x._name, (x,))
    return _Pair(values, made(trace, shape, "int64", (x,)))


def foreign_call(
    func: Value, args: tuple[Value, ...], kwargs: dict[str, Value]
) -> object:
    """``func(*args, **kwargs)`` of another library, on shape-only arrays."""
    trace = (
        next((a._trace for a in args if isinstance(a, ShapeArray)), None)
        or active_trace()
    )
    name = getattr(func, "__name__", "")
    if name in _OPERATORS or name.replace("__r", "__", 1) in _OPERATORS:
        reflected = name not in _OPERATORS
        symbol = _OPERATORS[name.replace("__r", "__", 1) if reflected else name]
        return _operator(symbol, reflected)(*args)
    if name == "__matmul__":
        return namespace.matmul(*args)
    if name in ("__getitem__",) and args:
        return lift(trace, args[0])[args[1]]
    if name in OWN and args:
        return OWN[name](lift(trace, args[0]), *args[1:], **kwargs)
    if name in _LINALG:
        return _linalg(name, list(args), kwargs)
    standard = _ALIASES.get(name, name)
    handler = (
        getattr(namespace, standard, None) if standard in namespace.__all__ else None
    )
    if handler is None or not callable(handler):
        module = getattr(func, "__module__", None) or "a library"
        msg = f"{module}.{name} has no shape rule"
        raise trace.refuse(msg)
    native, trace.native = trace.native, _called_by_fn()
    try:
        return _standard(trace, name, standard, handler, list(args), kwargs)
    finally:
        trace.native = native


def _linalg(name: str, args: list[Value], kwargs: dict[str, Value]) -> object:
    """The standard's function for torch's ``linalg`` function ``name``, its arguments renamed."""
    standard, positional = _LINALG[name]
    kwargs = dict(zip(positional, args[1:], strict=False)) | kwargs
    if kwargs.pop("dtype", None) is not None or (
        standard == "matrix_norm" and kwargs.pop("dim", (-2, -1)) not in _LAST_TWO
    ):
        msg = f"torch.linalg.{standard} into a dtype or over other axes"
        raise active_trace().refuse(msg)
    return getattr(namespace.linalg, standard)(args[0], **_keywords(kwargs))


#: A matrix norm's axes that the standard's ``matrix_norm`` takes.
_LAST_TWO = ((-2, -1), [-2, -1])


#: This package, whose frames stand between torch's function and `foreign_call`.
_SHAPES = __name__.rpartition(".")[0]


def _called_by_fn() -> bool:
    """Whether the library's function was called by ``fn``, not by array-api-compat.

    (Read from the first frame above this package's and torch's own.)
    """
    frame = sys._getframe(2)
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        top = module.partition(".")[0]
        if top != "torch" and not module.startswith(_SHAPES):
            return top != "array_api_compat"
        frame = frame.f_back  # type: ignore[assignment]
    return True


#: The standard's functions whose second argument torch's give the axis.
_AXIS_SECOND = frozenset({"concat", "stack", "expand_dims", "flip", "argsort"})


def _standard(
    trace: Trace,
    name: str,
    standard: str,
    handler: Callable[..., Value],
    positional: list[Value],
    kwargs: dict[str, Value],
) -> object:
    """The standard's ``handler`` for torch's function ``name``, its arguments renamed."""
    kw = _keywords(kwargs)
    if name in _WITH_INDICES:  # (torch's own names: amax has no indices)
        paired = _with_indices(trace, name, positional, kw)
        if paired is not None:
            return paired
    if (
        standard
        in (
            "sum",
            "prod",
            "mean",
            "max",
            "min",
            "all",
            "any",
            "argmax",
            "argmin",
            "var",
            "std",
        )
        and len(positional) > 1
    ):
        kw.setdefault("axis", positional.pop(1))
        if standard in ("var", "std") and len(positional) > 1:
            positional.pop(1)  # (torch's unbiased)
        if len(positional) > 1:
            kw.setdefault("keepdims", positional.pop(1))
    if standard in _AXIS_SECOND and len(positional) > 1:
        kw.setdefault("axis", positional.pop(1))
    if standard == "roll" and len(positional) > 2:
        kw.setdefault("axis", positional.pop(2))
    if standard == "top_k":  # torch.topk(x, k, dim, largest, sorted): sorted always
        if len(positional) > 2:
            kw.setdefault("axis", positional.pop(2))
        if len(positional) > 2:
            kw.setdefault("largest", positional.pop(2))
        kw.pop("sorted", None)
        kw["mode"] = "largest" if kw.pop("largest", True) else "smallest"
        del positional[2:]
        return _Pair(*handler(*positional, **kw))
    if standard == "permute_dims" and len(positional) > 2:
        positional = [positional[0], tuple(positional[1:])]
    return handler(*positional, **kw)
