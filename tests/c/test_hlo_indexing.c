/* StableHLO builder: gather and scatter run on the CPU plugin against host
 * results. */
#include <stdint.h>

#include "tpuc/hlo.h"
#include "tpuc_test.h"

static void test_gather(void) {
  /* table (5,3); row lookup with indices (4,1) -> (4,3); the same with
   * implicit index vector (indices (4), index_vector_dim = 1); and a 2-D
   * window gather of (2,2) patches at (row, col) pairs; and a batched
   * gather: operand (2,5), indices (2,3) picks per batch row. */
  float tab[15];
  for (int i = 0; i < 15; ++i) tab[i] = (float)i * 1.5f;
  const int32_t rows[4] = {4, 0, 2, 4};
  const int64_t pairs[4] = {0, 1, 3, 0};
  const int32_t bidx[6] = {4, 0, 1, 2, 2, 3};
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("gather", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type tt = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){5, 3}, 2);
  tpuc_hlo_type ti = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){4, 1}, 2);
  tpuc_hlo_type tv = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){4}, 1);
  tpuc_hlo_type tp = tpuc_hlo_type_make(TPUC_DTYPE_S64, (int64_t[]){2, 2}, 2);
  tpuc_hlo_type tb = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){2, 5}, 2);
  tpuc_hlo_type tbi = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){2, 3}, 2);
  tpuc_hlo_value t, i, v, p, b, bi, y[4];
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tt, &t));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &ti, &i));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tv, &v));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tp, &p));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tb, &b));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tbi, &bi));
  tpuc_hlo_gather_dims g = {0};
  g.offset_dims = (int64_t[]){1};
  g.num_offset_dims = 1;
  g.collapsed_slice_dims = (int64_t[]){0};
  g.num_collapsed_slice_dims = 1;
  g.start_index_map = (int64_t[]){0};
  g.num_start_index_map = 1;
  g.index_vector_dim = 1;
  TPUC_CHECK_OK(tpuc_hlo_gather(fn, t, i, &g, (int64_t[]){1, 3}, false, &y[0]));
  TPUC_CHECK_OK(tpuc_hlo_gather(fn, t, v, &g, (int64_t[]){1, 3}, false, &y[1]));
  tpuc_hlo_gather_dims g2 = {0};
  g2.offset_dims = (int64_t[]){1, 2};
  g2.num_offset_dims = 2;
  g2.start_index_map = (int64_t[]){0, 1};
  g2.num_start_index_map = 2;
  g2.index_vector_dim = 1;
  TPUC_CHECK_OK(tpuc_hlo_gather(fn, t, p, &g2, (int64_t[]){2, 2}, true, &y[2]));
  tpuc_hlo_gather_dims g3 = {0};
  g3.collapsed_slice_dims = (int64_t[]){1};
  g3.num_collapsed_slice_dims = 1;
  g3.operand_batching_dims = (int64_t[]){0};
  g3.num_operand_batching_dims = 1;
  g3.start_indices_batching_dims = (int64_t[]){0};
  g3.num_start_indices_batching_dims = 1;
  g3.start_index_map = (int64_t[]){1};
  g3.num_start_index_map = 1;
  g3.index_vector_dim = 2;
  TPUC_CHECK_OK(
      tpuc_hlo_gather(fn, b, bi, &g3, (int64_t[]){1, 1}, false, &y[3]));
  tpuc_hlo_type rt;
  TPUC_CHECK_OK(tpuc_hlo_value_type(fn, y[2], &rt));
  TPUC_CHECK(rt.rank == 3 && rt.dims[0] == 2 && rt.dims[1] == 2 &&
             rt.dims[2] == 2);
  TPUC_CHECK_OK(tpuc_hlo_value_type(fn, y[3], &rt));
  TPUC_CHECK(rt.rank == 2 && rt.dims[0] == 2 && rt.dims[1] == 3);
  TPUC_CHECK_OK(tpuc_hlo_return(fn, y, 4));
  tpuc_test_arg args[6] = {
      {TPUC_DTYPE_F32, 2, {5, 3}, tab}, {TPUC_DTYPE_S32, 2, {4, 1}, rows},
      {TPUC_DTYPE_S32, 1, {4}, rows},   {TPUC_DTYPE_S64, 2, {2, 2}, pairs},
      {TPUC_DTYPE_F32, 2, {2, 5}, tab}, {TPUC_DTYPE_S32, 2, {2, 3}, bidx}};
  void* o[4];
  TPUC_CHECK_OK(tpuc_test_run_module(m, args, 6, o, 4));
  tpuc_hlo_module_destroy(m);
  int bad = 0;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) {
      bad += ((float*)o[0])[r * 3 + c] != tab[rows[r] * 3 + c];
      bad += ((float*)o[1])[r * 3 + c] != tab[rows[r] * 3 + c];
    }
  for (int n = 0; n < 2; ++n) {
    /* start clamps so the 2x2 window fits: row <= 3, col <= 1 */
    int64_t r0 = pairs[2 * n] > 3 ? 3 : pairs[2 * n];
    int64_t c0 = pairs[2 * n + 1] > 1 ? 1 : pairs[2 * n + 1];
    for (int a = 0; a < 2; ++a)
      for (int c = 0; c < 2; ++c)
        bad +=
            ((float*)o[2])[(n * 2 + a) * 2 + c] != tab[(r0 + a) * 3 + c0 + c];
  }
  for (int n = 0; n < 2; ++n)
    for (int j = 0; j < 3; ++j)
      bad += ((float*)o[3])[n * 3 + j] != tab[n * 5 + bidx[n * 3 + j]];
  tpuc_test_free_all(o, 4);
  TPUC_CHECK(bad == 0);
}

