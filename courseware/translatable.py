"""What a learner reads in a notebook cell, cut into pieces a translator can handle, and put back.

A :class:`Piece` is one text of a cell's source with the span it occupies there:

* Markdown: a heading, a paragraph, a list item (a question's option without its letter), a
  table row (a row of numbers and code alone is no piece), each comment of a fenced Python block
  (the code stays as it is); formulas on their own stay as they are. Lines are joined: a paragraph
  is one line of text, as in Sphinx's catalogs of the book.
* Code (never inside ``### BEGIN/END SOLUTION``; of a test cell, only its comments): each docstring's
  paragraphs, and in a docstring's sections (``Args:``, ``Returns:``, ...) each item; each
  comment (a block of full-line comments is one piece); the words of a string a cell prints
  (``print(...)``) or raises (``raise ValueError(...)``): two words or more, or a label
  (``"permutation:"``).

The code and the formulas never change: :func:`substitute` puts a translation only inside its
piece's span (a docstring stays the same string literal, a comment a comment),
and :func:`check_code` proves that the cell still parses to the same code with ``ast``.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import re
import tokenize
import unicodedata
from collections.abc import Callable

from markdown_it import MarkdownIt

from layout import regions


class TranslationError(Exception):
    """A translation that cannot go into its notebook: the message names the notebook and the entry."""


@dataclasses.dataclass
class Piece:
    """One translatable text of a cell: ``text`` (the catalog's msgid) sits at ``source[start:end]``."""

    text: str
    start: int
    end: int
    line: int  # the cell's line (from 1) where it starts
    kind: str  # what it is, for the translator (the catalog's "#." comment)
    render: Callable[[str], str]  # the translation -> what replaces source[start:end]
    check: Callable[[str], str | None] = lambda translation: None  # -> what is wrong, or None


# ------------------------------------------------------------------- what needs translating

# Spans that are never words: code, formulas, link targets, f-string fields, roles, tags.
_PROTECTED = re.compile(
    r"``.+?``|(?P<ticks>`+)[^`]+?(?P=ticks)|\$\$.+?\$\$|\$[^$\n]+?\$|\]\([^)]*\)|\{[^{}\n]*\}|<[^<>\n]*>"
    r"|https?://\S+", re.S)
# A word of prose: lower-case letters, perhaps capitalised; not part of an identifier, a dotted
# name, a call, an assignment or a LaTeX command.
_WORD = re.compile(r"(?<![\w.\\])[A-Za-z][a-z]+(?:'[a-z]+)?(?!\w|\.\w|\(|\s*=[^=])")
_CAPS = re.compile(r"(?<![\w.\\])[A-Z]{2,}(?!\w|\.\w|\()")
_PRAGMA = re.compile(r"^\s*(noqa|type:|pragma|fmt:|pylint:)")


def words(text: str) -> int:
    """How many words of English prose ``text`` holds outside code, formulas and identifiers
    (upper-case words count only in twos or more: one is an acronym)."""
    plain = _PROTECTED.sub(" ", text)
    caps = len(_CAPS.findall(plain))
    return len(_WORD.findall(plain)) + (caps if caps >= 2 else 0)


def fragments(text: str) -> set[str]:
    """The inline code, formulas and link targets of ``text``: a translation keeps them all."""
    pattern = r"``.+?``|(?P<ticks>`+)[^`]+?(?P=ticks)|\$\$.+?\$\$|\$[^$\n]+?\$|\]\([^)]*\)"
    # a line break inside code or a formula is a space (a paragraph's lines are joined)
    return {re.sub(r"\s+", " ", match.group(0)) for match in re.finditer(pattern, text, re.S)}


def _check_fragments(english: str) -> Callable[[str], str | None]:
    wanted = fragments(english)

    def check(translation: str) -> str | None:
        got = fragments(translation)
        missing, extra = sorted(wanted - got), sorted(got - wanted)
        if missing or extra:
            parts = []
            if missing:
                parts.append("missing " + ", ".join(missing))
            if extra:
                parts.append("not in the English " + ", ".join(extra))
            return "code, formulas and link targets must be kept exactly as in the English (" + "; ".join(parts) + ")"
        return None

    return check


# Code written without backticks in a docstring or a comment: dotted names and calls, snake_case and
# CamelCase names, keyword arguments. A translation keeps each of them.
_CODE = re.compile(r"``.+?``|`[^`]+`|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\([^()]*\))?|[A-Za-z_]\w*\([^()]*\)"
                   r"|\b[A-Za-z]\w*_\w*\b|\b[A-Z][a-z]+[A-Z]\w*\b|\b\w+=\w+")


def code_names(text: str) -> set[str]:
    """The code written in ``text`` (in backticks or not), e.g. ``nn.Linear(d_model, d_model)``, ``d_head``.
    A call whose arguments are prose (``max(running_max, the block's largest entry)``, or its
    translation) is its name and the code among its arguments: the prose is the translator's."""
    found = set()
    for m in _CODE.findall(text):
        if re.fullmatch(r"(?:[A-Za-z]\.)+[A-Za-z]", m):  # not e.g., i.e.
            continue
        call = re.fullmatch(r"([^`(]+)\((.*)\)", m)
        if call and re.search(rf"\b[a-z]{{2,}}(?:'s)? [a-z]{{2,}}\b|[{_CJK}]", call.group(2)):
            found |= {call.group(1)} | code_names(call.group(2))
            continue
        found.add(m)
    return found


def _check_code_names(english: str) -> Callable[[str], str | None]:
    wanted = code_names(english)

    def check(translation: str) -> str | None:
        got = code_names(translation)
        # a name the English has alone may stand inside a call of the translation: max(running_max, m)
        missing = sorted(w for w in wanted - got
                         if not any(re.search(rf"(?<![\w.]){re.escape(w)}(?![\w])", g) for g in got))
        if missing:
            return "the names and code of the English must be kept exactly (missing " + ", ".join(missing) + ")"
        return None

    return check


def _all_checks(*checks: Callable[[str], str | None]) -> Callable[[str], str | None]:
    def check(translation: str) -> str | None:
        for one in checks:
            problem = one(translation)
            if problem:
                return problem
        return None

    return check


# ------------------------------------------------------------------- line wrapping (CJK aware)

_CJK = "\u2e80-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\u3000-\u303f"
# what is never broken: inline code, an f-string's field or escaped brace, an escape sequence
_UNITS = re.compile(rf"``.+?``|`[^`]+`|\{{\{{|\}}\}}|\{{[^{{}}]*\}}|\\.|\s+|[{_CJK}]|[^\s{_CJK}{{}}\\]+|.")
NO_LINE_START = set("，。、：；！？）》」』”’…—%,.;:!?)]}")
NO_LINE_END = set("（《「『“‘([{")


def width(text: str) -> int:
    """Columns ``text`` takes in a monospaced font (a CJK character takes two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _is_cjk(char: str) -> bool:
    return bool(re.match(f"[{_CJK}]", char))


#: where a Chinese line breaks best: after a clause's punctuation, not inside a word (可以 / 导入)
CLAUSE_END = set("，。、：；！？）")
#: how far back (a share of the line) a break may move to fall after a clause's punctuation
CLAUSE_REACH = 0.4


def wrap(text: str, first: int, later: int, keep_spaces: bool = False) -> list[str]:
    """``text`` in lines of at most ``first`` columns (the first line) and ``later`` (the others),
    broken at spaces and between CJK characters, never inside inline code or inside a half-width
    bracket (``normal(0, 0.02)``, ``(B, 1, T)``), never before closing or after opening
    punctuation, and without a last line of one or two characters; in Chinese after a clause's
    punctuation where one lies near the line's end (a break between two characters may cut a
    word). A word longer than the line gets a line of its own. ``keep_spaces``: a space where a line
    breaks stays at the end of the line (the lines of a string literal, joined, give the text back)."""
    atoms: list[list[str]] = []  # [text, space before it]
    space, depth = "", 0
    for unit in _UNITS.findall(text.strip()):
        if unit.isspace():
            space = unit if keep_spaces else " "
            continue
        if depth and atoms:  # inside a half-width bracket: code or a shape, kept on one line
            atoms[-1][0] += space + unit
        elif atoms and not space and (
                unit[0] in NO_LINE_START or atoms[-1][0][-1] in NO_LINE_END
                or not (_is_cjk(unit[0]) or _is_cjk(atoms[-1][0][-1]))):
            atoms[-1][0] += unit
        else:
            atoms.append([unit, space])
        if not unit.startswith("`"):
            depth = max(0, depth + sum(unit.count(c) for c in "([") - sum(unit.count(c) for c in ")]"))
        space = ""
    lines: list[list[list[str]]] = [[]]
    for atom in atoms:
        room = first if len(lines) == 1 else later
        if lines[-1] and width(_join(lines[-1] + [atom])) > room:
            line = lines[-1]
            ends = [k for k in range(1, len(line)) if line[k - 1][0][-1] in CLAUSE_END]
            tail = line[ends[-1]:] if ends else []
            lines[-1] = line[:len(line) - len(tail)] if tail and width(_join(tail)) <= CLAUSE_REACH * room else line
            lines.append(tail if lines[-1] is not line else [])
        lines[-1].append(atom)
    # no orphan: a last line this short takes the previous line's last atom, if it fits
    while len(lines) > 1 and len(lines[-2]) > 1 and width(_join(lines[-1])) <= 4 \
            and width(_join(lines[-2][-1:] + lines[-1])) <= later:
        lines[-1].insert(0, lines[-2].pop())
    out = [_join(line) for line in lines]
    if keep_spaces:  # the space at each break goes to the end of the line before it
        out = [text + (lines[n + 1][0][1] if n + 1 < len(lines) else "") for n, text in enumerate(out)]
    return out


def _join(atoms: list[list[str]]) -> str:
    return "".join((before if i else "") + atom for i, (atom, before) in enumerate(atoms))


# ------------------------------------------------------------------- Markdown

_MD = MarkdownIt("commonmark").enable("table")
_HEADING = re.compile(r"^(?P<indent> {0,3})(?P<marks>#{1,6})[ \t]+(?P<text>.*?)(?:[ \t]+#+)?[ \t]*$")
_BULLET = re.compile(r"^(?P<marker>[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+)")
# a question's option: "* **a.** ...", "- (a) ...", "- **(a)** ..." (tests/test_questions.py reads the same)
_OPTION = re.compile(r"^(?P<marker>[ \t]*[-*+][ \t]+(?:\*\*|__)?(?:\((?P<paren>[a-h])\)|(?P<bare>[a-h])[.)])(?:\*\*|__)?[ \t]+)")


def _line_starts(source: str) -> list[int]:
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _unwrap(lines: list[str]) -> str:
    """Lines of a paragraph as one line: a soft line break is a space; a hard one (a line ending in
    a backslash or in two spaces) stays a line break, written with the backslash."""
    out = ""
    for i, line in enumerate(lines):
        out += line.strip()
        if i < len(lines) - 1:
            hard = line.rstrip("\n").endswith(("\\", "  "))
            out += ("" if line.strip().endswith("\\") else "\\") + "\n" if hard else " "
    return out


def row_cells(row: str) -> int:
    """How many cells a Markdown table row has (pipes inside code or escaped do not count)."""
    text = re.sub(r"(?P<ticks>`+).+?(?P=ticks)", "", row.strip())
    text = text.replace("\\|", "")
    text = text.removeprefix("|").removesuffix("|")
    return text.count("|") + 1


def markdown_pieces(source: str) -> list[Piece]:
    """The pieces of a Markdown cell, in order."""
    lines = source.splitlines()
    starts = _line_starts(source)
    tokens = _MD.parse(source)
    pieces: list[Piece] = []

    def span(first: int, last: int) -> tuple[int, int]:  # lines [first, last)
        while last > first + 1 and not lines[last - 1].strip():
            last -= 1
        return starts[first], starts[first] + len("\n".join(lines[first:last]))

    def add(text: str, first: int, last: int, kind: str, render, check=None) -> None:
        if words(text) < 1:
            return
        begin, end = span(first, last)
        pieces.append(Piece(text, begin, end, first + 1, kind, render,
                            _all_checks(_check_fragments(text), *([check] if check else []))))

    def paragraph(first: int, last: int, kind: str) -> None:
        block = lines[first:last]
        while block and not block[-1].strip():
            block.pop()
        text = _unwrap(block)
        if text.startswith("$$") and text.endswith("$$"):
            return  # a displayed formula: never translated
        indent = len(block[0]) - len(block[0].lstrip())
        add(text, first, first + len(block), kind,
            lambda t, indent=indent: " " * indent + t.strip().replace("\n", "\n" + " " * indent))

    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.level != 0 or tok.map is None:
            i += 1
            continue
        first, last = tok.map
        if tok.type == "heading_open":
            match = _HEADING.match(lines[first])
            if match:
                prefix = match.group("indent") + match.group("marks") + " "
                add(match.group("text"), first, first + 1, "Markdown: a heading", lambda t, p=prefix: p + t.strip())
            else:  # a setext heading: its text line, the underline stays
                paragraph(first, last - 1, "Markdown: a heading")
        elif tok.type == "paragraph_open":
            paragraph(first, last, "Markdown: a paragraph")
        elif tok.type in ("bullet_list_open", "ordered_list_open"):
            depth = 0
            j = i
            while True:  # the list's items: list_item_open tokens one level down
                t = tokens[j]
                if t.type in ("bullet_list_open", "ordered_list_open"):
                    depth += 1
                elif t.type in ("bullet_list_close", "ordered_list_close"):
                    depth -= 1
                    if depth == 0:
                        break
                elif t.type == "list_item_open" and t.level == 1:
                    _list_item(tokens, j, lines, add)
                j += 1
            i = j
        elif tok.type == "table_open":
            j = i
            while tokens[j].type != "table_close":
                if tokens[j].type == "tr_open":
                    row = tokens[j].map[0]
                    cells = row_cells(lines[row])
                    indent = lines[row][: len(lines[row]) - len(lines[row].lstrip())]

                    def row_check(t: str, cells=cells) -> str | None:
                        got = row_cells(t)
                        if "\n" in t.strip() or got != cells:
                            return f"a table row keeps its {cells} cells, one line, separated by |; the translation has {got}"
                        return None

                    add(lines[row].strip(), row, row + 1, "Markdown: a table row (keep its cells and the | between them)",
                        lambda t, p=indent: p + t.strip(), row_check)
                j += 1
            i = j
        elif tok.type == "blockquote_open" and words("\n".join(lines[first:last])):
            add("\n".join(lines[first:last]).strip(), first, last,
                "Markdown: a quotation (keep the > at the start of each line)", lambda t: t.strip())
        elif tok.type == "fence" and tok.info.strip() in ("python", "py", "python3", "ipython3") and last - first > 2:
            pieces += _fenced_comment_pieces(lines, starts, first + 1, last - 1)
        # the code of a fence, indented code blocks, HTML and rules stay as they are
        i += 1
    return pieces


def _fenced_comment_pieces(lines: list[str], starts: list[int], first: int, last: int) -> list[Piece]:
    """The comments of the Python in a Markdown cell's fenced block (lines [first, last)): the code
    stays as it is, its comments are read like a code cell's, each piece placed in the cell."""
    code = "\n".join(lines[first:last]) + "\n"
    pieces = _comment_pieces(code, code.splitlines(), _line_starts(code), set())
    for piece in pieces:
        piece.start, piece.end = piece.start + starts[first], piece.end + starts[first]
        piece.line += first
        piece.kind += " of a code block in Markdown"
    return pieces


