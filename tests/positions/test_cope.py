"""CoPE (arXiv:2405.18719) against a literal loop: gates (eq. 3), positions (eq. 4), interpolated e[p]."""

import math

import pytest
import torch

from pecourse.attention import attention
from pecourse.positions.cope import CoPE, cope_bias, cope_gates, cope_positions


def _naive_cope_bias(q, k, emb, scale):
    """CoPE one pair at a time: interpolate the *vector* e[p], then dot with q_i."""
    b, h, lq, d = q.shape
    lk = k.shape[2]
    p_max = emb.shape[-2] - 1
    out = torch.zeros(b, h, lq, lk, dtype=torch.float64)
    q, k, emb = q.double(), k.double(), emb.double()
    for bi in range(b):
        for hi in range(h):
            table = emb if emb.ndim == 2 else emb[hi]
            for i in range(lq):
                pos_i = lk - lq + i  # queries sit at the end of the keys
                for j in range(pos_i + 1):
                    p = sum(
                        torch.sigmoid(scale * (q[bi, hi, i] @ k[bi, hi, t]))
                        for t in range(j, pos_i + 1)
                    )
                    p = min(float(p), float(p_max))
                    lo, hi_ = math.floor(p), math.ceil(p)
                    e = (p - lo) * table[hi_] + (1 - p + lo) * table[lo]
                    out[bi, hi, i, j] = q[bi, hi, i] @ e
    return out


@pytest.mark.parametrize("per_head", [False, True])
@pytest.mark.parametrize(("lq", "lk"), [(5, 5), (2, 6)])
def test_cope_bias_matches_naive_loop(per_head, lq, lk):
    g = torch.Generator().manual_seed(0)
    b, h, d, p_max = 2, 3, 4, 3
    q = torch.randn(b, h, lq, d, generator=g)
    k = torch.randn(b, h, lk, d, generator=g)
    emb = torch.randn(*((h,) if per_head else ()), p_max + 1, d, generator=g)
    got = cope_bias(q, k, emb)
    want = _naive_cope_bias(q, k, emb, 1 / math.sqrt(d)).float()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_literal_eq3_scale_one():
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(1, 1, 4, 4, generator=g), torch.randn(1, 1, 4, 4, generator=g)
    emb = torch.randn(6, 4, generator=g)
    got = cope_bias(q, k, emb, scale=1.0)
    torch.testing.assert_close(got, _naive_cope_bias(q, k, emb, 1.0).float())


def test_gates_are_causal_sigmoids():
    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(1, 2, 3, 4, generator=g), torch.randn(1, 2, 5, 4, generator=g)
    gates = cope_gates(q, k, scale=1.0)
    assert gates.shape == (1, 2, 3, 5)
    # query 0 sits at key position 2: keys 3, 4 are in its future.
    assert torch.all(gates[..., 0, 3:] == 0)
    torch.testing.assert_close(gates[0, 1, 2, 4], torch.sigmoid(q[0, 1, 2] @ k[0, 1, 4]))


def test_all_open_gates_count_tokens():
    """With every gate equal to 1, p_ij = i - j + 1 (then the clamp)."""
    gates = torch.tril(torch.ones(6, 6))
    pos = cope_positions(gates, max_position=100)
    i, j = torch.arange(6)[:, None], torch.arange(6)[None, :]
    torch.testing.assert_close(pos, torch.where(j <= i, i - j + 1, 0).float())
    assert cope_positions(gates, max_position=3).max() == 3


