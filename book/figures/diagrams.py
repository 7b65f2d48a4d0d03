"""Architecture pictures of the book, drawn with matplotlib when the book is built.

Every drawing works in inches: the axes fill the figure and one data unit is one inch, so
a box placed at ``(x, y)`` is ``x`` inches from the left edge of the picture. Widths stay
at or under :data:`WIDTH` inches, and no text is smaller than :data:`SMALLEST` points, so
that at the book's content width every label is at least 70 % of the body text (the
screenshot test in ``tests/test_book.py`` measures it).

Shapes on the arrows follow the course's conventions: ``B`` sequences per batch, ``S``
source and ``T`` target positions, ``D`` the model width (``d_model``), ``h`` heads of
width ``d = D/h``, ``F`` the feed-forward width (``d_ff``), ``V`` a vocabulary size.

Each ``draw_*`` function returns the figure, with its text alternative attached
(:func:`figures.describe.finding`: a drawing has no axes to read, so its finding is the whole
description), translated through ``figures.po`` like its labels. The pages give each picture the
classes ``course-diagram diagram-<function name, with - for _>`` (MyST-NB's ``mystnb: image:`` cell
metadata), by which the screenshot test finds it.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from figures.describe import finding
from figures.i18n import _

WIDTH = 7.6  # inches: the widest picture, drawn for the book's content column
SMALLEST = 10  # points: the smallest text of any picture
LABEL = 11  # points: text inside boxes
SHAPE = 10  # points: tensor shapes on arrows

# Box colours by role, the same in every picture.
COLOURS = {
    "data": "#f2f2f2",
    "embed": "#fde9c9",
    "attention": "#f9d5d3",
    "norm": "#fff6bf",
    "ffn": "#d6ecd2",
    "linear": "#d9e4f5",
    "rnn": "#e6dcf2",
}

# --------------------------------------------------------------------------- drawing kit


def _canvas(width: float, height: float):
    """A figure of ``width`` x ``height`` inches whose data units are inches."""
    if width > WIDTH:
        raise ValueError(f"a picture {width} inches wide is wider than the book's {WIDTH}")
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    return fig, ax


def _box(ax, x: float, y: float, w: float, h: float, text: str, role: str = "data",
         size: float = LABEL, **style) -> dict:
    """A rounded box centred on ``(x, y)``; returns its anchor points (top, bottom, left, right).
    ``style`` overrides the patch's (``linewidth``, ``edgecolor``, ``hatch``); a hatched box's text
    sits on its fill colour, so that the hatching does not cross it."""
    style = {"facecolor": COLOURS[role], "edgecolor": "#444444", "linewidth": 1.0, **style}
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08", **style))
    backing = {"boxstyle": "square,pad=0.1", "facecolor": style["facecolor"], "edgecolor": "none"}
    ax.text(x, y, text, ha="center", va="center", fontsize=size, bbox=backing if style.get("hatch") else None)
    return {"top": (x, y + h / 2), "bottom": (x, y - h / 2), "left": (x - w / 2, y),
            "right": (x + w / 2, y)}


def _arrow(ax, start, end, shape: str | None = None, side: str = "right",
           offset: float = 0.08, colour: str = "#333333", connection: str = "arc3") -> None:
    """An arrow from ``start`` to ``end``, with the tensor ``shape`` written beside its middle."""
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12,
                                 color=colour, linewidth=1.2, connectionstyle=connection,
                                 shrinkA=0, shrinkB=0))
    if shape:
        mx, my = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
        if side == "right":
            ax.text(mx + offset, my, shape, ha="left", va="center", fontsize=SHAPE, family="monospace")
        elif side == "left":
            ax.text(mx - offset, my, shape, ha="right", va="center", fontsize=SHAPE, family="monospace")
        else:  # above a horizontal arrow
            ax.text(mx, my + offset, shape, ha="center", va="bottom", fontsize=SHAPE, family="monospace")


def _residual(ax, x_centre: float, half_width: float, y_from: float, y_to: float,
              reach: float = 0.25, side: str = "left") -> None:
    """The residual connection: a line leaving the main path (at ``x_centre``) at ``y_from``
    that goes around the ``side`` ("left" or "right") of the sub-layer and enters the
    add-and-norm box at ``y_to``."""
    sign = -1 if side == "left" else 1
    x = x_centre + sign * (half_width + reach)
    ax.plot([x_centre, x, x], [y_from, y_from, y_to], color="#777777", linewidth=1.2, zorder=0)
    _arrow(ax, (x, y_to), (x_centre + sign * half_width, y_to), colour="#777777")


def smallest_text(fig) -> float:
    """The smallest font size, in points, of any non-empty text of ``fig``."""
    from matplotlib.text import Text

    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]
    if not sizes:
        raise ValueError("the figure has no text")
    return min(sizes)


# ------------------------------------------------------------------------ the Transformer


def _encoder_column(ax, x: float, y0: float, sequence: str, ids_label: str) -> dict:
    """The bottom of an encoder or decoder column centred on ``x``, from ``y0`` up: the ids,
    the scaled embedding and the positional encoding. ``sequence`` is ``"S"`` (source) or
    ``"T"`` (target). Returns the anchors of the boxes, their width and the column's shape."""
    w = 2.2
    shape = f"(B, {sequence}, D)"
    ids = _box(ax, x, y0, w, 0.4, ids_label, "data")
    emb = _box(ax, x, y0 + 0.95, w, 0.45, _("embedding × √D"), "embed")
    _arrow(ax, ids["top"], emb["bottom"], f"(B, {sequence})")
    pos = _box(ax, x, y0 + 1.85, w, 0.45, _("+ positional encoding"), "embed")
    _arrow(ax, emb["top"], pos["bottom"], shape)
    return {"ids": ids, "embedding": emb, "positions": pos, "width": w, "shape": shape}


