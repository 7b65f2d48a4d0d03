"""The learner's real client: JupyterLab from ``.venv`` in headless Chromium.

The test opens chapter 1's learner notebook as a learner would, restarts the kernel and runs
all cells (toolbar, then the *Run* menu), then presses nbgrader's **Validate**, and
reads what the learner sees: for the untouched notebook, a failed validation naming the first
unfinished exercise and the stub's message; for a solved one (the same notebook with the
answers typed in), success. Screenshots are kept in the test's temporary folder (the path is
printed): look at them after a change of the notebooks or of the lab set-up.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

import browser
import cdp
import notebook_tools as nbt
from layout import regions
from courseware import learner_package

ASSIGNMENT = "ch01_attention_pooling"
STUB_MESSAGE = re.search(r'NotImplementedError\("(.*)"\)', regions.CODE_STUB).group(1)

# The lab's state, as the page shows it. Each notebook is opened in a workspace of its own
# (/lab/workspaces/<name>/tree/<path>?reset), so the page holds that one notebook.
PANEL = ".jp-NotebookPanel"
INDICATOR_IDLE = "document.querySelector('.jp-Notebook-ExecutionIndicator')?.getAttribute('data-status') === 'idle'"
# The notebook's execution indicator says 'idle' from the moment the page is drawn, before any
# kernel exists: on a busy machine the kernel's first start takes seconds, and a restart pressed
# then races it and leaves the lab at "Starting" for good. So a kernel is ready when the server
# says that the notebook's kernel is idle with the lab connected to it, and the page agrees.
SERVER_IDLE = ("fetch('/api/sessions').then(r => r.json()).then(sessions => sessions.some(s => s.path === {path}"
               " && s.kernel && s.kernel.execution_state === 'idle' && s.kernel.connections > 0))")
# From now on, remember whether the indicator showed another state than idle: a restart is over
# once it did (restarting, then starting), and the kernel is ready again.
WATCH_RESTART = ("(() => { window.__leftIdle = false; clearInterval(window.__watch); window.__watch = setInterval(() => {"
                 f" if (!({INDICATOR_IDLE})) window.__leftIdle = true; }}, 50); return true; }})()")
PROMPTS = f"[...document.querySelectorAll('{PANEL} .jp-InputArea-prompt')].map(p => p.textContent)"
# Run All has run: some cell has an execution count, none is waiting or running ([*]).
RAN = f"({PROMPTS}).some(t => /\\d/.test(t)) && !({PROMPTS}).some(t => t.includes('*'))"
DIALOG_TEXT = "document.querySelector('.jp-Dialog-content')?.innerText || ''"
DIALOG_SHOWN = "(document.querySelector('.jp-Dialog .jp-mod-accept')?.getBoundingClientRect().width > 0)"
RUN_ALL_SHOWN = "[...document.querySelectorAll('.lm-Menu-itemLabel')].some(e => e.textContent.trim() === 'Run All Cells')"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server of ``.venv`` on the loopback, serving a learner's folder with the
    untouched notebook and a solved copy; yields (base URL, token, folder)."""
    if browser.find_chromium() is None:
        pytest.fail(f"Chromium not found; install it: {browser.INSTALL_HINT}")
    root = tmp_path_factory.mktemp("lab")
    work, home = root / "work", root / "home"
    (work / "solved").mkdir(parents=True)
    (released,) = sorted((nbt.NOTEBOOKS / ASSIGNMENT).glob("*.ipynb"))
    shutil.copy(released, work / released.name)
    nbformat.write(nbt.solved(nbt.read(released), ASSIGNMENT), work / "solved" / released.name)
    # A new learner's settings, less the first-run news prompt that would cover the page.
    settings = home / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port, token = _free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env.update(HOME=str(home), JUPYTERLAB_SETTINGS_DIR=str(home / "lab-settings"))
    log = open(root / "lab.log", "w")
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("jupyter")), "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={work}", *(["--allow-root"] if os.geteuid() == 0 else [])],
        cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start:\n{(root / 'lab.log').read_text()[-3000:]}")
                time.sleep(1)
        yield base, token, work
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def _run_all_and_validate(page: cdp.Page, url: str, path: str, shots: Path, name: str) -> str:
    """Open ``url``, the notebook ``path``, restart and run all cells, press Validate; the
    validation dialog's text. When the page does not get there, a screenshot of where it stopped is kept."""
    try:
        return _steps(page, url, path, shots, name)
    except (TimeoutError, RuntimeError):
        page.screenshot(shots / f"{name}-stopped-here.png")
        print(f"\nthe lab stopped; screenshot: {shots / f'{name}-stopped-here.png'}")
        raise


