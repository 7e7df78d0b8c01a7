/* Special functions and miscellaneous ops: gamma-family functions, special_*
 * functions, cross products, take/put, reductions into an index.
 *
 * The special functions follow the CPU kernels' algorithms (Cephes-style
 * series and Chebyshev expansions) in the dtype those kernels compute in,
 * so that the results agree to a few ulps, poles and NaNs included.
 *
 * Formulas are built with a small emitter (em, as in math.c): each step
 * returns a value and keeps the first failing status; a lowering returns
 * em_done() at the end. */
#include <math.h>
#include <string.h>

#include "ops/emit.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

/* Check code for "let the CPU run this call and say what is wrong". */
#define CPU_DECIDES TPUC_UNIMPLEMENTED

static tpuc_status* em_done(em* e) { return e->st; }


/* Rank-0 constant `v` of dtype `dt`. */
static V e_k0(em* e, tpuc_dtype dt, double v) {
  V k = -1;
  if (e->st != NULL) return -1;
  if (dt == TPUC_DTYPE_PRED) {
    V u = -1;
    em_keep(e, tpuc_hlo_constant_i64(e->fn, TPUC_DTYPE_U8, v != 0, &u));
    if (e->st == NULL) em_keep(e, tpuc_hlo_convert(e->fn, u, dt, &k));
  } else if (tpuc_dtype_is_float(dt)) {
    em_keep(e, tpuc_hlo_constant_f64(e->fn, dt, v, &k));
  } else {
    em_keep(e, tpuc_hlo_constant_i64(e->fn, dt, (int64_t)v, &k));
  }
  return k;
}

/* Constant `v` of dtype `dt`, with the shape of `like`. */
static V e_kd(em* e, tpuc_dtype dt, double v, V like) {
  return e_splat(e, e_k0(e, dt, v), like);
}

/* Constant `v` of the dtype and shape of `like`. */
static V e_k(em* e, V like, double v) {
  return e_kd(e, e_type(e, like).dtype, v, like);
}

/* x (computed in a wider dtype) rounded to `dt` and back, as the CPU's
 * per-operation rounding of half floats. */
static V e_rnd(em* e, V x, tpuc_dtype dt) {
  tpuc_dtype wide = e_type(e, x).dtype;
  if (wide == dt) return x;
  return e_cvt(e, e_cvt(e, x, dt), wide);
}

#define SIN(a) e_un(e, TPUC_HLO_SINE, a)
#define COS(a) e_un(e, TPUC_HLO_COSINE, a)
#define TAN(a) e_un(e, TPUC_HLO_TAN, a)

/* ------------------------------ small helpers --------------------------- */

static bool is_float(tpuc_dtype d) { return tpuc_dtype_is_float(d) != 0; }

/* The float dtype a "float" unary op gives for input dtype `d`. */
static tpuc_dtype float_result(const op_ctx* c, tpuc_dtype d) {
  return is_float(d) ? d : c->opts->default_float;
}

/* trunc of float x: toward zero. */
static V e_trunc(em* e, V x) {
  return SEL(LT(x, K(x, 0)), CEIL(x), FLOOR(x));
}

/* Rank-0 i1: some element of the i1 tensor p is true. */
static V e_any(em* e, V p) {
  tpuc_hlo_type t = e_type(e, p);
  if (e->st != NULL || t.rank == 0) return p;
  int64_t dims[TPUC_MAX_RANK];
  for (int d = 0; d < t.rank; d++) dims[d] = d;
  V init = e_k0(e, TPUC_DTYPE_PRED, 0), r = -1;
  tpuc_hlo_fn* body = NULL;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_region_binary(e->c->module, TPUC_DTYPE_PRED,
                                      TPUC_HLO_OR, &body));
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_reduce(e->fn, &p, &init, 1, dims, (size_t)t.rank,
                               body, &r));
  return r;
}

/* Adds `bad` (rank-0 i1) to the call's argument check. Checks of two
 * different codes together leave the verdict to the CPU. */
static void e_check(em* e, V bad, tpuc_code code, const char* msg) {
  op_ctx* c = e->c;
  if (e->st != NULL) return;
  if (!c->has_check) {
    c->has_check = true;
    c->check = bad;
    c->check_code = code;
    c->check_msg = msg;
    return;
  }
  c->check = OR(c->check, bad);
  if (c->check_code != code) {
    c->check_code = CPU_DECIDES;
    c->check_msg = "bad arguments: the CPU decides";
  }
}

/* Horner: sum_k p[k] x^(n-1-k) (p[0] the highest power), Cephes polevl. */
static V e_polevl(em* e, V x, const double* p, int n) {
  V r = K(x, p[0]);
  for (int k = 1; k < n; k++) r = ADD(MUL(r, x), K(x, p[k]));
  return r;
}

/* Cephes chbevl: the Chebyshev series sum of a[0..n) at x (Clenshaw). */
static V e_chbevl(em* e, V x, const double* a, int n) {
  V b0 = K(x, a[0]), b1 = K(x, 0), b2 = K(x, 0);
  for (int k = 1; k < n; k++) {
    b2 = b1;
    b1 = b0;
    b0 = ADD(SUB(MUL(x, b1), b2), K(x, a[k]));
  }
  return MUL(K(x, 0.5), SUB(b0, b2));
}

/* ------------------------- gamma-family functions ----------------------- */

/* log(x) of positive f64 x that is correct for subnormals too (the device
 * flushes them to zero in arithmetic): from the integer bits. */
static V e_log_tiny(em* e, V x) {
  V bits = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_bitcast_convert(e->fn, x, TPUC_DTYPE_S64, &bits));
  V m = e_cvt(e, bits, TPUC_DTYPE_F64);
  V sub = SUB(LOG(m), K(m, 1074 * M_LN2));
  return SEL(LT(x, K(x, ldexp(1.0, -1022))), sub, LOG(x));
}

/* log|Gamma(x)| of f64 x: the Lanczos series (g = 7, 9 terms, about 1e-15
 * relative) for x >= 0.5 and the reflection formula below; +inf at the
 * poles and at +-inf, NaN for NaN. */
static V e_lgamma_f64(em* e, V x) {
  static const double g = 7.0;
  static const double p[9] = {
      0.99999999999980993,     676.5203681218851,     -1259.1392167224028,
      771.32342877765313,      -176.61502916214059,   12.507343278686905,
      -0.13857109526572012,    9.9843695780195716e-6, 1.5056327351493116e-7};
  V one = K(x, 1), half = K(x, 0.5);
  V refl = LT(x, half);
  /* y >= 0.5: y = x, or 1 - x under the reflection */
  V y = SEL(refl, SUB(one, x), x);
  V ym = SUB(y, one);
  V a = K(y, p[0]);
  for (int k = 1; k < 9; k++) a = ADD(a, DIV(K(y, p[k]), ADD(ym, K(y, k))));
  V t = ADD(ym, K(y, g + 0.5));
  /* 0.5 log(2 pi) + (y - 0.5) log t - t + log a */
  V lg = ADD(SUB(MUL(SUB(ym, K(y, -0.5)), LOG(t)), t),
             ADD(LOG(a), K(y, 0.91893853320467274178)));
  /* huge y: (y - 0.5) log t overflows only where the result does */
  lg = SEL(GT(y, K(y, 1e300)), K(y, INFINITY), lg);
  /* reflection: log(pi / |sin(pi x)|) - lgamma(1 - x), with sin(pi x)
   * from x reduced to [-1, 1] (exact) */
  V r = SUB(x, MUL(K(x, 2), e_un(e, TPUC_HLO_ROUND_NEAREST_EVEN,
                                 MUL(x, K(x, 0.5)))));
  V s = ABS(SIN(MUL(r, K(r, M_PI))));
  V lr = SUB(SUB(K(x, 1.1447298858494002), LOG(s)), lg);
  V res = SEL(refl, lr, lg);
  /* poles: 0, -1, -2, ... and -inf give +inf */
  V pole = AND(LE(x, K(x, 0)), EQ(x, FLOOR(x)));
  res = SEL(pole, K(x, INFINITY), res);
  /* tiny |x|: -log|x| (also keeps -0 and denormals right) */
  V tiny = LT(ABS(x), K(x, 1e-300));
  res = SEL(AND(tiny, NOT(pole)), NEG(e_log_tiny(e, ABS(x))), res);
  return SEL(ISNAN(x), x, res);
}

/* digamma as the CPU's calc_digamma, in x's dtype (f32 or f64): the
 * reflection term in f64, the upward recurrence to x >= 10, then the
 * asymptotic series. */
static V e_digamma(em* e, V x) {
  static const double A[7] = {
      8.33333333333333333333E-2, -2.10927960927960927961E-2,
      7.57575757575757575758E-3, -4.16666666666666666667E-3,
      3.96825396825396825397E-3, -8.33333333333333333333E-3,
      8.33333333333333333333E-2};
  tpuc_dtype dt = e_type(e, x).dtype;
  V zero = K(x, 0), one = K(x, 1);
  V neg = LT(x, zero);
  V isint = EQ(x, e_trunc(e, x));
  /* reflection: pi / tan(pi r), r the fractional part of x, in f64 */
  V xd = e_cvt(e, x, TPUC_DTYPE_F64);
  V rd = SUB(xd, e_trunc(e, xd));
  V refl = e_cvt(e, DIV(K(rd, M_PI), TAN(MUL(K(rd, M_PI), rd))), dt);
  V y = SEL(neg, SUB(one, x), x);
  V result = zero;
  for (int k = 0; k < 10; k++) {
    V low = LT(y, K(y, 10));
    result = SEL(low, SUB(result, DIV(one, y)), result);
    y = SEL(low, ADD(y, one), y);
  }
  V z = DIV(one, MUL(y, y));
  V poly = MUL(z, e_polevl(e, z, A, 7));
  poly = SEL(LT(y, K(y, 1e17)), poly, zero);
  V asym = SUB(SUB(ADD(result, LOG(y)), DIV(K(y, 0.5), y)), poly);
  V psi = SEL(EQ(y, K(y, 10)), ADD(result, K(y, 2.25175258906672110764)),
              asym);
  psi = SEL(neg, SUB(psi, refl), psi);
  psi = SEL(AND(neg, isint), K(x, NAN), psi);
  /* +-0: -+inf (copysign(inf, -x)) */
  /* the sign of a zero from its bits */
  tpuc_dtype it = dt == TPUC_DTYPE_F64 ? TPUC_DTYPE_S64 : TPUC_DTYPE_S32;
  V bits = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_bitcast_convert(e->fn, x, it, &bits));
  V inf = SEL(LT(bits, K(bits, 0)), K(x, INFINITY), K(x, -INFINITY));
  V szero = EQ(x, zero);
  return SEL(szero, inf, psi);
}

/* trigamma as the CPU's calc_trigamma, in x's dtype. */
static V e_trigamma(em* e, V x) {
  V one = K(x, 1), zero = K(x, 0);
  V small = LT(x, K(x, 0.5));
  V s = SIN(MUL(K(x, M_PI), x));
  V result = SEL(small, NEG(DIV(K(x, M_PI * M_PI), MUL(s, s))), zero);
  V y = SEL(small, SUB(one, x), x);
  for (int k = 0; k < 6; k++) {
    result = ADD(result, DIV(one, MUL(y, y)));
    y = ADD(y, one);
  }
  V ixx = DIV(one, MUL(y, y));
  V poly = SUB(K(y, 1.0 / 30), MUL(ixx, K(y, 1.0 / 42)));
  poly = SUB(K(y, 1.0 / 6), MUL(ixx, poly));
  poly = ADD(ADD(one, DIV(one, MUL(K(y, 2), y))), MUL(ixx, poly));
  result = ADD(result, DIV(poly, y));
  return SEL(small, NEG(result), result);
}

/* The zeta direct-sum loop's condition: some element still summing (not
 * finished, and i < 9 or a <= 9). Args (i, s, q, a, b, sum, fin). */
static void zeta_cond(em* e, const V* v) {
  V lt9 = LT(v[0], e_k0(e, TPUC_DTYPE_S64, 9));
  V go = AND(NOT(v[6]), OR(e_splat(e, lt9, v[6]), LE(v[3], K(v[3], 9))));
  V any = e_any(e, go);
  if (e->st == NULL) em_keep(e, tpuc_hlo_return(e->fn, &any, 1));
}

/* One step of the direct sum for the elements still summing; an element
 * whose new term is below machine epsilon of the sum is finished (the CPU
 * returns the sum there without the tail). */
