/* Neural-network ops: normalization, activations and their backwards,
 * losses. Formulas follow PyTorch's CPU kernels (half floats compute in
 * f32 and round once at the end; Scalar arguments are program values
 * converted to the compute dtype, as the kernels' `to<opmath_t>()`). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_internal.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

typedef tpuc_hlo_value V;

/* ---------------------------------------------------------------------- */
/* A small expression emitter with a sticky status: every helper returns
 * -1 and does nothing once an emission failed, so formulas read as
 * nested calls and the status is checked once at the end. Constants and
 * scalar arguments are broadcast to `shape` (whose dtype is the compute
 * dtype). */

typedef struct em {
  op_ctx* c;
  tpuc_status* st;
  tpuc_hlo_type shape;
} em;

static em em_make(op_ctx* c, tpuc_dtype dt, const tpuc_hlo_type* shape) {
  em e;
  e.c = c;
  e.st = NULL;
  e.shape = *shape;
  e.shape.dtype = dt;
  return e;
}

static V e_bin(em* e, tpuc_hlo_binary_op op, V a, V b) {
  V out = -1;
  if (e->st == NULL) e->st = tpuc_hlo_binary(e->c->fn, op, a, b, &out);
  return out;
}
static V e_add(em* e, V a, V b) { return e_bin(e, TPUC_HLO_ADD, a, b); }
static V e_sub(em* e, V a, V b) { return e_bin(e, TPUC_HLO_SUB, a, b); }
static V e_mul(em* e, V a, V b) { return e_bin(e, TPUC_HLO_MUL, a, b); }
static V e_div(em* e, V a, V b) { return e_bin(e, TPUC_HLO_DIV, a, b); }
static V e_max(em* e, V a, V b) { return e_bin(e, TPUC_HLO_MAX, a, b); }
static V e_min(em* e, V a, V b) { return e_bin(e, TPUC_HLO_MIN, a, b); }

static V e_un(em* e, tpuc_hlo_unary_op op, V x) {
  V out = -1;
  if (e->st == NULL) e->st = tpuc_hlo_unary(e->c->fn, op, x, &out);
  return out;
}
static V e_exp(em* e, V x) { return e_un(e, TPUC_HLO_EXP, x); }
static V e_neg(em* e, V x) { return e_un(e, TPUC_HLO_NEG, x); }
static V e_abs(em* e, V x) { return e_un(e, TPUC_HLO_ABS, x); }
static V e_tanh(em* e, V x) { return e_un(e, TPUC_HLO_TANH, x); }
static V e_log1p(em* e, V x) { return e_un(e, TPUC_HLO_LOG1P, x); }

static V e_cmp(em* e, tpuc_hlo_compare_dir dir, V a, V b) {
  V out = -1;
  if (e->st == NULL) e->st = tpuc_hlo_compare(e->c->fn, dir, a, b, &out);
  return out;
}
static V e_sel(em* e, V p, V a, V b) {
  V out = -1;
  if (e->st == NULL) e->st = tpuc_hlo_select(e->c->fn, p, a, b, &out);
  return out;
}
static V e_or(em* e, V a, V b) { return e_bin(e, TPUC_HLO_OR, a, b); }
static V e_and(em* e, V a, V b) { return e_bin(e, TPUC_HLO_AND, a, b); }

static V e_cvt(em* e, V x, tpuc_dtype dt) {
  V out = -1;
  tpuc_hlo_type t;
  if (e->st == NULL) e->st = tpuc_hlo_value_type(e->c->fn, x, &t);
  if (e->st != NULL) return -1;
  if (t.dtype == dt) return x;
  e->st = tpuc_hlo_convert(e->c->fn, x, dt, &out);
  return out;
}

/* Constant `v` in the compute dtype, of the emitter's shape. */
static V e_k(em* e, double v) {
  V out = -1;
  if (e->st == NULL) e->st = op_const(e->c, e->shape.dtype, v, &e->shape, &out);
  return out;
}

/* Scalar argument i in the compute dtype, of the emitter's shape. */
static V e_scal(em* e, int i) {
  V out = -1;
  if (e->st == NULL)
    e->st = op_scalar(e->c, i, e->shape.dtype, &e->shape, &out);
  return out;
}

/* Scalar argument i rounded to `dt` first (PyTorch's `to<scalar_t>()`),
 * then in the compute dtype, of the emitter's shape. */
static V e_scal_via(em* e, int i, tpuc_dtype dt) {
  V out = -1;
  if (e->st == NULL) e->st = op_scalar(e->c, i, dt, NULL, &out);
  out = e_cvt(e, out, e->shape.dtype);
  if (e->st == NULL && e->shape.rank > 0)
    e->st = tpuc_hlo_broadcast_in_dim(e->c->fn, out, e->shape.dims,
                                      e->shape.rank, NULL, &out);
  return out;
}

/* Tensor argument i converted to the compute dtype and broadcast to the
 * emitter's shape. */
static V e_arg(em* e, int i) {
  V out = -1;
  if (e->st == NULL)
    e->st = op_operand(e->c, i, e->shape.dtype, &e->shape, &out);
  return out;
}

/* x (compute dtype) folded over `dims` with `op`, starting from `init`. */
static V e_fold(em* e, V x, const int64_t* dims, size_t nd,
                tpuc_hlo_binary_op op, double init) {
  V k = -1, out = -1;
  tpuc_hlo_fn* body = NULL;
  if (e->st == NULL)
    e->st = tpuc_hlo_constant_f64(e->c->fn, e->shape.dtype, init, &k);
  if (e->st == NULL)
    e->st = tpuc_hlo_region_binary(e->c->module, e->shape.dtype, op, &body);
  if (e->st == NULL)
    e->st = tpuc_hlo_reduce(e->c->fn, &x, &k, 1, dims, nd, body, &out);
  return out;
}

/* Sum of x (compute dtype) over `dims`. */
static V e_sum(em* e, V x, const int64_t* dims, size_t nd) {
  return e_fold(e, x, dims, nd, TPUC_HLO_ADD, 0.0);
}

/* Sum of every element: rank 0. */
static V e_sum_all(em* e, V x) {
  tpuc_hlo_type t;
  if (e->st == NULL) e->st = tpuc_hlo_value_type(e->c->fn, x, &t);
  if (e->st != NULL) return -1;
  int64_t dims[TPUC_MAX_RANK];
  for (int d = 0; d < t.rank; d++) dims[d] = d;
  return e_sum(e, x, dims, (size_t)t.rank);
}

static V e_reshape(em* e, V x, const int64_t* dims, int rank) {
  V out = -1;
  if (e->st == NULL) e->st = tpuc_hlo_reshape(e->c->fn, x, dims, rank, &out);
  return out;
}

/* x broadcast to `dims` (rank `rank`), x's dim i going to map[i]. */
static V e_bcast(em* e, V x, const int64_t* dims, int rank,
                 const int64_t* map) {
  V out = -1;
  if (e->st == NULL)
    e->st = tpuc_hlo_broadcast_in_dim(e->c->fn, x, dims, rank, map, &out);
  return out;
}

/* The type of value x (zeroed once an emission failed). */
static tpuc_hlo_type e_type(em* e, V x) {
  tpuc_hlo_type t;
  memset(&t, 0, sizeof t);
  if (e->st == NULL) e->st = tpuc_hlo_value_type(e->c->fn, x, &t);
  return t;
}

static V e_iota(em* e, const tpuc_hlo_type* type, int dim) {
  V out = -1;
  if (e->st == NULL) e->st = tpuc_hlo_iota(e->c->fn, type, dim, &out);
  return out;
}

/* Rank-0 constant `v` of `dt`. */
static V e_k0(em* e, tpuc_dtype dt, double v) {
  V out = -1;
  if (e->st == NULL) e->st = op_const(e->c, dt, v, NULL, &out);
  return out;
}

/* Folds another emitter's status into e's. */
static void e_join(em* e, const em* other) {
  if (e->st == NULL) e->st = other->st;
}

/* ---------------------------------------------------------------------- */
/* erf, which StableHLO lacks: Cephes' rational approximations (ndtr.c),
 * evaluated in the compute dtype. For |x| <= 1, x * T(x^2) / U(x^2); for
 * larger |x|, 1 - erfc(|x|) with erfc(a) = exp(-a^2) P(a) / Q(a) (a < 8)
 * or exp(-a^2) R(a) / S(a) (a >= 8), odd in x. Good to an ulp or so in
 * f64, about 1.5e-7 relative in f32. */

static const double kErfT[] = {
    9.60497373987051638749E0, 9.00260197203842689217E1,
    2.23200534594684319226E3, 7.00332514112805075473E3,
    5.55923013010394962768E4};
static const double kErfU[] = {
    3.35617141647503099647E1, 5.21357949780152679795E2,
    4.59432382970980127987E3, 2.26290000613890934246E4,
    4.92673942608635921086E4};
static const double kErfP[] = {
    2.46196981473530512524E-10, 5.64189564831068821977E-1,
    7.46321056442269912687E0,   4.86371970985681366614E1,
    1.96520832956077098242E2,   5.26445194995477358631E2,
    9.34528527171957607540E2,   1.02755188689515710272E3,
    5.57535335369399327526E2};
static const double kErfQ[] = {
    1.32281951154744992508E1, 8.67072140885989742329E1,
    3.54937778887819891062E2, 9.75708501743205489753E2,
    1.82390916687909736289E3, 2.24633760818710981792E3,
    1.65666309194161350182E3, 5.57535340817727675546E2};
static const double kErfR[] = {
    5.64189583547755073984E-1, 1.27536670759978104416E0,
    5.01905042251180477414E0,  6.16021097993053585195E0,
    7.40974269950448939160E0,  2.97886665372100240670E0};
static const double kErfS[] = {
    2.26052863220117276590E0, 9.39603524938001434673E0,
    1.20489539808096656605E1, 1.70814450747565897222E1,
    9.60896809063285878198E0, 3.36907645100081516050E0};

/* c[0] x^(n-1) + ... + c[n-1] (Horner); with `monic`, a leading 1 x^n. */
static V e_poly(em* e, V x, const double* c, size_t n, bool monic) {
  V r = monic ? e_add(e, x, e_k(e, c[0])) : e_k(e, c[0]);
  for (size_t i = 1; i < n; i++) r = e_add(e, e_mul(e, r, x), e_k(e, c[i]));
  return r;
}

static V e_erf(em* e, V x) {
  V ax = e_abs(e, x), z = e_mul(e, x, x);
  V small = e_div(e, e_mul(e, x, e_poly(e, z, kErfT, 5, false)),
                  e_poly(e, z, kErfU, 5, true));
  /* erfc's argument clamped where it is 0 anyway, so the polynomials stay
   * finite for infinite x. */
  V a = e_min(e, ax, e_k(e, 30.0));
  V pq_mid =
      e_div(e, e_poly(e, a, kErfP, 9, false), e_poly(e, a, kErfQ, 8, true));
  V pq_far =
      e_div(e, e_poly(e, a, kErfR, 6, false), e_poly(e, a, kErfS, 6, true));
  V pq = e_sel(e, e_cmp(e, TPUC_HLO_LT, a, e_k(e, 8.0)), pq_mid, pq_far);
  V big = e_sub(e, e_k(e, 1.0), e_mul(e, e_exp(e, e_neg(e, z)), pq));
  big = e_sel(e, e_cmp(e, TPUC_HLO_LT, x, e_k(e, 0.0)), e_neg(e, big), big);
  return e_sel(e, e_cmp(e, TPUC_HLO_LE, ax, e_k(e, 1.0)), small, big);
}

/* ---------------------------------------------------------------------- */
/* Activations and their backwards. */

enum {
  ACT_GELU = 1,
  ACT_SILU,
  ACT_MISH,
  ACT_HARDSWISH,
  ACT_HARDSIGMOID,
  ACT_HARDTANH,
  ACT_LEAKY_RELU,
  ACT_ELU,
  ACT_SOFTPLUS,
  ACT_LOG_SIGMOID,
  /* backwards: grad_output is argument 0 */
  ACT_BW = 0x100,
  ACT_GELU_BW,
  ACT_SILU_BW,
  ACT_MISH_BW,
  ACT_HARDSWISH_BW,
  ACT_HARDSIGMOID_BW,
  ACT_THRESHOLD_BW,
  ACT_SIGMOID_BW,
  ACT_TANH_BW,
  ACT_HARDTANH_BW,
  ACT_LEAKY_RELU_BW,
  ACT_ELU_BW,
  ACT_SOFTPLUS_BW,
  ACT_LOG_SIGMOID_BW,
};

/* gelu's `approximate`: 0 none, 1 tanh; -1 anything else (the CPU says
 * why). */
static int gelu_mode(const op_ctx* c, int i) {
  const char* s = op_str_arg(c, i, "none");
  if (strcmp(s, "none") == 0) return 0;
  if (strcmp(s, "tanh") == 0) return 1;
  return -1;
}

static const double kSqrt1_2 = 0.70710678118654752440;
static const double kTwoSqrtPi = 1.12837916709551257390;
static const double kSqrt2 = 1.41421356237309504880;
static const double kGeluKappa = 0.044715;

static V act_forward(em* e, int kind, V x, int mode) {
  switch (kind) {
    case ACT_GELU: {
      if (mode == 0) {
        V cdf = e_add(e, e_k(e, 1.0), e_erf(e, e_mul(e, x, e_k(e, kSqrt1_2))));
        return e_mul(e, e_mul(e, x, e_k(e, 0.5)), cdf);
      }
      V inner = e_mul(
          e, e_k(e, kSqrt2 * kTwoSqrtPi * 0.5),
          e_add(e, x,
                e_mul(e, e_k(e, kGeluKappa), e_mul(e, e_mul(e, x, x), x))));
      return e_mul(e, e_mul(e, e_k(e, 0.5), x),
                   e_add(e, e_k(e, 1.0), e_tanh(e, inner)));
    }
    case ACT_SILU:
      return e_div(e, x, e_add(e, e_k(e, 1.0), e_exp(e, e_neg(e, x))));
    case ACT_MISH:
      return e_mul(e, x, e_tanh(e, e_log1p(e, e_exp(e, x))));
    case ACT_HARDSWISH:
    case ACT_HARDSIGMOID: {
      V r = e_min(e, e_max(e, e_add(e, x, e_k(e, 3.0)), e_k(e, 0.0)),
                  e_k(e, 6.0));
      if (kind == ACT_HARDSWISH) r = e_mul(e, x, r);
      return e_div(e, r, e_k(e, 6.0));
    }
    case ACT_HARDTANH: {
      /* clamp(x, min_val, max_val); NaN stays NaN */
      V lo = e_scal(e, 1), hi = e_scal(e, 2);
      V r = e_sel(e, e_cmp(e, TPUC_HLO_LT, x, lo), lo, x);
      return e_sel(e, e_cmp(e, TPUC_HLO_GT, r, hi), hi, r);
    }
    case ACT_LEAKY_RELU:
      return e_sel(e, e_cmp(e, TPUC_HLO_GT, x, e_k(e, 0.0)), x,
                   e_mul(e, x, e_scal(e, 1)));
    case ACT_ELU: {
      V alpha = e_scal(e, 1), scale = e_scal(e, 2), iscale = e_scal(e, 3);
      V neg = e_mul(e, e_un(e, TPUC_HLO_EXPM1, e_mul(e, x, iscale)),
                    e_mul(e, alpha, scale));
      return e_sel(e, e_cmp(e, TPUC_HLO_LE, x, e_k(e, 0.0)), neg,
                   e_mul(e, x, scale));
    }
    case ACT_SOFTPLUS: {
      V beta = e_scal(e, 1), thr = e_scal(e, 2), xb = e_mul(e, x, beta);
      return e_sel(e, e_cmp(e, TPUC_HLO_GT, xb, thr), x,
                   e_div(e, e_log1p(e, e_exp(e, xb)), beta));
    }
    default:
      if (e->st == NULL) e->st = op_unimpl("unknown activation");
      return -1;
  }
}

/* g: grad_output, x: the input (or the output for sigmoid/tanh). */
static V act_backward(em* e, int kind, V g, V x, int mode) {
  switch (kind) {
    case ACT_GELU_BW: {
      if (mode == 0) {
        V cdf = e_mul(
            e, e_k(e, 0.5),
            e_add(e, e_k(e, 1.0), e_erf(e, e_mul(e, x, e_k(e, kSqrt1_2)))));
        V pdf = e_mul(e, e_k(e, kTwoSqrtPi * kSqrt1_2 * 0.5),
                      e_exp(e, e_mul(e, e_k(e, -0.5), e_mul(e, x, x))));
        return e_mul(e, g, e_add(e, cdf, e_mul(e, x, pdf)));
      }
      V beta = e_k(e, kSqrt2 * kTwoSqrtPi * 0.5), kappa = e_k(e, kGeluKappa);
      V x2 = e_mul(e, x, x), x3 = e_mul(e, x2, x);
      V t = e_tanh(e, e_mul(e, beta, e_add(e, x, e_mul(e, kappa, x3))));
      V left = e_mul(e, e_k(e, 0.5), x);
      V right = e_add(e, e_k(e, 1.0), t);
      V dleft = e_mul(e, e_k(e, 0.5), right);
      V dtanh = e_sub(e, e_k(e, 1.0), e_mul(e, t, t));
      V dinner =
          e_mul(e, beta,
                e_add(e, e_k(e, 1.0), e_mul(e, e_k(e, 3.0 * kGeluKappa), x2)));
      V dright = e_mul(e, e_mul(e, left, dtanh), dinner);
      return e_mul(e, g, e_add(e, dleft, dright));
    }
    case ACT_SILU_BW: {
      V s = e_div(e, e_k(e, 1.0), e_add(e, e_k(e, 1.0), e_exp(e, e_neg(e, x))));
      return e_mul(
          e, e_mul(e, g, s),
          e_add(e, e_k(e, 1.0), e_mul(e, x, e_sub(e, e_k(e, 1.0), s))));
    }
    case ACT_MISH_BW: {
      V s = e_div(e, e_k(e, 1.0), e_add(e, e_k(e, 1.0), e_exp(e, e_neg(e, x))));
      V t = e_tanh(e, e_log1p(e, e_exp(e, x)));
      V d = e_add(
          e, t,
          e_mul(e, e_mul(e, x, s), e_sub(e, e_k(e, 1.0), e_mul(e, t, t))));
      return e_mul(e, g, d);
    }
    case ACT_HARDSWISH_BW: {
      V mid = e_mul(e, g, e_add(e, e_div(e, x, e_k(e, 3.0)), e_k(e, 0.5)));
      V r = e_sel(e, e_cmp(e, TPUC_HLO_LT, x, e_k(e, 3.0)), mid, g);
      return e_sel(e, e_cmp(e, TPUC_HLO_LE, x, e_k(e, -3.0)), e_k(e, 0.0), r);
    }
    case ACT_HARDSIGMOID_BW: {
      V in = e_and(e, e_cmp(e, TPUC_HLO_GT, x, e_k(e, -3.0)),
                   e_cmp(e, TPUC_HLO_LT, x, e_k(e, 3.0)));
      return e_sel(e, in, e_mul(e, g, e_k(e, 1.0 / 6.0)), e_k(e, 0.0));
    }
    case ACT_SIGMOID_BW:
      return e_mul(e, e_mul(e, g, e_sub(e, e_k(e, 1.0), x)), x);
    case ACT_TANH_BW:
      return e_mul(e, g, e_sub(e, e_k(e, 1.0), e_mul(e, x, x)));
    case ACT_HARDTANH_BW: {
      V lo = e_scal(e, 2), hi = e_scal(e, 3);
      V out =
          e_or(e, e_cmp(e, TPUC_HLO_LE, x, lo), e_cmp(e, TPUC_HLO_GE, x, hi));
      return e_sel(e, out, e_k(e, 0.0), g);
    }
    case ACT_LEAKY_RELU_BW:
      return e_sel(e, e_cmp(e, TPUC_HLO_GT, x, e_k(e, 0.0)), g,
                   e_mul(e, g, e_scal(e, 2)));
    case ACT_ELU_BW: {
      /* elu_backward(grad, alpha, scale, input_scale, is_result, x) */
      V alpha = e_scal(e, 1), scale = e_scal(e, 2), iscale = e_scal(e, 3);
      V negcoef = e_mul(e, alpha, scale);
      bool is_result = e->c->args[4].i != 0;
      V neg = is_result ? e_mul(e, e_mul(e, g, iscale), e_add(e, x, negcoef))
                        : e_mul(e, e_mul(e, e_mul(e, g, iscale), negcoef),
                                e_exp(e, e_mul(e, x, iscale)));
      return e_sel(e, e_cmp(e, TPUC_HLO_LE, x, e_k(e, 0.0)), neg,
                   e_mul(e, g, scale));
    }
    case ACT_SOFTPLUS_BW: {
      V beta = e_scal(e, 2), thr = e_scal(e, 3), xb = e_mul(e, x, beta);
      V z = e_exp(e, xb);
      return e_sel(e, e_cmp(e, TPUC_HLO_GT, xb, thr), g,
                   e_div(e, e_mul(e, g, z), e_add(e, z, e_k(e, 1.0))));
    }
    default:
      if (e->st == NULL) e->st = op_unimpl("unknown activation backward");
      return -1;
  }
}

static bool is_float(tpuc_dtype d) { return tpuc_dtype_is_float(d); }

/* Same rank and dims (dtypes aside). */
static bool same_dims(const tpuc_hlo_type* a, const tpuc_hlo_type* b) {
  if (a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

/* A rank-0 i1 that is true when scalar argument i is negative (the value
 * is only known on the device). */
static V e_scalar_negative(em* e, int i) {
  V s = -1, zero = -1, out = -1;
  if (e->st == NULL) e->st = op_scalar(e->c, i, TPUC_DTYPE_F64, NULL, &s);
  if (e->st == NULL)
    e->st = tpuc_hlo_constant_f64(e->c->fn, TPUC_DTYPE_F64, 0.0, &zero);
  if (e->st == NULL)
    e->st = tpuc_hlo_compare(e->c->fn, TPUC_HLO_LT, s, zero, &out);
  return out;
}

static tpuc_status* lower_act(op_ctx* c, int kind) {
  int mode = 0;
  if (kind == ACT_GELU || kind == ACT_GELU_BW) {
    mode = gelu_mode(c, kind == ACT_GELU ? 1 : 2);
    if (mode < 0) return op_unimpl("gelu: unknown approximate (CPU says why)");
  }
  if (!(kind & ACT_BW)) {
    if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
    tpuc_dtype dt = c->types[0].dtype;
    if (kind == ACT_HARDTANH && !is_float(dt) && dt != TPUC_DTYPE_PRED &&
        !tpuc_dtype_is_complex(dt)) {
      /* Integer hardtanh is a clamp in the input dtype, the bounds cast
       * to it (truncated, as the CPU's to<scalar_t>()). Float bounds of
       * an unsigned tensor could be negative: CPU. */
      for (int i = 1; i <= 2; i++)
        if (c->args[i].kind != TPUC_OP_ARG_SCALAR ||
            (c->args[i].scalar == TPUC_SCALAR_FLOAT &&
             tpuc_dtype_is_unsigned_int(dt)))
          return op_unimpl("integer hardtanh: unusual bounds");
      em e = em_make(c, dt, &c->types[0]);
      c->outs[0] = act_forward(&e, kind, c->vals[0], 0);
      c->nouts = 1;
      return e.st;
    }
    /* (complex silu: the same x / (1 + exp(-x)) as the CPU) */
    if (!is_float(dt) && !(kind == ACT_SILU && tpuc_dtype_is_complex(dt)))
      return op_unimpl("non-float activation: CPU");
    tpuc_dtype acc = op_accumulation_dtype(dt);
    em e = em_make(c, acc, &c->types[0]);
    V x = e_arg(&e, 0);
    if (kind == ACT_LOG_SIGMOID) {
      /* (min(x, 0) - log1p(exp(-|x|)), exp(-|x|)) */
      V buf = e_exp(&e, e_neg(&e, e_abs(&e, x)));
      V out = e_sub(&e, e_min(&e, x, e_k(&e, 0.0)), e_log1p(&e, buf));
      c->outs[0] = e_cvt(&e, out, dt);
      c->outs[1] = e_cvt(&e, buf, dt);
      c->nouts = 2;
      return e.st;
    }
    V y = act_forward(&e, kind, x, mode);
    c->outs[0] = e_cvt(&e, y, dt);
    c->nouts = 1;
    return e.st;
  }
  /* Backward: grad_output and the saved tensor broadcast together. */
  int saved = kind == ACT_ELU_BW ? 5 : 1;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, saved))
    return op_unimpl("unexpected arguments");
  int which[3] = {0, saved, 2};
  size_t n = kind == ACT_LOG_SIGMOID_BW ? 3 : 2;
  if (n == 3 && !op_is_tensor(c, 2)) return op_unimpl("unexpected arguments");
  tpuc_dtype dt;
  TRY(op_result_type(c, which, n, &dt));
  if (!is_float(dt)) return op_unimpl("non-float activation backward: CPU");
  tpuc_hlo_type shape;
  TRY(op_broadcast_shape(c, which, n, &shape));
  tpuc_dtype acc = op_accumulation_dtype(dt);
  em e = em_make(c, acc, &shape);
  V g = e_arg(&e, 0), x = e_arg(&e, saved), r;
  if (kind == ACT_THRESHOLD_BW) {
    /* self <= threshold ? 0 : grad, the threshold in the input dtype */
    V thr = e_scal_via(&e, 2, dt);
    r = e_sel(&e, e_cmp(&e, TPUC_HLO_LE, x, thr), e_k(&e, 0.0), g);
  } else if (kind == ACT_LOG_SIGMOID_BW) {
    /* (x < 0 ? 1 - b / (1 + b) : b / (1 + b)) * grad, b the buffer */
    V b = e_arg(&e, 2);
    V q = e_div(&e, b, e_add(&e, e_k(&e, 1.0), b));
    V neg = e_cmp(&e, TPUC_HLO_LT, x, e_k(&e, 0.0));
    r = e_mul(&e, e_sel(&e, neg, e_sub(&e, e_k(&e, 1.0), q), q), g);
  } else {
    r = act_backward(&e, kind, g, x, mode);
  }
  /* In-place forms ran the forward in place: a negative slope / alpha
   * cannot be inverted, and the CPU refuses. */
  if ((kind == ACT_LEAKY_RELU_BW && c->args[3].i != 0) ||
      (kind == ACT_ELU_BW && c->args[4].i != 0)) {
    c->has_check = true;
    c->check = e_scalar_negative(&e, kind == ACT_ELU_BW ? 1 : 2);
    c->check_code = TPUC_INVALID_ARGUMENT;
    c->check_msg =
        kind == ACT_ELU_BW
            ? "In-place elu backward calculation is triggered with a "
              "negative slope which is not supported. This is caused by "
              "calling in-place forward function with a negative slope, "
              "please call out-of-place version instead."
            : "In-place leakyReLu backward calculation is triggered with a "
              "negative slope which is not supported. This is caused by "
              "calling in-place forward function with a negative slope, "
              "please call out-of-place version instead.";
  }
  c->outs[0] = e_cvt(&e, r, dt);
  c->nouts = 1;
  return e.st;
}

/* ---------------------------------------------------------------------- */
/* _softmax_backward_data / _log_softmax_backward_data(grad_output, output,
 * dim, input_dtype), input_dtype being the grads' dtype. */
static tpuc_status* lower_softmax_bw(op_ctx* c, int log) {
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1) ||
      c->args[2].kind != TPUC_OP_ARG_INT ||
      c->args[3].kind != TPUC_OP_ARG_DTYPE)
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* gt = &c->types[0];
  const tpuc_hlo_type* ot = &c->types[1];
  tpuc_dtype dt = gt->dtype, want = c->args[3].dtype;
  if (!is_float(dt) || ot->dtype != dt || !tpuc_hlo_type_equal(gt, ot))
    return op_unimpl("softmax backward: mixed arguments (CPU says why)");
  /* (f32 grads of a half input are refused by the CPU: it says why) */
  if (want != dt) return op_unimpl("softmax backward: unusual input_dtype");
  int64_t dim = 0;
  TRY(op_wrap_dim(gt->rank, c->args[2].i, &dim));
  tpuc_dtype acc = op_accumulation_dtype(dt);
  em e = em_make(c, acc, gt);
  V g = e_arg(&e, 0), y = e_arg(&e, 1), r;
  if (gt->rank == 0) {
    /* one element: the sum is the element itself */
    r = log ? e_sub(&e, g, e_mul(&e, e_exp(&e, y), g))
            : e_mul(&e, y, e_sub(&e, g, e_mul(&e, g, y)));
  } else {
    int64_t bd[TPUC_MAX_RANK];
    int nb = 0;
    for (int i = 0; i < gt->rank; i++)
      if (i != dim) bd[nb++] = i;
    V s = log ? e_sum(&e, g, &dim, 1) : e_sum(&e, e_mul(&e, g, y), &dim, 1);
    s = e_bcast(&e, s, gt->dims, gt->rank, bd);
    r = log ? e_sub(&e, g, e_mul(&e, e_exp(&e, y), s))
            : e_mul(&e, y, e_sub(&e, g, s));
  }
  c->outs[0] = e_cvt(&e, r, want);
  c->nouts = 1;
  return e.st;
}

/* ---------------------------------------------------------------------- */
/* Layer norm. */

/* Checks the layer-norm arguments: input (arg `in`), normalized_shape
 * (arg `ns`), weight and bias (`w`, `b`, optional). Sets M (rows), N
 * (normalized elements), the stats dtype (f32 for a half input with f32
 * parameters, else the input's) and the index of the first normalized
 * dim. UNIMPLEMENTED (the CPU then explains) for anything unusual. */
static tpuc_status* ln_check(const op_ctx* c, int in, int ns, int w, int b,
                             int64_t* M, int64_t* N, tpuc_dtype* stat,
                             int* axis) {
  if (!op_is_tensor(c, in) || c->args[ns].kind != TPUC_OP_ARG_INT_LIST)
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* t = &c->types[in];
  const tpuc_op_arg* s = &c->args[ns];
  int k = (int)s->list_len;
  if (!is_float(t->dtype) || k < 1 || k > t->rank)
    return op_unimpl("layer_norm: unusual arguments (CPU says why)");
  *axis = t->rank - k;
  *N = 1;
  *M = 1;
  for (int d = 0; d < t->rank; d++) {
    if (d >= *axis) {
      if (t->dims[d] != s->list[d - *axis])
        return op_unimpl("layer_norm: shape mismatch (CPU says why)");
      *N *= t->dims[d];
    } else {
      *M *= t->dims[d];
    }
  }
  if (*N == 0) return op_unimpl("layer_norm over no elements: CPU");
  bool half = t->dtype == TPUC_DTYPE_F16 || t->dtype == TPUC_DTYPE_BF16;
  bool mixed = false;
  int params[2] = {w, b};
  for (int p = 0; p < 2; p++) {
    int i = params[p];
    if (i < 0 || op_is_none(c, i)) continue;
    if (!op_is_tensor(c, i)) return op_unimpl("unexpected arguments");
    const tpuc_hlo_type* pt = &c->types[i];
    if (pt->rank != k) return op_unimpl("layer_norm: weight shape (CPU)");
    for (int d = 0; d < k; d++)
      if (pt->dims[d] != s->list[d])
        return op_unimpl("layer_norm: weight shape (CPU)");
    if (pt->dtype == t->dtype) continue;
    if (half && pt->dtype == TPUC_DTYPE_F32)
      mixed = true;
    else
      return op_unimpl("layer_norm: parameter dtype (CPU)");
  }
  if (mixed)
    for (int p = 0; p < 2; p++) {
      int i = params[p];
      if (i >= 0 && !op_is_none(c, i) && c->types[i].dtype != TPUC_DTYPE_F32)
        return op_unimpl("layer_norm: parameter dtypes differ (CPU)");
    }
  *stat = mixed ? TPUC_DTYPE_F32 : t->dtype;
  return NULL;
}

/* Parameter argument i (of the normalized shape) as an [M, N] operand in
 * the compute dtype. */
static V ln_param(em* e, int i, int64_t M, int64_t N) {
  V p = e_cvt(e, e->c->vals[i], e->shape.dtype);
  p = e_reshape(e, p, &N, 1);
  int64_t dims[2] = {M, N}, map = 1;
  return e_bcast(e, p, dims, 2, &map);
}

/* The stats shape: the input's with every normalized dim 1. */
static void ln_stat_shape(const tpuc_hlo_type* t, int axis, int64_t* dims) {
  for (int d = 0; d < t->rank; d++) dims[d] = d < axis ? t->dims[d] : 1;
}

/* native_layer_norm(input, normalized_shape, weight, bias, eps) ->
 * (out, mean, rstd). */
static tpuc_status* lower_layer_norm(op_ctx* c, int param) {
  (void)param;
  int64_t M, N;
  tpuc_dtype stat;
  int axis;
  TRY(ln_check(c, 0, 1, 2, 3, &M, &N, &stat, &axis));
  if (!op_is_value(c, 4)) return op_unimpl("unexpected eps");
  const tpuc_hlo_type* t = &c->types[0];
  tpuc_dtype acc = op_accumulation_dtype(t->dtype);
  int64_t mn[2] = {M, N}, one = 1, zero = 0;
  tpuc_hlo_type mnt = tpuc_hlo_type_make(acc, mn, 2);
  em e = em_make(c, acc, &mnt);
  V x = e_reshape(&e, e_cvt(&e, c->vals[0], acc), mn, 2);
  em r = em_make(c, acc, &(tpuc_hlo_type){acc, 1, {M}});
  V mean = e_div(&r, e_sum(&e, x, &one, 1), e_k(&r, (double)N));
  V xc = e_sub(&e, x, e_bcast(&e, mean, mn, 2, &zero));
  V var = e_div(&r, e_sum(&e, e_mul(&e, xc, xc), &one, 1), e_k(&r, (double)N));
  V rstd = e_div(&r, e_k(&r, 1.0),
                 e_un(&r, TPUC_HLO_SQRT,
                      e_add(&r, e_max(&r, var, e_k(&r, 0.0)), e_scal(&r, 4))));
  V y = e_mul(&e, xc, e_bcast(&e, rstd, mn, 2, &zero));
  if (!op_is_none(c, 2)) y = e_mul(&e, y, ln_param(&e, 2, M, N));
  if (!op_is_none(c, 3)) y = e_add(&e, y, ln_param(&e, 3, M, N));
  int64_t sd[TPUC_MAX_RANK];
  ln_stat_shape(t, axis, sd);
  if (e.st == NULL) e.st = r.st;
  c->outs[0] = e_reshape(&e, e_cvt(&e, y, t->dtype), t->dims, t->rank);
  c->outs[1] = e_reshape(&e, e_cvt(&e, mean, stat), sd, t->rank);
  c->outs[2] = e_reshape(&e, e_cvt(&e, rstd, stat), sd, t->rank);
  c->nouts = 3;
  return e.st;
}

/* The output_mask argument i (bool[3], an int list); false when it is
 * not one. A result left out is undefined (-1). */
static bool mask3(const op_ctx* c, int i, bool* mask) {
  if (c->args[i].kind != TPUC_OP_ARG_INT_LIST || c->args[i].list_len != 3)
    return false;
  for (int k = 0; k < 3; k++) mask[k] = c->args[i].list[k] != 0;
  return true;
}

/* native_layer_norm_backward(grad_out, input, normalized_shape, mean,
 * rstd, weight, bias, output_mask) -> (grad_input, grad_weight,
 * grad_bias). */
static tpuc_status* lower_layer_norm_bw(op_ctx* c, int param) {
  (void)param;
  int64_t M, N;
  tpuc_dtype stat;
  int axis;
  TRY(ln_check(c, 1, 2, 5, 6, &M, &N, &stat, &axis));
  bool mask[3];
  if (!mask3(c, 7, mask)) return op_unimpl("unexpected arguments");
  /* Without a weight (elementwise_affine=False, or bias=False for the
   * bias) there is no gradient of it: the CPU leaves it undefined. */
  bool has_w = !op_is_none(c, 5), has_b = !op_is_none(c, 6);
  if ((mask[1] && !has_w) || (mask[2] && !has_b))
    return op_unimpl("layer_norm backward: a gradient of a missing parameter");
  const tpuc_hlo_type* t = &c->types[1];
  if (!op_is_tensor(c, 0) || !tpuc_hlo_type_equal(&c->types[0], t) ||
      !op_is_tensor(c, 3) || !op_is_tensor(c, 4) ||
      tpuc_hlo_type_num_elements(&c->types[3]) != M ||
      tpuc_hlo_type_num_elements(&c->types[4]) != M)
    return op_unimpl("layer_norm backward: unusual arguments");
  tpuc_dtype acc = op_accumulation_dtype(t->dtype);
  int64_t mn[2] = {M, N}, one = 1, zero = 0;
  tpuc_hlo_type mnt = tpuc_hlo_type_make(acc, mn, 2);
  em e = em_make(c, acc, &mnt);
  V dy = e_reshape(&e, e_cvt(&e, c->vals[0], acc), mn, 2);
  V x = e_reshape(&e, e_cvt(&e, c->vals[1], acc), mn, 2);
  V mean = e_reshape(&e, e_cvt(&e, c->vals[3], acc), &M, 1);
  V rstd = e_reshape(&e, e_cvt(&e, c->vals[4], acc), &M, 1);
  V gamma = has_w ? ln_param(&e, 5, M, N) : -1;
  em r = em_make(c, acc, &(tpuc_hlo_type){acc, 1, {M}});
  /* xhat = (x - mean) * rstd; dx = rstd * (dy*g - mean(dy*g)
   *   - xhat * mean(dy*g*xhat)) */
  V a = e_bcast(&e, rstd, mn, 2, &zero);
  V xhat = e_mul(&e, e_sub(&e, x, e_bcast(&e, mean, mn, 2, &zero)), a);
  V dyg = has_w ? e_mul(&e, dy, gamma) : dy;
  V db = e_div(&r, e_sum(&e, dyg, &one, 1), e_k(&r, (double)N));
  V ds =
      e_div(&r, e_sum(&e, e_mul(&e, dyg, xhat), &one, 1), e_k(&r, (double)N));
  V dx = e_mul(&e, a,
               e_sub(&e, e_sub(&e, dyg, e_bcast(&e, db, mn, 2, &zero)),
                     e_mul(&e, xhat, e_bcast(&e, ds, mn, 2, &zero))));
  if (e.st == NULL) e.st = r.st;
  c->outs[0] = e_reshape(&e, e_cvt(&e, dx, t->dtype), t->dims, t->rank);
  c->outs[1] = c->outs[2] = -1;
  if (mask[1]) {
    V dgamma = e_sum(&e, e_mul(&e, dy, xhat), &zero, 1);
    c->outs[1] = e_reshape(&e, e_cvt(&e, dgamma, c->types[5].dtype),
                           c->types[5].dims, c->types[5].rank);
  }
  if (mask[2]) {
    V dbeta = e_sum(&e, dy, &zero, 1);
    c->outs[2] = e_reshape(&e, e_cvt(&e, dbeta, c->types[6].dtype),
                           c->types[6].dims, c->types[6].rank);
  }
  if (!mask[0]) c->outs[0] = -1;
  c->nouts = 3;
  return e.st;
}

