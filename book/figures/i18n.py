"""The words of the book's figures and printouts, kept so that the Chinese book can translate them.

The figure code writes its words in English through :func:`_` (``_("{n} steps", n=400)``: a
message with named placeholders and the values to fill in). The English book shows what the
code draws and prints, as it always did. The Chinese book is built from the same executed
pages (the English build's Jupyter cache) without running any of them again, so every output
carries what the Chinese build needs to say the same thing in Chinese:

- every matplotlib figure a page shows carries itself, pickled, in its display bundle (beside
  the English PNG), under :data:`MIME`;
- every cell that formatted messages ends with one more display output of :data:`MIME`: the
  English text of each message, its message id and its values, and the table cells it padded
  (:func:`padded`).

MyST-NB shows neither (an unknown MIME type). The Chinese build (``book/_ext/translated_outputs.py``)
formats each message's translation from ``locale/zh_CN/LC_MESSAGES/figures.po`` with the same
values, puts it in place of the English in the cell's printout (a padded table cell padded to
the same width), translates the figure's texts the same way and draws the figure again. So the numbers come from the one execution, and a
corrected translation needs no new execution. The catalog is made from this package by
``pybabel extract -k _ -k N_`` (``make figures-catalog``).

Nothing here changes what the English book shows: outside a Jupyter kernel, or in English,
:func:`_` only formats the message.
"""

from __future__ import annotations

import base64
import pickle
import zlib

#: The MIME type of what the Chinese build needs (a JSON object: ``figure``, ``rc``, ``messages``).
MIME = "application/vnd.attention-course.translatable+json"

#: The messages formatted since the current cell began: English text -> (message id, values).
_recorded: dict[str, tuple[str, dict]] = {}
#: The table cells padded since the current cell began: padded text -> (text, width, alignment).
_cells: dict[str, tuple[str, int, str]] = {}
_hooked = False


def _(message: str, **values) -> str:
    """``message`` (English, with ``{name}`` placeholders, format specs allowed) formatted with
    ``values``; recorded, so that the Chinese build formats the translation of ``message`` with
    the same values. A value that is itself the English text of a message formatted earlier in
    the cell is translated too. Literal braces are written ``{{`` and ``}}`` even without values."""
    text = message.format(**values)
    if _hooked:
        _recorded[text] = (message, values)
    return text


def padded(text: str, width: int, align: str = "<") -> str:
    """``text`` padded with spaces to ``width`` characters, on the right (``align="<"``) or on the
    left (``">"``): a cell of a printed table. Recorded, so that the Chinese build pads the
    translation of ``text`` to the same width on screen (a Chinese character takes two columns)
    and the table's columns stay aligned."""
    cell = f"{text:{align}{width}}"
    # recorded even when the English fills the width exactly: its translation may not
    if _hooked:
        _cells[cell] = (text, width, align)
    return cell


def N_(message: str) -> str:
    """``message`` unchanged: marks English that something else draws (the course package's
    plots), so that it is extracted into the catalog and the Chinese build translates it
    wherever it appears as a whole text of a figure."""
    return message


def _pack(obj) -> str:
    """``obj`` pickled, compressed (a figure's data arrays shrink about eightfold) and in base64."""
    return base64.b64encode(zlib.compress(pickle.dumps(obj), 6)).decode("ascii")


def _messages() -> list[dict]:
    return [{"en": text, "msgid": msgid, "values": _pack(values)}
            for text, (msgid, values) in _recorded.items()]


def _padded_cells() -> list[list]:
    return [[cell, text, width, align] for cell, (text, width, align) in _cells.items()]


def _figure_bundle(fig, include=None, exclude=None):
    """The part of a figure's display bundle that IPython's PNG formatter does not make: the
    figure itself (pickled as it is shown), the rcParams it is drawn with (those that differ from
    matplotlib's defaults) and the messages formatted so far in the cell."""
    import matplotlib

    rc = {key: value for key, value in matplotlib.rcParams.items()
          if key in matplotlib.rcParamsDefault and value != matplotlib.rcParamsDefault[key]}
    return {MIME: {"figure": _pack(fig), "rc": _pack(rc), "messages": _messages()}}


def _start_cell(*args) -> None:
    _recorded.clear()
    _cells.clear()


def _end_cell(*args) -> None:
    """Publish the cell's messages and padded cells (after its figures, which the inline backend
    shows on ``post_execute``)."""
    if _recorded:
        from IPython.display import display

        display({MIME: {"messages": _messages(), "cells": _padded_cells()}}, raw=True)
    _start_cell()


def _hook_into_kernel() -> None:
    """In a Jupyter kernel (a page being executed), give every figure its pickled twin and
    publish each cell's messages; elsewhere (tests, scripts) do nothing."""
    global _hooked
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if _hooked or shell is None or not hasattr(shell, "kernel"):
        return
    from matplotlib.figure import Figure

    shell.display_formatter.mimebundle_formatter.for_type(Figure, _figure_bundle)
    shell.events.register("pre_run_cell", _start_cell)
    shell.events.register("post_run_cell", _end_cell)
    _hooked = True


_hook_into_kernel()
