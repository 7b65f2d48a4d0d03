"""The Transformer decoder and the whole encoder-decoder: the reference code of chapter 7.

Conventions, as in :mod:`attention_course.encoder`:

* batch first; token ids ``(B, T)``; activations ``(B, T, d_model)``;
* post-norm sub-layers ``LayerNorm(X + dropout(F(X)))``;
* inside a block, masks are attention masks (boolean, ``True`` = may attend, broadcast
  against ``(B, h, n, m)`` scores); the model takes the source's ``(B, S)`` padding mask
  (``True`` = real token), the form :class:`attention_course.dates.DateTask` batches have;
* a target sequence is ``[<bos>, y_1, ..., y_k, <eos>, <pad>, ...]``: the decoder reads
  it shifted right (:func:`teacher_forcing_pair`).

The parameter names are part of the spec, so that tests can load known weights and
compare with ``torch.nn.TransformerDecoderLayer`` (:func:`to_torch_decoder_layer`).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attention_course.encoder import (
    AddNorm,
    init_transformer_weights,
    PositionWiseFFN,
    TransformerEncoder,
    copy_ffn_and_norms,
    padding_to_attention_mask,
)
from attention_course.multihead import MultiHeadAttention, to_torch_multihead
from attention_course.positional import PositionalEncoding

__all__ = [
    "causal_mask",
    "teacher_forcing_pair",
    "DecoderBlock",
    "TransformerDecoder",
    "Transformer",
    "greedy_decode",
    "noam_lr",
    "to_torch_decoder_layer",
    "make_transformer",
    "train_transformer",
]


def causal_mask(size: int, device=None) -> torch.Tensor:
    """``(size, size)`` boolean mask, ``True`` on and below the diagonal: query ``i`` may
    attend to keys ``j <= i`` only. The notes' additive mask is ``0`` where this is
    ``True`` and ``-inf`` where it is ``False``."""
    if size < 0:
        raise ValueError(f"a causal mask needs size >= 0, got {size}")
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


def teacher_forcing_pair(tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Split full target sequences ``(..., T)`` into what the decoder reads and what it must say.

    ``tgt = [<bos>, "I", "am", "Transformer", <eos>]`` gives ``decoder_input = [<bos>,
    "I", "am", "Transformer"]`` (the target shifted right) and ``labels = ["I", "am",
    "Transformer", <eos>]``: at every position the label is the next token of the target.
    Both are ``(..., T - 1)``; a sequence shorter than 2 raises ``ValueError``.
    """
    if tgt.dim() < 1 or tgt.shape[-1] < 2:
        raise ValueError(
            f"a target sequence needs at least <bos> and one more token, got shape {tuple(tgt.shape)}"
        )
    return tgt[..., :-1], tgt[..., 1:]


