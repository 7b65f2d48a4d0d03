"""Figures and measurements of chapter 10's book page, *What attention learns*.

The layers and the scores are in :mod:`attention_course.reference.ch10` (generated from the
chapter's solution notebook), the data, the losses and the training loop in
:mod:`attention_course.induction`; this module only uses them: it checks the rotary positions'
relative property and the two pairings in use, trains the attention-only model of the recipe
while recording every head's scores, finds the jump of the phase change, draws the two heads'
patterns, removes each head in turn, and generates with chapter 9's window and rolling cache far
past the training length. Every sentence the page prints about a run is computed here from it.
Conventions are the course's: batch first, boolean masks with ``True`` = may attend, attention
patterns with one row per query and one column per key.
"""

from __future__ import annotations

import math
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from attention_course.induction import first_half_loss, repeat_loss, repeated_tokens, train_induction_model
from attention_course.recipes import INDUCTION
from attention_course.reference.ch08 import generate
from attention_course.reference.ch09 import generate_with_window
from attention_course.reference.ch10 import (AttentionOnlyTransformer, ablation_losses, apply_rotary, find_heads,
                                             head_scores, rotary_angles)
from figures.describe import finding
from figures.ch09 import _one_thread
from figures.diagrams import LABEL, SMALLEST, WIDTH
from figures.i18n import _, padded

__all__ = [
    "halves_rotary",
    "halves_to_adjacent",
    "rotary_facts",
    "describe_rotary",
    "plot_rotary_scores",
    "induction_run",
    "describe_run",
    "phase_change",
    "describe_phase_change",
    "plot_phase_change",
    "plot_two_heads",
    "describe_heads",
    "other_periods",
    "describe_other_periods",
    "ablation",
    "ablation_table",
    "describe_ablation",
    "plot_ablation",
    "WindowedModel",
    "window_generation",
    "describe_window_generation",
]

# --------------------------------------------------------------------------------------
# Rotary positions: the relative property, the two pairings
# --------------------------------------------------------------------------------------


def halves_rotary(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """The other pairing in use (GPT-NeoX; Hugging Face's Llama): coordinate ``i`` of the head is
    paired with coordinate ``i + d/2``, written from its own formula ``x cos + rotate_half(x) sin``
    with ``rotate_half(x) = (-x[d/2:], x[:d/2])`` and each angle repeated for both halves. Angles from
    the reference ``rotary_angles``; ``x (..., T, d)``, ``positions (T,)``."""
    angles = rotary_angles(positions, x.shape[-1], base)
    cos, sin = (torch.cat([f(angles)] * 2, dim=-1).to(x.dtype) for f in (torch.cos, torch.sin))
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-second, first], dim=-1) * sin


