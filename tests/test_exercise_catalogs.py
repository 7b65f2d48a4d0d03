"""The exercises' catalogs (locale/zh_CN/LC_MESSAGES/exercises/): they hold what the English says now,
and every piece a translator fills goes back into its notebook exactly (same cells, same code, same
tests), or is refused with the notebook and the entry named.

Every notebook is put through a stand-in translation (a CJK mark before each English word, code,
formulas and names kept: what a careful translator leaves), so that the pipeline is proven on all
chapters before their catalogs are translated. Cheap: no notebook runs, no nbgrader (about 3 s).
"""

from __future__ import annotations

import ast
import copy
import io
import re

import nbformat
import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import write_po

import layout
from layout import regions
from courseware import learner_package, translatable as tr, translations

import notebook_tools as nbt


def stand_in(text: str) -> str:
    """A translation of ``text`` that keeps what a translator keeps: "译文" before each word of prose."""
    prefix = tr._named_prefix(text) or ""
    body = text[len(prefix):]
    keep = re.compile(tr._PROTECTED.pattern + "|" + tr._CODE.pattern, re.S)
    out, pos = [], 0
    for match in keep.finditer(body):
        out += [tr._WORD.sub(lambda w: "译文" + w.group(0), body[pos:match.start()]), match.group(0)]
        pos = match.end()
    return prefix + "".join(out) + tr._WORD.sub(lambda w: "译文" + w.group(0), body[pos:])


def stand_in_catalog(name: str) -> Catalog:
    catalog = translations.template(name)
    for message in catalog:
        if message.id:
            message.string = stand_in(message.id)
    return catalog


@pytest.fixture(scope="module")
def statuses() -> dict[str, translations.Status]:
    return {name: translations.status(name) for name in translations.catalog_names()}


def test_every_catalog_holds_what_the_english_says_now(statuses):
    """`make translations` has been run since solutions/ last changed: else the new English has no
    entry to translate and its notebook could not be made."""
    stale = []
    for name, state in statuses.items():
        path = translations.catalog_path(name)
        assert path.exists(), f"{path.relative_to(nbt.ROOT)} is missing: run `make translations`"
        if not state.up_to_date:
            on_disk = {m.id for m in translations.read_catalog(path) if m.id}
            new = [f"{f.where}:{f.line}: {f.piece.text[:60]!r}" for f in translations.english_pieces(name)
                   if f.piece.text not in on_disk]
            stale.append(f"{path.relative_to(nbt.ROOT)}" + (f": no entry for {new[:3]}" if new else ": out of date"))
    assert not stale, "run `make translations` (python -m courseware translations update):\n" + "\n".join(stale)


def test_every_translation_fits_its_place(statuses):
    """Each translated entry of every catalog (complete or not) goes into its cell: a translator hears
    of a lost formula, a broken table row or docstring at once, not when the last entry is done."""
    misfits = [m for state in statuses.values() for m in state.misfits]
    assert not misfits, "\n".join(misfits)


@pytest.mark.parametrize("assignment", layout.assignments())
def test_every_piece_goes_back_into_its_place(assignment):
    """With every entry translated, the notebook keeps its cells, ids, metadata and tests; each code
    cell parses to the same code (the words of docstrings, comments and messages aside) with the same
    signatures, and each Markdown cell keeps its formulas and code."""
    (path,) = layout.source_notebooks(assignment)
    english = nbt.read(path)
    translated = translations.translated_notebook(path, catalog=stand_in_catalog(assignment))
    assert [c.get("id") for c in translated.cells] == [c.get("id") for c in english.cells]
    changed = 0
    for en, zh in zip(english.cells, translated.cells):
        where = f"{assignment}: cell {en.metadata.get('nbgrader', {}).get('grade_id')}"
        assert (zh.cell_type, zh.metadata) == (en.cell_type, en.metadata), where
        changed += zh.source != en.source
        if nbt.is_test_cell(en):  # only its comments and docstrings are translated: the same code, messages included
            assert nbt.test_code(zh.source) == nbt.test_code(en.source), f"{where}: a test cell changed"
            assert zh.source != en.source or not tr.code_pieces(en.source, comments_only=True), f"{where}: comments"
        elif en.cell_type == "code":
            assert tr.check_code(en.source, zh.source) is None, f"{where}: {tr.check_code(en.source, zh.source)}"
            assert tr.signatures(zh.source) == tr.signatures(en.source), where
            # a solution region is the solution's: nothing in it is translated
            assert regions.contents(zh.source, regions.SOLUTION) == regions.contents(en.source, regions.SOLUTION), where
        else:
            prose = lambda s: re.sub(r"^```.*?^```", "", s, flags=re.S | re.M)  # noqa: E731 (fenced code stays)
            assert tr.fragments(prose(zh.source)) == tr.fragments(prose(en.source)), where
            assert zh.source.count("\n|") == en.source.count("\n|"), f"{where}: table rows"
    assert changed >= len([c for c in english.cells if c.cell_type == "markdown"]), "too few cells translated"


