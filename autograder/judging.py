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
import os
import resource
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.limits import THREAD_VARIABLES, Limits

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


def die_with_thread() -> None:
    """In a child process before exec: die with the thread that started it, so that a
    killed grader or Dask worker leaves nothing running."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _judge_process_setup(megabytes: int):
    def apply() -> None:  # runs in the child before exec
        size = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
        # the judge's sandbox dies with it too (bubblewrap's --die-with-parent)
        die_with_thread()

    return apply


def computing_on(threads: int) -> dict[str, str]:
    """This process's environment, with NumPy's and PyTorch's pools of ``threads`` threads."""
    return {**os.environ, **{name: str(threads) for name in THREAD_VARIABLES}}


class JudgeStarterGone(RuntimeError):
    """The helper process of :class:`JudgeStarter` ended."""


class JudgeStarter:
    """A helper process per judging thread (``python -m autograder.judging``) that imports what
    every judge imports (NumPy, PyTorch, :mod:`autograder.judge`) once, and forks the judge of
    each submission from that state. Each judge is still a process of its own that starts from
    nothing another submission left (the helper itself judges nothing), with the same limit on
    its address space, dying with the helper as the helper dies with the thread; it only does not
    import PyTorch again: about a CPU-second of each judge's start, most of a chapter's judge."""

    _local = threading.local()

    def __init__(self, threads: int):
        self.threads = threads
        self.process = subprocess.Popen([sys.executable, "-m", "autograder.judging"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, preexec_fn=die_with_thread,
                                        env=computing_on(threads))
        self.buffer = b""

    @classmethod
    def of_this_thread(cls, threads: int) -> JudgeStarter:
        """This thread's helper, whose judges compute on ``threads`` threads."""
        starter = getattr(cls._local, "starter", None)
        if starter is None or starter.process.poll() is not None or starter.threads != threads:
            if starter is not None:  # a batch with another thread count: its helper is done
                starter.process.kill()
                starter.process.wait()
            starter = cls._local.starter = cls(threads)
        return starter

    def _line(self, timeout: float | None) -> int | None:
        """The next number the helper wrote; ``None`` if none came within ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        fd = self.process.stdout.fileno()
        while b"\n" not in self.buffer:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                raise JudgeStarterGone(f"the judges' helper process ended ({self.process.wait()})")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return int(line)

    def judge(self, job_path: Path, work: Path, megabytes: int, timeout: float) -> int | None:
        """Fork a judge over the job ``job_path`` in the folder ``work``, its address space limited
        to ``megabytes``; its exit status, or ``None`` when it ran past ``timeout`` seconds (it is
        killed then)."""
        request = json.dumps({"job": str(job_path), "work": str(work), "megabytes": megabytes})
        try:
            self.process.stdin.write(request.encode() + b"\n")
            self.process.stdin.flush()
        except OSError as err:
            raise JudgeStarterGone(f"the judges' helper process ended ({err})") from None
        pid = self._line(None)
        status = self._line(timeout)
        if status is None:
            os.kill(pid, signal.SIGKILL)  # not reaped yet: the helper is waiting for it
            self._line(None)
        return status


def _serve() -> int:
    """The helper process of :class:`JudgeStarter`: one request per line on standard input (the
    job, the folder, the limit), two numbers per request on standard output (the judge's process
    id, then its exit status)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the thread that started it decides when it ends
    import numpy  # noqa: F401 - what every judge imports, imported once here

    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    from autograder import judge

    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # nothing else may write on the replies' channel
    helper = os.getpid()
    for line in sys.stdin.buffer:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the judge: its own folder, limits and standard streams, then judge.main
            status = 1
            try:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                replies.close()
                os.chdir(request["work"])
                _judge_process_setup(request["megabytes"])()  # dies with the helper from now on
                if os.getppid() == helper:  # else the helper ended before: nothing to judge for
                    signal.signal(signal.SIGINT, signal.SIG_DFL)
                    status = judge.main([request["job"]])
            finally:
                os._exit(status)
        replies.write(b"%d\n" % pid)
        _, status = os.waitpid(pid, 0)
        replies.write(b"%d\n" % os.waitstatus_to_exitcode(status))
    return 0


def run_judge(job: dict, work: Path, timed: bool = False) -> dict | None:
    """Run one judge process (``python -m autograder.judge``) over ``job`` in the folder
    ``work``; return its output, or None when it gave none (it was killed, or ran past
    its limit). With ``timed``, the output keeps the judge's ``stages`` timing (see
    :meth:`autograder.stages.Stages.add_judge`)."""
    limits = Limits(**job["limits"])
    work.mkdir(parents=True, exist_ok=True)
    results = work / "results.json"
    job_path = work / "job.json"
    # the job's feedback part is for autograder.entry.finish, not for the judge
    job_path.write_text(json.dumps({**{k: v for k, v in job.items() if k != "feedback"}, "results": str(results)}))
    results.unlink(missing_ok=True)
    launched = time.monotonic()
    megabytes, timeout = limits.memory_mb + 4096, limits.notebook_timeout_s + 120
    # the judge waits for its student's process most of the time, and there is a judge per core:
    # more threads than the student has would only spin beside the other judges and students
    threads = limits.threads
    try:
        returncode = JudgeStarter.of_this_thread(threads).judge(job_path, work, megabytes, timeout)
    except JudgeStarterGone:  # judged as before the helper: a process started from scratch
        try:
            returncode = subprocess.run(
                [sys.executable, "-m", "autograder.judge", str(job_path)],
                capture_output=True, text=True, timeout=timeout, preexec_fn=_judge_process_setup(megabytes), cwd=work,
                env=computing_on(threads),
            ).returncode
        except subprocess.TimeoutExpired:
            returncode = None
    if returncode != 0 or not results.is_file():
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


if __name__ == "__main__":
    sys.exit(_serve())
