"""Bahdanau attention: the reference decoder of chapter 3, its loss and greedy decoding.

Chapter 7 trains a Transformer on the same task and compares it with this model.

The decoder is a GRU that, before each step, looks at the whole source: its previous
hidden state (of the last layer) is the query of an additive attention over the encoder's
outputs (keys and values), the padded source positions masked out; the resulting context
vector is concatenated with the embedding of the input token and fed to the GRU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attention_course.attention import AdditiveAttention
from attention_course.seq2seq import GRUEncoder, Seq2Seq

__all__ = ["BahdanauDecoder", "sequence_loss", "greedy_decode", "make_model", "translate"]


class BahdanauDecoder(nn.Module):
    """A GRU decoder with additive attention over the encoder outputs.

    Parameters (names are part of the spec):
    ``embedding = nn.Embedding(vocab_size, embed_size)``,
    ``attention = AdditiveAttention(num_hiddens, num_hiddens, num_hiddens, dropout)``,
    ``rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout=dropout,
    batch_first=True)`` whose input at each step is ``cat([embedding, context], -1)``,
    ``dense = nn.Linear(num_hiddens, vocab_size)``.

    ``init_state(enc_outputs, enc_hidden, src_mask)`` returns the state
    ``(enc_outputs, hidden, src_mask)`` with ``hidden = enc_hidden``.
    ``forward(tgt_in, state)``: ``tgt_in`` ``(B, T)`` -> ``(logits (B, T, vocab_size),
    new_state)``; ``self.attention_weights`` ``(B, T, S)`` holds the weights of each step.
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int = 1,
                 dropout: float = 0.0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.attention = AdditiveAttention(num_hiddens, num_hiddens, num_hiddens, dropout)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout=dropout,
                          batch_first=True)
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self.attention_weights: torch.Tensor | None = None

    def init_state(self, enc_outputs: torch.Tensor, enc_hidden: torch.Tensor, src_mask: torch.Tensor):
        return enc_outputs, enc_hidden, src_mask

    def forward(self, tgt_in: torch.Tensor, state):
        enc_outputs, hidden, src_mask = state
        embedded = self.embedding(tgt_in)  # (B, T, embed_size)
        mask = src_mask[:, None, :]  # (B, 1, S): the same source positions for every step
        outputs, weights = [], []
        for t in range(tgt_in.shape[1]):
            query = hidden[-1][:, None, :]  # (B, 1, h): the last layer's previous state
            context = self.attention(query, enc_outputs, enc_outputs, mask)  # (B, 1, h)
            weights.append(self.attention.attention_weights)
            step_input = torch.cat([embedded[:, t:t + 1], context], dim=-1)
            output, hidden = self.rnn(step_input, hidden)
            outputs.append(output)
        self.attention_weights = torch.cat(weights, dim=1)  # (B, T, S)
        logits = self.dense(torch.cat(outputs, dim=1))
        return logits, (enc_outputs, hidden, src_mask)


def sequence_loss(logits: torch.Tensor, labels: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Mean cross-entropy over the non-pad positions of ``labels`` ``(B, T)``, from
    ``logits`` ``(B, T, V)``."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=pad_id)


@torch.no_grad()
def greedy_decode(model, src, src_mask, bos_id: int, eos_id: int, pad_id: int, max_len: int) -> torch.Tensor:
    """Greedy search for a batch: ``(B, L)`` ids with ``L <= max_len``, ``<bos>`` left out,
    ``<eos>`` kept, every position after a row's ``<eos>`` set to ``pad_id``; stops as soon
    as every row has ended."""
    was_training = model.training
    model.eval()
    enc_outputs, enc_hidden = model.encoder(src, src_mask)
    state = model.decoder.init_state(enc_outputs, enc_hidden, src_mask)
    token = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    out = []
    for _ in range(max_len):
        logits, state = model.decoder(token, state)
        token = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
        out.append(torch.where(finished[:, None], torch.full_like(token, pad_id), token))
        finished |= token[:, 0] == eos_id
        if bool(finished.all()):
            break
    model.train(was_training)
    if not out:
        return torch.empty(src.shape[0], 0, dtype=torch.long, device=src.device)
    return torch.cat(out, dim=1)


def make_model(task, embed_size: int = 32, num_hiddens: int = 96, num_layers: int = 1, dropout: float = 0.0,
               decoder_class=BahdanauDecoder) -> Seq2Seq:
    """A :class:`Seq2Seq` of a :class:`GRUEncoder` and a ``decoder_class`` sized for ``task``."""
    encoder = GRUEncoder(len(task.src_vocab), embed_size, num_hiddens, num_layers, dropout)
    decoder = decoder_class(len(task.tgt_vocab), embed_size, num_hiddens, num_layers, dropout)
    return Seq2Seq(encoder, decoder)


@torch.no_grad()
def translate(model, task, sources, max_len: int = 12, decode=greedy_decode):
    """Greedy translations of a list of source strings, and the attention weights
    ``(B, L, S)`` of the decoding (one row per output token)."""
    device = next(model.parameters()).device
    batch = task.batch([(s, "") for s in sources], device)
    ids = decode(model, batch.src, batch.src_mask, task.tgt_vocab.bos_id, task.tgt_vocab.eos_id,
                 task.tgt_vocab.pad_id, max_len)
    # run the decoder once more with teacher forcing on its own output to collect the weights
    tgt_in = torch.cat([torch.full_like(ids[:, :1], task.tgt_vocab.bos_id), ids[:, :-1]], dim=1)
    model(batch.src, batch.src_mask, tgt_in)
    return [task.tgt_vocab.decode(row) for row in ids.cpu()], model.decoder.attention_weights
