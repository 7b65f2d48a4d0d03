"""Submissions whose own code is unusually alike: the pairs an instructor should look at.

Per assignment, every submission's own code (:func:`autograder.assemble.own_code`: its solution
cells and the cells it added, never a test) is cut into tokens by Pygments and normalised, one
symbol per token: a name the student chose (a variable, an argument, a function, a class, an
attribute of ``self``) is ``V``, a number ``N``, a string ``S``; comments, docstrings and
whitespace are dropped; keywords, operators, builtins, the modules the notebook imports, keyword
arguments' names and the attributes of anything but ``self`` (``torch.softmax``, ``X.mean``) keep
their spelling. The fingerprints of a cell that Python parses are the units of its syntax:
each statement of :data:`MIN_STATEMENT` to :data:`K` tokens whole, and every expression of at
least :data:`MIN_STATEMENT` tokens (each call, operation, subscript and operand, wherever it
stands), a comprehension and the loop that appends its element to a list being one
(:func:`subexpressions`); never a run of tokens cut across two units. A cell that does not
parse (an IPython magic) has its statements and, in a longer one, runs of :data:`K` tokens
chosen by copydetect's winnowing (the method of MOSS). None spans two statements, so reordered
statements, bodies moved into helpers and a loop rewritten as a comprehension leave the other
statements' fingerprints, and the rewritten one's expressions, whole. Those of the released
notebook, in every language (stubs, docstrings, given helpers, the install cell, the visible
tests), are boilerplate and never count.

A fingerprint that ``d`` submissions share weighs ``1 / (d - 1)``: shared by two, it is evidence;
shared by many, it is the common way to write it. A pair's score is the weight it shares over
the smaller of the two submissions' masses (what each could share at most): 1 when one holds
nothing unusual that the other lacks. The pairs listed are those whose score is an outlier of the
batch's own best matches (:func:`threshold`) and that share at least :data:`MIN_SHARED`. Each
submission is compared with the reference solution the same way (a leaked solution), and with
``--archive``'s earlier years' submissions; a submission is listed against the reference when it
matches it as much as a listed pair and far more than the class's own matches with it do
(:func:`_against_reference`).

Output: ``OUT/similarity.json``, ``OUT/similarity.csv``, one page per listed pair in
``OUT/similarity/<assignment>/`` (both notebooks' own code side by side, each matched region
highlighted and linked to its twin) and a section of ``summary.html`` (:func:`section`). The
pages' words are the grader's catalog's (``autograder.po``), in the language asked for.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import csv
import dataclasses
import functools
import html
import json
import keyword
import re
import zlib
from pathlib import Path

import numpy as np
from pygments.lexers.python import PythonLexer
from pygments.token import Comment, Name, Number, String, Text, Whitespace

import layout
from attention_course import i18n
from autograder import assemble, catalogs, course
from autograder.catalogs import N_

#: tokens per fingerprinted run (the noise threshold: a shorter common run is never seen)
K = 12
#: winnowing window: any run of K + WINDOW - 1 tokens shared is certain to be seen
WINDOW = 6
#: a statement shorter than K tokens is one fingerprint when it has at least this many
MIN_STATEMENT = 6
#: a listed pair shares at least this much weight (fingerprints held by these two alone count 1)
MIN_SHARED = 1.5
#: robust z-score (median and MAD of the batch's best matches, log scale) beyond which a score is unusual
Z = 3.5
#: what is left unshared counts at least this much (a pair sharing all is as unusual as one sharing 99 %)
FLOOR = 0.01
#: the least spread of the batch's log scale (a class of identical notebooks would have none)
MIN_SPREAD = 0.05
#: fewer submissions than this make no distribution: nothing is listed, the pairs are ranked
MIN_CLASS = 8
#: a highlighted fingerprint is shared by at most this many submissions of the batch
RARE = 5
#: notebooks larger than this are not read (a real one is under 2 MB)
MAX_BYTES = 20 * 2**20
#: own code beyond this is not a notebook's answers (pasted data, a generated file)
MAX_CODE_CHARS = 200_000
#: at most this many pairs per assignment in similarity.csv and .json beyond the listed ones
CONTEXT_PAIRS = 10

REFERENCE = "reference solution"
ARCHIVE_PREFIX = "archive/"
_SEPARATOR = "\x00"  # the end of a statement or a cell: no symbol of a token


class _Symbols(dict):
    """One character per kept spelling (``def``, ``(``, ``torch``, ``.mean``): one of the 65,534 of
    Unicode's plane 15 (private use), from a CRC of the spelling, so that a spelling has the same
    symbol in every run and batch whatever came first (two of a few hundred spellings may share
    one: a little less told apart, never more)."""

    def __missing__(self, text: str) -> str:
        self[text] = chr(0xF0000 + zlib.crc32(text.encode()) % 0xFFFE)
        return self[text]


_SYMBOLS = _Symbols()
_LEXER = PythonLexer()
_BUILTINS = set(dir(builtins)) | set(keyword.kwlist)


@dataclasses.dataclass
class Document:
    """One submission's own code, tokenised and fingerprinted."""

    key: str  # the student's id, ``archive/<id>`` or REFERENCE
    language: str
    cells: list[tuple[str, str]]  # (exercise, code): the exercise's grade_id, or "" for an added cell
    symbols: str = ""
    spans: list[tuple[int, int, int]] = dataclasses.field(default_factory=list)  # token -> (cell, start, end)
    prints: dict[int, list[int]] = dataclasses.field(default_factory=dict)  # fingerprint -> token positions
    lengths: dict[int, int] = dataclasses.field(default_factory=dict)  # fingerprint -> tokens it covers


@functools.cache
def _category(kind):
    """Pygments' token type ``kind`` as what :func:`tokens` tells apart: None (nothing: space,
    comment, docstring), ``String``, ``Number``, ``Name`` (a name that is not a builtin) or itself."""
    if kind in Whitespace or kind in Text or kind in Comment or kind in String.Doc:
        return None
    for category in (String, Number):
        if kind in category:
            return category
    return Name if kind in Name and kind not in Name.Builtin else kind


def tokens(code: str, known: set[str]) -> list[tuple[str, int, int]]:
    """``code``'s tokens as ``(symbol, start, end)``, normalised (see the module's docstring);
    ``known``: names that keep their spelling (the modules the notebook imports). A keyword
    argument's name (``dim=``) keeps its spelling: it is the library's, not the student's."""
    raw: list[list] = []  # [kind, text, start, end]; a string's pieces (quotes, escapes, f-string parts) merged
    for start, kind, text in _LEXER.get_tokens_unprocessed(code):
        kind = _category(kind)
        if kind is None:
            if "\n" in text:
                raw.append([None, "\n", start, start + len(text)])  # a statement may end here
            continue
        if kind is String:  # pieces of one string, or strings written one after the other: one
            while raw and raw[-1][0] is None and len(raw) > 1 and raw[-2][0] is String:
                raw.pop()
            if raw and raw[-1][0] is String:
                raw[-1][3] = start + len(text)
                continue
        raw.append([kind, text, start, start + len(text)])
    out: list[tuple[str, int, int]] = []
    depth, signature = 0, None  # in a def's or lambda's parameters (from this depth), ``name=`` is the student's
    for i, (kind, text, start, end) in enumerate(raw):
        if kind is None:  # a line's end: a statement's, outside brackets
            if depth == 0 and out and out[-1][0] != _SEPARATOR:
                out.append((_SEPARATOR, start, start))
            continue
        if kind is String:
            symbol = "S"
        elif kind is Number:
            symbol = "N"
        elif kind is Name and text not in _BUILTINS:
            after_dot = i > 0 and raw[i - 1][1] == "."
            keyword_argument = depth > 0 and signature is None and i + 1 < len(raw) and raw[i + 1][1] == "="
            if after_dot and not (i > 1 and raw[i - 2][1] == "self"):
                symbol = _SYMBOLS["." + text]  # a library's or a tensor's attribute: X.mean
            elif not after_dot and (text in known or keyword_argument):
                symbol = _SYMBOLS[text]  # torch, np, F, nn, math; a keyword argument
            else:
                symbol = "V"
        else:
            if len(text) == 1 and text in "([{":
                depth += 1
            elif len(text) == 1 and text in ")]}":
                depth = max(depth - 1, 0)
            elif text in ("def", "lambda"):
                signature = depth
            elif text == ":" and depth == signature:
                signature = None
            symbol = _SYMBOLS[text]
        out.append((symbol, start, end))
        if text in (":", ";") and depth == 0:  # a compound statement's header, or ``a; b``: a statement
            out.append((_SEPARATOR, end, end))
    return out


_BASE = np.uint64(0x100000001B3)


def _hashes(symbols: str, k: int) -> np.ndarray:
    """A hash of every run of ``k`` symbols of ``symbols`` (a polynomial over their code points,
    modulo 2**64), the same in every process: copydetect's ``hashed_kgrams`` uses Python's
    ``hash()``, which each process salts (``PYTHONHASHSEED``), so its winnowing would pick other
    fingerprints, and list other pairs, on every run."""
    codes = np.frombuffer(symbols.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    count = len(codes) - k + 1
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    with np.errstate(over="ignore"):
        value = np.full(count, np.uint64(k))
        for offset in range(k):
            value = value * _BASE + codes[offset:offset + count]
    return value.view(np.int64)


def fingerprints(symbols: str, winnowed: bool = True, runs: bool = True):
    """``(hash, position, length)`` of ``symbols`` (a normalised code, statements ended by the
    separator): each statement of :data:`MIN_STATEMENT` to :data:`K` tokens whole; a longer one,
    with ``runs`` (code that Python cannot parse, which has no expressions to fingerprint), as its
    runs of K tokens chosen by copydetect's winnowing (all of them unless ``winnowed``), and
    without, not at all (its expressions are its fingerprints: :func:`_expression_prints`). No
    fingerprint spans two statements, so reordered statements keep theirs."""
    at = 0
    for statement in symbols.split(_SEPARATOR):
        if len(statement) > K and runs:
            hashes = _hashes(statement, K)
            if winnowed:
                # imported here: copydetect's package imports matplotlib.pyplot (0.7 CPU-s on this machine),
                # which a grading process pays only when this step runs
                from copydetect.utils import winnow

                hashes, where = winnow(hashes, WINDOW, remove_duplicates=False)
            else:
                where = np.arange(len(hashes))
            yield from ((value, at + w, K) for value, w in zip(hashes.tolist(), where.tolist()))
        elif MIN_STATEMENT <= len(statement) <= K:
            yield _hash(statement), at, len(statement)
        at += len(statement) + 1


def imported_names(codes: list[str]) -> set[str]:
    """The names that the import statements of ``codes`` bind (``torch``, ``F``, ``nn``)."""
    found: set[str] = set()
    for code in codes:
        for match in re.finditer(r"^\s*(?:from\s+\S+\s+)?import\s+(.+)$", code, re.M):
            for part in match.group(1).strip("()").split(","):
                words = part.split()
                if words:
                    found.add(words[-1].split(".")[0] if "as" not in words else words[words.index("as") + 1])
    return found


def _hash(symbols: str) -> int:
    """:func:`_hashes`'s hash of the whole of ``symbols`` (one run), as a signed 64-bit integer."""
    value = len(symbols)
    for c in symbols:
        value = (value * 0x100000001B3 + ord(c)) & 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value >= 1 << 63 else value


def _comprehended(node: ast.AST) -> tuple[ast.AST, ast.AST, ast.AST] | None:
    """``(target, iterable, element)`` of a comprehension with one ``for`` and no condition, or of
    a loop whose body only appends one element to a list (``for t in it: out.append(e)``): the
    same construction written two ways."""
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)) and len(node.generators) == 1 \
            and not node.generators[0].ifs and not node.generators[0].is_async:
        return node.generators[0].target, node.generators[0].iter, node.elt
    if isinstance(node, ast.For) and not node.orelse and len(node.body) == 1 and isinstance(node.body[0], ast.Expr):
        call = node.body[0].value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "append" \
                and len(call.args) == 1 and not call.keywords:
            return node.target, node.iter, call.args[0]
    return None


