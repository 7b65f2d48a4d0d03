"""``OUT/summary.html``: a batch at a glance, for an instructor of hundreds.

One self-contained page (plots drawn with matplotlib and embedded as ``data:`` URIs, the
style inline, no script, nothing fetched from anywhere): for every assignment, the
distribution of scores, the pass rate of every test and its most frequent failure
messages; then every submission that was rejected (nothing could be graded) or stopped
(the student's process was killed or ran out of time), with the reason; last, the pairs of
submissions whose own code is unusually alike (:func:`autograder.similarity.section`). So one sees
which idea the class has not understood, and which submissions need a human look. A class may mix the
course's languages (each notebook names its own): every count and rate is over all of them, a
column says how many submissions came in each, and a failure message is shown in the language it
was written in.

Failure messages are grouped by their wording with the numbers taken out (``expected 0.5,
got 0.49`` and ``expected 0.5, got 0.51`` are one mistake); the page shows one example of
each group.
"""

from __future__ import annotations

import base64
import collections
import html
import io
import re
import statistics
from pathlib import Path

from matplotlib.figure import Figure

# failure-message groups shown per test
TOP_MESSAGES = 3
MESSAGE_CHARS = 300
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 1em 0; width: 100%; }
th, td { border: 1px solid #ddd; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num { text-align: right; white-space: nowrap; }
code { font-size: 0.9em; white-space: pre-wrap; word-break: break-word; }
.low { color: #b00; font-weight: bold; } .muted { color: #595959; }
img { max-width: 100%; }
"""


def _png(fig: Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _pattern(message: str) -> str:
    return _NUMBER.sub("#", message)


def _assignment_figure(assignment: str, scores: list[float], max_score: float, rates: dict[str, float]) -> str:
    """Score histogram beside pass rate per test, as a data URI."""
    fig = Figure(figsize=(11, max(3.0, 0.28 * len(rates) + 1.2)))
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.3]})
    bins = min(20, max(5, int(max_score) + 1)) if max_score else 5
    left.hist(scores, bins=bins, range=(0, max_score or 1), color="#4c72b0", edgecolor="white")
    left.set(title=f"{assignment}: scores", xlabel=f"score (out of {max_score:g})", ylabel="submissions")
    names = list(rates)[::-1]
    values = [100 * rates[n] for n in names]
    # a low rate is hatched as well as red: not told by colour alone
    bars = right.barh(names, values, color=["#c44e52" if v < 50 else "#55a868" for v in values])
    for bar, value in zip(bars, values):
        if value < 50:
            bar.set_hatch("//")
    right.set(title="pass rate per test (hatched: under 50%)", xlabel="% of graded submissions", xlim=(0, 100))
    right.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    return _png(fig)


def _figure_text(scores: list[float], max_score: float, rates: dict[str, float]) -> str:
    """What the figure of :func:`_assignment_figure` shows, for its ``alt``."""
    low = [name for name, rate in rates.items() if rate < 0.5]
    mean = sum(scores) / len(scores) if scores else 0.0
    return (f"Left: histogram of the {len(scores)} scores out of {max_score:g} (mean {mean:.3g}). "
            f"Right: pass rate of each of the {len(rates)} tests, {len(low)} under 50%"
            + (f": {', '.join(low)}." if low else "."))


def _languages(results: list) -> str:
    """How many submissions came in each language: ``en 3, zh_CN 2``."""
    counts = collections.Counter(getattr(r, "language", "en") for r in results)
    return ", ".join(f"{html.escape(language)} {n}" for language, n in sorted(counts.items()))


def render(results: list, similar: str = "") -> str:
    """The page's HTML for ``results`` (:class:`autograder.grade.Result` objects); ``similar``:
    the section of the submissions whose own code is unusually alike
    (:func:`autograder.similarity.section`), after the rejected and stopped ones."""
    by_assignment: dict[str, list] = collections.defaultdict(list)
    for r in results:
        by_assignment[r.assignment].append(r)
    graded = [r for r in results if r.status == "graded"]
    flagged = [r for r in results if r.status != "graded" or r.reason]
    parts = [
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
        "<title>Grading summary</title>", f"<style>{_STYLE}</style></head><body>",
        "<h1>Grading summary</h1>",
        f"<p>{len(results)} submissions from {len({r.student_id for r in results})} students: "
        f"{len(graded)} graded, {sum(r.status != 'graded' for r in results)} rejected, "
        f"{sum(bool(r.reason) for r in graded)} stopped before the end. Languages: {_languages(results)}.</p>",
        "<table><tr><th>assignment</th><th>submissions</th><th>languages</th><th>mean</th><th>median</th>"
        "<th>full marks</th><th>zero</th></tr>",
    ]
    for assignment, rows in sorted(by_assignment.items()):
        scores = [r.score for r in rows]
        top = max(r.max_score for r in rows)
        parts.append(
            f'<tr><td><a href="#{html.escape(assignment)}">{html.escape(assignment)}</a></td>'
            f'<td class="num">{len(rows)}</td><td>{_languages(rows)}</td>'
            f'<td class="num">{statistics.mean(scores):.1f} / {top:g}</td>'
            f'<td class="num">{statistics.median(scores):g}</td>'
            f'<td class="num">{sum(s >= top for s in scores)}</td><td class="num">{sum(s == 0 for s in scores)}</td></tr>'
        )
    parts.append("</table>")

    for assignment, rows in sorted(by_assignment.items()):
        parts.append(_assignment_section(assignment, rows))

    parts.append(_shortcuts_section(results))
    parts.append("<h2 id=\"flagged\">Rejected or stopped submissions</h2>")
    if flagged:
        parts.append("<table><tr><th>student</th><th>assignment</th><th>status</th><th>score</th><th>reason</th></tr>")
        for r in sorted(flagged, key=lambda r: (r.assignment, r.student_id)):
            status = r.status if r.status != "graded" else "stopped"
            parts.append(
                f"<tr><td>{html.escape(r.student_id)}</td><td>{html.escape(r.assignment)}</td>"
                f"<td>{status}</td><td class=\"num\">{r.score:g} / {r.max_score:g}</td>"
                f"<td><code>{html.escape(r.reason[:MESSAGE_CHARS])}</code></td></tr>"
            )
        parts.append("</table>")
    else:
        parts.append('<p class="muted">None: every submission was graded to the end.</p>')
    parts.append(similar)
    parts.append("</body></html>")
    return "\n".join(parts)


def _assignment_section(assignment: str, rows: list) -> str:
    graded = [r for r in rows if r.status == "graded"]
    tests: dict[str, list[dict]] = collections.defaultdict(list)
    for r in graded:
        for t in r.tests:
            tests[t["test"]].append(t)
    rates = {name: sum(t["passed"] for t in runs) / len(runs) for name, runs in tests.items()}
    top = max(r.max_score for r in rows)
    out = [f'<h2 id="{html.escape(assignment)}">{html.escape(assignment)}</h2>']
    if tests:
        scores = [r.score for r in rows]
        out.append(f'<img alt="{html.escape(_figure_text(scores, top, rates))}" '
                   f'src="{_assignment_figure(assignment, scores, top, rates)}">')
    else:
        out.append('<p class="muted">No submission of this assignment could be graded.</p>')
        return "\n".join(out)
    out.append("<table><tr><th>test</th><th>passed</th><th>most frequent failures (how many: an example)</th></tr>")
    for name, runs in tests.items():
        groups: dict[str, list[str]] = collections.defaultdict(list)
        for t in runs:
            if not t["passed"]:
                message = t.get("error") or "lost points without an error message"
                groups[_pattern(message)].append(message)
        common = sorted(groups.values(), key=len, reverse=True)[:TOP_MESSAGES]
        failures = "<br>".join(f"{len(m)}: <code>{html.escape(m[0][:MESSAGE_CHARS])}</code>" for m in common)
        failures = failures or '<span class="muted">none</span>'
        rate = rates[name]
        out.append(
            f"<tr><td>{html.escape(name)}</td>"
            f"<td class=\"num{' low' if rate < 0.5 else ''}\">{100 * rate:.0f}% of {len(runs)}</td>"
            f"<td>{failures}</td></tr>"
        )
    out.append("</table>")
    return "\n".join(out)


def _shortcuts_section(results: list) -> str:
    """Every exercise that reached one of its forbidden library calls (its tests scored 0), and
    every one where the scan saw an indirection it could not resolve (no points taken: read
    the code), per submission."""
    rows = {"found": [], "unresolved": []}
    for r in sorted(results, key=lambda r: (r.assignment, r.student_id)):
        for found in getattr(r, "shortcuts", None) or []:
            kind = "found" if found.get("entry") else "unresolved"
            rows[kind].append(
                f"<tr><td>{html.escape(r.student_id)}</td><td>{html.escape(r.assignment)}</td>"
                f"<td>{html.escape(str(found.get('exercise') or 'outside the exercises'))}</td>"
                + (f"<td><code>{html.escape(str(found['entry']))}</code></td><td>{html.escape(str(found.get('how')))}</td>"
                   if kind == "found" else "")
                + f"<td><code>{html.escape(str(found.get('detail', ''))[:MESSAGE_CHARS])}</code></td></tr>"
            )
    out = ['<h2 id="shortcuts">Forbidden library calls</h2>',
           "<p>An exercise whose code calls a library function or class that its docstring forbids "
           "(found by the scan of the code, or by the trip-wire while a test ran it) scores 0 on its tests. "
           "The trip-wire runs in the student's own process, which the student's code controls: it catches the "
           "ordinary case, not every one.</p>"]
    if rows["found"]:
        out.append("<table><tr><th>student</th><th>assignment</th><th>exercise</th><th>call</th><th>found by</th>"
                   "<th>where</th></tr>" + "".join(rows["found"]) + "</table>")
    else:
        out.append('<p class="muted">None found.</p>')
    out.append('<h3 id="unresolved">Code the scan could not read</h3>'
               "<p>Indirections (a name computed at run time, <code>torch._C</code>, <code>globals()</code>...) in "
               "an exercise's code that the scan could not resolve. They cost no points by themselves: read the code.</p>")
    if rows["unresolved"]:
        out.append("<table><tr><th>student</th><th>assignment</th><th>exercise</th><th>what</th></tr>"
                   + "".join(rows["unresolved"]) + "</table>")
    else:
        out.append('<p class="muted">None.</p>')
    return "\n".join(out)


def write(results: list, path: Path, similar: str = "") -> None:
    """Write the summary page of ``results`` (and the section ``similar``) to ``path``."""
    path.write_text(render(results, similar), encoding="utf-8")
