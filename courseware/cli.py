"""Command line: ``python -m courseware {release,wheels,messages,catalogs} ...`` (``make release``,
``make translations``, ``make install``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.course import REPO, GradingError, assignments
from autograder import translations
from courseware import forbidden_table, learner_package, messages, reference_modules
from courseware.release import release


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m courseware", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    releasing = sub.add_parser("release", help="regenerate notebooks/, attention_course/reference/ and attention_course/forbidden.py from solutions/")
    releasing.add_argument("assignments", nargs="*", help="assignment names (default: all)")
    wheels = sub.add_parser("wheels", help="write every chapter's course package (a wheel) into DEST")
    wheels.add_argument("dest", type=Path)
    sub.add_parser("messages", help="extract the English of messages.po and autograder.po (the package's and the grader's "
                                    "words, the tests') and merge it into every language's catalogs (Babel)")
    sub.add_parser("catalogs", help="compile every language's messages.po into attention_course/locale/ (the editable "
                                    "install's; the wheels and the grader compile their own)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "release":
            names = args.assignments or assignments()
            unknown = sorted(set(names) - set(assignments()))
            if unknown:
                raise GradingError(f"unknown assignment {', '.join(unknown)}; known: {', '.join(assignments())}")
            for path in [*release(names), *reference_modules.write_reference_modules(), forbidden_table.write_table()]:
                print(f"wrote {path.relative_to(REPO)}")
        elif args.command == "wheels":
            for path in learner_package.build_wheels(args.dest):
                print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)")
        elif args.command == "messages":
            for path, count in messages.update().items():
                print(f"{path.relative_to(REPO)}: {count['entries']} entries, {count['words']} English words, "
                      f"{count['to translate']} to translate (empty or fuzzy)")
        elif args.command == "catalogs":
            for path in translations.compile_package_catalogs(REPO / "attention_course"):
                print(f"compiled {path.relative_to(REPO)}")
    except GradingError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
