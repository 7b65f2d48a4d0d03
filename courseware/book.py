"""The book's Chinese edition, and the message templates its catalogs are made from
(docs/translating.md).

* ``python -m courseware book-zh [-W] [--keep-going] [--path-output DIR]``, the second half of
  ``make book``: the book built again with ``language=zh_CN`` through Jupyter Book's own
  machinery (its configuration from ``_config.yml``; the options of ``jupyter-book build``)
  into ``DIR/_build/zh_CN/html``, then moved to ``DIR/_build/html/zh/``, inside the English
  edition. Each page's prose comes from its catalog ``locale/zh_CN/LC_MESSAGES/<docname>.mo``
  (Sphinx compiles the ``.po``); ``book/_ext/editions.py`` does the rest. It executes nothing:
  the chapter pages' outputs come from the English build's jupyter-cache
  (``DIR/_build/.jupyter_cache``), and a page missing there stops the build, so build the
  English book first.
* ``python -m courseware pot [DEST]``, the first step of ``make translations``: the templates
  (``.pot``) of the book pages' catalogs, made by Sphinx's gettext builder with nothing executed
  (in a doctree folder of its own: sharing the HTML build's breaks that build), and of the book's
  title and the words the book's extensions add to a page (``book_ui.pot``, extracted by Babel
  from ``_config.yml`` and ``book/_ext/``). ``sphinx-intl update`` then brings
  ``locale/zh_CN/LC_MESSAGES/`` up to date with them.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from pathlib import Path, PurePosixPath

import yaml

from layout import REPO

SOURCE_LANGUAGE = "en"
#: language of an edition -> its folder inside the English edition's ``_build/html`` ("" = the root)
EDITIONS = {SOURCE_LANGUAGE: "", "zh_CN": "zh"}
LOCALE_DIR = "locale"
#: the pages whose catalogs Sphinx makes (``book/<page>.po``); the exercise pages are notebooks,
#: translated in their own catalogs (``exercises/<assignment>.po``) into notebooks of their own
CATALOG_PAGES = "book"
#: the domain of the words that the book's extensions put on a page (``book_ui.po``)
UI_DOMAIN = "book_ui"
UI_SOURCES = "book/_ext"
EXERCISES = "notebooks"


def edition_folder(language: str | None) -> str:
    """``"zh"`` for ``zh_CN``, ``""`` for the English edition."""
    return EDITIONS.get(language or SOURCE_LANGUAGE, "")


def to_site_root(language: str | None) -> str:
    """The relative path from an edition's root folder to the English edition's (the site's root)."""
    folder = edition_folder(language)
    return "../" * len(PurePosixPath(folder).parts) if folder else ""


def exercise_notebook(docname: str, language: str | None) -> str | None:
    """The repository path of the notebook that exercise page ``notebooks/<assignment>/<name>``
    shows in the edition of ``language`` (``notebooks/zh_CN/<assignment>/<name>.ipynb`` in
    Chinese), or None when ``docname`` is no exercise page."""
    parts = PurePosixPath(docname).parts
    if len(parts) != 3 or parts[0] != EXERCISES:
        return None
    if (language or SOURCE_LANGUAGE) == SOURCE_LANGUAGE:
        return f"{docname}.ipynb"
    return f"{EXERCISES}/{language}/{parts[1]}/{parts[2]}.ipynb"


# ----------------------------------------------------------------------------- the Chinese build


class ExecutionRefused(RuntimeError):
    """A page of a translated edition would have been executed."""


@contextlib.contextmanager
def execute_nothing():
    """While this is active, myst-nb takes every page's outputs from the jupyter-cache and
    raises :class:`ExecutionRefused` instead of executing a page the cache lacks."""
    from myst_nb.core.execute import cache as nb_cache

    original = nb_cache.NotebookClientCache.start_client

    def start_client(self):
        store = nb_cache.get_cache(self.nb_config.execution_cache_path)
        try:
            store.match_cache_notebook(self.notebook)
        except KeyError:
            raise ExecutionRefused(
                f"{self.path}: its executed copy is not in the jupyter-cache "
                f"{self.nb_config.execution_cache_path}; a translated edition executes nothing: "
                "build the English book first (make book), with this page as it is now"
            ) from None
        return original(self)

    nb_cache.NotebookClientCache.start_client = start_client
    try:
        yield
    finally:
        nb_cache.NotebookClientCache.start_client = original


def _jupyter_book_overrides(root: Path, toc: Path | None) -> dict:
    """What ``jupyter-book build`` itself adds to the configuration of a book build."""
    return {"external_toc_path": str(toc or root / "_toc.yml"), "latex_individualpages": False}


def build_edition(language: str = "zh_CN", *, root: Path = REPO, path_output: Path | None = None,
                  config: Path | None = None, toc: Path | None = None,
                  warningiserror: bool = False, keep_going: bool = False) -> int:
    """Build the edition of ``language`` into ``<path_output>/_build/html/<folder>/`` (the
    English build must be in ``<path_output>/_build/html`` already), as ``jupyter-book build``
    with the same options would; the exit status."""
    from jupyter_book.sphinx import build_sphinx

    folder = edition_folder(language)
    if not folder:
        raise ValueError(f"no translated edition for language {language!r}; known: {sorted(EDITIONS)}")
    build = Path(path_output or root).resolve() / "_build"
    if not (build / "html" / "index.html").is_file():
        print(f"error: no English book in {build / 'html'}: build it first (make book)", file=sys.stderr)
        return 2
    cache = build / ".jupyter_cache"
    staging = build / language  # html/, .doctrees/ and myst-nb's jupyter_execute/
    overrides = {
        **_jupyter_book_overrides(root, toc),
        "language": language,
        "nb_execution_cache_path": str(cache),
    }
    # As `make book` does for the English pages: a page or asset of an earlier build must not
    # survive (Sphinx copies the static files only when it writes a page); the doctrees stay.
    shutil.rmtree(staging / "html", ignore_errors=True)
    with execute_nothing():
        status = build_sphinx(
            root, staging / "html", doctreedir=staging / ".doctrees", noconfig=True,
            path_config=str(config or root / "_config.yml"), confoverrides=overrides,
            warningiserror=warningiserror, keep_going=keep_going,
        )
    if isinstance(status, Exception) or status:
        return status if isinstance(status, int) else 1
    target = build / "html" / folder
    shutil.rmtree(target, ignore_errors=True)
    (staging / "html").rename(target)
    print(f"The {language} edition is in {target}")
    return 0


# --------------------------------------------------------------------------------- the templates


def write_templates(dest: Path, *, root: Path = REPO) -> list[Path]:
    """Write ``dest/book/<page>.pot`` (the book pages' prose) and ``dest/book_ui.pot``; nothing
    else is left in ``dest``, so that ``sphinx-intl update -p dest`` makes or updates exactly
    the catalogs ``book/<page>.po`` and ``book_ui.po``. Returns the templates written."""
    from jupyter_book.sphinx import build_sphinx

    dest = Path(dest).resolve()
    shutil.rmtree(dest, ignore_errors=True)
    overrides = {**_jupyter_book_overrides(root, None), "nb_execution_mode": "off"}
    status = build_sphinx(
        root, dest, doctreedir=dest.parent / f".doctrees-{dest.name}", noconfig=True,
        path_config=str(root / "_config.yml"), confoverrides=overrides, builder="gettext",
    )
    if isinstance(status, Exception) or status:
        raise RuntimeError(f"Sphinx's gettext builder failed on {root} (status {status})")
    written = []
    for pot in sorted(dest.rglob("*.pot")):
        if pot.relative_to(dest).parts[0] == CATALOG_PAGES:
            written.append(pot)
        else:  # the exercise notebooks' pages, the templates' words (sphinx.pot)
            pot.unlink()
    for folder in sorted((p for p in dest.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    written.append(write_ui_template(dest / f"{UI_DOMAIN}.pot", root=root))
    return written


def write_ui_template(path: Path, *, root: Path = REPO) -> Path:
    """The book's title and footer (``_config.yml``) and the words of ``book/_ext/*.py`` marked
    ``_("...")``, as a template, locations relative to the repository."""
    from babel.messages.catalog import Catalog
    from babel.messages.extract import extract_from_dir
    from babel.messages.pofile import write_po

    config = root / "_config.yml"
    settings = yaml.safe_load(config.read_text())
    title = settings["title"]
    catalog = Catalog(project=title, domain=UI_DOMAIN, fuzzy=False, copyright_holder="The Attention course team")
    lines = config.read_text().splitlines()
    for text, key, comment in ((title, "title:", "the book's title"),
                               (settings["html"]["extra_footer"], "  extra_footer:", "the footer of every page (HTML)")):
        line = next(i for i, source in enumerate(lines, 1) if source.startswith(key))
        catalog.add(text, None, [("_config.yml", line)], auto_comments=[comment])
    for filename, lineno, message, comments, context in extract_from_dir(
        root / UI_SOURCES, method_map=[("*.py", "python")], keywords={"_": None},
    ):
        catalog.add(message, None, [(f"{UI_SOURCES}/{filename}", lineno)],
                    auto_comments=comments, context=context)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        write_po(out, catalog, width=0)
    return path
