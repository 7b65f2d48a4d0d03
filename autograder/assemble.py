"""The notebook that is graded: the course's cells, with the student's answers in them.

Only the source notebook decides what is a test, what it is worth and what it checks.
From the submission we take just the code of its solution cells (matched by ``grade_id``)
and the cells the student added. So a submission whose test cells were edited, deleted,
duplicated or given more points, or whose solution cells were turned into test cells,
is graded on the course's own tests all the same; a solution cell the student deleted is
graded as the unanswered stub.
"""

from __future__ import annotations

import copy

import nbformat

from autograder.course import CODE_STUB


def _meta(cell) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta if isinstance(meta, dict) else {}


def kind_of(cell) -> str:
    meta = _meta(cell)
    if meta.get("solution"):
        return "solution"
    if meta.get("grade"):
        return "test"
    return "other"


def _student_code(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def assemble(source: nbformat.NotebookNode, submission: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The source notebook with the submission's answers and extra cells in place."""
    source_ids = {_meta(c).get("grade_id") for c in source.cells if _meta(c).get("grade_id")}
    answers: dict[str, str] = {}
    extras_before: dict[str | None, list] = {}
    pending: list = []
    for cell in submission.cells:
        grade_id = _meta(cell).get("grade_id")
        if grade_id in source_ids:
            if cell.get("cell_type") == "code":
                answers.setdefault(grade_id, _student_code(cell))  # a duplicate counts once
            extras_before.setdefault(grade_id, []).extend(pending)
            pending = []
        elif cell.get("cell_type") == "code" and not _meta(cell):
            # a cell the student added (a helper, a scratch computation): runs where it stood
            extra = nbformat.v4.new_code_cell(_student_code(cell))
            pending.append(extra)
    extras_before.setdefault(None, []).extend(pending)

    graded = copy.deepcopy(source)
    graded.cells = []
    for cell in source.cells:
        grade_id = _meta(cell).get("grade_id")
        graded.cells.extend(extras_before.get(grade_id, []))
        cell = copy.deepcopy(cell)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            if kind_of(cell) == "solution":
                cell.source = answers.get(grade_id, CODE_STUB)
        graded.cells.append(cell)
    graded.cells.extend(extras_before.get(None, []))
    return graded


def judge_cells(notebook: nbformat.NotebookNode) -> list[dict]:
    """The code cells of an assembled notebook, as :class:`autograder.judge.Judge` takes them."""
    cells = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        grade_id = _meta(cell).get("grade_id") or f"cell-{index}"
        kind = kind_of(cell) if _meta(cell) else "solution"  # an added cell is the student's code
        cells.append({"index": index, "grade_id": grade_id, "kind": kind, "source": cell.source,
                      "tags": list(cell.metadata.get("tags", []))})
    return cells


def with_results(notebook: nbformat.NotebookNode, errors: dict[int, dict]) -> nbformat.NotebookNode:
    """A copy of ``notebook`` where cell ``i`` shows ``errors[i]`` as its error output;
    nbgrader then scores each test cell by whether it shows an error."""
    notebook = copy.deepcopy(notebook)
    for index, error in errors.items():
        cell = notebook.cells[index]
        cell.outputs = [nbformat.v4.new_output(
            "error", ename=error["type"], evalue=error["message"],
            traceback=[f"{error['type']}: {error['message']}"],
        )]
    return notebook
