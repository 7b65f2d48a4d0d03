"""Grading on a real Dask distributed cluster (``grade --scheduler``), on this machine.

A ``dask scheduler`` and two ``dask worker`` processes (one thread each) listen on
127.0.0.1 only; the tests start and stop them. One mixed batch of chapter 1 (NumPy only,
no training: the cheapest to grade) is graded on one machine, then through the cluster:
the same ``grades.csv`` and ``report.json`` every time, when a worker is killed with
``kill -9`` in the middle of the batch (with a PostgreSQL gradebook, the shared
deployment's), and when the coordinator is killed and started again. A worker with a
``GPU`` resource receives the chapters that train.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

import notebook_tools as nbt
from pg_server import postgres_url  # noqa: F401 - the fixture

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("distributed")]

ASSIGNMENT = "ch01_attention_pooling"
DASK = Path(sys.executable).parent / "dask"
STARTUP_S = 90
BATCH_S = 600

TAMPER = """
import builtins, numpy as np
np.allclose = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
builtins.AssertionError = type("Nothing", (Exception,), {})
"""
KILL_OWN_SANDBOX = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"


@pytest.fixture(scope="module")
def submissions(tmp_path_factory):
    """Solved, blank, half-done, two hostile submissions, and one handed in under the wrong name."""
    subs = tmp_path_factory.mktemp("dask-subs")
    name = nbt.source_notebook(ASSIGNMENT).name
    solved = nbt.read(nbt.source_notebook(ASSIGNMENT))
    blank = nbt.read(nbt.NOTEBOOKS / ASSIGNMENT / name)
    half = nbt.half_done(ASSIGNMENT)
    batch = {
        "ann": solved, "ben": blank, "cem": half,
        "dia": nbt.with_first_cell(blank, TAMPER),  # tries to make every check pass
        "eve": nbt.with_first_cell(solved, KILL_OWN_SANDBOX),  # kills its own sandbox
    }
    nbt.lay_out(subs, ASSIGNMENT, batch)
    (subs / "fay" / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(solved, subs / "fay" / ASSIGNMENT / "my_work.ipynb")
    return subs


def _grade(subs, out, *extra, **popen) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "autograder", "grade", str(subs), "--out", str(out), *extra]
    return subprocess.Popen(cmd, cwd=nbt.ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def _finish(process: subprocess.Popen) -> str:
    stdout, stderr = process.communicate(timeout=BATCH_S)
    assert process.returncode == 0, stdout + stderr
    return stdout


def _outputs(out: Path) -> tuple[str, list]:
    return (out / "grades.csv").read_text(), json.loads((out / "report.json").read_text())


@pytest.fixture(scope="module")
def one_machine(submissions, tmp_path_factory):
    out = tmp_path_factory.mktemp("dask-local")
    _finish(_grade(submissions, out, "--workers", "2"))
    csv_text, report = _outputs(out)
    rows = {line.split(",")[0]: line for line in csv_text.splitlines()[1:]}
    # the batch is what it claims to be
    assert rows["ann"].split(",")[2] == rows["ann"].split(",")[3] != "0"
    assert rows["ben"].split(",")[2] == rows["dia"].split(",")[2] == "0"
    assert "the student's process was killed" in rows["eve"] and rows["eve"].split(",")[2] == "0"
    assert "rejected" in rows["fay"] and "missing notebook" in rows["fay"]
    return out


class Cluster:
    """A scheduler and named workers on 127.0.0.1, all started (and stopped) here."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.file = folder / "scheduler.json"
        self.processes: dict[str, subprocess.Popen] = {}
        self._start("scheduler", [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0",
                                  "--no-dashboard", "--scheduler-file", str(self.file)])
        deadline = time.monotonic() + STARTUP_S
        while not (self.file.is_file() and self.file.read_text().strip()):
            assert self.processes["scheduler"].poll() is None, self._log("scheduler")
            assert time.monotonic() < deadline, "the scheduler did not start in time"
            time.sleep(0.2)
        self.address = json.loads(self.file.read_text())["address"]
        from distributed import Client

        self.client = Client(self.address, timeout=30)

    def _start(self, name: str, cmd: list[str]) -> None:
        log = open(self.folder / f"{name}.log", "w")
        # a worker killed mid-batch leaves its judging folder and Dask's scratch space: in the test's folder
        self.processes[name] = subprocess.Popen(cmd, cwd=nbt.ROOT, stdout=log, stderr=subprocess.STDOUT,
                                                env={**os.environ, "TMPDIR": str(self.folder)})

    def _log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text()[-3000:]

    def start_worker(self, name: str, *extra: str) -> None:
        self._start(name, [str(DASK), "worker", "--scheduler-file", str(self.file), "--name", name,
                           "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1",
                           "--memory-limit", "0", "--death-timeout", "60", *extra])

    def keys_run_by(self) -> dict[str, set[str]]:
        """worker name -> the keys of the tasks it has run (from its own transition log)."""
        def keys(dask_worker):
            return dask_worker.name, sorted({str(entry[0]) for entry in dask_worker.state.log if entry})

        return {name: set(ran) for name, ran in self.client.run(keys).values()}

    def wait_for(self, names: set[str]) -> None:
        deadline = time.monotonic() + STARTUP_S
        while self.worker_names() != names:
            for name in names:
                assert self.processes[name].poll() is None, self._log(name)
            assert time.monotonic() < deadline, f"workers {names} did not join in time: {self.worker_names()}"
            time.sleep(0.2)

    def worker_names(self) -> set[str]:
        return {info["name"] for info in self.client.scheduler_info(n_workers=-1)["workers"].values()}

    def executed(self) -> int:
        """How many tasks the live workers have run."""
        return sum(self.client.run(lambda dask_worker: dask_worker.state.executed_count).values())

    def kill(self, name: str) -> None:
        os.kill(self.processes[name].pid, signal.SIGKILL)
        self.processes[name].wait(timeout=30)

    def stop(self) -> None:
        self.client.close()
        for name in reversed(list(self.processes)):
            process = self.processes[name]
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = Cluster(tmp_path_factory.mktemp("dask-cluster"))
    try:
        for name in ("w1", "w2"):
            cluster.start_worker(name)
        cluster.wait_for({"w1", "w2"})
        yield cluster
    finally:
        cluster.stop()


