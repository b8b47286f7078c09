r"""Rotary position embedding (RoPE), Su et al. 2021, arXiv:2104.09864.

RoPE puts position into **queries and keys**. Split a head's ``d`` dimensions into
``d/2`` pairs; pair ``i`` of the vector at position ``m`` is rotated by the angle
``m·θ_i`` with

.. math::
    θ_i = b^{-2i/d}, \qquad i = 0, \dots, d/2 - 1, \qquad b = 10000
    \quad\text{(paper eq. 15, which counts } i \text{ from 1)}

so that ``⟨R_m q, R_n k⟩ = ⟨q, R_{n-m} k⟩`` (eq. 16): the score depends on the offset
``m - n`` only, never on ``m`` or ``n`` alone.

Which coordinates form a pair is a *convention*, and real checkpoints disagree:

* ``pairing="half"``: ``x_i`` with ``x_{i+d/2}`` — GPT-NeoX, and most models in
  transformers (Llama, Mistral, Qwen, ...: ``rotate_half``; transformers' GPT-J keeps its
  interleaved ``rotate_every_two``);
* ``pairing="interleaved"``: ``x_{2i}`` with ``x_{2i+1}`` — the paper, GPT-J, Meta's
  original LLaMA code (``torch.view_as_complex``).

The two give the same model once the rows of ``W_q`` and ``W_k`` are permuted
(:func:`pairing_permutation`, :func:`permute_qk_weight`), which is exactly what the
LLaMA → transformers conversion script does.

The arithmetic (the angle table and the rotation, with the course's numerics) and the
argument checks live in :mod:`pecourse.positions.rotary`; this module names the pieces.
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Integer
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
from .rope_scaling import SCALINGS
from .rotary import (
    PAIRINGS,
    REFERENCE,
    Rotary,
    _check_backend,
    _check_head_dim,
    _check_positions_shape,
    _check_rope_args,
    _check_rotary_dim,
    compute_dtype,
    cos_sin,
    rope_frequencies,
)

__all__ = [
    "PAIRINGS",
    "inv_freq",
    "rope_cos_sin",
    "apply_rope",
    "apply_rope_complex",
    "rotation_matrix",
    "rope_decay_bound",
    "pairing_permutation",
    "permute_qk_weight",
    "RoPE",
]


def inv_freq(head_dim: int, base: float = 10000.0, *, dtype=torch.float64, device=None) -> Tensor:
    r"""The RoPE frequencies ``θ_i = base^{-2i/d}`` (arXiv:2104.09864, eq. 15), checked.

    :func:`pecourse.positions.rotary.rope_frequencies` after checking its arguments (an even
    ``head_dim``, ``base`` > 1). ``.float()`` agrees with transformers' float32 ``inv_freq``
    to one unit in the last place for power-of-two ``head_dim`` and to a few units otherwise
    (up to ~7 for 80, 96, 112: transformers' float32 ``pow`` is the less exact side).
    """
    head_dim = check_even("head_dim", head_dim)
    base = check_base(base)
    return rope_frequencies(head_dim, base, dtype=dtype, device=device)


def rope_cos_sin(
    positions: Tensor, inv_freq: Tensor, attention_factor: float = 1.0, *, dtype=torch.float32
) -> tuple[Tensor, Tensor]:
    r"""The tables ``a·cos(m θ_i)`` and ``a·sin(m θ_i)`` for every position and pair.

    :func:`pecourse.positions.rotary.cos_sin` for integer positions ``[seq]`` or
    ``[batch, seq]``, checked: returns ``(cos, sin)`` shaped ``[..., seq, d/2]`` in ``dtype``.
    ``a`` is ``attention_factor`` (YaRN's temperature, transformers' ``attention_scaling``).
    RoFormer (arXiv:2104.09864) eq. 34 uses exactly these two tables.
    """
    positions = check_positions("positions", positions)
    check_tensor("inv_freq", inv_freq, ndim=1, floating=True)
    attention_factor = check_float("attention_factor", attention_factor, minimum=0.0)
    return cos_sin(positions, inv_freq, attention_factor, dtype=dtype)


def apply_rope(
    x: Float[Tensor, "batch heads seq head_dim"],
    positions: Integer[Tensor, "*batch seq"],
    *,
    inv_freq: Tensor | None = None,
    base: float = 10000.0,
    pairing: str = "half",
    attention_factor: float = 1.0,
    rotary_dim: int | None = None,
    backend: Rotary = REFERENCE,
) -> Float[Tensor, "batch heads seq head_dim"]:
    r"""Rotate queries or keys by their positions (RoPE, arXiv:2104.09864, eq. 34).

    ``positions`` are integers ``[seq]`` or ``[batch, seq]``; the result has ``x``'s shape
    and dtype.

    * ``inv_freq`` ``[rotary_dim/2]``: frequencies to use (from
      :mod:`pecourse.positions.rope_scaling`); default :func:`inv_freq` ``(rotary_dim, base)``.
    * ``pairing``: ``"half"`` (NeoX / transformers) or ``"interleaved"`` (GPT-J / Meta).
    * ``attention_factor``: multiplies cos and sin, as transformers' ``attention_scaling``
      (so the logits are scaled by its square).
    * ``rotary_dim``: rotate only the first ``rotary_dim`` dimensions (partial rotary).
    * ``backend``: the :class:`~pecourse.positions.rotary.Rotary` that builds the table and
      rotates; by default the readable code of :mod:`pecourse.positions.rotary`.
      :func:`pecourse.kernels.apply_rope` is this function on
      :data:`pecourse.kernels.FAST_ROPE` (cached tables and a C kernel, the same numbers).
    """
    positions, rotary_dim, inv_freq = _check_rope_args(
        x, positions, pairing=pairing, rotary_dim=rotary_dim, inv_freq=inv_freq, base=base
    )
    attention_factor = check_float("attention_factor", attention_factor, minimum=0.0)
    backend = _check_backend(backend)
    cos, sin = backend.cos_sin(positions, inv_freq, attention_factor, dtype=compute_dtype(x))
    return backend.rotate_pairs(x, cos, sin, pairing=pairing)


def apply_rope_complex(
    x: Tensor,
    positions: Tensor,
    *,
    inv_freq: Tensor | None = None,
    base: float = 10000.0,
    pairing: str = "half",
    attention_factor: float = 1.0,
    rotary_dim: int | None = None,
) -> Tensor:
    r"""RoPE written with complex numbers: pair ``(x1, x2)`` is ``z = x1 + i·x2`` and
    position ``m`` multiplies it by ``a·e^{i m θ_j}`` (arXiv:2104.09864, eq. 12, the 2D case
    in complex form, applied pair by pair; Meta's LLaMA code via ``torch.polar`` /
    ``torch.view_as_complex``).

    Same arguments, shapes and checks as :func:`apply_rope`, and the same result to float32
    round-off; it exists to show that a rotation in a plane *is* a complex product.
    """
    positions, rotary_dim, inv_freq = _check_rope_args(
        x, positions, pairing=pairing, rotary_dim=rotary_dim, inv_freq=inv_freq, base=base
    )
    attention_factor = check_float("attention_factor", attention_factor, minimum=0.0)
    # a·e^{i m θ} = a·cos(mθ) + i·a·sin(mθ): the rotary core's table (rounded there to
    # float32, or float64 for float64 inputs) as the parts of complex64 (complex128).
    real = compute_dtype(x)
    rot = torch.complex(*cos_sin(positions, inv_freq.to(x.device), attention_factor, dtype=real))
    rot = rot[None, None] if rot.ndim == 2 else rot[:, None]
    xr = x[..., :rotary_dim].to(real)
    if pairing == "interleaved":  # (x_{2j}, x_{2j+1}) are already adjacent: view as complex
        z = torch.view_as_complex(xr.reshape(*xr.shape[:-1], rotary_dim // 2, 2).contiguous())
        rotated = torch.view_as_real(z * rot).flatten(-2)
    else:  # (x_j, x_{j+d/2}): build z = x_j + i·x_{j+d/2}
        z = torch.complex(xr[..., : rotary_dim // 2], xr[..., rotary_dim // 2 :])
        zr = z * rot
        rotated = torch.cat((zr.real, zr.imag), dim=-1)
    out = x.clone()
    out[..., :rotary_dim] = rotated.to(x.dtype)
    return out


def rotation_matrix(
    position: int, head_dim: int, *, base: float = 10000.0, pairing: str = "half"
) -> Tensor:
    r"""The explicit ``[head_dim, head_dim]`` float64 matrix ``R^d_{Θ,m}`` (arXiv:2104.09864,
    eq. 15): a 2x2 rotation by ``m·θ_i`` in the plane of each pair, zero elsewhere.

    For teaching and derivations (``R_mᵀ R_n = R_{n-m}``, the identity under eq. 16);
    :func:`apply_rope` never builds it. ``apply_rope(x, m) == x @ R.T``. With
    ``pairing="interleaved"`` it is exactly the paper's block-diagonal matrix.
    """
    position = check_int("position", position, minimum=0)
    head_dim = check_even("head_dim", head_dim)
    check_choice("pairing", pairing, PAIRINGS)
    c, s = cos_sin(torch.tensor(position), inv_freq(head_dim, base), dtype=torch.float64)
    half = head_dim // 2
    i = torch.arange(half)
    a, b = (i, i + half) if pairing == "half" else (2 * i, 2 * i + 1)
    r = torch.zeros(head_dim, head_dim, dtype=torch.float64)
    r[a, a], r[a, b] = c, -s  # x1' = x1 cos - x2 sin
    r[b, a], r[b, b] = s, c  # x2' = x1 sin + x2 cos
    return r


def rope_decay_bound(distances: Tensor, head_dim: int, base: float = 10000.0) -> Tensor:
    r"""RoFormer's long-term decay bound (arXiv:2104.09864, §3.4.3).

    With ``S_j = Σ_{k<j} e^{i·Δ·θ_k}`` and ``h_k`` the complex product of pair ``k`` of ``q``
    and ``k`` (``h_{d/2} = 0``), Abel summation bounds the score of two vectors at offset
    ``Δ`` by ``(max_k |h_{k+1} - h_k|) · Σ_j |S_j|`` (eq. 37); the paper plots the relative
    bound ``(1/(d/2)) Σ_{j=1}^{d/2} |S_j|``, which shrinks (with oscillations) as ``Δ``
    grows. Takes integer ``distances`` of 0, 1 or 2 dimensions, returns float64 of the same
    shape.
    """
    distances = check_positions("distances", distances, ndim=(0, 1, 2))
    cos, sin = cos_sin(distances, inv_freq(head_dim, base), dtype=torch.float64)
    phases = torch.complex(cos, sin)  # e^{i·Δ·θ_k}
    partial = torch.cumsum(phases, dim=-1)  # S_1 .. S_{d/2}
    return partial.abs().mean(dim=-1)  # (1/(d/2)) Σ_j |S_j|


def pairing_permutation(head_dim: int, *, to: str = "half") -> Tensor:
    r"""Index ``p`` such that ``x_to = x_from[..., p]`` converts one pairing into the other.

    Interleaved pair ``j`` is ``(2j, 2j+1)``; half pair ``j`` is ``(j, j + d/2)``. So
    ``to="half"`` gives ``p = [0, 2, 4, …, d-2, 1, 3, …, d-1]`` and ``to="interleaved"`` its
    inverse ``p = [0, d/2, 1, d/2+1, …]``. For every vector ``x`` and position ``m``:
    ``apply_rope(x[..., p], m, pairing="half") == apply_rope(x, m,
    pairing="interleaved")[..., p]``. Returns a long tensor ``[head_dim]``; refuses an odd
    ``head_dim`` or an unknown ``to``.
    """
    head_dim = check_even("head_dim", head_dim)
    check_choice("to", to, PAIRINGS)
    to_half = torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))
    return to_half if to == "half" else torch.argsort(to_half)


def permute_qk_weight(weight: Tensor, num_heads: int, *, to: str = "half") -> Tensor:
    r"""Permute the output rows of a query/key projection between the two pairings.

    ``weight`` is ``[num_heads * head_dim, in_features]`` (``nn.Linear.weight``) or a bias
    ``[num_heads * head_dim]``. Each head's rows are reordered by
    :func:`pairing_permutation`, so that a Meta-layout (interleaved) checkpoint used with
    ``pairing="half"`` gives exactly the attention scores it gave with
    ``pairing="interleaved"`` — the permutation transformers' LLaMA conversion script
    applies to ``wq`` and ``wk``. ``to="interleaved"`` undoes it. Returns a tensor of
    ``weight``'s shape.
    """
    check_tensor("weight", weight, ndim=(1, 2))
    num_heads = check_int("num_heads", num_heads, minimum=1)
    rows = weight.shape[0]
    if rows % num_heads:
        raise ValueError(
            f"weight has {rows} rows, not divisible by num_heads ({num_heads}); expected "
            "[num_heads * head_dim, in_features]"
        )
    perm = pairing_permutation(rows // num_heads, to=to).to(weight.device)
    per_head = weight.reshape(num_heads, rows // num_heads, *weight.shape[1:])
    return per_head[:, perm].reshape(weight.shape)


class RoPE(PositionScheme):
    """RoPE as a positional scheme: rotates queries and keys in the ``rotate`` hook.

    ``scaling`` names an entry of :data:`pecourse.positions.rope_scaling.SCALINGS` and
    ``scaling_kwargs`` are its parameters (``RoPE(64, scaling="yarn", factor=4,
    original_max_position=2048)``). ``backend`` as in :func:`apply_rope`.

    ``"dynamic"`` and ``"longrope"`` depend on the sequence length: they are recomputed on
    every call from ``seq_len = max(position) + 1``, so the frequencies grow past the
    original length and return to the original ones below it — there is no stale cache.
    (transformers' dynamic RoPE differs in one regime: after a long input it keeps the
    stretched frequencies for any later length that is still above the original one.)
    :attr:`inv_freq` and :attr:`attention_factor` hold the values the last call used.
    """

    _SEQ_DEPENDENT = ("dynamic", "longrope")

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        pairing: str = "half",
        rotary_dim: int | None = None,
        scaling: str = "default",
        backend: Rotary = REFERENCE,
        **scaling_kwargs,
    ):
        super().__init__()
        self.head_dim = check_even("head_dim", head_dim)
        self.rotary_dim = _check_rotary_dim(self.head_dim, rotary_dim)
        self.base = check_base(base)
        self.pairing = check_choice("pairing", pairing, PAIRINGS)
        self.scaling = check_choice("scaling", scaling, tuple(SCALINGS))
        self.scaling_kwargs = dict(scaling_kwargs)
        self.backend = _check_backend(backend)
        self._fn = SCALINGS[scaling]
        # Compute once now: validates the parameters, and is the answer for every call of
        # a length-independent scaling. Kept as plain attributes (not buffers) so that
        # ``module.to(torch.bfloat16)`` cannot round the frequencies.
        self.inv_freq, self.attention_factor = self.frequencies(None)

    def frequencies(self, seq_len: int | None) -> tuple[Tensor, float]:
        """``(inv_freq [rotary_dim/2] float64, attention_factor)`` for a sequence length."""
        kwargs = dict(self.scaling_kwargs)
        if self.scaling == "dynamic":
            kwargs["seq_len"] = kwargs.get("original_max_position") if seq_len is None else seq_len
        elif self.scaling == "longrope" and seq_len is not None:
            kwargs["seq_len"] = seq_len
        return self._fn(self.rotary_dim, self.base, **kwargs)

    def rotate(
        self,
        q: Float[Tensor, "batch heads q_len head_dim"],
        k: Float[Tensor, "batch kv_heads k_len head_dim"],
        q_positions: Integer[Tensor, "*batch q_len"],
        k_positions: Integer[Tensor, "*batch k_len"],
    ) -> tuple[Tensor, Tensor]:
        _check_head_dim(self, q, k)
        _check_positions_shape("q_positions", q_positions, q)
        _check_positions_shape("k_positions", k_positions, k)
        if self.scaling in self._SEQ_DEPENDENT:
            longest = max(int(p.max()) + 1 if p.numel() else 1 for p in (q_positions, k_positions))
            self.inv_freq, self.attention_factor = self.frequencies(longest)
        # Queries and keys at the same positions, and every layer of a model, rotate by one
        # table: with the fast backend it is built once and then found in its cache.
        backend, dtype = self.backend, compute_dtype(q)
        cos, sin = backend.cos_sin(q_positions, self.inv_freq, self.attention_factor, dtype=dtype)
        if k_positions is q_positions and compute_dtype(k) == dtype:  # self-attention
            if backend.rotate_qk is not None:  # both in one call
                return backend.rotate_qk(q, k, cos, sin, pairing=self.pairing)
            k_cos, k_sin = cos, sin
        else:
            k_cos, k_sin = backend.cos_sin(
                k_positions, self.inv_freq, self.attention_factor, dtype=compute_dtype(k)
            )
        q = backend.rotate_pairs(q, cos, sin, pairing=self.pairing)
        return q, backend.rotate_pairs(k, k_cos, k_sin, pairing=self.pairing)

    def extra_repr(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.scaling_kwargs.items())
        return (
            f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base}, "
            f"pairing={self.pairing!r}, scaling={self.scaling!r}{extra}"
        )
