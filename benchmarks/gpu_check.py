"""Everything a GPU run of the course should prove, in one command: ``make gpu-check``
(``python -m benchmarks.gpu_check``; docs/benchmarks.md, "On a GPU").

Steps, each on ``--device`` (``COURSE_DEVICE``, default ``cuda``; ``COURSE_DEVICE=cpu`` is the dry
run: the same steps on the CPU):

1. ``train``: the training chapters' reference solutions (3, 6, 7, 8, 10: ``benchmarks.training_budget``,
   and chapter 9's grouped-query comparison: ``figures.ch09.gqa_comparison``) trained from their
   recipes on the device, each score against its chapter's bar, beside the CPU figure of
   docs/benchmarks.md;
2. ``tests``: every chapter's source notebook (solutions, visible and hidden tests) run top to
   bottom in one namespace, as one kernel runs it; its tests place tensors on every device of
   ``devices_to_test()`` and its training cells train on ``best_device()``; per chapter the tests
   passed and what the device allocated;
3. ``grade``: the solution and the blank notebook of every chapter through ``python -m autograder
   grade`` (the sandbox, the judges); every solution full marks, every blank 0; what device a
   training chapter's sandboxed student process trained on, as it printed it; and a probe
   in the sandbox: the GPU visible there, no network, memory limited (``--data`` where the GPU is
   bound, ``--as`` elsewhere);
4. ``bench``: ``benchmarks.transformer`` (the course's Transformer against ``torch.nn.Transformer``,
   and chapter 8's generation) and chapter 9's ``gpu_table`` on the device (on the CPU: the quick
   runs and ``memory_table``, the CPU's counterpart of ``gpu_table``).

A step that cannot run says why and counts as not passed: the last lines are one per step
(``ok``, ``FAILED`` or ``NOT RUN: why``), then ``gpu-check: all N steps passed on DEVICE`` or what
did not; the exit status is 0 only when every step passed. The whole run keeps to ``--budget``
seconds (480 on CUDA: the device machine's 8 minutes): a step that runs out of its share of it
stops and says so.

On the device machine (python3 with PyTorch, without Jupyter, nbgrader or bubblewrap, no package
registry), ``--bundle`` (default ``.gpu-bundle``, made here by ``make gpu-bundle``) is installed
first when nbgrader is missing: its wheels into the interpreter's environment (``pip --no-index``),
the repository on its path (a ``.pth`` file, as the editable install here), bubblewrap unpacked
from its ``.deb`` into the bundle; then the command starts again with them.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs" / "benchmarks.md"
STEPS = ("train", "tests", "grade", "bench")
TRAINING = ("ch03", "ch06", "ch07", "ch08", "ch10")
#: chapter 9's models with this many key-value heads must clear chapter 8's bar; one head is
#: measured, not held to it (docs/benchmarks.md: about 11 points lower at this budget)
GQA_HELD_TO_THE_BAR = (4, 2)
#: the share of the budget kept for each step while the steps before it run (on CUDA, of 480 s:
#: about 70 s for the tests, 145 for the grading, 95 for the timings)
KEPT = {"train": 0.0, "tests": 0.15, "grade": 0.3, "bench": 0.2}


@dataclasses.dataclass
class Step:
    name: str
    status: str = "NOT RUN"  # "ok", "FAILED" or "NOT RUN"
    why: str = ""
    seconds: float = 0.0
    lines: list[str] = dataclasses.field(default_factory=list)

    def say(self, line: str) -> None:
        print(f"[{self.name}] {line}", flush=True)
        self.lines.append(line)

    def fail(self, why: str) -> None:
        self.say(f"FAILED: {why}")
        if self.status != "NOT RUN":
            self.status = "FAILED"
        self.why = self.why or why


class NotRunnable(Exception):
    """A step cannot run here; the message says why."""


# ----------------------------------------------------------------------------------------------
# the bundle (the device machine)
# ----------------------------------------------------------------------------------------------

def install_bundle(bundle: Path) -> None:
    """The bundle's wheels into this interpreter's environment, the repository on its path,
    bubblewrap unpacked into the bundle; nothing is fetched."""
    import sysconfig

    wheels = sorted((bundle / "wheels").glob("*.whl"))
    if not wheels:
        raise NotRunnable(f"no wheels in {bundle / 'wheels'}: run `make gpu-bundle` here and carry {bundle.name}")
    print(f"gpu-check: installing {len(wheels)} wheels of {bundle} (no index)", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-compile",
                    "--disable-pip-version-check", *map(str, wheels)], check=True)
    site = Path(sysconfig.get_paths()["purelib"])
    (site / "attention_course_repo.pth").write_text(f"{REPO}\n")
    root = bundle / "root"
    for deb in sorted((bundle / "debs").glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)


def prepare(args) -> None:
    """On a machine without the grader's packages, install the bundle and start again."""
    bwrap_dir = args.bundle / "root" / "usr" / "bin"
    if (bwrap_dir / "bwrap").exists() and str(bwrap_dir) not in os.environ["PATH"].split(":"):
        os.environ["PATH"] = f"{bwrap_dir}:{os.environ['PATH']}"
    try:
        import nbgrader  # noqa: F401
        return
    except ImportError:
        pass
    if os.environ.get("GPU_CHECK_INSTALLED"):
        raise NotRunnable("nbgrader is still missing after installing the bundle")
    if not args.bundle.is_dir():
        raise NotRunnable(f"nbgrader is not installed and there is no bundle at {args.bundle} (`make gpu-bundle`)")
    install_bundle(args.bundle)
    os.environ["GPU_CHECK_INSTALLED"] = "1"
    os.execv(sys.executable, [sys.executable, "-m", "benchmarks.gpu_check", *sys.argv[1:]])