def test_the_cluster_grades_as_one_machine_does(submissions, one_machine, cluster, tmp_path):
    out = tmp_path / "out"
    before = cluster.executed()
    stdout = _finish(_grade(submissions, out, "--scheduler", cluster.address))
    assert _outputs(out) == _outputs(one_machine)
    # five submissions went to the workers, once each: the one that killed its own sandbox
    # was graded like the others, not retried; the misnamed one needed no worker
    assert cluster.executed() - before == 5
    assert sorted(line.split("/")[0] for line in stdout.splitlines() if f"/{ASSIGNMENT}:" in line) == \
        ["ann", "ben", "cem", "dia", "eve", "fay"]
    summary = (out / "summary.html").read_text()
    assert "eve" in summary.split('id="flagged"')[1] and "fay" in summary.split('id="flagged"')[1]


def test_a_worker_killed_mid_batch_loses_nothing_postgres_gradebook(submissions, one_machine, cluster,
                                                                     postgres_url, tmp_path):  # noqa: F811
    """A worker killed with ``kill -9`` while it judges: its submission is judged again
    elsewhere and entered once, in a PostgreSQL gradebook (the shared deployment's)."""
    out = tmp_path / "out"
    coordinator = _grade(submissions, out, "--scheduler", cluster.address, "--db", postgres_url)
    deadline = time.monotonic() + BATCH_S
    victim = None
    while victim is None:
        assert coordinator.poll() is None, "the batch ended before a worker could be killed"
        assert time.monotonic() < deadline, "no worker started judging in time"
        busy = {cluster.client.scheduler_info()["workers"][addr]["name"]
                for addr, keys in cluster.client.processing().items() if keys}
        if busy and (out / "course" / "ledger").exists():
            victim = sorted(busy)[0]
        time.sleep(0.1)
    cluster.kill(victim)
    stdout = _finish(coordinator)
    try:
        assert _outputs(out) == _outputs(one_machine)
        graded = [line.split("/")[0] for line in stdout.splitlines() if f"/{ASSIGNMENT}:" in line]
        assert sorted(graded) == ["ann", "ben", "cem", "dia", "eve", "fay"], stdout
        assert not (out / "course" / "gradebook.db").exists()
        gb = Gradebook(postgres_url)
        try:
            assert gb.engine.dialect.name == "postgresql"
            assert {s.id: len(s.submissions) for s in gb.students} == \
                {"ann": 1, "ben": 1, "cem": 1, "dia": 1, "eve": 1}
        finally:
            gb.close()
            gb.engine.dispose()
    finally:
        cluster.start_worker(victim)  # the next tests get two workers again
        cluster.wait_for({"w1", "w2"})


