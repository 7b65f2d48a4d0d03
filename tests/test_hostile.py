"""Hostile submissions: one batch of them, graded through the real pipeline.

Each submission below attacks the grader in one way, or in several ways each met by the
tests of an exercise of its own (the routes on the judge's names). For each, the batch must finish,
the submission must get no more than it earned, the honest submissions in the same batch
must be graded normally, and the machine must be left as it was. The attacks are bounded
so that a missing defence cannot harm the machine: a few GiB, not all of memory; a few
hundred short-lived processes, not a fork bomb.

Two families share the batch: attacks on the sandbox (chapter 1 only: they do not depend
on the chapter), and attacks on what the judge takes from the student's process, on every
assignment (``ROUTES``, all in one submission per assignment, and the edited builtins), each on a
submission whose every answer is wrong, so that any point it gets is inflation.
"""

from __future__ import annotations

import ast
import copy
import csv
import json
import time
import socket
import subprocess
import sys
import threading

import dataclasses
import importlib.util
from pathlib import Path
from typing import Callable

import nbformat
import pytest

from autograder import scan
from autograder.assemble import course_names, judge_cells

import notebook_tools as nbt

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hostile")]

ASSIGNMENT = "ch01_attention_pooling"  # NumPy only: the cheapest to run many times
STUB = 'raise NotImplementedError("not written yet")'
# The controls: the solutions of chapter 1 (NumPy) and chapter 2 (PyTorch), which must keep their
# full marks beside the attacks and under this batch's limits. A chapter that trains is no control:
# its training needs more time than these limits give (which keep the infinite loop above cheap).
# tests/test_grading.py grades every solution to full marks and every blank notebook to 0 with the
# default limits; that an attack's 0 is not a limit's doing, its own row says (no reason given).
CONTROLS = ("ch01_attention_pooling", "ch02_scoring_functions")
# the honest submission of ASSIGNMENT: its control, the solution
HONEST = f"{ASSIGNMENT.split('_')[0]}-control-solution"


def _source():
    return nbt.read(nbt.source_notebook(ASSIGNMENT))


def _solved():
    """The source notebook as a student who solved everything would submit it."""
    return _source()


def _blank():
    return nbt.read(nbt.NOTEBOOKS / ASSIGNMENT / nbt.source_notebook(ASSIGNMENT).name)


def _max_points(assignment: str = ASSIGNMENT) -> int:
    source = nbt.read(nbt.source_notebook(assignment))
    return sum(nbt.nbgrader_meta(c).get("points", 0) for c in source.cells if nbt.is_test_cell(c))


TAMPER_CHECKS = """
import numpy as np, builtins
import attention_course.checks as checks_module
np.allclose = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
for name in dir(checks_module):
    if name.startswith("check"):
        setattr(checks_module, name, lambda *a, **k: None)
builtins.AssertionError = type("Nothing", (Exception,), {})
"""

TAMPER_IPYTHON = """
ip = get_ipython()
ip.set_custom_exc((BaseException,), lambda *a, **k: None)
ip.showtraceback = lambda *a, **k: None
ip.input_transformers_post.append(lambda lines: ["pass\\n"])
"""

SPY = """
import os, socket, json
spied = {"read": [], "wrote": [], "net": []}
for path in READABLE:  # the environment the code needs: readable, never writable
    try:
        with open(path, "ab") as f:
            spied["wrote"].append(path)
    except Exception:
        pass
for path in PATHS:
    try:
        with open(path, "rb") as f:
            spied["read"].append(path)
    except Exception:
        pass
    try:
        with open(path, "ab") as f:
            spied["wrote"].append(path)
    except Exception:
        pass
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
    spied["net"].append("connected")
except Exception as err:
    spied["net"].append(type(err).__name__)
print("SPIED", json.dumps(spied))
"""

FORK_MANY = """
import subprocess
started = []
try:
    for _ in range(300):
        started.append(subprocess.Popen(["sleep", "600"]))
except Exception as err:
    print("stopped after", len(started), type(err).__name__)
"""

FILL_DISK = """
import os
block = b"x" * (1 << 20)
try:
    with open("big.bin", "wb") as f:
        for _ in range(2048):  # 2 GiB
            f.write(block)
except Exception as err:
    print("disk:", type(err).__name__)
"""


