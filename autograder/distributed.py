"""Judging on the workers of a Dask distributed cluster: ``grade --scheduler tcp://HOST:PORT``.

The coordinator (``python -m autograder grade``) assembles each submission and sends its
judge's jobs (plain JSON: the cells, with the course's own tests, and the limits) to the
cluster as one task per submission. A worker runs :func:`judge_on_worker`: the same judge
process, in the same sandbox, as a local run (:func:`autograder.judging.run_judge`), in a
temporary folder of its own, then puts the judged notebook through ``Autograde``'s
preprocessors and renders its feedback page (:func:`autograder.entry.finish`), and sends
all that back. Results stream back as they complete; the coordinator alone enters them in
the gradebook and the ledger.

A worker needs the course checked out (or installed) at the same version as the
coordinator, its Python environment and bubblewrap; nothing else: it never sees the
gradebook, the ledger or any other submission. A worker whose course differs from the
coordinator's stops the batch with an error that says so.

Failures are told apart:

* a worker that dies, or a machine that is lost, is the infrastructure's fault: the
  scheduler gives the submission to another worker (up to ``distributed.scheduler.
  allowed-failures`` times, 3 by default; after that the submission is left ungraded, the
  batch says so, and the next run of the same command tries it again);
* a submission that kills its own sandbox, runs out of time or of memory is the
  submission's fault: the judge reports it as data, the task succeeds, and the
  submission is graded as on one machine, never retried.

GPU workers: a worker started with ``--resources GPU=1`` (or more) receives the
submissions of the assignments that train a model (those with a ``kernel-only`` cell:
chapters 3, 6 and 7) whenever the cluster has such a worker; everything else goes to any
worker.
"""

from __future__ import annotations

import functools
import hashlib
import json
import tempfile
import uuid
import zlib
from pathlib import Path

import nbformat
from distributed import Client, as_completed, get_worker
from distributed.scheduler import KilledWorker

from autograder import course, sandbox
from autograder.entry import judge_and_finish
from autograder.judging import Judged, Prepared, judged_from
from autograder.judge import KERNEL_ONLY_TAG
import layout

GPU = "GPU"
# tasks waiting on the scheduler per worker thread: enough to keep every worker busy while
# results come back, without shipping a whole course's submissions to the scheduler at once
QUEUE_PER_THREAD = 2
MIN_QUEUE = 8


@functools.cache
def trains(assignment: str) -> bool:
    """Whether grading ``assignment`` trains a model (a cell tagged ``kernel-only``)."""
    for path in layout.source_notebooks(assignment):
        for cell in nbformat.read(path, as_version=4).cells:
            if KERNEL_ONLY_TAG in cell.get("metadata", {}).get("tags", []):
                return True
    return False


