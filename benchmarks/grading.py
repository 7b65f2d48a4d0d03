"""How fast the grader grades, against plain nbgrader: ``python -m benchmarks.grading`` (``make bench-grade``).

Builds a batch in a temporary folder: for every assignment, the solution notebook, the
blank learner notebook, and partly correct learner notebooks (half of the exercises filled
in with the solution, the other half left as the stub; a different half for each student);
``--students`` sets how many students (the size knob), ``--assignments`` which
assignments (by default those whose grading trains no model, so that a run takes about ten
minutes on two cores). Then grades the same batch

* with ``python -m autograder grade --stage-times`` and ``--workers 1``, then
  ``--workers 2`` (a fresh ``OUT`` each time, so nothing is resumed from a ledger):
  sandboxed judges, the gradebook, the feedback pages, everything an instructor gets;
* with plain nbgrader, the standard way: a course folder with ``source/`` = ``solutions/``,
  ``nbgrader generate_assignment``, the submissions in ``submitted/``, ``nbgrader
  autograde <assignment>`` (unsandboxed, one process, the notebooks executed in place), and
  for the same outputs as ours, ``nbgrader generate_feedback`` on top.

Prints wall seconds, submissions per minute, seconds per submission and the overhead per
submission over plain ``nbgrader autograde``, in wall time and in CPU time (the CPU time of
every process a run started and waited for, steadier than wall time on a busy machine); then
where our runs spend their time, per stage (:mod:`autograder.stages`), in wall and CPU
seconds per submission; checks that every run gives every submission the same score (exit
status 1, and a loud message, if not). The last line is
``speed-up 2 workers / 1 worker: X.XX; wall with 2 workers / plain nbgrader: Y.YY``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from autograder import course
import layout
from layout import regions
from autograder.limits import Limits
from autograder.stages import FINISH_STAGE, JUDGE_STAGES



def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _solved(source_cell) -> str:
    """A source solution cell as a learner who got it right would leave it: the markers gone."""
    return regions.unmarked(source_cell.source, regions.SOLUTION)


def _partly_solved(source_path: Path, learner_path: Path, keep) -> nbformat.NotebookNode:
    """The learner notebook with the exercises for which ``keep(index)`` is true filled in."""
    solutions = {_meta(c)["grade_id"]: c for c in nbformat.read(source_path, as_version=4).cells
                 if _meta(c).get("solution")}
    nb = nbformat.read(learner_path, as_version=4)
    exercises = [c for c in nb.cells if _meta(c).get("solution")]
    for i, cell in enumerate(exercises):
        if keep(i, len(exercises)):
            cell.source = _solved(solutions[_meta(cell)["grade_id"]])
    return nb


# student id -> which exercises (index i of n) that student solved
PARTIAL = {
    "partial_first_half": lambda i, n: i < n // 2,
    "partial_second_half": lambda i, n: i >= n // 2,
    "partial_even": lambda i, n: i % 2 == 0,
    "partial_odd": lambda i, n: i % 2 == 1,
}


VARIANTS = ["solution", "blank", *PARTIAL]


def students(count: int) -> list[str]:
    """``count`` student ids: the solution, the blank notebook, the partial ones, then the
    same again under new ids (``solution_2``, ...), so a batch can be any size."""
    if count < 1:
        raise course.GradingError(f"students per assignment must be at least 1, not {count}")
    return [VARIANTS[i % len(VARIANTS)] + (f"_{i // len(VARIANTS) + 1}" if i >= len(VARIANTS) else "")
            for i in range(count)]


def _variant(student: str) -> str:
    return student.rsplit("_", 1)[0] if student.rsplit("_", 1)[-1].isdigit() else student


def build_batch(folder: Path, assignments: list[str], count: int) -> list[tuple[str, str]]:
    """Write ``folder/<student>/<assignment>/<notebook>.ipynb``; return the (student, assignment) pairs."""
    names = students(count)
    for assignment in assignments:
        for source in layout.source_notebooks(assignment):
            learner = layout.NOTEBOOKS / assignment / source.name
            if not learner.is_file():
                raise course.GradingError(f"{learner} is missing: run `make release` first")
            for student in names:
                target = folder / student / assignment / source.name
                target.parent.mkdir(parents=True, exist_ok=True)
                variant = _variant(student)
                if variant == "solution":
                    shutil.copy(source, target)
                elif variant == "blank":
                    shutil.copy(learner, target)
                else:
                    nbformat.write(_partly_solved(source, learner, PARTIAL[variant]), target)
    return [(s, a) for s in names for a in assignments]


def cpu_seconds() -> float:
    """CPU time (user + system) of every finished child process so far: less sensitive than
    wall time to other work on the machine."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(cmd: list[str], cwd: Path, env: dict | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd[:6])} ... failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return seconds


