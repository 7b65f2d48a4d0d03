"""A judged submission into nbgrader's books, without nbgrader's per-submission notebook pass.

nbgrader's ``Autograde`` turns a judged notebook into gradebook rows with two passes of
nbconvert preprocessors over the notebook and a new database engine for every step: 0.3 to
0.5 CPU-seconds per submission in the one process that keeps the books. Here the same work
is split where it belongs:

* **where the judging ran** (a worker; :func:`finish`, in a long-lived helper process per
  judging thread, :class:`Finisher`): the judged notebook is put through the preprocessors
  of ``Autograde`` (``DeduplicateIds``, ``OverwriteKernelspec``, ``OverwriteCells``, then
  ``ClearMetadataPreprocessor``, ``LimitOutput``) with the course's source cells taken from
  the gradebook once per assignment by the coordinator (:meth:`Books.sources`) and sent with
  the job; each grade cell's ``auto_score`` and each answer's ``auto_comment`` are decided
  with nbgrader's own rules (those of ``SaveAutoGrades``); the feedback page is rendered by
  nbgrader's ``GenerateFeedback`` exporter with these scores. What comes back is data: the
  notebooks' text, the scores, the page.
* **in the coordinator** (:class:`Books`): the rows, through nbgrader's ``Gradebook`` API
  on one open connection for the whole batch (student, submission, every grade's
  ``auto_score`` and ``needs_manual_grade``, every comment's ``auto_comment``, the late
  penalty by nbgrader's ``LateSubmissionPlugin``), and the files written as they came.

The rows and files are those ``Autograde`` and ``GenerateFeedback`` write for the same
notebook (``tests/test_entry.py`` compares them table by table and byte by byte). A page
that must show what only the gradebook knows (a manual score or comment from a grader, a
late penalty) is rendered from the gradebook instead, by nbgrader itself
(:func:`autograder.books.make_feedback`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from attention_course import i18n
from autograder.course import GradingError
from autograder.judging import die_with_thread, run_judge


# ----------------------------------------------------------------------------- worker side


class _Cell:
    """A source cell as nbgrader's ``Gradebook`` returns it, from plain data."""

    def __init__(self, data: dict):
        self.__dict__.update(data)


class _SourceView:
    """The part of nbgrader's ``Gradebook`` that ``OverwriteCells`` reads, from the data of
    :meth:`Books.sources`: the preprocessor runs unchanged, without a database."""

    def __init__(self, notebook: dict):
        self.notebook = notebook

    def find_source_cell(self, name, notebook, assignment):
        from nbgrader.api import MissingEntry

        if name not in self.notebook["cells"]:
            raise MissingEntry()
        return _Cell(self.notebook["cells"][name])

    def find_graded_cell(self, name, notebook, assignment):
        return _Cell({"max_score": self.notebook["grades"][name]})


class _EnteredView:
    """The part of nbgrader's ``Gradebook`` that ``GetGrades`` reads, from the scores
    :func:`finish` decided (a fresh submission: no manual score, comment or penalty)."""

    def __init__(self, entered: dict):
        self.entered = entered

    def find_grade(self, name, notebook, assignment, student):
        grade = self.entered["grades"][name]
        return _Cell({"score": grade["auto_score"] or 0.0, "max_score": grade["max_score"]})

    def find_comment(self, name, notebook, assignment, student):
        return _Cell({"comment": self.entered["comments"][name]})

    def find_submission_notebook(self, notebook, assignment, student):
        grades = self.entered["grades"].values()
        return _Cell({"late_submission_penalty": None, "score": sum(g["auto_score"] or 0.0 for g in grades),
                      "max_score": sum(g["max_score"] for g in grades)})


def _grades_from_entry():
    """nbgrader's ``GetGrades`` reading the scores from ``resources`` instead of the database."""
    from nbgrader.preprocessors import GetGrades, NbGraderPreprocessor

    class GradesFromEntry(GetGrades):
        def preprocess(self, nb, resources):
            about = resources["nbgrader"]
            self.notebook_id, self.assignment_id = about["notebook"], about["assignment"]
            self.student_id = about["student"]
            self.gradebook = _EnteredView(about["entered"])
            nb, resources = NbGraderPreprocessor.preprocess(self, nb, resources)
            # as GetGrades.preprocess: no late penalty on a page rendered here
            notebook = self.gradebook.find_submission_notebook(self.notebook_id, self.assignment_id, self.student_id)
            about["score"], about["max_score"], about["late_penalty"] = notebook.score, notebook.max_score, 0
            return nb, resources

    return GradesFromEntry


class _Exporters:
    """nbgrader's converters' exporters, built once per process."""

    def __init__(self):
        from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
        from nbgrader.converters import GenerateFeedback
        from nbgrader.coursedir import CourseDirectory
        from nbgrader.preprocessors import DeduplicateIds, LimitOutput, OverwriteCells
        from traitlets.config import Config

        from autograder.feedback import HideHiddenTests

        # the settings autograder.course.write_config gives the course folder
        config = Config()
        config.GenerateFeedback.preprocessors = [_grades_from_entry(), HideHiddenTests, CSSHTMLHeaderPreprocessor]
        converter = GenerateFeedback(coursedir=CourseDirectory(config=config), config=config)
        self.html = converter.exporter_class(parent=converter, config=converter.config)
        for pp in converter.preprocessors:
            self.html.register_preprocessor(pp)
        self.dedup, self.overwrite = DeduplicateIds(), OverwriteCells()
        self.clear, self.limit = ClearMetadataPreprocessor(), LimitOutput()


_exporters: _Exporters | None = None


def _text(nb) -> str:
    """A notebook as ``nbformat.write`` (and nbconvert's ``NotebookExporter``) write it."""
    import nbformat

    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


