r"""Biases that are a learned function of the distance: KERPLE and FIRE.

Place: **the scores** (see :mod:`pecourse.attention`). Like ALiBi (:mod:`.alibi`) and T5's
buckets (:mod:`.relative`), each scheme adds ``b_h(i, j)`` to the logit of query ``i`` and
key ``j`` in head ``h``; what differs is the family of functions ``b`` is drawn from.

* **KERPLE** (Chi, Fan, Ramadge and Rudnicky 2022, arXiv:2205.09921) reads ``-b`` as a
  conditionally positive definite kernel of the distance, with two learned positive numbers
  per head. The logarithmic variant is
  :math:`b_h(i, j) = -r_{1,h}\,\log(1 + r_{2,h}\,|i - j|)` and the power variant
  :math:`b_h(i, j) = -r_{1,h}\,|i - j|^{r_{2,h}}` with :math:`0 < r_{2,h} \le 2` (beyond 2
  the kernel is no longer conditionally positive definite). With ``r2 = 1`` the power
  variant is ALiBi with a learned slope ``r1``. The authors' code (``ParallelKerpleLog``
  and ``ParallelKerplePower`` in ``megatron/mpu/layers.py`` of github.com/chijames/KERPLE)
  initialises the factor in front uniformly in ``[0, 2)`` (log) or ``[0, 1)`` (power) and
  the other parameter in ``[0, 1)`` (log) or ``[0, 2)`` (power), and clamps both to at
  least ``0.01`` (the power's exponent also to at most 2); the schemes here do the same,
  clamping in the forward pass instead of in place.
* **FIRE** (Li et al. 2023, "Functional Interpolation for Relative Positions Improves Long
  Context Transformers", arXiv:2310.04418) learns the whole function with a small MLP
  ``f_θ`` (one hidden layer of 32 ReLU units, one output per head), fed the distance
  *divided by the query's own position*:

  .. math::
      b(i, j) = f_\theta\!\left(\frac{\psi(i - j)}{\psi(\max(i, L))}\right),
      \qquad \psi(x) = \log(c\,x + 1).

  The division is the *progressive interpolation*: for a query past ``L`` every key maps
  into ``[0, 1]``, the farthest (``j = 0``) to exactly 1, so a longer input never feeds
  ``f_θ`` a value it has not seen. ``ψ`` spreads out the small distances; ``c`` and the
  threshold ``L`` are learned. The values follow the code listing circulated with the
  paper (also in McLeish et al.'s ``cramming/architectures/embeddings.py``,
  github.com/mcleish7/arithmetic): ``c`` starts at 0.1, ``L`` is a fixed 512 times a
  learned multiplier that starts at 1, and ``ε = 10⁻⁶`` keeps the division finite.
  Because the normaliser reads the query's position ``i``, FIRE is relative only while
  ``i ≤ L``: past the threshold, shifting every position changes the bias.

Distances are ``i - j`` for keys at or before the query (``causal=True``; keys after it get
distance 0, and the causal mask removes them), or ``|i - j|`` (``causal=False``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from .._validate import check_float, check_int, check_positions, check_tensor
from ..attention import PositionScheme, relative_offsets

__all__ = [
    "kerple_log_bias",
    "kerple_power_bias",
    "KerpleLog",
    "KerplePower",
    "fire_distance",
    "fire_bias",
    "FIRE",
]

#: The authors' floor on every KERPLE parameter (``self.eps = 1e-2`` in their code).
KERPLE_EPS = 1e-2


def _distance(q_positions: Tensor, k_positions: Tensor, causal: bool) -> Tensor:
    """``i - j`` (0 for keys after the query) or ``|i - j|``: ``[..., Lq, Lk]``, int64."""
    offset = relative_offsets(q_positions, k_positions)  # j - i
    return (-offset).clamp(min=0) if causal else offset.abs()


def _per_head(values: Tensor, distance: Tensor) -> tuple[Tensor, Tensor]:
    """Broadcast ``[heads]`` parameters against ``[Lq, Lk]`` or ``[batch, Lq, Lk]`` distances."""
    d = distance[..., None, :, :].to(values.dtype)  # a heads axis before [Lq, Lk]
    return values[:, None, None], d


def _check_head_parameters(name1: str, r1: Tensor, name2: str, r2: Tensor, r2_max=None):
    check_tensor(name1, r1, ndim=1, floating=True)
    check_tensor(name2, r2, ndim=1, floating=True)
    if r1.shape != r2.shape:
        raise ValueError(
            f"{name1} and {name2} must both be [heads]; got {tuple(r1.shape)} and {tuple(r2.shape)}"
        )
    for name, value in ((name1, r1), (name2, r2)):
        if value.device.type == "cpu" and value.numel() and not bool((value > 0).all()):
            raise ValueError(f"{name} must be > 0 in every head, got {value.tolist()}")
    if r2_max is not None and r2.device.type == "cpu" and bool((r2 > r2_max).any()):
        raise ValueError(
            f"{name2} must be <= {r2_max} in every head (the power kernel is conditionally "
            f"positive definite only for exponents in (0, 2]), got {r2.tolist()}"
        )


# --------------------------------------------------------------------------------------
# KERPLE
# --------------------------------------------------------------------------------------
def kerple_log_bias(
    r1: Tensor, r2: Tensor, q_positions: Tensor, k_positions: Tensor, *, causal: bool = True
) -> Tensor:
    r"""KERPLE's logarithmic bias ``-r1_h · log(1 + r2_h · |i - j|)``.

    Chi et al. 2022 (arXiv:2205.09921), the logarithmic variant. ``r1`` and ``r2`` are
    ``[heads]``, both positive; positions ``[L]`` or ``[batch, L]``. Returns
    ``[heads, Lq, Lk]`` (or ``[batch, heads, Lq, Lk]`` for batched positions) in the
    parameters' dtype; with ``causal=True`` keys after the query get 0.
    """
    _check_head_parameters("r1", r1, "r2", r2)
    q_positions = check_positions("q_positions", q_positions)
    k_positions = check_positions("k_positions", k_positions)
    return _kerple_log(r1, r2, q_positions, k_positions, causal)


def _kerple_log(r1, r2, q_positions, k_positions, causal) -> Tensor:
    r1, d = _per_head(r1, _distance(q_positions, k_positions, causal))
    return -r1 * torch.log1p(r2[:, None, None] * d)  # -r1 log(1 + r2 |i - j|)


def kerple_power_bias(
    r1: Tensor, r2: Tensor, q_positions: Tensor, k_positions: Tensor, *, causal: bool = True
) -> Tensor:
    r"""KERPLE's power bias ``-r1_h · |i - j|^{r2_h}``, with ``r1 > 0`` and ``0 < r2 ≤ 2``.

    Chi et al. 2022 (arXiv:2205.09921), the power variant. ``r2 = 1`` is ALiBi with slope
    ``r1`` (:func:`pecourse.positions.alibi.alibi_bias_from_positions`). Shapes as
    :func:`kerple_log_bias`.
    """
    _check_head_parameters("r1", r1, "r2", r2, r2_max=2.0)
    q_positions = check_positions("q_positions", q_positions)
    k_positions = check_positions("k_positions", k_positions)
    return _kerple_power(r1, r2, q_positions, k_positions, causal)


def _kerple_power(r1, r2, q_positions, k_positions, causal) -> Tensor:
    r1, d = _per_head(r1, _distance(q_positions, k_positions, causal))
    # -r1 |i - j|^r2. At distance 0, pow's gradient with respect to r2 is 0 (torch defines
    # it so), not 0 · log 0.
    return -r1 * d.pow(r2[:, None, None])


class _Kerple(PositionScheme):
    """Two clamped, learned parameters per head; the subclass names the kernel."""

    _bias: Callable = staticmethod(_kerple_log)
    _init_scale: tuple[float, float] = (2.0, 1.0)
    _r2_max: float | None = None

    def __init__(self, num_heads: int, *, causal: bool = True):
        super().__init__()
        self.num_heads = check_int("num_heads", num_heads, minimum=1)
        self.causal = bool(causal)
        s1, s2 = self._init_scale  # the authors' uniform initialisation
        self.r1 = nn.Parameter(s1 * torch.rand(self.num_heads))
        self.r2 = nn.Parameter(s2 * torch.rand(self.num_heads))

    def parameters_in_use(self) -> tuple[Tensor, Tensor]:
        """``(r1, r2)`` as the bias uses them: at least ``KERPLE_EPS`` (``r2`` of the power
        kernel at most 2). Clamped here, not in place, so the stored values are the optimiser's."""
        return (
            self.r1.clamp(min=KERPLE_EPS),
            self.r2.clamp(min=KERPLE_EPS, max=self._r2_max),
        )

    def score_bias(self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        if q.shape[1] != self.num_heads:
            raise ValueError(
                f"q has {q.shape[1]} heads but this {type(self).__name__} was built for "
                f"num_heads={self.num_heads}"
            )
        r1, r2 = self.parameters_in_use()
        pos = (q_positions.to(q.device), k_positions.to(q.device))
        return type(self)._bias(r1, r2, *pos, self.causal).to(q.dtype)

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, causal={self.causal}, places={self.places}"


class KerpleLog(_Kerple):
    r"""KERPLE, logarithmic variant (arXiv:2205.09921): ``-r1_h log(1 + r2_h |i - j|)``.

    Learned ``r1`` and ``r2`` per head, initialised uniformly in ``[0, 2)`` and ``[0, 1)``
    and used clamped to at least 0.01, as in the authors' ``ParallelKerpleLog``.
    """

    _bias = staticmethod(_kerple_log)
    _init_scale = (2.0, 1.0)


class KerplePower(_Kerple):
    r"""KERPLE, power variant (arXiv:2205.09921): ``-r1_h |i - j|^{r2_h}``.

    Learned ``r1`` in ``[0, 1)`` and exponent ``r2`` in ``[0, 2)`` at initialisation, used
    clamped to ``r1 ≥ 0.01`` and ``0.01 ≤ r2 ≤ 2``, as in the authors' ``ParallelKerplePower``.
    """

    _bias = staticmethod(_kerple_power)
    _init_scale = (1.0, 2.0)
    _r2_max = 2.0


# --------------------------------------------------------------------------------------
# FIRE
# --------------------------------------------------------------------------------------
def fire_distance(
    q_positions: Tensor,
    k_positions: Tensor,
    *,
    c: Tensor | float | None,
    threshold: Tensor | float,
    eps: float = 1e-6,
    causal: bool = True,
) -> Tensor:
    r"""FIRE's input to the MLP: ``ψ(i - j) / ψ(max(i, L))`` with ``ψ(x) = log(c x + 1)``.

    Li et al. 2023 (arXiv:2310.04418): the progressively interpolated, log-transformed
    distance (``ε`` is added to the denominator, as in the paper's code listing).
    ``c=None`` drops the log transform (``ψ(x) = x``): then the value is
    ``(i - j) / max(i, L)``, the paper's plain progressive interpolation. ``c`` and
    ``threshold`` (``L``) may be tensors (learned scalars) or numbers, both positive.

    Positions ``[L]`` or ``[batch, L]``; returns ``[Lq, Lk]`` or ``[batch, Lq, Lk]``, float32
    (or ``c``'s dtype). With ``causal=True`` keys after the query get 0.
    """
    q_positions = check_positions("q_positions", q_positions)
    k_positions = check_positions("k_positions", k_positions)
    for name, value in (("c", c), ("threshold", threshold)):
        if isinstance(value, Tensor):
            check_tensor(name, value, ndim=0, floating=True)
            if value.device.type == "cpu" and not bool(value > 0):
                raise ValueError(f"{name} must be > 0, got {float(value)}")
        elif value is not None or name == "threshold":
            check_float(name, value, minimum=0.0, strict_minimum=True)
    eps = check_float("eps", eps, minimum=0.0)
    return _fire_distance(q_positions, k_positions, c, threshold, eps, causal)


def _fire_distance(q_positions, k_positions, c, threshold, eps, causal) -> Tensor:
    dtype = c.dtype if isinstance(c, Tensor) else torch.float32
    distance = _distance(q_positions, k_positions, causal).to(dtype)  # i - j
    # max(i, L): the query's own position, but never below the threshold L (short inputs).
    i = q_positions.to(dtype)
    normaliser = torch.maximum(i, torch.as_tensor(threshold, dtype=dtype, device=i.device))
    normaliser = normaliser[..., :, None]  # one per query row
    if c is not None:
        distance = torch.log1p(c * distance)  # ψ(i - j) = log(c (i - j) + 1)
        normaliser = torch.log1p(c * normaliser)  # ψ(max(i, L))
    return distance / (normaliser + eps)  # progressive interpolation: in [0, 1] past L


def fire_bias(
    mlp: Callable[[Tensor], Tensor],
    q_positions: Tensor,
    k_positions: Tensor,
    *,
    c: Tensor | float | None,
    threshold: Tensor | float,
    eps: float = 1e-6,
    causal: bool = True,
) -> Tensor:
    r"""FIRE's bias ``f_θ(ψ(i - j) / ψ(max(i, L)))``, one output of ``mlp`` per head.

    Li et al. 2023 (arXiv:2310.04418). ``mlp`` maps ``[..., 1]`` to ``[..., heads]`` (the
    paper: ``Linear(1, 32)``, ReLU, ``Linear(32, heads)``); the other arguments are
    :func:`fire_distance`'s. Returns ``[heads, Lq, Lk]`` (``[batch, heads, Lq, Lk]`` for
    batched positions).
    """
    x = fire_distance(q_positions, k_positions, c=c, threshold=threshold, eps=eps, causal=causal)
    return mlp(x[..., None]).movedim(-1, -3)  # [..., Lq, Lk, heads] -> [..., heads, Lq, Lk]


class FIRE(PositionScheme):
    r"""FIRE (arXiv:2310.04418) as a scheme: a learned MLP of the interpolated distance.

    Parameters: the MLP (``Linear(1, mlp_width)``, ReLU, ``Linear(mlp_width, num_heads)``),
    ``c`` (starts at ``init_c``) and a multiplier of the threshold (starts at 1; ``L`` is
    ``|multiplier| · init_threshold``), as in the paper's code listing. One MLP serves all
    heads of a layer. The course's models train on 64 tokens: with the listing's
    ``init_threshold=512`` the interpolation only starts past 512, so pass a threshold at
    the training length to see it act inside training.
    """

    def __init__(
        self,
        num_heads: int,
        *,
        mlp_width: int = 32,
        init_c: float = 0.1,
        init_threshold: float = 512.0,
        eps: float = 1e-6,
        causal: bool = True,
    ):
        super().__init__()
        self.num_heads = check_int("num_heads", num_heads, minimum=1)
        mlp_width = check_int("mlp_width", mlp_width, minimum=1)
        init_c = check_float("init_c", init_c, minimum=0.0, strict_minimum=True)
        init_threshold = check_float(
            "init_threshold", init_threshold, minimum=0.0, strict_minimum=True
        )
        self.eps = check_float("eps", eps, minimum=0.0)
        self.causal = bool(causal)
        self.mlp = nn.Sequential(
            nn.Linear(1, mlp_width), nn.ReLU(), nn.Linear(mlp_width, num_heads)
        )
        self.c = nn.Parameter(torch.tensor(init_c))
        self.threshold_multiplier = nn.Parameter(torch.tensor(1.0))
        self.register_buffer("init_threshold", torch.tensor(init_threshold))

    @property
    def threshold(self) -> Tensor:
        """``L = |multiplier| · init_threshold`` (the absolute value keeps it positive)."""
        return (self.threshold_multiplier * self.init_threshold).abs()

    def score_bias(self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        if q.shape[1] != self.num_heads:
            raise ValueError(
                f"q has {q.shape[1]} heads but this FIRE was built for num_heads={self.num_heads}"
            )
        pos = (q_positions.to(q.device), k_positions.to(q.device))
        x = _fire_distance(*pos, self.c, self.threshold, self.eps, self.causal)
        return self.mlp(x[..., None]).movedim(-1, -3).to(q.dtype)

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, causal={self.causal}, eps={self.eps}, "
            f"places={self.places}"
        )
