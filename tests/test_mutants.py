"""The test suite of the test suite, and the proof that the grader agrees with the kernel.

For every exercise, ``tests/mutants/<assignment>.py`` holds plausible wrong
implementations (``WRONG``) and differently written correct ones (``CORRECT``). Each is
put in place of the solution cell of the same name in the source notebook, the notebook
is graded the way the grader grades it (the student's cells in the sandbox, the tests in
the judge: autograder.judge), and:

* every wrong implementation must fail at least one graded test cell (the run stops at
  the first one; it holds only the test cells that can reach the wrong code, see
  ``_only_tests_reaching``: the others compute what they compute with the solution); where
  ``MESSAGES`` names words for it (exercise -> label -> words), the failure message must
  contain them: the test recognised the mistake and said which it is;
* every correct variant must pass every graded test cell that can reach it (graded a round
  at a time: one variant of each exercise per notebook; the other test cells compute what
  they compute with the solution in place);
* every variant, wrong or correct, gets the same verdict per test cell in one plain kernel
  (a fresh in-process IPython shell: no sandbox, no judge) as through the judge: a wrong
  one on every test cell up to the first that fails under the judge, a correct round on
  every test cell.

Through the judge, each run's student process is forked from a warm process of its chapter,
in the grader's box (tests/warm_runner.py), so that PyTorch is imported once per chapter
rather than once per variant; the grader itself gives every submission a fresh box, and the
graded batches of tests/test_grading.py and tests/test_hostile.py go through that.

Exceptions to that agreement, each for a stated reason:

* ``WRONG_IN_KERNEL``: mistakes whose only effect is on state the judge does not share
  with the student's process, such as the global random generator reseeded (the tests
  draw from the judge's). These pass through the judge; they must fail in one kernel,
  where the learner runs the notebook. (An array or tensor argument changed in place is
  no longer one: the change comes back into the test's object.)
* Correct rounds of the chapters that train (3, 6, 7) leave out the training cells and the
  tests of the trained model, in the judge and in the kernel: training is the costliest part
  of ``make test``, and a correct variant computes what the solution computes (to 1e-5 on
  known weights, which its unit tests check). The trained-model tests are proven on the
  solution, which passes them in a kernel (tests/test_solutions.py) and through the judge
  (tests/test_grading.py: full marks).
"""

from __future__ import annotations

import ast
import copy
import importlib.util

import pytest

import notebook_tools as nbt


def _load(assignment: str):
    path = nbt.ROOT / "tests" / "mutants" / f"{assignment}.py"
    assert path.is_file(), f"{assignment} has no mutants: write tests/mutants/{assignment}.py"
    spec = importlib.util.spec_from_file_location(f"mutants_{assignment}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cases(kind: str, with_message: bool = False):
    for assignment in nbt.assignments():
        if not (nbt.ROOT / "tests" / "mutants" / f"{assignment}.py").is_file():
            continue  # test_every_exercise_has_mutants reports it
        module = _load(assignment)
        for exercise, variants in getattr(module, kind, {}).items():
            for label, source in variants.items():
                message = (getattr(module, "MESSAGES", {}).get(exercise, {}).get(label),) if with_message else ()
                yield pytest.param(assignment, exercise, source, *message, id=f"{assignment}-{exercise}-{label}")


def test_every_exercise_has_mutants():
    for assignment in nbt.assignments():
        module = _load(assignment)
        solutions = nbt.grade_ids(nbt.read(nbt.source_notebook(assignment)), nbt.is_solution_cell)
        exercises = [s for s in solutions if not s.startswith("answer_")]
        missing = [e for e in exercises if not module.WRONG.get(e)]
        assert not missing, f"{assignment}: no wrong implementations for {missing}"
        unknown = set(module.WRONG) | set(module.CORRECT) | set(getattr(module, "WRONG_IN_KERNEL", {}))
        assert unknown <= set(solutions), f"{assignment}: mutants for unknown cells {unknown - set(solutions)}"
        for exercise, labels in getattr(module, "MESSAGES", {}).items():
            stray = set(labels) - set(module.WRONG.get(exercise, {}))
            assert not stray, f"{assignment}: MESSAGES for {exercise} names no wrong implementation {sorted(stray)}"


def _only_its_question(nb, question: str):
    """For a wrong multiple-choice answer: the notebook without its training runs and without
    the other tests (an answer depends on neither), so that the question's own test decides
    and a training chapter is not trained once per wrong letter (see :func:`notebook_tools.without_training`)."""
    nb = nbt.without_training(nb)
    nb.cells = [c for c in nb.cells if not nbt.is_test_cell(c) or nbt.nbgrader_meta(c)["grade_id"] == f"test_{question}"]
    return nb


def _top_level_bindings(tree: ast.Module) -> set[str]:
    """The names a cell binds in the notebook's namespace (not those local to its functions)."""
    names: set[str] = set()
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        if not isinstance(node, ast.Lambda):  # a lambda's arguments are its own
            pending.extend(ast.iter_child_nodes(node))
    return names


def _only_tests_reaching(nb, sources: list[str]):
    """For ``sources`` put in place of solutions (a wrong variant, or a correct round's variants):
    ``nb`` without the test cells that cannot reach the names they bind, read directly or through
    what the other cells bind from them (a name read anywhere in a cell, its functions included,
    counts). Such a test computes what it computes with the solution in place, which
    tests/test_solutions.py (in a kernel) and tests/test_grading.py (through the grader, full
    marks) prove; here it would only repeat them. No kept cell needs a dropped one: every test
    cell stands on the non-test cells alone (tests/test_cells_stand_alone.py). A source that does
    anything at its top level but define (a side effect could reach any test) keeps them all."""
    wrong: set[str] = set()
    for source in sources:
        tree = ast.parse(source)
        if not all(isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Assign)) for n in tree.body) or any(
                isinstance(n, ast.Assign) and not isinstance(n.value, ast.Constant) for n in tree.body):
            return nb
        wrong |= _top_level_bindings(tree)
    made_from: dict[str, set[str]] = {}  # name -> the names read by the non-test cells that bind it
    for cell in nb.cells:
        if cell.cell_type == "code" and not nbt.is_test_cell(cell):
            cell_tree = ast.parse(cell.source)
            for name in _top_level_bindings(cell_tree):
                made_from.setdefault(name, set()).update(nbt.names_in(cell.source, ast.Load))

    def reaches(cell) -> bool:
        seen, pending = set(), list(nbt.names_in(cell.source, ast.Load))
        while pending:
            name = pending.pop()
            if name in wrong:
                return True
            if name not in seen:
                seen.add(name)
                pending.extend(made_from.get(name, ()))
        return False

    nb = copy.deepcopy(nb)
    nb.cells = [c for c in nb.cells if c.cell_type != "code" or not nbt.is_test_cell(c) or reaches(c)]
    return nb


