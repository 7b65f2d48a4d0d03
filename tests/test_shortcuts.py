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

import pytest
import torch

from attention_course import forbidden, shortcuts
from autograder import scan
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
                                          + _LN.format(call="f")}, ["from torch import cdist as f\n"]),
}


@pytest.mark.parametrize("route", ROUTES_FOUND)
def test_the_scan_finds_every_route(route):
    solutions, added = ROUTES_FOUND[route]
    found = [f for f in _scan(solutions, added) if f.entry]
    assert found and {(f.exercise, f.entry in _LISTS["LayerNorm"]) for f in found} == {("LayerNorm", True)}, found


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
def test_an_indirection_the_scan_cannot_resolve_is_listed_and_costs_nothing(code, what):
    source = ("import importlib, sys\nclass LayerNorm(nn.Module):\n    def forward(self, X, name='x'):\n"
              f"        return {code}(X, X.shape[-1:])\n")
    found = _scan({"LayerNorm": source})
    assert [(f.exercise, f.entry) for f in found] == [("LayerNorm", None)], found
    assert found[0].detail.startswith(what), found[0].detail


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
              "source": "def tiled_attention_backward(Q, dO):\n    return Q.grad, torch.__version__, Q._version\n"}]
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
    ("fused_forward", ["torch.softmax"], None),
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
    """tests/test_grading.py grades one shortcut submission per chapter (delegation.routes_in_turn):
    together they must meet every exercise with a forbidden list, and every route on a function
    exercise and on a class exercise (the call goes first in the body, or in ``__init__``)."""
    met = set()
    for assignment, routes in delegation.routes_in_turn().items():
        nb = nbt.read(nbt.source_notebook(assignment))
        assert sorted(routes) == sorted(delegation.forbidden_exercises(nb)), assignment
        defined = {node.name: "class" if isinstance(node, ast.ClassDef) else "function"
                   for c in nb.cells if nbt.is_solution_cell(c)
                   for node in ast.parse(c.source).body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        met |= {(route, defined[exercise]) for exercise, route in routes.items()}
    assert met == {(route, kind) for route in delegation.SHORTCUT_ROUTES for kind in ("function", "class")}, met


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
