"""The book: it builds without warnings, works offline, shows no solution, and renders, in
English and in Chinese (its ``zh/`` edition, :mod:`courseware.book`).

The slow tests share one build of the book (``jupyter-book build <repo> --path-output
<tmp> -W --keep-going``, then ``python -m courseware book-zh --path-output <tmp> -W
--keep-going``, as ``make book``) into a fresh temporary folder, so the HTML they check is
never stale. Only the *execution* of the chapter pages is reused between runs: the Jupyter
cache is kept in ``_build/.test_book_cache/<key>/``, where the key hashes the course
package (``attention_course/``) and ``requirements.txt``, so a change there re-executes
every page (the cache itself notices edits of the pages). ``BOOK_TEST_FRESH=1`` ignores
the cache. Under pytest-xdist the workers share that one build (a file lock).

The browser tests need Debian's ``chromium`` and a CJK font
(``make system`` installs both); without Chromium they are skipped,
or fail if ``BOOK_REQUIRE_BROWSER=1`` (for CI).
Their screenshots are kept in ``<build folder>/screenshots/`` (the path is printed).
"""

from __future__ import annotations

import hashlib
import html as html_lib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

import pytest
import yaml

import a11y
import browser

# one worker runs them all: the build, the browser visits and the diagrams are fixtures built once
pytestmark = pytest.mark.xdist_group("book")

REPO = Path(__file__).resolve().parent.parent
BOOK_EXT = str(REPO / "book" / "_ext")  # the book's extensions, imported by the tests of what they make
if BOOK_EXT not in sys.path:
    sys.path.insert(0, BOOK_EXT)
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


#: the Chinese edition's folder inside the English one (courseware.book.EDITIONS)
ZH = "zh"


def zh_docs() -> list[str]:
    """The Chinese edition's pages: ``zh/<doc>`` for each page of ``_toc.yml``."""
    return [f"{ZH}/{doc}" for doc in page_docs()]


def english_doc(doc: str) -> str:
    return doc.removeprefix(f"{ZH}/")


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


# A paragraph about how the book was made (the build machine, the training budget, the clock it
# was read with) is for the curious, not for the lesson: it sits in a `{dropdown}` (a <details>
# with its title as <summary>, keyboard-operable), so the explanation reads straight.
ENGINEERING_ASIDE = re.compile(r"build machine|make train-budget|process_time", re.IGNORECASE)


def asides_outside_a_dropdown(text: str) -> list[str]:
    """``"line N: ..."`` for every prose line of a MyST page that mentions ``ENGINEERING_ASIDE``
    outside a ``{dropdown}`` (code fences skipped), and for every dropdown without a title."""
    found, fences, code = [], [], None  # fences: (colons, directive) of the open colon fences
    for number, line in enumerate(text.splitlines(), 1):
        if code:
            if re.fullmatch(rf"{code}`*\s*", line):
                code = None
            continue
        if m := re.match(r"(`{3,})", line):
            code = m.group(1)
            continue
        if m := re.match(r"(:{3,})\{([\w-]+)\}(.*)", line):
            fences.append((len(m.group(1)), m.group(2)))
            if m.group(2) == "dropdown" and not m.group(3).strip():
                found.append(f"line {number}: a dropdown without a title")
            continue
        if fences and re.fullmatch(r":{3,}\s*", line) and len(line.strip()) >= fences[-1][0]:
            fences.pop()
            continue
        if ENGINEERING_ASIDE.search(line) and not any(d == "dropdown" for _, d in fences):
            found.append(f"line {number}: {line.strip()}")
    return found


def test_build_and_budget_asides_are_folded_away():
    for doc in ["book/intro", *chapter_docs()]:
        left = asides_outside_a_dropdown(source_of(doc).read_text())
        assert not left, (
            f"{doc}.md: a paragraph about the build machine or the training budget stands in the "
            "lesson; put it in a titled `::::{dropdown}` (see chapter 3):\n" + "\n".join(left)
        )
    sample = ("Text.\n\n::::{dropdown} How\nOn the build machine.\n::::\n\n"
              "```{code-cell} ipython3\nt = time.process_time()\n```\n")
    assert asides_outside_a_dropdown(sample) == []
    assert asides_outside_a_dropdown(sample + "\nTimed with `time.process_time`.\n") == [
        "line 11: Timed with `time.process_time`."]
    assert asides_outside_a_dropdown(":::{note}\n`make train-budget` ran.\n:::\n") == [
        "line 2: `make train-budget` ran."]
    assert asides_outside_a_dropdown("::::{dropdown}\nx\n::::\n") == ["line 1: a dropdown without a title"]


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


def test_a_translated_edition_refuses_to_execute_a_page(tmp_path):
    """While the Chinese edition builds (courseware.book.execute_nothing), a page whose executed
    copy the jupyter-cache lacks stops the build, naming it, instead of being executed."""
    import logging

    import nbformat
    from myst_nb.core.config import NbParserConfig
    from myst_nb.core.execute.cache import NotebookClientCache

    from courseware import book as editions

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("raise SystemExit('executed')")])
    page = tmp_path / "page.ipynb"
    nbformat.write(notebook, page)
    config = NbParserConfig(execution_mode="cache", execution_cache_path=str(tmp_path / "cache"))
    original = NotebookClientCache.start_client
    with editions.execute_nothing():
        client = NotebookClientCache(notebook, page, config, logging.getLogger("test"))
        with pytest.raises(editions.ExecutionRefused, match="page.ipynb: its executed copy is not in"):
            client.start_client()
    assert NotebookClientCache.start_client is original


# ---------------------------------------------------------------------------------- the build


