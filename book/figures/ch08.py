"""Figures and demonstrations of chapter 8's book page, *From the decoder to a small GPT*.

The layers, the decoding functions and the model are in :mod:`attention_course.reference.ch08`
(generated from the chapter's solution notebook); this module only uses them: it works the
decoding rules through on hand-made distributions (checking the page's hand-computed values,
so that a slip in the page's arithmetic stops the build), counts and measures the work of
generation with and without the key-value cache, draws the decoder-only block and the cache,
and trains the model on chapter 3's dates next to chapter 7's Transformer.
Conventions are the course's: batch first, boolean masks with ``True`` = may attend.
"""

from __future__ import annotations

import itertools
import math
import time

import torch
from torch import nn

from attention_course.prompts import SEP, PromptTask, complete_prompts, train_prompt_model
from attention_course.recipes import DECODER_ONLY
from attention_course.reference.ch08 import GPT, beam_search, generate, top_k_top_p_filter
from attention_course.seq2seq import exact_match
from figures.diagrams import LABEL, SHAPE, SMALLEST, WIDTH, _arrow, _box, _canvas, _repeat
from figures.describe import finding
from figures.i18n import _, padded

__all__ = [
    "WORDS",
    "PROBS",
    "decoding_rules",
    "rules_table",
    "top_k_against_top_p",
    "kept_table",
    "TableModel",
    "describe_top_k_top_p",
    "beam_search_grid",
    "sequence_table",
    "beam_table",
    "describe_beam",
    "attention_work",
    "work_table",
    "TIMED",
    "cache_memory",
    "cache_memory_table",
    "generation_speed",
    "speed_table",
    "describe_speed",
    "parameter_counts",
    "describe_tying",
    "embedding_sizes",
    "describe_embedding_sizes",
    "DATES_GPT",
    "make_date_gpt",
    "DATES_RECIPE",
    "describe_prompt",
    "train_date_gpt",
    "describe_gpt_training",
    "gpt_held_out_exact_match",
    "answer_step_by_step",
    "steps_table",
    "describe_comparison",
    "describe_steps",
    "beam_answer",
    "answer_log_probability",
    "compare_answers",
    "draw_decoder_only",
    "draw_kv_cache",
]

# --------------------------------------------------------------------------------------
# Decoding rules on a hand-made distribution
# --------------------------------------------------------------------------------------

#: The next-word distribution the page works by hand (five words, probabilities that a
#: reader can renormalise in their head); the logits are their logarithms.
WORDS = ("cat", "dog", "bird", "fish", "newt")
PROBS = (0.5, 0.2, 0.15, 0.1, 0.05)

#: What the page computes by hand (4 decimals), one row per rule; ``0`` = not kept.
BY_HAND = {
    "softmax (temperature 1)": [0.5, 0.2, 0.15, 0.1, 0.05],
    "temperature 0.5": [0.7692, 0.1231, 0.0692, 0.0308, 0.0077],
    "temperature 2": [0.3397, 0.2149, 0.1861, 0.1519, 0.1074],
    "top-k 2": [0.7143, 0.2857, 0.0, 0.0, 0.0],
    "top-p 0.6": [0.7143, 0.2857, 0.0, 0.0, 0.0],
    "top-p 0.8": [0.5882, 0.2353, 0.1765, 0.0, 0.0],
}

RULES = {  # name: (temperature, top_k, top_p)
    _("softmax (temperature 1)"): (1.0, None, None),
    _("temperature 0.5"): (0.5, None, None),
    _("temperature 2"): (2.0, None, None),
    "top-k 2": (1.0, 2, None),
    "top-p 0.6": (1.0, None, 0.6),
    "top-p 0.8": (1.0, None, 0.8),
}


def _distribution(logits: torch.Tensor, temperature: float, top_k, top_p) -> torch.Tensor:
    """The distribution ``sample_next_token`` draws from: the reference filter applied to
    ``logits / temperature``, then a softmax (tokens outside the kept set get 0)."""
    return torch.softmax(top_k_top_p_filter(logits / temperature, top_k=top_k, top_p=top_p), dim=-1)


def _check(name: str, computed: torch.Tensor, by_hand) -> None:
    expected = torch.tensor(by_hand, dtype=computed.dtype)
    if not torch.allclose(computed, expected, atol=6e-5):
        raise AssertionError(f"the page's hand-computed {name} {by_hand} disagree with the code's "
                             f"{[round(v, 4) for v in computed.tolist()]}")


def decoding_rules(probs=PROBS) -> dict[str, list[float]]:
    """The distribution each rule of :data:`RULES` leaves from ``probs`` (logits = their
    logarithms), computed with the reference ``top_k_top_p_filter``, checked against an
    independent formula (``p ** (1/T)`` renormalised; the kept set renormalised) and, for
    the page's own distribution, against :data:`BY_HAND`. Returns ``{rule: probabilities}``."""
    p = torch.tensor(probs, dtype=torch.float64)
    logits = p.log()
    result = {}
    for name, (temperature, top_k, top_p) in RULES.items():
        got = _distribution(logits, temperature, top_k, top_p)
        # independent: sharpen or flatten, then keep the top tokens of the rule and renormalise
        q = p ** (1 / temperature)
        q = q / q.sum()
        order = torch.argsort(-q, stable=True)
        keep = len(q) if top_k is None else top_k
        if top_p is not None:
            before = torch.cumsum(q[order], 0) - q[order]
            keep = min(keep, int((before < top_p).sum()))
        kept = torch.zeros_like(q)
        kept[order[:keep]] = q[order[:keep]]
        kept = kept / kept.sum()
        if not torch.allclose(got, kept, atol=1e-12):
            raise AssertionError(f"{name}: the reference filter gives {got.tolist()}, the formula {kept.tolist()}")
        if tuple(probs) == PROBS:
            _check(name, got, BY_HAND[name])
        result[name] = got.tolist()
    return result