def halves_to_adjacent(d: int) -> torch.Tensor:
    """The permutation of a head's ``d`` coordinates that puts each pair of the halves pairing
    side by side: ``(0, d/2, 1, d/2 + 1, ...)``; ``x[..., perm]`` in the adjacent layout."""
    return torch.stack([torch.arange(d // 2), torch.arange(d // 2, d)], dim=-1).flatten()


@torch.no_grad()
def rotary_facts(d_head: int = 64, length: int = 16, shift: int = 1_000_000, base: float = 10000.0,
                 seed: int = 0) -> dict:
    """Measured on random queries and keys (float64, ``length`` positions, one head of ``d_head``)
    with the reference ``apply_rotary``: the scores ``q_t . k_s`` at positions ``0 .. length - 1``
    against the same vectors at positions shifted by ``shift`` (``relative_gap``); the norms
    before and after rotating (``norm_gap``); the halves pairing against the adjacent one
    (``pairings_gap``: how far apart) and against the adjacent one on permuted coordinates
    (``permuted_gap``: the same up to the permutation); the slowest and fastest pair's period in
    positions. Each gap is checked where the page says it is a rounding error."""
    generator = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(length, d_head, generator=generator, dtype=torch.float64) for _repeat in range(2))
    positions = torch.arange(length)
    near = apply_rotary(q, positions, base) @ apply_rotary(k, positions, base).T
    far = apply_rotary(q, positions + shift, base) @ apply_rotary(k, positions + shift, base).T
    rotated = apply_rotary(q, positions, base)
    perm = halves_to_adjacent(d_head)
    inverse = torch.argsort(perm)
    halves = halves_rotary(q, positions, base)
    via_adjacent = apply_rotary(q[..., perm], positions, base)[..., inverse]
    facts = {
        "d_head": d_head, "shift": shift, "length": length, "base": base,
        "relative_gap": float((near - far).abs().max()),
        "score_size": float(near.abs().max()),
        "norm_gap": float((rotated.norm(dim=-1) - q.norm(dim=-1)).abs().max()),
        "pairings_gap": float((halves - rotated).abs().max()),
        "permuted_gap": float((halves - via_adjacent).abs().max()),
        "fastest_period": 2 * math.pi,
        "slowest_period": 2 * math.pi * base ** ((d_head - 2) / d_head),
    }
    if facts["relative_gap"] > 1e-9 * facts["score_size"] or facts["norm_gap"] > 1e-12 or facts["permuted_gap"] > 1e-12:
        raise AssertionError(f"rotary positions do not behave as the page says: {facts}")
    if facts["pairings_gap"] < 0.1:
        raise AssertionError("the two pairings gave the same rotation without the permutation")
    return facts


def describe_rotary(facts: dict) -> str:
    """:func:`rotary_facts` as the page prints it."""
    return "\n".join([
        _("d_head = {d}, base = {base:g}: pair 0 turns by 1 radian per position,", d=facts["d_head"],
          base=facts["base"]),
        "  " + _("a full turn every {fast:.1f} positions; the last pair by {slow:.2e} radians,",
                 fast=facts["fastest_period"], slow=2 * math.pi / facts["slowest_period"]),
        "  " + _("a full turn every {turn:,.0f} positions", turn=facts["slowest_period"]),
        _("scores q_t . k_s at positions 0 .. {last} and at {shift:,} .. {shift_last:,}:", last=facts["length"] - 1,
          shift=facts["shift"], shift_last=facts["shift"] + facts["length"] - 1),
        "  " + _("largest difference {gap:.1e} (scores up to {size:.1f})", gap=facts["relative_gap"],
                 size=facts["score_size"]),
        _("lengths after and before rotating: largest difference {gap:.1e}", gap=facts["norm_gap"]),
        _("halves pairing against adjacent pairs: up to {gap:.2f} apart;", gap=facts["pairings_gap"]),
        "  " + _("against adjacent pairs on the permuted coordinates: {gap:.1e}", gap=facts["permuted_gap"]),
    ])


@torch.no_grad()
def plot_rotary_scores(d_head: int = 64, length: int = 48, base: float = 10000.0, seed: int = 0):
    """Figure: the scores ``q_t . k_s`` of ONE query vector ``q`` and ONE key vector ``k``, each
    rotated by the reference ``apply_rotary`` to every position ``0 .. length - 1``: as chapter 5's
    ``P_t . P_s``, constant along the diagonals."""
    generator = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(d_head, generator=generator, dtype=torch.float64) for _repeat in range(2))
    # the same vector at every position, so that only the positions differ; a shared part makes the pattern visible
    q, k = q + 1.0, k + 1.0
    positions = torch.arange(length)
    scores = (apply_rotary(q.expand(length, d_head), positions, base)
              @ apply_rotary(k.expand(length, d_head), positions, base).T).numpy()
    fig, ax = plt.subplots(figsize=(4.6, 3.9))
    image = ax.imshow(scores, cmap="viridis", aspect="auto")
    ax.set_xlabel(_("key position s"))
    ax.set_ylabel(_("query position t"))
    ax.set_title(_("rotated q_t · k_s, d_head = {d}", d=d_head), fontsize=LABEL)
    fig.colorbar(image, ax=ax, shrink=0.8)
    fig.tight_layout()
    spread = max(float(np.ptp(np.diagonal(scores, offset))) for offset in range(-length + 1, length))
    if spread > 1e-9 * float(np.abs(scores).max()):
        raise AssertionError(f"the rotated scores differ along a diagonal by {spread}")
    return finding(fig, _("The scores of one query vector and one key vector rotated to every position are the same "
                          "along each diagonal (at most {spread:.1e} apart): they depend on t − s only. At t = s the "
                          "score is {same:.1f}, the unrotated q · k; at a distance of 1 it is {one:.1f}, of 10 "
                          "{ten:.1f}.", spread=spread, same=float(scores[0, 0]), one=float(scores[1, 0]),
                          ten=float(scores[10, 0])))


# --------------------------------------------------------------------------------------
# The attention-only model: its training, with every head's scores at every step
# --------------------------------------------------------------------------------------


def _period_and_vocab(recipe) -> tuple[int, int]:
    return int(recipe.training["period"]), int(recipe.model["vocab_size"])


def induction_run(recipe=INDUCTION, seed: int = 0, every: int = 10, probe_size: int = 64, eval_size: int = 256,
                  device=None) -> dict:
    """The chapter's attention-only model (the reference ``AttentionOnlyTransformer`` of the
    recipe's sizes), trained by ``train_induction_model`` from the recipe. Every ``every`` steps the
    loop's callback probes the model, without gradients, on one fixed batch of ``probe_size``
    sequences of the recipe's ``period`` (the training batches' periods vary, so their own losses
    are not comparable from step to step): the losses on the repeat and on the first half, and
    every head's scores by the reference ``head_scores``. Afterwards, on ``eval_size`` fresh
    sequences (the model in eval mode): every head's scores and ``find_heads``' two heads.

    Returns ``model``, ``history``, ``probe`` (``step``, ``repeat``, ``first_half``: lists;
    ``previous``, ``induction``: float tensors ``(probes, layers, heads)``), ``final_previous``,
    ``final_induction`` (``(layers, heads)``), ``previous_head`` and ``induction_head`` ((layer,
    head)), ``period``, ``vocab_size``, ``tokens`` (the evaluation sequences) and ``cpu_seconds``
    (the training's own, the probes' CPU time taken out: ``probe_cpu_seconds``). The training runs
    on ``device`` (the loop's default: the model's, the CPU); the model is then brought back to
    the CPU, where everything after the training runs."""
    period, vocab = _period_and_vocab(recipe)
    torch.manual_seed(seed)
    model = AttentionOnlyTransformer(**recipe.model)
    probe_tokens = repeated_tokens(probe_size, period, vocab, torch.Generator().manual_seed(seed + 2), device)
    probe = {"step": [], "repeat": [], "first_half": [], "previous": [], "induction": []}
    probing = [0.0]

    @torch.no_grad()
    def record(step, _patterns):
        if step % every and step != 1:
            return
        start = time.process_time()
        logits, patterns = model(probe_tokens)
        prev, ind = head_scores(patterns.mean(dim=1), period)  # (layers, heads) each
        probe["step"].append(step)
        probe["repeat"].append(float(repeat_loss(logits, probe_tokens, period)))
        probe["first_half"].append(float(first_half_loss(logits, probe_tokens, period)))
        probe["previous"].append(prev)
        probe["induction"].append(ind)
        probing[0] += time.process_time() - start

    training = {name: value for name, value in recipe.training.items() if name not in ("period", "vocab_size")}
    history = train_induction_model(model, period, vocab, seed=seed, progress=False, callback=record, device=device,
                                    **training)
    probe["previous"], probe["induction"] = (torch.stack(probe[name]).cpu() for name in ("previous", "induction"))
    model.cpu().eval()
    tokens = repeated_tokens(eval_size, period, vocab, torch.Generator().manual_seed(seed + 1))
    with torch.no_grad():
        _logits, patterns = model(tokens)
    final_previous, final_induction = head_scores(patterns.mean(dim=1), period)
    previous_head, induction_head = find_heads(final_previous, final_induction)
    return {"model": model, "history": history, "probe": probe, "final_previous": final_previous,
            "final_induction": final_induction, "previous_head": previous_head, "induction_head": induction_head,
            "period": period, "min_period": recipe.training.get("min_period", period), "vocab_size": vocab,
            "tokens": tokens, "cpu_seconds": history["cpu_seconds"] - probing[0], "probe_cpu_seconds": probing[0],
            "every": every, "probe_size": probe_size}


def describe_run(run: dict) -> str:
    """The run's sizes, its time and its last validation losses against chance."""
    history, model = run["history"], run["model"]
    return "\n".join([
        _("{layers} layers of {heads} heads, d_model = {d}, {params:,} parameters;", layers=len(model.layers),
          heads=model.layers[0].num_heads, d=model.embed.embedding_dim,
          params=sum(p.numel() for p in model.parameters())),
        "  " + _("a vocabulary of {vocab} tokens, period {period} (sequences of {T})", vocab=run["vocab_size"],
                 period=run["period"], T=2 * run["period"]),
        _("{steps} steps, each batch's period drawn from {low} to {high}", steps=history["steps_done"],
          low=run["min_period"], high=run["period"]),
        _("training: {cpu:.1f} s of CPU on {device}; probes every {every} steps: {probe:.1f} s",
          cpu=run["cpu_seconds"], device=history["device"], every=run["every"], probe=run["probe_cpu_seconds"]),
        _("held-out loss on the repeat: {repeat:.3f} nats, on the first half: {first:.3f};",
          repeat=history["valid_repeat_loss"][-1], first=history["valid_first_half_loss"][-1]),
        "  " + _("chance ln V = {chance:.3f}", chance=history["chance"]),
    ])


def phase_change(run: dict, part: int = 8) -> dict:
    """Where the probed loss on the repeat falls (:func:`induction_run`'s probes): ``start`` (the
    first probe) and ``end`` (the last); the ``jump`` step (the first probe at which the loss is
    half-way down); the ``1 / part`` of the run in which it falls the most (``fall_from`` to
    ``fall_to``) and that fall's share of the whole (``fall_share``); the induction head's score at
    the first and last probe and the step at which it first reaches half-way (``score_jump``); the
    first half's loss at the first and last probe and its lowest (``first_half_low``). Checked: what
    the page says of the figure (at least half of the fall within that part of the run, the score
    half-way within a tenth of the run of the loss, the first half never clearly below the best its
    random tokens allow, ``first_half_best``)."""
    probe = run["probe"]
    steps, loss = np.asarray(probe["step"]), np.asarray(probe["repeat"])
    start, end = float(loss[0]), float(loss[-1])
    if not start - end > 0.5:
        raise AssertionError(f"the repeat's loss did not fall (from {start:.2f} to {end:.2f})")

    def reached(values, fraction, first, last):  # the first probe's step at which values came `fraction` of the way
        return int(steps[int(np.argmax((values - first) / (last - first) >= fraction))])

    total = run["history"]["steps_done"]
    # the probes i < j at most total / part steps apart between which the loss falls the most
    length = total // part
    falls = [(float(loss[i] - loss[j]), i, j) for i in range(len(steps)) for j in range(i + 1, len(steps))
             if steps[j] - steps[i] <= length]
    fall, i, j = max(falls)
    layer, head = run["induction_head"]
    score = probe["induction"][:, layer, head].numpy()
    change = {"start": start, "end": end, "jump": reached(loss, 0.5, start, end), "steps": total, "part": part,
              "fall_from": int(steps[i]), "fall_to": int(steps[j]), "fall": fall, "fall_share": fall / (start - end),
              "score_start": float(score[0]), "score_end": float(score[-1]),
              "score_jump": reached(score, 0.5, float(score[0]), float(score[-1])),
              "first_half_start": probe["first_half"][0], "first_half_end": probe["first_half"][-1],
              "first_half_low": min(probe["first_half"]), "chance": run["history"]["chance"],
              # the first half's tokens are distinct: a model that tracks what it has seen can reach ln(V - t - 1)
              "first_half_best": float(np.mean([math.log(run["vocab_size"] - t - 1) for t in range(run["period"] - 1)]))}
    if change["fall_share"] < 0.5 or abs(change["score_jump"] - change["jump"]) > total // 10 or \
            change["first_half_low"] < change["first_half_best"] - 0.1:
        raise AssertionError(f"the run shows no phase change as the page describes it: {change}")
    return change


def describe_phase_change(change: dict) -> str:
    """:func:`phase_change` in words."""
    return "\n".join([
        _("loss on the repeat: {start:.2f} nats at the start, {end:.3f} at the end (chance {chance:.2f})",
          start=change["start"], end=change["end"], chance=change["chance"]),
        _("half-way down at step {jump} of {steps};", jump=change["jump"], steps=change["steps"]),
        "  " + _("steps {a} to {b} (1/{part} of the run) hold {share:.0%} of the fall ({fall:.2f} nats)",
                 a=change["fall_from"], b=change["fall_to"], part=change["part"], share=change["fall_share"],
                 fall=change["fall"]),
        _("the induction head's score: {first:.2f} at the start, {last:.2f} at the end,", first=change["score_start"],
          last=change["score_end"]),
        "  " + _("half-way at step {step}", step=change["score_jump"]),
        _("loss on the first half: {first:.2f} at the start, {last:.2f} at the end,", first=change["first_half_start"],
          last=change["first_half_end"]),
        "  " + _("never below {low:.2f} (the best its distinct random tokens allow: {best:.2f})",
                 low=change["first_half_low"], best=change["first_half_best"]),
    ])


def _head_name(layer_head) -> str:
    layer, head = layer_head
    return _("layer {layer}, head {head}", layer=layer, head=head)


def plot_phase_change(run: dict, change: dict):
    """Figure: left, the probed losses on the repeat and on the first half over training, with
    chance; right, the induction head's and the previous-token head's scores at the same probes;
    the jump marked in both."""
    probe = run["probe"]
    steps = probe["step"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(WIDTH, 3.3), constrained_layout=True)
    left.plot(steps, probe["repeat"], color="#1f4e9c", linewidth=2.0, label=_("second half (the repeat)"))
    left.plot(steps, probe["first_half"], color="#c0392b", linestyle="--", linewidth=1.6,
              label=_("first half (random)"))
    left.axhline(change["chance"], color="#555555", linestyle=":", linewidth=1.2, label=_("chance, ln V"))
    left.set_ylabel(_("loss (nats)"), fontsize=SMALLEST)
    left.set_title(_("next-token loss"), fontsize=LABEL)
    (il, ih), (pl, ph) = run["induction_head"], run["previous_head"]
    right.plot(steps, probe["induction"][:, il, ih].numpy(), color="#1f4e9c", linewidth=2.0,
               label=_("induction score, {name}", name=_head_name(run["induction_head"])))
    right.plot(steps, probe["previous"][:, pl, ph].numpy(), color="#7d5a00", linestyle="--", linewidth=1.6,
               label=_("previous-token score, {name}", name=_head_name(run["previous_head"])))
    right.set_ylim(0, 1.02)
    right.set_ylabel(_("attention weight"), fontsize=SMALLEST)
    right.set_title(_("the two heads' scores"), fontsize=LABEL)
    for ax in (left, right):
        ax.axvline(change["jump"], color="#888888", linewidth=1.0)
        ax.set_xlabel(_("training step"), fontsize=SMALLEST)
        ax.tick_params(labelsize=SMALLEST)
        ax.legend(fontsize=SMALLEST - 1, loc="center right")
    return finding(fig, _("The loss on the repeat starts near chance ({start:.2f} nats) and ends at {end:.3f}; "
                          "{share:.0%} of its fall comes between steps {a} and {b}, half-way down at step {jump}. The "
                          "loss on the first half never goes below {low:.2f} (chance {chance:.2f}; the best its "
                          "random tokens allow {best:.2f}). The induction "
                          "head's score rises from {s0:.2f} to {s1:.2f} at the same time, half-way at step "
                          "{score_jump}.", start=change["start"], end=change["end"], share=change["fall_share"],
                          a=change["fall_from"], b=change["fall_to"], jump=change["jump"], low=change["first_half_low"],
                          chance=change["chance"], best=change["first_half_best"], s0=change["score_start"],
                          s1=change["score_end"], score_jump=change["score_jump"]))


# --------------------------------------------------------------------------------------
# The two heads' patterns; the repeat at other periods
# --------------------------------------------------------------------------------------


def describe_heads(run: dict) -> str:
    """Every head's two scores after training (fresh sequences), and which is which."""
    layers, heads = run["final_induction"].shape
    head, previous, induction = padded(_("head"), 18), padded(_("previous-token"), 16, ">"), padded(_("induction"), 12, ">")
    lines = [f"{head}{previous}{induction}"]
    for layer in range(layers):
        for h in range(heads):
            lines.append(f"{padded(_head_name((layer, h)), 18)}{float(run['final_previous'][layer, h]):16.2f}"
                         f"{float(run['final_induction'][layer, h]):12.2f}")
    lines.append(_("previous-token head: {prev}; induction head: {ind}", prev=_head_name(run["previous_head"]),
                   ind=_head_name(run["induction_head"])))
    return "\n".join(lines)


@torch.no_grad()
def plot_two_heads(run: dict, example: int = 0):
    """Figure: the patterns of the previous-token head and of the induction head on one sequence of
    the evaluation batch (query positions down, key positions across), the repeat's start marked."""
    tokens = run["tokens"][example:example + 1]
    period = run["period"]
    _logits, patterns = run["model"](tokens)
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 3.9), constrained_layout=True)
    T = 2 * period
    facts = []
    for ax, which, title in ((axes[0], run["previous_head"], _("previous-token head")),
                             (axes[1], run["induction_head"], _("induction head"))):
        layer, head = which
        pattern = patterns[layer, 0, head].numpy()
        ax.imshow(pattern, cmap="Blues", vmin=0, vmax=1)
        ax.set_title(_("{title} ({name})", title=title, name=_head_name(which)), fontsize=LABEL)
        ax.set_xlabel(_("key position"), fontsize=SMALLEST)
        ax.set_xticks([0, period, T - 1])
        ax.set_yticks([0, period, T - 1])
        ax.axhline(period - 0.5, color="#c0392b", linestyle="--", linewidth=0.8)
        ax.axvline(period - 0.5, color="#c0392b", linestyle="--", linewidth=0.8)
        ax.tick_params(labelsize=SMALLEST)
        facts.append(pattern.argmax(axis=1))
    axes[0].set_ylabel(_("query position"), fontsize=SMALLEST)
    fig.suptitle(_("one sequence of {T} tokens, the second half a repeat of the first (dashed lines: where it starts)",
                   T=T), fontsize=LABEL)
    previous = int((facts[0][1:] == np.arange(T - 1)).sum())
    repeat = np.arange(period, T)
    twin = int((facts[1][period:] == repeat - period + 1).sum())
    if previous < (T - 1) / 2 or twin < period / 2:  # what the page says: an offset diagonal and a stripe
        raise AssertionError(f"the heads' patterns are not the page's: {previous} of {T - 1} queries peak on the "
                             f"previous position, {twin} of {period} on the position after the earlier twin")
    return finding(fig, _("Left, the previous-token head: {previous} of the {queries} queries after the first put "
                          "their largest weight on the position just before them, an offset diagonal. Right, the "
                          "induction head: in the repeat, {twin} of its {repeat} queries put theirs on the position "
                          "after their token's earlier twin, a stripe {offset} positions below the diagonal.",
                          previous=previous, queries=T - 1, twin=twin, repeat=period, offset=period - 1))


