"""The Chinese book's figures and printouts, made from the English build's executed pages; and
in both editions, each figure's text alternative.

**Text alternatives** (both editions): each picture a code cell draws gets an ``alt`` that says
what it shows (``book/figures/describe.py``: its panels, axes, series and the finding its
code gave it; a diagram's code gives it its whole description), read from the figure the output
carries, in the edition's language. A picture whose cell gives its own ``alt``
(``mystnb: image: alt:``, in English only) keeps it.
A plot whose code gave it no finding stops the build (:class:`FindingMissing`).

**Translation**: active only when ``language`` is ``zh_CN``. The Chinese build reads the pages' outputs from the
English build's Jupyter cache and executes nothing. Each output that has words carries what
is needed to say them in Chinese (``book/figures/i18n.py``): a figure carries itself, pickled;
a cell that printed messages carries each message's English text, message id and values. Before
MyST-NB renders a code cell's outputs, this extension

- formats each message's translation (``locale/zh_CN/LC_MESSAGES/figures.po``) with the values
  of the execution, and puts it in place of the English in the cell's printouts (stdout and
  Markdown), keeping the columns of a table aligned (a Chinese character is two columns wide);
- translates every text of each figure the same way (a whole text that is a message id of the
  catalog, like the words of the course package's own plots, is translated too), gives the
  texts a CJK font to fall back on, and draws the figure again, as the inline backend drew the
  English one.

The build fails, naming the page, the cell and the output, when a picture has no pickled twin
(the page was executed without ``figures`` imported, or before it carried twins: execute the
English book again), when a message has no translation (missing, empty or fuzzy in the catalog),
or when English prose is left in a printout or a picture (two lowercase English words in a row,
outside quotes: words that no message covers).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import functools
import logging
import pickle
import re
import sys
import unicodedata
import warnings
import zlib
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # book/: the figure package
from figures import describe  # noqa: E402
from figures.i18n import MIME  # noqa: E402


LANGUAGE = "zh_CN"
CATALOG = "figures.po"
#: Fonts for the Chinese texts (Debian's fonts-wqy-microhei, which `make book` installs); the
#: text's own font comes first, so Latin letters, digits and shapes look as in English.
CJK_FONTS = {"monospace": "WenQuanYi Micro Hei Mono", "default": "WenQuanYi Micro Hei"}
CJK_PACKAGE = "fonts-wqy-microhei"

#: the output metadata key where a picture's alt text waits for MyST-NB's image renderer
ALT = "course_alt"

#: Two lowercase English words in a row: prose that no message translated.
PROSE = re.compile(r"(?<![\w'])[a-z]{2,}[ -][a-z]{2,}(?![\w'])")
QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`")
CALL = re.compile(r"[A-Za-z_][\w.]*\([^()\n]*\)")
UNITS = re.compile(r"(?<![\w-])(ms|us|ns)(?=[\s/]|$)")


class TranslationError(Exception):
    """An output that cannot be said in Chinese."""


class FindingMissing(Exception):
    """A plot whose alt text would lack what its page draws from it (figures.describe.finding)."""


def english_prose(text: str) -> list[str]:
    """The runs of English words in ``text`` outside quoted strings (which quote data: dates,
    tokens, the notes), code (``softmax(head head^T)``) and units (``ms us/row``)."""
    text = UNITS.sub("", QUOTED.sub("''", text))
    while CALL.search(text):
        text = CALL.sub("", text)
    return PROSE.findall(text)


def width(text: str) -> int:
    """Columns ``text`` takes in a monospace font: two for a wide (CJK) character."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def read_catalog(path: Path) -> dict[str, str]:
    """``msgid -> msgstr`` of a .po file, without the empty and the fuzzy entries."""
    from babel.messages.pofile import read_po

    with path.open("rb") as f:
        catalog = read_po(f)
    return {m.id: m.string for m in catalog if m.id and m.string and not m.fuzzy}


def _unpack(data: str):
    """What ``figures.i18n._pack`` packed."""
    return pickle.loads(zlib.decompress(base64.b64decode(data)))


#: Where a message may begin and end in a printout: not inside a word, quotes or ``name=value``.
BOUNDARY_BEFORE, BOUNDARY_AFTER = r"(?<![\w'\"=-])", r"(?![\w'\"=-])"