#: Two distributions over five words: one peaked, one flat (probabilities, sorted).
PEAKED = (0.90, 0.04, 0.03, 0.02, 0.01)
FLAT = (0.22, 0.21, 0.20, 0.19, 0.18)


def rules_table(rules: dict[str, list[float]], words=WORDS) -> str:
    """:func:`decoding_rules`' result as a table: one row per rule, one column per word."""
    lines = [padded(_("rule"), 26) + "".join(f"{w:>8s}" for w in words)]
    lines += [padded(name, 26) + "".join(f"{p:8.4f}" for p in probs) for name, probs in rules.items()]
    return "\n".join(lines)


def top_k_against_top_p(top_k: int = 3, top_p: float = 0.85) -> list[dict]:
    """How many tokens top-k and top-p keep, and the probability mass they keep, on
    :data:`PEAKED` and :data:`FLAT`. Returns one dict per (distribution, rule) with
    ``distribution``, ``rule``, ``kept`` (count), ``mass`` (the original probability of
    the kept set)."""
    rows = []
    for name, probs in ((_("peaked"), PEAKED), (_("flat"), FLAT)):
        p = torch.tensor(probs, dtype=torch.float64)
        for rule, (k, top) in ((f"top-k {top_k}", (top_k, None)), (f"top-p {top_p}", (None, top_p))):
            kept = torch.isfinite(top_k_top_p_filter(p.log(), top_k=k, top_p=top))
            rows.append({"distribution": name, "rule": rule, "kept": int(kept.sum()),
                         "mass": float(p[kept].sum())})
    return rows


def kept_table(rows: list[dict]) -> str:
    """:func:`top_k_against_top_p`'s rows, one line each."""
    return "\n".join(f"{padded(row['distribution'], 7)} {row['rule']:10s} "
                     + _("keeps {kept} of 5 tokens, {mass:.2f} of the probability", kept=row["kept"], mass=row["mass"])
                     for row in rows)


def describe_top_k_top_p(rows: list[dict]) -> str:
    """Words for :func:`top_k_against_top_p`'s rows, computed from them."""
    by = {(r["distribution"], r["rule"].split()[0]): r for r in rows}
    peaked_k, peaked_p = by["peaked", "top-k"], by["peaked", "top-p"]
    flat_k, flat_p = by["flat", "top-k"], by["flat", "top-p"]
    return "\n".join([
        _("peaked: top-k keeps {n} more token(s) than top-p,", n=peaked_k["kept"] - peaked_p["kept"]),
        "        " + _("with {mass:.2f} of the probability", mass=peaked_k["mass"] - peaked_p["mass"]),
        _("flat:   top-k drops {n} token(s) that top-p keeps,", n=flat_p["kept"] - flat_k["kept"]),
        "        " + _("with {mass:.2f} of the probability", mass=flat_p["mass"] - flat_k["mass"]),
    ])


# --------------------------------------------------------------------------------------
# Beam search on a model written as a table
# --------------------------------------------------------------------------------------


class TableModel(nn.Module):
    """A language model written as a table: the distribution of the next token depends on
    the tokens generated after the prompt, looked up in ``table`` (a dict from a tuple of
    token ids to a tuple of probabilities over the vocabulary), with ``default`` for the
    prefixes it does not name. Called as the course's GPT is, ``model(tokens)`` with
    ``tokens`` ``(B, L)``, it returns ``(logits, None)``, ``logits`` ``(B, L, V)``; only the
    last position holds the table's log-probabilities (the others are 0: beam search and
    greedy decoding read the last one only)."""

    def __init__(self, vocab, table: dict, default, prompt_len: int):
        super().__init__()
        self.vocab, self.table, self.default, self.prompt_len = list(vocab), dict(table), default, prompt_len
        for probs in [default, *table.values()]:
            if len(probs) != len(self.vocab) or abs(sum(probs) - 1) > 1e-12:
                raise ValueError(f"{probs} is not a distribution over {len(self.vocab)} tokens")

    def probs(self, generated: tuple[int, ...]) -> tuple[float, ...]:
        return self.table.get(tuple(generated), self.default)

    def forward(self, tokens: torch.Tensor, padding_mask=None, past_kv=None):
        B, L = tokens.shape
        logits = torch.zeros(B, L, len(self.vocab), dtype=torch.float64)
        for b in range(B):
            generated = tuple(tokens[b, self.prompt_len:].tolist())
            logits[b, -1] = torch.tensor(self.probs(generated), dtype=torch.float64).log()
        return logits, None


#: The page's table: vocabulary a, b, <eos>; the prompt is one <eos> (as GPT-2 starts a text
#: with its end-of-text token).
BEAM_VOCAB = ("a", "b", "<eos>")
BEAM_TABLE = {
    (): (0.45, 0.25, 0.30),
    (0,): (0.36, 0.34, 0.30),
    (1,): (0.05, 0.05, 0.90),
    (0, 0): (0.25, 0.25, 0.50),
    (0, 1): (0.25, 0.25, 0.50),
}
BEAM_DEFAULT = (0.10, 0.10, 0.80)


def _words(ids) -> str:
    return " ".join(BEAM_VOCAB[i] for i in ids)


