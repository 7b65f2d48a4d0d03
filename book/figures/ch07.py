"""Figures and demonstrations of chapter 7's book page, *The Transformer decoder*.

The layers themselves are in :mod:`attention_course.reference.ch07` (generated from the chapter's solution notebook); this module trains
them on chapter 3's dates, checks them against PyTorch and draws the page's figures.
Conventions are the course's: batch first, boolean masks with ``True`` = may attend,
attention maps with one row per query and one column per key. Every function that trains
is seeded, so a build of the book gives the same numbers on the same machine.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import torch
from torch import nn

from attention_course.reference.ch04 import MultiHeadAttention
from attention_course.reference.ch07 import (
    DecoderBlock,
    Transformer,
    causal_mask,
    greedy_decode,
    noam_lr,
    teacher_forcing_pair,
)
from attention_course.recipes import BAHDANAU, TRANSFORMER
from attention_course.seq2seq import make_seq2seq, make_transformer, train_seq2seq, train_transformer
from attention_course.twins import to_torch_decoder_layer
from figures.alignment import alignment_finding
from figures.ch06 import padding_to_attention_mask
from figures.describe import finding
from figures.i18n import N_, _, padded
from figures.training import date_run, kept_run

__all__ = [
    "NOTES_TARGET",
    "causal_attention_example",
    "plot_causal_mask",
    "teacher_forcing_rows",
    "teacher_forcing_text",
    "decoder_torch_agreement",
    "describe_decoder_agreement",
    "future_leak_check",
    "leak_table",
    "describe_learning_rate",
    "course_learning_rate",
    "plot_noam_lr",
    "parameter_count",
    "parameter_breakdown",
    "describe_parameters",
    "train_date_transformer",
    "describe_training",
    "cooldown_steps",
    "describe_cooldown",
    "describe_default_embeddings",
    "train_with_default_embeddings",
    "train_date_bahdanau",
    "held_out_exact_match",
    "transformer_translate",
    "plot_cross_attention_heads",
    "plot_self_attention_heads",
    "describe_self_attention",
    "MODEL_NAMES",
    "comparison_table",
]

#: The notes' target sentence: what the decoder reads and must say is cut out of it.
NOTES_TARGET = ("<BOS>", "I", "am", "Transformer", "<EOS>")


# --------------------------------------------------------------------------------------
# Masked self-attention and teacher forcing
# --------------------------------------------------------------------------------------


def causal_attention_example(tokens=NOTES_TARGET[:-1], d_model: int = 8, seed: int = 0) -> dict:
    """One head of causal self-attention over random vectors, one per token of ``tokens``.

    Returns a dict with ``tokens``, the boolean ``mask`` ``(T, T)`` of :func:`causal_mask`,
    the notes' additive mask ``additive`` (``0`` where ``mask`` is ``True``, ``-inf``
    elsewhere), and the attention ``weights`` ``(T, T)`` of a single-head
    :class:`MultiHeadAttention` with that mask.
    """
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    T = len(tokens)
    X = torch.randn(1, T, d_model, generator=generator)
    mask = causal_mask(T)
    attention = MultiHeadAttention(d_model, num_heads=1).eval()
    with torch.no_grad():
        attention(X, X, X, mask)
    additive = torch.zeros(T, T).masked_fill(~mask, float("-inf"))
    return {"tokens": list(tokens), "mask": mask, "additive": additive,
            "weights": attention.attention_weights[0, 0]}


def plot_causal_mask(tokens=NOTES_TARGET[:-1], d_model: int = 8, seed: int = 0):
    """Figure: the causal mask as the course writes it (``True`` = may attend), as the
    notes write it (``0`` / ``-inf`` added to the scores), and the weights it leaves,
    for :func:`causal_attention_example`. Rows are queries, columns keys."""
    import matplotlib.pyplot as plt

    example = causal_attention_example(tokens, d_model, seed)
    mask, weights, labels = example["mask"].numpy(), example["weights"].numpy(), example["tokens"]
    T = len(labels)
    # one query axis for the three panels: labelled once, and each panel's table names its rows
    fig, axes = plt.subplots(1, 3, figsize=(13.0, 3.9), sharey=True)
    panels = [
        (mask.astype(float), "Greens", lambda i, j: "True" if mask[i, j] else "False",
         _("causal_mask({T}): True = may attend", T=T)),
        (mask.astype(float), "Greens", lambda i, j: "0" if mask[i, j] else "−∞",
         _("the notes' mask, added to the scores")),
        (weights, "Reds", lambda i, j: f"{weights[i, j]:.2f}", _("attention weights (each row sums to 1)")),
    ]
    for ax, (values, cmap, text, title) in zip(axes, panels):
        # a pale green for the allowed cells, so that the text on them stays readable
        ax.imshow(values, cmap=cmap, vmin=0.0, vmax=1.0 if cmap == "Reds" else 2.5)
        for i in range(T):
            for j in range(T):
                ax.text(j, i, text(i, j), ha="center", va="center", fontsize=9)
        ax.set_xticks(range(T), labels)
        ax.set_yticks(range(T), labels)
        ax.set_xlabel(_("key (position j)"))
        ax.set_title(title, fontsize=10)
    axes[0].set_ylabel(_("query (position i)"))
    fig.tight_layout()
    above = float(np.triu(weights, 1).max())
    return finding(fig, _("The masks allow each query i the keys 0 to i ({allowed} of {cells} cells): the first row "
                          "({first}) puts weight {w0:.2f} on its only key, the last row ({last}) spreads its weight over "
                          "all {T}, from {low:.2f} to {high:.2f}; the largest weight above the diagonal is {above:g}.",
                          allowed=int(mask.sum()), cells=T * T, first=labels[0], w0=float(weights[0, 0]),
                          last=labels[-1], T=T, low=float(weights[-1].min()), high=float(weights[-1].max()),
                          above=above))


def teacher_forcing_rows(tokens=NOTES_TARGET, masked: str = "<MASKED>") -> list[tuple[list[str], str]]:
    """What each decoder position sees and must predict, for a target written as tokens.

    The target is cut with :func:`teacher_forcing_pair` (the decoder input is the target
    shifted right, the labels are the target shifted left); row ``t`` is the decoder
    input with the positions after ``t`` replaced by ``masked`` (the causal mask hides
    them), and the label of position ``t``.
    """
    decoder_input, labels = teacher_forcing_pair(torch.arange(len(tokens)))
    rows = []
    for t, label in enumerate(labels.tolist()):
        seen = [tokens[i] if k <= t else masked for k, i in enumerate(decoder_input.tolist())]
        rows.append((seen, tokens[label]))
    return rows


def teacher_forcing_text(tokens=NOTES_TARGET, masked: str = "<MASKED>") -> str:
    """:func:`teacher_forcing_rows` as the page prints them: position, what the decoder sees, label."""
    position, sees, label = padded(_("position"), 10), padded(_("what the decoder sees"), 44), _("label")
    lines = [position + sees + label]
    for t, (seen, target) in enumerate(teacher_forcing_rows(tokens, masked)):
        lines.append(f"{t:<10d}{' '.join(seen):44s}{target}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Checks of the decoder block and of the whole model
# --------------------------------------------------------------------------------------


def _random_norms(block: nn.Module, generator: torch.Generator) -> None:
    """Give every layer norm of ``block`` random scales and shifts, so that a comparison
    with another implementation also checks that the norms were copied to the right place."""
    with torch.no_grad():
        for addnorm in (block.addnorm1, block.addnorm2, block.addnorm3):
            weight = addnorm.ln.weight
            weight.copy_(1 + 0.5 * torch.randn(weight.shape, generator=generator, dtype=weight.dtype))
            addnorm.ln.bias.copy_(0.5 * torch.randn(weight.shape, generator=generator, dtype=weight.dtype))


def decoder_torch_agreement(seed: int = 0, d_model: int = 16, num_heads: int = 4, d_ff: int = 32,
                            tgt_len: int = 6, src_len: int = 9) -> float:
    """Largest ``|difference|`` between the outputs of :class:`DecoderBlock` and of
    ``torch.nn.TransformerDecoderLayer`` (``batch_first=True``, post-norm, dropout 0)
    holding the same weights (:func:`to_torch_decoder_layer`), in ``float64``.

    The inputs are a batch of two random target sequences ``(2, tgt_len, d_model)`` and
    two encoder outputs ``(2, src_len, d_model)``, the second padded after 5 tokens. The
    course's block gets the causal mask and the ``(B, 1, S)`` source mask (``True`` = may
    attend); PyTorch gets their negations, because its boolean masks are ``True`` where
    attending is *not* allowed.
    """
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    block = DecoderBlock(d_model, num_heads, d_ff).eval()
    _random_norms(block, generator)
    block = block.double()
    twin = to_torch_decoder_layer(block).eval()
    X = torch.randn(2, tgt_len, d_model, generator=generator, dtype=torch.float64)
    memory = torch.randn(2, src_len, d_model, generator=generator, dtype=torch.float64)
    src_mask = torch.ones(2, src_len, dtype=torch.bool)
    src_mask[1, 5:] = False
    tgt_mask = causal_mask(tgt_len)
    with torch.no_grad():
        ours = block(X, memory, tgt_mask, padding_to_attention_mask(src_mask))
        theirs = twin(X, memory, tgt_mask=~tgt_mask, memory_key_padding_mask=~src_mask)
    difference = float((ours - theirs).abs().max())
    assert difference < 1e-12, f"the layers no longer agree to float64 rounding: {difference}"
    return difference


def describe_decoder_agreement(difference: float) -> str:
    """:func:`decoder_torch_agreement`'s result, in words."""
    return _("largest |DecoderBlock - nn.TransformerDecoderLayer| (float64): {difference:.1e}", difference=difference)


