"""End-to-end grading through `make grade`: the solution scores full marks, the released
notebook scores 0, and every output (CSV, feedback, report) says so. Bad instructor input
gets one clear line and a non-zero exit."""

from __future__ import annotations

import collections
import csv
import html
import json
import re
import shutil
import subprocess

import pytest

from autograder import cli, scan
from autograder.feedback import HIDDEN_NOTE, NBGRADER_WORDS, visible_part
import layout
from layout import regions

import a11y
import browser
import delegation
import languages
import notebook_tools as nbt

pytestmark = pytest.mark.xdist_group("grading")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Per assignment, graded once through `make grade`: the solution, the blank notebook,
    a submission that delegates every exercise to the course's solution (by the three styles in
    turn, tests/delegation.py), a submission
    whose exercises with a forbidden list each call one of its entries, by the routes in turn,
    while every other answer is the solution (tests/delegation.py), and the Chinese submissions of
    a mixed-language class with their English twins (tests/languages.py)."""
    subs = tmp_path_factory.mktemp("submissions")
    out = tmp_path_factory.mktemp("graded")
    nbt.lay_out_solution_and_blank(subs, layout.assignments())
    delegation.lay_out_delegations(subs, layout.assignments())
    delegation.lay_out_shortcuts(subs)
    languages.lay_out_mixed_class(subs, layout.assignments())
    done = subprocess.run(
        ["make", "--no-print-directory", "grade", f"SUBMISSIONS={subs}", f"OUT={out}"],
        cwd=nbt.ROOT, capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.mark.slow
def test_grades_csv_full_marks_and_zero(graded):
    rows = list(csv.DictReader(open(graded / "grades.csv")))
    assert {"student_id", "assignment", "score", "max_score"} <= set(rows[0])
    seen = {(r["student_id"], r["assignment"]): r for r in rows}
    assert len(seen) == len(rows) == (3 * len(layout.assignments())
                                      + len(delegation.graded_shortcut_assignments())
                                      + sum(map(len, languages.twins(layout.assignments()).values())))
    for assignment in layout.assignments():
        full, blank = seen["solution", assignment], seen["blank", assignment]
        assert float(full["max_score"]) > 0
        assert float(full["score"]) == float(full["max_score"]), full
        assert float(blank["score"]) == 0.0, blank
        assert full["status"] == blank["status"] == "graded"


@pytest.mark.slow
def test_report_lists_every_test_cell(graded):
    report = json.loads((graded / "report.json").read_text())
    for entry in report:
        path = layout.source_notebooks(entry["assignment"])[0]
        expected = nbt.grade_ids(nbt.read(path), nbt.is_test_cell)
        assert sorted(t["test"] for t in entry["tests"]) == sorted(expected)
        if entry["student_id"] == "solution":
            assert all(t["passed"] and t["error"] is None for t in entry["tests"]), entry
        elif entry["student_id"] == "blank":
            for t in entry["tests"]:
                assert not t["passed"] and t["points"] == 0
                # a stub raises; an unanswered question leaves its answer undefined
                assert t["error"].startswith(("NotImplementedError", "NameError")), t


def _feedback_words(graded, student: str, assignment: str) -> str:
    """The text of ``student``'s feedback page for ``assignment``, without its markup."""
    page = next((graded / "feedback" / student / assignment).glob("*.html")).read_text()
    return html.unescape(re.sub(r"<[^>]+>", "", page))