static void zeta_body(em* e, const V* v) {
  const double machep = 1.11022302462515654042E-16;
  V lt9 = LT(v[0], e_k0(e, TPUC_DTYPE_S64, 9));
  V go = AND(NOT(v[6]), OR(e_splat(e, lt9, v[6]), LE(v[3], K(v[3], 9))));
  V a = ADD(v[3], K(v[3], 1));
  V b = POW(a, NEG(v[1]));
  V sum = ADD(v[5], b);
  V eps = MUL(K(sum, machep), sum);
  V conv = AND(LT(NEG(eps), b), LT(b, eps));
  V out[7];
  out[0] = ADD(v[0], e_k0(e, TPUC_DTYPE_S64, 1));
  out[1] = v[1];
  out[2] = v[2];
  out[3] = SEL(go, a, v[3]);
  out[4] = SEL(go, b, v[4]);
  out[5] = SEL(go, sum, v[5]);
  out[6] = OR(v[6], AND(go, conv));
  if (e->st == NULL) em_keep(e, tpuc_hlo_return(e->fn, out, 7));
}

/* Builds a while region of the 7 zeta loop values with `fill`. */
static tpuc_hlo_fn* zeta_region(em* e, const tpuc_hlo_type* ts,
                                void (*fill)(em*, const V*)) {
  tpuc_hlo_fn* r = NULL;
  if (e->st != NULL ||
      !em_keep(e, tpuc_hlo_region_create(e->c->module, ts, 7, &r)))
    return NULL;
  em re = {e->c, r, NULL};
  V v[7];
  for (int k = 0; k < 7; k++) em_keep(&re, tpuc_hlo_get_arg(r, k, &v[k]));
  if (re.st == NULL) fill(&re, v);
  em_keep(e, re.st);
  return r;
}

/* Hurwitz zeta(x, q) of f64 values as the CPU's Cephes zeta: a direct sum
 * (at least 9 terms, until q + i > 9) then the Euler-Maclaurin tail. The
 * direct sum is a while loop, for q far below 0 (beyond -1e6 the CPU runs
 * the call). */
static V e_zeta(em* e, V x, V q) {
  static const double A[12] = {
      12.0, -720.0, 30240.0, -1209600.0, 47900160.0,
      -1.8924375803183791606e9, 7.47242496e10, -2.950130727918164224e12,
      1.1646782814350067249e14, -4.5979787224074726105e15,
      1.8152105401943546773e17, -7.1661652561756670113e18};
  const double machep = 1.11022302462515654042E-16;
  V zero = K(q, 0), one = K(q, 1);
  V sum = POW(q, NEG(x));
  V far = AND(LT(q, K(q, -1e6)), NE(q, FLOOR(q)));
  e_check(e, e_any(e, far), CPU_DECIDES, "zeta far below 0");
  /* poles (q a non-positive integer, -inf included) skip the loop */
  V skip = OR(far, AND(LE(q, zero), EQ(q, FLOOR(q))));
  V init[7] = {e_k0(e, TPUC_DTYPE_S64, 0), x, q, q, zero, sum, skip};
  tpuc_hlo_type ts[7];
  for (int k = 0; k < 7; k++) ts[k] = e_type(e, init[k]);
  tpuc_hlo_fn* cond = zeta_region(e, ts, zeta_cond);
  tpuc_hlo_fn* body = zeta_region(e, ts, zeta_body);
  V st[7];
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_while(e->fn, init, 7, cond, body, st));
  if (e->st != NULL) return -1;
  V a = st[3], b = st[4], fin = st[6];
  sum = st[5];
  /* Euler-Maclaurin tail, stopping where a term is below epsilon */
  V w = a;
  V s = ADD(sum, DIV(MUL(b, w), SUB(x, one)));
  s = SUB(s, MUL(K(b, 0.5), b));
  V done = fin;
  V aa = one, k = zero;
  for (int i = 0; i < 12; i++) {
    aa = MUL(aa, ADD(x, k));
    b = DIV(b, w);
    V t = DIV(MUL(aa, b), K(b, A[i]));
    V s2 = ADD(s, t);
    s = SEL(done, s, s2);
    V small = LT(ABS(DIV(t, s2)), K(t, machep));
    done = OR(done, small);
    k = ADD(k, one);
    aa = MUL(aa, ADD(x, k));
    b = DIV(b, w);
    k = ADD(k, one);
  }
  V res = SEL(fin, sum, s);
  /* x == 1: inf; x < 1: NaN; q <= 0: inf at integers, NaN for
   * non-integral x */
  V qle = LE(q, zero);
  V qint = EQ(q, FLOOR(q));
  res = SEL(AND(qle, NE(x, FLOOR(x))), K(x, NAN), res);
  res = SEL(AND(qle, qint), K(x, INFINITY), res);
  res = SEL(LT(x, one), K(x, NAN), res);
  return SEL(EQ(x, one), K(x, INFINITY), res);
}

/* ------------------------- modified Bessel functions --------------------- */

/* Cephes Chebyshev coefficients of exp(-x) I0(x) on [0, 8] and of
 * exp(-x) sqrt(x) I0(x) on [8, inf). */
static const double I0_A[30] = {
    -4.41534164647933937950E-18, 3.33079451882223809783E-17,
    -2.43127984654795469359E-16, 1.71539128555513303061E-15,
    -1.16853328779934516808E-14, 7.67618549860493561688E-14,
    -4.85644678311192946090E-13, 2.95505266312963983461E-12,
    -1.72682629144155570723E-11, 9.67580903537323691224E-11,
    -5.18979560163526290666E-10, 2.65982372468238665035E-9,
    -1.30002500998624804212E-8,  6.04699502254191894932E-8,
    -2.67079385394061173391E-7,  1.11738753912010371815E-6,
    -4.41673835845875056359E-6,  1.64484480707288970893E-5,
    -5.75419501008210370398E-5,  1.88502885095841655729E-4,
    -5.76375574538582365885E-4,  1.63947561694133579842E-3,
    -4.32430999505057594430E-3,  1.05464603945949983183E-2,
    -2.37374148058994688156E-2,  4.93052842396707084878E-2,
    -9.49010970480476444210E-2,  1.71620901522208775349E-1,
    -3.04682672343198398683E-1,  6.76795274409476084995E-1};
static const double I0_B[25] = {
    -7.23318048787475395456E-18, -4.83050448594418207126E-18,
    4.46562142029675999901E-17,  3.46122286769746109310E-17,
    -2.82762398051658348494E-16, -3.42548561967721913462E-16,
    1.77256013305652638360E-15,  3.81168066935262242075E-15,
    -9.55484669882830764870E-15, -4.15056934728722208663E-14,
    1.54008621752140982691E-14,  3.85277838274214270114E-13,
    7.18012445138366623367E-13,  -1.79417853150680611778E-12,
    -1.32158118404477131188E-11, -3.14991652796324136454E-11,
    1.18891471078464383424E-11,  4.94060238822496958910E-10,
    3.39623202570838634515E-9,   2.26666899049817806459E-8,
    2.04891858946906374183E-7,   2.89137052083475648297E-6,
    6.88975834691682398426E-5,   3.36911647825569408990E-3,
    8.04490411014108831608E-1};
/* The same for I1 (exp(-x) I1(x) / x on [0, 8]); the CPU's float kernels
 * use only the last 17 (A) and 7 (B) of them. */
static const double I1_A[29] = {
    2.77791411276104639959E-18, -2.11142121435816608115E-17,
    1.55363195773620046921E-16, -1.10559694773538630805E-15,
    7.60068429473540693410E-15, -5.04218550472791168711E-14,
    3.22379336594557470981E-13, -1.98397439776494371520E-12,
    1.17361862988909016308E-11, -6.66348972350202774223E-11,
    3.62559028155211703701E-10, -1.88724975172282928790E-9,
    9.38153738649577178388E-9,  -4.44505912879632808065E-8,
    2.00329475355213526229E-7,  -8.56872026469545474066E-7,
    3.47025130813767847674E-6,  -1.32731636560394358279E-5,
    4.78156510755005422638E-5,  -1.61760815825896745588E-4,
    5.12285956168575772895E-4,  -1.51357245063125314899E-3,
    4.15642294431288815669E-3,  -1.05640848946261981558E-2,
    2.47264490306265168283E-2,  -5.29459812080949914269E-2,
    1.02643658689847095384E-1,  -1.76416518357834055153E-1,
    2.52587186443633654823E-1};
static const double I1_B[25] = {
    7.51729631084210481353E-18,  4.41434832307170791151E-18,
    -4.65030536848935832153E-17, -3.20952592199342395980E-17,
    2.96262899764595013876E-16,  3.30820231092092828324E-16,
    -1.88035477551078244854E-15, -3.81440307243700780478E-15,
    1.04202769841288027642E-14,  4.27244001671195135429E-14,
    -2.10154184277266431302E-14, -4.08355111109219731823E-13,
    -7.19855177624590851209E-13, 2.03562854414708950722E-12,
    1.41258074366137813316E-11,  3.25260358301548823856E-11,
    -1.89749581235054123450E-11, -5.58974346219658380687E-10,
    -3.83538038596423702205E-9,  -2.63146884688951950684E-8,
    -2.51223623787020892529E-7,  -3.88256480887769039346E-6,
    -1.10588938762623716291E-4,  -9.76109749136146840777E-3,
    7.78576235018280120474E-1};

enum { BES_I0 = 0, BES_I0E, BES_I1, BES_I1E };

/* I0, I0e, I1, I1e of x (f32 or f64) as the CPU's calc_* in that dtype:
 * Chebyshev series on |x| <= 8 and on 32/|x| - 2 beyond. (Half floats
 * compute in f32, as the CPU's vector kernels.) */
static V e_bessel(em* e, V x, int which) {
  bool f32 = e_type(e, x).dtype != TPUC_DTYPE_F64;
  bool one = which == BES_I1 || which == BES_I1E;
  bool scaled = which == BES_I0E || which == BES_I1E;
  const double *A = one ? I1_A : I0_A, *B = one ? I1_B : I0_B;
  int na = one ? 29 : 30, nb = 25;
  if (one && f32) {
    A += 12;
    na = 17;
    B += 18;
    nb = 7;
  }
  V a = ABS(x);
  V near = LE(a, K(a, 8));
  V ya = SUB(DIV(a, K(a, 2)), K(a, 2));
  V ca = e_chbevl(e, ya, A, na);
  /* the far branch at a clamped to > 8 (the near one is selected there) */
  V af = SEL(near, K(a, 16), a);
  V yb = SUB(DIV(K(af, 32), af), K(af, 2));
  V cb = e_chbevl(e, yb, B, nb);
  V ea = EXP(a);
  V rn, rf;
  if (one) {
    rn = scaled ? MUL(ca, a) : MUL(MUL(ea, a), ca);
  } else {
    rn = scaled ? ca : MUL(ea, ca);
  }
  rf = scaled ? DIV(cb, SQRT(af)) : DIV(MUL(ea, cb), SQRT(af));
  V res = SEL(near, rn, rf);
  if (one) res = SEL(LT(x, K(x, 0)), NEG(res), res);
  return SEL(ISNAN(x), x, res);
}

/* ----------------------- Bessel functions of the first and second kind */

/* Cephes rational approximations of J0/Y0 (J1/Y1) as the CPU's
 * bessel_{j,y}{0,1}_forward: near 0 a rational function of x^2, beyond 5
 * the asymptotic modulus/phase form in (5/x)^2. */
static const double J0_PP[7] = {
    7.96936729297347051624e-04, 8.28352392107440799803e-02,
    1.23953371646414299388e+00, 5.44725003058768775090e+00,
    8.74716500199817011941e+00, 5.30324038235394892183e+00,
    9.99999999999999997821e-01};
static const double J0_PQ[7] = {
    9.24408810558863637013e-04, 8.56288474354474431428e-02,
    1.25352743901058953537e+00, 5.47097740330417105182e+00,
    8.76190883237069594232e+00, 5.30605288235394617618e+00,
    1.00000000000000000218e+00};
static const double J0_QP[8] = {
    -1.13663838898469149931e-02, -1.28252718670509318512e+00,
    -1.95539544257735972385e+01, -9.32060152123768231369e+01,
    -1.77681167980488050595e+02, -1.47077505154951170175e+02,
    -5.14105326766599330220e+01, -6.05014350600728481186e+00};
static const double J0_QQ[7] = {
    6.43178256118178023184e+01, 8.56430025976980587198e+02,
    3.88240183605401609683e+03, 7.24046774195652478189e+03,
    5.93072701187316984827e+03, 2.06209331660327847417e+03,
    2.42005740240291393179e+02};
static const double J0_RP[4] = {
    -4.79443220978201773821e+09, 1.95617491946556577543e+12,
    -2.49248344360967716204e+14, 9.70862251047306323952e+15};
static const double J0_RQ[8] = {
    4.99563147152651017219e+02, 1.73785401676374683123e+05,
    4.84409658339962045305e+07, 1.11855537045356834862e+10,
    2.11277520115489217587e+12, 3.10518229857422583814e+14,
    3.18121955943204943306e+16, 1.71086294081043136091e+18};
