"""Checks that the exercise tests use.

Every check raises ``AssertionError`` with a message that says what is wrong in words:
which output, which shape, which entry, expected against got. A learner who reads the
message should know where to look without opening the test.

The helpers accept NumPy arrays, PyTorch tensors and Python numbers. ``got`` is always
the learner's value and ``expected`` the reference, so messages read the same way
everywhere.
"""

from __future__ import annotations

import re
import sys
from typing import Any, Callable

import numpy as np

from attention_course.i18n import gettext

#: a space a joined name leaves between a full-width closing mark and Chinese: "（40 不是 16 的倍数） 的 O"
_SPACE_AFTER_FULL_WIDTH = re.compile(r"(?<=[）」』”》])[ ]+(?=[\u4e00-\u9fff])")


class _Message(str):
    """A failure message's template, translated: formatted, it drops the space that a test's name
    joined from pieces (``name + "'s O"``, the piece " 的 O" in Chinese) leaves after a full-width
    closing mark, which Chinese writes with no space (docs/translating.md)."""

    def format(self, *args, **kwargs) -> str:
        return _SPACE_AFTER_FULL_WIDTH.sub("", str.format(self, *args, **kwargs))


def _(message: str) -> _Message:
    return _Message(gettext(message))


def _is_tensor(x: Any) -> bool:
    # torch is looked up, not imported: chapter 1 is NumPy only and should not pay for it,
    # and where torch was never imported nothing can be a tensor
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _kind(x: Any) -> str:
    if _is_tensor(x):
        return "torch.Tensor"
    if isinstance(x, np.ndarray):
        return "numpy.ndarray"
    return type(x).__name__


def _to_numpy(x: Any) -> np.ndarray:
    if _is_tensor(x):
        x = x.detach()
        if x.dtype == sys.modules["torch"].bfloat16:
            x = x.float()
        return x.cpu().numpy()
    return np.asarray(x)


def _shape(x: Any) -> tuple:
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _fmt(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.6g}"
    return repr(v)


def check_type(got: Any, expected_type: type | tuple, *, name: str = "output") -> None:
    """Fail unless ``got`` is an instance of ``expected_type``."""
    if not isinstance(got, expected_type):
        names = (
            _(" or ").join(t.__name__ for t in expected_type)
            if isinstance(expected_type, tuple)
            else expected_type.__name__
        )
        raise AssertionError(_("{name}: expected a {names}, got {kind} ({got!r:.80})").format(
            name=name, names=names, kind=_kind(got), got=got))


def check_shape(got: Any, expected_shape: tuple, *, name: str = "output") -> None:
    """Fail unless ``got`` has exactly ``expected_shape``."""
    if not hasattr(got, "shape"):
        raise AssertionError(_("{name}: expected an array of shape {shape}, got {kind}").format(
            name=name, shape=tuple(expected_shape), kind=_kind(got)))
    if _shape(got) != tuple(expected_shape):
        raise AssertionError(_("{name}: wrong shape: expected {expected}, got {got}").format(
            name=name, expected=tuple(expected_shape), got=_shape(got)))


def check_dtype(got: Any, expected_dtype: Any, *, name: str = "output") -> None:
    """Fail unless ``got.dtype == expected_dtype`` (NumPy or torch dtypes)."""
    if getattr(got, "dtype", None) != expected_dtype:
        raise AssertionError(_("{name}: wrong dtype: expected {expected}, got {got}").format(
            name=name, expected=expected_dtype, got=getattr(got, "dtype", _kind(got))))


def check_device(got: Any, expected_device: Any, *, name: str = "output") -> None:
    """Fail unless the tensor ``got`` lives on ``expected_device`` (type and index)."""
    import torch

    expected = torch.device(expected_device)
    if not _is_tensor(got):
        raise AssertionError(_("{name}: expected a torch.Tensor on {device}, got {kind}").format(
            name=name, device=expected, kind=_kind(got)))
    actual = got.device
    same = actual.type == expected.type and (
        expected.index is None or actual.index is None or actual.index == expected.index
    )
    if not same:
        raise AssertionError(_("{name}: on the wrong device: expected {expected}, got {got}").format(
            name=name, expected=expected, got=actual))


def check_finite(got: Any, *, name: str = "output") -> None:
    """Fail if ``got`` holds NaN or infinity, naming the first bad entry."""
    arr = _to_numpy(got)
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            _("{name}: {bad} of {size} entries are NaN or infinite; the first is at index {index}: {value}").format(
                name=name, bad=int(bad.sum()), size=arr.size, index=idx, value=arr[idx]))


