/* More math: unary functions, clamps, remainders, matrix-vector products,
 * scans, arg reductions, sort and topk, statistics.
 *
 * Lowerings here build their formulas with a small "emitter" (em): each
 * step returns a value and remembers the first failing status, so that a
 * formula reads as a formula; the lowering returns em_done() at the end. */
#include <math.h>
#include <string.h>

#include "ops/emit.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

#define MAX(a, b) e_pmax(e, a, b, true)
#define MIN(a, b) e_pmax(e, a, b, false)
#define EXPM1(a) e_un(e, TPUC_HLO_EXPM1, a)

/* ------------------------------ small helpers --------------------------- */

/* max / min that propagate NaN (XLA:CPU's fast min/max may not). */
static V e_pmax(em* e, V a, V b, bool max) {
  V r = max ? e_bin(e, TPUC_HLO_MAX, a, b) : e_bin(e, TPUC_HLO_MIN, a, b);
  if (!tpuc_dtype_is_float(e_type(e, a).dtype)) return r;
  return SEL(ISNAN(a), a, SEL(ISNAN(b), b, r));
}

static bool is_float(tpuc_dtype d) { return tpuc_dtype_is_float(d) != 0; }
static bool is_cx(tpuc_dtype d) { return tpuc_dtype_is_complex(d) != 0; }

/* The float dtype a "float" unary op gives for input dtype `d`. */
static tpuc_dtype float_result(const op_ctx* c, tpuc_dtype d) {
  return is_float(d) ? d : c->opts->default_float;
}

/* Sign bit of float x (true for -0.0 and negative NaNs). */
static V e_signbit(em* e, V x) {
  tpuc_dtype dt = e_type(e, x).dtype;
  tpuc_dtype it = dt == TPUC_DTYPE_F64   ? TPUC_DTYPE_S64
                  : dt == TPUC_DTYPE_F32 ? TPUC_DTYPE_S32
                                         : TPUC_DTYPE_S16;
  V b = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_bitcast_convert(e->fn, x, it, &b));
  return LT(b, K(b, 0));
}

/* trunc of float x: toward zero. */
static V e_trunc(em* e, V x) {
  return SEL(LT(x, K(x, 0)), CEIL(x), FLOOR(x));
}

/* Integer division by zero anywhere in y: the call fails like the CPU. */
static void int_div_check(em* e, V y) {
  op_ctx* c = e->c;
  tpuc_hlo_type t = e_type(e, y);
  V z = EQ(y, K(y, 0));
  int64_t dims[TPUC_MAX_RANK];
  for (int i = 0; i < t.rank; i++) dims[i] = i;
  V f = -1, any = -1;
  tpuc_hlo_fn* body = NULL;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_constant_i64(e->fn, TPUC_DTYPE_U8, 0, &f));
  f = e_cvt(e, f, TPUC_DTYPE_PRED);
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_region_binary(c->module, TPUC_DTYPE_PRED, TPUC_HLO_OR,
                                      &body));
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_reduce(e->fn, &z, &f, 1, dims, (size_t)t.rank, body,
                               &any));
  if (e->st != NULL) return;
  if (c->has_check) any = OR(any, c->check);
  c->has_check = true;
  c->check = any;
  c->check_code = TPUC_INVALID_ARGUMENT;
  c->check_msg = "ZeroDivisionError";
}

/* The operands `which` (n of them) converted to `dt` and broadcast to
 * their common shape. */
static tpuc_status* operands(op_ctx* c, const int* which, size_t n,
                             tpuc_dtype dt, V* out) {
  tpuc_hlo_type shape;
  TRY(op_broadcast_shape(c, which, n, &shape));
  shape.dtype = dt;
  for (size_t k = 0; k < n; k++)
    TRY(op_operand(c, which[k], dt, &shape, &out[k]));
  return NULL;
}

/* Whether scalar argument i is a float number (a float alpha with an
 * integral result is an error on the CPU). */
static bool float_scalar(const op_ctx* c, int i) {
  return op_is_value(c, i) && c->args[i].kind == TPUC_OP_ARG_SCALAR &&
         c->args[i].scalar == TPUC_SCALAR_FLOAT;
}

/* ------------------------ unary floating functions ----------------------- */

enum {
  U_ASIN = 1, U_ACOS, U_ATAN, U_SINH, U_COSH, U_ASINH, U_ACOSH, U_ATANH,
  U_ERF, U_ERFC, U_ERFINV, U_EXP2, U_LOG2, U_LOG10, U_DEG2RAD, U_RAD2DEG,
};

/* erf and erfc of f64 x to about 1e-15: the Taylor series of erf below
 * |x| = 1.5, the continued fraction of erfc above (with exp(-x^2) split so
 * that x^2 rounds exactly). */
static void erf_f64(em* e, V x, V* erf_out, V* erfc_out) {
  V a = ABS(x), z = MUL(x, x);
  /* erf(x) = 2/sqrt(pi) * x * sum_k (-1)^k z^k / (k! (2k+1)) */
  const int nt = 28;
  double coef[28], fact = 1.0;
  for (int k = 0; k < nt; k++) {
    if (k > 0) fact *= k;
    coef[k] = (k % 2 ? -1.0 : 1.0) / (fact * (2 * k + 1));
  }
  V s = K(x, coef[nt - 1]);
  for (int k = nt - 2; k >= 0; k--) s = ADD(MUL(s, z), K(x, coef[k]));
  V small = MUL(MUL(K(x, 1.1283791670955126), x), s);
  /* erfc(a) = exp(-a^2) / sqrt(pi) / (a + (1/2)/(a + 1/(a + (3/2)/...))) */
  V ac = MIN(MAX(a, K(a, 1.5)), K(a, 28)); /* erfc(28) underflows */
  V t = ac;
  for (int k = 72; k >= 1; k--) t = ADD(ac, DIV(K(ac, k / 2.0), t));
  V ah = DIV(FLOOR(MUL(ac, K(ac, 16))), K(ac, 16));
  V ex = MUL(EXP(NEG(MUL(ah, ah))),
             EXP(NEG(MUL(SUB(ac, ah), ADD(ac, ah)))));
  V big = DIV(ex, MUL(K(t, 1.7724538509055160), t)); /* erfc(|x|) */
  V near = LT(a, K(a, 1.5));
  V one = K(x, 1);
  if (erf_out != NULL) {
    V sgn = SEL(LT(x, K(x, 0)), K(x, -1), one);
    *erf_out = SEL(near, small, MUL(sgn, SUB(one, big)));
  }
  if (erfc_out != NULL)
    *erfc_out = SEL(near, SUB(one, small),
                    SEL(GT(x, K(x, 0)), big, SUB(K(x, 2), big)));
}

/* erf of x (f32 or f64), as the C library's erf of that type. */
static V e_erf(em* e, V x) {
  tpuc_dtype dt = e_type(e, x).dtype;
  V r = -1;
  erf_f64(e, e_cvt(e, x, TPUC_DTYPE_F64), &r, NULL);
  return e_cvt(e, r, dt);
}

/* log_base(x), exact where x is an integral power of the base (as the C
 * library's log2/log10 are): log(x) / log(base), snapped to n when
 * base^n == x for the nearest integer n. */
static V e_log_base(em* e, V x, double base) {
  V r = MUL(LOG(x), K(x, 1.0 / log(base)));
  V n = e_un(e, TPUC_HLO_ROUND_NEAREST_EVEN, r);
  V p = POW(K(x, base), n);
  return SEL(EQ(p, x), n, r);
}

/* PyTorch's erfinv: a rational first guess, then two Newton steps. */
static V e_erfinv(em* e, V y) {
  static const double a[4] = {0.886226899, -1.645349621, 0.914624893,
                              -0.140543331};
  static const double b[4] = {-2.118377725, 1.442710462, -0.329097515,
                              0.012229801};
  static const double cc[4] = {-1.970840454, -1.624906493, 3.429567803,
                               1.641345311};
  static const double d[2] = {3.543889200, 1.637067800};
  V one = K(y, 1), ya = ABS(y);
  V z = MUL(y, y);
  V num = ADD(MUL(ADD(MUL(ADD(MUL(K(y, a[3]), z), K(y, a[2])), z),
                      K(y, a[1])),
                  z),
              K(y, a[0]));
  V den = ADD(MUL(ADD(MUL(ADD(MUL(ADD(MUL(K(y, b[3]), z), K(y, b[2])), z),
                              K(y, b[1])),
                          z),
                      K(y, b[0])),
                  z),
              one);
  V central = DIV(MUL(y, num), den);
  V w = SQRT(NEG(LOG(DIV(SUB(one, ya), K(y, 2)))));
  V num2 = ADD(MUL(ADD(MUL(ADD(MUL(K(y, cc[3]), w), K(y, cc[2])), w),
                       K(y, cc[1])),
                   w),
               K(y, cc[0]));
  V den2 = ADD(MUL(ADD(MUL(K(y, d[1]), w), K(y, d[0])), w), one);
  V num2s = SEL(e_signbit(e, y), NEG(num2), num2);
  V tail = DIV(num2s, den2);
  V x = SEL(LE(ya, K(y, 0.7)), central, tail);
  for (int i = 0; i < 2; i++) {
    V step = DIV(SUB(e_erf(e, x), y),
                 MUL(K(x, 1.1283791670955126), EXP(NEG(MUL(x, x)))));
    x = SUB(x, step);
  }
  V inf = SEL(e_signbit(e, y), K(y, -INFINITY), K(y, INFINITY));
  x = SEL(EQ(ya, one), inf, x);
  return SEL(GT(ya, one), K(y, NAN), x);
}

static V e_unary_fn(em* e, int which, V x) {
  V one = K(x, 1), zero = K(x, 0);
  switch (which) {
    case U_ASIN: /* atan2(x, sqrt((1-x)(1+x))) */
      return e_bin(e, TPUC_HLO_ATAN2, x,
                   SQRT(MUL(SUB(one, x), ADD(one, x))));
    case U_ACOS:
      return e_bin(e, TPUC_HLO_ATAN2, SQRT(MUL(SUB(one, x), ADD(one, x))),
                   x);
    case U_ATAN: {
      /* XLA:CPU gets atan2(x, constant 1) wrong for |x| > 1: use
       * atan t = 2 atan2(t, 1 + sqrt(1 + t^2)) on |t| <= 1, and
       * atan x = sign(x) pi/2 - atan(1/x) beyond. */
      V big = GT(ABS(x), one);
      V t = SEL(big, DIV(one, x), x);
      V r = MUL(K(t, 2), e_bin(e, TPUC_HLO_ATAN2, t,
                               ADD(one, SQRT(ADD(one, MUL(t, t))))));
      V half_pi = SEL(LT(x, zero), K(x, -M_PI / 2), K(x, M_PI / 2));
      return SEL(big, SUB(half_pi, r), r);
    }
    case U_SINH:
    case U_COSH: {
      /* sinh|x| = (E + E/(E+1))/2 with E = expm1|x|; cosh|x| =
       * (e^|x| + e^-|x|)/2; beyond |x| = 20 both are h*h/2 with
       * h = e^(|x|/2), which does not overflow early. */
      V a = ABS(x);
      V h = EXP(MUL(a, K(a, 0.5)));
      V huge = MUL(MUL(h, K(h, 0.5)), h);
      V small;
      if (which == U_SINH) {
        V E = EXPM1(a);
        small = MUL(K(a, 0.5), ADD(E, DIV(E, ADD(E, one))));
      } else {
        V ea = EXP(a);
        small = MUL(K(a, 0.5), ADD(ea, DIV(one, ea)));
      }
      V r = SEL(GT(a, K(a, 20)), huge, small);
      if (which == U_COSH) return r;
      return SEL(LT(x, zero), NEG(r), SEL(EQ(x, zero), x, r));
    }
    case U_ASINH: {
      /* sign(x) log1p(a + a^2/(1 + sqrt(1 + a^2))), log(a) + ln 2 for
       * huge a */
      V a = ABS(x), a2 = MUL(a, a);
      V r = LOG1P(ADD(a, DIV(a2, ADD(one, SQRT(ADD(one, a2))))));
      r = SEL(GT(a, K(a, 1e8)), ADD(LOG(a), K(a, M_LN2)), r);
      return SEL(LT(x, zero), NEG(r), SEL(EQ(x, zero), x, r));
    }
    case U_ACOSH: {
      /* log1p(t + sqrt(2t + t^2)), t = x - 1 */
      V t = SUB(x, one);
      V r = LOG1P(ADD(t, SQRT(ADD(MUL(K(t, 2), t), MUL(t, t)))));
      r = SEL(GT(x, K(x, 1e8)), ADD(LOG(x), K(x, M_LN2)), r);
      return SEL(LT(x, one), K(x, NAN), r);
    }
    case U_ATANH: {
      /* sign(x) log1p(2a/(1-a))/2 */
      V a = ABS(x);
      V r = MUL(K(a, 0.5), LOG1P(DIV(MUL(K(a, 2), a), SUB(one, a))));
      return SEL(LT(x, zero), NEG(r), SEL(EQ(x, zero), x, r));
    }
    case U_ERF:
      return e_erf(e, x);
    case U_ERFC: {
      tpuc_dtype dt = e_type(e, x).dtype;
      V r = -1;
      erf_f64(e, e_cvt(e, x, TPUC_DTYPE_F64), NULL, &r);
      return e_cvt(e, r, dt);
    }
    case U_ERFINV:
      return e_erfinv(e, x);
    case U_EXP2:
      return POW(K(x, 2), x);
    case U_LOG2:
      return e_log_base(e, x, 2);
    case U_LOG10:
      return e_log_base(e, x, 10);
    case U_DEG2RAD:
      return MUL(x, K(x, M_PI / 180.0));
    case U_RAD2DEG:
      return MUL(x, K(x, 180.0 / M_PI));
  }
  return -1;
}

/* Complex forms of the unary functions: sinh / cosh by components (no
 * cancellation near 0), exp2 = exp(z ln 2), log2 / log10 = log z / ln b
 * (as the CPU's vectorized kernels), atanh from log1p, asinh from log1p
 * on the right half plane (odd symmetry for the left), and the rest by
 * their identities: atan z = -i atanh(iz), asin z = -i asinh(iz), acos z
 * = pi/2 - asin z, acosh z = log(z + sqrt(z + 1) sqrt(z - 1)). */
static V e_cx_unary(em* e, int which, V z) {
  V x = e_un(e, TPUC_HLO_REAL, z), y = e_un(e, TPUC_HLO_IMAG, z);
  V one = K(z, 1);
#define CPLX(a, b) e_bin(e, TPUC_HLO_COMPLEX, a, b)
  switch (which) {
    case U_SINH:
    case U_COSH: {
      V sh = e_unary_fn(e, U_SINH, x), ch = e_unary_fn(e, U_COSH, x);
      V sy = e_un(e, TPUC_HLO_SINE, y), cy = e_un(e, TPUC_HLO_COSINE, y);
      if (which == U_SINH) return CPLX(MUL(sh, cy), MUL(ch, sy));
      return CPLX(MUL(ch, cy), MUL(sh, sy));
    }
    case U_EXP2:
      return EXP(MUL(z, K(z, M_LN2)));
    case U_LOG2:
    case U_LOG10: {
      V l = LOG(z);
      double k = which == U_LOG2 ? M_LN2 : M_LN10;
      V lr = e_un(e, TPUC_HLO_REAL, l), li = e_un(e, TPUC_HLO_IMAG, l);
      return CPLX(DIV(lr, K(lr, k)), DIV(li, K(li, k)));
    }
    case U_ATANH: {
      /* halved by components: a complex product would make inf * 0 */
      V d = SUB(LOG1P(z), LOG1P(NEG(z)));
      V dr = e_un(e, TPUC_HLO_REAL, d), di = e_un(e, TPUC_HLO_IMAG, d);
      return CPLX(MUL(dr, K(dr, 0.5)), MUL(di, K(di, 0.5)));
    }
    case U_ATAN: {
      V iz = CPLX(NEG(y), x); /* i z */
      V a = e_cx_unary(e, U_ATANH, iz);
      return CPLX(e_un(e, TPUC_HLO_IMAG, a), NEG(e_un(e, TPUC_HLO_REAL, a)));
    }
    case U_ASINH: {
      V neg = e_signbit(e, x);
      V w = SEL(neg, NEG(z), z);
      V w2 = MUL(w, w);
      V r = LOG1P(ADD(w, DIV(w2, ADD(one, SQRT(ADD(one, w2))))));
      r = SEL(neg, NEG(r), r);
      /* On the imaginary axis (XLA's complex sqrt drops the sign of a
       * zero): i asin(y) inside the cut, else +-acosh|y| +- i pi/2 with
       * the signs of x and y, as C99's casinh. */
      V ay = ABS(y), zero = K(x, 0);
      V cut = GT(ay, K(ay, 1));
      V ac = e_unary_fn(e, U_ACOSH, SEL(cut, ay, K(ay, 1)));
      V re = SEL(cut, SEL(neg, NEG(ac), ac), SEL(ISNAN(y), y, x));
      V hp = K(y, M_PI / 2);
      V im = SEL(cut, SEL(e_signbit(e, y), NEG(hp), hp),
                 e_unary_fn(e, U_ASIN, SEL(cut, zero, y)));
      return SEL(EQ(x, zero), CPLX(re, im), r);
    }
    case U_ASIN: {
      V iz = CPLX(NEG(y), x);
      V a = e_cx_unary(e, U_ASINH, iz);
      return CPLX(e_un(e, TPUC_HLO_IMAG, a), NEG(e_un(e, TPUC_HLO_REAL, a)));
    }
    case U_ACOS: {
      V a = e_cx_unary(e, U_ASIN, z);
      return SUB(K(a, M_PI / 2), a);
    }
    case U_ACOSH: {
      V r = LOG(ADD(z, MUL(SQRT(ADD(z, one)), SQRT(SUB(z, one)))));
      /* On the real axis, as C99's cacosh (the sign of a zero y picks the
       * side of the cut): acosh|x| or 0 for the real part, 0, acos x or
       * pi with y's sign for the imaginary part. */
      V zero = K(x, 0), o = K(x, 1);
      V hi = GE(x, o), lo = LE(x, NEG(o));
      V ax = ABS(x);
      V ac = e_unary_fn(e, U_ACOSH, SEL(OR(hi, lo), ax, o));
      V re = SEL(OR(hi, lo), ac, SEL(ISNAN(x), x, zero));
      V am = SEL(hi, zero, SEL(lo, K(x, M_PI),
                               e_unary_fn(e, U_ACOS, SEL(lo, zero,
                                                         SEL(hi, zero, x)))));
      V im = SEL(e_signbit(e, y), NEG(am), am);
      return SEL(EQ(y, zero), CPLX(re, im), r);
    }
  }
#undef CPLX
  return -1;
}

