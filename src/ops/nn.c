/* Neural-network ops: normalization, activations and their backwards,
 * losses. Formulas follow PyTorch's CPU kernels (half floats compute in
 * f32 and round once at the end; Scalar arguments are program values
 * converted to the compute dtype, as the kernels' `to<opmath_t>()`). */
#include <math.h>
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

/* Sum of x (compute dtype) over `dims`. */
static V e_sum(em* e, V x, const int64_t* dims, size_t nd) {
  V init = -1, out = -1;
  tpuc_hlo_fn* body = NULL;
  if (e->st == NULL)
    e->st = tpuc_hlo_constant_f64(e->c->fn, e->shape.dtype, 0.0, &init);
  if (e->st == NULL)
    e->st = tpuc_hlo_region_binary(e->c->module, e->shape.dtype, TPUC_HLO_ADD,
                                   &body);
  if (e->st == NULL)
    e->st = tpuc_hlo_reduce(e->c->fn, &x, &init, 1, dims, nd, body, &out);
  return out;
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
    if (!is_float(dt)) return op_unimpl("non-float activation: CPU");
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

/* A bool[3] output_mask argument (as an int list); UNIMPLEMENTED unless
 * every output is wanted: the binding cannot return None results, and a
 * tensor in their place would differ from the CPU. */
static tpuc_status* full_mask(const op_ctx* c, int i) {
  if (c->args[i].kind != TPUC_OP_ARG_INT_LIST || c->args[i].list_len != 3)
    return op_unimpl("output_mask is not an int list");
  for (int k = 0; k < 3; k++)
    if (c->args[i].list[k] == 0)
      return op_unimpl("output_mask with undefined results: CPU");
  return NULL;
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
  TRY(full_mask(c, 7));
  /* grad_weight and grad_bias need both parameters to exist. */
  if (op_is_none(c, 5) || op_is_none(c, 6))
    return op_unimpl("layer_norm backward without weight/bias: CPU");
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
  V gamma = ln_param(&e, 5, M, N);
  em r = em_make(c, acc, &(tpuc_hlo_type){acc, 1, {M}});
  /* xhat = (x - mean) * rstd; dx = rstd * (dy*g - mean(dy*g)
   *   - xhat * mean(dy*g*xhat)) */
  V a = e_bcast(&e, rstd, mn, 2, &zero);
  V xhat = e_mul(&e, e_sub(&e, x, e_bcast(&e, mean, mn, 2, &zero)), a);
  V dyg = e_mul(&e, dy, gamma);
  V db = e_div(&r, e_sum(&e, dyg, &one, 1), e_k(&r, (double)N));
  V ds =
      e_div(&r, e_sum(&e, e_mul(&e, dyg, xhat), &one, 1), e_k(&r, (double)N));
  V dx = e_mul(&e, a,
               e_sub(&e, e_sub(&e, dyg, e_bcast(&e, db, mn, 2, &zero)),
                     e_mul(&e, xhat, e_bcast(&e, ds, mn, 2, &zero))));
  V dgamma = e_sum(&e, e_mul(&e, dy, xhat), &zero, 1);
  V dbeta = e_sum(&e, dy, &zero, 1);
  if (e.st == NULL) e.st = r.st;
  c->outs[0] = e_reshape(&e, e_cvt(&e, dx, t->dtype), t->dims, t->rank);
  c->outs[1] = e_reshape(&e, e_cvt(&e, dgamma, c->types[5].dtype),
                         c->types[5].dims, c->types[5].rank);
  c->outs[2] = e_reshape(&e, e_cvt(&e, dbeta, c->types[6].dtype),
                         c->types[6].dims, c->types[6].rank);
  c->nouts = 3;
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
  int64_t groups;
} conv_args;

/* Static arguments of convolution (input at `o`, weight at o + 1) and of
 * convolution_backward (o = 1): stride, padding, dilation (o + 3 to o + 5,
 * one entry per spatial dim), transposed (o + 6), groups (o + 8).
 * The groups argument is a SymInt, a program value whose number is not
 * part of the program's cache key, so it is derived from the shapes
 * (input channels / weight's second dim), which fixes it for
 * non-transposed convolutions; transposed ones run on the CPU. */
static tpuc_status* conv_parse(const op_ctx* c, int o, conv_args* a) {
  int in = o, w = o + 1;
  if (!op_is_tensor(c, in) || !op_is_tensor(c, w) ||
      c->args[o + 6].kind != TPUC_OP_ARG_BOOL)
    return op_unimpl("unexpected arguments");
  if (c->args[o + 6].i) return op_unimpl("transposed convolution: CPU");
  const tpuc_hlo_type* x = &c->types[in];
  const tpuc_hlo_type* k = &c->types[w];
  a->ns = x->rank - 2;
  if (a->ns < 1 || a->ns > 3 || k->rank != x->rank || !is_float(x->dtype) ||
      k->dtype != x->dtype)
    return op_unimpl("convolution: unusual arguments (CPU says why)");
  int64_t* lists[3] = {a->stride, a->pad, a->dil};
  for (int l = 0; l < 3; l++) {
    const tpuc_op_arg* arg = &c->args[o + 3 + l];
    if (arg->kind != TPUC_OP_ARG_INT_LIST || (int)arg->list_len != a->ns)
      return op_unimpl("convolution: unusual stride/padding/dilation");
    for (int i = 0; i < a->ns; i++) {
      lists[l][i] = arg->list[i];
      if (lists[l][i] < (l == 1 ? 0 : 1))
        return op_unimpl("convolution: bad stride/padding/dilation (CPU)");
    }
  }
  if (k->dims[1] <= 0 || x->dims[1] % k->dims[1] != 0)
    return op_unimpl("convolution: channel mismatch (CPU says why)");
  a->groups = x->dims[1] / k->dims[1];
  if (k->dims[0] % a->groups != 0)
    return op_unimpl("convolution: groups mismatch (CPU says why)");
  const tpuc_op_arg* ga = &c->args[o + 8];
  int64_t g = 0;
  if ((ga->kind == TPUC_OP_ARG_SCALAR && ga->scalar == TPUC_SCALAR_INT) ||
      ga->kind == TPUC_OP_ARG_INT)
    g = ga->i;
  if (g != a->groups)
    return op_unimpl("convolution: groups disagree with shapes (CPU)");
  for (int d = 0; d < x->rank; d++)
    if (x->dims[d] == 0 || k->dims[d] == 0)
      return op_unimpl("empty convolution: CPU");
  for (int i = 0; i < a->ns; i++) {
    int64_t span = a->dil[i] * (k->dims[2 + i] - 1) + 1;
    if (x->dims[2 + i] + 2 * a->pad[i] < span)
      return op_unimpl("convolution: kernel larger than input (CPU)");
  }
  return NULL;
}

static V e_conv(em* e, V lhs, V rhs, const tpuc_hlo_conv* cv) {
  V out = -1;
  if (e->st == NULL) e->st = tpuc_hlo_convolution(e->c->fn, lhs, rhs, cv, &out);
  return out;
}

/* convolution(input, weight, bias, stride, padding, dilation, transposed,
 * output_padding, groups). Registered as aten::convolution rather than
 * convolution_overrideable: what runs on the CPU then (transposed
 * convolutions, say) is the CPU's own aten::convolution. */
static tpuc_status* lower_conv(op_ctx* c, int param) {
  (void)param;
  conv_args a;
  TRY(conv_parse(c, 0, &a));
  const tpuc_hlo_type* x = &c->types[0];
  const tpuc_hlo_type* k = &c->types[1];
  if (!op_is_none(c, 2) &&
      (!op_is_tensor(c, 2) || c->types[2].dtype != x->dtype ||
       c->types[2].rank != 1 || c->types[2].dims[0] != k->dims[0]))
    return op_unimpl("convolution: unusual bias (CPU says why)");
  tpuc_dtype dt = x->dtype, acc = op_accumulation_dtype(dt);
  em e = em_make(c, acc, x);
  tpuc_hlo_conv cv;
  tpuc_hlo_conv_init_nchw(&cv, a.ns);
  int64_t pads[2 * TPUC_MAX_RANK];
  for (int i = 0; i < a.ns; i++) pads[2 * i] = pads[2 * i + 1] = a.pad[i];
  cv.strides = a.stride;
  cv.padding = pads;
  cv.rhs_dilation = a.dil;
  cv.feature_group_count = a.groups;
  V y = e_conv(&e, e_cvt(&e, c->vals[0], acc), e_cvt(&e, c->vals[1], acc), &cv);
  if (!op_is_none(c, 2)) {
    tpuc_hlo_type yt;
    if (e.st == NULL) e.st = tpuc_hlo_value_type(c->fn, y, &yt);
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
 * -> (grad_input, grad_weight, grad_bias). grad_input is the transposed
 * convolution of grad_output (lhs dilated by the stride, the kernel
 * flipped with its feature dims swapped per group); grad_weight convolves
 * the input with grad_output over the batch, one batch group per group. */
static tpuc_status* lower_conv_bw(op_ctx* c, int param) {
  (void)param;
  conv_args a;
  TRY(conv_parse(c, 1, &a));
  TRY(full_mask(c, 10));
  if (c->args[3].kind != TPUC_OP_ARG_INT_LIST)
    return op_unimpl("convolution backward without bias: CPU");
  const tpuc_hlo_type* x = &c->types[1];
  const tpuc_hlo_type* k = &c->types[2];
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* gt = &c->types[0];
  int r = x->rank, ns = a.ns;
  int64_t G = a.groups, O = k->dims[0], I = x->dims[1];
  /* grad_output must have the forward's output shape */
  bool ok = gt->dtype == x->dtype && gt->rank == r &&
            gt->dims[0] == x->dims[0] && gt->dims[1] == O;
  for (int i = 0; ok && i < ns; i++) {
    int64_t span = a.dil[i] * (k->dims[2 + i] - 1) + 1;
    ok = gt->dims[2 + i] ==
         (x->dims[2 + i] + 2 * a.pad[i] - span) / a.stride[i] + 1;
  }
  if (!ok) return op_unimpl("convolution backward: unusual grad_output");
  tpuc_dtype dt = x->dtype, acc = op_accumulation_dtype(dt);
  em e = em_make(c, acc, x);
  V g = e_cvt(&e, c->vals[0], acc);
  V xin = e_cvt(&e, c->vals[1], acc);
  V w = e_cvt(&e, c->vals[2], acc);
  /* grad_input */
  int64_t gd[TPUC_MAX_RANK + 1], perm[TPUC_MAX_RANK + 1];
  gd[0] = G;
  gd[1] = O / G;
  gd[2] = I / G;
  for (int i = 0; i < ns; i++) gd[3 + i] = k->dims[2 + i];
  V wk = e_reshape(&e, w, gd, r + 1);
  perm[0] = 0;
  perm[1] = 2;
  perm[2] = 1;
  for (int i = 0; i < ns; i++) perm[3 + i] = 3 + i;
  if (e.st == NULL) e.st = tpuc_hlo_transpose(c->fn, wk, perm, &wk);
  int64_t kd[TPUC_MAX_RANK], sp[TPUC_MAX_RANK];
  kd[0] = I;
  kd[1] = O / G;
  for (int i = 0; i < ns; i++) {
    kd[2 + i] = k->dims[2 + i];
    sp[i] = 2 + i;
  }
  wk = e_reshape(&e, wk, kd, r);
  if (e.st == NULL) e.st = tpuc_hlo_reverse(c->fn, wk, sp, (size_t)ns, &wk);
  tpuc_hlo_conv cv;
  tpuc_hlo_conv_init_nchw(&cv, ns);
  int64_t pads[2 * TPUC_MAX_RANK];
  for (int i = 0; i < ns; i++) {
    int64_t kk = k->dims[2 + i];
    pads[2 * i] = a.dil[i] * (kk - 1) - a.pad[i];
    pads[2 * i + 1] =
        x->dims[2 + i] - 1 - (gt->dims[2 + i] - 1) * a.stride[i] + a.pad[i];
  }
  cv.padding = pads;
  cv.lhs_dilation = a.stride;
  cv.rhs_dilation = a.dil;
  cv.feature_group_count = G;
  V gi = e_conv(&e, g, wk, &cv);
  /* grad_weight */
  tpuc_hlo_conv cw;
  tpuc_hlo_conv_init_nchw(&cw, ns);
  cw.input_batch_dim = 1;
  cw.input_feature_dim = 0;
  cw.kernel_input_feature_dim = 0;
  cw.kernel_output_feature_dim = 1;
  cw.output_batch_dim = 1;
  cw.output_feature_dim = 0;
  int64_t wpads[2 * TPUC_MAX_RANK];
  for (int i = 0; i < ns; i++) {
    int64_t kk = k->dims[2 + i];
    wpads[2 * i] = a.pad[i];
    wpads[2 * i + 1] = (kk - 1) * a.dil[i] +
                       (gt->dims[2 + i] - 1) * a.stride[i] + 1 -
                       x->dims[2 + i] - a.pad[i];
  }
  cw.strides = a.dil;
  cw.rhs_dilation = a.stride;
  cw.padding = wpads;
  cw.batch_group_count = G;
  V gw = e_conv(&e, xin, g, &cw);
  /* grad_bias */
  int64_t bd[TPUC_MAX_RANK];
  bd[0] = 0;
  for (int i = 0; i < ns; i++) bd[1 + i] = 2 + i;
  V gb = e_sum(&e, g, bd, (size_t)ns + 1);
  c->outs[0] = e_cvt(&e, gi, dt);
  c->outs[1] = e_cvt(&e, gw, dt);
  c->outs[2] = e_cvt(&e, gb, dt);
  c->nouts = 3;
  return e.st;
}

/* ---------------------------------------------------------------------- */

const op_entry op_table_nn[] = {
    {"aten::native_layer_norm", lower_layer_norm, 0},
    {"aten::native_layer_norm.out", lower_layer_norm, 0},
    {"aten::native_layer_norm_backward", lower_layer_norm_bw, 0},
    {"aten::native_layer_norm_backward.out", lower_layer_norm_bw, 0},
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
    {NULL, NULL, 0},
};