def check_close(
    got: Any,
    expected: Any,
    *,
    name: str = "output",
    atol: float = 1e-6,
    rtol: float = 1e-5,
    exact_dtype: bool = True,
    likely: dict[str, Any] | Callable[[], dict[str, Any]] | None = None,
) -> None:
    """Fail unless ``got`` matches ``expected`` in kind, shape, dtype, device and values.

    ``likely`` maps a common mistake, said as the end of "this is what you get if ...",
    to the value that mistake produces (the test computes it with the same weights); when
    the values differ and ``got`` matches one of them, the message names that mistake. It may
    also be a function of no arguments that returns that dict: it is then called only when the
    values differ, so that a passing check does not pay for computing the mistakes.

    * kind: a tensor where a tensor is expected, an array where an array is expected
      (a Python number is accepted for a 0-d expected value);
    * dtype and device are compared when ``expected`` is an array or tensor and
      ``exact_dtype`` is true;
    * values: ``|got - expected| <= atol + rtol * |expected|`` entry-wise, NaN never
      equal to anything (a reference that is NaN is a bug in the test, not the learner).
    """
    scalar_expected = not hasattr(expected, "shape") or _shape(expected) == ()
    if _is_tensor(expected) and not _is_tensor(got) and not (
        scalar_expected and isinstance(got, (int, float, np.floating))
    ):
        raise AssertionError(_("{name}: expected a torch.Tensor, got {kind}").format(name=name, kind=_kind(got)))
    if isinstance(expected, np.ndarray) and not isinstance(got, (np.ndarray, np.generic)) and not (
        scalar_expected and isinstance(got, (int, float))
    ):
        raise AssertionError(_("{name}: expected a numpy.ndarray, got {kind}").format(name=name, kind=_kind(got)))
    if not hasattr(expected, "shape") and not isinstance(
        got, (int, float, np.floating, np.integer, np.ndarray)
    ) and not _is_tensor(got):
        raise AssertionError(_("{name}: expected a number, got {kind} ({got!r:.80})").format(
            name=name, kind=_kind(got), got=got))
    if hasattr(expected, "shape") and _shape(expected) != ():
        check_shape(got, _shape(expected), name=name)
    if exact_dtype and hasattr(expected, "dtype") and hasattr(got, "dtype") and _shape(expected) != ():
        check_dtype(got, expected.dtype, name=name)
    if _is_tensor(expected) and _is_tensor(got):
        check_device(got, expected.device, name=name)

    g = _to_numpy(got).astype(np.float64)
    e = _to_numpy(expected).astype(np.float64)
    if np.isnan(e).any():
        raise AssertionError(_("{name}: the reference value contains NaN (a bug in the test)").format(name=name))
    g = np.broadcast_to(g, e.shape) if g.shape == () else g
    nan = np.isnan(g)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(g - e)
        # an infinite reference (a masked score, say) must be matched exactly
        ok = np.where(np.isinf(e), g == e, (diff <= atol + rtol * np.abs(e)) & ~nan)
    if ok.all():
        return
    bad = np.argwhere(~ok)
    first = tuple(int(i) for i in bad[0])
    if e.ndim:
        finite = ~nan & np.isfinite(diff)
        max_diff = float(diff[finite].max()) if finite.any() else float("nan")
        counts = {"name": name, "index": first, "expected": _fmt(e[first]), "got": _fmt(g[first]),
                  "differ": len(bad), "size": e.size, "largest": f"{max_diff:.3g}", "nan": int(nan.sum())}
        detail = (_("{name}: values differ at index {index}: expected {expected}, got {got} ({differ} of {size} "
                    "entries differ; largest difference {largest}; {nan} are NaN)") if nan.any() else
                  _("{name}: values differ at index {index}: expected {expected}, got {got} ({differ} of {size} "
                    "entries differ; largest difference {largest})")).format(**counts)
    else:
        detail = _("{name}: expected {expected}, got {got}").format(
            name=name, expected=_fmt(float(e)), got=_fmt(float(g)))
    for mistake, value in ((likely() if callable(likely) else likely) or {}).items():
        if _matches(g, value, atol=atol, rtol=rtol):
            # NOTE: the mistake is a clause written in the test: "the scores are not divided by sqrt(d_k)"
            detail += _(". This is exactly what you get if {mistake}.").format(mistake=_(mistake))
            break
    raise AssertionError(detail)


