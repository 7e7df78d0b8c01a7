/* Random ops on the device: uniform_, normal_, bernoulli, random_,
 * exponential_, native_dropout. Each call draws bits with Threefry-2x32
 * from the (seed, counter) state that the caller takes from the op's generator
 * (options->rng, a program argument): the same seed gives the same numbers
 * on every run, and no two calls share a counter range. The numbers differ
 * from the CPU's generator (as CUDA's do). */
#include <math.h>

#include "ops/emit.h"
#include "ops/ops_internal.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

/* x rotated left by r bits (u32). */
static tpuc_status* rotl32(op_ctx* c, tpuc_hlo_value x, int r,
                           const tpuc_hlo_type* t, tpuc_hlo_value* out) {
  tpuc_hlo_value l, rr, a, b;
  TRY(op_const(c, TPUC_DTYPE_U32, r, t, &l));
  TRY(op_const(c, TPUC_DTYPE_U32, 32 - r, t, &rr));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SHIFT_LEFT, x, l, &a));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SHIFT_RIGHT_LOGICAL, x, rr, &b));
  return tpuc_hlo_binary(c->fn, TPUC_HLO_OR, a, b, out);
}

/* The low and high 32 bits (u32) of the u64 value v of shape `t64`. */
static tpuc_status* halves64(op_ctx* c, tpuc_hlo_value v,
                             const tpuc_hlo_type* t64, tpuc_hlo_value* lo,
                             tpuc_hlo_value* hi) {
  tpuc_hlo_value mask, sh;
  TRY(op_const(c, TPUC_DTYPE_U64, 4294967295.0, t64, &mask));
  TRY(op_const(c, TPUC_DTYPE_U64, 32, t64, &sh));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, v, mask, lo));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SHIFT_RIGHT_LOGICAL, v, sh, hi));
  TRY(tpuc_hlo_convert(c->fn, *lo, TPUC_DTYPE_U32, lo));
  return tpuc_hlo_convert(c->fn, *hi, TPUC_DTYPE_U32, hi);
}

/* Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers:
 * as easy as 1, 2, 3", SC 2011) of the counters base, base + 1, ...,
 * base + m - 1 (u64, split into two u32 words) under the 64-bit key: two
 * u32 words of m each. Written out in elementwise ops rather than
 * stablehlo.rng_bit_generator, whose expansion XLA's CPU compiler takes
 * several times as long to compile, a cost every new shape of a random op
 * paid (model initialization in every test of a test suite). */
static tpuc_status* threefry2x32(op_ctx* c, tpuc_hlo_value key,
                                 tpuc_hlo_value base, int64_t m,
                                 tpuc_hlo_value out[2]) {
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_U32, &m, 1);
  tpuc_hlo_type t64 = tpuc_hlo_type_make(TPUC_DTYPE_U64, &m, 1);
  tpuc_hlo_type scalar64 = tpuc_hlo_type_make(TPUC_DTYPE_U64, NULL, 0);
  tpuc_hlo_value ks[3], x[2], ctr, b;
  TRY(halves64(c, key, &scalar64, &ks[0], &ks[1]));
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, ks[0], &m, 1, NULL, &ks[0]));
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, ks[1], &m, 1, NULL, &ks[1]));
  TRY(op_const(c, TPUC_DTYPE_U32, 0x1BD11BDA, &t, &ks[2]));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_XOR, ks[2], ks[0], &ks[2]));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_XOR, ks[2], ks[1], &ks[2]));
  /* Counters in u64, so the high word carries. */
  TRY(tpuc_hlo_iota(c->fn, &t64, 0, &ctr));
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, base, &m, 1, NULL, &b));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, ctr, b, &ctr));
  TRY(halves64(c, ctr, &t64, &x[0], &x[1]));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, x[0], ks[0], &x[0]));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, x[1], ks[1], &x[1]));
  static const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  for (int r = 0; r < 20; r++) {
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, x[0], x[1], &x[0]));
    TRY(rotl32(c, x[1], rot[r % 8], &t, &x[1]));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_XOR, x[1], x[0], &x[1]));
    if (r % 4 == 3) { /* key injection j after rounds 4j-3 .. 4j */
      int j = r / 4 + 1;
      tpuc_hlo_value jv;
      TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, x[0], ks[j % 3], &x[0]));
      TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, x[1], ks[(j + 1) % 3], &x[1]));
      TRY(op_const(c, TPUC_DTYPE_U32, j, &t, &jv));
      TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, x[1], jv, &x[1]));
    }
  }
  out[0] = x[0];
  out[1] = x[1];
  return NULL;
}

/* Draws m counters from the call's generator state: both u32 words of each
 * (out[0], out[1], rank 1). The state is (key, counter): a call's draw from
 * its generator starts at counter offset * 2^32, and each draw of the call
 * continues where the one before ended (the state it leaves), so no two
 * draws repeat each other's numbers. */
static tpuc_status* draw_counters(op_ctx* c, int64_t m, tpuc_hlo_value out[2]) {
  if (c->fn != c->main_fn) c->words_region = true;
  if (c->words >= 0) {
    /* The counters of this draw, computed by the bucket's program: rows
     * words_used .. words_used + m - 1 of its [total, 2] words. */
    if (c->fn != c->main_fn || c->words_used + m > c->words_total)
      return tpuc_status_make(TPUC_INTERNAL,
                              "random draw past the bucket's %lld counters",
                              (long long)c->words_total);
    int64_t pairs[2] = {c->words_total, 2};
    int64_t lo[2] = {c->words_used, 0}, hi[2] = {c->words_used + m, 1};
    tpuc_hlo_value w;
    TRY(tpuc_hlo_reshape(c->fn, c->words, pairs, 2, &w));
    TRY(tpuc_hlo_slice(c->fn, w, lo, hi, NULL, &out[0]));
    lo[1] = 1;
    hi[1] = 2;
    TRY(tpuc_hlo_slice(c->fn, w, lo, hi, NULL, &out[1]));
    TRY(tpuc_hlo_reshape(c->fn, out[0], &m, 1, &out[0]));
    TRY(tpuc_hlo_reshape(c->fn, out[1], &m, 1, &out[1]));
    c->words_used += m;
    return NULL;
  }
  c->words_used += m;
  if (c->rng < 0) return op_unimpl("random op without a generator state");
  int64_t one = 1, zero = 0, two = 2;
  tpuc_hlo_value key, base, next, mv;
  TRY(tpuc_hlo_slice(c->fn, c->rng, &zero, &one, NULL, &key));
  TRY(tpuc_hlo_slice(c->fn, c->rng, &one, &two, NULL, &base));
  TRY(tpuc_hlo_reshape(c->fn, key, NULL, 0, &key));
  TRY(tpuc_hlo_reshape(c->fn, base, NULL, 0, &base));
  TRY(threefry2x32(c, key, base, m, out));
  /* The state this draw leaves: (key, counter + m). */
  TRY(tpuc_hlo_constant_i64(c->fn, TPUC_DTYPE_U64, m, &mv));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, base, mv, &next));
  TRY(tpuc_hlo_reshape(c->fn, key, &one, 1, &key));
  TRY(tpuc_hlo_reshape(c->fn, next, &one, 1, &next));
  tpuc_hlo_value parts[2] = {key, next};
  return tpuc_hlo_concatenate(c->fn, parts, 2, 0, &c->rng);
}

static int64_t elements(const tpuc_hlo_type* t) {
  int64_t n = 1;
  for (int d = 0; d < t->rank; d++) n *= t->dims[d];
  return n;
}

/* One counter per element of `shape`: its two u32 words, each of `shape`
 * (two independent numbers per element for the price of one). */
static tpuc_status* random_word_pairs(op_ctx* c, const tpuc_hlo_type* shape,
                                      tpuc_hlo_value out[2]) {
  tpuc_hlo_value w[2];
  TRY(draw_counters(c, elements(shape), w));
  TRY(tpuc_hlo_reshape(c->fn, w[0], shape->dims, shape->rank, &out[0]));
  return tpuc_hlo_reshape(c->fn, w[1], shape->dims, shape->rank, &out[1]);
}

