/* Native ops through tpuc_op_run (no PyTorch): promotion, broadcasting,
 * strided views read inside the program, scalars as arguments, errors. */
#include "tpuc_test.h"

static tpuc_storage* f32_storage(const float* v, size_t n) {
  tpuc_storage* s = NULL;
  tpuc_status* st =
      tpuc_storage_create(tpuc_test_client(), 0, n * sizeof(float), &s);
  if (st == NULL) st = tpuc_storage_write(s, 0, n * sizeof(float), v);
  if (st) {
    fprintf(stderr, "%s\n", tpuc_status_message(st));
    tpuc_status_free(st);
  }
  return s;
}

static tpuc_op_arg tensor_arg(tpuc_storage* s, tpuc_dtype dt, int rank,
                              const int64_t* sizes, const int64_t* strides,
                              int64_t offset) {
  tpuc_op_arg a;
  memset(&a, 0, sizeof a);
  a.kind = TPUC_OP_ARG_TENSOR;
  a.view.storage = s;
  a.view.dtype = dt;
  a.view.rank = rank;
  for (int i = 0; i < rank; i++) {
    a.view.sizes[i] = sizes[i];
    a.view.strides[i] = strides[i];
  }
  a.view.offset = offset;
  return a;
}

static const tpuc_op_options kOpts = {.default_float = TPUC_DTYPE_F32,
                                      .matmul_precision =
                                          TPUC_HLO_PRECISION_HIGHEST};

static void test_promote_types(void) {
  TPUC_CHECK(tpuc_promote_types(TPUC_DTYPE_U8, TPUC_DTYPE_S8) ==
             TPUC_DTYPE_S16);
  TPUC_CHECK(tpuc_promote_types(TPUC_DTYPE_F16, TPUC_DTYPE_BF16) ==
             TPUC_DTYPE_F32);
  TPUC_CHECK(tpuc_promote_types(TPUC_DTYPE_S64, TPUC_DTYPE_F16) ==
             TPUC_DTYPE_F16);
  TPUC_CHECK(tpuc_promote_types(TPUC_DTYPE_PRED, TPUC_DTYPE_U8) ==
             TPUC_DTYPE_U8);
  TPUC_CHECK(tpuc_promote_types(TPUC_DTYPE_C64, TPUC_DTYPE_F64) ==
             TPUC_DTYPE_C128);
  TPUC_CHECK(tpuc_promote_types(TPUC_DTYPE_U32, TPUC_DTYPE_S32) ==
             TPUC_DTYPE_INVALID);
  TPUC_CHECK(tpuc_op_find("aten::add.Tensor") >= 0);
  TPUC_CHECK(tpuc_op_find("aten::no_such_op") == -1);
  TPUC_CHECK(tpuc_op_table_size() > 10);
}

/* a[2x3 transposed view of a 3x2 storage] + b[3] * alpha(2.0) */
static void test_add_views_broadcast_alpha(void) {
  const float av[6] = {0, 1, 2, 3, 4, 5}; /* 3x2 row-major */
  const float bv[3] = {10, 20, 30};
  tpuc_storage* sa = f32_storage(av, 6);
  tpuc_storage* sb = f32_storage(bv, 3);
  int64_t ts[2] = {2, 3}, tt[2] = {1, 2}, bs[1] = {3}, bt[1] = {1};
  tpuc_op_arg args[3];
  args[0] = tensor_arg(sa, TPUC_DTYPE_F32, 2, ts, tt, 0);
  args[1] = tensor_arg(sb, TPUC_DTYPE_F32, 1, bs, bt, 0);
  memset(&args[2], 0, sizeof args[2]);
  args[2].kind = TPUC_OP_ARG_SCALAR;
  args[2].scalar = TPUC_SCALAR_FLOAT;
  args[2].f = 2.0;
  tpuc_op_result r[1];
  size_t n = 0;
  TPUC_CHECK_OK(tpuc_op_run(tpuc_test_client(), 0,
                            tpuc_op_find("aten::add.Tensor"), args, 3, &kOpts,
                            r, 1, &n));
  TPUC_CHECK(n == 1 && r[0].dtype == TPUC_DTYPE_F32 && r[0].rank == 2);
  TPUC_CHECK(r[0].sizes[0] == 2 && r[0].sizes[1] == 3);
  float out[6];
  TPUC_CHECK_OK(tpuc_buffer_to_host(r[0].value, out, sizeof out));
  tpuc_buffer_release(r[0].value);
  /* transpose of [[0,1],[2,3],[4,5]] is [[0,2,4],[1,3,5]] */
  const float want[6] = {20, 42, 64, 21, 43, 65};
  TPUC_CHECK(memcmp(out, want, sizeof want) == 0);
  tpuc_storage_release(sa);
  tpuc_storage_release(sb);
}

