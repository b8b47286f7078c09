"""Sliding windows and chunks around a scheme, against transformers' mask functions."""

import pytest
import torch

from pecourse.attention import attention
from pecourse.lab.model import ModelConfig, TinyGPT
from pecourse.positions.absolute import Sinusoidal
from pecourse.positions.alibi import ALiBi
from pecourse.positions.rope import RoPE, apply_rope
from pecourse.positions.window import Chunked, SlidingWindow, outside_chunk, outside_window


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _transformers_mask(overlay, n):
    from transformers.masking_utils import causal_mask_function

    return torch.tensor(
        [
            [bool(overlay(0, 0, i, j)) and bool(causal_mask_function(0, 0, i, j)) for j in range(n)]
            for i in range(n)
        ]
    )


@pytest.mark.parametrize("size", [1, 3, 5, 12])
def test_masks_match_transformers_overlays(size):
    from transformers.masking_utils import chunked_overlay, sliding_window_overlay

    n, pos = 11, torch.arange(11)
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    window = _transformers_mask(sliding_window_overlay(size), n)
    assert torch.equal(causal & ~outside_window(pos, pos, size), window)
    chunks = _transformers_mask(chunked_overlay(size, torch.zeros(1, dtype=torch.long)), n)
    assert torch.equal(causal & ~outside_chunk(pos, pos, size), chunks)


def test_sliding_window_rope_is_rope_with_far_keys_masked():
    q, k, v = (_randn(2, 3, 10, 8, seed=s) for s in range(3))
    pos = torch.arange(10)
    got = attention(q, k, v, SlidingWindow(RoPE(8), 4))
    scores = apply_rope(q, pos) @ apply_rope(k, pos).mT / 8**0.5
    i, j = pos[:, None], pos[None, :]
    scores = scores.masked_fill((j > i) | (i - j >= 4), float("-inf"))
    torch.testing.assert_close(got, torch.softmax(scores, -1) @ v)
    # a window as long as the sequence changes nothing
    torch.testing.assert_close(
        attention(q, k, v, SlidingWindow(RoPE(8), 10)), attention(q, k, v, RoPE(8))
    )


def test_chunks_cut_every_path_across_a_boundary():
    """Stacked windows relay information back; stacked chunks cannot cross a boundary."""
    n, pos = 12, torch.arange(12)
    reach_window = torch.eye(n, dtype=torch.bool)
    reach_chunk = torch.eye(n, dtype=torch.bool)
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    step_window = causal & ~outside_window(pos, pos, 4)
    step_chunk = causal & ~outside_chunk(pos, pos, 4)
    for _ in range(3):  # three layers
        reach_window = (reach_window.float() @ step_window.float()).bool()
        reach_chunk = (reach_chunk.float() @ step_chunk.float()).bool()
    assert reach_window[11, 11 - 9] and not reach_window[11, 11 - 10]  # 3 * (4 - 1) = 9 back
    assert not reach_chunk[8, 7]  # the chunk boundary between 7 and 8 is never crossed


def test_batched_positions_and_an_inner_bias():
    q, k, v = (_randn(2, 8, 6, 4, seed=s) for s in range(3))
    pos = torch.stack([torch.arange(6), torch.arange(6) + 3])
    scheme = Chunked(ALiBi(8), 4)
    assert set(scheme.places) == {"scores"}
    bias = scheme.score_bias(q, k, pos, pos)
    assert bias.shape == (2, 8, 6, 6)
    # row 0 has chunks {0..3}, {4, 5}; row 1 (positions 3..8) has {3}, {4..7}, {8}
    assert torch.isinf(bias[0, 0, 4, 3]) and not torch.isinf(bias[0, 0, 3, 0])
    assert torch.isinf(bias[1, 0, 1, 0]) and torch.isinf(bias[1, 0, 5, 4])
    finite = ~torch.isinf(bias[0])
    want = ALiBi(8).score_bias(q, k, pos[0], pos[0]).expand_as(bias[0])
    torch.testing.assert_close(bias[0][finite], want[finite])


def test_refusals():
    with pytest.raises(ValueError, match="window"):
        SlidingWindow(RoPE(8), 0)
    with pytest.raises(TypeError, match="PositionScheme"):
        Chunked("rope", 4)
    with pytest.raises(ValueError, match="input"):
        SlidingWindow(Sinusoidal(8), 4)


def test_model_plans_with_spans():
    cfg = ModelConfig(
        plan="swa_rope,swa_rope,swa_rope,nope", position_options={"swa_rope": {"window": 64}}
    )
    windowed = TinyGPT(cfg)
    assert [type(b.attn.scheme).__name__ for b in windowed.blocks] == ["SlidingWindow"] * 3 + [
        "NoPE"
    ]
    plain = TinyGPT(ModelConfig(plan="rope,rope,rope,nope"))
    plain.load_state_dict(windowed.state_dict())
    idx = torch.randint(0, cfg.vocab_size, (2, 64), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():  # a window as long as the input: the same model
        torch.testing.assert_close(windowed(idx)[0], plain(idx)[0])
        short = TinyGPT(
            ModelConfig(plan="chunk_rope", position_options={"chunk_rope": {"chunk": 8}})
        )
        assert torch.isfinite(short(idx)[0]).all()
    with pytest.raises(TypeError, match="window"):
        TinyGPT(ModelConfig(plan="swa_rope"))
