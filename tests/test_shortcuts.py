"""Forbidden shortcuts (the library calls that would do an exercise's whole job): the lists in
the solution cells' metadata agree with the docstrings and with attention_course/forbidden.py;
the static scan finds every route and nothing honest; the learner's kernel fails the first
visible test of an exercise that takes one. Grading end to end (every exercise with a list,
calling an entry by one of the routes, scores 0 there and nothing elsewhere) is in
tests/test_grading.py."""

from __future__ import annotations

import ast
import importlib
import importlib.util

import numpy as np
import pytest
import torch

from attention_course import forbidden, i18n, shortcuts
from autograder import assemble, scan
from courseware import forbidden_table

import delegation
import notebook_tools as nbt


def _solution_cells():
    for assignment in nbt.assignments():
        for cell in nbt.read(nbt.source_notebook(assignment)).cells:
            if nbt.is_solution_cell(cell):
                yield assignment, cell


def test_docstring_and_metadata_name_the_same_calls():
    """Every solution cell's "forbidden" list is named, entry by entry, in one "Do not call"
    sentence of its exercise's docstring, and no docstring forbids what the metadata does not."""
    checked = 0
    for assignment, cell in _solution_cells():
        name = nbt.nbgrader_meta(cell)["grade_id"]
        listed = forbidden_table.forbidden_of(cell)
        said = forbidden_table.docstring_names(cell.source, name) if not name.startswith("answer_") else None
        if listed:
            assert said is not None, f"{assignment}/{name}: its docstring has no 'Do not call ...:' sentence"
            assert sorted(said) == sorted(listed), f"{assignment}/{name}: docstring names {said}, metadata {listed}"
            checked += 1
        else:
            assert said is None, f"{assignment}/{name}: the docstring forbids {said}; the cell's metadata lists nothing"
    assert checked >= 11


def test_the_learners_table_is_generated_from_the_metadata():
    assert (nbt.ROOT / "attention_course" / "forbidden.py").read_text() == forbidden_table.table_source(), (
        "attention_course/forbidden.py is out of date with solutions/: run `make release`")
    assert forbidden.FORBIDDEN["LayerNorm"] == ("torch.nn.functional.layer_norm", "torch.nn.LayerNorm", "torch.layer_norm")


def test_every_entry_names_a_callable():
    """An entry is a full dotted name of something callable; a package the course does not
    install (SciPy) cannot be imported by the grader's sandbox either, and is still scanned."""
    for entries in forbidden.FORBIDDEN.values():
        for entry in entries:
            top = entry.split(".")[0]
            if importlib.util.find_spec(top) is None:
                assert top == "scipy", f"{entry}: {top} is not installed"
                continue
            module, rest = delegation._module_and_rest(entry)
            found = importlib.import_module(module)
            for part in rest:
                found = getattr(found, part)
            assert callable(found), entry


def test_every_listed_exercise_has_a_delegating_call():
    for entries in forbidden.FORBIDDEN.values():
        assert delegation.shortcut_entry(list(entries)) in delegation.SHORTCUT_ARGS


# ----------------------------------------------------------------------------- the scan

_SETUP = "import numpy as np\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
_LISTS = {"LayerNorm": ["torch.nn.functional.layer_norm", "torch.nn.LayerNorm", "torch.layer_norm"],
          "softmax": ["scipy.special.softmax", "torch.softmax", "torch.Tensor.softmax"],
          "masked_softmax": []}
_HONEST_LN = ("class LayerNorm(nn.Module):\n    def forward(self, X):\n"
              "        return (X - X.mean(-1, keepdim=True)) / torch.sqrt(X.var(-1, unbiased=False, keepdim=True) + 1e-5)\n")


def _scan(solutions: dict[str, str], added: list[str] = ()) -> list[scan.Finding]:
    cells = [{"kind": "other", "grade_id": "setup", "source": _SETUP, "tags": []}]
    cells += [{"kind": "added", "grade_id": f"cell-{i}", "source": s, "tags": []} for i, s in enumerate(added)]
    cells += [{"kind": "solution", "grade_id": name, "source": s, "tags": []} for name, s in solutions.items()]
    cells.append({"kind": "test", "grade_id": "test_LayerNorm", "source": "F.layer_norm(x, (2,))", "tags": []})
    return scan.scan(cells, _LISTS)


