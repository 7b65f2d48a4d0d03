"""Figures and demonstrations of chapter 4's page, *Multi-head attention*."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from attention_course.reference.ch02 import masked_softmax
from attention_course.reference.ch04 import MultiHeadAttention, merge_heads, mha_param_count, split_heads
from attention_course.twins import to_torch_multihead
from figures.describe import finding
from figures.i18n import _, padded


def plot_split_heads(T: int = 3, D: int = 6, num_heads: int = 2):
    """Figure: a ``(T, D)`` matrix of numbered entries and its :func:`split_heads` view,
    ``h`` matrices ``(T, D/h)``, coloured by the head that owns each column."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba

    X = torch.arange(T * D).reshape(1, T, D)
    heads = split_heads(X, num_heads)[0]  # (h, T, d)
    d = D // num_heads
    palette = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860"]

    def draw(ax, values, colours, title):
        rows, cols = values.shape
        for r in range(rows):
            for c in range(cols):
                ax.add_patch(plt.Rectangle((c, rows - 1 - r), 1, 1, facecolor=colours[r][c],
                                           edgecolor="white", linewidth=2))
                ax.text(c + 0.5, rows - 0.5 - r, str(int(values[r, c])), ha="center", va="center",
                        fontsize=10)
        ax.set_xlim(0, cols)
        ax.set_ylim(0, rows)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        for side in ax.spines.values():
            side.set_visible(False)
        ax.set_title(title, fontsize=10)

    widths = [D] + [d] * num_heads
    fig, axes = plt.subplots(1, num_heads + 1, figsize=(1.0 + 0.55 * (D + D + num_heads), 0.55 * T + 1.1),
                             gridspec_kw={"width_ratios": widths})
    colour = [[to_rgba(palette[(c // d) % len(palette)], 0.45) for c in range(D)] for _row in range(T)]
    draw(axes[0], X[0].numpy(), colour, f"X: (T, D) = ({T}, {D})")
    for i in range(num_heads):
        colour = [[to_rgba(palette[i % len(palette)], 0.45)] * d for _row in range(T)]
        draw(axes[i + 1], heads[i].numpy(), colour, _("head {i}: (T, d) = ({T}, {d})", i=i, T=T, d=d))
    fig.suptitle(f"split_heads(X, {num_heads}): (1, {T}, {D}) -> (1, {num_heads}, {T}, {d})", fontsize=11)
    fig.tight_layout()
    # the entry in row r, column c of X is r * D + c: the columns a head holds, read from its numbers
    held = [sorted({int(v) % D for v in heads[i].flatten()}) for i in range(num_heads)]
    each = "; ".join(_("head {i} holds columns {first} to {last} of every row", i=i, first=cols[0], last=cols[-1])
                     for i, cols in enumerate(held))
    return finding(fig, _("Each head takes a block of {d} neighbouring columns of X, the same in every row, with its "
                          "numbers unchanged: {each}.", d=d, each=each))


TOY_SENTENCE = ("the", "cat", "saw", "the", "dog", "saw", "the", "cat")


def toy_heads_example(sentence=TOY_SENTENCE, sharpness: float = 8.0) -> dict[str, object]:
    """A hand-built two-head self-attention whose heads do different things.

    Token ``t`` is the vector ``[onehot(position t) | onehot(word) | 0]``. Head 0's
    query projection shifts the position one-hot back by one and its key projection
    keeps it, so head 0 scores ``s`` high when ``s = t - 1`` (*look at the previous
    token*). Head 1 projects queries and keys both on the word one-hot, so it scores
    ``s`` high when token ``s`` is the same word (*look at every copy of my word so far, me
    included*, in equal shares: a token's own key matches as well as an earlier copy's). A
    causal mask keeps each token to itself and the tokens before it. The word part is padded
    with zeros to ``max(T, V)`` so that each head reads one half: ``D = 2 * max(T, V)``.

    Returns a dict with the module, the input ``X`` ``(1, T, D)``, the mask, the output
    and the weights ``(1, 2, T, T)``.
    """
    words = sorted(set(sentence), key=sentence.index)
    T, V = len(sentence), len(words)
    d_head = max(T, V)
    D = 2 * d_head
    X = torch.zeros(1, T, D)
    for t, word in enumerate(sentence):
        X[0, t, t] = 1.0  # position, in head 0's half
        X[0, t, d_head + words.index(word)] = 1.0  # word, in head 1's half
    W_q = torch.zeros(D, D)
    W_k = torch.zeros(D, D)
    for t in range(1, T):
        W_q[t - 1, t] = sharpness  # head 0: query of position t = onehot(t - 1)
    for p in range(T):
        W_k[p, p] = 1.0  # head 0: key of position p = onehot(p)
    for w in range(V):
        W_q[d_head + w, d_head + w] = sharpness  # head 1: the word, both sides
        W_k[d_head + w, d_head + w] = 1.0
    module = MultiHeadAttention(D, 2, bias=False)
    module.load_state_dict({"W_q.weight": W_q, "W_k.weight": W_k,
                            "W_v.weight": torch.eye(D), "W_o.weight": torch.eye(D)})
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    with torch.no_grad():
        output = module(X, X, X, mask)
    return {"module": module, "X": X, "mask": mask, "output": output,
            "weights": module.attention_weights, "sentence": list(sentence)}


def plot_toy_heads(sentence=TOY_SENTENCE, sharpness: float = 8.0):
    """Figure: the weights of :func:`toy_heads_example`, one map per head and their mean."""
    from attention_course.plotting import show_heatmaps

    example = toy_heads_example(sentence, sharpness)
    weights = example["weights"][0]  # (2, T, T)
    maps = torch.cat([weights, weights.mean(dim=0, keepdim=True)])
    labels = [f"{w} {t}" for t, w in enumerate(example["sentence"])]
    fig = show_heatmaps(
        maps[None],
        titles=[_("head 0: previous token"), _("head 1: same word"), _("mean of the two heads")],
        xlabel=_("keys"), ylabel=_("queries"),
        xticklabels=labels,
        yticklabels=labels,
        figsize=(12.0, 4.2),
    )
    sentence = example["sentence"]
    T = len(sentence)
    previous = float(torch.stack([weights[0, t, t - 1] for t in range(1, T)]).mean())
    same = torch.tensor([[sentence[t] == sentence[s] and s <= t for s in range(T)] for t in range(T)])
    on_same = float((weights[1] * same).sum(-1).mean())
    return finding(fig, _("Head 0 puts on average {p:.0%} of a token's weight on the token before it; head 1 puts "
                          "{s:.0%} on the copies of its own word so far, in equal shares.", p=previous, s=on_same))


def split_merge_summary(X: torch.Tensor, heads: torch.Tensor, merged: torch.Tensor) -> str:
    """The page's printout of :func:`split_heads` on ``X`` ``(B, T, D)``: the heads' shape and head 1
    of sequence 0, then whether merging them gives ``X`` back."""
    return "\n".join([
        _("split: {shape} | head 1 of sequence 0: {head}", shape=tuple(heads.shape), head=heads[0, 1].tolist()),
        _("merge(split(X)) == X: {same}", same=torch.equal(merged, X)),
    ])


def head_count_text(d_model: int = 512, heads=(1, 2, 4, 8, 16)) -> str:
    """:func:`head_count_table` as the page prints it, one row per number of heads."""
    heads_h = padded(_("heads h"), 8, ">")
    lines = [f"{heads_h} {'d_head':>7} {'4D^2 + 4D':>10} {'nn.MultiheadAttention':>22}"]
    for h, d_head, formula, counted in head_count_table(d_model, heads):
        lines.append(f"{h:>8} {d_head:>7} {formula:>10,} {counted:>22,}")
    return "\n".join(lines)


def head_count_table(d_model: int = 512, heads=(1, 2, 4, 8, 16)) -> list[tuple[int, int, int, int]]:
    """Rows ``(h, d_head, mha_param_count, parameters of nn.MultiheadAttention)``."""
    rows = []
    for h in heads:
        torch_count = sum(p.numel() for p in nn.MultiheadAttention(d_model, h, batch_first=True).parameters())
        rows.append((h, d_model // h, mha_param_count(d_model, h), torch_count))
    return rows


def torch_agreement(seed: int = 0, d_model: int = 16, num_heads: int = 4) -> dict[str, float]:
    """Largest differences between :class:`MultiHeadAttention` and its PyTorch twin on
    random cross-attention inputs with a random boolean mask (every query keeps a key)."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    ours = MultiHeadAttention(d_model, num_heads).double().eval()
    twin = to_torch_multihead(ours).eval()
    queries = torch.randn(2, 5, d_model, generator=generator, dtype=torch.float64)
    keys = torch.randn(2, 7, d_model, generator=generator, dtype=torch.float64)
    values = torch.randn(2, 7, d_model, generator=generator, dtype=torch.float64)
    mask = torch.rand(5, 7, generator=generator) < 0.6
    mask[:, 0] = True
    with torch.no_grad():
        out = ours(queries, keys, values, mask)
        expected, weights = twin(queries, keys, values, attn_mask=~mask, average_attn_weights=False)
    result = {
        _("largest |output difference|"): float((out - expected).abs().max()),
        _("largest |weight difference|"): float((ours.attention_weights - weights).abs().max()),
    }
    assert max(result.values()) < 1e-12, f"the layers no longer agree to float64 rounding: {result}"
    return result
