"""The publishing workflow (.github/workflows/book.yml) is a valid GitHub Actions workflow,
checked offline against the workflow schema that check-jsonschema ships, and does what
docs/instructors.md says: `make book` on Python 3.11, then _build/html to GitHub Pages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

import notebook_tools as nbt

WORKFLOW = nbt.ROOT / ".github" / "workflows" / "book.yml"
CHECK = Path(sys.executable).parent / "check-jsonschema"


def _validate(path: Path) -> subprocess.CompletedProcess:
    # a proxy that refuses every connection: the check must need no network
    offline = {**os.environ, "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
               "NO_PROXY": ""}
    return subprocess.run([str(CHECK), "--builtin-schema", "vendor.github-workflows", str(path)],
                          capture_output=True, text=True, env=offline, timeout=120)


def test_the_workflow_is_valid_against_githubs_schema():
    done = _validate(WORKFLOW)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "validation done" in done.stdout


def test_the_schema_check_rejects_a_broken_workflow(tmp_path):
    broken = tmp_path / "book.yml"
    broken.write_text(WORKFLOW.read_text().replace("runs-on:", "runs_on:"))
    done = _validate(broken)
    assert done.returncode == 1 and "'runs-on' is a required property" in done.stdout, done.stdout + done.stderr


def test_the_workflow_builds_the_book_and_deploys_it_with_the_wheels():
    flow = yaml.safe_load(WORKFLOW.read_text())
    build = flow["jobs"]["build"]["steps"]
    uses = [s.get("uses", "").split("@")[0] for s in build]
    assert uses[:2] == ["actions/checkout", "actions/setup-python"]
    assert build[1]["with"]["python-version"] == "3.11"
    assert any(s.get("run") == "make book" for s in build)
    upload = next(s for s in build if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "_build/html"  # holds _static/wheels/ (book/_ext/learner_links.py)
    assert any("_static/wheels" in s.get("run", "") for s in build)
    deploy = flow["jobs"]["deploy"]
    assert deploy["needs"] == "build" and deploy["steps"][0]["uses"].startswith("actions/deploy-pages")
    assert flow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