static void test_scatter(void) {
  /* scatter-add rows into (5,3) with a duplicate index, and a two-operand
   * scatter that overwrites (i32 and f32 together) */
  float base[15] = {0};
  for (int i = 0; i < 15; ++i) base[i] = (float)i;
  const int32_t idx[3] = {1, 3, 1};
  float upd[9];
  for (int i = 0; i < 9; ++i) upd[i] = 10.0f * (float)(i + 1);
  int32_t ibase[15] = {0};
  int32_t iupd[9];
  for (int i = 0; i < 9; ++i) iupd[i] = -(i + 1);
  const int32_t idx2[2] = {4, 0};
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("scatter", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type tb = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){5, 3}, 2);
  tpuc_hlo_type tib = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){5, 3}, 2);
  tpuc_hlo_type ti = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){3, 1}, 2);
  tpuc_hlo_type ti2 = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){2}, 1);
  tpuc_hlo_type tu = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){3, 3}, 2);
  tpuc_hlo_type tiu = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){3, 3}, 2);
  tpuc_hlo_value b, ib, i, i2, u, iu, y[3], u2, iu2;
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tb, &b));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tib, &ib));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &ti, &i));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &ti2, &i2));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tu, &u));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tiu, &iu));
  tpuc_hlo_scatter_dims s = {0};
  s.update_window_dims = (int64_t[]){1};
  s.num_update_window_dims = 1;
  s.inserted_window_dims = (int64_t[]){0};
  s.num_inserted_window_dims = 1;
  s.scatter_dims_to_operand_dims = (int64_t[]){0};
  s.num_scatter_dims_to_operand_dims = 1;
  s.index_vector_dim = 1;
  tpuc_hlo_fn* add;
  TPUC_CHECK_OK(tpuc_hlo_region_binary(m, TPUC_DTYPE_F32, TPUC_HLO_ADD, &add));
  TPUC_CHECK_OK(tpuc_hlo_scatter(fn, &b, 1, i, &u, &s, add, &y[0]));
  /* overwrite rows 4 and 0 of both operands with the first two update rows;
   * region returns the update values (args 2 and 3) */
  TPUC_CHECK_OK(
      tpuc_hlo_slice(fn, u, (int64_t[]){0, 0}, (int64_t[]){2, 3}, NULL, &u2));
  TPUC_CHECK_OK(
      tpuc_hlo_slice(fn, iu, (int64_t[]){0, 0}, (int64_t[]){2, 3}, NULL, &iu2));
  tpuc_hlo_type rt[4] = {tpuc_hlo_type_scalar(TPUC_DTYPE_F32),
                         tpuc_hlo_type_scalar(TPUC_DTYPE_S32),
                         tpuc_hlo_type_scalar(TPUC_DTYPE_F32),
                         tpuc_hlo_type_scalar(TPUC_DTYPE_S32)};
  tpuc_hlo_fn* set;
  TPUC_CHECK_OK(tpuc_hlo_region_create(m, rt, 4, &set));
  tpuc_hlo_value rv[2];
  TPUC_CHECK_OK(tpuc_hlo_get_arg(set, 2, &rv[0]));
  TPUC_CHECK_OK(tpuc_hlo_get_arg(set, 3, &rv[1]));
  TPUC_CHECK_OK(tpuc_hlo_return(set, rv, 2));
  s.index_vector_dim = 1; /* == rank of i2: implicit index vector */
  s.unique_indices = true;
  tpuc_hlo_value ins[2] = {b, ib}, ups[2] = {u2, iu2};
  TPUC_CHECK_OK(tpuc_hlo_scatter(fn, ins, 2, i2, ups, &s, set, &y[1]));
  TPUC_CHECK_OK(tpuc_hlo_return(fn, y, 3));
  tpuc_test_arg args[6] = {
      {TPUC_DTYPE_F32, 2, {5, 3}, base}, {TPUC_DTYPE_S32, 2, {5, 3}, ibase},
      {TPUC_DTYPE_S32, 2, {3, 1}, idx},  {TPUC_DTYPE_S32, 1, {2}, idx2},
      {TPUC_DTYPE_F32, 2, {3, 3}, upd},  {TPUC_DTYPE_S32, 2, {3, 3}, iupd}};
  void* o[3];
  TPUC_CHECK_OK(tpuc_test_run_module(m, args, 6, o, 3));
  tpuc_hlo_module_destroy(m);
  float w0[15], w1[15];
  int32_t w2[15];
  memcpy(w0, base, sizeof w0);
  memcpy(w1, base, sizeof w1);
  memcpy(w2, ibase, sizeof w2);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) w0[idx[r] * 3 + c] += upd[r * 3 + c];
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) {
      w1[idx2[r] * 3 + c] = upd[r * 3 + c];
      w2[idx2[r] * 3 + c] = iupd[r * 3 + c];
    }
  int bad = memcmp(o[0], w0, sizeof w0) != 0;
  bad += memcmp(o[1], w1, sizeof w1) != 0;
  bad += memcmp(o[2], w2, sizeof w2) != 0;
  tpuc_test_free_all(o, 3);
  TPUC_CHECK(bad == 0);
}

