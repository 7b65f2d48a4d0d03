"""The limits every submission runs under, in one place.

Change them here for the whole course, or per run with ``python -m autograder grade
--cell-timeout S --notebook-timeout S --memory-mb M``.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Limits:
    # seconds one cell may run (graded training cells need up to their stated budget)
    cell_timeout_s: int = 300
    # seconds the whole notebook may run, start-up included
    notebook_timeout_s: int = 1200
    # address space of the grading process and its kernel, in MiB
    memory_mb: int = 4096
