"""The words of the book's figures and printouts in Chinese (issue 25).

The figure code (``book/figures``) writes its words through ``figures.i18n._``; Babel extracts
them into ``locale/zh_CN/LC_MESSAGES/figures.po`` (``make figures-catalog``), and the Chinese
build (``book/_ext/translated_outputs.py``) translates the English build's outputs with it. These
tests check, in a few seconds and without building the book:

- the catalog is not stale: it holds exactly the messages the figure code has now (a message
  added or changed in English and not yet in the catalog, or one the code no longer has);
- every translation keeps its message's placeholders (the numbers of the execution fill them);
- the translation of outputs itself, on a small figure and printout made here: what it replaces,
  how it keeps a table's columns, and that it refuses a picture without its twin, a message
  without a translation and English prose left over.

That no entry is empty or fuzzy is the catalogs' completeness test (all of ``locale/``).
"""

from __future__ import annotations

import base64
import re
import symtable
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIGURES = REPO / "book" / "figures"
CATALOG = REPO / "locale" / "zh_CN" / "LC_MESSAGES" / "figures.po"
sys.path.insert(0, str(REPO / "book" / "_ext"))
sys.path.insert(0, str(REPO / "book"))

import translated_outputs  # noqa: E402
from figures import describe, i18n  # noqa: E402


def _read(path: Path):
    from babel.messages.pofile import read_po

    with path.open("rb") as f:
        return read_po(f)


#: The keywords ``make figures-catalog`` extracts (``--no-default-keywords -k _ -k N_``).
KEYWORDS = {"_": None, "N_": None}


def _extract(folder: Path) -> set[str]:
    """The messages of the figure code, extracted as ``make figures-catalog`` extracts them."""
    from babel.messages.extract import extract_from_dir

    return {message for _file, _line, message, _comments, _context
            in extract_from_dir(str(folder), method_map=[("**.py", "python")], keywords=KEYWORDS)}


def test_the_catalog_is_made_with_the_same_keywords():
    assert "--no-default-keywords -k _ -k N_" in (REPO / "Makefile").read_text()


def _stale(code: set[str], catalog: set[str]) -> str:
    new, gone = sorted(code - catalog), sorted(catalog - code)
    return ("the figure catalog is out of date; run `make figures-catalog` and translate what it adds:\n"
            + "".join(f"  in the figure code, not in {CATALOG.name}: {m!r}\n" for m in new)
            + "".join(f"  in {CATALOG.name}, no longer in the figure code: {m!r}\n" for m in gone)) if new or gone else ""


def test_the_figure_catalog_has_the_messages_of_the_figure_code():
    catalog = {m.id for m in _read(CATALOG) if m.id}
    problem = _stale(_extract(FIGURES), catalog)
    assert not problem, problem


def test_a_changed_message_makes_the_catalog_stale(tmp_path):
    """The check above turns red when the English changes: one message of a copy of the figure
    code reworded."""
    copy = tmp_path / "figures"
    copy.mkdir()
    for path in FIGURES.glob("*.py"):
        text = path.read_text()
        if path.name == "diagrams.py":
            text = text.replace('_("add & norm")', '_("add and norm")')
        (copy / path.name).write_text(text)
    catalog = {m.id for m in _read(CATALOG) if m.id}
    problem = _stale(_extract(copy), catalog)
    assert "'add and norm'" in problem and "no longer in the figure code: 'add & norm'" in problem, problem


_PLACEHOLDER = re.compile(r"(?<!\{)\{([^{}]*)\}(?!\})")


def test_every_translation_keeps_the_placeholders_of_its_message():
    wrong = []
    for message in _read(CATALOG):
        if message.id and message.string:
            if sorted(_PLACEHOLDER.findall(message.id)) != sorted(_PLACEHOLDER.findall(message.string)):
                wrong.append(f"{message.id!r} -> {message.string!r}")
    assert not wrong, "translations whose placeholders differ from their message's:\n  " + "\n  ".join(wrong)


