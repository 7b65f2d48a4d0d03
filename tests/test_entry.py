"""The coordinator's gradebook entry (:meth:`autograder.books.Books.enter`, with
:func:`autograder.entry.finish` where the judging ran) writes what nbgrader's own
``Autograde`` and ``GenerateFeedback`` write for the same judged notebooks: every row of
every gradebook table, the ``nbgrader export`` CSV, and the ``submitted/``,
``autograded/`` and ``feedback/`` files, byte by byte with their permissions.

Cheap on purpose: chapter 1's notebook for three students (solved, blank, half done; one
with the exchange's timestamp and feedback secret), a re-grade of one of them, and judge
outputs written by hand in the judge's format (what is compared is what happens after the
judge; the judge itself is tested in test_judge.py and end to end in test_grading.py).
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import nbformat
from nbgrader.api import Base, Gradebook
from nbgrader.plugins import CsvExportPlugin
from sqlalchemy import select

from autograder import assemble, course, entry, grade
from autograder.books import Books
from autograder.judging import Judged, Submission

import notebook_tools as nbt

ASSIGNMENT = "ch01_attention_pooling"


def _judge_output(graded, failing: set[str]) -> dict:
    """A judge's output in which the test cells named in ``failing`` failed."""
    cells = []
    for c in assemble.judge_cells(graded):
        error = ({"type": "AssertionError", "message": f"{c['grade_id']}: expected 1.0, got 0.5"}
                 if c["grade_id"] in failing else None)
        cells.append({"index": c["index"], "grade_id": c["grade_id"], "error": error})
    return {"cells": cells, "stopped": None}


def _batch(folder: Path, round_: int) -> list[tuple[Submission, dict]]:
    """(submission, notebook name -> (assembled notebook, judge output)) for this round."""
    source = nbt.source_notebook(ASSIGNMENT)
    tests = sorted(nbt.grade_ids(nbt.read(source), nbt.is_test_cell))
    batch = {"ann": (nbt.read(source), set()),
             "ben": (nbt.read(nbt.NOTEBOOKS / ASSIGNMENT / source.name), set(tests)),
             "cem": (nbt.half_done(ASSIGNMENT), set(tests[::2]))}
    if round_ == 2:  # cem resubmits, solved; only cem is graded again
        batch = {"cem": (nbt.read(source), set())}
    subs = []
    for student, (nb, failing) in batch.items():
        sub_folder = folder / f"round{round_}" / student / ASSIGNMENT
        sub_folder.mkdir(parents=True)
        nbformat.write(nb, sub_folder / source.name)
        if student == "ann":  # fetched by `nbgrader collect`: the exchange's files
            (sub_folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")
            (sub_folder / "submission_secret.txt").write_text(uuid.uuid4().hex)
        graded = assemble.assemble(nbt.read(source), nb)
        subs.append((Submission(student, ASSIGNMENT, sub_folder), {source.name: (graded, _judge_output(graded, failing))}))
    return subs


def _nbgrader_path(root: Path, subs) -> None:
    """nbgrader's own way: the judged notebook in submitted/, Autograde, GenerateFeedback."""
    books = Books(root)
    for sub, notebooks in subs:
        target = root / "submitted" / sub.student_id / sub.assignment
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        for name in grade.EXCHANGE_FILES:
            if (sub.folder / name).is_file():
                shutil.copy2(sub.folder / name, target / name)
        for name, (graded, output) in notebooks.items():
            errors = {c["index"]: c["error"] for c in output["cells"] if c["error"]}
            (target / name).write_text(entry._text(assemble.with_results(graded, errors)))
        assert books.autograde(sub.assignment, sub.student_id) is None
        assert books.feedback(sub.assignment, sub.student_id) is None


def _our_path(root: Path, subs) -> list[grade.Result]:
    books = Books(root)
    sources = books.sources(ASSIGNMENT)
    results = []
    for sub, notebooks in subs:
        finished = {}
        for name, (graded, output) in notebooks.items():
            spec = {"notebook": graded, "name": name, "assignment": sub.assignment, "student": sub.student_id,
                    "source": sources[name]}
            finished[name] = (graded, {**output, "finished": entry.finish(spec, output)})
        results.append(grade.record(books, root, Judged(sub, finished)))
    books.close()
    return results


def _tables(db_url: str) -> dict[str, list[tuple]]:
    """Every row of every gradebook table, the random ids replaced by what they name."""
    with Gradebook(db_url) as gb:
        connection = gb.db.connection()
        rows = {t.name: [dict(r._mapping) for r in connection.execute(select(t))] for t in Base.metadata.sorted_tables}
        names: dict[str, str] = {}
        for r in rows["assignment"]:
            names[r["id"]] = f"assignment {r['name']}"
        for r in rows["notebook"]:
            names[r["id"]] = f"{names[r['assignment_id']]} notebook {r['name']}"
        for table in ("base_cell", "source_cell"):
            for r in rows.get(table, []):
                names[r["id"]] = f"{names[r['notebook_id']]} cell {r['name']}"
        for r in rows["submitted_assignment"]:
            names[r["id"]] = f"{r['student_id']}'s {names[r['assignment_id']]}"
        for r in rows["submitted_notebook"]:
            names[r["id"]] = f"{names[r['assignment_id']]}: {names[r['notebook_id']]}"
        for table in ("grade", "comment"):
            for r in rows[table]:
                names[r["id"]] = f"{names[r['notebook_id']]}: {table} of {names[r['cell_id']]}"
    named = {}
    for table, table_rows in rows.items():
        named[table] = sorted(tuple((k, repr(names.get(v, v) if isinstance(v, str) else v)) for k, v in sorted(r.items()))
                              for r in table_rows)
    return named


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mode & 0o777)
            for step in ("submitted", "autograded", "feedback") for p in sorted((root / step).rglob("*")) if p.is_file()}


def _export(db_url: str, path: Path) -> str:
    with Gradebook(db_url) as gb:
        CsvExportPlugin(to=str(path)).export(gb)
    return path.read_text()


def test_same_rows_files_and_export_as_nbgrader_autograde(tmp_path):
    roots = {"nbgrader": tmp_path / "nbgrader", "ours": tmp_path / "ours"}
    urls = {}
    for label, root in roots.items():
        urls[label] = f"sqlite:///{root / 'gradebook.db'}"
        course.write_config(root, urls[label])
        Books(root).generate(ASSIGNMENT)
    first, second = _batch(tmp_path / "subs", 1), _batch(tmp_path / "subs", 2)
    for round_ in (first, second):
        _nbgrader_path(roots["nbgrader"], round_)
        results = _our_path(roots["ours"], round_)
        theirs, ours = _tables(urls["nbgrader"]), _tables(urls["ours"])
        assert sorted(theirs) == sorted(ours)
        for table in theirs:
            assert theirs[table] == ours[table], table
        assert _files(roots["nbgrader"]) == _files(roots["ours"])
        assert _export(urls["nbgrader"], tmp_path / "theirs.csv") == _export(urls["ours"], tmp_path / "ours.csv")
        # what the coordinator reports is what the gradebook holds, and the batch is what it claims
        with Gradebook(urls["ours"]) as gb:
            for result in results:
                submission = gb.find_submission(ASSIGNMENT, result.student_id)
                assert result.score == float(submission.score)
                assert result.max_score == float(submission.max_score)
                assert result.score == sum(t["points"] for t in result.tests)
        scores = {r.student_id: r.score for r in results}
        if round_ is first:
            assert scores["ann"] == results[0].max_score > scores["cem"] > scores["ben"] == 0, scores
        else:
            assert scores == {"cem": results[0].max_score}