def _matches(g: np.ndarray, value: Any, *, atol: float, rtol: float) -> bool:
    """Whether the learner's values ``g`` equal ``value`` within the tolerances."""
    v = _to_numpy(value).astype(np.float64)
    if v.shape != g.shape or np.isnan(v).any():
        return False
    with np.errstate(invalid="ignore", over="ignore"):
        return bool(np.all(np.where(np.isinf(v), g == v, np.abs(g - v) <= atol + rtol * np.abs(v))))


def check_equal(got: Any, expected: Any, *, name: str = "output") -> None:
    """Fail unless ``got == expected`` exactly (numbers, strings, tuples, dicts, int arrays)."""
    if hasattr(expected, "shape") and _shape(expected) != ():
        check_shape(got, _shape(expected), name=name)
        g, e = _to_numpy(got), _to_numpy(expected)
        if not np.array_equal(g, e):
            first = tuple(int(i) for i in np.argwhere(g != e)[0])
            raise AssertionError(
                _("{name}: differs at index {index}: expected {expected!r}, got {got!r} "
                  "({differ} of {size} entries differ)").format(
                    name=name, index=first, expected=e[first], got=g[first], differ=int((g != e).sum()), size=e.size))
        return
    if type(got) is not type(expected) and not (
        isinstance(got, (int, float, np.number)) and isinstance(expected, (int, float, np.number))
    ):
        raise AssertionError(_("{name}: expected a {kind} equal to {expected!r}, got a {got_kind}: {got!r:.120}").format(
            name=name, kind=type(expected).__name__, expected=expected, got_kind=_kind(got), got=got))
    if got != expected:
        raise AssertionError(_("{name}: expected {expected!r}, got {got!r:.200}").format(
            name=name, expected=expected, got=got))


def _show_nothing() -> None:
    """IPython's ``_ipython_display_``: the object displays itself, as nothing."""


def check_raises(
    exception: type[BaseException],
    fn: Callable[..., Any],
    *args: Any,
    match: str | None = None,
    name: str | None = None,
    **kwargs: Any,
) -> BaseException:
    """Fail unless ``fn(*args, **kwargs)`` raises ``exception`` (with ``match`` in its message).

    Returns the exception so a test can look at it further. A notebook cell that ends with this
    call shows nothing: the exception would otherwise be the cell's result, which nbgrader's
    Validate reads as a partial-credit score and warns about ("cannot be converted to a float").
    """
    label = name or getattr(fn, "__name__", _("the call"))
    try:
        fn(*args, **kwargs)
    except exception as err:
        if match is not None and not re.search(match, str(err)):
            raise AssertionError(
                _("{name}: raised {error} as it should, but its message {message!r} does not mention {match!r}").format(
                    name=label, error=type(err).__name__, message=str(err), match=match)) from None
        err._ipython_display_ = _show_nothing  # IPython displays neither it nor an execute_result
        return err
    except NotImplementedError:
        raise
    except Exception as err:  # noqa: BLE001 - we report the wrong exception
        raise AssertionError(_("{name}: expected {expected}, but it raised {error}: {message}").format(
            name=label, expected=exception.__name__, error=type(err).__name__, message=err)) from None
    raise AssertionError(_("{name}: expected {expected}, but nothing was raised").format(
        name=label, expected=exception.__name__))


def check_rows_sum_to_one(weights: Any, *, name: str = "attention weights", atol: float = 1e-5) -> None:
    """Fail unless every row (last axis) of ``weights`` is non-negative and sums to 1."""
    w = _to_numpy(weights).astype(np.float64)
    check_finite(weights, name=name)
    if (w < -atol).any():
        idx = tuple(int(i) for i in np.argwhere(w < -atol)[0])
        raise AssertionError(_("{name}: weights must be non-negative; entry {index} is {value:.6g}").format(
            name=name, index=idx, value=w[idx]))
    sums = w.sum(axis=-1)
    bad = np.abs(sums - 1.0) > atol
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            _("{name}: every row must sum to 1 over the last axis (the keys); row {index} sums to {total:.6g}").format(
                name=name, index=idx, total=sums[idx]))