static void test_int_true_division_and_compare(void) {
  tpuc_storage* s = NULL;
  int32_t iv[4] = {1, 2, 3, 4};
  TPUC_CHECK_OK(tpuc_storage_create(tpuc_test_client(), 0, sizeof iv, &s));
  TPUC_CHECK_OK(tpuc_storage_write(s, 0, sizeof iv, iv));
  int64_t sz[1] = {4}, st[1] = {1};
  tpuc_op_arg args[2];
  args[0] = tensor_arg(s, TPUC_DTYPE_S32, 1, sz, st, 0);
  memset(&args[1], 0, sizeof args[1]);
  args[1].kind = TPUC_OP_ARG_SCALAR;
  args[1].scalar = TPUC_SCALAR_INT;
  args[1].i = 2;
  tpuc_op_result r[1];
  size_t n = 0;
  TPUC_CHECK_OK(tpuc_op_run(tpuc_test_client(), 0,
                            tpuc_op_find("aten::div.Tensor"), args, 2, &kOpts,
                            r, 1, &n));
  TPUC_CHECK(r[0].dtype == TPUC_DTYPE_F32);
  float f[4];
  TPUC_CHECK_OK(tpuc_buffer_to_host(r[0].value, f, sizeof f));
  tpuc_buffer_release(r[0].value);
  TPUC_CHECK(f[0] == 0.5f && f[3] == 2.0f);
  TPUC_CHECK_OK(tpuc_op_run(tpuc_test_client(), 0,
                            tpuc_op_find("aten::gt.Scalar"), args, 2, &kOpts, r,
                            1, &n));
  TPUC_CHECK(r[0].dtype == TPUC_DTYPE_PRED);
  unsigned char b[4];
  TPUC_CHECK_OK(tpuc_buffer_to_host(r[0].value, b, sizeof b));
  tpuc_buffer_release(r[0].value);
  TPUC_CHECK(b[0] == 0 && b[1] == 0 && b[2] == 1 && b[3] == 1);
  tpuc_storage_release(s);
}

static void test_errors_and_unimplemented(void) {
  const float v[6] = {0};
  tpuc_storage* s = f32_storage(v, 6);
  int64_t a[1] = {3}, b[1] = {2}, one[1] = {1};
  tpuc_op_arg args[2] = {tensor_arg(s, TPUC_DTYPE_F32, 1, a, one, 0),
                         tensor_arg(s, TPUC_DTYPE_F32, 1, b, one, 0)};
  tpuc_op_result r[1];
  size_t n = 0;
  int mul = tpuc_op_find("aten::mul.Tensor");
  TPUC_CHECK_ERROR(
      tpuc_op_run(tpuc_test_client(), 0, mul, args, 2, &kOpts, r, 1, &n),
      TPUC_INVALID_ARGUMENT, "must match the size");
  args[1] = tensor_arg(s, TPUC_DTYPE_C64, 1, a, one, 0);
  TPUC_CHECK_ERROR(
      tpuc_op_run(tpuc_test_client(), 0, mul, args, 2, &kOpts, r, 1, &n),
      TPUC_UNIMPLEMENTED, "complex");
  args[1] = tensor_arg(s, TPUC_DTYPE_F32, 1, a, one, 4); /* past the end */
  TPUC_CHECK_ERROR(
      tpuc_op_run(tpuc_test_client(), 0, mul, args, 2, &kOpts, r, 1, &n),
      TPUC_OUT_OF_RANGE, NULL);
  TPUC_CHECK_ERROR(
      tpuc_op_run(tpuc_test_client(), 0, 9999, args, 2, &kOpts, r, 1, &n),
      TPUC_INVALID_ARGUMENT, "no op");
  tpuc_storage_release(s);
}

TPUC_TEST_MAIN(TPUC_TEST(test_promote_types),
               TPUC_TEST(test_add_views_broadcast_alpha),
               TPUC_TEST(test_int_true_division_and_compare),
               TPUC_TEST(test_errors_and_unimplemented))