def grade_ours(subs: Path, out: Path, workers: int) -> tuple[float, float, dict, dict]:
    """``python -m autograder grade --workers N --stage-times``: (wall s, CPU s, scores, stages)."""
    cpu = cpu_seconds()
    seconds = _run([sys.executable, "-m", "autograder", "grade", str(subs), "--out", str(out),
                    "--workers", str(workers), "--stage-times"], cwd=layout.REPO)
    with open(out / "grades.csv") as f:
        scores = {(r["student_id"], r["assignment"]): float(r["score"]) for r in csv.DictReader(f)}
    return seconds, cpu_seconds() - cpu, scores, json.loads((out / "stages.json").read_text())


STAGE_ORDER = ["course set-up", "assembly", *JUDGE_STAGES, FINISH_STAGE, "gradebook entry", "ledger",
               "feedback pages", "similarity", "outputs"]


def print_stages(n: int, runs: list[tuple[str, dict]]) -> None:
    """Seconds per submission in each stage, wall and CPU, for each of our runs; then the
    judges' seconds per notebook of each assignment (what a worker spends on it)."""
    staged = [(label, about["stages"]) for label, about in runs]
    print("where the time goes, seconds per submission (wall: summed over submissions, so stages that "
          "run in parallel add up to more than the batch's wall time)")
    header = ["stage", *[f"{label} {kind}" for label, _ in staged for kind in ("wall", "CPU")]]
    rows = []
    for stage in STAGE_ORDER + sorted({k for _, st in staged for k in st} - set(STAGE_ORDER)):
        rows.append([stage, *[f"{st.get(stage, {}).get(kind, 0.0) / n:.2f}" for _, st in staged
                              for kind in ("wall", "cpu")]])
    rows.append(["total", *[f"{sum(v[kind] for v in st.values()) / n:.2f}" for _, st in staged
                            for kind in ("wall", "cpu")]])
    _table(header, rows)
    print()
    print("seconds per submission where the judging ran, by chapter (the judge's start-up, the student's "
          "process and the tests; CPU also the autograded notebook and the feedback page)")
    assignments = sorted({a for _, about in runs for a in about["judged"]})
    rows = []
    for assignment in assignments:
        cells = []
        for _, about in runs:
            entry = about["judged"].get(assignment)
            cells += [f"{entry[kind] / entry['notebooks']:.2f}" if entry else "" for kind in ("wall", "cpu")]
        rows.append([assignment, *cells])
    _table(["assignment", *[f"{label} {kind}" for label, _ in runs for kind in ("wall", "CPU")]], rows)


def _table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))


def grade_plain(subs: Path, root: Path, assignments: list[str], cell_timeout: int):
    """Plain nbgrader over the same batch: (autograde wall and CPU seconds, feedback wall and
    CPU seconds, scores).

    The autograde time includes writing the course folder and ``generate_assignment``,
    as ours does."""
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
           "JUPYTER_CONFIG_DIR": str(root / ".jupyter")}  # no instructor-wide config
    nbgrader = [sys.executable, "-m", "nbgrader"]
    cpu, start = cpu_seconds(), time.perf_counter()
    root.mkdir(parents=True)
    db = root / "gradebook.db"
    (root / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821\n"
        f"c.CourseDirectory.root = {str(root)!r}\n"
        f"c.CourseDirectory.db_url = {f'sqlite:///{db}'!r}\n"
        f"c.Execute.timeout = {cell_timeout}\n"
    )
    shutil.copytree(layout.SOLUTIONS, root / "source", ignore=shutil.ignore_patterns(".*"))
    for student in sorted(p for p in subs.iterdir() if p.is_dir()):
        shutil.copytree(student, root / "submitted" / student.name)
    for assignment in assignments:
        _run([*nbgrader, "generate_assignment", assignment, "--force", "--log-level=WARN"], root, env)
    for assignment in assignments:
        _run([*nbgrader, "autograde", assignment, "--force", "--create", "--log-level=WARN"], root, env)
    autograde, autograde_cpu = time.perf_counter() - start, cpu_seconds() - cpu
    cpu, start = cpu_seconds(), time.perf_counter()
    for assignment in assignments:
        _run([*nbgrader, "generate_feedback", assignment, "--force", "--log-level=WARN"], root, env)
    feedback, feedback_cpu = time.perf_counter() - start, cpu_seconds() - cpu
    scores = {}
    with Gradebook(f"sqlite:///{db}") as gb:
        for assignment in assignments:
            for submission in gb.find_assignment(assignment).submissions:
                scores[submission.student_id, assignment] = float(submission.score)
    return (autograde, autograde_cpu), (feedback, feedback_cpu), scores




