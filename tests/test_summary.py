"""``OUT/summary.html``: what it counts, how it groups failures, and that it renders, offline,
in headless Chromium."""

from __future__ import annotations

import base64
import io
import re

import pytest
from PIL import Image

from autograder import summary
from autograder.grade import Result

import browser


def _test(name: str, passed: bool, error: str | None = None, points: float = 1.0) -> dict:
    return {"notebook": "nb", "test": name, "points": points if passed else 0.0, "max_points": points,
            "passed": passed, "error": error}


RESULTS = [
    Result("ann", "ch01", 2.0, 2.0, "graded", "", [_test("test_softmax", True), _test("test_kernel", True)]),
    Result("ben", "ch01", 1.0, 2.0, "graded", "",
           [_test("test_softmax", True), _test("test_kernel", False, "ValueError: weights: expected 0.5, got 0.49")]),
    Result("cem", "ch01", 1.0, 2.0, "graded", "",
           [_test("test_softmax", True), _test("test_kernel", False, "ValueError: weights: expected 0.5, got 0.51")]),
    Result("dia", "ch01", 0.0, 2.0, "graded", "the student's process was killed (out of memory or over a limit)",
           [_test("test_softmax", False, "StudentProcessGone: killed"), _test("test_kernel", False, "NameError: x")]),
    Result("eve", "ch01", 0.0, 2.0, "rejected", "missing notebook nb.ipynb (submitted: mine.ipynb)", []),
    Result("ann", "ch02", 0.0, 3.0, "rejected", "nb.ipynb is not a valid notebook: <script>alert(1)</script>", []),
]


def test_the_page_counts_groups_and_flags():
    page = summary.render(RESULTS)
    assert "6 submissions from 5 students: 4 graded, 2 rejected, 1 stopped before the end." in page
    kernel_row = re.search(r"<tr><td>test_kernel</td>.*?</tr>", page, re.S).group(0)
    assert "25% of 4" in kernel_row and "low" in kernel_row
    # 0.49 and 0.51 are one mistake, counted twice, shown once
    assert "2: <code>ValueError: weights: expected 0.5, got 0.49</code>" in kernel_row
    assert "0.51" not in kernel_row and "1: <code>NameError: x</code>" in kernel_row
    assert "75% of 4" in re.search(r"<tr><td>test_softmax</td>.*?</tr>", page, re.S).group(0)
    flagged = page.split('id="flagged"')[1]
    for student, status in (("dia", "stopped"), ("eve", "rejected"), ("ann", "rejected")):
        assert re.search(rf"<td>{student}</td><td>ch0\d</td><td>{status}</td>", flagged), student
    assert "<script>" not in page and "&lt;script&gt;" in page  # a reason is text, never markup
    assert "No submission of this assignment could be graded." in page  # ch02: all rejected
    assert "http" not in re.sub(r'src="data:[^"]*"', "", page)  # nothing fetched from anywhere


def test_every_plot_is_an_embedded_png():
    page = summary.render(RESULTS)
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 1  # ch01 only: ch02 has nothing graded to plot
    image = Image.open(io.BytesIO(base64.b64decode(images[0])))
    assert image.width > 500 and image.height > 200
    assert len(image.convert("RGB").getcolors(1 << 24)) > 10  # drawn, not blank


def test_the_page_renders_in_chromium(tmp_path):
    if browser.find_chromium() is None:
        pytest.fail(f"Chromium not found; install it: {browser.INSTALL_HINT}", pytrace=False)
    summary.write(RESULTS, tmp_path / "summary.html")
    with browser.serve(tmp_path) as base:
        visit = browser.visit(f"{base}/summary.html", screenshot=tmp_path / "summary.png", height=1600)
    assert visit.remote_requests() == []
    assert "<h1>Grading summary</h1>" in visit.dom and 'id="flagged"' in visit.dom
    shot = Image.open(visit.screenshot).convert("RGB")
    # the plot is decoded and drawn: the page has the bars' colours, not only text
    colours = {colour for _, colour in shot.getcolors(1 << 24)}
    assert (85, 168, 104) in colours and (196, 78, 82) in colours, "the pass-rate bars are not on the page"


def test_forbidden_calls_and_unresolved_indirections_are_listed_per_exercise():
    """summary.html lists every exercise that reached a forbidden call (how it was found) and
    every one where the scan saw an indirection it could not resolve; none: it says so."""
    found = {"exercise": "LayerNorm", "entry": "torch.nn.functional.layer_norm", "how": "scan", "cell": "LayerNorm",
             "detail": "torch.nn.functional.layer_norm (LayerNorm, line 4)", "notebook": "nb"}
    unread = {"exercise": "EncoderBlock", "entry": None, "how": "scan", "cell": "EncoderBlock",
              "detail": "getattr with a name computed at run time (EncoderBlock, line 9)", "notebook": "nb"}
    outside = {**unread, "exercise": None, "detail": "globals() (cell-3, line 1)"}
    results = [Result("fay", "ch06", 3.0, 9.0, "graded", "", [_test("test_LayerNorm", False, "ForbiddenShortcut: x")],
                      [found, unread, outside]),
               Result("gus", "ch06", 9.0, 9.0, "graded", "", [_test("test_LayerNorm", True)])]
    page = summary.render(results)
    calls, unresolved = page.split('id="shortcuts"')[1].split('id="unresolved"')
    assert ("<td>fay</td><td>ch06</td><td>LayerNorm</td><td><code>torch.nn.functional.layer_norm</code></td>"
            "<td>scan</td>") in calls
    assert "gus" not in calls + unresolved and "getattr" not in calls
    assert "<td>fay</td><td>ch06</td><td>EncoderBlock</td><td><code>getattr with a name computed at run time" in unresolved
    assert "<td>outside the exercises</td><td><code>globals() (cell-3, line 1)" in unresolved
    empty = summary.render(results[1:])
    assert "None found." in empty and "<p class=\"muted\">None.</p>" in empty