def subexpressions(code: str, spans: list[tuple[int, int]]) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """``(first, end, parts)`` for every expression of ``code`` (Python's own parse: each call,
    operation, subscript and each of their operands), ``spans`` being its tokens' character
    ranges (:func:`tokens`): the expression's token range, and the ranges whose tokens make its
    fingerprint (its own range; for a comprehension or a loop that appends, :func:`_comprehended`'s
    target, iterable and element, in that order, so that the two ways have one fingerprint).
    Nothing when ``code`` does not parse (an IPython magic, a syntax error: its statements are
    still fingerprinted). An expression is the same whatever holds it: a body moved into a
    helper, a statement moved elsewhere."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    lines = code.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    firsts = [start for start, _ in spans]

    def offset(line: int, column: int) -> int:  # ast's columns count UTF-8 bytes
        text = lines[line - 1] if line - 1 < len(lines) else ""
        return starts[line - 1] + (column if text.isascii() else len(text.encode()[:column].decode(errors="ignore")))

    def tokens_of(node: ast.AST) -> tuple[int, int]:
        return (bisect.bisect_left(firsts, offset(node.lineno, node.col_offset)),
                bisect.bisect_left(firsts, offset(node.end_lineno, node.end_col_offset)))

    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.expr, ast.For)) or isinstance(node, (ast.Name, ast.Constant)) \
                or not node.end_lineno:
            continue
        first, end = tokens_of(node)
        parts = _comprehended(node)
        if parts is not None:
            out.append((first, end, [tokens_of(part) for part in parts]))
        elif isinstance(node, ast.expr):
            out.append((first, end, [(first, end)]))
    return out


def _fill(doc: Document, known: set[str], boilerplate: set[int]) -> Document:
    """``doc``'s symbols, spans and fingerprints: per cell, when it parses, its short statements and
    every expression (each fingerprint a whole unit of the syntax, never a run of tokens cut
    across two: a run that straddles a comprehension's ``for`` is lost when the loop is
    rewritten, the expressions are not); when it does not, its statements and winnowed runs."""
    pieces, spans, found = [], [], []
    for index, (_, code) in enumerate(doc.cells):
        cell = tokens(code, known)
        expressions = _expression_prints(code, cell, len(pieces))
        symbols = "".join(s for s, _, _ in cell)
        found += [(v, len(pieces) + at, n) for v, at, n in fingerprints(symbols, runs=not expressions)]
        found += expressions
        for symbol, start, end in cell:
            pieces.append(symbol)
            spans.append((index, start, end))
        pieces.append(_SEPARATOR)
        spans.append((index, len(code), len(code)))
    doc.symbols, doc.spans = "".join(pieces), spans
    for value, position, length in found:
        if value not in boilerplate:
            doc.prints.setdefault(value, []).append(position)
            doc.lengths[value] = length
    return doc


def _expression_prints(code: str, cell: list[tuple[str, int, int]], at: int = 0):
    """``(hash, position, length)`` of each expression of ``code`` (:func:`subexpressions`) of at
    least :data:`MIN_STATEMENT` tokens, ``cell`` being its tokens (:func:`tokens`), positions
    counted from ``at``."""
    out = []
    for first, end, parts in subexpressions(code, [(start, stop) for _, start, stop in cell]):
        symbols = _SEPARATOR.join("".join(s for s, _, _ in cell[a:b] if s != _SEPARATOR) for a, b in parts)
        if len(symbols) >= MIN_STATEMENT:
            out.append((_hash(symbols), at + first, end - first))
    return out


def boilerplate_of(notebooks: list[dict], known: set[str]) -> set[int]:
    """Every fingerprint of every code cell of ``notebooks`` (the released notebooks and the
    source's given cells; all runs of K tokens, not only the winnowed ones, and every expression):
    what no student wrote."""
    found: set[int] = set()
    for nb in notebooks:
        for cell in nb.get("cells", []):
            if cell.get("cell_type") == "code":
                code = assemble._student_code(cell)
                cut = tokens(code, known)
                symbols = "".join(s for s, _, _ in cut)
                found.update(value for value, _, _ in fingerprints(symbols, winnowed=False))
                found.update(value for value, _, _ in _expression_prints(code, cut))
    return found


# ----------------------------------------------------------------------------- reading


class Reason(dict):
    """Why a submission was not compared: ``reason`` (the English), ``why`` (the catalog's
    message) and ``args`` (its fields), so that a page shows it in its own language."""

    def __init__(self, why: str, **args):
        super().__init__(reason=why.format(**args), why=why, args=args)



def read_notebook(path: Path) -> tuple[dict | None, Reason | None]:
    """The notebook at ``path`` as JSON, or None and why not (never raises for its content)."""
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            return None, Reason(N_("{name} is {size} MB, over the {limit} MB a notebook may be"),
                                name=path.name, size=round(size / 2**20), limit=MAX_BYTES // 2**20)
        if size == 0:
            return None, Reason(N_("{name} is empty"), name=path.name)
        nb = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        return None, Reason(N_("{name} is not a valid notebook: {error}"), name=path.name,
                            error=f"{type(err).__name__}: {str(err)[:200]}")
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list) or not all(isinstance(c, dict) for c in nb["cells"]):
        return None, Reason(N_("{name} is not a valid notebook: {error}"), name=path.name, error="no list of cells")
    return nb, None


def _own_cells(source: dict, nb: dict, name: str) -> tuple[list[tuple[str, str]], Reason | None]:
    try:
        own = [(grade_id or "", code) for grade_id, code in assemble.own_code(source, nb)]
    except (AttributeError, TypeError) as err:  # a cell that is no dict, a source that is no text
        return [], Reason(N_("{name} is not a valid notebook: {error}"), name=name, error=f"{type(err).__name__}: {err}")
    if not any(grade_id for grade_id, _ in own):
        return [], Reason(N_("{name} has no solution cell of this assignment (a notebook of another assignment, "
                             "or its cells' nbgrader metadata removed)"), name=name)
    if sum(len(code) for _, code in own) > MAX_CODE_CHARS:
        return [], Reason(N_("{name} holds over {limit} characters of code of its own"), name=name,
                          limit=f"{MAX_CODE_CHARS:,}")
    return own, None


@dataclasses.dataclass
class Assignment:
    """What the course knows of an assignment: its source notebooks, what they release, the
    reference solution's own code."""

    name: str
    sources: dict[str, dict]  # notebook file name -> source notebook (solutions/)
    known: set[str]
    boilerplate: set[int]
    given: set[str]  # the released notebooks' code cells, stripped: an added cell that is one is not shown

    @classmethod
    def load(cls, name: str) -> Assignment:
        sources = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in layout.source_notebooks(name)}
        released = [layout.NOTEBOOKS / name / n for n in sources]
        released += [layout.NOTEBOOKS / language / name / n for language in i18n.LANGUAGES for n in sources]
        notebooks = [json.loads(p.read_text(encoding="utf-8")) for p in released if p.is_file()]
        # the source notebooks' given cells (setup, tests), which the released ones hold too
        notebooks += [{"cells": [c for c in nb["cells"] if assemble.kind_of(c) != "solution"]} for nb in sources.values()]
        codes = [assemble._student_code(c) for nb in notebooks for c in nb["cells"] if c.get("cell_type") == "code"]
        known = imported_names(codes)
        return cls(name, sources, known, boilerplate_of(notebooks, known), {code.strip() for code in codes})

    def document(self, key: str, folder: Path) -> tuple[Document | None, Reason | None]:
        """The submission in ``folder`` as a :class:`Document`, or None and why it was skipped."""
        cells: list[tuple[str, str]] = []
        languages = set()
        for name, source in self.sources.items():
            path = folder / name
            if not path.is_file():
                present = sorted(p.name for p in folder.glob("*.ipynb"))
                return None, Reason(N_("missing notebook {name} (submitted: {present})"), name=name,
                                    present=", ".join(present) or "—")
            nb, problem = read_notebook(path)
            if nb is None:
                return None, problem
            own, problem = _own_cells(source, nb, name)
            if problem:
                return None, problem
            cells += [(grade_id, code) for grade_id, code in own if grade_id or code.strip() not in self.given]
            languages.add(i18n.notebook_language(nb.get("metadata")))
        return self.fill(Document(key, "+".join(sorted(languages)), cells)), None

    def reference(self) -> Document:
        cells = [(assemble._meta(c).get("grade_id"), assemble._student_code(c))
                 for nb in self.sources.values() for c in nb["cells"]
                 if assemble.kind_of(c) == "solution" and c.get("cell_type") == "code"]
        return self.fill(Document(REFERENCE, i18n.ENGLISH, cells))

    def fill(self, doc: Document) -> Document:
        return _fill(doc, self.known, self.boilerplate)


