"""Bad input, across every public name: one table, each row a call, the exception
it must raise and a fragment of its message that names the parameter.

Rows that take a `Backend` run on every backend the plugin offers (``b``);
the others run once. The CLI rows check argparse's exit status and message,
the environment rows set a variable first. The README's "Errors" section
states the policy these rows hold the library to.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import xpkit
from xpkit import testing
from xpkit.testing import strategies

INF, NAN = math.inf, math.nan
X = np.arange(6.0).reshape(3, 2)


class Row(NamedTuple):
    call: Callable[..., Any]
    error: type[BaseException]
    names: str  # a regex fragment of the message: the parameter and its value


def _fn_none(x):
    return None


def _fn_rows(k):
    return lambda x: np.zeros((k, 1))


def _fn_dtype_changes(x):
    return x.astype(np.float32) if x[0, 0] > 0 else x


def _fn_row_shape_changes(x):
    return np.zeros((x.shape[0], 1 if x[0, 0] == 0 else 2))


def _fn_structure_changes(x):
    return (x, x) if x[0, 0] == 0 else x


def _torch_or_numpy_one(n):
    """``[n]``: a torch tensor of shape (1,) where torch is installed."""
    try:
        import torch
    except ImportError:
        return np.array([n])
    return torch.tensor([n])


def _zero_rows_none(x):
    return None


ONCE: dict[str, Row] = {
    # Backend(...) and its classmethod
    "Backend int": Row(
        lambda: xpkit.Backend(3), TypeError, "backend must be a string, got 3"
    ),
    "Backend None": Row(
        lambda: xpkit.Backend(None), TypeError, "backend must be a string, got None"
    ),
    "Backend unknown": Row(
        lambda: xpkit.Backend("tensorflow"), ValueError, "backend='tensorflow'"
    ),
    "Backend device int": Row(
        lambda: xpkit.Backend("numpy", device=0),
        TypeError,
        "device must be a string or None, got 0",
    ),
    "Backend device missing": Row(
        lambda: xpkit.Backend("numpy", device="cuda"),
        ValueError,
        "device='cuda' does not exist",
    ),
    "Backend device empty": Row(
        lambda: xpkit.Backend("numpy", device=""),
        ValueError,
        "device='' does not exist",
    ),
    "Backend device garbage": Row(
        lambda: xpkit.Backend("numpy", device="gpu:banana"),
        ValueError,
        "device='gpu:banana'",
    ),
    "from_arrays str": Row(
        lambda: xpkit.Backend.from_arrays("abc"), TypeError, "arrays\\[0\\]"
    ),
    "from_arrays object": Row(
        lambda: xpkit.Backend.from_arrays(object()), TypeError, "arrays\\[0\\]"
    ),
    # resolve_backend / auto_select_backend
    "resolve int": Row(
        lambda: xpkit.resolve_backend(3),
        TypeError,
        "parallel must be None, a string or a Backend, got 3",
    ),
    "resolve float": Row(
        lambda: xpkit.resolve_backend(1.5),
        TypeError,
        "parallel must be None, a string or a Backend, got 1.5",
    ),
    "resolve list": Row(
        lambda: xpkit.resolve_backend(["numpy"]), TypeError, "parallel must be None"
    ),
    "resolve unknown": Row(
        lambda: xpkit.resolve_backend("tpu"), ValueError, "parallel='tpu'"
    ),
    "auto_select n_samples 0": Row(
        lambda: xpkit.auto_select_backend(0, 10), ValueError, "n_samples"
    ),
    "auto_select n_features 0": Row(
        lambda: xpkit.auto_select_backend(10, 0), ValueError, "n_features"
    ),
    "auto_select cv 0": Row(
        lambda: xpkit.auto_select_backend(10, 10, cv=0), ValueError, "cv"
    ),
    "auto_select str": Row(
        lambda: xpkit.auto_select_backend("10", 10), TypeError, "n_samples"
    ),
    "auto_select float": Row(
        lambda: xpkit.auto_select_backend(10.5, 10), TypeError, "n_samples"
    ),
    "auto_select bool": Row(
        lambda: xpkit.auto_select_backend(10, True), TypeError, "n_features"
    ),
    "auto_select numpy bool": Row(
        lambda: xpkit.auto_select_backend(10, np.True_),
        TypeError,
        "n_features must be an int, got np.True_|n_features must be an int, got True",
    ),
    "auto_select numpy float": Row(
        lambda: xpkit.auto_select_backend(np.float64(10.0), 10),
        TypeError,
        "n_samples must be an int",
    ),
    "auto_select numpy int 0": Row(
        lambda: xpkit.auto_select_backend(10, 10, cv=np.int64(0)),
        ValueError,
        "cv must be positive",
    ),
    # gb_to_bytes
    "gb_to_bytes negative": Row(
        lambda: xpkit.gb_to_bytes(-1),
        ValueError,
        "gb must be a finite non-negative number, got -1",
    ),
    "gb_to_bytes beyond float": Row(  # (an OverflowError)
        lambda: xpkit.gb_to_bytes(10**400), ValueError, "gb must be .* got 1000"
    ),
    "memory_budget beyond float": Row(
        lambda: xpkit.memory_budget(10**400), ValueError, "got 1000"
    ),
    "gb_to_bytes str": Row(
        lambda: xpkit.gb_to_bytes("1"), TypeError, "gb must be a number, got '1'"
    ),
    "gb_to_bytes nan": Row(
        lambda: xpkit.gb_to_bytes(NAN), ValueError, "gb must be .* got nan"
    ),
    "gb_to_bytes inf": Row(
        lambda: xpkit.gb_to_bytes(INF), ValueError, "gb must be .* got inf"
    ),
    "gb_to_bytes huge": Row(
        lambda: xpkit.gb_to_bytes(1e300), ValueError, "gb must be at most"
    ),
    "gb_to_bytes bool": Row(
        lambda: xpkit.gb_to_bytes(True), TypeError, "gb must be a number, got True"
    ),
    # memory_budget
    "memory_budget 0": Row(
        lambda: xpkit.memory_budget(0),
        ValueError,
        "gb must be a finite positive number, got 0",
    ),
    "memory_budget negative": Row(
        lambda: xpkit.memory_budget(-1.0), ValueError, "gb must be .* got -1"
    ),
    "memory_budget inf": Row(
        lambda: xpkit.memory_budget(INF), ValueError, "gb must be .* got inf"
    ),
    "memory_budget str": Row(
        lambda: xpkit.memory_budget("2"), TypeError, "gb must be a number, got '2'"
    ),
    "memory_budget None": Row(
        lambda: xpkit.memory_budget(None), TypeError, "gb must be a number, got None"
    ),
    "memory_budget huge": Row(
        lambda: xpkit.memory_budget(1e300), ValueError, "gb must be at most"
    ),
    # device_memory_budget
    "budget backend str": Row(
        lambda: xpkit.device_memory_budget("garbage"),
        TypeError,
        "backend must be a Backend or None, got 'garbage'",
    ),
    "budget backend str in block": Row(
        lambda: _in_budget(lambda: xpkit.device_memory_budget("garbage")),
        TypeError,
        "backend must be a Backend or None",
    ),
    "budget explicit 0": Row(
        lambda: xpkit.device_memory_budget(None, 0),
        ValueError,
        "max_gpu_memory_gb must be .* got 0",
    ),
    "budget explicit negative": Row(
        lambda: xpkit.device_memory_budget(None, -1), ValueError, "max_gpu_memory_gb"
    ),
    "budget explicit str": Row(
        lambda: xpkit.device_memory_budget(None, "4"),
        TypeError,
        "max_gpu_memory_gb must be a number",
    ),
    "budget explicit huge": Row(
        lambda: xpkit.device_memory_budget(None, 1e300),
        ValueError,
        "max_gpu_memory_gb must be at most",
    ),
    "budget cap str": Row(
        lambda: xpkit.device_memory_budget(cap_for_batching="yes"),
        TypeError,
        "cap_for_batching must be a bool, got 'yes'",
    ),
    # (a budget given made the answer before the flag was read: 1.0)
    "budget cap str beside a budget": Row(
        lambda: xpkit.device_memory_budget(
            max_gpu_memory_gb=1.0, cap_for_batching="yes"
        ),
        TypeError,
        "cap_for_batching must be a bool, got 'yes'",
    ),
    "budget backend huge int": Row(
        lambda: xpkit.device_memory_budget(2**1000),
        TypeError,
        r"backend must be a Backend or None, got 107150860718\.\.\. \(an int of 302",
    ),
    # auto_batch_size
    "batch n_items 0": Row(
        lambda: xpkit.auto_batch_size(0, 8.0, budget_gb=1.0),
        ValueError,
        "n_items must be a positive int, got 0",
    ),
    "batch n_items float": Row(
        lambda: xpkit.auto_batch_size(1.5, 8.0, budget_gb=1.0),
        TypeError,
        "n_items must be an int, got 1.5",
    ),
    "batch n_items an array of one": Row(  # (torch's __index__ takes it)
        lambda: xpkit.auto_batch_size(_torch_or_numpy_one(10), 8.0, budget_gb=1.0),
        TypeError,
        "n_items must be an int, got ",
    ),
    "batch n_items bool": Row(
        lambda: xpkit.auto_batch_size(True, 8.0, budget_gb=1.0),
        TypeError,
        "n_items must be an int, got True",
    ),
    "batch bytes 0": Row(
        lambda: xpkit.auto_batch_size(10, 0, budget_gb=1.0),
        ValueError,
        "bytes_per_item must be a finite positive number, got 0",
    ),
    "batch bytes negative": Row(
        lambda: xpkit.auto_batch_size(10, -1.0, budget_gb=1.0),
        ValueError,
        "bytes_per_item",
    ),
    "batch bytes nan": Row(
        lambda: xpkit.auto_batch_size(10, NAN, budget_gb=1.0),
        ValueError,
        "bytes_per_item .* got nan",
    ),
    "batch bytes str": Row(
        lambda: xpkit.auto_batch_size(10, "8", budget_gb=1.0),
        TypeError,
        "bytes_per_item must be a number",
    ),
    "batch budget 0": Row(
        lambda: xpkit.auto_batch_size(10, 8.0, budget_gb=0),
        ValueError,
        "budget_gb must be a finite positive",
    ),
    "batch budget inf": Row(
        lambda: xpkit.auto_batch_size(10, 8.0, budget_gb=INF),
        ValueError,
        "budget_gb .* got inf",
    ),
    "batch budget huge": Row(
        lambda: xpkit.auto_batch_size(10, 8.0, budget_gb=1e300),
        ValueError,
        "budget_gb must be at most",
    ),
    "batch overhead 0": Row(
        lambda: xpkit.auto_batch_size(10, 8.0, budget_gb=1.0, overhead=0),
        ValueError,
        "overhead must be a finite positive",
    ),
    "batch overhead nan": Row(
        lambda: xpkit.auto_batch_size(10, 8.0, budget_gb=1.0, overhead=NAN),
        ValueError,
        "overhead .* got nan",
    ),
    "batch overhead tiny": Row(  # (ZeroDivisionError from 5e-324 * 0.5)
        lambda: xpkit.auto_batch_size(10, 5e-324, budget_gb=1.0, overhead=0.5),
        ValueError,
        r"bytes_per_item \* overhead must be a finite positive number of bytes, "
        r"got 5e-324 \* 0.5 = 0.0",
    ),
    "batch overhead huge": Row(  # ('one item requires inf GB')
        lambda: xpkit.auto_batch_size(10, 8.0, budget_gb=1.0, overhead=1e308),
        ValueError,
        r"overhead must be between 1e-09 and 1e\+09 \(a multiplier of the working "
        r"set\), got 1e\+308",
    ),
    "batch min_batch 0": Row(
        lambda: xpkit.auto_batch_size(10, 8.0, budget_gb=1.0, min_batch=0),
        ValueError,
        "min_batch must be a positive int, got 0",
    ),
    "batch min_batch float": Row(
        lambda: xpkit.auto_batch_size(10, 8.0, budget_gb=1.0, min_batch=1.5),
        TypeError,
        "min_batch must be an int",
    ),
    "batch min_batch bool": Row(
        lambda: xpkit.auto_batch_size(10, 8.0, budget_gb=1.0, min_batch=True),
        TypeError,
        "min_batch must be an int, got True",
    ),
    "batch item too big": Row(
        lambda: xpkit.auto_batch_size(10, 2.0**40, budget_gb=1.0),
        ValueError,
        "one item requires .* budget_gb=1.0",
    ),
    # auto_n_jobs_for_arrays
    "n_jobs arrays int": Row(
        lambda: xpkit.auto_n_jobs_for_arrays(5),
        TypeError,
        "arrays must be an iterable of arrays, got int",
    ),
    "n_jobs arrays str": Row(
        lambda: xpkit.auto_n_jobs_for_arrays("abc"),
        TypeError,
        "arrays must be an iterable of arrays, got str",
    ),
    "n_jobs item object": Row(
        lambda: xpkit.auto_n_jobs_for_arrays([object()]),
        TypeError,
        "arrays\\[0\\] must be an array of a supported library .* got object",
    ),
    "n_jobs item list after None": Row(
        lambda: xpkit.auto_n_jobs_for_arrays([X, None, [1.0, 2.0]]),
        TypeError,
        "arrays\\[2\\] .* got list",
    ),
    "n_jobs item str": Row(
        lambda: xpkit.auto_n_jobs_for_arrays(iter([X, "abc"])),
        TypeError,
        "arrays\\[1\\] .* got str",
    ),
    "n_jobs budget 0": Row(
        lambda: xpkit.auto_n_jobs_for_arrays([X], max_memory_gb=0),
        ValueError,
        "max_memory_gb must be a finite positive",
    ),
    "n_jobs budget huge": Row(
        lambda: xpkit.auto_n_jobs_for_arrays([X], max_memory_gb=1e300),
        ValueError,
        "max_memory_gb must be at most",
    ),
    "n_jobs budget negative, no arrays": Row(
        lambda: xpkit.auto_n_jobs_for_arrays([], max_memory_gb=-1),
        ValueError,
        "max_memory_gb must be a finite positive",
    ),
    "n_jobs budget str, only None": Row(
        lambda: xpkit.auto_n_jobs_for_arrays([None], max_memory_gb="lots"),
        TypeError,
        "max_memory_gb",
    ),
    "n_jobs one array for the items": Row(
        lambda: xpkit.auto_n_jobs_for_arrays(np.zeros((1000, 10))),
        TypeError,
        r"arrays must be an iterable of the map's items, got one array of shape "
        r"\(1000, 10\): give \[x\]",
    ),
    "n_jobs min_jobs 0": Row(
        lambda: xpkit.auto_n_jobs_for_arrays([X], min_jobs=0),
        ValueError,
        "min_jobs must be a positive int, got 0",
    ),
    "n_jobs min_jobs str": Row(
        lambda: xpkit.auto_n_jobs_for_arrays([X], min_jobs="2"),
        TypeError,
        "min_jobs must be an int, got '2'",
    ),
    # is_oom_error
    "is_oom str": Row(
        lambda: xpkit.is_oom_error("x"), TypeError, "exc must be an exception, got 'x'"
    ),
    "is_oom None": Row(
        lambda: xpkit.is_oom_error(None),
        TypeError,
        "exc must be an exception, got None",
    ),
    "is_oom class": Row(
        lambda: xpkit.is_oom_error(MemoryError), TypeError, "exc must be an exception"
    ),
    # compute_oom_safe
    "oom_safe fn": Row(
        lambda: xpkit.compute_oom_safe(42, X), TypeError, "fn must be callable, got 42"
    ),
    "oom_safe no arrays": Row(
        lambda: xpkit.compute_oom_safe(abs),
        ValueError,
        "arrays must hold at least one array",
    ),
    "oom_safe lengths": Row(
        lambda: xpkit.compute_oom_safe(abs, X, np.ones(2)),
        ValueError,
        "share their axis-0 length, got lengths \\[3, 2\\]",
    ),
    "oom_safe 0-d": Row(
        lambda: xpkit.compute_oom_safe(abs, np.float64(1.0)),
        TypeError,
        "arrays\\[0\\] must be an array with at least one axis",
    ),
    "oom_safe min_chunk 0": Row(
        lambda: xpkit.compute_oom_safe(abs, X, min_chunk=0),
        ValueError,
        "min_chunk must be a positive int, got 0",
    ),
    "oom_safe min_chunk float": Row(
        lambda: xpkit.compute_oom_safe(abs, X, min_chunk=1.5),
        TypeError,
        "min_chunk must be an int, got 1.5",
    ),
    "oom_safe fn None": Row(
        lambda: xpkit.compute_oom_safe(_fn_none, X),
        TypeError,
        "fn=.* rows 0:3 .* NoneType",
    ),
    "oom_safe fn rows": Row(
        lambda: xpkit.compute_oom_safe(_fn_rows(5), X),
        ValueError,
        "fn=.* one row per input row: for rows 0:3",
    ),
    "oom_safe fn list": Row(
        lambda: xpkit.compute_oom_safe(lambda x: [1.0, 2.0, 3.0], X),
        TypeError,
        "fn=.* returned a non-array at \\[0\\]",
    ),
    # map_batches
    "map fn": Row(
        lambda: xpkit.map_batches(42, X), TypeError, "fn must be callable, got 42"
    ),
    "map no arrays": Row(
        lambda: xpkit.map_batches(abs),
        ValueError,
        "arrays must hold at least one array",
    ),
    "map lengths": Row(
        lambda: xpkit.map_batches(abs, X, np.ones(2)),
        ValueError,
        "share their axis-0 length",
    ),
    "map budget 0": Row(
        lambda: xpkit.map_batches(abs, X, budget_gb=0),
        ValueError,
        "budget_gb must be a finite positive",
    ),
    "map budget huge": Row(
        lambda: xpkit.map_batches(abs, X, budget_gb=1e300),
        ValueError,
        "budget_gb must be at most",
    ),
    "map bytes negative": Row(
        lambda: xpkit.map_batches(abs, X, bytes_per_item=-5),
        ValueError,
        "bytes_per_item must be a finite positive",
    ),
    "map overhead nan": Row(
        lambda: xpkit.map_batches(abs, X, overhead=NAN),
        ValueError,
        "overhead must be a finite positive",
    ),
    "map overhead subnormal": Row(  # (OverflowError: the budget / overhead)
        lambda: xpkit.map_batches(abs, X, overhead=1e-310, remember=False),
        ValueError,
        "overhead must be between 1e-09 and 1e",
    ),
    "map cost past float": Row(
        lambda: xpkit.plan_batches(abs, X, bytes_per_item=1e300, overhead=1e9),
        ValueError,
        r"bytes_per_item \* overhead .* = inf",
    ),
    "map fallback cost 0": Row(
        lambda: xpkit.map_batches(
            abs, X, fallback_bytes_per_item=5e-324, overhead=0.5, remember=False
        ),
        ValueError,
        r"fallback_bytes_per_item \* overhead .* = 0.0",
    ),
    "map min_batch 0": Row(
        lambda: xpkit.map_batches(abs, X, min_batch=0),
        ValueError,
        "min_batch must be a positive int",
    ),
    "map min_batch bool": Row(
        lambda: xpkit.map_batches(abs, X, min_batch=True),
        TypeError,
        "min_batch must be an int, got True",
    ),
    "map progress": Row(
        lambda: xpkit.map_batches(abs, X, progress="yes"),
        TypeError,
        "progress must be a bool, got 'yes'",
    ),
    "map backend": Row(
        lambda: xpkit.map_batches(abs, X, backend="tpu"), ValueError, "backend='tpu'"
    ),
    "map executor str": Row(
        lambda: xpkit.map_batches(abs, X, executor="spark"),
        ValueError,
        "executor must be None, 'dask', 'joblib'",
    ),
    "map executor int": Row(
        lambda: xpkit.map_batches(abs, X, executor=4),
        TypeError,
        "executor must be None, .* got 4 of type int",
    ),
    "map result_on": Row(
        lambda: xpkit.map_batches(abs, X, result_on="gpu"),
        ValueError,
        "result_on must be 'host' or 'device', got 'gpu'",
    ),
    "map result_on int": Row(  # (a ValueError before)
        lambda: xpkit.map_batches(abs, X, result_on=1),
        TypeError,
        "result_on must be 'host' or 'device', got 1",
    ),
    "map whole int": Row(
        lambda: xpkit.map_batches(abs, X, whole=5),
        TypeError,
        "whole must be a tuple of operands .* got int",
    ),
    "map whole key": Row(
        lambda: xpkit.map_batches(abs, X, whole={1: X}),
        TypeError,
        "whole must map fn's keyword names",
    ),
    "map item too big": Row(
        lambda: xpkit.map_batches(abs, X, budget_gb=1e-12, bytes_per_item=1e6),
        ValueError,
        "one item requires",
    ),
    "map fn None": Row(
        lambda: xpkit.map_batches(_fn_none, X),
        TypeError,
        "fn=.* for rows 0:3 it returned NoneType",
    ),
    "map fn 0-d": Row(
        lambda: xpkit.map_batches(lambda x: x.sum(), X),
        ValueError,
        "fn=.* one row per input row: for rows 0:3 its result has shape \\(\\)",
    ),
    "map zero rows 5 rows": Row(
        lambda: xpkit.map_batches(_fn_rows(5), X[:0]),
        ValueError,
        "fn=.* for rows 0:0 .* expected axis 0 of length 0",
    ),
    "map zero rows None": Row(
        lambda: xpkit.map_batches(_zero_rows_none, X[:0]),
        TypeError,
        "fn=.* for rows 0:0 it returned NoneType",
    ),
    "map dtype changes": Row(
        lambda: xpkit.map_batches(
            _fn_dtype_changes, X, bytes_per_item=1.0, budget_gb=2**-30
        ),
        TypeError,
        "fn=.* changed the dtype of its result between batches: float64 before, float32 for rows 1:2",
    ),
    "map row shape changes": Row(
        lambda: xpkit.map_batches(
            _fn_row_shape_changes, X, bytes_per_item=1.0, budget_gb=2**-30
        ),
        ValueError,
        "fn=.* changed the row shape of its result between batches",
    ),
    "map structure changes": Row(
        lambda: xpkit.map_batches(
            _fn_structure_changes, X, bytes_per_item=1.0, budget_gb=2**-30
        ),
        ValueError,
        "fn=.* returned one array for rows 1:2 but a tuple of 2 arrays before",
    ),
    "plan fn": Row(
        lambda: xpkit.plan_batches(42, X), TypeError, "fn must be callable, got 42"
    ),
    "plan budget": Row(
        lambda: xpkit.plan_batches(abs, X, budget_gb=-1),
        ValueError,
        "budget_gb must be a finite positive",
    ),
    "plan min_batch": Row(
        lambda: xpkit.plan_batches(abs, X, min_batch="x"),
        TypeError,
        "min_batch must be an int, got 'x'",
    ),
    # xpkit.testing
    "assert_close rtol negative": Row(
        lambda: testing.assert_close(X, X, rtol=-1),
        ValueError,
        "rtol must be a finite non-negative number, got -1",
    ),
    "assert_close rtol str": Row(
        lambda: testing.assert_close(X, X, rtol="a"),
        TypeError,
        "rtol must be a number, got 'a'",
    ),
    "assert_close atol nan": Row(
        lambda: testing.assert_close(X, X, atol=NAN),
        ValueError,
        "atol must be a finite non-negative number, got nan",
    ),
    "assert_close atol bool": Row(
        lambda: testing.assert_close(X, X, atol=True),
        TypeError,
        "atol must be a number, got True",
    ),
    "assert_close check_dtype str": Row(
        lambda: testing.assert_close(X, X, check_dtype="yes"),
        TypeError,
        "check_dtype must be a bool, got 'yes'",
    ),
    "assert_equal check_device int": Row(
        lambda: testing.assert_equal(X, X, check_device=1),
        TypeError,
        "check_device must be a bool, got 1",
    ),
    "assert_equal check_namespace None": Row(
        lambda: testing.assert_equal(X, X, check_namespace=None),
        TypeError,
        "check_namespace must be a bool, got None",
    ),
    "default_tolerance unknown": Row(
        lambda: testing.default_tolerance("float128x"), TypeError, "dtype"
    ),
    "default_tolerance object": Row(
        lambda: testing.default_tolerance(object()), TypeError, "dtype"
    ),
    "almost_equal decimal str": Row(
        lambda: testing.assert_array_almost_equal(X, X, decimal="6"),
        TypeError,
        "decimal must be an int, got '6'",
    ),
    "almost_equal decimal negative": Row(
        lambda: testing.assert_array_almost_equal(X, X, decimal=-1),
        ValueError,
        "decimal must be a non-negative int, got -1",
    ),
    "almost_equal backend str": Row(
        lambda: testing.assert_array_almost_equal(X, X, backend="numpy"),
        TypeError,
        "backend must be a Backend or None, got 'numpy'",
    ),
    "almost_equal err_msg int": Row(
        lambda: testing.assert_array_almost_equal(X, X, err_msg=5),
        TypeError,
        "err_msg must be a string, got 5",
    ),
    "almost_equal verbose str": Row(
        lambda: testing.assert_array_almost_equal(X, X, verbose="no"),
        TypeError,
        "verbose must be a bool, got 'no'",
    ),
    # xpkit.testing.strategies
    "strategies arrays backend": Row(
        lambda: strategies.arrays("numpy"),
        TypeError,
        "backend must be a Backend, got 'numpy'",
    ),
    "strategies dtypes backend": Row(
        lambda: strategies.dtypes(None),
        TypeError,
        "backend must be a Backend, got None",
    ),
    "strategies dtype_names backend": Row(
        lambda: strategies.dtype_names(3), TypeError, "backend must be a Backend, got 3"
    ),
    "strategies dtypes kind": Row(
        lambda: strategies.dtypes(xpkit.Backend("numpy"), kind="nope"),
        ValueError,
        "kind='nope'",
    ),
    "strategies dtype_names kind": Row(
        lambda: strategies.dtype_names(xpkit.Backend("numpy"), kind=5),
        TypeError,
        "kind must be a string or None, got 5",
    ),
}


def _in_budget(call: Callable[[], Any]) -> Any:
    with xpkit.memory_budget(2.0):
        return call()


@pytest.mark.parametrize("row", ONCE.values(), ids=ONCE.keys())
def test_bad_input_once(row: Row):
    with pytest.raises(row.error, match=row.names):
        row.call()


# -- the CLI: argparse's usage error (exit status 2) names the option --------------
CLI: dict[str, tuple[list[str], str]] = {
    "demo permutations 0": (
        ["demo", "--permutations", "0"],
        "--permutations: must be a positive integer, got '0'",
    ),
    "demo permutations text": (
        ["demo", "--permutations", "abc"],
        "--permutations: must be a positive integer, got 'abc'",
    ),
    "demo permutations negative": (
        ["demo", "--permutations", "-5"],
        "--permutations: must be a positive integer",
    ),
    "demo samples 0": (
        ["demo", "--samples", "0"],
        (
            r"--samples: must be an integer of at least 2 \(a correlation needs "
            r"two samples\), got '0'"
        ),
    ),
    "demo features text": (
        ["demo", "--features", "x"],
        "--features: must be a positive integer, got 'x'",
    ),
    "demo budget 0": (
        ["demo", "--budget-gb", "0"],
        "--budget-gb: must be a finite positive number, got '0'",
    ),
    "demo budget nan": (
        ["demo", "--budget-gb", "nan"],
        "--budget-gb: must be a finite positive number, got 'nan'",
    ),
    "demo budget inf": (
        ["demo", "--budget-gb", "inf"],
        "--budget-gb: must be a finite positive number, got 'inf'",
    ),
    "unknown command": (["frobnicate"], "invalid choice: 'frobnicate'"),
    "no command": ([], "the following arguments are required"),
    "info unknown option": (["info", "--bogus"], "unrecognized arguments: --bogus"),
    "check unknown option": (["check", "--bogus"], "unrecognized arguments: --bogus"),
    "check backends unknown": (
        ["check", "--backends", "nope"],
        "--backends: names no backend known here: \\['nope'\\]",
    ),
    "info backends unknown": (
        ["info", "--backends", "numpy,nope"],
        "--backends: names no backend known here: \\['nope'\\]",
    ),
    "demo backends empty": (
        ["demo", "--backends", ","],
        "--backends: names no backend known here",
    ),
}


@pytest.mark.parametrize(("argv", "names"), CLI.values(), ids=CLI.keys())
def test_bad_cli_arguments(capsys, argv, names):
    from xpkit._cli import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert pytest.importorskip("re").search(names, err), err


# -- environment variables ----------------------------------------------------------
ENV: dict[str, str] = {
    "budget text": "abc",
    "budget negative": "-1",
    "budget zero": "0",
    "budget nan": "nan",
    "budget inf": "inf",
    "budget huge": "1e300",
}


@pytest.mark.parametrize("raw", ENV.values(), ids=ENV.keys())
def test_bad_budget_environment_variable(monkeypatch, raw):
    monkeypatch.setenv("XPKIT_MEMORY_BUDGET_GB", raw)
    with pytest.raises(
        ValueError,
        match=rf"XPKIT_MEMORY_BUDGET_GB must be a finite positive .* got '{raw}'",
    ):
        xpkit.device_memory_budget()


# -- Backend methods, on every backend ------------------------------------------
def _x(b):
    return b.asarray(X)


def _other_library(b):
    """A (3, 2) float64 array of a device library other than ``b``'s and NumPy's.

    (NumPy arrays are host data, which every backend takes.)
    """
    other = "array_api_strict" if b.library == "torch" else "torch"
    return xpkit.Backend(pytest.importorskip(other).__name__).asarray(np.ones((3, 2)))


def _at(b, idx):
    """``b.at`` on a fresh ``[0.0, 1.0, 2.0]`` of ``b``."""
    return b.at(b.asarray([0.0, 1.0, 2.0]), idx)


def _complex(b, values, dtype):
    """``values`` as a complex array of ``b``; a skip where ``b`` has none."""
    if "complex64" not in b.dtypes:
        pytest.skip(f"{b.name} has no complex dtypes")
    return b.asarray(values, dtype=dtype)


ON_EVERY_BACKEND: dict[str, Row] = {
    "asarray dtype unknown": Row(
        lambda b: b.asarray([1.0], dtype="float128x"), TypeError, "dtype"
    ),
    "asarray dtype int": Row(lambda b: b.asarray([1.0], dtype=5), TypeError, "dtype"),
    "asarray device unknown": Row(
        lambda b: b.asarray([1.0], device="nope"), ValueError, "device='nope'"
    ),
    "asarray device int": Row(
        lambda b: b.asarray([1.0], device=5), TypeError, "device=5"
    ),
    "asarray str": Row(
        lambda b: b.asarray("abc"), TypeError, "x has non-numeric dtype"
    ),
    "asarray None": Row(
        lambda b: b.asarray(None), TypeError, "x has non-numeric dtype object"
    ),
    "asarray ragged": Row(
        lambda b: b.asarray([[1.0], [1.0, 2.0]]), ValueError, "x is not array-like"
    ),
    "asarray uint8 overflow": Row(
        lambda b: b.asarray([300], dtype="uint8"),
        ValueError,
        "x holds 300, which does not fit dtype uint8",
    ),
    "asarray nan to int": Row(
        lambda b: b.asarray([NAN], dtype="int64"),
        ValueError,
        "x holds nan, which does not fit dtype int64",
    ),
    "asarray fraction to int": Row(
        lambda b: b.asarray([0.5], dtype="int64"),
        ValueError,
        "x holds 0.5, which does not fit dtype int64",
    ),
    "asarray masked": Row(
        lambda b: b.asarray(np.ma.masked_array([1.0, 2.0], mask=[True, False])),
        TypeError,
        "x is a NumPy masked array, whose mask the conversion would drop",
    ),
    "asarray_like ref str": Row(
        lambda b: b.asarray_like([1.0], "abc"), TypeError, "non-numeric"
    ),
    "check_arrays str": Row(
        lambda b: b.check_arrays(_x(b), "abc"),
        TypeError,
        "inputs\\[1\\] has non-numeric dtype",
    ),
    "check_arrays ragged": Row(
        lambda b: b.check_arrays(_x(b), [[1.0], [1.0, 2.0]]),
        ValueError,
        "inputs\\[1\\] is not array-like",
    ),
    "check_arrays lossy": Row(
        lambda b: b.check_arrays(b.asarray([1, 2]), [0.5, 1.7]),
        ValueError,
        "inputs\\[1\\] holds 0.5",
    ),
    "check_arrays other library": Row(
        lambda b: b.check_arrays(_x(b), _other_library(b)), TypeError, "inputs\\[1\\]"
    ),
    "concatenate str": Row(lambda b: b.concatenate("abc"), TypeError, "arrays"),
    "concatenate axis str": Row(
        lambda b: b.concatenate([_x(b)], axis="0"),
        TypeError,
        "axis must be an int, got '0'",
    ),
    "concatenate axis range": Row(
        lambda b: b.concatenate([_x(b)], axis=5), ValueError, "axis"
    ),
    "concatenate shapes": Row(
        lambda b: b.concatenate([_x(b), b.asarray(np.ones((2, 3)))]),
        ValueError,
        "arrays",
    ),
    "concatenate other library": Row(
        lambda b: b.concatenate([_x(b), _other_library(b)]), TypeError, "arrays\\[1\\]"
    ),
    "expand_dims axis str": Row(
        lambda b: b.expand_dims(_x(b), axis="1"),
        TypeError,
        "axis must be an int, got '1'",
    ),
    "expand_dims axis range": Row(
        lambda b: b.expand_dims(_x(b), axis=5), ValueError, "axis"
    ),
    "expand_dims list": Row(
        lambda b: b.expand_dims([1.0, 2.0], axis=0), TypeError, "array"
    ),
    "sort axis range": Row(lambda b: b.sort(_x(b), axis=5), ValueError, "axis"),
    "sort axis str": Row(
        lambda b: b.sort(_x(b), axis="0"), TypeError, "axis must be an int, got '0'"
    ),
    "sort list": Row(lambda b: b.sort([3.0, 1.0]), TypeError, "array"),
    "sort complex64": Row(
        lambda b: b.sort(_complex(b, [2 + 1j, 1 - 1j], "complex64")),
        TypeError,
        "array has dtype complex64, but sort takes real dtypes only",
    ),
    "sort complex128 axis 0": Row(
        lambda b: b.sort(_complex(b, X + 1j, "complex128"), axis=0),
        TypeError,
        "array has dtype complex(128|64), but sort takes real dtypes only",
    ),
    "at index out of range": Row(
        lambda b: _at(b, 5).set(1.0),
        IndexError,
        "idx=5 is out of range for axis 0 of x, which has size 3",
    ),
    "at negative index out of range": Row(
        lambda b: _at(b, -4).set(1.0),
        IndexError,
        "idx=-4 is out of range for axis 0 of x, which has size 3",
    ),
    "at NumPy int index out of range": Row(
        lambda b: _at(b, np.int64(3)).add(1.0),
        IndexError,
        "idx=3 is out of range for axis 0 of x, which has size 3",
    ),
    "at tuple index out of range": Row(
        lambda b: b.at(_x(b), (1, 2)).set(1.0),
        IndexError,
        "idx\\[1\\]=2 is out of range for axis 1 of x, which has size 2",
    ),
    "at index after ellipsis out of range": Row(
        lambda b: b.at(_x(b), (..., -3)).set(1.0),
        IndexError,
        "idx\\[1\\]=-3 is out of range for axis 1 of x, which has size 2",
    ),
    "at NumPy index array out of range": Row(
        lambda b: b.at(_x(b), (np.asarray([0, 3]), 0)).set(1.0),
        IndexError,
        "idx\\[0\\] holds 3, out of range for axis 0 of x, which has size 3",
    ),
    "at too many indices": Row(
        lambda b: b.at(_x(b), (0, 0, 0)).set(1.0),
        IndexError,
        "idx indexes 3 axes, but x has 2",
    ),
    "at x list": Row(lambda b: b.at([1.0, 2.0], 0), TypeError, "x must be an array"),
    "at y other library": Row(
        lambda b: b.at(_x(b), (0, 0)).set(_other_library(b)[0, 0]),
        TypeError,
        "y is an array of .*, but x is an array of",
    ),
    "at y list": Row(
        lambda b: _at(b, 0).set([1.0]), TypeError, "y must be an array of .* got list"
    ),
    "at y str": Row(
        lambda b: _at(b, 0).max("a"), TypeError, "y must be an array of .* got str"
    ),
    "at y NumPy string": Row(
        lambda b: _at(b, 0).min(np.str_("a")), TypeError, "y has non-numeric dtype <U1"
    ),
    "at copy str": Row(
        lambda b: _at(b, 0).set(1.0, copy="yes"),
        TypeError,
        "copy must be True, False or None, got 'yes'",
    ),
    "flatnonzero list": Row(lambda b: b.flatnonzero([0.0, 1.0]), TypeError, "array"),
    "matmul shapes": Row(lambda b: b.matmul(_x(b), _x(b)), ValueError, "A .* B|B .* A"),
    "matmul list": Row(lambda b: b.matmul(_x(b), [[1.0], [2.0]]), TypeError, "B"),
    "matmul other library": Row(
        lambda b: b.matmul(_x(b), _other_library(b).T), TypeError, "B is an array of"
    ),
    "svd full_matrices": Row(
        lambda b: b.svd(_x(b), full_matrices="no"),
        TypeError,
        "full_matrices must be a bool, got 'no'",
    ),
    "svd 1-D": Row(lambda b: b.svd(b.asarray([1.0, 2.0])), ValueError, "X"),
    "svd int": Row(lambda b: b.svd(b.asarray([[1, 2], [3, 4]])), TypeError, "X"),
    "full shape negative": Row(
        lambda b: b.full(-1, 1.0),
        ValueError,
        "shape must not have negative sizes, got -1",
    ),
    "full shape str": Row(
        lambda b: b.full("3", 1.0),
        TypeError,
        "shape must be an int or a tuple of ints, got '3'",
    ),
    "full fill str": Row(lambda b: b.full((2,), "a"), TypeError, "fill_value"),
    "full fill None": Row(lambda b: b.full((2,), None), TypeError, "fill_value"),
    "full fill uint8": Row(
        lambda b: b.full((2,), 300, dtype="uint8"), ValueError, "fill_value"
    ),
    "full fill nan int": Row(
        lambda b: b.full((2,), NAN, dtype="int64"), ValueError, "fill_value"
    ),
    "full fill 2**64": Row(lambda b: b.full((2,), 2**64), ValueError, "fill_value"),
    "full dtype unknown": Row(
        lambda b: b.full((2,), 1.0, dtype="nope"), TypeError, "dtype"
    ),
    "full_like fill str": Row(
        lambda b: b.full_like(_x(b), "a"), TypeError, "fill_value"
    ),
    "full_like shape negative": Row(
        lambda b: b.full_like(_x(b), 1.0, shape=-1), ValueError, "shape"
    ),
    "full_like device unknown": Row(
        lambda b: b.full_like(_x(b), 1.0, device="nope"), ValueError, "device='nope'"
    ),
    "zeros_like shape str": Row(
        lambda b: b.zeros_like(_x(b), shape="a"), TypeError, "shape"
    ),
    "zeros_like dtype unknown": Row(
        lambda b: b.zeros_like(_x(b), dtype="nope"), TypeError, "dtype"
    ),
    "ones_like shape negative": Row(
        lambda b: b.ones_like(_x(b), shape=(-1,)), ValueError, "shape"
    ),
    "ones_like device unknown": Row(
        lambda b: b.ones_like(_x(b), device="nope"), ValueError, "device='nope'"
    ),
    "dtype_to_str unknown": Row(lambda b: b.dtype_to_str("nope"), TypeError, "nope"),
    "dtype_to_str int": Row(lambda b: b.dtype_to_str(5), TypeError, "5"),
    # (an array of the backend's: NumPy's "truth value ... is ambiguous",
    # torch's "Could not convert", both ValueErrors naming no dtype)
    "dtype_to_str an array": Row(
        lambda b: b.dtype_to_str(b.asarray([1.0, 2.0])),
        TypeError,
        r"(?s)^dtype=.* is not a numeric or boolean dtype",
    ),
    "asarray dtype an array": Row(
        lambda b: b.asarray([1, 2], dtype=b.asarray([1.0, 2.0])),
        TypeError,
        r"(?s)dtype=.* is not a numeric or boolean dtype",
    ),
    "to_gpu device unknown": Row(
        lambda b: b.to_gpu(_x(b), device="nope"), ValueError, "device='nope'"
    ),
    "to_numpy str": Row(
        lambda b: b.to_numpy("abc"), TypeError, "arr has non-numeric dtype"
    ),
    "to_numpy masked": Row(
        lambda b: b.to_numpy(np.ma.masked_array([1.0], mask=[True])),
        TypeError,
        "arr is a NumPy masked array",
    ),
    "copy None": Row(lambda b: b.copy(None), TypeError, "array"),
    "copy str": Row(lambda b: b.copy("abc"), TypeError, "array"),
}


@pytest.mark.parametrize("row", ON_EVERY_BACKEND.values(), ids=ON_EVERY_BACKEND.keys())
def test_bad_input_on_every_backend(xpkit_backend, row: Row):
    with pytest.raises(row.error, match=row.names):
        row.call(xpkit_backend)


def test_the_table_has_at_least_150_rows():
    assert len(ONCE) + len(CLI) + len(ENV) + len(ON_EVERY_BACKEND) >= 150


HUGE_SHAPES = {
    "zeros_like": lambda b: b.zeros_like(_x(b), shape=(2**62, 2**62)),
    "full": lambda b: b.full((2**40, 2**40), 1.0),
}


@pytest.mark.parametrize("call", HUGE_SHAPES.values(), ids=HUGE_SHAPES.keys())
def test_a_shape_beyond_any_array_is_refused(xpkit_backend, call):
    """The libraries' own errors named no shape; JAX aborted the process."""
    if xpkit_backend.library in ("jax", "dask"):  # (JAX aborts, Dask's graph grows)
        pytest.skip("run in a child: test_a_shape_beyond_any_array_in_a_child")
    with pytest.raises(ValueError, match=r"shape must hold at most \d+ elements"):
        call(xpkit_backend)


@pytest.mark.parametrize("library", ["jax", "dask"])
def test_a_shape_beyond_any_array_in_a_child(library):
    pytest.importorskip(library)
    from helpers import run_python

    limit = (  # (were the check gone, Dask's graph would grow without end)
        "import resource\nresource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))\n"
        if library == "dask"
        else ""
    )
    code = (
        limit + "import xpkit\n"
        f"b = xpkit.Backend({library!r})\n"
        "for shape in ((2**62, 2**62), (2**40, 2**40)):\n"
        "    try:\n"
        "        b.zeros_like(b.asarray([1.0]), shape=shape)\n"
        "    except ValueError as exc:\n"
        "        print('refused:', exc)\n"
    )
    proc = run_python(code, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("refused: shape must hold at most") == 2
