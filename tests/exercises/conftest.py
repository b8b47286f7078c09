"""Fixtures for the exercise tests: a synthetic class graded once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from pecourse.exercises.grade import grade_class

from .helpers import SLUGS, TEST_LIMITS, make_class


@pytest.fixture(scope="session")
def class_dir(tmp_path_factory) -> Path:
    """Four learners who submit every exercise: right, untouched, and wrong in two ways."""
    root = tmp_path_factory.mktemp("class")
    students = {"ada": "full", "bea": "blank", "cyd": "wrong", "dan": "wrong_more"}
    return make_class(root, students, SLUGS)


@pytest.fixture(scope="session")
def class_rows(class_dir):
    """The whole synthetic class, graded once (two jobs in parallel)."""
    return grade_class(class_dir, limits=TEST_LIMITS, jobs=2, progress=False)