# ----------------------------------------------------------------------------- scoring


def threshold(best: np.ndarray) -> float:
    """The batch's own bar, from ``best``: each submission's highest score against the others.
    Scores are read as what is left unshared, ``1 - score`` (at least :data:`FLOOR`), on a log
    scale; a score is unusual when that is more than :data:`Z` robust standard deviations
    (1.4826 times the median absolute deviation) below the median of the batch's best matches.
    Returned as a score; infinite with fewer than :data:`MIN_CLASS` submissions (too few for a
    distribution: nothing is listed, the pairs are only ranked)."""
    if len(best) < MIN_CLASS:
        return float("inf")
    left = np.log(np.maximum(1.0 - np.asarray(best), FLOOR))
    median = float(np.median(left))
    spread = max(1.4826 * float(np.median(np.abs(left - median))), MIN_SPREAD)
    return float(1.0 - np.exp(median - Z * spread))


def _counts(docs: list[Document]) -> dict[int, int]:
    """How many of ``docs`` hold each fingerprint."""
    counts: dict[int, int] = {}
    for doc in docs:
        for value in doc.prints:
            counts[value] = counts.get(value, 0) + 1
    return counts


def _weights(docs: list[Document]) -> dict[int, float]:
    """``1 / (d - 1)`` for each fingerprint that ``d >= 2`` of ``docs`` hold."""
    return {value: 1.0 / (n - 1) for value, n in _counts(docs).items() if n >= 2}


