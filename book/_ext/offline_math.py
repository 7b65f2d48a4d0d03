"""Keep the book offline: MathJax served from the build, no remote asset on any page.

A small local Sphinx extension, loaded from ``_config.yml`` (``sphinx.local_extensions``).
It does three things:

1. **MathJax from the build.**  The pinned PyPI package ``django-static-mathjax``
   (``pip`` module ``mathjax``) ships MathJax 3.2.2.  After an HTML build this copies
   ``tex-svg-full.js`` (SVG output: no web fonts to fetch, every TeX package built in)
   and the folders MathJax may load on demand (the context menu, the accessibility
   explorer and its speech maps, the other renderer a reader can pick in the menu) into
   ``_build/html/_static/mathjax/``, and sets ``mathjax_path`` so that every page with
   math loads that local copy instead of the CDN that Sphinx uses by default (a build
   published inside another, ``offline_math_shared_root``, loads the other's copy).
2. **No thebe.**  Jupyter Book always loads ``sphinx_thebe``, which writes
   ``https://unpkg.com/thebe@...`` into every page (fetched only on a click, but still a
   remote script) and a Binder configuration.  The book has no live kernels, so this
   extension unplugs ``sphinx_thebe``'s event handlers and assets.
3. **A guard.**  On every page it checks the scripts and style sheets Sphinx is about to
   write; a remote one (``http://``, ``https://`` or ``//``), or an inline script that
   names a remote URL, is reported as a warning, which ``jupyter-book build -W`` turns
   into a failed build.  ``tests/test_book.py`` checks the built files too, and
   loads the pages in a headless browser that records every request.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

MATHJAX_VERSION = "3.2.2"
#: Where MathJax lands inside the build's ``_static`` folder.
MATHJAX_DIR = "mathjax"
#: The one file every page with math loads (MathJax's own "combined component").
MATHJAX_ENTRY = "tex-svg-full.js"
#: What MathJax may load later, relative to its ``es5`` folder: the menu (``ui``), the
#: accessibility explorer (``a11y``) with its speech rule maps (``sre``), and
#: ``input``/``output`` for the components the menu or ``\require`` can switch to.
MATHJAX_ON_DEMAND = ("ui", "a11y", "sre", "input", "output")

# URLs that are names, not addresses (XML namespaces); allowed in inline scripts.
_NAMESPACE = re.compile(r"https?://www\.w3\.org/")
_REMOTE = re.compile(r"(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}")


def mathjax_root() -> Path:
    """The ``es5`` folder of the installed MathJax (from ``django-static-mathjax``)."""
    try:
        import mathjax  # the django-static-mathjax package
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ExtensionError(
            "offline_math: MathJax is not installed. Install the pinned package "
            "`django-static-mathjax==3.2.2.1` (see requirements.txt)."
        ) from err
    base = Path(mathjax.__file__).resolve().parent / "static" / "mathjax"
    root = base / "es5"
    if not (root / MATHJAX_ENTRY).is_file():
        raise ExtensionError(f"offline_math: {root / MATHJAX_ENTRY} not found")
    return root


def _set_mathjax_path(app: Sphinx, config) -> None:
    # A path without "://" is taken relative to the build's _static folder. A build published
    # inside another one (the Chinese edition in the English one's zh/: book/_ext/editions.py)
    # loads the other build's copy, `offline_math_shared_root` (its root, from this one's) away.
    shared = config.offline_math_shared_root
    prefix = f"../{shared}_static/" if shared else ""
    config.mathjax_path = f"{prefix}{MATHJAX_DIR}/{MATHJAX_ENTRY}"
    mj = dict(config.mathjax3_config or {})
    # One shared glyph cache per page rather than one per equation: smaller pages.
    mj.setdefault("svg", {}).setdefault("fontCache", "global")
    config.mathjax3_config = mj


def _unplug_thebe(app: Sphinx) -> None:
    """Remove what ``sphinx_thebe`` registered (it is always on in Jupyter Book)."""
    for listeners in app.events.listeners.values():
        listeners[:] = [
            listener
            for listener in listeners
            if not getattr(listener.handler, "__module__", "").startswith("sphinx_thebe")
        ]
    app.registry.css_files[:] = [
        (name, attrs) for name, attrs in app.registry.css_files if "thebe" not in str(name)
    ]
    app.registry.js_files[:] = [
        (name, attrs) for name, attrs in app.registry.js_files if "thebe" not in str(name)
    ]


def _is_remote(url: str | None) -> bool:
    return bool(url) and (url.startswith("//") or "://" in url)


def _check_page_assets(app: Sphinx, pagename: str, templatename: str, context, doctree) -> None:
    """Warn (an error under ``-W``) if a page is about to load anything remote."""
    for kind, assets in (("script", context.get("script_files", [])),
                         ("style sheet", context.get("css_files", []))):
        for asset in assets:
            name = getattr(asset, "filename", asset)
            if _is_remote(str(name)):
                logger.warning(
                    "offline_math: page %r would load the remote %s %s; the book must "
                    "work offline", pagename, kind, name, type="offline", subtype="remote",
                )
            body = getattr(asset, "attributes", {}).get("body", "") or ""
            for match in _REMOTE.finditer(_NAMESPACE.sub("", body)):
                logger.warning(
                    "offline_math: an inline script of page %r names %s; the book must "
                    "work offline", pagename, match.group(0), type="offline", subtype="remote",
                )


def _copy_tree(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst``, skipping files that are already there unchanged."""
    for path in [src] if src.is_file() else sorted(src.rglob("*")):
        target = dst if src.is_file() else dst / path.relative_to(src)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        stat = path.stat()
        if target.is_file():
            tstat = target.stat()
            if tstat.st_size == stat.st_size and tstat.st_mtime >= stat.st_mtime:
                continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def _copy_mathjax(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html" or app.config.offline_math_shared_root:
        return
    root = mathjax_root()
    dest = Path(app.outdir) / "_static" / MATHJAX_DIR
    _copy_tree(root / MATHJAX_ENTRY, dest / MATHJAX_ENTRY)
    for name in MATHJAX_ON_DEMAND:
        if (root / name).is_dir():
            _copy_tree(root / name, dest / name)
    license_file = root.parent / "LICENSE"
    if license_file.is_file():
        _copy_tree(license_file, dest / "LICENSE")


def setup(app: Sphinx) -> dict:
    # MathJax must be version-checked once, early, so that a missing package fails fast.
    root = mathjax_root()
    version = re.search(r'"version":\s*"([^"]+)"', (root.parent / "package.json").read_text())
    if not version or version.group(1) != MATHJAX_VERSION:
        raise ExtensionError(
            f"offline_math: expected MathJax {MATHJAX_VERSION} from django-static-mathjax, "
            f"found {version.group(1) if version else 'an unknown version'} in {root.parent}"
        )
    app.add_config_value("offline_math_shared_root", "", "html", [str])
    app.connect("config-inited", _set_mathjax_path)
    _unplug_thebe(app)
    # After sphinx.ext.mathjax (priority 500) has added its scripts to the page.
    app.connect("html-page-context", _check_page_assets, priority=900)
    app.connect("build-finished", _copy_mathjax)
    return {"version": MATHJAX_VERSION, "parallel_read_safe": True, "parallel_write_safe": True}
