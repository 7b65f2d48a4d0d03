"""Chapter 9's measurements at full size: ``python -m benchmarks.attention_at_scale`` (part of ``make bench``).

The book page of chapter 9 measures these at sizes that take seconds; this runs them further:

* **memory and time**: causal attention, forward and backward, one head of width 64, one
  sequence, float32, on the CPU with one thread, for ``T`` from 512 to 8192, by chapter 2's plain
  formula, the reference ``TiledAttention`` (blocks of 128) and ``F.scaled_dot_product_attention``
  forced to its ``MATH`` and ``FLASH_ATTENTION`` backends: the largest tensor created (a
  ``TorchDispatchMode`` count, :mod:`attention_course.memory`), the growth of the peak resident
  size (in a forked process), CPU time per query row; on CUDA when present, 16 heads in float16,
  against the flash and math backends (``torch.cuda.max_memory_allocated``, CUDA events);
* **grouped-query attention**: chapter 8's GPT on the dates with 4, 2 and 1 key-value heads,
  each trained by chapter 8's whole recipe for seeds 0, 1, 2: the cache's bytes per token and the
  held-out exact match.

The measuring code is the page's (``book/figures/ch09.py``), so that the page and this
benchmark measure the same thing. The last line printed is
``chapter 9: largest tensor at T=N, as float32: plain X MiB, tiled Y MiB``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book"))

from attention_course.dates import make_date_task  # noqa: E402
from attention_course.prompts import make_prompt_task  # noqa: E402
from attention_course.recipes import DECODER_ONLY  # noqa: E402
from figures.ch09 import BLOCK, gpu_table, gqa_comparison, memory_table  # noqa: E402

__all__ = ["main", "format_memory", "format_gqa"]

SIZES = (512, 1024, 2048, 4096, 8192)
GPU_SIZES = (1024, 4096, 16384)
SEEDS = (0, 1, 2)
KV_HEADS = (4, 2, 1)


def format_memory(rows: list[dict], device: str = "cpu") -> list[str]:
    """One line per (T, method): the largest tensor (elements and MiB), the peak growth in MiB,
    milliseconds per forward and backward pass and microseconds per query row."""
    lines = [f"{'device':6s} {'T':>6s}  {'method':18s}{'largest, numbers':>18s}{'as f32 MiB':>11s}{'peak MiB':>10s}"
             f"{'ms':>10s}{'us/row':>9s}"]
    for r in rows:
        peak = "n/a" if r.get("peak_mib") is None else f"{r['peak_mib']:.1f}"
        if device == "cpu":
            lines.append(f"{device:6s} {r['T']:6d}  {r['method']:18s}{r['largest']:18,d}{r['largest_mib']:11.1f}"
                         f"{peak:>10s}{1e3 * r['seconds']:10.1f}{r['us_per_row']:9.1f}")
        elif r["ms"] is None:
            lines.append(f"{device:6s} {r['T']:6d}  {r['method']:18s}  out of memory")
        else:
            lines.append(f"{device:6s} {r['T']:6d}  {r['method']:18s}{'':18s}{'':11s}{peak:>10s}"
                         f"{r['ms']:10.2f}{r['us_per_row']:9.2f}")
    return lines


def format_gqa(runs: dict[int, list[dict]]) -> list[str]:
    """One line per number of key-value heads: the cache per token, the parameters, the held-out
    exact match of every seed, their mean, and the mean CPU seconds of training."""
    seeds = sorted(runs)
    lines = [f"{'kv heads':>8s}{'cache B/token':>15s}{'parameters':>12s}"
             + "".join(f"{'seed ' + str(s):>9s}" for s in seeds) + f"{'mean':>9s}{'train CPU s':>13s}"]
    for k, kv in enumerate(runs[seeds[0]]):
        rows = [runs[s][k] for s in seeds]
        lines.append(f"{kv['kv_heads']:8d}{kv['cache_bytes']:15,d}{kv['parameters']:12,d}"
                     + "".join(f"{r['accuracy']:9.1%}" for r in rows)
                     + f"{statistics.mean(r['accuracy'] for r in rows):9.1%}"
                     + f"{statistics.mean(r['cpu_seconds'] for r in rows):13.1f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.attention_at_scale", description=(
        "Chapter 9: peak memory and time of tiled attention against the plain formula and PyTorch's kernels, "
        "and grouped-query attention's cache and held-out accuracy."))
    parser.add_argument("--quick", action="store_true", help="a smoke run: small sizes, a short training, one seed")
    parser.add_argument("--part", choices=["all", "memory", "gqa"], default="all",
                        help="memory: the memory and time tables only; gqa: the grouped-query training only")
    args = parser.parse_args(argv)
    import torch

    sizes = (256, 512) if args.quick else SIZES
    if args.part in ("all", "memory"):
        rows = memory_table(sizes=sizes, repeats=1 if args.quick else 2)
        print("chapter 9: causal attention, forward + backward, one head of width 64, float32, one CPU thread")
        print("\n".join(format_memory(rows)))
        if torch.cuda.is_available():
            gpu = gpu_table(sizes=(256, 512) if args.quick else GPU_SIZES, repeats=2 if args.quick else 5)
            print(f"chapter 9 on {torch.cuda.get_device_name()}: 16 heads of width 64, float16")
            print("\n".join(format_memory(gpu, "cuda")))
    if args.part == "memory":
        return 0
    task = make_prompt_task(make_date_task(seed=0))
    steps = 20 if args.quick else DECODER_ONLY.training["num_steps"]
    seeds = SEEDS[:1] if args.quick else SEEDS
    runs = {seed: gqa_comparison(task, kv_heads=KV_HEADS, num_steps=steps, seed=seed) for seed in seeds}
    print(f"chapter 9: chapter 8's GPT with fewer key-value heads, {steps} training steps (chapter 8's recipe), "
          f"held-out exact match on {len(task.test)} dates")
    print("\n".join(format_gqa(runs)))
    if args.part == "gqa":
        return 0
    last = max(sizes)
    by = {r["method"]: r for r in rows if r["T"] == last}
    print(f"chapter 9: largest tensor at T={last}, as float32: plain {by['plain (chapter 2)']['largest_mib']:.1f} MiB, "
          f"tiled {by[f'tiled, blocks {BLOCK}']['largest_mib']:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
