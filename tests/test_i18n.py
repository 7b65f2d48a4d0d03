"""Messages in the learner's language (attention_course.i18n, autograder.catalogs,
courseware.messages): the notebook names its language and nothing else counts; a translated test
is the same code; the catalogs hold every sentence, translated, written by the style guide; a
learner's wheel speaks Chinese without Babel and carries no hidden test's words; a failing visible
test says what is wrong in Chinese in a kernel. The graded class in two languages is in
tests/test_grading.py. Cheap: a few seconds, the kernel's run included."""

from __future__ import annotations

import ast
import copy
import gettext
import io
import json
import os
import re
import subprocess
import sys
import zipfile

import pytest
from babel.messages.pofile import read_po

from attention_course import i18n
from autograder import catalogs
from courseware import messages

import notebook_tools as nbt

ZH = "zh_CN"
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture
def english_afterwards():
    yield
    i18n.use_language(i18n.ENGLISH)


# ----------------------------------------------------------------------------- whose language


@pytest.mark.parametrize("metadata, language", [
    ({"attention_course": {"language": "zh_CN"}}, ZH),
    ({"attention_course": {"language": "zh-cn"}}, ZH),
    ({}, "en"),
    ({"attention_course": {"language": "fr"}}, "en"),
    ({"attention_course": {"language": "../../zh_CN/../etc"}}, "en"),
    ({"attention_course": {"language": ["zh_CN"]}}, "en"),
    ({"attention_course": "zh_CN"}, "en"),
    ({"attention_course": {"language": "zh_CN" * 10_000}}, "en"),
    ([], "en"),
    (None, "en"),
])
def test_a_notebook_names_its_language_and_nothing_else_counts(metadata, language):
    assert i18n.notebook_language(metadata) == language


def test_english_is_the_default_whatever_the_machine_says():
    """A kernel that never asks speaks English on a machine set up in Chinese."""
    code = ("from attention_course import checks\n"
            "try:\n    checks.check_equal(1, 2, name='x')\nexcept AssertionError as e:\n    print(e)")
    env = {**os.environ, "LANG": "zh_CN.UTF-8", "LANGUAGE": "zh_CN", "LC_ALL": "zh_CN.UTF-8", "LC_MESSAGES": "zh_CN"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=nbt.ROOT)
    assert done.stdout.strip() == "x: expected 2, got 1", done.stdout + done.stderr


NAME = "the parameters of CausalSelfAttention(8, 2) (one fused W_qkv and W_o)"  # a test's words, in messages.po


def _restarted_kernel(notebook_metadata, tmp_path, names: str = "__session__") -> str:
    """What a failing check says in a fresh IPython shell that runs a notebook with this metadata
    (named to the kernel as Jupyter's server or VS Code names it), when the first cell run is a
    set-up cell's import of the package (nobody called use_language)."""
    from IPython.core.interactiveshell import InteractiveShell

    path = tmp_path / "notebook.ipynb"
    path.write_text(json.dumps({"cells": [], "metadata": notebook_metadata, "nbformat": 4, "nbformat_minor": 5}))
    i18n._active["told"] = False  # a fresh kernel's
    i18n._speak(i18n.ENGLISH)
    shell = InteractiveShell()
    try:
        shell.user_ns[names] = str(path)
        # the package's import in a fresh process runs its __init__: reloading it does the same here
        shell.run_cell("import importlib, attention_course\nimportlib.reload(attention_course)")
        said = shell.run_cell("from attention_course import checks\n"
                              f"checks.check_equal(1, 2, name={NAME!r})").error_in_exec
    finally:
        shell.ast_transformers.clear()
        shell.cleanup()
    return str(said)


@pytest.mark.parametrize("metadata, names, language", [
    ({"attention_course": {"language": "zh_CN"}}, "__session__", ZH),
    ({"attention_course": {"language": "zh_CN"}}, "__vsc_ipynb_file__", ZH),
    ({"attention_course": {"language": "en"}}, "__session__", "en"),
    ({"attention_course": {"language": "../zh_CN"}}, "__session__", "en"),
    ({"attention_course": {"language": "zh_CN"}}, "some_other_name", "en")])