static const double Y0_YP[8] = {
    1.55924367855235737965e+04, -1.46639295903971606143e+07,
    5.43526477051876500413e+09, -9.82136065717911466409e+11,
    8.75906394395366999549e+13, -3.46628303384729719441e+15,
    4.42733268572569800351e+16, -1.84950800436986690637e+16};
static const double Y0_YQ[7] = {
    1.04128353664259848412e+03, 6.26107330137134956842e+05,
    2.68919633393814121987e+08, 8.64002487103935000337e+10,
    2.02979612750105546709e+13, 3.17157752842975028269e+15,
    2.50596256172653059228e+17};
static const double J1_PP[7] = {
    7.62125616208173112003e-04, 7.31397056940917570436e-02,
    1.12719608129684925192e+00, 5.11207951146807644818e+00,
    8.42404590141772420927e+00, 5.21451598682361504063e+00,
    1.00000000000000000254e+00};
static const double J1_PQ[7] = {
    5.71323128072548699714e-04, 6.88455908754495404082e-02,
    1.10514232634061696926e+00, 5.07386386128601488557e+00,
    8.39985554327604159757e+00, 5.20982848682361821619e+00,
    9.99999999999999997461e-01};
static const double J1_QP[8] = {
    5.10862594750176621635e-02, 4.98213872951233449420e+00,
    7.58238284132545283818e+01, 3.66779609360150777800e+02,
    7.10856304998926107277e+02, 5.97489612400613639965e+02,
    2.11688757100572135698e+02, 2.52070205858023719784e+01};
static const double J1_QQ[7] = {
    7.42373277035675149943e+01, 1.05644886038262816351e+03,
    4.98641058337653607651e+03, 9.56231892404756170795e+03,
    7.99704160447350683650e+03, 2.82619278517639096600e+03,
    3.36093607810698293419e+02};
static const double J1_RP[4] = {
    -8.99971225705559398224e+08, 4.52228297998194034323e+11,
    -7.27494245221818276015e+13, 3.68295732863852883286e+15};
static const double J1_RQ[8] = {
    6.20836478118054335476e+02, 2.56987256757748830383e+05,
    8.35146791431949253037e+07, 2.21511595479792499675e+10,
    4.74914122079991414898e+12, 7.84369607876235854894e+14,
    8.95222336184627338078e+16, 5.32278620332680085395e+18};
static const double Y1_YP[6] = {
    1.26320474790178026440e+09, -6.47355876379160291031e+11,
    1.14509511541823727583e+14, -8.12770255501325109621e+15,
    2.02439475713594898196e+17, -7.78877196265950026825e+17};
static const double Y1_YQ[8] = {
    5.94301592346128195359e+02, 2.35564092943068577943e+05,
    7.34811944459721705660e+07, 1.87601316108706159478e+10,
    3.88231277496238566008e+12, 6.20557727146953693363e+14,
    6.87141087355300489866e+16, 3.97270608116560655612e+18};

/* The far form of J (second = false) or Y of order 0 or 1 at a > 5:
 * (P cos(a - phase) -+ 5/a Q sin(a - phase)) sqrt(2/pi) / sqrt(a). */
static V e_bessel_far(em* e, V a, bool order1, bool second) {
  const double *pp = order1 ? J1_PP : J0_PP, *pq = order1 ? J1_PQ : J0_PQ;
  const double *qp = order1 ? J1_QP : J0_QP, *qq = order1 ? J1_QQ : J0_QQ;
  /* the CPU forms z as 25 / x^2 (order 0) or 5/x * (5/x) (order 1) */
  V z = order1 ? MUL(DIV(K(a, 5), a), DIV(K(a, 5), a))
               : DIV(K(a, 25), MUL(a, a));
  V p = DIV(e_polevl(e, z, pp, 7), e_polevl(e, z, pq, 7));
  V q = DIV(e_polevl(e, z, qp, 8), e_polevl(e, z, qq, 7));
  V w = SUB(a, K(a, order1 ? 2.356194490192344928846982537459627163
                           : 0.785398163397448309615660845819875721));
  V q5 = MUL(DIV(K(a, 5), a), q);
  V r = second ? ADD(MUL(p, SIN(w)), MUL(q5, COS(w)))
               : SUB(MUL(p, COS(w)), MUL(q5, SIN(w)));
  return DIV(MUL(r, K(r, 0.797884560802865355879892119868763737)), SQRT(a));
}

/* J0 or J1 of x (f32 or f64). */
static V e_bessel_j(em* e, V x, bool order1) {
  V a = ABS(x);
  V near = LE(a, K(a, 5));
  /* the near branch at a clamped to <= 5, the far one at a > 5 */
  V an = SEL(near, a, K(a, 1));
  V af = SEL(near, K(a, 10), a);
  V z = MUL(an, an);
  V rp = e_polevl(e, z, order1 ? J1_RP : J0_RP, 4);
  V rq = e_polevl(e, z, order1 ? J1_RQ : J0_RQ, 8);
  V rn;
  if (order1) {
    rn = MUL(MUL(DIV(rp, rq), an), SUB(z, K(z, 1.46819706421238932572e+01)));
    rn = MUL(rn, SUB(z, K(z, 4.92184563216946036703e+01)));
  } else {
    rn = MUL(MUL(SUB(z, K(z, 5.78318596294678452118e+00)),
                 SUB(z, K(z, 3.04712623436620863991e+01))), rp);
    rn = DIV(rn, rq);
    /* tiny a: 1 - a^2/4 */
    rn = SEL(LT(an, K(an, 0.00001)), SUB(K(z, 1), DIV(z, K(z, 4))), rn);
  }
  V res = SEL(near, rn, e_bessel_far(e, af, order1, false));
  /* J1 is odd; NaN takes the far branch on the CPU too */
  if (order1) res = SEL(LT(x, K(x, 0)), NEG(res), res);
  return SEL(ISNAN(x), x, res);
}

/* Y0 or Y1 of x (f32 or f64): -inf at 0, NaN below. */
static V e_bessel_y(em* e, V x, bool order1) {
  V near = LE(x, K(x, 5));
  V xn = SEL(AND(near, GT(x, K(x, 0))), x, K(x, 1));
  V xf = SEL(near, K(x, 10), x);
  V z = MUL(xn, xn);
  V yp = e_polevl(e, z, order1 ? Y1_YP : Y0_YP, order1 ? 6 : 8);
  V yq = e_polevl(e, z, order1 ? Y1_YQ : Y0_YQ, order1 ? 8 : 7);
  V k2pi = K(x, 0.636619772367581343075535053490057448);
  V rn;
  if (order1) {
    V jl = SUB(MUL(e_bessel_j(e, xn, true), LOG(xn)), DIV(K(xn, 1), xn));
    rn = ADD(MUL(xn, DIV(yp, yq)), MUL(k2pi, jl));
  } else {
    rn = ADD(DIV(yp, yq), MUL(MUL(k2pi, LOG(xn)), e_bessel_j(e, xn, false)));
  }
  rn = SEL(LT(x, K(x, 0)), K(x, NAN), rn);
  rn = SEL(EQ(x, K(x, 0)), K(x, -INFINITY), rn);
  V res = SEL(near, rn, e_bessel_far(e, xf, order1, true));
  return SEL(ISNAN(x), x, res);
}

/* spherical j0: sin(x)/x, a Taylor polynomial for |x| < 0.5, 0 at inf. */
static V e_spherical_j0(em* e, V x) {
  V z = MUL(x, x);
  V p = K(x, 1.0 / 6227020800.0);
  static const double c[5] = {-1.0 / 39916800.0, 1.0 / 362880.0,
                              -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0};
  for (int k = 0; k < 5; k++) p = ADD(K(x, c[k]), MUL(z, p));
  V small = ADD(K(x, 1), MUL(z, p));
  V res = SEL(LT(ABS(x), K(x, 0.5)), small, DIV(SIN(x), x));
  return SEL(EQ(ABS(x), K(x, INFINITY)), K(x, 0), res);
}

/* ---------------- modified Bessel functions (special_* forms) ------------ */

/* Cephes Chebyshev coefficients of K0 and K1: on [0, 2] (in x^2 - 2) and
 * of exp(x) sqrt(x) K on (2, inf) (in 8/x - 2). */
static const double K0_A[10] = {
    1.37446543561352307156e-16, 4.25981614279661018399e-14,
    1.03496952576338420167e-11, 1.90451637722020886025e-09,
    2.53479107902614945675e-07, 2.28621210311945178607e-05,
    1.26461541144692592338e-03, 3.59799365153615016266e-02,
    3.44289899924628486886e-01, -5.35327393233902768720e-01};
static const double K0_B[25] = {
    5.30043377268626276149e-18, -1.64758043015242134646e-17,
    5.21039150503902756861e-17, -1.67823109680541210385e-16,
    5.51205597852431940784e-16, -1.84859337734377901440e-15,
    6.34007647740507060557e-15, -2.22751332699166985548e-14,
    8.03289077536357521100e-14, -2.98009692317273043925e-13,
    1.14034058820847496303e-12, -4.51459788337394416547e-12,
    1.85594911495471785253e-11, -7.95748924447710747776e-11,
    3.57739728140030116597e-10, -1.69753450938905987466e-09,
    8.57403401741422608519e-09, -4.66048989768794782956e-08,
    2.76681363944501510342e-07, -1.83175552271911948767e-06,
    1.39498137188764993662e-05, -1.28495495816278026384e-04,
    1.56988388573005337491e-03, -3.14481013119645005427e-02,
    2.44030308206595545468e+00};
static const double K1_A[11] = {
    -7.02386347938628759343e-18, -2.42744985051936593393e-15,
    -6.66690169419932900609e-13, -1.41148839263352776110e-10,
    -2.21338763073472585583e-08, -2.43340614156596823496e-06,
    -1.73028895751305206302e-04, -6.97572385963986435018e-03,
    -1.22611180822657148235e-01, -3.53155960776544875667e-01,
    1.52530022733894777053e+00};
static const double K1_B[25] = {
    -5.75674448366501715755e-18, 1.79405087314755922667e-17,
    -5.68946255844285935196e-17, 1.83809354436663880070e-16,
    -6.05704724837331885336e-16, 2.03870316562433424052e-15,
    -7.01983709041831346144e-15, 2.47715442448130437068e-14,
    -8.97670518232499435011e-14, 3.34841966607842919884e-13,
    -1.28917396095102890680e-12, 5.13963967348173025100e-12,
    -2.12996783842756842877e-11, 9.21831518760500529508e-11,
    -4.19035475934189648750e-10, 2.01504975519703286596e-09,
    -1.03457624656780970260e-08, 5.74108412545004946722e-08,
    -3.50196060308781257119e-07, 2.40648494783721712015e-06,
    -1.93619797416608296024e-05, 1.95215518471351631108e-04,
    -2.85781685962277938680e-03, 1.03923736576817238437e-01,
    2.72062619048444266945e+00};

/* I0 or I1 of x as the CPU's modified_bessel_i{0,1}_forward (all the
 * coefficients in both float dtypes, unlike calc_i1). */
static V e_mod_i(em* e, V x, bool order1) {
  V a = ABS(x);
  V near = LE(a, K(a, 8));
  V ca = e_chbevl(e, SUB(DIV(a, K(a, 2)), K(a, 2)), order1 ? I1_A : I0_A,
                  order1 ? 29 : 30);
  V af = SEL(near, K(a, 16), a);
  V cb = e_chbevl(e, SUB(DIV(K(af, 32), af), K(af, 2)),
                  order1 ? I1_B : I0_B, 25);
  V ea = EXP(a);
  V rn = order1 ? MUL(MUL(ca, a), ea) : MUL(ea, ca);
  V res = SEL(near, rn, DIV(MUL(ea, cb), SQRT(af)));
  if (order1) res = SEL(LT(x, K(x, 0)), NEG(res), res);
  return SEL(ISNAN(x), x, res);
}

/* K0 or K1 of x, exp(x) K when `scaled`, as the CPU's
 * [scaled_]modified_bessel_k{0,1}_forward: inf at 0, NaN below. */
