r"""VO-RoPE / RoPER: rotary position on the values and the outputs.

RoPE (:mod:`pecourse.positions.rope`) makes the attention *weights* relative:
``a_ij`` depends on ``i - j``. But the thing being averaged, ``v_j``, still carries no
position, so the output cannot tell *where* the attended information came from. Rotating
the values too fixes that (Jianlin Su's blog post "VO-RoPE", kexue.fm, 2025; the same idea
as RoPER, "Rotary Positional Embeddings with Relative distances", by Georges Harik and
Varuna Jayasiri at labml.ai, research.labml.ai/RoPER.html):

1. rotate each value by its own position: ``v_j \mapsto R_j v_j``;
2. average as usual: ``u_i = \sum_j a_{ij} R_j v_j``;
3. rotate the output back by the query's position: ``o_i = R_{-i} u_i``.

Because rotations compose additively (``R_{-i} R_j = R_{j-i}``),

.. math::
    o_i = \sum_j a_{ij}\, R_{j-i}\, v_j ,

so each contribution is rotated by the *relative* offset ``j - i``: shifting every position
by the same amount changes nothing, exactly as for RoPE's scores. With ``rotate_qk=True``
the scheme also applies ordinary RoPE to queries and keys (RoPER uses both; labml's
implementation rotates half of each head's features by default, for q/k and for v).

The inverse rotation uses a fact worth knowing: in the complex view of a pair
(``z = x_1 + i x_2``, RoPE is ``z e^{i m θ}``), rotating backwards is
``\overline{\overline{z}\, e^{i m θ}} = z e^{-i m θ}`` — conjugate, rotate forwards,
conjugate. Conjugation negates the second member of every pair, so :func:`rope_inverse` is
:func:`pecourse.positions.rope.apply_rope` between two sign flips, with all its checks and
its float64 angle table.
"""

from __future__ import annotations

from torch import Tensor

from .._validate import check_choice, check_even, check_float, check_tensor
from ..attention import PositionScheme
from .rope import PAIRINGS, apply_rope, check_rotary_dim

__all__ = ["rope_inverse", "vo_rope_values", "vo_rope_output", "VORoPE"]


