"""Accessibility checks of a page open in Chromium (tests/cdp.py): axe-core's WCAG 2.1 A and AA
rules, and the text alternatives of the page's figures.

axe-core comes from the npm registry, pinned in package.json / package-lock.json; ``make test``
installs it into node_modules/ (``npm ci``). Its rules are axe's own: this module only loads it
into the page, runs it and shortens what it reports.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

REPO = Path(__file__).resolve().parent.parent
AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
INSTALL_HINT = "npm ci (make test runs it: the version is pinned in package.json)"
#: WCAG 2.1, levels A and AA
TAGS = ("wcag2a", "wcag2aa", "wcag21a", "wcag21aa")

_RUN = """(async () => {
  const result = await axe.run(document, {runOnly: {type: "tag", values: %s}, resultTypes: ["violations"]});
  return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => ({target: n.target.join(" "), html: n.html.slice(0, 160),
                              summary: (n.failureSummary || "").slice(0, 300)}))}));
})()"""

#: The page's figures: each <img> of the article with its alt text, and where it was drawn from.
FIGURES = """[...document.querySelectorAll("article img")].map(img => ({
  src: img.getAttribute("src") || "", alt: img.getAttribute("alt"),
  hidden: img.getAttribute("aria-hidden") === "true" || img.getAttribute("role") === "presentation"}))"""


def axe_source() -> str | None:
    """axe.min.js, or None when it is not installed."""
    return AXE.read_text() if AXE.is_file() else None


def run_axe(page, source: str) -> list[dict]:
    """axe's violations of the page open in ``page`` (a :class:`cdp.Page`), WCAG 2.1 A and AA:
    ``[{id, impact, help, nodes: [{target, html, summary}]}]``."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(source + "\n;true")
    return page.evaluate(_RUN % json.dumps(list(TAGS)))


def counts(violations: list[dict]) -> dict[str, int]:
    """``{rule: number of elements}``."""
    return {v["id"]: len(v["nodes"]) for v in violations}


def describe(where: str, violations: list[dict], per_rule: int = 3) -> list[str]:
    """One line per rule with a few of its elements, for a failure message."""
    lines = []
    for v in violations:
        nodes = "; ".join(f"{n['target']} {n['html']!r}" for n in v["nodes"][:per_rule])
        lines.append(f"{where}: {v['id']} ({v['impact']}) x{len(v['nodes'])}: {v['help']} -- {nodes}")
    return lines


_FILE_NAME = re.compile(r"^[\w./\\%-]*\.(png|jpe?g|gif|svg|webp)$", re.I)


def alt_problems(figures: list[dict]) -> list[str]:
    """What is wrong with the text alternatives of a page's figures (``FIGURES``' answer): an
    image without alt text, with an empty one (unless it is marked decorative), one that is a
    file name (Sphinx's default: the image's path) or the picture's own name, and two figures
    with the same text."""
    problems, seen = [], {}
    for fig in figures:
        if fig.get("hidden"):
            continue
        src, alt = fig["src"], fig.get("alt")
        name = PurePosixPath(unquote(urlsplit(src).path)).name
        text = (alt or "").strip()
        if src.startswith("data:") and not name:
            name = ""
        if not text:
            problems.append(f"{name or src[:40]}: no alt text")
        elif _FILE_NAME.match(text) or (name and (text == name or text == PurePosixPath(name).stem)):
            problems.append(f"{name}: the alt text is a file name ({text!r})")
        elif text in seen:
            problems.append(f"{name}: the same alt text as {seen[text]} ({text[:80]!r})")
        else:
            seen[text] = name
    return problems
