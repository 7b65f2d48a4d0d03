"""The Makefile's targets install what they need and nothing else (read with ``make -n``,
which prints every command a target would run without running one)."""

from __future__ import annotations

import subprocess

import notebook_tools as nbt


def _dry_run(*target: str) -> str:
    done = subprocess.run(["make", "-n", *target], cwd=nbt.ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_grade_installs_bubblewrap_only():
    for target in (["grade", "SUBMISSIONS=submissions"], ["bench-grade"]):
        commands = _dry_run(*target)
        assert "command -v bwrap" in commands and "bubblewrap" in commands, commands
        for other in ("postgresql", "chromium", "fonts-"):
            assert other not in commands, f"make {target[0]} installs {other}:\n{commands}"


def test_test_installs_everything_the_suite_needs():
    commands = _dry_run("test")
    for package in ("bubblewrap", "postgresql", "chromium", "fonts-wqy-microhei"):
        assert package in commands, f"make test does not install {package}:\n{commands}"


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
    assert "-m venv" in here and "command -v bwrap" in here and ".venv/bin/python -m benchmarks.gpu_check" in here