# ----------------------------------------------------------------------------- the judge's names

# An object that agrees with everything: were the judge to adopt it for a course name, a
# builtin or a module, the tests that use that name would pass.
ANYTHING = """
class Anything:
    def __getattr__(self, name):
        return Anything()
    def __call__(self, *args, **kwargs):
        return Anything()
    def __getitem__(self, key):
        return Anything()
    def __bool__(self):
        return True
    def __eq__(self, other):
        return True
    __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __eq__
    __hash__ = object.__hash__
    def __iter__(self):
        return iter(())
    def __len__(self):
        return 1
    def __float__(self):
        return 1.0
    def __index__(self):
        return 1
    __int__ = __index__
"""

# the builtins the tests call; a student's definition of any of them must change nothing
BUILTINS = ("len", "isinstance", "abs", "all", "any", "float", "int", "max", "min", "sum", "sorted",
            "round", "set", "list", "tuple", "range", "zip", "type", "str", "AssertionError")
# those edited in the student's process's builtins (the rest would stop the process itself,
# which proves nothing about the judge)
EDITED_BUILTINS = ("AssertionError", "all", "any", "max", "min", "sum", "sorted", "round")


@dataclasses.dataclass
class Wrong:
    """An assignment's submission with every answer wrong, for an attack to build on:
    every function and method returns an ``Anything`` (in one kernel, a test whose check
    were replaced would pass on it), every multiple-choice answer is a wrong letter, and
    the exercises that a training cell uses raise at once (so training stops at once)."""

    assignment: str
    notebook: nbformat.NotebookNode  # the learner notebook with the wrong answers in place
    course_names: list[str]  # the names the course's cells bind (checks, np, torch, task, ...)
    solutions: list[str]  # the grade_ids of the solution cells, in order


def _wrong_answer(grade_id: str, solution: str) -> str:
    tree = ast.parse(solution)
    if grade_id.startswith("answer_"):
        right = next(n.value.value for n in tree.body if isinstance(n, ast.Assign))
        return f"{grade_id} = {next(c for c in 'abcd' if c != right)!r}"
    (definition,) = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    if isinstance(definition, ast.FunctionDef):
        return f"def {grade_id}(*args, **kwargs):\n    return Anything()"
    base = ast.unparse(definition.bases[0]) if definition.bases else "object"
    return (f"class {grade_id}({base}):\n    def __init__(self, *args, **kwargs):\n        super().__init__()\n"
            f"    def forward(self, *args, **kwargs):\n        return Anything()")


def wrong(assignment: str) -> Wrong:
    source = nbt.read(nbt.source_notebook(assignment))
    learner = nbt.read(nbt.NOTEBOOKS / assignment / nbt.source_notebook(assignment).name)
    kernel_only = [c.source for c in source.cells if "kernel-only" in c.metadata.get("tags", [])]
    used = {n.id for src in kernel_only for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Name)}
    solutions = {nbt.nbgrader_meta(c)["grade_id"]: c.source for c in source.cells if nbt.is_solution_cell(c)}
    # the exercises a training cell uses keep the learner's stub: it raises at once
    answers = {g: _wrong_answer(g, src) for g, src in solutions.items() if g not in used}
    nb = copy.deepcopy(learner)
    for cell in nb.cells:
        grade_id = nbt.nbgrader_meta(cell).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
    setup = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells.insert(setup + 1, nbformat.v4.new_code_cell(ANYTHING))  # an added cell of the student's
    names = sorted(course_names(judge_cells(source)))
    return Wrong(assignment, nb, names, list(solutions))


def _in_solution(w: Wrong, index: int, code: str) -> nbformat.NotebookNode:
    """``w``'s notebook with ``code`` put before the answer of its ``index``-th solution cell."""
    nb = copy.deepcopy(w.notebook)
    cell = next(c for c in nb.cells if nbt.nbgrader_meta(c).get("grade_id") == w.solutions[index])
    cell.source = code + "\n" + cell.source
    return nb


def _added_after_each_solution(w: Wrong, code: str) -> nbformat.NotebookNode:
    """``w``'s notebook with a cell of the student's holding ``code`` after every solution cell."""
    return _added_after(w, range(len(w.solutions)), code)


