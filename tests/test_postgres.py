"""The grader with a PostgreSQL gradebook (``--db postgresql://...``), against a real server.

The server is a throwaway one (``tests/pg_server.py``). One assignment is graded for two
students (the solution and the blank learner notebook) and the grades are read back from
the database with nbgrader's own ``Gradebook``.
"""

from __future__ import annotations

import csv
import subprocess
import sys

import pytest

import layout

import notebook_tools as nbt
from pg_server import postgres_url  # noqa: F401 - the fixture

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("postgres")]

ASSIGNMENT = "ch01_attention_pooling"


@pytest.fixture(scope="module")
def graded(postgres_url, tmp_path_factory):
    subs = tmp_path_factory.mktemp("submissions")
    out = tmp_path_factory.mktemp("graded-postgres")
    nbt.lay_out_solution_and_blank(subs, [ASSIGNMENT])
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(subs), "--out", str(out),
         "--db", postgres_url, "--workers", "2"],
        cwd=nbt.ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_grades_csv_full_marks_and_zero(graded):
    rows = {r["student_id"]: r for r in csv.DictReader(open(graded / "grades.csv"))}
    assert sorted(rows) == ["blank", "solution"]
    full, blank = rows["solution"], rows["blank"]
    assert full["assignment"] == blank["assignment"] == ASSIGNMENT
    assert float(full["max_score"]) > 0
    assert float(full["score"]) == float(full["max_score"]), full
    assert float(blank["score"]) == 0.0, blank
    assert full["status"] == blank["status"] == "graded"
    # the books were kept in PostgreSQL, not in the default SQLite file
    assert not (graded / "course" / "gradebook.db").exists()


def test_the_grades_are_in_the_postgres_database(graded, postgres_url):
    from nbgrader.api import Gradebook

    source = nbt.read(layout.source_notebooks(ASSIGNMENT)[0])
    tests = sorted(nbt.grade_ids(source, nbt.is_test_cell))
    gb = Gradebook(postgres_url)
    try:
        assert gb.engine.dialect.name == "postgresql"
        assert sorted(s.id for s in gb.students) == ["blank", "solution"]
        assignment = gb.find_assignment(ASSIGNMENT)
        assert sorted(c.name for nb in assignment.notebooks for c in nb.grade_cells) == tests
        max_score = float(assignment.max_score)
        rows = {r["student_id"]: r for r in csv.DictReader(open(graded / "grades.csv"))}
        assert max_score == float(rows["solution"]["max_score"]) > 0
        for student, expected in (("solution", max_score), ("blank", 0.0)):
            submission = gb.find_submission(ASSIGNMENT, student)
            assert float(submission.score) == expected, (student, submission.score)
            grades = [g for nb in submission.notebooks for g in nb.grades]
            assert sorted(g.name for g in grades) == tests
            for g in grades:
                assert float(g.auto_score) == (float(g.max_score) if student == "solution" else 0.0), (student, g.name)
    finally:
        gb.close()
        gb.engine.dispose()  # no connection left open when the server stops
