"""The grader's side of one submission: decides every test, out of the student's reach.

The submission's code runs in a sandboxed process (:mod:`autograder.runner`). The test
cells run here, in the judge, where each name the tests expect from the student (see
:func:`autograder.assemble.student_names`) is a *remote* stand-in or a value: calling it,
or a method of what it returned, runs the student's code over there and brings the result
back as plain data (arrays, tensors, numbers: never pickles). The expected values, the
comparisons and the verdicts never exist in the student's process, so nothing the
student's code does there (replacing ``np.allclose``, the checks, the exception display,
``builtins``, a course name) can change them. An object of the test's own passed into the
student's code (a spy) stays here: the student's process gets a proxy, whose calls come back
as callbacks (:meth:`Link.answer_callback`), so what the object records is out of its reach.
The README's "How a submission is graded,
and why it is safe" lists everything that crosses and why it is safe.

Cells that are neither solutions nor tests (instructions, imports, data) run on both
sides; cells tagged ``kernel-only`` (training loops, say) run only in the student's
process and the names they assign are taken from there.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import dataclasses
import os
import resource
import select
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import psutil

from attention_course import i18n
from attention_course import shortcuts
from autograder import catalogs, sandbox, scan, wire
from autograder.chapter_view import package_view
from autograder.assemble import KERNEL_ONLY_TAG, student_names
from autograder.limits import Limits
from autograder.catalogs import N_

# builtin classes a remote exception or warning may be rebuilt on: every builtin exception
# but those that stop the interpreter (a student's SystemExit is just a failure here)
_BUILTIN_EXCEPTIONS = {
    cls.__name__: cls
    for cls in vars(builtins).values()
    if isinstance(cls, type) and issubclass(cls, Exception)
}
_REBUILT: dict[tuple[str, type], type] = {}
MAX_REBUILT_CLASSES = 1000  # each is a class that stays: a bound on what a submission can make here
# calls the student's code may make into the test's objects (proxies) during one of the test's
# calls into it, and how deeply such calls may nest (the test's object calling the student's
# code, which calls a test's object again, ...); how many of the test's objects it may be given
MAX_CALLBACKS = 10_000
MAX_CALLBACK_DEPTH = 8
MAX_PROXIES = 10_000


class StudentProcessGone(RuntimeError):
    """The student's process ended, was stopped, or broke the protocol."""


def rebuilt_class(name: str, mro: list, root: type) -> type:
    """The class that stands here for a student's exception or warning class ``name``
    whose MRO is ``mro`` (as :func:`autograder.runner.mro` reports it).

    It is the nearest *builtin* class of the MRO that is a subclass of ``root``
    (``Exception`` or ``Warning``) when ``name`` is that class itself, else a subclass of it
    named ``name``: a student's ``class TargetTooShortError(ValueError)`` arrives as a
    ``ValueError`` subclass, so ``except ValueError`` and ``check_raises(ValueError, ...)``
    treat it as they would in one kernel; a student class merely *named* ``ValueError``
    (its MRO does not hold ``builtins.ValueError``) arrives as what it derives from. Only
    builtins are trusted: a class of any other module is rebuilt on its builtin base.
    """
    name = name if isinstance(name, str) and name.isidentifier() else root.__name__
    base, own = root, False
    for index, qualified in enumerate(mro if isinstance(mro, list) else []):
        module, _, cls_name = str(qualified).rpartition(".")
        candidate = _BUILTIN_EXCEPTIONS.get(cls_name) if module == "builtins" else None
        if candidate is not None and issubclass(candidate, root):
            base, own = candidate, index == 0
            break
    if own and base.__name__ == name:
        return base
    key = (name, base)
    if key not in _REBUILT:
        if len(_REBUILT) >= MAX_REBUILT_CLASSES:
            return base
        _REBUILT[key] = type(name, (base,), {"__module__": "submission"})
    return _REBUILT[key]


