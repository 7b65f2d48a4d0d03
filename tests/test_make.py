"""The Makefile's targets install what they need and nothing else (read with ``make -n``,
which prints every command a target would run without running one)."""

from __future__ import annotations

import subprocess

import notebook_tools as nbt


def _dry_run(*target: str) -> str:
    done = subprocess.run(["make", "-n", *target], cwd=nbt.ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _apt(commands: str) -> set[str]:
    """The Debian packages that the commands would install when missing."""
    return {package for line in commands.splitlines() if "dpkg-query" in line
            for package in line.split("for p in ", 1)[1].split(";", 1)[0].split()}


def test_each_command_installs_the_debian_packages_it_needs_and_no_other():
    """The Makefile's one table: make book the CJK font of its Chinese figures (a fresh machine's
    first make book failed without it), make grade bubblewrap, make test all of them and npm (axe-core)."""
    assert _apt(_dry_run("book")) == {"fonts-wqy-microhei"}
    assert _apt(_dry_run("grade", "SUBMISSIONS=submissions")) == {"bubblewrap"}
    assert _apt(_dry_run("bench-grade")) == {"bubblewrap"}
    assert _apt(_dry_run("test")) == {"bubblewrap", "postgresql", "chromium", "fonts-wqy-microhei", "npm"}


def test_the_book_executes_its_pages_again_when_the_code_they_import_changes():
    """jupyter-cache keys a page's execution by the page's own code: a changed figure or course
    package would be shown with the old outputs. make book empties the cache when one changed, and
    Sphinx's environments, which would otherwise keep an unchanged page's old outputs."""
    database = subprocess.run(["make", "-n", "-p", "book"], cwd=nbt.ROOT, capture_output=True, text=True).stdout
    rule = next(line for line in database.splitlines() if line.startswith("_build/.jupyter_cache.code:"))
    code = sorted(str(p.relative_to(nbt.ROOT)) for folder in ("attention_course", "book/figures")
                  for p in (nbt.ROOT / folder).rglob("*.py"))
    assert set(code + ["requirements.txt"]) <= set(rule.split(":", 1)[1].split()), rule
    assert "rm -rf _build/.jupyter_cache _build/.doctrees _build/zh_CN" in _dry_run("-W", "book/figures/ch01.py", "book")


def test_nothing_under_home_decides_what_the_book_draws():
    """matplotlib's font list and settings and IPython's start-up files live in the clone, and the
    .venv's Jupyter kernel comes before one under HOME: the variables reach every command a target runs."""
    seen = subprocess.run(["make", "-s", "--eval", "show-env: ; @echo $$MPLCONFIGDIR $$IPYTHONDIR $$JUPYTER_PREFER_ENV_PATH", "show-env"],
                          cwd=nbt.ROOT, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}).stdout.split()
    assert seen == [str(nbt.ROOT / "_build" / ".matplotlib"), str(nbt.ROOT / "_build" / ".ipython"), "1"], seen


def test_book_builds_both_languages_and_translations_update_the_catalogs():
    book = _dry_run("book").splitlines()
    english = next(i for i, c in enumerate(book) if "jupyter-book build . -W --keep-going" in c)
    chinese = next(i for i, c in enumerate(book) if "-m courseware book-zh -W --keep-going" in c)
    assert english < chinese, "make book must build the English book first: the Chinese one reuses its cache"
    translations = _dry_run("translations")
    assert "-m courseware pot _build/gettext" in translations
    assert "sphinx-intl update -p _build/gettext -l zh_CN -d locale" in translations


def test_gpu_check_installs_nothing_on_the_device_machine():
    """The device machine has no package registry: with its python3, make gpu-check runs the check
    alone (the check installs the carried bundle itself); here it installs the environment first."""
    commands = _dry_run("gpu-check", "GPU_PYTHON=python3")
    assert "python3 -m benchmarks.gpu_check" in commands
    for installer in ("pip", "venv", "apt-get"):
        assert installer not in commands, f"make gpu-check GPU_PYTHON=python3 runs {installer}:\n{commands}"
    here = _dry_run("-B", "gpu-check")
    assert "-m venv" in here and _apt(here) == {"bubblewrap"} and ".venv/bin/python -m benchmarks.gpu_check" in here