# ----------------------------------------------------------------------------------------------
# the CPU figures of docs/benchmarks.md
# ----------------------------------------------------------------------------------------------

def cpu_figures() -> tuple[dict, dict]:
    """From docs/benchmarks.md, as printed there: {(chapter, order, seed): held-out % on one CPU
    thread} (the spread table of ``make train-budget ORDERS=all``) and {kv heads: {seed: %}} (the
    grouped-query table)."""
    training, gqa = {}, {}
    for line in DOCS.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].isdigit() and re.fullmatch(r"`\w+`", cells[1]):
            for seed, value in enumerate(cells[2:]):
                number = re.match(r"[\d.]+", value)
                if number:
                    training[f"ch{int(cells[0]):02d}", cells[1].strip("`"), seed] = number.group()
        if len(cells) == 8 and cells[0] in ("4", "2", "1") and cells[3].endswith("%"):
            gqa[int(cells[0])] = {seed: cells[3 + seed].rstrip(" %") for seed in range(3)}
    return training, gqa


def beside_cpu(figure: str | None, unit: str = "%") -> str:
    return "CPU: not measured" if figure is None else f"CPU {figure} {unit}"


# ----------------------------------------------------------------------------------------------
# 1. training
# ----------------------------------------------------------------------------------------------

def step_train(step: Step, device: str, orders: list[str], seeds: list[int], deadline: float) -> None:
    from benchmarks.training_budget import CHAPTERS, LOWER_IS_BETTER, ORDERS, score_text, train_chapter

    cpu, cpu_gqa = cpu_figures()
    if not cpu:
        step.fail(f"no CPU figures found in {DOCS}")
    for chapter in TRAINING:
        recipe, metric, _ = CHAPTERS[chapter]
        for order in [o for o in ORDERS[chapter] if "all" in orders or o in orders]:
            for seed in seeds:
                if time.monotonic() > deadline:
                    step.fail(f"out of time before {chapter} {order} seed {seed}")
                    return
                run = train_chapter(chapter, seed, order, device)
                lower = chapter in LOWER_IS_BETTER  # chapter 10's score is a loss in nats
                passed = run["score"] <= recipe.bar if lower else run["score"] >= recipe.bar
                cpu_figure = beside_cpu(cpu.get((chapter, order, seed)), "nats" if lower else "%")
                step.say(f"{chapter} {order:12s} seed {seed}: {metric} {score_text(chapter, run['score'])} "
                         f"(bar {score_text(chapter, recipe.bar, bar=True)}; {cpu_figure}) "
                         f"in {run['seconds']:.1f} s, {run['steps']} steps on {device}"
                         f"{'' if passed else '  <- UNDER THE BAR'}")
                if not passed:
                    step.fail(f"{chapter} {order} seed {seed} under its bar")
    sys.path.insert(0, str(REPO / "book"))
    from attention_course.dates import make_date_task
    from attention_course.prompts import make_prompt_task
    from attention_course.recipes import DECODER_ONLY
    from figures.ch09 import gqa_comparison

    task = make_prompt_task(make_date_task(seed=0))
    for seed in seeds:
        if time.monotonic() > deadline:
            step.fail(f"out of time before chapter 9's grouped-query comparison, seed {seed}")
            return
        start = time.perf_counter()
        rows = gqa_comparison(task, num_steps=DECODER_ONLY.training["num_steps"], seed=seed, device=device)
        for row in rows:
            held = row["kv_heads"] in GQA_HELD_TO_THE_BAR
            passed = row["accuracy"] >= DECODER_ONLY.bar or not held
            step.say(f"ch09 {row['kv_heads']} key-value head(s) seed {seed}: held-out exact match "
                     f"{100 * row['accuracy']:.2f} % ({'bar' if held else 'not held to the bar'} "
                     f"{DECODER_ONLY.bar:.0%}; {beside_cpu(cpu_gqa.get(row['kv_heads'], {}).get(seed))})"
                     f"{'' if passed else '  <- UNDER THE BAR'}")
            if not passed:
                step.fail(f"chapter 9 with {row['kv_heads']} key-value heads, seed {seed}, under chapter 8's bar")
        step.say(f"ch09 seed {seed}: three models in {time.perf_counter() - start:.1f} s on {device}")


