"""Small additions to the theme, served from ``book/_static``.

* ``exercise-download.js``: the learner notebooks (``notebooks/<assignment>/<name>.ipynb``)
  are pages of the book, and the theme's download menu links to the page's source, which
  Sphinx copies into ``_build/html/_sources`` (``html_copy_source: true`` in
  ``_config.yml``): for an exercise page, the notebook itself. The theme opens that link
  in a new tab, where a browser shows the notebook's JSON; the script marks it as a
  download instead.
* ``course.css``: display equations wider than the column scroll instead of being cut off.
"""

from __future__ import annotations

from pathlib import Path

from sphinx.application import Sphinx

STATIC = Path(__file__).resolve().parent.parent / "_static"


def _add_static_path(app: Sphinx) -> None:
    if str(STATIC) not in app.config.html_static_path:
        app.config.html_static_path.append(str(STATIC))


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", _add_static_path)
    app.add_js_file("exercise-download.js", loading_method="defer")
    app.add_css_file("course.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