@pytest.mark.slow
@pytest.mark.parametrize("style", delegation.STYLES)
def test_an_answer_delegated_to_the_course_earns_nothing(graded, style):
    """The grader's package of a chapter holds no solution of that chapter: an exercise that
    imports, wraps or digs out the course's solution (``style``; every chapter's exercises take
    the styles in turn, so each chapter meets each) earns nothing, the whole submission scores 0,
    and the learner is told why: an import fails in its cell, a wrapper in its tests, with the
    sentence that the module holds the course's solutions, which the feedback page shows."""
    why = "holds the course's solutions of chapter"
    student = delegation.DELEGATE_STUDENT
    report = {r["assignment"]: r for r in json.loads((graded / "report.json").read_text()) if r["student_id"] == student}
    assert sorted(report) == layout.assignments()
    for assignment, styles in delegation.styles_in_turn(layout.assignments()).items():
        entry = report[assignment]
        assert entry["status"] == "graded" and float(entry["score"]) == 0.0, entry
        taking = [e for e, s in styles.items() if s == style]
        assert taking, f"{assignment}: no exercise is delegated by {style}"
        tests = [t for t in entry["tests"] if scan.exercise_of_test(t["test"], list(styles)) in taking]
        assert tests and all(t["points"] == 0 and not t["passed"] for t in tests), (assignment, style, tests)
        if style == "import":
            (judged,) = (graded / "course" / "judging" / student / assignment).glob("*/results.json")
            cells = {c["grade_id"]: c["error"] for c in json.loads(judged.read_text())["cells"] if c["kind"] == "solution"}
            assert all(why in (cells[e] or {}).get("message", "") for e in taking), (assignment, cells)
        elif style == "wrapped":
            assert any(why in (t["error"] or "") for t in tests), (assignment, tests)
        if style != "files":
            assert why in _feedback_words(graded, student, assignment), f"{assignment}: the feedback does not say why"


def _shortcut_report(graded) -> dict[str, dict]:
    return {r["assignment"]: r for r in json.loads((graded / "report.json").read_text())
            if r["student_id"] == delegation.SHORTCUT_STUDENT}


@pytest.mark.slow
@pytest.mark.parametrize("route", delegation.SHORTCUT_ROUTES)
def test_a_forbidden_shortcut_earns_its_exercise_nothing(graded, route):
    """Every exercise with a forbidden list that calls one of its entries by ``route`` (a direct
    call, an aliased import, getattr with a built string, a helper in an added cell), answered
    correctly otherwise, scores 0 on every one of its tests, with one sentence in the feedback.
    Both layers saw each call on their own: the scan of the code and the trip-wire in the
    student's process."""
    report = _shortcut_report(graded)
    assert sorted(report) == delegation.graded_shortcut_assignments()
    met = 0
    for assignment, routes in delegation.routes_in_turn().items():
        taking = [e for e, r in routes.items() if r == route]
        if not taking:
            continue
        entry = report[assignment]
        listed = delegation.forbidden_exercises(nbt.read(nbt.source_notebook(assignment)))
        for exercise in taking:
            met += 1
            for t in entry["tests"]:
                if scan.exercise_of_test(t["test"], listed) == exercise:
                    assert t["points"] == 0 and t["error"].startswith(f"ForbiddenShortcut: {exercise} calls "), t
            seen = {(f["how"], f["entry"]) for f in entry["shortcuts"] if f["exercise"] == exercise}
            used = delegation.shortcut_entry(listed[exercise])
            assert {("scan", used), ("trip-wire", used)} <= seen, f"{assignment}/{exercise}/{route}: {seen}"
        words = _feedback_words(graded, delegation.SHORTCUT_STUDENT, assignment)
        assert "which does this exercise's whole job and which its docstring forbids" in words, (
            f"{assignment}: the feedback does not say why")
    assert met > 0, f"no exercise takes the {route} route"


@pytest.mark.slow
def test_a_forbidden_shortcut_costs_nothing_elsewhere(graded):
    """In the shortcut submissions, every test of an exercise without a shortcut passes (a point
    lost there would be a false fail), the trained models' tests included; summary.html lists
    the shortcuts."""
    for assignment, entry in _shortcut_report(graded).items():
        listed = delegation.forbidden_exercises(nbt.read(nbt.source_notebook(assignment)))
        lost = 0.0
        for t in entry["tests"]:
            if scan.exercise_of_test(t["test"], listed) is None:
                assert t["passed"], f"{assignment}: {t['test']} lost points: {t['error']}"
            else:
                lost += t["max_points"]
        assert entry["score"] == entry["max_score"] - lost > 0, entry["score"]
    summary = html.unescape((graded / "summary.html").read_text())
    for assignment, routes in delegation.routes_in_turn().items():
        for exercise in routes:
            assert f"<td>{delegation.SHORTCUT_STUDENT}</td><td>{assignment}</td><td>{exercise}</td>" in summary, exercise