# ----------------------------------------------------------------------------------------------
# 2. the graded tests against the solutions
# ----------------------------------------------------------------------------------------------

def _cells(path: Path) -> list[dict]:
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def _grade_id(cell: dict) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _is_test(cell: dict) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


def run_notebook(path: Path, cell_timeout: int = 300) -> tuple[dict[str, str | None], dict[str, str]]:
    """Every code cell of ``path`` in one namespace, in a fresh folder (as one kernel runs the
    notebook; the hidden tests run too, their markers being comments); returns each test cell's
    error (None: passed) and the errors of the other cells. The random generators, the default dtype
    and the threads are put back afterwards."""
    import numpy as np
    import torch

    def too_long(signum, frame):
        raise TimeoutError(f"the cell ran past {cell_timeout} s")

    tests, others = {}, {}
    namespace = {"__name__": "__main__"}
    saved = (torch.get_rng_state(), np.random.get_state(), torch.get_default_dtype(), torch.get_num_threads())
    previous = signal.signal(signal.SIGALRM, too_long)
    torch.set_num_threads(1)  # as the student's process runs (autograder.limits.Limits.threads)
    try:
        with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder), open(os.devnull, "w") as quiet, \
                contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            for i, cell in enumerate(_cells(path)):
                source = "".join(cell["source"])
                signal.alarm(cell_timeout)
                try:
                    exec(compile(source, f"<{path.stem} cell {i}>", "exec"), namespace)
                    error = None
                except Exception as e:  # noqa: BLE001 (a failing test is a result)
                    error = f"{type(e).__name__}: {str(e)[:300]}"
                finally:
                    signal.alarm(0)
                if _is_test(cell):
                    tests[_grade_id(cell)] = error
                elif error is not None:
                    others[_grade_id(cell) or f"cell {i}"] = error
    finally:
        signal.signal(signal.SIGALRM, previous)
        torch.set_rng_state(saved[0])
        np.random.set_state(saved[1])
        torch.set_default_dtype(saved[2])
        torch.set_num_threads(saved[3])
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close("all")
    return tests, others


