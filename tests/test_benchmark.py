"""``make bench`` runs and ends with its ratio line (a smoke test: speed itself is read
from the figures it prints, never asserted by a timed test)."""

from __future__ import annotations

import re
import subprocess
import sys

import notebook_tools as nbt


def test_quick_benchmark_prints_the_table_and_the_ratio_line():
    done = subprocess.run([sys.executable, "-m", "benchmarks.transformer", "--quick"], cwd=nbt.ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
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
