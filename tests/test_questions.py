"""The multiple-choice questions give nothing away by length: across the course the key is
the longest option in at most a quarter of the questions, and in no question is the key more
than 1.25 times as long as its longest wrong option. Cheap (it only reads the source notebooks,
well under a second); not marked slow, so ``make test-fast`` runs it too.

A question is the solution cell ``answer_<topic>`` of a notebook in ``solutions/``; its text is
the Markdown cell(s) between the previous code cell and it, where each option is a list item
that starts with its letter (``* **a.** ...`` or ``- (a) ...``; an option may go on over indented
lines); its key is the letter that the hidden part of the test cell ``test_answer_<topic>``
compares with (``assert chosen == "b"``). The format is described in docs/maintainers.md.
"""

from __future__ import annotations

import dataclasses
import re

import nbformat
import pytest

import notebook_tools as nbt
from courseware import translations
from layout import regions

LONGEST_SHARE = 0.25  # the key may be the longest option in at most this share of the questions
LONGEST_RATIO = 1.25  # and never more than this many times as long as the longest wrong option

# "* **a.** text", "- (a) text", "- **(a)** text", "* a) text": a bullet, then the letter in
# parentheses or followed by "." or ")", in bold or not.
OPTION = re.compile(
    r"^[ \t]*[-*+][ \t]+(?:\*\*|__)?(?:\((?P<paren>[a-h])\)|(?P<bare>[a-h])[.)])(?:\*\*|__)?[ \t]+(?P<text>\S.*)$")
KEY = re.compile(r"==\s*[\"']([a-hA-H])[\"']")
CHOICES = re.compile(r"check_choice\(\s*\w+\s*,\s*[\"']([a-h]+)[\"']")


@dataclasses.dataclass
class Question:
    chapter: str
    name: str  # answer_<topic>
    number: int  # 1, 2, ... in the chapter's order
    options: dict[str, str]  # letter -> text as written (Markdown)
    key: str
    choices: str | None  # the letters the visible test accepts

    def where(self) -> str:
        return f"{self.chapter}, question {self.number} ({self.name})"


def plain(text: str) -> str:
    """``text`` as a reader sees it, roughly: without Markdown emphasis and code marks, LaTeX
    dollars, commands and braces; runs of white space as one space."""
    text = re.sub(r"\\[A-Za-z]+|\\.", "", text)  # \mathbf, \times, \, ...
    text = re.sub(r"[$`{}]|\*\*|__|(?<!\w)[*_]|[*_](?!\w)", "", text)
    return " ".join(text.split())


def options(markdown: str) -> dict[str, str]:
    """The options of a question's Markdown, letter -> text, in the order written."""
    found: dict[str, str] = {}
    current = None
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced, current = not fenced, None
        match = None if fenced else OPTION.match(line)
        if match:
            current = match.group("paren") or match.group("bare")
            if current in found:
                raise AssertionError(f"option ({current}) appears twice")
            found[current] = match.group("text").strip()
        elif current and line[:1] in (" ", "\t") and line.strip():
            found[current] += " " + line.strip()  # an option that goes on over an indented line
        else:
            current = None
    return found


def key_of(test_source: str) -> str:
    """The letter the hidden part of a question's test cell accepts."""
    hidden = "\n".join(regions.contents(test_source, regions.HIDDEN_TESTS))
    keys = {k.lower() for k in KEY.findall(hidden)}
    if len(keys) != 1:
        raise AssertionError(f"the hidden test compares with {sorted(keys) or 'no letter'}, not one letter")
    return keys.pop()


