/* StableHLO builder: ops with regions (reduce, reduce_window,
 * select_and_scatter, sort) run on the CPU plugin against host results;
 * region printing and scoping rules. */
#include <stdint.h>

#include "tpuc/hlo.h"
#include "tpuc_test.h"

static float g_x[12]; /* 3x4 */

static void fill(void) {
  const float v[12] = {3, -1, 4, 1, -5, 9, 2, -6, 5, 3, 5, 8};
  memcpy(g_x, v, sizeof v);
}

static void test_reduce_sum_and_argmax(void) {
  fill();
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("reduce", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){3, 4}, 2);
  tpuc_hlo_value x, zero, ninf, idx, izero, outs[4];
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &x));
  TPUC_CHECK_OK(tpuc_hlo_constant_f64(fn, TPUC_DTYPE_F32, 0, &zero));
  /* sum over dim 1 with the helper region */
  tpuc_hlo_fn* add;
  TPUC_CHECK_OK(tpuc_hlo_region_binary(m, TPUC_DTYPE_F32, TPUC_HLO_ADD, &add));
  TPUC_CHECK_OK(
      tpuc_hlo_reduce(fn, &x, &zero, 1, (int64_t[]){1}, 1, add, &outs[0]));
  /* full sum over both dims */
  TPUC_CHECK_OK(tpuc_hlo_region_binary(m, TPUC_DTYPE_F32, TPUC_HLO_ADD, &add));
  TPUC_CHECK_OK(
      tpuc_hlo_reduce(fn, &x, &zero, 1, (int64_t[]){0, 1}, 2, add, &outs[1]));
  /* argmax over dim 0: two operands (value, index) with a hand-built
   * region: (acc_v, acc_i, v, i) -> (max, index of max; first wins) */
  tpuc_hlo_type ti = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){3, 4}, 2);
  TPUC_CHECK_OK(tpuc_hlo_iota(fn, &ti, 0, &idx));
  TPUC_CHECK_OK(tpuc_hlo_constant_f64(fn, TPUC_DTYPE_F32, -INFINITY, &ninf));
  TPUC_CHECK_OK(tpuc_hlo_constant_i64(fn, TPUC_DTYPE_S32, 0, &izero));
  tpuc_hlo_type rt[4] = {tpuc_hlo_type_scalar(TPUC_DTYPE_F32),
                         tpuc_hlo_type_scalar(TPUC_DTYPE_S32),
                         tpuc_hlo_type_scalar(TPUC_DTYPE_F32),
                         tpuc_hlo_type_scalar(TPUC_DTYPE_S32)};
  tpuc_hlo_fn* r;
  TPUC_CHECK_OK(tpuc_hlo_region_create(m, rt, 4, &r));
  tpuc_hlo_value av, ai, bv, bi, gt, eq, lt_i, take_b, tie, v, i;
  TPUC_CHECK_OK(tpuc_hlo_get_arg(r, 0, &av));
  TPUC_CHECK_OK(tpuc_hlo_get_arg(r, 1, &ai));
  TPUC_CHECK_OK(tpuc_hlo_get_arg(r, 2, &bv));
  TPUC_CHECK_OK(tpuc_hlo_get_arg(r, 3, &bi));
  TPUC_CHECK_OK(tpuc_hlo_compare(r, TPUC_HLO_GT, bv, av, &gt));
  TPUC_CHECK_OK(tpuc_hlo_compare(r, TPUC_HLO_EQ, bv, av, &eq));
  TPUC_CHECK_OK(tpuc_hlo_compare(r, TPUC_HLO_LT, bi, ai, &lt_i));
  TPUC_CHECK_OK(tpuc_hlo_binary(r, TPUC_HLO_AND, eq, lt_i, &tie));
  TPUC_CHECK_OK(tpuc_hlo_binary(r, TPUC_HLO_OR, gt, tie, &take_b));
  TPUC_CHECK_OK(tpuc_hlo_select(r, take_b, bv, av, &v));
  TPUC_CHECK_OK(tpuc_hlo_select(r, take_b, bi, ai, &i));
  tpuc_hlo_value rr[2] = {v, i};
  TPUC_CHECK_OK(tpuc_hlo_return(r, rr, 2));
  tpuc_hlo_value ins[2] = {x, idx}, inits[2] = {ninf, izero};
  TPUC_CHECK_OK(
      tpuc_hlo_reduce(fn, ins, inits, 2, (int64_t[]){0}, 1, r, &outs[2]));
  TPUC_CHECK_OK(tpuc_hlo_return(fn, outs, 4));
  char* text;
  TPUC_CHECK_OK(tpuc_hlo_module_print(m, &text, NULL));
  TPUC_CHECK(strstr(text, "\"stablehlo.reduce\"(%arg0, %1) ({\n") != NULL);
  TPUC_CHECK(strstr(text, "^bb0(") != NULL);
  TPUC_CHECK(strstr(text, "\"stablehlo.return\"(") != NULL);
  TPUC_CHECK(strstr(text, "dimensions = array<i64: 0, 1>") != NULL);
  free(text);
  tpuc_test_arg a = {TPUC_DTYPE_F32, 2, {3, 4}, g_x};
  void* o[4];
  TPUC_CHECK_OK(tpuc_test_run_module(m, &a, 1, o, 4));
  tpuc_hlo_module_destroy(m);
  int bad = 0;
  float total = 0;
  for (int i0 = 0; i0 < 3; ++i0) {
    float s = 0;
    for (int j = 0; j < 4; ++j) s += g_x[i0 * 4 + j];
    total += s;
    bad += ((float*)o[0])[i0] != s;
  }
  bad += *(float*)o[1] != total;
  for (int j = 0; j < 4; ++j) {
    int best = 0;
    for (int i0 = 1; i0 < 3; ++i0)
      if (g_x[i0 * 4 + j] > g_x[best * 4 + j]) best = i0;
    bad += ((float*)o[2])[j] != g_x[best * 4 + j];
    bad += ((int32_t*)o[3])[j] != best;
  }
  tpuc_test_free_all(o, 4);
  TPUC_CHECK(bad == 0);
}

