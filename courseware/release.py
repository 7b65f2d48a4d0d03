"""The learner notebooks: ``notebooks/<assignment>/`` released from ``solutions/<assignment>/``, and
``notebooks/<language>/<assignment>/`` released from the same notebooks translated by their catalogs."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import nbformat

from autograder.books import Books
from autograder.course import write_config
from courseware import learner_package, translations
from layout import NOTEBOOKS, source_notebooks
from layout.regions import CODE_STUB


def release(assignments_: list[str], target_dir: Path = NOTEBOOKS, wheels_url: str | None = None) -> list[Path]:
    """Regenerate ``target_dir/<assignment>/`` (``notebooks/`` by default) from ``solutions/<assignment>/``
    with nbgrader's ``generate_assignment`` (solutions stubbed, hidden tests removed).

    Each learner notebook gets, before its first code cell, the cell that installs its
    chapter's course package from ``wheels_url`` (default: the published book's, from
    ``_config.yml``; see :mod:`courseware.learner_package`)."""
    written = []
    with tempfile.TemporaryDirectory(prefix="attention-release-") as tmp:
        root = Path(tmp)
        write_config(root, db_url=f"sqlite:///{root / 'gradebook.db'}")
        books = Books(root)  # nbgrader in this process: one start for every assignment
        for assignment in assignments_:
            books.generate(assignment)
            written += _install(root / "release" / assignment, target_dir / assignment,
                                learner_package.install_cell(assignment, wheels_url))
    return written


def release_translated(assignments_: list[str], target_dir: Path = NOTEBOOKS, wheels_url: str | None = None,
                       language: str = translations.LANGUAGE) -> tuple[list[Path], dict[str, str]]:
    """Regenerate ``target_dir/<language>/<assignment>/`` as :func:`release` does ``target_dir/<assignment>/``,
    from the source notebooks translated by the catalogs (:mod:`courseware.translations`), through the
    same ``nbgrader generate_assignment``: the same cells, ``grade_id``\\ s, tests and points, the
    translated stub in each solution region, and a first cell that installs the package in the
    notebook's language, then calls ``attention_course.i18n.use_language``. The notebook's metadata
    says its language: ``metadata["attention_course"]["language"]``.

    An assignment whose catalog (or the shared one) is not complete (entries missing, empty or fuzzy,
    or the catalog behind the English: ``make translations``) gets no translated notebook, and an
    older one is removed, so that none is ever out of date; it is returned in the second value with
    why. A translation that cannot go in its place raises
    :class:`~courseware.translations.TranslationError`, naming the notebook and the entry."""
    written, skipped = [], {}
    common = translations.status(translations.COMMON, language)
    with tempfile.TemporaryDirectory(prefix=f"attention-release-{language}-") as tmp:
        root = Path(tmp)
        books = None
        if common.complete:
            stub = translations.translated_code(CODE_STUB, translations.STUB_LOCATION, language)
            write_config(root, db_url=f"sqlite:///{root / 'gradebook.db'}", code_stub=stub)
            books = Books(root)
        for assignment in assignments_:
            target = target_dir / language / assignment
            state = translations.status(assignment, language)
            if not (common.complete and state.complete):
                skipped[assignment] = "; ".join(s.summary() for s in (state, common) if not s.complete)
                if target.exists():
                    shutil.rmtree(target)
                continue
            sources = [_translated_source(path, root / "translated", language) for path in source_notebooks(assignment)]
            books.generate(assignment, sources)
            written += _install(root / "release" / assignment, target,
                                translations.translated_install_cell(assignment, wheels_url, language), language)
    return written, skipped


def _translated_source(path: Path, folder: Path, language: str) -> Path:
    nb = translations.translated_notebook(path, language)
    nb.metadata["attention_course"] = {"language": language}
    out = folder / path.parent.name / path.name
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out)
    return out


def _install(released: Path, target: Path, install_cell, language: str | None = None) -> list[Path]:
    """Copy nbgrader's release folder to ``target``, each notebook with ``install_cell`` first
    (and, in another language than English, its language in the metadata)."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(released, target)
    written = []
    for path in sorted(target.glob("*.ipynb")):
        # what a learner needs beyond nbgrader's release: a first cell that installs the chapter's
        # course package where it is missing (Colab, a laptop)
        nb = nbformat.read(path, as_version=4)
        nb = learner_package.with_install_cell(nb, target.name, cell=install_cell)
        if language:
            nb.metadata["attention_course"] = {"language": language}
        nbformat.write(nb, path)
        written.append(path)
    return written
