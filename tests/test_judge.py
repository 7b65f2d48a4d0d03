"""The judge grades as one kernel would, and takes from the student's process only what the
tests expect from the student.

Every source notebook and every blank learner notebook are graded through the judge in
tests/test_grading.py (full marks, and 0). The tests here grade small notebooks of their own
that test the mechanism: each is run through the judge (sandbox and judge) and in one plain
in-process kernel, and both must give the verdicts the test states.
"""

from __future__ import annotations

import pytest

from autograder.assemble import assemble, judge_cells, student_names

import notebook_tools as nbt


def _same_verdicts(cells, expected: dict[str, bool]) -> None:
    """Grade the small notebook ``cells`` in the judge and in one kernel: both must give ``expected``."""
    nb = nbt.small_notebook(cells)
    judged, kernel = nbt.run_judged(nb), nbt.run_in_process(nb)
    assert nbt.verdicts(kernel) == expected, f"in one kernel: {kernel.tests}"
    assert nbt.verdicts(judged) == expected, f"through the judge: {judged.tests}"


SETUP = ("setup", "setup", "import collections, dataclasses, warnings\nimport torch\nfrom attention_course import checks")

NAMEDTUPLE_DECODER = '''
State = collections.namedtuple("State", ["enc_outputs", "hidden", "src_mask"])

class Decoder(torch.nn.Module):
    def init_state(self, enc_outputs, enc_hidden, src_mask):
        return State(enc_outputs, enc_hidden, src_mask)

    def forward(self, tgt_in, state):
        # reads the state by field name, as the student's own code may
        hidden = state.hidden + tgt_in.sum() + state.enc_outputs.sum() * 0
        return hidden * 2, State(state.enc_outputs, hidden, state.src_mask)
'''

NAMEDTUPLE_TEST = '''
dec = Decoder()
state = dec.init_state(torch.ones(2, 3), torch.zeros(1, 2), torch.ones(2, 3, dtype=torch.bool))
assert isinstance(state, tuple) and len(state) == 3
assert state._fields == ("enc_outputs", "hidden", "src_mask")
enc_outputs, hidden, src_mask = state  # unpacked as a tuple
checks.check_close(state.hidden, hidden, name="state.hidden")
out, state = dec(torch.ones(1), state)  # handed back to the student's code, read there by field name
checks.check_close(out, torch.full((1, 2), 2.0), name="out")
out, state = dec(torch.ones(1), state._replace(hidden=torch.full((1, 2), 10.0)))  # a test-made state
checks.check_close(state.hidden, torch.full((1, 2), 11.0), name="state.hidden after a made-up state")
'''


@pytest.mark.slow  # a sandbox and a judge each
def test_a_namedtuple_state_crosses_with_its_fields_and_goes_back():
    # issue 10: a BahdanauDecoder.init_state returning a namedtuple lost 5 test cells in the grader
    _same_verdicts([SETUP, ("solution", "Decoder", NAMEDTUPLE_DECODER), ("test", "test_state", NAMEDTUPLE_TEST)],
                   {"test_state": True})


RAISES_SUBCLASS = '''
class TargetTooShortError(ValueError):
    pass

def shift(tgt):
    if len(tgt) < 2:
        raise TargetTooShortError(f"a target needs at least 2 tokens, got {len(tgt)}")
    return tgt[:-1], tgt[1:]
'''

EXPECTS_VALUE_ERROR = '''
err = checks.check_raises(ValueError, shift, [1], match="at least 2")
assert type(err).__name__ == "TargetTooShortError" and isinstance(err, ValueError)
try:
    shift([])
except ValueError as caught:
    assert "got 0" in str(caught)
'''


@pytest.mark.slow  # a sandbox and a judge each
def test_an_exception_subclass_of_the_expected_type_is_caught_as_that_type():
    # issue 10: a teacher_forcing_pair raising its own ValueError subclass lost a test in the grader
    _same_verdicts([SETUP, ("solution", "shift", RAISES_SUBCLASS), ("test", "test_shift", EXPECTS_VALUE_ERROR)],
                   {"test_shift": True})


