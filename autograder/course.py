"""How nbgrader is run over the course's files (where they are: :mod:`layout`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from layout import source_notebooks
from layout.regions import CODE_STUB


class GradingError(Exception):
    """A problem with the instructor's input, reported as one line."""


def write_config(root: Path, db_url: str, code_stub: str = CODE_STUB) -> None:
    """Write the course folder's ``nbgrader_config.py``: the only configuration nbgrader
    reads (``JUPYTER_CONFIG_DIR`` points inside ``root``, so no instructor-wide file applies).
    ``code_stub``: what replaces a solution region (a translated notebook's stub is translated)."""
    root.mkdir(parents=True, exist_ok=True)
    settings = {
        "CourseDirectory.root": str(root),
        "CourseDirectory.db_url": db_url,
        # nbgrader's default "" makes no course row, and PostgreSQL (unlike SQLite)
        # enforces the assignments' foreign key to it
        "CourseDirectory.course_id": "default_course",
        "ClearSolutions.code_stub": {"python": code_stub},
    }
    lines = [
        "from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor",
        "from nbgrader.preprocessors import (AssignLatePenalties, DeduplicateIds,",
        "    GetGrades, LimitOutput, OverwriteCells, OverwriteKernelspec, SaveAutoGrades)",
        "from autograder.feedback import HideHiddenTests",
        "c = get_config()  # noqa: F821 - provided by traitlets",
    ]
    lines += [f"c.{key} = {value!r}" for key, value in settings.items()]
    lines += [
        "# The judge (autograder.judge) has run the notebook in its sandbox and written each",
        "# test's verdict as the cell's output; nbgrader keeps the books: no ClearOutput, no Execute.",
        "# No CheckCellMetadata: the graded notebook is assembled from the course's source notebook,",
        "# whose metadata generate_assignment has checked; checking it twice per submission (a JSON",
        "# schema check per cell) was a third of the gradebook entry's time.",
        "c.Autograde.sanitize_preprocessors = [DeduplicateIds, OverwriteKernelspec, OverwriteCells]",
        "c.Autograde.autograde_preprocessors = [ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,",
        "    AssignLatePenalties]",
        "c.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]",
    ]
    (root / "nbgrader_config.py").write_text("\n".join(lines) + "\n")


def nbgrader(
    root: Path,
    *args: str,
    preexec_fn=None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    """Run one nbgrader command in the course folder ``root`` (see :func:`write_config`)."""
    cmd = [sys.executable, "-m", "nbgrader", *args, "--log-level=WARN"]
    # nbgrader calls the ``alembic`` command of its own environment.
    bindir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
        "JUPYTER_CONFIG_DIR": str(root / ".jupyter"),
    }
    try:
        done = subprocess.run(
            cmd, cwd=root, env=env, capture_output=True, text=True, preexec_fn=preexec_fn, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, 124, "", f"[nbgrader | ERROR] ran past the {timeout:g} s limit")
    # nbgrader logs a broken config file and goes on without it; a grade must never
    # depend on settings that silently did not apply.
    if "Exception while loading config file" in done.stderr:
        raise GradingError(f"nbgrader could not load {root / 'nbgrader_config.py'}:\n{done.stderr.strip()}")
    return done


def copy_source(root: Path, assignment: str, notebooks: list[Path] | None = None) -> None:
    """Make ``root/source/<assignment>/`` hold exactly ``assignment``'s source notebooks (or
    ``notebooks``, translations of them)."""
    source = root / "source" / assignment
    source.mkdir(parents=True, exist_ok=True)
    for old in source.glob("*.ipynb"):
        old.unlink()
    for path in source_notebooks(assignment) if notebooks is None else notebooks:
        shutil.copy2(path, source / path.name)