def test_gates_count_only_selected_tokens():
    """Gates open on 'sentence ends' only: positions count sentences, not tokens."""
    ends = torch.tensor([0.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    gates = torch.tril(ends.expand(6, 6))
    pos = cope_positions(gates, max_position=10)
    # From the last query, keys 0..2 are two sentence ends back, keys 3..4 one, key 5 none.
    torch.testing.assert_close(pos[5], torch.tensor([2.0, 2.0, 2.0, 1.0, 1.0, 0.0]))


def test_integer_positions_pick_table_rows():
    """At an integer position the interpolation returns exactly q·e[n]."""
    q = torch.ones(1, 1, 1, 2)
    k = torch.full((1, 1, 1, 2), 50.0)  # σ(large) = 1: p_00 = 1
    emb = torch.tensor([[1.0, 0.0], [3.0, 4.0], [0.0, 9.0]])
    assert cope_bias(q, k, emb, scale=1.0).item() == pytest.approx(7.0)


def test_scheme_in_attention_and_gradients():
    g = torch.Generator().manual_seed(3)
    b, h, s, d = 2, 2, 6, 8
    q, k, v = (torch.randn(b, h, s, d, generator=g) for _ in range(3))
    cope = CoPE(d, max_position=4)
    # Untrained (zero table) CoPE is NoPE.
    torch.testing.assert_close(attention(q, k, v, cope), attention(q, k, v))
    with torch.no_grad():
        cope.embeddings.normal_(generator=g)
    out = attention(q, k, v, cope)
    scores = (
        q @ k.transpose(-2, -1) / math.sqrt(d)
        + _naive_cope_bias(q, k, cope.embeddings.detach(), 1 / math.sqrt(d)).float()
    )
    scores = scores.masked_fill(~torch.ones(s, s, dtype=torch.bool).tril(), float("-inf"))
    torch.testing.assert_close(out, torch.softmax(scores, -1) @ v, rtol=1e-5, atol=1e-5)
    out.sum().backward()
    assert cope.embeddings.grad is not None and cope.embeddings.grad.abs().sum() > 0


def test_per_head_tables_and_gqa():
    g = torch.Generator().manual_seed(4)
    q = torch.randn(1, 4, 5, 8, generator=g)
    k, v = torch.randn(1, 2, 5, 8, generator=g), torch.randn(1, 2, 5, 8, generator=g)
    cope = CoPE(8, max_position=3, num_heads=4)
    assert cope.embeddings.shape == (4, 4, 8)
    out = attention(q, k, v, cope)
    assert out.shape == (1, 4, 5, 8) and torch.isfinite(out).all()


def test_cope_ignores_position_ids():
    """Positions come from content: shifting the ids changes nothing."""
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 1, 4, 4, generator=g) for _ in range(3))
    cope = CoPE(4, max_position=3)
    with torch.no_grad():
        cope.embeddings.normal_(generator=g)
    pos = torch.arange(4)
    a = attention(q, k, v, cope, q_positions=pos, k_positions=pos)
    b = attention(q, k, v, cope, q_positions=pos + 7, k_positions=pos + 7)
    torch.testing.assert_close(a, b)


# --- refusals --------------------------------------------------------------------------


def test_refuses_max_position_below_one():
    with pytest.raises(ValueError, match="max_position"):
        CoPE(8, max_position=0)


def test_refuses_table_with_one_row():
    q = torch.randn(1, 1, 2, 4)
    with pytest.raises(ValueError, match="embeddings"):
        cope_bias(q, q, torch.randn(1, 4))


def test_refuses_non_causal_attention():
    q = torch.randn(1, 1, 3, 4)
    with pytest.raises(ValueError, match="causal"):
        attention(q, q, q, CoPE(4, max_position=2), causal=False)


def test_refuses_head_dim_mismatch():
    q = torch.randn(1, 1, 3, 4)
    with pytest.raises(ValueError, match="head_dim"):
        cope_bias(q, q, torch.randn(3, 6))


def test_refuses_more_queries_than_keys():
    with pytest.raises(ValueError, match="Lq"):
        cope_gates(torch.randn(1, 1, 4, 4), torch.randn(1, 1, 3, 4))


def test_refuses_wrong_per_head_count():
    q = torch.randn(1, 2, 3, 4)
    with pytest.raises(ValueError, match="heads=2"):
        cope_bias(q, q, torch.randn(3, 3, 4))


def test_refuses_bad_max_position_type():
    with pytest.raises(TypeError, match="max_position"):
        cope_positions(torch.ones(2, 2), 2.5)


def test_float64_inputs_stay_float64_exactly():
    """float64 in, float64 out, equal to the float64 loop to round-off (no float32 detour)."""
    g = torch.Generator().manual_seed(3)
    q = torch.randn(1, 2, 4, 6, generator=g, dtype=torch.float64)
    k = torch.randn(1, 2, 6, 6, generator=g, dtype=torch.float64)
    emb = torch.randn(5, 6, generator=g, dtype=torch.float64)
    out = cope_bias(q, k, emb)
    assert out.dtype == torch.float64
    assert cope_gates(q, k).dtype == torch.float64
    torch.testing.assert_close(
        out, _naive_cope_bias(q, k, emb, 1 / math.sqrt(6)), rtol=0, atol=1e-12
    )


def test_gradcheck_in_float64():
    g = torch.Generator().manual_seed(4)
    q, k = (torch.randn(1, 2, 3, 4, generator=g, dtype=torch.float64) for _ in "qk")
    emb = torch.randn(4, 4, generator=g, dtype=torch.float64)
    inputs = tuple(t.requires_grad_() for t in (q, k, emb))
    assert torch.autograd.gradcheck(lambda a, b, e: cope_bias(a, b, e), inputs)
