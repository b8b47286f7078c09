/* RoPE on the CPU in one pass: see rope_cpu.py (which builds this file with the C compiler
   on first use) and arXiv:2104.09864, eq. 34. No PyTorch headers: gcc builds it in under a
   second. Compiled with -ffp-contract=off so that it matches the PyTorch reference
   (pecourse.positions.rotary.rotate_pairs) bit for bit. */
#include <stdint.h>
#include <string.h>

/* bfloat16 <-> float: bf16 is the top half of a float32; round to nearest even. */
static inline float bf16_to_f(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t f_to_bf16(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* One row = one (batch, head, position) vector of D values. Rows [row_begin, row_end) of
   a [B, M, S, D] view of x (element strides sxb, sxm, sxs; last dim contiguous) are written
   to the same rows of out (element strides sob, som, sos; last dim contiguous). cos/sin are
   [B or 1, S, R/2] contiguous; cbs is their batch stride (0 when shared by the batch). The
   first R dims are rotated, dims R..D-1 copied. */
/* The half-pairing loop over one row's H2 pairs: o[j] = a c -+ b s, o[j + H2] = b c +- a s.
   Spelled out for the common head sizes (R = 16, 32, 64) so the compiler sees a fixed trip
   count: a short row then runs as whole vectors, without the checks and remainder loops of
   a loop of unknown length (a head size of 16 has only 8 pairs; measured 2.2x faster on
   [16, 4, 64, 16]). "unroll 1" keeps -O3 from unrolling the fixed loop into scalar code
   before the loop vectorizer sees it (the SLP vectorizer, which would re-vectorize it, is
   off: see rope_cpu.py). The same products in the same order. */
#define HALF(N, CT, LOAD, STORE, OP1, OP2)                                                    \
    _Pragma("GCC unroll 1")                                                                   \
    for (int64_t j = 0; j < (N); ++j) {                                                       \
        const CT a = LOAD(xr[j]), bb = LOAD(xr[j + (N)]);                                     \
        o[j] = STORE(a * c[j] OP1 bb * sv[j]);                                                \
        o[j + (N)] = STORE(bb * c[j] OP2 a * sv[j]);                                          \
    }
#define HALF_SIZES(CT, LOAD, STORE, OP1, OP2)                                                 \
    switch (H2) {                                                                             \
    case 8: HALF(8, CT, LOAD, STORE, OP1, OP2) break;                                         \
    case 16: HALF(16, CT, LOAD, STORE, OP1, OP2) break;                                       \
    case 32: HALF(32, CT, LOAD, STORE, OP1, OP2) break;                                       \
    default: HALF(H2, CT, LOAD, STORE, OP1, OP2)                                              \
    }

#define DEFINE_ROPE(NAME, T, CT, LOAD, STORE)                                                 \
void NAME(const T* restrict x, T* restrict out, const CT* restrict cs, const CT* restrict sn, \
          int64_t M, int64_t S, int64_t D, int64_t R,                                         \
          int64_t sxb, int64_t sxm, int64_t sxs, int64_t sob, int64_t som, int64_t sos,       \
          int64_t cbs,                                                                        \
          int interleaved, int inverse, int64_t row_begin, int64_t row_end)                   \
{                                                                                             \
    const int64_t H2 = R / 2;                                                                 \
    /* (b, m, s) of the first row; then counted up (no divisions per row). */                 \
    int64_t s = row_begin % S, m = (row_begin / S) % M, b = row_begin / S / M;                \
    for (int64_t r = row_begin; r < row_end; ++r) {                                           \
        const T* restrict xr = x + b * sxb + m * sxm + s * sxs;                               \
        T* restrict o = out + b * sob + m * som + s * sos;                                    \
        const CT* restrict c = cs + b * cbs + s * H2;                                         \
        const CT* restrict sv = sn + b * cbs + s * H2;                                        \
        if (!interleaved) {                 /* pairs (j, j + R/2): NeoX / transformers */     \
            if (!inverse) {                                                                   \
                HALF_SIZES(CT, LOAD, STORE, -, +)                                             \
            } else {                        /* rotation by -theta: sin -> -sin */             \
                HALF_SIZES(CT, LOAD, STORE, +, -)                                             \
            }                                                                                 \
        } else {                            /* pairs (2j, 2j + 1): GPT-J / Meta */            \
            if (!inverse) {                                                                   \
                for (int64_t j = 0; j < H2; ++j) {                                            \
                    const CT a = LOAD(xr[2 * j]), bb = LOAD(xr[2 * j + 1]);                   \
                    o[2 * j] = STORE(a * c[j] - bb * sv[j]);                                  \
                    o[2 * j + 1] = STORE(bb * c[j] + a * sv[j]);                              \
                }                                                                             \
            } else {                                                                          \
                for (int64_t j = 0; j < H2; ++j) {                                            \
                    const CT a = LOAD(xr[2 * j]), bb = LOAD(xr[2 * j + 1]);                   \
                    o[2 * j] = STORE(a * c[j] + bb * sv[j]);                                  \
                    o[2 * j + 1] = STORE(bb * c[j] - a * sv[j]);                              \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
        if (R < D) memcpy(o + R, xr + R, (size_t)(D - R) * sizeof(T));                        \
        if (++s == S) { s = 0; if (++m == M) { m = 0; ++b; } }                                \
    }                                                                                         \
}

#define ID(v) (v)
#define TO_F(v) ((float)(v))
DEFINE_ROPE(rope_f32, float, float, ID, ID)
DEFINE_ROPE(rope_f64, double, double, ID, ID)
DEFINE_ROPE(rope_bf16, uint16_t, float, bf16_to_f, f_to_bf16)
#ifdef __FLT16_MAX__
#define TO_H(v) ((_Float16)(v))
DEFINE_ROPE(rope_f16, _Float16, float, TO_F, TO_H)
int has_f16(void) { return 1; }
#else
int has_f16(void) { return 0; }
#endif
