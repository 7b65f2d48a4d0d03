"""The messages between the judge and the sandboxed student process.

One message is one line of JSON. Arrays and tensors travel as base64 bytes with their
dtype, shape and device; nothing is ever unpickled, so a message from student code can
carry data but never code. Objects that cannot travel by value stay where they live and
travel as a number: a *handle* (``__handle__``) for an object of the student's process, a
*proxy* (``__proxy__``) for an object of the judge's that a test passed into the student's
code (the student's side gets a stand-in whose calls come back to the judge:
:class:`autograder.runner.Proxy`).
"""

from __future__ import annotations

import base64
import collections
import itertools
import json
import sys
from typing import Any, Callable

import numpy as np

# the largest message accepted from the student process (an answer, not a data set)
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
# the most named-tuple types one side builds for the other (each is a class that stays)
MAX_NAMEDTUPLE_TYPES = 1000
# at most this many items are taken from an iterator the student's code gave
MAX_ITEMS = 100_000

_NUMPY_DTYPES = {
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
}
_TORCH_DTYPES = {
    "bool", "int8", "int16", "int32", "int64", "uint8",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
}


class WireError(Exception):
    """A message that does not follow the protocol."""


def encode(value: Any, make_handle: Callable[[Any], int], origins: bool = False, made: list | None = None,
           make_proxy: Callable[[Any], int] | None = None) -> Any:
    """A JSON-able form of ``value``; objects that cannot travel become handles.

    Named tuples travel by value (their type's name and fields too); with ``origins``
    (the student's side) each also carries the handle of the original, so that the judge
    hands the very object back when a test passes it on (a decoder's state, say). ``made``
    collects the arrays and tensors encoded, in the order :func:`decode` rebuilds them.
    ``make_proxy`` (the judge's side) numbers an object of the judge's that cannot travel,
    which then crosses as a proxy; without it such an object goes to ``make_handle``."""
    def again(v):
        return encode(v, make_handle, origins, made, make_proxy)

    if getattr(type(value), "__wire_handle__", False):  # a stand-in for a remote object
        return {"__handle__": make_handle(value)}
    if getattr(type(value), "__wire_proxy__", False):  # the student's stand-in for an object of the judge's
        return {"__proxy__": int(object.__getattribute__(value, "_number"))}
    origin = getattr(value, "_wire_origin", None) if _is_namedtuple(value) else None
    if origin is not None:  # a named tuple that came from over there: its original goes back
        return again(origin)
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.generic) and value.dtype.name in _NUMPY_DTYPES:
        return {"__npscalar__": value.dtype.name, "data": _b64(np.asarray(value).tobytes())}
    if isinstance(value, int):
        return int(value) if abs(value) < 2**62 else {"__int__": str(int(value))}
    if isinstance(value, float):
        return {"__float__": repr(float(value))}
    if isinstance(value, np.ndarray) and value.dtype.name in _NUMPY_DTYPES:
        if made is not None:
            made.append(value)
        arr = np.ascontiguousarray(value)
        return {"__ndarray__": arr.dtype.name, "shape": list(arr.shape), "data": _b64(arr.tobytes())}
    torch = sys.modules.get("torch")  # only what was imported can be a tensor here
    if torch is not None:
        if isinstance(value, torch.Tensor) and str(value.dtype).removeprefix("torch.") in _TORCH_DTYPES:
            if made is not None:
                made.append(value)
            t = value.detach().to("cpu").contiguous()
            raw = t.view(torch.int16) if t.dtype == torch.bfloat16 else t
            return {
                "__tensor__": str(value.dtype).removeprefix("torch."),
                "shape": list(t.shape),
                "device": str(value.device),
                "requires_grad": bool(value.requires_grad),
                "parameter": isinstance(value, torch.nn.Parameter),
                "data": _b64(raw.numpy().tobytes()),
            }
        if isinstance(value, torch.dtype):
            return {"__dtype__": str(value).removeprefix("torch.")}
        if isinstance(value, torch.device):
            return {"__device__": str(value)}
        if isinstance(value, torch.Size):
            return {"__size__": [int(v) for v in value]}
    if isinstance(value, slice):
        return {"__slice__": [again(v) for v in (value.start, value.stop, value.step)]}
    if value is Ellipsis:
        return {"__ellipsis__": True}
    if _is_namedtuple(value):
        entry = {"__namedtuple__": type(value).__name__, "fields": [str(f) for f in value._fields],
                 "items": [again(v) for v in value]}
        if origins:
            entry["origin"] = make_handle(value)
        return entry
    if type(value) is tuple:
        return {"__tuple__": [again(v) for v in value]}
    if type(value) is list:
        return [again(v) for v in value]
    if type(value) in (set, frozenset):
        return {"__set__": [again(v) for v in value], "frozen": type(value) is frozenset}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"__dict__": {k: again(v) for k, v in value.items()}}
    if isinstance(value, dict):
        return {"__items__": [[again(k), again(v)] for k, v in value.items()]}
    if (origins or make_proxy) and hasattr(type(value), "__next__") and hasattr(type(value), "__iter__"):
        # a generator (or map, zip, ...): its items, to arrive as an iterator
        return {"__iterator__": [again(v) for v in itertools.islice(value, MAX_ITEMS)]}
    if make_proxy is not None:
        return {"__proxy__": make_proxy(value)}
    return {"__handle__": make_handle(value)}