static V e_mod_k(em* e, V x, bool order1, bool scaled) {
  tpuc_dtype dt = e_type(e, x).dtype;
  V near = LE(x, K(x, 2));
  V xn = SEL(AND(near, GT(x, K(x, 0))), x, K(x, 1));
  V xf = SEL(near, K(x, 4), x);
  V ca = e_chbevl(e, SUB(MUL(xn, xn), K(xn, 2)), order1 ? K1_A : K0_A,
                  order1 ? 11 : 10);
  V cb = e_chbevl(e, SUB(DIV(K(xf, 8), xf), K(xf, 2)),
                  order1 ? K1_B : K0_B, 25);
  V rn;
  if (order1) {
    rn = ADD(MUL(LOG(MUL(K(xn, 0.5), xn)), e_mod_i(e, xn, true)),
             DIV(ca, xn));
  } else if (!scaled) {
    /* the CPU's log(0.5 * x) is a double expression: the log term and
     * the difference are in f64 */
    V xd = e_cvt(e, xn, TPUC_DTYPE_F64);
    V lt = MUL(LOG(MUL(K(xd, 0.5), xd)),
               e_cvt(e, e_mod_i(e, xn, false), TPUC_DTYPE_F64));
    rn = e_cvt(e, SUB(e_cvt(e, ca, TPUC_DTYPE_F64), lt), dt);
  } else {
    rn = SUB(ca, MUL(LOG(MUL(K(xn, 0.5), xn)), e_mod_i(e, xn, false)));
  }
  if (scaled) rn = MUL(rn, EXP(xn));
  V rf = DIV(cb, SQRT(xf));
  if (!scaled) rf = DIV(MUL(EXP(NEG(xf)), cb), SQRT(xf));
  V res = SEL(near, rn, rf);
  res = SEL(LT(x, K(x, 0)), K(x, NAN), res);
  res = SEL(EQ(x, K(x, 0)), K(x, INFINITY), res);
  return SEL(ISNAN(x), x, res);
}

/* ------------------------- unary float functions ------------------------- */

enum {
  SU_ANGLE = 1, SU_SINC, SU_ENTR, SU_LGAMMA, SU_DIGAMMA, SU_TRIGAMMA,
  SU_I0, SU_I0E, SU_I1, SU_I1E, SU_J0, SU_J1, SU_Y0, SU_Y1, SU_SPH_J0,
  SU_MI0, SU_MI1, SU_MK0, SU_MK1, SU_SK0, SU_SK1,
};

/* f(x) of x in the compute dtype (f32 for half floats and f32, f64). */
static V e_special_fn(em* e, int which, V x) {
  V zero = K(x, 0);
  tpuc_dtype rt = float_result(e->c, e->c->types[0].dtype);
  switch (which) {
    case SU_ANGLE: /* real input: pi below 0, else 0; NaN stays */
      return SEL(ISNAN(x), x, SEL(LT(x, zero), K(x, M_PI), zero));
    case SU_SINC: {
      /* |x| < 1e-9 (denormals, which the device flushes, included): 1 */
      V p = MUL(K(x, M_PI), x);
      return SEL(LT(ABS(x), K(x, 1e-9)), K(x, 1), DIV(SIN(p), p));
    }
    case SU_ENTR: {
      /* the log rounds to the input dtype first, as the CPU's vector
       * kernel */
      V r = MUL(NEG(x), e_rnd(e, LOG(x), rt));
      r = SEL(GT(x, zero), r, SEL(EQ(x, zero), zero, K(x, -INFINITY)));
      return SEL(ISNAN(x), x, r);
    }
    case SU_LGAMMA: {
      tpuc_dtype dt = e_type(e, x).dtype;
      return e_cvt(e, e_lgamma_f64(e, e_cvt(e, x, TPUC_DTYPE_F64)), dt);
    }
    case SU_DIGAMMA:
      return e_digamma(e, x);
    case SU_TRIGAMMA:
      return e_trigamma(e, x);
    case SU_I0:
      return e_bessel(e, x, BES_I0);
    case SU_I0E:
      return e_bessel(e, x, BES_I0E);
    case SU_I1:
      return e_bessel(e, x, BES_I1);
    case SU_I1E:
      return e_bessel(e, x, BES_I1E);
    case SU_J0:
      return e_bessel_j(e, x, false);
    case SU_J1:
      return e_bessel_j(e, x, true);
    case SU_Y0:
      return e_bessel_y(e, x, false);
    case SU_Y1:
      return e_bessel_y(e, x, true);
    case SU_SPH_J0:
      return e_spherical_j0(e, x);
    case SU_MI0:
      return e_mod_i(e, x, false);
    case SU_MI1:
      return e_mod_i(e, x, true);
    case SU_MK0:
      return e_mod_k(e, x, false, false);
    case SU_MK1:
      return e_mod_k(e, x, true, false);
    case SU_SK0:
      return e_mod_k(e, x, false, true);
    case SU_SK1:
      return e_mod_k(e, x, true, true);
  }
  return -1;
}

/* A unary op with a floating result (integers and bools promote to the
 * default float), computed in f32 for half floats. */
static tpuc_status* lower_special_unary(op_ctx* c, int which) {
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  tpuc_dtype rt = float_result(c, c->types[0].dtype);
  if (!is_float(rt)) return op_unimpl("complex runs on the CPU");
  /* the special_* Bessel kernels have no half float version: the CPU
   * raises */
  if (which >= SU_J0 && rt != TPUC_DTYPE_F32 && rt != TPUC_DTYPE_F64)
    return op_unimpl("no half float kernel: the CPU raises");
  tpuc_dtype acc = op_accumulation_dtype(rt);
  em ee = em_of(c), *e = &ee;
  V x = e_cvt(e, e_cvt(e, c->vals[0], rt), acc);
  c->outs[0] = e_cvt(e, e_special_fn(e, which, x), rt);
  c->nouts = 1;
  return em_done(e);
}

/* polygamma(n, self) (polygamma_(self, n) in place): digamma for n = 0,
 * trigamma for 1, else (-1)^(n+1) n! zeta(n + 1, x) with zeta in f64. */
static tpuc_status* lower_polygamma(op_ctx* c, int param) {
  (void)param;
  int xi = op_is_tensor(c, 0) ? 0 : 1, ni = 1 - xi;
  if (!op_is_tensor(c, xi)) return op_unimpl("unexpected arguments");
  int64_t n = 0;
  TRY(op_int_arg(c, ni, -1, &n));
  if (n < 0) return op_unimpl("negative n: the CPU raises");
  if (n > 170) return op_unimpl("n! overflows: the CPU decides");
  tpuc_dtype rt = float_result(c, c->types[xi].dtype);
  if (!is_float(rt)) return op_unimpl("complex runs on the CPU");
  tpuc_dtype acc = op_accumulation_dtype(rt);
  em ee = em_of(c), *e = &ee;
  V x = e_cvt(e, e_cvt(e, c->vals[xi], rt), acc), r;
  if (n == 0) {
    r = e_digamma(e, x);
  } else if (n == 1) {
    r = e_trigamma(e, x);
  } else {
    double fact = 1;
    for (int64_t k = 2; k <= n; k++) fact *= (double)k;
    V xd = e_cvt(e, x, TPUC_DTYPE_F64);
    V z = e_cvt(e, e_zeta(e, K(xd, (double)(n + 1)), xd), acc);
    r = MUL(K(z, (n % 2) ? fact : -fact), z);
  }
  c->outs[0] = e_cvt(e, r, rt);
  c->nouts = 1;
  return em_done(e);
}

/* ------------------------------ misc pointwise --------------------------- */

/* equal(self, other) -> bool: same shape and every element equal after
 * type promotion (NaN is unequal), as a rank-0 i1. */
static tpuc_status* lower_equal(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1))
    return op_unimpl("unexpected arguments");
  em ee = em_of(c), *e = &ee;
  c->nouts = 1;
  if (!tpuc_hlo_type_equal(&c->types[0], &c->types[1]) &&
      (c->types[0].rank != c->types[1].rank ||
       memcmp(c->types[0].dims, c->types[1].dims,
              sizeof(int64_t) * (size_t)c->types[0].rank) != 0)) {
    c->outs[0] = e_k0(e, TPUC_DTYPE_PRED, 0);
    return em_done(e);
  }
  int which[2] = {0, 1};
  tpuc_dtype dt;
  TRY(op_result_type(c, which, 2, &dt));
  if (tpuc_dtype_is_complex(dt)) return op_unimpl("complex: CPU");
  tpuc_hlo_type shape = c->types[0];
  shape.dtype = dt;
  V a, b;
  TRY(op_operand(c, 0, dt, &shape, &a));
  TRY(op_operand(c, 1, dt, &shape, &b));
  c->outs[0] = NOT(e_any(e, NE(a, b)));
  return em_done(e);
}

/* The optional eps argument i of logit: true with its value converted to
 * `dt` when given, NaN counting as absent. */
static bool logit_eps(em* e, int i, tpuc_dtype dt, tpuc_dtype half, V* eps,
                      V* use) {
  op_ctx* c = e->c;
  if (op_is_none(c, i) || !op_is_value(c, i)) return false;
  V v = -1;
  if (e->st == NULL) em_keep(e, op_scalar(c, i, half, NULL, &v));
  v = e_cvt(e, v, dt);
  *eps = v;
  /* eps < 0 or NaN: no clamping */
  *use = GE(v, K(v, 0));
  return true;
}

/* logit(self, eps): log(x / (1 - x)) of x clamped to [eps, 1 - eps] when
 * eps >= 0; per-operation rounding for half floats. */
static tpuc_status* lower_logit(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  tpuc_dtype rt = float_result(c, c->types[0].dtype);
  if (!is_float(rt)) return op_unimpl("complex runs on the CPU");
  tpuc_dtype acc = op_accumulation_dtype(rt);
  em ee = em_of(c), *e = &ee;
  V x = e_cvt(e, e_cvt(e, c->vals[0], rt), acc);
  V eps = -1, use = -1;
  if (logit_eps(e, 1, acc, rt, &eps, &use)) {
    V lo = e_splat(e, eps, x);
    V hi = e_splat(e, e_rnd(e, SUB(K(eps, 1), eps), rt), x);
    V cl = SEL(LT(x, lo), lo, SEL(GT(x, hi), hi, x));
    x = SEL(e_splat(e, use, x), cl, x);
  }
  V one = K(x, 1);
  V q = e_rnd(e, DIV(x, e_rnd(e, SUB(one, x), rt)), rt);
  V r = SEL(EQ(x, one), K(x, INFINITY), LOG(q));
  c->outs[0] = e_cvt(e, r, rt);
  c->nouts = 1;
  return em_done(e);
}

/* logit_backward(grad_output, self, eps): dy / (x (1 - x)); outside
 * [eps, 1 - eps] 0 (NaN outside [0, 1] without eps); dy * inf at 0, 1. */
static tpuc_status* lower_logit_backward(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1))
    return op_unimpl("unexpected arguments");
  int which[2] = {0, 1};
  tpuc_dtype rt;
  TRY(op_result_type(c, which, 2, &rt));
  if (!is_float(rt)) return op_unimpl("non-float logit_backward: CPU");
  tpuc_dtype acc = op_accumulation_dtype(rt);
  tpuc_hlo_type shape;
  TRY(op_broadcast_shape(c, which, 2, &shape));
  shape.dtype = acc;
  V dy, x;
  TRY(op_operand(c, 0, acc, &shape, &dy));
  TRY(op_operand(c, 1, acc, &shape, &x));
  em ee = em_of(c), *e = &ee;
  V zero = K(x, 0), one = K(x, 1);
  V g = e_rnd(e, DIV(dy, e_rnd(e, MUL(x, e_rnd(e, SUB(one, x), rt)), rt)),
              rt);
  V edge = OR(EQ(x, zero), EQ(x, one));
  g = SEL(edge, MUL(dy, K(x, INFINITY)), g);
  V out_nan = SEL(OR(LT(x, zero), GT(x, one)), K(x, NAN), g);
  V eps = -1, use = -1;
  V r = out_nan;
  if (logit_eps(e, 2, acc, rt, &eps, &use)) {
    V lo = e_splat(e, eps, x);
    V hi = e_splat(e, e_rnd(e, SUB(K(eps, 1), eps), rt), x);
    V out0 = SEL(OR(LT(x, lo), GT(x, hi)), zero, g);
    r = SEL(e_splat(e, use, x), out0, out_nan);
  }
  c->outs[0] = e_cvt(e, r, rt);
  c->nouts = 1;
  return em_done(e);
}

/* Integer dtype range as doubles. */
static void int_range(tpuc_dtype dt, double* lo, double* hi) {
  int bits = (int)tpuc_dtype_size(dt) * 8;
  if (tpuc_dtype_is_unsigned_int(dt)) {
    *lo = 0;
    *hi = ldexp(1.0, bits) - 1;
  } else {
    *lo = -ldexp(1.0, bits - 1);
    *hi = ldexp(1.0, bits - 1) - 1;
  }
}

/* Adds a check sending the call to the CPU when scalar argument i does not
 * fit integer dtype dt (the CPU's checked conversion decides). */
static void scalar_fits(em* e, int i, tpuc_dtype dt) {
  op_ctx* c = e->c;
  if (c->args[i].kind != TPUC_OP_ARG_SCALAR) return;
  double lo, hi;
  int_range(dt, &lo, &hi);
  V v = e_cvt(e, c->vals[i], TPUC_DTYPE_F64);
  V bad = OR(LT(v, K(v, lo)), GT(v, K(v, hi)));
  e_check(e, OR(bad, ISNAN(v)), CPU_DECIDES, "scalar out of range");
}