def _list_item(tokens, j: int, lines: list[str], add) -> None:
    item = tokens[j]
    first, last = item.map
    while last > first + 1 and not lines[last - 1].strip():
        last -= 1
    head = lines[first]
    option = _OPTION.match(head)
    marker = (option or _BULLET.match(head)).group("marker")
    end = next(k for k in range(j + 1, len(tokens)) if tokens[k].type == "list_item_close" and tokens[k].level == item.level)
    blocks = [t for t in tokens[j + 1:end] if t.level == item.level + 1 and t.nesting >= 0]
    pad = " " * len(_BULLET.match(head).group("marker"))  # where the item's content starts
    body = [head[len(marker):]] + [ln[len(pad):] if ln.startswith(pad) else ln.lstrip() for ln in lines[first + 1:last]]
    kind = f"Markdown: option ({option.group('paren') or option.group('bare')}) of a question" if option else "Markdown: a list item"
    if len(blocks) == 1 and blocks[0].type == "paragraph_open":
        text = _unwrap(body)
    else:
        text = "\n".join(body)
        kind += " (several blocks: keep its lines and their indentation)"

    def render(t: str) -> str:
        return marker + "\n".join((pad + ln if ln.strip() else "") if n else ln for n, ln in enumerate(t.strip().split("\n")))

    add(text, first, last, kind, render)


