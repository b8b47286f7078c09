"""The package's shape teaches the typology: every scheme declares where position enters."""

import importlib
import inspect
import pkgutil

import pytest

import pecourse.positions as positions
from pecourse.attention import PLACES, NoPE, PositionScheme

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


def test_every_reexported_name_resolves():
    for name in positions._EXPORTS:
        assert getattr(positions, name) is not None, name


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_scheme"):
        positions.no_such_scheme  # noqa: B018


def test_every_family_module_is_in_the_package_table():
    for module in MODULES:
        short = module.__name__.rsplit(".", 1)[1]
        assert f"``{short}``" in positions.__doc__, f"{short} missing from the table"


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda c: c.__name__)
def test_each_scheme_declares_its_places(scheme):
    assert scheme.places, f"{scheme.__name__} declares no place"
    assert set(scheme.places) <= set(PLACES), scheme.places


def test_nope_uses_no_place():
    assert NoPE.places == ()


def test_every_place_is_used_by_some_scheme():
    used = {place for scheme in SCHEMES for place in scheme.places}
    assert used == set(PLACES)


def test_there_is_a_scheme_for_every_family():
    names = {s.__name__ for s in SCHEMES}
    expected = {
        "LearnedAbsolute",
        "Sinusoidal",
        "RoPE",
        "XPos",
        "ALiBi",
        "T5RelativeBias",
        "ShawRelative",
        "CoPE",
        "VORoPE",
        "AxialRoPE",
        "MRoPE",
    }
    assert expected <= names, sorted(expected - names)
