"""The Transformer encoder: the reference layers of chapter 6.

Chapter 7's decoder reuses :class:`LayerNorm`, :class:`AddNorm`,
:class:`PositionWiseFFN` and :class:`TransformerEncoder` from here. Conventions:

* row vectors, batch first: ``B`` sequences of ``T`` tokens of width ``d_model`` are a
  ``(B, T, d_model)`` tensor;
* *post-norm*, as in *Attention Is All You Need* and the course notes: every sub-layer
  ``F`` is wrapped as ``LayerNorm(X + dropout(F(X)))``;
* inside a block, masks are attention masks as in chapter 4 (boolean, ``True`` = may
  attend, broadcast against the ``(B, h, n, m)`` scores, e.g. ``(B, 1, m)``); at the
  model level, :class:`TransformerEncoder` takes a ``(B, S)`` *padding* mask
  (``True`` = a real token), the form the data sets of the course give.

The parameter names are part of the course's spec, so that tests can load known
weights and compare with ``torch.nn.TransformerEncoderLayer``
(:func:`to_torch_encoder_layer` maps one onto the other).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attention_course.multihead import MultiHeadAttention, to_torch_multihead
from attention_course.positional import PositionalEncoding

__all__ = [
    "LayerNorm",
    "AddNorm",
    "PositionWiseFFN",
    "EncoderBlock",
    "TransformerEncoder",
    "padding_to_attention_mask",
    "to_torch_encoder_layer",
    "copy_ffn_and_norms",
    "init_transformer_weights",
]


class LayerNorm(nn.Module):
    """Normalises each token over its own ``d_model`` features, then scales and shifts.

    ``y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias`` with the *biased* variance
    (divide by ``d_model``, not ``d_model - 1``) and ``eps`` inside the square root, as
    ``torch.nn.LayerNorm``. ``weight`` starts at ones, ``bias`` at zeros. Input
    ``(..., d_model)``, output of the same shape and dtype.
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        mean = X.mean(dim=-1, keepdim=True)
        var = ((X - mean) ** 2).mean(dim=-1, keepdim=True)  # biased: / d_model
        return (X - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


class AddNorm(nn.Module):
    """The residual connection and the layer norm around a sub-layer (post-norm).

    ``forward(X, Y)`` returns ``ln(X + dropout(Y))``, where ``X`` is the sub-layer's input
    and ``Y`` its output, both ``(..., d_model)``. Layers: ``ln = LayerNorm(d_model)``,
    ``dropout = nn.Dropout(dropout)``.
    """

    def __init__(self, d_model: int, dropout: float = 0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.ln = LayerNorm(d_model)

    def forward(self, X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
        return self.ln(X + self.dropout(Y))


class PositionWiseFFN(nn.Module):
    """The same two-layer network applied to every position on its own.

    ``dense2(dropout(relu(dense1(X))))`` with ``dense1 = nn.Linear(d_model, d_ff)`` and
    ``dense2 = nn.Linear(d_ff, d_model)``; the dropout sits where
    ``nn.TransformerEncoderLayer`` has it. Input and output ``(..., d_model)``.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.dense1 = nn.Linear(d_model, d_ff)
        self.dense2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return self.dense2(self.dropout(torch.relu(self.dense1(X))))


class EncoderBlock(nn.Module):
    """One encoder layer: self-attention, add & norm, feed-forward, add & norm.

    Layers: ``attention = MultiHeadAttention(d_model, num_heads, dropout)``,
    ``addnorm1 = AddNorm(d_model, dropout)``, ``ffn = PositionWiseFFN(d_model, d_ff,
    dropout)``, ``addnorm2 = AddNorm(d_model, dropout)``.

    ``forward(X, src_mask=None)``: ``X`` ``(B, T, d_model)``; ``src_mask`` an attention
    mask for the ``(B, h, T, T)`` scores (``True`` = may attend), for padding usually
    ``(B, 1, T)``. Returns ``(B, T, d_model)``.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.attention = MultiHeadAttention(d_model, num_heads, dropout)
        self.addnorm1 = AddNorm(d_model, dropout)
        self.ffn = PositionWiseFFN(d_model, d_ff, dropout)
        self.addnorm2 = AddNorm(d_model, dropout)

    def forward(self, X: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        Y = self.addnorm1(X, self.attention(X, X, X, src_mask))
        return self.addnorm2(Y, self.ffn(Y))


def padding_to_attention_mask(padding_mask: torch.Tensor | None) -> torch.Tensor | None:
    """A ``(B, S)`` padding mask (``True`` = real token) as a ``(B, 1, S)`` attention mask:
    every query may attend to the real tokens of its own sequence. ``None`` stays ``None``.

    A mask that is not ``(B, S)`` boolean raises ``ValueError``: a 2-D mask given to an
    attention layer as it is would be read as an ``(n, m)`` mask, wrongly."""
    if padding_mask is None:
        return None
    if padding_mask.dtype != torch.bool or padding_mask.dim() != 2:
        raise ValueError(
            "a padding mask is a (B, S) boolean tensor with True = a real token, got "
            f"shape {tuple(padding_mask.shape)} and dtype {padding_mask.dtype}"
        )
    return padding_mask[:, None, :]


class TransformerEncoder(nn.Module):
    """Token ids in, one ``d_model`` vector per token out.

    Layers: ``embedding = nn.Embedding(vocab_size, d_model)``, ``pos_encoding =
    PositionalEncoding(d_model, max_len, dropout)``, ``blocks = nn.ModuleList`` of
    ``num_layers`` :class:`EncoderBlock` (each with weights of its own).

    ``forward(src, src_mask=None)``: ``src`` ``(B, S)`` long ids, ``src_mask`` ``(B, S)``
    boolean padding mask (``True`` = real token) or ``None``. The embeddings are scaled by
    ``sqrt(d_model)`` before the positional encoding is added (so that they are not
    drowned by it), then the blocks run in order. Returns ``(B, S, d_model)``.
    """

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, d_ff: int, num_layers: int,
                 dropout: float = 0.0, max_len: int = 512):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)
        self.blocks = nn.ModuleList(EncoderBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        X = self.pos_encoding(self.embedding(src) * math.sqrt(self.d_model))
        mask = padding_to_attention_mask(src_mask)
        for block in self.blocks:
            X = block(X, mask)
        return X

    @property
    def attention_weights(self) -> list[torch.Tensor]:
        """The ``(B, h, S, S)`` weights of every block's last forward call, first block first."""
        return [block.attention.attention_weights for block in self.blocks]


def to_torch_encoder_layer(block: EncoderBlock) -> nn.TransformerEncoderLayer:
    """``torch.nn.TransformerEncoderLayer`` (``batch_first=True``, post-norm, ReLU) with
    ``block``'s weights: ``self_attn`` <- ``attention``, ``linear1``/``linear2`` <-
    ``ffn.dense1``/``ffn.dense2``, ``norm1``/``norm2`` <- ``addnorm1.ln``/``addnorm2.ln``.
    Its ``src_key_padding_mask`` is ``True`` at the *padding*: the opposite of ours."""
    attention = block.attention
    d_model, d_ff = attention.d_model, block.ffn.dense1.out_features
    twin = nn.TransformerEncoderLayer(d_model, attention.num_heads, d_ff, dropout=block.addnorm1.dropout.p,
                                      batch_first=True, norm_first=False)
    # to the block's dtype before copying, so that float64 weights are not rounded to float32
    twin = twin.to(device=attention.W_q.weight.device, dtype=attention.W_q.weight.dtype)
    twin.self_attn = to_torch_multihead(attention)
    copy_ffn_and_norms(twin, block.ffn, [block.addnorm1, block.addnorm2])
    return twin


def copy_ffn_and_norms(twin: nn.Module, ffn: PositionWiseFFN, addnorms: list[AddNorm]) -> None:
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


def init_transformer_weights(model: nn.Module) -> nn.Module:
    """Give ``model`` the usual starting weights of a Transformer, whatever its layers drew.

    Every ``nn.Linear`` weight is Xavier-uniform with a zero bias (as
    ``torch.nn.Transformer`` does), every ``nn.Embedding`` is normal with standard deviation
    ``1 / sqrt(width)``, so that the embeddings scaled by ``sqrt(d_model)`` have entries of
    size about 1, like the positional encoding they are added to. (PyTorch's default
    ``N(0, 1)`` embeddings, scaled up, would drown the positions.) The course's training
    cells call this, so training does not depend on how a layer initialised itself.
    Returns ``model``.
    """
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=module.embedding_dim ** -0.5)
    return model