def test_no_figure_function_hides_the_message_function():
    """A function that assigns ``_`` (``x, _ = ...``) makes every ``_("...")`` in it fail."""
    hiding = []

    def walk(table, path):
        for child in table.get_children():
            if child.get_type() == "function" and "_" in child.get_identifiers():
                symbol = child.lookup("_")
                if symbol.is_assigned() or symbol.is_parameter():
                    hiding.append(f"{path}: {child.get_name()} (line {child.get_lineno()})")
            walk(child, path)

    for path in sorted(FIGURES.glob("*.py")):
        walk(symtable.symtable(path.read_text(), str(path), "exec"), path.name)
    assert not hiding, "functions of book/figures that assign `_`:\n  " + "\n  ".join(hiding)


# ------------------------------------------------------------------ the translation of outputs


@pytest.fixture
def cell(monkeypatch):
    """A cell executed as in a Jupyter kernel: messages recorded, a figure with its twin."""
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt
    from IPython.core.pylabtools import print_figure

    monkeypatch.setattr(i18n, "_hooked", True)
    i18n._start_cell()
    _ = i18n._
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [1, 0], label=_("training loss"))
    ax.set_title(_("{n} steps on {device}", n=300, device="cpu"))
    ax.set_xticks([0, 1], [_("query"), "k2"])
    ax.legend()
    describe.finding(fig, _("The loss falls from {start} to {end}.", start=1, end=0))
    text = "\n".join([i18n.padded(_("encoder"), 8) + " " + _("held-out accuracy {accuracy:.1%}", accuracy=0.9873),
                      f"{_('window'):8s} " + _("held-out accuracy {accuracy:.1%}", accuracy=0.5),
                      _("faster at: {names}", names=", ".join([_("encoder"), "GRU"]))])
    bundle = i18n._figure_bundle(fig)
    english_png = base64.b64encode(print_figure(fig, "png")).decode()
    plt.close(fig)
    outputs = [{"output_type": "stream", "name": "stdout", "text": text + "\n"},
               {"output_type": "display_data", "metadata": {},
                "data": {"image/png": english_png, "text/plain": "<Figure>", **bundle}},
               {"output_type": "display_data", "metadata": {},
                "data": {i18n.MIME: {"messages": i18n._messages(), "cells": i18n._padded_cells()}}}]
    i18n._start_cell()
    return outputs


CHINESE = {"training loss": "训练损失", "{n} steps on {device}": "在 {device} 上训练 {n} 步", "query": "查询",
           "encoder": "编码器", "window": "窗口 MLP", "held-out accuracy {accuracy:.1%}": "留出集准确率 {accuracy:.1%}",
           "faster at: {names}": "更快的是：{names}",
           # the sentences of the figure's text alternative (figures/describe.py)
           "{title}.": "{title}。", "{label}: from {first} at {x_first} to {last} at {x_last}.":
           "{label}：从 {x_first} 处的 {first} 到 {x_last} 处的 {last}。",
           "The loss falls from {start} to {end}.": "损失从 {start} 降到 {end}。"}


def test_the_chinese_build_translates_printouts_and_figures(cell):
    translated = translated_outputs.translate_outputs(cell, CHINESE, "test cell")
    assert len(translated) == 2, "the cell's messages are not an output of their own"
    # a padded cell (figures.i18n.padded) and a label padded by the page's own f-string keep the column
    assert translated[0]["text"] == ("编码器   留出集准确率 98.7%\n"
                                     "窗口 MLP 留出集准确率 50.0%\n"
                                     "更快的是：编码器, GRU\n")
    chinese_png = translated[1]["data"]["image/png"]
    assert chinese_png != cell[1]["data"]["image/png"] and i18n.MIME not in translated[1]["data"]
    # the picture says what it shows, in Chinese: its title, and its line by its label
    assert translated[1]["metadata"][translated_outputs.ALT] == "在 cpu 上训练 300 步。训练损失：从 x = 0 处的 1 到 x = 1 处的 0。损失从 1 降到 0。"