def test_the_install_cell_and_the_stub_translate():
    catalog = stand_in_catalog(translations.COMMON)
    english = learner_package.install_cell("ch01_attention_pooling", "", language="zh_CN").source
    cell = translations.translated_install_cell("ch01_attention_pooling", "", catalog=catalog)
    assert tr.check_code(english, cell.source) is None
    assert "译文" in cell.source and cell.metadata["tags"] == ["install"] and cell.id == "install"
    calls = [n for n in ast.walk(ast.parse(cell.source)) if isinstance(n, ast.Call)
             and getattr(n.func, "id", None) == "use_language"]
    assert [ast.literal_eval(c.args[0]) for c in calls] == ["zh_CN"]
    stub = translations.translated_code(regions.CODE_STUB, translations.STUB_LOCATION, catalog=catalog)
    assert tr.check_code(regions.CODE_STUB, stub) is None and "译文" in stub


def _catalog_with(assignment: str, **changes) -> Catalog:
    """The stand-in catalog of ``assignment`` with entries (chosen by a word of their English) emptied,
    made fuzzy, removed or given another translation."""
    catalog = stand_in_catalog(assignment)
    for action, (needle, *value) in changes.items():
        message = next(m for m in catalog if m.id and needle in m.id)
        if action == "empty":
            message.string = ""
        elif action == "fuzzy":
            message.flags.add("fuzzy")
        elif action == "remove":
            del catalog[message.id]
        else:
            message.string = value[0](message.id)
    return catalog


def test_an_incomplete_catalog_names_the_notebook_and_each_entry():
    (path,) = layout.source_notebooks("ch01_attention_pooling")
    catalog = _catalog_with("ch01_attention_pooling", empty=("Run the setup cell",), fuzzy=("Numerically stable",),
                            remove=("leave-one-out curve",))
    with pytest.raises(translations.IncompleteCatalog) as caught:
        translations.translated_notebook(path, catalog=catalog)
    message = str(caught.value)
    assert "notebooks/zh_CN/ch01_attention_pooling/attention_pooling.ipynb cannot be made: 3 entries" in message
    assert "attention_pooling.ipynb#intro:12: entry 'Run the setup cell below once.' is not translated yet" in message
    assert "#softmax:2: entry 'Numerically stable softmax of ``x`` along ``axis``.' is marked fuzzy" in message
    assert "#explore_bandwidth:1: entry \"Not graded: the leave-one-out" in message and "run `make translations`" in message


@pytest.mark.parametrize("needle, wrong, said", [
    ("| part | exercise |", lambda t: "| 部分 | 练习、分值 |", "keeps its 3 cells"),
    ("Computed literally", lambda t: t.replace("`np.exp(1000.0)`", "`np.exp(1000)`"), "missing `np.exp(1000.0)`"),
    ("x: a float array", lambda t: "x：任意形状的浮点数组。", "must start with 'x:'"),
    ("keys: ``(m, d)``", lambda t: t.replace("``queries``", "queries"), "missing ``queries``"),
    ("Numerically stable", lambda t: t + ' """', "breaks the code: the cell no longer parses"),
    ("Set answer_no_mass", lambda t: t.replace("answer_no_mass", "answer"), "missing answer_no_mass"),
])
def test_a_translation_that_does_not_fit_is_refused_by_name(needle, wrong, said):
    (path,) = layout.source_notebooks("ch01_attention_pooling")
    with pytest.raises(translations.TranslationError) as caught:
        translations.translated_notebook(path, catalog=_catalog_with("ch01_attention_pooling", other=(needle, wrong)))
    assert not isinstance(caught.value, translations.IncompleteCatalog)
    assert "attention_pooling.ipynb#" in str(caught.value) and said in str(caught.value), str(caught.value)


def test_a_message_keeps_its_fields():
    common = translations.template(translations.COMMON)
    entry = next(m for m in common if "Installed attention_course" in m.id)
    for message in common:
        message.string = stand_in(message.id) if message.id else message.string
    entry.string = "已安装 {wanted}，来源：{wheel}。"  # a field that is not the English's
    with pytest.raises(translations.TranslationError, match="install:32: the translation of 'Installed attention_course"):
        translations.translated_install_cell("ch01_attention_pooling", "", catalog=common)