def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.grading", description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignments", nargs="*", default=None,
                        help="assignments in the batch, or `all` (default: those that do not train a model)")
    parser.add_argument("--students", type=int, default=len(VARIANTS),
                        help=f"students per assignment: the solution, the blank notebook, {len(PARTIAL)} half-done "
                             f"ones, then the same again under new ids (default {len(VARIANTS)}): the size knob")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts to time (default 1 2)")
    parser.add_argument("--no-plain", action="store_true", help="skip plain nbgrader")
    parser.add_argument("--keep", type=Path, default=None, help="keep the batch and the outputs in this folder")
    args = parser.parse_args(argv)
    known = layout.assignments()
    if args.assignments in (None, []):
        # chapters whose grading trains a model (a kernel-only cell) take minutes each; left out
        # by default so that a run of the three gradings fits in about ten minutes on two cores
        from autograder.distributed import trains

        assignments = [a for a in known if not trains(a)]
    elif args.assignments == ["all"]:
        assignments = known
    else:
        assignments = args.assignments
        unknown = sorted(set(assignments) - set(known))
        if unknown:
            parser.error(f"unknown assignment {', '.join(unknown)} (known: {', '.join(known)})")
    if args.students < 1:
        parser.error(f"--students must be at least 1, not {args.students}")
    if any(w < 1 for w in args.workers):
        parser.error("--workers counts must be at least 1")

    work = args.keep or Path(tempfile.mkdtemp(prefix="attention-bench-"))
    try:
        if work.exists() and any(work.iterdir()):
            sys.exit(f"bench: {work} is not empty")
        subs = work / "submissions"
        pairs = build_batch(subs, assignments, args.students)
        n = len(pairs)
        print(f"batch: {n} submissions ({args.students} students x {len(assignments)} assignments: "
              f"{', '.join(assignments)}) in {subs}; {os.cpu_count()} cores, load {_load()}", flush=True)

        runs = []  # (label, wall seconds, CPU seconds, scores)
        staged = []  # (label, stages)
        walls = {}
        for workers in args.workers:
            print(f"grading: python -m autograder grade --workers {workers} ... (load {_load()})", flush=True)
            seconds, cpu, scores, stages = grade_ours(subs, work / f"out-workers{workers}", workers)
            runs.append((f"ours, --workers {workers}", seconds, cpu, scores))
            staged.append((f"{workers}w", stages))  # stages.json: per stage, and per assignment
            walls[workers] = seconds
        plain = None
        if not args.no_plain:
            print(f"grading: plain nbgrader (generate_assignment, autograde, generate_feedback) ... (load {_load()})",
                  flush=True)
            autograde, feedback, scores = grade_plain(subs, work / "plain-nbgrader", assignments,
                                                      cell_timeout=Limits().cell_timeout_s)
            plain = autograde
            runs.append(("plain nbgrader autograde", *autograde, scores))
            runs.append(("plain nbgrader autograde + feedback", autograde[0] + feedback[0],
                         autograde[1] + feedback[1], scores))

        print()
        header = ["run", "submissions", "wall s", "subs/min", "s/sub", "overhead s/sub", "CPU s/sub", "CPU overhead"]
        rows = []
        for label, seconds, cpu, _ in runs:
            per, cpu_per = seconds / n, cpu / n
            if plain is None:
                overhead = cpu_overhead = ""
            else:
                base, base_cpu = plain[0] / n, plain[1] / n
                overhead = f"{per - base:+.1f} ({per / base:.2f}x)"
                cpu_overhead = f"{cpu_per - base_cpu:+.1f} ({cpu_per / base_cpu:.2f}x)"
            rows.append([label, str(n), f"{seconds:.1f}", f"{60 * n / seconds:.1f}", f"{per:.2f}", overhead,
                         f"{cpu_per:.2f}", cpu_overhead])
        _table(header, rows)
        print("overhead: against plain `nbgrader autograde`; CPU: user + system time of all the processes a run "
              f"started (wall time depends on other load: now {_load()} on {os.cpu_count()} cores)")
        print()
        print_stages(n, staged)

        print()
        mismatches = []
        for pair in sorted(pairs):
            got = [scores.get(pair) for *_, scores in runs]
            line = f"{pair[0]}/{pair[1]}: " + ", ".join(f"{g:g}" if g is not None else "missing" for g in got)
            if len(set(got)) != 1 or None in got:
                mismatches.append(line)
            print(line)
        if mismatches:
            print("\n" + "!" * 72, file=sys.stderr)
            print(f"SCORE MISMATCH on {len(mismatches)} submission(s) ({', '.join(r[0] for r in runs)}):",
                  file=sys.stderr)
            for line in mismatches:
                print("  " + line, file=sys.stderr)
            print("!" * 72, file=sys.stderr)
            return 1
        print(f"scores agree on all {n} submissions across {len(runs)} runs")
        speed_up = f"{walls[1] / walls[2]:.2f}" if 1 in walls and 2 in walls else "n/a"
        versus = f"{walls[2] / plain[0]:.2f}" if 2 in walls and plain else "n/a"
        print(f"speed-up 2 workers / 1 worker: {speed_up}; wall with 2 workers / plain nbgrader: {versus}")
        return 0
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def _load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


if __name__ == "__main__":
    sys.exit(main())