_LN = "class LayerNorm(nn.Module):\n    def forward(self, X):\n        return {call}(X, X.shape[-1:])\n"
ROUTES_FOUND = {
    "direct": ({"LayerNorm": _LN.format(call="F.layer_norm")}, []),
    "full name": ({"LayerNorm": _LN.format(call="torch.nn.functional.layer_norm")}, []),
    "aliased import": ({"LayerNorm": "from torch.nn.functional import layer_norm as ln\n" + _LN.format(call="ln")}, []),
    "aliased module": ({"LayerNorm": "import torch.nn.functional as G\n" + _LN.format(call="G.layer_norm")}, []),
    "alias in a function": ({"LayerNorm": _LN.format(call="ln").replace("return", "ln = F.layer_norm\n        return")}, []),
    "import in a function": ({"LayerNorm": _LN.format(call="ln").replace(
        "return", "from torch.nn.functional import layer_norm as ln\n        return")}, []),
    "getattr, built string": ({"LayerNorm": _LN.format(call="getattr(F, 'layer' + '_norm')")}, []),
    "getattr, f-string": ({"LayerNorm": "PART = 'norm'\n" + _LN.format(call="getattr(F, f'layer_{PART}')")}, []),
    "getattr, reversed": ({"LayerNorm": _LN.format(call="getattr(F, 'mron_reyal'[::-1])")}, []),
    "importlib": ({"LayerNorm": "import importlib\n" + _LN.format(
        call="importlib.import_module('torch.nn.' + 'functional').layer_norm")}, []),
    "__import__": ({"LayerNorm": _LN.format(call="__import__('torch.nn.functional', None, None, ['x']).layer_norm")}, []),
    "sys.modules": ({"LayerNorm": "import sys\n" + _LN.format(call="sys.modules['torch.nn.functional'].layer_norm")}, []),
    "eval": ({"LayerNorm": _LN.format(call="eval('F.layer' + '_norm')")}, []),
    "exec": ({"LayerNorm": "class LayerNorm(nn.Module):\n    def forward(self, X):\n"
                           "        exec('y = F.layer_norm(X, X.shape[-1:])')\n        return X\n"}, []),
    "another module's name for it": ({"LayerNorm": _LN.format(call="torch.nn.modules.normalization.F.layer_norm")}, []),
    "the aten op": ({"LayerNorm": _LN.format(call="torch.layer_norm")}, []),
    "the class bound to the name": ({"LayerNorm": "LayerNorm = nn.LayerNorm\n"}, []),
    "subclass": ({"LayerNorm": "class LayerNorm(torch.nn.modules.normalization.LayerNorm):\n    pass\n"}, []),
    "a helper in an added cell": ({"LayerNorm": _LN.format(call="_norm")},
                                  ["def _norm(*args):\n    return F.layer_norm(*args)\n"]),
    "a helper of a helper": ({"LayerNorm": _LN.format(call="_outer")},
                             ["def _inner(*a):\n    return torch.layer_norm(*a)\n", "def _outer(*a):\n    return _inner(*a)\n"]),
    "an alias rebound in another cell": ({"LayerNorm": "from torch.nn.functional import layer_norm as f\n"
                                          + _LN.format(call="f")}, ["from torch import exp as f\n"]),
}


@pytest.mark.parametrize("route", ROUTES_FOUND)
def test_the_scan_finds_every_route(route):
    solutions, added = ROUTES_FOUND[route]
    found = [f for f in _scan(solutions, added) if f.entry]
    assert found and {(f.exercise, f.entry in _LISTS["LayerNorm"]) for f in found} == {("LayerNorm", True)}, found


SAME_COMPUTATION = {  # another name of a listed entry's computation (attention_course.shortcuts.COMPUTATIONS)
    "F.softmax for torch.softmax": ("softmax", "F.softmax(torch.tensor(x), axis)", "torch.softmax"),
    "torch.special.softmax": ("softmax", "torch.special.softmax(torch.tensor(x), axis)", "torch.softmax"),
    "nn.Softmax": ("softmax", "nn.Softmax(axis)(torch.tensor(x))", "torch.softmax"),
    "torch.special.log_softmax": ("online_softmax", "torch.special.log_softmax(torch.tensor(x), axis).exp()",
                                  "torch.log_softmax"),
    "nn.LogSoftmax": ("online_softmax", "nn.LogSoftmax(axis)(torch.tensor(x)).exp()", "torch.log_softmax"),
    "a tensor's log_softmax": ("online_softmax", "torch.tensor(x).log_softmax(axis).exp()", "torch.log_softmax"),
}


@pytest.mark.parametrize("route", SAME_COMPUTATION)
def test_the_scan_finds_a_listed_computation_under_another_name(route):
    exercise, call, entry = SAME_COMPUTATION[route]
    lists = {exercise: ["torch.softmax", "torch.Tensor.softmax"] if exercise == "softmax" else
             ["torch.logsumexp", "torch.log_softmax", "torch.nn.functional.log_softmax"]}
    cells = [{"kind": "other", "grade_id": "setup", "source": _SETUP, "tags": []},
             {"kind": "solution", "grade_id": exercise, "source": f"def {exercise}(x, axis=-1):\n    return {call}.numpy()\n",
              "tags": []}]
    assert [(f.exercise, f.entry) for f in scan.scan(cells, lists)] == [(exercise, entry)]


def test_the_scan_finds_a_tensors_softmax_and_scipys():
    method = _scan({"softmax": "def softmax(x, axis=-1):\n    return torch.tensor(x).softmax(axis).numpy()\n"})
    assert [(f.exercise, f.entry) for f in method] == [("softmax", "torch.Tensor.softmax")]
    scipy = _scan({"softmax": "from scipy.special import softmax as sm\ndef softmax(x, axis=-1):\n    return sm(x, axis)\n"})
    assert [(f.exercise, f.entry) for f in scipy] == [("softmax", "scipy.special.softmax")]


