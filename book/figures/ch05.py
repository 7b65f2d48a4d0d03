"""Figures and demonstrations of chapter 5's page, *Self-attention and positional encoding*."""

from __future__ import annotations

import math
import time

import numpy as np
import torch
from torch import nn

from attention_course.device import best_device
from attention_course.reference.ch02 import scaled_dot_product_attention
from attention_course.reference.ch05 import (image_to_patches, layer_costs, relative_shift_matrix,
                                              sinusoidal_positional_encoding)
from figures.describe import finding
from figures.i18n import _, padded


def permutation_check(n: int = 6, d: int = 8, seed: int = 1) -> dict[str, float]:
    """Self-attention ``Y = SDPA(X W_q, X W_k, X W_v)`` on random data, with a random
    permutation ``pi`` of the tokens. Returns the largest ``|Y(X[pi]) - Y(X)[pi]|``
    without and with the positional encoding added to ``X`` first."""

    generator = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=generator, dtype=torch.float64)
    W_q, W_k, W_v = (torch.randn(d, d, generator=generator, dtype=torch.float64) / math.sqrt(d) for _matrix in range(3))
    perm = torch.randperm(n, generator=generator)
    P = sinusoidal_positional_encoding(n, d).double()

    def self_attention(Z):
        return scaled_dot_product_attention(Z @ W_q, Z @ W_k, Z @ W_v)[0]

    result = {
        _("without positions: max |Y(X[perm]) - Y(X)[perm]|"): float(
            (self_attention(X[perm]) - self_attention(X)[perm]).abs().max()),
        _("with positions:    max |Y(X[perm] + P) - Y(X + P)[perm]|"): float(
            (self_attention(X[perm] + P) - self_attention(X + P)[perm]).abs().max()
        ),
    }
    # what the page says of the printout: equal up to rounding without positions, different with them
    without, with_positions = result.values()
    assert without < 1e-12 < 1e-3 < with_positions, result
    return result


def plot_encoding_heatmap(max_len: int = 60, d_model: int = 64):
    """Figure: the table ``P`` as a heat map, positions down, encoding dimensions across."""
    import matplotlib.pyplot as plt

    P = sinusoidal_positional_encoding(max_len, d_model).numpy()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    image = ax.imshow(P, cmap="cividis", vmin=-1, vmax=1, aspect="auto")  # lighter = larger, in greyscale too
    ax.set_xlabel(_("encoding dimension (column of P)"))
    ax.set_ylabel(_("position t (row of P)"))
    ax.set_title(_("sinusoidal positional encoding, d_model = {d_model}", d_model=d_model))
    fig.colorbar(image, ax=ax, shrink=0.8)
    fig.tight_layout()
    step = np.abs(np.diff(P, axis=0)).mean(axis=0)  # the mean change from one position to the next, by column
    return finding(fig, _("From one position to the next, column 0 changes by {first:.2f} on average and column {last} by "
                          "{slow:.2g}: the left columns flicker from row to row, the right ones hardly move.",
                          first=step[0], last=d_model - 1, slow=step[-1]))


