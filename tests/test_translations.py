"""The Chinese edition's catalogs (``locale/zh_CN/LC_MESSAGES/**/*.po``) are complete, current,
and follow docs/translating.md wherever a machine can tell.

* **Complete and current.** The templates of the book's catalogs are made again into a temporary
  folder (``python -m courseware pot``: Sphinx's gettext builder, nothing executed, a few
  seconds) and compared with the catalogs: a paragraph of the English that its catalog lacks
  (missing), an entry whose English is gone (stale), a page without a catalog or a catalog
  without a page fail, and so does, in every catalog, an empty or fuzzy entry. Each failure names
  the catalog, the page and the paragraph (its first words and its ``#:`` location). The fix is
  ``make translations``, then translating what is listed.
* **Style** (translated entries): full-width punctuation after a Chinese character; one
  half-width space between Chinese and Latin letters, digits, inline code or math, none beside
  full-width punctuation; the markup of the English kept (the same code spans, formulas, link and
  role targets, footnotes, as many bold and emphasis marks, and in an entry flagged
  ``python-format`` or ``python-brace-format`` the same fields a program fills in).
* **Terms**: every glossary table (``| English | 中文 |``) of the English pages agrees with
  ``locale/zh_CN/terms.csv``; an entry whose English uses a listed term uses the listed Chinese
  term (a translator comment ``# not a term: <English term>: <why>`` exempts one entry where the
  word means something else, e.g. a GPU's memory); a term's ``also_in_use`` is mentioned at most
  once in the whole edition, on the page that first explains the term.
"""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest
from babel.messages.catalog import Catalog, Message
from babel.messages.pofile import read_po, write_po

from courseware.translatable import code_names

REPO = Path(__file__).resolve().parent.parent
LOCALE = REPO / "locale" / "zh_CN"
CATALOGS = LOCALE / "LC_MESSAGES"
TERMS = LOCALE / "terms.csv"
#: where ``make translations`` writes the templates: the catalogs' ``#:`` locations are relative to it
TEMPLATE_DIR = REPO / "_build" / "gettext"
#: Commands that write templates into ``{dest}``, at the paths their catalogs have under
#: ``LC_MESSAGES`` (``book/<page>.pot`` for ``book/<page>.po``). A family of catalogs whose
#: templates a command makes adds it here; the others are checked entry by entry only.
TEMPLATE_COMMANDS = [
    [sys.executable, "-m", "courseware", "pot", "{dest}"],
]
#: how much of a paragraph a failure quotes
WORDS = 8
SHOWN = 60

# ------------------------------------------------------------------------------ reading catalogs


def catalog_files() -> list[Path]:
    return sorted(CATALOGS.rglob("*.po"))


def load(path: Path) -> Catalog:
    with path.open("rb") as f:
        return read_po(f, locale="zh_CN")


def entries(catalog: Catalog) -> list[Message]:
    """The catalog's messages, without its header and its obsolete (``#~``) entries."""
    return [m for m in catalog if m.id]


def _key(message: Message) -> tuple:
    return (message.context, message.id)


def first_words(text: str) -> str:
    words = " ".join(text.split()).split(" ")
    return " ".join(words[:WORDS]) + (" …" if len(words) > WORDS else "")


def location(message: Message, base: Path = TEMPLATE_DIR) -> str:
    """The message's first ``#:`` location, relative to the repository where it lies in it."""
    if not message.locations:
        return "(no location)"
    filename, line = message.locations[0]
    path = (base / filename).resolve() if not Path(filename).is_absolute() else Path(filename)
    try:
        filename = path.relative_to(REPO).as_posix()
    except ValueError:
        pass
    return f"{filename}:{line}" if line else filename


def name(path: Path) -> str:
    try:
        return path.relative_to(REPO).as_posix()
    except ValueError:
        return path.name


def where(catalog: Path, message: Message, base: Path = TEMPLATE_DIR) -> str:
    """``<catalog>: <page>:<line> "<first words of the English>"``."""
    return f'{name(catalog)}: {location(message, base)} "{first_words(message.id)}"'


# --------------------------------------------------------------------------- complete and current


