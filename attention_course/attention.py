"""Attention scoring functions: the reference layers of chapter 2.

Later chapters (Bahdanau attention, multi-head attention, the Transformer) import the
layers from here, so they are written to be read. Conventions of the whole course:

* row vectors, batch first: ``n`` queries of width ``d`` are an ``(..., n, d)`` tensor,
  ``m`` keys an ``(..., m, d)`` tensor, ``m`` values an ``(..., m, d_v)`` tensor, where
  ``...`` is any number of leading batch dimensions (none, ``B``, ``B, h``, ...);
* scores and attention weights are ``(..., n, m)``: one row per query, one column per
  key, and the softmax runs over the last axis (the keys);
* masks are boolean and ``True`` means "may attend" (the convention of
  :func:`torch.nn.functional.scaled_dot_product_attention`); a mask broadcasts against
  the scores, and a query whose keys are all masked gets all-zero weights, never NaN;
* every function keeps the device and dtype of its inputs.

The second half of the module draws the figures of the chapter's book page.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

__all__ = [
    "lengths_to_mask",
    "masked_softmax",
    "dot_product_scores",
    "scaled_dot_product_attention",
    "AdditiveAttention",
    "score_std",
    "softmax_saturation",
    "plot_score_std",
    "plot_softmax_saturation",
    "plot_masked_weights",
    "column_form_check",
]


# --------------------------------------------------------------------------------------
# Masks and the masked softmax
# --------------------------------------------------------------------------------------


def lengths_to_mask(valid_lens: torch.Tensor, num_keys: int) -> torch.Tensor:
    """Boolean mask from valid lengths: ``mask[..., j]`` is True when ``j < length``.

    * ``valid_lens`` of shape ``(B,)``: one length per sequence, the same for every
      query; the mask has shape ``(B, 1, num_keys)`` and broadcasts over the queries.
    * ``valid_lens`` of shape ``(B, n)``: one length per query; the mask has shape
      ``(B, n, num_keys)``.

    The mask lives on ``valid_lens``'s device. A length below 0 or above ``num_keys``
    raises ``ValueError``.
    """
    valid_lens = torch.as_tensor(valid_lens)
    if valid_lens.numel() and (valid_lens.min() < 0 or valid_lens.max() > num_keys):
        raise ValueError(
            f"valid lengths must lie in [0, num_keys={num_keys}], got {valid_lens.tolist()}"
        )
    positions = torch.arange(num_keys, device=valid_lens.device)
    mask = positions < valid_lens[..., None]  # (..., num_keys)
    if valid_lens.dim() == 1:
        mask = mask[:, None, :]  # (B, 1, num_keys): the same lengths for every query
    return mask


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last axis (the keys), leaving out the masked keys.

    ``scores``: ``(..., n, m)``. ``mask``: boolean, ``True`` = may attend, broadcastable
    against ``scores`` (for example ``(B, 1, m)`` or ``(n, m)``); ``None`` means no mask.
    Returns weights of the broadcast shape and the dtype of ``scores``: each row sums to
    1 over its unmasked keys, masked keys get exactly 0, a fully masked row is all zeros
    (never NaN). Stable for large scores (the row maximum is subtracted first).

    A mask that is not boolean (for example the notes' additive ``0 / -inf`` mask, or a
    ``0 / 1`` float mask) raises ``ValueError``: the meaning of its numbers is ambiguous.
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)
    if mask.dtype != torch.bool:
        raise ValueError(
            f"masks are boolean tensors with True = may attend, got dtype {mask.dtype}; "
            "turn an additive 0/-inf mask into a boolean one with `mask == 0`"
        )
    # the lowest finite score (not -inf) keeps a fully masked row finite: its scores are all
    # equal, so softmax spreads it uniformly, and the product with the mask makes it 0
    filled = torch.where(mask, scores, torch.finfo(scores.dtype).min)
    return torch.softmax(filled, dim=-1) * mask


# --------------------------------------------------------------------------------------
# Scoring functions and attention layers
# --------------------------------------------------------------------------------------


def dot_product_scores(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Unscaled dot-product scores ``Q K^T``.

    ``queries``: ``(..., n, d)``, ``keys``: ``(..., m, d)`` -> ``(..., n, m)``, where
    entry ``[..., i, j]`` is ``q_i . k_j``. Different widths raise ``ValueError``.
    """
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(
            "queries and keys must have the same width d to be compared by a dot product: "
            f"queries {tuple(queries.shape)}, keys {tuple(keys.shape)}"
        )
    return queries @ keys.transpose(-2, -1)