class DecoderBlock(nn.Module):
    """One decoder layer: masked self-attention, cross-attention over the encoder's
    output (the *memory*), feed-forward; each followed by add & norm.

    Layers: ``self_attention`` and ``cross_attention`` = ``MultiHeadAttention(d_model,
    num_heads, dropout)``, ``addnorm1..3 = AddNorm(d_model, dropout)``, ``ffn =
    PositionWiseFFN(d_model, d_ff, dropout)``.

    ``forward(X, memory, tgt_mask=None, memory_mask=None)``: ``X`` ``(B, T, d_model)``,
    ``memory`` ``(B, S, d_model)``; ``tgt_mask`` masks the ``(B, h, T, T)`` self-attention
    scores (usually :func:`causal_mask`), ``memory_mask`` the ``(B, h, T, S)``
    cross-attention scores (usually the source padding, ``(B, 1, S)``). The queries of the
    cross-attention come from the decoder, its keys and values from ``memory``.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.self_attention = MultiHeadAttention(d_model, num_heads, dropout)
        self.addnorm1 = AddNorm(d_model, dropout)
        self.cross_attention = MultiHeadAttention(d_model, num_heads, dropout)
        self.addnorm2 = AddNorm(d_model, dropout)
        self.ffn = PositionWiseFFN(d_model, d_ff, dropout)
        self.addnorm3 = AddNorm(d_model, dropout)

    def forward(self, X: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        Y = self.addnorm1(X, self.self_attention(X, X, X, tgt_mask))
        Z = self.addnorm2(Y, self.cross_attention(Y, memory, memory, memory_mask))
        return self.addnorm3(Z, self.ffn(Z))


class TransformerDecoder(nn.Module):
    """Target ids and the encoder's memory in, next-token logits out.

    Layers: ``embedding = nn.Embedding(vocab_size, d_model)``, ``pos_encoding =
    PositionalEncoding(d_model, max_len, dropout)``, ``blocks = nn.ModuleList`` of
    ``num_layers`` :class:`DecoderBlock`, ``dense = nn.Linear(d_model, vocab_size)``.

    ``forward(tgt_in, memory, src_mask=None)``: ``tgt_in`` ``(B, T)`` ids (the target
    shifted right), ``memory`` ``(B, S, d_model)``, ``src_mask`` the ``(B, S)`` padding
    mask of the source. Embeddings scaled by ``sqrt(d_model)``, positions added, every
    block with a causal self-attention mask and the source padding as memory mask.
    Returns logits ``(B, T, vocab_size)``; position ``t`` depends on ``tgt_in[:, :t+1]``
    only.
    """

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, d_ff: int, num_layers: int,
                 dropout: float = 0.0, max_len: int = 512):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)
        self.blocks = nn.ModuleList(DecoderBlock(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.dense = nn.Linear(d_model, vocab_size)

    def forward(self, tgt_in: torch.Tensor, memory: torch.Tensor,
                src_mask: torch.Tensor | None = None) -> torch.Tensor:
        X = self.pos_encoding(self.embedding(tgt_in) * math.sqrt(self.d_model))
        tgt_mask = causal_mask(tgt_in.shape[1], device=tgt_in.device)
        memory_mask = padding_to_attention_mask(src_mask)
        for block in self.blocks:
            X = block(X, memory, tgt_mask, memory_mask)
        return self.dense(X)


class Transformer(nn.Module):
    """The encoder-decoder of *Attention Is All You Need*.

    Layers: ``encoder = TransformerEncoder(src_vocab_size, ...)`` and ``decoder =
    TransformerDecoder(tgt_vocab_size, ...)`` with the same sizes.

    ``forward(src, tgt_in, src_mask=None)``: ``src`` ``(B, S)``, ``tgt_in`` ``(B, T)``,
    ``src_mask`` ``(B, S)`` padding mask -> logits ``(B, T, tgt_vocab_size)``.
    ``encode(src, src_mask)`` and ``decode(tgt_in, memory, src_mask)`` are its two halves,
    for decoding one token at a time.
    """

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, d_model: int, num_heads: int, d_ff: int,
                 num_layers: int, dropout: float = 0.0, max_len: int = 512):
        super().__init__()
        self.encoder = TransformerEncoder(src_vocab_size, d_model, num_heads, d_ff, num_layers, dropout, max_len)
        self.decoder = TransformerDecoder(tgt_vocab_size, d_model, num_heads, d_ff, num_layers, dropout, max_len)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.encoder(src, src_mask)

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor,
               src_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.decoder(tgt_in, memory, src_mask)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor,
                src_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask)


@torch.no_grad()
def greedy_decode(model: Transformer, src: torch.Tensor, src_mask: torch.Tensor | None, bos_id: int,
                  eos_id: int, pad_id: int, max_len: int) -> torch.Tensor:
    """Greedy search for a batch: encode once, then re-read the growing target each step.

    Returns ``(B, L)`` ids on ``src``'s device with ``L <= max_len``: ``<bos>`` left out,
    each row's ``<eos>`` kept, every position after it ``pad_id``; it stops as soon as
    every row has ended. (Without a cache of keys and values, step ``t`` recomputes the
    ``t`` earlier positions: simple, and fast enough for short outputs.)
    """
    was_training = model.training
    model.eval()
    memory = model.encode(src, src_mask)
    tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        next_token = model.decode(tokens, memory, src_mask)[:, -1].argmax(dim=-1)  # (B,)
        next_token = next_token.masked_fill(finished, pad_id)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        finished |= next_token == eos_id
        if bool(finished.all()):
            break
    model.train(was_training)
    return tokens[:, 1:]


def noam_lr(step: int, d_model: int, warmup: int) -> float:
    """The learning rate of *Attention Is All You Need* at ``step`` (counted from 1):
    ``d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)``, a linear rise for
    ``warmup`` steps, then a decay as ``1 / sqrt(step)``. ``step < 1`` raises ``ValueError``."""
    if step < 1:
        raise ValueError(f"steps count from 1, got step={step}")
    if warmup < 1:
        raise ValueError(f"warmup must be at least 1 step, got {warmup}")
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def to_torch_decoder_layer(block: DecoderBlock) -> nn.TransformerDecoderLayer:
    """``torch.nn.TransformerDecoderLayer`` (``batch_first=True``, post-norm, ReLU) with
    ``block``'s weights: ``self_attn``, ``multihead_attn`` (the cross-attention),
    ``linear1/2``, ``norm1..3``. Its boolean masks are ``True`` where attending is *not*
    allowed: the opposite of ours."""
    attention = block.self_attention
    d_model, d_ff = attention.d_model, block.ffn.dense1.out_features
    twin = nn.TransformerDecoderLayer(d_model, attention.num_heads, d_ff, dropout=block.addnorm1.dropout.p,
                                      batch_first=True, norm_first=False)
    # to the block's dtype before copying, so that float64 weights are not rounded to float32
    twin = twin.to(device=attention.W_q.weight.device, dtype=attention.W_q.weight.dtype)
    twin.self_attn = to_torch_multihead(block.self_attention)
    twin.multihead_attn = to_torch_multihead(block.cross_attention)
    copy_ffn_and_norms(twin, block.ffn, [block.addnorm1, block.addnorm2, block.addnorm3])
    return twin


def make_transformer(task, d_model: int = 64, num_heads: int = 4, d_ff: int = 128, num_layers: int = 2,
                     dropout: float = 0.0, max_len: int = 64, transformer_class=None) -> nn.Module:
    """A ``transformer_class`` (default :class:`Transformer`) sized for ``task`` (a
    :class:`~attention_course.dates.DateTask`), with :func:`init_transformer_weights`."""
    transformer_class = transformer_class or Transformer
    model = transformer_class(len(task.src_vocab), len(task.tgt_vocab), d_model, num_heads, d_ff, num_layers,
                              dropout, max_len)
    return init_transformer_weights(model)


def train_transformer(model: nn.Module, task, num_steps: int = 400, batch_size: int = 128, factor: float = 0.6,
                      warmup: int = 100, cooldown: float = 0.3, device=None, seed: int = 0,
                      max_seconds: float | None = None, progress: bool = True, schedule=noam_lr,
                      shift=teacher_forcing_pair) -> dict:
    """Train a Transformer on ``task`` (the dates of chapter 3) with teacher forcing.

    The recipe of the course: Adam with ``betas = (0.9, 0.98)`` as in the paper, the
    learning rate ``factor * schedule(step, d_model, warmup)`` (the paper's schedule,
    :func:`noam_lr`), brought down linearly to 0 over the last ``cooldown`` fraction of
    the steps (the paper trains for 100 000 steps and never needs to stop; a short run ends
    better when the rate reaches 0), gradient norm clipped to 1, the loss of chapter 3
    (cross-entropy over the real tokens). Each batch's full target ``[<bos>, ..., <eos>]``
    is cut by ``shift`` (:func:`teacher_forcing_pair`) into what the decoder reads and what
    it must predict. ``schedule`` and ``shift`` are parameters so that the exercise
    notebook trains with the learner's own functions.

    Returns the history of :func:`attention_course.seq2seq.train_seq2seq`.
    """
    from attention_course.bahdanau import sequence_loss
    from attention_course.seq2seq import train_seq2seq

    d_model = model.encoder.embedding.embedding_dim

    def read(model_, batch):
        full = torch.cat([batch.tgt_in[:, :1], batch.labels], dim=1)  # [<bos>, target, <eos>, <pad>...]
        tgt_in, labels = shift(full)
        return model_(batch.src, tgt_in, batch.src_mask), labels

    def lr_factor(step):
        ending = min(1.0, (num_steps - step + 1) / max(cooldown * num_steps, 1.0))
        return schedule(step, d_model, warmup) * ending

    return train_seq2seq(model, task, sequence_loss, num_steps=num_steps, batch_size=batch_size, lr=factor,
                         device=device, seed=seed, max_seconds=max_seconds, eval_every=100, progress=progress,
                         forward=read, lr_lambda=lr_factor, betas=(0.9, 0.98))