def _sublayer(ax, x: float, y_in: float, w: float, label: str, role: str, shape: str,
              in_shape: str | None = None, residual_side: str = "left") -> tuple[float, dict]:
    """One sub-layer with its add & norm above it and the residual around both (on
    ``residual_side``); the main path enters at ``y_in``. Returns the y of the add & norm's
    top and the sub-layer's box."""
    layer = _box(ax, x, y_in + 0.65, w, 0.5, label, role)
    _arrow(ax, (x, y_in), layer["bottom"], in_shape or shape,
           side="right" if residual_side == "left" else "left")
    norm = _box(ax, x, y_in + 1.45, w, 0.4, _("add & norm"), "norm")
    _arrow(ax, layer["top"], norm["bottom"], shape, side="right" if residual_side == "left" else "left")
    _residual(ax, x, w / 2, y_in + 0.15, y_in + 1.45, side=residual_side)
    return y_in + 1.65, layer


def _repeat(ax, x: float, w: float, y0: float, y1: float, label_x: float, ha: str,
            residual_side: str = "left") -> None:
    """The dashed frame of a block that the stack repeats N times (wider on the side of its
    residual lines)."""
    left = x - w / 2 - (0.4 if residual_side == "left" else 0.15)
    ax.add_patch(FancyBboxPatch((left, y0 - 0.05), w + 0.55, y1 - y0 + 0.1,
                                boxstyle="round,pad=0.02,rounding_size=0.12", fill=False,
                                edgecolor="#888888", linestyle="--", linewidth=1.0))
    ax.text(label_x, y1 - 0.15, "× N", ha=ha, va="top", fontsize=LABEL)