def _hidden_lines(assignment: str) -> list[str]:
    """The lines found only in the hidden tests of ``assignment`` and long enough to be telling."""
    hidden, shown = set(), set()
    for path in layout.source_notebooks(assignment):
        for cell in nbt.read(path).cells:
            for region in regions.contents(cell.source, regions.HIDDEN_TESTS):
                hidden.update(ln.strip() for ln in region.splitlines() if len(ln.strip()) >= 16)
            shown.update(ln.strip() for ln in regions.visible(cell.source, regions.HIDDEN_TESTS).splitlines())
    shown_text = "\n".join(shown)
    return sorted(line for line in hidden if line not in shown_text)


@pytest.mark.slow
def test_feedback_page_per_submission_without_hidden_tests(graded):
    for assignment in layout.assignments():
        hidden = _hidden_lines(assignment)
        assert hidden, f"{assignment} has no hidden tests"
        for student in ("solution", "blank"):
            pages = list((graded / "feedback" / student / assignment).glob("*.html"))
            assert len(pages) == len(layout.source_notebooks(assignment))
            text = pages[0].read_text()
            assert "Score" in text
            assert not re.search(r"<script[^>]+src=\"https?://", text), "feedback loads a script from the network"
            words = html.unescape(re.sub(r"<[^>]+>", "", text))
            leaked = [line for line in hidden if line in words]
            assert not leaked, f"feedback of {student}/{assignment} shows hidden test code: {leaked[:3]}"


def test_visible_part_drops_hidden_regions():
    source = "check(a)\n### BEGIN HIDDEN TESTS\ncheck(secret)\n### END HIDDEN TESTS\ncheck(b)"
    assert visible_part(source) == f"check(a)\n{HIDDEN_NOTE}\ncheck(b)"


