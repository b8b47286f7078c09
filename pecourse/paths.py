"""Where learner data (flashcard progress, grades) is stored.

``PECOURSE_DATA_DIR`` overrides the default (tests and nbval point it at a temporary
directory); otherwise it is the platform's user data directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_data_dir

ENV_VAR = "PECOURSE_DATA_DIR"


def data_dir(create: bool = True) -> Path:
    """The directory that holds the learner's progress databases."""
    override = os.environ.get(ENV_VAR)
    path = (
        Path(override).expanduser()
        if override
        else Path(user_data_dir("pecourse", appauthor=False))
    )
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path