def _steps(page: cdp.Page, url: str, path: str, shots: Path, name: str) -> str:
    kernel_ready = f"{INDICATOR_IDLE} && {SERVER_IDLE.format(path=json.dumps(path))}"
    page.goto(url)
    page.wait_for(f"document.querySelector('{PANEL} .jp-Cell') !== null", what="the notebook")
    page.wait_for(kernel_ready, timeout=180, what="the notebook's kernel")
    # Kernel -> Restart Kernel..., then Run -> Run All Cells, as the notebook asks before a
    # submission. (The toolbar's one-click restart-and-run-all can lose the first cell's request
    # while the lab reconnects to the restarted kernel, when the machine is busy.)
    page.click_until(f"{PANEL} jp-button[data-command='notebook:restart-kernel']", DIALOG_SHOWN,
                     "the restart dialog")
    page.evaluate(WATCH_RESTART)
    page.click_until(".jp-Dialog .jp-mod-accept", f"!{DIALOG_SHOWN}", "the restart dialog to close")  # "Restart"
    page.wait_for(f"window.__leftIdle === true && {kernel_ready}", timeout=180, what="the restarted kernel")
    time.sleep(2)
    page.click_until(".lm-MenuBar-item", RUN_ALL_SHOWN, "the Run menu", text="Run")
    page.click(".lm-Menu-itemLabel", "Run All Cells")
    page.wait_for(f"{RAN} && {INDICATOR_IDLE}", timeout=600, what="the cells to run")
    page.screenshot(shots / f"{name}-1-run-all.png")
    page.click(f"{PANEL} jp-button.validate-button")
    text = page.wait_for(DIALOG_TEXT, timeout=300, what="the validation dialog")
    time.sleep(1)  # let the dialog finish drawing before the picture
    page.screenshot(shots / f"{name}-2-validate.png")
    page.click(".jp-Dialog .jp-mod-accept")
    return text


@pytest.mark.slow
def test_validate_button_in_jupyterlab(lab, tmp_path):
    base, token, work = lab
    shots = tmp_path / "screenshots"
    first_exercise = nbt.grade_ids(nbt.read(next(work.glob("*.ipynb"))), nbt.is_solution_cell)[0]
    with cdp.chromium_page() as page:
        name = next(work.glob("*.ipynb")).name
        blank = _run_all_and_validate(page, f"{base}/lab/workspaces/untouched/tree/{name}?reset&token={token}", name,
                                      shots, "untouched")
        solved = _run_all_and_validate(page, f"{base}/lab/workspaces/solved/tree/solved/{name}?reset&token={token}",
                                       f"solved/{name}", shots, "solved")
    print(f"\nscreenshots of the lab: {shots}")
    # What Run All did, as Validate saved it: the install cell found the package, and the run
    # stopped at the first exercise's test with the stub's message.
    ran = nbt.read(next(work.glob("*.ipynb")))
    install = next(c for c in ran.cells if learner_package.is_install_cell(c))
    said = "".join(o.get("text", "") for o in install.outputs)
    assert "is already importable: nothing to install." in said, install.outputs
    failed = [(nbt.nbgrader_meta(c).get("grade_id"), o) for c in ran.cells if c.cell_type == "code"
              for o in c.outputs if o.output_type == "error"]
    assert failed, "Run All raised no error in the untouched notebook"
    grade_id, error = failed[0]
    assert grade_id == f"test_{first_exercise}", f"Run All stopped at {grade_id}: {error.ename}: {error.evalue}"
    assert (error.ename, error.evalue) == ("NotImplementedError", STUB_MESSAGE), (error.ename, error.evalue)
    # Validate says it failed, shows the first unfinished exercise's test, and why.
    assert blank.startswith("Validation Results") and "The following cell failed:" in blank, blank[:2000]
    assert f"{first_exercise}(" in blank.split("The following cell failed:")[1] and STUB_MESSAGE in blank, blank[:2000]
    assert "Success" not in blank
    assert "Success! Your notebook passes all the tests." in solved, solved[:2000]