/* A unary op with a floating result (integers promote to the default
 * float), computed in f32 for half floats. */
static tpuc_status* lower_float_unary(op_ctx* c, int which) {
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  if (is_cx(c->types[0].dtype)) {
    em ee = em_of(c), *e = &ee;
    c->outs[0] = e_cx_unary(e, which, c->vals[0]);
    c->nouts = 1;
    if (c->outs[0] == -1 && e->st == NULL)
      return op_unimpl("complex form: CPU");
    return em_done(e);
  }
  tpuc_dtype rt = float_result(c, c->types[0].dtype);
  tpuc_dtype acc = op_accumulation_dtype(rt);
  em ee = em_of(c), *e = &ee;
  V x = e_cvt(e, c->vals[0], acc);
  V r = e_unary_fn(e, which, x);
  c->outs[0] = e_cvt(e, r, rt);
  c->nouts = 1;
  return em_done(e);
}

/* ------------------------ other unary elementwise ----------------------- */

enum {
  P_TRUNC = 1, P_FRAC, P_SGN, P_ISNAN, P_ISINF, P_ISPOSINF, P_ISNEGINF,
  P_SIGNBIT, P_LOGICAL_NOT, P_NAN_TO_NUM,
};

static tpuc_status* lower_unary_misc(op_ctx* c, int which) {
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  tpuc_dtype dt = c->types[0].dtype;
  em ee = em_of(c), *e = &ee;
  V x = c->vals[0], r = -1;
  bool fl = is_float(dt);
  switch (which) {
    case P_TRUNC:
      if (dt == TPUC_DTYPE_PRED) return op_unimpl("bool trunc: CPU says why");
      r = fl ? e_trunc(e, x) : x;
      break;
    case P_FRAC:
      if (!fl) return op_unimpl("integer frac: CPU says why");
      r = SUB(x, e_trunc(e, x));
      break;
    case P_SGN:
      if (dt == TPUC_DTYPE_PRED) {
        r = x;
      } else if (tpuc_dtype_is_complex(dt)) {
        /* x / |x|, and 0 where |x| is 0 (as the CPU). */
        V a = ABS(x), ac = -1;
        V zero = K(a, 0);
        if (e->st == NULL)
          em_keep(e, tpuc_hlo_binary(e->fn, TPUC_HLO_COMPLEX, a, zero, &ac));
        r = SEL(EQ(a, zero), K(x, 0), DIV(x, ac));
      } else if (tpuc_dtype_is_unsigned_int(dt)) {
        r = e_cvt(e, NE(x, K(x, 0)), dt);
      } else {
        /* (0 < x) - (x < 0): NaN gives 0, as the CPU */
        V zero = K(x, 0);
        r = SUB(e_cvt(e, LT(zero, x), dt), e_cvt(e, LT(x, zero), dt));
      }
      break;
    case P_ISNAN:
      if (tpuc_dtype_is_complex(dt)) {
        r = OR(ISNAN(e_un(e, TPUC_HLO_REAL, x)),
               ISNAN(e_un(e, TPUC_HLO_IMAG, x)));
        break;
      }
      r = fl ? ISNAN(x) : e_kd(e, TPUC_DTYPE_PRED, 0, x);
      break;
    case P_ISINF:
      if (tpuc_dtype_is_complex(dt)) {
        V re = ABS(e_un(e, TPUC_HLO_REAL, x));
        V im = ABS(e_un(e, TPUC_HLO_IMAG, x));
        r = OR(EQ(re, K(re, INFINITY)), EQ(im, K(im, INFINITY)));
        break;
      }
      r = fl ? EQ(ABS(x), K(x, INFINITY)) : e_kd(e, TPUC_DTYPE_PRED, 0, x);
      break;
    case P_ISPOSINF:
      r = fl ? EQ(x, K(x, INFINITY)) : e_kd(e, TPUC_DTYPE_PRED, 0, x);
      break;
    case P_ISNEGINF:
      r = fl ? EQ(x, K(x, -INFINITY)) : e_kd(e, TPUC_DTYPE_PRED, 0, x);
      break;
    case P_SIGNBIT:
      if (fl)
        r = e_signbit(e, x);
      else if (tpuc_dtype_is_signed_int(dt))
        r = LT(x, K(x, 0));
      else
        r = e_kd(e, TPUC_DTYPE_PRED, 0, x);
      break;
    case P_LOGICAL_NOT:
      r = dt == TPUC_DTYPE_PRED ? NOT(x) : EQ(x, K(x, 0));
      break;
    case P_NAN_TO_NUM: {
      if (!fl) {
        r = x;
        break;
      }
      /* nan_to_num(self, nan, posinf, neginf): None means 0 and the
       * dtype's largest / lowest finite value. */
      double big = dt == TPUC_DTYPE_F64   ? 1.7976931348623157e308
                   : dt == TPUC_DTYPE_F32 ? 3.4028234663852886e38
                   : dt == TPUC_DTYPE_F16 ? 65504.0
                                          : 3.3895313892515355e38;
      V rep[3];
      double dflt[3] = {0.0, big, -big};
      for (int k = 0; k < 3; k++) {
        if (op_is_value(c, k + 1)) {
          if (c->types[k + 1].rank != 0) return op_unimpl("unexpected value");
          V s = e_cvt(e, c->vals[k + 1], dt);
          tpuc_hlo_type t = e_type(e, x);
          rep[k] = -1;
          if (e->st == NULL && t.rank > 0)
            em_keep(e, tpuc_hlo_broadcast_in_dim(e->fn, s, t.dims, t.rank,
                                                 NULL, &rep[k]));
          else
            rep[k] = s;
        } else if (op_is_none(c, k + 1)) {
          rep[k] = K(x, dflt[k]);
        } else {
          return op_unimpl("unexpected arguments");
        }
      }
      r = SEL(ISNAN(x), rep[0], x);
      r = SEL(EQ(x, K(x, INFINITY)), rep[1], r);
      r = SEL(EQ(x, K(x, -INFINITY)), rep[2], r);
      break;
    }
    default:
      return op_unimpl("unknown op");
  }
  c->outs[0] = r;
  c->nouts = 1;
  return em_done(e);
}

/* -------------------------- binary elementwise -------------------------- */

enum { CL_BOTH = 1, CL_MIN, CL_MAX };

/* clamp(self, min, max) (Scalar? or Tensor? bounds), clamp_min(self, min),
 * clamp_max(self, max): promotes over all operands. A NaN bound makes the
 * result NaN, except a lone scalar bound, which the CPU then ignores. */
static tpuc_status* lower_clamp(op_ctx* c, int which) {
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  int lo = which == CL_MAX ? -1 : 1;
  int hi = which == CL_BOTH ? 2 : which == CL_MAX ? 1 : -1;
  bool has_lo = lo >= 0 && op_is_value(c, lo);
  bool has_hi = hi >= 0 && op_is_value(c, hi);
  if ((lo >= 0 && !has_lo && !op_is_none(c, lo)) ||
      (hi >= 0 && !has_hi && !op_is_none(c, hi)))
    return op_unimpl("unexpected arguments");
  if (!has_lo && !has_hi) return op_unimpl("no bounds: CPU says why");
  int which_args[3], n = 0;
  which_args[n++] = 0;
  if (has_lo) which_args[n++] = lo;
  if (has_hi) which_args[n++] = hi;
  tpuc_dtype dt;
  TRY(op_result_type(c, which_args, (size_t)n, &dt));
  if (dt == TPUC_DTYPE_PRED || tpuc_dtype_is_complex(dt))
    return op_unimpl("clamp of this dtype: CPU");
  V v[3];
  TRY(operands(c, which_args, (size_t)n, dt, v));
  em ee = em_of(c), *e = &ee;
  V r = v[0];
  int k = 1;
  if (has_lo) {
    V b = v[k++];
    if (is_float(dt) && c->args[lo].kind == TPUC_OP_ARG_SCALAR && !has_hi)
      b = SEL(ISNAN(b), K(b, -INFINITY), b);
    r = MAX(r, b);
  }
  if (has_hi) {
    V b = v[k++];
    if (is_float(dt) && c->args[hi].kind == TPUC_OP_ARG_SCALAR && !has_lo)
      b = SEL(ISNAN(b), K(b, INFINITY), b);
    r = MIN(r, b);
  }
  c->outs[0] = r;
  c->nouts = 1;
  return em_done(e);
}

enum {
  B_REMAINDER = 1, B_FLOOR_DIV, B_TRUNC_DIV, B_DIV_MODE, B_XLOGY, B_RSUB,
  B_HYPOT, B_COPYSIGN, B_LOGADDEXP, B_LOGADDEXP2, B_HEAVISIDE, B_FMAX, B_FMIN,
  B_LOGICAL_AND, B_LOGICAL_OR, B_LOGICAL_XOR,
};

/* Python's modulo: the sign of the divisor. */
static V e_pymod(em* e, V a, V b) {
  V m = e_bin(e, TPUC_HLO_REM, a, b);
  if (tpuc_dtype_is_unsigned_int(e_type(e, a).dtype)) return m;
  V zero = K(m, 0);
  V fix = AND(NE(m, zero), NE(LT(b, zero), LT(m, zero)));
  return SEL(fix, ADD(m, b), m);
}

/* Floor division as the CPU does it (floats: through fmod, rounding the
 * quotient to the nearest integer; division by zero is IEEE's a / b). */
static V e_floordiv(em* e, V a, V b) {
  V zero = K(a, 0);
  if (!is_float(e_type(e, a).dtype)) {
    V q = DIV(a, b);
    if (tpuc_dtype_is_unsigned_int(e_type(e, a).dtype)) return q;
    V r = e_bin(e, TPUC_HLO_REM, a, b);
    V fix = AND(NE(r, zero), NE(LT(r, zero), LT(b, zero)));
    return SEL(fix, SUB(q, K(q, 1)), q);
  }
  V mod = e_bin(e, TPUC_HLO_REM, a, b);
  V div = DIV(SUB(a, mod), b);
  V fix = AND(NE(mod, zero), NE(LT(b, zero), LT(mod, zero)));
  div = SEL(fix, SUB(div, K(div, 1)), div);
  V fl = FLOOR(div);
  fl = SEL(GT(SUB(div, fl), K(fl, 0.5)), ADD(fl, K(fl, 1)), fl);
  V q = DIV(a, b);
  V zq = SEL(e_signbit(e, q), K(q, -0.0), zero);
  V r = SEL(NE(div, zero), fl, zq);
  return SEL(EQ(b, zero), q, r);
}

static tpuc_status* lower_binary_misc(op_ctx* c, int which) {
  if (!op_is_value(c, 0) || !op_is_value(c, 1))
    return op_unimpl("unexpected arguments");
  if (!op_is_tensor(c, 0) && !op_is_tensor(c, 1))
    return op_unimpl("no tensor operand");
  int ab[2] = {0, 1};
  tpuc_dtype dt;
  TRY(op_result_type(c, ab, 2, &dt));
  /* Complex: rsub and the logical ops only. */
  if (tpuc_dtype_is_complex(dt) && which != B_RSUB && which != B_LOGICAL_AND &&
      which != B_LOGICAL_OR && which != B_LOGICAL_XOR)
    return op_unimpl("complex: CPU");
  int mode = which;
  if (which == B_DIV_MODE) {
    const char* m = op_str_arg(c, 2, NULL);
    if (m == NULL)
      return op_lower_binary(c, TPUC_HLO_DIV | OP_BINARY_TRUE_DIV);
    if (strcmp(m, "trunc") == 0)
      mode = B_TRUNC_DIV;
    else if (strcmp(m, "floor") == 0)
      mode = B_FLOOR_DIV;
    else
      return op_unimpl("unknown rounding mode: CPU says why");
  }
  bool fl = is_float(dt);
  /* The compute dtype, and the result dtype. */
  tpuc_dtype rt = dt;
  switch (mode) {
    case B_REMAINDER:
    case B_FLOOR_DIV:
    case B_TRUNC_DIV:
    case B_RSUB:
      if (dt == TPUC_DTYPE_PRED) return op_unimpl("bool: CPU says why");
      break;
    case B_XLOGY:
    case B_COPYSIGN:
      rt = float_result(c, dt);
      break;
    case B_HYPOT:
    case B_LOGADDEXP:
    case B_LOGADDEXP2:
      if (!fl) return op_unimpl("integer form: CPU says why");
      break;
    case B_HEAVISIDE:
      if (c->types[0].dtype != c->types[1].dtype ||
          !op_is_tensor(c, 0) || !op_is_tensor(c, 1))
        return op_unimpl("mixed dtypes: CPU says why");
      break;
    case B_LOGICAL_AND:
    case B_LOGICAL_OR:
    case B_LOGICAL_XOR:
      rt = TPUC_DTYPE_PRED;
      break;
    default:
      break;
  }
  if (mode == B_RSUB && (c->types[0].dtype == TPUC_DTYPE_PRED ||
                        c->types[1].dtype == TPUC_DTYPE_PRED))
    return op_unimpl("bool subtraction: CPU says why");
  if (mode == B_RSUB && !fl && float_scalar(c, 2))
    return op_unimpl("float alpha, integral result: CPU says why");
  tpuc_dtype acc = op_accumulation_dtype(rt);
  if (mode == B_LOGICAL_AND || mode == B_LOGICAL_OR || mode == B_LOGICAL_XOR)
    acc = dt;
  if (mode == B_HYPOT && acc == TPUC_DTYPE_F32) acc = TPUC_DTYPE_F64;
  V v[2];
  TRY(operands(c, ab, 2, acc, v));
  em ee = em_of(c), *e = &ee;
  V a = v[0], b = v[1], r = -1, zero = K(a, 0);
  switch (mode) {
    case B_REMAINDER:
      if (!fl) int_div_check(e, b);
      r = e_pymod(e, a, b);
      break;
    case B_FLOOR_DIV:
      if (!fl) int_div_check(e, b);
      r = e_floordiv(e, a, b);
      break;
    case B_TRUNC_DIV:
      if (!fl) int_div_check(e, b);
      r = fl ? e_trunc(e, DIV(a, b)) : DIV(a, b);
      break;
    case B_XLOGY:
      r = SEL(EQ(a, zero), zero, MUL(a, LOG(b)));
      r = SEL(ISNAN(b), K(b, NAN), r);
      break;
    case B_RSUB: {
      V alpha = -1;
      tpuc_hlo_type sh = e_type(e, a);
      if (op_is_value(c, 2)) {
        TRY(op_operand(c, 2, acc, &sh, &alpha));
        a = MUL(alpha, a);
      }
      r = SUB(b, a);
      break;
    }
    case B_HYPOT:
      if (acc == TPUC_DTYPE_F64 && dt == TPUC_DTYPE_F64) {
        /* m sqrt(1 + (n/m)^2), m = max|a|,|b|: no early overflow */
        V aa = ABS(a), bb = ABS(b);
        V m = MAX(aa, bb), n = MIN(aa, bb);
        V q = DIV(n, m);
        r = MUL(m, SQRT(ADD(K(q, 1), MUL(q, q))));
        r = SEL(EQ(m, zero), zero, r);
        V inf = K(a, INFINITY);
        r = SEL(OR(EQ(aa, inf), EQ(bb, inf)), inf, r);
      } else {
        r = SQRT(ADD(MUL(a, a), MUL(b, b)));
      }
      break;
    case B_COPYSIGN:
      r = SEL(e_signbit(e, b), NEG(ABS(a)), ABS(a));
      break;
    case B_LOGADDEXP:
    case B_LOGADDEXP2: {
      V m = MAX(a, b), d = NEG(ABS(SUB(a, b)));
      if (mode == B_LOGADDEXP)
        r = ADD(m, LOG1P(EXP(d)));
      else
        r = ADD(m, MUL(LOG1P(POW(K(d, 2), d)), K(d, 1.0 / M_LN2)));
      V same_inf = AND(EQ(a, b), EQ(ABS(a), K(a, INFINITY)));
      r = SEL(same_inf, a, r);
      break;
    }
    case B_HEAVISIDE:
      r = SEL(EQ(a, zero), b, e_cvt(e, GT(a, zero), acc));
      break;
    case B_FMAX:
    case B_FMIN:
      r = mode == B_FMAX ? MAX(a, b) : MIN(a, b);
      if (fl) r = SEL(ISNAN(a), b, SEL(ISNAN(b), a, r));
      break;
    case B_LOGICAL_AND:
    case B_LOGICAL_OR:
    case B_LOGICAL_XOR: {
      V pa = dt == TPUC_DTYPE_PRED ? a : NE(a, zero);
      V pb = dt == TPUC_DTYPE_PRED ? b : NE(b, K(b, 0));
      r = mode == B_LOGICAL_AND  ? AND(pa, pb)
          : mode == B_LOGICAL_OR ? OR(pa, pb)
                                 : NE(pa, pb);
      break;
    }
    default:
      return op_unimpl("unknown op");
  }
  c->outs[0] = e_cvt(e, r, rt);
  c->nouts = 1;
  return em_done(e);
}

