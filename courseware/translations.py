"""The exercise notebooks in another language (简体中文), from one source: gettext catalogs made
from ``solutions/``, and the translated source notebooks that ``make release`` turns into
``notebooks/<language>/``.

One catalog per assignment, ``locale/<language>/LC_MESSAGES/exercises/<assignment>.po``, holds
what a learner reads in its notebook (:mod:`courseware.translatable` cuts it into pieces); one
more, ``exercises/common.po``, the words every translated notebook shares (its install cell and
the stub of each exercise). Each entry's location is ``<notebook>#<grade_id>:<line of the cell>``.
The catalogs are made and updated with Babel (``Catalog.update``, as ``msgmerge`` does: an entry
whose English changed becomes fuzzy with its old translation, one that left the English becomes
obsolete), by ``python -m courseware translations update`` (``make translations``);
``python -m courseware translations status`` lists where they stand.

A translated notebook is made only from a complete catalog: :func:`translated_notebook` raises
:class:`IncompleteCatalog` naming the notebook and each entry that is missing, empty or fuzzy,
and :class:`TranslationError` for a translation that cannot go in its place.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import io
import re
from pathlib import Path
from typing import NamedTuple

import nbformat
from babel.messages.catalog import Catalog, Message
from babel.messages.pofile import denormalize, read_po, write_po

import layout
from courseware import learner_package
from layout import regions
from courseware.translatable import (Piece, TranslationError, check_code, code_pieces, markdown_pieces, substitute,
                                     words)

LANGUAGE = "zh_CN"
LOCALE = layout.LOCALE
COMMON = "common"
STUB_LOCATION = "layout/regions.py#CODE_STUB"
INSTALL_LOCATION = "courseware/learner_package.py#install"

__all__ = ["TranslationError", "IncompleteCatalog", "catalog_path", "catalog_names", "updated_catalog", "write_catalog",
           "translated_notebook", "translated_code", "Status", "status"]


class IncompleteCatalog(TranslationError):
    """Entries of a catalog are missing, empty or fuzzy: the translated notebook cannot be made yet."""


def catalog_path(name: str, language: str = LANGUAGE) -> Path:
    """``locale/<language>/LC_MESSAGES/exercises/<name>.po``: ``name`` is an assignment or ``common``."""
    return LOCALE / language / "LC_MESSAGES" / "exercises" / f"{name}.po"


def catalog_names() -> list[str]:
    """Every exercise catalog: one per assignment, then the shared one."""
    return [*layout.assignments(), COMMON]


# ------------------------------------------------------------------- what the English says


def cell_label(cell, index: int) -> str:
    """How a location names a cell: its ``grade_id``, or ``cell<index>`` for a cell without one."""
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or f"cell{index}"


def is_test_cell(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


def cell_pieces(cell) -> list[Piece]:
    """What a learner reads in ``cell``: of a test cell, only its comments and its helpers'
    docstrings (what it checks; the code is the test, and its messages are translated as it
    runs: attention_course.i18n)."""
    if cell.cell_type == "markdown":
        return markdown_pieces(cell.source)
    if cell.cell_type == "code":
        return code_pieces(cell.source, comments_only=is_test_cell(cell))
    return []


def _relative(path: Path) -> str:
    return path.resolve().relative_to(layout.REPO).as_posix()


def _install_source(assignment: str, language: str) -> str:
    return learner_package.install_cell(assignment, wheels_url="", language=language).source


class Found(NamedTuple):
    """A piece of the English, where it is: ``where`` (``<notebook>#<grade_id>``), ``line`` (of the cell),
    and the cell's source (``is_code``: a code cell)."""

    where: str
    line: int
    piece: Piece
    source: str
    is_code: bool


def english_pieces(name: str, language: str = LANGUAGE) -> list[Found]:
    """Every piece of catalog ``name``, in the order a learner meets them."""
    found = []
    if name == COMMON:
        for where, source in ((INSTALL_LOCATION, _install_source(layout.assignments()[0], language)),
                              (STUB_LOCATION, regions.CODE_STUB)):
            found += [Found(where, p.line, p, source, True) for p in code_pieces(source)]
        return found
    for path in layout.source_notebooks(name):
        nb = nbformat.read(path, as_version=4)
        for index, cell in enumerate(nb.cells):
            where = f"{_relative(path)}#{cell_label(cell, index)}"
            found += [Found(where, p.line, p, cell.source, cell.cell_type == "code") for p in cell_pieces(cell)]
    return found


# ------------------------------------------------------------------- catalogs


def _header(name: str) -> str:
    source = "the words every translated notebook shares: its install cell, the stub of each exercise" \
        if name == COMMON else f"the exercise notebook of {name} (solutions/{name}/)"
    return (f"# The exercises' catalog for {source}.\n"
            "# Made and updated by `python -m courseware translations update` (make translations); translate\n"
            "# each msgstr as docs/translating.md says; never edit a msgid; remove the fuzzy flag once checked.\n"
            "#")


def _header_fields(name: str) -> dict:
    return {"project": "attention-course", "version": f"exercises/{name}", "msgid_bugs_address": "",
            "last_translator": "the course's translators (docs/translating.md)",
            "language_team": "zh_CN (docs/translating.md)"}


def template(name: str, language: str = LANGUAGE) -> Catalog:
    """The catalog of what the English says now, without translations (a POT file in memory)."""
    catalog = Catalog(header_comment=_header(name), fuzzy=False, **_header_fields(name))
    for where, line, piece, _, _ in english_pieces(name, language):
        catalog.add(piece.text, locations=[(where, line)], auto_comments=[piece.kind])
    return catalog


def _without_format_flags(catalog: Catalog) -> Catalog:
    # Babel flags a text with "%" or "{...}" as a Python format string, and msgfmt --check then
    # demands the same "directives" in the translation; prose and Markdown hold none.
    for message in [*catalog, *catalog.obsolete.values()]:
        message.flags -= {"python-format", "python-brace-format"}
    return catalog


def _with_previous_ids(catalog: Catalog) -> Catalog:
    # Babel writes the English a fuzzy entry was translated from ("#| msgid ...", as msgmerge does)
    # but reads those lines back as translator's comments: make them the previous msgid again
    # (kept only while the entry is fuzzy), so they neither pile up nor outlive the fuzzy flag.
    for message in [*catalog, *catalog.obsolete.values()]:
        previous = [c for c in message.user_comments if c.startswith("|")]
        if previous:
            message.user_comments = [c for c in message.user_comments if not c.startswith("|")]
            text = " ".join(c[1:].strip() for c in previous)
            if text.startswith("msgid ") and message.fuzzy:
                message.previous_id = [denormalize(text[len("msgid "):])]
    return catalog


# A field of printf-style formatting; "%" then a space and a letter is English prose ("90 % of").
PERCENT_FIELD = re.compile(r"%(?:\(\w+\))?(?! +[A-Za-z])[-#0 +]*\d*(?:\.\d+)?[sdifrxXeEgGc%]")


def unflag_prose_percent(path: Path) -> bool:
    """Take ``python-format`` off the entries of a Sphinx catalog (``book/<page>.po``) whose English
    has no printf field: Babel flags "90 % of the runs" (``% o``), sphinx-intl writes the flag back at
    every update, and ``msgfmt --check`` then refuses a translation that says "90 % 的". Only the
    ``#,`` lines change; True when the file did."""
    text = path.read_text(encoding="utf-8")
    blocks = text.split("\n\n")
    for i, block in enumerate(blocks):
        lines = block.split("\n")
        flags = [k for k, line in enumerate(lines) if line.startswith("#, ") and "python-format" in line]
        ids = [k for k, line in enumerate(lines) if line.startswith("msgid ")]
        if not flags or not ids:
            continue
        end = next((k for k in range(ids[0] + 1, len(lines)) if not lines[k].startswith('"')), len(lines))
        msgid = denormalize("\n".join(lines[ids[0]:end])[len("msgid "):])
        if PERCENT_FIELD.search(msgid):
            continue
        kept = [f for f in lines[flags[0]][3:].split(", ") if f != "python-format"]
        if kept:
            lines[flags[0]] = "#, " + ", ".join(kept)
        else:
            del lines[flags[0]]
        blocks[i] = "\n".join(lines)
    new = "\n\n".join(blocks)
    if new == text:
        return False
    path.write_text(new, encoding="utf-8")
    return True


def read_catalog(path: Path) -> Catalog:
    with path.open("rb") as handle:
        return _with_previous_ids(_without_format_flags(read_po(handle, abort_invalid=True)))


def updated_catalog(name: str, language: str = LANGUAGE) -> Catalog:
    """Catalog ``name`` as ``translations update`` writes it: the one on disk brought up to date
    with the English (``Catalog.update``), or a new one."""
    path = catalog_path(name, language)
    if path.exists():
        catalog = read_catalog(path)
    else:
        now = datetime.datetime.now(datetime.timezone.utc).replace(second=0, microsecond=0)
        catalog = Catalog(locale=language, header_comment=_header(name), creation_date=now, revision_date=now,
                          fuzzy=False, **_header_fields(name))
    previous = {m.id: m.previous_id for m in catalog if m.id and m.fuzzy and m.previous_id}
    catalog.update(template(name, language), update_creation_date=False, update_header_comment=True)
    for message in catalog:  # still fuzzy: still show what the translation was made from
        if message.id and message.fuzzy and not message.previous_id and message.id in previous:
            message.previous_id = previous[message.id]
    return _without_format_flags(catalog)


def catalog_text(catalog: Catalog) -> bytes:
    out = io.BytesIO()
    write_po(out, catalog, width=0, include_previous=True)
    return out.getvalue()


def write_catalog(name: str, catalog: Catalog, language: str = LANGUAGE) -> bool:
    """Write ``catalog`` as catalog ``name``; False when the file already says exactly that."""
    path = catalog_path(name, language)
    text = catalog_text(catalog)
    if path.exists() and path.read_bytes() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text)
    return True


