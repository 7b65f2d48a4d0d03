"""The suite's own scheduling: `make test` runs ``pytest -n JOBS --dist loadgroup``, and the
heavy fixtures (a graded batch, the built book, the wheels) are module-scoped in modules marked
``xdist_group``, so that one worker builds each of them once. pytest 9.2 stopped honouring the
mark (pytest-xdist renames ``item._nodeid``, which pytest no longer reads): the group was split
over the workers, and every batch was graded once per worker. This test keeps that from
coming back unnoticed with an upgrade."""

from __future__ import annotations

import os
import subprocess
import sys

GROUPED = '''
import os, time
import pytest
pytestmark = pytest.mark.xdist_group("one")

@pytest.fixture(scope="module")
def built():
    with open(os.environ["SETUPS"], "a") as log:
        log.write(os.environ.get("PYTEST_XDIST_WORKER", "main") + "\\n")
    return 1

@pytest.mark.parametrize("n", range(6))
def test_uses_the_fixture(built, n):
    time.sleep(0.2)
'''

UNGROUPED = '''
import time
import pytest

@pytest.mark.parametrize("n", range(6))
def test_other(n):
    time.sleep(0.2)
'''


def test_an_xdist_group_runs_on_one_worker_and_builds_its_fixture_once(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_ungrouped.py").write_text(UNGROUPED)
    setups = tmp_path / "setups.txt"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
         "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**os.environ, "SETUPS": str(setups)},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "12 passed" in done.stdout, done.stdout[-2000:]
    workers = setups.read_text().split()
    assert len(workers) == 1, f"the grouped module's fixture was built on {workers}: the xdist_group mark is ignored"