# ------------------------------------------------------------------- code

SECTIONS = {"Args", "Arguments", "Parameters", "Returns", "Return", "Yields", "Raises", "Attributes",
            "Methods", "Example", "Examples", "Note", "Notes", "Shapes", "Shape", "See also", "Warns"}
# The start of an item that names something, kept by its translation: "x: ", "x, y: ", "W_q = ",
# "forward(X) -> ", "ValueError: ", "name (B, T): ".
_NAMED = re.compile(
    r"^\*{0,2}[A-Za-z_][\w.]*(?:\([^()]*\))?(?:\s*,\s*\*{0,2}[A-Za-z_][\w.]*)*(?:\s+\([^()\s]*(?:,\s*[^()\s]*)*\))?"
    r"(?::\s|\s=\s|\s->\s|:$)")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _char_col(line: str, byte_col: int) -> int:
    """ast's column (UTF-8 bytes) as a column of characters."""
    return len(line.encode()[:byte_col].decode(errors="ignore"))


def _named_prefix(text: str) -> str | None:
    match = _NAMED.match(text)
    return match.group(0) if match else None


def _check_prefix(prefix: str | None) -> Callable[[str], str | None]:
    def check(translation: str) -> str | None:
        if prefix and not translation.startswith(prefix.rstrip()):
            return f"it must start with {prefix.rstrip()!r}, as the English does"
        return None

    return check