/* lerp(self, end, weight): self + w (end - self) for |w| < 1/2, else
 * end - (end - self)(1 - w), in f32 for half floats. */
static tpuc_status* lower_lerp(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1) || !op_is_value(c, 2))
    return op_unimpl("unexpected arguments");
  tpuc_dtype dt = c->types[0].dtype;
  if ((!is_float(dt) && !is_cx(dt)) || c->types[1].dtype != dt ||
      (op_is_tensor(c, 2) && c->types[2].dtype != dt))
    return op_unimpl("lerp dtypes: CPU says why");
  tpuc_dtype acc = is_cx(dt) ? dt : op_accumulation_dtype(dt);
  int all[3] = {0, 1, 2};
  V v[3];
  if (!op_is_tensor(c, 2) && !is_cx(dt)) {
    /* A number weight (AdamW's exp_avg.lerp_): the formula is chosen on
     * the number, and one product is taken, self + w d or end + (w - 1) d
     * (end - (1 - w) d, exactly, but for the sign of a zero result when w
     * is 1 and end is -0: -0, as PyTorch's vectorized CPU kernel, where
     * its scalar loop gives +0). With a select between the two full-size
     * formulas, XLA's CPU compiler kept the operands' reshapes inside the
     * fusion and could not write an in-place lerp_ into its own storage: a
     * temporary the size of the tensor and a copy, at every step. */
    TRY(operands(c, all, 2, acc, v));
    tpuc_hlo_type st = {.dtype = acc, .rank = 0};
    TRY(op_operand(c, 2, acc, &st, &v[2]));
    em ee = em_of(c), *e = &ee;
    V s = v[0], en = v[1], w = v[2];
    V small = LT(ABS(w), K(w, 0.5));
    V base = SEL(e_splat(e, small, s), s, en);
    V coef = SEL(small, w, SUB(w, K(w, 1)));
    V r = ADD(base, MUL(SUB(en, s), e_splat(e, coef, s)));
    c->outs[0] = e_cvt(e, r, dt);
    c->nouts = 1;
    return em_done(e);
  }
  TRY(operands(c, all, 3, acc, v));
  em ee = em_of(c), *e = &ee;
  V s = v[0], en = v[1], w = v[2];
  V d = SUB(en, s);
  V lo = ADD(s, MUL(w, d));
  V hi = SUB(en, MUL(d, SUB(K(w, 1), w)));
  V aw = ABS(w);
  V r = SEL(LT(aw, K(aw, 0.5)), lo, hi);
  c->outs[0] = e_cvt(e, r, dt);
  c->nouts = 1;
  return em_done(e);
}

/* addcmul / addcdiv(self, t1, t2, *, value): self + value * t1 * t2 or
 * self + value * t1 / t2 (in that order, as the CPU). */
static tpuc_status* lower_addc(op_ctx* c, int div) {
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1) || !op_is_tensor(c, 2) ||
      !op_is_value(c, 3))
    return op_unimpl("unexpected arguments");
  int all[3] = {0, 1, 2};
  tpuc_dtype dt;
  TRY(op_result_type(c, all, 3, &dt));
  if (dt == TPUC_DTYPE_PRED || (div && !is_float(dt) && !is_cx(dt)))
    return op_unimpl("this dtype: CPU says why");
  tpuc_dtype acc = is_cx(dt) ? dt : op_accumulation_dtype(dt);
  V v[3];
  TRY(operands(c, all, 3, acc, v));
  tpuc_hlo_type sh;
  em ee = em_of(c), *e = &ee;
  sh = e_type(e, v[0]);
  V val;
  TRY(op_operand(c, 3, acc, &sh, &val));
  V t = MUL(val, v[1]);
  t = div ? DIV(t, v[2]) : MUL(t, v[2]);
  c->outs[0] = e_cvt(e, ADD(v[0], t), dt);
  c->nouts = 1;
  return em_done(e);
}

/* ----------------------- matrix and vector products --------------------- */

enum {
  LA_ADDMM = 1, LA_ADDMV, LA_MV, LA_DOT, LA_BADDBMM, LA_ADDBMM, LA_ADDR,
  LA_VDOT /* dot with the first vector conjugated */
};

/* addmm / addmv / baddbmm / addbmm / addr(self, a, b, *, beta, alpha):
 * beta self + alpha (a . b), where beta == 0 ignores self (NaNs included);
 * mv / dot / vdot(a, b): a . b. Operands of one dtype (the CPU reports a
 * mismatch), half floats accumulated in f32 and rounded once. */
static tpuc_status* lower_product(op_ctx* c, int which) {
  bool conj_a = which == LA_VDOT;
  if (conj_a) which = LA_DOT;
  bool has_self = which != LA_MV && which != LA_DOT;
  int ia = has_self ? 1 : 0, ib = ia + 1;
  if (!op_is_tensor(c, ia) || !op_is_tensor(c, ib) ||
      (has_self && !op_is_tensor(c, 0)))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type *a = &c->types[ia], *b = &c->types[ib];
  tpuc_dtype dt = a->dtype;
  if (b->dtype != dt || (has_self && c->types[0].dtype != dt))
    return op_unimpl("mixed dtypes: CPU says why");
  bool cx = tpuc_dtype_is_complex(dt);
  if (dt == TPUC_DTYPE_PRED)
    return op_unimpl("this dtype runs on the CPU");
  if (has_self && !is_float(dt) && !cx &&
      (float_scalar(c, 3) || float_scalar(c, 4)))
    return op_unimpl("float beta/alpha, integral operands: CPU says why");
  /* A complex beta or alpha: the CPU's BLAS folds alpha into its products,
   * and complex64 results here (alpha times the finished sum) land outside
   * OpInfo's tolerance where the sum cancels. */
  for (int i = 3; has_self && i <= 4; i++)
    if ((size_t)i < c->nargs && c->args[i].kind == TPUC_OP_ARG_SCALAR &&
        c->args[i].scalar == TPUC_SCALAR_COMPLEX)
      return op_unimpl("complex beta/alpha: the CPU's BLAS");
  int ra, rb;
  switch (which) {
    case LA_ADDMM: ra = 2, rb = 2; break;
    case LA_ADDMV: case LA_MV: ra = 2, rb = 1; break;
    case LA_DOT: case LA_ADDR: ra = 1, rb = 1; break;
    default: ra = 3, rb = 3; break;
  }
  if (a->rank != ra || b->rank != rb)
    return op_unimpl("ranks: CPU says why");
  /* Contraction dims and the result shape. */
  int64_t lc[2], rc[2], lb = 0, rbt = 0;
  size_t nc = 1, nb = 0;
  tpuc_hlo_type out;
  memset(&out, 0, sizeof out);
  out.dtype = dt;
  if (which == LA_ADDR) {
    nc = 0;
    out.rank = 2, out.dims[0] = a->dims[0], out.dims[1] = b->dims[0];
  } else if (which == LA_DOT) {
    if (a->dims[0] != b->dims[0]) return op_unimpl("sizes: CPU says why");
    lc[0] = 0, rc[0] = 0;
  } else if (ra == 2) {
    if (a->dims[1] != b->dims[0]) return op_unimpl("sizes: CPU says why");
    lc[0] = 1, rc[0] = 0;
    out.rank = rb;
    out.dims[0] = a->dims[0];
    if (rb == 2) out.dims[1] = b->dims[1];
  } else {
    if (a->dims[0] != b->dims[0] || a->dims[2] != b->dims[1])
      return op_unimpl("sizes: CPU says why");
    if (which == LA_BADDBMM) {
      nb = 1;
      lc[0] = 2, rc[0] = 1;
      out.rank = 3;
      out.dims[0] = a->dims[0], out.dims[1] = a->dims[1];
      out.dims[2] = b->dims[2];
    } else {
      nc = 2;
      lc[0] = 0, lc[1] = 2, rc[0] = 0, rc[1] = 1;
      out.rank = 2, out.dims[0] = a->dims[1], out.dims[1] = b->dims[2];
    }
  }
  if (has_self) {
    /* self must broadcast to the product's shape */
    const tpuc_hlo_type* st = &c->types[0];
    if (st->rank > out.rank) return op_unimpl("self shape: CPU says why");
    for (int d = 0; d < st->rank; d++) {
      int64_t o = out.dims[out.rank - st->rank + d];
      if (st->dims[d] != o && st->dims[d] != 1)
        return op_unimpl("self shape: CPU says why");
    }
  }
  tpuc_dtype acc = op_accumulation_dtype(dt);
  /* The CPU's half-float addbmm adds one rounded addmm per batch entry:
   * products per batch here, added below. */
  bool half_addbmm = which == LA_ADDBMM && acc != dt;
  if (half_addbmm) {
    if (a->dims[0] > 256) return op_unimpl("long half addbmm: CPU");
    nb = 1, nc = 1;
    lc[0] = 2, rc[0] = 1;
  }
  em ee = em_of(c), *e = &ee;
  V p = -1, xb = -1, yb = -1;
  if (which == LA_ADDR) {
    int64_t d0 = 0, d1 = 1;
    V x = e_cvt(e, c->vals[ia], acc), y = e_cvt(e, c->vals[ib], acc);
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_broadcast_in_dim(e->fn, x, out.dims, 2, &d0, &xb));
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_broadcast_in_dim(e->fn, y, out.dims, 2, &d1, &yb));
    p = MUL(xb, yb);
  } else {
    V va = c->vals[ia];
    if (conj_a && cx) {
      /* vdot: conj(a) . b */
      V re = -1, im = -1;
      em_keep(e, tpuc_hlo_unary(e->fn, TPUC_HLO_REAL, va, &re));
      if (e->st == NULL)
        em_keep(e, tpuc_hlo_unary(e->fn, TPUC_HLO_IMAG, va, &im));
      if (e->st == NULL)
        em_keep(e, tpuc_hlo_unary(e->fn, TPUC_HLO_NEG, im, &im));
      if (e->st == NULL)
        em_keep(e, tpuc_hlo_binary(e->fn, TPUC_HLO_COMPLEX, re, im, &va));
    }
    tpuc_hlo_dot_dims dd = {nb ? &lb : NULL,
                            nb ? &rbt : NULL,
                            nb,
                            lc,
                            rc,
                            nc,
                            acc != dt ? acc : TPUC_DTYPE_INVALID,
                            (dt == TPUC_DTYPE_F32 || dt == TPUC_DTYPE_C64)
                                ? c->opts->matmul_precision
                                : TPUC_HLO_PRECISION_DEFAULT};
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_dot_general(e->fn, va, c->vals[ib], &dd, &p));
  }
  TRY(em_done(e));
  out.dtype = acc;
  if (has_self) {
    V alpha, beta, self;
    TRY(op_operand(c, 4, acc, &out, &alpha));
    TRY(op_operand(c, 3, acc, &out, &beta));
    TRY(op_operand(c, 0, acc, &out, &self));
    if (which == LA_ADDR) {
      /* addr is elementwise on the CPU: beta self + (alpha v1) v2, each
       * step rounded to the dtype. */
      V x = e_rnd(e, MUL(alpha, xb), dt);
      p = e_rnd(e, MUL(x, yb), dt);
    } else if (!half_addbmm) {
      p = MUL(alpha, p);
    }
    V bs = SEL(EQ(beta, K(beta, 0)), K(beta, 0), e_rnd(e, MUL(beta, self), dt));
    if (half_addbmm) {
      V r = bs;
      for (int64_t i = 0; i < a->dims[0] && e->st == NULL; i++) {
        int64_t st[3] = {i, 0, 0}, lim[3] = {i + 1, out.dims[0], out.dims[1]};
        V pi = -1, pr = -1;
        em_keep(e, tpuc_hlo_slice(e->fn, p, st, lim, NULL, &pi));
        if (e->st == NULL)
          em_keep(e, tpuc_hlo_reshape(e->fn, pi, out.dims, 2, &pr));
        r = e_rnd(e, ADD(MUL(alpha, pr), r), dt);
      }
      p = r;
    } else {
      p = ADD(p, bs);
    }
  }
  c->outs[0] = e_cvt(e, p, dt);
  c->nouts = 1;
  return em_done(e);
}

/* ------------------------------ reductions ------------------------------ */

/* Reduction lowerings take the position of their dim and keepdim
 * arguments in the param: RP(kind, dim index, keepdim index). */
#define RP(kind, d, k) ((kind) | ((d) << 8) | ((k) << 12))
#define RP_KIND(p) ((p) & 0xff)
#define RP_DIM(p) (((p) >> 8) & 0xf)
#define RP_KEEP(p) (((p) >> 12) & 0xf)

enum {
  R_ANY = 1, R_ALL, R_PROD, R_MAX, R_MIN, R_NANSUM, R_COUNT_NONZERO,
  R_ARGMAX, R_ARGMIN, R_MAX_DIM, R_MIN_DIM, R_VAR, R_STD, R_VAR_MEAN,
  R_STD_MEAN, R_LOGSUMEXP, R_VECTOR_NORM, R_NORM, R_NORM_DTYPE,
};

/* Which dims of argument 0 argument i reduces (absent, None or an empty
 * list: all of them); `count` gets the number of elements reduced into
 * each result. */
static tpuc_status* red_dims(const op_ctx* c, int i, bool* red,
                             int64_t* count) {
  int rank = c->types[0].rank;
  const tpuc_op_arg* d = i > 0 && (size_t)i < c->nargs ? &c->args[i] : NULL;
  bool all = d == NULL || d->kind == TPUC_OP_ARG_NONE ||
             (d->kind == TPUC_OP_ARG_INT_LIST && d->list_len == 0);
  if (!all && d->kind != TPUC_OP_ARG_INT && d->kind != TPUC_OP_ARG_INT_LIST)
    return op_unimpl("unexpected dim argument");
  for (int k = 0; k < rank; k++) red[k] = all;
  size_t n = all ? 0 : d->kind == TPUC_OP_ARG_INT ? 1 : d->list_len;
  for (size_t k = 0; k < n; k++) {
    int64_t dim = 0;
    TRY(op_wrap_dim(rank, d->kind == TPUC_OP_ARG_INT ? d->i : d->list[k],
                    &dim));
    if (rank == 0) continue;
    if (red[dim])
      return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                              "dim %lld appears multiple times in the list of "
                              "dims",
                              (long long)dim);
    red[dim] = true;
  }
  *count = 1;
  for (int k = 0; k < rank; k++)
    if (red[k]) *count *= c->types[0].dims[k];
  return NULL;
}

/* The smallest / largest value of `dt` (infinities for floats). */
static V e_lowest(em* e, tpuc_dtype dt, bool lowest) {
  if (is_float(dt)) return e_k0(e, dt, lowest ? -INFINITY : INFINITY);
  if (dt == TPUC_DTYPE_PRED) return e_k0(e, dt, lowest ? 0 : 1);
  V k = -1;
  if (tpuc_dtype_is_unsigned_int(dt)) {
    if (lowest) return e_k0(e, dt, 0);
    tpuc_dtype sd = dt == TPUC_DTYPE_U8    ? TPUC_DTYPE_S8
                    : dt == TPUC_DTYPE_U16 ? TPUC_DTYPE_S16
                    : dt == TPUC_DTYPE_U32 ? TPUC_DTYPE_S32
                                           : TPUC_DTYPE_S64;
    V m1 = e_k0(e, sd, -1);
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_bitcast_convert(e->fn, m1, dt, &k));
    return k;
  }
  int bits = (int)tpuc_dtype_size(dt) * 8;
  int64_t hi = bits == 64 ? INT64_MAX : (((int64_t)1 << (bits - 1)) - 1);
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_constant_i64(e->fn, dt, lowest ? -hi - 1 : hi, &k));
  return k;
}

/* x reduced with `op` over the dims marked in `red`, from `init`. */
static V e_reduce(em* e, V x, const bool* red, tpuc_hlo_binary_op op,
                  V init) {
  tpuc_hlo_type t = e_type(e, x);
  int64_t dims[TPUC_MAX_RANK];
  size_t nd = 0;
  for (int k = 0; k < t.rank; k++)
    if (red[k]) dims[nd++] = k;
  tpuc_hlo_fn* body = NULL;
  V r = -1;
  if ((op == TPUC_HLO_MAX || op == TPUC_HLO_MIN) && is_float(t.dtype)) {
    /* a body that keeps NaN */
    tpuc_hlo_type two[2] = {tpuc_hlo_type_scalar(t.dtype),
                            tpuc_hlo_type_scalar(t.dtype)};
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_region_create(e->c->module, two, 2, &body));
    if (e->st != NULL) return -1;
    em be = {e->c, body, NULL};
    V a = -1, b = -1;
    em_keep(&be, tpuc_hlo_get_arg(body, 0, &a));
    em_keep(&be, tpuc_hlo_get_arg(body, 1, &b));
    V m = e_pmax(&be, a, b, op == TPUC_HLO_MAX);
    if (be.st == NULL) em_keep(&be, tpuc_hlo_return(body, &m, 1));
    if (!em_keep(e, be.st)) return -1;
  } else if (e->st == NULL) {
    em_keep(e, tpuc_hlo_region_binary(e->c->module, t.dtype, op, &body));
  }
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_reduce(e->fn, &x, &init, 1, dims, nd, body, &r));
  return r;
}

