"""The text alternative of a figure: what a reader who cannot see it needs to know of it.

:func:`alt_text` reads a drawn matplotlib figure, panel by panel: its title, its axes (label
and range), each line (its label, where it starts and ends, its lowest and highest point), each
set of bars, each heat map (its size, its range, where each row peaks) and the words written
on it. The figure's own code adds what its page concludes from it (:func:`finding`), computed
from the same data as the prose. The book's build (``book/_ext/translated_outputs.py``) puts
the result into the picture's ``alt``, in each edition's language: the Chinese build reads the
figure it translated, with the sentences below from ``figures.po``.
"""

from __future__ import annotations

import re
from typing import Callable

import numpy as np

from figures.i18n import N_

#: where a figure keeps its finding (a message formatted with figures.i18n._ by its code)
FINDING = "_course_finding"

_PANEL = N_("Panel {i} of {n}: {what}")
_TITLE = N_("{title}.")
_X_AXIS = N_("Horizontal axis: {label}, from {lo} to {hi}.")
_Y_AXIS = N_("Vertical axis: {label}, from {lo} to {hi}.")
_LINE = N_("{label}: from {first} at {x_first} to {last} at {x_last}.")
_LINE_PEAKS = N_("{label}: from {first} at {x_first} to {last} at {x_last}; lowest {low} at {x_low}, highest {high} at {x_high}.")
_LEVEL = N_("{label}: level at {value}.")
_POINTS = N_("{label}: {n} points, from {low} to {high}.")
_BARS = N_("{n} bars from {low} to {high}, the highest at {where}.")
_HEATMAP = N_("A heat map of {rows} rows by {cols} columns, values from {low} to {high}.")
_ROW_PEAKS = N_("The largest value of each row is in column {columns}.")
_ROW_PEAKS_NAMED = N_("The largest value of each row (row: column): {pairs}.")
_DIAGONAL = N_("The largest value of each row lies on average {d} columns from the diagonal.")
_TEXTS = N_("Written on it: {texts}.")
_SERIES = N_("series {i}")
#: how a list of words is joined (the translation: "、"), here and in the Chinese build's printouts
LIST = N_(", ")
#: how a list of clauses is joined (the translation: "；"), in the Chinese build's printouts
CLAUSES = N_("; ")

_MATH = [(r"\sqrt", "√"), (r"\cdot", "·"), (r"\top", "ᵀ"), (r"\times", "×"), (r"\ell", "ℓ"), (r"\alpha", "α"),
         (r"\log", "log"), (r"\exp", "exp"), (r"\mathbf", ""), (r"\mathrm", ""), (r"\,", " "), (r"\!", "")]


def plain(text: str) -> str:
    """A figure's text without matplotlib's math markup: ``$\\sqrt{d}$`` reads "√d"."""
    if "$" in text:
        for tex, char in _MATH:
            text = text.replace(tex, char)
        text = re.sub(r"[${}\\]", "", text)
    text = re.sub(r"\s+", " ", text).strip()
    # a line break before or after full-width punctuation is no space ("编码\n（第 0 位…）")
    return re.sub(r" (?=[（），。；：、])|(?<=[（），。；：、]) ", "", text)


def number(x: float) -> str:
    x = float(x)
    if x == int(x) and abs(x) < 1e6:
        return str(int(x))
    return f"{x:.3g}"


def finding(fig, text: str):
    """Give ``fig`` the finding its page draws from it (``text``: formatted with
    ``figures.i18n._`` from the figure's data, so that it is translated and cannot drift);
    returns ``fig``."""
    setattr(fig, FINDING, text)
    return fig


def _line_label(line, i: int, words) -> str:
    label = str(line.get_label())
    if label.startswith("_"):
        return words(_SERIES).format(i=i)
    return plain(label)


def _tick_names(ax, which: str, n: int) -> list[str] | None:
    """The ``n`` labels of a heat map's rows (``which="y"``) or columns, when its ticks (or those
    of a panel that shares the axis and shows them) name each one."""
    shared = ax.get_shared_y_axes() if which == "y" else ax.get_shared_x_axes()
    for other in [ax, *shared.get_siblings(ax)]:
        axis = other.yaxis if which == "y" else other.xaxis
        locs = list(axis.get_ticklocs())
        labels = [plain(t.get_text()) for t in axis.get_ticklabels()]
        if len(labels) == n and all(labels) and [round(x) for x in locs] == list(range(n)):
            return labels
    return None


def _axis_label(ax, which: str) -> str:
    """The label of an axis, or of the same axis of a panel that shares it (a grid of heat maps
    labels only its outer panels)."""
    shared = ax.get_shared_y_axes() if which == "y" else ax.get_shared_x_axes()
    for other in [ax, *shared.get_siblings(ax)]:
        label = plain(other.get_ylabel() if which == "y" else other.get_xlabel())
        if label:
            return label
    return ""


