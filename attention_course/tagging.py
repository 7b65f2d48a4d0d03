"""The sequence-labelling task of chapter 6, its fixed-window baseline and training loop.

**The task: does this letter occur anywhere else in the sequence?** Each example is a
string of 12 to 24 letters drawn from a 25-letter alphabet; its label sequence has one
label per letter, ``1`` when the same letter occurs somewhere else in the string, else
``0``. About half the labels are 1. The answer for a letter can depend on any other
position, near or far: this is the notes' argument for self-attention made concrete. A
network that sees a fixed window of neighbours (:class:`WindowMLP`) can only be sure when
the copy happens to fall inside its window; self-attention compares every position with
every other in one step.

Everything is generated offline from a fixed seed: no download, the same data on every
machine. Token ids: ``0`` is ``<pad>``, letters are ``1 .. 25``. Padded positions get the
label :data:`IGNORE` (``-100``), which the loss and the accuracy skip.
"""

from __future__ import annotations

import dataclasses
import math
import string

import torch
import torch.nn.functional as F
from torch import nn

from attention_course.training import fit

__all__ = [
    "IGNORE",
    "TaggingTask",
    "TaggingBatch",
    "make_duplicate_task",
    "WindowMLP",
    "TokenClassifier",
    "tagging_loss",
    "token_accuracy",
    "train_tagger",
]

IGNORE = -100  # the label of padded positions: F.cross_entropy's default ignore_index
PAD_ID = 0
ALPHABET = string.ascii_lowercase[:25]


@dataclasses.dataclass
class TaggingBatch:
    """``tokens`` ``(B, T)`` long (``0`` = pad), ``mask`` ``(B, T)`` bool (``True`` =
    real token), ``labels`` ``(B, T)`` long (``IGNORE`` at the padding)."""

    tokens: torch.Tensor
    mask: torch.Tensor
    labels: torch.Tensor

    def to(self, device) -> "TaggingBatch":
        return TaggingBatch(self.tokens.to(device), self.mask.to(device), self.labels.to(device))

    def __getitem__(self, rows) -> "TaggingBatch":
        return TaggingBatch(self.tokens[rows], self.mask[rows], self.labels[rows])

    def __len__(self) -> int:
        return self.tokens.shape[0]


@dataclasses.dataclass
class TaggingTask:
    """The three splits (``train``, ``valid``, ``test``) as padded batches."""

    train: TaggingBatch
    valid: TaggingBatch
    test: TaggingBatch
    vocab_size: int = len(ALPHABET) + 1
    num_labels: int = 2

    @staticmethod
    def decode(tokens) -> str:
        """The letters of one row of token ids, padding left out."""
        return "".join(ALPHABET[int(t) - 1] for t in tokens if int(t) != PAD_ID)


def _make_split(count: int, min_len: int, max_len: int, generator: torch.Generator) -> TaggingBatch:
    lengths = torch.randint(min_len, max_len + 1, (count,), generator=generator)
    letters = torch.randint(1, len(ALPHABET) + 1, (count, max_len), generator=generator)
    mask = torch.arange(max_len)[None, :] < lengths[:, None]
    tokens = letters.masked_fill(~mask, PAD_ID)
    # copies of each letter in its own row; a letter is a duplicate when it has two or more
    same = (tokens[:, :, None] == tokens[:, None, :]) & mask[:, None, :]
    labels = (same.sum(dim=-1) >= 2).long().masked_fill(~mask, IGNORE)
    return TaggingBatch(tokens, mask, labels)


def make_duplicate_task(seed: int = 0, num_train: int = 20_000, num_valid: int = 1_000, num_test: int = 2_000,
                        min_len: int = 12, max_len: int = 24) -> TaggingTask:
    """Generate the duplicate-letter task (see the module's docstring), seeded."""
    generator = torch.Generator().manual_seed(seed)
    return TaggingTask(*(_make_split(n, min_len, max_len, generator) for n in (num_train, num_valid, num_test)))


