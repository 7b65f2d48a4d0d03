"""Every source notebook runs top to bottom in a learner's kernel with every test it shows there
passing, and follows the course's nbgrader conventions. (The hidden tests run in the grader:
tests/test_grading.py grades every solution to full marks, every test listed as passed.)"""

from __future__ import annotations

import ast

import pytest

import notebook_tools as nbt
from layout import regions

# The trainings, and the tests of the trained model, run here in a kernel for one chapter only
# (notebook_tools.SHORTEST_TRAINING): the kernel's training path (the progress bar, the device, the
# clock) is the loop every chapter shares (attention_course.training). Every chapter's trainings
# pass in the grader, whose solution scores full marks (tests/test_grading.py); trained again here,
# chapters 3 and 6 to 8 cost about 120 CPU-seconds and proved nothing more.


@pytest.mark.slow
@pytest.mark.parametrize("assignment", nbt.assignments())
def test_solution_notebook_passes_all_tests(assignment):
    """The solution notebook, in a kernel as a learner runs it, passes every visible test (a
    learner's notebook has no hidden test; the trainings only in ``notebook_tools.SHORTEST_TRAINING``)."""
    path = nbt.source_notebook(assignment)
    nb = nbt.visible_only(nbt.read(path))
    run = nbt.run(nb if assignment == nbt.SHORTEST_TRAINING else nbt.without_training(nb), cwd=path.parent)
    assert run.tests, "the notebook has no test cells"
    assert not run.failed, f"failing tests: {run.failed}"
    assert not run.other_errors, f"cells outside the tests raised: {run.other_errors}"


@pytest.mark.parametrize("assignment", nbt.assignments())
def test_notebook_follows_the_conventions(assignment):
    nb = nbt.read(nbt.source_notebook(assignment))
    seen = set()
    for cell in nb.cells:
        meta = nbt.nbgrader_meta(cell)
        if not meta:
            continue
        gid = meta["grade_id"]
        assert gid not in seen, f"duplicate grade_id {gid}"
        seen.add(gid)
        if nbt.is_solution_cell(cell):
            assert cell.cell_type == "code", f"{gid}: solution cells are code cells"
            assert regions.lines(cell.source, regions.SOLUTION), f"{gid}: no solution region"
            tree = ast.parse(cell.source)
            defined = [
                n.name if isinstance(n, (ast.FunctionDef, ast.ClassDef)) else n.targets[0].id
                for n in tree.body
                if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Assign))
            ]
            assert defined == [gid], f"solution cell {gid} must define exactly {gid}, defines {defined}"
        if nbt.is_test_cell(cell):
            assert gid.startswith("test_"), f"test cell {gid} must be named test_<exercise>"
            assert meta.get("points", 0) > 0, f"{gid}: a test cell must carry points"
            assert meta.get("locked"), f"{gid}: test cells are locked"