tpuc_status* op_random_bits(op_ctx* c, tpuc_dtype bits,
                            const tpuc_hlo_type* shape, tpuc_hlo_value* out) {
  if (bits != TPUC_DTYPE_U32 && bits != TPUC_DTYPE_U64)
    return tpuc_status_make(TPUC_INTERNAL, "random bits of %s",
                            tpuc_dtype_mlir_name(bits));
  /* One counter gives two u32 words: two u32 numbers, or one u64. */
  int64_t n = elements(shape), zero = 0;
  bool wide = bits == TPUC_DTYPE_U64;
  int64_t m = wide ? n : (n + 1) / 2;
  tpuc_hlo_value w[2], flat;
  TRY(draw_counters(c, m, w));
  if (wide) {
    tpuc_hlo_type t64 = tpuc_hlo_type_make(TPUC_DTYPE_U64, &m, 1);
    tpuc_hlo_value lo, hi, sh;
    TRY(tpuc_hlo_convert(c->fn, w[0], TPUC_DTYPE_U64, &lo));
    TRY(tpuc_hlo_convert(c->fn, w[1], TPUC_DTYPE_U64, &hi));
    TRY(op_const(c, TPUC_DTYPE_U64, 32, &t64, &sh));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SHIFT_LEFT, hi, sh, &hi));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, hi, lo, &flat));
  } else {
    /* Interleaved (counter i gives numbers 2i and 2i + 1) by a select over
     * an [m, 2] iota: a concatenate of the two words makes XLA's CPU
     * compiler emit the whole Threefry twice, and compile several times as
     * long. */
    int64_t m2[2] = {m, 2}, dim0 = 0, two_m = 2 * m;
    tpuc_hlo_type t2 = tpuc_hlo_type_make(TPUC_DTYPE_U32, m2, 2);
    tpuc_hlo_value a, b, col, zero2, first;
    TRY(tpuc_hlo_broadcast_in_dim(c->fn, w[0], m2, 2, &dim0, &a));
    TRY(tpuc_hlo_broadcast_in_dim(c->fn, w[1], m2, 2, &dim0, &b));
    TRY(tpuc_hlo_iota(c->fn, &t2, 1, &col));
    TRY(op_const(c, TPUC_DTYPE_U32, 0, &t2, &zero2));
    TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_EQ, col, zero2, &first));
    TRY(tpuc_hlo_select(c->fn, first, a, b, &flat));
    TRY(tpuc_hlo_reshape(c->fn, flat, &two_m, 1, &flat));
    if (two_m != n) TRY(tpuc_hlo_slice(c->fn, flat, &zero, &n, NULL, &flat));
  }
  return tpuc_hlo_reshape(c->fn, flat, shape->dims, shape->rank, out);
}

/* Uniform [0, 1) in f32 (for f32, f16, bf16) or f64 from random bits of
 * `shape` (u32 for f32, u64 for f64): the bits under the exponent of 1.0,
 * minus 1. */
static tpuc_status* uniform01_of_bits(op_ctx* c, tpuc_hlo_value bits,
                                      const tpuc_hlo_type* shape, tpuc_dtype dt,
                                      tpuc_hlo_value* out) {
  bool wide = dt == TPUC_DTYPE_F64;
  tpuc_dtype ut = wide ? TPUC_DTYPE_U64 : TPUC_DTYPE_U32;
  tpuc_dtype ft = wide ? TPUC_DTYPE_F64 : TPUC_DTYPE_F32;
  tpuc_hlo_type s = *shape;
  s.dtype = ut;
  tpuc_hlo_value shift, one_bits, m, f, one;
  TRY(op_const(c, ut, wide ? 12 : 9, &s, &shift));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SHIFT_RIGHT_LOGICAL, bits, shift, &m));
  TRY(tpuc_hlo_constant_i64(
      c->fn, ut, wide ? (int64_t)0x3FF0000000000000LL : 0x3F800000, &one_bits));
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, one_bits, s.dims, s.rank, NULL,
                                &one_bits));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, m, one_bits, &m));
  TRY(tpuc_hlo_bitcast_convert(c->fn, m, ft, &f));
  tpuc_hlo_type fs = *shape;
  fs.dtype = ft;
  TRY(op_const(c, ft, 1.0, &fs, &one));
  return tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, f, one, out);
}

/* Uniform [0, 1) of `shape` in f32 (for f32, f16, bf16) or f64. */
static tpuc_status* uniform01(op_ctx* c, const tpuc_hlo_type* shape,
                              tpuc_dtype dt, tpuc_hlo_value* out) {
  tpuc_hlo_value bits;
  TRY(op_random_bits(c, dt == TPUC_DTYPE_F64 ? TPUC_DTYPE_U64 : TPUC_DTYPE_U32,
                     shape, &bits));
  return uniform01_of_bits(c, bits, shape, dt, out);
}

static tpuc_dtype compute_dtype(tpuc_dtype dt) {
  return dt == TPUC_DTYPE_F64 ? TPUC_DTYPE_F64 : TPUC_DTYPE_F32;
}

/* Scalar argument i as a rank-0 value of dtype `ct` broadcast to `shape`,
 * or `dflt` when absent. */
static tpuc_status* scalar_or(op_ctx* c, int i, double dflt, tpuc_dtype ct,
                              const tpuc_hlo_type* shape, tpuc_hlo_value* out) {
  if (op_is_none(c, i)) return op_const(c, ct, dflt, shape, out);
  return op_scalar(c, i, ct, shape, out);
}

static tpuc_status* finish(op_ctx* c, tpuc_hlo_value v, tpuc_dtype dt) {
  c->nouts = 1;
  return tpuc_hlo_convert(c->fn, v, dt, &c->outs[0]);
}

/* Uniform (0, 1) of `shape` in f32 or f64 (`dt`): uniform01 plus half its
 * step, exact, so neither end is ever drawn (logs of it stay finite). */
static tpuc_status* uniform_open01(op_ctx* c, const tpuc_hlo_type* shape,
                                   tpuc_dtype dt, tpuc_hlo_value* out) {
  tpuc_hlo_value u, half;
  TRY(uniform01(c, shape, dt, &u));
  tpuc_hlo_type fs = *shape;
  fs.dtype = dt;
  TRY(op_const(c, dt, dt == TPUC_DTYPE_F64 ? ldexp(1.0, -53) : ldexp(1.0, -24),
               &fs, &half));
  return tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, u, half, out);
}

/* Standard normal of `shape` in `ct` (f32 or f64): Box-Muller over two
 * uniforms, in f32 the two words of one counter per element, in f64 one
 * draw of twice the size. */
static tpuc_status* normal01(op_ctx* c, const tpuc_hlo_type* shape_in,
                             tpuc_dtype ct, tpuc_hlo_value* out) {
  if (shape_in->rank >= TPUC_MAX_RANK)
    return op_unimpl("normal draw of the largest rank");
  tpuc_hlo_type shape = *shape_in;
  shape.dtype = ct;
  tpuc_hlo_value u1, u2, one, r, th, m2, tau;
  if (ct == TPUC_DTYPE_F32) {
    tpuc_hlo_value w[2];
    TRY(random_word_pairs(c, &shape, w));
    TRY(uniform01_of_bits(c, w[0], &shape, ct, &u1));
    TRY(uniform01_of_bits(c, w[1], &shape, ct, &u2));
  } else {
    tpuc_hlo_type twice = shape;
    twice.rank = shape.rank + 1;
    twice.dims[shape.rank] = 2;
    tpuc_hlo_value u;
    TRY(uniform01(c, &twice, ct, &u));
    int64_t start[TPUC_MAX_RANK + 1] = {0}, lim[TPUC_MAX_RANK + 1];
    for (int d = 0; d < shape.rank; d++) lim[d] = shape.dims[d];
    lim[shape.rank] = 1;
    TRY(tpuc_hlo_slice(c->fn, u, start, lim, NULL, &u1));
    start[shape.rank] = 1;
    lim[shape.rank] = 2;
    TRY(tpuc_hlo_slice(c->fn, u, start, lim, NULL, &u2));
    TRY(tpuc_hlo_reshape(c->fn, u1, shape.dims, shape.rank, &u1));
    TRY(tpuc_hlo_reshape(c->fn, u2, shape.dims, shape.rank, &u2));
  }
  /* r = sqrt(-2 log(1 - u1)), 1 - u1 in (0, 1]. */
  TRY(op_const(c, ct, 1.0, &shape, &one));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, one, u1, &u1));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_LOG, u1, &r));
  TRY(op_const(c, ct, -2.0, &shape, &m2));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, r, m2, &r));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_SQRT, r, &r));
  TRY(op_const(c, ct, 2.0 * M_PI, &shape, &tau));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, u2, tau, &th));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_COSINE, th, &th));
  return tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, r, th, out);
}

/* The component dtype of a complex dtype. */
static tpuc_dtype component_of(tpuc_dtype dt) {
  return dt == TPUC_DTYPE_C128 ? TPUC_DTYPE_F64 : TPUC_DTYPE_F32;
}

/* `shape` with a trailing dim of 2 (real and imaginary parts). */
static tpuc_hlo_type pairs_shape(const tpuc_hlo_type* shape, tpuc_dtype ct) {
  tpuc_hlo_type t = *shape;
  t.dtype = ct;
  t.dims[t.rank] = 2;
  t.rank++;
  return t;
}

/* Complex of `shape` from `v` of pairs_shape(shape): the trailing dim's
 * entries 0 and 1 are the real and imaginary parts (as view_as_real). */
static tpuc_status* complex_from_pairs(op_ctx* c, tpuc_hlo_value v,
                                       const tpuc_hlo_type* shape,
                                       tpuc_hlo_value* out) {
  int r = shape->rank;
  int64_t start[TPUC_MAX_RANK + 1] = {0}, lim[TPUC_MAX_RANK + 1];
  for (int d = 0; d < r; d++) lim[d] = shape->dims[d];
  tpuc_hlo_value re, im;
  lim[r] = 1;
  TRY(tpuc_hlo_slice(c->fn, v, start, lim, NULL, &re));
  start[r] = 1;
  lim[r] = 2;
  TRY(tpuc_hlo_slice(c->fn, v, start, lim, NULL, &im));
  TRY(tpuc_hlo_reshape(c->fn, re, shape->dims, r, &re));
  TRY(tpuc_hlo_reshape(c->fn, im, shape->dims, r, &im));
  return tpuc_hlo_binary(c->fn, TPUC_HLO_COMPLEX, re, im, out);
}

