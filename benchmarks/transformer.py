"""The course's Transformer against ``torch.nn.Transformer``: ``python -m benchmarks.transformer`` (``make bench``).

Both models have :func:`~attention_course.seq2seq.make_transformer`'s sizes (``d_model``
64, 4 heads, ``d_ff`` 128, 2 encoder and 2 decoder layers), post-norm, no dropout and the
*same starting weights* (the PyTorch model, :class:`TorchTransformer`, is a copy of the
course's, made by :func:`torch_twin`). They train on the same batches of the date task
(batch 128) with the recipe of :func:`~attention_course.seq2seq.train_transformer`,
in one process, on the CPU (one thread, as the course trains) and on CUDA when present.
For each model it measures

* **ms/step**: the median wall time of one training step (forward, loss, backward,
  gradient clipping, Adam, learning-rate schedule) over ``--steps`` timed steps, after a
  warm-up; the two models take turns step by step, so that a busy spell of a shared
  machine hits both;
* **tokens/s**: the real tokens of a batch (source characters plus target characters
  with ``<eos>``, padding left out), averaged over the timed batches, over the median step;
* **peak memory**: on the CPU, the growth of the peak resident set size (``VmHWM`` in
  ``/proc/self/status``, reset through ``/proc/self/clear_refs``) over the resident size
  before the first step, in a fresh process per model (a process that already trained one
  model reuses that memory for the next); on CUDA, ``torch.cuda.max_memory_allocated``
  over the memory allocated before the first step. Both include gradients, Adam's state
  and the activations of a step;
* **time to the bar**: both models train through the whole recipe
  (:data:`attention_course.recipes.TRANSFORMER`'s steps) side by side, step by step on the
  same batches; every 50 steps each is scored on the held-out test dates (exact match of
  :func:`~attention_course.reference.ch07.greedy_decode`). The clock counts the training
  steps and the making of the batches, not the scoring. Shown: the training seconds until
  the first score of at least the chapter's bar, the final score and the seconds of all
  the steps.

Then it prints the generation figure of chapter 8
(:mod:`benchmarks.generation`): tokens per second of the course's GPT with and
without its key-value cache, beside a twin built from PyTorch's own layers.

The last line printed is ``step-time ratio course/torch: X.XX (device)``, the one-thread
CPU ratio when the CPU was measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import subprocess
import sys
import time

import torch
from torch import nn

from attention_course.dates import make_date_task
from attention_course.recipes import TRANSFORMER
from attention_course.reference.ch03 import sequence_loss
from attention_course.reference.ch05 import PositionalEncoding
from attention_course.reference.ch07 import Transformer, causal_mask, greedy_decode, noam_lr
from attention_course.seq2seq import exact_match, ids_to_strings, make_transformer
from attention_course.twins import to_torch_decoder_layer, to_torch_encoder_layer
from benchmarks import generation as generation_bench

__all__ = ["TorchTransformer", "torch_twin", "make_train_step", "Settings", "main"]

BATCH_SIZE = TRANSFORMER.training["batch_size"]
MAX_OUTPUT_LEN = 12  # a date's 10 characters and <eos>, and one to spare
ACCURACY_BAR = TRANSFORMER.bar
MODEL_NAMES = ("course", "torch")


class TorchTransformer(nn.Module):
    """``torch.nn.Transformer`` with the course Transformer's inputs and outputs.

    The constructor takes the arguments of :class:`~attention_course.reference.ch07.Transformer`.
    Layers: ``src_embedding`` and ``tgt_embedding`` (``nn.Embedding``, scaled by
    ``sqrt(d_model)``), ``pos_encoding`` (the course's sinusoidal
    :class:`~attention_course.reference.ch05.PositionalEncoding`), ``transformer =
    nn.Transformer(..., batch_first=True, norm_first=False)``, ``dense = nn.Linear(d_model,
    tgt_vocab_size)``. Its encoder and decoder stacks have no final ``LayerNorm``:
    ``nn.Transformer`` adds one by default, the course's model (post-norm, every sub-layer
    already normalised) has none.

    ``forward(src, tgt_in, src_mask=None)``, ``encode(src, src_mask)`` and ``decode(tgt_in,
    memory, src_mask)`` as the course's model: ``src_mask`` is the ``(B, S)`` padding mask
    with ``True`` = a real token; PyTorch's key padding masks mean the opposite, so it is
    inverted here. The causal mask is boolean with ``True`` = may *not* attend.
    """

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, d_model: int, num_heads: int, d_ff: int,
                 num_layers: int, dropout: float = 0.0, max_len: int = 512):
        super().__init__()
        self.d_model = d_model
        self.src_embedding = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embedding = nn.Embedding(tgt_vocab_size, d_model)
        self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)
        encoder_layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout, batch_first=True,
                                                   norm_first=False)
        decoder_layer = nn.TransformerDecoderLayer(d_model, num_heads, d_ff, dropout, batch_first=True,
                                                   norm_first=False)
        self.transformer = nn.Transformer(
            d_model, num_heads, num_layers, num_layers, d_ff, dropout, batch_first=True, norm_first=False,
            # no nested tensors when decoding: a prototype API that warns
            custom_encoder=nn.TransformerEncoder(encoder_layer, num_layers, enable_nested_tensor=False),
            custom_decoder=nn.TransformerDecoder(decoder_layer, num_layers),
        )
        self.dense = nn.Linear(d_model, tgt_vocab_size)

    def _embed(self, embedding: nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
        return self.pos_encoding(embedding(ids) * math.sqrt(self.d_model))

    @staticmethod
    def _padding(src_mask: torch.Tensor | None) -> torch.Tensor | None:
        return None if src_mask is None else ~src_mask

    def _future(self, tgt_in: torch.Tensor) -> torch.Tensor:
        return ~causal_mask(tgt_in.shape[1], device=tgt_in.device)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.transformer.encoder(self._embed(self.src_embedding, src),
                                        src_key_padding_mask=self._padding(src_mask))

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor,
               src_mask: torch.Tensor | None = None) -> torch.Tensor:
        X = self.transformer.decoder(self._embed(self.tgt_embedding, tgt_in), memory,
                                     tgt_mask=self._future(tgt_in), tgt_is_causal=True,
                                     memory_key_padding_mask=self._padding(src_mask))
        return self.dense(X)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor,
                src_mask: torch.Tensor | None = None) -> torch.Tensor:
        padding = self._padding(src_mask)
        X = self.transformer(self._embed(self.src_embedding, src), self._embed(self.tgt_embedding, tgt_in),
                             tgt_mask=self._future(tgt_in), tgt_is_causal=True,
                             src_key_padding_mask=padding, memory_key_padding_mask=padding)
        return self.dense(X)


def torch_twin(model: Transformer) -> TorchTransformer:
    """A :class:`TorchTransformer` with ``model``'s sizes and weights, on its device."""
    encoder, decoder = model.encoder, model.decoder
    block = encoder.blocks[0]
    twin = TorchTransformer(encoder.embedding.num_embeddings, decoder.embedding.num_embeddings, encoder.d_model,
                            block.attention.num_heads, block.ffn.dense1.out_features, len(encoder.blocks),
                            block.addnorm1.dropout.p, encoder.pos_encoding.max_len)
    twin.src_embedding.load_state_dict(encoder.embedding.state_dict())
    twin.tgt_embedding.load_state_dict(decoder.embedding.state_dict())
    for layer, block in zip(twin.transformer.encoder.layers, encoder.blocks):
        layer.load_state_dict(to_torch_encoder_layer(block).state_dict())
    for layer, block in zip(twin.transformer.decoder.layers, decoder.blocks):
        layer.load_state_dict(to_torch_decoder_layer(block).state_dict())
    twin.dense.load_state_dict(decoder.dense.state_dict())
    return twin.to(encoder.embedding.weight.device)