def test_the_english_build_gives_each_figure_its_alt_text(cell):
    described = translated_outputs.with_alt_texts(cell)
    assert described[1]["metadata"][translated_outputs.ALT] == (
        "300 steps on cpu. training loss: from 1 at x = 0 to 0 at x = 1. The loss falls from 1 to 0.")
    assert translated_outputs.ALT not in cell[1]["metadata"]  # a copy: the cache's outputs stay as they are


def test_a_plot_without_its_finding_stops_the_build(cell):
    """A plot's alt text says what its page draws from it (figures.describe.finding): without it
    the build stops; a diagram (no axes: its page writes its alt text) needs none."""
    payload = cell[1]["data"][i18n.MIME]
    fig = translated_outputs._unpack(payload["figure"])
    delattr(fig, describe.FINDING)
    bare = {**payload, "figure": i18n._pack(fig)}
    with pytest.raises(translated_outputs.FindingMissing, match="training loss"):
        translated_outputs.english_description(bare)
    fig.axes[0].set_axis_off()
    assert not describe.missing_finding(fig)
    assert translated_outputs.english_description({**payload, "figure": i18n._pack(fig)})[0] == ""


def test_a_word_in_quotes_or_code_is_data():
    english = {"en": "boxcar", "msgid": "boxcar", "values": i18n._pack({})}
    translator = translated_outputs.Translator({"boxcar": "箱式核"}, [english])
    assert translator.printout("{'boxcar': 0.34}; boxcar=3; boxcar\n") == "{'boxcar': 0.34}; boxcar=3; 箱式核\n"


def test_a_figure_drawn_again_untranslated_is_the_english_png(cell):
    """The Chinese build draws a figure as the inline backend drew the English one: without a
    translation, the same bytes."""
    payload = cell[1]["data"][i18n.MIME]
    png, left = translated_outputs.translate_figure(payload, translated_outputs.Translator({}, payload["messages"]))
    assert base64.b64encode(png).decode() == cell[1]["data"]["image/png"]
    assert "training loss" in left, left


def test_the_chinese_build_refuses_what_it_cannot_translate(cell):
    missing = {k: v for k, v in CHINESE.items() if k != "{n} steps on {device}"}
    with pytest.raises(translated_outputs.TranslationError, match=r"test cell:\n.*no translation.*steps on"):
        translated_outputs.translate_outputs(cell, missing, "test cell")
    cell[1]["data"].pop(i18n.MIME)
    with pytest.raises(translated_outputs.TranslationError, match="output 2 .a picture. has no Chinese twin"):
        translated_outputs.translate_outputs(cell, CHINESE, "test cell")
    prose = [{"output_type": "stream", "name": "stdout", "text": "the model 'is right'\n"}]
    with pytest.raises(translated_outputs.TranslationError, match=r"English left untranslated: \['the model'\]"):
        translated_outputs.translate_outputs(prose, CHINESE, "test cell")


def test_the_cjk_font_is_found_whatever_matplotlibs_font_list_says(monkeypatch):
    """matplotlib never refreshes its cached font list: one written before the CJK font was
    installed (a first ``make book`` on a fresh machine) hid the font from every later build.
    The Chinese build registers the font by its path instead; without the font it says which
    package and which command install it."""
    from matplotlib import font_manager

    manager = font_manager.fontManager
    stale = [f for f in manager.ttflist if f.name not in translated_outputs.CJK_FONTS.values()]
    monkeypatch.setattr(manager, "ttflist", list(stale))
    manager._findfont_cached.cache_clear()
    translated_outputs.require_cjk_fonts.__wrapped__()
    for family in translated_outputs.CJK_FONTS.values():
        found = font_manager.findfont(font_manager.FontProperties(family=family), fallback_to_default=False)
        assert Path(found).name == "wqy-microhei.ttc", (family, found)

    monkeypatch.setattr(manager, "ttflist", list(stale))
    monkeypatch.setattr(font_manager, "findSystemFonts", lambda *args, **kwargs: [])
    with pytest.raises(translated_outputs.TranslationError,
                       match=r"WenQuanYi Micro Hei.*is not installed: `make book` installs it .*fonts-wqy-microhei"):
        translated_outputs.require_cjk_fonts.__wrapped__()
    manager._findfont_cached.cache_clear()