def step_tests(step: Step, device: str, deadline: float) -> None:
    import torch

    from attention_course.device import best_device, devices_to_test
    import layout
    from layout import regions

    devices = [str(d) for d in devices_to_test()]
    step.say(f"devices_to_test() = {devices}, best_device() = {best_device()}")
    if device not in {d.split(":")[0] for d in devices}:
        step.fail(f"the tests would not place tensors on {device}")
    for assignment in layout.assignments():
        if time.monotonic() > deadline:
            step.fail(f"out of time before {assignment}")
            return
        (path,) = layout.source_notebooks(assignment)
        hidden = sum(bool(regions.lines("".join(c["source"]), regions.HIDDEN_TESTS)) for c in _cells(path))
        allocations = _cuda_allocations()
        start = time.perf_counter()
        tests, others = run_notebook(path)
        failed = {k: v for k, v in tests.items() if v is not None}
        made = _cuda_allocations() - allocations if torch.cuda.is_available() else None
        step.say(f"{assignment}: {len(tests) - len(failed)}/{len(tests)} test cells passed ({hidden} with hidden "
                 f"tests) in {time.perf_counter() - start:.1f} s"
                 + ("" if made is None else f"; {made:,} CUDA allocations"))
        if not tests:
            step.fail(f"{assignment}: no test cells")
        for name, error in {**failed, **others}.items():
            step.fail(f"{assignment} {name}: {error}")
        uses_devices = any(name in path.read_text() for name in ("devices_to_test()", "best_device()"))
        if device == "cuda" and uses_devices and not made:  # chapter 1 is NumPy
            step.fail(f"{assignment}: nothing was allocated on CUDA")


def _cuda_allocations() -> int:
    import torch

    return torch.cuda.memory_stats().get("allocation.all.allocated", 0) if torch.cuda.is_available() else 0


# ----------------------------------------------------------------------------------------------
# 3. grading through the sandbox
# ----------------------------------------------------------------------------------------------

PROBE = r"""
import json, resource, socket, sys
found = {}
try:
    socket.create_connection(("1.1.1.1", 53), timeout=3).close()
    found["network"] = "reached 1.1.1.1:53"
except OSError as e:
    found["network"] = f"denied ({type(e).__name__}: {e})"
import os, torch
found["ld_library_path"] = os.environ.get("LD_LIBRARY_PATH")
found["cuda"] = torch.cuda.is_available()
if not found["cuda"] and os.path.exists("/dev/nvidiactl"):
    try:
        torch.cuda.init()
    except Exception as e:
        found["cuda_error"] = f"{type(e).__name__}: {e}"[:300]
if found["cuda"]:  # under the memory limit that grading sets, before the hog below
    x = torch.ones(1024, 1024, device="cuda")
    found["cuda_device"] = torch.cuda.get_device_name()
    found["cuda_sum"] = float((x @ x).sum())
try:
    hog = bytearray(int(sys.argv[1]) * 2**20)  # calloc: pages not touched
    found["memory"] = f"allocated {len(hog) // 2**20} MiB"
except MemoryError:
    found["memory"] = f"MemoryError at {sys.argv[1]} MiB"
print(json.dumps(found))
"""


