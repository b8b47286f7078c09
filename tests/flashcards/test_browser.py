"""End to end in a real browser: JupyterLab runs the quiz cell, a cloze card shows its blank
and then its answer, and a click on Good is saved.

Drives Debian's ``/usr/bin/chromium`` through Python playwright (never ``playwright
install``). Skips when chromium is missing, unless ``PECOURSE_REQUIRE_BROWSER=1`` (CI), in
which case a missing browser is a failure.
"""

import json
import os
import secrets
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from pecourse.flashcards.deck import load_deck

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
QUIZ_CELL = "from pecourse.flashcards import quiz\nquiz(3)"


def _require_browser():
    if CHROMIUM.exists():
        return
    if os.environ.get("PECOURSE_REQUIRE_BROWSER") == "1":
        pytest.fail(
            f"PECOURSE_REQUIRE_BROWSER=1 but {CHROMIUM} is missing (apt-get install chromium)"
        )
    pytest.skip(f"{CHROMIUM} is not installed")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url, token):
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def _wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except AssertionError:
            raise
        except Exception as exc:  # the server may not be up yet
            last = exc
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last error: {last})")


@pytest.fixture
def lab(tmp_path):
    _require_browser()
    root, data = tmp_path / "root", tmp_path / "data"
    root.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(QUIZ_CELL)]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, root / "quiz.ipynb")
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(
        os.environ, PECOURSE_DATA_DIR=str(data), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime")
    )
    jupyter = Path(sys.executable).with_name("jupyter")
    log = open(tmp_path / "lab.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(
        [
            str(jupyter), "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
            f"--ServerApp.token={token}", f"--ServerApp.root_dir={root}",
            f"--LabApp.user_settings_dir={tmp_path / 'settings'}",
            f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}",
            "--LabApp.news_url=None", "--allow-root",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:

        def up():
            if proc.poll() is not None:
                raise AssertionError(
                    "jupyter lab exited: "
                    + (tmp_path / "lab.log").read_text(errors="replace")[-2000:]
                )
            return _get(f"{base}/api/status", token)

        _wait_for(up, 60, "the Jupyter server")
        yield base, token, data
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        if proc.returncode not in (0, -15, 143, None):
            print((tmp_path / "lab.log").read_text(errors="replace")[-3000:])


def _kernel_idle(base, token):
    sessions = _get(f"{base}/api/sessions", token)
    if not sessions:
        return False
    kernel = _get(f"{base}/api/kernels/{sessions[0]['kernel']['id']}", token)
    return kernel["execution_state"] == "idle"


@pytest.mark.slow
def test_quiz_in_jupyterlab_saves_a_review(lab):
    sync_api = pytest.importorskip("playwright.sync_api")
    base, token, data = lab
    alibi = load_deck(3)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(60_000)
            page.goto(f"{base}/lab/tree/quiz.ipynb?token={token}")
            page.locator(".jp-Notebook .jp-Cell").first.wait_for()
            _wait_for(lambda: _kernel_idle(base, token), 90, "an idle kernel")
            page.locator(".jp-Notebook .jp-Cell .cm-content").first.click()
            page.keyboard.press("Shift+Enter")
            show = page.get_by_role("button", name="Show answer")
            show.wait_for()
            output = page.locator(".jp-OutputArea").first
            assert "concept 03" in output.inner_text()
            # The first ALiBi card is a cloze card: its deletion shows as a blank ...
            assert alibi[0].is_cloze
            assert "[…]" in output.inner_text() and "{{c1::" not in output.inner_text()
            filled = output.locator(".widget-htmlmath strong").first  # in the hidden back
            assert not filled.is_visible()
            show.click()
            # ... and "Show answer" fills it in, marked, with MathJax rendering it.
            filled.wait_for(state="visible")
            # MathJax typesets after the answer shows: wait for it (a bare count() raced it
            # on a loaded machine)
            output.locator(
                ".widget-htmlmath strong mjx-container, .widget-htmlmath strong .MathJax"
            ).first.wait_for(state="attached")
            assert "{{c1::" not in output.inner_text()
            good = page.get_by_role("button", name="Good", exact=True)
            good.wait_for()
            good.click()
            # The next card appears, and the counts move.
            page.get_by_text("Learned 1", exact=False).first.wait_for()
            page.locator(".widget-htmlmath").filter(has_text=alibi[1].topic).first.wait_for()
        finally:
            browser.close()
    conn = sqlite3.connect(data / "flashcards.sqlite3")
    try:
        rows = conn.execute("SELECT card_id, rating FROM review_log").fetchall()
    finally:
        conn.close()
    assert rows == [(alibi[0].id, 3)]


def test_missing_browser_skips_or_fails(monkeypatch, tmp_path):
    monkeypatch.setattr(sys.modules[__name__], "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.delenv("PECOURSE_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception):
        _require_browser()
    monkeypatch.setenv("PECOURSE_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="PECOURSE_REQUIRE_BROWSER=1"):
        _require_browser()
