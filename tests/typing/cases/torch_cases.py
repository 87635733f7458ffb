"""Typing cases for PyTorch (checked only where torch is installed)."""

from __future__ import annotations

from typing import Any, assert_type

import numpy as np
import torch
import user_lib

from xpkit import Backend

b = Backend("torch", device="cpu")
assert_type(b, Backend[torch.Tensor])
x = b.asarray([[1.0, 2.0], [3.0, 4.0]])
assert_type(x, torch.Tensor)
assert_type(b.matmul(x, x), torch.Tensor)
assert_type(b.svd(x), tuple[torch.Tensor, torch.Tensor, torch.Tensor])
assert_type(b.move(np.ones(3)), torch.Tensor)
assert_type(b.to_numpy(x), np.ndarray[Any, Any])
assert_type(b.to_cpu(x), torch.Tensor | np.ndarray[Any, Any])
assert_type(b.check_arrays(x, np.ones((2, 2)), [1.0, 2.0]), list[torch.Tensor])
assert_type(b.check_arrays(x, None), list[torch.Tensor | None])
assert_type(b.create.zeros(3), torch.Tensor)
assert_type(b.xp.sum(x, axis=0), torch.Tensor)
assert_type(b.xp.linalg.svd(x), tuple[torch.Tensor, torch.Tensor, torch.Tensor])
assert_type(Backend.from_arrays(x, 1.0, None), Backend[torch.Tensor])
assert_type(Backend.from_arrays(x).asarray([1.0]), torch.Tensor)

# user code in another module, on torch tensors
y = b.asarray([[1.0], [2.0]])
assert_type(user_lib.ridge_svd(x, y, 1.0, b), torch.Tensor)
assert_type(user_lib.standardize(x), torch.Tensor)
