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

A list of names is always one name short, so three classes are refused whatever their names
(issue 44): starting a thread, a process or an executor, or handing one work, while an exercise's
own code runs, and a thread the notebook's code started that still runs then
(:data:`CONCURRENCY`: the dispatcher's watch is per thread); compiling code (:data:`COMPILED`:
TorchScript, ``torch.compile``, a C extension); and, where the watch is on (an exercise whose list
names a computation), any dispatcher operation off the building blocks (:data:`OPERATIONS`). A call
is charged to the innermost exercise whose own code runs (:func:`charged`), and counts where that
exercise forbids it (:func:`forbids`).

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

#: the calls that start a thread or a process (or hand work to one): forbidden in every exercise
#: while its own code runs, since the watch below sees only the thread that runs the exercise;
#: the threads the notebook's code started before are refused too while it runs (:func:`helpers_alive`)
CONCURRENCY = ("threading.Thread.start", "_thread.start_new_thread", "os.fork", "os.forkpty", "os.posix_spawn",
               "os.posix_spawnp", "os.system", "os.popen", "subprocess.Popen", "multiprocessing.process.BaseProcess.start",
               "concurrent.futures.thread.ThreadPoolExecutor.submit",
               "concurrent.futures.process.ProcessPoolExecutor.submit")
#: the calls that compile code which then runs out of the watch's sight: forbidden in every exercise
COMPILED = ("torch.jit.script", "torch.jit.trace", "torch.jit.trace_module", "torch.jit.CompilationUnit",
            "torch.jit.load", "torch.compile", "torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline",
            "ctypes.CDLL", "cffi.FFI")
_ALWAYS = frozenset(CONCURRENCY + COMPILED)
_THREADS = ("threading.Thread.start", "_thread.start_new_thread", "concurrent.futures.thread.ThreadPoolExecutor.submit")

