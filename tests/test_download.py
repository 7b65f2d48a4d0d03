"""A downloaded exercise notebook runs anywhere, and what it installs holds no answer.

* Each chapter's wheel (``courseware.learner_package``) is a real wheel of ``attention_course``,
  and no line of a solution or hidden-test region of that chapter or a later one is in it.
* In a fresh virtual environment (no clone, no ``.venv`` of the repository; only ``ipykernel``
  and, to spare unpacking its wheel, ``torch`` pre-installed, linked from this environment's
  files) the learner notebook's first cell tells what to do when the book publishes no
  package; with the book's wheels served (a loopback server standing in for the published
  site) it installs the chapter's package once, says so in one line, installs nothing the
  second time, and the notebook then runs to its first stub and fails there with the stub's
  own ``NotImplementedError``.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import browser
import notebook_tools as nbt
import layout
from layout import chapter_of, regions
from courseware import learner_package

# one worker runs them all: the wheels are a module fixture built once
pytestmark = pytest.mark.xdist_group("download")

STUB_MESSAGE = re.search(r'NotImplementedError\("(.*)"\)', regions.CODE_STUB).group(1)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("wheels")
    paths = learner_package.build_wheels(folder)
    return dict(zip(layout.assignments(), paths))


def _python_sources(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as archive:
        return {n: archive.read(n).decode() for n in archive.namelist() if n.endswith(".py")}


def test_each_wheel_is_its_chapters_package(wheels):
    for assignment, wheel in wheels.items():
        assert wheel.name == f"attention_course-{learner_package.wheel_version(assignment)}-py3-none-any.whl"
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            dist_info = f"attention_course-{learner_package.wheel_version(assignment)}.dist-info"
            metadata = archive.read(f"{dist_info}/METADATA").decode()
            record = archive.read(f"{dist_info}/RECORD").decode()
            licence = archive.read(f"{dist_info}/LICENSE")
        assert "attention_course/__init__.py" in names
        assert f"Version: {learner_package.wheel_version(assignment)}" in metadata
        assert "License: MIT" in metadata and licence == (nbt.ROOT / "LICENSE").read_bytes(), f"{wheel.name}: its licence"
        for dep in ("numpy", "torch", "matplotlib", "tqdm"):
            assert f"Requires-Dist: {dep}" in metadata, f"{wheel.name} does not require {dep}"
        assert sorted(line.split(",")[0] for line in record.splitlines()) == sorted(names)
        # the reference layers of the chapters before it; for its own and later ones, a stub
        here = chapter_of(assignment)
        sources = _python_sources(wheel)
        for other in layout.assignments():
            module = sources[f"attention_course/reference/{chapter_of(other)}.py"]
            is_stub = "raise ImportError(" in module and "def " not in module and "class " not in module
            assert is_stub == (chapter_of(other) >= here), (
                f"{wheel.name}: reference/{chapter_of(other)}.py is {'a stub' if is_stub else 'the solution'}"
            )


def _definitions(source: str) -> dict[str, str]:
    """Every function, method and class that ``source`` defines, by its code: ``{ast dump of
    the definition, its name and docstrings left out: its name}``. The same code under another
    name or docstring, anywhere in a module, gives the same key."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            copy = ast.parse(ast.unparse(node)).body[0]  # a detached copy to normalise
            for inner in ast.walk(copy):
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    inner.name = "_"
                    body = inner.body
                    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                            and isinstance(body[0].value.value, str):
                        inner.body = body[1:] or [ast.Pass()]
            found[ast.dump(copy, annotate_fields=False)] = node.name
    return found


def _solution_definitions(assignment: str) -> dict[str, str]:
    """The definitions of ``assignment``'s solution cells (as :func:`_definitions`), each
    named ``<assignment>:<name>``."""
    found = {}
    for cell in nbt.read(nbt.source_notebook(assignment)).cells:
        if nbt.is_solution_cell(cell):
            code = regions.unmarked(cell.source, regions.SOLUTION)
            found.update({k: f"{assignment}:{v}" for k, v in _definitions(code).items()})
    return found