@pytest.mark.slow
@pytest.mark.parametrize("impostor", [
    "class ValueError(Exception):\n    pass\n",
    "class ValueError(Exception):\n    pass\nValueError.__module__ = 'builtins'\n",
])
def test_an_exception_merely_named_like_the_expected_one_is_not_it(impostor):
    source = impostor + "\ndef shift(tgt):\n    raise ValueError('too short')\n"
    _same_verdicts([SETUP, ("solution", "shift", source), ("test", "test_shift", EXPECTS_VALUE_ERROR)],
                   {"test_shift": False})


WARNS = '''
class ShortWarning(RuntimeWarning):
    pass

def shift(tgt):
    warnings.warn("short target", ShortWarning)
    return tgt
'''

EXPECTS_WARNING = '''
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    shift([1])
assert [issubclass(w.category, RuntimeWarning) for w in caught] == [True], caught
assert str(caught[0].message) == "short target"
with warnings.catch_warnings():
    warnings.simplefilter("error", RuntimeWarning)
    checks.check_raises(RuntimeWarning, shift, [1])
'''


@pytest.mark.slow  # a sandbox and a judge each
def test_a_warning_subclass_arrives_as_its_builtin_category():
    _same_verdicts([SETUP, ("solution", "shift", WARNS), ("test", "test_warns", EXPECTS_WARNING)],
                   {"test_warns": True})


CONTAINERS = '''
@dataclasses.dataclass
class Pair:
    decoder_input: torch.Tensor
    labels: torch.Tensor

    def total(self):
        return self.decoder_input.sum() + self.labels.sum()

def make(n):
    def numbers():
        for i in range(n):
            yield torch.tensor(float(i))
    return {
        "pair": Pair(torch.ones(2), torch.zeros(2)),
        "tensors": {"a": torch.ones(1), "b": torch.zeros(1)},
        "by_position": {0: "zero", (1, 2): "pair"},
        "seen": {1, 2},
        "numbers": numbers(),
        "empty": [],
    }
'''

USES_CONTAINERS = '''
out = make(3)
pair = out["pair"]
checks.check_close(pair.decoder_input, torch.ones(2), name="pair.decoder_input")
checks.check_close(pair.total(), torch.tensor(2.0), name="pair.total()")
assert sorted(out["tensors"]) == ["a", "b"] and float(out["tensors"]["a"]) == 1.0
assert out["by_position"][0] == "zero" and out["by_position"][(1, 2)] == "pair"
assert out["seen"] == {1, 2}
numbers = out["numbers"]
assert float(next(numbers)) == 0.0 and [float(x) for x in numbers] == [1.0, 2.0]
assert not out["empty"]
'''


@pytest.mark.slow  # a sandbox and a judge each
def test_dataclasses_dicts_sets_and_generators_cross_faithfully():
    _same_verdicts([SETUP, ("solution", "make", CONTAINERS), ("test", "test_make", USES_CONTAINERS)],
                   {"test_make": True})


FALSY = '''
class Verdict:
    def __bool__(self):
        return False

def is_ok(x):
    return Verdict()
'''


@pytest.mark.slow  # a sandbox and a judge each
def test_truthiness_of_a_remote_object_is_the_student_objects():
    _same_verdicts([SETUP, ("solution", "is_ok", FALSY), ("test", "test_is_ok", "assert is_ok(1)")],
                   {"test_is_ok": False})


@pytest.mark.slow  # a sandbox and a judge each
def test_a_later_redefinition_and_a_deletion_act_as_in_one_kernel():
    cells = [
        SETUP,
        ("solution", "double", "def double(x):\n    return x + 1  # wrong"),
        ("test", "test_wrong", "assert double(3) == 6"),
        ("added", "", "def double(x):\n    return 2 * x  # put right in a cell of the student's"),
        ("test", "test_right", "assert double(3) == 6"),
        ("added", "", "del double"),
        ("test", "test_gone", "double(3)"),
        ("added", "", "globals()['double'] = lambda x: 2 * x"),
        ("test", "test_back", "assert double(4) == 8"),
    ]
    _same_verdicts(cells, {"test_wrong": False, "test_right": True, "test_gone": False, "test_back": True})


