"""The checks the exercise tests call: they pass what is right and explain what is wrong."""

import numpy as np
import pytest
import torch

from attention_course import checks


def _message(fn, *args, **kwargs) -> str:
    with pytest.raises(AssertionError) as info:
        fn(*args, **kwargs)
    return str(info.value)


def test_check_close_passes_equal_values():
    checks.check_close(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-9]))
    checks.check_close(torch.ones(2, 3), torch.ones(2, 3))
    checks.check_close(0.5, 0.5)
    checks.check_close(np.float64(0.5), 0.5)


def test_check_close_names_shape_value_and_nan():
    assert "wrong shape: expected (2, 3), got (3, 2)" in _message(
        checks.check_close, np.zeros((3, 2)), np.zeros((2, 3)), name="w"
    )
    msg = _message(checks.check_close, np.array([[0.0, 1.0]]), np.array([[0.0, 2.0]]), name="w")
    assert "index (0, 1)" in msg and "expected 2" in msg and "got 1" in msg
    assert "NaN" in _message(checks.check_close, np.array([np.nan, 1.0]), np.array([0.0, 1.0]))


def test_check_close_checks_kind_dtype_and_device():
    assert "torch.Tensor" in _message(checks.check_close, np.zeros(2), torch.zeros(2))
    assert "numpy.ndarray" in _message(checks.check_close, torch.zeros(2), np.zeros(2))
    assert "dtype" in _message(checks.check_close, torch.zeros(2, dtype=torch.float64), torch.zeros(2))
    checks.check_close(torch.zeros(2, dtype=torch.float64), torch.zeros(2), exact_dtype=False)


def test_check_close_accepts_matching_infinities():
    checks.check_close(np.array([-np.inf, 1.0]), np.array([-np.inf, 1.0]))
    _message(checks.check_close, np.array([np.inf]), np.array([-np.inf]))


def test_check_equal_and_choice():
    checks.check_equal((2, 3), (2, 3))
    assert "expected 'b'" in _message(checks.check_equal, "a", "b", name="answer")
    assert checks.check_choice(" B ", "abcd", name="q") == "b"
    assert "one of" in _message(checks.check_choice, None, "abcd", name="q")


def test_check_raises():
    def bad(x):
        raise ValueError(f"shapes (2, 3) and (4,) do not match: {x}")

    checks.check_raises(ValueError, bad, 1, match="shapes")
    assert "does not mention" in _message(checks.check_raises, ValueError, bad, 1, match="dtype")
    assert "nothing was raised" in _message(checks.check_raises, ValueError, lambda: None)
    assert "it raised TypeError" in _message(checks.check_raises, ValueError, lambda: 1 + "a")
    with pytest.raises(NotImplementedError):  # a stub is reported as a stub, not as a wrong error
        checks.check_raises(ValueError, lambda: (_ for _ in ()).throw(NotImplementedError()))


def test_rows_sum_to_one():
    checks.check_rows_sum_to_one(np.full((2, 4), 0.25))
    assert "row (1,)" in _message(checks.check_rows_sum_to_one, np.array([[0.5, 0.5], [0.5, 0.6]]))
    assert "non-negative" in _message(checks.check_rows_sum_to_one, np.array([[1.5, -0.5]]))


def test_shape_type_device_finite():
    checks.check_shape(np.zeros((2, 3)), (2, 3))
    assert "expected an array" in _message(checks.check_shape, [1, 2], (2,))
    assert "expected a int" in _message(checks.check_type, "x", int)
    checks.check_device(torch.zeros(1), "cpu")
    assert "the first is at index (1,)" in _message(checks.check_finite, np.array([0.0, np.inf]))


