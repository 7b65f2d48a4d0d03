"""Grade a folder of submissions with nbgrader.

Input layout: ``SUBMISSIONS/<student_id>/<assignment>/<notebook>.ipynb``.
Output (``OUT``):

* ``grades.csv``: one row per student and assignment (``student_id``, ``assignment``,
  ``score``, ``max_score``, ``status``, ``reason``);
* ``report.json``: every test cell's result per submission;
* ``feedback/<student_id>/<assignment>/<notebook>.html``: nbgrader's feedback pages;
* ``course/``: the nbgrader course folder (source, submitted, autograded, gradebook).

One submission that cannot be graded (missing or broken notebook, a crash) gets a row
with score 0 and the reason, and the batch goes on.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import resource
import shutil
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from autograder import course
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


def _problem_with(sub: Submission) -> str | None:
    """Why ``sub`` cannot be graded at all, or None."""
    for expected in course.source_notebooks(sub.assignment):
        path = sub.folder / expected.name
        if not path.exists():
            present = sorted(p.name for p in sub.folder.glob("*.ipynb"))
            return f"missing notebook {expected.name} (submitted: {', '.join(present) or 'nothing'})"
        try:
            nbformat.read(path, as_version=4)
        except Exception as err:  # noqa: BLE001 - any unreadable file is the same verdict
            return f"{expected.name} is not a valid notebook: {type(err).__name__}: {str(err)[:200]}"
    return None


def _limit_memory(limits: Limits):
    def apply() -> None:  # runs in the child before exec; the kernels inherit it
        size = limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size, size))

    return apply


def _stage(root: Path, sub: Submission) -> None:
    target = root / "submitted" / sub.student_id / sub.assignment
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for expected in course.source_notebooks(sub.assignment):
        shutil.copy2(sub.folder / expected.name, target / expected.name)


def _cell_errors(notebook: Path) -> dict[str, str]:
    """grade_id -> 'Error: message' for each cell of an autograded notebook that raised."""
    errors = {}
    if not notebook.exists():
        return errors
    nb = nbformat.read(notebook, as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        for out in cell.get("outputs", []):
            if grade_id and out.get("output_type") == "error":
                errors[grade_id] = f"{out['ename']}: {out['evalue']}"[:2000]
    return errors


def _collect(root: Path, db_url: str, sub: Submission) -> Result:
    tests, score, max_score = [], 0.0, 0.0
    with Gradebook(db_url) as gb:
        submission = gb.find_submission(sub.assignment, sub.student_id)
        for nb in submission.notebooks:
            errors = _cell_errors(root / "autograded" / sub.student_id / sub.assignment / f"{nb.name}.ipynb")
            for grade in sorted(nb.grades, key=lambda g: g.cell.id):
                points = float(grade.score or 0.0)
                tests.append(
                    {
                        "notebook": nb.name,
                        "test": grade.name,
                        "points": points,
                        "max_points": float(grade.max_score),
                        "passed": points >= float(grade.max_score),
                        "error": errors.get(grade.name),
                    }
                )
            score += float(nb.score or 0.0)
            max_score += float(nb.max_score)
    return Result(sub.student_id, sub.assignment, score, max_score, "graded", "", tests)


def _max_score(db_url: str, assignment: str) -> float:
    with Gradebook(db_url) as gb:
        return float(gb.find_assignment(assignment).max_score)


def grade_one(root: Path, db_url: str, sub: Submission, limits: Limits) -> Result:
    """Autograde one submission and generate its feedback; never raises for the submission's faults."""
    problem = _problem_with(sub)
    if problem is not None:
        return Result(sub.student_id, sub.assignment, 0.0, _max_score(db_url, sub.assignment), "rejected", problem, [])
    _stage(root, sub)
    timeout = [f"--ExecutePreprocessor.timeout={limits.cell_timeout_s}"]
    done = course.nbgrader(
        root, "autograde", sub.assignment, f"--student={sub.student_id}", "--force", "--create", *timeout,
        preexec_fn=_limit_memory(limits), timeout=limits.notebook_timeout_s,
    )
    if done.returncode != 0:
        reason = course.last_error(done) or "nbgrader autograde failed"
        return Result(sub.student_id, sub.assignment, 0.0, _max_score(db_url, sub.assignment), "rejected", reason, [])
    course.nbgrader(root, "generate_feedback", sub.assignment, f"--student={sub.student_id}", "--force")
    return _collect(root, db_url, sub)


def grade(submissions: Path, out: Path, db_url: str | None = None, limits: Limits | None = None) -> list[Result]:
    """Grade every submission under ``submissions`` into ``out``; return the results."""
    limits = limits or Limits()
    subs = find_submissions(submissions)
    out.mkdir(parents=True, exist_ok=True)
    root = out / "course"
    root.mkdir(exist_ok=True)
    db_url = db_url or f"sqlite:///{(root / 'gradebook.db').resolve()}"
    course.write_config(root, db_url)
    for assignment in sorted({s.assignment for s in subs}):
        course.generate(root, assignment)
    results = []
    for sub in subs:
        result = grade_one(root, db_url, sub, limits)
        results.append(result)
        print(f"{sub.student_id}/{sub.assignment}: {result.score:g}/{result.max_score:g}"
              + (f" ({result.reason})" if result.reason else ""), flush=True)
    _write_outputs(root, out, results)
    return results


def _write_outputs(root: Path, out: Path, results: list[Result]) -> None:
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