def test_a_restarted_kernel_speaks_the_language_of_its_notebook(metadata, names, language, tmp_path, english_afterwards):
    """A Chinese notebook's kernel, restarted and run from its set-up cell (not its first cell),
    speaks Chinese: the package reads the language from the notebook's metadata as the grader
    does; the test's own words (``name=``) are translated too. Where no front end names the
    notebook, or it names another language, English."""
    said = _restarted_kernel(metadata, tmp_path, names)
    if language == ZH:
        assert said == "CausalSelfAttention(8, 2) 的参数（一个融合的 W_qkv 和一个 W_o）：应为 2，实际为 1", said
    else:
        assert said == f"{NAME}: expected 2, got 1", said


def test_the_checks_speak_the_language_asked_for(english_afterwards):
    import numpy as np

    from attention_course import checks

    i18n.use_language(ZH)
    with pytest.raises(AssertionError) as failed:
        checks.check_close(np.zeros(3), np.ones(3), name="weights", likely={"the scores are not divided by sqrt(d_k)": 0 * np.ones(3)})
    said = str(failed.value)
    assert said.startswith("weights：") and CJK.search(said), said
    assert i18n.gettext("the scores are not divided by sqrt(d_k)") in said  # the mistake, in Chinese too
    # a name joined from pieces: no space after the full-width parenthesis in Chinese (…）的 O)
    name = "tiled_attention_forward（40 不是 16 的倍数）" + i18n.gettext("'s O")
    with pytest.raises(AssertionError) as failed:
        checks.check_close(np.zeros(3), np.ones(3), name=name)
    assert str(failed.value).startswith("tiled_attention_forward（40 不是 16 的倍数）的 O："), str(failed.value)
    i18n.use_language("xx")  # unknown: English
    with pytest.raises(AssertionError, match="^weights: values differ"):
        checks.check_close(np.zeros(3), np.ones(3), name="weights")
    with pytest.raises(AssertionError, match=r"^f\(x\)'s O: values differ"):
        checks.check_close(np.zeros(3), np.ones(3), name="f(x)" + i18n.gettext("'s O"))


# ----------------------------------------------------------------------------- a translated test is the same code


CELL = '''
name = "f(x) for x of shape (2, 3)"
checks.check_shape(y, (2, 3), name=name + " (one row per query)")
checks.check_close(y, z, name=f"f of a {shape} array", likely={"the sum is off by one": w, f"the {k} is off by one": v})
table = {"qkv": 1, f"off by {n}": 2}  # a key that is no clause: a table, not mistakes
label = "used as a key"
table[label] = 1
assert len(y) == 2, f"f must return {len(y)!r:>4} rows"
checks.check_own_code(f, name="f of a row")
checks.check_raises(ValueError, f, match="wrong shape", name="f of a bad shape")
'''
WORDS = {"f(x) for x of shape (2, 3)": "形状为 (2, 3) 的 x 的 f(x)", " (one row per query)": "（每个查询一行）",
         "f of a {shape} array": "{shape} 数组的 f", "f must return {len(y)!r:>4} rows": "f 必须返回 {len(y)!r:>4} 行",
         "used as a key": "BAD", "f of a row": "BAD", "wrong shape": "BAD", "the sum is off by one": "和多算了一",
         "off by {n}": "BAD", "the {k} is off by one": "第 {k} 个多算了一",
         "f of a bad shape": "形状不对时的 f"}