def _mass(doc: Document, weights: dict[int, float]) -> float:
    """What ``doc`` could share at most: its fingerprints' weights (one held by it alone: 1)."""
    return sum(weights.get(value, 1.0) for value in doc.prints)


def pair_scores(docs: list[Document], weights: dict[int, float]) -> np.ndarray:
    """The weight each pair of ``docs`` shares (a symmetric matrix, zero diagonal)."""
    holders: dict[int, list[int]] = {}
    for i, doc in enumerate(docs):
        for value in doc.prints:
            if value in weights:
                holders.setdefault(value, []).append(i)
    shared = np.zeros((len(docs), len(docs)))
    for value, who in holders.items():
        index = np.array(who)
        shared[np.ix_(index, index)] += weights[value]
    np.fill_diagonal(shared, 0.0)
    return shared


def _against_reference(docs: list[Document], reference: Document, counts: dict[int, int], bar: float) -> list[Pair]:
    """Each of ``docs`` against the reference solution, a source of its own: a fingerprint of the
    reference weighs ``1 / d``, ``d`` the submissions that hold it (none: 1), and a submission's
    score is the weight it holds over the smaller of its own mass (the same weights) and the
    reference's. Listed over two bars: the pairs' ``bar`` (as alike as a copy and its original)
    and the class's own scores against the reference (:func:`threshold`): a leaked solution
    matches the reference far more than the class does. The least weight shared is
    :data:`MIN_SHARED`, or half the reference's mass when that is less: a reference written the
    common way (its fingerprints held by many) has little that is unusual, and a leak holds all
    of it."""
    held = {v: 1.0 / max(counts.get(v, 0), 1) for v in reference.prints}
    mass = sum(held.values())
    amount = np.array([sum(held[v] for v in d.prints if v in held) for d in docs])
    own = np.array([sum(1.0 / counts[v] for v in d.prints) for d in docs])
    # at least one fingerprint's worth (or the whole reference): as a pair's mass, :func:`compare`
    scores = amount / np.maximum(np.minimum(own, mass), min(1.0, mass))
    bar = max(bar, threshold(scores))
    least = min(MIN_SHARED, mass / 2)
    return [Pair(d, reference, float(s), float(a), bar, bool(s > bar and a >= least))
            for d, s, a in zip(docs, scores, amount) if a > 0]


