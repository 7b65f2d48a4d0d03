"""How long the chapters' graded trainings take, and by how much they clear their bars:
``python -m benchmarks.training_budget`` (``make train-budget``; ``make train-budget ORDERS=all``
for the spread over draw orders).

For each chapter that trains (3, 6, 7, 8, 10), each seed and each draw order asked for, the
chapter's reference solution (:mod:`attention_course.reference`) is built and trained exactly
as the exercise notebook's training cells do it, from the chapter's
:mod:`~attention_course.recipes` recipe, on one CPU thread (``torch.set_num_threads(1)``, as
the course's loop trains), then scored as the graded test scores it on the held-out split.
A draw order (:data:`ORDERS`) stands for another correct constructor: the same layers,
created or initialised in another order that the docstring allows, which draws other random
starting weights from the same seed ("solution" is the course's own). Printed per run: the CPU
seconds of the training loop (``time.process_time``: the work itself, which a busy machine
does not inflate, unlike wall time; validation included, the held-out scoring not), the steps
and the held-out score against the bar; then per chapter the slowest run and the lowest score
over the seeds and orders, and the margin above the bar.

The last line says whether every chapter landed at least its margin (:data:`MARGIN`, 3 points, or
:data:`MARGINS`: chapter 10's score is a loss, which must stay that far *below* its bar) beyond its
bar in every run (else the exit status is 1) and which chapters took more than the 20 s of CPU
the course aims at (chapter 7 does: its page says why).
"""

from __future__ import annotations

import argparse
import sys

import torch

from attention_course.recipes import BAHDANAU, DECODER_ONLY, ENCODER, INDUCTION, TRANSFORMER, Recipe

__all__ = ["CHAPTERS", "ORDERS", "BUDGET_S", "MARGIN", "MARGINS", "LOWER_IS_BETTER", "train_chapter", "main"]

#: CPU seconds one graded training should take at most on one thread
BUDGET_S = 20.0
#: how far above its bar every measured correct run must land (COURSE_DESIGN: the bar sits below
#: the worst correct model by a stated margin)
MARGIN = 0.03
#: chapters whose margin is another (chapter 10's: nats of repeat loss below its bar)
MARGINS = {"ch10": 0.25}
#: chapters whose graded score is a loss: a run clears its bar from below
LOWER_IS_BETTER = frozenset({"ch10"})


def _dates_score(model, task, decode) -> float:
    from attention_course.seq2seq import exact_match, ids_to_strings

    test, vocab = task.batch(task.test, next(model.parameters()).device), task.tgt_vocab
    ids = decode(model, test.src, test.src_mask, vocab.bos_id, vocab.eos_id, vocab.pad_id, 12)
    return exact_match(ids_to_strings(ids, vocab), test.targets)


def _children_reordered(module: torch.nn.Module, order: str) -> torch.nn.Module:
    """``module`` with the children of each of its layers registered in another ``order``
    ("reversed", or "shuffled" by a fixed permutation), as a learner who wrote the constructor's
    lines in that order would have them. A ``ModuleList`` or ``Sequential`` keeps its order: it
    is the order of computation. Returns ``module``."""
    permutation = torch.Generator().manual_seed(1)
    for layer in module.modules():
        if isinstance(layer, (torch.nn.ModuleList, torch.nn.Sequential)) or len(layer._modules) < 2:
            continue
        names = list(layer._modules)
        names = names[::-1] if order == "reversed" else [names[i] for i in torch.randperm(len(names), generator=permutation)]
        layer._modules = {name: layer._modules[name] for name in names}
    return module


def _redraw_defaults(layers, seed: int) -> None:
    """Draw the PyTorch default weights of ``layers`` again, in the order given, from ``seed``:
    what constructing them in that order after ``torch.manual_seed(seed)`` draws."""
    torch.manual_seed(seed)
    for layer in layers:
        layer.reset_parameters()


def _with_defaults(module: torch.nn.Module) -> list:
    return [m for m in module.modules() if hasattr(m, "reset_parameters") and any(True for _ in m.parameters(False))]


def _train_bahdanau(seed: int, order: str = "solution", device: str = "cpu") -> tuple[dict, float]:
    from attention_course.dates import make_date_task
    from attention_course.reference.ch03 import BahdanauDecoder, greedy_decode, sequence_loss
    from attention_course.seq2seq import make_seq2seq, train_seq2seq

    task = make_date_task(seed=0)
    torch.manual_seed(seed)
    model = make_seq2seq(task, BahdanauDecoder, **BAHDANAU.model)
    if order != "solution":  # the course's encoder first, then the decoder's layers in another order
        _redraw_defaults(_with_defaults(model.encoder) + _with_defaults(_children_reordered(model.decoder, order)), seed)
    history = train_seq2seq(model, task, sequence_loss, **BAHDANAU.training, device=device, seed=seed, progress=False)
    return history, _dates_score(model, task, greedy_decode)


