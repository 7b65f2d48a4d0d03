"""Worked examples of the book: the numbers a page first computes by hand, computed by code.

Each function recomputes the steps with plain PyTorch operations, one step at a time, checks
them against PyTorch's own fused function, and checks the values the page wrote by hand
(rounded to 4 decimals), so a slip in the page's arithmetic stops the build.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from figures.i18n import _

# Chapter 2: three tokens, d = 4; rows are tokens.
QUERIES = [[1.0, 0.0, 1.0, 0.0], [0.0, 2.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]]
KEYS = [[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0]]
VALUES = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]

# What the page computes by hand (4 decimals), without a mask and with key 3 masked.
BY_HAND = {
    "weights": [[0.5065, 0.1863, 0.3072], [0.1554, 0.4223, 0.4223], [0.3333, 0.3333, 0.3333]],
    "output": [[0.8137, 0.4935], [0.5777, 0.8446], [0.6667, 0.6667]],
    "masked weights": [[0.7311, 0.2689, 0.0], [0.2689, 0.7311, 0.0], [0.5, 0.5, 0.0]],
    "masked output": [[0.7311, 0.2689], [0.2689, 0.7311], [0.5, 0.5]],
}


def _show(name: str, tensor: torch.Tensor) -> str:
    rows = tensor.reshape(-1, tensor.shape[-1]).tolist()
    body = "\n".join("    [" + ", ".join(f"{v:8.4f}" for v in row) + "]" for row in rows)
    return f"{name} {tuple(tensor.shape)}:\n{body}"


def _check(name: str, computed: torch.Tensor, by_hand) -> None:
    expected = torch.tensor(by_hand, dtype=computed.dtype)
    if not torch.allclose(computed, expected, atol=6e-5):
        raise AssertionError(f"the page's hand-computed {name} {by_hand} disagree with the code's "
                             f"{computed.tolist()}")


def three_token_attention() -> str:
    """Chapter 2's example, step by step: scores, scaled scores, weights, output; then the
    same with the third key masked (``True`` = may attend). Returns the printout."""
    Q, K, V = (torch.tensor(m, dtype=torch.float64) for m in (QUERIES, KEYS, VALUES))
    d = Q.shape[-1]
    scores = Q @ K.T
    scaled = scores / math.sqrt(d)
    weights = torch.softmax(scaled, dim=-1)
    output = weights @ V
    mask = torch.tensor([True, True, False])  # key 3 is padding: no query may attend to it
    masked_scaled = scaled.masked_fill(~mask, float("-inf"))
    masked_weights = torch.softmax(masked_scaled, dim=-1)
    masked_output = masked_weights @ V
    for name, value in (("weights", weights), ("output", output),
                        ("masked weights", masked_weights), ("masked output", masked_output)):
        _check(name, value, BY_HAND[name])
    fused = F.scaled_dot_product_attention(Q, K, V)
    fused_masked = F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
    parts = [
        _show(_("scores Q K^T"), scores),
        _show(_("scaled scores Q K^T / sqrt({d})", d=d), scaled),
        _show(_("weights softmax(scaled scores), each row sums to 1"), weights),
        _show(_("output weights @ V"), output),
        _show(_("scaled scores with key 3 masked (-inf)"), masked_scaled),
        _show(_("masked weights"), masked_weights),
        _show(_("masked output"), masked_output),
        _("the hand-computed values above agree with the code to 4 decimals"),
        _("largest difference from F.scaled_dot_product_attention: {difference:.1e}",
          difference=max((fused - output).abs().max().item(), (fused_masked - masked_output).abs().max().item())),
    ]
    return "\n".join(parts)


# Chapter 4: one sequence of T = 2 tokens, D = 4, h = 2 heads of width d = 2; the four
# projections are identities, so that the numbers can be followed by hand.
TOKENS = [[2.0, 0.0, 1.0, 0.0], [0.0, 2.0, 0.0, 1.0]]
HEAD_BY_HAND = {
    0: {"weights": [[0.9442, 0.0558], [0.0558, 0.9442]], "output": [[1.8884, 0.1116], [0.1116, 1.8884]]},
    1: {"weights": [[0.6698, 0.3302], [0.3302, 0.6698]], "output": [[0.6698, 0.3302], [0.3302, 0.6698]]},
}


def split_merge_trace(num_heads: int = 2) -> str:
    """Chapter 4's example: the tokens split into heads by reshape and transpose, each head's
    attention, and the merge; checks every head against the page's hand values and the
    merged output against ``torch.nn.MultiheadAttention`` with identity projections."""
    X = torch.tensor(TOKENS, dtype=torch.float64).unsqueeze(0)  # (B, T, D) = (1, 2, 4)
    B, T, D = X.shape
    if D % num_heads:
        raise ValueError(f"D = {D} is not divisible by num_heads = {num_heads}")
    d = D // num_heads
    heads = X.reshape(B, T, num_heads, d).transpose(1, 2)  # (B, h, T, d)
    weights = torch.softmax(heads @ heads.transpose(-2, -1) / math.sqrt(d), dim=-1)  # (B, h, T, T)
    outputs = weights @ heads  # (B, h, T, d)
    merged = outputs.transpose(1, 2).reshape(B, T, D)  # (B, T, D)
    parts = [_show("X (B, T, D)", X)]
    for i in range(num_heads):
        parts.append(_show(_("head {i} = X[..., {start}:{end}]", i=i, start=i * d, end=(i + 1) * d), heads[0, i]))
        parts.append(_show(_("head {i} weights softmax(head head^T / sqrt({d}))", i=i, d=d), weights[0, i]))
        parts.append(_show(_("head {i} output", i=i), outputs[0, i]))
        if i in HEAD_BY_HAND:
            _check(f"weights of head {i}", weights[0, i], HEAD_BY_HAND[i]["weights"])
            _check(f"output of head {i}", outputs[0, i], HEAD_BY_HAND[i]["output"])
    parts.append(_show(_("merged (B, T, D): head 0's output in columns 0-1, head 1's in 2-3"), merged))
    mha = torch.nn.MultiheadAttention(D, num_heads, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(D, dtype=torch.float64).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(D, dtype=torch.float64))
    reference, _weights = mha(X, X, X)
    parts.append(_("largest difference from nn.MultiheadAttention (identity projections): {difference:.1e}",
                   difference=(reference - merged).abs().max().item()))
    return "\n".join(parts)