def beam_search_grid(widths=(1, 2, 3), penalties=(0.0, 1.0), max_new_tokens: int = 3) -> dict:
    """Beam search (the reference ``beam_search``) on :data:`BEAM_TABLE` for every width and
    length penalty, and the exhaustive best by the same score, found by listing every
    sequence of at most ``max_new_tokens`` tokens that ends in ``<eos>`` or has the full
    length. Returns ``{"table": [(sequence, probability, log-probability, length)],
    "beam": {(width, penalty): (sequence, score)}, "best": {penalty: (sequence, score)}}``."""
    eos = BEAM_VOCAB.index("<eos>")
    model = TableModel(BEAM_VOCAB, BEAM_TABLE, BEAM_DEFAULT, prompt_len=1)
    prompt = torch.tensor([eos])
    sequences = []
    for length in range(1, max_new_tokens + 1):
        for ids in itertools.product(range(len(BEAM_VOCAB)), repeat=length):
            if eos in ids[:-1] or (ids[-1] != eos and length < max_new_tokens):
                continue
            logp = sum(math.log(model.probs(ids[:i])[t]) for i, t in enumerate(ids))
            sequences.append((ids, logp))
    best = {a: max(sequences, key=lambda s: s[1] / len(s[0]) ** a) for a in penalties}
    beams = {}
    for width, a in itertools.product(widths, penalties):
        tokens, score = beam_search(model, prompt, width, max_new_tokens, eos, length_penalty=a)
        beams[width, a] = (_words(tokens.tolist()), float(score))
    finished = sorted((s for s in sequences if s[0][-1] == eos), key=lambda s: -s[1])
    return {
        "table": [(_words(ids), math.exp(logp), logp, len(ids)) for ids, logp in finished],
        "beam": beams,
        "best": {a: (_words(ids), logp / len(ids) ** a) for a, (ids, logp) in best.items()},
    }


def sequence_table(grid: dict, rows: int = 6) -> str:
    """The ``rows`` most probable finished sequences of :func:`beam_search_grid`, with their
    probability, log-probability, length and mean log-probability."""
    header = [padded(_("sequence"), 12), padded(_("probability"), 12, ">"), padded(_("log-prob"), 10, ">"),
              padded(_("length"), 8, ">"), padded(_("log-prob/length"), 17, ">")]
    lines = ["".join(header)]
    for words, p, logp, n in grid["table"][:rows]:
        lines.append(f"{words:12s}{p:12.4f}{logp:10.3f}{n:8d}{logp / n:17.3f}")
    return "\n".join(lines)


def beam_table(grid: dict, widths=(1, 2, 3), penalties=(0.0, 1.0)) -> str:
    """What :func:`beam_search_grid`'s beam search finds for each width and length penalty
    ``alpha``, next to the exhaustive best."""
    header = [padded(_("width {w}", w=w), 12) for w in widths]
    lines = [f"{'alpha':7s}" + "".join(header) + _("exhaustive")]
    for alpha in penalties:
        found = "".join(f"{grid['beam'][w, alpha][0]:12s}" for w in widths)
        lines.append(f"{alpha:<7.0f}{found}{grid['best'][alpha][0]}")
    return "\n".join(lines)


def describe_beam(grid: dict) -> str:
    """Words for :func:`beam_search_grid`'s result, computed from it: what greedy decoding
    (width 1) writes, the first width that finds the exhaustive best with ``alpha = 1``, and
    the best without a length penalty."""
    widths = sorted({w for w, _penalty in grid["beam"]})
    best = grid["best"][1.0][0]
    found = [w for w in widths if grid["beam"][w, 1.0][0] == best]
    lines = [_("greedy (width 1) writes {answer!r}", answer=grid["beam"][1, 1.0][0])]
    if found:
        lines.append(_("the best by mean log-probability is {best!r}; width {width} is the first to find it",
                       best=best, width=found[0]))
    else:
        lines.append(_("the best by mean log-probability is {best!r}; no width tried finds it", best=best))
    lines.append(_("without the length penalty the best is {best!r}", best=grid["best"][0.0][0]))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# The key-value cache: counted, measured, and what it costs
# --------------------------------------------------------------------------------------


def attention_work(T: int) -> dict[str, int]:
    """Query-key dot products (per layer and head) to generate ``T`` tokens from a one-token
    prompt. Without the cache, step ``s`` (``s = 1 .. T``) runs the model over all ``s``
    tokens and computes an ``s x s`` score matrix: ``sum s^2 = T(T+1)(2T+1)/6``. With it, step
    ``s`` computes one query against ``s`` keys: ``sum s = T(T+1)/2``. Also the token-passes
    through the rest of the model (projections, feed-forward): ``T(T+1)/2`` against ``T``.
    Both sums are checked against a direct count."""
    without = sum(s * s for s in range(1, T + 1))
    with_cache = sum(range(1, T + 1))
    if without != T * (T + 1) * (2 * T + 1) // 6 or with_cache != T * (T + 1) // 2:
        raise AssertionError("the closed forms of the sums are wrong")
    return {"without cache": without, "with cache": with_cache,
            "token passes without": with_cache, "token passes with": T}


def work_table(lengths=(64, 128, 256)) -> str:
    """:func:`attention_work` for each length: scores computed and token passes, without and with
    the cache."""
    scores, passes = padded(_("scores"), 24, ">"), padded(_("token passes"), 24, ">")
    without, cache, ratio = padded(_("no cache"), 12, ">"), padded(_("cache"), 12, ">"), padded(_("ratio"), 8, ">")
    lines = [f"{'':5s}{scores}{'':8s}{passes}", f"{'T':>5s}{without}{cache}{ratio}{without}{cache}"]
    for T in lengths:
        work = attention_work(T)
        lines.append(f"{T:5d}{work['without cache']:12,d}{work['with cache']:12,d}"
                     f"{work['without cache'] / work['with cache']:8.1f}"
                     f"{work['token passes without']:12,d}{work['token passes with']:12,d}")
    return "\n".join(lines)


def cache_memory_table(models) -> str:
    """:func:`cache_memory` of each ``(name, layers, width, length)`` of ``models``, the product
    written out."""
    numbers = _("2 x layers x  T  x width =  numbers   float32")
    lines = [f"{'':12s}  {numbers}"]
    for name, layers, width, length in models:
        count, mib = cache_memory(layers, width, length)
        lines.append(f"{padded(name, 12)}  2 x {layers:4d} x {length:4d} x {width:4d} = {count:11,d}  {mib:5.1f} MiB")
    return "\n".join(lines)


