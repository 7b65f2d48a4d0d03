"""nbgrader's books, kept in the grading process itself.

``nbgrader autograde`` and ``nbgrader generate_feedback`` as commands start a Python
interpreter and import nbgrader, nbconvert and SQLAlchemy every time: about two CPU-seconds
before any work, which the coordinator used to pay for every submission while the judges
waited. :class:`Books` runs the same nbgrader converters (``GenerateAssignment``,
``Autograde`` and ``GenerateFeedback``, through nbgrader's own ``NbGraderAPI``) inside this
process, with the configuration of the course folder (:func:`autograder.course.write_config`)
and nothing else, so the gradebook stays nbgrader's and holds what the commands would have
written. A judged submission is entered by :meth:`Books.enter`: the rows ``Autograde``
writes, through nbgrader's ``Gradebook`` API on one connection kept open for the batch,
from what :func:`autograder.entry.finish` decided where the submission was judged. Feedback
pages come from there too; the few that must show what only the gradebook knows (a
grader's manual score or comment, a late penalty) are rendered at the end of a batch from
the gradebook, by as many processes as there are workers (:func:`make_feedback`).

nbgrader's converters change the working directory while they run, so a process that
uses :class:`Books` must use absolute paths everywhere else.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import nbgrader.api
from alembic.config import Config as AlembicConfig
from alembic.script import ScriptDirectory
from nbgrader.api import Gradebook
from nbgrader.apps import NbGraderAPI
from nbgrader.dbutil import _temp_alembic_ini
from nbgrader.coursedir import CourseDirectory
from nbgrader.plugins import LateSubmissionPlugin
from sqlalchemy.exc import SAWarning
from traitlets.config.loader import ConfigFileNotFound, PyFileConfigLoader

from attention_course import i18n
from autograder.course import GradingError, copy_source
from autograder.feedback import translate_page

# nbgrader's log lines that say nothing about why a run failed
_GENERIC = ("Traceback", "Please see", "There was an error processing", "error(s) occurred")


def _load_config(root: Path):
    try:
        return PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    except ConfigFileNotFound:
        raise GradingError(f"{root / 'nbgrader_config.py'} is missing") from None
    except Exception as err:  # noqa: BLE001 - any broken config is the same verdict
        # a grade must never depend on settings that silently did not apply
        raise GradingError(f"nbgrader could not load {root / 'nbgrader_config.py'}: "
                           f"{type(err).__name__}: {err}") from None


def _alembic_head() -> str:
    """What ``nbgrader.api.get_alembic_version`` returns (the first word of ``alembic heads``
    over nbgrader's migrations), without starting a process."""
    with _temp_alembic_ini("sqlite:////tmp/gradebook.db") as ini:
        return ScriptDirectory.from_config(AlembicConfig(ini)).get_current_head()


class Books:
    """nbgrader's ``generate_assignment``, ``autograde`` and ``generate_feedback`` for one
    course folder, in-process.

    One caller at a time (a lock makes sure): nbgrader's converters share the process's
    working directory and the gradebook has a single writer."""

    def __init__(self, root: Path):
        # A new gradebook records alembic's head revision; nbgrader asks a subprocess for it
        # (`alembic heads`: 2 s, one after the other, before any judging), this asks alembic here.
        nbgrader.api.get_alembic_version = _alembic_head
        config = _load_config(root)
        self.root = root
        self._api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
        self._api.log.setLevel(logging.WARNING)
        self._lock = threading.Lock()
        self._config = config
        self._gradebook: Gradebook | None = None  # opened at the first entry, kept for the batch
        self._sources: dict[str, dict] = {}

    def _run(self, method, *args, **kwargs) -> str | None:
        with self._lock, warnings.catch_warnings():
            # nbgrader's own session use makes SQLAlchemy warn; the command line hides it too
            warnings.simplefilter("ignore", SAWarning)
            return _failure(method(*args, **kwargs))

    def generate(self, assignment: str, notebooks: list[Path] | None = None) -> None:
        """Record ``assignment`` (its source notebooks, or ``notebooks``, translations of them,
        copied into ``source/``) in the gradebook and write its learner version to ``release/``."""
        copy_source(self.root, assignment, notebooks)
        failure = self._run(self._api.generate_assignment, assignment, force=True)
        if failure:
            raise GradingError(f"nbgrader generate_assignment {assignment} failed: {failure}")

    def autograde(self, assignment: str, student: str) -> str | None:
        """Enter ``submitted/<student>/<assignment>/`` in the gradebook and write
        ``autograded/...``; None when it worked, else nbgrader's own words for the failure."""
        return self._run(self._api.autograde, assignment, student, force=True, create=True)

    def _books(self) -> Gradebook:
        if self._gradebook is None:
            coursedir = self._api.coursedir
            self._gradebook = Gradebook(coursedir.db_url, coursedir.course_id)
        return self._gradebook

    def close(self) -> None:
        """Close the gradebook's connection (every entry is already committed)."""
        if self._gradebook is not None:
            self._gradebook.close()
            self._gradebook.engine.dispose()
            self._gradebook = None

    def sources(self, assignment: str) -> dict[str, dict]:
        """What ``Autograde``'s ``OverwriteKernelspec`` and ``OverwriteCells`` read from the
        gradebook, per notebook of ``assignment`` (file name -> ``kernelspec``, ``cells``:
        grade id -> ``name``, ``cell_type``, ``locked``, ``source``, ``checksum``;
        ``grades``: grade id -> ``max_score``), read once per batch; plain data that travels
        with every job (:func:`autograder.entry.finish`)."""
        if assignment not in self._sources:
            with self._lock:
                found = self._books().find_assignment(assignment)
                self._sources[assignment] = {
                    f"{nb.name}.ipynb": {
                        "kernelspec": nb.kernelspec,
                        "cells": {c.name: {"name": c.name, "cell_type": c.cell_type, "locked": c.locked,
                                           "source": c.source, "checksum": c.checksum} for c in nb.source_cells},
                        "grades": {c.name: float(c.max_score) for c in nb.grade_cells},
                        "max_score": float(nb.max_score),
                    } for nb in found.notebooks}
                self._books().db.commit()  # no transaction left open on the gradebook
        return self._sources[assignment]

    def max_score(self, assignment: str) -> float:
        return sum(nb["max_score"] for nb in self.sources(assignment).values())

    def enter(self, assignment: str, student: str, finished: dict[str, dict]) -> bool:
        """Write the rows nbgrader's ``Autograde`` writes for the judged notebooks of
        ``student``'s ``assignment`` (``submitted/<student>/<assignment>/`` holds them, with
        the exchange's ``timestamp.txt`` when there is one), from ``finished``: notebook
        name (without ``.ipynb``) -> :func:`autograder.entry.finish`'s result. One
        transaction per step as nbgrader's API commits them, on one connection for the batch.

        Returns whether the feedback pages must be rendered from the gradebook: a grader's
        manual score, extra credit or comment, or a late penalty, which the page rendered
        where the submission was judged cannot know."""
        with self._lock, warnings.catch_warnings():
            warnings.simplefilter("ignore", SAWarning)
            gb = self._books()
            # Autograde.init_assignment
            gb.update_or_create_student(student)
            coursedir = self._api.coursedir
            timestamp = coursedir.get_existing_timestamp(
                coursedir.format_path(coursedir.submitted_directory, student, assignment))
            submission = (gb.update_or_create_submission(assignment, student, timestamp=timestamp) if timestamp
                          else gb.update_or_create_submission(assignment, student))
            late = submission.total_seconds_late
            from_gradebook = False
            for notebook in submission.notebooks:
                done = finished.get(notebook.name)
                if done is None:  # Autograde gives a notebook that was not submitted zero
                    for grade in notebook.grades:
                        grade.auto_score, grade.needs_manual_grade = 0, False
                    continue
                for grade in notebook.grades:  # SaveAutoGrades._add_score
                    if grade.name in done["grades"]:
                        grade.auto_score = done["grades"][grade.name]["auto_score"]
                        grade.needs_manual_grade = grade.manual_score is not None or grade.auto_score is None
                        from_gradebook |= grade.manual_score is not None or bool(grade.extra_credit)
                for comment in notebook.comments:  # SaveAutoGrades._add_comment
                    if comment.name in done["comments"]:
                        comment.auto_comment = done["comments"][comment.name]
                        from_gradebook |= comment.manual_comment is not None
                notebook.late_submission_penalty = None  # AssignLatePenalties
                if late > 0:
                    gb.db.flush()
                    gb.db.expire(notebook, ["score"])
                    penalty = LateSubmissionPlugin(config=self._config).late_submission_penalty(
                        student, notebook.score, late)
                    if penalty is not None:
                        notebook.late_submission_penalty = min(max(penalty, 0), notebook.score)
                        from_gradebook = True
            gb.db.commit()
            return from_gradebook

    def feedback(self, assignment: str, student: str) -> str | None:
        """Write ``feedback/<student>/<assignment>/<notebook>.html`` from the gradebook, each in
        the language its graded notebook names (:func:`autograder.feedback.translate_page`)."""
        failure = self._run(self._api.generate_feedback, assignment, student, force=True)
        if failure is None:
            for graded in sorted((self.root / "autograded" / student / assignment).glob("*.ipynb")):
                language = i18n.notebook_language(json.loads(graded.read_text()).get("metadata"))
                page = self.root / "feedback" / student / assignment / f"{graded.stem}.html"
                if page.is_file():
                    page.write_text(translate_page(page.read_text(), language))
        return failure


def stale_feedback(root: Path, graded: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (student, assignment) pairs of ``graded`` whose feedback page is missing or
    older than their autograded notebook."""
    stale = []
    for student, assignment in graded:
        for notebook in (root / "autograded" / student / assignment).glob("*.ipynb"):
            page = root / "feedback" / student / assignment / f"{notebook.stem}.html"
            if not page.is_file() or page.stat().st_mtime < notebook.stat().st_mtime:
                stale.append((student, assignment))
                break
    return stale


def make_feedback(root: Path, pairs: list[tuple[str, str]], processes: int) -> list[str]:
    """Write the feedback pages of ``pairs`` (student, assignment) with up to ``processes``
    processes at once (``python -m autograder.books``), each reading the gradebook; return
    what failed, one line each. Rendering a page is CPU work (nbconvert's HTML export), so
    on several cores it runs on all of them."""
    shares = [pairs[i::processes] for i in range(max(1, processes)) if pairs[i::processes]]
    running = []
    for share in shares:  # all started before any is waited for
        process = subprocess.Popen([sys.executable, "-m", "autograder.books", str(root)], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        process.stdin.write(json.dumps(share))
        process.stdin.close()
        process.stdin = None  # written and closed: communicate() has nothing more to send
        running.append(process)
    failures = []
    for process in running:
        stdout, stderr = process.communicate()
        failures += [line for line in stdout.splitlines() if line.strip()]
        if process.returncode != 0:
            failures.append(f"feedback process failed ({process.returncode}): {stderr.strip()[-500:]}")
    return failures


def main(argv: list[str] | None = None) -> int:
    """``python -m autograder.books ROOT`` with ``[[student, assignment], ...]`` on standard
    input: write those feedback pages; print a line per failure."""
    books = Books(Path((argv or sys.argv[1:])[0]))
    for student, assignment in json.load(sys.stdin):
        failure = books.feedback(assignment, student)
        if failure:
            print(f"no feedback page for {student}/{assignment}: {failure}", flush=True)
    return 0


def _failure(outcome: dict) -> str | None:
    """None when nbgrader succeeded; else its most telling line: its own error message, or
    the exception that ended the traceback it logged."""
    if outcome.get("success"):
        return None
    log = [ln.strip() for ln in (outcome.get("log") or "").splitlines() if ln.strip()]
    errors = [ln for ln in log if ln.startswith("[ERROR]") and not any(g in ln for g in _GENERIC)]
    if errors:
        return errors[0].removeprefix("[ERROR]").strip()[:500]
    logged = [ln for ln in log if not ln.startswith(("[", "File ", "^", "~"))]
    trace = [ln.strip() for ln in (outcome.get("error") or "").splitlines() if ln.strip()]
    return ((logged or trace or ["nbgrader failed without saying why"])[-1])[:500]

if __name__ == "__main__":
    sys.exit(main())
