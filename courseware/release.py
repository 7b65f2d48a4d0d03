"""The learner notebooks: ``notebooks/<assignment>/`` released from ``solutions/<assignment>/``."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import nbformat

from autograder.course import NOTEBOOKS, generate, write_config
from courseware import learner_package


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
        for assignment in assignments_:
            generate(root, assignment)
            target = target_dir / assignment
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(root / "release" / assignment, target)
            for path in sorted(target.glob("*.ipynb")):
                # what a learner needs beyond nbgrader's release: a first cell that installs
                # the chapter's course package where it is missing (Colab, a laptop)
                nb = nbformat.read(path, as_version=4)
                nbformat.write(learner_package.with_install_cell(nb, assignment, wheels_url), path)
                written.append(path)
    return written