def write_templates(dest: Path) -> None:
    for command in TEMPLATE_COMMANDS:
        done = subprocess.run([part.replace("{dest}", str(dest)) for part in command],
                              cwd=REPO, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{' '.join(command)} failed:\n{(done.stdout + done.stderr)[-4000:]}"


def entry_problems(path: Path, catalog: Catalog) -> list[str]:
    """Empty and fuzzy entries."""
    problems = []
    for message in entries(catalog):
        if not message.string:
            problems.append(f"{where(path, message)}: not translated")
        elif message.fuzzy:
            problems.append(f"{where(path, message)}: fuzzy: the English changed; check the translation "
                            "against it, then delete the `#, fuzzy` line")
    return problems


def template_problems(path: Path, catalog: Catalog, template: Catalog, template_dir: Path) -> list[str]:
    """Paragraphs of the English that the catalog lacks, and entries whose English is gone."""
    have = {_key(m): m for m in entries(catalog)}
    want = {_key(m): m for m in entries(template)}
    problems = [f"{where(path, m, template_dir)}: missing: the English has this paragraph, the catalog "
                "not (run `make translations`)" for k, m in want.items() if k not in have]
    problems += [f"{where(path, m)}: stale: the English no longer has this paragraph (run `make translations`)"
                 for k, m in have.items() if k not in want]
    return problems


def completeness_problems(catalogs_dir: Path, template_dir: Path | None) -> list[str]:
    """Every problem of the catalogs under ``catalogs_dir`` against the templates in
    ``template_dir`` (None: entry by entry only)."""
    problems = []
    templates = {p.relative_to(template_dir).with_suffix(".po"): p
                 for p in sorted(template_dir.rglob("*.pot"))} if template_dir else {}
    for rel, pot in templates.items():
        if not (catalogs_dir / rel).is_file():
            problems.append(f"{name(catalogs_dir / rel)}: missing catalog of {rel.with_suffix('')} "
                            "(run `make translations`)")
    for path in sorted(catalogs_dir.rglob("*.po")):
        catalog = load(path)
        problems += entry_problems(path, catalog)
        rel = path.relative_to(catalogs_dir)
        if rel in templates:
            with templates[rel].open("rb") as f:
                problems += template_problems(path, catalog, read_po(f), template_dir)
        elif templates and any(rel.parts[0] == t.parts[0] and len(t.parts) > 1 for t in templates):
            # a catalog of the family (book/) whose page is gone
            problems.append(f"{name(path)}: no page {rel.with_suffix('')} in the book any more: delete the catalog")
    return problems


@pytest.fixture(scope="module")
def templates(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("templates") / "gettext"
    write_templates(dest)
    return dest


def _report(problems: list[str], what: str) -> str:
    shown = "\n".join(problems[:SHOWN])
    more = f"\n... and {len(problems) - SHOWN} more" if len(problems) > SHOWN else ""
    return f"{len(problems)} {what}:\n{shown}{more}"


def test_every_catalog_is_complete_and_current(templates):
    assert catalog_files(), f"no catalog under {CATALOGS}"
    assert sorted(templates.rglob("*.pot")), "the book's templates were not made"
    problems = completeness_problems(CATALOGS, templates)
    assert not problems, _report(problems, "entries to translate or update (docs/translating.md)")


# ---------------------------------------------------------------------------------------- style

CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
HAN = re.compile(f"[{CJK}]")
FULL_WIDTH = "，。：；！？“”‘’（）、《》【】…—"
LATIN = "A-Za-z0-9"
OPAQUE = "\x00"  # stands for what is neither Chinese nor Latin text (a cross-reference, display math)

QUOTE = re.compile(r"“[^“”]*”")
ROLE = re.compile(r"\{([\w:-]+)\}`([^`]*)`")
CODE = re.compile(r"(`+)(.+?)\1", re.S)
DISPLAY_MATH = re.compile(r"\$\$(.+?)\$\$", re.S)
INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)((?:\\.|[^$\\])+?)\$")
LINK = re.compile(r"!?\[([^\]]*)\]\(\s*<?([^)\s>]*)>?[^)]*\)")
FOOTNOTE = re.compile(r"\[\^([^\]]+)\]")
BOLD = re.compile(r"\*\*|__")
EMPHASIS = re.compile(r"(?<![\\*])\*(?!\*)")


def _role_target(content: str) -> str:
    explicit = re.search(r"<([^<>]+)>\s*$", content)
    return (explicit.group(1) if explicit else content).strip()


def quoted(text: str) -> list[str]:
    """The outermost “…” spans of ``text``, nested quotes included (“… “I” …” is one span)."""
    spans, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "“":
            start = i if depth == 0 else start
            depth += 1
        elif char == "”" and depth:
            depth -= 1
            if depth == 0:
                spans.append(text[start:i + 1])
    return spans


def quotations(msgid: str, msgstr: str) -> list[str]:
    """The notes' quotations that the translation carries over unchanged: a “…” of the English
    (the English quotes only the notes so), nested quotes and all, kept exactly as written (their
    spacing is the notes', not the translator's)."""
    return [q for q in quoted(msgid) if q in msgstr]


def prose(text: str, keep: list[str] = ()) -> str:
    """``text`` as a reader sees its words: inline code and math become the Latin ``X``, links
    their text, markup marks vanish; the quotations ``keep`` and cross-references become
    ``OPAQUE``."""
    for quote in keep:
        text = text.replace(quote, OPAQUE)
    text = ROLE.sub(lambda m: "X" if m.group(1) == "math" else OPAQUE, text)
    text = CODE.sub("X", text)
    text = DISPLAY_MATH.sub(OPAQUE, text)
    text = INLINE_MATH.sub("X", text)
    text = LINK.sub(lambda m: m.group(1), text)
    text = FOOTNOTE.sub(OPAQUE, text)
    return text.replace("**", "").replace("*", "")


#: catalogs of the words programs write: the course package's and the tests' messages, the figures'
#: labels and printouts. Their code is written without backticks, as in an exercise's docstring.
CODE_CATALOGS = ("messages.po", "autograder.po", "figures.po")
#: the figures' catalog: a printout's entry aligns its columns with runs of spaces, and a label writes
#: its math in Unicode, not ``$...$`` (matplotlib draws math without a CJK font)
FIGURES = "figures.po"
CALL = re.compile(r"[A-Za-z_][\w.]*\(")
#: an ellipsis between Latin text or code (``h(1) … h(S)``): the English's, not Chinese punctuation
LATIN_ELLIPSIS = re.compile(f"(?<=[^\\s{CJK}{FULL_WIDTH}]) … (?=[^\\s{CJK}{FULL_WIDTH}])")


def catalog_kind(path: Path) -> str:
    """The catalog's path under ``LC_MESSAGES`` (``figures.po``, ``book/ch01_attention_pooling.po``)."""
    try:
        return path.relative_to(CATALOGS).as_posix()
    except ValueError:
        return path.name


def calls(text: str) -> list[tuple[int, int]]:
    """``(start of the name, index of the closing parenthesis)`` of each call ``name(...)`` written
    in ``text``, nested parentheses included (``softmax(gaussian_scores(q, k))`` is one), outermost first."""
    found, i = [], 0
    while match := CALL.search(text, i):
        depth = 0
        for j in range(match.end() - 1, len(text)):
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            if depth == 0:
                found.append((match.start(), j))
                i = j + 1
                break
        else:
            i = match.end()  # never closed: not a call
    return found


def style_problems(message: Message, code: bool = False, aligned: bool = False) -> list[str]:
    """What breaks docs/translating.md's punctuation and spacing rules in a translation. ``code``:
    the entry writes code without backticks, so a call's parentheses are the call's, whatever it
    holds (``split_heads(形状为 (2, 3, 6) 的 X, 2)``); ``aligned``: a run of spaces aligns a
    printout's columns (``词元：  {row!r}``)."""
    if not message.string or message.string == message.id or not HAN.search(message.string):
        return []
    text = prose(message.string, quotations(message.id, message.string))
    if code:
        chars = list(text)
        for start, end in calls(text):
            chars[text.index("(", start)] = chars[end] = OPAQUE
        text = "".join(chars)
    if aligned:
        text = re.sub(" {2,}", OPAQUE, text)
    text = LATIN_ELLIPSIS.sub(OPAQUE, text)
    found = []
    for match in re.finditer(f"([{CJK}])([,.:;!?])|([{CJK}])([()\"])|([()\"])([{CJK}])", text):
        found.append(f"half-width {match.group(0)!r}: full-width punctuation in Chinese prose (，。：；！？（）“”)")
    for match in re.finditer(f"[{CJK}][{LATIN}]|[{LATIN}][{CJK}]", text):
        found.append(f"no space in {match.group(0)!r}: one half-width space between Chinese and Latin text, "
                     "digits, code or math")
    for match in re.finditer(f"[{CJK}] {{2,}}[{LATIN}]|[{LATIN}] {{2,}}[{CJK}]", text):
        found.append(f"{match.group(0)!r}: one space, not more")
    # a table row's cell boundary ("） | 值 |") is markup, not prose: no rule about its spacing
    space = (f"(?<![|\\s])[ \t]+[{FULL_WIDTH}]|[{FULL_WIDTH}][ \t]+(?![|\\s])" if message.id.startswith("|")
             else f"[ \t]+[{FULL_WIDTH}]|[{FULL_WIDTH}][ \t]+")
    for match in re.finditer(space, text):
        found.append(f"{match.group(0)!r}: no space beside full-width punctuation")
    return found


def markup(text: str) -> dict[str, Counter]:
    """What a translation must keep of its English: code spans, formulas, the targets of links,
    cross-references and footnotes, the number of bold and emphasis marks."""
    roles = Counter((m.group(1), _role_target(m.group(2))) for m in ROLE.finditer(text))
    rest = ROLE.sub(" ", text)
    code = Counter(m.group(2).strip() for m in CODE.finditer(rest))
    rest = CODE.sub(" ", rest)
    display = Counter(" ".join(m.group(1).split()) for m in DISPLAY_MATH.finditer(rest))
    rest = DISPLAY_MATH.sub(" ", rest)
    inline = Counter(" ".join(m.group(1).split()) for m in INLINE_MATH.finditer(rest))
    rest = INLINE_MATH.sub(" ", rest)
    links = Counter(m.group(2) for m in LINK.finditer(rest))
    footnotes = Counter(FOOTNOTE.findall(rest))
    bold = len(BOLD.findall(rest))
    emphasis = len(EMPHASIS.findall(BOLD.sub("", rest)))
    return {
        "inline code": code, "math": inline + display, "cross-reference targets": roles,
        "link targets": links, "footnotes": footnotes,
        "bold marks": Counter({"**": bold}), "emphasis marks": Counter({"*": emphasis}),
    }


BRACE_FIELD = re.compile(r"(?<!\{)\{[A-Za-z_]?[\w.\[\]]*(?:![rsa])?(?::[^{}]*)?\}(?!\})")
# "%" then a space and a letter is English prose ("90 % of the runs"), not a field: Babel flags such
# an entry python-format all the same, and the translation rightly writes "90 % 的" or drops it.
PERCENT_FIELD = re.compile(r"%(?:\([\w]+\))?(?! +[A-Za-z])[-#0 +]*\d*(?:\.\d+)?[sdifrxXeEgGc%]")


def format_fields(message: Message, text: str) -> Counter:
    """The fields a program fills in (``{name}``, ``%(name)s``) of an entry flagged as a format."""
    fields = Counter()
    if "python-brace-format" in message.flags:
        fields.update(BRACE_FIELD.findall(text))
    if "python-format" in message.flags:
        fields.update(PERCENT_FIELD.findall(text))
    return fields


def markup_problems(message: Message, figure: bool = False, formatted: bool = True) -> list[str]:
    """What the translation changed of the English's markup; ``figure``: a figure's label, whose
    math the translation writes in Unicode (``q·k/√d``), never as ``$...$``; ``formatted``: the
    entry is a program's, whose format fields a program fills (a book page's is not: sphinx-intl
    flags a formula's LaTeX braces, ``\text{output}``, as fields, and the translation says 输出)."""
    if not message.string or message.string == message.id:
        return []
    english, chinese = markup(message.id), markup(message.string)
    if formatted:
        english["format fields"] = format_fields(message, message.id)
        chinese["format fields"] = format_fields(message, message.string)
    found = []
    if figure:
        if chinese["math"]:
            found.append(f"math {sorted(chinese['math'])} in a figure's Chinese text: write it in Unicode "
                         "(q·k/√d): matplotlib draws $...$ without a CJK font")
        english["math"] = chinese["math"] = Counter()
    for kind, want in english.items():
        got = chinese[kind]
        if want != got:
            lost, added = sorted((want - got).elements()), sorted((got - want).elements())
            found.append(f"{kind} differ from the English" + (f"; lost {lost}" if lost else "")
                         + (f"; added {added}" if added else ""))
    return found


def translated(path: Path) -> list[Message]:
    return [m for m in entries(load(path)) if m.string and not m.fuzzy]


def test_translations_follow_the_punctuation_and_spacing_rules():
    problems = [f"{where(p, m)}: {problem}" for p in catalog_files() for m in translated(p)
                for problem in style_problems(m, code=catalog_kind(p) in CODE_CATALOGS,
                                              aligned=catalog_kind(p) == FIGURES)]
    assert not problems, _report(problems, "breaks of docs/translating.md's punctuation and spacing rules")


def test_translations_keep_the_markup_of_the_english():
    problems = [f"{where(p, m)}: {problem}" for p in catalog_files() for m in translated(p)
                for problem in markup_problems(m, figure=catalog_kind(p) == FIGURES,
                                               formatted=not catalog_kind(p).startswith("book/"))]
    assert not problems, _report(problems, "translations that change the markup")


def test_catalog_locations_are_inside_the_repository():
    """A ``#:`` line names its source from the catalog's folder (``../../book/<page>.md``): one that
    climbs out of the checkout (``../../../<folder>/book/...``) was written from another directory,
    and the next ``make translations`` elsewhere would rewrite every such line."""
    outside = [f"{name(p)}: {line}" for p in catalog_files() for line in p.read_text(encoding="utf-8").splitlines()
               if line.startswith("#: ../../../")]
    assert not outside, _report(outside, "locations outside the repository")


# ---------------------------------------------------------------------------------------- terms


@dataclass(frozen=True)
class Term:
    english: str  # the row's key, as in terms.csv
    chinese: str
    also_in_use: str
    first_explained: str  # e.g. book/ch01_attention_pooling
    variants: tuple[str, ...]  # the English words that call for it
    accepted: tuple[str, ...]  # the Chinese words that satisfy it


def read_terms(path: Path = TERMS) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


PARENTHESIS = re.compile(r"\s*[(（]([^()（）]*)[)）]\s*")
GLOSS = re.compile(r"（(?:又称|即)\s*([^（）]*)）")  # "softmax（又称归一化指数函数）": another name of the term
#: "memory (the encoder's output)": a parenthesis that says which sense of a common word is the term.
#: Prose uses the word in its other senses too (a computer's memory), which no pattern tells apart:
#: such a row binds the glossary tables and the translators' reading, not a search of the prose.
SENSE = re.compile(r"\(the [^()]*\)\s*$")
OPTIONAL = re.compile(r"（[^（）]*）")  # "（注意力）头": a part the prose may leave out


def _english_variants(text: str) -> list[str]:
    """The English of a term as prose writes it: a parenthesis left out or read inline
    ("saturation (of the softmax)"), pairs split ("overflow / underflow"), a shared head given
    to a lone first word ("absolute / relative position")."""
    if SENSE.search(text):
        return []
    plain = " ".join(PARENTHESIS.sub(" ", text).split())
    inline = " ".join(re.sub(r"[()]", " ", text).split())
    found = []
    for form in dict.fromkeys([plain, inline]):
        parts = [p.strip() for p in form.split(" / ")]
        last = parts[-1].split(" ")
        for part in parts:
            if len(parts) > 1 and " " not in part and len(last) > 1 and part != parts[-1]:
                part = " ".join([part, *last[1:]])
            found.append(part)
    return list(dict.fromkeys(found))


def _chinese_forms(text: str) -> list[str]:
    """The Chinese words that are the term: a parenthesis that opens with 又称 or 即 names it
    another way ("softmax（又称归一化指数函数）": either), any other is a part that may be
    left out ("（注意力）头": 头)."""
    found = []
    for part in (p.strip() for p in text.split(" / ")):
        glosses = [g.strip() for g in GLOSS.findall(part)]
        found += [OPTIONAL.sub("", GLOSS.sub("", part)).strip(), *glosses]
    return [f for f in dict.fromkeys(found) if f]


def terms(rows: list[dict] | None = None) -> list[Term]:
    """The term list, a row per English variant. Alternatives pair up, the English's separated by
    commas, the Chinese's by 、 ("attention score, scoring function" / "注意力分数、注意力评分函数");
    pairs too."""
    found = []
    for row in read_terms() if rows is None else rows:
        english = [e.strip() for e in row["english"].split(",")]
        chinese = [c.strip() for c in row["chinese"].split("、")]
        pairs = zip(english, chinese) if len(english) == len(chinese) else ((e, row["chinese"]) for e in english)
        for en, zh in pairs:
            en_parts, zh_parts = en.split(" / "), zh.split(" / ")
            if len(en_parts) == len(zh_parts) > 1:
                for e, z in zip(_english_variants(en), zh_parts):
                    found.append(Term(row["english"], row["chinese"], row["also_in_use"], row["first_explained"],
                                      (e,), tuple(_chinese_forms(z))))
            else:
                found.append(Term(row["english"], row["chinese"], row["also_in_use"], row["first_explained"],
                                  tuple(_english_variants(en)), tuple(_chinese_forms(zh))))
    return found


def _pattern(variant: str) -> re.Pattern:
    words = ["".join("[-–]" if c in "-–" else re.escape(c) for c in w) for w in variant.split(" ")]
    last = words[-1]
    if last.endswith("y") and len(last) > 2:
        words[-1] = last[:-1] + "(?:y|ies)"
    else:
        words[-1] = last + "(?:s|es)?"
    return re.compile(r"(?<![\w-])" + r"\s+".join(words) + r"(?![\w-])", re.I)


def exemptions(message: Message) -> dict[str, str]:
    """``{English term: why}`` from the entry's translator comments ``not a term: <term>: <why>``."""
    found = {}
    for comment in message.user_comments:
        match = re.match(r"\s*not a term:\s*([^:]+?)\s*(?::\s*(.*))?$", comment)
        if match:
            found[match.group(1).lower()] = (match.group(2) or "").strip()
    return found


#: the exercises' pieces (``#.``) whose code is written without backticks: a docstring, a comment, printed text
CODE_AS_WRITTEN = ("docstring of", "a comment", "text the cell prints", "an error message")
KEPT_START = re.compile(r"keep its start '([^']+)'")
#: more code of such pieces: a name called or indexed (``dropout(``, ``mask[i, j]``), an attribute
#: (``.encoder``), a name beside an operator (``temperature == 0``, ``i - window < j``, ``dropout =``),
#: the name that starts an item of a paragraph of items (``. window: W >= 1``), a keyword argument
#: (``bandwidth=X``)
CODE_WORD = re.compile(r"\b[A-Za-z_]\w*(?=[(\[])|\.[A-Za-z_]\w*|(?<=[-+*/<>=@] )[A-Za-z_]\w*"
                       r"|[A-Za-z_]\w*(?= (?:[-+*/<>=!]=?|//|\*\*|@) )|(?:^|(?<=[.;] ))[A-Za-z_]\w*(?=: )"
                       r"|\b[A-Za-z_]\w*(?==(?!=))")
#: the names a message lists as code: ``the names embedding, attention, rnn, dense``
NAMED = re.compile(r"\b((?:name|attribute|parameter|argument)s? )((?:[A-Za-z_][\w.]*(?:, (?:and |or )?| and | or ))*"
                   r"[A-Za-z_][\w.]*)")
#: a tuple of names: ``(tokens, score)``, ``(compute, sequential_ops, max_path_length)``
NAME_TUPLE = re.compile(r"\((?:\s*[A-Za-z_]\w*\s*,)+\s*[A-Za-z_]\w*\s*\)")
#: an f-string's field (``{label}``, ``{window - 1}``): a value of the program, never a word
FIELD = re.compile(r"(?<!\{)\{[^{}]+\}(?!\})")


def without_code(message: Message, code: bool = False) -> str:
    """The English of the entry without the code it writes without backticks (a docstring's
    ``dropout: ...``, ``model(tokens)``, ``nn.Embedding(max_len, d_model)``): the names that
    courseware.translatable makes the translation keep exactly are code, not words of a term.
    ``code``: the entry is a message a program writes (``CODE_CATALOGS``), whose code is written
    so too: a call and all it holds (``gaussian_scores(queries (2, 2), keys (3, 2))``), a keyword
    argument (``bandwidth={h}``), the names it lists (``the names embedding, rnn``), a tuple of
    names. There, an f-string's field (``{label}``) is a value, not a word."""
    text, kind = message.id, " ".join(message.auto_comments)
    start = KEPT_START.search(kind)
    if start and text.startswith(start.group(1)):
        text = "X" + text[len(start.group(1)):]
    if not (code or kind.startswith(CODE_AS_WRITTEN)):
        return message.id
    if "python-brace-format" in message.flags:
        text = FIELD.sub("X", text)
    if code:
        for start_, end in calls(text)[::-1]:
            text = text[:start_] + "X" + text[end + 1:]
        text = NAME_TUPLE.sub("X", NAMED.sub(lambda m: m.group(1) + "X", text))
    for name in sorted(code_names(text), key=len, reverse=True):
        text = text.replace(name, "X")
    return CODE_WORD.sub("X", text)


def term_problems(message: Message, term_list: list[Term], code: bool = False) -> list[str]:
    """The listed terms the English uses whose Chinese term the translation lacks (``code``: see
    :func:`without_code`). A term a label breaks over lines (``填充\\n掩码``) is the term."""
    if not message.string or message.string == message.id:
        return []
    english = prose(without_code(message, code), [q for q in quoted(message.id) if HAN.search(q)])
    chinese = re.sub(f"(?<=[{CJK}])\\s*\\n\\s*(?=[{CJK}])", "", prose(message.string).lower())
    exempt = exemptions(message)
    found = [f"the comment `not a term: {t}` must say why" for t, why in exempt.items() if not why]
    taken: list[tuple[int, int]] = []
    variants = sorted(((v, t) for t in term_list for v in t.variants), key=lambda vt: -len(vt[0]))
    for variant, term in variants:
        for match in _pattern(variant).finditer(english):
            if any(a < match.end() and match.start() < b for a, b in taken):
                continue  # part of a longer term ("Gaussian kernel" holds "kernel")
            taken.append(match.span())
            if term.english.lower() in exempt or variant.lower() in exempt:
                continue
            if not any(form.lower() in chinese for form in term.accepted):
                found.append(f"the English says {match.group(0)!r}: terms.csv's term is "
                             f"{' or '.join(term.accepted)} (or the comment `# not a term: {variant}: <why>`)")
    return list(dict.fromkeys(found))


def test_translations_use_the_term_list():
    term_list = terms()
    problems = [f"{where(p, m)}: {problem}" for p in catalog_files() for m in translated(p)
                for problem in term_problems(m, term_list, code=catalog_kind(p) in CODE_CATALOGS)]
    assert not problems, _report(problems, "translations that leave the term list")


def also_in_use_problems(catalogs: list[Path], rows: list[dict], catalogs_dir: Path = CATALOGS) -> list[str]:
    """A term's other Chinese term is mentioned at most once, on the page that first explains it
    (a notes' quotation carried over from the English does not count)."""
    problems = []
    for row in rows:
        other = row["also_in_use"].strip()
        if not other:
            continue
        seen = []
        for path in catalogs:
            if path == catalogs_dir / "book" / "intro.po":
                continue  # the introduction's note on where the terms differ from D2L's Chinese edition
            for message in translated(path):
                count = message.string.count(other) - message.id.count(other)
                seen += [(path, message)] * max(count, 0)
        home = catalogs_dir / f"{row['first_explained']}.po"
        places = "; ".join(where(p, m) for p, m in seen)
        if len(seen) > 1:
            problems.append(f"{other!r} (the other term for {row['english']!r}) appears {len(seen)} times: {places}")
        elif seen and seen[0][0] != home:
            problems.append(f"{other!r} (the other term for {row['english']!r}) is mentioned in {places}, "
                            f"not on the page that first explains the term, {row['first_explained']}")
    return problems


def test_other_terms_in_use_are_mentioned_once_where_the_term_is_explained():
    problems = also_in_use_problems(catalog_files(), read_terms())
    assert not problems, _report(problems, "mentions of the other terms in use")


GLOSSARY_HEADER = re.compile(r"^\|\s*English\s*\|\s*中文\s*\|")


def glossary_rows(page: Path) -> list[tuple[int, str, str]]:
    """``(line, English, 中文)`` of each row of the page's glossary tables."""
    rows, inside = [], False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if GLOSSARY_HEADER.match(line):
            inside = True
            continue
        if inside and not line.startswith("|"):
            inside = False
        if inside and not re.match(r"^\|\s*-", line):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows.append((number, cells[0], cells[1]))
    return rows


def glossary_problems(pages: list[Path], rows: list[dict]) -> list[str]:
    listed = {r["english"]: r["chinese"] for r in rows}
    problems = []
    for page in pages:
        for number, english, chinese in glossary_rows(page):
            if english not in listed:
                problems.append(f"{name(page)}:{number}: the glossary's {english!r} is not in terms.csv")
            elif listed[english] != chinese:
                problems.append(f"{name(page)}:{number}: the glossary gives {english!r} as {chinese!r}, "
                                f"terms.csv as {listed[english]!r}")
    return problems


def book_pages() -> list[Path]:
    return sorted((REPO / "book").glob("*.md"))


def test_glossary_tables_agree_with_the_term_list():
    rows = read_terms()
    assert sum(len(glossary_rows(p)) for p in book_pages()) > 50, "found no glossary table in book/*.md"
    assert len({r["english"] for r in rows}) == len(rows), "terms.csv lists an English term twice"
    problems = glossary_problems(book_pages(), rows)
    # the Chinese columns flow into every glossary table: Chinese punctuation, like the prose
    problems += [f"terms.csv: {r['english']!r}: half-width {m.group(0)!r} in the column {column}: write （）、；："
                 for r in rows for column in ("chinese", "also_in_use", "not_used")
                 for m in re.finditer(r"[(),;:]", r[column] or "")]
    assert not problems, _report(problems, "glossary rows that disagree with locale/zh_CN/terms.csv")


# ------------------------------------------------------------ the checks catch what they should


def _catalog(entries_: list[dict]) -> Catalog:
    catalog = Catalog(locale="zh_CN", fuzzy=False)
    for e in entries_:
        catalog.add(e["id"], e.get("string", ""), [("../../book/page.md", e.get("line", 1))],
                    flags=["fuzzy"] if e.get("fuzzy") else [], user_comments=e.get("comments", []))
    return catalog


def _write(catalog: Catalog, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(f, catalog, width=0)
    return path


SAMPLE_TERMS = [
    {"english": "attention pooling", "chinese": "注意力汇聚", "also_in_use": "注意力池化",
     "first_explained": "book/page"},
    {"english": "kernel", "chinese": "核函数", "also_in_use": "", "first_explained": "book/page"},
    {"english": "Gaussian kernel", "chinese": "高斯核", "also_in_use": "", "first_explained": "book/page"},
    {"english": "memory", "chinese": "记忆 (= 编码器输出)", "also_in_use": "", "first_explained": "book/page"},
]
GOOD = [
    {"id": "Attention pooling", "string": "注意力汇聚", "line": 3},
    {"id": "The weights of a **query** sum to 1, see `softmax` and $\\alpha_i$.",
     "string": "一个**查询**的权重之和为 1，见 `softmax` 与 $\\alpha_i$。", "line": 5},
    {"id": "A Gaussian kernel is a kernel; the *attention pooling* of {doc}`the exercises <../notebooks/a/b>`.",
     "string": "高斯核（Gaussian kernel）是一种核函数；{doc}`练习 <../notebooks/a/b>` 中的*注意力汇聚*，也译作注意力池化。",
     "line": 7},
    {"id": "Peak memory grows with the length.", "string": "峰值内存随长度增长。", "line": 9,
     "comments": ["not a term: memory: a computer's memory, 内存"]},
    {"id": "\\alpha = \\operatorname{softmax}(a)", "string": "\\alpha = \\operatorname{softmax}(a)", "line": 11},
]


def test_the_checks_pass_a_complete_catalog_and_catch_every_fault(tmp_path):
    term_list = terms(SAMPLE_TERMS)
    pot = _write(_catalog([{"id": e["id"], "line": e["line"]} for e in GOOD]), tmp_path / "pot" / "book" / "page.pot")
    good = _write(_catalog(GOOD), tmp_path / "good" / "book" / "page.po")
    # green on a complete catalog
    assert completeness_problems(good.parent.parent, pot.parent.parent) == []
    for message in entries(load(good)):
        assert style_problems(message) == [] and markup_problems(message) == [], message.id
        assert term_problems(message, term_list) == [], message.id
    assert also_in_use_problems([good], SAMPLE_TERMS, good.parent.parent) == []

    # red: an untranslated, a fuzzy, a stale entry, a missing paragraph, a page's catalog missing
    broken = [dict(e) for e in GOOD]
    broken[0]["string"] = ""
    broken[1]["fuzzy"] = True
    broken[2]["id"] = "A Gaussian kernel is a kernel (the old English)."
    del broken[3]
    bad = _write(_catalog(broken), tmp_path / "bad" / "book" / "page.po")
    _write(_catalog([{"id": "New page", "line": 1}]), tmp_path / "pot" / "book" / "new.pot")
    problems = "\n".join(completeness_problems(bad.parent.parent, pot.parent.parent))
    assert 'book/page.md:3 "Attention pooling": not translated' in problems, problems
    assert '"The weights of a **query** sum to 1, …": fuzzy' in problems, problems
    assert '"A Gaussian kernel is a kernel (the old …": stale' in problems, problems
    assert 'book/page.md:9 "Peak memory grows with the length.": missing' in problems, problems
    assert '"A Gaussian kernel is a kernel; the *attention …": missing' in problems, problems
    assert "missing catalog of book/new" in problems, problems
    assert len(problems.splitlines()) == 6, problems
    # a catalog whose page is gone
    _write(_catalog(GOOD), tmp_path / "good" / "book" / "gone.po")
    assert any("no page book/gone" in p for p in completeness_problems(good.parent.parent, pot.parent.parent))

    def one(id_: str, string: str, comments=()) -> Message:
        return Message(id_, string, user_comments=list(comments))

    # punctuation and spacing
    assert style_problems(one("The sum, then the mean.", "先求和,再取平均.")) and \
        len(style_problems(one("The sum, then the mean.", "先求和,再取平均."))) == 2
    assert any("no space" in p for p in style_problems(one("57 tokens", "共57个词元")))
    assert any("no space" in p for p in style_problems(one("Call `f` first.", "先调用`f`。")))
    assert any("no space" in p for p in style_problems(one("Scale by $s$.", "用$s$ 缩放。")))
    assert any("one space" in p for p in style_problems(one("Scale by $s$.", "用  $s$ 缩放。")))
    assert any("beside full-width" in p for p in style_problems(one("Sum, mean.", "求和 ，取平均。")))
    assert any("half-width '聚('" in p for p in style_problems(one("Pooling (attention).", "汇聚(注意力)。")))
    assert style_problems(one("A tensor of shape (B, T, D).", "形状为 (B, T, D) 的张量。")) == []
    quote = "“会把结果除以一个常数D_k”"
    assert style_problems(one(f"{quote} (notes 001): wrong.", f"{quote}（笔记 001）：有误。")) == []
    nested = "“例如 token “I” 的查询（ 如 “love” ）”"  # the notes' own spacing, nested quotes and all
    assert style_problems(one(f"{nested} (notes 000): wrong.", f"{nested}（笔记 000）：有误。")) == []
    assert style_problems(one("Wrong (notes 000).", "“例如 token（ 如”有误。"))  # not carried over: checked
    assert style_problems(one("| a | b (c) |", "| 甲 | 乙（丙） |")) == []  # a cell boundary
    assert any("beside full-width" in p for p in style_problems(one("| a | b, c |", "| 甲 | 乙， 丙 |")))
    # markup
    assert any("inline code" in p for p in markup_problems(one("Call `f(x)`.", "调用 `g(x)`。")))
    assert any("math" in p for p in markup_problems(one("Scale by $\\sqrt d$.", "用 $d$ 缩放。")))
    assert any("cross-reference" in p for p in markup_problems(
        one("See {doc}`the exercises <../a/b>`.", "见 {doc}`练习 <../a/c>`。")))
    assert any("bold" in p for p in markup_problems(one("A **key** idea.", "一个关键的想法。")))
    assert any("emphasis" in p for p in markup_problems(one("A *soft* look-up.", "软查找。")))
    field = Message("Expected {expected!r}, got %(got)s.", "应为 {expected!r}，得到 %(got)s。",
                    flags=["python-brace-format", "python-format"])
    assert markup_problems(field) == []
    prose_percent = Message("In 90 % of the runs, %(n)d steps.", "%(n)d 步，九成的运行如此。", flags=["python-format"])
    assert markup_problems(prose_percent) == []  # "% o" of "90 % of" is prose, not a field
    prose_percent.string = "90 % 的运行如此。"
    assert any("%(n)d" in p for p in markup_problems(prose_percent))
    field.string = "应为 {expect!r}，得到 %(got)d。"
    assert any("format fields" in p and "{expected!r}" in p and "%(got)s" in p for p in markup_problems(field))
    # terms: the listed term, the longer one first, the exemption needs a reason
    assert term_problems(one("The kernel's width.", "核的宽度。"), term_list)
    assert term_problems(one("A Gaussian kernel.", "一个高斯核。"), term_list) == []
    assert term_problems(one("Peak memory.", "峰值内存。"), term_list)
    assert term_problems(one("Peak memory.", "峰值内存。", ["not a term: memory"]), term_list)
    assert term_problems(one("Two kernels.", "两个核函数。"), term_list) == []
    code = Message("kernel: see kernel(x).", "kernel: 见 kernel(x)。",
                   auto_comments=["docstring of f, an item of 'Args:' (keep its start 'kernel:')"])
    assert term_problems(code, term_list) == []  # code written without backticks is not a term
    code.id, code.string = "kernel: the kernel's width, see kernel(x).", "kernel: 核的宽度，见 kernel(x)。"
    assert term_problems(code, term_list)  # the word of prose still is
    code.id, code.string = "kernel: h. kernel == 0: none; kernel[i] is kernel.", "kernel: h。kernel == 0：无；kernel[i] 为核函数。"
    assert term_problems(code, term_list) == []
    code.string = "kernel: h。kernel == 0：无；kernel[i] 为 kernel。"
    assert term_problems(code, term_list)
    # the words a program writes (messages.po, autograder.po, figures.po): code without backticks, fields
    said = Message("{kernel}: f(kernel (2, 2), x), kernel={h}, the names kernel, rnn; (kernel, y); y @ kernel",
                   "{kernel}：f(形状为 (2, 2) 的 kernel, x)，kernel={h}，名称 kernel、rnn；(kernel, y)；y @ kernel",
                   flags=["python-brace-format"])
    assert term_problems(said, term_list, code=True) == []
    assert term_problems(said, term_list)  # elsewhere such words are prose
    said.id, said.string = "f(x) uses the kernel", "f(x) 使用 kernel"
    assert term_problems(said, term_list, code=True)  # the word of prose still is
    assert term_problems(one("Gaussian\nkernel", "高斯\n核"), term_list) == []  # a label's line break
    assert term_problems(one("Gaussian\nkernel", "高斯\n函数"), term_list)
    call = one("split_heads(X of shape (2, 3, 6), 2)", "split_heads(形状为 (2, 3, 6) 的 X, 2)")
    assert style_problems(call, code=True) == [] and style_problems(call)
    assert style_problems(one("f(x of h), then", "f(x 的 h)，然后"), code=True) == []
    assert style_problems(one("f (the x)", "f (的 x)"), code=True)  # a parenthesis of prose
    assert style_problems(one("h(1) … h(S): shapes", "h(1) … h(S)：形状")) == []  # the English's ellipsis
    assert any("beside full-width" in p for p in style_problems(one("… until the end", "…… 直到结束")))
    row = one("tokens: {row!r}", "词元：  {row!r}")  # aligned with the line above, "样本对："
    assert style_problems(row, aligned=True) == [] and style_problems(row)
    label = one("measured $q\\cdot k$", "实测 q·k")
    assert markup_problems(label, figure=True) == [] and markup_problems(label)
    label.string = "实测 $q\\cdot k$"
    assert any("Unicode" in p for p in markup_problems(label, figure=True))
    # the other term in use: once, and on the page that explains the term
    twice = _write(_catalog([{"id": "Pooling", "string": "注意力汇聚，也译作注意力池化。"},
                             {"id": "Pooling again", "string": "注意力池化。"}]),
                   tmp_path / "twice" / "book" / "page.po")
    assert "appears 2 times" in "\n".join(also_in_use_problems([twice], SAMPLE_TERMS, twice.parent.parent))
    elsewhere = _write(_catalog([{"id": "Pooling", "string": "注意力汇聚，也译作注意力池化。"}]),
                       tmp_path / "else" / "book" / "other.po")
    assert "not on the page" in "\n".join(also_in_use_problems([elsewhere], SAMPLE_TERMS, elsewhere.parent.parent))
    # a glossary row against the list
    page = tmp_path / "glossary.md"
    page.write_text("## Glossary\n\n| English | 中文 |\n| --- | --- |\n| kernel | 核 |\n| tiling | 分块 |\n")
    problems = glossary_problems([page], SAMPLE_TERMS)
    assert len(problems) == 2 and "'核'" in problems[0] and "'tiling' is not in terms.csv" in problems[1], problems


def test_term_list_reads_its_rows_as_prose_writes_them():
    by_variant = {v: t for t in terms() for v in t.variants}
    assert by_variant["attention score"].accepted == ("注意力分数",)
    assert by_variant["scoring function"].accepted == ("注意力评分函数",)
    assert by_variant["underflow"].accepted == ("下溢",)
    assert by_variant["relative position"].accepted == ("相对位置",)
    assert by_variant["absolute position"].accepted == ("绝对位置",)
    assert by_variant["end of sequence"].accepted == ("序列结束符",)
    assert set(by_variant["softmax"].accepted) == {"softmax", "归一化指数函数"}
    assert set(by_variant["boxcar kernel"].accepted) == {"箱式核", "均匀核"}
    assert set(by_variant["logits"].accepted) == {"未归一化的对数概率", "logits"}
    assert by_variant["projection matrix"].accepted == ("投影",)
    assert by_variant["saturation"].accepted == ("饱和",)
    assert "saturation of the softmax" in by_variant
    assert by_variant["head"].accepted == ("头",) and "attention head" in by_variant
    assert not [t for t in terms() if "memory" in t.variants]  # the encoder's memory, a term of one sense only
    assert _pattern("query").search("the queries") and not _pattern("mask").search("masked")
    assert _pattern("bias–variance trade-off").search("the bias-variance trade-offs")
    assert PurePosixPath(TERMS.relative_to(REPO)).as_posix() == "locale/zh_CN/terms.csv"
