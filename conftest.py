"""Test set-up for the whole suite (tests/ and the notebooks under nbval; this file sits at the
root so that it applies to both): learner data goes to a temporary directory, never the user's;
under pytest-xdist (``make test`` runs one worker per core), one thread per worker, one worker
per notebook or test file, and the long units first; each test starts torch's generator from a
seed of its own name."""

import os
import tempfile
import zlib

import pytest

# Set before any test (and before nbval starts notebook kernels, which inherit it), so
# flashcard progress and grades written during tests never touch the real data directory.
_DATA_DIR = tempfile.mkdtemp(prefix="pecourse-test-data-")
os.environ["PECOURSE_DATA_DIR"] = _DATA_DIR

# `make test` runs one xdist worker per core. Each worker, and every notebook kernel or
# subprocess it starts (they inherit the environment), then computes on one thread, and idle
# OpenMP threads sleep instead of spinning: two workers with two spinning threads each on two
# cores slow each other down by more than the second worker gains. (A test that needs two
# threads, such as the C kernel's thread pool, sets them itself.)
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch

    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _torch_seeded_by_test_name(request):
    """Each test starts torch's global generator from a seed of its own name, so the numbers
    it draws do not depend on which tests ran before it in its worker (xdist hands out files
    in an order that changes from run to run, so a draw that fails a test on one run would
    not come back on the next)."""
    import torch

    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))


# Units of work for xdist: a test file or a notebook, except where files share session
# fixtures (tests/exercises grades one synthetic class for all of its files). Units are handed
# out in collection order, one at a time to whichever worker is free, so the long ones are
# collected first (longest first keeps the two workers finishing together): the exercises,
# then the notebooks, the book, the model; then everything else in its usual order.
_SHARED = ("tests/exercises",)
_FIRST = ("tests/exercises", "notebooks", "tests/book", "tests/model")


def _unit(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return next((shared for shared in _SHARED if path.startswith(shared + "/")), path)


def _rank(nodeid: str) -> int:
    return next((i for i, first in enumerate(_FIRST) if nodeid.startswith(first)), len(_FIRST))


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: _rank(item.nodeid))  # stable: file order kept within a rank


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # plain pytest: nothing to schedule
    pass
else:

    class _Units(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    def pytest_xdist_make_scheduler(config, log):
        config.option.loadscopereorder = False  # keep the longest-first order above
        return _Units(config, log)