@pytest.mark.slow
@pytest.mark.parametrize("assignment, exercise, source, message", list(_cases("WRONG", with_message=True)))
def test_wrong_implementation_fails_a_test(assignment, exercise, source, message):
    nb = nbt.with_cell_source(nbt.read(nbt.source_notebook(assignment)), exercise, source)
    if exercise.startswith("answer_"):
        nb = _only_its_question(nb, exercise)
    else:
        nb = _only_tests_reaching(nb, [source])
    run = nbt.run_judged(nb, assignment, fail_fast=True)
    assert run.failed, f"this wrong {exercise} passed every test: {sorted(run.tests)}"
    (first_failure,) = run.failed
    if message is not None:
        assert message in run.failed[first_failure], (
            f"this wrong {exercise} failed {first_failure} without naming its mistake ({message!r}): "
            f"{run.failed[first_failure]}")
    if exercise.startswith("answer_"):
        assert first_failure == f"test_{exercise}", f"a wrong {exercise} failed {first_failure}, not its own test"
    kernel = nbt.run_in_process(nb, stop_after=first_failure)
    assert nbt.verdicts(kernel) == nbt.verdicts(run), (
        f"the kernel and the judge disagree on this wrong {exercise}: in the kernel {kernel.failed}, "
        f"through the judge {run.failed}")


@pytest.mark.slow
@pytest.mark.parametrize("assignment, exercise, source", list(_cases("WRONG_IN_KERNEL")))
def test_wrong_side_effect_fails_a_test_in_the_kernel(assignment, exercise, source):
    """Mistakes that only show inside the student's own process (``WRONG_IN_KERNEL``):
    they must fail a test where the learner runs the notebook, in one kernel."""
    nb = nbt.with_cell_source(nbt.read(nbt.source_notebook(assignment)), exercise, source)
    run = nbt.run_in_process(nb, fail_fast=True)
    assert run.failed, f"this wrong {exercise} passed every test in the kernel"


def _correct_rounds():
    """Correct variants, several exercises at a time: round ``k`` puts the ``k``-th correct
    variant of every exercise that has one into the same notebook. A correct variant must
    pass with the others in place too. The rounds leave out the training cells and the tests
    of the trained model (see the module's docstring), and the test cells that reach none of
    the round's variants (:func:`_only_tests_reaching`: with fewer variants in the later rounds,
    most of a notebook's tests compute with the solution alone)."""
    for assignment in nbt.assignments():
        if not (nbt.ROOT / "tests" / "mutants" / f"{assignment}.py").is_file():
            continue
        variants = {exercise: list(v.items()) for exercise, v in getattr(_load(assignment), "CORRECT", {}).items()}
        for k in range(max((len(v) for v in variants.values()), default=0)):
            chosen = {exercise: v[k] for exercise, v in variants.items() if k < len(v)}
            yield pytest.param(assignment, chosen, id=f"{assignment}-round{k}")


@pytest.mark.slow
@pytest.mark.parametrize("assignment, chosen", list(_correct_rounds()))
def test_correct_variants_pass_every_test(assignment, chosen):
    nb = nbt.read(nbt.source_notebook(assignment))
    for exercise, (_, source) in chosen.items():
        nb = nbt.with_cell_source(nb, exercise, source)
    nb = _only_tests_reaching(nbt.without_training(nb), [source for _, source in chosen.values()])
    run = nbt.run_judged(nb, assignment, fail_fast=False)
    labels = {exercise: label for exercise, (label, _) in chosen.items()}
    assert not run.failed, f"correct variants {labels} failed: {run.failed}"
    assert not run.other_errors, f"cells outside the tests raised with the correct variants {labels}: {run.other_errors}"
    kernel = nbt.run_in_process(nbt.visible_only(nb))  # a learner's kernel has no hidden test
    assert kernel.tests and not kernel.failed, f"correct variants {labels} failed in the kernel: {kernel.failed}"
    assert not kernel.other_errors, f"cells outside the tests raised in the kernel with {labels}: {kernel.other_errors}"
