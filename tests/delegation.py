"""Submissions that answer every exercise with the course's own solution instead of code of
their own: the attacks that the chapter packages (autograder.chapter_view) must defeat.

Each builder returns the source notebook of an assignment with every exercise cell replaced
by a delegation and every multiple-choice answer set wrong, so that any point such a
submission earns is inflation.
"""

from __future__ import annotations

import ast
import copy
import re

import nbformat

import notebook_tools as nbt
from autograder.chapter_view import chapter_of

# reads every file a submission can see (bounded), finds a definition of ``name`` in course
# code (source, bytecode or notebook) and executes it: what a student who knows where the
# course lives would try
FIND_IN_FILES = '''
import ast, glob, json, marshal, os, sys

def _candidate_roots():
    """Where course code could be, most likely first: the package itself, what an editable
    install maps it to, any installed copy, then every folder a student could look in."""
    roots = []
    try:
        import attention_course
        for path in attention_course.__path__:
            roots += [path, os.path.dirname(os.path.abspath(path))]
    except Exception:
        pass
    for entry in sys.path:
        for found in glob.glob(os.path.join(entry, "*")):
            name = os.path.basename(found).lower()
            if "attention" in name or "editable" in name or "autograder" in name:
                if os.path.isdir(found):
                    roots.append(found)
                elif name.endswith("finder.py"):  # an editable install maps the package to its checkout
                    text = open(found).read()
                    start = text.find("MAPPING")
                    if start >= 0:
                        literal = text[text.index("{", start):text.index("}", start) + 1]
                        for target in ast.literal_eval(literal).values():
                            roots += [target, os.path.dirname(target)]
        if os.path.isdir(entry) and "site-packages" not in entry:
            roots.append(entry)
    roots += ["/tmp", "/work", "/home", "/root", "/opt", "/srv", "/mnt", "/var", os.getcwd()]
    return list(dict.fromkeys(roots))


def _code_objects(path):
    if path.endswith(".pyc"):
        yield marshal.loads(open(path, "rb").read()[16:])
    elif path.endswith(".py"):
        yield compile(open(path).read(), path, "exec")
    elif path.endswith(".ipynb"):
        for cell in json.load(open(path)).get("cells", []):
            if cell.get("cell_type") == "code":
                yield compile("".join(cell.get("source", "")), path, "exec")

def _find_course_solution(name):
    marks = (f"def {name}(".encode(), f"class {name}(".encode(), f"class {name}:".encode())
    seen = 0
    for root in _candidate_roots():
        for folder, dirs, files in os.walk(root):
            # third-party packages hold no course code (installed copies were looked at above)
            dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev", "site-packages", "dist-packages")]
            for file in files:
                path = os.path.join(folder, file)
                if not file.endswith((".py", ".pyc", ".ipynb")) or seen > 20000:
                    continue
                seen += 1
                try:
                    data = open(path, "rb").read(4_000_000)
                    wanted = (name.encode(),) if file.endswith(".pyc") else marks
                    if not any(mark in data for mark in wanted):
                        continue
                    for code in _code_objects(path):
                        space = {"__name__": "stolen"}
                        exec(code, space)
                        if name in space:
                            return space[name]
                except Exception:
                    continue
    return None
'''


def _exercises(nb) -> list[tuple[str, bool]]:
    """``(name, is_class)`` of every exercise cell (not the ``answer_*`` questions)."""
    found = []
    for cell in nb.cells:
        meta = nbt.nbgrader_meta(cell)
        if nbt.is_solution_cell(cell) and not meta["grade_id"].startswith("answer_"):
            tree = ast.parse(cell.source)
            found.append((meta["grade_id"], any(isinstance(n, ast.ClassDef) for n in tree.body)))
    return found


def _wrong_answer(cell_source: str) -> str:
    """A wrong letter for a multiple-choice cell whose solution assigns the right one."""
    name, right = re.search(r"(answer_\w+)\s*=\s*[\"'](\w)[\"']", cell_source).groups()
    wrong = next(c for c in "abcd" if c != right.lower())
    return f'{name} = "{wrong}"\n'


def _import(chapter: str, name: str, is_class: bool) -> str:
    return f"from attention_course.reference.{chapter} import {name}\n"


def _wrapped(chapter: str, name: str, is_class: bool) -> str:
    lookup = f'getattr(importlib.import_module("attention_course.reference.{chapter}"), "{name}")'
    if is_class:
        return (f"import importlib\n\n\nclass {name}:\n    def __new__(cls, *args, **kwargs):\n"
                f"        return {lookup}(*args, **kwargs)\n")
    return f"import importlib\n\n\ndef {name}(*args, **kwargs):\n    return {lookup}(*args, **kwargs)\n"


def _from_files(chapter: str, name: str, is_class: bool) -> str:
    return f'{name} = _find_course_solution("{name}")\n'


STYLES = {"import": _import, "wrapped": _wrapped, "files": _from_files}


def delegated(assignment: str, style: str) -> nbformat.NotebookNode:
    """The source notebook of ``assignment`` with every exercise delegated to the course's
    solution (``style``: a key of :data:`STYLES`) and every question answered wrong."""
    nb = copy.deepcopy(nbt.read(nbt.source_notebook(assignment)))
    chapter = chapter_of(assignment)
    classes = dict(_exercises(nb))
    for cell in nb.cells:
        grade_id = nbt.nbgrader_meta(cell).get("grade_id", "")
        if not nbt.is_solution_cell(cell):
            continue
        if grade_id.startswith("answer_"):
            cell.source = _wrong_answer(cell.source)
        else:
            cell.source = STYLES[style](chapter, grade_id, classes[grade_id])
    if style == "files":
        nb.cells.insert(0, nbformat.v4.new_code_cell(FIND_IN_FILES))  # a cell the student added
    return nb


def lay_out_delegations(submissions, assignments_: list[str]) -> list[str]:
    """One submission per style and assignment, student ``delegate_<style>``; returns the students."""
    students = []
    for style in STYLES:
        student = f"delegate_{style}"
        students.append(student)
        for assignment in assignments_:
            nbt.lay_out(submissions, assignment, {student: delegated(assignment, style)})
    return students
