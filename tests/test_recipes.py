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
}


def _cell(nb, grade_id: str):
    (cell,) = [c for c in nb.cells if nbt.nbgrader_meta(c).get("grade_id") == grade_id]
    return cell


def test_every_training_notebook_has_a_recipe():
    training = {a for a in nbt.assignments()
                if any(nbt.is_training_cell(c) for c in nbt.read(nbt.source_notebook(a)).cells)}
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
                "train_tagger", "train_transformer", "GPT", "train_prompt_model"}
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

    runs = {("ch03", 0): (12.0, 0.97), ("ch03", 1): (12.5, 0.95), ("ch07", 0): (25.0, 0.99), ("ch07", 1): (24.0, 0.94)}
    monkeypatch.setattr(training_budget, "train_chapter", lambda chapter, seed: {
        "cpu_seconds": runs[chapter, seed][0], "seconds": 1.0, "steps": 10, "score": runs[chapter, seed][1]})
    assert main(["--chapters", "ch03", "--seeds", "0", "1"]) == 0
    out = capsys.readouterr().out
    assert "ch03: slowest 12.5 CPU s (within the 20 s aim), lowest held-out exact match 95.00%, +5.0 points" in out
    assert out.strip().endswith("budget: every chapter above its bar; all within 20 CPU s")
    assert main(["--chapters", "ch03", "ch07", "--seeds", "0", "1"]) == 1  # seed 1 of ch07 misses its bar
    out = capsys.readouterr().out
    assert "ch07: slowest 25.0 CPU s (over the 20 s aim), lowest held-out exact match 94.00%, -1.0 points" in out
    assert out.strip().endswith("budget: bar missed by ch07; over 20 CPU s: ch07")
