"""pecourse.results.recorded: every shipped recording either loads or is refused by name."""

import json
from importlib import resources

import pytest

from pecourse.results import recorded, recordings


def test_every_recording_loads_or_is_refused_with_a_clear_error():
    for name in recordings():
        data = json.loads(resources.files("pecourse.results").joinpath(f"{name}.json").read_text())
        if {"name", "rows", "text"} <= data.keys():
            assert recorded(name).rows == [
                {int(k) if k.isdigit() else k: v for k, v in row.items()} for row in data["rows"]
            ]
        else:  # a study's recording: a ValueError that says where to read it, not a KeyError
            with pytest.raises(ValueError, match=rf"studies\.load\('{name}'\)"):
                recorded(name)