def scaled_dot_product_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(Q K^T / sqrt(d_k)) V`` with an optional boolean mask.

    ``queries``: ``(..., n, d_k)``, ``keys``: ``(..., m, d_k)``, ``values``:
    ``(..., m, d_v)``, ``mask``: boolean, ``True`` = may attend, broadcastable to
    ``(..., n, m)``. Returns ``(output, weights)`` with ``output`` ``(..., n, d_v)`` and
    ``weights`` ``(..., n, m)``; a fully masked query gets zero weights and a zero output.
    Raises ``ValueError`` when the widths of queries and keys differ or when keys and
    values do not come in the same number.
    """
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(
            "every key needs a value: keys and values must have the same length m, got "
            f"keys {tuple(keys.shape)}, values {tuple(values.shape)}"
        )
    scores = dot_product_scores(queries, keys) / math.sqrt(queries.shape[-1])
    weights = masked_softmax(scores, mask)
    return weights @ values, weights


class AdditiveAttention(nn.Module):
    """Additive (MLP) attention: ``score(q, k) = w_v^T tanh(W_q q + W_k k)``.

    Queries and keys may have different widths: both are projected to ``num_hiddens``.

    Parameters (their names are part of the course's spec):
    ``W_q = nn.Linear(query_size, num_hiddens, bias=False)``,
    ``W_k = nn.Linear(key_size, num_hiddens, bias=False)``,
    ``w_v = nn.Linear(num_hiddens, 1, bias=False)``; dropout acts on the attention
    weights (in training mode only).
    """

    def __init__(self, query_size: int, key_size: int, num_hiddens: int, dropout: float = 0.0):
        super().__init__()
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.attention_weights: torch.Tensor | None = None

    def forward(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``queries`` ``(..., n, query_size)``, ``keys`` ``(..., m, key_size)``,
        ``values`` ``(..., m, d_v)``, boolean ``mask`` (True = may attend) broadcastable to
        ``(..., n, m)`` -> output ``(..., n, d_v)``.

        ``self.attention_weights`` keeps the weights ``(..., n, m)`` before dropout.
        """
        projected_q = self.W_q(queries)  # (..., n, h)
        projected_k = self.W_k(keys)  # (..., m, h)
        # every query with every key: (..., n, 1, h) + (..., 1, m, h) -> (..., n, m, h)
        features = torch.tanh(projected_q.unsqueeze(-2) + projected_k.unsqueeze(-3))
        scores = self.w_v(features).squeeze(-1)  # (..., n, m)
        self.attention_weights = masked_softmax(scores, mask)
        return self.dropout(self.attention_weights) @ values


def score_std(d: int, num_samples: int = 10_000, scaled: bool = False, seed: int = 0) -> float:
    """Measured standard deviation of ``q . k`` (or ``q . k / sqrt(d)`` when ``scaled``)
    over ``num_samples`` pairs ``q, k ~ N(0, I_d)`` drawn from a ``torch.Generator``
    seeded with ``seed``. Theory: ``sqrt(d)`` unscaled, ``1`` scaled.
    """
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(num_samples, d, generator=generator, dtype=torch.float64)
    k = torch.randn(num_samples, d, generator=generator, dtype=torch.float64)
    scores = (q * k).sum(dim=-1)
    if scaled:
        scores = scores / math.sqrt(d)
    return float(scores.std())


# --------------------------------------------------------------------------------------
# Figures and demonstrations of the book page
# --------------------------------------------------------------------------------------


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
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    ax.plot(dims, np.sqrt(dims), color="0.6", linestyle="--", label=r"theory $\sqrt{d}$")
    ax.plot(dims, raw, "o-", label=r"measured std of $q\cdot k$")
    ax.plot(dims, np.ones_like(dims, dtype=float), color="0.6", linestyle=":", label="theory 1")
    ax.plot(dims, scaled, "s-", label=r"measured std of $q\cdot k/\sqrt{d}$")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("width d of queries and keys")
    ax.set_ylabel("standard deviation of the score")
    ax.set_title(f"{num_samples} random pairs q, k ~ N(0, I) per point")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def plot_softmax_saturation(dims=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), num_keys: int = 10):
    """Figure: how peaked the softmax of random scores gets as ``d`` grows (max weight
    and entropy), without and with the ``1/sqrt(d)`` scale."""
    import matplotlib.pyplot as plt

    dims = np.asarray(dims)
    raw = np.array([softmax_saturation(int(d), num_keys) for d in dims])
    scaled = np.array([softmax_saturation(int(d), num_keys, scaled=True) for d in dims])
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.4))
    for ax, column, label in ((left, 0, "mean largest weight"), (right, 1, "mean entropy (nats)")):
        ax.plot(dims, raw[:, column], "o-", label=r"$q\cdot k$ (unscaled)")
        ax.plot(dims, scaled[:, column], "s-", label=r"$q\cdot k/\sqrt{d}$")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("width d")
        ax.set_ylabel(label)
    left.axhline(1.0, color="0.6", linestyle="--", label="one-hot")
    left.axhline(1.0 / num_keys, color="0.6", linestyle=":", label="uniform")
    right.axhline(math.log(num_keys), color="0.6", linestyle=":", label="uniform")
    right.axhline(0.0, color="0.6", linestyle="--", label="one-hot")
    left.legend(fontsize="small")
    fig.suptitle(f"softmax over {num_keys} random keys")
    fig.tight_layout()
    return fig


def plot_masked_weights(valid_lens=(3, 6, 0, 8), num_queries: int = 4, num_keys: int = 8, seed: int = 0):
    """Figure: masked softmax weights of random scores, one heat map per sequence of the
    batch, keys at or beyond each sequence's valid length masked (a length 0 masks all)."""
    from attention_course.plotting import show_heatmaps

    generator = torch.Generator().manual_seed(seed)
    lens = torch.tensor(valid_lens)
    scores = torch.randn(len(valid_lens), num_queries, num_keys, generator=generator)
    weights = masked_softmax(scores, lengths_to_mask(lens, num_keys))
    return show_heatmaps(
        weights[None],
        titles=[f"valid length {int(n)}" for n in lens],
        figsize=(2.6 * len(valid_lens) + 0.8, 2.6),
    )


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
        "A (column form)": tuple(A.shape),
        "Q K^T (row form)": tuple(scores.shape),
        "A equals (Q K^T)^T": bool(torch.allclose(A, scores.T)),
        "column softmax of A equals (row softmax of Q K^T)^T": bool(torch.allclose(A_prime, weights.T)),
    }