def _added_after(w: Wrong, indices, code: str) -> nbformat.NotebookNode:
    """``w``'s notebook with a cell of the student's holding ``code`` after each of its solution
    cells whose index is in ``indices``."""
    after = {w.solutions[i] for i in indices}
    nb = copy.deepcopy(w.notebook)
    cells = []
    for cell in nb.cells:
        cells.append(cell)
        if nbt.is_solution_cell(cell) and nbt.nbgrader_meta(cell)["grade_id"] in after:
            cells.append(nbformat.v4.new_code_cell(code))
    nb.cells = cells
    return nb


def _fakes(names) -> str:
    return "\n".join(f"{name} = Anything()" for name in names)


def _del_then_rebind(w: Wrong, k: int) -> nbformat.NotebookNode:
    # each on its own: a name of a demonstration further down is not bound yet
    nb = _in_solution(w, k, "\n".join(f"try:\n    del {n}\nexcept NameError:\n    pass" for n in w.course_names))
    return _in_solution(dataclasses.replace(w, notebook=nb), k + 1, _fakes(w.course_names))


@dataclasses.dataclass(frozen=True)
class Route:
    """A way for the student's process to bind names the judge must never take from it."""

    rebinds: Callable[[Wrong], set[str]]  # the names it binds to an Anything
    cells: int  # how many solution cells it takes, from the k-th; the tests of the last one meet it
    put: Callable[[Wrong, int], nbformat.NotebookNode]  # w's notebook with the route at its k-th solution cell


def _course_names(w: Wrong) -> set[str]:
    return set(w.course_names)


# The routes of the attacks on the judge's names (every other answer wrong): each binds, by a way
# of its own, an Anything under a name of the course's cells (checks, np, torch, task, ...) or of a
# builtin the tests call. One submission per assignment carries them all, each at a solution cell
# of its own in the course's order (:func:`_routes_in_turn`), and the tests of that exercise meet it
# with the binding it made the latest: a judge that took that name from the student's process would
# give them points. The attacks that delegate an exercise to the course package belong in a class
# of their own.
ROUTES: dict[str, Route] = {
    "course_names-del_then_rebind": Route(_course_names, 2, _del_then_rebind),
    "course_names-through_globals": Route(_course_names, 1, lambda w, k: _in_solution(
        w, k, f"globals().update({{name: Anything() for name in {w.course_names!r}}})")),
    "course_names-through_exec": Route(_course_names, 1, lambda w, k: _in_solution(
        w, k, f"exec({_fakes(w.course_names)!r})")),
    "course_names-from_an_added_cell": Route(_course_names, 1, lambda w, k: _added_after(
        w, [k], _fakes(w.course_names))),
    "builtins-shadowed": Route(lambda w: set(BUILTINS), 1, lambda w, k: _in_solution(
        w, k, "def len(x):\n    return 3\n" + _fakes(n for n in BUILTINS if n != "len"))),
}


def _edited_builtins(w: Wrong) -> nbformat.NotebookNode:
    """The builtins edited in the student's process's own builtins module, after every solution cell:
    a submission of their own, since they break that process (its ``re`` does arithmetic with
    ``max``) and every test after them fails whatever the judge took, which would hide other routes."""
    return _added_after_each_solution(w, "import builtins\n" + "\n".join(
        f"setattr(builtins, {n!r}, Anything())\n__builtins__.__dict__[{n!r}] = Anything()" for n in EDITED_BUILTINS))


def _tests_of(assignment: str) -> dict[str, str]:
    """Test cell grade_id -> its source, for ``assignment``'s source notebook."""
    return {nbt.nbgrader_meta(c)["grade_id"]: c.source for c in nbt.read(nbt.source_notebook(assignment)).cells
            if nbt.is_test_cell(c)}


def _reads(source: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}