/* r (reduced) reshaped to keep the reduced dims as 1 when `keep`. */
static V e_keep(em* e, V r, const tpuc_hlo_type* in, const bool* red,
                bool keep) {
  if (!keep || e->st != NULL) return r;
  int64_t dims[TPUC_MAX_RANK];
  for (int k = 0; k < in->rank; k++) dims[k] = red[k] ? 1 : in->dims[k];
  V o = -1;
  em_keep(e, tpuc_hlo_reshape(e->fn, r, dims, in->rank, &o));
  return o;
}

/* r (reduced, as e_reduce) broadcast back to the input's shape. */
static V e_expand(em* e, V r, const tpuc_hlo_type* in, const bool* red) {
  int64_t map[TPUC_MAX_RANK];
  int n = 0;
  for (int k = 0; k < in->rank; k++)
    if (!red[k]) map[n++] = k;
  V o = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_broadcast_in_dim(e->fn, r, in->dims, in->rank, map,
                                         &o));
  return o;
}

/* The dtype argument (the last DTYPE-kind argument), or INVALID. */
static tpuc_dtype dtype_arg(const op_ctx* c) {
  for (size_t i = c->nargs; i-- > 1;)
    if (c->args[i].kind == TPUC_OP_ARG_DTYPE) return c->args[i].dtype;
  return TPUC_DTYPE_INVALID;
}

/* Index reduction: values and the first index of the max (or min), NaN
 * counting as the largest and the smallest, as the CPU. */
static tpuc_status* arg_reduce(em* e, V x, const bool* red, bool max,
                               V* vals, V* idx) {
  op_ctx* c = e->c;
  tpuc_hlo_type t = e_type(e, x);
  TRY(em_done(e));
  tpuc_hlo_type it = t;
  it.dtype = TPUC_DTYPE_S64;
  int64_t dims[TPUC_MAX_RANK];
  size_t nd = 0;
  for (int k = 0; k < t.rank; k++)
    if (red[k]) dims[nd++] = k;
  /* Index along the reduced dims, flattened row-major. */
  V flat = e_kd(e, TPUC_DTYPE_S64, 0, x);
  for (size_t k = 0; k < nd; k++) {
    V io = -1;
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_iota(e->fn, &it, dims[k], &io));
    int64_t stride = 1;
    for (size_t j = k + 1; j < nd; j++) stride *= t.dims[dims[j]];
    flat = ADD(flat, MUL(io, e_kd(e, TPUC_DTYPE_S64, (double)stride, io)));
  }
  /* Body: (av, ai, bv, bi) -> (v, i). */
  tpuc_hlo_type st[4] = {tpuc_hlo_type_scalar(t.dtype),
                         tpuc_hlo_type_scalar(TPUC_DTYPE_S64),
                         tpuc_hlo_type_scalar(t.dtype),
                         tpuc_hlo_type_scalar(TPUC_DTYPE_S64)};
  tpuc_hlo_fn* body = NULL;
  TRY(tpuc_hlo_region_create(c->module, st, 4, &body));
  em be = {c, body, NULL}, *b = &be;
  V av, ai, bv, bi;
  TRY(tpuc_hlo_get_arg(body, 0, &av));
  TRY(tpuc_hlo_get_arg(body, 1, &ai));
  TRY(tpuc_hlo_get_arg(body, 2, &bv));
  TRY(tpuc_hlo_get_arg(body, 3, &bi));
  V better, same;
  {
    em* e = b; /* the formulas below are in the body */
    tpuc_hlo_compare_dir dir = max ? TPUC_HLO_GT : TPUC_HLO_LT;
    better = e_cmp(e, dir, av, bv);
    same = EQ(av, bv);
    if (is_float(t.dtype)) {
      V an = ISNAN(av), bn = ISNAN(bv);
      better = SEL(an, NOT(bn), better);
      same = SEL(an, bn, same);
    }
    V take_a = OR(better, AND(same, LT(ai, bi)));
    V outs[2] = {SEL(take_a, av, bv), SEL(take_a, ai, bi)};
    if (e->st == NULL) em_keep(e, tpuc_hlo_return(body, outs, 2));
  }
  TRY(em_done(b));
  V inits[2] = {e_lowest(e, t.dtype, max), e_k0(e, TPUC_DTYPE_S64, 0)};
  V ins[2] = {x, flat}, outs[2] = {-1, -1};
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_reduce(e->fn, ins, inits, 2, dims, nd, body, outs));
  *vals = outs[0];
  *idx = outs[1];
  return em_done(e);
}

static tpuc_status* lower_reduction(op_ctx* c, int param) {
  int kind = RP_KIND(param);
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type in = c->types[0];
  tpuc_dtype dt = in.dtype;
  /* Complex tensors: tests against zero, products and norms. */
  if (tpuc_dtype_is_complex(dt) && kind != R_VECTOR_NORM && kind != R_NORM &&
      kind != R_ANY && kind != R_ALL && kind != R_COUNT_NONZERO &&
      kind != R_PROD)
    return op_unimpl("complex: CPU");
  int di = RP_DIM(param), ki = RP_KEEP(param);
  bool red[TPUC_MAX_RANK];
  int64_t count = 1;
  TRY(red_dims(c, di, red, &count));
  bool keep = ki > 0 && (size_t)ki < c->nargs &&
              c->args[ki].kind == TPUC_OP_ARG_BOOL && c->args[ki].i;
  int64_t total = tpuc_hlo_type_num_elements(&in);
  em ee = em_of(c), *e = &ee;
  V x = c->vals[0], r = -1, r2 = -1;
  c->nouts = 1;
  switch (kind) {
    case R_ANY:
    case R_ALL: {
      bool any = kind == R_ANY;
      V p = dt == TPUC_DTYPE_PRED ? x : NE(x, K(x, 0));
      r = e_reduce(e, p, red, any ? TPUC_HLO_OR : TPUC_HLO_AND,
                   e_k0(e, TPUC_DTYPE_PRED, any ? 0 : 1));
      if (dt == TPUC_DTYPE_U8) r = e_cvt(e, r, TPUC_DTYPE_U8);
      break;
    }
    case R_PROD:
    case R_NANSUM: {
      tpuc_dtype want = dtype_arg(c);
      tpuc_dtype rt = want != TPUC_DTYPE_INVALID       ? want
                      : is_float(dt) || is_cx(dt) ? dt
                                                       : TPUC_DTYPE_S64;
      if (is_cx(rt) != is_cx(dt) || (is_cx(rt) && kind == R_NANSUM))
        return op_unimpl("complex: CPU");
      tpuc_dtype acc = op_accumulation_dtype(rt);
      V v = e_cvt(e, want != TPUC_DTYPE_INVALID ? e_cvt(e, x, want) : x, acc);
      if (kind == R_NANSUM && is_float(acc))
        v = SEL(ISNAN(v), K(v, 0), v);
      r = e_reduce(e, v, red, kind == R_PROD ? TPUC_HLO_MUL : TPUC_HLO_ADD,
                   e_k0(e, acc, kind == R_PROD ? 1 : 0));
      r = e_cvt(e, r, rt);
      break;
    }
    case R_MAX:
    case R_MIN:
      if (total == 0) return op_unimpl("empty: CPU says why");
      r = e_reduce(e, x, red, kind == R_MAX ? TPUC_HLO_MAX : TPUC_HLO_MIN,
                   e_lowest(e, dt, kind == R_MAX));
      break;
    case R_COUNT_NONZERO: {
      V p = dt == TPUC_DTYPE_PRED ? x : NE(x, K(x, 0));
      r = e_reduce(e, e_cvt(e, p, TPUC_DTYPE_S64), red, TPUC_HLO_ADD,
                   e_k0(e, TPUC_DTYPE_S64, 0));
      break;
    }
    case R_ARGMAX:
    case R_ARGMIN:
    case R_MAX_DIM:
    case R_MIN_DIM: {
      if (count == 0 || total == 0) return op_unimpl("empty: CPU says why");
      if (dt == TPUC_DTYPE_PRED && (kind == R_ARGMAX || kind == R_ARGMIN))
        return op_unimpl("bool argmax: CPU says why");
      bool mx = kind == R_ARGMAX || kind == R_MAX_DIM;
      /* argmax(dim=None) is over the flattened input; keepdim then keeps
       * every dim as 1. */
      V vals, idx;
      TRY(arg_reduce(e, x, red, mx, &vals, &idx));
      if (kind == R_ARGMAX || kind == R_ARGMIN) {
        r = idx;
      } else {
        r = vals;
        r2 = idx;
        c->nouts = 2;
      }
      break;
    }
    case R_VAR:
    case R_STD:
    case R_VAR_MEAN:
    case R_STD_MEAN: {
      if (!is_float(dt)) return op_unimpl("integer var/std: CPU says why");
      /* Two passes in f32 (half floats) or the dtype: the mean, then the
       * squared deviations over max(N - correction, 0). */
      tpuc_dtype acc = op_accumulation_dtype(dt);
      V v = e_cvt(e, x, acc);
      V zero0 = e_k0(e, acc, 0);
      V sum = e_reduce(e, v, red, TPUC_HLO_ADD, zero0);
      V mean = DIV(sum, K(sum, (double)count));
      V d = SUB(v, e_expand(e, mean, &in, red));
      V ss = e_reduce(e, MUL(d, d), red, TPUC_HLO_ADD, zero0);
      V corr;
      if (op_is_value(c, 2)) {
        if (c->types[2].rank != 0) return op_unimpl("unexpected correction");
        corr = e_cvt(e, c->vals[2], acc);
      } else {
        corr = e_k0(e, acc, 1);
      }
      V div = MAX(SUB(e_k0(e, acc, (double)count), corr), zero0);
      V var = DIV(ss, e_splat(e, div, ss));
      if (kind == R_STD || kind == R_STD_MEAN) var = SQRT(var);
      r = e_cvt(e, var, dt);
      if (kind == R_VAR_MEAN || kind == R_STD_MEAN) {
        r2 = e_cvt(e, mean, dt);
        c->nouts = 2;
      }
      break;
    }
    case R_LOGSUMEXP: {
      /* As the CPU composes it, each step rounded to the dtype:
       * m = amax (infinities -> 0), log(sum(exp(x - m))) + m. */
      tpuc_dtype rt = float_result(c, dt);
      tpuc_dtype acc = op_accumulation_dtype(rt);
      V v = e_cvt(e, e_cvt(e, x, rt), acc);
      if (total == 0) return op_unimpl("empty: CPU");
      V m = e_reduce(e, v, red, TPUC_HLO_MAX, e_k0(e, acc, -INFINITY));
      m = SEL(EQ(ABS(m), K(m, INFINITY)), K(m, 0), m);
      V ex = e_rnd(e, EXP(e_rnd(e, SUB(v, e_expand(e, m, &in, red)), rt)), rt);
      V sm = e_rnd(e, e_reduce(e, ex, red, TPUC_HLO_ADD, e_k0(e, acc, 0)), rt);
      r = e_cvt(e, ADD(e_rnd(e, LOG(sm), rt), m), rt);
      break;
    }
    case R_VECTOR_NORM:
    case R_NORM:
    case R_NORM_DTYPE: {
      /* ord is a value of the program (not part of its cache key): every
       * kind of norm is computed and the right one selected. */
      tpuc_dtype want = dtype_arg(c);
      if (tpuc_dtype_is_complex(dt)) {
        /* The norm of complex values is the real norm of their magnitudes
         * (stablehlo.abs of a complex gives its real component type). */
        if (want != TPUC_DTYPE_INVALID)
          return op_unimpl("complex norm with a dtype: CPU");
        x = ABS(x);
        dt = e_type(e, x).dtype;
      }
      if (!is_float(dt) || (want != TPUC_DTYPE_INVALID && !is_float(want)))
        return op_unimpl("norm of this dtype: CPU says why");
      if (count == 0 || total == 0) return op_unimpl("empty norm: CPU");
      tpuc_dtype rt = want != TPUC_DTYPE_INVALID ? want : dt;
      tpuc_dtype acc = op_accumulation_dtype(rt);
      V ord;
      if (op_is_value(c, 1)) {
        if (c->types[1].rank != 0) return op_unimpl("unexpected ord");
        ord = e_cvt(e, c->vals[1], acc);
      } else if (op_is_none(c, 1)) {
        ord = e_k0(e, acc, 2);
      } else {
        return op_unimpl("unexpected ord");
      }
      V a = ABS(e_cvt(e, e_cvt(e, x, rt), acc));
      V p = e_splat(e, ord, a);
      V is0 = EQ(p, K(p, 0)), is2 = EQ(p, K(p, 2));
      V term = SEL(is2, MUL(a, a), POW(a, p));
      term = SEL(is0, e_cvt(e, NE(a, K(a, 0)), acc), term);
      V sum = e_reduce(e, term, red, TPUC_HLO_ADD, e_k0(e, acc, 0));
      V mx = e_reduce(e, a, red, TPUC_HLO_MAX, e_k0(e, acc, -INFINITY));
      V mn = e_reduce(e, a, red, TPUC_HLO_MIN, e_k0(e, acc, INFINITY));
      V q = e_splat(e, ord, sum);
      V one = K(sum, 1);
      V gen = SEL(EQ(q, K(q, 2)), SQRT(sum),
                  SEL(EQ(q, one), sum, POW(sum, DIV(one, q))));
      gen = SEL(EQ(q, K(q, 0)), sum, gen);
      gen = SEL(EQ(q, K(q, INFINITY)), mx, gen);
      gen = SEL(EQ(q, K(q, -INFINITY)), mn, gen);
      r = e_cvt(e, gen, rt);
      break;
    }
    default:
      return op_unimpl("unknown reduction");
  }
  c->outs[0] = e_keep(e, r, &in, red, keep);
  if (c->nouts == 2) c->outs[1] = e_keep(e, r2, &in, red, keep);
  return em_done(e);
}

/* --------------------------------- scans -------------------------------- */

enum { S_CUMSUM = 1, S_CUMPROD, S_LOGCUMSUMEXP };

/* log(exp(a) + exp(b)) as the CPU's cumulative helper: equal infinities
 * stay as they are. */
static V e_logaddexp(em* e, V a, V b) {
  V mn = MIN(a, b), mx = MAX(a, b);
  V r = ADD(mx, LOG1P(EXP(SUB(mn, mx))));
  V keep = AND(EQ(mn, mx), EQ(ABS(mn), K(mn, INFINITY)));
  return SEL(keep, a, r);
}

/* Inclusive scan of x along `dim` in log2(n) shifted steps
 * (Hillis-Steele): x[i] op= x[i - s] for s = 1, 2, 4, ... */
static V e_scan(em* e, V x, int64_t dim, int kind) {
  tpuc_hlo_type t = e_type(e, x);
  int64_t n = t.dims[dim];
  double ident = kind == S_CUMPROD ? 1 : kind == S_LOGCUMSUMEXP ? -INFINITY : 0;
  V pad = e_k0(e, t.dtype, ident);
  for (int64_t s = 1; s < n && e->st == NULL; s *= 2) {
    int64_t lo[TPUC_MAX_RANK] = {0}, hi[TPUC_MAX_RANK] = {0};
    lo[dim] = s;
    hi[dim] = -s;
    V sh = -1;
    em_keep(e, tpuc_hlo_pad(e->fn, x, pad, lo, hi, NULL, &sh));
    x = kind == S_CUMSUM    ? ADD(x, sh)
        : kind == S_CUMPROD ? MUL(x, sh)
                            : e_logaddexp(e, sh, x);
  }
  return x;
}

/* cumsum / cumprod(self, dim, *, dtype) (integers accumulate in int64),
 * logcumsumexp(self, dim); half floats accumulate in f32. */
static tpuc_status* lower_scan(op_ctx* c, int kind) {
  if (!op_is_tensor(c, 0) || c->nargs < 2 ||
      c->args[1].kind != TPUC_OP_ARG_INT)
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type in = c->types[0];
  tpuc_dtype dt = in.dtype;
  int64_t dim = 0;
  TRY(op_wrap_dim(in.rank, c->args[1].i, &dim));
  tpuc_dtype want = kind == S_LOGCUMSUMEXP ? TPUC_DTYPE_INVALID : dtype_arg(c);
  /* Floats and complex keep their dtype, integers accumulate in int64. */
  bool keeps = is_float(dt) || tpuc_dtype_is_complex(dt);
  tpuc_dtype rt = want != TPUC_DTYPE_INVALID ? want
                  : keeps                    ? dt
                                             : TPUC_DTYPE_S64;
  if (kind == S_LOGCUMSUMEXP && !is_float(dt))
    return op_unimpl("integer logcumsumexp: CPU says why");
  /* complex -> real would drop the imaginary part: the CPU says why. */
  if (tpuc_dtype_is_complex(dt) && !tpuc_dtype_is_complex(rt))
    return op_unimpl("complex to real scan: CPU");
  tpuc_dtype acc = op_accumulation_dtype(rt);
  em ee = em_of(c), *e = &ee;
  V x = e_cvt(e, want != TPUC_DTYPE_INVALID ? e_cvt(e, c->vals[0], want)
                                            : c->vals[0],
              acc);
  if (in.rank > 0) x = e_scan(e, x, dim, kind);
  c->outs[0] = e_cvt(e, x, rt);
  c->nouts = 1;
  return em_done(e);
}

