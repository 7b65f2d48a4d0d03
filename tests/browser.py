"""Look at the built book in a real browser (headless Chromium), offline.

Used by ``tests/test_book.py``, and on its own to take screenshots to look at::

    python tests/browser.py _build/html /tmp/shots            # every page in _toc.yml
    python tests/browser.py _build/html /tmp/shots --height 6000 book/intro

The book is served from a loopback HTTP server (127.0.0.1, a free port). Chromium runs
with every host except 127.0.0.1 unresolvable, and writes a network log, so that a page
that tries to fetch anything from another site is caught even when it would fail.

Needs Debian's ``chromium`` and a CJK font (``fonts-wqy-microhei``): ``make system`` installs both.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = "make system (Debian's chromium and fonts-wqy-microhei)"


def find_chromium() -> str | None:
    """The Chromium executable (``$CHROMIUM`` if set), or None."""
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"]
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@contextlib.contextmanager
def serve(directory: Path):
    """Serve ``directory`` at ``http://127.0.0.1:<free port>``; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class PageVisit:
    url: str
    dom: str = ""
    screenshot: Path | None = None
    #: URLs the page asked for (its own requests, not the browser's housekeeping).
    requests: list[str] = field(default_factory=list)
    stderr: str = ""

    def remote_requests(self) -> list[str]:
        """The page's requests that went anywhere but the loopback server."""
        return [u for u in self.requests if _is_remote(u)]


def _is_remote(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about", "chrome", "chrome-extension"):
        return False
    return parts.hostname not in ("127.0.0.1", "localhost")


def _read_netlog(text: str) -> dict:
    """Chromium's network log, read even when Chromium stopped writing it midway: the log is one
    event per line after its constants, and the file may end without its closing brackets, or in
    the middle of an event, which is then left out."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    lines = text.rstrip().splitlines()
    for end in range(len(lines), 0, -1):
        try:
            return json.loads("\n".join(lines[:end]).rstrip().rstrip(",") + "]}")
        except json.JSONDecodeError:
            continue
    raise ValueError(f"Chromium's network log cannot be read: {text[:200]!r}")


def _page_requests(netlog: Path, origin: str) -> list[str]:
    """The URLs requested on behalf of pages served from ``origin``.

    Chromium's network log also holds the browser's own housekeeping (update checks,
    time sync) even with the switches that reduce it; those requests carry no page
    origin. A page's requests (scripts, style sheets, fonts, images, fetch/XHR) carry
    the page's site in their network isolation key, or the page as their initiator.
    """
    data = _read_netlog(netlog.read_text(errors="replace"))
    start = data["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    site = origin.rsplit(":", 1)[0]  # http://127.0.0.1
    urls = []
    for event in data.get("events", []):
        if event.get("type") != start:
            continue
        params = event.get("params", {})
        nik = str(params.get("network_isolation_key", ""))
        initiator = str(params.get("initiator", ""))
        if site in nik or initiator.startswith(site):
            urls.append(params.get("url", ""))
    return list(dict.fromkeys(urls))


def chromium_args(chromium: str, profile: Path, width: int, height: int, budget_ms: int) -> list[str]:
    return [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--no-proxy-server",
        # Offline for real: no host resolves except the loopback server's.
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
        f"--virtual-time-budget={budget_ms}",
    ]


def visit(
    url: str,
    *,
    screenshot: Path | None = None,
    dump_dom: bool = True,
    width: int = 1280,
    height: int = 2000,
    budget_ms: int = 20000,
    timeout_s: float = 120,
    chromium: str | None = None,
) -> PageVisit:
    """Load ``url`` in headless Chromium; return the DOM after scripts ran (MathJax
    included: virtual time lets every timer and load finish), a screenshot, and the
    page's network requests."""
    chromium = chromium or find_chromium()
    if chromium is None:
        raise FileNotFoundError(f"no Chromium found; install it: {INSTALL_HINT}")
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(url))
    result = PageVisit(url)
    extra = ["--dump-dom"] if dump_dom else []
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        extra.append(f"--screenshot={screenshot}")
    # One run does both: the screenshot and the DOM are taken when the virtual time is up.
    with tempfile.TemporaryDirectory(prefix="chromium-") as tmp:
        tmp = Path(tmp)
        netlog = tmp / "netlog.json"
        cmd = chromium_args(chromium, tmp / "profile", width, height, budget_ms)
        cmd += [f"--log-net-log={netlog}", *extra, url]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=tmp)
        result.stderr = proc.stderr
        if proc.returncode != 0:
            raise RuntimeError(
                f"chromium exited with {proc.returncode} on {url}:\n{proc.stderr[-3000:]}"
            )
        if dump_dom:
            result.dom = proc.stdout
        if netlog.is_file():
            result.requests = _page_requests(netlog, origin)
    if screenshot is not None:
        if not screenshot.is_file():
            raise RuntimeError(f"chromium wrote no screenshot for {url}:\n{result.stderr[-3000:]}")
        result.screenshot = screenshot
    return result


def toc_pages(root: Path) -> list[str]:
    """Every document of ``_toc.yml`` (without suffix), in reading order."""
    import yaml

    toc = yaml.safe_load((root / "_toc.yml").read_text())
    pages = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                pages.append(str(Path(entry["file"]).with_suffix("")))
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Screenshots of the built book, offline.")
    parser.add_argument("html", type=Path, help="the built book, e.g. _build/html")
    parser.add_argument("out", type=Path, help="folder for the PNG files")
    parser.add_argument("pages", nargs="*", help="pages (e.g. book/intro); default: _toc.yml")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=2000)
    args = parser.parse_intermixed_args(argv)
    repo = Path(__file__).resolve().parent.parent
    pages = args.pages or toc_pages(repo)
    status = 0
    with serve(args.html) as base:
        for page in pages:
            png = args.out / (page.replace("/", "__") + ".png")
            v = visit(f"{base}/{page}.html", screenshot=png, width=args.width, height=args.height)
            remote = v.remote_requests()
            print(f"{png}  ({len(v.requests)} requests{', REMOTE: ' + ', '.join(remote) if remote else ''})")
            status |= bool(remote)
    return status


if __name__ == "__main__":
    sys.exit(main())