def _remote_error(error: dict) -> BaseException:
    cls = rebuilt_class(error.get("type"), error.get("mro", []), Exception)
    message = str(error.get("message", ""))
    try:
        rebuilt = cls(message)
    except Exception:  # noqa: BLE001 - a builtin whose constructor wants more (UnicodeError's kin)
        rebuilt = RuntimeError(f"{error.get('type')}: {message}")
    if isinstance(error.get("origin"), int):  # should it go back through a test's object: the original
        rebuilt._wire_origin = error["origin"]
    return rebuilt


class _Capped(threading.Thread):
    """Drains a pipe, keeping the first ``limit`` bytes and counting the rest."""

    def __init__(self, stream, limit: int):
        super().__init__(daemon=True)
        self.stream, self.limit, self.kept, self.total = stream, limit, bytearray(), 0

    def run(self) -> None:
        for chunk in iter(lambda: self.stream.read(65536), b""):
            self.total += len(chunk)
            room = self.limit - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]

    def text(self) -> str:
        text = self.kept.decode("utf-8", "replace")
        if self.total > len(self.kept):
            text += f"\n[... {self.total - len(self.kept)} more bytes of output dropped]"
        return text


def sandboxed_runner(limits: Limits, assignment: str, requests: int, replies: int) -> subprocess.Popen:
    """The student's process of one submission, in a fresh box of its own (:mod:`autograder.sandbox`):
    :mod:`autograder.runner`, reading requests from the file descriptor ``requests`` and writing
    replies to ``replies``. Its ``stdout`` and ``stderr`` are pipes, and it leads its own process
    group. (The course's tests pass :class:`Link` another starter of the same shape for their own
    notebooks: ``tests/warm_runner.py``.)"""
    argv = [sys.executable, "-m", "autograder.runner", str(requests), str(replies)]
    return subprocess.Popen(
        sandbox.command(argv, limits, package_view(assignment)),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        pass_fds=(requests, replies), start_new_session=True,
    )