def _outer_label(ax, which: str) -> str:
    """:func:`_axis_label`, or else the label of a panel of the same row (``"y"``) or column
    (``"x"``) of the grid: a row of heat maps with rows of their own labels its first panel only."""
    label = _axis_label(ax, which)
    spec = ax.get_subplotspec() if hasattr(ax, "get_subplotspec") else None
    if label or spec is None:
        return label
    for other in ax.figure.axes:
        other_spec = other.get_subplotspec() if hasattr(other, "get_subplotspec") else None
        if other is ax or other_spec is None or other_spec.get_gridspec() is not spec.get_gridspec():
            continue
        span = (lambda sp: sp.rowspan) if which == "y" else (lambda sp: sp.colspan)
        if span(other_spec) == span(spec):
            label = plain(other.get_ylabel() if which == "y" else other.get_xlabel())
            if label:
                return label
    return ""


def _axes(ax, words: Callable[[str], str]) -> list[str]:
    """The sentences of one panel."""
    said = []
    title = plain(ax.get_title())
    if title:
        said.append(words(_TITLE).format(title=title))
    images = [im for im in ax.get_images() if im.get_visible()]
    if not images:
        for axis, template in ((ax.xaxis, _X_AXIS), (ax.yaxis, _Y_AXIS)):
            label = plain(axis.get_label_text())
            lo, hi = sorted(ax.get_xlim() if axis is ax.xaxis else ax.get_ylim())
            if label:
                said.append(words(template).format(label=label, lo=number(lo), hi=number(hi)))
    # "training step (batches of 64)" -> "training step = 25"
    x_name = re.sub(r"\s*\(.*$", "", plain(ax.get_xlabel())) or "x"
    lines = [line for line in ax.get_lines() if line.get_visible() and len(np.atleast_1d(line.get_xdata())) > 1]
    for i, line in enumerate(lines, start=1):
        x = np.asarray(line.get_xdata(), dtype=float)
        y = np.asarray(line.get_ydata(), dtype=float)
        ok = np.isfinite(x) & np.isfinite(y)
        labelled = not str(line.get_label()).startswith("_")
        if ok.sum() < 2:
            continue
        x, y = x[ok], y[ok]
        label = _line_label(line, i, words)
        if np.ptp(y) == 0 or np.ptp(x) == 0:  # a reference level, or a grid line (said by nothing else)
            if labelled and np.ptp(y) == 0:
                said.append(words(_LEVEL).format(label=label, value=number(y[0])))
            continue
        if line.get_linestyle() in ("None", "", " ") and len(x) > 2:
            said.append(words(_POINTS).format(label=label, n=len(x), low=number(y.min()), high=number(y.max())))
            continue
        at = lambda k: f"{x_name} = {number(x[k])}"  # noqa: E731
        low, high = int(y.argmin()), int(y.argmax())
        ends = {0, len(y) - 1}
        template = _LINE if {low, high} <= ends else _LINE_PEAKS
        said.append(words(template).format(label=label, first=number(y[0]), x_first=at(0), last=number(y[-1]),
                                           x_last=at(-1), low=number(y[low]), x_low=at(low),
                                           high=number(y[high]), x_high=at(high)))
    for container in ax.containers:
        bars = [b for b in getattr(container, "patches", []) if b.get_visible()]
        if not bars:
            continue
        horizontal = getattr(container, "orientation", "vertical") == "horizontal"
        heights = np.array([b.get_width() if horizontal else b.get_height() for b in bars])
        top = bars[int(np.argmax(heights))]
        centre = top.get_y() + top.get_height() / 2 if horizontal else top.get_x() + top.get_width() / 2
        axis = ax.yaxis if horizontal else ax.xaxis
        ticks = {round(t.get_position()[1 if horizontal else 0], 6): t.get_text() for t in axis.get_ticklabels()}
        where = plain(ticks.get(round(float(centre), 6), "")) or number(centre)
        said.append(words(_BARS).format(n=len(bars), low=number(heights.min()), high=number(heights.max()), where=where))
    for image in images:
        data = np.asarray(image.get_array(), dtype=float)
        if data.ndim != 2:
            continue
        rows, cols = data.shape
        said.append(words(_HEATMAP).format(rows=rows, cols=cols, low=number(np.nanmin(data)), high=number(np.nanmax(data))))
        peaks = np.nanargmax(np.where(np.isnan(data), -np.inf, data), axis=1)
        row_names, col_names = _tick_names(ax, "y", rows), _tick_names(ax, "x", cols)
        if rows <= 32 and row_names and col_names:
            pairs = words(LIST).join(f"{row_names[r]}: {col_names[c]}" for r, c in enumerate(peaks))
            said.append(words(_ROW_PEAKS_NAMED).format(pairs=pairs))
        elif rows <= 12:
            said.append(words(_ROW_PEAKS).format(columns=words(LIST).join(str(p + 1) for p in peaks)))
        elif rows == cols:
            diagonal = np.arange(rows)
            said.append(words(_DIAGONAL).format(d=number(np.mean(np.abs(peaks - diagonal)))))
    texts = [plain(t.get_text()) for t in ax.texts if t.get_visible() and plain(t.get_text())]
    if texts:
        said.append(words(_TEXTS).format(texts=words(LIST).join(dict.fromkeys(texts))))
    return said


