"""The catalogs of what the course says to a learner, made and updated with Babel.

``python -m courseware messages`` (``make translations``) extracts the English and merges it into
``locale/<language>/LC_MESSAGES/messages.po`` and ``autograder.po`` (Babel's own ``update``: a new
English sentence arrives empty, a changed one arrives fuzzy with the old translation beside it, a
removed one is kept as obsolete), then lists what is left to translate. What goes where:

* ``messages.po`` (compiled into the course package: :mod:`autograder.catalogs`): the
  package's own words (``_()``/``gettext()`` in ``attention_course/``, ``N_()`` in
  ``autograder/chapter_view.py``) and the words of the notebooks' **visible** tests;
* ``autograder.po`` (the grader's only): ``N_()`` in ``autograder/`` and the words of the
  **hidden** tests, which no learner's package may carry.

A test's words are the strings :func:`attention_course.i18n.message_texts` finds in the course
and test cells of ``solutions/`` (a check's ``name=``, an ``assert``'s message...: what
:func:`attention_course.i18n.translate_source` translates), and the mistakes the tests name to
``checks.check_close(likely=...)`` (the keys, strings or f-strings, of a dict of such clauses:
:func:`attention_course.i18n.mistake_texts`). A string that is code
alone (``"softmax(x + 1000)"``) stays as it is and is not listed.
"""

from __future__ import annotations

import ast
import io
import json
import re
from pathlib import Path
from typing import Iterator

from babel.messages.catalog import Catalog
from babel.messages.extract import extract
from babel.messages.pofile import read_po, write_po

from attention_course import i18n
from autograder import catalogs
from layout import REPO, SOLUTIONS, regions

MISTAKE_NOTE = ("a mistake a check names: it completes the sentence "
                "“This is exactly what you get if …” (in Chinese: “这恰好是以下错误的结果：……。”, a clause)")
_PROJECT = "attention-course"
HEADERS = {"messages": "what the course package and the notebooks' visible tests say to a learner",
           "autograder": "the feedback page's words, the grader's notes and the hidden tests' words"}


def _visible(source: str) -> str:
    """A test cell's code as the learner's notebook holds it: without its hidden regions."""
    return regions.visible(source, regions.HIDDEN_TESTS)


def worth_translating(text: str) -> bool:
    """Whether ``text`` holds words: not code alone (an expression, with an f-string's
    placeholders standing for values), and at least one word of two letters, or an English
    possessive (``"'s O"``: the test's own name + "'s O"). Code followed by a parenthesis of
    prose (``"GroupedQueryAttention(16, 4, 1).W_kv.weight (multi-query)"``) parses as a call, but
    no code is written with a space before its call's parenthesis: it is words."""
    if re.match(r"'s\b", text.strip()):
        return True
    if not re.search(r"[A-Za-z]{2}", text):
        return False
    if re.fullmatch(r"[a-z]+", text) or (text != text.strip() and re.fullmatch(r"[A-Za-z_][\w.]*", text.strip())):
        return True  # one plain word ("output"), or a name that starts a message ("weights " + ...): the translator decides
    probe = re.sub(r"\{[^{}]*\}", "x", text).strip()
    if re.search(r"[\w)\]] \([^()]*[A-Za-z]{2}", probe) and not re.search(r"\b(?:and|or|not|in|if|else|for|is|lambda|return) \(", probe):
        return True
    try:
        ast.parse(probe, mode="eval")
    except SyntaxError:
        return True
    return False


