"""Where a batch's time goes, stage by stage (``grade --stage-times``, ``make bench-grade``).

:class:`Stages` adds up wall and CPU seconds per stage of the coordinator (its own work runs
in one thread, so ``time.thread_time`` is its CPU) and per stage of each judge, from the
timing every judge writes with its results (:func:`autograder.judge.main`), and writes
``OUT/stages.json``.

The work done where the judging ran after the judge is one more stage, *autograded
notebook, feedback page* (:func:`autograder.entry.finish`, CPU only). The judge's stages,
per notebook: *judge start-up* (from the moment the coordinator starts
the process until the judge runs its first cell, and from its last cell until it exits: the
interpreter, the imports, the sandbox being launched), *student process* (every request the
judge waits on: the student process starting in its sandbox, the student's cells, the calls
the tests make into it), *judge tests* (the rest of the judge's run: the test cells' own work).
"""

from __future__ import annotations

import contextlib
import json
import resource
import time

JUDGE_STAGES = ("judge start-up", "student process", "judge tests")
#: the work done where the judging ran after the judge (:func:`autograder.entry.finish`:
#: ``Autograde``'s preprocessors, the feedback page); CPU only, in its helper process
FINISH_STAGE = "autograded notebook, feedback page"


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
        """Add one judge run's ``timing`` (its results' ``timing``, with ``launched``: when the
        coordinator started it) over a notebook of ``assignment``."""
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

    def add_finish(self, cpu: float, assignment: str) -> None:
        """Add the CPU seconds :func:`autograder.entry.finish` spent on a notebook of ``assignment``."""
        self.add(FINISH_STAGE, 0.0, cpu)
        self.judged.setdefault(assignment, {"notebooks": 0, "wall": 0.0, "cpu": 0.0})["cpu"] += cpu

    def write(self, path, **about) -> None:
        path.write_text(json.dumps({**about, "stages": self.totals, "judged": self.judged}, indent=2))