/* uniform_(self, from=0, to=1): from + u * (to - from); a complex self
 * draws its real and imaginary parts each so (view_as_real, as the CPU). */
static tpuc_status* lower_uniform(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  tpuc_dtype dt = c->types[0].dtype;
  bool cplx = tpuc_dtype_is_complex(dt);
  if (!cplx && !tpuc_dtype_is_float(dt))
    return op_unimpl("uniform_ of a non-float tensor");
  if (cplx && c->types[0].rank >= TPUC_MAX_RANK)
    return op_unimpl("complex uniform_ of the largest rank");
  tpuc_dtype ct = cplx ? component_of(dt) : compute_dtype(dt);
  tpuc_hlo_type shape = c->types[0];
  shape.dtype = ct;
  if (cplx) shape = pairs_shape(&c->types[0], ct);
  tpuc_hlo_value u, lo, hi, span, v;
  TRY(uniform01(c, &shape, ct, &u));
  TRY(scalar_or(c, 1, 0.0, ct, &shape, &lo));
  TRY(scalar_or(c, 2, 1.0, ct, &shape, &hi));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, hi, lo, &span));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, u, span, &v));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, v, lo, &v));
  if (cplx) {
    c->nouts = 1;
    return complex_from_pairs(c, v, &c->types[0], &c->outs[0]);
  }
  return finish(c, v, dt);
}

/* Adds "scalar argument i < 0 (or NaN)" as the call's check. */
static tpuc_status* check_not_negative(op_ctx* c, int i, tpuc_dtype ct,
                                       tpuc_code code, const char* msg) {
  if (op_host_check_add(c, i, 0.0, true, INFINITY, true, code, msg))
    return NULL;
  tpuc_hlo_value s0, zero, ok;
  TRY(scalar_or(c, i, 1.0, ct, NULL, &s0));
  TRY(op_const(c, ct, 0.0, NULL, &zero));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_GE, s0, zero, &ok));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NOT, ok, &c->check));
  c->has_check = true;
  c->check_code = code;
  c->check_msg = msg;
  return NULL;
}

/* normal_(self, mean=0, std=1): mean + std * z. A complex self draws
 * real and imaginary parts each with std / sqrt(2) (the CPU's
 * view_as_real fill), so |z - mean|^2 has mean std^2. */
static tpuc_status* lower_normal(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  tpuc_dtype dt = c->types[0].dtype;
  bool cplx = tpuc_dtype_is_complex(dt);
  if (!cplx && !tpuc_dtype_is_float(dt))
    return op_unimpl("normal_ of a non-float tensor");
  if (cplx && c->types[0].rank >= TPUC_MAX_RANK)
    return op_unimpl("complex normal_ of the largest rank");
  tpuc_dtype ct = cplx ? component_of(dt) : compute_dtype(dt);
  tpuc_hlo_type shape = c->types[0];
  shape.dtype = ct;
  if (cplx) shape = pairs_shape(&c->types[0], ct);
  tpuc_hlo_value z, mean, std;
  TRY(normal01(c, &shape, ct, &z));
  TRY(scalar_or(c, 1, 0.0, ct, &shape, &mean));
  TRY(scalar_or(c, 2, 1.0, ct, &shape, &std));
  if (cplx) {
    tpuc_hlo_value k;
    TRY(op_const(c, ct, M_SQRT1_2, &shape, &k));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, std, k, &std));
  }
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, z, std, &z));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, z, mean, &z));
  /* std < 0 is refused, as on the CPU (whose message shows the value:
   * the CPU then runs the call and raises it). */
  if (!op_is_none(c, 2))
    TRY(check_not_negative(c, 2, ct, TPUC_UNIMPLEMENTED,
                           "normal expects std >= 0.0"));
  if (cplx) {
    c->nouts = 1;
    return complex_from_pairs(c, z, &c->types[0], &c->outs[0]);
  }
  return finish(c, z, dt);
}

/* Keep mask u < p of `shape` (p a value broadcast to shape, dtype ct). */
static tpuc_status* bernoulli_mask(op_ctx* c, const tpuc_hlo_type* shape,
                                   tpuc_dtype ct, tpuc_hlo_value p,
                                   tpuc_hlo_value* out) {
  tpuc_hlo_value u;
  TRY(uniform01(c, shape, ct, &u));
  return tpuc_hlo_compare(c->fn, TPUC_HLO_LT, u, p, out);
}

/* A probability argument outside [0, 1] is refused, as on the CPU. */
static tpuc_status* check_probability(op_ctx* c, tpuc_hlo_value p,
                                      tpuc_dtype ct, const tpuc_hlo_type* s) {
  tpuc_hlo_value zero, one, lo, hi, bad;
  TRY(op_const(c, ct, 0.0, s, &zero));
  TRY(op_const(c, ct, 1.0, s, &one));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_LT, p, zero, &lo));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_GT, p, one, &hi));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, lo, hi, &bad));
  /* NaN is refused too: p != p. */
  tpuc_hlo_value nan;
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_NE, p, p, &nan));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, bad, nan, &bad));
  if (s != NULL && s->rank > 0) {
    int64_t dims[TPUC_MAX_RANK];
    for (int d = 0; d < s->rank; d++) dims[d] = d;
    tpuc_hlo_fn* any = NULL;
    tpuc_hlo_value f;
    TRY(tpuc_hlo_region_binary(c->module, TPUC_DTYPE_PRED, TPUC_HLO_OR, &any));
    TRY(op_const(c, TPUC_DTYPE_PRED, 0, NULL, &f));
    TRY(tpuc_hlo_reduce(c->fn, &bad, &f, 1, dims, (size_t)s->rank, any, &bad));
  }
  c->has_check = true;
  c->check = bad;
  c->check_code = TPUC_INVALID_ARGUMENT;
  c->check_msg = "bernoulli: p must be in [0, 1]";
  return NULL;
}

/* bernoulli_.float(self, p) / bernoulli_.Tensor(self, p) /
 * bernoulli.p(self, p) (param 0): ones where u < p, in self's dtype;
 * bernoulli(self) (param 1): p is self. */
static tpuc_status* lower_bernoulli(op_ctx* c, int param) {
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  tpuc_hlo_type shape = c->types[0];
  tpuc_dtype dt = shape.dtype;
  if (param == 1 && !tpuc_dtype_is_float(dt))
    return op_unimpl("bernoulli of a non-float tensor");
  if (dt == TPUC_DTYPE_PRED || tpuc_dtype_is_complex(dt))
    return op_unimpl("bernoulli into bool or complex");
  tpuc_dtype ct = compute_dtype(tpuc_dtype_is_float(dt) ? dt : TPUC_DTYPE_F64);
  shape.dtype = ct;
  tpuc_hlo_value p, mask;
  int pi = param == 1 ? 0 : 1;
  if (op_is_tensor(c, pi) && c->types[pi].rank > 0) {
    if (!tpuc_dtype_is_float(c->types[pi].dtype))
      return op_unimpl("integer probabilities");
    TRY(op_operand(c, pi, ct, &shape, &p));
    TRY(check_probability(c, p, ct, &shape));
  } else {
    TRY(scalar_or(c, pi, 0.5, ct, &shape, &p));
    tpuc_hlo_value p0;
    TRY(scalar_or(c, pi, 0.5, ct, NULL, &p0));
    TRY(check_probability(c, p0, ct, NULL));
  }
  TRY(bernoulli_mask(c, &shape, ct, p, &mask));
  return finish(c, mask, dt);
}

/* native_dropout(input, p, train) -> (output, mask): keep with
 * probability 1 - p and scale by 1 / (1 - p); train=False is the
 * identity with an all-true mask. */