/* _weight_norm_interface(v, g, dim) -> (w, norms) (param 0) and
 * _weight_norm_interface_backward(grad_w, v, g, norms, dim) ->
 * (grad_v, grad_g) (param 1): w = v * (g / ||v||), the norm taken over
 * every dim but `dim` in the compute dtype (norms are f32 for half
 * floats, as on the CPU). Backward, per slice: grad_g = sum(grad_w * v) /
 * n, grad_v = a * grad_w - (a * grad_g / n) * v with a = g / n. */
static tpuc_status* lower_weight_norm(op_ctx* c, int backward) {
  int vi = backward ? 1 : 0, gi = vi + 1, di = backward ? 4 : 2;
  for (int i = 0; i < di; i++)
    if (!op_is_tensor(c, i)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* t = &c->types[vi];
  const tpuc_hlo_type* gt = &c->types[gi];
  int64_t dim = 0;
  TRY(op_int_arg(c, di, 0, &dim));
  if (!is_float(t->dtype) || !is_float(gt->dtype) || t->rank < 1 ||
      dim < 0 || dim >= t->rank || gt->rank != t->rank)
    return op_unimpl("weight_norm: unusual arguments (CPU says why)");
  for (int d = 0; d < t->rank; d++)
    if (gt->dims[d] != (d == dim ? t->dims[d] : 1))
      return op_unimpl("weight_norm: g's shape (CPU says why)");
  if (backward && (!tpuc_hlo_type_equal(&c->types[0], t) ||
                   tpuc_hlo_type_num_elements(&c->types[3]) != t->dims[dim]))
    return op_unimpl("weight_norm backward: unusual arguments");
  tpuc_dtype acc = op_accumulation_dtype(t->dtype);
  int64_t K = t->dims[dim], map = dim, others[TPUC_MAX_RANK];
  size_t no = 0;
  for (int d = 0; d < t->rank; d++)
    if (d != dim) others[no++] = d;
  em e = em_make(c, acc, t);
  em r = em_make(c, acc, &(tpuc_hlo_type){acc, 1, {K}});
  V v = e_cvt(&e, c->vals[vi], acc);
  V g = e_reshape(&r, e_cvt(&r, c->vals[gi], acc), &K, 1);
  if (e.st == NULL) e.st = r.st;
  if (!backward) {
    V n = e_un(&r, TPUC_HLO_SQRT, e_sum(&e, e_mul(&e, v, v), others, no));
    V w = e_mul(&e, v, e_bcast(&e, e_div(&r, g, n), t->dims, t->rank, &map));
    if (e.st == NULL) e.st = r.st;
    c->outs[0] = e_cvt(&e, w, t->dtype);
    c->outs[1] = e_reshape(&e, e_cvt(&e, n, op_accumulation_dtype(gt->dtype)),
                           gt->dims, gt->rank);
  } else {
    V gw = e_cvt(&e, c->vals[0], acc);
    V n = e_reshape(&r, e_cvt(&r, c->vals[3], acc), &K, 1);
    V grad_g = e_div(&r, e_sum(&e, e_mul(&e, gw, v), others, no), n);
    V a = e_div(&r, g, n);
    V b = e_div(&r, e_mul(&r, a, grad_g), n);
    V grad_v = e_sub(&e, e_mul(&e, e_bcast(&e, a, t->dims, t->rank, &map), gw),
                     e_mul(&e, e_bcast(&e, b, t->dims, t->rank, &map), v));
    if (e.st == NULL) e.st = r.st;
    c->outs[0] = e_cvt(&e, grad_v, t->dtype);
    c->outs[1] = e_reshape(&e, e_cvt(&e, grad_g, gt->dtype), gt->dims, gt->rank);
  }
  c->nouts = 2;
  return e.st;
}

/* ---------------------------------------------------------------------- */
/* The fused RNN cells PyTorch calls for PrivateUse1 devices (RNN.cpp's
 * LSTMCell and GRUCell take this path for tpu as for CUDA, and the CPU has
 * no kernel of them). Gates are the last dim of [B, kH] (or [kH]) tensors;
 * the compute dtype is f32 for half floats. */

/* Chunk j of k along the last dim of x (type t). */
static V rnn_chunk(em* e, V x, const tpuc_hlo_type* t, int k, int j) {
  int64_t lo[TPUC_MAX_RANK] = {0}, hi[TPUC_MAX_RANK], one[TPUC_MAX_RANK];
  for (int d = 0; d < t->rank; d++) {
    hi[d] = t->dims[d];
    one[d] = 1;
  }
  int64_t h = t->dims[t->rank - 1] / k;
  lo[t->rank - 1] = h * j;
  hi[t->rank - 1] = h * (j + 1);
  V out = -1;
  if (e->st == NULL)
    e->st = tpuc_hlo_slice(e->c->fn, x, lo, hi, one, &out);
  return out;
}

static V rnn_cat(em* e, const V* xs, size_t n, int rank) {
  V out = -1;
  if (e->st == NULL)
    e->st = tpuc_hlo_concatenate(e->c->fn, xs, n, rank - 1, &out);
  return out;
}

/* Gates plus an optional bias argument i ([kH], broadcast over rows). */
static V rnn_add_bias(em* e, V gates, const tpuc_hlo_type* t, int i) {
  if (op_is_none(e->c, i)) return gates;
  V b = e_cvt(e, e->c->vals[i], e->shape.dtype);
  int64_t map = t->rank - 1;
  return e_add(e, gates, e_bcast(e, b, t->dims, t->rank, &map));
}

/* Sum over every dim but the last (a bias's gradient). */
static V rnn_bias_grad(em* e, V g, const tpuc_hlo_type* t) {
  if (t->rank == 1) return g;
  int64_t d0 = 0;
  return e_sum(e, g, &d0, 1);
}

static bool rnn_gates_ok(const op_ctx* c, int i, int k, const tpuc_hlo_type* like) {
  const tpuc_hlo_type* t = &c->types[i];
  if (!op_is_tensor(c, i) || t->rank < 1 || t->rank > 2 ||
      t->dims[t->rank - 1] % k != 0 || !is_float(t->dtype))
    return false;
  return like == NULL || tpuc_hlo_type_equal(t, like);
}

/* What both cells' forwards take: input and hidden gates of one type with
 * k gates each, both biases or neither, and the state (argument 2) of
 * the gates' shape with the last dim divided by k. */
static bool rnn_cell_ok(const op_ctx* c, int k) {
  const tpuc_hlo_type* t = &c->types[0];
  if (!rnn_gates_ok(c, 0, k, NULL) || !rnn_gates_ok(c, 1, k, t) ||
      !op_is_tensor(c, 2) || op_is_none(c, 3) != op_is_none(c, 4))
    return false;
  tpuc_hlo_type ht = *t;
  ht.dims[t->rank - 1] /= k;
  return tpuc_hlo_type_equal(&c->types[2], &ht);
}

/* _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias?,
 * hidden_bias?) -> (hy, cy, workspace): gates i, f, g, o (sigmoid,
 * sigmoid, tanh, sigmoid) of the summed gates; cy = f cx + i g, hy = o
 * tanh(cy); the workspace keeps the activated gates. */
static tpuc_status* lower_lstm_cell(op_ctx* c, int param) {
  (void)param;
  const tpuc_hlo_type* t = &c->types[0];
  if (!rnn_cell_ok(c, 4)) return op_unimpl("lstm cell: unusual arguments");
  tpuc_dtype acc = op_accumulation_dtype(t->dtype);
  em e = em_make(c, acc, t);
  V gates = e_add(&e, e_cvt(&e, c->vals[0], acc), e_cvt(&e, c->vals[1], acc));
  gates = rnn_add_bias(&e, gates, t, 3);
  gates = rnn_add_bias(&e, gates, t, 4);
  V act[4];
  for (int j = 0; j < 4; j++)
    act[j] = e_un(&e, j == 2 ? TPUC_HLO_TANH : TPUC_HLO_LOGISTIC,
                  rnn_chunk(&e, gates, t, 4, j));
  V cx = e_cvt(&e, c->vals[2], acc);
  V cy = e_add(&e, e_mul(&e, act[1], cx), e_mul(&e, act[0], act[2]));
  V hy = e_mul(&e, act[3], e_tanh(&e, cy));
  c->outs[0] = e_cvt(&e, hy, t->dtype);
  c->outs[1] = e_cvt(&e, cy, t->dtype);
  c->outs[2] = e_cvt(&e, rnn_cat(&e, act, 4, t->rank), t->dtype);
  c->nouts = 3;
  return e.st;
}

/* _thnn_fused_lstm_cell_backward_impl(grad_hy?, grad_cy?, cx, cy,
 * workspace, has_bias) -> (grad_gates, grad_cx, grad_bias?). */
static tpuc_status* lower_lstm_cell_bw(op_ctx* c, int param) {
  (void)param;
  const tpuc_hlo_type* t = &c->types[4];
  if (!rnn_gates_ok(c, 4, 4, NULL) || !op_is_tensor(c, 2) ||
      !op_is_tensor(c, 3) || (op_is_none(c, 0) && op_is_none(c, 1)))
    return op_unimpl("lstm cell backward: unusual arguments");
  int64_t has_bias = 0;
  TRY(op_int_arg(c, 5, 0, &has_bias));
  tpuc_hlo_type ht = *t;
  ht.dims[t->rank - 1] /= 4;
  for (int i = 0; i < 4; i++)
    if (!op_is_none(c, i) && !tpuc_hlo_type_equal(&c->types[i], &ht))
      return op_unimpl("lstm cell backward: shapes");
  tpuc_dtype acc = op_accumulation_dtype(t->dtype);
  em e = em_make(c, acc, &ht);
  V ws = e_cvt(&e, c->vals[4], acc);
  V ig = rnn_chunk(&e, ws, t, 4, 0), fg = rnn_chunk(&e, ws, t, 4, 1),
    cg = rnn_chunk(&e, ws, t, 4, 2), og = rnn_chunk(&e, ws, t, 4, 3);
  V cx = e_cvt(&e, c->vals[2], acc), cy = e_cvt(&e, c->vals[3], acc);
  V one = e_k(&e, 1.0);
  V tcy = e_tanh(&e, cy);
  V ghy = op_is_none(c, 0) ? e_k(&e, 0.0) : e_cvt(&e, c->vals[0], acc);
  V gcy = op_is_none(c, 1) ? e_k(&e, 0.0) : e_cvt(&e, c->vals[1], acc);
  V gog = e_mul(&e, ghy, tcy);
  V gc = e_add(&e, e_mul(&e, e_mul(&e, ghy, og), e_sub(&e, one, e_mul(&e, tcy, tcy))),
               gcy);
  V pre[4];
  pre[0] = e_mul(&e, e_mul(&e, gc, cg), e_mul(&e, ig, e_sub(&e, one, ig)));
  pre[1] = e_mul(&e, e_mul(&e, gc, cx), e_mul(&e, fg, e_sub(&e, one, fg)));
  pre[2] = e_mul(&e, e_mul(&e, gc, ig), e_sub(&e, one, e_mul(&e, cg, cg)));
  pre[3] = e_mul(&e, gog, e_mul(&e, og, e_sub(&e, one, og)));
  V gg = rnn_cat(&e, pre, 4, t->rank);
  c->outs[0] = e_cvt(&e, gg, t->dtype);
  c->outs[1] = e_cvt(&e, e_mul(&e, gc, fg), t->dtype);
  c->outs[2] = -1;
  if (has_bias) {
    em eg = em_make(c, acc, t);
    c->outs[2] = e_cvt(&eg, rnn_bias_grad(&eg, gg, t), t->dtype);
    if (e.st == NULL) e.st = eg.st;
  }
  c->nouts = 3;
  return e.st;
}

/* _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias?,
 * hidden_bias?) -> (hy, workspace): r = sigmoid(i_r + h_r), z =
 * sigmoid(i_z + h_z), n = tanh(i_n + r h_n), hy = n + z (hx - n); the
 * workspace keeps r, z, n, h_n and hx. */
static tpuc_status* lower_gru_cell(op_ctx* c, int param) {
  (void)param;
  const tpuc_hlo_type* t = &c->types[0];
  if (!rnn_cell_ok(c, 3)) return op_unimpl("gru cell: unusual arguments");
  tpuc_dtype acc = op_accumulation_dtype(t->dtype);
  em e = em_make(c, acc, t);
  V in = rnn_add_bias(&e, e_cvt(&e, c->vals[0], acc), t, 3);
  V hid = rnn_add_bias(&e, e_cvt(&e, c->vals[1], acc), t, 4);
  V r = e_un(&e, TPUC_HLO_LOGISTIC, e_add(&e, rnn_chunk(&e, in, t, 3, 0),
                                            rnn_chunk(&e, hid, t, 3, 0)));
  V z = e_un(&e, TPUC_HLO_LOGISTIC, e_add(&e, rnn_chunk(&e, in, t, 3, 1),
                                            rnn_chunk(&e, hid, t, 3, 1)));
  V hn = rnn_chunk(&e, hid, t, 3, 2);
  V n = e_tanh(&e, e_add(&e, rnn_chunk(&e, in, t, 3, 2), e_mul(&e, r, hn)));
  V hx = e_cvt(&e, c->vals[2], acc);
  V hy = e_add(&e, n, e_mul(&e, z, e_sub(&e, hx, n)));
  V ws[5] = {r, z, n, hn, hx};
  c->outs[0] = e_cvt(&e, hy, t->dtype);
  c->outs[1] = e_cvt(&e, rnn_cat(&e, ws, 5, t->rank), t->dtype);
  c->nouts = 2;
  return e.st;
}

/* _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias) ->
 * (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias?,
 * grad_hidden_bias?). */
static tpuc_status* lower_gru_cell_bw(op_ctx* c, int param) {
  (void)param;
  const tpuc_hlo_type* ht = &c->types[0];
  if (!op_is_tensor(c, 0) || !rnn_gates_ok(c, 1, 5, NULL))
    return op_unimpl("gru cell backward: unusual arguments");
  const tpuc_hlo_type* wt = &c->types[1];
  if (ht->rank != wt->rank || ht->dims[ht->rank - 1] * 5 != wt->dims[wt->rank - 1])
    return op_unimpl("gru cell backward: shapes");
  int64_t has_bias = 0;
  TRY(op_int_arg(c, 2, 0, &has_bias));
  tpuc_dtype acc = op_accumulation_dtype(wt->dtype);
  em e = em_make(c, acc, ht);
  V ws = e_cvt(&e, c->vals[1], acc);
  V r = rnn_chunk(&e, ws, wt, 5, 0), z = rnn_chunk(&e, ws, wt, 5, 1),
    n = rnn_chunk(&e, ws, wt, 5, 2), hn = rnn_chunk(&e, ws, wt, 5, 3),
    hx = rnn_chunk(&e, ws, wt, 5, 4);
  V go = e_cvt(&e, c->vals[0], acc), one = e_k(&e, 1.0);
  V omz = e_sub(&e, one, z);
  V gz = e_mul(&e, e_mul(&e, go, e_sub(&e, hx, n)), e_mul(&e, omz, z));
  V ghx = e_mul(&e, go, z);
  V gn = e_mul(&e, e_mul(&e, go, omz), e_sub(&e, one, e_mul(&e, n, n)));
  V ghn = e_mul(&e, gn, r);
  V gr = e_mul(&e, e_mul(&e, gn, hn), e_mul(&e, e_sub(&e, one, r), r));
  V gi[3] = {gr, gz, gn}, gh[3] = {gr, gz, ghn};
  tpuc_hlo_type gt = *wt;
  gt.dims[gt.rank - 1] = ht->dims[ht->rank - 1] * 3;
  V gin = rnn_cat(&e, gi, 3, ht->rank), ghid = rnn_cat(&e, gh, 3, ht->rank);
  c->outs[0] = e_cvt(&e, gin, wt->dtype);
  c->outs[1] = e_cvt(&e, ghid, wt->dtype);
  c->outs[2] = e_cvt(&e, ghx, wt->dtype);
  c->outs[3] = c->outs[4] = -1;
  if (has_bias) {
    em eg = em_make(c, acc, &gt);
    c->outs[3] = e_cvt(&eg, rnn_bias_grad(&eg, gin, &gt), wt->dtype);
    c->outs[4] = e_cvt(&eg, rnn_bias_grad(&eg, ghid, &gt), wt->dtype);
    if (e.st == NULL) e.st = eg.st;
  }
  c->nouts = 5;
  return e.st;
}

/* ---------------------------------------------------------------------- */
/* The pieces of nn.TransformerEncoderLayer's inference fast path that
 * PyTorch's own device-generic code (registered for tpu in the binding)
 * calls: _transform_bias_rescale_qkv and _masked_softmax. */

/* _transform_bias_rescale_qkv(qkv [B, T, 3D], bias [3D], heads) -> q, k, v
 * [B, heads, T, D / heads]: the bias added, q divided by sqrt(D / heads). */
static tpuc_status* lower_qkv_rescale(op_ctx* c, int param) {
  (void)param;
  int64_t H = 0;
  TRY(op_int_arg(c, 2, 0, &H));
  const tpuc_hlo_type* t = &c->types[0];
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1) || t->rank != 3 || H <= 0 ||
      !is_float(t->dtype) || c->types[1].dtype != t->dtype ||
      c->types[1].rank != 1 || c->types[1].dims[0] != t->dims[2] ||
      t->dims[2] % 3 != 0 || (t->dims[2] / 3) % H != 0)
    return op_unimpl("_transform_bias_rescale_qkv: the CPU says why");
  int64_t B = t->dims[0], T = t->dims[1], D = t->dims[2] / 3, dh = D / H;
  tpuc_dtype acc = op_accumulation_dtype(t->dtype);
  em e = em_make(c, acc, t);
  int64_t map = 2;
  V x = e_add(&e, e_cvt(&e, c->vals[0], acc),
              e_bcast(&e, e_cvt(&e, c->vals[1], acc), t->dims, 3, &map));
  tpuc_hlo_type pt = tpuc_hlo_type_make(acc, (int64_t[]){B, T, D}, 3);
  em ep = em_make(c, acc, &pt);
  for (int j = 0; j < 3; j++) {
    int64_t lo[3] = {0, 0, j * D}, hi[3] = {B, T, (j + 1) * D};
    V part = -1;
    if (e.st == NULL) e.st = tpuc_hlo_slice(c->fn, x, lo, hi, NULL, &part);
    if (j == 0) part = e_div(&ep, part, e_k(&ep, sqrt((double)dh)));
    int64_t d4[4] = {B, T, H, dh}, perm[4] = {0, 2, 1, 3};
    part = e_reshape(&e, part, d4, 4);
    if (e.st == NULL) e.st = tpuc_hlo_transpose(c->fn, part, perm, &part);
    c->outs[j] = e_cvt(&e, part, t->dtype);
  }
  e_join(&e, &ep);
  c->nouts = 3;
  return e.st;
}

/* _masked_softmax(x, mask, dim?, mask_type?): softmax over the last dim
 * with the mask's true entries left out (a row with every entry masked
 * gives NaN, as on the CPU). mask_type 0: an [L, L] mask of a [B, H, L, L] input; 1: a
 * [B, L] key padding mask; otherwise the mask broadcasts to x (anything
 * else: the CPU raises its error). */
static tpuc_status* lower_masked_softmax(op_ctx* c, int param) {
  (void)param;
  const tpuc_hlo_type* t = &c->types[0];
  const tpuc_hlo_type* mt = &c->types[1];
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1) || !is_float(t->dtype) ||
      mt->dtype != TPUC_DTYPE_PRED || t->rank < 1)
    return op_unimpl("_masked_softmax: the CPU says why");
  int64_t dim = t->rank - 1, type = 2;
  if (!op_is_none(c, 2)) TRY(op_int_arg(c, 2, dim, &dim));
  if (!op_is_none(c, 3)) TRY(op_int_arg(c, 3, 2, &type));
  if (dim < 0) dim += t->rank;
  if (dim != t->rank - 1) return op_unimpl("_masked_softmax over another dim");
  int64_t map[TPUC_MAX_RANK];
  int r = t->rank;
  if ((type == 0 || type == 1) && r == 4 && mt->rank == 2 &&
      mt->dims[1] == t->dims[3] && mt->dims[0] == t->dims[type == 0 ? 2 : 0] &&
      (type == 1 || t->dims[2] == t->dims[3])) {
    map[0] = type == 0 ? 2 : 0;
    map[1] = 3;
  } else {
    if (mt->rank > r) return op_unimpl("_masked_softmax: mask shape");
    for (int d = 0; d < mt->rank; d++) {
      map[d] = r - mt->rank + d;
      if (mt->dims[d] != 1 && mt->dims[d] != t->dims[map[d]])
        return op_unimpl("_masked_softmax: mask shape");
    }
  }
  tpuc_dtype acc = op_accumulation_dtype(t->dtype);
  em e = em_make(c, acc, t);
  V x = e_cvt(&e, c->vals[0], acc);
  V m = -1;
  if (mt->rank == 2 && (map[0] != r - 2 || map[1] != r - 1)) {
    m = e_bcast(&e, c->vals[1], t->dims, r, map);
  } else {
    V mk = c->vals[1];
    int64_t full[TPUC_MAX_RANK];
    for (int d = 0; d < mt->rank; d++) full[d] = map[d];
    m = e_bcast(&e, mk, t->dims, r, full);
  }
  V ninf = e_k(&e, -INFINITY), zero = e_k(&e, 0.0);
  V xm = e_sel(&e, m, ninf, x);
  int64_t last = r - 1, keep[TPUC_MAX_RANK];
  for (int d = 0; d < r - 1; d++) keep[d] = d;
  V mx = -1, init = e_k0(&e, acc, -INFINITY);
  tpuc_hlo_fn* body = NULL;
  if (e.st == NULL) e.st = tpuc_hlo_region_binary(c->module, acc, TPUC_HLO_MAX, &body);
  if (e.st == NULL) e.st = tpuc_hlo_reduce(c->fn, &xm, &init, 1, &last, 1, body, &mx);
  /* (a row with every entry masked sums to 0: NaN, as on the CPU) */
  V ex = e_sel(&e, m, zero, e_exp(&e, e_sub(&e, xm, e_bcast(&e, mx, t->dims, r, keep))));
  V sum = e_sum(&e, ex, &last, 1);
  V y = e_div(&e, ex, e_bcast(&e, sum, t->dims, r, keep));
  c->outs[0] = e_cvt(&e, y, t->dtype);
  c->nouts = 1;
  return e.st;
}

/* ---------------------------------------------------------------------- */
/* Losses. Reduction: 0 none, 1 mean, 2 sum. */

/* nll_loss_forward / nll_loss2d_forward(self, target, weight, reduction,
 * ignore_index) -> (output, total_weight), and the backwards
 * (grad_output, self, target, weight, reduction, ignore_index,
 * total_weight) -> grad_input. The class dim is 1 (0 for an unbatched
 * 1-D input); the picked class is a one-hot select, so no gather is
 * needed and ignored or out-of-range targets pick nothing. */
static tpuc_status* lower_nll(op_ctx* c, int backward) {
  int o = backward ? 1 : 0; /* index of self */
  int si = o, ti = o + 1, wi = o + 2, ri = o + 3, ii = o + 4;
  if (!op_is_tensor(c, si) || !op_is_tensor(c, ti) ||
      c->args[ri].kind != TPUC_OP_ARG_INT ||
      (c->args[ii].kind != TPUC_OP_ARG_INT &&
       (!op_is_value(c, ii) || c->types[ii].rank != 0)) ||
      (backward && !op_is_tensor(c, 0)))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* st = &c->types[si];
  const tpuc_hlo_type* tt = &c->types[ti];
  int64_t red = c->args[ri].i;
  if (!is_float(st->dtype) || (red < 0 || red > 2) ||
      (tt->dtype != TPUC_DTYPE_S64 && tt->dtype != TPUC_DTYPE_U8))
    return op_unimpl("nll_loss: unusual arguments (CPU says why)");
  /* Shapes: self [C] with target [], [N, C] with [N], or [N, C, ...]
   * with [N, ...]. */
  int cd = st->rank == 1 ? 0 : 1;
  if (st->rank < 1 || tt->rank != st->rank - 1 || st->rank == 3 || st->rank > 4)
    return op_unimpl("nll_loss: unusual shapes (CPU says why)");
  for (int d = 0, k = 0; d < st->rank; d++) {
    if (d == cd) continue;
    if (tt->dims[k++] != st->dims[d])
      return op_unimpl("nll_loss: batch mismatch (CPU says why)");
  }
  int64_t C = st->dims[cd];
  if (!op_is_none(c, wi)) {
    if (!op_is_tensor(c, wi) || c->types[wi].dtype != st->dtype ||
        tpuc_hlo_type_num_elements(&c->types[wi]) != C)
      return op_unimpl("nll_loss: unusual weight (CPU says why)");
  }
  tpuc_dtype dt = st->dtype, acc = op_accumulation_dtype(dt);
  em e = em_make(c, acc, st);
  em et = em_make(c, acc, tt);
  /* target and ignore_index as s64 */
  V tgt = e_cvt(&e, c->vals[ti], TPUC_DTYPE_S64);
  V ign = -1;
  if (e.st == NULL) e.st = op_scalar(c, ii, TPUC_DTYPE_S64, tt, &ign);
  V valid = e_cmp(&e, TPUC_HLO_NE, tgt, ign);
  /* out-of-range targets that are not ignored fail like the CPU */
  {
    V zero = -1, cc = -1;
    if (e.st == NULL) e.st = op_const(c, TPUC_DTYPE_S64, 0, tt, &zero);
    if (e.st == NULL) e.st = op_const(c, TPUC_DTYPE_S64, (double)C, tt, &cc);
    V bad = e_and(&e, valid,
                  e_or(&e, e_cmp(&e, TPUC_HLO_LT, tgt, zero),
                       e_cmp(&e, TPUC_HLO_GE, tgt, cc)));
    V f = -1, any = -1;
    tpuc_hlo_fn* body = NULL;
    if (e.st == NULL) e.st = op_const(c, TPUC_DTYPE_PRED, 0, NULL, &f);
    if (e.st == NULL)
      e.st = tpuc_hlo_region_binary(c->module, TPUC_DTYPE_PRED, TPUC_HLO_OR,
                                    &body);
    int64_t dims[TPUC_MAX_RANK];
    for (int d = 0; d < tt->rank; d++) dims[d] = d;
    if (tt->rank == 0)
      any = bad;
    else if (e.st == NULL)
      e.st = tpuc_hlo_reduce(c->fn, &bad, &f, 1, dims, (size_t)tt->rank, body,
                             &any);
    c->has_check = true;
    c->check = any;
    c->check_code = TPUC_OUT_OF_RANGE;
    c->check_msg = "Target is out of bounds.";
  }
  /* one-hot of the target along the class dim */
  int64_t map[TPUC_MAX_RANK];
  for (int d = 0, k = 0; d < st->rank; d++)
    if (d != cd) map[k++] = d;
  V io = -1;
  tpuc_hlo_type it = *st;
  it.dtype = TPUC_DTYPE_S64;
  if (e.st == NULL) e.st = tpuc_hlo_iota(c->fn, &it, cd, &io);
  V hot = e_cmp(&e, TPUC_HLO_EQ, io, e_bcast(&e, tgt, st->dims, st->rank, map));
  /* the target's weight (0 where ignored) */
  V wt;
  if (!op_is_none(c, wi)) {
    V w = e_reshape(&e, e_cvt(&e, c->vals[wi], acc), &C, 1);
    int64_t wm = cd;
    w = e_bcast(&e, w, st->dims, st->rank, &wm);
    wt = e_sum(&e, e_sel(&e, hot, w, e_k(&e, 0.0)), &wm, 1);
  } else {
    wt = e_k(&et, 1.0);
  }
  wt = e_sel(&et, valid, wt, e_k(&et, 0.0));
  bool per_sample = red == 0 && st->rank > 1;
  if (!backward) {
    int64_t cdim = cd;
    V xt = e_sum(&e, e_sel(&e, hot, e_cvt(&e, c->vals[si], acc), e_k(&e, 0.0)),
                 &cdim, 1);
    V loss = e_sel(&et, valid, e_mul(&et, e_neg(&et, xt), wt), e_k(&et, 0.0));
    V out, tw;
    em e0 = em_make(c, acc, &(tpuc_hlo_type){acc, 0, {0}});
    if (per_sample) {
      out = loss;
      tw = e_k(&e0, 0.0);
    } else {
      tw = e_sum_all(&et, wt);
      out = e_sum_all(&et, loss);
      if (red == 1) out = e_div(&e0, out, tw);
    }
    if (e.st == NULL) e.st = et.st ? et.st : e0.st;
    c->outs[0] = e_cvt(&e, out, dt);
    c->outs[1] = e_cvt(&e, tw, dt);
    c->nouts = 2;
    return e.st;
  }
  /* backward: grad_input = one-hot * -(g [/ total_weight]) * w_target */
  const tpuc_hlo_type* gt = &c->types[0];
  bool g_ok = per_sample ? same_dims(gt, tt) : gt->rank == 0;
  if (!is_float(gt->dtype) || !op_is_tensor(c, 6) || c->types[6].rank != 0 ||
      !g_ok)
    return op_unimpl("nll_loss backward: unusual grad_output");
  V g = e_cvt(&et, c->vals[0], acc);
  if (!per_sample) {
    if (red == 1) g = e_div(&e, g, e_cvt(&e, c->vals[6], acc));
    if (tt->rank > 0) g = e_bcast(&et, g, tt->dims, tt->rank, NULL);
  }
  V per = e_mul(&et, e_neg(&et, g), wt);
  V gi =
      e_sel(&e, hot, e_bcast(&e, per, st->dims, st->rank, map), e_k(&e, 0.0));
  if (e.st == NULL) e.st = et.st;
  c->outs[0] = e_cvt(&e, gi, dt);
  c->nouts = 1;
  return e.st;
}

enum {
  LOSS_MSE = 1,
  LOSS_BCE,
  LOSS_SMOOTH_L1,
  LOSS_HUBER,
  LOSS_BW = 0x100,
};

/* mse_loss(self, target, reduction), binary_cross_entropy(self, target,
 * weight, reduction), smooth_l1_loss(self, target, reduction, beta),
 * huber_loss(self, target, reduction, delta); the backwards take
 * grad_output first. */
static tpuc_status* lower_pointwise_loss(op_ctx* c, int param) {
  int kind = param & 0xff;
  bool backward = (param & LOSS_BW) != 0;
  int o = backward ? 1 : 0;
  int si = o, ti = o + 1;
  int wi = kind == LOSS_BCE ? o + 2 : -1;
  int ri = kind == LOSS_BCE ? o + 3 : o + 2;
  int pi = kind == LOSS_SMOOTH_L1 || kind == LOSS_HUBER ? o + 3 : -1;
  if (!op_is_tensor(c, si) || !op_is_tensor(c, ti) ||
      c->args[ri].kind != TPUC_OP_ARG_INT || (pi >= 0 && !op_is_value(c, pi)) ||
      (backward && !op_is_tensor(c, 0)))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* st = &c->types[si];
  tpuc_dtype dt = st->dtype;
  int64_t red = c->args[ri].i;
  if (!is_float(dt) || !tpuc_hlo_type_equal(st, &c->types[ti]) || red < 0 ||
      red > 2)
    return op_unimpl("loss: unusual arguments (CPU says why)");
  if (wi >= 0 && !op_is_none(c, wi)) {
    int which[2] = {si, wi};
    tpuc_hlo_type bs;
    if (!op_is_tensor(c, wi) || c->types[wi].dtype != dt)
      return op_unimpl("loss: unusual weight (CPU says why)");
    tpuc_status* bst = op_broadcast_shape(c, which, 2, &bs);
    if (bst != NULL || !same_dims(&bs, st)) {
      tpuc_status_free(bst);
      return op_unimpl("loss: unusual weight (CPU says why)");
    }
  }
  tpuc_dtype acc = op_accumulation_dtype(dt);
  em e = em_make(c, acc, st);
  V x = e_arg(&e, si), t = e_arg(&e, ti);
  int64_t n = tpuc_hlo_type_num_elements(st);
  /* data-dependent argument checks of the CPU */
  if (kind == LOSS_BCE) {
    V out = e_or(&e, e_cmp(&e, TPUC_HLO_LT, x, e_k(&e, 0.0)),
                 e_cmp(&e, TPUC_HLO_GT, x, e_k(&e, 1.0)));
    V f = -1, any = -1;
    tpuc_hlo_fn* body = NULL;
    int64_t dims[TPUC_MAX_RANK];
    for (int d = 0; d < st->rank; d++) dims[d] = d;
    if (e.st == NULL) e.st = op_const(c, TPUC_DTYPE_PRED, 0, NULL, &f);
    if (e.st == NULL)
      e.st = tpuc_hlo_region_binary(c->module, TPUC_DTYPE_PRED, TPUC_HLO_OR,
                                    &body);
    if (st->rank == 0)
      any = out;
    else if (e.st == NULL)
      e.st = tpuc_hlo_reduce(c->fn, &out, &f, 1, dims, (size_t)st->rank, body,
                             &any);
    if (!backward) {
      c->has_check = true;
      c->check = any;
      c->check_code = TPUC_INVALID_ARGUMENT;
      c->check_msg = "all elements of input should be between 0 and 1";
    }
  } else if (pi >= 0) {
    em e0 =
        em_make(c, TPUC_DTYPE_F64, &(tpuc_hlo_type){TPUC_DTYPE_F64, 0, {0}});
    V p = e_scal(&e0, pi);
    c->has_check = true;
    c->check_code = TPUC_INVALID_ARGUMENT;
    if (kind == LOSS_SMOOTH_L1) {
      c->check = e_cmp(&e0, TPUC_HLO_LT, p, e_k(&e0, 0.0));
      c->check_msg =
          "smooth_l1_loss does not support negative values for beta.";
    } else {
      c->check = e_cmp(&e0, TPUC_HLO_LE, p, e_k(&e0, 0.0));
      c->check_msg =
          "huber_loss does not support non-positive values for delta.";
    }
    if (e.st == NULL) e.st = e0.st;
  }
  V p = pi >= 0 ? e_scal(&e, pi) : -1;
  V r;
  if (!backward) {
    V d = e_sub(&e, x, t);
    switch (kind) {
      case LOSS_MSE:
        r = e_mul(&e, d, d);
        break;
      case LOSS_BCE: {
        V lo = e_k(&e, -100.0);
        V l1 = e_max(&e, e_log1p(&e, e_neg(&e, x)), lo);
        V l0 = e_max(&e, e_un(&e, TPUC_HLO_LOG, x), lo);
        r = e_sub(&e, e_mul(&e, e_sub(&e, t, e_k(&e, 1.0)), l1),
                  e_mul(&e, t, l0));
        if (!op_is_none(c, wi)) r = e_mul(&e, r, e_arg(&e, wi));
        break;
      }
      case LOSS_SMOOTH_L1: {
        V z = e_abs(&e, d);
        V q = e_div(&e, e_mul(&e, e_mul(&e, e_k(&e, 0.5), z), z), p);
        r = e_sel(&e, e_cmp(&e, TPUC_HLO_LT, z, p), q,
                  e_sub(&e, z, e_mul(&e, e_k(&e, 0.5), p)));
        break;
      }
      default: { /* huber */
        V z = e_abs(&e, d);
        V q = e_mul(&e, e_mul(&e, e_k(&e, 0.5), z), z);
        r = e_sel(&e, e_cmp(&e, TPUC_HLO_LT, z, p), q,
                  e_mul(&e, p, e_sub(&e, z, e_mul(&e, e_k(&e, 0.5), p))));
        break;
      }
    }
    if (red != 0) {
      /* the elementwise loss is a tensor of the input dtype first */
      r = e_cvt(&e, e_cvt(&e, r, dt), acc);
      r = e_sum_all(&e, r);
      if (red == 1) {
        em e0 = em_make(c, acc, &(tpuc_hlo_type){acc, 0, {0}});
        r = e_div(&e0, r, e_k(&e0, (double)n));
        if (e.st == NULL) e.st = e0.st;
      }
    }
    c->outs[0] = e_cvt(&e, r, dt);
    c->nouts = 1;
    return e.st;
  }
  /* backward: grad_output is the loss's shape (none) or a scalar */
  const tpuc_hlo_type* gt = &c->types[0];
  if (gt->dtype != dt ||
      (red == 0 ? !tpuc_hlo_type_equal(gt, st) : gt->rank != 0))
    return op_unimpl("loss backward: unusual grad_output");
  V g = e_arg(&e, 0);
  double norm = red == 1 ? 1.0 / (double)n : 1.0;
  V d = e_sub(&e, x, t);
  switch (kind) {
    case LOSS_MSE:
      r = e_mul(&e, d, e_mul(&e, e_k(&e, 2.0 * norm), g));
      break;
    case LOSS_BCE: {
      V den =
          e_max(&e, e_mul(&e, e_sub(&e, e_k(&e, 1.0), x), x), e_k(&e, 1e-12));
      r = e_div(&e, e_mul(&e, g, d), den);
      if (!op_is_none(c, wi)) r = e_mul(&e, r, e_arg(&e, wi));
      if (red == 1) r = e_div(&e, r, e_k(&e, (double)n));
      break;
    }
    case LOSS_SMOOTH_L1: {
      V ng = e_mul(&e, e_k(&e, norm), g);
      V mid = e_div(&e, e_mul(&e, e_mul(&e, e_k(&e, norm), d), g), p);
      r = e_sel(&e, e_cmp(&e, TPUC_HLO_GE, d, p), ng, mid);
      r = e_sel(&e, e_cmp(&e, TPUC_HLO_LE, d, e_neg(&e, p)), e_neg(&e, ng), r);
      /* beta 0 is l1_loss's backward: sign(d) * norm * grad */
      V l1 = e_mul(&e, e_un(&e, TPUC_HLO_SIGN, d), ng);
      r = e_sel(&e, e_cmp(&e, TPUC_HLO_EQ, p, e_k(&e, 0.0)), l1, r);
      break;
    }
    default: { /* huber */
      V ng = e_mul(&e, e_mul(&e, e_k(&e, norm), p), g);
      V mid = e_mul(&e, e_mul(&e, e_k(&e, norm), d), g);
      r = e_sel(&e, e_cmp(&e, TPUC_HLO_GE, d, p), ng, mid);
      r = e_sel(&e, e_cmp(&e, TPUC_HLO_LE, d, e_neg(&e, p)), e_neg(&e, ng), r);
      break;
    }
  }
  c->outs[0] = e_cvt(&e, r, dt);
  c->nouts = 1;
  return e.st;
}