def _train_encoder(seed: int, order: str = "solution", device: str = "cpu") -> tuple[dict, float]:
    from attention_course.reference.ch06 import TransformerEncoder
    from attention_course.tagging import TokenClassifier, make_duplicate_task, token_accuracy, train_tagger
    from attention_course.training import init_transformer_weights

    task = make_duplicate_task(seed=0)
    torch.manual_seed(seed)
    encoder = TransformerEncoder(task.vocab_size, **ENCODER.model)
    if order != "solution":
        _children_reordered(encoder, order)
    model = init_transformer_weights(TokenClassifier(encoder, ENCODER.model["d_model"], task.num_labels))
    history = train_tagger(model, task, **ENCODER.training, device=device, seed=seed, progress=False)
    return history, token_accuracy(model, task.test)


def _train_transformer(seed: int, order: str = "solution", device: str = "cpu") -> tuple[dict, float]:
    from attention_course.dates import make_date_task
    from attention_course.reference.ch07 import Transformer, greedy_decode, noam_lr, teacher_forcing_pair
    from attention_course.seq2seq import make_transformer, train_transformer

    task = make_date_task(seed=0)
    torch.manual_seed(seed)
    model_class = Transformer
    if order != "solution":
        def model_class(*args):
            return _children_reordered(Transformer(*args), order)
    model = make_transformer(task, model_class, **TRANSFORMER.model)
    history = train_transformer(model, task, **TRANSFORMER.training, device=device, seed=seed, progress=False, schedule=noam_lr,
                                shift=teacher_forcing_pair)
    return history, _dates_score(model, task, greedy_decode)


def _gpt_redrawn(model, order: str, seed: int, num_layers: int):
    """Chapter 8's GPT initialised as its docstring says, in the draw ``order`` of another
    correct constructor, after ``torch.manual_seed(seed)``."""
    import math

    def residual(name: str) -> bool:
        return name.endswith(("W_o", "dense2", "W_o.weight", "dense2.weight"))

    small = 0.02 / math.sqrt(2 * num_layers)
    torch.manual_seed(seed)
    with torch.no_grad():
        # the model is tied already: a constructor that ties before it draws draws the shared
        # weight twice (as the embedding, then as lm_head), except one that loops over parameters
        if order == "by_parameter":  # one pass over named_parameters
            for name, p in model.named_parameters():
                if p.dim() > 1:
                    p.normal_(0.0, small if residual(name) else 0.02)
            return model
        if order == "reversed":
            _children_reordered(model, order)
        for name, layer in model.named_modules():
            if isinstance(layer, (torch.nn.Linear, torch.nn.Embedding)):
                layer.weight.normal_(0.0, small if residual(name) and order != "apply" else 0.02)
        if order == "apply":  # nanoGPT: every layer at 0.02 by model.apply, then the residual projections again
            for block in model.blocks:
                block.attention.W_o.weight.normal_(0.0, small)
                block.dense2.weight.normal_(0.0, small)
    return model


def _train_decoder_only(seed: int, order: str = "solution", device: str = "cpu") -> tuple[dict, float]:
    from attention_course.prompts import complete_prompts, make_prompt_task, train_prompt_model
    from attention_course.reference.ch08 import GPT, generate
    from attention_course.seq2seq import exact_match

    task = make_prompt_task()
    torch.manual_seed(seed)
    model = GPT(len(task.vocab), **DECODER_ONLY.model, max_len=task.prompt_length + task.answer_length)
    if order != "solution":
        _gpt_redrawn(model, order, seed, DECODER_ONLY.model["num_layers"])
    history = train_prompt_model(model, task, **DECODER_ONLY.training, device=device, seed=seed, progress=False)
    sources, targets = [s for s, _ in task.test], [t for _, t in task.test]
    return history, exact_match(complete_prompts(model, task, sources, generate), targets)


def _train_induction(seed: int, order: str = "solution", device: str = "cpu") -> tuple[dict, float]:
    from attention_course.induction import repeat_loss, repeated_tokens, train_induction_model
    from attention_course.reference.ch10 import AttentionOnlyTransformer

    torch.manual_seed(seed)
    model = AttentionOnlyTransformer(**INDUCTION.model)
    if order != "solution":  # the embedding, the layers' W_qkv and W_o and the unembedding drawn in another order
        _redraw_defaults(_with_defaults(_children_reordered(model, order)), seed)
    history = train_induction_model(model, vocab_size=INDUCTION.model["vocab_size"], **INDUCTION.training, device=device,
                                    seed=seed, progress=False)
    # the graded test's held-out sequences
    period = INDUCTION.training["period"]
    held_out = repeated_tokens(512, period, INDUCTION.model["vocab_size"], torch.Generator().manual_seed(2024))
    with torch.no_grad():
        return history, float(repeat_loss(model(held_out.to(device))[0].cpu(), held_out, period))


