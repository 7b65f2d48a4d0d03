"""Submissions in the course's two languages, for the mixed-language class of tests/test_grading.py.

A Chinese submission is the Chinese learner notebook (``notebooks/zh_CN/<assignment>/<name>.ipynb``:
the same cells, grade_ids and tests as the English one, its words translated, its metadata naming
``zh_CN``) with the student's code in its solution cells. :func:`chinese` makes it from the code of
an English submission: :func:`from_chinese_notebook`, from the released Chinese notebook; for a
chapter that has none yet, :func:`stand_in_chinese` stands for it (the English notebook with its
metadata naming zh_CN and its markdown marked as translated: the grader reads neither the markdown
nor any cell but the solutions and the student's own).

The class (cheap on purpose: 14 submissions, about 60 CPU-seconds of grading): for every chapter
whose tests train no model, the course's solution in Chinese (every test passes: each of its
translated messages is built without an error); for the first :data:`MUTANT_CHAPTERS` of them, a
notebook whose every exercise is a wrong implementation (the first of ``WRONG`` in
``tests/mutants/<assignment>.py``) in both languages (the failures and their messages); for the
chapters that train, the blank notebook in Chinese (their solution would train a model again:
minutes of ``make test``; the tests' translated code is proven the same code for every chapter in
tests/test_i18n.py); and one English blank notebook whose metadata is hostile. The English solution
and blank notebook of every chapter are in the batch already.
"""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import nbformat

import notebook_tools as nbt

ZH = "zh_CN"
# how many chapters (that train no model, in course order) get a notebook of wrong implementations in
# both languages: more chapters cost about 8 CPU-seconds each
MUTANT_CHAPTERS = 2
ZH_NOTEBOOKS = nbt.NOTEBOOKS / ZH
# a language no course speaks, in a metadata field of the wrong kind, and a path: graded as English
HOSTILE_METADATA = {"language": {"zh_CN": "../../../etc/passwd"}, "extra": ["x"] * 3}


def with_language(nb: nbformat.NotebookNode, language) -> nbformat.NotebookNode:
    nb = copy.deepcopy(nb)
    nb.metadata["attention_course"] = language if isinstance(language, dict) else {"language": language}
    return nb


def stand_in_chinese(nb: nbformat.NotebookNode, assignment: str) -> nbformat.NotebookNode:
    """``nb`` (a submission) as if made from the Chinese notebook: its language zh_CN, its
    markdown marked as translated, its code as it is."""
    nb = with_language(nb, ZH)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = "（中文）" + cell.source
    return nb


def from_chinese_notebook(nb: nbformat.NotebookNode, assignment: str) -> nbformat.NotebookNode:
    """The released Chinese notebook of ``assignment`` with the code of ``nb``'s solution cells
    (matched by grade_id) in its own: what a Chinese learner who wrote that code submits."""
    (path,) = sorted((ZH_NOTEBOOKS / assignment).glob("*.ipynb"))
    chinese_nb = nbt.read(path)
    code = {nbt.nbgrader_meta(c)["grade_id"]: c.source for c in nb.cells if nbt.is_solution_cell(c)}
    for cell in chinese_nb.cells:
        if nbt.is_solution_cell(cell) and nbt.nbgrader_meta(cell)["grade_id"] in code:
            cell.source = code[nbt.nbgrader_meta(cell)["grade_id"]]
    assert chinese_nb.metadata.get("attention_course", {}).get("language") == ZH, path
    return chinese_nb


def chinese(nb: nbformat.NotebookNode, assignment: str) -> nbformat.NotebookNode:
    """The Chinese submission of ``nb``'s code: from the released Chinese notebook, or, for a chapter
    whose catalog is not complete yet (``make release`` then writes no Chinese notebook), the stand-in."""
    if any((ZH_NOTEBOOKS / assignment).glob("*.ipynb")):
        return from_chinese_notebook(nb, assignment)
    return stand_in_chinese(nb, assignment)


def _first_wrong(assignment: str) -> dict[str, str]:
    path = nbt.ROOT / "tests" / "mutants" / f"{assignment}.py"
    spec = importlib.util.spec_from_file_location(f"mutants_{assignment}_languages", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {exercise: next(iter(variants.values())) for exercise, variants in module.WRONG.items() if variants}


def all_wrong(assignment: str) -> nbformat.NotebookNode:
    """The solution notebook with every exercise replaced by its first wrong implementation."""
    nb = nbt.read(nbt.source_notebook(assignment))
    for exercise, source in _first_wrong(assignment).items():
        nb = nbt.with_cell_source(nb, exercise, source)
    return nb


def twins(assignments: list[str]) -> dict[str, dict[str, str]]:
    """The mixed class this module adds to a batch: per assignment, student id -> the student
    id of the same code in English (the batch already holds ``solution`` and ``blank``)."""
    found = {}
    cheap = [a for a in assignments if not nbt.trains(a)]
    for assignment in assignments:
        if assignment not in cheap:
            found[assignment] = {"blank_zh": "blank"}
            continue
        found[assignment] = {"solution_zh": "solution"}
        if assignment in cheap[:MUTANT_CHAPTERS]:
            found[assignment].update({"wrong_en": "wrong_en", "wrong_zh": "wrong_en"})
    found[assignments[0]]["hostile_metadata"] = "blank"  # English: its metadata names no language of the course
    return found


def lay_out_mixed_class(submissions: Path, assignments: list[str]) -> None:
    """Write the submissions of :func:`twins` under ``submissions``."""
    for assignment, students in twins(assignments).items():
        solution = nbt.read(nbt.source_notebook(assignment))
        blank = nbt.read(nbt.NOTEBOOKS / assignment / nbt.source_notebook(assignment).name)
        wrong = all_wrong(assignment) if "wrong_en" in students else None
        made = {"blank_zh": lambda: chinese(blank, assignment), "solution_zh": lambda: chinese(solution, assignment),
                "wrong_en": lambda: wrong, "wrong_zh": lambda: chinese(wrong, assignment),
                "hostile_metadata": lambda: with_language(blank, HOSTILE_METADATA)}
        nbt.lay_out(submissions, assignment, {student: made[student]() for student in students})
