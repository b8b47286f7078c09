"""deploy/jupyterhub/jupyterhub_config.py read as JupyterHub, TLJH and Zero to JupyterHub read
it, and the per-group Jupyter settings checked against the installed nbgrader."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from traitlets.config import Config, PyFileConfigLoader

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "jupyterhub"
CONFIG = DEPLOY / "jupyterhub_config.py"


@pytest.fixture
def class_env(monkeypatch):
    monkeypatch.setenv("PECOURSE_INSTRUCTORS", "teacher")
    monkeypatch.setenv("PECOURSE_STUDENTS", "ada, bob,,ada")
    for name in ("PECOURSE_JUPYTER_CONFIG", "PECOURSE_MEM_LIMIT", "PECOURSE_CPU_LIMIT"):
        monkeypatch.delenv(name, raising=False)


def load() -> Config:
    """As JupyterHub (and TLJH's load_subconfig) read a config file."""
    return PyFileConfigLoader(CONFIG.name, path=str(DEPLOY)).load_config()


def spawner_for(c: Config, groups: set[str], mem_limit=None, cpu_limit=None):
    """What the hook leaves on a spawner (JupyterHub calls it just before start)."""
    spawner = SimpleNamespace(
        user=SimpleNamespace(groups=[SimpleNamespace(name=g) for g in groups]),
        environment={},
        mem_limit=mem_limit,
        cpu_limit=cpu_limit,
    )
    c.Spawner.pre_spawn_hook(spawner)
    return spawner


def spawn(c: Config, groups: set[str]) -> dict:
    return spawner_for(c, groups).environment


def test_groups_users_and_limits(class_env):
    c = load()
    assert c.JupyterHub.load_groups == {
        "instructors": {"users": ["teacher"]},
        "students": {"users": ["ada", "bob"]},
    }
    assert c.Authenticator.allowed_users == {"teacher", "ada", "bob"}


def test_limits_where_the_site_set_none(class_env, monkeypatch):
    c = load()
    unset = spawner_for(c, {"students"})
    assert (unset.mem_limit, unset.cpu_limit) == ("2G", 1.0)
    # a site's own limit (TLJH's `tljh-config set limits.memory 4G`) stays
    site = spawner_for(c, {"students"}, mem_limit=4 * 2**30, cpu_limit=2.0)
    assert (site.mem_limit, site.cpu_limit) == (4 * 2**30, 2.0)
    monkeypatch.setenv("PECOURSE_MEM_LIMIT", "3G")
    assert spawner_for(load(), {"instructors"}).mem_limit == "3G"


def test_a_user_in_both_groups_is_refused(class_env, monkeypatch):
    monkeypatch.setenv("PECOURSE_STUDENTS", "ada,teacher")
    with pytest.raises(ValueError, match="teacher"):
        load()


def test_each_group_reads_its_own_settings(class_env):
    c = load()
    teacher = spawn(c, {"instructors"})
    student = spawn(c, {"students"})
    nobody = spawn(c, set())  # in no group: a student, never the formgrader
    jupyter = DEPLOY / "jupyter"
    assert teacher["JUPYTER_CONFIG_PATH"].split(":") == [
        str(jupyter / "instructors"),
        str(jupyter / "common"),
    ]
    assert student["JUPYTER_CONFIG_PATH"] == nobody["JUPYTER_CONFIG_PATH"]
    assert student["JUPYTER_CONFIG_PATH"].split(":")[0] == str(jupyter / "students")
    assert teacher["PECOURSE_EXCHANGE"] == student["PECOURSE_EXCHANGE"]
    for env in (teacher, student):
        assert all(Path(p).is_dir() for p in env["JUPYTER_CONFIG_PATH"].split(":"))


def test_read_without_file_name_as_zero_to_jupyterhub_does(class_env, monkeypatch):
    """z2jh exec()s the files of its jupyterhub_config.d: no __file__ there."""
    monkeypatch.setenv("PECOURSE_JUPYTER_CONFIG", "/etc/pecourse/jupyter")
    c = Config()
    exec(compile(CONFIG.read_text(), CONFIG.name, "exec"), {"get_config": lambda: c})
    assert spawn(c, {"students"})["JUPYTER_CONFIG_PATH"].startswith("/etc/pecourse/jupyter/")


def test_student_settings_name_what_the_installed_nbgrader_has():
    """The extensions the students' folder turns off exist under these names in the installed
    nbgrader (its server extensions and its JupyterLab plugins)."""
    nbgrader = pytest.importorskip("nbgrader")
    server = json.loads(
        (DEPLOY / "jupyter" / "students" / "jupyter_server_config.json").read_text()
    )["ServerApp"]["jpserver_extensions"]
    shipped = json.loads(
        (Path(sys.prefix) / "etc/jupyter/jupyter_server_config.d/nbgrader.json").read_text()
    )["ServerApp"]["jpserver_extensions"]
    assert set(server) <= set(shipped) and not any(server.values())
    assert "nbgrader.server_extensions.formgrader" in server
    assert "nbgrader.server_extensions.assignment_list" not in server

    page = json.loads(
        (DEPLOY / "jupyter" / "students" / "labconfig" / "page_config.json").read_text()
    )
    bundle = Path(sys.prefix) / "share/jupyter/labextensions/@jupyter/nbgrader"
    code = "".join(p.read_text(errors="replace") for p in (bundle / "static").glob("*.js"))
    for plugin in page["disabledExtensions"]:
        assert f'"{plugin}"' in code, f"{plugin} is not a plugin of nbgrader {nbgrader.__version__}"
    assert "@jupyter/nbgrader:formgrader" in page["disabledExtensions"]