def _docstring_pieces(source: str, lines: list[str], starts: list[int], node: ast.Constant, where: str,
                      skip: set[int]) -> list[Piece]:
    """The pieces of one docstring (``node``) of the cell's ``source``.

    A paragraph of prose is one piece. A paragraph with indented lines is read as sections: a
    title line ending in ``:`` (``Args:``, ``Returns:`` and the like stay as they are; another
    title is a piece) over its items, each an item's first line with the lines under it; an
    item that starts with a name (``x: ``, ``W_q = ``) must start so in its translation too."""
    row = node.lineno - 1
    if any(r in skip for r in range(row, node.end_lineno)):
        return []
    col = _char_col(lines[row], node.col_offset)
    literal_start = starts[row] + col
    literal_end = starts[node.end_lineno - 1] + _char_col(lines[node.end_lineno - 1], node.end_col_offset)
    literal = source[literal_start:literal_end]
    prefix = re.match(r"[rRuU]*", literal).group(0)
    quote = literal[len(prefix):len(prefix) + 3]
    if quote not in ('"' * 3, "'" * 3):
        quote = quote[0]
    content_start = literal_start + len(prefix) + len(quote)
    doc_lines = source[content_start:literal_end - len(quote)].split("\n")
    offsets = [content_start]
    for ln in doc_lines[:-1]:
        offsets.append(offsets[-1] + len(ln) + 1)
    first_col = col + len(prefix) + len(quote)  # where the docstring's first line starts
    base = min((_indent(ln) for ln in doc_lines[1:] if ln.strip()), default=_indent(lines[row]))
    limit = max([79] + [width(ln) for ln in lines[row:node.end_lineno]])
    level = {k: (0 if k == 0 else _indent(ln) - base) for k, ln in enumerate(doc_lines)}
    pieces: list[Piece] = []

    def add(first: int, last: int, kind: str, continuation: int, check=None) -> None:
        """Lines first..last of the docstring as one text, wrapped back with ``continuation``'s indent."""
        text = " ".join(doc_lines[k].strip() for k in range(first, last + 1))
        if words(text) < 1:
            return
        start_col = first_col if first == 0 else _indent(doc_lines[first])
        begin = offsets[first] + (0 if first == 0 else start_col)
        end = offsets[last] + len(doc_lines[last].rstrip())

        def render(t: str) -> str:
            out: list[str] = []
            for para in t.strip().split("\n"):
                out += wrap(para, limit - (start_col if not out else continuation), limit - continuation)
            return ("\n" + " " * continuation).join(out)

        pieces.append(Piece(text, begin, end, row + first + 1, f"{where}, {kind}", render,
                            _all_checks(_check_fragments(text), _check_code_names(text), *([check] if check else []))))

    def is_title(k: int, nxt: int | None) -> bool:
        return level[k] == 0 and doc_lines[k].strip().endswith(":") and nxt is not None and level[nxt] > 0

    def add_item(item: list[int], section: str = "") -> None:
        named = _named_prefix(doc_lines[item[0]].strip())
        indent = base if item[0] == 0 else _indent(doc_lines[item[0]])
        continuation = _indent(doc_lines[item[1]]) if len(item) > 1 else indent + (4 if named else 0)
        kind = (f"an item of {section!r}" if section else "a line") + (
            f" (keep its start {named.strip()!r})" if named else "")
        add(item[0], item[-1], kind, continuation, _check_prefix(named))

    paragraphs: list[list[int]] = []
    for k, ln in enumerate(doc_lines):
        if ln.strip():
            if paragraphs and paragraphs[-1][-1] == k - 1:
                paragraphs[-1].append(k)
            else:
                paragraphs.append([k])
    for para in paragraphs:
        if all(level[k] == 0 for k in para):
            add(para[0], para[-1], "a paragraph", base)
            continue
        n = 0
        while n < len(para):
            k = para[n]
            nxt = para[n + 1] if n + 1 < len(para) else None
            if is_title(k, nxt):
                title = doc_lines[k].strip()
                if title[:-1] not in SECTIONS:
                    add(k, k, "a section's title", base, _check_prefix(_named_prefix(title)))
                body = level[nxt]
                n += 1
                item: list[int] = []
                while n < len(para) and level[para[n]] > 0:
                    k2 = para[n]
                    if item and level[k2] == body and _named_prefix(doc_lines[k2].strip()):
                        add_item(item, title)
                        item = []
                    item.append(k2)
                    n += 1
                add_item(item, title)
                continue
            # a line of its own, with the lines under it (or, for prose, the lines that go on with it)
            item = [k]
            n += 1
            while n < len(para):
                k2 = para[n]
                after = para[n + 1] if n + 1 < len(para) else None
                goes_on = level[k2] > 0 or (not _named_prefix(doc_lines[k].strip())
                                            and not _named_prefix(doc_lines[k2].strip()) and not is_title(k2, after))
                if not goes_on:
                    break
                item.append(k2)
                n += 1
            add_item(item)
    return pieces


