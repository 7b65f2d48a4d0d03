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


def solution_cell(assignment: str, name: str) -> str:
    """The solution cell ``name`` of ``assignment``'s source notebook, without nbgrader's markers."""
    import json

    import layout
    from layout import regions

    (path,) = layout.source_notebooks(assignment)
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == name:
            return regions.unmarked("".join(cell["source"]), regions.SOLUTION) + "\n"
    raise LookupError(name)


def changed(assignment: str, name: str, *pairs: str) -> str:
    """The solution cell ``name`` of ``assignment`` with each (old, new) of ``pairs`` replaced
    (old must occur): a wrong variant that stays the course's answer but for its mistake."""
    source = solution_cell(assignment, name)
    for old, new in zip(pairs[::2], pairs[1::2]):
        source = replaced(source, old, new)
    return source


def answer_key(assignment: str, variable: str) -> str:
    """The right letter of a multiple-choice question: the one the solution notebook of
    ``assignment`` (``solutions/<assignment>/*.ipynb``) assigns to ``variable``."""
    import json
    import re
    from pathlib import Path

    folder = Path(__file__).resolve().parent.parent / "solutions" / assignment
    for path in sorted(folder.glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["metadata"].get("nbgrader", {}).get("grade_id") == variable:
                match = re.search(rf'^{variable} = "([a-d])"$', "".join(cell["source"]), re.MULTILINE)
                assert match, f"{path}: the cell {variable} assigns no letter"
                return match.group(1)
    raise LookupError(f"no solution cell {variable} in {folder}")


def wrong_choices(assignment: str, variable: str) -> dict[str, str]:
    """One mutant per wrong letter of a question (each must fail its test)."""
    right = answer_key(assignment, variable)
    return {f"letter_{c}": f'{variable} = "{c}"\n' for c in "abcd" if c != right}


def right_choice(assignment: str, variable: str, written: str) -> str:
    """The right letter written otherwise: ``written`` with ``{upper}`` or ``{lower}`` in
    place of the letter, e.g. ``" {upper} "`` (it must pass its test)."""
    right = answer_key(assignment, variable)
    return f'{variable} = "{written.format(upper=right.upper(), lower=right)}"\n'
