"""A wrapper that records how code calls a model: what the cache tests of chapters 8 and 9 use.

At grading, a course cell that builds a spy runs on the grader's side, and the learner's code
gets a stand-in that passes each call (and each public attribute it reads) to the spy there: the
record is the grader's own (``autograder/README.md``, the trust boundary).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ModelSpy"]


class ModelSpy:
    """Wraps a model and appends ``self.describe(*args, **kwargs)`` to ``self.calls`` at every
    call, then returns what the model returns. ``eval()``, ``train(mode)``, ``training`` and
    ``parameters()`` act as the model's. A subclass says what a call's record is."""

    def __init__(self, net: Any) -> None:
        self._net = net  # private: a stand-in never hands the model itself to the learner's code
        self.calls: list = []

    def describe(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a spy says what it records of a call")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(self.describe(*args, **kwargs))
        return self._net(*args, **kwargs)

    def eval(self) -> "ModelSpy":
        self._net.eval()
        return self

    def train(self, mode: bool = True) -> "ModelSpy":
        self._net.train(mode)
        return self

    @property
    def training(self) -> bool:
        return self._net.training

    def parameters(self, recurse: bool = True):
        return self._net.parameters(recurse)
