"""A cheaper student's process for judging the course's *own* notebooks many times over.

The grader starts every submission's process in a fresh box (``autograder.judge.sandboxed_runner``):
the box, Python and PyTorch's import cost about 1.2 CPU-seconds, paid once per submission, which
is nothing beside a submission's tests but most of the cost of the hundreds of judged runs of
``tests/test_mutants.py`` and ``tests/test_judge.py``. Here each chapter gets one warm process
instead, in the same box (the chapter's package view, the same limits), that has imported
NumPy, PyTorch (with ``torch._dynamo``, which the shortcut watch's first operation imports),
Matplotlib and IPython and drawn the dates of chapters 3, 7 and 8
(``attention_course.dates.make_date_task`` keeps what it drew per process) once; each judged run gets a fresh process forked from
it, which runs ``autograder.runner`` as the real one does.

Only for notebooks the course wrote: the forked processes of one chapter share that box's
``/tmp`` and process namespace, so one run could leave something behind for the next. That is
why the grader never judges a submission this way; the batches of ``tests/test_grading.py``
and ``tests/test_hostile.py`` go through the real, per-submission box.
"""

from __future__ import annotations

import atexit
import os
import select
import socket
import subprocess
import sys
import tempfile

import psutil

from autograder import sandbox
from autograder.chapter_view import package_view
from autograder.limits import Limits

# Runs in the box: imports once, then forks one runner per request. The request carries four
# file descriptors (the judge's request and reply pipes, the student's stdout and stderr);
# the answer is the child's process id, then, once it has ended, its exit code. One child
# at a time: the judge that asked waits for it.
_WARM = r"""
import os, random, socket, sys
import numpy, torch, torch.nn.functional, matplotlib.pyplot
# what PyTorch imports on the first operation under a TorchDispatchMode (the shortcut watch of the
# chapters with forbidden computations, attention_course.shortcuts.watching): about 1.2 CPU-s a child
import torch._dynamo
import IPython.core.interactiveshell
import attention_course.checks, attention_course.dates
from autograder import runner

attention_course.dates.make_date_task(seed=0)  # the dates of chapters 3, 7 and 8, drawn once for every child

control = socket.socket(fileno=int(sys.argv[1]))
while True:
    message, fds, _, _ = socket.recv_fds(control, 16, 4)
    if not message:
        break
    requests, replies, out, err = fds
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            control.close()
            os.setsid()
            os.dup2(out, 1)
            os.dup2(err, 2)
            os.close(out)
            os.close(err)
            random.seed()  # a fresh process draws fresh seeds: so does each child
            numpy.random.seed()
            runner.serve(requests, replies)
        except BaseException:
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    for fd in fds:
        os.close(fd)
    control.sendall(b"%d\n" % pid)
    _, status = os.waitpid(pid, 0)
    control.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))
"""


class _Warm:
    """The warm process of one chapter, in its box."""

    def __init__(self, limits: Limits, assignment: str):
        ours, theirs = socket.socketpair()
        self.errors = tempfile.TemporaryFile()
        argv = [sys.executable, "-c", _WARM, str(theirs.fileno())]
        self.box = subprocess.Popen(
            sandbox.command(argv, limits, package_view(assignment)),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.errors,
            pass_fds=(theirs.fileno(),), start_new_session=True,
        )
        theirs.close()
        self.control, self.buffer = ours, b""

    def line(self, timeout: float | None) -> int | None:
        """The next number the warm process sent; ``None`` if none came within ``timeout``."""
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.control], [], [], timeout)
            if not ready:
                return None
            chunk = self.control.recv(4096)
            if not chunk:
                self.errors.seek(0)
                raise RuntimeError("the warm student's process ended: " + self.errors.read()[-2000:].decode(errors="replace"))
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return int(line)

    def fork(self, requests: int, replies: int) -> _Forked:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        socket.send_fds(self.control, [b"run"], [requests, replies, out_w, err_w])
        os.close(out_w)
        os.close(err_w)
        inner = self.line(timeout=None)
        return _Forked(self, self._outside(inner), os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb"))

    def _outside(self, inner: int) -> int:
        """The process id, here, of the box's process ``inner`` (its id in the box's namespace)."""
        for process in psutil.Process(self.box.pid).children(recursive=True):
            with open(f"/proc/{process.pid}/status") as status:
                ids = next(line for line in status if line.startswith("NSpid:")).split()[1:]
            if len(ids) > 1 and int(ids[-1]) == inner:
                return process.pid
        raise RuntimeError(f"the forked student's process {inner} is not in the box")

    def close(self) -> None:
        self.control.close()  # the warm process's loop ends; --die-with-parent covers the rest
        self.box.wait(timeout=10)


class _Forked:
    """One forked runner, with what ``autograder.judge.Link`` asks of a process: ``pid`` (that of
    its process group), ``stdout``, ``stderr``, ``poll()`` and ``wait()``."""

    def __init__(self, warm: _Warm, pid: int, stdout, stderr):
        self.warm, self.pid, self.stdout, self.stderr = warm, pid, stdout, stderr
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.warm.line(timeout=0)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self.returncode = self.warm.line(timeout=None)
        return self.returncode


_warm: dict[tuple[str, Limits], _Warm] = {}


def start(limits: Limits, assignment: str, requests: int, replies: int) -> _Forked:
    """A starter for ``autograder.judge.Judge``: the chapter's warm process (started on first
    use, kept for this test process) forks the runner."""
    key = (assignment, limits)
    if key not in _warm:
        _warm[key] = _Warm(limits, assignment)
    return _warm[key].fork(requests, replies)


@atexit.register
def _close_all() -> None:
    for warm in _warm.values():
        warm.close()