/* Host reduce_window max for 2-D input with window, stride, padding and
 * dilations; padding positions hold -inf. */
static float host_window_max(const float* x, int h, int w, int r, int c,
                             const int64_t* win, const int64_t* st,
                             const int64_t* bd, const int64_t* wd,
                             const int64_t* pad) {
  float best = -INFINITY;
  for (int a = 0; a < win[0]; ++a)
    for (int b = 0; b < win[1]; ++b) {
      int64_t pr = r * st[0] + a * wd[0] - pad[0];
      int64_t pc = c * st[1] + b * wd[1] - pad[2];
      if (pr < 0 || pc < 0 || pr % bd[0] || pc % bd[1]) continue;
      pr /= bd[0];
      pc /= bd[1];
      if (pr >= h || pc >= w) continue;
      if (x[pr * w + pc] > best) best = x[pr * w + pc];
    }
  return best;
}

static void test_reduce_window(void) {
  fill();
  const int64_t win[2] = {2, 2}, st[2] = {1, 2}, pad[4] = {1, 0, 0, 1};
  const int64_t bd[2] = {1, 2}, wd[2] = {2, 1}, ones[2] = {1, 1};
  for (int pass = 0; pass < 2; ++pass) {
    const int64_t* b = pass ? bd : ones;
    const int64_t* w = pass ? wd : ones;
    tpuc_hlo_module* m;
    tpuc_hlo_fn* fn;
    TPUC_CHECK_OK(tpuc_hlo_module_create("rw", &m));
    TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
    tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){3, 4}, 2);
    tpuc_hlo_value x, ninf, y;
    TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &x));
    TPUC_CHECK_OK(tpuc_hlo_constant_f64(fn, TPUC_DTYPE_F32, -INFINITY, &ninf));
    tpuc_hlo_fn* mx;
    TPUC_CHECK_OK(tpuc_hlo_region_binary(m, TPUC_DTYPE_F32, TPUC_HLO_MAX, &mx));
    tpuc_hlo_window wnd = {win, st, pass ? bd : NULL, pass ? wd : NULL, pad};
    TPUC_CHECK_OK(tpuc_hlo_reduce_window(fn, &x, &ninf, 1, &wnd, mx, &y));
    tpuc_hlo_type rt;
    TPUC_CHECK_OK(tpuc_hlo_value_type(fn, y, &rt));
    TPUC_CHECK_OK(tpuc_hlo_return(fn, &y, 1));
    tpuc_test_arg a = {TPUC_DTYPE_F32, 2, {3, 4}, g_x};
    void* o;
    TPUC_CHECK_OK(tpuc_test_run_module(m, &a, 1, &o, 1));
    tpuc_hlo_module_destroy(m);
    /* expected shape */
    int64_t oh = ((3 - 1) * b[0] + 1 + 1 - ((2 - 1) * w[0] + 1)) / 1 + 1;
    int64_t ow = ((4 - 1) * b[1] + 1 + 1 - ((2 - 1) * w[1] + 1)) / 2 + 1;
    int bad = rt.dims[0] != oh || rt.dims[1] != ow;
    for (int r = 0; r < oh && !bad; ++r)
      for (int c = 0; c < ow; ++c) {
        float want = host_window_max(g_x, 3, 4, r, c, win, st, b, w, pad);
        if (((float*)o)[r * ow + c] != want) {
          fprintf(stderr, "pass %d [%d,%d] = %g want %g\n", pass, r, c,
                  ((float*)o)[r * ow + c], want);
          bad++;
        }
      }
    free(o);
    TPUC_CHECK(bad == 0);
  }
}

