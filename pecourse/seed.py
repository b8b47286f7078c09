"""One seeding helper, so notebooks and tests are deterministic."""

from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int = 0) -> torch.Generator:
    """Seed Python, NumPy and torch; return a ``torch.Generator`` seeded the same way."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)
