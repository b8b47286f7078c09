"""pecourse.lab.results.recorded: one loader for every shipped recording, experiments and studies."""

import json
from importlib import resources

import pytest
import torch

from pecourse.lab.results import made_with_this_torch, recorded, recordings


def test_every_recording_loads_with_the_one_loader():
    names = recordings()
    assert len(names) >= 10
    for name in names:
        data = json.loads(
            resources.files("pecourse.lab.results").joinpath(f"{name}.json").read_text()
        )
        assert recorded(name) == data


def test_an_unknown_recording_is_refused_by_name():
    with pytest.raises(ValueError, match=r"name must be one of the recordings .*extrapolation"):
        recorded("no_such_recording")


def test_a_live_cell_is_held_to_the_recorded_value_only_under_the_recording_torch():
    record = recorded("needle_seeds")
    release = torch.__version__.split("+")[0]
    assert made_with_this_torch(record) == (record["versions"]["torch"].split("+")[0] == release)
    assert made_with_this_torch({**record, "versions": {"torch": torch.__version__}})
    # the same release in another build (PyPI's CUDA wheel beside the CPU one) counts
    assert made_with_this_torch({**record, "versions": {"torch": release + "+another-build"}})
    assert not made_with_this_torch({**record, "versions": {"torch": "0.0.1+cpu"}})
    assert not made_with_this_torch({"rows": []})  # no versions recorded: not known to match


def test_every_recording_has_the_schema_fields():
    # recorded() validates; here each field is also read the way a chapter reads it
    for name in recordings():
        rec = recorded(name)
        assert rec["name"] == name
        assert rec["rows"] and isinstance(rec["versions"]["torch"], str)
        assert all(isinstance(s, int) for s in rec["seeds"])


def _minimal(**changes):
    rec = {
        "name": "demo",
        "protocol": {"eval_tokens": 4},
        "seeds": [0],
        "checkpoints": {},
        "rows": [{"model": "rope", "seed": 0, "64": {"perplexity": 4.0, "ci95": [3.9, 4.1]}}],
        "cpu_seconds": 1.5,
        "versions": {"python": "3.11", "torch": "2.13.0"},
    }
    rec.update(changes)
    return {k: v for k, v in rec.items() if v is not _DROP}


_DROP = object()


@pytest.mark.parametrize(
    "changes, error",
    [
        ({"rows": _DROP}, r"'demo' lacks the fields \['rows'\]"),
        ({"runs": []}, r"fields the schema does not know: \['runs'\]"),
        ({"seeds": "0"}, r"field 'seeds' must be list"),
        ({"cpu_seconds": True}, r"field 'cpu_seconds' must be"),
        ({"rows": []}, r"rows must be a non-empty list of objects"),
        ({"rows": [1]}, r"rows must be a non-empty list of objects"),
        ({"seeds": [0.5]}, r"seeds must be integers"),
        ({"versions": {"python": "3.11"}}, r"versions must name the torch"),
        (
            {"rows": [{"64": {"perplexity": 4.0, "ci95": [4.1, 3.9]}}]},
            r"demo\.rows\[0\]\.64\.ci95 must be \[lo, hi\] with lo <= hi",
        ),
        ({"summary": {"x": {"ci95": [0.1]}}}, r"demo\.summary\.x\.ci95 must be"),
    ],
)
def test_the_schema_refuses_a_broken_recording_naming_the_field(changes, error):
    from pecourse.lab.results import validate

    assert validate(_minimal()) == _minimal()
    with pytest.raises((ValueError, TypeError), match=error):
        validate(_minimal(**changes))


def test_write_validates_and_leaves_the_previous_recording_whole(tmp_path, monkeypatch):
    from pecourse.lab import results

    path = results.write(_minimal(), tmp_path)
    assert json.loads(path.read_text()) == _minimal()
    with pytest.raises(ValueError):
        results.write(_minimal(rows=[]), tmp_path)

    def fail(*args, **kwargs):  # the disk fills up halfway through the new file
        raise OSError("no space left on device")

    monkeypatch.setattr(results.json, "dumps", fail)
    with pytest.raises(OSError, match="no space"):
        results.write(_minimal(cpu_seconds=9.0), tmp_path)
    assert json.loads(path.read_text()) == _minimal()  # the old file, whole
    assert [p.name for p in tmp_path.iterdir()] == ["demo.json"]  # no temporary left over


def test_fmt_and_order_read_intervals():
    from pecourse.lab.results import fmt, order

    a = {"perplexity": 4.771, "ci95": [4.70, 4.84]}
    b = {"perplexity": 5.2, "ci95": [4.9, 5.5]}
    c = {"perplexity": 4.8, "ci95": [4.75, 4.95]}
    assert fmt(a) == "4.77 [4.70, 4.84]"
    assert fmt({"accuracy": 0.5, "ci95": [0.44, 0.56]}, digits=3) == "0.500 [0.440, 0.560]"
    assert order(b, a) == 1 and order(a, b) == -1 and order(a, c) == 0
    with pytest.raises(ValueError, match="ci95"):
        fmt({"perplexity": 4.0})
    with pytest.raises(ValueError, match="b must be"):
        order(a, 3)
