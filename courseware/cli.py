"""Command line: ``python -m courseware {release,wheels} ...`` (``make release``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.course import REPO, GradingError, assignments
from courseware import learner_package, reference_modules
from courseware.release import release


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m courseware", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    releasing = sub.add_parser("release", help="regenerate notebooks/ and attention_course/reference/ from solutions/")
    releasing.add_argument("assignments", nargs="*", help="assignment names (default: all)")
    wheels = sub.add_parser("wheels", help="write every chapter's course package (a wheel) into DEST")
    wheels.add_argument("dest", type=Path)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "release":
            names = args.assignments or assignments()
            unknown = sorted(set(names) - set(assignments()))
            if unknown:
                raise GradingError(f"unknown assignment {', '.join(unknown)}; known: {', '.join(assignments())}")
            for path in [*release(names), *reference_modules.write_reference_modules()]:
                print(f"wrote {path.relative_to(REPO)}")
        elif args.command == "wheels":
            for path in learner_package.build_wheels(args.dest):
                print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)")
    except GradingError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
