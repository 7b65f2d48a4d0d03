"""Every source notebook, graded the way the grader grades it (the student's cells in the
sandbox, the tests in the judge), passes all its tests; its released learner notebook
fails every test."""

from __future__ import annotations

import pytest

from autograder.assemble import assemble

import notebook_tools as nbt


@pytest.mark.slow
@pytest.mark.parametrize("assignment", nbt.assignments())
def test_solution_passes_every_test_under_the_judge(assignment):
    run = nbt.run_judged(nbt.read(nbt.source_notebook(assignment)), assignment)
    assert run.tests, "no test cell ran"
    assert not run.failed, f"failing under the judge: {run.failed}"
    assert not run.other_errors, f"cells outside the tests raised: {run.other_errors}"


@pytest.mark.slow
@pytest.mark.parametrize("assignment", nbt.assignments())
def test_blank_notebook_fails_every_test_under_the_judge(assignment):
    source = nbt.read(nbt.source_notebook(assignment))
    blank = nbt.read(nbt.NOTEBOOKS / assignment / nbt.source_notebook(assignment).name)
    run = nbt.run_judged(assemble(source, blank), assignment)
    passed = [name for name, error in run.tests.items() if error is None]
    assert run.tests and not passed, f"tests that pass on the blank notebook: {passed}"
