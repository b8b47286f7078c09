"""The student's process: a Linux sandbox built from namespaces, or a loudly weaker fallback.

Two levels (:func:`probe` tells which one this machine allows):

``namespaces``
    The student's process is PID 1 of its own user, PID, mount, network, IPC and UTS
    namespaces, the recipe of bubblewrap (``bwrap --unshare-all --die-with-parent``) built
    with the same system calls from inside the forked grading process, so that the
    preloaded interpreter (torch, IPython) is kept instead of starting a new one per
    notebook. Its file system is a fresh read-only tmpfs root holding only what Python
    needs (``/usr``, ``/etc``, the interpreter's prefix and ``sys.path`` directories) bound
    read-only, a private ``/tmp`` and home on small tmpfs, ``/dev/null`` and friends, and a
    ``/proc`` that shows its own processes only; the course repository (``solutions/``,
    the package's reference code, the grader), the submissions, the gradebook and every
    other job's files simply do not exist in it. As root the namespace maps its root to a
    fresh unprivileged uid (one per job), so ``RLIMIT_NPROC`` is per job; without root it
    maps the grader's own uid (unprivileged user namespaces must be enabled). Capabilities
    are dropped (bounding set, effective, permitted, ambient; ``SECBIT_NOROOT``) and
    ``no_new_privs`` is set before any student code runs. When PID 1 of a PID namespace
    dies the kernel kills everything in it, so nothing the notebook started (``setsid``,
    double forks) outlives the job.

``none``
    The fallback where namespaces are refused (no user namespaces, a container without
    them, an AppArmor policy, another OS): a new session under the same limits, in a judge
    that is a child subreaper and kills every descendant at the end, as a fresh unprivileged
    uid when the grader is root, else as the grader (which ``grade``'s ``auto`` refuses).
    What it cannot stop: the threat model (:mod:`pecourse.exercises.grade`).

The verdict never depends on the sandbox alone: tests run outside the student's process
(see :mod:`pecourse.exercises._runner`), so the sandbox's job is to keep the notebook from
the answers, from other jobs and from the instructor's files.
"""

from __future__ import annotations

import ctypes
import os
import platform
import resource
import signal
import sys

__all__ = ["NAMESPACES", "NONE", "Plan", "probe", "fork_gate", "enter_student", "SandboxError"]

NAMESPACES = "namespaces"
NONE = "none"

# <linux/sched.h>, <linux/mount.h>, <linux/prctl.h>
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME, MNT_DETACH = 1 << 18, 1 << 21, 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_SECUREBITS = 1, 4, 24, 28
PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = (
    38,
    36,
    47,
    4,
)
# SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP(_LOCKED) | SECBIT_KEEP_CAPS_LOCKED
SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20
CAP_LAST = 63
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

_PIVOT_ROOT = {"x86_64": 155, "amd64": 155, "aarch64": 41, "arm64": 41, "riscv64": 41}

# A fresh uid per job when the grader is root: far from any real account.
UID_BASE = 1_900_000_000
SCRATCH_MB = 64
NPROC = 64  # processes and threads the notebook may have at once
OPEN_FILES = 256  # descriptors per process: with NPROC, at most 16,384 in a job
CGROUP_FS = os.environ.get("PECOURSE_CGROUP_FS", "/sys/fs/cgroup")  # a test's: no cgroups
GRADER_LEAF = "pecourse-grader"  # cgroup v2: the grader's own processes, beside its jobs


class SandboxError(OSError):
    """The sandbox could not be built (the message says which step and why)."""


_libc = None


def _c():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise SandboxError(err, f"{what}: {os.strerror(err)}")


def prctl(option: int, arg: int = 0) -> None:
    _check(
        _c().prctl(
            option, ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)
        ),
        f"prctl({option})",
    )


def unshare(flags: int) -> None:
    _check(_c().unshare(ctypes.c_int(flags)), "unshare")