static void test_select_and_scatter(void) {
  /* max-pool backward: 4x4 input, 2x2 window, stride 2; source 2x2 */
  const float x[16] = {1, 5, 2, 0, 3, 4, 8, 1, 0, 0, 9, 9, 7, 0, 1, 2};
  const float src[4] = {10, 20, 30, 40};
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("sas", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type tx = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){4, 4}, 2);
  tpuc_hlo_type ts = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){2, 2}, 2);
  tpuc_hlo_value vx, vs, zero, y;
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tx, &vx));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &ts, &vs));
  TPUC_CHECK_OK(tpuc_hlo_constant_f64(fn, TPUC_DTYPE_F32, 0, &zero));
  tpuc_hlo_type st[2] = {tpuc_hlo_type_scalar(TPUC_DTYPE_F32),
                         tpuc_hlo_type_scalar(TPUC_DTYPE_F32)};
  tpuc_hlo_fn *sel, *sc;
  TPUC_CHECK_OK(tpuc_hlo_region_create(m, st, 2, &sel));
  tpuc_hlo_value a, b, ge;
  TPUC_CHECK_OK(tpuc_hlo_get_arg(sel, 0, &a));
  TPUC_CHECK_OK(tpuc_hlo_get_arg(sel, 1, &b));
  TPUC_CHECK_OK(tpuc_hlo_compare(sel, TPUC_HLO_GE, a, b, &ge));
  TPUC_CHECK_OK(tpuc_hlo_return(sel, &ge, 1));
  TPUC_CHECK_OK(tpuc_hlo_region_binary(m, TPUC_DTYPE_F32, TPUC_HLO_ADD, &sc));
  tpuc_hlo_window w = {(int64_t[]){2, 2}, (int64_t[]){2, 2}, NULL, NULL, NULL};
  TPUC_CHECK_OK(tpuc_hlo_select_and_scatter(fn, vx, vs, zero, &w, sel, sc, &y));
  TPUC_CHECK_OK(tpuc_hlo_return(fn, &y, 1));
  tpuc_test_arg args[2] = {{TPUC_DTYPE_F32, 2, {4, 4}, x},
                           {TPUC_DTYPE_F32, 2, {2, 2}, src}};
  void* o;
  TPUC_CHECK_OK(tpuc_test_run_module(m, args, 2, &o, 1));
  tpuc_hlo_module_destroy(m);
  float want[16] = {0};
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 2; ++c) {
      int best = -1;
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
          int k = (2 * r + i) * 4 + 2 * c + j;
          if (best < 0 || x[k] > x[best]) best = k;
        }
      want[best] += src[r * 2 + c];
    }
  int bad = memcmp(o, want, sizeof want) != 0;
  free(o);
  TPUC_CHECK(bad == 0);
}