/* ---------------------------------------------------------------------- */
/* Convolution (PyTorch layout: N C spatial..., weight O I/groups k...). */

typedef struct conv_args {
  int ns; /* spatial dims */
  int64_t stride[TPUC_MAX_RANK], pad[TPUC_MAX_RANK], dil[TPUC_MAX_RANK];
  int64_t opad[TPUC_MAX_RANK]; /* output_padding (transposed only) */
  int64_t groups;
  bool transposed;
  /* spatial sizes of the input and of the output */
  int64_t in[TPUC_MAX_RANK], out[TPUC_MAX_RANK];
} conv_args;

/* Static arguments of convolution (input at `o`, weight at o + 1) and of
 * convolution_backward (o = 1): stride, padding, dilation (o + 3 to o + 5,
 * one entry per spatial dim), transposed (o + 6), output_padding (o + 7),
 * groups (o + 8, a static int of the program key). Anything the CPU would
 * refuse runs there (UNIMPLEMENTED), so that it explains. */
static tpuc_status* conv_parse(const op_ctx* c, int o, conv_args* a) {
  int in = o, w = o + 1;
  if (!op_is_tensor(c, in) || !op_is_tensor(c, w) ||
      c->args[o + 6].kind != TPUC_OP_ARG_BOOL)
    return op_unimpl("unexpected arguments");
  a->transposed = c->args[o + 6].i != 0;
  const tpuc_hlo_type* x = &c->types[in];
  const tpuc_hlo_type* k = &c->types[w];
  a->ns = x->rank - 2;
  /* (int64 convolves exactly, forward only: integers have no grads) */
  bool dt_ok = is_float(x->dtype) || (o == 0 && x->dtype == TPUC_DTYPE_S64);
  if (a->ns < 1 || a->ns > 3 || k->rank != x->rank || !dt_ok ||
      k->dtype != x->dtype)
    return op_unimpl("convolution: unusual arguments (CPU says why)");
  int64_t* lists[4] = {a->stride, a->pad, a->dil, a->opad};
  for (int l = 0; l < (a->transposed ? 4 : 3); l++) {
    const tpuc_op_arg* arg = &c->args[o + 3 + (l == 3 ? 4 : l)];
    /* (an empty output_padding means zeros; one value stands for every
     * spatial dim, as padding="valid" passes {0}) */
    bool zeros =
        l == 3 && arg->kind == TPUC_OP_ARG_INT_LIST && arg->list_len == 0;
    bool one = arg->kind == TPUC_OP_ARG_INT_LIST && arg->list_len == 1;
    if (arg->kind != TPUC_OP_ARG_INT_LIST ||
        ((int)arg->list_len != a->ns && !zeros && !one))
      return op_unimpl("convolution: unusual stride/padding/dilation");
    for (int i = 0; i < a->ns; i++) {
      lists[l][i] = zeros ? 0 : arg->list[one ? 0 : i];
      if (lists[l][i] < (l == 1 || l == 3 ? 0 : 1))
        return op_unimpl("convolution: bad stride/padding/dilation (CPU)");
    }
  }
  if (!a->transposed)
    for (int i = 0; i < a->ns; i++) a->opad[i] = 0;
  const tpuc_op_arg* ga = &c->args[o + 8];
  if (ga->kind != TPUC_OP_ARG_INT || ga->i <= 0)
    return op_unimpl("convolution: unusual groups (CPU says why)");
  a->groups = ga->i;
  int64_t G = a->groups;
  if (!a->transposed) {
    /* weight [O, I/G, k...] */
    if (x->dims[1] != k->dims[1] * G || k->dims[0] % G != 0)
      return op_unimpl("convolution: channel mismatch (CPU says why)");
  } else {
    /* weight [I, O/G, k...]; output padding below the stride or the
     * dilation */
    if (x->dims[1] != k->dims[0] || k->dims[0] % G != 0)
      return op_unimpl("convolution: channel mismatch (CPU says why)");
    for (int i = 0; i < a->ns; i++)
      if (a->opad[i] >= a->stride[i] && a->opad[i] >= a->dil[i])
        return op_unimpl("convolution: output padding too large (CPU)");
  }
  for (int d = 0; d < x->rank; d++)
    if (x->dims[d] == 0 || k->dims[d] == 0)
      return op_unimpl("empty convolution: CPU");
  for (int i = 0; i < a->ns; i++) {
    int64_t span = a->dil[i] * (k->dims[2 + i] - 1) + 1;
    a->in[i] = x->dims[2 + i];
    if (!a->transposed) {
      if (x->dims[2 + i] + 2 * a->pad[i] < span)
        return op_unimpl("convolution: kernel larger than input (CPU)");
      a->out[i] = (x->dims[2 + i] + 2 * a->pad[i] - span) / a->stride[i] + 1;
    } else {
      a->out[i] = (x->dims[2 + i] - 1) * a->stride[i] - 2 * a->pad[i] + span +
                  a->opad[i];
      if (a->out[i] <= 0)
        return op_unimpl("convolution: output too small (CPU says why)");
    }
  }
  return NULL;
}

static V e_conv(em* e, V lhs, V rhs, const tpuc_hlo_conv* cv) {
  V out = -1;
  if (e->st == NULL) e->st = tpuc_hlo_convolution(e->c->fn, lhs, rhs, cv, &out);
  return out;
}

/* A kernel w [A, B, k...] of `groups` groups (A = groups * A/G) as the
 * kernel of the adjoint convolution: [G * B, A/G, k...], the feature dims
 * swapped within each group and the window flipped. */
static V conv_adjoint_kernel(em* e, V w, const tpuc_hlo_type* k, int64_t G) {
  int r = k->rank, ns = r - 2;
  int64_t gd[TPUC_MAX_RANK + 1], perm[TPUC_MAX_RANK + 1];
  int64_t kd[TPUC_MAX_RANK], sp[TPUC_MAX_RANK];
  gd[0] = G;
  gd[1] = k->dims[0] / G;
  gd[2] = k->dims[1];
  perm[0] = 0;
  perm[1] = 2;
  perm[2] = 1;
  kd[0] = G * k->dims[1];
  kd[1] = k->dims[0] / G;
  for (int i = 0; i < ns; i++) {
    gd[3 + i] = k->dims[2 + i];
    perm[3 + i] = 3 + i;
    kd[2 + i] = k->dims[2 + i];
    sp[i] = 2 + i;
  }
  V wk = e_reshape(e, w, gd, r + 1);
  if (e->st == NULL) e->st = tpuc_hlo_transpose(e->c->fn, wk, perm, &wk);
  wk = e_reshape(e, wk, kd, r);
  if (e->st == NULL)
    e->st = tpuc_hlo_reverse(e->c->fn, wk, sp, (size_t)ns, &wk);
  return wk;
}

/* The transposed convolution of x (input type xt, spatial sizes `in`)
 * with a plain kernel wk [I, O/G, k...] (weight type kt): x's positions
 * spread by the stride, convolved with the adjoint kernel; `out` the
 * output's spatial sizes. Also grad_input of a plain convolution. */
static V conv_transposed(em* e, V x, V w, const tpuc_hlo_type* kt,
                         const conv_args* a, const int64_t* in,
                         const int64_t* out) {
  tpuc_hlo_conv cv;
  tpuc_hlo_conv_init_nchw(&cv, a->ns);
  int64_t pads[2 * TPUC_MAX_RANK];
  for (int i = 0; i < a->ns; i++) {
    int64_t kk = kt->dims[2 + i];
    pads[2 * i] = a->dil[i] * (kk - 1) - a->pad[i];
    pads[2 * i + 1] = out[i] - 1 - (in[i] - 1) * a->stride[i] + a->pad[i];
  }
  cv.padding = pads;
  cv.lhs_dilation = a->stride;
  cv.rhs_dilation = a->dil;
  cv.feature_group_count = a->groups;
  return e_conv(e, x, conv_adjoint_kernel(e, w, kt, a->groups), &cv);
}

/* The plain convolution of x [N, C, in...] with w [O, C/G, k...]. */
static V conv_plain(em* e, V x, V w, const conv_args* a) {
  tpuc_hlo_conv cv;
  tpuc_hlo_conv_init_nchw(&cv, a->ns);
  int64_t pads[2 * TPUC_MAX_RANK];
  for (int i = 0; i < a->ns; i++) pads[2 * i] = pads[2 * i + 1] = a->pad[i];
  cv.strides = a->stride;
  cv.padding = pads;
  cv.rhs_dilation = a->dil;
  cv.feature_group_count = a->groups;
  return e_conv(e, x, w, &cv);
}

/* The weight gradient of the plain convolution of x [N, I, xin...] into
 * g [N, O, gsz...] (kernel spatial sizes ks): x convolved with g over the
 * batch, one batch group per group -> [O, I/G, k...]. */
static V conv_weight_grad(em* e, V x, V g, const conv_args* a,
                          const int64_t* xin, const int64_t* gsz,
                          const int64_t* ks) {
  tpuc_hlo_conv cw;
  tpuc_hlo_conv_init_nchw(&cw, a->ns);
  cw.input_batch_dim = 1;
  cw.input_feature_dim = 0;
  cw.kernel_input_feature_dim = 0;
  cw.kernel_output_feature_dim = 1;
  cw.output_batch_dim = 1;
  cw.output_feature_dim = 0;
  int64_t wpads[2 * TPUC_MAX_RANK];
  for (int i = 0; i < a->ns; i++) {
    wpads[2 * i] = a->pad[i];
    wpads[2 * i + 1] = (ks[i] - 1) * a->dil[i] + (gsz[i] - 1) * a->stride[i] +
                       1 - xin[i] - a->pad[i];
  }
  cw.strides = a->dil;
  cw.rhs_dilation = a->stride;
  cw.padding = wpads;
  cw.batch_group_count = a->groups;
  return e_conv(e, x, g, &cw);
}

/* The compute dtype of a convolution: f32 for half floats; f64 for the
 * f32 transposed ones, whose sums the CPU forms in an order (im2col and
 * a GEMM) that f32 sums in another order miss by more than the usual
 * tolerance where terms cancel: exact sums rounded once land within it. */
static tpuc_dtype conv_acc_dtype(const conv_args* a, tpuc_dtype dt) {
  if (a->transposed && dt == TPUC_DTYPE_F32) return TPUC_DTYPE_F64;
  return op_accumulation_dtype(dt);
}

/* convolution(input, weight, bias, stride, padding, dilation, transposed,
 * output_padding, groups). Registered as aten::convolution rather than
 * convolution_overrideable: what runs on the CPU then is the CPU's own
 * aten::convolution. */
static tpuc_status* lower_conv(op_ctx* c, int param) {
  (void)param;
  conv_args a;
  TRY(conv_parse(c, 0, &a));
  const tpuc_hlo_type* x = &c->types[0];
  const tpuc_hlo_type* k = &c->types[1];
  int64_t O = a.transposed ? k->dims[1] * a.groups : k->dims[0];
  if (!op_is_none(c, 2) &&
      (!op_is_tensor(c, 2) || c->types[2].dtype != x->dtype ||
       c->types[2].rank != 1 || c->types[2].dims[0] != O))
    return op_unimpl("convolution: unusual bias (CPU says why)");
  tpuc_dtype dt = x->dtype, acc = conv_acc_dtype(&a, dt);
  em e = em_make(c, acc, x);
  V xv = e_cvt(&e, c->vals[0], acc), wv = e_cvt(&e, c->vals[1], acc);
  V y = a.transposed ? conv_transposed(&e, xv, wv, k, &a, a.in, a.out)
                     : conv_plain(&e, xv, wv, &a);
  if (!op_is_none(c, 2)) {
    tpuc_hlo_type yt = e_type(&e, y);
    int64_t one = 1;
    if (e.st == NULL)
      y = e_add(
          &e, y,
          e_bcast(&e, e_cvt(&e, c->vals[2], acc), yt.dims, yt.rank, &one));
  }
  c->outs[0] = e_cvt(&e, y, dt);
  c->nouts = 1;
  return e.st;
}

/* convolution_backward(grad_output, input, weight, bias_sizes, stride,
 * padding, dilation, transposed, output_padding, groups, output_mask)
 * -> (grad_input, grad_weight, grad_bias). A plain convolution's
 * grad_input is the transposed convolution of grad_output, and a
 * transposed one's the plain convolution of grad_output; grad_weight
 * convolves the plain convolution's input with its output's grad over the
 * batch (for a transposed convolution: grad_output with the input). */
static tpuc_status* lower_conv_bw(op_ctx* c, int param) {
  (void)param;
  conv_args a;
  TRY(conv_parse(c, 1, &a));
  bool mask[3];
  if (!mask3(c, 10, mask)) return op_unimpl("unexpected arguments");
  if (c->args[3].kind != TPUC_OP_ARG_INT_LIST)
    return op_unimpl("convolution backward without bias: CPU");
  const tpuc_hlo_type* x = &c->types[1];
  const tpuc_hlo_type* k = &c->types[2];
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  /* (the CPU's f32 3-d transposed backward sums in its GEMM's order and
   * lands an ulp of its partial sums away from exact sums: CPU) */
  if (a.transposed && a.ns == 3 && x->dtype == TPUC_DTYPE_F32)
    return op_unimpl("f32 conv_transpose3d backward: CPU's sum order");
  const tpuc_hlo_type* gt = &c->types[0];
  int r = x->rank, ns = a.ns;
  int64_t O = a.transposed ? k->dims[1] * a.groups : k->dims[0];
  /* grad_output must have the forward's output shape */
  bool ok = gt->dtype == x->dtype && gt->rank == r &&
            gt->dims[0] == x->dims[0] && gt->dims[1] == O;
  for (int i = 0; ok && i < ns; i++) ok = gt->dims[2 + i] == a.out[i];
  if (!ok) return op_unimpl("convolution backward: unusual grad_output");
  tpuc_dtype dt = x->dtype, acc = conv_acc_dtype(&a, dt);
  em e = em_make(c, acc, x);
  V g = e_cvt(&e, c->vals[0], acc);
  V xin = e_cvt(&e, c->vals[1], acc);
  V w = e_cvt(&e, c->vals[2], acc);
  int64_t ks[TPUC_MAX_RANK];
  for (int i = 0; i < ns; i++) ks[i] = k->dims[2 + i];
  V gi, gw;
  if (!a.transposed) {
    gi = conv_transposed(&e, g, w, k, &a, a.out, a.in);
    gw = conv_weight_grad(&e, xin, g, &a, a.in, a.out, ks);
  } else {
    /* the plain convolution of grad_output gives one more position per
     * dim when output_padding added one: cut it */
    gi = conv_plain(&e, g, w, &a);
    tpuc_hlo_type it = e_type(&e, gi);
    int64_t st[TPUC_MAX_RANK] = {0}, lim[TPUC_MAX_RANK];
    for (int d = 0; d < r; d++) lim[d] = d < 2 ? it.dims[d] : x->dims[d];
    for (int i = 0; e.st == NULL && i < ns; i++)
      if (it.dims[2 + i] < x->dims[2 + i])
        e.st = op_unimpl("transposed convolution backward: sizes (CPU)");
    if (e.st == NULL) e.st = tpuc_hlo_slice(c->fn, gi, st, lim, NULL, &gi);
    gw = conv_weight_grad(&e, g, xin, &a, a.out, a.in, ks);
  }
  /* grad_bias */
  int64_t bd[TPUC_MAX_RANK];
  bd[0] = 0;
  for (int i = 0; i < ns; i++) bd[1 + i] = 2 + i;
  V gb = e_sum(&e, g, bd, (size_t)ns + 1);
  c->outs[0] = e_cvt(&e, gi, dt);
  c->outs[1] = e_cvt(&e, gw, dt);
  c->outs[2] = e_cvt(&e, gb, dt);
  for (int kk = 0; kk < 3; kk++)
    if (!mask[kk]) c->outs[kk] = -1;
  c->nouts = 3;
  return e.st;
}

/* ---------------------------------------------------------------------- */
/* Helpers of the sections below: gathers and scatter-adds along one dim,
 * index vectors. */

/* x (any dtype) taken at the s64 indices `idx` (rank 1, n entries) along
 * `dim`: dim's size becomes n. Indices must be in range. */
static V e_take(em* e, V x, int dim, V idx) {
  tpuc_hlo_type xt = e_type(e, x), it = e_type(e, idx);
  if (e->st != NULL) return -1;
  int64_t n = it.dims[0], id[2] = {n, 1};
  V i2 = e_reshape(e, idx, id, 2), out = -1;
  if (e->st == NULL) e->st = op_take_along(e->c->fn, x, &xt, dim, i2, &out);
  return out;
}

/* The transpose of e_take: a zero tensor whose `dim` has `size` entries,
 * with slice k of g (whose dim has n entries) added at idx[k]. g is in
 * the compute dtype. Out-of-range indices add nothing. */
static V e_put_add(em* e, V g, int dim, V idx, int64_t size) {
  tpuc_hlo_type gt = e_type(e, g), it = e_type(e, idx);
  if (e->st != NULL) return -1;
  int64_t n = it.dims[0], id[2] = {n, 1};
  V i2 = e_reshape(e, idx, id, 2), zero = -1, out = -1;
  tpuc_hlo_type zt = gt;
  zt.dims[dim] = size;
  if (e->st == NULL) e->st = op_const(e->c, gt.dtype, 0.0, &zt, &zero);
  int64_t win[TPUC_MAX_RANK], d64 = dim;
  size_t nw = 0;
  for (int d = 0; d < gt.rank; d++)
    if (d != dim) win[nw++] = d;
  tpuc_hlo_scatter_dims s;
  memset(&s, 0, sizeof s);
  s.update_window_dims = win;
  s.num_update_window_dims = nw;
  s.inserted_window_dims = &d64;
  s.num_inserted_window_dims = 1;
  s.scatter_dims_to_operand_dims = &d64;
  s.num_scatter_dims_to_operand_dims = 1;
  s.index_vector_dim = 1;
  tpuc_hlo_fn* body = NULL;
  if (e->st == NULL)
    e->st = tpuc_hlo_region_binary(e->c->module, gt.dtype, TPUC_HLO_ADD, &body);
  if (e->st == NULL)
    e->st = tpuc_hlo_scatter(e->c->fn, &zero, 1, i2, &g, &s, body, &out);
  return out;
}

/* A constant s64 vector. */
static V e_index_const(em* e, const int64_t* data, int64_t n) {
  V out = -1;
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_S64, &n, 1);
  if (e->st == NULL)
    e->st = tpuc_hlo_constant(e->c->fn, &t, data, sizeof(int64_t) * (size_t)n,
                              &out);
  return out;
}

/* A constant f64 vector converted to `dt`. */
static V e_vec_const(em* e, const double* data, int64_t n, tpuc_dtype dt) {
  V out = -1;
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_F64, &n, 1);
  if (e->st == NULL)
    e->st =
        tpuc_hlo_constant(e->c->fn, &t, data, sizeof(double) * (size_t)n, &out);
  return e_cvt(e, out, dt);
}

/* Iota of `type` along `dim`. */
/* ---------------------------------------------------------------------- */
/* Batch norm: the channel dim is 1, statistics are over every other dim.
 * Formulas follow the CPU kernels (batch_norm_cpu_*): y = x * alpha +
 * beta with alpha = invstd * weight and beta = bias - mean * alpha; the
 * running variance is updated with the unbiased batch variance. */

/* Parameter dtype of batch / group norm: the input's, or f32 for a half
 * input with f32 parameters (PyTorch's mixed type), over the defined
 * arguments among `params`. UNIMPLEMENTED (the CPU explains) for a
 * non-float or empty input, or parameters of other dtypes. */
static tpuc_status* bn_param_dtype(const op_ctx* c, int in, const int* params,
                                   size_t np, tpuc_dtype* out) {
  if (!op_is_tensor(c, in)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* t = &c->types[in];
  if (!is_float(t->dtype) || t->rank < 2 || t->dims[1] == 0 ||
      tpuc_hlo_type_num_elements(t) == 0)
    return op_unimpl("batch_norm: unusual input (CPU says why)");
  bool half = t->dtype == TPUC_DTYPE_F16 || t->dtype == TPUC_DTYPE_BF16;
  bool mixed = false;
  for (size_t k = 0; k < np; k++) {
    if (op_is_none(c, params[k])) continue;
    if (!op_is_tensor(c, params[k])) return op_unimpl("unexpected arguments");
    if (half && c->types[params[k]].dtype == TPUC_DTYPE_F32) mixed = true;
  }
  *out = mixed ? TPUC_DTYPE_F32 : t->dtype;
  for (size_t k = 0; k < np; k++)
    if (!op_is_none(c, params[k]) && c->types[params[k]].dtype != *out)
      return op_unimpl("batch_norm: parameter dtypes (CPU says why)");
  return NULL;
}

/* Argument i is a tensor of shape [n]. */
static bool is_vec(const op_ctx* c, int i, int64_t n) {
  return op_is_tensor(c, i) && c->types[i].rank == 1 &&
         c->types[i].dims[0] == n;
}

/* A per-channel [C] value broadcast to the emitter's (input) shape. */
static V bn_bcast(em* e, V v) {
  int64_t one = 1;
  return e_bcast(e, v, e->shape.dims, e->shape.rank, &one);
}

/* Argument i converted to the emitter's dtype ([C] stats), or `dflt`
 * when it is None. */
static V bn_vec(em* e, int i, double dflt) {
  if (op_is_none(e->c, i)) return e_k(e, dflt);
  return e_cvt(e, e->c->vals[i], e->shape.dtype);
}

/* The reduction dims of batch norm (all but 1); returns their count. */
static size_t bn_dims(int rank, int64_t* dims) {
  size_t n = 0;
  for (int d = 0; d < rank; d++)
    if (d != 1) dims[n++] = d;
  return n;
}

enum { BN_LEGIT = 0, BN_NO_STATS, BN_NO_TRAINING, BN_WITH_UPDATE };

/* _native_batch_norm_legit(input, weight, bias, running_mean, running_var,
 * training, momentum, eps), its .no_stats form (no running stats;
 * training at 3) and _native_batch_norm_legit_no_training(input, weight,
 * bias, running_mean, running_var, momentum, eps) -> (out, save_mean,
 * save_invstd); save_mean / save_invstd are empty when not training.
 * _native_batch_norm_legit writes its running stats: results 3 and 4 are
 * their new values (unchanged when not training). */
static tpuc_status* lower_batch_norm(op_ctx* c, int form) {
  int rm = form == BN_NO_STATS ? -1 : 3, rv = rm < 0 ? -1 : 4;
  int ti = form == BN_LEGIT ? 5 : form == BN_NO_STATS ? 3 : -1;
  int mi = form == BN_LEGIT ? 6 : form == BN_NO_STATS ? 4 : 5, ei = mi + 1;
  bool training = form == BN_WITH_UPDATE;
  if (ti >= 0) {
    if (c->args[ti].kind != TPUC_OP_ARG_BOOL)
      return op_unimpl("unexpected arguments");
    training = c->args[ti].i != 0;
  }
  /* (.no_stats in eval mode crashes the CPU kernel; let it decide) */
  if (!training && rm < 0)
    return op_unimpl("batch_norm: eval without running stats (CPU)");
  int params[4] = {1, 2, rm, rv};
  size_t np = rm < 0 ? 2 : 4;
  tpuc_dtype pt;
  TRY(bn_param_dtype(c, 0, params, np, &pt));
  const tpuc_hlo_type* t = &c->types[0];
  int64_t C = t->dims[1];
  for (size_t k = 0; k < np; k++) {
    int i = params[k];
    if ((k >= 2 || !op_is_none(c, i)) && !is_vec(c, i, C))
      return op_unimpl("batch_norm: parameter shapes (CPU says why)");
  }
  if (!op_is_value(c, mi) || !op_is_value(c, ei))
    return op_unimpl("unexpected arguments");
  tpuc_dtype dt = t->dtype, acc = op_accumulation_dtype(dt);
  /* the dtype the CPU keeps batch statistics in */
  tpuc_dtype st = pt == TPUC_DTYPE_F16 ? TPUC_DTYPE_F32 : pt;
  int64_t red[TPUC_MAX_RANK];
  size_t nr = bn_dims(t->rank, red);
  double n = (double)(tpuc_hlo_type_num_elements(t) / C);
  em e = em_make(c, acc, t);
  em s = em_make(c, acc, &(tpuc_hlo_type){acc, 1, {C}});
  V x = e_cvt(&e, c->vals[0], acc);
  V mean, invstd, var_sum = -1;
  if (training) {
    mean = e_div(&s, e_sum(&e, x, red, nr), e_k(&s, n));
    V xc = e_sub(&e, x, bn_bcast(&e, mean));
    var_sum = e_sum(&e, e_mul(&e, xc, xc), red, nr);
    /* the CPU keeps mean and var_sum in the parameter dtype (but f32 for
     * f16) and derives the rest from those; var_sum / n divides in that
     * dtype too */
    mean = e_cvt(&s, e_cvt(&s, mean, st), acc);
    var_sum = e_cvt(&s, e_cvt(&s, var_sum, st), acc);
    V var = e_cvt(&s, e_cvt(&s, e_div(&s, var_sum, e_k(&s, n)), st), acc);
    invstd = e_div(&s, e_k(&s, 1.0),
                   e_un(&s, TPUC_HLO_SQRT, e_add(&s, var, e_scal(&s, ei))));
  } else {
    mean = bn_vec(&s, rm, 0.0);
    invstd = e_div(&s, e_k(&s, 1.0),
                   e_un(&s, TPUC_HLO_SQRT,
                        e_add(&s, bn_vec(&s, rv, 0.0), e_scal(&s, ei))));
  }
  /* training normalizes with save_mean and save_invstd as stored
   * (parameter dtype) */
  if (training) invstd = e_cvt(&s, e_cvt(&s, invstd, pt), acc);
  V alpha = e_mul(&s, invstd, bn_vec(&s, 1, 1.0));
  V mean_p = training ? e_cvt(&s, e_cvt(&s, mean, pt), acc) : mean;
  V beta = e_sub(&s, bn_vec(&s, 2, 0.0), e_mul(&s, mean_p, alpha));
  V y = e_add(&e, e_mul(&e, x, bn_bcast(&e, alpha)), bn_bcast(&e, beta));
  c->outs[0] = e_cvt(&e, y, dt);
  if (training) {
    c->outs[1] = e_cvt(&s, mean, pt);
    c->outs[2] = e_cvt(&s, invstd, pt);
  } else {
    tpuc_hlo_type empty = tpuc_hlo_type_make(pt, (int64_t[]){0}, 1);
    if (e.st == NULL) e.st = op_const(c, pt, 0.0, &empty, &c->outs[1]);
    if (e.st == NULL) e.st = op_const(c, pt, 0.0, &empty, &c->outs[2]);
  }
  c->nouts = 3;
  if (form == BN_LEGIT || form == BN_WITH_UPDATE) {
    if (training) {
      /* running = momentum * batch + (1 - momentum) * running, each
       * operation in the statistics dtype (momentum too) but for momentum
       * times the unbiased variance, in f32 or wider, as the CPU */
#define RP(v) e_cvt(&s, e_cvt(&s, (v), st), acc)
      V m = RP(e_scal(&s, mi)), keep = RP(e_sub(&s, e_k(&s, 1.0), m));
      V unbiased = RP(e_div(&s, var_sum, e_k(&s, n - 1.0)));
      c->outs[3] = e_add(&s, RP(e_mul(&s, m, mean)),
                         RP(e_mul(&s, keep, bn_vec(&s, rm, 0.0))));
      c->outs[4] = e_add(&s, e_mul(&s, m, unbiased),
                         RP(e_mul(&s, keep, bn_vec(&s, rv, 0.0))));
#undef RP
    } else {
      c->outs[3] = c->vals[rm];
      c->outs[4] = c->vals[rv];
    }
    c->nouts = 5;
  }
  if (form == BN_WITH_UPDATE) {
    /* (out, save_mean, save_invstd, reserve: an empty byte tensor), then
     * the running stats written in place */
    c->outs[5] = c->outs[4];
    c->outs[4] = c->outs[3];
    tpuc_hlo_type empty = tpuc_hlo_type_make(TPUC_DTYPE_U8, (int64_t[]){0}, 1);
    if (e.st == NULL)
      e.st = op_const(c, TPUC_DTYPE_U8, 0.0, &empty, &c->outs[3]);
    c->nouts = 6;
  }
  e_join(&e, &s);
  return e.st;
}

/* native_batch_norm_backward(grad_out, input, weight, running_mean,
 * running_var, save_mean, save_invstd, train, eps, output_mask) ->
 * (grad_input, grad_weight, grad_bias); masked-out results are
 * undefined. Training uses the saved batch statistics, eval the running
 * ones. */
static tpuc_status* lower_batch_norm_bw(op_ctx* c, int param) {
  (void)param;
  bool mask[3];
  if (c->args[7].kind != TPUC_OP_ARG_BOOL || !mask3(c, 9, mask) ||
      !op_is_value(c, 8) || !op_is_tensor(c, 0))
    return op_unimpl("unexpected arguments");
  bool train = c->args[7].i != 0;
  int params[5] = {2, 3, 4, 5, 6};
  tpuc_dtype pt;
  TRY(bn_param_dtype(c, 1, params, 5, &pt));
  const tpuc_hlo_type* t = &c->types[1];
  int64_t C = t->dims[1];
  int mi = train ? 5 : 3, vi = train ? 6 : 4;
  if (!tpuc_hlo_type_equal(&c->types[0], t) || !is_vec(c, mi, C) ||
      !is_vec(c, vi, C) || (!op_is_none(c, 2) && !is_vec(c, 2, C)))
    return op_unimpl("batch_norm backward: unusual arguments (CPU)");
  tpuc_dtype dt = t->dtype, acc = op_accumulation_dtype(dt);
  int64_t red[TPUC_MAX_RANK];
  size_t nr = bn_dims(t->rank, red);
  double n = (double)(tpuc_hlo_type_num_elements(t) / C);
  em e = em_make(c, acc, t);
  em s = em_make(c, acc, &(tpuc_hlo_type){acc, 1, {C}});
  V g = e_cvt(&e, c->vals[0], acc), x = e_cvt(&e, c->vals[1], acc);
  V mean = bn_vec(&s, mi, 0.0), invstd = bn_vec(&s, vi, 0.0);
  if (!train)
    invstd = e_div(&s, e_k(&s, 1.0),
                   e_un(&s, TPUC_HLO_SQRT, e_add(&s, invstd, e_scal(&s, 8))));
  V sum = e_sum(&e, g, red, nr);
  V xc = e_sub(&e, x, bn_bcast(&e, mean));
  V dotp = e_sum(&e, e_mul(&e, xc, g), red, nr);
  V w = bn_vec(&s, 2, 1.0);
  c->outs[0] = c->outs[1] = c->outs[2] = -1;
  if (mask[0]) {
    V scale = bn_bcast(&e, e_mul(&s, invstd, w)), dx;
    if (train) {
      V k = e_div(&s, e_mul(&s, e_mul(&s, dotp, invstd), invstd), e_k(&s, n));
      V gm = e_div(&s, sum, e_k(&s, n));
      dx = e_sub(&e, e_sub(&e, g, bn_bcast(&e, gm)),
                 e_mul(&e, xc, bn_bcast(&e, k)));
      dx = e_mul(&e, dx, scale);
    } else {
      dx = e_mul(&e, g, scale);
    }
    c->outs[0] = e_cvt(&e, dx, dt);
  }
  if (mask[1]) c->outs[1] = e_cvt(&s, e_mul(&s, dotp, invstd), pt);
  if (mask[2]) c->outs[2] = e_cvt(&s, sum, pt);
  c->nouts = 3;
  e_join(&e, &s);
  return e.st;
}

/* ---------------------------------------------------------------------- */
/* Group norm: input [N, C, *] seen as [N, G, C/G * HxW] for statistics.
 * Formulas follow the CPU kernels (GroupNormKernel.cpp). */

/* Checks the static N, C, HxW, group arguments (at o .. o + 3) against
 * the input (argument `in`). */
static tpuc_status* gn_check(const op_ctx* c, int in, int o, int64_t* N,
                             int64_t* C, int64_t* HW, int64_t* G) {
  for (int k = 0; k < 4; k++)
    if (c->args[o + k].kind != TPUC_OP_ARG_INT)
      return op_unimpl("unexpected arguments");
  *N = c->args[o].i;
  *C = c->args[o + 1].i;
  *HW = c->args[o + 2].i;
  *G = c->args[o + 3].i;
  const tpuc_hlo_type* t = &c->types[in];
  if (*N <= 0 || *C <= 0 || *HW <= 0 || *G <= 0 || *C % *G != 0 ||
      t->dims[0] != *N || t->dims[1] != *C ||
      tpuc_hlo_type_num_elements(t) != *N * *C * *HW)
    return op_unimpl("group_norm: unusual arguments (CPU says why)");
  return NULL;
}

/* A [N, G] value as [N, C, HW] (each group's value over its channels). */
static V gn_expand(em* e, V v, int64_t N, int64_t C, int64_t HW, int64_t G) {
  int64_t d3[3] = {N, G, C / G}, m2[2] = {0, 1}, nc[2] = {N, C};
  V r = e_reshape(e, e_bcast(e, v, d3, 3, m2), nc, 2);
  int64_t full[3] = {N, C, HW};
  return e_bcast(e, r, full, 3, m2);
}

/* A [C] parameter as [N, C, HW] (or 1 when None). */
static V gn_param(em* e, int i, int64_t N, int64_t C, int64_t HW, double d) {
  int64_t full[3] = {N, C, HW}, one = 1;
  if (op_is_none(e->c, i)) return e_k(e, d);
  V p = e_reshape(e, e_cvt(e, e->c->vals[i], e->shape.dtype), &C, 1);
  return e_bcast(e, p, full, 3, &one);
}

/* native_group_norm(input, weight, bias, N, C, HxW, group, eps) ->
 * (out, mean [N, G], rstd [N, G]). */
static tpuc_status* lower_group_norm(op_ctx* c, int param) {
  (void)param;
  int params[2] = {1, 2};
  tpuc_dtype pt;
  TRY(bn_param_dtype(c, 0, params, 2, &pt));
  int64_t N, C, HW, G;
  TRY(gn_check(c, 0, 3, &N, &C, &HW, &G));
  for (int k = 0; k < 2; k++)
    if (!op_is_none(c, params[k]) && !is_vec(c, params[k], C))
      return op_unimpl("group_norm: parameter shapes (CPU says why)");
  if (!op_is_value(c, 7)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* t = &c->types[0];
  tpuc_dtype dt = t->dtype, acc = op_accumulation_dtype(dt);
  int64_t D = C / G * HW, gd[3] = {N, G, D}, full[3] = {N, C, HW};
  int64_t two = 2, m2[2] = {0, 1};
  em e = em_make(c, acc, &(tpuc_hlo_type){acc, 3, {N, C, HW}});
  em eg = em_make(c, acc, &(tpuc_hlo_type){acc, 3, {N, G, D}});
  em s = em_make(c, acc, &(tpuc_hlo_type){acc, 2, {N, G}});
  V x = e_cvt(&e, c->vals[0], acc);
  V xg = e_reshape(&eg, x, gd, 3);
  V mean = e_div(&s, e_sum(&eg, xg, &two, 1), e_k(&s, (double)D));
  V xc = e_sub(&eg, xg, e_bcast(&eg, mean, gd, 3, m2));
  V var =
      e_div(&s, e_sum(&eg, e_mul(&eg, xc, xc), &two, 1), e_k(&s, (double)D));
  V rstd = e_div(&s, e_k(&s, 1.0),
                 e_un(&s, TPUC_HLO_SQRT,
                      e_add(&s, e_max(&s, var, e_k(&s, 0.0)), e_scal(&s, 7))));
  V a = e_mul(&e, gn_expand(&e, rstd, N, C, HW, G),
              gn_param(&e, 1, N, C, HW, 1.0));
  V b = e_sub(&e, gn_param(&e, 2, N, C, HW, 0.0),
              e_mul(&e, gn_expand(&e, mean, N, C, HW, G), a));
  V y = e_add(&e, e_mul(&e, e_reshape(&e, x, full, 3), a), b);
  c->outs[0] = e_reshape(&e, e_cvt(&e, y, dt), t->dims, t->rank);
  c->outs[1] = e_cvt(&s, mean, pt);
  c->outs[2] = e_cvt(&s, rstd, pt);
  c->nouts = 3;
  e_join(&e, &eg);
  e_join(&e, &s);
  return e.st;
}

/* native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C,
 * HxW, group, output_mask) -> (grad_input, grad_weight, grad_bias). */
static tpuc_status* lower_group_norm_bw(op_ctx* c, int param) {
  (void)param;
  bool mask[3];
  if (!mask3(c, 9, mask) || !op_is_tensor(c, 0))
    return op_unimpl("unexpected arguments");
  int params[3] = {2, 3, 4};
  tpuc_dtype pt;
  TRY(bn_param_dtype(c, 1, params, 3, &pt));
  int64_t N, C, HW, G;
  TRY(gn_check(c, 1, 5, &N, &C, &HW, &G));
  const tpuc_hlo_type* t = &c->types[1];
  /* (the CPU fails on weight-less grad_weight / grad_bias: it says how) */
  if ((op_is_none(c, 4) && (mask[1] || mask[2])) ||
      (!op_is_none(c, 4) && !is_vec(c, 4, C)) ||
      !tpuc_hlo_type_equal(&c->types[0], t) ||
      tpuc_hlo_type_num_elements(&c->types[2]) != N * G ||
      tpuc_hlo_type_num_elements(&c->types[3]) != N * G)
    return op_unimpl("group_norm backward: unusual arguments (CPU)");
  tpuc_dtype dt = t->dtype, acc = op_accumulation_dtype(dt);
  int64_t full[3] = {N, C, HW}, ng[2] = {N, G}, ngc[3] = {N, G, C / G};
  int64_t two = 2, zero = 0, m2[2] = {0, 1};
  double s = 1.0 / (double)(C / G * HW);
  em e = em_make(c, acc, &(tpuc_hlo_type){acc, 3, {N, C, HW}});
  em ec = em_make(c, acc, &(tpuc_hlo_type){acc, 3, {N, G, C / G}});
  em eg = em_make(c, acc, &(tpuc_hlo_type){acc, 2, {N, G}});
  V dy = e_reshape(&e, e_cvt(&e, c->vals[0], acc), full, 3);
  V x = e_reshape(&e, e_cvt(&e, c->vals[1], acc), full, 3);
  V mean = e_reshape(&eg, e_cvt(&eg, c->vals[2], acc), ng, 2);
  V rstd = e_reshape(&eg, e_cvt(&eg, c->vals[3], acc), ng, 2);
  /* per (n, c): ds = sum dy * x, db = sum dy */
  V ds = e_sum(&e, e_mul(&e, dy, x), &two, 1);
  V db = e_sum(&e, dy, &two, 1);
  c->outs[0] = c->outs[1] = c->outs[2] = -1;
  if (mask[0]) {
    V gamma = op_is_none(c, 4) ? -1 : e_cvt(&e, c->vals[4], acc);
    int64_t one = 1, nc[2] = {N, C};
    V dsg = ds, dbg = db;
    if (gamma >= 0) {
      V g2 = e_bcast(&e, gamma, nc, 2, &one);
      dsg = e_mul(&e, ds, g2);
      dbg = e_mul(&e, db, g2);
    }
    /* per (n, g): ds_g, db_g summed over the group's channels */
    V dsn = e_sum(&ec, e_reshape(&ec, dsg, ngc, 3), &two, 1);
    V dbn = e_sum(&ec, e_reshape(&ec, dbg, ngc, 3), &two, 1);
    V r3 = e_mul(&eg, e_mul(&eg, rstd, rstd), rstd);
    V c2 = e_mul(&eg, e_mul(&eg, e_sub(&eg, e_mul(&eg, dbn, mean), dsn), r3),
                 e_k(&eg, s));
    V c3 = e_sub(&eg, e_neg(&eg, e_mul(&eg, c2, mean)),
                 e_mul(&eg, e_mul(&eg, dbn, rstd), e_k(&eg, s)));
    V c1 = gn_expand(&e, rstd, N, C, HW, G);
    if (gamma >= 0) c1 = e_mul(&e, c1, gn_param(&e, 4, N, C, HW, 1.0));
    V dx = e_add(&e,
                 e_add(&e, e_mul(&e, c1, dy),
                       e_mul(&e, gn_expand(&e, c2, N, C, HW, G), x)),
                 gn_expand(&e, c3, N, C, HW, G));
    c->outs[0] = e_reshape(&e, e_cvt(&e, dx, dt), t->dims, t->rank);
  }
  if (mask[1]) {
    /* sum_n (ds - db * mean) * rstd, mean and rstd per channel's group */
    int64_t nc[2] = {N, C};
    V m = e_reshape(&e, e_bcast(&e, mean, ngc, 3, m2), nc, 2);
    V r = e_reshape(&e, e_bcast(&e, rstd, ngc, 3, m2), nc, 2);
    V dg = e_sum(&e, e_mul(&e, e_sub(&e, ds, e_mul(&e, db, m)), r), &zero, 1);
    c->outs[1] = e_cvt(&e, dg, pt);
  }
  if (mask[2]) c->outs[2] = e_cvt(&e, e_sum(&e, db, &zero, 1), pt);
  c->nouts = 3;
  e_join(&e, &ec);
  e_join(&e, &eg);
  return e.st;
}

/* ---------------------------------------------------------------------- */
/* 2-d and 3-d pooling over the last ns dims of an input [C, spatial...]
 * or [N, C, spatial...] (the 1-d forms reach the device as 2-d ones). */

typedef struct pool2d {
  int rank, ns;
  int64_t k[3], s[3], p[3], d[3];
  int64_t in[3], out[3];
  bool ceil;
} pool2d;

/* An int[ns] pooling argument, one value meaning all dims; `dflt` when
 * empty (stride's default is the kernel). */
static bool pool_pair(const op_ctx* c, int i, int ns, const int64_t* dflt,
                      int64_t* out) {
  const tpuc_op_arg* a = &c->args[i];
  if (a->kind != TPUC_OP_ARG_INT_LIST) return false;
  if (a->list_len == 0 && dflt != NULL) {
    for (int k = 0; k < ns; k++) out[k] = dflt[k];
  } else if (a->list_len == 1 || (int)a->list_len == ns) {
    for (int k = 0; k < ns; k++) out[k] = a->list[a->list_len == 1 ? 0 : k];
  } else {
    return false;
  }
  return true;
}

/* floor(a / b) for b > 0. */
static int64_t div_floor(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* Parses the pooling arguments of `ns` spatial dims: input xi, kernel
 * ki, stride si, padding pi, dilation di (-1: none, avg_pool) and
 * ceil_mode ci, with the CPU's checks (UNIMPLEMENTED: the CPU then says
 * what is wrong) and output sizes. */
static tpuc_status* pool_parse(const op_ctx* c, int ns, int xi, int ki, int si,
                               int pi, int di, int ci, pool2d* p) {
  p->ns = ns;
  if (!op_is_tensor(c, xi) || c->args[ci].kind != TPUC_OP_ARG_BOOL ||
      !pool_pair(c, ki, ns, NULL, p->k) || !pool_pair(c, si, ns, p->k, p->s) ||
      !pool_pair(c, pi, ns, NULL, p->p))
    return op_unimpl("pooling: unusual arguments (CPU says why)");
  p->d[0] = p->d[1] = p->d[2] = 1;
  if (di >= 0 && !pool_pair(c, di, ns, NULL, p->d))
    return op_unimpl("pooling: unusual dilation (CPU says why)");
  p->ceil = c->args[ci].i != 0;
  const tpuc_hlo_type* t = &c->types[xi];
  p->rank = t->rank;
  if (t->rank != ns + 1 && t->rank != ns + 2)
    return op_unimpl("pooling: unusual rank (CPU says why)");
  for (int d = 0; d < t->rank; d++)
    if (t->dims[d] == 0) return op_unimpl("empty pooling: CPU");
  for (int i = 0; i < ns; i++) {
    int64_t k = p->k[i], s = p->s[i], pad = p->p[i], dil = p->d[i];
    if (k <= 0 || s <= 0 || dil <= 0 || pad < 0 ||
        pad > (di >= 0 ? ((k - 1) * dil + 1) / 2 : k / 2))
      return op_unimpl("pooling: bad window (CPU says why)");
    int64_t in = t->dims[t->rank - ns + i];
    int64_t span = dil * (k - 1) + 1;
    int64_t out = div_floor(in + 2 * pad - span + (p->ceil ? s - 1 : 0), s) + 1;
    if (p->ceil && (out - 1) * s >= in + pad) out--;
    if (out < 1) return op_unimpl("pooling: output too small (CPU says why)");
    p->in[i] = in;
    p->out[i] = out;
  }
  return NULL;
}

/* The window of reduce_window over the whole input (rank dims) for a
 * pooling: arrays to fill, of rank entries (padding: 2 * rank). */
static void pool_window(const pool2d* p, int64_t* dims, int64_t* strides,
                        int64_t* dil, int64_t* pads, tpuc_hlo_window* w) {
  for (int d = 0; d < p->rank; d++) {
    dims[d] = strides[d] = dil[d] = 1;
    pads[2 * d] = pads[2 * d + 1] = 0;
  }
  for (int i = 0; i < p->ns; i++) {
    int d = p->rank - p->ns + i;
    dims[d] = p->k[i];
    strides[d] = p->s[i];
    dil[d] = p->d[i];
    pads[2 * d] = p->p[i];
    /* enough high padding for the last window (ceil_mode may need more
     * than the padding; the output size is the same with less) */
    int64_t hi = (p->out[i] - 1) * p->s[i] + p->d[i] * (p->k[i] - 1) + 1 -
                 p->in[i] - p->p[i];
    pads[2 * d + 1] = hi > 0 ? hi : 0;
  }
  memset(w, 0, sizeof *w);
  w->dims = dims;
  w->strides = strides;
  w->window_dilations = dil;
  w->padding = pads;
}

/* The pooling output shape of an input type. */
static tpuc_hlo_type pool_out_type(const pool2d* p, const tpuc_hlo_type* t,
                                   tpuc_dtype dt) {
  tpuc_hlo_type o = *t;
  o.dtype = dt;
  for (int i = 0; i < p->ns; i++) o.dims[p->rank - p->ns + i] = p->out[i];
  return o;
}

/* Lowest value of an ordered dtype (-inf for floats), as a double; false
 * for dtypes max_pool does not take here. */
static bool lowest_value(tpuc_dtype dt, double* v) {
  switch (dt) {
    case TPUC_DTYPE_F16:
    case TPUC_DTYPE_BF16:
    case TPUC_DTYPE_F32:
    case TPUC_DTYPE_F64:
      *v = -INFINITY;
      return true;
    case TPUC_DTYPE_S8:
      *v = -128.0;
      return true;
    case TPUC_DTYPE_S16:
      *v = -32768.0;
      return true;
    case TPUC_DTYPE_S32:
      *v = -2147483648.0;
      return true;
    case TPUC_DTYPE_S64:
      *v = -9223372036854775808.0;
      return true;
    case TPUC_DTYPE_U8:
      *v = 0.0;
      return true;
    default:
      return false;
  }
}

/* The reduce_window body of max pooling over (value, index) pairs: the
 * CPU scans a window in index order and keeps the first maximum, or the
 * last NaN; as an order-free choice, a beats b when it is larger, or
 * equal with a smaller index, or NaN over a number, or both NaN with a
 * larger index. */
static tpuc_status* max_index_body(tpuc_hlo_module* m, tpuc_dtype dt,
                                   tpuc_hlo_fn** out) {
  tpuc_hlo_type ts[4] = {
      tpuc_hlo_type_scalar(dt), tpuc_hlo_type_scalar(TPUC_DTYPE_S64),
      tpuc_hlo_type_scalar(dt), tpuc_hlo_type_scalar(TPUC_DTYPE_S64)};
  tpuc_hlo_fn* f = NULL;
  TRY(tpuc_hlo_region_create(m, ts, 4, &f));
  V a, ai, b, bi;
  TRY(tpuc_hlo_get_arg(f, 0, &a));
  TRY(tpuc_hlo_get_arg(f, 1, &ai));
  TRY(tpuc_hlo_get_arg(f, 2, &b));
  TRY(tpuc_hlo_get_arg(f, 3, &bi));
  V gt, eq, ilt, igt, an, bn, nb, t, win;
  TRY(tpuc_hlo_compare(f, TPUC_HLO_GT, a, b, &gt));
  TRY(tpuc_hlo_compare(f, TPUC_HLO_EQ, a, b, &eq));
  TRY(tpuc_hlo_compare(f, TPUC_HLO_LT, ai, bi, &ilt));
  TRY(tpuc_hlo_compare(f, TPUC_HLO_GT, ai, bi, &igt));
  TRY(tpuc_hlo_binary(f, TPUC_HLO_AND, eq, ilt, &t));
  TRY(tpuc_hlo_binary(f, TPUC_HLO_OR, gt, t, &win));
  if (is_float(dt)) {
    TRY(tpuc_hlo_compare(f, TPUC_HLO_NE, a, a, &an));
    TRY(tpuc_hlo_compare(f, TPUC_HLO_NE, b, b, &bn));
    TRY(tpuc_hlo_unary(f, TPUC_HLO_NOT, bn, &nb));
    TRY(tpuc_hlo_binary(f, TPUC_HLO_AND, an, nb, &t));
    TRY(tpuc_hlo_binary(f, TPUC_HLO_OR, win, t, &win));
    TRY(tpuc_hlo_binary(f, TPUC_HLO_AND, an, bn, &t));
    TRY(tpuc_hlo_binary(f, TPUC_HLO_AND, t, igt, &t));
    TRY(tpuc_hlo_binary(f, TPUC_HLO_OR, win, t, &win));
  }
  V r[2];
  TRY(tpuc_hlo_select(f, win, a, b, &r[0]));
  TRY(tpuc_hlo_select(f, win, ai, bi, &r[1]));
  TRY(tpuc_hlo_return(f, r, 2));
  *out = f;
  return NULL;
}

/* Flat index (d * H + h) * W + w of every element of `t` within its
 * plane of the last ns dims (s64). */
static V plane_index(em* e, const tpuc_hlo_type* t, int ns) {
  tpuc_hlo_type it = *t;
  it.dtype = TPUC_DTYPE_S64;
  em ei = em_make(e->c, TPUC_DTYPE_S64, &it);
  V r = e_iota(&ei, &it, t->rank - ns);
  for (int d = t->rank - ns + 1; d < t->rank; d++)
    r = e_add(&ei, e_mul(&ei, r, e_k(&ei, (double)t->dims[d])),
              e_iota(&ei, &it, d));
  e_join(e, &ei);
  return r;
}

/* max_pool{2,3}d_with_indices(self, kernel_size, stride, padding,
 * dilation, ceil_mode) -> (out, indices): a reduce_window over (value,
 * flat index) pairs, the padding never chosen (lowest value, largest
 * index). `ns`: spatial dims. */
static tpuc_status* lower_max_pool2d(op_ctx* c, int ns) {
  pool2d p;
  TRY(pool_parse(c, ns, 0, 1, 2, 3, 4, 5, &p));
  const tpuc_hlo_type* t = &c->types[0];
  tpuc_dtype dt = t->dtype;
  double lo;
  if (!lowest_value(dt, &lo)) return op_unimpl("max_pool2d: dtype (CPU)");
  em e = em_make(c, dt, t);
  V in[2] = {c->vals[0], plane_index(&e, t, ns)};
  V init[2] = {e_k0(&e, dt, lo), -1}, outs[2] = {-1, -1};
  if (e.st == NULL)
    e.st = tpuc_hlo_constant_i64(c->fn, TPUC_DTYPE_S64, INT64_MAX, &init[1]);
  tpuc_hlo_fn* body = NULL;
  if (e.st == NULL) e.st = max_index_body(c->module, dt, &body);
  int64_t wd[TPUC_MAX_RANK], ws[TPUC_MAX_RANK], wl[TPUC_MAX_RANK];
  int64_t wp[2 * TPUC_MAX_RANK];
  tpuc_hlo_window w;
  pool_window(&p, wd, ws, wl, wp, &w);
  if (e.st == NULL)
    e.st = tpuc_hlo_reduce_window(c->fn, in, init, 2, &w, body, outs);
  c->outs[0] = outs[0];
  c->outs[1] = outs[1];
  c->nouts = 2;
  return e.st;
}

/* The gradient of a max pooling: grad_output (argument 0) added at the
 * saved flat indices (argument ii, within the last ns dims) of each plane
 * of `self` (type t); invalid indices add nothing. */
static tpuc_status* max_scatter(op_ctx* c, int ii, const tpuc_hlo_type* t,
                                int ns) {
  const tpuc_hlo_type* gt = &c->types[0];
  int r = t->rank;
  tpuc_dtype dt = t->dtype, acc = op_accumulation_dtype(dt);
  int64_t HW = 1, OHW = 1;
  for (int d = r - ns; d < r; d++) {
    HW *= t->dims[d];
    OHW *= gt->dims[d];
  }
  int64_t P = tpuc_hlo_type_num_elements(t) / HW, M = P * OHW;
  tpuc_hlo_type it = tpuc_hlo_type_make(TPUC_DTYPE_S64, (int64_t[]){P, OHW}, 2);
  em ei = em_make(c, TPUC_DTYPE_S64, &it);
  V idx = e_reshape(&ei, c->vals[ii], it.dims, 2);
  V flat =
      e_add(&ei, e_mul(&ei, e_iota(&ei, &it, 0), e_k(&ei, (double)HW)), idx);
  V ok = e_and(&ei, e_cmp(&ei, TPUC_HLO_GE, idx, e_k(&ei, 0.0)),
               e_cmp(&ei, TPUC_HLO_LT, idx, e_k(&ei, (double)HW)));
  flat = e_reshape(&ei, e_sel(&ei, ok, flat, e_k(&ei, -1.0)), &M, 1);
  /* 3-d: the CPU adds half grads in the half dtype, in output order, as
   * a scatter's updates in order do */
  if (ns == 3) acc = dt;
  em e = em_make(c, acc, &(tpuc_hlo_type){acc, 1, {M}});
  V g = e_reshape(&e, e_cvt(&e, c->vals[0], acc), &M, 1);
  V gi = e_put_add(&e, g, 0, flat, P * HW);
  e_join(&e, &ei);
  c->outs[0] = e_reshape(&e, e_cvt(&e, gi, dt), t->dims, t->rank);
  c->nouts = 1;
  return e.st;
}

/* max_pool{2,3}d_with_indices_backward(grad_output, self, kernel_size,
 * stride, padding, dilation, ceil_mode, indices). */
static tpuc_status* lower_max_pool2d_bw(op_ctx* c, int ns) {
  pool2d p;
  TRY(pool_parse(c, ns, 1, 2, 3, 4, 5, 6, &p));
  const tpuc_hlo_type* t = &c->types[1];
  tpuc_hlo_type ot = pool_out_type(&p, t, t->dtype);
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 7) || !is_float(t->dtype) ||
      !tpuc_hlo_type_equal(&c->types[0], &ot) ||
      c->types[7].dtype != TPUC_DTYPE_S64 || !same_dims(&c->types[7], &ot))
    return op_unimpl("max_pool2d backward: unusual arguments (CPU)");
  return max_scatter(c, 7, t, ns);
}

