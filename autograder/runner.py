"""The student's side: runs inside the sandbox, executes the submission's cells and
answers the judge's requests about the objects they defined.

Started as ``python -m autograder.runner IN OUT``; it reads requests from file descriptor
IN and writes replies to file descriptor OUT (see :mod:`autograder.wire`). Standard output and
error are the student's: the judge reads them, keeps the first characters and drops the
rest. Nothing here is trusted by the judge: a reply is data the judge checks, never a
verdict.
"""

from __future__ import annotations

import builtins
import os
import random
import sys
import traceback
import warnings

from autograder import wire


_UNBOUND = object()


class Proxy:
    """The student's side of an object of the judge's that a test passed into the student's
    code (a recording wrapper around a model, say). It holds nothing but a number: calling it
    or reading one of its public attributes asks the judge, which does it to its own object
    (and records there what the test wants to know) while this process serves the judge's
    requests in the meantime; the result comes back as values, handles or proxies."""

    __slots__ = ("_runner", "_number")
    __wire_proxy__ = True

    def __init__(self, runner: "Runner", number: int):
        object.__setattr__(self, "_runner", runner)
        object.__setattr__(self, "_number", number)

    def __call__(self, *args, **kwargs):
        runner = object.__getattribute__(self, "_runner")
        return runner.callback(self, "call", args=runner.out(list(args)), kwargs=runner.out(dict(kwargs)))

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return object.__getattribute__(self, "_runner").callback(self, "getattr", name=name)

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError(f"the test's object does not take attributes ({name!r})")

    def __repr__(self) -> str:
        return f"<the test's object #{object.__getattribute__(self, '_number')}>"


