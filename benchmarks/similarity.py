"""Does the similarity step find copies, and not honest students? ``python -m benchmarks.similarity``
(``make bench-similarity``).

**The class.** For each chapter of :data:`CHAPTERS`, ``--students`` honest students. An honest
student's answer to each exercise is one of the course's correct ways to write it, drawn at random:
the reference solution or a ``CORRECT`` variant of ``tests/mutants/<chapter>.py`` (each written
independently, and each passing every test), then rewritten in the student's own hand by
:func:`honest_hand` (each rewrite drawn for every occurrence, independently: a nested call pulled
out into a variable of its own, operands of ``+`` and ``*`` swapped, ``a < b`` or ``b > a``,
``torch.f(x, ...)`` or ``x.f(...)``, ``math.sqrt(d)`` or ``d ** 0.5``, ``dim=-1`` passed by
position, ``transpose(-2, -1)`` written ``transpose(-1, -2)``, names of the student's own: two
students who drew the same way rarely write all of its statements alike). Then, per
chapter, one planted copy of a different honest student for each disguise of :data:`DISGUISES`
(renamed names; changed comments, whitespace and literals' spelling; reordered independent
statements; loops turned into comprehensions or back; every function's body moved into a helper;
the English notebook copied into the Chinese one; all of these at once), and one leaked reference
solution (the solution's code, renamed). Every notebook is the released notebook (English or
Chinese) with its solution cells replaced; the seed makes the class the same on every run.

**What it prints**, per chapter: each planted copy's rank in its assignment's list (1 = first)
and whether it is over the threshold (listed); whether the leaked solution is listed as such; the honest pairs over
the threshold, per 100 students. Then the time of the step alone (``similarity.run``: reading,
fingerprints, scores, pages) on one assignment with 100, 500 and 2,000 students, wall and CPU
seconds (the CPU time is the steadier figure on a shared machine). Exit status 1 when a planted
copy is behind an honest pair, more than 1 honest pair per 100 students is over the threshold, or
an honest student is listed against the reference solution.
"""

from __future__ import annotations

import argparse
import ast
import copy
import functools
import importlib.util
import json
import random
import re
import sys
import tempfile
import time
from pathlib import Path

import layout
from attention_course import i18n
from autograder import assemble, similarity

REPO = layout.REPO
CHAPTERS = ["ch02_scoring_functions", "ch04_multihead_attention", "ch06_transformer_encoder"]
TIMED = "ch06_transformer_encoder"
DISGUISES = ["renamed", "comments_whitespace_literals", "reordered", "loop_comprehension", "helper", "chinese", "all"]


def _mutants(assignment: str):
    sys.path.insert(0, str(REPO / "tests"))  # the mutant files import tests/mutant_source.py
    spec = importlib.util.spec_from_file_location(f"mutants_{assignment}", REPO / "tests" / "mutants" / f"{assignment}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pools(assignment: str) -> dict[str, list[str]]:
    """Every correct way the course has to write each exercise: the solution's cell and the
    ``CORRECT`` variants."""
    source = json.loads(layout.source_notebooks(assignment)[0].read_text(encoding="utf-8"))
    correct = getattr(_mutants(assignment), "CORRECT", {})
    found = {}
    for cell in source["cells"]:
        if assemble.kind_of(cell) == "solution":
            grade_id = assemble._meta(cell)["grade_id"]
            found[grade_id] = [assemble._student_code(cell)] + list(correct.get(grade_id, {}).values())
    return found


# ----------------------------------------------------------------------------- rewriting code


_KEEP = {"self", "super", "cls"}


def _local_names(tree: ast.AST, keep: set[str]) -> set[str]:
    """The names ``tree`` binds itself (arguments, assignments, loop variables, ``self.x``), not
    the exercise's own name nor the modules'."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" \
                and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return names - keep - _KEEP


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Name(self, node):
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_arg(self, node):
        node.arg = self.names.get(node.arg, node.arg)
        return node

    def visit_keyword(self, node):
        self.generic_visit(node)  # the keyword's own name is the callee's: kept
        return node

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            node.attr = self.names.get(node.attr, node.attr)
        return node


def rename(tree: ast.AST, rng: random.Random, keep: set[str], style: str = "copy") -> ast.AST:
    """Every name ``tree`` binds (but ``keep``'s) renamed, as ``<word>_<style><n>``."""
    names = sorted(_local_names(tree, keep))
    words = ["val", "tmp", "res", "acc", "buf", "arr", "item", "part", "piece", "thing", "data", "out"]
    new = {n: f"{rng.choice(words)}_{style}{i}" for i, n in enumerate(names)}
    # a module-level helper's parameters that are also attributes must be renamed alike: one map
    return _Rename(new).visit(tree)


def _assigned(node: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} | \
           {ast.unparse(n) for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)}


def _read(node: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} | \
           {ast.unparse(n) for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)}


