"""Words for a training curve, computed from the history the figure draws; and the training runs
that one build of the book makes once and shows on two pages (:func:`kept_run`)."""

import hashlib
import math
import os
from pathlib import Path

import numpy as np
import torch

from attention_course.recipes import Recipe, listed
from figures.describe import finding
from figures.i18n import N_, _

#: The environment variable naming the folder where a build of the book keeps its training runs
#: (``make book``: ``_build/.runs``; ``tests/test_book.py``: the build's own folder). Unset, every
#: page trains what it shows.
RUNS = "COURSE_BOOK_RUNS"

# the code a run depends on: the course package and the figures
_CODE = (Path(__file__).resolve().parents[2] / "attention_course", Path(__file__).resolve().parent)


def _run_key(name: str, inputs) -> str:
    digest = hashlib.sha256(f"{name}\n{inputs!r}\n{torch.__version__}".encode())
    for folder in _CODE:
        for path in sorted(folder.rglob("*.py")):
            digest.update(str(path.relative_to(folder.parent)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:24]


def _kept_path(name: str, inputs) -> Path | None:
    folder = os.environ.get(RUNS)
    return Path(folder) / f"{name}-{_run_key(name, inputs)}.pt" if folder else None


def kept_run(name: str, inputs, model: torch.nn.Module, train) -> dict:
    """``train(model)`` (a training run that returns its history), once per build: a page that
    shows a run another page of the same build made (chapter 8's page beside chapter 7's
    Transformer) finds it in the folder named by :data:`RUNS` and loads it instead of training
    the same model a second time. A run is found only under the same ``name``, the same
    ``inputs`` (their ``repr``: the data and the settings; the weights ``model`` starts from
    are drawn from them) and the same code (the course package, the figures and PyTorch's
    version). Loading gives ``model`` the trained weights and the training's mode, and the global
    random generator its state after the training, as the training itself would; the history,
    its times included, is that of the run that trained it. Returns the history."""
    path = _kept_path(name, inputs)
    if path is not None and path.is_file():
        kept = torch.load(path, weights_only=False)  # written by this function, in this build's folder
        model.load_state_dict(kept["weights"])
        model.train(kept["training"])
        torch.set_rng_state(kept["rng"])
        return kept["history"]
    history = train(model)
    keep_run(name, inputs, model, history)
    return history


def keep_run(name: str, inputs, model: torch.nn.Module, history: dict) -> None:
    """Keep a run that a page made in the open (chapter 3's, whose code the reader copies) for a
    later page of the same build, which finds it through :func:`kept_run` under the same ``name``
    and ``inputs``. Called right after the training, before anything else draws a random number."""
    path = _kept_path(name, inputs)
    if path is not None and getattr(history, "done", True):  # a paused run goes on in its own page only
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        torch.save({"weights": model.state_dict(), "training": model.training, "rng": torch.get_rng_state(),
                    "history": history}, partial)
        partial.replace(path)


def date_run(task, seed: int, recipe, **train_options) -> tuple:
    """What a training run on the dates depends on, as :func:`kept_run`'s ``inputs``: the task's
    vocabularies and splits, the seed, the recipe's model settings and its training settings
    (``train_options`` override them)."""
    data = (task.src_vocab.tokens, task.tgt_vocab.tokens, task.train, task.valid, task.test)
    return data, seed, recipe.model, {**recipe.training, **train_options}


#: The words of the course package's training-curve figure (``attention_course.seq2seq.plot_loss``,
#: which learners also draw in their notebooks, in English) and the titles the pages give it:
#: the Chinese book translates them where they appear as a whole text of a figure.
LOSS_FIGURE_WORDS = (N_("training loss (one batch)"), N_("training loss (mean of 25 steps)"), N_("validation loss"),
                     N_("training step"), N_("cross-entropy per token (nats)"), N_("training and validation loss"),
                     N_("Transformer on the dates: training and validation loss"),
                     N_("GPT on the dates as prompts: training and validation loss"))
#: The words of ``attention_course.seq2seq.plot_alignment``'s figure.
ALIGNMENT_FIGURE_WORDS = (N_("source character"), N_("output character"))


def recipe_lines(recipe: Recipe) -> tuple[str, str]:
    """``str(recipe)``'s two lines, the model's sizes and the training's arguments, each a message
    the Chinese book says in Chinese."""
    return (_("model: {sizes}", sizes=listed(recipe.model)),
            _("training: {arguments}", arguments=listed(recipe.training)))


def describe_recipe(recipe: Recipe) -> str:
    """What ``print(recipe)`` shows, in the book's language (:func:`recipe_lines`)."""
    return "\n".join(recipe_lines(recipe))


def describe_run(history: dict, accuracy: float, count: int) -> str:
    """One line for a training run on the dates: its steps, CPU and wall time and device, and the
    held-out exact match of ``count`` dates."""
    return _("{steps} steps, {cpu:.1f} s of CPU ({wall:.0f} s wall) on {device}; held-out exact match "
             "{accuracy:.1%} of {count} dates", steps=history["steps_done"], cpu=history["cpu_seconds"],
             wall=history["seconds"], device=history["device"], accuracy=accuracy, count=count)


def loss_fall(history: dict, window: int = 25) -> tuple[float, float]:
    """The means of the training loss over its first and its last ``window`` steps (what
    :func:`describe_loss` prints and :func:`plot_loss`'s finding says)."""
    loss = np.asarray(history["loss"], dtype=float)
    if len(loss) < 2 * window:
        raise ValueError(f"{len(loss)} steps are too few to compare two windows of {window}")
    return float(loss[:window].mean()), float(loss[-window:].mean())


def plot_loss(history: dict, title: str | None = None, window: int = 25):
    """``attention_course.seq2seq.plot_loss``'s figure of ``history``, with the finding the pages
    draw from it (:func:`describe_loss`'s numbers): how far the training loss fell, and where
    the validation loss began and ended."""
    from attention_course.seq2seq import plot_loss as plot

    fig = plot(history, title=title)
    start, end = loss_fall(history, window)
    valid = history.get("valid_loss") or []
    if valid:
        return finding(fig, _("The training loss falls from {start:.3g} (mean of the first {window} steps) to {end:.3g} "
                              "(mean of the last {window}), {orders:.1f} orders of magnitude; the validation loss "
                              "from {first:.3g} at the first evaluation to {last:.3g} at the last.", start=start,
                              end=end, window=window, orders=math.log10(start / end), first=valid[0], last=valid[-1]))
    return finding(fig, _("The training loss falls from {start:.3g} (mean of the first {window} steps) to {end:.3g} "
                          "(mean of the last {window}), {orders:.1f} orders of magnitude.", start=start, end=end,
                          window=window, orders=math.log10(start / end)))


def describe_loss(history: dict, window: int = 25, last: int | None = None) -> str:
    """How far the training loss fell (orders of magnitude, between the means of its first and
    last ``window`` steps), and, when ``last`` is given, how much of that fall came in the last
    ``last`` steps; then the validation loss at its first and last evaluation.

    ``history`` is what the course's training loops return: ``loss`` per step, and
    ``valid_loss`` per evaluation when there was one.
    """
    loss = np.asarray(history["loss"], dtype=float)
    start, end = loss_fall(history, window)
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
