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

Numerics (see DESIGN.md): the angle ``m·θ_i`` is computed in float64 (bf16 cannot even
hold position 257, and float32 angles at position 10^6 are off by a few hundredths of a
radian: up to about 0.05 rad at ``d = 128`` with transformers' float32 ``inv_freq``), its
cos/sin are taken there, the rotation is done in float32, and the result is cast back to
the input dtype.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict

import torch
from torch import Tensor

from .._validate import (
    check_choice,
    check_even,
    check_float,
    check_int,
    check_positions,
    check_tensor,
)
from ..attention import PositionScheme

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
    "check_rotary_dim",
]

#: The two ways real code pairs up dimensions for rotation.
PAIRINGS = ("half", "interleaved")


def inv_freq(head_dim: int, base: float = 10000.0, *, dtype=torch.float64, device=None) -> Tensor:
    r"""The RoPE frequencies ``θ_i = base^{-2i/d}`` (arXiv:2104.09864, eq. 15).

    Returns a ``[head_dim // 2]`` tensor, float64 by default so that the angle table built
    from it is exact to double precision (paper eq. 15 counts ``i`` from 1; this counts
    from 0). ``.float()`` agrees with transformers' float32 ``inv_freq`` to one unit in the
    last place for power-of-two ``head_dim`` and to a few units otherwise (up to ~7 for 80,
    96, 112: transformers' float32 ``pow`` is the less exact side). Refuses an odd or
    non-positive ``head_dim`` and a ``base`` that is not > 1.
    """
    head_dim = check_even("head_dim", head_dim)
    base = check_float("base", base, minimum=1.0, strict_minimum=True)
    exponent = torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim
    return (base**-exponent).to(dtype)  # θ_i = b^(-2i/d)


# ``apply_rope`` has a keyword argument named ``inv_freq``; this alias reaches the function.
_default_inv_freq = inv_freq


def _check_inv_freq(inv_freq: Tensor, rotary_dim: int) -> Tensor:
    check_tensor("inv_freq", inv_freq, ndim=1, floating=True)
    if inv_freq.shape[0] != rotary_dim // 2:
        raise ValueError(
            f"inv_freq must have rotary_dim // 2 = {rotary_dim // 2} entries (one per rotated "
            f"pair), got {inv_freq.shape[0]}"
        )
    return inv_freq


def _angle_cos_sin(
    positions: Tensor, inv_freq: Tensor, attention_factor: float, dtype
) -> tuple[Tensor, Tensor]:
    """cos/sin of ``positions ⊗ inv_freq`` in float64, scaled, then cast to ``dtype``.

    ``positions`` may be fractional here (leaky ReRoPE needs ``m/k``); the public functions
    refuse float positions before they get this far.
    """
    angles = positions.to(torch.float64)[..., None] * inv_freq.to(
        device=positions.device, dtype=torch.float64
    )  # m·θ_i, exact to double precision
    cos = (torch.cos(angles) * attention_factor).to(dtype)
    sin = (torch.sin(angles) * attention_factor).to(dtype)
    return cos, sin


