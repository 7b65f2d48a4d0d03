"""The test suite of the test suite.

For every exercise, ``tests/mutants/<assignment>.py`` holds plausible wrong
implementations (``WRONG``) and differently written correct ones (``CORRECT``). Each is
put in place of the solution cell of the same name in the source notebook, the notebook
is executed as nbgrader would, and:

* every wrong implementation must fail at least one graded test cell;
* every correct variant must pass every graded test cell.
"""

from __future__ import annotations

import importlib.util

import pytest

import notebook_tools as nbt


def _load(assignment: str):
    path = nbt.ROOT / "tests" / "mutants" / f"{assignment}.py"
    spec = importlib.util.spec_from_file_location(f"mutants_{assignment}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cases(kind: str):
    for assignment in nbt.assignments():
        for exercise, variants in getattr(_load(assignment), kind).items():
            for label, source in variants.items():
                yield pytest.param(assignment, exercise, source, id=f"{assignment}-{exercise}-{label}")


def _run_with(assignment: str, exercise: str, source: str) -> nbt.Run:
    path = nbt.source_notebook(assignment)
    nb = nbt.with_cell_source(nbt.read(path), exercise, source)
    return nbt.run(nb, cwd=path.parent)


def test_every_exercise_has_mutants():
    for assignment in nbt.assignments():
        module = _load(assignment)
        solutions = nbt.grade_ids(nbt.read(nbt.source_notebook(assignment)), nbt.is_solution_cell)
        exercises = [s for s in solutions if not s.startswith("answer_")]
        missing = [e for e in exercises if not module.WRONG.get(e)]
        assert not missing, f"{assignment}: no wrong implementations for {missing}"
        unknown = set(module.WRONG) | set(module.CORRECT)
        assert unknown <= set(solutions), f"{assignment}: mutants for unknown cells {unknown - set(solutions)}"


@pytest.mark.slow
@pytest.mark.parametrize("assignment, exercise, source", list(_cases("WRONG")))
def test_wrong_implementation_fails_a_test(assignment, exercise, source):
    run = _run_with(assignment, exercise, source)
    assert run.failed, f"this wrong {exercise} passed every test: {sorted(run.tests)}"


@pytest.mark.slow
@pytest.mark.parametrize("assignment, exercise, source", list(_cases("CORRECT")))
def test_correct_variant_passes_every_test(assignment, exercise, source):
    run = _run_with(assignment, exercise, source)
    assert not run.failed, f"a correct {exercise} failed: {run.failed}"
    assert not run.other_errors, f"cells outside the tests raised: {run.other_errors}"