def reorder(tree: ast.AST) -> int:
    """Swap every pair of adjacent independent assignments (neither reads nor writes what the
    other writes; a call that changes state, such as ``super().__init__()``, is never moved).
    Returns how many pairs were swapped."""
    swapped = 0
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        i = 0
        while i + 1 < len(body):
            a, b = body[i], body[i + 1]
            if all(isinstance(s, (ast.Assign, ast.AnnAssign)) for s in (a, b)) and \
                    not (_assigned(a) & (_read(b) | _assigned(b))) and not (_assigned(b) & _read(a)):
                body[i], body[i + 1] = b, a
                swapped += 1
                i += 2
            else:
                i += 1
    return swapped


def loops_and_comprehensions(tree: ast.AST) -> int:
    """``x = []`` then ``for t in it: x.append(e)`` becomes ``x = [e for t in it]``, and a list
    comprehension assigned to a name becomes that loop. Returns how many were rewritten."""
    done = 0
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        new, i = [], 0
        while i < len(body):
            s = body[i]
            nxt = body[i + 1] if i + 1 < len(body) else None
            if (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                    and isinstance(s.value, ast.List) and not s.value.elts and isinstance(nxt, ast.For)
                    and not nxt.orelse and len(nxt.body) == 1 and isinstance(nxt.body[0], ast.Expr)
                    and isinstance(nxt.body[0].value, ast.Call)
                    and ast.unparse(nxt.body[0].value.func) == f"{s.targets[0].id}.append"
                    and len(nxt.body[0].value.args) == 1):
                comp = ast.ListComp(nxt.body[0].value.args[0],
                                    [ast.comprehension(nxt.target, nxt.iter, [], 0)])
                new.append(ast.Assign([s.targets[0]], comp, lineno=0))
                i += 2
                done += 1
                continue
            if (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                    and isinstance(s.value, ast.ListComp) and len(s.value.generators) == 1
                    and not s.value.generators[0].ifs):
                name, gen = s.targets[0].id, s.value.generators[0]
                new.append(ast.parse(f"{name} = []").body[0])
                append = ast.Expr(ast.Call(ast.Attribute(ast.Name(name, ast.Load()), "append", ast.Load()),
                                           [s.value.elt], []))
                new.append(ast.For(gen.target, gen.iter, [append], [], lineno=0))
                i += 1
                done += 1
                continue
            new.append(s)
            i += 1
        body[:] = new
    return done


def helpers(tree: ast.Module, rng: random.Random) -> int:
    """Every function's and method's body (not ``__init__``'s) moved into a new module-level
    function that it calls."""
    moved = []
    for node in ast.walk(tree):
        for i, item in enumerate(getattr(node, "body", []) if isinstance(node, (ast.Module, ast.ClassDef)) else []):
            if isinstance(item, ast.FunctionDef) and item.name != "__init__" and not item.name.startswith("_h"):
                name = f"_h{rng.randrange(10**6)}_{item.name.strip('_')}"
                helper = ast.FunctionDef(name, copy.deepcopy(item.args), item.body, [], None, lineno=0)
                args = [ast.Name(a.arg, ast.Load()) for a in item.args.posonlyargs + item.args.args]
                kwargs = [ast.keyword(a.arg, ast.Name(a.arg, ast.Load())) for a in item.args.kwonlyargs]
                if item.args.vararg:
                    args.append(ast.Starred(ast.Name(item.args.vararg.arg, ast.Load()), ast.Load()))
                call = ast.Call(ast.Name(name, ast.Load()), args, kwargs)
                item.body = [ast.Return(call)]
                moved.append(helper)
    tree.body[:0] = moved
    return len(moved)


#: tensor operations that PyTorch offers both as ``torch.f(x, ...)`` and as the method ``x.f(...)``
_BOTH_FORMS = {"sqrt", "exp", "log", "tanh", "sigmoid", "relu", "softmax", "sum", "mean", "var", "matmul",
               "transpose", "unsqueeze", "masked_fill", "any", "all", "abs", "pow"}
#: what is no tensor when a method is called on it (``math.sqrt``, ``self.proj``)
_NO_TENSOR = {"torch", "F", "nn", "math", "np", "self", "super"}
_MIRRORED = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}