def _routes_in_turn(w: Wrong) -> tuple[nbformat.NotebookNode, dict[str, str]]:
    """``w``'s notebook with every route of ``ROUTES``, each at the next solution cell (in the course's
    order) whose exercise has a test that reads a name the route rebinds; and route -> that exercise.
    Routes over the same names take the cells in turn; routes over names of their own (the builtins,
    the course's) may share an exercise: neither binding can stand for the other's in a test."""
    tests = _tests_of(w.assignment)
    nb, met, next_cell = w.notebook, {}, {}
    for label, route in ROUTES.items():
        names = route.rebinds(w)
        k = next_cell.get(frozenset(names), 0)
        while k + route.cells <= len(w.solutions) and not any(
                names & _reads(source) for test, source in tests.items()
                if scan.exercise_of_test(test, w.solutions) == w.solutions[k + route.cells - 1]):
            k += 1
        assert k + route.cells <= len(w.solutions), f"{w.assignment}: no exercise left for the route {label}"
        nb = route.put(dataclasses.replace(w, notebook=nb), k)
        met[label] = w.solutions[k + route.cells - 1]
        next_cell[frozenset(names)] = k + route.cells
    return nb, met


# ----------------------------------------------------------------------------- what a test's spy records

SPIED = "ch08_decoder_only"  # generate's tests read how it called the model through CacheSpy

# generate without a cache, which then writes into the spy's record the calls a cache would have made
GENERATE_REWRITES_THE_RECORD = """
def generate(model, prompt, max_new_tokens, use_cache=True, temperature=0.0, top_k=None, top_p=None, generator=None):
    tokens = prompt
    with torch.no_grad():
        for _ in range(max_new_tokens):
            logits, _ = model(tokens)  # the whole sequence at every step
            next_token = sample_next_token(logits[:, -1], temperature, top_k, top_p, generator)
            tokens = torch.cat([tokens, next_token[:, None]], dim=1)
    P = prompt.shape[1]
    made = [(P, 0)] + [(1, P + s) for s in range(max_new_tokens - 1)] if use_cache else None
    for rewrite in (lambda: model.calls.__setitem__(slice(None), made), lambda: setattr(model, "calls", made)):
        try:
            rewrite()
        except Exception:
            pass
    return tokens
"""


def _spied(generate: str) -> nbformat.NotebookNode:
    """Chapter 8 solved but for beam search (whose tests are the costliest), with ``generate`` in
    place of the solution's, and without the training (a cell of the student's makes it stop at
    once: the cells graded here come before it)."""
    learner = nbt.read(nbt.NOTEBOOKS / SPIED / nbt.source_notebook(SPIED).name)
    nb = nbt.solved(learner, SPIED)
    for cell, blank in zip(nb.cells, learner.cells):
        grade_id = nbt.nbgrader_meta(cell).get("grade_id")
        if grade_id in ("beam_search", "generate"):
            cell.source = blank.source if grade_id == "beam_search" else generate
    train = next(i for i, c in enumerate(nb.cells) if nbt.nbgrader_meta(c).get("grade_id") == "train")
    nb.cells.insert(train, nbformat.v4.new_code_cell(
        "def train_prompt_model(*args, **kwargs):\n    raise RuntimeError('not trained in this batch')"))
    return nb


def _spy_attacks() -> dict[str, nbformat.NotebookNode]:
    # the honest counterpart is the solution, graded to full marks through the grader in tests/test_grading.py
    return {"ch08-spy-rewrites-the-record": _spied(GENERATE_REWRITES_THE_RECORD)}


# ----------------------------------------------------------------------------- issue 44: routes by class

CLASSES = "ch09_attention_at_scale"  # most of issue 44's routes: a thread, an op off the building blocks, the engine
_CH09_MUTANTS = Path(__file__).resolve().parent / "mutants" / f"{CLASSES}.py"