def _decode_without_causal_mask(model: Transformer, tgt_in: torch.Tensor, memory: torch.Tensor,
                                src_mask: torch.Tensor) -> torch.Tensor:
    """``model.decoder``'s logits ``(B, T, V)`` with every block's self-attention mask
    left out: a decoder that may look ahead, for comparison."""
    decoder = model.decoder
    X = decoder.pos_encoding(decoder.embedding(tgt_in) * math.sqrt(decoder.d_model))
    memory_mask = padding_to_attention_mask(src_mask)
    for block in decoder.blocks:
        X = block(X, memory, None, memory_mask)
    return decoder.dense(X)


def future_leak_check(changed: int = 4, tgt_len: int = 8, src_len: int = 10, vocab_size: int = 13,
                      seed: int = 0) -> dict[str, list[float]]:
    """Change the decoder's input token at position ``changed`` and measure, for every
    position ``t``, the largest change of the logits there.

    The model is a randomly initialised :class:`Transformer` (``d_model`` 32, 4 heads, 2
    layers; a leak needs no training to show). With the causal mask the logits of the
    positions ``t < changed`` must not move at all; without it (every self-attention left
    unmasked) all of them do. Returns ``{"with the causal mask": [...], "without it":
    [...]}``, one number per position.
    """
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = Transformer(vocab_size, vocab_size, d_model=32, num_heads=4, d_ff=64, num_layers=2).eval()
    src = torch.randint(3, vocab_size, (1, src_len), generator=generator)
    src_mask = torch.ones(1, src_len, dtype=torch.bool)
    tgt_in = torch.randint(3, vocab_size, (1, tgt_len), generator=generator)
    edited = tgt_in.clone()
    edited[0, changed] = 3 + (edited[0, changed] - 3 + 1) % (vocab_size - 3)  # another real token
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        result = {}
        for name, decode in ((_("with the causal mask"), model.decode),
                             (_("without it"), lambda y, m, s: _decode_without_causal_mask(model, y, m, s))):
            change = (decode(edited, memory, src_mask) - decode(tgt_in, memory, src_mask)).abs()
            result[name] = change[0].amax(dim=-1).tolist()
    # what the page says of the printout: with the mask, the positions before the change do not
    # move at all and the others do; without it, every position moves
    masked, unmasked = result.values()
    assert max(masked[:changed]) == 0.0 and min(masked[changed:]) > 0.0 and min(unmasked) > 0.0, result
    return result


