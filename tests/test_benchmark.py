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


def test_bench_rejects_a_bad_step_count():
    done = subprocess.run([sys.executable, "-m", "benchmarks.transformer", "--steps", "0"], cwd=nbt.ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "steps" in done.stderr
