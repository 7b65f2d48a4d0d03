"""Command line: ``python -m autograder grade ...`` (``make grade``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder import course, grade
from autograder.limits import Limits


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    defaults = Limits()
    grading = sub.add_parser("grade", help="grade SUBMISSIONS/<student>/<assignment>/<notebook>.ipynb")
    grading.add_argument("submissions", type=Path)
    grading.add_argument("--out", type=Path, required=True, help="folder for grades.csv, report.json, feedback/")
    grading.add_argument("--db", default=None, help="SQLAlchemy URL of the gradebook (default: SQLite in OUT/course)")
    grading.add_argument("--cell-timeout", type=int, default=defaults.cell_timeout_s, help="seconds per cell")
    grading.add_argument("--notebook-timeout", type=int, default=defaults.notebook_timeout_s, help="seconds per notebook")
    grading.add_argument("--memory-mb", type=int, default=defaults.memory_mb, help="memory per submission, MiB")
    grading.add_argument("--processes", type=int, default=defaults.processes, help="processes per submission")
    grading.add_argument("--disk-mb", type=int, default=defaults.disk_mb, help="private disk per submission, MiB")
    grading.add_argument("--workers", type=int, default=None,
                         help="submissions judged at once on this machine (default: cores)")
    grading.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                         help="judge on the workers of this Dask distributed cluster instead of on this machine")
    grading.add_argument("--stage-times", action="store_true",
                         help="time every stage of the batch into OUT/stages.json (make bench-grade)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "grade":
            limits = Limits(
                cell_timeout_s=args.cell_timeout, notebook_timeout_s=args.notebook_timeout,
                memory_mb=args.memory_mb, processes=args.processes, disk_mb=args.disk_mb,
            )
            if args.workers is not None and args.workers < 1:
                raise course.GradingError(f"--workers must be at least 1, not {args.workers}")
            if args.scheduler and args.workers is not None:
                raise course.GradingError("--workers is for judging on this machine; with --scheduler, "
                                          "the cluster's workers and their threads decide")
            results = grade.grade(args.submissions, args.out, db_url=args.db, limits=limits, workers=args.workers,
                                  scheduler=args.scheduler, stage_times=args.stage_times)
            total = sum(r.score for r in results)
            print(f"graded {len(results)} submissions ({total:g} points); wrote {args.out / 'grades.csv'}")
    except course.GradingError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