def leak_table(result: dict[str, list[float]]) -> str:
    """:func:`future_leak_check`'s result: one row per model, one column per position."""
    lines = [padded(name, 22) + " ".join(f"{c:8.1e}" for c in changes) for name, changes in result.items()]
    positions = len(next(iter(result.values())))
    lines.append(padded(_("position"), 22) + " ".join(f"{t:8d}" for t in range(positions)))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# The learning rate
# --------------------------------------------------------------------------------------


_RUN = TRANSFORMER.training


def describe_learning_rate(recipe, training_pairs: int) -> str:
    """The recipe's peak learning rate (:func:`course_learning_rate`), against the paper's (``noam_lr``
    at ``d_model`` 512 and 4000 warm-up steps), and how many of the ``training_pairs`` its steps
    draw."""
    run = recipe.training
    peak = max(course_learning_rate(s) for s in range(1, run["num_steps"] + 1))
    return _("peak learning rate {peak:.4f} at step {warmup}, {times:.0f} times the paper's; "
             "{steps} steps of {batch} draw {pairs:,} pairs from the {total:,} of the training set",
             peak=peak, warmup=run["warmup"], times=peak / noam_lr(4000, 512, 4000), steps=run["num_steps"],
             batch=run["batch_size"], pairs=run["num_steps"] * run["batch_size"], total=training_pairs)


