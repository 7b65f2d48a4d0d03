"""Which wrong variants pass every VISIBLE test: ``python tests/visible_mutants.py``
(``make visible-mutants``; ``CHAPTERS=ch03`` for some chapters, ``TRAIN=1`` to train too).

A learner sees only the released notebook's tests (``notebooks/<assignment>/``: the hidden tests
stripped). For every ``WRONG`` and ``WRONG_IN_KERNEL`` variant of ``tests/mutants/<assignment>.py``,
the released notebook with every exercise answered by the solution and that one exercise by the
wrong variant is run in one plain kernel (``notebook_tools.run_in_process``: what the learner's
kernel runs), stopping at the first failing test cell. A variant that fails none passes every
visible test: the learner is told nothing and loses hidden points. That is right for an edge case
the docstring promises and the hidden tests probe, and wrong for a plausible mistake.

Without ``--train`` the training cells and the tests of the trained model are left out (as
tests/test_mutants.py leaves them out); with it, each variant that passed the unit tests is run
again with them, and one the trained-model test catches is counted as caught by it. Wrong
answers to the multiple-choice questions pass the visible tests by design (the right letter is
hidden) and are counted apart.

Printed: per chapter, the variants, how many passed every visible test and their names; the
total; the CPU seconds. Not a test of ``make test``: it runs a notebook per variant (minutes).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time
from pathlib import Path

from autograder.limits import THREAD_VARIABLES  # imports neither NumPy nor PyTorch

sys.path.insert(0, str(Path(__file__).resolve().parent))
for _variable in THREAD_VARIABLES:  # one thread, as the student's process and the test suite compute
    os.environ.setdefault(_variable, "1")

import notebook_tools as nbt  # noqa: E402
import test_mutants  # noqa: E402


def released(assignment: str):
    """The released (English) learner notebook of ``assignment``, every exercise answered by the solution."""
    (path,) = sorted((nbt.NOTEBOOKS / assignment).glob("*.ipynb"))
    return nbt.solved(nbt.read(path), assignment)


def _run(nb) -> bool:
    """Whether ``nb`` fails a test cell, its cells' printouts and tracebacks kept quiet."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return bool(nbt.run_in_process(nb, fail_fast=True).failed)


def survivors(assignment: str, train: bool) -> tuple[int, list[str], int, list[str]]:
    """(wrong variants run, those passing every visible test, wrong answers, those caught only by training)."""
    module = test_mutants._load(assignment)
    base = released(assignment)
    without_training = nbt.without_training(base)
    variants = [(exercise, label, source)
                for kind in ("WRONG", "WRONG_IN_KERNEL")
                for exercise, by_label in getattr(module, kind, {}).items()
                for label, source in by_label.items()]
    answers = sum(exercise.startswith("answer_") for exercise, _, _ in variants)
    passed, by_training = [], []
    for exercise, label, source in variants:
        if exercise.startswith("answer_"):
            continue
        nb = test_mutants._only_tests_reaching(nbt.with_cell_source(without_training, exercise, source), [source])
        if _run(nb):
            continue
        if train and _run(nbt.with_cell_source(base, exercise, source)):
            by_training.append(f"{exercise}.{label}")
            continue
        passed.append(f"{exercise}.{label}")
    return len(variants) - answers, passed, answers, by_training


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapters", nargs="*", default=[], help="assignments or their prefixes (ch03 ...)")
    parser.add_argument("--train", action="store_true", help="run the training cells for the variants that pass the unit tests")
    args = parser.parse_args(argv)
    chosen = [a for a in nbt.assignments() if not args.chapters or any(a.startswith(c) for c in args.chapters)]
    start_cpu, start_wall = time.process_time(), time.perf_counter()
    total_run = total_passed = 0
    for assignment in chosen:
        run, passed, answers, by_training = survivors(assignment, args.train)
        total_run, total_passed = total_run + run, total_passed + len(passed)
        trained = f"; {len(by_training)} caught only by the trained-model test" if args.train else ""
        print(f"{assignment}: {len(passed)} of {run} wrong variants pass every visible test{trained} "
              f"({answers} wrong answers to questions not counted: hidden by design)", flush=True)
        for name in passed:
            print(f"    passes: {name}")
        for name in by_training:
            print(f"    caught only by training: {name}")
    print(f"total: {total_passed} of {total_run} wrong variants pass every visible test "
          f"({'with' if args.train else 'without'} the training cells); "
          f"{time.process_time() - start_cpu:.0f} s CPU, {time.perf_counter() - start_wall:.0f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
