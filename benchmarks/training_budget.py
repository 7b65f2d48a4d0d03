"""How long the chapters' graded trainings take, and by how much they clear their bars:
``python -m benchmarks.training_budget`` (``make train-budget``).

For each chapter that trains (3, 6, 7, 8) and each seed, the chapter's reference solution
(:mod:`attention_course.reference`) is built and trained exactly as the exercise notebook's
training cell does it, from the chapter's :mod:`~attention_course.recipes` recipe, on one
CPU thread (``torch.set_num_threads(1)``, as the course's loop trains), then scored as the
graded test scores it on the held-out split. Printed per run: the CPU seconds of the
training loop (``time.process_time``: the work itself, which a busy machine does not
inflate, unlike wall time; validation included, the held-out scoring not), the steps and
the held-out score against the bar; then per chapter the slowest run and the lowest score
over the seeds, the margin above the bar and whether the chapter meets the budget.

The last line says whether every chapter cleared its bar on every seed (else the exit status
is 1) and which chapters took more than the 20 s of CPU the course aims at (chapter 7 does:
its page says why).
"""

from __future__ import annotations

import argparse
import sys

import torch

from attention_course.recipes import BAHDANAU, DECODER_ONLY, ENCODER, TRANSFORMER, Recipe

__all__ = ["CHAPTERS", "BUDGET_S", "train_chapter", "main"]

#: CPU seconds one graded training should take at most on one thread
BUDGET_S = 20.0


def _dates_score(model, task, decode) -> float:
    from attention_course.seq2seq import exact_match, ids_to_strings

    test, vocab = task.batch(task.test), task.tgt_vocab
    ids = decode(model, test.src, test.src_mask, vocab.bos_id, vocab.eos_id, vocab.pad_id, 12)
    return exact_match(ids_to_strings(ids, vocab), test.targets)


def _train_bahdanau(seed: int) -> tuple[dict, float]:
    from attention_course.dates import make_date_task
    from attention_course.reference.ch03 import BahdanauDecoder, greedy_decode, sequence_loss
    from attention_course.seq2seq import make_seq2seq, train_seq2seq

    task = make_date_task(seed=0)
    torch.manual_seed(seed)
    model = make_seq2seq(task, BahdanauDecoder, **BAHDANAU.model)
    history = train_seq2seq(model, task, sequence_loss, **BAHDANAU.training, seed=seed, progress=False)
    return history, _dates_score(model, task, greedy_decode)


def _train_encoder(seed: int) -> tuple[dict, float]:
    from attention_course.reference.ch06 import TransformerEncoder
    from attention_course.tagging import TokenClassifier, make_duplicate_task, token_accuracy, train_tagger
    from attention_course.training import init_transformer_weights

    task = make_duplicate_task(seed=0)
    torch.manual_seed(seed)
    encoder = TransformerEncoder(task.vocab_size, **ENCODER.model)
    model = init_transformer_weights(TokenClassifier(encoder, ENCODER.model["d_model"], task.num_labels))
    history = train_tagger(model, task, **ENCODER.training, seed=seed, progress=False)
    return history, token_accuracy(model, task.test)


def _train_transformer(seed: int) -> tuple[dict, float]:
    from attention_course.dates import make_date_task
    from attention_course.reference.ch07 import Transformer, greedy_decode, noam_lr, teacher_forcing_pair
    from attention_course.seq2seq import make_transformer, train_transformer

    task = make_date_task(seed=0)
    torch.manual_seed(seed)
    model = make_transformer(task, Transformer, **TRANSFORMER.model)
    history = train_transformer(model, task, **TRANSFORMER.training, seed=seed, progress=False, schedule=noam_lr,
                                shift=teacher_forcing_pair)
    return history, _dates_score(model, task, greedy_decode)


def _train_decoder_only(seed: int) -> tuple[dict, float]:
    from attention_course.prompts import complete_prompts, make_prompt_task, train_prompt_model
    from attention_course.reference.ch08 import GPT, generate
    from attention_course.seq2seq import exact_match

    task = make_prompt_task()
    torch.manual_seed(seed)
    model = GPT(len(task.vocab), **DECODER_ONLY.model, max_len=task.prompt_length + task.answer_length)
    history = train_prompt_model(model, task, **DECODER_ONLY.training, seed=seed, progress=False)
    sources, targets = [s for s, _ in task.test], [t for _, t in task.test]
    return history, exact_match(complete_prompts(model, task, sources, generate), targets)


#: chapter -> (recipe, what its graded test scores, the function that trains it)
CHAPTERS = {
    "ch03": (BAHDANAU, "held-out exact match", _train_bahdanau),
    "ch06": (ENCODER, "held-out token accuracy", _train_encoder),
    "ch07": (TRANSFORMER, "held-out exact match", _train_transformer),
    "ch08": (DECODER_ONLY, "held-out exact match", _train_decoder_only),
}


def train_chapter(chapter: str, seed: int) -> dict:
    """Train ``chapter``'s reference solution with its recipe and ``seed`` on one CPU thread;
    return ``{"cpu_seconds", "seconds", "steps", "score"}``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        history, score = CHAPTERS[chapter][2](seed)
    finally:
        torch.set_num_threads(threads)
    return {"cpu_seconds": history["cpu_seconds"], "seconds": history["seconds"], "steps": history["steps_done"],
            "score": score}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.training_budget",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapters", nargs="+", choices=sorted(CHAPTERS), default=sorted(CHAPTERS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    args = parser.parse_args(argv)
    missed, over = [], []
    for chapter in args.chapters:
        recipe: Recipe = CHAPTERS[chapter][0]
        metric = CHAPTERS[chapter][1]
        print(f"{chapter}: {recipe}".replace("\n", f"\n{chapter}: "), flush=True)
        runs = []
        for seed in args.seeds:
            run = train_chapter(chapter, seed)
            runs.append(run)
            print(f"{chapter} seed {seed}: {run['steps']} steps in {run['cpu_seconds']:.1f} CPU s "
                  f"({run['seconds']:.1f} s wall); {metric} {run['score']:.2%} (bar {recipe.bar:.0%})", flush=True)
        slowest = max(r["cpu_seconds"] for r in runs)
        lowest = min(r["score"] for r in runs)
        if lowest < recipe.bar:
            missed.append(chapter)
        if slowest > BUDGET_S:
            over.append(chapter)
        print(f"{chapter}: slowest {slowest:.1f} CPU s ({'within' if slowest <= BUDGET_S else 'over'} the "
              f"{BUDGET_S:g} s aim), lowest {metric} {lowest:.2%}, {100 * (lowest - recipe.bar):+.1f} points over "
              f"the bar of {recipe.bar:.0%} over seeds {', '.join(map(str, args.seeds))}", flush=True)
    print(f"budget: {'bar missed by ' + ', '.join(missed) if missed else 'every chapter above its bar'}; "
          f"{f'over {BUDGET_S:g} CPU s: ' + ', '.join(over) if over else f'all within {BUDGET_S:g} CPU s'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
