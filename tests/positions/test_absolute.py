"""Learned and sinusoidal absolute positions (the input place)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pecourse.attention import MultiHeadAttention
from pecourse.positions.absolute import (
    LearnedAbsolute,
    Sinusoidal,
    sinusoidal_encoding,
    sinusoidal_shift_matrix,
    sinusoidal_table,
)


# --- the table -------------------------------------------------------------------------
def test_table_layout_even_columns_sin_odd_columns_cos():
    d, base = 8, 10000.0
    table = sinusoidal_table(50, d, dtype=torch.float64)
    assert table.shape == (50, d)
    for t in (0, 1, 7, 49):
        for i in range(d // 2):
            angle = t / base ** (2 * i / d)  # the paper's pos / 10000^(2i/d)
            assert table[t, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-12)
            assert table[t, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-12)


def test_table_row_zero_is_sin0_cos0():
    row = sinusoidal_table(1, 6)[0]
    torch.testing.assert_close(row, torch.tensor([0.0, 1.0] * 3))


def test_table_is_accurate_at_long_range():
    # Angles in float64: at t = 10^6 the float32 product t·ω would be off by ~0.03 rad.
    t = 1_000_000
    row = sinusoidal_encoding(torch.tensor([t]), 4, dtype=torch.float64)[0]
    assert row[0].item() == pytest.approx(math.sin(t), abs=1e-9)
    assert row[1].item() == pytest.approx(math.cos(t), abs=1e-9)


def test_encoding_of_positions_equals_rows_of_table():
    table = sinusoidal_table(40, 16)
    pos = torch.tensor([[3, 0, 39], [5, 5, 1]])
    torch.testing.assert_close(sinusoidal_encoding(pos, 16), table[pos])


# --- the shift matrix ------------------------------------------------------------------
def test_shift_matrix_is_block_diagonal_rotation():
    m = sinusoidal_shift_matrix(3.0, 8, dtype=torch.float64)
    mask = torch.block_diag(*[torch.ones(2, 2)] * 4).bool()
    assert torch.all(m[~mask] == 0)
    torch.testing.assert_close(m @ m.T, torch.eye(8, dtype=torch.float64))  # orthogonal


@settings(max_examples=40, deadline=None)
@given(
    t=st.integers(0, 5000),
    delta=st.integers(-2000, 2000),
    dim=st.sampled_from([2, 4, 16, 64]),
    base=st.sampled_from([100.0, 10000.0, 500000.0]),
)
def test_shift_matrix_maps_p_t_to_p_t_plus_delta(t, delta, dim, base):
    if t + delta < 0:
        delta = -t
    p = sinusoidal_encoding(torch.tensor([t, t + delta]), dim, base, dtype=torch.float64)
    m = sinusoidal_shift_matrix(delta, dim, base, dtype=torch.float64)
    torch.testing.assert_close(m @ p[0], p[1], atol=1e-9, rtol=0)


def test_shift_matrix_composes_and_inverts():
    a = sinusoidal_shift_matrix(5, 16, dtype=torch.float64)
    b = sinusoidal_shift_matrix(-2, 16, dtype=torch.float64)
    torch.testing.assert_close(a @ b, sinusoidal_shift_matrix(3, 16, dtype=torch.float64))
    torch.testing.assert_close(
        a @ sinusoidal_shift_matrix(-5, 16, dtype=torch.float64), torch.eye(16, dtype=torch.float64)
    )


def test_dot_product_depends_only_on_offset():
    table = sinusoidal_table(600, 32, dtype=torch.float64)
    for delta in (0, 1, 5, 40, 200):
        dots = (table[: 600 - delta] * table[delta:]).sum(-1)  # p(t)·p(t+Δ) for every t
        torch.testing.assert_close(dots, torch.full_like(dots, dots[0].item()), atol=1e-9, rtol=0)
    # ... and it equals Σ_i cos(Δ ω_i), symmetric in Δ.
    omega = 10000.0 ** (-torch.arange(0, 32, 2, dtype=torch.float64) / 32)
    assert (table[10] @ table[17]).item() == pytest.approx(torch.cos(7 * omega).sum().item())
    assert (table[17] @ table[10]).item() == pytest.approx((table[30] @ table[37]).item())


# --- the modules -----------------------------------------------------------------------
def test_learned_embed_adds_the_right_rows():
    torch.manual_seed(0)
    scheme = LearnedAbsolute(max_positions=16, d_model=8)
    hidden = torch.randn(2, 5, 8)
    pos = torch.tensor([0, 3, 4, 9, 15])
    out = scheme.embed(hidden, pos)
    for b in range(2):
        for s, p in enumerate(pos.tolist()):
            torch.testing.assert_close(out[b, s], hidden[b, s] + scheme.table.weight[p])
    batched = torch.tensor([[1, 2, 3, 4, 5], [10, 11, 12, 13, 14]])
    out = scheme.embed(hidden, batched)
    torch.testing.assert_close(out[1, 2], hidden[1, 2] + scheme.table.weight[12])
    assert scheme.places == ("input",)


def test_learned_table_is_trainable():
    scheme = LearnedAbsolute(4, 3)
    scheme.embed(torch.zeros(1, 4, 3), torch.arange(4)).sum().backward()
    assert scheme.table.weight.grad is not None
    torch.testing.assert_close(scheme.table.weight.grad, torch.ones(4, 3))


def test_learned_last_row_is_fine():
    scheme = LearnedAbsolute(4, 3)
    hidden = torch.randn(1, 1, 3)
    out = scheme.embed(hidden, torch.tensor([3]))
    torch.testing.assert_close(out, hidden + scheme.table.weight[3].detach())


def test_sinusoidal_embed_adds_the_table_for_any_length():
    scheme = Sinusoidal(12)
    hidden = torch.randn(1, 3000, 12)
    out = scheme.embed(hidden, torch.arange(3000))
    torch.testing.assert_close((out - hidden)[0], sinusoidal_table(3000, 12), atol=1e-6, rtol=0)
    assert scheme.places == ("input",)
    assert list(scheme.parameters()) == []


def test_sinusoidal_embed_keeps_dtype():
    out = Sinusoidal(8).embed(torch.zeros(1, 4, 8, dtype=torch.bfloat16), torch.arange(4))
    assert out.dtype == torch.bfloat16


def test_input_schemes_leave_attention_unchanged():
    # The scheme enters at the input only: attention's other hooks are the identity.
    torch.manual_seed(0)
    x = torch.randn(1, 4, 8)
    a = MultiHeadAttention(8, 2, Sinusoidal(8))
    b = MultiHeadAttention(8, 2)
    b.load_state_dict(a.state_dict())
    torch.testing.assert_close(a(x), b(x))


# --- bad input, one case per test --------------------------------------------------------
def test_learned_refuses_positions_past_the_table():
    scheme = LearnedAbsolute(max_positions=8, d_model=4)
    with pytest.raises(ValueError, match="max_positions=8"):
        scheme.embed(torch.zeros(1, 9, 4), torch.arange(9))


def test_learned_refuses_negative_positions():
    scheme = LearnedAbsolute(8, 4)
    with pytest.raises(ValueError, match="positions must be non-negative"):
        scheme.embed(torch.zeros(1, 2, 4), torch.tensor([-1, 0]))


def test_learned_refuses_float_positions():
    with pytest.raises(TypeError, match="positions"):
        LearnedAbsolute(8, 4).embed(torch.zeros(1, 2, 4), torch.tensor([0.0, 1.0]))


def test_learned_refuses_positions_of_the_wrong_length():
    with pytest.raises(ValueError, match="positions must be"):
        LearnedAbsolute(8, 4).embed(torch.zeros(1, 3, 4), torch.arange(2))


def test_learned_refuses_zero_max_positions():
    with pytest.raises(ValueError, match="max_positions"):
        LearnedAbsolute(0, 4)


def test_sinusoidal_refuses_odd_dim():
    with pytest.raises(ValueError, match="dim must be even"):
        sinusoidal_table(10, 7)


def test_sinusoidal_module_refuses_odd_d_model():
    with pytest.raises(ValueError, match="d_model must be even"):
        Sinusoidal(5)


def test_sinusoidal_refuses_base_of_one():
    with pytest.raises(ValueError, match="base"):
        sinusoidal_table(10, 8, base=1.0)


def test_sinusoidal_refuses_zero_positions():
    with pytest.raises(ValueError, match="num_positions"):
        sinusoidal_table(0, 8)


def test_shift_matrix_refuses_infinite_delta():
    with pytest.raises(ValueError, match="delta"):
        sinusoidal_shift_matrix(float("inf"), 8)