HONEST = {
    "a comment, a docstring and a string naming it": {"LayerNorm": _HONEST_LN.replace(
        "    def forward", "    '''Same as F.layer_norm.'''\n    NAME = 'torch.nn.functional.layer_norm'\n"
                          "    # torch.nn.functional.layer_norm would do it in one call\n    def forward")},
    "an allowed building block (torch.softmax in masked_softmax)": {
        "masked_softmax": "def masked_softmax(scores, mask=None):\n    return torch.softmax(scores, dim=-1)\n",
        "LayerNorm": _HONEST_LN},
    "another exercise's forbidden call": {"LayerNorm": _HONEST_LN.replace("(X - X.mean", "torch.softmax(X, -1) * (X - X.mean")},
    "a local variable named like a global alias": {"LayerNorm": "ln = F.layer_norm\n" + _HONEST_LN.replace(
        "return", "ln = X.mean(-1, keepdim=True)\n        return ln + ").replace("class LayerNorm", "\nclass LayerNorm")},
    "the exercise's own method named softmax": {"softmax": "class _S:\n    def softmax(self, x):\n        e = np.exp(x)\n"
                                                           "        return e / e.sum()\n\ndef softmax(x, axis=-1):\n"
                                                           "    return _S().softmax(x)\n"},
}


@pytest.mark.parametrize("case", HONEST)
def test_the_scan_finds_nothing_in_honest_code(case):
    assert [f for f in _scan(HONEST[case]) if f.entry] == []


def test_a_scratch_cell_comparing_with_pytorch_is_not_an_exercise():
    """Code outside every exercise (a cell the learner added to compare an answer with
    PyTorch's) costs nothing; an indirection there is listed for the instructor."""
    found = _scan({"LayerNorm": _HONEST_LN}, ["x = torch.ones(2, 2)\nprint(F.layer_norm(x, (2,)), getattr(F, input()))\n"])
    assert [(f.exercise, f.entry) for f in found] == [(None, None)]
    assert "getattr with a name computed at run time" in found[0].detail


@pytest.mark.parametrize("code, what", [
    ("getattr(F, name)", "getattr with a name computed at run time"),
    ("importlib.import_module(name).layer_norm", "import_module of a module computed at run time"),
    ("eval(name)", "eval of code computed at run time"),
    ("globals()[name]", "globals()"),
    ("sys.modules[name].layer_norm", "sys.modules with a name computed at run time"),
])
def test_an_indirection_the_scan_cannot_resolve_is_refused_in_an_exercise(code, what):
    """A name computed at run time is how a forbidden routine hides (the autograd engine reached
    through getattr of a built string): in an exercise's own code it is refused; getattr of self
    (the object's own attributes) is listed and costs nothing."""
    source = ("import importlib, sys\nclass LayerNorm(nn.Module):\n    def forward(self, X, name='x'):\n"
              f"        getattr(self, name)\n        return {code}(X, X.shape[-1:])\n")
    found = _scan({"LayerNorm": source})
    refused = [f for f in found if f.kind == "indirection"]
    assert [f.exercise for f in refused] == ["LayerNorm"] and {f.exercise for f in found} == {"LayerNorm"}, found
    assert refused[0].detail.startswith(what), refused[0].detail
    assert [f.detail.split(" (")[0] for f in found if not f.entry] == ["getattr of self with a name computed at run time"]


@pytest.mark.parametrize("code", [
    "torch._C._nn.gelu", "torch.ops.aten.logsumexp", "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
    "getattr(torch.ops.aten, 'log' + 'sumexp')", "torch.utils._python_dispatch._pop_mode",
    "torch.nn.functional._in_projection_packed", "torch._VF.stft", "OPS.aten.logsumexp"])
def test_the_scan_refuses_pytorchs_private_names_in_every_exercise(code):
    """In an exercise with a list and in one without (masked_softmax), a private entry point
    of PyTorch is a hit, the dotted name it reached being the entry."""
    for exercise, lists in (("LayerNorm", True), ("masked_softmax", False)):
        source = (f"OPS = torch.ops\ndef {exercise}(X, mask=None):\n    return {code}(X, -1)\n" if not lists else
                  f"OPS = torch.ops\nclass LayerNorm(nn.Module):\n    def forward(self, X):\n        return {code}(X, -1)\n")
        found = {(f.exercise, scan.is_private(f.entry or "")) for f in _scan({exercise: source}) if f.entry}
        assert found == {(exercise, True)}, (code, exercise, found)


def test_the_scan_finds_a_forbidden_functions_tensor_method_and_spares_attributes():
    lists = {"online_softmax": ["torch.logsumexp"], "tiled_attention_backward": ["torch.autograd.grad"]}
    cells = [{"kind": "other", "grade_id": "setup", "source": _SETUP, "tags": []},
             {"kind": "solution", "grade_id": "online_softmax", "tags": [],
              "source": "def online_softmax(x, b):\n    lse = x.logsumexp(-1)\n    return (x - lse[..., None]).exp(), lse\n"},
             {"kind": "solution", "grade_id": "tiled_attention_backward", "tags": [],
              "source": "def tiled_attention_backward(Q, dO):\n    return Q.grad, torch.__version__, Q.mT\n"}]
    assert [(f.exercise, f.entry) for f in scan.scan(cells, lists)] == [("online_softmax", "torch.logsumexp")]


def test_exercise_of_test():
    names = ["MultiHeadAttention", "softmax", "masked_softmax"]
    assert scan.exercise_of_test("test_MultiHeadAttention_masks", names) == "MultiHeadAttention"
    assert scan.exercise_of_test("test_masked_softmax", names) == "masked_softmax"
    assert scan.exercise_of_test("test_softmax_stable", names) == "softmax"
    assert scan.exercise_of_test("test_trained_model", names) is None