COURSE_NAMES_REBOUND = '''
import types, builtins
del checks
checks = types.SimpleNamespace(check_close=lambda *a, **k: None)
globals()["torch"] = types.SimpleNamespace(tensor=lambda *a, **k: 0, allclose=lambda *a, **k: True)
exec("len = lambda x: 3")
builtins.len = lambda x: 3
__builtins__.__dict__["abs"] = lambda x: 0 if isinstance(__builtins__, types.ModuleType) else None

def double(x):
    return 0  # wrong
'''


@pytest.mark.slow  # a sandbox and a judge each
def test_names_of_the_course_and_builtins_stay_the_courses_in_the_judge():
    tests = [
        ("test", "test_checks", "checks.check_close(torch.tensor(double(2.0)), torch.tensor(4.0), name='double(2)')"),
        ("test", "test_len", "assert len([1]) == 3"),
        ("test", "test_abs", "assert abs(-5) == 0"),
    ]
    nb = nbt.small_notebook([SETUP, ("solution", "double", COURSE_NAMES_REBOUND), *tests])
    run = nbt.run_judged(nb)
    # in one kernel the student's names would win; in the judge no test passes
    assert nbt.verdicts(run) == {"test_checks": False, "test_len": False, "test_abs": False}, run.tests


def test_the_names_taken_from_the_student_come_from_the_source_notebook():
    cells = judge_cells(nbt.small_notebook([
        ("setup", "setup", "import torch\nfrom attention_course import checks\nseed = 0"),
        ("solution", "Model", "class Model: pass"),
        ("solution", "answer_why", "answer_why = 'a'"),
        ("kernel-only", "train", "import math\nmodel, history = Model(), []\nfor epoch in range(2):\n"
                                 "    pass\nbest = [h for h in history]\ndef helper(): inner = 1"),
        ("test", "test_model", "import numpy as np\nmodel = 3\nassert model"),
        ("added", "", "checks = None\nnp = None\nsneaky = 1"),
    ]))
    assert student_names(cells) == ["Model", "answer_why", "best", "epoch", "helper", "history", "model"]
    clash = judge_cells(nbt.small_notebook([("setup", "setup", "import numpy as np"), ("solution", "np", "np = 1")]))
    with pytest.raises(ValueError, match="np"):
        student_names(clash)


CHANGES_ITS_ARGUMENT = '''
import numpy as np

def shift_in_place(tgt, scores):
    decoder_input = tgt[..., :-1].clone()
    tgt[..., :-1] = tgt[..., 1:].clone()  # a mistake: the caller's tensor changes
    scores *= 0
    return decoder_input, tgt[..., :-1]
'''

SEES_ITS_ARGUMENT = '''
import numpy as np
tgt, scores = torch.tensor([[1, 5, 6, 2]]), np.ones(3)
shift_in_place(tgt, scores)
checks.check_equal(tgt.tolist(), [[1, 5, 6, 2]], name="the target after the call (left unchanged)")
'''


@pytest.mark.slow
def test_an_argument_changed_in_place_changes_the_tests_object_too():
    # issue 10: a teacher_forcing_pair that shifts its argument in place passed in the grader
    cells = [SETUP, ("solution", "shift_in_place", CHANGES_ITS_ARGUMENT), ("test", "test_unchanged", SEES_ITS_ARGUMENT),
             ("test", "test_numpy", "shift_in_place(torch.tensor([[1, 2]]), scores)\nassert scores.tolist() == [0, 0, 0]")]
    _same_verdicts(cells, {"test_unchanged": False, "test_numpy": True})


def test_the_judge_starts_without_nbformat():
    """A judge process starts per submission. nbformat imports jsonschema, whose format
    checkers (rfc3987-syntax builds a grammar at import) cost about 2 CPU-seconds: more than
    a third of a chapter 1 submission's whole cost. The judge needs none of it."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", "import sys, autograder.judge; print(sorted(m for m in ('nbformat', 'jsonschema', 'nbgrader') if m in sys.modules))"],
        cwd=nbt.ROOT, capture_output=True, text=True, check=True,
    )
    assert done.stdout.strip() == "[]", f"importing autograder.judge imports {done.stdout.strip()}"