/* threshold(self, threshold, value): x <= threshold ? value : x in self's
 * dtype (the threshold in f32 for half floats). */
static tpuc_status* lower_threshold(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_value(c, 1) || !op_is_value(c, 2))
    return op_unimpl("unexpected arguments");
  tpuc_dtype dt = c->types[0].dtype;
  if (dt == TPUC_DTYPE_PRED || tpuc_dtype_is_complex(dt))
    return op_unimpl("bool/complex: CPU");
  tpuc_dtype acc = op_accumulation_dtype(dt);
  em ee = em_of(c), *e = &ee;
  if (!is_float(dt)) {
    scalar_fits(e, 1, dt);
    scalar_fits(e, 2, dt);
  }
  tpuc_hlo_type shape = c->types[0];
  V th = -1, val = -1;
  if (e->st == NULL) em_keep(e, op_scalar(c, 1, acc, NULL, &th));
  if (e->st == NULL) em_keep(e, op_scalar(c, 2, dt, &shape, &val));
  V x = e_cvt(e, c->vals[0], acc);
  c->outs[0] = SEL(LE(x, e_splat(e, th, x)), val, c->vals[0]);
  c->nouts = 1;
  return em_done(e);
}

/* round.decimals(self, decimals): nearbyint(x * 10^d) / 10^d (d < 0:
 * nearbyint(x / 10^-d) * 10^-d), in f32 for half floats. */
static tpuc_status* lower_round_decimals(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  tpuc_dtype dt = c->types[0].dtype;
  if (!is_float(dt)) return op_unimpl("integer round: the CPU raises");
  int64_t d = 0;
  TRY(op_int_arg(c, 1, 0, &d));
  tpuc_dtype acc = op_accumulation_dtype(dt);
  bool neg = d < 0;
  double p = pow(10.0, (double)(neg ? -d : d));
  if (acc == TPUC_DTYPE_F32) p = (double)(float)p;
  em ee = em_of(c), *e = &ee;
  V x = e_cvt(e, c->vals[0], acc);
  V k = K(x, p), r;
  if (neg)
    r = MUL(e_un(e, TPUC_HLO_ROUND_NEAREST_EVEN, DIV(x, k)), k);
  else
    r = DIV(e_un(e, TPUC_HLO_ROUND_NEAREST_EVEN, MUL(x, k)), k);
  c->outs[0] = e_cvt(e, r, dt);
  c->nouts = 1;
  return em_done(e);
}

/* frexp(self) -> (mantissa, exponent): x = m 2^e with 0.5 <= |m| < 1, from
 * the bits of x (f32 for half floats); 0, inf and NaN give (x, 0). */
static tpuc_status* lower_frexp(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  tpuc_dtype dt = c->types[0].dtype;
  if (!is_float(dt)) return op_unimpl("integer frexp: the CPU raises");
  tpuc_dtype acc = op_accumulation_dtype(dt);
  bool d64 = acc == TPUC_DTYPE_F64;
  tpuc_dtype it = d64 ? TPUC_DTYPE_S64 : TPUC_DTYPE_S32;
  int mbits = d64 ? 52 : 23, bias = d64 ? 1022 : 126;
  double emask = d64 ? 2047 : 255;
  em ee = em_of(c), *e = &ee;
  V x = e_cvt(e, c->vals[0], acc);
  V bits = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_bitcast_convert(e->fn, x, it, &bits));
  int width = d64 ? 64 : 32;
  double fmask = ldexp(1.0, mbits) - 1;
  V field = e_bin(e, TPUC_HLO_AND,
                  e_bin(e, TPUC_HLO_SHIFT_RIGHT_LOGICAL, bits,
                        K(bits, mbits)),
                  K(bits, emask));
  V frac = e_bin(e, TPUC_HLO_AND, bits, K(bits, fmask));
  V sign = e_bin(e, TPUC_HLO_AND, bits, K(bits, -ldexp(1.0, width - 1)));
  /* normal: e = field - bias; subnormal (field 0; the device flushes them
   * in arithmetic, so from the bits): the leading fraction bit p gives
   * e = p - (mbits + bias - 1), and the fraction shifts up to it */
  V sub = EQ(field, K(field, 0));
  V p = SUB(K(frac, width - 1), e_un(e, TPUC_HLO_CLZ, frac));
  V ex = SEL(sub, SUB(p, K(p, mbits + bias - 1)), SUB(field, K(field, bias)));
  V shifted = e_bin(e, TPUC_HLO_SHIFT_LEFT, frac, SUB(K(p, mbits), p));
  frac = SEL(sub, e_bin(e, TPUC_HLO_AND, shifted, K(shifted, fmask)), frac);
  /* mantissa: sign, fraction, and the exponent field of [0.5, 1) */
  V mb = e_bin(e, TPUC_HLO_OR, e_bin(e, TPUC_HLO_OR, sign, frac),
               K(frac, ldexp((double)bias, mbits)));
  V m = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_bitcast_convert(e->fn, mb, acc, &m));
  V special = OR(EQ(x, K(x, 0)), NOT(e_un(e, TPUC_HLO_IS_FINITE, x)));
  m = SEL(special, x, m);
  ex = SEL(special, K(ex, 0), ex);
  c->outs[0] = e_cvt(e, m, dt);
  c->outs[1] = e_cvt(e, ex, TPUC_DTYPE_S32);
  c->nouts = 2;
  return em_done(e);
}

/* special_xlog1py(self, other): x log1p(y); 0 where x == 0, NaN where y is
 * NaN; computed in f32 for half floats and rounded once. */
static tpuc_status* lower_xlog1py(op_ctx* c, int param) {
  (void)param;
  if (!op_is_value(c, 0) || !op_is_value(c, 1) ||
      (!op_is_tensor(c, 0) && !op_is_tensor(c, 1)))
    return op_unimpl("unexpected arguments");
  int which[2] = {0, 1};
  tpuc_dtype rt;
  TRY(op_result_type(c, which, 2, &rt));
  rt = float_result(c, rt);
  if (!is_float(rt)) return op_unimpl("complex runs on the CPU");
  tpuc_dtype acc = op_accumulation_dtype(rt);
  tpuc_hlo_type shape;
  TRY(op_broadcast_shape(c, which, 2, &shape));
  shape.dtype = rt;
  V x, y;
  TRY(op_operand(c, 0, rt, &shape, &x));
  TRY(op_operand(c, 1, rt, &shape, &y));
  em ee = em_of(c), *e = &ee;
  x = e_cvt(e, x, acc);
  y = e_cvt(e, y, acc);
  V r = SEL(EQ(x, K(x, 0)), K(x, 0), MUL(x, LOG1P(y)));
  r = SEL(ISNAN(y), K(y, NAN), r);
  c->outs[0] = e_cvt(e, r, rt);
  c->nouts = 1;
  return em_done(e);
}

/* ----------------------------- take and put ----------------------------- */

/* A scatter/reduce body over rank-0 `dt`: `op`, or replace (op < 0), or a
 * max/min that keeps NaN (nan_minmax). */
static tpuc_hlo_fn* e_body(em* e, tpuc_dtype dt, int op, bool nan_minmax) {
  tpuc_hlo_type two[2] = {tpuc_hlo_type_scalar(dt), tpuc_hlo_type_scalar(dt)};
  tpuc_hlo_fn* b = NULL;
  if (e->st != NULL ||
      !em_keep(e, tpuc_hlo_region_create(e->c->module, two, 2, &b)))
    return NULL;
  em be = {e->c, b, NULL};
  V x = -1, y = -1, r;
  em_keep(&be, tpuc_hlo_get_arg(b, 0, &x));
  em_keep(&be, tpuc_hlo_get_arg(b, 1, &y));
  if (op < 0) {
    r = y;
  } else {
    r = e_bin(&be, (tpuc_hlo_binary_op)op, x, y);
    if (nan_minmax && is_float(dt)) {
      em* e = &be;
      r = SEL(ISNAN(x), x, SEL(ISNAN(y), y, r));
    }
  }
  if (be.st == NULL) em_keep(&be, tpuc_hlo_return(b, &r, 1));
  em_keep(e, be.st);
  return b;
}

/* flat[idx] for rank-1 flat and s64 idx [m]. */
static V e_take1(em* e, V flat, V idx) {
  tpuc_hlo_type it = e_type(e, idx);
  int64_t m = it.rank == 1 ? it.dims[0] : 1, two[2] = {m, 1};
  V ix = -1, r = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_reshape(e->fn, idx, two, 2, &ix));
  if (e->st == NULL) em_keep(e, op_gather_elements(e->fn, flat, ix, &r));
  return r;
}

/* flat with upd [m] scattered at s64 idx [m] (op < 0: replace). */
static V e_put1(em* e, V flat, V idx, V upd, int op) {
  tpuc_hlo_type it = e_type(e, idx);
  int64_t two[2] = {it.dims[0], 1}, zero = 0;
  V ix = -1, r = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_reshape(e->fn, idx, two, 2, &ix));
  tpuc_hlo_scatter_dims s;
  memset(&s, 0, sizeof s);
  s.inserted_window_dims = &zero;
  s.num_inserted_window_dims = 1;
  s.scatter_dims_to_operand_dims = &zero;
  s.num_scatter_dims_to_operand_dims = 1;
  s.index_vector_dim = 1;
  tpuc_hlo_fn* body = e_body(e, e_type(e, flat).dtype, op, false);
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_scatter(e->fn, &flat, 1, ix, &upd, &s, body, &r));
  return r;
}

static V e_reshape(em* e, V x, const int64_t* dims, int rank) {
  V r = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_reshape(e->fn, x, dims, rank, &r));
  return r;
}

/* Index tensor argument i flattened to s64 [m], wrapped into [0, n); an
 * index outside [-n, n) sends the call to the CPU (it names the index). */
static V e_flat_index(em* e, int i, int64_t n) {
  op_ctx* c = e->c;
  int64_t m = tpuc_hlo_type_num_elements(&c->types[i]);
  V x = e_reshape(e, e_cvt(e, c->vals[i], TPUC_DTYPE_S64), &m, 1);
  V nk = K(x, (double)n);
  V bad = OR(LT(x, NEG(nk)), GE(x, nk));
  e_check(e, e_any(e, bad), CPU_DECIDES, "index out of range");
  return SEL(LT(x, K(x, 0)), ADD(x, nk), x);
}

/* take(self, index): self.flatten()[index], index's shape. */
static tpuc_status* lower_take(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1))
    return op_unimpl("unexpected arguments");
  if (c->types[1].dtype != TPUC_DTYPE_S64)
    return op_unimpl("take needs int64 indices: the CPU raises");
  const tpuc_hlo_type st = c->types[0], it = c->types[1];
  int64_t n = tpuc_hlo_type_num_elements(&st);
  int64_t m = tpuc_hlo_type_num_elements(&it);
  em ee = em_of(c), *e = &ee;
  c->nouts = 1;
  tpuc_hlo_type rt = it;
  rt.dtype = st.dtype;
  if (m == 0) {
    return op_const(c, st.dtype, 0, &rt, &c->outs[0]);
  }
  if (n == 0) return op_unimpl("take from an empty tensor: the CPU raises");
  V flat = e_reshape(e, c->vals[0], &n, 1);
  V idx = e_flat_index(e, 1, n);
  c->outs[0] = e_reshape(e, e_take1(e, flat, idx), it.dims, it.rank);
  return em_done(e);
}

/* put(self, index, source, accumulate) / put_: self.flatten()[index] =
 * source (+= when accumulating); duplicate indices without accumulate run
 * on the CPU (its last write wins). */
static tpuc_status* lower_put(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1) || !op_is_tensor(c, 2))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type st = c->types[0];
  if (c->types[1].dtype != TPUC_DTYPE_S64 || c->types[2].dtype != st.dtype)
    return op_unimpl("index/source dtype: the CPU raises");
  int64_t accumulate = 0;
  TRY(op_int_arg(c, 3, 0, &accumulate));
  int64_t n = tpuc_hlo_type_num_elements(&st);
  int64_t m = tpuc_hlo_type_num_elements(&c->types[1]);
  if (m != tpuc_hlo_type_num_elements(&c->types[2]))
    return op_unimpl("index and source sizes differ: the CPU raises");
  em ee = em_of(c), *e = &ee;
  c->nouts = 1;
  if (m == 0) {
    c->outs[0] = c->vals[0];
    return NULL;
  }
  if (n == 0) return op_unimpl("put into an empty tensor: the CPU raises");
  if (accumulate && st.dtype == TPUC_DTYPE_PRED)
    return op_unimpl("bool accumulate: CPU");
  V flat = e_reshape(e, c->vals[0], &n, 1);
  V idx = e_flat_index(e, 1, n);
  V src = e_reshape(e, c->vals[2], &m, 1);
  if (!accumulate) {
    V ones = e_kd(e, TPUC_DTYPE_S32, 1, idx);
    V zeros = e_kd(e, TPUC_DTYPE_S32, 0, e_cvt(e, flat, TPUC_DTYPE_S32));
    V cnt = e_put1(e, zeros, idx, ones, TPUC_HLO_ADD);
    e_check(e, e_any(e, GT(cnt, K(cnt, 1))), CPU_DECIDES,
            "duplicate indices");
  }
  /* (half floats add in their type one update at a time, as the CPU) */
  V r = e_put1(e, flat, idx, src, accumulate ? TPUC_HLO_ADD : -1);
  c->outs[0] = e_reshape(e, r, st.dims, st.rank);
  return em_done(e);
}

