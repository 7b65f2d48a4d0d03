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
from layout import chapter_of

# reads every file a submission can see (bounded), finds a definition of each name in course
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

def _find_course_solutions(names):
    """name -> the course's definition of it, for each of ``names`` found (one walk for them all)."""
    marks = {name: (f"def {name}(".encode(), f"class {name}(".encode(), f"class {name}:".encode()) for name in names}
    found, seen = {}, 0
    for root in _candidate_roots():
        for folder, dirs, files in os.walk(root):
            # third-party packages hold no course code (installed copies were looked at above)
            dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev", "site-packages", "dist-packages")]
            for file in files:
                path = os.path.join(folder, file)
                if not file.endswith((".py", ".pyc", ".ipynb")) or seen > 20000 or len(found) == len(marks):
                    continue
                seen += 1
                try:
                    data = open(path, "rb").read(4_000_000)
                except Exception:
                    continue
                for name in [n for n in marks if n not in found]:
                    wanted = (name.encode(),) if file.endswith(".pyc") else marks[name]
                    if not any(mark in data for mark in wanted):
                        continue
                    try:
                        for code in _code_objects(path):
                            space = {"__name__": "stolen"}
                            exec(code, space)
                            if name in space:
                                found[name] = space[name]
                                break
                    except Exception:
                        continue
    return found
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
    return f'{name} = _STOLEN.get("{name}")\n'


STYLES = {"import": _import, "wrapped": _wrapped, "files": _from_files}


def delegated(assignment: str, style: str | dict[str, str]) -> nbformat.NotebookNode:
    """The source notebook of ``assignment`` with every exercise delegated to the course's
    solution (``style``: a key of :data:`STYLES`, or a dict giving each exercise its own) and
    every question answered wrong."""
    nb = copy.deepcopy(nbt.read(nbt.source_notebook(assignment)))
    chapter = chapter_of(assignment)
    classes = dict(_exercises(nb))
    styles = {name: style if isinstance(style, str) else style[name] for name in classes}
    for cell in nb.cells:
        grade_id = nbt.nbgrader_meta(cell).get("grade_id", "")
        if not nbt.is_solution_cell(cell):
            continue
        if grade_id.startswith("answer_"):
            cell.source = _wrong_answer(cell.source)
        else:
            cell.source = STYLES[styles[grade_id]](chapter, grade_id, classes[grade_id])
    from_files = sorted(name for name, s in styles.items() if s == "files")
    if from_files:
        # a cell the student added: every such exercise looked for in one reading of the files
        nb.cells.insert(0, nbformat.v4.new_code_cell(FIND_IN_FILES + f"\n_STOLEN = _find_course_solutions({from_files!r})\n"))
    return nb


def styles_in_turn(assignments_: list[str]) -> dict[str, dict[str, str]]:
    """assignment -> exercise -> style: the exercises, in the course's order, take the styles of
    :data:`STYLES` in turn. Every chapter has at least as many exercises as there are styles, so
    each chapter's package is attacked by every style, on functions and on classes across the course."""
    turns, turn = {}, 0
    for assignment in assignments_:
        turns[assignment] = {}
        for name, _ in _exercises(nbt.read(nbt.source_notebook(assignment))):
            turns[assignment][name] = list(STYLES)[turn % len(STYLES)]
            turn += 1
    return turns


DELEGATE_STUDENT = "delegate"


def lay_out_delegations(submissions, assignments_: list[str]) -> str:
    """Student :data:`DELEGATE_STUDENT`: one submission per assignment whose exercises are delegated
    by the styles in turn (:func:`styles_in_turn`); returns the student."""
    for assignment, styles in styles_in_turn(assignments_).items():
        nbt.lay_out(submissions, assignment, {DELEGATE_STUDENT: delegated(assignment, styles)})
    return DELEGATE_STUDENT


# ----------------------------------------------------------------------------- shortcuts
# Exercises answered correctly, but calling a library entry point that their docstring forbids
# (the cell's "forbidden" metadata): the grader must give each such exercise 0 and every other
# answer full marks, and the learner's kernel must fail its first visible test.