def sandbox_probe(step: Step, device: str) -> None:
    """The sandbox's box around a small script: no network, memory limited, the GPU visible."""
    import torch

    from autograder import sandbox
    from autograder.chapter_view import package_view
    from autograder.limits import Limits

    limits = Limits()  # grading's own
    argv = sandbox.command([sys.executable, "-c", PROBE, str(2 * limits.memory_mb)], limits,
                           package_view("ch03_bahdanau_attention"))
    flag = next(a for a in argv if a.startswith(("--data=", "--as=")))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        step.fail(f"the probe in the sandbox exited with {done.returncode}: {done.stderr[-800:]}")
        return
    found = json.loads(done.stdout.strip().splitlines()[-1])
    step.say(f"sandbox probe (prlimit {flag.split('=')[0]} {limits.memory_mb} MiB): network {found['network']}; "
             f"memory: {found['memory']}; CUDA in the box: {found['cuda']}"
             + (f" ({found['cuda_device']}, a 1024x1024 product summed to {found['cuda_sum']:.0f})"
                if found["cuda"] else f" ({found.get('cuda_error', 'no GPU bound')})")
             + f"; LD_LIBRARY_PATH in the box: {found['ld_library_path']}")
    if not found["network"].startswith("denied"):
        step.fail("the sandbox reached the network")
    if not found["memory"].startswith("MemoryError"):
        step.fail(f"the sandbox let {2 * limits.memory_mb} MiB through a limit of {limits.memory_mb} MiB")
    if device == "cuda" and not found["cuda"]:
        step.fail("the GPU is not visible in the sandbox")
    if device == "cuda" and torch.cuda.is_available() and flag.split("=")[0] != "--data":
        step.fail(f"on a GPU machine the sandbox limits memory with {flag.split('=')[0]}, not --data")


def step_grade(step: Step, device: str, out: Path, deadline: float) -> None:
    import layout
    from autograder.sandbox import SandboxUnavailable, bwrap_path

    try:
        step.say(f"bubblewrap: {bwrap_path()}")
    except SandboxUnavailable as e:
        raise NotRunnable(str(e)) from None
    sandbox_probe(step, device)
    submissions, graded = out / "submissions", out / "graded"
    shutil.rmtree(submissions, ignore_errors=True)
    shutil.rmtree(graded, ignore_errors=True)
    for assignment in layout.assignments():
        for student, origin in (("solution", layout.SOLUTIONS), ("blank", layout.NOTEBOOKS)):
            folder = submissions / student / assignment
            folder.mkdir(parents=True)
            for nb in (origin / assignment).glob("*.ipynb"):
                shutil.copy(nb, folder / nb.name)
    left = deadline - time.monotonic()
    if left < 60:
        step.fail(f"out of time before grading ({left:.0f} s left)")
        return
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(graded)],
                              capture_output=True, text=True, timeout=left)
    except subprocess.TimeoutExpired:
        step.fail(f"grading ran past the budget ({left:.0f} s)")
        return
    step.say(f"python -m autograder grade: {len(layout.assignments())} solutions and {len(layout.assignments())} "
             f"blanks in {time.perf_counter() - start:.1f} s, exit status {done.returncode}")
    if done.returncode != 0:
        step.fail(f"the grader failed: {(done.stdout + done.stderr)[-1500:]}")
        return
    rows = {(r["student_id"], r["assignment"]): r for r in csv.DictReader(open(graded / "grades.csv"))}
    for assignment in layout.assignments():
        full, blank = rows.get(("solution", assignment)), rows.get(("blank", assignment))
        if full is None or blank is None:
            step.fail(f"{assignment}: not in grades.csv")
            continue
        step.say(f"{assignment}: solution {float(full['score']):g}/{float(full['max_score']):g}, "
                 f"blank {float(blank['score']):g}/{float(blank['max_score']):g}")
        if float(full["score"]) != float(full["max_score"]) or float(full["max_score"]) == 0:
            failed = [t for r in json.loads((graded / "report.json").read_text())
                      if (r["student_id"], r["assignment"]) == ("solution", assignment)
                      for t in r["tests"] if t.get("error")]
            step.fail(f"{assignment}: the solution lost points: {str(failed)[:800]}")
        if float(blank["score"]) != 0:
            step.fail(f"{assignment}: the blank notebook scored")
    for assignment in layout.assignments():
        if not any(a.startswith(assignment[:4]) for a in ("ch03", "ch06", "ch07", "ch08")):
            continue
        printed = _training_device(graded, assignment)
        step.say(f"{assignment}: the sandboxed student's process trained on {printed or 'nothing printed'}")
        if printed != device:
            step.fail(f"{assignment}: the judged training ran on {printed}, not {device}")