class Link:
    """The pipe pair to the student's process, with a deadline on every request."""

    def __init__(self, limits: Limits, assignment: str, start=sandboxed_runner):
        self.limits = limits
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        self.process = start(limits, assignment, to_child_r, from_child_w)
        os.close(to_child_r)
        os.close(from_child_w)
        self.stdout = _Capped(self.process.stdout, limits.output_chars)
        self.stderr = _Capped(self.process.stderr, limits.output_chars)
        self.stdout.start()
        self.stderr.start()
        self._buffer = b""
        self.gone: str | None = None  # why the student's process ended, in English (the instructor's)
        self._why: tuple[str, dict] = ("", {})  # the same as a template and its values, for the student's language
        self.deadline = time.monotonic() + limits.notebook_timeout_s
        # where the time goes (grade --stage-times): waiting on the student's process, and
        # the CPU its process tree used, sampled just before it is stopped
        self.waited = 0.0
        self.student_cpu = 0.0
        # exercise -> its forbidden library calls (autograder.scan), and those the trip-wires in
        # the student's process saw while a test's request into that exercise ran
        self.forbidden: dict[str, list[str]] = {}
        self.tripped: dict[str, set[str]] = {}
        # the test's objects passed into the student's code, by number (see answer_callback)
        self.proxies: list = []
        self._proxy_numbers: dict[int, int] = {}
        # requests in flight (a test's object, called back, can ask the student's process in turn),
        # the deadline of the outermost, and the callbacks answered during it
        self._depth = 0
        self._outer_deadline = 0.0
        self._callbacks = 0
        self._callback_depth = 0

    def proxy_for(self, obj) -> int:
        """The number under which the test's object ``obj`` crosses into the student's code."""
        number = self._proxy_numbers.get(id(obj))
        if number is None or self.proxies[number] is not obj:
            if len(self.proxies) >= MAX_PROXIES:
                raise TypeError(f"more than {MAX_PROXIES} of the test's objects passed to the submission's code")
            number = len(self.proxies)
            self.proxies.append(obj)  # kept alive, so that its id is not reused
            self._proxy_numbers[id(obj)] = number
        return number

    def resolve_proxy(self, number: int):
        if not 0 <= number < len(self.proxies):
            raise wire.WireError(f"unknown proxy {number}")
        return self.proxies[number]

    def note_calls(self, label: str, reply: dict) -> None:
        """Attribute the forbidden calls a reply reports, each ``[entry, exercise]``: to the
        exercise whose own code made it, else (None) to the exercise whose object the request went
        into (the root of the stand-in's label: ``LayerNorm(…)`` is ``LayerNorm``'s). Only an entry
        that exercise forbids counts (:func:`attention_course.shortcuts.forbids`: PyTorch's private entry
        points, threads, processes and compilers in every exercise); a report can only cost
        the submission points, never earn them."""
        calls = reply.get("shortcuts")
        if not isinstance(calls, list):
            return
        for call in calls:
            if not (isinstance(call, list) and len(call) == 2 and isinstance(call[0], str)):
                continue
            entry, exercise = call
            if not isinstance(exercise, str) or exercise not in self.forbidden:
                exercise = label.split("(", 1)[0]
            if exercise in self.forbidden and shortcuts.forbids(self.forbidden[exercise], entry):
                self.tripped.setdefault(exercise, set()).add(entry)

    def request(self, op: str, timeout: float | None = None, **fields) -> dict:
        if self.gone:
            raise self.gone_error()
        begun = time.monotonic()
        self._depth += 1
        try:
            reply = self._exchange(wire.dumps({"op": op, **fields}), timeout)
        finally:
            self._depth -= 1
            if self._depth == 0:
                self.waited += time.monotonic() - begun
        for w in reply.get("warnings", []) if op != "exec" else []:
            warnings.warn(str(w.get("message")), rebuilt_class(w.get("category"), w.get("mro", []), Warning))
        return reply

    def _exchange(self, message: bytes, timeout: float | None) -> dict:
        self._send(message)
        limit = min(timeout or self.limits.cell_timeout_s, self.deadline - time.monotonic())
        deadline = time.monotonic() + max(limit, 0.0)
        if self._depth == 1:  # the outermost request: a request made while answering a callback is part of it
            self._outer_deadline, self._callbacks = deadline, 0
        else:
            deadline = min(deadline, self._outer_deadline)
        while True:
            message = self._read_line(deadline)
            if "callback" not in message:
                return message
            self._send(wire.dumps(self.answer_callback(message["callback"])))

    def _send(self, message: bytes) -> None:
        try:
            os.write(self._to_child, message) if len(message) < 65536 else self._write_all(message)
        except OSError:
            self.stop(N_("the student's process ended"))
            raise self.gone_error() from None

    def answer_callback(self, callback) -> dict:
        """The student's code called one of the test's objects (or read one of its public
        attributes) through its proxy: do it here, to the test's own object, and answer with
        the result. Whatever that object records (a spy's list of calls) is the judge's, out
        of the student's reach. Its arguments arrive as values (copies of arrays and tensors),
        handles to the student's objects, or the test's objects themselves."""
        try:
            if not isinstance(callback, dict):
                raise wire.WireError("a callback is an object")
            self._callbacks += 1
            if self._callbacks > MAX_CALLBACKS:
                raise RuntimeError(f"the submission's code called the test's objects more than {MAX_CALLBACKS} times "
                                   "in one call")
            if self._callback_depth >= MAX_CALLBACK_DEPTH:
                raise RecursionError(f"calls between the submission's code and the test's objects nested more than "
                                     f"{MAX_CALLBACK_DEPTH} deep")
            target = self.resolve_proxy(int(callback.get("proxy", -1)))
            remote = lambda key: Remote(self, key, "argument")  # noqa: E731 - attributed to no exercise
            decode = lambda v: wire.decode(v, remote, resolve_proxy=self.resolve_proxy)  # noqa: E731
            op = callback.get("op")
            self._callback_depth += 1
            try:
                if op == "call":
                    value = target(*decode(callback.get("args", [])), **decode(callback.get("kwargs", {"__dict__": {}})))
                elif op == "getattr":
                    name = str(callback.get("name"))
                    if name.startswith("_"):
                        raise AttributeError(f"the test's object shows no attribute {name!r}")
                    value = getattr(target, name)
                else:
                    raise wire.WireError(f"unknown callback {str(op)[:40]!r}")
            finally:
                self._callback_depth -= 1
            return {"op": "returned", "ok": True, "value": _encode(value, self)}
        except (StudentProcessGone, KeyboardInterrupt):
            raise
        except wire.WireError as err:
            self.stop(N_("the student's process broke the protocol ({error})"), error=err)
            raise self.gone_error() from None
        except BaseException as error:  # noqa: BLE001 - raised in the student's code, as there
            described = {"type": type(error).__name__, "message": str(error)[:4000],
                         "mro": [f"{c.__module__}.{c.__qualname__}" for c in type(error).__mro__]}
            if isinstance(getattr(error, "_wire_origin", None), int):  # the student's own exception
                described["origin"] = error._wire_origin
            return {"op": "returned", "ok": False, "error": described}

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._to_child, view):]

    def _read_line(self, deadline: float) -> dict:
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop(N_("the student's code ran past its time limit ({cell} s a cell, {notebook} s a notebook)"),
                          cell=self.limits.cell_timeout_s, notebook=self.limits.notebook_timeout_s)
                raise self.gone_error()
            ready, _, _ = select.select([self._from_child], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                code = self.process.wait()
                why, values = _why_it_ended(code, self.stderr.text())
                self.stop(why, **values)
                raise self.gone_error()
            self._buffer += chunk
            if len(self._buffer) > wire.MAX_MESSAGE_BYTES:
                self.stop(N_("the student's process sent a reply over the size limit"))
                raise self.gone_error()
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            return wire.loads(line)
        except (ValueError, wire.WireError) as err:
            self.stop(N_("the student's process broke the protocol ({error})"), error=err)
            raise self.gone_error() from None

    def stop(self, why: str, **values) -> None:
        """End the student's process; ``why`` (an English template, filled with ``values``) is kept
        as the reason, the first one given."""
        if self.gone is None:
            self.gone = why.format(**values)
            self._why = (why, values)
        for fd in (self._to_child, self._from_child):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._to_child = self._from_child = -1
        if self.process.poll() is None:
            self.student_cpu = _tree_cpu(self.process.pid)
            # bubblewrap's PID namespace: killing its init takes every process inside with it
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, 9)
            self.process.wait()
        for reader in (self.stdout, self.stderr):
            reader.join(timeout=5)

    def gone_error(self) -> StudentProcessGone:
        """Why the student's process is gone, in the language of the submission (a test shows it)."""
        why, values = self._why
        return StudentProcessGone(i18n.gettext(why).format(**values) if why else str(self.gone))