def test_update_marks_changed_english_fuzzy_and_removed_english_obsolete(tmp_path, monkeypatch):
    """gettext's way (msgmerge): a translated entry whose English changed keeps its translation, flagged
    fuzzy with the old English beside it; one that left the English becomes obsolete; new English an empty
    entry; and the notebook cannot be made until they are translated and checked."""
    name = "ch01_attention_pooling"
    monkeypatch.setattr(translations, "LOCALE", tmp_path)
    catalog = translations.updated_catalog(name)  # a new catalog: there is none in tmp_path
    for message in catalog:
        message.string = stand_in(message.id) if message.id else message.string
    translations.write_catalog(name, catalog)
    assert translations.status(name).complete
    # a translator's editor wraps the lines its own way: the catalog still holds what it held
    wrapped = io.BytesIO()
    write_po(wrapped, catalog, width=76)
    translations.catalog_path(name).write_bytes(wrapped.getvalue())
    assert translations.status(name).complete
    english = translations.english_pieces(name)

    def edited(name_, language="zh_CN"):
        out = []
        for found in english:
            if found.piece.text.startswith("Run the setup cell"):
                continue  # removed
            if found.piece.text.startswith("Later exercises may call"):
                piece = copy.copy(found.piece)
                piece.text = piece.text.replace("fix them in order", "so fix them in order")
                found = found._replace(piece=piece)
            out.append(found)
        new = copy.copy(english[0].piece)
        new.text = "A new paragraph of the English."
        return out + [english[0]._replace(line=99, piece=new)]

    monkeypatch.setattr(translations, "english_pieces", edited)
    assert not translations.status(name).up_to_date
    assert translations.write_catalog(name, translations.updated_catalog(name))
    catalog = translations.read_catalog(translations.catalog_path(name))
    changed = next(m for m in catalog if m.id.startswith("Later exercises may call"))
    assert changed.fuzzy and changed.string.startswith("译文Later") and "fix them in order" in changed.previous_id[0]
    assert catalog.get("A new paragraph of the English.").string == ""
    assert "Run the setup cell below once." in catalog.obsolete
    state = translations.status(name)
    assert state.up_to_date and not state.complete and len(state.fuzzy) == 1 and len(state.untranslated) == 1
    assert f"1 of {len(catalog)} entries empty, 1 fuzzy" in state.summary()  # the chapter's entries, counted by babel
    text = translations.catalog_path(name).read_text()
    assert "#| msgid \"Later exercises may call" in text and "#~ msgid \"Run the setup cell below once.\"" in text
    # a translation that does not fit is named, translated entries only
    broken = translations.read_catalog(translations.catalog_path(name))
    next(m for m in broken if m.id.startswith("| part |")).string = "| 部分 | 练习 |"
    translations.write_catalog(name, broken)
    (misfit,) = translations.status(name).misfits
    assert "attention_pooling.ipynb#intro:33: the translation of '| part | exercise | points |' does not fit" in misfit
    translations.write_catalog(name, catalog)
    translations.write_catalog(name, translations.updated_catalog(name))
    # updating again changes nothing (the old English, over several "#|" lines, is read back whole)
    assert not translations.write_catalog(name, translations.updated_catalog(name))
    again = translations.read_catalog(translations.catalog_path(name))
    old = next(f.piece.text for f in english if f.piece.text.startswith("Later exercises may call"))
    assert next(m for m in again if m.id == changed.id).previous_id == [old]
    # the translator checks it and removes the flag: the old English goes with it
    next(m for m in again if m.id == changed.id).flags.discard("fuzzy")
    translations.write_catalog(name, again)
    translations.write_catalog(name, translations.updated_catalog(name))
    assert "#| msgid" not in translations.catalog_path(name).read_text()


def test_the_markdown_pieces():
    source = ("## 2. The kernels\n\nA paragraph that goes\non over two lines, with $x^2$ and `code`.\n\n$$y = 1$$\n\n"
              "- (a) An option,\n  on two lines.\n- **b.** Another option.\n\n1. A step.\n\n"
              "| kernel | $K$ |\n| --- | --- |\n| boxcar | $1$ |\n| 3 | `x` |\n\n```python\nx = 1  # one\n```\n")
    pieces = tr.markdown_pieces(source)
    # a Python block's code stays; its comments are pieces, as a code cell's
    assert (pieces[-1].text, pieces[-1].kind) == ("one", "a comment after code of a code block in Markdown")
    assert [(p.text, p.kind.split(": ")[1]) for p in pieces[:-1]] == [
        ("2. The kernels", "a heading"),
        ("A paragraph that goes on over two lines, with $x^2$ and `code`.", "a paragraph"),
        ("An option, on two lines.", "option (a) of a question"),
        ("Another option.", "option (b) of a question"),
        ("A step.", "a list item"),
        ("| kernel | $K$ |", "a table row (keep its cells and the | between them)"),
        ("| boxcar | $1$ |", "a table row (keep its cells and the | between them)"),
    ]
    out = tr.substitute(source, pieces, ["2. 核函数", "这一段有 $x^2$ 和 `code`。", "一个选项，\n分两行。", "另一个选项。",
                                         "一步。", "| 核函数 | $K$ |", "| 箱式核 | $1$ |", "一"])
    assert out == ("## 2. 核函数\n\n这一段有 $x^2$ 和 `code`。\n\n$$y = 1$$\n\n- (a) 一个选项，\n  分两行。\n- **b.** 另一个选项。\n\n"
                   "1. 一步。\n\n| 核函数 | $K$ |\n| --- | --- |\n| 箱式核 | $1$ |\n| 3 | `x` |\n\n```python\nx = 1  # 一\n```\n")