def test_a_test_belongs_to_its_own_exercise_when_a_shorter_name_cheated():
    """Only `softmax` took a shortcut: `test_softmax_update`, the test of the exercise
    `softmax_update`, keeps its points; `test_softmax` loses them."""
    from autograder.judge import CellResult, Judge

    cells = [{"index": i, "grade_id": g, "kind": k, "source": ""} for i, (g, k) in enumerate(
        [("softmax_update", "solution"), ("test_softmax_update", "test"), ("softmax", "solution"), ("test_softmax", "test")])]
    results = [CellResult(c["index"], c["grade_id"], c["kind"], None) for c in cells]
    judge = Judge.__new__(Judge)
    judge.shortcuts = []
    judge.link = type("Link", (), {"forbidden": {"softmax": ["torch.softmax"], "softmax_update": []},
                                   "tripped": {"softmax": {"torch.softmax"}}})()
    verdicts = {r.grade_id: r.error for r in judge.shortcut_verdicts(cells, results)}
    assert verdicts["test_softmax_update"] is None, verdicts
    assert verdicts["test_softmax"]["type"] == "ForbiddenShortcut", verdicts


# ----------------------------------------------------------------------------- the kernel


def test_the_kernels_trip_wire_spares_allowed_calls_and_other_code():
    def honest(x):
        return torch.softmax(x, -1)  # a building block: not this exercise's forbidden call

    def cheat(x):
        return torch.nn.functional.layer_norm(x, x.shape[-1:])

    shortcuts.guard(honest, "honest_test_exercise", ["torch.nn.functional.layer_norm"])
    shortcuts.guard(cheat, "cheat_test_exercise", ["torch.nn.functional.layer_norm"])
    x = torch.ones(2, 3)
    honest(x)
    torch.nn.functional.layer_norm(x, (3,))  # outside the exercise: anyone may call it
    with pytest.raises(AssertionError, match="cheat_test_exercise calls torch.nn.functional.layer_norm"):
        cheat(x)


_ROUTES = """
import torch

def method(x):
    return x.logsumexp(-1)

def special(x):
    return torch.special.logsumexp(x, -1)

def the_aten_op(x):
    return torch.ops.aten.logsumexp.default(x, [-1])

def hidden_aten_op(x):  # the op packet, found at run time
    return getattr(torch.ops.aten, "log" + "sumexp")(x, [-1])

def fused_forward(Q):
    return torch.nn.functional.scaled_dot_product_attention(Q, Q, Q, is_causal=True)

def fused_backward(Q):
    O, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(Q, Q, Q, 0.0, True)[:2]
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(O, Q, Q, Q, O, lse, 0.0, True)

def engine(Q):
    leaf = Q.detach().requires_grad_(True)
    torch.autograd.backward([(leaf * 2).sum()], [torch.ones(())])
    return leaf.grad

def honest(x):
    m = x.amax(-1, keepdim=True)
    return m[..., 0] + torch.log(torch.exp(x - m).sum(-1))

def honest_backward(Q):  # its forward through autograd, run from outside it: the course's helpers do so
    return Q * 2

def outside(Q):
    leaf = Q.detach().requires_grad_(True)
    honest_backward(leaf).sum().backward()
    return leaf.grad
"""


@pytest.mark.parametrize("route, entries, says", [
    ("method", ["torch.logsumexp"], "runs aten::logsumexp, PyTorch's own computation of torch.logsumexp"),
    ("special", ["torch.logsumexp"], "runs aten::logsumexp"),
    ("the_aten_op", ["torch.logsumexp"], "calls torch.ops.aten.logsumexp.default, one of PyTorch's private"),
    ("hidden_aten_op", [], "calls torch.ops.aten.logsumexp, one of PyTorch's private"),
    ("fused_forward", ["torch.softmax"], "runs aten::_scaled_dot_product_flash_attention_for_cpu, an operation of"),
    ("fused_forward", ["torch.nn.functional.scaled_dot_product_attention"], "calls torch.nn.functional.scaled_dot"),
    ("fused_backward", ["torch.nn.functional.scaled_dot_product_attention"], "one of PyTorch's private"),
    ("engine", ["torch.autograd.grad"], "runs torch.autograd.graph._engine_run_backward, PyTorch's own computation"),
    ("honest", ["torch.logsumexp", "torch.softmax", "torch.autograd.grad"], None),
    ("outside", [], None),
])
def test_the_kernels_trip_wire_sees_the_computation_whatever_the_route(route, entries, says):
    """A forbidden entry stands for its computation: the dispatcher's operation or the engine's
    entry that every route runs, and torch.ops is forbidden in every exercise; honest code,
    and a backward run from outside the exercise through its code, pass."""
    space = {"__name__": "__main__"}
    exec(_ROUTES, space)
    shortcuts.guard(space[route], f"{route}_{len(entries)}", entries)
    if route == "outside":
        shortcuts.guard(space["honest_backward"], "honest_backward", ["torch.autograd.grad", "torch.Tensor.backward"])
    run = lambda: space[route](torch.randn(1, 1, 4, 8))  # noqa: E731
    if says is None:
        run()
        return
    with pytest.raises(AssertionError, match=f"^{route}_{len(entries)} .*which"):
        run()
    with pytest.raises(AssertionError) as caught:
        run()
    assert says in str(caught.value), str(caught.value)