def course_learning_rate(step: int, num_steps: int = _RUN["num_steps"], d_model: int = TRANSFORMER.model["d_model"],
                         warmup: int = _RUN["warmup"], factor: float = _RUN["factor"],
                         cooldown: float = _RUN["cooldown"]) -> float:
    """The learning rate that :func:`train_transformer` uses at ``step`` (from 1) with these
    arguments (by default chapter 7's recipe): ``factor * noam_lr(step, d_model, warmup)``,
    times a factor that falls linearly from 1 to 0 over the last ``cooldown`` fraction of the
    ``num_steps`` steps."""
    ending = min(1.0, (num_steps - step + 1) / max(cooldown * num_steps, 1.0))
    return factor * noam_lr(step, d_model, warmup) * ending


def plot_noam_lr(settings=((512, 4000), (512, 8000), (256, 4000), (1024, 4000)), num_steps: int = 20_000,
                 course_steps: int | None = None):
    """Figure. Left: :func:`noam_lr` for a few ``(d_model, warmup)`` pairs over
    ``num_steps`` steps. Right: the schedule of this chapter's training run
    (:func:`course_learning_rate`, chapter 7's recipe, over ``course_steps`` steps, by
    default the recipe's), with and without the final cooldown."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12.0, 3.8))
    steps = np.arange(1, num_steps + 1)
    peaks = []
    for (d_model, warmup), style in zip(settings, ("-", "--", ":", "-.") * len(settings)):  # apart in greyscale
        rates = np.array([noam_lr(int(s), d_model, warmup) for s in steps])
        left.plot(steps, rates, linestyle=style, label=f"d_model = {d_model}, warmup = {warmup}")
        peaks.append(_("{rate:.2g} at step {step} (d_model = {d_model}, warmup = {warmup})", rate=rates.max(),
                       step=int(steps[rates.argmax()]), d_model=d_model, warmup=warmup))
    left.set_xlabel(_("step"))
    left.set_ylabel(_("learning rate"))
    left.set_title("noam_lr(step, d_model, warmup)", fontsize=10)
    left.legend(fontsize="small")
    course_steps = course_steps or _RUN["num_steps"]
    warmup, factor, d_model = _RUN["warmup"], _RUN["factor"], TRANSFORMER.model["d_model"]
    steps = np.arange(1, course_steps + 1)
    right.plot(steps, [factor * noam_lr(int(s), d_model, warmup) for s in steps], "--", color="0.55",
               label=f"{factor:g} · noam_lr(step, {d_model}, {warmup})")
    right.plot(steps, [course_learning_rate(int(s), course_steps) for s in steps],
               label=_("with the linear cooldown (train_transformer)"))
    right.axvspan(course_steps * (1 - _RUN["cooldown"]), course_steps, color="0.92", zorder=0)
    right.set_xlabel(_("step"))
    right.set_title(_("this chapter's run: {steps} steps, warmup {warmup}, d_model {d_model}", steps=course_steps,
                      warmup=warmup, d_model=d_model), fontsize=10)
    right.legend(fontsize="small")
    fig.tight_layout()
    course = [course_learning_rate(int(s), course_steps) for s in steps]
    return finding(fig, _("On the left, the largest rate of each schedule: {peaks}. This chapter's run peaks at "
                          "{peak:.4f} at step {step}, and its cooldown brings the rate down to {last:.2g} at step "
                          "{steps}.", peaks="; ".join(peaks), peak=max(course),
                          step=int(steps[int(np.argmax(course))]), last=course[-1], steps=course_steps))


# --------------------------------------------------------------------------------------
# Training on the dates, evaluation, attention maps
# --------------------------------------------------------------------------------------


def parameter_count(model: nn.Module) -> int:
    """The number of learnable numbers of ``model`` (buffers such as the positional table
    do not count)."""
    return sum(p.numel() for p in model.parameters())


def parameter_breakdown(model: Transformer) -> dict[str, int]:
    """:func:`parameter_count` of the parts of a :class:`Transformer`: the two
    embeddings, the encoder blocks, the decoder blocks and the final linear layer."""
    return {
        _("source embedding"): parameter_count(model.encoder.embedding),
        _("encoder blocks"): parameter_count(model.encoder.blocks),
        _("target embedding"): parameter_count(model.decoder.embedding),
        _("decoder blocks"): parameter_count(model.decoder.blocks),
        _("final linear layer"): parameter_count(model.decoder.dense),
    }


def describe_parameters(parts: dict[str, int], task) -> str:
    """:func:`parameter_breakdown`'s parts and their total, and the sizes of ``task``'s two
    vocabularies."""
    total = _("total")
    lines = [f"{padded(part, 20)}{count:9,d}" for part, count in {**parts, total: sum(parts.values())}.items()]
    lines.append(_("vocabularies, special tokens included: {source} source tokens, {target} target tokens",
                   source=len(task.src_vocab), target=len(task.tgt_vocab)))
    return "\n".join(lines)


def train_date_transformer(task, seed: int = 0, **train_options) -> tuple[Transformer, dict]:
    """The chapter's run, as its notebook makes it: :func:`make_transformer` with chapter 7's
    recipe (:data:`~attention_course.recipes.TRANSFORMER`), drawn after
    ``torch.manual_seed(seed)``, trained by :func:`train_transformer` with the recipe
    (``train_options`` override it) without a progress bar. Chapter 7's page and chapter 8's
    show it: a build trains it once (:func:`figures.training.kept_run`). Returns ``(model, history)``."""
    torch.manual_seed(seed)
    model = make_transformer(task, Transformer, **TRANSFORMER.model)
    inputs = date_run(task, seed, TRANSFORMER, **train_options)
    history = kept_run("train_date_transformer", inputs, model, lambda m: train_transformer(
        m, task, seed=seed, progress=False, schedule=noam_lr, shift=teacher_forcing_pair, **inputs[-1]))
    return model, history


def train_with_default_embeddings(task, seed: int = 0, **train_options) -> tuple[Transformer, dict]:
    """The chapter's run (:func:`train_date_transformer`: the same model, seed and recipe) with
    one change: the embeddings start from PyTorch's default ``N(0, 1)`` instead of
    ``init_transformer_weights``'s standard deviation ``1 / sqrt(d_model)``, so that, scaled by
    ``sqrt(d_model)``, their entries are about ``sqrt(d_model)`` times the size of the
    positional encoding's. Returns ``(model, history)``."""
    torch.manual_seed(seed)
    model = make_transformer(task, Transformer)
    for module in model.modules():
        if isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight)  # what nn.Embedding itself draws
    history = train_transformer(model, task, seed=seed, progress=False, schedule=noam_lr,
                                shift=teacher_forcing_pair, **train_options)
    return model, history