# each the whole job by a route of issue 44's classes, computing the right answer (so that only the own-code
# rule can take its points), beside an honest log-space update_online_softmax that calls torch.logsumexp
ROUTES_44 = {
    "online_softmax": """
import threading

def online_softmax(x, block_size):
    found = {}
    worker = threading.Thread(target=lambda: found.update(lse=torch.Tensor.logsumexp(x, -1)))
    worker.start()
    worker.join()
    lse = found["lse"]
    probs = torch.where(lse[..., None] == float("-inf"), torch.zeros_like(x), torch.exp(x - lse[..., None]))
    return probs, lse
""",
    "tiled_attention_backward": """
def tiled_attention_backward(Q, K, V, O, lse, dO, block_q=64, block_k=64, causal=False):
    leaves = [M.detach().requires_grad_(True) for M in (Q, K, V)]
    with torch.enable_grad():
        S = leaves[0] @ leaves[1].transpose(-2, -1) / math.sqrt(Q.shape[-1])
        if causal:
            S = S.masked_fill(torch.ones(S.shape[-2:], dtype=torch.bool, device=Q.device).triu(1), float("-inf"))
        P = torch.exp(S - S.amax(-1, keepdim=True))
        out = (P / P.sum(-1, keepdim=True)) @ leaves[2]
        engine = getattr(torch.autograd, "".join(chr(c) for c in (103, 114, 97, 100)))  # the engine, by a built name
        return engine(out, leaves, dO)
""",
    "TiledAttention": """
class TiledAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, causal=False, block_q=64, block_k=64):
        O, lse = tiled_attention_forward(Q, K, V, block_q, block_k, causal)
        ctx.save_for_backward(Q, K, V)
        ctx.tiles = (block_q, block_k, causal)
        return O

    @staticmethod
    def backward(ctx, dO):  # autograd through the forward, not tiled_attention_backward
        leaves = [M.detach().requires_grad_(True) for M in ctx.saved_tensors]
        with torch.enable_grad():
            O, _ = tiled_attention_forward(*leaves, *ctx.tiles)
            return (*torch.autograd.grad(O, leaves, dO), None, None, None)
""",
}
# torch.softmax's routes in chapter 1 (NumPy's chapter): the sparse softmax of PyTorch
SPARSE_SOFTMAX = """
def softmax(x, axis=-1):
    x = np.asarray(x)
    dense = torch.sparse.softmax(torch.from_numpy(np.ascontiguousarray(x)).to_sparse(), axis).to_dense()
    return dense.numpy().astype(x.dtype)
"""


def _issue_44_attacks() -> dict[str, nbformat.NotebookNode]:
    spec = importlib.util.spec_from_file_location("mutants_issue_44", _CH09_MUTANTS)
    mutants = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mutants)
    nb = nbt.read(nbt.source_notebook(CLASSES))
    for exercise, source in {**ROUTES_44, "update_online_softmax": mutants.CORRECT["update_online_softmax"][
            "log_space_with_torch_logsumexp"], "tiled_attention_forward": mutants._changed(  # the tiles' log-sum-exp
            "tiled_attention_forward", "ell = ell * rescale + P.sum(dim=-1)",
            "ell = ell * rescale + torch.exp(S.logcumsumexp(-1)[..., -1] - m_new)")}.items():
        nb = nbt.with_cell_source(nb, exercise, source)
    ch01 = nbt.with_cell_source(nbt.read(nbt.source_notebook(ASSIGNMENT)), "softmax", "import torch\n" + SPARSE_SOFTMAX)
    return {"ch09-issue-44-routes": nb, "ch01-issue-44-sparse-softmax": ch01}


def _name_attacks() -> dict[str, nbformat.NotebookNode]:
    """The attacks on the judge's names on every assignment (``ROUTES`` in turn, and the edited builtins), and the
    ``CONTROLS``: student id -> notebook."""
    subs = {}
    for assignment in nbt.assignments():
        short = assignment.split("_")[0]
        w = wrong(assignment)
        if assignment in CONTROLS:
            subs[f"{short}-control-solution"] = nbt.read(nbt.source_notebook(assignment))
        subs[f"{short}-names-in-turn"] = _routes_in_turn(w)[0]
        subs[f"{short}-names-edited-builtins"] = _edited_builtins(w)
    return subs


def _assignment_of(student: str) -> str:
    return next(a for a in nbt.assignments() if a.startswith(student.split("-")[0] + "_"))


