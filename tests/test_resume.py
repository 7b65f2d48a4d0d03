"""A batch survives `kill -9`: nothing already graded is lost, the same command finishes
the rest and writes the CSV an uninterrupted run writes; re-grading replaces a grade."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from nbgrader.api import Gradebook

import notebook_tools as nbt

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("resume")]

ASSIGNMENT = "ch01_attention_pooling"


def _grade(subs, out, **popen):
    cmd = [sys.executable, "-m", "autograder", "grade", str(subs), "--out", str(out), "--workers", "1"]
    return subprocess.Popen(cmd, cwd=nbt.ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


@pytest.fixture(scope="module")
def submissions(tmp_path_factory):
    subs = tmp_path_factory.mktemp("resume-subs")
    name = nbt.source_notebook(ASSIGNMENT).name
    solved = nbt.read(nbt.source_notebook(ASSIGNMENT))
    blank = nbt.read(nbt.NOTEBOOKS / ASSIGNMENT / name)
    half = nbt.half_done(ASSIGNMENT)
    nbt.lay_out(subs, ASSIGNMENT, {"ann": solved, "ben": blank, "cem": half, "dia": solved})
    return subs


@pytest.fixture(scope="module")
def uninterrupted(submissions, tmp_path_factory):
    out = tmp_path_factory.mktemp("resume-whole")
    done = _grade(submissions, out)
    stdout, stderr = done.communicate(timeout=900)
    assert done.returncode == 0, stderr
    return out


def test_kill_minus_nine_loses_nothing_and_resumes(submissions, uninterrupted, tmp_path):
    out = tmp_path / "out"
    first = _grade(submissions, out, start_new_session=True)
    ledger = out / "course" / "ledger"
    deadline = time.monotonic() + 600
    while not (ledger.exists() and len(list(ledger.rglob("*.json"))) >= 2):
        assert first.poll() is None, "the batch ended before it could be interrupted"
        assert time.monotonic() < deadline, "no submission was graded in time"
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    kept = sorted(p.parent.name for p in ledger.rglob("*.json"))
    assert len(kept) >= 2

    second = _grade(submissions, out)
    stdout, stderr = second.communicate(timeout=900)
    assert second.returncode == 0, stderr
    regraded = [line.split("/")[0] for line in stdout.splitlines() if f"/{ASSIGNMENT}:" in line]
    assert not set(regraded) & set(kept), f"graded again after the kill: {set(regraded) & set(kept)}"
    assert sorted(regraded + kept) == ["ann", "ben", "cem", "dia"]
    assert (out / "grades.csv").read_text() == (uninterrupted / "grades.csv").read_text()


def test_regrading_replaces_the_grade(submissions, uninterrupted, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(uninterrupted, out)
    # the course folder records absolute paths: regrading in a copy must still work
    name = nbt.source_notebook(ASSIGNMENT).name
    subs = tmp_path / "subs"
    shutil.copytree(submissions, subs)
    shutil.copy(nbt.source_notebook(ASSIGNMENT), subs / "ben" / ASSIGNMENT / name)  # ben resubmits, solved
    done = _grade(subs, out)
    stdout, stderr = done.communicate(timeout=900)
    assert done.returncode == 0, stderr
    regraded = [line.split("/")[0] for line in stdout.splitlines() if f"/{ASSIGNMENT}:" in line]
    assert regraded == ["ben"], stdout
    rows = (out / "grades.csv").read_text().splitlines()
    ben = [r for r in rows if r.startswith("ben,")]
    assert len(ben) == 1 and ben[0].split(",")[2] == ben[0].split(",")[3], ben
    with Gradebook(f"sqlite:///{out / 'course' / 'gradebook.db'}") as gb:
        assert len(gb.find_student("ben").submissions) == 1