@dataclasses.dataclass
class Status:
    """Where a catalog stands."""

    name: str
    entries: int
    translated: int
    fuzzy: list[Message]
    untranslated: list[Message]
    misfits: list[str]  # translations that cannot go in their place: where, the entry, why
    words: int  # of English prose, over all entries
    obsolete: int
    up_to_date: bool  # the file has an entry for each piece of the English, where it is now, and no other

    @property
    def complete(self) -> bool:
        return self.up_to_date and not self.fuzzy and not self.untranslated and not self.misfits

    def summary(self) -> str:
        """E.g. "exercises/ch02_scoring_functions.po: 12 of 119 entries empty, 3 fuzzy"."""
        parts = [f"{len(self.untranslated)} of {self.entries} entries empty"] if self.untranslated else []
        parts += [f"{len(self.fuzzy)} fuzzy"] if self.fuzzy else []
        parts += [f"{len(self.misfits)} that do not fit"] if self.misfits else []
        parts += ["behind the English (run `make translations`)"] if not self.up_to_date else []
        return f"exercises/{self.name}.po: " + ", ".join(parts or ["complete"])


def status(name: str, language: str = LANGUAGE) -> Status:
    """Where catalog ``name`` stands: what ``translations update`` would make of it now, each of its
    translations checked in its place."""
    catalog = updated_catalog(name, language)
    path = catalog_path(name, language)
    messages = [m for m in catalog if m.id]
    fuzzy = [m for m in messages if m.fuzzy and m.string]
    untranslated = [m for m in messages if not m.string]
    misfits = []
    for where_, line, piece, source, is_code in english_pieces(name, language):
        message = catalog.get(piece.text)
        if message is not None and message.string and not message.fuzzy:
            try:
                _translate_source(source, [piece], _Lookup(name, language, catalog), f"{where_}", is_code)
            except TranslationError as err:
                misfits.append(str(err))
    return Status(name, len(messages), len(messages) - len(fuzzy) - len(untranslated), fuzzy, untranslated, misfits,
                  sum(words(m.id) for m in messages), len(catalog.obsolete),
                  path.exists() and _entries(read_catalog(path)) == _entries(catalog))


