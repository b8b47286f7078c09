"""Every rotary scheme and function runs on either backend: the readable core
(``rotary.REFERENCE``) or the fast one (``pecourse.kernels.FAST_ROPE``), with the same numbers,
and really runs on the one it is given."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
import torch

import pecourse.positions as positions
from pecourse import kernels
from pecourse.attention import PositionScheme, attention
from pecourse.kernels import FAST_ROPE
from pecourse.kernels.rope import TABLES
from pecourse.positions import multidim, rope, rope_inference, vo_rope, xpos
from pecourse.positions.rope_scaling import SCALINGS
from pecourse.positions.rotary import REFERENCE, Rotary
from pecourse.positions.window import Chunked, SlidingWindow

D, SEQ = 8, 7

#: The options each RoPE scaling needs, at a length the sequence below exceeds.
SCALING_OPTIONS = {
    "default": {},
    "linear": dict(factor=2.0),
    "ntk": dict(factor=2.0),
    "ntk_by_parts": dict(factor=2.0, original_max_position=4),
    "yarn": dict(factor=2.0, original_max_position=4),
    "dynamic": dict(factor=2.0, original_max_position=4),
    "llama3": dict(factor=2.0, original_max_position=4),
    "longrope": dict(
        short_factor=[1.0] * 4,
        long_factor=[2.0, 3.0, 4.0, 5.0],
        original_max_position=4,
        max_position=16,
    ),
}

#: One instance of every rotary scheme, built on a given backend.
SCHEMES = {
    "RoPE": lambda b: rope.RoPE(D, rotary_dim=6, backend=b),
    **{
        f"RoPE-{name}": (lambda b, n=name, o=options: rope.RoPE(D, scaling=n, backend=b, **o))
        for name, options in SCALING_OPTIONS.items()
    },
    "XPos": lambda b: xpos.XPos(D, pairing="interleaved", backend=b),
    "VORoPE": lambda b: vo_rope.VORoPE(D, rotary_dim=4, backend=b),
    "RoPER": lambda b: vo_rope.RoPER(D, backend=b),
    "AxialRoPE": lambda b: multidim.AxialRoPE(D, grid=(1, SEQ), backend=b),
    "AxialRoPE-pixel": lambda b: multidim.AxialRoPE(D, grid=(1, SEQ), freqs_for="pixel", backend=b),
    "MRoPE": lambda b: multidim.MRoPE(D, [1, 1, 2], backend=b),
    "ReRoPE": lambda b: rope_inference.ReRoPE(3, backend=b),
    "LeakyReRoPE": lambda b: rope_inference.LeakyReRoPE(3, 4.0, backend=b),
    "SelfExtend": lambda b: rope_inference.SelfExtend(2, 2, backend=b),
    "SlidingWindow(RoPE)": lambda b: SlidingWindow(rope.RoPE(D, backend=b), 3),
    "Chunked(RoPE)": lambda b: Chunked(rope.RoPE(D, backend=b), 3),
}


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


X, Y = _x(2, 2, SEQ, D), _x(2, 1, SEQ, D, seed=1)
POS = torch.stack([torch.arange(SEQ) + 3, torch.arange(SEQ)])  # per batch element
MPOS = torch.stack([POS, POS // 2, POS % 3])  # M-RoPE's (t, h, w) ids
COORDS = torch.stack([POS % 2, POS // 2])  # axial (row, column)

#: Every public function that takes ``backend=``, called with it.
FUNCTIONS = {
    "apply_rope": lambda b: rope.apply_rope(X, POS, rotary_dim=6, backend=b),
    "apply_xpos": lambda b: xpos.apply_xpos(X, Y, POS, POS, backend=b),
    "rope_inverse": lambda b: vo_rope.rope_inverse(X, POS, backend=b),
    "vo_rope_values": lambda b: vo_rope.vo_rope_values(Y, POS, backend=b),
    "vo_rope_output": lambda b: vo_rope.vo_rope_output(X, POS, pairing="interleaved", backend=b),
    "apply_axial_rope": lambda b: multidim.apply_axial_rope(X, COORDS, backend=b),
    "apply_mrope": lambda b: multidim.apply_mrope(X, MPOS, [1, 1, 2], backend=b),
    "mrope_cos_sin": lambda b: multidim.mrope_cos_sin(MPOS, rope.inv_freq(D), [1, 1, 2], backend=b),
    "rerope_scores": lambda b: rope_inference.rerope_scores(X, Y, POS, POS, window=3, backend=b),
    "leaky_rerope_scores": lambda b: rope_inference.leaky_rerope_scores(
        X, Y, POS, POS, window=3, ratio=2.0, backend=b
    ),
    "self_extend_scores": lambda b: rope_inference.self_extend_scores(
        X, Y, POS, POS, window=2, group_size=2, backend=b
    ),
}


def _counting(backend: Rotary) -> tuple[Rotary, dict]:
    """``backend`` with a count of the calls of each of its two steps."""
    calls = {"cos_sin": 0, "rotate_pairs": 0}

    def counted(step):
        def call(*args, **kwargs):
            calls[step] += 1
            return getattr(backend, step)(*args, **kwargs)

        return call

    return Rotary(counted("cos_sin"), counted("rotate_pairs"), backend.name), calls


def _run(scheme: PositionScheme) -> torch.Tensor:
    q, k, v = X, Y, _x(2, 1, SEQ, D, seed=2)
    q_pos = k_pos = MPOS if isinstance(scheme, multidim.MRoPE) else POS
    if isinstance(scheme, multidim.AxialRoPE):
        q_pos = k_pos = torch.arange(SEQ)  # token indices, unravelled on its grid
    return attention(q, k, v, scheme, q_positions=q_pos, k_positions=k_pos)


def _rotary_modules():
    """The modules under positions/ that build on the rotary core's backends."""
    for info in pkgutil.iter_modules(positions.__path__):
        module = importlib.import_module(f"pecourse.positions.{info.name}")
        if getattr(module, "Rotary", None) is Rotary and info.name != "rotary":
            yield module