/* ----------------------------- sort and topk ---------------------------- */

/* Sorts x along dim (stable) with its int64 indices; NaN is the largest
 * value, as the CPU's ordering. */
static tpuc_status* e_sort(em* e, V x, int64_t dim, bool descending, V* vals,
                           V* idx) {
  op_ctx* c = e->c;
  tpuc_hlo_type t = e_type(e, x);
  TRY(em_done(e));
  tpuc_hlo_type it = t;
  it.dtype = TPUC_DTYPE_S64;
  V io = -1;
  TRY(tpuc_hlo_iota(e->fn, &it, dim, &io));
  tpuc_hlo_type st[4] = {
      tpuc_hlo_type_scalar(t.dtype), tpuc_hlo_type_scalar(t.dtype),
      tpuc_hlo_type_scalar(TPUC_DTYPE_S64),
      tpuc_hlo_type_scalar(TPUC_DTYPE_S64)};
  tpuc_hlo_fn* cmp = NULL;
  TRY(tpuc_hlo_region_create(c->module, st, 4, &cmp));
  V a, b;
  TRY(tpuc_hlo_get_arg(cmp, 0, &a));
  TRY(tpuc_hlo_get_arg(cmp, 1, &b));
  {
    em be = {c, cmp, NULL}, *e = &be;
    V r = descending ? GT(a, b) : LT(a, b);
    if (is_float(t.dtype)) {
      V an = ISNAN(a), bn = ISNAN(b);
      r = descending ? OR(r, AND(an, NOT(bn))) : OR(r, AND(NOT(an), bn));
    }
    if (e->st == NULL) em_keep(e, tpuc_hlo_return(cmp, &r, 1));
    TRY(em_done(e));
  }
  V ins[2] = {x, io}, outs[2] = {-1, -1};
  TRY(tpuc_hlo_sort(e->fn, ins, 2, dim, true, cmp, outs));
  *vals = outs[0];
  *idx = outs[1];
  return NULL;
}

enum { SO_SORT = 1, SO_SORT_STABLE, SO_TOPK };

static tpuc_status* lower_sort(op_ctx* c, int which) {
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type in = c->types[0];
  if (tpuc_dtype_is_complex(in.dtype)) return op_unimpl("complex: CPU");
  int64_t dim_arg = -1, desc = 0, k = 0, sorted = 1;
  if (which == SO_SORT) {
    TRY(op_int_arg(c, 1, -1, &dim_arg));
    TRY(op_int_arg(c, 2, 0, &desc));
  } else if (which == SO_SORT_STABLE) {
    TRY(op_int_arg(c, 2, -1, &dim_arg));
    TRY(op_int_arg(c, 3, 0, &desc));
  } else {
    if (c->nargs < 2 || c->args[1].kind != TPUC_OP_ARG_INT)
      return op_unimpl("unexpected arguments");
    k = c->args[1].i;
    TRY(op_int_arg(c, 2, -1, &dim_arg));
    TRY(op_int_arg(c, 3, 1, &desc));
    TRY(op_int_arg(c, 4, 1, &sorted));
    /* unsorted topk's order is the CPU's own */
    if (!sorted) return op_unimpl("unsorted topk: CPU");
  }
  /* Ties: the CPU's unstable sort (and topk) orders them its own way.
   * Stable sorts match it exactly; unstable ones run here only for the
   * wide dtypes, where ties are rare (their order is then this sort's, a
   * valid one, as on other accelerators). */
  int64_t stable = 0;
  if (which == SO_SORT_STABLE) TRY(op_int_arg(c, 1, 0, &stable));
  tpuc_dtype dt = in.dtype;
  bool narrow = dt == TPUC_DTYPE_PRED || tpuc_dtype_size(dt) == 1 ||
                dt == TPUC_DTYPE_F16 || dt == TPUC_DTYPE_BF16;

  /* topk of integers: ties are common, and the CPU's partial sort orders
   * them its own way. */
  if (which == SO_TOPK && !tpuc_dtype_is_float(dt))
    return op_unimpl("integer topk: the CPU's order of ties");
  int64_t dim = 0;
  TRY(op_wrap_dim(in.rank, dim_arg, &dim));
  int64_t n = in.rank == 0 ? 1 : in.dims[dim];
  /* Up to 16 elements, the CPU's sort is an insertion sort: stable. */
  if (narrow && !stable && (n > 16 || which == SO_TOPK))
    return op_unimpl("ties in a narrow dtype: the CPU's order");
  em ee = em_of(c), *e = &ee;
  V x = c->vals[0], vals = x, idx = -1;
  if (which == SO_TOPK && (k < 0 || k > n))
    return op_unimpl("k out of range: CPU says why");
  c->nouts = 2;
  if (in.rank == 0) {
    idx = e_kd(e, TPUC_DTYPE_S64, 0, x);
    if (which == SO_TOPK && k == 0) return op_unimpl("empty topk: CPU");
  } else {
    TRY(e_sort(e, x, dim, desc != 0, &vals, &idx));
    if (which == SO_TOPK) {
      int64_t start[TPUC_MAX_RANK] = {0}, limit[TPUC_MAX_RANK];
      for (int d = 0; d < in.rank; d++) limit[d] = in.dims[d];
      limit[dim] = k;
      V sv = -1, si = -1;
      TRY(tpuc_hlo_slice(e->fn, vals, start, limit, NULL, &sv));
      TRY(tpuc_hlo_slice(e->fn, idx, start, limit, NULL, &si));
      vals = sv;
      idx = si;
    }
  }
  c->outs[0] = vals;
  c->outs[1] = idx;
  return em_done(e);
}

/* ------------------------- complex-number helpers ----------------------- */

static V e_re(em* e, V z) { return e_un(e, TPUC_HLO_REAL, z); }
static V e_im(em* e, V z) { return e_un(e, TPUC_HLO_IMAG, z); }
static V e_cplx(em* e, V re, V im) {
  return e_bin(e, TPUC_HLO_COMPLEX, re, im);
}

/* x ** y for complex values as glibc's cpow: exp(y log x), with the C
 * library's results at x == 0 (0 for Re y > 0, inf + nan i for Re y < 0,
 * nan otherwise). */
static V e_cpow(em* e, V x, V y) {
  V r = EXP(MUL(y, LOG(x)));
  V xr = e_re(e, x), xi = e_im(e, x), yr = e_re(e, y);
  V zero = K(xr, 0);
  V x0 = AND(EQ(xr, zero), EQ(xi, zero));
  V at0 = SEL(GT(yr, zero), e_cplx(e, zero, K(xr, -0.0)),
              SEL(LT(yr, zero), e_cplx(e, K(xr, INFINITY), K(xr, NAN)),
                  e_cplx(e, K(xr, NAN), K(xr, NAN))));
  return SEL(x0, at0, r);
}

/* ---------------------------- integer functions ------------------------- */

/* Integer constant `v` (exact for 64-bit values) shaped like `like`. */
static V e_ki(em* e, V like, int64_t v) {
  tpuc_hlo_type t = e_type(e, like);
  V k = -1, r = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_constant_i64(e->fn, t.dtype, v, &k));
  if (e->st != NULL || t.rank == 0) return k;
  em_keep(e, tpuc_hlo_broadcast_in_dim(e->fn, k, t.dims, t.rank, NULL, &r));
  return r;
}

/* The signed integer dtype of the width of float `dt`, and the bits of
 * +inf in it. */
static tpuc_dtype float_bits_type(tpuc_dtype dt, int64_t* inf_bits) {
  switch (dt) {
    case TPUC_DTYPE_F64:
      *inf_bits = 0x7ff0000000000000LL;
      return TPUC_DTYPE_S64;
    case TPUC_DTYPE_F32:
      *inf_bits = 0x7f800000;
      return TPUC_DTYPE_S32;
    case TPUC_DTYPE_F16:
      *inf_bits = 0x7c00;
      return TPUC_DTYPE_S16;
    default:
      *inf_bits = 0x7f80;
      return TPUC_DTYPE_S16;
  }
}

/* a == b for floats by their bit patterns: XLA:CPU flushes subnormals, so
 * that a plain compare finds them equal to 0 (the CPU does not). Equal
 * patterns or two zeros, never NaN. */
static V e_feq(em* e, V a, V b) {
  int64_t infb = 0;
  tpuc_dtype it = float_bits_type(e_type(e, a).dtype, &infb);
  V ai = -1, bi = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_bitcast_convert(e->fn, a, it, &ai));
  if (e->st == NULL) em_keep(e, tpuc_hlo_bitcast_convert(e->fn, b, it, &bi));
  int bits = (int)tpuc_dtype_size(it) * 8;
  int64_t mask = bits == 64 ? INT64_MAX : (((int64_t)1 << (bits - 1)) - 1);
  V am = AND(ai, e_ki(e, ai, mask)), bm = AND(bi, e_ki(e, bi, mask));
  V zero = e_ki(e, ai, 0);
  V eq = OR(EQ(ai, bi), AND(EQ(am, zero), EQ(bm, zero)));
  return AND(eq, NOT(GT(am, e_ki(e, am, infb))));
}

/* Float x widened to f64 exactly, subnormals included (XLA:CPU's convert
 * flushes them to 0): those are their significand times 2^(emin - p). */
static V e_to_f64(em* e, V x) {
  tpuc_dtype dt = e_type(e, x).dtype;
  V w = e_cvt(e, x, TPUC_DTYPE_F64);
  if (dt == TPUC_DTYPE_F64) return w;
  int64_t infb = 0;
  tpuc_dtype it = float_bits_type(dt, &infb);
  int mant = dt == TPUC_DTYPE_F32 ? 23 : dt == TPUC_DTYPE_F16 ? 10 : 7;
  double scale = dt == TPUC_DTYPE_F32   ? ldexp(1.0, -149)
                 : dt == TPUC_DTYPE_F16 ? ldexp(1.0, -24)
                                        : ldexp(1.0, -133);
  V xi = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_bitcast_convert(e->fn, x, it, &xi));
  V m = AND(xi, e_ki(e, xi, ((int64_t)1 << mant) - 1));
  V ex = AND(xi, e_ki(e, xi, infb));
  V sub = AND(EQ(ex, e_ki(e, ex, 0)), NE(m, e_ki(e, m, 0)));
  V v = MUL(e_cvt(e, m, TPUC_DTYPE_F64), K(w, scale));
  v = SEL(e_signbit(e, x), NEG(v), v);
  return SEL(sub, v, w);
}

static int bits_of(tpuc_dtype d) { return (int)tpuc_dtype_size(d) * 8; }

/* a ** b for integers as the CPU's powi: squaring in the dtype (wrapping),
 * and for b < 0: 1 when a == 1, +-1 when a == -1, else 0. */
static V e_powi(em* e, V a, V b) {
  tpuc_dtype dt = e_type(e, a).dtype;
  V one = K(a, 1), zero = K(a, 0), r = one, base = a, ex = b;
  for (int i = 0; i < bits_of(dt) && e->st == NULL; i++) {
    r = SEL(NE(AND(ex, one), zero), MUL(r, base), r);
    base = MUL(base, base);
    ex = e_bin(e, TPUC_HLO_SHIFT_RIGHT_LOGICAL, ex, one);
  }
  if (tpuc_dtype_is_unsigned_int(dt)) return r;
  V odd = NE(AND(b, one), zero);
  V neg = SEL(EQ(a, one), one,
              SEL(EQ(a, K(a, -1)), SEL(odd, K(a, -1), one), zero));
  return SEL(LT(b, zero), neg, r);
}

enum { PW_TT = 1, PW_TS, PW_ST };

/* pow.Tensor_Tensor / pow.Tensor_Scalar / pow.Scalar: integers by
 * repeated squaring, complex as the CPU's std::pow (with its shortcuts for
 * scalar exponents), floats as before (op_lower_binary); a base of 1 given
 * as a scalar makes ones, as the CPU. */
/* Exponents a float pow.Tensor_Scalar computes without pow, as the CPU
 * kernel does (x*x for 2, x*x*x for 3, sqrt for 0.5, ...): a generic pow
 * is an exp and a log per element. The exponent is part of the program key
 * for these values only (op_scalar_class). */
static const double kPowShortcuts[] = {2, 3, 0.5, -0.5, -1, -2};

static int pow_exponent_class(const tpuc_op_arg* args, size_t nargs) {
  if (nargs < 2 || args[1].kind != TPUC_OP_ARG_SCALAR ||
      args[1].scalar == TPUC_SCALAR_BOOL || args[1].scalar_is_tensor)
    return 0;
  double x = args[1].scalar == TPUC_SCALAR_FLOAT ? args[1].f : (double)args[1].i;
  for (int i = 0; i < 6; i++)
    if (x == kPowShortcuts[i]) return i + 1;
  return 0;
}

static tpuc_status* lower_pow(op_ctx* c, int which);

int op_scalar_class(const op_entry* e, const tpuc_op_arg* args, size_t nargs) {
  if (e == NULL || e->lower != lower_pow || e->param != PW_TS) return 0;
  return pow_exponent_class(args, nargs);
}

static tpuc_status* lower_pow(op_ctx* c, int which) {
  if (!op_is_value(c, 0) || !op_is_value(c, 1))
    return op_unimpl("unexpected arguments");
  if (which == PW_ST ? !op_is_tensor(c, 1) : !op_is_tensor(c, 0))
    return op_unimpl("unexpected arguments");
  int ab[2] = {0, 1};
  tpuc_dtype dt;
  TRY(op_result_type(c, ab, 2, &dt));
  if (dt == TPUC_DTYPE_PRED) return op_unimpl("bool pow: CPU says why");
  /* A bool base raised in a wider integer dtype: XLA:CPU did not finish
   * compiling the squaring chain in minutes; the CPU runs it. */
  if (!is_float(dt) && !is_cx(dt) &&
      ((op_is_tensor(c, 0) && c->types[0].dtype == TPUC_DTYPE_PRED) ||
       (op_is_tensor(c, 1) && c->types[1].dtype == TPUC_DTYPE_PRED)))
    return op_unimpl("integer pow of a bool tensor: CPU");
  bool cx = is_cx(dt);
  int shortcut = which == PW_TS && is_float(dt)
                     ? pow_exponent_class(c->args, c->nargs)
                     : 0;
  if (is_float(dt) && which != PW_ST && shortcut == 0)
    return op_lower_binary(c, TPUC_HLO_POW | OP_BINARY_FLOAT_ONLY);
  tpuc_dtype acc = cx ? dt : op_accumulation_dtype(dt);
  V v[2];
  TRY(operands(c, ab, 2, dt, v));
  em ee = em_of(c), *e = &ee;
  V a = e_cvt(e, v[0], acc), b = e_cvt(e, v[1], acc), r;
  if (shortcut != 0) {
    V one = K(a, 1), sq = MUL(a, a);
    double k = kPowShortcuts[shortcut - 1];
    r = k == 2      ? sq
        : k == 3    ? MUL(sq, a)
        : k == 0.5  ? SQRT(a)
        : k == -0.5 ? e_un(e, TPUC_HLO_RSQRT, a)
        : k == -1   ? DIV(one, a)
                    : DIV(one, sq);
  } else if (is_float(dt) || cx) {
    r = cx ? e_cpow(e, a, b) : POW(a, b);
  } else {
    r = e_powi(e, a, b);
    if (which == PW_TS && c->args[1].scalar != TPUC_SCALAR_BOOL) {
      /* A negative integer exponent for an integer tensor is an error. */
      V s = e_cvt(e, c->vals[1], TPUC_DTYPE_S64);
      V bad = LT(s, e_k0(e, TPUC_DTYPE_S64, 0));
      if (e->st == NULL) {
        c->has_check = true;
        c->check = bad;
        c->check_code = TPUC_INVALID_ARGUMENT;
        c->check_msg = "Integers to negative integer powers are not allowed.";
      }
    }
  }
  if (cx && which == PW_TS) {
    /* The CPU's shortcuts for these scalar exponents. */
    V s = e_cvt(e, c->vals[1], TPUC_DTYPE_F64), one = K(a, 1);
    V sq = MUL(a, a);
    struct { double k; V val; } sc[8] = {
        {2, sq},  {3, MUL(sq, a)}, {-2, DIV(one, sq)}, {0.5, SQRT(a)},
        {-0.5, e_un(e, TPUC_HLO_RSQRT, a)}, {-1, DIV(one, a)}, {1, a},
        {0, one}};
    for (int i = 0; i < 8; i++)
      r = SEL(EQ(s, e_k0(e, TPUC_DTYPE_F64, sc[i].k)), sc[i].val, r);
  } else if (which == PW_ST && (is_float(dt) || cx)) {
    V s = e_cvt(e, c->vals[0], TPUC_DTYPE_F64);
    r = SEL(EQ(s, e_k0(e, TPUC_DTYPE_F64, 1)), K(a, 1), r);
  }
  c->outs[0] = e_cvt(e, r, dt);
  c->nouts = 1;
  return em_done(e);
}