#: chapter -> the draw orders of correct models that ``--orders`` can measure: "solution" is the
#: course's; "reversed" and "shuffled" register each layer's children in another order; for
#: chapter 8, "tie_first" ties before initialising, "apply" is nanoGPT's (``model.apply``, then
#: the residual projections drawn again), "by_parameter" one pass over ``named_parameters``
ORDERS = {
    "ch03": ("solution", "reversed", "shuffled"),
    "ch06": ("solution", "reversed", "shuffled"),
    "ch07": ("solution", "reversed", "shuffled"),
    "ch08": ("solution", "tie_first", "apply", "by_parameter", "reversed"),
    "ch10": ("solution", "reversed", "shuffled"),
}


#: chapter -> (recipe, what its graded test scores, the function that trains it)
CHAPTERS = {
    "ch03": (BAHDANAU, "held-out exact match", _train_bahdanau),
    "ch06": (ENCODER, "held-out token accuracy", _train_encoder),
    "ch07": (TRANSFORMER, "held-out exact match", _train_transformer),
    "ch08": (DECODER_ONLY, "held-out exact match", _train_decoder_only),
    "ch10": (INDUCTION, "held-out repeat loss", _train_induction),
}


def train_chapter(chapter: str, seed: int, order: str = "solution", device: str = "cpu") -> dict:
    """Train ``chapter``'s reference solution with its recipe and ``seed`` on one CPU thread (or on
    ``device``: ``make gpu-check`` trains on CUDA), its weights drawn in ``order`` (one of
    ``ORDERS[chapter]``) on the CPU, as a notebook draws them before ``.to(device)``;
    return ``{"cpu_seconds", "seconds", "steps", "score"}``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        history, score = CHAPTERS[chapter][2](seed, order, device)
    finally:
        torch.set_num_threads(threads)
    return {"cpu_seconds": history["cpu_seconds"], "seconds": history["seconds"], "steps": history["steps_done"],
            "score": score}


def score_text(chapter: str, value: float, bar: bool = False) -> str:
    """A score or a bar as printed: nats of loss, or a percentage (a bar without decimals)."""
    return f"{value:.3f} nats" if chapter in LOWER_IS_BETTER else f"{value:.0%}" if bar else f"{value:.2%}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.training_budget",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapters", nargs="+", choices=sorted(CHAPTERS), default=sorted(CHAPTERS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--orders", nargs="+", default=["solution"],
                        help="draw orders to measure (see ORDERS), or 'all'; default: the solution's")
    args = parser.parse_args(argv)
    unknown = {o for o in args.orders if o != "all" and not any(o in ORDERS[c] for c in args.chapters)}
    if unknown:
        parser.error(f"unknown draw orders {sorted(unknown)}; the chapters' orders: {ORDERS}")
    missed, over = [], []
    for chapter in args.chapters:
        recipe: Recipe = CHAPTERS[chapter][0]
        metric = CHAPTERS[chapter][1]
        orders = [o for o in ORDERS[chapter] if "all" in args.orders or o in args.orders]
        print(f"{chapter}: {recipe}".replace("\n", f"\n{chapter}: "), flush=True)
        runs = []
        for order in orders:
            for seed in args.seeds:
                run = train_chapter(chapter, seed, order)
                runs.append(run)
                print(f"{chapter} {order} seed {seed}: {run['steps']} steps in {run['cpu_seconds']:.1f} CPU s "
                      f"({run['seconds']:.1f} s wall); {metric} {score_text(chapter, run['score'])} (bar "
                      f"{score_text(chapter, recipe.bar, bar=True)})", flush=True)
        slowest = max(r["cpu_seconds"] for r in runs)
        lower = chapter in LOWER_IS_BETTER
        worst = (max if lower else min)(r["score"] for r in runs)
        margin = MARGINS.get(chapter, MARGIN)
        beyond = recipe.bar - worst if lower else worst - recipe.bar
        if beyond < margin:
            missed.append(chapter)
        if slowest > BUDGET_S:
            over.append(chapter)
        print(f"{chapter}: slowest {slowest:.1f} CPU s ({'within' if slowest <= BUDGET_S else 'over'} the "
              f"{BUDGET_S:g} s aim), {'highest' if lower else 'lowest'} {metric} {score_text(chapter, worst)}, "
              + (f"{beyond:.3f} nats under" if lower else f"{100 * beyond:+.1f} points over")
              + f" the bar of {score_text(chapter, recipe.bar, bar=True)} over seeds {', '.join(map(str, args.seeds))} and draw orders "
              f"{', '.join(orders)}", flush=True)
    margins = f"{100 * MARGIN:g} points" + "".join(f" ({c}: {MARGINS[c]:g} nats)" for c in args.chapters if c in MARGINS)
    print(f"budget: {'less than ' + margins + ' beyond the bar: ' + ', '.join(missed) if missed else 'every chapter at least ' + margins + ' beyond its bar'}; "
          f"{f'over {BUDGET_S:g} CPU s: ' + ', '.join(over) if over else f'all within {BUDGET_S:g} CPU s'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
