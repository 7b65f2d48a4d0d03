"""Grade a folder of submissions: sandboxed judges in parallel, nbgrader keeping the books.

Input layout: ``SUBMISSIONS/<student_id>/<assignment>/<notebook>.ipynb``.
Output (``OUT``):

* ``grades.csv``: one row per student and assignment (``student_id``, ``assignment``,
  ``score``, ``max_score``, ``status``, ``reason``), sorted;
* ``report.json``: every test cell's result per submission;
* ``feedback/<student_id>/<assignment>/<notebook>.html``: the pages to return;
* ``course/``: the nbgrader course folder (source, submitted, autograded, gradebook) and
  ``course/ledger/``, one file per graded submission.

For each submission, a judge process (:mod:`autograder.judge`) runs the student's code in
a sandbox and decides every test; up to ``workers`` judges run at once. The main process
alone writes to the gradebook (``nbgrader autograde`` over the judged notebook), one
submission at a time, so SQLite's single writer is never contended; feedback pages are
made at the end, one ``generate_feedback`` per assignment. Each finished submission is written to the ledger atomically: a batch that is
killed loses nothing already graded, and running the same command again grades only what
is missing or what changed (the submission, or the course's tests).
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from autograder import assemble, course
from autograder.feedback import localise_mathjax
from autograder.limits import Limits


@dataclasses.dataclass
class Submission:
    student_id: str
    assignment: str
    folder: Path


@dataclasses.dataclass
class Result:
    student_id: str
    assignment: str
    score: float
    max_score: float
    status: str  # "graded" or "rejected"
    reason: str
    tests: list[dict]

    def row(self) -> dict:
        return {
            "student_id": self.student_id,
            "assignment": self.assignment,
            "score": f"{self.score:g}",
            "max_score": f"{self.max_score:g}",
            "status": self.status,
            "reason": self.reason,
        }


def find_submissions(folder: Path) -> list[Submission]:
    """The submissions under ``folder``, checked against the course's assignments."""
    if not folder.exists():
        raise course.GradingError(f"submissions folder {folder} does not exist")
    if not folder.is_dir():
        raise course.GradingError(f"submissions path {folder} is not a folder")
    known = course.assignments()
    found = []
    for student in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for assignment in sorted(p for p in student.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if assignment.name not in known:
                raise course.GradingError(
                    f"unknown assignment {assignment.name!r} in {assignment} "
                    f"(known: {', '.join(known)})"
                )
            found.append(Submission(student.name, assignment.name, assignment))
    if not found:
        raise course.GradingError(
            f"no submissions in {folder}: expected <student_id>/<assignment>/<notebook>.ipynb"
        )
    return found


# ----------------------------------------------------------------------------- judging


@dataclasses.dataclass
class Judged:
    """What a judge said of one notebook of a submission (or why there was nothing to judge)."""

    submission: Submission
    notebooks: dict[str, tuple[nbformat.NotebookNode, dict]]  # name -> (assembled, judge output)
    problem: str | None = None


def _read_submitted(sub: Submission, expected: Path) -> tuple[nbformat.NotebookNode | None, str | None]:
    path = sub.folder / expected.name
    if not path.is_file():
        present = sorted(p.name for p in sub.folder.glob("*.ipynb"))
        return None, f"missing notebook {expected.name} (submitted: {', '.join(present) or 'nothing'})"
    try:
        nb = nbformat.read(path, as_version=4)
        if not isinstance(nb.get("cells"), list):
            raise ValueError("it has no list of cells")
        return nb, None
    except Exception as err:  # noqa: BLE001 - any unreadable file is the same verdict
        return None, f"{expected.name} is not a valid notebook: {type(err).__name__}: {str(err)[:200]}"


def _limit_memory(megabytes: int):
    def apply() -> None:  # runs in the child before exec
        size = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size, size))

    return apply


