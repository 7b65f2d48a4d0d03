"""Where a batch's time goes, stage by stage (``grade --stage-times``, ``make bench-grade``).

Two halves:

* :class:`Stages` adds up wall and CPU seconds per stage of the coordinator (its own
  work runs in one thread, so ``time.thread_time`` is its CPU) and per stage of each judge,
  and writes ``OUT/stages.json``;
* ``python -m autograder.stages JOB.json`` is the judge (:func:`autograder.judge.main`,
  unchanged) timed from the outside: it wraps the judge's link to the student's process to
  tell the time the judge waits on the student's process from the time it spends on the
  tests itself, samples the CPU of the student's process tree just before the judge stops
  it, and writes ``<results>.stages.json`` beside the results. Only benchmarks start it;
  ``grade`` without ``--stage-times`` starts :mod:`autograder.judge` itself.

The judge's stages, per notebook: *judge start-up* (from the moment the coordinator starts
the process until the judge runs its first cell: the interpreter, the imports, the sandbox
being launched), *student process* (every request the judge waits on: the student process
starting in its sandbox, the student's cells, the calls the tests make into it), *judge
tests* (the rest of the judge's run: the test cells' own work).
"""

from __future__ import annotations

import contextlib
import json
import resource
import sys
import time

START = time.monotonic()  # before the judge and its imports: the interpreter's start-up is before this

JUDGE_STAGES = ("judge start-up", "student process", "judge tests")


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Stages:
    """Wall and CPU seconds per stage, added up over a batch."""

    def __init__(self) -> None:
        self.totals: dict[str, dict[str, float]] = {}
        # per assignment: submissions judged, the judges' wall and CPU seconds (all stages)
        self.judged: dict[str, dict[str, float]] = {}

    def add(self, stage: str, wall: float, cpu: float) -> None:
        entry = self.totals.setdefault(stage, {"wall": 0.0, "cpu": 0.0})
        entry["wall"] += wall
        entry["cpu"] += cpu

    @contextlib.contextmanager
    def timed(self, stage: str, children: bool = False):
        """Time a block of the coordinator's own work (CPU: this thread's; with
        ``children``, also the processes it started and waited for, which must then be the
        only ones running)."""
        wall, cpu, child = time.perf_counter(), time.thread_time(), _children_cpu()
        try:
            yield
        finally:
            extra = _children_cpu() - child if children else 0.0
            self.add(stage, time.perf_counter() - wall, time.thread_time() - cpu + extra)

    def add_judge(self, timing: dict, assignment: str) -> None:
        """Add one judge run's ``<results>.stages.json`` (``launched``: when it was started)
        over a notebook of ``assignment``."""
        started, ended = timing["run_started"], timing["run_ended"]
        student = timing["student_wall"]
        parts = {
            "judge start-up": (started - timing["launched"] + timing["exited"] - ended, timing["cpu_at_run"]),
            "student process": (student, timing["student_cpu"]),
            "judge tests": (ended - started - student, timing["cpu_at_exit"] - timing["cpu_at_run"]),
        }
        entry = self.judged.setdefault(assignment, {"notebooks": 0, "wall": 0.0, "cpu": 0.0})
        entry["notebooks"] += 1
        for stage, (wall, cpu) in parts.items():
            self.add(stage, wall, cpu)
            entry["wall"] += wall
            entry["cpu"] += cpu

    def write(self, path, **about) -> None:
        path.write_text(json.dumps({**about, "stages": self.totals, "judged": self.judged}, indent=2))


def _tree_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` and every process under it (reaped ones included)."""
    import psutil

    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            t = process.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
    return total


def main(argv: list[str] | None = None) -> int:
    """Run :func:`autograder.judge.main` over JOB.json, timed; see the module's docstring."""
    from autograder import judge

    path = (argv or sys.argv[1:])[0]
    clock = {"student_wall": 0.0, "student_cpu": 0.0}
    link_request, link_stop, judge_run = judge.Link.request, judge.Link.stop, judge.Judge.run

    def request(self, *args, **kwargs):
        begun = time.monotonic()
        try:
            return link_request(self, *args, **kwargs)
        finally:
            clock["student_wall"] += time.monotonic() - begun

    def stop(self, *args, **kwargs):
        if "student_sampled" not in clock and self.process.poll() is None:
            clock["student_sampled"] = True
            clock["student_cpu"] = _tree_cpu(self.process.pid)
        return link_stop(self, *args, **kwargs)

    def run(self, *args, **kwargs):
        clock["run_started"], clock["cpu_at_run"] = time.monotonic(), _own_cpu()
        try:
            return judge_run(self, *args, **kwargs)
        finally:
            clock["run_ended"] = time.monotonic()

    # the judge's own code runs unchanged; only its link and its run are timed
    judge.Link.request, judge.Link.stop, judge.Judge.run = request, stop, run
    status = judge.main([path])
    results = json.loads(open(path).read())["results"]
    clock.pop("student_sampled", None)
    with open(results + ".stages.json", "w") as f:
        json.dump({**clock, "entered": START, "cpu_at_exit": _own_cpu(), "exited": time.monotonic()}, f)
    return status


if __name__ == "__main__":
    sys.exit(main())
