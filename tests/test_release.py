"""notebooks/ is exactly what `make release` generates from solutions/."""

from __future__ import annotations

import json

import pytest

from autograder import course

import notebook_tools as nbt


@pytest.mark.slow
def test_learner_notebooks_are_in_sync_with_solutions(tmp_path):
    course.release(course.assignments(), target_dir=tmp_path)
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