/* avg_pool's divisors of one dim: per output position, the window's
 * element count (clipped to the padded input when count_include_pad,
 * to the input otherwise). */
static void avg_counts(const pool2d* p, int i, bool include_pad, double* out) {
  for (int64_t o = 0; o < p->out[i]; o++) {
    int64_t a = o * p->s[i] - p->p[i], b = a + p->k[i];
    if (b > p->in[i] + p->p[i]) b = p->in[i] + p->p[i];
    int64_t n = b - a;
    if (!include_pad) {
      if (a < 0) a = 0;
      if (b > p->in[i]) b = p->in[i];
      n = b - a;
    }
    out[o] = (double)n;
  }
}

/* The divisor of every avg_pool output (emitter shape: the output), from
 * count_include_pad (argument ci) and divisor_override (di). */
static tpuc_status* avg_divisor(em* e, const pool2d* p, int ci, int di,
                                V* out) {
  const op_ctx* c = e->c;
  if (c->args[ci].kind != TPUC_OP_ARG_BOOL ||
      (!op_is_none(c, di) && c->args[di].kind != TPUC_OP_ARG_INT))
    return op_unimpl("unexpected arguments");
  if (!op_is_none(c, di)) {
    if (c->args[di].i == 0)
      return op_unimpl("avg_pool2d: zero divisor (CPU says why)");
    *out = e_k(e, (double)c->args[di].i);
    return NULL;
  }
  V r = -1;
  for (int i = 0; i < p->ns; i++) {
    double* h = malloc(sizeof(double) * (size_t)p->out[i]);
    if (h == NULL) return tpuc_status_make(TPUC_INTERNAL, "out of memory");
    avg_counts(p, i, c->args[ci].i != 0, h);
    int64_t m = p->rank - p->ns + i;
    /* (the product of the counts is exact in every dtype taken here) */
    V v = e_bcast(e, e_vec_const(e, h, p->out[i], e->shape.dtype),
                  e->shape.dims, e->shape.rank, &m);
    free(h);
    r = i == 0 ? v : e_mul(e, r, v);
  }
  *out = r;
  return NULL;
}

/* avg_pool{2,3}d(self, kernel_size, stride, padding, ceil_mode,
 * count_include_pad, divisor_override): a zero-padded window sum over
 * the divisor (int64: summed and divided in int64, truncating, as the
 * CPU). */
static tpuc_status* lower_avg_pool2d(op_ctx* c, int ns) {
  pool2d p;
  TRY(pool_parse(c, ns, 0, 1, 2, 3, -1, 4, &p));
  const tpuc_hlo_type* t = &c->types[0];
  tpuc_dtype dt = t->dtype, acc = op_accumulation_dtype(dt);
  if (!is_float(dt) && dt != TPUC_DTYPE_S64)
    return op_unimpl("integer avg_pool: CPU");
  tpuc_hlo_type ot = pool_out_type(&p, t, acc);
  em e = em_make(c, acc, &ot);
  V div = -1;
  TRY(avg_divisor(&e, &p, 5, 6, &div));
  V x = e_cvt(&e, c->vals[0], acc), init = e_k0(&e, acc, 0.0), sum = -1;
  tpuc_hlo_fn* body = NULL;
  if (e.st == NULL)
    e.st = tpuc_hlo_region_binary(c->module, acc, TPUC_HLO_ADD, &body);
  int64_t wd[TPUC_MAX_RANK], ws[TPUC_MAX_RANK], wl[TPUC_MAX_RANK];
  int64_t wp[2 * TPUC_MAX_RANK];
  tpuc_hlo_window w;
  pool_window(&p, wd, ws, wl, wp, &w);
  if (e.st == NULL)
    e.st = tpuc_hlo_reduce_window(c->fn, &x, &init, 1, &w, body, &sum);
  c->outs[0] = e_cvt(&e, e_div(&e, sum, div), dt);
  c->nouts = 1;
  return e.st;
}

/* avg_pool{2,3}d_backward(grad_output, self, kernel_size, stride,
 * padding, ceil_mode, count_include_pad, divisor_override): each input
 * element gets grad / divisor of every window covering it: the grads
 * spread by the stride (interior padding), padded so that a stride-1
 * window sum of the kernel's size lands on the input positions. */
static tpuc_status* lower_avg_pool2d_bw(op_ctx* c, int ns) {
  pool2d p;
  TRY(pool_parse(c, ns, 1, 2, 3, 4, -1, 5, &p));
  const tpuc_hlo_type* t = &c->types[1];
  tpuc_dtype dt = t->dtype, acc = op_accumulation_dtype(dt);
  tpuc_hlo_type ot = pool_out_type(&p, t, dt);
  if (!is_float(dt) || !op_is_tensor(c, 0) ||
      !tpuc_hlo_type_equal(&c->types[0], &ot))
    return op_unimpl("avg_pool2d backward: unusual arguments (CPU)");
  ot.dtype = acc;
  em e = em_make(c, acc, &ot);
  V div = -1;
  TRY(avg_divisor(&e, &p, 6, 7, &div));
  /* grad / divisor in the input dtype, as the CPU's scalar_t division */
  V g =
      e_cvt(&e, e_cvt(&e, e_div(&e, e_cvt(&e, c->vals[0], acc), div), dt), acc);
  int64_t lo[TPUC_MAX_RANK] = {0}, hi[TPUC_MAX_RANK] = {0};
  int64_t in[TPUC_MAX_RANK] = {0}, wd[TPUC_MAX_RANK];
  for (int d = 0; d < p.rank; d++) wd[d] = 1;
  int64_t nk = 1;
  for (int i = 0; i < ns; i++) {
    int d = p.rank - ns + i;
    lo[d] = p.k[i] - 1 - p.p[i];
    hi[d] = p.in[i] - 1 - (p.out[i] - 1) * p.s[i] + p.p[i];
    in[d] = p.s[i] - 1;
    wd[d] = p.k[i];
    nk *= p.k[i];
  }
  V padded = -1, init = e_k0(&e, acc, 0.0), gi = -1;
  if (e.st == NULL) e.st = tpuc_hlo_pad(c->fn, g, init, lo, hi, in, &padded);
  if (nk <= 64) {
    /* The CPU adds each window's share into grad_input in output order,
     * rounding to the input dtype each time: the same sums, one window
     * offset at a time (offsets ascending here). */
    int64_t start[TPUC_MAX_RANK] = {0}, limit[TPUC_MAX_RANK];
    for (int d = 0; d < p.rank; d++) limit[d] = t->dims[d];
    for (int64_t o = 0; o < nk; o++) {
      int64_t rest = o;
      for (int i = ns - 1; i >= 0; i--) {
        int d = p.rank - ns + i;
        start[d] = rest % p.k[i];
        rest /= p.k[i];
        limit[d] = start[d] + p.in[i];
      }
      V part = -1;
      if (e.st == NULL)
        e.st = tpuc_hlo_slice(c->fn, padded, start, limit, NULL, &part);
      gi = gi < 0 ? part : e_cvt(&e, e_cvt(&e, e_add(&e, gi, part), dt), acc);
    }
    c->outs[0] = e_cvt(&e, gi, dt);
    c->nouts = 1;
    return e.st;
  }
  tpuc_hlo_fn* body = NULL;
  if (e.st == NULL)
    e.st = tpuc_hlo_region_binary(c->module, acc, TPUC_HLO_ADD, &body);
  tpuc_hlo_window w;
  memset(&w, 0, sizeof w);
  w.dims = wd;
  if (e.st == NULL)
    e.st = tpuc_hlo_reduce_window(c->fn, &padded, &init, 1, &w, body, &gi);
  c->outs[0] = e_cvt(&e, gi, dt);
  c->nouts = 1;
  return e.st;
}

/* Adaptive pooling windows of one dim: output o covers input
 * [floor(o * I / O), ceil((o + 1) * I / O)). */
static int64_t adaptive_start(int64_t o, int64_t I, int64_t O) {
  return o * I / O;
}
static int64_t adaptive_end(int64_t o, int64_t I, int64_t O) {
  return ((o + 1) * I + O - 1) / O;
}

/* The i1 [O, I] matrix of adaptive windows (row o: its window). */
static V adaptive_mask(em* e, int64_t O, int64_t I) {
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_S64, (int64_t[]){O, I}, 2);
  em ei = em_make(e->c, TPUC_DTYPE_S64, &t);
  V o = e_iota(&ei, &t, 0), i = e_iota(&ei, &t, 1);
  V start = e_div(&ei, e_mul(&ei, o, e_k(&ei, (double)I)), e_k(&ei, (double)O));
  V end = e_div(
      &ei,
      e_add(&ei, e_mul(&ei, e_add(&ei, o, e_k(&ei, 1.0)), e_k(&ei, (double)I)),
            e_k(&ei, (double)(O - 1))),
      e_k(&ei, (double)O));
  V r = e_and(&ei, e_cmp(&ei, TPUC_HLO_GE, i, start),
              e_cmp(&ei, TPUC_HLO_LT, i, end));
  e_join(e, &ei);
  return r;
}

/* x (compute dtype) with dim `dim` (size I) replaced by the sums over O
 * adaptive windows: a window reduce when I is a multiple of O, else a
 * masked sum over a [.., O, I, ..] broadcast. */
static V adaptive_sum(em* e, V x, int dim, int64_t O) {
  tpuc_hlo_type t = e_type(e, x);
  if (e->st != NULL) return -1;
  int64_t I = t.dims[dim];
  if (I % O == 0) {
    int64_t wd[TPUC_MAX_RANK];
    for (int d = 0; d < t.rank; d++) wd[d] = d == dim ? I / O : 1;
    tpuc_hlo_window w;
    memset(&w, 0, sizeof w);
    w.dims = wd;
    w.strides = wd;
    V init = e_k0(e, t.dtype, 0.0), out = -1;
    tpuc_hlo_fn* body = NULL;
    if (e->st == NULL)
      e->st =
          tpuc_hlo_region_binary(e->c->module, t.dtype, TPUC_HLO_ADD, &body);
    if (e->st == NULL)
      e->st = tpuc_hlo_reduce_window(e->c->fn, &x, &init, 1, &w, body, &out);
    return out;
  }
  int64_t bd[TPUC_MAX_RANK + 1], xm[TPUC_MAX_RANK], mm[2] = {dim, dim + 1};
  for (int d = 0, k = 0; d <= t.rank; d++) {
    bd[d] = d < dim ? t.dims[d] : d == dim ? O : t.dims[d - 1];
    if (d != dim) xm[k++] = d;
  }
  V xb = e_bcast(e, x, bd, t.rank + 1, xm);
  V m = e_bcast(e, adaptive_mask(e, O, I), bd, t.rank + 1, mm);
  tpuc_hlo_type bt = tpuc_hlo_type_make(t.dtype, bd, t.rank + 1);
  em eb = em_make(e->c, t.dtype, &bt);
  V r = e_sum(e, e_sel(&eb, m, xb, e_k(&eb, 0.0)), (int64_t[]){dim + 1}, 1);
  e_join(e, &eb);
  return r;
}

/* The transpose of adaptive_sum: g (dim of size O) spread to every input
 * position of each window (dim of size I). */
static V adaptive_spread(em* e, V g, int dim, int64_t I) {
  tpuc_hlo_type t = e_type(e, g);
  if (e->st != NULL) return -1;
  int64_t O = t.dims[dim];
  int64_t bd[TPUC_MAX_RANK + 1], gm[TPUC_MAX_RANK], mm[2] = {dim, dim + 1};
  for (int d = 0, k = 0; d <= t.rank; d++) {
    bd[d] = d <= dim ? t.dims[d] : d == dim + 1 ? I : t.dims[d - 1];
    if (d != dim + 1) gm[k++] = d;
  }
  if (I % O == 0) {
    /* [.., O, I/O, ..] flattened to [.., I, ..] */
    bd[dim + 1] = I / O;
    V b = e_bcast(e, g, bd, t.rank + 1, gm);
    tpuc_hlo_type rt = t;
    rt.dims[dim] = I;
    return e_reshape(e, b, rt.dims, rt.rank);
  }
  V gb = e_bcast(e, g, bd, t.rank + 1, gm);
  V m = e_bcast(e, adaptive_mask(e, O, I), bd, t.rank + 1, mm);
  tpuc_hlo_type bt = tpuc_hlo_type_make(t.dtype, bd, t.rank + 1);
  em eb = em_make(e->c, t.dtype, &bt);
  V r = e_sum(e, e_sel(&eb, m, gb, e_k(&eb, 0.0)), (int64_t[]){dim}, 1);
  e_join(e, &eb);
  return r;
}

/* The element counts of the adaptive windows (output shape, the
 * emitter's) of the last ns dims, input sizes `in`. */
static V adaptive_counts(em* e, const int64_t* in, int ns) {
  int r = e->shape.rank;
  V prod = -1;
  for (int i = 0; i < ns; i++) {
    int64_t O = e->shape.dims[r - ns + i], I = in[i];
    double* h = malloc(sizeof(double) * (size_t)O);
    if (h == NULL) {
      if (e->st == NULL)
        e->st = tpuc_status_make(TPUC_INTERNAL, "out of memory");
      return -1;
    }
    for (int64_t o = 0; o < O; o++)
      h[o] = (double)(adaptive_end(o, I, O) - adaptive_start(o, I, O));
    int64_t m = r - ns + i;
    V v =
        e_bcast(e, e_vec_const(e, h, O, e->shape.dtype), e->shape.dims, r, &m);
    free(h);
    prod = i == 0 ? v : e_mul(e, prod, v);
  }
  return prod;
}

static V along(em* e, V w, const tpuc_hlo_type* shape, int dim);

/* Half adaptive_avg_pool3d as the CPU's loop: in the half dtype, each
 * add and each division rounding. `cand` builds, per dim, up to K
 * candidate source indices per destination position (-1: none); the sum
 * over all candidate combinations runs in lexicographic order, which is
 * the CPU's order in both directions. */
typedef struct seq3 {
  int64_t K[3];
  int64_t* idx[3]; /* K[d] rows of n[d] entries */
} seq3;

static void seq3_free(seq3* q) {
  for (int d = 0; d < 3; d++) free(q->idx[d]);
}

/* x [.., I0, I1, I2] (compute f32, values of `dt`) summed into
 * [.., n0, n1, n2] over the candidates, rounding to dt after each add. */
static V seq3_sum(em* e, V x, const seq3* q, const int64_t* n, tpuc_dtype dt) {
  tpuc_hlo_type xt = e_type(e, x);
  if (e->st != NULL) return -1;
  int r = xt.rank;
  V acc = -1;
  for (int64_t a = 0; a < q->K[0]; a++)
    for (int64_t b = 0; b < q->K[1]; b++)
      for (int64_t k = 0; k < q->K[2]; k++) {
        int64_t sel[3] = {a, b, k};
        V v = x, ok = -1, mv[3];
        for (int d = 0; d < 3; d++) {
          const int64_t* row = q->idx[d] + sel[d] * n[d];
          int64_t* cl = malloc(sizeof(int64_t) * (size_t)n[d]);
          double* m = malloc(sizeof(double) * (size_t)n[d]);
          if (cl == NULL || m == NULL) {
            free(cl);
            free(m);
            if (e->st == NULL)
              e->st = tpuc_status_make(TPUC_INTERNAL, "out of memory");
            return -1;
          }
          for (int64_t i = 0; i < n[d]; i++) {
            cl[i] = row[i] < 0 ? 0 : row[i];
            m[i] = row[i] < 0 ? 0.0 : 1.0;
          }
          v = e_take(e, v, r - 3 + d, e_index_const(e, cl, n[d]));
          mv[d] = e_vec_const(e, m, n[d], TPUC_DTYPE_F32);
          free(cl);
          free(m);
        }
        tpuc_hlo_type vt = e_type(e, v);
        for (int d = 0; d < 3; d++) {
          V md = along(e, mv[d], &vt, r - 3 + d);
          ok = ok < 0 ? md : e_mul(e, ok, md);
        }
        em ev = em_make(e->c, TPUC_DTYPE_F32, &vt);
        v = e_sel(&ev, e_cmp(&ev, TPUC_HLO_GT, ok, e_k(&ev, 0.0)), v,
                  e_k(&ev, 0.0));
        e_join(e, &ev);
        acc = acc < 0
                  ? v
                  : e_cvt(e, e_cvt(e, e_add(e, acc, v), dt), TPUC_DTYPE_F32);
      }
  return acc;
}

/* Half 3-d adaptive average pooling, forward (x [.., I...] -> [.., O...])
 * or backward (g [.., O...] -> [.., I...]). */
static V adaptive_avg3_half(em* e, V x, const int64_t* I, const int64_t* O,
                            tpuc_dtype dt, bool backward) {
  seq3 q;
  memset(&q, 0, sizeof q);
  int64_t n[3];
  for (int d = 0; d < 3; d++) {
    int64_t K = 0;
    if (!backward) {
      for (int64_t o = 0; o < O[d]; o++) {
        int64_t w = adaptive_end(o, I[d], O[d]) - adaptive_start(o, I[d], O[d]);
        if (w > K) K = w;
      }
    } else {
      for (int64_t i = 0; i < I[d]; i++) {
        int64_t cnt = 0;
        for (int64_t o = 0; o < O[d]; o++)
          if (adaptive_start(o, I[d], O[d]) <= i &&
              i < adaptive_end(o, I[d], O[d]))
            cnt++;
        if (cnt > K) K = cnt;
      }
    }
    n[d] = backward ? I[d] : O[d];
    q.K[d] = K;
    q.idx[d] = malloc(sizeof(int64_t) * (size_t)(K * n[d]));
    if (q.idx[d] == NULL) {
      seq3_free(&q);
      if (e->st == NULL)
        e->st = tpuc_status_make(TPUC_INTERNAL, "out of memory");
      return -1;
    }
    for (int64_t j = 0; j < n[d]; j++) {
      int64_t cnt = 0;
      for (int64_t k = 0; k < K; k++) q.idx[d][k * n[d] + j] = -1;
      if (!backward) {
        int64_t s = adaptive_start(j, I[d], O[d]);
        int64_t t = adaptive_end(j, I[d], O[d]);
        for (int64_t i = s; i < t; i++) q.idx[d][(cnt++) * n[d] + j] = i;
      } else {
        for (int64_t o = 0; o < O[d]; o++)
          if (adaptive_start(o, I[d], O[d]) <= j &&
              j < adaptive_end(o, I[d], O[d]))
            q.idx[d][(cnt++) * n[d] + j] = o;
      }
    }
  }
  if (q.K[0] * q.K[1] * q.K[2] > 64) {
    seq3_free(&q);
    if (e->st == NULL) e->st = op_unimpl("half adaptive_avg_pool3d: large");
    return -1;
  }
  V r = -1;
  tpuc_hlo_type xt = e_type(e, x);
  if (e->st != NULL) {
    seq3_free(&q);
    return -1;
  }
  int rk = xt.rank;
  /* the window sizes per output position, per dim (f32 [O_d]) */
  V ks[3];
  for (int d = 0; d < 3; d++) {
    double* kv = malloc(sizeof(double) * (size_t)O[d]);
    if (kv == NULL) {
      seq3_free(&q);
      if (e->st == NULL)
        e->st = tpuc_status_make(TPUC_INTERNAL, "out of memory");
      return -1;
    }
    for (int64_t o = 0; o < O[d]; o++)
      kv[o] =
          (double)(adaptive_end(o, I[d], O[d]) - adaptive_start(o, I[d], O[d]));
    ks[d] = e_vec_const(e, kv, O[d], TPUC_DTYPE_F32);
    free(kv);
  }
  if (!backward) {
    r = seq3_sum(e, e_cvt(e, x, TPUC_DTYPE_F32), &q, n, dt);
    tpuc_hlo_type rt = e_type(e, r);
    for (int d = 0; d < 3; d++)
      r = e_cvt(e, e_cvt(e, e_div(e, r, along(e, ks[d], &rt, rk - 3 + d)), dt),
                TPUC_DTYPE_F32);
  } else {
    V g = e_cvt(e, x, TPUC_DTYPE_F32);
    for (int d = 0; d < 3; d++)
      g = e_cvt(e, e_cvt(e, e_div(e, g, along(e, ks[d], &xt, rk - 3 + d)), dt),
                TPUC_DTYPE_F32);
    r = seq3_sum(e, g, &q, n, dt);
  }
  seq3_free(&q);
  return e_cvt(e, r, dt);
}

/* Checks an adaptive pooling input (argument xi) of ns pooled dims and
 * its output sizes. */
