"""PyTorch twins of the course's layers: the same weights in ``torch.nn`` modules.

Each function takes a course layer (the learner's or the course's solution: only the
parameter names of the spec are read) and returns the PyTorch module that computes the
same function, so that the book, the tests and ``make bench`` can compare the two.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["to_torch_multihead", "to_torch_encoder_layer", "copy_ffn_and_norms", "to_torch_decoder_layer"]


def to_torch_multihead(module: nn.Module) -> nn.MultiheadAttention:
    """A ``torch.nn.MultiheadAttention`` (``batch_first=True``) with ``module``'s weights.

    PyTorch stacks the three input projections into one ``in_proj_weight``
    ``[W_q; W_k; W_v]`` of shape ``(3 d_model, d_model)`` and calls ``W_o``
    ``out_proj``. Remember that its boolean ``attn_mask`` means the opposite of ours:
    ``True`` there means *may not* attend.
    """
    bias = module.W_q.bias is not None
    twin = nn.MultiheadAttention(module.W_q.in_features, module.num_heads, bias=bias, batch_first=True)
    twin = twin.to(device=module.W_q.weight.device, dtype=module.W_q.weight.dtype)
    with torch.no_grad():
        twin.in_proj_weight.copy_(torch.cat([module.W_q.weight, module.W_k.weight, module.W_v.weight]))
        twin.out_proj.weight.copy_(module.W_o.weight)
        if bias:
            twin.in_proj_bias.copy_(torch.cat([module.W_q.bias, module.W_k.bias, module.W_v.bias]))
            twin.out_proj.bias.copy_(module.W_o.bias)
    return twin


def to_torch_encoder_layer(block: nn.Module) -> nn.TransformerEncoderLayer:
    """``torch.nn.TransformerEncoderLayer`` (``batch_first=True``, post-norm, ReLU) with
    ``block``'s weights: ``self_attn`` <- ``attention``, ``linear1``/``linear2`` <-
    ``ffn.dense1``/``ffn.dense2``, ``norm1``/``norm2`` <- ``addnorm1.ln``/``addnorm2.ln``.
    Its ``src_key_padding_mask`` is ``True`` at the *padding*: the opposite of ours."""
    attention = block.attention
    d_model, d_ff = attention.W_q.in_features, block.ffn.dense1.out_features
    twin = nn.TransformerEncoderLayer(d_model, attention.num_heads, d_ff, dropout=block.addnorm1.dropout.p,
                                      batch_first=True, norm_first=False)
    # to the block's dtype before copying, so that float64 weights are not rounded to float32
    twin = twin.to(device=attention.W_q.weight.device, dtype=attention.W_q.weight.dtype)
    twin.self_attn = to_torch_multihead(attention)
    copy_ffn_and_norms(twin, block.ffn, [block.addnorm1, block.addnorm2])
    return twin


def copy_ffn_and_norms(twin: nn.Module, ffn: nn.Module, addnorms: list[nn.Module]) -> None:
    """Copy a course FFN and add & norms into a PyTorch layer's ``linear1/2``, ``norm1..k``."""
    with torch.no_grad():
        twin.linear1.weight.copy_(ffn.dense1.weight)
        twin.linear1.bias.copy_(ffn.dense1.bias)
        twin.linear2.weight.copy_(ffn.dense2.weight)
        twin.linear2.bias.copy_(ffn.dense2.bias)
        for k, addnorm in enumerate(addnorms, start=1):
            norm = getattr(twin, f"norm{k}")
            norm.weight.copy_(addnorm.ln.weight)
            norm.bias.copy_(addnorm.ln.bias)
            norm.eps = addnorm.ln.eps


def to_torch_decoder_layer(block: nn.Module) -> nn.TransformerDecoderLayer:
    """``torch.nn.TransformerDecoderLayer`` (``batch_first=True``, post-norm, ReLU) with
    ``block``'s weights: ``self_attn``, ``multihead_attn`` (the cross-attention),
    ``linear1/2``, ``norm1..3``. Its boolean masks are ``True`` where attending is *not*
    allowed: the opposite of ours."""
    attention = block.self_attention
    d_model, d_ff = attention.W_q.in_features, block.ffn.dense1.out_features
    twin = nn.TransformerDecoderLayer(d_model, attention.num_heads, d_ff, dropout=block.addnorm1.dropout.p,
                                      batch_first=True, norm_first=False)
    # to the block's dtype before copying, so that float64 weights are not rounded to float32
    twin = twin.to(device=attention.W_q.weight.device, dtype=attention.W_q.weight.dtype)
    twin.self_attn = to_torch_multihead(block.self_attention)
    twin.multihead_attn = to_torch_multihead(block.cross_attention)
    copy_ffn_and_norms(twin, block.ffn, [block.addnorm1, block.addnorm2, block.addnorm3])
    return twin
