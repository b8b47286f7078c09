"""Shared test set-up: learner data goes to a temporary directory, never the user's."""

import os
import tempfile

# Set before any test (and before nbval starts notebook kernels, which inherit it), so
# flashcard progress and grades written during tests never touch the real data directory.
_DATA_DIR = tempfile.mkdtemp(prefix="pecourse-test-data-")
os.environ["PECOURSE_DATA_DIR"] = _DATA_DIR
