"""Self-attention and positional encoding: the reference code of chapter 5.

Chapters 6 and 7 (the Transformer encoder and decoder) import
:class:`PositionalEncoding` from here. Conventions of the course:

* row vectors, batch first: a sequence of ``T`` tokens of width ``d`` is a ``(T, d)``
  tensor, a batch of them ``(B, T, d)``;
* positions count from 0: row ``t`` of the table is the encoding of the token at
  index ``t`` of the sequence;
* images are ``(C, H, W)`` or ``(B, C, H, W)``, as in PyTorch's convolutions.

The second half of the module draws the figures of the chapter's book page.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
from torch import nn

__all__ = [
    "sinusoidal_positional_encoding",
    "PositionalEncoding",
    "relative_shift_matrix",
    "image_to_patches",
    "layer_costs",
    "permutation_check",
    "plot_encoding_heatmap",
    "plot_encoding_columns",
    "plot_barcode",
    "plot_relative_shift",
    "plot_patches",
    "time_self_attention_vs_gru",
    "plot_timing",
]


# --------------------------------------------------------------------------------------
# The sinusoidal table and the layer that adds it
# --------------------------------------------------------------------------------------


def sinusoidal_positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """The sinusoidal table ``P`` of shape ``(max_len, d_model)``, ``float32``.

    For position ``t = 0 .. max_len-1`` and ``j = 0, 1, ...``::

        P[t, 2j]     = sin(t / 10000 ** (2j / d_model))
        P[t, 2j + 1] = cos(t / 10000 ** (2j / d_model))

    An odd ``d_model`` works: the last column is a sine whose cosine partner would be
    column ``d_model``, which does not exist. The angles are computed in float64 and the
    table rounded to float32 once.
    """
    if max_len < 0 or d_model < 1:
        raise ValueError(f"need max_len >= 0 and d_model >= 1, got max_len={max_len}, d_model={d_model}")
    positions = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    even = torch.arange(0, d_model, 2, dtype=torch.float64)  # 2j = 0, 2, 4, ...
    angles = positions / torch.pow(10000.0, even / d_model)  # (max_len, ceil(d/2))
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return table.to(torch.float32)


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal table to its input, then applies dropout.

    The table is the buffer ``P`` of shape ``(max_len, d_model)`` (``float32``): saved in
    the ``state_dict`` and moved by ``.to(device)``, but not a parameter, so no optimiser
    changes it. ``forward(X)`` takes ``X`` of shape ``(..., T, d_model)`` (usually
    ``(B, T, d_model)``) and returns ``dropout(X + P[:T])`` of the same shape, on ``X``'s
    device. ``T > max_len`` or a last axis other than ``d_model`` raise ``ValueError``.
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0):
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("P", sinusoidal_positional_encoding(max_len, d_model))

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        T, width = X.shape[-2], X.shape[-1]
        if width != self.d_model:
            raise ValueError(f"input of shape {tuple(X.shape)} has width {width}, expected d_model={self.d_model}")
        if T > self.max_len:
            raise ValueError(
                f"sequence length T={T} is longer than the positional table, max_len={self.max_len}"
            )
        return self.dropout(X + self.P[:T].to(X.dtype))


# --------------------------------------------------------------------------------------
# Relative positions: a shift by k is a rotation of every sin/cos pair
# --------------------------------------------------------------------------------------


def relative_shift_matrix(k: int, d_model: int) -> torch.Tensor:
    """The ``(d_model, d_model)`` float32 matrix ``M`` with ``P[t + k] = P[t] @ M`` for every ``t``.

    ``M`` is block diagonal: the block of columns ``2j, 2j+1`` is
    ``[[cos(w_j k), -sin(w_j k)], [sin(w_j k), cos(w_j k)]]`` with
    ``w_j = 1 / 10000 ** (2j / d_model)``, a rotation of the pair ``(sin, cos)`` by the
    angle ``w_j k`` (row vectors: the pair multiplies the block from the left). ``k`` may
    be negative. An odd ``d_model`` raises ``ValueError`` (its last sine has no partner).
    """
    if d_model % 2:
        raise ValueError(f"relative_shift_matrix needs an even d_model, got d_model={d_model}")
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    for j in range(d_model // 2):
        angle = k / 10000.0 ** (2 * j / d_model)
        c, s = math.cos(angle), math.sin(angle)
        M[2 * j, 2 * j], M[2 * j, 2 * j + 1] = c, -s
        M[2 * j + 1, 2 * j], M[2 * j + 1, 2 * j + 1] = s, c
    return M.to(torch.float32)


# --------------------------------------------------------------------------------------
# Self-attention for images: patches as tokens
# --------------------------------------------------------------------------------------


def image_to_patches(image: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Cut an image into non-overlapping ``p x p`` patches, one token per patch.

    ``image``: ``(C, H, W)`` -> ``(N, C*p*p)``, or ``(B, C, H, W)`` -> ``(B, N, C*p*p)``,
    with ``N = (H/p) * (W/p)``. Patches come in row-major grid order (left to right along
    the top row of patches, then the next row); each patch is flattened in ``(C, p, p)``
    order, so feature ``c*p*p + u*p + v`` is channel ``c``, row ``u``, column ``v`` of the
    patch: the order of ``torch.nn.functional.unfold``. ``H`` or ``W`` not divisible by
    ``p``, or an input that is not 3-D or 4-D, raise ``ValueError``.
    """
    if image.dim() not in (3, 4):
        raise ValueError(f"expected an image (C, H, W) or a batch (B, C, H, W), got shape {tuple(image.shape)}")
    p = patch_size
    C, H, W = image.shape[-3:]
    if H % p or W % p:
        raise ValueError(f"image of height {H} and width {W} cannot be cut into {p}x{p} patches")
    lead = image.shape[:-3]
    grid = image.reshape(*lead, C, H // p, p, W // p, p)  # (..., C, rows, u, cols, v)
    grid = grid.movedim(-5, -3)  # (..., rows, u, C, cols, v)
    grid = grid.movedim(-4, -2)  # (..., rows, C, cols, u, v)
    grid = grid.movedim(-4, -3)  # (..., rows, cols, C, u, v)
    return grid.reshape(*lead, (H // p) * (W // p), C * p * p)


# --------------------------------------------------------------------------------------
# Costs of a layer: self-attention, RNN, CNN
# --------------------------------------------------------------------------------------


def layer_costs(n: int, d: int, k: int = 3) -> dict[str, tuple[float, float, float]]:
    """Leading terms of the cost of one layer mapping ``n`` tokens of width ``d`` to ``n``.

    Each value is ``(compute, sequential_ops, max_path_length)``:

    * ``"self_attention"``: ``(n*n*d, 1, 1)``: the ``n x n`` scores and the weighted sum
      (the ``n*d*d`` projections are dropped: ``n >> d`` is the regime of the comparison);
      all positions at once; every token sees every other in one step;
    * ``"rnn"``: ``(n*d*d, n, n)``: one ``d x d`` matrix-vector product per step, ``n`` steps
      one after another; the first token reaches the last through ``n`` steps;
    * ``"cnn"``: ``(k*n*d*d, 1, n/k)``: kernel width ``k``, ``d`` channels in and out;
      parallel over positions; stacked layers of width ``k`` need ``n/k`` of them (as a
      number, not rounded) to connect the two ends.
    """
    return {
        "self_attention": (n * n * d, 1, 1),
        "rnn": (n * d * d, n, n),
        "cnn": (k * n * d * d, 1, n / k),
    }


# --------------------------------------------------------------------------------------
# Demonstrations and figures of the book page
# --------------------------------------------------------------------------------------


def permutation_check(n: int = 6, d: int = 8, seed: int = 1) -> dict[str, float]:
    """Self-attention ``Y = SDPA(X W_q, X W_k, X W_v)`` on random data, with a random
    permutation ``pi`` of the tokens. Returns the largest ``|Y(X[pi]) - Y(X)[pi]|``
    without and with the positional encoding added to ``X`` first."""
    from attention_course.attention import scaled_dot_product_attention

    generator = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=generator, dtype=torch.float64)
    W_q, W_k, W_v = (torch.randn(d, d, generator=generator, dtype=torch.float64) / math.sqrt(d) for _ in range(3))
    perm = torch.randperm(n, generator=generator)
    P = sinusoidal_positional_encoding(n, d).double()

    def self_attention(Z):
        return scaled_dot_product_attention(Z @ W_q, Z @ W_k, Z @ W_v)[0]

    return {
        "without positions: max |Y(X[perm]) - Y(X)[perm]|": float((self_attention(X[perm]) - self_attention(X)[perm]).abs().max()),
        "with positions:    max |Y(X[perm] + P) - Y(X + P)[perm]|": float(
            (self_attention(X[perm] + P) - self_attention(X + P)[perm]).abs().max()
        ),
    }


def plot_encoding_heatmap(max_len: int = 60, d_model: int = 64):
    """Figure: the table ``P`` as a heat map, positions down, encoding dimensions across."""
    import matplotlib.pyplot as plt

    P = sinusoidal_positional_encoding(max_len, d_model).numpy()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    image = ax.imshow(P, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    ax.set_xlabel("encoding dimension (column of P)")
    ax.set_ylabel("position t (row of P)")
    ax.set_title(f"sinusoidal positional encoding, d_model = {d_model}")
    fig.colorbar(image, ax=ax, shrink=0.8)
    fig.tight_layout()
    return fig


def plot_encoding_columns(columns=(6, 7, 8, 9), max_len: int = 60, d_model: int = 32):
    """Figure: columns ``6..9`` of ``P`` against the position (the notes' figure)."""
    import matplotlib.pyplot as plt

    P = sinusoidal_positional_encoding(max_len, d_model).numpy()
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for col in columns:
        kind = "sin" if col % 2 == 0 else "cos"
        ax.plot(np.arange(max_len), P[:, col], label=f"column {col} ({kind}, j = {col // 2})")
    ax.set_xlabel("position t")
    ax.set_ylabel("P[t, column]")
    ax.set_title(f"four columns of P (d_model = {d_model})")
    ax.legend(fontsize="small", loc="lower left")
    fig.tight_layout()
    return fig


def plot_barcode(num_positions: int = 16, num_bits: int = 4, d_model: int = 16):
    """Figure: the binary codes of ``0..num_positions-1`` next to the rows of ``P``
    (the "barcode" of each position)."""
    import matplotlib.pyplot as plt

    bits = np.array([[(t >> b) & 1 for b in range(num_bits)] for t in range(num_positions)])
    P = sinusoidal_positional_encoding(num_positions, d_model).numpy()
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(8.0, 4.0), gridspec_kw={"width_ratios": [num_bits, d_model]}
    )
    left.imshow(bits, cmap="Greys", aspect="auto", vmin=0, vmax=1)
    left.set_title("binary code of t\n(bit 0 = lowest)")
    left.set_xlabel("bit")
    left.set_ylabel("position t")
    left.set_xticks(range(num_bits))
    left.set_yticks(range(num_positions))
    image = right.imshow(P, cmap="RdBu_r", aspect="auto", vmin=-1, vmax=1)
    right.set_title("row t of P: a continuous barcode")
    right.set_xlabel("encoding dimension")
    right.set_yticks(range(num_positions))
    fig.colorbar(image, ax=right, shrink=0.8)
    fig.tight_layout()
    return fig


def plot_relative_shift(d_model: int = 64, max_len: int = 50):
    """Figure: the dot products ``P[t] . P[s]`` of all pairs of positions: they depend on
    ``t - s`` only (constant along diagonals), a consequence of the rotation identity."""
    import matplotlib.pyplot as plt

    P = sinusoidal_positional_encoding(max_len, d_model)
    fig, ax = plt.subplots(figsize=(4.6, 3.9))
    image = ax.imshow((P @ P.T).numpy(), cmap="viridis", aspect="auto")
    ax.set_xlabel("position s")
    ax.set_ylabel("position t")
    ax.set_title(r"$P_t \cdot P_s$, d_model = " + str(d_model))
    fig.colorbar(image, ax=ax, shrink=0.8)
    fig.tight_layout()
    return fig


def plot_patches(size: int = 12, patch_size: int = 4):
    """Figure: a small synthetic RGB image, its grid of patches numbered in row-major
    order, and the resulting token matrix ``(N, C*p*p)``."""
    import matplotlib.pyplot as plt

    ys, xs = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    ring = ((xs - 0.5) ** 2 + (ys - 0.5) ** 2 < 0.12).float()
    image = torch.stack([xs, ys, ring])  # (3, H, W): red grows right, green down, a blue disc
    tokens = image_to_patches(image, patch_size)
    per_row = size // patch_size
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.6), gridspec_kw={"width_ratios": [1, 2.2]})
    left.imshow(image.permute(1, 2, 0).numpy())
    for edge in range(0, size + 1, patch_size):
        left.axhline(edge - 0.5, color="white", linewidth=1.5)
        left.axvline(edge - 0.5, color="white", linewidth=1.5)
    for n in range(per_row * per_row):
        r, c = divmod(n, per_row)
        left.text(c * patch_size + patch_size / 2 - 0.5, r * patch_size + patch_size / 2 - 0.5, str(n),
                  ha="center", va="center", color="white", fontsize=12, fontweight="bold")
    left.set_title(f"{size}x{size} image, {patch_size}x{patch_size} patches")
    left.set_xticks([])
    left.set_yticks([])
    right.imshow(tokens.numpy(), cmap="magma", aspect="auto")
    right.set_title(f"tokens: ({tokens.shape[0]}, C*p*p = {tokens.shape[1]})")
    right.set_ylabel("token n (patch)")
    right.set_xlabel("feature: channel R | channel G | channel B, each p*p row by row")
    for c in range(1, 3):
        right.axvline(c * patch_size * patch_size - 0.5, color="white", linewidth=1)
    fig.tight_layout()
    return fig


