"""A class on JupyterHub, end to end on loopback: deploy/jupyterhub/jupyterhub_config.py as it
is, with JupyterHub's test authenticator and local-process spawner as the site's choices.

One instructor and two students, each with a server the Hub starts (REST API). The instructor
generates and releases an assignment through the formgrader's API, both students fetch it,
write their answers (one right, one wrong) and submit through nbgrader's exchange from their
own servers; the instructor collects, autogrades, grades the collected folder again with
`pecourse grade` (sandboxed: the same verdict for every part), generates and releases
feedback; each student fetches theirs. What a class does in the browser, through the same
handlers.

Where the test runs as root (CI, this machine), each person is a Unix user of their own, as
on The Littlest JupyterHub: the Hub runs in a mount namespace of its own (util-linux
`unshare`) where copies of /etc/passwd and /etc/group that name the three users are bound
over the system's, and JupyterHub's LocalProcessSpawner starts each server as its user. The
machine's own user database is never changed, and the namespace ends with the Hub. Then the
test also checks the separation nbgrader's exchange rests on, as a student (`setpriv`): a
student cannot list the submissions or the feedback, nor read the instructor's course
(hidden tests) or another student's home. Without root, every server runs as the one user
running the test (SimpleLocalProcessSpawner), and only the exchange's modes are checked.

Every process is started here and stopped here by PID: the Hub, its proxy
(configurable-http-proxy from npm, which scripts/install puts in the venv) and three
single-user servers with their kernels.
"""

from __future__ import annotations

import csv
import json
import os
import pwd
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pecourse.cli import main as pecourse_main
from pecourse.exercises.notebook import grade_id, read_notebook

from ..exercises.helpers import SOLUTIONS_DIR, answered
from ..exercises.wrong_answers import WRONG

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "jupyterhub"
BIN = Path(sys.executable).parent
SLUG = "09_sinusoidal_positional_encodings"  # three parts, each well under a second
COURSE_ID = "pecourse"
INSTRUCTOR, STUDENTS = "teacher", ("ada", "bob")
SERVICE_TOKEN = secrets.token_hex(16)


def proxy_command() -> str:
    """configurable-http-proxy: the venv's copy (scripts/install), else one on PATH."""
    mine = BIN.parent / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
    found = str(mine) if mine.exists() else shutil.which("configurable-http-proxy")
    if not found:
        pytest.fail(
            "configurable-http-proxy is not installed: run `make setup` (scripts/install "
            "fetches it with npm when the hub extra is installed) or "
            "`npm install --prefix .venv/node configurable-http-proxy@4.6.3`"
        )
    return found


def private_folders(path: Path) -> list[tuple[Path, Path]]:
    """``(folder, child)`` for each folder on the way to ``path`` that other users cannot
    enter, with its child on that way."""
    path = path.resolve()
    way = [*reversed(path.parents), path]
    return [(a, b) for a, b in zip(way, way[1:]) if not a.stat().st_mode & 0o001]


def private_folder(path: Path) -> tuple[Path, Path] | None:
    """The first of :func:`private_folders`, or None if other users can reach ``path``."""
    return next(iter(private_folders(path)), None)


def unix_users_possible() -> str | None:
    """None where one Unix user per person can be set up here, else what stops it."""
    if os.geteuid() != 0:
        return "the test does not run as root, which starting servers as other users needs"
    missing = [t for t in ("unshare", "setpriv", "mount") if not shutil.which(t)]
    if missing:
        return f"util-linux's {', '.join(missing)} not found"
    with tempfile.TemporaryDirectory() as spot:  # mounted over only inside the namespace
        probe = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "mount", "-t", "tmpfs", "t", spot],
            capture_output=True,
            text=True,
        )
    if probe.returncode:  # a container without CAP_SYS_ADMIN, for one
        return f"a mount namespace cannot be made here ({probe.stderr.strip()})"
    for needed in (ROOT, BIN):  # what every server runs (besides the base interpreter)
        if private_folder(needed):
            return f"{needed} lies in {private_folder(needed)[0]}, which other users cannot enter"
    if len(private_folders(Path(sys.base_prefix))) > 1:  # one is covered (Hub.__init__)
        return f"{sys.base_prefix} lies under two folders that other users cannot enter"
    return None


def free_uids(count: int, start: int = 61000) -> list[int]:
    """``count`` uids (and gids) from ``start`` on that the system does not use."""
    taken = {e.pw_uid for e in pwd.getpwall()} | {e.pw_gid for e in pwd.getpwall()}
    found, uid = [], start
    while len(found) < count:
        if uid not in taken:
            found.append(uid)
        uid += 1
    return found