@dataclasses.dataclass
class Pair:
    a: Document
    b: Document
    score: float
    shared: float  # the weight the two share
    threshold: float  # the batch's bar for this kind of pair
    listed: bool

    @property
    def kind(self) -> str:
        if self.b.key == REFERENCE:
            return "reference"
        return "archive" if self.b.key.startswith(ARCHIVE_PREFIX) else "pair"


def compare(docs: list[Document], reference: Document | None = None, archive: list[Document] = (),
            keep: int = CONTEXT_PAIRS) -> tuple[list[Pair], float]:
    """The listed pairs of ``docs`` (and of each doc with ``reference`` and the ``archive``),
    then the ``keep`` highest-scoring others, in order; and the batch's threshold. A pair's score:
    the weight it shares over the smaller of the two's masses (:func:`_mass`), 1 when one holds
    nothing unusual that the other does not (a copy that added code of its own scores 1 too); it
    is listed when the score is over the :func:`threshold` that the class's best matches set and
    it shares at least :data:`MIN_SHARED`."""
    everyone = list(docs) + list(archive)
    weights = _weights(everyone)
    mass = np.array([max(_mass(d, weights), 1.0) for d in everyone])
    shared = pair_scores(everyone, weights)
    scores = shared / np.minimum.outer(mass, mass)
    n = len(docs)
    bar = threshold(scores[:n, :n].max(axis=1)) if n > 1 else float("inf")
    first, second = np.triu_indices(len(everyone), 1)
    some = (shared[first, second] > 0) & (first < n)  # archive with archive: not this year's question
    first, second = first[some], second[some]
    found = [(everyone[i], everyone[j], scores[i, j], shared[i, j]) for i, j in zip(first.tolist(), second.tolist())] \
        if len(first) <= 10 * keep else []
    if len(first) > 10 * keep:  # a big class: the listed pairs and the best of the rest, not every pair
        score, amount = scores[first, second], shared[first, second]
        chosen = np.flatnonzero((score > bar) & (amount >= MIN_SHARED))
        rest = np.argsort(-score, kind="stable")[:len(chosen) + keep]
        for k in sorted(set(chosen.tolist()) | set(rest.tolist())):
            found.append((everyone[first[k]], everyone[second[k]], score[k], amount[k]))
    pairs = [Pair(a, b, float(s), float(x), bar, bool(s > bar and x >= MIN_SHARED)) for a, b, s, x in found]
    if reference is not None and reference.prints and docs:
        pairs += _against_reference(docs, reference, _counts(everyone), bar)
    pairs.sort(key=lambda p: (not p.listed, -p.score, p.a.key, p.b.key))
    listed = sum(p.listed for p in pairs)
    pairs = pairs[:listed + keep]
    return pairs, bar


