r"""Position augmentation: train on short inputs with the position ids of long ones.

Place: **the position ids** themselves. These are not schemes but ways of choosing the
integer positions a scheme is fed during training, so that a model trained on windows of
``seq_len`` tokens has already *seen* the ids of a longer context:

* **Randomized positions** (Ruoss et al. 2023, arXiv:2305.16843): draw ``seq_len`` distinct
  positions uniformly from ``[0, max_position)`` and sort them. Order is kept (so relative
  order, and for relative schemes the sign of every offset, is right), but the gaps vary,
  and every position up to ``max_position`` turns up in training.
* **PoSE**, positional skip-wise training (Zhu et al., ICLR 2024, arXiv:2309.10400):
  cut the window into ``num_chunks`` contiguous chunks and shift each chunk's ids by a
  skip ``u_c``, with ``0 = u_0 ≤ u_1 ≤ ... ≤ u_{N-1} ≤ target_len - seq_len``. Inside a
  chunk the ids stay consecutive (the model still sees ordinary local offsets); between
  chunks they jump, so offsets up to ``target_len - 1`` occur.

Both take an optional ``torch.Generator`` (see :func:`pecourse.seed.seed_everything`) so a
run is reproducible.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .._validate import check_int

__all__ = ["randomized_positions", "pose_layout", "pose_position_ids"]


def _check_generator(generator) -> None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator or None, got {type(generator).__name__}"
        )


def randomized_positions(
    seq_len: int, max_position: int, *, generator: torch.Generator | None = None, batch=None
) -> Tensor:
    r"""Sorted distinct positions drawn uniformly from ``[0, max_position)``.

    Ruoss et al. 2023 (arXiv:2305.16843), the randomized positional encoding: for each
    training sequence, sample ``seq_len`` positions without replacement from
    ``{0, ..., L-1}`` (``L = max_position``, much larger than the training length) and sort
    them in increasing order.

    Returns int64 ``[seq_len]``, or ``[batch, seq_len]`` with an independent draw per row
    when ``batch`` is given.
    """
    seq_len = check_int("seq_len", seq_len, minimum=1)
    max_position = check_int("max_position", max_position)
    if max_position < seq_len:
        raise ValueError(
            f"max_position must be >= seq_len ({seq_len}) to draw that many distinct "
            f"positions, got {max_position}"
        )
    _check_generator(generator)
    rows = 1 if batch is None else check_int("batch", batch, minimum=1)
    # A random permutation's first seq_len entries are a uniform sample without replacement.
    draws = [
        torch.randperm(max_position, generator=generator)[:seq_len].sort().values
        for _ in range(rows)
    ]
    out = torch.stack(draws)
    return out[0] if batch is None else out


def pose_layout(chunk_lengths, skips) -> Tensor:
    r"""PoSE position ids for given chunk lengths and skips (the deterministic part).

    Zhu et al. 2024 (arXiv:2309.10400), PoSE's chunked position ids: chunk ``c`` covers tokens
    ``s_c .. s_c + l_c - 1`` of the window (``s_c = l_0 + ... + l_{c-1}``) and gets ids
    ``s_c + u_c, ..., s_c + u_c + l_c - 1``. Returns int64 ``[sum(chunk_lengths)]``.
    """
    lengths = [check_int(f"chunk_lengths[{c}]", n, minimum=1) for c, n in enumerate(chunk_lengths)]
    if not lengths:
        raise ValueError("chunk_lengths must name at least one chunk, got an empty sequence")
    offsets = [check_int(f"skips[{c}]", u, minimum=0) for c, u in enumerate(skips)]
    if len(offsets) != len(lengths):
        raise ValueError(
            f"skips must have one entry per chunk ({len(lengths)}), got {len(offsets)}"
        )
    if offsets[0] != 0:
        raise ValueError(f"skips[0] must be 0 (the first chunk starts at 0), got {offsets[0]}")
    for c in range(1, len(offsets)):
        if offsets[c] < offsets[c - 1]:
            raise ValueError(
                f"skips must be non-decreasing (ids keep their order), got skips[{c - 1}]="
                f"{offsets[c - 1]} > skips[{c}]={offsets[c]}"
            )
    chunk_of_token = torch.repeat_interleave(
        torch.arange(len(lengths)), torch.tensor(lengths, dtype=torch.long)
    )
    # id(t) = t + u_{chunk(t)}: consecutive inside a chunk, a jump of u_c - u_{c-1} between.
    return torch.arange(sum(lengths)) + torch.tensor(offsets, dtype=torch.long)[chunk_of_token]


def pose_position_ids(
    seq_len: int,
    target_len: int,
    *,
    num_chunks: int = 2,
    generator: torch.Generator | None = None,
) -> Tensor:
    r"""Random PoSE position ids: ``seq_len`` ids, in order, spanning up to ``target_len``.

    Zhu et al. 2024 (arXiv:2309.10400). Chunk lengths come from ``num_chunks - 1``
    distinct cut points drawn uniformly inside the window (every chunk non-empty); skips
    are ``num_chunks - 1`` draws from ``{0, ..., target_len - seq_len}``, sorted, after a
    first skip of 0. So the first chunk starts at id 0, ids rise strictly, and the last is
    at most ``target_len - 1``. ``num_chunks=2`` is what the authors' training script uses;
    that script draws the first chunk's length from ``1..⌈seq_len/2⌉`` only, where this
    function lets the cut fall anywhere in the window.

    Returns int64 ``[seq_len]``.
    """
    seq_len = check_int("seq_len", seq_len, minimum=1)
    target_len = check_int("target_len", target_len)
    if target_len < seq_len:
        raise ValueError(
            f"target_len must be >= seq_len ({seq_len}): PoSE stretches a window to a longer "
            f"target, got {target_len}"
        )
    num_chunks = check_int("num_chunks", num_chunks, minimum=1)
    if num_chunks > seq_len:
        raise ValueError(
            f"num_chunks must be <= seq_len ({seq_len}) so that no chunk is empty, got {num_chunks}"
        )
    _check_generator(generator)
    # Cut points: num_chunks - 1 distinct values in 1..seq_len-1.
    cuts = (torch.randperm(seq_len - 1, generator=generator)[: num_chunks - 1] + 1).sort().values
    edges = torch.cat([torch.tensor([0]), cuts, torch.tensor([seq_len])])
    lengths = (edges[1:] - edges[:-1]).tolist()
    # Skips: 0 = u_0 <= u_1 <= ... <= u_{N-1} <= target_len - seq_len.
    spare = target_len - seq_len
    draws = torch.randint(0, spare + 1, (num_chunks - 1,), generator=generator).sort().values
    skips = [0, *draws.tolist()]
    return pose_layout(lengths, skips)
