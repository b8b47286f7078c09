"""A second plausible wrong answer per exercise (graded as learner "dan").

Many of these pass every visible test and are caught only by the hidden ones: they check
that the hidden tests earn their keep.
"""

WRONG_MORE = {
    "01_learned_absolute_positions": (
        {
            # wraps round instead of refusing; extends without checking new_max
            "answer_add": """
def add_learned_positions(hidden, table):
    seq = hidden.shape[1]
    return hidden + table[torch.arange(seq) % table.shape[0]]
""",
            "answer_extend": """
def extend_by_copying(table, new_max):
    return table[torch.arange(new_max) % table.shape[0]].clone()
""",
        },
        {"test_refuse", "test_extend"},
    ),
    "02_why_attention_needs_positions": (
        {
            # scales by sqrt(d_model) instead of sqrt(d_k): invisible when they are equal
            "answer_attention": """
def self_attention(x, wq, wk, wv):
    q, k, v = x @ wq, x @ wk, x @ wv
    return torch.softmax(q @ k.T / math.sqrt(x.shape[-1]), dim=-1) @ v
""",
        },
        {"test_attention", "test_positions"},
    ),
    "03_alibi": (
        {
            # queries placed at the first positions (wrong with a cache); no 1/sqrt(d)
            "answer_bias": """
def alibi_bias(slopes, query_len, key_len):
    i = torch.arange(query_len)[:, None]
    j = torch.arange(key_len)[None, :]
    bias = -slopes.to(torch.float64)[:, None, None] * (i - j).to(torch.float64)
    return bias.masked_fill((j > i)[None], float("-inf"))
""",
            "answer_attention": """
def alibi_attention(q, k, v, slopes):
    seq = q.shape[-2]
    scores = q @ k.transpose(-1, -2) + alibi_bias(slopes, seq, seq).to(q.dtype)
    return torch.softmax(scores, dim=-1) @ v
""",
        },
        {"test_bias", "test_attention"},
    ),
    "04_effective_vs_nominal_context": (
        {
            # the longest passing length anywhere, even after a failure
            "answer_effective": """
def effective_length(lengths, scores, threshold):
    passing = [n for n, s in zip(lengths, scores) if s >= threshold]
    return max(passing) if passing else 0
""",
        },
        {"test_effective"},
    ),
    "05_multidimensional_rope": (
        {
            # cycles the axes over frequencies (k % 3) instead of contiguous sections
            "answer_angles": """
def mrope_angles(ids, inv_freq, sections):
    axis = torch.arange(inv_freq.shape[0]) % 3
    return (ids.to(torch.float64)[axis] * inv_freq.to(torch.float64)[:, None]).T
""",
        },
        {"test_angles"},
    ),
    "06_positional_encodings": (
        {
            # positions added to the queries only
            "answer_absolute": """
def absolute_scores(q, k, pos, positions):
    return (q + pos[positions]) @ k.T / math.sqrt(q.shape[-1])
""",
        },
        {"test_absolute"},
    ),
    "07_relative_position_representations": (
        {
            # offset i - j instead of j - i
            "answer_ids": """
def shaw_relative_ids(query_len, key_len, max_distance):
    offset = torch.arange(query_len)[:, None] - torch.arange(key_len)[None, :]
    return offset.clamp(-max_distance, max_distance) + max_distance
""",
        },
        {"test_ids", "test_scores"},
    ),
    "08_rope": (
        {
            # the inverse permutation; interleaved rope that pairs halves
            "answer_permutation": """
def to_half_permutation(head_dim):
    half = head_dim // 2
    return torch.stack((torch.arange(half), torch.arange(half) + half), dim=-1).flatten()
""",
            "answer_interleaved": """
def rope_interleaved(x, positions, base=10000.0):
    d = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = positions.to(torch.float64)[:, None] * inv_freq
    cos, sin = torch.cos(angle).float(), torch.sin(angle).float()
    a, b = x[..., : d // 2].float(), x[..., d // 2 :].float()
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1).to(x.dtype)
""",
        },
        {"test_permutation", "test_interleaved"},
    ),
    "09_sinusoidal_positional_encodings": (
        {
            # cosine in the even columns; shift blocks transposed (turns backwards)
            "answer_table": """
def sinusoidal_table(num_positions, dim, base=10000.0):
    t = torch.arange(num_positions, dtype=torch.float64)[:, None]
    omega = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    table = torch.empty(num_positions, dim, dtype=torch.float64)
    table[:, 0::2] = torch.cos(t * omega)
    table[:, 1::2] = torch.sin(t * omega)
    return table.float()
""",
            "answer_shift": """
def shift_matrix(delta, dim, base=10000.0):
    omega = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    c, s = torch.cos(delta * omega), torch.sin(delta * omega)
    m = torch.zeros(dim, dim, dtype=torch.float64)
    for i in range(dim // 2):
        m[2 * i, 2 * i], m[2 * i, 2 * i + 1] = c[i], -s[i]
        m[2 * i + 1, 2 * i], m[2 * i + 1, 2 * i + 1] = s[i], c[i]
    return m.float()
""",
        },
        {"test_table", "test_shift"},
    ),
    "10_contextual_position_encoding": (
        {
            # no clamp at P; counts boundaries after the query too
            "answer_interpolate": """
def interpolate_logits(p, int_logits):
    lo, hi = p.floor().long(), p.ceil().long()
    w = p - p.floor()
    return w * int_logits.gather(-1, hi) + (1 - w) * int_logits.gather(-1, lo)
""",
            "answer_count": """
def count_positions(is_boundary):
    seq = is_boundary.shape[0]
    gates = is_boundary.float()[None, :].expand(seq, seq)
    return gates.flip(-1).cumsum(-1).flip(-1)
""",
        },
        {"test_interpolate", "test_count"},
    ),
    "11_interleaving_rope_and_nope": (
        {
            # window off by one; floor(p / scale) without the +1
            "answer_mask": """
def layer_mask(kind, seq_len, window):
    i = torch.arange(seq_len)[:, None]
    j = torch.arange(seq_len)[None, :]
    causal = j <= i
    return causal if kind == "nope" else causal & (j >= i - window)
""",
            "answer_temperature": """
def nope_query_scale(positions, floor_scale=8192, attn_scale=0.1):
    return torch.log(torch.floor(positions.double() / floor_scale) + 1.0) * attn_scale + 1.0
""",
        },
        {"test_mask", "test_temperature"},
    ),
    "12_length_extrapolation": (
        {
            # drops the last, shorter block; forgets the 2*pi in the wavelength
            "answer_buckets": """
def nll_by_bucket(nll, bucket):
    n = nll.shape[0] // bucket * bucket
    return nll[:n].double().view(-1, bucket).mean(-1)
""",
            "answer_ood": """
def unseen_pairs(train_len, head_dim, base=10000.0):
    theta = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    return 1 / theta > train_len
""",
        },
        {"test_buckets", "test_ood"},
    ),
    "13_position_augmented_training": (
        {
            # forgets where each chunk starts in the window
            "answer_layout": """
def pose_ids(chunk_lengths, skips):
    return torch.cat([torch.arange(n) + u for n, u in zip(chunk_lengths, skips)]).long()
""",
        },
        {"test_layout", "test_sample"},
    ),
    "14_rope_scaling": (
        {
            # the ramp the wrong way round; log10 instead of ln
            "answer_yarn": """
def yarn_inv_freq(head_dim, base, factor, original_max_position, beta_fast=32.0, beta_slow=1.0):
    theta = rope_inv_freq(head_dim, base)
    low, high = yarn_correction_range(head_dim, base, original_max_position, beta_fast, beta_slow)
    gamma = ((torch.arange(head_dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    return gamma * theta + (1 - gamma) * theta / factor
""",
            "answer_temperature": """
def yarn_attention_factor(factor):
    return 1.0 if factor <= 1 else 0.1 * math.log10(factor) + 1.0
""",
        },
        {"test_yarn", "test_temperature"},
    ),
    "15_nope": (
        {
            # divides by t instead of t + 1; masks the past instead of the future
            "answer_mean": """
def causal_mean(v):
    counts = torch.arange(v.shape[0], dtype=v.dtype)[:, None]
    return v.cumsum(0) / counts
""",
            "answer_causal": """
def causal_attention(q, k, v):
    seq = q.shape[0]
    scores = q @ k.T / math.sqrt(q.shape[-1])
    past = torch.ones(seq, seq, dtype=torch.bool).tril(-1)
    return torch.softmax(scores.masked_fill(past, float("-inf")), dim=-1) @ v
""",
        },
        {"test_mean", "test_causal"},
    ),
    "16_rope_base_frequency": (
        {
            # stops one distance short; returns the last qualifying base, not the first
            "answer_bound": """
def min_similarity(base, context_length, head_dim):
    theta = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    m = torch.arange(context_length, dtype=torch.float64)[:, None]
    return torch.cos(m * theta).sum(dim=-1).min().item()
""",
            "answer_choose": """
def smallest_base(candidates, context_length, head_dim):
    good = [float(b) for b in candidates if min_similarity(float(b), context_length, head_dim) >= 0]
    if not good:
        raise ValueError("none")
    return good[-1]
""",
        },
        {"test_bound", "test_choose"},
    ),
}