def _training_device(graded: Path, assignment: str) -> str | None:
    """The device that the solution's training cells printed in the student's sandboxed process
    ("... steps in N s (...) on DEVICE, ..."), as the judge kept its output
    (``course/judging/solution/ASSIGNMENT/NOTEBOOK/results.json``)."""
    for path in sorted((graded / "course" / "judging" / "solution" / assignment).glob("*/results.json")):
        found = re.search(r"steps in [^\n]* on (\w+)[,;]", json.loads(path.read_text()).get("stdout", ""))
        if found:
            return found.group(1)
    return None


# ----------------------------------------------------------------------------------------------
# 4. timings
# ----------------------------------------------------------------------------------------------

def step_bench(step: Step, device: str, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left < 30:
        step.fail(f"out of time before the bench ({left:.0f} s left)")
        return
    argv = [sys.executable, "-m", "benchmarks.transformer", "--device", device] + (["--quick"] if device == "cpu" else [])
    start = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=left, cwd=REPO)
    except subprocess.TimeoutExpired:
        step.fail(f"{' '.join(argv[1:])} ran past the budget ({left:.0f} s)")
        return
    lines = done.stdout.strip().splitlines()
    table = [ln for ln in lines if ln.startswith(("device", f"{device} ", f"{device}:")) or "ratio" in ln
             or "tokens/s" in ln.lower()]
    step.say(f"{' '.join(argv[1:])}: {time.perf_counter() - start:.1f} s, exit status {done.returncode}")
    for line in table or lines[-12:]:
        step.say("  " + line)
    if done.returncode != 0 or not any(ln.startswith("step-time ratio") for ln in lines):
        step.fail(f"benchmarks.transformer failed: {(done.stdout + done.stderr)[-1500:]}")
    sys.path.insert(0, str(REPO / "book"))
    import torch

    from benchmarks.attention_at_scale import GPU_SIZES, format_memory
    from figures.ch09 import gpu_table, memory_table

    start = time.perf_counter()
    if device == "cuda":
        rows = gpu_table(sizes=GPU_SIZES)
        step.say(f"chapter 9's gpu_table on {torch.cuda.get_device_name()} (16 heads of width 64, float16) "
                 f"in {time.perf_counter() - start:.1f} s:")
        if not rows or any(r["ms"] is None for r in rows):
            step.fail("gpu_table gave no figure for some size (empty, or out of memory)")
    else:
        rows = memory_table(sizes=(256, 512), repeats=1)
        step.say(f"gpu_table times CUDA only; on the CPU its counterpart, memory_table at T = 256, 512, "
                 f"in {time.perf_counter() - start:.1f} s:")
    for line in format_memory(rows, device):
        step.say("  " + line)
    if not rows:
        step.fail("no rows")