#: The name the page gives the model it timed, in :func:`cache_memory_table`'s first row.
TIMED = _("timed above")


def cache_memory(num_layers: int, d_model: int, length: int, bytes_per_number: int = 4) -> tuple[int, float]:
    """The key-value cache of one sequence: ``2 * num_layers * length * d_model`` numbers (a key
    and a value of width ``d_model``, all heads together, per layer and position), and its
    size in MiB at ``bytes_per_number``."""
    numbers = 2 * num_layers * length * d_model
    return numbers, numbers * bytes_per_number / 2**20


#: The model whose generation the page times: the width of chapter 7's, a longer context.
SPEED_MODEL = {"vocab_size": 64, "d_model": 64, "num_heads": 4, "d_ff": 256, "num_layers": 2, "max_len": 520}


@torch.no_grad()
def generation_speed(lengths=(64, 128, 256), prompt_len: int = 8, repeats: int = 3, seed: int = 0) -> list[dict]:
    """Tokens per second of greedy ``generate`` with and without the cache, on a randomly
    initialised :data:`SPEED_MODEL` GPT, one sequence, on the CPU with one thread. For each
    number of new tokens: the best of ``repeats`` runs of the process's CPU time (the work
    itself, not the waiting on a shared machine), and whether both ways gave the same tokens.
    Returns one dict per length: ``tokens``, ``with``, ``without`` (tokens/s), ``speedup``,
    ``same``."""
    torch.manual_seed(seed)
    model = GPT(**SPEED_MODEL).eval()
    prompt = torch.randint(SPEED_MODEL["vocab_size"], (1, prompt_len),
                           generator=torch.Generator().manual_seed(seed))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    rows = []
    try:
        for n in lengths:
            out, best = {}, {}
            for use_cache in (True, False):
                times = []
                for _repeat in range(repeats):
                    start = time.process_time()
                    out[use_cache] = generate(model, prompt, n, use_cache=use_cache)
                    times.append(time.process_time() - start)
                best[use_cache] = min(times)
            rows.append({"tokens": n, "with": n / best[True], "without": n / best[False],
                         "speedup": best[False] / best[True], "same": bool(torch.equal(out[True], out[False]))})
    finally:
        torch.set_num_threads(threads)
    return rows


def speed_table(rows: list[dict]) -> str:
    """:func:`generation_speed`'s rows as a table."""
    header = [padded(_("new tokens"), 10, ">"), padded(_("tokens/s, cache"), 17, ">"), padded(_("no cache"), 10, ">"),
              padded(_("speed-up"), 10, ">")]
    lines = ["".join(header) + "  " + _("same tokens")]
    for row in rows:
        lines.append(f"{row['tokens']:10d}{row['with']:17,.0f}{row['without']:10,.0f}"
                     f"{row['speedup']:9.1f}x  {row['same']}")
    return "\n".join(lines)


def describe_speed(rows: list[dict]) -> str:
    """Words for :func:`generation_speed`'s rows, computed from them.

    Checks what the page says of the measurement, and raises ``AssertionError`` (which stops
    the book's build) when one statement no longer holds: the speed-up is larger at the longest
    length than at the shortest (lengths between may fall out of order on a busy machine: CPU
    times of small steps are noisy), but stays far below (under a quarter of) the ratio of the
    score counts ``(2T+1)/3`` at every length; and both ways give the same tokens at every length."""
    first, last = rows[0], rows[-1]
    ratio = [(2 * r["tokens"] + 1) / 3 for r in rows]
    assert last["speedup"] > first["speedup"], (
        f"the cache's speed-up is no larger at the longest length: {[round(r['speedup'], 1) for r in rows]}")
    assert all(r["speedup"] < q / 4 for r, q in zip(rows, ratio)), (
        f"the speed-up {[round(r['speedup'], 1) for r in rows]} is no longer far below the score counts' "
        f"ratio {[round(q) for q in ratio]}")
    assert all(r["same"] for r in rows), "generation with and without the cache gave different tokens"
    speedups = " -> ".join(f"{r['speedup']:.1f}x" for r in rows)
    ratios = " -> ".join(f"{q:.0f}" for q in ratio)
    return "\n".join([
        _("from {first} to {last} new tokens:", first=first["tokens"], last=last["tokens"]),
        "  " + _("speed-up {speedups}; ratio of the score counts (2T+1)/3 {ratios}", speedups=speedups, ratios=ratios),
        "  " + _("tokens/s with the cache x{cached:.2f}, without it x{uncached:.2f}",
                 cached=last["with"] / first["with"], uncached=last["without"] / first["without"]),
        "  " + _("the same tokens both ways at every length: {same}", same=all(r["same"] for r in rows)),
    ])


# --------------------------------------------------------------------------------------
# Weight tying and the size of the embeddings
# --------------------------------------------------------------------------------------


def parameter_counts(task: PromptTask) -> dict[str, int]:
    """Parameters of the GPT this chapter trains on the prompts of ``task`` (:func:`make_date_gpt`)
    with and without weight tying (``model.parameters()`` counts a shared matrix once), its sizes,
    and the size of the token embedding; checked: tying saves exactly the token embedding."""
    counts = {}
    for tied in (True, False):
        model = make_date_gpt(task, tie_weights=tied)
        counts["tied" if tied else "untied"] = sum(p.numel() for p in model.parameters())
    vocab_size, d_model = model.token_embedding.weight.shape
    counts.update({"vocabulary": vocab_size, "d_model": d_model, "blocks": len(model.blocks),
                   "max_len": model.position_embedding.num_embeddings, "token embedding": vocab_size * d_model})
    if counts["untied"] - counts["tied"] != counts["token embedding"]:
        raise AssertionError(f"weight tying does not save the token embedding's {counts['token embedding']:,} parameters")
    return counts


