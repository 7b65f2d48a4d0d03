"""Grade a folder of submissions: sandboxed judges in parallel, nbgrader keeping the books.

Input layout: ``SUBMISSIONS/<student_id>/<assignment>/<notebook>.ipynb``.
Output (``OUT``):

* ``grades.csv``: one row per student and assignment (``student_id``, ``assignment``,
  ``score``, ``max_score``, ``status``, ``reason``), sorted;
* ``report.json``: every test cell's result per submission;
* ``feedback/<student_id>/<assignment>/<notebook>.html``: the pages to return;
* ``summary.html``: the batch at a glance for the instructor (:mod:`autograder.summary`);
* ``similarity.json``, ``similarity.csv``, ``similarity/``: the pairs of submissions whose own
  code is unusually alike, and a page per pair (:mod:`autograder.similarity`, run here, by the
  coordinator, after the judging, also when the judges ran on a Dask cluster);
* ``course/``: the nbgrader course folder (source, submitted, autograded, gradebook) and
  ``course/ledger/``, one file per graded submission.

For each submission, a judge process (:mod:`autograder.judge`) runs the student's code in
a sandbox and decides every test; up to ``workers`` judges run at once on this machine, or
any number on the workers of a Dask distributed cluster (:mod:`autograder.distributed`).
Where a submission was judged, its notebooks are also put through ``Autograde``'s
preprocessors and its feedback page is rendered (:func:`autograder.entry.finish`). The
results stream back to this process, which alone writes the gradebook: the rows
``Autograde`` writes, through nbgrader's ``Gradebook`` API on one connection
(:meth:`autograder.books.Books.enter`), and the files as they came, one submission at a
time, so SQLite's single writer is never contended. Each finished submission is then
written to the ledger atomically, after its rows are committed: a batch that is killed
loses nothing already graded, and running the same command again grades only what is
missing or what changed (the submission, or the course's tests).
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat

from attention_course import i18n
from autograder import assemble, course, similarity, summary
from autograder.books import Books, make_feedback, stale_feedback
from autograder.feedback import localise_mathjax
from autograder.entry import judge_and_finish
from autograder.judging import Judged, Prepared, Submission, judged_from
from autograder.limits import Limits
from autograder.stages import Stages
import layout


@dataclasses.dataclass
class Result:
    student_id: str
    assignment: str
    score: float
    max_score: float
    status: str  # "graded" or "rejected"
    reason: str
    tests: list[dict]
    # forbidden library calls found (the exercise's tests then scored 0) and indirections the
    # scan could not resolve, for summary.html: dicts of autograder.judge.Judge.shortcuts
    shortcuts: list[dict] = dataclasses.field(default_factory=list)
    # the language the submission's notebook names (its feedback's and its messages'), never its score's
    language: str = i18n.ENGLISH

    def row(self) -> dict:
        return {
            "student_id": self.student_id,
            "assignment": self.assignment,
            "score": f"{self.score:g}",
            "max_score": f"{self.max_score:g}",
            "status": self.status,
            "reason": self.reason,
        }


CSV_FIELDS = ["student_id", "assignment", "score", "max_score", "status", "reason"]


def find_submissions(folder: Path) -> list[Submission]:
    """The submissions under ``folder``, checked against the course's assignments."""
    if not folder.exists():
        raise course.GradingError(f"submissions folder {folder} does not exist")
    if not folder.is_dir():
        raise course.GradingError(f"submissions path {folder} is not a folder")
    known = layout.assignments()
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


def prepare(sub: Submission, limits: Limits, sources: dict[str, dict]) -> Prepared:
    """Assemble every notebook of ``sub`` and write its judge's job; never raises for the
    submission's faults. ``sources``: :meth:`autograder.books.Books.sources` of the
    assignment, which travels with the job's ``feedback`` part (for
    :func:`autograder.entry.finish`; the judge never sees that part)."""
    jobs = {}
    for source_path in layout.source_notebooks(sub.assignment):
        submitted, problem = _read_submitted(sub, source_path)
        if problem:
            return Prepared(sub, {}, problem)
        graded = assemble.assemble(nbformat.read(source_path, as_version=4), submitted)
        # the one thing taken from the submission's metadata, as one of the course's languages
        # (anything else is English): the language of its messages and feedback page
        language = assemble.set_language(graded, i18n.notebook_language(submitted.get("metadata")))
        feedback = {"notebook": graded, "name": source_path.name, "assignment": sub.assignment,
                    "student": sub.student_id, "source": sources[source_path.name]}
        jobs[source_path.name] = (graded, {"assignment": sub.assignment, "cells": assemble.judge_cells(graded),
                                          "limits": dataclasses.asdict(limits), "language": language,
                                          "feedback": feedback})
    return Prepared(sub, jobs)


