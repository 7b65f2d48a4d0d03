"""The library calls each exercise may not make, and the grader's static scan for them.

Each solution cell of ``solutions/`` may carry, beside ``nbgrader`` in its metadata, a key
``"forbidden"``: the full dotted names of the library entry points that would do the
exercise's whole job (``["torch.nn.functional.layer_norm", "torch.nn.LayerNorm"]``), the one
place a maintainer edits; the exercise's docstring names each in one sentence that starts
"Do not call" (``tests/test_shortcuts.py`` checks that the two agree). ``make release``
writes them all into ``attention_course/forbidden.py`` (``courseware/forbidden_table.py``),
which the learner's kernel reads; the grader takes them from the source notebook's cells
(:func:`autograder.assemble.judge_cells`).

:func:`scan` reads a submission's code (its solution cells and the cells it added) without
running it, and finds where an exercise's code reaches a forbidden entry: a name or an
attribute chain, resolved through the imports (``import torch.nn.functional as G``,
``from torch.nn import LayerNorm as LN``), plain aliases (``ln = F.layer_norm``), the helper
functions and classes the exercise uses (followed by name), and the indirections that hide a
name when their strings can be computed without running anything (``getattr`` with a string
built from literals, ``importlib.import_module``, ``__import__``, ``sys.modules[...]``,
``eval``/``exec``/``compile`` of a literal). An indirection whose string cannot be computed
so (``getattr(F, name)`` with ``name`` read at run time, ``globals()``) is refused in an
exercise's own code (``getattr(self, name)`` aside, listed as *unresolved* for the instructor, as
is any indirection outside the exercises). Beyond each exercise's list, the code of an exercise
may use only the building blocks (:func:`refused`: an allow-list of modules, of PyTorch's
operations and of a tensor's attributes), and must call the exercises its metadata's ``"calls"``
names. A
forbidden function's method of a tensor (``x.logsumexp(-1)`` for ``torch.logsumexp``) is the
function, and PyTorch's private entry points (``torch.ops``, ``torch._C``, any name with a part
that starts with an underscore: :func:`is_private`) are forbidden in every exercise, listed or not. Comments and strings that merely name an entry are not code and are never a hit; nor
is code outside the exercises (a scratch cell comparing an answer with PyTorch's).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import sys
import types

from autograder.catalogs import N_



# ----------------------------------------------------------------------------- the scan


@dataclasses.dataclass(frozen=True)
class Finding:
    exercise: str | None  # None: code outside every exercise with a list
    entry: str | None  # the forbidden entry reached; None for an unresolved indirection
    detail: str  # what was seen, in words, with the line
    cell: str  # the grade_id of the cell (or "cell-N" for an added one)
    # why it is refused (a key of VERDICTS): "listed" (the exercise's list), "private", "unlisted" (not one
    # of the building blocks an exercise may use, :func:`refused`), "concurrency", "compiled", "indirection",
    # "missing" (the exercise never calls an exercise its metadata's "calls" names: entry)
    kind: str = "listed"


#: the modules whose names an exercise's own code may use; any other (threading, subprocess, ctypes,
#: scipy, numba...) is refused, named
MODULES = frozenset({"math", "numpy", "torch", "attention_course", "typing", "dataclasses", "functools", "itertools",
                     "collections", "copy", "abc", "enum", "numbers", "warnings", "builtins"})
_CONCURRENCY_MODULES = frozenset({"threading", "_thread", "concurrent", "multiprocessing", "subprocess", "os", "posix",
                                  "asyncio", "signal", "sched"})
_COMPILED_MODULES = frozenset({"ctypes", "cffi", "numba", "cython", "Cython", "llvmlite", "jax", "triton", "tvm"})
#: parts of PyTorch an exercise's own code may use besides its top-level building blocks
_TORCH_PARTS = ("torch.nn", "torch.linalg", "torch.special", "torch.autograd.Function", "torch.autograd.function",
                "torch.Tensor", "torch.cuda.is_available", "torch.cuda.device_count", "torch.backends.mps.is_available")
_TORCH_COMPILED = ("torch.jit", "torch.compile", "torch.utils.cpp_extension", "torch.library", "torch.fx",
                   "torch.export", "torch.cuda.jiterator")
#: PyTorch's Python-level names an honest answer uses beside the dispatcher's building blocks
#: (attention_course.shortcuts.OPERATIONS, and every elementwise operation and reduction)
_TORCH_NAMES = frozenset("""
    Tensor Size Generator device dtype finfo iinfo no_grad enable_grad inference_mode set_grad_enabled is_grad_enabled
    tensor as_tensor from_numpy manual_seed get_default_dtype is_tensor is_floating_point result_type promote_types
    can_cast concat concatenate swapaxes swapdims moveaxis atleast_1d atleast_2d atleast_3d block_diag cartesian_prod
    split chunk unbind numel
