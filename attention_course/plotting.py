"""Plotting helpers shared by the book's figures and the notebooks, and the words of the
course package's figures in the language of the messages (:func:`figure_text`)."""

from __future__ import annotations

import functools
from typing import Sequence

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from attention_course import i18n

#: Chinese fonts a figure may fall back on: the book's own first (Debian's fonts-wqy-microhei, as
#: book/_ext/translated_outputs.py draws the Chinese book's figures), then the usual ones of other systems
CJK_FONTS = ("WenQuanYi Micro Hei", "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN",
             "Microsoft YaHei", "SimHei", "PingFang SC", "Hiragino Sans GB", "Heiti SC", "Arial Unicode MS")


@functools.cache
def cjk_font() -> str | None:
    """The first of :data:`CJK_FONTS` matplotlib can draw with on this machine, found as the book
    finds its font: in matplotlib's list of fonts, else in the system's font folders (matplotlib's
    cached list never sees a font installed after it was written: such a font is registered by
    its path); None when there is none."""
    from matplotlib import font_manager, ft2font

    manager = font_manager.fontManager
    known = {font.name for font in manager.ttflist}
    found = next((name for name in CJK_FONTS if name in known), None)
    if found is None:
        for path in font_manager.findSystemFonts():
            try:
                first = ft2font.FT2Font(path)
                faces = [first] + [ft2font.FT2Font(path, face_index=i) for i in range(1, first.num_faces)]
            except (OSError, RuntimeError):  # a file FreeType cannot read is no font of ours
                continue
            if {face.family_name for face in faces} & set(CJK_FONTS):
                manager.addfont(path)
        known = {font.name for font in manager.ttflist}
        found = next((name for name in CJK_FONTS if name in known), None)
    return found


_noted: set = set()  # the languages whose learner was told that the figures stay English


def figure_words() -> bool:
    """Whether a figure drawn now can say its words in the messages' language (:mod:`i18n`):
    always in English; in Chinese where a CJK font is found (:func:`cjk_font`), which matplotlib
    then falls back on for every text (the Latin letters keep their own font). Where none is, the
    figures keep their English words (never boxes for missing glyphs) and the learner is told so
    once, in Chinese."""
    language = i18n.language()
    if language == i18n.ENGLISH:
        return False
    font = cjk_font()
    if font is None:
        if language not in _noted:
            _noted.add(language)
            print(i18n.gettext("no Chinese font on this machine, so the figures' words stay English (install one "
                               "of {fonts}, then restart the kernel)").format(fonts=", ".join(CJK_FONTS[:3])))
        return False
    family = list(matplotlib.rcParams["font.family"])
    if font not in family:
        matplotlib.rcParams["font.family"] = [*family, font]
    return True


def figure_text(english: str) -> str:
    """A word of one of the package's figures (a title, a label, a legend's entry): translated
    when :func:`figure_words` allows, else the English. An f-string's text is formatted after:
    ``figure_text("{n} steps").format(n=n)``."""
    return i18n.gettext(english) if figure_words() else english


def to_numpy(x) -> np.ndarray:
    """A NumPy copy of an array or tensor (detached, on the CPU)."""
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy()
    return np.asarray(x)


def show_heatmaps(
    matrices,
    *,
    xlabel: str | None = None,
    ylabel: str | None = None,
    titles: Sequence[str] | None = None,
    cmap: str = "Reds",
    figsize: tuple[float, float] | None = None,
    xticklabels: Sequence[str] | None = None,
    yticklabels: Sequence[str] | None = None,
):
    """Draw a grid of heat maps, one per ``matrices[i, j]`` of shape ``(rows, cols, n, m)``.

    A 2-D input is one map, a 3-D input one row of maps. Returns the figure. Rows of the
    maps are queries, columns are keys, the convention of the whole course (the labels by
    default: "keys", "queries", in the messages' language, :func:`figure_text`).
    """
    figure_words()  # before the figure's texts are made: they take their font then
    xlabel = figure_text("keys") if xlabel is None else xlabel
    ylabel = figure_text("queries") if ylabel is None else ylabel
    data = to_numpy(matrices)
    while data.ndim < 4:
        data = data[None]
    rows, cols = data.shape[:2]
    figsize = figsize or (2.8 * cols + 0.8, 2.6 * rows)
    fig, axes = plt.subplots(rows, cols, figsize=figsize, sharex=True, sharey=True, squeeze=False)
    vmax = max(float(data.max()), 1e-12)
    for i in range(rows):
        for j in range(cols):
            ax = axes[i, j]
            image = ax.imshow(data[i, j], cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto")
            if i == rows - 1:
                ax.set_xlabel(xlabel)
            if j == 0:
                ax.set_ylabel(ylabel)
            if titles is not None:
                ax.set_title(titles[j] if rows == 1 else titles[i * cols + j])
            if xticklabels is not None:
                ax.set_xticks(range(len(xticklabels)), xticklabels, rotation=90)
            if yticklabels is not None:
                ax.set_yticks(range(len(yticklabels)), yticklabels)
    fig.colorbar(image, ax=axes, shrink=0.7)
    return fig