static void test_indexing_validation(void) {
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("bad", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type tt = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){5, 3}, 2);
  tpuc_hlo_type ti = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){4, 1}, 2);
  tpuc_hlo_type tf = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){4, 1}, 2);
  tpuc_hlo_type tu = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){4, 2}, 2);
  tpuc_hlo_value t, i, f, u, y;
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tt, &t));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &ti, &i));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tf, &f));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tu, &u));
  tpuc_hlo_gather_dims g = {0};
  g.offset_dims = (int64_t[]){1};
  g.num_offset_dims = 1;
  g.collapsed_slice_dims = (int64_t[]){0};
  g.num_collapsed_slice_dims = 1;
  g.start_index_map = (int64_t[]){0};
  g.num_start_index_map = 1;
  g.index_vector_dim = 1;
  TPUC_CHECK_ERROR(tpuc_hlo_gather(fn, t, f, &g, (int64_t[]){1, 3}, false, &y),
                   TPUC_INVALID_ARGUMENT,
                   "stablehlo.gather: indices dtype f32");
  TPUC_CHECK_ERROR(tpuc_hlo_gather(fn, t, i, &g, (int64_t[]){2, 3}, false, &y),
                   TPUC_INVALID_ARGUMENT, "must be 0 or 1");
  TPUC_CHECK_ERROR(tpuc_hlo_gather(fn, t, i, &g, (int64_t[]){1, 4}, false, &y),
                   TPUC_INVALID_ARGUMENT, "slice_sizes[1] = 4");
  g.index_vector_dim = 3;
  TPUC_CHECK_ERROR(tpuc_hlo_gather(fn, t, i, &g, (int64_t[]){1, 3}, false, &y),
                   TPUC_INVALID_ARGUMENT, "index_vector_dim 3");
  g.index_vector_dim = 1;
  g.num_offset_dims = 0;
  TPUC_CHECK_ERROR(tpuc_hlo_gather(fn, t, i, &g, (int64_t[]){1, 3}, false, &y),
                   TPUC_INVALID_ARGUMENT, "offset_dims has 0 entries");
  tpuc_hlo_scatter_dims s = {0};
  s.update_window_dims = (int64_t[]){1};
  s.num_update_window_dims = 1;
  s.inserted_window_dims = (int64_t[]){0};
  s.num_inserted_window_dims = 1;
  s.scatter_dims_to_operand_dims = (int64_t[]){0};
  s.num_scatter_dims_to_operand_dims = 1;
  s.index_vector_dim = 1;
  tpuc_hlo_fn* add;
  TPUC_CHECK_OK(tpuc_hlo_region_binary(m, TPUC_DTYPE_F32, TPUC_HLO_ADD, &add));
  /* update window (2) fits the operand's 3 columns: fine; 4 rows of
   * updates match the 4 indices */
  tpuc_hlo_value ok;
  tpuc_hlo_fn* add2;
  TPUC_CHECK_OK(tpuc_hlo_region_binary(m, TPUC_DTYPE_S32, TPUC_HLO_ADD, &add2));
  TPUC_CHECK_ERROR(tpuc_hlo_scatter(fn, &t, 1, i, &u, &s, add2, &ok),
                   TPUC_INVALID_ARGUMENT, "body region argument 0");
  TPUC_CHECK_ERROR(tpuc_hlo_scatter(fn, &t, 1, i, &t, &s, add, &ok),
                   TPUC_INVALID_ARGUMENT, "must match the indices' batch");
  TPUC_CHECK_OK(tpuc_hlo_scatter(fn, &t, 1, i, &u, &s, add, &ok));
  tpuc_hlo_module_destroy(m);
}

TPUC_TEST_MAIN(TPUC_TEST(test_gather), TPUC_TEST(test_scatter),
               TPUC_TEST(test_indexing_validation))
