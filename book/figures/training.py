"""Words for a training curve, computed from the history the figure draws."""

import math

import numpy as np

from figures.i18n import N_, _

#: The words of the course package's training-curve figure (``attention_course.seq2seq.plot_loss``,
#: which learners also draw in their notebooks, in English) and the titles the pages give it:
#: the Chinese book translates them where they appear as a whole text of a figure.
LOSS_FIGURE_WORDS = (N_("training loss (one batch)"), N_("training loss (mean of 25 steps)"), N_("validation loss"),
                     N_("training step"), N_("cross-entropy per token (nats)"), N_("training and validation loss"),
                     N_("Transformer on the dates: training and validation loss"),
                     N_("GPT on the dates as prompts: training and validation loss"))
#: The words of ``attention_course.seq2seq.plot_alignment``'s figure.
ALIGNMENT_FIGURE_WORDS = (N_("source character"), N_("output character"))


def describe_run(history: dict, accuracy: float, count: int) -> str:
    """One line for a training run on the dates: its steps, CPU and wall time and device, and the
    held-out exact match of ``count`` dates."""
    return _("{steps} steps, {cpu:.1f} s of CPU ({wall:.0f} s wall) on {device}; held-out exact match "
             "{accuracy:.1%} of {count} dates", steps=history["steps_done"], cpu=history["cpu_seconds"],
             wall=history["seconds"], device=history["device"], accuracy=accuracy, count=count)


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
    lines = [_("training loss: {start:.3g} (mean of the first {window} steps) to {end:.3g} (last {window}), "
               "{orders:.1f} orders of magnitude", start=start, window=window, end=end, orders=math.log10(start / end))]
    if last is not None:
        if not window <= last < len(loss) - window:
            raise ValueError(f"last = {last} must leave a window of {window} steps on each side")
        before = loss[-last - window:-last].mean()
        share = math.log10(before / end) / math.log10(start / end)
        lines.append("  " + _("of which {share:.0%} (on the log scale) in the last {last} steps", share=share, last=last))
    valid = history.get("valid_loss") or []
    if valid:
        lines.append(_("validation loss: {first:.3g} at the first evaluation, {last:.3g} at the last",
                       first=valid[0], last=valid[-1]))
    return "\n".join(lines)
