"""Trip-wires on the library calls that would do an exercise's whole job.

Each exercise's solution cell lists, in its metadata, the library entry points it may not
call (``"forbidden"``: full dotted names such as ``torch.nn.functional.layer_norm``;
:mod:`attention_course.forbidden` is the table ``make release`` writes from them). This
module puts a thin wrapper around each such callable, in the module or class that holds it,
so that a call through any route (the plain name, an alias imported before or after, a
``getattr`` with a built string, a helper function) reaches the wrapper, which tells the
listeners and then does exactly what the original does. A class is wrapped by its
``__init__``: building one is calling it.

A name is only one route to a computation: ``x.logsumexp(-1)`` is ``torch.logsumexp`` under
another name, and ``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu`` is PyTorch's own
fused attention without ``scaled_dot_product_attention`` in sight. So an entry stands for the
computation (:data:`COMPUTATIONS`): the operations PyTorch's dispatcher runs for it, seen by a
``TorchDispatchMode`` whatever Python route reached them (:func:`watching`), and the Python
function every route to it passes through (the autograd engine's entry for
``torch.autograd.grad``). And PyTorch's private entry points (``torch.ops``, ``torch._C``, names
that start with an underscore) are no exercise's building blocks: a call through ``torch.ops``
made by the notebook's own code while an exercise runs counts as :data:`PRIVATE`, in every
exercise (the grader's scan refuses the other private names).

Two listeners use it:

* the learner's kernel (:func:`guard`, called by :func:`attention_course.checks.check_own_code`):
  a forbidden call made while the exercise's own code is running raises ``AssertionError``
  with one sentence, so the exercise's first visible test fails and says why;
* the grader's sandboxed student process (``autograder.runner``), which records the calls
  made while a test calls into an exercise and reports them to the judge.

Neither is a proof: code in the same process can undo a wrapper. The grader's static scan of
the submission (``autograder.scan``) is the other layer.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import sys
import threading
import types
from typing import Callable, Iterable

from attention_course.i18n import gettext

# entry -> (the original object, what now stands in its place: a wrapper, or the class itself)
_ARMED: dict[str, tuple[object, object]] = {}
_PENDING: set[str] = set()  # entries whose module is not imported yet
_LISTENERS: list[Callable[..., None]] = []
_arming = False
_original_import = None

#: the pseudo-entry of PyTorch's private entry points, forbidden in every exercise
PRIVATE = "torch.ops"

_FUSED_ATTENTION = ("aten::_scaled_dot_product_*", "aten::_flash_attention_*", "aten::_efficient_attention_*",
                    "aten::_cudnn_attention_*")
_SOFTMAX = ("aten::_softmax",)
_LOG_SOFTMAX = ("aten::_log_softmax",)
_LAYER_NORM = ("aten::native_layer_norm",)
_AUTOGRAD = ("torch.autograd.graph._engine_run_backward",)
#: entry -> the computation it stands for: the dispatcher's operations that do its job (``aten::name``;
#: a trailing ``*``: every operation whose name starts so, PyTorch's private fused kernels and their
#: backward operations), and the Python functions that every route to it calls (a dotted name).
#: Only what no honest answer of an exercise that forbids the entry can run: the operations of the
#: entry's own job, never the arithmetic it is made of.
COMPUTATIONS: dict[str, tuple[str, ...]] = {
    "torch.softmax": _SOFTMAX, "torch.special.softmax": _SOFTMAX, "torch.nn.functional.softmax": _SOFTMAX,
    "torch.Tensor.softmax": _SOFTMAX, "torch.nn.Softmax": _SOFTMAX,
    "torch.log_softmax": _LOG_SOFTMAX, "torch.nn.functional.log_softmax": _LOG_SOFTMAX,
    "torch.logsumexp": ("aten::logsumexp",), "torch.special.logsumexp": ("aten::logsumexp",),
    "torch.nn.functional.scaled_dot_product_attention": _FUSED_ATTENTION,
    "torch.nn.MultiheadAttention": ("aten::_native_multi_head_attention",),
    "torch.nn.functional.multi_head_attention_forward": ("aten::_native_multi_head_attention",),
    "torch.nn.functional.layer_norm": _LAYER_NORM, "torch.nn.LayerNorm": _LAYER_NORM, "torch.layer_norm": _LAYER_NORM,
    "torch.cdist": ("aten::_cdist_forward", "aten::_euclidean_dist"),
    "torch.nn.TransformerEncoderLayer": ("aten::_transformer_encoder_layer_fwd",),
    "torch.autograd.grad": _AUTOGRAD, "torch.Tensor.backward": _AUTOGRAD,
}
_STANDS_FOR: dict[str, set[str]] = {}  # an armed route of a computation -> the entries it stands for
_OPERATIONS: dict[str, set[str]] = {}  # an operation's name or prefix (with "*") -> the armed entries it does
_SEEN_OPS: dict[object, tuple[tuple[str, str], ...]] = {}  # an OpOverload -> ((entry, operation), ...)


def _fire(entry: str, via: str | None = None) -> None:
    """Tell the listeners that ``entry`` (or its computation, reached as ``via``) runs."""
    for listener in list(_LISTENERS):
        listener(entry, via)


def _fire_route(route: str) -> None:
    for entry in sorted(_STANDS_FOR.get(route, ())):
        _fire(entry, route)


def listen(listener: Callable[..., None]) -> None:
    """Call ``listener(entry, via)`` whenever an armed entry is called (``via`` None) or its
    computation runs by another route (``via``: the operation or function seen), once per listener."""
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)


def _locate(entry: str):
    """``(owner, attribute, original)`` of ``entry`` if the module holding it is imported,
    else None. Never imports a top-level package."""
    parts = entry.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is not None:
            break
    else:
        return None
    owner = module
    try:
        for name in parts[cut:-1]:
            owner = getattr(owner, name)
        if isinstance(owner, type):
            original = inspect.getattr_static(owner, parts[-1])
        else:
            original = getattr(owner, parts[-1])
    except AttributeError:
        return None
    return owner, parts[-1], original


def _wrapper(entry: str, function):
    @functools.wraps(function)
    def tripwire(*args, **kwargs):
        if entry in _PRIVATE_CALLS:
            if sys._getframe(1).f_globals.get("__name__") == "__main__":
                _fire(PRIVATE, f"torch.ops.{args[0]}")
        elif entry in _STANDS_FOR:
            _fire_route(entry)
        else:
            _fire(entry)
        return function(*args, **kwargs)

    tripwire.__forbidden_entry__ = entry
    return tripwire


def _arm_one(entry: str) -> bool:
    located = _locate(entry)
    if located is None:
        return False
    owner, attribute, original = located
    if getattr(original, "__forbidden_entry__", None) == entry:  # armed before, by another copy of this module
        _ARMED[entry] = (original, original)
        return True
    if isinstance(original, type):
        init = original.__init__
        if getattr(init, "__forbidden_entry__", None) != entry:
            original.__init__ = _wrapper(entry, init)
        _ARMED[entry] = (original, original)
        return True
    if isinstance(original, (staticmethod, classmethod)):
        stands = _wrapper(entry, original.__func__)
        replacement, original = type(original)(stands), original.__func__
    elif callable(original):
        replacement = stands = _wrapper(entry, original)
    else:
        return False
    try:
        setattr(owner, attribute, replacement)
    except (AttributeError, TypeError):
        return False
    if isinstance(owner, types.ModuleType):
        # the same function exported under another module of the package (torch._C, say)
        top = owner.__name__.split(".")[0]
        for name, module in list(sys.modules.items()):
            if module is owner or not (name == top or name.startswith(top + ".")):
                continue
            space = getattr(module, "__dict__", None)
            if not isinstance(space, dict):
                continue
            for key, value in list(space.items()):
                if value is original:
                    try:
                        setattr(module, key, replacement)
                    except (AttributeError, TypeError):
                        pass
    _ARMED[entry] = (original, stands)
    return True


def arm_pending() -> None:
    """Arm every requested entry whose module has been imported since."""
    global _arming
    if not _PENDING or _arming:
        return
    _arming = True
    try:
        for entry in sorted(_PENDING):
            if _arm_one(entry):
                _PENDING.discard(entry)
    finally:
        _arming = False


_depth = 0  # imports under way: a package is armed once its outermost import is done


def _import(*args, **kwargs):
    global _depth
    _depth += 1
    try:
        module = _original_import(*args, **kwargs)
    finally:
        _depth -= 1
    if _PENDING and _depth == 0:
        arm_pending()  # before ``from x import y`` reads y from the module
    return module


def arm(entries: Iterable[str]) -> None:
    """Wrap ``entries`` now where their module is imported, else as soon as it is; with them the
    routes of their computations (:data:`COMPUTATIONS`), and the private ``torch.ops``."""
    global _original_import
    entries = list(entries)
    for entry in entries:
        for route in COMPUTATIONS.get(entry, ()):
            if route.startswith("aten::"):
                _OPERATIONS.setdefault(route, set()).add(entry)
                _SEEN_OPS.clear()
            else:
                _STANDS_FOR.setdefault(route, set()).add(entry)
                entries.append(route)
    entries += _PRIVATE_CALLS
    _PENDING.update(e for e in entries if e not in _ARMED)
    arm_pending()
    if _PENDING and _original_import is None:
        _original_import = builtins.__import__
        builtins.__import__ = _import


def rebind(namespace: dict) -> None:
    """Replace, in ``namespace`` (a module's or a notebook's globals), every name bound to an
    armed original (``from torch.nn.functional import layer_norm as ln`` run before the entry
    was armed) with what stands in its place."""
    replacements = {id(original): stands for original, stands in _ARMED.values() if original is not stands}
    if not replacements:
        return
    for key, value in list(namespace.items()):
        stands = replacements.get(id(value))
        if stands is not None:
            namespace[key] = stands


#: the calls of ``torch.ops`` (an operation packet, one overload): made by the notebook's own code
#: (a frame of ``__main__``), they fire :data:`PRIVATE`; PyTorch's own calls of them, from its modules, do not
_PRIVATE_CALLS = ("torch._ops.OpOverloadPacket.__call__", "torch._ops.OpOverload.__call__")


def _operations(func) -> tuple[tuple[str, str], ...]:
    """``((entry, operation name), ...)``: the armed entries whose computation the dispatcher's
    operation ``func`` (an OpOverload) does."""
    found = _SEEN_OPS.get(func)
    if found is None:
        name = func._schema.name
        found = tuple((entry, name) for pattern, entries in sorted(_OPERATIONS.items())
                      if name == pattern or (pattern.endswith("*") and name.startswith(pattern[:-1]))
                      for entry in sorted(entries))
        _SEEN_OPS[func] = found
    return found


_watch = None  # the TorchDispatchMode class, made when torch is there
_watching = threading.local()


def watching():
    """A context in which every operation PyTorch's dispatcher runs is looked up in the armed
    computations (:data:`COMPUTATIONS`), and each that does an armed entry's job fires it (with
    the operation's name): the route that reached it does not matter. Entered once per thread
    (an inner ``with`` does nothing more). Costs about 15 µs per operation while it is on, so
    the kernel turns it on only while an exercise's own code runs, the grader while a test's
    request into the student's objects runs."""
    global _watch
    if _watch is None:
        from torch.utils._python_dispatch import TorchDispatchMode

        class Watch(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                for entry, operation in _operations(func):
                    _fire(entry, operation)
                return func(*args, **(kwargs or {}))

        _watch = Watch
    return _Watching()


class _Watching:
    def __enter__(self):
        depth = getattr(_watching, "depth", 0)
        _watching.depth = depth + 1
        self.mode = None
        if depth == 0 and _OPERATIONS:
            self.mode = _watch()
            self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        _watching.depth -= 1
        if self.mode is not None:
            self.mode.__exit__(*exc)
        return False


# ----------------------------------------------------------------------------- the kernel


def _codes(code: types.CodeType, found: set) -> None:
    found.add(code)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _codes(const, found)


def own_code(answer) -> tuple[set, dict | None]:
    """The code objects of ``answer``'s own source (a function of the notebook, or every
    method of a class and its bases written in the same module), and the globals they read.
    Empty for anything else (a stand-in of the grader, a library object)."""
    found: set = set()
    namespace = None
    kind = type(answer)  # not isinstance: a stand-in object may claim another class
    if kind is types.FunctionType:
        answer = getattr(answer, "__watched__", answer)
        _codes(answer.__code__, found)
        namespace = answer.__globals__
    elif issubclass(kind, type):
        module = answer.__dict__.get("__module__")
        for klass in answer.__mro__:
            if klass.__dict__.get("__module__") != module:
                continue
            for value in klass.__dict__.values():
                if isinstance(value, (staticmethod, classmethod)):
                    value = value.__func__
                if isinstance(value, property):
                    value = value.fget
                value = getattr(value, "__watched__", value)
                if type(value) is types.FunctionType:
                    _codes(value.__code__, found)
                    namespace = namespace or value.__globals__
    return found, namespace


_GUARDED: dict[str, tuple[frozenset, set]] = {}


def sentence(name: str, entry: str, how: str, via: str | None = None) -> str:
    """The one sentence a learner reads when exercise ``name`` used ``entry`` (its computation
    reached as ``via``, when ``how`` is "reaches")."""
    words = {"private": gettext("{name} calls {via}, one of PyTorch's private entry points (torch.ops, torch._C and "
                                "any of PyTorch's names that start with an underscore), which no exercise may call: "
                                "write {name} with your own code and PyTorch's public functions; an exercise that "
                                "calls one earns no points."),
             "reaches": gettext("{name} runs {via}, PyTorch's own computation of {entry}, which does this exercise's "
                                "whole job whatever route calls it (a method of a tensor, torch.special, torch.ops, a "
                                "fused kernel): write {name} with your own code (its docstring says which calls are "
                                "not allowed); an exercise that calls {entry} earns no points."),
             "calls": gettext("{name} calls {entry}, which does this exercise's whole job: write {name} with your own "
                        "code (its docstring says which calls are not allowed); an exercise that calls {entry} "
                        "earns no points."),
             "is": gettext("{name} is {entry}, which does this exercise's whole job: write {name} with your own code "
                     "(its docstring says which calls are not allowed); an exercise that calls {entry} earns no "
                     "points."),
             "is built on": gettext("{name} is built on {entry}, which does this exercise's whole job: write {name} with "
                              "your own code (its docstring says which calls are not allowed); an exercise that "
                              "calls {entry} earns no points.")}
    return words[how].format(name=name, entry=entry, via=via)


def charged(entry: str, exercises: dict[str, tuple[Iterable[str], set]], frame) -> str | None:
    """The exercise that pays for ``entry`` running at ``frame``: the innermost on the stack whose
    own code (``exercises``: name -> (its entries, its code objects)) is running and which forbids
    ``entry`` (every exercise forbids :data:`PRIVATE`); None when none. An exercise built on
    another that took the shortcut (``TiledAttention`` on ``tiled_attention_forward``) does not."""
    depth = 0
    while frame is not None and depth < 500:
        for name, (entries, codes) in exercises.items():
            if frame.f_code in codes and (entry in entries or entry == PRIVATE):
                return name
        frame, depth = frame.f_back, depth + 1
    return None


def _on_call_in_kernel(entry: str, via: str | None = None) -> None:
    name = charged(entry, _GUARDED, sys._getframe(2))
    if name is not None:
        how = "private" if entry == PRIVATE else "calls" if via is None else "reaches"
        raise AssertionError(sentence(name, entry, how, via))


def _watched(function):
    """``function`` run under :func:`watching` (a function already so wrapped: itself)."""
    if getattr(function, "__watched__", None) is not None:
        return function

    @functools.wraps(function)
    def watched(*args, **kwargs):
        with watching():
            return function(*args, **kwargs)

    watched.__watched__ = function
    return watched


def _watch_answer(answer, namespace: dict | None) -> None:
    """From now on ``answer``'s own code runs under :func:`watching`: a function through the
    notebook's names bound to it, a class through its own methods (and its bases' of the notebook)."""
    if type(answer) is types.FunctionType:
        if namespace is not None:
            for key, value in list(namespace.items()):
                if value is answer:
                    namespace[key] = _watched(answer)
        return
    module = answer.__dict__.get("__module__")
    for klass in answer.__mro__:
        if klass.__dict__.get("__module__") != module:
            continue
        for key, value in list(klass.__dict__.items()):
            if type(value) is types.FunctionType and not (key.startswith("__") and key != "__init__"
                                                           and key != "__call__"):
                setattr(klass, key, _watched(value))
            elif isinstance(value, (staticmethod, classmethod)) and type(value.__func__) is types.FunctionType:
                setattr(klass, key, type(value)(_watched(value.__func__)))


def guard(answer, name: str, entries: Iterable[str]) -> None:
    """In the learner's kernel: from now on, a call of one of ``entries`` made while
    ``answer``'s own code runs raises ``AssertionError`` naming it. Fails at once when
    ``answer`` is (or derives from) one of them. Does nothing for anything but a function or
    class written in the notebook."""
    entries = frozenset(entries)
    kind = type(answer)  # not isinstance: the grader's stand-in for a student's object is none of these
    if not (kind is types.FunctionType or kind is functools.partial or issubclass(kind, type)):
        return
    arm(entries)
    armed = {id(obj): entry for entry, pair in _ARMED.items() if entry in entries for obj in pair}  # original or wrapper
    bases = answer.__mro__ if issubclass(kind, type) else (answer, getattr(answer, "func", None))
    for base in bases:
        if id(base) in armed:
            raise AssertionError(sentence(name, armed[id(base)], "is" if base is answer else "is built on"))
    codes, namespace = own_code(answer)
    if not codes:
        return
    if namespace is not None:
        rebind(namespace)
    _GUARDED[name] = (entries, codes)
    listen(_on_call_in_kernel)
    if kind is not functools.partial and any(
            route.startswith("aten::") for entry in entries for route in COMPUTATIONS.get(entry, ())):
        _watch_answer(answer, namespace)
