"""The training loop every trained chapter shares (3, 6 and 7).

:func:`fit` owns what does not depend on the task: Adam, the learning-rate schedule,
gradient clipping, the periodic evaluation, the wall-clock guard, the progress bar, the
timing, and one CPU thread while training. The task-specific loops
(:func:`attention_course.seq2seq.train_seq2seq`, :func:`attention_course.tagging.train_tagger`)
say how to compute the loss of one training step and how to evaluate.
:func:`init_transformer_weights` gives a Transformer (chapters 6 and 7) its starting weights.
"""

from __future__ import annotations

import time
from typing import Callable

import torch
from torch import nn

from attention_course.i18n import gettext

__all__ = ["History", "fit", "init_transformer_weights"]


class History(dict):
    """What :func:`fit` returns: the run's history (a dict of lists and figures) and, while the
    run is paused before its last step, the way to go on: :meth:`resume`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._next: Callable[[], "History"] | None = None

    @property
    def done(self) -> bool:
        """Whether the run is over (its last step taken, or stopped by its wall-clock guard)."""
        return self._next is None

    def resume(self) -> None:
        """Train the next part of a paused run (``pause_every`` more steps, or what is left),
        updating this history in place. A finished run prints so and trains nothing."""
        if self._next is None:
            print(gettext("the training is over ({steps} steps): nothing to resume").format(steps=self.get("steps_done", 0)))
            return
        self._next()


def fit(
    model: nn.Module,
    training_loss: Callable[[int], torch.Tensor],
    evaluate: Callable[[], dict[str, float]],
    *,
    num_steps: int,
    lr: float,
    lr_lambda: Callable[[int], float],
    device: torch.device,
    betas: tuple[float, float] = (0.9, 0.999),
    clip: float = 1.0,
    eval_every: int = 100,
    max_seconds: float | None = None,
    progress: bool = True,
    pause_every: int | None = None,
) -> History:
    """Train ``model`` for ``num_steps`` Adam steps; return the history.

    ``training_loss(step)`` (steps count from 1) returns the loss of that step's batch, with
    the model in training mode. The learning rate of step ``s`` is ``lr * lr_lambda(s)``;
    the gradient norm is clipped to ``clip``. Every ``eval_every`` steps, at the last step,
    and when ``max_seconds`` of wall time have run out (a guard for slow machines: the run
    then stops early and is no longer step-for-step reproducible), ``evaluate()`` runs in
    eval mode without gradients and its metrics are recorded. On the CPU the loop runs on
    one thread (restored afterwards): a model this small is as fast on one as on several,
    and one thread does not fight the other processes of a shared machine.

    With ``pause_every``, ``fit`` returns after that many steps and each ``history.resume()``
    trains the next as many (:class:`History`), so that a notebook can spread one run over
    several cells, each well within nbgrader's 30 seconds per cell. The optimizer, the
    schedule and the batches go on where they paused: the run is step for step the one that
    ``fit`` without pauses trains.

    Returns a :class:`History` (a dict): ``step`` and ``loss`` (per step), ``valid_step`` and
    one list per metric of ``evaluate``, ``seconds`` (wall time), ``cpu_seconds``,
    ``steps_done``, ``num_steps``, ``device``.
    """
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=betas)
    # LambdaLR counts from 0; the course's schedules count steps from 1
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_lambda(s + 1))
    history = History(step=[], loss=[], valid_step=[], device=str(device), num_steps=num_steps, seconds=0.0,
                      cpu_seconds=0.0, steps_done=0)

    def train_part() -> History:
        first = history["steps_done"] + 1
        last = num_steps if pause_every is None else min(num_steps, first - 1 + pause_every)
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=num_steps, initial=first - 1, desc=gettext("training"), unit=gettext("step"))
        threads = torch.get_num_threads()
        if device.type == "cpu":
            torch.set_num_threads(1)
        start, cpu_start = time.perf_counter(), time.process_time()
        step, out_of_time = first - 1, False
        try:
            for step in range(first, last + 1):
                model.train()
                loss = training_loss(step)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), clip)
                optimizer.step()
                schedule.step()
                history["step"].append(step)
                history["loss"].append(loss.item())
                out_of_time = (max_seconds is not None
                               and history["seconds"] + time.perf_counter() - start > max_seconds)
                if step % eval_every == 0 or step == num_steps or out_of_time:
                    model.eval()
                    with torch.no_grad():
                        metrics = evaluate()
                    history["valid_step"].append(step)
                    for name, value in metrics.items():
                        history.setdefault(name, []).append(value)
                if bar is not None:
                    bar.update(1)
                    if step % 25 == 0:
                        bar.set_postfix(loss=f"{history['loss'][-1]:.3f}")
                if out_of_time:
                    break
        finally:
            torch.set_num_threads(threads)
            if bar is not None:
                bar.close()
            model.eval()
            history["seconds"] += time.perf_counter() - start
            history["cpu_seconds"] += time.process_time() - cpu_start
            history["steps_done"] = step
        history._next = None if step == num_steps or out_of_time else train_part
        if history._next is not None:
            print(gettext("paused after step {step} of {steps}: history.resume() trains the next steps").format(
                step=step, steps=num_steps))
        return history

    return train_part()


def init_transformer_weights(model: nn.Module) -> nn.Module:
    """Give ``model`` the usual starting weights of a Transformer, whatever its layers drew.

    Every ``nn.Linear`` weight is Xavier-uniform (``torch.nn.Transformer`` gives the same
    to every parameter with more than one dimension) and every ``nn.Linear`` bias zero
    (``torch.nn.Transformer`` zeroes its attention's biases but leaves the feed-forward
    biases at ``nn.Linear``'s default), every ``nn.Embedding`` is normal with standard deviation
    ``1 / sqrt(width)``, so that the embeddings scaled by ``sqrt(d_model)`` have entries of
    size about 1, like the positional encoding they are added to. (PyTorch's default
    ``N(0, 1)`` embeddings, scaled up, would drown the positions.) The course's training
    cells call this, so training does not depend on how a layer initialised itself.
    Returns ``model``.
    """
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=module.embedding_dim ** -0.5)
    return model