@torch.no_grad()
def other_periods(run: dict, periods=(4, 8, 12), size: int = 256, seed: int = 7) -> list[dict]:
    """The trained model's loss on the repeat of sequences of other periods than the one it was
    trained on (fresh sequences): a head that matches tokens copies whatever the period, one that
    only learned a fixed offset does not."""
    rows = []
    for period in periods:
        tokens = repeated_tokens(size, period, run["vocab_size"], torch.Generator().manual_seed(seed + period))
        logits, _patterns = run["model"](tokens)
        rows.append({"period": period, "loss": float(repeat_loss(logits, tokens, period))})
    return rows


def describe_other_periods(run: dict, rows: list[dict]) -> str:
    """:func:`other_periods`' losses against the trained period's and chance, and the verdict."""
    lines = [_("period {period} (trained): loss on the repeat {loss:.3f}", period=run["period"],
               loss=run["history"]["valid_repeat_loss"][-1])]
    lines += [_("period {period}: {loss:.3f}", period=r["period"], loss=r["loss"]) for r in rows]
    chance = run["history"]["chance"]
    copied = [r["period"] for r in rows if r["loss"] < chance / 2]
    if len(copied) == len(rows):
        lines.append(_("every period is copied, below half of chance ({half:.2f}):", half=chance / 2))
        lines.append("  " + _("the heads match tokens"))
    elif copied:
        lines.append(_("copied below half of chance ({half:.2f}) at periods {periods} only",
                       half=chance / 2, periods=", ".join(map(str, copied))))
    else:
        lines.append(_("no other period is copied (all above half of chance, {half:.2f}):", half=chance / 2))
        lines.append("  " + _("the model learned the trained period's offset, not the tokens"))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Ablation