def _wheel_problems(wheel: Path, assignment: str) -> list[str]:
    """What is wrong with ``wheel`` as chapter ``assignment``'s package: a function, method or
    class of a solution cell of that chapter or a later one in it (whatever its name or
    docstring), or an exercise of an earlier chapter missing from it."""
    order = layout.assignments()
    shipped = {}
    for name, text in _python_sources(wheel).items():
        shipped.update({k: f"{name}:{v}" for k, v in _definitions(text).items()})
    problems = []
    for other in order:
        answers = _solution_definitions(other)
        if order.index(other) >= order.index(assignment):
            problems += [f"{wheel.name} holds {answers[k]} as {shipped[k]}" for k in answers if k in shipped]
        else:
            exercises = set(nbt.grade_ids(nbt.read(nbt.source_notebook(other)), nbt.is_solution_cell))
            problems += [f"{wheel.name} lacks the reference layer {v}" for k, v in answers.items()
                         if v.split(":")[1] in exercises and k not in shipped]
    return problems


def test_no_wheel_holds_an_answer_of_its_chapter_or_a_later_one(wheels):
    problems = [p for assignment, wheel in wheels.items() for p in _wheel_problems(wheel, assignment)]
    assert not problems, "\n".join(problems[:20])


def test_the_answer_search_finds_answers(tmp_path):
    """The whole course package (every chapter's reference layers) packed as chapter 1's wheel
    is caught holding the answers of every chapter."""
    leaky = learner_package.write_wheel(nbt.ROOT / "attention_course", layout.assignments()[0], tmp_path)
    problems = _wheel_problems(leaky, layout.assignments()[0])
    for assignment in layout.assignments():
        first = nbt.grade_ids(nbt.read(nbt.source_notebook(assignment)), nbt.is_solution_cell)[0]
        assert any(f"holds {assignment}:{first} " in p for p in problems), f"missed {assignment}:{first}"


def test_write_wheel_refuses_a_folder_that_is_not_the_package(tmp_path):
    (tmp_path / "something").mkdir()
    with pytest.raises(ValueError, match="not an attention_course package folder"):
        learner_package.write_wheel(tmp_path / "something", layout.assignments()[0], tmp_path)
    with pytest.raises(ValueError, match="does not start with its chapter"):
        learner_package.wheel_name("multihead")


# ------------------------------------------------------------------ a fresh environment


