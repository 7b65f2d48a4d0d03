"""The coordinator alone, on a batch of any size: ``python -m benchmarks.coordinator``
(``make bench-coordinator``).

Judges (and the work done where they run: :func:`autograder.entry.finish`) are recorded
once, for real, on chapter 1's six kinds of submission (the solution, the blank notebook,
four half-done ones: :func:`benchmarks.grading.build_batch`); then ``--submissions`` students
hand in those notebooks in turn, and :func:`autograder.grade.grade` grades them with the
recorded results replayed in place of judging. So everything the coordinator does for a
batch runs as in a real one (finding the submissions, the ledger, assembling each notebook
and its job, the gradebook's rows, the files, the outputs, ``summary.html``), and nothing
else: the figures are the coordinator's serial cost per submission, which bounds how many
submissions an hour any number of workers can grade.

``--postgres`` keeps the gradebook on a PostgreSQL server started for the run (Debian's
``postgresql`` package, ``make system``; its default settings, ``fsync`` on), listening
on a Unix socket in a temporary folder only; ``--db URL`` on any server; else SQLite.
Prints wall and CPU seconds, in all and per submission, and per stage (``stages.json``).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import pwd
import signal
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder import course, grade
import layout
from autograder.judging import Prepared, judged_from
from benchmarks import grading as bench
from autograder.books import Books
from autograder.limits import Limits

ASSIGNMENT = "ch01_attention_pooling"


def record(work: Path) -> dict[str, dict]:
    """Judge chapter 1's six kinds of submission for real; variant -> the judged notebooks."""
    subs = work / "recorded"
    bench.build_batch(subs, [ASSIGNMENT], len(bench.VARIANTS))
    root = work / "recording"
    course.write_config(root, f"sqlite:///{root / 'gradebook.db'}")
    books = Books(root)
    books.generate(ASSIGNMENT)
    sources = books.sources(ASSIGNMENT)
    books.close()
    prepared = [grade.prepare(s, Limits(), sources) for s in grade.find_submissions(subs)]
    recorded = {}
    for judged in grade.LocalJudges(root, os.cpu_count() or 1).judge(prepared):
        if judged.problem or judged.lost:
            sys.exit(f"bench: recording {judged.submission.student_id} failed: {judged.problem or judged.lost}")
        recorded[judged.submission.student_id] = {name: output for name, (_, output) in judged.notebooks.items()}
    return recorded


class Replay:
    """In place of the judges: each submission's recorded results, by its kind."""

    def __init__(self, recorded: dict[str, dict]):
        self.recorded = recorded

    def judge(self, batch: list[Prepared]):
        for prepared in batch:
            outputs = self.recorded[bench._variant(prepared.submission.student_id)]
            yield judged_from(prepared, {name: dict(output) for name, output in outputs.items()})


def lay_out(folder: Path, work: Path, count: int) -> list[str]:
    """``count`` students, each handing in one of the recorded kinds (hard links: one copy
    of each notebook on disk)."""
    names = bench.students(count)
    notebook = layout.source_notebooks(ASSIGNMENT)[0].name
    for student in names:
        target = folder / student / ASSIGNMENT
        target.mkdir(parents=True)
        os.link(work / "recorded" / bench._variant(student) / ASSIGNMENT / notebook, target / notebook)
    return names


@contextlib.contextmanager
def postgres_server():
    """A PostgreSQL server with its default settings on a Unix socket in a temporary folder;
    its SQLAlchemy URL. Run as Debian's ``postgres`` user when we are root."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        sys.exit("bench: PostgreSQL's server is not installed: `make system` (Debian's postgresql package)")
    bindir = Path(found[-1]).parent
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    folder = Path(tempfile.mkdtemp(prefix="pg-", dir="/tmp"))
    if prefix:
        pwd.getpwnam("postgres")
        shutil.chown(folder, "postgres", "postgres")
    folder.chmod(0o700)
    data = folder / "data"

    def tool(*args: str) -> None:
        done = subprocess.run([*prefix, str(bindir / args[0]), *args[1:]], cwd=folder, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"bench: {args[0]} failed: {done.stdout}{done.stderr}")

    started = False
    try:
        tool("initdb", "-D", str(data), "-U", "gradebook", "--auth=trust", "-E", "UTF8", "--no-locale")
        tool("pg_ctl", "-D", str(data), "-l", str(folder / "server.log"), "-w", "-t", "60",
             "-o", f"-c listen_addresses='' -k {folder} -p 5432", "start")
        started = True
        tool("createdb", "-h", str(folder), "-p", "5432", "-U", "gradebook", "gradebook")
        yield f"postgresql://gradebook@/gradebook?host={folder}&port=5432"
    finally:
        if started:
            subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                           capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def replay(work: Path, recorded: dict, count: int, db_url: str | None) -> None:
    subs = work / "submissions"
    if not subs.exists():
        lay_out(subs, work, count)
    out = work / "out"
    shutil.rmtree(out, ignore_errors=True)
    kind = (db_url or "sqlite").split(":")[0]
    print(f"replaying {count} judged submissions through the coordinator ({kind} gradebook; load {_load()})",
          flush=True)
    wall, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(open(os.devnull, "w")):  # a line per submission
        results = grade.grade(subs, out, db_url=db_url, stage_times=True, judges=Replay(recorded))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert len(results) == count, len(results)
    stages = json.loads((out / "stages.json").read_text())["stages"]
    print(f"{kind}: {count} submissions in {wall:.1f} s wall, {cpu:.1f} CPU s: "
          f"{wall / count * 1000:.1f} ms wall and {cpu / count * 1000:.1f} ms CPU per submission "
          f"({count / wall * 3600:,.0f} submissions an hour on one core; load {_load()})")
    for stage, spent in stages.items():
        print(f"  {stage:16s} {spent['wall'] / count * 1000:7.1f} ms wall  {spent['cpu'] / count * 1000:7.1f} ms CPU"
              " per submission")


def _load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.coordinator", description=__doc__.split("\n\n")[0])
    parser.add_argument("--submissions", type=int, default=10_000, help="submissions in the batch (default 10000)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--postgres", action="store_true", help="a PostgreSQL server started for the run")
    where.add_argument("--db", default=None, help="SQLAlchemy URL of an empty gradebook")
    parser.add_argument("--sqlite-too", action="store_true", help="with --postgres or --db: SQLite first")
    args = parser.parse_args(argv)
    if args.submissions < 1:
        parser.error("--submissions must be at least 1")
    # stopped with kill: the PostgreSQL server and the temporary folder go too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="attention-coordinator-") as tmp:
        work = Path(tmp)
        print(f"recording the judges' results for {len(bench.VARIANTS)} kinds of {ASSIGNMENT} submission ...",
              flush=True)
        recorded = record(work)
        if args.sqlite_too or not (args.postgres or args.db):
            replay(work, recorded, args.submissions, None)
        if args.db:
            replay(work, recorded, args.submissions, args.db)
        elif args.postgres:
            with postgres_server() as url:
                replay(work, recorded, args.submissions, url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
