"""``make lab`` puts the venv's ``pecourse`` on PATH where learners are told to run it: in a
JupyterLab terminal and in a notebook's ``!pecourse`` (kernels inherit the server's
environment). The server runs without a terminal, as it does when make is started from a
script: then JupyterLab would start login shells, which reset PATH from /etc/profile.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest

from pecourse import course

ROOT = course.checkout()
VENV_BIN = ROOT / ".venv" / "bin"
STAMP = ".venv/.pecourse-installed"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(url: str, method: str = "GET") -> dict:
    req = urllib.request.Request(url, method=method, data=b"{}" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as reply:
        return json.loads(reply.read() or b"{}")


def _terminal_output(port: int, token: str, name: str, command: str, want: str) -> str:
    from tornado.ioloop import IOLoop
    from tornado.websocket import websocket_connect

    async def run() -> str:
        url = f"ws://127.0.0.1:{port}/terminals/websocket/{name}?token={token}"
        ws = await websocket_connect(url)
        await ws.write_message(json.dumps(["stdin", command + "\r"]))
        seen = ""
        deadline = time.monotonic() + 30
        while want not in seen and time.monotonic() < deadline:
            message = await ws.read_message()
            if message is None:
                break
            kind, *payload = json.loads(message)
            if kind == "stdout":
                seen += payload[0]
        ws.close()
        return seen

    return IOLoop.current().run_sync(run, timeout=40)


@contextlib.contextmanager
def _make_lab(tmp_path, target: str = "lab"):
    """Start JupyterLab through ``make TARGET`` with a bare PATH; yield its address and token."""
    if shutil.which("make") is None or not (ROOT / STAMP).exists():
        pytest.skip("needs make and the course's .venv (make setup)")
    port, token = _free_port(), uuid.uuid4().hex
    env = dict(
        os.environ,
        PATH="/usr/local/bin:/usr/bin:/bin",  # no venv on PATH, as in a fresh shell
        JUPYTER_PORT=str(port),
        JUPYTER_TOKEN=token,
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        PECOURSE_DATA_DIR=str(tmp_path / "data"),
        BROWSER="true",
        SHELL="/bin/bash",
    )
    env.pop("VIRTUAL_ENV", None)
    env.pop("JUPYTER_CONFIG_PATH", None)
    log = (tmp_path / f"{target}.log").open("w")
    # -o: never reinstall from inside a test (the stamp counts as up to date)
    lab = subprocess.Popen(
        ["make", "-o", STAMP, target],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                _request(f"{base}/api/status?token={token}")
                break
            except OSError:
                if lab.poll() is not None or time.monotonic() > deadline:
                    pytest.fail((tmp_path / f"{target}.log").read_text()[-3000:])
                time.sleep(0.5)
        yield base, token
    finally:
        os.killpg(lab.pid, signal.SIGTERM)  # make and the server it started: our own group
        try:
            lab.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(lab.pid, signal.SIGKILL)
            lab.wait()
        log.close()


def _nbgrader_shown(base: str, token: str) -> dict[str, bool]:
    """Whether nbgrader's formgrader answers and whether JupyterLab loads its plugins."""
    try:
        urllib.request.urlopen(f"{base}/formgrader?token={token}", timeout=10)
        formgrader = True
    except urllib.error.HTTPError as exc:
        formgrader = exc.code != 404
    with urllib.request.urlopen(f"{base}/lab?token={token}", timeout=10) as reply:
        page = reply.read().decode()
    config = json.loads(
        re.search(r'id="jupyter-config-data"[^>]*>(.*?)</script>', page, re.S).group(1)
    )
    disabled = config.get("disabledExtensions", [])
    plugins = any(
        e.get("name") == "@jupyter/nbgrader" for e in config.get("federated_extensions", [])
    ) and not any(d == "@jupyter/nbgrader" or d.startswith("@jupyter/nbgrader:") for d in disabled)
    return {"formgrader": formgrader, "menus": plugins}


@pytest.mark.slow
def test_make_lab_puts_pecourse_on_path_and_hides_grading(tmp_path):
    # Slow (about 20 s): starts JupyterLab through the Makefile, a kernel and a terminal.
    with _make_lab(tmp_path) as (base, token):
        port = int(base.rsplit(":", 1)[1])
        from jupyter_client import BlockingKernelClient

        kernel = _request(f"{base}/api/kernels?token={token}", "POST")["id"]
        client = BlockingKernelClient()
        client.load_connection_file(str(tmp_path / "runtime" / f"kernel-{kernel}.json"))
        # a kernel that starts slowly on a busy machine is not dead: allow its heartbeat 30 s
        client.hb_channel.time_to_dead = 30.0
        client.start_channels()
        try:
            client.wait_for_ready(timeout=60)
            printed = []

            def hook(msg):
                if msg["msg_type"] == "stream":
                    printed.append(msg["content"]["text"])

            # what `!pecourse ...` in a cell runs: a shell with the kernel's environment
            reply = client.execute_interactive(
                "print(get_ipython().getoutput('command -v pecourse')[0])",
                timeout=60,
                output_hook=hook,
            )
            assert reply["content"]["status"] == "ok"
            assert "".join(printed).strip() == str(VENV_BIN / "pecourse")
        finally:
            client.stop_channels()
        terminal = _request(f"{base}/api/terminals?token={token}", "POST")["name"]
        seen = _terminal_output(
            port, token, terminal, "command -v pecourse", str(VENV_BIN / "pecourse")
        )
        assert str(VENV_BIN / "pecourse") in seen, seen[-500:]
        # a learner sees none of nbgrader, even where it is installed (it is, after make test)
        assert _nbgrader_shown(base, token) == {"formgrader": False, "menus": False}


@pytest.mark.slow
def test_make_instructor_shows_nbgrader(tmp_path):
    # Slow (about 10 s): the same server through `make instructor`, where nbgrader is on.
    pytest.importorskip("nbgrader")
    with _make_lab(tmp_path, "instructor") as (base, token):
        assert _nbgrader_shown(base, token) == {"formgrader": True, "menus": True}