def check_dropout(got: Any, undropped: Any, p: float, *, name: str = "output", atol: float = 1e-5,
                  slack: float = 0.15) -> None:
    """Fail unless ``got`` is ``undropped`` passed once through dropout with probability ``p``.

    Inverted dropout (``nn.Dropout`` in training mode) zeroes each entry with probability
    ``p`` and scales the others by ``1 / (1 - p)``. So every nonzero entry of ``got`` must
    equal ``undropped / (1 - p)``, and the fraction of zeros must lie strictly within
    ``slack`` of ``p``. Dropout applied twice, or not at all, or to the wrong tensor fails
    one or the other. ``got`` and ``undropped`` have the same shape; ``undropped`` has no
    zeros of its own.
    """
    check_shape(got, _shape(undropped), name=name)
    g = _to_numpy(got).astype(np.float64)
    kept = g != 0
    check_close(g[kept], _to_numpy(undropped).astype(np.float64)[kept] / (1 - p), atol=atol,
                name=_("{name}, its entries that dropout kept (each scaled by 1 / (1 - p) = {scale:.3g})").format(
                    name=name, scale=1 / (1 - p)))
    dropped = 1 - float(kept.mean())
    if not p - slack < dropped < p + slack:
        raise AssertionError(
            _("{name}: {dropped:.0%} of the entries are zero; dropout with p = {p} applied once zeroes about "
              "{p:.0%} of them").format(name=name, dropped=dropped, p=p))


def load_weights(module: Any, params: dict, *, name: str = "the module") -> Any:
    """Load the known weights ``params`` (name -> tensor, names as in ``module.state_dict()``)
    into ``module`` and return it; fail, saying why, unless every name of ``params`` is a
    parameter or buffer of ``module`` with that shape, and every parameter of ``module`` is
    among them (a parameter left out would keep a random value).

    Buffers of ``module`` that ``params`` does not name are allowed and keep their values: a
    specification names the parameters a module must have, not every tensor it may hold.
    """
    given = dict(params)
    own = [parameter_name for parameter_name, _ in module.named_parameters()]
    try:
        result = module.load_state_dict(given, strict=False)
    except RuntimeError as err:  # a shape that differs; load_state_dict names it
        raise AssertionError(_("{name}: could not load the known weights: {error}").format(name=name, error=err)) from None
    unexpected = sorted(result.unexpected_keys)
    if unexpected:
        raise AssertionError(
            _("{name}: could not load the known weights: it has no parameter or buffer named {unexpected} "
              "(it has the parameters {own})").format(
                name=name, unexpected=", ".join(unexpected), own=", ".join(sorted(own)) or _("none")))
    left_out = sorted(set(own) - set(given))
    if left_out:
        raise AssertionError(
            _("{name}: it has parameters that the specification does not name: {left_out} "
              "(the known weights are {given})").format(
                name=name, left_out=", ".join(left_out), given=", ".join(sorted(given))))
    return module


def check_choice(answer: Any, choices: str, *, name: str) -> str:
    """Fail unless ``answer`` is one letter among ``choices`` (case-insensitive); return it lower-cased."""
    if not isinstance(answer, str) or answer.strip().lower() not in choices.lower():
        raise AssertionError(_("{name}: the answer must be one of {choices} (a string), got {answer!r}").format(
            name=name, choices=", ".join(repr(c) for c in choices), answer=answer))
    return answer.strip().lower()


def check_own_code(answer: Any, *, name: str) -> None:
    """Fail when the exercise ``name`` is the course's own solution (a function or class of
    ``attention_course``) instead of code written in the notebook; and, from this call on,
    whenever ``answer``'s code calls one of the library functions or classes that the
    exercise's docstring forbids ("Do not call ...": they would do its whole job), such as
    ``torch.nn.functional.layer_norm`` in a ``LayerNorm``; and at once when its code never calls an
    exercise it must be built on (``TiledAttention``'s backward: ``tiled_attention_backward``).

    This catches the plain import and the usual shortcuts in a learner's kernel. The grader
    does not depend on it: while it grades a chapter, that chapter's solutions are not in its
    package at all, and it finds the shortcuts on its own (a scan of the code, and the same
    trip-wire in the student's process)."""
    module = getattr(answer, "__module__", None)
    if isinstance(module, str) and module.split(".")[0] == "attention_course":
        raise AssertionError(
            _("{name} is {solution}, the course's solution, not your code: write {name} yourself in its cell. "
              "An exercise answered with the course's solution earns no points, and the grader's package for "
              "this chapter does not contain it.").format(
                name=name, solution=f"{module}.{getattr(answer, '__qualname__', name)}"))
    from attention_course import forbidden, shortcuts  # here: chapter 1's kernel need not import them otherwise

    shortcuts.guard(answer, name, forbidden.FORBIDDEN.get(name, ()), forbidden.CALLS.get(name, ()))


__all__ = [
    "check_type",
    "check_shape",
    "check_dtype",
    "check_device",
    "check_finite",
    "check_close",
    "check_equal",
    "check_raises",
    "check_rows_sum_to_one",
    "check_dropout",
    "check_choice",
    "check_own_code",
    "load_weights",
]