class _TableCache:
    r"""cos/sin tables kept for the positions that recur: a small LRU cache keyed on *values*.

    Every layer of a forward pass rotates at the same positions, and so does every training
    step at a fixed length; production code (transformers' ``LlamaRotaryEmbedding``) builds
    the table once per forward for the same reason. An entry holds copies of the
    ``positions`` and ``inv_freq`` it was built from and is returned only when both are equal
    in value (``torch.equal``, linear in the sequence, far below the rotation's cost), so a
    tensor changed in place can never get a stale table. Not used while tracing or when
    ``inv_freq`` requires grad (the table must then stay in the graph).
    """

    def __init__(self, size: int = 8):
        self.size = size
        self._entries: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, positions: Tensor, inv_freq: Tensor, attention_factor: float, dtype):
        if inv_freq.requires_grad or torch.compiler.is_compiling():
            return _angle_cos_sin(positions, inv_freq, attention_factor, dtype)
        key = (
            tuple(positions.shape),
            positions.dtype,
            positions.device,
            inv_freq.shape[0],
            inv_freq.dtype,
            inv_freq.device,
            float(attention_factor),
            dtype,
        )
        with self._lock:
            for (k, _), entry in self._entries.items():
                pos, freq, tables = entry
                if k == key and torch.equal(pos, positions) and torch.equal(freq, inv_freq):
                    self._entries.move_to_end((k, id(entry)))
                    self.hits += 1
                    return tables
        tables = _angle_cos_sin(positions, inv_freq, attention_factor, dtype)
        entry = (positions.clone(), inv_freq.detach().clone(), tables)
        with self._lock:
            self.misses += 1
            self._entries[(key, id(entry))] = entry
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return tables

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0


#: The cos/sin tables of :func:`apply_rope` and :class:`RoPE`, shared by every layer.
TABLES = _TableCache()


@functools.lru_cache(maxsize=32)
def _default_inv_freq_cached(rotary_dim: int, base: float, device: str) -> Tensor:
    return inv_freq(rotary_dim, base, device=device)


def rope_cos_sin(
    positions: Tensor, inv_freq: Tensor, attention_factor: float = 1.0, *, dtype=torch.float32
) -> tuple[Tensor, Tensor]:
    r"""The tables ``a·cos(m θ_i)`` and ``a·sin(m θ_i)`` for every position and pair.

    ``positions`` integer ``[seq]`` or ``[batch, seq]``; ``inv_freq`` ``[d/2]``. Returns
    ``(cos, sin)`` shaped ``[..., seq, d/2]`` (one column per *pair*, not duplicated as in
    transformers' ``torch.cat((freqs, freqs))``). ``a`` is ``attention_factor`` (YaRN's
    temperature, transformers' ``attention_scaling``). RoFormer (arXiv:2104.09864) eq. 34
    uses exactly these two tables. The angles are computed in float64 and only the finished
    table is cast to ``dtype``. Refuses float or negative positions, an ``inv_freq`` that is
    not 1-D float, and a negative ``attention_factor``.
    """
    positions = check_positions("positions", positions)
    check_tensor("inv_freq", inv_freq, ndim=1, floating=True)
    attention_factor = check_float("attention_factor", attention_factor, minimum=0.0)
    return _angle_cos_sin(positions, inv_freq, attention_factor, dtype)


def _compute_dtype(x: Tensor):
    # float32 arithmetic for half-precision inputs; float64 inputs keep their precision.
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _broadcast_table(table: Tensor, x: Tensor) -> Tensor:
    """``[seq, d/2]`` -> ``[1, 1, seq, d/2]``; ``[batch, seq, d/2]`` -> ``[batch, 1, seq, d/2]``."""
    return table[None, None] if table.ndim == 2 else table[:, None]


