"""Helpers that the mutant files (tests/mutants/*.py) use to write solution cells."""

from textwrap import dedent, indent


def function_cell(header: str, body: str) -> str:
    """A solution cell: ``header`` (the def line) and ``body`` (code, dedented and re-indented)."""
    return header + "\n" + indent(dedent(body).strip("\n"), "    ") + "\n"


def class_cell(name: str, init_signature: str, init: str, methods: dict[str, str]) -> str:
    """A solution cell holding ``class name(nn.Module)``: ``__init__`` (its def line
    ``init_signature``, then ``super().__init__()`` and the body ``init``) and each method of
    ``methods`` (def line: body). Bodies are dedented and re-indented."""
    source = f"class {name}(nn.Module):\n"
    source += indent(function_cell(init_signature, "super().__init__()\n" + dedent(init).strip("\n")), "    ")
    for signature, body in methods.items():
        source += "\n" + indent(function_cell(signature, body), "    ")
    return source


def replaced(text: str, old: str, new: str) -> str:
    """``text`` with ``old`` replaced by ``new``; ``old`` must occur (a mutant that changes
    nothing would pass for the wrong reason)."""
    assert old in text, old
    return text.replace(old, new)
