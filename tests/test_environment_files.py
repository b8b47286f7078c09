"""pyproject.toml and environment.yml must ask for the same packages with the same bounds."""

import re
import subprocess
import sys
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as tomli (a dev requirement there)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
# conda-forge spells a few packages differently from PyPI.
CONDA_TO_PYPI = {"pytorch": "torch"}


def pyproject_requirements() -> dict[str, tuple[SpecifierSet, str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        lines += extra
    reqs = [Requirement(line) for line in lines]
    return {r.name.lower(): (r.specifier, str(r.marker or "")) for r in reqs}


def conda_requirements() -> dict[str, tuple[SpecifierSet, str]]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    found = {}
    for item in env["dependencies"]:
        entries = item["pip"] if isinstance(item, dict) else [item]
        for entry in entries:
            if entry.startswith("-e") or entry in ("pip",) or re.match(r"python\b", entry):
                continue
            req = Requirement(entry)
            name = CONDA_TO_PYPI.get(req.name.lower(), req.name.lower())
            found[name] = (req.specifier, str(req.marker or ""))
    return found


def test_same_packages_and_bounds():
    pyproject, conda = pyproject_requirements(), conda_requirements()
    assert sorted(conda) == sorted(pyproject), (
        f"only in pyproject: {sorted(set(pyproject) - set(conda))}; "
        f"only in environment.yml: {sorted(set(conda) - set(pyproject))}"
    )
    for name, spec in pyproject.items():
        assert conda[name] == spec, f"{name}: pyproject {spec} vs environment.yml {conda[name]}"


def test_torch_is_capped_below_cuda_only_releases():
    # A requirement admitting 2.14+ pulls a multi-GB CUDA build on our machines.
    spec, _ = pyproject_requirements()["torch"]
    assert "2.13.0" in spec
    assert "2.14.0" not in spec


def test_python_floor_matches():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python"))
    assert SpecifierSet(python.removeprefix("python")) == SpecifierSet(project["requires-python"])


def test_jupyter_imports_without_the_slow_iri_checker():
    # scripts/install removes rfc3987-syntax, whose import costs 2.3 s in every process that
    # imports nbformat (see there); notebooks still validate against nbformat's schema.
    code = (
        "import sys, nbformat; "
        "nbformat.validate(nbformat.read('notebooks/00_start_here.ipynb', as_version=4)); "
        "print(sorted(m for m in ('jsonschema', 'rfc3987_syntax', 'lark') if m in sys.modules))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert run.stdout.split() == ["['jsonschema']"]