def _tree(source: str) -> ast.AST | None:
    lines = ["pass" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def cell_words(source: str, prints: bool = True, helpers: i18n.Helpers | None = None) -> list[tuple[str, bool]]:
    """``(text, is_a_mistake)`` for every test word of a cell's code (see the module's doc); the
    text ``print`` shows too, with ``prints``; ``helpers``: the test's own helpers of the notebook
    (:func:`notebook_helpers`), whose message parameters are words wherever they are called."""
    tree = _tree(source)
    if tree is None:
        return []
    found = [(i18n.msgid(t), False) for t in i18n.message_texts(tree, prints, helpers)] + [
        (i18n.msgid(k), True) for k in i18n.mistake_texts(tree)] + [
        (i18n.msgid(t), False) for t in i18n.figure_texts(tree)]
    return [(text, mistake) for text, mistake in found if worth_translating(text)]


def _course_and_test_cells(path: Path) -> Iterator[tuple[int, str, str, bool]]:
    """``(index, grade_id, source, is_a_test)`` of every code cell of a source notebook but its solutions."""
    for index, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] == "code" and not meta.get("solution"):
            yield index, meta.get("grade_id") or f"cell-{index}", "".join(cell["source"]), bool(meta.get("grade"))


def notebook_helpers(sources: list[str]) -> i18n.Helpers:
    """The test's own helpers that the code cells ``sources`` of a notebook define, in order, with
    the parameters they only put into a message (:func:`attention_course.i18n.message_parameters`):
    as a kernel (and the grader) running the cells in order knows them."""
    helpers: i18n.Helpers = {}
    for source in sources:
        tree = _tree(source)
        if tree is not None:
            helpers.update(i18n.message_parameters(tree, helpers))
    return helpers


def notebook_words(part: str) -> Iterator[tuple[Path, int, str, str, bool]]:
    """``(notebook, cell index, grade_id, text, is_a_mistake)`` of the tests' words of every source
    notebook: those a learner's notebook holds (``part="visible"``), or those only the grader has
    (``"hidden"``: found in the whole cells and nowhere in a visible part)."""
    # what a course cell prints is the notebook's catalog's (exercises/<assignment>.po: the Chinese
    # notebook's course cells print Chinese); the test cells are the same code in both notebooks
    cells = [(path, *cell) for path in sorted(SOLUTIONS.glob("*/*.ipynb")) for cell in _course_and_test_cells(path)]
    helpers = {path: notebook_helpers([source for p, _, _, source, _ in cells if p == path]) for path, *_ in cells}
    visible = {(path, index): cell_words(_visible(source), prints=test, helpers=helpers[path])
               for path, index, _, source, test in cells}
    shown = {text for words in visible.values() for text, _ in words}
    for path, index, grade_id, source, test in cells:
        words = visible[path, index] if part == "visible" else [
            (text, mistake) for text, mistake in cell_words(source, prints=test, helpers=helpers[path]) if text not in shown]
        for text, mistake in words:
            yield path, index, grade_id, text, mistake


#: how a notebook's Markdown names a function or class of the course package for the learner to read:
#: ``attention_course.seq2seq.train_seq2seq``, or "`MaskedGPT` (in `attention_course.masked_gpt`"
_NAMED = re.compile(r"attention_course\.(?!reference\b)(\w+)\.(\w+)|`(\w+)` \(in `attention_course\.(?!reference\b)(\w+)`")
DOC_NOTE = ("a paragraph of the docstring of {name}, which a notebook invites the learner to read (help() shows "
            "it in the notebook's language): keep its ``code`` and its lines' items")


def named_docs() -> Iterator[tuple[str, str, Path, int]]:
    """``(dotted name, paragraph, notebook, cell index)`` of the docstrings of the package's
    functions and classes that the notebooks' Markdown names (:data:`_NAMED`): a learner is
    invited to read them, so ``help()`` shows them in the notebook's language
    (:func:`attention_course.i18n.translate_docs`)."""
    import importlib

    for path in sorted(SOLUTIONS.glob("*/*.ipynb")):
        for index, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            if cell["cell_type"] != "markdown":
                continue
            for match in _NAMED.finditer("".join(cell["source"])):
                module, name = (match.group(1), match.group(2)) if match.group(1) else (match.group(4), match.group(3))
                try:
                    obj = getattr(importlib.import_module(f"attention_course.{module}"), name)
                except (ImportError, AttributeError):
                    continue
                if callable(obj) and getattr(obj, "__module__", None) == f"attention_course.{module}" and obj.__doc__:
                    for paragraph in i18n.doc_paragraphs(obj.__doc__):
                        yield f"attention_course.{module}.{name}", paragraph, path, index


