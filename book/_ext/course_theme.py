"""Small additions to the theme, served from ``book/_static``.

* ``exercise-download.js``: the learner notebooks (``notebooks/<assignment>/<name>.ipynb``)
  are pages of the book, and the theme's download menu links to the page's source, which
  Sphinx copies into ``_build/html/_sources`` (``html_copy_source: true`` in
  ``_config.yml``): for an exercise page, the notebook itself. The theme opens that link
  in a new tab, where a browser shows the notebook's JSON; the script marks it as a
  download instead.
* ``course.css``: display equations wider than the column scroll instead of being cut off.
* **A name for each toggle of the sidebar.** The theme opens and closes a chapter's sections
  with a ``<summary>`` that holds only an icon, so a screen reader announces a nameless
  button (axe's ``summary-name``). Its sidebar HTML (``generate_toctree_html``) is given back
  with an ``aria-label`` on each toggle: "Sections of <the chapter's title>", in the edition's
  language (``book_ui.po``).
"""

from __future__ import annotations

import functools
import html
import re
from pathlib import Path

from markupsafe import Markup
from sphinx.application import Sphinx
from sphinx.locale import get_translation

from courseware import book as editions

#: the words of book/_ext, translated through book_ui.po (book/_ext/editions.py loads it)
_ = get_translation(editions.UI_DOMAIN)

STATIC = Path(__file__).resolve().parent.parent / "_static"


def _add_static_path(app: Sphinx) -> None:
    if str(STATIC) not in app.config.html_static_path:
        app.config.html_static_path.append(str(STATIC))


#: a sidebar entry with sections: its link, then the theme's <details><summary> toggle
_TOGGLE = re.compile(r'(<a class="reference internal"[^>]*>(.*?)</a>\s*<details[^>]*>\s*)<summary>', re.S)


def _name_toggles(toctree_html: str) -> str:
    def named(match: re.Match) -> str:
        title = html.unescape(re.sub(r"<[^>]+>", "", match.group(2))).strip()
        label = html.escape(_("Sections of {title}").format(title=title), quote=True)
        return f'{match.group(1)}<summary aria-label="{label}">'

    return _TOGGLE.sub(named, toctree_html)


def _named_sidebar_toggles(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Wrap the theme's ``generate_toctree_html`` so that each toggle it draws has a name."""
    generate = context.get("generate_toctree_html")
    if generate is None:
        return

    @functools.wraps(generate)
    def generate_named(*args, **kwargs):
        drawn = generate(*args, **kwargs)
        return Markup(_name_toggles(str(drawn))) if isinstance(drawn, str) else drawn

    context["generate_toctree_html"] = generate_named


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", _add_static_path)
    app.add_js_file("exercise-download.js", loading_method="defer")
    app.add_css_file("course.css")
    # after the theme (500) put generate_toctree_html into the context
    app.connect("html-page-context", _named_sidebar_toggles, priority=700)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
