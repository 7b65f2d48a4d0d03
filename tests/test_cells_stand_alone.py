"""Every test cell stands on the course's other cells alone, never on another test cell.

After a kernel restart a learner runs the setup cells and then one exercise's cells; a test
cell that used a helper defined in an earlier test cell would stop with ``NameError``, which
reads like a bug in the learner's code. So a test cell may read only names bound by the
non-test course cells before it (setup, the tests' helpers, demonstrations, training), the
solution cells before it, builtins, and itself. The released notebook holds only the visible
part of each test cell, so the visible part must stand alone too. Static (``ast``): a few
milliseconds per notebook.
"""

from __future__ import annotations

import ast
import builtins

import pytest

import notebook_tools as nbt
from layout import regions



def _tree(source: str) -> ast.Module:
    # IPython magics and shell escapes are not Python; they bind nothing a test reads
    return ast.parse("\n".join("pass" if line.lstrip().startswith(("%", "!")) else line
                               for line in source.splitlines()))


def _bound(tree: ast.AST) -> set[str]:
    """Every name the code binds anywhere (any scope): assignments, definitions, imports,
    arguments, loop and ``with`` targets, exception names."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def _read(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def offending_cells(nb) -> dict[str, str]:
    """``{grade_id: why}`` for each test cell that reads a name no cell it may rely on binds."""
    allowed = set(dir(builtins))
    bound_by_tests: dict[str, str] = {}
    offences = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tree = _tree(cell.source)
        if not nbt.is_test_cell(cell):
            allowed |= _bound(tree)
            continue
        grade_id = nbt.nbgrader_meta(cell)["grade_id"]
        visible = _tree(regions.visible(cell.source, regions.HIDDEN_TESTS))
        unbound = _read(tree) - _bound(tree) - allowed
        missing = {name: "" for name in unbound}
        # bound only in the hidden part, which the released notebook does not hold
        missing.update({name: " in its visible part" for name in _read(visible) - _bound(visible) - allowed - unbound})
        if missing:
            offences[grade_id] = "; ".join(
                f"{name}{where} ({'defined only in the test cell ' + bound_by_tests[name] if name in bound_by_tests else 'defined in no earlier cell'})"
                for name, where in sorted(missing.items()))
        for name in _bound(tree):
            bound_by_tests.setdefault(name, grade_id)
    return offences


@pytest.mark.parametrize("assignment", nbt.assignments())
def test_every_test_cell_stands_on_the_course_cells_alone(assignment):
    offences = offending_cells(nbt.read(nbt.source_notebook(assignment)))
    assert not offences, (
        f"{assignment}: test cells that read names bound only by another test cell (after a restart, running "
        "one exercise's cells gives NameError); move the helper to a course cell above (the setup cell or "
        "the tests' helpers cell):\n" + "\n".join(f"  {grade_id}: {why}" for grade_id, why in offences.items()))


def test_the_check_finds_a_helper_of_another_test_cell():
    nb = nbt.small_notebook([
        ("setup", "setup", "import torch\nfrom attention_course import checks"),
        ("solution", "f", "def f(x):\n    return x"),
        ("test", "test_f", "def reference(x):\n    return x\nchecks.check_close(f(torch.ones(1)), reference(torch.ones(1)))"),
        ("test", "test_f_more", "checks.check_close(f(torch.zeros(1)), reference(torch.zeros(1)))"),
        ("test", "test_f_hidden", "### BEGIN HIDDEN TESTS\ny = 1\n### END HIDDEN TESTS\nassert f(y) == 1"),
        ("test", "test_f_alone", "x = torch.ones(2)\nassert [v for v in x] and (lambda t: t)(f(x)) is not None"),
    ])
    offences = offending_cells(nb)
    assert set(offences) == {"test_f_more", "test_f_hidden"}, offences
    assert "reference (defined only in the test cell test_f)" in offences["test_f_more"]
    assert "y in its visible part" in offences["test_f_hidden"]