def draw_encoder():
    """The encoder of chapter 6: ids to one output vector per token, one block drawn, repeated
    N times, and the linear layer of chapter 6's tagger on top (chapter 7 calls the encoder's
    output the memory, because a decoder reads it; here nothing does)."""
    fig, ax = _canvas(6.0, 7.85)
    x = 2.6
    col = _encoder_column(ax, x, 0.35, "S", _("source ids"))
    w, shape = col["width"], col["shape"]
    start = col["positions"]["top"][1]
    y, att = _sublayer(ax, x, start, w, _("multi-head\nself-attention"), "attention", shape)
    ax.text(att["right"][0] + 0.15, att["right"][1],
            _("heads: (B, h, S, d)\nweights: (B, h, S, S)\npadding mask: (B, 1, S)"),
            ha="left", va="center", fontsize=SHAPE, family="monospace")
    y, ffn = _sublayer(ax, x, y, w, _("feed-forward\n(ReLU)"), "ffn", shape)
    ax.text(ffn["right"][0] + 0.15, ffn["right"][1], _("hidden: (B, S, F)\nsame weights at\nevery position"),
            ha="left", va="center", fontsize=SHAPE, family="monospace")
    _repeat(ax, x, w, start + 0.1, y, x - w / 2 - 0.5, "right")
    output = _box(ax, x, y + 0.75, w, 0.45, _("encoder output"), "data")
    _arrow(ax, (x, y), output["bottom"], shape)
    ax.text(output["right"][0] + 0.15, output["right"][1], _("one vector\nper token"), ha="left", va="center",
            fontsize=SMALLEST)
    tagger = _box(ax, x, y + 1.55, w, 0.45, _("tagger: linear D → 2"), "linear")
    _arrow(ax, output["top"], tagger["bottom"], "(B, S, D)")
    ax.text(tagger["right"][0] + 0.15, tagger["right"][1], _("logits (B, S, 2)"), ha="left", va="center",
            fontsize=SHAPE, family="monospace")
    return finding(fig, _(
        "The Transformer encoder as a column of boxes: source ids of shape (B, S) go through the embedding scaled by "
        "the square root of D and the positional encoding to (B, S, D); then N identical blocks, each multi-head "
        "self-attention (heads of shape (B, h, S, d), weights (B, h, S, S), source padding mask (B, 1, S)) followed by "
        "add and norm, then the position-wise feed-forward network (hidden (B, S, F)) followed by add and norm, with a "
        "residual line around each sub-layer; the encoder's output, one vector per token, (B, S, D), goes to the "
        "tagger's linear layer, which gives logits (B, S, 2)."))


def draw_transformer():
    """The whole Transformer (chapter 7): the encoder column on the left, the decoder
    column on the right, the memory feeding every decoder block's cross-attention."""
    fig, ax = _canvas(WIDTH, 9.3)
    xe, xd = 1.95, 5.2
    enc = _encoder_column(ax, xe, 0.35, "S", _("source ids"))
    dec = _encoder_column(ax, xd, 0.35, "T", _("target ids, shifted right"))
    w = enc["width"]
    e0 = enc["positions"]["top"][1]
    ey, self_attention = _sublayer(ax, xe, e0, w, _("multi-head\nself-attention"), "attention", "(B, S, D)")
    ax.text(self_attention["right"][0] + 0.1, self_attention["right"][1], _("padding\nmask\n(B, 1, S)"),
            ha="left", va="center", fontsize=SHAPE, family="monospace")
    ey, _ffn = _sublayer(ax, xe, ey, w, _("feed-forward"), "ffn", "(B, S, D)")
    _repeat(ax, xe, w, e0 + 0.1, ey, xe - w / 2 - 0.5, "right")
    memory = _box(ax, xe, ey + 0.75, w, 0.42, _("memory"), "data")
    _arrow(ax, (xe, ey), memory["bottom"], "(B, S, D)")
    d0 = dec["positions"]["top"][1]
    # the decoder's residual lines run on the right, so that the memory arrow, coming from the
    # left, meets nothing on its way into the cross-attention
    dy, masked = _sublayer(ax, xd, d0, w, _("masked multi-head\nself-attention"), "attention", "(B, T, D)",
                           residual_side="right")
    ax.text(masked["right"][0] + 0.45, masked["right"][1], _("causal\nmask\n(T, T)"), ha="left",
            va="center", fontsize=SHAPE, family="monospace")
    dy, cross = _sublayer(ax, xd, dy, w, _("cross-attention"), "attention", "(B, T, D)",
                          in_shape=_("queries (B, T, D)"), residual_side="right")
    ax.text(cross["right"][0] + 0.45, cross["right"][1], _("weights\n(B, h,\n T, S)"), ha="left",
            va="center", fontsize=SHAPE, family="monospace")
    dy, _ffn = _sublayer(ax, xd, dy, w, _("feed-forward"), "ffn", "(B, T, D)", residual_side="right")
    _repeat(ax, xd, w, d0 + 0.1, dy, xd + w / 2 + 0.5, "left", residual_side="right")
    # the memory reaches the cross-attention of every decoder block, with the source's padding mask
    _arrow(ax, memory["right"], cross["left"], connection="arc3,rad=-0.2")
    ax.text(xe, memory["top"][1] + 0.15, _("to every cross-attention:\nkeys, values (B, S, D) and\n"
              "source padding mask (B, 1, S)"), ha="center", va="bottom", fontsize=SHAPE, family="monospace")
    linear = _box(ax, xd, dy + 0.7, w, 0.42, _("linear D → V"), "linear")
    _arrow(ax, (xd, dy), linear["bottom"], "(B, T, D)")
    logits = _box(ax, xd, dy + 1.45, w, 0.42, _("logits"), "data")
    _arrow(ax, linear["top"], logits["bottom"], "(B, T, V)")
    return finding(fig, _(
        "The whole encoder-decoder Transformer. Left, the encoder column from source ids (B, S) to the memory "
        "(B, S, D). Right, the decoder column: target ids shifted right (B, T), embedding and positional encoding to "
        "(B, T, D), then N blocks of masked self-attention with a causal (T, T) mask, add and norm, cross-attention "
        "whose queries are (B, T, D) and whose keys and values are the memory (B, S, D), with the source padding mask "
        "(B, 1, S) and weights (B, h, T, S), add and norm, feed-forward, add and norm, with the decoder's residual "
        "lines drawn on its right so that the memory arrow, from the left, enters only the cross-attention; a final "
        "linear layer from D to V gives logits (B, T, V). The encoder's self-attention also takes the source padding "
        "mask."))


