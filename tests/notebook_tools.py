"""Read, modify and execute the course's nbgrader notebooks from tests.

A notebook is graded the way nbgrader grades it: a test cell (``nbgrader.grade`` true
and ``solution`` false) passes when executing it raises nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import dataclasses
import os
import shutil
import signal
import sys
import tempfile
import warnings
from pathlib import Path

import nbformat
from nbclient import NotebookClient

import layout
from layout import regions

ROOT, SOLUTIONS, NOTEBOOKS = layout.REPO, layout.SOLUTIONS, layout.NOTEBOOKS
assignments = layout.assignments


def source_notebook(assignment: str) -> Path:
    """The one source notebook of ``assignment``."""
    (path,) = layout.source_notebooks(assignment)
    return path


def lay_out_solution_and_blank(submissions: Path, assignments_: list[str]) -> None:
    """Two submissions per assignment, as ``make grade`` takes them: student ``solution``
    hands in the source notebook, student ``blank`` the untouched learner notebook."""
    for assignment in assignments_:
        for student, origin in (("solution", SOLUTIONS), ("blank", NOTEBOOKS)):
            folder = submissions / student / assignment
            folder.mkdir(parents=True)
            for nb in (origin / assignment).glob("*.ipynb"):
                shutil.copy(nb, folder / nb.name)


def with_first_cell(nb, code: str):
    """A copy of ``nb`` with a code cell the student added at the top."""
    nb = copy.deepcopy(nb)
    nb.cells.insert(0, nbformat.v4.new_code_cell(code))
    return nb


def half_done(assignment: str) -> nbformat.NotebookNode:
    """The source notebook of ``assignment`` with its first half of solution cells left as
    stubs: a learner who stopped halfway."""
    nb = read(source_notebook(assignment))
    solutions = [c for c in nb.cells if is_solution_cell(c)]
    for cell in solutions[: len(solutions) // 2]:
        cell.source = 'raise NotImplementedError("not written yet")'
    return nb


def lay_out(submissions: Path, assignment: str, notebooks: dict) -> None:
    """Write ``notebooks`` (student id -> notebook of ``assignment``) as ``make grade`` takes
    them: ``submissions/<student>/<assignment>/<the source notebook's name>``."""
    name = source_notebook(assignment).name
    for student, nb in notebooks.items():
        folder = submissions / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / name)


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def is_test_cell(cell) -> bool:
    meta = nbgrader_meta(cell)
    return bool(meta.get("grade")) and not meta.get("solution")


def is_solution_cell(cell) -> bool:
    return bool(nbgrader_meta(cell).get("solution"))


def grade_ids(nb, predicate) -> list[str]:
    return [nbgrader_meta(c)["grade_id"] for c in nb.cells if predicate(c)]


def small_notebook(cells: list[tuple[str, str, str]]) -> nbformat.NotebookNode:
    """An assembled notebook made of ``(kind, name, source)`` cells: ``kind`` is ``setup``
    (a course cell), ``kernel-only`` (a course cell tagged so), ``solution`` (``name`` is its
    grade_id), ``test`` (1 point) or ``added`` (a cell the student added; no metadata)."""
    nb = nbformat.v4.new_notebook()
    for kind, name, source in cells:
        cell = nbformat.v4.new_code_cell(source)
        if kind != "added":
            meta = {"grade_id": name, "grade": kind == "test", "solution": kind == "solution",
                    "locked": kind != "solution", "schema_version": 3}
            if kind == "test":
                meta["points"] = 1
            cell.metadata["nbgrader"] = meta
        if kind == "kernel-only":
            cell.metadata["tags"] = ["kernel-only"]
        nb.cells.append(cell)
    return nb


