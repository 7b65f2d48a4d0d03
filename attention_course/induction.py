"""Chapter 10's data and training: random tokens whose second half repeats the first, the losses
that tell copying from guessing, and the loop that trains an attention-only model on them.

A sequence of :func:`repeated_tokens` is ``period`` distinct random tokens followed by the same
``period`` tokens again. The first half cannot be predicted: its loss stays near chance, ``ln V``
(:func:`first_half_loss`; a model that also learned which tokens it has already seen, and that none
comes twice in the first half, could go down to the mean of ``ln(V - t)``). From the first token of
the repeat on, the next token can be read off the first half, by finding the current token's
earlier twin and copying the token that followed it (:func:`repeat_loss`). The tokens are distinct
so that every token of the repeat has exactly one earlier twin: with tokens drawn independently,
a token that came twice in the first half would have two candidate successors, and no copy could
bring the loss near 0. A two-layer attention-only model learns the copy with an induction head
(Elhage et al., 2021; Olsson et al., 2022): :func:`train_induction_model` trains it, from chapter
10's recipe :data:`attention_course.recipes.INDUCTION`.

The model is the learner's (chapter 10's ``AttentionOnlyTransformer``: ``model(tokens)`` returns
``(logits (B, T, V), patterns (layers, B, h, T, T))``); nothing here is an answer of the chapter.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from attention_course.i18n import gettext
from attention_course.training import History, fit

__all__ = ["repeated_tokens", "repeat_loss", "first_half_loss", "train_induction_model", "VALID_SEED"]

#: the seed of the fixed validation batch (the training batches come from the run's own seed)
VALID_SEED = 12345


def repeated_tokens(batch_size: int, period: int, vocab_size: int, generator: torch.Generator | None = None,
                    device=None) -> torch.Tensor:
    """``(batch_size, 2 * period)`` long tokens: ``period`` distinct tokens of ``0 .. vocab_size - 1``, a
    uniformly random ordered sample without replacement (the first ``period`` of a random permutation,
    drawn on the CPU from ``generator``), then the same ``period`` tokens again; on ``device``.
    ``ValueError`` unless ``2 <= period <= vocab_size`` and ``batch_size >= 1``."""
    if period < 2 or vocab_size < period or batch_size < 1:
        raise ValueError(gettext("repeated_tokens needs batch_size >= 1, period >= 2 and vocab_size >= period; got "
                                 "batch_size = {batch_size}, period = {period}, vocab_size = {vocab_size}").format(
            batch_size=batch_size, period=period, vocab_size=vocab_size))
    # distinct tokens (the first `period` of a random permutation): each token of the repeat then has exactly
    # one earlier twin, and the next token is certain
    first = torch.rand(batch_size, vocab_size, generator=generator).argsort(dim=-1)[:, :period]
    return torch.cat([first, first], dim=1).to(device)


def _check(logits: torch.Tensor, tokens: torch.Tensor, period: int) -> None:
    if tokens.dim() != 2 or tokens.shape[1] != 2 * period or logits.shape[:-1] != tokens.shape:
        raise ValueError(gettext("expected tokens (B, 2 * period) = (B, {length}) and logits (B, 2 * period, V); got "
                                 "tokens {tokens} and logits {logits}").format(
            length=2 * period, tokens=tuple(tokens.shape), logits=tuple(logits.shape)))


def repeat_loss(logits: torch.Tensor, tokens: torch.Tensor, period: int) -> torch.Tensor:
    """The mean cross-entropy (nats) of ``logits[:, t]`` against ``tokens[:, t + 1]`` for
    ``t = period .. 2 * period - 2``: the predictions that copying from the first half can get
    right (the first token of the repeat, at ``period``, cannot be known before it is read).
    ``logits (B, 2 * period, V)``, ``tokens (B, 2 * period)``; a scalar tensor."""
    _check(logits, tokens, period)
    return F.cross_entropy(logits[:, period:-1].flatten(0, 1).float(), tokens[:, period + 1:].flatten())


def first_half_loss(logits: torch.Tensor, tokens: torch.Tensor, period: int) -> torch.Tensor:
    """The same as :func:`repeat_loss` for ``t = 0 .. period - 2``: predictions of random tokens, at
    chance ``ln V`` for a model that does not track which tokens it has seen (at best the mean of
    ``ln(V - t - 1)`` for one that does: the first half's tokens are distinct)."""
    _check(logits, tokens, period)
    return F.cross_entropy(logits[:, :period - 1].flatten(0, 1).float(), tokens[:, 1:period].flatten())


def train_induction_model(model: nn.Module, period: int, vocab_size: int, num_steps: int = 300, batch_size: int = 32,
                          lr: float = 1e-2, warmup: int = 0, min_period: int | None = None, valid_size: int = 256, device=None, seed: int = 0,
                          max_seconds: float | None = None, progress: bool = True, pause_every: int | None = None,
                          callback: Callable[[int, torch.Tensor], None] | None = None) -> History:
    """Train ``model`` (``model(tokens) -> (logits, patterns)``) to predict the next token of
    :func:`repeated_tokens`; return the history of :func:`attention_course.training.fit`.

    Each step draws a new batch of ``batch_size`` sequences (from a generator seeded with
    ``seed``) whose repeated half has a length drawn uniformly from ``min_period .. period`` (always
    ``period`` when ``min_period`` is None: then a head attending a fixed distance back copies by
    position alone, and no induction head is needed), and takes one Adam step on the cross-entropy of every next token (both halves: the
    first half teaches the model nothing but the tokens' frequencies, as in Olsson et al.), at
    the rate ``lr`` (brought up linearly over ``warmup`` steps), gradient norm clipped to 1. On
    the CPU it runs on one thread. The history holds, per step, ``repeat_loss`` and
    ``first_half_loss`` of the training batch (of that step's period); at each evaluation (every
    quarter of the run and at its end) ``valid_repeat_loss`` and ``valid_first_half_loss`` of a fixed
    batch of ``valid_size`` sequences of ``period`` (seed :data:`VALID_SEED`); ``chance``, ``ln V``. ``callback(step, patterns)``, if given,
    is called after every step with the step's detached patterns ``(layers, B, h, T, T)``
    (the book page records the heads' scores with it; the step's period is ``patterns.shape[-1] // 2``). With ``pause_every``, it returns after
    that many steps and each ``history.resume()`` trains the next part.
    """
    device = torch.device(device) if device is not None else next(model.parameters()).device
    model.to(device)
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    valid = repeated_tokens(valid_size, period, vocab_size, torch.Generator().manual_seed(VALID_SEED), device)
    per_step: dict[str, list[float]] = {"repeat_loss": [], "first_half_loss": []}

    def training_loss(step: int) -> torch.Tensor:
        length = period if min_period is None else int(torch.randint(min_period, period + 1, (), generator=generator))
        tokens = repeated_tokens(batch_size, length, vocab_size, generator, device)
        logits, patterns = model(tokens)
        with torch.no_grad():
            per_step["repeat_loss"].append(float(repeat_loss(logits, tokens, length)))
            per_step["first_half_loss"].append(float(first_half_loss(logits, tokens, length)))
        if callback is not None:
            callback(step, patterns.detach())
        return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), tokens[:, 1:].flatten())

    def evaluate() -> dict[str, float]:
        logits, _ = model(valid)
        return {"valid_repeat_loss": float(repeat_loss(logits, valid, period)),
                "valid_first_half_loss": float(first_half_loss(logits, valid, period))}

    def lr_lambda(step: int) -> float:
        ramp = min(1.0, step / warmup) if warmup else 1.0
        return ramp * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(step - 1, num_steps) / num_steps)))

    history = fit(model, training_loss, evaluate, num_steps=num_steps, lr=lr,
                  lr_lambda=lr_lambda, device=device,
                  clip=1.0, eval_every=max(num_steps // 4, 1), max_seconds=max_seconds, progress=progress,
                  pause_every=pause_every)
    history.update(per_step)  # the same lists: a resumed run appends to them
    history["chance"] = math.log(vocab_size)
    return history