def _shape_of(tree: ast.AST) -> str:
    """``tree`` with the text of its strings taken out: an f-string keeps only its placeholders,
    in order of appearance."""
    tree = i18n.copy_tree(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
        elif isinstance(node, ast.JoinedStr):
            node.values = sorted((v for v in node.values if isinstance(v, ast.FormattedValue)), key=ast.dump)
    return ast.dump(tree)


def test_only_the_words_of_messages_are_translated():
    translated = i18n.translate_source(CELL, lambda s: WORDS.get(s, s))
    for english, chinese in WORDS.items():
        assert (chinese in translated) == (chinese != "BAD"), english
    assert "'used as a key'" in translated and "match='wrong shape'" in translated and "name='f of a row'" in translated
    assert _shape_of(ast.parse(translated)) == _shape_of(ast.parse(CELL))


HELPERS = '''
def check_rule(largest, allowed, name):
    assert largest <= allowed, f"{name} created a tensor of {largest} elements"

def check_twice(x, name, label):
    checks.check_close(x, x, name=name + "'s first half")
    table[label] = x  # a key: not words
'''
TEST = '''
check_rule(largest, allowed, "f of 4096 positions")
name = "g of 2 layers"
check_rule(largest, allowed, name)
check_twice(y, "h of a row", "a key of two words")
check_rule(largest, "allowed is no message", name=name + "'s O")
'''


def test_what_a_test_passes_to_its_own_helpers_is_translated(monkeypatch):
    """A string a test passes to a helper of its notebook (positionally or by name) for a parameter
    the helper only puts into a message is words; one for any other parameter stays. The kernel
    and the grader know the helpers of the cells they ran before; the extraction, the notebook's."""
    monkeypatch.setitem(i18n._active, "helpers", {})  # a fresh kernel's
    helpers = i18n.message_parameters(ast.parse(HELPERS))
    assert helpers == {"check_rule": (frozenset({2}), frozenset({"name"})),
                       "check_twice": (frozenset({1}), frozenset({"name"}))}
    words = {"f of 4096 positions": "4096 个位置的 f", "g of 2 layers": "2 层的 g", "h of a row": "一行的 h",
             "'s O": " 的 O", "a key of two words": "BAD", "allowed is no message": "BAD"}
    translated = i18n.translate_source(TEST, lambda s: words.get(s, s))  # no helpers known: nothing passed to them
    assert "4096 个位置的 f" not in translated and "2 层的 g" not in translated
    i18n.translate_source(HELPERS, lambda s: s)  # the helpers' cell runs first
    translated = i18n.translate_source(TEST, lambda s: words.get(s, s))
    for english, chinese in words.items():
        assert (chinese in translated) == (chinese != "BAD"), english
    assert _shape_of(ast.parse(translated)) == _shape_of(ast.parse(TEST))
    found = [t for t, _ in messages.cell_words(TEST, helpers=messages.notebook_helpers([HELPERS, TEST]))]
    assert sorted(found) == sorted(k for k, v in words.items() if v != "BAD"), found


@pytest.mark.parametrize("text, words", [
    ("'s O", True), ("'s lse (one per query)", True),
    ("GroupedQueryAttention(16, 4, 1).W_kv.weight (multi-query)", True),
    ("PositionalEncoding(4, max_len=10).P (shape (max_len, d_model))", True),
    ("softmax(x + 1000)", False), ("W_o.weight", False), ("a and (b)", False), ("x", False)])
def test_a_possessive_or_prose_after_code_is_words(text, words):
    assert messages.worth_translating(text) == words


def test_an_f_string_translation_that_loses_a_placeholder_is_ignored():
    source = 'checks.check_close(a, b, name=f"weights of shape {w.shape}")'
    for broken in ("权重", "形状为 {shape} 的权重", "形状为 {w.shape} 的权重 {w.shape}", "{w.shape"):
        assert i18n.translate_source(source, lambda s, broken=broken: broken) == source
    assert "形状为 {w.shape} 的权重" in i18n.translate_source(source, lambda s: "形状为 {w.shape} 的权重")


def test_a_copied_tree_leaves_behind_what_other_code_hung_on_its_nodes():
    """``executing`` (IPython's tracebacks) sets a ``parent`` on every node it reads, the parser's
    shared ``Load`` context included: a translated placeholder's copy (:func:`i18n.copy_tree`) holds
    the same code and none of it, where ``copy.deepcopy`` dragged the whole foreign tree along."""
    tree = ast.parse("checks.check_equal(x, 1, name=f'{a.b[0]!r:>4} of {len(y)}')")
    shared = next(n.ctx for n in ast.walk(tree) if isinstance(n, ast.Name))
    had, before = hasattr(shared, "parent"), getattr(shared, "parent", None)
    shared.parent = ast.parse("x = 1\n" * 500)
    try:
        copied = i18n.copy_tree(tree)
        assert ast.dump(copied, include_attributes=True) == ast.dump(tree, include_attributes=True)
        assert not any(hasattr(node, "parent") for node in ast.walk(copied))
    finally:
        if had:
            shared.parent = before
        else:
            del shared.parent


def test_every_test_translated_is_the_same_code_and_every_translation_applies():
    """Every course and test cell of every source notebook, translated with the Chinese catalogs,
    is the same code (only the text of its strings differs), and every translation of an f-string
    kept its placeholders (else the cell would have kept its English)."""
    words = catalogs.translation(ZH).gettext
    changed, rejected = 0, []
    for path in sorted(nbt.SOLUTIONS.glob("*/*.ipynb")):
        for cell in nbt.read(path).cells:
            if cell.cell_type != "code" or nbt.is_solution_cell(cell):
                continue
            source = "\n".join("pass" if ln.lstrip().startswith(("%", "!")) else ln for ln in cell.source.splitlines())
            tree = ast.parse(source)
            before = _shape_of(tree)
            wanted = [(text, words(i18n.msgid(text))) for text in i18n.message_texts(tree)]
            i18n.translate_tree(tree, words)  # in place: each text now holds its translation
            assert _shape_of(tree) == before, f"{path.name}: a translated cell is other code"
            for text, translation in wanted:
                changed += translation != text
                if i18n.msgid(text) != translation:
                    rejected.append(translation)
    assert changed > 500, changed
    assert not rejected, f"translations whose placeholders differ from the English: {rejected[:5]}"


# ----------------------------------------------------------------------------- the catalogs


def _catalog(domain: str):
    with open(catalogs.source(ZH, domain), "rb") as f:
        return read_po(f)


@pytest.mark.parametrize("domain", ["messages", "autograder"])
def test_the_catalogs_hold_every_sentence_translated(domain):
    """Every English sentence of the code and tests is in its catalog (``make translations`` ran),
    with a translation that is not fuzzy and keeps the placeholders of a format string."""
    english = {m.id for m in messages.template(domain) if m.id}
    catalog = _catalog(domain)
    held = {m.id: m for m in catalog if m.id}
    assert not english - set(held), f"run `make translations`: {len(english - set(held))} new, e.g. {sorted(english - set(held))[:3]}"
    assert not set(held) - english, f"run `make translations`: {len(set(held) - english)} gone, e.g. {sorted(set(held) - english)[:3]}"
    untranslated = [m.id for m in held.values() if not m.string or m.fuzzy]
    assert not untranslated, f"{len(untranslated)} entries of {domain}.po to translate, e.g. {untranslated[:3]}"
    fields = re.compile(r"(?<!\{)\{[^{}]*\}(?!\})")
    for m in held.values():
        if "python-brace-format" in m.flags or fields.search(m.id):
            assert sorted(fields.findall(m.id)) == sorted(fields.findall(m.string)), (m.id, m.string)


@pytest.mark.parametrize("domain", ["messages", "autograder"])
def test_the_catalogs_follow_the_style_guide(domain):
    """docs/translating.md: full-width punctuation in Chinese prose, one half-width space between a
    Chinese character and Latin letters, digits or a placeholder, none beside full-width punctuation."""
    wrong = []
    for m in _catalog(domain):
        if not m.id or not CJK.search(m.string):
            continue
        text = m.string
        if re.search(r"[\u4e00-\u9fff][,;:!?]|[\u4e00-\u9fff]\((?!\))", text):
            wrong.append(("half-width punctuation after Chinese", text))
        if re.search(r"[\u4e00-\u9fff][A-Za-z0-9{`]|[A-Za-z0-9}`][\u4e00-\u9fff]", text):
            wrong.append(("no space between Chinese and Latin", text))
        if re.search(r" [，。：；！？、）」”]|[（「“] ", text):
            wrong.append(("a space beside full-width punctuation", text))
    assert not wrong, f"{len(wrong)} entries, e.g. {wrong[:5]}"


# ----------------------------------------------------------------------------- what a learner gets


def test_a_learners_wheel_speaks_chinese_without_babel_and_holds_no_hidden_test(tmp_path):
    from courseware import learner_package

    assignment = nbt.assignments()[0]
    wheel = learner_package.build_wheel(assignment, tmp_path / "wheels")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tmp_path / "site")
        carried = gettext.GNUTranslations(io.BytesIO(z.read("attention_course/locale/zh_CN/LC_MESSAGES/messages.mo")))
    hidden = {m.id for m in _catalog("autograder") if m.id and any(p.startswith("solutions/") for p, _ in m.locations)}
    assert hidden and not hidden & set(carried._catalog), "a hidden test's words are in the learner's wheel"
    code = ("import sys; sys.modules['babel'] = None\n"
            f"sys.path.insert(0, {str(tmp_path / 'site')!r})\n"
            "import numpy as np\nfrom attention_course import checks, i18n\n"
            f"assert i18n.__file__.startswith({str(tmp_path / 'site')!r}), i18n.__file__\n"
            "i18n.use_language('zh_CN')\n"
            "try:\n    checks.check_shape(np.zeros(2), (3,), name='x')\nexcept AssertionError as e:\n    print(e)")
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "x：形状不对：应为 (3,)，实际为 (2,)", done.stdout + done.stderr


