/* StableHLO builder: constants, iota and shape ops (broadcast_in_dim,
 * reshape, transpose, slice, dynamic_slice, dynamic_update_slice,
 * concatenate, pad, reverse) run on the CPU plugin against host results. */
#include <stdint.h>

#include "tpuc/hlo.h"
#include "tpuc_test.h"

/* A module over one f32 argument of `dims`; returns fn and the arg. */
static tpuc_status* begin(tpuc_hlo_module** m, tpuc_hlo_fn** fn,
                          tpuc_dtype dtype, const int64_t* dims, int rank,
                          tpuc_hlo_value* x) {
  TPUC_RETURN_IF_ERROR(tpuc_hlo_module_create("shape", m));
  TPUC_RETURN_IF_ERROR(tpuc_hlo_main(*m, fn));
  tpuc_hlo_type t = tpuc_hlo_type_make(dtype, dims, rank);
  return tpuc_hlo_arg(*fn, &t, x);
}

static float g_x24[24]; /* 2x3x4 input: 0..23 */

static void fill(void) {
  for (int i = 0; i < 24; ++i) g_x24[i] = (float)i;
}

static void test_constants_and_iota(void) {
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("consts", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  const int64_t d23[2] = {2, 3};
  tpuc_hlo_type tf = tpuc_hlo_type_make(TPUC_DTYPE_F32, d23, 2);
  tpuc_hlo_type tb = tpuc_hlo_type_make(TPUC_DTYPE_PRED, d23, 2);
  tpuc_hlo_type ti = tpuc_hlo_type_make(TPUC_DTYPE_S64, d23, 2);
  tpuc_hlo_type tu = tpuc_hlo_type_make(TPUC_DTYPE_U64, d23, 2);
  tpuc_hlo_type te = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){0, 3}, 2);
  const float vf[6] = {1.5f, -2, 3.25f, 1e30f, -0.0f, 7};
  const uint8_t vb[6] = {1, 0, 0, 1, 1, 0};
  const int64_t big = INT64_MIN + 5;
  tpuc_hlo_value y[9];
  TPUC_CHECK_OK(tpuc_hlo_constant(fn, &tf, vf, sizeof vf, &y[0]));
  TPUC_CHECK_OK(tpuc_hlo_constant(fn, &tb, vb, sizeof vb, &y[1]));
  TPUC_CHECK_OK(tpuc_hlo_constant_splat(fn, &ti, &big, &y[2]));
  TPUC_CHECK_OK(tpuc_hlo_iota(fn, &ti, 1, &y[3]));
  TPUC_CHECK_OK(tpuc_hlo_iota(fn, &tf, 0, &y[4]));
  TPUC_CHECK_OK(tpuc_hlo_constant(fn, &te, NULL, 0, &y[5]));
  TPUC_CHECK_OK(tpuc_hlo_constant_i64(fn, TPUC_DTYPE_U64, INT64_MAX, &y[6]));
  TPUC_CHECK_OK(tpuc_hlo_constant_f64(fn, TPUC_DTYPE_F16, -2.5, &y[7]));
  const uint64_t ub = UINT64_MAX - 1;
  TPUC_CHECK_OK(tpuc_hlo_constant_splat(fn, &tu, &ub, &y[8]));
  TPUC_CHECK_OK(tpuc_hlo_return(fn, y, 9));
  void* o[9];
  TPUC_CHECK_OK(tpuc_test_run_module(m, NULL, 0, o, 9));
  tpuc_hlo_module_destroy(m);
  int bad = memcmp(o[0], vf, sizeof vf) != 0;
  bad += memcmp(o[1], vb, sizeof vb) != 0;
  for (int k = 0; k < 6; ++k) {
    bad += ((int64_t*)o[2])[k] != big;
    bad += ((int64_t*)o[3])[k] != k % 3;
    bad += ((float*)o[4])[k] != (float)(k / 3);
    bad += ((uint64_t*)o[8])[k] != ub;
  }
  bad += *(uint64_t*)o[6] != (uint64_t)INT64_MAX;
  bad += *(uint16_t*)o[7] != 0xC100; /* -2.5 in f16 */
  tpuc_test_free_all(o, 9);
  TPUC_CHECK(bad == 0);
}

