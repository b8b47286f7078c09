"""Answers from the review of the exercises: right answers a strict test would refuse, and
wrong answers a loose test would pass. ``{student: {slug: (answers, parts that must fail)}}``;
the other answers of each notebook are the solution's."""

REGRESSIONS = {
    "eve": {
        # wrong: float32 slopes where the exercise asks for float64
        "03_alibi": (
            {
                "answer_slopes": """
def alibi_slopes(num_heads):
    def geometric(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (k + 1) for k in range(n)]

    m = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = geometric(m)
    if m < num_heads:
        slopes += geometric(2 * m)[0::2][: num_heads - m]
    return torch.tensor(slopes, dtype=torch.float32)
""",
            },
            {"test_slopes", "test_slopes_12"},
        ),
        # right: perplexity computed in float32, the usual way (once refused: 50.000015...)
        "12_length_extrapolation": (
            {
                "answer_perplexity": """
def perplexity(logits, targets):
    return torch.exp(torch.nn.functional.cross_entropy(logits, targets)).item()
""",
            },
            set(),
        ),
        # wrong: both samplers draw from the global generator, not from `generator`
        "13_position_augmented_training": (
            {
                "answer_sample": """
def sample_pose_ids(seq_len, target_len, generator):
    cut = int(torch.randint(1, seq_len, (1,)))
    skip = int(torch.randint(0, target_len - seq_len + 1, (1,)))
    return pose_ids([cut, seq_len - cut], [0, skip])
""",
                "answer_randomized": """
def randomized_positions(seq_len, max_position, generator):
    if max_position < seq_len:
        raise ValueError("max_position < seq_len")
    return torch.randperm(max_position)[:seq_len].sort().values
""",
            },
            {"test_sample", "test_randomized"},
        ),
        # wrong: no guard for low == high (nan for yarn_inv_freq(4, 1e4, 4.0, 1))
        "14_rope_scaling": (
            {
                "answer_yarn": """
def yarn_inv_freq(head_dim, base, factor, original_max_position, beta_fast=32.0, beta_slow=1.0):
    theta = rope_inv_freq(head_dim, base)
    low, high = yarn_correction_range(head_dim, base, original_max_position, beta_fast, beta_slow)
    gamma = ((torch.arange(head_dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    return (1 - gamma) * theta + gamma * theta / factor
""",
            },
            {"test_yarn"},
        ),
    },
    "fay": {
        # right: ALiBi attention that returns float64 (once a RuntimeError: Double vs Float)
        "03_alibi": (
            {
                "answer_attention": """
def alibi_attention(q, k, v, slopes):
    seq = q.shape[-2]
    scores = q.double() @ k.double().transpose(-1, -2) / math.sqrt(q.shape[-1])
    scores = scores + alibi_bias(slopes, seq, seq).double()
    return torch.softmax(scores, dim=-1) @ v.double()
""",
            },
            set(),
        ),
        # wrong: a stratified sample (one position per stratum) has uniform marginals but
        # never draws two positions from the same stratum
        "13_position_augmented_training": (
            {
                "answer_randomized": """
def randomized_positions(seq_len, max_position, generator):
    if max_position < seq_len:
        raise ValueError("max_position < seq_len")
    edges = torch.linspace(0, max_position, seq_len + 1).long()
    picks = [int(torch.randint(int(a), int(b), (1,), generator=generator)) for a, b in zip(edges[:-1], edges[1:])]
    return torch.tensor(picks, dtype=torch.long)
""",
            },
            {"test_randomized"},
        ),
    },
}
