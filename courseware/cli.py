"""Command line: ``python -m courseware {release,wheels,book-zh,pot} ...`` (``make release``,
``make book``, ``make translations``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.course import REPO, GradingError, assignments
from courseware import book, forbidden_table, learner_package, reference_modules
from courseware.release import release


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m courseware", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    releasing = sub.add_parser("release", help="regenerate notebooks/, attention_course/reference/ and attention_course/forbidden.py from solutions/")
    releasing.add_argument("assignments", nargs="*", help="assignment names (default: all)")
    wheels = sub.add_parser("wheels", help="write every chapter's course package (a wheel) into DEST")
    wheels.add_argument("dest", type=Path)
    edition = sub.add_parser("book-zh", help="build the Chinese edition of the book into _build/html/zh/ "
                             "(after the English build, whose executed pages it reuses)")
    edition.add_argument("--path-output", type=Path, default=None,
                         help="the folder holding _build/ (as jupyter-book build --path-output)")
    edition.add_argument("-W", dest="warningiserror", action="store_true", help="warnings are errors")
    edition.add_argument("--keep-going", action="store_true", help="with -W, report every warning before failing")
    edition.add_argument("--config", type=Path, default=None, help="another _config.yml (as jupyter-book build --config)")
    edition.add_argument("--toc", type=Path, default=None, help="another _toc.yml (as jupyter-book build --toc)")
    pot = sub.add_parser("pot", help="write the templates of the book's catalogs (book/<page>.pot, book_ui.pot) into DEST")
    pot.add_argument("dest", type=Path, nargs="?", default=REPO / "_build" / "gettext")
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
        elif args.command == "book-zh":
            return book.build_edition("zh_CN", path_output=args.path_output, config=args.config, toc=args.toc,
                                      warningiserror=args.warningiserror, keep_going=args.keep_going)
        elif args.command == "pot":
            for path in book.write_templates(args.dest):
                print(f"wrote {path}")
    except GradingError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
