"""What ``make gpu-check`` needs on the device machine beyond its image, prepared here:
``python -m benchmarks.gpu_bundle`` (``make gpu-bundle``; docs/benchmarks.md, "On a GPU").

The device machine has python3 (3.12) with PyTorch, NumPy, matplotlib, pytest and the packages
its image lists (``DEVICE_HAS``), and no package registry. The grader needs nbgrader and the part of
the Jupyter stack it imports (``GRADER``: every distribution a grading run loads that the image
lacks), and its sandbox needs bubblewrap. This downloads, at the versions ``requirements.txt`` pins,
those wheels for CPython 3.12 on x86-64 Linux into ``BUNDLE/wheels`` (``pip download --no-deps
--only-binary=:all:``), bubblewrap's Debian package at ``BWRAP_VERSION`` into ``BUNDLE/debs``
(``apt-get download``; it needs libc6, libcap2 and libselinux1, which the image has), and writes
``BUNDLE/MANIFEST.txt``: every file and its size. The last line is the bundle's size. The working
tree and the bundle travel together to the device machine, at most 64 MiB.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: the distributions a grading run loads (the grader, its judges, the student's process, nbgrader's
#: books and feedback pages) that the device machine's image does not hold, by their names in
#: requirements.txt (a grading run in an environment of the image's packages and these alone passes:
#: docs/benchmarks.md)
GRADER = (
    "nbgrader", "nbformat", "nbconvert", "nbclient", "jupyter_client", "jupyter_core", "jupyter_server",
    "notebook", "jupyterlab_pygments", "traitlets", "tornado", "pyzmq", "platformdirs",
    "SQLAlchemy", "alembic", "Mako", "RapidFuzz", "babel", "django-static-mathjax",
    "jsonschema", "jsonschema-specifications", "referencing", "rpds-py", "fastjsonschema", "jsonpointer",
    "rfc3339-validator", "rfc3986-validator", "rfc3987-syntax", "lark", "fqdn", "isoduration", "arrow",
    "uri-template", "webcolors", "mistune", "bleach", "tinycss2", "webencodings", "beautifulsoup4",
    "soupsieve", "defusedxml", "pandocfilters",
    # the similarity step at the end of a batch (autograder/similarity.py): winnowing
    "copydetect",
    # the student's process in the sandbox runs the cells through IPython's shell (autograder/runner.py)
    "ipython", "ipython_pygments_lexers", "jedi", "parso", "matplotlib-inline", "pexpect", "ptyprocess",
    "prompt_toolkit", "wcwidth", "stack-data", "executing", "asttokens", "pure_eval",
)
#: what the device machine's image already has, among what the course uses (KINDS.md's list):
#: never carried, so that one version of each stays there
DEVICE_HAS = ("torch", "numpy", "matplotlib", "pytest", "tqdm", "Jinja2", "MarkupSafe", "PyYAML", "Pygments",
              "attrs", "packaging", "psutil", "python-dateutil", "six", "requests", "certifi", "idna", "urllib3",
              "charset-normalizer", "typing_extensions", "msgpack", "prometheus_client", "setuptools", "pillow")
#: bubblewrap from Debian 12, as this machine installs it (make install-sandbox)
BWRAP_VERSION = "0.8.0-2+deb12u1"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux_2_5_x86_64", "manylinux1_x86_64")


def pins() -> dict[str, str]:
    """requirements.txt's pins, by lower-case name with - for _."""
    found = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        match = re.match(r"([A-Za-z0-9_.-]+)==([^\s#]+)", line)
        if match:
            found[match.group(1).lower().replace("_", "-")] = match.group(2)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_bundle", description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path, nargs="?", default=REPO / ".gpu-bundle")
    parser.add_argument("--python-version", default="3.12", help="the device's Python (default 3.12)")
    args = parser.parse_args(argv)
    pinned = pins()
    missing = [name for name in GRADER if name.lower().replace("_", "-") not in pinned]
    if missing:
        parser.error(f"not pinned in requirements.txt: {missing}")
    wheels, debs = args.bundle / "wheels", args.bundle / "debs"
    shutil.rmtree(args.bundle, ignore_errors=True)
    wheels.mkdir(parents=True)
    debs.mkdir()
    version = "".join(args.python_version.split(".")[:2])
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--python-version", args.python_version, "--implementation", "cp", "--abi", f"cp{version}",
                    "--abi", "abi3", "--abi", "none", *(a for p in PLATFORMS for a in ("--platform", p)),
                    "--platform", "any", "-d", str(wheels),
                    *(f"{name}=={pinned[name.lower().replace('_', '-')]}" for name in GRADER)], check=True)
    subprocess.run(["apt-get", "download", "-q", f"bubblewrap={BWRAP_VERSION}"], cwd=debs, check=True,
                   stdout=subprocess.DEVNULL)
    files = sorted(p for p in args.bundle.rglob("*") if p.is_file())
    total = sum(p.stat().st_size for p in files)
    (args.bundle / "MANIFEST.txt").write_text(
        "".join(f"{p.stat().st_size:>10,d}  {p.relative_to(args.bundle)}\n" for p in files)
        + f"{total:>10,d}  in all, {len(files)} files\n")
    print(f"gpu-bundle: {len(files) - 1} wheels and bubblewrap {BWRAP_VERSION} in {args.bundle}: "
          f"{total / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
