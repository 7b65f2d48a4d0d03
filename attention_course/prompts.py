"""Chapter 8's task: chapter 3's dates posed as prompts to a decoder-only model.

A decoder-only model reads one stream of tokens, so each pair of
:mod:`attention_course.dates` becomes one sequence, the source written as a *prompt* and
the answer after it::

    "12 Aug 1999="  ->  "1999-08-12" <eos>

Tokens are characters of one :class:`~attention_course.dates.CharVocab` holding both sides
and the separator ``=`` (``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2; ``<bos>`` is unused: the
prompt starts the stream). The splits are those of :func:`~attention_course.dates.make_date_task`
(held-out *days*), so chapter 7's encoder-decoder and chapter 8's decoder-only model are
measured on the same test dates.

The model is the learner's: :func:`train_prompt_model` and :func:`complete_prompts` take it
(and chapter 8's ``generate``) as arguments, so this module holds no exercise.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from attention_course.i18n import gettext
from attention_course.dates import CharVocab, DateTask, make_date_task
from attention_course.training import fit

__all__ = ["SEP", "PromptTask", "make_prompt_task", "prompt_loss", "train_prompt_model", "complete_prompts"]

SEP = "="  # written after every prompt; no date format uses it


@dataclasses.dataclass
class PromptTask:
    """The dates as prompts: one vocabulary and the splits of ``(source, target)`` pairs."""

    vocab: CharVocab
    train: list[tuple[str, str]]
    valid: list[tuple[str, str]]
    test: list[tuple[str, str]]

    @property
    def answer_length(self) -> int:
        """Tokens a complete answer takes: the 10 characters of an ISO date and ``<eos>``."""
        return 11

    prompt_length: int  # every prompt is left-padded to this many tokens

    def prompt_ids(self, source: str) -> list[int]:
        """The ids of ``source`` and the separator, ``<pad>`` in front up to
        :attr:`prompt_length`: the answer then always starts at the same position, so learned
        absolute positions tell the model which character of the answer it writes."""
        ids = self.vocab.encode(source + SEP)
        if len(ids) > self.prompt_length:
            raise ValueError(gettext("the prompt {prompt!r} is longer than {length} tokens").format(
                prompt=source + SEP, length=self.prompt_length))
        return [self.vocab.pad_id] * (self.prompt_length - len(ids)) + ids

    def prompts(self, sources: Sequence[str], device=None) -> torch.Tensor:
        """The ``(B, prompt_length)`` long prompts of ``sources``."""
        return torch.tensor([self.prompt_ids(s) for s in sources], dtype=torch.long, device=device)

    def batch(self, pairs: Sequence[tuple[str, str]], device=None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(tokens, labels)``, both ``(B, prompt_length + 11)`` long: each row is the prompt,
        the answer and ``<eos>``; ``labels[b, t]`` is the token that follows position ``t``
        where that token belongs to the answer, ``<pad>`` (not scored) elsewhere, so the model
        learns to answer, not to write prompts. The model reads the ``<pad>`` in front of a
        short prompt as a token like any other (no padding mask), as it will in ``generate``."""
        pad = self.vocab.pad_id
        prompts = self.prompts([s for s, _ in pairs])
        answers = torch.tensor([self.vocab.encode(t, eos=True) for _, t in pairs], dtype=torch.long)
        if answers.shape[1] != self.answer_length:
            raise ValueError(gettext("answers must be ISO dates of 10 characters, got {answers}").format(
                answers=[t for _, t in pairs][:3]))
        tokens = torch.cat([prompts, answers], dim=1)
        labels = torch.cat([torch.full_like(prompts[:, 1:], pad), answers, torch.full_like(answers[:, :1], pad)], dim=1)
        return (tokens.to(device), labels.to(device)) if device is not None else (tokens, labels)


def make_prompt_task(task: DateTask | None = None) -> PromptTask:
    """The prompts of ``task`` (default: ``make_date_task(seed=0)``, chapters 3 and 7's data)."""
    task = task or make_date_task(seed=0)
    chars = set(task.src_vocab.tokens[3:]) | set(task.tgt_vocab.tokens[3:]) | {SEP}
    longest = max(len(s) for split in (task.train, task.valid, task.test) for s, _ in split)
    return PromptTask(CharVocab(sorted(chars)), task.train, task.valid, task.test, longest + len(SEP))


def prompt_loss(logits: torch.Tensor, labels: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Mean cross-entropy over the scored positions (``labels != pad_id``) of ``(B, L, V)``
    logits against ``(B, L)`` labels."""
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=pad_id)


def train_prompt_model(model: nn.Module, task: PromptTask, num_steps: int = 300, batch_size: int = 64,
                       lr: float = 3e-3, device=None, seed: int = 0, max_seconds: float | None = None,
                       progress: bool = True, pause_every: int | None = None) -> dict:
    """Train a decoder-only language model ``model`` (``model(tokens) -> (logits, present_kv)``,
    chapter 8's ``GPT``) to answer the prompts of ``task``; return the history of
    :func:`attention_course.training.fit`, with ``valid_loss`` per evaluation.

    Each step draws ``batch_size`` training pairs (from a generator seeded with ``seed``;
    ``torch`` is seeded too, for dropout), takes one Adam step on :func:`prompt_loss` with
    the gradient norm clipped to 1, at the rate ``lr`` from the first step on, brought down
    along a cosine to ``lr / 20``: a pre-norm model needs no warm-up. On the CPU it runs on
    one thread. With ``pause_every``, it returns after that many steps and each
    ``history.resume()`` trains the next part.
    """
    device = torch.device(device) if device is not None else next(model.parameters()).device
    model.to(device)
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    pad_id = task.vocab.pad_id
    valid_tokens, valid_labels = task.batch(task.valid, device)

    def training_loss(step: int) -> torch.Tensor:
        picks = torch.randint(len(task.train), (batch_size,), generator=generator).tolist()
        tokens, labels = task.batch([task.train[i] for i in picks], device)
        return prompt_loss(model(tokens)[0], labels, pad_id)

    def evaluate() -> dict[str, float]:
        return {"valid_loss": float(prompt_loss(model(valid_tokens)[0], valid_labels, pad_id))}

    def lr_lambda(step: int) -> float:
        return 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(step - 1, num_steps) / num_steps))

    return fit(model, training_loss, evaluate, num_steps=num_steps, lr=lr, lr_lambda=lr_lambda, device=device,
               betas=(0.9, 0.99), clip=1.0, eval_every=max(num_steps // 4, 1), max_seconds=max_seconds,
               progress=progress, pause_every=pause_every)


@torch.no_grad()
def complete_prompts(model: nn.Module, task: PromptTask, sources: Sequence[str], generate: Callable,
                     device=None, batch_size: int = 1000) -> list[str]:
    """The answers ``model`` gives to the prompts of ``sources`` by greedy decoding with
    ``generate`` (chapter 8's: ``generate(model, prompt, max_new_tokens)`` with a ``(B, P)``
    prompt, greedy by default), each cut at its first ``<eos>``."""
    device = torch.device(device) if device is not None else next(model.parameters()).device
    answers = []
    for start in range(0, len(sources), batch_size):
        out = generate(model, task.prompts(sources[start:start + batch_size], device), task.answer_length)
        answers += [task.vocab.decode(row) for row in out[:, task.prompt_length:].tolist()]
    return answers