def _installed_closure(names: list[str]) -> list:
    """The distributions ``names`` of this environment and every one they require (extras left
    out), as pip would install them into a fresh one: the same versions, the same files."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    found, pending = {}, list(names)
    while pending:
        name = canonicalize_name(pending.pop())
        if name in found:
            continue
        found[name] = dist = metadata.distribution(name)
        for requirement in map(Requirement, dist.requires or []):
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return list(found.values())


def _link_into(site: Path, distributions) -> None:
    """Each file of ``distributions`` that lives under site-packages, hard-linked into ``site``
    (copied where a link cannot cross file systems): unpacking PyTorch's wheel again would take
    half a minute of ``make test`` and prove nothing about the course."""
    for dist in distributions:
        for file in dist.files or []:
            if file.parts[0] == "..":  # a console script in bin/: the kernel needs none
                continue
            source, target = Path(dist.locate_file(file)), site / file
            if not source.is_file():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                target.hardlink_to(source)
            except OSError:
                shutil.copy2(source, target)


@pytest.fixture(scope="module")
def fresh_kernel(tmp_path_factory, wheels) -> str:
    """A virtual environment made from the base Python with only ``ipykernel`` and ``torch`` (and
    what they require) in it, the files of this environment's own installs, and a Jupyter kernel
    spec for it; returns the value for ``JUPYTER_PATH`` that makes it the kernel ``fresh``."""
    root = tmp_path_factory.mktemp("fresh")
    venv = root / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # pip too: the install cell runs `python -m pip install` in the learner's kernel
    _link_into(site, _installed_closure(["pip", "ipykernel", "torch"]))
    probe = subprocess.run([str(python), "-c", "import torch, ipykernel, attention_course"],
                           capture_output=True, text=True, cwd=root)
    assert "No module named 'attention_course'" in probe.stderr, (
        f"the fresh environment lacks torch or ipykernel, or can import attention_course already: {probe.stderr}")
    spec = root / "jupyter" / "kernels" / "fresh"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "fresh", "language": "python",
    }))
    return str(root / "jupyter")


def _run_until_error(nb, folder: Path, stop_after: int | None = None):
    """Run ``nb``'s code cells in order in the fresh kernel, with ``folder`` as the working
    folder, until a cell fails (or after ``stop_after`` code cells); return the cells run."""
    client = NotebookClient(nb, kernel_name="fresh", timeout=900, allow_errors=True,
                            resources={"metadata": {"path": str(folder)}})
    ran = []
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            client.execute_cell(cell, index)
            ran.append(cell)
            if any(o.output_type == "error" for o in cell.outputs) or len(ran) == stop_after:
                break
    return ran


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def _error(cell):
    return next((o for o in cell.outputs if o.output_type == "error"), None)


@pytest.mark.slow
def test_downloaded_notebook_installs_once_and_runs_to_its_first_stub(tmp_path, wheels, fresh_kernel, monkeypatch):
    monkeypatch.setenv("JUPYTER_PATH", fresh_kernel)
    with browser.serve(next(iter(wheels.values())).parent) as site:
        for n, assignment in enumerate(layout.assignments()):
            (released,) = sorted((nbt.NOTEBOOKS / assignment).glob("*.ipynb"))
            folder = tmp_path / assignment  # the learner's download folder: the notebook alone
            folder.mkdir()
            wheel = learner_package.wheel_name(assignment)

            if n == 0:
                # A book with no published address: one line says what to do, and with the
                # chapter's wheel downloaded beside the notebook, the cell installs that.
                nb = learner_package.with_install_cell(nbt.read(released), assignment, wheels_url="")
                (cell,) = _run_until_error(nb, folder, stop_after=1)
                error = _error(cell)
                assert error is not None and error.ename == "ModuleNotFoundError", cell.outputs
                assert wheel in error.evalue and "\n" not in error.evalue, error.evalue
                shutil.copy(wheels[assignment], folder / wheel)
                source = wheel
            else:  # the published book serves the wheels
                nb = learner_package.with_install_cell(nbt.read(released), assignment, wheels_url=f"{site}/")
                source = f"{site}/{wheel}"
            ran = _run_until_error(nb, folder)
            install = ran[0]
            assert _error(install) is None, install.outputs
            said = _text(install).strip()
            assert said == f"Installed attention_course {learner_package.wheel_version(assignment)} from {source}.", said
            # the notebook stops at the first exercise, with the stub's message
            failed = ran[-1]
            error = _error(failed)
            assert error is not None, f"{assignment}: every cell ran; no stub stopped it"
            first_exercise = nbt.grade_ids(nb, nbt.is_solution_cell)[0]
            grade_id = nbt.nbgrader_meta(failed).get("grade_id")
            assert (error.ename, error.evalue) == ("NotImplementedError", STUB_MESSAGE), (
                f"{assignment}: cell {grade_id} failed with {error.ename}: {error.evalue}"
            )
            assert grade_id.startswith(f"test_{first_exercise}"), f"{assignment}: stopped at {grade_id}"

            if n != 1:  # the install cell is one code for every chapter: its second run is checked once
                continue
            # a second run installs nothing
            (again,) = _run_until_error(nb, folder, stop_after=1)
            assert _text(again).strip() == (
                f"attention_course ({learner_package.wheel_version(assignment)}) is already importable: nothing to install."
            ), again.outputs
