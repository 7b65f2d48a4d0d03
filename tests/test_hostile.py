"""Hostile submissions: one batch of them, graded through the real pipeline.

Each submission below attacks the grader in one way. For each, the batch must finish,
the submission must get no more than it earned, the honest submissions in the same batch
must be graded normally, and the machine must be left as it was. The attacks are bounded
so that a missing defence cannot harm the machine: a few GiB, not all of memory; a few
hundred short-lived processes, not a fork bomb.
"""

from __future__ import annotations

import copy
import csv
import json
import socket
import subprocess
import sys
import threading

import nbformat
import pytest

from autograder import course

import notebook_tools as nbt

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("grading")]

ASSIGNMENT = "ch01_attention_pooling"  # NumPy only: the cheapest to run many times
STUB = 'raise NotImplementedError("not written yet")'


def _source():
    return nbt.read(nbt.source_notebook(ASSIGNMENT))


def _solved():
    """The source notebook as a student who solved everything would submit it."""
    return _source()


def _blank():
    return nbt.read(nbt.NOTEBOOKS / ASSIGNMENT / nbt.source_notebook(ASSIGNMENT).name)


def _with_first_cell(nb, code: str):
    nb = copy.deepcopy(nb)
    nb.cells.insert(0, nbformat.v4.new_code_cell(code))
    return nb


def _max_points() -> int:
    return sum(nbt.nbgrader_meta(c).get("points", 0) for c in _source().cells if nbt.is_test_cell(c))


TAMPER_CHECKS = """
import numpy as np, builtins
import attention_course.checks as checks_module
np.allclose = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
for name in dir(checks_module):
    if name.startswith("check"):
        setattr(checks_module, name, lambda *a, **k: None)
builtins.AssertionError = type("Nothing", (Exception,), {})
"""

TAMPER_IPYTHON = """
ip = get_ipython()
ip.set_custom_exc((BaseException,), lambda *a, **k: None)
ip.showtraceback = lambda *a, **k: None
ip.input_transformers_post.append(lambda lines: ["pass\\n"])
"""

SPY = """
import os, socket, json
spied = {"read": [], "wrote": [], "net": []}
for path in READABLE:  # the environment the code needs: readable, never writable
    try:
        with open(path, "ab") as f:
            spied["wrote"].append(path)
    except Exception:
        pass
for path in PATHS:
    try:
        with open(path, "rb") as f:
            spied["read"].append(path)
    except Exception:
        pass
    try:
        with open(path, "ab") as f:
            spied["wrote"].append(path)
    except Exception:
        pass
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
    spied["net"].append("connected")
except Exception as err:
    spied["net"].append(type(err).__name__)
print("SPIED", json.dumps(spied))
"""

FORK_MANY = """
import subprocess
started = []
try:
    for _ in range(300):
        started.append(subprocess.Popen(["sleep", "600"]))
except Exception as err:
    print("stopped after", len(started), type(err).__name__)
"""

FILL_DISK = """
import os
block = b"x" * (1 << 20)
try:
    with open("big.bin", "wb") as f:
        for _ in range(2048):  # 2 GiB
            f.write(block)
except Exception as err:
    print("disk:", type(err).__name__)
"""


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Grade every hostile submission (and two honest ones) in one batch, two at a time."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    connections = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
                connections.append(conn)
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()

    subs = tmp_path_factory.mktemp("hostile")
    out = tmp_path_factory.mktemp("hostile-out")
    name = nbt.source_notebook(ASSIGNMENT).name
    secrets = [
        str(nbt.source_notebook(ASSIGNMENT)),
        str(out / "course" / "gradebook.db"),
        str(out / "course" / "source" / ASSIGNMENT / name),
        str(subs / "honest" / ASSIGNMENT / name),
        str(nbt.ROOT / "README.md"),
    ]
    readable = [
        str(nbt.ROOT / "attention_course" / "checks.py"),
        str(nbt.ROOT / "autograder" / "judge.py"),
        sys.executable,
    ]
    solved, blank = _solved(), _blank()

    tests_gutted = copy.deepcopy(blank)
    for cell in tests_gutted.cells:
        if nbt.is_test_cell(cell):
            cell.source = "pass"
            cell.metadata["nbgrader"]["points"] = 1000
    tests_deleted = copy.deepcopy(blank)
    tests_deleted.cells = [c for c in tests_deleted.cells if not nbt.is_test_cell(c)]
    solution_as_test = copy.deepcopy(blank)
    for cell in solution_as_test.cells:
        if nbt.is_solution_cell(cell):
            cell.metadata["nbgrader"].update(grade=True, solution=False, points=50)
            cell.source = "pass"
    duplicated = copy.deepcopy(solved)
    duplicated.cells = [c for cell in duplicated.cells for c in ([cell, cell] if nbt.is_test_cell(cell) else [cell])]

    notebooks = {
        "honest": solved,
        "honest_blank": blank,
        "tamper_checks": _with_first_cell(blank, TAMPER_CHECKS),
        "tamper_ipython": _with_first_cell(blank, TAMPER_IPYTHON),
        "tests_gutted": tests_gutted,
        "tests_deleted": tests_deleted,
        "solution_as_test": solution_as_test,
        "duplicated_tests": duplicated,
        "infinite_loop": _with_first_cell(solved, "while True:\n    pass"),
        "memory_hog": _with_first_cell(solved, "hog = bytearray(6 * 1024**3)"),
        "fork_many": _with_first_cell(solved, FORK_MANY),
        "fill_disk": _with_first_cell(solved, FILL_DISK),
        "print_flood": _with_first_cell(solved, "print('x' * (300 * 1024 * 1024))"),
        "kill_self": _with_first_cell(solved, "import os\nos.kill(os.getpid(), 9)"),
        "kill_parent": _with_first_cell(
            solved, "import os, signal\nfor pid in (os.getppid(), 1, -1):\n"
            "    try:\n        os.kill(pid, signal.SIGKILL)\n    except Exception:\n        pass"),
        "spy": _with_first_cell(solved, f"PATHS = {secrets!r}\nREADABLE = {readable!r}\nPORT = {port}\n" + SPY),
        "huge_image": _with_first_cell(
            solved, "from IPython.display import Image, display\n"
            "display(Image(data=b'\\x89PNG\\r\\n' + bytes(200 * 1024 * 1024)))"),
    }
    for student, nb in notebooks.items():
        folder = subs / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / name)
    # a module beside the notebook that would shadow what the tests import
    (subs / "shadow" / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(solved, subs / "shadow" / ASSIGNMENT / name)
    for module in ("numpy.py", "attention_course.py"):
        (subs / "shadow" / ASSIGNMENT / module).write_text("raise SystemExit('shadowed')\n")
    (subs / "broken_json" / ASSIGNMENT).mkdir(parents=True)
    (subs / "broken_json" / ASSIGNMENT / name).write_text('{"cells": [')
    (subs / "misnamed" / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(solved, subs / "misnamed" / ASSIGNMENT / "Copy of notebook.ipynb")

    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(subs), "--out", str(out), "--workers", "2",
         "--cell-timeout", "20", "--notebook-timeout", "90", "--memory-mb", "2048",
         "--processes", "64", "--disk-mb", "64"],
        cwd=nbt.ROOT, capture_output=True, text=True, timeout=1500,
    )
    stop.set()
    listener.close()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {r["student_id"]: r for r in csv.DictReader(open(out / "grades.csv"))}
    return {"rows": rows, "out": out, "connections": connections, "stdout": done.stdout}


