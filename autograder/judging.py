"""One submission through the judges: what it is (:class:`Submission`), what goes in
(:class:`Prepared`: per notebook, the assembled notebook and the judge's job), how one judge
process is run (:func:`run_judge`), and what comes out (:class:`Judged`).

Shared by the judges on this machine (:class:`autograder.grade.LocalJudges`) and those on a
Dask cluster (:mod:`autograder.distributed`), so that neither module imports the other.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.limits import Limits

if TYPE_CHECKING:
    import nbformat


@dataclasses.dataclass
class Submission:
    student_id: str
    assignment: str
    folder: Path


@dataclasses.dataclass
class Prepared:
    """A submission made ready to judge: per notebook, the assembled notebook and the
    judge's job (plain JSON data, so that it can travel to another machine); or why there
    is nothing to judge."""

    submission: Submission
    jobs: dict[str, tuple[nbformat.NotebookNode, dict]]  # name -> (assembled, job)
    problem: str | None = None


@dataclasses.dataclass
class Judged:
    """What the judges said of a submission (or why there was nothing to judge)."""

    submission: Submission
    notebooks: dict[str, tuple[nbformat.NotebookNode, dict]]  # name -> (assembled, judge output)
    problem: str | None = None  # the submission's fault: graded 0 with this reason
    lost: str | None = None  # the infrastructure's fault: not graded, the next run tries again


UNJUDGED = ("the grader could not judge this notebook (its results were too large or its run too long); "
            "no test could be decided")


_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _judge_process_setup(megabytes: int):
    def apply() -> None:  # runs in the child before exec
        size = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
        # the judge (and, through bubblewrap's --die-with-parent, its sandbox) dies with the
        # thread that started it: a killed grader or Dask worker leaves nothing running
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

    return apply


def run_judge(job: dict, work: Path, timed: bool = False) -> dict | None:
    """Run one judge process (``python -m autograder.judge``) over ``job`` in the folder
    ``work``; return its output, or None when it gave none (it was killed, or ran past
    its limit). With ``timed``, the output keeps the judge's ``stages`` timing (see
    :meth:`autograder.stages.Stages.add_judge`)."""
    limits = Limits(**job["limits"])
    work.mkdir(parents=True, exist_ok=True)
    results = work / "results.json"
    job_path = work / "job.json"
    job_path.write_text(json.dumps({**job, "results": str(results)}))
    results.unlink(missing_ok=True)
    launched = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "autograder.judge", str(job_path)],
            capture_output=True, text=True, timeout=limits.notebook_timeout_s + 120,
            preexec_fn=_judge_process_setup(limits.memory_mb + 4096), cwd=work,
        )
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0 or not results.is_file():
        return None
    output = json.loads(results.read_text())
    timing = output.pop("timing")
    if timed:
        output["stages"] = {**timing, "launched": launched}
    return output


def judged_from(prepared: Prepared, outputs: dict[str, dict | None]) -> Judged:
    """Put the judges' ``outputs`` (name -> output, None: no output) with what was prepared."""
    if prepared.problem:
        return Judged(prepared.submission, {}, prepared.problem)
    if any(outputs.get(name) is None for name in prepared.jobs):
        return Judged(prepared.submission, {}, UNJUDGED)
    return Judged(prepared.submission, {name: (graded, outputs[name]) for name, (graded, _) in prepared.jobs.items()})