# a small valid call of each entry a variant uses (arguments only)
SHORTCUT_ARGS = {
    "torch.softmax": "(torch.ones(2), 0)",
    "torch.cdist": "(torch.ones(1, 2), torch.ones(1, 2))",
    "torch.nn.functional.scaled_dot_product_attention": "(torch.ones(1, 1, 2), torch.ones(1, 1, 2), torch.ones(1, 1, 2))",
    "torch.nn.MultiheadAttention": "(4, 2)",
    "torch.nn.functional.layer_norm": "(torch.ones(1, 2), (2,))",
    "torch.nn.TransformerEncoderLayer": "(4, 2, 8)",
    "torch.nn.TransformerEncoder": "(torch.nn.TransformerEncoderLayer(4, 2, 8, batch_first=True), 1, enable_nested_tensor=False)",
    "torch.nn.Transformer.generate_square_subsequent_mask": "(2)",
    "torch.nn.TransformerDecoderLayer": "(4, 2, 8)",
    "torch.nn.TransformerDecoder": "(torch.nn.TransformerDecoderLayer(4, 2, 8), 1)",
    "torch.nn.Transformer": "(4, 2, 1, 1, 8, batch_first=True)",
    "torch.logsumexp": "(torch.ones(2), 0)",
    "torch.special.logsumexp": "(torch.ones(2), 0)",
    "torch.nn.functional.softmax": "(torch.ones(2), 0)",
    "torch.Tensor.softmax": "(torch.ones(2), 0)",
    "torch.log_softmax": "(torch.ones(2), 0)",
    "torch.nn.functional.log_softmax": "(torch.ones(2), 0)",
    "torch.Tensor.backward": "(torch.ones(1, requires_grad=True).sum())",
}


def _module_and_rest(entry: str) -> tuple[str, list[str]]:
    """The longest importable module prefix of ``entry`` and the attribute path after it."""
    import importlib

    parts = entry.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        return ".".join(parts[:cut]), parts[cut:]
    raise ValueError(f"no importable module in {entry}")


def _built(text: str) -> str:
    """``text`` as a string built at run time from two literals."""
    half = len(text) // 2
    return f"{text[:half]!r} + {text[half:]!r}"


def _direct(entry: str, args: str, name: str) -> tuple[str, str, str | None]:
    return "import torch\n", f"{entry}{args}", None


def _aliased(entry: str, args: str, name: str) -> tuple[str, str, str | None]:
    # one alias per exercise: a name rebound by a later cell would change an earlier exercise
    module, rest = _module_and_rest(entry)
    return (f"import torch\nfrom {module} import {rest[0]} as _shortcut_{name}\n",
            f"_shortcut_{name}" + "".join(f".{r}" for r in rest[1:]) + args, None)


def _getattr_built(entry: str, args: str, name: str) -> tuple[str, str, str | None]:
    module, rest = _module_and_rest(entry)
    found = f"importlib.import_module({_built(module)})"
    for part in rest:
        found = f"getattr({found}, {_built(part)})"
    return "import importlib\nimport torch\n", found + args, None


def _helper(entry: str, args: str, name: str) -> tuple[str, str, str | None]:
    helper = f"import torch\n\n\ndef _helper_{name}(*args, **kwargs):\n    return {entry}(*args, **kwargs)\n"
    return "import torch\n", f"_helper_{name}{args}", helper


#: route -> (entry, arguments, exercise) -> (lines put first in the cell, the call, a cell added before it or None)
SHORTCUT_ROUTES = {"direct": _direct, "aliased": _aliased, "getattr": _getattr_built, "helper": _helper}


def forbidden_exercises(nb) -> dict[str, list[str]]:
    """Exercise name -> its forbidden entries, for the solution cells that have some."""
    return {nbt.nbgrader_meta(c)["grade_id"]: list(c.metadata["forbidden"]) for c in nb.cells
            if nbt.is_solution_cell(c) and c.metadata.get("forbidden")}


def shortcut_entry(entries: list[str]) -> str:
    """The entry of ``entries`` a variant calls: the first with a call in :data:`SHORTCUT_ARGS`."""
    return next(e for e in entries if e in SHORTCUT_ARGS)


def _with_call(source: str, name: str, prelude: str, call: str) -> str:
    """The solution cell ``source`` (the exercise ``name``), with ``prelude`` put first and
    ``call`` made first thing in the function's body (a class: in ``__init__``)."""
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name)
    if isinstance(node, ast.ClassDef):  # in __init__; a class without one (a torch.autograd.Function): its first method
        methods = [n for n in node.body if isinstance(n, ast.FunctionDef)]
        node = next((n for n in methods if n.name == "__init__"), methods[0])
    body = node.body
    first = body[1] if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else body[0]
    lines = source.split("\n")
    indent = " " * first.col_offset
    lines.insert(first.lineno - 1, f"{indent}_ = {call}  # the forbidden shortcut")
    return prelude + "\n".join(lines)


