"""Drive a headless Chromium through the Chrome DevTools Protocol: open a page, wait for what
it shows, click as a mouse does, read the page, take screenshots. Used by the tests that
work a web application as a person would (``tests/test_validate_in_lab.py``).

Offline like the book tests (``tests/browser.py``): every host but 127.0.0.1 is unresolvable.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import websocket

import browser


class Page:
    """One browser tab, spoken to over its DevTools websocket."""

    def __init__(self, ws_url: str):
        self._ws = websocket.create_connection(ws_url, timeout=120, suppress_origin=True)
        self._id = 0

    def call(self, method: str, **params):
        self._id += 1
        self._ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:  # events come in between; the answer carries our id
            message = json.loads(self._ws.recv())
            if message.get("id") == self._id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 120, what: str = "") -> object:
        """Poll ``expression`` until it is truthy; its value, or a TimeoutError naming ``what``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.5)
        raise TimeoutError(f"waited {timeout:g} s for {what or expression}")

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def click(self, selector: str, text: str | None = None) -> None:
        """Press and release the left mouse button over the middle of the first ``selector``
        (the first whose text is ``text``, when given), once it is visible."""
        find = (f"[...document.querySelectorAll({json.dumps(selector)})]"
                f".find(e => {json.dumps(text)} === null || e.textContent.trim() === {json.dumps(text)})")
        box = self.wait_for(
            f"(() => {{ const e = {find};"
            " if (!e) return null; e.scrollIntoView({block: 'nearest'}); const r = e.getBoundingClientRect();"
            " return r.width && r.height ? [r.x + r.width / 2, r.y + r.height / 2] : null; })()",
            what=f"a visible {selector}" + (f" saying {text!r}" if text else ""),
        )
        x, y = box
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def click_until(self, selector: str, expression: str, what: str, text: str | None = None,
                    tries: int = 4, timeout: float = 30) -> object:
        """Click ``selector`` (as :meth:`click`) until ``expression`` is truthy; its value. On a
        busy machine a click can land before the page has wired its handlers and be lost, so a
        click that changed nothing within ``timeout`` seconds is made again, ``tries`` times in all."""
        for attempt in range(1, tries + 1):
            self.click(selector, text)
            try:
                return self.wait_for(expression, timeout, what)
            except TimeoutError:
                if attempt == tries:
                    raise TimeoutError(f"clicked {selector} {tries} times; waited {timeout:g} s each for {what}")

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a PNG encoded for speed (a larger file, the same pixels): about half the browser's CPU time
        shot = self.call("Page.captureScreenshot", format="png", optimizeForSpeed=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        self._ws.close()


@contextlib.contextmanager
def chromium_page(width: int = 1400, height: int = 1000, extra_args: tuple[str, ...] = ()):
    """A headless Chromium with one blank tab (more switches: ``extra_args``); yields its :class:`Page`."""
    chromium = browser.find_chromium()
    if chromium is None:
        raise FileNotFoundError(f"no Chromium found; install it: {browser.INSTALL_HINT}")
    # Chromium's helper processes may still write to the profile for a moment after the
    # browser is stopped: its removal must not fail the test that used it.
    with tempfile.TemporaryDirectory(prefix="chromium-cdp-", ignore_cleanup_errors=True) as tmp:
        profile = Path(tmp) / "profile"
        # the book tests' switches, less their virtual time (this page runs in real time)
        args = [a for a in browser.chromium_args(chromium, profile, width, height, 0)
                if not a.startswith("--virtual-time-budget")]
        proc = subprocess.Popen([*args, *extra_args, "--remote-debugging-port=0", "about:blank"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        page = None
        try:
            port_file = profile / "DevToolsActivePort"
            deadline = time.monotonic() + 60
            while not port_file.is_file() or not port_file.read_text().strip():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"chromium did not start: {proc.stderr.read().decode()[-2000:]}")
                time.sleep(0.2)
            port = port_file.read_text().split()[0]
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as answer:
                targets = json.load(answer)
            tab = next(t for t in targets if t.get("type") == "page")
            page = Page(tab["webSocketDebuggerUrl"])
            page.call("Page.enable")
            yield page
        finally:
            if page is not None:
                page.close()
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            with contextlib.suppress(ProcessLookupError):  # its helper processes too
                os.killpg(proc.pid, signal.SIGKILL)