""".split())
#: a tensor's own attributes an honest answer uses (its methods named like a building block count too)
_TENSOR_NAMES = frozenset("""
    shape dtype device ndim T mT H mH data grad requires_grad requires_grad_ is_leaf size dim numel nelement item tolist
    numpy to float double half bfloat16 long int bool short byte char cpu cuda type type_as contiguous is_contiguous
    view_as expand_as reshape_as new_tensor detach_ element_size stride is_cuda is_floating_point is_complex
    sum_to_size backward retain_grad values indices apply_ map_ random_ exponential_ layout
""".split())
#: attributes that reach the autograd graph's nodes or a function's insides: no answer needs them
_GRAPH = frozenset({"tofile", "grad_fn", "next_functions", "_execution_engine", "register_hook", "register_post_accumulate_grad_hook",
                    "__globals__", "__dict__", "__builtins__", "__code__", "__closure__", "__subclasses__", "__bases__",
                    "__base__", "__mro__", "__getattribute__", "__import__", "__loader__", "__spec__", "__wrapped__",
                    "__reduce__", "__reduce_ex__", "f_globals", "f_locals", "f_back", "gi_frame", "tb_frame",
                    "cr_frame", "data_ptr", "untyped_storage", "storage"})


def _torch():
    """PyTorch, imported here if it is not yet (a NumPy chapter's judge): what the student's code may use
    of it is read from it (its operations' tags, a tensor's attributes)."""
    import importlib

    return sys.modules.get("torch") or importlib.import_module("torch")


def _building_block(name: str) -> bool:
    """Whether ``name`` (a function of ``torch`` or a tensor's method) is one of the dispatcher's
    building blocks: a listed family, or an elementwise operation or a reduction of that name."""
    from attention_course.shortcuts import OPERATIONS

    if name in OPERATIONS or (name.endswith("_") and name[:-1] in OPERATIONS):
        return True
    torch = _torch()
    packet = getattr(torch.ops.aten, name, None)
    if packet is None or not hasattr(packet, "overloads"):
        return False
    tags = {tag for overload in packet.overloads() for tag in getattr(packet, overload).tags}
    return torch.Tag.pointwise in tags or torch.Tag.reduction in tags


def refused(dotted: str) -> str | None:
    """Why an exercise's own code may not use the library name ``dotted`` (a key of
    :data:`VERDICTS`), or None: only the modules of :data:`MODULES` may be used, of PyTorch only
    its building blocks (elementwise arithmetic, reductions, matrix products, indexing, views,
    creation: :func:`_building_block`), ``torch.nn``, ``torch.linalg``, ``torch.special`` and
    ``torch.autograd.Function``; of NumPy anything but a ufunc's whole-array reduce and its
    C interfaces. An entry of the exercise's own list is refused before this."""
    parts = dotted.split(".")
    root = parts[0]
    if root not in MODULES:
        return ("concurrency" if root in _CONCURRENCY_MODULES else "compiled" if root in _COMPILED_MODULES
                else "unlisted")
    if root == "numpy":
        if "ctypeslib" in parts or "f2py" in parts:
            return "compiled"
        return "unlisted" if set(parts[1:]) & {"reduce", "accumulate", "reduceat", "testing", "save", "savez",
                                                "savez_compressed", "load", "loadtxt", "savetxt", "genfromtxt",
                                                "fromfile", "memmap", "lib"} else None
    if root == "attention_course":  # another module reached through one of the course's (checks.torch.sparse)
        import importlib

        found = importlib.import_module(root)
        for cut, part in enumerate(parts[1:], start=2):
            inside = getattr(found, part, None)
            if inside is None and isinstance(found, types.ModuleType) and found.__name__.startswith(root):
                try:  # a module of the course's package (checks), imported here if not yet
                    inside = importlib.import_module(f"{found.__name__}.{part}")
                except ImportError:
                    inside = None
            found = inside
            if isinstance(found, types.ModuleType) and not found.__name__.startswith("attention_course"):
                return refused(".".join([found.__name__, *parts[cut:]]))
        return None
    if root != "torch" or len(parts) == 1:
        return None
    if (dotted + ".").startswith(tuple(p + "." for p in _TORCH_COMPILED)):
        return "compiled"
    if parts[1] in ("multiprocessing", "distributed"):
        return "concurrency"
    if dotted.startswith("torch.nn.attention"):  # flex_attention and the fused kernels' switches
        return "unlisted"
    if any(dotted == p or dotted.startswith(p + ".") for p in _TORCH_PARTS):
        if parts[1] == "Tensor" and len(parts) > 2:
            return None if _tensor_name(parts[2]) else "unlisted"
        return None
    name = parts[1]
    torch = _torch()
    value = getattr(torch, name, None)
    if name in _TORCH_NAMES or _building_block(name) or isinstance(value, (int, float, str, torch.dtype)):
        return None
    return "unlisted"


def _tensor_name(name: str) -> bool:
    """Whether a tensor's attribute ``name`` is one an exercise's own code may use."""
    return name not in _GRAPH and (name in _TENSOR_NAMES or name in _TORCH_NAMES or _building_block(name))


# builtins an indirection goes through (a rebinding such as ``g = getattr`` is followed)
_BUILTINS = {name: f"builtins.{name}" for name in
             ("getattr", "eval", "exec", "compile", "__import__", "vars", "globals", "locals", "open")}
_STRING_METHODS = {"lower", "upper", "strip", "lstrip", "rstrip", "replace", "join", "format"}


class _Code:
    """What the scan knows of a submission's names: aliases to dotted names, string constants,
    and the top-level definitions of the student's cells."""

    def __init__(self) -> None:
        # every dotted name a global may stand for (a name bound in several cells: all of them)
        self.aliases: dict[str, list[str]] = {name: [dotted] for name, dotted in _BUILTINS.items()}
        self.strings: dict[str, str] = {}
        self.defs: dict[str, list[tuple[ast.AST, str]]] = {}
        self.methods: set[str] = set()  # names of the methods the student's classes define

    def learn(self, tree: ast.AST, top_level_of: str | None) -> None:
        """Take the imports, aliases and string constants bound anywhere in ``tree``; with
        ``top_level_of`` (a cell's name), also its top-level definitions."""
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.bind(a.asname, [a.name])
                    else:
                        self.bind(a.name.split(".")[0], [a.name.split(".")[0]])
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    if a.name != "*":
                        self.bind(a.asname or a.name, [f"{node.module}.{a.name}"])
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                text = _evaluate(node.value, self.strings)
                if text is not None:
                    self.strings[node.targets[0].id] = text
        if top_level_of is None:
            return
        self.methods |= {f.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body
                         if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defs.setdefault(node.name, []).append((node, top_level_of))
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for target in getattr(node, "targets", None) or [node.target]:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            self.defs.setdefault(name.id, []).append((node, top_level_of))

    def bind(self, name: str, dotted: list[str]) -> None:
        known = self.aliases.setdefault(name, [])
        known.extend(d for d in dotted if d not in known)

    def settle(self) -> None:
        """Plain aliases (``ln = F.layer_norm``) once every import is known; a name the student
        defines with ``def`` or ``class`` is the student's own, never an alias."""
        for name, nodes in self.defs.items():
            for node, _ in nodes:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    self.bind(name, _Walk(self, None, None).dotted(node.value))
        for name, nodes in self.defs.items():
            if any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n, _ in nodes):
                self.aliases.pop(name, None)


def _evaluate(node: ast.AST, strings: dict[str, str]) -> str | None:
    """The string ``node`` computes, when literals alone decide it (no call of the student's)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return strings.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _evaluate(node.left, strings), _evaluate(node.right, strings)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                if value.format_spec is not None or value.conversion not in (-1, 115):
                    return None
                value = value.value
            part = _evaluate(value, strings)
            if part is None:
                return None
            parts.append(part)
        return "".join(parts)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        text = _evaluate(node.value, strings)
        bounds = [None if b is None else (b.value if isinstance(b, ast.Constant) and isinstance(b.value, int) else
                                          -b.operand.value if isinstance(b, ast.UnaryOp) and isinstance(b.op, ast.USub)
                                          and isinstance(b.operand, ast.Constant) else "?")
                  for b in (node.slice.lower, node.slice.upper, node.slice.step)]
        return None if text is None or "?" in bounds else text[slice(*bounds)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _STRING_METHODS:
        base = _evaluate(node.func.value, strings)
        if base is None or node.keywords:
            return None
        if node.func.attr == "join":
            if len(node.args) != 1 or not isinstance(node.args[0], (ast.List, ast.Tuple)):
                return None
            items = [_evaluate(e, strings) for e in node.args[0].elts]
            return None if None in items else base.join(items)
        args = [_evaluate(a, strings) for a in node.args]
        return None if None in args else getattr(base, node.func.attr)(*args)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str" and len(node.args) == 1:
        return _evaluate(node.args[0], strings)
    return None


def _object(dotted: str):
    """The object ``dotted`` names, found through the modules already imported here (nothing
    is imported: resolving a student's name never runs a package's import code); None if none."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is not None:
            break
    else:
        return None
    found = module
    for part in parts[cut:]:
        found = getattr(found, part, None)
        if found is None:
            return None
    return found


class _Walk:
    """One walk over the code that belongs to an exercise (or over everything), collecting
    the forbidden entries it reaches and the indirections it cannot resolve."""

    def __init__(self, code: _Code, entries: dict[str, object] | None, exercise: str | None):
        self.code, self.entries, self.exercise = code, entries or {}, exercise
        self.local_aliases: dict[str, list[str]] = {}
        self.shadowed: set[str] = set()  # parameters and local variables of the code walked
        self.hits: list[tuple[str, str, str, str]] = []  # (entry, detail, cell, kind)
        self.unresolved: list[tuple[str, str]] = []  # (detail, cell)
        self.extra: list[ast.AST] = []  # code found in literal strings given to exec / compile

    # ----- names
    def name(self, identifier: str) -> list[str]:
        if identifier in self.local_aliases:
            return self.local_aliases[identifier]
        return [] if identifier in self.shadowed else self.code.aliases.get(identifier, [])

    def dotted(self, node: ast.AST) -> list[str]:
        """Every full dotted name ``node`` may stand for, as far as the scan can tell (a name
        bound in several cells may stand for each); empty when it cannot tell."""
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.Attribute):
            return [f"{base}.{node.attr}" for base in self.dotted(node.value)]
        if isinstance(node, ast.Subscript):
            if "sys.modules" in self.dotted(node.value):
                key = _evaluate(node.slice, self.strings())
                return [] if key is None else [key]
            return []
        if isinstance(node, ast.Call):
            funcs = self.dotted(node.func)
            first = node.args[0] if node.args else None
            if "builtins.getattr" in funcs and len(node.args) >= 2:
                attribute = _evaluate(node.args[1], self.strings())
                return [] if attribute is None else [f"{base}.{attribute}" for base in self.dotted(first)]
            for func in ("importlib.import_module", "builtins.__import__"):
                if func in funcs and first is not None:
                    module = _evaluate(first, self.strings())
                    if module is None:
                        return []
                    fromlist = len(node.args) >= 4 or any(k.arg == "fromlist" for k in node.keywords)
                    return [module if func == "importlib.import_module" or fromlist else module.split(".")[0]]
            if "builtins.eval" in funcs and first is not None:
                text = _evaluate(first, self.strings())
                if text is not None:
                    try:
                        return self.dotted(ast.parse(text.strip(), mode="eval").body)
                    except SyntaxError:
                        return []
        return []

    def strings(self) -> dict[str, str]:
        return self.code.strings

    # ----- the walk
    def visit(self, node: ast.AST, line_of: str) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return  # a binding: what counts is a use of the name it binds
        if isinstance(node, ast.expr) and not isinstance(node, ast.Constant):
            dotted = [d for d in self.dotted(node) if not d.startswith("builtins.")]
            if dotted:
                for candidate in dotted:
                    self.check(candidate, node, line_of)
                if isinstance(node, ast.Call):  # the arguments the chain did not use are code too
                    used = 2 if "builtins.getattr" in self.dotted(node.func) else 1
                    for child in [*node.args[used:], *(k.value for k in node.keywords)]:
                        self.visit(child, line_of)
                return
            self.indirection(node, line_of)
        for child in ast.iter_child_nodes(node):
            self.visit(child, line_of)

    def check(self, dotted: str, node: ast.AST, line_of: str) -> None:
        where = f"{line_of}, line {getattr(node, 'lineno', '?')}"
        for entry, obj in self.entries.items():
            if dotted == entry or (obj is not None and _object(dotted) is obj):
                self.hits.append((entry, f"{dotted} ({where})", line_of, "listed"))
                return
        entry = self.same_computation(dotted)
        if entry is not None:
            self.hits.append((entry, f"{dotted} ({where})", line_of, "listed"))
            return
        if self.exercise is None:
            return
        owner, _, method = dotted.rpartition(".")
        if owner == "torch.Tensor":  # torch.Tensor.logsumexp(x) is x.logsumexp(): the function it is the method of
            matching = [e for e, obj in self.entries.items() if e.rpartition(".")[2] == method and _tensor_method(e, obj)]
            if matching:
                self.hits.append((min(matching, key=lambda e: not e.startswith("torch.Tensor.")), f"{dotted} ({where})",
                                  line_of, "listed"))
                return
        if is_private(dotted):
            self.hits.append((dotted, f"{dotted}: PyTorch's internals ({where})", line_of, "private"))
            return
        why = refused(dotted)
        if why is not None:
            self.hits.append((dotted, f"{dotted}: {why} ({where})", line_of, why))

    def same_computation(self, dotted: str) -> str | None:
        """The listed entry whose computation ``dotted`` does under another name (``F.softmax`` or
        ``torch.special.softmax`` where ``torch.softmax`` is listed: the same dispatcher operation,
        :data:`attention_course.shortcuts.COMPUTATIONS`), or None."""
        from attention_course.shortcuts import COMPUTATIONS

        listed = {e: set(COMPUTATIONS[e]) for e in self.entries if e in COMPUTATIONS}
        if not listed:  # most exercises: nothing to resolve
            return None
        ops = set(COMPUTATIONS.get(dotted, ()))
        if not ops:
            found = _object(dotted)
            ops = {op for name, routes in COMPUTATIONS.items() if found is not None and _object(name) is found
                   for op in routes}
        same = [e for e, routes in listed.items() if ops & routes]
        return min(same, key=lambda e: (e.startswith("torch.Tensor."), e)) if same else None

    def indirection(self, node: ast.AST, line_of: str) -> None:
        """An expression the scan cannot name: inside an exercise's own code it is refused (an honest
        answer names what it calls; a name computed at run time is how a forbidden routine hides),
        save ``getattr(self, name)``, which reaches only the object's own attributes (what is done
        with the result is checked as any attribute is); outside, listed for the instructor."""
        where = f"{line_of}, line {getattr(node, 'lineno', '?')}"
        seen = None
        if isinstance(node, ast.Call):
            funcs = [f for f in self.dotted(node.func) if f.startswith(("builtins.", "importlib."))]
            func = funcs[0] if funcs else None
            if func == "builtins.getattr":
                attribute = _evaluate(node.args[1], self.strings()) if len(node.args) > 1 else None
                if attribute is not None:
                    self.attribute(attribute, node.args[0], where, line_of)
                    return
                if node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls"):
                    self.unresolved.append((f"getattr of self with a name computed at run time ({where})", line_of))
                    return
                seen = ("getattr", f"getattr with a name computed at run time ({where})")
            elif func in ("importlib.import_module", "builtins.__import__"):
                seen = (func.split('.')[-1], f"{func.split('.')[-1]} of a module computed at run time ({where})")
            elif func in ("builtins.eval", "builtins.exec", "builtins.compile"):
                text = _evaluate(node.args[0], self.strings()) if node.args else None
                try:
                    tree = ast.parse(text) if text is not None else None
                except SyntaxError:
                    tree = None
                if tree is None:
                    seen = (func.split('.')[-1], f"{func.split('.')[-1]} of code computed at run time ({where})")
                else:
                    self.code.learn(tree, None)
                    self.extra.append(tree)
            elif func == "builtins.open" and self.exercise is not None:  # a file: how work reaches another process
                self.hits.append(("open", f"open() ({where})", line_of, "concurrency"))
                return
            elif func in ("builtins.vars", "builtins.globals", "builtins.locals"):
                seen = (f"{func.split('.')[-1]}()", f"{func.split('.')[-1]}() ({where})")
        elif isinstance(node, ast.Subscript) and "sys.modules" in self.dotted(node.value):
            seen = ("sys.modules", f"sys.modules with a name computed at run time ({where})")
        elif isinstance(node, ast.Attribute) and node.attr in ("__dict__", "__builtins__") and self.exercise is None:
            seen = (node.attr, f"{node.attr} ({where})")
        elif isinstance(node, ast.Attribute) and self.exercise is not None:
            if node.attr in self.code.methods or (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                return
            self.attribute(node.attr, node.value, where, line_of)
        if seen is None:
            return
        if self.exercise is None:
            self.unresolved.append((seen[1], line_of))
        else:
            self.hits.append((seen[0], seen[1], line_of, "indirection"))

    def attribute(self, name: str, value: ast.AST, where: str, line_of: str) -> None:
        """``value.name`` (or ``getattr(value, "name")``) where ``value`` is not known before run
        time: a method of a tensor (``x.logsumexp(-1)``: a forbidden function's own method) is the
        function; an attribute of a tensor off the building blocks (``x.logcumsumexp``,
        ``x.to_sparse``, ``out.grad_fn``) is refused."""
        if self.exercise is None:
            if name in ("__dict__", "__builtins__"):
                self.unresolved.append((f"{name} ({where})", line_of))
            return
        if name in self.code.methods or (isinstance(value, ast.Name) and value.id in ("self", "cls")):
            return
        matching = [entry for entry, obj in self.entries.items()
                    if entry.rpartition(".")[2] == name and _tensor_method(entry, obj)]
        if matching:  # the tensor's own entry when listed, else the function it is the method of
            entry = min(matching, key=lambda e: not e.startswith("torch.Tensor."))
            self.hits.append((entry, f".{name} of a value ({where})", line_of, "listed"))
            return
        entry = self.same_computation(f"torch.Tensor.{name}")  # x.log_softmax() where F.log_softmax is listed
        if entry is not None:
            self.hits.append((entry, f".{name} of a value ({where})", line_of, "listed"))
            return
        # a tensor's attribute: only where the student's code names PyTorch (a NumPy chapter's judge need not import it)
        torch = _torch() if any(d.split(".")[0] == "torch" for ds in self.code.aliases.values() for d in ds) else None
        of_tensor = (torch is not None and not name.startswith("__")  # Python's protocols (x.__setitem__) aside
                     and inspect.getattr_static(torch.Tensor, name, None) is not None)
        if name in _GRAPH or (of_tensor and not _tensor_name(name)):
            entry = f"torch.Tensor.{name}" if of_tensor else f".{name}"
            self.hits.append((entry, f".{name} of a value ({where})", line_of, "unlisted"))


def is_private(dotted: str) -> bool:
    """Whether ``dotted`` is one of PyTorch's private entry points, which no exercise may call:
    ``torch.ops``, or a name with a part that starts with an underscore (``torch._C``,
    ``torch.nn.functional._in_projection``, ``torch.utils._python_dispatch``), dunders aside."""
    parts = dotted.split(".")
    return parts[0] == "torch" and len(parts) > 1 and (parts[1] == "ops" or any(
        p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in parts[1:]))


def _tensor_method(entry: str, obj) -> bool:
    """Whether ``entry`` is a method of PyTorch's tensors, or a function of PyTorch that a
    tensor has as a method of the same name (``torch.logsumexp``: ``x.logsumexp``)."""
    owner, _, method = entry.rpartition(".")
    if owner == "torch.Tensor":
        return True
    torch = sys.modules.get("torch")
    if torch is None or not owner.startswith("torch") or isinstance(obj, type):
        return False
    return inspect.isroutine(inspect.getattr_static(torch.Tensor, method, None))  # not an attribute: x.grad


def _locals(node: ast.AST, walk: _Walk) -> None:
    """The names local to the functions of ``node`` (parameters, assignments, imports): a
    local ``x`` is not the global ``x``; a local alias of a library name is followed."""
    declared_global = {n for sub in ast.walk(node) if isinstance(sub, ast.Global) for n in sub.names}
    for sub in ast.walk(node):
        if isinstance(sub, ast.arg):
            walk.shadowed.add(sub.arg)
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store) and sub.id not in declared_global:
            walk.shadowed.add(sub.id)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            for a in sub.names:
                if isinstance(sub, ast.ImportFrom) and sub.module and not sub.level and a.name != "*":
                    walk.local_aliases[a.asname or a.name] = [f"{sub.module}.{a.name}"]
                elif isinstance(sub, ast.Import):
                    name = a.asname or a.name.split(".")[0]
                    walk.local_aliases[name] = [a.name if a.asname else name]
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
            dotted = walk.dotted(sub.value)
            if dotted:
                walk.local_aliases[sub.targets[0].id] = dotted