# --------------------------------------------------------------------- multi-head attention


def draw_multihead():
    """Multi-head attention (chapter 4): project, split, attend per head, merge, W_o."""
    fig, ax = _canvas(WIDTH, 4.2)
    rows = {"queries": (3.4, "n"), "keys": (2.3, "m"), "values": (1.2, "m")}
    names = {"queries": _("queries"), "keys": _("keys"), "values": _("values")}
    splits = {}
    for name, (y, length) in rows.items():
        _box(ax, 0.5, y, 0.9, 0.45, names[name], "data")
        proj = _box(ax, 1.85, y, 0.6, 0.45, f"W_{name[0]}", "linear")
        _arrow(ax, (0.95, y), proj["left"], f"(B,{length},D)", side="above", offset=0.04)
        splits[name] = _box(ax, 3.05, y, 0.7, 0.45, _("split"), "linear")
        _arrow(ax, proj["right"], splits[name]["left"], f"(B,{length},D)", side="above", offset=0.04)
    attention = _box(ax, 4.8, 2.3, 1.2, 2.6, _("scaled\ndot-product\nattention\nin every\nhead"), "attention")
    for name, (y, length) in rows.items():
        _arrow(ax, splits[name]["right"], (attention["left"][0], y), f"(B,h,{length},d)",
               side="above", offset=0.04)
    ax.text(4.8, 0.85, _("weights (B,h,n,m)"), ha="center", va="top", fontsize=SHAPE, family="monospace")
    merge = _box(ax, 6.55, 3.4, 0.7, 0.45, _("merge"), "linear")
    _arrow(ax, (attention["right"][0], 3.4), merge["left"], "(B,h,n,d)", side="above", offset=0.04)
    w_o = _box(ax, 6.55, 2.3, 0.7, 0.45, "W_o", "linear")
    _arrow(ax, merge["bottom"], w_o["top"], "(B,n,D)")
    out = _box(ax, 6.55, 1.2, 0.9, 0.45, _("output"), "data")
    _arrow(ax, w_o["bottom"], out["top"], "(B,n,D)")
    ax.text(0.05, 0.3, _("h heads of width d = D/h; each scales its scores by 1/√d"),
            ha="left", va="center", fontsize=SMALLEST)
    return finding(fig, _(
        "Multi-head attention as data flow, left to right: queries (B, n, D), keys and values (B, m, D) are each "
        "projected by W_q, W_k, W_v to the same shapes, split into h heads, (B, h, n, d) and (B, h, m, d), attended "
        "per head by scaled dot-product attention (weights (B, h, n, m), output (B, h, n, d)), merged back to "
        "(B, n, D) and mixed by W_o into the output (B, n, D)."))