static void test_broadcast_reshape_transpose(void) {
  fill();
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  tpuc_hlo_value x, y[3], row;
  const int64_t d[3] = {2, 3, 4};
  TPUC_CHECK_OK(begin(&m, &fn, TPUC_DTYPE_F32, d, 3, &x));
  /* transpose (2,3,4) -> (4,2,3) */
  TPUC_CHECK_OK(tpuc_hlo_transpose(fn, x, (int64_t[]){2, 0, 1}, &y[0]));
  /* reshape to (6,4) */
  TPUC_CHECK_OK(tpuc_hlo_reshape(fn, x, (int64_t[]){6, 4}, 2, &y[1]));
  /* slice row x[1, 2, :] as (1,1,4) -> reshape (4) -> broadcast (3,4,2) */
  TPUC_CHECK_OK(tpuc_hlo_slice(fn, x, (int64_t[]){1, 2, 0},
                               (int64_t[]){2, 3, 4}, NULL, &row));
  TPUC_CHECK_OK(tpuc_hlo_reshape(fn, row, (int64_t[]){4}, 1, &row));
  TPUC_CHECK_OK(tpuc_hlo_broadcast_in_dim(fn, row, (int64_t[]){3, 4, 2}, 3,
                                          (int64_t[]){1}, &y[2]));
  TPUC_CHECK_OK(tpuc_hlo_return(fn, y, 3));
  tpuc_test_arg a = {TPUC_DTYPE_F32, 3, {2, 3, 4}, g_x24};
  void* o[3];
  TPUC_CHECK_OK(tpuc_test_run_module(m, &a, 1, o, 3));
  tpuc_hlo_module_destroy(m);
  int bad = 0;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        bad +=
            ((float*)o[0])[(k * 2 + i) * 3 + j] != g_x24[(i * 3 + j) * 4 + k];
  bad += memcmp(o[1], g_x24, sizeof g_x24) != 0;
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 2; ++j)
        bad +=
            ((float*)o[2])[(i * 4 + k) * 2 + j] != g_x24[(1 * 3 + 2) * 4 + k];
  tpuc_test_free_all(o, 3);
  TPUC_CHECK(bad == 0);
}

static void test_slice_reverse_concat(void) {
  fill();
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  tpuc_hlo_value x, y[3], parts[3];
  const int64_t d[3] = {2, 3, 4};
  TPUC_CHECK_OK(begin(&m, &fn, TPUC_DTYPE_F32, d, 3, &x));
  /* strided slice x[0:2, 0:3:2, 1:4:2] -> (2,2,2) */
  TPUC_CHECK_OK(tpuc_hlo_slice(fn, x, (int64_t[]){0, 0, 1},
                               (int64_t[]){2, 3, 4}, (int64_t[]){1, 2, 2},
                               &y[0]));
  TPUC_CHECK_OK(tpuc_hlo_reverse(fn, x, (int64_t[]){0, 2}, 2, &y[1]));
  /* concat [x, reverse(x), x] along dim 1 -> (2,9,4) */
  parts[0] = x;
  parts[1] = y[1];
  parts[2] = x;
  TPUC_CHECK_OK(tpuc_hlo_concatenate(fn, parts, 3, 1, &y[2]));
  tpuc_hlo_type t;
  TPUC_CHECK_OK(tpuc_hlo_value_type(fn, y[2], &t));
  TPUC_CHECK(t.rank == 3 && t.dims[1] == 9);
  TPUC_CHECK_OK(tpuc_hlo_return(fn, y, 3));
  tpuc_test_arg a = {TPUC_DTYPE_F32, 3, {2, 3, 4}, g_x24};
  void* o[3];
  TPUC_CHECK_OK(tpuc_test_run_module(m, &a, 1, o, 3));
  tpuc_hlo_module_destroy(m);
  int bad = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 2; ++k)
        bad += ((float*)o[0])[(i * 2 + j) * 2 + k] !=
               g_x24[(i * 3 + 2 * j) * 4 + 1 + 2 * k];
  float rev[24];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        rev[(i * 3 + j) * 4 + k] = g_x24[((1 - i) * 3 + j) * 4 + (3 - k)];
  bad += memcmp(o[1], rev, sizeof rev) != 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 9; ++j)
      for (int k = 0; k < 4; ++k) {
        const float* src = j / 3 == 1 ? rev : g_x24;
        bad +=
            ((float*)o[2])[(i * 9 + j) * 4 + k] != src[(i * 3 + j % 3) * 4 + k];
      }
  tpuc_test_free_all(o, 3);
  TPUC_CHECK(bad == 0);
}

