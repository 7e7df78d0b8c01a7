/* Random ops on the device: uniform_, normal_, bernoulli, random_,
 * exponential_, native_dropout. Each call draws bits with ThreeFry from the
 * (seed, counter) state that the caller takes from the op's generator
 * (options->rng, a program argument): the same seed gives the same numbers
 * on every run, and no two calls share a counter range. The numbers differ
 * from the CPU's generator (as CUDA's do). */
#include <math.h>

#include "ops/ops_internal.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

tpuc_status* op_random_bits(op_ctx* c, tpuc_dtype bits,
                            const tpuc_hlo_type* shape, tpuc_hlo_value* out) {
  if (c->rng < 0) return op_unimpl("random op without a generator state");
  tpuc_hlo_type t = *shape;
  t.dtype = bits;
  tpuc_hlo_value state;
  return tpuc_hlo_rng_bit_generator(c->fn, TPUC_HLO_RNG_THREE_FRY, c->rng, &t,
                                    &state, out);
}

/* Uniform [0, 1) of `shape` in f32 (for f32, f16, bf16) or f64: random
 * mantissa bits under the exponent of 1.0, minus 1. */
static tpuc_status* uniform01(op_ctx* c, const tpuc_hlo_type* shape,
                              tpuc_dtype dt, tpuc_hlo_value* out) {
  bool wide = dt == TPUC_DTYPE_F64;
  tpuc_dtype ut = wide ? TPUC_DTYPE_U64 : TPUC_DTYPE_U32;
  tpuc_dtype ft = wide ? TPUC_DTYPE_F64 : TPUC_DTYPE_F32;
  tpuc_hlo_type s = *shape;
  s.dtype = ut;
  tpuc_hlo_value bits, shift, one_bits, m, f, one;
  TRY(op_random_bits(c, ut, shape, &bits));
  TRY(op_const(c, ut, wide ? 12 : 9, &s, &shift));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SHIFT_RIGHT_LOGICAL, bits, shift, &m));
  TRY(tpuc_hlo_constant_i64(c->fn, ut,
                            wide ? (int64_t)0x3FF0000000000000LL : 0x3F800000,
                            &one_bits));
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, one_bits, s.dims, s.rank, NULL,
                                &one_bits));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, m, one_bits, &m));
  TRY(tpuc_hlo_bitcast_convert(c->fn, m, ft, &f));
  tpuc_hlo_type fs = *shape;
  fs.dtype = ft;
  TRY(op_const(c, ft, 1.0, &fs, &one));
  return tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, f, one, out);
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

/* uniform_(self, from=0, to=1): from + u * (to - from). */
static tpuc_status* lower_uniform(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !tpuc_dtype_is_float(c->types[0].dtype))
    return op_unimpl("uniform_ of a non-float tensor");
  tpuc_hlo_type shape = c->types[0];
  tpuc_dtype ct = compute_dtype(shape.dtype);
  shape.dtype = ct;
  tpuc_hlo_value u, lo, hi, span, v;
  TRY(uniform01(c, &shape, ct, &u));
  TRY(scalar_or(c, 1, 0.0, ct, &shape, &lo));
  TRY(scalar_or(c, 2, 1.0, ct, &shape, &hi));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, hi, lo, &span));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, u, span, &v));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, v, lo, &v));
  return finish(c, v, c->types[0].dtype);
}

/* normal_(self, mean=0, std=1): Box-Muller over two uniform draws. */
static tpuc_status* lower_normal(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !tpuc_dtype_is_float(c->types[0].dtype))
    return op_unimpl("normal_ of a non-float tensor");
  tpuc_hlo_type shape = c->types[0];
  tpuc_dtype ct = compute_dtype(shape.dtype);
  shape.dtype = ct;
  /* Two independent uniforms from one draw of twice the size. */
  tpuc_hlo_type twice = shape;
  twice.rank = shape.rank + 1;
  twice.dims[shape.rank] = 2;
  tpuc_hlo_value u, u1, u2, one, r, th, z, mean, std;
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
  /* r = sqrt(-2 log(1 - u1)), 1 - u1 in (0, 1]. */
  TRY(op_const(c, ct, 1.0, &shape, &one));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, one, u1, &u1));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_LOG, u1, &r));
  tpuc_hlo_value m2, tau;
  TRY(op_const(c, ct, -2.0, &shape, &m2));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, r, m2, &r));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_SQRT, r, &r));
  TRY(op_const(c, ct, 2.0 * M_PI, &shape, &tau));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, u2, tau, &th));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_COSINE, th, &th));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, r, th, &z));
  TRY(scalar_or(c, 1, 0.0, ct, &shape, &mean));
  TRY(scalar_or(c, 2, 1.0, ct, &shape, &std));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, z, std, &z));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, z, mean, &z));
  if (!op_is_none(c, 2)) {
    /* std < 0 is refused, as on the CPU. */
    tpuc_hlo_value s0, zero;
    TRY(scalar_or(c, 2, 1.0, ct, NULL, &s0));
    TRY(op_const(c, ct, 0.0, NULL, &zero));
    TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_LT, s0, zero, &c->check));
    c->has_check = true;
    c->check_code = TPUC_INVALID_ARGUMENT;
    c->check_msg = "normal expects std >= 0.0";
  }
  return finish(c, z, c->types[0].dtype);
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

const op_entry op_table_random[] = {
    {"aten::uniform_", lower_uniform, 0},
    {"aten::normal_", lower_normal, 0},
    {"aten::bernoulli_.float", lower_bernoulli, 0},
    {"aten::bernoulli_.Tensor", lower_bernoulli, 0},
    {"aten::bernoulli.p", lower_bernoulli, 0},
    {"aten::bernoulli", lower_bernoulli, 1},
    {"aten::native_dropout", lower_dropout, 0},
    {"aten::exponential_", lower_exponential, 0},
    {"aten::random_.from", lower_random_range, 0},
    {"aten::random_.to", lower_random_range, 1},
    {NULL, NULL, 0},
};

/* Complex-ready ops of this file (ops_internal.h). */
const char* const op_complex_random[] = {NULL};
