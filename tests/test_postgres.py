"""The grader with a PostgreSQL gradebook (``--db postgresql://...``), against a real server.

A throwaway PostgreSQL cluster is created in a temporary folder (``initdb``), listens only
on a Unix socket inside that folder (no TCP at all), and is stopped and deleted at the
end. When the tests run as root, the server runs as Debian's unprivileged ``postgres``
user (PostgreSQL refuses to run as root). One assignment is graded for two students (the
solution and the blank learner notebook) and the grades are read back from the database
with nbgrader's own ``Gradebook``.

Needs Debian's ``postgresql`` package (the server binaries) and ``psycopg[binary]`` (the
driver SQLAlchemy 2.1 uses for a plain ``postgresql://`` URL); without them the test fails
and says what to install.
"""

from __future__ import annotations

import csv
import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder import course

import notebook_tools as nbt

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("grading")]

ASSIGNMENT = "ch01_attention_pooling"
INSTALL_HINT = "install Debian's `postgresql` package (apt-get install postgresql; `make system` does it)"


def _server_binaries() -> Path:
    """The folder holding ``initdb``, ``pg_ctl`` and ``createdb`` (newest version first)."""
    candidates = [os.environ.get("POSTGRES_BIN", "")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True)
    if shutil.which("initdb"):
        candidates.append(str(Path(shutil.which("initdb")).parent))
    for folder in filter(None, candidates):
        if all(Path(folder, tool).is_file() for tool in ("initdb", "pg_ctl", "createdb")):
            return Path(folder)
    pytest.fail(f"PostgreSQL server binaries (initdb, pg_ctl) not found in /usr/lib/postgresql/*/bin "
                f"nor on PATH: {INSTALL_HINT}", pytrace=False)


def _as_server_user() -> tuple[list[str], str | None]:
    """The command prefix that runs a server tool unprivileged, and that user's name (None: us)."""
    if os.geteuid() != 0:
        return [], None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.fail(f"running as root and there is no `postgres` user to run the server as: {INSTALL_HINT}",
                    pytrace=False)
    return ["runuser", "-u", "postgres", "--"], "postgres"


@pytest.fixture(scope="module")
def postgres_url():
    """A fresh, empty database on a private PostgreSQL server; its SQLAlchemy URL."""
    try:
        import psycopg  # noqa: F401 - SQLAlchemy 2.1's driver for postgresql:// URLs
    except ImportError:
        pytest.fail("the PostgreSQL driver is missing: pip install 'psycopg[binary]' (it is in requirements.txt)",
                    pytrace=False)
    bindir = _server_binaries()
    prefix, user = _as_server_user()
    # a short path: a Unix socket's path is limited to ~107 bytes
    folder = Path(tempfile.mkdtemp(prefix="pg-", dir="/tmp"))
    if user:
        shutil.chown(folder, user, user)
    folder.chmod(0o700)
    data, port = folder / "data", 5432  # the socket is .s.PGSQL.5432 inside the private folder

    def tool(name, *args, check=True):
        done = subprocess.run([*prefix, str(bindir / name), *args], cwd=folder,
                              capture_output=True, text=True, timeout=60)
        if check and done.returncode != 0:
            log = (folder / "server.log").read_text() if (folder / "server.log").exists() else ""
            pytest.fail(f"{name} failed ({done.returncode}):\n{done.stdout}{done.stderr}\n{log}", pytrace=False)
        return done

    started = False
    try:
        tool("initdb", "-D", str(data), "-U", "gradebook", "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync")
        options = f"-c listen_addresses='' -k {folder} -p {port} -c fsync=off -c full_page_writes=off"
        tool("pg_ctl", "-D", str(data), "-l", str(folder / "server.log"), "-w", "-t", "60", "-o", options, "start")
        started = True
        tool("createdb", "-h", str(folder), "-p", str(port), "-U", "gradebook", "gradebook")
        yield f"postgresql://gradebook@/gradebook?host={folder}&port={port}"
    finally:
        if started:
            tool("pg_ctl", "-D", str(data), "-m", "fast", "-w", "stop", check=False)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def graded(postgres_url, tmp_path_factory):
    subs = tmp_path_factory.mktemp("submissions")
    out = tmp_path_factory.mktemp("graded-postgres")
    nbt.lay_out_solution_and_blank(subs, [ASSIGNMENT])
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(subs), "--out", str(out),
         "--db", postgres_url, "--workers", "2"],
        cwd=nbt.ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_grades_csv_full_marks_and_zero(graded):
    rows = {r["student_id"]: r for r in csv.DictReader(open(graded / "grades.csv"))}
    assert sorted(rows) == ["blank", "solution"]
    full, blank = rows["solution"], rows["blank"]
    assert full["assignment"] == blank["assignment"] == ASSIGNMENT
    assert float(full["max_score"]) > 0
    assert float(full["score"]) == float(full["max_score"]), full
    assert float(blank["score"]) == 0.0, blank
    assert full["status"] == blank["status"] == "graded"
    # the books were kept in PostgreSQL, not in the default SQLite file
    assert not (graded / "course" / "gradebook.db").exists()


def test_the_grades_are_in_the_postgres_database(graded, postgres_url):
    from nbgrader.api import Gradebook

    source = nbt.read(course.source_notebooks(ASSIGNMENT)[0])
    tests = sorted(nbt.grade_ids(source, nbt.is_test_cell))
    gb = Gradebook(postgres_url)
    try:
        assert gb.engine.dialect.name == "postgresql"
        assert sorted(s.id for s in gb.students) == ["blank", "solution"]
        assignment = gb.find_assignment(ASSIGNMENT)
        assert sorted(c.name for nb in assignment.notebooks for c in nb.grade_cells) == tests
        max_score = float(assignment.max_score)
        rows = {r["student_id"]: r for r in csv.DictReader(open(graded / "grades.csv"))}
        assert max_score == float(rows["solution"]["max_score"]) > 0
        for student, expected in (("solution", max_score), ("blank", 0.0)):
            submission = gb.find_submission(ASSIGNMENT, student)
            assert float(submission.score) == expected, (student, submission.score)
            grades = [g for nb in submission.notebooks for g in nb.grades]
            assert sorted(g.name for g in grades) == tests
            for g in grades:
                assert float(g.auto_score) == (float(g.max_score) if student == "solution" else 0.0), (student, g.name)
    finally:
        gb.close()
        gb.engine.dispose()  # no connection left open when the server stops
