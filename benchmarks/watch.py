"""What the own-code watch costs per dispatcher operation: ``python -m benchmarks.watch``.

:func:`attention_course.shortcuts.watching` looks every operation PyTorch's dispatcher runs up in
the armed computations and in the building blocks (``OPERATIONS``: issue 44's allow-list), once
per operation (the answer is cached per OpOverload). Prints the microseconds per operation of a
loop of small operations (``x * 2 + 1`` on a 4 x 4 tensor: the overhead dominates) and of one
attention step forward and backward (64 x 32: a realistic mix), with the watch off, with the watch
as before issue 44 (the computations only: the allow-list check made to say yes) and with the
watch as now, then the overhead per operation of each (the fastest of five interleaved runs). Nothing is asserted: the figures go in the
README's trust-boundary paragraph.
"""

from __future__ import annotations

import contextlib
import time

import torch

from attention_course import shortcuts


def _ops_of(step) -> int:
    """How many dispatcher operations ``step`` runs."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        step()
    return Count.n


def _timed(step, context, repeats: int) -> float:
    with context():
        step()  # warm: the per-operation lookups are cached
        started = time.perf_counter()
        for _ in range(repeats):
            step()
        return time.perf_counter() - started


def main() -> None:
    torch.set_num_threads(1)
    shortcuts.arm(["torch.logsumexp", "torch.nn.functional.scaled_dot_product_attention", "torch.autograd.grad"])
    x = torch.randn(4, 4)
    Q = torch.randn(64, 32, requires_grad=True)

    def small():
        for _ in range(100):
            x * 2 + 1

    def attention():
        weights = torch.softmax(Q @ Q.mT / 32 ** 0.5, dim=-1)
        (weights @ Q).sum().backward()

    listed = shortcuts.listed

    @contextlib.contextmanager
    def before():
        shortcuts.listed = lambda func: True  # the watch without the building blocks' check
        shortcuts._SEEN_OPS.clear()
        try:
            with shortcuts.watching():
                yield
        finally:
            shortcuts.listed = listed
            shortcuts._SEEN_OPS.clear()

    for label, step, repeats in (("x * 2 + 1 on 4 x 4", small, 200), ("attention 64 x 32, forward + backward", attention, 300)):
        ops = _ops_of(step) * repeats
        runs = {"off": [], "old": [], "now": []}
        for _ in range(5):  # interleaved, the fastest of five: the machine is shared
            for key, context in (("off", contextlib.nullcontext), ("old", before), ("now", shortcuts.watching)):
                runs[key].append(_timed(step, context, repeats))
        off, old, now = (min(runs[key]) for key in ("off", "old", "now"))
        print(f"{label}: {ops} operations; per operation: off {off / ops * 1e6:.2f} µs, watch before issue 44 "
              f"{old / ops * 1e6:.2f} µs (+{(old - off) / ops * 1e6:.2f}), watch now {now / ops * 1e6:.2f} µs "
              f"(+{(now - off) / ops * 1e6:.2f})")


if __name__ == "__main__":
    main()
