"""The cold-start rehearsal: the README's commands on a throwaway copy of this machine that looks
like a fresh one (``make rehearsal``; not part of ``make test``).

CI runs on a machine where every package was installed and every cache filled long ago, so it
cannot see a missing install step or a stale cache. This runs each order of commands (default:
``make book`` then ``make test``; and, in a second copy, ``make test`` then ``make book``) in a
copy of the machine made for it and thrown away after it:

- a mount namespace and a PID namespace of its own (``unshare``), whose root is an overlay of
  ``/``: every write lands in an upper folder under ``--work`` and the real machine is untouched
  (``apt-get`` inside still reaches the package registries: the network is the machine's);
  every process the commands started ends with the copy (also when the rehearsal is stopped);
- the course's Debian packages (the Makefile's ``APT_TEST``) purged with what they pulled in, and
  ``HOME`` as a fresh machine has it: no ``~/.cache`` (matplotlib's font list, pip's wheels), no
  profiles or settings that programs wrote (:data:`HOME_STATE`);
- a fresh clone of ``--repo`` at ``--commit``.

It prints each command's exit status and minutes, the first ``make book``'s time to the installed
environment and each page's execution seconds, and the last lines of a failing command; the whole
logs are kept in ``--logs``. Needs root on Linux (``unshare``, ``mount``, ``pivot_root``).

    python3 -m benchmarks.rehearsal [--commit REV] [--order book,test --order test,book]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: What programs write under HOME as they run (a fresh machine has none of it): caches (matplotlib's
#: font list, pip's wheels), IPython's and Jupyter's profiles and kernels, matplotlib's and Chromium's
#: settings. The machine image's own (its Python under ~/.pyenv, the registries' settings in
#: ~/.config/pip and ~/.npmrc) stays.
HOME_STATE = ("/root/.cache /root/.ipython /root/.jupyter /root/.local/share/jupyter /root/.matplotlib "
              "/root/.config/matplotlib /root/.config/chromium /root/.npm")

#: Variables of this shell that point a program at a folder outside the copy's clone.
DROPPED = re.compile(r"^(MPLCONFIGDIR|IPYTHONDIR|JUPYTER_.*|XDG_.*|VIRTUAL_ENV|PYTHONPATH|PYTEST_.*|MAKEFLAGS|MFLAGS)$")

#: Run as PID 1 of the copy's namespaces: mount the overlay, make it the root, make the machine
#: fresh, then run the commands. The arguments: upper, work, merged folders, the logs folder, the
#: repository, the commit, the packages, the make targets.
INSIDE = r"""
set -u
upper=$1 work=$2 merged=$3 logs=$4 repo=$5 commit=$6 packages=$7 home_state=$8; shift 8
mount --make-rprivate /
mount -t overlay overlay -o "lowerdir=/,upperdir=$upper,workdir=$work" "$merged"
mount -t proc proc "$merged/proc"
mount --rbind /sys "$merged/sys"
mount --rbind /dev "$merged/dev"
mkdir -p "$merged/rehearsal/logs" "$merged/.old-root"
mount --bind "$logs" "$merged/rehearsal/logs"
cd "$merged" && pivot_root . .old-root && cd / && umount -l /.old-root || exit 90
logs=/rehearsal/logs
{
  echo "purging: $packages"
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq --autoremove $packages
  rm -rf $home_state
  echo "left of them: $(dpkg-query -W -f='${Package} ${Status}\n' $packages 2>/dev/null | grep 'ok installed' || echo none)"
  echo "bwrap: $(command -v bwrap || echo none); chromium: $(command -v chromium || echo none);" \
       "CJK fonts: $(fc-list 2>/dev/null | grep -ci wenquanyi); HOME: $(ls -A /root | tr '\n' ' ')"
  git clone -q "$repo" /rehearsal/clone && git -C /rehearsal/clone checkout -q "$commit" &&
    echo "clone of $repo at $(git -C /rehearsal/clone rev-parse --short HEAD)"
} > "$logs/0-setup.log" 2>&1 || exit 91
cd /rehearsal/clone
n=0
for target in "$@"; do
  n=$((n + 1))
  start=$(date +%s.%N)
  make "$target" < /dev/null > "$logs/$n-$target.log" 2>&1
  status=$?
  # the .venv stamp's time: when the Python environment was installed
  echo "$n $target $status $(date +%s.%N) $start $(stat -c %Y .venv/.installed 2>/dev/null || echo 0)" >> "$logs/statuses"
