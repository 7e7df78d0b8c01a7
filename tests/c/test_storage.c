/* Storages and views: zero-initialized values, full and partial writes,
 * strided reads and writes, copies between views of one storage, resize,
 * byte accounting, out-of-range views. */
#include "tpuc_test.h"

static tpuc_storage* make_storage(size_t nbytes) {
  tpuc_storage* s = NULL;
  tpuc_status* st = tpuc_storage_create(tpuc_test_client(), 0, nbytes, &s);
  if (st) {
    fprintf(stderr, "storage: %s\n", tpuc_status_message(st));
    tpuc_status_free(st);
  }
  return s;
}

/* A float view over `s`. */
static tpuc_view fview(tpuc_storage* s, int rank, const int64_t* sizes,
                       const int64_t* strides, int64_t offset) {
  tpuc_view v;
  memset(&v, 0, sizeof v);
  v.storage = s;
  v.dtype = TPUC_DTYPE_F32;
  v.rank = rank;
  for (int i = 0; i < rank; i++) {
    v.sizes[i] = sizes[i];
    v.strides[i] = strides[i];
  }
  v.offset = offset;
  return v;
}

static void test_zero_then_write(void) {
  tpuc_storage* s = make_storage(6 * sizeof(float));
  TPUC_CHECK(s != NULL);
  float r[6] = {1, 1, 1, 1, 1, 1};
  TPUC_CHECK_OK(tpuc_storage_read(s, 0, sizeof r, r));
  TPUC_CHECK(r[0] == 0 && r[5] == 0);
  float w[6] = {0, 1, 2, 3, 4, 5};
  TPUC_CHECK_OK(tpuc_storage_write(s, 0, sizeof w, w));
  float two[2] = {20, 30};
  TPUC_CHECK_OK(tpuc_storage_write(s, 2 * sizeof(float), sizeof two, two));
  TPUC_CHECK_OK(tpuc_storage_read(s, 0, sizeof r, r));
  TPUC_CHECK(r[1] == 1 && r[2] == 20 && r[3] == 30 && r[4] == 4);
  TPUC_CHECK_ERROR(tpuc_storage_read(s, 20, 8, r), TPUC_OUT_OF_RANGE,
                   "outside a storage of 24 bytes");
  tpuc_storage_release(s);
}

static void test_strided_views(void) {
  /* storage holds a 2x3 matrix; views: transpose, column, broadcast row. */
  tpuc_storage* s = make_storage(6 * sizeof(float));
  float m[6] = {0, 1, 2, 10, 11, 12};
  TPUC_CHECK_OK(tpuc_storage_write(s, 0, sizeof m, m));
  int64_t ts[2] = {3, 2}, tt[2] = {1, 3};
  tpuc_view t = fview(s, 2, ts, tt, 0);
  float r[6];
  TPUC_CHECK_OK(tpuc_view_to_host(&t, r, sizeof r));
  const float want_t[6] = {0, 10, 1, 11, 2, 12};
  TPUC_CHECK(memcmp(r, want_t, sizeof r) == 0);
  int64_t cs[1] = {2}, ct[1] = {3};
  tpuc_view col = fview(s, 1, cs, ct, 1); /* column 1 */
  float c[2];
  TPUC_CHECK_OK(tpuc_view_to_host(&col, c, sizeof c));
  TPUC_CHECK(c[0] == 1 && c[1] == 11);
  int64_t bs[2] = {4, 3}, bt[2] = {0, 1};
  tpuc_view b = fview(s, 2, bs, bt, 3); /* row 1 repeated 4 times */
  float bb[12];
  TPUC_CHECK_OK(tpuc_view_to_host(&b, bb, sizeof bb));
  TPUC_CHECK(bb[0] == 10 && bb[11] == 12 && bb[3] == 10);
  /* Write through the column view: both elements change in the storage. */
  float nc[2] = {-1, -2};
  TPUC_CHECK_OK(tpuc_view_from_host(&col, nc, sizeof nc));
  TPUC_CHECK_OK(tpuc_storage_read(s, 0, sizeof r, r));
  const float want_m[6] = {0, -1, 2, 10, -2, 12};
  TPUC_CHECK(memcmp(r, want_m, sizeof r) == 0);
  tpuc_storage_release(s);
}