def _score(batch, student) -> float:
    return float(batch["rows"][student]["score"])


def test_honest_submissions_are_graded_normally(batch):
    assert _score(batch, "honest") == _max_points()
    assert _score(batch, "honest_blank") == 0


@pytest.mark.parametrize("student", ["tamper_checks", "tamper_ipython"])
def test_tampering_with_the_checks_earns_nothing(batch, student):
    assert _score(batch, student) == 0, batch["rows"][student]


@pytest.mark.parametrize("student", ["tests_gutted", "tests_deleted", "solution_as_test"])
def test_edited_tests_are_replaced_by_the_course_tests(batch, student):
    row = batch["rows"][student]
    assert float(row["score"]) == 0 and float(row["max_score"]) == _max_points(), row


@pytest.mark.parametrize("student", ["duplicated_tests", "shadow"])
def test_duplicates_and_shadowing_files_change_nothing(batch, student):
    row = batch["rows"][student]
    assert float(row["score"]) == float(row["max_score"]) == _max_points(), row


def test_broken_and_misnamed_notebooks_get_a_reason(batch):
    assert "not a valid notebook" in batch["rows"]["broken_json"]["reason"]
    assert "missing notebook" in batch["rows"]["misnamed"]["reason"]
    assert _score(batch, "broken_json") == _score(batch, "misnamed") == 0


def test_an_infinite_loop_is_stopped_with_a_reason(batch):
    row = batch["rows"]["infinite_loop"]
    assert float(row["score"]) == 0 and "time limit" in row["reason"], row


@pytest.mark.parametrize("student", ["kill_self"])
def test_a_kernel_that_kills_itself_gets_zero_with_a_reason(batch, student):
    row = batch["rows"][student]
    assert float(row["score"]) == 0 and "killed" in row["reason"], row


@pytest.mark.parametrize(
    "student", ["memory_hog", "fork_many", "fill_disk", "print_flood", "huge_image", "kill_parent"]
)
def test_resource_attacks_are_contained(batch, student):
    # the limits stopped the attack; the rest of the notebook was graded as usual
    row = batch["rows"][student]
    assert float(row["score"]) == _max_points(), row


def test_no_process_outlives_its_submission(batch):
    # fork_many started its `sleep 600` processes inside its sandbox: all gone with it
    left = subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True).stdout
    assert "sleep 600" not in left, [line for line in left.splitlines() if "sleep 600" in line]


def test_no_secret_is_readable_or_writable_and_no_network(batch):
    results = batch["out"] / "course" / "judging" / "spy" / ASSIGNMENT
    (found,) = results.glob("*.results.json")
    stdout = json.loads(found.read_text())["stdout"]
    spied = json.loads(stdout.split("SPIED ", 1)[1].splitlines()[0])
    assert spied["read"] == [] and spied["wrote"] == [], spied
    assert "connected" not in spied["net"], spied
    assert batch["connections"] == []


def test_feedback_hides_tracebacks_of_hostile_runs(batch):
    pages = list((batch["out"] / "feedback" / "tamper_checks" / ASSIGNMENT).glob("*.html"))
    assert pages and "BEGIN HIDDEN TESTS" not in pages[0].read_text()