# ----------------------------------------------------------------------- Bahdanau attention


def draw_bahdanau():
    """One decoder step of the course's Bahdanau model (chapter 3)."""
    fig, ax = _canvas(WIDTH, 5.8)
    states = []
    for k, (x, label) in enumerate(zip((0.7, 1.75, 2.8, 4.3), ("x(1)", "x(2)", "x(3)", "x(S)"))):
        _box(ax, x, 0.35, 0.7, 0.38, label, "data")
        gru = _box(ax, x, 1.2, 0.8, 0.45, "GRU", "rnn")
        _arrow(ax, (x, 0.54), gru["bottom"])
        if states:
            _arrow(ax, states[-1]["right"], gru["left"])
        states.append(gru)
    ax.text(4.85, 1.2, _("encoder states\nh(1) … h(S): (B, S, H)"), ha="left", va="center",
            fontsize=SHAPE, family="monospace")
    ax.text(4.85, 0.35, _("embedded source (B, S, E)"), ha="left", va="center", fontsize=SHAPE,
            family="monospace")
    attention = _box(ax, 2.5, 2.55, 3.9, 0.6, _("additive attention: keys = values = h(1) … h(S)"),
                     "attention")
    for gru in states:
        _arrow(ax, gru["top"], (gru["top"][0], attention["bottom"][1]), colour="#999999")
    previous = _box(ax, 6.6, 2.55, 1.3, 0.45, "s(t-1)", "rnn")
    _arrow(ax, previous["left"], attention["right"], _("query (B, H)"), side="above", offset=0.04)
    ax.text(6.6, 2.1, _("previous state"), ha="center", va="center", fontsize=SMALLEST)
    # the decoder's first state is the encoder's last: s(0) = h(S), drawn dashed
    last, y_route, x_route = states[-1], 1.8, 7.45
    ax.plot([last["top"][0], last["top"][0], x_route, x_route], [last["top"][1], y_route, y_route, previous["right"][1]],
            color="#2a6f97", linestyle="--", linewidth=1.4, zorder=0)
    _arrow(ax, (x_route, previous["right"][1]), previous["right"], colour="#2a6f97")
    ax.text(4.85, y_route - 0.17, _("first step: s(0) = h(S)"), ha="left", va="center", fontsize=SMALLEST,
            color="#1d4e6b")
    context = _box(ax, 2.5, 3.6, 1.5, 0.42, _("context c(t)"), "data")
    _arrow(ax, attention["top"], context["bottom"], _("weights (B, S), sum to 1"))
    concat = _box(ax, 2.5, 4.5, 1.5, 0.42, _("concatenate"), "linear")
    _arrow(ax, context["top"], concat["bottom"], "(B, H)")
    embed = _box(ax, 0.75, 4.5, 1.3, 0.42, _("embed y(t-1)"), "embed")
    _arrow(ax, embed["right"], concat["left"])
    ax.text(1.4, 4.15, "(B, E)", ha="left", va="center", fontsize=SHAPE, family="monospace")
    gru = _box(ax, 6.6, 4.5, 1.0, 0.45, "GRU", "rnn")
    _arrow(ax, concat["right"], gru["left"], "(B, E + H)", side="above", offset=0.04)
    _arrow(ax, previous["top"], gru["bottom"], _("state"))
    out = _box(ax, 6.6, 5.4, 1.7, 0.42, _("linear: logits (B, V)"), "linear")
    _arrow(ax, gru["top"], out["bottom"], "s(t)", side="left")
    ax.text(0.05, 5.45, _("one output step t; s(t) is the next step's query"), ha="left",
            va="center", fontsize=SMALLEST)
    return finding(fig, _(
        "One decoder step of the course's Bahdanau model. Bottom, a GRU encoder reads the embedded source (B, S, E) "
        "and keeps one state per position, (B, S, H). The decoder's previous state s(t-1), (B, H), is the query of "
        "additive attention over those states; the weights (B, S) average them into the context c(t), (B, H); the "
        "context, concatenated with the embedding of the previous token, (B, E + H), enters the decoder GRU, whose "
        "new state s(t) goes through a linear layer to logits (B, V) and is the next step's query. A dashed line "
        "from the encoder's last state to s(t-1) marks the first step: s(0) = h(S)."))