static void test_pad(void) {
  /* 1-D x = [1,2,3,4]: lo 2, hi -1, interior 1 -> [p,p,1,p,2,p,3,p] */
  /* 2-D (2,3): lo (-1, 1), hi (0, 0), interior (0, 2) */
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  tpuc_hlo_value x, x2, pv, y[2];
  TPUC_CHECK_OK(begin(&m, &fn, TPUC_DTYPE_S32, (int64_t[]){4}, 1, &x));
  tpuc_hlo_type t2 = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){2, 3}, 2);
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t2, &x2));
  TPUC_CHECK_OK(tpuc_hlo_constant_i64(fn, TPUC_DTYPE_S32, -9, &pv));
  TPUC_CHECK_OK(tpuc_hlo_pad(fn, x, pv, (int64_t[]){2}, (int64_t[]){-1},
                             (int64_t[]){1}, &y[0]));
  TPUC_CHECK_OK(tpuc_hlo_pad(fn, x2, pv, (int64_t[]){-1, 1}, (int64_t[]){0, 0},
                             (int64_t[]){0, 2}, &y[1]));
  tpuc_hlo_type t;
  TPUC_CHECK_OK(tpuc_hlo_value_type(fn, y[0], &t));
  TPUC_CHECK(t.dims[0] == 8);
  TPUC_CHECK_OK(tpuc_hlo_value_type(fn, y[1], &t));
  TPUC_CHECK(t.dims[0] == 1 && t.dims[1] == 8);
  TPUC_CHECK_OK(tpuc_hlo_return(fn, y, 2));
  const int32_t v[4] = {1, 2, 3, 4}, v2[6] = {1, 2, 3, 4, 5, 6};
  tpuc_test_arg a[2] = {{TPUC_DTYPE_S32, 1, {4}, v},
                        {TPUC_DTYPE_S32, 2, {2, 3}, v2}};
  void* o[2];
  TPUC_CHECK_OK(tpuc_test_run_module(m, a, 2, o, 2));
  tpuc_hlo_module_destroy(m);
  const int32_t w0[8] = {-9, -9, 1, -9, 2, -9, 3, -9};
  const int32_t w1[8] = {-9, 4, -9, -9, 5, -9, -9, 6};
  int bad = memcmp(o[0], w0, sizeof w0) != 0;
  bad += memcmp(o[1], w1, sizeof w1) != 0;
  tpuc_test_free_all(o, 2);
  TPUC_CHECK(bad == 0);
}

