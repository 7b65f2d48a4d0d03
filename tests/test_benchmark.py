"""``make bench`` runs and ends with its ratio line (a smoke test: speed itself is read
from the figures it prints, never asserted by a timed test)."""

from __future__ import annotations

import re
import subprocess
import sys

import notebook_tools as nbt


def _quick_run(module: str) -> list[str]:
    """The lines ``python -m <module> --quick`` prints, once it has exited with 0."""
    done = subprocess.run([sys.executable, "-m", module, "--quick"], cwd=nbt.ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()


def test_quick_benchmark_prints_the_table_and_the_ratio_line():
    lines = _quick_run("benchmarks.transformer")
    assert re.fullmatch(r"step-time ratio course/torch: \d+\.\d\d \(cpu\)", lines[-1]), lines[-1]
    assert any(line.split()[:2] == ["cpu", "course"] for line in lines)
    assert any(line.split()[:2] == ["cpu", "torch"] for line in lines)
    # the generation figure: one row per length, the three models writing the same tokens
    generation = [line.split() for line in lines if re.match(r"cpu\s+\d+\s+[\d,]+\s+[\d,]+\s+[\d,]+\s+[\d.]+x", line)]
    assert [row[1] for row in generation] == ["16", "32", "64"] and all(row[-1] == "yes" for row in generation), lines


def test_bench_rejects_a_bad_step_count():
    done = subprocess.run([sys.executable, "-m", "benchmarks.transformer", "--steps", "0"], cwd=nbt.ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "steps" in done.stderr


def test_quick_chapter_9_benchmark_prints_its_tables_and_last_line():
    lines = _quick_run("benchmarks.attention_at_scale")
    assert re.fullmatch(r"chapter 9: largest tensor at T=512, as float32: plain 1\.0 MiB, tiled 0\.1 MiB", lines[-1]), lines[-1]
    # four methods at each of the two lengths, on the CPU
    memory = [line.split() for line in lines if re.match(r"cpu\s+\d+\s+", line)]
    assert [row[1] for row in memory] == ["256"] * 4 + ["512"] * 4, lines
    # one row per number of key-value heads, the cache shrinking with them
    gqa = [line.split() for line in lines if re.match(r"\s+[421]\s+[\d,]+\s+[\d,]+\s+[\d.]+%", line)]
    assert [(row[0], row[1]) for row in gqa] == [("4", "1,024"), ("2", "512"), ("1", "256")], lines
