"""The chapters' training recipes (attention_course/recipes.py) are the one source of their
numbers: the notebooks' training cells read them, and the graded bars agree with them."""

from __future__ import annotations

import ast

import pytest

import notebook_tools as nbt
from attention_course import recipes
from benchmarks.training_budget import CHAPTERS, main

# assignment -> (its recipe's name, the grade_id of the test of the trained model)
TRAINED = {
    "ch03_bahdanau_attention": ("BAHDANAU", "test_trained_model"),
    "ch06_transformer_encoder": ("ENCODER", "test_trained_encoder"),
    "ch07_transformer_decoder": ("TRANSFORMER", "test_trained_transformer"),
    "ch08_decoder_only": ("DECODER_ONLY", "test_trained_gpt"),
    "ch10_what_attention_learns": ("INDUCTION", "test_trained_induction"),
}


def _cell(nb, grade_id: str):
    (cell,) = [c for c in nb.cells if nbt.nbgrader_meta(c).get("grade_id") == grade_id]
    return cell


def test_every_training_notebook_has_a_recipe():
    training = {a for a in nbt.assignments() if nbt.trains(a)}
    assert training == set(TRAINED), f"training notebooks {sorted(training)}, recipes for {sorted(TRAINED)}"
    measured = [recipe for recipe, _, _ in CHAPTERS.values()]  # what make train-budget measures
    assert all(any(getattr(recipes, name) is r for r in measured) for name, _ in TRAINED.values())


@pytest.mark.parametrize("assignment", sorted(TRAINED))
def test_the_training_cell_reads_its_recipe_and_the_bar_agrees(assignment):
    name, test_id = TRAINED[assignment]
    recipe = getattr(recipes, name)
    nb = nbt.read(nbt.source_notebook(assignment))
    train = _cell(nb, "train").source
    assert f"**{name}.model" in train and f"**{name}.training" in train, (
        f"{assignment}'s training cell must build and train from recipes.{name}")
    # no number of the run written out again in the cell: the calls that build and train take
    # their sizes and settings from the recipe (the seed aside)
    builders = {"build_model", "make_transformer", "TransformerEncoder", "TokenClassifier", "train_seq2seq",
                "train_tagger", "train_transformer", "GPT", "train_prompt_model", "AttentionOnlyTransformer",
                "train_induction_model"}
    for call in ast.walk(ast.parse(train)):
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) in builders:
            values = list(call.args) + [k.value for k in call.keywords if k.arg != "seed"]
            numbers = [v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, (int, float))]
            assert not numbers, f"{assignment}'s {call.func.id}(...) repeats {numbers}: read them from recipes.{name}"
    bars = [node.value.value for node in ast.walk(ast.parse(_cell(nb, test_id).source))
            if isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["BAR"]]
    assert bars == [recipe.bar], f"{assignment}: the graded bar {bars} and recipes.{name}.bar {recipe.bar} differ"


def test_training_budget_rejects_an_unknown_chapter(capsys):
    with pytest.raises(SystemExit):
        main(["--chapters", "ch99"])
    assert "invalid choice" in capsys.readouterr().err


def test_training_budget_summarises_the_seeds(monkeypatch, capsys):
    from benchmarks import training_budget

    runs = {("ch03", 0): (12.0, 0.97), ("ch03", 1): (12.5, 0.95), ("ch07", 0): (25.0, 0.99), ("ch07", 1): (24.0, 0.95)}
    monkeypatch.setattr(training_budget, "train_chapter", lambda chapter, seed, order: {
        "cpu_seconds": runs[chapter, seed][0] + (order == "reversed"), "seconds": 1.0, "steps": 10,
        "score": runs[chapter, seed][1] - 0.001 * (order == "reversed")})
    assert main(["--chapters", "ch03", "--seeds", "0", "1"]) == 0
    out = capsys.readouterr().out
    assert "ch03 solution seed 1: 10 steps in 12.5 CPU s" in out
    assert ("ch03: slowest 12.5 CPU s (within the 20 s aim), lowest held-out exact match 95.00%, +5.0 points over the "
            "bar of 90% over seeds 0, 1 and draw orders solution") in out
    assert out.strip().endswith("budget: every chapter at least 3 points beyond its bar; all within 20 CPU s")
    # seed 1 of ch07 lands 1.9 points over its bar of 93 %: less than the margin of 3
    assert main(["--chapters", "ch03", "ch07", "--seeds", "0", "1", "--orders", "all"]) == 1
    out = capsys.readouterr().out
    assert "ch03 reversed seed 1: 10 steps in 13.5 CPU s" in out and "ch07 shuffled seed 0" in out
    assert "ch07: slowest 26.0 CPU s (over the 20 s aim), lowest held-out exact match 94.90%, +1.9 points" in out
    assert out.strip().endswith("budget: less than 3 points beyond the bar: ch07; over 20 CPU s: ch07")
    with pytest.raises(SystemExit):
        main(["--chapters", "ch03", "--orders", "apply"])  # chapter 8's order only
    assert "unknown draw orders ['apply']" in capsys.readouterr().err