class _HonestHand(ast.NodeTransformer):
    """Rewrites that independent students differ by, each drawn at random, for every occurrence."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def visit_Compare(self, node):
        self.generic_visit(node)
        # a < b or b > a
        if len(node.ops) == 1 and type(node.ops[0]) in _MIRRORED and self.rng.random() < 0.5:
            return ast.Compare(node.comparators[0], [_MIRRORED[type(node.ops[0])]()], [node.left])
        return node

    def _other_form(self, node):
        """``torch.f(x, ...)`` as ``x.f(...)``, or the reverse (f of :data:`_BOTH_FORMS`)."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr in _BOTH_FORMS) or self.rng.random() >= 0.5:
            return node
        if isinstance(func.value, ast.Name) and func.value.id == "torch":
            if node.args and not isinstance(node.args[0], ast.Starred):
                return ast.Call(ast.Attribute(node.args[0], func.attr, ast.Load()), node.args[1:], node.keywords)
        elif not (isinstance(func.value, ast.Name) and func.value.id in _NO_TENSOR) \
                and not isinstance(func.value, ast.Constant):
            return ast.Call(ast.Attribute(ast.Name("torch", ast.Load()), func.attr, ast.Load()),
                            [func.value, *node.args], node.keywords)
        return node

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, (ast.Add, ast.Mult)) and self.rng.random() < 0.5:
            node.left, node.right = node.right, node.left
        if isinstance(node.op, ast.MatMult) and self.rng.random() < 0.5:
            return ast.Call(ast.Attribute(ast.Name("torch", ast.Load()), "matmul", ast.Load()),
                            [node.left, node.right], [])
        return node

    def visit_Subscript(self, node):
        self.generic_visit(node)
        # X.shape[0] -> X.size(0)
        index = node.slice.operand if isinstance(node.slice, ast.UnaryOp) else node.slice
        if isinstance(node.value, ast.Attribute) and node.value.attr == "shape" and isinstance(index, ast.Constant) \
                and self.rng.random() < 0.5:
            return ast.Call(ast.Attribute(node.value.value, "size", ast.Load()), [node.slice], [])
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        node = self._other_form(node)
        name = ast.unparse(node.func)
        if name == "math.sqrt" and len(node.args) == 1 and self.rng.random() < 0.5:  # math.sqrt(d) or d ** 0.5
            return ast.BinOp(node.args[0], ast.Pow(), ast.Constant(0.5))
        # the same operation reached another way: a @ b, x.view / x.reshape, F.relu / torch.relu
        if name == "torch.matmul" and len(node.args) == 2 and not node.keywords and self.rng.random() < 0.5:
            return ast.BinOp(node.args[0], ast.MatMult(), node.args[1])
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("view", "reshape") and self.rng.random() < 0.5:
            node.func.attr = "reshape" if node.func.attr == "view" else "view"
        if name in ("F.relu", "torch.relu", "F.softmax", "torch.softmax") and self.rng.random() < 0.5:
            module = "torch" if name.startswith("F.") else "F"
            node.func = ast.Attribute(ast.Name(module, ast.Load()), name.split(".")[1], ast.Load())
        for kw in list(node.keywords):
            if kw.arg == "dim" and not node.args and isinstance(node.func, ast.Attribute) and self.rng.random() < 0.5:
                node.keywords.remove(kw)
                node.args.append(kw.value)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "transpose" and len(node.args) == 2 \
                and self.rng.random() < 0.5:
            node.args.reverse()
        return node


def _hoist(tree: ast.AST, rng: random.Random) -> None:
    """Pull a nested call out of some returns and assignments into a variable of its own."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list) or isinstance(node, ast.ClassDef):
            continue
        new = []
        for s in body:
            if isinstance(s, (ast.Return, ast.Assign)) and s.value is not None and rng.random() < 0.5:
                inner = [n for n in ast.walk(s.value) if isinstance(n, ast.Call) and n is not s.value
                         and not any(isinstance(m, (ast.Lambda, ast.comprehension)) for m in ast.walk(n))]
                if inner:
                    call = rng.choice(inner)
                    name = rng.choice(["h", "z", "tmp", "inner", "step", "part"])
                    new.append(ast.Assign([ast.Name(name, ast.Store())], copy.deepcopy(call), lineno=0))
                    _replace(s, call, ast.Name(name, ast.Load()))
            new.append(s)
        body[:] = new


def _replace(root: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(root):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new


def _habits(tree: ast.AST, rng: random.Random) -> None:
    """A student's own additions to a function: the input's shape unpacked, or a check of it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name != "__init__":
            params = [a.arg for a in node.args.args if a.arg != "self"]
            if not params:
                continue
            first = params[0]
            habit = rng.random()
            if habit < 0.25:
                line = f"*_, {rng.choice(['last', 'width', 'n'])} = {first}.shape"
            elif habit < 0.5:
                line = f"assert {first}.dim() >= {rng.choice([1, 2])}, {first}.shape"
            elif habit < 0.6:
                line = f"{first} = torch.as_tensor({first})"
            else:
                continue
            docstring = isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
            node.body.insert(int(docstring), ast.parse(line).body[0])


