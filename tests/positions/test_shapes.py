"""The shapes written in the signatures (jaxtyping) are the shapes the functions take and
return: checked at run time here with beartype, so a stale annotation fails a test."""

from __future__ import annotations

import pytest
import torch
from beartype import beartype
from jaxtyping import TypeCheckError, jaxtyped

from pecourse.positions import rope, rotary

cos_sin = jaxtyped(typechecker=beartype)(rotary.cos_sin)
rotate_pairs = jaxtyped(typechecker=beartype)(rotary.rotate_pairs)
rope_frequencies = jaxtyped(typechecker=beartype)(rotary.rope_frequencies)
apply_rope = jaxtyped(typechecker=beartype)(rope.apply_rope)
rope_rotate = jaxtyped(typechecker=beartype)(rope.RoPE.rotate)


def test_annotated_calls_pass_the_checker():
    x = torch.randn(2, 3, 5, 8)
    inv = rope_frequencies(6)
    for positions in (torch.arange(5), torch.arange(10).reshape(2, 5)):
        cos, sin = cos_sin(positions, inv)
        assert cos.shape == (*positions.shape, 3)
        assert rotate_pairs(x, cos, sin, pairing="interleaved").shape == x.shape  # partial
        assert apply_rope(x, positions).shape == x.shape
    q, k = rope_rotate(rope.RoPE(8), x, x[:, :1], torch.arange(5), torch.arange(5))
    assert q.shape == x.shape and k.shape == (2, 1, 5, 8)
    assert cos_sin(torch.tensor([0.5, 1.5]), inv)[0].dtype == torch.float32  # real positions


def test_the_checker_catches_shapes_the_signatures_exclude():
    x = torch.randn(2, 3, 5, 8)
    cos, sin = rotary.cos_sin(torch.arange(4), rotary.rope_frequencies(8))  # 4 rows, not 5
    with pytest.raises(TypeCheckError):
        rotate_pairs(x, cos, sin)
    with pytest.raises(TypeCheckError):  # 3-D x: apply_rope wants [batch, heads, seq, dim]
        apply_rope(torch.randn(3, 5, 8), torch.arange(5))
    with pytest.raises(TypeCheckError):  # float positions where integers are required
        apply_rope(x, torch.arange(5.0))
    with pytest.raises(TypeCheckError):  # q and k disagree on the batch
        rope_rotate(rope.RoPE(8), x, x[:1], torch.arange(5), torch.arange(5))
