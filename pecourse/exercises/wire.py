"""Plain data between the judge and the student's process: JSON plus safetensors.

Nothing here ever unpickles or calls code: a message is a JSON tree and, for tensors, a
safetensors blob. What the student's process sends back can only be *data* (numbers,
strings, lists, tuples, dicts, tensors and arrays, dtypes); any other object arrives as an
inert :class:`NotPlainData` that names its type. So a notebook can make its functions
return whatever values it likes — which is what answering is — but it cannot hand the
judge an object with a patched ``__eq__``, a tensor subclass with its own
``__torch_function__``, or anything else that runs code on the judge's side.

A frame is ``b"PEC1"``, two big-endian u64 lengths (JSON, blob), the JSON and the blob.
"""

from __future__ import annotations

import base64
import json
import math
import socket
import struct

__all__ = ["MAX_MESSAGE", "NotPlainData", "Callback", "encode", "decode", "send", "recv"]
__all__ += ["WireError"]

MAGIC = b"PEC1"
HEADER = struct.Struct(">4sQQ")
MAX_MESSAGE = 64 * 1024 * 1024
MAX_DEPTH = 40
MAX_NODES = 2_000_000


class WireError(Exception):
    """A malformed, oversized or truncated message (or a closed channel)."""


class NotPlainData:
    """What the judge sees of an object that is not plain data (a module, a function...)."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name} object: not plain data, the grader cannot inspect it>"

    def __eq__(self, other) -> bool:
        return False

    __hash__ = None


class Callback:
    """A callable of the judge's, passed as an argument: calling it asks the judge to run it.

    ``invoke(handle, args, kwargs)`` is supplied by the side that decodes it.
    """

    __slots__ = ("handle", "name", "_invoke")

    def __init__(self, handle: int, name: str, invoke):
        self.handle = handle
        self.name = name
        self._invoke = invoke

    def __call__(self, *args, **kwargs):
        return self._invoke(self.handle, args, kwargs)

    def __repr__(self) -> str:
        return f"<function {self.name} (run by the grader)>"


def encode(obj, *, callables=None, generators=None, origins=None):
    """``(tree, tensors)``: a JSON-able tree and ``{key: tensor}`` for safetensors.

    ``callables``: a dict that receives ``handle -> callable`` for functions in ``obj``
    (allowed on the judge's side only; ``None`` turns them into :class:`NotPlainData`).
    ``generators``: a dict that receives ``handle -> torch.Generator`` (their state is sent).
    ``origins``: a dict that receives ``key -> the tensor or array it copies``.
    """
    import numpy as np
    import torch

    tensors: dict[str, object] = {}
    count = [0]

    def put(t, origin=None) -> str:
        key = str(len(tensors))
        tensors[key] = t
        if origins is not None and origin is not None:
            origins[key] = origin
        return key

    def enc(x, depth):
        count[0] += 1
        if depth > MAX_DEPTH or count[0] > MAX_NODES:
            raise WireError("the value is too deeply nested or too large to send")
        if x is None or type(x) in (bool, str):
            return x
        if type(x) is int:
            return x if abs(x) < 2**53 else {"$int": str(x)}
        if type(x) is float:
            return x if math.isfinite(x) else {"$float": repr(x)}
        if isinstance(x, str) and not isinstance(x, np.generic):
            return str.__str__(x)
        if isinstance(x, torch.Tensor):
            t = x.detach()
            if type(t) is not torch.Tensor:
                t = t.as_subclass(torch.Tensor)
            if t.layout != torch.strided or t.is_quantized or t.device.type == "meta":
                return {"$opaque": f"torch.Tensor ({t.layout}, {t.device.type})"}
            t = t.cpu()
            node = {"$tensor": None, "grad": bool(x.requires_grad)}
            if t.is_complex():
                node["complex"] = True
                t = torch.view_as_real(t)
            node["$tensor"] = put(t.contiguous().clone(), x)
            return node
        if isinstance(x, np.ndarray):
            if x.dtype.kind not in "biuf" or x.dtype.byteorder not in "=|<":
                return {"$opaque": f"numpy.ndarray of {x.dtype}"}
            return {"$ndarray": put(torch.from_numpy(np.ascontiguousarray(x).copy()), x)}
        if isinstance(x, np.generic):
            if x.dtype.kind not in "biuf":
                return {"$opaque": f"numpy.{type(x).__name__}"}
            return {"$npscalar": x.dtype.str, "v": enc(x.item(), depth + 1)}
        if isinstance(x, torch.dtype):
            return {"$dtype": str(x).removeprefix("torch.")}
        if isinstance(x, torch.Size):
            return {"$size": [int(v) for v in x]}
        if isinstance(x, torch.device):
            return {"$device": str(x)}
        if isinstance(x, torch.Generator):
            if generators is None:
                return {"$opaque": "torch.Generator"}
            handle = len(generators)
            generators[handle] = x
            return {"$generator": handle, "state": put(x.get_state())}
        if type(x) is list:
            return [enc(v, depth + 1) for v in x]
        if type(x) is tuple:
            return {"$tuple": [enc(v, depth + 1) for v in x]}
        if type(x) is dict:
            return {"$dict": [[enc(k, depth + 1), enc(v, depth + 1)] for k, v in x.items()]}
        if type(x) in (set, frozenset):
            return {"$set": [enc(v, depth + 1) for v in x], "frozen": type(x) is frozenset}
        if type(x) is complex:
            return {"$complex": [enc(x.real, depth + 1), enc(x.imag, depth + 1)]}
        if type(x) is slice:
            return {
                "$slice": [enc(x.start, depth + 1), enc(x.stop, depth + 1), enc(x.step, depth + 1)]
            }
        if type(x) is range:
            return {"$range": [x.start, x.stop, x.step]}
        if type(x) is bytes:
            return {"$bytes": base64.b64encode(x).decode("ascii")}
        if x is Ellipsis:
            return {"$ellipsis": True}
        if callables is not None and callable(x):
            handle = len(callables)
            callables[handle] = x
            return {"$callback": handle, "name": str(getattr(x, "__name__", "function"))[:80]}
        return {"$opaque": _type_name(x)}

    return enc(obj, 0), tensors


def _type_name(x) -> str:
    try:
        t = type(x)
        return f"{t.__module__}.{t.__qualname__}"[:120]
    except Exception:  # noqa: BLE001 - a hostile type may raise on attribute access
        return "object"


def decode(tree, tensors, *, invoke=None, generators=None):
    """The value ``tree`` describes; ``invoke(handle, args, kwargs)`` backs callbacks
    (None: callbacks are refused); ``generators`` receives ``handle -> Generator`` made
    from the states sent. Anything malformed raises :class:`WireError`."""
    import torch

    count = [0]

    def dec(x, depth):
        count[0] += 1
        if depth > MAX_DEPTH or count[0] > MAX_NODES:
            raise WireError("the message is too deeply nested or too large")
        if x is None or type(x) in (bool, int, float, str):
            return x
        if type(x) is list:
            return [dec(v, depth + 1) for v in x]
        if type(x) is not dict or len(x) == 0:
            raise WireError(f"unexpected {type(x).__name__} in a message")
        kind = next(iter(x))
        if kind == "$tensor":
            t = _tensor(tensors, x["$tensor"])
            if x.get("complex"):
                t = torch.view_as_complex(t)
            if x.get("grad") and t.is_floating_point():
                t.requires_grad_(True)
            return t
        if kind == "$ndarray":
            return _tensor(tensors, x["$ndarray"]).numpy()
        if kind == "$npscalar":
            import numpy as np

            return np.dtype(str(x["$npscalar"])).type(dec(x["v"], depth + 1))
        if kind == "$int":
            return int(x["$int"])
        if kind == "$float":
            return float(x["$float"])
        if kind == "$dtype":
            value = getattr(torch, str(x["$dtype"]), None)
            if not isinstance(value, torch.dtype):
                raise WireError(f"unknown dtype {x['$dtype']!r}")
            return value
        if kind == "$size":
            return torch.Size([int(v) for v in x["$size"]])
        if kind == "$device":
            return torch.device(str(x["$device"]))
        if kind == "$tuple":
            return tuple(dec(v, depth + 1) for v in x["$tuple"])
        if kind == "$dict":
            return {_key(dec(k, depth + 1)): dec(v, depth + 1) for k, v in x["$dict"]}
        if kind == "$set":
            items = {_key(dec(v, depth + 1)) for v in x["$set"]}
            return frozenset(items) if x.get("frozen") else items
        if kind == "$complex":
            return complex(dec(x["$complex"][0], depth + 1), dec(x["$complex"][1], depth + 1))
        if kind == "$slice":
            return slice(*(dec(v, depth + 1) for v in x["$slice"]))
        if kind == "$range":
            return range(*(int(v) for v in x["$range"]))
        if kind == "$bytes":
            return base64.b64decode(x["$bytes"])
        if kind == "$ellipsis":
            return Ellipsis
        if kind == "$generator":
            g = torch.Generator()
            g.set_state(_tensor(tensors, x["state"]))
            if generators is not None:
                generators[int(x["$generator"])] = g
            return g
        if kind == "$callback":
            if invoke is None:
                return NotPlainData("function")
            return Callback(int(x["$callback"]), str(x.get("name", "function"))[:80], invoke)
        if kind == "$opaque":
            return NotPlainData(str(x["$opaque"])[:120])
        raise WireError(f"unknown tag {kind!r}")

    try:
        return dec(tree, 0)
    except (KeyError, TypeError, ValueError, IndexError, RuntimeError, AttributeError) as exc:
        raise WireError(f"a malformed value ({type(exc).__name__}: {str(exc)[:100]})") from exc


def _key(k):
    try:
        hash(k)
    except TypeError as exc:
        raise WireError("an unhashable dict key or set element") from exc
    return k


def _tensor(tensors, key):
    if not isinstance(key, str) or key not in tensors:
        raise WireError(f"missing tensor {key!r}")
    return tensors[key]


# --------------------------------------------------------------------------- framing


def pack(header: dict, tensors: dict) -> bytes:
    from safetensors.torch import save

    body = json.dumps(header, allow_nan=False, separators=(",", ":")).encode()
    blob = save(tensors) if tensors else b""
    if len(body) + len(blob) > MAX_MESSAGE:
        raise WireError(f"the message is over {MAX_MESSAGE // 2**20} MB")
    return HEADER.pack(MAGIC, len(body), len(blob)) + body + blob


def unpack(data: bytes) -> tuple[dict, dict]:
    from safetensors.torch import load

    if len(data) < HEADER.size:
        raise WireError("a truncated message")
    magic, n_body, n_blob = HEADER.unpack_from(data)
    if magic != MAGIC or HEADER.size + n_body + n_blob != len(data):
        raise WireError("a malformed message")
    try:
        header = json.loads(data[HEADER.size : HEADER.size + n_body])
        tensors = load(bytes(data[HEADER.size + n_body :])) if n_blob else {}
    except Exception as exc:  # noqa: BLE001 - anything unreadable is malformed
        raise WireError(f"a malformed message ({type(exc).__name__})") from exc
    if type(header) is not dict:
        raise WireError("a malformed message")
    return header, tensors


def send(sock: socket.socket, header: dict, tensors: dict | None = None) -> None:
    sock.sendall(pack(header, tensors or {}))


def recv(sock: socket.socket, limit: int = MAX_MESSAGE) -> tuple[dict, dict]:
    head = _exactly(sock, HEADER.size)
    magic, n_body, n_blob = HEADER.unpack(head)
    if magic != MAGIC or n_body + n_blob > limit:
        raise WireError(f"a message of {(n_body + n_blob) // 2**20} MB is over the limit")
    return unpack(head + _exactly(sock, n_body + n_blob))


def _exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise WireError("the other side closed the channel")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
