"""Command line: ``python -m autograder grade ...`` (``make grade``) and ``python -m autograder
similarity ...`` (the similarity step alone)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from attention_course import i18n
from autograder import course, grade, similarity, summary
from autograder.limits import Limits


def _similarity_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--archive", type=Path, default=None, metavar="DIR",
                        help="earlier years' submissions (DIR/<student>/<assignment>/<notebook>.ipynb), compared too")
    parser.add_argument("--language", default=i18n.ENGLISH, choices=sorted(i18n.LANGUAGES),
                        help="language of the similarity pages and of their section of summary.html")


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
    _similarity_options(grading)

    alike = sub.add_parser("similarity", help="list the submissions whose own code is unusually alike (graded or not)")
    alike.add_argument("submissions", type=Path)
    alike.add_argument("--out", type=Path, required=True,
                       help="folder for similarity.json, similarity.csv, similarity/ and summary.html's section")
    _similarity_options(alike)
    return parser


def _similarity(args) -> None:
    """The step alone: its files, and summary.html written again with its section (and the
    grades of OUT/report.json, when the batch was graded there)."""
    report = similarity.run(args.submissions, args.out, args.archive, args.language)
    graded = args.out / "report.json"
    fields = {f.name for f in dataclasses.fields(grade.Result)}
    results = [grade.Result(**{k: v for k, v in entry.items() if k in fields})
               for entry in json.loads(graded.read_text())] if graded.is_file() else []
    summary.write(results, args.out / "summary.html", similarity.section(report))
    listed = sum(e["listed"] for found in report["assignments"].values() for e in found["pairs"])
    print(f"compared {sum(f['compared'] for f in report['assignments'].values())} submissions; "
          f"{listed} pairs to look at; skipped {len(report['skipped'])}; wrote {args.out / 'similarity.csv'}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "similarity":
            _similarity(args)
        elif args.command == "grade":
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
                                  scheduler=args.scheduler, stage_times=args.stage_times, archive=args.archive,
                                  language=args.language)
            total = sum(r.score for r in results)
            print(f"graded {len(results)} submissions ({total:g} points); wrote {args.out / 'grades.csv'}")
    except course.GradingError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