class LocalJudges:
    """Judges on this machine: up to ``workers`` judge processes at once."""

    def __init__(self, root: Path, workers: int, timed: bool = False):
        self.root, self.workers, self.timed = root, workers, timed

    def _judge(self, prepared: Prepared) -> Judged:
        sub = prepared.submission
        outputs = {}
        for name, (_, job) in prepared.jobs.items():
            work = self.root / "judging" / sub.student_id / sub.assignment / Path(name).stem
            outputs[name] = judge_and_finish(job, work, self.timed)
            if outputs[name] is None:
                break
        return judged_from(prepared, outputs)

    def judge(self, batch: list[Prepared]):
        """Yield a :class:`Judged` for every prepared submission, as each is done."""
        with ThreadPoolExecutor(max_workers=self.workers) as pool:  # threads wait on judge processes
            for future in as_completed([pool.submit(self._judge, p) for p in batch]):
                yield future.result()


# ----------------------------------------------------------------------------- the books


#: What ``nbgrader submit`` writes beside the notebooks: the submission's time (late
#: penalties) and the secret that names its feedback page in the exchange.
EXCHANGE_FILES = ("timestamp.txt", "submission_secret.txt")


def _fresh(folder: Path) -> Path:
    """``folder``, emptied (as nbgrader's converters do with ``--force``)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


def _write(path: Path, text: str, mode: int) -> None:
    path.write_text(text)
    path.chmod(mode)


def record(books: Books, root: Path, judged: Judged) -> Result:
    """Enter a judged submission in the gradebook and write its files as nbgrader's
    ``Autograde`` and ``GenerateFeedback`` would: ``submitted/``, ``autograded/`` (read-only,
    as nbgrader leaves them), ``feedback/``; the one writer of the gradebook."""
    sub = judged.submission
    if judged.problem:
        return Result(sub.student_id, sub.assignment, 0.0, books.max_score(sub.assignment),
                      "rejected", judged.problem, [])
    folders = [_fresh(root / step / sub.student_id / sub.assignment) for step in ("submitted", "autograded", "feedback")]
    # A submission fetched by `nbgrader collect` carries these two files; nbgrader copies them
    # through autograded/ into feedback/, where `nbgrader release_feedback` needs them.
    for name in EXCHANGE_FILES:
        if (sub.folder / name).is_file():
            for folder, mode in zip(folders, (None, 0o444, 0o644)):
                shutil.copy2(sub.folder / name, folder / name)
                if mode:
                    (folder / name).chmod(mode)
    submitted, autograded, feedback = folders
    messages: dict[tuple[str, str], str] = {}
    stopped, finished = [], {}
    shortcuts = [{**found, "notebook": Path(name).stem} for name, (_, output) in judged.notebooks.items()
                 for found in output.get("shortcuts", [])]
    for name, (_, output) in judged.notebooks.items():
        done = finished[Path(name).stem] = output["finished"]
        submitted.joinpath(name).write_text(done["submitted"])
        _write(autograded / name, done["autograded"], 0o444)
        for c in output["cells"]:
            if c["error"]:
                messages[Path(name).stem, c["grade_id"]] = f"{c['error']['type']}: {c['error']['message']}"
        if output.get("stopped"):
            stopped.append(output["stopped"])
    if not books.enter(sub.assignment, sub.student_id, finished):
        for stem, done in finished.items():
            _write(feedback / f"{stem}.html", done["page"], 0o644)
    # else: the pages are rendered from the gradebook at the end of the batch (stale_feedback)
    tests, score, max_score = [], 0.0, 0.0
    for stem, done in sorted(finished.items()):
        for test, grade in done["grades"].items():  # in the notebook's order
            points = float(grade["auto_score"] or 0.0)
            tests.append({"notebook": stem, "test": test, "points": points, "max_points": grade["max_score"],
                          "passed": points >= grade["max_score"], "error": messages.get((stem, test))})
            score += points
            max_score += grade["max_score"]
    languages = sorted({i18n.notebook_language(graded.metadata) for graded, _ in judged.notebooks.values()})
    return Result(sub.student_id, sub.assignment, score, max_score, "graded", "; ".join(stopped), tests, shortcuts,
                  language="+".join(languages) or i18n.ENGLISH)


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
        for source in layout.source_notebooks(sub.assignment):
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
    scheduler: str | None = None,
    stage_times: bool = False,
    judges=None,
    archive: Path | None = None,
    language: str = i18n.ENGLISH,
) -> list[Result]:
    """Grade every submission under ``submissions`` into ``out``; return the results.

    Judges run on this machine (up to ``workers`` at once), or with ``scheduler`` (a Dask
    distributed address, ``tcp://HOST:PORT``) on that cluster's workers. Either way this
    process alone writes the gradebook and the ledger. With ``stage_times``, the time of
    every stage is added up in ``out/stages.json``. ``archive`` (earlier years' submissions)
    and ``language`` (of its pages' words): :func:`autograder.similarity.run`. ``judges``:
    anything with the ``judge`` method of :class:`LocalJudges` (the coordinator's benchmark
    replays recorded results)."""
    began = time.perf_counter()
    stages = Stages()
    limits = limits or Limits()
    workers = max(1, workers or os.cpu_count() or 1)
    # nbgrader's converters change the working directory while they run (see autograder.books)
    submissions, out = submissions.resolve(), out.resolve()
    subs = find_submissions(submissions)
    if archive is not None and not archive.is_dir():  # said before the judging, not after it
        raise course.GradingError(f"archive folder {archive} does not exist or is not a folder")
    root = out / "course"
    if judges is not None:
        pass
    elif scheduler:
        from autograder.distributed import DaskJudges  # Dask is needed only here

        judges = DaskJudges(scheduler, timed=stage_times)
    else:
        judges = LocalJudges(root, workers, timed=stage_times)
    with stages.timed("course set-up"):
        out.mkdir(parents=True, exist_ok=True)
        root.mkdir(exist_ok=True)
        db_url = db_url or f"sqlite:///{root / 'gradebook.db'}"
        course.write_config(root, db_url)
        books = Books(root)
        for assignment in sorted({s.assignment for s in subs}):
            books.generate(assignment)
        sources = {a: books.sources(a) for a in sorted({s.assignment for s in subs})}
        ledger = Ledger(root / "ledger")
        todo = [s for s in subs if ledger.read(s) is None]
    with stages.timed("assembly"):
        batch = [prepare(s, limits, sources[s.assignment]) for s in todo]
    lost = []
    for judged in judges.judge(batch):
        if judged.lost:
            lost.append(f"{judged.submission.student_id}/{judged.submission.assignment} ({judged.lost})")
            print(f"{lost[-1]}: not judged", flush=True)
            continue
        for _, output in judged.notebooks.values():
            if "stages" in output:
                stages.add_judge(output.pop("stages"), judged.submission.assignment)
                stages.add_finish(output["finished"]["cpu"], judged.submission.assignment)
        with stages.timed("gradebook entry"):
            result = record(books, root, judged)
        with stages.timed("ledger"):
            ledger.write(judged.submission, result)
        print(f"{result.student_id}/{result.assignment}: {result.score:g}/{result.max_score:g}"
              + (f" ({result.reason})" if result.reason else ""), flush=True)

    books.close()
    with stages.timed("outputs"):
        results = [r for r in (ledger.read(s) for s in subs) if r is not None]
    # every page whose grade is newer than it, this run's and any a killed run left behind
    with stages.timed("feedback pages", children=True):
        stale = stale_feedback(root, [(r.student_id, r.assignment) for r in results if r.status == "graded"])
        for failure in make_feedback(root, stale, workers):
            print(f"warning: {failure}", file=sys.stderr, flush=True)
    with stages.timed("similarity"):
        try:
            report = similarity.run(submissions, out, archive, language)
        except Exception as err:  # noqa: BLE001 - a fault of the step must not cost the batch its grades' files
            print(f"warning: the similarity step failed ({type(err).__name__}: {err}); "
                  "the grades are written without it", file=sys.stderr, flush=True)
            report = None
    with stages.timed("outputs"):
        _write_outputs(root, out, results, report)
    if stage_times:
        stages.write(out / "stages.json", submissions=len(todo), wall=time.perf_counter() - began,
                     workers=workers if not scheduler else None, scheduler=scheduler)
    if lost:
        raise course.GradingError(
            f"{len(lost)} submission(s) could not be judged because the workers judging them died "
            f"again and again: {', '.join(lost)}; the others are graded: run the same command again"
        )
    return results


def _write_outputs(root: Path, out: Path, results: list[Result], report: dict | None = None) -> None:
    results = sorted(results, key=lambda r: (r.student_id, r.assignment))
    with open(out / "grades.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for result in results:
            writer.writerow(result.row())
    (out / "report.json").write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=2))
    summary.write(results, out / "summary.html", similarity.section(report))
    feedback = out / "feedback"
    if feedback.exists():
        shutil.rmtree(feedback)
    if (root / "feedback").exists():
        shutil.copytree(root / "feedback", feedback)
        localise_mathjax(feedback)
