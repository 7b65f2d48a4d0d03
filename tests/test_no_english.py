"""A Chinese learner meets no English outside code: every message a test cell of a Chinese notebook
can say (its visible and hidden parts, every branch, the mistakes it names, what the test's own
helpers are passed), replayed in Chinese as the kernel and the grader translate it; the words of
the course package and the grader; the install cell; and the comments of the test cells a
learner reads to learn what failed. A run of English words that is not code, a formula or a
quoted source fails. Cheap: no notebook runs (a few seconds).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

import pytest
from babel.messages.pofile import read_po

from attention_course import i18n
from autograder import catalogs
from courseware import messages, translatable

import notebook_tools as nbt

ZH = "zh_CN"
CJK = re.compile(r"[\u4e00-\u9fff]")

# What is never English prose: inline code, placeholders, formulas, quoted sources (the notes'
# words, a quoted error), then calls (innermost first: ``softmax(Q K^T / sqrt(d))``), dotted,
# snake_case and CamelCase names, keyword arguments, words with digits (float32, 4x), shapes' letters.
_QUOTED = re.compile(r"``.+?``|`[^`]+`|\{[^{}]*\}|\$[^$]+\$|“[^”]*”|‘[^’]*’|\"[^\"]*\"|'[^'\s][^']*'(?!s\b)"
                     r"|（[\x20-\x7e]*）|《[^》]*》|\*[^*]*→[^*]*\*")  # and a term's English gloss, a title, a menu path
_CALL = re.compile(r"[A-Za-z_][\w.]*\([^()]*\)|\((?:\s*[A-Za-z_]\w*\s*,)+\s*[a-z_]\w*\s*\)")
_NAME = re.compile(r"[A-Za-z_]?\w*(?:(?:\[[^\[\]]*\])*\.[A-Za-z_]\w*)+|\b[A-Za-z]\w*_\w*\b|\b[A-Z][a-z]+[A-Z]\w*\b|\b\w+=\S+|\b\w*\d\w*\b"
                   r"|\b[A-Z]{2,}\b")
_WORD = re.compile(r"(?<![\w'])[A-Za-z][a-z]+(?:-[A-Za-z][a-z]+)*")
#: words the Chinese text keeps as they are: names of functions, libraries and units, and the
#: terms terms.csv keeps in English
KEPT = {"softmax", "logits", "logit", "lse", "probs", "exp", "log", "sqrt", "max", "min", "sum", "mean", "argmax", "inf",
        "nan", "NaN", "dtype", "float", "int", "bool", "cpu", "cuda", "mps", "GiB", "MiB", "KiB", "PyTorch", "NumPy",
        "Python", "Jupyter", "Colab", "Transformer", "Transformers", "Adam", "AdamW", "ReLU", "GELU", "BLEU", "Bahdanau",
        "Nadaraya", "Watson", "Epanechnikov", "Vaswani", "Flash", "FlashAttention", "RoPE", "ALiBi", "True", "False",
        "None", "tril", "triu", "pip", "nbgrader", "Validate", "Success", "pad", "bos", "eos", "unk", "tokens",
        "token", "causal", "window", "tanh", "sin", "cos", "torch", "np", "nn", "self", "lr", "eps", "seed", "Kaggle",
        "Chromium", "Linux", "macOS", "Windows", "OpenMP", "MKL", "OpenBLAS", "et", "al", "arXiv", "GPT"}


def _code_call(match: re.Match) -> str:
    """A call whose arguments are code (names, shapes, numbers) is code; one whose arguments hold
    prose (``f(model of 2 layers, ...)``) keeps its prose to be read."""
    inner = match.group(0)[match.group(0).index("(") + 1:-1]
    return f" {inner} " if re.search(r"[A-Za-z]{2,}\s+[A-Za-z]{2,}", inner) else " "


def english(text: str) -> list[str]:
    """The English left in a Chinese ``text``: each run of two or more English words of prose, an
    English possessive ("'s"); in a text without a Chinese character, also a word in parentheses
    or a label ("permutation:")."""
    plain = _QUOTED.sub(" ", text)
    plain = re.sub(r"<\w+>|\b\w+(?=\[)|\[[^\[\]]*\]|\([\d\s,.]*\)", " ", plain)  # special tokens, indexing, shapes
    while True:
        shorter = _CALL.sub(_code_call, plain)
        if shorter == plain:
            break
        plain = shorter
    plain = _NAME.sub(" ", plain)
    found = []
    if re.search(r"'s\b", plain):
        found.append("'s")
    run: list[str] = []
    last = 0
    for match in _WORD.finditer(plain):
        word = match.group(0)
        gap = plain[last:match.start()]
        last = match.end()
        if word in KEPT or word.lower() in KEPT:
            if len(run) > 1:
                found.append(" ".join(run))
            run = []
            continue
        if run and re.fullmatch(r"[\s,;:\-/()]*", gap):
            run.append(word)
        else:
            if len(run) > 1:
                found.append(" ".join(run))
            run = [word]
    if len(run) > 1:
        found.append(" ".join(run))
    if not CJK.search(text) and not found:
        found += [m.group(1) or m.group(2) for m in re.finditer(r"\(\s*([A-Za-z][a-z]+(?:-[a-z]+)*)\b(?=[^()]*\))|^\s*([A-Za-z][a-z]+(?:-[a-z]+)*)(?=\s*:\s*$)", plain)
                  if (m.group(1) or m.group(2)).lower() not in KEPT]
    return found


def test_the_detector_finds_english_and_leaves_code():
    for chinese in ("tiled_attention_forward(causal=True) 的 O 与 softmax(Q K^T / sqrt(d)) V 对比",
                    "GroupedQueryAttention(16, 4, 1).W_kv.weight（多查询）", "{name} 的 lse（每个查询一个）",
                    "形状为 (B, T, D) 的 `x`", "update_online_softmax(-inf, 0, [1, 3]) 的新最大值",
                    "笔记里写的是“the notes' words”", "online_softmax([[1e4, 1e4 + 1, 1e4 - 1]], 2)"):
        assert english(chinese) == [], (chinese, english(chinese))
    for mixed, left in (("tiled_attention_forward(causal=True) of 4096 positions, blocks of 256 创建了", "of positions blocks of"),
                        ("…（40 不是 16 的倍数）'s O：形状不对", "'s"),
                        ("PositionalEncoding(4, max_len=10).P (shape (max_len, d_model))", "shape"),
                        ("当前最大值 5.0，running maximum", "running maximum")):
        assert left in english(mixed), (mixed, english(mixed))


# ----------------------------------------------------------------------------- what a learner reads


def _chinese_notebooks() -> list[tuple[str, object, object]]:
    """(assignment, source notebook, Chinese notebook) of every chapter with a Chinese notebook."""
    found = []
    for assignment in nbt.assignments():
        source = nbt.source_notebook(assignment)
        chinese = nbt.NOTEBOOKS / ZH / assignment / source.name
        if chinese.exists():
            found.append((assignment, nbt.read(source), nbt.read(chinese)))
    return found


def _text(node: ast.expr) -> str:
    return node.value if isinstance(node, ast.Constant) else i18n.msgid(node)


def _tree(source: str) -> ast.AST:
    return ast.parse("\n".join("pass" if ln.lstrip().startswith(("%", "!")) else ln for ln in source.splitlines()))


def english_in_messages() -> dict[str, list[tuple[str, list[str]]]]:
    """assignment -> (a message's text once translated, its English) for every message text of
    every course and test cell (hidden parts included) of its notebook, replayed in Chinese."""
    words = catalogs.translation(ZH).gettext
    found: dict[str, list] = {}
    for assignment, source, chinese in _chinese_notebooks():
        translated = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in chinese.cells}
        cells = []
        for cell in source.cells:
            if cell.cell_type != "code" or nbt.is_solution_cell(cell):
                continue
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            # a course cell's printed words are the notebook's (its exercises catalog); a test
            # cell is the English code, hidden parts included, translated as it runs
            cells.append(cell.source if nbt.is_test_cell(cell) else translated.get(grade_id, cell.source))
        helpers = messages.notebook_helpers(cells)
        left = []
        for source_code in cells:
            tree = _tree(source_code)
            figures = [words(i18n.msgid(t)) for t in i18n.figure_texts(tree)]  # where a font can draw them
            i18n.translate_tree(tree, words, helpers)
            texts = [_text(t) for t in i18n.message_texts(tree, helpers=helpers) + i18n.mistake_texts(tree)] + figures
            left += [(t, english(t)) for t in texts if english(t)]
        found[assignment] = left
    return found


def _replayed_cells(source) -> list:
    """The cells of a source notebook that make every mistake its tests name: its code cells but
    the training runs, the figures (the exercises hold the course's solution) and the test cells
    that pass no ``likely``."""
    return [c for c in source.cells if c.cell_type == "code" and not nbt.is_training_cell(c)
            and (not nbt.is_test_cell(c) or "likely" in c.source)
            and not (not nbt.is_test_cell(c) and not nbt.is_solution_cell(c) and re.search(r"\bplt\.|\bplot_\w+\(", c.source))]


def replayed_mistakes(assignments: list[str] | None = None) -> dict[str, list[tuple[str, bool]]]:
    """assignment -> (each mistake its tests name to ``checks.check_close(likely=...)``, as the check
    says it to a Chinese learner; whether the cell passed), found by running: the notebook's cells
    (:func:`_replayed_cells`, hidden tests included) in one shell whose cells are translated as
    the grader translates them, every ``likely`` of every check called (a passing check's too)."""
    import copy

    from attention_course import checks

    original = checks.check_close
    said: list[str] = []

    def replaying(got, expected, *, likely=None, **options):
        for mistake in ((likely() if callable(likely) else likely) or {}):
            said.append(i18n.gettext(". This is exactly what you get if {mistake}.").format(mistake=i18n.gettext(mistake)))
        return original(got, expected, likely=likely, **options)

    found = {}
    checks.check_close = replaying
    try:
        for assignment, source, _ in _chinese_notebooks():
            if assignments is not None and assignment not in assignments:
                continue
            nb = copy.deepcopy(source)
            nb.cells = _replayed_cells(nb)
            if not any(nbt.is_test_cell(c) for c in nb.cells):
                found[assignment] = []  # its tests name no mistake: nothing to run
                continue
            nb = nbt.with_first_cell(nb, "from attention_course import i18n\nfrom autograder import catalogs\n"
                                         f"i18n._active['helpers'] = {{}}\ni18n.use_language({ZH!r}, catalogs.translation({ZH!r}))")
            said.clear()
            run = nbt.run_in_process(nb, cell_timeout=60)
            assert not run.failed and not run.other_errors, (assignment, run.failed, run.other_errors)
            found[assignment] = list(said)
    finally:
        checks.check_close = original
        i18n._active["helpers"] = {}
        i18n.use_language(i18n.ENGLISH)
    return found


def test_every_mistake_a_test_names_is_said_in_chinese():
    """Replayed, not read: every mistake a check of a Chinese notebook's tests can name (an f-string's,
    a helper's dict's, whatever builds it) comes out in Chinese in the learner's kernel and the grader."""
    replayed = replayed_mistakes()
    left = {a: [(t, english(t)) for t in said if english(t)] for a, said in replayed.items()}
    left = {a: found for a, found in left.items() if found}
    count = sum(len(found) for found in left.values())
    total = sum(len(said) for said in replayed.values())
    assert total > 50, replayed
    assert not left, f"{count} of {total} mistakes named by the tests keep English:\n" + "\n".join(
        f"{a}: {text!r} ({', '.join(runs)})" for a, found in left.items() for text, runs in found[:8])


def english_in_test_comments() -> dict[str, list[str]]:
    """assignment -> the comments and the docstrings (of the functions a test defines) of its
    Chinese notebook's test cells that are English: read from the cells themselves, not from what
    the tooling extracts."""
    found = {}
    for assignment, _, chinese in _chinese_notebooks():
        texts = []
        for cell in chinese.cells:
            if not nbt.is_test_cell(cell):
                continue
            texts += [tok.string[1:] for tok in tokenize.generate_tokens(io.StringIO(cell.source).readline)
                      if tok.type == tokenize.COMMENT and not tok.string.startswith("###")]
            texts += [ast.get_docstring(node) for node in ast.walk(_tree(cell.source))
                      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and ast.get_docstring(node)]
        found[assignment] = [t for t in texts if english(t[len(translatable._named_prefix(t) or ""):])]
    return found


def test_every_message_of_a_chinese_notebooks_tests_is_chinese():
    """The words of every test (the test's own helpers' arguments and the possessive fragments
    included) come out in Chinese when the test runs in a Chinese kernel or in the grader."""
    left = {a: found for a, found in english_in_messages().items() if found}
    count = sum(len(found) for found in left.values())
    assert not left, f"{count} message texts keep English:\n" + "\n".join(
        f"{a}: {text!r} ({', '.join(runs)})" for a, found in left.items() for text, runs in found[:8])


def test_the_comments_and_docstrings_of_a_chinese_notebooks_tests_are_chinese():
    """A learner whose test failed reads the test cell's comments, and the docstrings of the helpers
    it defines (a bound, a call pattern), to learn what it checks."""
    left = {a: found for a, found in english_in_test_comments().items() if found}
    count = sum(len(found) for found in left.values())
    assert not left, f"{count} comments or docstrings of test cells are English:\n" + "\n".join(
        f"{a}: {c[:100]!r}" for a, found in left.items() for c in found[:5])


@pytest.mark.parametrize("domain", ["messages", "autograder"])
def test_the_package_and_the_grader_speak_chinese(domain):
    """What a check says when it fails (the package's words, messages.po) and what the grader says
    (autograder.po), in Chinese."""
    with open(catalogs.source(ZH, domain), "rb") as f:
        catalog = read_po(f)
    left = [(m.string, english(m.string)) for m in catalog if m.id and m.string and english(m.string)]
    assert not left, f"{len(left)} entries keep English: " + "; ".join(f"{s!r} ({', '.join(r)})" for s, r in left[:8])


def test_the_install_cell_speaks_chinese():
    """The first cell of every Chinese notebook: its comments, what it prints and the errors it raises."""
    left = []
    for assignment, _, chinese in _chinese_notebooks():
        (install,) = [c for c in chinese.cells if "install-course-package" in c.metadata.get("tags", [])
                      or "use_language" in c.source][:1]
        left += [(assignment, p.text) for p in translatable.code_pieces(install.source) if english(p.text)]
    assert not left, left


def test_the_docstrings_and_comments_of_a_chinese_notebook_are_chinese():
    """What is left to read in the course and exercise cells of a Chinese notebook once translated,
    and in the comments of its Markdown's Python blocks: a docstring's item keeps its name
    (``temperature, top_k:``), a call its code; no English prose the tooling made the translator
    keep (``max(running_max, the block's largest entry)``)."""
    left = []
    for assignment, _, chinese in _chinese_notebooks():
        for cell in chinese.cells:
            if cell.cell_type == "markdown":  # the comments of its Python blocks (the notes' code, retyped)
                pieces = [p for p in translatable.markdown_pieces(cell.source) if p.kind.endswith("code block in Markdown")]
            elif cell.cell_type != "code" or nbt.is_test_cell(cell) or "use_language" in cell.source:
                continue
            else:
                pieces = translatable.code_pieces(cell.source)
            for piece in pieces:
                text = piece.text[len(translatable._named_prefix(piece.text) or ""):]
                if english(text):
                    left.append(f"{assignment}: {piece.text[:100]!r} ({', '.join(english(text))})")
    assert not left, f"{len(left)} pieces keep English:\n" + "\n".join(left[:10])


# ----------------------------------------------------------------------------- the words inside formulas

_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+?\$", re.S)
_MATH_TEXT = re.compile(r"\\(?:text|textrm|textit|textbf|mbox)\{([^{}]*)\}")
#: what a formula's ``\text{...}`` may say in English in the Chinese edition: a symbol's name, as the papers
#: and the code write it (``d_{\text{model}}``, ``\text{head}_i``, ``\text{lse}``, ``\text{embed}(\text{tokens})``),
#: never a word of the sentence (``\text{swap } T \text{ and } h``, ``2 \times \text{layers}``)
NOTATION = {"model", "head", "ff", "lse", "base", "warmup", "lr", "step", "logits", "pad", "mask", "self", "cross",
            "ids", "col", "out", "embed", "unembed", "attention", "tokens", "previous", "induction", "scores", "memory"}


def english_in_formulas(markdown: str) -> list[str]:
    r"""The ``\text{...}`` of ``markdown``'s formulas (outside the notes' quotations “…”) that hold an
    English word that is not a symbol's name (:data:`NOTATION`), code (``num\_layers``) or a name
    kept as it is (:data:`KEPT`), or two words (``\text{causal mask}``: a phrase)."""
    found = []
    for formula in _MATH.finditer(re.sub(r"“[^”]*”", " ", markdown)):
        for text in _MATH_TEXT.finditer(formula.group(0)):
            words = re.findall(r"[A-Za-z][A-Za-z\\_-]+", text.group(1))
            prose = [w for w in words if "_" not in w and not re.fullmatch(r"[A-Z]{2,}", w)]  # code, an acronym
            if len(prose) > 1 or [w for w in prose if w not in NOTATION and w not in KEPT and w.lower() not in KEPT]:
                found.append(text.group(0))
    return found


def test_the_formula_detector_finds_words_and_leaves_names():
    assert english_in_formulas(r"$$\xrightarrow{\ \text{swap } T \text{ and } h\ }$$ 与 $2 \times \text{layers} \times t$"
                               r"，$\text{causal mask}$") == [r"\text{swap }", r"\text{ and }", r"\text{layers}",
                                                             r"\text{causal mask}"]
    assert english_in_formulas(r"$d_{\text{model}}$、$0.02/\sqrt{2 \cdot \text{num\_layers}}$、$\text{head}_i$、"
                               r"$e^{\text{NaN}}$，笔记写作“$\text{Attention}(q)$”，`\text{not a formula}`") == []


def test_the_formulas_of_a_chinese_notebook_say_no_english_word():
    r"""A formula is copied into the Chinese notebook as it is (the catalogs never change one): a word
    of prose in its ``\text{...}`` (``\text{swap } T \text{ and } h``, ``\text{length}^{\alpha}``)
    stays English there, so the English writes none; a symbol's name is notation."""
    left = [f"{assignment}: {found}" for assignment, _, chinese in _chinese_notebooks()
            for cell in chinese.cells if cell.cell_type == "markdown"
            for found in [english_in_formulas(cell.source)] if found]
    assert not left, f"{len(left)} Markdown cells of the Chinese notebooks hold English words in formulas:\n" + "\n".join(left)



def test_the_formulas_of_the_chinese_book_say_no_english_word():
    r"""The Chinese book's formulas: a displayed one is an entry of its page's catalog (translated
    there, ``\text{高斯核：}``); one inside a paragraph is kept exactly by the translation
    (tests/test_translations.py), so the English writes no word of prose in it."""
    left = []
    for path in sorted((nbt.ROOT / "locale" / ZH / "LC_MESSAGES" / "book").glob("*.po")):
        page = (nbt.ROOT / "book" / f"{path.stem}.md").read_text(encoding="utf-8").splitlines()
        with path.open("rb") as f:
            for message in read_po(f):
                if not message.id or not message.string or not message.locations:
                    continue
                line = message.locations[0][1] or 0
                display = 0 < line <= len(page) and page[line - 1].lstrip().startswith("$$")
                found = english_in_formulas(f"$${message.string}$$" if display else str(message.string))
                if found:
                    left.append(f"{path.stem}:{line}: {found}")
    assert not left, f"{len(left)} formulas of the Chinese book hold English words:\n" + "\n".join(left)


# ----------------------------------------------------------------------------- one word per concept


def test_one_word_per_concept():
    """A term of locale/zh_CN/terms.csv with a ``not_used`` column names the words the edition does
    not use for it (屏蔽 / 掩蔽 for 遮蔽, 及格线 for 评分线, 参考答案 for 参考解答...): none of them is in
    any catalog (pages, notebooks, messages, figures), but in the introduction's note on where the
    course's terms differ from D2L's Chinese edition; and that note says so."""
    import csv

    catalogs_dir = nbt.ROOT / "locale" / ZH / "LC_MESSAGES"
    with (nbt.ROOT / "locale" / ZH / "terms.csv").open(newline="", encoding="utf-8") as f:
        rows = [row for row in csv.DictReader(f) if (row.get("not_used") or "").strip()]
    assert {"mask", "batch dimension", "reference solution", "bar (the graded threshold)", "heatmap"} <= {
        r["english"] for r in rows}
    note = catalogs_dir / "book" / "intro.po"
    found = []
    for path in sorted(catalogs_dir.rglob("*.po")):
        if path == note:
            continue
        with path.open("rb") as f:
            for message in read_po(f):
                for row in rows:
                    for variant in (v.strip() for v in row["not_used"].split(" / ")):
                        if message.id and variant in str(message.string) and variant not in str(message.id):
                            found.append(f"{path.relative_to(catalogs_dir)}: {variant!r} (terms.csv: "
                                         f"{row['chinese']!r}) in {str(message.string)[:60]!r}")
    assert not found, f"{len(found)} entries use a word terms.csv rules out:\n" + "\n".join(found[:10])
    with note.open("rb") as f:
        said = " ".join(str(m.string) for m in read_po(f))
    assert all(w in said for w in ("《动手学深度学习》", "规范化", "掩蔽", "基于位置", "强制教学")), "the D2L note"


#: a full-width parenthesis inside another: （……（gloss）……）
NESTED = re.compile(r"（[^（）]*（[^（）]*）[^（）]*）")
#: spoken words a textbook does not use, and what it says instead (docs/translating.md)
SPOKEN = {"便宜": "开销小、代价低 (a computation's cost)", "日子": "日期 (the dates of the data)"}


def style_problems(text: str, english: str) -> list[str]:
    """What an entry's Chinese breaks of the style guide's rules a machine can tell (a notes'
    quotation carried over from the English, ``english``, is the notes' own)."""
    found = []
    if re.search(r"[0-9}] %", text):
        found.append("a space before %")
    if re.search(r"[\u4e00-\u9fff]–[\u4e00-\u9fff]", text):
        found.append("an en dash between two terms (编码器-解码器, 查询-键对)")
    found += [f"a parenthesis inside another: {m.group(0)[:40]}" for m in NESTED.finditer(text)
              if m.group(0) not in english]
    found += [f"{word}: write {instead}" for word, instead in SPOKEN.items() if word in text and word not in english]
    return found


def test_the_style_check_catches_what_it_should():
    assert style_problems("准确率为 93%，（即**键值缓存**，KV 缓存）", "") == []
    assert len(style_problems("（即**键值缓存**（key-value cache），也常简称 KV 缓存）每一步便宜 40 %", "")) == 3
    assert style_problems("查询–键对", "") and not style_problems("Nadaraya–Watson 核回归", "")
    assert style_problems("笔记说“（甲（乙））”", "“（甲（乙））”") == []


def test_the_catalogs_write_percent_and_dashes_as_the_style_guide_says():
    """docs/translating.md: Chinese writes 90% (no space before %), a pair of related terms with
    one hyphen (编码器-解码器), never an en dash; no full-width parenthesis inside another (a gloss
    moves out, or the sentence is recast); 开销小 for a cheap computation, 日期 for a date."""
    catalogs_dir = nbt.ROOT / "locale" / ZH / "LC_MESSAGES"
    wrong = []
    for path in sorted(catalogs_dir.rglob("*.po")):
        with path.open("rb") as f:
            for message in read_po(f):
                text = str(message.string) if message.id else ""
                if CJK.search(text):
                    wrong += [f"{path.relative_to(catalogs_dir)}: {p}: {text[:70]!r}"
                              for p in style_problems(text, str(message.id))]
    assert not wrong, f"{len(wrong)} entries:\n" + "\n".join(wrong[:10])