def _comment_pieces(source: str, lines: list[str], starts: list[int], skip: set[int]) -> list[Piece]:
    """Each comment after code, and each block of full-line comments (consecutive lines, one
    column), joined into one text unless its lines are a list or indented (then kept line by line)."""
    blocks: list[list[tokenize.TokenInfo]] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        row, col = tok.start
        if row - 1 in skip or tok.string.startswith("###") or _PRAGMA.match(tok.string[1:]):
            continue
        full_line = not lines[row - 1][:col].strip()
        previous = blocks[-1][-1] if blocks else None
        if full_line and previous and previous.start == (row - 1, col) and not lines[row - 2][:col].strip():
            blocks[-1].append(tok)
        else:
            blocks.append([tok])
    pieces: list[Piece] = []
    for block in blocks:
        row, col = block[0].start
        texts = [t.string[1:] for t in block]
        raw = len(texts) > 1 and any(re.match(r"\s{2,}\S|\s*(?:[-*]|\d+[.)])\s", t) for t in texts)
        text = "\n".join(t[1:] if t.startswith(" ") else t for t in texts) if raw else " ".join(t.strip() for t in texts)
        if words(text) < 1:
            continue
        trailing = bool(lines[row - 1][:col].strip())
        last_row = block[-1].start[0]
        begin = starts[row - 1] + col
        end = starts[last_row - 1] + len(lines[last_row - 1].rstrip())
        limit = max([79] + [width(lines[t.start[0] - 1]) for t in block])

        def render(t: str, col=col, raw=raw, trailing=trailing, limit=limit) -> str:
            if trailing:
                return "# " + " ".join(t.split())
            out: list[str] = []
            for para in t.strip("\n").split("\n"):
                out += [para] if raw else wrap(para, limit - col - 2, limit - col - 2)
            return ("\n" + " " * col).join(("# " + ln).rstrip() for ln in out)

        kind = "a comment after code" if trailing else "a comment" + (" (keep its lines)" if raw else "")
        pieces.append(Piece(text, begin, end, row, kind, render, _check_code_names(text)))
    return pieces