# --------------------------------------------------------------------------------------


def ablation(run: dict, role: float = 0.5) -> dict:
    """The reference ``ablation_losses`` on the evaluation sequences: the repeat's loss with no head
    removed (``baseline``) and with each head's output zeroed in turn (``losses (layers, heads)``).
    Then, since two heads may share a role, the loss with every head of a role zeroed at once
    (``together``: for ``"previous"`` and ``"induction"``, the heads whose score for that role is at
    least ``role``, and the loss), through the model's ``head_mask``."""
    model, tokens, period = run["model"], run["tokens"], run["period"]
    with _one_thread():
        baseline, losses = ablation_losses(model, tokens, period)
        together = {}
        for name, scores in (("previous", run["final_previous"]), ("induction", run["final_induction"])):
            heads = [(l, h) for l in range(scores.shape[0]) for h in range(scores.shape[1]) if scores[l, h] >= role]
            mask = torch.ones(scores.shape)
            for l, h in heads:
                mask[l, h] = 0.0
            with torch.no_grad():
                together[name] = {"heads": heads, "loss": float(repeat_loss(model(tokens, head_mask=mask)[0], tokens, period))}
    return {"baseline": baseline, "losses": losses, "chance": run["history"]["chance"], "together": together,
            "role": role, "previous_head": run["previous_head"], "induction_head": run["induction_head"]}