def questions_of(nb, chapter: str) -> list[Question]:
    """Every multiple-choice question of the source notebook ``nb``."""
    found = []
    tests = {nbt.nbgrader_meta(c).get("grade_id"): c.source for c in nb.cells if nbt.is_test_cell(c)}
    for index, cell in enumerate(nb.cells):
        name = nbt.nbgrader_meta(cell).get("grade_id", "")
        if not (nbt.is_solution_cell(cell) and name.startswith("answer_")):
            continue
        text = []
        for before in reversed(nb.cells[:index]):
            if before.cell_type == "code":
                break
            if before.cell_type == "markdown":
                text.insert(0, before.source)
        where = f"{chapter}, {name}"
        test = tests.get(f"test_{name}")
        assert test is not None, f"{where}: no test cell test_{name}"
        try:
            parsed, key = options("\n".join(text)), key_of(test)
        except AssertionError as error:
            raise AssertionError(f"{where}: {error}") from None
        letters = "".join(parsed)
        assert len(parsed) >= 2 and letters == "abcdefgh"[: len(parsed)], (
            f"{where}: the Markdown cell above it should list the options a, b, ... as list items "
            f"'* **a.** ...' (found {letters or 'none'})")
        assert key in parsed, f"{where}: the key {key!r} is none of the options {letters}"
        choices = CHOICES.search(test)
        found.append(Question(chapter, name, len(found) + 1, parsed, key, choices and choices.group(1)))
    return found


def course_questions() -> list[Question]:
    return [q for chapter in nbt.assignments()
            for q in questions_of(nbt.read(nbt.source_notebook(chapter)), chapter)]


def key_is_longest(question: Question) -> bool:
    """The key is at least as long as every wrong option (a tie counts: it gives nothing away
    less than a strict win does to a learner who picks by length)."""
    lengths = {letter: len(plain(text)) for letter, text in question.options.items()}
    return lengths[question.key] >= max(n for letter, n in lengths.items() if letter != question.key)


def giveaways(questions: list[Question]) -> list[str]:
    """What gives the keys away by length, in words (empty when nothing does)."""
    problems = []
    for q in questions:
        key = len(plain(q.options[q.key]))
        wrong_letter, wrong = max(((letter, len(plain(text))) for letter, text in q.options.items()
                                   if letter != q.key), key=lambda item: item[1])
        if key > LONGEST_RATIO * wrong:
            problems.append(
                f"{q.where()}: the right option ({q.key}) has {key} characters, more than {LONGEST_RATIO} times "
                f"the longest wrong one ({wrong_letter}, {wrong}): make the wrong options as specific and as "
                f"carefully argued, or the right one shorter")
    longest = [q for q in questions if key_is_longest(q)]
    if len(longest) > LONGEST_SHARE * len(questions):
        problems.append(
            f"the key is the longest option in {len(longest)} of the {len(questions)} questions, more than "
            f"{LONGEST_SHARE:.0%} of them (a learner who picks the longest option would gain): "
            + "; ".join(q.where() for q in longest))
    return problems


@pytest.fixture(scope="module")
def questions() -> list[Question]:
    return course_questions()


def test_every_chapter_with_questions_is_parsed(questions):
    """Each chapter's questions are found (a parser that finds none would pass anything)."""
    for chapter in nbt.assignments():
        nb = nbt.read(nbt.source_notebook(chapter))
        asked = [c for c in nb.cells if nbt.is_solution_cell(c)
                 and nbt.nbgrader_meta(c)["grade_id"].startswith("answer_")]
        assert len([q for q in questions if q.chapter == chapter]) == len(asked), chapter
    assert questions, "no question found in solutions/"


def test_visible_test_accepts_exactly_the_options(questions):
    for q in questions:
        assert q.choices is not None, f"{q.where()}: the test cell does not call checks.check_choice"
        assert q.choices == "".join(q.options), (
            f"{q.where()}: check_choice accepts {q.choices!r}, but the options are {''.join(q.options)!r}")


def test_no_key_is_given_away_by_length(questions):
    problems = giveaways(questions)
    assert not problems, "\n".join(problems)


def test_no_key_is_given_away_by_length_in_chinese():
    """The same rules for the Chinese notebooks, whose options are the catalogs' translations (read
    from the translated source notebook of each complete catalog, where the hidden test names the key)."""
    found = []
    for chapter in nbt.assignments():
        if translations.status(chapter).complete:
            found += questions_of(translations.translated_notebook(nbt.source_notebook(chapter)), f"{chapter} (zh_CN)")
    problems = giveaways(found)
    assert not problems, "\n".join(problems)


