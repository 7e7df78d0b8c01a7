/* Native ops through tpuc_op_run (no PyTorch): promotion, broadcasting,
 * strided views read inside the program, scalars as arguments, in-place
 * writes through views, device copies, two-phase and random ops, errors. */
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
  TPUC_CHECK_OK(tpuc_value_to_host(r[0].value, out, sizeof out));
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
  TPUC_CHECK_OK(tpuc_value_to_host(r[0].value, f, sizeof f));
  tpuc_buffer_release(r[0].value);
  TPUC_CHECK(f[0] == 0.5f && f[3] == 2.0f);
  TPUC_CHECK_OK(tpuc_op_run(tpuc_test_client(), 0,
                            tpuc_op_find("aten::gt.Scalar"), args, 2, &kOpts, r,
                            1, &n));
  TPUC_CHECK(r[0].dtype == TPUC_DTYPE_PRED);
  unsigned char b[4];
  TPUC_CHECK_OK(tpuc_value_to_host(r[0].value, b, sizeof b));
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
  /* Complex tensors: only ops reviewed for them (mul is; amax is not). */
  args[1] = tensor_arg(s, TPUC_DTYPE_C64, 1, a, one, 0);
  TPUC_CHECK_ERROR(tpuc_op_run(tpuc_test_client(), 0,
                               tpuc_op_find("aten::amax"), &args[1], 1, &kOpts,
                               r, 1, &n),
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

static void read_f32(tpuc_storage* s, float* out, size_t n) {
  TPUC_CHECK_OK(tpuc_storage_read(s, 0, n * sizeof(float), out));
}

static void test_inplace_write_through_views(void) {
  /* x = [[0..3],[4..7],[8..11]]; x[:, 1] *= 10 writes a strided column,
   * x[1:] += 1 a contiguous range at an offset; both inside the op's own
   * program, in the storage's new value. */
  float v[12];
  for (int i = 0; i < 12; i++) v[i] = (float)i;
  tpuc_storage* s = f32_storage(v, 12);
  int64_t col_sz[1] = {3}, col_st[1] = {4};
  tpuc_op_arg args[2];
  args[0] = tensor_arg(s, TPUC_DTYPE_F32, 1, col_sz, col_st, 1);
  memset(&args[1], 0, sizeof args[1]);
  args[1].kind = TPUC_OP_ARG_SCALAR;
  args[1].scalar = TPUC_SCALAR_INT;
  args[1].i = 10;
  tpuc_op_options o = kOpts;
  o.write_to[0] = &args[0].view;
  tpuc_op_result r[1];
  size_t n = 0;
  TPUC_CHECK_OK(tpuc_op_run(tpuc_test_client(), 0,
                            tpuc_op_find("aten::mul_.Scalar"), args, 2, &o, r,
                            1, &n));
  TPUC_CHECK(n == 1 && r[0].written);
  TPUC_CHECK_OK(tpuc_storage_set_value(s, r[0].value));
  tpuc_buffer_release(r[0].value);
  int64_t rows_sz[2] = {2, 4}, rows_st[2] = {4, 1};
  args[0] = tensor_arg(s, TPUC_DTYPE_F32, 2, rows_sz, rows_st, 4);
  args[1].i = 1;
  o.write_to[0] = &args[0].view;
  TPUC_CHECK_OK(tpuc_op_run(tpuc_test_client(), 0,
                            tpuc_op_find("aten::add_.Scalar"), args, 2, &o, r,
                            1, &n));
  TPUC_CHECK_OK(tpuc_storage_set_value(s, r[0].value));
  tpuc_buffer_release(r[0].value);
  float got[12];
  read_f32(s, got, 12);
  const float want[12] = {0, 10, 2, 3, 5, 51, 7, 8, 9, 91, 11, 12};
  TPUC_CHECK(memcmp(got, want, sizeof want) == 0);
  /* A float result into an int view is refused, as PyTorch does. */
  tpuc_storage* si = NULL;
  int32_t iv[3] = {1, 2, 3};
  TPUC_CHECK_OK(tpuc_storage_create(tpuc_test_client(), 0, sizeof iv, &si));
  TPUC_CHECK_OK(tpuc_storage_write(si, 0, sizeof iv, iv));
  int64_t three[1] = {3}, one[1] = {1};
  args[0] = tensor_arg(si, TPUC_DTYPE_S32, 1, three, one, 0);
  args[1].scalar = TPUC_SCALAR_FLOAT;
  args[1].f = 1.5;
  o.write_to[0] = &args[0].view;
  TPUC_CHECK_ERROR(tpuc_op_run(tpuc_test_client(), 0,
                               tpuc_op_find("aten::add_.Scalar"), args, 2, &o,
                               r, 1, &n),
                   TPUC_INVALID_ARGUMENT, "can't be cast");
  tpuc_storage_release(si);
  tpuc_storage_release(s);
}

static void test_device_copy_casts_and_broadcasts(void) {
  /* dst (int32 [2,3], transposed view of a [3,2] storage) <- src f32 [3]
   * broadcast: truncation toward zero through int64, as the CPU does. */
  const float v[3] = {1.7f, -2.5f, 3.2f};
  tpuc_storage* src = f32_storage(v, 3);
  tpuc_storage* dst = NULL;
  TPUC_CHECK_OK(tpuc_storage_create(tpuc_test_client(), 0, 6 * 4, &dst));
  tpuc_view sv = {src, TPUC_DTYPE_F32, 1, {3}, {1}, 0};
  tpuc_view dv = {dst, TPUC_DTYPE_S32, 2, {2, 3}, {1, 2}, 0};
  TPUC_CHECK_OK(tpuc_op_copy(tpuc_test_client(), &dv, &sv));
  int32_t got[6];
  TPUC_CHECK_OK(tpuc_storage_read(dst, 0, sizeof got, got));
  /* storage [3,2] row-major: element (r, c) of dst is got[c*2 + r] */
  const int32_t want[6] = {1, 1, -2, -2, 3, 3};
  TPUC_CHECK(memcmp(got, want, sizeof want) == 0);
  TPUC_CHECK(!tpuc_can_cast(TPUC_DTYPE_F32, TPUC_DTYPE_S64));
  TPUC_CHECK(tpuc_can_cast(TPUC_DTYPE_S64, TPUC_DTYPE_F16));
  TPUC_CHECK(!tpuc_can_cast(TPUC_DTYPE_S32, TPUC_DTYPE_PRED));
  tpuc_storage_release(src);
  tpuc_storage_release(dst);
}

static void test_two_phase_nonzero(void) {
  const float v[6] = {0, 1, 0, 2, 3, 0};
  tpuc_storage* s = f32_storage(v, 6);
  int64_t sz[2] = {2, 3}, st[2] = {3, 1};
  tpuc_op_arg a = tensor_arg(s, TPUC_DTYPE_F32, 2, sz, st, 0);
  tpuc_op_result r[1];
  size_t n = 0;
  TPUC_CHECK_OK(tpuc_op_run(tpuc_test_client(), 0,
                            tpuc_op_find("aten::nonzero"), &a, 1, &kOpts, r, 1,
                            &n));
  TPUC_CHECK(n == 1 && r[0].dtype == TPUC_DTYPE_S64 && r[0].rank == 2);
  TPUC_CHECK(r[0].sizes[0] == 3 && r[0].sizes[1] == 2);
  int64_t got[6];
  TPUC_CHECK_OK(tpuc_value_to_host(r[0].value, got, sizeof got));
  tpuc_buffer_release(r[0].value);
  const int64_t want[6] = {0, 1, 1, 0, 1, 1};
  TPUC_CHECK(memcmp(got, want, sizeof want) == 0);
  tpuc_storage_release(s);
}

static void test_random_ops_follow_the_state(void) {
  /* uniform_ with the same (seed, counter) gives the same numbers; another
   * counter gives others; all in [0, 1). */
  tpuc_storage* s = NULL;
  TPUC_CHECK_OK(tpuc_storage_create(tpuc_test_client(), 0, 64 * 4, &s));
  int64_t sz[1] = {64}, st[1] = {1};
  tpuc_op_arg a = tensor_arg(s, TPUC_DTYPE_F32, 1, sz, st, 0);
  int idx = tpuc_op_find("aten::uniform_");
  TPUC_CHECK(tpuc_op_is_random(idx));
  TPUC_CHECK(!tpuc_op_is_random(tpuc_op_find("aten::add.Tensor")));
  float first[64], again[64], other[64];
  float* outs[3] = {first, again, other};
  const uint64_t counters[3] = {7, 7, 8};
  for (int k = 0; k < 3; k++) {
    tpuc_op_options o = kOpts;
    o.rng[0] = 42;
    o.rng[1] = counters[k] << 32;
    tpuc_op_result r[1];
    size_t n = 0;
    TPUC_CHECK_OK(tpuc_op_run(tpuc_test_client(), 0, idx, &a, 1, &o, r, 1, &n));
    TPUC_CHECK_OK(tpuc_value_to_host(r[0].value, outs[k], 64 * 4));
    tpuc_buffer_release(r[0].value);
  }
  TPUC_CHECK(memcmp(first, again, sizeof first) == 0);
  TPUC_CHECK(memcmp(first, other, sizeof first) != 0);
  for (int i = 0; i < 64; i++) TPUC_CHECK(first[i] >= 0.0f && first[i] < 1.0f);
  tpuc_storage_release(s);
}

/* uniform_ of `n` floats from state (42, 9 << 32) into `out` (n floats). */
static void uniform_draw(int64_t n, float* out) {
  tpuc_storage* s = NULL;
  TPUC_CHECK_OK(tpuc_storage_create(tpuc_test_client(), 0, (size_t)n * 4, &s));
  int64_t sz[1] = {n}, st[1] = {1};
  tpuc_op_arg a = tensor_arg(s, TPUC_DTYPE_F32, 1, sz, st, 0);
  tpuc_op_options o = kOpts;
  o.rng[0] = 42;
  o.rng[1] = (uint64_t)9 << 32;
  tpuc_op_result r[1];
  size_t nr = 0;
  TPUC_CHECK_OK(tpuc_op_run(tpuc_test_client(), 0,
                            tpuc_op_find("aten::uniform_"), &a, 1, &o, r, 1,
                            &nr));
  TPUC_CHECK(nr == 1);
  TPUC_CHECK_OK(tpuc_value_to_host(r[0].value, out, (size_t)n * 4));
  tpuc_buffer_release(r[0].value);
  tpuc_storage_release(s);
}

static void test_small_draws_share_the_counters_program(void) {
  /* A small call draws its counters with tpuc::random_words of its bucket
   * (two programs), a large one in one program: the numbers of the same
   * state are the same, the small call's are the large one's first. The
   * words op itself gives both words of each counter. */
  enum { SMALL = 1001, LARGE = 140000 }; /* 501 and 70000 counters */
  float* small = malloc(SMALL * sizeof(float));
  float* large = malloc(LARGE * sizeof(float));
  TPUC_CHECK(small != NULL && large != NULL);
  uniform_draw(SMALL, small);
  uniform_draw(LARGE, large);
  TPUC_CHECK(memcmp(small, large, SMALL * sizeof(float)) == 0);
  uniform_draw(SMALL - 1, large);
  TPUC_CHECK(memcmp(small, large, (SMALL - 1) * sizeof(float)) == 0);
  /* From its 64th call the call's own program draws the counters: the
   * same numbers. */
  for (int k = 0; k < 70; k++) {
    uniform_draw(SMALL, large);
    TPUC_CHECK(memcmp(small, large, SMALL * sizeof(float)) == 0);
  }
  free(small);
  free(large);

  int w = tpuc_op_find("tpuc::random_words");
  TPUC_CHECK(tpuc_op_is_random(w));
  tpuc_op_arg a;
  memset(&a, 0, sizeof a);
  a.kind = TPUC_OP_ARG_INT;
  a.i = 256;
  tpuc_op_options o = kOpts;
  o.rng[0] = 42;
  o.rng[1] = (uint64_t)9 << 32;
  tpuc_op_result r[1];
  size_t nr = 0;
  TPUC_CHECK_OK(tpuc_op_run(tpuc_test_client(), 0, w, &a, 1, &o, r, 1, &nr));
  TPUC_CHECK(nr == 1 && r[0].dtype == TPUC_DTYPE_U32 && r[0].rank == 1 &&
             r[0].sizes[0] == 512);
  uint32_t words[512];
  TPUC_CHECK_OK(tpuc_value_to_host(r[0].value, words, sizeof words));
  tpuc_buffer_release(r[0].value);
  /* uniform_ keeps a word's top 23 bits: word k gives number k. */
  float first[8];
  uniform_draw(8, first);
  for (int k = 0; k < 8; k++) {
    uint32_t bits = (words[k] >> 9) | 0x3F800000u;
    float f;
    memcpy(&f, &bits, sizeof f);
    TPUC_CHECK(f - 1.0f == first[k]);
  }
  /* A count of zero is refused. */
  a.i = 0;
  TPUC_CHECK_ERROR(tpuc_op_run(tpuc_test_client(), 0, w, &a, 1, &o, r, 1, &nr),
                   TPUC_INTERNAL, "takes a count");
}

static void test_client_marks(void) {
  uint64_t mark = 0;
  bool done = false;
  TPUC_CHECK_OK(tpuc_client_mark(tpuc_test_client(), &mark));
  TPUC_CHECK_OK(tpuc_client_synchronize(tpuc_test_client()));
  TPUC_CHECK_OK(tpuc_client_mark_done(tpuc_test_client(), mark, &done));
  TPUC_CHECK(done);
  TPUC_CHECK_ERROR(tpuc_client_mark(NULL, &mark), TPUC_INVALID_ARGUMENT, NULL);
}

TPUC_TEST_MAIN(TPUC_TEST(test_promote_types),
               TPUC_TEST(test_inplace_write_through_views),
               TPUC_TEST(test_device_copy_casts_and_broadcasts),
               TPUC_TEST(test_two_phase_nonzero),
               TPUC_TEST(test_random_ops_follow_the_state),
               TPUC_TEST(test_small_draws_share_the_counters_program),
               TPUC_TEST(test_client_marks),
               TPUC_TEST(test_add_views_broadcast_alpha),
               TPUC_TEST(test_int_true_division_and_compare),
               TPUC_TEST(test_errors_and_unimplemented))
