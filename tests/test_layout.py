"""The repository's rooms: no import circle among its own modules, and each package imports
only what its ``__init__`` docstring allows. Static (every ``import`` statement, read with
``ast``, wherever it stands: at the top, inside a function, under ``TYPE_CHECKING``), so it
needs no import and costs a fraction of a second."""

from __future__ import annotations

import ast
from pathlib import Path

import notebook_tools as nbt

PACKAGES = ("layout", "attention_course", "autograder", "courseware", "benchmarks")
# Folders of loose modules, importable by their file name (pytest and Sphinx put them on sys.path).
LOOSE = ("tests", "book/_ext")

# What each package may import of the repository's own code (its __init__ says the same):
# "P.*" is package P and everything in it; a plain name is that module alone.
ALLOWED = {
    # the ground floor: the course's layout and a cell's regions, read by every other room
    "layout": {"layout.*"},
    "attention_course": {"attention_course.*"},
    # the trip-wires the student's process (autograder.runner, in the sandbox) shares with the learner's kernel,
    # and the language of the messages (the judge speaks the submission's language as the learner's kernel does)
    "autograder": {"autograder.*", "layout.*", "attention_course", "attention_course.shortcuts", "attention_course.i18n"},
    # the catalogs: the package's words, and which strings of the tests are words (attention_course.i18n);
    # nbgrader in-process (autograder.books, autograder.course's configuration), to release the notebooks as the
    # grader generates them; the chapter's package tree the grader's sandbox mounts (autograder.chapter_view)
    "courseware": {"courseware.*", "layout.*", "autograder", "autograder.course", "autograder.books",
                   "autograder.chapter_view", "autograder.catalogs", "attention_course", "attention_course.i18n"},
    "benchmarks": {"benchmarks.*", "layout.*", "attention_course.*", "autograder.*"},
}


def allowed(target: str, entries: set[str]) -> bool:
    return target in entries or any(
        e.endswith(".*") and (target == e[:-2] or target.startswith(e[:-1])) for e in entries)


def _modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the repository's packages and loose folders."""
    found = {}
    for package in PACKAGES:
        for path in sorted((nbt.ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(nbt.ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    for folder in LOOSE:
        for path in sorted((nbt.ROOT / folder).glob("*.py")):
            found[path.stem] = path
    return found


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The repository modules that module ``name`` (at ``path``) imports, with the packages
    whose ``__init__`` each import runs first."""
    is_package = path.name == "__init__.py"
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets.add(base)
            targets.update(f"{base}.{alias.name}" for alias in node.names)  # `from package import module`
    edges = set()
    for target in targets:
        parts = target.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b first
            prefix = ".".join(parts[:i])
            if prefix in modules and prefix != name:
                edges.add(prefix)
    return edges


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_repository_has_no_import_circle():
    graph = import_graph()
    assert len(graph) > 50 and graph["autograder.grade"] >= {"autograder.judging", "autograder.distributed"}
    found = circles(graph)
    assert not found, "import circles: " + "; ".join(" -> ".join(c) for c in found)
    print(f"{len(graph)} modules, {sum(map(len, graph.values()))} imports between them, no circle")


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]


def test_each_package_imports_only_what_its_init_allows():
    graph = import_graph()
    wrong = [f"{name} imports {target}" for name, imported in sorted(graph.items()) if name.split(".")[0] in ALLOWED
             for target in sorted(imported) if not allowed(target, ALLOWED[name.split(".")[0]])]
    assert not wrong, "\n".join(wrong)
    assert allowed("autograder.course", ALLOWED["courseware"]) and not allowed("autograder.grade", ALLOWED["courseware"])
    assert not allowed("autograder", ALLOWED["layout"]) and not allowed("courseware.release", ALLOWED["layout"])


def test_the_ground_floor_imports_nothing_of_the_rooms_above_it():
    """layout, which every room reads, imports no module of the repository but its own: neither the
    grader nor the courseware (nor the course package), so that none of them is needed to read the
    course's layout, and no circle can pass through it."""
    graph = import_graph()
    above = sorted(f"{name} imports {target}" for name, imported in graph.items() if name.split(".")[0] == "layout"
                   for target in imported if target.split(".")[0] != "layout")
    assert {"layout", "layout.regions"} <= set(graph) and not above, "\n".join(above)


def test_each_package_says_in_three_lines_what_it_is_for_and_what_it_may_import():
    for package in PACKAGES:
        doc = ast.get_docstring(ast.parse((nbt.ROOT / package / "__init__.py").read_text()))
        assert doc is not None, f"{package}/__init__.py has no docstring"
        lines = doc.strip().splitlines()
        assert len(lines) == 3 and lines[2].startswith("May import:"), (
            f"{package}/__init__.py: three lines, the last 'May import: ...'; got {lines}")


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings in ``tree``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def test_the_grader_and_the_release_name_no_chapter():
    """A new chapter touches solutions/, book/, _toc.yml and its mutants, and nothing in the
    grader or the release: they find the chapters in solutions/ (course.assignments)."""
    named = []
    for package in ("autograder", "courseware"):
        for path in sorted((nbt.ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            docstrings = _docstrings(tree)
            for node in ast.walk(tree):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                        and any(a in node.value for a in nbt.assignments())):
                    named.append(f"{path.relative_to(nbt.ROOT)}:{node.lineno}: {node.value[:60]!r}")
    assert not named, "\n".join(named)