def ablation_table(result: dict) -> str:
    """The repeat's loss with each head removed, and how much of the way back to chance it goes."""
    head, loss, towards = padded(_("head removed"), 18), padded(_("loss"), 8, ">"), padded(_("towards chance"), 16, ">")
    lines = [f"{head}{loss}{towards}"]
    span = result["chance"] - result["baseline"]
    none = padded(_("none"), 18)
    lines.append(f"{none}{result['baseline']:8.3f}{0:16.0%}")
    layers, heads = result["losses"].shape
    for layer in range(layers):
        for h in range(heads):
            loss = float(result["losses"][layer, h])
            lines.append(f"{padded(_head_name((layer, h)), 18)}{loss:8.3f}{(loss - result['baseline']) / span:16.0%}")
    lines.append(_("chance ln V = {chance:.3f}", chance=result["chance"]))
    return "\n".join(lines)


def _ablation_facts(result: dict) -> dict:
    losses, span = result["losses"], result["chance"] - result["baseline"]
    found = {result["previous_head"], result["induction_head"]}
    others = [float(losses[l, h]) for l in range(losses.shape[0]) for h in range(losses.shape[1]) if (l, h) not in found]
    share = lambda loss: (loss - result["baseline"]) / span  # noqa: E731
    return {"previous": share(float(losses[result["previous_head"]])),
            "induction": share(float(losses[result["induction_head"]])),
            "others": share(max(others)) if others else None,
            "worst_other": max(others) if others else None}