@dataclass
class Build:
    out: Path  # the --path-output folder
    html: Path  # out/_build/html (the Chinese edition in its zh/)
    returncode: int
    log: str
    seconds: float
    zh_returncode: int = -1
    zh_log: str = ""
    zh_seconds: float = 0.0
    zh_cpu_seconds: float = 0.0
    #: the jupyter-cache's records (id, hash, time of execution) after the English build, and after the Chinese one
    cache_before: list = None
    cache_after: list = None


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


def cache_records(jcache: Path) -> list:
    """``[id, hash of the notebook's code, when it was executed]`` of each executed page."""
    from jupyter_cache import get_cache

    if not jcache.is_dir():
        return []
    return sorted([r.pk, r.hashkey, r.created.isoformat()] for r in get_cache(str(jcache)).list_cache_records())


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
    before = cache_records(jcache)
    zh_cmd = [sys.executable, "-m", "courseware", "book-zh", "--path-output", str(out), "-W", "--keep-going"]
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    zh = subprocess.run(zh_cmd, cwd=REPO, capture_output=True, text=True, timeout=3600)
    zh_seconds = time.monotonic() - start
    after_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    zh_cpu = after_cpu.ru_utime + after_cpu.ru_stime - cpu.ru_utime - cpu.ru_stime
    if jcache.is_dir():  # keep the executed pages for the next run (only this key's)
        tmp = cache_root / f".{cache.name}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(jcache, tmp)
        for old in cache_root.iterdir():
            if old != tmp and not old.name.startswith("."):
                shutil.rmtree(old, ignore_errors=True)
        tmp.rename(cache)
    return Build(out, out / "_build" / "html", proc.returncode, proc.stdout + proc.stderr, seconds,
                 zh.returncode, zh.stdout + zh.stderr, zh_seconds, zh_cpu, before, cache_records(jcache))


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
            return Build(out, **{**data, "html": Path(data["html"])})
        shutil.rmtree(out, ignore_errors=True)
        build = _run_build(out)
        record.write_text(json.dumps({k: str(v) if isinstance(v, Path) else v
                                      for k, v in vars(build).items() if k != "out"}))
    print(f"\nbook built in {build.seconds:.0f} s into {build.html}; its Chinese edition in "
          f"{build.zh_seconds:.0f} s ({build.zh_cpu_seconds:.0f} CPU seconds)")
    return build


@pytest.fixture(scope="session")
def html(book) -> Path:
    if not (book.html / "index.html").is_file():
        pytest.fail(f"the book was not built (exit status {book.returncode}):\n{book.log[-5000:]}")
    return book.html


def _html_files(html: Path) -> list[Path]:
    """The pages of the build, both editions (not the theme's template fragments in _static)."""
    return sorted(p for p in html.rglob("*.html") if not {"_static", "_sources"} & set(p.relative_to(html).parts))


START_TAG = re.compile(r"<([a-zA-Z][\w-]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>")
ATTRIBUTE = re.compile(r"([^\s=/>\"']+)(?:\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s>\"']+)))?")
SCRIPT_OR_COMMENT = re.compile(r"(<script\b[^>]*>).*?(</script>)|<!--.*?-->", re.S | re.I)


def start_tags(path: Path, names: set[str]) -> list[tuple[str, dict[str, str]]]:
    """``(name, attributes)`` of the page's start tags named ``names``, in order (script bodies
    and comments skipped): what these checks need of a page, many times faster than parsing it."""
    raw = SCRIPT_OR_COMMENT.sub(lambda m: (m.group(1) or "") + (m.group(2) or ""), path.read_text(errors="replace"))
    found = []
    for match in START_TAG.finditer(raw):
        if match.group(1).lower() in names:
            attrs = {a.group(1).lower(): html_lib.unescape(next((v for v in a.groups()[1:] if v is not None), ""))
                     for a in ATTRIBUTE.finditer(match.group(2))}
            found.append((match.group(1).lower(), attrs))
    return found


def _soup(path: Path):
    from bs4 import BeautifulSoup

    return BeautifulSoup(path.read_text(errors="replace"), "html.parser")


def _warnings(log: str) -> list[str]:
    return [
        line for line in log.splitlines()
        if re.search(r"\bWARNING\b|\bERROR\b|Traceback|Exception occurred", line)
        and "Kernel is running over TCP" not in line  # the kernel's own chatter, not Sphinx's
    ]


@pytest.mark.slow
def test_book_builds_without_warnings(book):
    warnings = _warnings(book.log)
    assert book.returncode == 0 and not warnings, (
        f"`jupyter-book build . -W` failed (exit status {book.returncode}); warnings:\n"
        + "\n".join(warnings[:40]) + f"\n--- end of the log ---\n{book.log[-3000:]}"
    )


@pytest.mark.slow
def test_chinese_book_builds_without_warnings(book):
    warnings = _warnings(book.zh_log)
    assert book.zh_returncode == 0 and not warnings, (
        f"`python -m courseware book-zh` (-W) failed (exit status {book.zh_returncode}); warnings:\n"
        + "\n".join(warnings[:40]) + f"\n--- end of the log ---\n{book.zh_log[-3000:]}"
    )


@pytest.mark.slow
def test_chinese_build_executes_nothing(book):
    """Every page the English build executed (or found in its cache), the Chinese build takes
    from the cache as it is: myst-nb says so for each, executes none, and the cache holds the
    same records, executed at the same times, as after the English build."""
    english = re.findall(r"Executing notebook|Using cached notebook", book.log)
    assert english, "the English build executed no page: nothing to reuse"
    assert "Executing notebook" not in book.zh_log and "Executed notebook" not in book.zh_log, (
        "the Chinese build executed a page:\n" + book.zh_log[-3000:]
    )
    reused = book.zh_log.count("Using cached notebook")
    assert reused == len(english), (
        f"the English build ran {len(english)} pages' code, the Chinese build took {reused} from the cache"
    )
    assert book.cache_before and book.cache_after == book.cache_before, (
        f"the Chinese build changed the jupyter-cache: {book.cache_before} -> {book.cache_after}"
    )