_PLACEHOLDER = re.compile(r"(?<!\{)\{([A-Za-z_]\w*)[^{}]*\}")


class Translator:
    """The Chinese of one cell's messages, from the catalog and the values of the execution."""

    def __init__(self, catalog: dict[str, str], messages: list[dict], cells: list[list] = ()):
        self.catalog = catalog
        self.messages = {m["en"]: (m["msgid"], _unpack(m["values"])) for m in messages}
        self.cells = {cell: (text, size, align) for cell, text, size, align in cells}
        self.missing: set[str] = set()
        self._done: dict[str, str] = {}

    def message(self, english: str, depth: int = 0) -> str:
        """The Chinese of a recorded message, its values translated when they are messages."""
        if english in self._done:
            return self._done[english]
        msgid, values = self.messages[english]
        if msgid not in self.catalog:
            self.missing.add(msgid)
            return english
        if depth < 5:  # a value that is a message, or holds some (a list of words joined), is translated
            values = {name: (self.message(v, depth + 1) if v in self.messages and v != english
                             else self._listing(v, depth + 1)
                             or self.printout(v, align=False, depth=depth + 1)) if isinstance(v, str) else v
                      for name, v in values.items()}
        self._done[english] = self.catalog[msgid].format(**values)
        return self._done[english]

    def _listing(self, value: str, depth: int) -> str | None:
        """A value that is a list of messages joined by ", " or "; " (``"; ".join(_(...) for ...)``),
        each translated and joined the catalog's way (、 and ； in Chinese); None for any other value."""
        for separator in (describe.LIST, describe.CLAUSES):
            items = value.split(separator)
            if len(items) > 1 and all(item in self.messages for item in items):
                return self.catalog.get(separator, separator).join(self.message(item, depth) for item in items)
        return None

    def text(self, text: str) -> str:
        """A whole text of a figure: a recorded message, or a message id of the catalog (with no
        placeholder), or else data and symbols, kept."""
        if text in self.messages:
            return self.message(text)
        if text in self.catalog and not _PLACEHOLDER.search(text):
            return self.catalog[text]
        return text

    def _padded_cells(self, text: str) -> str:
        """``text`` with each padded table cell (``figures.i18n.padded``) whose text is a message
        replaced by its Chinese, padded to the same width on screen."""
        for cell in sorted((c for c in self.cells if c in text), key=len, reverse=True):
            english, size, align = self.cells[cell]
            if english in self.messages:
                chinese = self.message(english)
                pad = " " * max(0, size - width(chinese))
                filled = chinese + pad if align == "<" else pad + chinese
                # the cell whole, not the end of a word (" cache" in "last cache:")
                text = re.sub(BOUNDARY_BEFORE + re.escape(cell) + BOUNDARY_AFTER, lambda match: filled, text)
        return text

    def printout(self, text: str, align: bool = True, depth: int = 0) -> str:
        """``text`` with every recorded message in it replaced by its Chinese. With ``align``, the
        padded table cells keep their width on screen (:meth:`_padded_cells`), and so does a
        message followed by two spaces or more (a label the page pads itself: ``{what:46s}``)."""
        if align:
            text = self._padded_cells(text)
        # a message's own leading and trailing spaces (a format spec's padding) are matched as
        # padding, which the alignment below adjusts; a message in quotes is data or an
        # identifier ({'boxcar': 0.34}, window=3) and stays
        found = {e.strip(): e for e in self.messages if e.strip() and e.strip() in text}
        if not found:
            return text
        alternatives = "|".join(map(re.escape, sorted(found, key=len, reverse=True)))
        pattern = re.compile(r"( *)" + BOUNDARY_BEFORE + "(" + alternatives + ")" + BOUNDARY_AFTER + "( *)")

        def replace(match: re.Match) -> str:
            lead, english, trail = match.groups()
            chinese = self.message(found[english], depth).strip()
            if align and len(trail) >= 2:
                trail = " " * max(1, len(trail) + len(english) - width(chinese))
            return lead + chinese + trail

        return pattern.sub(replace, text)


