"""Command line: ``python -m courseware {release,wheels,translations,messages,catalogs,book-zh,pot} ...``
(``make release``, ``make book``, ``make translations``, ``make install``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder import catalogs as compiled
from autograder.course import GradingError
from courseware import book, forbidden_table, learner_package, messages, reference_modules, translations
from courseware.release import release, release_translated
from layout import REPO, assignments


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m courseware", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    releasing = sub.add_parser("release", help="regenerate notebooks/ (and notebooks/zh_CN/ where a catalog is complete), "
                                               "attention_course/reference/ and attention_course/forbidden.py from solutions/")
    releasing.add_argument("assignments", nargs="*", help="assignment names (default: all)")
    wheels = sub.add_parser("wheels", help="write every chapter's course package (a wheel) into DEST")
    wheels.add_argument("dest", type=Path)
    catalogs = sub.add_parser("translations", help="the exercises' catalogs (locale/zh_CN/LC_MESSAGES/exercises/)")
    catalogs.add_argument("action", choices=["update", "status"],
                          help="update: bring every catalog up to date with solutions/ (new English: empty entries; "
                               "changed English: fuzzy; removed: obsolete) and list what to translate; "
                               "status: list where each catalog stands, changing nothing")
    catalogs.add_argument("names", nargs="*", help="catalogs: assignment names or 'common' (default: all)")
    catalogs.add_argument("--entries", action="store_true", help="also list each entry to translate, with its location")
    catalogs.add_argument("--check", action="store_true", help="status: exit 1 unless every catalog is up to date and complete")
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
    sub.add_parser("messages", help="extract the English of messages.po and autograder.po (the package's and the grader's "
                                    "words, the tests') and merge it into every language's catalogs (Babel)")
    sub.add_parser("catalogs", help="compile every language's messages.po into attention_course/locale/ (the editable "
                                    "install's; the wheels and the grader compile their own)")
    return parser


def _known(names: list[str], known: list[str]) -> list[str]:
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise GradingError(f"unknown assignment {', '.join(unknown)}; known: {', '.join(known)}")
    return names or known


def _catalogs(args) -> int:
    names = _known(args.names, translations.catalog_names())
    if args.action == "update":
        for name in names:
            catalog = translations.updated_catalog(name)
            changed = translations.write_catalog(name, catalog)
            state = translations.status(name)
            verb = "wrote" if changed else "unchanged"
            print(f"{verb} {translations.catalog_path(name).relative_to(REPO)}: {state.entries} entries "
                  f"({state.words} English words), {len(state.untranslated)} to translate, {len(state.fuzzy)} fuzzy "
                  f"to check, {len(state.misfits)} that do not fit, {state.obsolete} obsolete")
            if args.entries:
                _list_entries(state)
        for path in sorted((translations.LOCALE / translations.LANGUAGE / "LC_MESSAGES" / "book").glob("*.po")):
            if translations.unflag_prose_percent(path):
                print(f"unflagged {path.relative_to(REPO)}: python-format off entries whose '%' is prose")
        return 0
    rows = [translations.status(name) for name in names]
    print(f"{'catalog (locale/' + translations.LANGUAGE + '/LC_MESSAGES/)':<38} {'entries':>7} {'words':>6} {'done':>5} {'fuzzy':>5} {'empty':>5} {'misfit':>6}  state")
    for row in rows:
        state = "complete" if row.complete else "BEHIND THE ENGLISH: run make translations" if not row.up_to_date \
            else "in progress"
        print(f"{'exercises/' + row.name + '.po':<38} {row.entries:>7} {row.words:>6} "
              f"{row.translated:>5} {len(row.fuzzy):>5} {len(row.untranslated):>5} {len(row.misfits):>6}  {state}")
    print(f"{'all':<38} {sum(r.entries for r in rows):>7} {sum(r.words for r in rows):>6} "
          f"{sum(r.translated for r in rows):>5} {sum(len(r.fuzzy) for r in rows):>5} "
          f"{sum(len(r.untranslated) for r in rows):>5} {sum(len(r.misfits) for r in rows):>6}")
    if args.entries:
        for row in rows:
            _list_entries(row)
    return 1 if args.check and not all(r.complete for r in rows) else 0


def _list_entries(state: translations.Status) -> None:
    for label, messages in (("fuzzy", state.fuzzy), ("empty", state.untranslated)):
        for message in messages:
            text = " ".join(message.id.split())
            print(f"  {label}: {translations.where(message)}: {text[:90] + ('…' if len(text) > 90 else '')}")
    for misfit in state.misfits:
        print(f"  does not fit: {misfit}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "release":
            names = _known(args.assignments, assignments())
            for path in [*release(names), *reference_modules.write_reference_modules(), forbidden_table.write_table()]:
                print(f"wrote {path.relative_to(REPO)}")
            written, skipped = release_translated(names)
            for path in written:
                print(f"wrote {path.relative_to(REPO)}")
            for assignment, why in skipped.items():
                print(f"not written: notebooks/{translations.LANGUAGE}/{assignment}/ ({why})", file=sys.stderr)
            if skipped:
                print("(`python -m courseware translations status --entries` lists the entries to translate)",
                      file=sys.stderr)
        elif args.command == "wheels":
            for path in learner_package.build_wheels(args.dest):
                print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)")
        elif args.command == "translations":
            return _catalogs(args)
        elif args.command == "book-zh":
            return book.build_edition("zh_CN", path_output=args.path_output, config=args.config, toc=args.toc,
                                      warningiserror=args.warningiserror, keep_going=args.keep_going)
        elif args.command == "pot":
            for path in book.write_templates(args.dest):
                print(f"wrote {path}")
        elif args.command == "messages":
            for path, count in messages.update().items():
                print(f"{path.relative_to(REPO)}: {count['entries']} entries, {count['words']} English words, "
                      f"{count['to translate']} to translate (empty or fuzzy)")
        elif args.command == "catalogs":
            for path in compiled.compile_package_catalogs(REPO / "attention_course"):
                print(f"compiled {path.relative_to(REPO)}")
    except (GradingError, translations.TranslationError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
