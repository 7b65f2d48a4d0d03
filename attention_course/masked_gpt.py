"""A small decoder-only model that attends exactly where its caller says: chapter 9's model for
generation with a sliding window and a rolling key-value cache.

It is chapter 8's GPT (pre-norm blocks, a fused QKV projection, learned positions, the output
layer tied to the token embedding) with two more arguments, so that a caller can keep only a
window of the cache: ``attn_mask``, the boolean mask every layer uses (``True`` = may attend),
and ``positions``, the absolute positions of the new tokens. The model builds no window itself.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["MaskedGPT"]


class _Block(nn.Module):
    def __init__(self, d_model: int, num_heads: int, d_ff: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.W_qkv = nn.Linear(d_model, 3 * d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.dense1 = nn.Linear(d_model, d_ff)
        self.dense2 = nn.Linear(d_ff, d_model)

    def forward(self, X, mask, past_kv):
        B, T, D = X.shape
        heads = lambda M: M.reshape(B, T, self.num_heads, D // self.num_heads).transpose(1, 2)  # noqa: E731
        Q, K, V = (heads(M) for M in self.W_qkv(self.ln1(X)).chunk(3, dim=-1))
        if past_kv is not None:
            K, V = torch.cat([past_kv[0], K], dim=2), torch.cat([past_kv[1], V], dim=2)
        scores = (Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])).masked_fill(~mask, float("-inf"))
        # a query with no allowed key gets all-zero weights, not NaN
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        H = X + self.W_o((weights @ V).transpose(1, 2).reshape(B, T, D))
        return H + self.dense2(F.gelu(self.dense1(self.ln2(H)))), (K, V)


class MaskedGPT(nn.Module):
    """A GPT whose layers attend where ``attn_mask`` allows.

    ``MaskedGPT(vocab_size, d_model, num_heads, d_ff, num_layers, max_len)``.

    ``forward(tokens, attn_mask=None, past_kv=None, positions=None) -> (logits, present_kv)``:

    * ``tokens``: ``(B, T)`` token ids; ``past_kv``: ``None`` or one ``(K, V)`` per layer, each
      ``(B, num_heads, P, d_model // num_heads)``, the keys and values of ``P`` earlier positions;
    * ``attn_mask``: bool, ``(T, P + T)`` or broadcastable to ``(B, num_heads, T, P + T)``: query
      ``i`` (the ``i``-th new token) may attend to key ``j`` (the cache's ``P`` keys, then the new
      ones) where it is ``True``, in every layer. ``None``: chapter 8's causal mask, query ``i``
      sees keys ``0 .. P + i``;
    * ``positions``: long ``(T,)``, the absolute positions of the new tokens, which select their
      position embeddings (each ``< max_len``); ``None``: ``P .. P + T - 1``, as in chapter 8;
    * ``logits``: ``(B, T, vocab_size)``; ``present_kv``: per layer, the cache followed by the new
      keys and values, each ``(B, num_heads, P + T, d_head)`` (nothing is dropped).
    """

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, d_ff: int, num_layers: int, max_len: int) -> None:
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model = {d_model} is not a multiple of num_heads = {num_heads}")
        self.max_len = max_len
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList([_Block(d_model, num_heads, d_ff) for _ in range(num_layers)])
        self.ln_f = nn.LayerNorm(d_model)

    def forward(self, tokens, attn_mask=None, past_kv=None, positions=None):
        T = tokens.shape[1]
        P = 0 if past_kv is None else past_kv[0][0].shape[2]
        if positions is None:
            positions = torch.arange(P, P + T, device=tokens.device)
        if attn_mask is None:
            attn_mask = torch.arange(P + T, device=tokens.device) <= P + torch.arange(T, device=tokens.device)[:, None]
        if attn_mask.dtype != torch.bool:
            raise ValueError(f"attn_mask must be boolean (True = may attend), got {attn_mask.dtype}")
        if int(positions.max()) >= self.max_len:
            raise ValueError(f"position {int(positions.max())} is past the model's max_len = {self.max_len}")
        X = self.token_embedding(tokens) + self.position_embedding(positions)
        present = []
        for layer, block in enumerate(self.blocks):
            X, kv = block(X, attn_mask, None if past_kv is None else past_kv[layer])
            present.append(kv)
        return self.ln_f(X) @ self.token_embedding.weight.T, present