def plot_encoding_columns(columns=(6, 7, 8, 9), max_len: int = 60, d_model: int = 32):
    """Figure: columns ``6..9`` of ``P`` against the position (the notes' figure)."""
    import matplotlib.pyplot as plt

    P = sinusoidal_positional_encoding(max_len, d_model).numpy()
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for col, style in zip(columns, ("-", "--", ":", "-.") * len(columns)):  # told apart in greyscale too
        kind = "sin" if col % 2 == 0 else "cos"
        ax.plot(np.arange(max_len), P[:, col], linestyle=style, label=_("column {col} ({kind}, j = {j})", col=col, kind=kind, j=col // 2))
    ax.set_xlabel(_("position t"))
    ax.set_ylabel("P[t, column]")
    ax.set_title(_("four columns of P (d_model = {d_model})", d_model=d_model))
    ax.legend(fontsize="small", loc="lower left")
    fig.tight_layout()
    # the period of each pair j, 2 pi / omega_j, and the phase between its sine and cosine, both
    # read from the drawn columns: the angle of (cos, sin) turns by omega_j per position
    pairs = sorted({col // 2 for col in columns})
    each = []
    for j in pairs:
        sine, cosine = P[:, 2 * j], P[:, 2 * j + 1]
        omega = float(np.median(np.diff(np.unwrap(np.arctan2(sine, cosine)))))
        each.append(_("columns {sin} and {cos} (j = {j}) repeat every {period:.1f} positions", sin=2 * j, cos=2 * j + 1,
                      j=j, period=2 * math.pi / omega))
    return finding(fig, _("Each sine column and its cosine partner are a quarter turn apart at the same frequency, "
                          "and the higher pair is slower: {pairs}.", pairs="; ".join(each)))


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
    left.set_title(_("binary code of t\n(bit 0 = lowest)"))
    left.set_xlabel(_("bit"))
    left.set_ylabel(_("position t"))
    left.set_xticks(range(num_bits))
    left.set_yticks(range(num_positions))
    image = right.imshow(P, cmap="cividis", aspect="auto", vmin=-1, vmax=1)
    right.set_title(_("row t of P: a continuous barcode"))
    right.set_xlabel(_("encoding dimension"))
    right.set_yticks(range(num_positions))
    fig.colorbar(image, ax=right, shrink=0.8)
    fig.tight_layout()
    flips = np.abs(np.diff(bits, axis=0)).sum(axis=0)
    # the cosine columns (odd) start at 1, so that a change of sign is never a zero
    signs = (np.diff(np.sign(P[:, 1::2]), axis=0) != 0).sum(axis=0)
    return finding(fig, _("Over the {n} positions, bits 0 to {last_bit} flip {flips} times; the cosine columns of P "
                          "(1, 3, …, {last_column}) change sign {signs} times: in both, the first columns change fastest.",
                          n=num_positions, last_bit=num_bits - 1, flips=", ".join(map(str, flips)),
                          last_column=d_model - 1 if d_model % 2 == 0 else d_model - 2,
                          signs=", ".join(map(str, signs))))


def plot_relative_shift(d_model: int = 64, max_len: int = 50):
    """Figure: the dot products ``P[t] . P[s]`` of all pairs of positions: they depend on
    ``t - s`` only (constant along diagonals), a consequence of the rotation identity."""
    import matplotlib.pyplot as plt

    P = sinusoidal_positional_encoding(max_len, d_model)
    fig, ax = plt.subplots(figsize=(4.6, 3.9))
    image = ax.imshow((P @ P.T).numpy(), cmap="viridis", aspect="auto")
    ax.set_xlabel(_("position s"))
    ax.set_ylabel(_("position t"))
    ax.set_title(r"$P_t \cdot P_s$, d_model = " + str(d_model))
    fig.colorbar(image, ax=ax, shrink=0.8)
    fig.tight_layout()
    dots = (P @ P.T).double().numpy()
    by_shift = {k: np.diagonal(dots, k) for k in range(max_len)}  # the values at t - s = k (s - t by symmetry)
    spread = max(float(np.ptp(values)) for values in by_shift.values())
    assert (dots.argmax(axis=1) == np.arange(max_len)).all(), "a row of P P^T no longer peaks on the diagonal"
    return finding(fig, _("Every row peaks on the diagonal t = s, at {peak:.1f}; the value at a distance of 1 is "
                          "{one:.1f}, of 10 {ten:.1f}; along any diagonal the values differ by at most {spread:.1e}: "
                          "they depend on t − s only.", peak=by_shift[0].mean(), one=by_shift[1].mean(),
                          ten=by_shift[10].mean(), spread=spread))


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
    left.set_title(_("{size}x{size} image, {p}x{p} patches", size=size, p=patch_size))
    left.set_xticks([])
    left.set_yticks([])
    right.imshow(tokens.numpy(), cmap="magma", aspect="auto")
    right.set_title(_("tokens: ({n}, C*p*p = {width})", n=tokens.shape[0], width=tokens.shape[1]))
    right.set_ylabel(_("token n (patch)"))
    right.set_xlabel(_("feature: channel R | channel G | channel B, each p*p row by row"))
    for c in range(1, 3):
        right.axvline(c * patch_size * patch_size - 0.5, color="white", linewidth=1)
    fig.tight_layout()
    n, width = tokens.shape
    return finding(fig, _("The image is cut into {n} patches, numbered 0 to {last} left to right, then top to bottom; "
                          "patch n is row n of the token matrix, {width} numbers: the {p2} of channel R, then those "
                          "of G, then of B.", n=n, last=n - 1, width=width, p2=patch_size * patch_size))


def cost_table(sizes=((50, 512), (4096, 512)), k: int = 3) -> str:
    """The leading terms of :func:`layer_costs` for each ``(n, d)`` of ``sizes`` next to the full
    counts of multiply-adds: self-attention with its projections, ``4 n d^2 + 2 n^2 d``; a plain
    RNN, ``2 n d^2``; a GRU, ``6 n d^2``."""
    table, attention = padded(_("table: n^2 d"), 13, ">"), padded(_("attention 4nd^2 + 2n^2 d"), 25, ">")
    lines = [f"{'n':>5} {'d':>4} {table} {'n d^2':>9} {attention} {'RNN 2nd^2':>10} {'GRU 6nd^2':>10}"]
    for n, d in sizes:
        leading = layer_costs(n, d, k=k)
        lines.append(f"{n:>5} {d:>4} {leading['self_attention'][0]:>13.3g} {leading['rnn'][0]:>9.3g} "
                     f"{4 * n * d * d + 2 * n * n * d:>25.3g} {2 * n * d * d:>10.3g} {6 * n * d * d:>10.3g}")
    return "\n".join(lines)


def time_self_attention_vs_gru(
    lengths=(64, 128, 256, 512, 1024, 2048, 4096), d: int = 64, repeats: int = 5, device=None, seed: int = 0
) -> dict[str, list[float]]:
    """Measured seconds of one forward pass (the best of ``repeats``) over a batch of one
    sequence of ``n`` tokens of width ``d``: a self-attention layer (three ``d x d``
    projections and scaled dot-product attention) against a one-layer ``nn.GRU(d, d)``.

    On the CPU the measurement uses one thread (restored afterwards), so that other
    programs sharing the cores disturb it less and both layers get the same hardware."""

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
        for _repeat in range(repeats + 1):  # the first call warms up
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


def timing_facts(timings: dict) -> tuple[dict[str, float], list[str], list[str]]:
    """What :func:`describe_timing` prints of :func:`time_self_attention_vs_gru`'s measurement (and
    :func:`plot_timing`'s finding says): the slope of each layer's log time against log n over the
    last three lengths, the faster layer at each length, and the pairs of lengths between which
    that changes."""
    n = np.array(timings["n"], dtype=float)
    ratio = np.array(timings["self_attention"]) / np.array(timings["gru"])
    slopes = {name: float(np.polyfit(np.log(n[-3:]), np.log(timings[name][-3:]), 1)[0])
              for name in ("self_attention", "gru")}
    faster = [_("self-attention") if r < 1 else "GRU" for r in ratio]
    changes = [_("{shorter} and {longer}", shorter=int(n[i]), longer=int(n[i + 1]))
               for i in range(len(n) - 1) if faster[i] != faster[i + 1]]
    return slopes, faster, changes


def describe_timing(timings: dict) -> str:
    """Words for :func:`time_self_attention_vs_gru`'s measurement, computed from it: how fast each
    layer's time grows over the last three lengths (the slope of a line fitted to log time against
    log n), which layer is faster at each length, and between which lengths that changes."""
    n = np.array(timings["n"], dtype=float)
    slopes, faster, changes = timing_facts(timings)
    lines = []
    for name in ("self_attention", "gru"):
        lines.append(f"{name:15s} " + _("time grows like n^{slope:.2f} over n = {first:.0f} to {last:.0f}",
                                         slope=slopes[name], first=n[-3], last=n[-1]))
    lines.append(_("faster at each n: {lengths}", lengths=", ".join(f"{int(k)}: {f}" for k, f in zip(n, faster))))
    if changes:
        lines.append(_("on {device}, the faster layer changes between n = {lengths}", device=timings["device"],
                       lengths="; ".join(changes)))
    else:
        lines.append(_("on {device}, the faster layer changes between n = never, in this range",
                       device=timings["device"]))
    return "\n".join(lines)


def plot_timing(timings: dict | None = None, **kwargs):
    """Figure: the measured times of :func:`time_self_attention_vs_gru` against ``n``."""
    import matplotlib.pyplot as plt

    timings = timings or time_self_attention_vs_gru(**kwargs)
    n = np.asarray(timings["n"], dtype=float)
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    ax.plot(n, 1e3 * np.asarray(timings["self_attention"]), "o-", label=_("self-attention layer"))
    ax.plot(n, 1e3 * np.asarray(timings["gru"]), "s-", label=_("nn.GRU layer"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(_("sequence length n"))
    ax.set_ylabel(_("forward pass (ms)"))
    if timings["device"] == "cpu":
        title = _("one sequence of width d = {d}, measured on cpu (one thread)", d=timings["d"])
    else:
        title = _("one sequence of width d = {d}, measured on {device}", d=timings["d"], device=timings["device"])
    ax.set_title(title)
    ax.legend(fontsize="small")
    fig.tight_layout()
    slopes, faster, changes = timing_facts(timings)
    if changes:
        return finding(fig, _("Over the last three lengths self-attention's time grows like n^{attention:.2f} and the "
                              "GRU's like n^{gru:.2f}; the faster layer changes between n = {lengths}.",
                              attention=slopes["self_attention"], gru=slopes["gru"], lengths="; ".join(changes)))
    return finding(fig, _("Over the last three lengths self-attention's time grows like n^{attention:.2f} and the "
                          "GRU's like n^{gru:.2f}; {faster} is the faster layer at every length.",
                          attention=slopes["self_attention"], gru=slopes["gru"], faster=faster[0]))
