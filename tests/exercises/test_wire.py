"""The judge and the student's process exchange plain data only."""

from __future__ import annotations

import math
import socket

import numpy as np
import pytest
import torch

from pecourse.exercises import wire
from pecourse.exercises._runner import CellTimeout, StudentExit, rebuild_exception


def roundtrip(value, **kwargs):
    tree, tensors = wire.encode(value, **kwargs)
    header, blobs = wire.unpack(wire.pack({"v": tree}, tensors))
    return wire.decode(header["v"], blobs)


def test_plain_values_come_back_equal_and_typed():
    value = {
        "f32": torch.randn(3, 2),
        "bool": torch.tensor([True, False]),
        "long": torch.arange(4),
        "bf16": torch.ones(2, dtype=torch.bfloat16),
        "complex": torch.tensor([1 + 2j]),
        "scalar": torch.tensor(3.5, dtype=torch.float64),
        "empty": torch.zeros(0, 4),
        "numbers": [1, 2.5, float("nan"), float("inf"), 2**70, None, True, "s"],
        "tuple": (torch.float64, torch.Size([2, 3]), slice(1, None, 2)),
        "np": np.arange(3.0),
        7: {1, 2},
    }
    back = roundtrip(value)
    for key in ("f32", "bool", "long", "bf16", "complex", "scalar", "empty"):
        assert back[key].dtype == value[key].dtype and torch.equal(back[key], value[key])
    assert back["numbers"][:2] == [1, 2.5] and math.isnan(back["numbers"][2])
    assert back["numbers"][3:] == [float("inf"), 2**70, None, True, "s"]
    assert back["tuple"] == value["tuple"] and back[7] == {1, 2}
    assert isinstance(back["np"], np.ndarray) and back["np"].tolist() == [0.0, 1.0, 2.0]
    assert isinstance(roundtrip(np.float64(0.5)), float)  # numpy's float is a Python float


def test_objects_that_are_not_data_arrive_inert():
    class Always(torch.Tensor):
        def __eq__(self, other):
            return True

    back = roundtrip([math, lambda: 1, torch.zeros(2).as_subclass(Always)])
    assert isinstance(back[0], wire.NotPlainData) and back[0] != back[0]
    assert isinstance(back[1], wire.NotPlainData)
    assert type(back[2]) is torch.Tensor and not bool((back[2] == torch.ones(2)).all())


def test_generators_travel_by_state():
    g = torch.Generator().manual_seed(3)
    gens = {}
    tree, tensors = wire.encode([g], generators=gens)
    got = {}
    (copy,) = wire.decode(tree, tensors, generators=got)
    assert torch.equal(torch.rand(4, generator=copy), torch.rand(4, generator=g))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"PEC1" + b"\0" * 16,
        wire.pack({"v": {"$nope": 1}}, {}),
        wire.pack({"v": {"$tensor": "9"}}, {}),
    ],
)
def test_malformed_messages_are_refused(data):
    with pytest.raises(wire.WireError):
        header, blobs = wire.unpack(data)
        wire.decode(header["v"], blobs)


def test_oversized_messages_are_refused():
    a, b = socket.socketpair()
    try:
        wire.send(a, {"v": "x" * 5000})
        with pytest.raises(wire.WireError, match="over the limit"):
            wire.recv(b, limit=1000)
    finally:
        a.close()
        b.close()


def test_the_students_exceptions_are_rebuilt_on_builtin_types():
    exc = rebuild_exception(
        {"type": "=X", "bases": ["=X", "ValueError", "Exception"], "message": "m"}, "f"
    )
    assert isinstance(exc, ValueError) and type(exc).__name__ == "=X" and str(exc) == "m"
    assert exc.pecourse_answer == "f"
    assert isinstance(
        rebuild_exception({"type": "SystemExit", "bases": ["SystemExit"]}), StudentExit
    )
    assert isinstance(rebuild_exception({"type": "CellTimeout", "bases": []}), CellTimeout)


def test_dtype_and_shape_problems_are_named():
    from pecourse.exercises._runner import describe

    dtype = describe(RuntimeError("Float did not match Double"), 100, 1.0)
    assert dtype.startswith("dtype problem (check the dtype the exercise asks for)")
    # with the dtypes the answer returned, the one expected against the one got
    for message in ("Float did not match Double", "expected scalar type Double but found Float"):
        named = describe(RuntimeError(message), 100, 1.0, {"float32": "f", "int64": "g"})
        assert named.startswith("dtype problem: expected float64, f returned float32"), named
    both = describe(
        RuntimeError("Float did not match Double"), 1, 1, {"float32": "f", "float64": "g"}
    )
    assert both.startswith("dtype problem (check the dtype the exercise asks for)"), both
    shape = describe(
        RuntimeError("The size of tensor a (5) must match the size of tensor b (4)"), 100, 1.0
    )
    assert shape.startswith("shape problem")
    raised = rebuild_exception(
        {
            "type": "RuntimeError",
            "bases": ["RuntimeError"],
            "message": "Float did not match Double",
        },
        "f(tensor [2] float32)",
    )
    assert (
        describe(raised, 100, 1.0)
        == "f(tensor [2] float32) raised RuntimeError: Float did not match Double"
    )