class Runner:
    def __init__(self, requests=None, replies=None) -> None:
        # the pipes to the judge: requests come in, replies and callbacks go out
        self.requests, self.replies = requests, replies
        self.waiting = 0  # calls into the judge's objects in progress (see callback)
        self.objects: dict[int, object] = {}
        self.namespace: dict[str, object] = {"__name__": "__main__"}
        self.shell = None
        # the names the judge takes from here, and what each was bound to when last reported
        self.watched: dict[str, object] = {}
        # the trip-wires on the exercises' forbidden library calls (attention_course.shortcuts),
        # once the judge named them; the calls they saw during the request being served
        self.shortcuts = None
        self.exercises: dict[str, list[str]] = {}  # exercise -> its forbidden entries, as the judge named them
        self.recorded: set[tuple[str, str | None]] | None = None

    def forbid(self, entries: list[str], exercises: dict[str, list[str]]) -> None:
        """Wrap the forbidden ``entries`` before any of the student's cells runs (a module
        imported later is wrapped at its import); the calls they see while the judge's request
        into the student's objects runs go back with its reply, and so do the computations of
        ``entries`` and the calls of PyTorch's private ``torch.ops``, whatever route reached them
        (:func:`attention_course.shortcuts.watching`). The judge asks this of every chapter:
        the private entry points are forbidden in every exercise."""
        from attention_course import shortcuts

        self.shortcuts = shortcuts
        self.exercises = exercises
        shortcuts.arm(entries)
        shortcuts.listen(self.record)

    def record(self, entry: str, via: str | None = None) -> None:
        """Note ``entry`` for the reply, with the exercise whose own code made the call (the
        innermost on the stack, :func:`attention_course.shortcuts.charged`), or None: the judge
        then charges the exercise its request went into. A thread, a process, a compiler or an
        operation off the building blocks counts only where an exercise's own code made it (the
        judge's tests and PyTorch's own code may)."""
        if self.recorded is None:
            return
        exercises = {}
        for name, entries in self.exercises.items():
            codes, _ = self.shortcuts.own_code(self.namespace.get(name))
            if codes:
                exercises[name] = (entries, codes)
        exercise = self.shortcuts.charged(entry, exercises, sys._getframe(1))
        if exercise is None and self.shortcuts.kind(entry) in ("concurrency", "compiled", "unlisted"):
            return
        self.recorded.add((entry, exercise))

    def changes(self) -> list[str]:
        """The watched names bound to another object (or unbound) since the last report."""
        changed = []
        for name, seen in self.watched.items():
            now = self.namespace.get(name, _UNBOUND)
            if now is not seen:
                changed.append(name)
                self.watched[name] = now
        return changed

    # ----- handles
    def handle(self, obj: object) -> int:
        key = id(obj)
        self.objects[key] = obj
        return key

    def resolve(self, key: int) -> object:
        try:
            return self.objects[key]
        except KeyError:
            raise wire.WireError(f"unknown handle {key}") from None

    def out(self, value: object) -> object:
        return wire.encode(value, self.handle, origins=True)

    def proxy(self, number: int) -> Proxy:
        return Proxy(self, number)

    def decode(self, value: object, made: list | None = None) -> object:
        return wire.decode(value, self.resolve, made, self.proxy)

    # ----- calls into the judge's objects
    def callback(self, proxy: Proxy, op: str, **fields) -> object:
        """Ask the judge to do ``op`` to the object ``proxy`` stands for, and serve the judge's
        requests (the judge's object may call back into the student's objects) until it answers."""
        number = object.__getattribute__(proxy, "_number")
        self.replies.write(wire.dumps({"callback": {"op": op, "proxy": number, **fields}}))
        self.waiting += 1
        try:
            for line in iter(self.requests.readline, b""):
                request = wire.loads(line)
                if request.get("op") != "returned":
                    self.answer(request)
                    continue
                if request.get("ok"):
                    return self.decode(request.get("value"))
                raise self.rebuilt(request.get("error", {}))
        finally:
            self.waiting -= 1
        raise EOFError("the judge closed the pipe")

    def failure(self, error: BaseException) -> dict:
        described = _describe(error)
        if self.waiting:  # raised under a call into the judge's object: it may come back through it
            described["origin"] = self.handle(error)
        return described

    def rebuilt(self, error: dict) -> BaseException:
        """The exception a call into the judge's object raised: the student's own exception
        object when it was raised here (by the student's code the judge's object called),
        else the nearest builtin class of its MRO."""
        origin = error.get("origin")
        if isinstance(origin, int) and isinstance(self.objects.get(origin), BaseException):
            return self.objects[origin]
        return _rebuilt(error)

    # ----- cells
    def execute(self, source: str) -> dict:
        if self.shell is None:
            from IPython.core.interactiveshell import InteractiveShell

            self.shell = InteractiveShell.instance(user_ns=self.namespace)
        result = self.shell.run_cell(source, store_history=False, silent=True)
        if self.shortcuts is not None:  # a name bound to a forbidden original before it was wrapped
            self.shortcuts.arm_pending()
            self.shortcuts.rebind(self.namespace)
        error = result.error_before_exec or result.error_in_exec
        if error is not None:
            return {"ok": False, "error": _describe(error), "changed": self.changes()}
        return {"ok": True, "changed": self.changes()}

    def call(self, target, request: dict) -> dict:
        """Call ``target``; the arrays and tensors among the arguments that the call changed in
        place go back with the reply, so that the test's own objects change as in one kernel."""
        made: list = []
        args = self.decode(request.get("args", []), made)
        kwargs = self.decode(request.get("kwargs", {"__dict__": {}}), made)
        before = wire.snapshot(made)
        try:
            reply = {"ok": True, "value": self.out(target(*args, **kwargs))}
        except Exception as error:  # noqa: BLE001 - goes back as data, with what it changed
            reply = {"ok": False, "error": self.failure(error)}
        reply["mutated"] = [[i, self.out(made[i])] for i in wire.changed_in_place(made, before)]
        return reply

    # ----- requests
    def answer(self, request: bytes | dict) -> None:
        """Serve ``request`` (a line, or one already read) and write the reply, with the warnings it issued."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                reply = self.serve(wire.loads(request) if isinstance(request, bytes) else request)
            except BaseException as error:  # noqa: BLE001 - every failure goes back as data
                reply = {"ok": False, "error": self.failure(error)}
        reply["warnings"] = [
            {"category": w.category.__name__, "mro": mro(w.category), "message": str(w.message)[:500]}
            for w in caught[:20]
        ]
        try:
            message = wire.dumps(reply)
        except (TypeError, ValueError) as error:
            message = wire.dumps({"ok": False, "error": _describe(error)})
        self.replies.write(message)

    def serve(self, request: dict) -> dict:
        op = request.get("op")
        if op == "exec":
            return self.execute(str(request["source"]))
        if op == "seed":
            seed = int(request["seed"])
            random.seed(seed)
            import numpy as np

            np.random.seed(seed % 2**32)
            if "torch" in sys.modules:
                sys.modules["torch"].manual_seed(seed)
            return {"ok": True, "value": None}
        if op == "watch":
            self.watched = {str(name): _UNBOUND for name in request.get("names", [])}
            return {"ok": True, "value": None}
        if op == "changes":
            return {"ok": True, "changed": self.changes()}
        if op == "forbid":
            exercises = request.get("exercises", {})
            self.forbid([str(e) for e in request.get("entries", [])],
                        {str(k): [str(e) for e in v] for k, v in exercises.items()} if isinstance(exercises, dict) else {})
            return {"ok": True, "value": None}
        if op == "language":  # the course package's messages here, in the submission's language
            from attention_course import i18n

            i18n.use_language(str(request.get("code")))
            return {"ok": True, "value": None}
        if op == "free":
            for key in request.get("handles", []):
                self.objects.pop(int(key), None)
            return {"ok": True, "value": None}
        decode = self.decode
        if op == "global":
            name = str(request["name"])
            if name not in self.namespace:
                raise NameError(f"name {name!r} is not defined")
            return {"ok": True, "value": self.out(self.namespace[name])}
        target = self.resolve(int(request["handle"]))
        if self.shortcuts is None:
            return self.on_object(op, target, request, decode)
        self.shortcuts.arm_pending()
        outer, self.recorded = self.recorded, set()  # a request served during a callback has its own
        helper = self.shortcuts.helpers_alive()  # a thread or process of the student's, which may do the work
        if helper is not None:
            self.recorded.add((helper, None))
        try:
            with self.shortcuts.watching():  # the computations, whatever route reaches them
                reply = self.on_object(op, target, request, decode)
        finally:
            recorded, self.recorded = sorted(self.recorded, key=str), outer
        reply["shortcuts"] = recorded
        return reply

    def on_object(self, op: str, target, request: dict, decode) -> dict:
        """A request about one of the student's objects (a handle the judge holds)."""
        if op == "getattr":
            return {"ok": True, "value": self.out(getattr(target, str(request["name"])))}
        if op == "setattr":
            setattr(target, str(request["name"]), decode(request["value"]))
            return {"ok": True, "value": None}
        if op == "call":
            return self.call(target, request)
        if op == "getitem":
            return {"ok": True, "value": self.out(target[decode(request["key"])])}
        if op == "len":
            return {"ok": True, "value": len(target)}
        if op == "bool":
            return {"ok": True, "value": bool(target)}
        if op == "iter":
            return {"ok": True, "value": self.out(iter(target))}
        if op == "repr":
            return {"ok": True, "value": repr(target)[:2000]}
        if op == "type":
            return {"ok": True, "value": mro(type(target))}
        raise wire.WireError(f"unknown request {op!r}")