def make_train_step(model: nn.Module, d_model: int, pad_id: int, num_steps: int,
                    factor: float = TRANSFORMER.training["factor"], warmup: int = TRANSFORMER.training["warmup"],
                    cooldown: float = TRANSFORMER.training["cooldown"], clip: float = 1.0):
    """``step(batch) -> loss``: one training step of
    :func:`~attention_course.seq2seq.train_transformer`'s recipe for ``model`` (Adam with
    ``betas = (0.9, 0.98)``, the learning rate ``factor * noam_lr`` brought down linearly to 0
    over the last ``cooldown`` of ``num_steps``, the gradient norm clipped to ``clip``, the
    cross-entropy over the real target tokens), with an optimiser of its own."""
    optimizer = torch.optim.Adam(model.parameters(), lr=factor, betas=(0.9, 0.98))

    def lr_factor(step):
        ending = min(1.0, (num_steps - step + 1) / max(cooldown * num_steps, 1.0))
        return noam_lr(step, d_model, warmup) * ending

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s + 1))  # steps count from 1

    def step(batch) -> torch.Tensor:
        model.train()
        loss = sequence_loss(model(batch.src, batch.tgt_in, batch.src_mask), batch.labels, pad_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        schedule.step()
        return loss

    return step


@dataclasses.dataclass(frozen=True)
class Settings:
    """How much of everything to run; :data:`QUICK` is the smoke run of ``--quick``."""

    timed_steps: int = 100  # per model and device
    warmup_steps: int = 10
    memory_steps: int = 20
    train_steps: int = TRANSFORMER.training["num_steps"]  # chapter 7's recipe
    eval_every: int = 50
    num_train: int = 50_000  # make_date_task's sizes
    num_test: int = 2_000


QUICK = Settings(timed_steps=6, warmup_steps=2, memory_steps=3, train_steps=20, eval_every=10,
                 num_train=2_000, num_test=200)


def make_task(settings: Settings):
    return make_date_task(num_train=settings.num_train, num_test=settings.num_test, seed=0)


def build_models(task, device: torch.device, seed: int = 0) -> dict[str, nn.Module]:
    """``{"course": make_transformer(task, Transformer), "torch": its twin}`` on ``device``, same weights."""
    torch.manual_seed(seed)
    course = make_transformer(task, Transformer).to(device)
    return {"course": course, "torch": torch_twin(course)}


def training_batches(task, count: int, device: torch.device, seed: int = 0) -> list:
    """``count`` batches of ``BATCH_SIZE`` training pairs, drawn as ``train_seq2seq`` draws them."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        picks = torch.randint(len(task.train), (BATCH_SIZE,), generator=generator).tolist()
        batches.append(task.batch([task.train[i] for i in picks], device))
    return batches


def real_tokens(batch, pad_id: int) -> int:
    """Source characters plus target characters with ``<eos>``, padding left out."""
    return int(batch.src_mask.sum()) + int((batch.labels != pad_id).sum())


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(models: dict[str, nn.Module], batches: list, device: torch.device, settings: Settings,
               pad_id: int) -> dict[str, list[float]]:
    """Seconds of each timed training step, per model, after ``settings.warmup_steps``
    untimed steps each. The models take turns step by step (which one goes first alternates
    too), so that a busy spell of a shared machine slows them alike; each timed step ``k``
    of every model trains on ``batches[k % len(batches)]``."""
    d_model = models["course"].encoder.d_model
    steps = {name: make_train_step(model, d_model, pad_id, settings.warmup_steps + settings.timed_steps)
             for name, model in models.items()}
    for name in models:
        for k in range(settings.warmup_steps):
            steps[name](batches[k % len(batches)])
    seconds = {name: [] for name in models}
    names = list(models)
    for k in range(settings.timed_steps):
        for name in (names if k % 2 == 0 else names[::-1]):
            _synchronize(device)
            start = time.perf_counter()
            steps[name](batches[k % len(batches)])
            _synchronize(device)
            seconds[name].append(time.perf_counter() - start)
    return seconds


def _proc_status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def training_memory(name: str, device_name: str, settings: Settings) -> float | None:
    """MiB that ``settings.memory_steps`` training steps of model ``name`` add on
    ``device_name``, measured as the module's docstring says; ``None`` on a CPU system
    without Linux's ``/proc``."""
    device = torch.device(device_name)
    if device.type == "cpu":
        torch.set_num_threads(1)
    task = make_task(settings)
    models = build_models(task, device)
    step = make_train_step(models[name], models["course"].encoder.d_model, task.tgt_vocab.pad_id,
                           settings.memory_steps)
    batches = training_batches(task, settings.memory_steps, device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        for batch in batches:
            step(batch)
        torch.cuda.synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - before) / 2 ** 20
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")  # resets the peak (VmHWM) to the current resident size
        before = _proc_status_kib("VmRSS")
    except OSError:
        return None
    for batch in batches:
        step(batch)
    return (_proc_status_kib("VmHWM") - before) / 1024


def peak_memory(name: str, device: torch.device, settings: Settings) -> float | None:
    """:func:`training_memory`; for the CPU in a fresh Python process."""
    if device.type == "cuda":
        return training_memory(name, "cuda", settings)
    code = ("import json, sys; from benchmarks.transformer import Settings, training_memory; "
            "print(json.dumps(training_memory(sys.argv[1], 'cpu', Settings(**json.loads(sys.argv[2])))))")
    child = subprocess.run([sys.executable, "-c", code, name, json.dumps(dataclasses.asdict(settings))],
                           capture_output=True, text=True)
    if child.returncode != 0:
        raise RuntimeError(f"the memory measurement of {name} failed:\n{child.stderr}")
    return json.loads(child.stdout)


def held_out_accuracy(model: nn.Module, test, task) -> float:
    vocab = task.tgt_vocab
    ids = greedy_decode(model, test.src, test.src_mask, vocab.bos_id, vocab.eos_id, vocab.pad_id, MAX_OUTPUT_LEN)
    return exact_match(ids_to_strings(ids, vocab), test.targets)


def race_to_bar(models: dict[str, nn.Module], task, device: torch.device, settings: Settings,
                seed: int = 0) -> dict[str, dict]:
    """Train the models side by side, step by step on the same batches, through the recipe's
    ``settings.train_steps`` steps; score each on the test split every ``settings.eval_every``
    steps and at the end.

    Per model: ``seconds_to_bar`` (training seconds at the first score >= ``ACCURACY_BAR``,
    ``None`` if never), ``step_to_bar``, ``train_seconds`` (all steps), ``final_accuracy``,
    ``curve`` (``(step, accuracy)`` pairs). A model's clock runs during its own training
    steps and during the making of each batch (which both models share), never while scoring.
    """
    pad_id = task.tgt_vocab.pad_id
    d_model = models["course"].encoder.d_model
    steps = {name: make_train_step(model, d_model, pad_id, settings.train_steps) for name, model in models.items()}
    test = task.batch(task.test, device)
    generator = torch.Generator().manual_seed(seed)
    results = {name: {"seconds_to_bar": None, "step_to_bar": None, "train_seconds": 0.0, "curve": []}
               for name in models}
    for step in range(1, settings.train_steps + 1):
        start = time.perf_counter()
        picks = torch.randint(len(task.train), (BATCH_SIZE,), generator=generator).tolist()
        batch = task.batch([task.train[i] for i in picks], device)
        batch_seconds = time.perf_counter() - start
        for name in models:
            _synchronize(device)
            start = time.perf_counter()
            steps[name](batch)
            _synchronize(device)
            results[name]["train_seconds"] += batch_seconds + time.perf_counter() - start
        if step % settings.eval_every == 0 or step == settings.train_steps:
            for name, model in models.items():
                result = results[name]
                accuracy = held_out_accuracy(model, test, task)
                result["curve"].append((step, accuracy))
                if accuracy >= ACCURACY_BAR and result["seconds_to_bar"] is None:
                    result["seconds_to_bar"], result["step_to_bar"] = result["train_seconds"], step
    for result in results.values():
        result["final_accuracy"] = result["curve"][-1][1]
    return results


def measure_device(device: torch.device, task, settings: Settings) -> list[dict]:
    """The table's rows for ``device``, one per model; on the CPU everything runs on one
    thread (PyTorch's setting is restored afterwards)."""
    pad_id = task.tgt_vocab.pad_id
    batches = training_batches(task, 16, device, seed=1)
    tokens_per_batch = statistics.mean(real_tokens(b, pad_id) for b in batches)
    models = build_models(task, device)
    first = batches[0]
    with torch.no_grad():
        course, twin = (models[name](first.src, first.tgt_in, first.src_mask) for name in MODEL_NAMES)
    print(f"{device}: twin check, largest |logit difference| before training: {(course - twin).abs().max():.1e}")
    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    try:
        print(f"{device}: timing {settings.timed_steps} training steps per model ...", flush=True)
        seconds = time_steps(models, batches, device, settings, pad_id)
        rows = [{"device": device.type, "model": name, "ms_per_step": 1e3 * statistics.median(seconds[name]),
                 "tokens_per_s": tokens_per_batch / statistics.median(seconds[name])} for name in MODEL_NAMES]
        print(f"{device}: peak memory of {settings.memory_steps} training steps per model ...", flush=True)
        for row in rows:
            row["peak_mib"] = peak_memory(row["model"], device, settings)
        print(f"{device}: training both models {settings.train_steps} steps side by side, "
              f"scoring every {settings.eval_every} steps ...", flush=True)
        race = race_to_bar(build_models(task, device), task, device, settings)
    finally:
        torch.set_num_threads(threads)
    for row in rows:
        row.update(race[row["model"]])
        curve = " ".join(f"{step}:{100 * accuracy:.1f}" for step, accuracy in row["curve"])
        print(f"{device}: {row['model']:>6} held-out exact match % by step: {curve}")
    return rows


def describe_models(models: dict[str, nn.Module]) -> str:
    encoder = models["course"].encoder
    block = encoder.blocks[0]
    counts = " and ".join(f"{sum(p.numel() for p in models[name].parameters()):,}" for name in MODEL_NAMES)
    return (f"course = attention_course.reference.ch07.Transformer, torch = its nn.Transformer twin: d_model "
            f"{encoder.d_model}, {block.attention.num_heads} heads, d_ff {block.ffn.dense1.out_features}, "
            f"{len(encoder.blocks)}+{len(encoder.blocks)} layers, post-norm, dropout {block.addnorm1.dropout.p:g}, "
            f"the same starting weights ({counts} parameters); batches of {BATCH_SIZE} dates")


def format_table(rows: list[dict]) -> list[str]:
    headers = ["device", "model", "ms/step", "tokens/s", "peak MiB",
               f"s to {ACCURACY_BAR:.0%}", "at step", "final acc", "train s"]

    def shown(value, fmt: str, missing: str) -> str:
        return missing if value is None else fmt.format(value)

    lines = [[row["device"], row["model"], f"{row['ms_per_step']:.1f}", f"{row['tokens_per_s']:,.0f}",
              shown(row["peak_mib"], "{:.1f}", "n/a"), shown(row["seconds_to_bar"], "{:.1f}", "never"),
              shown(row["step_to_bar"], "{}", "never"), f"{row['final_accuracy']:.1%}",
              f"{row['train_seconds']:.1f}"]
             for row in rows]
    widths = [max(len(r[i]) for r in [headers, *lines]) for i in range(len(headers))]
    return ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
            for r in [headers, *lines]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.transformer", description=(
        "The course's Transformer against torch.nn.Transformer configured the same: time per training step, "
        "tokens/s, peak memory and time to the accuracy bar."))
    parser.add_argument("--steps", type=int, help="timed training steps per model and device (default 100)")
    parser.add_argument("--device", choices=["cpu", "cuda", "all"], default="all",
                        help="where to measure; all = the CPU, and CUDA when PyTorch sees a GPU (default)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: few steps, a small task, short training")
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else Settings()
    if args.steps is not None:
        if args.steps < 1:
            parser.error("--steps must be at least 1")
        settings = dataclasses.replace(settings, timed_steps=args.steps)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: PyTorch sees no GPU")
    devices = [torch.device(name) for name in ("cpu", "cuda")
               if args.device in (name, "all") and (name == "cpu" or torch.cuda.is_available())]

    task = make_task(settings)
    rows = []
    for device in devices:
        rows += measure_device(device, task, settings)
    generation = generation_bench.report(devices, **({"repeats": 1, "lengths": (16, 32, 64)} if args.quick else {}))

    print()
    print(describe_models(build_models(task, torch.device("cpu"))))
    print("\n".join(format_table(rows)))
    print(f"ms/step: median of {settings.timed_steps} timed steps (forward, backward, clipping, Adam) after "
          f"{settings.warmup_steps} warm-up steps. tokens/s: real source + target tokens per second. "
          f"The CPU runs on one thread (torch.set_num_threads(1)), as the course's training does.")
    print(f"peak MiB: what {settings.memory_steps} training steps add; CPU: peak RSS growth in a fresh process, "
          f"CUDA: torch.cuda.max_memory_allocated growth.")
    print(f"s to {ACCURACY_BAR:.0%}: training seconds (batches + steps, scoring excluded) until held-out exact "
          f"match >= {ACCURACY_BAR:.0%} on {len(task.test)} test dates, scored every {settings.eval_every} steps; "
          f"train s: all {settings.train_steps} steps of the recipe.")
    print("\n".join(generation))
    ms_per_step = {(row["device"], row["model"]): row["ms_per_step"] for row in rows}
    for device in sorted({d for d, _ in ms_per_step}, key=lambda d: d == "cpu"):  # the CPU's ratio last
        print(f"step-time ratio course/torch: {ms_per_step[device, 'course'] / ms_per_step[device, 'torch']:.2f} "
              f"({device})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
