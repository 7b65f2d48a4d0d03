"""The similarity step (autograder/similarity.py) on a small class built here, in seconds: what a
disguise cannot hide, that copies lead their list and honest students stay under the batch's
threshold, the reference solution as a source, the earlier years' archive, bad input skipped with
its reason, what the pages show (only the student's own code, in the language asked for), and the
command. The class: benchmarks/similarity.py (the course's correct variants in each student's
own hand, planted copies with each disguise); its figures at scale are `make bench-similarity`'s."""

from __future__ import annotations

import csv
import html
import json
import random
import re
import subprocess
import sys

import pytest

import layout
from autograder import assemble, similarity
from benchmarks import similarity as bench

import notebook_tools as nbt

ASSIGNMENT = "ch02_scoring_functions"
HONEST = 14


@pytest.fixture(scope="module")
def known():
    return similarity.Assignment.load(ASSIGNMENT).known


def _symbols(code: str, known) -> str:
    return "".join(s for s, _, _ in similarity.tokens(code, known))


def test_names_comments_whitespace_and_literals_do_not_change_the_tokens(known):
    original = 'def f(x, eps=1e-5):\n    """Doc."""\n    y = torch.softmax(x.mean(dim=-1), -1)  # why\n    return y * 0.5 + \'a\'\n'
    disguised = ('def g(values,  tol=0.00001):\n  # comment\n  out = torch.softmax(values.mean(dim = -1),\n'
                 '                      -1)\n\n  return out * .5 + "a"\n')
    assert _symbols(original, known) == _symbols(disguised, known)
    # what a student did not choose keeps its spelling: the library, its functions, keyword arguments
    for other in ("torch.log_softmax(x.mean(dim=-1), -1)", "F.softmax(x.mean(dim=-1), -1)",
                  "torch.softmax(x.sum(dim=-1), -1)", "torch.softmax(x.mean(axis=-1), -1)"):
        assert _symbols(f"y = {other}\n", known) != _symbols("y = torch.softmax(x.mean(dim=-1), -1)\n", known), other


def test_a_reordered_statement_keeps_its_fingerprints(known):
    """Fingerprints never span two statements: swapping independent ones changes none."""
    a = "a = torch.zeros(n, m, device=X.device)\nb = X.sum(dim=-1, keepdim=True) / X.shape[-1]\n"
    b = "b = X.sum(dim=-1, keepdim=True) / X.shape[-1]\na = torch.zeros(n, m, device=X.device)\n"
    prints = [{v for v, _, _ in similarity.fingerprints(_symbols(code, known))} for code in (a, b)]
    assert prints[0] == prints[1] and len(prints[0]) >= 2


def _expressions(code: str, known) -> set[int]:
    return {v for v, _, _ in similarity._expression_prints(code, similarity.tokens(code, known))}


def test_a_loop_turned_comprehension_or_moved_into_a_helper_keeps_its_expressions(known):
    """Every expression is a fingerprint of its own, and a comprehension and the loop that
    appends the same element to a list are one: rewriting the loop, or moving the body into a
    helper, leaves all of the rewritten code's expressions to be found."""
    loop = ("def f(x, blocks):\n    out = []\n    for b in blocks:\n"
            "        out.append(torch.tanh(b(x)[..., None, :] + x.mean(dim=-1)))\n    return out\n")
    comprehension = "def g(y, bs):\n    return [torch.tanh(c(y)[..., None, :] + y.mean(dim=-1)) for c in bs]\n"
    helper = ("def _h(y, bs):\n    return [torch.tanh(c(y)[..., None, :] + y.mean(dim=-1)) for c in bs]\n"
              "def g(y, bs):\n    return _h(y, bs)\n")
    assert _expressions(comprehension, known) <= _expressions(loop, known)
    assert _expressions(comprehension, known) <= _expressions(helper, known)
    assert len(_expressions(comprehension, known)) >= 4  # the whole, the element and its operands
    # and a whole submission's fingerprints: no run of tokens cut across the comprehension is lost
    prints = {name: set(similarity._fill(similarity.Document(name, "en", [("e", code)]), known, set()).prints)
              for name, code in (("loop", loop), ("comprehension", comprehension))}
    assert prints["comprehension"] <= prints["loop"]
    other = "def g(y, bs):\n    return [torch.tanh(c(y)[..., None, :] + y.mean(dim=-1)) for c in bs if c]\n"
    assert _expressions(other, known) != _expressions(comprehension, known)
    # the character ranges of Python's parse are bytes: code after a Chinese comment lines up all the same
    chinese = "def g(y, bs):\n    # 注意力\n    return [torch.tanh(c(y)[..., None, :] + y.mean(dim=-1)) for c in bs]  # 注意\n"
    assert _expressions(chinese, known) == _expressions(comprehension, known)
    assert similarity.subexpressions("%timeit f(x)\n", []) == []  # an IPython magic: no parse, statements only


