"""The book's editions: English (the source) and 简体中文, the same book built with
``language=zh_CN`` (``python -m courseware book-zh``; :mod:`courseware.book`) into the English
edition's ``zh/`` folder. Both builds load this extension; what it does follows the build's
``language``.

* **A language switch on every page** (``book/_templates/language-switch.html``, in the article
  header before the theme's buttons, drawn as they are): a link to the same page in the other
  edition, relative, so it works offline and under any ``html.baseurl``. Its label is the other
  language's own name, from Babel's locale data (CLDR).
* **An exercise page shows the notebook in the edition's language.** In the Chinese build the
  page ``notebooks/<assignment>/<name>`` reads ``notebooks/zh_CN/<assignment>/<name>.ipynb``
  instead (the same docname, so the switch maps page to page), its download (``_sources``) is
  that notebook, and its launch buttons open it; the chapter's wheel is the English edition's
  copy (``book/_ext/learner_links.py``), the one the notebook's first cell installs. MathJax
  too is the English edition's copy (``book/_ext/offline_math.py``).
* **A table inside a directive is translated too.** MyST gives the cells of a table it parses
  inside a directive (a ``{dropdown}``, an admonition) no source, and Sphinx neither extracts
  nor translates a text without one; ``TableCellsHaveASource`` gives them the page's.
* **What the page catalogs miss.** The words this book's extensions add to a page
  (``_("...")`` in ``book/_ext/``) and the book's title and footer (``title``, ``html.extra_footer`` in ``_config.yml``) are
  translated through the catalog ``locale/<language>/LC_MESSAGES/book_ui.po``; the captions of
  the table of contents (``_toc.yml``), which Jupyter Book inserts into the root page after
  Sphinx translated it, through that page's catalog.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.locale import get_translation
from sphinx.locale import init as init_locale
from sphinx.transforms import SphinxTransform
from sphinx.util.i18n import docname_to_domain

from courseware import book as editions

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "book" / "_templates"

#: what the extensions of ``book/_ext`` mark for translation: ``_("...")``
_ = get_translation(editions.UI_DOMAIN)


def _language(app: Sphinx) -> str:
    return app.config.language or editions.SOURCE_LANGUAGE


def _language_name(language: str) -> str:
    """A language's name in that language: "English", "中文"."""
    from babel import Locale

    return Locale.parse(language).get_language_name(language)


def _add_catalog(app: Sphinx) -> None:
    """Load ``book_ui.mo``, compiled first when its ``.po`` is newer: Sphinx compiles the
    catalogs of ``locale_dirs`` only when the build starts, after the extensions are set up."""
    from sphinx.util.i18n import CatalogRepository

    language = _language(app)
    repo = CatalogRepository(str(REPO), [editions.LOCALE_DIR], language, app.config.source_encoding)
    for catalog in repo.catalogs:
        if catalog.domain == editions.UI_DOMAIN and catalog.is_outdated():
            catalog.write_mo(language, app.config.gettext_allow_fuzzy_translations)
    app.add_message_catalog(editions.UI_DOMAIN, str(REPO / editions.LOCALE_DIR))


def _check_language(app: Sphinx, config) -> None:
    if _language(app) not in editions.EDITIONS:
        raise ExtensionError(
            f"editions: the book has no {config.language!r} edition; its editions: {sorted(editions.EDITIONS)}"
        )
    if str(TEMPLATES) not in config.templates_path:  # language-switch.html
        config.templates_path.append(str(TEMPLATES))
    # MathJax is the English edition's copy (book/_ext/offline_math.py), as the wheels are
    config.offline_math_shared_root = editions.to_site_root(_language(app))
    # the pages' canonical address (<link rel="canonical">) is in the edition's folder
    folder = editions.edition_folder(_language(app))
    if folder and config.html_baseurl:
        config.html_baseurl = f"{config.html_baseurl.rstrip('/')}/{folder}/"


def _translate_title(app: Sphinx, config) -> None:
    """The book's title and its footer (the licences) in the edition's language."""
    if _language(app) != editions.SOURCE_LANGUAGE and config.html_title:
        config.html_title = str(_(config.html_title))
    footer = config.html_theme_options.get("extra_footer")
    if _language(app) != editions.SOURCE_LANGUAGE and footer:
        config.html_theme_options["extra_footer"] = str(_(footer))