static void test_copy_overlapping(void) {
  /* Shift elements [0,4) to [1,5) inside one storage. */
  tpuc_storage* s = make_storage(5 * sizeof(float));
  float v[5] = {1, 2, 3, 4, 5};
  TPUC_CHECK_OK(tpuc_storage_write(s, 0, sizeof v, v));
  int64_t n[1] = {4}, one[1] = {1};
  tpuc_view src = fview(s, 1, n, one, 0), dst = fview(s, 1, n, one, 1);
  TPUC_CHECK_OK(tpuc_view_copy(&dst, &src));
  float r[5];
  TPUC_CHECK_OK(tpuc_storage_read(s, 0, sizeof r, r));
  const float want[5] = {1, 1, 2, 3, 4};
  TPUC_CHECK(memcmp(r, want, sizeof r) == 0);
  int64_t m[1] = {3};
  tpuc_view bad = fview(s, 1, m, one, 0);
  TPUC_CHECK_ERROR(tpuc_view_copy(&dst, &bad), TPUC_INVALID_ARGUMENT,
                   "same sizes");
  tpuc_storage_release(s);
}

static void test_out_of_range_view(void) {
  tpuc_storage* s = make_storage(4 * sizeof(float));
  int64_t n[1] = {4}, one[1] = {1};
  tpuc_view v = fview(s, 1, n, one, 1);
  float r[4];
  TPUC_CHECK_ERROR(tpuc_view_to_host(&v, r, sizeof r), TPUC_OUT_OF_RANGE,
                   "outside a storage of 16 bytes");
  tpuc_view ok = fview(s, 1, n, one, 0);
  TPUC_CHECK_ERROR(tpuc_view_to_host(&ok, r, 8), TPUC_INVALID_ARGUMENT,
                   "holds 8 bytes");
  int64_t zero[1] = {0};
  tpuc_view empty = fview(s, 1, zero, one, 100);
  TPUC_CHECK_OK(tpuc_view_to_host(&empty, NULL, 0));
  tpuc_storage_release(s);
}