def as_user(uid: int, *command: str) -> subprocess.CompletedProcess:
    """Run ``command`` as ``uid`` (its own group, no others), as that person would."""
    return subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *command],
        capture_output=True,
        text=True,
        timeout=30,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (read from /proc), children first."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "(gone)"


def owner(pid: int) -> int | None:
    try:
        return Path(f"/proc/{pid}").stat().st_uid
    except OSError:
        return None


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class Hub:
    """A running JupyterHub and the REST calls a class makes through it."""

    def __init__(self, tmp: Path, unix_users: bool):
        import requests

        self.requests = requests
        self.tmp = tmp
        self.unix_users = unix_users
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # the users' side: with Unix users, a folder they can reach (pytest's tmp_path lies
        # in root's private /tmp/pytest-of-root)
        self.shared = Path(tempfile.mkdtemp(prefix="pecourse-hub-")) if unix_users else tmp
        self.shared.chmod(0o755)
        self.homes = self.shared / "home"
        self.exchange = self.shared / "exchange"
        self.homes.mkdir()
        self.exchange.mkdir()
        self.exchange.chmod(0o777)  # nbgrader: an existing directory everyone can write
        hub_dir = tmp / "hub"
        hub_dir.mkdir()
        users = (INSTRUCTOR, *STUDENTS)
        self.uids = dict(zip(users, free_uids(len(users)))) if unix_users else {}
        for name in users:
            home = self.homes / name
            home.mkdir()
            if unix_users:  # a home only its owner can enter, as useradd makes it
                os.chown(home, self.uids[name], self.uids[name])
                home.chmod(0o700)
        if unix_users:
            passwd, group = hub_dir / "passwd", hub_dir / "group"
            passwd.write_text(
                Path("/etc/passwd").read_text()
                + "".join(
                    f"{n}:x:{u}:{u}:{n}:{self.homes / n}:/bin/sh\n" for n, u in self.uids.items()
                )
            )
            group.write_text(
                Path("/etc/group").read_text()
                + "".join(f"{n}:x:{u}:\n" for n, u in self.uids.items())
            )
            passwd.chmod(0o644)
            group.chmod(0o644)
            spawner = 'c.JupyterHub.spawner_class = "localprocess"'
            args: list[str] = []
        else:
            spawner = (
                'c.JupyterHub.spawner_class = "simple"\n'
                f"c.SimpleLocalProcessSpawner.home_dir_template = {str(self.homes)!r}"
                ' + "/{username}"'
            )
            args = ["--allow-root"] if os.geteuid() == 0 else []
        config = hub_dir / "jupyterhub_config.py"
        config.write_text(
            f"""
load_subconfig({str(DEPLOY / "jupyterhub_config.py")!r})
# the site's choices, for a test on one machine: any password, servers as local processes
c.JupyterHub.authenticator_class = "dummy"
{spawner}
c.Spawner.cmd = [{str(BIN / "jupyterhub-singleuser")!r}]
c.Spawner.args = {args!r}
c.Spawner.start_timeout = 90
c.Spawner.http_timeout = 90
c.JupyterHub.bind_url = {self.url!r}
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{free_port()}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{free_port()}"
c.ConfigurableHTTPProxy.command = [{proxy_command()!r}]
c.JupyterHub.db_url = "sqlite:///{hub_dir / "jupyterhub.sqlite"}"
c.JupyterHub.cookie_secret_file = {str(hub_dir / "cookie_secret")!r}
c.JupyterHub.pid_file = {str(hub_dir / "jupyterhub.pid")!r}
c.ConfigurableHTTPProxy.pid_file = {str(hub_dir / "proxy.pid")!r}
# the test drives the class as a service with admin rights over users and their servers
c.JupyterHub.services = [{{"name": "class-driver", "api_token": {SERVICE_TOKEN!r}}}]
c.JupyterHub.load_roles = [
    {{"name": "class-driver", "scopes": ["admin:users", "admin:servers", "tokens"],
      "services": ["class-driver"]}}
]
"""
        )
        env = {
            **os.environ,
            "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
            "PECOURSE_INSTRUCTORS": INSTRUCTOR,
            "PECOURSE_STUDENTS": ",".join(STUDENTS),
            "PECOURSE_EXCHANGE": str(self.exchange),
            "PECOURSE_COURSE_ID": COURSE_ID,
        }
        for leaked in ("JUPYTER_CONFIG_DIR", "JUPYTER_CONFIG_PATH", "JUPYTER_DATA_DIR"):
            env.pop(leaked, None)
        self.log = (hub_dir / "hub.log").open("w")
        command = [str(BIN / "jupyterhub"), "-f", str(config)]
        if unix_users:
            # the Hub and everything it starts see the three users; the machine does not
            script = 'mount --bind "$0" /etc/passwd && mount --bind "$1" /etc/group'
            private = private_folder(Path(sys.base_prefix))
            if private:
                # the venv's base interpreter lies in a folder only root may enter (pyenv in
                # /root, as here): in the namespace that folder is an empty tmpfs others may
                # enter, with only the way to the interpreter bound back into it
                folder, child = private
                keep = hub_dir / "interpreter"
                keep.mkdir()
                script += (
                    f" && mount --bind {shlex.quote(str(child))} {shlex.quote(str(keep))}"
                    f" && mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(str(folder))}"
                    f" && mkdir {shlex.quote(str(child))}"
                    f" && mount --bind {shlex.quote(str(keep))} {shlex.quote(str(child))}"
                )
            command = ["unshare", "--mount", "--propagation", "private", "sh", "-c"]
            command += [f'{script} && shift && exec "$@"', str(passwd), str(group)]
            command += [str(BIN / "jupyterhub"), "-f", str(config)]
        self.process = subprocess.Popen(
            command,
            cwd=hub_dir,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.tokens: dict[str, str] = {}
        deadline = time.monotonic() + 60
        while True:
            try:
                if self.requests.get(f"{self.url}/hub/api/", timeout=2).ok:
                    break
            except self.requests.ConnectionError:
                pass
            assert self.process.poll() is None, f"the Hub exited: {self.log_text()}"
            assert time.monotonic() < deadline, f"the Hub did not answer: {self.log_text()}"
            time.sleep(0.3)

    def log_text(self) -> str:
        self.log.flush()
        return (self.tmp / "hub" / "hub.log").read_text()[-6000:]

    def api(self, method: str, path: str, **kw):
        headers = {"Authorization": f"token {SERVICE_TOKEN}"}
        r = self.requests.request(
            method, f"{self.url}/hub/api{path}", headers=headers, timeout=30, **kw
        )
        assert r.status_code < 300, f"{method} {path}: {r.status_code} {r.text}" + (
            f"\nthe Hub's log:\n{self.log_text()}" if r.status_code >= 500 else ""
        )
        return r.json() if r.text else None

    def start_server(self, name: str) -> None:
        """Start ``name``'s server through the REST API and wait until it is ready."""
        self.tokens[name] = self.api("POST", f"/users/{name}/tokens", json={"note": "class test"})[
            "token"
        ]
        self.api("POST", f"/users/{name}/server")
        deadline = time.monotonic() + 90
        while not (self.api("GET", f"/users/{name}")["servers"].get("") or {}).get("ready"):
            assert time.monotonic() < deadline, f"{name}'s server did not start: {self.log_text()}"
            time.sleep(0.3)

    def user(self, name: str, method: str, path: str, as_user: str | None = None, **kw):
        """A request to ``name``'s server through the proxy, with ``as_user``'s token."""
        token = self.tokens[as_user or name]
        return self.requests.request(
            method,
            f"{self.url}/user/{name}/{path}",
            headers={"Authorization": f"token {token}"},
            timeout=120,
            **kw,
        )

    def ok(self, name: str, method: str, path: str, **kw):
        r = self.user(name, method, path, **kw)
        assert r.status_code < 300, f"{name} {method} {path}: {r.status_code} {r.text[:2000]}"
        body = r.json()
        if isinstance(body, dict) and body.get("success") is False:
            raise AssertionError(f"{name} {method} {path}: {body}")
        return body

    def stop(self) -> list[str]:
        """Stop every server, then the Hub (which stops its proxy); kill by PID whatever is
        left below it. Returns what had to be killed. Prints what ran and what was left
        (`pytest -s` shows it)."""
        running = {pid: command_line(pid) for pid in descendants(self.process.pid)}
        print(f"the Hub (pid {self.process.pid}, {self.url}) and the processes it started:")
        for pid, command in running.items():
            print(f"  pid {pid}, uid {owner(pid)}: {command[:150]}")

        def stop_server(name):
            try:
                self.api("DELETE", f"/users/{name}/server")
            except Exception:  # the Hub's shutdown below stops servers too
                pass

        with ThreadPoolExecutor(max(1, len(self.tokens))) as pool:
            list(pool.map(stop_server, list(self.tokens)))
        below = descendants(self.process.pid)
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        killed = []
        for pid in below:
            if alive(pid):
                killed.append(command_line(pid))
                os.kill(pid, signal.SIGKILL)
        ended = sum(not alive(pid) for pid in running)
        print(f"the Hub exited ({self.process.returncode}); {ended} of those {len(running)} ended")
        print(f"left running after the Hub, killed by PID: {killed or 'nothing'}")
        self.log.close()
        if self.shared != self.tmp:
            shutil.rmtree(self.shared)
        return killed

    def give(self, path: Path, name: str) -> None:
        """Hand ``path`` (a tree) to ``name``, as if they had written it."""
        if not self.unix_users:
            return
        for p in [path, *path.rglob("*")]:
            os.chown(p, self.uids[name], self.uids[name], follow_symlinks=False)


@pytest.fixture
def hub(tmp_path):
    if shutil.which("jupyterhub", path=str(BIN)) is None:
        pytest.fail("jupyterhub is not installed: `make setup` installs the hub extra")
    why_not = unix_users_possible()
    if why_not:
        print(f"one Unix user runs every server: {why_not}")
    started = Hub(tmp_path, unix_users=why_not is None)
    try:
        yield started
    finally:
        left = started.stop()
    assert not left, f"left running after the Hub stopped: {left}"


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_class_on_jupyterhub(hub, tmp_path):
    """Slow: a Hub, a proxy, three servers and two autograded submissions (about 40 s)."""
    from nbgrader.api import Gradebook

    users = (INSTRUCTOR, *STUDENTS)
    with ThreadPoolExecutor(len(users)) as pool:  # the whole class logs in at once
        list(pool.map(hub.start_server, users))

    # the instructor writes the course into their home, as in a terminal of their server
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(SOLUTIONS_DIR / f"{SLUG}.ipynb", src)
    course = hub.homes / INSTRUCTOR / "course"
    assert pecourse_main(["exercises", "nbgrader", str(course), "--source", str(src)]) == 0
    hub.give(course, INSTRUCTOR)

    # the formgrader is the instructor's; a student has none, and no way into the instructor's
    assert hub.ok(INSTRUCTOR, "GET", "formgrader/api/status")["status"] is True
    for student in STUDENTS:
        assert hub.user(student, "GET", "formgrader/api/status").status_code == 404
        assert hub.user(INSTRUCTOR, "GET", "api/status", as_user=student).status_code == 403
        assert (
            hub.user(INSTRUCTOR, "GET", "formgrader/api/status", as_user=student).status_code == 403
        )

    hub.ok(INSTRUCTOR, "POST", f"formgrader/api/assignment/{SLUG}/assign")
    hub.ok(INSTRUCTOR, "POST", f"formgrader/api/assignment/{SLUG}/release")

    source_nb = read_notebook(SOLUTIONS_DIR / f"{SLUG}.ipynb")
    replacements, failing = WRONG[SLUG]
    answers = {"ada": answered(source_nb), "bob": answered(source_nb, replacements)}
    action = {"course_id": COURSE_ID, "assignment_id": SLUG}
    path = f"{SLUG}/{SLUG}.ipynb"
    for student in STUDENTS:
        listed = hub.ok(student, "GET", f"assignments?course_id={COURSE_ID}")["value"]
        assert [(a["assignment_id"], a["status"]) for a in listed] == [(SLUG, "released")]
        hub.ok(student, "POST", "assignments/fetch", data=action)
        fetched = hub.ok(student, "GET", f"api/contents/{path}")["content"]
        code = "".join(c["source"] for c in fetched["cells"])
        assert "### BEGIN HIDDEN TESTS" not in code and "### BEGIN SOLUTION" not in code
        typed = json.loads(json.dumps(answers[student]))  # nbformat node -> plain JSON
        hub.ok(student, "PUT", f"api/contents/{path}", json={"type": "notebook", "content": typed})
        hub.ok(student, "POST", "assignments/submit", data=action)

    hub.ok(INSTRUCTOR, "POST", f"formgrader/api/assignment/{SLUG}/collect")
    for student in STUDENTS:
        hub.ok(INSTRUCTOR, "POST", f"formgrader/api/submission/{SLUG}/{student}/autograde")
    hub.ok(INSTRUCTOR, "POST", f"formgrader/api/assignment/{SLUG}/generate_feedback")
    hub.ok(INSTRUCTOR, "POST", f"formgrader/api/assignment/{SLUG}/release_feedback")

    # the grades: the right answer scores every point; the wrong one loses exactly the part
    # its mistake breaks, which only the hidden tests see
    points = {
        grade_id(c): c.metadata.nbgrader["points"]
        for c in source_nb.cells
        if c.metadata.get("nbgrader", {}).get("grade")
    }
    totals = {
        s["student"]: s["score"]
        for s in hub.ok(INSTRUCTOR, "GET", f"formgrader/api/submissions/{SLUG}")
    }
    assert totals == {
        "ada": sum(points.values()),
        "bob": sum(v for k, v in points.items() if k not in failing),
    }
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", COURSE_ID) as gb:
        scores = {
            s: {g.name: g.score for g in gb.find_submission_notebook(SLUG, SLUG, s).grades}
            for s in STUDENTS
        }
    assert scores["ada"] == points
    assert scores["bob"] == {k: (0.0 if k in failing else v) for k, v in points.items()}

    # the collected submissions graded in pecourse's sandbox, as the instructor would from a
    # terminal of their server (in their home, not a checkout: --source names the sources,
    # as the README's command does): the same verdict for every part
    graded = subprocess.run(
        [
            str(BIN / "pecourse"),
            "grade",
            str(course / "submitted"),
            "--source",
            str(src),
            "--exercise",
            SLUG,
            "--out",
            str(tmp_path / "gradebook.csv"),
            "--quiet",
        ],
        cwd=hub.homes / INSTRUCTOR,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=180,
    )
    assert graded.returncode == 0, graded.stdout[-3000:]
    with (tmp_path / "gradebook.csv").open(newline="") as f:
        ours = {(r["student"], r["part"]): float(r["points"]) for r in csv.DictReader(f)}
    assert ours == {(s, part): score for s in STUDENTS for part, score in scores[s].items()}

    # each student fetches their own feedback, which shows their own total
    total_max = sum(points.values())
    for student in STUDENTS:
        listed = hub.ok(student, "POST", "assignments/fetch_feedback", data=action)["value"]
        submissions = [s for a in listed for s in a.get("submissions", [])]
        assert submissions and all(s["student_id"] == student for s in submissions)
        assert all(s["has_local_feedback"] for s in submissions)
        feedback = list((hub.homes / student / SLUG / "feedback").glob(f"*/{SLUG}.html"))
        assert len(feedback) == 1
        assert f"Score: {totals[student]:.1f} / {total_max:.1f}" in feedback[0].read_text()

    # nbgrader's privacy in the exchange rests on Unix permissions: nobody but the owner can
    # list the inbound (submissions) or feedback folders, and the names in them carry a
    # random part or a hash. With one Unix user per student (PAM on TLJH, or containers
    # with their own volume of the exchange) that keeps submissions apart.
    for folder in ("inbound", "feedback"):
        mode = (hub.exchange / COURSE_ID / folder).stat().st_mode
        assert mode & 0o044 == 0, f"{folder}: {oct(mode)} can be listed by others"
    if not hub.unix_users:
        return  # one user runs every server here: the modes are all there is to check

    # each server ran as its own user: what it wrote is theirs
    inbound = hub.exchange / COURSE_ID / "inbound"
    for student in STUDENTS:
        fetched = hub.homes / student / SLUG / f"{SLUG}.ipynb"
        assert fetched.stat().st_uid == hub.uids[student]
        (submitted,) = inbound.glob(f"{student}+{SLUG}+*")
        assert submitted.stat().st_uid == hub.uids[student]
        assert len(submitted.name.rsplit("+", 1)[1]) == 12  # 9 random bytes: not guessable
    assert (course / "gradebook.db").stat().st_uid == hub.uids[INSTRUCTOR]

    # bob, as himself: no list of submissions or feedback, nothing of the instructor's course
    # (the source notebooks hold the hidden tests), nothing in ada's home
    bob = hub.uids["bob"]
    denied = [
        ["ls", str(inbound)],
        ["ls", str(hub.exchange / COURSE_ID / "feedback")],
        ["ls", str(course)],
        ["cat", str(course / "source" / SLUG / f"{SLUG}.ipynb")],
        ["cat", str(course / "gradebook.db")],
        ["ls", str(hub.homes / "ada")],
        ["cat", str(hub.homes / "ada" / SLUG / f"{SLUG}.ipynb")],
    ]
    for command in denied:
        done = as_user(bob, *command)
        assert done.returncode != 0 and "Permission denied" in done.stderr, (command, done)
    # what he may read: the released assignment (no hidden tests) and his own work
    assert as_user(bob, "ls", str(hub.exchange / COURSE_ID / "outbound" / SLUG)).returncode == 0
    assert as_user(bob, "cat", str(hub.homes / "bob" / SLUG / f"{SLUG}.ipynb")).returncode == 0