@pytest.mark.parametrize(
    "make_input, message",
    [
        (lambda tmp: tmp / "does-not-exist", "does not exist"),
        (lambda tmp: tmp, "no submissions"),
        (lambda tmp: (tmp / "ann" / "ch99_nothing").mkdir(parents=True) or tmp, "unknown assignment 'ch99_nothing'"),
    ],
    ids=["wrong-path", "empty-folder", "unknown-assignment"],
)
def test_bad_input_is_one_clear_line(tmp_path, make_input, message, capsys):
    # in this process: a start of `python -m autograder` per case proved nothing more (that the
    # command as a process prints one line and exits 2 is tests/test_distributed.py's CLI tests')
    assert cli.main(["grade", str(make_input(tmp_path)), "--out", str(tmp_path / "out")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines


@pytest.mark.slow
def test_feedback_math_is_typeset_offline_and_where_the_page_goes_alone(graded, tmp_path):
    """In the grader's output a feedback page typesets its formulas with the MathJax copy in
    feedback/_static and asks the network for nothing. nbgrader's release_feedback sends a
    student the page alone: there it finds no copy and falls back to the CDN's MathJax."""
    if browser.find_chromium() is None:
        pytest.fail(f"Chromium not found; install it: {browser.INSTALL_HINT}")
    page = graded / "feedback" / "blank" / "ch01_attention_pooling" / "attention_pooling.html"
    with browser.serve(graded / "feedback") as base:
        at_home = browser.visit(f"{base}/{page.relative_to(graded / 'feedback')}", budget_ms=10000)
    assert "<mjx-container" in at_home.dom, "the feedback page's formulas were not typeset"
    assert at_home.remote_requests() == [], at_home.remote_requests()
    shutil.copy(page, tmp_path / page.name)
    with browser.serve(tmp_path) as base:
        alone = browser.visit(f"{base}/{page.name}", budget_ms=10000)
    asked = alone.remote_requests()
    assert len(asked) == 1 and "mathjax" in asked[0].lower(), asked


@pytest.mark.slow
def test_feedback_pages_and_summary_meet_wcag_21_aa(graded, tmp_path):
    """axe-core (tests/a11y.py), WCAG 2.1 A and AA, in one Chromium: a feedback page of a failed
    submission in each language (code, outputs, error messages, links) and summary.html; and the
    similarity step's pages, a pair's side by side and summary.html's section, in each language,
    on a small class with planted copies (benchmarks/similarity.py; the step alone, no grading)."""
    if browser.find_chromium() is None:
        pytest.fail(f"Chromium not found; install it: {browser.INSTALL_HINT}")
    source = a11y.axe_source()
    if source is None:
        pytest.fail(f"axe-core is not installed: {a11y.INSTALL_HINT}")
    import cdp
    from autograder import similarity, summary
    from benchmarks import similarity as similar_class

    assignment = next(a for a, students in languages.twins(layout.assignments()).items() if "wrong_zh" in students)
    pages = [f"feedback/{student}/{assignment}/{next((graded / 'feedback' / student / assignment).glob('*.html')).name}"
             for student in ("wrong_en", "wrong_zh")] + ["summary.html"]
    similar_class.build_class(tmp_path / "subs", "ch02_scoring_functions", 8, seed=0)
    for language in ("en", "zh_CN"):
        report = similarity.run(tmp_path / "subs", tmp_path / language, language=language)
        summary.write([], tmp_path / language / "summary.html", similarity.section(report))
        pair = next(e for e in report["assignments"]["ch02_scoring_functions"]["pairs"] if e["listed"])
        pages += [f"similar/{language}/{pair['page']}", f"similar/{language}/summary.html"]
    problems, langs = [], {}
    with browser.serve(graded) as base, browser.serve(tmp_path) as similar, \
            cdp.chromium_page(width=1280, height=2000) as page:
        for doc in pages:
            url = f"{similar}/{doc.removeprefix('similar/')}" if doc.startswith("similar/") else f"{base}/{doc}"
            page.goto(url)
            page.wait_for(f"location.href === {json.dumps(url)} && document.readyState === 'complete'", what=f"{doc} to load")
            page.wait_for("!window.MathJax || !MathJax.startup || MathJax.startup.promise.then(() => true)",
                          what=f"MathJax on {doc}")
            langs[doc] = page.evaluate("document.documentElement.lang")
            problems += a11y.describe(doc, a11y.run_axe(page, source))
    assert list(langs.values()) == ["en", "zh-CN", "en", "en", "en", "zh-CN", "en"], langs
    assert not problems, f"{len(problems)} violations of WCAG 2.1 AA:\n" + "\n".join(problems)


@pytest.mark.slow
def test_grading_writes_the_similarity_step(graded):
    """`make grade` ends with the similarity step (tests/test_similarity.py tests what it finds):
    its files, every assignment of the batch compared, and its section of summary.html."""
    report = json.loads((graded / "similarity.json").read_text())
    assert sorted(report["assignments"]) == layout.assignments()
    assert all(found["compared"] >= 2 for found in report["assignments"].values())
    rows = list(csv.DictReader(open(graded / "similarity.csv", encoding="utf-8")))
    assert rows and {r["assignment"] for r in rows} <= set(layout.assignments())
    assert 'id="similarity"' in (graded / "summary.html").read_text()


# ----------------------------------------------------------------------------- a class in two languages


def _report(graded) -> dict[tuple[str, str], dict]:
    return {(r["student_id"], r["assignment"]): r for r in json.loads((graded / "report.json").read_text())}


def _has_chinese(text: str) -> bool:
    return re.search(r"[\u4e00-\u9fff]", text) is not None


@pytest.mark.slow
def test_the_same_code_earns_the_same_points_in_both_languages(graded):
    """Each Chinese submission scores what its English twin (the same code) scores, test by test,
    and a notebook whose metadata names no language of the course is graded as English."""
    report = _report(graded)
    compared = 0
    for assignment, students in languages.twins(layout.assignments()).items():
        for student, twin in students.items():
            ours, theirs = report[student, assignment], report[twin, assignment]
            assert ours["status"] == theirs["status"] == "graded", (student, assignment)
            assert [(t["test"], t["points"]) for t in ours["tests"]] == [(t["test"], t["points"]) for t in theirs["tests"]], (
                f"{student} and {twin} score differently on {assignment}")
            assert ours["language"] == (languages.ZH if student.endswith("_zh") else "en"), (student, ours["language"])
            compared += 1
    wrong = [t for (student, _), r in report.items() if student == "wrong_en" for t in r["tests"]]
    assert wrong and not all(t["passed"] for t in wrong) and any(t["passed"] for t in wrong), (
        "the wrong implementations should fail some tests and leave others")
    assert compared == sum(map(len, languages.twins(layout.assignments()).values()))


@pytest.mark.slow
def test_a_chinese_submission_is_told_in_chinese(graded):
    """The tests' messages of a Chinese submission (the checks' words, the tests' own, the mistakes
    they name) are Chinese where its English twin's are English; its feedback page is Chinese,
    with nbgrader's words translated and no hidden test shown."""
    report = _report(graded)
    for assignment, students in languages.twins(layout.assignments()).items():
        if "wrong_zh" not in students:
            continue
        zh, en = report["wrong_zh", assignment], report["wrong_en", assignment]
        checked = [(a["error"], b["error"]) for a, b in zip(zh["tests"], en["tests"])
                   if b["error"] and b["error"].startswith("AssertionError")]
        assert checked, f"{assignment}: no test failed a check"
        for chinese, english in checked:
            assert _has_chinese(chinese) and not _has_chinese(english), (chinese, english)
    for assignment, students in languages.twins(layout.assignments()).items():
        hidden = _hidden_lines(assignment)
        for student in (s for s in students if s.endswith("_zh")):
            page = next((graded / "feedback" / student / assignment).glob("*.html")).read_text()
            assert '<html lang="zh-CN">' in page and "得分" in page
            if any((languages.ZH_NOTEBOOKS / assignment).glob("*.ipynb")):  # the prose the student read
                assert _has_chinese(re.search(r"<h1[^>]*>(.*?)</h1>", page, re.S).group(1)), f"{student}/{assignment}"
            left = [w for w in NBGRADER_WORDS if w in page]
            assert not left, f"{student}/{assignment}: nbgrader's words left in English: {left}"
            words = html.unescape(re.sub(r"<[^>]+>", "", page))
            assert not [line for line in hidden if line in words], f"{student}/{assignment} shows hidden test code"
        assert '<html lang="en">' in next((graded / "feedback" / students.get("wrong_en", "blank") / assignment).glob("*.html")).read_text()


@pytest.mark.slow
def test_the_summary_counts_both_languages_together(graded):
    """summary.html: one row per assignment over both languages, with how many came in each."""
    page = (graded / "summary.html").read_text()
    rows = list(csv.DictReader(open(graded / "grades.csv")))
    report = _report(graded)
    twins = languages.twins(layout.assignments())
    for assignment in layout.assignments():
        mine = [r for r in rows if r["assignment"] == assignment]
        counted = collections.Counter(report[r["student_id"], assignment]["language"] for r in mine)
        assert counted[languages.ZH] == sum(s.endswith("_zh") for s in twins[assignment]) >= 1, (assignment, counted)
        assert counted["en"] >= 2, (assignment, counted)
        row = re.search(rf'<tr><td><a href="#{assignment}">{assignment}</a></td>(.*?)</tr>', page).group(1)
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
        assert cells[0] == str(len(mine)), (assignment, cells)
        assert cells[1] == ", ".join(f"{lang} {n}" for lang, n in sorted(counted.items())), (assignment, cells)