# ----------------------------------------------------------------------------- the batch


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Grade every hostile submission and the controls (``CONTROLS``) in one
    batch, two at a time."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    connections = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
                connections.append(conn)
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()

    subs = tmp_path_factory.mktemp("hostile")
    out = tmp_path_factory.mktemp("hostile-out")
    name = nbt.source_notebook(ASSIGNMENT).name
    secrets = [
        str(nbt.source_notebook(ASSIGNMENT)),
        str(out / "course" / "gradebook.db"),
        str(out / "course" / "source" / ASSIGNMENT / name),
        str(subs / HONEST / ASSIGNMENT / name),
        str(nbt.ROOT / "README.md"),
    ]
    readable = [
        str(nbt.ROOT / "attention_course" / "checks.py"),
        str(nbt.ROOT / "autograder" / "judge.py"),
        sys.executable,
    ]
    solved, blank = _solved(), _blank()

    tests_gutted = copy.deepcopy(blank)
    for cell in tests_gutted.cells:
        if nbt.is_test_cell(cell):
            cell.source = "pass"
            cell.metadata["nbgrader"]["points"] = 1000
    tests_deleted = copy.deepcopy(blank)
    tests_deleted.cells = [c for c in tests_deleted.cells if not nbt.is_test_cell(c)]
    solution_as_test = copy.deepcopy(blank)
    for cell in solution_as_test.cells:
        if nbt.is_solution_cell(cell):
            cell.metadata["nbgrader"].update(grade=True, solution=False, points=50)
            cell.source = "pass"
    duplicated = copy.deepcopy(solved)
    duplicated.cells = [c for cell in duplicated.cells for c in ([cell, cell] if nbt.is_test_cell(cell) else [cell])]

    notebooks = {
        "tamper_checks": nbt.with_first_cell(blank, TAMPER_CHECKS),
        "tamper_ipython": nbt.with_first_cell(blank, TAMPER_IPYTHON),
        "tests_gutted": tests_gutted,
        "tests_deleted": tests_deleted,
        "solution_as_test": solution_as_test,
        "duplicated_tests": duplicated,
        "infinite_loop": nbt.with_first_cell(solved, "while True:\n    pass"),
        "memory_hog": nbt.with_first_cell(solved, "hog = bytearray(6 * 1024**3)"),
        "fork_many": nbt.with_first_cell(solved, FORK_MANY),
        "fill_disk": nbt.with_first_cell(solved, FILL_DISK),
        "print_flood": nbt.with_first_cell(solved, "print('x' * (300 * 1024 * 1024))"),
        "kill_self": nbt.with_first_cell(solved, "import os\nos.kill(os.getpid(), 9)"),
        "kill_parent": nbt.with_first_cell(
            solved, "import os, signal\nfor pid in (os.getppid(), 1, -1):\n"
            "    try:\n        os.kill(pid, signal.SIGKILL)\n    except Exception:\n        pass"),
        "spy": nbt.with_first_cell(solved, f"PATHS = {secrets!r}\nREADABLE = {readable!r}\nPORT = {port}\n" + SPY),
        "huge_image": nbt.with_first_cell(
            solved, "from IPython.display import Image, display\n"
            "display(Image(data=b'\\x89PNG\\r\\n' + bytes(200 * 1024 * 1024)))"),
    }
    for student, nb in notebooks.items():
        folder = subs / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / name)
    for student, nb in _name_attacks().items():
        assignment = _assignment_of(student)
        folder = subs / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / nbt.source_notebook(assignment).name)
    for student, nb in _spy_attacks().items():
        (subs / student / SPIED).mkdir(parents=True)
        nbformat.write(nb, subs / student / SPIED / nbt.source_notebook(SPIED).name)
    for student, nb in _issue_44_attacks().items():
        assignment = _assignment_of(student)
        (subs / student / assignment).mkdir(parents=True)
        nbformat.write(nb, subs / student / assignment / nbt.source_notebook(assignment).name)
    # a module beside the notebook that would shadow what the tests import
    (subs / "shadow" / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(solved, subs / "shadow" / ASSIGNMENT / name)
    for module in ("numpy.py", "attention_course.py"):
        (subs / "shadow" / ASSIGNMENT / module).write_text("raise SystemExit('shadowed')\n")
    (subs / "broken_json" / ASSIGNMENT).mkdir(parents=True)
    (subs / "broken_json" / ASSIGNMENT / name).write_text('{"cells": [')
    (subs / "misnamed" / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(solved, subs / "misnamed" / ASSIGNMENT / "Copy of notebook.ipynb")

    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(subs), "--out", str(out), "--workers", "2",
         "--cell-timeout", "20", "--notebook-timeout", "90", "--memory-mb", "2048",
         "--processes", "64", "--disk-mb", "64"],
        cwd=nbt.ROOT, capture_output=True, text=True, timeout=3600,
    )
    seconds = time.monotonic() - started
    stop.set()
    listener.close()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {r["student_id"]: r for r in csv.DictReader(open(out / "grades.csv"))}
    print(f"\nhostile batch: {len(rows)} submissions in {seconds:.0f} s; the judge's names attacked by "
          f"{len(ROUTES) + 1} routes in 2 submissions per assignment")
    return {"rows": rows, "out": out, "connections": connections, "stdout": done.stdout}