static tpuc_status* lower_dropout(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_value(c, 1))
    return op_unimpl("unexpected arguments");
  tpuc_hlo_type shape = c->types[0];
  tpuc_dtype dt = shape.dtype;
  if (!tpuc_dtype_is_float(dt)) return op_unimpl("dropout of a non-float");
  int64_t train = 1;
  TRY(op_int_arg(c, 2, 1, &train));
  tpuc_hlo_type ps = shape;
  ps.dtype = TPUC_DTYPE_PRED;
  c->nouts = 2;
  if (!train) {
    c->outs[0] = c->vals[0];
    return op_const(c, TPUC_DTYPE_PRED, 1, &ps, &c->outs[1]);
  }
  tpuc_dtype ct = compute_dtype(dt);
  tpuc_hlo_type cs = shape;
  cs.dtype = ct;
  tpuc_hlo_value p, keep, mask, one, scale, x, zero, y;
  TRY(op_scalar(c, 1, ct, &cs, &p));
  TRY(op_const(c, ct, 1.0, &cs, &one));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, one, p, &keep));
  TRY(bernoulli_mask(c, &cs, ct, keep, &mask));
  /* scale = 1 / (1 - p), 0 when p == 1 (everything dropped). */
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, one, keep, &scale));
  TRY(op_operand(c, 0, ct, &cs, &x));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, x, scale, &y));
  TRY(op_const(c, ct, 0.0, &cs, &zero));
  TRY(tpuc_hlo_select(c->fn, mask, y, zero, &y));
  TRY(tpuc_hlo_convert(c->fn, y, dt, &c->outs[0]));
  c->outs[1] = mask;
  if (op_host_check_add(c, 1, 0.0, true, 1.0, true, TPUC_INVALID_ARGUMENT,
                        "dropout probability has to be between 0 and 1"))
    return NULL;
  tpuc_hlo_value p0, lo, hi, bad;
  TRY(op_scalar(c, 1, ct, NULL, &p0));
  TRY(op_const(c, ct, 0.0, NULL, &lo));
  TRY(op_const(c, ct, 1.0, NULL, &hi));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_LT, p0, lo, &lo));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_GT, p0, hi, &hi));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, lo, hi, &bad));
  c->has_check = true;
  c->check = bad;
  c->check_code = TPUC_INVALID_ARGUMENT;
  c->check_msg = "dropout probability has to be between 0 and 1";
  return NULL;
}

/* native_dropout_backward(grad, mask, scale): grad * mask * scale
 * (deterministic; in the core table). */
tpuc_status* op_lower_dropout_backward(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1) || !op_is_value(c, 2))
    return op_unimpl("unexpected arguments");
  tpuc_hlo_type shape = c->types[0];
  tpuc_dtype dt = shape.dtype;
  if (!tpuc_dtype_is_float(dt)) return op_unimpl("non-float gradient");
  tpuc_dtype ct = compute_dtype(dt);
  tpuc_hlo_type cs = shape;
  cs.dtype = ct;
  tpuc_hlo_value g, m, s, y;
  TRY(op_operand(c, 0, ct, &cs, &g));
  TRY(op_operand(c, 1, ct, &cs, &m));
  TRY(op_scalar(c, 2, ct, &cs, &s));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, g, m, &y));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, y, s, &y));
  return finish(c, y, dt);
}

/* exponential_(self, lambd=1): -log(1 - u) / lambd. */
static tpuc_status* lower_exponential(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !tpuc_dtype_is_float(c->types[0].dtype))
    return op_unimpl("exponential_ of a non-float tensor");
  tpuc_hlo_type shape = c->types[0];
  tpuc_dtype ct = compute_dtype(shape.dtype);
  shape.dtype = ct;
  tpuc_hlo_value u, one, l, lam;
  TRY(uniform01(c, &shape, ct, &u));
  TRY(op_const(c, ct, 1.0, &shape, &one));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, one, u, &u));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_LOG, u, &l));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NEG, l, &l));
  TRY(scalar_or(c, 1, 1.0, ct, &shape, &lam));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, l, lam, &l));
  return finish(c, l, c->types[0].dtype);
}

/* random_.from(self, from, to) (param 0) / random_.to(self, to) (param 1):
 * integers uniform in [from, to) (64 random bits modulo the range). */
static tpuc_status* lower_random_range(op_ctx* c, int param) {
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  tpuc_hlo_type shape = c->types[0];
  tpuc_dtype dt = shape.dtype;
  if (tpuc_dtype_is_complex(dt) || dt == TPUC_DTYPE_PRED)
    return op_unimpl("random_ into bool or complex");
  int to_i = param == 0 ? 2 : 1;
  if (op_is_none(c, to_i)) return op_unimpl("random_ without an upper bound");
  int64_t from = 0, to = 0;
  if (param == 0) TRY(op_int_arg(c, 1, 0, &from));
  TRY(op_int_arg(c, to_i, 0, &to));
  if (from >= to)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "random_ expects 'from' to be less than 'to', but "
                            "got from=%lld >= to=%lld",
                            (long long)from, (long long)to);
  tpuc_hlo_type s = shape;
  s.dtype = TPUC_DTYPE_U64;
  tpuc_hlo_value bits, span, r, v, lo;
  TRY(op_random_bits(c, TPUC_DTYPE_U64, &shape, &bits));
  TRY(tpuc_hlo_constant_i64(c->fn, TPUC_DTYPE_S64, to - from, &span));
  TRY(tpuc_hlo_convert(c->fn, span, TPUC_DTYPE_U64, &span));
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, span, s.dims, s.rank, NULL, &span));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_REM, bits, span, &r));
  tpuc_hlo_type is = shape;
  is.dtype = TPUC_DTYPE_S64;
  TRY(tpuc_hlo_convert(c->fn, r, TPUC_DTYPE_S64, &v));
  TRY(op_const(c, TPUC_DTYPE_S64, 0, &is, &lo));
  tpuc_hlo_value f;
  TRY(tpuc_hlo_constant_i64(c->fn, TPUC_DTYPE_S64, from, &f));
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, f, is.dims, is.rank, NULL, &lo));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, v, lo, &v));
  return finish(c, v, dt);
}

/* Adds `bad` (rank-0 i1) to the call's check: a bad argument the CPU's
 * message shows the value of, so the CPU runs the call and raises it. */
static tpuc_status* cpu_check(op_ctx* c, tpuc_hlo_value bad) {
  if (c->has_check)
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, c->check, bad, &bad));
  c->has_check = true;
  c->check = bad;
  c->check_code = TPUC_UNIMPLEMENTED;
  c->check_msg = "bad random op argument: the CPU raises";
  return NULL;
}

/* Rank-0 i1: !(scalar argument i `dir` k) (NaN is bad too). */
static tpuc_status* scalar_not(op_ctx* c, int i, double dflt,
                               tpuc_hlo_compare_dir dir, double k,
                               tpuc_hlo_value* bad) {
  tpuc_hlo_value s, kv, ok;
  TRY(scalar_or(c, i, dflt, TPUC_DTYPE_F64, NULL, &s));
  TRY(op_const(c, TPUC_DTYPE_F64, k, NULL, &kv));
  TRY(tpuc_hlo_compare(c->fn, dir, s, kv, &ok));
  return tpuc_hlo_unary(c->fn, TPUC_HLO_NOT, ok, bad);
}

/* cauchy_(self, median=0, sigma=1): median + sigma * tan(pi (u - 1/2));
 * sigma must be > 0. */
static tpuc_status* lower_cauchy(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !tpuc_dtype_is_float(c->types[0].dtype))
    return op_unimpl("cauchy_ of a non-float tensor");
  tpuc_hlo_type shape = c->types[0];
  tpuc_dtype ct = compute_dtype(shape.dtype);
  shape.dtype = ct;
  tpuc_hlo_value u, half, pi, t, med, sig, bad;
  TRY(uniform_open01(c, &shape, ct, &u));
  TRY(op_const(c, ct, 0.5, &shape, &half));
  TRY(op_const(c, ct, M_PI, &shape, &pi));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, u, half, &t));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, t, pi, &t));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_TAN, t, &t));
  TRY(scalar_or(c, 1, 0.0, ct, &shape, &med));
  TRY(scalar_or(c, 2, 1.0, ct, &shape, &sig));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, t, sig, &t));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, t, med, &t));
  TRY(scalar_not(c, 2, 1.0, TPUC_HLO_GT, 0.0, &bad));
  TRY(cpu_check(c, bad));
  return finish(c, t, c->types[0].dtype);
}

/* geometric_(self, p): ceil(log(u) / log1p(-p)) for u in (0, 1), the
 * number of Bernoulli(p) trials up to the first success (>= 1); any real
 * dtype but bool; p must be in (0, 1). */
static tpuc_status* lower_geometric(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || op_is_none(c, 1)) return op_unimpl("arguments");
  tpuc_dtype dt = c->types[0].dtype;
  if (dt == TPUC_DTYPE_PRED || tpuc_dtype_is_complex(dt))
    return op_unimpl("geometric_ of a bool or complex tensor");
  tpuc_dtype ct = tpuc_dtype_is_float(dt) ? compute_dtype(dt) : TPUC_DTYPE_F64;
  tpuc_hlo_type shape = c->types[0];
  shape.dtype = ct;
  tpuc_hlo_value u, p, q, v, lo, hi, bad;
  TRY(uniform_open01(c, &shape, ct, &u));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_LOG, u, &u));
  TRY(op_scalar(c, 1, ct, &shape, &p));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NEG, p, &q));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_LOG1P, q, &q));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, u, q, &v));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_CEIL, v, &v));
  TRY(scalar_not(c, 1, 0.5, TPUC_HLO_GT, 0.0, &lo));
  TRY(scalar_not(c, 1, 0.5, TPUC_HLO_LT, 1.0, &hi));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, lo, hi, &bad));
  TRY(cpu_check(c, bad));
  return finish(c, v, dt);
}

/* log_normal_(self, mean=1, std=2): exp(mean + std * z); std must be
 * > 0. */