def _kernel_notebook(assignment: str, route: str):
    """The shortcut notebook of ``assignment`` and ``route`` without its training runs, and the
    first visible test of each exercise that has a forbidden list (the one that calls
    check_own_code): what the learner runs before grading, up to what this proof needs."""
    nb = delegation.shortcut_notebook(assignment, route)
    listed = delegation.forbidden_exercises(nb)
    first: dict[str, str] = {}
    for cell in nb.cells:
        if nbt.is_test_cell(cell):
            exercise = scan.exercise_of_test(nbt.nbgrader_meta(cell)["grade_id"], listed)
            if exercise is not None:
                first.setdefault(exercise, nbt.nbgrader_meta(cell)["grade_id"])
    nb.cells = [c for c in nb.cells if not nbt.is_training_cell(c)]
    return nb, first


@pytest.mark.parametrize("route", delegation.SHORTCUT_ROUTES)
@pytest.mark.parametrize("assignment", delegation.shortcut_assignments())
def test_a_shortcut_fails_the_first_visible_test_in_the_kernel(assignment, route):
    nb, first = _kernel_notebook(assignment, route)
    run = nbt.run_in_process(nb, stop_after=list(first.values())[-1])
    for exercise, test in first.items():
        message = run.tests[test] or ""
        assert message.startswith(f"AssertionError: {exercise} ") and "which does this exercise's whole job" in message, (
            f"{test} with a {route} shortcut: {message or 'passed'}")


def test_the_graded_shortcuts_meet_every_route_on_functions_and_classes():
    """tests/test_grading.py grades one shortcut submission per chapter of
    delegation.graded_shortcut_assignments (routes taken in turn): together they must meet every
    route on a function exercise and on a class exercise (the call goes first in the body, or in
    ``__init__``), and each meets every exercise of its chapter that has a forbidden list."""
    met = set()
    for assignment, routes in delegation.routes_in_turn().items():
        nb = nbt.read(nbt.source_notebook(assignment))
        assert sorted(routes) == sorted(delegation.forbidden_exercises(nb)), assignment
        met |= {(route, delegation.exercise_kind(nb, exercise)) for exercise, route in routes.items()}
    assert met == {(route, kind) for route in delegation.SHORTCUT_ROUTES for kind in ("function", "class")}, met


@pytest.mark.parametrize("assignment", delegation.shortcut_assignments())
def test_the_graders_scan_finds_the_shortcut_of_every_exercise_with_a_list(assignment):
    """The grader's static scan (its cells as the judge takes them) of a submission whose every
    exercise with a forbidden list calls an entry, by the routes in turn: each exercise is found
    with the entry it calls, and no other. What the graded batch shows end to end for some
    chapters (delegation.graded_shortcut_assignments), the scan shows here for every chapter."""
    routes = delegation.routes_in_turn([assignment])[assignment]
    nb = delegation.shortcut_notebook(assignment, routes)
    listed = delegation.forbidden_exercises(nb)
    found = {(f.exercise, f.entry) for f in scan.scan(assemble.judge_cells(nb), listed) if f.entry is not None}
    assert found == {(exercise, delegation.shortcut_entry(entries)) for exercise, entries in listed.items()}, (
        assignment, routes, found)


def test_the_kernels_check_fails_at_once_for_the_library_object_itself():
    import functools

    with pytest.raises(AssertionError, match="LayerNorm is torch.nn.LayerNorm"):
        shortcuts.guard(torch.nn.LayerNorm, "LayerNorm", forbidden.FORBIDDEN["LayerNorm"])

    class LayerNorm(torch.nn.LayerNorm):
        pass

    with pytest.raises(AssertionError, match="LayerNorm is built on torch.nn.LayerNorm"):
        shortcuts.guard(LayerNorm, "LayerNorm", forbidden.FORBIDDEN["LayerNorm"])
    with pytest.raises(AssertionError, match="is built on torch.softmax"):
        shortcuts.guard(functools.partial(torch.softmax, dim=-1), "softmax", forbidden.FORBIDDEN["softmax"])


# ----------------------------------------------------------------------------- issue 44: whole classes

