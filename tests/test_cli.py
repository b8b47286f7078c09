"""The ``pecourse`` console command: help and the environment report."""

import os
import subprocess
import sys

import torch

from pecourse.cli import main


def test_help_lists_info(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "usage: pecourse" in out and "info" in out


def test_info_reports_versions_devices_and_data_dir(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert torch.__version__ in out
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in out
    assert "Triton" in out and "GPU" in out
    # The data directory the report names is the overridden one, and says why.
    assert os.environ["PECOURSE_DATA_DIR"] in out
    assert "set by PECOURSE_DATA_DIR" in out


def test_info_gpu_line_claims_no_recordings(monkeypatch):
    # Without CUDA the report must not promise GPU recordings the course does not ship.
    from pecourse import info

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    gpu = dict(info._devices())["GPU"]
    assert gpu.startswith("none (CUDA not available)")
    assert "recording" not in gpu and "CPU" in gpu


def test_console_script_runs():
    done = subprocess.run(
        [sys.executable, "-m", "pecourse.cli", "--help"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    from pecourse.cli import COMMANDS

    listing = " ".join(done.stdout.split())  # argparse wraps long help lines
    for command, (_, help_text) in COMMANDS.items():
        assert f"{command} {help_text}" in listing


def test_help_imports_no_command_module():
    code = (
        "import sys; from pecourse.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
        "print([m for m in sys.modules if m in ('torch', 'nbformat') or m.startswith("
        "('pecourse.info', 'pecourse.flashcards', 'pecourse.exercises', 'pecourse.lab.train'))])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_unknown_command_is_refused():
    done = subprocess.run(
        [sys.executable, "-m", "pecourse.cli", "nonsense"], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "invalid choice" in done.stderr


def test_the_command_table_names_the_module_that_registers_each_command():
    import argparse
    import importlib

    from pecourse.cli import COMMAND_MODULES, COMMANDS

    registered = {}
    for name in COMMAND_MODULES:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(name).register(sub)
        helps = {action.dest: action.help for action in sub._choices_actions}
        registered.update({command: (name, helps[command]) for command in sub.choices})
    assert registered == COMMANDS


def test_a_flashcard_command_starts_without_torch(tmp_path):
    code = (
        "import sys; from pecourse.cli import main; code = main(['cards', 'stats']); "
        "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(code)"
    )
    env = {**os.environ, "PECOURSE_DATA_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "157" in done.stdout


def test_a_command_that_needs_the_checkout_says_so_outside_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["exercises", "build"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pecourse exercises: ") and "run this from the course's folder" in err
    assert main(["exercises", "nbgrader", "course"]) == 2
    assert "run this from the course's folder" in capsys.readouterr().err
    assert not list(tmp_path.iterdir()), "nothing written outside the checkout"


def test_grading_outside_a_checkout_asks_for_the_sources(tmp_path, monkeypatch, capsys):
    (tmp_path / "class" / "ada").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert main(["grade", "class", "--out", "gradebook.csv", "--quiet"]) == 2
    assert "run from a course checkout, or pass --source" in capsys.readouterr().err
    assert not (tmp_path / "gradebook.csv").exists()