def mro(cls: type) -> list[str]:
    """``module.qualname`` of each class of ``cls``'s MRO. A class that is not what its module
    holds under that name (a student's ``class ValueError(Exception)``, or one that set its
    ``__module__`` to ``"builtins"``) is reported as the submission's own: ``submission.name``."""
    names = []
    for c in cls.__mro__:
        module, qualname = getattr(c, "__module__", None), getattr(c, "__qualname__", c.__name__)
        found = sys.modules.get(module) if isinstance(module, str) else None
        for part in str(qualname).split("."):
            found = getattr(found, part, None)
        names.append(f"{module}.{qualname}" if found is c else f"submission.{qualname}")
    return names


def _rebuilt(error: dict) -> Exception:
    """The exception a call into the judge's object raised, as the nearest builtin class of its MRO."""
    message = str(error.get("message", ""))
    for qualified in error.get("mro", []) if isinstance(error.get("mro"), list) else []:
        module, _, name = str(qualified).rpartition(".")
        cls = getattr(builtins, name, None) if module == "builtins" else None
        if isinstance(cls, type) and issubclass(cls, Exception):
            try:
                return cls(message)
            except Exception:  # noqa: BLE001 - a builtin whose constructor wants more
                break
    return RuntimeError(f"{error.get('type')}: {message}")


def _describe(error: BaseException) -> dict:
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return {"type": type(error).__name__, "mro": mro(type(error)), "message": str(error)[:4000],
            "traceback": text[-8000:]}


def main() -> None:
    serve(int(sys.argv[1]), int(sys.argv[2]))


def serve(requests_fd: int, replies_fd: int) -> None:
    """Answer the judge's requests, read from ``requests_fd``, on ``replies_fd`` until the judge
    closes its end."""
    # buffered: a raw stream's readline reads a byte per system call, which made a request
    # carrying a large tensor cost seconds. Only one request is ever in flight, so nothing
    # read ahead can belong to anyone else.
    runner = Runner(os.fdopen(requests_fd, "rb"), os.fdopen(replies_fd, "wb", buffering=0))
    for line in iter(runner.requests.readline, b""):
        runner.answer(line)


if __name__ == "__main__":
    main()