/* ------------------------------ shape-ish ops ---------------------------- */

/* A slice of x along dim: [k, k + 1). */
static V e_slice1(em* e, V x, int64_t dim, int64_t k) {
  tpuc_hlo_type t = e_type(e, x);
  int64_t lo[TPUC_MAX_RANK] = {0}, hi[TPUC_MAX_RANK];
  for (int d = 0; d < t.rank; d++) hi[d] = t.dims[d];
  lo[dim] = k;
  hi[dim] = k + 1;
  V r = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_slice(e->fn, x, lo, hi, NULL, &r));
  return r;
}

/* linalg_cross(self, other, dim): the cross product of 3-vectors along
 * dim, after broadcasting. The CPU rounds each product of half floats;
 * the device may keep them in f32 (excess precision), which float16's
 * tolerance does not absorb: float16 runs on the CPU. */
static tpuc_status* lower_cross(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1))
    return op_unimpl("unexpected arguments");
  tpuc_dtype dt = c->types[0].dtype;
  if (c->types[1].dtype != dt) return op_unimpl("dtypes differ: CPU raises");
  if (dt == TPUC_DTYPE_PRED || tpuc_dtype_is_complex(dt))
    return op_unimpl("bool/complex: CPU");
  int which[2] = {0, 1};
  tpuc_hlo_type shape;
  TRY(op_broadcast_shape(c, which, 2, &shape));
  if (c->types[0].rank != c->types[1].rank)
    return op_unimpl("ranks differ: CPU raises");
  int64_t d0 = -1, dim = 0;
  TRY(op_int_arg(c, 2, -1, &d0));
  if (shape.rank == 0) return op_unimpl("0-d: CPU raises");
  tpuc_status* st = op_wrap_dim(shape.rank, d0, &dim);
  if (st != NULL) {
    tpuc_status_free(st);
    return op_unimpl("bad dim: CPU raises");
  }
  if (c->types[0].dims[dim] != 3 || c->types[1].dims[dim] != 3)
    return op_unimpl("not 3-vectors: CPU raises");
  if (dt == TPUC_DTYPE_F16) return op_unimpl("float16 cross: CPU");
  tpuc_dtype acc = op_accumulation_dtype(dt);
  shape.dtype = dt;
  V a, b;
  TRY(op_operand(c, 0, dt, &shape, &a));
  TRY(op_operand(c, 1, dt, &shape, &b));
  em ee = em_of(c), *e = &ee;
  a = e_cvt(e, a, acc);
  b = e_cvt(e, b, acc);
  V av[3], bv[3], r[3];
  for (int k = 0; k < 3; k++) {
    av[k] = e_slice1(e, a, dim, k);
    bv[k] = e_slice1(e, b, dim, k);
  }
  for (int k = 0; k < 3; k++) {
    int i = (k + 1) % 3, j = (k + 2) % 3;
    V p = e_rnd(e, MUL(av[i], bv[j]), dt), q = e_rnd(e, MUL(av[j], bv[i]), dt);
    r[k] = SUB(p, q);
  }
  V out = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_concatenate(e->fn, r, 3, dim, &out));
  c->outs[0] = e_cvt(e, out, dt);
  c->nouts = 1;
  return em_done(e);
}

/* channel_shuffle(self, groups): [N, C, *] viewed as [N, g, C/g, *],
 * the two group dims swapped. */
static tpuc_status* lower_channel_shuffle(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type t = c->types[0];
  int64_t g = 0;
  TRY(op_int_arg(c, 1, 0, &g));
  if (t.rank < 3 || t.rank + 1 > TPUC_MAX_RANK || g <= 0 ||
      t.dims[1] % g != 0)
    return op_unimpl("bad arguments: the CPU raises");
  em ee = em_of(c), *e = &ee;
  int64_t dims[TPUC_MAX_RANK], perm[TPUC_MAX_RANK];
  dims[0] = t.dims[0];
  dims[1] = g;
  dims[2] = t.dims[1] / g;
  for (int d = 2; d < t.rank; d++) dims[d + 1] = t.dims[d];
  for (int d = 0; d <= t.rank; d++) perm[d] = d;
  perm[1] = 2;
  perm[2] = 1;
  V x = e_reshape(e, c->vals[0], dims, t.rank + 1), y = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_transpose(e->fn, x, perm, &y));
  c->outs[0] = e_reshape(e, y, t.dims, t.rank);
  c->nouts = 1;
  return em_done(e);
}

/* ------------------------------ cummax / cummin -------------------------- */

/* _cummax_helper(self, values, indices, dim) (and cummin): the running
 * max (min) with the index of its last occurrence; the first NaN sticks.
 * A log-step scan over (value, index) pairs. */
static tpuc_status* lower_cumext(op_ctx* c, int is_max) {
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1) || !op_is_tensor(c, 2))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type t = c->types[0];
  if (tpuc_dtype_is_complex(t.dtype)) return op_unimpl("complex: CPU");
  if (!tpuc_hlo_type_equal(&c->types[1], &t) ||
      c->types[2].dtype != TPUC_DTYPE_S64)
    return op_unimpl("unexpected outputs");
  int64_t d0 = 0, dim = 0;
  TRY(op_int_arg(c, 3, 0, &d0));
  TRY(op_wrap_dim(t.rank, d0, &dim));
  em ee = em_of(c), *e = &ee;
  c->nouts = 2;
  if (t.rank == 0) {
    c->outs[0] = c->vals[0];
    c->outs[1] = e_k0(e, TPUC_DTYPE_S64, 0);
    return em_done(e);
  }
  tpuc_dtype acc = t.dtype == TPUC_DTYPE_PRED ? TPUC_DTYPE_U8 : t.dtype;
  V v = e_cvt(e, c->vals[0], acc);
  tpuc_hlo_type it = t;
  it.dtype = TPUC_DTYPE_S64;
  V ix = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_iota(e->fn, &it, dim, &ix));
  V vpad;
  if (is_float(acc)) {
    vpad = e_k0(e, acc, is_max ? -INFINITY : INFINITY);
  } else if (acc == TPUC_DTYPE_S64) {
    vpad = -1;
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_constant_i64(e->fn, acc,
                                       is_max ? INT64_MIN : INT64_MAX, &vpad));
  } else if (acc == TPUC_DTYPE_U64) {
    return op_unimpl("uint64: CPU");
  } else {
    double lo, hi;
    int_range(acc, &lo, &hi);
    vpad = e_k0(e, acc, is_max ? lo : hi);
  }
  V ipad = e_k0(e, TPUC_DTYPE_S64, -1);
  int64_t n = t.dims[dim];
  for (int64_t s = 1; s < n && e->st == NULL; s *= 2) {
    int64_t plo[TPUC_MAX_RANK] = {0}, phi[TPUC_MAX_RANK] = {0};
    plo[dim] = s;
    phi[dim] = -s;
    V pv = -1, pi = -1;
    em_keep(e, tpuc_hlo_pad(e->fn, v, vpad, plo, phi, NULL, &pv));
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_pad(e->fn, ix, ipad, plo, phi, NULL, &pi));
    /* the earlier pair (pv, pi) against the later (v, ix) */
    V later = is_max ? GE(v, pv) : LE(v, pv);
    if (is_float(acc)) {
      V en = ISNAN(pv);
      later = AND(NOT(en), OR(ISNAN(v), later));
    }
    v = SEL(later, v, pv);
    ix = SEL(later, ix, pi);
  }
  c->outs[0] = e_cvt(e, v, t.dtype);
  c->outs[1] = ix;
  return em_done(e);
}

/* ------------------------ kthvalue, median, nanmedian ------------------- */

/* x with `dim` moved last and flattened to [b, n] (b the product of the
 * other dims, in order). */
static V e_rows(em* e, V x, int64_t dim, int64_t* b, int64_t* n) {
  tpuc_hlo_type t = e_type(e, x);
  if (e->st != NULL) return -1;
  int64_t perm[TPUC_MAX_RANK];
  int k = 0;
  *b = 1;
  for (int d = 0; d < t.rank; d++)
    if (d != dim) {
      perm[k++] = d;
      *b *= t.dims[d];
    }
  *n = t.rank == 0 ? 1 : t.dims[dim];
  if (t.rank == 0) {
    int64_t one[2] = {1, 1};
    return e_reshape(e, x, one, 2);
  }
  perm[k] = dim;
  V y = -1;
  em_keep(e, tpuc_hlo_transpose(e->fn, x, perm, &y));
  int64_t two[2] = {*b, *n};
  return e_reshape(e, y, two, 2);
}

/* Stable ascending sort of rows [b, n] along dim 1 with their s64 column
 * indices; NaN sorts last, as on the CPU. */
static void e_sort_rows(em* e, V x, V* vals, V* idx) {
  tpuc_hlo_type t = e_type(e, x);
  if (e->st != NULL) return;
  tpuc_hlo_type it = t;
  it.dtype = TPUC_DTYPE_S64;
  V io = -1;
  em_keep(e, tpuc_hlo_iota(e->fn, &it, 1, &io));
  tpuc_hlo_type st[4] = {
      tpuc_hlo_type_scalar(t.dtype), tpuc_hlo_type_scalar(t.dtype),
      tpuc_hlo_type_scalar(TPUC_DTYPE_S64),
      tpuc_hlo_type_scalar(TPUC_DTYPE_S64)};
  tpuc_hlo_fn* cmp = NULL;
  if (!em_keep(e, tpuc_hlo_region_create(e->c->module, st, 4, &cmp))) return;
  {
    em be = {e->c, cmp, NULL}, *e2 = &be;
    V a = -1, b = -1;
    em_keep(e2, tpuc_hlo_get_arg(cmp, 0, &a));
    em_keep(e2, tpuc_hlo_get_arg(cmp, 1, &b));
    {
      em* e = e2;
      V r = LT(a, b);
      if (is_float(t.dtype)) r = OR(r, AND(NOT(ISNAN(a)), ISNAN(b)));
      if (e->st == NULL) em_keep(e, tpuc_hlo_return(cmp, &r, 1));
    }
    if (!em_keep(e, be.st)) return;
  }
  V ins[2] = {x, io}, outs[2] = {-1, -1};
  em_keep(e, tpuc_hlo_sort(e->fn, ins, 2, 1, true, cmp, outs));
  *vals = outs[0];
  *idx = outs[1];
}

/* Row r's element at column pos[r] of x [b, n] (pos s64 [b]). */
static V e_pick(em* e, V x, V pos) {
  tpuc_hlo_type t = e_type(e, pos);
  if (e->st != NULL) return -1;
  int64_t b = t.dims[0], col[2] = {b, 1};
  tpuc_hlo_type rt = tpuc_hlo_type_make(TPUC_DTYPE_S64, col, 2);
  V rows = -1, ix = -1, r = -1;
  em_keep(e, tpuc_hlo_iota(e->fn, &rt, 0, &rows));
  V cols = e_reshape(e, pos, col, 2);
  V both[2] = {rows, cols};
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_concatenate(e->fn, both, 2, 1, &ix));
  int64_t dims[2] = {0, 1}, ones[2] = {1, 1};
  tpuc_hlo_gather_dims g;
  memset(&g, 0, sizeof g);
  g.collapsed_slice_dims = dims;
  g.num_collapsed_slice_dims = 2;
  g.start_index_map = dims;
  g.num_start_index_map = 2;
  g.index_vector_dim = 1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_gather(e->fn, x, ix, &g, ones, false, &r));
  return r;
}

/* Sum over dim 1 of s64 [b, n]. */
static V e_rowsum(em* e, V x) {
  int64_t one = 1;
  V init = e_k0(e, TPUC_DTYPE_S64, 0), r = -1;
  tpuc_hlo_fn* body = NULL;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_region_binary(e->c->module, TPUC_DTYPE_S64,
                                      TPUC_HLO_ADD, &body));
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_reduce(e->fn, &x, &init, 1, &one, 1, body, &r));
  return r;
}

enum { KV_KTH = 1, KV_MEDIAN, KV_NANMEDIAN, KV_MEDIAN_ALL, KV_NANMEDIAN_ALL };

/* kthvalue(self, k, dim, keepdim), median / nanmedian (.dim and whole):
 * a stable sort of each slice. The CPU's index among equal values is its
 * selection algorithm's: a slice whose chosen value occurs twice runs on
 * the CPU, as does an all-NaN slice of nanmedian.dim; median's NaN is
 * the slice's first NaN, nanmedian's middle element ignores NaNs. */