def _python_words(paths: list[Path], keywords: dict) -> Iterator[tuple[Path, int, str, list[str]]]:
    for path in paths:
        with open(path, "rb") as f:
            for lineno, message, comments, _context in extract("python", f, keywords=keywords, comment_tags=("NOTE",)):
                yield path, lineno, message, comments


def template(domain: str) -> Catalog:
    """The English of ``domain`` (``messages`` or ``autograder``) as Babel's template catalog."""
    catalog = Catalog(project=_PROJECT, charset="utf-8", fuzzy=False)
    if domain == catalogs.PACKAGE_DOMAIN:
        package = [p for p in sorted((REPO / "attention_course").rglob("*.py")) if "reference" not in p.parts]
        python = [*_python_words(package, {"_": None, "gettext": None, "figure_text": None}),
                  *_python_words([REPO / "autograder" / "chapter_view.py"], {"N_": None})]
        part = "visible"
    else:
        grader = [p for p in sorted((REPO / "autograder").glob("*.py")) if p.name != "chapter_view.py"]
        python = list(_python_words(grader, {"N_": None}))
        part = "hidden"
    for path, lineno, message, comments in python:
        catalog.add(message, locations=[(path.relative_to(REPO).as_posix(), lineno)], auto_comments=comments)
    if domain == catalogs.PACKAGE_DOMAIN:
        for name, paragraph, path, index in named_docs():
            existing = catalog.get(paragraph)
            catalog.add(paragraph, locations=[(path.relative_to(REPO).as_posix(), index + 1)],
                        auto_comments=list(dict.fromkeys((existing.auto_comments if existing else [])
                                                         + [DOC_NOTE.format(name=name)])))
    for path, index, grade_id, text, mistake in notebook_words(part):
        note = [f"{grade_id}" + (f": {MISTAKE_NOTE}" if mistake else "")]
        existing = catalog.get(text)
        catalog.add(text, locations=[(path.relative_to(REPO).as_posix(), index + 1)],
                    auto_comments=list(dict.fromkeys((existing.auto_comments if existing else []) + note)))
    return catalog


def _write(catalog: Catalog, path: Path) -> None:
    out = io.BytesIO()
    # no line numbers: a catalog changes when the English does, not when code moves
    write_po(out, catalog, width=100, sort_output=False, include_previous=True, include_lineno=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(out.getvalue())


def update(languages: list[str] | None = None) -> dict[Path, dict[str, int]]:
    """Merge the current English into every language's ``messages.po`` and ``autograder.po``
    (creating a missing one); return, per catalog, its count of entries, of words, and of
    entries to translate (empty or fuzzy)."""
    report = {}
    for domain in (catalogs.PACKAGE_DOMAIN, catalogs.GRADER_DOMAIN):
        english = template(domain)
        for language in languages or catalogs.languages():
            path = catalogs.source(language, domain)
            if path.is_file():
                with open(path, "rb") as f:
                    catalog = read_po(f, locale=language, domain=domain)
                catalog.update(english, update_header_comment=False, update_creation_date=False)
            else:
                catalog = Catalog(locale=language, domain=domain, project=_PROJECT, charset="utf-8", fuzzy=False,
                                  header_comment=f"# {domain}.po: {HEADERS[domain]}\n# Made and updated by "
                                                 "`make translations` (courseware/messages.py); see docs/translating.md.")
                catalog.update(english)
            _write(catalog, path)
            report[path] = counts(catalog)
    return report


def counts(catalog: Catalog) -> dict[str, int]:
    entries = [m for m in catalog if m.id]
    return {"entries": len(entries), "words": sum(len(str(m.id).split()) for m in entries),
            "to translate": sum(1 for m in entries if not m.string or m.fuzzy)}