# the routes of issue 44, each an exercise's code that hands its whole job to PyTorch another way: a thread, a
# compiler, an operation off the building blocks, the autograd engine by a name computed at run time or node by
# node, a backward that is not the exercise's. Each is refused by the grader's scan (the layer the student's code
# cannot touch) and, where it runs in the kernel, by the kernel's net. (exercise, source, the scan's kind, the
# kernel's words or None where only the scan can tell: a graph's nodes called one by one run only elementwise
# arithmetic and matrix products)
_ISSUE_44 = {
    "online_softmax on a thread": ("online_softmax", """
import threading
def online_softmax(x, block_size):
    out = []
    worker = threading.Thread(target=lambda: out.append(torch.Tensor.logsumexp(x, -1)))
    worker.start()
    worker.join()
    return torch.exp(x - out[0][..., None]), out[0]
""", "concurrency", "calls threading.Thread.start, which starts a thread"),
    "online_softmax through logcumsumexp": ("online_softmax", """
def online_softmax(x, block_size):
    lse = torch.logcumsumexp(x, -1)[..., -1]
    return torch.exp(x - lse[..., None]), lse
""", "unlisted", "runs aten::logcumsumexp, an operation of PyTorch which is not one of the building blocks"),
    "online_softmax through a sparse log_softmax": ("online_softmax", """
def online_softmax(x, block_size):
    lse = (x - torch.sparse.log_softmax(x.to_sparse(), -1).to_dense())[..., 0]
    return torch.exp(x - lse[..., None]), lse
""", "unlisted", "an operation of PyTorch which is not one of the building blocks"),
    "tiled_attention_forward: x - log_softmax(x) in its tiles": ("tiled_attention_forward", """
def tiled_attention_forward(Q, K, V, block_q=64, block_k=64, causal=False):
    S = Q @ K.mT / math.sqrt(Q.shape[-1])
    lse = (S - F.log_softmax(S, -1))[..., 0]
    return torch.exp(S - lse[..., None]) @ V, lse
""", "listed", "calls torch.nn.functional.log_softmax, which does this exercise's whole job"),
    "tiled_attention_forward through logcumsumexp": ("tiled_attention_forward", """
def tiled_attention_forward(Q, K, V, block_q=64, block_k=64, causal=False):
    S = Q @ K.mT / math.sqrt(Q.shape[-1])
    lse = S.logcumsumexp(-1)[..., -1]
    return torch.exp(S - lse[..., None]) @ V, lse
""", "unlisted", "runs aten::logcumsumexp"),
    "tiled_attention_backward: the engine by a name computed at run time": ("tiled_attention_backward", """
def tiled_attention_backward(Q, K, V, O, lse, dO, block_q=64, block_k=64, causal=False):
    leaves = [M.detach().requires_grad_(True) for M in (Q, K, V)]
    out = torch.exp(leaves[0] @ leaves[1].mT / math.sqrt(Q.shape[-1]) - lse[..., None]) @ leaves[2]
    engine = getattr(torch.autograd, "".join(chr(c) for c in (103, 114, 97, 100)))
    return engine(out, leaves, dO)
""", "indirection", "torch.autograd.grad"),
    "tiled_attention_backward: the graph's nodes called under no_grad": ("tiled_attention_backward", """
def tiled_attention_backward(Q, K, V, O, lse, dO, block_q=64, block_k=64, causal=False):
    V_leaf = V.detach().requires_grad_(True)
    out = torch.exp(Q @ K.mT / math.sqrt(Q.shape[-1]) - lse[..., None]) @ V_leaf
    with torch.no_grad():
        node = out.grad_fn
        grads = node(dO)
    return torch.zeros_like(Q), torch.zeros_like(K), grads[1]
""", "unlisted", None),
    "tiled_attention_backward: TorchScript from a string calling backward": ("tiled_attention_backward", """
def tiled_attention_backward(Q, K, V, O, lse, dO, block_q=64, block_k=64, causal=False):
    unit = torch.jit.CompilationUnit("def f(x):\\n    return x * 2\\n")
    return unit.f(Q), K, V
""", "compiled", "calls torch.jit.CompilationUnit, which compiles code"),
    "TiledAttention: a backward that is autograd's": ("TiledAttention", """
class TiledAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, causal=False, block_q=64, block_k=64):
        ctx.save_for_backward(Q, K, V)
        return tiled_attention_forward(Q, K, V, block_q, block_k, causal)[0]

    @staticmethod
    def backward(ctx, dO):
        leaves = [M.detach().requires_grad_(True) for M in ctx.saved_tensors]
        with torch.enable_grad():
            out = torch.exp(leaves[0] @ leaves[1].mT) @ leaves[2]
            return (*torch.autograd.grad(out, leaves, dO), None, None, None)
""", "listed", None),
    "GroupedQueryAttention: SDPA's math in TorchScript": ("GroupedQueryAttention", """
class GroupedQueryAttention(nn.Module):
    def forward(self, X):
        unit = torch.jit.CompilationUnit("def f(q):\\n    return torch.softmax(q @ q.transpose(-2, -1), -1) @ q\\n")
        return unit.f(X)
""", "compiled", "calls torch.jit.CompilationUnit"),
    "GroupedQueryAttention: flex_attention on a thread": ("GroupedQueryAttention", """
from concurrent.futures import ThreadPoolExecutor
from torch.nn.attention.flex_attention import flex_attention
class GroupedQueryAttention(nn.Module):
    def forward(self, X):
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(lambda: X * 1).result()
""", "concurrency", "calls concurrent.futures.thread.ThreadPoolExecutor.submit"),
    "ch01 softmax through torch.sparse": ("softmax", """
def softmax(x, axis=-1):
    t = torch.from_numpy(np.asarray(x, dtype=float))
    return torch.sparse.softmax(t.to_sparse(), axis).to_dense().numpy()
""", "unlisted", "an operation of PyTorch which is not one of the building blocks"),
    "ch06 LayerNorm: the native layer norm on a thread": ("LayerNorm", """
import threading
class LayerNorm(nn.Module):
    def forward(self, X):
        out = []
        worker = threading.Thread(target=lambda: out.append(torch.native_layer_norm(X, X.shape[-1:], None, None, 1e-5)[0]))
        worker.start()
        worker.join()
        return out[0]
""", "concurrency", "calls threading.Thread.start"),
}
_SETUP_44 = "import math\nimport numpy as np\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
_INPUTS_44 = {"online_softmax": lambda space: space["online_softmax"](torch.randn(3, 5), 2),
              "tiled_attention_forward": lambda space: space["tiled_attention_forward"](*torch.randn(3, 1, 4, 2)),
              "tiled_attention_backward": lambda space: space["tiled_attention_backward"](
                  *torch.randn(3, 1, 4, 2), torch.randn(1, 4, 2), torch.randn(1, 4), torch.randn(1, 4, 2)),
              "TiledAttention": None,  # its backward runs from the engine: the scan's and the grader's case
              "GroupedQueryAttention": lambda space: space["GroupedQueryAttention"]()(torch.randn(1, 4, 2)),
              "softmax": lambda space: space["softmax"](np.ones((2, 3))),
              "LayerNorm": lambda space: space["LayerNorm"]()(torch.randn(2, 3))}