static tpuc_status* adaptive_check(const op_ctx* c, int xi, int ns,
                                   const int64_t* out, bool avg) {
  if (!op_is_tensor(c, xi)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* t = &c->types[xi];
  if ((t->rank != ns + 1 && t->rank != ns + 2) || !is_float(t->dtype))
    return op_unimpl("adaptive pooling: unusual arguments (CPU says why)");
  (void)avg;
  /* (an empty batch is fine: the CPU wants the pooled dims non-empty) */
  for (int i = 0; i < ns; i++)
    if (out[i] <= 0 || t->dims[t->rank - ns + i] == 0)
      return op_unimpl("empty adaptive pooling: CPU");
  return NULL;
}

/* _adaptive_avg_pool{2,3}d(self, output_size). */
static tpuc_status* lower_adaptive_avg_pool2d(op_ctx* c, int ns) {
  const tpuc_op_arg* os = &c->args[1];
  if (os->kind != TPUC_OP_ARG_INT_LIST || (int)os->list_len != ns)
    return op_unimpl("unexpected arguments");
  TRY(adaptive_check(c, 0, ns, os->list, true));
  const tpuc_hlo_type* t = &c->types[0];
  tpuc_dtype dt = t->dtype, acc = op_accumulation_dtype(dt);
  int r = t->rank;
  tpuc_hlo_type ot = *t;
  ot.dtype = acc;
  for (int i = 0; i < ns; i++) ot.dims[r - ns + i] = os->list[i];
  em e = em_make(c, acc, &ot);
  if (ns == 3 && acc != dt) {
    /* half 3-d: the CPU sums and divides in the half dtype */
    c->outs[0] = adaptive_avg3_half(&e, c->vals[0], &t->dims[r - 3], os->list,
                                    dt, false);
    c->nouts = 1;
    return e.st;
  }
  V x = e_cvt(&e, c->vals[0], acc);
  for (int i = ns - 1; i >= 0; i--)
    x = adaptive_sum(&e, x, r - ns + i, os->list[i]);
  V y = e_div(&e, x, adaptive_counts(&e, &t->dims[r - ns], ns));
  c->outs[0] = e_cvt(&e, y, dt);
  c->nouts = 1;
  return e.st;
}

/* _adaptive_avg_pool{2,3}d_backward(grad_output, self). */
static tpuc_status* lower_adaptive_avg_pool2d_bw(op_ctx* c, int ns) {
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* t = &c->types[1];
  const tpuc_hlo_type* gt = &c->types[0];
  int r = t->rank;
  if (gt->rank != r || gt->dtype != t->dtype || r < ns)
    return op_unimpl("adaptive pooling backward: unusual grad (CPU)");
  TRY(adaptive_check(c, 1, ns, &gt->dims[r - ns], true));
  for (int d = 0; d < r - ns; d++)
    if (gt->dims[d] != t->dims[d])
      return op_unimpl("adaptive pooling backward: unusual grad (CPU)");
  tpuc_dtype dt = t->dtype, acc = op_accumulation_dtype(dt);
  tpuc_hlo_type ot = *gt;
  ot.dtype = acc;
  em e = em_make(c, acc, &ot);
  if (ns == 3 && acc != dt) {
    c->outs[0] = adaptive_avg3_half(&e, c->vals[0], &t->dims[r - 3],
                                    &gt->dims[r - 3], dt, true);
    c->nouts = 1;
    return e.st;
  }
  V g = e_div(&e, e_cvt(&e, c->vals[0], acc),
              adaptive_counts(&e, &t->dims[r - ns], ns));
  for (int i = 0; i < ns; i++)
    g = adaptive_spread(&e, g, r - ns + i, t->dims[r - ns + i]);
  c->outs[0] = e_cvt(&e, g, dt);
  c->nouts = 1;
  return e.st;
}

/* (value, index) pairs x, xi with dim `dim` (size I) replaced by the max
 * over O adaptive windows (max_index_body's choice): a reduce over a
 * [.., O, I, ..] broadcast where positions outside a window hold the
 * lowest value and the largest index. */
static void adaptive_max_dim(em* e, V* x, V* xi, int dim, int64_t O) {
  tpuc_hlo_type t = e_type(e, *x);
  if (e->st != NULL) return;
  int64_t I = t.dims[dim];
  int64_t bd[TPUC_MAX_RANK + 1], xm[TPUC_MAX_RANK], mm[2] = {dim, dim + 1};
  for (int d = 0, k = 0; d <= t.rank; d++) {
    bd[d] = d < dim ? t.dims[d] : d == dim ? O : t.dims[d - 1];
    if (d != dim) xm[k++] = d;
  }
  tpuc_hlo_type bt = tpuc_hlo_type_make(t.dtype, bd, t.rank + 1);
  tpuc_hlo_type bi = tpuc_hlo_type_make(TPUC_DTYPE_S64, bd, t.rank + 1);
  em ev = em_make(e->c, t.dtype, &bt), ei = em_make(e->c, TPUC_DTYPE_S64, &bi);
  V m = e_bcast(e, adaptive_mask(e, O, I), bd, t.rank + 1, mm);
  V v = e_sel(&ev, m, e_bcast(e, *x, bd, t.rank + 1, xm), e_k(&ev, -INFINITY));
  V vi = e_sel(&ei, m, e_bcast(e, *xi, bd, t.rank + 1, xm),
               e_k(&ei, 4611686018427387904.0));
  V in[2] = {v, vi}, init[2] = {e_k0(e, t.dtype, -INFINITY), -1};
  V outs[2] = {-1, -1};
  e_join(e, &ev);
  e_join(e, &ei);
  if (e->st == NULL)
    e->st =
        tpuc_hlo_constant_i64(e->c->fn, TPUC_DTYPE_S64, INT64_MAX, &init[1]);
  tpuc_hlo_fn* body = NULL;
  if (e->st == NULL) e->st = max_index_body(e->c->module, t.dtype, &body);
  int64_t rd = dim + 1;
  if (e->st == NULL)
    e->st = tpuc_hlo_reduce(e->c->fn, in, init, 2, &rd, 1, body, outs);
  *x = outs[0];
  *xi = outs[1];
}

/* adaptive_max_pool{2,3}d(self, output_size) -> (out, indices): windows
 * of the last dim first, then of the ones before (the winner of each row
 * stays the first maximum or last NaN in index order). */
static tpuc_status* lower_adaptive_max_pool2d(op_ctx* c, int ns) {
  const tpuc_op_arg* os = &c->args[1];
  if (os->kind != TPUC_OP_ARG_INT_LIST || (int)os->list_len != ns)
    return op_unimpl("unexpected arguments");
  TRY(adaptive_check(c, 0, ns, os->list, false));
  const tpuc_hlo_type* t = &c->types[0];
  int r = t->rank;
  em e = em_make(c, t->dtype, t);
  V x = c->vals[0], xi = plane_index(&e, t, ns);
  for (int i = ns - 1; i >= 0; i--)
    adaptive_max_dim(&e, &x, &xi, r - ns + i, os->list[i]);
  c->outs[0] = x;
  c->outs[1] = xi;
  c->nouts = 2;
  return e.st;
}

/* adaptive_max_pool{2,3}d_backward(grad_output, self, indices). */
static tpuc_status* lower_adaptive_max_pool2d_bw(op_ctx* c, int ns) {
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1) || !op_is_tensor(c, 2))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* t = &c->types[1];
  const tpuc_hlo_type* gt = &c->types[0];
  int r = t->rank;
  if (gt->rank != r || gt->dtype != t->dtype || r < ns ||
      c->types[2].dtype != TPUC_DTYPE_S64 || !same_dims(&c->types[2], gt))
    return op_unimpl("adaptive max pooling backward: unusual arguments");
  TRY(adaptive_check(c, 1, ns, &gt->dims[r - ns], false));
  for (int d = 0; d < r - ns; d++)
    if (gt->dims[d] != t->dims[d])
      return op_unimpl("adaptive max pooling backward: unusual grad");
  return max_scatter(c, 2, t, ns);
}

/* ---------------------------------------------------------------------- */
/* Upsampling over the trailing `ns` dims of [N, C, spatial...], and
 * reflection / replication padding. Each spatial dim maps output to input
 * positions through index vectors, so the forwards gather along one dim
 * at a time and the backwards scatter-add. */

/* The scale of one dim as the CPU's compute_scales_value<float>: 1 /
 * scales[i] (rounded to f32) when argument si holds a positive value, else
 * in / out in f32. A rank-0 value of `dt`. */
static V up_scale(em* e, int si, int64_t in, int64_t out, tpuc_dtype dt) {
  double q = dt == TPUC_DTYPE_F64 ? (double)in / (double)out
                                  : (double)((float)in / (float)out);
  V dflt = e_k0(e, dt, q);
  if (si < 0 || op_is_none(e->c, si)) return dflt;
  V s = -1;
  if (e->st == NULL) e->st = op_scalar(e->c, si, TPUC_DTYPE_F64, NULL, &s);
  V inv = e_cvt(e, e_div(e, e_k0(e, TPUC_DTYPE_F64, 1.0), s), dt);
  V pos = e_cmp(e, TPUC_HLO_GT, s, e_k0(e, TPUC_DTYPE_F64, 0.0));
  return e_sel(e, pos, inv, dflt);
}

/* Source indices (s64 [out]) of upsample_nearest along one dim (scales
 * argument si or -1): the CPU's nearest_idx, or with `exact`
 * nearest_exact_idx. */
static V nearest_index(em* e, int si, int64_t in, int64_t out, bool exact) {
  tpuc_hlo_type it = tpuc_hlo_type_make(TPUC_DTYPE_S64, &out, 1);
  em ei = em_make(e->c, TPUC_DTYPE_S64, &it);
  V o = e_iota(&ei, &it, 0), r;
  if (!exact && out == in) {
    r = o;
  } else if (!exact && out == 2 * in) {
    r = e_div(&ei, o, e_k(&ei, 2.0));
  } else {
    /* floor(o * scale) in f32; exact: floor((o + 0.5) * scale), the
     * product in f64 and rounded to f32 first */
    tpuc_dtype pd = exact ? TPUC_DTYPE_F64 : TPUC_DTYPE_F32;
    tpuc_hlo_type pt = tpuc_hlo_type_make(pd, &out, 1);
    em ef = em_make(e->c, pd, &pt);
    V scale = up_scale(&ef, si, in, out, TPUC_DTYPE_F32);
    scale = e_bcast(&ef, e_cvt(&ef, scale, pd), &out, 1, NULL);
    V src = e_cvt(&ef, o, pd);
    if (exact) src = e_add(&ef, src, e_k(&ef, 0.5));
    src = e_cvt(&ef, e_mul(&ef, src, scale), TPUC_DTYPE_F32);
    src = e_un(&ef, TPUC_HLO_FLOOR, src);
    r = e_min(&ei, e_cvt(&ef, src, TPUC_DTYPE_S64), e_k(&ei, (double)(in - 1)));
    e_join(&ei, &ef);
  }
  e_join(e, &ei);
  return r;
}

/* Linear interpolation of one dim (the CPU's
 * compute_indices_weights_linear): source indices i0, i1 (s64 [out]) and
 * weights l0, l1 ([out] in the compute dtype `acc`). */
static void linear_index(em* e, int si, bool align, int64_t in, int64_t out,
                         tpuc_dtype acc, V* i0, V* i1, V* l0, V* l1) {
  tpuc_hlo_type it = tpuc_hlo_type_make(TPUC_DTYPE_S64, &out, 1);
  tpuc_hlo_type ft = tpuc_hlo_type_make(acc, &out, 1);
  em ei = em_make(e->c, TPUC_DTYPE_S64, &it);
  em ef = em_make(e->c, acc, &ft);
  V scale;
  if (align) {
    double q = out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0;
    if (acc != TPUC_DTYPE_F64)
      q = out > 1 ? (double)((float)(in - 1) / (float)(out - 1)) : 0.0;
    scale = e_k(&ef, q);
  } else {
    scale = e_bcast(&ef, up_scale(&ef, si, in, out, acc), &out, 1, NULL);
  }
  V o = e_cvt(&ef, e_iota(&ei, &it, 0), acc), src;
  if (align) {
    src = e_mul(&ef, scale, o);
  } else {
    src = e_sub(&ef, e_mul(&ef, scale, e_add(&ef, o, e_k(&ef, 0.5))),
                e_k(&ef, 0.5));
    src = e_max(&ef, src, e_k(&ef, 0.0));
  }
  V idx = e_min(&ei, e_cvt(&ef, e_un(&ef, TPUC_HLO_FLOOR, src), TPUC_DTYPE_S64),
                e_k(&ei, (double)(in - 1)));
  V lam = e_sub(&ef, src, e_cvt(&ef, idx, acc));
  lam = e_min(&ef, e_max(&ef, lam, e_k(&ef, 0.0)), e_k(&ef, 1.0));
  *i0 = idx;
  *i1 =
      e_add(&ei, idx,
            e_cvt(&ei, e_cmp(&ei, TPUC_HLO_LT, idx, e_k(&ei, (double)(in - 1))),
                  TPUC_DTYPE_S64));
  *l1 = lam;
  *l0 = e_sub(&ef, e_k(&ef, 1.0), lam);
  e_join(e, &ei);
  e_join(e, &ef);
}

/* Bicubic interpolation of one dim (the CPU's HelperInterpCubic): the
 * source position as linear's but not clamped at 0, its floor (at most
 * in - 1) and fraction t; taps at floor - 1 .. floor + 2 clamped to the
 * input, weights the cubic convolution (A = -0.75) at t + 1, t, 1 - t,
 * 2 - t, computed in `acc` and stored in the input dtype `dt`. */
static void cubic_index(em* e, int si, bool align, int64_t in, int64_t out,
                        tpuc_dtype acc, tpuc_dtype dt, V* idx, V* w) {
  tpuc_hlo_type it = tpuc_hlo_type_make(TPUC_DTYPE_S64, &out, 1);
  tpuc_hlo_type ft = tpuc_hlo_type_make(acc, &out, 1);
  em ei = em_make(e->c, TPUC_DTYPE_S64, &it);
  em ef = em_make(e->c, acc, &ft);
  V scale;
  if (align) {
    double q = out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0;
    if (acc != TPUC_DTYPE_F64)
      q = out > 1 ? (double)((float)(in - 1) / (float)(out - 1)) : 0.0;
    scale = e_k(&ef, q);
  } else {
    scale = e_bcast(&ef, up_scale(&ef, si, in, out, acc), &out, 1, NULL);
  }
  V o = e_cvt(&ef, e_iota(&ei, &it, 0), acc), src;
  if (align)
    src = e_mul(&ef, scale, o);
  else
    src = e_sub(&ef, e_mul(&ef, scale, e_add(&ef, o, e_k(&ef, 0.5))),
                e_k(&ef, 0.5));
  V fl = e_min(&ei, e_cvt(&ef, e_un(&ef, TPUC_HLO_FLOOR, src), TPUC_DTYPE_S64),
               e_k(&ei, (double)(in - 1)));
  V t = e_sub(&ef, src, e_cvt(&ef, fl, acc));
  t = e_min(&ef, e_max(&ef, t, e_k(&ef, 0.0)), e_k(&ef, 1.0));
  const double A = -0.75;
  for (int j = 0; j < 4; j++) {
    idx[j] = e_min(
        &ei,
        e_max(&ei, e_add(&ei, fl, e_k(&ei, (double)(j - 1))), e_k(&ei, 0.0)),
        e_k(&ei, (double)(in - 1)));
    /* x: t + 1, t, 1 - t, (1 - t) + 1 */
    V x = j == 0   ? e_add(&ef, t, e_k(&ef, 1.0))
          : j == 1 ? t
          : j == 2 ? e_sub(&ef, e_k(&ef, 1.0), t)
                   : e_add(&ef, e_sub(&ef, e_k(&ef, 1.0), t), e_k(&ef, 1.0));
    V r;
    if (j == 1 || j == 2) {
      /* ((A + 2) x - (A + 3)) x x + 1 */
      r = e_sub(&ef, e_mul(&ef, e_k(&ef, A + 2.0), x), e_k(&ef, A + 3.0));
      r = e_add(&ef, e_mul(&ef, e_mul(&ef, r, x), x), e_k(&ef, 1.0));
    } else {
      /* ((A x - 5A) x + 8A) x - 4A */
      r = e_sub(&ef, e_mul(&ef, e_k(&ef, A), x), e_k(&ef, 5.0 * A));
      r = e_add(&ef, e_mul(&ef, r, x), e_k(&ef, 8.0 * A));
      r = e_sub(&ef, e_mul(&ef, r, x), e_k(&ef, 4.0 * A));
    }
    w[j] = e_cvt(&ef, e_cvt(&ef, r, dt), acc);
  }
  e_join(e, &ei);
  e_join(e, &ef);
}

/* w (a [n] vector) broadcast along `dim` of `shape`. */
static V along(em* e, V w, const tpuc_hlo_type* shape, int dim) {
  int64_t m = dim;
  return e_bcast(e, w, shape->dims, shape->rank, &m);
}

enum {
  UP_NEAREST = 1,
  UP_NEAREST_EXACT,
  UP_LINEAR,
  UP_CUBIC,
  UP_BW = 0x100,
};

/* upsample_nearest{1,2,3}d(self, output_size, scales...) and
 * _upsample_nearest_exact2d, upsample_bilinear2d(self, output_size,
 * align_corners, scales_h, scales_w) and the backwards (grad_output,
 * output_size, input_size, [align_corners,] scales...). `param`: kind |
 * UP_BW, spatial dims in bits 4..7. */
static tpuc_status* lower_upsample(op_ctx* c, int param) {
  int kind = param & 0xf, ns = (param >> 4) & 0xf;
  bool backward = (param & UP_BW) != 0;
  bool cubic = kind == UP_CUBIC;
  bool linear = kind == UP_LINEAR || cubic;       /* takes align_corners */
  int sc = (backward ? 3 : 2) + (linear ? 1 : 0); /* first scale */
  const tpuc_op_arg* os = &c->args[1];
  if (!op_is_tensor(c, 0) || os->kind != TPUC_OP_ARG_INT_LIST ||
      (int)os->list_len != ns ||
      (linear && c->args[sc - 1].kind != TPUC_OP_ARG_BOOL))
    return op_unimpl("unexpected arguments");
  for (int i = 0; i < ns; i++)
    if (!op_is_none(c, sc + i) && !op_is_value(c, sc + i))
      return op_unimpl("unexpected arguments");
  bool align = linear && c->args[sc - 1].i != 0;
  const tpuc_hlo_type* t = &c->types[0];
  int r = ns + 2;
  int64_t in[3], out[3];
  tpuc_hlo_type it = *t; /* the input's type */
  if (backward) {
    const tpuc_op_arg* is = &c->args[2];
    if (is->kind != TPUC_OP_ARG_INT_LIST || (int)is->list_len != r ||
        t->rank != r)
      return op_unimpl("unexpected arguments");
    for (int d = 0; d < r; d++) it.dims[d] = is->list[d];
  }
  /* (nearest also takes uint8 forward: a gather) */
  bool u8 = t->dtype == TPUC_DTYPE_U8 && !linear && !backward;
  if (it.rank != r || (!is_float(t->dtype) && !u8))
    return op_unimpl("upsample: unusual input (CPU says why)");
  for (int i = 0; i < ns; i++) {
    in[i] = it.dims[2 + i];
    out[i] = os->list[i];
    if (in[i] <= 0 || out[i] <= 0)
      return op_unimpl("upsample: unusual sizes (CPU says why)");
  }
  for (int d = 0; d < r; d++) {
    if (it.dims[d] <= 0) return op_unimpl("empty upsample: CPU");
    if (backward && t->dims[d] != (d < 2 ? it.dims[d] : out[d - 2]))
      return op_unimpl("upsample backward: unusual grad (CPU says why)");
  }
  tpuc_dtype dt = t->dtype, acc = op_accumulation_dtype(dt);
  /* Half floats interpolate in f64 forward: the CPU's f32 arithmetic
   * (fused, it seems) rounds to the same half values as exact sums,
   * which plain f32 sums sometimes miss by an ulp. Indices and weights
   * are computed in f32, as there. */
  bool half = acc != dt;
  /* (the CPU's 1-d / 3-d linear and bicubic backwards add half grads in
   * an order and rounding of their own: CPU) */
  if (backward && half && linear && (cubic || ns != 2))
    return op_unimpl("half upsample backward: the CPU's rounding");
  /* bicubic interpolates half floats in f32 with the weights stored in
   * the half dtype, as the CPU's generic kernel does */
  bool half_weights = half && cubic;
  tpuc_dtype wide =
      !backward && linear && !cubic && half ? TPUC_DTYPE_F64 : acc;
  em e = em_make(c, wide, t);
  V x = c->vals[0];
  if (backward || linear) x = e_cvt(&e, x, wide);
  for (int i = 0; i < ns && e.st == NULL; i++) {
    /* forward: dims one by one from the last (the CPU's order of the
     * linear terms); backward: the transposes in reverse */
    int k = backward ? i : ns - 1 - i, dim = 2 + k;
    int si = sc + k;
    if (!linear) {
      V idx = nearest_index(&e, si, in[k], out[k], kind == UP_NEAREST_EXACT);
      x = backward ? e_put_add(&e, x, dim, idx, in[k])
                   : e_take(&e, x, dim, idx);
      continue;
    }
    if (cubic) {
      /* the four taps in order: sum_j tap_j * w_j */
      V ci[4], cw[4];
      cubic_index(&e, si, align, in[k], out[k], acc, dt, ci, cw);
      tpuc_hlo_type xt = e_type(&e, x);
      V acc_x = -1;
      for (int j = 0; j < 4 && e.st == NULL; j++) {
        V part;
        if (backward) {
          part = e_put_add(&e, e_mul(&e, x, along(&e, cw[j], &xt, dim)), dim,
                           ci[j], in[k]);
        } else {
          V a = e_take(&e, x, dim, ci[j]);
          tpuc_hlo_type at = e_type(&e, a);
          part = e_mul(&e, a, along(&e, cw[j], &at, dim));
        }
        acc_x = j == 0 ? part : e_add(&e, acc_x, part);
      }
      x = acc_x;
      continue;
    }
    V i0, i1, l0, l1;
    linear_index(&e, si, align, in[k], out[k], acc, &i0, &i1, &l0, &l1);
    if (half_weights) {
      l0 = e_cvt(&e, l0, dt);
      l1 = e_cvt(&e, l1, dt);
    }
    l0 = e_cvt(&e, l0, wide);
    l1 = e_cvt(&e, l1, wide);
    tpuc_hlo_type xt = e_type(&e, x);
    if (e.st != NULL) break;
    if (backward) {
      V a =
          e_put_add(&e, e_mul(&e, x, along(&e, l0, &xt, dim)), dim, i0, in[k]);
      V b =
          e_put_add(&e, e_mul(&e, x, along(&e, l1, &xt, dim)), dim, i1, in[k]);
      x = e_add(&e, a, b);
    } else {
      V a = e_take(&e, x, dim, i0), b = e_take(&e, x, dim, i1);
      tpuc_hlo_type at = e_type(&e, a);
      x = e_add(&e, e_mul(&e, a, along(&e, l0, &at, dim)),
                e_mul(&e, b, along(&e, l1, &at, dim)));
    }
  }
  c->outs[0] = e_cvt(&e, x, dt);
  c->nouts = 1;
  return e.st;
}

/* Antialiased interpolation (_upsample_{bilinear,bicubic}2d_aa): each
 * output of a dim is a normalized sum of taps of a filter (a triangle, or
 * Keys' cubic with a = -0.5) stretched by the downscale factor. Tap
 * positions and weights depend on the sizes only (the CPU's
 * _compute_indices_min_size_weights_aa, in the input's float type, its
 * promotions followed): computed here, they are program constants. The
 * scales arguments must be absent (F.interpolate with a size, as
 * torchvision's Resize calls it); with a scale the CPU runs it. */

/* x rounded to the computation's float type (f32 unless `dbl`). */
static double aa_r(double x, bool dbl) { return dbl ? x : (double)(float)x; }

static double aa_filter(double x, bool cubic, bool dbl) {
  x = aa_r(fabs(x), dbl);
  if (!cubic) return x < 1.0 ? aa_r(1.0 - x, dbl) : 0.0;
  const double a = -0.5;
  if (x < 1.0) {
    double r = aa_r(aa_r(aa_r((a + 2.0) * x, dbl) - (a + 3.0), dbl) * x, dbl);
    return aa_r(aa_r(r * x, dbl) + 1.0, dbl);
  }
  if (x < 2.0) {
    double r = aa_r(aa_r(a * x, dbl) - 5.0 * a, dbl);
    r = aa_r(aa_r(r * x, dbl) + 8.0 * a, dbl);
    return aa_r(aa_r(r * x, dbl) - 4.0 * a, dbl);
  }
  return 0.0;
}

/* Taps of one dim: for output i, taps[i * n + j] is the input index of
 * tap j (xmin + j, clamped) and w[i * n + j] its weight (0 past xsize);
 * *n = the CPU's max_interp_size. false when out of memory. */
static bool aa_taps(int64_t in, int64_t out, bool align, bool cubic, bool dbl,
                    int64_t** taps, double** w, int64_t* n) {
  double scale;
  if (align)
    scale = out > 1 ? aa_r((double)aa_r((double)(in - 1), dbl) /
                               aa_r((double)(out - 1), dbl), dbl)
                    : 0.0;
  else
    scale = aa_r(aa_r((double)in, dbl) / aa_r((double)out, dbl), dbl);
  double isz = cubic ? 4.0 : 2.0;
  double support = aa_r(scale >= 1.0 ? (isz * 0.5) * scale : isz * 0.5, dbl);
  int64_t m = (int64_t)ceil(support) * 2 + 1;
  double invscale = aa_r(scale >= 1.0 ? 1.0 / scale : 1.0, dbl);
  *taps = malloc(sizeof(int64_t) * (size_t)(out * m));
  *w = calloc((size_t)(out * m), sizeof(double));
  if (*taps == NULL || *w == NULL) {
    free(*taps);
    free(*w);
    return false;
  }
  for (int64_t i = 0; i < out; i++) {
    double center = aa_r(scale * ((double)i + 0.5), dbl);
    int64_t xmin = (int64_t)(aa_r(center - support, dbl) + 0.5);
    if (xmin < 0) xmin = 0;
    int64_t xmax = (int64_t)(aa_r(center + support, dbl) + 0.5);
    if (xmax > in) xmax = in;
    int64_t xsize = xmax - xmin;
    if (xsize < 0) xsize = 0;
    if (xsize > m) xsize = m;
    double* wi = *w + i * m;
    double total = 0.0;
    for (int64_t j = 0; j < xsize; j++) {
      double arg = aa_r(aa_r((double)(j + xmin) - center, dbl) + 0.5, dbl);
      wi[j] = aa_filter(aa_r(arg * invscale, dbl), cubic, dbl);
      total = aa_r(total + wi[j], dbl);
    }
    for (int64_t j = 0; j < xsize && total != 0.0; j++)
      wi[j] = aa_r(wi[j] / total, dbl);
    for (int64_t j = 0; j < m; j++) {
      int64_t t = xmin + j;
      (*taps)[i * m + j] = t < in ? t : in - 1;
    }
  }
  *n = m;
  return true;
}

/* _upsample_{bilinear,bicubic}2d_aa(self, output_size, align_corners,
 * scales_h, scales_w) and the backwards (grad_output, output_size,
 * input_size, align_corners, scales_h, scales_w). param: UP_LINEAR or
 * UP_CUBIC, | UP_BW. Forward: the last dim, then the one before (the
 * CPU's order), each a gather of the taps and their weighted sum;
 * backward: the transposes, in reverse. */
static tpuc_status* lower_upsample_aa(op_ctx* c, int param) {
  bool backward = (param & UP_BW) != 0, cubic = (param & 0xf) == UP_CUBIC;
  int ai = backward ? 3 : 2; /* align_corners */
  const tpuc_op_arg* os = &c->args[1];
  if (!op_is_tensor(c, 0) || os->kind != TPUC_OP_ARG_INT_LIST ||
      os->list_len != 2 || c->args[ai].kind != TPUC_OP_ARG_BOOL)
    return op_unimpl("unexpected arguments");
  if (!op_is_none(c, ai + 1) || !op_is_none(c, ai + 2))
    return op_unimpl("antialiased upsample with scales: CPU");
  bool align = c->args[ai].i != 0;
  const tpuc_hlo_type* t = &c->types[0];
  tpuc_hlo_type it = *t;
  if (backward) {
    const tpuc_op_arg* is = &c->args[2];
    if (is->kind != TPUC_OP_ARG_INT_LIST || is->list_len != 4 || t->rank != 4)
      return op_unimpl("unexpected arguments");
    for (int d = 0; d < 4; d++) it.dims[d] = is->list[d];
  }
  tpuc_dtype dt = t->dtype;
  if (it.rank != 4 || (dt != TPUC_DTYPE_F32 && dt != TPUC_DTYPE_F64))
    return op_unimpl("antialiased upsample: dtype or rank (CPU)");
  int64_t in[2] = {it.dims[2], it.dims[3]}, out[2] = {os->list[0], os->list[1]};
  for (int d = 0; d < 4; d++)
    if (it.dims[d] <= 0) return op_unimpl("empty upsample: CPU");
  for (int k = 0; k < 2; k++) {
    if (out[k] <= 0) return op_unimpl("upsample: unusual sizes (CPU says why)");
    if (backward && t->dims[2 + k] != out[k])
      return op_unimpl("upsample backward: unusual grad (CPU says why)");
  }
  if (backward && (t->dims[0] != it.dims[0] || t->dims[1] != it.dims[1]))
    return op_unimpl("upsample backward: unusual grad (CPU says why)");
  bool dbl = dt == TPUC_DTYPE_F64;
  em e = em_make(c, dt, t);
  V x = c->vals[0];
  for (int s = 0; s < 2 && e.st == NULL; s++) {
    int k = backward ? s : 1 - s, dim = 2 + k;
    int64_t *taps = NULL, m = 0;
    double* w = NULL;
    if (!aa_taps(in[k], out[k], align, cubic, dbl, &taps, &w, &m))
      return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
    int64_t nt = out[k] * m;
    V idx = e_index_const(&e, taps, nt), wv = e_vec_const(&e, w, nt, dt);
    free(taps);
    free(w);
    tpuc_hlo_type xt = e_type(&e, x);
    if (e.st != NULL) break;
    /* shape with `dim` split into [out, m] */
    int64_t sd[TPUC_MAX_RANK], wd[2] = {out[k], m}, wmap[2] = {dim, dim + 1};
    int sr = 0;
    for (int d = 0; d < xt.rank; d++) {
      if (d == dim) {
        sd[sr++] = out[k];
        sd[sr++] = m;
      } else {
        sd[sr++] = xt.dims[d];
      }
    }
    V w2 = e_reshape(&e, wv, wd, 2);
    V wb = e_bcast(&e, w2, sd, sr, wmap);
    int64_t flat[TPUC_MAX_RANK];
    for (int d = 0; d < xt.rank; d++) flat[d] = d == dim ? nt : xt.dims[d];
    if (backward) {
      /* each output's grad times its taps' weights, added at the taps */
      int64_t bmap[TPUC_MAX_RANK];
      for (int d = 0, q = 0; d < xt.rank; d++, q++) {
        bmap[d] = q;
        if (d == dim) q++;
      }
      V g = e_mul(&e, e_bcast(&e, x, sd, sr, bmap), wb);
      x = e_put_add(&e, e_reshape(&e, g, flat, xt.rank), dim, idx, in[k]);
    } else {
      V g = e_reshape(&e, e_take(&e, x, dim, idx), sd, sr);
      int64_t tapdim = dim + 1;
      x = e_sum(&e, e_mul(&e, g, wb), &tapdim, 1);
    }
  }
  c->outs[0] = x;
  c->nouts = 1;
  return e.st;
}

/* Reflection / replication padding: kind, and spatial dims in bits
 * 4..7. */
enum { PAD_REFLECT = 1, PAD_REPLICATE, PAD_BW = 0x100 };

/* reflection_pad{1,2}d / replication_pad{1,2}d(self, padding) and the
 * backwards (grad_output, self, padding). padding holds (before, after)
 * pairs from the last dim backwards. */
static tpuc_status* lower_pad_mode(op_ctx* c, int param) {
  int kind = param & 0xf, ns = (param >> 4) & 0xf;
  bool backward = (param & PAD_BW) != 0;
  int xi = backward ? 1 : 0, pi = xi + 1;
  const tpuc_op_arg* pa = &c->args[pi];
  if (!op_is_tensor(c, xi) || pa->kind != TPUC_OP_ARG_INT_LIST ||
      (int)pa->list_len != 2 * ns || (backward && !op_is_tensor(c, 0)))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* t = &c->types[xi];
  tpuc_dtype dt = t->dtype;
  /* (half replication backwards: the CPU adds an edge's many grads one
   * by one in the half dtype, which a sum does not round alike) */
  bool half = dt == TPUC_DTYPE_F16 || dt == TPUC_DTYPE_BF16;
  if ((t->rank != ns + 1 && t->rank != ns + 2) || dt == TPUC_DTYPE_PRED ||
      (backward && ((!is_float(dt) && !tpuc_dtype_is_complex(dt)) ||
                    (half && kind == PAD_REPLICATE))))
    return op_unimpl("padding: unusual input (CPU says why)");
  for (int d = 0; d < t->rank; d++)
    if (t->dims[d] == 0) return op_unimpl("empty padding: CPU");
  tpuc_hlo_type ot = *t;
  for (int k = 0; k < ns; k++) {
    int d = t->rank - 1 - k;
    int64_t a = pa->list[2 * k], b = pa->list[2 * k + 1];
    /* (replication takes negative padding: a crop, the same clamp) */
    if (t->dims[d] + a + b <= 0 ||
        (kind == PAD_REFLECT &&
         (a < 0 || b < 0 || a >= t->dims[d] || b >= t->dims[d])))
      return op_unimpl("padding: unusual sizes (CPU says why)");
    ot.dims[d] = t->dims[d] + a + b;
  }
  if (backward && !tpuc_hlo_type_equal(&c->types[0], &ot))
    return op_unimpl("padding backward: unusual grad (CPU says why)");
  tpuc_dtype acc = op_accumulation_dtype(dt);
  em e = em_make(c, backward ? acc : dt, t);
  V x = backward ? e_cvt(&e, c->vals[0], acc) : c->vals[0];
  for (int k = 0; k < ns && e.st == NULL; k++) {
    int d = t->rank - 1 - k;
    int64_t n = t->dims[d], a = pa->list[2 * k], m = ot.dims[d];
    int64_t* idx = malloc(sizeof(int64_t) * (size_t)m);
    if (idx == NULL) return tpuc_status_make(TPUC_INTERNAL, "out of memory");
    for (int64_t o = 0; o < m; o++) {
      int64_t i = o - a;
      if (kind == PAD_REFLECT)
        i = i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i;
      else
        i = i < 0 ? 0 : i >= n ? n - 1 : i;
      idx[o] = i;
    }
    V iv = e_index_const(&e, idx, m);
    free(idx);
    x = backward ? e_put_add(&e, x, d, iv, n) : e_take(&e, x, d, iv);
  }
  c->outs[0] = e_cvt(&e, x, dt);
  c->nouts = 1;
  return e.st;
}

/* ---------------------------------------------------------------------- */
/* Shrinks, glu and prelu: elementwise formulas of the CPU kernels. */

enum { SHRINK_HARD = 1, SHRINK_SOFT, SHRINK_BW = 0x100 };

/* hardshrink / softshrink(self, lambd) and their backwards (grad, self,
 * lambd). hardshrink compares in the input dtype (lambd rounded to it),
 * softshrink in the compute dtype (lambd as a float for half inputs);
 * the backwards pass the grad where |x| > lambd. */
static tpuc_status* lower_shrink(op_ctx* c, int param) {
  int kind = param & 0xf;
  bool backward = (param & SHRINK_BW) != 0;
  int xi = backward ? 1 : 0, li = xi + 1;
  if (!op_is_tensor(c, xi) || !op_is_value(c, li) ||
      (backward && !op_is_tensor(c, 0)))
    return op_unimpl("unexpected arguments");
  int which[2] = {0, 1};
  tpuc_dtype dt;
  tpuc_hlo_type shape;
  if (backward) {
    TRY(op_result_type(c, which, 2, &dt));
    TRY(op_broadcast_shape(c, which, 2, &shape));
  } else {
    dt = c->types[0].dtype;
    shape = c->types[0];
  }
  if (!is_float(dt)) return op_unimpl("non-float shrink: CPU");
  tpuc_dtype acc = op_accumulation_dtype(dt);
  em e = em_make(c, acc, &shape);
  V x = e_arg(&e, xi), r;
  V lam = kind == SHRINK_HARD ? e_scal_via(&e, li, dt) : e_scal(&e, li);
  if (backward) {
    /* (NaN gets 0, as the CPU's vectorized loop; its scalar tail passes
     * the grad) */
    V out = e_or(&e, e_cmp(&e, TPUC_HLO_LT, x, e_neg(&e, lam)),
                 e_cmp(&e, TPUC_HLO_GT, x, lam));
    r = e_sel(&e, out, e_arg(&e, 0), e_k(&e, 0.0));
  } else if (kind == SHRINK_HARD) {
    V in = e_and(&e, e_cmp(&e, TPUC_HLO_GE, x, e_neg(&e, lam)),
                 e_cmp(&e, TPUC_HLO_LE, x, lam));
    r = e_sel(&e, in, e_k(&e, 0.0), x);
  } else {
    /* between the bounds: x * 0 (keeps the sign of zero, and NaN) */
    r = e_mul(&e, x, e_k(&e, 0.0));
    r = e_sel(&e, e_cmp(&e, TPUC_HLO_LT, x, e_neg(&e, lam)), e_add(&e, x, lam),
              r);
    r = e_sel(&e, e_cmp(&e, TPUC_HLO_GT, x, lam), e_sub(&e, x, lam), r);
  }
  c->outs[0] = e_cvt(&e, r, dt);
  c->nouts = 1;
  return e.st;
}

/* Halves of x (type t) along `dim`: the first in *a, the second in *b. */
static void e_halves(em* e, V x, const tpuc_hlo_type* t, int dim, V* a, V* b) {
  int64_t start[TPUC_MAX_RANK] = {0}, limit[TPUC_MAX_RANK];
  for (int d = 0; d < t->rank; d++) limit[d] = t->dims[d];
  int64_t h = t->dims[dim] / 2;
  limit[dim] = h;
  if (e->st == NULL) e->st = tpuc_hlo_slice(e->c->fn, x, start, limit, NULL, a);
  start[dim] = h;
  limit[dim] = 2 * h;
  if (e->st == NULL) e->st = tpuc_hlo_slice(e->c->fn, x, start, limit, NULL, b);
}

/* glu(self, dim) = a * sigmoid(b) over the halves of dim; glu_backward
 * (grad_output, self, dim) = [sig(b) * g, (1 - sig(b)) * sig(b) * a * g]. */