class TranslateTocCaptions(SphinxTransform):
    """Translate the captions of the toctrees that sphinx_external_toc inserted (its transform
    runs at priority 100, after Sphinx's ``Locale`` at 20) with the page's own catalog."""

    default_priority = 150

    def apply(self, **kwargs) -> None:
        if _language(self.app) == editions.SOURCE_LANGUAGE:
            return
        toctrees = [n for n in self.document.findall(addnodes.toctree) if n.get("caption")]
        if not toctrees:
            return
        domain = docname_to_domain(self.env.docname, self.config.gettext_compact)
        dirs = [str(Path(self.env.srcdir) / d) for d in self.config.locale_dirs]
        catalog, found = init_locale(dirs, self.config.language, domain)
        if found:
            for node in toctrees:
                node["caption"] = catalog.gettext(node["caption"])


class TableCellsHaveASource(SphinxTransform):
    """Give the texts of a table's cells that MyST left without a source (a table inside a
    directive: the build and budget notes of the chapters are tables in ``{dropdown}``s) their
    page's source and their table's line, so that the gettext builder extracts them and
    Sphinx's ``Locale`` (priority 20) translates them, as it does a table outside a directive."""

    default_priority = 15

    def apply(self, **kwargs) -> None:
        for table in self.document.findall(nodes.table):
            line = table.line or next((a.line for a in _ancestors(table) if getattr(a, "line", None)), 0)
            for node in table.findall(nodes.TextElement):
                if not node.source:
                    node.source = self.document["source"]
                    node.line = line


def _ancestors(node):
    while node.parent is not None:
        node = node.parent
        yield node


def _exercise_source(app: Sphinx, docname: str, source: list[str]) -> None:
    """In a translated edition, an exercise page reads the edition's notebook."""
    language = _language(app)
    notebook = editions.exercise_notebook(docname, language)
    if language == editions.SOURCE_LANGUAGE or notebook is None:
        return
    path = REPO / notebook
    if not path.is_file():
        raise ExtensionError(
            f"editions: {docname} has no {language} notebook {notebook}; `make release` writes it "
            f"from solutions/ and its catalog"
        )
    source[0] = path.read_text(encoding="utf-8")
    app.env.note_dependency(str(path))  # a changed translation rebuilds the page


def _switch(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """The links to ``pagename`` in the other editions, for language-switch.html."""
    language = _language(app)
    to_edition_root = "../" * pagename.count("/")
    to_site_root = to_edition_root + editions.to_site_root(language)
    target = app.builder.get_target_uri(pagename)
    links = []
    for other, folder in editions.EDITIONS.items():
        if other == language:
            continue
        name = _language_name(other)
        links.append({
            "href": to_site_root + (f"{folder}/" if folder else "") + target,
            "text": name,
            "lang": other.replace("_", "-"),
        })
    context["course_editions"] = links


def _launch_the_editions_notebook(app: Sphinx, pagename: str, templatename: str, context: dict,
                                  doctree) -> None:
    """The theme's launch buttons of a translated exercise page (Colab, Binder, JupyterHub: each
    a URL holding the notebook's repository path) open the edition's notebook."""
    language = _language(app)
    notebook = editions.exercise_notebook(pagename, language)
    buttons = context.get("header_buttons")
    if language == editions.SOURCE_LANGUAGE or notebook is None or not buttons:
        return
    english = editions.exercise_notebook(pagename, editions.SOURCE_LANGUAGE)
    for group in buttons:
        if group.get("label") != "launch-buttons":
            continue
        for button in group["buttons"]:
            if english not in button["url"]:
                raise ExtensionError(f"editions: the launch button {button['url']} does not name {english}")
            button["url"] = button["url"].replace(english, notebook)


def _copy_the_editions_notebooks(app: Sphinx, exception) -> None:
    """The download of a translated exercise page (``_sources/<docname>.ipynb``: Sphinx copied
    the English file there) is the edition's notebook."""
    language = _language(app)
    if exception is not None or app.builder.format != "html" or language == editions.SOURCE_LANGUAGE:
        return
    for docname in sorted(app.env.found_docs):
        notebook = editions.exercise_notebook(docname, language)
        if notebook is not None:
            target = Path(app.outdir) / "_sources" / f"{docname}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(REPO / notebook, target)


def setup(app: Sphinx) -> dict:
    _add_catalog(app)
    app.connect("config-inited", _check_language, priority=400)  # before offline_math reads its setting
    app.connect("config-inited", _translate_title)
    app.add_transform(TranslateTocCaptions)
    app.add_transform(TableCellsHaveASource)
    app.connect("source-read", _exercise_source)
    app.connect("html-page-context", _switch)
    # after the theme (501) made the launch buttons and learner_links (600) kept them
    app.connect("html-page-context", _launch_the_editions_notebook, priority=650)
    app.connect("build-finished", _copy_the_editions_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