@pytest.mark.slow
def test_a_failing_visible_test_says_what_is_wrong_in_chinese_in_a_kernel(english_afterwards):
    """Chapter 2's learner notebook, its first cell asking for Chinese as the Chinese notebook's
    does, run in a kernel with a wrong answer: the visible test's message is Chinese, names the
    mistake it recognised, and the English notebook's says the same in English."""
    assignment = "ch02_scoring_functions"
    learner = nbt.read(nbt.NOTEBOOKS / assignment / nbt.source_notebook(assignment).name)
    wrong = nbt.with_cell_source(nbt.solved(learner, assignment), "scaled_dot_product_attention",
                                 _mutants(assignment).WRONG["scaled_dot_product_attention"]["scale_missing"])
    said = {}
    for language in ("en", ZH):
        nb = nbt.with_first_cell(wrong, f"import attention_course.i18n\nattention_course.i18n.use_language({language!r})")
        said[language] = nbt.run_in_process(nb, stop_after="test_scaled_dot_product_attention").tests[
            "test_scaled_dot_product_attention"]
    print(said[ZH])
    assert said["en"].startswith("AssertionError: weights = softmax([2, 0] / sqrt(4)): values differ"), said
    assert "the scores are not divided by sqrt(d_k)" in said["en"]
    mistake = catalogs.translation(ZH).gettext("the scores are not divided by sqrt(d_k)")
    assert said[ZH].startswith("AssertionError: ") and mistake in said[ZH] and "values differ" not in said[ZH], said
    assert CJK.search(said[ZH].split("：")[0]), f"the test's own words stayed English: {said[ZH]}"


