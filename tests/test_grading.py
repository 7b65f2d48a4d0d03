"""End-to-end grading through `make grade`: the solution scores full marks, the released
notebook scores 0, and every output (CSV, feedback, report) says so. Bad instructor input
gets one clear line and a non-zero exit."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys

import pytest

from autograder import course

import notebook_tools as nbt

pytestmark = pytest.mark.xdist_group("grading")


def _grade_cli(*args, cwd=nbt.ROOT):
    return subprocess.run(
        [sys.executable, "-m", "autograder", "grade", *map(str, args)],
        cwd=cwd, capture_output=True, text=True,
    )


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Two submissions per assignment, graded once through `make grade`."""
    subs = tmp_path_factory.mktemp("submissions")
    out = tmp_path_factory.mktemp("graded")
    for assignment in course.assignments():
        for student, origin in (("solution", nbt.SOLUTIONS), ("blank", nbt.NOTEBOOKS)):
            folder = subs / student / assignment
            folder.mkdir(parents=True)
            for nb in (origin / assignment).glob("*.ipynb"):
                shutil.copy(nb, folder / nb.name)
    done = subprocess.run(
        ["make", "--no-print-directory", "grade", f"SUBMISSIONS={subs}", f"OUT={out}"],
        cwd=nbt.ROOT, capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.mark.slow
def test_grades_csv_full_marks_and_zero(graded):
    rows = list(csv.DictReader(open(graded / "grades.csv")))
    assert {"student_id", "assignment", "score", "max_score"} <= set(rows[0])
    seen = {(r["student_id"], r["assignment"]): r for r in rows}
    assert len(seen) == len(rows) == 2 * len(course.assignments())
    for assignment in course.assignments():
        full, blank = seen["solution", assignment], seen["blank", assignment]
        assert float(full["max_score"]) > 0
        assert float(full["score"]) == float(full["max_score"]), full
        assert float(blank["score"]) == 0.0, blank
        assert full["status"] == blank["status"] == "graded"


@pytest.mark.slow
def test_report_lists_every_test_cell(graded):
    report = json.loads((graded / "report.json").read_text())
    for entry in report:
        path = course.source_notebooks(entry["assignment"])[0]
        expected = nbt.grade_ids(nbt.read(path), nbt.is_test_cell)
        assert sorted(t["test"] for t in entry["tests"]) == sorted(expected)
        if entry["student_id"] == "solution":
            assert all(t["passed"] and t["error"] is None for t in entry["tests"]), entry
        else:
            for t in entry["tests"]:
                assert not t["passed"] and t["points"] == 0
                assert "NotImplementedError" in t["error"], t


@pytest.mark.slow
def test_feedback_page_per_submission(graded):
    for assignment in course.assignments():
        for student in ("solution", "blank"):
            pages = list((graded / "feedback" / student / assignment).glob("*.html"))
            assert len(pages) == len(course.source_notebooks(assignment))
            assert "Score" in pages[0].read_text() or "score" in pages[0].read_text()


@pytest.mark.parametrize(
    "make_input, message",
    [
        (lambda tmp: tmp / "does-not-exist", "does not exist"),
        (lambda tmp: tmp, "no submissions"),
        (lambda tmp: (tmp / "ann" / "ch99_nothing").mkdir(parents=True) or tmp, "unknown assignment 'ch99_nothing'"),
    ],
    ids=["wrong-path", "empty-folder", "unknown-assignment"],
)
def test_bad_input_is_one_clear_line(tmp_path, make_input, message):
    done = _grade_cli(make_input(tmp_path), "--out", tmp_path / "out")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], done.stderr


def test_a_broken_or_misnamed_notebook_is_a_zero_with_a_reason(tmp_path):
    assignment = course.assignments()[0]
    name = course.source_notebooks(assignment)[0].name
    broken = tmp_path / "subs" / "broken" / assignment
    broken.mkdir(parents=True)
    (broken / name).write_text("{not json")
    misnamed = tmp_path / "subs" / "misnamed" / assignment
    misnamed.mkdir(parents=True)
    shutil.copy(nbt.SOLUTIONS / assignment / name, misnamed / "my_work.ipynb")
    done = _grade_cli(tmp_path / "subs", "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    rows = {r["student_id"]: r for r in csv.DictReader(open(tmp_path / "out" / "grades.csv"))}
    assert rows["broken"]["score"] == "0" and "not a valid notebook" in rows["broken"]["reason"]
    assert rows["misnamed"]["score"] == "0" and f"missing notebook {name}" in rows["misnamed"]["reason"]
    assert float(rows["broken"]["max_score"]) > 0