def test_a_leaked_solution_written_the_common_way_is_listed():
    """A reference whose fingerprints the class holds widely has little that is unusual: a
    submission holding all of it, and nothing else, is listed against it though it shares less
    than MIN_SHARED; the honest students who hold parts of it are not."""
    rng = random.Random(3)
    reference = similarity.Document(similarity.REFERENCE, "en", [])
    reference.prints = {v: [0] for v in range(10)}
    docs = []
    for n in range(40):  # each holds 3 of the reference's 10 fingerprints and 6 of its own
        doc = similarity.Document(f"s{n:02d}", "en", [])
        doc.prints = {v: [0] for v in rng.sample(range(10), 3) + list(range(100 + 10 * n, 106 + 10 * n))}
        docs.append(doc)
    leak = similarity.Document("leak", "en", [])
    leak.prints = dict(reference.prints)
    pairs, _ = similarity.compare(docs + [leak], reference)
    listed = [(p.a.key, p.kind) for p in pairs if p.listed]
    assert listed == [("leak", "reference")], [(p.a.key, p.b.key, p.score, p.threshold) for p in pairs[:5]]
    assert pairs[0].shared < similarity.MIN_SHARED


def test_an_honest_hand_draws_each_rewrite_for_every_occurrence():
    """The class's honest students (benchmarks/similarity.py) choose each spelling wherever it
    applies, independently: one student may write one call as a function and the next as a method,
    so that two students who drew the same way rarely write all of its lines alike."""
    code = "def f(x, y):\n    a = torch.softmax(x, -1)\n    b = torch.softmax(y, -1)\n    return a < b\n"
    hands = {bench.honest_hand(code, random.Random(seed), {"f", "torch", "F"}) for seed in range(30)}
    function, method = re.compile(r"\b(torch|F)\.softmax\("), re.compile(r"\b(?!torch\b|F\b)\w+\.softmax\(")
    assert any(function.search(h) and method.search(h) for h in hands)  # both forms in one hand
    assert any(" < " in h for h in hands) and any(" > " in h for h in hands)
    assert len(hands) >= 10
    for hand in hands:
        compile(hand, "hand", "exec")


def test_the_released_notebook_is_boilerplate_in_both_languages():
    """A student who submits the released notebook, English or Chinese, has nothing of their own."""
    assignment = similarity.Assignment.load(ASSIGNMENT)
    for language in ("en", "zh_CN"):
        name, nb = bench.released(ASSIGNMENT, language)
        source = assignment.sources[name]
        doc = assignment.fill(similarity.Document("blank", language, assemble.own_code(source, nb)))
        assert doc.prints == {}, language


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """A class of HONEST honest students of chapter 2, a copy hidden by renaming (in the Chinese
    notebook), one by every disguise at once, and a leaked reference solution; an earlier year's
    archive that holds a copy of one of this year's students; graded by nothing: the step alone."""
    root = tmp_path_factory.mktemp("similar")
    subs, archive, out = root / "subs", root / "archive", root / "out"
    rng = random.Random(7)
    pool = bench.pools(ASSIGNMENT)
    keep = set(pool) | similarity.Assignment.load(ASSIGNMENT).known
    honest = {f"s{n:02d}": {e: bench.honest_hand(rng.choice(ways), rng, keep) for e, ways in pool.items()}
              for n in range(HONEST)}
    for student, answers in honest.items():
        bench.write(subs, student, ASSIGNMENT, bench.notebook(ASSIGNMENT, answers))
    planted = {"copy_zh": ("s01", "renamed", "zh_CN"), "copy_all": ("s02", "all", "en")}
    for copier, (original, how, language) in planted.items():
        answers = {e: bench.disguise(code, how, rng, keep) for e, code in honest[original].items()}
        bench.write(subs, copier, ASSIGNMENT, bench.notebook(ASSIGNMENT, answers, language))
    leak = {e: bench.disguise(ways[0], "renamed", rng, keep) for e, ways in pool.items()}
    bench.write(subs, "leak", ASSIGNMENT, bench.notebook(ASSIGNMENT, leak))
    old = {e: bench.disguise(code, "comments_whitespace_literals", rng, keep) for e, code in honest["s03"].items()}
    bench.write(archive, "alumnus", ASSIGNMENT, bench.notebook(ASSIGNMENT, old))
    _lay_out_bad_input(subs)
    report = similarity.run(subs, out, archive=archive)
    return {"out": out, "report": report, "subs": subs}


