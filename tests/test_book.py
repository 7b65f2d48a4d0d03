"""The book: it builds without warnings, works offline, shows no solution, and renders.

The slow tests share one build of the book (``jupyter-book build <repo> --path-output
<tmp> -W --keep-going``) into a fresh temporary folder, so the HTML they check is never
stale. Only the *execution* of the chapter pages is reused between runs: the Jupyter
cache is kept in ``_build/.test_book_cache/<key>/``, where the key hashes the course
package (``attention_course/``) and ``requirements.txt``, so a change there re-executes
every page (the cache itself notices edits of the pages). ``BOOK_TEST_FRESH=1`` ignores
the cache. Under pytest-xdist the workers share that one build (a file lock).

The browser tests need Debian's ``chromium`` and a CJK font
(``apt-get install -y chromium fonts-noto-cjk``); without Chromium they are skipped,
or fail if ``BOOK_REQUIRE_BROWSER=1`` (for CI).
Their screenshots are kept in ``<build folder>/screenshots/`` (the path is printed).
"""

from __future__ import annotations

import hashlib
import html as html_lib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

import pytest
import yaml

import browser

# one worker runs them all: the build, the browser visits and the diagrams are fixtures built once
pytestmark = pytest.mark.xdist_group("book")

REPO = Path(__file__).resolve().parent.parent
HTML_SUFFIXES = {".html"}
TEXT_SUFFIXES = {".html", ".ipynb", ".txt", ".js", ".md", ".json", ".py", ".css", ".map", ".xml", ".inv"}
PRIVATE = ("solutions", "autograder", "tests")


# --------------------------------------------------------------------------- the table of contents


def toc() -> dict:
    return yaml.safe_load((REPO / "_toc.yml").read_text())


def toc_chapters() -> list[dict]:
    """The chapter entries of ``_toc.yml`` (under ``parts`` or directly)."""
    data = toc()
    chapters = []
    for part in data.get("parts", []):
        chapters += part.get("chapters", [])
    chapters += data.get("chapters", [])
    return chapters


def _doc(entry: dict) -> str:
    return str(PurePosixPath(entry["file"]).with_suffix(""))


def chapter_docs() -> list[str]:
    return [_doc(c) for c in toc_chapters()]


def exercise_docs() -> list[str]:
    """Every notebook page under a chapter: ``notebooks/<assignment>/<name>``."""
    docs = []
    for chapter in toc_chapters():
        for section in chapter.get("sections", []) or []:
            if _doc(section).startswith("notebooks/"):
                docs.append(_doc(section))
    return docs


def page_docs() -> list[str]:
    return browser.toc_pages(REPO)


def source_of(doc: str) -> Path:
    for suffix in (".md", ".ipynb"):
        if (REPO / (doc + suffix)).is_file():
            return REPO / (doc + suffix)
    raise FileNotFoundError(f"_toc.yml names {doc!r}, but neither {doc}.md nor {doc}.ipynb exists")


# ------------------------------------------------------------------------------- fast checks


def test_toc_pairs_every_chapter_with_its_exercise_notebooks():
    released = sorted(
        str(p.relative_to(REPO).with_suffix("")) for p in (REPO / "notebooks").glob("*/*.ipynb")
    )
    assert toc()["root"] == "book/intro", "the landing page is book/intro.md"
    assert toc_chapters(), "_toc.yml lists no chapter"
    for chapter in toc_chapters():
        doc = _doc(chapter)
        assert doc.startswith("book/"), f"chapter {doc!r}: chapter pages live in book/"
        source_of(doc)
        assignment = PurePosixPath(doc).name
        sections = [_doc(s) for s in chapter.get("sections", []) or []]
        expected = [n for n in released if n.startswith(f"notebooks/{assignment}/")]
        assert expected, (
            f"chapter {doc!r} has no exercise notebook: expected notebooks/{assignment}/*.ipynb "
            "(run `python -m courseware release`)"
        )
        missing = sorted(set(expected) - set(sections))
        assert not missing, f"_toc.yml: chapter {doc!r} lacks its exercise page(s) {missing}"
    orphans = sorted(set(released) - set(exercise_docs()))
    assert not orphans, f"learner notebooks missing from _toc.yml: {orphans}"


def test_config_keeps_private_folders_and_stubs_out():
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    assert config.get("only_build_toc_files") is True, "only the pages of _toc.yml may be built"
    for name in PRIVATE:
        assert name in config["exclude_patterns"], f"_config.yml must exclude {name}/"
    patterns = config["execute"]["exclude_patterns"]
    # myst-nb matches these with PurePosixPath.match, from the end of the path.
    for doc in exercise_docs():
        path = PurePosixPath(str(source_of(doc)))
        assert any(path.match(p) for p in patterns), f"{doc} would be executed at build time"
    for doc in chapter_docs():
        path = PurePosixPath(str(source_of(doc)))
        assert not any(path.match(p) for p in patterns), f"{doc} (a chapter page) is not executed"
    assert not re.search(r"https?://", (REPO / "_config.yml").read_text().split("\nsphinx:")[1]), (
        "no URL in the Sphinx settings: the book must not load anything remote"
    )


