"""The largest tensor a computation creates: how chapter 9 checks that tiled attention never
holds a T x T matrix, and how its page measures the formula against the tiles.

A :class:`LargestTensor` is a ``TorchDispatchMode``: while it is active, every PyTorch operation
(a matrix product, an ``exp``, a slice, a ``torch.zeros``) passes through it, and it remembers
the output with the most elements. It sees the tensors PyTorch makes, whichever Python code
asked for them; it runs in the process it measures, so it is a learner's aid and a measuring
tool, not a proof (the grader checks the rule by a size that cannot fit in its memory limit).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

__all__ = ["Largest", "LargestTensor", "largest_tensor"]


class Largest(NamedTuple):
    """The largest tensor seen: its number of elements, shape, dtype, size in bytes, and the
    PyTorch operation that made it (``"mm"``, ``"exp"``, ``"expand"``...)."""

    numel: int
    shape: tuple
    dtype: str
    nbytes: int
    op: str


class LargestTensor(TorchDispatchMode):
    """``with LargestTensor() as seen: ...``; then ``seen.largest`` (a :class:`Largest`) and
    ``seen.count``, the number of tensors the operations returned. Views count too: a view
    of ``n`` elements is a tensor of ``n`` elements, even where it shares its memory."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = Largest(0, (), "", 0, "")
        self.count = 0

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # nothing here is compiled: without this, PyTorch wraps __torch_dispatch__ to keep its compiler
        # out, and that wrapper imports the compiler (about a CPU-second) on the first operation
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor):
                self.count += 1
                if tensor.numel() > self.largest.numel:
                    self.largest = Largest(tensor.numel(), tuple(tensor.shape), str(tensor.dtype).removeprefix("torch."),
                                           tensor.numel() * tensor.element_size(), func.overloadpacket.__name__)
        return out


def largest_tensor(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, Largest]:
    """``(function(*args, **kwargs), the Largest tensor the call created)``."""
    with LargestTensor() as seen:
        result = function(*args, **kwargs)
    return result, seen.largest