def describe_ablation(result: dict) -> str:
    """What removing the two heads, the others, and each role's heads together does: the share of the
    way back to chance."""
    facts = _ablation_facts(result)
    span = result["chance"] - result["baseline"]
    lines = [_("without the previous-token head ({name}): {share:.0%} of the way to chance",
               name=_head_name(result["previous_head"]), share=facts["previous"]),
             _("without the induction head ({name}): {share:.0%}", name=_head_name(result["induction_head"]),
               share=facts["induction"])]
    if facts["others"] is not None:
        lines.append(_("without any other single head: at most {share:.0%} (a loss of {loss:.3f})",
                       share=facts["others"], loss=facts["worst_other"]))
    for role, title in (("previous", _("previous-token")), ("induction", _("induction"))):
        group = result["together"][role]
        if len(group["heads"]) > 1:
            lines.append(_("without the {n} heads whose {role} score is {at:.1f} or more, together:",
                           n=len(group["heads"]), role=title, at=result["role"]))
            lines.append("  " + _("{names}: {share:.0%}", names="; ".join(_head_name(h) for h in group["heads"]),
                                  share=(group["loss"] - result["baseline"]) / span))
    return "\n".join(lines)


def plot_ablation(result: dict):
    """Figure: one bar per head, the repeat's loss with that head's output zeroed, then one bar per
    role that several heads share, all of them zeroed together; the loss of the whole model and
    chance as levels; the two heads the scores found, and the groups, hatched."""
    losses = result["losses"]
    layers, heads = losses.shape
    bars = [(f"L{l} H{h}", float(losses[l, h]), (l, h) in {result["previous_head"], result["induction_head"]})
            for l in range(layers) for h in range(heads)]
    for role in ("previous", "induction"):
        group = result["together"][role]
        if len(group["heads"]) > 1:
            bars.append(("\n+ ".join(f"L{l} H{h}" for l, h in group["heads"]), group["loss"], True))
    fig, ax = plt.subplots(figsize=(WIDTH * 0.8, 3.3), constrained_layout=True)
    drawn = ax.bar(range(len(bars)), [value for _name, value, _found in bars], color="#9db4d9", edgecolor="#333333")
    for bar, (_name, _value, found) in zip(drawn, bars):
        if found:
            bar.set_hatch("//")
            bar.set_facecolor("#1f4e9c")
    ax.axhline(result["chance"], color="#555555", linestyle=":", linewidth=1.2, label=_("chance, ln V"))
    ax.axhline(result["baseline"], color="#c0392b", linestyle="--", linewidth=1.2, label=_("no head removed"))
    ax.set_ylim(0, 1.3 * result["chance"])
    ax.set_xticks(range(len(bars)), [name for name, _value, _found in bars])
    ax.set_xlabel(_("heads removed (L: layer, H: head)"), fontsize=SMALLEST)
    ax.set_ylabel(_("loss on the repeat (nats)"), fontsize=SMALLEST)
    ax.set_title(_("each head's output zeroed in turn, then each role's heads together"), fontsize=LABEL)
    ax.tick_params(labelsize=SMALLEST - 1)
    ax.legend(fontsize=SMALLEST - 1, loc="upper left", ncols=2)
    facts = _ablation_facts(result)
    others = (_("Removing any other head alone takes it at most {share:.0%} of the way.", share=facts["others"])
              if facts["others"] is not None else "")
    span = result["chance"] - result["baseline"]
    groups = " ".join(
        _("Removing the {n} heads whose {role} score is {at:.1f} or more together takes it {share:.0%} of the way.",
          n=len(group["heads"]), role=title, at=result["role"], share=(group["loss"] - result["baseline"]) / span)
        for role, title in (("previous", _("previous-token")), ("induction", _("induction")))
        for group in [result["together"][role]] if len(group["heads"]) > 1)
    return finding(fig, _("With every head the loss on the repeat is {base:.3f} nats (chance {chance:.2f}). Removing "
                          "the previous-token head ({prev}) takes it {p:.0%} of the way back to chance, removing the "
                          "induction head ({ind}) {i:.0%}. {others} {groups}", base=result["baseline"],
                          chance=result["chance"], prev=_head_name(result["previous_head"]), p=facts["previous"],
                          ind=_head_name(result["induction_head"]), i=facts["induction"], others=others,
                          groups=groups).strip())