def shortcut_notebook(assignment: str, route: str | dict[str, str]) -> nbformat.NotebookNode:
    """The source notebook of ``assignment`` where every exercise with a forbidden list calls
    one of its entries by ``route`` (a key of :data:`SHORTCUT_ROUTES`, or a dict giving each
    exercise its own) and is otherwise the solution; every other answer is the solution too."""
    nb = copy.deepcopy(nbt.read(nbt.source_notebook(assignment)))
    cells = []
    for cell in nb.cells:
        entries = cell.metadata.get("forbidden") if nbt.is_solution_cell(cell) else None
        if entries:
            name = nbt.nbgrader_meta(cell)["grade_id"]
            entry = shortcut_entry(entries)
            prelude, call, added = SHORTCUT_ROUTES[route if isinstance(route, str) else route[name]](
                entry, SHORTCUT_ARGS[entry], name)
            cell.source = _with_call(cell.source, name, prelude, call)
            if added is not None:
                cells.append(nbformat.v4.new_code_cell(added))  # a cell the student added
        cells.append(cell)
    nb.cells = cells
    return nb


def shortcut_assignments() -> list[str]:
    return [a for a in nbt.assignments() if forbidden_exercises(nbt.read(nbt.source_notebook(a)))]


def graded_shortcut_assignments() -> list[str]:
    """The chapters whose shortcut submission tests/test_grading.py grades end to end: those with a
    forbidden list that do not train, and ``notebook_tools.SHORTEST_TRAINING``, which shows that a
    shortcut in one exercise costs the trained model's test nothing. The other chapters' lists are proved where it is cheap: the grader's scan and the kernel's trip-wire meet every
    exercise of every chapter (tests/test_shortcuts.py), and retraining chapters 6 to 8 with a
    shortcut in them proved nothing more (about 100 CPU-seconds)."""
    return [a for a in shortcut_assignments() if a == nbt.SHORTEST_TRAINING or not nbt.trains(a)]


def routes_in_turn(assignments: list[str] | None = None) -> dict[str, dict[str, str]]:
    """assignment -> exercise -> route, for ``assignments`` (default: those of
    :func:`graded_shortcut_assignments`): in the course's order, every function exercise with a
    forbidden list takes the next route of :data:`SHORTCUT_ROUTES` in turn, and every class
    exercise the next in a turn of its own. So one submission per chapter meets every exercise's
    list, and the graded ones together every route on functions and on classes alike
    (tests/test_shortcuts.py checks that)."""
    routes, turns = {}, {"function": 0, "class": 0}
    for assignment in graded_shortcut_assignments() if assignments is None else assignments:
        nb = nbt.read(nbt.source_notebook(assignment))
        routes[assignment] = {}
        for exercise in forbidden_exercises(nb):
            kind = exercise_kind(nb, exercise)
            routes[assignment][exercise] = list(SHORTCUT_ROUTES)[turns[kind] % len(SHORTCUT_ROUTES)]
            turns[kind] += 1
    return routes


def exercise_kind(nb, exercise: str) -> str:
    """``"class"`` or ``"function"``: what the solution cell of ``exercise`` defines."""
    for cell in nb.cells:
        if nbt.is_solution_cell(cell) and nbt.nbgrader_meta(cell)["grade_id"] == exercise:
            for node in ast.parse(cell.source).body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == exercise:
                    return "class" if isinstance(node, ast.ClassDef) else "function"
    raise KeyError(f"no solution cell defines {exercise}")


SHORTCUT_STUDENT = "shortcut"


def lay_out_shortcuts(submissions) -> str:
    """Student :data:`SHORTCUT_STUDENT`: one submission per assignment that has forbidden lists,
    its exercises taking the routes in turn (:func:`routes_in_turn`); returns the student."""
    for assignment, routes in routes_in_turn().items():
        nbt.lay_out(submissions, assignment, {SHORTCUT_STUDENT: shortcut_notebook(assignment, routes)})
    return SHORTCUT_STUDENT