static void test_sort(void) {
  /* keys (2x5) sorted descending along dim -1 with int payload, stable */
  const int32_t keys[10] = {3, 1, 3, 2, 1, 0, -5, 7, 7, 2};
  const uint16_t vals[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("sort", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type tk = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){2, 5}, 2);
  tpuc_hlo_type tv = tpuc_hlo_type_make(TPUC_DTYPE_U16, (int64_t[]){2, 5}, 2);
  tpuc_hlo_value in[2], out[2];
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tk, &in[0]));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tv, &in[1]));
  tpuc_dtype dts[2] = {TPUC_DTYPE_S32, TPUC_DTYPE_U16};
  tpuc_hlo_fn* cmp;
  TPUC_CHECK_OK(tpuc_hlo_region_compare(m, dts, 2, TPUC_HLO_GT, &cmp));
  TPUC_CHECK_OK(tpuc_hlo_sort(fn, in, 2, -1, true, cmp, out));
  TPUC_CHECK_OK(tpuc_hlo_return(fn, out, 2));
  tpuc_test_arg a[2] = {{TPUC_DTYPE_S32, 2, {2, 5}, keys},
                        {TPUC_DTYPE_U16, 2, {2, 5}, vals}};
  void* o[2];
  TPUC_CHECK_OK(tpuc_test_run_module(m, a, 2, o, 2));
  tpuc_hlo_module_destroy(m);
  const int32_t wk[10] = {3, 3, 2, 1, 1, 7, 7, 2, 0, -5};
  const uint16_t wv[10] = {0, 2, 3, 1, 4, 7, 8, 9, 5, 6};
  int bad = memcmp(o[0], wk, sizeof wk) != 0;
  bad += memcmp(o[1], wv, sizeof wv) != 0;
  tpuc_test_free_all(o, 2);
  TPUC_CHECK(bad == 0);
}