_LITERAL = re.compile(r"(?P<prefix>[rRbBuUfF]*)(?P<quote>'{3}|\"{3}|'|\")(?P<body>.*)(?P=quote)$", re.S)


def _string_pieces(source: str, lines: list[str], starts: list[int], tree: ast.AST, skip: set[int]) -> list[Piece]:
    """The words of the strings a cell prints or raises: ``print("...")``, ``raise E(f"...")``
    (of two words or more; a string continued over lines by juxtaposition is one piece)."""
    found = []
    for node in ast.walk(tree):
        call = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            call, kind = node, "text the cell prints"
        elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            call, kind = node.exc, "an error message"
        if call:
            found += [(arg, kind) for arg in call.args if isinstance(arg, ast.JoinedStr)
                      or (isinstance(arg, ast.Constant) and isinstance(arg.value, str))]
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.STRING]
    pieces = []
    for node, kind in found:
        if any(r in skip for r in range(node.lineno - 1, node.end_lineno)):
            continue
        first = (node.lineno, _char_col(lines[node.lineno - 1], node.col_offset))
        last = (node.end_lineno, _char_col(lines[node.end_lineno - 1], node.end_col_offset))
        parts = [t for t in tokens if first <= t.start and t.end <= last]
        literals = [_LITERAL.match(t.string) for t in parts]
        if not literals or any(m is None or set(m.group("prefix").lower()) - {"f", "u"} or len(m.group("quote")) == 3
                               for m in literals):
            continue  # raw, bytes or triple-quoted: left alone
        is_f = isinstance(node, ast.JoinedStr)
        text = "".join(m.group("body") if "f" in m.group("prefix").lower() or not is_f
                       else m.group("body").replace("{", "{{").replace("}", "}}") for m in literals)
        if words(text) < 2 and not re.fullmatch(r"\s*[A-Za-z][a-z]+:\s*", text):
            continue  # one word is a name, unless it is a label ("permutation:")
        quote = literals[0].group("quote")
        begin = starts[parts[0].start[0] - 1] + parts[0].start[1]
        end = starts[parts[-1].end[0] - 1] + parts[-1].end[1]
        col = parts[0].start[1]
        # a string the English continues over lines is continued over lines, at its width
        room = max([79] + [width(lines[r]) for r in range(parts[0].start[0] - 1, parts[-1].end[0])]) - col - 3 \
            if parts[-1].end[0] > parts[0].start[0] else None

        def render(t: str, quote=quote, is_f=is_f, col=col, room=room) -> str:
            t = re.sub(rf"(?<!\\){quote}", "\\" + quote, t.replace("\n", "\\n"))
            if not room:
                chunks = [t]
            else:  # the spaces around the text are the text's
                core = t.strip()
                chunks = wrap(core, room - is_f, room - is_f, keep_spaces=True)
                chunks[0], chunks[-1] = t[:len(t) - len(t.lstrip())] + chunks[0], chunks[-1] + t[len(t.rstrip()):]
            return ("\n" + " " * col).join(("f" if is_f else "") + quote + chunk + quote for chunk in chunks)

        pieces.append(Piece(text, begin, end, node.lineno, kind + (" (keep each {...} field as it is)" if is_f else ""),
                            render))
    return pieces