def _parse(source: str) -> ast.Module | None:
    lines = ["pass" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def scan(cells: list[dict], forbidden: dict[str, list[str]]) -> list[Finding]:
    """Every forbidden entry that an exercise's code reaches (``entry`` set) and every
    indirection the scan could not resolve (``entry`` None), in the cells of
    :func:`autograder.assemble.judge_cells` (only the solution and added cells are the
    student's; the course's other cells only teach the scan their imports).
    ``forbidden``: exercise name -> its entries."""
    code = _Code()
    trees: list[tuple[ast.Module, str]] = []
    for cell in cells:
        if cell["kind"] == "test":
            continue
        tree = _parse(cell["source"])
        if tree is None:
            continue
        student = cell["kind"] in ("solution", "added")
        code.learn(tree, cell["grade_id"] if student else None)
        if student:
            trees.append((tree, cell["grade_id"]))
    code.settle()
    if any(d.split(".")[0] == "torch" for ds in code.aliases.values() for d in ds):
        _torch()  # the same findings whether or not this process imported it before (entries, methods, tags)
    exercises = {c["grade_id"] for c in cells if c["kind"] == "solution"}
    findings: list[Finding] = []
    attributed: set[str] = set()
    for exercise, entries in sorted(forbidden.items()):  # every exercise: private names are forbidden in each
        walk = _Walk(code, {e: _object(e) for e in entries}, exercise)
        todo, seen = [exercise], set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            for node, cell_name in code.defs.get(name, []):
                walk.local_aliases, walk.shadowed = {}, set()
                if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                    _locals(node, walk)

                walk.visit(node, cell_name)
                for tree in walk.extra:
                    walk.visit(tree, cell_name)
                walk.extra = []
                # the helpers it uses: the student's own top-level names, other exercises aside
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Name) and sub.id in code.defs and sub.id not in seen and (
                            sub.id not in walk.shadowed) and (
                            sub.id == exercise or sub.id not in exercises):
                        todo.append(sub.id)
        required = next((c.get("calls") or [] for c in cells if c["kind"] == "solution" and c["grade_id"] == exercise), [])
        named = {sub.id for name in seen for node, _ in code.defs.get(name, []) for sub in ast.walk(node)
                 if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load)}
        unanswered = any(_stub(node) for name in seen for top, _ in code.defs.get(name, []) for node in ast.walk(top))
        for other in required if not unanswered else ():  # a stub fails its tests on its own
            if other not in named:
                cell_name = next((c for _, c in code.defs.get(exercise, [])), exercise)
                walk.hits.append((other, f"{exercise} never calls {other} ({cell_name})", cell_name, "missing"))
        for entry, detail, cell_name, why in dict.fromkeys(walk.hits):
            findings.append(Finding(exercise, entry, detail, cell_name, "private" if is_private(entry) else why))
            attributed.add(detail)
        for detail, cell_name in dict.fromkeys(walk.unresolved):
            findings.append(Finding(exercise, None, detail, cell_name))
            attributed.add(detail)
    everything = _Walk(code, None, None)  # indirections outside the exercises' code
    for tree, cell_name in trees:
        everything.visit(tree, cell_name)
    for detail, cell_name in dict.fromkeys(everything.unresolved):
        if detail not in attributed:
            findings.append(Finding(None, None, detail, cell_name))
    return findings


