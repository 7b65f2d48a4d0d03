"""What a learner downloads for a chapter: the course package as a wheel, and the notebook cell
that installs it.

Chapter ``chNN``'s wheel, ``attention_course-<course version>+chNN-py3-none-any.whl``, holds
exactly what :func:`autograder.chapter_view.build_package_tree` gives that chapter's learner
(the shared infrastructure and the reference layers of the chapters before it; never an answer
of chapter NN or a later one). ``make book`` publishes the wheels in the book's
``_static/wheels/`` (``book/_ext/learner_links.py``); ``make release`` writes them to
``_build/wheels/`` too, for an instructor's hub. The first code cell of every learner notebook
(:func:`install_cell`, put there by ``python -m courseware release``) installs its chapter's
wheel from the published book (``html.baseurl`` in ``_config.yml``) or from the notebook's own
folder.

``python -m courseware wheels DEST`` writes every chapter's wheel into ``DEST``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import tempfile
import tomllib
import zipfile
from pathlib import Path

import nbformat
import yaml

import layout
from autograder.chapter_view import build_package_tree
from layout import chapter_of

# Wheel entries get this fixed time, so the same sources give byte-identical wheels.
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
DIST_NAME = "attention-course"
WHEELS_DIR = "_static/wheels"  # inside the built book


def _project() -> dict:
    return tomllib.loads((layout.REPO / "pyproject.toml").read_text())["project"]


def wheel_version(assignment: str) -> str:
    """The course's version with the chapter as its local label, e.g. ``0.1.0+ch04``."""
    return f"{_project()['version']}+{chapter_of(assignment)}"


def wheel_name(assignment: str) -> str:
    return f"attention_course-{wheel_version(assignment)}-py3-none-any.whl"


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _metadata(assignment: str) -> str:
    project = _project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {DIST_NAME}",
        f"Version: {wheel_version(assignment)}",
        f"Summary: {project['description']} (for {assignment}: the chapters before it only)",
        f"Requires-Python: {project['requires-python']}",
        f"License: {project['license']}",
    ]
    lines += [f"Requires-Dist: {dep}" for dep in project["dependencies"]]
    return "\n".join(lines) + "\n"


def write_wheel(package: Path, assignment: str, dest_dir: Path) -> Path:
    """Pack the folder ``package`` (an ``attention_course/`` tree) as chapter ``assignment``'s
    wheel in ``dest_dir``; return its path. Compiled files (``__pycache__``) are left out."""
    if package.name != "attention_course" or not (package / "__init__.py").is_file():
        raise ValueError(f"{package} is not an attention_course package folder")
    dist_info = f"attention_course-{wheel_version(assignment)}.dist-info"
    entries: list[tuple[str, bytes]] = []
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            entries.append((path.relative_to(package.parent).as_posix(), path.read_bytes()))
    entries.append((f"{dist_info}/METADATA", _metadata(assignment).encode()))
    for licence in _project()["license-files"]:  # where bdist_wheel puts them, beside METADATA
        entries.append((f"{dist_info}/{licence}", (layout.REPO / licence).read_bytes()))
    wheel_meta = "Wheel-Version: 1.0\nGenerator: courseware.learner_package\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entries.append((f"{dist_info}/WHEEL", wheel_meta.encode()))
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in entries)
    entries.append((f"{dist_info}/RECORD", (record + f"{dist_info}/RECORD,,\n").encode()))

    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / wheel_name(assignment)
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    return target


def build_wheel(assignment: str, dest_dir: Path) -> Path:
    """Chapter ``assignment``'s wheel, built from what its learner may have, in ``dest_dir``."""
    with tempfile.TemporaryDirectory(prefix="attention-wheel-") as tmp:
        package = build_package_tree(assignment, Path(tmp))
        return write_wheel(package, assignment, dest_dir)


def build_wheels(dest_dir: Path, assignments: list[str] | None = None) -> list[Path]:
    """Every chapter's wheel (or those of ``assignments``) in ``dest_dir``."""
    return [build_wheel(a, dest_dir) for a in (layout.assignments() if assignments is None else assignments)]


# ------------------------------------------------------------------- the install cell


def published_wheels_url() -> str:
    """Where the published book serves the wheels (``<html.baseurl>/_static/wheels/``), or
    ``""`` when ``_config.yml`` names no published URL."""
    config = yaml.safe_load((layout.REPO / "_config.yml").read_text()) or {}
    base = str((config.get("html") or {}).get("baseurl") or "").strip()
    return f"{base.rstrip('/')}/{WHEELS_DIR}/" if base else ""