# ----------------------------------------------------------------------------- regions


def _merged(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def regions(pair: Pair, weights: dict[int, float]) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
    """The matched regions of both sides: ``(first token, end token, twin)`` lists, where
    ``twin`` is the index of the other side's region that holds most of its fingerprints (-1:
    none). Only fingerprints held by at most :data:`RARE` submissions are highlighted (the common
    ones are not evidence)."""
    rare = [v for v in pair.a.prints.keys() & pair.b.prints.keys() if weights.get(v, 1.0) >= 1.0 / (RARE - 1)]
    docs = (pair.a, pair.b)
    sides = [_merged([(p, p + doc.lengths[v]) for v in rare for p in doc.prints[v]]) for doc in docs]
    out = []
    for mine, (doc, other) in enumerate((docs, docs[::-1])):
        marked = []
        for start, end in sides[mine]:
            votes: dict[int, int] = {}
            for v in rare:
                if any(start <= p < end for p in doc.prints[v]):
                    for q in other.prints[v]:
                        twin = next((i for i, (s, e) in enumerate(sides[1 - mine]) if s <= q < e), -1)
                        votes[twin] = votes.get(twin, 0) + 1
            marked.append((start, end, max(votes, key=votes.get) if votes else -1))
        out.append(marked)
    return out[0], out[1]


def exercises_of(doc: Document, marked: list[tuple[int, int, int]]) -> list[str]:
    """The exercises (grade_ids) whose cells the regions ``marked`` of ``doc`` touch."""
    found = []
    for start, end, _ in marked:
        for token in range(start, min(end, len(doc.spans))):
            exercise = doc.cells[doc.spans[token][0]][0] or N_("cells the student added")
            if exercise not in found:
                found.append(exercise)
    return found


# ----------------------------------------------------------------------------- the batch


def _finite(value: float) -> float | None:
    """``value`` rounded for the report; None for no bar (too few pairs: JSON has no infinity)."""
    return round(value, 4) if np.isfinite(value) else None


def _slug(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key)


def _batch(folder: Path, skipped: list[dict], what: str = "submissions") -> dict[str, list[tuple[str, Path]]]:
    """``{assignment: [(student, folder)]}`` under ``folder``; what cannot be compared goes to
    ``skipped`` with its reason. ``what``: the folder's name in the error for a missing one."""
    known = set(layout.assignments())
    found: dict[str, list[tuple[str, Path]]] = {}
    if not folder.is_dir():
        raise course.GradingError(f"{what} folder {folder} does not exist or is not a folder")
    for student in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        folders = sorted(p for p in student.iterdir() if p.is_dir() and not p.name.startswith("."))
        if not folders:
            skipped.append({"student": student.name, "assignment": "", **Reason(N_("no submission"))})
        for sub in folders:
            if sub.name in known:
                found.setdefault(sub.name, []).append((student.name, sub))
            else:
                skipped.append({"student": student.name, "assignment": sub.name,
                                **Reason(N_("not an assignment of the course: {name}"), name=sub.name)})
    return found


def run(submissions: Path, out: Path, archive: Path | None = None, language: str = i18n.ENGLISH) -> dict:
    """Compare the batch under ``submissions`` (and ``archive``, earlier years' submissions in
    the same layout) per assignment; write ``OUT/similarity.json``, ``OUT/similarity.csv`` and
    the pages of the listed pairs; return the report (what ``similarity.json`` holds)."""
    skipped: list[dict] = []
    batch = _batch(submissions, skipped)
    old = _batch(archive, [], "archive") if archive is not None else {}
    pages = out / "similarity"
    if pages.exists():
        for page in pages.glob("*/*.html"):
            page.unlink()
    report = {"language": language, "assignments": {}, "skipped": skipped}
    for name, students in sorted(batch.items()):
        assignment = Assignment.load(name)
        docs = []
        for student, folder in students:
            doc, problem = assignment.document(student, folder)
            if doc is None:
                skipped.append({"student": student, "assignment": name, **problem})
            else:
                docs.append(doc)
        earlier = [d for d, _ in (assignment.document(ARCHIVE_PREFIX + s, f) for s, f in old.get(name, [])) if d]
        pairs, bar = compare(docs, assignment.reference(), earlier)
        weights = _weights(docs + earlier)
        entries = []
        for pair in pairs:
            left, right = regions(pair, weights)
            entry = {"kind": pair.kind, "a": pair.a.key, "b": pair.b.key, "score": round(pair.score, 4),
                     "threshold": _finite(pair.threshold), "shared": round(pair.shared, 2), "listed": pair.listed,
                     "exercises": [e for e in exercises_of(pair.a, left) if e]}
            if pair.listed:
                page = pages / name / f"{_slug(pair.a.key)}--{_slug(pair.b.key)}.html"
                page.parent.mkdir(parents=True, exist_ok=True)
                page.write_text(render_pair(name, pair, left, right, entry, language), encoding="utf-8")
                entry["page"] = page.relative_to(out).as_posix()
            entries.append(entry)
        report["assignments"][name] = {"compared": len(docs), "archive": len(earlier),
                                       "threshold": _finite(bar), "pairs": entries}
    out.mkdir(parents=True, exist_ok=True)
    (out / "similarity.json").write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    with open(out / "similarity.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["assignment", "kind", "student_a", "student_b", "score", "threshold", "shared", "listed",
                         "exercises", "page"])
        for name, found in report["assignments"].items():
            for e in found["pairs"]:
                writer.writerow([name, e["kind"], e["a"], e["b"], e["score"], e["threshold"], e["shared"],
                                 e["listed"], "; ".join(e["exercises"]), e.get("page", "")])
    return report