def judge(root: Path, sub: Submission, limits: Limits) -> Judged:
    """Run the judge over every notebook of ``sub``; never raises for the submission's faults."""
    notebooks = {}
    for source_path in course.source_notebooks(sub.assignment):
        submitted, problem = _read_submitted(sub, source_path)
        if problem:
            return Judged(sub, {}, problem)
        graded = assemble.assemble(nbformat.read(source_path, as_version=4), submitted)
        work = root / "judging" / sub.student_id / sub.assignment
        work.mkdir(parents=True, exist_ok=True)
        job = {
            "assignment": sub.assignment,
            "cells": assemble.judge_cells(graded),
            "limits": dataclasses.asdict(limits),
            "results": str(work / f"{source_path.stem}.results.json"),
        }
        (work / f"{source_path.stem}.job.json").write_text(json.dumps(job))
        Path(job["results"]).unlink(missing_ok=True)
        try:
            done = subprocess.run(
                [sys.executable, "-m", "autograder.judge", str(work / f"{source_path.stem}.job.json")],
                capture_output=True, text=True, timeout=limits.notebook_timeout_s + 120,
                preexec_fn=_limit_memory(limits.memory_mb + 4096), cwd=work,
            )
            output = json.loads(Path(job["results"]).read_text()) if done.returncode == 0 else None
        except subprocess.TimeoutExpired:
            output = None
        if output is None:
            return Judged(sub, {}, "the grader could not judge this notebook (its results were too large "
                                   "or its run too long); no test could be decided")
        notebooks[source_path.name] = (graded, output)
    return Judged(sub, notebooks)


# ----------------------------------------------------------------------------- the books


def _max_score(db_url: str, assignment: str) -> float:
    with Gradebook(db_url) as gb:
        return float(gb.find_assignment(assignment).max_score)


#: What ``nbgrader submit`` writes beside the notebooks: the submission's time (late
#: penalties) and the secret that names its feedback page in the exchange.
EXCHANGE_FILES = ("timestamp.txt", "submission_secret.txt")


def record(root: Path, db_url: str, judged: Judged) -> Result:
    """Enter a judged submission in the gradebook with ``nbgrader autograde``."""
    sub = judged.submission
    if judged.problem:
        return Result(sub.student_id, sub.assignment, 0.0, _max_score(db_url, sub.assignment),
                      "rejected", judged.problem, [])
    target = root / "submitted" / sub.student_id / sub.assignment
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    # A submission fetched by `nbgrader collect` carries these two files; nbgrader copies them
    # through autograded/ into feedback/, where `nbgrader release_feedback` needs them.
    for name in EXCHANGE_FILES:
        if (sub.folder / name).is_file():
            shutil.copy2(sub.folder / name, target / name)
    messages: dict[tuple[str, str], str] = {}
    stopped = []
    for name, (graded, output) in judged.notebooks.items():
        errors = {c["index"]: c["error"] for c in output["cells"] if c["error"]}
        nbformat.write(assemble.with_results(graded, errors), target / name)
        for c in output["cells"]:
            if c["error"]:
                messages[Path(name).stem, c["grade_id"]] = f"{c['error']['type']}: {c['error']['message']}"
        if output.get("stopped"):
            stopped.append(output["stopped"])
    done = course.nbgrader(root, "autograde", sub.assignment, f"--student={sub.student_id}", "--force", "--create")
    if done.returncode != 0:
        return Result(sub.student_id, sub.assignment, 0.0, _max_score(db_url, sub.assignment), "rejected",
                      course.last_error(done) or "nbgrader autograde failed", [])
    tests, score, max_score = [], 0.0, 0.0
    with Gradebook(db_url) as gb:
        submission = gb.find_submission(sub.assignment, sub.student_id)
        for nb in submission.notebooks:
            for grade in sorted(nb.grades, key=lambda g: g.cell.id):
                points = float(grade.score or 0.0)
                tests.append({
                    "notebook": nb.name, "test": grade.name, "points": points,
                    "max_points": float(grade.max_score), "passed": points >= float(grade.max_score),
                    "error": messages.get((nb.name, grade.name)),
                })
            score += float(nb.score or 0.0)
            max_score += float(nb.max_score)
    return Result(sub.student_id, sub.assignment, score, max_score, "graded", "; ".join(stopped), tests)