def _conjugate_pairs(x: Tensor, pairing: str, rotary_dim: int) -> Tensor:
    """Negate the second member of every rotated pair: complex conjugation, pair by pair."""
    out = x.clone()
    if pairing == "half":
        out[..., rotary_dim // 2 : rotary_dim] = -x[..., rotary_dim // 2 : rotary_dim]
    else:  # interleaved: pairs (2i, 2i+1)
        out[..., 1:rotary_dim:2] = -x[..., 1:rotary_dim:2]
    return out


def rope_inverse(
    x: Tensor,
    positions: Tensor,
    *,
    inv_freq: Tensor | None = None,
    base: float = 10000.0,
    pairing: str = "half",
    rotary_dim: int | None = None,
) -> Tensor:
    r"""Rotate by *minus* each position: ``R_{-m} x``, the inverse of RoPE's ``R_m``.

    Same arguments, shapes (``x`` ``[batch, heads, seq, head_dim]``, integer positions
    ``[seq]`` or ``[batch, seq]``) and refusals as
    :func:`pecourse.positions.rope.apply_rope` (arXiv:2104.09864, eq. 34), without
    ``attention_factor`` (an inverse must not rescale). Computed as
    ``C · apply_rope(C · x, m)`` where ``C`` negates the second member of each pair
    (complex conjugation), since ``conj(conj(z) e^{imθ}) = z e^{-imθ}``. So
    ``rope_inverse(apply_rope(x, m), m) == x`` to round-off. Returns ``x``'s shape and
    dtype.
    """
    check_tensor("x", x, ndim=4, floating=True)
    check_choice("pairing", pairing, PAIRINGS)
    head_dim = check_even("head_dim (x.shape[-1])", x.shape[-1])
    r = check_rotary_dim(head_dim, rotary_dim)
    flipped = _conjugate_pairs(x, pairing, r)
    rotated = apply_rope(
        flipped, positions, inv_freq=inv_freq, base=base, pairing=pairing, rotary_dim=rotary_dim
    )
    return _conjugate_pairs(rotated, pairing, r)


def vo_rope_values(
    v: Tensor,
    k_positions: Tensor,
    *,
    inv_freq: Tensor | None = None,
    base: float = 10000.0,
    pairing: str = "half",
    rotary_dim: int | None = None,
) -> Tensor:
    r"""Step 1 of VO-RoPE: rotate each value by its own position, ``v_j \mapsto R_j v_j``.

    ``v`` ``[batch, kv_heads, Lk, head_dim]``; ``k_positions`` integer ``[Lk]`` or
    ``[batch, Lk]``. This is RoPE (arXiv:2104.09864, eq. 34) applied to values; returns
    ``v``'s shape and dtype; same refusals as :func:`pecourse.positions.rope.apply_rope`.
    """
    return apply_rope(
        v, k_positions, inv_freq=inv_freq, base=base, pairing=pairing, rotary_dim=rotary_dim
    )


def vo_rope_output(
    out: Tensor,
    q_positions: Tensor,
    *,
    inv_freq: Tensor | None = None,
    base: float = 10000.0,
    pairing: str = "half",
    rotary_dim: int | None = None,
) -> Tensor:
    r"""Step 3 of VO-RoPE: rotate each output back by its query's position, ``o_i = R_{-i} u_i``.

    ``out`` ``[batch, heads, Lq, head_dim]`` (the average ``u_i = Σ_j a_ij R_j v_j``);
    ``q_positions`` integer ``[Lq]`` or ``[batch, Lq]``. Together with
    :func:`vo_rope_values` this gives ``o_i = Σ_j a_ij R_{j-i} v_j``. Returns ``out``'s
    shape and dtype. Same refusals as :func:`rope_inverse`.
    """
    return rope_inverse(
        out, q_positions, inv_freq=inv_freq, base=base, pairing=pairing, rotary_dim=rotary_dim
    )


class VORoPE(PositionScheme):
    r"""VO-RoPE / RoPER as a scheme: ``o_i = Σ_j a_ij R_{j-i} v_j``.

    ``transform_values`` rotates ``v_j`` by ``R_j`` (:func:`vo_rope_values`) and
    ``transform_output`` rotates the average back by ``R_{-i}`` (:func:`vo_rope_output`).
    ``rotate_qk=True`` also applies RoPE to queries and keys with the same frequencies (as
    RoPER does), so both the weights and the values are relative. ``rotary_dim`` rotates
    only the first dimensions (labml's RoPER rotates a fraction of each head). The hooks
    take and return ``[batch, heads, L, head_dim]`` tensors with integer positions ``[L]``
    or ``[batch, L]``. Refuses an odd ``head_dim``/``rotary_dim``, ``rotary_dim >
    head_dim``, ``base <= 1``, an unknown ``pairing`` and a ``rotate_qk`` that is not a
    bool (``TypeError``).
    """

    places = ("values",)  # ("qk", "values") when built with rotate_qk=True

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        pairing: str = "half",
        rotary_dim: int | None = None,
        rotate_qk: bool = False,
    ):
        super().__init__()
        self.head_dim = check_even("head_dim", head_dim)
        self.rotary_dim = check_rotary_dim(self.head_dim, rotary_dim)
        self.base = check_float("base", base, minimum=1.0, strict_minimum=True)
        self.pairing = check_choice("pairing", pairing, PAIRINGS)
        if not isinstance(rotate_qk, bool):
            raise TypeError(f"rotate_qk must be True or False, got {rotate_qk!r}")
        self.rotate_qk = rotate_qk
        self.places = ("qk", "values") if rotate_qk else ("values",)

    def _kwargs(self) -> dict:
        return dict(base=self.base, pairing=self.pairing, rotary_dim=self.rotary_dim)

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        if not self.rotate_qk:
            return q, k
        kw = self._kwargs()
        return apply_rope(q, q_positions, **kw), apply_rope(k, k_positions, **kw)

    def transform_values(self, v: Tensor, k_positions: Tensor) -> Tensor:
        return vo_rope_values(v, k_positions, **self._kwargs())

    def transform_output(
        self, out: Tensor, probs: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> Tensor:
        return vo_rope_output(out, q_positions, **self._kwargs())

    def extra_repr(self) -> str:
        return (
            f"places={self.places}, head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, "
            f"base={self.base}, pairing={self.pairing!r}"
        )