def time_self_attention_vs_gru(
    lengths=(64, 128, 256, 512, 1024, 2048, 4096), d: int = 64, repeats: int = 5, device=None, seed: int = 0
) -> dict[str, list[float]]:
    """Measured seconds of one forward pass (the best of ``repeats``) over a batch of one
    sequence of ``n`` tokens of width ``d``: a self-attention layer (three ``d x d``
    projections and scaled dot-product attention) against a one-layer ``nn.GRU(d, d)``.

    On the CPU the measurement uses one thread (restored afterwards), so that other
    programs sharing the cores disturb it less and both layers get the same hardware."""
    from attention_course.attention import scaled_dot_product_attention
    from attention_course.device import best_device

    device = torch.device(device) if device is not None else best_device()
    torch.manual_seed(seed)
    projections = nn.Linear(d, 3 * d).to(device)
    gru = nn.GRU(d, d, batch_first=True).to(device)

    def attention(X):
        Q, K, V = projections(X).chunk(3, dim=-1)
        return scaled_dot_product_attention(Q, K, V)[0]

    def gru_forward(X):
        return gru(X)[0]

    def best_time(fn, X):
        timings = []
        for _ in range(repeats + 1):  # the first call warms up
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            fn(X)
            if device.type == "cuda":
                torch.cuda.synchronize()
            timings.append(time.perf_counter() - start)
        return min(timings[1:])

    result = {"n": list(lengths), "self_attention": [], "gru": [], "device": str(device), "d": d}
    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    try:
        with torch.no_grad():
            for n in lengths:
                X = torch.randn(1, n, d, device=device)
                result["self_attention"].append(best_time(attention, X))
                result["gru"].append(best_time(gru_forward, X))
    finally:
        torch.set_num_threads(threads)
    return result


def plot_timing(timings: dict | None = None, **kwargs):
    """Figure: the measured times of :func:`time_self_attention_vs_gru` against ``n``."""
    import matplotlib.pyplot as plt

    timings = timings or time_self_attention_vs_gru(**kwargs)
    n = np.asarray(timings["n"], dtype=float)
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    ax.plot(n, 1e3 * np.asarray(timings["self_attention"]), "o-", label="self-attention layer")
    ax.plot(n, 1e3 * np.asarray(timings["gru"]), "s-", label="nn.GRU layer")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("forward pass (ms)")
    where = timings["device"] + (" (one thread)" if timings["device"] == "cpu" else "")
    ax.set_title(f"one sequence of width d = {timings['d']}, measured on {where}")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig
