/* StableHLO builder: elementwise ops run on the CPU plugin and compared with
 * results computed on the host; validation errors. */
#include <complex.h>
#include <stdint.h>

#include "tpuc/hlo.h"
#include "tpuc_test.h"

static bool close_f(double got, double want, double tol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= tol * (1.0 + fabs(want));
}

/* ---- unary ------------------------------------------------------------- */

static double ref_unary(tpuc_hlo_unary_op op, double x) {
  switch (op) {
    case TPUC_HLO_ABS:
      return fabs(x);
    case TPUC_HLO_NEG:
      return -x;
    case TPUC_HLO_EXP:
      return exp(x);
    case TPUC_HLO_EXPM1:
      return expm1(x);
    case TPUC_HLO_LOG:
      return log(x);
    case TPUC_HLO_LOG1P:
      return log1p(x);
    case TPUC_HLO_SQRT:
      return sqrt(x);
    case TPUC_HLO_RSQRT:
      return 1.0 / sqrt(x);
    case TPUC_HLO_CBRT:
      return cbrt(x);
    case TPUC_HLO_TANH:
      return tanh(x);
    case TPUC_HLO_LOGISTIC:
      return 1.0 / (1.0 + exp(-x));
    case TPUC_HLO_SINE:
      return sin(x);
    case TPUC_HLO_COSINE:
      return cos(x);
    case TPUC_HLO_TAN:
      return tan(x);
    case TPUC_HLO_FLOOR:
      return floor(x);
    case TPUC_HLO_CEIL:
      return ceil(x);
    case TPUC_HLO_ROUND_NEAREST_EVEN:
      return nearbyint(x);
    case TPUC_HLO_ROUND_NEAREST_AFZ:
      return round(x);
    case TPUC_HLO_SIGN:
      return x > 0 ? 1 : x < 0 ? -1 : 0;
    default:
      return NAN;
  }
}

static void test_unary_float(void) {
  static const tpuc_hlo_unary_op ops[] = {TPUC_HLO_ABS,
                                          TPUC_HLO_NEG,
                                          TPUC_HLO_EXP,
                                          TPUC_HLO_EXPM1,
                                          TPUC_HLO_LOG,
                                          TPUC_HLO_LOG1P,
                                          TPUC_HLO_SQRT,
                                          TPUC_HLO_RSQRT,
                                          TPUC_HLO_CBRT,
                                          TPUC_HLO_TANH,
                                          TPUC_HLO_LOGISTIC,
                                          TPUC_HLO_SINE,
                                          TPUC_HLO_COSINE,
                                          TPUC_HLO_TAN,
                                          TPUC_HLO_FLOOR,
                                          TPUC_HLO_CEIL,
                                          TPUC_HLO_ROUND_NEAREST_EVEN,
                                          TPUC_HLO_ROUND_NEAREST_AFZ,
                                          TPUC_HLO_SIGN};
  enum { NOPS = sizeof ops / sizeof ops[0] };
  /* positive inputs for log/sqrt, then a few signed ones */
  const float pos[6] = {0.25f, 0.5f, 1.5f, 2.5f, 3.0f, 7.25f};
  const float sgn[6] = {-2.5f, -0.5f, 0.0f, 0.5f, 1.5f, 2.5f};
  for (int pass = 0; pass < 2; ++pass) {
    const float* x = pass ? sgn : pos;
    tpuc_hlo_module* m;
    tpuc_hlo_fn* fn;
    TPUC_CHECK_OK(tpuc_hlo_module_create("unary", &m));
    TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
    tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){6}, 1);
    tpuc_hlo_value a, ys[NOPS];
    size_t n = 0;
    tpuc_hlo_unary_op used[NOPS];
    TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &a));
    for (size_t i = 0; i < NOPS; ++i) {
      tpuc_hlo_unary_op op = ops[i];
      bool domain = op == TPUC_HLO_LOG || op == TPUC_HLO_SQRT ||
                    op == TPUC_HLO_RSQRT || op == TPUC_HLO_LOG1P;
      if (pass && domain) continue;
      used[n] = op;
      TPUC_CHECK_OK(tpuc_hlo_unary(fn, op, a, &ys[n++]));
    }
    TPUC_CHECK_OK(tpuc_hlo_return(fn, ys, n));
    void* outs[NOPS];
    tpuc_test_arg arg = {TPUC_DTYPE_F32, 1, {6}, x};
    TPUC_CHECK_OK(tpuc_test_run_module(m, &arg, 1, outs, n));
    tpuc_hlo_module_destroy(m);
    int bad = 0;
    for (size_t i = 0; i < n; ++i)
      for (int k = 0; k < 6; ++k) {
        double want = ref_unary(used[i], x[k]);
        double got = ((float*)outs[i])[k];
        if (!close_f(got, want, 2e-5)) {
          fprintf(stderr, "%s(%g) = %g, want %g\n",
                  tpuc_hlo_unary_name(used[i]), x[k], got, want);
          bad++;
        }
      }
    tpuc_test_free_all(outs, n);
    TPUC_CHECK(bad == 0);
  }
}

