"""notebooks/ and attention_course/reference/ are exactly what `make release` generates from
solutions/, and each chapter's package holds no solution of that chapter or a later one."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from autograder import chapter_view, course, translations
from courseware import learner_package, reference_modules
from courseware.release import release

import notebook_tools as nbt


@pytest.mark.slow
def test_learner_notebooks_are_in_sync_with_solutions(tmp_path):
    release(course.assignments(), target_dir=tmp_path)
    for assignment in course.assignments():
        generated = sorted(p.name for p in (tmp_path / assignment).iterdir())
        committed = sorted(p.name for p in (nbt.NOTEBOOKS / assignment).iterdir())
        assert generated == committed, f"{assignment}: files differ: {generated} vs {committed}"
        for name in generated:
            fresh = json.loads((tmp_path / assignment / name).read_text())
            stored = json.loads((nbt.NOTEBOOKS / assignment / name).read_text())
            assert fresh == stored, (
                f"notebooks/{assignment}/{name} is out of date with solutions/: run `make release`"
            )


def test_every_assignment_is_released():
    released = sorted(p.name for p in nbt.NOTEBOOKS.iterdir() if p.is_dir())
    assert released == course.assignments()


def test_learner_notebooks_hold_no_solution_or_hidden_test():
    for assignment in course.assignments():
        for path in (nbt.NOTEBOOKS / assignment).glob("*.ipynb"):
            text = path.read_text()
            for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
                assert marker not in text, f"{path.name} still contains {marker!r}"


def test_reference_modules_are_in_sync_with_solutions(tmp_path):
    written = reference_modules.write_reference_modules(tmp_path)
    committed = sorted(p.name for p in chapter_view.REFERENCE.glob("*.py"))
    assert sorted(p.name for p in written) == committed
    for path in written:
        assert path.read_text() == (chapter_view.REFERENCE / path.name).read_text(), (
            f"attention_course/reference/{path.name} is out of date with solutions/: run `make release`"
        )


WINDOW = 4  # lines in a row: short enough to catch a copied body, long enough to be unique to it


def _code_lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def _solution_windows(assignment: str) -> set[tuple[str, ...]]:
    """Every run of WINDOW consecutive code lines of ``assignment``'s solution regions."""
    windows = set()
    for cell in nbt.read(nbt.source_notebook(assignment)).cells:
        if nbt.is_solution_cell(cell) and "### BEGIN SOLUTION" in cell.source:
            region = _code_lines(cell.source.split("### BEGIN SOLUTION", 1)[1].split("### END SOLUTION", 1)[0])
            windows.update(tuple(region[i:i + WINDOW]) for i in range(len(region) - WINDOW + 1))
    return windows


@pytest.mark.parametrize("assignment", course.assignments())
def test_a_chapter_package_holds_no_solution_of_that_chapter_or_later(assignment, tmp_path):
    """What the learner of chapter N installs and what the sandbox mounts while it grades it."""
    package = chapter_view.build_package_tree(assignment, tmp_path)
    lines = [ln for p in sorted(package.rglob("*.py")) for ln in _code_lines(p.read_text())]
    shipped = {tuple(lines[i:i + WINDOW]) for i in range(len(lines) - WINDOW + 1)}
    here = course.assignments().index(assignment)
    for later in course.assignments()[here:]:
        leaked = _solution_windows(later) & shipped
        assert not leaked, f"the package of {assignment} holds solution code of {later}: {sorted(leaked)[:2]}"
    # and no module but an earlier chapter's solutions defines an exercise of this chapter or later
    exercises = {nbt.nbgrader_meta(c)["grade_id"] for later in course.assignments()[here:]
                 for c in nbt.read(nbt.source_notebook(later)).cells if nbt.is_solution_cell(c)}
    for path in sorted(package.rglob("*.py")):
        if path.parent.name == "reference" and path.stem < chapter_view.chapter_of(assignment):
            continue
        defined = {n.name for n in ast.parse(path.read_text()).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        assert not defined & exercises, f"{path.relative_to(tmp_path)} defines {sorted(defined & exercises)}"
    for earlier in course.assignments()[:here]:  # what later chapters build on is there
        module = package / "reference" / f"{chapter_view.chapter_of(earlier)}.py"
        assert module.read_text() == (chapter_view.REFERENCE / module.name).read_text()
    assert not list(package.rglob("__pycache__"))
    files = sorted(p.relative_to(package).as_posix() for p in package.rglob("*") if p.is_file())
    source = [p.relative_to(chapter_view.PACKAGE).as_posix() for p in chapter_view.PACKAGE.rglob("*")
              if p.is_file() and "__pycache__" not in p.parts and p.relative_to(chapter_view.PACKAGE).parts[0] != "locale"]
    # and every language's messages.po compiled (the clone's own copy in locale/ is a build product)
    catalogs = [f"locale/{po.parent.parent.name}/LC_MESSAGES/messages.mo" for po in translations.package_catalogs()]
    assert files == sorted(source + catalogs), "a chapter's package holds exactly the course package's files"


@pytest.mark.slow
def test_plain_nbgrader_grades_the_released_notebooks(tmp_path):
    """An instructor on a hub may grade with nbgrader's own ``autograde``: it accepts the
    released notebook as submitted (install cell included) and scores the solution, a
    half-solved notebook and the untouched one as our grader does."""
    from benchmarks import grading as bench

    assignment = "ch01_attention_pooling"  # NumPy only: quick to run three times
    students = bench.students(3)  # the solution, the untouched notebook, the first half solved
    bench.build_batch(tmp_path / "submissions", [assignment], len(students))
    _, _, scores = bench.grade_plain(tmp_path / "submissions", tmp_path / "course", [assignment], cell_timeout=120)
    source = nbt.read(nbt.source_notebook(assignment))
    full = sum(nbt.nbgrader_meta(c).get("points", 0) for c in source.cells if nbt.is_test_cell(c))
    assert scores[("solution", assignment)] == full, scores
    assert scores[("blank", assignment)] == 0, scores
    assert 0 < scores[(students[2], assignment)] < full, scores


def test_the_release_command_names_an_unknown_assignment_in_one_line():
    done = subprocess.run([sys.executable, "-m", "courseware", "release", "ch99_nothing"], cwd=nbt.ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and not done.stdout, done.stdout + done.stderr
    assert done.stderr.startswith("error: unknown assignment ch99_nothing; known: ch01_"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_wheels_command_writes_every_chapters_wheel(tmp_path):
    done = subprocess.run([sys.executable, "-m", "courseware", "wheels", str(tmp_path)], cwd=nbt.ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    wheels = sorted(p.name for p in tmp_path.glob("*.whl"))
    assert wheels == sorted(learner_package.wheel_name(a) for a in course.assignments())
    assert len(done.stdout.splitlines()) == len(wheels)
