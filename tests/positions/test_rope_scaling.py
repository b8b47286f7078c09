"""RoPE scalings: each cross-referenced against transformers' ROPE_INIT_FUNCTIONS, plus the
properties each paper claims and the refusals."""

from __future__ import annotations

import inspect
import math

import pytest
import torch

from pecourse.positions import rope_scaling
from pecourse.positions.rope import RoPE, inv_freq
from pecourse.positions.rope_scaling import (
    SCALINGS,
    dynamic,
    linear,
    llama3,
    longrope,
    ntk,
    ntk_by_parts,
    yarn,
    yarn_mscale,
)

HEAD_DIM = 64


def _config(rope_parameters, max_position_embeddings=2048, head_dim=HEAD_DIM):
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=4 * head_dim,
        num_attention_heads=4,
        head_dim=head_dim,
        max_position_embeddings=max_position_embeddings,
        rope_parameters=rope_parameters,
    )


def _theirs(rope_type, params, max_pos=2048, seq_len=None, head_dim=HEAD_DIM):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    cfg = _config({"rope_type": rope_type, **params}, max_pos, head_dim)
    f, a = ROPE_INIT_FUNCTIONS[rope_type](cfg, "cpu", seq_len=seq_len)
    return f, a


def _close(ours, theirs):
    """Equal to transformers' float32 computation up to float32 round-off."""
    assert ours.dtype == torch.float64 and ours.shape == theirs.shape
    torch.testing.assert_close(ours, theirs.double(), rtol=1e-6, atol=0)


# --- registry --------------------------------------------------------------------------


def test_the_registry_is_every_scaling_function_with_the_shared_signature():
    def is_scaling(fn):
        if not inspect.isfunction(fn):
            return False
        return list(inspect.signature(fn).parameters)[:2] == ["head_dim", "base"]

    public = {n for n in rope_scaling.__all__ if is_scaling(getattr(rope_scaling, n))}
    assert set(SCALINGS) == public  # nothing registered under another name, nothing left out
    rope_base = inspect.signature(RoPE).parameters["base"].default
    for name, fn in SCALINGS.items():
        assert getattr(rope_scaling, name) is fn, name
        params = list(inspect.signature(fn).parameters.values())
        assert params[1].default == rope_base, name  # the scheme's default base
        assert all(p.kind is p.KEYWORD_ONLY for p in params[2:]), name


# --- cross-reference with transformers --------------------------------------------------


@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_linear_matches_transformers(base):
    f, a = _theirs("linear", {"rope_theta": base, "factor": 4.0})
    ours, af = linear(HEAD_DIM, base, factor=4.0)
    _close(ours, f)
    assert af == a == 1.0


@pytest.mark.parametrize("seq_len", [None, 100, 2048, 2049, 3000, 8192])
def test_dynamic_matches_transformers(seq_len):
    f, a = _theirs("dynamic", {"rope_theta": 10000.0, "factor": 2.0}, seq_len=seq_len)
    ours, af = dynamic(HEAD_DIM, factor=2.0, original_max_position=2048, seq_len=seq_len or 2048)
    _close(ours, f)
    assert af == a == 1.0


@pytest.mark.parametrize(
    "params",
    [
        {"factor": 4.0},
        {"factor": 8.0, "beta_fast": 16, "beta_slow": 2},
        {"factor": 16.0, "attention_factor": 1.5},
        {"factor": 4.0, "truncate": False},
    ],
)
def test_yarn_matches_transformers(params):
    f, a = _theirs(
        "yarn",
        {"rope_theta": 10000.0, "original_max_position_embeddings": 2048, **params},
        max_pos=int(2048 * params["factor"]),
    )
    ours, af = yarn(HEAD_DIM, factor=params.pop("factor"), original_max_position=2048, **params)
    _close(ours, f)
    assert af == pytest.approx(a, rel=1e-12)