static void test_dynamic_slices(void) {
  fill();
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  tpuc_hlo_value x, upd, s[3], y[2];
  const int64_t d[3] = {2, 3, 4};
  TPUC_CHECK_OK(begin(&m, &fn, TPUC_DTYPE_F32, d, 3, &x));
  tpuc_hlo_type tu =
      tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){1, 2, 2}, 3);
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tu, &upd));
  tpuc_hlo_type ts = tpuc_hlo_type_scalar(TPUC_DTYPE_S32);
  for (int i = 0; i < 3; ++i) TPUC_CHECK_OK(tpuc_hlo_arg(fn, &ts, &s[i]));
  TPUC_CHECK_OK(tpuc_hlo_dynamic_slice(fn, x, s, (int64_t[]){1, 2, 3}, &y[0]));
  TPUC_CHECK_OK(tpuc_hlo_dynamic_update_slice(fn, x, upd, s, &y[1]));
  TPUC_CHECK_OK(tpuc_hlo_return(fn, y, 2));
  /* start (1, 1, 3): the last index clamps to 4 - 3 = 1 for the slice and
   * to 4 - 2 = 2 for the update */
  const int32_t i0 = 1, i1 = 1, i2 = 3;
  const float u[4] = {100, 101, 102, 103};
  tpuc_test_arg a[5] = {{TPUC_DTYPE_F32, 3, {2, 3, 4}, g_x24},
                        {TPUC_DTYPE_F32, 3, {1, 2, 2}, u},
                        {TPUC_DTYPE_S32, 0, {0}, &i0},
                        {TPUC_DTYPE_S32, 0, {0}, &i1},
                        {TPUC_DTYPE_S32, 0, {0}, &i2}};
  void* o[2];
  TPUC_CHECK_OK(tpuc_test_run_module(m, a, 5, o, 2));
  tpuc_hlo_module_destroy(m);
  int bad = 0;
  for (int j = 0; j < 2; ++j)
    for (int k = 0; k < 3; ++k)
      bad += ((float*)o[0])[j * 3 + k] != g_x24[(1 * 3 + 1 + j) * 4 + 1 + k];
  float w[24];
  memcpy(w, g_x24, sizeof w);
  for (int j = 0; j < 2; ++j)
    for (int k = 0; k < 2; ++k) w[(1 * 3 + 1 + j) * 4 + 2 + k] = u[j * 2 + k];
  bad += memcmp(o[1], w, sizeof w) != 0;
  tpuc_test_free_all(o, 2);
  TPUC_CHECK(bad == 0);
}

