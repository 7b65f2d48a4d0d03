"""The nbgrader way on a hub, end to end: a real exchange directory, an instructor's course
folder and two student homes, each actor running nbgrader's own commands as on a JupyterHub
(the Assignment List extension runs the same exchange code for a student).

instructor: release_assignment -> students: list, fetch_assignment, submit ->
instructor: collect, `make grade` over the collected submitted/ folder, release_feedback ->
students: fetch_feedback.

Each actor has a home of their own (their files, their ``~/.jupyter/nbgrader_config.py`` and
nbgrader's submission cache). As on a hub whose servers all run as one Unix user (JupyterHub's
Docker and Kubernetes spawners: ``jovyan``), a student's id is not their Unix user: their
config names it (``CourseDirectory.student_id``; on such a hub nbgrader reads it from
``$JUPYTERHUB_USER`` instead).
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import notebook_tools as nbt
from courseware import learner_package

ASSIGNMENT = "ch01_attention_pooling"  # NumPy only: quick to grade
COURSE_ID = "attention"
STUDENTS = {"ann": "solves every exercise", "bob": "hands in the notebook untouched"}


def _home(root: Path, name: str, exchange: Path, settings: str = "") -> Path:
    """``name``'s home, with the nbgrader config that a hub gives everyone
    (``/etc/jupyter/nbgrader_config.py``) plus ``settings``."""
    home = root / "home" / name
    (home / ".jupyter").mkdir(parents=True)
    (home / ".jupyter" / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821\n"
        f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
        f"c.Exchange.root = {str(exchange)!r}\n" + settings
    )
    return home


def _nbgrader(cwd: Path, home: Path, *args: str) -> str:
    """Run ``nbgrader ARGS`` in ``cwd`` as the user whose home is ``home``; returns what it logged.

    In this process, as nbgrader's own test suite runs its commands (``nbgrader.tests.run_nbgrader``):
    the application reads its configuration from ``home`` as a process of its own would, and is
    reset after, so that the next command starts from nothing (each start of a process of its own
    cost about 1.7 CPU-seconds, twelve times)."""
    import logging
    from io import StringIO

    from jupyter_core.application import NoStart
    from nbgrader.apps import NbGraderApp

    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env.update(HOME=str(home), PATH=str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""))  # alembic
    saved, log = os.environ.copy(), StringIO()
    app = None
    try:
        os.environ.clear()
        os.environ.update(env)
        with contextlib.chdir(cwd):
            app = NbGraderApp.instance()
            app.initialize(list(args))
            app.init_logging(logging.StreamHandler, [log], color=False, subapps=True)
            app.start()
        code = 0
    except NoStart:  # how a command with a sub-application ends
        code = 0
    except SystemExit as exit:
        code = exit.code or 0
    finally:
        if app is not None:
            app.reset()
        os.environ.clear()
        os.environ.update(saved)
    assert code == 0, f"nbgrader {' '.join(args)} in {cwd} exited with {code}:\n{log.getvalue()}"
    return log.getvalue()


@pytest.mark.slow
def test_release_fetch_submit_collect_grade_feedback(tmp_path):
    exchange = tmp_path / "srv" / "nbgrader" / "exchange"
    # every submission is owned by the one Unix user: nothing for collect to cross-check
    teacher = _home(tmp_path, "teacher", exchange, "c.ExchangeCollect.check_owner = False\n")
    course_root = teacher / COURSE_ID
    # The instructor's course folder: in release/<assignment>/, the learner notebook and the
    # chapter's wheel, which the notebook's first cell installs from its own folder.
    release = course_root / "release" / ASSIGNMENT
    shutil.copytree(nbt.NOTEBOOKS / ASSIGNMENT, release)
    wheel = learner_package.build_wheel(ASSIGNMENT, release)
    released = (release / "attention_pooling.ipynb").read_bytes()
    _nbgrader(course_root, teacher, "release_assignment", ASSIGNMENT)
    assert (exchange / COURSE_ID / "outbound" / ASSIGNMENT / "attention_pooling.ipynb").read_bytes() == released

    homes = {name: _home(tmp_path, name, exchange, f"c.CourseDirectory.student_id = {name!r}\n") for name in STUDENTS}
    for name, home in homes.items():
        assert ASSIGNMENT in _nbgrader(home, home, "list"), f"{name} does not see the released assignment"
        _nbgrader(home, home, "fetch_assignment", ASSIGNMENT)
        fetched = home / ASSIGNMENT / "attention_pooling.ipynb"
        assert fetched.read_bytes() == released
        assert (home / ASSIGNMENT / wheel.name).read_bytes() == wheel.read_bytes(), f"{name} did not get the wheel"
        if name == "ann":
            nbformat.write(nbt.solved(nbt.read(fetched), ASSIGNMENT), fetched)
        _nbgrader(home, home, "submit", ASSIGNMENT)

    _nbgrader(course_root, teacher, "collect", ASSIGNMENT)
    submitted = course_root / "submitted"
    assert sorted(p.name for p in submitted.iterdir()) == sorted(STUDENTS)

    # `make grade` over what collect gathered, its outputs in the course folder, so that its
    # feedback pages land in feedback/<student>/<assignment>/ where release_feedback looks.
    done = subprocess.run(
        ["make", "--no-print-directory", "grade", f"SUBMISSIONS={submitted}", f"OUT={course_root}"],
        cwd=nbt.ROOT, capture_output=True, text=True, timeout=1800,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["student_id"]: r for r in csv.DictReader(open(course_root / "grades.csv"))}
    assert float(rows["ann"]["max_score"]) > 0 and rows["ann"]["score"] == rows["ann"]["max_score"], rows
    assert rows["bob"]["score"] == "0", rows

    _nbgrader(course_root, teacher, "release_feedback", ASSIGNMENT)
    for name, home in homes.items():
        _nbgrader(home, home, "fetch_feedback", ASSIGNMENT)
        pages = list((home / ASSIGNMENT / "feedback").glob("*/attention_pooling.html"))
        assert len(pages) == 1, f"{name} fetched {pages}"
        graded = course_root / "feedback" / name / ASSIGNMENT / "attention_pooling.html"
        assert pages[0].read_bytes() == graded.read_bytes(), f"{name} got another page than the grader wrote"
        text = pages[0].read_text()
        # the page's first score is the notebook's: "attention_pooling (Score: 33.0 / 33.0)"
        shown = re.search(r"Score: ([\d.]+) / ([\d.]+)", re.sub(r"<[^>]+>", " ", text))
        row = rows[name]
        assert shown and (float(shown[1]), float(shown[2])) == (float(row["score"]), float(row["max_score"])), (
            f"{name}'s feedback shows {shown and shown[0]}, not {row['score']} / {row['max_score']}"
        )
        if name == "bob":
            assert "NotImplementedError" in text, "bob's feedback does not say an exercise is unfinished"