def _score(batch, student) -> float:
    return float(batch["rows"][student]["score"])


@pytest.mark.parametrize("assignment", CONTROLS)
def test_honest_submissions_are_graded_normally(batch, assignment):
    control = f"{assignment.split('_')[0]}-control-solution"
    assert _score(batch, control) == _max_points(assignment), batch["rows"][control]


@pytest.mark.parametrize("student", ["tamper_checks", "tamper_ipython"])
def test_tampering_with_the_checks_earns_nothing(batch, student):
    assert _score(batch, student) == 0, batch["rows"][student]


@pytest.mark.parametrize("student", ["tests_gutted", "tests_deleted", "solution_as_test"])
def test_edited_tests_are_replaced_by_the_course_tests(batch, student):
    row = batch["rows"][student]
    assert float(row["score"]) == 0 and float(row["max_score"]) == _max_points(), row


@pytest.mark.parametrize("student", ["duplicated_tests", "shadow"])
def test_duplicates_and_shadowing_files_change_nothing(batch, student):
    row = batch["rows"][student]
    assert float(row["score"]) == float(row["max_score"]) == _max_points(), row


def test_broken_and_misnamed_notebooks_get_a_reason(batch):
    """A notebook that is not JSON, and one under another name, are a zero with a reason, out of
    the assignment's points, in a batch that ends normally (the fixture checks its exit status)."""
    name = nbt.source_notebook(ASSIGNMENT).name
    assert "not a valid notebook" in batch["rows"]["broken_json"]["reason"]
    assert f"missing notebook {name}" in batch["rows"]["misnamed"]["reason"]
    assert _score(batch, "broken_json") == _score(batch, "misnamed") == 0
    assert float(batch["rows"]["broken_json"]["max_score"]) == _max_points()


def test_an_infinite_loop_is_stopped_with_a_reason(batch):
    row = batch["rows"]["infinite_loop"]
    assert float(row["score"]) == 0 and "time limit" in row["reason"], row


@pytest.mark.parametrize("student", ["kill_self"])
def test_a_kernel_that_kills_itself_gets_zero_with_a_reason(batch, student):
    row = batch["rows"][student]
    assert float(row["score"]) == 0 and "killed" in row["reason"], row


@pytest.mark.parametrize(
    "student", ["memory_hog", "fork_many", "fill_disk", "print_flood", "huge_image", "kill_parent"]
)
def test_resource_attacks_are_contained(batch, student):
    # the limits stopped the attack; the rest of the notebook was graded as usual
    row = batch["rows"][student]
    assert float(row["score"]) == _max_points(), row


def test_no_process_outlives_its_submission(batch):
    # fork_many started its `sleep 600` processes inside its sandbox: all gone with it
    left = subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True).stdout
    assert "sleep 600" not in left, [line for line in left.splitlines() if "sleep 600" in line]


def test_no_secret_is_readable_or_writable_and_no_network(batch):
    results = batch["out"] / "course" / "judging" / "spy" / ASSIGNMENT
    (found,) = results.glob("*/results.json")  # judging/<student>/<assignment>/<notebook>/
    stdout = json.loads(found.read_text())["stdout"]
    spied = json.loads(stdout.split("SPIED ", 1)[1].splitlines()[0])
    assert spied["read"] == [] and spied["wrote"] == [], spied
    assert "connected" not in spied["net"], spied
    assert batch["connections"] == []