# ----------------------------------------------------------------------------- the pages


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 110em; color: #222; padding: 0 1em; }
.sides { display: grid; grid-template-columns: 1fr 1fr; gap: 1.5em; }
.sides > section { min-width: 0; }
pre { background: #f6f6f6; padding: 0.6em; white-space: pre-wrap; word-break: break-word; font-size: 0.85em; }
mark { background: #fff0a0; color: #222; text-decoration: underline; text-decoration-thickness: 2px; }
a.twin { font-size: 0.8em; font-weight: bold; color: #0645ad; text-decoration: underline; margin-right: 0.2em; }
a.twin:focus { outline: 2px solid #222; }
:target + mark, :target mark { outline: 3px solid #222; }
h3 { font-size: 1em; margin: 1.2em 0 0.3em; }
.muted { color: #595959; }
"""


def _shown(bar: float | None) -> str:
    return "—" if bar is None else f"{bar:.2f}"


def _html_lang(language: str) -> str:
    return language.replace("_", "-")


def _code(doc: Document, marked: list[tuple[int, int, int]], mine: str, theirs: str) -> list[str]:
    """``doc``'s cells as HTML, each region of ``marked`` highlighted and linked to its twin."""
    pieces: dict[int, list[tuple[int, int, int, bool]]] = {}  # cell -> (start, end, region, first piece)
    for number, (start, end, _) in enumerate(marked):
        by_cell: dict[int, list[int]] = {}
        for token in range(start, min(end, len(doc.spans))):
            cell, a, b = doc.spans[token]
            if doc.symbols[token] != _SEPARATOR:
                by_cell.setdefault(cell, []).extend((a, b))
        for k, (cell, offsets) in enumerate(sorted(by_cell.items())):
            pieces.setdefault(cell, []).append((min(offsets), max(offsets), number, k == 0))
    return [_cell_html(code, sorted(pieces.get(i, [])), marked, mine, theirs)
            for i, (_, code) in enumerate(doc.cells)]


def _cell_html(code: str, pieces, marked, mine: str, theirs: str) -> str:
    out, at = [], 0
    for start, end, number, first in pieces:
        start = max(start, at)
        out.append(html.escape(code[at:start]))
        twin = marked[number][2]
        if first:
            label = f"{mine}{number + 1}" + (f"→{theirs}{twin + 1}" if twin >= 0 else "")
            target = f' href="#{theirs}{twin + 1}"' if twin >= 0 else ""
            out.append(f'<span id="{mine}{number + 1}"><a class="twin"{target}>[{label}]</a></span>')
        out.append(f"<mark>{html.escape(code[start:end])}</mark>")
        at = end
    out.append(html.escape(code[at:]))
    return "".join(out)


def render_pair(assignment: str, pair: Pair, left, right, entry: dict, language: str) -> str:
    """The page of one listed pair: both submissions' own code side by side."""
    t = catalogs.words(language)
    title = t(N_("Unusually similar: {a} and {b}")).format(a=pair.a.key, b=pair.b.key)
    if pair.kind == "reference":
        title = t(N_("Unusually similar to the reference solution: {a}")).format(a=pair.a.key)
    parts = ["<!doctype html>", f'<html lang="{_html_lang(language)}"><head><meta charset="utf-8">',
             f"<title>{html.escape(title)}</title>", f"<style>{_STYLE}</style></head><body><main>",
             f"<h1>{html.escape(title)}</h1>",
             "<p>" + html.escape(t(N_(
                 "Assignment {assignment}: score {score:.2f} (this batch's threshold {threshold}). Look at "
                 "these two: their own code shares more than this class's pairs do. This is not a verdict."
             )).format(assignment=assignment, score=pair.score, threshold=_shown(entry["threshold"]))) + "</p>",
             "<p>" + html.escape(t(N_(
                 "Highlighted and underlined, with a bracketed label: the code of one side found in the other, "
                 "after names, comments, whitespace and literals are set aside, and only where few submissions "
                 "of the batch share it. Each label links to the region's twin on the other side. The code the "
                 "released notebook gives (signatures, docstrings, tests) never counts."))) + "</p>",
             '<div class="sides">']
    for doc, marked, mine, theirs in ((pair.a, left, "A", "B"), (pair.b, right, "B", "A")):
        name = t(N_("the reference solution")) if doc.key == REFERENCE else doc.key
        parts.append(f'<section aria-labelledby="side{mine}"><h2 id="side{mine}">{mine}: {html.escape(name)}</h2>')
        if doc.key != REFERENCE:
            parts.append('<p class="muted">' + html.escape(t(N_("notebook language: {language}")).format(
                language=i18n.LANGUAGES.get(doc.language, doc.language))) + "</p>")
        for (exercise, _), body in zip(doc.cells, _code(doc, marked, mine, theirs)):
            heading = exercise or t(N_("a cell the student added"))
            parts.append(f"<h3>{html.escape(heading)}</h3><pre><code>{body}</code></pre>")
        parts.append("</section>")
    parts += ["</div></main></body></html>"]
    return "\n".join(parts)


def section(report: dict | None) -> str:
    """The section of ``summary.html`` for ``report`` (:func:`run`'s), in the report's language."""
    if not report:
        return ""
    language = report.get("language", i18n.ENGLISH)
    t = catalogs.words(language)
    heading = t(N_("Unusually similar submissions: look at these"))
    out = [f'<section lang="{_html_lang(language)}" aria-labelledby="similarity">',
           f'<h2 id="similarity">{html.escape(heading)}</h2>',
           "<p>" + html.escape(t(N_(
               "Pairs whose own code (solution cells and added cells, without what the released notebook gives) "
               "shares more than the batch's own pairs do, after fingerprints shared by many students are "
               "discounted. A score over the threshold asks for a human look; it is not a verdict."))) + "</p>"]
    kinds = {"pair": N_("two students"), "archive": N_("an earlier year's submission"),
             "reference": N_("the reference solution")}
    for name, found in report["assignments"].items():
        listed = [e for e in found["pairs"] if e["listed"]]
        out.append(f"<h3>{html.escape(name)}</h3><p>" + html.escape(t(N_(
            "{compared} submissions compared ({archive} of earlier years); threshold {threshold}; "
            "{listed} listed.")).format(compared=found["compared"], archive=found["archive"],
                                        threshold=_shown(found["threshold"]), listed=len(listed))) + "</p>")
        if not listed:
            continue
        out.append("<table><tr>" + "".join(f"<th>{html.escape(t(h))}</th>" for h in (
            N_("submission"), N_("similar to"), N_("which is"), N_("score"), N_("exercises they share"), N_("page")))
            + "</tr>")
        side_by_side = t(N_("side by side"))
        for e in listed:
            other = t(N_("the reference solution")) if e["kind"] == "reference" else e["b"]
            shared = ", ".join(t(x) for x in e["exercises"]) or "—"
            link = f'<a href="{html.escape(e["page"])}">{html.escape(side_by_side)}</a>'
            out.append(f"<tr><td>{html.escape(e['a'])}</td><td>{html.escape(other)}</td>"
                       f"<td>{html.escape(t(kinds[e['kind']]))}</td><td class=\"num\">{e['score']:.2f}</td>"
                       f"<td>{html.escape(shared)}</td><td>{link}</td></tr>")
        out.append("</table>")
    if report["skipped"]:
        skipped = t(N_("Not compared"))
        out.append(f"<h3>{html.escape(skipped)}</h3><table><tr>" + "".join(
            f"<th>{html.escape(t(h))}</th>" for h in (N_("student"), N_("assignment"), N_("reason"))) + "</tr>")
        for s in report["skipped"]:
            out.append(f"<tr><td>{html.escape(s['student'])}</td><td>{html.escape(s['assignment'])}</td>"
                       f"<td>{html.escape(t(s['why']).format(**s['args']))}</td></tr>")
        out.append("</table>")
    out.append("</section>")
    return "\n".join(out)
