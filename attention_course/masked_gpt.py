"""A small decoder-only model that attends exactly where its caller says: chapter 9's model for
generation with a sliding window and a rolling key-value cache.

It is chapter 8's GPT (its layers, names and weight tying) with two more arguments, so that a
caller can keep only a window of the cache: ``attn_mask``, the boolean mask every layer uses
(``True`` = may attend), and ``positions``, the absolute positions of the new tokens. The model
builds no window itself. It is made of the finished layers of chapters 2, 4 and 8, so it exists
only from chapter 9 on (in the package of chapter 8 or earlier, importing it fails as the
reference of chapter 8 does).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attention_course.i18n import gettext

from attention_course.reference.ch02 import scaled_dot_product_attention
from attention_course.reference.ch04 import merge_heads, split_heads
from attention_course.reference.ch08 import GPT

__all__ = ["MaskedGPT"]


class MaskedGPT(GPT):
    """A GPT whose layers attend where ``attn_mask`` allows.

    ``MaskedGPT(vocab_size, d_model, num_heads, d_ff, num_layers, max_len)``: chapter 8's
    ``GPT`` without dropout, its output layer tied to the token embedding, every layer drawn
    with PyTorch's default initialisation (larger than chapter 8's, so that an untrained
    model's outputs differ clearly from one context to another).

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
        super().__init__(vocab_size, d_model, num_heads, d_ff, num_layers, max_len)
        for module in self.modules():
            if module is not self.lm_head and hasattr(module, "reset_parameters"):
                module.reset_parameters()  # the tied lm_head is the token embedding: drawn once

    def forward(self, tokens, attn_mask=None, past_kv=None, positions=None):
        T = tokens.shape[1]
        P = 0 if past_kv is None else past_kv[0][0].shape[2]
        if positions is None:
            positions = torch.arange(P, P + T, device=tokens.device)
        if attn_mask is None:
            attn_mask = torch.arange(P + T, device=tokens.device) <= P + torch.arange(T, device=tokens.device)[:, None]
        if attn_mask.dtype != torch.bool:
            raise ValueError(gettext("attn_mask must be boolean (True = may attend), got {dtype}").format(dtype=attn_mask.dtype))
        if int(positions.max()) >= self.max_len:
            raise ValueError(gettext("position {position} is past the model's max_len = {max_len}").format(
                position=int(positions.max()), max_len=self.max_len))
        X = self.token_embedding(tokens) + self.position_embedding(positions)
        present = []
        for layer, block in enumerate(self.blocks):
            X, kv = _masked_block(block, X, attn_mask, None if past_kv is None else past_kv[layer])
            present.append(kv)
        return self.lm_head(self.ln_f(X)), present


def _masked_block(block: nn.Module, X, mask, past_kv):
    """Chapter 8's pre-norm block with its causal mask replaced by ``mask``."""
    attention = block.attention
    Q, K, V = (split_heads(M, attention.num_heads) for M in attention.W_qkv(block.ln1(X)).chunk(3, dim=-1))
    if past_kv is not None:
        K, V = torch.cat([past_kv[0], K], dim=2), torch.cat([past_kv[1], V], dim=2)
    attended, _ = scaled_dot_product_attention(Q, K, V, mask)  # a query with no allowed key gets zeros
    H = X + attention.W_o(merge_heads(attended))
    return H + block.dense2(F.gelu(block.dense1(block.ln2(H)))), (K, V)
