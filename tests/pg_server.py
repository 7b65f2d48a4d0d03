"""A throwaway PostgreSQL server for the tests: the ``postgres_url`` fixture.

A fresh cluster is created in a temporary folder (``initdb``), listens only on a Unix
socket inside that folder (no TCP at all), and is stopped and deleted at the end. When the
tests run as root, the server runs as Debian's unprivileged ``postgres`` user (PostgreSQL
refuses to run as root). A test module uses it with ``from pg_server import postgres_url``.

Needs Debian's ``postgresql`` package (the server binaries) and ``psycopg[binary]`` (the
driver SQLAlchemy 2.1 uses for a plain ``postgresql://`` URL); without them the test fails
and says what to install.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

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