done
"""


def purged_packages() -> str:
    """The course's Debian packages: the Makefile's APT_TEST (every command's)."""
    out = subprocess.run(["make", "-s", "--no-print-directory", "-C", str(ROOT), "--eval",
                          "print-apt: ; @echo $(APT_TEST)", "print-apt"], capture_output=True, text=True)
    packages = out.stdout.split()
    if out.returncode or not packages:
        sys.exit(f"rehearsal: cannot read APT_TEST from the Makefile: {out.stderr.strip()}")
    return " ".join(packages)


def page_seconds(log: str) -> list[tuple[str, float]]:
    """``(page, seconds)`` of each page the book build executed (MyST-NB's log lines)."""
    return [(Path(page).stem, float(seconds)) for page, seconds
            in re.findall(r"(\S+\.md): Executed notebook in ([\d.]+) seconds", log)]


def failure(target: str, log: str) -> list[str]:
    """The lines that say why a command failed: Sphinx's error and make's, pytest's failed tests."""
    lines = log.splitlines()
    if target == "test":
        failed = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
        return failed[:8] + ([f"... and {len(failed) - 8} more"] if len(failed) > 8 else [])
    said = [lines[i + 1] for i, line in enumerate(lines[:-1]) if re.search(r"(Extension|Sphinx|Config) error:", line)]
    return said + [line for line in lines if line.startswith("make: ***")]


def report(logs: Path) -> list[tuple[str, int, float]]:
    """Print what one copy's commands did, from its logs; ``(target, exit status, minutes)`` each."""
    setup = (logs / "0-setup.log").read_text(errors="replace") if (logs / "0-setup.log").exists() else ""
    print("   " + "\n   ".join(line for line in setup.splitlines() if line.startswith(("left of", "bwrap:", "clone of"))))
    results = []
    statuses = (logs / "statuses").read_text().split("\n") if (logs / "statuses").exists() else []
    for line in filter(None, statuses):
        n, target, status, end, start, installed = line.split()
        minutes = (float(end) - float(start)) / 60
        results.append((target, int(status), minutes))
        log = (logs / f"{n}-{target}.log").read_text(errors="replace")
        install = float(installed) - float(start)
        print(f"   make {target}: exit {status}, {minutes:.1f} min"
              + (f" ({install / 60:.1f} min of them installing the Python environment)" if install > 0 else ""),
              flush=True)
        if target == "book":
            pages = page_seconds(log)
            if pages:
                print(f"      pages executed in {sum(s for _, s in pages):.0f} s: "
                      + ", ".join(f"{p.split('_')[0]} {s:.0f} s" for p, s in pages))
        if target == "test":
            summary = [l for l in log.splitlines() if re.search(r"\d+ (passed|failed|error)", l)]
            if summary:
                print(f"      {summary[-1].strip('= ')}")
        if int(status):
            print("      " + "\n      ".join(l[:400] for l in failure(target, log)))
    return results


def rehearse(order: list[str], args, packages: str) -> list[tuple[str, int, float]]:
    work = Path(tempfile.mkdtemp(prefix="rehearsal-", dir=args.work))
    logs = Path(args.logs) / "-then-".join(order)
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    for name in ("upper", "work", "merged"):
        (work / name).mkdir()
    env = {k: v for k, v in os.environ.items() if not DROPPED.match(k)}
    env.update(HOME="/root", LANG=env.get("LANG", "C.UTF-8"))
    cmd = ["unshare", "--mount", "--pid", "--kill-child", "--propagation", "private", "bash", "-c", INSIDE, "rehearsal",
           str(work / "upper"), str(work / "work"), str(work / "merged"), str(logs), str(args.repo), args.commit,
           packages, HOME_STATE, *order]
    print(f"\n== {' then '.join('make ' + t for t in order)} (a fresh copy; logs in {logs})", flush=True)
    started = time.time()
    done = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL)
    if done.returncode:
        setup = (logs / "0-setup.log").read_text(errors="replace") if (logs / "0-setup.log").exists() else ""
        print(f"   the copy could not be made (exit {done.returncode}); {logs / '0-setup.log'}:\n{setup[-3000:]}")
    results = report(logs)
    shutil.rmtree(work, ignore_errors=True)
    print(f"   ({(time.time() - started) / 60:.1f} min in all, the copy removed)")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commit", default="HEAD", help="what to clone (default: HEAD)")
    parser.add_argument("--repo", default=str(ROOT), help="the repository to clone (default: this one)")
    parser.add_argument("--order", action="append", help="make targets, comma-separated, in one fresh copy "
                        "(repeatable; default: book,test and test,book)")
    parser.add_argument("--work", default="/var/tmp", help="where the copies' writes go (several GB each)")
    parser.add_argument("--logs", default=str(ROOT / "_build" / "rehearsal"), help="where the logs are kept")
    parser.add_argument("--report", metavar="LOGS", help="print a past copy's results from its logs, run nothing")
    args = parser.parse_args(argv)
    if args.report:
        results = report(Path(args.report))
        return 0 if results and all(s == 0 for _, s, _ in results) else 1
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        sys.exit("rehearsal: needs root on Linux (a mount namespace, an overlay of /, pivot_root)")
    args.commit = subprocess.run(["git", "-C", args.repo, "rev-parse", args.commit], capture_output=True,
                                 text=True, check=True).stdout.strip()
    orders = [o.split(",") for o in (args.order or ["book,test", "test,book"])]
    packages = purged_packages()
    print(f"rehearsal of {args.repo} at {args.commit[:7]}: purging {packages}, HOME as a fresh machine's, a fresh clone")
    results = [rehearse(order, args, packages) for order in orders]
    print("\n== summary")
    for order, result in zip(orders, results):
        ran = ", then ".join(f"make {t}: exit {s}, {m:.1f} min" for t, s, m in result) or "nothing ran"
        print(f"   {' then '.join(order)}: {ran}")
    green = all(len(r) == len(o) and all(s == 0 for _, s, _ in r) for o, r in zip(orders, results))
    print("rehearsal: green" if green else "rehearsal: RED")
    return 0 if green else 1


if __name__ == "__main__":
    sys.exit(main())
