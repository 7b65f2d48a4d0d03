"""Multi-head attention: the reference layers of chapter 4.

The Transformer chapters (6 and 7) build their encoder and decoder blocks from
:class:`MultiHeadAttention`. Conventions, as in :mod:`attention_course.attention`:

* row vectors, batch first: a batch of ``B`` sequences of ``T`` tokens of width
  ``d_model`` is a ``(B, T, d_model)`` tensor;
* ``h`` heads of width ``d_head = d_model // h``; head ``i`` owns the columns
  ``i * d_head .. (i + 1) * d_head`` of the projected queries, keys and values;
* masks are boolean, ``True`` means "may attend", and broadcast against the
  ``(B, h, n, m)`` scores; a query whose keys are all masked gets all-zero weights
  (its output is then the bias of ``W_o``), never NaN;
* every function keeps the device and dtype of its inputs.

The second half of the module draws the figures of the chapter's book page.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from attention_course.attention import masked_softmax

__all__ = [
    "split_heads",
    "merge_heads",
    "MultiHeadAttention",
    "mha_param_count",
    "to_torch_multihead",
    "plot_split_heads",
    "toy_heads_example",
    "plot_toy_heads",
]


def split_heads(X: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B, T, D)`` -> ``(B, h, T, D / h)``: head ``i`` gets the columns ``i*d .. (i+1)*d``.

    Any number of leading dimensions works the same way: ``(..., T, D)`` ->
    ``(..., h, T, D / h)``. Raises ``ValueError`` naming the shape when ``D`` is not a
    multiple of ``num_heads``.
    """
    *lead, T, D = X.shape
    if num_heads <= 0 or D % num_heads != 0:
        raise ValueError(
            f"cannot split the last axis of a tensor of shape {tuple(X.shape)} into "
            f"{num_heads} heads: D = {D} is not a multiple of num_heads = {num_heads}"
        )
    # (..., T, h, d): the last axis cut into h consecutive blocks; then heads before time
    return X.reshape(*lead, T, num_heads, D // num_heads).transpose(-3, -2)


def merge_heads(X: torch.Tensor) -> torch.Tensor:
    """``(B, h, T, d)`` -> ``(B, T, h * d)``, the inverse of :func:`split_heads`.

    Head ``i``'s ``d`` columns become the columns ``i*d .. (i+1)*d`` of the result (the
    concatenation of the heads). Works for any leading dimensions: ``(..., h, T, d)``.
    """
    *lead, h, T, d = X.shape
    return X.transpose(-3, -2).reshape(*lead, T, h * d)


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention, as in *Attention Is All You Need*.

    ``head_i = softmax((Q W_q^i)(K W_k^i)^T / sqrt(d_head)) (V W_v^i)`` for ``i = 1..h``,
    output ``concat(head_1, ..., head_h) W_o``. The ``h`` per-head projections of width
    ``d_head = d_model / h`` are the column blocks of one ``d_model x d_model``
    projection each: ``W_q, W_k, W_v, W_o`` are ``nn.Linear(d_model, d_model, bias=bias)``
    (these names are part of the course's spec). Dropout acts on the attention weights,
    in training mode only; ``self.attention_weights`` keeps the weights ``(B, h, n, m)``
    before dropout. ``d_model % num_heads != 0`` raises ``ValueError``.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads != 0:
            raise ValueError(
                f"d_model = {d_model} must be a multiple of num_heads = {num_heads} "
                "(every head gets d_model / num_heads columns)"
            )
        self.d_model, self.num_heads = d_model, num_heads
        self.d_head = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.attention_weights: torch.Tensor | None = None

    def forward(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``queries`` ``(B, n, d_model)``, ``keys`` and ``values`` ``(B, m, d_model)``,
        boolean ``mask`` (True = may attend) of shape ``(n, m)``, ``(B, n, m)``,
        ``(B, 1, m)``, ``(B, 1, n, m)`` or ``(B, h, n, m)`` -> output ``(B, n, d_model)``.
        """
        Q = split_heads(self.W_q(queries), self.num_heads)  # (B, h, n, d_head)
        K = split_heads(self.W_k(keys), self.num_heads)  # (B, h, m, d_head)
        V = split_heads(self.W_v(values), self.num_heads)  # (B, h, m, d_head)
        if mask is not None and mask.dim() == 3:
            mask = mask.unsqueeze(1)  # (B, n, m) -> (B, 1, n, m): the same for every head
        scores = Q @ K.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, h, n, m)
        self.attention_weights = masked_softmax(scores, mask)
        heads = self.dropout(self.attention_weights) @ V  # (B, h, n, d_head)
        return self.W_o(merge_heads(heads))


def mha_param_count(d_model: int, num_heads: int, bias: bool = True) -> int:
    """Number of learnable numbers in :class:`MultiHeadAttention` ``(d_model, num_heads, bias)``.

    Four ``d_model x d_model`` matrices, plus four bias vectors of length ``d_model``
    when ``bias``; it does not depend on ``num_heads`` (which must divide ``d_model``,
    else ``ValueError``).
    """
    if num_heads <= 0 or d_model % num_heads != 0:
        raise ValueError(f"d_model = {d_model} must be a multiple of num_heads = {num_heads}")
    return 4 * d_model * d_model + (4 * d_model if bias else 0)


def to_torch_multihead(module: MultiHeadAttention) -> nn.MultiheadAttention:
    """A ``torch.nn.MultiheadAttention`` (``batch_first=True``) with ``module``'s weights.

    PyTorch stacks the three input projections into one ``in_proj_weight``
    ``[W_q; W_k; W_v]`` of shape ``(3 d_model, d_model)`` and calls ``W_o``
    ``out_proj``. Remember that its boolean ``attn_mask`` means the opposite of ours:
    ``True`` there means *may not* attend.
    """
    bias = module.W_q.bias is not None
    twin = nn.MultiheadAttention(module.d_model, module.num_heads, bias=bias, batch_first=True)
    twin = twin.to(device=module.W_q.weight.device, dtype=module.W_q.weight.dtype)
    with torch.no_grad():
        twin.in_proj_weight.copy_(torch.cat([module.W_q.weight, module.W_k.weight, module.W_v.weight]))
        twin.out_proj.weight.copy_(module.W_o.weight)
        if bias:
            twin.in_proj_bias.copy_(torch.cat([module.W_q.bias, module.W_k.bias, module.W_v.bias]))
            twin.out_proj.bias.copy_(module.W_o.bias)
    return twin


# --------------------------------------------------------------------------------------
# Figures and demonstrations of the book page
# --------------------------------------------------------------------------------------


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
    colour = [[to_rgba(palette[(c // d) % len(palette)], 0.45) for c in range(D)] for _ in range(T)]
    draw(axes[0], X[0].numpy(), colour, f"X: (T, D) = ({T}, {D})")
    for i in range(num_heads):
        colour = [[to_rgba(palette[i % len(palette)], 0.45)] * d for _ in range(T)]
        draw(axes[i + 1], heads[i].numpy(), colour, f"head {i}: (T, d) = ({T}, {d})")
    fig.suptitle(f"split_heads(X, {num_heads}): (1, {T}, {D}) -> (1, {num_heads}, {T}, {d})", fontsize=11)
    fig.tight_layout()
    return fig


TOY_SENTENCE = ("the", "cat", "saw", "the", "dog", "saw", "the", "cat")


def toy_heads_example(sentence=TOY_SENTENCE, sharpness: float = 8.0) -> dict[str, object]:
    """A hand-built two-head self-attention whose heads do different things.

    Token ``t`` is the vector ``[onehot(position t) | onehot(word) | 0]``. Head 0's
    query projection shifts the position one-hot back by one and its key projection
    keeps it, so head 0 scores ``s`` high when ``s = t - 1`` (*look at the previous
    token*). Head 1 projects queries and keys both on the word one-hot, so it scores
    ``s`` high when token ``s`` is the same word (*look at earlier copies of me*). A
    causal mask keeps each token to itself and the tokens before it.

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
    return show_heatmaps(
        maps[None],
        titles=["head 0: previous token", "head 1: same word", "mean of the two heads"],
        xticklabels=labels,
        yticklabels=labels,
        figsize=(12.0, 4.2),
    )


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
    return {
        "largest |output difference|": float((out - expected).abs().max()),
        "largest |weight difference|": float((ours.attention_weights - weights).abs().max()),
    }


__all__ += ["head_count_table", "torch_agreement", "TOY_SENTENCE"]
