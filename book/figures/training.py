"""Words for a training curve, computed from the history the figure draws."""

import math

import numpy as np


def describe_loss(history: dict, window: int = 25, last: int | None = None) -> str:
    """How far the training loss fell (orders of magnitude, between the means of its first and
    last ``window`` steps), and, when ``last`` is given, how much of that fall came in the last
    ``last`` steps; then the validation loss at its first and last evaluation.

    ``history`` is what the course's training loops return: ``loss`` per step, and
    ``valid_loss`` per evaluation when there was one.
    """
    loss = np.asarray(history["loss"], dtype=float)
    if len(loss) < 2 * window:
        raise ValueError(f"{len(loss)} steps are too few to compare two windows of {window}")
    start, end = loss[:window].mean(), loss[-window:].mean()
    lines = [f"training loss: {start:.3g} (mean of the first {window} steps) to {end:.3g} "
             f"(last {window}), {math.log10(start / end):.1f} orders of magnitude"]
    if last is not None:
        if not window <= last < len(loss) - window:
            raise ValueError(f"last = {last} must leave a window of {window} steps on each side")
        before = loss[-last - window:-last].mean()
        share = math.log10(before / end) / math.log10(start / end)
        lines.append(f"  of which {share:.0%} (on the log scale) in the last {last} steps")
    valid = history.get("valid_loss") or []
    if valid:
        lines.append(f"validation loss: {valid[0]:.3g} at the first evaluation, {valid[-1]:.3g} at the last")
    return "\n".join(lines)
