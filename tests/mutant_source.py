"""Helpers that the mutant files (tests/mutants/*.py) use to write solution cells."""

from textwrap import dedent, indent


def function_cell(header: str, body: str) -> str:
    """A solution cell: ``header`` (the def line) and ``body`` (code, dedented and re-indented)."""
    return header + "\n" + indent(dedent(body).strip("\n"), "    ") + "\n"