# ------------------------------------------------------------------------------ offline


#: URLs in JavaScript that name something but are never fetched (checked by the browser
#: test, which records every request): XML namespaces, licence headers, a console message,
#: in MathJax's speech engine the CDN defaults that MathJax replaces with its own local
#: copy (``window.SREfeature``), plus fallbacks only Internet Explorer takes, and the link in
#: Sphinx's translated footer ("由 Sphinx 创建"). Paths are those of either edition's root.
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
    ("_static/translations.js", "https://www.sphinx-doc.org/"),
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
        in_edition = relpath.removeprefix(f"{ZH}/")
        if any(in_edition.startswith(prefix) and url.startswith(allowed)
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


TAG = re.compile(r"<[^>]*>")


def _texts_of(path: Path) -> list[str]:
    """The ways a line of code can appear in a built file, whitespace-normalised."""
    raw = path.read_text(errors="replace")
    texts = [_norm(raw)]
    if path.suffix == ".html":
        # the page's text: every tag dropped (highlighted code is a tag per token), entities
        # decoded; scripts' text stays in, which can only show more
        texts.append(_norm(html_lib.unescape(TAG.sub("", raw))))
    elif path.suffix == ".ipynb":
        try:
            texts.append(_norm(_notebook_text(path)))
        except (json.JSONDecodeError, AttributeError):
            pass
    else:
        texts.append(_norm(html_lib.unescape(raw)))
    return texts


WORD = re.compile(r"\w+")


def leaks(root: Path, lines: dict[str, str]) -> list[str]:
    found = []
    # A text holding a line holds the words inside it (its first and last may be glued to what
    # precedes or follows it): a set lookup rules most texts out before the slow substring search.
    inner = {line: set(WORD.findall(line)[1:-1]) for line in lines}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if not path.is_file() or path.suffix not in TEXT_SUFFIXES or "_static/mathjax/" in rel:
            continue
        texts = [(text, set(WORD.findall(text))) for text in _texts_of(path)]
        for line, origin in lines.items():
            if any(inner[line] <= words and line in text for text, words in texts):
                found.append(f"{rel} shows {line!r} (from {origin})")
    return found


def test_a_network_log_cut_short_is_still_read():
    whole = '{"constants": {"a": 1},\n"events": [\n{"type": 1, "params": {"url": "u1"}},\n{"type": 1, "params": {"url": "u2"}}\n]}'
    assert [e["params"]["url"] for e in browser._read_netlog(whole)["events"]] == ["u1", "u2"]
    cut_after = whole[:whole.index("{\"type\": 1, \"params\": {\"url\": \"u2")]
    cut_inside = whole[:whole.index("u2")]
    for text in (cut_after, cut_inside):  # Chromium stopped after an event, or in the middle of one
        assert [e["params"]["url"] for e in browser._read_netlog(text)["events"]] == ["u1"]
    with pytest.raises(ValueError, match="cannot be read"):
        browser._read_netlog('{"constants": {"a"')


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
    # the Chinese edition's _sources: the same files, the exercise pages' Chinese notebooks
    zh_sources = html / ZH / "_sources"
    copied = sorted(p.relative_to(zh_sources).as_posix() for p in zh_sources.rglob("*") if p.is_file())
    assert copied == expected, f"_build/html/zh/_sources holds {copied}, expected {expected}"


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
        for _, img in start_tags(page, {"img"}):
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
    attribute = {"a": "href", "link": "href", "script": "src", "img": "src"}
    for page in _html_files(html):
        for tag, attrs in start_tags(page, set(attribute)):
            url = attrs.get(attribute[tag])
            if not url or url.startswith(("#", "mailto:", "javascript:", "data:")):
                continue
            target = _local_target(page, url, html)
            if target is not None and not target.exists():
                broken.append(f"{page.relative_to(html)}: <{tag} {attribute[tag]}={url}>")
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


# ------------------------------------------------------------------------- the Chinese edition


def _lang(page: Path) -> str | None:
    """The ``lang`` of a page's ``<html>`` element."""
    found = re.search(r"<html\b[^>]*\slang=\"([^\"]*)\"", page.read_text(errors="replace"))
    return found.group(1) if found else None


def _switches(page: Path) -> list:
    """The language switches of a page (only they are parsed: a whole page is slow to parse)."""
    from bs4 import BeautifulSoup

    tags = re.findall(r"<a\b[^>]*\bbtn-language-switch\b[^>]*>.*?</a>", page.read_text(errors="replace"), re.S)
    return [BeautifulSoup(tag, "html.parser").a for tag in tags]


@pytest.mark.slow
def test_every_page_exists_in_both_languages(html):
    for doc in page_docs():
        for rel, lang in ((doc, "en"), (f"{ZH}/{doc}", "zh-CN")):
            page = html / f"{rel}.html"
            assert page.is_file(), f"no page {rel}.html"
            assert _lang(page) == lang, f"{rel}.html: <html lang={_lang(page)}>, not {lang}"
    # the Chinese edition's front door leads to its first page
    redirect = _soup(html / ZH / "index.html").select_one("meta[http-equiv=Refresh]")
    target = redirect["content"].partition("url=")[2]
    assert _local_target(html / ZH / "index.html", target, html) == (html / ZH / f"{toc()['root']}.html").resolve()


_LABELS = re.compile(r'\s(?:title|aria-label|data-bs-title|placeholder)="([^"]*)"')


@pytest.mark.slow
def test_chinese_pages_label_their_controls_in_chinese(html):
    """The buttons, landmarks and links of a Chinese page are named in Chinese: the theme's own
    labels too (book/_ext/course_theme.py), which its templates write in English."""
    from translated_outputs import english_prose

    problems = []
    for page in _html_files(html / ZH):
        labels = {html_lib.unescape(label) for label in _LABELS.findall(page.read_text(encoding="utf-8"))}
        problems += [f"{page.relative_to(html)}: {label!r}" for label in sorted(labels) if english_prose(label)]
    assert not problems, f"{len(problems)} English labels on Chinese pages:\n" + "\n".join(problems[:20])


def test_theme_labels_are_translated_in_attributes_only():
    from course_theme import translate_labels

    labels = {"Main": "全书目录", "Link to this heading": "链接到此标题"}
    page = ('<nav class="bd-links" aria-label="Main"><a title="Link to this heading" href="#x">#</a>'
            '<p title="Main menu">Main</p></nav>')
    assert translate_labels(page, labels) == (
        '<nav class="bd-links" aria-label="全书目录"><a title="链接到此标题" href="#x">#</a>'
        '<p title="Main menu">Main</p></nav>')


def test_buttons_are_named_by_the_words_they_show():
    """WCAG 2.5.3 (axe's label-content-name-mismatch, which the browser test runs on every page):
    the theme's search button is named by all it shows, its colour-mode icons add no words."""
    from course_theme import name_by_shown_words

    page = ('<button class="btn search-button-field search-button__button" title="搜索" aria-label="搜索" '
            'data-bs-toggle="tooltip">\n <i class="fa-solid fa-magnifying-glass"></i>\n'
            ' <span class="search-button__default-text">搜索</span>\n <span class="search-button__kbd-shortcut">'
            '<kbd class="kbd-shortcut__modifier">Ctrl</kbd>+<kbd class="kbd-shortcut__modifier">K</kbd></span>\n</button>'
            '<button class="btn theme-switch-button" aria-label="Color mode">'
            '<i class="theme-switch fa-solid fa-sun fa-lg" data-mode="light" title="Light"></i></button>')
    named = name_by_shown_words(page)
    assert named == page.replace('aria-label="搜索"', 'aria-label="搜索 Ctrl+K"').replace(' title="Light"', ""), named


@pytest.mark.slow
def test_language_switch_leads_to_the_same_page_in_the_other_language(html):
    """One switch on every page of both editions, a relative link (offline, under any baseurl)
    to the same page in the other language, whose <html lang> it names."""
    pages = [p for p in _html_files(html) if p.name != "index.html" or p.parent not in (html, html / ZH)]
    assert len(pages) >= 2 * len(page_docs()), f"found {len(pages)} pages"
    for page in pages:
        rel = page.relative_to(html).as_posix()
        in_zh = rel.startswith(f"{ZH}/")
        counterpart = html / (rel.removeprefix(f"{ZH}/") if in_zh else f"{ZH}/{rel}")
        links = _switches(page)
        assert len(links) == 1, f"{rel}: {len(links)} language switches"
        href = links[0]["href"]
        assert not urlsplit(href).scheme and not href.startswith("/"), f"{rel}: the switch's {href} is not relative"
        assert _local_target(page, href, html) == counterpart.resolve(), f"{rel}: the switch leads to {href}"
        lang = "en" if in_zh else "zh-CN"
        assert links[0].get("hreflang") == lang == _lang(counterpart), f"{rel}: {links[0]}"
        assert links[0].get_text(strip=True) == ("English" if in_zh else "中文"), f"{rel}: {links[0]}"


def _first_heading(notebook: Path) -> str:
    """The text of a notebook's first ``# `` heading, without its Markdown marks."""
    for cell in json.loads(notebook.read_text())["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        for line in source.splitlines() if cell["cell_type"] == "markdown" else []:
            if line.startswith("# "):
                return _norm(re.sub(r"[*_`]", "", line[2:]))
    raise AssertionError(f"{notebook}: no heading")


@pytest.mark.slow
@pytest.mark.parametrize("doc", exercise_docs())
def test_chinese_exercise_page_shows_and_offers_the_chinese_notebook(html, doc):
    from courseware import book as editions
    from courseware import learner_package

    notebook = REPO / editions.exercise_notebook(doc, "zh_CN")
    assert notebook.is_file(), f"no Chinese notebook {notebook.relative_to(REPO)} (make release)"
    page = html / ZH / f"{doc}.html"
    soup = _soup(page)
    # the page is the Chinese notebook, shown as released
    title = soup.select_one("article h1")
    for mark in title.select("a.headerlink"):
        mark.decompose()
    assert _first_heading(notebook) in _norm(title.get_text(" ")), f"{doc}: the page's title {title.get_text()!r}"
    assert not soup.select(".cell_output"), f"zh/{doc}: the exercise notebook was executed"
    # its download is the Chinese notebook
    source = html / ZH / "_sources" / f"{doc}.ipynb"
    assert source.read_bytes() == notebook.read_bytes(), f"zh/{doc}: the download is not {notebook.relative_to(REPO)}"
    links = [a["href"] for a in soup.select("a.btn-download-source-button")]
    assert [_local_target(page, href, html) for href in links] == [source.resolve()], f"zh/{doc}: downloads {links}"
    # the same chapter wheel as the English page: the English edition's copy
    wheel = html / learner_package.WHEELS_DIR / learner_package.wheel_name(PurePosixPath(doc).parts[1])
    links = [a["href"] for a in soup.select("a.btn-download-wheel-button")]
    assert [_local_target(page, href, html) for href in links] == [wheel.resolve()] and wheel.is_file(), (
        f"zh/{doc}: wheel links {links}"
    )
    assert not (html / ZH / learner_package.WHEELS_DIR).exists(), "the Chinese edition copies the wheels"


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


def _visit(request, doc: str) -> browser.PageVisit:
    """The visit of a page of either edition, as the one Chromium of ``reading`` read it."""
    reading = request.getfixturevalue("reading")
    seen = reading["pages"][doc]
    return browser.PageVisit(seen["requests"][0], dom=seen["dom"], screenshot=Path(seen["screenshot"]),
                             requests=seen["requests"] + reading["remote"])


@pytest.mark.slow
@pytest.mark.parametrize("doc", page_docs() + zh_docs())
def test_page_renders_offline_in_a_browser(request, html, doc):
    from bs4 import BeautifulSoup
    from PIL import Image

    visit = _visit(request, doc)
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
    if english_doc(doc) in exercise_docs():
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


# One Chromium, driven over its DevTools protocol (tests/cdp.py), reads every page of both editions as
# a reader does, the book served under a sub-path as under a baseurl (/course/): one browser for all
# of them (a Chromium started per page took twice the browser's time). Of each page it keeps the DOM
# once MathJax, the fonts and the pictures are done, a screenshot and the page's requests
# (test_page_renders_offline_in_a_browser checks them all), and, for a Chinese page, whether a
# Chinese character is drawn as a tofu box and whether the page is wider than the window; then it
# clicks the language switch of a few pages, and reads the front page in a phone-wide window. The
# architecture pictures of the English chapter pages are measured in the same visit (DIAGRAMS).

#: Waits for the page to settle, then draws each Chinese character of the page as the article's
#: text is drawn and compares it with a code point no font has (U+0378, unassigned): the same
#: pixels are a tofu box. The controls prove the comparison works: another unassigned code point
#: matches, a Latin letter does not.
READ_PAGE = r"""(async () => {
  await document.fonts.ready;
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  await Promise.all([...document.images].map(img => img.complete ? null : new Promise(done => {
    img.addEventListener("load", done); img.addEventListener("error", done); })));
  const article = document.querySelector("article") || document.body;
  const style = getComputedStyle(article.querySelector("p") || article);
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = 64;
  const ctx = canvas.getContext("2d", {willReadFrequently: true});
  const draw = ch => {
    ctx.clearRect(0, 0, 64, 64);
    ctx.font = `${style.fontSize} ${style.fontFamily}`;
    ctx.fillText(ch, 4, 44);
    return ctx.getImageData(0, 0, 64, 64).data;
  };
  const same = (a, b) => a.every((v, i) => v === b[i]);
  const missing = draw("\u0378");
  const text = document.title + " " + document.body.innerText;
  const chars = [...new Set(text.match(/[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]/g) || [])];
  const root = document.documentElement;
  const header = document.querySelector(".bd-header-article");
  const end = document.querySelector(".header-article-items__end");
  return {
    chars: chars.length,
    tofu: chars.filter(ch => same(draw(ch), missing)),
    controls: same(draw("\u0379"), missing) && !same(draw("A"), missing),
    overflow: root.scrollWidth - root.clientWidth,
    header_overflow: header && end ? end.getBoundingClientRect().right - header.getBoundingClientRect().right : 0,
    lang: root.lang,
    requests: [location.href, ...performance.getEntriesByType("resource").map(e => e.name)],
  };
})()"""


#: Every display equation of the page (MathJax's ``mjx-container[display="true"]``) as laid out in the
#: window as it is now (reading a box's size lays the page out at the window's width first, so no
#: wait is needed after a resize): how many pixels of it are out of its box (it then scrolls
#: sideways, if its box lets it), where its right edge is, and how far it runs under its number.
EQUATIONS = r"""(() => ({
  width: window.innerWidth,
  equations: [...document.querySelectorAll('mjx-container[display="true"]')].map(box => {
    const math = (box.querySelector("svg") || box).getBoundingClientRect();
    const shown = box.getBoundingClientRect();
    const number = box.closest("div.math") && box.closest("div.math").querySelector(".eqno");
    const label = number ? number.getBoundingClientRect() : null;
    const beside = label && label.width && label.top < math.bottom && math.top < label.bottom;
    return {
      tex: (box.getAttribute("aria-label") || box.textContent).replace(/\s+/g, " ").trim().slice(0, 60),
      number: number ? number.textContent.replace(/[#¶]/g, "").trim() : "",
      overflow: box.scrollWidth - box.clientWidth,
      scrolls: ["auto", "scroll"].includes(getComputedStyle(box).overflowX),
      right: Math.round(shown.right),
      under_number: beside ? Math.round(Math.min(math.right, shown.right) - label.left) : 0,
    };
  }),
}))()"""

#: the widths at which every display equation is read: a laptop's (nothing may be cut off) and a
#: phone's (an equation wider than the column scrolls sideways in its own box)
EQUATION_WIDTHS = (1280, 390)


def _switch_pages() -> list[str]:
    """The pages whose language switch the browser clicks: the front page, a chapter, an exercise."""
    return [toc()["root"], chapter_docs()[0], exercise_docs()[0]]


def _settle(page, expression: str, what: str, timeout: float = 120) -> None:
    """Wait until ``expression`` is true in the page, through a navigation (while one document
    gives way to the next, evaluating fails)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if page.evaluate(expression):
                return
        except RuntimeError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:g} s for {what}")
        time.sleep(0.2)


@pytest.fixture(scope="session")
def reading(html, book) -> dict:
    """``pages``: ``{<doc> or zh/<doc>: what READ_PAGE found, with its "dom" and "screenshot"}`` (and
    ``{doc}@420``, the front page of each edition in a phone-wide window; a page of :func:`diagram_docs` also
    has its ``"diagrams"``, DIAGRAMS' answer); ``switched``: ``{page: (path, lang)}``
    after clicking its switch; ``remote``: what any of them asked of another site."""
    _require_chromium()
    import cdp

    served = book.out / "served"
    served.mkdir(exist_ok=True)
    if not (served / "course").exists():
        (served / "course").symlink_to(html, target_is_directory=True)
    shots = book.out / "screenshots"
    netlog = book.out / "chinese-netlog.json"
    pages, switched = {}, {}
    with browser.serve(served) as base:
        with cdp.chromium_page(width=1280, height=2000, extra_args=(f"--log-net-log={netlog}",)) as page:
            def read(doc: str) -> dict:
                url = f"{base}/course/{doc}.html"
                page.goto(url)
                _settle(page, f"location.href === {json.dumps(url)} && document.readyState === 'complete'",
                        f"{doc} to load")
                return page.evaluate(READ_PAGE)

            axe = a11y.axe_source()
            diagrams = diagram_docs()
            for doc in page_docs() + zh_docs():
                pages[doc] = read(doc)
                if doc in diagrams:  # at the window's width, before the phone-wide read below
                    pages[doc]["diagrams"] = page.evaluate(DIAGRAMS)
                pages[doc]["dom"] = page.evaluate("document.documentElement.outerHTML")
                # in the same visit: axe's WCAG 2.1 A/AA rules, and the figures' text alternatives
                pages[doc]["axe"] = a11y.run_axe(page, axe) if axe is not None else None
                pages[doc]["figures"] = page.evaluate(a11y.FIGURES)
                pages[doc]["screenshot"] = str(page.screenshot(shots / (doc.replace("/", "__") + ".png")))
                pages[doc]["equations"] = {EQUATION_WIDTHS[0]: page.evaluate(EQUATIONS)}
                if pages[doc]["equations"][EQUATION_WIDTHS[0]]["equations"]:  # the same page, phone-wide
                    page.call("Emulation.setDeviceMetricsOverride", width=EQUATION_WIDTHS[1], height=900,
                              deviceScaleFactor=1, mobile=False)  # a layout 390 px wide, whatever overflows
                    pages[doc]["equations"][EQUATION_WIDTHS[1]] = page.evaluate(EQUATIONS)
                    page.call("Emulation.clearDeviceMetricsOverride")
            for doc, lang in [(f"{ZH}/{d}", "en") for d in _switch_pages()] + [(d, "zh-CN") for d in _switch_pages()]:
                read(doc)
                page.click("a.btn-language-switch")
                opened = f"document.documentElement.lang === {json.dumps(lang)} && document.readyState === 'complete'"
                _settle(page, opened, f"the switch of {doc} to open a {lang} page")
                switched[doc] = (page.evaluate("location.pathname"), page.evaluate("document.documentElement.lang"))
            page.call("Emulation.setDeviceMetricsOverride", width=420, height=900, deviceScaleFactor=1, mobile=True)
            for narrow in (f"{ZH}/{toc()['root']}", toc()["root"]):
                pages[f"{narrow}@420"] = read(narrow)
                page.screenshot(shots / (narrow.replace("/", "__") + "@420.png"))
        remote = [u for u in browser._page_requests(netlog, base) if browser._is_remote(u)]
    print(f"\nscreenshots of the book, both editions: {shots}")
    return {"pages": pages, "switched": switched, "remote": remote}


@pytest.mark.slow
def test_chinese_pages_show_no_tofu_and_fit_the_window(reading):
    """At the English tests' width no Chinese page is wider than the window; in a phone-wide one
    the Chinese front page is no wider than the English one (whose widest formula, already there
    in English, sets it) and the header with its language switch fits."""
    pages = {doc: seen for doc, seen in reading["pages"].items() if doc.startswith(f"{ZH}/")}
    english_narrow = reading["pages"][f"{toc()['root']}@420"]
    problems = []
    for doc, seen in pages.items():
        assert seen["controls"], f"{doc}: the tofu probe cannot tell a missing glyph from a drawn one: {seen}"
        if seen["lang"] != "zh-CN":
            problems.append(f"{doc}: <html lang={seen['lang']}>")
        if not seen["chars"]:
            problems.append(f"{doc}: no Chinese character on the page")
        if seen["tofu"]:
            problems.append(f"{doc}: drawn as tofu boxes (no font has them): {''.join(seen['tofu'][:40])}")
        allowed = english_narrow["overflow"] if doc.endswith("@420") else 0
        if seen["overflow"] > allowed:
            problems.append(f"{doc}: the page is {seen['overflow']} px wider than the window"
                            + (f" (the English one {allowed} px)" if allowed else ""))
        if seen["header_overflow"] > 1:
            problems.append(f"{doc}: the header's buttons stick out {seen['header_overflow']:.0f} px")
    assert not problems, "\n".join(problems)


def equation_problems(pages: dict) -> tuple[int, list[str]]:
    """How many display equations :data:`EQUATIONS` read (at each width of :data:`EQUATION_WIDTHS`),
    and what a reader would miss: at the laptop's width an equation cut off at its box's edge (a
    scroll bar under it) or running under its number; at the phone's, one that neither fits nor
    scrolls, or that sticks out of the window."""
    laptop, phone = EQUATION_WIDTHS
    count, problems = 0, []
    for doc, seen in pages.items():
        for width, found in seen.get("equations", {}).items():
            if found["width"] != width:
                problems.append(f"{doc}: read at {found['width']} px, not {width}")
            for eq in found["equations"]:
                count += 1
                what = f"{doc} at {width} px: the equation {eq['number'] or eq['tex']!r}"
                if width == laptop and eq["overflow"] > 1:
                    problems.append(f"{what} is {eq['overflow']} px wider than its box (cut off, a scroll bar under it)")
                if width == laptop and eq["under_number"] > 1:
                    problems.append(f"{what} runs {eq['under_number']} px under its number")
                if width == phone and eq["overflow"] > 1 and not eq["scrolls"]:
                    problems.append(f"{what} is {eq['overflow']} px wider than its box, which does not scroll")
                if eq["right"] > width + 1:
                    problems.append(f"{what} sticks out of the window to x = {eq['right']}")
    return count, problems


@pytest.mark.slow
def test_every_display_equation_can_be_read_at_a_laptops_and_a_phones_width(reading):
    """Every display equation of both editions, in the same visit as the other checks: at 1280 px
    nothing is cut off (no equation wider than the column, none under its number); at 390 px an
    equation wider than the column scrolls in its own box."""
    count, problems = equation_problems(reading["pages"])
    print(f"\n{count} display equations read ({' and '.join(f'{w} px' for w in EQUATION_WIDTHS)})")
    assert count > 0, "no display equation found on any page"
    assert not problems, f"{len(problems)} of {count}:\n" + "\n".join(problems)


def test_the_equation_check_catches_what_it_should():
    ok = {"tex": "x", "number": "(1.1)", "overflow": 0, "scrolls": True, "right": 800, "under_number": 0}
    pages = {"a": {"equations": {1280: {"width": 1280, "equations": [ok, {**ok, "overflow": 40}, {**ok, "under_number": 9}]},
                                 390: {"width": 390, "equations": [{**ok, "overflow": 200, "right": 380},
                                                                   {**ok, "overflow": 200, "scrolls": False, "right": 380},
                                                                   {**ok, "right": 600}]}}}}
    count, problems = equation_problems(pages)
    assert count == 6 and len(problems) == 4, problems
    assert "cut off" in problems[0] and "under its number" in problems[1] and "does not scroll" in problems[2]
    assert "sticks out" in problems[3]


@pytest.mark.slow
def test_language_switch_works_in_a_browser(reading):
    switched = reading["switched"]
    for doc in _switch_pages():
        assert switched[f"{ZH}/{doc}"] == (f"/course/{doc}.html", "en"), switched
        assert switched[doc] == (f"/course/{ZH}/{doc}.html", "zh-CN"), switched


# ------------------------------------------------------------------------------ accessibility


@pytest.mark.slow
def test_every_page_meets_wcag_21_aa(reading):
    """axe-core (tests/a11y.py), WCAG 2.1 A and AA, on every page of both editions as the reader's
    browser drew it: no violation."""
    if a11y.axe_source() is None:
        message = f"axe-core is not installed: {a11y.INSTALL_HINT}"
        if os.environ.get("BOOK_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    problems = []
    for doc in page_docs() + zh_docs():
        problems += a11y.describe(doc, reading["pages"][doc]["axe"])
    assert not problems, f"{len(problems)} violations of WCAG 2.1 AA:\n" + "\n".join(problems[:40])


@pytest.mark.slow
def test_every_figure_says_what_it_shows(reading):
    """Each picture of a page has a text alternative of its own: not empty, not a file name
    (Sphinx's default), not another figure's text on the same page."""
    from translated_outputs import english_prose

    problems = []
    for doc in page_docs() + zh_docs():
        figures = reading["pages"][doc]["figures"]
        problems += [f"{doc}: {p}" for p in a11y.alt_problems(figures)]
        if doc in zh_docs():  # a Chinese reader's alt text is Chinese, like the page
            problems += [f"{doc}: {fig['src']}: English in the alt text: {sorted(set(english_prose(fig['alt'])))}"
                         for fig in figures if not fig.get("hidden") and english_prose(fig.get("alt") or "")]
    assert not problems, "\n".join(problems)


def test_no_page_writes_a_pictures_alt_text_itself():
    """A picture's text alternative comes from the code that draws it (``figures.describe``),
    which the Chinese edition translates through figures.po; one written in a page's cell
    metadata (``mystnb: image: alt:``) would reach Chinese readers in English."""
    found = [f"{page.name}:{number}" for page in sorted((REPO / "book").glob("*.md"))
             for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
             if re.match(r"\s+alt:", line)]
    assert not found, f"pictures given an alt text in the page, not by their figure code: {found}"


def test_the_alt_text_check_catches_what_it_should():
    def fig(alt, src="../_images/8a977a83e5.png"):
        return {"src": src, "alt": alt, "hidden": False}

    good = [fig("Attention weights of 6 queries over 6 keys; each row peaks on its own key."),
            fig("Loss against step: it falls from 2.3 to 0.4.", "../_images/b1.png")]
    assert a11y.alt_problems(good) == []
    assert a11y.alt_problems([{**fig(""), "hidden": True}]) == []  # decorative, said so
    for bad in ([fig("")], [fig(None)], [fig("  ")], [fig("../_images/8a977a83e5.png")], [fig("8a977a83e5")],
                [fig("figure.PNG", "data:image/png;base64,AAAA")], [good[0], {**good[0], "src": "x.png"}]):
        assert len(a11y.alt_problems(bad)) == 1, bad


MARKDOWN_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]*)[^)]*\)|<img\b[^>]*>", re.I)


def markdown_image_problems(source: str) -> list[str]:
    """The images of a markdown cell without a text alternative of their own (tests/a11y.py's
    rule: not empty, not a file name)."""
    figures = []
    for match in MARKDOWN_IMAGE.finditer(source):
        if match.group(0).startswith("!"):
            figures.append({"src": match.group(2), "alt": match.group(1)})
        else:
            attrs = {a.group(1).lower(): next((v for v in a.groups()[1:] if v is not None), "")
                     for a in ATTRIBUTE.finditer(match.group(0)[4:-1])}
            figures.append({"src": attrs.get("src", ""), "alt": attrs.get("alt")})
    return a11y.alt_problems(figures)


def test_every_image_of_a_learner_notebook_has_alt_text():
    """The notebooks learners download, in both languages: every picture of a markdown cell
    says what it shows."""
    import nbformat

    notebooks = sorted((REPO / "notebooks").rglob("*.ipynb"))
    assert any("zh_CN" in p.parts for p in notebooks) and any("zh_CN" not in p.parts for p in notebooks)
    problems = [f"{path.relative_to(REPO)}: {problem}"
                for path in notebooks for cell in nbformat.read(path, as_version=4).cells
                if cell.cell_type == "markdown" for problem in markdown_image_problems(cell.source)]
    assert not problems, "\n".join(problems)
    assert markdown_image_problems("![](fig.png) ![Loss falls from 2.3 to 0.4.](a.png) <img src='b.png'>") == [
        "fig.png: no alt text", "b.png: no alt text"]
    assert markdown_image_problems('<img src="b.png" alt="b.png">') == ["b.png: the alt text is a file name ('b.png')"]


# ------------------------------------------------------------------- the architecture pictures

DIAGRAM_CLASS = re.compile(r"\bdiagram-(draw-[a-z-]+)")
#: the smallest text of a picture, on the screen, as a share of the body text's size
MIN_TEXT_SHARE = 0.70

#: What the architecture pictures of a chapter page look like in the window of the other browser
#: tests (measured in the same visit, :func:`reading`): the body font size, and each picture's
#: classes, alt text, source, displayed width and natural width.
DIAGRAMS = r"""(() => {
  const body = document.querySelector("article p") || document.body;
  const images = [...document.querySelectorAll("img.course-diagram")].map(img => ({
    classes: img.className, alt: img.getAttribute("alt") || "", src: img.getAttribute("src"),
    width: img.getBoundingClientRect().width, natural: img.naturalWidth}));
  return {body_px: parseFloat(getComputedStyle(body).fontSize), images};
})()"""


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
def diagram_measures(reading, html) -> dict:
    """``{doc: DIAGRAMS' answer}`` for each page of :func:`diagram_docs`, as the one Chromium of
    ``reading`` laid it out (1280 px wide), each picture with the ``file`` it was drawn from."""
    measures = {}
    for doc in diagram_docs():
        seen = reading["pages"][doc]["diagrams"]
        measures[doc] = {**seen, "images": [{**img, "file": str(_local_target(html / f"{doc}.html", img["src"], html))}
                                            for img in seen["images"]]}
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
    copy of _config.yml: a second, small build (``--config``/``--toc`` of temporary files), in
    both languages."""
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


@pytest.fixture(scope="module")
def launch_book_zh(launch_book) -> Path:
    """``launch_book`` with its Chinese edition, built as ``make book`` builds it, in its ``zh/``."""
    build = launch_book.parent.parent  # <out>/build/_build/html; the configuration in <out>
    proc = subprocess.run(
        [sys.executable, "-m", "courseware", "book-zh", "--config", str(build.parent / "_config.yml"),
         "--toc", str(build.parent / "_toc.yml"), "--path-output", str(build)],
        cwd=REPO, capture_output=True, text=True, timeout=1800,
    )
    assert proc.returncode == 0 and (launch_book / ZH / "index.html").is_file(), (proc.stdout + proc.stderr)[-5000:]
    return launch_book


def _editions() -> list[tuple[str, str]]:
    """``(folder of the edition in the built book, language)``."""
    return [("", "en"), (f"{ZH}/", "zh_CN")]


def _launch_book(request, folder: str) -> Path:
    return request.getfixturevalue("launch_book_zh" if folder else "launch_book")


@pytest.mark.slow
@pytest.mark.parametrize("folder, language", _editions())
def test_launch_buttons_open_each_exercise_notebook(request, folder, language):
    """An exercise page's launch buttons open its notebook, the Chinese one in the Chinese edition."""
    from courseware import book as editions

    launch_book = _launch_book(request, folder)

    org_repo = HOME["repository"].removeprefix("https://github.com/")
    for doc in exercise_docs():
        buttons = _launch_buttons(_soup(launch_book / f"{folder}{doc}.html"))
        assert sorted(buttons) == ["Binder", "Colab", "JupyterHub"], f"{folder}{doc}: launch buttons {buttons}"
        notebook = editions.exercise_notebook(doc, language)
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
        assert (REPO / notebook).is_file(), f"{folder}{doc}: its launch buttons open {notebook}, which does not exist"
        # links to other sites, never loads from them: the page stays offline
        assert not remote_loads_in_html((launch_book / f"{folder}{doc}.html").read_text()), doc
        # the published page's canonical address is its own edition's
        canonical = [attrs["href"] for _, attrs in start_tags(launch_book / f"{folder}{doc}.html", {"link"})
                     if attrs.get("rel") == "canonical"]
        assert canonical == [f"{HOME['book']}{folder}{doc}.html"], f"{folder}{doc}: canonical {canonical}"
    # a chapter page is markdown, which Colab cannot open: no launch buttons there
    assert _launch_buttons(_soup(launch_book / f"{folder}{chapter_docs()[0]}.html")) == {}


@pytest.mark.slow
@pytest.mark.parametrize("folder, language", _editions())
def test_exercise_page_offers_the_chapters_package(request, folder, language):
    """Both editions offer the same wheel: the English edition's copy."""
    from courseware import learner_package

    launch_book = _launch_book(request, folder)

    for doc in exercise_docs():
        page = launch_book / f"{folder}{doc}.html"
        assignment = PurePosixPath(doc).parts[1]
        links = [a["href"] for a in _soup(page).select("a.btn-download-wheel-button")]
        assert len(links) == 1, f"{folder}{doc}: wheel download links {links}"
        target = _local_target(page, links[0], launch_book)
        wheel = launch_book / learner_package.WHEELS_DIR / learner_package.wheel_name(assignment)
        assert target == wheel.resolve() and wheel.is_file(), f"{folder}{doc}: the wheel link {links[0]} -> {target}"


@pytest.mark.slow
def test_no_launch_buttons_without_a_public_home(html):
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    if config["repository"]["url"]:
        pytest.skip("_config.yml names a public repository")
    for doc in exercise_docs():
        assert _launch_buttons(_soup(html / f"{doc}.html")) == {}, f"{doc} has launch buttons but no home"
