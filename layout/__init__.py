"""The course's layout, the ground floor every other room reads: where the solutions, notebooks, course package and catalogs are, the assignments, a chapter's number; layout.regions: a cell's solution and hidden-test regions.
Read by the grader, the courseware, the benchmarks and the tests alike; nothing of grading or releasing is here.
May import: layout and the standard library; nothing else (never autograder, courseware, benchmarks or attention_course).
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "solutions"
NOTEBOOKS = REPO / "notebooks"
PACKAGE = REPO / "attention_course"
REFERENCE = PACKAGE / "reference"
LOCALE = REPO / "locale"  # the translations: locale/<language>/LC_MESSAGES/*.po


def assignments() -> list[str]:
    """The assignments, in course order: the folders of ``solutions/`` that hold a notebook."""
    return sorted(p.name for p in SOLUTIONS.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def source_notebooks(assignment: str) -> list[Path]:
    return sorted((SOLUTIONS / assignment).glob("*.ipynb"))


def chapter_of(assignment: str) -> str:
    """``"ch04"`` for ``"ch04_multihead_attention"``."""
    tag = assignment.split("_", 1)[0]
    if not (tag.startswith("ch") and tag[2:].isdigit()):
        raise ValueError(f"assignment {assignment!r} does not start with its chapter (chNN_...)")
    return tag
