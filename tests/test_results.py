"""pecourse.results.recorded: one loader for every shipped recording, experiments and studies."""

import json
from importlib import resources

import pytest
import torch

from pecourse.results import made_with_this_torch, recorded, recordings


def test_every_recording_loads_with_the_one_loader():
    names = recordings()
    assert len(names) >= 10
    for name in names:
        data = json.loads(resources.files("pecourse.results").joinpath(f"{name}.json").read_text())
        assert recorded(name) == data


def test_an_unknown_recording_is_refused_by_name():
    with pytest.raises(ValueError, match=r"name must be one of the recordings .*extrapolation"):
        recorded("no_such_recording")


def test_a_live_cell_is_held_to_the_recorded_value_only_under_the_recording_torch():
    record = recorded("multikey")
    release = torch.__version__.split("+")[0]
    assert made_with_this_torch(record) == (record["versions"]["torch"].split("+")[0] == release)
    assert made_with_this_torch({**record, "versions": {"torch": torch.__version__}})
    # the same release in another build (PyPI's CUDA wheel beside the CPU one) counts
    assert made_with_this_torch({**record, "versions": {"torch": release + "+another-build"}})
    assert not made_with_this_torch({**record, "versions": {"torch": "0.0.1+cpu"}})
    assert not made_with_this_torch({"rows": []})  # no versions recorded: not known to match
