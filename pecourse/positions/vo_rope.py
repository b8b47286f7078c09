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
by the same amount changes nothing, exactly as for RoPE's scores. :class:`RoPER` also
applies ordinary RoPE to queries and keys (labml's implementation rotates half of each
head's features by default, for q/k and for v).

The inverse rotation is RoPE's rotation with ``sin`` negated (``R_{-m} = R_mᵀ``, an
orthogonal map); in the complex view of a pair (``z = x_1 + i x_2``, RoPE is
``z e^{i m θ}``) it is ``z e^{-i m θ} = \overline{\overline{z}\, e^{i m θ}}``: conjugate,
rotate forwards, conjugate.
"""

from __future__ import annotations

from torch import Tensor

from .._validate import check_base, check_choice, check_even
from ..attention import PositionScheme
from .rotary import (
    PAIRINGS,
    REFERENCE,
    Rotary,
    _check_backend,
    _check_rope_args,
    _check_rotary_dim,
    compute_dtype,
    rope_frequencies,
)

__all__ = ["rope_inverse", "vo_rope_values", "vo_rope_output", "VORoPE", "RoPER"]


def _rope(x, positions, inv_freq, base, pairing, rotary_dim, backend, *, inverse):
    """Check, then rotate by ``R_m`` (or ``R_{-m}`` when ``inverse``)."""
    positions, _, inv_freq = _check_rope_args(
        x, positions, pairing=pairing, rotary_dim=rotary_dim, inv_freq=inv_freq, base=base
    )
    backend = _check_backend(backend)
    cos, sin = backend.cos_sin(positions, inv_freq, 1.0, dtype=compute_dtype(x))
    return backend.rotate_pairs(x, cos, sin, pairing=pairing, inverse=inverse)


def rope_inverse(
    x: Tensor,
    positions: Tensor,
    *,
    inv_freq: Tensor | None = None,
    base: float = 10000.0,
    pairing: str = "half",
    rotary_dim: int | None = None,
    backend: Rotary = REFERENCE,
) -> Tensor:
    r"""Rotate by *minus* each position: ``R_{-m} x``, the inverse of RoPE's ``R_m``.

    Same arguments, shapes (``x`` ``[batch, heads, seq, head_dim]``, integer positions
    ``[seq]`` or ``[batch, seq]``) and checks as
    :func:`pecourse.positions.rope.apply_rope` (arXiv:2104.09864, eq. 34), without
    ``attention_factor`` (an inverse must not rescale). So
    ``rope_inverse(apply_rope(x, m), m) == x`` to round-off. Returns ``x``'s shape and dtype.
    """
    return _rope(x, positions, inv_freq, base, pairing, rotary_dim, backend, inverse=True)


def vo_rope_values(
    v: Tensor,
    k_positions: Tensor,
    *,
    inv_freq: Tensor | None = None,
    base: float = 10000.0,
    pairing: str = "half",
    rotary_dim: int | None = None,
    backend: Rotary = REFERENCE,
) -> Tensor:
    r"""Step 1 of VO-RoPE: rotate each value by its own position, ``v_j \mapsto R_j v_j``.

    ``v`` ``[batch, kv_heads, Lk, head_dim]``; ``k_positions`` integer ``[Lk]`` or
    ``[batch, Lk]``. This is RoPE (arXiv:2104.09864, eq. 34) applied to values; returns
    ``v``'s shape and dtype; the checks of :func:`pecourse.positions.rope.apply_rope`.
    """
    return _rope(v, k_positions, inv_freq, base, pairing, rotary_dim, backend, inverse=False)


def vo_rope_output(
    out: Tensor,
    q_positions: Tensor,
    *,
    inv_freq: Tensor | None = None,
    base: float = 10000.0,
    pairing: str = "half",
    rotary_dim: int | None = None,
    backend: Rotary = REFERENCE,
) -> Tensor:
    r"""Step 3 of VO-RoPE: rotate each output back by its query's position, ``o_i = R_{-i} u_i``.

    ``out`` ``[batch, heads, Lq, head_dim]`` (the average ``u_i = Σ_j a_ij R_j v_j``);
    ``q_positions`` integer ``[Lq]`` or ``[batch, Lq]``. Together with
    :func:`vo_rope_values` this gives ``o_i = Σ_j a_ij R_{j-i} v_j``. Returns ``out``'s
    shape and dtype.
    """
    return _rope(out, q_positions, inv_freq, base, pairing, rotary_dim, backend, inverse=True)


class VORoPE(PositionScheme):
    r"""VO-RoPE as a scheme: ``o_i = Σ_j a_ij R_{j-i} v_j``.

    ``transform_values`` rotates ``v_j`` by ``R_j`` (:func:`vo_rope_values`) and
    ``transform_output`` rotates the average back by ``R_{-i}`` (:func:`vo_rope_output`).
    ``rotary_dim`` rotates only the first dimensions (labml's RoPER rotates a fraction of
    each head). The hooks take and return ``[batch, heads, L, head_dim]`` tensors with integer
    positions ``[L]`` or ``[batch, L]``. :class:`RoPER` also rotates queries and keys.
    """

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        pairing: str = "half",
        rotary_dim: int | None = None,
        backend: Rotary = REFERENCE,
    ):
        super().__init__()
        self.head_dim = check_even("head_dim", head_dim)
        self.rotary_dim = _check_rotary_dim(self.head_dim, rotary_dim)
        self.base = check_base(base)
        self.pairing = check_choice("pairing", pairing, PAIRINGS)
        self.backend = _check_backend(backend)
        self.inv_freq = rope_frequencies(self.rotary_dim, self.base)

    def _rotate(self, x: Tensor, positions: Tensor, inverse: bool) -> Tensor:
        cos, sin = self.backend.cos_sin(positions, self.inv_freq, 1.0, dtype=compute_dtype(x))
        return self.backend.rotate_pairs(x, cos, sin, pairing=self.pairing, inverse=inverse)

    def transform_values(self, v: Tensor, k_positions: Tensor) -> Tensor:
        return self._rotate(v, k_positions, inverse=False)  # R_j v_j

    def transform_output(
        self, out: Tensor, probs: Tensor | None, q_positions: Tensor, k_positions: Tensor
    ) -> Tensor:
        return self._rotate(out, q_positions, inverse=True)  # R_{-i} u_i

    def extra_repr(self) -> str:
        return (
            f"places={self.places}, head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, "
            f"base={self.base}, pairing={self.pairing!r}"
        )


class RoPER(VORoPE):
    r"""RoPER (Harik and Jayasiri, labml.ai): VO-RoPE plus ordinary RoPE on queries and keys
    with the same frequencies, so both the weights and the values are relative."""

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        return self._rotate(q, q_positions, False), self._rotate(k, k_positions, False)