static void test_region_rules(void) {
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("regions", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){3, 4}, 2);
  tpuc_hlo_value x, zero, izero, y, ra;
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &x));
  TPUC_CHECK_OK(tpuc_hlo_constant_f64(fn, TPUC_DTYPE_F32, 0, &zero));
  TPUC_CHECK_OK(tpuc_hlo_constant_i64(fn, TPUC_DTYPE_S32, 0, &izero));
  tpuc_hlo_type st[2] = {tpuc_hlo_type_scalar(TPUC_DTYPE_F32),
                         tpuc_hlo_type_scalar(TPUC_DTYPE_F32)};
  tpuc_hlo_fn* r;
  TPUC_CHECK_OK(tpuc_hlo_region_create(m, st, 2, &r));
  TPUC_CHECK_OK(tpuc_hlo_get_arg(r, 0, &ra));
  /* a value of @main used in the region, and the other way round */
  TPUC_CHECK_ERROR(tpuc_hlo_binary(r, TPUC_HLO_ADD, ra, zero, &y),
                   TPUC_INVALID_ARGUMENT, "belongs to another body");
  TPUC_CHECK_ERROR(tpuc_hlo_unary(fn, TPUC_HLO_NEG, ra, &y),
                   TPUC_INVALID_ARGUMENT, "belongs to another body");
  TPUC_CHECK_ERROR(tpuc_hlo_arg(r, &st[0], &y), TPUC_INVALID_ARGUMENT,
                   "only be added to @main");
  /* not yet returned */
  TPUC_CHECK_ERROR(tpuc_hlo_reduce(fn, &x, &zero, 1, (int64_t[]){1}, 1, r, &y),
                   TPUC_INVALID_ARGUMENT, "has no return");
  TPUC_CHECK_OK(tpuc_hlo_return(r, &ra, 1));
  /* init dtype and dims */
  TPUC_CHECK_ERROR(tpuc_hlo_reduce(fn, &x, &izero, 1, (int64_t[]){1}, 1, r, &y),
                   TPUC_INVALID_ARGUMENT, "init 0 must be tensor<f32>");
  TPUC_CHECK_ERROR(tpuc_hlo_reduce(fn, &x, &zero, 1, (int64_t[]){2}, 1, r, &y),
                   TPUC_INVALID_ARGUMENT, "dimensions 2 out of range");
  /* a region of the wrong signature */
  tpuc_hlo_fn* ri;
  TPUC_CHECK_OK(tpuc_hlo_region_binary(m, TPUC_DTYPE_S32, TPUC_HLO_ADD, &ri));
  TPUC_CHECK_ERROR(tpuc_hlo_reduce(fn, &x, &zero, 1, (int64_t[]){1}, 1, ri, &y),
                   TPUC_INVALID_ARGUMENT,
                   "body region argument 0 must be tensor<f32>");
  TPUC_CHECK_OK(tpuc_hlo_reduce(fn, &x, &zero, 1, (int64_t[]){1}, 1, r, &y));
  /* attached twice */
  TPUC_CHECK_ERROR(tpuc_hlo_reduce(fn, &x, &zero, 1, (int64_t[]){1}, 1, r, &y),
                   TPUC_INVALID_ARGUMENT, "already attached");
  /* sort comparator must return i1 */
  tpuc_hlo_fn* bad_cmp;
  TPUC_CHECK_OK(
      tpuc_hlo_region_binary(m, TPUC_DTYPE_F32, TPUC_HLO_MAX, &bad_cmp));
  TPUC_CHECK_ERROR(tpuc_hlo_sort(fn, &x, 1, 0, false, bad_cmp, &y),
                   TPUC_INVALID_ARGUMENT, "comparator region result 0");
  TPUC_CHECK_ERROR(tpuc_hlo_sort(fn, &x, 1, 2, false, bad_cmp, &y),
                   TPUC_INVALID_ARGUMENT, "dimension 2 out of range");
  tpuc_hlo_window w = {(int64_t[]){2, 0}, NULL, NULL, NULL, NULL};
  TPUC_CHECK_ERROR(tpuc_hlo_reduce_window(fn, &x, &zero, 1, &w, bad_cmp, &y),
                   TPUC_INVALID_ARGUMENT, "must be positive");
  TPUC_CHECK_OK(tpuc_hlo_return(fn, &y, 1));
  /* unattached regions are not printed; the attached one is */
  char* text;
  TPUC_CHECK_OK(tpuc_hlo_module_print(m, &text, NULL));
  TPUC_CHECK(strstr(text, "stablehlo.maximum") == NULL);
  TPUC_CHECK(strstr(text, "\"stablehlo.return\"(") != NULL);
  free(text);
  tpuc_hlo_module_destroy(m);
}

TPUC_TEST_MAIN(TPUC_TEST(test_reduce_sum_and_argmax),
               TPUC_TEST(test_reduce_window),
               TPUC_TEST(test_select_and_scatter), TPUC_TEST(test_sort),
               TPUC_TEST(test_region_rules))