def describe_tying(counts: dict[str, int]) -> str:
    """:func:`parameter_counts`' result in words: what weight tying saves here and in GPT-2 small."""
    saved, V, d_model = counts["untied"] - counts["tied"], counts["vocabulary"], counts["d_model"]
    return "\n".join([
        _("a GPT of width {d_model}, {blocks} blocks, vocabulary {V}, context {max_len}: {untied:,} parameters untied",
          d_model=d_model, blocks=counts["blocks"], V=V, max_len=counts["max_len"], untied=counts["untied"]),
        "  " + _("{tied:,} tied: {V} x {d_model} = {saved:,} saved", tied=counts["tied"], V=V,
                 d_model=d_model, saved=saved),
        _("GPT-2 small: 50257 x 768 = {saved:,} saved", saved=50257 * 768),
    ])


def describe_embedding_sizes(model: GPT) -> str:
    """:func:`embedding_sizes` of ``model``, one line each, and whether its output layer is its
    token embedding."""
    rms = _("root mean square of the entries")
    lines = [f"{padded(what, 20)} {rms} {size:.4f}" for what, size in embedding_sizes(model).items()]
    lines.append(_("the output layer's weight is the token embedding's: {tied}",
                   tied=model.lm_head.weight is model.token_embedding.weight))
    return "\n".join(lines)


def embedding_sizes(model: GPT) -> dict[str, float]:
    """Root mean square of the entries of ``model``'s token and position embeddings, its
    output layer's weight (the same matrix when tied), and, in the first block, of a layer that
    reads the stream (``W_qkv``) and of the two that add into it (``W_o``, ``dense2``).

    Checks what the page says of a fresh model (nanoGPT's convention), and raises
    ``AssertionError`` (which stops the book's build) when a size is more than 10 % off it:
    0.02 for both embeddings, the output layer and ``W_qkv``, ``0.02 / sqrt(2 L)`` for ``L``
    blocks for ``W_o`` and ``dense2``."""
    def rms(t):
        return t.detach().pow(2).mean().sqrt().item()

    block = model.blocks[0]
    sizes = {_("token embedding"): rms(model.token_embedding.weight),
             _("position embedding"): rms(model.position_embedding.weight),
             _("output layer"): rms(model.lm_head.weight),
             _("block 0: W_qkv"): rms(block.attention.W_qkv.weight),
             _("block 0: W_o"): rms(block.attention.W_o.weight),
             _("block 0: dense2"): rms(block.dense2.weight)}
    residual = 0.02 / math.sqrt(2 * len(model.blocks))
    for what, size in sizes.items():
        expected = residual if what in ("block 0: W_o", "block 0: dense2") else 0.02
        assert abs(size / expected - 1) < 0.1, f"{what}: root mean square {size:.4f}, the page says {expected:.4f}"
    return sizes


# --------------------------------------------------------------------------------------
# Diagrams (the drawing kit of figures.diagrams; these two pictures are this chapter's)
# --------------------------------------------------------------------------------------


def _prenorm_sublayer(ax, x: float, y_in: float, w: float, label: str, role: str, shape: str) -> tuple[float, dict]:
    """One pre-norm sub-layer: LayerNorm, the sub-layer, and the residual addition above
    them; the residual goes around both on the left. The main path enters at ``y_in``.
    Returns the y of the addition's top and the sub-layer's box."""
    norm = _box(ax, x, y_in + 0.5, w, 0.36, "LayerNorm", "norm")
    _arrow(ax, (x, y_in), norm["bottom"], shape)
    layer = _box(ax, x, y_in + 1.25, w, 0.5, label, role)
    _arrow(ax, norm["top"], layer["bottom"])
    add = _box(ax, x, y_in + 2.0, 0.45, 0.36, "+", "data")
    _arrow(ax, layer["top"], add["bottom"], shape)
    # the residual: leaves the path below the norm, meets it at the addition
    xr = x - w / 2 - 0.25
    ax.plot([x, xr, xr], [y_in + 0.12, y_in + 0.12, y_in + 2.0], color="#777777", linewidth=1.2, zorder=0)
    _arrow(ax, (xr, y_in + 2.0), add["left"], colour="#777777")
    return y_in + 2.18, layer


