"""nbgrader's Validate on a slow machine: ``python -m benchmarks.validate_slow`` (``make validate-slow``).

For each chapter, the released learner notebook (``notebooks/``) with every answer filled in
from its source notebook (``solutions/``), as a learner hands it in, is validated by
``nbgrader validate`` with nbgrader's defaults (no configuration file: a fresh ``HOME`` and
working folder; the default 30-second timeout per cell) on one thread (``OMP_NUM_THREADS=1``)
and **half a CPU core**: nbgrader and its kernel run in a cgroup of their own limited to 50 ms
of CPU every 100 ms (cgroup v1 ``cpu.cfs_quota_us``, or v2 ``cpu.max``; it needs root), with a
CPU weight 16 times a process's default so that the other jobs of a busy machine do not leave
it less than that.

Printed per chapter: nbgrader's verdict, the slowest cell and its wall seconds, the cells over
a third of nbgrader's 30 seconds, how many "cannot be converted to a float" warnings nbgrader
printed (one per test cell whose last line has a value, see ``nbgrader.utils.get_partial_grade``),
and the CPU seconds the validation used against its wall seconds (at most 0.5 core on average;
less when the machine is busy: the cells' times are then those of a slower machine still). The cell times come from the same run: nbclient's timestamps of each cell
(``metadata.execution``), read from the notebook that nbgrader executed. Exit status 1 if a
chapter failed validation.

Not a test of ``make test``: it runs every chapter's notebook, trainings included, at half a
core (several minutes).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime as dt
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

import layout
from layout import regions

NBGRADER_TIMEOUT_S = 30  # nbgrader.preprocessors.Execute.timeout's default
QUOTA_US, PERIOD_US = 50_000, 100_000  # half a core
# the group's CPU weight, in times a process's default: so that a busy machine still gives the
# group its half core (no more: the quota caps it)
WEIGHT = 16


def _solution_cell(cell) -> bool:
    return cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution", False)


def filled(assignment: str) -> nbformat.NotebookNode:
    """The released notebook of ``assignment`` with each solution cell holding the source
    notebook's answer, without nbgrader's markers."""
    (source,) = layout.source_notebooks(assignment)
    answers = {}
    for cell in nbformat.read(source, as_version=4).cells:
        if _solution_cell(cell):
            answers[cell.metadata["nbgrader"]["grade_id"]] = regions.unmarked(cell.source, regions.SOLUTION)
    nb = copy.deepcopy(nbformat.read(layout.NOTEBOOKS / assignment / source.name, as_version=4))
    for cell in nb.cells:
        if _solution_cell(cell):
            cell.source = answers[cell.metadata["nbgrader"]["grade_id"]]
    return nb


@contextlib.contextmanager
def half_a_core():
    """A cgroup limited to half a CPU core; yields the file a process writes its pid into to join it."""
    v1, v2 = Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup")
    if (v1 / "cpu.cfs_quota_us").exists():
        group = v1 / f"validate_slow_{os.getpid()}"
        group.mkdir()
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(QUOTA_US))
        (group / "cpu.shares").write_text(str(WEIGHT * 1024))
    elif (v2 / "cgroup.controllers").exists():
        group = v2 / f"validate_slow_{os.getpid()}"
        group.mkdir()
        (group / "cpu.max").write_text(f"{QUOTA_US} {PERIOD_US}")
        (group / "cpu.weight").write_text(str(WEIGHT * 100))
    else:
        raise SystemExit("no cgroup cpu controller here: the CPU limit needs cgroup v1 or v2 (and root)")
    try:
        yield group / "cgroup.procs"
    finally:
        group.rmdir()


# Run inside the limited group: nbgrader's own ``validate`` command, with the executed notebook's
# cell timings written to a file on the way (Validator._preprocess returns that notebook).
_CHILD = r"""
import json, sys
from nbgrader.apps import NbGraderApp
from nbgrader.validator import Validator
original = Validator._preprocess
def timed(self, nb):
    nb = original(self, nb)
    cells = [{"index": i, "grade_id": c.metadata.get("nbgrader", {}).get("grade_id", ""),
              "execution": dict(c.metadata.get("execution", {})),
              "timeout": any(o.get("ename") == "CellTimeoutError" for o in c.get("outputs", []))}
             for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    with open(sys.argv[2], "w") as f:
        json.dump(cells, f)
    return nb
Validator._preprocess = timed
sys.exit(NbGraderApp.launch_instance(argv=["validate", sys.argv[1]]))
"""


def _seconds(execution: dict) -> float | None:
    try:
        start = dt.datetime.fromisoformat(execution["iopub.execute_input"].replace("Z", "+00:00"))
        end = dt.datetime.fromisoformat(execution["shell.execute_reply"].replace("Z", "+00:00"))
    except KeyError:
        return None
    return (end - start).total_seconds()


def validate(assignment: str, procs: Path, folder: Path) -> dict:
    """Validate ``assignment``'s filled notebook in ``folder`` inside the cgroup of ``procs``."""
    nb = filled(assignment)
    path = folder / f"{assignment}.ipynb"
    nbformat.write(nb, path)
    home = folder / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "OMP_", "MKL_"))}
    env.update(HOME=str(home), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONPATH=str(layout.REPO))
    timings = folder / f"{assignment}.timings.json"

    def join() -> None:
        procs.write_text(str(os.getpid()))

    cpu_before, start = _children_cpu(), time.perf_counter()
    run = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(timings)], cwd=folder, env=env,
                         capture_output=True, text=True, preexec_fn=join)
    cpu, wall = _children_cpu() - cpu_before, time.perf_counter() - start
    output = (run.stdout + run.stderr).strip()
    cells = json.loads(timings.read_text()) if timings.exists() else []
    for cell in cells:
        cell["seconds"] = _seconds(cell["execution"])
    return {"assignment": assignment, "returncode": run.returncode, "output": output, "cells": cells, "cpu": cpu,
            "wall": wall}