# The install cell is a plain code cell, read-only in Jupyter, found by this tag. Not an nbgrader
# cell: it is in no source notebook, and nbgrader's own autograde stops on a locked cell that
# its gradebook does not know ("the nbgrader metadata may be corrupted"), so an instructor
# grading with plain nbgrader could not grade the released notebooks.
INSTALL_TAG = "install"

_INSTALL_SOURCE = '''\
# Run this cell first. It installs this chapter's course package (attention_course) when it is
# missing, once; where the package is already importable (a clone of the course, a JupyterHub,
# the grader) it installs nothing.
import importlib.metadata, importlib.util, pathlib, subprocess, sys

COURSE_WHEEL = {wheel}
BOOK_WHEELS = {site}  # where the book publishes it ("": not published)


def install_course_package():
    wanted = COURSE_WHEEL.split("-")[1]
    try:
        installed = importlib.metadata.version("attention-course")
    except importlib.metadata.PackageNotFoundError:
        installed = ""
    # A chapter's package names its chapter in its version (0.1.0+ch01); any other
    # importable attention_course is the whole course, good for every chapter.
    if importlib.util.find_spec("attention_course") and (installed == wanted or "+ch" not in installed):
        version = f" ({{installed}})" if installed else ""
        print(f"attention_course{{version}} is already importable: nothing to install.")
        return
    source = COURSE_WHEEL if pathlib.Path(COURSE_WHEEL).is_file() else BOOK_WHEELS and BOOK_WHEELS + COURSE_WHEEL
    if not source:
        raise ModuleNotFoundError(
            f"attention_course is missing: download {{COURSE_WHEEL}} from this exercise's page in the book "
            "into the folder of this notebook (in Colab: upload it in the Files panel), then run this cell again.")
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", source],
                         capture_output=True, text=True)
    if pip.returncode != 0:
        raise RuntimeError(f"pip could not install {{source}}: {{pip.stderr.strip()[-1500:]}}")
    importlib.invalidate_caches()
    print(f"Installed attention_course {{wanted}} from {{source}}.")


install_course_package()'''

# A notebook in another language than English then sets the language of the course package's
# messages (attention_course.i18n), the package being there.
_LANGUAGE_SOURCE = '''

# The course package's messages (what a failing test says) in the language of this notebook. After
# a restart of the kernel the package reads it from the notebook by itself where Jupyter or VS Code
# tells the kernel which notebook it runs; elsewhere (Colab), run this cell again after a restart.
from attention_course.i18n import use_language

use_language({language})'''


def install_cell(assignment: str, wheels_url: str | None = None, language: str | None = None) -> nbformat.NotebookNode:
    """The learner notebook's first code cell: installs chapter ``assignment``'s wheel from
    ``wheels_url`` (default :func:`published_wheels_url`) or from the notebook's folder.
    A read-only cell tagged :data:`INSTALL_TAG`; graders run it as a cell of the notebook, and
    where the course package is importable (the grader's sandbox) it does nothing. With a
    ``language`` (``"zh_CN"``) it then calls ``attention_course.i18n.use_language(language)``; its
    words stay English here (:func:`courseware.translations.translated_install_cell` translates them)."""
    site = published_wheels_url() if wheels_url is None else wheels_url
    source = _INSTALL_SOURCE.format(wheel=json.dumps(wheel_name(assignment)), site=json.dumps(site))
    if language:
        source += _LANGUAGE_SOURCE.format(language=json.dumps(language))
    cell = nbformat.v4.new_code_cell(source)
    cell.id = INSTALL_TAG
    cell.metadata = nbformat.from_dict({"deletable": False, "editable": False, "tags": [INSTALL_TAG]})
    return cell


def is_install_cell(cell) -> bool:
    return INSTALL_TAG in cell.get("metadata", {}).get("tags", [])


def with_install_cell(nb: nbformat.NotebookNode, assignment: str, wheels_url: str | None = None,
                      cell: nbformat.NotebookNode | None = None) -> nbformat.NotebookNode:
    """``nb`` with :func:`install_cell` (or ``cell``, a translated one) before its first code cell
    (replacing an older one)."""
    cells = [c for c in nb.cells if not is_install_cell(c)]
    first_code = next((i for i, c in enumerate(cells) if c.cell_type == "code"), len(cells))
    nb.cells = cells[:first_code] + [cell or install_cell(assignment, wheels_url)] + cells[first_code:]
    return nb