static void test_unary_int_and_pred(void) {
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create(NULL, &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  int64_t d = 5;
  tpuc_hlo_type ti = tpuc_hlo_type_make(TPUC_DTYPE_S32, &d, 1);
  tpuc_hlo_type tb = tpuc_hlo_type_make(TPUC_DTYPE_PRED, &d, 1);
  tpuc_hlo_type tf = tpuc_hlo_type_make(TPUC_DTYPE_F32, &d, 1);
  tpuc_hlo_value xi, xb, xf, y[8];
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &ti, &xi));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tb, &xb));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tf, &xf));
  TPUC_CHECK_OK(tpuc_hlo_unary(fn, TPUC_HLO_NOT, xi, &y[0]));
  TPUC_CHECK_OK(tpuc_hlo_unary(fn, TPUC_HLO_POPCNT, xi, &y[1]));
  TPUC_CHECK_OK(tpuc_hlo_unary(fn, TPUC_HLO_CLZ, xi, &y[2]));
  TPUC_CHECK_OK(tpuc_hlo_unary(fn, TPUC_HLO_ABS, xi, &y[3]));
  TPUC_CHECK_OK(tpuc_hlo_unary(fn, TPUC_HLO_NEG, xi, &y[4]));
  TPUC_CHECK_OK(tpuc_hlo_unary(fn, TPUC_HLO_SIGN, xi, &y[5]));
  TPUC_CHECK_OK(tpuc_hlo_unary(fn, TPUC_HLO_NOT, xb, &y[6]));
  TPUC_CHECK_OK(tpuc_hlo_unary(fn, TPUC_HLO_IS_FINITE, xf, &y[7]));
  tpuc_hlo_type t;
  TPUC_CHECK_OK(tpuc_hlo_value_type(fn, y[7], &t));
  TPUC_CHECK(t.dtype == TPUC_DTYPE_PRED && t.rank == 1 && t.dims[0] == 5);
  TPUC_CHECK_OK(tpuc_hlo_return(fn, y, 8));
  const int32_t vi[5] = {0, 1, -7, 255, INT32_MIN + 1};
  const uint8_t vb[5] = {1, 0, 1, 1, 0};
  const float vf[5] = {1.0f, INFINITY, -INFINITY, NAN, -0.0f};
  tpuc_test_arg args[3] = {{TPUC_DTYPE_S32, 1, {5}, vi},
                           {TPUC_DTYPE_PRED, 1, {5}, vb},
                           {TPUC_DTYPE_F32, 1, {5}, vf}};
  void* o[8];
  TPUC_CHECK_OK(tpuc_test_run_module(m, args, 3, o, 8));
  tpuc_hlo_module_destroy(m);
  int bad = 0;
  for (int k = 0; k < 5; ++k) {
    int32_t x = vi[k];
    uint32_t u = (uint32_t)x;
    int32_t want[6] = {
        ~x, __builtin_popcount(u), u ? __builtin_clz(u) : 32, x < 0 ? -x : x,
        -x, (x > 0) - (x < 0)};
    for (int j = 0; j < 6; ++j) bad += ((int32_t*)o[j])[k] != want[j];
    bad += ((uint8_t*)o[6])[k] != !vb[k];
    bad += ((uint8_t*)o[7])[k] != (isfinite(vf[k]) ? 1 : 0);
  }
  tpuc_test_free_all(o, 8);
  TPUC_CHECK(bad == 0);
}

