"""The course map: sixteen concepts, a learning path, reading times, the README's table."""

import json
import re
from pathlib import Path

import pytest

from pecourse import course
from pecourse.exercises import notebook

ROOT = Path(__file__).resolve().parent.parent


def test_sixteen_concepts_numbered_in_order():
    assert [c.number for c in course.CONCEPTS] == list(range(1, 17))
    for c in course.CONCEPTS:
        assert c.slug.startswith(f"{c.number:02d}_")


def test_learning_path_visits_every_concept_once_as_the_readme_says():
    assert sorted(course.LEARNING_PATH) == list(range(1, 17))
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    stated = re.search(r"one good reading order is (\d\d(?: → \d\d)*)", text).group(1)
    assert tuple(int(n) for n in stated.split(" → ")) == course.LEARNING_PATH


def test_notebooks_are_named_after_concepts():
    names = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}
    allowed = {c.slug for c in course.CONCEPTS} | {"00_start_here"}
    assert "00_start_here" in names
    assert names <= allowed, f"unexpected notebooks: {sorted(names - allowed)}"


def test_prose_words_ignores_code_maths_and_links():
    nb = {
        "cells": [
            {
                "cell_type": "markdown",
                "source": "Two words $x^2 + y$ `code here` [link](https://a.b/c)",
            },
            {"cell_type": "code", "source": "many words in code are not prose"},
        ]
    }
    assert course.prose_words(nb) == 3  # "Two", "words", "link"


def test_reading_minutes_rounds_up(tmp_path):
    import json

    words = " ".join(["word"] * (course.WORDS_PER_MINUTE + 1))
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": words}]}))
    assert course.reading_minutes(path) == 2
    assert course.reading_minutes(tmp_path / "missing.ipynb") is None


def test_readme_has_the_current_syllabus_table():
    readme = (ROOT / "README.md").read_text()
    assert course.syllabus_table() in readme, (
        "README's syllabus table is stale: paste `python -m pecourse.course` into README.md"
    )


def test_readme_starts_with_the_two_commands():
    head = (ROOT / "README.md").read_text().split("\n## ", 1)[0]
    assert "make lab" in head and "make test" in head


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "\nmake test" in ci


@pytest.mark.parametrize("bad", [0, 17, "3", 2.0, True])
def test_concept_lookup_refuses_bad_numbers(bad):
    with pytest.raises(ValueError, match="concept number"):
        course.concept(bad)


def test_table_links_follow_link_base():
    readme_links = course.syllabus_table()
    notebook_links = course.syllabus_table(link_base="")
    if "](notebooks/" in readme_links:  # at least one chapter exists
        assert "](notebooks/" not in notebook_links
        assert readme_links.replace("](notebooks/", "](") == notebook_links


def test_checkout_is_found_from_any_folder_inside_it(tmp_path, monkeypatch):
    root = tmp_path / "course"
    (root / "notebooks" / "deep").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'pecourse'\n")
    assert course.checkout(root / "notebooks" / "deep") == root.resolve()
    monkeypatch.chdir(root / "notebooks")
    assert course.checkout() == root.resolve()
    # reading times and the README's table come from the checkout the command runs in
    words = " ".join(["word"] * (2 * course.WORDS_PER_MINUTE))
    nb = {"cells": [{"cell_type": "markdown", "source": words}]}
    (root / course.CONCEPTS[0].notebook).write_text(json.dumps(nb))
    assert course.reading_minutes(course.CONCEPTS[0].notebook) == 2
    (root / "README.md").write_text("# Course\n\n| # | Chapter | old |\n\nEnd.\n")
    assert course.update_readme() is True and course.update_readme() is False
    assert course.syllabus_table() in (root / "README.md").read_text()
    assert "| 01 | [Learned Absolute Positions](notebooks/" in course.syllabus_table()


def test_outside_a_checkout_the_error_says_where_to_run(tmp_path, monkeypatch):
    (tmp_path / "notebooks").mkdir()  # without pyproject.toml it is not a checkout
    monkeypatch.chdir(tmp_path)
    with pytest.raises(course.NotACheckoutError, match="not inside a checkout of the course"):
        course.checkout()
    with pytest.raises(FileNotFoundError, match="course's folder"):
        course.syllabus_table()
    # outside a checkout a learner's `pecourse check` finds no solutions/ (it reads the
    # notebook's own tests) and building the exercises refuses
    assert notebook.source_notebooks() == []
    with pytest.raises(course.NotACheckoutError):
        notebook.build_all()