def _tree_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` and every process under it (reaped ones included)."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            t = process.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
    return total


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _why_it_ended(code: int, stderr: str) -> tuple[str, dict]:
    """Why the student's process ended: an English template (:meth:`Link.stop`) and its values."""
    if code < 0 or code > 128:
        signal = -code if code < 0 else code - 128
        named = {9: N_("the student's process was killed (out of memory or over a limit)"),
                 24: N_("the student's process was over its CPU time"),
                 25: N_("the student's process was over the file-size limit")}
        return named.get(signal, N_("the student's process was stopped by signal {signal}")), {"signal": signal}
    tail = stderr.strip().splitlines()[-1:] if stderr.strip() else []
    if tail:
        return N_("the student's process exited with status {code}: {last_line}"), {"code": code, "last_line": tail[0][:300]}
    return N_("the student's process exited with status {code}"), {"code": code}


# modules whose classes a remote object may claim to be an instance of, for isinstance()
_TRUSTED_MODULES = ("torch", "numpy", "builtins", "collections")


class Remote:
    """A stand-in for an object that lives in the student's process."""

    __slots__ = ("_link", "_handle", "_label", "_cls")
    __wire_handle__ = True

    @property
    def __class__(self):
        """The first class of the remote object's MRO that exists here, so that
        ``isinstance(remote_linear, nn.Linear)`` holds; else ``Remote``."""
        try:
            return object.__getattribute__(self, "_cls")
        except AttributeError:
            pass
        found = Remote
        with contextlib.suppress(Exception):
            for qualified in self._ask("type"):
                module, _, name = str(qualified).rpartition(".")
                if module.split(".")[0] in _TRUSTED_MODULES and module in sys.modules:
                    candidate = getattr(sys.modules[module], name, None)
                    if isinstance(candidate, type) and candidate is not object:
                        found = candidate
                        break
        object.__setattr__(self, "_cls", found)
        return found

    def __init__(self, link: Link, handle: int, label: str):
        object.__setattr__(self, "_link", link)
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_label", label)

    def _ask(self, op: str, sent: list | None = None, **fields):
        link = object.__getattribute__(self, "_link")
        reply = link.request(op, handle=object.__getattribute__(self, "_handle"), **fields)
        label = object.__getattribute__(self, "_label")
        link.note_calls(label, reply)
        remote = lambda key: Remote(link, key, f"{label}(…)")  # noqa: E731
        if sent is not None:
            _copy_back(sent, reply.get("mutated", []), remote, link)
        if not reply.get("ok"):
            raise _remote_error(reply.get("error", {}))
        return wire.decode(reply.get("value"), remote, resolve_proxy=link.resolve_proxy)

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._ask("getattr", name=name)

    def __setattr__(self, name: str, value) -> None:
        self._ask("setattr", name=name, value=_encode(value, object.__getattribute__(self, "_link")))

    def __call__(self, *args, **kwargs):
        sent: list = []  # the arrays and tensors passed, which the call may change in place
        link = object.__getattribute__(self, "_link")
        return self._ask("call", sent, args=_encode(list(args), link, sent), kwargs=_encode(dict(kwargs), link, sent))

    def __getitem__(self, key):
        return self._ask("getitem", key=_encode(key, object.__getattribute__(self, "_link")))

    def __len__(self) -> int:
        return self._ask("len")

    def __bool__(self) -> bool:
        return bool(self._ask("bool"))

    def __iter__(self):
        return iter(self._ask("iter"))

    def __repr__(self) -> str:
        return f"<remote {object.__getattribute__(self, '_label')}>"


def _encode(value, link: Link, sent: list | None = None):
    """``value`` for the student's process: a stand-in goes as its handle, and an object of the
    test's that cannot travel by value (a spy, say) as a proxy (see :meth:`Link.answer_callback`)."""
    def handle(remote: Remote) -> int:
        return object.__getattribute__(remote, "_handle")

    return wire.encode(value, handle, made=sent, make_proxy=link.proxy_for)


def _copy_back(sent: list, mutated, remote, link: Link) -> None:
    """Write into the test's arrays and tensors ``sent`` what the student's code did to its
    copies of them in place (``mutated``: ``[index, value]`` pairs), as one kernel would
    show it. Only a change of the values crosses; one of shape or dtype is left out."""
    torch = sys.modules.get("torch")  # no tensor was sent unless the tests imported it
    for item in mutated if isinstance(mutated, list) else []:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], int) and 0 <= item[0] < len(sent)):
            raise StudentProcessGone(i18n.gettext(N_("the student's process broke the protocol (a changed argument)")))
        target, value = sent[item[0]], wire.decode(item[1], remote, resolve_proxy=link.resolve_proxy)
        tensors = torch is not None and isinstance(target, torch.Tensor) and isinstance(value, torch.Tensor)
        arrays = isinstance(target, np.ndarray) and isinstance(value, np.ndarray)
        if not (tensors or arrays) or value.shape != target.shape or value.dtype != target.dtype:
            continue
        if tensors:
            with torch.no_grad():
                target.copy_(value.to(target.device))
        elif target.flags.writeable:
            target[...] = value


@dataclasses.dataclass
class CellResult:
    index: int  # the cell's position in the assembled notebook
    grade_id: str
    kind: str  # "test", "solution" or "other"
    error: dict | None  # {"type", "message"} when the cell failed


class Judge:
    """Runs one assembled notebook: student cells over there, tests here."""

    def __init__(self, limits: Limits, assignment: str, start=sandboxed_runner, language: str = i18n.ENGLISH):
        """``assignment``: the chapter being graded; its student process sees the course
        package of that chapter only (no solution of it or of a later chapter). ``start``
        starts that process (see :func:`sandboxed_runner`). ``language``: the submission's
        (:func:`attention_course.i18n.notebook_language`), in which the tests' messages are
        written; it changes no verdict (:meth:`_here`)."""
        self.limits = limits
        self.language = i18n.supported(language)
        self.link = Link(limits, assignment, start)
        self.namespace: dict = {"__name__": "__main__"}
        self.shortcuts: list[dict] = []  # what the scan and the trip-wires found (see shortcut_verdicts)

    def _take(self, names: list[str]) -> None:
        """Make the student's globals ``names`` (all of them allowed) visible here: data by
        value, objects as remotes; a name the student unbound is unbound here too."""
        for name in names:
            try:
                reply = self.link.request("global", name=name)
            except StudentProcessGone:
                return
            if reply.get("ok"):
                self.namespace[name] = wire.decode(
                    reply.get("value"), lambda key, name=name: Remote(self.link, key, name),
                    resolve_proxy=self.link.resolve_proxy,
                )
            else:
                self.namespace.pop(name, None)

    def _changed(self, reply: dict, allowed: set[str]) -> list[str]:
        # the student's process reports which names changed; only allowed ones are asked for
        return [str(n) for n in reply.get("changed", []) if str(n) in allowed]

    def _in_student(self, source: str, allowed: set[str]) -> dict | None:
        try:
            reply = self.link.request("exec", source=source)
        except StudentProcessGone as gone:
            return {"type": "StudentProcessGone", "message": str(gone)}
        self._take(self._changed(reply, allowed))
        return None if reply.get("ok") else reply.get("error", {})

    def _code(self, source: str, label: str):
        """A course or test cell's code, compiled; in another language, the same code with only the
        strings that build its messages translated (attention_course.i18n.translate_tree), or as
        written should anything go wrong in translating it: a translation never costs a point."""
        if self.language != i18n.ENGLISH:
            try:
                return compile(i18n.translate_tree(ast.parse(source)), f"<{label}>", "exec")
            except Exception:  # noqa: BLE001 - the English code, which fails as it would anyway
                pass
        return compile(source, f"<{label}>", "exec")

    def _here(self, source: str, label: str) -> dict | None:
        with _mirrored_seeds(self.link), warnings.catch_warnings():
            try:
                exec(self._code(source, label), self.namespace)  # noqa: S102 - course code
            except BaseException as error:  # noqa: BLE001 - a failing test is a result
                if isinstance(error, KeyboardInterrupt):
                    raise
                return {"type": type(error).__name__, "message": str(error)[:4000]}
            finally:
                # figures drawn by course cells are for the learner's eyes, not the judge's
                if "matplotlib.pyplot" in sys.modules:
                    sys.modules["matplotlib.pyplot"].close("all")
        return None

    def run(self, cells: list[dict], stop_at_first_failure: bool = False) -> list[CellResult]:
        """``cells``: dicts with ``index``, ``grade_id``, ``kind`` (solution/test/other/added),
        ``source``, ``tags`` (see :func:`autograder.assemble.judge_cells`).

        The judge takes from the student's process only the names of
        :func:`autograder.assemble.student_names`, each time the student's process binds one
        anew (after a solution, added or course cell runs there, or a test called into it),
        so that a later redefinition acts as it would in one kernel.

        ``stop_at_first_failure`` serves the course's own test of its tests (a wrong
        implementation needs to fail one test, not all), never grading."""
        allowed = set(student_names(cells))
        self.link.forbidden = {c["grade_id"]: list(c.get("forbidden") or []) for c in cells if c["kind"] == "solution"}
        exercises = [c["grade_id"] for c in cells if c["kind"] == "solution"]
        found = self._scanned(cells)
        entries = sorted({e for listed in self.link.forbidden.values() for e in listed})
        results = []
        if self.language != i18n.ENGLISH:
            # the checks, the tests' words and the grader's own in the submission's language
            i18n.use_language(self.language, translation=catalogs.translation(self.language))
        try:
            with contextlib.suppress(StudentProcessGone):  # then every cell reports it
                if self.language != i18n.ENGLISH:
                    self.link.request("language", code=self.language)
                self.link.request("watch", names=sorted(allowed))
                # before any of the student's cells runs; every chapter: torch.ops is forbidden in every exercise
                self.link.request("forbid", entries=entries, exercises=self.link.forbidden)
            for cell in cells:
                source = _python_only(cell["source"])
                if cell["kind"] == "test":
                    error = self._here(source, cell["grade_id"])
                    with contextlib.suppress(StudentProcessGone):  # a test's calls may rebind names there
                        self._take(self._changed(self.link.request("changes"), allowed))
                    # a shortcut seen so far fails its exercise's test now (and, below, its other tests)
                    error = self._shortcut_verdict(cell["grade_id"], exercises, found) or error
                    results.append(CellResult(cell["index"], cell["grade_id"], "test", error))
                    if error is not None and stop_at_first_failure:
                        break
                    continue
                error = self._in_student(cell["source"], allowed)
                if cell["kind"] == "other" and KERNEL_ONLY_TAG not in cell.get("tags", []):
                    # a course cell runs here too, with the course's names; what it binds stays the course's
                    here = self._here(source, cell["grade_id"])
                    error = error or here
                results.append(CellResult(cell["index"], cell["grade_id"], cell["kind"], error))
        finally:
            self.link.stop("grading finished")
        return self.shortcut_verdicts(cells, results, found)

    def _scanned(self, cells: list[dict]) -> dict[str, tuple[str, str]]:
        """Exercise -> (the entry the static scan of the student's code refused in it, how:
        :attr:`autograder.scan.Finding.kind`); each finding is kept in ``self.shortcuts`` for the
        instructor's summary."""
        found: dict[str, tuple[str, str]] = {}
        for finding in scan.scan(cells, self.link.forbidden):
            self.shortcuts.append({**dataclasses.asdict(finding), "how": "scan"})
            if finding.entry is not None:
                found.setdefault(finding.exercise, (finding.entry, finding.kind))
        return found

    def _shortcut_verdict(self, test: str, exercises: list[str], found: dict[str, tuple[str, str]]) -> dict | None:
        """The error of the test cell ``test`` when its exercise took a shortcut, seen by the scan
        (``found``) or by the trip-wires so far; None otherwise. A test belongs to the longest
        exercise name it starts with among ALL the exercises: test_update_online_softmax is
        update_online_softmax's even when only online_softmax cheated."""
        exercise = scan.exercise_of_test(test, exercises)
        tripped = min(self.link.tripped.get(exercise, ()), default=None)
        entry, how = found.get(exercise) or (tripped, shortcuts.kind(tripped or ""))
        if entry is None:
            return None
        return {"type": "ForbiddenShortcut", "message": i18n.gettext(scan.VERDICTS[how]).format(exercise=exercise, entry=entry)}

    def shortcut_verdicts(self, cells: list[dict], results: list[CellResult],
                          found: dict[str, tuple[str, str]] | None = None) -> list[CellResult]:
        """The tests of an exercise that reached one of its forbidden library calls, seen by
        the static scan of the student's code (``found``, else scanned here) or by the trip-wires
        while a test called into it, fail with one sentence (the exercise scores 0)."""
        found = dict(self._scanned(cells) if found is None else found)
        for exercise, called in sorted(self.link.tripped.items()):
            for entry in sorted(called):
                self.shortcuts.append({"exercise": exercise, "entry": entry, "cell": exercise, "how": "trip-wire",
                                       "detail": f"{entry} called while a test ran {exercise}"})
                found.setdefault(exercise, (entry, shortcuts.kind(entry)))
        if not found:
            return results
        exercises = [c["grade_id"] for c in cells if c["kind"] == "solution"]
        for result in results:
            verdict = self._shortcut_verdict(result.grade_id, exercises, found) if result.kind == "test" else None
            if verdict is not None:
                result.error = verdict
        return results

    def output(self) -> tuple[str, str]:
        return self.link.stdout.text(), self.link.stderr.text()


def _python_only(source: str) -> str:
    """Course cells may use IPython magics (``%matplotlib inline``); the judge skips them."""
    return "\n".join("pass" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


@contextlib.contextmanager
def _mirrored_seeds(link: Link):
    """A test that seeds the random generators here seeds the student's process too."""
    torch = sys.modules.get("torch")  # patched only if the tests use it

    def mirrored(original):
        def seed(value=None):
            if value is not None:
                with contextlib.suppress(StudentProcessGone):
                    link.request("seed", seed=int(value))
            return original() if value is None else original(value)

        return seed

    np_seed = np.random.seed
    np.random.seed = mirrored(np_seed)
    if torch is not None:
        torch_seed = torch.manual_seed
        torch.manual_seed = mirrored(torch_seed)
    try:
        yield
    finally:
        np.random.seed = np_seed
        if torch is not None:
            torch.manual_seed = torch_seed


def main(argv: list[str] | None = None) -> int:
    """``python -m autograder.judge JOB.json``: judge one submission and write its results.

    The job holds ``assignment``, ``cells`` (see :meth:`Judge.run`), ``limits`` and ``results``
    (the path of the JSON file to write). Run in a process of its own per submission, so
    that the state a test leaves behind (seeds, warning filters) never reaches another.
    """
    import io
    import json

    job = json.loads(open((argv or sys.argv[1:])[0]).read())
    limits = Limits(**job["limits"])
    started = time.monotonic()
    judge = Judge(limits, job["assignment"], language=job.get("language", i18n.ENGLISH))
    run_started, cpu_at_run = time.monotonic(), _own_cpu()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        results = judge.run(job["cells"])
    run_ended = time.monotonic()
    stdout, stderr = judge.output()
    payload = {
        "cells": [dataclasses.asdict(r) for r in results],
        "stopped": judge.link.gone if judge.link.gone != "grading finished" else None,
        "stdout": stdout,
        "stderr": stderr,
        "seconds": round(time.monotonic() - started, 2),
        "shortcuts": judge.shortcuts,
        # monotonic clock readings (shared by the processes of one machine) and CPU seconds,
        # for autograder.stages
        "timing": {
            "run_started": run_started, "run_ended": run_ended, "cpu_at_run": cpu_at_run,
            "student_wall": judge.link.waited, "student_cpu": judge.link.student_cpu,
            "cpu_at_exit": _own_cpu(), "exited": time.monotonic(),
        },
    }
    tmp = job["results"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(payload, f)
    os.replace(tmp, job["results"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