def finish(spec: dict, output: dict) -> dict:
    """Everything a judged notebook becomes, decided where it was judged.

    ``spec``: ``notebook`` (the assembled notebook), ``name`` (its file name),
    ``assignment``, ``student`` and ``source`` (:meth:`Books.sources` for this notebook);
    ``output``: the judge's output. Returns ``submitted`` and ``autograded`` (the notebooks'
    text, as nbgrader's ``submitted/`` and ``autograded/`` folders hold them), ``grades``
    (grade id -> ``auto_score``, ``max_score``, in the notebook's order), ``comments``
    (grade id -> ``auto_comment``), ``page`` (the feedback page's HTML) and ``cpu`` (the
    CPU-seconds this took)."""
    global _exporters
    import nbformat
    from nbgrader import utils

    from autograder.assemble import with_results
    from autograder.feedback import translate_page

    cpu = time.process_time()
    if _exporters is None:
        _exporters = _Exporters()
    x = _exporters
    stem = Path(spec["name"]).stem
    errors = {c["index"]: c["error"] for c in output["cells"] if c["error"]}
    submitted = _text(with_results(nbformat.from_dict(spec["notebook"]), errors))
    source = spec["source"]
    resources = {"nbgrader": {"notebook": stem, "assignment": spec["assignment"], "student": spec["student"]}}

    # Autograde's first pass (sanitize), over the notebook as read from submitted/
    nb = nbformat.reads(submitted, as_version=4)
    nb, _ = x.dedup.preprocess(nb, resources)
    if source["kernelspec"]:  # OverwriteKernelspec
        nb.metadata["kernelspec"] = json.loads(source["kernelspec"])
    x.overwrite.gradebook, x.overwrite.notebook_id = _SourceView(source), stem
    x.overwrite.assignment_id = spec["assignment"]
    for index, cell in enumerate(nb.cells):
        nb.cells[index], _ = x.overwrite.preprocess_cell(cell, resources, index)
    # the second pass, over the notebook as read from autograded/
    nb = nbformat.reads(_text(nb), as_version=4)
    nb, _ = x.clear(nb, resources)
    nb, _ = x.limit(nb, resources)
    grades, comments = {}, {}
    for cell in nb.cells:  # SaveAutoGrades's decisions
        if utils.is_grade(cell):
            auto_score, max_score = utils.determine_grade(cell)
            grades[cell.metadata["nbgrader"]["grade_id"]] = {"auto_score": auto_score, "max_score": max_score}
        if utils.is_solution(cell) or utils.is_task(cell):
            unchanged = cell.metadata.nbgrader.get("checksum", None) == utils.compute_checksum(cell)
            comments[cell.metadata["nbgrader"]["grade_id"]] = \
                "No response." if unchanged and not utils.is_task(cell) else None
    autograded = _text(nb)

    # GenerateFeedback, over the notebook as read from autograded/
    page_resources = {"unique_key": stem, "output_files_dir": f"{stem}_files",
                      "nbgrader": {**resources["nbgrader"], "entered": {"grades": grades, "comments": comments}}}
    page, _ = x.html.from_notebook_node(nbformat.reads(autograded, as_version=4), resources=page_resources)
    page = translate_page(page, i18n.notebook_language(spec["notebook"].get("metadata")))
    return {"submitted": submitted, "autograded": autograded, "grades": grades, "comments": comments,
            "page": page, "cpu": time.process_time() - cpu}


class Finisher:
    """A helper process (``python -m autograder.entry``) that runs :func:`finish` for one
    judging thread: nbgrader and nbconvert are imported once, not per submission, and the
    work runs beside the thread's Python (it is CPU work: in the thread it would hold the
    interpreter's lock that the other judging threads and the coordinator need)."""

    _local = threading.local()

    def __init__(self):
        self.process = subprocess.Popen([sys.executable, "-m", "autograder.entry"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, preexec_fn=die_with_thread)

    @classmethod
    def of_this_thread(cls) -> Finisher:
        finisher = getattr(cls._local, "finisher", None)
        if finisher is None or finisher.process.poll() is not None:
            finisher = cls._local.finisher = cls()
        return finisher

    def finish(self, spec: dict, output: dict) -> dict:
        self.process.stdin.write(json.dumps({"spec": spec, "output": output}) + "\n")
        self.process.stdin.flush()
        reply = self.process.stdout.readline()
        if not reply:
            raise RuntimeError(f"the feedback helper process ended ({self.process.wait()})")
        reply = json.loads(reply)
        if "error" in reply:
            raise RuntimeError(f"the feedback helper failed: {reply['error']}")
        return reply


def judge_and_finish(job: dict, work: Path, timed: bool = False) -> dict | None:
    """:func:`autograder.judging.run_judge`, then :func:`finish` in this thread's helper
    process: the output gains ``finished`` (the notebooks' text, the scores, the feedback
    page)."""
    output = run_judge(job, work, timed)
    if output is not None:
        try:
            output["finished"] = Finisher.of_this_thread().finish(job["feedback"], output)
        except RuntimeError as err:  # the grader's own fault: the batch stops, the ledger keeps what is done
            raise GradingError(f"{job['feedback']['student']}/{job['assignment']}: {err}") from None
    return output


def main() -> int:
    """The helper process of :class:`Finisher`: one JSON request per line on standard
    input, one reply per line on standard output."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the thread that started it decides when it ends
    out = os.fdopen(os.dup(1), "w")
    sys.stdout = sys.stderr  # nothing else may write on the replies' channel
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = finish(request["spec"], request["output"])
        except Exception as err:  # noqa: BLE001 - reported to the coordinator, which stops the batch
            import traceback

            reply = {"error": f"{type(err).__name__}: {err}\n{traceback.format_exc()[-2000:]}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