#: The dispatcher's operations an exercise's own code may run where the watch is on (an exercise
#: whose list names a computation, :data:`COMPUTATIONS`): every elementwise operation (PyTorch's tag
#: ``pointwise``) and reduction (tag ``reduction``), and these families, measured on the solutions
#: and every correct variant in tests/mutants/ and widened to whole families so that another honest
#: style passes too. Any other operation (a fused or composite one such as ``aten::logcumsumexp``
#: or ``aten::_sparse_log_softmax``) is refused by default, named; an entry of the exercise's own
#: list is refused through its computation however listed here. Names without ``aten::``; an
#: in-place form (``name_``) goes with its name.
OPERATIONS: frozenset[str] = frozenset("""
    view _unsafe_view reshape _reshape_alias view_as expand expand_as permute transpose t unsqueeze squeeze select
    slice narrow split split_with_sizes chunk unbind alias detach lift_fresh lift_fresh_copy as_strided diagonal
    movedim flatten unflatten contiguous clone _to_copy to copy flip roll repeat repeat_interleave tile unfold diag
    diag_embed broadcast_to broadcast_tensors tril triu tril_indices triu_indices meshgrid
    view_as_complex view_as_real complex polar real imag
    empty empty_like empty_strided zeros zeros_like ones ones_like full full_like new_empty new_empty_strided new_full
    new_zeros new_ones arange linspace logspace eye scalar_tensor randn rand randint randperm randn_like rand_like
    randint_like normal uniform bernoulli multinomial fill zero
    sum mean amax amin max min aminmax var std var_mean std_mean prod norm linalg_vector_norm argmax argmin all any
    cumsum cumprod cummax cummin count_nonzero sort argsort topk median kthvalue diff trace
    mm bmm addmm addbmm baddbmm addmv mv dot vdot matmul einsum tensordot outer ger linear kron negative floor_divide
    index index_put _index_put_impl index_select index_add index_copy index_fill gather scatter scatter_add
    masked_fill masked_select masked_scatter take_along_dim nonzero where cat stack hstack vstack _local_scalar_dense
    item equal allclose isclose searchsorted bucketize unique _unique2
    _softmax softmax _log_softmax log_softmax layer_norm native_layer_norm dropout native_dropout embedding
    nll_loss nll_loss_forward nll_loss2d_forward cross_entropy_loss
""".split())

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
    "torch.special.log_softmax": _LOG_SOFTMAX, "torch.Tensor.log_softmax": _LOG_SOFTMAX, "torch.nn.LogSoftmax": _LOG_SOFTMAX,
    "torch.logsumexp": ("aten::logsumexp",), "torch.special.logsumexp": ("aten::logsumexp",),
    "torch.Tensor.logsumexp": ("aten::logsumexp",),
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
        if entry in CONCURRENCY:
            return _started(entry, function, args, kwargs)
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
    entries += _PRIVATE_CALLS + CONCURRENCY + COMPILED
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
    operation ``func`` (an OpOverload) does, and ``(name, name)`` when ``func`` is not one of the
    building blocks (:func:`listed`). Looked up once per operation."""
    found = _SEEN_OPS.get(func)
    if found is None:
        name = func._schema.name
        found = tuple((entry, name) for pattern, entries in sorted(_OPERATIONS.items())
                      if name == pattern or (pattern.endswith("*") and name.startswith(pattern[:-1]))
                      for entry in sorted(entries))
        if not listed(func):
            found += ((name, name),)
        _SEEN_OPS[func] = found
    return found


def listed(func) -> bool:
    """Whether the dispatcher's operation ``func`` (an OpOverload) is one of :data:`OPERATIONS`'
    building blocks: elementwise, a reduction, or of a listed family (its in-place form too)."""
    torch = sys.modules["torch"]
    name = func._schema.name.partition("::")[2]
    tags = getattr(func, "tags", ())
    return (torch.Tag.pointwise in tags or torch.Tag.reduction in tags or name in OPERATIONS
            or (name.endswith("_") and name[:-1] in OPERATIONS))


def watched(entries: Iterable[str]) -> bool:
    """Whether an exercise with the forbidden ``entries`` runs under the watch: its list names a
    computation of the dispatcher (:data:`COMPUTATIONS`), so an operation off :data:`OPERATIONS`
    is refused in it too."""
    return any(route.startswith("aten::") for entry in entries for route in COMPUTATIONS.get(entry, ()))


def forbids(entries: Iterable[str], entry: str) -> bool:
    """Whether an exercise whose list is ``entries`` forbids ``entry``: one of its list, PyTorch's
    private entry points, a thread, process or compiler (:data:`CONCURRENCY`, :data:`COMPILED`:
    every exercise), or an operation off the building blocks (``aten::name``) where it is watched."""
    return (entry in entries or entry == PRIVATE or entry in _ALWAYS
            or (entry.startswith("aten::") and watched(entries)))


def kind(entry: str) -> str:
    """How ``entry`` is refused, for the message: "private", "concurrency", "compiled", "unlisted"
    (an operation off :data:`OPERATIONS`) or "listed" (an entry of the exercise's list)."""
    if entry == PRIVATE:
        return "private"
    if entry in CONCURRENCY:
        return "concurrency"
    if entry in COMPILED:
        return "compiled"
    return "unlisted" if entry.startswith("aten::") else "listed"


# the threads and processes the notebook's own code started: (what started it, a test of life)
_HELPERS: list[tuple[str, Callable[[], bool]]] = []
# the modules of the machinery that starts threads and processes: a start is the notebook's when the
# nearest frame outside them is the notebook's own code (``__main__``): ThreadPoolExecutor.submit from
# a cell is, a thread that tqdm starts for its progress bar is not
_MACHINERY = ("threading", "_thread", "concurrent", "multiprocessing", "subprocess", "os", "queue", "asyncio")


def _notebooks(frame) -> bool:
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.split(".")[0] not in _MACHINERY and name != "attention_course.shortcuts":
            return name == "__main__"
        frame = frame.f_back
    return False


def _started(entry: str, function, args, kwargs):
    """Run the start ``function`` of ``entry``; when the notebook's own code asked for a thread, keep a
    test of its life for :func:`helpers_alive`. (A process the notebook started before is not: it
    shares no memory with the exercise, and the ways to hand it work, a pipe, a file, ``subprocess``,
    are refused by the grader's scan in an exercise's code.)"""
    if entry not in _THREADS or not _notebooks(sys._getframe(2)):
        return function(*args, **kwargs)
    if entry == "_thread.start_new_thread":
        running = [True]
        target, rest = args[0], args[1:]

        def run(*a, **k):
            try:
                return target(*a, **k)
            finally:
                running[0] = False

        _HELPERS.append((entry, lambda: running[0]))
        return function(run, *rest, **kwargs)
    result = function(*args, **kwargs)
    if entry == "threading.Thread.start":
        _HELPERS.append((entry, args[0].is_alive))
    else:  # an executor's work item
        _HELPERS.append((entry, lambda: not result.done()))
    return result


def helpers_alive() -> str | None:
    """The entry that started a thread of the notebook's own code which still runs (its work would run
    out of the watch's sight while an exercise waits for it), or None."""
    _HELPERS[:] = [(entry, alive) for entry, alive in _HELPERS if alive()]
    return _HELPERS[0][0] if _HELPERS else None


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
             "unlisted": gettext("{name} runs {via}, an operation of PyTorch which is not one of the building blocks an "
                                 "exercise's own code may use (elementwise arithmetic, reductions, matrix products, "
                                 "indexing, views, tensor creation): any other operation may do the exercise's whole "
                                 "job, so it is refused unless the course lists it; write {name} with those building "
                                 "blocks; an exercise that runs it earns no points."),
             "concurrency": gettext("{name} calls {entry}, which starts a thread or a process or hands it work (or a "
                                    "thread the notebook started still runs): the checks watch only the "
                                    "thread that runs the exercise, so work done elsewhere cannot be told from a "
                                    "library's; write {name} so that its own code does its work where it runs; an "
                                    "exercise that does so earns no points."),
             "compiled": gettext("{name} calls {entry}, which compiles code (TorchScript, torch.compile or a C "
                                 "extension) that runs where the checks cannot see what it computes: write {name} in "
                                 "Python with PyTorch's public building blocks; an exercise that does so earns no "
                                 "points."),
             "missing": gettext("{name} does not call {entry}, which its docstring says it is built on: its result "
                                "must come from your {entry}, not from another computation; an exercise that does not "
                                "call it earns no points."),
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
    """The exercise that answers for ``entry`` running at ``frame``: the innermost on the stack whose
    own code (``exercises``: name -> (its entries, its code objects)) is running, whether or not it
    forbids ``entry`` (:func:`forbids` decides: a log-space ``update_online_softmax`` may call
    ``torch.logsumexp`` inside an ``online_softmax`` that may not); of several whose code that frame
    is (a class and a subclass of the notebook), one that forbids it. None when no exercise's own
    code is on the stack. An exercise built on another that took the shortcut (``TiledAttention``
    on ``tiled_attention_forward``) does not answer for it."""
    depth = 0
    while frame is not None and depth < 500:
        owners = [name for name, (_, codes) in exercises.items() if frame.f_code in codes]
        if owners:
            return next((name for name in owners if forbids(exercises[name][0], entry)), owners[0])
        frame, depth = frame.f_back, depth + 1
    return None


def _on_call_in_kernel(entry: str, via: str | None = None) -> None:
    name = charged(entry, _GUARDED, sys._getframe(2))
    if name is not None and forbids(_GUARDED[name][0], entry):
        how = kind(entry)
        how = how if how != "listed" else "calls" if via is None else "reaches"
        raise AssertionError(sentence(name, entry, how, via))


def _watched(function, name: str):
    """``function`` (of the exercise ``name``) run under :func:`watching` (a function already so
    wrapped: itself), refused while a thread the notebook started runs (:func:`helpers_alive`)."""
    if getattr(function, "__watched__", None) is not None:
        return function

    @functools.wraps(function)
    def watched(*args, **kwargs):
        helper = helpers_alive()
        if helper is not None:
            raise AssertionError(sentence(name, helper, "concurrency"))
        with watching():
            return function(*args, **kwargs)

    watched.__watched__ = function
    return watched


def _watch_answer(answer, namespace: dict | None, name: str) -> None:
    """From now on ``answer``'s own code runs under :func:`watching`: a function through the
    notebook's names bound to it, a class through its own methods (and its bases' of the notebook)."""
    if type(answer) is types.FunctionType:
        if namespace is not None:
            for key, value in list(namespace.items()):
                if value is answer:
                    namespace[key] = _watched(answer, name)
        return
    module = answer.__dict__.get("__module__")
    for klass in answer.__mro__:
        if klass.__dict__.get("__module__") != module:
            continue
        for key, value in list(klass.__dict__.items()):
            if type(value) is types.FunctionType and not (key.startswith("__") and key != "__init__"
                                                           and key != "__call__"):
                setattr(klass, key, _watched(value, name))
            elif isinstance(value, (staticmethod, classmethod)) and type(value.__func__) is types.FunctionType:
                setattr(klass, key, type(value)(_watched(value.__func__, name)))


def _names_used(codes: set, namespace: dict | None) -> set[str]:
    """The global names ``codes`` read, and those of the notebook's functions they reach by name."""
    names: set[str] = set()
    pending = list(codes)
    seen: set = set()
    while pending:
        code = pending.pop()
        if code in seen:
            continue
        seen.add(code)
        names.update(code.co_names)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                pending.append(const)
        for used in code.co_names:
            value = (namespace or {}).get(used)
            value = getattr(value, "__watched__", value)
            if type(value) is types.FunctionType and value.__module__ == "__main__":
                pending.append(value.__code__)
    return names


def guard(answer, name: str, entries: Iterable[str], calls: Iterable[str] = ()) -> None:
    """In the learner's kernel: from now on, a call of one of ``entries`` made while
    ``answer``'s own code runs raises ``AssertionError`` naming it. Fails at once when
    ``answer`` is (or derives from) one of them, or when its own code (and the notebook's
    functions it calls) never names an exercise of ``calls``, which it must be built on
    (``TiledAttention``'s backward on ``tiled_attention_backward``). Does nothing for anything
    but a function or class written in the notebook."""
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
    used = _names_used(codes, namespace)
    unanswered = "NotImplementedError" in used  # the notebook's stub, not written yet: its tests fail on their own
    for other in calls if not unanswered else ():
        if other not in used:
            raise AssertionError(sentence(name, other, "missing"))
    _GUARDED[name] = (entries, codes)
    listen(_on_call_in_kernel)
    helper = helpers_alive()
    if helper is not None:
        raise AssertionError(sentence(name, helper, "concurrency"))
    if kind is not functools.partial and watched(entries):
        _watch_answer(answer, namespace, name)