def draw_decoder_only():
    """The decoder-only model (GPT-2's layout): token and learned position embeddings, N
    pre-norm blocks of causal self-attention and a GELU feed-forward network, a final
    LayerNorm, and an output layer that shares the token embedding's matrix."""
    fig, ax = _canvas(6.4, 9.4)
    x, w = 3.0, 2.5
    ids = _box(ax, x, 0.35, w, 0.4, _("token ids"), "data")
    tok = _box(ax, x - 0.75, 1.25, 1.4, 0.45, _("token\nembedding"), "embed")
    pos = _box(ax, x + 0.85, 1.25, 1.4, 0.45, _("position\nembedding"), "embed")
    _arrow(ax, (tok["bottom"][0], ids["top"][1]), tok["bottom"], "(B, T)", side="left")
    _arrow(ax, (pos["bottom"][0], ids["top"][1]), pos["bottom"], _("positions 0..T-1"))
    add = _box(ax, x, 2.05, 0.45, 0.36, "+", "data")
    _arrow(ax, tok["top"], add["left"], connection="arc3,rad=-0.3")
    _arrow(ax, pos["top"], add["right"], connection="arc3,rad=0.3")
    start = add["top"][1]
    y, att = _prenorm_sublayer(ax, x, start, w, _("causal self-attention\n(one fused W_qkv)"), "attention",
                               "(B, T, D)")
    ax.text(att["right"][0] + 0.3, att["right"][1], _("causal mask (T, T)\nheads (B, h, T, d)"),
            ha="left", va="center", fontsize=SHAPE, family="monospace")
    y, ffn = _prenorm_sublayer(ax, x, y, w, _("feed-forward\n(GELU)"), "ffn", "(B, T, D)")
    ax.text(ffn["right"][0] + 0.3, ffn["right"][1], _("hidden (B, T, F)"), ha="left", va="center",
            fontsize=SHAPE, family="monospace")
    _repeat(ax, x, w, start + 0.05, y, x + w / 2 + 0.25, "left")
    ln_f = _box(ax, x, y + 0.65, w, 0.36, _("final LayerNorm"), "norm")
    _arrow(ax, (x, y), ln_f["bottom"], "(B, T, D)")
    head = _box(ax, x, y + 1.4, w, 0.42, _("linear D → V (no bias)"), "linear")
    _arrow(ax, ln_f["top"], head["bottom"])
    logits = _box(ax, x, y + 2.15, w, 0.4, _("logits"), "data")
    _arrow(ax, head["top"], logits["bottom"], "(B, T, V)")
    # weight tying: the output layer is the token embedding's matrix, read the other way
    xt = 0.35
    ax.plot([tok["left"][0], xt, xt, head["left"][0]], [tok["left"][1], tok["left"][1], head["left"][1],
                                                        head["left"][1]],
            color="#b5651d", linestyle="--", linewidth=1.4)
    ax.text(xt + 0.08, (tok["left"][1] + head["left"][1]) / 2, _("one matrix\n(V, D):\nweight\ntying"),
            ha="left", va="center", fontsize=SMALLEST, color="#8a4a12")
    ax.text(0.05, 9.2, _("pre-norm: LayerNorm before each sub-layer; the residual path crosses no norm"),
            ha="left", va="center", fontsize=SMALLEST)
    # its text alternative (the page's picture says nothing else): the reader's language, from figures.po
    return finding(fig, _(
        "The decoder-only model, bottom to top. Token ids (B, T) go into a token embedding, and the positions"
        " 0 to T-1 into a learned position embedding; the two are added. Then N repeated blocks, each two "
        "pre-norm sub-layers: a LayerNorm, causal self-attention with one fused W_qkv projection (causal mask"
        " (T, T), heads (B, h, T, d)), and a residual addition of (B, T, D); then a LayerNorm, a GELU feed-"
        "forward network (hidden (B, T, F)) and a residual addition. The residual path goes around each sub-"
        "layer and crosses no norm. After the blocks, a final LayerNorm and a linear layer from D to V "
        "without bias give the logits (B, T, V). A dashed line joins the token embedding and the output "
        "layer: they are one (V, D) matrix, weight tying."))


_NEW_KEY = {"hatch": "//", "linewidth": 2.4, "edgecolor": "#222222"}


def draw_kv_cache(steps: int = 4):
    """Generation with a key-value cache, for the first ``steps`` steps: at step ``s`` only
    the new token goes through the model; its key and value are appended to the cache of
    every layer, and its one query is scored against all the cached keys."""
    fig, ax = _canvas(WIDTH, 5.3)
    cell = 0.5
    ax.text(0.05, 5.05, _("key-value cache of one layer: keys shown, values are cached alike"), ha="left",
            va="center", fontsize=LABEL, weight="bold")
    ax.text(0.05, 4.7, _("grey, thin outline: read from the cache; red, hatched, thick outline: computed at this step"),
            ha="left", va="center", fontsize=SMALLEST, color="#555555")
    x_keys = 2.45
    for s in range(steps):
        y = 3.95 - s * 0.95
        ax.text(0.05, y, _("step {s}", s=s + 1), ha="left", va="center", fontsize=SMALLEST)
        new = _box(ax, 1.05, y, 0.5, 0.36, f"x{s + 1}", "embed", size=SMALLEST)
        proj = _box(ax, 1.75, y, 0.55, 0.36, "W_qkv", "linear", size=SMALLEST)
        _arrow(ax, new["right"], proj["left"])
        # the new key told from the cached ones without its colour too (WCAG 1.4.1): hatched, a thick outline
        keys = [_box(ax, x_keys + j * cell, y, cell - 0.06, 0.36, f"k{j + 1}", "attention" if j == s else "data",
                     size=SMALLEST, **(_NEW_KEY if j == s else {})) for j in range(s + 1)]
        # the new key goes over the cached ones into the last slot
        top = y + 0.33
        ax.plot([proj["top"][0], proj["top"][0], keys[-1]["top"][0]], [proj["top"][1], top, top],
                color="#333333", linewidth=1.2)
        _arrow(ax, (keys[-1]["top"][0], top), keys[-1]["top"])
        x_text = x_keys + steps * cell + 0.2
        keys_read = "k1" if s == 0 else f"k1 … k{s + 1}"
        scores = (_("q{s} · {keys}: {n} scores", s=s + 1, keys=keys_read, n=s + 1) if s
                  else _("q{s} · {keys}: 1 score", s=s + 1, keys=keys_read))
        ax.text(x_text, y, scores, ha="left",
                va="center", fontsize=SHAPE, family="monospace")
    ax.text(0.05, 0.3, _("after step s the cache of a layer holds keys and values (B, h, s, d) each;\n"
                         "without it, step s recomputes all s keys and s × s scores"),
            ha="left", va="center", fontsize=SMALLEST)
    # its text alternative (the page's picture says nothing else): the reader's language, from figures.po
    return finding(fig, _(
        "The key-value cache of one layer over {steps} steps of generation. At step s only the new token x_s "
        "enters the model; its key k_s (a red box, hatched, with a thick outline: computed this step) is "
        "appended to the cached keys k_1 to k_(s-1) (grey boxes with a thin outline, read from the cache), "
        "and its one query q_s is scored against all s keys, giving s scores. The values are cached the same "
        "way. After step s the cache of a layer holds keys and values of shape (B, h, s, d) each; without it,"
        " step s recomputes all s keys and s by s scores.", steps=steps))


