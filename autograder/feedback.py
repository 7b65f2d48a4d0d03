"""What a learner's feedback page may show, and in which language.

nbgrader's feedback page shows every test cell as it ran at grading, hidden tests and
their tracebacks included. Ours shows, for a test cell, only its visible part and, when it
failed, the error's type and message: the checks word their messages so that this says what
is wrong (which output, which input, expected against got) without the hidden code.

A submission whose notebook is in another of the course's languages gets its page in that
language: the tests' messages were written in it by the judge, the course's notes here
(:class:`HideHiddenTests`), and nbgrader's own words (the score, the headings) by
:func:`translate_page`, from ``autograder.po``.

Every page, English included, is made readable to everyone (WCAG 2.1 AA, checked by axe-core in
tests/test_grading.py): its ``lang`` says the student's language, so that a screen reader speaks
it with the right voice; the code's colours (nbgrader's Pygments theme: 3:1 on its grey) become
an accessible theme's (accessible-pygments); links are underlined and dark enough; and a code or
output box that scrolls sideways can be reached with the keyboard (:func:`accessible_page`).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor

from attention_course import i18n
from autograder import catalogs
from autograder.catalogs import N_
from layout import NOTEBOOKS, regions

HIDDEN_NOTE = "# " + N_("(hidden tests ran here at grading; their code is not shown)")
# nbgrader's comment on a solution cell left as it was released
NO_RESPONSE = N_("No response.")


def visible_part(source: str, note: str = HIDDEN_NOTE) -> str:
    """``source`` with every hidden-test region replaced by one comment line, ``note``."""
    return regions.visible(source, regions.HIDDEN_TESTS, note)


class HideHiddenTests(NbGraderPreprocessor):
    """Feedback preprocessor: visible tests only, errors without tracebacks in test cells; the
    course's notes in the notebook's language."""

    def preprocess(self, nb, resources):
        language = i18n.notebook_language(nb.get("metadata"))
        words = catalogs.words(language)
        self._note = "# " + words(HIDDEN_NOTE[2:])
        self._no_response = words(NO_RESPONSE)
        about = resources.get("nbgrader", {})
        if language != i18n.ENGLISH and about.get("assignment") and about.get("notebook"):
            released = NOTEBOOKS / language / about["assignment"] / f"{about['notebook']}.ipynb"
            with_released_words(nb, released)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            cell.source = visible_part(cell.source, getattr(self, "_note", HIDDEN_NOTE))
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output['ename']}: {output['evalue']}"]
        if meta.get("comment") == NO_RESPONSE:  # nbgrader's words, put there by GetGrades
            meta["comment"] = getattr(self, "_no_response", NO_RESPONSE)
        return cell, resources


def with_released_words(nb, released: Path) -> None:
    """Put in ``nb`` (a graded notebook: the course's source cells) the text of the course's cells of
    ``released``, the learner notebook in the submission's language: its markdown, and its course
    code cells (the same code, comments and docstrings translated), matched by grade_id (a markdown
    cell without one by cell id): the page shows what the student read. Solution and test cells stay
    as graded; nothing changes where there is no such notebook or cell. Only the page: the graded
    notebook and the gradebook keep the course's cells."""
    if not released.is_file():
        return
    import nbformat

    def key(cell) -> str | None:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution") or meta.get("grade") and cell.cell_type == "code":
            return None  # the student's answer and the tests, as they were graded
        return meta.get("grade_id") or (cell.get("id") if cell.cell_type == "markdown" else None)

    words = {(c.cell_type, key(c)): c.source for c in nbformat.read(released, as_version=4).cells if key(c)}
    for cell in nb.cells:
        if (cell.cell_type, key(cell)) in words:
            cell.source = words[cell.cell_type, key(cell)]


# nbgrader's words on its feedback page (its template, nbgrader/server_extensions/formgrader/
# templates/feedback/index.html.j2), each found by the markup around it
_LABELS = (N_("Test cell"), N_("Coding free-response"), N_("Written response"), N_("Task"), N_("Comment"))
_HEADINGS = (N_("Student's answer"), N_("Student's task"))
_SCORE = N_("(Score: {score})")
_CELL_SCORE = N_("Score: {score}")
_TOP = N_("(Top)")
_GRADE_CELL = N_("Grade cell:")
_TASK = N_("Task:")
_COMMENTS = N_("Comments:")
_LATE = N_("Late submission penalty")
_NUMBER = r"-?[0-9.]+(?: / [0-9.]+)?"


#: accessible-pygments' light theme of high contrast: every colour 7:1 or more on its background
_CODE_STYLE = "a11y-high-contrast-light"
#: links: underlined (not told from the text by colour alone) and 4.5:1 on nbgrader's greys; the
#: cell headings' links white on their blue (nbgrader draws them #bbb: 2:1); a visible focus
_PAGE_STYLE = """
a { color: #1d4f7c; text-decoration: underline; }
div.nbgrader_cell .panel-heading a { color: #ffffff; }
a:focus-visible, pre:focus-visible { outline: 3px solid #1d4f7c; outline-offset: 2px; }
div.nbgrader_cell .panel-heading a:focus-visible { outline-color: #ffffff; }
"""
#: a box that scrolls (a long line of code or output) takes the keyboard's focus, so that the
#: arrow keys scroll it; one that does not scroll stays out of the tab order
_SCROLLABLE = """document.addEventListener("DOMContentLoaded", () => {
  for (const box of document.querySelectorAll("pre")) {
    if (box.scrollWidth > box.clientWidth || box.scrollHeight > box.clientHeight) box.tabIndex = 0;
  }
});"""


def accessible_page(page: str, language: str) -> str:
    """An nbgrader feedback page with ``<html lang>`` set to ``language`` and the course's
    style and script for its readers (the module's docstring says what they do)."""
    from pygments.formatters import HtmlFormatter

    code = HtmlFormatter(style=_CODE_STYLE).get_style_defs(".highlight")
    page = re.sub(r"<html>", f'<html lang="{i18n.supported(language).replace("_", "-")}">', page, count=1)
    added = f'<style type="text/css">\n{code}\n{_PAGE_STYLE}</style>\n<script>\n{_SCROLLABLE}\n</script>\n'
    return page.replace("</head>", added + "</head>", 1)


def translate_page(page: str, language: str) -> str:
    """An nbgrader feedback page (HTML) with nbgrader's words in ``language``, made accessible
    (:func:`accessible_page`: its ``lang`` set); the notebook's content is left as it is (the
    judge and :class:`HideHiddenTests` wrote it in that language already). English: nbgrader's
    words unchanged."""
    page = accessible_page(page, language)
    if i18n.supported(language) == i18n.ENGLISH:
        return page
    words = catalogs.words(language)

    def label(match: re.Match) -> str:
        return match[1] + words(match[2]) + match[3]

    page = re.sub(rf"\(Score: ({_NUMBER})\)", lambda m: words(_SCORE).format(score=m[1]), page)
    page = re.sub(rf"Score: ({_NUMBER}) <a", lambda m: words(_CELL_SCORE).format(score=m[1]) + " <a", page)
    page = page.replace('<a href="#top">(Top)</a>', f'<a href="#top">{words(_TOP)}</a>')
    page = re.sub(r'(<a href="#[^"]*">)(' + "|".join(map(re.escape, _LABELS)) + ")(</a>)", label, page)
    page = re.sub(r'(<span class="nbgrader-label">)(' + "|".join(map(re.escape, _HEADINGS)) + ")(</span>)", label, page)
    page = page.replace('<span class="nbgrader-label">Grade cell: <code>',
                        f'<span class="nbgrader-label">{words(_GRADE_CELL)} <code>')
    page = page.replace('<span class="nbgrader-label">Task: <code>', f'<span class="nbgrader-label">{words(_TASK)} <code>')
    page = page.replace("<b>Comments:</b>", f"<b>{words(_COMMENTS)}</b>")
    return page.replace('<li class="late-penalty">Late submission penalty', f'<li class="late-penalty">{words(_LATE)}')


#: what must not be left on a translated page (tests/test_i18n.py reads it)
NBGRADER_WORDS = ("Score:", "(Top)", ">Test cell<", "Student's answer", "Grade cell:", "Comments:", "Late submission")


def _mathjax_source() -> Path:
    import mathjax  # the django-static-mathjax package: MathJax 3 as static files

    return Path(mathjax.__file__).parent / "static" / "mathjax" / "es5" / "tex-svg-full.js"


_CDN_MATHJAX = re.compile(r'<script src="(https://[^"]*mathjax[^"]*)">\s*</script>', re.IGNORECASE)


def localise_mathjax(feedback_dir: Path) -> None:
    """Make every feedback page under ``feedback_dir`` load MathJax from
    ``feedback_dir/_static`` instead of a CDN, so that no page asks the network for anything.

    A page that leaves the folder on its own (nbgrader's ``release_feedback`` sends the student
    the HTML file alone) finds no copy beside it; only then does it load the CDN's MathJax
    that nbgrader's page named, so that its formulas are still typeset."""
    static = feedback_dir / "_static"
    static.mkdir(parents=True, exist_ok=True)
    shutil.copy2(_mathjax_source(), static / "tex-svg-full.js")
    config = "<script>window.MathJax = {tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']]}};</script>\n"
    for page in feedback_dir.rglob("*.html"):
        relative = os.path.relpath(static / "tex-svg-full.js", page.parent)

        def local(cdn: re.Match) -> str:
            fallback = f"delete window.MathJax;var s=document.createElement('script');s.src='{cdn[1]}';document.head.appendChild(s)"
            return f'{config}<script src="{relative}" onerror="{fallback}"></script>'

        html = page.read_text()
        page.write_text(_CDN_MATHJAX.sub(local, html))