def decode(value: Any, resolve_handle: Callable[[int], Any], made: list | None = None,
           resolve_proxy: Callable[[int], Any] | None = None) -> Any:
    """The inverse of :func:`encode`; handles are turned into objects by ``resolve_handle``,
    proxies by ``resolve_proxy`` (without it, a proxy is a protocol error).
    ``made`` collects the arrays and tensors rebuilt, in the order :func:`encode` met them."""
    def again(v):
        return decode(v, resolve_handle, made, resolve_proxy)

    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, list):
        return [again(v) for v in value]
    if not isinstance(value, dict) or len(value) == 0:
        raise WireError(f"unexpected value {str(value)[:80]!r}")
    if "__float__" in value:
        return float(value["__float__"])
    if "__int__" in value:
        return int(value["__int__"])
    if "__npscalar__" in value:
        dtype = _checked(value["__npscalar__"], _NUMPY_DTYPES)
        return np.frombuffer(_unb64(value["data"]), dtype=dtype)[0]
    if "__ndarray__" in value:
        dtype = _checked(value["__ndarray__"], _NUMPY_DTYPES)
        shape = _shape(value["shape"])
        return _made(np.frombuffer(_unb64(value["data"]), dtype=dtype).reshape(shape).copy(), made)
    if "__tensor__" in value or "__dtype__" in value or "__device__" in value or "__size__" in value:
        import torch
    if "__tensor__" in value:
        name = _checked(value["__tensor__"], _TORCH_DTYPES)
        shape = _shape(value["shape"])
        raw = _unb64(value["data"])
        if name == "bfloat16":
            t = torch.from_numpy(np.frombuffer(raw, dtype=np.int16).reshape(shape).copy()).view(torch.bfloat16)
        else:
            t = torch.from_numpy(np.frombuffer(raw, dtype=name if name != "bool" else np.bool_).reshape(shape).copy())
        device = str(value.get("device", "cpu"))
        if device.startswith("cuda") and torch.cuda.is_available():
            t = t.to(device)
        if value.get("parameter"):
            return _made(torch.nn.Parameter(t, requires_grad=bool(value.get("requires_grad"))), made)
        return _made(t.requires_grad_(bool(value.get("requires_grad")) and t.is_floating_point()), made)
    if "__dtype__" in value:
        return getattr(torch, _checked(value["__dtype__"], _TORCH_DTYPES))
    if "__device__" in value:
        return torch.device(str(value["__device__"]))
    if "__size__" in value:
        return torch.Size(_shape(value["__size__"]))
    if "__slice__" in value:
        return slice(*(again(v) for v in value["__slice__"]))
    if "__ellipsis__" in value:
        return Ellipsis
    if "__tuple__" in value:
        return tuple(again(v) for v in value["__tuple__"])
    if "__namedtuple__" in value:
        cls = _namedtuple_class(value["__namedtuple__"], value.get("fields"))
        items = [again(v) for v in _list(value.get("items"))]
        if len(items) != len(cls._fields):
            raise WireError("a named tuple's items do not match its fields")
        result = cls._make(items)
        if "origin" in value:
            result._wire_origin = resolve_handle(int(value["origin"]))
        return result
    if "__iterator__" in value:
        return iter([again(v) for v in _list(value["__iterator__"])])
    if "__set__" in value:
        items = [again(v) for v in _list(value["__set__"])]
        try:
            return frozenset(items) if value.get("frozen") else set(items)
        except TypeError as err:
            raise WireError(f"a set of unhashable items ({err})") from None
    if "__dict__" in value:
        return {str(k): again(v) for k, v in value["__dict__"].items()}
    if "__items__" in value:
        pairs = [(again(k), again(v)) for k, v in map(_pair, _list(value["__items__"]))]
        try:
            return dict(pairs)
        except TypeError as err:
            raise WireError(f"a dict with an unhashable key ({err})") from None
    if "__handle__" in value:
        return resolve_handle(int(value["__handle__"]))
    if "__proxy__" in value and resolve_proxy is not None:
        return resolve_proxy(int(value["__proxy__"]))
    raise WireError(f"unknown value kind {sorted(value)[:3]}")