static void test_resize_and_accounting(void) {
  tpuc_client* c = tpuc_test_client();
  int64_t before = 0, peak = 0, now = 0;
  TPUC_CHECK_OK(tpuc_storage_bytes(c, 0, &before, NULL));
  tpuc_storage* s = make_storage(8);
  TPUC_CHECK_OK(tpuc_storage_bytes(c, 0, &now, NULL));
  TPUC_CHECK(now == before + 8);
  unsigned char w[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  TPUC_CHECK_OK(tpuc_storage_write(s, 0, 8, w));
  TPUC_CHECK_OK(tpuc_storage_resize(s, 12));
  unsigned char r[12];
  TPUC_CHECK_OK(tpuc_storage_read(s, 0, 12, r));
  TPUC_CHECK(r[7] == 8 && r[8] == 0 && r[11] == 0);
  TPUC_CHECK(tpuc_storage_nbytes(s) == 12);
  TPUC_CHECK_OK(tpuc_storage_resize(s, 4));
  TPUC_CHECK_OK(tpuc_storage_read(s, 0, 4, r));
  TPUC_CHECK(r[3] == 4);
  TPUC_CHECK_OK(tpuc_storage_bytes(c, 0, &now, &peak));
  TPUC_CHECK(now == before + 4 && peak >= before + 12);
  tpuc_storage_release(s);
  TPUC_CHECK_OK(tpuc_storage_bytes(c, 0, &now, NULL));
  TPUC_CHECK(now == before);
  TPUC_CHECK_OK(tpuc_storage_reset_peak(c, 0));
  TPUC_CHECK_OK(tpuc_storage_bytes(c, 0, NULL, &peak));
  TPUC_CHECK(peak == before);
}

static void test_value_swap_shared(void) {
  /* A program's output becomes the storage value; reads see it. */
  tpuc_storage* s = make_storage(4);
  unsigned char bytes[4] = {9, 8, 7, 6};
  int64_t d[1] = {4};
  tpuc_buffer* b = tpuc_test_buffer(TPUC_DTYPE_U8, d, 1, bytes);
  TPUC_CHECK_OK(tpuc_storage_set_value(s, b));
  tpuc_buffer_release(b);
  unsigned char r[4];
  TPUC_CHECK_OK(tpuc_storage_read(s, 0, 4, r));
  TPUC_CHECK(r[0] == 9 && r[3] == 6);
  int64_t d2[1] = {2};
  tpuc_buffer* wrong = tpuc_test_buffer(TPUC_DTYPE_U8, d2, 1, bytes);
  TPUC_CHECK_ERROR(tpuc_storage_set_value(s, wrong), TPUC_INVALID_ARGUMENT,
                   "u8[4]");
  tpuc_buffer_release(wrong);
  tpuc_storage_release(s);
}

static void test_zeros_program_and_set_zeros(void) {
  /* The zeros program of a never-written storage runs to its zeros (f32
   * elements for a multiple of 4 bytes, else bytes). */
  tpuc_storage* s = make_storage(12);
  tpuc_storage* odd = make_storage(3);
  tpuc_storage* empty = make_storage(0);
  char text[1024];
  tpuc_dtype dt = TPUC_DTYPE_PRED;
  int64_t n = 0;
  size_t len = tpuc_storage_zeros_program(s, text, sizeof text, &dt, &n);
  TPUC_CHECK(len > 0 && dt == TPUC_DTYPE_F32 && n == 3);
  TPUC_CHECK(tpuc_storage_zeros_program(odd, text, sizeof text, &dt, &n) > 0);
  TPUC_CHECK(dt == TPUC_DTYPE_U8 && n == 3);
  TPUC_CHECK(tpuc_storage_zeros_program(empty, text, sizeof text, &dt, &n) ==
             0);
  TPUC_CHECK(tpuc_storage_zeros_program(s, text, 16, &dt, &n) == 0);
  len = tpuc_storage_zeros_program(s, text, sizeof text, NULL, NULL);
  tpuc_executable* exe = NULL;
  TPUC_CHECK_OK(tpuc_compile(tpuc_test_client(), text, len, NULL, &exe, NULL));
  tpuc_buffer* zeros = NULL;
  TPUC_CHECK_OK(tpuc_execute(exe, 0, NULL, 0, NULL, &zeros, 1));
  tpuc_executable_release(exe);
  /* set_zeros takes the value of an unwritten storage ... */
  TPUC_CHECK(tpuc_storage_is_unwritten(s));
  TPUC_CHECK_OK(tpuc_storage_set_zeros(s, zeros));
  TPUC_CHECK(!tpuc_storage_is_unwritten(s));
  float r[3] = {1, 1, 1};
  TPUC_CHECK_OK(tpuc_storage_read(s, 0, sizeof r, r));
  TPUC_CHECK(r[0] == 0 && r[1] == 0 && r[2] == 0);
  /* ... and leaves a written one as it is. */
  float w[3] = {4, 5, 6};
  TPUC_CHECK_OK(tpuc_storage_write(s, 0, sizeof w, w));
  TPUC_CHECK_OK(tpuc_storage_set_zeros(s, zeros));
  TPUC_CHECK_OK(tpuc_storage_read(s, 0, sizeof r, r));
  TPUC_CHECK(r[0] == 4 && r[1] == 5 && r[2] == 6);
  TPUC_CHECK_ERROR(tpuc_storage_set_zeros(odd, zeros), TPUC_INVALID_ARGUMENT,
                   "flat array of 3 bytes");
  tpuc_buffer_release(zeros);
  tpuc_storage_release(s);
  tpuc_storage_release(odd);
  tpuc_storage_release(empty);
}

TPUC_TEST_MAIN(TPUC_TEST(test_zero_then_write), TPUC_TEST(test_strided_views),
               TPUC_TEST(test_copy_overlapping),
               TPUC_TEST(test_out_of_range_view),
               TPUC_TEST(test_resize_and_accounting),
               TPUC_TEST(test_value_swap_shared),
               TPUC_TEST(test_zeros_program_and_set_zeros))