static tpuc_status* lower_log_normal(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !tpuc_dtype_is_float(c->types[0].dtype))
    return op_unimpl("log_normal_ of a non-float tensor");
  tpuc_hlo_type shape = c->types[0];
  tpuc_dtype ct = compute_dtype(shape.dtype);
  shape.dtype = ct;
  tpuc_hlo_value z, mean, std, bad;
  TRY(normal01(c, &shape, ct, &z));
  TRY(scalar_or(c, 1, 1.0, ct, &shape, &mean));
  TRY(scalar_or(c, 2, 2.0, ct, &shape, &std));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, z, std, &z));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, z, mean, &z));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_EXP, z, &z));
  TRY(scalar_not(c, 2, 2.0, TPUC_HLO_GT, 0.0, &bad));
  TRY(cpu_check(c, bad));
  return finish(c, z, c->types[0].dtype);
}

/* Which of normal's mean and std are tensors. */
#define NT_TENSOR_TENSOR 0
#define NT_TENSOR_FLOAT 1
#define NT_FLOAT_TENSOR 2

/* normal.Tensor_Tensor(mean, std) / .Tensor_float / .float_Tensor (and
 * their out= forms): z * std + mean over the broadcast shape, in the
 * dtype of the (first) tensor argument, as the CPU's
 * normal_(0, 1).mul_(std).add_(mean); std must be >= 0. */
static tpuc_status* lower_normal_tensor(op_ctx* c, int param) {
  int ti = param == NT_FLOAT_TENSOR ? 1 : 0;
  if (!op_is_tensor(c, ti) || !op_is_value(c, 0) || !op_is_value(c, 1))
    return op_unimpl("unexpected arguments");
  tpuc_dtype dt = c->types[ti].dtype;
  if (!tpuc_dtype_is_float(dt)) return op_unimpl("normal of a non-float");
  for (int i = 0; i < 2; i++)
    if (op_is_tensor(c, i) && tpuc_dtype_is_complex(c->types[i].dtype))
      return op_unimpl("complex mean or std");
  tpuc_dtype ct = compute_dtype(dt);
  int both[2] = {0, 1};
  tpuc_hlo_type shape;
  if (param == NT_TENSOR_TENSOR)
    TRY(op_broadcast_shape(c, both, 2, &shape));
  else
    shape = c->types[ti];
  shape.dtype = ct;
  tpuc_hlo_value z, mean, std;
  TRY(normal01(c, &shape, ct, &z));
  TRY(op_operand(c, 0, ct, &shape, &mean));
  TRY(op_operand(c, 1, ct, &shape, &std));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, z, std, &z));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, z, mean, &z));
  if (param == NT_TENSOR_FLOAT) {
    /* a float std: the CPU's message shows it */
    tpuc_hlo_value bad;
    TRY(scalar_not(c, 1, 1.0, TPUC_HLO_GE, 0.0, &bad));
    TRY(cpu_check(c, bad));
  } else {
    tpuc_hlo_value zero, ok, bad;
    TRY(op_const(c, ct, 0.0, &shape, &zero));
    TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_GE, std, zero, &ok));
    TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NOT, ok, &bad));
    TRY(op_any_true(c, bad, &c->check));
    c->has_check = true;
    c->check_code = TPUC_INVALID_ARGUMENT;
    c->check_msg = "normal expects all elements of std >= 0.0";
  }
  return finish(c, z, dt);
}

/* The most keys (rows x samples x categories) multinomial with
 * replacement builds at once; larger calls run on the CPU. */
#define MULTINOMIAL_MAX_KEYS ((int64_t)1 << 24)

/* multinomial(self, num_samples, replacement=False): rows of
 * probabilities (1-D or 2-D, any non-negative weights). Each category
 * gets the key p / E with E ~ Exp(1): the largest key is category k with
 * probability p_k / sum(p), and the keys in decreasing order are a draw
 * without replacement (the CPU's own method, p / q with q exponential,
 * then topk). With replacement every sample takes the argmax of its own
 * keys. */
static tpuc_status* lower_multinomial(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type pt = c->types[0];
  if (!tpuc_dtype_is_float(pt.dtype) || pt.rank < 1 || pt.rank > 2)
    return op_unimpl("multinomial arguments the CPU refuses");
  int64_t ns = 0, repl = 0;
  if (op_is_none(c, 1)) return op_unimpl("no num_samples");
  TRY(op_int_arg(c, 1, 0, &ns));
  TRY(op_int_arg(c, 2, 0, &repl));
  int64_t rows = pt.rank == 2 ? pt.dims[0] : 1, k = pt.dims[pt.rank - 1];
  if (ns <= 0 || k == 0 || (!repl && ns > k) || rows == 0)
    return op_unimpl("multinomial sizes the CPU refuses or special-cases");
  if (repl && rows * ns * k > MULTINOMIAL_MAX_KEYS)
    return op_unimpl("large multinomial with replacement: CPU");
  tpuc_dtype ct = compute_dtype(pt.dtype);
  int64_t pd[2] = {rows, k};
  tpuc_hlo_type p2 = tpuc_hlo_type_make(ct, pd, 2);
  tpuc_hlo_value p, zero, bad, neg, fin, sum;
  TRY(tpuc_hlo_convert(c->fn, c->vals[0], ct, &p));
  TRY(tpuc_hlo_reshape(c->fn, p, pd, 2, &p));
  /* negative, NaN or infinite weights, or a row that sums to <= 0: the
   * CPU raises */
  TRY(op_const(c, ct, 0.0, &p2, &zero));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_LT, p, zero, &neg));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_IS_FINITE, p, &fin));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NOT, fin, &fin));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, neg, fin, &bad));
  TRY(op_any_true(c, bad, &bad));
  {
    tpuc_hlo_fn* add = NULL;
    tpuc_hlo_value z0, zr, le;
    int64_t one_dim = 1;
    TRY(tpuc_hlo_region_binary(c->module, ct, TPUC_HLO_ADD, &add));
    TRY(op_const(c, ct, 0.0, NULL, &z0));
    TRY(tpuc_hlo_reduce(c->fn, &p, &z0, 1, &one_dim, 1, add, &sum));
    tpuc_hlo_type rt = tpuc_hlo_type_make(ct, &rows, 1);
    TRY(op_const(c, ct, 0.0, &rt, &zr));
    TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_LE, sum, zr, &le));
    TRY(op_any_true(c, le, &le));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, bad, le, &bad));
  }
  TRY(cpu_check(c, bad));
  /* E = -log(u), u in (0, 1): positive and finite, so p / E is never
   * NaN (a zero weight keys 0, below every positive one). */
  int64_t kd[3] = {rows, repl ? ns : 1, k};
  tpuc_hlo_type kt = tpuc_hlo_type_make(ct, kd, 3);
  tpuc_hlo_value u, e, pb, key;
  TRY(uniform_open01(c, &kt, ct, &u));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_LOG, u, &e));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NEG, e, &e));
  int64_t map[2] = {0, 2};
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, p, kd, 3, map, &pb));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, pb, e, &key));
  tpuc_hlo_type it = tpuc_hlo_type_make(TPUC_DTYPE_S64, kd, 3);
  tpuc_hlo_value iota, idx;
  TRY(tpuc_hlo_iota(c->fn, &it, 2, &iota));
  if (repl) {
    /* argmax over the categories: the first index holding the max */
    tpuc_hlo_fn* mx = NULL;
    tpuc_hlo_fn* mn = NULL;
    tpuc_hlo_value lowest, best, bestb, at, big, cand, kmax;
    int64_t last = 2;
    TRY(tpuc_hlo_region_binary(c->module, ct, TPUC_HLO_MAX, &mx));
    TRY(op_const(c, ct, -INFINITY, NULL, &lowest));
    TRY(tpuc_hlo_reduce(c->fn, &key, &lowest, 1, &last, 1, mx, &best));
    int64_t bmap[2] = {0, 1};
    TRY(tpuc_hlo_broadcast_in_dim(c->fn, best, kd, 3, bmap, &bestb));
    TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_EQ, key, bestb, &at));
    TRY(op_const(c, TPUC_DTYPE_S64, (double)k, &it, &big));
    TRY(tpuc_hlo_select(c->fn, at, iota, big, &cand));
    TRY(tpuc_hlo_region_binary(c->module, TPUC_DTYPE_S64, TPUC_HLO_MIN, &mn));
    TRY(op_const(c, TPUC_DTYPE_S64, (double)k, NULL, &kmax));
    TRY(tpuc_hlo_reduce(c->fn, &cand, &kmax, 1, &last, 1, mn, &idx));
  } else {
    /* the categories by decreasing key, the first num_samples kept */
    tpuc_dtype dts[2] = {ct, TPUC_DTYPE_S64};
    tpuc_hlo_fn* gt = NULL;
    tpuc_hlo_value ins[2] = {key, iota}, outs[2];
    TRY(tpuc_hlo_region_compare(c->module, dts, 2, TPUC_HLO_GT, &gt));
    TRY(tpuc_hlo_sort(c->fn, ins, 2, 2, true, gt, outs));
    int64_t start[3] = {0, 0, 0}, lim[3] = {rows, 1, ns};
    TRY(tpuc_hlo_slice(c->fn, outs[1], start, lim, NULL, &idx));
  }
  int64_t od[2] = {rows, ns};
  c->nouts = 1;
  if (pt.rank == 1) return tpuc_hlo_reshape(c->fn, idx, &ns, 1, &c->outs[0]);
  return tpuc_hlo_reshape(c->fn, idx, od, 2, &c->outs[0]);
}