static void test_unary_complex(void) {
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("cplx", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  int64_t d = 3;
  tpuc_hlo_type tc = tpuc_hlo_type_make(TPUC_DTYPE_C64, &d, 1);
  tpuc_hlo_value x, y[5];
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tc, &x));
  TPUC_CHECK_OK(tpuc_hlo_unary(fn, TPUC_HLO_REAL, x, &y[0]));
  TPUC_CHECK_OK(tpuc_hlo_unary(fn, TPUC_HLO_IMAG, x, &y[1]));
  TPUC_CHECK_OK(tpuc_hlo_unary(fn, TPUC_HLO_ABS, x, &y[2]));
  TPUC_CHECK_OK(tpuc_hlo_unary(fn, TPUC_HLO_EXP, x, &y[3]));
  /* complex(real(x), imag(x)) round trip */
  TPUC_CHECK_OK(tpuc_hlo_binary(fn, TPUC_HLO_COMPLEX, y[0], y[1], &y[4]));
  tpuc_hlo_type t;
  TPUC_CHECK_OK(tpuc_hlo_value_type(fn, y[2], &t));
  TPUC_CHECK(t.dtype == TPUC_DTYPE_F32);
  TPUC_CHECK_OK(tpuc_hlo_return(fn, y, 5));
  const float v[6] = {3, 4, -1, 0.5f, 0, -2};
  tpuc_test_arg a = {TPUC_DTYPE_C64, 1, {3}, v};
  void* o[5];
  TPUC_CHECK_OK(tpuc_test_run_module(m, &a, 1, o, 5));
  tpuc_hlo_module_destroy(m);
  int bad = 0;
  for (int k = 0; k < 3; ++k) {
    float complex z = v[2 * k] + v[2 * k + 1] * I;
    float complex e = cexpf(z);
    bad += ((float*)o[0])[k] != v[2 * k];
    bad += ((float*)o[1])[k] != v[2 * k + 1];
    bad += !close_f(((float*)o[2])[k], cabsf(z), 1e-6);
    bad += !close_f(((float*)o[3])[2 * k], crealf(e), 1e-5);
    bad += !close_f(((float*)o[3])[2 * k + 1], cimagf(e), 1e-5);
    bad += memcmp((float*)o[4] + 2 * k, v + 2 * k, 8) != 0;
  }
  tpuc_test_free_all(o, 5);
  TPUC_CHECK(bad == 0);
}

/* ---- binary ------------------------------------------------------------ */

static void test_binary_float(void) {
  static const tpuc_hlo_binary_op ops[] = {
      TPUC_HLO_ADD, TPUC_HLO_SUB, TPUC_HLO_MUL, TPUC_HLO_DIV,  TPUC_HLO_REM,
      TPUC_HLO_POW, TPUC_HLO_MAX, TPUC_HLO_MIN, TPUC_HLO_ATAN2};
  enum { N = sizeof ops / sizeof ops[0] };
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("binf", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_F64, (int64_t[]){2, 2}, 2);
  tpuc_hlo_value a, b, y[N];
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &a));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &b));
  for (size_t i = 0; i < N; ++i)
    TPUC_CHECK_OK(tpuc_hlo_binary(fn, ops[i], a, b, &y[i]));
  TPUC_CHECK_OK(tpuc_hlo_return(fn, y, N));
  const double va[4] = {5.5, -7.0, 2.0, 0.25}, vb[4] = {2.0, 3.0, -0.5, 4.0};
  tpuc_test_arg args[2] = {{TPUC_DTYPE_F64, 2, {2, 2}, va},
                           {TPUC_DTYPE_F64, 2, {2, 2}, vb}};
  void* o[N];
  TPUC_CHECK_OK(tpuc_test_run_module(m, args, 2, o, N));
  tpuc_hlo_module_destroy(m);
  int bad = 0;
  for (int k = 0; k < 4; ++k) {
    double x = va[k], z = vb[k];
    double want[N] = {x + z,     x - z,      x * z,      x / z,      fmod(x, z),
                      pow(x, z), fmax(x, z), fmin(x, z), atan2(x, z)};
    for (size_t i = 0; i < N; ++i)
      if (!close_f(((double*)o[i])[k], want[i], 1e-12)) {
        fprintf(stderr, "%s(%g, %g) = %g want %g\n",
                tpuc_hlo_binary_name(ops[i]), x, z, ((double*)o[i])[k],
                want[i]);
        bad++;
      }
  }
  tpuc_test_free_all(o, N);
  TPUC_CHECK(bad == 0);
}

static void test_binary_int(void) {
  static const tpuc_hlo_binary_op ops[] = {TPUC_HLO_ADD,
                                           TPUC_HLO_SUB,
                                           TPUC_HLO_MUL,
                                           TPUC_HLO_DIV,
                                           TPUC_HLO_REM,
                                           TPUC_HLO_MAX,
                                           TPUC_HLO_MIN,
                                           TPUC_HLO_AND,
                                           TPUC_HLO_OR,
                                           TPUC_HLO_XOR,
                                           TPUC_HLO_SHIFT_LEFT,
                                           TPUC_HLO_SHIFT_RIGHT_ARITHMETIC,
                                           TPUC_HLO_SHIFT_RIGHT_LOGICAL,
                                           TPUC_HLO_POW};
  enum { N = sizeof ops / sizeof ops[0] };
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("bini", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){4}, 1);
  tpuc_hlo_value a, b, y[N];
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &a));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &b));
  for (size_t i = 0; i < N; ++i)
    TPUC_CHECK_OK(tpuc_hlo_binary(fn, ops[i], a, b, &y[i]));
  TPUC_CHECK_OK(tpuc_hlo_return(fn, y, N));
  const int32_t va[4] = {100, -100, 7, -1}, vb[4] = {3, 3, 2, 5};
  tpuc_test_arg args[2] = {{TPUC_DTYPE_S32, 1, {4}, va},
                           {TPUC_DTYPE_S32, 1, {4}, vb}};
  void* o[N];
  TPUC_CHECK_OK(tpuc_test_run_module(m, args, 2, o, N));
  tpuc_hlo_module_destroy(m);
  int bad = 0;
  for (int k = 0; k < 4; ++k) {
    int32_t x = va[k], z = vb[k];
    int32_t p = 1;
    for (int e = 0; e < z; ++e) p *= x;
    int32_t want[N] = {x + z,
                       x - z,
                       x * z,
                       x / z,
                       x % z,
                       x > z ? x : z,
                       x < z ? x : z,
                       x & z,
                       x | z,
                       x ^ z,
                       (int32_t)((uint32_t)x << z),
                       x >> z,
                       (int32_t)((uint32_t)x >> z),
                       p};
    for (size_t i = 0; i < N; ++i)
      if (((int32_t*)o[i])[k] != want[i]) {
        fprintf(stderr, "%s(%d, %d) = %d want %d\n",
                tpuc_hlo_binary_name(ops[i]), x, z, ((int32_t*)o[i])[k],
                want[i]);
        bad++;
      }
  }
  tpuc_test_free_all(o, N);
  TPUC_CHECK(bad == 0);
}

/* ---- compare, select, clamp --------------------------------------------- */

static void test_compare(void) {
  const tpuc_dtype ds[4] = {TPUC_DTYPE_F32, TPUC_DTYPE_S32, TPUC_DTYPE_U32,
                            TPUC_DTYPE_F32};
  for (int c = 0; c < 4; ++c) {
    bool total = c == 3;
    tpuc_hlo_module* m;
    tpuc_hlo_fn* fn;
    TPUC_CHECK_OK(tpuc_hlo_module_create("cmp", &m));
    TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
    tpuc_hlo_type t = tpuc_hlo_type_make(ds[c], (int64_t[]){4}, 1);
    tpuc_hlo_value a, b, y[6];
    TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &a));
    TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &b));
    for (int dir = 0; dir < 6; ++dir) {
      if (total)
        TPUC_CHECK_OK(tpuc_hlo_compare_totalorder(fn, dir, a, b, &y[dir]));
      else
        TPUC_CHECK_OK(tpuc_hlo_compare(fn, dir, a, b, &y[dir]));
    }
    TPUC_CHECK_OK(tpuc_hlo_return(fn, y, 6));
    float fa[4] = {1, -2, 3, 0.0f}, fb[4] = {1, 2, -3, -0.0f};
    int32_t ia[4] = {1, -2, 3, 0}, ib[4] = {1, 2, -3, 7};
    const void* pa = ds[c] == TPUC_DTYPE_F32 ? (void*)fa : (void*)ia;
    const void* pb = ds[c] == TPUC_DTYPE_F32 ? (void*)fb : (void*)ib;
    tpuc_test_arg args[2] = {{ds[c], 1, {4}, pa}, {ds[c], 1, {4}, pb}};
    void* o[6];
    TPUC_CHECK_OK(tpuc_test_run_module(m, args, 2, o, 6));
    tpuc_hlo_module_destroy(m);
    int bad = 0;
    for (int k = 0; k < 4; ++k) {
      double x, z;
      if (ds[c] == TPUC_DTYPE_F32) {
        x = fa[k];
        z = fb[k];
        /* total order: -0.0 < +0.0 */
        if (total && k == 3) x = 1, z = 0;
      } else if (ds[c] == TPUC_DTYPE_S32) {
        x = ia[k];
        z = ib[k];
      } else {
        x = (uint32_t)ia[k];
        z = (uint32_t)ib[k];
      }
      int want[6] = {x == z, x != z, x<z, x <= z, x> z, x >= z};
      for (int dir = 0; dir < 6; ++dir)
        bad += ((uint8_t*)o[dir])[k] != want[dir];
    }
    tpuc_test_free_all(o, 6);
    if (bad) fprintf(stderr, "compare case %d failed\n", c);
    TPUC_CHECK(bad == 0);
  }
}

static void test_select_clamp(void) {
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("sel", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_S16, (int64_t[]){5}, 1);
  tpuc_hlo_type tp = tpuc_hlo_type_make(TPUC_DTYPE_PRED, (int64_t[]){5}, 1);
  tpuc_hlo_value p, a, b, lo, hi, sp, y[3];
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tp, &p));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &a));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &b));
  TPUC_CHECK_OK(tpuc_hlo_select(fn, p, a, b, &y[0]));
  TPUC_CHECK_OK(tpuc_hlo_constant_i64(fn, TPUC_DTYPE_PRED, 0, &sp));
  TPUC_CHECK_OK(tpuc_hlo_select(fn, sp, a, b, &y[1]));
  TPUC_CHECK_OK(tpuc_hlo_constant_i64(fn, TPUC_DTYPE_S16, -3, &lo));
  TPUC_CHECK_OK(tpuc_hlo_constant_i64(fn, TPUC_DTYPE_S16, 4, &hi));
  TPUC_CHECK_OK(tpuc_hlo_clamp(fn, lo, a, hi, &y[2]));
  TPUC_CHECK_OK(tpuc_hlo_return(fn, y, 3));
  const uint8_t vp[5] = {1, 0, 1, 0, 0};
  const int16_t va[5] = {-10, -3, 0, 4, 10}, vb[5] = {5, 6, 7, 8, 9};
  tpuc_test_arg args[3] = {{TPUC_DTYPE_PRED, 1, {5}, vp},
                           {TPUC_DTYPE_S16, 1, {5}, va},
                           {TPUC_DTYPE_S16, 1, {5}, vb}};
  void* o[3];
  TPUC_CHECK_OK(tpuc_test_run_module(m, args, 3, o, 3));
  tpuc_hlo_module_destroy(m);
  int bad = 0;
  for (int k = 0; k < 5; ++k) {
    bad += ((int16_t*)o[0])[k] != (vp[k] ? va[k] : vb[k]);
    bad += ((int16_t*)o[1])[k] != vb[k];
    int16_t c = va[k] < -3 ? -3 : va[k] > 4 ? 4 : va[k];
    bad += ((int16_t*)o[2])[k] != c;
  }
  tpuc_test_free_all(o, 3);
  TPUC_CHECK(bad == 0);
}

/* ---- validation -----------------------------------------------------------
 */