def _stub(node: ast.AST) -> bool:
    """Whether ``node`` is a function whose body is only ``raise NotImplementedError(...)`` (and a
    docstring): the learner's notebook's stub of an exercise not written yet."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    body = [n for n in node.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    return len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.dump(body[0])


def exercise_of_test(test_id: str, exercises) -> str | None:
    """The exercise a test cell belongs to by its name (``test_<exercise>`` or
    ``test_<exercise>_<what>``; the longest such exercise), or None."""
    owners = [e for e in exercises if test_id == f"test_{e}" or test_id.startswith(f"test_{e}_")]
    return max(owners, key=len) if owners else None


# the one sentence a test of an exercise fails with when the exercise reached PyTorch's private entry points
PRIVATE_VERDICT = N_("{exercise} calls {entry}, one of PyTorch's private entry points (torch.ops, torch._C and "
                     "any of PyTorch's names that start with an underscore), which no exercise may call: an exercise "
                     "that calls one earns no points; write {exercise} with your own code and PyTorch's public "
                     "functions.")

# the one sentence a test of an exercise fails with when the exercise reached a forbidden entry
VERDICT = N_("{exercise} calls {entry}, which does this exercise's whole job and which its docstring forbids: "
             "an exercise that calls it earns no points; write {exercise} with your own code.")

#: kind of refusal (Finding.kind, attention_course.shortcuts.kind) -> the one sentence its exercise's tests fail with
VERDICTS = {
    "listed": VERDICT,
    "private": PRIVATE_VERDICT,
    "unlisted": N_("{exercise} uses {entry}, which is not one of the building blocks an exercise's own code may use "
                   "(Python, math, NumPy, and of PyTorch its elementwise arithmetic, reductions, matrix products, "
                   "indexing, views, tensor creation, torch.nn and torch.autograd.Function): any other routine may do "
                   "the exercise's whole job, so it is refused unless the course lists it; an exercise that uses it "
                   "earns no points; write {exercise} with those building blocks."),
    "concurrency": N_("{exercise} starts or uses a thread or a process ({entry}) while a test runs it: the grader "
                      "watches only the thread that runs the exercise, so work done elsewhere cannot be told from a "
                      "library's; an exercise that does so earns no points; write {exercise} so that its own code "
                      "does its work where it runs."),
    "compiled": N_("{exercise} compiles code ({entry}: TorchScript, torch.compile or a C extension), which runs where "
                   "the grader cannot see what it computes; an exercise that does so earns no points; write "
                   "{exercise} in Python with PyTorch's public building blocks."),
    "missing": N_("{exercise} does not call {entry}, which its docstring says it is built on: its result must come "
                  "from your {entry}, not from another computation; an exercise that does not call it earns no points."),
    "indirection": N_("{exercise} reaches a name that cannot be read before it runs ({entry}: a getattr, import, "
                      "eval or exec of a name computed at run time, globals() and the like), the way a forbidden "
                      "routine is hidden; an exercise that does so earns no points; name what {exercise} calls."),
}
