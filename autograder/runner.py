"""The student's side: runs inside the sandbox, executes the submission's cells and
answers the judge's requests about the objects they defined.

Started as ``python -m autograder.runner IN OUT``; it reads requests from file descriptor
IN and writes replies to file descriptor OUT (see :mod:`autograder.wire`). Standard output and
error are the student's: the judge reads them, keeps the first characters and drops the
rest. Nothing here is trusted by the judge: a reply is data the judge checks, never a
verdict.
"""

from __future__ import annotations

import os
import random
import sys
import traceback
import warnings

from autograder import wire


_UNBOUND = object()


class Runner:
    def __init__(self) -> None:
        self.objects: dict[int, object] = {}
        self.namespace: dict[str, object] = {"__name__": "__main__"}
        self.shell = None
        # the names the judge takes from here, and what each was bound to when last reported
        self.watched: dict[str, object] = {}
        # the trip-wires on the exercises' forbidden library calls (attention_course.shortcuts),
        # once the judge named them; the calls they saw during the request being served
        self.shortcuts = None
        self.recorded: set[str] | None = None

    def forbid(self, entries: list[str]) -> None:
        """Wrap the forbidden ``entries`` before any of the student's cells runs (a module
        imported later is wrapped at its import); the calls they see while the judge's request
        into the student's objects runs go back with its reply."""
        from attention_course import shortcuts

        self.shortcuts = shortcuts
        shortcuts.arm(entries)
        shortcuts.listen(self.record)

    def record(self, entry: str) -> None:
        if self.recorded is not None:
            self.recorded.add(entry)

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
        args = wire.decode(request.get("args", []), self.resolve, made)
        kwargs = wire.decode(request.get("kwargs", {"__dict__": {}}), self.resolve, made)
        before = wire.snapshot(made)
        try:
            reply = {"ok": True, "value": self.out(target(*args, **kwargs))}
        except Exception as error:  # noqa: BLE001 - goes back as data, with what it changed
            reply = {"ok": False, "error": _describe(error)}
        reply["mutated"] = [[i, self.out(made[i])] for i in wire.changed_in_place(made, before)]
        return reply

    # ----- requests
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
            self.forbid([str(e) for e in request.get("entries", [])])
            return {"ok": True, "value": None}
        if op == "free":
            for key in request.get("handles", []):
                self.objects.pop(int(key), None)
            return {"ok": True, "value": None}
        decode = lambda v: wire.decode(v, self.resolve)  # noqa: E731
        if op == "global":
            name = str(request["name"])
            if name not in self.namespace:
                raise NameError(f"name {name!r} is not defined")
            return {"ok": True, "value": self.out(self.namespace[name])}
        target = self.resolve(int(request["handle"]))
        if self.shortcuts is None:
            return self.on_object(op, target, request, decode)
        self.shortcuts.arm_pending()
        self.recorded = set()
        try:
            reply = self.on_object(op, target, request, decode)
        finally:
            recorded, self.recorded = sorted(self.recorded), None
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
    requests = os.fdopen(requests_fd, "rb")
    replies = os.fdopen(replies_fd, "wb", buffering=0)
    runner = Runner()
    for line in iter(requests.readline, b""):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                reply = runner.serve(wire.loads(line))
            except BaseException as error:  # noqa: BLE001 - every failure goes back as data
                reply = {"ok": False, "error": _describe(error)}
        reply["warnings"] = [
            {"category": w.category.__name__, "mro": mro(w.category), "message": str(w.message)[:500]}
            for w in caught[:20]
        ]
        try:
            message = wire.dumps(reply)
        except (TypeError, ValueError) as error:
            message = wire.dumps({"ok": False, "error": _describe(error)})
        replies.write(message)


if __name__ == "__main__":
    main()