def _notebook(cells: list[tuple[str, str, str]]) -> nbformat.NotebookNode:
    """``nbt.small_notebook``'s cells, where the kind ``markdown`` is a Markdown cell."""
    nb = nbt.small_notebook([cell for cell in cells if cell[0] != "markdown"])
    for index, (kind, _, source) in enumerate(cells):
        if kind == "markdown":
            nb.cells.insert(index, nbformat.v4.new_markdown_cell(source))
    return nb


def _question(key: str, **texts: str) -> Question:
    return Question("ch99_example", "answer_example", 1, texts, key, "".join(texts))


def test_the_parser_reads_both_ways_of_writing_options():
    nb = _notebook([
        ("markdown", "q1", "Code:\n\n```python\n- (a) not an option\n```\n\n**Question 1.** Which?\n\n- (a) one $x^2$\n- (b) two,\n  still two\n- (c) three\n"),
        ("solution", "answer_first", '### BEGIN SOLUTION\nanswer_first = "b"\n### END SOLUTION\n'),
        ("test", "test_answer_first", 'chosen = checks.check_choice(answer_first, "abc", name="answer_first")\n'
                                      '### BEGIN HIDDEN TESTS\nassert chosen == "b", "answer_first: not a or c"\n'
                                      '### END HIDDEN TESTS\n'),
        ("markdown", "q2", "## Questions\n\n* **a.** the first\n* **b.** the **second**\n\nAfter the list.\n"),
        ("solution", "answer_second", '### BEGIN SOLUTION\nanswer_second = "a"\n### END SOLUTION\n'),
        ("test", "test_answer_second", "chosen = checks.check_choice(answer_second, 'ab', name='answer_second')\n"
                                       "### BEGIN HIDDEN TESTS\nassert chosen == 'a'\n### END HIDDEN TESTS\n"),
    ])
    first, second = questions_of(nb, "ch99_example")
    assert (first.name, first.key, first.choices) == ("answer_first", "b", "abc")
    assert first.options == {"a": "one $x^2$", "b": "two, still two", "c": "three"}
    assert (second.number, second.key, second.options) == (2, "a", {"a": "the first", "b": "the **second**"})
    assert plain(second.options["b"]) == "the second" and plain(r"$\sqrt{64} = 8$, `head_dim`") == "64 = 8, head_dim"


def test_a_question_without_parsable_options_or_key_fails():
    nb = _notebook([
        ("markdown", "q", "**Question 1.** Which?\n\n1. one\n2. two\n"),
        ("solution", "answer_x", '### BEGIN SOLUTION\nanswer_x = "a"\n### END SOLUTION\n'),
        ("test", "test_answer_x", "### BEGIN HIDDEN TESTS\nassert chosen == 'a'\n### END HIDDEN TESTS\n"),
    ])
    with pytest.raises(AssertionError, match="ch99_example, answer_x: .*found none"):
        questions_of(nb, "ch99_example")
    nb.cells[0].source = "- (a) one\n- (b) two\n"
    nb.cells[2].source = "assert chosen in 'ab'\n"
    with pytest.raises(AssertionError, match="no letter"):
        questions_of(nb, "ch99_example")


def test_the_check_catches_a_key_given_away_by_length():
    fair = [_question("a", a="the right one, argued", b="a wrong one, also argued", c="short")
            for _ in range(4)]
    assert giveaways(fair) == []
    one_long = fair[:3] + [_question("b", a="a wrong one", b="the right one, with a long argument")]
    (problem,) = giveaways(one_long)
    assert "ch99_example, question 1 (answer_example): the right option (b)" in problem
    ties = fair[:2] + [_question("a", a="same length", b="same-length")] * 2
    (problem,) = giveaways(ties)
    assert problem.startswith("the key is the longest option in 2 of the 4 questions")