static tpuc_status* lower_kth(op_ctx* c, int which) {
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type t = c->types[0];
  if (t.dtype == TPUC_DTYPE_PRED || tpuc_dtype_is_complex(t.dtype))
    return op_unimpl("bool/complex: CPU");
  bool all = which == KV_MEDIAN_ALL || which == KV_NANMEDIAN_ALL;
  bool nan = which == KV_NANMEDIAN || which == KV_NANMEDIAN_ALL;
  int64_t k = 0, d0 = 0, keep = 0, dim = 0;
  int di = which == KV_KTH ? 2 : 1;
  if (which == KV_KTH) TRY(op_int_arg(c, 1, 0, &k));
  if (!all) {
    TRY(op_int_arg(c, di, -1, &d0));
    TRY(op_int_arg(c, di + 1, 0, &keep));
    tpuc_status* st = op_wrap_dim(t.rank, d0, &dim);
    if (st != NULL) {
      tpuc_status_free(st);
      return op_unimpl("bad dim: CPU raises");
    }
  }
  int64_t total = tpuc_hlo_type_num_elements(&t);
  if (total == 0) return op_unimpl("empty: CPU");
  em ee = em_of(c), *e = &ee;
  int64_t b = 1, n = total;
  V x;
  if (all) {
    int64_t two[2] = {1, total};
    x = e_reshape(e, c->vals[0], two, 2);
  } else {
    x = e_rows(e, c->vals[0], dim, &b, &n);
  }
  if (which == KV_KTH && (k < 1 || k > n))
    return op_unimpl("k out of range: CPU raises");
  V sv = -1, si = -1;
  e_sort_rows(e, x, &sv, &si);
  bool fl = is_float(t.dtype);
  int64_t col[1] = {b};
  V pos, cnt = -1;
  V zero_b = -1;
  if (e->st == NULL) {
    tpuc_hlo_type bt = tpuc_hlo_type_make(TPUC_DTYPE_S64, col, 1);
    em_keep(e, op_const(c, TPUC_DTYPE_S64, 0, &bt, &zero_b));
  }
  if (which == KV_KTH) {
    pos = K(zero_b, (double)(k - 1));
  } else if (nan && fl) {
    cnt = e_rowsum(e, e_cvt(e, NOT(ISNAN(x)), TPUC_DTYPE_S64));
    V p = DIV(SUB(cnt, K(cnt, 1)), K(cnt, 2));
    V none = EQ(cnt, K(cnt, 0));
    pos = SEL(none, K(cnt, 0), p);
    /* an all-NaN slice: the CPU's index of its NaN */
    if (!all)
      e_check(e, e_any(e, none), CPU_DECIDES, "all-NaN slice: CPU decides");
  } else {
    pos = K(zero_b, (double)((n - 1) / 2));
  }
  V v = e_pick(e, sv, pos), ix = e_pick(e, si, pos);
  if (fl && (which == KV_MEDIAN || which == KV_MEDIAN_ALL)) {
    /* any NaN: the first NaN (and its index) */
    V isn = ISNAN(x);
    V io = -1;
    tpuc_hlo_type it = e_type(e, x);
    it.dtype = TPUC_DTYPE_S64;
    if (e->st == NULL) em_keep(e, tpuc_hlo_iota(e->fn, &it, 1, &io));
    V big = K(io, (double)n);
    V cand = SEL(isn, io, big);
    V first = -1, init = e_k0(e, TPUC_DTYPE_S64, (double)n);
    int64_t one = 1;
    tpuc_hlo_fn* body = NULL;
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_region_binary(c->module, TPUC_DTYPE_S64,
                                        TPUC_HLO_MIN, &body));
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_reduce(e->fn, &cand, &init, 1, &one, 1, body,
                                 &first));
    V has = LT(first, K(first, (double)n));
    v = SEL(has, K(v, NAN), v);
    ix = SEL(has, first, ix);
  }
  if (!all) {
    /* ties: the CPU's choice of index */
    int64_t bn[2] = {b, n}, map[1] = {0};
    V vb = -1;
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_broadcast_in_dim(e->fn, v, bn, 2, map, &vb));
    V same = EQ(x, vb);
    V dup = GT(e_rowsum(e, e_cvt(e, same, TPUC_DTYPE_S64)), K(pos, 1));
    e_check(e, e_any(e, dup), CPU_DECIDES, "tied values: the CPU decides");
  }
  /* result shape */
  int64_t dims[TPUC_MAX_RANK];
  int rank = 0;
  if (!all) {
    for (int d = 0; d < t.rank; d++) {
      if (d == dim) {
        if (keep) dims[rank++] = 1;
      } else {
        dims[rank++] = t.dims[d];
      }
    }
  }
  c->outs[0] = e_reshape(e, v, dims, rank);
  c->nouts = 1;
  if (!all) {
    c->outs[1] = e_reshape(e, ix, dims, rank);
    c->nouts = 2;
  }
  return em_done(e);
}

/* --------------------------------- renorm -------------------------------- */

/* Reduction of x over every dim but `keep` with `op` from `init`,
 * broadcast back to x's shape. */
static V e_reduce_but(em* e, V x, int64_t keep, tpuc_hlo_binary_op op,
                      double init, bool nan_minmax) {
  tpuc_hlo_type t = e_type(e, x);
  if (e->st != NULL) return -1;
  int64_t dims[TPUC_MAX_RANK];
  size_t nd = 0;
  for (int d = 0; d < t.rank; d++)
    if (d != keep) dims[nd++] = d;
  tpuc_hlo_fn* body = e_body(e, t.dtype, op, nan_minmax);
  V i0 = e_k0(e, t.dtype, init), r = -1, out = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_reduce(e->fn, &x, &i0, 1, dims, nd, body, &r));
  int64_t map[1] = {keep};
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_broadcast_in_dim(e->fn, r, t.dims, t.rank, map,
                                         &out));
  return out;
}

/* renorm(self, p, dim, maxnorm): each slice along dim whose p-norm
 * exceeds maxnorm is scaled by maxnorm / (norm + 1e-7); the factor is
 * rounded to self's dtype before the product, as on the CPU. */
static tpuc_status* lower_renorm(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_value(c, 1) || !op_is_value(c, 3))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type t = c->types[0];
  if (!is_float(t.dtype)) return op_unimpl("non-float renorm: CPU raises");
  int64_t d0 = 0, dim = 0;
  TRY(op_int_arg(c, 2, 0, &d0));
  if (t.rank == 0) return op_unimpl("0-d renorm: CPU");
  tpuc_status* st = op_wrap_dim(t.rank, d0, &dim);
  if (st != NULL) {
    tpuc_status_free(st);
    return op_unimpl("bad dim: CPU raises");
  }
  tpuc_dtype acc = op_accumulation_dtype(t.dtype);
  em ee = em_of(c), *e = &ee;
  V p = -1, mx = -1;
  if (e->st == NULL) em_keep(e, op_scalar(c, 1, acc, NULL, &p));
  if (e->st == NULL) em_keep(e, op_scalar(c, 3, acc, NULL, &mx));
  /* p <= 0 or maxnorm < 0: the CPU raises */
  e_check(e, OR(OR(LE(p, K(p, 0)), LT(mx, K(mx, 0))), ISNAN(p)), CPU_DECIDES,
          "renorm arguments");
  V x = e_cvt(e, c->vals[0], acc);
  V a = ABS(x);
  V pb = e_splat(e, p, a);
  V sum = e_reduce_but(e, POW(a, pb), dim, TPUC_HLO_ADD, 0, false);
  V norm = POW(sum, DIV(K(sum, 1), e_splat(e, p, sum)));
  V two = EQ(pb, K(pb, 2)), one = EQ(pb, K(pb, 1));
  V s2 = e_reduce_but(e, MUL(a, a), dim, TPUC_HLO_ADD, 0, false);
  V s1 = e_reduce_but(e, a, dim, TPUC_HLO_ADD, 0, false);
  V inf = e_reduce_but(e, a, dim, TPUC_HLO_MAX, 0, true);
  norm = SEL(two, SQRT(s2), SEL(one, s1, norm));
  norm = SEL(EQ(pb, K(pb, INFINITY)), inf, norm);
  V mxb = e_splat(e, mx, norm);
  V f = SEL(GT(norm, mxb), DIV(mxb, ADD(norm, K(norm, 1e-7))), K(norm, 1));
  f = e_cvt(e, e_cvt(e, f, t.dtype), acc);
  c->outs[0] = e_cvt(e, MUL(x, f), t.dtype);
  c->nouts = 1;
  return em_done(e);
}

/* ------------------------------ nonzero_static --------------------------- */

/* nonzero_static(self, size, fill_value): the first `size` nonzero
 * coordinates in row-major order, [size, rank] int64, padded with
 * fill_value: a stable sort of the flat positions by "is zero". */
static tpuc_status* lower_nonzero_static(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type t = c->types[0];
  if (tpuc_dtype_is_complex(t.dtype)) return op_unimpl("complex: CPU");
  int64_t size = 0, fill = -1;
  TRY(op_int_arg(c, 1, -1, &size));
  TRY(op_int_arg(c, 2, -1, &fill));
  if (size < 0) return op_unimpl("negative size: the CPU raises");
  int64_t n = tpuc_hlo_type_num_elements(&t), rank = t.rank;
  int64_t rdims[2] = {size, rank};
  tpuc_hlo_type rt = tpuc_hlo_type_make(TPUC_DTYPE_S64, rdims, 2);
  c->nouts = 1;
  if (size == 0 || rank == 0 || n == 0) {
    return op_const(c, TPUC_DTYPE_S64, (double)fill, &rt, &c->outs[0]);
  }
  em ee = em_of(c), *e = &ee;
  V x = e_reshape(e, c->vals[0], &n, 1);
  V nz = NE(x, K(x, 0));
  /* sort key: 0 for nonzero, 1 for zero */
  V key = e_cvt(e, NOT(nz), TPUC_DTYPE_S32);
  V cnt = -1;
  {
    V ci = e_cvt(e, nz, TPUC_DTYPE_S64), init = e_k0(e, TPUC_DTYPE_S64, 0);
    int64_t zero = 0;
    tpuc_hlo_fn* body = e_body(e, TPUC_DTYPE_S64, TPUC_HLO_ADD, false);
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_reduce(e->fn, &ci, &init, 1, &zero, 1, body, &cnt));
  }
  tpuc_hlo_type it = tpuc_hlo_type_make(TPUC_DTYPE_S64, &n, 1);
  V io = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_iota(e->fn, &it, 0, &io));
  tpuc_dtype kd[2] = {TPUC_DTYPE_S32, TPUC_DTYPE_S64};
  tpuc_hlo_fn* cmp = NULL;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_region_compare(c->module, kd, 2, TPUC_HLO_LT, &cmp));
  V ins[2] = {key, io}, so[2] = {-1, -1};
  if (e->st == NULL) em_keep(e, tpuc_hlo_sort(e->fn, ins, 2, 0, true, cmp, so));
  V pos = so[1];
  /* the first min(size, n) positions, padded to size */
  int64_t m = size < n ? size : n;
  if (e->st == NULL) {
    int64_t lo = 0, hi = m;
    V r = -1;
    em_keep(e, tpuc_hlo_slice(e->fn, pos, &lo, &hi, NULL, &r));
    pos = r;
  }
  if (size > n && e->st == NULL) {
    int64_t lo = 0, hi = size - n;
    V r = -1;
    em_keep(e, tpuc_hlo_pad(e->fn, pos, e_k0(e, TPUC_DTYPE_S64, 0), &lo, &hi,
                            NULL, &r));
    pos = r;
  }
  V rows = -1;
  tpuc_hlo_type st1 = tpuc_hlo_type_make(TPUC_DTYPE_S64, &size, 1);
  if (e->st == NULL) em_keep(e, tpuc_hlo_iota(e->fn, &st1, 0, &rows));
  V valid = LT(rows, e_splat(e, cnt, rows));
  V cols[TPUC_MAX_RANK];
  int64_t stride = 1, col[2] = {size, 1};
  for (int d = (int)rank - 1; d >= 0; d--) {
    V q = DIV(pos, K(pos, (double)stride));
    V cd = e_bin(e, TPUC_HLO_REM, q, K(q, (double)t.dims[d]));
    cd = SEL(valid, cd, K(cd, (double)fill));
    cols[d] = e_reshape(e, cd, col, 2);
    stride *= t.dims[d];
  }
  V r = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_concatenate(e->fn, cols, (size_t)rank, 1, &r));
  c->outs[0] = r;
  return em_done(e);
}

/* ------------------------------ index_reduce ----------------------------- */