enum {
  I_FMOD = 1, I_LSHIFT, I_RSHIFT, I_GCD, I_LCM, I_NEXTAFTER,
};

/* gcd of integers as the CPU's Euclid over |a|, |b|: a while loop that
 * runs until every divisor is 0. */
static V e_gcd(em* e, V a, V b) {
  op_ctx* c = e->c;
  tpuc_hlo_type t = e_type(e, a);
  if (!tpuc_dtype_is_unsigned_int(t.dtype)) {
    a = ABS(a);
    b = ABS(b);
  }
  if (e->st != NULL) return -1;
  tpuc_hlo_type two[2] = {t, t};
  tpuc_hlo_fn *cond = NULL, *body = NULL;
  if (!em_keep(e, tpuc_hlo_region_create(c->module, two, 2, &cond)) ||
      !em_keep(e, tpuc_hlo_region_create(c->module, two, 2, &body)))
    return -1;
  bool red[TPUC_MAX_RANK];
  for (int k = 0; k < t.rank; k++) red[k] = true;
  em ce = {c, cond, NULL}, be = {c, body, NULL};
  {
    em* e = &ce;
    V x = -1;
    em_keep(e, tpuc_hlo_get_arg(cond, 0, &x));
    V more = e_reduce(e, NE(x, K(x, 0)), red, TPUC_HLO_OR,
                      e_k0(e, TPUC_DTYPE_PRED, 0));
    if (e->st == NULL) em_keep(e, tpuc_hlo_return(cond, &more, 1));
  }
  {
    em* e = &be;
    V x = -1, y = -1;
    em_keep(e, tpuc_hlo_get_arg(body, 0, &x));
    if (e->st == NULL) em_keep(e, tpuc_hlo_get_arg(body, 1, &y));
    V done = EQ(x, K(x, 0));
    V outs[2] = {SEL(done, x, e_bin(e, TPUC_HLO_REM, y, SEL(done, K(x, 1), x))),
                 SEL(done, y, x)};
    if (e->st == NULL) em_keep(e, tpuc_hlo_return(body, outs, 2));
  }
  if (!em_keep(e, ce.st) || !em_keep(e, be.st)) return -1;
  V ins[2] = {a, b}, outs[2] = {-1, -1};
  em_keep(e, tpuc_hlo_while(e->fn, ins, 2, cond, body, outs));
  return outs[1];
}

/* Integer and bit-level binary ops: fmod (integers; floats as before),
 * bitwise shifts, gcd, lcm, nextafter. */
static tpuc_status* lower_int_binary(op_ctx* c, int which) {
  if (!op_is_value(c, 0) || !op_is_value(c, 1))
    return op_unimpl("unexpected arguments");
  if (!op_is_tensor(c, 0) && !op_is_tensor(c, 1))
    return op_unimpl("no tensor operand");
  int ab[2] = {0, 1};
  tpuc_dtype dt;
  TRY(op_result_type(c, ab, 2, &dt));
  if (dt == TPUC_DTYPE_PRED || is_cx(dt))
    return op_unimpl("this dtype: CPU says why");
  bool fl = is_float(dt);
  if (which == I_FMOD && fl)
    return op_lower_binary(c, TPUC_HLO_REM | OP_BINARY_FLOAT_ONLY);
  if (which == I_NEXTAFTER ? !fl : fl)
    return op_unimpl("this dtype: CPU says why");
  V v[2];
  TRY(operands(c, ab, 2, dt, v));
  em ee = em_of(c), *e = &ee;
  V a = v[0], b = v[1], r = -1, zero = K(a, 0);
  switch (which) {
    case I_FMOD:
      int_div_check(e, b);
      r = e_bin(e, TPUC_HLO_REM, a, SEL(EQ(b, zero), K(b, 1), b));
      break;
    case I_LSHIFT:
    case I_RSHIFT: {
      /* Shifts by a negative amount or by the width or more give 0 (or
       * the sign for a right shift of a signed value), as the CPU. */
      bool sgn = tpuc_dtype_is_signed_int(dt);
      V out = OR(GE(b, K(b, bits_of(dt))), LT(b, zero));
      V sb = SEL(out, zero, b);
      if (which == I_LSHIFT) {
        r = SEL(out, zero, e_bin(e, TPUC_HLO_SHIFT_LEFT, a, sb));
      } else if (sgn) {
        V full = e_bin(e, TPUC_HLO_SHIFT_RIGHT_ARITHMETIC, a,
                       K(a, bits_of(dt) - 1));
        r = SEL(out, full,
                e_bin(e, TPUC_HLO_SHIFT_RIGHT_ARITHMETIC, a, sb));
      } else {
        r = SEL(out, zero, e_bin(e, TPUC_HLO_SHIFT_RIGHT_LOGICAL, a, sb));
      }
      break;
    }
    case I_GCD:
      r = e_gcd(e, a, b);
      break;
    case I_LCM: {
      /* |a / g * b|, in int for narrow dtypes (C's promotion), then
       * wrapped to the dtype */
      V g = e_gcd(e, a, b);
      V gz = EQ(g, zero);
      tpuc_dtype w = bits_of(dt) < 32 ? TPUC_DTYPE_S32 : dt;
      V gw = e_cvt(e, SEL(gz, K(g, 1), g), w);
      V l = MUL(DIV(e_cvt(e, a, w), gw), e_cvt(e, b, w));
      if (!tpuc_dtype_is_unsigned_int(w)) l = ABS(l);
      r = SEL(gz, zero, e_cvt(e, l, dt));
      break;
    }
    case I_NEXTAFTER: {
      /* One step of the bit pattern toward b; NaNs propagate, equal
       * values give b, 0 steps to the smallest subnormal of b's sign. */
      tpuc_dtype it = dt == TPUC_DTYPE_F64   ? TPUC_DTYPE_S64
                      : dt == TPUC_DTYPE_F32 ? TPUC_DTYPE_S32
                                             : TPUC_DTYPE_S16;
      V ai = -1, tiny = -1, one_i;
      if (e->st == NULL)
        em_keep(e, tpuc_hlo_bitcast_convert(e->fn, a, it, &ai));
      one_i = K(ai, 1);
      V up = EQ(LT(a, b), GT(a, zero));
      V ni = SEL(up, ADD(ai, one_i), SUB(ai, one_i));
      V n = -1;
      if (e->st == NULL)
        em_keep(e, tpuc_hlo_bitcast_convert(e->fn, ni, dt, &n));
      if (e->st == NULL)
        em_keep(e, tpuc_hlo_bitcast_convert(e->fn, one_i, dt, &tiny));
      V at0 = SEL(e_signbit(e, b), NEG(tiny), tiny);
      r = SEL(EQ(a, zero), at0, n);
      r = SEL(EQ(a, b), b, r);
      r = SEL(OR(ISNAN(a), ISNAN(b)), ADD(a, b), r);
      break;
    }
    default:
      return op_unimpl("unknown op");
  }
  c->outs[0] = r;
  c->nouts = 1;
  return em_done(e);
}

/* trace(self): the sum of the diagonal of a matrix (integers sum in
 * int64, half floats accumulate in f32). */
static tpuc_status* lower_trace(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || c->types[0].rank != 2)
    return op_unimpl("trace of a non-matrix: CPU says why");
  tpuc_dtype dt = c->types[0].dtype;
  tpuc_dtype rt = (is_float(dt) || is_cx(dt)) ? dt : TPUC_DTYPE_S64;
  tpuc_dtype acc = is_cx(rt) ? rt : op_accumulation_dtype(rt);
  em ee = em_of(c), *e = &ee;
  V x = e_cvt(e, c->vals[0], acc);
  tpuc_hlo_type it = c->types[0];
  it.dtype = TPUC_DTYPE_S64;
  V r0 = -1, c0 = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_iota(e->fn, &it, 0, &r0));
  if (e->st == NULL) em_keep(e, tpuc_hlo_iota(e->fn, &it, 1, &c0));
  x = SEL(EQ(r0, c0), x, K(x, 0));
  bool red[2] = {true, true};
  V r = e_reduce(e, x, red, TPUC_HLO_ADD, e_k0(e, acc, 0));
  c->outs[0] = e_cvt(e, r, rt);
  c->nouts = 1;
  return em_done(e);
}

/* aminmax(self, *, dim=None, keepdim=False) -> (min, max), NaN
 * propagating. */
static tpuc_status* lower_aminmax(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type in = c->types[0];
  tpuc_dtype dt = in.dtype;
  if (is_cx(dt)) return op_unimpl("complex: CPU says why");
  bool red[TPUC_MAX_RANK];
  int64_t count = 1;
  TRY(red_dims(c, 1, red, &count));
  if (count == 0 || tpuc_hlo_type_num_elements(&in) == 0)
    return op_unimpl("empty: CPU says why");
  int64_t keep = 0;
  TRY(op_int_arg(c, 2, 0, &keep));
  em ee = em_of(c), *e = &ee;
  tpuc_dtype ct = dt == TPUC_DTYPE_PRED ? TPUC_DTYPE_U8 : dt;
  V x = e_cvt(e, c->vals[0], ct);
  V mn = e_reduce(e, x, red, TPUC_HLO_MIN, e_lowest(e, ct, false));
  V mx = e_reduce(e, x, red, TPUC_HLO_MAX, e_lowest(e, ct, true));
  /* keepdim without a dim keeps every dim as 1 */
  c->outs[0] = e_keep(e, e_cvt(e, mn, dt), &in, red, keep != 0);
  c->outs[1] = e_keep(e, e_cvt(e, mx, dt), &in, red, keep != 0);
  c->nouts = 2;
  return em_done(e);
}

/* isin(elements, test_elements, *, assume_unique, invert): whether each
 * element equals one of the test elements (compared in their promoted
 * dtype). */
static tpuc_status* lower_isin(op_ctx* c, int param) {
  (void)param;
  if (!op_is_value(c, 0) || !op_is_value(c, 1) ||
      (!op_is_tensor(c, 0) && !op_is_tensor(c, 1)))
    return op_unimpl("unexpected arguments");
  int ab[2] = {0, 1};
  tpuc_dtype dt;
  TRY(op_result_type(c, ab, 2, &dt));
  if (is_cx(dt)) return op_unimpl("complex: CPU says why");
  int64_t invert = 0;
  TRY(op_int_arg(c, 3, 0, &invert));
  const tpuc_hlo_type et = c->types[0], tt = c->types[1];
  int64_t n = tpuc_hlo_type_num_elements(&et);
  int64_t m = tpuc_hlo_type_num_elements(&tt);
  if (n * m > ((int64_t)1 << 26)) return op_unimpl("large isin: CPU");
  em ee = em_of(c), *e = &ee;
  V x = e_cvt(e, c->vals[0], dt), t = e_cvt(e, c->vals[1], dt), r;
  if (m == 0) {
    r = e_kd(e, TPUC_DTYPE_PRED, 0, x);
  } else {
    /* elements as [n, 1] against the tests as [1, m] */
    int64_t nm[2] = {n, m}, one0 = 0, one1 = 1;
    V xf = -1, tf = -1, xb = -1, tb = -1;
    if (e->st == NULL) em_keep(e, tpuc_hlo_reshape(e->fn, x, &n, 1, &xf));
    if (e->st == NULL) em_keep(e, tpuc_hlo_reshape(e->fn, t, &m, 1, &tf));
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_broadcast_in_dim(e->fn, xf, nm, 2, &one0, &xb));
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_broadcast_in_dim(e->fn, tf, nm, 2, &one1, &tb));
    bool red[2] = {false, true};
    V eq = is_float(dt) ? e_feq(e, xb, tb) : EQ(xb, tb);
    V any = e_reduce(e, eq, red, TPUC_HLO_OR,
                     e_k0(e, TPUC_DTYPE_PRED, 0));
    r = -1;
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_reshape(e->fn, any, et.dims, et.rank, &r));
  }
  if (invert) r = NOT(r);
  c->outs[0] = r;
  c->nouts = 1;
  return em_done(e);
}

/* hash_tensor(self, dim=[], *, keepdim=False, mode=0): the xor of the
 * elements' 64-bit patterns (floats as f64, integers as int64 / uint64),
 * as uint64. */
static tpuc_status* lower_hash_tensor(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type in = c->types[0];
  tpuc_dtype dt = in.dtype;
  int64_t mode = 0, keep = 0;
  TRY(op_int_arg(c, 3, 0, &mode));
  TRY(op_int_arg(c, 2, 0, &keep));
  if (mode != 0 || is_cx(dt)) return op_unimpl("this hash: CPU says why");
  bool red[TPUC_MAX_RANK];
  int64_t count = 1;
  TRY(red_dims(c, 1, red, &count));
  if (count == 0) return op_unimpl("empty: CPU says why");
  em ee = em_of(c), *e = &ee;
  V x = c->vals[0], u = -1;
  if (is_float(dt)) {
    x = e_to_f64(e, x);
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_bitcast_convert(e->fn, x, TPUC_DTYPE_U64, &u));
  } else if (tpuc_dtype_is_signed_int(dt)) {
    x = e_cvt(e, x, TPUC_DTYPE_S64);
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_bitcast_convert(e->fn, x, TPUC_DTYPE_U64, &u));
  } else {
    u = e_cvt(e, x, TPUC_DTYPE_U64);
  }
  V r = e_reduce(e, u, red, TPUC_HLO_XOR, e_k0(e, TPUC_DTYPE_U64, 0));
  c->outs[0] = e_keep(e, r, &in, red, keep != 0);
  c->nouts = 1;
  return em_done(e);
}

enum { SS_SEARCHSORTED = 1, SS_BUCKETIZE };

/* searchsorted(sorted_sequence, self, *, out_int32, right, side, sorter)
 * and bucketize(self, boundaries, *, out_int32, right): the CPU's binary
 * search, step for step (so that unsorted input gives its answer too):
 * lower bound finds the first position whose value is not < v (`!(s >=
 * v)` goes right), upper bound the first whose value is > v. */
static tpuc_status* lower_search(op_ctx* c, int which) {
  int is = which == SS_SEARCHSORTED ? 0 : 1, iv = 1 - is;
  if (!op_is_tensor(c, is) || !op_is_tensor(c, iv))
    return op_unimpl("unexpected arguments");
  int64_t out32 = 0, right = 0;
  TRY(op_int_arg(c, 2, 0, &out32));
  TRY(op_int_arg(c, 3, 0, &right));
  bool has_sorter = false;
  if (which == SS_SEARCHSORTED) {
    const char* side = op_str_arg(c, 4, NULL);
    if (side != NULL) {
      bool sr = strcmp(side, "right") == 0;
      if ((!sr && strcmp(side, "left") != 0) || (right && !sr))
        return op_unimpl("side: CPU says why");
      right = sr;
    }
    if (op_is_tensor(c, 5))
      has_sorter = true;
    else if (!op_is_none(c, 5))
      return op_unimpl("unexpected sorter");
  }
  const tpuc_hlo_type st = c->types[is], vt = c->types[iv];
  if (st.rank == 0 || is_cx(st.dtype) || is_cx(vt.dtype) ||
      st.dtype == TPUC_DTYPE_PRED || vt.dtype == TPUC_DTYPE_PRED)
    return op_unimpl("this input: CPU says why");
  if (st.dtype != vt.dtype) return op_unimpl("mixed dtypes: CPU says why");
  /* N-d sequences: one row per leading index of the values. */
  if (st.rank > 1) {
    if (which == SS_BUCKETIZE) return op_unimpl("N-d boundaries: CPU");
    if (vt.rank != st.rank) return op_unimpl("shapes: CPU says why");
    for (int d = 0; d + 1 < st.rank; d++)
      if (st.dims[d] != vt.dims[d]) return op_unimpl("shapes: CPU says why");
  }
  if (has_sorter) {
    tpuc_hlo_type so = c->types[5];
    so.dtype = st.dtype;
    if (!tpuc_hlo_type_equal(&so, &st) ||
        (c->types[5].dtype != TPUC_DTYPE_S64))
      return op_unimpl("sorter: CPU says why");
  }
  int64_t m = st.dims[st.rank - 1];
  int64_t total = tpuc_hlo_type_num_elements(&st);
  tpuc_dtype rt = out32 ? TPUC_DTYPE_S32 : TPUC_DTYPE_S64;
  em ee = em_of(c), *e = &ee;
  V v = c->vals[iv];
  tpuc_hlo_type it = vt;
  it.dtype = TPUC_DTYPE_S64;
  V start = e_kd(e, TPUC_DTYPE_S64, 0, v);
  if (m > 0) {
    /* flat offset of each value's row in the sequence */
    V row = e_kd(e, TPUC_DTYPE_S64, 0, v);
    if (st.rank > 1) {
      int64_t stride = m;
      for (int d = st.rank - 2; d >= 0; d--) {
        V io = -1;
        if (e->st == NULL) em_keep(e, tpuc_hlo_iota(e->fn, &it, d, &io));
        row = ADD(row, MUL(io, e_kd(e, TPUC_DTYPE_S64, (double)stride, io)));
        stride *= st.dims[d];
      }
    }
    V seq = -1, srt = -1;
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_reshape(e->fn, c->vals[is], &total, 1, &seq));
    if (has_sorter) {
      V s64 = e_cvt(e, c->vals[5], TPUC_DTYPE_S64);
      if (e->st == NULL)
        em_keep(e, tpuc_hlo_reshape(e->fn, s64, &total, 1, &srt));
      /* Sorter entries out of [0, m) are refused, as by the CPU. */
      bool all[1] = {true};
      V bad = OR(LT(srt, K(srt, 0)), GE(srt, K(srt, (double)m)));
      V any = e_reduce(e, bad, all, TPUC_HLO_OR, e_k0(e, TPUC_DTYPE_PRED, 0));
      if (e->st == NULL) {
        c->has_check = true;
        c->check = any;
        c->check_code = TPUC_INVALID_ARGUMENT;
        c->check_msg = "torch.searchsorted(): sorter index out of range";
      }
    }
    V end = e_kd(e, TPUC_DTYPE_S64, (double)m, v);
    V one = K(start, 1);
    int64_t shape1[TPUC_MAX_RANK + 1];
    for (int d = 0; d < vt.rank; d++) shape1[d] = vt.dims[d];
    shape1[vt.rank] = 1;
    int steps = 1;
    while (((int64_t)1 << steps) <= m) steps++;
    for (int s = 0; s <= steps && e->st == NULL; s++) {
      V active = LT(start, end);
      V mid = ADD(start, e_bin(e, TPUC_HLO_SHIFT_RIGHT_LOGICAL,
                               SUB(end, start), one));
      V midc = MIN(mid, K(mid, (double)(m - 1)));
      V gi = ADD(row, midc), gv = -1, gr = -1;
      if (has_sorter) {
        V gs = -1, si = -1;
        em_keep(e, tpuc_hlo_reshape(e->fn, gi, shape1, vt.rank + 1, &gs));
        if (e->st == NULL)
          em_keep(e, op_gather_elements(e->fn, srt, gs, &si));
        V sc = MAX(MIN(si, K(si, (double)(m - 1))), K(si, 0));
        gi = ADD(row, sc);
      }
      if (e->st == NULL)
        em_keep(e, tpuc_hlo_reshape(e->fn, gi, shape1, vt.rank + 1, &gr));
      if (e->st == NULL) em_keep(e, op_gather_elements(e->fn, seq, gr, &gv));
      V go = right ? NOT(GT(gv, v)) : NOT(GE(gv, v));
      start = SEL(AND(active, go), ADD(mid, one), start);
      end = SEL(AND(active, NOT(go)), mid, end);
    }
  }
  c->outs[0] = e_cvt(e, start, rt);
  c->nouts = 1;
  return em_done(e);
}