def train_date_bahdanau(task, seed: int = 0) -> tuple[nn.Module, dict]:
    """Chapter 3's run, as its page and its notebook make it: ``make_seq2seq(task,
    BahdanauDecoder)`` with chapter 3's recipe (:data:`~attention_course.recipes.BAHDANAU`)
    after ``torch.manual_seed(seed)``, trained by :func:`train_seq2seq` with the recipe: the run
    chapter 3's page kept (:func:`figures.training.keep_run`), loaded. Returns ``(model, history)``."""
    from attention_course.reference.ch03 import BahdanauDecoder, sequence_loss

    torch.manual_seed(seed)
    model = make_seq2seq(task, BahdanauDecoder, **BAHDANAU.model)
    history = kept_run("train_date_bahdanau", date_run(task, seed, BAHDANAU), model, lambda m: train_seq2seq(
        m, task, sequence_loss, **BAHDANAU.training, seed=seed, progress=False))
    return model, history


def held_out_exact_match(model: nn.Module, task, decode=greedy_decode, max_len: int = 12) -> tuple[float, list[str]]:
    """Greedy translations of all of ``task.test`` (the held-out days) by ``decode`` and
    their exact match with the targets. Returns ``(fraction, predictions)``. On the CPU
    it runs on one thread, as the training loop does: on a shared machine that is
    several times faster than fighting the other processes for the cores."""
    from attention_course.seq2seq import exact_match, ids_to_strings

    device = next(model.parameters()).device
    test = task.batch(task.test, device)
    v = task.tgt_vocab
    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    try:
        ids = decode(model, test.src, test.src_mask, v.bos_id, v.eos_id, v.pad_id, max_len)
    finally:
        torch.set_num_threads(threads)
    predictions = ids_to_strings(ids, v)
    return exact_match(predictions, test.targets), predictions


