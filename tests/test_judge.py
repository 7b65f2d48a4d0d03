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


# ----------------------------------------------------------------------------- the test's objects

# a test's spy: records how the student's code calls it, then calls what it wraps
SPY_SETUP = ("setup", "spy_tools", '''
class Spy:
    def __init__(self, wrapped):
        self.wrapped, self.calls = wrapped, []
        self.scale = 10

    def __call__(self, x, **kwargs):
        self.calls.append((x, sorted(kwargs)))
        return self.wrapped(x, **kwargs)

def fails(x, **kwargs):
    raise ValueError(f"the test refuses {x}")
''')

CALLS_WHAT_IT_IS_GIVEN = [
    ("solution", "double", '''
class Odd(Exception):
    pass

def double(x, **kwargs):
    if x == 13:
        raise Odd("13 is odd")  # an exception of the student's own, through the test's spy
    return 2 * x
'''),
    ("solution", "apply", "def apply(fn, x):\n    return fn(x) + fn(x + 1, extra=True)"),
    # a public attribute of the test's object, read through its proxy
    ("solution", "apply_scaled", "def apply_scaled(fn, x):\n    return fn(x * fn.scale)"),
    ("solution", "apply_or_catch", '''
def apply_or_catch(fn, x):
    try:
        return fn(x)
    except ValueError as err:
        return f"caught: {err}"
'''),
]

USES_SPIES = '''
spy = Spy(double)  # the spy calls the student's double: a request nested in the callback
assert apply(spy, 3) == 14
assert spy.calls == [(3, []), (4, ["extra"])], spy.calls
spy = Spy(lambda v, **k: apply(Spy(double), v))  # nested twice: apply -> spy -> apply -> spy -> double
assert apply(spy, 1) == (2 + 4) + (4 + 6)
assert apply_scaled(Spy(double), 2) == 40
assert apply_or_catch(Spy(fails), 5) == "caught: the test refuses 5"
try:
    apply(Spy(double), 12)  # double(13) raises the student's Odd
except Exception as err:
    assert type(err).__name__ == "Odd" and "13 is odd" in str(err), repr(err)
else:
    raise AssertionError("no exception")
'''


@pytest.mark.slow  # a sandbox and a judge each
def test_the_student_code_calls_the_tests_object_nested_and_raising_as_in_one_kernel():
    """A test may pass its own object (a spy) into the student's code: in the judge the student's
    process gets a proxy whose calls come back to the judge, which calls its object (which may
    call the student's code again) and records there what the test reads."""
    _same_verdicts([SETUP, SPY_SETUP, *CALLS_WHAT_IT_IS_GIVEN, ("test", "test_apply", USES_SPIES)],
                   {"test_apply": True})


REWRITES_THE_RECORD = '''
def apply(fn, x):
    result = 2 * x  # the work done without the test's object ...
    try:
        fn.calls = [(x, [])]  # ... and the record rewritten, as if fn had been called once
    except AttributeError:
        pass
    try:
        fn.calls.clear()
        fn.calls.append((x, []))
    except Exception:
        pass
    return result
'''


@pytest.mark.slow  # a sandbox and a judge each
def test_the_student_code_cannot_rewrite_what_the_tests_object_records():
    test = "spy = Spy(lambda v, **k: 2 * v)\nassert apply(spy, 3) == 6\nassert spy.calls == [(3, [])], spy.calls"
    nb = nbt.small_notebook([SETUP, SPY_SETUP, ("solution", "apply", REWRITES_THE_RECORD), ("test", "test_apply", test)])
    # in one kernel the rewritten record fools the test; in the judge the record is the judge's
    assert nbt.verdicts(nbt.run_in_process(nb)) == {"test_apply": True}
    judged = nbt.run_judged(nb)
    assert nbt.verdicts(judged) == {"test_apply": False}, judged.tests
    assert judged.tests["test_apply"] == "AssertionError: []", judged.tests  # the spy saw no call


CALLS_TOO_OFTEN = '''
def apply(fn, x):
    total = 0
    for _ in range(100):
        total += fn(x)
    return total
'''

ASKS_TOO_MUCH = '''
spy = Spy(lambda v, **k: v)
err = checks.check_raises(RuntimeError, apply, spy, 1)
assert "more than 50 times" in str(err), err
assert len(spy.calls) == 50, len(spy.calls)
'''

NESTS_TOO_DEEP = '''
pong = Spy(lambda depth, **k: ping(pong, depth + 1))  # ping -> pong -> ping -> pong ... without end
err = checks.check_raises(RecursionError, ping, pong, 0)
assert "nested more than" in str(err), err
'''


