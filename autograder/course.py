"""Where the course's files are, and how nbgrader is run over them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "solutions"
NOTEBOOKS = REPO / "notebooks"

class GradingError(Exception):
    """A problem with the instructor's input, reported as one line."""


def assignments() -> list[str]:
    """The assignments, in course order: the folders of ``solutions/`` that hold a notebook."""
    return sorted(p.name for p in SOLUTIONS.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def source_notebooks(assignment: str) -> list[Path]:
    return sorted((SOLUTIONS / assignment).glob("*.ipynb"))


def nbgrader(root: Path, *args: str, db_url: str, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Run one nbgrader command over the course folder ``root``.

    Every setting is passed on the command line so that no ``nbgrader_config.py``
    lying around (in the instructor's home or the current folder) changes a grade.
    """
    cmd = [
        sys.executable, "-m", "nbgrader", *args,
        f"--CourseDirectory.root={root}",
        f"--CourseDirectory.db_url={db_url}",
        "--log-level=WARN",
        *extra,
    ]
    # nbgrader calls the ``alembic`` command of its own environment.
    bindir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
        "JUPYTER_CONFIG_DIR": str(root / ".jupyter"),
    }
    return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)


def generate(root: Path, assignment: str, db_url: str) -> None:
    """Copy ``assignment``'s source notebooks into ``root/source`` and run
    ``nbgrader generate_assignment``: it records the cells in the gradebook and writes
    the learner version (solutions stubbed, hidden tests removed) to ``root/release``."""
    source = root / "source" / assignment
    source.mkdir(parents=True, exist_ok=True)
    for old in source.glob("*.ipynb"):
        old.unlink()
    for path in source_notebooks(assignment):
        shutil.copy2(path, source / path.name)
    done = nbgrader(root, "generate_assignment", assignment, "--force", db_url=db_url)
    if done.returncode != 0:
        raise GradingError(f"nbgrader generate_assignment {assignment} failed:\n{done.stderr.strip()}")


def release(assignments_: list[str]) -> list[Path]:
    """Regenerate ``notebooks/<assignment>/`` from ``solutions/<assignment>/``."""
    written = []
    with tempfile.TemporaryDirectory(prefix="attention-release-") as tmp:
        root = Path(tmp)
        for assignment in assignments_:
            generate(root, assignment, db_url=f"sqlite:///{root / 'gradebook.db'}")
            target = NOTEBOOKS / assignment
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(root / "release" / assignment, target)
            written.extend(sorted(target.glob("*.ipynb")))
    return written