def with_cell_source(nb, grade_id: str, source: str):
    """A copy of ``nb`` whose cell ``grade_id`` holds ``source`` instead."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if nbgrader_meta(cell).get("grade_id") == grade_id:
            cell.source = source
            return nb
    raise KeyError(f"no cell with grade_id {grade_id!r}")


@dataclasses.dataclass
class Run:
    """What executing a notebook gave: each test cell's error (None when it passed)."""

    tests: dict[str, str | None]
    other_errors: dict[str, str]

    @property
    def failed(self) -> dict[str, str]:
        return {k: v for k, v in self.tests.items() if v is not None}


def _error_of(cell) -> str | None:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return f"{out['ename']}: {out['evalue']}"
    return None


def run(nb, cwd: Path, timeout: int = 600) -> Run:
    """Execute ``nb`` top to bottom with errors allowed and report every test cell."""
    nb = copy.deepcopy(nb)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute()
    tests, others = {}, {}
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        err = _error_of(cell)
        if is_test_cell(cell):
            tests[nbgrader_meta(cell)["grade_id"]] = err
        elif err is not None:
            others[nbgrader_meta(cell).get("grade_id", f"cell {i}")] = err
    return Run(tests=tests, other_errors=others)


def run_judged(nb, assignment: str | None = None, fail_fast: bool = False) -> Run:
    """Grade ``nb``, a notebook of ``assignment``, the way the grader does: the student's cells
    in the sandbox (with that chapter's package; without ``assignment``, the first chapter's,
    which holds no solution at all), the tests in the judge (see autograder.judge). With
    ``fail_fast``, stop at the first failing test. The student's process is forked from the
    chapter's warm one (tests/warm_runner.py), in the same box as the grader's."""
    from autograder.assemble import judge_cells
    from autograder.judge import Judge
    from autograder.limits import Limits

    import warm_runner

    cells = judge_cells(nb)
    judge = Judge(Limits(), assignment or assignments()[0], start=warm_runner.start)
    results = judge.run(cells, stop_at_first_failure=fail_fast)
    tests = {r.grade_id: _message(r.error) for r in results if r.kind == "test"}
    others = {r.grade_id: _message(r.error) for r in results if r.kind != "test" and r.error}
    return Run(tests=tests, other_errors=others)


def _message(error: dict | None) -> str | None:
    return None if error is None else f"{error['type']}: {error['message']}"


def solved(learner: nbformat.NotebookNode, assignment: str) -> nbformat.NotebookNode:
    """A copy of the learner notebook ``learner`` as a learner who finished it hands it in:
    each solution cell holds the source notebook's answer (without nbgrader's markers)."""
    answers = {}
    for cell in read(source_notebook(assignment)).cells:
        if is_solution_cell(cell):
            answers[nbgrader_meta(cell)["grade_id"]] = regions.unmarked(cell.source, regions.SOLUTION)
    nb = copy.deepcopy(learner)
    for cell in nb.cells:
        if is_solution_cell(cell):
            cell.source = answers[nbgrader_meta(cell)["grade_id"]]
    return nb


def visible_only(nb) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose test cells keep only their visible part (nbgrader's release strips
    the hidden tests): what a learner's kernel runs. The hidden tests run in the grader only."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if is_test_cell(cell):
            cell.source = regions.visible(cell.source, regions.HIDDEN_TESTS)
    return nb