def _sphinx_project(root: Path, extra_conf: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "conf.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(REPO / 'book' / '_ext')!r})\n"
        "extensions = ['sphinx.ext.mathjax', 'offline_math']\n"
        "html_theme = 'basic'\n" + extra_conf
    )
    (root / "index.rst").write_text("Title\n=====\n\nInline :math:`a^2 + b^2`.\n")
    return root


def _sphinx_build(src: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "-q", str(src), str(out)],
        capture_output=True, text=True, timeout=300,
    )


def test_offline_math_serves_mathjax_and_refuses_remote_assets(tmp_path):
    ok = _sphinx_build(_sphinx_project(tmp_path / "ok"), tmp_path / "ok_html")
    assert ok.returncode == 0, ok.stderr
    page = (tmp_path / "ok_html" / "index.html").read_text()
    assert 'src="_static/mathjax/tex-svg-full.js' in page, "MathJax is not loaded from the build"
    assert (tmp_path / "ok_html" / "_static" / "mathjax" / "tex-svg-full.js").is_file()
    assert "cdn.jsdelivr" not in page and "unpkg" not in page
    bad = _sphinx_build(
        _sphinx_project(tmp_path / "bad", "html_js_files = ['https://cdn.example.com/x.js']\n"),
        tmp_path / "bad_html",
    )
    assert bad.returncode != 0 and "offline_math" in bad.stderr and "cdn.example.com" in bad.stderr, bad.stderr


# ---------------------------------------------------------------------------------- the build


@dataclass
class Build:
    out: Path  # the --path-output folder
    html: Path  # out/_build/html
    returncode: int
    log: str
    seconds: float


