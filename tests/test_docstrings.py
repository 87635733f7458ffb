"""Every public name documents itself, and its examples run.

Each function and class in ``xpkit.__all__`` and ``xpkit.testing.__all__``
has Parameters (where it takes any), Returns (where it returns), Raises and
Examples sections, and every example in those docstrings and in `Backend`'s
methods runs as a doctest.
"""

from __future__ import annotations

import doctest
import inspect

import pytest

import xpkit
import xpkit.testing

PUBLIC = [
    (module.__name__, name, getattr(module, name))
    for module in (xpkit, xpkit.testing)
    for name in module.__all__
    if inspect.isclass(getattr(module, name))
    or inspect.isfunction(getattr(module, name))
]


def _takes_parameters(obj: object) -> bool:
    target = obj.__init__ if inspect.isclass(obj) else obj  # type: ignore[misc]
    try:
        params = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return False
    return any(p not in ("self", "args", "kwargs") for p in params)


def _returns(obj: object) -> bool:
    if inspect.isclass(obj):
        return False
    annotation = inspect.signature(obj).return_annotation  # type: ignore[arg-type]
    return annotation not in ("None", None, inspect.Signature.empty)


@pytest.mark.parametrize(
    ("module", "name", "obj"), PUBLIC, ids=[f"{m}.{n}" for m, n, _ in PUBLIC]
)
def test_public_names_have_the_numpydoc_sections(module, name, obj):
    doc = inspect.getdoc(obj) or ""
    needed = ["Raises", "Examples"]
    if _takes_parameters(obj):
        needed.append("Parameters")
    if _returns(obj):
        needed.append("Returns")
    missing = [s for s in needed if f"\n{s}\n" not in f"\n{doc}\n"]
    assert not missing, f"{module}.{name} lacks {missing}"


def _examples() -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder(recurse=False)
    tests = []
    for _, _, obj in PUBLIC:
        tests += finder.find(obj)
    for attr, member in vars(xpkit.Backend).items():
        if not attr.startswith("_") and callable(member):
            tests += finder.find(member, name=f"Backend.{attr}")
    for cls in xpkit.Backend.__mro__[1:]:
        for attr, member in vars(cls).items():
            if not attr.startswith("_") and inspect.isfunction(member):
                tests += finder.find(member, name=f"{cls.__name__}.{attr}")
    return [t for t in tests if t.examples]


EXAMPLES = _examples()


def test_there_are_examples_to_run():
    assert len(EXAMPLES) >= len(PUBLIC) - 2


@pytest.mark.parametrize("test", EXAMPLES, ids=[t.name for t in EXAMPLES])
def test_docstring_examples_run(test):
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    )
    runner.run(test, out=lambda text: failures.append(text))
    assert runner.failures == 0, "".join(failures)


failures: list[str] = []