@pytest.mark.slow  # a sandbox and a judge each
def test_calls_into_the_tests_objects_are_limited(monkeypatch):
    from autograder import judge

    monkeypatch.setattr(judge, "MAX_CALLBACKS", 50)
    nb = nbt.small_notebook([SETUP, SPY_SETUP, ("solution", "apply", CALLS_TOO_OFTEN),
                             ("solution", "ping", "def ping(fn, depth):\n    return fn(depth)"),
                             ("test", "test_often", ASKS_TOO_MUCH), ("test", "test_deep", NESTS_TOO_DEEP),
                             ("test", "test_after", "assert ping(Spy(lambda v, **k: v), 7) == 7")])
    judged = nbt.run_judged(nb)
    # the 51st call, and the call 8 deep, raise in the student's code (one kernel has no such
    # limits); the count is per call of the test's, and the student's process goes on
    assert nbt.verdicts(judged) == {"test_often": True, "test_deep": True, "test_after": True}, judged.tests


# ----------------------------------------------------------------------------- the judges' helper process

def _job(cells, **limits) -> dict:
    import dataclasses

    from autograder.limits import Limits

    return {"assignment": nbt.assignments()[0], "cells": judge_cells(nbt.small_notebook(cells)),
            "limits": dataclasses.asdict(Limits(**limits))}


@pytest.mark.slow  # a sandbox and a judge each
def test_each_judge_the_helper_forks_starts_from_nothing_another_left(tmp_path):
    """The grader forks each submission's judge from a helper process that has imported PyTorch
    (autograder.judging.JudgeStarter): what one judge's tests changed in its modules, a later
    judge of the same helper does not see, as two processes started from scratch would not."""
    from autograder.judging import JudgeStarter, run_judge

    job = _job([("setup", "setup", "import numpy, torch"),
                ("test", "test_fresh", "assert not hasattr(numpy, 'judged_before') and not hasattr(torch, 'judged_before')\n"
                                       "numpy.judged_before = torch.judged_before = True")])
    helper = JudgeStarter.of_this_thread(1).process.pid
    for n in range(2):
        output = run_judge(job, tmp_path / f"judge{n}")
        assert output is not None and output["cells"][-1]["error"] is None, output and output["cells"][-1]
    assert JudgeStarter.of_this_thread(1).process.pid == helper, "the two judges came from two helpers"


@pytest.mark.slow
def test_a_judge_computes_on_as_many_threads_as_the_student(tmp_path):
    """A judge per core waits on its student's process most of the time: PyTorch's and NumPy's
    pools in the judge are the student's (Limits.threads), whatever the grader's environment says;
    in the student's process too."""
    from autograder.judging import run_judge

    from autograder.limits import THREAD_VARIABLES

    pools = f"(torch.get_num_threads(), *(os.environ[name] for name in {THREAD_VARIABLES!r}))"
    for threads in (2, 1):
        expected = (threads, *[str(threads)] * len(THREAD_VARIABLES))
        job = _job([("setup", "setup", "import os, torch"),
                    ("solution", "student_pools", f"def student_pools():\n    return {pools}"),
                    ("test", "test_threads", f"assert {pools} == {expected}, {pools}\n"
                                             f"assert tuple(student_pools()) == {expected}, student_pools()")],
                   threads=threads)
        output = run_judge(job, tmp_path / f"threads{threads}")
        assert output is not None and output["cells"][-1]["error"] is None, output and output["cells"][-1]


@pytest.mark.slow
def test_a_judge_past_its_time_is_killed_and_the_helper_goes_on(tmp_path):
    import os

    from autograder.judging import JudgeStarter, run_judge

    starter = JudgeStarter.of_this_thread(1)
    stuck = tmp_path / "job.json"
    os.mkfifo(stuck)  # no one writes it: the judge waits on opening its job until it is killed
    (tmp_path / "work").mkdir()
    assert starter.judge(stuck, tmp_path / "work", 4096, timeout=1.0) is None
    output = run_judge(_job([("test", "test_ok", "assert True")]), tmp_path / "after")
    assert output is not None and output["cells"][-1]["error"] is None
    assert JudgeStarter.of_this_thread(1) is starter
    # a helper that ended is replaced: the next submission is judged all the same
    starter.process.kill()
    starter.process.wait()
    output = run_judge(_job([("test", "test_ok", "assert True")]), tmp_path / "replaced")
    assert output is not None and output["cells"][-1]["error"] is None
    assert JudgeStarter.of_this_thread(1) is not starter
