r"""RoPE in more than one dimension: axial 2D/3D RoPE for images and video, and M-RoPE.

A token of an image has two coordinates (row, column); a token of a video has three (frame,
row, column). RoPE's key property — ``⟨R_m q, R_n k⟩`` depends only on ``n - m``
(arXiv:2104.09864, eq. 16) — extends to vectors of coordinates if each coordinate gets its
own, independent set of rotation planes:

* **Axial RoPE** (Heo et al. 2024, "Rotary Position Embedding for Vision Transformer",
  arXiv:2403.13298, "RoPE-Axial"; the layout of lucidrains' rotary-embedding-torch
  ``get_axial_freqs``): split the head dimension into ``n_axes`` contiguous chunks of
  ``d / n_axes``; chunk ``a`` is ordinary RoPE driven by coordinate ``a``. The score then
  depends on ``(Δrow, Δcol)`` — a 2D relative position. Chunk sizes must be even (pairs).
  (Heo et al.'s own code, naver-ai/rope-vit, also uses contiguous halves but with base
  100, and gives the first half to the column (x) coordinate; here coordinate 0 is the
  row, as :func:`grid_positions` orders them.)
* **M-RoPE** (Qwen2-VL, Wang et al. 2024, arXiv:2409.12191, §2.1): keep transformers'
  ``"half"`` pairing over the *whole* head, but hand the ``d/2`` frequencies out in three
  contiguous *sections* (``mrope_section``, e.g. ``[16, 24, 24]`` for ``d = 128``): section 0
  is rotated by the temporal id, section 1 by the height id, section 2 by the width id. Text
  tokens get the same id on all three axes, so on text M-RoPE *is* 1D RoPE.
  ``layout="interleaved"`` deals the frequencies out in turn instead (t, h, w, t, h, w, …),
  as transformers' Qwen3-VL does (``Qwen3VLTextRotaryEmbedding``, transformers 5.24), so
  every axis gets fast and slow frequencies.

The angle tables and the rotation are the rotary core's
(:mod:`pecourse.positions.rotary`), with its numerics; every function and scheme that
rotates takes ``backend=`` (:class:`~pecourse.positions.rotary.Rotary`) to run them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from .._validate import (
    check_base,
    check_choice,
    check_even,
    check_float,
    check_int,
    check_positions,
    check_tensor,
)
from ..attention import PositionScheme
from .rotary import (
    PAIRINGS,
    REFERENCE,
    Rotary,
    _check_backend,
    _check_inv_freq,
    _check_positions_shape,
    _check_x,
    compute_dtype,
    rope_frequencies,
)

__all__ = [
    "grid_positions",
    "pixel_coordinates",
    "axial_inv_freq",
    "pixel_inv_freq",
    "apply_axial_rope",
    "AxialRoPE",
    "MROPE_LAYOUTS",
    "MROPE_ADVANCES",
    "mrope_axis_of",
    "mrope_cos_sin",
    "apply_mrope",
    "mrope_position_ids",
    "MRoPE",
]


# --- coordinates --------------------------------------------------------------------------


def _check_sizes(sizes) -> list[int]:
    if not sizes:
        raise ValueError("sizes must name at least one axis, e.g. grid_positions(height, width)")
    return [check_int(f"sizes[{i}]", s, minimum=1) for i, s in enumerate(sizes)]


def grid_positions(*sizes: int, device=None) -> Tensor:
    r"""Integer coordinates of every cell of a grid, in row-major (raster) order.

    ``grid_positions(height, width)`` -> long ``[2, height*width]`` with row ``(r, c)`` for
    token ``r * width + c`` — the order in which a ViT flattens its patches;
    ``grid_positions(frames, height, width)`` -> ``[3, frames*height*width]`` (frame, row,
    column), and so on for any number of axes. Feed it to :func:`apply_axial_rope`.
    """
    sizes = _check_sizes(sizes)
    axes = [torch.arange(s, device=device) for s in sizes]
    grids = torch.meshgrid(*axes, indexing="ij")  # last axis varies fastest: raster order
    return torch.stack([g.reshape(-1) for g in grids])


def pixel_coordinates(*sizes: int, dtype=torch.float64, device=None) -> Tensor:
    r"""Normalised coordinates in ``[-1, 1]`` for every cell of a grid, row-major order.

    Axis ``a`` of size ``n`` takes the values ``linspace(-1, 1, n)``, so an image's corners
    sit at ±1 whatever its resolution (rotary-embedding-torch's ``freqs_for="pixel"``, used
    with :func:`pixel_inv_freq`). Returns ``[n_axes, prod(sizes)]`` in ``dtype``.
    """
    sizes = _check_sizes(sizes)
    axes = [torch.linspace(-1.0, 1.0, s, dtype=dtype, device=device) for s in sizes]
    grids = torch.meshgrid(*axes, indexing="ij")
    return torch.stack([g.reshape(-1) for g in grids])


def _axis_dim(head_dim: int, n_axes: int) -> int:
    head_dim = check_even("head_dim", head_dim)
    n_axes = check_int("n_axes", n_axes, minimum=1)
    if head_dim % n_axes or (head_dim // n_axes) % 2:
        raise ValueError(
            f"head_dim ({head_dim}) must split into n_axes ({n_axes}) chunks of an even size "
            f"(each chunk rotates pairs); use a head_dim divisible by {2 * n_axes}"
        )
    return head_dim // n_axes


def axial_inv_freq(head_dim: int, n_axes: int, base: float = 10000.0) -> Tensor:
    r"""Per-axis RoPE frequencies ``θ_i = base^{-2i/D}`` with ``D = head_dim / n_axes``.

    Every axis uses the same ``[D/2]`` float64 frequencies (arXiv:2403.13298, RoPE-Axial;
    rotary-embedding-torch ``RotaryEmbedding(D, freqs_for="lang")``; Heo et al.'s code
    uses ``base=100``). Returns float64 ``[D/2]``.
    """
    return rope_frequencies(_axis_dim(head_dim, n_axes), check_base(base))


def pixel_inv_freq(axis_dim: int, max_freq: float = 10.0) -> Tensor:
    r"""Frequencies for normalised pixel coordinates: ``π · linspace(1, max_freq/2, D/2)``.

    ``axis_dim`` is ``D``, the size of one axis' chunk. Used with
    :func:`pixel_coordinates` in ``[-1, 1]``: the slowest pair turns by ±π across the image,
    the fastest by ``±π·max_freq/2`` (rotary-embedding-torch ``freqs_for="pixel"``, after
    Perceiver's Fourier features, arXiv:2103.03206). Returns float64 ``[D/2]``.
    """
    axis_dim = check_even("axis_dim", axis_dim)
    max_freq = check_float("max_freq", max_freq, minimum=2.0)
    return torch.linspace(1.0, max_freq / 2, axis_dim // 2, dtype=torch.float64) * math.pi


def apply_axial_rope(
    x: Tensor,
    coords: Tensor,
    *,
    inv_freq: Tensor | None = None,
    base: float = 10000.0,
    pairing: str = "interleaved",
    backend: Rotary = REFERENCE,
) -> Tensor:
    r"""Axial RoPE: chunk ``a`` of the head rotated by coordinate ``a`` (arXiv:2403.13298, RoPE-Axial).

    ``x`` ``[batch, heads, seq, head_dim]``; ``coords`` ``[n_axes, seq]`` or
    ``[n_axes, batch, seq]`` — integers from :func:`grid_positions` or reals from
    :func:`pixel_coordinates`. ``head_dim`` is split into ``n_axes`` contiguous chunks of
    ``D = head_dim / n_axes``; for a token at ``(c_0, c_1, …)``, pair ``i`` of chunk ``a`` turns
    by ``c_a · θ_i``. ``inv_freq`` is ``[D/2]`` (shared by the axes; default
    :func:`axial_inv_freq`) or ``[n_axes, D/2]``. ``pairing`` applies *within* each chunk;
    the default ``"interleaved"`` is rotary-embedding-torch's layout, which this matches
    to float32 round-off. Returns ``x``'s shape and dtype.
    """
    _check_x("x", x)
    check_choice("pairing", pairing, PAIRINGS)
    backend = _check_backend(backend)
    check_tensor("coords", coords, ndim=(2, 3))
    if coords.is_complex() or coords.dtype == torch.bool:
        raise TypeError(f"coords must be integer or real coordinates, got dtype {coords.dtype}")
    n_axes = coords.shape[0]
    _check_positions_shape("coords", coords, x, lead="n_axes, ")
    if coords.is_floating_point() and not torch.isfinite(coords).all():
        raise ValueError("coords must be finite")
    d_axis = _axis_dim(x.shape[-1], n_axes)
    if inv_freq is None:
        inv_freq = rope_frequencies(d_axis, check_base(base))
    check_tensor("inv_freq", inv_freq, ndim=(1, 2), floating=True)
    if inv_freq.ndim == 1:
        inv_freq = inv_freq.expand(n_axes, -1)
    if tuple(inv_freq.shape) != (n_axes, d_axis // 2):
        raise ValueError(
            f"inv_freq must be [{d_axis // 2}] or [n_axes={n_axes}, {d_axis // 2}] (one "
            f"frequency per pair of a {d_axis}-dim chunk), got shape {tuple(inv_freq.shape)}"
        )
    chunks = []
    for a in range(n_axes):  # chunk a turns by c_a · θ_i (angles in float64)
        table = backend.cos_sin(coords[a].to(x.device), inv_freq[a], 1.0, dtype=compute_dtype(x))
        chunk = x[..., a * d_axis : (a + 1) * d_axis]
        chunks.append(backend.rotate_pairs(chunk, *table, pairing=pairing))
    return torch.cat(chunks, dim=-1)


class AxialRoPE(PositionScheme):
    r"""Axial 2D/3D RoPE as a scheme (arXiv:2403.13298, RoPE-Axial): see :func:`apply_axial_rope`.

    ``freqs_for="lang"`` uses :func:`axial_inv_freq` with integer coordinates; ``"pixel"`` uses
    :func:`pixel_inv_freq` with coordinates in ``[-1, 1]``.

    Positions passed to the hooks are *coordinates* ``[n_axes, seq]`` or
    ``[n_axes, batch, seq]`` (:func:`grid_positions` / :func:`pixel_coordinates`). When
    ``grid=(height, width)`` (or three sizes) is given, 1-D token indices ``[seq]`` are also
    accepted and unravelled in raster order (normalised to ``[-1, 1]`` for ``"pixel"``), so
    the default positions of :func:`pecourse.attention.attention` work for one image.
    ``rotate`` returns q/k with their shapes and dtypes.
    """

    def __init__(
        self,
        head_dim: int,
        n_axes: int = 2,
        *,
        base: float = 10000.0,
        pairing: str = "interleaved",
        freqs_for: str = "lang",
        max_freq: float = 10.0,
        grid: Sequence[int] | None = None,
        backend: Rotary = REFERENCE,
    ):
        super().__init__()
        self.backend = _check_backend(backend)
        self.axis_dim = _axis_dim(head_dim, n_axes)
        self.head_dim, self.n_axes = head_dim, n_axes
        self.pairing = check_choice("pairing", pairing, PAIRINGS)
        self.freqs_for = check_choice("freqs_for", freqs_for, ("lang", "pixel"))
        if freqs_for == "lang":
            self.inv_freq = rope_frequencies(self.axis_dim, check_base(base))
        else:
            self.inv_freq = pixel_inv_freq(self.axis_dim, max_freq)
        self.grid = None
        if grid is not None:
            grid = tuple(_check_sizes(tuple(grid)))
            if len(grid) != n_axes:
                raise ValueError(f"grid must have n_axes={n_axes} sizes, got {grid}")
            self.grid = grid

    def coordinates(self, name: str, positions: Tensor) -> Tensor:
        """Coordinates ``[n_axes, ...]`` for hook positions (see the class docstring)."""
        check_tensor(name, positions)
        if positions.ndim == 1:
            if self.grid is None:
                raise ValueError(
                    f"{name} are 1-D token indices, but AxialRoPE needs coordinates "
                    f"[n_axes={self.n_axes}, seq] (grid_positions(...)) unless it was built "
                    "with grid=(sizes...)"
                )
            idx = check_positions(name, positions, ndim=(1,), limit=math.prod(self.grid))
            coords = torch.stack(torch.unravel_index(idx, self.grid))
            if self.freqs_for == "pixel":  # index k of n -> -1 + 2k/(n-1), linspace(-1, 1, n)
                size = torch.tensor(self.grid, dtype=torch.float64, device=idx.device)[:, None]
                coords = torch.where(size > 1, -1 + 2 * coords / (size - 1).clamp(min=1), -1.0)
            return coords
        if positions.ndim not in (2, 3) or positions.shape[0] != self.n_axes:
            raise ValueError(
                f"{name} must be coordinates [n_axes={self.n_axes}, seq] or "
                f"[n_axes, batch, seq], got shape {tuple(positions.shape)}"
            )
        return positions

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        kw = dict(inv_freq=self.inv_freq, pairing=self.pairing, backend=self.backend)
        q = apply_axial_rope(q, self.coordinates("q_positions", q_positions), **kw)
        k = apply_axial_rope(k, self.coordinates("k_positions", k_positions), **kw)
        return q, k

    def extra_repr(self) -> str:
        return (
            f"head_dim={self.head_dim}, n_axes={self.n_axes}, pairing={self.pairing!r}, "
            f"freqs_for={self.freqs_for!r}, grid={self.grid}"
        )


# --- M-RoPE (Qwen2-VL) ----------------------------------------------------------------------


def _check_sections(mrope_section, half: int | None) -> list[int]:
    if isinstance(mrope_section, (str, bytes)) or not isinstance(mrope_section, Sequence):
        raise TypeError(
            f"mrope_section must be a sequence of three ints (temporal, height, width), got "
            f"{mrope_section!r}"
        )
    sections = [check_int(f"mrope_section[{i}]", s, minimum=1) for i, s in enumerate(mrope_section)]
    if len(sections) != 3:
        raise ValueError(
            f"mrope_section must have 3 sizes (temporal, height, width), got {sections}"
        )
    if half is not None and sum(sections) != half:
        raise ValueError(
            f"mrope_section {sections} sums to {sum(sections)}, but must sum to head_dim/2 = "
            f"{half} (one frequency per rotated pair)"
        )
    return sections


def _check_mrope_positions(positions: Tensor) -> Tensor:
    positions = check_positions("positions", positions, ndim=(3,))
    if positions.shape[0] != 3:
        raise ValueError(
            f"positions must be [3, batch, seq] (temporal, height, width ids), got shape "
            f"{tuple(positions.shape)}"
        )
    return positions


#: How M-RoPE hands its frequencies to the (temporal, height, width) axes.
MROPE_LAYOUTS = ("sections", "interleaved")


def mrope_axis_of(mrope_section: Sequence[int], layout: str = "sections") -> Tensor:
    r"""Which axis (0 temporal, 1 height, 2 width) drives each of M-RoPE's ``d/2`` frequencies.

    ``layout="sections"`` (Qwen2-VL, arXiv:2409.12191): contiguous blocks,
    ``[0]*s0 + [1]*s1 + [2]*s2``. ``layout="interleaved"`` (transformers' Qwen3-VL,
    ``Qwen3VLTextRotaryEmbedding.recomposition_frequencies``, transformers 5.24): frequency
    ``i`` follows height if ``i % 3 == 1`` and ``i < 3·s1``, width if ``i % 3 == 2`` and
    ``i < 3·s2``, time otherwise — so each axis gets frequencies from the whole ladder.
    Returns long ``[d/2]``. Refuses sections that are not three positive ints, an unknown
    layout, and interleaved sections whose counts the pattern cannot honour
    (``3·s1`` or ``3·s2`` beyond ``d/2``).
    """
    check_choice("layout", layout, MROPE_LAYOUTS)
    sections = _check_sections(mrope_section, None)
    half = sum(sections)
    if layout == "sections":
        return torch.repeat_interleave(torch.arange(3), torch.tensor(sections))
    i = torch.arange(half)
    axis_of = torch.zeros(half, dtype=torch.long)
    axis_of[(i % 3 == 1) & (i < 3 * sections[1])] = 1
    axis_of[(i % 3 == 2) & (i < 3 * sections[2])] = 2
    counts = torch.bincount(axis_of, minlength=3).tolist()
    if counts != sections:
        raise ValueError(
            f"mrope_section {sections} cannot be interleaved over {half} frequencies (the "
            f"pattern t, h, w, t, h, w, ... gives {counts}); interleaving needs "
            f"3 * mrope_section[1] and 3 * mrope_section[2] <= head_dim/2 = {half}"
        )
    return axis_of


def mrope_cos_sin(
    positions: Tensor,
    inv_freq: Tensor,
    mrope_section: Sequence[int],
    attention_factor: float = 1.0,
    *,
    dtype=torch.float32,
    layout: str = "sections",
    backend: Rotary = REFERENCE,
) -> tuple[Tensor, Tensor]:
    r"""M-RoPE's cos/sin tables, assembled section by section (arXiv:2409.12191, §2.1).

    ``positions`` integer ``[3, batch, seq]`` (temporal, height, width ids); ``inv_freq``
    ``[d/2]``; ``mrope_section`` three sizes summing to ``d/2``. Frequency ``i`` in section
    ``s`` turns by ``positions[s] · θ_i``: with sections ``[16, 24, 24]``, pairs 0–15 follow
    time, 16–39 height, 40–63 width. This equals transformers' Qwen2-VL assembly
    (``torch.cat([m[i % 3] for i, m in enumerate(freqs.split(mrope_section, -1))])``),
    one column per pair (not duplicated). ``layout="interleaved"`` deals the frequencies
    out in turn (:func:`mrope_axis_of`). Returns ``(cos, sin)`` ``[batch, seq, d/2]`` in
    ``dtype``, angles computed in float64, both scaled by ``attention_factor``, each axis's
    table built by ``backend.cos_sin``.
    """
    positions = _check_mrope_positions(positions)
    check_tensor("inv_freq", inv_freq, ndim=1, floating=True)
    sections = _check_sections(mrope_section, inv_freq.shape[0])
    attention_factor = check_float("attention_factor", attention_factor, minimum=0.0)
    table = _check_backend(backend).cos_sin
    # The tables of each axis, then frequency i taken from the axis that drives it:
    # axis_of = [0]*s0 + [1]*s1 + [2]*s2 for sections, or dealt in turn when interleaved.
    axis_of = mrope_axis_of(sections, layout).to(positions.device)
    tables = [table(positions[a], inv_freq, attention_factor, dtype=dtype) for a in range(3)]
    cos, sin = (
        torch.where(axis_of == 0, t0, torch.where(axis_of == 1, t1, t2))
        for t0, t1, t2 in zip(*tables)  # (cos of each axis), then (sin of each axis)
    )
    return cos, sin


def apply_mrope(
    x: Tensor,
    positions: Tensor,
    mrope_section: Sequence[int],
    *,
    inv_freq: Tensor | None = None,
    base: float = 10000.0,
    pairing: str = "half",
    attention_factor: float = 1.0,
    layout: str = "sections",
    backend: Rotary = REFERENCE,
) -> Tensor:
    r"""Rotate queries or keys with multimodal RoPE (Qwen2-VL, arXiv:2409.12191, §2.1).

    ``x`` ``[batch, heads, seq, head_dim]``; ``positions`` integer ``[3, batch, seq]`` (batch
    may be 1 to share); ``mrope_section`` three sizes summing to ``head_dim/2``. Uses the
    tables of :func:`mrope_cos_sin` and RoPE's rotation; ``pairing="half"`` is Qwen2-VL's
    (transformers' ``rotate_half``), which this matches to float32 round-off. With all three
    rows of ``positions`` equal (text) it is exactly 1D RoPE. ``layout`` is passed to
    :func:`mrope_cos_sin`. Returns ``x``'s shape and dtype.
    """
    head_dim = _check_x("x", x)
    check_choice("pairing", pairing, PAIRINGS)
    backend = _check_backend(backend)
    positions = _check_mrope_positions(positions)
    _check_positions_shape("positions", positions, x, lead="3, ")
    inv_freq = _check_inv_freq(inv_freq, head_dim // 2, base, x.device)
    kw = dict(dtype=compute_dtype(x), layout=layout, backend=backend)
    cos, sin = mrope_cos_sin(positions, inv_freq, mrope_section, attention_factor, **kw)
    return backend.rotate_pairs(x, cos, sin, pairing=pairing)


def _check_segment(i: int, seg) -> int | tuple[int, int, int]:
    if isinstance(seg, bool):
        raise TypeError(f"segments[{i}] must be an int or a (t, h, w) triple, got {seg!r}")
    if isinstance(seg, int):
        return check_int(f"segments[{i}]", seg, minimum=1)
    if isinstance(seg, Sequence) and not isinstance(seg, (str, bytes)) and len(seg) == 3:
        return tuple(check_int(f"segments[{i}][{a}]", s, minimum=1) for a, s in enumerate(seg))
    raise TypeError(
        f"segments[{i}] must be a number of text tokens (int) or an image/video grid "
        f"(t, h, w), got {seg!r}"
    )


#: How the id after an image or video is chosen (see :func:`mrope_position_ids`).
MROPE_ADVANCES = ("max_id", "grid_side")


def mrope_position_ids(
    segments, *, spatial_merge_size: int = 1, advance: str = "max_id", device=None
) -> Tensor:
    r"""M-RoPE position ids ``[3, 1, seq]`` for a sequence of text runs and image/video grids.

    ``segments`` lists the sequence in order: an ``int`` ``n`` is ``n`` text tokens; a triple
    ``(t, h, w)`` is a grid of patches (an image has ``t = 1``). ``spatial_merge_size``
    divides ``h`` and ``w`` first (Qwen2-VL merges 2×2 patches into one token, so its
    ``image_grid_thw`` is in patches). Following Qwen2-VL's ``get_rope_index``
    (arXiv:2409.12191, §2.1):

    * text ids advance by 1 on all three axes: ``(p, p, p)``;
    * a grid starting at ``p`` gets ``(p + τ, p + r, p + c)`` for frame ``τ``, row ``r``,
      column ``c`` (raster order, frame-major);
    * with ``advance="max_id"`` the next segment starts at ``max(all ids so far) + 1``, the
      rule of the paper and of transformers 4.x (``st_idx = llm_pos_ids_list[-1].max() + 1``,
      checked in 4.57.1); with ``advance="grid_side"`` a grid starting at ``p`` moves the
      next segment to ``p + max(h, w)`` (merged), what transformers 5.x does (checked in
      5.24: ``current_pos += max(grid_thw[1], grid_thw[2]) // spatial_merge_size``). The two
      agree whenever ``t <= max(h, w)`` — every image — and differ for a video with more
      temporal steps than its longer side, whose later frames then share ids with the text
      after it.

    Returns a long tensor ``[3, 1, seq]`` ready for :func:`apply_mrope` (``torch.cat`` along
    dim 1 for a batch).
    """
    merge = check_int("spatial_merge_size", spatial_merge_size, minimum=1)
    check_choice("advance", advance, MROPE_ADVANCES)
    if isinstance(segments, (str, bytes)) or not isinstance(segments, Sequence) or not segments:
        raise ValueError(
            f"segments must be a non-empty list of text lengths and (t, h, w) grids, got "
            f"{segments!r}"
        )
    parts, start = [], 0
    for i, seg in enumerate(segments):
        seg = _check_segment(i, seg)
        if isinstance(seg, int):  # text: (p, p, p) for p = start .. start + n - 1
            ids = torch.arange(start, start + seg, device=device).expand(3, -1)
        else:
            t, h, w = seg
            if h % merge or w % merge:
                raise ValueError(
                    f"segments[{i}] = {seg}: height and width must be divisible by "
                    f"spatial_merge_size={merge}"
                )
            ids = grid_positions(t, h // merge, w // merge, device=device) + start
        parts.append(ids)
        if isinstance(seg, tuple) and advance == "grid_side":
            start += max(seg[1], seg[2]) // merge  # transformers 5.x: the grid's longer side
        else:
            start = int(ids.max()) + 1  # the next segment resumes after the largest id so far
    return torch.cat(parts, dim=1)[:, None, :]


class MRoPE(PositionScheme):
    r"""Multimodal RoPE (Qwen2-VL, arXiv:2409.12191) as a scheme; see :func:`apply_mrope`.

    ``layout="interleaved"`` is Qwen3-VL's order (:func:`mrope_axis_of`). Hook positions are
    ``[3, batch, seq]`` (from :func:`mrope_position_ids`). 1-D ``[seq]`` or 2-D
    ``[batch, seq]`` positions are read as *text* and repeated on all three axes — what
    Qwen2-VL does for text-only input — so M-RoPE then equals 1D RoPE. ``rotate`` returns
    q/k ``[batch, heads, seq, head_dim]`` with their dtypes.
    """

    def __init__(
        self,
        head_dim: int,
        mrope_section: Sequence[int],
        *,
        base: float = 10000.0,
        pairing: str = "half",
        layout: str = "sections",
        backend: Rotary = REFERENCE,
    ):
        super().__init__()
        self.backend = _check_backend(backend)
        self.head_dim = check_even("head_dim", head_dim)
        self.mrope_section = _check_sections(mrope_section, self.head_dim // 2)
        self.pairing = check_choice("pairing", pairing, PAIRINGS)
        mrope_axis_of(self.mrope_section, layout)  # refuses a layout the sections cannot take
        self.layout = layout
        self.inv_freq = rope_frequencies(self.head_dim, check_base(base))

    @staticmethod
    def _as_3d(name: str, positions: Tensor) -> Tensor:
        check_tensor(name, positions)
        if positions.ndim == 1:
            return positions[None, None, :].expand(3, 1, -1)
        if positions.ndim == 2:
            return positions[None].expand(3, -1, -1)
        return positions

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        kw = dict(inv_freq=self.inv_freq, pairing=self.pairing, layout=self.layout)
        kw["backend"] = self.backend
        q = apply_mrope(q, self._as_3d("q_positions", q_positions), self.mrope_section, **kw)
        k = apply_mrope(k, self._as_3d("k_positions", k_positions), self.mrope_section, **kw)
        return q, k

    def extra_repr(self) -> str:
        return (
            f"head_dim={self.head_dim}, mrope_section={self.mrope_section}, "
            f"pairing={self.pairing!r}"
            + (f", layout={self.layout!r}" if self.layout != "sections" else "")
        )