def test_a_coordinator_killed_mid_batch_resumes_with_the_cluster_up(submissions, one_machine, cluster, tmp_path):
    out = tmp_path / "out"
    first = _grade(submissions, out, "--scheduler", cluster.address, start_new_session=True)
    ledger = out / "course" / "ledger"
    deadline = time.monotonic() + BATCH_S
    while not (ledger.exists() and len(list(ledger.rglob("*.json"))) >= 2):
        assert first.poll() is None, "the batch ended before it could be interrupted"
        assert time.monotonic() < deadline, "nothing was graded in time"
        time.sleep(0.1)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    kept = sorted(p.parent.name for p in ledger.rglob("*.json"))
    stdout = _finish(_grade(submissions, out, "--scheduler", cluster.address))
    regraded = [line.split("/")[0] for line in stdout.splitlines() if f"/{ASSIGNMENT}:" in line]
    assert not set(regraded) & set(kept), f"graded again after the kill: {set(regraded) & set(kept)}"
    assert sorted(regraded + kept) == ["ann", "ben", "cem", "dia", "eve", "fay"]
    assert _outputs(out) == _outputs(one_machine)


def test_no_scheduler_there_is_one_clear_line(submissions, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(tmp_path / "out"),
         "--scheduler", "tcp://127.0.0.1:9"],
        cwd=nbt.ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot reach the Dask scheduler at tcp://127.0.0.1:9"), \
        done.stderr


def test_training_chapters_go_to_gpu_workers(cluster, tmp_path):
    """With a worker that has a GPU resource, chapter 3 (it trains) is judged there only;
    chapter 1 may go anywhere. Blank notebooks: the training stops at once, so this is cheap."""
    subs = tmp_path / "subs"
    trains, plain = "ch03_bahdanau_attention", ASSIGNMENT
    for student in ("gus", "hal"):
        for assignment in (trains, plain):
            (subs / student / assignment).mkdir(parents=True)
            for nb in (nbt.NOTEBOOKS / assignment).glob("*.ipynb"):
                nbformat.write(nbt.read(nb), subs / student / assignment / nb.name)
    cluster.start_worker("g1", "--resources", "GPU=1")
    try:
        cluster.wait_for({"w1", "w2", "g1"})
        _finish(_grade(subs, tmp_path / "out", "--scheduler", cluster.address))
        ran = cluster.keys_run_by()
        training = {name: {k for k in keys if trains in k} for name, keys in ran.items()}
        assert len(training["g1"]) == 2 and not training["w1"] and not training["w2"], training
    finally:
        cluster.kill("g1")
        cluster.wait_for({"w1", "w2"})


@pytest.mark.parametrize("flags, message", [
    (["--workers", "0"], "--workers must be at least 1, not 0"),
    (["--workers", "2", "--scheduler", "tcp://127.0.0.1:9"], "--workers is for judging on this machine"),
], ids=["no-workers", "workers-with-scheduler"])
def test_contradictory_flags_are_one_clear_line(submissions, tmp_path, flags, message):
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(tmp_path / "out"), *flags],
        cwd=nbt.ROOT, capture_output=True, text=True, timeout=120,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"error: {message}"), done.stderr