def test_a_heat_maps_table_shows_what_its_cells_say():
    """The numbers under a heat map are what the picture writes in its cells (a mask's −∞), not
    the colour values behind them; a map without a text in every cell gives its values; each
    table's caption names its rows and columns, from the row's or column's labelled panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (written, bare) = plt.subplots(1, 2)
    for ax in (written, bare):
        ax.imshow([[1.0, 0.0], [1.0, 1.0]])
        ax.set_xlabel("key")
    written.set_ylabel("query")  # a row of maps labels its first panel only: the row's label is every table's
    for i in range(2):
        for j in range(2):
            written.text(j, i, "0" if j <= i else "−∞")
    tables = describe.heat_map_tables(fig)
    plt.close(fig)
    assert tables.count("<table") == 2
    first, second = tables.split("</table>")[:2]
    assert re.findall(r"<td>([^<]*)</td>", first) == ["", "0", "−∞", "0", "0"]
    assert re.findall(r"<td>([^<]*)</td>", second) == ["", "1.00", "0.00", "1.00", "1.00"]
    assert re.findall(r"<caption>([^<]*)</caption>", tables) == ["rows: query; columns: key"] * 2


def _page_code_cells(page: Path) -> list[str]:
    """The code of a book page's ``{code-cell}`` blocks (their options left out: a ``---`` block or
    ``:key: value`` lines)."""
    cells = re.findall(r"^```\{code-cell\}[^\n]*\n(.*?)^```", page.read_text(encoding="utf-8"), re.S | re.M)
    return [re.sub(r"\A(---\n.*?\n---\n|(:[\w-]+:[^\n]*\n)+)", "", cell, flags=re.S) for cell in cells]


def test_a_page_shows_a_recipe_in_the_chinese_book_in_chinese(monkeypatch):
    """``print(BAHDANAU)`` on a page printed 'model: ...' / 'training: ...' in the Chinese book too:
    the build translates only the messages the figure code records. A page shows a recipe through
    ``figures.training.describe_recipe`` (or a describe_* built on it), whose two lines the catalog
    translates; no page prints a recipe, or formats one, itself."""
    import ast

    from attention_course import recipes
    from figures.training import describe_recipe

    names = {n for n in recipes.__all__ if isinstance(getattr(recipes, n), recipes.Recipe)}
    bare = []
    for page in sorted((REPO / "book").glob("*.md")):
        for source in _page_code_cells(page):
            for node in ast.walk(ast.parse(source)):
                shown = (node.args if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("print", "str")
                         else [node.value] if isinstance(node, ast.FormattedValue) else [])
                bare += [f"{page.name}: {ast.unparse(node)}" for arg in shown if getattr(arg, "id", None) in names]
    assert not bare, "pages that print a recipe themselves (English in the Chinese book):\n  " + "\n  ".join(bare)
    catalog = translated_outputs.read_catalog(REPO / "locale" / "zh_CN" / "LC_MESSAGES" / "figures.po")
    monkeypatch.setattr(i18n, "_hooked", True)
    from figures.ch06 import describe_recipes

    shows = [(lambda recipe=getattr(recipes, name): describe_recipe(recipe)) for name in sorted(names)]
    shows.append(lambda: describe_recipes({"encoder": recipes.ENCODER, "window": recipes.WINDOW_MLP}))
    for show in shows:
        i18n._start_cell()
        text = show() + "\n"
        outputs = [{"output_type": "stream", "name": "stdout", "text": text},
                   {"output_type": "display_data", "metadata": {},
                    "data": {i18n.MIME: {"messages": i18n._messages(), "cells": i18n._padded_cells()}}}]
        chinese = translated_outputs.translate_outputs(outputs, catalog, text)[0]["text"]
        assert not re.search(r"\b(model|training):", chinese) and re.search(r"[\u4e00-\u9fff]", chinese), chinese
    assert describe_recipe(recipes.BAHDANAU) == str(recipes.BAHDANAU)  # the English book prints what print() did
    i18n._start_cell()
