"""Chapter 10's measurements over seeds: ``python -m benchmarks.what_attention_learns`` (part of ``make bench``).

The book page of chapter 10 trains one attention-only model (seed 0) and measures it; this runs
the same measurements for several seeds, with the page's code (``book/figures/ch10.py``), so that
the page and this benchmark measure the same thing:

* **the phase change**: the model of ``attention_course.recipes.INDUCTION`` trained by
  ``train_induction_model`` (one CPU thread, as the notebook trains it; on CUDA too when present),
  probed every 10 steps: its training CPU seconds, the held-out loss on the repeat against the
  bar, the step at which the repeat's loss is half-way down, the share of the fall in the
  steepest eighth of the run, and the two heads ``find_heads`` names with their scores;
* **the ablation**: how far removing each of the two heads takes the repeat's loss back to chance;
* **generation past the training length**: from prompts of the training length, greedy
  generation for ``--times`` training lengths with chapter 9's window and rolling cache and with
  chapter 8's growing cache, the share of new tokens that continue the repeat.

The last line printed is ``chapter 10: phase change half-way at steps A to B over N seeds; window W
continues the repeat X% at T tokens (no window Y%)``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book"))

from attention_course.recipes import INDUCTION  # noqa: E402
from figures.ch10 import _ablation_facts, ablation, induction_run, phase_change, window_generation  # noqa: E402

__all__ = ["main", "measure", "format_runs"]

SEEDS = (0, 1, 2, 3, 4)


def measure(seed: int, times: int, device=None) -> dict:
    """One seed: the page's run, phase change, ablation and generation, as one row."""
    run = induction_run(seed=seed, device=device)
    change = phase_change(run)
    facts = _ablation_facts(ablation(run))
    row = {"seed": seed, "device": run["history"]["device"], "cpu": run["cpu_seconds"], "seconds": run["history"]["seconds"],
           "loss": run["history"]["valid_repeat_loss"][-1], "jump": change["jump"], "share": change["fall_share"],
           "previous_head": run["previous_head"], "induction_head": run["induction_head"],
           "previous_score": float(run["final_previous"][run["previous_head"]]),
           "induction_score": float(run["final_induction"][run["induction_head"]]),
           "ablate_previous": facts["previous"], "ablate_induction": facts["induction"]}
    if times:
        generated = window_generation(run, times=times)
        row.update(window=generated["correct_window"], full=generated["correct_full"], total=generated["total"],
                   W=generated["window"])
    return row


def format_runs(rows: list[dict]) -> list[str]:
    """One line per seed."""
    lines = [f"{'seed':>4s} {'device':>6s}{'CPU s':>7s}{'wall s':>7s}{'loss':>7s}{'jump':>6s}{'fall':>6s}"
             f"  {'prev head':>9s}{'score':>6s}  {'ind head':>9s}{'score':>6s}{'abl prev':>9s}{'abl ind':>8s}"
             f"{'window':>8s}{'no win':>8s}"]
    for r in rows:
        gen = f"{r['window']:8.1%}{r['full']:8.1%}" if "window" in r else ""
        lines.append(f"{r['seed']:4d} {r['device']:>6s}{r['cpu']:7.1f}{r['seconds']:7.1f}{r['loss']:7.3f}{r['jump']:6d}"
                     f"{r['share']:6.0%}  {'L%d H%d' % r['previous_head']:>9s}{r['previous_score']:6.2f}"
                     f"  {'L%d H%d' % r['induction_head']:>9s}{r['induction_score']:6.2f}"
                     f"{r['ablate_previous']:9.0%}{r['ablate_induction']:8.0%}{gen}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.what_attention_learns", description=(
        "Chapter 10: the induction model's phase change, heads, ablation and windowed generation over seeds."))
    parser.add_argument("--quick", action="store_true", help="a smoke run: one seed, a short generation")
    parser.add_argument("--times", type=int, default=50, help="generate this many training lengths (default 50)")
    args = parser.parse_args(argv)
    import torch

    seeds = SEEDS[:1] if args.quick else SEEDS
    times = 3 if args.quick else args.times
    print(f"chapter 10: the induction model of the recipe ({INDUCTION.training['num_steps']} steps), bar "
          f"{INDUCTION.bar} nats on the repeat; generation for {times} training lengths")
    rows = [measure(seed, times) for seed in seeds]
    if torch.cuda.is_available():
        rows += [measure(seed, 0, device="cuda") for seed in seeds]
    print("\n".join(format_runs(rows)))
    cpu = [r for r in rows if "window" in r]
    print(f"chapter 10: phase change half-way at steps {min(r['jump'] for r in cpu)} to {max(r['jump'] for r in cpu)} "
          f"over {len(cpu)} seeds (median CPU {statistics.median(r['cpu'] for r in cpu):.1f} s); window "
          f"{cpu[0]['W']} continues the repeat {min(r['window'] for r in cpu):.1%} at {cpu[0]['total']} tokens "
          f"(no window {max(r['full'] for r in cpu):.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