/* Column k of the [R, n] value x, broadcast back to [R, n]. */
static V e_col(em* e, V x, int64_t k) {
  tpuc_hlo_type t = e_type(e, x);
  int64_t st[2] = {0, k}, lim[2] = {t.dims[0], k + 1}, d0 = 0;
  V s = -1, r = -1, b = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_slice(e->fn, x, st, lim, NULL, &s));
  if (e->st == NULL) em_keep(e, tpuc_hlo_reshape(e->fn, s, t.dims, 1, &r));
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_broadcast_in_dim(e->fn, r, t.dims, 2, &d0, &b));
  return b;
}

/* [R, n] x shifted right by one along the rows (x[k - 1]; `fill` at 0),
 * or left (x[k + 1]; `fill` at n - 1). */
static V e_shift1(em* e, V x, bool right, V fill) {
  int64_t lo[2] = {0, right ? 1 : -1}, hi[2] = {0, right ? -1 : 1};
  V r = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_pad(e->fn, x, fill, lo, hi, NULL, &r));
  return r;
}

/* mode(self, dim=-1, keepdim=False) -> (values, indices), as the CPU: the
 * row is sorted by `<` (std::sort, an insertion sort for rows of up to 16
 * elements, emulated here step for step, NaNs included), and the first run
 * of equal values with the largest count wins, with the original index of
 * the last element of that run. Longer rows run on the CPU (its introsort
 * orders ties its own way). */
static tpuc_status* lower_mode(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type in = c->types[0];
  tpuc_dtype dt = in.dtype;
  if (is_cx(dt)) return op_unimpl("complex: CPU says why");
  int64_t dim_arg = -1, keep = 0, dim = 0;
  TRY(op_int_arg(c, 1, -1, &dim_arg));
  TRY(op_int_arg(c, 2, 0, &keep));
  TRY(op_wrap_dim(in.rank, dim_arg, &dim));
  int64_t n = in.rank == 0 ? 1 : in.dims[dim];
  int64_t total = tpuc_hlo_type_num_elements(&in);
  if (n == 0 || n > 16 || total == 0)
    return op_unimpl("mode of this size: CPU");
  em ee = em_of(c), *e = &ee;
  tpuc_dtype ct = dt == TPUC_DTYPE_PRED ? TPUC_DTYPE_U8 : dt;
  V x = e_cvt(e, c->vals[0], ct);
  c->nouts = 2;
  if (in.rank == 0) {
    c->outs[0] = c->vals[0];
    c->outs[1] = e_kd(e, TPUC_DTYPE_S64, 0, x);
    return em_done(e);
  }
  /* Rows: the other dims in order, then `dim`; as [R, n]. */
  int64_t perm[TPUC_MAX_RANK], odims[TPUC_MAX_RANK];
  int no = 0;
  for (int d = 0; d < in.rank; d++)
    if (d != dim) odims[no] = in.dims[d], perm[no++] = d;
  perm[no] = dim;
  int64_t rows = total / n, rn[2] = {rows, n};
  V xt = -1, s = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_transpose(e->fn, x, perm, &xt));
  if (e->st == NULL) em_keep(e, tpuc_hlo_reshape(e->fn, xt, rn, 2, &s));
  tpuc_hlo_type it = tpuc_hlo_type_make(TPUC_DTYPE_S64, rn, 2);
  V col = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_iota(e->fn, &it, 1, &col));
  V idx = col;
  V zs = e_k0(e, ct, 0), zi = e_k0(e, TPUC_DTYPE_S64, 0);
  bool red1[2] = {false, true};
  for (int64_t i = 1; i < n && e->st == NULL; i++) {
    V val = e_col(e, s, i), vi = e_col(e, idx, i);
    V lt = LT(val, s);
    V first = e_col(e, lt, 0);
    /* the insertion point: after the last j < i with !(val < row[j]) */
    V cand = AND(NOT(lt), LT(col, K(col, (double)i)));
    V jm = e_reduce(e, SEL(cand, col, K(col, -1)), red1, TPUC_HLO_MAX,
                    e_k0(e, TPUC_DTYPE_S64, -1));
    V p = -1;
    int64_t d0 = 0;
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_broadcast_in_dim(e->fn, jm, rn, 2, &d0, &p));
    p = SEL(first, K(p, 0), ADD(p, K(p, 1)));
    V before = LT(col, p), at = EQ(col, p);
    V moved = LE(col, K(col, (double)i));
    s = SEL(before, s, SEL(at, val, SEL(moved, e_shift1(e, s, true, zs), s)));
    idx = SEL(before, idx,
              SEL(at, vi, SEL(moved, e_shift1(e, idx, true, zi), idx)));
  }
  /* Runs: ends where the next value differs (NaN != NaN), starts where
   * the previous does. */
  V last = EQ(col, K(col, (double)(n - 1)));
  V nxt = NE(s, e_shift1(e, s, false, zs));
  V end = OR(last, nxt);
  V start = OR(EQ(col, K(col, 0)), e_shift1(e, nxt, true,
                                            e_k0(e, TPUC_DTYPE_PRED, 0)));
  V ls = SEL(start, col, K(col, 0));
  for (int64_t sh = 1; sh < n && e->st == NULL; sh *= 2) {
    int64_t lo[2] = {0, sh}, hi[2] = {0, -sh};
    V p = -1;
    em_keep(e, tpuc_hlo_pad(e->fn, ls, zi, lo, hi, NULL, &p));
    ls = MAX(ls, p);
  }
  V len = SEL(end, ADD(SUB(col, ls), K(col, 1)), K(col, 0));
  V f = e_reduce(e, len, red1, TPUC_HLO_MAX, e_k0(e, TPUC_DTYPE_S64, 0));
  V fb = -1;
  int64_t d0 = 0;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_broadcast_in_dim(e->fn, f, rn, 2, &d0, &fb));
  V pos = e_reduce(e, SEL(EQ(len, fb), col, K(col, (double)n)), red1,
                   TPUC_HLO_MIN, e_k0(e, TPUC_DTYPE_S64, (double)n));
  V pb = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_broadcast_in_dim(e->fn, pos, rn, 2, &d0, &pb));
  V hit = EQ(col, pb);
  V mv = e_reduce(e, SEL(hit, s, e_splat(e, e_lowest(e, ct, true), s)), red1,
                  TPUC_HLO_MAX, e_lowest(e, ct, true));
  V mi = e_reduce(e, SEL(hit, idx, K(idx, -1)), red1, TPUC_HLO_MAX,
                  e_k0(e, TPUC_DTYPE_S64, -1));
  int64_t kd[TPUC_MAX_RANK];
  for (int d = 0; d < in.rank; d++) kd[d] = d == dim ? 1 : in.dims[d];
  V ov = -1, oi = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_reshape(e->fn, e_cvt(e, mv, dt), keep ? kd : odims,
                                keep ? in.rank : no, &ov));
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_reshape(e->fn, mi, keep ? kd : odims,
                                keep ? in.rank : no, &oi));
  c->outs[0] = ov;
  c->outs[1] = oi;
  return em_done(e);
}