def test_every_rotary_scheme_and_function_takes_a_backend_and_is_run_here():
    schemes, functions = set(), set()
    for module in _rotary_modules():
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isclass(obj) and issubclass(obj, PositionScheme):
                assert "backend" in inspect.signature(obj).parameters, name
                schemes.add(name)
            elif inspect.isfunction(obj) and "backend" in inspect.signature(obj).parameters:
                functions.add(name)
    assert schemes == {name.split("-")[0] for name in SCHEMES if "(" not in name}
    assert functions == set(FUNCTIONS)
    assert set(SCALING_OPTIONS) == set(SCALINGS)  # every scaled RoPE


@pytest.mark.parametrize("name", list(SCHEMES))
def test_a_scheme_gives_the_same_attention_on_both_backends(name):
    reference = _run(SCHEMES[name](REFERENCE))
    fast, calls = _counting(FAST_ROPE)
    assert torch.equal(_run(SCHEMES[name](fast)), reference)
    assert calls["cos_sin"] and calls["rotate_pairs"], calls  # the scheme used its backend


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_a_function_gives_the_same_numbers_on_both_backends(name):
    reference = FUNCTIONS[name](REFERENCE)
    fast, calls = _counting(FAST_ROPE)
    got = FUNCTIONS[name](fast)
    for want, have in zip(*(r if isinstance(r, tuple) else (r,) for r in (reference, got))):
        assert torch.equal(have, want)
    assert calls["cos_sin"], calls


def test_the_fast_apply_rope_is_the_readable_function_on_the_fast_backend():
    TABLES.clear()
    assert kernels.apply_rope.func is rope.apply_rope
    assert inspect.signature(kernels.apply_rope).parameters["backend"].default is FAST_ROPE
    assert torch.equal(kernels.apply_rope(X, POS), rope.apply_rope(X, POS))
    assert TABLES.misses == 1  # its table came from the fast backend's cache


def test_a_scheme_refuses_a_backend_that_is_not_one():
    with pytest.raises(TypeError, match="backend"):
        rope.RoPE(D, backend="fast")
    with pytest.raises(TypeError, match="backend"):
        rope.apply_rope(X, POS, backend=FAST_ROPE.rotate_pairs)