# --------------------------------------------------------------------------------------
# The dates as prompts: training, held-out exact match, one answer step by step
# --------------------------------------------------------------------------------------



def make_date_gpt(task: PromptTask, seed: int = 0, tie_weights: bool = True) -> GPT:
    """The notebook's GPT (:data:`attention_course.recipes.DECODER_ONLY`'s sizes: chapter 7's
    width, heads, feed-forward width and depth) for the prompts of ``task``, drawn after ``torch.manual_seed(seed)``:
    its vocabulary is the task's, its context a prompt and a whole answer (``tie_weights=False``:
    the same model with its own output layer, for counting)."""
    torch.manual_seed(seed)
    return GPT(len(task.vocab), max_len=task.prompt_length + task.answer_length, tie_weights=tie_weights,
               **DECODER_ONLY.model)


#: The exercise notebook's graded run (its recipe), which the page repeats.
DATES_RECIPE = dict(DECODER_ONLY.training)


def train_date_gpt(task: PromptTask, seed: int = 0, **train_options) -> tuple[GPT, dict]:
    """:func:`make_date_gpt` trained by :func:`train_prompt_model` with :data:`DATES_RECIPE`
    (``train_options`` override it), without a progress bar. Returns ``(model, history)``."""
    model = make_date_gpt(task, seed)
    history = train_prompt_model(model, task, seed=seed, progress=False, **{**DATES_RECIPE, **train_options})
    return model, history


def describe_prompt(prompts: PromptTask) -> str:
    """The first training pair of ``prompts`` and the token row it becomes (``.`` for padding), with
    how many positions the loss scores."""
    tokens, labels = prompts.batch(prompts.train[:1])
    source, target = prompts.train[0]
    row = "".join(prompts.vocab.tokens[i] if i else "." for i in tokens[0].tolist())
    return "\n".join([
        _("pair:   {source!r} -> {target!r}", source=source, target=target),
        _("tokens: {row!r}", row=row),
        "        " + _("{n} tokens, '.' = <pad>, the answer ends with <eos>", n=tokens.shape[1]),
        _("scored: {scored} positions, the answer's {answer} tokens; vocabulary of {vocabulary} tokens",
          scored=sum(int(i != prompts.vocab.pad_id) for i in labels[0]), answer=prompts.answer_length,
          vocabulary=len(prompts.vocab)),
    ])


def describe_gpt_training(history: dict, parameters: int, accuracy: float, count: int) -> str:
    """The GPT's training run (steps, wall time, device, parameters) and its held-out exact match
    of ``count`` dates."""
    return "\n".join([
        _("{steps} steps, {wall:.0f} s on {device}, {parameters:,} parameters", steps=history["steps_done"],
          wall=history["seconds"], device=history["device"], parameters=parameters),
        _("held-out exact match {accuracy:.2%} of {count} dates", accuracy=accuracy, count=count),
    ])


def gpt_held_out_exact_match(model: GPT, task: PromptTask) -> tuple[float, list[str]]:
    """Greedy answers (the reference ``generate``, with the cache) to every held-out prompt of
    ``task``, and their exact match with the targets: ``(fraction, answers)``. On the CPU it
    runs on one thread, as training does."""
    device = next(model.parameters()).device
    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    try:
        answers = complete_prompts(model, task, [s for s, _target in task.test], generate)
    finally:
        torch.set_num_threads(threads)
    return exact_match(answers, [t for _source, t in task.test]), answers


@torch.no_grad()
def answer_step_by_step(model: GPT, task: PromptTask, source: str, top: int = 3) -> list[dict]:
    """Greedy decoding of one prompt with the key-value cache, one step at a time, as
    ``generate`` does it: the prompt in one forward pass, then one token per pass with the
    cache of the pass before. Returns one dict per step: ``fed`` (the characters that pass
    read), ``cache`` (the cache's length, in positions, after the pass), ``entry`` (the shape
    of one cached key tensor, ``(B, h, length, d)``), ``top`` (the ``top``
    most probable next characters with their probabilities) and ``chosen``; checked against
    ``generate`` on the same prompt."""
    model.eval()
    device = next(model.parameters()).device
    vocab = task.vocab
    prompt = task.prompts([source], device)
    fed, past, steps, written = prompt, None, [], []
    for _repeat in range(task.answer_length):
        logits, past = model(fed, past_kv=past)
        probs = torch.softmax(logits[0, -1].double(), dim=-1)
        values, ids = torch.topk(probs, top)
        chosen = int(logits[0, -1].argmax())
        steps.append({"fed": vocab.decode(fed[0].tolist()) if fed.shape[1] == 1 else source + SEP,
                      "cache": past[0][0].shape[2], "entry": tuple(past[0][0].shape),
                      "top": [(vocab.tokens[i], float(v)) for v, i in zip(values, ids.tolist())],
                      "chosen": vocab.tokens[chosen]})
        written.append(chosen)
        if chosen == vocab.eos_id:
            break
        fed = torch.tensor([[chosen]], device=device)
    expected = generate(model, prompt, len(written))[0, prompt.shape[1]:].tolist()
    if expected != written:
        raise AssertionError(f"step by step {written} differs from generate's {expected}")
    return steps