# ----------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default=os.environ.get("COURSE_DEVICE") or "cuda",
                        help="where every step runs (default: $COURSE_DEVICE, else cuda); cpu: the dry run")
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS))
    parser.add_argument("--orders", nargs="+", default=None,
                        help="draw orders to train (benchmarks.training_budget.ORDERS, or all; default: all on "
                             "CUDA, the solution's on the CPU)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds the whole run may take (default: 480 on CUDA, the device machine's 8 minutes; "
                             "1800 on the CPU, whose trainings take minutes)")
    parser.add_argument("--bundle", type=Path, default=REPO / ".gpu-bundle",
                        help="what `make gpu-bundle` prepared, installed where nbgrader is missing")
    parser.add_argument("--out", type=Path, default=REPO / "_build" / "gpu-check",
                        help="folder for the graded batch and gpu-check.json (default _build/gpu-check; "
                             "gpu-check.json is also written to $OUT when it is set, as on the device machine)")
    args = parser.parse_args(argv)
    # from the first start: the bundle's installation counts (the command starts again after it)
    started = float(os.environ.setdefault("GPU_CHECK_STARTED", str(time.monotonic())))
    args.budget = args.budget or (480.0 if args.device == "cuda" else 1800.0)
    deadline = started + args.budget
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # this process and its children see no GPU
    os.environ.setdefault("MPLBACKEND", "Agg")
    steps = {name: Step(name) for name in args.steps}
    missing = None  # why the grader's packages are not there, if they are not
    try:
        prepare(args)
    except (NotRunnable, subprocess.CalledProcessError, OSError) as e:
        missing = f"the grader's packages are missing and the bundle could not be installed ({e})"
        print(f"gpu-check: {missing}; the other steps run", flush=True)
    import torch

    print(f"gpu-check on {args.device}: Python {sys.version.split()[0]}, PyTorch {torch.__version__}, "
          f"CUDA {'available: ' + torch.cuda.get_device_name() if torch.cuda.is_available() else 'not available'}; "
          f"TF32 allowed in matmul {torch.backends.cuda.matmul.allow_tf32}, in cuDNN {torch.backends.cudnn.allow_tf32} "
          f"(cuDNN's RNNs: {getattr(getattr(torch.backends.cudnn, 'rnn', None), 'fp32_precision', 'n/a')}); "
          f"cuDNN deterministic {torch.backends.cudnn.deterministic}; budget {args.budget:.0f} s", flush=True)
    if args.device == "cuda" and not torch.cuda.is_available():
        for step in steps.values():
            step.why = "PyTorch sees no GPU (COURSE_DEVICE=cpu for the dry run)"
        return finish(steps, args, started)
    args.out.mkdir(parents=True, exist_ok=True)
    orders = args.orders or (["all"] if args.device == "cuda" else ["solution"])
    names = list(steps)
    for i, (name, step) in enumerate(steps.items()):
        # a step may use what the steps before it left, but not the time kept for the steps after it
        step_deadline = deadline - args.budget * sum(KEPT[later] for later in names[i + 1:])
        print(f"--- {name}: until {step_deadline - started:.0f} s", flush=True)
        start = time.perf_counter()
        step.status = "ok"
        try:
            if name == "train":
                step_train(step, args.device, orders, args.seeds, step_deadline)
            elif name == "tests":
                step_tests(step, args.device, step_deadline)
            elif name == "grade":
                if missing:
                    raise NotRunnable(missing)
                step_grade(step, args.device, args.out, step_deadline)
            else:
                step_bench(step, args.device, step_deadline)
        except NotRunnable as e:
            step.status, step.why = "NOT RUN", str(e)
        except Exception as e:  # noqa: BLE001 (a broken step is reported, and the next ones still run)
            import traceback

            traceback.print_exc()
            step.fail(f"{type(e).__name__}: {e}")
        step.seconds = time.perf_counter() - start
    return finish(steps, args, started)


def finish(steps: dict[str, Step], args, started: float) -> int:
    summary = json.dumps({"device": args.device, "seconds": time.monotonic() - started,
                          "steps": [dataclasses.asdict(s) for s in steps.values()]}, indent=1)
    for folder in {args.out, *([Path(os.environ["OUT"])] if os.environ.get("OUT") else [])}:
        with contextlib.suppress(OSError):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "gpu-check.json").write_text(summary)
    print(f"--- gpu-check on {args.device}, {time.monotonic() - started:.0f} s in all")
    for step in steps.values():
        shown = "ok" if step.status == "ok" else f"{step.status}: {step.why}"
        print(f"{step.name:6s} {step.seconds:6.1f} s  {shown}")
    passed = [s for s in steps.values() if s.status == "ok"]
    if len(passed) == len(steps):
        print(f"gpu-check: all {len(steps)} steps passed on {args.device}")
        return 0
    print(f"gpu-check: {len(passed)} of {len(steps)} steps passed on {args.device}; not passed: "
          + ", ".join(s.name for s in steps.values() if s.status != "ok"))
    return 1


if __name__ == "__main__":
    sys.exit(main())