const op_entry op_table_math[] = {
    {"aten::asin", lower_float_unary, U_ASIN},
    {"aten::asin_", lower_float_unary, U_ASIN},
    {"aten::asin.out", lower_float_unary, U_ASIN},
    {"aten::acos", lower_float_unary, U_ACOS},
    {"aten::acos_", lower_float_unary, U_ACOS},
    {"aten::acos.out", lower_float_unary, U_ACOS},
    {"aten::atan", lower_float_unary, U_ATAN},
    {"aten::atan_", lower_float_unary, U_ATAN},
    {"aten::atan.out", lower_float_unary, U_ATAN},
    {"aten::sinh", lower_float_unary, U_SINH},
    {"aten::sinh_", lower_float_unary, U_SINH},
    {"aten::sinh.out", lower_float_unary, U_SINH},
    {"aten::cosh", lower_float_unary, U_COSH},
    {"aten::cosh_", lower_float_unary, U_COSH},
    {"aten::cosh.out", lower_float_unary, U_COSH},
    {"aten::asinh", lower_float_unary, U_ASINH},
    {"aten::asinh_", lower_float_unary, U_ASINH},
    {"aten::asinh.out", lower_float_unary, U_ASINH},
    {"aten::acosh", lower_float_unary, U_ACOSH},
    {"aten::acosh_", lower_float_unary, U_ACOSH},
    {"aten::acosh.out", lower_float_unary, U_ACOSH},
    {"aten::atanh", lower_float_unary, U_ATANH},
    {"aten::atanh_", lower_float_unary, U_ATANH},
    {"aten::atanh.out", lower_float_unary, U_ATANH},
    {"aten::erf", lower_float_unary, U_ERF},
    {"aten::erf_", lower_float_unary, U_ERF},
    {"aten::erf.out", lower_float_unary, U_ERF},
    {"aten::erfc", lower_float_unary, U_ERFC},
    {"aten::erfc_", lower_float_unary, U_ERFC},
    {"aten::erfc.out", lower_float_unary, U_ERFC},
    {"aten::erfinv", lower_float_unary, U_ERFINV},
    {"aten::erfinv_", lower_float_unary, U_ERFINV},
    {"aten::erfinv.out", lower_float_unary, U_ERFINV},
    {"aten::exp2", lower_float_unary, U_EXP2},
    {"aten::exp2_", lower_float_unary, U_EXP2},
    {"aten::exp2.out", lower_float_unary, U_EXP2},
    {"aten::log2", lower_float_unary, U_LOG2},
    {"aten::log2_", lower_float_unary, U_LOG2},
    {"aten::log2.out", lower_float_unary, U_LOG2},
    {"aten::log10", lower_float_unary, U_LOG10},
    {"aten::log10_", lower_float_unary, U_LOG10},
    {"aten::log10.out", lower_float_unary, U_LOG10},
    {"aten::deg2rad", lower_float_unary, U_DEG2RAD},
    {"aten::deg2rad_", lower_float_unary, U_DEG2RAD},
    {"aten::deg2rad.out", lower_float_unary, U_DEG2RAD},
    {"aten::rad2deg", lower_float_unary, U_RAD2DEG},
    {"aten::rad2deg_", lower_float_unary, U_RAD2DEG},
    {"aten::rad2deg.out", lower_float_unary, U_RAD2DEG},
    {"aten::trunc", lower_unary_misc, P_TRUNC},
    {"aten::trunc.out", lower_unary_misc, P_TRUNC},
    {"aten::trunc_", lower_unary_misc, P_TRUNC},
    {"aten::frac", lower_unary_misc, P_FRAC},
    {"aten::frac.out", lower_unary_misc, P_FRAC},
    {"aten::frac_", lower_unary_misc, P_FRAC},
    {"aten::sgn", lower_unary_misc, P_SGN},
    {"aten::sgn.out", lower_unary_misc, P_SGN},
    {"aten::sgn_", lower_unary_misc, P_SGN},
    {"aten::isnan", lower_unary_misc, P_ISNAN},
    {"aten::isnan.out", lower_unary_misc, P_ISNAN},
    {"aten::isinf", lower_unary_misc, P_ISINF},
    {"aten::isinf.out", lower_unary_misc, P_ISINF},
    {"aten::isposinf", lower_unary_misc, P_ISPOSINF},
    {"aten::isposinf.out", lower_unary_misc, P_ISPOSINF},
    {"aten::isneginf", lower_unary_misc, P_ISNEGINF},
    {"aten::isneginf.out", lower_unary_misc, P_ISNEGINF},
    {"aten::signbit", lower_unary_misc, P_SIGNBIT},
    {"aten::signbit.out", lower_unary_misc, P_SIGNBIT},
    {"aten::logical_not", lower_unary_misc, P_LOGICAL_NOT},
    {"aten::logical_not.out", lower_unary_misc, P_LOGICAL_NOT},
    {"aten::logical_not_", lower_unary_misc, P_LOGICAL_NOT},
    {"aten::nan_to_num", lower_unary_misc, P_NAN_TO_NUM},
    {"aten::nan_to_num.out", lower_unary_misc, P_NAN_TO_NUM},
    {"aten::nan_to_num_", lower_unary_misc, P_NAN_TO_NUM},
    {"aten::clamp", lower_clamp, CL_BOTH},
    {"aten::clamp_", lower_clamp, CL_BOTH},
    {"aten::clamp.out", lower_clamp, CL_BOTH},
    {"aten::clamp.Tensor", lower_clamp, CL_BOTH},
    {"aten::clamp_.Tensor", lower_clamp, CL_BOTH},
    {"aten::clamp.Tensor_out", lower_clamp, CL_BOTH},
    {"aten::clamp_min", lower_clamp, CL_MIN},
    {"aten::clamp_min_", lower_clamp, CL_MIN},
    {"aten::clamp_min.out", lower_clamp, CL_MIN},
    {"aten::clamp_min.Tensor", lower_clamp, CL_MIN},
    {"aten::clamp_min_.Tensor", lower_clamp, CL_MIN},
    {"aten::clamp_min.Tensor_out", lower_clamp, CL_MIN},
    {"aten::clamp_max", lower_clamp, CL_MAX},
    {"aten::clamp_max_", lower_clamp, CL_MAX},
    {"aten::clamp_max.out", lower_clamp, CL_MAX},
    {"aten::clamp_max.Tensor", lower_clamp, CL_MAX},
    {"aten::clamp_max_.Tensor", lower_clamp, CL_MAX},
    {"aten::clamp_max.Tensor_out", lower_clamp, CL_MAX},
    {"aten::remainder.Tensor", lower_binary_misc, B_REMAINDER},
    {"aten::remainder.Scalar", lower_binary_misc, B_REMAINDER},
    {"aten::remainder.Scalar_Tensor", lower_binary_misc, B_REMAINDER},
    {"aten::remainder.Tensor_out", lower_binary_misc, B_REMAINDER},
    {"aten::remainder.Scalar_out", lower_binary_misc, B_REMAINDER},
    {"aten::remainder.Scalar_Tensor_out", lower_binary_misc, B_REMAINDER},
    {"aten::remainder_.Tensor", lower_binary_misc, B_REMAINDER},
    {"aten::remainder_.Scalar", lower_binary_misc, B_REMAINDER},
    {"aten::floor_divide", lower_binary_misc, B_FLOOR_DIV},
    {"aten::floor_divide.Scalar", lower_binary_misc, B_FLOOR_DIV},
    {"aten::floor_divide.out", lower_binary_misc, B_FLOOR_DIV},
    {"aten::floor_divide.Scalar_out", lower_binary_misc, B_FLOOR_DIV},
    {"aten::floor_divide_.Scalar", lower_binary_misc, B_FLOOR_DIV},
    {"aten::floor_divide_.Tensor", lower_binary_misc, B_FLOOR_DIV},
    {"aten::div.Tensor_mode", lower_binary_misc, B_DIV_MODE},
    {"aten::div.Scalar_mode", lower_binary_misc, B_DIV_MODE},
    {"aten::div.out_mode", lower_binary_misc, B_DIV_MODE},
    {"aten::div.Scalar_mode_out", lower_binary_misc, B_DIV_MODE},
    {"aten::div_.Tensor_mode", lower_binary_misc, B_DIV_MODE},
    {"aten::div_.Scalar_mode", lower_binary_misc, B_DIV_MODE},
    {"aten::xlogy.Tensor", lower_binary_misc, B_XLOGY},
    {"aten::xlogy.Scalar_Self", lower_binary_misc, B_XLOGY},
    {"aten::xlogy.Scalar_Other", lower_binary_misc, B_XLOGY},
    {"aten::xlogy.OutTensor", lower_binary_misc, B_XLOGY},
    {"aten::xlogy.OutScalar_Self", lower_binary_misc, B_XLOGY},
    {"aten::xlogy.OutScalar_Other", lower_binary_misc, B_XLOGY},
    {"aten::xlogy_.Tensor", lower_binary_misc, B_XLOGY},
    {"aten::xlogy_.Scalar_Other", lower_binary_misc, B_XLOGY},
    {"aten::rsub.Tensor", lower_binary_misc, B_RSUB},
    {"aten::rsub.Scalar", lower_binary_misc, B_RSUB},
    {"aten::rsub.Tensor_out", lower_binary_misc, B_RSUB},
    {"aten::rsub.Scalar_out", lower_binary_misc, B_RSUB},
    {"aten::hypot", lower_binary_misc, B_HYPOT},
    {"aten::hypot.out", lower_binary_misc, B_HYPOT},
    {"aten::hypot_", lower_binary_misc, B_HYPOT},
    {"aten::logaddexp", lower_binary_misc, B_LOGADDEXP},
    {"aten::logaddexp.out", lower_binary_misc, B_LOGADDEXP},
    {"aten::logaddexp2", lower_binary_misc, B_LOGADDEXP2},
    {"aten::logaddexp2.out", lower_binary_misc, B_LOGADDEXP2},
    {"aten::heaviside", lower_binary_misc, B_HEAVISIDE},
    {"aten::heaviside.out", lower_binary_misc, B_HEAVISIDE},
    {"aten::heaviside_", lower_binary_misc, B_HEAVISIDE},
    {"aten::fmax", lower_binary_misc, B_FMAX},
    {"aten::fmax.out", lower_binary_misc, B_FMAX},
    {"aten::fmin", lower_binary_misc, B_FMIN},
    {"aten::fmin.out", lower_binary_misc, B_FMIN},
    {"aten::logical_and", lower_binary_misc, B_LOGICAL_AND},
    {"aten::logical_and.out", lower_binary_misc, B_LOGICAL_AND},
    {"aten::logical_and_", lower_binary_misc, B_LOGICAL_AND},
    {"aten::logical_or", lower_binary_misc, B_LOGICAL_OR},
    {"aten::logical_or.out", lower_binary_misc, B_LOGICAL_OR},
    {"aten::logical_or_", lower_binary_misc, B_LOGICAL_OR},
    {"aten::logical_xor", lower_binary_misc, B_LOGICAL_XOR},
    {"aten::logical_xor.out", lower_binary_misc, B_LOGICAL_XOR},
    {"aten::logical_xor_", lower_binary_misc, B_LOGICAL_XOR},
    {"aten::copysign.Tensor", lower_binary_misc, B_COPYSIGN},
    {"aten::copysign.Scalar", lower_binary_misc, B_COPYSIGN},
    {"aten::copysign.out", lower_binary_misc, B_COPYSIGN},
    {"aten::copysign.Scalar_out", lower_binary_misc, B_COPYSIGN},
    {"aten::copysign_.Tensor", lower_binary_misc, B_COPYSIGN},
    {"aten::copysign_.Scalar", lower_binary_misc, B_COPYSIGN},
    {"aten::lerp.Scalar", lower_lerp, 0},
    {"aten::lerp.Tensor", lower_lerp, 0},
    {"aten::lerp.Scalar_out", lower_lerp, 0},
    {"aten::lerp.Tensor_out", lower_lerp, 0},
    {"aten::lerp_.Scalar", lower_lerp, 0},
    {"aten::lerp_.Tensor", lower_lerp, 0},
    {"aten::addcmul", lower_addc, 0},
    {"aten::addcmul.out", lower_addc, 0},
    {"aten::addcmul_", lower_addc, 0},
    {"aten::addcdiv", lower_addc, 1},
    {"aten::addcdiv.out", lower_addc, 1},
    {"aten::addcdiv_", lower_addc, 1},
    {"aten::addmm", lower_product, LA_ADDMM},
    {"aten::addmm.out", lower_product, LA_ADDMM},
    {"aten::addmm_", lower_product, LA_ADDMM},
    {"aten::addmv", lower_product, LA_ADDMV},
    {"aten::addmv.out", lower_product, LA_ADDMV},
    {"aten::addmv_", lower_product, LA_ADDMV},
    {"aten::mv", lower_product, LA_MV},
    {"aten::mv.out", lower_product, LA_MV},
    {"aten::dot", lower_product, LA_DOT},
    {"aten::dot.out", lower_product, LA_DOT},
    {"aten::vdot", lower_product, LA_VDOT},
    {"aten::vdot.out", lower_product, LA_VDOT},
    {"aten::baddbmm", lower_product, LA_BADDBMM},
    {"aten::baddbmm.out", lower_product, LA_BADDBMM},
    {"aten::baddbmm_", lower_product, LA_BADDBMM},
    {"aten::addbmm", lower_product, LA_ADDBMM},
    {"aten::addbmm.out", lower_product, LA_ADDBMM},
    {"aten::addbmm_", lower_product, LA_ADDBMM},
    {"aten::addr", lower_product, LA_ADDR},
    {"aten::addr.out", lower_product, LA_ADDR},
    {"aten::addr_", lower_product, LA_ADDR},
    {"aten::any", lower_reduction, RP(R_ANY, 1, 2)},
    {"aten::any.dim", lower_reduction, RP(R_ANY, 1, 2)},
    {"aten::any.dims", lower_reduction, RP(R_ANY, 1, 2)},
    {"aten::any.out", lower_reduction, RP(R_ANY, 1, 2)},
    {"aten::any.dims_out", lower_reduction, RP(R_ANY, 1, 2)},
    {"aten::any.all_out", lower_reduction, RP(R_ANY, 1, 2)},
    {"aten::all", lower_reduction, RP(R_ALL, 1, 2)},
    {"aten::all.dim", lower_reduction, RP(R_ALL, 1, 2)},
    {"aten::all.dims", lower_reduction, RP(R_ALL, 1, 2)},
    {"aten::all.out", lower_reduction, RP(R_ALL, 1, 2)},
    {"aten::all.dims_out", lower_reduction, RP(R_ALL, 1, 2)},
    {"aten::all.all_out", lower_reduction, RP(R_ALL, 1, 2)},
    {"aten::prod", lower_reduction, RP(R_PROD, 0, 0)},
    {"aten::prod.out", lower_reduction, RP(R_PROD, 0, 0)},
    {"aten::prod.dim_int", lower_reduction, RP(R_PROD, 1, 2)},
    {"aten::prod.int_out", lower_reduction, RP(R_PROD, 1, 2)},
    {"aten::nansum", lower_reduction, RP(R_NANSUM, 1, 2)},
    {"aten::nansum.out", lower_reduction, RP(R_NANSUM, 1, 2)},
    {"aten::max", lower_reduction, RP(R_MAX, 0, 0)},
    {"aten::max.unary_out", lower_reduction, RP(R_MAX, 0, 0)},
    {"aten::min", lower_reduction, RP(R_MIN, 0, 0)},
    {"aten::min.unary_out", lower_reduction, RP(R_MIN, 0, 0)},
    {"aten::count_nonzero", lower_reduction, RP(R_COUNT_NONZERO, 1, 0)},
    {"aten::count_nonzero.out", lower_reduction, RP(R_COUNT_NONZERO, 1, 0)},
    {"aten::count_nonzero.dim_IntList", lower_reduction,
     RP(R_COUNT_NONZERO, 1, 0)},
    {"aten::count_nonzero.dim_IntList_out", lower_reduction,
     RP(R_COUNT_NONZERO, 1, 0)},
    {"aten::argmax", lower_reduction, RP(R_ARGMAX, 1, 2)},
    {"aten::argmax.out", lower_reduction, RP(R_ARGMAX, 1, 2)},
    {"aten::argmin", lower_reduction, RP(R_ARGMIN, 1, 2)},
    {"aten::argmin.out", lower_reduction, RP(R_ARGMIN, 1, 2)},
    {"aten::max.dim", lower_reduction, RP(R_MAX_DIM, 1, 2)},
    {"aten::max.dim_max", lower_reduction, RP(R_MAX_DIM, 1, 2)},
    {"aten::min.dim", lower_reduction, RP(R_MIN_DIM, 1, 2)},
    {"aten::min.dim_min", lower_reduction, RP(R_MIN_DIM, 1, 2)},
    {"aten::var.correction", lower_reduction, RP(R_VAR, 1, 3)},
    {"aten::var.correction_out", lower_reduction, RP(R_VAR, 1, 3)},
    {"aten::std.correction", lower_reduction, RP(R_STD, 1, 3)},
    {"aten::std.correction_out", lower_reduction, RP(R_STD, 1, 3)},
    {"aten::var_mean.correction", lower_reduction, RP(R_VAR_MEAN, 1, 3)},
    {"aten::var_mean.correction_out", lower_reduction, RP(R_VAR_MEAN, 1, 3)},
    {"aten::std_mean.correction", lower_reduction, RP(R_STD_MEAN, 1, 3)},
    {"aten::std_mean.correction_out", lower_reduction, RP(R_STD_MEAN, 1, 3)},
    {"aten::logsumexp", lower_reduction, RP(R_LOGSUMEXP, 1, 2)},
    {"aten::logsumexp.out", lower_reduction, RP(R_LOGSUMEXP, 1, 2)},
    {"aten::linalg_vector_norm", lower_reduction, RP(R_VECTOR_NORM, 2, 3)},
    {"aten::linalg_vector_norm.out", lower_reduction, RP(R_VECTOR_NORM, 2, 3)},
    {"aten::norm.Scalar", lower_reduction, RP(R_NORM, 0, 0)},
    {"aten::norm.Scalar_out", lower_reduction, RP(R_NORM, 0, 0)},
    {"aten::norm.ScalarOpt_dim", lower_reduction, RP(R_NORM, 2, 3)},
    {"aten::norm.out", lower_reduction, RP(R_NORM, 2, 3)},
    {"aten::norm.ScalarOpt_dim_dtype", lower_reduction, RP(R_NORM_DTYPE, 2, 3)},
    {"aten::norm.dtype_out", lower_reduction, RP(R_NORM_DTYPE, 2, 3)},
    {"aten::norm.ScalarOpt_dtype", lower_reduction, RP(R_NORM_DTYPE, 0, 0)},
    {"aten::norm.ScalarOpt_dtype_out", lower_reduction, RP(R_NORM_DTYPE, 0, 0)},
    {"aten::cumsum", lower_scan, S_CUMSUM},
    {"aten::cumsum.out", lower_scan, S_CUMSUM},
    {"aten::cumsum_", lower_scan, S_CUMSUM},
    {"aten::cumprod", lower_scan, S_CUMPROD},
    {"aten::cumprod.out", lower_scan, S_CUMPROD},
    {"aten::cumprod_", lower_scan, S_CUMPROD},
    {"aten::logcumsumexp", lower_scan, S_LOGCUMSUMEXP},
    {"aten::logcumsumexp.out", lower_scan, S_LOGCUMSUMEXP},
    {"aten::sort", lower_sort, SO_SORT},
    {"aten::sort.values", lower_sort, SO_SORT},
    {"aten::sort.stable", lower_sort, SO_SORT_STABLE},
    {"aten::sort.values_stable", lower_sort, SO_SORT_STABLE},
    {"aten::topk", lower_sort, SO_TOPK},
    {"aten::topk.values", lower_sort, SO_TOPK},
    {"aten::pow.Tensor_Tensor", lower_pow, PW_TT},
    {"aten::pow_.Tensor", lower_pow, PW_TT},
    {"aten::pow.Tensor_Tensor_out", lower_pow, PW_TT},
    {"aten::pow.Tensor_Scalar", lower_pow, PW_TS},
    {"aten::pow_.Scalar", lower_pow, PW_TS},
    {"aten::pow.Tensor_Scalar_out", lower_pow, PW_TS},
    {"aten::pow.Scalar", lower_pow, PW_ST},
    {"aten::pow.Scalar_out", lower_pow, PW_ST},
    {"aten::fmod.Tensor", lower_int_binary, I_FMOD},
    {"aten::fmod_.Tensor", lower_int_binary, I_FMOD},
    {"aten::fmod.Tensor_out", lower_int_binary, I_FMOD},
    {"aten::fmod.Scalar", lower_int_binary, I_FMOD},
    {"aten::fmod_.Scalar", lower_int_binary, I_FMOD},
    {"aten::fmod.Scalar_out", lower_int_binary, I_FMOD},
    {"aten::bitwise_left_shift.Tensor", lower_int_binary, I_LSHIFT},
    {"aten::bitwise_left_shift_.Tensor", lower_int_binary, I_LSHIFT},
    {"aten::bitwise_left_shift.Tensor_out", lower_int_binary, I_LSHIFT},
    {"aten::bitwise_left_shift.Tensor_Scalar", lower_int_binary, I_LSHIFT},
    {"aten::bitwise_left_shift_.Tensor_Scalar", lower_int_binary, I_LSHIFT},
    {"aten::bitwise_left_shift.Tensor_Scalar_out", lower_int_binary, I_LSHIFT},
    {"aten::bitwise_left_shift.Scalar_Tensor", lower_int_binary, I_LSHIFT},
    {"aten::bitwise_left_shift.Scalar_Tensor_out", lower_int_binary, I_LSHIFT},
    {"aten::bitwise_right_shift.Tensor", lower_int_binary, I_RSHIFT},
    {"aten::bitwise_right_shift_.Tensor", lower_int_binary, I_RSHIFT},
    {"aten::bitwise_right_shift.Tensor_out", lower_int_binary, I_RSHIFT},
    {"aten::bitwise_right_shift.Tensor_Scalar", lower_int_binary, I_RSHIFT},
    {"aten::bitwise_right_shift_.Tensor_Scalar", lower_int_binary, I_RSHIFT},
    {"aten::bitwise_right_shift.Tensor_Scalar_out", lower_int_binary, I_RSHIFT},
    {"aten::bitwise_right_shift.Scalar_Tensor", lower_int_binary, I_RSHIFT},
    {"aten::bitwise_right_shift.Scalar_Tensor_out", lower_int_binary, I_RSHIFT},
    {"aten::gcd", lower_int_binary, I_GCD},
    {"aten::gcd.out", lower_int_binary, I_GCD},
    {"aten::gcd_", lower_int_binary, I_GCD},
    {"aten::lcm", lower_int_binary, I_LCM},
    {"aten::lcm.out", lower_int_binary, I_LCM},
    {"aten::lcm_", lower_int_binary, I_LCM},
    {"aten::nextafter", lower_int_binary, I_NEXTAFTER},
    {"aten::nextafter.out", lower_int_binary, I_NEXTAFTER},
    {"aten::nextafter_", lower_int_binary, I_NEXTAFTER},
    {"aten::trace", lower_trace, 0},
    {"aten::trace.out", lower_trace, 0},
    {"aten::aminmax", lower_aminmax, 0},
    {"aten::aminmax.out", lower_aminmax, 0},
    {"aten::isin.Tensor_Tensor", lower_isin, 0},
    {"aten::isin.Tensor_Tensor_out", lower_isin, 0},
    {"aten::isin.Tensor_Scalar", lower_isin, 0},
    {"aten::isin.Tensor_Scalar_out", lower_isin, 0},
    {"aten::isin.Scalar_Tensor", lower_isin, 0},
    {"aten::isin.Scalar_Tensor_out", lower_isin, 0},
    {"aten::hash_tensor", lower_hash_tensor, 0},
    {"aten::hash_tensor.out", lower_hash_tensor, 0},
    {"aten::mode", lower_mode, 0},
    {"aten::mode.values", lower_mode, 0},
    {"aten::searchsorted.Tensor", lower_search, SS_SEARCHSORTED},
    {"aten::searchsorted.Tensor_out", lower_search, SS_SEARCHSORTED},
    {"aten::bucketize.Tensor", lower_search, SS_BUCKETIZE},
    {"aten::bucketize.Tensor_out", lower_search, SS_BUCKETIZE},
    {NULL, NULL, 0},
};

/* Complex-ready ops of this file (ops_internal.h). */
const char* const op_complex_math[] = {
    "pow", "pow_", "trace", "any", "all", "prod", "count_nonzero", "norm",
    "rsub", "logical_and", "logical_and_", "logical_or", "logical_or_",
    "logical_xor", "logical_xor_", "logical_not", "logical_not_", "isnan",
    "isinf", "addcmul", "addcmul_", "addcdiv", "addcdiv_", "lerp", "lerp_",
    "addr", "addr_", "addbmm", "addbmm_", "tan", "tan_", "log1p", "log1p_",
    "expm1", "expm1_", "sigmoid", "sigmoid_",
    "sinh", "sinh_", "cosh", "cosh_", "exp2", "exp2_", "log2", "log2_",
    "log10", "log10_", "atanh", "atanh_", "atan", "atan_", "asinh", "asinh_",
    "asin", "asin_", "acos", "acos_", "acosh", "acosh_", NULL};