def honest_hand(code: str, rng: random.Random, keep: set[str]) -> str:
    """``code`` as one student would write it (see the module's docstring)."""
    tree = ast.parse(code)
    tree = _HonestHand(rng).visit(tree)
    _hoist(tree, rng)
    _habits(tree, rng)
    tree = rename(tree, rng, keep, style="s")
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _respell(code: str, rng: random.Random) -> str:
    """Comments, blank lines, two-space indents and literals spelled otherwise."""
    code = re.sub(r"\b(\d+)\.0\b", r"\1.", code)
    code = re.sub(r"\b1e-0?(\d)\b", lambda m: "0." + "0" * (int(m.group(1)) - 1) + "1", code)
    code = code.replace("'", '"')
    lines = []
    for line in code.splitlines():
        body = line.lstrip(" ")
        indent = "  " * ((len(line) - len(body)) // 4)
        if body and rng.random() < 0.3:
            lines.append(f"{indent}# step: {rng.choice(['compute', 'then', 'here we go', 'as in the book'])}")
        lines.append(indent + body + ("  # ok" if body.endswith(")") and rng.random() < 0.2 else ""))
        if rng.random() < 0.15:
            lines.append("")
    return "\n".join(lines) + "\n"


def disguise(code: str, how: str, rng: random.Random, keep: set[str]) -> str:
    """A copy of ``code`` hidden by ``how`` (one of :data:`DISGUISES`; ``chinese`` changes the
    notebook, not the code)."""
    tree = ast.parse(code)
    if how in ("renamed", "all"):
        tree = rename(tree, rng, keep)
    if how in ("reordered", "all"):
        reorder(tree)
    if how in ("loop_comprehension", "all"):
        loops_and_comprehensions(tree)
    if how in ("helper", "all"):
        helpers(tree, rng)
    out = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    if how in ("comments_whitespace_literals", "all"):
        out = _respell(out, rng)
    return out


# ----------------------------------------------------------------------------- the class


def released(assignment: str, language: str = i18n.ENGLISH) -> tuple[str, dict]:
    name = layout.source_notebooks(assignment)[0].name
    folder = layout.NOTEBOOKS / assignment if language == i18n.ENGLISH else layout.NOTEBOOKS / language / assignment
    return name, json.loads((folder / name).read_text(encoding="utf-8"))


def notebook(assignment: str, answers: dict[str, str], language: str = i18n.ENGLISH) -> tuple[str, dict]:
    """The released notebook of ``assignment`` in ``language`` with ``answers`` in its solution cells."""
    name, nb = released(assignment, language)
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        grade_id = assemble._meta(cell).get("grade_id")
        if grade_id in answers:
            cell["source"] = answers[grade_id]
    if language != i18n.ENGLISH:
        nb["metadata"][i18n.METADATA_KEY] = {"language": language}
    return name, nb


def write(folder: Path, student: str, assignment: str, nb: tuple[str, dict]) -> None:
    path = folder / student / assignment / nb[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb[1]), encoding="utf-8")


@functools.cache
def kept_names(assignment: str) -> frozenset[str]:
    """The names a rewrite never renames: the exercises' own (the tests call them) and the modules
    the notebook imports."""
    return frozenset(pools(assignment)) | similarity.Assignment.load(assignment).known


def honest_answers(assignment: str, pool: dict[str, list[str]], rng: random.Random) -> dict[str, str]:
    """One honest student's answers: a way drawn per exercise, in the student's own hand."""
    return {exercise: honest_hand(rng.choice(ways), rng, kept_names(assignment)) for exercise, ways in pool.items()}