static void test_validation_errors(void) {
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("bad", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type t2 = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){2}, 1);
  tpuc_hlo_type t3 = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){3}, 1);
  tpuc_hlo_type ti = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){2}, 1);
  tpuc_hlo_type tc = tpuc_hlo_type_make(TPUC_DTYPE_C64, (int64_t[]){2}, 1);
  tpuc_hlo_value a, b, i, c, y;
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t2, &a));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t3, &b));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &ti, &i));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tc, &c));
  TPUC_CHECK_ERROR(tpuc_hlo_binary(fn, TPUC_HLO_ADD, a, b, &y),
                   TPUC_INVALID_ARGUMENT,
                   "stablehlo.add: operand types differ");
  TPUC_CHECK_ERROR(tpuc_hlo_binary(fn, TPUC_HLO_ADD, a, i, &y),
                   TPUC_INVALID_ARGUMENT, "tensor<2xi32>");
  TPUC_CHECK_ERROR(tpuc_hlo_binary(fn, TPUC_HLO_SHIFT_LEFT, a, a, &y),
                   TPUC_INVALID_ARGUMENT, "expected integer");
  TPUC_CHECK_ERROR(tpuc_hlo_unary(fn, TPUC_HLO_EXP, i, &y),
                   TPUC_INVALID_ARGUMENT, "stablehlo.exponential");
  TPUC_CHECK_ERROR(tpuc_hlo_unary(fn, TPUC_HLO_FLOOR, c, &y),
                   TPUC_INVALID_ARGUMENT, "expected float");
  TPUC_CHECK_ERROR(tpuc_hlo_unary(fn, (tpuc_hlo_unary_op)99, a, &y),
                   TPUC_INVALID_ARGUMENT, "unknown unary op");
  TPUC_CHECK_ERROR(tpuc_hlo_compare(fn, TPUC_HLO_LT, c, c, &y),
                   TPUC_INVALID_ARGUMENT, "EQ and NE");
  TPUC_CHECK_ERROR(tpuc_hlo_compare_totalorder(fn, TPUC_HLO_LT, i, i, &y),
                   TPUC_INVALID_ARGUMENT, "TOTALORDER");
  TPUC_CHECK_ERROR(tpuc_hlo_select(fn, a, a, a, &y), TPUC_INVALID_ARGUMENT,
                   "expected i1");
  TPUC_CHECK_ERROR(tpuc_hlo_convert(fn, c, TPUC_DTYPE_F32, &y),
                   TPUC_INVALID_ARGUMENT, "real/imag");
  TPUC_CHECK_ERROR(tpuc_hlo_convert(fn, a, (tpuc_dtype)77, &y),
                   TPUC_INVALID_ARGUMENT, "invalid target dtype");
  TPUC_CHECK_ERROR(tpuc_hlo_bitcast_convert(fn, b, TPUC_DTYPE_F64, &y),
                   TPUC_INVALID_ARGUMENT, "trailing operand dim of 2");
  TPUC_CHECK_ERROR(tpuc_hlo_binary(fn, TPUC_HLO_COMPLEX, i, i, &y),
                   TPUC_INVALID_ARGUMENT, "f32 or f64");
  TPUC_CHECK_ERROR(tpuc_hlo_clamp(fn, i, a, a, &y), TPUC_INVALID_ARGUMENT,
                   "min dtype");
  TPUC_CHECK_ERROR(tpuc_hlo_binary(fn, TPUC_HLO_ADD, a, 12345, &y),
                   TPUC_INVALID_ARGUMENT, "not a value");
  /* nothing was added by the failures: the module still prints */
  TPUC_CHECK_OK(tpuc_hlo_return(fn, &a, 1));
  char* text;
  size_t len;
  TPUC_CHECK_OK(tpuc_hlo_module_print(m, &text, &len));
  TPUC_CHECK(strstr(text, "stablehlo") == NULL);
  TPUC_CHECK(len == strlen(text));
  free(text);
  TPUC_CHECK_ERROR(tpuc_hlo_unary(fn, TPUC_HLO_NEG, a, &y),
                   TPUC_INVALID_ARGUMENT, "already returned");
  tpuc_hlo_module_destroy(m);
}

TPUC_TEST_MAIN(TPUC_TEST(test_unary_float), TPUC_TEST(test_unary_int_and_pred),
               TPUC_TEST(test_unary_complex), TPUC_TEST(test_binary_float),
               TPUC_TEST(test_binary_int), TPUC_TEST(test_compare),
               TPUC_TEST(test_select_clamp), TPUC_TEST(test_validation_errors))