def test_feedback_hides_tracebacks_of_hostile_runs(batch):
    pages = list((batch["out"] / "feedback" / "tamper_checks" / ASSIGNMENT).glob("*.html"))
    assert pages and "BEGIN HIDDEN TESTS" not in pages[0].read_text()


@pytest.mark.parametrize("assignment", nbt.assignments())
def test_names_the_student_rebinds_earn_nothing(batch, assignment):
    """Every answer is wrong: a point here would come from a course name, a module or a builtin that
    the judge took from the student's process. Each route of ``ROUTES`` is met by the tests of its
    own exercise (one of them reads a name it rebinds), which all fail; the edited builtins score 0."""
    short = assignment.split("_")[0]
    for student in (f"{short}-names-in-turn", f"{short}-names-edited-builtins"):
        row = batch["rows"][student]
        # graded to the end: no limit stopped it, so its 0 is the judge's
        assert float(row["score"]) == 0 and float(row["max_score"]) == _max_points(assignment) and not row["reason"], row
    w = wrong(assignment)
    _, met = _routes_in_turn(w)
    errors = _cell_errors(batch, f"{short}-names-in-turn", assignment)
    for label, exercise in met.items():
        tests = [t for t in errors if scan.exercise_of_test(t, w.solutions) == exercise]
        assert tests and all(errors[t] is not None for t in tests), (label, exercise, {t: errors[t] for t in tests})


def _cell_errors(batch, student: str, assignment: str) -> dict[str, dict | None]:
    (found,) = (batch["out"] / "course" / "judging" / student / assignment).glob("*/results.json")
    return {c["grade_id"]: c["error"] for c in json.loads(found.read_text())["cells"] if c["kind"] == "test"}


def test_a_spy_of_the_tests_records_in_the_judge(batch):
    """generate's cache points: CacheSpy records generate's calls in the judge (the student's code
    calls a proxy), so a generate without a cache that rewrites the record earns none of them,
    though its tokens are right and so is the model it calls (the solution, which calls the model
    as asked, earns them through the grader: tests/test_grading.py)."""
    errors = _cell_errors(batch, "ch08-spy-rewrites-the-record", SPIED)
    assert errors["test_GPT"] is None and errors["test_sample_next_token"] is None, errors
    message = (errors["test_generate"] or {}).get("message", "")
    assert message.startswith("generate(use_cache=True): the model was called with (new positions T, cached positions P) "
                              "= [(4, 0), (5, 0), (6, 0)"), errors["test_generate"]


def test_issue_44s_routes_earn_nothing_and_the_innermost_exercise_answers(batch):
    """Through the grader: a thread, an operation off the building blocks inside the tiles, the autograd engine
    by a name built at run time, a backward that is autograd's, each computing the right answer, lose their
    exercises' points, each with the sentence of its class; the log-space update_online_softmax beside them,
    which calls torch.logsumexp inside online_softmax (its docstring forbids nothing), keeps its points;
    chapter 1's softmax through torch.sparse scores 0."""
    errors = _cell_errors(batch, "ch09-issue-44-routes", CLASSES)
    assert errors["test_update_online_softmax"] is None, errors["test_update_online_softmax"]
    words = {"online_softmax": "starts or uses a thread or a process (threading.Thread",
             "tiled_attention_forward": "uses torch.Tensor.logcumsumexp, which is not one of the building blocks",
             "tiled_attention_backward": "reaches a name that cannot be read before it runs (getattr",
             "TiledAttention": "calls torch.autograd.grad, which does this exercise's whole job"}
    for exercise, said in words.items():
        tests = [t for t in errors if scan.exercise_of_test(t, list(words) + ["update_online_softmax"]) == exercise]
        assert tests, exercise
        for test in tests:
            error = errors[test] or {}
            assert error.get("type") == "ForbiddenShortcut" and said in error.get("message", ""), (test, error)
    assert _score(batch, "ch01-issue-44-sparse-softmax") < _max_points(ASSIGNMENT)
    softmax = _cell_errors(batch, "ch01-issue-44-sparse-softmax", ASSIGNMENT)["test_softmax"] or {}
    assert softmax.get("type") == "ForbiddenShortcut" and "which is not one of the building blocks" in softmax.get(
        "message", ""), softmax