def course_fingerprint() -> str:
    """A digest of the code a judge runs (``attention_course`` and ``autograder``, as on
    disk now: each judge is a new process): the coordinator's and every worker's must agree."""
    digest = hashlib.sha256()
    for package in (sandbox.COURSE_PACKAGE, sandbox.GRADER):
        for path in sorted(package.rglob("*.py")):
            digest.update(str(path.relative_to(package.parent)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def judge_on_worker(jobs: dict[str, dict], fingerprint: str, timed: bool) -> dict:
    """A Dask task: judge every notebook of one submission on this worker.

    ``jobs``: notebook name -> the judge's job. Returns ``{"outputs": name -> output or
    None, "worker": address}``, or ``{"mismatch": ...}`` when this worker's course differs."""
    worker = get_worker().address
    if course_fingerprint() != fingerprint:
        return {"mismatch": f"worker {worker} runs a different version of the course's code "
                            f"({layout.REPO}) than the coordinator: check out the same commit on every machine"}
    sandbox.bwrap_path()  # a worker without bubblewrap fails the batch loudly, never a submission
    outputs: dict[str, dict | None] = {}
    with tempfile.TemporaryDirectory(prefix="attention-judge-") as tmp:
        for name, job in jobs.items():
            job = {**job, "feedback": json.loads(zlib.decompress(job["feedback"]))}
            outputs[name] = judge_and_finish(job, Path(tmp) / Path(name).stem, timed)
            if outputs[name] is None:
                break
            # the notebooks' text and the feedback page (mostly its style sheet): about 436 KiB
            # per notebook (chapter 1), a fifth of that compressed
            finished = json.dumps(outputs[name].pop("finished")).encode()
            outputs[name]["finished_zlib"] = zlib.compress(finished, 1)
    return {"outputs": outputs, "worker": worker}


def _unpacked(outputs: dict[str, dict | None]) -> dict[str, dict | None]:
    for output in outputs.values():
        if output is not None:
            output["finished"] = json.loads(zlib.decompress(output.pop("finished_zlib")))
    return outputs


class DaskJudges:
    """Judges on the workers of the Dask cluster whose scheduler is at ``address``."""

    def __init__(self, address: str, timed: bool = False, wait_for_workers_s: float = 60):
        self.timed = timed
        try:
            self.client = Client(address, timeout=10)
        except (OSError, TimeoutError) as err:
            raise course.GradingError(f"cannot reach the Dask scheduler at {address}: {err}") from None
        try:
            self.client.wait_for_workers(1, timeout=wait_for_workers_s)
        except TimeoutError:
            self.client.close()
            raise course.GradingError(f"the Dask scheduler at {address} has no worker "
                                      f"(waited {wait_for_workers_s:g} s): start some with "
                                      f"`dask worker {address}`") from None

    def _workers(self) -> dict:
        return self.client.scheduler_info(n_workers=-1)["workers"]

    def judge(self, batch: list[Prepared]):
        """Yield a :class:`Judged` for every prepared submission, as each is done."""
        try:
            yield from self._judge(batch)
        finally:
            self.client.close()

    def _judge(self, batch: list[Prepared]):
        fingerprint = course_fingerprint()
        gpu = any(GPU in info.get("resources", {}) for info in self._workers().values())
        waiting = []
        for prepared in batch:
            if prepared.problem:  # nothing to judge: no need for a worker
                yield judged_from(prepared, {})
            else:
                waiting.append(prepared)
        waiting.reverse()  # popped from the end: submitted in the batch's order
        running: dict = {}
        completed = as_completed()

        def top_up() -> None:
            threads = sum(self.client.nthreads().values())
            while waiting and len(running) < max(MIN_QUEUE, QUEUE_PER_THREAD * threads):
                prepared = waiting.pop()
                sub = prepared.submission
                needs_gpu = gpu and trains(sub.assignment)
                # the feedback part (the assembled notebook, the source cells) compressed: a task
                # of 117 KiB is 83 KiB for chapter 1 (44 KiB of it the judge's cells)
                jobs = {name: {**job, "feedback": zlib.compress(json.dumps(job["feedback"]).encode(), 1)}
                        for name, (_, job) in prepared.jobs.items()}
                future = self.client.submit(
                    judge_on_worker, jobs, fingerprint,
                    self.timed, key=f"judge-{sub.student_id}-{sub.assignment}-{uuid.uuid4().hex[:8]}",
                    pure=False, retries=0, resources={GPU: 1} if needs_gpu else None,
                )
                running[future.key] = prepared
                completed.add(future)

        top_up()
        for future in completed:
            prepared = running.pop(future.key)
            try:
                reply = future.result()
            except KilledWorker as err:
                yield Judged(prepared.submission, {}, lost=f"workers died while judging it: {err}")
            except Exception as err:  # noqa: BLE001 - a broken worker, never the submission
                sub = prepared.submission
                raise course.GradingError(f"a Dask worker could not judge {sub.student_id}/{sub.assignment}: "
                                          f"{type(err).__name__}: {err}") from None
            else:
                if "mismatch" in reply:
                    raise course.GradingError(reply["mismatch"])
                yield judged_from(prepared, _unpacked(reply["outputs"]))
            finally:
                future.release()
            top_up()