@functools.cache
def require_cjk_fonts() -> None:
    """Make :data:`CJK_FONTS` known to matplotlib wherever Debian put them, or raise
    :class:`TranslationError` saying which package and command install them.

    matplotlib reads its list of fonts from a cache (``fontlist-*.json`` in ``MPLCONFIGDIR`` or
    ``~/.cache/matplotlib``) that it never refreshes: written before the font was installed, it
    hides the font from every later process. So a font missing from that list is looked for in
    the system's font folders now and registered by its path."""
    from matplotlib import font_manager

    from attention_course.i18n import add_system_fonts

    missing = set(CJK_FONTS.values()) - {font.name for font in font_manager.fontManager.ttflist}
    if missing:
        missing -= add_system_fonts(missing)
    if missing:
        raise TranslationError(
            f"the font {', '.join(sorted(missing))} for the Chinese figures is not installed: `make book` "
            f"installs it (Debian's {CJK_PACKAGE}: apt-get install {CJK_PACKAGE})")


def _cjk_family(family: list[str]) -> list[str]:
    cjk = CJK_FONTS["monospace"] if "monospace" in family else CJK_FONTS["default"]
    return [*family, cjk] if cjk not in family else family


def _translate_labels(formatter, translator: Translator) -> None:
    """Translate the tick labels a formatter holds: ``set_ticks(positions, labels)`` keeps them
    in a function of a dictionary (matplotlib 3.11), ``FixedFormatter`` in a list."""
    from matplotlib.ticker import FixedFormatter, FuncFormatter

    if isinstance(formatter, FixedFormatter):
        formatter.seq = [translator.text(s) for s in formatter.seq]
    elif (isinstance(formatter, FuncFormatter) and isinstance(formatter.func, functools.partial)
          and len(formatter.func.args) == 1 and isinstance(formatter.func.args[0], dict)):
        labels = {loc: translator.text(s) for loc, s in formatter.func.args[0].items()}
        formatter.func = functools.partial(formatter.func.func, labels)


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _missing_glyphs():
    """The characters that a drawing inside this block finds in none of a text's fonts (a tofu
    box each), as matplotlib reports them: a warning, or a log record of its math renderer. The
    other font messages (no bold face in the CJK font) are left out of the build's log."""
    handler, logger = _Collect(), logging.getLogger("matplotlib")
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    missing: list[str] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield missing
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
    missing += [str(w.message) for w in caught if "missing from font" in str(w.message)]
    missing += [m for m in handler.messages if "does not have a glyph" in m]


CJK = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]")
MATH = re.compile(r"(?<!\\)\$.+(?<!\\)\$")


def translate_figure(payload: dict, translator: Translator, alt: list | None = None) -> tuple[bytes, list[str]]:
    """The Chinese PNG of a pickled figure, drawn as IPython's inline backend drew the English
    one, and the English prose left in its texts; its Chinese text alternative appended to
    ``alt`` when given (:func:`chinese_alt_text`). Raises :class:`TranslationError` when a
    Chinese text would show tofu boxes: a character no font has, or Chinese in a text with math
    (``$...$``: matplotlib's math renderer has no CJK font; write the math in Unicode)."""
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt
    from IPython.core.pylabtools import print_figure
    from matplotlib.axes import Axes
    from matplotlib.text import Text

    require_cjk_fonts()
    with matplotlib.rc_context(_unpack(payload["rc"])):
        fig = _unpack(payload["figure"])
        try:
            for ax in fig.findobj(Axes):
                for axis in (ax.xaxis, ax.yaxis):
                    for formatter in (axis.get_major_formatter(), axis.get_minor_formatter()):
                        _translate_labels(formatter, translator)
                    labels = axis.get_ticklabels()
                    family = labels[0].get_fontfamily() if labels else matplotlib.rcParams["font.family"]
                    ax.tick_params(axis="x" if axis is ax.xaxis else "y", which="both",
                                   labelfontfamily=_cjk_family(list(family)))
            # the labels of the lines and bars (a legend shows copies; the alt text reads these)
            for artist in fig.findobj(lambda a: not isinstance(a, (Text, Axes)) and hasattr(a, "get_label")):
                label = artist.get_label()
                if isinstance(label, str) and label and not label.startswith("_"):
                    artist.set_label(translator.text(label))
            left = []
            for text in fig.findobj(Text):
                english = text.get_text()
                if not english.strip():
                    continue
                chinese = translator.text(english)
                text.set_fontfamily(_cjk_family(text.get_fontfamily()))
                if chinese != english:
                    if CJK.search(chinese) and MATH.search(chinese):
                        raise TranslationError(f"the translation {chinese!r} of {english!r} has Chinese in a "
                                               "text with math ($...$), which matplotlib draws without a CJK font")
                    text.set_text(chinese)
                elif text.get_visible():
                    left += english_prose(english)
            with _missing_glyphs() as missing:
                png = print_figure(fig, "png")
            if missing:
                raise TranslationError("tofu: characters no font of the figure has: " + "; ".join(sorted(set(missing))))
            if alt is not None:
                alt += [chinese_alt_text(fig, translator), describe.heat_map_tables(fig, _words(translator))]
        finally:
            plt.close(fig)
    return png, left