def _mount(source, target: str, fstype, flags: int, data=None) -> None:
    _check(
        _c().mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


class JobCgroup:
    """The cgroups of one job: what the judge and every process it forks hold together
    counts against one memory limit (shared memory, ``memfd`` and tmpfs pages included),
    one process count and one CPU rate. Each controller is taken from cgroup v2 where its
    root offers it, else from its v1 hierarchy. A v2 cgroup can hand a controller to its
    children only while it holds no process itself, so the grading server first moves its
    own processes into a leaf :data:`GRADER_LEAF` (:func:`prepare_cgroups`); jobs are made
    beside it. ``fs`` and ``table`` (``/proc/self/cgroup``'s text) are there for tests."""

    def __init__(self, name: str, fs: str = CGROUP_FS, table: str | None = None):
        self.folders = {c: f"{base}/{name}" for c, _, base in _own_cgroups(fs, table)}

    def enter(self) -> list[str]:
        """Make the cgroups and move this process into them; return the controllers held
        (none where the machine offers none to this process, or no right to make one)."""
        for controller, folder in list(self.folders.items()):
            try:
                os.makedirs(folder, 0o700, exist_ok=True)  # v2: one folder for all
                if not any(os.path.exists(f"{folder}/{k}") for k, _ in _KNOBS[controller][:2]):
                    raise OSError(f"{controller} not handed to this cgroup")
                _write(folder, "cgroup.procs", os.getpid())
            except OSError:
                self.remove(controller)
                del self.folders[controller]
        return sorted(self.folders)

    def limit(self, memory_mb: int, processes: int, cpus: float) -> None:
        """Memory (swap included where counted), processes and threads, CPU rate."""
        values = {"memory": memory_mb * 2**20, "pids": processes}
        values["cpu"] = max(1000, int(cpus * 100_000))  # microseconds per 100 ms
        for controller, folder in self.folders.items():
            for knob, form in dict(_KNOBS[controller]).items():
                if os.path.exists(f"{folder}/{knob}"):  # the other version's are absent
                    _write(folder, knob, form.format(values[controller]))

    def remove(self, *controllers: str) -> bool:
        """Remove the cgroups once their processes are gone; False while some remain."""
        done = True
        for controller in controllers or list(self.folders):
            try:
                os.rmdir(self.folders[controller])
            except FileNotFoundError:
                pass
            except OSError:
                done = False
        return done


# controller -> (file, value) in cgroup v2 and v1, the first of each version's there always
_KNOBS = {
    "memory": [("memory.max", "{}"), ("memory.limit_in_bytes", "{}")]
    + [("memory.swap.max", "0"), ("memory.memsw.limit_in_bytes", "{}")],
    "pids": [("pids.max", "{}"), ("pids.max", "{}")],
    "cpu": [("cpu.max", "{} 100000"), ("cpu.cfs_quota_us", "{}")],
}


def _write(folder: str, knob: str, value) -> None:
    with open(os.path.join(folder, knob), "w") as f:
        f.write(str(value))


def _own_cgroups(fs: str, table: str | None) -> list[tuple[str, int, str]]:
    """``(controller, version, folder)``: where a job's cgroup of memory, pids and cpu is
    made (beside the grader's leaf on v2, under this process's cgroup on v1)."""
    try:
        if table is None:
            with open("/proc/self/cgroup", encoding="ascii") as f:
                table = f.read()
        unified = fs if os.path.exists(f"{fs}/cgroup.controllers") else fs + "/unified"
        with open(f"{unified}/cgroup.controllers") as f:
            offered = f.read().split()
    except OSError:
        offered = []
    lines = [line.split(":", 2) for line in (table or "").splitlines() if line.count(":") >= 2]
    v1 = {c: path for _, names, path in lines for c in names.split(",") if c}
    v2 = next((path for _, names, path in lines if not names), None)
    found = []
    for c in ("memory", "pids", "cpu"):
        if c in offered and v2 is not None:
            found.append((c, 2, unified + v2.removesuffix("/" + GRADER_LEAF).rstrip("/")))
        elif c in v1:
            found.append((c, 1, f"{fs}/{c}{v1[c].rstrip('/')}"))
    return found


def prepare_cgroups(fs: str = CGROUP_FS, table: str | None = None) -> str:
    """In the grading server, before it forks: on cgroup v2, move this process and its
    ancestors in its cgroup into a leaf :data:`GRADER_LEAF` and hand the controllers to the
    cgroup's children, so that each job can have its own. Refused where the cgroup holds
    any other process (then v2's controllers are not used). Returns what holds, in words."""
    own = _own_cgroups(fs, table)
    v2 = [(c, base) for c, version, base in own if version == 2]
    if v2:
        base, ours, pid = v2[0][1], set(), os.getpid()
        while pid > 1:
            ours.add(pid)
            pid = _parent_of(pid)
        try:
            with open(f"{base}/cgroup.procs") as f:
                members = {int(p) for p in f.read().split()}
            if members - ours:
                raise OSError(f"it holds processes other than the grader's: {len(members)}")
            os.makedirs(f"{base}/{GRADER_LEAF}", exist_ok=True)
            for member in sorted(members):
                _write(f"{base}/{GRADER_LEAF}", "cgroup.procs", member)
            _write(base, "cgroup.subtree_control", " ".join("+" + c for c, _ in v2))
        except (OSError, ValueError) as exc:
            own = [x for x in own if x[1] == 1]
            return f"cgroup v2 {base} not used ({exc}); limits per process only"
    return "job cgroups: " + (", ".join(f"{c} (v{v})" for c, v, _ in own) or "none")


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies (cleared by a change of uid: call after)."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def protect_from_same_uid() -> None:
    """Not dumpable: processes of the same uid can no longer ptrace this one or open its
    ``/proc/PID/fd`` (the fallback's defence of the server's and the judge's pipes)."""
    _try_prctl(PR_SET_DUMPABLE, 0)


def become_subreaper() -> None:
    """Orphans among this process's descendants are re-parented here, not to init."""
    _try_prctl(PR_SET_CHILD_SUBREAPER, 1)


def _try_prctl(option: int, arg: int) -> None:
    try:
        prctl(option, arg)
    except (SandboxError, AttributeError):  # not Linux, or not allowed: the docs say so
        pass


def kill(pid: int | None, group: bool = False) -> None:
    """SIGKILL ``pid`` (its process group with ``group``) if it is still there."""
    if pid:
        try:
            (os.killpg if group else os.kill)(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class Plan:
    """What the student's process may see, decided by the trusted side before the fork.

    ``binds``: host directories bound read-only at the same path; ``hide``: paths inside
    them replaced by an empty read-only tmpfs (``solutions/`` when it lies under a bound
    directory, the grader's own code); ``uid``: the host uid the sandbox runs as.
    """

    def __init__(
        self, *, protected: list[str], allow_paths: list[str] = (), uid: int | None = None
    ):
        self.protected = [os.path.realpath(p) for p in protected if p]
        self.uid = uid
        candidates = ["/usr", "/etc"]
        candidates += [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]
        candidates += [p for p in sys.path if p and os.path.isabs(p)]
        candidates += list(allow_paths)
        binds: list[str] = []
        for path in candidates:
            real = os.path.realpath(path)
            if not os.path.isdir(real) or real == "/":
                continue
            # A directory that contains a protected path is bound only if it is a system
            # directory; the repository root itself (on sys.path for ``-m``) never is.
            if any(_inside(q, real) for q in self.protected) and real not in (
                "/usr",
                "/etc",
                "/opt",
            ):
                if not any(_inside(real, a) for a in allow_paths):
                    continue
            if any(_inside(real, b) for b in binds):
                continue
            binds = [b for b in binds if not _inside(b, real)] + [real]
        self.binds = sorted(binds)
        self.hide = sorted(
            {q for q in self.protected for b in self.binds if _inside(q, b) and os.path.exists(q)}
        )
        system = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
        self.links = [p for p in system if os.path.islink(p)]
        self.binds += [p for p in system if os.path.isdir(p) and p not in self.links + self.binds]


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def job_uid() -> int | None:
    """A fresh unprivileged uid for this job when running as root, else None (keep ours)."""
    if os.geteuid() != 0:
        return None
    return UID_BASE + os.getpid()


def others_can_run_python() -> bool:
    """Whether a uid that is not ours can read this Python installation (the fallback's fresh
    uid must import modules lazily; a pyenv under a 0700 /root is out of its reach)."""
    for prefix in {sys.prefix, sys.base_prefix}:
        path = os.path.realpath(prefix)
        while True:
            try:
                mode = os.stat(path).st_mode
            except OSError:
                return False
            if not mode & 0o001:
                return False
            if path == "/":
                break
            path = os.path.dirname(path)
    return True


# --------------------------------------------------------------------------- namespaces


def fork_gate(uid: int | None, student, *, close=(), close_after_fork=()) -> tuple:
    """Fork a gate into new user and PID namespaces and, from it, the student's process
    (PID 1 there), which runs ``student()`` and then exits. This process, still in the
    initial namespaces, writes the gate's id maps (:func:`write_id_maps`). The gate exits
    with the student's status (killed by signal n: 128 + n). ``close``: descriptors the gate
    closes first; ``close_after_fork``: those it closes once the student is forked.

    Returns ``(gate pid, student pid)``, or ``(gate pid, why the sandbox failed)``."""
    maps_r, maps_w = os.pipe()
    go_r, go_w = os.pipe()
    pid_r, pid_w = os.pipe()
    gate = os.fork()
    if gate == 0:
        code = 70
        try:
            for fd in (maps_r, go_w, pid_r, *close):
                os.close(fd)
            # new user and PID namespaces: the judge, still in the initial ones, writes the
            # id maps; the gate's first child is PID 1 of the new PID namespace
            unshare(CLONE_NEWUSER | CLONE_NEWPID)
            os.write(maps_w, b"m")
            if os.read(go_r, 1) != b"g":
                raise SandboxError(0, "the id maps were not written")
            die_with_parent()
            child = os.fork()
            if child == 0:
                try:
                    student()
                finally:
                    os._exit(71)
            for fd in close_after_fork:
                os.close(fd)
            os.write(pid_w, str(child).encode())
            _, status = os.waitpid(child, 0)
            code = os.waitstatus_to_exitcode(status)
            code = code if code >= 0 else 128 - code
        except BaseException as exc:  # noqa: BLE001 - tell the parent why
            try:
                os.write(pid_w, f"{type(exc).__name__}: {exc}".encode()[:300])
            except OSError:
                pass
        finally:
            os._exit(code)
    for fd in (maps_w, go_r, pid_w):
        os.close(fd)
    try:
        if os.read(maps_r, 1) == b"m":
            try:
                write_id_maps(gate, uid)
            except OSError as exc:
                os.write(go_w, b"x")
                return gate, f"error writing the user namespace's id maps: {exc}"
            os.write(go_w, b"g")
        answer = os.read(pid_r, 300).decode(errors="replace")
    finally:
        for fd in (maps_r, go_w, pid_r):
            os.close(fd)
    return gate, int(answer) if answer.isdigit() else (answer or "the gate process died")


def write_id_maps(pid: int, uid: int | None) -> None:
    """The judge's half of :func:`enter_gate`: root inside maps to ``uid`` (or to us)."""
    maps = [("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {uid} 1")]
    if uid is None:  # unprivileged: only our own ids, and setgroups must be denied first
        maps = [("setgroups", "deny"), ("uid_map", f"0 {os.geteuid()} 1")]
        maps += [("gid_map", f"0 {os.getegid()} 1")]
    for name, text in maps:
        _write(f"/proc/{pid}", name, text)


def enter_student(plan: Plan, home_files: dict[str, bytes]) -> None:
    """In the student's process (PID 1 of the gate's namespaces): build the root, pivot into
    it, drop every privilege. ``home_files`` are written into the private home (the copy of
    the notebook)."""
    unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Open what will be bound while this process still has the judge's host identity (as
    # root, /root/.pyenv under a 0700 home is searchable only so); the descriptors refer
    # to this new mount namespace, so they can be bound through /proc/self/fd once the
    # process has become the namespace's root (needed to create files on its tmpfs).
    sources = [(os.open(p, os.O_PATH | os.O_DIRECTORY), p) for p in plan.binds]
    if plan.uid is not None:  # root mapped to the job's uid: become it inside
        os.setgroups([])
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
    # The new root is a tmpfs mounted over /tmp of this private mount namespace (a
    # directory every system has and anyone may search); the host's /tmp is untouched.
    root = "/tmp" if os.path.isdir("/tmp") else "/mnt"
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    # The private scratch folders first, the read-only binds after: a course (or its venv)
    # that lives under /tmp is then bound *inside* the private /tmp, not hidden beneath it.
    _scratch(root + "/tmp", "1777")
    _scratch(root + "/home/student", "700")
    for fd, path in sources:
        _bind_readonly(f"/proc/self/fd/{fd}", root + path)
        os.close(fd)
    for path in plan.hide:
        target = root + path
        if os.path.isdir(target):
            _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=555")
    for link in plan.links:
        os.symlink(os.readlink(link), root + link)
    os.makedirs(root + "/dev")
    _mount("tmpfs", root + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=755")
    for name in ("null", "zero", "full", "random", "urandom"):
        node = root + "/dev/" + name
        open(node, "w").close()
        _mount("/dev/" + name, node, None, MS_BIND)
    for name, target in zip(("fd", "stdin", "stdout", "stderr"), ("", "/0", "/1", "/2")):
        os.symlink("/proc/self/fd" + target, root + "/dev/" + name)
    _scratch(root + "/dev/shm", "1777")
    for name, data in home_files.items():
        with open(root + "/home/student/" + name, "wb") as f:
            f.write(data)
    # procfs is mounted from inside the new PID namespace, before the old root goes away
    # (the kernel allows a new proc mount only while a full one is visible).
    os.makedirs(root + "/proc")
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    number = _PIVOT_ROOT.get(platform.machine().lower())
    if number is None:
        raise SandboxError(0, f"pivot_root: unknown system call number on {platform.machine()}")
    os.chdir(root)
    _check(_c().syscall(ctypes.c_long(number), b".", b"."), "pivot_root")
    _check(_c().umount2(b".", ctypes.c_int(MNT_DETACH)), "detach the old root")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir("/home/student")
    # No namespace of its own inside the job: a nested user namespace would give the
    # notebook the capabilities to mount a tmpfs outside every limit. The limits are the
    # kernel's per-user-namespace counts (Linux 4.9+), set while this process may still.
    for kind in ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup"):
        with open(f"/proc/sys/user/max_{kind}_namespaces", "w") as f:
            f.write("0")
    _drop_capabilities()


def _scratch(target: str, mode: str) -> None:
    """A private, writable tmpfs of SCRATCH_MB at ``target`` (the student's /tmp, home, shm)."""
    os.makedirs(target, exist_ok=True)
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={SCRATCH_MB}m,mode={mode}")


def _bind_readonly(source: str, target: str) -> None:
    os.makedirs(target, exist_ok=True)
    _mount(source, target, None, MS_BIND | MS_REC)
    # A remount inside a user namespace must keep the flags the original mount has locked.
    flags, st = os.statvfs(target).f_flag, os
    pairs = [(st.ST_NOSUID, MS_NOSUID), (st.ST_NODEV, MS_NODEV), (st.ST_NOEXEC, MS_NOEXEC)]
    pairs += [(st.ST_NOATIME, MS_NOATIME), (st.ST_NODIRATIME, MS_NODIRATIME)]
    keep = sum(ms for st, ms in [*pairs, (os.ST_RELATIME, MS_RELATIME)] if flags & st)
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | keep)


def _drop_capabilities() -> None:
    """Root inside the user namespace keeps nothing: no capability now or after an exec."""
    prctl(PR_SET_SECUREBITS, SECUREBITS)
    for cap in range(CAP_LAST + 1):
        if _c().prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) != 0:
            if ctypes.get_errno() == 22:  # EINVAL: past the kernel's last capability
                break
            _check(-1, f"drop capability {cap} from the bounding set")
    _c().prctl(PR_CAP_AMBIENT, ctypes.c_ulong(PR_CAP_AMBIENT_CLEAR_ALL), 0, 0, 0)
    # capset(2): header {version, pid 0 = this process}, two sets of {effective,
    # permitted, inheritable} all zero
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    _check(_c().capset(header, (ctypes.c_uint32 * 6)()), "capset")
    prctl(PR_SET_NO_NEW_PRIVS, 1)


# --------------------------------------------------------------------------- fallback


def enter_fallback(workdir: str, scratch: str, uid: int | None) -> None:
    """No namespaces: a new session in a private working directory; as root, a fresh uid
    (which owns the working and scratch directories and nothing else)."""
    os.setsid()
    os.chdir(workdir)  # before the uid changes: the folders above are the grader's, 0700
    if uid is not None:
        for folder in (workdir, scratch):
            for path in [folder] + [os.path.join(folder, n) for n in os.listdir(folder)]:
                os.chown(path, uid, uid)
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    _try_prctl(PR_SET_NO_NEW_PRIVS, 1)


def set_limits(memory_mb: int, cpu_seconds: float, *, own_processes: int = 0) -> None:
    """Address space on top of what is mapped now, CPU seconds, no core files, 64 MB files,
    :data:`OPEN_FILES` descriptors, and a cap on processes (``own_processes``: processes
    this uid already has, for the fallback)."""
    limit_memory(memory_mb)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    r = resource
    nproc, cpu = own_processes + NPROC, max(1, int(cpu_seconds))
    fixed = [(r.RLIMIT_CORE, 0), (r.RLIMIT_FSIZE, 64 * 2**20), (r.RLIMIT_NOFILE, OPEN_FILES)]
    for kind, value in [*fixed, (r.RLIMIT_NPROC, nproc), (r.RLIMIT_CPU, cpu)]:
        resource.setrlimit(kind, (value, value))


def limit_memory(memory_mb: int) -> None:
    """``RLIMIT_AS``: ``memory_mb`` of address space on top of what is mapped now."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            mapped = next((int(n.split()[1]) for n in f if n.startswith("VmSize:")), 0) * 1024
    except OSError:  # no /proc: not Linux
        mapped = 0
    limit = mapped + memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def processes_of(uid: int) -> int:
    """How many processes (threads not counted) ``uid`` has now, from /proc."""
    count = 0
    for pid in _pids():
        try:
            count += os.stat(f"/proc/{pid}").st_uid == uid
        except OSError:
            pass
    return count


def kill_descendants(pid: int, rounds: int = 200) -> None:
    """SIGKILL every process whose parent is ``pid`` (a subreaper, so orphans land here),
    reap them, and repeat until none is left."""
    for _ in range(rounds):
        children = [n for n in _pids() if _parent_of(n) == pid]
        if not children:
            return
        for child in children:
            kill(child)
        for child in children:
            try:
                os.waitpid(child, 0)
            except ChildProcessError:
                pass


def _pids() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:  # no /proc: not Linux
        return []


def _parent_of(pid: int) -> int:
    """``pid``'s parent, 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return 0
    # the command name may hold spaces and parentheses: the fields follow the last ")"
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else 0


# --------------------------------------------------------------------------- probe


def probe(protected: list[str], *, allow_paths: list[str] = (), check=None) -> tuple[str, str]:
    """Try to build a namespace sandbox in a throw-away child; return (level, detail).

    ``allow_paths`` go to the :class:`Plan`; ``check``, if given, runs inside the finished
    sandbox (a test's way to ask what a student's process can see) and fails the probe by
    raising."""
    if sys.platform != "linux":
        return NONE, f"no Linux namespaces on {sys.platform}"
    read_fd, write_fd = os.pipe()
    uid = job_uid()
    plan = Plan(protected=protected, allow_paths=allow_paths, uid=uid)

    def student():
        try:
            enter_student(plan, {})
            if check is not None:
                check()
            os.write(write_fd, b"ok " + str(os.getpid()).encode())
        except BaseException as exc:  # noqa: BLE001 - report whatever failed
            os.write(write_fd, f"error {exc}".encode()[:400])

    gate, pid = fork_gate(uid, student, close=(read_fd,))
    os.close(write_fd)
    try:
        detail = pid if isinstance(pid, str) else os.read(read_fd, 400).decode(errors="replace")
        detail = detail or "the probe did not answer"
    finally:
        os.waitpid(gate, 0)
        os.close(read_fd)
    if detail == "ok 1":
        who = f"a fresh uid per job ({UID_BASE}+)" if uid is not None else f"uid {os.geteuid()}"
        return NAMESPACES, f"user, PID, mount, network, IPC and UTS namespaces; {who}"
    return NONE, detail.removeprefix("error ")