static tpuc_status* lower_glu(op_ctx* c, int backward) {
  int xi = backward ? 1 : 0;
  if (!op_is_tensor(c, xi) || c->args[xi + 1].kind != TPUC_OP_ARG_INT ||
      (backward && !op_is_tensor(c, 0)))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* t = &c->types[xi];
  tpuc_dtype dt = t->dtype, acc = op_accumulation_dtype(dt);
  if (!is_float(dt) || t->rank == 0)
    return op_unimpl("glu: unusual input (CPU says why)");
  int64_t dim;
  TRY(op_wrap_dim(t->rank, c->args[xi + 1].i, &dim));
  if (t->dims[dim] % 2 != 0) return op_unimpl("glu: odd dim (CPU says why)");
  tpuc_hlo_type ht = *t;
  ht.dims[dim] /= 2;
  if (backward && !tpuc_hlo_type_equal(&c->types[0], &ht))
    return op_unimpl("glu backward: unusual grad (CPU says why)");
  em e = em_make(c, acc, &ht);
  V a, b;
  e_halves(&e, e_cvt(&e, c->vals[xi], acc), t, (int)dim, &a, &b);
  V s =
      e_div(&e, e_k(&e, 1.0), e_add(&e, e_k(&e, 1.0), e_exp(&e, e_neg(&e, b))));
  if (!backward) {
    c->outs[0] = e_cvt(&e, e_mul(&e, a, s), dt);
    c->nouts = 1;
    return e.st;
  }
  V g = e_cvt(&e, c->vals[0], acc);
  V ga = e_mul(&e, s, g);
  V gb = e_mul(&e, e_mul(&e, e_mul(&e, e_sub(&e, e_k(&e, 1.0), s), s), a), g);
  V parts[2] = {e_cvt(&e, ga, dt), e_cvt(&e, gb, dt)}, out = -1;
  if (e.st == NULL) e.st = tpuc_hlo_concatenate(c->fn, parts, 2, dim, &out);
  c->outs[0] = out;
  c->nouts = 1;
  return e.st;
}

/* _prelu_kernel(self, weight) = self > 0 ? self : weight * self, weight
 * broadcast to self; _prelu_kernel_backward(grad, self, weight) ->
 * (grad_self, grad_weight), grad_weight summed over the dims weight
 * broadcasts along. */
static tpuc_status* lower_prelu(op_ctx* c, int backward) {
  int xi = backward ? 1 : 0, wi = xi + 1;
  if (!op_is_tensor(c, xi) || !op_is_tensor(c, wi) ||
      (backward && !op_is_tensor(c, 0)))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* t = &c->types[xi];
  const tpuc_hlo_type* wt = &c->types[wi];
  tpuc_dtype dt = t->dtype, acc = op_accumulation_dtype(dt);
  if (!is_float(dt) || wt->dtype != dt || wt->rank > t->rank ||
      (backward && !tpuc_hlo_type_equal(&c->types[0], t)))
    return op_unimpl("prelu: unusual arguments (CPU says why)");
  int off = t->rank - wt->rank;
  for (int d = 0; d < wt->rank; d++)
    if (wt->dims[d] != 1 && wt->dims[d] != t->dims[off + d])
      return op_unimpl("prelu: unusual weight (CPU says why)");
  em e = em_make(c, acc, t);
  V x = e_arg(&e, xi), w = e_arg(&e, wi);
  V pos = e_cmp(&e, TPUC_HLO_GT, x, e_k(&e, 0.0));
  if (!backward) {
    c->outs[0] = e_cvt(&e, e_sel(&e, pos, x, e_mul(&e, w, x)), dt);
    c->nouts = 1;
    return e.st;
  }
  V g = e_arg(&e, 0);
  c->outs[0] = e_cvt(&e, e_sel(&e, pos, g, e_mul(&e, w, g)), dt);
  /* each element's grad_weight rounds to the dtype before the sum */
  V gw = e_cvt(&e, e_cvt(&e, e_sel(&e, pos, e_k(&e, 0.0), e_mul(&e, x, g)), dt),
               acc);
  int64_t rd[TPUC_MAX_RANK];
  size_t nr = 0;
  for (int d = 0; d < t->rank; d++)
    if (d < off || wt->dims[d - off] == 1) rd[nr++] = d;
  if (nr > 0) gw = e_sum(&e, gw, rd, nr);
  c->outs[1] = e_cvt(&e, e_reshape(&e, gw, wt->dims, wt->rank), dt);
  c->nouts = 2;
  return e.st;
}

/* ---------------------------------------------------------------------- */
/* max_unpool{2,3}d: each input value written at its saved flat index
 * within its output plane. The CPU writes in input order, so for a
 * repeated index the last write wins: the winner is the largest input
 * position (a max scatter of positions), its value then gathered. */

/* max_unpool2d(self, indices, output_size) / max_unpool3d(self, indices,
 * output_size, stride, padding); `ns` spatial dims. */
static tpuc_status* lower_max_unpool(op_ctx* c, int ns) {
  const tpuc_op_arg* os = &c->args[2];
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1) ||
      os->kind != TPUC_OP_ARG_INT_LIST || (int)os->list_len != ns)
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* t = &c->types[0];
  const tpuc_hlo_type* it = &c->types[1];
  tpuc_dtype dt = t->dtype;
  if ((t->rank != ns + 1 && t->rank != ns + 2) || it->dtype != TPUC_DTYPE_S64 ||
      !same_dims(t, it))
    return op_unimpl("max_unpool: unusual arguments (CPU says why)");
  if (ns == 3) {
    for (int l = 3; l <= 4; l++) {
      const tpuc_op_arg* a = &c->args[l];
      if (a->kind != TPUC_OP_ARG_INT_LIST || a->list_len != 3)
        return op_unimpl("max_unpool3d: unusual stride/padding (CPU)");
      for (int i = 0; i < 3; i++)
        if (l == 3 ? a->list[i] <= 0 : a->list[i] < 0)
          return op_unimpl("max_unpool3d: unusual stride/padding (CPU)");
    }
  }
  int64_t S = 1, So = 1;
  for (int i = 0; i < ns; i++) {
    S *= t->dims[t->rank - ns + i];
    if (os->list[i] <= 0) return op_unimpl("max_unpool: unusual output size");
    So *= os->list[i];
  }
  int64_t M = tpuc_hlo_type_num_elements(t);
  if (M == 0) return op_unimpl("empty max_unpool: CPU");
  int64_t P = M / S;
  tpuc_hlo_type pt = tpuc_hlo_type_make(TPUC_DTYPE_S64, (int64_t[]){P, S}, 2);
  em ei = em_make(c, TPUC_DTYPE_S64, &pt);
  V idx = e_reshape(&ei, c->vals[1], pt.dims, 2);
  V bad = e_or(&ei, e_cmp(&ei, TPUC_HLO_LT, idx, e_k(&ei, 0.0)),
               e_cmp(&ei, TPUC_HLO_GE, idx, e_k(&ei, (double)So)));
  V flat =
      e_add(&ei, e_mul(&ei, e_iota(&ei, &pt, 0), e_k(&ei, (double)So)), idx);
  flat = e_reshape(&ei, e_sel(&ei, bad, e_k(&ei, -1.0), flat),
                   (int64_t[]){M, 1}, 2);
  V pos =
      e_reshape(&ei,
                e_add(&ei, e_mul(&ei, e_iota(&ei, &pt, 0), e_k(&ei, (double)S)),
                      e_iota(&ei, &pt, 1)),
                &M, 1);
  /* anybad: the CPU's "Found an invalid max index" */
  V anybad = -1, f = -1, init = -1;
  tpuc_hlo_fn* orb = NULL;
  if (ei.st == NULL)
    ei.st = tpuc_hlo_constant_i64(c->fn, TPUC_DTYPE_PRED, 0, &f);
  if (ei.st == NULL)
    ei.st =
        tpuc_hlo_region_binary(c->module, TPUC_DTYPE_PRED, TPUC_HLO_OR, &orb);
  if (ei.st == NULL)
    ei.st =
        tpuc_hlo_reduce(c->fn, &bad, &f, 1, (int64_t[]){0, 1}, 2, orb, &anybad);
  int64_t PSo = P * So;
  tpuc_hlo_type wt = tpuc_hlo_type_make(TPUC_DTYPE_S64, &PSo, 1);
  V win = -1;
  if (ei.st == NULL) ei.st = op_const(c, TPUC_DTYPE_S64, -1.0, &wt, &init);
  tpuc_hlo_fn* maxb = NULL;
  if (ei.st == NULL)
    ei.st =
        tpuc_hlo_region_binary(c->module, TPUC_DTYPE_S64, TPUC_HLO_MAX, &maxb);
  tpuc_hlo_scatter_dims s;
  memset(&s, 0, sizeof s);
  int64_t zero = 0;
  s.inserted_window_dims = &zero;
  s.num_inserted_window_dims = 1;
  s.scatter_dims_to_operand_dims = &zero;
  s.num_scatter_dims_to_operand_dims = 1;
  s.index_vector_dim = 1;
  if (ei.st == NULL)
    ei.st = tpuc_hlo_scatter(c->fn, &init, 1, flat, &pos, &s, maxb, &win);
  /* values at the winners (position 0 where none: masked below) */
  em ew = em_make(c, TPUC_DTYPE_S64, &wt);
  V has = e_cmp(&ew, TPUC_HLO_GE, win, e_k(&ew, 0.0));
  V safe =
      e_reshape(&ew, e_max(&ew, win, e_k(&ew, 0.0)), (int64_t[]){PSo, 1}, 2);
  V xf = e_reshape(&ew, c->vals[0], &M, 1), val = -1;
  if (ew.st == NULL) ew.st = op_gather_elements(c->fn, xf, safe, &val);
  tpuc_hlo_type vt = tpuc_hlo_type_make(dt, &PSo, 1);
  em ev = em_make(c, dt, &vt);
  V y = e_sel(&ev, has, val, e_k(&ev, 0.0));
  tpuc_hlo_type ot = *t;
  for (int i = 0; i < ns; i++) ot.dims[t->rank - ns + i] = os->list[i];
  c->outs[0] = e_reshape(&ev, y, ot.dims, ot.rank);
  c->nouts = 1;
  e_join(&ei, &ew);
  e_join(&ei, &ev);
  c->has_check = true;
  c->check = anybad;
  c->check_code = TPUC_INVALID_ARGUMENT;
  c->check_msg = "Found an invalid max index";
  return ei.st;
}

/* ---------------------------------------------------------------------- */
/* im2col / col2im: the sliding windows of a zero-padded [N, C, H, W]
 * image as columns [N, C * kh * kw, oh * ow] (row c * kh * kw + i * kw +
 * j: kernel offset (i, j) of channel c), and the transpose. */

typedef struct cols2d {
  int64_t k[2], d[2], p[2], s[2];
  int64_t in[2], out[2];
} cols2d;

/* The four int[2] arguments from `ki` on (kernel, dilation, padding,
 * stride) and the image sizes `in`; UNIMPLEMENTED where the CPU refuses
 * (it then says why). */
static tpuc_status* cols_parse(const op_ctx* c, int ki, const int64_t* in,
                               cols2d* q) {
  int64_t* lists[4] = {q->k, q->d, q->p, q->s};
  for (int l = 0; l < 4; l++) {
    const tpuc_op_arg* a = &c->args[ki + l];
    if (a->kind != TPUC_OP_ARG_INT_LIST || a->list_len != 2)
      return op_unimpl("unexpected arguments");
    for (int i = 0; i < 2; i++) {
      lists[l][i] = a->list[i];
      if (a->list[i] < (l == 2 ? 0 : 1))
        return op_unimpl("im2col: bad window (CPU says why)");
    }
  }
  for (int i = 0; i < 2; i++) {
    q->in[i] = in[i];
    int64_t span = q->d[i] * (q->k[i] - 1) + 1;
    q->out[i] = (in[i] + 2 * q->p[i] - span) / q->s[i] + 1;
    if (in[i] <= 0 || in[i] + 2 * q->p[i] < span)
      return op_unimpl("im2col: window larger than the image (CPU)");
  }
  if (q->k[0] * q->k[1] > 256) return op_unimpl("im2col: large kernel (CPU)");
  return NULL;
}

/* im2col(self, kernel_size, dilation, padding, stride): per kernel offset
 * one strided slice of the padded image. */
static tpuc_status* lower_im2col(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* t = &c->types[0];
  int r = t->rank;
  if (r != 3 && r != 4) return op_unimpl("im2col: unusual rank (CPU)");
  for (int d = r - 3; d < r; d++)
    if (t->dims[d] == 0) return op_unimpl("empty im2col: CPU");
  cols2d q;
  TRY(cols_parse(c, 1, &t->dims[r - 2], &q));
  int64_t N = r == 4 ? t->dims[0] : 1, C = t->dims[r - 3];
  int64_t x4[4] = {N, C, t->dims[r - 2], t->dims[r - 1]};
  em e = em_make(c, t->dtype, t);
  V x = e_reshape(&e, c->vals[0], x4, 4), zero = e_k0(&e, t->dtype, 0.0);
  int64_t lo[4] = {0, 0, q.p[0], q.p[1]}, hi[4] = {0, 0, q.p[0], q.p[1]};
  V xp = -1;
  if (e.st == NULL) e.st = tpuc_hlo_pad(c->fn, x, zero, lo, hi, NULL, &xp);
  int64_t nk = q.k[0] * q.k[1];
  V* parts = malloc(sizeof(V) * (size_t)nk);
  if (parts == NULL) return tpuc_status_make(TPUC_INTERNAL, "out of memory");
  int64_t p5[5] = {N, C, 1, q.out[0], q.out[1]};
  for (int64_t i = 0; i < q.k[0]; i++)
    for (int64_t j = 0; j < q.k[1]; j++) {
      int64_t st[4] = {0, 0, i * q.d[0], j * q.d[1]};
      int64_t lim[4] = {N, C, st[2] + (q.out[0] - 1) * q.s[0] + 1,
                        st[3] + (q.out[1] - 1) * q.s[1] + 1};
      int64_t sd[4] = {1, 1, q.s[0], q.s[1]};
      V part = -1;
      if (e.st == NULL) e.st = tpuc_hlo_slice(c->fn, xp, st, lim, sd, &part);
      parts[i * q.k[1] + j] = e_reshape(&e, part, p5, 5);
    }
  V cols = -1;
  if (e.st == NULL)
    e.st = tpuc_hlo_concatenate(c->fn, parts, (size_t)nk, 2, &cols);
  free(parts);
  int64_t od[3] = {N, C * nk, q.out[0] * q.out[1]};
  cols = e_reshape(&e, cols, od, 3);
  c->outs[0] = r == 4 ? cols : e_reshape(&e, cols, od + 1, 2);
  c->nouts = 1;
  return e.st;
}

/* col2im(self, output_size, kernel_size, dilation, padding, stride): each
 * kernel offset's columns spread back over the padded image (interior
 * padding by the stride) and added in offset order, rounding to the
 * dtype at each add as the CPU's loop does; the padding cut at the end. */
static tpuc_status* lower_col2im(op_ctx* c, int param) {
  (void)param;
  const tpuc_op_arg* os = &c->args[1];
  if (!op_is_tensor(c, 0) || os->kind != TPUC_OP_ARG_INT_LIST ||
      os->list_len != 2)
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* t = &c->types[0];
  int r = t->rank;
  tpuc_dtype dt = t->dtype;
  if ((r != 2 && r != 3) || dt == TPUC_DTYPE_PRED)
    return op_unimpl("col2im: unusual input (CPU says why)");
  for (int d = r - 2; d < r; d++)
    if (t->dims[d] == 0) return op_unimpl("empty col2im: CPU");
  cols2d q;
  TRY(cols_parse(c, 2, os->list, &q));
  int64_t nk = q.k[0] * q.k[1], L = q.out[0] * q.out[1];
  if (t->dims[r - 2] % nk != 0 || t->dims[r - 1] != L)
    return op_unimpl("col2im: sizes disagree (CPU says why)");
  int64_t N = r == 3 ? t->dims[0] : 1, C = t->dims[r - 2] / nk;
  int64_t c5[5] = {N, C, nk, q.out[0], q.out[1]};
  em e = em_make(c, dt, t);
  V cols = e_reshape(&e, c->vals[0], c5, 5), zero = e_k0(&e, dt, 0.0);
  int64_t PH = q.in[0] + 2 * q.p[0], PW = q.in[1] + 2 * q.p[1];
  V img = -1;
  for (int64_t i = 0; i < q.k[0]; i++)
    for (int64_t j = 0; j < q.k[1]; j++) {
      int64_t kk = i * q.k[1] + j;
      int64_t st[5] = {0, 0, kk, 0, 0};
      int64_t lim[5] = {N, C, kk + 1, q.out[0], q.out[1]};
      V part = -1;
      if (e.st == NULL)
        e.st = tpuc_hlo_slice(c->fn, cols, st, lim, NULL, &part);
      int64_t p4[4] = {N, C, q.out[0], q.out[1]};
      part = e_reshape(&e, part, p4, 4);
      int64_t lo[4] = {0, 0, i * q.d[0], j * q.d[1]};
      int64_t hi[4] = {0, 0, PH - lo[2] - (q.out[0] - 1) * q.s[0] - 1,
                       PW - lo[3] - (q.out[1] - 1) * q.s[1] - 1};
      int64_t inner[4] = {0, 0, q.s[0] - 1, q.s[1] - 1};
      if (e.st == NULL)
        e.st = tpuc_hlo_pad(c->fn, part, zero, lo, hi, inner, &part);
      img = img < 0 ? part : e_add(&e, img, part);
    }
  int64_t st[4] = {0, 0, q.p[0], q.p[1]};
  int64_t lim[4] = {N, C, q.p[0] + q.in[0], q.p[1] + q.in[1]};
  if (e.st == NULL) e.st = tpuc_hlo_slice(c->fn, img, st, lim, NULL, &img);
  int64_t od[4] = {N, C, q.in[0], q.in[1]};
  c->outs[0] = e_reshape(&e, img, r == 3 ? od : od + 1, r == 3 ? 4 : 3);
  c->nouts = 1;
  return e.st;
}

/* ---------------------------------------------------------------------- */
/* grid_sampler_{2,3}d(input [N, C, spatial...], grid [N, out..., ns],
 * interpolation_mode, padding_mode, align_corners): each output position
 * reads the input at the grid's normalized coordinates (component 0 is
 * the last dim). Bilinear and nearest run here, bicubic on the CPU. The
 * 2-d coordinates follow the CPU's vectorized kernel, the 3-d ones its
 * scalar kernel. */

/* The source coordinate along one dim of size S from the normalized
 * coordinate g (compute dtype): unnormalized, then clipped (border) or
 * reflected and clipped (reflection). */
/* x reflected into [lo, hi] = [0, S - 1] (align) or [-0.5, S - 0.5], as
 * the CPU's reflect_coordinates; with `mult`, also the derivative of the
 * reflection (+1 or -1; 0 where the range is one point). */
static V grid_reflect(em* e, V x, int64_t S, bool align, V* mult) {
  double tlo = align ? 0.0 : -1.0, thi = align ? 2.0 * (S - 1) : 2.0 * S - 1;
  if (tlo == thi) {
    if (mult != NULL) *mult = e_k(e, 0.0);
    return e_k(e, 0.0);
  }
  double lo = tlo / 2.0, span = (thi - tlo) / 2.0;
  V off = e_sub(e, x, e_k(e, lo));
  V in = e_abs(e, off);
  V extra = e_bin(e, TPUC_HLO_REM, in, e_k(e, span));
  V flips = e_un(e, TPUC_HLO_FLOOR, e_div(e, in, e_k(e, span)));
  V odd = e_cmp(e, TPUC_HLO_NE, e_bin(e, TPUC_HLO_REM, flips, e_k(e, 2.0)),
                e_k(e, 0.0));
  if (mult != NULL) {
    /* -1 where exactly one of "below lo" and "odd flips" holds */
    V neg = e_cmp(e, TPUC_HLO_LT, off, e_k(e, 0.0));
    V flip = e_cmp(e, TPUC_HLO_NE, neg, odd);
    *mult = e_sel(e, flip, e_k(e, -1.0), e_k(e, 1.0));
  }
  return e_sel(e, odd, e_add(e, e_sub(e, e_k(e, span), extra), e_k(e, lo)),
               e_add(e, extra, e_k(e, lo)));
}

static V grid_source(em* e, V g, int64_t S, int pad, bool align, bool vec) {
  V x;
  if (vec) {
    /* (g + 1) * ((S - 1) / 2), or (g + 1) * (S / 2) - 0.5 */
    double f = align ? (double)(S - 1) / 2.0 : (double)S / 2.0;
    x = e_mul(e, e_add(e, g, e_k(e, 1.0)), e_k(e, f));
    if (!align) x = e_sub(e, x, e_k(e, 0.5));
  } else if (align) {
    x = e_mul(e, e_div(e, e_add(e, g, e_k(e, 1.0)), e_k(e, 2.0)),
              e_k(e, (double)(S - 1)));
  } else {
    x = e_div(e,
              e_sub(e, e_mul(e, e_add(e, g, e_k(e, 1.0)), e_k(e, (double)S)),
                    e_k(e, 1.0)),
              e_k(e, 2.0));
  }
  if (pad == 2) x = grid_reflect(e, x, S, align, NULL);
  if (pad == 1 || pad == 2)
    x = e_min(e, e_k(e, (double)(S - 1)), e_max(e, x, e_k(e, 0.0)));
  return x;
}

/* Sizes of a grid sample: input [N, C, S...], grid [N, O..., ns]; PS and
 * PO the products of S and O; stride[d] the row stride of spatial dim d
 * in the input as rows [N * PS, C]. */
typedef struct {
  int64_t N, C, PS, PO;
  int64_t S[3], O[3], stride[3];
} grid_dims;

static void grid_dims_of(const tpuc_hlo_type* t, const tpuc_hlo_type* gt,
                         int ns, grid_dims* g) {
  g->N = t->dims[0];
  g->C = t->dims[1];
  g->PS = g->PO = 1;
  for (int d = 0; d < ns; d++) {
    g->S[d] = t->dims[2 + d];
    g->O[d] = gt->dims[1 + d];
    g->PS *= g->S[d];
    g->PO *= g->O[d];
  }
  for (int d = ns - 1, st = 1; d >= 0; d--) {
    g->stride[d] = st;
    st *= (int)g->S[d];
  }
}

/* The source coordinate along each spatial dim d ([N, out...] of type ct,
 * e's dtype) from the grid (its component ns - 1 - d), through
 * grid_source with padding `pad`. */
static void grid_coords(em* e, V grid, const tpuc_hlo_type* gt,
                        const tpuc_hlo_type* ct, int ns, const grid_dims* g,
                        int pad, bool align, V* src) {
  int r = ns + 2;
  for (int d = 0; d < ns; d++) {
    int64_t st[TPUC_MAX_RANK] = {0}, lim[TPUC_MAX_RANK];
    for (int k = 0; k < r; k++) lim[k] = gt->dims[k];
    st[r - 1] = ns - 1 - d;
    lim[r - 1] = st[r - 1] + 1;
    V c = -1;
    if (e->st == NULL) e->st = tpuc_hlo_slice(e->c->fn, grid, st, lim, NULL, &c);
    c = e_reshape(e, c, ct->dims, ct->rank);
    src[d] = grid_source(e, c, g->S[d], pad, align, ns == 2);
  }
}

/* Corner q of the cell at lo[] (s64 [N, out...]): whether it lies inside
 * the input and its row in the input's rows [N * PS, C] (0 outside); bit
 * ns - 1 - d of q picks dim d's upper neighbour (the last dim varies
 * fastest). */
static void grid_corner(em* ei, int q, int ns, const grid_dims* g,
                        const V* lo, V n_base, V* valid, V* flat) {
  V ok_all = -1, row = n_base;
  for (int d = 0; d < ns; d++) {
    bool hi = ((q >> (ns - 1 - d)) & 1) != 0;
    V id = hi ? e_add(ei, lo[d], e_k(ei, 1.0)) : lo[d];
    V ok = e_and(ei, e_cmp(ei, TPUC_HLO_GE, id, e_k(ei, 0.0)),
                 e_cmp(ei, TPUC_HLO_LT, id, e_k(ei, (double)g->S[d])));
    ok_all = d == 0 ? ok : e_and(ei, ok_all, ok);
    row = e_add(ei, row, e_mul(ei, id, e_k(ei, (double)g->stride[d])));
  }
  *valid = ok_all;
  *flat = e_sel(ei, ok_all, row, e_k(ei, 0.0));
}

/* Per spatial dim the cell of each source coordinate: its floor (nearest
 * for mode 1) as s64 in lo[], and for bilinear (mode 0) the weights of the
 * lower and upper neighbours in w0[] and w1[]. */
static void grid_cells(em* e, const V* src, int ns, int mode, V* lo, V* w0,
                       V* w1) {
  for (int d = 0; d < ns; d++) {
    if (mode == 1) {
      lo[d] = e_cvt(e, e_un(e, TPUC_HLO_ROUND_NEAREST_EVEN, src[d]),
                    TPUC_DTYPE_S64);
      continue;
    }
    V f = e_un(e, TPUC_HLO_FLOOR, src[d]);
    lo[d] = e_cvt(e, f, TPUC_DTYPE_S64);
    w1[d] = e_sub(e, src[d], f);
    w0[d] = e_sub(e, e_k(e, 1.0), w1[d]);
  }
}

static tpuc_status* lower_grid_sampler(op_ctx* c, int ns) {
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1) ||
      c->args[2].kind != TPUC_OP_ARG_INT ||
      c->args[3].kind != TPUC_OP_ARG_INT || c->args[4].kind != TPUC_OP_ARG_BOOL)
    return op_unimpl("unexpected arguments");
  int mode = (int)c->args[2].i, pad = (int)c->args[3].i;
  bool align = c->args[4].i != 0;
  const tpuc_hlo_type* t = &c->types[0];
  const tpuc_hlo_type* gt = &c->types[1];
  /* (half floats: the CPU's kernel computes in the half dtype, each
   * operation rounding, coordinates included; bf16 sums here round alike,
   * f16 ones land an ulp away at times: f16 on the CPU) */
  tpuc_dtype dt = t->dtype, acc = dt;
  if (dt == TPUC_DTYPE_F16)
    return op_unimpl("f16 grid_sampler: the CPU's half arithmetic");
  int r = ns + 2;
  if (t->rank != r || gt->rank != r || gt->dtype != dt || !is_float(dt) ||
      gt->dims[0] != t->dims[0] || gt->dims[r - 1] != ns ||
      (mode != 0 && mode != 1) || pad < 0 || pad > 2)
    return op_unimpl("grid_sampler: unusual arguments (CPU says why)");
  if (tpuc_hlo_type_num_elements(t) == 0 || tpuc_hlo_type_num_elements(gt) == 0)
    return op_unimpl("empty grid_sampler: CPU");
  grid_dims g;
  grid_dims_of(t, gt, ns, &g);
  /* coordinates: [N, out...] per spatial dim */
  tpuc_hlo_type ct = *gt;
  ct.rank = r - 1;
  ct.dtype = acc;
  em e = em_make(c, acc, &ct);
  tpuc_hlo_type it = ct;
  it.dtype = TPUC_DTYPE_S64;
  em ei = em_make(c, TPUC_DTYPE_S64, &it);
  V src[3];
  grid_coords(&e, e_cvt(&e, c->vals[1], acc), gt, &ct, ns, &g, pad, align,
              src);
  /* the input as rows [N * prod(S), C] */
  int64_t perm[TPUC_MAX_RANK], rows[2] = {g.N * g.PS, g.C};
  perm[0] = 0;
  for (int d = 0; d < ns; d++) perm[1 + d] = 2 + d;
  perm[r - 1] = 1;
  V xr = -1;
  if (e.st == NULL) e.st = tpuc_hlo_transpose(c->fn, c->vals[0], perm, &xr);
  xr = e_reshape(&e, e_cvt(&e, xr, acc), rows, 2);
  tpuc_hlo_type rt = tpuc_hlo_type_make(acc, rows, 2);
  /* the corners: per dim the floor (and floor + 1) or the nearest */
  V lo[3], w0[3], w1[3];
  grid_cells(&e, src, ns, mode, lo, w0, w1);
  int ncorner = mode == 1 ? 1 : 1 << ns;
  int64_t od[TPUC_MAX_RANK];
  od[0] = g.N;
  for (int d = 0; d < ns; d++) od[1 + d] = g.O[d];
  od[r - 1] = g.C;
  tpuc_hlo_type ot = tpuc_hlo_type_make(acc, od, r);
  em eo = em_make(c, acc, &ot);
  int64_t bmap[TPUC_MAX_RANK];
  for (int k = 0; k < r - 1; k++) bmap[k] = k;
  V n_base = e_mul(&ei, e_iota(&ei, &it, 0), e_k(&ei, (double)g.PS));
  V out = -1;
  for (int q = 0; q < ncorner; q++) {
    V valid, flat, w = -1;
    grid_corner(&ei, q, ns, &g, lo, n_base, &valid, &flat);
    for (int d = 0; mode == 0 && d < ns; d++) {
      /* weights multiply as the CPU: 2-d y then x, 3-d x, y, z */
      int dd = ns == 2 ? d : ns - 1 - d;
      bool hb = ((q >> (ns - 1 - dd)) & 1) != 0;
      V wd = hb ? w1[dd] : w0[dd];
      w = d == 0 ? wd : e_mul(&e, w, wd);
    }
    int64_t m = g.N * g.PO, mi[2] = {m, 1};
    V val = -1;
    flat = e_reshape(&ei, flat, mi, 2);
    if (ei.st == NULL) ei.st = op_take_along(c->fn, xr, &rt, 0, flat, &val);
    val = e_reshape(&eo, val, od, r);
    val = e_sel(&eo, e_bcast(&eo, valid, od, r, bmap), val, e_k(&eo, 0.0));
    if (mode == 0) val = e_mul(&eo, val, e_bcast(&eo, w, od, r, bmap));
    out = q == 0 ? val : e_add(&eo, out, val);
  }
  for (int k = 0; k < r; k++) perm[k] = k == 0 ? 0 : k == 1 ? r - 1 : k - 1;
  if (eo.st == NULL) eo.st = tpuc_hlo_transpose(c->fn, out, perm, &out);
  c->outs[0] = e_cvt(&eo, out, dt);
  c->nouts = 1;
  e_join(&e, &ei);
  e_join(&e, &eo);
  return e.st;
}

/* grid_sampler_{2,3}d_backward(grad_output, input, grid, mode, padding,
 * align_corners, output_mask) -> (grad_input, grad_grid) for bilinear and
 * nearest sampling with zeros, border or reflection padding.
 * grad_input adds each output's gradient, times its corner weights, into
 * the corners it read; grad_grid is the derivative of the bilinear weights
 * (nearest: zero) through the unnormalization and the reflection (its
 * sign), and zero where the padding clipped the coordinate (the borders
 * count as clipped, as on the CPU). */
static tpuc_status* lower_grid_sampler_bw(op_ctx* c, int ns) {
  const tpuc_op_arg* ma = &c->args[6];
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1) || !op_is_tensor(c, 2) ||
      c->args[3].kind != TPUC_OP_ARG_INT ||
      c->args[4].kind != TPUC_OP_ARG_INT ||
      c->args[5].kind != TPUC_OP_ARG_BOOL || ma->kind != TPUC_OP_ARG_INT_LIST ||
      ma->list_len != 2)
    return op_unimpl("unexpected arguments");
  int mode = (int)c->args[3].i, pad = (int)c->args[4].i;
  bool align = c->args[5].i != 0, want_in = ma->list[0] != 0,
       want_grid = ma->list[1] != 0;
  const tpuc_hlo_type* t = &c->types[1];
  const tpuc_hlo_type* gt = &c->types[2];
  const tpuc_hlo_type* got = &c->types[0];
  /* (half floats: the CPU computes coordinates, weights and sums in the
   * half dtype, rounding at each step in its own order; neither bf16
   * arithmetic nor f32 here lands within OpInfo's tolerance of it, so
   * half floats take the CPU's kernel) */
  tpuc_dtype dt = t->dtype, acc = dt;
  int r = ns + 2;
  if (dt == TPUC_DTYPE_F16 || dt == TPUC_DTYPE_BF16 || !is_float(dt) ||
      t->rank != r ||
      gt->rank != r || gt->dtype != dt || got->dtype != dt ||
      got->rank != r || gt->dims[0] != t->dims[0] || gt->dims[r - 1] != ns ||
      (mode != 0 && mode != 1) || pad < 0 || pad > 2)
    return op_unimpl("grid_sampler backward: this case runs on the CPU");
  if (tpuc_hlo_type_num_elements(t) == 0 || tpuc_hlo_type_num_elements(gt) == 0)
    return op_unimpl("empty grid_sampler: CPU");
  grid_dims g;
  grid_dims_of(t, gt, ns, &g);
  for (int d = 0; d < ns; d++)
    if (got->dims[2 + d] != g.O[d] || got->dims[0] != g.N ||
        got->dims[1] != g.C)
      return op_unimpl("grid_sampler backward: grad_output's shape");
  tpuc_hlo_type ct = *gt;
  ct.rank = r - 1;
  ct.dtype = acc;
  em e = em_make(c, acc, &ct);
  tpuc_hlo_type it = ct;
  it.dtype = TPUC_DTYPE_S64;
  em ei = em_make(c, TPUC_DTYPE_S64, &it);
  /* unnormalized coordinates, reflected and clipped below where the
   * padding says; gmul[d] the derivative of those steps (zero where the
   * clip held the coordinate, the borders included, as on the CPU) */
  V src[3], gmul[3];
  grid_coords(&e, e_cvt(&e, c->vals[2], acc), gt, &ct, ns, &g, 0, align, src);
  for (int d = 0; d < ns; d++) {
    gmul[d] = -1;
    if (pad == 0) continue;
    V refl = -1;
    if (pad == 2) src[d] = grid_reflect(&e, src[d], g.S[d], align, &refl);
    V hi = e_k(&e, (double)(g.S[d] - 1)), zero = e_k(&e, 0.0);
    V inb = e_and(&e, e_cmp(&e, TPUC_HLO_GT, src[d], zero),
                  e_cmp(&e, TPUC_HLO_LT, src[d], hi));
    gmul[d] = e_sel(&e, inb, pad == 2 ? refl : e_k(&e, 1.0), e_k(&e, 0.0));
    src[d] = e_min(&e, hi, e_max(&e, src[d], zero));
  }
  V lo[3], w0[3], w1[3];
  grid_cells(&e, src, ns, mode, lo, w0, w1);
  int64_t od[TPUC_MAX_RANK], perm[TPUC_MAX_RANK];
  od[0] = g.N;
  for (int d = 0; d < ns; d++) od[1 + d] = g.O[d];
  od[r - 1] = g.C;
  tpuc_hlo_type ot = tpuc_hlo_type_make(acc, od, r);
  em eo = em_make(c, acc, &ot);
  int64_t bmap[TPUC_MAX_RANK];
  for (int k = 0; k < r - 1; k++) bmap[k] = k;
  /* grad_output and the input as [N, out..., C] and rows [N * prod(S), C] */
  perm[0] = 0;
  for (int d = 0; d < ns; d++) perm[1 + d] = 2 + d;
  perm[r - 1] = 1;
  V go = -1, xr = -1;
  if (eo.st == NULL) eo.st = tpuc_hlo_transpose(c->fn, c->vals[0], perm, &go);
  go = e_cvt(&eo, go, acc);
  int64_t rows[2] = {g.N * g.PS, g.C}, m = g.N * g.PO, mrows[2] = {m, g.C},
          mi[2] = {m, 1};
  tpuc_hlo_type rt = tpuc_hlo_type_make(acc, rows, 2);
  em er = em_make(c, acc, &rt);
  if (want_grid && mode == 0) {
    if (er.st == NULL) er.st = tpuc_hlo_transpose(c->fn, c->vals[1], perm, &xr);
    xr = e_reshape(&er, e_cvt(&er, xr, acc), rows, 2);
  }
  V gin = want_in ? e_k(&er, 0.0) : -1;
  V gsrc[3] = {-1, -1, -1};
  V n_base = e_mul(&ei, e_iota(&ei, &it, 0), e_k(&ei, (double)g.PS));
  int ncorner = mode == 1 ? 1 : 1 << ns;
  for (int q = 0; q < ncorner; q++) {
    V valid, flat, w = -1, wd[3];
    grid_corner(&ei, q, ns, &g, lo, n_base, &valid, &flat);
    for (int d = 0; mode == 0 && d < ns; d++) {
      wd[d] = ((q >> (ns - 1 - d)) & 1) ? w1[d] : w0[d];
      w = d == 0 ? wd[d] : e_mul(&e, w, wd[d]);
    }
    flat = e_reshape(&ei, flat, mi, 2);
    V vb = e_bcast(&eo, valid, od, r, bmap);
    if (want_in) {
      V contrib = mode == 0 ? e_mul(&eo, go, e_bcast(&eo, w, od, r, bmap)) : go;
      contrib = e_sel(&eo, vb, contrib, e_k(&eo, 0.0));
      contrib = e_reshape(&eo, contrib, mrows, 2);
      tpuc_hlo_fn* add = NULL; /* (a region serves one scatter) */
      if (er.st == NULL)
        er.st = tpuc_hlo_region_binary(c->module, acc, TPUC_HLO_ADD, &add);
      if (er.st == NULL)
        er.st = op_scatter_first(c->fn, gin, flat, contrib, add, false, &gin);
    }
    if (want_grid && mode == 0) {
      V val = -1;
      if (er.st == NULL) er.st = op_take_along(c->fn, xr, &rt, 0, flat, &val);
      val = e_sel(&eo, vb, e_reshape(&eo, val, od, r), e_k(&eo, 0.0));
      int64_t last = r - 1;
      V sgv = e_sum(&eo, e_mul(&eo, go, val), &last, 1); /* [N, out...] */
      for (int d = 0; d < ns; d++) {
        bool hi = ((q >> (ns - 1 - d)) & 1) != 0;
        V dw = -1;
        for (int k = 0; k < ns; k++)
          if (k != d) dw = dw < 0 ? wd[k] : e_mul(&e, dw, wd[k]);
        if (dw < 0) dw = e_k(&e, 1.0);
        V term = e_mul(&e, sgv, dw);
        if (!hi) term = e_neg(&e, term);
        gsrc[d] = gsrc[d] < 0 ? term : e_add(&e, gsrc[d], term);
      }
    }
  }
  c->outs[0] = c->outs[1] = -1;
  if (want_in) {
    int64_t sd[TPUC_MAX_RANK];
    sd[0] = g.N;
    for (int d = 0; d < ns; d++) sd[1 + d] = g.S[d];
    sd[r - 1] = g.C;
    V gi = e_reshape(&er, gin, sd, r);
    for (int k = 0; k < r; k++) perm[k] = k == 0 ? 0 : k == 1 ? r - 1 : k - 1;
    if (er.st == NULL) er.st = tpuc_hlo_transpose(c->fn, gi, perm, &gi);
    c->outs[0] = e_cvt(&er, gi, dt);
  }
  if (want_grid) {
    V comps[3];
    int64_t one[TPUC_MAX_RANK];
    for (int k = 0; k < r - 1; k++) one[k] = ct.dims[k];
    one[r - 1] = 1;
    for (int k = 0; k < ns; k++) {
      int d = ns - 1 - k; /* component 0 is the last spatial dim */
      V gd = mode == 0 ? gsrc[d] : e_k(&e, 0.0);
      double f = align ? (double)(g.S[d] - 1) / 2.0 : (double)g.S[d] / 2.0;
      gd = e_mul(&e, gd, e_k(&e, f));
      if (pad != 0) gd = e_mul(&e, gd, gmul[d]);
      comps[k] = e_reshape(&e, gd, one, r);
    }
    V gg = -1;
    if (e.st == NULL)
      e.st = tpuc_hlo_concatenate(c->fn, comps, (size_t)ns, r - 1, &gg);
    c->outs[1] = e_cvt(&e, gg, dt);
  }
  c->nouts = 2;
  /* One failure for all four emitters (any of them may report only a
   * value another failed to make). */
  e_join(&er, &eo);
  e_join(&er, &ei);
  e_join(&er, &e);
  return er.st;
}