def _tiny_run(pause_every):
    import torch

    from attention_course.training import fit

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    data = torch.Generator().manual_seed(1)

    def loss(step):
        x = torch.randn(16, 3, generator=data)
        return ((model(x)[:, 0] - x.sum(-1)) ** 2).mean()

    def evaluate():
        return {"valid_loss": float(loss(0))}

    history = fit(model, loss, evaluate, num_steps=25, lr=1e-2, lr_lambda=lambda s: 1 / s ** 0.5,
                  device=torch.device("cpu"), eval_every=10, progress=False, pause_every=pause_every)
    parts = 1
    while not history.done:
        history.resume()
        parts += 1
    return history, parts, model.state_dict()


def test_a_paused_run_is_the_run_without_pauses(capsys):
    """The notebooks spread one training over several cells (``pause_every``, ``history.resume()``):
    the pauses must change nothing in the run, step for step."""
    import torch

    whole, parts, weights = _tiny_run(None)
    paused, paused_parts, paused_weights = _tiny_run(10)
    assert (parts, paused_parts) == (1, 3)
    assert paused["loss"] == whole["loss"] and paused["valid_loss"] == whole["valid_loss"]
    assert paused["valid_step"] == whole["valid_step"] == [10, 20, 25] and paused["steps_done"] == 25
    assert all(torch.equal(weights[k], paused_weights[k]) for k in weights)
    assert "paused after step 20 of 25" in capsys.readouterr().out
    paused.resume()
    assert "the training is over (25 steps): nothing to resume" in capsys.readouterr().out


@pytest.mark.parametrize("assignment", sorted(TRAINED))
def test_the_training_cells_cover_the_run(assignment):
    """The run is spread over ``recipe.cells`` cells: the first starts it with
    ``pause_every=recipe.steps_per_cell``, each next one resumes it, the last prints and plots."""
    name, _ = TRAINED[assignment]
    recipe = getattr(recipes, name)
    nb = nbt.read(nbt.source_notebook(assignment))
    ids = [nbt.nbgrader_meta(c).get("grade_id") for c in nb.cells
           if nbt.is_training_cell(c) and nbt.nbgrader_meta(c).get("grade_id", "").startswith("train")]
    assert ids == ["train"] + [f"train_{k}" for k in range(2, recipe.cells + 1)], (
        f"{assignment}: training cells {ids}, expected {recipe.cells} for {recipe.training['num_steps']} steps of "
        f"{recipe.steps_per_cell} per cell")
    assert f"pause_every={name}.steps_per_cell" in _cell(nb, "train").source
    assert all(_cell(nb, i).source.startswith("history.resume()") for i in ids[1:])
    assert "steps_done" in _cell(nb, ids[-1]).source


def test_training_budget_holds_a_loss_under_its_bar(monkeypatch, capsys):
    """Chapter 10's score is a loss: a run clears its bar from below, by MARGINS["ch10"] nats."""
    from benchmarks import training_budget

    losses = {0: 0.03, 1: 0.05}
    monkeypatch.setattr(training_budget, "train_chapter", lambda chapter, seed, order: {
        "cpu_seconds": 9.0, "seconds": 1.0, "steps": 10, "score": losses[seed] + 0.3 * (order == "shuffled")})
    assert main(["--chapters", "ch10", "--seeds", "0", "1"]) == 0
    out = capsys.readouterr().out
    assert "ch10 solution seed 1: 10 steps in 9.0 CPU s (1.0 s wall); held-out repeat loss 0.050 nats (bar 0.500 nats)" in out
    assert "highest held-out repeat loss 0.050 nats, 0.450 nats under the bar of 0.500 nats" in out
    # shuffled, seed 1: 0.35 nats, 0.15 under the bar: less than the margin of 0.25
    assert main(["--chapters", "ch10", "--seeds", "0", "1", "--orders", "all"]) == 1
    assert capsys.readouterr().out.strip().endswith("budget: less than 3 points (ch10: 0.25 nats) beyond the bar: ch10; "
                                                    "all within 20 CPU s")
