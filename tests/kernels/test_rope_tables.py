"""The fast RoPE backend. RoPE's cos/sin tables are built once per (positions, inv_freq, dtype, device) and reused,
and never returned stale: the cache compares values, so in-place edits are seen."""

from __future__ import annotations

import pytest
import torch

from pecourse import kernels
from pecourse.kernels import FAST_ROPE
from pecourse.kernels.rope import TABLES, apply_rope
from pecourse.positions import rope
from pecourse.positions.rope import RoPE
from pecourse.positions.rotary import rotate_pairs


@pytest.fixture(autouse=True)
def empty_cache():
    TABLES.clear()
    yield
    TABLES.clear()


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _uncached(x, positions, **kwargs):
    """The rotation with a table built from scratch (no cache involved)."""
    inv = kwargs.pop("inv_freq", None)
    if inv is None:
        inv = rope.inv_freq(x.shape[-1], kwargs.pop("base", 10000.0))
    cos, sin = rope.rope_cos_sin(positions, inv, kwargs.pop("attention_factor", 1.0))
    return rotate_pairs(x, cos, sin, pairing=kwargs.pop("pairing", "half"))


def test_repeated_positions_reuse_one_table():
    x = _x(2, 3, 16, 8)
    first = apply_rope(x, torch.arange(16))
    assert (TABLES.misses, TABLES.hits) == (1, 0)
    for _ in range(3):  # a new tensor with the same values each time, as a forward pass makes
        assert torch.equal(apply_rope(x, torch.arange(16)), first)
    assert (TABLES.misses, TABLES.hits) == (1, 3)
    assert torch.equal(first, _uncached(x, torch.arange(16)))


def test_positions_changed_in_place_get_a_new_table():
    x = _x(1, 2, 6, 8)
    positions = torch.arange(6)
    apply_rope(x, positions)
    positions.add_(100)  # same tensor object, new values
    assert torch.equal(apply_rope(x, positions), _uncached(x, torch.arange(100, 106)))
    assert TABLES.misses == 2


def test_inv_freq_changed_in_place_gets_a_new_table():
    x = _x(1, 2, 6, 8)
    inv = rope.inv_freq(8)
    apply_rope(x, torch.arange(6), inv_freq=inv)
    inv.mul_(0.25)  # e.g. a scaling recomputed into the same buffer
    got = apply_rope(x, torch.arange(6), inv_freq=inv)
    assert torch.equal(got, _uncached(x, torch.arange(6), inv_freq=rope.inv_freq(8) * 0.25))


def test_dtype_attention_factor_and_batch_positions_are_part_of_the_key():
    x = _x(2, 2, 5, 8)
    pos = torch.arange(5)
    a = apply_rope(x, pos)
    b = apply_rope(x.double(), pos)
    c = apply_rope(x, pos, attention_factor=1.5)
    d = apply_rope(x, torch.stack([pos, pos + 3]))
    assert TABLES.misses == 4 and TABLES.hits == 0
    assert b.dtype == torch.float64 and torch.allclose(b.float(), a)
    torch.testing.assert_close(c, 1.5 * a)
    assert torch.equal(d[0], a[0]) and not torch.equal(d[1], a[1])


def test_the_cache_is_bounded():
    x = _x(1, 1, 4, 8)
    for start in range(3 * TABLES.size):
        apply_rope(x, torch.arange(start, start + 4))
    assert len(TABLES._entries) == TABLES.size
    apply_rope(x, torch.arange(0, 4))  # evicted long ago: rebuilt, and right
    assert TABLES.misses == 3 * TABLES.size + 1


def test_learnable_frequencies_bypass_the_cache_and_get_gradients():
    x = _x(1, 2, 4, 8)
    inv = rope.inv_freq(8).float().requires_grad_()
    apply_rope(x, torch.arange(4), inv_freq=inv).sum().backward()
    assert inv.grad is not None and TABLES.misses == 0 and TABLES.hits == 0


def test_rope_layers_share_tables_across_layers_and_calls():
    """Every layer of a model rotates at the same positions: one table for all of them."""
    layers = [RoPE(8, backend=FAST_ROPE) for _ in range(4)]
    q, k = _x(2, 4, 12, 8), _x(2, 2, 12, 8, seed=1)
    pos = torch.arange(12)
    outs = [layer.rotate(q, k, pos, pos) for layer in layers]
    # queries and keys at the same positions share one lookup: one per layer
    assert TABLES.misses == 1 and TABLES.hits == 4 - 1
    for qr, kr in outs:
        assert torch.equal(qr, _uncached(q, pos)) and torch.equal(kr, _uncached(k, pos))
    # keys at other positions (a cache offset) get their own table, still the right one
    TABLES.clear()
    k_pos = torch.arange(12) + 5
    qr, kr = layers[0].rotate(q, k, pos, k_pos)
    assert TABLES.misses == 2 and TABLES.hits == 0
    assert torch.equal(qr, _uncached(q, pos)) and torch.equal(kr, _uncached(k, k_pos))


def test_dynamic_scaling_is_never_served_a_stale_table():
    scheme = RoPE(8, scaling="dynamic", factor=2.0, original_max_position=16, backend=FAST_ROPE)
    q = _x(1, 1, 40, 8)
    short, long = torch.arange(8), torch.arange(40)
    a = scheme.rotate(q[:, :, :8], q[:, :, :8], short, short)[0]
    scheme.rotate(q, q, long, long)  # stretches the frequencies
    b = scheme.rotate(q[:, :, :8], q[:, :, :8], short, short)[0]
    assert torch.equal(a, b)  # back to the original frequencies, and their table


def test_kernels_apply_rope_gives_the_reference_numbers():
    x = _x(2, 3, 9, 16)
    pos = torch.arange(3, 12)
    for kwargs in [{}, {"pairing": "interleaved"}, {"rotary_dim": 8}, {"base": 500.0}]:
        want = rope.apply_rope(x, pos, **kwargs)
        assert torch.equal(kernels.apply_rope(x, pos, **kwargs), want), kwargs


def test_the_model_rotates_on_the_fast_backend_with_the_reference_numbers():
    from pecourse.lab.model import ModelConfig, TinyGPT, replace_rope

    model = TinyGPT(ModelConfig(d_model=32, n_layers=2, n_heads=2, train_len=16)).eval()
    assert all(block.attn.scheme.backend is FAST_ROPE for block in model.blocks)
    assert replace_rope(model, "linear", factor=2.0).blocks[0].attn.scheme.backend == FAST_ROPE
    idx = torch.randint(
        0, model.config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        fast = model(idx)[0]
        for block in model.blocks:
            block.attn.scheme.backend = rope.REFERENCE
        assert torch.equal(model(idx)[0], fast)
