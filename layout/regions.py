"""Which lines of a notebook cell are its solution or its hidden tests: nbgrader's markers, defined
once, and the one function that finds their regions (:func:`lines`), as nbgrader reads them: a
region runs from the line that holds its ``### BEGIN`` marker to the line that holds its
``### END`` marker, both included."""

from __future__ import annotations

from typing import NamedTuple


class Region(NamedTuple):
    begin: str
    end: str


SOLUTION = Region("### BEGIN SOLUTION", "### END SOLUTION")
HIDDEN_TESTS = Region("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")

# What a learner sees in place of each solution region.
CODE_STUB = '# YOUR CODE HERE\nraise NotImplementedError("not written yet: replace this line with your code")'


def is_marker(line: str, region: Region) -> bool:
    return region.begin in line or region.end in line


def lines(source: str, region: Region) -> set[int]:
    """The lines (from 0) of ``source``'s ``region`` regions, markers included (an ``### END``
    marker outside a region too: a marker is never code a learner sees)."""
    inside, found = False, set()
    for k, line in enumerate(source.splitlines()):
        if region.begin in line:
            inside = True
        if inside or region.end in line:
            found.add(k)
        if region.end in line:
            inside = False
    return found


def visible(source: str, region: Region, note: str | None = None) -> str:
    """``source`` without its ``region`` regions, each replaced by the line ``note`` if one is given."""
    inside = lines(source, region)
    kept = []
    for k, line in enumerate(source.splitlines()):
        if k not in inside:
            kept.append(line)
        elif note is not None and region.begin in line:
            kept.append(note)
    return "\n".join(kept)


def contents(source: str, region: Region) -> list[str]:
    """The code inside each of ``source``'s ``region`` regions, markers left out, in order."""
    inside = lines(source, region)
    found: list[list[str]] = []
    for k, line in enumerate(source.splitlines()):
        if k in inside and region.begin in line:
            found.append([])
        elif k in inside and not is_marker(line, region) and found:
            found[-1].append(line)
    return ["\n".join(region_lines) for region_lines in found]


def unmarked(source: str, region: Region) -> str:
    """``source`` without the lines of ``region``'s markers: the regions' code stays."""
    return "\n".join(line for line in source.splitlines() if not is_marker(line, region))