def _children_cpu() -> float:
    """CPU seconds of the finished child processes (nbgrader, and the kernel it waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.validate_slow", description=__doc__.split("\n\n")[0])
    assignments = layout.assignments()
    parser.add_argument("--chapters", nargs="+", choices=assignments, default=assignments, metavar="ASSIGNMENT")
    parser.add_argument("--verbose", action="store_true", help="print nbgrader's whole output")
    args = parser.parse_args(argv)
    failed = []
    with half_a_core() as procs, tempfile.TemporaryDirectory(prefix="validate_slow_") as tmp:
        print(f"nbgrader validate, defaults ({NBGRADER_TIMEOUT_S} s per cell), OMP_NUM_THREADS=1, "
              f"CPU limited to {QUOTA_US / PERIOD_US:g} core", flush=True)
        for assignment in args.chapters:
            result = validate(assignment, procs, Path(tmp))
            lines = result["output"].splitlines()
            verdict = next((ln.strip() for ln in lines if "Success!" in ln or "VALIDATION FAILED" in ln),
                           lines[-1].strip() if lines else "(no output)")
            timed = [c for c in result["cells"] if c["seconds"] is not None]
            slowest = max(timed, key=lambda c: c["seconds"], default=None)
            slow = [c for c in timed if c["seconds"] > NBGRADER_TIMEOUT_S / 3]
            timeouts = [c for c in result["cells"] if c["timeout"]]
            floats = sum("which cannot be converted to" in ln for ln in lines)
            ok = result["returncode"] == 0 and "Success!" in verdict and not timeouts
            if not ok:
                failed.append(assignment)
            print(f"{assignment}: {verdict}", flush=True)
            if slowest is not None:
                print(f"  slowest cell: {slowest['grade_id'] or '#' + str(slowest['index'])} "
                      f"{slowest['seconds']:.1f} s of {NBGRADER_TIMEOUT_S}; over {NBGRADER_TIMEOUT_S / 3:g} s: "
                      f"{', '.join(f'''{c['grade_id']} {c['seconds']:.1f} s''' for c in slow) or 'none'}; "
                      f"total {sum(c['seconds'] for c in timed):.0f} s in {len(timed)} cells", flush=True)
            print(f"  timeouts: {', '.join(c['grade_id'] or '#' + str(c['index']) for c in timeouts) or 'none'}; "
                  f"'cannot be converted to a float' warnings: {floats}; {result['cpu']:.0f} CPU s in "
                  f"{result['wall']:.0f} s wall ({result['cpu'] / result['wall']:.2f} cores on average)", flush=True)
            if args.verbose or not ok:
                print("\n".join("    " + ln for ln in lines[-40:]), flush=True)
    print(f"validate-slow: {'failed: ' + ', '.join(failed) if failed else 'every chapter validates'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