# --------------------------------------------------------------------------------------
# Generation far past the training length: chapter 9's window, this chapter's positions
# --------------------------------------------------------------------------------------


class WindowedModel(nn.Module):
    """A trained ``AttentionOnlyTransformer`` called as chapters 8 and 9's generation functions call
    a model: ``forward(tokens, attn_mask=None, past_kv=None, positions=None, padding_mask=None) ->
    (logits, present_kv)``, ``past_kv`` and ``present_kv`` one ``(K, V)`` per layer (the keys already
    rotated). The same residual stream as the model's own forward (embed, ``x + layer(x)``, unembed),
    each layer given the mask, its cache and the positions; checked against ``model(tokens)`` when
    built."""

    def __init__(self, model: nn.Module, check: torch.Tensor | None = None):
        super().__init__()
        self.model = model
        if check is not None:
            with torch.no_grad():
                gap = float((self(check)[0] - model(check)[0]).abs().max())
            if gap > 1e-5:
                raise AssertionError(f"the windowed model differs from the model by {gap}")

    def forward(self, tokens, attn_mask=None, past_kv=None, positions=None, padding_mask=None):
        if padding_mask is not None:
            raise ValueError("this model has no padding")
        x = self.model.embed(tokens)
        present = []
        for i, layer in enumerate(self.model.layers):
            y, kv = layer(x, attn_mask=attn_mask, past_kv=None if past_kv is None else past_kv[i], positions=positions)
            x = x + y
            present.append(kv)
        return self.model.unembed(x), present