/* rrelu_with_noise(self, noise, lower, upper, training) -> (result, the
 * new noise, written into noise). Training: each x <= 0 takes its own
 * slope r ~ U(lower, upper), x * r, and noise r; others stay, noise 1.
 * Evaluation: leaky_relu with slope (lower + upper) / 2, noise kept. */
static tpuc_status* lower_rrelu(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type xt = c->types[0], nt = c->types[1];
  tpuc_dtype dt = xt.dtype;
  if (!tpuc_dtype_is_float(dt) || nt.dtype != dt || nt.rank != xt.rank)
    return op_unimpl("rrelu arguments the CPU checks");
  for (int d = 0; d < xt.rank; d++)
    if (nt.dims[d] != xt.dims[d]) return op_unimpl("noise shape: CPU raises");
  int64_t training = 0;
  TRY(op_int_arg(c, 4, 0, &training));
  tpuc_dtype ct = compute_dtype(dt);
  tpuc_hlo_type shape = xt;
  shape.dtype = ct;
  tpuc_hlo_value x, lo, hi, zero, slope, y, keep;
  TRY(op_operand(c, 0, ct, &shape, &x));
  TRY(scalar_or(c, 2, 0.125, ct, &shape, &lo));
  TRY(scalar_or(c, 3, 1.0 / 3.0, ct, &shape, &hi));
  TRY(op_const(c, ct, 0.0, &shape, &zero));
  c->nouts = 2;
  if (!training) {
    /* the CPU's slope is (lower + upper) / 2 in double, then rounded */
    tpuc_hlo_value l0, h0, two;
    TRY(scalar_or(c, 2, 0.125, TPUC_DTYPE_F64, NULL, &l0));
    TRY(scalar_or(c, 3, 1.0 / 3.0, TPUC_DTYPE_F64, NULL, &h0));
    TRY(op_const(c, TPUC_DTYPE_F64, 2.0, NULL, &two));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, l0, h0, &slope));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, slope, two, &slope));
    TRY(tpuc_hlo_convert(c->fn, slope, ct, &slope));
    TRY(tpuc_hlo_broadcast_in_dim(c->fn, slope, shape.dims, shape.rank, NULL,
                                  &slope));
    TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_GT, x, zero, &keep));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, x, slope, &y));
    TRY(tpuc_hlo_select(c->fn, keep, x, y, &y));
    c->outs[1] = c->vals[1];
    TRY(tpuc_hlo_convert(c->fn, y, dt, &c->outs[0]));
    return NULL;
  }
  tpuc_hlo_value u, r, one, noise;
  TRY(uniform01(c, &shape, ct, &u));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, hi, lo, &r));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, u, r, &r));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, r, lo, &r));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_LE, x, zero, &keep));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, x, r, &y));
  TRY(tpuc_hlo_select(c->fn, keep, y, x, &y));
  TRY(op_const(c, ct, 1.0, &shape, &one));
  TRY(tpuc_hlo_select(c->fn, keep, r, one, &noise));
  TRY(tpuc_hlo_convert(c->fn, y, dt, &c->outs[0]));
  TRY(tpuc_hlo_convert(c->fn, noise, dt, &c->outs[1]));
  return NULL;
}

/* _standard_gamma(alpha): Gamma(alpha, 1) by Marsaglia and Tsang's method
 * (2000), the CPU's algorithm: alpha < 1 is boosted to alpha + 1 and the
 * sample scaled by (1 - U)^(1 / alpha); d = alpha - 1/3, c = 1 / sqrt(9d);
 * an attempt draws x ~ N(0, 1) and u ~ U(0, 1] and, where y = 1 + c x > 0,
 * accepts d y^3 if u < 1 - 0.0331 x^4 or log u < x^2 / 2 + d (1 - y^3 +
 * log y^3). Every element attempts in each round of a while loop until all
 * have accepted (each round accepts 95 % or more of what is left, so a
 * million samples take about six rounds); after GAMMA_ROUNDS rounds what
 * never accepted is NaN (a NaN or negative alpha). Results are at least
 * the dtype's smallest normal number (alpha 0 included), as on the CPU. */
#define GAMMA_ROUNDS 64
#define GAMMA_STATE 6 /* round, done, sample, d, c, rng */

/* Builds `build(c, arg)` into region `r`, then gives c its body and
 * generator state back (also on failure). */
static tpuc_status* in_region(op_ctx* c, tpuc_hlo_fn* r,
                              tpuc_status* (*build)(op_ctx*, void*),
                              void* arg) {
  tpuc_hlo_fn* fn = c->fn;
  tpuc_hlo_value rng = c->rng;
  c->fn = r;
  tpuc_status* st = build(c, arg);
  c->fn = fn;
  c->rng = rng;
  return st;
}

typedef struct {
  const tpuc_hlo_type* shape; /* of the samples, in the compute dtype */
} gamma_loop;

/* The condition of a sampler's loop whose state starts (round, done):
 * round < *(const int*)rounds and some element is not done yet. */
static tpuc_status* rounds_cond(op_ctx* c, void* rounds) {
  tpuc_hlo_value it, done, lim, more, left, any, r;
  TRY(tpuc_hlo_get_arg(c->fn, 0, &it));
  TRY(tpuc_hlo_get_arg(c->fn, 1, &done));
  TRY(op_const(c, TPUC_DTYPE_S32, *(const int*)rounds, NULL, &lim));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_LT, it, lim, &more));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NOT, done, &left));
  TRY(op_any_true(c, left, &any));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, more, any, &r));
  return tpuc_hlo_return(c->fn, &r, 1);
}

/* body: one attempt for every element; the ones not done before that
 * accept now keep their sample */
static tpuc_status* gamma_body(op_ctx* c, void* arg) {
  const tpuc_hlo_type* t = ((gamma_loop*)arg)->shape;
  tpuc_dtype ct = t->dtype;
  tpuc_hlo_value a[GAMMA_STATE];
  for (size_t i = 0; i < GAMMA_STATE; i++) TRY(tpuc_hlo_get_arg(c->fn, i, &a[i]));
  tpuc_hlo_value it = a[0], done = a[1], res = a[2], d = a[3], cc = a[4];
  c->rng = a[5];
  tpuc_hlo_value x, u, one, zero, y, v, xx, k, lhs, rhs, ok1, ok2, ok, pos,
      take, dv, step;
  TRY(normal01(c, t, ct, &x));
  TRY(uniform01(c, t, ct, &u));
  TRY(op_const(c, ct, 1.0, t, &one));
  TRY(op_const(c, ct, 0.0, t, &zero));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, one, u, &u)); /* (0, 1] */
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, cc, x, &y));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, one, y, &y));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, y, y, &v));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, v, y, &v));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, x, x, &xx));
  /* u < 1 - 0.0331 x^4 */
  TRY(op_const(c, ct, 0.0331, t, &k));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, k, xx, &rhs));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, rhs, xx, &rhs));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, one, rhs, &rhs));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_LT, u, rhs, &ok1));
  /* log u < x^2 / 2 + d (1 - v + log v) */
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_LOG, u, &lhs));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_LOG, v, &rhs));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, one, v, &step));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, step, rhs, &rhs));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, d, rhs, &rhs));
  TRY(op_const(c, ct, 0.5, t, &k));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, k, xx, &k));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, k, rhs, &rhs));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_LT, lhs, rhs, &ok2));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, ok1, ok2, &ok));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_GT, y, zero, &pos));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, ok, pos, &ok));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NOT, done, &take));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, take, ok, &take));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, d, v, &dv));
  TRY(tpuc_hlo_select(c->fn, take, dv, res, &res));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, done, ok, &done));
  TRY(op_const(c, TPUC_DTYPE_S32, 1, NULL, &step));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, it, step, &it));
  tpuc_hlo_value r[GAMMA_STATE] = {it, done, res, d, cc, c->rng};
  return tpuc_hlo_return(c->fn, r, GAMMA_STATE);
}

/* Gamma(alpha, 1) samples (ct, of alpha's shape `t` in ct) of `alpha`
 * (ct): NaN where no round accepted, 0 where alpha is 0. */