def describe_training(history: dict, parameters: int, accuracy: float, count: int) -> str:
    """One line for the chapter's training run: steps, CPU and wall time, device, parameters, and
    the held-out exact match of ``count`` dates."""
    return _("{steps} steps, {cpu:.1f} s of CPU ({wall:.0f} s wall) on {device}, {parameters:,} parameters; "
             "held-out exact match {accuracy:.2%} of {count} dates", steps=history["steps_done"],
             cpu=history["cpu_seconds"], wall=history["seconds"], device=history["device"], parameters=parameters,
             accuracy=accuracy, count=count)


def describe_cooldown(recipe) -> str:
    """The length of the recipe's cooldown, in steps."""
    return _("the cooldown: the last {steps} steps", steps=cooldown_steps(recipe))


def cooldown_steps(recipe) -> int:
    """How many of the recipe's steps its cooldown lasts."""
    return round(recipe.training["cooldown"] * recipe.training["num_steps"])


def describe_default_embeddings(history: dict, accuracy: float, course_accuracy: float) -> str:
    """The run of :func:`train_with_default_embeddings` next to the course's."""
    return _("embeddings N(0, 1), {steps} steps: held-out exact match {accuracy:.1%}; "
             "with the course's N(0, 1/d): {course:.1%}", steps=history["steps_done"], accuracy=accuracy,
             course=course_accuracy)


@torch.no_grad()
def transformer_translate(model: Transformer, task, sources, max_len: int = 12) -> dict:
    """Greedy translations of the strings ``sources`` and the attention weights behind them.

    After :func:`greedy_decode`, the model reads its own output once more with teacher
    forcing (``[<bos>, y_1, ..., y_k]``, as :func:`attention_course.seq2seq.translate`
    does), and the weights of that pass are collected from the *last* block of each half.
    Returns a dict: ``sources``, ``translations`` (strings, ``<eos>`` left out), ``cross``
    ``(B, h, T, S)`` (decoder queries over the source), ``decoder_self`` ``(B, h, T, T)``
    and ``encoder_self`` ``(B, h, S, S)``, all on the CPU.
    """
    device = next(model.parameters()).device
    model.eval()
    v = task.tgt_vocab
    batch = task.batch([(s, "") for s in sources], device)
    ids = greedy_decode(model, batch.src, batch.src_mask, v.bos_id, v.eos_id, v.pad_id, max_len)
    tgt_in = torch.cat([torch.full_like(ids[:, :1], v.bos_id), ids[:, :-1]], dim=1)
    model(batch.src, tgt_in, batch.src_mask)
    return {
        "sources": list(sources),
        "translations": [v.decode(row) for row in ids.cpu()],
        "cross": model.decoder.blocks[-1].cross_attention.attention_weights.cpu(),
        "decoder_self": model.decoder.blocks[-1].self_attention.attention_weights.cpu(),
        "encoder_self": model.encoder.blocks[-1].attention.attention_weights.cpu(),
    }


def _characters(text: str) -> list[str]:
    return list(text.replace(" ", "␣"))