@pytest.mark.parametrize("mscale_all_dim", [0.707, 1.0])
def test_yarn_deepseek_mscale_matches_transformers(mscale_all_dim):
    # DeepSeek-V2/V3: attention factor = mscale(s, 1) / mscale(s, mscale_all_dim)
    params = {"factor": 40.0, "mscale": 1.0, "mscale_all_dim": mscale_all_dim}
    f, a = _theirs(
        "yarn",
        {"rope_theta": 10000.0, "original_max_position_embeddings": 4096, **params},
        max_pos=4096 * 40,
    )
    ours, af = yarn(HEAD_DIM, original_max_position=4096, **params)
    _close(ours, f)
    assert af == pytest.approx(a, rel=1e-12)
    expected = (0.1 * math.log(40) + 1) / (0.1 * mscale_all_dim * math.log(40) + 1)
    assert af == pytest.approx(expected, rel=1e-12)


def test_yarn_temperature_is_0_1_ln_s_plus_1():
    for s in (1.0, 2.0, 4.0, 32.0):
        _, af = yarn(HEAD_DIM, factor=s, original_max_position=4096)
        assert af == pytest.approx(0.1 * math.log(s) + 1.0, rel=1e-15)
    assert yarn_mscale(1.0) == 1.0


@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_llama3_matches_transformers(base):
    params = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    f, a = _theirs(
        "llama3",
        {"rope_theta": base, "original_max_position_embeddings": 8192, **params},
        max_pos=131072,
        head_dim=128,
    )
    ours, af = llama3(128, base, original_max_position=8192, **params)
    _close(ours, f)
    assert af == a == 1.0


def test_llama3_three_regions():
    theta = inv_freq(128, 500000.0)
    ours, _ = llama3(128, 500000.0, factor=8.0, original_max_position=8192)
    wavelen = 2 * math.pi / theta
    fast, slow = wavelen < 8192 / 4, wavelen > 8192
    assert fast.any() and slow.any() and (~fast & ~slow).any()
    torch.testing.assert_close(ours[fast], theta[fast])
    torch.testing.assert_close(ours[slow], theta[slow] / 8)
    mid = ~fast & ~slow
    assert ((ours[mid] < theta[mid]) & (ours[mid] > theta[mid] / 8)).all()