class _CacheWatch(nn.Module):
    """``model`` as it is, recording the cache's length and the largest position of every call."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model, self.lengths, self.positions = model, [], []

    def forward(self, tokens, **kwargs):
        past = kwargs.get("past_kv")
        self.lengths.append(0 if past is None else past[0][0].shape[2])
        if kwargs.get("positions") is not None:
            self.positions.append(int(kwargs["positions"].max()))
        return self.model(tokens, **kwargs)


@torch.no_grad()
def window_generation(run: dict, times: int = 10, window: int | None = None, shift: int = 1_000_000,
                      prompts: int = 8, seed: int = 3) -> dict:
    """Greedy generation by the trained model from prompts of the training length (``prompts``
    sequences of :func:`~attention_course.induction.repeated_tokens`: ``period`` distinct tokens and
    their repeat), continuing the repeat for
    ``times`` training lengths: with chapter 9's ``generate_with_window`` (window ``window``, by
    default the period: the smallest that holds the position after a token's earlier twin) and
    rolling cache, and with chapter 8's ``generate`` (a cache that grows, every earlier position
    attended). For each: the share of new tokens that continue the repeat (``correct``, and over
    the last training length alone, ``last``), the most positions a layer's cache held, and (the
    window) the largest position read. ``shift_gap``: the largest difference between the model's
    logits on one window of tokens at positions ``0 ..`` and at ``shift ..`` (the same relative
    positions)."""
    period, vocab = run["period"], run["vocab_size"]
    window = window or period
    length = 2 * period
    # distinct tokens and their repeat (repeated_tokens): every token has one earlier twin per period
    prompt = repeated_tokens(prompts, period, vocab, torch.Generator().manual_seed(seed))
    new = times * length - length
    truth = prompt[:, :period].repeat(1, times * 2)  # the repeat, continued
    model = WindowedModel(run["model"], check=prompt)
    results = {}
    with _one_thread():  # a model this small: one thread is faster, and fights no other process
        for name in ("window", "full"):
            watched = _CacheWatch(model)
            if name == "window":
                tokens, _logits = generate_with_window(watched, prompt, new, window)
            else:
                tokens = generate(watched, prompt, new)
            right = tokens[:, length:] == truth[:, length:]
            results[name] = {"correct": float(right.float().mean()), "last": float(right[:, -length:].float().mean()),
                             "cache_max": max(watched.lengths),
                             "position_max": max(watched.positions, default=length - 1)}
    # the same window of tokens, its positions far away: the logits depend on relative positions only
    piece = truth[:, :window]
    near = model(piece, positions=torch.arange(window))[0]
    far = model(piece, positions=torch.arange(shift, shift + window))[0]
    shift_gap = float((near - far).abs().max())
    return {"period": period, "window": window, "length": length, "total": times * length, "new": new,
            "prompts": prompts, "times": times, "shift": shift, "shift_gap": shift_gap,
            "logit_size": float(near.abs().max()), **{f"{k}_{n}": v for n, r in results.items() for k, v in r.items()}}


def describe_window_generation(result: dict) -> str:
    """:func:`window_generation` as the page prints it."""
    def continued(name):
        return "  " + _("{correct:.1%} of the new tokens continue the repeat, {last:.1%} of the last {length};",
                        correct=result[f"correct_{name}"], last=result[f"last_{name}"], length=result["length"])

    return "\n".join([
        _("{prompts} prompts of the training length, {length} tokens", prompts=result["prompts"],
          length=result["length"]),
        "  " + _("({period} different tokens and their repeat);", period=result["period"]),
        "  " + _("{new} new tokens each, to {total} ({times} times the training length)", new=result["new"],
                 total=result["total"], times=result["times"]),
        _("window W = {W} and a rolling cache (chapter 9):", W=result["window"]),
        continued("window"),
        "  " + _("at most {cache} positions per layer in the cache; the last position read: {position}",
                 cache=result["cache_max_window"], position=result["position_max_window"]),
        _("no window, a growing cache (chapter 8):"),
        continued("full"),
        "  " + _("the cache grows to {cache} positions", cache=result["cache_max_full"]),
        _("with the window, {better:.1f} points more of the new tokens continue the repeat",
          better=100 * (result["correct_window"] - result["correct_full"]))
        if result["correct_window"] > result["correct_full"] else
        _("without the window, as many of the new tokens continue the repeat, or more"),
        _("one window of tokens at positions 0 .. {last} and at {shift:,} .. {shift_last:,}:", last=result["window"] - 1,
          shift=result["shift"], shift_last=result["shift"] + result["window"] - 1),
        "  " + _("logits differ by at most {gap:.1e} (logits up to {size:.1f})", gap=result["shift_gap"],
                 size=result["logit_size"]),
    ])