def _cache_key() -> str:
    digest = hashlib.sha256()
    files = (sorted((REPO / "attention_course").rglob("*.py")) + sorted((REPO / "book" / "figures").rglob("*.py"))
             + [REPO / "requirements.txt"])
    for path in files:
        if path.is_file():
            digest.update(str(path.relative_to(REPO)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _jupyter_book() -> str:
    exe = Path(sys.executable).with_name("jupyter-book")
    return str(exe) if exe.is_file() else (shutil.which("jupyter-book") or "jupyter-book")


def _run_build(out: Path) -> Build:
    cache_root = REPO / "_build" / ".test_book_cache"
    cache = cache_root / _cache_key()
    jcache = out / "_build" / ".jupyter_cache"
    if cache.is_dir() and not os.environ.get("BOOK_TEST_FRESH"):
        shutil.copytree(cache, jcache)
    cmd = [_jupyter_book(), "build", str(REPO), "--path-output", str(out), "-W", "--keep-going"]
    # the training runs two pages show are made once per build, kept in the build's own folder
    env = {**os.environ, "COURSE_BOOK_RUNS": str(out / "_build" / ".runs")}
    start = time.monotonic()
    proc = subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=3600, env=env
    )
    seconds = time.monotonic() - start
    if jcache.is_dir():  # keep the executed pages for the next run (only this key's)
        tmp = cache_root / f".{cache.name}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(jcache, tmp)
        for old in cache_root.iterdir():
            if old != tmp and not old.name.startswith("."):
                shutil.rmtree(old, ignore_errors=True)
        tmp.rename(cache)
    return Build(out, out / "_build" / "html", proc.returncode, proc.stdout + proc.stderr, seconds)


@pytest.fixture(scope="session")
def book(tmp_path_factory) -> Build:
    """The book, built once per test session (once for all pytest-xdist workers)."""
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    out = shared / "book"
    record = shared / "book.json"
    with FileLock(str(shared / "book.lock")):
        if record.is_file():
            data = json.loads(record.read_text())
            return Build(out, Path(data["html"]), data["returncode"], data["log"], data["seconds"])
        shutil.rmtree(out, ignore_errors=True)
        build = _run_build(out)
        record.write_text(json.dumps({
            "html": str(build.html), "returncode": build.returncode,
            "log": build.log, "seconds": build.seconds,
        }))
    print(f"\nbook built in {build.seconds:.0f} s into {build.html}")
    return build


@pytest.fixture(scope="session")
def html(book) -> Path:
    if not (book.html / "index.html").is_file():
        pytest.fail(f"the book was not built (exit status {book.returncode}):\n{book.log[-5000:]}")
    return book.html


def _html_files(html: Path) -> list[Path]:
    """The pages of the build (not the theme's template fragments in _static)."""
    return sorted(p for p in html.rglob("*.html") if p.relative_to(html).parts[0] not in ("_static", "_sources"))


def _soup(path: Path):
    from bs4 import BeautifulSoup

    return BeautifulSoup(path.read_text(errors="replace"), "html.parser")


@pytest.mark.slow
def test_book_builds_without_warnings(book):
    warnings = [
        line for line in book.log.splitlines()
        if re.search(r"\bWARNING\b|\bERROR\b|Traceback|Exception occurred", line)
        and "Kernel is running over TCP" not in line  # the kernel's own chatter, not Sphinx's
    ]
    assert book.returncode == 0 and not warnings, (
        f"`jupyter-book build . -W` failed (exit status {book.returncode}); warnings:\n"
        + "\n".join(warnings[:40]) + f"\n--- end of the log ---\n{book.log[-3000:]}"
    )


# ------------------------------------------------------------------------------ offline


#: URLs in JavaScript that name something but are never fetched (checked by the browser
#: test, which records every request): XML namespaces, licence headers, a console message,
#: and in MathJax's speech engine the CDN defaults that MathJax replaces with its own local
#: copy (``window.SREfeature``), plus fallbacks only Internet Explorer takes.
JS_URL_ALLOWED = (
    ("", "http://www.w3.org/"),
    ("_static/mathjax/", "http://exslt.org/"),  # an XSLT namespace
    ("", "https://www.w3.org/"),
    ("_static/mathjax/", "http://www.apache.org/licenses/"),
    ("_static/mathjax/", "https://www.mathjax.org"),
    ("_static/mathjax/", "https://github.com/mhchem/"),
    ("_static/mathjax/", "https://cdn.jsdelivr.net/npm/speech-rule-engine@"),
    ("_static/mathjax/", "https://cdn.jsdelivr.net/npm/sre-mathmaps-ie@"),
    ("_static/mathjax/", "https://cdn.jsdelivr.net/npm/wicked-good-xpath@"),
    ("_static/scripts/pydata-sphinx-theme.js", "https://pydata-sphinx-theme.readthedocs.io/"),
)
REMOTE_URL = re.compile(r"""(?:https?:)?//[A-Za-z0-9][A-Za-z0-9.-]*\.[A-Za-z]{2,}[^\s"'`)<>]*""")
LOADING_RELS = {
    "stylesheet", "preload", "modulepreload", "prefetch", "preconnect", "dns-prefetch",
    "icon", "shortcut", "apple-touch-icon", "manifest", "import",
}
CSS_REMOTE = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])\s*((?:https?:)?//[^'")\s]+)""", re.I)


def _is_remote(url: str | None) -> bool:
    url = (url or "").strip()
    return url.startswith("//") or bool(re.match(r"[a-z][a-z0-9+.-]*://", url, re.I)) and not url.startswith("file:")


def remote_loads_in_html(text: str) -> list[str]:
    """What an HTML page would fetch from another site when it loads."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(text, "html.parser")
    found = []
    for tag in soup.find_all(True):
        name = tag.name
        rel = {r.lower() for r in (tag.get("rel") or [])}
        if name == "link" and rel & LOADING_RELS and _is_remote(tag.get("href")):
            found.append(f"<link rel={' '.join(sorted(rel))} href={tag['href']}>")
        for attr in ("src", "data", "poster", "background"):
            if name != "a" and _is_remote(tag.get(attr)):
                found.append(f"<{name} {attr}={tag[attr]}>")
        for attr in ("srcset", "imagesrcset"):
            for part in (tag.get(attr) or "").split(","):
                if _is_remote(part.strip().split(" ")[0]):
                    found.append(f"<{name} {attr}={part.strip()}>")
        for match in CSS_REMOTE.finditer(tag.get("style") or ""):
            found.append(f"<{name} style=...{match.group(1)}>")
        if name == "style":
            found += [f"<style> {m.group(1)}" for m in CSS_REMOTE.finditer(tag.get_text())]
        if name == "script" and not tag.get("src"):
            body = re.sub(r"https?://www\.w3\.org/\S*", "", tag.get_text())
            found += [f"<script> naming {m.group(0)}" for m in REMOTE_URL.finditer(body)]
        if name == "meta" and (tag.get("http-equiv") or "").lower() == "refresh":
            if _is_remote((tag.get("content") or "").partition("url=")[2]):
                found.append(f"<meta refresh {tag['content']}>")
    return found


def _strip_js_comments(text: str) -> str:
    """Drop ``/* ... */`` comments and ``//`` comments that start a line or follow a
    blank (a URL's ``//`` follows a colon); imprecise in strings, which only hides URLs
    that the browser test would still catch."""
    text = re.sub(r"/\*[\s\S]*?\*/", " ", text)
    return re.sub(r"(^|[\s;{}])//[^\n]*", r"\1", text)


def remote_urls_in_js(text: str, relpath: str) -> list[str]:
    found = []
    text = _strip_js_comments(text)
    for match in REMOTE_URL.finditer(text):
        url = match.group(0)
        if url.startswith("//"):
            # "//" also starts JavaScript comments: only "//host.tld/" followed by a path counts.
            if not re.match(r"//[a-z0-9.-]+\.(com|net|org|io|dev|app|co|me|js)/", url, re.I):
                continue
        if any(relpath.startswith(prefix) and url.startswith(allowed)
               for prefix, allowed in JS_URL_ALLOWED):
            continue
        found.append(url)
    return found


@pytest.mark.slow
def test_no_page_loads_anything_remote(html):
    problems = []
    for path in sorted(html.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(html).as_posix()
        if path.suffix == ".html":
            problems += [f"{rel}: {p}" for p in remote_loads_in_html(path.read_text(errors="replace"))]
        elif path.suffix == ".css":
            problems += [f"{rel}: {m.group(1)}" for m in CSS_REMOTE.finditer(path.read_text(errors="replace"))]
        elif path.suffix in (".js", ".mjs"):
            problems += [f"{rel}: {u}" for u in remote_urls_in_js(path.read_text(errors="replace"), rel)]
    assert not problems, "the book must work offline; remote resources:\n" + "\n".join(problems[:50])


def test_remote_scanners_catch_what_they_should():
    page = """<html><head>
      <script src="https://unpkg.com/thebe@0.8.2/lib/index.js"></script>
      <link rel="stylesheet" href="//fonts.googleapis.com/css?family=Roboto">
      <link rel="preload" as="font" href="https://example.org/f.woff2">
      <script>const THEBE_JS_URL = "https://unpkg.com/thebe@0.8.2/lib/index.js"</script>
      <style>@import "https://example.org/a.css"; body {background: url(https://example.org/b.png)}</style>
      </head><body><img src="http://example.org/x.png">
      <a href="https://example.org/just-a-link">fine</a>
      <svg xmlns="http://www.w3.org/2000/svg"></svg>
      <link rel="next" href="https://example.org/next">
      </body></html>"""
    found = remote_loads_in_html(page)
    assert len(found) == 7, found
    assert not any("just-a-link" in f or "w3.org" in f or "/next" in f for f in found), found
    css = "a{background:url('https://cdn.example.com/x.png')} @import 'http://e.org/b.css';"
    assert len(CSS_REMOTE.findall(css)) == 2
    js = ('/*! see https://example.com/license */ var a="http://www.w3.org/2000/svg"; '
          '// https://example.com/doc\nfetch("https://cdn.example.com/x.js")')
    assert remote_urls_in_js(js, "_static/x.js") == ["https://cdn.example.com/x.js"]


# ------------------------------------------------------------------------- no solutions


BEGIN = re.compile(r"^\s*###\s*BEGIN (SOLUTION|HIDDEN TESTS)\b")
END = re.compile(r"^\s*###\s*END (SOLUTION|HIDDEN TESTS)\b")
MIN_CHARS = 12


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _notebook_text(path: Path) -> str:
    nb = json.loads(path.read_text())
    parts = []
    for cell in nb.get("cells", []):
        src = cell.get("source", "")
        parts.append("".join(src) if isinstance(src, list) else src)
        for output in cell.get("outputs", []) or []:
            text = output.get("text") or (output.get("data") or {}).get("text/plain") or ""
            parts.append("".join(text) if isinstance(text, list) else text)
    return "\n".join(parts)


def private_lines() -> dict[str, str]:
    """Lines of solution and hidden-test regions of ``solutions/*/*.ipynb`` that a
    learner must never see: ``{normalised line: where it comes from}``. Lines shorter
    than ``MIN_CHARS``, comments, and lines that a released notebook also shows
    (``return out``, a shared ``import``) are left out."""
    lines = {}
    # What any learner notebook shows is public (a shared idiom such as
    # `raise AssertionError(` may sit in one chapter's hidden tests and another's visible ones).
    public = "\n".join(_norm(_notebook_text(p)) for p in sorted((REPO / "notebooks").glob("*/*.ipynb")))
    for src in sorted((REPO / "solutions").glob("*/*.ipynb")):
        nb = json.loads(src.read_text())
        for cell in nb.get("cells", []):
            source = cell.get("source", "")
            source = "".join(source) if isinstance(source, list) else source
            inside = False
            for line in source.splitlines():
                if BEGIN.match(line):
                    inside = True
                    continue
                if END.match(line):
                    inside = False
                    continue
                norm = _norm(line)
                if inside and len(norm) >= MIN_CHARS and norm not in public and not norm.startswith("#"):
                    grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "?")
                    lines.setdefault(norm, f"{src.relative_to(REPO)} cell {grade_id}")
    return lines


def _texts_of(path: Path) -> list[str]:
    """The ways a line of code can appear in a built file, whitespace-normalised."""
    raw = path.read_text(errors="replace")
    texts = [_norm(raw)]
    if path.suffix == ".html":
        from bs4 import BeautifulSoup

        texts.append(_norm(BeautifulSoup(raw, "html.parser").get_text("")))
    elif path.suffix == ".ipynb":
        try:
            texts.append(_norm(_notebook_text(path)))
        except (json.JSONDecodeError, AttributeError):
            pass
    else:
        texts.append(_norm(html_lib.unescape(raw)))
    return texts


def leaks(root: Path, lines: dict[str, str]) -> list[str]:
    found = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if not path.is_file() or path.suffix not in TEXT_SUFFIXES or rel.startswith("_static/mathjax/"):
            continue
        texts = _texts_of(path)
        for line, origin in lines.items():
            if any(line in text for text in texts):
                found.append(f"{rel} shows {line!r} (from {origin})")
    return found


def test_leak_scanner_sees_through_highlighted_code(tmp_path):
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    secret = "weights = np.exp(scores - scores.max(axis=-1, keepdims=True))"
    (tmp_path / "page.html").write_text(
        "<html><body>" + highlight("def f(scores):\n    " + secret + "\n", PythonLexer(), HtmlFormatter())
        + "</body></html>"
    )
    (tmp_path / "nb.ipynb").write_text(json.dumps(
        {"cells": [{"cell_type": "code", "source": ["x = 1\n", "    " + secret.replace(" ", "  ") + "\n"],
                    "metadata": {}, "outputs": []}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    ))
    (tmp_path / "clean.html").write_text("<p>weights are computed</p>")
    found = leaks(tmp_path, {_norm(secret): "test"})
    assert [f.split(" ")[0] for f in found] == ["nb.ipynb", "page.html"], found


@pytest.mark.slow
def test_no_solution_or_hidden_test_reaches_the_book(html):
    lines = private_lines()
    assert lines, "found no solution/hidden-test lines in solutions/*/*.ipynb: the check would be empty"
    found = leaks(html, lines)
    assert not found, "solution or hidden-test text in _build/html:\n" + "\n".join(found[:40])


@pytest.mark.slow
def test_private_folders_and_sources_stay_out(html):
    for path in html.rglob("*"):
        parts = path.relative_to(html).parts
        for name in PRIVATE:
            assert name not in parts, f"{path.relative_to(html)}: {name}/ must not reach the book"
    # _sources holds exactly the pages of _toc.yml (their download files), nothing else.
    sources = html / "_sources"
    copied = sorted(p.relative_to(sources).as_posix() for p in sources.rglob("*") if p.is_file())
    expected = sorted(source_of(doc).relative_to(REPO).as_posix() for doc in page_docs())
    assert copied == expected, f"_build/html/_sources holds {copied}, expected {expected}"
    for doc in exercise_docs():
        notebook = source_of(doc)
        assert (sources / notebook.relative_to(REPO)).read_bytes() == notebook.read_bytes(), (
            f"the download of {doc} differs from {notebook.relative_to(REPO)}"
        )


# ---------------------------------------------------------------------------- pages


def _local_target(page: Path, url: str, html: Path) -> Path | None:
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or not parts.path:
        return None
    target = (page.parent / unquote(parts.path)).resolve()
    return target / "index.html" if target.is_dir() else target


@pytest.mark.slow
@pytest.mark.parametrize("doc", chapter_docs())
def test_chapter_page_exists_with_figures(html, doc):
    page = html / f"{doc}.html"
    assert page.is_file(), f"no page for chapter {doc}"
    soup = _soup(page)
    article = soup.select_one("article") or soup
    assert len(_norm(article.get_text(" "))) > 500, f"{doc}: the page is nearly empty"
    images = [img for img in article.find_all("img") if "logo" not in " ".join(img.get("class", []))]
    assert images, f"{doc}: no figure (figures are made by code when the book is built)"


@pytest.mark.slow
def test_every_image_is_a_real_local_picture(html):
    from PIL import Image, ImageStat

    checked = 0
    for page in _html_files(html):
        for img in _soup(page).find_all("img"):
            src = img.get("src", "")
            if src.startswith("data:"):
                continue
            target = _local_target(page, src, html)
            rel = page.relative_to(html)
            assert target is not None, f"{rel}: image {src} is not part of the book"
            assert target.is_file() and target.stat().st_size > 0, f"{rel}: image {src} is missing or empty"
            if target.suffix.lower() in (".png", ".jpg", ".jpeg", ".gif", ".webp"):
                with Image.open(target) as im:
                    im.load()
                    stat = ImageStat.Stat(im.convert("L"))
                    assert im.width > 10 and im.height > 10, f"{rel}: {src} is {im.size}"
                    assert stat.stddev[0] > 1, f"{rel}: {src} is a blank picture"
            checked += 1
    assert checked or not chapter_docs(), "no image in the whole book"


@pytest.mark.slow
def test_local_links_and_assets_resolve(html):
    broken = []
    for page in _html_files(html):
        soup = _soup(page)
        for tag, attr in (("a", "href"), ("link", "href"), ("script", "src"), ("img", "src")):
            for el in soup.find_all(tag):
                url = el.get(attr)
                if not url or url.startswith(("#", "mailto:", "javascript:", "data:")):
                    continue
                target = _local_target(page, url, html)
                if target is not None and not target.exists():
                    broken.append(f"{page.relative_to(html)}: <{tag} {attr}={url}>")
    assert not broken, "links to files the build lacks:\n" + "\n".join(broken[:40])


@pytest.mark.slow
@pytest.mark.parametrize("doc", exercise_docs())
def test_exercise_page_offers_the_notebook_unexecuted(html, doc):
    page = html / f"{doc}.html"
    assert page.is_file(), f"no page for exercise notebook {doc}"
    soup = _soup(page)
    wanted = (html / "_sources" / f"{doc}.ipynb").resolve()
    downloads = [
        a for a in soup.find_all("a")
        if a.get("href", "").endswith(".ipynb") and _local_target(page, a["href"], html) == wanted
    ]
    assert downloads, f"{doc}: no download link to _sources/{doc}.ipynb"
    assert wanted.read_bytes() == source_of(doc).read_bytes()
    # Shown as released: no outputs, no error from running the stubs.
    assert not soup.select(".cell_output"), f"{doc}: the exercise notebook was executed"
    assert "NotImplementedError" not in " ".join(o.get_text() for o in soup.select(".output"))
    # The chapter page is followed by its exercises in the navigation.
    chapter = next(_doc(c) for c in toc_chapters()
                   if doc in [_doc(s) for s in c.get("sections", []) or []])
    chapter_soup = _soup(html / f"{chapter}.html")
    hrefs = [a.get("href", "") for a in chapter_soup.select("a")]
    assert any(h.split("#")[0].endswith(PurePosixPath(doc).name + ".html") for h in hrefs), (
        f"{chapter}: no link to its exercise page {doc}"
    )


# --------------------------------------------------------------------------- in a browser


UNRENDERED_TEX = re.compile(
    r"\$\$|\\\(|\\\)|\\\[|\\\]|\$[^\s$][^$\n]{0,200}?\$"
    r"|\\(?:frac|sqrt|sum|mathbf|mathrm|top|alpha|exp|left|right|begin|text)\b"
)


def visible_text_outside_code(soup) -> str:
    for tag in soup.select("script, style, pre, code, textarea, mjx-container, .highlight, noscript, svg"):
        tag.decompose()
    main = soup.select_one("article") or soup.body or soup
    return main.get_text(" ")


def _require_chromium() -> None:
    """Skip without Chromium, or fail when the run demands a browser (``make test`` sets
    BOOK_REQUIRE_BROWSER)."""
    if browser.find_chromium() is None:
        message = f"Chromium not found; install it: {browser.INSTALL_HINT}"
        if os.environ.get("BOOK_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def visits(html, book) -> dict:
    _require_chromium()
    shots = book.out / "screenshots"
    result = {}
    with browser.serve(html) as base:
        for doc in page_docs():
            png = shots / (doc.replace("/", "__") + ".png")
            result[doc] = browser.visit(f"{base}/{doc}.html", screenshot=png)
    print(f"\nscreenshots of the book: {shots}")
    return result


@pytest.mark.slow
@pytest.mark.parametrize("doc", page_docs())
def test_page_renders_offline_in_a_browser(visits, html, doc):
    from bs4 import BeautifulSoup
    from PIL import Image

    visit = visits[doc]
    # 1. nothing but the loopback server was asked for anything
    assert not visit.remote_requests(), f"{doc} requested {visit.remote_requests()}"
    # 2. the screenshot is a page, not a blank or an error screen
    with Image.open(visit.screenshot) as im:
        grey = im.convert("L")
        hist = grey.histogram()
        background = max(hist) / sum(hist)
        dark = sum(hist[:100]) / sum(hist)
    assert background < 0.97 and dark > 0.003, (
        f"{doc}: the screenshot {visit.screenshot} looks blank "
        f"({background:.1%} background, {dark:.2%} dark pixels)"
    )
    # 3. MathJax ran: every math element became an mjx-container, no TeX error, no raw TeX
    dom = BeautifulSoup(visit.dom, "html.parser")
    assert dom.select("nav.bd-docs-nav a"), f"{doc}: no navigation sidebar"
    static_math = _soup(html / f"{doc}.html").select(".math")
    math = dom.select(".math")
    assert len(math) == len(static_math), f"{doc}: {len(static_math)} math elements built, {len(math)} in the browser"
    unrendered = [m.get_text()[:80] for m in math if not m.find("mjx-container")]
    assert not unrendered, f"{doc}: math left as TeX: {unrendered[:5]}"
    errors = dom.select("mjx-merror, [data-mjx-error]")
    assert not errors, f"{doc}: TeX errors: {[e.get('data-mjx-error') or e.get_text()[:80] for e in errors[:5]]}"
    text = visible_text_outside_code(dom)
    raw = sorted({m.group(0) for m in UNRENDERED_TEX.finditer(text)})
    assert not raw, f"{doc}: raw TeX in the rendered page: {raw[:10]}"
    # 4. an exercise page's download button saves the notebook (book/_static/exercise-download.js)
    if doc in exercise_docs():
        links = dom.select("a.btn-download-source-button[download]")
        assert [a["download"] for a in links] == [PurePosixPath(doc).name + ".ipynb"], (
            f"{doc}: the download button does not save the notebook"
        )
    # 5. every picture of the page was fetched from the book
    for img in dom.select("article img"):
        src = img.get("src", "")
        if not src.startswith("data:"):
            name = PurePosixPath(urlsplit(src).path).name
            assert any(PurePosixPath(urlsplit(u).path).name == name for u in visit.requests), (
                f"{doc}: the browser did not load {src}"
            )


# ------------------------------------------------------------------- the architecture pictures

DIAGRAM_CLASS = re.compile(r"\bdiagram-(draw-[a-z-]+)")
#: the smallest text of a picture, on the screen, as a share of the body text's size
MIN_TEXT_SHARE = 0.70

# A page at the size of the other browser tests, in a same-origin frame, so that a script can
# measure what the browser laid out: each picture's displayed width and the body font size.
PROBE = """<!doctype html><html><head><meta charset="utf-8"></head><body>
<iframe id="page" src="site/{doc}.html" style="width:{width}px;height:2000px;border:0"></iframe>
<pre id="result">not measured</pre>
<script>
document.getElementById("page").addEventListener("load", () => {{
  const doc = document.getElementById("page").contentDocument;
  const body = doc.querySelector("article p") || doc.body;
  const images = [...doc.querySelectorAll("img.course-diagram")].map(img => ({{
    classes: img.className, alt: img.getAttribute("alt") || "", src: img.getAttribute("src"),
    width: img.getBoundingClientRect().width, natural: img.naturalWidth}}));
  document.getElementById("result").textContent = JSON.stringify({{
    body_px: parseFloat(doc.defaultView.getComputedStyle(body).fontSize), images}});
}});
</script></body></html>"""


def diagram_docs() -> dict[str, list[str]]:
    """The chapter pages that draw pictures of ``book/figures/diagrams.py``, and the names of
    the functions that draw them. A page marks a picture with the class ``diagram-draw-<name>``
    (docutils turns the ``_`` of a class into ``-``, so the function ``draw_<name>`` is spelt so)."""
    found = {}
    for doc in chapter_docs():
        names = [n.replace("-", "_") for n in DIAGRAM_CLASS.findall(source_of(doc).read_text())]
        if names:
            found[doc] = names
    return found


def picture_text(name: str, doc: str | None = None) -> tuple[float, bool]:
    """The smallest font, in points, of the picture that ``diagrams.<name>()`` draws (or, when
    ``diagrams`` has no such function, the figure module of chapter page ``doc``,
    ``figures.chNN``, drawn with the same kit), and whether it writes tensor shapes such as
    ``(B, S, D)``."""
    import importlib

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sys.path.insert(0, str(REPO / "book"))
    try:
        from figures import diagrams

        module = diagrams
        if not hasattr(diagrams, name) and doc is not None:
            module = importlib.import_module(f"figures.{PurePosixPath(doc).name.split('_')[0]}")
    finally:
        sys.path.remove(str(REPO / "book"))
    fig = getattr(module, name)()
    try:
        from matplotlib.text import Text

        shapes = any("(B," in t.get_text() for t in fig.findobj(Text))
        return diagrams.smallest_text(fig), shapes
    finally:
        plt.close(fig)


def test_the_chapters_draw_the_architecture_pictures():
    drawn = {name for names in diagram_docs().values() for name in names}
    wanted = {"draw_bahdanau", "draw_multihead", "draw_encoder", "draw_transformer", "draw_teacher_forcing",
              "draw_decoder_only", "draw_kv_cache", "draw_tiled_loop", "draw_grouped_heads"}
    assert wanted <= drawn, f"pictures no chapter page draws: {sorted(wanted - drawn)}"


@pytest.fixture(scope="session")
def diagram_measures(html, tmp_path_factory) -> dict:
    _require_chromium()
    from bs4 import BeautifulSoup

    root = tmp_path_factory.mktemp("probe")
    (root / "site").symlink_to(html, target_is_directory=True)
    measures = {}
    with browser.serve(root) as base:
        for doc in diagram_docs():
            probe = root / (doc.replace("/", "__") + ".html")
            probe.write_text(PROBE.format(doc=doc, width=1280))
            visit = browser.visit(f"{base}/{probe.name}", width=1400, height=2200)
            result = BeautifulSoup(visit.dom, "html.parser").select_one("#result").get_text()
            assert result != "not measured", f"{doc}: the page did not load in the probe frame"
            measures[doc] = json.loads(result)
            for img in measures[doc]["images"]:
                img["file"] = str(_local_target(html / f"{doc}.html", img["src"], html))
    return measures


@pytest.mark.slow
@pytest.mark.parametrize("doc", sorted(diagram_docs()))
def test_architecture_pictures_are_readable_and_described(diagram_measures, doc):
    measured = diagram_measures[doc]
    body = measured["body_px"]
    assert 10 <= body <= 30, f"{doc}: body text measured at {body}px"
    for name in diagram_docs()[doc]:
        css = "diagram-" + name.replace("_", "-")
        images = [img for img in measured["images"] if css in img["classes"].split()]
        assert len(images) == 1, f"{doc}: {len(images)} pictures with the class {css}"
        img = images[0]
        assert img["natural"] > 0 and img["width"] > 0, f"{doc}: {name} did not load"
        smallest_pt, shapes = picture_text(name, doc)
        alt = img["alt"]
        assert len(alt) >= 150, f"{doc}: {name}'s alt text must describe the picture, got {alt!r}"
        assert "(B," in alt or not shapes, f"{doc}: {name} shows tensor shapes, its alt text none: {alt!r}"
        # The PNG records its resolution: a point is dpi / 72 of its pixels, and the browser
        # shows each of its pixels width / natural screen pixels wide.
        from PIL import Image

        with Image.open(img["file"]) as png:
            dpi = png.info["dpi"][0]
        text_px = smallest_pt / 72 * dpi * img["width"] / img["natural"]
        assert text_px >= MIN_TEXT_SHARE * body, (
            f"{doc}: {name} is shown {img['width']:.0f}px wide, so its smallest text is "
            f"{text_px:.1f}px, under {MIN_TEXT_SHARE:.0%} of the body text's {body:.1f}px"
        )


# ------------------------------------------------------------------ launch buttons


#: A course with a public home, as a maintainer would fill in _config.yml.
HOME = {
    "repository": "https://github.com/example-org/attention-course",
    "branch": "main",
    "jupyterhub": "https://hub.example.edu",
    "book": "https://example-org.github.io/attention-course/",
}


def _launch_buttons(soup) -> dict[str, str]:
    """``{"Colab": url, "Binder": url, "JupyterHub": url}`` of a page's launch menu."""
    menu = soup.select_one(".dropdown-launch-buttons")
    if menu is None:
        return {}
    return {a.get_text(" ", strip=True): a["href"] for a in menu.select("a[href]")}


@pytest.fixture(scope="module")
def launch_book(tmp_path_factory) -> Path:
    """The book's exercise pages (and chapter 1's page, unexecuted) built with ``HOME`` in a
    copy of _config.yml: a second, small build (``--config``/``--toc`` of temporary files)."""
    out = tmp_path_factory.mktemp("launch_book")
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    config["repository"]["url"] = HOME["repository"]
    config["repository"]["branch"] = HOME["branch"]
    config["launch_buttons"]["jupyterhub_url"] = HOME["jupyterhub"]
    config["html"]["baseurl"] = HOME["book"]
    config["execute"]["execute_notebooks"] = "off"
    # local extension paths are read relative to the config file
    config["sphinx"]["local_extensions"] = {
        name: str(REPO / path) for name, path in config["sphinx"]["local_extensions"].items()
    }
    (out / "_config.yml").write_text(yaml.safe_dump(config))
    first = chapter_docs()[0]
    (out / "_toc.yml").write_text(yaml.safe_dump({
        "format": "jb-book", "root": first, "chapters": [{"file": doc} for doc in exercise_docs()],
    }))
    build = out / "build"
    proc = subprocess.run(
        [_jupyter_book(), "build", str(REPO), "--config", str(out / "_config.yml"),
         "--toc", str(out / "_toc.yml"), "--path-output", str(build)],
        cwd=REPO, capture_output=True, text=True, timeout=1800,
    )
    html = build / "_build" / "html"
    assert proc.returncode == 0 and (html / "index.html").is_file(), (proc.stdout + proc.stderr)[-5000:]
    return html


@pytest.mark.slow
def test_launch_buttons_open_each_exercise_notebook(launch_book):
    org_repo = HOME["repository"].removeprefix("https://github.com/")
    for doc in exercise_docs():
        buttons = _launch_buttons(_soup(launch_book / f"{doc}.html"))
        assert sorted(buttons) == ["Binder", "Colab", "JupyterHub"], f"{doc}: launch buttons {buttons}"
        notebook = f"{doc}.ipynb"
        assert buttons["Colab"] == f"https://colab.research.google.com/github/{org_repo}/blob/{HOME['branch']}/{notebook}"
        assert buttons["Binder"] == (
            f"https://mybinder.org/v2/gh/{org_repo}/{HOME['branch']}?urlpath=lab/tree/{notebook}"
        )
        hub = urlsplit(buttons["JupyterHub"])
        assert f"{hub.scheme}://{hub.netloc}{hub.path}" == f"{HOME['jupyterhub']}/hub/user-redirect/git-pull"
        query = dict(p.split("=", 1) for p in hub.query.split("&"))
        assert unquote(query["repo"]) == HOME["repository"] and query["branch"] == HOME["branch"]
        assert unquote(query["urlpath"]) == f"lab/tree/{org_repo.split('/')[1]}/{notebook}"
        # the repository holds the file each link opens
        assert (REPO / notebook).is_file()
        # links to other sites, never loads from them: the page stays offline
        assert not remote_loads_in_html((launch_book / f"{doc}.html").read_text()), doc
    # a chapter page is markdown, which Colab cannot open: no launch buttons there
    assert _launch_buttons(_soup(launch_book / f"{chapter_docs()[0]}.html")) == {}


@pytest.mark.slow
def test_exercise_page_offers_the_chapters_package(launch_book):
    from courseware import learner_package

    for doc in exercise_docs():
        page = launch_book / f"{doc}.html"
        assignment = PurePosixPath(doc).parts[1]
        links = [a["href"] for a in _soup(page).select("a.btn-download-wheel-button")]
        assert len(links) == 1, f"{doc}: wheel download links {links}"
        target = _local_target(page, links[0], launch_book)
        assert target is not None and target.name == learner_package.wheel_name(assignment) and target.is_file(), (
            f"{doc}: the wheel link {links[0]} leads nowhere"
        )


@pytest.mark.slow
def test_no_launch_buttons_without_a_public_home(html):
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    if config["repository"]["url"]:
        pytest.skip("_config.yml names a public repository")
    for doc in exercise_docs():
        assert _launch_buttons(_soup(html / f"{doc}.html")) == {}, f"{doc} has launch buttons but no home"