def _mutants(assignment: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"mutants_{assignment}_i18n", nbt.ROOT / "tests" / "mutants" / f"{assignment}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_feedback_page_shows_the_words_of_the_notebook_in_the_students_language(tmp_path):
    """The graded notebook is the course's (English) cells; its page shows the markdown and the course
    code cells (their comments) of the released notebook in the submission's language, matched by
    grade_id; the answers and the tests stay as graded."""
    import nbformat

    from autograder.feedback import with_released_words

    source = nbt.read(nbt.source_notebook(nbt.assignments()[0]))
    released = copy.deepcopy(source)
    for cell in released.cells:
        cell.source = "# 中文\n" + cell.source
    released.cells.reverse()  # matched by grade_id, not by position
    nbformat.write(released, tmp_path / "released.ipynb")
    graded = copy.deepcopy(source)
    with_released_words(graded, tmp_path / "released.ipynb")
    changed = 0
    for before, after in zip(source.cells, graded.cells):
        course_cell = not (nbt.is_solution_cell(before) or nbt.is_test_cell(before))
        assert after.source == ("# 中文\n" + before.source if course_cell else before.source)
        changed += course_cell
    assert changed > 10
    with_released_words(graded, tmp_path / "missing.ipynb")  # no such notebook: the page keeps what it has


def test_a_translation_that_fails_leaves_the_judge_the_english_code(monkeypatch):
    """Whatever goes wrong in translating a test cell, the judge runs the cell as written."""
    from autograder.judge import Judge

    judge = Judge.__new__(Judge)  # no student's process needed to compile a cell
    judge.language = ZH
    namespace = {}
    exec(judge._code('message = "f of a row"', "test"), namespace)
    assert namespace["message"] == "f of a row"  # not a message: untouched
    monkeypatch.setattr(i18n, "translate_tree", lambda tree, translate=None: 1 / 0)
    exec(judge._code('assert 1, "f of a row"\nx = 2', "test"), namespace)
    assert namespace["x"] == 2


# ----------------------------------------------------------------------------- figures and help()


def _loss_figure_texts(capsys) -> tuple[list[str], list[str], str]:
    """The texts of chapter 3's training plot (``seq2seq.plot_loss``) drawn now, the warnings of
    the drawing (a glyph missing from every font: a box) and what was printed."""
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attention_course import seq2seq

    history = {"step": list(range(1, 61)), "loss": [1 / s for s in range(1, 61)], "valid_step": [30, 60],
               "valid_loss": [0.05, 0.02], "steps_done": 60, "seconds": 3, "device": "cpu"}
    family = list(matplotlib.rcParams["font.family"])
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fig = seq2seq.plot_loss(history)
            fig.savefig(io.BytesIO(), format="png")
        ax = fig.axes[0]
        texts = [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()] + [t.get_text() for t in ax.get_legend().get_texts()]
        plt.close(fig)
    finally:
        matplotlib.rcParams["font.family"] = family
    return texts, [str(w.message) for w in caught if "missing from" in str(w.message)], capsys.readouterr().out


def test_a_chinese_notebooks_figures_are_chinese_with_a_font_and_english_without(capsys, monkeypatch, english_afterwards):
    """The package's plots (the loss curve here) say their words in Chinese in a Chinese kernel,
    drawn with a CJK font found as the book finds it (no glyph missing); on a machine without
    one, their words stay English (no boxes) and the learner is told why once, in Chinese."""
    i18n.use_language(ZH)
    texts, missing, _ = _loss_figure_texts(capsys)
    assert i18n.cjk_font(), "this machine has the book's CJK font (make book installs it)"
    assert all(CJK.search(t) for t in texts) and not missing, (texts, missing)
    monkeypatch.setattr(i18n, "cjk_font", lambda: None)
    monkeypatch.setattr(i18n, "_noted", set())
    texts, missing, said = _loss_figure_texts(capsys)
    assert texts[1:] == ["training step", "cross-entropy per token (nats)", "training loss (one batch)",
                         "training loss (mean of 25 steps)", "validation loss"] and not missing, (texts, missing)
    assert CJK.search(said) and said.count("\n") == 1, said
    i18n.use_language(i18n.ENGLISH)
    texts, _, _ = _loss_figure_texts(capsys)
    assert texts[0] == "60 steps, 3 s on cpu", texts


def test_what_a_notebook_invites_the_learner_to_read_is_in_its_language(english_afterwards):
    """Every function or class of the package that a notebook's Markdown names for reading
    (``attention_course.seq2seq.train_seq2seq``) shows its docstring, whole, in Chinese in a Chinese
    kernel (help() reads ``__doc__``), and in English again in an English one."""
    import importlib

    named = {name for name, *_ in messages.named_docs()}
    assert {"attention_course.seq2seq.train_seq2seq", "attention_course.masked_gpt.MaskedGPT"} <= named, named
    objects = {name: getattr(importlib.import_module(name.rsplit(".", 1)[0]), name.rsplit(".", 1)[1]) for name in named}
    english = {name: obj.__doc__ for name, obj in objects.items()}
    i18n.use_language(ZH)
    from test_no_english import english as english_runs

    for name, obj in objects.items():
        assert obj.__doc__ != english[name] and not english_runs(obj.__doc__), (name, obj.__doc__)
    i18n.use_language(i18n.ENGLISH)
    assert {name: obj.__doc__ for name, obj in objects.items()} == english


def test_a_recipe_prints_in_the_language_spoken(english_afterwards):
    """``print(BAHDANAU)`` in a Chinese notebook (chapters 3, 6, 7, 8 and 10 print their recipe)
    labels its two lines in Chinese; in English as before. Every recipe of the package."""
    from attention_course import recipes
    from test_no_english import english as english_runs

    every = [getattr(recipes, name) for name in recipes.__all__ if isinstance(getattr(recipes, name), recipes.Recipe)]
    assert len(every) == 6, recipes.__all__
    i18n.use_language(ZH)
    for recipe in every:
        lines = str(recipe).split("\n")
        assert len(lines) == 2 and all(CJK.search(line) for line in lines) and not english_runs(str(recipe)), str(recipe)
    i18n.use_language(i18n.ENGLISH)
    assert str(recipes.BAHDANAU) == ("model: embed_size=32, num_hiddens=64\n"
                                     "training: num_steps=300, batch_size=64, lr=0.01, eval_every=50")


def _shown_error(cell: str, language: str) -> str:
    """What a fresh IPython shell speaking ``language`` shows (without colours) when ``cell`` fails."""
    import contextlib

    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell(colors="nocolor")
    out = io.StringIO()
    try:
        shell.run_cell(f"from attention_course import i18n\ni18n.use_language({language!r})")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            shell.run_cell(cell)
    finally:
        i18n.use_language(i18n.ENGLISH)
        shell.cleanup()
    return out.getvalue()


def test_a_failing_check_shows_no_english_source_of_the_package(english_afterwards):
    """A check that fails in a Chinese kernel: the traceback shows the test cell's line, with its
    words (``name=``) as the cell ran them, translated, and the message; no frame of the package
    (whose source lines, the check's ``raise`` and the English message it translates, a traceback
    would print); a frame of the learner's own code that the package called stays. In English,
    IPython's usual traceback, the package's frames included."""
    cell = ("import numpy as np\nfrom attention_course import checks\n"
            "checks.check_close(np.zeros(2), np.ones(2), name='x', likely=lambda: {'a mistake': 1 / 0})")
    shown = _shown_error(cell, ZH)
    assert "ZeroDivisionError" in shown and "likely=lambda: {'a mistake': 1 / 0}" in shown, shown
    assert str(nbt.ROOT / "attention_course") not in shown and "checks.py" not in shown and "raise" not in shown, shown
    shown = _shown_error(f"from attention_course import checks\nchecks.check_equal(1, 2, name={NAME!r})", ZH)
    chinese = "CausalSelfAttention(8, 2) 的参数（一个融合的 W_qkv 和一个 W_o）"
    assert shown.count("File ") == 1 and NAME not in shown and f"name='{chinese}')" in shown, shown  # the cell's line too
    assert not re.search(r"expected|got|_\(", shown), shown
    shown = _shown_error("from attention_course import checks\nchecks.check_shape([1, 2], (3,), name='x')", i18n.ENGLISH)
    assert "checks.py" in shown and "x: " in shown, shown
