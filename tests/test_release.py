"""notebooks/ and attention_course/reference/ are exactly what `make release` generates from
solutions/, and each chapter's package holds no solution of that chapter or a later one."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from autograder import chapter_view
from autograder import catalogs as compiled_catalogs
import layout
from layout import regions
from courseware import learner_package, reference_modules, translatable, translations
from courseware.release import release, release_translated
from courseware.translations import LANGUAGE

import notebook_tools as nbt


@pytest.mark.slow
def test_learner_notebooks_are_in_sync_with_solutions(tmp_path):
    """notebooks/<assignment>/ and notebooks/zh_CN/<assignment>/ hold what `make release` writes now."""
    release(layout.assignments(), target_dir=tmp_path)
    release_translated(layout.assignments(), target_dir=tmp_path)
    for folder in [*layout.assignments(), *(f"{LANGUAGE}/{a}" for a in layout.assignments())]:
        generated = sorted(p.name for p in (tmp_path / folder).glob("*"))
        committed = sorted(p.name for p in (nbt.NOTEBOOKS / folder).glob("*"))
        assert generated == committed, f"notebooks/{folder}: files differ: {generated} vs {committed}; run `make release`"
        for name in generated:
            fresh = json.loads((tmp_path / folder / name).read_text())
            stored = json.loads((nbt.NOTEBOOKS / folder / name).read_text())
            assert fresh == stored, (
                f"notebooks/{folder}/{name} is out of date with solutions/ (or its catalog): run `make release`"
            )


def test_every_assignment_is_released():
    released = sorted(p.name for p in nbt.NOTEBOOKS.iterdir() if p.is_dir() and p.name != LANGUAGE)
    assert released == layout.assignments()


def _learner_notebooks():
    return [p for a in layout.assignments() for folder in (nbt.NOTEBOOKS / a, nbt.NOTEBOOKS / LANGUAGE / a)
            for p in sorted(folder.glob("*.ipynb"))]


def test_learner_notebooks_hold_no_solution_or_hidden_test():
    for path in _learner_notebooks():
        text = path.read_text()
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
            assert marker not in text, f"{path.relative_to(nbt.ROOT)} still contains {marker!r}"


def test_a_chinese_notebook_exists_exactly_where_its_catalogs_are_complete():
    """Never a Chinese notebook out of date: `make release` writes one only from a complete catalog
    (and the shared one), and removes it when its catalog is not (any more)."""
    common = translations.status(translations.COMMON).complete
    for assignment in layout.assignments():
        state = translations.status(assignment)
        exists = (nbt.NOTEBOOKS / LANGUAGE / assignment).exists()
        assert exists == (common and state.complete), (
            f"notebooks/{LANGUAGE}/{assignment}/ {'exists' if exists else 'is missing'} though its catalog is "
            f"{'complete' if state.complete else f'not ({len(state.untranslated)} empty, {len(state.fuzzy)} fuzzy)'}"
            f"{'' if common else ' and the shared one is not'}: run `make release`")


@pytest.mark.parametrize("assignment", layout.assignments())
def test_a_chinese_notebook_is_the_english_one_cell_by_cell(assignment):
    """Same cells, ids, grade_ids, tests and points as the English learner notebook; every code cell
    parses to the same code with the same signatures (only docstrings, comments and messages differ);
    the first code cell installs the package, then sets the language; the metadata says zh_CN."""
    (english_path,) = sorted((nbt.NOTEBOOKS / assignment).glob("*.ipynb"))
    path = nbt.NOTEBOOKS / LANGUAGE / assignment / english_path.name
    if not path.exists():
        pytest.skip(f"no Chinese notebook yet: its catalog is not complete ({assignment})")
    english, chinese = nbt.read(english_path), nbt.read(path)
    assert chinese.metadata["attention_course"] == {"language": LANGUAGE}
    assert {k: v for k, v in chinese.metadata.items() if k != "attention_course"} == english.metadata
    assert len(chinese.cells) == len(english.cells)
    for en, zh in zip(english.cells, chinese.cells):
        where = f"notebooks/{LANGUAGE}/{assignment}/{path.name}, cell {en.get('id')}"
        meta = lambda c: {k: v for k, v in nbt.nbgrader_meta(c).items() if k != "checksum"}  # noqa: E731
        assert (zh.cell_type, zh.get("id"), meta(zh)) == (en.cell_type, en.get("id"), meta(en)), where
        assert {k: v for k, v in zh.metadata.items() if k != "nbgrader"} == \
            {k: v for k, v in en.metadata.items() if k != "nbgrader"}, where
        if nbt.is_test_cell(en):  # the same test: only its comments and its functions' docstrings are translated
            assert nbt.test_code(zh.source) == nbt.test_code(en.source), f"{where}: a test changed"
        elif en.cell_type == "code" and not learner_package.is_install_cell(en):
            assert translatable.check_code(en.source, zh.source) is None, f"{where}: {translatable.check_code(en.source, zh.source)}"
            assert translatable.signatures(zh.source) == translatable.signatures(en.source), f"{where}: a signature changed"
        elif en.cell_type == "markdown":
            assert zh.source != en.source or not translatable.markdown_pieces(en.source), f"{where}: not translated"
    install = chinese.cells[[c.cell_type for c in chinese.cells].index("code")]
    assert learner_package.is_install_cell(install)
    wanted = learner_package.install_cell(assignment, language=LANGUAGE).source
    assert translatable.check_code(wanted, install.source) is None, translatable.check_code(wanted, install.source)
    assert install.source.rstrip().endswith(f'use_language("{LANGUAGE}")')


def test_reference_modules_are_in_sync_with_solutions(tmp_path):
    written = reference_modules.write_reference_modules(tmp_path)
    committed = sorted(p.name for p in layout.REFERENCE.glob("*.py"))
    assert sorted(p.name for p in written) == committed
    for path in written:
        assert path.read_text() == (layout.REFERENCE / path.name).read_text(), (
            f"attention_course/reference/{path.name} is out of date with solutions/: run `make release`"
        )


WINDOW = 4  # lines in a row: short enough to catch a copied body, long enough to be unique to it


def _code_lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def _solution_windows(assignment: str) -> set[tuple[str, ...]]:
    """Every run of WINDOW consecutive code lines of the first solution region of ``assignment``'s
    cells (a later region may repeat an earlier chapter's code, as GroupedQueryAttention's key-value
    cache does chapter 8's, which a later chapter's package holds by right)."""
    windows = set()
    for cell in nbt.read(nbt.source_notebook(assignment)).cells:
        for region in regions.contents(cell.source, regions.SOLUTION)[:1] if nbt.is_solution_cell(cell) else ():
            lines = _code_lines(region)
            windows.update(tuple(lines[i:i + WINDOW]) for i in range(len(lines) - WINDOW + 1))
    return windows


@pytest.mark.parametrize("assignment", layout.assignments())
def test_a_chapter_package_holds_no_solution_of_that_chapter_or_later(assignment, tmp_path):
    """What the learner of chapter N installs and what the sandbox mounts while it grades it."""
    package = chapter_view.build_package_tree(assignment, tmp_path)
    lines = [ln for p in sorted(package.rglob("*.py")) for ln in _code_lines(p.read_text())]
    shipped = {tuple(lines[i:i + WINDOW]) for i in range(len(lines) - WINDOW + 1)}
    here = layout.assignments().index(assignment)
    for later in layout.assignments()[here:]:
        leaked = _solution_windows(later) & shipped
        assert not leaked, f"the package of {assignment} holds solution code of {later}: {sorted(leaked)[:2]}"
    # and no module but an earlier chapter's solutions defines an exercise of this chapter or later
    exercises = {nbt.nbgrader_meta(c)["grade_id"] for later in layout.assignments()[here:]
                 for c in nbt.read(nbt.source_notebook(later)).cells if nbt.is_solution_cell(c)}
    for path in sorted(package.rglob("*.py")):
        if path.parent.name == "reference" and path.stem < layout.chapter_of(assignment):
            continue
        defined = {n.name for n in ast.parse(path.read_text()).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        assert not defined & exercises, f"{path.relative_to(tmp_path)} defines {sorted(defined & exercises)}"
    for earlier in layout.assignments()[:here]:  # what later chapters build on is there
        module = package / "reference" / f"{layout.chapter_of(earlier)}.py"
        assert module.read_text() == (layout.REFERENCE / module.name).read_text()
    assert not list(package.rglob("__pycache__"))
    files = sorted(p.relative_to(package).as_posix() for p in package.rglob("*") if p.is_file())
    source = [p.relative_to(layout.PACKAGE).as_posix() for p in layout.PACKAGE.rglob("*")
              if p.is_file() and "__pycache__" not in p.parts and p.relative_to(layout.PACKAGE).parts[0] != "locale"]
    # and every language's messages.po compiled (the clone's own copy in locale/ is a build product)
    catalogs = [f"locale/{po.parent.parent.name}/LC_MESSAGES/messages.mo" for po in compiled_catalogs.package_catalogs()]
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
    assert wheels == sorted(learner_package.wheel_name(a) for a in layout.assignments())
    assert len(done.stdout.splitlines()) == len(wheels)
