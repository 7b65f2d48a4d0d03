"""What the code of chapter N may import: the course package without the answers of chapter N
or a later one. The one interface between grading and the learner's material.

The package of chapter N (:func:`build_package_tree`) is the course package with the
reference modules of chapters N and later (``attention_course/reference/chNN.py``, generated
from ``solutions/`` by :mod:`courseware.reference_modules`) replaced by a stub that raises
``ImportError`` with a plain sentence. The grader's sandbox mounts that tree in place of the
package while it grades chapter N (:func:`package_view`), and the learner's download for
chapter N (:mod:`courseware.learner_package`) is built from the same tree, so neither holds
an answer of chapter N or later.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import textwrap
from pathlib import Path

from autograder import catalogs
from layout import PACKAGE, REPO, chapter_of


def N_(text: str) -> str:
    """Marks ``text`` for the catalog (``messages.po``); translated where it is shown."""
    return text


# what a learner reads on importing a chapter's solutions that the package leaves out; the stub
# module translates it with the package's catalog (attention_course.i18n)
WITHHELD = N_("attention_course.reference.{module} holds the course's solutions of chapter {chapter}; the package "
              "of chapter {here} (and the grader, while it grades chapter {here}) leaves out the solutions of "
              "chapter {here} and later. Write the exercise yourself: an answer that uses the course's solution "
              "earns no points.")


def _stub_source(chapter: str, for_assignment: str) -> str:
    here = int(chapter_of(for_assignment)[2:])
    number = int(chapter[2:])
    earlier = {1: "no chapter's solutions", 2: "the solutions of chapter 1 only"}.get(
        here, f"the solutions of chapters 1 to {here - 1} only")
    doc = textwrap.fill(
        f"A placeholder, left here on purpose. In the course's repository this file holds the course's "
        f"solutions of chapter {number}, generated from that chapter's exercise notebook. This copy of the "
        f"package is chapter {here}'s: the one a learner installs for chapter {here}'s notebook, and the one "
        f"the grader uses while it grades it. It holds {earlier}, so the solutions of chapter {number} are not "
        f"here: importing this module raises ImportError with the sentence below, rather than an unexplained "
        f"\"No module named\". Nothing that chapter {here}'s notebook uses imports it.", width=92)
    return (f'"""{doc}"""\n\nfrom attention_course.i18n import gettext\n\n'
            f"raise ImportError(gettext({WITHHELD!r}).format(module={chapter!r}, chapter={number}, here={here}))\n")


def build_package_tree(assignment: str, dest: Path) -> Path:
    """Write ``dest/attention_course/``: the course package as chapter ``assignment`` may
    have it (the shared infrastructure, the reference modules of the chapters before it, a
    stub for the others); returns that folder."""
    here = int(chapter_of(assignment)[2:])
    package = dest / "attention_course"
    if package.exists():
        shutil.rmtree(package)
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "locale"))
    catalogs.compile_package_catalogs(package)
    for module in sorted((package / "reference").glob("ch*.py")):
        chapter = module.stem
        if int(chapter[2:]) >= here:
            module.write_text(_stub_source(chapter, assignment))
    return package


def views_folder() -> Path:
    """Where :func:`package_view` caches the views: the grading user's own cache folder
    (``$XDG_CACHE_HOME`` or ``~/.cache``), made private. Not the shared temporary folder: a
    view there could be planted by another user of the machine before the grader made it."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = cache / "attention-course" / "views"
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder.parent, 0o700)
    return folder


def package_view(assignment: str) -> Path:
    """A read-only-ready copy of chapter ``assignment``'s package for the sandbox, cached in
    :func:`views_folder` by the package's content (rebuilt when it changes)."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(PACKAGE)).encode())
        digest.update(path.read_bytes())
    for path in catalogs.package_catalogs():  # compiled into the view
        digest.update(str(path.relative_to(REPO)).encode())
        digest.update(path.read_bytes())
    root = views_folder() / f"{assignment}-{digest.hexdigest()[:16]}"
    package = root / "attention_course"
    if not (root / ".complete").is_file():
        staging = Path(tempfile.mkdtemp(prefix=f"{assignment}-", dir=root.parent))
        build_package_tree(assignment, staging)
        (staging / ".complete").touch()
        try:
            staging.rename(root)  # atomic: parallel judges never see a half-written view
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)  # another judge made it first
    return package
