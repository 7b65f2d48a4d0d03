"""Figures and demonstrations of chapter 2's page, *Attention scoring functions*."""

from __future__ import annotations

import math

import numpy as np
import torch

from attention_course.reference.ch02 import dot_product_scores, lengths_to_mask, masked_softmax, score_std
from figures.describe import finding
from figures.i18n import _


def softmax_saturation(
    d: int, num_keys: int = 10, num_queries: int = 2_000, scaled: bool = False, seed: int = 0
) -> tuple[float, float]:
    """Average largest weight and average entropy (nats) of the softmax of one query's
    scores against ``num_keys`` random keys, with ``q, k ~ N(0, I_d)``.

    A uniform row has largest weight ``1/num_keys`` and entropy ``log(num_keys)``; a
    one-hot row has ``1`` and ``0``.
    """
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(num_queries, 1, d, generator=generator, dtype=torch.float64)
    k = torch.randn(num_queries, num_keys, d, generator=generator, dtype=torch.float64)
    scores = dot_product_scores(q, k)  # (num_queries, 1, num_keys)
    if scaled:
        scores = scores / math.sqrt(d)
    weights = torch.softmax(scores, dim=-1)
    entropy = -(weights * torch.log(weights.clamp_min(1e-300))).sum(-1)
    return float(weights.amax(-1).mean()), float(entropy.mean())


def plot_score_std(dims=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), num_samples: int = 10_000):
    """Figure: the measured std of ``q . k`` against ``d``, with and without ``1/sqrt(d)``."""
    import matplotlib.pyplot as plt

    dims = np.asarray(dims)
    raw = [score_std(int(d), num_samples) for d in dims]
    scaled = [score_std(int(d), num_samples, scaled=True) for d in dims]
    # the page says the points sit on the theory; 10 000 samples give about 1 % of sampling error
    assert np.allclose(raw, np.sqrt(dims), rtol=0.05) and np.allclose(scaled, 1.0, rtol=0.05), (raw, scaled)
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    ax.plot(dims, np.sqrt(dims), color="0.6", linestyle="--", label=_(r"theory $\sqrt{{d}}$"))
    ax.plot(dims, raw, "o-", label=_(r"measured std of $q\cdot k$"))
    ax.plot(dims, np.ones_like(dims, dtype=float), color="0.6", linestyle=":", label=_("theory 1"))
    ax.plot(dims, scaled, "s-", label=_(r"measured std of $q\cdot k/\sqrt{{d}}$"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel(_("width d of queries and keys"))
    ax.set_ylabel(_("standard deviation of the score"))
    ax.set_title(_("{n} random pairs q, k ~ N(0, I) per point", n=num_samples))
    ax.legend(fontsize="small")
    fig.tight_layout()
    return finding(fig, _("Without the scale the measured std grows as √d, from {a:.2f} at d = {d0} to {b:.1f} at d = {d1}; "
                          "divided by √d it stays between {lo:.2f} and {hi:.2f} at every width.",
                          a=raw[0], b=raw[-1], d0=int(dims[0]), d1=int(dims[-1]), lo=min(scaled), hi=max(scaled)))


def plot_softmax_saturation(dims=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), num_keys: int = 10):
    """Figure: how peaked the softmax of random scores gets as ``d`` grows (max weight
    and entropy), without and with the ``1/sqrt(d)`` scale."""
    import matplotlib.pyplot as plt

    dims = np.asarray(dims)
    raw = np.array([softmax_saturation(int(d), num_keys) for d in dims])
    scaled = np.array([softmax_saturation(int(d), num_keys, scaled=True) for d in dims])
    # the page says: unscaled, the largest weight grows with d towards 1 (one-hot); scaled, it
    # barely changes with the width
    assert (np.diff(raw[:, 0]) > 0).all() and raw[-1, 0] > 0.9, raw[:, 0]
    assert np.ptp(scaled[:, 0]) < 0.1, scaled[:, 0]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.4))
    for ax, column, label in ((left, 0, _("mean largest weight")), (right, 1, _("mean entropy (nats)"))):
        ax.plot(dims, raw[:, column], "o-", label=_(r"$q\cdot k$ (unscaled)"))
        ax.plot(dims, scaled[:, column], "s-", label=r"$q\cdot k/\sqrt{d}$")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(_("width d"))
        ax.set_ylabel(label)
    left.axhline(1.0, color="0.6", linestyle="--", label=_("one-hot"))
    left.axhline(1.0 / num_keys, color="0.6", linestyle=":", label=_("uniform"))
    right.axhline(math.log(num_keys), color="0.6", linestyle=":", label=_("uniform"))
    right.axhline(0.0, color="0.6", linestyle="--", label=_("one-hot"))
    left.legend(fontsize="small")
    fig.suptitle(_("softmax over {n} random keys", n=num_keys))
    fig.tight_layout()
    return finding(fig, _("Unscaled, the mean largest weight grows from {a:.2f} at d = {d0} to {b:.2f} at d = {d1}, "
                          "nearly one-hot; scaled by 1/√d it stays between {lo:.2f} and {hi:.2f}.",
                          a=raw[0, 0], b=raw[-1, 0], d0=int(dims[0]), d1=int(dims[-1]),
                          lo=scaled[:, 0].min(), hi=scaled[:, 0].max()))


