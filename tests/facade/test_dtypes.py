"""xpkit._dtypes: dtype names, learnt from the adapters without importing them.

Facts flow down: the adapters' registry tells ``_dtypes`` how each library
spells its dtypes (`register_dtype_spelling`); ``_dtypes`` imports nothing of
xpkit at run time, so it sits on the lowest floor of the import graph.
"""

from __future__ import annotations

import pytest
from import_graph import xpkit_imports

from xpkit import _dtypes
from xpkit._adapters import ADAPTERS
from xpkit._dtypes import dtype_name, register_dtype_spelling


def test_dtypes_imports_nothing_of_xpkit_at_run_time():
    own = xpkit_imports()["xpkit._dtypes"]
    assert own == set()


def test_the_registry_gives_dtypes_every_adapter_s_spellings():
    for adapter in ADAPTERS.values():
        assert set(adapter.dtype_prefixes) <= _dtypes._PREFIXES, adapter.key
        if adapter.dtype_repr_module:
            assert adapter.dtype_repr_module in _dtypes._PRINTING, adapter.key
    assert dtype_name("np.float32") == "float32"
    assert dtype_name("jnp.int8") == "int8"
    assert dtype_name("dask.array.complex64") == "complex64"


def test_a_registered_spelling_is_read_and_an_unknown_one_refused(monkeypatch):
    monkeypatch.setattr(_dtypes, "_PREFIXES", set(_dtypes._PREFIXES))
    monkeypatch.setattr(_dtypes, "_PRINTING", set(_dtypes._PRINTING))
    with pytest.raises(TypeError, match="not a numeric or boolean dtype"):
        dtype_name("mylib.float32")
    register_dtype_spelling(("mylib", "ml"))
    assert dtype_name("mylib.float32") == "float32"
    assert dtype_name(" ml.uint16 ") == "uint16"


def test_a_registered_printing_module_names_its_dtype_objects(monkeypatch):
    monkeypatch.setattr(_dtypes, "_PREFIXES", set(_dtypes._PREFIXES))
    monkeypatch.setattr(_dtypes, "_PRINTING", set(_dtypes._PRINTING))
    spelt = type(
        "Dtype", (), {"__module__": "mylib.types", "__str__": lambda _: "mylib.int16"}
    )
    bare = type("Dtype", (), {"__module__": "mylib", "__str__": lambda _: "bool"})
    with pytest.raises(TypeError, match="not a numeric or boolean dtype"):
        dtype_name(bare())
    register_dtype_spelling(("mylib",), "mylib")
    assert dtype_name(spelt()) == "int16"
    assert dtype_name(bare()) == "bool"
