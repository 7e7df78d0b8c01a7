/* StableHLO builder: cholesky and triangular_solve run on the CPU plugin
 * against host results. */
#include <stdint.h>

#include "tpuc/hlo.h"
#include "tpuc_test.h"

/* A batch of two 3x3 SPD matrices a = m m^T + 3 I. */
static void make_spd(double* a) {
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        double s = i == j ? 3.0 : 0.0;
        for (int k = 0; k < 3; ++k)
          s += (double)((b * 9 + i * 3 + k) % 5 - 2) *
               (double)((b * 9 + j * 3 + k) % 5 - 2);
        a[b * 9 + i * 3 + j] = s;
      }
}

static void test_cholesky(void) {
  double a[18];
  make_spd(a);
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("chol", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_F64, (int64_t[]){2, 3, 3}, 3);
  tpuc_hlo_value va, y[2];
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &va));
  TPUC_CHECK_OK(tpuc_hlo_cholesky(fn, va, true, &y[0]));
  TPUC_CHECK_OK(tpuc_hlo_cholesky(fn, va, false, &y[1]));
  TPUC_CHECK_OK(tpuc_hlo_return(fn, y, 2));
  tpuc_test_arg args[1] = {{TPUC_DTYPE_F64, 3, {2, 3, 3}, a}};
  void* o[2];
  TPUC_CHECK_OK(tpuc_test_run_module(m, args, 1, o, 2));
  tpuc_hlo_module_destroy(m);
  const double* l = o[0];
  const double* u = o[1];
  int bad = 0;
  /* l l^T == a over the lower triangle of l; u == l^T. */
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        double s = 0;
        for (int k = 0; k <= (i < j ? i : j); ++k)
          s += l[b * 9 + i * 3 + k] * l[b * 9 + j * 3 + k];
        bad += fabs(s - a[b * 9 + i * 3 + j]) > 1e-9;
        if (j <= i)
          bad += fabs(u[b * 9 + j * 3 + i] - l[b * 9 + i * 3 + j]) > 1e-12;
      }
  tpuc_test_free_all(o, 2);
  TPUC_CHECK(bad == 0);
}

static void test_triangular_solve(void) {
  /* a lower triangular 3x3 (upper triangle garbage, never read), b 3x2;
   * solve a x = b and x a^T = b^T (right side, transposed). */
  float a[9] = {2, 9, 9, 1, 4, 9, -1, 2, 5};
  float b[6] = {1, 2, 3, 4, 5, 6};
  float bt[6] = {1, 3, 5, 2, 4, 6};
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("trsm", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type ta = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){3, 3}, 2);
  tpuc_hlo_type tb = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){3, 2}, 2);
  tpuc_hlo_type tc = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){2, 3}, 2);
  tpuc_hlo_value va, vb, vc, y[2];
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &ta, &va));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tb, &vb));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tc, &vc));
  TPUC_CHECK_OK(tpuc_hlo_triangular_solve(fn, va, vb, true, true, false,
                                          TPUC_HLO_NO_TRANSPOSE, &y[0]));
  TPUC_CHECK_OK(tpuc_hlo_triangular_solve(fn, va, vc, false, true, false,
                                          TPUC_HLO_TRANSPOSE, &y[1]));
  TPUC_CHECK_ERROR(tpuc_hlo_triangular_solve(fn, va, vc, true, true, false,
                                             TPUC_HLO_NO_TRANSPOSE, &y[1]),
                   TPUC_INVALID_ARGUMENT, "row dim is 2");
  TPUC_CHECK_ERROR(tpuc_hlo_triangular_solve(fn, va, vb, true, true, false,
                                             (tpuc_hlo_transpose_mode)7, &y[1]),
                   TPUC_INVALID_ARGUMENT, "invalid transpose_a");
  TPUC_CHECK_ERROR(tpuc_hlo_cholesky(fn, vb, true, &y[1]),
                   TPUC_INVALID_ARGUMENT, "square");
  TPUC_CHECK_OK(tpuc_hlo_return(fn, y, 2));
  tpuc_test_arg args[3] = {{TPUC_DTYPE_F32, 2, {3, 3}, a},
                           {TPUC_DTYPE_F32, 2, {3, 2}, b},
                           {TPUC_DTYPE_F32, 2, {2, 3}, bt}};
  void* o[2];
  TPUC_CHECK_OK(tpuc_test_run_module(m, args, 3, o, 2));
  tpuc_hlo_module_destroy(m);
  const float* x = o[0];
  const float* xt = o[1];
  int bad = 0;
  for (int j = 0; j < 2; ++j)
    for (int i = 0; i < 3; ++i) {
      float s = 0;
      for (int k = 0; k <= i; ++k) s += a[i * 3 + k] * x[k * 2 + j];
      bad += fabsf(s - b[i * 2 + j]) > 1e-5f;
      bad += fabsf(xt[j * 3 + i] - x[i * 2 + j]) > 1e-5f;
    }
  tpuc_test_free_all(o, 2);
  TPUC_CHECK(bad == 0);
}

TPUC_TEST_MAIN(TPUC_TEST(test_cholesky), TPUC_TEST(test_triangular_solve))
