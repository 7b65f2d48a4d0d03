"""Plotting helpers shared by the book's figures and the notebooks (their words in the language of
the messages: :func:`attention_course.i18n.figure_text`)."""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np

from attention_course.i18n import figure_text, figure_words

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
