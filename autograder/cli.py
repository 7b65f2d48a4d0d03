"""Command line: ``python -m autograder {release,grade} ...``."""

from __future__ import annotations

import argparse
import sys

from autograder import course


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    release = sub.add_parser("release", help="regenerate notebooks/ from solutions/")
    release.add_argument("assignments", nargs="*", help="assignment names (default: all)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "release":
            names = args.assignments or course.assignments()
            unknown = sorted(set(names) - set(course.assignments()))
            if unknown:
                raise course.GradingError(
                    f"unknown assignment {', '.join(unknown)}; known: {', '.join(course.assignments())}"
                )
            for path in course.release(names):
                print(f"wrote {path.relative_to(course.REPO)}")
    except course.GradingError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
