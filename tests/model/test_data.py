"""The corpus and the synthetic tasks: fixed, deterministic, and correct by construction."""

import pytest
import torch

from pecourse.lab import data


def test_vocab_is_fixed_and_covers_the_corpus():
    assert data.VOCAB_SIZE == len(set(data.VOCAB)) == 83
    text = data.corpus_text("validation")
    assert data.decode(data.encode(text[:500])) == text[:500]


def test_split_is_deterministic_and_disjoint_in_size():
    train, val = data.corpus("train"), data.corpus("validation")
    assert 3_800_000 < len(train) < 4_100_000
    assert 150_000 < len(val) < 260_000
    assert data.corpus_text("validation").startswith("And Abraham")  # chapter 20 of Genesis


def test_encode_refuses_unknown_characters():
    with pytest.raises(ValueError, match="outside the vocabulary"):
        data.encode("naïve")


def test_text_batch_is_seeded():
    a = data.text_batch(4, 32, seed=3)
    b = data.text_batch(4, 32, seed=3)
    assert torch.equal(a[0], b[0]) and torch.equal(a[0][:, 1:], a[1][:, :-1])


def test_passkey_answer_is_the_needle():
    b = data.passkey_batch(8, 64, distance=30, seed=1)
    for i in range(8):
        s = data.decode(b.inputs[i])
        q = s.rindex("@")
        assert s[q - 30] == "@"
        assert data.decode(b.targets[i][b.answer[i]]) == s[q - 29 : q - 25]
    assert b.distance.tolist() == [30] * 8


def test_counting_answers_count_increments_since_reset():
    b = data.counting_batch(16, 128, seed=2)
    for i in range(16):
        s = data.decode(torch.cat([b.inputs[i, :1], b.targets[i]]))
        for pos in torch.nonzero(b.answer[i]).flatten().tolist():
            prefix = s[: pos + 1]  # up to and including '='
            assert prefix.endswith("=")
            since = prefix[prefix.rindex("*") :]
            assert int(s[pos + 1]) == since.count("+")


def test_selective_copy_and_flip_flop():
    b = data.selective_copy_batch(4, 64, num_tokens=6, seed=0)
    for i in range(4):
        s = data.decode(torch.cat([b.inputs[i, :1], b.targets[i]]))
        before, after = s.split("|")
        assert before.replace("_", "") == after
    f = data.flip_flop_batch(8, 63, seed=0)
    for i in range(8):
        s = data.decode(torch.cat([f.inputs[i, :1], f.targets[i]]))
        last = None
        for j in range(0, len(s) - 1, 2):
            if s[j] == "w":
                last = s[j + 1]
            if s[j] == "r":
                assert s[j + 1] == last


def test_tasks_are_seeded_and_bad_input_named():
    for name in data.TASKS:
        a = data.task_batch(name, 2, 64, seed=5)
        b = data.task_batch(name, 2, 64, seed=5)
        assert torch.equal(a.inputs, b.inputs) and a.answer.any()
    with pytest.raises(ValueError, match="task"):
        data.task_batch("sorting", 2, 64)
    with pytest.raises(ValueError, match="distance"):
        data.passkey_batch(2, 64, distance=500)


def _needles(s: str) -> list[tuple[int, str, str]]:
    """``(position of the @, key, value)`` of every needle before the final query ``@a``."""
    return [(i, s[i + 1], s[i + 2]) for i, c in enumerate(s[:-3]) if c == "@"]


@pytest.mark.parametrize(
    "keys, length, distance", [(1, 64, 30), (2, 64, 16), (8, 64, 48), (10, 208, 192)]
)
def test_multikey_layout(keys, length, distance):
    b = data.multikey_batch(16, length, keys=keys, distance=distance, split="validation", seed=7)
    assert b.inputs.shape == b.answer.shape == (16, length)
    assert b.answer[:, -1].all() and b.answer.sum() == 16  # only the value after the query
    assert b.distance.tolist() == [distance] * 16
    for i in range(16):
        s = data.decode(torch.cat([b.inputs[i, :1], b.targets[i]]))  # the whole window
        needles = _needles(s)
        assert len(needles) == keys and s.count("@") == keys + 1
        assert len({k for _, k, _ in needles}) == keys  # the keys are distinct
        # each needle is @ + two digits; no digit anywhere else, so none overlap
        spots = {p + j for p, _, _ in needles for j in (1, 2)} | {len(s) - 2, len(s) - 1}
        assert {j for j, c in enumerate(s) if c.isdigit()} == spots
        assert all(k.isdigit() and v.isdigit() for _, k, v in needles)
        query = len(s) - 3
        target = [n for n in needles if n[0] == query - distance]  # the target at its distance
        assert len(target) == 1
        assert s[query:] == "@" + target[0][1] + target[0][2]  # query @a, answer b
        assert data.decode(b.targets[i][b.answer[i]]) == target[0][2]


def test_multikey_with_one_key_is_the_passkey_task():
    for distance in (None, 20):
        p = data.passkey_batch(32, 64, distance=distance, key_len=2, seed=3)
        m = data.multikey_batch(32, 64, keys=1, distance=distance, seed=3)
        assert torch.equal(p.inputs, m.inputs) and torch.equal(p.distance, m.distance)
        assert torch.equal(m.answer, p.answer & (torch.arange(64) == 63))  # the second digit


def test_multikey_lays_distractors_uniformly():
    # length 64, distance 16: 46 free characters before the target, 13 after it. One
    # distractor has 44 places before and 11 after, so it follows the target 11/55 of the time.
    b = data.multikey_batch(1000, 64, keys=2, distance=16, seed=0)
    target = 62 - 16
    at = b.inputs == data.encode("@")[0]
    after = at[:, target + 1 : 62].any(1).double().mean()
    assert abs(float(after) - 0.2) < 0.04  # 3 standard errors
    # with the target at 192 of 208, the distractors have 14 characters before it and 189 after
    b = data.multikey_batch(64, 208, keys=8, distance=192, seed=0)
    assert (b.inputs == data.encode("@")[0]).sum() == 64 * 9


def test_multikey_refuses_what_does_not_fit():
    with pytest.raises(ValueError, match="keys must be <= 10"):
        data.multikey_batch(2, 64, keys=11)
    with pytest.raises(ValueError, match="keys must be >= 1"):
        data.multikey_batch(2, 64, keys=0)
    with pytest.raises(ValueError, match="length must be >= 26"):
        data.multikey_batch(2, 25, keys=8)
    with pytest.raises(ValueError, match="distance must be <= 62"):
        data.multikey_batch(2, 64, keys=2, distance=63)
    # at length 33 a target 5 back leaves 26 characters before it and 2 after: 8 needles
    # fit where 9 distractors are needed, though other distances hold all ten keys
    with pytest.raises(ValueError, match="distance=5 leaves room for 8 .* keys=10 needs 9"):
        data.multikey_batch(2, 33, keys=10, distance=5)
    assert data.multikey_batch(2, 33, keys=10, distance=6).inputs.shape == (2, 33)
