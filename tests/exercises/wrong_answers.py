"""Plausible wrong answers, one per exercise, and the parts each must fail.

Each entry replaces some answer cells (by ``grade_id``) of a correct submission. The
grader must give partial credit: exactly the listed parts fail, the others pass. Many of
these pass the visible tests and are caught only by the hidden ones.
"""

WRONG = {
    "01_learned_absolute_positions": (
        {
            # off by one: a sequence of length L reaches rows 0..L-1, not row L
            "answer_rows": """
def rows_with_gradient(max_positions, train_lengths):
    return torch.arange(max_positions) <= max(train_lengths)
""",
        },
        {"test_rows"},
    ),
    "02_why_attention_needs_positions": (
        {
            # permutes both sides: compares attn(x[perm])[perm] with attn(x)[perm]
            "answer_gap": """
def equivariance_gap(attn, x, perm):
    return (attn(x[perm])[perm] - attn(x)[perm]).abs().max().item()
""",
        },
        {"test_gap"},
    ),
    "03_alibi": (
        {
            # right for powers of two; for 12 heads takes the first 4 of the 16-head
            # sequence instead of every other one (visible tests pass, hidden ones do not)
            "answer_slopes": """
def alibi_slopes(num_heads):
    def geometric(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (k + 1) for k in range(n)]

    m = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = geometric(m)
    if m < num_heads:
        slopes += geometric(2 * m)[: num_heads - m]
    return torch.tensor(slopes, dtype=torch.float64)
""",
        },
        {"test_slopes_12"},
    ),
    "04_effective_vs_nominal_context": (
        {
            # off by one: counts L - d + 1 pairs at distance d
            "answer_counts": """
def distance_counts(train_len):
    return train_len - torch.arange(train_len) + 1
""",
        },
        {"test_counts"},
    ),
    "05_multidimensional_rope": (
        {
            # text after the image continues from the token count, not from max id + 1
            "answer_sequence": """
def mrope_ids(text_before, grid_h, grid_w, text_after):
    before = torch.arange(text_before).expand(3, -1)
    image = image_ids(grid_h, grid_w, text_before)
    start = text_before + grid_h * grid_w
    after = (torch.arange(text_after) + start).expand(3, -1)
    return torch.cat([before, image, after], dim=1).long()
""",
        },
        {"test_sequence"},
    ),
    "06_positional_encodings": (
        {
            # rotates by -p*theta: still shift-invariant, still the identity at 0, so only
            # the hidden test notices
            "answer_rotary": """
def rotary_scores(q, k, positions):
    d = q.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = -positions.to(torch.float64)[:, None] * theta
    cos, sin = torch.cos(angle), torch.sin(angle)

    def rotate(x):
        a, b = x[..., 0::2].double(), x[..., 1::2].double()
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)

    return (rotate(q) @ rotate(k).T / math.sqrt(d)).to(q.dtype)
""",
        },
        {"test_rotary"},
    ),
    "07_relative_position_representations": (
        {
            # relative position read as query - key: buckets land on the wrong side
            "answer_t5": """
def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    rel = -relative_position.long()
    if bidirectional:
        n = num_buckets // 2
        offset = (rel > 0).long() * n
        distance = rel.abs()
    else:
        n = num_buckets
        offset = torch.zeros_like(rel)
        distance = (-rel).clamp(min=0)
    exact = n // 2
    scaled = torch.log(distance.clamp(min=exact).float() / exact) / math.log(max_distance / exact)
    far = (exact + (scaled * (n - exact)).long()).clamp(max=n - 1)
    return offset + torch.where(distance < exact, distance, far)
""",
        },
        {"test_t5"},
    ),
    "08_rope": (
        {
            # rotates the wrong way (by -m*theta): norms and position 0 are still right
            "answer_half": """
def rope_half(x, positions, base=10000.0):
    d = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = positions.to(torch.float64)[:, None] * inv_freq
    cos, sin = torch.cos(angle).float(), torch.sin(angle).float()
    a, b = x[..., : d // 2].float(), x[..., d // 2 :].float()
    return torch.cat((a * cos + b * sin, -a * sin + b * cos), dim=-1).to(x.dtype)
""",
        },
        {"test_half"},
    ),
    "09_sinusoidal_positional_encodings": (
        {
            # exponent i/d instead of 2i/d: the first wavelength is still 2*pi and they still
            # grow, so only the hidden tests see it
            "answer_wavelengths": """
def wavelengths(dim, base=10000.0):
    return 2 * math.pi * base ** (torch.arange(dim // 2, dtype=torch.float64) / dim)
""",
        },
        {"test_wavelengths"},
    ),
    "10_contextual_position_encoding": (
        {
            # prefix sum (keys 0..j) instead of the suffix sum from the key to the query
            "answer_positions": """
def cope_positions(q, k):
    seq = q.shape[0]
    causal = torch.ones(seq, seq, dtype=torch.bool).tril()
    gates = torch.sigmoid(q @ k.T) * causal
    return gates.cumsum(-1) * causal
""",
        },
        {"test_positions"},
    ),
    "11_interleaving_rope_and_nope": (
        {
            # off by one: makes layer 0 a NoPE layer
            "answer_plan": """
def layer_plan(num_layers, interval=4):
    return ["nope" if layer % interval == 0 else "rope" for layer in range(num_layers)]
""",
        },
        {"test_plan"},
    ),
    "12_length_extrapolation": (
        {
            # mean of exp(nll) instead of exp(mean nll): right for a uniform model only
            "answer_perplexity": """
def perplexity(logits, targets):
    nll = torch.nn.functional.cross_entropy(logits.double(), targets, reduction="none")
    return nll.exp().mean().item()
""",
        },
        {"test_perplexity"},
    ),
    "13_position_augmented_training": (
        {
            # samples with replacement: positions can repeat
            "answer_randomized": """
def randomized_positions(seq_len, max_position, generator):
    if max_position < seq_len:
        raise ValueError("max_position < seq_len")
    return torch.randint(0, max_position, (seq_len,), generator=generator).sort().values
""",
        },
        {"test_randomized"},
    ),
    "14_rope_scaling": (
        {
            # the exponent upside down: (d-2)/d instead of d/(d-2)
            "answer_ntk": """
def ntk_base(base, factor, head_dim):
    return base * factor ** ((head_dim - 2) / head_dim)
""",
            # rounds the low boundary up instead of down (Llama 2: 21 instead of 20)
            "answer_range": """
def yarn_correction_range(head_dim, base, original_max_position, beta_fast=32.0, beta_slow=1.0):
    def pair_index(turns):
        return head_dim * math.log(original_max_position / (turns * 2 * math.pi)) / (2 * math.log(base))

    return max(math.ceil(pair_index(beta_fast)), 0), min(math.ceil(pair_index(beta_slow)), head_dim - 1)
""",
        },
        {"test_ntk", "test_range", "test_yarn"},
    ),
    "15_nope": (
        {
            # floor instead of round: 1/o - 1 lands just below the integer in float32
            "answer_recover": """
def recover_positions(o):
    return torch.floor(1.0 / o - 1.0).long()
""",
        },
        {"test_recover"},
    ),
    "16_rope_base_frequency": (
        {
            # forgets the 2*pi: returns 1/theta_i, the period in radians per position
            "answer_wavelengths": """
def rope_wavelengths(head_dim, base=10000.0):
    return base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
""",
        },
        {"test_wavelengths"},
    ),
}