def _head_maps(subfigure, maps, xticklabels, yticklabels, xlabel, ylabel):
    """One heat map per head of ``maps`` ``(h, n, m)`` in a row of ``subfigure``."""
    axes = subfigure.subplots(1, maps.shape[0], sharey=True)
    for head, ax in enumerate(np.atleast_1d(axes)):
        ax.imshow(maps[head], cmap="Reds", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(len(xticklabels)), xticklabels, fontsize=6.5)
        ax.set_yticks(range(len(yticklabels)), yticklabels, fontsize=6.5)
        ax.set_title(_("head {head}", head=head), fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        if head == 0:
            ax.set_ylabel(ylabel, fontsize=8)


def plot_cross_attention_heads(translated: dict, examples=(0, 1, 2)):
    """Figure: the cross-attention weights of the decoder's last block, one row of maps
    per example of ``translated`` (a :func:`transformer_translate` result), one map per
    head. Rows of a map are the output steps (labelled by the character each step
    writes), columns the source characters."""
    import matplotlib.pyplot as plt

    examples = list(examples)
    heads = translated["cross"].shape[1]
    fig = plt.figure(figsize=(3.4 * heads, 3.3 * len(examples)), layout="constrained")
    for subfigure, k in zip(np.atleast_1d(fig.subfigures(len(examples), 1)), examples):
        source, output = translated["sources"][k], translated["translations"][k]
        steps = len(output) + 1  # the characters and <eos>
        maps = translated["cross"][k, :, :steps, :len(source)].numpy()
        _head_maps(subfigure, maps, _characters(source), list(output) + ["⟨eos⟩"], _("source character"),
                   _("output character"))
        subfigure.suptitle(_("cross-attention, {source!r} → {output!r}", source=source, output=output), fontsize=10)
    return alignment_finding(fig, translated["cross"][examples], [translated["sources"][k] for k in examples],
                             [translated["translations"][k] for k in examples])


def plot_self_attention_heads(translated: dict, example: int = 0):
    """Figure: for one example of ``translated`` (a :func:`transformer_translate`
    result), the masked self-attention of the decoder's last block (keys: what the
    decoder read, ``<bos>`` then its own output) and the self-attention of the encoder's
    last block (source over source), one map per head."""
    import matplotlib.pyplot as plt

    source, output = translated["sources"][example], translated["translations"][example]
    steps = len(output) + 1
    heads = translated["cross"].shape[1]
    fig = plt.figure(figsize=(3.4 * heads, 7.2), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1.0, 1.25])
    _head_maps(top, translated["decoder_self"][example, :, :steps, :steps].numpy(), ["⟨bos⟩"] + list(output),
               list(output) + ["⟨eos⟩"], _("decoder input"), _("output character"))
    top.suptitle(_("decoder self-attention (masked), writing {output!r}", output=output), fontsize=10)
    chars = _characters(source)
    _head_maps(bottom, translated["encoder_self"][example, :, :len(source), :len(source)].numpy(), chars, chars,
               _("source character (key)"), _("source character (query)"))
    bottom.suptitle(_("encoder self-attention, reading {source!r}", source=source), fontsize=10)
    facts = self_attention_facts(translated)
    return finding(fig, _("Over all {n} dates, the largest weight of the decoder's masked self-attention above the "
                          "diagonal is {above:.1g}; the spread of its rows (0 one-hot, 1 even) is {decoder:.2f}, that "
                          "of the encoder's {encoder:.2f}; the year's characters put {share:.0%} of their weight on "
                          "the year (evenly spread: {even:.0%}).", n=facts["dates"], above=facts["above"],
                          decoder=facts["decoder_spread"], encoder=facts["encoder_spread"],
                          share=facts["year_share"], even=facts["year_even"]))


def _normalised_entropy(weights: np.ndarray) -> np.ndarray:
    """Entropy of each row of ``weights`` ``(..., m)`` over ``log m``: 0 for a one-hot row, 1
    for an even one."""
    w = np.clip(weights, 1e-12, 1.0)
    return -(w * np.log(w)).sum(axis=-1) / np.log(weights.shape[-1])