def steps_table(steps: list[dict], answer: str, target: str, num_blocks: int) -> str:
    """:func:`answer_step_by_step`'s steps as a table (what each pass read, the cache's length after
    it, the most probable next characters), then the answer, the target and the last cache's
    shape."""
    step, read, cache = padded(_("step"), 4, ">"), padded(_("read"), 22), padded(_("cache"), 6, ">")
    lines = [f"{step}  {read}{cache}  " + _("most probable next characters")]
    for k, row in enumerate(steps):
        best = "  ".join(f"{char:>5s} {p:.3f}" for char, p in row["top"])
        lines.append(f"{k + 1:4d}  {row['fed']!r:22s}{row['cache']:6d}  {best}")
    lines += [_("the answer: {answer!r}; the target: {target!r}", answer=answer, target=target),
              _("last cache: keys and values of shape {shape}", shape=steps[-1]["entry"]),
              "  " + _("in each of the {n} blocks", n=num_blocks)]
    return "\n".join(lines)


def describe_comparison(gpt: dict, transformer: dict) -> str:
    """Words for two rows of the comparison table (dicts with ``accuracy``, ``history`` and
    ``parameters``, as :func:`figures.ch07.comparison_table` takes them), computed from them."""
    share = gpt["parameters"] / transformer["parameters"]
    cpu = gpt["history"]["cpu_seconds"] / transformer["history"]["cpu_seconds"]
    gap = 100 * (gpt["accuracy"] - transformer["accuracy"])
    if gap > 0:
        level = _("its held-out exact match is {gap:.2f} points above the Transformer's", gap=abs(gap))
    elif gap < 0:
        level = _("its held-out exact match is {gap:.2f} points below the Transformer's", gap=abs(gap))
    else:
        level = _("its held-out exact match is level with the Transformer's")
    return "\n".join([_("the GPT has {share:.0%} of the Transformer's parameters", share=share),
                      _("it took {ratio:.2f} times the Transformer's CPU time to train", ratio=cpu), level])


def describe_steps(steps: list[dict], answer: str, target: str, sure: float = 0.9) -> str:
    """Words for :func:`answer_step_by_step`'s steps, computed from them: how many steps are
    near-certain (top probability at least ``sure``), among them those that write the year and
    the two separators of the ISO answer, whether the answer is right, and the step where the
    model was least sure (the smallest top probability), with its two most probable characters.

    Checks what the page says of the printout, and raises ``AssertionError`` (which stops the
    book's build) when one statement no longer holds: most steps are near-certain, and so are
    the steps that write the year and the separators."""
    top = [step["top"][0][1] for step in steps]
    certain = sum(p >= sure for p in top)
    fixed = [i for i in (0, 1, 2, 3, 4, 7) if i < len(steps)]  # YYYY-MM-DD: the year, the two '-'
    fixed_certain = sum(top[i] >= sure for i in fixed)
    assert certain > len(steps) / 2, f"only {certain} of {len(steps)} steps are near-certain"
    assert fixed_certain == len(fixed), "a step that writes the year or a separator is no longer near-certain"
    k = min(range(len(steps)), key=lambda i: top[i])
    (first, p1), (second, p2) = steps[k]["top"][:2]
    verdict = (_("the answer is right; the least sure step is step {step}:", step=k + 1) if answer == target
               else _("the answer is wrong; the least sure step is step {step}:", step=k + 1))
    return "\n".join([
        _("near-certain steps (top probability at least {sure}): {certain} of {steps}; "
          "of those writing the year and the separators, {fixed} of {of}",
          sure=sure, certain=certain, steps=len(steps), fixed=fixed_certain, of=len(fixed)),
        verdict,
        "  " + _("{first!r} {p1:.3f} against {second!r} {p2:.3f}, and greedy decoding took {chosen!r}",
                 first=first, p1=p1, second=second, p2=p2, chosen=steps[k]["chosen"]),
    ])


@torch.no_grad()
def answer_log_probability(model: GPT, task: PromptTask, source: str, answer: str) -> float:
    """The summed log-probability that ``model`` gives ``answer`` and its ``<eos>`` after the
    prompt of ``source``, in one teacher-forced pass."""
    model.eval()
    device = next(model.parameters()).device
    ids = task.vocab.encode(answer, eos=True)
    tokens = torch.cat([task.prompts([source], device), torch.tensor([ids], device=device)], dim=1)
    logits, _cache = model(tokens[:, :-1])
    log_probs = torch.log_softmax(logits[0, -len(ids):].double(), dim=-1)
    return float(log_probs[torch.arange(len(ids)), torch.tensor(ids, device=device)].sum())


def compare_answers(model: GPT, task: PromptTask, source: str, target: str, greedy: str,
                    beam_width: int = 3) -> str:
    """Greedy decoding's answer ``greedy`` to ``source`` next to :func:`beam_answer`'s, each
    with its summed log-probability (:func:`answer_log_probability`) and whether it is right."""
    beam = beam_answer(model, task, source, beam_width=beam_width)
    lines = []
    for name, answer in ((_("greedy:"), greedy), (_("beam search, width {width}:", width=beam_width), beam)):
        logp = answer_log_probability(model, task, source, answer)
        verdict = (_("{answer!r}, right, summed log-probability {logp:.3f}", answer=answer, logp=logp)
                   if answer == target else
                   _("{answer!r}, wrong, summed log-probability {logp:.3f}", answer=answer, logp=logp))
        lines.append(padded(name, 24) + verdict)
    return "\n".join(lines)


@torch.no_grad()
def beam_answer(model: GPT, task: PromptTask, source: str, beam_width: int = 3,
                length_penalty: float = 1.0) -> str:
    """The answer of the reference ``beam_search`` to the prompt of ``source`` (at most a whole
    answer's tokens), cut at its ``<eos>``."""
    model.eval()
    prompt = task.prompts([source], next(model.parameters()).device)[0]
    tokens, _score = beam_search(model, prompt, beam_width, task.answer_length, task.vocab.eos_id, length_penalty)
    return task.vocab.decode(tokens.tolist())
