"""The notebook that is graded: the course's cells, with the student's answers in them.

Only the source notebook decides what is a test, what it is worth and what it checks.
From the submission we take just the code of its solution cells (matched by ``grade_id``)
and the cells the student added. So a submission whose test cells were edited, deleted,
duplicated or given more points, or whose solution cells were turned into test cells,
is graded on the course's own tests all the same; a solution cell the student deleted is
graded as the unanswered stub.
"""

from __future__ import annotations

import ast
import builtins
import copy
from typing import TYPE_CHECKING

from attention_course import i18n
from layout.regions import CODE_STUB

if TYPE_CHECKING:  # nbformat is imported where it is used: the judge, which imports this
    import nbformat  # module at every start, would pay about 2 CPU-seconds for it (jsonschema)

KERNEL_ONLY_TAG = "kernel-only"


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


def _walk(source, submission):
    """The cells of ``submission`` that the grader reads, in its order: ``(grade_id, cell)`` for a
    cell whose ``grade_id`` the source notebook has (a solution, a test or a given cell: its place),
    ``(None, cell)`` for a code cell the student added (no nbgrader metadata); other cells are left out."""
    source_ids = {_meta(c).get("grade_id") for c in source["cells"] if _meta(c).get("grade_id")}
    for cell in submission["cells"]:
        grade_id = _meta(cell).get("grade_id")
        if grade_id in source_ids:
            yield grade_id, cell
        elif cell.get("cell_type") == "code" and not _meta(cell):
            yield None, cell


def own_code(source, submission) -> list[tuple[str | None, str]]:
    """The student's own code of ``submission``, in its order: ``(grade_id, code)`` of each
    solution cell of ``source`` it answers (the first, when duplicated) and ``(None, code)`` of
    each code cell it added. This is what :func:`assemble` puts into the graded notebook (and
    what :mod:`autograder.similarity` compares); test and given cells are never the student's.
    ``source`` and ``submission``: notebooks (or dicts) with ``cells``."""
    solutions = {_meta(c).get("grade_id") for c in source["cells"] if kind_of(c) == "solution"}
    own, seen = [], set()
    for grade_id, cell in _walk(source, submission):
        if cell.get("cell_type") != "code" or (grade_id is not None and (grade_id not in solutions or grade_id in seen)):
            continue
        seen.add(grade_id)
        own.append((grade_id, _student_code(cell)))
    return own


