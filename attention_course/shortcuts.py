"""Trip-wires on the library calls that would do an exercise's whole job.

Each exercise's solution cell lists, in its metadata, the library entry points it may not
call (``"forbidden"``: full dotted names such as ``torch.nn.functional.layer_norm``;
:mod:`attention_course.forbidden` is the table ``make release`` writes from them). This
module puts a thin wrapper around each such callable, in the module or class that holds it,
so that a call through any route (the plain name, an alias imported before or after, a
``getattr`` with a built string, a helper function) reaches the wrapper, which tells the
listeners and then does exactly what the original does. A class is wrapped by its
``__init__``: building one is calling it.

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
import types
from typing import Callable, Iterable

from attention_course.i18n import gettext

# entry -> (the original object, what now stands in its place: a wrapper, or the class itself)
_ARMED: dict[str, tuple[object, object]] = {}
_PENDING: set[str] = set()  # entries whose module is not imported yet
_LISTENERS: list[Callable[[str], None]] = []
_arming = False
_original_import = None


def _fire(entry: str) -> None:
    for listener in list(_LISTENERS):
        listener(entry)


def listen(listener: Callable[[str], None]) -> None:
    """Call ``listener(entry)`` whenever an armed entry is called (once per listener)."""
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
    """Wrap ``entries`` now where their module is imported, else as soon as it is."""
    global _original_import
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
                if type(value) is types.FunctionType:
                    _codes(value.__code__, found)
                    namespace = namespace or value.__globals__
    return found, namespace


_GUARDED: dict[str, tuple[frozenset, set]] = {}


def sentence(name: str, entry: str, how: str) -> str:
    """The one sentence a learner reads when exercise ``name`` used ``entry``."""
    words = {"calls": gettext("{name} calls {entry}, which does this exercise's whole job: write {name} with your own "
                        "code (its docstring says which calls are not allowed); an exercise that calls {entry} "
                        "earns no points."),
             "is": gettext("{name} is {entry}, which does this exercise's whole job: write {name} with your own code "
                     "(its docstring says which calls are not allowed); an exercise that calls {entry} earns no "
                     "points."),
             "is built on": gettext("{name} is built on {entry}, which does this exercise's whole job: write {name} with "
                              "your own code (its docstring says which calls are not allowed); an exercise that "
                              "calls {entry} earns no points.")}
    return words[how].format(name=name, entry=entry)


def _on_call_in_kernel(entry: str) -> None:
    frame, on_stack = sys._getframe(2), set()
    while frame is not None and len(on_stack) < 500:
        on_stack.add(frame.f_code)
        frame = frame.f_back
    for name, (entries, codes) in _GUARDED.items():
        if entry in entries and codes & on_stack:
            raise AssertionError(sentence(name, entry, "calls"))


def guard(answer, name: str, entries: Iterable[str]) -> None:
    """In the learner's kernel: from now on, a call of one of ``entries`` made while
    ``answer``'s own code runs raises ``AssertionError`` naming it. Fails at once when
    ``answer`` is (or derives from) one of them. Does nothing for anything but a function or
    class written in the notebook."""
    entries = frozenset(entries)
    kind = type(answer)  # not isinstance: the grader's stand-in for a student's object is none of these
    if not entries or not (kind is types.FunctionType or kind is functools.partial or issubclass(kind, type)):
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