def solution_lines(source: str) -> set[int]:
    """The lines (from 0) of the cell's solution regions, markers included: nbgrader replaces
    them, the learner never sees them."""
    return regions.lines(source, regions.SOLUTION)


def hidden_lines(source: str) -> set[int]:
    """The lines (from 0) of a test cell's hidden-test regions, markers included: nbgrader removes
    them from the learner's notebook."""
    return regions.lines(source, regions.HIDDEN_TESTS)


def code_pieces(source: str, comments_only: bool = False) -> list[Piece]:
    """The pieces of a code cell that a learner reads, in the cell's order: docstrings, comments,
    the strings it prints or raises (none inside a solution region). ``comments_only`` (a test
    cell, whose messages are translated as it runs): its comments and its helpers' docstrings
    (they explain what a failure means), outside its hidden regions."""
    lines = source.splitlines()
    starts = _line_starts(source)
    skip = solution_lines(source) | (hidden_lines(source) if comments_only else set())
    tree = ast.parse("\n".join("pass" if ln.lstrip().startswith(("%", "!")) else ln for ln in lines)) \
        if comments_only else ast.parse(source)
    pieces: list[Piece] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                where = "the cell's docstring" if isinstance(node, ast.Module) else f"docstring of {node.name}"
                pieces += _docstring_pieces(source, lines, starts, first.value, where, skip)
    pieces += _comment_pieces(source, lines, starts, skip)
    if not comments_only:
        pieces += _string_pieces(source, lines, starts, tree, skip)
    return sorted(pieces, key=lambda p: p.start)