static void test_shape_validation(void) {
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  tpuc_hlo_value x, y, f, i;
  TPUC_CHECK_OK(begin(&m, &fn, TPUC_DTYPE_F32, (int64_t[]){2, 3}, 2, &x));
  TPUC_CHECK_OK(tpuc_hlo_constant_f64(fn, TPUC_DTYPE_F64, 0.5, &f));
  TPUC_CHECK_OK(tpuc_hlo_constant_i64(fn, TPUC_DTYPE_S32, 0, &i));
  TPUC_CHECK_ERROR(tpuc_hlo_reshape(fn, x, (int64_t[]){5}, 1, &y),
                   TPUC_INVALID_ARGUMENT, "stablehlo.reshape: operand has 6");
  TPUC_CHECK_ERROR(tpuc_hlo_transpose(fn, x, (int64_t[]){0, 0}, &y),
                   TPUC_INVALID_ARGUMENT, "repeats dim");
  TPUC_CHECK_ERROR(tpuc_hlo_transpose(fn, x, (int64_t[]){0, 2}, &y),
                   TPUC_INVALID_ARGUMENT, "out of range");
  TPUC_CHECK_ERROR(tpuc_hlo_broadcast_in_dim(fn, x, (int64_t[]){2, 4}, 2,
                                             (int64_t[]){0, 1}, &y),
                   TPUC_INVALID_ARGUMENT, "cannot broadcast");
  TPUC_CHECK_ERROR(tpuc_hlo_broadcast_in_dim(fn, x, (int64_t[]){3}, 1,
                                             (int64_t[]){0, 1}, &y),
                   TPUC_INVALID_ARGUMENT, "exceeds result rank");
  TPUC_CHECK_ERROR(
      tpuc_hlo_slice(fn, x, (int64_t[]){0, 2}, (int64_t[]){2, 1}, NULL, &y),
      TPUC_INVALID_ARGUMENT, "dim 1");
  TPUC_CHECK_ERROR(tpuc_hlo_slice(fn, x, (int64_t[]){0, 0}, (int64_t[]){2, 3},
                                  (int64_t[]){1, 0}, &y),
                   TPUC_INVALID_ARGUMENT, "stride");
  TPUC_CHECK_ERROR(
      tpuc_hlo_pad(fn, x, f, (int64_t[]){0, 0}, (int64_t[]){0, 0}, NULL, &y),
      TPUC_INVALID_ARGUMENT, "tensor<f32>");
  tpuc_hlo_value fz;
  TPUC_CHECK_OK(tpuc_hlo_constant_f64(fn, TPUC_DTYPE_F32, 0, &fz));
  TPUC_CHECK_ERROR(
      tpuc_hlo_pad(fn, x, fz, (int64_t[]){-2, 0}, (int64_t[]){-1, 0}, NULL, &y),
      TPUC_INVALID_ARGUMENT, "negative");
  TPUC_CHECK_ERROR(tpuc_hlo_pad(fn, x, fz, (int64_t[]){0, 0}, (int64_t[]){0, 0},
                                (int64_t[]){0, -1}, &y),
                   TPUC_INVALID_ARGUMENT, "interior");
  tpuc_hlo_value xs[2] = {x, f};
  TPUC_CHECK_ERROR(tpuc_hlo_concatenate(fn, xs, 2, 0, &y),
                   TPUC_INVALID_ARGUMENT, "input 1");
  TPUC_CHECK_ERROR(tpuc_hlo_concatenate(fn, xs, 1, 2, &y),
                   TPUC_INVALID_ARGUMENT, "dimension 2 out of range");
  tpuc_hlo_value st[2] = {i, f};
  TPUC_CHECK_ERROR(tpuc_hlo_dynamic_slice(fn, x, st, (int64_t[]){1, 1}, &y),
                   TPUC_INVALID_ARGUMENT, "start index 1");
  st[1] = i;
  TPUC_CHECK_ERROR(tpuc_hlo_dynamic_slice(fn, x, st, (int64_t[]){1, 4}, &y),
                   TPUC_INVALID_ARGUMENT, "slice size");
  TPUC_CHECK_ERROR(tpuc_hlo_reverse(fn, x, (int64_t[]){3}, 1, &y),
                   TPUC_INVALID_ARGUMENT, "stablehlo.reverse");
  tpuc_hlo_type bad_t = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){-1}, 1);
  TPUC_CHECK_ERROR(tpuc_hlo_iota(fn, &bad_t, 0, &y), TPUC_INVALID_ARGUMENT,
                   "negative dim");
  bad_t = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){4}, 1);
  TPUC_CHECK_ERROR(tpuc_hlo_iota(fn, &bad_t, 1, &y), TPUC_INVALID_ARGUMENT,
                   "iota_dimension");
  TPUC_CHECK_ERROR(tpuc_hlo_constant(fn, &bad_t, "abc", 3, &y),
                   TPUC_INVALID_ARGUMENT, "3 bytes given for 4 elements");
  TPUC_CHECK_ERROR(tpuc_hlo_constant_f64(fn, TPUC_DTYPE_U8, 256, &y),
                   TPUC_INVALID_ARGUMENT, "out of range for ui8");
  TPUC_CHECK_ERROR(tpuc_hlo_constant_f64(fn, TPUC_DTYPE_S32, 0.5, &y),
                   TPUC_INVALID_ARGUMENT, "not an integer");
  tpuc_hlo_type big = tpuc_hlo_type_make(TPUC_DTYPE_F32, NULL, 17);
  TPUC_CHECK_ERROR(tpuc_hlo_arg(fn, &big, &y), TPUC_INVALID_ARGUMENT,
                   "rank -1");
  tpuc_hlo_module_destroy(m);
}

TPUC_TEST_MAIN(TPUC_TEST(test_constants_and_iota),
               TPUC_TEST(test_broadcast_reshape_transpose),
               TPUC_TEST(test_slice_reverse_concat), TPUC_TEST(test_pad),
               TPUC_TEST(test_dynamic_slices), TPUC_TEST(test_shape_validation))