def run_in_process(nb, stop_after: str | None = None, fail_fast: bool = False, cell_timeout: int = 600) -> Run:
    """Execute ``nb`` the way one plain kernel would (every cell, tests included, in one
    namespace; no sandbox, no judge), in a fresh in-process IPython shell: far cheaper than
    a kernel of its own. With ``stop_after``, stop once the test cell of that ``grade_id``
    ran; with ``fail_fast``, stop after the first test cell that fails. A cell running past
    ``cell_timeout`` seconds fails with ``TimeoutError``. The
    process-wide state a notebook may change (random generators, default dtype, threads,
    warning filters, the working folder) is put back afterwards."""
    import numpy as np
    import torch
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    def too_long(signum, frame):
        raise TimeoutError(f"the cell ran past {cell_timeout} s")

    previous_handler = signal.signal(signal.SIGALRM, too_long)
    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell(config=config, user_ns={"__name__": "__main__"})
    tests, others = {}, {}
    saved = (torch.get_rng_state(), np.random.get_state(), torch.get_default_dtype(), torch.get_num_threads())
    torch.set_num_threads(1)  # as the student's process runs (autograder.limits.Limits.threads)
    try:
        with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder), warnings.catch_warnings():
            for i, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                signal.alarm(cell_timeout)
                try:
                    result = shell.run_cell(cell.source, store_history=False, silent=True)
                finally:
                    signal.alarm(0)
                error = result.error_before_exec or result.error_in_exec
                message = None if error is None else f"{type(error).__name__}: {error}"
                if is_test_cell(cell):
                    tests[nbgrader_meta(cell)["grade_id"]] = message
                    if nbgrader_meta(cell)["grade_id"] == stop_after or (fail_fast and message is not None):
                        break
                elif message is not None:
                    others[nbgrader_meta(cell).get("grade_id", f"cell {i}")] = message
    finally:
        signal.signal(signal.SIGALRM, previous_handler)
        shell.cleanup()
        # IPython keeps every shell, and so the notebook's objects, for a clean-up at exit (an atexit
        # function per shell, each with a full garbage collection): release them now
        atexit.unregister(shell.atexit_operations)
        shell.user_ns.clear()
        shell.user_ns_hidden.clear()
        torch.set_rng_state(saved[0])
        np.random.set_state(saved[1])
        torch.set_default_dtype(saved[2])
        torch.set_num_threads(saved[3])
        if "matplotlib.pyplot" in sys.modules:  # figures the notebook drew
            sys.modules["matplotlib.pyplot"].close("all")
    return Run(tests=tests, other_errors=others)


def verdicts(run: Run) -> dict[str, bool]:
    """Each test cell's verdict (True: passed), in the order they ran."""
    return {name: error is None for name, error in run.tests.items()}


def test_code(source: str) -> str:
    """A test cell's code, dumped, with the docstrings of the functions it defines emptied (each
    stays a docstring): what a translated test cell shares with the English one (its comments and
    docstrings are translated; every string its messages are built from stays, translated as it runs)."""
    import ast

    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)) and ast.get_docstring(node):
            node.body[0].value.value = ""
    return ast.dump(tree)


def is_training_cell(cell) -> bool:
    """A ``kernel-only`` cell that does more than define functions and classes: a training
    run (costly), as opposed to a helper such as chapter 3's ``build_model``."""
    import ast

    if "kernel-only" not in cell.metadata.get("tags", []):
        return False
    quiet = (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)
    return not all(isinstance(node, quiet) for node in ast.parse(cell.source).body)


def names_in(source: str, context: type) -> set[str]:
    """The names that ``source`` uses in ``context`` (``ast.Load`` or ``ast.Store``)."""
    import ast

    return {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name) and isinstance(n.ctx, context)}


def without_training(nb):
    """``nb`` without its training cells (:func:`is_training_cell`) and without the tests of the
    trained model: the test cells after a training cell that read a name it binds (and do not
    bind it themselves)."""
    import ast

    nb = copy.deepcopy(nb)
    kept, trained = [], set()
    for cell in nb.cells:
        if is_training_cell(cell):
            trained |= names_in(cell.source, ast.Store)
        elif not (is_test_cell(cell) and trained & (names_in(cell.source, ast.Load) - names_in(cell.source, ast.Store))):
            kept.append(cell)
    nb.cells = kept
    return nb


def trains(assignment: str) -> bool:
    """Whether the source notebook of ``assignment`` has a training cell."""
    return any(is_training_cell(c) for c in read(source_notebook(assignment)).cells)


#: The chapter whose training is the course's shortest (about 8 CPU-seconds; chapters 6 to 8 take 20
#: to 50): the one that trains where the suite proves once what a training adds, in a learner's kernel
#: (tests/test_solutions.py) and with a forbidden shortcut elsewhere in its notebook (the graded batch).
SHORTEST_TRAINING = "ch10_what_attention_learns"