class WindowMLP(nn.Module):
    """The fixed-window baseline: each position sees its ``window`` neighbours on each side.

    The embeddings of positions ``t - window .. t + window`` (padding outside the
    sequence) are concatenated and fed to a two-layer MLP that labels position ``t``. It
    is as strong as a per-position network can be inside its window, and blind outside.
    ``forward(tokens, mask)`` -> logits ``(B, T, num_labels)``.
    """

    def __init__(self, vocab_size: int, num_labels: int, window: int = 3, embed_size: int = 32,
                 num_hiddens: int = 256):
        super().__init__()
        self.window = window
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=PAD_ID)
        self.mlp = nn.Sequential(
            nn.Linear((2 * window + 1) * embed_size, num_hiddens), nn.ReLU(),
            nn.Linear(num_hiddens, num_hiddens), nn.ReLU(),
            nn.Linear(num_hiddens, num_labels),
        )

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if mask is not None:
            tokens = tokens.masked_fill(~mask, PAD_ID)
        padded = F.pad(tokens, (self.window, self.window), value=PAD_ID)  # (B, T + 2w)
        windows = padded.unfold(1, 2 * self.window + 1, 1)  # (B, T, 2w + 1)
        return self.mlp(self.embedding(windows).flatten(start_dim=2))


class TokenClassifier(nn.Module):
    """An encoder and a linear layer that labels every token.

    ``encoder(tokens, mask)`` must return ``(B, T, d_model)`` (
    chapter 6's ``TransformerEncoder``, say); ``head =
    nn.Linear(d_model, num_labels)``. ``forward(tokens, mask)`` -> ``(B, T, num_labels)``.
    """

    def __init__(self, encoder: nn.Module, d_model: int, num_labels: int):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(d_model, num_labels)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.head(self.encoder(tokens, mask))


def tagging_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the real positions (labels ``IGNORE`` are skipped)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE)


@torch.no_grad()
def token_accuracy(model: nn.Module, batch: TaggingBatch, chunk: int = 500) -> float:
    """The fraction of real positions of ``batch`` whose argmax label is right."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    right = total = 0
    for start in range(0, len(batch), chunk):
        part = batch[start:start + chunk].to(device)
        predicted = model(part.tokens, part.mask).argmax(dim=-1)
        real = part.labels != IGNORE
        right += int((predicted == part.labels)[real].sum())
        total += int(real.sum())
    model.train(was_training)
    return right / max(total, 1)


def train_tagger(model: nn.Module, task: TaggingTask, num_steps: int = 600, batch_size: int = 64,
                 lr: float = 1e-3, warmup: int = 50, clip: float = 1.0, device=None, seed: int = 0,
                 max_seconds: float | None = None, eval_every: int = 100, progress: bool = True,
                 pause_every: int | None = None) -> dict:
    """Train ``model(tokens, mask) -> logits`` on ``task.train`` with Adam; return the history.

    The learning rate rises linearly over ``warmup`` steps to ``lr``, then decays along a
    cosine to ``lr / 20``; the gradient norm is clipped to ``clip``; batches are drawn
    from a generator seeded with ``seed``. Every ``eval_every`` steps the validation
    accuracy is measured. The loop itself, with its wall-clock guard ``max_seconds`` and its
    pauses every ``pause_every`` steps (each ``history.resume()`` trains the next part), is
    :func:`attention_course.training.fit`.

    Returns a dict: ``step``, ``loss``, ``valid_step``, ``valid_accuracy``, ``seconds``,
    ``cpu_seconds``, ``steps_done``, ``device``.
    """
    device = torch.device(device) if device is not None else next(model.parameters()).device
    model.to(device)
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)

    def factor(step: int) -> float:
        if step <= warmup:
            return step / warmup
        done = min(step - 1 - warmup, num_steps - warmup) / max(num_steps - warmup, 1)
        return 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * done))

    def training_loss(step: int) -> torch.Tensor:
        batch = task.train[torch.randint(len(task.train), (batch_size,), generator=generator)].to(device)
        return tagging_loss(model(batch.tokens, batch.mask), batch.labels)

    return fit(model, training_loss, lambda: {"valid_accuracy": token_accuracy(model, task.valid)},
               num_steps=num_steps, lr=lr, lr_lambda=factor, device=device, clip=clip, eval_every=eval_every,
               max_seconds=max_seconds, progress=progress, pause_every=pause_every)