@pytest.mark.parametrize("seq_len", [None, 1000, 2048, 2049, 8192])
def test_longrope_matches_transformers(seq_len):
    short = [1.0 + i / 100 for i in range(HEAD_DIM // 2)]
    long = [2.0 + i / 10 for i in range(HEAD_DIM // 2)]
    f, a = _theirs(
        "longrope",
        {
            "rope_theta": 10000.0,
            "short_factor": short,
            "long_factor": long,
            "original_max_position_embeddings": 2048,
        },
        max_pos=8192,
        seq_len=seq_len,
    )
    ours, af = longrope(
        HEAD_DIM,
        short_factor=short,
        long_factor=long,
        original_max_position=2048,
        max_position=8192,
        seq_len=seq_len,
    )
    _close(ours, f)
    assert af == pytest.approx(a, rel=1e-12)
    assert af == pytest.approx(math.sqrt(1 + math.log(4) / math.log(2048)), rel=1e-12)


# --- the properties each method claims -----------------------------------------------


@pytest.mark.parametrize("s", [2.0, 4.0, 8.0, 16.0])
@pytest.mark.parametrize("d", [8, 64, 128])
def test_ntk_keeps_highest_frequency_and_divides_lowest_by_s(s, d):
    theta = inv_freq(d)
    scaled, af = ntk(d, factor=s)
    assert af == 1.0
    torch.testing.assert_close(scaled[0], theta[0], rtol=1e-15, atol=0)
    torch.testing.assert_close(scaled[-1], theta[-1] / s, rtol=1e-13, atol=0)
    assert (scaled <= theta).all()


def test_ntk_matches_rotary_embedding_torch_theta_rescale():
    from rotary_embedding_torch import RotaryEmbedding

    theirs = RotaryEmbedding(dim=32, theta_rescale_factor=4.0).freqs.detach()
    torch.testing.assert_close(ntk(32, factor=4.0)[0].float(), theirs, rtol=1e-5, atol=0)


def test_linear_divides_every_frequency():
    torch.testing.assert_close(linear(16, factor=3.0)[0], inv_freq(16) / 3)


def test_factor_one_is_the_identity():
    theta = inv_freq(32)
    for name in ("linear", "ntk"):
        torch.testing.assert_close(SCALINGS[name](32, factor=1.0)[0], theta)
    for name in ("yarn", "ntk_by_parts", "llama3"):
        torch.testing.assert_close(
            SCALINGS[name](32, factor=1.0, original_max_position=512)[0], theta
        )


def test_ntk_by_parts_regions():
    # r = L/λ: pairs turning more than beta times are untouched, fewer than alpha times: θ/s
    d, L, s = 64, 2048, 8.0
    theta = inv_freq(d)
    ours, af = ntk_by_parts(d, factor=s, original_max_position=L)
    assert af == 1.0
    r = L * theta / (2 * math.pi)
    torch.testing.assert_close(ours[r > 32], theta[r > 32])
    torch.testing.assert_close(ours[r < 1], theta[r < 1] / s)
    mid = (r > 1) & (r < 32)
    assert mid.any() and ((ours[mid] < theta[mid]) & (ours[mid] > theta[mid] / s)).all()
    # the blend follows γ(r) = (r - α)/(β - α) exactly
    g = (r[mid] - 1) / 31
    torch.testing.assert_close(ours[mid], (1 - g) * theta[mid] / s + g * theta[mid])


def test_yarn_extrapolates_fast_pairs_and_interpolates_slow_ones():
    theta = inv_freq(HEAD_DIM)
    ours, _ = yarn(HEAD_DIM, factor=4.0, original_max_position=2048)
    r = 2048 * theta / (2 * math.pi)
    torch.testing.assert_close(ours[r > 32], theta[r > 32])
    torch.testing.assert_close(ours[r < 1], theta[r < 1] / 4)


def test_dynamic_grows_past_the_original_length_and_resets_below_it():
    theta = inv_freq(HEAD_DIM)
    kw = dict(factor=4.0, original_max_position=1024)
    below = [dynamic(HEAD_DIM, seq_len=n, **kw)[0] for n in (1, 512, 1024)]
    for f in below:  # at or below L: exactly the original frequencies
        torch.testing.assert_close(f, theta, rtol=0, atol=0)
    grown = [dynamic(HEAD_DIM, seq_len=n, **kw)[0] for n in (1025, 2048, 4096, 16384)]
    previous = theta
    for f in grown:  # past L: every pair but the fastest slows down, more as l grows
        assert f[0] == theta[0]
        assert (f[1:] < previous[1:]).all()
        previous = f
    # at any l > L it is NTK-aware scaling with the effective factor s·l/L - (s - 1)
    l = 4096
    effective = 4.0 * l / 1024 - 3.0
    torch.testing.assert_close(grown[2], ntk(HEAD_DIM, factor=effective)[0])


def test_dynamic_rope_module_agrees_with_transformers_across_calls():
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    from pecourse.positions.rope import RoPE, rope_cos_sin

    cfg = _config({"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}, 64, 16)
    theirs = LlamaRotaryEmbedding(cfg)
    ours = RoPE(16, scaling="dynamic", factor=2.0, original_max_position=64)
    x = torch.randn(1, 1, 200, 16)
    for n in (32, 200, 16):  # below, grown past 64, back below (transformers resets too)
        pos = torch.arange(n)
        cos_t, sin_t = theirs(x[:, :, :n], pos[None])
        ours.rotate(x[:, :, :n], x[:, :, :n], pos, pos)
        cos_o, sin_o = rope_cos_sin(pos, ours.inv_freq)
        torch.testing.assert_close(cos_o, cos_t[0, :, :8], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(sin_o, sin_t[0, :, :8], rtol=1e-4, atol=1e-4)


# --- refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["linear", "ntk", "yarn", "dynamic", "llama3", "ntk_by_parts"])
def test_refuses_factor_below_one(name):
    kw = {"factor": 0.5}
    if name != "linear" and name != "ntk":
        kw["original_max_position"] = 512
    if name == "dynamic":
        kw["seq_len"] = 10
    with pytest.raises(ValueError, match="factor"):
        SCALINGS[name](32, **kw)


def test_refuses_odd_head_dim():
    with pytest.raises(ValueError, match="head_dim"):
        linear(15, factor=2.0)


def test_refuses_ntk_with_head_dim_two():
    with pytest.raises(ValueError, match="head_dim"):
        ntk(2, factor=2.0)


def test_refuses_longrope_factor_list_of_wrong_length():
    with pytest.raises(ValueError, match="long_factor"):
        longrope(
            8,
            short_factor=[1.0] * 4,
            long_factor=[1.0] * 5,
            original_max_position=8,
            max_position=16,
        )


def test_refuses_longrope_non_positive_factor():
    with pytest.raises(ValueError, match="short_factor"):
        longrope(
            8,
            short_factor=[1.0, 0.0, 1.0, 1.0],
            long_factor=[1.0] * 4,
            original_max_position=8,
            max_position=16,
        )


def test_refuses_longrope_max_position_below_original():
    with pytest.raises(ValueError, match="max_position"):
        longrope(
            8,
            short_factor=[1.0] * 4,
            long_factor=[1.0] * 4,
            original_max_position=8,
            max_position=4,
        )


def test_refuses_yarn_betas_in_wrong_order():
    with pytest.raises(ValueError, match="beta_fast"):
        yarn(32, factor=2.0, original_max_position=512, beta_fast=1, beta_slow=32)


def test_refuses_llama3_freq_factors_in_wrong_order():
    with pytest.raises(ValueError, match="low_freq_factor"):
        llama3(32, factor=8.0, original_max_position=512, low_freq_factor=4, high_freq_factor=1)


def test_refuses_non_integer_original_length():
    with pytest.raises(TypeError, match="original_max_position"):
        yarn(32, factor=2.0, original_max_position=512.0)


def test_refuses_dynamic_without_positive_seq_len():
    with pytest.raises(ValueError, match="seq_len"):
        dynamic(32, factor=2.0, original_max_position=512, seq_len=0)


_SHORT = [1.0 + i / 50 for i in range(8)]
_LONG = [1.5 + i / 4 for i in range(8)]


@pytest.mark.parametrize(
    "rope_type, theirs_params, max_pos, ours_kwargs",
    [
        ("linear", {"factor": 4.0}, 64, {"factor": 4.0}),
        (
            "yarn",
            {"factor": 4.0, "original_max_position_embeddings": 64},
            256,
            {"factor": 4.0, "original_max_position": 64},
        ),
        (
            "llama3",
            {
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
            512,
            {"factor": 8.0, "original_max_position": 64},
        ),
        (
            "longrope",
            {"short_factor": _SHORT, "long_factor": _LONG, "original_max_position_embeddings": 64},
            256,
            {
                "short_factor": _SHORT,
                "long_factor": _LONG,
                "original_max_position": 64,
                "max_position": 256,
            },
        ),
    ],
)
def test_rope_module_cos_sin_match_transformers_rotary_embedding(
    rope_type, theirs_params, max_pos, ours_kwargs
):
    """End to end: transformers' LlamaRotaryEmbedding (frequencies, attention scaling, and
    longrope's switch to the long factors) against the RoPE scheme, call after call."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    from pecourse.positions.rope import RoPE, rope_cos_sin

    cfg = _config({"rope_type": rope_type, "rope_theta": 100.0, **theirs_params}, max_pos, 16)
    theirs = LlamaRotaryEmbedding(cfg)
    ours = RoPE(16, base=100.0, scaling=rope_type, **ours_kwargs)
    x = torch.randn(1, 1, 200, 16)
    for n in (32, 200):  # inside the original context, then past it
        pos = torch.arange(n)
        cos_t, sin_t = theirs(x[:, :, :n], pos[None])
        ours.rotate(x[:, :, :n], x[:, :, :n], pos, pos)
        cos_o, sin_o = rope_cos_sin(pos, ours.inv_freq, ours.attention_factor)
        torch.testing.assert_close(cos_o, cos_t[0, :, :8], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(sin_o, sin_t[0, :, :8], rtol=1e-4, atol=1e-4)
