"""The limits every submission runs under, in one place.

Change the defaults here for the whole course, or per run with the flags of
``python -m autograder grade`` (``--help`` lists them).
"""

from __future__ import annotations

import dataclasses


#: The environment variables that size NumPy's and PyTorch's pools of threads (OpenMP, MKL, OpenBLAS).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@dataclasses.dataclass(frozen=True)
class Limits:
    # seconds one cell may run (graded training cells need up to their stated budget)
    cell_timeout_s: int = 300
    # seconds the whole notebook may run, start-up included
    notebook_timeout_s: int = 1200
    # address space of the student's process, in MiB
    memory_mb: int = 4096
    # processes (and threads) the student's code may have at once
    processes: int = 256
    # size of the private writable /tmp (a tmpfs), and of any one file, in MiB
    disk_mb: int = 512
    # characters of printed output kept per cell; the rest is dropped
    output_chars: int = 20_000
    # threads for NumPy / PyTorch in the student's process, and in its judge
    threads: int = 1