/* index_reduce(self, dim, index, source, reduce, include_self): reduces
 * source's slices into self's at index along dim with prod, mean, amax or
 * amin (NaN propagates); include_self=False first resets the indexed
 * slices to the identity; mean divides by the count (floor division for
 * integers). */
static tpuc_status* lower_index_reduce(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 2) || !op_is_tensor(c, 3))
    return op_unimpl("unexpected arguments");
  tpuc_hlo_type st = c->types[0], it = c->types[2], srt = c->types[3];
  const tpuc_hlo_type st0 = st;
  tpuc_dtype dt = st.dtype;
  if (st.rank == 0 && srt.rank == 0) {
    /* 0-d self and source: as 1-D of one element */
    st.rank = srt.rank = 1;
    st.dims[0] = srt.dims[0] = 1;
  }
  if (dt == TPUC_DTYPE_PRED || tpuc_dtype_is_complex(dt) ||
      srt.dtype != dt || it.dtype != TPUC_DTYPE_S64 || it.rank > 1 ||
      st.rank == 0 || srt.rank != st.rank || dt == TPUC_DTYPE_U64)
    return op_unimpl("arguments the CPU refuses or rare");
  int64_t d0 = 0, dim = 0, incl = 1;
  TRY(op_int_arg(c, 1, 0, &d0));
  TRY(op_int_arg(c, 5, 1, &incl));
  tpuc_status* s0 = op_wrap_dim(st.rank, d0, &dim);
  if (s0 != NULL) {
    tpuc_status_free(s0);
    return op_unimpl("bad dim: CPU raises");
  }
  const char* red = op_str_arg(c, 4, "");
  int op;
  double ident;
  bool mean = false;
  double lo = -INFINITY, hi = INFINITY;
  if (!is_float(dt)) int_range(dt, &lo, &hi);
  if (strcmp(red, "prod") == 0) {
    op = TPUC_HLO_MUL;
    ident = 1;
  } else if (strcmp(red, "mean") == 0) {
    op = TPUC_HLO_ADD;
    ident = 0;
    mean = true;
  } else if (strcmp(red, "amax") == 0) {
    op = TPUC_HLO_MAX;
    ident = lo;
  } else if (strcmp(red, "amin") == 0) {
    op = TPUC_HLO_MIN;
    ident = hi;
  } else {
    return op_unimpl("unknown reduce: the CPU raises");
  }
  int64_t m = tpuc_hlo_type_num_elements(&it);
  for (int d = 0; d < st.rank; d++)
    if (d != dim && srt.dims[d] != st.dims[d])
      return op_unimpl("shapes differ: the CPU raises");
  if (srt.dims[dim] != m) return op_unimpl("sizes differ: the CPU raises");
  em ee = em_of(c), *e = &ee;
  c->nouts = 1;
  if (m == 0) {
    c->outs[0] = c->vals[0];
    return NULL;
  }
  V idx = e_reshape(e, c->vals[2], &m, 1);
  V bad = OR(LT(idx, K(idx, 0)), GE(idx, K(idx, (double)st.dims[dim])));
  e_check(e, e_any(e, bad), CPU_DECIDES, "index out of range");
  int64_t two[2] = {m, 1};
  V ix = e_reshape(e, idx, two, 2);
  int64_t win[TPUC_MAX_RANK];
  size_t nw = 0;
  for (int d = 0; d < st.rank; d++)
    if (d != dim) win[nw++] = d;
  tpuc_hlo_scatter_dims sd;
  memset(&sd, 0, sizeof sd);
  sd.update_window_dims = win;
  sd.num_update_window_dims = nw;
  sd.inserted_window_dims = &dim;
  sd.num_inserted_window_dims = 1;
  sd.scatter_dims_to_operand_dims = &dim;
  sd.num_scatter_dims_to_operand_dims = 1;
  sd.index_vector_dim = 1;
  V self = e_reshape(e, c->vals[0], st.dims, st.rank);
  V src = e_reshape(e, c->vals[3], srt.dims, srt.rank);
  V count = -1;
  if (!incl || mean) {
    tpuc_dtype cd = is_float(dt) ? dt : TPUC_DTYPE_S64;
    V zeros = e_kd(e, cd, 0, self), ones = e_kd(e, cd, 1, src);
    tpuc_hlo_fn* cb = e_body(e, cd, TPUC_HLO_ADD, false);
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_scatter(e->fn, &zeros, 1, ix, &ones, &sd, cb,
                                  &count));
  }
  if (!incl) {
    V id;
    if (dt == TPUC_DTYPE_S64 && op != TPUC_HLO_MUL && !mean) {
      /* int64 extremes are not doubles */
      V k = -1;
      if (e->st == NULL)
        em_keep(e, tpuc_hlo_constant_i64(e->fn, dt,
                                         op == TPUC_HLO_MAX ? INT64_MIN
                                                            : INT64_MAX,
                                         &k));
      id = e_splat(e, k, self);
    } else {
      id = K(self, ident);
    }
    self = SEL(GT(count, K(count, 0)), id, self);
  }
  tpuc_hlo_fn* body = e_body(e, dt, op, true);
  V r = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_scatter(e->fn, &self, 1, ix, &src, &sd, body, &r));
  if (mean) {
    if (incl) count = ADD(count, K(count, 1));
    count = SEL(EQ(count, K(count, 0)), K(count, 1), count);
    if (is_float(dt)) {
      r = DIV(r, count);
    } else {
      V a = e_cvt(e, r, TPUC_DTYPE_S64);
      V q = DIV(a, count);
      V adj = AND(NE(e_bin(e, TPUC_HLO_REM, a, count), K(a, 0)),
                  LT(a, K(a, 0)));
      q = SEL(adj, SUB(q, K(q, 1)), q);
      r = e_cvt(e, q, dt);
    }
  }
  c->outs[0] = e_reshape(e, r, st0.dims, st0.rank);
  return em_done(e);
}

/* ---------------------------------- table -------------------------------- */

const op_entry op_table_special[] = {
    {"aten::equal", lower_equal, 0},
    {"aten::angle", lower_special_unary, SU_ANGLE},
    {"aten::angle.out", lower_special_unary, SU_ANGLE},
    {"aten::sinc", lower_special_unary, SU_SINC},
    {"aten::sinc.out", lower_special_unary, SU_SINC},
    {"aten::sinc_", lower_special_unary, SU_SINC},
    {"aten::special_entr", lower_special_unary, SU_ENTR},
    {"aten::special_entr.out", lower_special_unary, SU_ENTR},
    {"aten::lgamma", lower_special_unary, SU_LGAMMA},
    {"aten::lgamma.out", lower_special_unary, SU_LGAMMA},
    {"aten::lgamma_", lower_special_unary, SU_LGAMMA},
    {"aten::digamma", lower_special_unary, SU_DIGAMMA},
    {"aten::digamma.out", lower_special_unary, SU_DIGAMMA},
    {"aten::digamma_", lower_special_unary, SU_DIGAMMA},
    {"aten::polygamma", lower_polygamma, 0},
    {"aten::polygamma.out", lower_polygamma, 0},
    {"aten::polygamma_", lower_polygamma, 0},
    {"aten::i0", lower_special_unary, SU_I0},
    {"aten::i0.out", lower_special_unary, SU_I0},
    {"aten::i0_", lower_special_unary, SU_I0},
    {"aten::special_i0e", lower_special_unary, SU_I0E},
    {"aten::special_i0e.out", lower_special_unary, SU_I0E},
    {"aten::special_i1", lower_special_unary, SU_I1},
    {"aten::special_i1.out", lower_special_unary, SU_I1},
    {"aten::special_i1e", lower_special_unary, SU_I1E},
    {"aten::special_i1e.out", lower_special_unary, SU_I1E},
    {"aten::special_bessel_j0", lower_special_unary, SU_J0},
    {"aten::special_bessel_j0.out", lower_special_unary, SU_J0},
    {"aten::special_bessel_j1", lower_special_unary, SU_J1},
    {"aten::special_bessel_j1.out", lower_special_unary, SU_J1},
    {"aten::special_bessel_y0", lower_special_unary, SU_Y0},
    {"aten::special_bessel_y0.out", lower_special_unary, SU_Y0},
    {"aten::special_bessel_y1", lower_special_unary, SU_Y1},
    {"aten::special_bessel_y1.out", lower_special_unary, SU_Y1},
    {"aten::special_spherical_bessel_j0", lower_special_unary, SU_SPH_J0},
    {"aten::special_spherical_bessel_j0.out", lower_special_unary, SU_SPH_J0},
    {"aten::special_modified_bessel_i0", lower_special_unary, SU_MI0},
    {"aten::special_modified_bessel_i0.out", lower_special_unary,
     SU_MI0},
    {"aten::special_modified_bessel_i1", lower_special_unary, SU_MI1},
    {"aten::special_modified_bessel_i1.out", lower_special_unary,
     SU_MI1},
    {"aten::special_modified_bessel_k0", lower_special_unary, SU_MK0},
    {"aten::special_modified_bessel_k0.out", lower_special_unary,
     SU_MK0},
    {"aten::special_modified_bessel_k1", lower_special_unary, SU_MK1},
    {"aten::special_modified_bessel_k1.out", lower_special_unary,
     SU_MK1},
    {"aten::special_scaled_modified_bessel_k0", lower_special_unary, SU_SK0},
    {"aten::special_scaled_modified_bessel_k0.out", lower_special_unary,
     SU_SK0},
    {"aten::special_scaled_modified_bessel_k1", lower_special_unary, SU_SK1},
    {"aten::special_scaled_modified_bessel_k1.out", lower_special_unary,
     SU_SK1},
    {"aten::logit", lower_logit, 0},
    {"aten::logit.out", lower_logit, 0},
    {"aten::logit_", lower_logit, 0},
    {"aten::logit_backward", lower_logit_backward, 0},
    {"aten::logit_backward.grad_input", lower_logit_backward, 0},
    {"aten::threshold", lower_threshold, 0},
    {"aten::threshold.out", lower_threshold, 0},
    {"aten::threshold_", lower_threshold, 0},
    {"aten::round.decimals", lower_round_decimals, 0},
    {"aten::round.decimals_out", lower_round_decimals, 0},
    {"aten::round_.decimals", lower_round_decimals, 0},
    {"aten::frexp.Tensor", lower_frexp, 0},
    {"aten::frexp.Tensor_out", lower_frexp, 0},
    {"aten::special_xlog1py", lower_xlog1py, 0},
    {"aten::special_xlog1py.out", lower_xlog1py, 0},
    {"aten::special_xlog1py.self_scalar", lower_xlog1py, 0},
    {"aten::special_xlog1py.self_scalar_out", lower_xlog1py, 0},
    {"aten::special_xlog1py.other_scalar", lower_xlog1py, 0},
    {"aten::special_xlog1py.other_scalar_out", lower_xlog1py, 0},
    {"aten::take", lower_take, 0},
    {"aten::take.out", lower_take, 0},
    {"aten::put", lower_put, 0},
    {"aten::put.out", lower_put, 0},
    {"aten::put_", lower_put, 0},
    {"aten::linalg_cross", lower_cross, 0},
    {"aten::linalg_cross.out", lower_cross, 0},
    {"aten::channel_shuffle", lower_channel_shuffle, 0},
    {"aten::channel_shuffle.out", lower_channel_shuffle, 0},
    {"aten::native_channel_shuffle", lower_channel_shuffle, 0},
    {"aten::_cummax_helper", lower_cumext, 1},
    {"aten::_cummin_helper", lower_cumext, 0},
    {"aten::kthvalue", lower_kth, KV_KTH},
    {"aten::kthvalue.values", lower_kth, KV_KTH},
    {"aten::median", lower_kth, KV_MEDIAN_ALL},
    {"aten::median.out", lower_kth, KV_MEDIAN_ALL},
    {"aten::median.dim", lower_kth, KV_MEDIAN},
    {"aten::median.dim_values", lower_kth, KV_MEDIAN},
    {"aten::nanmedian", lower_kth, KV_NANMEDIAN_ALL},
    {"aten::nanmedian.out", lower_kth, KV_NANMEDIAN_ALL},
    {"aten::nanmedian.dim", lower_kth, KV_NANMEDIAN},
    {"aten::nanmedian.dim_values", lower_kth, KV_NANMEDIAN},
    {"aten::renorm", lower_renorm, 0},
    {"aten::renorm.out", lower_renorm, 0},
    {"aten::renorm_", lower_renorm, 0},
    {"aten::nonzero_static", lower_nonzero_static, 0},
    {"aten::nonzero_static.out", lower_nonzero_static, 0},
    {"aten::index_reduce", lower_index_reduce, 0},
    {"aten::index_reduce.out", lower_index_reduce, 0},
    {"aten::index_reduce_", lower_index_reduce, 0},
    {NULL, NULL, 0},
};

/* Complex-ready ops of this file (ops_internal.h). */
const char* const op_complex_special[] = {NULL};