@pytest.mark.parametrize("route", _ISSUE_44)
def test_issue_44s_routes_are_refused_by_the_scan_and_in_the_kernel(route):
    exercise, source, kind, says = _ISSUE_44[route]
    lists = {exercise: list(forbidden.FORBIDDEN.get(exercise, ()))}
    cells = [{"kind": "other", "grade_id": "setup", "source": _SETUP_44, "tags": []},
             {"kind": "solution", "grade_id": exercise, "source": source, "tags": []}]
    found = [f for f in scan.scan(cells, lists) if f.entry]
    assert kind in {f.kind for f in found} and {f.exercise for f in found} == {exercise}, found
    message = i18n.gettext(scan.VERDICTS[kind]).format(exercise=exercise, entry="X")
    assert message.startswith(f"{exercise} ") and "earns no points" in message
    if says is None or _INPUTS_44[exercise] is None:
        return
    space = {"__name__": "__main__"}
    exec(_SETUP_44 + source, space)
    shortcuts.guard(space[exercise], exercise, lists[exercise])
    with pytest.raises(AssertionError) as caught:
        _INPUTS_44[exercise](space)
    assert str(caught.value).startswith(f"{exercise} ") and says in str(caught.value), str(caught.value)


def test_the_innermost_exercise_answers_for_a_call():
    """A log-space update_online_softmax may call torch.logsumexp (its docstring forbids nothing) inside an
    online_softmax that may not: the call is the innermost exercise's (issue 44's false fail); the same call
    made by online_softmax's own code, or by a helper function of the notebook it calls, is online_softmax's."""
    space = {"__name__": "__main__"}
    exec(_SETUP_44 + '''
def update_online_softmax(running_max, running_sum, block):
    new_max = torch.maximum(running_max, block.amax(dim=-1))
    shift = torch.where(new_max == float("-inf"), torch.zeros_like(new_max), new_max)
    terms = torch.cat([(running_max - shift + torch.log(running_sum))[..., None], block - shift[..., None]], dim=-1)
    return new_max, torch.exp(torch.logsumexp(terms, dim=-1))

def online_softmax(x, block_size):
    m, s = update_online_softmax(x.new_full(x.shape[:-1], float("-inf")), x.new_zeros(x.shape[:-1]), x)
    return torch.exp(x - m[..., None]) / s[..., None], m + torch.log(s)

def _helper(x):
    return torch.logsumexp(x, -1)

def cheat(x, block_size):
    return _helper(x)
''', space)
    shortcuts.guard(space["update_online_softmax"], "update_online_softmax",
                    forbidden.FORBIDDEN.get("update_online_softmax", ()))
    shortcuts.guard(space["online_softmax"], "online_softmax", forbidden.FORBIDDEN["online_softmax"])
    shortcuts.guard(space["cheat"], "cheat", forbidden.FORBIDDEN["online_softmax"])
    x = torch.randn(2, 7)
    probs, lse = space["online_softmax"](x, 3)
    torch.testing.assert_close(lse, torch.logsumexp(x, -1))
    with pytest.raises(AssertionError, match="^cheat calls torch.logsumexp"):
        space["cheat"](x, 3)


def test_a_thread_the_notebook_started_before_is_refused_while_an_exercise_runs():
    space = {"__name__": "__main__"}
    exec(_SETUP_44 + '''
import threading
stop = threading.Event()
worker = threading.Thread(target=stop.wait)
worker.start()

def online_softmax(x, block_size):
    return x, x[..., 0]
''', space)
    try:
        with pytest.raises(AssertionError, match="^online_softmax calls threading.Thread.start, which starts a thread"):
            shortcuts.guard(space["online_softmax"], "online_softmax", forbidden.FORBIDDEN["online_softmax"])
    finally:
        space["stop"].set()
        space["worker"].join()
    assert shortcuts.helpers_alive() is None


def test_an_exercise_must_call_what_its_metadata_says_it_is_built_on():
    """TiledAttention's backward must be the learner's own tiled_attention_backward (metadata "calls"): a
    backward that computes the gradients any other way (autograd's, below) is refused by the scan and, at
    the first visible test, in the kernel; one that calls it through a helper of the notebook's passes."""
    other = ("class TiledAttention(torch.autograd.Function):\n    @staticmethod\n    def backward(ctx, dO):\n"
             "        return {call}, None, None, None\n")
    honest = other.format(call="*_grads(ctx, dO)") + ("def _grads(ctx, dO):\n"
                                                      "    return tiled_attention_backward(*ctx.saved_tensors, dO)\n")
    not_built_on = other.format(call="*torch.autograd.grad(ctx.out, ctx.saved_tensors, dO)")
    for source, refused in ((honest, False), (not_built_on, True)):
        cells = [{"kind": "other", "grade_id": "setup", "source": _SETUP_44, "tags": []},
                 {"kind": "solution", "grade_id": "TiledAttention", "source": source, "tags": [],
                  "calls": ["tiled_attention_backward"]},
                 {"kind": "solution", "grade_id": "tiled_attention_backward", "tags": [],
                  "source": "def tiled_attention_backward(*a):\n    return a[:3]\n"}]
        found = {(f.entry, f.kind) for f in scan.scan(cells, {"TiledAttention": [], "tiled_attention_backward": []})
                 if f.entry}
        assert (("tiled_attention_backward", "missing") in found) is refused, found
        space = {"__name__": "__main__"}
        exec(_SETUP_44 + cells[2]["source"] + source, space)
        if refused:
            with pytest.raises(AssertionError, match="^TiledAttention does not call tiled_attention_backward, which"):
                shortcuts.guard(space["TiledAttention"], "TiledAttention", [], ["tiled_attention_backward"])
        else:
            shortcuts.guard(space["TiledAttention"], "TiledAttention", [], ["tiled_attention_backward"])


