"""Fixtures for the exercise tests: a synthetic class graded once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from pecourse.exercises.grade import grade_class

from .helpers import SLUGS, TEST_LIMITS, make_class


@pytest.fixture(scope="session")
def class_dir(tmp_path_factory) -> Path:
    """Three learners who submit every exercise: right, untouched, and plausibly wrong."""
    root = tmp_path_factory.mktemp("class")
    return make_class(root, {"ada": "full", "bea": "blank", "cyd": "wrong"}, SLUGS)


@pytest.fixture(scope="session")
def class_rows(class_dir):
    """The whole synthetic class, graded once (two jobs in parallel)."""
    return grade_class(class_dir, limits=TEST_LIMITS, jobs=2, progress=False)