def _lay_out_bad_input(subs):
    """Every kind of input the step must skip, with its reason, without stopping."""
    name = layout.source_notebooks(ASSIGNMENT)[0].name
    good = (subs / "s00" / ASSIGNMENT / name).read_text()
    for student, content in (("empty", ""), ("garbage", "{not json"), ("truncated", good[:5000]),
                             ("no_cells", '{"cells": 3}'), ("cells_of_numbers", '{"cells": [1, 2]}')):
        (subs / student / ASSIGNMENT).mkdir(parents=True)
        (subs / student / ASSIGNMENT / name).write_text(content)
    huge = subs / "huge" / ASSIGNMENT / name
    huge.parent.mkdir(parents=True)
    with open(huge, "w") as f:  # 50 MB on the scale of st_size, sparse on the disk
        f.write(good)
        f.truncate(50 * 2**20)
    other = layout.source_notebooks("ch04_multihead_attention")[0]
    (subs / "other_assignment" / ASSIGNMENT).mkdir(parents=True)
    (subs / "other_assignment" / ASSIGNMENT / name).write_text(
        (layout.NOTEBOOKS / "ch04_multihead_attention" / other.name).read_text())
    (subs / "misnamed" / ASSIGNMENT).mkdir(parents=True)
    (subs / "misnamed" / ASSIGNMENT / "mine.ipynb").write_text(good)
    (subs / "nothing").mkdir()
    (subs / "stray" / "ch99_unknown").mkdir(parents=True)


def _found(batch) -> dict:
    return batch["report"]["assignments"][ASSIGNMENT]


def test_copies_lead_the_list_and_honest_students_stay_under_the_threshold(batch):
    pairs = _found(batch)["pairs"]
    listed = {frozenset((p["a"], p["b"])) for p in pairs if p["listed"]}
    expected = {frozenset(("copy_zh", "s01")), frozenset(("copy_all", "s02")), frozenset(("leak", "reference solution")),
                frozenset(("s03", "archive/alumnus"))}
    assert listed == expected, [(p["a"], p["b"], p["score"], p["threshold"]) for p in pairs[:8]]
    assert [p["listed"] for p in pairs[:len(expected)]] == [True] * len(expected)  # listed first, then the rest
    kinds = {frozenset((p["a"], p["b"])): p["kind"] for p in pairs}
    assert kinds[frozenset(("leak", "reference solution"))] == "reference"
    assert kinds[frozenset(("s03", "archive/alumnus"))] == "archive"
    bar = _found(batch)["threshold"]
    assert 0 < bar < 1
    honest = [p for p in pairs if p["kind"] == "pair" and frozenset((p["a"], p["b"])) not in expected]
    assert honest and all(p["score"] <= bar for p in honest)
    assert _found(batch)["compared"] == HONEST + 3 and _found(batch)["archive"] == 1


def test_bad_input_is_skipped_with_its_reason(batch):
    reasons = {(s["student"], s["assignment"]): s["reason"] for s in batch["report"]["skipped"]}
    expect = {
        "empty": "is empty", "garbage": "is not a valid notebook: JSONDecodeError",
        "truncated": "is not a valid notebook: JSONDecodeError", "no_cells": "is not a valid notebook",
        "cells_of_numbers": "is not a valid notebook", "huge": "is 50 MB, over the 20 MB",
        "other_assignment": "has no solution cell of this assignment", "misnamed": "missing notebook",
    }
    for student, words in expect.items():
        assert words in reasons[student, ASSIGNMENT], (student, reasons.get((student, ASSIGNMENT)))
    assert reasons["nothing", ""] == "no submission"
    assert reasons["stray", "ch99_unknown"] == "not an assignment of the course: ch99_unknown"