def _entries(catalog: Catalog) -> dict[str, set]:
    # what `translations update` decides, whatever the file's layout (an editor may wrap its lines)
    return {m.id: set(m.locations) for m in catalog if m.id}


def where(message: Message) -> str:
    return " ".join(f"{f}:{line}" if line else f for f, line in message.locations)


def _short(text: str, n: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


# ------------------------------------------------------------------- translating


class _Lookup:
    """The translations of one catalog, as read from disk (never updated on the way)."""

    def __init__(self, name: str, language: str, catalog: Catalog | None = None):
        self.name = name
        self.path = catalog_path(name, language)
        if catalog is None:
            catalog = read_catalog(self.path) if self.path.exists() else Catalog(locale=language)
        self.catalog = catalog
        self.problems: list[str] = []

    def get(self, piece: Piece, location: str) -> str | None:
        message = self.catalog.get(piece.text)
        problem = None
        if message is None:
            problem = "is not in the catalog: run `make translations`, then translate it"
        elif not message.string or not message.string.strip():
            problem = "is not translated yet"
        elif message.fuzzy:
            problem = "is marked fuzzy (its English changed): check the translation, then delete the fuzzy flag"
        if problem:
            self.problems.append(f"{location}: entry {_short(piece.text)!r} {problem}")
            return None
        return message.string

    def raise_problems(self, what: str) -> None:
        if self.problems:
            shown = self.problems[:10] + ([f"... and {len(self.problems) - 10} more"] if len(self.problems) > 10 else [])
            raise IncompleteCatalog(f"{what}: {len(self.problems)} entries of {_relative(self.path)} are not ready:\n  "
                                    + "\n  ".join(shown))


def _translate_source(source: str, pieces: list[Piece], lookup: _Lookup, where: str, is_code: bool) -> str:
    translations = [lookup.get(p, f"{where}:{p.line}") for p in pieces]
    if any(t is None for t in translations):
        return source
    for piece, text in zip(pieces, translations):
        problem = piece.check(text)
        if problem:
            raise TranslationError(f"{where}:{piece.line}: the translation of {_short(piece.text)!r} does not fit: {problem}")
    result = substitute(source, pieces, translations)
    if is_code and check_code(source, result):
        # name the entry at fault: the first piece that breaks the cell alone
        for piece, text in zip(pieces, translations):
            problem = check_code(source, substitute(source, [piece], [text]))
            if problem:
                raise TranslationError(f"{where}:{piece.line}: the translation of {_short(piece.text)!r} breaks the "
                                       f"code: {problem}")
        raise TranslationError(f"{where}: the translations break the code together: {check_code(source, result)}")
    return result


def translated_notebook(path: Path, language: str = LANGUAGE, catalog: Catalog | None = None) -> nbformat.NotebookNode:
    """The source notebook at ``path`` (``solutions/<assignment>/<name>.ipynb``) with every piece a
    learner reads translated from its catalog (the one on disk, or ``catalog``): the same cells,
    ids, metadata, tests and code."""
    assignment = path.parent.name
    lookup = _Lookup(assignment, language, catalog)
    nb = nbformat.read(path, as_version=4)
    out = copy.deepcopy(nb)
    for index, cell in enumerate(out.cells):
        pieces = cell_pieces(cell)
        if pieces:
            where = f"{_relative(path)}#{cell_label(cell, index)}"
            cell.source = _translate_source(cell.source, pieces, lookup, where, cell.cell_type == "code")
    lookup.raise_problems(f"notebooks/{language}/{assignment}/{path.name} cannot be made")
    return out


def translated_code(source: str, where: str, language: str = LANGUAGE, catalog: Catalog | None = None) -> str:
    """A code cell of the shared catalog (the install cell, the stub) translated."""
    lookup = _Lookup(COMMON, language, catalog)
    result = _translate_source(source, code_pieces(source), lookup, where, True)
    lookup.raise_problems(f"the {language} notebooks cannot be made")
    return result


def translated_install_cell(assignment: str, wheels_url: str | None, language: str = LANGUAGE,
                            catalog: Catalog | None = None) -> nbformat.NotebookNode:
    """The install cell of a notebook in ``language``: its words translated, then the call of
    ``attention_course.i18n.use_language``."""
    cell = learner_package.install_cell(assignment, wheels_url, language=language)
    cell.source = translated_code(cell.source, INSTALL_LOCATION, language, catalog)
    return cell
