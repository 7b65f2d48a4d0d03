"""What an exercise page offers a learner: launch buttons when the course has a public home,
and the chapter's course package beside the notebook's download.

* **Launch buttons.** The theme draws Colab / Binder / JupyterHub buttons from
  ``repository.url`` and ``launch_buttons`` in ``_config.yml``. Without a repository URL
  they would be links to nowhere, so this turns them off; with one, it keeps them on the
  exercise pages (``notebooks/<assignment>/<name>.ipynb``, the files the buttons open in
  the repository) and takes them off the chapter pages, which are MyST markdown that
  Colab cannot open.
* **The course package.** Every exercise page's download menu gets the chapter's wheel
  (``_static/wheels/attention_course-<version>+chNN-py3-none-any.whl``): the notebook's first
  cell installs it from the published book, or from the notebook's folder. The wheels are
  built at the end of the build from what each chapter's learner may have
  (:mod:`courseware.learner_package`). A translated edition (``book/_ext/editions.py``) links to
  the English edition's wheels, the ones the notebook's first cell installs, and writes none.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from sphinx.application import Sphinx
from sphinx.locale import get_translation
from sphinx.util import logging

from courseware import book, learner_package

logger = logging.getLogger(__name__)
_ = get_translation(book.UI_DOMAIN)  # the words a page shows: locale/<language>/LC_MESSAGES/book_ui.po

EXERCISES = "notebooks"  # exercise pages: notebooks/<assignment>/<name>


def _assignment(pagename: str) -> str | None:
    parts = PurePosixPath(pagename).parts
    return parts[1] if len(parts) == 3 and parts[0] == EXERCISES else None


def _launch_only_with_a_home(app: Sphinx, config) -> None:
    options = config.html_theme_options
    if not str(options.get("repository_url") or "").strip():
        options["launch_buttons"] = {}


def _buttons(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    buttons = context.get("header_buttons")
    if buttons is None:
        return
    assignment = _assignment(pagename)
    if assignment is None:
        buttons[:] = [b for b in buttons if b.get("label") != "launch-buttons"]
        return
    # the English edition's copy, from the root of this page's edition
    wheel = "/".join([learner_package.WHEELS_DIR, learner_package.wheel_name(assignment)])
    wheel = book.to_site_root(app.config.language) + wheel
    for group in buttons:
        if group.get("label") == "download-buttons":
            group["buttons"].insert(1, {
                "type": "link",
                "url": context["pathto"](wheel, 1),
                "text": ".whl",
                "icon": "fas fa-box",
                "tooltip": _("Download this chapter's course package (the notebook's first cell installs it)"),
                "label": "download-wheel-button",
            })


def _write_wheels(app: Sphinx, exception) -> None:
    if exception is not None or app.builder.format != "html" or book.to_site_root(app.config.language):
        return
    assignments = sorted({a for a in map(_assignment, app.env.found_docs) if a})
    dest = Path(app.outdir) / learner_package.WHEELS_DIR
    for path in learner_package.build_wheels(dest, assignments):
        logger.info(f"learner_links: wrote {path.relative_to(app.outdir)}")


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _launch_only_with_a_home)
    # after the theme (priority 501) has made its launch and download buttons
    app.connect("html-page-context", _buttons, priority=600)
    app.connect("build-finished", _write_wheels)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
