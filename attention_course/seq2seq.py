"""Encoder-decoder plumbing of chapters 3 and 7: the GRU encoder, the wrapper that joins
an encoder and a decoder, the training loop and the evaluation helpers.

The decoder is the exercise (chapter 3's ``BahdanauDecoder``); everything around it is
given here so that the exercise is about attention, not about bookkeeping. Chapter 7's
Transformer trains on the same task with :func:`train_transformer`. The functions that
need a chapter's model or decoder take it as an argument, so this module holds no exercise.

Shapes: ``src`` ``(B, S)`` token ids, ``src_mask`` ``(B, S)`` boolean with ``True`` = a
real token (padding only at the end of a row), ``tgt_in`` ``(B, T)`` the decoder's input
(``<bos>`` then the target), ``labels`` ``(B, T)`` what it must predict (the target then
``<eos>``).

A decoder works with any encoder that returns ``(enc_outputs, enc_hidden)`` and has the
interface ``init_state(enc_outputs, enc_hidden, src_mask) -> state`` and
``forward(tgt_in, state) -> (logits, state)``.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attention_course.i18n import gettext
from attention_course.recipes import TRANSFORMER
from attention_course.training import fit, init_transformer_weights

__all__ = [
    "GRUEncoder",
    "Seq2Seq",
    "make_seq2seq",
    "train_seq2seq",
    "make_transformer",
    "train_transformer",
    "translate",
    "ids_to_strings",
    "exact_match",
    "plot_loss",
    "plot_alignment",
]


class GRUEncoder(nn.Module):
    """A GRU over the embedded source.

    Parameters: ``embedding = nn.Embedding(vocab_size, embed_size)`` and
    ``rnn = nn.GRU(embed_size, num_hiddens, num_layers, dropout=dropout, batch_first=True)``.

    ``forward(src, src_mask)`` returns ``enc_outputs`` ``(B, S, num_hiddens)``, the last
    layer's state at every source position (zeros at padded positions), and
    ``enc_hidden`` ``(num_layers, B, num_hiddens)``, every layer's state after the last
    *real* token of each row: the padding at the end of a row changes neither.
    """

    def __init__(self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int = 1,
                 dropout: float = 0.0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens, num_layers, dropout=dropout, batch_first=True)

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        embedded = self.embedding(src)  # (B, S, embed_size)
        lengths = src_mask.sum(dim=1).clamp_min(1).cpu()
        packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
        outputs, hidden = self.rnn(packed)  # the GRU stops at each row's last real token
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.shape[1])
        return outputs, hidden


class Seq2Seq(nn.Module):
    """An encoder and a decoder, trained together with teacher forcing.

    ``forward(src, src_mask, tgt_in)`` encodes the source, starts the decoder with
    ``decoder.init_state(enc_outputs, enc_hidden, src_mask)`` and returns the decoder's
    logits ``(B, T, vocab_size)`` for the whole target input at once. Decoding one token
    at a time (greedy search) uses ``model.encoder`` and ``model.decoder`` directly.
    """

    def __init__(self, encoder: nn.Module, decoder: nn.Module):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        enc_outputs, enc_hidden = self.encoder(src, src_mask)
        state = self.decoder.init_state(enc_outputs, enc_hidden, src_mask)
        logits, _ = self.decoder(tgt_in, state)
        return logits


def train_seq2seq(
    model: nn.Module,
    task,
    loss_fn: Callable,
    num_steps: int = 1500,
    batch_size: int = 128,
    lr: float = 5e-3,
    clip: float = 1.0,
    device=None,
    seed: int = 0,
    max_seconds: float | None = None,
    eval_every: int = 250,
    progress: bool = True,
    forward: Callable | None = None,
    lr_lambda: Callable[[int], float] | None = None,
    betas: tuple[float, float] = (0.9, 0.999),
    pause_every: int | None = None,
) -> dict:
    """Train ``model`` on ``task`` (a :class:`attention_course.dates.DateTask`) with Adam,
    gradient clipping and teacher forcing; return the history.

    Each step draws ``batch_size`` training pairs (from a generator seeded with ``seed``),
    computes ``loss_fn(logits, labels, pad_id)`` and takes one Adam step (``betas``) with the gradient
    norm clipped to ``clip``; the learning rate decays along a cosine from ``lr`` to
    ``lr / 20`` over ``num_steps``, unless ``lr_lambda(step)`` (``step`` counted from 1)
    gives the factor that multiplies ``lr`` at each step.
    ``forward(model, batch) -> (logits, labels)`` says how the model reads a batch; by
    default ``model(batch.src, batch.src_mask, batch.tgt_in)`` against ``batch.labels``.
    Every ``eval_every`` steps the validation loss is measured. The loop itself, with its
    wall-clock guard ``max_seconds`` and its pauses every ``pause_every`` steps (each
    ``history.resume()`` trains the next part), is :func:`attention_course.training.fit`.

    Returns a dict: ``step``, ``loss`` (training loss per step), ``valid_step``,
    ``valid_loss``, ``seconds`` (wall time), ``steps_done``, ``device``.
    """
    device = torch.device(device) if device is not None else next(model.parameters()).device
    model.to(device)
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    if lr_lambda is None:
        def lr_lambda(step):
            return 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(step - 1, num_steps) / num_steps))
    forward = forward or _read_batch
    pad_id = task.tgt_vocab.pad_id
    valid = task.batch(task.valid, device)

    def training_loss(step: int) -> torch.Tensor:
        picks = torch.randint(len(task.train), (batch_size,), generator=generator).tolist()
        logits, labels = forward(model, task.batch([task.train[i] for i in picks], device))
        return loss_fn(logits, labels, pad_id)

    def evaluate() -> dict[str, float]:
        logits, labels = forward(model, valid)
        return {"valid_loss": float(loss_fn(logits, labels, pad_id))}

    return fit(model, training_loss, evaluate, num_steps=num_steps, lr=lr, lr_lambda=lr_lambda, device=device,
               betas=betas, clip=clip, eval_every=eval_every, max_seconds=max_seconds, progress=progress,
               pause_every=pause_every)


def _read_batch(model: nn.Module, batch) -> tuple[torch.Tensor, torch.Tensor]:
    return model(batch.src, batch.src_mask, batch.tgt_in), batch.labels


def ids_to_strings(ids, vocab) -> list[str]:
    """Decode each row of ``ids`` ``(B, L)`` with ``vocab`` (stops at ``<eos>``)."""
    return [vocab.decode(row) for row in torch.as_tensor(ids).cpu()]


def exact_match(predictions, targets) -> float:
    """The fraction of predicted strings equal to their targets."""
    if len(predictions) != len(targets):
        raise ValueError(gettext("{predictions} predictions for {targets} targets").format(
            predictions=len(predictions), targets=len(targets)))
    return sum(p == t for p, t in zip(predictions, targets)) / max(len(targets), 1)


def plot_loss(history: dict, title: str | None = None):
    """Figure: the training loss per step (and its running mean) and the validation loss."""
    import matplotlib.pyplot as plt
    import numpy as np

    from attention_course.i18n import figure_text, figure_words

    figure_words()  # before the figure's texts are made: they take their font then
    fig, ax = plt.subplots(figsize=(6.0, 3.4))
    loss = np.asarray(history["loss"])
    ax.plot(history["step"], loss, color="0.75", linewidth=0.8, label=figure_text("training loss (one batch)"))
    window = 25
    if len(loss) > window:
        smooth = np.convolve(loss, np.ones(window) / window, mode="valid")
        ax.plot(history["step"][window - 1:], smooth, label=figure_text("training loss (mean of {window} steps)").format(window=window))
    if history.get("valid_loss"):
        ax.plot(history["valid_step"], history["valid_loss"], "o-", label=figure_text("validation loss"))
    ax.set_yscale("log")
    ax.set_xlabel(figure_text("training step"))
    ax.set_ylabel(figure_text("cross-entropy per token (nats)"))
    ax.set_title(title or figure_text("{steps} steps, {seconds:.0f} s on {device}").format(
        steps=history.get("steps_done", len(loss)), seconds=history.get("seconds", 0), device=history.get("device", "?")))
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def plot_alignment(weights, sources, predictions, max_cols: int = 3):
    """Figure: one heat map per example of the attention weights ``(T_tgt, T_src)`` of
    the decoder: rows are the output characters, columns the input characters."""
    import matplotlib.pyplot as plt

    from attention_course.i18n import figure_text, figure_words
    from attention_course.plotting import to_numpy

    figure_words()  # before the figure's texts are made: they take their font then
    count = min(len(sources), max_cols)
    fig, axes = plt.subplots(1, count, figsize=(4.2 * count, 3.6), squeeze=False)
    for k in range(count):
        ax = axes[0, k]
        src, out = sources[k], predictions[k] + "⟨eos⟩"
        w = to_numpy(weights[k])[: len(predictions[k]) + 1, : len(src)]
        ax.imshow(w, cmap="Reds", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(len(src)), list(src.replace(" ", "␣")), fontsize=8)
        ax.set_yticks(range(w.shape[0]), list(predictions[k]) + ["⟨eos⟩"], fontsize=8)
        ax.set_xlabel(figure_text("source character"))
        if k == 0:
            ax.set_ylabel(figure_text("output character"))
        ax.set_title(repr(src), fontsize=9)
    fig.tight_layout()
    return fig


def make_seq2seq(task, decoder_class, embed_size: int = 32, num_hiddens: int = 96, num_layers: int = 1,
                 dropout: float = 0.0) -> Seq2Seq:
    """A :class:`Seq2Seq` of a :class:`GRUEncoder` and a ``decoder_class`` (chapter 3's
    ``BahdanauDecoder``, say) sized for ``task`` (a :class:`~attention_course.dates.DateTask`)."""
    encoder = GRUEncoder(len(task.src_vocab), embed_size, num_hiddens, num_layers, dropout)
    decoder = decoder_class(len(task.tgt_vocab), embed_size, num_hiddens, num_layers, dropout)
    return Seq2Seq(encoder, decoder)


@torch.no_grad()
def translate(model, task, sources, decode, max_len: int = 12):
    """Translations of a list of source strings by ``decode`` (a greedy decoder with chapter 3's
    signature), and the attention weights ``(B, L, S)`` of the decoding (one row per output token)."""
    device = next(model.parameters()).device
    batch = task.batch([(s, "") for s in sources], device)
    ids = decode(model, batch.src, batch.src_mask, task.tgt_vocab.bos_id, task.tgt_vocab.eos_id,
                 task.tgt_vocab.pad_id, max_len)
    # run the decoder once more with teacher forcing on its own output to collect the weights
    tgt_in = torch.cat([torch.full_like(ids[:, :1], task.tgt_vocab.bos_id), ids[:, :-1]], dim=1)
    model(batch.src, batch.src_mask, tgt_in)
    return [task.tgt_vocab.decode(row) for row in ids.cpu()], model.decoder.attention_weights


_SIZES, _RUN = TRANSFORMER.model, TRANSFORMER.training


def make_transformer(task, transformer_class, d_model: int = _SIZES["d_model"], num_heads: int = _SIZES["num_heads"],
                     d_ff: int = _SIZES["d_ff"], num_layers: int = _SIZES["num_layers"], dropout: float = 0.0,
                     max_len: int = _SIZES["max_len"]) -> nn.Module:
    """A ``transformer_class`` (chapter 7's ``Transformer``, say) sized for ``task`` (a
    :class:`~attention_course.dates.DateTask`), with
    :func:`~attention_course.training.init_transformer_weights`. The default sizes are
    chapter 7's recipe, :data:`attention_course.recipes.TRANSFORMER`."""
    model = transformer_class(len(task.src_vocab), len(task.tgt_vocab), d_model, num_heads, d_ff, num_layers,
                              dropout, max_len)
    return init_transformer_weights(model)