/* The scatter body of segment max / min as the CPU's step: a NaN
 * element is taken, else std::max / std::min (a NaN so far stays). */
static tpuc_status* seg_minmax_body(tpuc_hlo_module* m, tpuc_dtype dt,
                                    bool is_max, tpuc_hlo_fn** out) {
  tpuc_hlo_type ts[2] = {tpuc_hlo_type_scalar(dt), tpuc_hlo_type_scalar(dt)};
  tpuc_hlo_fn* f = NULL;
  TRY(tpuc_hlo_region_create(m, ts, 2, &f));
  V a, x, nan, better, r;
  TRY(tpuc_hlo_get_arg(f, 0, &a));
  TRY(tpuc_hlo_get_arg(f, 1, &x));
  TRY(tpuc_hlo_compare(f, TPUC_HLO_NE, x, x, &nan));
  if (is_max)
    TRY(tpuc_hlo_compare(f, TPUC_HLO_LT, a, x, &better));
  else
    TRY(tpuc_hlo_compare(f, TPUC_HLO_LT, x, a, &better));
  TRY(tpuc_hlo_binary(f, TPUC_HLO_OR, nan, better, &better));
  TRY(tpuc_hlo_select(f, better, x, a, &r));
  TRY(tpuc_hlo_return(f, &r, 1));
  *out = f;
  return NULL;
}

/* ---------------------------------------------------------------------- */
/* segment_reduce(data, reduce, *, lengths, indices, offsets, axis,
 * unsafe, initial) along axis 0 with 1-d lengths or offsets: each
 * element is added (max'ed, ...) into its segment in order, from the
 * initial value (or the reduction's identity), as the CPU's loop does in
 * the data's dtype; a scatter applies its updates in that order. */
static tpuc_status* lower_segment_reduce(op_ctx* c, int param) {
  (void)param;
  const char* red = op_str_arg(c, 1, "");
  int kind = strcmp(red, "sum") == 0    ? 0
             : strcmp(red, "mean") == 0 ? 1
             : strcmp(red, "max") == 0  ? 2
             : strcmp(red, "min") == 0  ? 3
             : strcmp(red, "prod") == 0 ? 4
                                        : -1;
  bool by_len = op_is_tensor(c, 2) && op_is_none(c, 4);
  bool by_off = op_is_tensor(c, 4) && op_is_none(c, 2);
  int li = by_len ? 2 : 4;
  if (kind < 0 || !op_is_tensor(c, 0) || (!by_len && !by_off) ||
      !op_is_none(c, 3) || c->args[5].kind != TPUC_OP_ARG_INT ||
      c->args[5].i != 0 || c->args[6].kind != TPUC_OP_ARG_BOOL)
    return op_unimpl("segment_reduce: unusual arguments (CPU)");
  const tpuc_hlo_type* t = &c->types[0];
  const tpuc_hlo_type* lt = &c->types[li];
  tpuc_dtype dt = t->dtype;
  if (!is_float(dt) || t->rank < 1 || lt->rank != 1 ||
      (lt->dtype != TPUC_DTYPE_S64 && lt->dtype != TPUC_DTYPE_S32) ||
      (by_off && lt->dims[0] < 1))
    return op_unimpl("segment_reduce: unusual arguments (CPU)");
  int64_t D = t->dims[0], S = by_len ? lt->dims[0] : lt->dims[0] - 1;
  if (D == 0 || S == 0) return op_unimpl("empty segment_reduce: CPU");
  /* offsets O [S + 1] (s64) */
  int64_t S1 = S + 1;
  tpuc_hlo_type ot = tpuc_hlo_type_make(TPUC_DTYPE_S64, &S1, 1);
  em ei = em_make(c, TPUC_DTYPE_S64, &ot);
  V L = e_cvt(&ei, c->vals[li], TPUC_DTYPE_S64), O = -1;
  V bad = -1;
  if (by_len) {
    /* O[s] = sum of lengths[t] for t < s: a masked sum over [S + 1, S] */
    int64_t sq[2] = {S1, S};
    tpuc_hlo_type qt = tpuc_hlo_type_make(TPUC_DTYPE_S64, sq, 2);
    em eq = em_make(c, TPUC_DTYPE_S64, &qt);
    int64_t one = 1;
    V lt_m = e_cmp(&eq, TPUC_HLO_LT, e_iota(&eq, &qt, 1), e_iota(&eq, &qt, 0));
    V Lb = e_bcast(&eq, L, sq, 2, &one);
    O = e_sum(&eq, e_sel(&eq, lt_m, Lb, e_k(&eq, 0.0)), &one, 1);
    e_join(&ei, &eq);
    /* the CPU checks: lengths >= 0 and (unless unsafe) summing to D */
    em e1 =
        em_make(c, TPUC_DTYPE_S64, &(tpuc_hlo_type){TPUC_DTYPE_S64, 1, {S}});
    V neg = e_cmp(&e1, TPUC_HLO_LT, L, e_k(&e1, 0.0));
    V nneg = e_sum(&e1, e_cvt(&e1, neg, TPUC_DTYPE_S64), (int64_t[]){0}, 1);
    em e0 =
        em_make(c, TPUC_DTYPE_S64, &(tpuc_hlo_type){TPUC_DTYPE_S64, 0, {0}});
    bad = e_cmp(&e0, TPUC_HLO_GT, nneg, e_k(&e0, 0.0));
    if (c->args[6].i == 0) {
      V total = e_sum(&e1, L, (int64_t[]){0}, 1);
      bad = e_or(&e0, bad, e_cmp(&e0, TPUC_HLO_NE, total, e_k(&e0, (double)D)));
    }
    e_join(&ei, &e1);
    e_join(&ei, &e0);
  } else {
    O = L;
  }
  /* seg(k) = #{s : O[s] <= k} - 1 for O[0] <= k < O[S], else dropped */
  int64_t dk[2] = {D, S1};
  tpuc_hlo_type kt = tpuc_hlo_type_make(TPUC_DTYPE_S64, dk, 2);
  em ek = em_make(c, TPUC_DTYPE_S64, &kt);
  int64_t one = 1;
  V le = e_cmp(&ek, TPUC_HLO_LE, e_bcast(&ek, O, dk, 2, &one),
               e_iota(&ek, &kt, 0));
  V cnt = e_sum(&ek, e_cvt(&ek, le, TPUC_DTYPE_S64), &one, 1);
  tpuc_hlo_type dt1 = tpuc_hlo_type_make(TPUC_DTYPE_S64, &D, 1);
  em ed = em_make(c, TPUC_DTYPE_S64, &dt1);
  V seg = e_sub(&ed, cnt, e_k(&ed, 1.0));
  V k = e_iota(&ed, &dt1, 0);
  V first = -1, last = -1;
  int64_t z = 0, zl = S;
  if (ed.st == NULL)
    ed.st = tpuc_hlo_slice(c->fn, O, &z, (int64_t[]){1}, NULL, &first);
  if (ed.st == NULL)
    ed.st = tpuc_hlo_slice(c->fn, O, &zl, (int64_t[]){S + 1}, NULL, &last);
  first = e_bcast(&ed, e_reshape(&ed, first, NULL, 0), &D, 1, NULL);
  last = e_bcast(&ed, e_reshape(&ed, last, NULL, 0), &D, 1, NULL);
  V in = e_and(&ed, e_cmp(&ed, TPUC_HLO_GE, k, first),
               e_cmp(&ed, TPUC_HLO_LT, k, last));
  seg =
      e_reshape(&ed, e_sel(&ed, in, seg, e_k(&ed, -1.0)), (int64_t[]){D, 1}, 2);
  e_join(&ei, &ek);
  e_join(&ei, &ed);
  /* the segments: [S, rest...] from the initial value */
  tpuc_hlo_type st = *t;
  st.dims[0] = S;
  em e = em_make(c, dt, &st);
  static const double ident[5] = {0.0, 0.0, -INFINITY, INFINITY, 1.0};
  bool has_init = !op_is_none(c, 7);
  V init = has_init ? e_scal(&e, 7) : e_k(&e, ident[kind]);
  static const tpuc_hlo_binary_op comb[5] = {
      TPUC_HLO_ADD, TPUC_HLO_ADD, TPUC_HLO_MAX, TPUC_HLO_MIN, TPUC_HLO_MUL};
  tpuc_hlo_fn* body = NULL;
  if (e.st == NULL && kind >= 2 && kind <= 3)
    e.st = seg_minmax_body(c->module, dt, kind == 2, &body);
  else if (e.st == NULL)
    e.st = tpuc_hlo_region_binary(c->module, dt, comb[kind], &body);
  int64_t win[TPUC_MAX_RANK], zero = 0;
  for (int d = 1; d < t->rank; d++) win[d - 1] = d;
  tpuc_hlo_scatter_dims sd;
  memset(&sd, 0, sizeof sd);
  sd.update_window_dims = win;
  sd.num_update_window_dims = (size_t)t->rank - 1;
  sd.inserted_window_dims = &zero;
  sd.num_inserted_window_dims = 1;
  sd.scatter_dims_to_operand_dims = &zero;
  sd.num_scatter_dims_to_operand_dims = 1;
  sd.index_vector_dim = 1;
  V r = -1, x = c->vals[0];
  if (e.st == NULL && ei.st == NULL)
    e.st = tpuc_hlo_scatter(c->fn, &init, 1, seg, &x, &sd, body, &r);
  if (kind == 1) {
    /* mean: / length where non-empty (NaN stays); empty without an
     * initial value: NaN */
    tpuc_hlo_type lt1 = tpuc_hlo_type_make(TPUC_DTYPE_S64, &S, 1);
    em el = em_make(c, TPUC_DTYPE_S64, &lt1);
    V len = -1;
    if (el.st == NULL)
      el.st = tpuc_hlo_slice(c->fn, O, (int64_t[]){1}, (int64_t[]){S + 1}, NULL,
                             &len);
    V lo = -1;
    if (el.st == NULL) el.st = tpuc_hlo_slice(c->fn, O, &z, &zl, NULL, &lo);
    len = e_sub(&el, len, lo);
    V lb = e_bcast(&e, e_cvt(&e, len, dt), st.dims, st.rank, &z);
    V pos = e_bcast(&e, e_cmp(&el, TPUC_HLO_GT, len, e_k(&el, 0.0)), st.dims,
                    st.rank, &z);
    r = e_sel(&e, pos, e_div(&e, r, lb), r);
    if (!has_init) r = e_sel(&e, pos, r, e_k(&e, NAN));
    e_join(&e, &el);
  }
  e_join(&e, &ei);
  c->outs[0] = r;
  c->nouts = 1;
  if (bad >= 0) {
    c->has_check = true;
    c->check = bad;
    c->check_code = TPUC_INVALID_ARGUMENT;
    c->check_msg =
        "Expected all rows of lengths along axis to sum to "
        "data.size(lengths.dim()-1) when !unsafe.";
  }
  return e.st;
}

/* ---------------------------------------------------------------------- */
/* _pdist_forward(self [N, M], p) and _cdist_forward(x1 [B.., P, M],
 * x2 [B.., R, M], p, compute_mode): p-norm distances of row pairs (pdist:
 * i < j in row-major order). p is a program value, so every form the
 * CPU has is computed and the one for p chosen: p = 0 counts nonzero
 * differences, 1 sums them, 2 takes the root of the squares, inf the
 * largest, else (sum |d|^p)^(1/p). cdist's Euclidean distance through a
 * matrix product (compute_mode 1, or 0 with more than 25 rows) is the
 * CPU's: |x1|^2 - 2 x1.x2 + |x2|^2, clamped at 0, its root. */

/* The distances over the last dim of d (the differences, compute dtype,
 * shape `dt`) for the rank-0 f64 value p. */
static V dist_reduce(em* eo, V d, const tpuc_hlo_type* dtp, V p) {
  em ed = em_make(eo->c, dtp->dtype, dtp), *e = &ed;
  int r = dtp->rank;
  int64_t last = r - 1;
  tpuc_hlo_type rt = *dtp;
  rt.rank = r - 1;
  em er = em_make(e->c, dtp->dtype, &rt);
  V a = e_abs(e, d);
  V pv = e_bcast(e, e_cvt(e, p, dtp->dtype), dtp->dims, r, NULL);
  V z = e_sum(e, e_cvt(e, e_cmp(e, TPUC_HLO_NE, d, e_k(e, 0.0)), dtp->dtype),
              &last, 1);
  V one = e_sum(e, a, &last, 1);
  V two = e_un(&er, TPUC_HLO_SQRT, e_sum(e, e_mul(e, d, d), &last, 1));
  V inf = e_fold(e, a, &last, 1, TPUC_HLO_MAX, 0.0);
  V gen = e_sum(e, e_bin(e, TPUC_HLO_POW, a, pv), &last, 1);
  V prv = e_bcast(&er, e_cvt(&er, p, dtp->dtype), rt.dims, rt.rank, NULL);
  gen = e_bin(&er, TPUC_HLO_POW, gen, e_div(&er, e_k(&er, 1.0), prv));
  V pf = e_bcast(&er, p, rt.dims, rt.rank, NULL);
  em e64 = em_make(e->c, TPUC_DTYPE_F64, &rt);
  V r_ = gen;
  r_ = e_sel(&er, e_cmp(&e64, TPUC_HLO_EQ, pf, e_k(&e64, INFINITY)), inf, r_);
  r_ = e_sel(&er, e_cmp(&e64, TPUC_HLO_EQ, pf, e_k(&e64, 2.0)), two, r_);
  r_ = e_sel(&er, e_cmp(&e64, TPUC_HLO_EQ, pf, e_k(&e64, 1.0)), one, r_);
  r_ = e_sel(&er, e_cmp(&e64, TPUC_HLO_EQ, pf, e_k(&e64, 0.0)), z, r_);
  e_join(e, &er);
  e_join(e, &e64);
  e_join(eo, e);
  return r_;
}

/* The K = N (N - 1) / 2 row pairs i < j of N rows in row-major order:
 * first rows in *vi, second rows in *vj (s64 [K] constants). */
static tpuc_status* pdist_pairs(em* e, int64_t N, int64_t K, V* vi, V* vj) {
  int64_t* ij = malloc(sizeof(int64_t) * (size_t)(2 * K));
  if (ij == NULL) return tpuc_status_make(TPUC_INTERNAL, "out of memory");
  int64_t k = 0;
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = i + 1; j < N; j++, k++) {
      ij[k] = i;
      ij[K + k] = j;
    }
  *vi = e_index_const(e, ij, K);
  *vj = e_index_const(e, ij + K, K);
  free(ij);
  return NULL;
}

/* cdist's row pairs of x1 [B.., P, M] (type t) and x2 [B.., R, M]: both
 * broadcast to [B.., P, R, M] (*a, *b; that type in *dtp); returns
 * a - b. */
static V cdist_pairs(em* e, V x1, V x2, const tpuc_hlo_type* t, int64_t R,
                     tpuc_hlo_type* dtp, V* a, V* b) {
  int r = t->rank;
  int64_t bd[TPUC_MAX_RANK + 1], m1[TPUC_MAX_RANK], m2[TPUC_MAX_RANK];
  for (int d = 0; d < r - 2; d++) {
    bd[d] = t->dims[d];
    m1[d] = m2[d] = d;
  }
  bd[r - 2] = t->dims[r - 2];
  bd[r - 1] = R;
  bd[r] = t->dims[r - 1];
  m1[r - 2] = r - 2;
  m1[r - 1] = r;
  m2[r - 2] = r - 1;
  m2[r - 1] = r;
  *dtp = tpuc_hlo_type_make(t->dtype, bd, r + 1);
  *a = e_bcast(e, x1, bd, r + 1, m1);
  *b = e_bcast(e, x2, bd, r + 1, m2);
  return e_sub(e, *a, *b);
}

/* The derivative of the p-norm distance `dist` of difference `diff` times
 * `g` (all of shape `dtp`, compute dtype), by the CPU's forms: 0 for p = 0,
 * g sign(diff) for p = 1, for p < 2 (p != 1) sign(diff) |diff|^(p-1) g /
 * dist^(p-1) (0 where dist is 0, and where diff is 0 with p < 1), g diff /
 * dist for p = 2 (0 where dist is 0), for p = inf g sign(diff) where
 * |diff| is dist (1 - min(1, ceil(||diff| - dist|))), else diff
 * |diff|^(p-2) g / dist^(p-1) (0 where dist is 0). p: rank-0 f64. */
static V dist_grad(em* e, V diff, V g, V dist, V p, const tpuc_hlo_type* dtp) {
  int r = dtp->rank;
  em e64 = em_make(e->c, TPUC_DTYPE_F64, dtp);
  V pf = e_bcast(&e64, p, dtp->dims, r, NULL);
  V pv = e_cvt(e, pf, dtp->dtype);
  V zero = e_k(e, 0.0), one = e_k(e, 1.0);
  V sg = e_un(e, TPUC_HLO_SIGN, diff), ad = e_abs(e, diff);
  V dist0 = e_cmp(e, TPUC_HLO_EQ, dist, zero);
  V pm1 = e_sub(e, pv, one);
  V dpow = e_bin(e, TPUC_HLO_POW, dist, pm1);
  V t1 = e_mul(e, g, sg);
  V tlt = e_div(e, e_mul(e, e_mul(e, sg, e_bin(e, TPUC_HLO_POW, ad, pm1)), g),
                dpow);
  tlt = e_sel(e, dist0, zero, tlt);
  V lt1 = e_cmp(&e64, TPUC_HLO_LT, pf, e_k(&e64, 1.0));
  tlt = e_sel(e, e_and(e, e_cmp(e, TPUC_HLO_EQ, diff, zero), lt1), zero, tlt);
  V t2 = e_sel(e, dist0, zero, e_div(e, e_mul(e, g, diff), dist));
  V tinf = e_mul(e, t1,
                 e_sub(e, one,
                       e_min(e, one, e_un(e, TPUC_HLO_CEIL,
                                          e_abs(e, e_sub(e, ad, dist))))));
  V tgen = e_mul(e, diff, e_bin(e, TPUC_HLO_POW, ad, e_sub(e, pv, e_k(e, 2.0))));
  tgen = e_sel(e, dist0, zero, e_div(e, e_mul(e, tgen, g), dpow));
  V r_ = tgen;
  r_ = e_sel(e, e_cmp(&e64, TPUC_HLO_LT, pf, e_k(&e64, 2.0)), tlt, r_);
  r_ = e_sel(e, e_cmp(&e64, TPUC_HLO_EQ, pf, e_k(&e64, INFINITY)), tinf, r_);
  r_ = e_sel(e, e_cmp(&e64, TPUC_HLO_EQ, pf, e_k(&e64, 2.0)), t2, r_);
  r_ = e_sel(e, e_cmp(&e64, TPUC_HLO_EQ, pf, e_k(&e64, 1.0)), t1, r_);
  r_ = e_sel(e, e_cmp(&e64, TPUC_HLO_EQ, pf, e_k(&e64, 0.0)), zero, r_);
  e_join(e, &e64);
  return r_;
}

/* _cdist_backward(grad [B.., P, R], x1 [B.., P, M], x2 [B.., R, M], p,
 * cdist [B.., P, R]) -> x1's gradient: dist_grad of every pair summed over
 * x2's rows (autograd gets x2's by swapping the arguments). */
static tpuc_status* lower_cdist_bw(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1) || !op_is_tensor(c, 2) ||
      !op_is_value(c, 3) || !op_is_tensor(c, 4))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type *gt = &c->types[0], *t = &c->types[1], *u = &c->types[2],
                      *ct = &c->types[4];
  tpuc_dtype dt = t->dtype;
  int r = t->rank;
  if ((dt != TPUC_DTYPE_F32 && dt != TPUC_DTYPE_F64) || r < 2 ||
      u->rank != r || gt->rank != r || ct->rank != r || u->dtype != dt ||
      gt->dtype != dt || ct->dtype != dt || t->dims[r - 1] != u->dims[r - 1])
    return op_unimpl("_cdist_backward: unusual arguments (CPU says why)");
  int64_t P = t->dims[r - 2], R = u->dims[r - 2], M = t->dims[r - 1];
  for (int d = 0; d < r - 2; d++)
    if (t->dims[d] != u->dims[d] || gt->dims[d] != t->dims[d] ||
        ct->dims[d] != t->dims[d])
      return op_unimpl("_cdist_backward: batch dims (CPU)");
  if (gt->dims[r - 2] != P || gt->dims[r - 1] != R || ct->dims[r - 2] != P ||
      ct->dims[r - 1] != R)
    return op_unimpl("_cdist_backward: shapes (CPU says why)");
  if (P == 0 || R == 0 || M == 0) return op_unimpl("empty _cdist_backward: CPU");
  if (tpuc_hlo_type_num_elements(t) / M * R * M > (1 << 24))
    return op_unimpl("_cdist_backward: large (CPU)");
  em e = em_make(c, dt, t);
  tpuc_hlo_type dtp;
  V a, b, p = -1;
  V diff = cdist_pairs(&e, c->vals[1], c->vals[2], t, R, &dtp, &a, &b);
  e.shape = dtp; /* its constants (dist_grad's) take the pairs' shape */
  TRY(op_scalar(c, 3, TPUC_DTYPE_F64, NULL, &p));
  int64_t mg[TPUC_MAX_RANK];
  for (int d = 0; d < r; d++) mg[d] = d;
  V g = e_bcast(&e, c->vals[0], dtp.dims, r + 1, mg);
  V dist = e_bcast(&e, c->vals[4], dtp.dims, r + 1, mg);
  V each = dist_grad(&e, diff, g, dist, p, &dtp);
  int64_t rows = r - 1;
  c->outs[0] = e_sum(&e, each, &rows, 1);
  c->nouts = 1;
  return e.st;
}

/* _pdist_backward(grad [K], self [N, M], p, pdist [K]) -> self's
 * gradient: for pair k = (i, j), i < j in row-major order, dist_grad of
 * x_i - x_j added to row i and taken from row j. */
static tpuc_status* lower_pdist_bw(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1) || !op_is_value(c, 2) ||
      !op_is_tensor(c, 3))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type *gt = &c->types[0], *t = &c->types[1], *pt = &c->types[3];
  tpuc_dtype dt = t->dtype;
  if ((dt != TPUC_DTYPE_F32 && dt != TPUC_DTYPE_F64) || t->rank != 2 ||
      gt->rank != 1 || pt->rank != 1 || gt->dtype != dt || pt->dtype != dt)
    return op_unimpl("_pdist_backward: unusual arguments (CPU says why)");
  int64_t N = t->dims[0], M = t->dims[1], K = N * (N - 1) / 2;
  if (gt->dims[0] != K || pt->dims[0] != K)
    return op_unimpl("_pdist_backward: shapes (CPU says why)");
  c->nouts = 1;
  if (K == 0 || M == 0) return op_const(c, dt, 0.0, t, &c->outs[0]);
  if (K * M > (1 << 24)) return op_unimpl("_pdist_backward: large (CPU)");
  tpuc_hlo_type dtp = tpuc_hlo_type_make(dt, (int64_t[]){K, M}, 2);
  em e = em_make(c, dt, &dtp);
  V vi, vj, p = -1;
  TRY(pdist_pairs(&e, N, K, &vi, &vj));
  TRY(op_scalar(c, 2, TPUC_DTYPE_F64, NULL, &p));
  V diff =
      e_sub(&e, e_take(&e, c->vals[1], 0, vi), e_take(&e, c->vals[1], 0, vj));
  int64_t m0 = 0;
  V g = e_bcast(&e, c->vals[0], dtp.dims, 2, &m0);
  V dist = e_bcast(&e, c->vals[3], dtp.dims, 2, &m0);
  V each = dist_grad(&e, diff, g, dist, p, &dtp);
  c->outs[0] = e_sub(&e, e_put_add(&e, each, 0, vi, N),
                     e_put_add(&e, each, 0, vj, N));
  return e.st;
}

static tpuc_status* lower_dist(op_ctx* c, int cdist) {
  int pi = cdist ? 2 : 1;
  if (!op_is_tensor(c, 0) || (cdist && !op_is_tensor(c, 1)) ||
      !op_is_value(c, pi))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* t = &c->types[0];
  tpuc_dtype dt = t->dtype;
  if (dt != TPUC_DTYPE_F32 && dt != TPUC_DTYPE_F64)
    return op_unimpl("dist: dtype (CPU says why)");
  V p = -1;
  TRY(op_scalar(c, pi, TPUC_DTYPE_F64, NULL, &p));
  tpuc_hlo_type dtp;
  V diff = -1, mm = -1;
  bool use_mm = false;
  em e = em_make(c, dt, t);
  if (!cdist) {
    if (t->rank != 2 || t->dims[1] == 0)
      return op_unimpl("pdist: unusual input (CPU)");
    int64_t N = t->dims[0], M = t->dims[1], K = N * (N - 1) / 2;
    if (K == 0) {
      /* (one row or none: no pairs) */
      tpuc_hlo_type et = tpuc_hlo_type_make(dt, &K, 1);
      TRY(op_const(c, dt, 0.0, &et, &c->outs[0]));
      c->nouts = 1;
      V zero = -1;
      TRY(tpuc_hlo_constant_f64(c->fn, TPUC_DTYPE_F64, 0.0, &zero));
      c->has_check = true;
      TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_LT, p, zero, &c->check));
      c->check_code = TPUC_INVALID_ARGUMENT;
      c->check_msg = "pdist only supports non-negative p values";
      return NULL;
    }
    if (K * M > (1 << 24)) return op_unimpl("pdist: large (CPU)");
    V vi, vj;
    TRY(pdist_pairs(&e, N, K, &vi, &vj));
    diff =
        e_sub(&e, e_take(&e, c->vals[0], 0, vi), e_take(&e, c->vals[0], 0, vj));
    dtp = tpuc_hlo_type_make(dt, (int64_t[]){K, M}, 2);
  } else {
    const tpuc_hlo_type* u = &c->types[1];
    int r = t->rank;
    if (r < 2 || u->rank != r || u->dtype != dt ||
        t->dims[r - 1] != u->dims[r - 1] || t->dims[r - 1] == 0 ||
        (!op_is_none(c, 3) && c->args[3].kind != TPUC_OP_ARG_INT))
      return op_unimpl("cdist: unusual arguments (CPU says why)");
    for (int d = 0; d < r - 2; d++)
      if (t->dims[d] != u->dims[d])
        return op_unimpl("cdist: broadcast batch (CPU)");
    int64_t P = t->dims[r - 2], R = u->dims[r - 2], M = t->dims[r - 1];
    if (P == 0 || R == 0) return op_unimpl("empty cdist: CPU");
    int64_t mode = op_is_none(c, 3) ? 0 : c->args[3].i;
    use_mm = mode == 1 || (mode == 0 && (P > 25 || R > 25));
    if (tpuc_hlo_type_num_elements(t) / M * R * M > (1 << 24))
      return op_unimpl("cdist: large (CPU)");
    V a, b;
    diff = cdist_pairs(&e, c->vals[0], c->vals[1], t, R, &dtp, &a, &b);
    if (use_mm) {
      /* |a|^2 + |b|^2 - 2 a.b as the CPU's product of the padded rows
       * [-2a, |a|^2, 1] . [b, 1, |b|^2], terms in that order */
      int64_t last = r;
      em eb = em_make(c, dt, &dtp);
      V dot =
          e_sum(&eb, e_mul(&eb, e_mul(&eb, a, e_k(&eb, -2.0)), b), &last, 1);
      V na = e_sum(&eb, e_mul(&eb, a, a), &last, 1);
      V nb = e_sum(&eb, e_mul(&eb, b, b), &last, 1);
      mm = e_add(&eb, e_add(&eb, dot, na), nb);
      tpuc_hlo_type rt = dtp;
      rt.rank = r;
      em er = em_make(c, dt, &rt);
      mm = e_un(&er, TPUC_HLO_SQRT, e_max(&er, mm, e_k(&er, 0.0)));
      e_join(&e, &eb);
      e_join(&e, &er);
    }
  }
  V out = dist_reduce(&e, diff, &dtp, p);
  if (use_mm) {
    tpuc_hlo_type rt = dtp;
    rt.rank--;
    em e64 = em_make(c, TPUC_DTYPE_F64, &rt);
    V two = e_cmp(&e64, TPUC_HLO_EQ, e_bcast(&e64, p, rt.dims, rt.rank, NULL),
                  e_k(&e64, 2.0));
    out = e_sel(&e, two, mm, out);
    e_join(&e, &e64);
  }
  /* negative p: the CPU refuses */
  em e0 = em_make(c, TPUC_DTYPE_F64, &(tpuc_hlo_type){TPUC_DTYPE_F64, 0, {0}});
  c->has_check = true;
  c->check = e_cmp(&e0, TPUC_HLO_LT, p, e_k(&e0, 0.0));
  c->check_code = TPUC_INVALID_ARGUMENT;
  c->check_msg = cdist ? "cdist only supports non-negative p values"
                       : "pdist only supports non-negative p values";
  e_join(&e, &e0);
  c->outs[0] = out;
  c->nouts = 1;
  return e.st;
}

/* embedding_renorm_(self [N, D], indices, max_norm, norm_type): every row
 * that an index names and whose norm exceeds max_norm is scaled by
 * max_norm / (norm + 1e-7), as the CPU does row by row: the norm in the
 * accumulation dtype rounded to self's dtype (the CPU's `row.norm()`),
 * the factor in double, rounded to self's dtype (the scalar operand of
 * `row *= scale`) and applied in the accumulation dtype. Rows no index
 * names, or within the bound, are multiplied by exactly 1 (the same
 * bits). An index out of range lets the CPU raise. */
static tpuc_status* lower_embedding_renorm(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1) || !op_is_value(c, 2) ||
      !op_is_value(c, 3))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type *t = &c->types[0], *it = &c->types[1];
  tpuc_dtype dt = t->dtype, at = op_accumulation_dtype(dt);
  if (!tpuc_dtype_is_float(dt) || t->rank != 2 ||
      (it->dtype != TPUC_DTYPE_S64 && it->dtype != TPUC_DTYPE_S32))
    return op_unimpl("embedding_renorm_: arguments the CPU refuses");
  int64_t N = t->dims[0], D = t->dims[1], n = tpuc_hlo_type_num_elements(it);
  c->nouts = 1;
  if (n == 0 || N == 0 || D == 0) {
    if (n > 0) return op_unimpl("embedding_renorm_: no rows (CPU raises)");
    c->outs[0] = c->vals[0];
    return NULL;
  }
  tpuc_hlo_type rt = tpuc_hlo_type_make(at, (int64_t[]){N}, 1);
  tpuc_hlo_type xt = tpuc_hlo_type_make(at, t->dims, 2);
  tpuc_hlo_type ft = tpuc_hlo_type_make(TPUC_DTYPE_F64, (int64_t[]){N}, 1);
  tpuc_hlo_type nt = tpuc_hlo_type_make(TPUC_DTYPE_S64, &n, 1);
  em e = em_make(c, at, &xt), er = em_make(c, at, &rt);
  em ef = em_make(c, TPUC_DTYPE_F64, &ft), ei = em_make(c, TPUC_DTYPE_S64, &nt);
  V p = -1, mx = -1;
  TRY(op_scalar(c, 3, TPUC_DTYPE_F64, NULL, &p));
  TRY(op_scalar(c, 2, TPUC_DTYPE_F64, &ft, &mx));
  V idx = e_cvt(&ei, e_reshape(&ei, c->vals[1], &n, 1), TPUC_DTYPE_S64);
  V bad = e_or(&ei, e_cmp(&ei, TPUC_HLO_LT, idx, e_k(&ei, 0.0)),
               e_cmp(&ei, TPUC_HLO_GE, idx, e_k(&ei, (double)N)));
  TRY(ei.st);
  TRY(op_any_true(c, bad, &c->check));
  c->has_check = true;
  c->check_code = TPUC_UNIMPLEMENTED; /* the CPU raises its IndexError */
  c->check_msg = "embedding_renorm_: index out of range";
  /* named rows: a count per row (out-of-range indices add nothing) */
  tpuc_hlo_type ot = tpuc_hlo_type_make(at, &n, 1);
  em eo = em_make(c, at, &ot);
  V named = e_cmp(&er, TPUC_HLO_GT, e_put_add(&eo, e_k(&eo, 1.0), 0, idx, N),
                  e_k(&er, 0.0));
  /* the norms: p = -inf is the smallest magnitude, the rest as pdist's */
  V x = e_cvt(&e, c->vals[0], at);
  V norm = dist_reduce(&e, x, &xt, p);
  {
    int64_t last = 1;
    V lo = e_fold(&e, e_abs(&e, x), &last, 1, TPUC_HLO_MIN, INFINITY);
    V pf = e_bcast(&ef, p, ft.dims, 1, NULL);
    norm =
        e_sel(&er, e_cmp(&ef, TPUC_HLO_EQ, pf, e_k(&ef, -INFINITY)), lo, norm);
  }
  V nf = e_cvt(&ef, e_cvt(&er, norm, dt), TPUC_DTYPE_F64);
  V scale = e_div(&ef, mx, e_add(&ef, nf, e_k(&ef, 1e-7)));
  V big = e_and(&ef, named, e_cmp(&ef, TPUC_HLO_GT, nf, mx));
  V s = e_sel(&er, big, e_cvt(&er, e_cvt(&ef, scale, dt), at), e_k(&er, 1.0));
  int64_t m0 = 0;
  V r = e_mul(&e, x, e_bcast(&e, s, xt.dims, 2, &m0));
  c->outs[0] = e_cvt(&e, r, dt);
  e_join(&e, &er);
  e_join(&e, &ef);
  e_join(&e, &eo);
  return e.st;
}

/* ---------------------------------------------------------------------- */
/* multi_margin_loss(self, target, p, margin, weight, reduction) and its
 * backward (grad_output, self, target, p, margin, weight, reduction):
 * per row, sum over d != y of max(0, margin - x[y] + x[d])^p (times
 * weight[y]) / C, in the input dtype as the CPU. p (1 or 2) and margin
 * are program values. */