def _hidden_test_lines() -> list[str]:
    """Every line of the hidden tests of the assignment's source notebook (long enough to be telling)."""
    lines, hidden = [], False
    for cell in nbt.read(nbt.source_notebook(ASSIGNMENT)).cells:
        for line in cell.source.splitlines():
            hidden = hidden or "BEGIN HIDDEN TESTS" in line
            if hidden and len(line.strip()) > 25 and "HIDDEN TESTS" not in line:
                lines.append(line.strip())
            hidden = hidden and "END HIDDEN TESTS" not in line
    assert len(lines) > 5
    return lines


def test_a_pair_page_shows_both_sides_own_code_with_linked_regions(batch):
    found = {frozenset((p["a"], p["b"])): p for p in _found(batch)["pairs"]}
    entry = found[frozenset(("copy_zh", "s01"))]
    page = (batch["out"] / entry["page"]).read_text()
    assert '<html lang="en">' in page and "Unusually similar: copy_zh and s01" in page
    # each side's regions link to the other side's, and every link lands on a region of the page
    ids = set(re.findall(r' id="([AB]\d+)"', page))
    targets = re.findall(r'class="twin" href="#([AB]\d+)"', page)
    assert {t[0] for t in ids} == {"A", "B"} and targets and set(targets) <= ids
    assert page.count("<mark>") >= 2 and "text-decoration: underline" in page  # not told by colour alone
    assert set(entry["exercises"]) <= set(bench.pools(ASSIGNMENT)) and len(entry["exercises"]) >= 3
    # only the students' own code: no test cell, no hidden test, nor the install cell that the notebook gives
    text = html.unescape(page)
    for line in _hidden_test_lines():
        assert line not in text, line
    assert "install_course_package" not in text and "check_own_code" not in text
    assert "masked_softmax" in text


def test_pages_and_section_in_chinese_come_from_the_catalog(batch, tmp_path):
    report = similarity.run(batch["subs"], tmp_path, language="zh_CN")
    section = similarity.section(report)
    assert 'lang="zh-CN"' in section and "异常相似的提交：请查看" in section and "并排对照" in section
    assert "比较了" in section and "参考解答" in section and "没有提交" in section
    page = next((tmp_path / "similarity" / ASSIGNMENT).glob("copy_zh*.html")).read_text()
    assert '<html lang="zh-CN">' in page and "异常相似：copy_zh 与 s01" in page
    # the prose, without the style, the code and the exercises' names (identifiers)
    prose = html.unescape(re.sub(r"<(style|pre|h3)>.*?</\1>|<[^>]+>", " ", page, flags=re.S))
    words = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]{2,}", prose))
    # the ids, and a notebook's language named in its own words (English, 简体中文): no English sentence
    assert words <= {"copy_zh", "s01", "ch02_scoring_functions", "English"}, words


def test_the_outputs_for_scripts(batch):
    rows = list(csv.DictReader(open(batch["out"] / "similarity.csv", encoding="utf-8")))
    assert {"assignment", "kind", "student_a", "student_b", "score", "threshold", "listed", "exercises", "page"} <= set(rows[0])
    assert sum(r["listed"] == "True" for r in rows) == 4
    assert json.loads((batch["out"] / "similarity.json").read_text())["assignments"][ASSIGNMENT]["compared"] == HONEST + 3


def test_a_class_too_small_for_a_distribution_lists_nothing(tmp_path):
    rng = random.Random(1)
    pool = bench.pools(ASSIGNMENT)
    answers = {e: bench.honest_hand(ways[0], rng, set(pool)) for e, ways in pool.items()}
    for student in ("a", "b"):
        bench.write(tmp_path / "subs", student, ASSIGNMENT, bench.notebook(ASSIGNMENT, answers))
    found = similarity.run(tmp_path / "subs", tmp_path / "out")["assignments"][ASSIGNMENT]
    assert found["threshold"] is None and not any(p["listed"] for p in found["pairs"])
    assert found["pairs"][0]["score"] == 1.0  # ranked all the same


def test_the_command_writes_its_files_and_the_summary(batch, tmp_path):
    done = subprocess.run([sys.executable, "-m", "autograder", "similarity", str(batch["subs"]), "--out", str(tmp_path)],
                          cwd=nbt.ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "pairs to look at" in done.stdout
    summary = (tmp_path / "summary.html").read_text()
    assert 'id="similarity"' in summary and "similarity/ch02_scoring_functions/copy_zh--s01.html" in summary
    bad = subprocess.run([sys.executable, "-m", "autograder", "similarity", str(tmp_path / "nowhere"), "--out",
                          str(tmp_path)], cwd=nbt.ROOT, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and bad.stderr.startswith("error: submissions folder")