def self_attention_facts(translated: dict) -> dict:
    """The numbers :func:`describe_self_attention` prints of ``translated`` (and
    :func:`plot_self_attention_heads`'s finding says), checked as it says."""
    from figures.alignment import date_fields

    sources, translations = translated["sources"], translated["translations"]
    decoder, encoder = translated["decoder_self"].numpy(), translated["encoder_self"].numpy()
    above, decoder_spread, encoder_spread, year_share, year_even = 0.0, [], [], [], []
    for k, (source, output) in enumerate(zip(sources, translations)):
        steps = len(output) + 1
        above = max(above, float(np.triu(decoder[k, :, :steps, :steps], 1).max()))
        decoder_spread += [_normalised_entropy(decoder[k, :, t, : t + 1]) for t in range(1, steps)]
        encoder_spread.append(_normalised_entropy(encoder[k, :, : len(source), : len(source)]).ravel())
        year = sorted(date_fields(source, output)["year"])
        if year:
            mean = encoder[k, :, : len(source), : len(source)].mean(axis=0)
            year_share.append(float(mean[np.ix_(year, year)].sum(axis=1).mean()))
            year_even.append(len(year) / len(source))
    steps = min(len(output) + 1 for output in translations)
    strongest = decoder[:, :, 1:steps, :steps].argmax(axis=-1)  # (B, h, steps - 1); step 0 sees <bos> only
    same = (strongest == strongest[:1]).all(axis=0)
    read = [["⟨bos⟩", *output] for output in translations]
    kinds = Counter(_("digit") if read[k][j].isdigit() else read[k][j]
                    for k, row in enumerate(strongest.reshape(len(sources), -1)) for j in row)
    decoder_spread = float(np.concatenate(decoder_spread).mean())
    encoder_spread = float(np.concatenate(encoder_spread).mean())
    assert above == 0.0, "the decoder attends to a later position: the causal mask no longer works"
    assert encoder_spread > decoder_spread, "the encoder's rows are no longer more spread out than the decoder's"
    assert year_share and np.mean(year_share) > np.mean(year_even), (
        "the year's characters no longer look at the year more than evenly spread weights would")
    return {"dates": len(sources), "above": above, "same": int(same.sum()), "pairs": int(same.size), "kinds": kinds,
            "decoder_spread": decoder_spread, "encoder_spread": encoder_spread,
            "year_share": float(np.mean(year_share)), "year_even": float(np.mean(year_even))}


def describe_self_attention(translated: dict) -> str:
    """What the self-attention maps of :func:`plot_self_attention_heads` show, for all the
    examples of ``translated`` (a :func:`transformer_translate` result), in numbers: the
    largest decoder weight above the diagonal; for how many (head, output step) pairs the
    decoder's strongest key is at the same position in every example; how spread out the
    rows of each kind are (entropy over its largest value, 0 one-hot, 1 even, rows with a
    single key left out); and the share of the weight that the characters of the year put on
    the year, in the encoder, next to the share evenly spread weights would give.

    Checks the three things the page says of the figure (:func:`self_attention_facts`), and
    raises ``AssertionError`` (which stops the book's build) when one no longer holds: no weight
    above the decoder's diagonal, encoder rows more spread out than decoder rows, and the year
    weighing the year more than evenly spread weights would.
    """
    facts = self_attention_facts(translated)
    # a list of messages, which the Chinese build joins with 、
    keys = ", ".join(_("{kind} {count}", kind=kind, count=count) for kind, count in facts["kinds"].most_common())
    return "\n".join([
        _("decoder self-attention, largest weight above the diagonal: {above:.1g}", above=facts["above"]),
        "  " + _("strongest key at the same place in all {n} dates:", n=facts["dates"]),
        "    " + _("{same} of {pairs} (head, step) pairs, step 0 left out", same=facts["same"], pairs=facts["pairs"]),
        "  " + _("strongest keys: {keys}", keys=keys),
        "  " + _("spread of the rows (0 one-hot, 1 even): {spread:.2f}", spread=facts["decoder_spread"]),
        _("encoder self-attention, spread of the rows: {spread:.2f}", spread=facts["encoder_spread"]),
        "  " + _("year characters' weight on the year: {share:.0%} (evenly spread: {even:.0%})",
                 share=facts["year_share"], even=facts["year_even"]),
    ])


#: The models the pages compare in :func:`comparison_table` (chapters 7 and 8), by the names they give them.
MODEL_NAMES = (N_("Transformer (chapter 7)"), N_("Bahdanau GRU (chapter 3)"), N_("GPT, decoder-only (chapter 8)"),
               N_("Transformer, encoder-decoder (chapter 7)"))


def comparison_table(rows: dict[str, dict]) -> str:
    """A Markdown table of trained models: ``rows`` maps a model's name to a dict with
    ``accuracy`` (held-out exact match), ``history`` (of the training loop) and
    ``parameters``. Times are the loop's wall time and the CPU time of the process
    during it (on a shared machine, the wall time also counts the waiting)."""
    lines = [_("| model | held-out exact match | training time | CPU time | time per step | parameters | steps "
               "| device |"),
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name, row in rows.items():
        history = row["history"]
        steps = history["steps_done"]
        lines.append(f"| {_(name)} | {row['accuracy']:.2%} | {history['seconds']:.1f} s | "
                     f"{history['cpu_seconds']:.1f} s | {1000 * history['seconds'] / steps:.0f} ms | "
                     f"{row['parameters']:,} | {steps} | {history['device']} |")
    return "\n".join(lines)
