from datetime import datetime, timedelta, timezone

import pytest

from pecourse.flashcards.store import ProgressStore, make_scheduler

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


class FakeClock:
    """An injectable clock: call it for the time, ``advance`` to move it."""

    def __init__(self, now: datetime = T0):
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs) -> datetime:
        self.now += timedelta(**kwargs)
        return self.now


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def store(tmp_path):
    return ProgressStore(tmp_path / "progress.sqlite3")


@pytest.fixture
def scheduler():
    return make_scheduler(enable_fuzzing=False)


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """Point PECOURSE_DATA_DIR at a fresh directory for code that uses the default store."""
    path = tmp_path / "data"
    monkeypatch.setenv("PECOURSE_DATA_DIR", str(path))
    return path