# ------------------------------------------------------------------- putting translations back


def substitute(source: str, pieces: list[Piece], translations: list[str]) -> str:
    """``source`` with each piece's span replaced by its rendered translation."""
    out = source
    for piece, text in sorted(zip(pieces, translations), key=lambda pt: pt[0].start, reverse=True):
        out = out[:piece.start] + piece.render(text) + out[piece.end:]
    return out


class _Skeleton(ast.NodeTransformer):
    """The code without the words: docstrings and the strings' literal text emptied (an
    f-string keeps its fields, in a fixed order)."""

    def visit_Constant(self, node):
        return ast.Constant("") if isinstance(node.value, str) else node

    def visit_JoinedStr(self, node):
        fields = sorted((v for v in node.values if isinstance(v, ast.FormattedValue)), key=ast.dump)
        return ast.JoinedStr(values=[self.generic_visit(v) for v in fields])


def skeleton(source: str) -> str:
    return ast.dump(_Skeleton().visit(ast.parse(source)))


def signatures(source: str) -> dict[str, str]:
    """Every function's and class's name -> its signature (arguments, defaults, decorators, bases), dumped."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = ast.dump(node.args) + "".join(ast.dump(d) for d in node.decorator_list) + (
                ast.dump(node.returns) if node.returns else "")
        elif isinstance(node, ast.ClassDef):
            found[node.name] = "".join(ast.dump(b) for b in node.bases + node.decorator_list)
    return found


def check_code(english: str, translated: str) -> str | None:
    """What is wrong with a translated code cell (None: it parses, and only words changed)."""
    try:
        ast.parse(translated)
    except SyntaxError as err:
        return f"the cell no longer parses: {err.msg} (line {err.lineno})"
    if skeleton(translated) != skeleton(english):
        return "the cell's code changed (only docstrings, comments and messages may)"
    docs_en = [n.name for n in ast.walk(ast.parse(english)) if isinstance(n, (ast.FunctionDef, ast.ClassDef))
               and ast.get_docstring(n) is not None]
    docs_zh = [n.name for n in ast.walk(ast.parse(translated)) if isinstance(n, (ast.FunctionDef, ast.ClassDef))
               and ast.get_docstring(n) is not None]
    if docs_en != docs_zh:
        return "a docstring is no longer a docstring"
    return None
