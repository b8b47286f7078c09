"""KERPLE (Chi et al. 2022) and FIRE (Li et al. 2023): biases that are a learned function of
the distance.

Neither reference runs here (the authors' KERPLE is a GPT-NeoX fork that needs CUDA; FIRE has
no package), so the numbers are worked from the papers' equations with plain ``math`` and
checked against the conventions of the authors' code (github.com/chijames/KERPLE,
``megatron/mpu/layers.py``) and of the FIRE listing (github.com/mcleish7/arithmetic,
``cramming/architectures/embeddings.py``): see the module docstring.
"""

import math

import pytest
import torch
from torch import nn

from pecourse.attention import attention, causal_mask
from pecourse.positions.alibi import alibi_bias_from_positions, slopes
from pecourse.positions.distance_bias import (
    FIRE,
    KERPLE_EPS,
    KerpleLog,
    KerplePower,
    fire_bias,
    fire_distance,
    kerple_log_bias,
    kerple_power_bias,
)

POS = torch.arange(6)


# --- KERPLE: the equations, worked by hand -----------------------------------------------
def test_kerple_log_is_the_papers_kernel():
    r1, r2 = torch.tensor([0.5, 1.9]), torch.tensor([0.3, 0.9])
    got = kerple_log_bias(r1, r2, POS, POS)
    assert got.shape == (2, 6, 6)
    for h in range(2):
        for i in range(6):
            for j in range(6):
                want = -r1[h].item() * math.log(1 + r2[h].item() * (i - j)) if j <= i else 0.0
                assert got[h, i, j].item() == pytest.approx(want, rel=1e-6, abs=1e-7)
    # One entry by hand: head 0, distance 3: -0.5 · log(1.9) = -0.3209269...
    assert got[0, 3, 0].item() == pytest.approx(-0.32092694, rel=1e-6)


def test_kerple_power_is_the_papers_kernel():
    r1, r2 = torch.tensor([0.5, 0.25]), torch.tensor([1.5, 0.5])
    got = kerple_power_bias(r1, r2, POS, POS)
    assert got[0, 4, 0].item() == pytest.approx(-4.0)  # -0.5 · 4^1.5
    assert got[1, 5, 1].item() == pytest.approx(-0.5)  # -0.25 · 4^0.5
    for h in range(2):
        for i in range(6):
            for j in range(i + 1):
                want = -r1[h].item() * (i - j) ** r2[h].item()
                assert got[h, i, j].item() == pytest.approx(want, rel=1e-6, abs=1e-7)
    assert torch.equal(got.triu(1), torch.zeros_like(got))  # keys after the query: 0


@pytest.mark.parametrize("causal", [True, False])
def test_kerple_power_with_exponent_one_is_alibi(causal):
    m = slopes(8)
    pos = torch.tensor([0, 2, 3, 7, 20])  # not contiguous: positions, not indices
    got = kerple_power_bias(m, torch.ones(8), pos, pos, causal=causal)
    torch.testing.assert_close(got, alibi_bias_from_positions(m, pos, pos, causal=causal))


@pytest.mark.parametrize("bias", [kerple_log_bias, kerple_power_bias])
def test_kerple_depends_on_the_offset_only(bias):
    r1, r2 = torch.tensor([0.7, 1.3, 0.2]), torch.tensor([0.4, 1.1, 1.9])
    pos = torch.tensor([1, 4, 5, 9, 30])
    base = bias(r1, r2, pos, pos, causal=False)
    torch.testing.assert_close(bias(r1, r2, pos + 1000, pos + 1000, causal=False), base)
    torch.testing.assert_close(base, base.transpose(-1, -2))  # |i - j|: symmetric
    causal = bias(r1, r2, pos, pos)
    torch.testing.assert_close(causal.tril(), base.tril())  # the same at and before i


def test_kerple_shapes_for_batched_positions_and_decoding():
    r1, r2 = torch.tensor([0.5, 1.0, 1.5]), torch.tensor([0.2, 0.4, 0.6])
    batched = torch.stack([torch.arange(5), torch.arange(5) + 10])
    assert kerple_log_bias(r1, r2, batched, batched).shape == (2, 3, 5, 5)
    last = kerple_log_bias(r1, r2, torch.tensor([4]), torch.arange(5))  # one new query
    assert last.shape == (3, 1, 5)
    torch.testing.assert_close(last[:, 0], kerple_log_bias(r1, r2, POS[:5], POS[:5])[:, 4])