static tpuc_status* gamma_samples(op_ctx* c, tpuc_hlo_value alpha,
                                  const tpuc_hlo_type* t, tpuc_hlo_value* out) {
  tpuc_dtype ct = t->dtype;
  /* Counters a call may draw: the boost's uniforms and, per round, a
   * normal and a uniform (at most 3 counters an element in f64). */
  if ((double)elements(t) * (3.0 * GAMMA_ROUNDS + 2.0) >= 4294967296.0)
    return op_unimpl("gamma samples of more than 20 million elements");
  if (c->rng < 0) return op_unimpl("random op without a generator state");
  tpuc_hlo_value one, third, nine, small, zero_a, a1, d, cc, u0, inv, scale;
  TRY(op_const(c, ct, 1.0, t, &one));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_LT, alpha, one, &small));
  TRY(op_const(c, ct, 0.0, t, &d));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_EQ, alpha, d, &zero_a));
  /* the boost: (1 - U)^(1 / alpha) where alpha < 1 */
  TRY(uniform01(c, t, ct, &u0));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, one, u0, &u0));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, one, alpha, &inv));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_POW, u0, inv, &scale));
  TRY(tpuc_hlo_select(c->fn, small, scale, one, &scale));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, alpha, one, &a1));
  TRY(tpuc_hlo_select(c->fn, small, a1, alpha, &a1));
  TRY(op_const(c, ct, 1.0 / 3.0, t, &third));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, a1, third, &d));
  TRY(op_const(c, ct, 9.0, t, &nine));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, nine, d, &cc));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_SQRT, cc, &cc));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, one, cc, &cc));
  /* the rounds */
  tpuc_hlo_type bt = *t;
  bt.dtype = TPUC_DTYPE_PRED;
  tpuc_hlo_type ts[GAMMA_STATE] = {tpuc_hlo_type_scalar(TPUC_DTYPE_S32), bt, *t,
                                   *t, *t, tpuc_hlo_type_make(TPUC_DTYPE_U64,
                                                              (int64_t[]){2}, 1)};
  tpuc_hlo_value init[GAMMA_STATE], outs[GAMMA_STATE], f;
  TRY(op_const(c, TPUC_DTYPE_S32, 0, NULL, &init[0]));
  TRY(op_const(c, ct, 0.0, t, &f));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_NE, f, f, &init[1])); /* false */
  TRY(op_const(c, ct, NAN, t, &init[2]));
  init[3] = d;
  init[4] = cc;
  init[5] = c->rng;
  tpuc_hlo_fn *cond, *body;
  gamma_loop L = {t};
  TRY(tpuc_hlo_region_create(c->module, ts, GAMMA_STATE, &cond));
  TRY(in_region(c, cond, rounds_cond, &(int){GAMMA_ROUNDS}));
  TRY(tpuc_hlo_region_create(c->module, ts, GAMMA_STATE, &body));
  TRY(in_region(c, body, gamma_body, &L));
  TRY(tpuc_hlo_while(c->fn, init, GAMMA_STATE, cond, body, outs));
  c->rng = outs[5];
  tpuc_hlo_value r, zero;
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, scale, outs[2], &r));
  TRY(op_const(c, ct, 0.0, t, &zero));
  return tpuc_hlo_select(c->fn, zero_a, zero, r, out);
}

/* The smallest normal number of float dtype dt. */
static double least_normal(tpuc_dtype dt) {
  return dt == TPUC_DTYPE_F64   ? 2.2250738585072014e-308
         : dt == TPUC_DTYPE_F16 ? 6.103515625e-05
                                : 1.1754943508222875e-38;
}

/* max(v, lo) of type t, a NaN staying NaN (XLA's max would keep it too,
 * std::max as the CPU calls it would not: that case is a NaN alpha, for
 * which the CPU's loop never ends). */
static tpuc_status* at_least(op_ctx* c, tpuc_hlo_value v, double lo,
                             const tpuc_hlo_type* t, tpuc_hlo_value* out) {
  tpuc_hlo_value k;
  TRY(op_const(c, t->dtype, lo, t, &k));
  return tpuc_hlo_binary(c->fn, TPUC_HLO_MAX, v, k, out);
}

/* _standard_gamma(alpha): float dtypes, half ones too (as CUDA; the CPU
 * has float and double only), computed in f32 or f64. */
static tpuc_status* lower_standard_gamma(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  tpuc_dtype dt = c->types[0].dtype;
  if (!tpuc_dtype_is_float(dt)) return op_unimpl("_standard_gamma of this dtype");
  tpuc_hlo_type t = c->types[0];
  t.dtype = compute_dtype(dt);
  tpuc_hlo_value alpha, r;
  TRY(tpuc_hlo_convert(c->fn, c->vals[0], t.dtype, &alpha));
  TRY(gamma_samples(c, alpha, &t, &r));
  TRY(tpuc_hlo_convert(c->fn, r, dt, &r));
  c->nouts = 1;
  return at_least(c, r, least_normal(dt), &c->types[0], &c->outs[0]);
}

/* poisson(rates): the CPU's method, in f64: for a rate of 10 or more
 * Hormann's transformed rejection (1993; two uniforms an attempt), below
 * 10 Knuth's multiplication of uniforms until the product falls to
 * exp(-rate) (as many rounds as the sample's value, plus one); a rate of 0
 * gives 0. Every element steps in each round of a while loop until all
 * are done; after POISSON_ROUNDS rounds what is not done is NaN (never
 * seen: a rate below 10 reaches that only past a count of 127). A negative
 * or NaN rate lets the CPU raise its error. */
#define POISSON_ROUNDS 128
#define POISSON_STATE 6 /* round, done, sample, product, rate, rng */

static tpuc_status* poisson_body(op_ctx* c, void* arg) {
  const tpuc_hlo_type* t = (const tpuc_hlo_type*)arg;
  tpuc_hlo_value a[POISSON_STATE];
  for (size_t i = 0; i < POISSON_STATE; i++)
    TRY(tpuc_hlo_get_arg(c->fn, i, &a[i]));
  tpuc_hlo_value it = a[0], done = a[1], res = a[2], prod = a[3], lam = a[4];
  c->rng = a[5];
  tpuc_hlo_value u1, v;
  TRY(uniform01(c, t, TPUC_DTYPE_F64, &u1));
  TRY(uniform01(c, t, TPUC_DTYPE_F64, &v));
  em ee = em_of(c), *e = &ee;
  V one = K(lam, 1);
  /* rate >= 10: one attempt of the transformed rejection */
  V slam = SQRT(lam), loglam = LOG(lam);
  V b = ADD(K(lam, 0.931), MUL(K(lam, 2.53), slam));
  V aa = ADD(K(lam, -0.059), MUL(K(lam, 0.02483), b));
  V inva = ADD(K(lam, 1.1239), DIV(K(lam, 1.1328), SUB(b, K(lam, 3.4))));
  V vr = SUB(K(lam, 0.9277), DIV(K(lam, 3.6224), SUB(b, K(lam, 2))));
  V U = SUB(u1, K(lam, 0.5));
  V us = SUB(K(lam, 0.5), ABS(U));
  V k = MUL(ADD(DIV(MUL(K(lam, 2), aa), us), b), U);
  k = FLOOR(ADD(ADD(k, lam), K(lam, 0.43)));
  V quick = AND(GE(us, K(lam, 0.07)), LE(v, vr));
  V rej = OR(LT(k, K(lam, 0)), AND(LT(us, K(lam, 0.013)), GT(v, us)));
  V lg = -1;
  if (e->st == NULL) em_keep(e, op_lgamma_f64(c, ADD(k, one), &lg));
  V lhs = SUB(ADD(LOG(v), LOG(inva)), LOG(ADD(DIV(aa, MUL(us, us)), b)));
  V rhs = SUB(ADD(NEG(lam), MUL(k, loglam)), lg);
  V big_ok = OR(quick, AND(NOT(rej), LE(lhs, rhs)));
  /* rate < 10: one more factor of the product */
  V prod2 = MUL(prod, u1);
  V more = GT(prod2, EXP(NEG(lam)));
  V big = GE(lam, K(lam, 10));
  V left = NOT(done);
  /* the small branch counts in res while it goes on */
  V cnt = SEL(AND(left, more), ADD(res, one), res);
  V ok = SEL(big, big_ok, NOT(more));
  V take = AND(left, ok);
  res = SEL(big, SEL(take, k, res), cnt);
  prod = SEL(left, prod2, prod);
  done = OR(done, ok);
  it = ADD(it, e_k0(e, TPUC_DTYPE_S32, 1));
  TRY(em_done(e));
  tpuc_hlo_value r[POISSON_STATE] = {it, done, res, prod, lam, c->rng};
  return tpuc_hlo_return(c->fn, r, POISSON_STATE);
}