def plot_masked_weights(valid_lens=(3, 6, 0, 8), num_queries: int = 4, num_keys: int = 8, seed: int = 0):
    """Figure: masked softmax weights of random scores, one heat map per sequence of the
    batch, keys at or beyond each sequence's valid length masked (a length 0 masks all)."""
    from attention_course.plotting import show_heatmaps

    generator = torch.Generator().manual_seed(seed)
    lens = torch.tensor(valid_lens)
    scores = torch.randn(len(valid_lens), num_queries, num_keys, generator=generator)
    weights = masked_softmax(scores, lengths_to_mask(lens, num_keys))
    fig = show_heatmaps(
        weights[None],
        titles=[_("valid length {n}", n=int(n)) for n in lens],
        xlabel=_("keys"), ylabel=_("queries"),
        figsize=(2.6 * len(valid_lens) + 0.8, 2.6),
    )
    masked = ~lengths_to_mask(lens, num_keys).expand_as(weights)
    return finding(fig, _("Every masked key (at or beyond the valid length) gets weight {w:g}; each row of a map with "
                          "valid keys sums to 1, and the map of valid length 0 is all zeros ({n} of its weights).",
                          w=float(weights[masked].abs().max()), n=int((weights[lens == 0] == 0).sum())))


def column_form_check(n: int = 3, m: int = 4, d: int = 5, seed: int = 0) -> dict[str, object]:
    """Compare the notes' column-vector form with the course's row form on random data.

    Columns: ``Q_col`` ``(d, n)``, ``K_col`` ``(d, m)``, ``A = K_col^T Q_col`` ``(m, n)``
    with the softmax over each column. Rows: ``Q = Q_col^T`` ``(n, d)``, ``K = K_col^T``,
    scores ``Q K^T`` ``(n, m)`` with the softmax over each row. Returns the shapes and
    whether ``A`` and its column softmax are the transposes of the row-form results.
    """
    generator = torch.Generator().manual_seed(seed)
    Q_col = torch.randn(d, n, generator=generator, dtype=torch.float64)
    K_col = torch.randn(d, m, generator=generator, dtype=torch.float64)
    A = K_col.T @ Q_col
    A_prime = torch.softmax(A, dim=0)  # softmax down each column
    scores = dot_product_scores(Q_col.T, K_col.T)
    weights = torch.softmax(scores, dim=-1)  # softmax along each row
    return {
        _("A (column form)"): tuple(A.shape),
        _("Q K^T (row form)"): tuple(scores.shape),
        _("A equals (Q K^T)^T"): bool(torch.allclose(A, scores.T)),
        _("column softmax of A equals (row softmax of Q K^T)^T"): bool(torch.allclose(A_prime, weights.T)),
    }
