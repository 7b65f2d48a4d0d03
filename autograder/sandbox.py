"""The box a submission's code runs in.

Bubblewrap (Debian's ``bubblewrap``) gives the student process its own view of the
machine: the system, the Python environment and the grader read-only; in place of the course
package, the package *of the chapter being graded* (:mod:`autograder.chapter_view`:
the shared infrastructure and the solutions of the earlier chapters only), read-only; a small
private writable ``/tmp`` (a tmpfs, so a full disk is impossible); no network (a new,
empty network namespace: not even loopback); its own PID namespace, so it can signal
nothing outside and everything it started dies with it; no solutions, no gradebook, no
other submissions (they are simply not there). Resource limits (address space,
processes, file size, CPU seconds) are set with ``prlimit`` just before Python starts.

When the grader runs as root, the student process also drops to an unprivileged user
id of its own (so process limits are per submission); as an ordinary
user, bubblewrap uses a user namespace and the process keeps the instructor's id, which
the mount view already confines.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import sys
from pathlib import Path

from autograder.limits import THREAD_VARIABLES, Limits

REPO = Path(__file__).resolve().parent.parent
GRADER = REPO / "autograder"
# wherever Python finds the course package (the repository with an editable install, or a copy
# in site-packages): the chapter's view is mounted there, so no import path reaches the original
COURSE_PACKAGE = Path(importlib.util.find_spec("attention_course").submodule_search_locations[0]).resolve()
# unprivileged user ids for student processes when the grader is root: each sandbox gets
# its own (from the judge's process id), so process limits never pool between submissions
FIRST_UID = 61000
UID_RANGE = 30000


class SandboxUnavailable(RuntimeError):
    """Bubblewrap is missing or cannot create namespaces here."""


def bwrap_path() -> str:
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed: `apt-get install bubblewrap` (make install-sandbox)"
        )
    return path


def _system_binds() -> list[str]:
    args = []
    for top in ("/usr", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args


def _python_binds(package: Path) -> list[str]:
    """The interpreter's installation, the virtual environment and the grader, read-only, and
    ``package`` (a chapter's view of the course package) where the course package lives, so
    that every way of finding the package (an editable install's path included) finds it."""
    sources = {p: p for p in (Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), Path(sys.prefix), GRADER)}
    sources[COURSE_PACKAGE] = package
    args, made = [], set()
    for target in sorted(sources, key=lambda p: len(str(p))):
        if str(target).startswith(("/usr/", "/lib")):
            continue
        # parents the box must create, traversable by the unprivileged user
        for parent in reversed(target.parents):
            if str(parent) != "/" and parent not in made and parent not in sources:
                args += ["--perms", "0755", "--dir", str(parent)]
                made.add(parent)
        args += ["--ro-bind", str(sources[target]), str(target)]
    return args


def _gpu_binds() -> list[str]:
    args = []
    for dev in sorted(glob.glob("/dev/nvidia*")):
        args += ["--dev-bind", dev, dev]
    return args


def _gpu_environment() -> list[str]:
    """Where the GPU's driver libraries are found and which GPUs the grader may use, passed on
    where the GPU is bound (``--clearenv`` drops them): an image may name its driver's folder only
    in ``LD_LIBRARY_PATH`` (NVIDIA's container images: ``/usr/local/nvidia/lib64``, under the
    read-only ``/usr``), without which PyTorch in the box finds no ``libcuda``."""
    if not _gpu_binds():
        return []
    return [arg for name in ("LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES") if name in os.environ
            for arg in ("--setenv", name, os.environ[name])]


def command(argv: list[str], limits: Limits, package: Path) -> list[str]:
    """The command line that runs ``argv`` inside the box, with ``/tmp/work`` as its folder and
    ``package`` (:func:`autograder.chapter_view.package_view`) as the course package."""
    root = os.geteuid() == 0
    box = [
        bwrap_path(),
        # root keeps the real user ids (to drop to an unprivileged one below); anyone
        # else gets a user namespace
        *(["--unshare-user"] if not root else []),
        "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--cap-drop", "ALL",
        # only what setpriv needs to become the unprivileged user; gone after it does
        *(["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"] if root else []),
        "--clearenv",
        "--proc", "/proc",
        "--dev", "/dev",
        *_system_binds(),
        # the private /tmp comes before the Python binds: the course may live under /tmp
        "--size", str(limits.disk_mb * 1024 * 1024), "--tmpfs", "/tmp",
        *_python_binds(package),
        *_gpu_binds(),
        *_gpu_environment(),
        "--dir", "/tmp/work",
        "--chdir", "/tmp/work",
        "--setenv", "HOME", "/tmp/work",
        "--setenv", "PATH", f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "--setenv", "MPLBACKEND", "Agg",
        "--setenv", "MPLCONFIGDIR", "/tmp/work/.matplotlib",
        "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
        "--setenv", "PYTHONUNBUFFERED", "1",
        *(arg for name in THREAD_VARIABLES for arg in ("--setenv", name, str(limits.threads))),
    ]
    if root:
        box += ["--chmod", "1777", "/tmp", "--chmod", "0777", "/tmp/work"]
    # CUDA reserves far more address space than it uses, so on a GPU machine the memory
    # limit bounds the data segment instead of the whole address space
    memory = "--data" if _gpu_binds() else "--as"
    rlimits = [
        "prlimit",
        f"{memory}={limits.memory_mb * 1024 * 1024}",
        f"--nproc={limits.processes}",
        f"--fsize={limits.disk_mb * 1024 * 1024}",
        f"--cpu={limits.notebook_timeout_s}",
        "--core=0",
        "--",
    ]
    drop = []
    if root:
        uid = str(FIRST_UID + os.getpid() % UID_RANGE)
        drop = [
            "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
        ]
    return [*box, "--", *drop, *rlimits, *argv]
