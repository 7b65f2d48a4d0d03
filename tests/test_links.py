"""Every relative link between the repository's Markdown files resolves: the file (or folder)
exists and, for a ``#fragment`` into a Markdown file, a heading of that file has that anchor
(GitHub's rule: lower case, punctuation dropped, spaces to hyphens, ``-1``, ``-2``... for repeats)."""

from __future__ import annotations

import re
from pathlib import Path

import notebook_tools as nbt

SKIPPED = {"_build", "out", "node_modules"}  # build outputs, npm packages; hidden folders (.venv, .git, caches) too
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def markdown_files() -> list[Path]:
    return sorted(p for p in nbt.ROOT.rglob("*.md")
                  if not any(part.startswith(".") or part in SKIPPED for part in p.relative_to(nbt.ROOT).parts))


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and code spans, where a ``](...)`` is no link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown text."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in FENCE.sub("", text).splitlines():
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        words = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1))  # a link's text stays
        slug = re.sub(r"[^\w\- ]", "", words.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in LINK.findall(_prose(path.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:, ...: not between our files
            continue
        file_part, _, fragment = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked.read_text()):
            broken.append(f"{target}: no heading with the anchor #{fragment}")
    return broken


def test_every_link_between_the_markdown_files_resolves():
    files = markdown_files()
    assert nbt.ROOT / "README.md" in files and nbt.ROOT / "docs" / "instructors.md" in files
    broken = {str(p.relative_to(nbt.ROOT)): b for p in files if (b := broken_links(p))}
    assert not broken, broken


def test_the_readme_links_to_the_guides():
    readme = _prose((nbt.ROOT / "README.md").read_text())
    for doc in ("docs/instructors.md", "docs/maintainers.md", "docs/benchmarks.md", "autograder/README.md",
                "autograder/SCALING.md"):
        assert f"]({doc})" in readme, f"README.md does not link to {doc}"


def test_anchors_follow_githubs_rule():
    text = "# The maintainer's path\n## `make bench`: speed\n```\n# not a heading\n```\n## How many, for 10,000?\n## Notes\n## Notes\n"
    assert anchors(text) == {"the-maintainers-path", "make-bench-speed", "how-many-for-10000", "notes", "notes-1"}


def test_a_broken_link_is_found(tmp_path):
    (tmp_path / "other.md").write_text("# Present heading\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#present-heading) [gone](missing.md) [bad](other.md#absent) "
                    "[here](#nowhere) `[code](missing.md)` [web](https://example.org/x.md)\n")
    assert broken_links(page) == ["missing.md: no such file", "other.md#absent: no heading with the anchor #absent",
                                  "#nowhere: no heading with the anchor #nowhere"]