def _rotate(x: Tensor, cos: Tensor, sin: Tensor, pairing: str) -> Tensor:
    r"""Rotate every pair of ``x`` by the angles whose cos/sin are given.

    ``x`` ``[b, h, s, r]`` (``r`` even), ``cos``/``sin`` broadcastable to ``[b, h, s, r/2]``.
    For a pair ``(x1, x2)``:

    .. math:: (x1, x2) \mapsto (x1 \cos - x2 \sin,\; x2 \cos + x1 \sin)

    (arXiv:2104.09864, eq. 34). Works in ``cos.dtype`` and writes into one preallocated
    output (no ``torch.cat`` temporaries); returns ``x.dtype``. This is the single place a
    faster kernel can be dispatched from.
    """
    r = x.shape[-1]
    xf = x.to(cos.dtype)
    if pairing == "half":
        x1, x2 = xf[..., : r // 2], xf[..., r // 2 :]
        first, second = slice(0, r // 2), slice(r // 2, r)
    else:  # interleaved
        x1, x2 = xf[..., 0::2], xf[..., 1::2]
        first, second = slice(0, r, 2), slice(1, r, 2)
    out = torch.empty(xf.shape, dtype=cos.dtype, device=x.device)
    out[..., first] = x1 * cos - x2 * sin  # x1' = x1 cos(mθ) - x2 sin(mθ)
    out[..., second] = x2 * cos + x1 * sin  # x2' = x2 cos(mθ) + x1 sin(mθ)
    return out.to(x.dtype)


def check_rotary_dim(head_dim: int, rotary_dim) -> int:
    """``rotary_dim`` (``None`` means all of ``head_dim``): even and at most ``head_dim``."""
    rotary_dim = check_even("rotary_dim", head_dim if rotary_dim is None else rotary_dim)
    if rotary_dim > head_dim:
        raise ValueError(
            f"rotary_dim must be <= head_dim ({head_dim}) (only the first rotary_dim "
            f"dimensions rotate), got {rotary_dim}"
        )
    return rotary_dim


def _check_rope_args(x: Tensor, positions: Tensor, pairing: str, rotary_dim):
    """Shared validation of :func:`apply_rope` and friends; returns ``rotary_dim``."""
    check_tensor("x", x, ndim=4, floating=True)
    check_choice("pairing", pairing, PAIRINGS)
    head_dim = check_even("head_dim (x.shape[-1])", x.shape[-1])
    rotary_dim = check_rotary_dim(head_dim, rotary_dim)
    positions = check_positions("positions", positions)
    b, _, s, _ = x.shape
    if positions.shape[-1] != s:
        raise ValueError(
            f"positions must have one entry per token (seq = x.shape[2] = {s}), got shape "
            f"{tuple(positions.shape)}"
        )
    if positions.ndim == 2 and positions.shape[0] not in (1, b):
        raise ValueError(
            f"positions [batch, seq] must have batch = {b} (or 1 to share), got shape "
            f"{tuple(positions.shape)}"
        )
    return positions, rotary_dim


def _apply_with_tables(
    x: Tensor, cos: Tensor, sin: Tensor, pairing: str, rotary_dim: int, impl: str = "fast"
):
    """Rotate the first ``rotary_dim`` dims of ``x``; the rest pass through unchanged.

    ``impl="fast"`` (on a CPU) uses :func:`pecourse.kernels.rope_cpu.rotate`: one pass over
    ``x``, no temporaries, the same float32 products, so the same numbers bit for bit.
    ``impl="reference"`` is the readable code below.
    """
    if impl == "fast" and x.device.type == "cpu":
        from ..kernels.rope_cpu import rotate as _fast_rotate

        return _fast_rotate(x, cos, sin, pairing=pairing)
    cos, sin = _broadcast_table(cos, x), _broadcast_table(sin, x)
    if rotary_dim == x.shape[-1]:
        return _rotate(x, cos, sin, pairing)
    # Partial rotary (GPT-NeoX rotary_pct, Phi partial_rotary_factor): dims >= rotary_dim
    # carry no position at all.
    out = x.clone()
    out[..., :rotary_dim] = _rotate(x[..., :rotary_dim], cos, sin, pairing)
    return out


def apply_rope(
    x: Tensor,
    positions: Tensor,
    *,
    inv_freq: Tensor | None = None,
    base: float = 10000.0,
    pairing: str = "half",
    attention_factor: float = 1.0,
    rotary_dim: int | None = None,
    impl: str = "fast",
) -> Tensor:
    r"""Rotate queries or keys by their positions (RoPE, arXiv:2104.09864, eq. 34).

    ``x`` ``[batch, heads, seq, head_dim]``; ``positions`` integer ``[seq]`` or
    ``[batch, seq]``. Returns a tensor shaped and typed like ``x``.

    * ``inv_freq`` ``[rotary_dim/2]``: frequencies to use (from
      :mod:`pecourse.positions.rope_scaling`); default :func:`inv_freq` ``(rotary_dim, base)``.
    * ``pairing``: ``"half"`` (NeoX / transformers) or ``"interleaved"`` (GPT-J / Meta).
    * ``attention_factor``: multiplies cos and sin, as transformers' ``attention_scaling``
      (so the logits are scaled by its square).
    * ``rotary_dim``: rotate only the first ``rotary_dim`` dimensions (partial rotary).
    * ``impl``: ``"fast"`` (default: the one-pass CPU kernel of
      :mod:`pecourse.kernels.rope_cpu` on a CPU) or ``"reference"`` (the readable PyTorch
      code); both give the same numbers.

    Refuses: ``x`` not 4-D float, odd ``head_dim`` or ``rotary_dim``, ``rotary_dim >
    head_dim``, an unknown ``pairing`` or ``impl``, float or negative positions, positions
    whose length is not ``seq``, an ``inv_freq`` of the wrong length.
    """
    positions, rotary_dim = _check_rope_args(x, positions, pairing, rotary_dim)
    impl = check_choice("impl", impl, ("fast", "reference"))
    if inv_freq is None:
        base = check_float("base", base, minimum=1.0, strict_minimum=True)
        inv_freq = _default_inv_freq_cached(rotary_dim, base, str(x.device))
    _check_inv_freq(inv_freq, rotary_dim)
    attention_factor = check_float("attention_factor", attention_factor, minimum=0.0)
    cos, sin = TABLES.get(positions, inv_freq, attention_factor, _compute_dtype(x))
    return _apply_with_tables(x, cos, sin, pairing, rotary_dim, impl)


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

    Same arguments, shapes and refusals as :func:`apply_rope`, and the same result to
    float32 round-off; it exists to show that a rotation in a plane *is* a complex product.
    """
    positions, rotary_dim = _check_rope_args(x, positions, pairing, rotary_dim)
    if inv_freq is None:
        inv_freq = _default_inv_freq(rotary_dim, base, device=x.device)
    _check_inv_freq(inv_freq, rotary_dim)
    attention_factor = check_float("attention_factor", attention_factor, minimum=0.0)
    angles = positions.to(torch.float64)[..., None] * inv_freq.to(x.device, torch.float64)
    # a·e^{i m θ} in complex128, then complex64 (float32 parts) for the product.
    rot = torch.polar(torch.full_like(angles, attention_factor), angles)
    rot = _broadcast_table(rot, x)
    real = _compute_dtype(x)
    rot = rot.to(torch.complex128 if real == torch.float64 else torch.complex64)
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
    ``pairing="interleaved"`` it is exactly the paper's block-diagonal matrix. Refuses a
    negative ``position``, an odd ``head_dim``, ``base`` ≤ 1 and an unknown ``pairing``.
    """
    position = check_int("position", position, minimum=0)
    head_dim = check_even("head_dim", head_dim)
    check_choice("pairing", pairing, PAIRINGS)
    angles = position * _default_inv_freq(head_dim, base)
    c, s = torch.cos(angles), torch.sin(angles)
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
    shape. Refuses float or negative distances, an odd ``head_dim`` and ``base`` ≤ 1.
    """
    distances = check_positions("distances", distances, ndim=(0, 1, 2))
    theta = _default_inv_freq(head_dim, base)
    phases = torch.polar(torch.ones(()).double(), distances.double()[..., None] * theta)
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
    ``weight``'s shape. Refuses a ``weight`` that is not 1-D or 2-D, a row count not
    divisible by ``num_heads``, an odd head size and an unknown ``to``.
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


def _check_head_dim(scheme, q: Tensor, k: Tensor) -> None:
    """A scheme built for ``head_dim`` refuses q/k of another size (no silent partial rotary)."""
    for name, t in (("q", q), ("k", k)):
        if t.ndim != 4 or t.shape[-1] != scheme.head_dim:
            raise ValueError(
                f"{type(scheme).__name__} was built for head_dim={scheme.head_dim}; {name} must be "
                f"[batch, heads, seq, {scheme.head_dim}], got {tuple(t.shape)}"
            )


class RoPE(PositionScheme):
    """RoPE as a positional scheme: rotates queries and keys in the ``rotate`` hook.

    ``RoPE(head_dim, base=10000.0, pairing="half", rotary_dim=None, scaling="default",
    **scaling_kwargs)`` where ``scaling`` names an entry of
    :data:`pecourse.positions.rope_scaling.SCALINGS` and ``scaling_kwargs`` are its
    parameters (``RoPE(64, scaling="yarn", factor=4, original_max_position=2048)``).

    ``"dynamic"`` and ``"longrope"`` depend on the sequence length: they are recomputed on
    every call from ``seq_len = max(position) + 1``, so the frequencies grow past the
    original length and return to the original ones below it — there is no stale cache.
    (transformers' dynamic RoPE differs in one regime: after a long input it keeps the
    stretched frequencies for any later length that is still above the original one.)
    :attr:`inv_freq` and :attr:`attention_factor` hold the values the last call used.
    ``rotate`` takes ``q`` ``[batch, heads, Lq, head_dim]``, ``k`` ``[batch, kv_heads, Lk,
    head_dim]`` and integer positions ``[L]`` or ``[batch, L]``, and returns both rotated,
    shapes and dtypes kept. Refuses an unknown scaling name or parameters that scaling does
    not accept, an odd ``head_dim``/``rotary_dim``, ``rotary_dim > head_dim``, ``base`` ≤ 1,
    an unknown ``pairing``, and q/k whose last size is not ``head_dim``.
    """

    places = ("qk",)
    _SEQ_DEPENDENT = ("dynamic", "longrope")

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        pairing: str = "half",
        rotary_dim: int | None = None,
        scaling: str = "default",
        **scaling_kwargs,
    ):
        super().__init__()
        from .rope_scaling import SCALINGS

        self.head_dim = check_even("head_dim", head_dim)
        self.rotary_dim = check_rotary_dim(self.head_dim, rotary_dim)
        self.base = check_float("base", base, minimum=1.0, strict_minimum=True)
        self.pairing = check_choice("pairing", pairing, PAIRINGS)
        self.scaling = check_choice("scaling", scaling, tuple(SCALINGS))
        self.scaling_kwargs = dict(scaling_kwargs)
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
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        _check_head_dim(self, q, k)
        if self.scaling in self._SEQ_DEPENDENT:
            check_positions("q_positions", q_positions)
            check_positions("k_positions", k_positions)
            seq_len = 1 + max(int(p.max()) if p.numel() else -1 for p in (q_positions, k_positions))
            self.inv_freq, self.attention_factor = self.frequencies(max(seq_len, 1))
        q_positions, rotary_dim = _check_rope_args(q, q_positions, self.pairing, self.rotary_dim)
        k_positions, _ = _check_rope_args(k, k_positions, self.pairing, self.rotary_dim)
        # Queries and keys at the same positions, and every layer of the model, share one
        # table: built once, then found in the cache (which compares values, never stale).
        q_tables = TABLES.get(q_positions, self.inv_freq, self.attention_factor, _compute_dtype(q))
        k_tables = TABLES.get(k_positions, self.inv_freq, self.attention_factor, _compute_dtype(k))
        q = _apply_with_tables(q, *q_tables, self.pairing, rotary_dim)
        return q, _apply_with_tables(k, *k_tables, self.pairing, rotary_dim)

    def extra_repr(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.scaling_kwargs.items())
        return (
            f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base}, "
            f"pairing={self.pairing!r}, scaling={self.scaling!r}{extra}"
        )