def test_kerple_refuses_bad_parameters():
    good = torch.tensor([0.5, 0.5])
    with pytest.raises(ValueError, match="r1 must be > 0"):
        kerple_log_bias(torch.tensor([0.5, 0.0]), good, POS, POS)
    with pytest.raises(ValueError, match="r2 must be <= 2"):
        kerple_power_bias(good, torch.tensor([1.0, 2.5]), POS, POS)
    with pytest.raises(ValueError, match=r"r1 and r2 must both be \[heads\]"):
        kerple_log_bias(good, torch.tensor([0.5, 0.5, 0.5]), POS, POS)
    with pytest.raises(TypeError, match="r1 must be a floating-point tensor"):
        kerple_log_bias(torch.tensor([1, 2]), good, POS, POS)
    with pytest.raises(TypeError, match="q_positions must hold integer positions"):
        kerple_log_bias(good, good, POS.float(), POS)
    with pytest.raises(ValueError, match="num_heads must be >= 1"):
        KerpleLog(0)
    with pytest.raises(ValueError, match="num_heads=4"):
        q = torch.zeros(1, 2, 6, 8)
        KerplePower(4).score_bias(q, q, POS, POS)


# --- KERPLE as a scheme ------------------------------------------------------------------
def test_kerple_schemes_start_where_the_authors_start():
    torch.manual_seed(0)
    log, power = KerpleLog(2000), KerplePower(2000)
    # log: r1 = 2·U[0, 1), r2 = U[0, 1); power: r1 = U[0, 1), r2 = 2·U[0, 1).
    for scheme, (top1, top2) in ((log, (2, 1)), (power, (1, 2))):
        for p, top in ((scheme.r1, top1), (scheme.r2, top2)):
            assert 0 <= p.min() and p.max() < top and p.max() > 0.95 * top


def test_kerple_schemes_clamp_as_the_authors_do():
    scheme = KerplePower(3)
    with torch.no_grad():
        scheme.r1.copy_(torch.tensor([-1.0, 0.5, 0.005]))
        scheme.r2.copy_(torch.tensor([0.5, 3.0, 0.001]))
    r1, r2 = torch.tensor([KERPLE_EPS, 0.5, KERPLE_EPS]), torch.tensor([0.5, 2.0, KERPLE_EPS])
    q = torch.zeros(1, 3, 6, 8)
    torch.testing.assert_close(
        scheme.score_bias(q, q, POS, POS), kerple_power_bias(r1, r2, POS, POS)
    )
    assert scheme.r2[1].item() == 3.0  # clamped where it is used, not in place


@pytest.mark.parametrize("make", [KerpleLog, KerplePower, lambda h: FIRE(h, init_threshold=4.0)])
def test_in_attention_it_is_softmax_of_the_biased_logits(make):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 9, 8, generator=g, dtype=torch.float64) for _ in range(3))
    scheme = make(4).double()
    bias = scheme.score_bias(q, k, torch.arange(9), torch.arange(9))
    logits = q @ k.transpose(-1, -2) / math.sqrt(8) + bias
    want = torch.softmax(logits.masked_fill(~causal_mask(9, 9), float("-inf")), -1) @ v
    torch.testing.assert_close(attention(q, k, v, scheme), want)
    torch.testing.assert_close(attention(q, k, v, scheme, fused=True), want)
    attention(q, k, v, scheme).square().sum().backward()
    for name, p in scheme.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        if name != "mlp.2.bias":  # a bias shared by every key: softmax cancels it
            assert p.grad.abs().sum() > 0, name


def test_a_fractional_exponent_has_a_finite_gradient_at_distance_zero():
    scheme = KerplePower(2)
    with torch.no_grad():
        scheme.r2.copy_(torch.tensor([0.3, 0.7]))  # d/dr2 of 0^r2 would be 0 · log 0
    q = torch.zeros(1, 2, 5, 4)
    scheme.score_bias(q, q, POS[:5], POS[:5]).sum().backward()
    assert torch.isfinite(scheme.r2.grad).all() and scheme.r2.grad.abs().sum() > 0


# --- FIRE ---------------------------------------------------------------------------------
def _tiny_mlp() -> nn.Module:
    """f(x) = [2x + 0.5, -6x] for x >= 0: a hand-set MLP of the paper's shape."""
    mlp = nn.Sequential(nn.Linear(1, 1), nn.ReLU(), nn.Linear(1, 2))
    with torch.no_grad():
        mlp[0].weight.fill_(2.0), mlp[0].bias.zero_()
        (
            mlp[2].weight.copy_(torch.tensor([[1.0], [-3.0]])),
            mlp[2].bias.copy_(torch.tensor([0.5, 0.0])),
        )
    return mlp