def test_the_code_pieces():
    source = '''def f(x, axis=-1):
    """Sum ``x`` along ``axis``.

    Args:
        x: an array of any shape,
            batch dimensions included.
        axis: the axis.

    Returns:
        An array without ``axis``
        whose entries are sums.
    """
    # Add the entries: one
    # comment over two lines.
    ### BEGIN SOLUTION
    # the solution's comment stays the solution's
    return x.sum(axis)  # sums
    ### END SOLUTION


print(f"{len(x)} numbers summed over the last axis", "ok")
raise ValueError(f"the axis {axis} is not one of x's {x.ndim} axes: "
                 "choose another one, counted from 0 or from the end")
'''
    pieces = tr.code_pieces(source)
    assert [p.text for p in pieces] == [
        "Sum ``x`` along ``axis``.", "x: an array of any shape, batch dimensions included.", "axis: the axis.",
        "An array without ``axis`` whose entries are sums.", "Add the entries: one comment over two lines.",
        "{len(x)} numbers summed over the last axis",
        "the axis {axis} is not one of x's {x.ndim} axes: choose another one, counted from 0 or from the end"]
    out = tr.substitute(source, pieces, ["沿 ``axis`` 对 ``x`` 求和。", "x：任意形状的数组，" + "含批量维度" * 12 + "。",
                                         "axis：轴。", "去掉 ``axis`` 的数组，每个元素是一个和。", "把各元素相加。",
                                         "对最后一个轴上的 {len(x)} 个数求和",
                                         "轴 {axis} 不是 x 的 {x.ndim} 个轴之一：" + "请换一个轴，从 0 或从末尾数起，" * 3 + "“再试”"])
    assert tr.check_code(source, out) is None
    lines = out.splitlines()
    assert lines[1] == '    """沿 ``axis`` 对 ``x`` 求和。'
    assert lines[4].startswith("        x：任意形状的数组，含批量维度") and re.match(" {12}[批量维度含]", lines[5]), lines
    assert all(tr.width(line) <= 79 for line in lines[:12]), lines[:12]
    assert '    # 把各元素相加。' in lines and "    # the solution's comment stays the solution's" in lines
    assert 'print(f"对最后一个轴上的 {len(x)} 个数求和", "ok")' in lines
    # a message the English continues over lines goes on over lines, at the English's width
    raised = lines[lines.index(next(ln for ln in lines if ln.startswith("raise"))):]
    assert len(raised) > 2 and all(ln.startswith(" " * 17 + 'f"') for ln in raised[1:]), raised
    assert all(tr.width(ln) <= 79 for ln in raised), raised
    message = ast.literal_eval("".join(ln.strip().removeprefix("raise ValueError(").removesuffix(")") for ln in raised)
                               .replace('f"', '"').replace('""', ""))
    assert message == "轴 {axis} 不是 x 的 {x.ndim} 个轴之一：" + "请换一个轴，从 0 或从末尾数起，" * 3 + "“再试”"


def test_wrapping_keeps_code_whole_and_punctuation_off_the_line_start():
    text = "用 ``np.exp(x - x.max())`` 计算，" + "再把每一行除以它的和，" * 6 + "最后返回 `out`。"
    lines = tr.wrap(text, 40, 40)
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")
    assert all(tr.width(line) <= 40 for line in lines), lines
    assert not any(line[0] in tr.NO_LINE_START for line in lines), lines
    assert any("``np.exp(x - x.max())``" in line for line in lines)


def test_wrapping_breaks_chinese_after_a_clause_and_never_inside_a_bracket():
    """A break between two Chinese characters may cut a word (可以 / 导入): near the line's end, a
    clause's punctuation is the break; a half-width bracket (code, a shape) stays on one line."""
    text = ("请先运行这个单元格。缺少本章的课程包（attention_course）时，它会安装一次；"
            "如果课程包已经可以导入，它什么也不做。")
    lines = tr.wrap(text, 76, 76)
    assert lines[0].endswith("一次；") and "".join(lines) == text, lines
    for room in range(20, 40):
        lines = tr.wrap("权重从 normal(0, 0.02) 中抽取，形状为 (B, 1, T, P + T) 的掩码与分数相加。", room, room)
        assert any("normal(0, 0.02)" in ln for ln in lines) and any("(B, 1, T, P + T)" in ln for ln in lines), lines