# ----------------------------------------------------------------------------- the ledger


class Ledger:
    """One JSON file per graded submission, written atomically, keyed by what was graded."""

    def __init__(self, folder: Path):
        self.folder = folder

    def _path(self, sub: Submission) -> Path:
        return self.folder / sub.student_id / f"{sub.assignment}.json"

    @staticmethod
    def digest(sub: Submission) -> str:
        """What the grade depends on: the submitted notebooks, the course's source notebooks
        and the exchange's files of the submission (its time and feedback secret)."""
        h = hashlib.sha256()
        for source in course.source_notebooks(sub.assignment):
            h.update(source.read_bytes())
            submitted = sub.folder / source.name
            h.update(submitted.read_bytes() if submitted.is_file() else b"<missing>")
        for name in EXCHANGE_FILES:  # a resubmission of the same notebook is a new submission
            if (sub.folder / name).is_file():
                h.update(name.encode() + (sub.folder / name).read_bytes())
        return h.hexdigest()

    def read(self, sub: Submission) -> Result | None:
        path = self._path(sub)
        if not path.is_file():
            return None
        entry = json.loads(path.read_text())
        if entry.get("digest") != self.digest(sub):
            return None
        return Result(**entry["result"])

    def write(self, sub: Submission, result: Result) -> None:
        path = self._path(sub)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"digest": self.digest(sub), "result": dataclasses.asdict(result)}))
        os.replace(tmp, path)


# ----------------------------------------------------------------------------- the batch


def grade(
    submissions: Path,
    out: Path,
    db_url: str | None = None,
    limits: Limits | None = None,
    workers: int | None = None,
) -> list[Result]:
    """Grade every submission under ``submissions`` into ``out``; return the results."""
    limits = limits or Limits()
    workers = max(1, workers or os.cpu_count() or 1)
    subs = find_submissions(submissions)
    out.mkdir(parents=True, exist_ok=True)
    root = (out / "course").resolve()
    root.mkdir(exist_ok=True)
    db_url = db_url or f"sqlite:///{root / 'gradebook.db'}"
    course.write_config(root, db_url)
    for assignment in sorted({s.assignment for s in subs}):
        course.generate(root, assignment)

    ledger = Ledger(root / "ledger")
    todo = [s for s in subs if ledger.read(s) is None]
    with ThreadPoolExecutor(max_workers=workers) as pool:  # threads wait on judge processes
        for future in as_completed([pool.submit(judge, root, s, limits) for s in todo]):
            judged = future.result()
            result = record(root, db_url, judged)  # the only writer of the gradebook
            ledger.write(judged.submission, result)
            print(f"{result.student_id}/{result.assignment}: {result.score:g}/{result.max_score:g}"
                  + (f" ({result.reason})" if result.reason else ""), flush=True)

    # one nbgrader run per assignment makes every feedback page (it starts slowly)
    for assignment in sorted({s.assignment for s in todo}):
        course.nbgrader(root, "generate_feedback", assignment, "--force")
    results = [ledger.read(s) for s in subs]
    _write_outputs(root, out, results)
    return results


def _write_outputs(root: Path, out: Path, results: list[Result]) -> None:
    results = sorted(results, key=lambda r: (r.student_id, r.assignment))
    with open(out / "grades.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(results[0].row()))
        writer.writeheader()
        for result in results:
            writer.writerow(result.row())
    (out / "report.json").write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=2))
    feedback = out / "feedback"
    if feedback.exists():
        shutil.rmtree(feedback)
    if (root / "feedback").exists():
        shutil.copytree(root / "feedback", feedback)
        localise_mathjax(feedback)
