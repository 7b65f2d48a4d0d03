"""Figures and measurements of chapter 9's book page, *Attention at scale*.

The layers are in :mod:`attention_course.reference.ch09` (generated from the chapter's solution
notebook) and the plain formula is chapter 2's; this module only uses them: it sizes the
``T x T`` matrix, times the plain formula stage by stage, works the online softmax through on
five numbers (checking the page's hand-computed values, so that a slip in the page's
arithmetic stops the build), measures the memory and the time of the tiled forward and
backward passes against the plain formula and PyTorch's fused kernels, trains chapter 8's
model with fewer key-value heads, follows a sliding window through the layers, and draws the
tiled loop and the grouped heads. ``benchmarks/attention_at_scale.py`` (``make bench``)
runs the same measurements at larger sizes.
Conventions are the course's: batch first, boolean masks with ``True`` = may attend.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import math
import os
import sys
import time

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from matplotlib.patches import Rectangle
from torch import nn

from attention_course.memory import largest_tensor
from attention_course.prompts import PromptTask, complete_prompts, train_prompt_model
from attention_course.recipes import DECODER_ONLY
from attention_course.reference.ch02 import masked_softmax, scaled_dot_product_attention
from attention_course.reference.ch07 import causal_mask
from attention_course.reference.ch08 import GPT, generate
from attention_course.masked_gpt import MaskedGPT
from attention_course.reference.ch09 import (GroupedQueryAttention, TiledAttention, generate_with_window,
                                             online_softmax, update_online_softmax, sliding_window_mask)
from attention_course.seq2seq import exact_match
from figures.describe import finding
from figures.diagrams import LABEL, SHAPE, SMALLEST, WIDTH, _arrow, _box, _canvas
from figures.i18n import _, padded

__all__ = [
    "matrix_bytes",
    "matrix_table",
    "SDPA_BACKENDS",
    "sdpa_backends",
    "where_the_time_goes",
    "time_table",
    "describe_time",
    "FIVE",
    "online_softmax_steps",
    "describe_online_softmax",
    "softmax_rounding",
    "describe_softmax_rounding",
    "tile_counts",
    "describe_tiles",
    "process_peak_mib",
    "METHODS",
    "memory_table",
    "memory_text",
    "largest_by_rule",
    "larger_lengths",
    "describe_memory",
    "gpu_table",
    "describe_gpu",
    "cache_bytes_per_token",
    "PUBLISHED",
    "describe_cache_sizes",
    "make_gqa_gpt",
    "gqa_comparison",
    "gqa_table",
    "describe_gqa",
    "receptive_field",
    "describe_receptive_field",
    "plot_receptive_field",
    "rolling_slots",
    "slots_text",
    "window_generation",
    "describe_window_generation",
    "draw_tiled_loop",
    "draw_grouped_heads",
]

# --------------------------------------------------------------------------------------
# The T x T matrix: its size, and where the time of the plain formula goes
# --------------------------------------------------------------------------------------


def matrix_bytes(T: int, bytes_per_number: int = 4, batch: int = 1, heads: int = 1) -> int:
    """Bytes of one ``T x T`` matrix of scores (or weights) per head and sequence, times
    ``batch * heads``."""
    return T * T * bytes_per_number * batch * heads


def matrix_table(lengths=(1024, 8192, 32768), heads: int = 12, batch: int = 8) -> str:
    """:func:`matrix_bytes` for each length: one ``T x T`` matrix in MiB, and ``heads`` heads of a
    batch of ``batch`` in GiB."""
    one = padded(_("one T x T, float32"), 22, ">")
    many = padded(_("{heads} heads, batch {batch}", heads=heads, batch=batch), 20, ">")
    lines = [f"{'T':>7s}{one}{many}"]
    for T in lengths:
        lines.append(f"{T:7,d}{matrix_bytes(T) / 2**20:18,.0f} MiB"
                     f"{matrix_bytes(T, heads=heads, batch=batch) / 2**30:16,.1f} GiB")
    return "\n".join(lines)


#: What each of ``torch.nn.attention.SDPBackend``'s members is, in the page's words.
SDPA_BACKENDS = {
    "FLASH_ATTENTION": _("FlashAttention-2's kernel (CUDA); a tiled CPU one"),
    "EFFICIENT_ATTENTION": _("xFormers' memory-efficient tiled kernel (CUDA)"),
    "CUDNN_ATTENTION": _("NVIDIA cuDNN's fused attention (CUDA)"),
    "MATH": _("the plain formula in PyTorch operations, any device"),
    "OVERRIDEABLE": _("a slot for a plug-in device's own (PrivateUse1)"),
    "ERROR": _("not a backend: no backend fits the inputs"),
}


def sdpa_backends() -> dict[str, str]:
    """The members of the installed PyTorch's ``torch.nn.attention.SDPBackend`` with the page's
    description of each; a member the page does not describe stops the build (a newer PyTorch
    added a backend the page must name)."""
    from torch.nn.attention import SDPBackend

    names = list(SDPBackend.__members__)
    unknown = [n for n in names if n not in SDPA_BACKENDS]
    if unknown:
        raise AssertionError(f"this PyTorch has SDPA backends the page does not describe: {unknown}")
    return {name: SDPA_BACKENDS[name] for name in names}


@contextlib.contextmanager
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _cpu_seconds(fn, repeats: int) -> float:
    """The best of ``repeats`` runs of ``fn()``, in CPU seconds of this process (the work, not
    the waiting on a shared machine)."""
    best = math.inf
    for _repeat in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def _inputs(T: int, d: int = 64, seed: int = 0, requires_grad: bool = False, device="cpu"):
    generator = torch.Generator().manual_seed(seed)
    # (B, h, T, d) = (1, 1, T, d): PyTorch's fused kernels take 4-D tensors only
    Q, K, V = (torch.randn(1, 1, T, d, generator=generator).to(device).requires_grad_(requires_grad)
               for _repeat in range(3))
    return Q, K, V


@torch.no_grad()
def where_the_time_goes(T: int = 2048, d: int = 64, repeats: int = 3) -> list[dict]:
    """Chapter 2's formula with a causal mask, one head of width ``d``, one sequence of ``T``,
    timed stage by stage on one CPU thread (best of ``repeats``, CPU time): the scores
    ``Q K^T / sqrt(d)``, the masked softmax (chapter 2's ``masked_softmax``), and ``weights V``.
    Checked against the whole formula. Returns one dict per stage: ``stage``, ``seconds`` and
    ``flops`` (floating-point operations: ``2 T^2 d`` per product and ``T^2`` for the scaling; the
    softmax's counted as five per entry: compare, subtract, exponentiate, add, divide)."""
    Q, K, V = _inputs(T, d)
    mask = causal_mask(T)
    with _one_thread():
        scores = Q @ K.transpose(-2, -1) / math.sqrt(d)
        weights = masked_softmax(scores, mask)
        output = weights @ V
        reference, _weights = scaled_dot_product_attention(Q, K, V, mask)
        if not torch.allclose(output, reference, atol=1e-5):
            raise AssertionError("the stages do not add up to chapter 2's formula")
        return [
            {"stage": _("scores Q K^T / sqrt(d)"), "seconds": _cpu_seconds(lambda: Q @ K.transpose(-2, -1) / math.sqrt(d), repeats),
             "flops": 2 * T * T * d + T * T},
            {"stage": _("masked softmax"), "seconds": _cpu_seconds(lambda: masked_softmax(scores, mask), repeats),
             "flops": 5 * T * T},
            {"stage": _("weights V"), "seconds": _cpu_seconds(lambda: weights @ V, repeats),
             "flops": 2 * T * T * d},
        ]


def time_table(stages: list[dict]) -> str:
    """:func:`where_the_time_goes`' stages as a table: milliseconds, share of the time, MFLOP."""
    stage, share = padded(_("stage"), 24), padded(_("share"), 7, ">")
    lines = [f"{stage}{'ms':>7s}{share}{'MFLOP':>8s}"]
    total = sum(s["seconds"] for s in stages)
    for s in stages:
        lines.append(f"{padded(s['stage'], 24)}{1e3 * s['seconds']:7.1f}{s['seconds'] / total:7.0%}"
                     f"{s['flops'] / 1e6:8,.0f}")
    return "\n".join(lines)


def describe_time(rows: list[dict]) -> str:
    """Words for :func:`where_the_time_goes`'s rows, computed from them."""
    total_s = sum(r["seconds"] for r in rows)
    total_f = sum(r["flops"] for r in rows)
    soft = next(r for r in rows if "softmax" in r["stage"])
    products = [r for r in rows if r is not soft]
    rate = sum(r["flops"] for r in products) / sum(r["seconds"] for r in products) / 1e9
    soft_rate = soft["flops"] / soft["seconds"] / 1e9
    # the page says the softmax's share of the time is far above its share of the arithmetic
    if soft["seconds"] / total_s < 3 * soft["flops"] / total_f:
        raise AssertionError("the softmax's share of the time is not far above its share of the arithmetic")
    return "\n".join([
        _("the softmax does {flops:.1%} of the arithmetic and takes {time:.0%} of the time",
          flops=soft["flops"] / total_f, time=soft["seconds"] / total_s),
        _("the two products run at {rate:.1f} GFLOP/s, the softmax at {soft_rate:.2f}:", rate=rate, soft_rate=soft_rate),
        "  " + _("{ratio:.0f} times slower per operation", ratio=rate / soft_rate),
    ])


# --------------------------------------------------------------------------------------
# The online softmax, by hand on five numbers
# --------------------------------------------------------------------------------------

#: The page's five numbers, read in blocks of two.
FIVE = (1.0, 3.0, 2.0, 5.0, 0.0)
#: What the page computes by hand (4 decimals): the state (running max, running sum) after
#: each block, and the final probabilities and log-sum-exp.
FIVE_BY_HAND = {
    "states": [(3.0, 1.13534), (5.0, 1.20344), (5.0, 1.21018)],
    # the terms the page adds up: e^(1-3), the old sum rescaled by e^(3-5), e^(2-5), e^(0-5)
    "terms": [0.13534, 0.15365, 0.04979, 0.00674],
    "probs": [0.0151, 0.1118, 0.0411, 0.8263, 0.0056],
    "lse": 5.1908,
}


def describe_online_softmax(worked: dict, x=FIVE, block_size: int = 2) -> str:
    """:func:`online_softmax_steps`' result as the page prints it: the state after each block, the
    log-sum-exp and the probabilities."""
    lines = [_("x = {x} in blocks of {size}; start: max -inf, sum 0", x=x, size=block_size)]
    for block, m, s in worked["steps"]:
        lines.append("  " + _("after {block:12s} running max {m:.1f}, sum {s:.5f}", block=str(block), m=m, s=s))
    lines.append(f"lse = {worked['lse']:.4f}")
    lines.append(_("probabilities {p}", p=" ".join(f"{p:.4f}" for p in worked["probs"])))
    return "\n".join(lines)


def online_softmax_steps(x=FIVE, block_size: int = 2) -> dict:
    """The online softmax of ``x`` over blocks of ``block_size``, one reference
    ``update_online_softmax`` at a time from the start state ``(-inf, 0)``; checked against
    the reference ``online_softmax``, against ``torch.softmax`` and ``torch.logsumexp``, and
    for the page's numbers against :data:`FIVE_BY_HAND`. Returns ``{"steps": [(block, max,
    sum)], "probs": [...], "lse": float}``."""
    t = torch.tensor(x, dtype=torch.float64)
    m, s = torch.tensor(float("-inf"), dtype=t.dtype), torch.tensor(0.0, dtype=t.dtype)
    steps = []
    for start in range(0, len(x), block_size):
        block = t[start:start + block_size]
        m, s = update_online_softmax(m, s, block)
        steps.append((block.tolist(), float(m), float(s)))
    lse = float(m + torch.log(s))
    probs = torch.exp(t - m) / s  # as the page computes them (softmax_rounding: why not exp(t - lse))
    ref_probs, ref_lse = online_softmax(t, block_size)
    for name, got, want in (("probabilities", probs, torch.softmax(t, 0)), ("reference", ref_probs, probs)):
        if not torch.allclose(got, want, atol=1e-12):
            raise AssertionError(f"the online softmax's {name} disagree: {got.tolist()} against {want.tolist()}")
    if not math.isclose(lse, float(torch.logsumexp(t, 0)), abs_tol=1e-12) or not math.isclose(lse, float(ref_lse),
                                                                                           abs_tol=1e-12):
        raise AssertionError("the online softmax's log-sum-exp disagrees")
    if tuple(x) == FIVE and block_size == 2:
        hand = FIVE_BY_HAND
        got = [(mx, round(sm, 5)) for _block, mx, sm in steps]
        if any(abs(a - c) > 1e-9 or abs(b - e) > 6e-6 for (a, b), (c, e) in zip(got, hand["states"])):
            raise AssertionError(f"the page's hand-computed states {hand['states']} disagree with the code's {got}")
        terms = [math.exp(-2), steps[0][2] * math.exp(-2), math.exp(-3), math.exp(-5)]
        if any(abs(a - b) > 6e-6 for a, b in zip(terms, hand["terms"])):
            raise AssertionError(f"the page's hand-computed terms {hand['terms']} disagree with {terms}")
        if not torch.allclose(probs, torch.tensor(hand["probs"], dtype=t.dtype), atol=6e-5) or abs(lse - hand["lse"]) > 6e-5:
            raise AssertionError(f"the page's hand-computed probabilities or log-sum-exp disagree with the code's "
                                 f"{[round(p, 4) for p in probs.tolist()]}, {lse:.4f}")
    return {"steps": steps, "probs": probs.tolist(), "lse": lse}


def softmax_rounding(centres=(10.0, 1e4), rows: int = 64, n: int = 256, seed: int = 0) -> list[dict]:
    """For float32 logits drawn around each of ``centres`` (``rows x n``, standard deviation 3), the
    largest relative error of a probability computed as ``exp(x - m) / s`` and as ``exp(x - lse)``
    (``m`` the row's maximum, ``s = sum exp(x - m)``, ``lse = m + log s``, all in float32), against
    the softmax of the same float32 logits in float64; and how far a row of each sums from 1.
    Probabilities under 1e-6 are left out of the relative errors (their absolute error is tiny).
    Checked, as the page says: ``exp(x - m) / s`` stays within 8 times float32's machine epsilon
    everywhere; at the smallest centre ``exp(x - lse)`` is within 4 times its error (the same order),
    at the largest off by more than 100 times that."""
    generator, eps = torch.Generator().manual_seed(seed), torch.finfo(torch.float32).eps
    results = []
    for centre in centres:
        x = (torch.randn(rows, n, generator=generator, dtype=torch.float64) * 3 + centre).float()
        truth = torch.softmax(x.double(), dim=-1)
        m = x.max(dim=-1, keepdim=True).values
        s = torch.exp(x - m).sum(dim=-1, keepdim=True)
        lse = m + torch.log(s)
        row = {"centre": centre, "rows": rows, "n": n}
        for name, probs in (("divided", torch.exp(x - m) / s), ("lse", torch.exp(x - lse))):
            shown = truth > 1e-6
            row[name] = float(((probs.double() - truth).abs() / truth)[shown].max())
            row[name + " sum"] = float((probs.double().sum(dim=-1) - 1).abs().max())
        results.append(row)
    if any(r["divided"] > 8 * eps for r in results):
        raise AssertionError(f"exp(x - m) / s is off by more than 8 times float32's machine epsilon: {results}")
    largest, smallest = max(results, key=lambda r: r["centre"]), min(results, key=lambda r: r["centre"])
    if smallest["lse"] > 4 * smallest["divided"]:
        raise AssertionError(f"exp(x - lse) is not of the same order as exp(x - m) / s near {smallest['centre']:g}: "
                             f"{smallest}")
    if largest["lse"] < 100 * 8 * eps:
        raise AssertionError(f"exp(x - lse) lost no accuracy at logits near {largest['centre']:g}: {largest}")
    return results


def describe_softmax_rounding(results: list[dict]) -> str:
    """:func:`softmax_rounding`'s result as the page prints it: for each centre, the largest relative
    error of a probability and how far a row's sum is from 1, for each of the two formulas."""
    lines = [_("float32 logits, rows of {n}: the largest relative error", n=results[0]["n"])]
    for r in results:
        lines.append("  " + _("near {centre:g}:", centre=r["centre"]))
        for name, formula in (("divided", "exp(x - m) / s"), ("lse", "exp(x - lse)")):
            lines.append(f"    {formula:16s}" + _("of a probability {p:.1e}, of a row's sum {s:.1e}",
                                                        p=r[name], s=r[name + " sum"]))
    lines.append("  " + _("float32's spacing at 1 (machine epsilon): {eps:.1e}", eps=torch.finfo(torch.float32).eps))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Tiles: how many are computed
# --------------------------------------------------------------------------------------


def tile_counts(T: int, block: int) -> dict[str, int]:
    """Tiles of a ``T x T`` score matrix cut in ``block x block`` tiles: all of them, those a
    causal pass computes (at least one key at or before one of the block's queries), and those
    among them that need the mask inside (the diagonal ones), counted tile by tile and checked
    against the closed forms ``n^2``, ``n(n+1)/2`` and ``n`` for ``n = ceil(T / block)``."""
    n = -(-T // block)
    computed = masked = 0
    for i in range(n):
        for j in range(n):
            first_key, last_query = j * block, min((i + 1) * block, T) - 1
            if first_key <= last_query:
                computed += 1
                masked += (j + 1) * block - 1 > i * block
    if computed != n * (n + 1) // 2 or masked != n:
        raise AssertionError("the tile counts disagree with their closed forms")
    return {"tiles": n * n, "computed": computed, "masked inside": masked, "skipped": n * n - computed}


# --------------------------------------------------------------------------------------
# Memory: the largest tensor, the process's peak
# --------------------------------------------------------------------------------------


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def process_peak_mib(fn) -> float | None:
    """How far ``fn()`` raises the peak resident size of a process above its resident size just
    before, in MiB: Linux's ``VmHWM`` (``/proc/self/status``), reset through
    ``/proc/self/clear_refs``, over the second of two runs of ``fn`` in a child forked for them
    (the first maps in the code it runs), with glibc told to give every
    block of 64 KiB or more its own mapping: such a block goes back to the system when it is freed,
    so that the resident size follows the tensors alive (by default glibc keeps freed memory in its
    heap, where a later run would reuse it unseen); this process's allocator is left as it is.
    ``None`` where that is not available (not Linux, not glibc)."""
    if not sys.platform.startswith("linux") or _status_kib("VmHWM") is None:
        return None
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: measure, report through the pipe, leave without clean-up
        try:
            os.close(read)
            libc = ctypes.CDLL("libc.so.6")
            libc.mallopt(-3, 64 * 1024)  # M_MMAP_THRESHOLD, fixed: no dynamic raising
            libc.mallopt(-1, 64 * 1024)  # M_TRIM_THRESHOLD: return the heap's free top
            # a forked child maps the libraries' code afresh as it runs it: a first run brings in
            # the code (and whatever the run caches), so that the measured run counts its data only
            fn()
            gc.collect()
            libc.malloc_trim(0)
            with open("/proc/self/clear_refs", "w") as clear_refs:
                clear_refs.write("5")  # the peak (VmHWM) becomes the current resident size
            before = _status_kib("VmRSS")
            fn()
            os.write(write, str((_status_kib("VmHWM") - before) / 1024).encode())
        except BaseException as error:  # noqa: BLE001 - reported to the parent, which raises
            os.write(write, f"error {type(error).__name__}: {error}".encode()[:4000])
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read().decode()
    os.waitpid(pid, 0)
    if answer.startswith("error") or not answer:
        raise RuntimeError(f"the measuring process failed: {answer or 'no answer'}")
    return float(answer)


def _sdpa(backend_name: str):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, backend_name)

    def attend(Q, K, V):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(Q, K, V, is_causal=True)

    return attend


#: The block size of the page's tiled runs on the CPU (larger blocks, fewer Python iterations).
BLOCK = 128

#: The ways to compute causal attention that the page measures: name -> f(Q, K, V) -> O.
METHODS = {
    _("plain (chapter 2)"): lambda Q, K, V: scaled_dot_product_attention(Q, K, V, causal_mask(Q.shape[-2], Q.device))[0],
    _("tiled, blocks {block}", block=BLOCK): lambda Q, K, V: TiledAttention.apply(Q, K, V, True, BLOCK, BLOCK),
    "SDPA math": _sdpa("MATH"),
    "SDPA flash": _sdpa("FLASH_ATTENTION"),
}


def describe_tiles(tiles: dict[str, int]) -> str:
    """:func:`tile_counts`' result, and the share of the tiles computed."""
    return "\n".join([_("tiles: {tiles:,}, computed: {computed:,}, masked inside: {masked:,}, skipped: {skipped:,}",
                        tiles=tiles["tiles"], computed=tiles["computed"], masked=tiles["masked inside"],
                        skipped=tiles["skipped"]),
                      _("computed: {share:.1%} of the tiles", share=tiles["computed"] / tiles["tiles"])])


def _forward_backward(method, Q, K, V, dO):
    def run():
        O = method(Q, K, V)
        O.backward(dO)
        for t in (Q, K, V):
            t.grad = None

    return run


def memory_table(sizes=(512, 1024, 2048), d: int = 64, methods=None, repeats: int = 2) -> list[dict]:
    """Causal attention, forward and backward, for one head of width ``d`` and one sequence of
    each length in ``sizes``, float32, on the CPU with one thread, by each of ``methods`` (default
    :data:`METHODS`). Per run: ``largest`` (elements of the largest tensor created, counted by
    :class:`attention_course.memory.LargestTensor`: views included), ``largest_mib`` (its size
    in float32, the inputs' dtype; a boolean mask of as many elements takes a quarter), ``peak_mib`` (:func:`process_peak_mib`, over the
    inputs and the incoming gradient, which exist before), ``seconds`` (best of ``repeats``, CPU
    time) and ``us_per_row`` (microseconds per query row). The outputs and gradients of every
    method are checked against the plain formula's."""
    methods = METHODS if methods is None else methods
    rows = []
    with _one_thread():
        for T in sizes:
            Q, K, V = _inputs(T, d, requires_grad=True)
            dO = torch.randn(1, 1, T, d, generator=torch.Generator().manual_seed(1))
            reference = None
            for name, method in methods.items():
                O = method(Q, K, V)
                O.backward(dO)
                got = [O.detach()] + [t.grad for t in (Q, K, V)]
                for t in (Q, K, V):
                    t.grad = None
                if reference is None:
                    reference = got
                elif not all(torch.allclose(a, b, atol=2e-4, rtol=1e-3) for a, b in zip(got, reference)):
                    raise AssertionError(f"{name} at T = {T} disagrees with the plain formula")
                del O, got
                run = _forward_backward(method, Q, K, V, dO)
                seconds = _cpu_seconds(run, repeats)
                _result, seen = largest_tensor(run)
                peak = process_peak_mib(run)
                rows.append({"T": T, "method": name, "largest": seen.numel, "largest_mib": 4 * seen.numel / 2**20,
                             "peak_mib": peak, "seconds": seconds, "us_per_row": 1e6 * seconds / T})
    return rows


def memory_text(rows: list[dict]) -> str:
    """:func:`memory_table`'s rows as a table."""
    method, largest, peak = padded(_("method"), 18), padded(_("largest"), 11, ">"), padded(_("peak MiB"), 10, ">")
    lines = [f"{'T':>5s}  {method}{largest}{peak}{'ms':>7s}{'us/row':>7s}"]
    for r in rows:
        peak = "n/a" if r["peak_mib"] is None else f"{r['peak_mib']:.1f}"
        lines.append(f"{r['T']:5d}  {padded(r['method'], 18)}{r['largest']:11,d}{peak:>10s}"
                     f"{1e3 * r['seconds']:7.1f}{r['us_per_row']:7.1f}")
    return "\n".join(lines)


def larger_lengths(lengths=(4096, 8192, 32768)) -> str:
    """:func:`largest_by_rule` for lengths too long to measure, in MiB of float32."""
    lines = [_("larger T: the largest tensor by arithmetic, MiB in float32")]
    for T in lengths:
        plain, tiled = (n * 4 / 2**20 for n in largest_by_rule(T).values())
        lines.append("  " + _("T = {T:6,d}: plain {plain:7,.1f}, tiled {tiled:4.1f}", T=T, plain=plain, tiled=tiled))
    return "\n".join(lines)


def largest_by_rule(T: int, d: int = 64, block: int = BLOCK) -> dict[str, int]:
    """Elements of the largest tensor of a forward and backward pass at length ``T`` by
    arithmetic: ``T x T`` for the plain formula (its scores); for the tiled pass the memory rule
    of the exercise, the larger of ``T x d`` (an output or a gradient) and one ``block x block``
    tile. :func:`describe_memory` checks the rule against the counted rows."""
    return {"plain (chapter 2)": T * T, f"tiled, blocks {block}": max(T * d, block * block)}


def describe_memory(rows: list[dict], d: int = 64, block: int = BLOCK) -> str:
    """Words for :func:`memory_table`'s rows, computed from them, and the memory rule checked:
    the plain formula's largest tensor is ``T x T``; the tiled one's is no larger than ``T x d``
    or a ``block x block`` tile."""
    by = {(r["T"], r["method"]): r for r in rows}
    sizes = sorted({r["T"] for r in rows})
    plain, tiled = "plain (chapter 2)", f"tiled, blocks {block}"
    for T in sizes:
        rule = largest_by_rule(T, d, block)
        if by[T, plain]["largest"] != rule[plain]:
            raise AssertionError(f"the plain formula's largest tensor at T = {T} is not T x T")
        if by[T, tiled]["largest"] > rule[tiled]:
            raise AssertionError(f"the tiled pass at T = {T} created a tensor larger than T x d or a tile")
    first, last = sizes[0], sizes[-1]
    growth = last / first
    # what the page says: the peak follows the largest tensor; every method's time per row grows
    if by[last, plain]["peak_mib"] is not None and not (
            by[last, plain]["peak_mib"] / by[first, plain]["peak_mib"] > by[last, tiled]["peak_mib"] / by[first, tiled]["peak_mib"]
            and by[last, plain]["peak_mib"] > 4 * by[last, tiled]["peak_mib"]):
        raise AssertionError("the plain formula's peak memory does not grow faster than the tiled pass's")
    slower = [m for m in {r["method"] for r in rows} if by[last, m]["us_per_row"] <= by[first, m]["us_per_row"]]
    if slower:
        raise AssertionError(f"the time per query row did not grow with T for {slower}")

    def ratio(method, key):
        return by[last, method][key] / by[first, method][key]

    lines = [_("from T = {first} to {last} (x{growth:.0f}):", first=first, last=last, growth=growth),
             "  " + _("largest tensor: plain x{plain:.0f}, tiled x{tiled:.0f}", plain=ratio(plain, "largest"),
                      tiled=ratio(tiled, "largest"))]
    if by[last, plain]["peak_mib"] is not None:
        lines.append("  " + _("peak memory at T = {T}: plain {plain:.0f} MiB, tiled {tiled:.1f} MiB", T=last,
                              plain=by[last, plain]["peak_mib"], tiled=by[last, tiled]["peak_mib"]))
    lines.append("  " + _("time per query row: plain x{plain:.1f}, tiled x{tiled:.1f}", plain=ratio(plain, "us_per_row"),
                          tiled=ratio(tiled, "us_per_row")))
    lines.append("  " + _("time at T = {T}, against the plain formula's:", T=last))
    lines.append("    " + _("tiled x{tiled:.2f}, PyTorch's flash kernel x{flash:.2f}",
                            tiled=by[last, tiled]["seconds"] / by[last, plain]["seconds"],
                            flash=by[last, "SDPA flash"]["seconds"] / by[last, plain]["seconds"]))
    return "\n".join(lines)


def describe_gpu(rows: list[dict]) -> str:
    """:func:`gpu_table`'s rows, or why there are none."""
    if not rows:
        return _("no CUDA device on the machine that built this page;\n"
                 "`make bench` measures this where there is one")
    lines = []
    for r in rows:
        if r["ms"] is None:
            lines.append(f"{r['T']:6d}  {padded(r['method'], 18)} " + _("out of memory"))
        else:
            lines.append(f"{r['T']:6d}  {padded(r['method'], 18)}{r['peak_mib']:8.1f} MiB"
                         f"{r['ms']:8.2f} ms{r['us_per_row']:7.2f} us/row")
    return "\n".join(lines)


def gpu_table(sizes=(1024, 4096, 16384), d: int = 64, heads: int = 16, block: int = 128, repeats: int = 5) -> list[dict]:
    """On CUDA: causal attention, forward and backward, ``heads`` heads of width ``d``, one
    sequence, in float16 for all three (PyTorch's flash kernel takes half precision only), by the
    flash and math backends and the reference ``TiledAttention``. Per run: ``peak_mib``
    (``torch.cuda.max_memory_allocated`` over what was allocated before), ``ms`` (median of
    ``repeats``, CUDA events) and ``us_per_row``. An empty list without CUDA."""
    if not torch.cuda.is_available():
        return []
    methods = {"SDPA flash": _sdpa("FLASH_ATTENTION"), "SDPA math": _sdpa("MATH"),
               f"tiled, blocks {block}": lambda Q, K, V: TiledAttention.apply(Q, K, V, True, block, block)}
    rows = []
    for T in sizes:
        generator = torch.Generator(device="cuda").manual_seed(0)
        Q, K, V = (torch.randn(1, heads, T, d, device="cuda", dtype=torch.float16, generator=generator)
                   .requires_grad_() for _repeat in range(3))
        dO = torch.randn_like(Q)
        for name, method in methods.items():
            run = _forward_backward(method, Q, K, V, dO)
            try:
                run()
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                before = torch.cuda.memory_allocated()
                run()
                torch.cuda.synchronize()
                peak = (torch.cuda.max_memory_allocated() - before) / 2**20
                times = []
                for _repeat in range(repeats):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    run()
                    end.record()
                    torch.cuda.synchronize()
                    times.append(start.elapsed_time(end))
            except torch.cuda.OutOfMemoryError:
                rows.append({"T": T, "method": name, "peak_mib": None, "ms": None, "us_per_row": None})
                torch.cuda.empty_cache()
                continue
            ms = sorted(times)[len(times) // 2]
            rows.append({"T": T, "method": name, "peak_mib": peak, "ms": ms, "us_per_row": 1e3 * ms / T})
    return rows


# --------------------------------------------------------------------------------------
# Grouped-query attention: the cache, and what fewer key-value heads cost
# --------------------------------------------------------------------------------------


def cache_bytes_per_token(num_layers: int, num_kv_heads: int, d_head: int, bytes_per_number: int = 4) -> int:
    """The key-value cache of one position: a key and a value of ``num_kv_heads * d_head``
    numbers in each of ``num_layers`` layers."""
    return 2 * num_layers * num_kv_heads * d_head * bytes_per_number


#: Published models with grouped-query attention: name -> (layers, query heads, key-value heads,
#: head width). Llama 2 70B (Touvron et al., 2023); Mistral 7B (Jiang et al., 2023).
PUBLISHED = {"Llama 2 70B": (80, 64, 8, 128), "Mistral 7B": (32, 32, 8, 128)}


def make_gqa_gpt(task: PromptTask, num_kv_heads: int, seed: int = 0) -> GPT:
    """Chapter 8's GPT for the prompts of ``task`` (:func:`figures.ch08.make_date_gpt`'s sizes),
    drawn after ``torch.manual_seed(seed)``, with every block's attention replaced by the
    reference ``GroupedQueryAttention`` of ``num_kv_heads`` key-value heads, initialised as
    chapter 8's GPT initialises its attention: normal(0, 0.02) weights, ``W_o``'s scaled by
    ``1/sqrt(2 num_layers)``, zero biases."""
    torch.manual_seed(seed)
    sizes = dict(DECODER_ONLY.model)
    model = GPT(len(task.vocab), max_len=task.prompt_length + task.answer_length, **sizes)
    layers = sizes["num_layers"]
    for block in model.blocks:
        attention = GroupedQueryAttention(sizes["d_model"], sizes["num_heads"], num_kv_heads)
        for name, linear in (("W_q", attention.W_q), ("W_kv", attention.W_kv), ("W_o", attention.W_o)):
            nn.init.normal_(linear.weight, std=0.02 / math.sqrt(2 * layers) if name == "W_o" else 0.02)
            nn.init.zeros_(linear.bias)
        block.attention = attention
    return model


def gqa_comparison(task: PromptTask, kv_heads=(4, 2, 1), num_steps: int = 150, seed: int = 0,
                   device: str = "cpu") -> list[dict]:
    """:func:`make_gqa_gpt` for each number of key-value heads, trained by the course's
    ``train_prompt_model`` with chapter 8's recipe cut to ``num_steps`` steps (the learning
    rate's cosine spans the shorter run), then scored by held-out exact match of the greedy
    answers (chapter 8's ``generate``, with the cache), all on ``device`` (``make gpu-check``: CUDA).
    Checks that each model's cache holds ``num_kv_heads`` heads. Returns one dict per model: ``kv_heads``, ``parameters``,
    ``cache_bytes`` (per token, float32), ``valid_loss`` (the last evaluation), ``accuracy``,
    ``cpu_seconds``."""
    rows = []
    for kv in kv_heads:
        model = make_gqa_gpt(task, kv, seed)
        recipe = {**DECODER_ONLY.training, "num_steps": num_steps}
        history = train_prompt_model(model, task, seed=seed, progress=False, device=device, **recipe)
        with _one_thread():
            answers = complete_prompts(model, task, [s for s, _target in task.test], generate)
            _logits, cache = model(task.prompts([task.test[0][0]], device))
        if cache[0][0].shape[1] != kv:
            raise AssertionError(f"the model with {kv} key-value heads caches {cache[0][0].shape[1]}")
        d_head = DECODER_ONLY.model["d_model"] // DECODER_ONLY.model["num_heads"]
        rows.append({"kv_heads": kv, "parameters": sum(p.numel() for p in model.parameters()),
                     "cache_bytes": cache_bytes_per_token(len(model.blocks), kv, d_head),
                     "valid_loss": history["valid_loss"][-1],
                     "accuracy": exact_match(answers, [t for _source, t in task.test]),
                     "cpu_seconds": history["cpu_seconds"]})
    return rows


def describe_cache_sizes(model_sizes: dict, published=PUBLISHED, tokens: int = 4096) -> str:
    """:func:`cache_bytes_per_token` for chapter 8's GPT (``model_sizes``: its recipe's model sizes)
    with all, half and one of its heads as key-value heads (float32), and for the published models
    with all their heads and with their key-value heads (float16, per token and for ``tokens``)."""
    h, layers = model_sizes["num_heads"], model_sizes["num_layers"]
    d_head = model_sizes["d_model"] // h
    lines = [_("chapter 8's GPT: {layers} layers, {h} heads of width {d}, float32", layers=layers, h=h, d=d_head)]
    for kv in (h, h // 2, 1):
        lines.append("  " + _("{kv} key-value head(s): {size:5,d} bytes per token", kv=kv,
                              size=cache_bytes_per_token(layers, kv, d_head)))
    lines.append(_("float16, per token (and for {tokens} tokens):", tokens=tokens))
    for name, (L, heads, kv, width) in published.items():
        for n in (heads, kv):
            size = cache_bytes_per_token(L, n, width, bytes_per_number=2)
            lines.append(f"  {name:11s} " + _("{n:2d} key-value heads: {kib:5,.0f} KiB ({gib:5.2f} GiB)", n=n,
                                              kib=size / 2**10, gib=tokens * size / 2**30))
    return "\n".join(lines)


def gqa_table(rows: list[dict]) -> str:
    """:func:`gqa_comparison`'s rows as a table."""
    header = [padded(_("kv heads"), 8, ">"), padded(_("params"), 8, ">"), padded(_("cache B/token"), 14, ">"),
              padded(_("valid loss"), 11, ">"), padded(_("exact match"), 12, ">"), padded(_("CPU s"), 7, ">")]
    lines = ["".join(header)]
    for r in rows:
        lines.append(f"{r['kv_heads']:8d}{r['parameters']:8,d}{r['cache_bytes']:14,d}"
                     f"{r['valid_loss']:11.3f}{r['accuracy']:12.1%}{r['cpu_seconds']:7.1f}")
    return "\n".join(lines)


def describe_gqa(rows: list[dict]) -> str:
    """Words for :func:`gqa_comparison`'s rows, computed from them."""
    full, least = rows[0], rows[-1]
    best = max(rows, key=lambda r: r["accuracy"])
    spread = 100 * (max(r["accuracy"] for r in rows) - min(r["accuracy"] for r in rows))
    drop = 100 * (full["accuracy"] - least["accuracy"])
    few, many = least["kv_heads"], full["kv_heads"]
    if drop == 0:
        verdict = _("{few} key-value head(s) scored as {many} did", few=few, many=many)
    elif drop > 0:
        verdict = _("{few} key-value head(s) scored {drop:.1f} points below {many}", few=few, drop=abs(drop), many=many)
    else:
        verdict = _("{few} key-value head(s) scored {drop:.1f} points above {many}", few=few, drop=abs(drop), many=many)
    return "\n".join([
        _("{few} key-value head(s): a cache {times} times smaller than {many}'s,", few=few,
          times=full["cache_bytes"] // least["cache_bytes"], many=many),
        "  " + _("{fewer:,} fewer parameters", fewer=full["parameters"] - least["parameters"]),
        verdict,
        _("the best: {best} key-value head(s), {accuracy:.1%}; all {n} within {spread:.1f} points",
          best=best["kv_heads"], accuracy=best["accuracy"], n=len(rows), spread=spread),
        _("validation loss from {low:.3f} to {high:.3f}", low=min(r["valid_loss"] for r in rows),
          high=max(r["valid_loss"] for r in rows)),
    ])


# --------------------------------------------------------------------------------------
# The sliding window: receptive field through the layers, the rolling cache
# --------------------------------------------------------------------------------------


def receptive_field(size: int, window: int, layers: int) -> torch.Tensor:
    """``(size, size)`` bool: which positions can reach position ``i``'s output after ``layers``
    layers that each attend through the reference ``sliding_window_mask(size, window)``
    (information moves along the mask once per layer: the mask's boolean matrix power).
    Checked: the last query reaches back ``layers * (window - 1) + 1`` positions, or all."""
    step = sliding_window_mask(size, window).to(torch.int64)
    reach = torch.eye(size, dtype=torch.int64)
    for _repeat in range(layers):
        reach = ((step @ reach) > 0).to(torch.int64)
    reach = reach.bool()
    if int(reach[-1].sum()) != min(size, layers * (window - 1) + 1):
        raise AssertionError(f"after {layers} layers of window {window} the last position reaches "
                             f"{int(reach[-1].sum())} positions")
    return reach


def plot_receptive_field(size: int = 16, window: int = 4, layers=(1, 2, 3)):
    """What each position's output can depend on after 1, 2, 3 layers of sliding-window
    attention: one panel per depth, query positions down, key positions across."""
    fig, axes = plt.subplots(1, len(layers), figsize=(WIDTH, 2.9), constrained_layout=True)
    for ax, L in zip(axes, layers):
        reach = receptive_field(size, window, L)
        ax.imshow(reach.numpy(), cmap="Blues", vmin=0, vmax=1.4)
        seen = min(size, L * (window - 1) + 1)
        ax.set_title(_("{L} layers: the last sees {seen}", L=L, seen=seen) if L > 1
                     else _("1 layer: the last sees {seen}", seen=seen), fontsize=LABEL)
        ax.set_xlabel(_("key position"), fontsize=SMALLEST)
        ax.set_xticks([0, size - 1])
        ax.set_yticks([0, size - 1])
        ax.tick_params(labelsize=SMALLEST)
    axes[0].set_ylabel(_("query position"), fontsize=SMALLEST)
    fig.suptitle(_("sliding window W = {W}: what the last position can see grows by W - 1 per layer", W=window),
                 fontsize=LABEL)
    seen = [int(receptive_field(size, window, L)[-1].sum()) for L in layers]
    return finding(fig, _("Each panel is a band on and below the diagonal that widens with depth: the last position sees "
                          "{seen} positions after {layers} layers, L × ({W} − 1) + 1 after L layers.",
                          seen=", ".join(map(str, seen)), layers=", ".join(map(str, layers)), W=window))


def describe_receptive_field(window: int = 4, depths=(1, 2, 3, 4), size: int = 64) -> str:
    """How far back the last position of ``size`` sees after each number of layers of ``depths``,
    against ``L (W - 1) + 1``; and the same rule for Mistral 7B."""
    lines = []
    for L in depths:
        seen = int(receptive_field(size, window, L)[-1].sum())
        lines.append(_("W = {W}, {L} layer(s): the last sees {seen} = {L} x ({W} - 1) + 1", W=window, L=L, seen=seen))
    L, W = 32, 4096  # Mistral 7B
    lines.append(_("Mistral 7B, {L} layers, W = {W:,}: {positions:,} positions", L=L, W=W, positions=L * (W - 1) + 1))
    return "\n".join(lines)


def slots_text(length: int = 7, window: int = 3) -> str:
    """:func:`rolling_slots`, one line per position: which position each slot holds (``.``: empty)."""
    lines = []
    for t, slots in enumerate(rolling_slots(length, window)):
        shown = "  ".join("  ." if p < 0 else f"{p:3d}" for p in slots)
        lines.append(_("after position {t}: slots [{shown} ]", t=t, shown=shown))
    return "\n".join(lines)


def rolling_slots(length: int, window: int) -> list[list[int]]:
    """Which absolute position each of the ``window`` slots of a rolling cache holds after each
    of ``length`` steps (position ``t`` is written into slot ``t mod window``, as Mistral's
    rolling buffer does; ``-1`` = empty), checked: the positions held are always the last
    ``window`` ones, those the sliding-window mask lets the newest query see."""
    slots, history = [-1] * window, []
    for t in range(length):
        slots[t % window] = t
        held = sorted(p for p in slots if p >= 0)
        allowed = sliding_window_mask(t + 1, window)[t].nonzero().flatten().tolist()
        if held != allowed:
            raise AssertionError(f"at step {t} the cache holds {held}, the window allows {allowed}")
        history.append(list(slots))
    return history


class _CacheWatch(nn.Module):
    """``model`` as it is, recording the cache's length (positions per layer) at every call."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model, self.lengths = model, []

    def forward(self, tokens, attn_mask=None, past_kv=None, positions=None):
        self.lengths.append(0 if past_kv is None else past_kv[0][0].shape[2])
        return self.model(tokens, attn_mask=attn_mask, past_kv=past_kv, positions=positions)


#: The model of :func:`window_generation`: small, three layers (so that the window's reach grows).
WINDOW_MODEL = {"vocab_size": 16, "d_model": 32, "num_heads": 2, "d_ff": 64, "num_layers": 3, "max_len": 64}


def describe_window_generation(rolled: dict) -> str:
    """:func:`window_generation`'s result as the page prints it."""
    return "\n".join([
        _("W = {W}, {layers} layers, {n} new tokens", W=rolled["window"], layers=rolled["layers"],
          n=rolled["new_tokens"]),
        _("most positions in a layer's cache: {n}", n=rolled["cache_max"]),
        _("rolling cache vs the whole sequence: same tokens {same},", same=rolled["same_tokens"]),
        "  " + _("logits within {gap:.1e}, {units:.0f} times float64's machine epsilon at their size",
                 gap=rolled["logit_gap"], units=rolled["logit_units"]),
        _("re-reading the last W tokens: logits off by up to {gap:.2f},", gap=rolled["reread_gap"]),
        "  " + _("{differ} of {n} greedy tokens different", differ=rolled["reread_tokens_differ"],
                 n=rolled["new_tokens"]),
        _("learned positions: max_len = {max_len}; the longest generation: {longest} tokens",
          max_len=rolled["max_len"], longest=rolled["longest"]),
        "  " + _("(one more raises ValueError: position {position} is past the model's max_len)",
                 position=rolled["max_len"]),
    ])


@torch.no_grad()
def window_generation(window: int = 6, prompt_len: int = 4, new_tokens: int = 40, seed: int = 0) -> dict:
    """Greedy generation by the reference ``generate_with_window`` with a rolling cache, on a randomly
    initialised :class:`~attention_course.masked_gpt.MaskedGPT` of :data:`WINDOW_MODEL`'s sizes
    (float64), against (a) the whole sequence run once through the same model under
    ``sliding_window_mask`` and no cache, and (b) a model that only re-reads the last ``window``
    tokens at every step (causal mask, their own positions). Returns ``cache_max`` (the most
    positions per layer the cache passed to the model held), ``same_tokens``/``logit_gap`` (the
    rolling cache against (a); ``logit_units``: the gap over float64's epsilon times the largest
    logit, checked under ``2**10``, the page's "last bits"), and ``reread_gap`` and ``reread_tokens_differ`` (the re-read
    model's logits against (a), and how many of its tokens differ from the cache's), and ``max_len``
    and ``longest`` (the model's learned positions, and the longest sequence generation reaches
    before they run out, however small the cache)."""
    torch.manual_seed(seed)
    model = MaskedGPT(**WINDOW_MODEL).double().eval()
    generator = torch.Generator().manual_seed(seed)
    prompt = torch.randint(WINDOW_MODEL["vocab_size"], (1, prompt_len), generator=generator)
    watched = _CacheWatch(model)
    tokens, logits = generate_with_window(watched, prompt, new_tokens, window)
    T = tokens.shape[1]
    whole, _cache = model(tokens, attn_mask=sliding_window_mask(T, window))
    whole = whole[:, prompt_len - 1:T - 1]
    same = bool(torch.equal(whole.argmax(-1), tokens[:, prompt_len:]))
    def reread(seq, t):  # the next-token logits at position t from the last `window` tokens alone
        start = max(0, t - window)
        return model(seq[:, start:t], positions=torch.arange(start, t))[0][:, -1]

    reread_tokens = prompt
    for t in range(prompt_len, T):
        reread_tokens = torch.cat([reread_tokens, reread(reread_tokens, t).argmax(-1, keepdim=True)], dim=1)
    # on the cache's own tokens, the re-read logits against the whole-sequence reference
    gap = max(float((reread(tokens, t) - whole[:, t - prompt_len]).abs().max()) for t in range(prompt_len, T))
    logit_gap = float((logits - whole).abs().max())
    # the gap over float64's machine epsilon at the logits' size: "to the last bits" means under 2^10
    logit_units = logit_gap / (torch.finfo(torch.float64).eps * float(whole.abs().max()))
    # what the page says: the rolling cache is the whole sequence's computation, the re-read is not
    if not same or logit_units > 2 ** 10 or max(watched.lengths) >= window:
        raise AssertionError(f"the rolling cache differs from the whole sequence (logits {logit_gap:.1e}, "
                             f"{logit_units:.0f} machine epsilons) or held {max(watched.lengths)} positions")
    if gap < 1e-6:
        raise AssertionError("re-reading the last window of tokens gave the whole sequence's logits")
    longest = _longest_generation(model, prompt, window)
    return {"cache_max": max(watched.lengths), "calls": len(watched.lengths), "same_tokens": same,
            "logit_gap": logit_gap, "logit_units": logit_units, "reread_gap": gap,
            "reread_tokens_differ": int((reread_tokens[:, prompt_len:] != tokens[:, prompt_len:]).sum()),
            "new_tokens": new_tokens, "window": window, "layers": WINDOW_MODEL["num_layers"],
            "max_len": WINDOW_MODEL["max_len"], "longest": longest}


def _longest_generation(model: nn.Module, prompt: torch.Tensor, window: int) -> int:
    """The longest sequence (prompt included) ``generate_with_window`` makes with ``model`` before the
    model's table of ``max_len`` learned positions runs out: one more token raises its ``ValueError``.
    The last token is chosen but never read, so it may sit at position ``max_len``."""
    longest = model.max_len + 1
    generate_with_window(model, prompt, longest - prompt.shape[1], window)
    try:
        generate_with_window(model, prompt, longest + 1 - prompt.shape[1], window)
    except ValueError:
        return longest
    raise AssertionError(f"generation ran past {longest} tokens with {model.max_len} learned positions")


# --------------------------------------------------------------------------------------
# Diagrams (the drawing kit of figures.diagrams)
# --------------------------------------------------------------------------------------

_SKIPPED, _FULL, _DIAGONAL, _NOW = "#ffffff", "#d9e4f5", "#fde9c9", "#f4a6a0"
# a tile's kind shows without its colour too (WCAG 1.4.1): the diagonal hatched, the current tile's edge thick
_TILE_STYLE = {_SKIPPED: {}, _FULL: {}, _DIAGONAL: {"hatch": "//"}, _NOW: {"linewidth": 3.0, "edgecolor": "#000000"}}


def _tile(xy, size: float, colour: str) -> Rectangle:
    """A tile of :func:`draw_tiled_loop`'s grid or legend, in its kind's colour and style."""
    return Rectangle(xy, size, size, **{"facecolor": colour, "edgecolor": "#444444", "linewidth": 1.0,
                                        **_TILE_STYLE[colour]})


def draw_tiled_loop(blocks: int = 4, now: tuple[int, int] = (2, 1)):
    """The tiled, causal forward pass (FlashAttention-2's loop order) on a ``blocks x blocks``
    grid of score tiles: each tile's number is its turn; tiles above the diagonal are skipped;
    the tile of turn ``now`` (query block, key block) is drawn in fast memory with what it
    needs, the rest of the tensors stay in slow memory."""
    fig, ax = _canvas(WIDTH, 5.6)
    cell, x0, y_top = 0.62, 0.75, 4.55
    ax.text(0.05, 5.35, _("tiled causal attention: outer loop over query blocks, inner over key blocks"),
            ha="left", va="center", fontsize=LABEL, weight="bold")
    turn = now_turn = 0
    for i in range(blocks):
        ax.text(x0 - 0.1, y_top - (i + 0.5) * cell, f"Q{i + 1}", ha="right", va="center", fontsize=SMALLEST)
        for j in range(blocks):
            x, y = x0 + j * cell, y_top - (i + 1) * cell
            if j > i:
                colour, label = _SKIPPED, _("skip")
            else:
                turn += 1
                colour, label = (_NOW if (i, j) == now else _DIAGONAL if i == j else _FULL), str(turn)
                now_turn = turn if (i, j) == now else now_turn
            ax.add_patch(_tile((x, y), cell, colour))
            ax.text(x + cell / 2, y + cell / 2, label, ha="center", va="center",
                    fontsize=SMALLEST, color="#888888" if j > i else "#222222")
    for j in range(blocks):
        ax.text(x0 + (j + 0.5) * cell, y_top + 0.12, f"K{j + 1},V{j + 1}", ha="center", va="bottom", fontsize=SMALLEST)
    grid_bottom = y_top - blocks * cell
    legend = [(_FULL, _("computed, no mask")), (_DIAGONAL, _("diagonal: mask inside")), (_NOW, _("in fast memory now"))]
    for k, (colour, text) in enumerate(legend):
        y = grid_bottom - 0.35 - 0.32 * k
        ax.add_patch(_tile((x0, y - 0.1), 0.2, colour))
        ax.text(x0 + 0.3, y, text, ha="left", va="center", fontsize=SMALLEST)
    ax.text(x0, grid_bottom - 0.35 - 0.32 * len(legend), _("skip: every key is in the future"),
            ha="left", va="center", fontsize=SMALLEST)
    # slow and fast memory, right of the grid
    qi, kj = now[0] + 1, now[1] + 1
    slow = _box(ax, 5.45, 4.35, 3.6, 1.05, "", "data")
    ax.text(slow["left"][0] + 0.1, 4.72, _("slow memory (GPU: HBM; CPU: RAM)"), ha="left", va="center",
            fontsize=SMALLEST, weight="bold")
    ax.text(slow["left"][0] + 0.1, 4.25, "Q, K, V, O  (B, h, T, d)\nlse          (B, h, T)", ha="left",
            va="center", fontsize=SHAPE, family="monospace")
    fast = _box(ax, 5.45, 2.3, 3.6, 1.9, "", "attention")
    ax.text(fast["left"][0] + 0.1, 3.0, _("fast memory (GPU: SRAM)"), ha="left", va="center", fontsize=SMALLEST,
            weight="bold")
    ax.text(fast["left"][0] + 0.1, 2.15,
            _("Q{q}              (b_q, d)\n"
              "K{k}, V{k}          (b_k, d)\n"
              "S = Q{q} K{k}ᵀ / √d  (b_q, b_k)\n"
              "max m, sum l    (b_q)\n"
              "O{q} so far       (b_q, d)", q=qi, k=kj),
            ha="left", va="center", fontsize=SHAPE, family="monospace")
    ax.text(fast["left"][0], fast["bottom"][1] - 0.3, _("each turn: S, then m, l and O rescaled;\nS is dropped"),
            ha="left", va="center", fontsize=SMALLEST)
    _arrow(ax, (4.9, slow["bottom"][1]), (4.9, fast["top"][1]), _("Q{q} once, K{k} V{k}", q=qi, k=kj), side="left")
    _arrow(ax, (6.0, fast["top"][1]), (6.0, slow["bottom"][1]), _("O{q}, lse at\nthe row's end", q=qi))
    ax.text(0.05, 0.3, _("per query block: O and lse are written once; the (T, T) matrix never exists"),
            ha="left", va="center", fontsize=SMALLEST)
    return finding(fig, _(
        "The tiled causal forward pass on a {n} by {n} grid of score tiles: rows are query blocks Q1 to Q{n}, columns "
        "key and value blocks K1,V1 to K{n},V{n}. Tiles above the diagonal say skip: every key there is in the "
        "future. The others are numbered 1 to {turns} in the order of the loops, row by row: 1 is (Q1, K1); 2 and 3 "
        "are (Q2, K1) and (Q2, K2); and so on; the diagonal tiles, hatched, need the mask inside. Tile {now}, "
        "(Q{q}, K{k}), drawn with a thick edge, is the one in fast memory now. On the right, slow memory (HBM on a "
        "GPU, RAM on a CPU) holds Q, K, V and O of shape (B, h, T, d) and lse of shape (B, h, T). Fast memory (SRAM) "
        "holds Q{q} (b_q, d), K{k} and V{k} (b_k, d), the scores S = Q{q} K{k} transposed over the square root of d "
        "of shape (b_q, b_k), the running max m and sum l (b_q) and the output of Q{q} so far (b_q, d). Q{q} is "
        "loaded once, K{k} and V{k} stream in; O{q} and its lse go back to slow memory at the end of the row. The "
        "(T, T) matrix never exists.",
        n=blocks, turns=turn, now=now_turn, q=qi, k=kj))


def draw_grouped_heads(num_heads: int = 8, groups=(8, 2, 1)):
    """Query heads and the key-value heads they read, for multi-head (as many key-value heads as
    query heads), grouped-query and multi-query attention; query head ``i`` reads key-value head
    ``i // (num_heads // num_kv_heads)``. Beside each: what the cache holds per position and layer."""
    fig, ax = _canvas(WIDTH, 5.7)
    names = {num_heads: _("multi-head"), 1: _("multi-query")}
    cell = 0.5
    x0 = 0.35
    for row, kv in enumerate(groups):
        y_q = 5.05 - row * 1.7
        y_kv = y_q - 0.85
        group = num_heads // kv
        title = names.get(kv) or _("grouped-query")
        heading = (_("{title}: {h} query heads, {kv} key-value heads", title=title, h=num_heads, kv=kv) if kv > 1
                   else _("{title}: {h} query heads, 1 key-value head", title=title, h=num_heads))
        ax.text(x0 - 0.3, y_q + 0.42, heading,
                ha="left", va="center", fontsize=SMALLEST, weight="bold")
        kv_boxes = []
        for k in range(kv):
            centre = x0 + (k * group + (group - 1) / 2) * cell + cell / 2
            width = group * cell - 0.08
            kv_boxes.append(_box(ax, centre, y_kv, width, 0.34, f"K{k}, V{k}" if width > 0.7 else f"kv{k}", "linear",
                                 size=SMALLEST))
        for i in range(num_heads):
            q = _box(ax, x0 + i * cell + cell / 2, y_q, cell - 0.08, 0.34, f"q{i}", "attention", size=SMALLEST)
            target = kv_boxes[i // group]
            ax.plot([q["bottom"][0], q["bottom"][0]], [q["bottom"][1], target["top"][1]], color="#666666",
                    linewidth=1.0)
        x_text = x0 + num_heads * cell + 0.3
        ax.text(x_text, (y_q + y_kv) / 2,
                _("cache per position and layer:\n2 x {kv} x d numbers\n{group} query heads share each", kv=kv,
                  group=group) if group > 1 else
                _("cache per position and layer:\n2 x {kv} x d numbers\none key-value head per query head", kv=kv),
                ha="left", va="center", fontsize=SMALLEST)
    ax.text(0.05, 0.2, _("keys and values (B, h_kv, T, d); queries (B, h, T, d); head i reads i // (h / h_kv)"),
            ha="left", va="center", fontsize=SHAPE, family="monospace")
    # one message, its rows a value: the Chinese build translates each recorded sentence inside it
    return finding(fig, _(
        "{rows} rows, each with {h} query heads q0 to q{last} on top and the key-value heads they read below. "
        "{each} Keys and values have shape (B, h_kv, T, d), queries (B, h, T, d); query head i reads key-value head "
        "i // (h / h_kv).", rows=len(groups), h=num_heads, last=num_heads - 1,
        each=" ".join(_grouped_heads_row(num_heads, kv) for kv in groups)))


def _grouped_heads_row(num_heads: int, kv: int) -> str:
    """What one row of :func:`draw_grouped_heads` shows, in a sentence."""
    if kv == num_heads:
        return _("Multi-head attention: {kv} key-value heads kv0 to kv{last}, one under each query head; the cache "
                 "holds 2 x {kv} x d numbers per position and layer.", kv=kv, last=kv - 1)
    if kv == 1:
        return _("Multi-query attention: one key-value head K0, V0 read by all {h} query heads; the cache holds "
                 "2 x 1 x d numbers.", h=num_heads)
    group = num_heads // kv
    return _("Grouped-query attention: {kv} key-value heads, K0, V0 to K{last}, V{last}, each read by {group} "
             "neighbouring query heads (K0, V0 by q0 to q{first_last}); the cache holds 2 x {kv} x d numbers.",
             kv=kv, last=kv - 1, group=group, first_last=group - 1)