def _is_colorbar(ax) -> bool:
    return ax.get_label() == "<colorbar>"


def plotted(fig) -> bool:
    """Whether ``fig`` is a plot (a panel with axes that says something: a line, bars, a heat map,
    a title), not a diagram drawn on a canvas without axes (whose finding is its whole description)."""
    return any(_axes(ax, lambda s: s) for ax in fig.axes if ax.get_visible() and not _is_colorbar(ax) and ax.axison)


def missing_finding(fig) -> bool:
    """Whether ``fig`` is a plot without the finding its page draws from it (:func:`finding`):
    its alt text would say what it draws but not what it shows."""
    return plotted(fig) and not getattr(fig, FINDING, None)


def alt_text(fig, words: Callable[[str], str] = lambda s: s, finding_text: str | None = None) -> str:
    """What ``fig`` shows, in sentences, in the language of ``words`` (a message id of this
    module to its translation): the figure's title, each panel, then its finding (the figure's
    own, or ``finding_text``: its translation)."""
    said = []
    title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
    if title.strip():
        said.append(words(_TITLE).format(title=plain(title)))
    panels = [ax for ax in fig.axes if ax.get_visible() and not _is_colorbar(ax) and ax.axison]
    drawn = [(ax, _axes(ax, words)) for ax in panels]
    drawn = [(ax, s) for ax, s in drawn if s]
    for i, (ax, sentences) in enumerate(drawn, start=1):
        text = " ".join(sentences)
        said.append(words(_PANEL).format(i=i, n=len(drawn), what=text) if len(drawn) > 1 else text)
    found = finding_text if finding_text is not None else getattr(fig, FINDING, None)
    if found:
        said.append(found)
    # sentences apart by a space, except after a full-width stop (Chinese needs none); no space
    # between two Chinese words, which a template's space around a value can leave ("从 带宽 h")
    text = re.sub(r"(?<=[。；：）])\s+", "", " ".join(said))
    return re.sub(r"(?<=[\u3400-\u9fff]) (?=[\u3400-\u9fff])", "", text)


_NUMBERS = N_("The numbers of the heat map")
_ROWS_COLUMNS = N_("rows: {rows}; columns: {columns}")
#: a heat map up to this many cells gets its numbers as a table under the picture
MAX_CELLS = 400


def _cell_texts(ax, rows: int, cols: int) -> list[list[str]] | None:
    """What a heat map writes in each of its cells (a mask's "True" or "−∞", the weights rounded),
    row by row, when it writes one text in every cell: the table then shows what the picture
    shows, not the colour values behind it; None otherwise."""
    cells = {}
    for t in ax.texts:
        x, y = t.get_position()
        if t.get_visible() and float(x).is_integer() and float(y).is_integer():
            cells[int(y), int(x)] = plain(t.get_text())
    if set(cells) != {(r, c) for r in range(rows) for c in range(cols)}:
        return None
    return [[cells[r, c] for c in range(cols)] for r in range(rows)]


def heat_map_tables(fig, words: Callable[[str], str] = lambda s: s) -> str:
    """The numbers of each small heat map of ``fig`` (up to :data:`MAX_CELLS` cells) as HTML
    tables, one per panel, inside one ``<details>`` element; "" when there is none."""
    import html

    tables = []
    panels = [ax for ax in fig.axes if ax.get_visible() and not _is_colorbar(ax) and ax.axison]
    for ax in panels:
        for image in ax.get_images():
            data = np.asarray(image.get_array(), dtype=float)
            if data.ndim != 2 or data.size > MAX_CELLS:
                continue
            rows, cols = data.shape
            row_names = _tick_names(ax, "y", rows) or [str(r + 1) for r in range(rows)]
            col_names = _tick_names(ax, "x", cols) or [str(c + 1) for c in range(cols)]
            caption = " — ".join(filter(None, [plain(ax.get_title()), words(_ROWS_COLUMNS).format(
                rows=_outer_label(ax, "y") or "—", columns=_outer_label(ax, "x") or "—")]))
            head = "".join(f'<th scope="col">{html.escape(c)}</th>' for c in col_names)
            written = _cell_texts(ax, rows, cols)
            body = "".join(
                f'<tr><th scope="row">{html.escape(row_names[r])}</th>'
                + "".join(f"<td>{html.escape(written[r][c]) if written else f'{data[r, c]:.2f}'}</td>"
                          for c in range(cols)) + "</tr>"
                for r in range(rows))
            tables.append(f'<table class="heat-map-numbers"><caption>{html.escape(caption)}</caption>'
                          f"<tr><td></td>{head}</tr>{body}</table>")
    if not tables:
        return ""
    summary = html.escape(words(_NUMBERS))
    # a region of its own that scrolls sideways (a wide map) and takes the keyboard's focus to do so
    return (f'<details class="heat-map-numbers"><summary>{summary}</summary>'
            f'<div class="heat-map-numbers" role="region" tabindex="0" aria-label="{summary}">'
            + "".join(tables) + "</div></details>")