def _words(translator: Translator):
    """The Chinese of a sentence of :mod:`figures.describe`, from the catalog (a missing one is
    reported as missing)."""
    def words(msgid: str) -> str:
        if msgid not in translator.catalog:
            translator.missing.add(msgid)
            return msgid
        return translator.catalog[msgid]

    return words


def chinese_alt_text(fig, translator: Translator) -> str:
    """:func:`figures.describe.alt_text` of a translated figure: its sentences and its finding
    from the catalog."""
    found = getattr(fig, describe.FINDING, None)
    return describe.alt_text(fig, _words(translator), translator.text(found) if found else None)


def english_description(payload: dict) -> tuple[str, str]:
    """The alt text and the heat maps' tables (:mod:`figures.describe`) of the figure an
    English output carries."""
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context(_unpack(payload["rc"])):
        fig = _unpack(payload["figure"])
        try:
            text = describe.alt_text(fig)
            if describe.missing_finding(fig):
                raise FindingMissing(f"a plot without its finding, its alt text {text[:160]!r}...: give it the "
                                     "sentence its page draws from it, figures.describe.finding(fig, _(...)), "
                                     "computed from the figure's data")
            return text, describe.heat_map_tables(fig)
        finally:
            plt.close(fig)


def _numbers_output(tables: str) -> dict:
    """A display output that shows a figure's heat map numbers (HTML) under it."""
    import nbformat

    return nbformat.v4.new_output("display_data", data={"text/html": tables})


def with_alt_texts(outputs: list) -> list:
    """The English outputs, each picture that carries its figure given its alt text, and
    followed by its heat maps' numbers where it has small ones (copies)."""
    described = []
    for output in outputs:
        payload = output.get("data", {}).get(MIME) or {}
        tables = ""
        if "image/png" in output.get("data", {}) and "figure" in payload:
            output = copy.deepcopy(output)
            text, tables = english_description(payload)
            if text:
                output.setdefault("metadata", {})[ALT] = text
        described.append(output)
        if tables:
            described.append(_numbers_output(tables))
    return described


def recorded_messages(outputs: list) -> list[dict]:
    """The messages that outputs carry (a figure's, and the cell's at its end)."""
    return [m for output in outputs for m in output.get("data", {}).get(MIME, {}).get("messages", [])]


def padded_cells(outputs: list) -> list[list]:
    """The padded table cells that a cell's outputs carry."""
    return [c for output in outputs for c in output.get("data", {}).get(MIME, {}).get("cells", [])]