def _check_the_encoder_learns(model: nn.Module, task, read: Callable, loss_fn: Callable) -> None:
    """Raise ``ValueError`` when the loss of a few training pairs sends no gradient to any parameter
    of ``model.encoder`` (the memory computed under ``torch.no_grad()`` or detached). In eval
    mode, so that no dropout draws from the random generators; the gradients are cleared after."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        logits, labels = read(model, task.batch(task.train[:4], device))
        loss_fn(logits, labels, task.tgt_vocab.pad_id).backward()
        reached = any(p.grad is not None for p in model.encoder.parameters())
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)
    if not reached:
        raise ValueError(gettext(
            "Transformer: the loss sends no gradient to model.encoder, so training could never change it: "
            "compute the memory with gradients (no torch.no_grad() and no .detach() around encode)"))


def train_transformer(model: nn.Module, task, num_steps: int = _RUN["num_steps"], batch_size: int = _RUN["batch_size"],
                      factor: float = _RUN["factor"], warmup: int = _RUN["warmup"], cooldown: float = _RUN["cooldown"],
                      device=None, seed: int = 0, max_seconds: float | None = None, progress: bool = True, *,
                      schedule: Callable, shift: Callable, pause_every: int | None = None) -> dict:
    """Train a Transformer on ``task`` (the dates of chapter 3) with teacher forcing.

    The recipe of the course: Adam with ``betas = (0.9, 0.98)`` as in the paper, the
    learning rate ``factor * schedule(step, d_model, warmup)`` (the paper's schedule,
    chapter 7's ``noam_lr``), brought down linearly to 0 over the last ``cooldown`` fraction of
    the steps (the paper trains for 100 000 steps and never needs to stop; a short run ends
    better when the rate reaches 0), gradient norm clipped to 1, the loss of chapter 3
    (cross-entropy over the real tokens). Each batch's full target ``[<bos>, ..., <eos>]``
    is cut by ``shift`` (chapter 7's ``teacher_forcing_pair``) into what the decoder reads and what
    it must predict. ``schedule`` and ``shift`` are given by the caller: the exercise
    notebook trains with the learner's own functions. The defaults are chapter 7's recipe,
    :data:`attention_course.recipes.TRANSFORMER`.

    Before the first step, one batch's loss is sent back through the model once (no step is
    taken, nothing is drawn from the random generators): if no gradient reaches
    ``model.encoder``, training could never change it, and a ``ValueError`` says so at once,
    instead of a whole run that learns without its encoder.

    Returns the history of :func:`train_seq2seq`.
    """
    from attention_course.reference.ch03 import sequence_loss  # chapter 7 builds on chapter 3
    d_model = model.encoder.embedding.embedding_dim

    def read(model_, batch):
        full = torch.cat([batch.tgt_in[:, :1], batch.labels], dim=1)  # [<bos>, target, <eos>, <pad>...]
        tgt_in, labels = shift(full)
        return model_(batch.src, tgt_in, batch.src_mask), labels

    _check_the_encoder_learns(model, task, read, sequence_loss)

    def lr_factor(step):
        ending = min(1.0, (num_steps - step + 1) / max(cooldown * num_steps, 1.0))
        return schedule(step, d_model, warmup) * ending

    return train_seq2seq(model, task, sequence_loss, num_steps=num_steps, batch_size=batch_size, lr=factor,
                         device=device, seed=seed, max_seconds=max_seconds, eval_every=100, progress=progress,
                         pause_every=pause_every,
                         forward=read, lr_lambda=lr_factor, betas=(0.9, 0.98))
