"""The corpus and the synthetic tasks: fixed, deterministic, and correct by construction."""

import pytest
import torch

from pecourse import data


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