def _made(array: Any, made: list | None) -> Any:
    if made is not None:
        made.append(array)
    return array


def snapshot(arrays: list) -> list:
    """Copies of ``arrays`` (tensors, NumPy arrays), to tell later which were changed in place."""
    return [a.detach().clone() if hasattr(a, "detach") else np.array(a, copy=True) for a in arrays]


def changed_in_place(arrays: list, before: list) -> list[int]:
    """The indices of ``arrays`` whose shape, dtype or any entry differ from ``before``."""
    changed = []
    for i, (now, then) in enumerate(zip(arrays, before)):
        if hasattr(now, "detach"):
            same = now.shape == then.shape and now.dtype == then.dtype and bool((now.detach() == then).all())
        else:
            same = now.shape == then.shape and now.dtype == then.dtype and bool(np.all(now == then))
        if not same:
            changed.append(i)
    return changed


def dumps(message: dict) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def loads(line: bytes) -> dict:
    if len(line) > MAX_MESSAGE_BYTES:
        raise WireError(f"message of {len(line)} bytes is over the limit")
    message = json.loads(line)
    if not isinstance(message, dict):
        raise WireError("a message is a JSON object")
    return message


def _is_namedtuple(value: Any) -> bool:
    return isinstance(value, tuple) and isinstance(getattr(type(value), "_fields", None), tuple)


_NAMEDTUPLES: dict[tuple, type] = {}


def _namedtuple_class(name: Any, fields: Any) -> type:
    """A named-tuple class of this side with ``name`` and ``fields``, the same class for the
    same pair; its instances take the ``_wire_origin`` of the object they stand for."""
    if not isinstance(name, str) or not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        raise WireError("a named tuple has a name and a list of field names")
    key = (name, tuple(fields))
    if key not in _NAMEDTUPLES:
        if len(_NAMEDTUPLES) >= MAX_NAMEDTUPLE_TYPES:
            raise WireError("too many kinds of named tuple")
        try:
            base = collections.namedtuple(name, fields)
        except (ValueError, TypeError) as err:
            raise WireError(f"not a valid named tuple ({err})") from None
        # a subclass without __slots__, so that an instance can remember its original
        _NAMEDTUPLES[key] = type(name, (base,), {"__module__": "submission"})
    return _NAMEDTUPLES[key]


def _list(value: Any) -> list:
    if not isinstance(value, list):
        raise WireError("expected a list")
    return value


def _pair(value: Any) -> list:
    if not isinstance(value, list) or len(value) != 2:
        raise WireError("a dict item is a [key, value] pair")
    return value


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _unb64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise WireError("array data must be base64 text")
    return base64.b64decode(text, validate=True)


def _checked(name: Any, allowed: set[str]) -> str:
    if name not in allowed:
        raise WireError(f"dtype {str(name)[:40]!r} is not allowed")
    return name


def _shape(shape: Any) -> tuple[int, ...]:
    if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise WireError("a shape is a list of non-negative integers")
    return tuple(shape)
