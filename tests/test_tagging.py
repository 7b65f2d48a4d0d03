"""Chapter 6's task: the labels are right, and the fixed-window baseline cannot reach the bar.

The graded training of chapter 6 asks the learner's encoder for 90 % held-out token
accuracy on the duplicate-letter task. That bar only means something if a network that
sees a fixed window cannot reach it: these tests train the course's ``WindowMLP`` twice as
long as the encoder trains, and bound what any window-3 classifier could do.
"""

from __future__ import annotations

import torch

from attention_course.recipes import ENCODER, WINDOW_MLP
from attention_course.tagging import IGNORE, WindowMLP, make_duplicate_task, token_accuracy, train_tagger

BAR = ENCODER.bar  # the bar of solutions/ch06_transformer_encoder's test_trained_encoder


def test_labels_mark_letters_that_occur_elsewhere():
    task = make_duplicate_task(num_train=50, num_valid=10, num_test=10)
    for split in (task.train, task.valid, task.test):
        for tokens, mask, labels in zip(split.tokens, split.mask, split.labels):
            letters = tokens[mask].tolist()
            expected = [int(letters.count(letter) > 1) for letter in letters]
            assert labels[mask].tolist() == expected
            assert bool((labels[~mask] == IGNORE).all()) and bool((tokens[~mask] == 0).all())
    lengths = task.train.mask.sum(dim=1)
    assert int(lengths.min()) >= 12 and int(lengths.max()) <= 24


def test_splits_differ_and_generation_is_seeded():
    a, b = make_duplicate_task(seed=0, num_train=200), make_duplicate_task(seed=0, num_train=200)
    assert torch.equal(a.test.tokens, b.test.tokens)
    assert not torch.equal(a.train.tokens[:100], a.test.tokens[:100])


def window_oracle_accuracy(tokens: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor, window: int = 3) -> float:
    """What the best classifier that sees ``window`` letters on each side could score.

    Such a classifier knows a letter is a duplicate when a copy lies inside its window.
    Otherwise the letters it sees say nothing (they are uniform and independent), and all
    it has is where the string ends inside the window: the number of real letters it sees
    on the left and on the right. The best rule then predicts, for each such pair, the label
    most common among those letters, counted on the very data it is scored on (so the bound
    is, if anything, generous).
    """
    B, T = tokens.shape
    copy_inside = torch.zeros(B, T, dtype=torch.bool)
    seen_left = torch.zeros(B, T, dtype=torch.long)
    seen_right = torch.zeros(B, T, dtype=torch.long)
    for offset in range(-window, window + 1):
        if offset == 0:
            continue
        shifted = torch.zeros_like(tokens)  # 0 = padding, outside the string
        if offset > 0:
            shifted[:, :-offset] = tokens[:, offset:]
        else:
            shifted[:, -offset:] = tokens[:, :offset]
        copy_inside |= (shifted == tokens) & (shifted > 0) & mask
        (seen_right if offset > 0 else seen_left).add_((shifted > 0).long())
    right = int(copy_inside.sum())
    blind = mask & ~copy_inside
    context = seen_left * (window + 1) + seen_right
    for value in context[blind].unique():
        group = labels[blind & (context == value)]
        right += max(int((group == 1).sum()), int((group == 0).sum()))
    return right / int(mask.sum())


def test_no_window_classifier_can_reach_the_bar():
    task = make_duplicate_task(seed=0)
    oracle = window_oracle_accuracy(task.test.tokens, task.test.mask, task.test.labels)
    print(f"best possible accuracy with a window of 3 letters on each side: {oracle:.3f}")
    assert oracle < BAR - 0.1


def test_the_window_baseline_stays_well_below_the_bar():
    task = make_duplicate_task(seed=0)
    torch.manual_seed(0)
    baseline = WindowMLP(task.vocab_size, task.num_labels, **WINDOW_MLP.model)
    # the book page's baseline run: twice the encoder's steps, at its learning rate
    assert WINDOW_MLP.training["num_steps"] >= 2 * ENCODER.training["num_steps"]
    history = train_tagger(baseline, task, **WINDOW_MLP.training, seed=0, progress=False)
    accuracy = token_accuracy(baseline, task.test)
    print(f"WindowMLP held-out token accuracy after {history['steps_done']} steps: {accuracy:.3f}")
    assert 0.55 < accuracy < BAR - 0.1