def test_the_scan_says_the_same_in_a_judge_that_has_not_imported_torch():
    """The judge scans before any test imports PyTorch: the building blocks (torch.exp, torch.bool) pass
    there and a tensor's method of a forbidden function (torch.Tensor.logsumexp, x.logsumexp) is found."""
    import subprocess
    import sys

    code = ("import sys\nfrom autograder import scan\nassert 'torch' not in sys.modules\n"
            "source = 'def online_softmax(x, b):\\n    return torch.exp(x).to(torch.bool), torch.Tensor.logsumexp(x, -1), "
            "x.logsumexp(-1), x.logcumsumexp(-1)\\n'\n"
            "cells = [{'kind': 'other', 'grade_id': 'setup', 'source': 'import torch\\n'},\n"
            "         {'kind': 'solution', 'grade_id': 'online_softmax', 'source': source}]\n"
            "print(sorted({(f.entry, f.kind) for f in scan.scan(cells, {'online_softmax': ['torch.logsumexp']})}))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=nbt.ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[('torch.Tensor.logcumsumexp', 'unlisted'), ('torch.logsumexp', 'listed')]", done.stdout


def test_an_exercise_not_written_yet_is_not_told_what_it_must_call():
    """The learner's stub (raise NotImplementedError) fails its tests with NotImplementedError, in the
    grader and in the kernel, not with the sentence of an exercise that forgot tiled_attention_backward."""
    stub = ("class TiledAttention(torch.autograd.Function):\n    @staticmethod\n    def backward(ctx, dO):\n"
            "        # YOUR CODE HERE\n        raise NotImplementedError('not written yet')\n")
    cells = [{"kind": "other", "grade_id": "setup", "source": _SETUP_44, "tags": []},
             {"kind": "solution", "grade_id": "TiledAttention", "source": stub, "tags": [],
              "calls": ["tiled_attention_backward"]}]
    assert [f for f in scan.scan(cells, {"TiledAttention": []}) if f.entry] == []
    space = {"__name__": "__main__"}
    exec(_SETUP_44 + stub, space)
    shortcuts.guard(space["TiledAttention"], "TiledAttention", [], ["tiled_attention_backward"])


_ROTARY_LIBRARIES = {
    "torchtune": "from torchtune.modules import RotaryPositionalEmbeddings\n"
                 "def apply_rotary(x, positions, base=10000.0):\n"
                 "    return RotaryPositionalEmbeddings(x.shape[-1], base=int(base))(x[None], input_pos=positions)[0]\n",
    "transformers": "import transformers.models.llama.modeling_llama as llama\n"
                    "def apply_rotary(x, positions, base=10000.0):\n"
                    "    return llama.apply_rotary_pos_emb(x, x, x.cos(), x.sin())[0]\n",
    "rotary_embedding_torch": "from rotary_embedding_torch import RotaryEmbedding\n"
                              "def apply_rotary(x, positions, base=10000.0):\n"
                              "    return RotaryEmbedding(x.shape[-1]).rotate_queries_or_keys(x)\n",
    "flash_attn": "from flash_attn.layers.rotary import apply_rotary_emb\n"
                  "def apply_rotary(x, positions, base=10000.0):\n    return apply_rotary_emb(x, x.cos(), x.sin())\n",
}


def _scan_rotary(source: str) -> list[scan.Finding]:
    """The scan's findings in chapter 10's apply_rotary (its list, as in the notebook, empty)."""
    cells = [{"kind": "other", "grade_id": "setup", "source": _SETUP, "tags": []},
             {"kind": "solution", "grade_id": "apply_rotary", "source": source, "tags": []}]
    return scan.scan(cells, {"apply_rotary": []})


@pytest.mark.parametrize("library", _ROTARY_LIBRARIES)
def test_a_librarys_rotary_embedding_is_refused_by_the_scan(library):
    """Chapter 10: a rotary embedding from a library (another module, whatever its name) earns
    apply_rotary nothing, though its list names no routine; the course's own building blocks,
    complex numbers included (Llama's way of writing the rotation), are not refused."""
    found = _scan_rotary(_ROTARY_LIBRARIES[library])
    assert found and all(f.kind == "unlisted" for f in found) and found[0].entry.split(".")[0] == library, found


def test_a_rotation_by_complex_numbers_is_not_refused():
    honest = ("def apply_rotary(x, positions, base=10000.0):\n"
              "    i = torch.arange(x.shape[-1] // 2, dtype=torch.float64)\n"
              "    angles = positions.double()[..., None] * base ** (-2 * i / x.shape[-1])\n"
              "    pairs = torch.view_as_complex(x.double().unflatten(-1, (-1, 2)).contiguous())\n"
              "    turned = pairs * torch.polar(torch.ones_like(angles), angles)\n"
              "    return torch.view_as_real(turned).flatten(-2).to(x.dtype)\n")
    assert _scan_rotary(honest) == []