# ------------------------------------------------------------ teacher forcing and greedy


def _token_row(ax, x0: float, y: float, tokens, role: str = "data", cell: float = 0.5) -> list[dict]:
    return [_box(ax, x0 + k * cell, y, cell - 0.05, 0.36, token, role, size=SMALLEST)
            for k, token in enumerate(tokens)]


def draw_teacher_forcing(target: str = "1998-03-03", steps: int = 4):
    """Training with teacher forcing (left) beside greedy decoding (right), on the first
    ``steps`` characters of one target."""
    if len(target) < steps:
        raise ValueError(f"target {target!r} is shorter than the {steps} steps to draw")
    fig, ax = _canvas(WIDTH, 5.3)
    chars = list(target[:steps])
    x0 = 0.85
    ax.text(0.05, 5.05, _("training: teacher forcing"), ha="left", va="center", fontsize=LABEL, weight="bold")
    ax.text(0.05, 4.7, _("one pass, all positions at once"), ha="left", va="center", fontsize=SMALLEST)
    inputs = _token_row(ax, x0, 1.0, ["<bos>"] + chars[:-1])
    ax.text(x0 - 0.3, 1.0, _("input"), ha="right", va="center", fontsize=SMALLEST)
    decoder = _box(ax, x0 + 0.25 * (steps - 1), 2.3, 0.5 * steps, 0.7, _("decoder\n(causal mask)"), "attention")
    for b in inputs:
        _arrow(ax, b["top"], (b["top"][0], decoder["bottom"][1]))
    labels = _token_row(ax, x0, 3.6, chars, "linear")
    ax.text(x0 - 0.3, 3.6, _("label"), ha="right", va="center", fontsize=SMALLEST)
    for b in labels:
        _arrow(ax, (b["bottom"][0], decoder["top"][1]), b["bottom"])
    ax.text(0.05, 4.2, _("a loss at every position"), ha="left", va="center", fontsize=SMALLEST)
    ax.text(0.05, 0.4, _("input: the true target,\nshifted right"), ha="left", va="center", fontsize=SMALLEST)
    ax.plot([3.05, 3.05], [0.2, 5.2], color="#bbbbbb", linewidth=1.0)
    ax.text(3.25, 5.05, _("inference: greedy decoding"), ha="left", va="center", fontsize=LABEL, weight="bold")
    ax.text(3.25, 4.7, _("one run per token; the argmax is fed back"), ha="left", va="center", fontsize=SMALLEST)
    for step in range(steps):
        y = 4.1 - step * 0.95
        row = _token_row(ax, 3.75, y, ["<bos>"] + chars[:step])
        ax.text(3.4, y, f"{step + 1}", ha="right", va="center", fontsize=SMALLEST)
        x_dec = row[-1]["right"][0] + 0.6
        dec = _box(ax, x_dec, y, 0.8, 0.36, _("decoder"), "attention", size=SMALLEST)
        _arrow(ax, row[-1]["right"], dec["left"])
        out = _box(ax, x_dec + 0.85, y, 0.45, 0.36, chars[step], "linear", size=SMALLEST)
        _arrow(ax, dec["right"], out["left"])
        if step + 1 < steps:
            _arrow(ax, out["bottom"], (3.75 + 0.5 * (step + 1), y - 0.95 + 0.2), colour="#999999",
                   connection="arc3,rad=-0.15")
    ax.text(3.25, 0.3, _("… until <eos> or max_len"), ha="left", va="center", fontsize=SMALLEST)
    return finding(fig, _(
        "Training and inference side by side, on the first {steps} characters of the date {target}. Left, teacher "
        "forcing: the decoder reads {inputs}, the true target shifted right, in one pass under the causal mask, and "
        "is scored at every position against the labels {labels}. Right, greedy decoding: the decoder starts from "
        "<bos> alone; at each of {steps} steps its most likely next token (in turn {labels}) is appended to its input "
        "and the decoder runs again, until it writes <eos> or reaches max_len.",
        steps=steps, target=target, inputs=" ".join(["<bos>", *chars[:-1]]), labels=" ".join(chars)))