static tpuc_status* lower_poisson(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  tpuc_dtype dt = c->types[0].dtype;
  if (!tpuc_dtype_is_float(dt)) return op_unimpl("poisson of this dtype");
  tpuc_hlo_type t = c->types[0];
  t.dtype = TPUC_DTYPE_F64;
  if ((double)elements(&t) * 2.0 * POISSON_ROUNDS >= 4294967296.0)
    return op_unimpl("poisson samples of more than 16 million elements");
  if (c->rng < 0) return op_unimpl("random op without a generator state");
  tpuc_hlo_value lam, zero, neg, bad;
  TRY(tpuc_hlo_convert(c->fn, c->vals[0], TPUC_DTYPE_F64, &lam));
  TRY(op_const(c, TPUC_DTYPE_F64, 0.0, &t, &zero));
  /* rate < 0 or NaN: the CPU raises "invalid Poisson rate" */
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_GE, lam, zero, &neg));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NOT, neg, &neg));
  TRY(op_any_true(c, neg, &bad));
  c->has_check = true;
  c->check = bad;
  c->check_code = TPUC_UNIMPLEMENTED;
  c->check_msg = "poisson: invalid rate (the CPU raises)";
  tpuc_hlo_type bt = t;
  bt.dtype = TPUC_DTYPE_PRED;
  tpuc_hlo_type ts[POISSON_STATE] = {
      tpuc_hlo_type_scalar(TPUC_DTYPE_S32),
      bt,
      t,
      t,
      t,
      tpuc_hlo_type_make(TPUC_DTYPE_U64, (int64_t[]){2}, 1)};
  tpuc_hlo_value init[POISSON_STATE], outs[POISSON_STATE];
  TRY(op_const(c, TPUC_DTYPE_S32, 0, NULL, &init[0]));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_EQ, lam, zero, &init[1])); /* 0: done */
  init[2] = zero;
  TRY(op_const(c, TPUC_DTYPE_F64, 1.0, &t, &init[3]));
  init[4] = lam;
  init[5] = c->rng;
  tpuc_hlo_fn *cond, *body;
  TRY(tpuc_hlo_region_create(c->module, ts, POISSON_STATE, &cond));
  TRY(in_region(c, cond, rounds_cond, &(int){POISSON_ROUNDS}));
  TRY(tpuc_hlo_region_create(c->module, ts, POISSON_STATE, &body));
  TRY(in_region(c, body, poisson_body, &t));
  TRY(tpuc_hlo_while(c->fn, init, POISSON_STATE, cond, body, outs));
  c->rng = outs[5];
  tpuc_hlo_value nan, r;
  TRY(op_const(c, TPUC_DTYPE_F64, NAN, &t, &nan));
  TRY(tpuc_hlo_select(c->fn, outs[1], outs[2], nan, &r));
  c->nouts = 1;
  return tpuc_hlo_convert(c->fn, r, dt, &c->outs[0]);
}
/* _sample_dirichlet(alpha): gamma samples (at least the smallest normal
 * number) over their sum along the last dim, clamped to [the dtype's
 * smallest normal number, the float below 1], as CUDA computes it (in f32
 * for f32 and half dtypes; the CPU draws the gammas in f64). */
static tpuc_status* lower_sample_dirichlet(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  tpuc_dtype dt = c->types[0].dtype;
  const tpuc_hlo_type* at = &c->types[0];
  if (!tpuc_dtype_is_float(dt) || at->rank == 0)
    return op_unimpl("_sample_dirichlet of this dtype or rank");
  tpuc_dtype ct = compute_dtype(dt);
  tpuc_hlo_type t = *at;
  t.dtype = ct;
  tpuc_hlo_value alpha, g, sum, hi;
  TRY(tpuc_hlo_convert(c->fn, c->vals[0], ct, &alpha));
  TRY(gamma_samples(c, alpha, &t, &g));
  TRY(at_least(c, g, least_normal(ct), &t, &g));
  int64_t last = t.rank - 1, map[TPUC_MAX_RANK];
  tpuc_hlo_fn* add = NULL;
  tpuc_hlo_value z0;
  TRY(tpuc_hlo_region_binary(c->module, ct, TPUC_HLO_ADD, &add));
  TRY(op_const(c, ct, 0.0, NULL, &z0));
  TRY(tpuc_hlo_reduce(c->fn, &g, &z0, 1, &last, 1, add, &sum));
  for (int k = 0; k < t.rank - 1; k++) map[k] = k;
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, sum, t.dims, t.rank, map, &sum));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, g, sum, &g));
  TRY(tpuc_hlo_convert(c->fn, g, dt, &g));
  TRY(at_least(c, g, least_normal(dt), at, &g));
  double below1 = dt == TPUC_DTYPE_F64   ? 1.0 - ldexp(1.0, -53)
                  : dt == TPUC_DTYPE_F16 ? 1.0 - ldexp(1.0, -11)
                  : dt == TPUC_DTYPE_BF16 ? 1.0 - ldexp(1.0, -8)
                                          : 1.0 - ldexp(1.0, -24);
  TRY(op_const(c, dt, below1, at, &hi));
  c->nouts = 1;
  return tpuc_hlo_binary(c->fn, TPUC_HLO_MIN, g, hi, &c->outs[0]);
}

/* randperm(n, generator, out): a uniformly random permutation of 0 ..
 * n - 1, the order of n random 64-bit keys (a stable sort; two equal keys
 * have probability about n^2 / 2^65). s64 results; the out= write casts
 * them to out's dtype. */
static tpuc_status* lower_randperm(op_ctx* c, int param) {
  (void)param;
  int64_t n = 0;
  TRY(op_int_arg(c, 0, 0, &n));
  if (n < 0)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "n must be non-negative, got %lld", (long long)n);
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_S64, &n, 1);
  c->nouts = 1;
  if (n == 0) return op_const(c, TPUC_DTYPE_S64, 0, &t, &c->outs[0]);
  tpuc_hlo_type kt = tpuc_hlo_type_make(TPUC_DTYPE_U64, &n, 1);
  tpuc_hlo_value ins[2], outs[2];
  TRY(op_random_bits(c, TPUC_DTYPE_U64, &kt, &ins[0]));
  TRY(tpuc_hlo_iota(c->fn, &t, 0, &ins[1]));
  tpuc_dtype dts[2] = {TPUC_DTYPE_U64, TPUC_DTYPE_S64};
  tpuc_hlo_fn* less = NULL;
  TRY(tpuc_hlo_region_compare(c->module, dts, 2, TPUC_HLO_LT, &less));
  TRY(tpuc_hlo_sort(c->fn, ins, 2, 0, true, less, outs));
  c->outs[0] = outs[1];
  return NULL;
}

/* tpuc::random_words(n): the two u32 words of n counters from the call's
 * generator state, side by side (u32[2n], as op_random_bits lays them
 * out). A small random call runs as this program of its count's bucket
 * and a program of its own that reads the words (src/ops/program.c):
 * Threefry, the costly part to compile, is compiled once per bucket
 * instead of once per shape. */
static tpuc_status* lower_random_words(op_ctx* c, int param) {
  (void)param;
  if (c->nargs != 1 || c->args[0].kind != TPUC_OP_ARG_INT || c->args[0].i <= 0)
    return tpuc_status_make(TPUC_INTERNAL, "random_words takes a count");
  int64_t n = 2 * c->args[0].i;
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_U32, &n, 1);
  c->nouts = 1;
  return op_random_bits(c, TPUC_DTYPE_U32, &t, &c->outs[0]);
}

const op_entry op_table_random[] = {
    {"tpuc::random_words", lower_random_words, 0},
    {"aten::uniform_", lower_uniform, 0},
    {"aten::randperm.generator_out", lower_randperm, 0},
    {"aten::_standard_gamma", lower_standard_gamma, 0},
    {"aten::poisson", lower_poisson, 0},
    {"aten::poisson.out", lower_poisson, 0},
    {"aten::_standard_gamma.out", lower_standard_gamma, 0},
    {"aten::_sample_dirichlet", lower_sample_dirichlet, 0},
    {"aten::_sample_dirichlet.out", lower_sample_dirichlet, 0},
    {"aten::normal_", lower_normal, 0},
    {"aten::bernoulli_.float", lower_bernoulli, 0},
    {"aten::bernoulli_.Tensor", lower_bernoulli, 0},
    {"aten::bernoulli.p", lower_bernoulli, 0},
    {"aten::bernoulli", lower_bernoulli, 1},
    {"aten::native_dropout", lower_dropout, 0},
    {"aten::exponential_", lower_exponential, 0},
    {"aten::random_.from", lower_random_range, 0},
    {"aten::random_.to", lower_random_range, 1},
    {"aten::cauchy_", lower_cauchy, 0},
    {"aten::cauchy", lower_cauchy, 0},
    {"aten::cauchy.out", lower_cauchy, 0},
    {"aten::geometric_", lower_geometric, 0},
    {"aten::geometric", lower_geometric, 0},
    {"aten::geometric.out", lower_geometric, 0},
    {"aten::log_normal_", lower_log_normal, 0},
    {"aten::log_normal", lower_log_normal, 0},
    {"aten::log_normal.out", lower_log_normal, 0},
    {"aten::normal.Tensor_Tensor", lower_normal_tensor, NT_TENSOR_TENSOR},
    {"aten::normal.Tensor_Tensor_out", lower_normal_tensor, NT_TENSOR_TENSOR},
    {"aten::normal.Tensor_float", lower_normal_tensor, NT_TENSOR_FLOAT},
    {"aten::normal.Tensor_float_out", lower_normal_tensor, NT_TENSOR_FLOAT},
    {"aten::normal.float_Tensor", lower_normal_tensor, NT_FLOAT_TENSOR},
    {"aten::normal.float_Tensor_out", lower_normal_tensor, NT_FLOAT_TENSOR},
    {"aten::multinomial", lower_multinomial, 0},
    {"aten::multinomial.out", lower_multinomial, 0},
    {"aten::rrelu_with_noise", lower_rrelu, 0},
    {"aten::rrelu_with_noise_functional", lower_rrelu, 0},
    {NULL, NULL, 0},
};

/* Complex-ready ops of this file (ops_internal.h). */
const char* const op_complex_random[] = {
    /* random.c */
    "uniform_", "normal_",
    /* dynamic.c (which has no list of its own) */
    "nonzero", "masked_select", NULL};