def translate_outputs(outputs: list, catalog: dict[str, str], where: str, page: list[dict] = ()) -> list:
    """A cell's outputs in Chinese (copies); raises :class:`TranslationError` naming what is
    missing. ``page``: the messages of the page's other cells (a module imported in one cell
    formats its constant words there, and another cell prints them)."""
    translator = Translator(catalog, [*page, *recorded_messages(outputs)], padded_cells(outputs))
    translated, problems = [], []
    for index, output in enumerate(outputs, start=1):
        output = copy.deepcopy(output)
        tables = ""
        kind = output.get("output_type")
        data = output.get("data", {})
        payload = data.pop(MIME, None)
        if kind == "stream" and output.get("name") == "stdout":
            output["text"] = translator.printout(output["text"])
            left = english_prose(output["text"])
            if left:
                problems.append(f"output {index} (printed): English left untranslated: {sorted(set(left))}")
        elif kind in ("display_data", "execute_result"):
            if "image/png" in data:
                if not payload or "figure" not in payload:
                    problems.append(f"output {index} (a picture) has no Chinese twin: the page was executed "
                                    "without book/figures/i18n.py; execute the English book again")
                else:
                    alt: list[str] = []
                    png, left = translate_figure(payload, translator, alt)
                    data["image/png"] = base64.b64encode(png).decode("ascii")
                    text, tables = alt
                    if text:
                        output.setdefault("metadata", {})[ALT] = text
                        left += english_prose(text)
                    if left:
                        problems.append(f"output {index} (a picture): English left untranslated: {sorted(set(left))}")
            if "text/markdown" in data:
                data["text/markdown"] = translator.printout(data["text/markdown"], align=False)
                left = english_prose(data["text/markdown"])
                if left:
                    problems.append(f"output {index} (a table): English left untranslated: {sorted(set(left))}")
            if not data:
                continue  # only the cell's messages: nothing to show
        translated.append(output)
        if tables:
            translated.append(_numbers_output(tables))
    if translator.missing:
        problems.insert(0, f"no translation in {CATALOG} (missing, empty or fuzzy) for: "
                        + "; ".join(repr(m) for m in sorted(translator.missing)))
    if problems:
        raise TranslationError(f"{where}:\n  " + "\n  ".join(problems))
    return translated


def _catalog_path(app: Sphinx) -> Path:
    for folder in app.config.locale_dirs or ["locale"]:
        path = Path(app.confdir, folder, LANGUAGE, "LC_MESSAGES", CATALOG)
        if path.is_file():
            return path
    raise ExtensionError(f"no {CATALOG} for {LANGUAGE} under the locale_dirs {app.config.locale_dirs}")


_catalogs: dict[tuple[Path, float], dict[str, str]] = {}


def _catalog(env) -> dict[str, str]:
    path = _catalog_path(env.app)
    key = (path, path.stat().st_mtime)
    if key not in _catalogs:
        _catalogs[key] = read_catalog(path)
    return _catalogs[key]


def _give_alt_texts(nb_renderer) -> None:
    """Make a MyST-NB element renderer put the alt text an output carries (:data:`ALT`) on its
    picture, unless the cell gave the picture one."""
    original = nb_renderer.render_image
    if getattr(original, "gives_alt", False):
        return

    def render_image(data):
        found = original(data)
        alt = data.output_metadata.get(ALT)
        for node in found:
            if alt and not node.get("alt"):
                node["alt"] = alt
        return found

    render_image.gives_alt = True
    nb_renderer.render_image = render_image


def _install(app: Sphinx, config) -> None:
    """Put the alt texts and the translation between MyST-NB's reading of a code cell's outputs
    and their rendering (MyST-NB 1.4's ``_get_nb_code_cell_outputs``), once per process; it
    translates only in a build whose language is zh_CN."""
    if config.language == LANGUAGE:
        _catalog_path(app)  # fail early without the catalog or the font
        try:
            require_cjk_fonts()
        except TranslationError as error:
            raise ExtensionError(f"the Chinese book cannot be drawn: {error}") from None
    from myst_nb.sphinx_ import SphinxNbRenderer

    original = SphinxNbRenderer._get_nb_code_cell_outputs
    if getattr(original, "translates", False):
        return

    def chinese_outputs(renderer, token):
        exec_count, outputs = original(renderer, token)
        _give_alt_texts(renderer.nb_renderer)
        env = renderer.document.settings.env
        where = f"{env.docname}, code cell {token.meta['index'] + 1}"
        if env.config.language != LANGUAGE:
            try:
                return exec_count, with_alt_texts(outputs)
            except FindingMissing as error:
                raise ExtensionError(f"{where}: {error}") from None
        page = [m for cell in renderer.nb_client.notebook.cells for m in recorded_messages(cell.get("outputs", []))]
        try:
            return exec_count, translate_outputs(outputs, _catalog(env), where, page)
        except TranslationError as error:
            raise ExtensionError(f"the Chinese book cannot show {error}") from None

    chinese_outputs.translates = True
    SphinxNbRenderer._get_nb_code_cell_outputs = chinese_outputs


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _install)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
