"""pecourse.results.recorded: one loader for every shipped recording, experiments and studies."""

import json
from importlib import resources

import pytest

from pecourse.results import recorded, recordings


def test_every_recording_loads_with_the_one_loader():
    names = recordings()
    assert len(names) >= 10
    for name in names:
        data = json.loads(resources.files("pecourse.results").joinpath(f"{name}.json").read_text())
        assert recorded(name) == data


def test_an_unknown_recording_is_refused_by_name():
    with pytest.raises(ValueError, match=r"name must be one of the recordings .*extrapolation"):
        recorded("no_such_recording")