static tpuc_status* lower_multi_margin(op_ctx* c, int backward) {
  int o = backward ? 1 : 0;
  int xi = o, ti = o + 1, pi = o + 2, mi = o + 3, wi = o + 4, ri = o + 5;
  if (!op_is_tensor(c, xi) || !op_is_tensor(c, ti) || !op_is_value(c, pi) ||
      !op_is_value(c, mi) || c->args[ri].kind != TPUC_OP_ARG_INT ||
      (backward && !op_is_tensor(c, 0)))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* t = &c->types[xi];
  const tpuc_hlo_type* tt = &c->types[ti];
  tpuc_dtype dt = t->dtype;
  int64_t red = c->args[ri].i;
  if ((dt != TPUC_DTYPE_F32 && dt != TPUC_DTYPE_F64) || t->rank > 2 ||
      tt->dtype != TPUC_DTYPE_S64 || red < 0 || red > 2)
    return op_unimpl("multi_margin_loss: unusual arguments (CPU)");
  /* (a 0-d input is one row of one class) */
  int64_t N = t->rank == 2 ? t->dims[0] : 1;
  int64_t C = t->rank == 0 ? 1 : t->dims[t->rank - 1];
  if (N == 0 || C == 0 || tpuc_hlo_type_num_elements(tt) != N || tt->rank > 1 ||
      (t->rank < 2 && tt->rank != 0 && tt->dims[0] != 1))
    return op_unimpl("multi_margin_loss: unusual shapes (CPU says why)");
  bool has_w = !op_is_none(c, wi);
  if (has_w && (!op_is_tensor(c, wi) || c->types[wi].dtype != dt ||
                tpuc_hlo_type_num_elements(&c->types[wi]) != C))
    return op_unimpl("multi_margin_loss: unusual weight (CPU says why)");
  int64_t nc[2] = {N, C}, one = 1, zero = 0;
  tpuc_hlo_type mt = tpuc_hlo_type_make(dt, nc, 2);
  tpuc_hlo_type it = tpuc_hlo_type_make(TPUC_DTYPE_S64, nc, 2);
  tpuc_hlo_type nt = tpuc_hlo_type_make(dt, &N, 1);
  em e = em_make(c, dt, &mt), ei = em_make(c, TPUC_DTYPE_S64, &it);
  em en = em_make(c, dt, &nt);
  V x = e_reshape(&e, c->vals[xi], nc, 2);
  V y = e_reshape(&ei, c->vals[ti], &N, 1);
  V yb = e_bcast(&ei, y, nc, 2, &zero);
  V is_y = e_cmp(&ei, TPUC_HLO_EQ, e_iota(&ei, &it, 1), yb);
  /* the target's value and weight per row (masked sums: exact) */
  V xt = e_sum(&e, e_sel(&e, is_y, x, e_k(&e, 0.0)), &one, 1);
  V wy = -1;
  if (has_w) {
    V wv = e_bcast(&e, e_reshape(&e, c->vals[wi], &C, 1), nc, 2, &one);
    wy = e_sum(&e, e_sel(&e, is_y, wv, e_k(&e, 0.0)), &one, 1);
  }
  V z =
      e_add(&e, e_bcast(&e, e_sub(&en, e_scal(&en, mi), xt), nc, 2, &zero), x);
  V on = e_and(&ei, e_cmp(&e, TPUC_HLO_GT, z, e_k(&e, 0.0)),
               e_un(&ei, TPUC_HLO_NOT, is_y));
  V p2 = e_cmp(&e, TPUC_HLO_EQ, e_scal(&e, pi), e_k(&e, 2.0));
  V r;
  if (!backward) {
    V h = e_sel(&e, p2, e_mul(&e, z, z), z);
    if (has_w) h = e_mul(&e, h, e_bcast(&e, wy, nc, 2, &zero));
    V row = e_div(&en, e_sum(&e, e_sel(&e, on, h, e_k(&e, 0.0)), &one, 1),
                  e_k(&en, (double)C));
    if (red == 0) {
      r = t->rank == 2 ? row : e_reshape(&en, row, NULL, 0);
    } else {
      em e0 = em_make(c, dt, &(tpuc_hlo_type){dt, 0, {0}});
      r = e_sum(&en, row, &zero, 1);
      if (red == 1) r = e_div(&e0, r, e_k(&e0, (double)N));
      e_join(&e, &e0);
    }
  } else {
    /* h = g (p = 1) or 2 g z, g = 1 / C (mean: 1 / (N C)); the target
     * gets minus the row's sum; times grad_output */
    double g = red == 1 ? 1.0 / ((double)N * (double)C) : 1.0 / (double)C;
    em e1 = em_make(c, dt, &(tpuc_hlo_type){dt, 0, {0}});
    V gk = e_k(&e, g);
    if (red == 1) {
      /* (the CPU's 1. / (nframe * dim) in the dtype) */
      V gs = e_div(&e1, e_k(&e1, 1.0), e_k(&e1, (double)N * (double)C));
      gk = e_bcast(&e, gs, nc, 2, NULL);
    }
    V h = e_sel(&e, p2, e_mul(&e, e_mul(&e, e_k(&e, 2.0), gk), z), gk);
    if (has_w) h = e_mul(&e, h, e_bcast(&e, wy, nc, 2, &zero));
    h = e_sel(&e, on, h, e_k(&e, 0.0));
    V tsum = e_sum(&e, h, &one, 1);
    V gi = e_sel(&e, is_y, e_bcast(&e, e_neg(&en, tsum), nc, 2, &zero), h);
    const tpuc_hlo_type* gt = &c->types[0];
    V go;
    if (red != 0 || gt->rank == 0) {
      if (tpuc_hlo_type_num_elements(gt) != 1 || gt->dtype != dt)
        e.st = e.st ? e.st : op_unimpl("unusual grad_output (CPU)");
      go = e_bcast(&e, e_reshape(&e, c->vals[0], NULL, 0), nc, 2, NULL);
    } else {
      if (tpuc_hlo_type_num_elements(gt) != N || gt->dtype != dt)
        e.st = e.st ? e.st : op_unimpl("unusual grad_output (CPU)");
      go = e_bcast(&e, e_reshape(&e, c->vals[0], &N, 1), nc, 2, &zero);
    }
    r = e_reshape(&e, e_mul(&e, gi, go), t->dims, t->rank);
    e_join(&e, &e1);
  }
  /* the CPU's checks: targets in range, p 1 or 2 */
  em eb = em_make(c, TPUC_DTYPE_S64, &(tpuc_hlo_type){TPUC_DTYPE_S64, 1, {N}});
  V oob = e_or(&eb, e_cmp(&eb, TPUC_HLO_LT, y, e_k(&eb, 0.0)),
               e_cmp(&eb, TPUC_HLO_GE, y, e_k(&eb, (double)C)));
  V nbad = e_sum(&eb, e_cvt(&eb, oob, TPUC_DTYPE_S64), &zero, 1);
  em e0 = em_make(c, TPUC_DTYPE_S64, &(tpuc_hlo_type){TPUC_DTYPE_S64, 0, {0}});
  em f0 = em_make(c, TPUC_DTYPE_F64, &(tpuc_hlo_type){TPUC_DTYPE_F64, 0, {0}});
  V pv = e_scal(&f0, pi);
  V pbad = e_and(&f0, e_cmp(&f0, TPUC_HLO_NE, pv, e_k(&f0, 1.0)),
                 e_cmp(&f0, TPUC_HLO_NE, pv, e_k(&f0, 2.0)));
  c->has_check = true;
  c->check = e_or(&e0, e_cmp(&e0, TPUC_HLO_GT, nbad, e_k(&e0, 0.0)), pbad);
  c->check_code = TPUC_INVALID_ARGUMENT;
  c->check_msg = "multi_margin_loss: target out of range, or p not 1 or 2";
  e_join(&e, &ei);
  e_join(&e, &en);
  e_join(&e, &eb);
  e_join(&e, &e0);
  e_join(&e, &f0);
  c->outs[0] = r;
  c->nouts = 1;
  return e.st;
}

/* ---------------------------------------------------------------------- */
/* multilabel_margin_loss_forward(self, target, reduction) -> (output,
 * is_target) and its backward (grad_output, self, target, reduction,
 * is_target). Per row, the targets are target's entries before the first
 * negative one; the loss sums max(0, 1 - x[t] + x[d]) over those t and
 * the non-target d (in f64 for f32, the CPU's accumulation type), over
 * C. Tensors of [N, C(k), C(d)] pair every target entry with every
 * class. */
static tpuc_status* lower_multilabel_margin(op_ctx* c, int backward) {
  int o = backward ? 1 : 0;
  int xi = o, ti = o + 1, ri = o + 2;
  if (!op_is_tensor(c, xi) || !op_is_tensor(c, ti) ||
      c->args[ri].kind != TPUC_OP_ARG_INT ||
      (backward && (!op_is_tensor(c, 0) || !op_is_tensor(c, 4))))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* t = &c->types[xi];
  const tpuc_hlo_type* tt = &c->types[ti];
  tpuc_dtype dt = t->dtype;
  int64_t red = c->args[ri].i;
  if ((dt != TPUC_DTYPE_F32 && dt != TPUC_DTYPE_F64) || t->rank > 2 ||
      tt->dtype != TPUC_DTYPE_S64 || !same_dims(t, tt) || red < 0 || red > 2)
    return op_unimpl("multilabel_margin_loss: unusual arguments (CPU)");
  int64_t N = t->rank == 2 ? t->dims[0] : 1;
  int64_t C = t->rank == 0 ? 1 : t->dims[t->rank - 1];
  if (N == 0 || C == 0 || N * C * C > (1 << 24))
    return op_unimpl("multilabel_margin_loss: sizes (CPU)");
  if (backward && (c->types[4].dtype != dt || !same_dims(&c->types[4], t)))
    return op_unimpl("multilabel_margin_loss backward: is_target (CPU)");
  int64_t nc[2] = {N, C}, nkd[3] = {N, C, C}, two = 2, one = 1;
  tpuc_hlo_type it2 = tpuc_hlo_type_make(TPUC_DTYPE_S64, nc, 2);
  tpuc_hlo_type it3 = tpuc_hlo_type_make(TPUC_DTYPE_S64, nkd, 3);
  tpuc_hlo_type ft3 = tpuc_hlo_type_make(dt, nkd, 3);
  em ei = em_make(c, TPUC_DTYPE_S64, &it2),
     ek = em_make(c, TPUC_DTYPE_S64, &it3);
  em e3 = em_make(c, dt, &ft3);
  V tg = e_reshape(&ei, c->vals[ti], nc, 2);
  V x = e_reshape(&e3, c->vals[xi], nc, 2);
  /* valid[n, k]: no negative entry among target[n, 0..k] */
  V negk = e_bcast(&ek, e_cmp(&ei, TPUC_HLO_LT, tg, e_k(&ei, 0.0)), nkd, 3,
                   (int64_t[]){0, 2});
  V upto = e_cmp(&ek, TPUC_HLO_LE, e_iota(&ek, &it3, 2), e_iota(&ek, &it3, 1));
  V nneg =
      e_sum(&ek, e_cvt(&ek, e_and(&ek, negk, upto), TPUC_DTYPE_S64), &two, 1);
  V valid = e_cmp(&ei, TPUC_HLO_EQ, nneg, e_k(&ei, 0.0));
  /* hit[n, k, d]: entry k is valid and names class d */
  V tk = e_bcast(&ek, tg, nkd, 3, (int64_t[]){0, 1});
  V vk = e_bcast(&ek, valid, nkd, 3, (int64_t[]){0, 1});
  V hit = e_and(&ek, vk, e_cmp(&ek, TPUC_HLO_EQ, tk, e_iota(&ek, &it3, 2)));
  V is_t;
  if (!backward) {
    V cnt = e_sum(&ek, e_cvt(&ek, hit, TPUC_DTYPE_S64), &one, 1);
    is_t = e_cmp(&ei, TPUC_HLO_GT, cnt, e_k(&ei, 0.0));
  } else {
    em ef = em_make(c, dt, &(tpuc_hlo_type){dt, 2, {N, C}});
    is_t = e_cmp(&ef, TPUC_HLO_NE, e_reshape(&ef, c->vals[4], nc, 2),
                 e_k(&ef, 0.0));
    e_join(&ei, &ef);
  }
  /* x[n, t_k] (any class for invalid entries: masked) */
  V xt = e_sum(&e3,
               e_sel(&e3, hit, e_bcast(&e3, x, nkd, 3, (int64_t[]){0, 2}),
                     e_k(&e3, 0.0)),
               &two, 1);
  V z = e_add(
      &e3,
      e_sub(&e3, e_k(&e3, 1.0), e_bcast(&e3, xt, nkd, 3, (int64_t[]){0, 1})),
      e_bcast(&e3, x, nkd, 3, (int64_t[]){0, 2}));
  V nt = e_bcast(&ek, e_un(&ei, TPUC_HLO_NOT, is_t), nkd, 3, (int64_t[]){0, 2});
  V on =
      e_and(&ek, e_and(&ek, vk, nt), e_cmp(&e3, TPUC_HLO_GT, z, e_k(&e3, 0.0)));
  V r;
  if (!backward) {
    tpuc_hlo_type f3 = ft3;
    f3.dtype = TPUC_DTYPE_F64;
    em ew = em_make(c, TPUC_DTYPE_F64, &f3);
    V zs = e_sel(&ew, on, e_cvt(&ew, z, TPUC_DTYPE_F64), e_k(&ew, 0.0));
    V row = e_sum(&ew, zs, (int64_t[]){1, 2}, 2);
    em er =
        em_make(c, TPUC_DTYPE_F64, &(tpuc_hlo_type){TPUC_DTYPE_F64, 1, {N}});
    em e0 =
        em_make(c, TPUC_DTYPE_F64, &(tpuc_hlo_type){TPUC_DTYPE_F64, 0, {0}});
    if (red == 0 && t->rank == 2) {
      r = e_cvt(&er, e_div(&er, row, e_k(&er, (double)C)), dt);
    } else {
      V s = e_div(&e0, e_sum(&er, row, (int64_t[]){0}, 1), e_k(&e0, (double)C));
      if (red == 1) s = e_div(&e0, s, e_k(&e0, (double)N));
      r = e_cvt(&e0, s, dt);
    }
    e_join(&ei, &ew);
    e_join(&ei, &er);
    e_join(&ei, &e0);
    c->outs[1] = e_reshape(&ei, e_cvt(&ei, is_t, dt), t->dims, t->rank);
    c->nouts = 2;
  } else {
    /* + g at each d per (k, d) on, - g at t_k per such pair */
    double g = red == 1 ? 1.0 / ((double)N * (double)C) : 1.0 / (double)C;
    if (dt == TPUC_DTYPE_F32) g = (double)(float)g;
    V onc = e_cvt(&e3, on, dt);
    V pos = e_sum(&e3, onc, &one, 1);
    V m = e_sum(&e3, onc, &two, 1);
    V negs = e_sum(&e3,
                   e_sel(&e3, hit, e_bcast(&e3, m, nkd, 3, (int64_t[]){0, 1}),
                         e_k(&e3, 0.0)),
                   &one, 1);
    em ef = em_make(c, dt, &(tpuc_hlo_type){dt, 2, {N, C}});
    V gi = e_mul(&ef, e_sub(&ef, pos, negs), e_k(&ef, g));
    const tpuc_hlo_type* gt = &c->types[0];
    V go;
    if (red != 0 || gt->rank == 0) {
      if (tpuc_hlo_type_num_elements(gt) != 1 || gt->dtype != dt)
        ef.st = ef.st ? ef.st : op_unimpl("unusual grad_output (CPU)");
      go = e_bcast(&ef, e_reshape(&ef, c->vals[0], NULL, 0), nc, 2, NULL);
    } else {
      if (tpuc_hlo_type_num_elements(gt) != N || gt->dtype != dt)
        ef.st = ef.st ? ef.st : op_unimpl("unusual grad_output (CPU)");
      go = e_bcast(&ef, e_reshape(&ef, c->vals[0], &N, 1), nc, 2,
                   (int64_t[]){0});
    }
    r = e_reshape(&ef, e_mul(&ef, gi, go), t->dims, t->rank);
    e_join(&ei, &ef);
    c->nouts = 1;
  }
  c->outs[0] = r;
  /* the CPU's check: every target entry in [-1, C) */
  V oob = e_or(&ei, e_cmp(&ei, TPUC_HLO_LT, tg, e_k(&ei, -1.0)),
               e_cmp(&ei, TPUC_HLO_GE, tg, e_k(&ei, (double)C)));
  V nb = e_sum(&ei, e_cvt(&ei, oob, TPUC_DTYPE_S64), (int64_t[]){0, 1}, 2);
  em e0 = em_make(c, TPUC_DTYPE_S64, &(tpuc_hlo_type){TPUC_DTYPE_S64, 0, {0}});
  c->has_check = true;
  c->check = e_cmp(&e0, TPUC_HLO_GT, nb, e_k(&e0, 0.0));
  c->check_code = TPUC_INVALID_ARGUMENT;
  c->check_msg = "argument #2 'target' is out of range";
  e_join(&ei, &e0);
  e_join(&ei, &ek);
  e_join(&ei, &e3);
  return ei.st;
}

/* ---------------------------------------------------------------------- */

const op_entry op_table_nn[] = {
    {"aten::native_layer_norm", lower_layer_norm, 0},
    {"aten::native_layer_norm.out", lower_layer_norm, 0},
    {"aten::native_layer_norm_backward", lower_layer_norm_bw, 0},
    {"aten::native_layer_norm_backward.out", lower_layer_norm_bw, 0},
    {"aten::_weight_norm_interface", lower_weight_norm, 0},
    {"aten::_transform_bias_rescale_qkv", lower_qkv_rescale, 0},
    {"aten::_masked_softmax", lower_masked_softmax, 0},
    {"aten::_thnn_fused_lstm_cell", lower_lstm_cell, 0},
    {"aten::_thnn_fused_lstm_cell_backward_impl", lower_lstm_cell_bw, 0},
    {"aten::_thnn_fused_gru_cell", lower_gru_cell, 0},
    {"aten::_thnn_fused_gru_cell_backward", lower_gru_cell_bw, 0},
    {"aten::_weight_norm_interface_backward", lower_weight_norm, 1},
    {"aten::gelu", lower_act, ACT_GELU},
    {"aten::gelu_", lower_act, ACT_GELU},
    {"aten::gelu.out", lower_act, ACT_GELU},
    {"aten::gelu_backward", lower_act, ACT_GELU_BW},
    {"aten::gelu_backward.grad_input", lower_act, ACT_GELU_BW},
    {"aten::silu", lower_act, ACT_SILU},
    {"aten::silu_", lower_act, ACT_SILU},
    {"aten::silu.out", lower_act, ACT_SILU},
    {"aten::silu_backward", lower_act, ACT_SILU_BW},
    {"aten::silu_backward.grad_input", lower_act, ACT_SILU_BW},
    {"aten::mish", lower_act, ACT_MISH},
    {"aten::mish_", lower_act, ACT_MISH},
    {"aten::mish.out", lower_act, ACT_MISH},
    {"aten::mish_backward", lower_act, ACT_MISH_BW},
    {"aten::hardswish", lower_act, ACT_HARDSWISH},
    {"aten::hardswish_", lower_act, ACT_HARDSWISH},
    {"aten::hardswish.out", lower_act, ACT_HARDSWISH},
    {"aten::hardswish_backward", lower_act, ACT_HARDSWISH_BW},
    {"aten::hardswish_backward.out", lower_act, ACT_HARDSWISH_BW},
    {"aten::hardsigmoid", lower_act, ACT_HARDSIGMOID},
    {"aten::hardsigmoid_", lower_act, ACT_HARDSIGMOID},
    {"aten::hardsigmoid.out", lower_act, ACT_HARDSIGMOID},
    {"aten::hardsigmoid_backward", lower_act, ACT_HARDSIGMOID_BW},
    {"aten::hardsigmoid_backward.grad_input", lower_act, ACT_HARDSIGMOID_BW},
    {"aten::hardtanh", lower_act, ACT_HARDTANH},
    {"aten::hardtanh_", lower_act, ACT_HARDTANH},
    {"aten::hardtanh.out", lower_act, ACT_HARDTANH},
    {"aten::hardtanh_backward", lower_act, ACT_HARDTANH_BW},
    {"aten::hardtanh_backward.grad_input", lower_act, ACT_HARDTANH_BW},
    {"aten::leaky_relu", lower_act, ACT_LEAKY_RELU},
    {"aten::leaky_relu_", lower_act, ACT_LEAKY_RELU},
    {"aten::leaky_relu.out", lower_act, ACT_LEAKY_RELU},
    {"aten::leaky_relu_backward", lower_act, ACT_LEAKY_RELU_BW},
    {"aten::leaky_relu_backward.grad_input", lower_act, ACT_LEAKY_RELU_BW},
    {"aten::elu", lower_act, ACT_ELU},
    {"aten::elu_", lower_act, ACT_ELU},
    {"aten::elu.out", lower_act, ACT_ELU},
    {"aten::elu_backward", lower_act, ACT_ELU_BW},
    {"aten::elu_backward.grad_input", lower_act, ACT_ELU_BW},
    {"aten::softplus", lower_act, ACT_SOFTPLUS},
    {"aten::softplus.out", lower_act, ACT_SOFTPLUS},
    {"aten::softplus_backward", lower_act, ACT_SOFTPLUS_BW},
    {"aten::softplus_backward.grad_input", lower_act, ACT_SOFTPLUS_BW},
    {"aten::log_sigmoid_forward", lower_act, ACT_LOG_SIGMOID},
    {"aten::log_sigmoid_forward.output", lower_act, ACT_LOG_SIGMOID},
    {"aten::log_sigmoid_backward", lower_act, ACT_LOG_SIGMOID_BW},
    {"aten::log_sigmoid_backward.grad_input", lower_act, ACT_LOG_SIGMOID_BW},
    {"aten::threshold_backward", lower_act, ACT_THRESHOLD_BW},
    {"aten::threshold_backward.grad_input", lower_act, ACT_THRESHOLD_BW},
    {"aten::sigmoid_backward", lower_act, ACT_SIGMOID_BW},
    {"aten::sigmoid_backward.grad_input", lower_act, ACT_SIGMOID_BW},
    {"aten::tanh_backward", lower_act, ACT_TANH_BW},
    {"aten::tanh_backward.grad_input", lower_act, ACT_TANH_BW},
    {"aten::_softmax_backward_data", lower_softmax_bw, 0},
    {"aten::_softmax_backward_data.out", lower_softmax_bw, 0},
    {"aten::_log_softmax_backward_data", lower_softmax_bw, 1},
    {"aten::_log_softmax_backward_data.out", lower_softmax_bw, 1},
    {"aten::nll_loss_forward", lower_nll, 0},
    {"aten::nll_loss_forward.output", lower_nll, 0},
    {"aten::nll_loss_backward", lower_nll, 1},
    {"aten::nll_loss_backward.grad_input", lower_nll, 1},
    {"aten::nll_loss2d_forward", lower_nll, 0},
    {"aten::nll_loss2d_forward.output", lower_nll, 0},
    {"aten::nll_loss2d_backward", lower_nll, 1},
    {"aten::nll_loss2d_backward.grad_input", lower_nll, 1},
    {"aten::mse_loss", lower_pointwise_loss, LOSS_MSE},
    {"aten::mse_loss.out", lower_pointwise_loss, LOSS_MSE},
    {"aten::mse_loss_backward", lower_pointwise_loss, LOSS_MSE | LOSS_BW},
    {"aten::mse_loss_backward.grad_input", lower_pointwise_loss,
     LOSS_MSE | LOSS_BW},
    {"aten::binary_cross_entropy", lower_pointwise_loss, LOSS_BCE},
    {"aten::binary_cross_entropy.out", lower_pointwise_loss, LOSS_BCE},
    {"aten::binary_cross_entropy_backward", lower_pointwise_loss,
     LOSS_BCE | LOSS_BW},
    {"aten::binary_cross_entropy_backward.grad_input", lower_pointwise_loss,
     LOSS_BCE | LOSS_BW},
    {"aten::smooth_l1_loss", lower_pointwise_loss, LOSS_SMOOTH_L1},
    {"aten::smooth_l1_loss.out", lower_pointwise_loss, LOSS_SMOOTH_L1},
    {"aten::smooth_l1_loss_backward", lower_pointwise_loss,
     LOSS_SMOOTH_L1 | LOSS_BW},
    {"aten::smooth_l1_loss_backward.grad_input", lower_pointwise_loss,
     LOSS_SMOOTH_L1 | LOSS_BW},
    {"aten::huber_loss", lower_pointwise_loss, LOSS_HUBER},
    {"aten::huber_loss.out", lower_pointwise_loss, LOSS_HUBER},
    {"aten::huber_loss_backward", lower_pointwise_loss, LOSS_HUBER | LOSS_BW},
    {"aten::huber_loss_backward.out", lower_pointwise_loss,
     LOSS_HUBER | LOSS_BW},
    {"aten::convolution", lower_conv, 0},
    {"aten::convolution.out", lower_conv, 0},
    {"aten::convolution_backward", lower_conv_bw, 0},
    {"aten::convolution_backward.out", lower_conv_bw, 0},
    {"aten::_native_batch_norm_legit", lower_batch_norm, BN_LEGIT},
    {"aten::_native_batch_norm_legit.out", lower_batch_norm, BN_LEGIT},
    {"aten::_native_batch_norm_legit.no_stats", lower_batch_norm, BN_NO_STATS},
    {"aten::_native_batch_norm_legit.no_stats_out", lower_batch_norm,
     BN_NO_STATS},
    {"aten::_native_batch_norm_legit_no_training", lower_batch_norm,
     BN_NO_TRAINING},
    {"aten::_native_batch_norm_legit_no_training.out", lower_batch_norm,
     BN_NO_TRAINING},
    {"aten::native_batch_norm_backward", lower_batch_norm_bw, 0},
    {"aten::native_batch_norm_backward.out", lower_batch_norm_bw, 0},
    {"aten::native_group_norm", lower_group_norm, 0},
    {"aten::native_group_norm.out", lower_group_norm, 0},
    {"aten::native_group_norm_backward", lower_group_norm_bw, 0},
    {"aten::native_group_norm_backward.out", lower_group_norm_bw, 0},
    {"aten::max_pool2d_with_indices", lower_max_pool2d, 2},
    {"aten::max_pool2d_with_indices.out", lower_max_pool2d, 2},
    {"aten::max_pool2d_with_indices_backward", lower_max_pool2d_bw, 2},
    {"aten::max_pool2d_with_indices_backward.grad_input", lower_max_pool2d_bw,
     2},
    {"aten::avg_pool2d", lower_avg_pool2d, 2},
    {"aten::avg_pool2d.out", lower_avg_pool2d, 2},
    {"aten::avg_pool2d_backward", lower_avg_pool2d_bw, 2},
    {"aten::avg_pool2d_backward.grad_input", lower_avg_pool2d_bw, 2},
    {"aten::_adaptive_avg_pool2d", lower_adaptive_avg_pool2d, 2},
    {"aten::_adaptive_avg_pool2d.out", lower_adaptive_avg_pool2d, 2},
    {"aten::_adaptive_avg_pool2d_backward", lower_adaptive_avg_pool2d_bw, 2},
    {"aten::_adaptive_avg_pool2d_backward.out", lower_adaptive_avg_pool2d_bw,
     2},
    {"aten::adaptive_max_pool2d", lower_adaptive_max_pool2d, 2},
    {"aten::adaptive_max_pool2d.out", lower_adaptive_max_pool2d, 2},
    {"aten::adaptive_max_pool2d_backward", lower_adaptive_max_pool2d_bw, 2},
    {"aten::adaptive_max_pool2d_backward.grad_input",
     lower_adaptive_max_pool2d_bw, 2},
    {"aten::upsample_nearest1d", lower_upsample, UP_NEAREST | 1 << 4},
    {"aten::upsample_nearest1d.out", lower_upsample, UP_NEAREST | 1 << 4},
    {"aten::upsample_nearest1d_backward", lower_upsample,
     UP_NEAREST | UP_BW | 1 << 4},
    {"aten::upsample_nearest1d_backward.grad_input", lower_upsample,
     UP_NEAREST | UP_BW | 1 << 4},
    {"aten::upsample_nearest2d", lower_upsample, UP_NEAREST | 2 << 4},
    {"aten::upsample_nearest2d.out", lower_upsample, UP_NEAREST | 2 << 4},
    {"aten::upsample_nearest2d_backward", lower_upsample,
     UP_NEAREST | UP_BW | 2 << 4},
    {"aten::upsample_nearest2d_backward.grad_input", lower_upsample,
     UP_NEAREST | UP_BW | 2 << 4},
    {"aten::upsample_nearest3d", lower_upsample, UP_NEAREST | 3 << 4},
    {"aten::upsample_nearest3d.out", lower_upsample, UP_NEAREST | 3 << 4},
    {"aten::upsample_nearest3d_backward", lower_upsample,
     UP_NEAREST | UP_BW | 3 << 4},
    {"aten::upsample_nearest3d_backward.grad_input", lower_upsample,
     UP_NEAREST | UP_BW | 3 << 4},
    {"aten::_upsample_nearest_exact1d", lower_upsample,
     UP_NEAREST_EXACT | 1 << 4},
    {"aten::_upsample_nearest_exact1d.out", lower_upsample,
     UP_NEAREST_EXACT | 1 << 4},
    {"aten::_upsample_nearest_exact1d_backward", lower_upsample,
     UP_NEAREST_EXACT | UP_BW | 1 << 4},
    {"aten::_upsample_nearest_exact1d_backward.grad_input", lower_upsample,
     UP_NEAREST_EXACT | UP_BW | 1 << 4},
    {"aten::_upsample_nearest_exact2d", lower_upsample,
     UP_NEAREST_EXACT | 2 << 4},
    {"aten::_upsample_nearest_exact2d.out", lower_upsample,
     UP_NEAREST_EXACT | 2 << 4},
    {"aten::_upsample_nearest_exact2d_backward", lower_upsample,
     UP_NEAREST_EXACT | UP_BW | 2 << 4},
    {"aten::_upsample_nearest_exact2d_backward.grad_input", lower_upsample,
     UP_NEAREST_EXACT | UP_BW | 2 << 4},
    {"aten::_upsample_nearest_exact3d", lower_upsample,
     UP_NEAREST_EXACT | 3 << 4},
    {"aten::_upsample_nearest_exact3d.out", lower_upsample,
     UP_NEAREST_EXACT | 3 << 4},
    {"aten::_upsample_nearest_exact3d_backward", lower_upsample,
     UP_NEAREST_EXACT | UP_BW | 3 << 4},
    {"aten::_upsample_nearest_exact3d_backward.grad_input", lower_upsample,
     UP_NEAREST_EXACT | UP_BW | 3 << 4},
    {"aten::upsample_bilinear2d", lower_upsample, UP_LINEAR | 2 << 4},
    {"aten::upsample_bilinear2d.out", lower_upsample, UP_LINEAR | 2 << 4},
    {"aten::upsample_bilinear2d_backward", lower_upsample,
     UP_LINEAR | UP_BW | 2 << 4},
    {"aten::upsample_bilinear2d_backward.grad_input", lower_upsample,
     UP_LINEAR | UP_BW | 2 << 4},
    {"aten::reflection_pad1d", lower_pad_mode, PAD_REFLECT | 1 << 4},
    {"aten::reflection_pad1d.out", lower_pad_mode, PAD_REFLECT | 1 << 4},
    {"aten::reflection_pad1d_backward", lower_pad_mode,
     PAD_REFLECT | PAD_BW | 1 << 4},
    {"aten::reflection_pad1d_backward.grad_input", lower_pad_mode,
     PAD_REFLECT | PAD_BW | 1 << 4},
    {"aten::reflection_pad2d", lower_pad_mode, PAD_REFLECT | 2 << 4},
    {"aten::reflection_pad2d.out", lower_pad_mode, PAD_REFLECT | 2 << 4},
    {"aten::reflection_pad2d_backward", lower_pad_mode,
     PAD_REFLECT | PAD_BW | 2 << 4},
    {"aten::reflection_pad2d_backward.grad_input", lower_pad_mode,
     PAD_REFLECT | PAD_BW | 2 << 4},
    {"aten::replication_pad1d", lower_pad_mode, PAD_REPLICATE | 1 << 4},
    {"aten::replication_pad1d.out", lower_pad_mode, PAD_REPLICATE | 1 << 4},
    {"aten::replication_pad1d_backward", lower_pad_mode,
     PAD_REPLICATE | PAD_BW | 1 << 4},
    {"aten::replication_pad1d_backward.grad_input", lower_pad_mode,
     PAD_REPLICATE | PAD_BW | 1 << 4},
    {"aten::replication_pad2d", lower_pad_mode, PAD_REPLICATE | 2 << 4},
    {"aten::replication_pad2d.out", lower_pad_mode, PAD_REPLICATE | 2 << 4},
    {"aten::replication_pad2d_backward", lower_pad_mode,
     PAD_REPLICATE | PAD_BW | 2 << 4},
    {"aten::replication_pad2d_backward.grad_input", lower_pad_mode,
     PAD_REPLICATE | PAD_BW | 2 << 4},
    {"aten::hardshrink", lower_shrink, SHRINK_HARD},
    {"aten::hardshrink.out", lower_shrink, SHRINK_HARD},
    {"aten::hardshrink_backward", lower_shrink, SHRINK_HARD | SHRINK_BW},
    {"aten::hardshrink_backward.grad_input", lower_shrink,
     SHRINK_HARD | SHRINK_BW},
    {"aten::softshrink", lower_shrink, SHRINK_SOFT},
    {"aten::softshrink.out", lower_shrink, SHRINK_SOFT},
    {"aten::softshrink_backward", lower_shrink, SHRINK_SOFT | SHRINK_BW},
    {"aten::softshrink_backward.grad_input", lower_shrink,
     SHRINK_SOFT | SHRINK_BW},
    {"aten::glu", lower_glu, 0},
    {"aten::glu.out", lower_glu, 0},
    {"aten::glu_backward", lower_glu, 1},
    {"aten::glu_backward.grad_input", lower_glu, 1},
    {"aten::_prelu_kernel", lower_prelu, 0},
    {"aten::_prelu_kernel_backward", lower_prelu, 1},
    {"aten::max_unpool2d", lower_max_unpool, 2},
    {"aten::max_unpool2d.out", lower_max_unpool, 2},
    {"aten::max_unpool3d", lower_max_unpool, 3},
    {"aten::max_unpool3d.out", lower_max_unpool, 3},
    {"aten::upsample_linear1d", lower_upsample, UP_LINEAR | 1 << 4},
    {"aten::upsample_linear1d.out", lower_upsample, UP_LINEAR | 1 << 4},
    {"aten::upsample_linear1d_backward", lower_upsample,
     UP_LINEAR | UP_BW | 1 << 4},
    {"aten::upsample_linear1d_backward.grad_input", lower_upsample,
     UP_LINEAR | UP_BW | 1 << 4},
    {"aten::upsample_trilinear3d", lower_upsample, UP_LINEAR | 3 << 4},
    {"aten::upsample_trilinear3d.out", lower_upsample, UP_LINEAR | 3 << 4},
    {"aten::upsample_trilinear3d_backward", lower_upsample,
     UP_LINEAR | UP_BW | 3 << 4},
    {"aten::upsample_trilinear3d_backward.grad_input", lower_upsample,
     UP_LINEAR | UP_BW | 3 << 4},
    {"aten::im2col", lower_im2col, 0},
    {"aten::im2col.out", lower_im2col, 0},
    {"aten::col2im", lower_col2im, 0},
    {"aten::col2im.out", lower_col2im, 0},
    {"aten::_upsample_bilinear2d_aa", lower_upsample_aa, UP_LINEAR},
    {"aten::_upsample_bilinear2d_aa.out", lower_upsample_aa, UP_LINEAR},
    {"aten::_upsample_bilinear2d_aa_backward", lower_upsample_aa,
     UP_LINEAR | UP_BW},
    {"aten::_upsample_bilinear2d_aa_backward.grad_input", lower_upsample_aa,
     UP_LINEAR | UP_BW},
    {"aten::_upsample_bicubic2d_aa", lower_upsample_aa, UP_CUBIC},
    {"aten::_upsample_bicubic2d_aa.out", lower_upsample_aa, UP_CUBIC},
    {"aten::_upsample_bicubic2d_aa_backward", lower_upsample_aa,
     UP_CUBIC | UP_BW},
    {"aten::_upsample_bicubic2d_aa_backward.grad_input", lower_upsample_aa,
     UP_CUBIC | UP_BW},
    {"aten::upsample_bicubic2d", lower_upsample, UP_CUBIC | 2 << 4},
    {"aten::upsample_bicubic2d.out", lower_upsample, UP_CUBIC | 2 << 4},
    {"aten::upsample_bicubic2d_backward", lower_upsample,
     UP_CUBIC | UP_BW | 2 << 4},
    {"aten::upsample_bicubic2d_backward.grad_input", lower_upsample,
     UP_CUBIC | UP_BW | 2 << 4},
    {"aten::max_pool3d_with_indices", lower_max_pool2d, 3},
    {"aten::max_pool3d_with_indices.out", lower_max_pool2d, 3},
    {"aten::max_pool3d_with_indices_backward", lower_max_pool2d_bw, 3},
    {"aten::max_pool3d_with_indices_backward.grad_input", lower_max_pool2d_bw,
     3},
    {"aten::avg_pool3d", lower_avg_pool2d, 3},
    {"aten::avg_pool3d.out", lower_avg_pool2d, 3},
    {"aten::avg_pool3d_backward", lower_avg_pool2d_bw, 3},
    {"aten::avg_pool3d_backward.grad_input", lower_avg_pool2d_bw, 3},
    {"aten::_adaptive_avg_pool3d", lower_adaptive_avg_pool2d, 3},
    {"aten::_adaptive_avg_pool3d.out", lower_adaptive_avg_pool2d, 3},
    {"aten::_adaptive_avg_pool3d_backward", lower_adaptive_avg_pool2d_bw, 3},
    {"aten::_adaptive_avg_pool3d_backward.out", lower_adaptive_avg_pool2d_bw,
     3},
    {"aten::adaptive_max_pool3d", lower_adaptive_max_pool2d, 3},
    {"aten::adaptive_max_pool3d.out", lower_adaptive_max_pool2d, 3},
    {"aten::adaptive_max_pool3d_backward", lower_adaptive_max_pool2d_bw, 3},
    {"aten::adaptive_max_pool3d_backward.grad_input",
     lower_adaptive_max_pool2d_bw, 3},
    {"aten::_batch_norm_with_update", lower_batch_norm, BN_WITH_UPDATE},
    {"aten::batch_norm_backward", lower_batch_norm_bw, 0},
    {"aten::grid_sampler_2d", lower_grid_sampler, 2},
    {"aten::grid_sampler_2d.out", lower_grid_sampler, 2},
    {"aten::grid_sampler_3d", lower_grid_sampler, 3},
    {"aten::grid_sampler_3d.out", lower_grid_sampler, 3},
    {"aten::grid_sampler_2d_backward", lower_grid_sampler_bw, 2},
    {"aten::grid_sampler_3d_backward", lower_grid_sampler_bw, 3},
    {"aten::segment_reduce", lower_segment_reduce, 0},
    {"aten::segment_reduce.out", lower_segment_reduce, 0},
    {"aten::_pdist_forward", lower_dist, 0},
    {"aten::_pdist_forward.out", lower_dist, 0},
    {"aten::_cdist_forward", lower_dist, 1},
    {"aten::_cdist_forward.out", lower_dist, 1},
    {"aten::_cdist_backward", lower_cdist_bw, 0},
    {"aten::embedding_renorm_", lower_embedding_renorm, 0},
    {"aten::embedding_renorm", lower_embedding_renorm, 0},
    {"aten::embedding_renorm.out", lower_embedding_renorm, 0},
    {"aten::_pdist_backward", lower_pdist_bw, 0},
    {"aten::_pdist_backward.out", lower_pdist_bw, 0},
    {"aten::_cdist_backward.out", lower_cdist_bw, 0},
    {"aten::multi_margin_loss", lower_multi_margin, 0},
    {"aten::multi_margin_loss.out", lower_multi_margin, 0},
    {"aten::multi_margin_loss_backward", lower_multi_margin, 1},
    {"aten::multi_margin_loss_backward.grad_input", lower_multi_margin, 1},
    {"aten::multilabel_margin_loss_forward", lower_multilabel_margin, 0},
    {"aten::multilabel_margin_loss_backward", lower_multilabel_margin, 1},
    {"aten::multilabel_margin_loss_backward.grad_input",
     lower_multilabel_margin, 1},
    {NULL, NULL, 0},
};

/* Complex-ready ops of this file (ops_internal.h). */
const char* const op_complex_nn[] = {"silu",
                                     "silu_",
                                     "reflection_pad1d",
                                     "reflection_pad2d",
                                     "replication_pad1d",
                                     "replication_pad2d",
                                     "reflection_pad1d_backward",
                                     "reflection_pad2d_backward",
                                     "replication_pad1d_backward",
                                     "replication_pad2d_backward",
                                     "im2col",
                                     "col2im",
                                     NULL};