def assemble(source: nbformat.NotebookNode, submission: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The source notebook with the submission's answers and extra cells in place."""
    from nbformat.v4 import new_code_cell

    answers: dict[str, str] = {}
    extras_before: dict[str | None, list] = {}
    pending: list = []
    for grade_id, cell in _walk(source, submission):
        if grade_id is not None:
            if cell.get("cell_type") == "code":
                answers.setdefault(grade_id, _student_code(cell))  # a duplicate counts once
            extras_before.setdefault(grade_id, []).extend(pending)
            pending = []
        else:
            # a cell the student added (a helper, a scratch computation): runs where it stood
            pending.append(new_code_cell(_student_code(cell)))
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


def set_language(graded: nbformat.NotebookNode, language: str) -> str:
    """Write ``language`` (one of the course's, already checked) into the graded notebook's
    metadata where :func:`attention_course.i18n.notebook_language` reads it (nothing for English:
    an English submission's files stay as they were); return it. The feedback page is written in
    it, also when it is rendered later from the gradebook."""
    if language != i18n.ENGLISH:
        graded.metadata[i18n.METADATA_KEY] = {"language": language}
    return language


def judge_cells(notebook: nbformat.NotebookNode) -> list[dict]:
    """The code cells of an assembled notebook, as :class:`autograder.judge.Judge` takes them."""
    cells = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        grade_id = _meta(cell).get("grade_id") or f"cell-{index}"
        kind = kind_of(cell) if _meta(cell) else "added"  # a cell the student added: their code
        cells.append({"index": index, "grade_id": grade_id, "kind": kind, "source": cell.source,
                      "tags": list(cell.metadata.get("tags", [])),
                      # the course's list (the source notebook's metadata), for a solution cell
                      "forbidden": list(cell.metadata.get("forbidden", [])) if kind == "solution" else [],
                      "calls": list(cell.metadata.get("calls", [])) if kind == "solution" else []})
    return cells


def student_names(cells: list[dict]) -> list[str]:
    """The names the judge may take from the student's process, derived from the course's
    cells of :func:`judge_cells` alone (never from what the student wrote):

    * every solution cell's ``grade_id`` (the function, class or ``answer_*`` variable it
      defines);
    * the top-level names that the course's ``kernel-only`` cells assign (``=``, ``def``,
      ``class``, ``for``, ``with ... as``; imports are not products of the cell): these
      cells run only in the student's process, so what they make is the student's;

    never a builtin, a name that a course cell run in the judge (setup, demonstrations)
    binds, nor a name a test cell imports (a test's own variables, such as ``model``,
    live in the judge until the student's process rebinds the name, as in one kernel).
    A maintainer who adds an exercise or a training cell does nothing extra. Raises
    ``ValueError`` when a solution cell's ``grade_id`` is a protected name: the tests
    could not tell the student's from the course's.
    """
    protected = set(dir(builtins)) | course_names(cells)  # never the student's, whichever cell binds them
    produced: set[str] = set()
    solutions = [c["grade_id"] for c in cells if c["kind"] == "solution"]
    for cell in cells:
        if cell["kind"] == "other" and KERNEL_ONLY_TAG in cell.get("tags", []):
            produced |= _bound_names(cell["source"], imports=False)
    clash = sorted(n for n in solutions if n in protected)
    if clash:
        raise ValueError(f"solution cells named like a builtin or a name the course's cells define: {clash}")
    return sorted((set(solutions) | {n for n in produced if not n.startswith("_")}) - protected)


_OWN_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def course_names(cells: list[dict]) -> set[str]:
    """The names the course's cells run in the judge bind (setup, demonstrations: ``checks``,
    ``np``, ``torch``, ``task``...) and those the test cells import; a test's own variables
    are not among them (they may be rebound by the student's process, as in one kernel)."""
    names: set[str] = set()
    for cell in cells:
        if cell["kind"] == "other" and KERNEL_ONLY_TAG not in cell.get("tags", []):
            names |= _bound_names(cell["source"], imports=True)
        elif cell["kind"] == "test":
            names |= _bound_names(cell["source"], imports=True) - _bound_names(cell["source"], imports=False)
    return names


def _bound_names(source: str, imports: bool) -> set[str]:
    """Names that the top level of ``source`` binds (not inside functions or classes);
    the names it imports too when ``imports``. IPython magics are left out."""
    lines = ["pass" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return set()  # the cell fails in both places; it binds nothing
    names: set[str] = set()

    def targets(node) -> None:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif not isinstance(node, _OWN_SCOPES):  # a comprehension's or lambda's names are its own
            for child in ast.iter_child_nodes(node):
                targets(child)

    def visit(statements) -> None:
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
                continue  # its body binds names of its own scope
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if imports:
                    names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for target in getattr(node, "targets", None) or [node.target]:
                    targets(target)
                if node.value is not None:
                    targets(node.value)  # a walrus in the value
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                targets(node.target)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        targets(item.optional_vars)
            elif isinstance(node, ast.Expr):
                targets(node.value)
            for field in ("body", "orelse", "finalbody", "handlers"):
                visit(getattr(node, field, None) or [])
            if isinstance(node, ast.ExceptHandler) and node.name:
                names.add(node.name)
            if isinstance(node, ast.If):
                targets(node.test)

    visit(tree.body)
    return names


def with_results(notebook: nbformat.NotebookNode, errors: dict[int, dict]) -> nbformat.NotebookNode:
    """A copy of ``notebook`` where cell ``i`` shows ``errors[i]`` as its error output;
    nbgrader then scores each test cell by whether it shows an error."""
    from nbformat.v4 import new_output

    notebook = copy.deepcopy(notebook)
    for index, error in errors.items():
        cell = notebook.cells[index]
        cell.outputs = [new_output(
            "error", ename=error["type"], evalue=error["message"],
            traceback=[f"{error['type']}: {error['message']}"],
        )]
    return notebook