def test_fire_is_the_papers_equation():
    c, L, eps = 0.1, 4.0, 1e-6
    pos = torch.arange(11)
    got = fire_bias(_tiny_mlp(), pos, pos, c=c, threshold=L, eps=eps)
    assert got.shape == (2, 11, 11)
    for i in range(11):
        for j in range(i + 1):
            x = math.log(1 + c * (i - j)) / (math.log(1 + c * max(i, L)) + eps)
            assert got[0, i, j].item() == pytest.approx(2 * x + 0.5, rel=1e-5, abs=1e-6)
            assert got[1, i, j].item() == pytest.approx(-6 * x, rel=1e-5, abs=1e-6)
    # By hand: query 10, key 4: log(1.6) / log(2) = 0.678072; f = 2 · 0.678072 + 0.5.
    assert got[0, 10, 4].item() == pytest.approx(1.856144, rel=1e-5)


def test_fire_without_the_log_is_the_ratio_of_distance_to_position():
    pos = torch.arange(1, 41)
    x = fire_distance(pos, pos, c=None, threshold=1.0, eps=0.0)
    i, j = pos[:, None].double(), pos[None, :].double()
    torch.testing.assert_close(x, ((i - j) / i).clamp(min=0).float())
    # So the bias depends on (i - j)/i: query 2i, key 2j gets what query i, key j got.
    bias = fire_bias(_tiny_mlp(), pos, pos, c=None, threshold=1.0, eps=0.0)
    small = torch.arange(1, 21)  # positions 1..20 sit at indices p - 1, their doubles at 2p - 1
    at_p, at_2p = small - 1, 2 * small - 1
    torch.testing.assert_close(bias[:, at_2p][:, :, at_2p], bias[:, at_p][:, :, at_p])


def test_fire_maps_every_key_into_zero_one_past_the_threshold():
    mlp = _tiny_mlp()
    for length in (100, 10_000):
        pos = torch.arange(length)
        x = fire_distance(pos[-1:], pos, c=0.1, threshold=32.0)
        assert 0 <= x.min() and x.max() <= 1  # no distance the MLP could not have seen
        assert x[0, 0].item() == pytest.approx(1.0, abs=1e-5)  # the first key: exactly 1
        far = fire_bias(mlp, pos[-1:], pos[:1], c=0.1, threshold=32.0)
        torch.testing.assert_close(far[:, 0, 0], torch.tensor([2.5, -6.0]), atol=1e-4, rtol=0)
    short = fire_distance(torch.tensor([10]), torch.arange(11), c=0.1, threshold=32.0)
    assert short.max() < 1  # below the threshold the normaliser is psi(L), not psi(i)


def test_fire_is_relative_below_its_threshold_only():
    torch.manual_seed(0)
    scheme = FIRE(2, init_threshold=64.0)
    q = torch.zeros(1, 2, 8, 4)
    pos = torch.arange(8)
    with torch.no_grad():
        base = scheme.score_bias(q, q, pos, pos)
        torch.testing.assert_close(scheme.score_bias(q, q, pos + 50, pos + 50), base)
        moved = scheme.score_bias(q, q, pos + 500, pos + 500)
    assert not torch.allclose(moved.tril(), base.tril(), atol=1e-3)


def test_fire_starts_as_the_listing_does():
    scheme = FIRE(6)
    assert scheme.c.item() == pytest.approx(0.1) and scheme.threshold.item() == 512.0
    assert [tuple(p.shape) for p in scheme.mlp.parameters()] == [(32, 1), (32,), (6, 32), (6,)]
    assert scheme.places == ("scores",) and not scheme.needs_probs
    batched = torch.stack([torch.arange(5), torch.arange(5) + 3])
    assert scheme.score_bias(torch.zeros(2, 6, 5, 4), None, batched, batched).shape == (2, 6, 5, 5)


def test_fire_refuses_bad_parameters():
    with pytest.raises(ValueError, match="init_c must be > 0"):
        FIRE(2, init_c=0.0)
    with pytest.raises(ValueError, match="init_threshold must be > 0"):
        FIRE(2, init_threshold=-5.0)
    with pytest.raises(ValueError, match="mlp_width must be >= 1"):
        FIRE(2, mlp_width=0)
    with pytest.raises(ValueError, match="c must be > 0"):
        fire_distance(POS, POS, c=torch.tensor(-0.1), threshold=8.0)
    with pytest.raises(TypeError, match="threshold must be a real number"):
        fire_distance(POS, POS, c=0.1, threshold=None)
    with pytest.raises(ValueError, match="num_heads=2"):
        q = torch.zeros(1, 3, 6, 4)
        FIRE(2).score_bias(q, q, POS, POS)
