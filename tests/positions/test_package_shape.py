"""The package's shape teaches the typology: every scheme says where position enters, and
what it says is what its hooks do."""

import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

import pytest
import torch

import pecourse.positions as positions
from pecourse.attention import HOOKS, PLACES, NoPE, PositionScheme
from pecourse.positions.absolute import LearnedAbsolute, Sinusoidal
from pecourse.positions.alibi import ALiBi
from pecourse.positions.cope import CoPE
from pecourse.positions.distance_bias import FIRE, KerpleLog, KerplePower
from pecourse.positions.multidim import AxialRoPE, MRoPE
from pecourse.positions.relative import ShawKeysOnly, ShawRelative, T5RelativeBias
from pecourse.positions.rope import RoPE
from pecourse.positions.rope_inference import LeakyReRoPE, ReRoPE, SelfExtend
from pecourse.positions.vo_rope import RoPER, VORoPE
from pecourse.positions.window import Chunked, SlidingWindow
from pecourse.positions.xpos import XPos

MODULES = [
    importlib.import_module(f"pecourse.positions.{m.name}")
    for m in pkgutil.iter_modules(positions.__path__)
    if not m.name.startswith("_")
]
SCHEMES = sorted(
    {
        cls
        for module in MODULES
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, PositionScheme) and cls.__module__ == module.__name__
    },
    key=lambda c: c.__name__,
)

HEADS, HEAD_DIM, D_MODEL, SEQ = 2, 8, 16, 6
#: One small instance of every public scheme (a new scheme must be added here).
INSTANCES = {
    LearnedAbsolute: lambda: LearnedAbsolute(32, D_MODEL),
    Sinusoidal: lambda: Sinusoidal(D_MODEL),
    RoPE: lambda: RoPE(HEAD_DIM),
    XPos: lambda: XPos(HEAD_DIM),
    AxialRoPE: lambda: AxialRoPE(HEAD_DIM, grid=(3, 3)),
    MRoPE: lambda: MRoPE(HEAD_DIM, [1, 1, 2]),
    ReRoPE: lambda: ReRoPE(2),
    LeakyReRoPE: lambda: LeakyReRoPE(2, 4.0),
    SelfExtend: lambda: SelfExtend(2, 2),
    ALiBi: lambda: ALiBi(HEADS),
    T5RelativeBias: lambda: T5RelativeBias(HEADS, num_buckets=8, max_distance=16),
    KerpleLog: lambda: KerpleLog(HEADS),
    KerplePower: lambda: KerplePower(HEADS),
    FIRE: lambda: FIRE(HEADS, mlp_width=4, init_threshold=4.0),
    ShawRelative: lambda: ShawRelative(HEAD_DIM, 2),
    ShawKeysOnly: lambda: ShawKeysOnly(HEAD_DIM, 2),
    CoPE: lambda: CoPE(HEAD_DIM, 4),
    VORoPE: lambda: VORoPE(HEAD_DIM),
    RoPER: lambda: RoPER(HEAD_DIM),
    SlidingWindow: lambda: SlidingWindow(RoPE(HEAD_DIM), 3),
    Chunked: lambda: Chunked(RoPE(HEAD_DIM), 3),
}


def _places_in_use(scheme: PositionScheme) -> tuple[str, ...]:
    """The places where the scheme's hooks actually change something (measured, not read)."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in scheme.parameters():  # CoPE's table starts at zero (an untrained CoPE is NoPE)
            p.copy_(torch.randn(p.shape, generator=g))
    hidden = torch.randn(1, SEQ, D_MODEL, generator=g)
    q, k, v, out = (torch.randn(1, HEADS, SEQ, HEAD_DIM, generator=g) for _ in range(4))
    probs = torch.softmax(torch.randn(1, HEADS, SEQ, SEQ, generator=g), -1)
    pos = torch.arange(3, 3 + SEQ)  # not from 0: position 0 is RoPE's identity
    with torch.no_grad():
        q2, k2 = scheme.rotate(q, k, pos, pos)
        bias = scheme.score_bias(q, k, pos, pos)
        changed = {
            "input": not torch.equal(scheme.embed(hidden, pos), hidden),
            "qk": not (torch.equal(q2, q) and torch.equal(k2, k)),
            "scores": bias is not None and bool(bias.ne(0).any()),
            "values": not torch.equal(scheme.transform_values(v, pos), v)
            or not torch.equal(scheme.transform_output(out, probs, pos, pos), out),
        }
    return tuple(place for place in PLACES if changed[place])


def test_every_public_scheme_has_an_instance_here():
    public = {cls for cls in SCHEMES if not cls.__name__.startswith("_")}
    assert public == set(INSTANCES), sorted(c.__name__ for c in public ^ set(INSTANCES))


@pytest.mark.parametrize("cls", list(INSTANCES), ids=lambda c: c.__name__)
def test_declared_places_match_overridden_hooks(cls):
    scheme = INSTANCES[cls]()
    overridden = tuple(
        place
        for place, hooks in HOOKS.items()
        if any(getattr(cls, h) is not getattr(PositionScheme, h) for h in hooks)
    )
    assert cls.places == scheme.places == overridden
    assert scheme.places == _places_in_use(scheme), "a hook is overridden but does nothing"
    assert scheme.needs_probs == (cls.transform_output is ShawRelative.transform_output)


def test_nope_uses_no_place():
    assert NoPE.places == () and _places_in_use(NoPE()) == ()


def test_every_place_is_used_by_some_scheme():
    assert {place for cls in INSTANCES for place in cls.places} == set(PLACES)


def test_hooks_are_listed_for_every_place():
    assert tuple(HOOKS) == PLACES
    assert all(callable(getattr(PositionScheme, h)) for hooks in HOOKS.values() for h in hooks)


def test_names_the_chapters_import_from_the_package_resolve():
    root = Path(__file__).resolve().parents[2]
    pattern = re.compile(r"from pecourse\.positions import ([\w, ]+?)(?: as \w+)?$", re.M)
    names = set()
    for notebook in [*root.glob("notebooks/*.ipynb"), *root.glob("solutions/*.ipynb")]:
        for cell in json.loads(notebook.read_text())["cells"]:
            for found in pattern.findall("".join(cell["source"])):
                names.update(n.strip() for n in found.split(","))
    assert names, "no chapter imports from pecourse.positions: the pattern is stale"
    for name in names:
        assert hasattr(positions, name), name
    assert positions.alibi_slopes is positions.alibi.slopes


def test_every_family_module_is_in_the_package_table():
    for module in MODULES:
        short = module.__name__.rsplit(".", 1)[1]
        assert f"``{short}``" in positions.__doc__, f"{short} missing from the table"


def test_a_wrapper_uses_its_inner_schemes_places_and_its_own():
    assert SlidingWindow(RoPE(HEAD_DIM), 3).places == ("qk", "scores")
    alibi_window = Chunked(ALiBi(HEADS), 3)
    assert alibi_window.places == ("scores",) == _places_in_use(alibi_window)