def test_check_dropout_accepts_one_dropout_and_names_what_differs():
    torch.manual_seed(0)
    undropped = torch.rand(40, 50) + 0.5  # no zeros of its own
    checks.check_dropout(torch.nn.functional.dropout(undropped, 0.5), undropped, p=0.5, name="x")
    checks.check_dropout(torch.nn.functional.dropout(undropped, 0.2), undropped, p=0.2, name="x")
    twice = torch.nn.functional.dropout(torch.nn.functional.dropout(undropped, 0.5), 0.5)
    assert "entries that dropout kept" in _message(checks.check_dropout, twice, undropped, p=0.5, name="x")
    assert "0% of the entries are zero" in _message(checks.check_dropout, 2 * undropped, undropped, p=0.5, name="x")
    unscaled = torch.where(torch.rand(40, 50) < 0.5, 0.0, undropped)
    assert "scaled by 1 / (1 - p) = 2" in _message(checks.check_dropout, unscaled, undropped, p=0.5, name="x")
    assert "wrong shape" in _message(checks.check_dropout, undropped[:, :3], undropped, p=0.5, name="x")


def test_check_own_code_rejects_the_course_solution_and_accepts_notebook_code():
    from attention_course.reference.ch02 import masked_softmax

    with pytest.raises(AssertionError, match="the course's solution, not your code"):
        checks.check_own_code(masked_softmax, name="masked_softmax")

    def masked_softmax_of_mine(scores, mask=None):
        return scores

    masked_softmax_of_mine.__module__ = "__main__"  # as a function defined in a notebook
    checks.check_own_code(masked_softmax_of_mine, name="masked_softmax")
    checks.check_own_code("not a function at all", name="answer")


def test_check_close_names_a_likely_mistake_only_when_it_matches():
    expected = np.array([[1.0, 2.0], [3.0, 4.0]])
    scaled_twice = expected / 2
    msg = _message(checks.check_close, scaled_twice, expected, name="Y",
                   likely={"the scores are divided by d_head instead of its square root": scaled_twice})
    assert "values differ" in msg and "divided by d_head instead of its square root" in msg
    other = _message(checks.check_close, expected + 1, expected, name="Y",
                     likely={"the scores are divided by d_head instead of its square root": scaled_twice})
    assert "exactly what you get" not in other


def test_check_raises_at_the_end_of_a_cell_shows_nothing():
    """A test cell ending with check_raises must not have the exception as its result: nbgrader's
    Validate takes a test cell's result as a partial-credit score and warns that it "cannot be
    converted to a float" (the exception is still returned, for tests that look at it)."""
    from IPython.core.formatters import DisplayFormatter

    def bad(x):
        raise ValueError("no")

    error = checks.check_raises(ValueError, bad, 1)
    assert isinstance(error, ValueError) and str(error) == "no"
    assert DisplayFormatter().format(error) == ({}, {}), "IPython would show the exception as the cell's result"
    assert DisplayFormatter().format(ValueError("no"))[0], "IPython shows an exception as a result by default"


def test_load_weights_allows_extra_buffers_and_names_what_is_wrong():
    torch.manual_seed(0)
    params = {"weight": torch.ones(3, 2), "bias": torch.zeros(3)}
    layer = checks.load_weights(torch.nn.Linear(2, 3), params, name="Linear")
    checks.check_close(layer.weight.detach(), torch.ones(3, 2))
    with_buffer = torch.nn.Linear(2, 3)
    with_buffer.register_buffer("position_ids", torch.arange(4))  # a correct module may hold one
    checks.load_weights(with_buffer, params, name="Linear with a buffer")
    checks.check_equal(with_buffer.position_ids, torch.arange(4), name="its buffer, untouched")
    assert "no parameter or buffer named bias" in _message(
        checks.load_weights, torch.nn.Linear(2, 3, bias=False), params, name="Linear")
    assert "size mismatch for weight" in _message(checks.load_weights, torch.nn.Linear(3, 3), params, name="Linear")
    assert "does not name: bias" in _message(checks.load_weights, torch.nn.Linear(2, 3), {"weight": torch.ones(3, 2)},
                                             name="Linear")


def test_check_close_computes_likely_mistakes_only_when_the_values_differ():
    expected = np.array([1.0, 2.0])
    calls = []

    def mistakes():
        calls.append(1)
        return {"the scores are not scaled": expected / 2}

    checks.check_close(expected.copy(), expected, name="Y", likely=mistakes)
    assert calls == []
    msg = _message(checks.check_close, expected / 2, expected, name="Y", likely=mistakes)
    assert "exactly what you get if the scores are not scaled" in msg and calls == [1]
