"""Small additions to the theme, served from ``book/_static``.

* ``exercise-download.js``: the learner notebooks (``notebooks/<assignment>/<name>.ipynb``)
  are pages of the book, and the theme's download menu links to the page's source, which
  Sphinx copies into ``_build/html/_sources`` (``html_copy_source: true`` in
  ``_config.yml``): for an exercise page, the notebook itself. The theme opens that link
  in a new tab, where a browser shows the notebook's JSON; the script marks it as a
  download instead.
* ``course.css``: display equations wider than the column scroll instead of being cut off; a
  visible focus ring on the controls the theme leaves without one.
* **A name for each toggle of the sidebar.** The theme opens and closes a chapter's sections
  with a ``<summary>`` that holds only an icon, so a screen reader announces a nameless
  button (axe's ``summary-name``). Its sidebar HTML (``generate_toctree_html``) is given back
  with an ``aria-label`` on each toggle: "Sections of <the chapter's title>", in the edition's
  language (``book_ui.po``).
* **The theme's own labels in the edition's language.** A few labels of the themes are English
  whatever the language: some are written into their templates ("Toggle primary sidebar",
  the navigation landmarks "Main" and "Page"), others are missing from Sphinx's and the theme's
  zh_CN catalogs ("Color mode", "Link to this heading"). Each page, once rendered, gets them
  from ``book_ui.po`` (:func:`theme_labels`) in its attributes (``title``, ``aria-label``,
  ``data-bs-title``, ``placeholder``), without a copy of the theme's templates.
* **Each button's name holds the words it shows** (WCAG 2.5.3, *Label in Name*; axe's
  ``label-content-name-mismatch``): the search button, which shows "Search Ctrl+K", is named by
  those words rather than "Search" alone; the colour-mode button ("Color mode") loses the
  ``title`` of its icons ("Light", "Dark", "System Settings"), which a browser shows as the
  button's words while its name says neither (:func:`name_by_shown_words`; every edition).
"""

from __future__ import annotations

import functools
import html
import re
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.locale import get_translation

from courseware import book as editions

#: the words of book/_ext, translated through book_ui.po (book/_ext/editions.py loads it)
_ = get_translation(editions.UI_DOMAIN)

STATIC = Path(__file__).resolve().parent.parent / "_static"


def _add_static_path(app: Sphinx) -> None:
    if str(STATIC) not in app.config.html_static_path:
        app.config.html_static_path.append(str(STATIC))


_LATIN_THEN_CHINESE = re.compile(r"([A-Za-z0-9])(?=[\u3400-\u9fff])")


def _name_toggles(soup) -> None:
    """Give each ``<details><summary>`` toggle of the theme's toctree (a BeautifulSoup tree) an
    ``aria-label`` that names the entry it opens: the link before its ``<details>``."""
    for summary in soup.select("details > summary"):
        link = summary.parent.find_previous_sibling("a")
        if link is not None and not summary.get("aria-label"):
            label = _("Sections of {title}").format(title=link.get_text(" ", strip=True))
            # one space where a title's Latin letters meet the translation's Chinese ("GPT 的各节")
            summary["aria-label"] = _LATIN_THEN_CHINESE.sub(r"\1 ", label)


def _named_sidebar_toggles(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Wrap the theme's ``generate_toctree_html`` (it returns a BeautifulSoup tree, cached per
    page) so that each toggle it draws has a name."""
    generate = context.get("generate_toctree_html")
    if generate is None:
        return

    @functools.wraps(generate)
    def generate_named(*args, **kwargs):
        drawn = generate(*args, **kwargs)
        if hasattr(drawn, "select"):
            _name_toggles(drawn)
        return drawn

    context["generate_toctree_html"] = generate_named


def theme_labels() -> dict[str, str]:
    """The English labels the themes put on every page, and their translation."""
    return {
        "Toggle primary sidebar": _("Toggle primary sidebar"),
        "Toggle secondary sidebar": _("Toggle secondary sidebar"),
        "Main": _("Main"),
        "Page": _("Page"),
        "Color mode": _("Color mode"),
        "Link to this heading": _("Link to this heading"),
        "Link to this equation": _("Link to this equation"),
        "Search this book...": _("Search this book..."),
    }


_LABEL = re.compile(r'(?<=\s)(title|aria-label|data-bs-title|placeholder)="([^"<>]*)"')


def translate_labels(page: str, labels: dict[str, str]) -> str:
    """``page`` (HTML) with each attribute that holds one of ``labels``' English given its
    translation."""
    def replace(match: re.Match) -> str:
        english = html.unescape(match.group(2))
        return f'{match.group(1)}="{html.escape(labels[english])}"' if english in labels else match.group(0)

    return _LABEL.sub(replace, page)


_SEARCH_BUTTON = re.compile(r'(<button class="btn search-button-field[^>]*?\saria-label=")[^"]*("[^>]*>)(.*?)(</button>)', re.S)
_THEME_ICON = re.compile(r'(<i class="theme-switch [^"]*"[^>]*?)\s+title="[^"]*"')


def name_by_shown_words(page: str) -> str:
    """``page`` (HTML) with the search button named by the words it shows (its text, tags
    removed: "Search Ctrl+K") and the colour-mode button's icons without a ``title``."""
    def search(match: re.Match) -> str:
        shown = " ".join(html.unescape(re.sub(r"<[^>]*>", "", match.group(3))).split())
        return f"{match.group(1)}{html.escape(shown)}{match.group(2)}{match.group(3)}{match.group(4)}"

    return _THEME_ICON.sub(r"\1", _SEARCH_BUTTON.sub(search, page))


def _rendered_pages(app: Sphinx) -> None:
    """Every page the builder renders: each button named by the words it shows, and, in an edition
    that is not English, the theme's labels translated."""
    templates = getattr(app.builder, "templates", None)
    if templates is None:
        return
    render = templates.render
    translated = not (app.config.language or "en").startswith("en")

    @functools.wraps(render)
    def render_page(template: str, context: dict) -> str:
        page = render(template, context)
        return name_by_shown_words(translate_labels(page, theme_labels()) if translated else page)

    templates.render = render_page


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", _add_static_path)
    app.connect("builder-inited", _rendered_pages)
    app.add_js_file("exercise-download.js", loading_method="defer")
    app.add_css_file("course.css")
    # after the theme (500) put generate_toctree_html into the context
    app.connect("html-page-context", _named_sidebar_toggles, priority=700)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