def build_class(folder: Path, assignment: str, students: int, seed: int, planted: bool = True) -> dict[str, str]:
    """Lay out ``students`` honest students of ``assignment`` (and, with ``planted``, one copy per
    disguise and a leaked solution) under ``folder``; return ``{copier: original}`` of the planted
    copies (the leaked solution's original is ``similarity.REFERENCE``)."""
    rng = random.Random(f"{seed}-{assignment}")
    pool = pools(assignment)
    honest = {}
    for n in range(students):
        honest[f"s{n:04d}"] = honest_answers(assignment, pool, rng)
        write(folder, f"s{n:04d}", assignment, notebook(assignment, honest[f"s{n:04d}"]))
    if not planted:
        return {}
    keep = kept_names(assignment)
    copies = {}
    originals = rng.sample(sorted(honest), len(DISGUISES))
    for how, original in zip(DISGUISES, originals):
        answers = {e: disguise(code, how, rng, keep) for e, code in honest[original].items()}
        language = "zh_CN" if how in ("chinese", "all") else i18n.ENGLISH
        copier = f"copy_{how}"
        write(folder, copier, assignment, notebook(assignment, answers, language))
        copies[copier] = original
    leak = {e: disguise(ways[0], "renamed", rng, keep) for e, ways in pool.items()}
    write(folder, "leak", assignment, notebook(assignment, leak))
    copies["leak"] = similarity.REFERENCE
    return copies


# ----------------------------------------------------------------------------- the measures


def detection(students: int, seed: int) -> bool:
    print(f"detection: {students} honest students per chapter, seed {seed}")
    ok = True
    for assignment in CHAPTERS:
        with tempfile.TemporaryDirectory() as tmp:
            subs, out = Path(tmp) / "subs", Path(tmp) / "out"
            copies = build_class(subs, assignment, students, seed)
            report = similarity.run(subs, out)["assignments"][assignment]
        pairs = [p for p in report["pairs"] if p["kind"] == "pair"]
        ranked = {frozenset((p["a"], p["b"])): (i + 1, p) for i, p in enumerate(pairs)}
        print(f"  {assignment}: threshold {report['threshold']}, {sum(p['listed'] for p in pairs)} pairs listed")
        for copier, original in copies.items():
            if original == similarity.REFERENCE:
                hit = [p for p in report["pairs"] if p["kind"] == "reference" and p["a"] == copier]
                listed = bool(hit) and hit[0]["listed"]
                print(f"    {copier:<32} against the reference solution: score {hit[0]['score'] if hit else 0:.3f}, "
                      f"{'listed' if listed else 'NOT LISTED'}")
            else:
                rank, p = ranked.get(frozenset((copier, original)), (None, {"score": 0.0, "listed": False}))
                print(f"    {copier:<32} rank {rank} score {p['score']:.3f} {'listed' if p['listed'] else 'NOT LISTED'}")
                # leading the list: ahead of every honest pair (the planted pairs take the first places)
                ok &= rank is not None and rank <= len(DISGUISES)
        honest_over = [p for p in pairs if p["listed"] and not (p["a"].startswith(("copy_", "leak"))
                                                                  or p["b"].startswith(("copy_", "leak")))]
        per_100 = 100 * len(honest_over) / students
        top_honest = max((p["score"] for p in pairs if not (p["a"].startswith(("copy_", "leak"))
                                                            or p["b"].startswith(("copy_", "leak")))), default=0)
        print(f"    honest pairs over the threshold: {len(honest_over)} ({per_100:.2f} per 100 students); "
              f"highest honest score {top_honest:.3f}; leaked solution vs others: "
              f"{[p['a'] for p in report['pairs'] if p['kind'] == 'reference' and p['listed']]}")
        ok &= per_100 <= 1
        ok &= all(p["a"].startswith(("copy_", "leak")) for p in report["pairs"] if p["kind"] == "reference" and p["listed"])
    return ok


def timing(sizes: list[int], seed: int) -> None:
    import resource

    print(f"time of the similarity step alone on {TIMED} (the machine may be shared: CPU seconds are the steadier)")
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            subs, out = Path(tmp) / "subs", Path(tmp) / "out"
            build_class(subs, TIMED, n, seed, planted=False)
            before = resource.getrusage(resource.RUSAGE_SELF)
            wall = time.perf_counter()
            similarity.run(subs, out)
            wall = time.perf_counter() - wall
            after = resource.getrusage(resource.RUSAGE_SELF)
            cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            print(f"  {n:>5} students: {wall:6.1f} s wall, {cpu:6.1f} CPU-s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.similarity", description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=100, help="honest students per chapter (detection)")
    parser.add_argument("--sizes", type=int, nargs="*", default=[100, 500, 2000], help="class sizes timed")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    ok = detection(args.students, args.seed)
    if args.sizes:
        timing(args.sizes, args.seed)
    print("every planted copy ahead of every honest pair, at most 1 honest pair over the threshold per 100 "
          "students, no honest student listed against the reference solution: " + ("yes" if ok else "NO"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
