/* Host <-> device transfers: dense, strided, every dtype, 0-d and 0-size,
 * events, and bad arguments. */
#define _GNU_SOURCE
#include <math.h>
#include <stdatomic.h>
#include <unistd.h>

#include "tpuc_test.h"

static void test_roundtrip_every_dtype(void) {
  tpuc_client* c = tpuc_test_client();
  for (int d = TPUC_DTYPE_PRED; d < TPUC_DTYPE_COUNT_; d++) {
    size_t es = tpuc_dtype_size((tpuc_dtype)d);
    int64_t dims[2] = {3, 5};
    size_t n = 15 * es;
    unsigned char* src = malloc(n);
    unsigned char* dst = malloc(n);
    TPUC_CHECK(src && dst);
    for (size_t i = 0; i < n; i++)
      src[i] = (unsigned char)(d == TPUC_DTYPE_PRED ? (i % 3 == 0) : i * 7 + 1);
    tpuc_buffer* b = NULL;
    int dev = tpuc_test_device_count() - 1; /* the last device */
    tpuc_status* st =
        tpuc_buffer_from_host(c, dev, (tpuc_dtype)d, dims, 2, src, NULL, &b);
    if (st == NULL) st = tpuc_buffer_to_host(b, dst, n);
    int same = st == NULL && memcmp(src, dst, n) == 0;
    if (!same)
      fprintf(stderr, "dtype %s: %s\n", tpuc_dtype_mlir_name((tpuc_dtype)d),
              tpuc_status_message(st));
    tpuc_status_free(st);
    if (b) {
      TPUC_CHECK((int)tpuc_buffer_dtype(b) == d);
      TPUC_CHECK(tpuc_buffer_rank(b) == 2);
      TPUC_CHECK(tpuc_buffer_dims(b)[1] == 5);
      TPUC_CHECK(tpuc_buffer_device(b) == dev);
      TPUC_CHECK(tpuc_buffer_byte_size(b) == n);
    }
    tpuc_buffer_release(b);
    free(src);
    free(dst);
    TPUC_CHECK(same);
  }
}

/* Each real float dtype's layout gives its largest finite value, the one
 * c10 and ml_dtypes name (fills are checked against it). */
static void test_float_formats(void) {
  struct {
    tpuc_dtype d;
    double max;
    tpuc_float_kind kind;
  } want[] = {
      {TPUC_DTYPE_F16, 65504.0, TPUC_FLOAT_IEEE},
      {TPUC_DTYPE_BF16, 0x1.fep127, TPUC_FLOAT_IEEE},
      {TPUC_DTYPE_F32, 0x1.fffffep127, TPUC_FLOAT_IEEE},
      {TPUC_DTYPE_F64, 0x1.fffffffffffffp1023, TPUC_FLOAT_IEEE},
      {TPUC_DTYPE_F8E5M2, 57344.0, TPUC_FLOAT_IEEE},
      {TPUC_DTYPE_F8E4M3FN, 448.0, TPUC_FLOAT_FN},
      {TPUC_DTYPE_F8E5M2FNUZ, 57344.0, TPUC_FLOAT_FNUZ},
      {TPUC_DTYPE_F8E4M3FNUZ, 240.0, TPUC_FLOAT_FNUZ},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    tpuc_float_format f;
    TPUC_CHECK(tpuc_dtype_float_format(want[i].d, &f));
    TPUC_CHECK(f.kind == want[i].kind);
    TPUC_CHECK(tpuc_dtype_max_finite(want[i].d) == want[i].max);
  }
  TPUC_CHECK(!tpuc_dtype_float_format(TPUC_DTYPE_C64, NULL));
  TPUC_CHECK(!tpuc_dtype_float_format(TPUC_DTYPE_S32, NULL));
  TPUC_CHECK(isinf(tpuc_dtype_max_finite(TPUC_DTYPE_S8)));
}

static void test_byte_strides_transposed(void) {
  /* Host array is column-major 2x3: element (i,j) at j*2+i. */
  float host[6] = {0, 10, 1, 11, 2, 12};
  int64_t dims[2] = {2, 3};
  int64_t strides[2] = {sizeof(float), 2 * sizeof(float)};
  tpuc_buffer* b = NULL;
  TPUC_CHECK_OK(tpuc_buffer_from_host(tpuc_test_client(), 0, TPUC_DTYPE_F32,
                                      dims, 2, host, strides, &b));
  float out[6];
  tpuc_status* st = tpuc_buffer_to_host(b, out, sizeof out);
  tpuc_buffer_release(b);
  TPUC_CHECK_OK(st);
  const float want[6] = {0, 1, 2, 10, 11, 12};
  TPUC_CHECK(memcmp(out, want, sizeof want) == 0);
}

static void test_scalar_and_empty(void) {
  double x = 3.25, y = 0;
  tpuc_buffer* b = NULL;
  TPUC_CHECK_OK(tpuc_buffer_from_host(tpuc_test_client(), 0, TPUC_DTYPE_F64,
                                      NULL, 0, &x, NULL, &b));
  tpuc_status* st = tpuc_buffer_to_host(b, &y, sizeof y);
  TPUC_CHECK(tpuc_buffer_num_elements(b) == 1);
  tpuc_buffer_release(b);
  TPUC_CHECK_OK(st);
  TPUC_CHECK(y == 3.25);
  int64_t dims[2] = {4, 0};
  TPUC_CHECK_OK(tpuc_buffer_from_host(tpuc_test_client(), 0, TPUC_DTYPE_S32,
                                      dims, 2, NULL, NULL, &b));
  TPUC_CHECK(tpuc_buffer_num_elements(b) == 0);
  TPUC_CHECK(tpuc_buffer_byte_size(b) == 0);
  st = tpuc_buffer_to_host(b, NULL, 0);
  tpuc_buffer_release(b);
  TPUC_CHECK_OK(st);
}

static void test_async_read_and_events(void) {
  int64_t dims[1] = {1024};
  int32_t* src = malloc(1024 * 4);
  int32_t* dst = calloc(1024, 4);
  TPUC_CHECK(src && dst);
  for (int i = 0; i < 1024; i++) src[i] = i * i;
  tpuc_buffer* b = tpuc_test_buffer(TPUC_DTYPE_S32, dims, 1, src);
  TPUC_CHECK(b != NULL);
  tpuc_event* ready = NULL;
  TPUC_CHECK_OK(tpuc_buffer_ready_event(b, &ready));
  TPUC_CHECK_OK(tpuc_event_await(ready));
  bool is_ready = false;
  TPUC_CHECK_OK(tpuc_event_is_ready(ready, &is_ready));
  TPUC_CHECK(is_ready);
  tpuc_event_destroy(ready);
  tpuc_event* done = NULL;
  TPUC_CHECK_OK(tpuc_buffer_to_host_async(b, dst, 1024 * 4, &done));
  TPUC_CHECK_OK(tpuc_event_await(done));
  TPUC_CHECK_OK(tpuc_event_await(done)); /* awaiting twice is fine */
  tpuc_event_destroy(done);
  TPUC_CHECK(memcmp(src, dst, 1024 * 4) == 0);
  tpuc_buffer_release(b);
  free(src);
  free(dst);
}

static void on_ready(tpuc_status* st, void* user) {
  atomic_int* flag = user;
  atomic_store(flag, st == NULL ? 1 : -1);
  tpuc_status_free(st);
}

static void test_event_callback(void) {
  int64_t dims[1] = {4};
  float v[4] = {1, 2, 3, 4};
  tpuc_buffer* b = tpuc_test_buffer(TPUC_DTYPE_F32, dims, 1, v);
  TPUC_CHECK(b != NULL);
  tpuc_event* ev = NULL;
  TPUC_CHECK_OK(tpuc_buffer_ready_event(b, &ev));
  atomic_int flag = 0;
  TPUC_CHECK_OK(tpuc_event_on_ready(ev, on_ready, (void*)&flag));
  TPUC_CHECK_OK(tpuc_event_await(ev));
  /* The callback may run on a plugin thread just after the await. */
  for (int i = 0; i < 5000 && atomic_load(&flag) == 0; i++) usleep(1000);
  tpuc_event_destroy(ev);
  tpuc_buffer_release(b);
  TPUC_CHECK(flag == 1);
}

static void test_bad_arguments(void) {
  tpuc_client* c = tpuc_test_client();
  float v[4] = {0};
  int64_t dims[1] = {4};
  int64_t neg[1] = {-2};
  tpuc_buffer* b = NULL;
  TPUC_CHECK_ERROR(
      tpuc_buffer_from_host(c, 99, TPUC_DTYPE_F32, dims, 1, v, NULL, &b),
      TPUC_INVALID_ARGUMENT, "device index 99");
  TPUC_CHECK_ERROR(
      tpuc_buffer_from_host(c, 0, (tpuc_dtype)99, dims, 1, v, NULL, &b),
      TPUC_INVALID_ARGUMENT, "dtype");
  TPUC_CHECK_ERROR(
      tpuc_buffer_from_host(c, 0, TPUC_DTYPE_F32, neg, 1, v, NULL, &b),
      TPUC_INVALID_ARGUMENT, "negative");
  TPUC_CHECK_ERROR(tpuc_buffer_from_host(c, 0, TPUC_DTYPE_F32, dims,
                                         TPUC_MAX_RANK + 1, v, NULL, &b),
                   TPUC_INVALID_ARGUMENT, "rank");
  TPUC_CHECK_ERROR(
      tpuc_buffer_from_host(c, 0, TPUC_DTYPE_F32, dims, 1, NULL, NULL, &b),
      TPUC_INVALID_ARGUMENT, "NULL");
  int64_t huge[2] = {INT64_MAX / 2, 4};
  TPUC_CHECK_ERROR(
      tpuc_buffer_from_host(c, 0, TPUC_DTYPE_F32, huge, 2, v, NULL, &b),
      TPUC_INVALID_ARGUMENT, "too large");
  TPUC_CHECK(b == NULL);
  b = tpuc_test_buffer(TPUC_DTYPE_F32, dims, 1, v);
  TPUC_CHECK(b != NULL);
  float small[2];
  tpuc_status* st = tpuc_buffer_to_host(b, small, sizeof small);
  tpuc_buffer_release(b);
  TPUC_CHECK_ERROR(st, TPUC_INVALID_ARGUMENT, "holds 8 bytes");
}

static void test_large_transfer(void) {
  /* 64 MiB each way; checks content at both ends. */
  size_t n = (size_t)16 << 20;
  float* src = malloc(n * 4);
  float* dst = malloc(n * 4);
  TPUC_CHECK(src && dst);
  for (size_t i = 0; i < n; i++) src[i] = (float)(i % 1000003);
  int64_t dims[1] = {(int64_t)n};
  tpuc_buffer* b = tpuc_test_buffer(TPUC_DTYPE_F32, dims, 1, src);
  TPUC_CHECK(b != NULL);
  tpuc_status* st = tpuc_buffer_to_host(b, dst, n * 4);
  tpuc_buffer_release(b);
  int same = st == NULL && memcmp(src, dst, n * 4) == 0;
  free(src);
  free(dst);
  TPUC_CHECK_OK(st);
  TPUC_CHECK(same);
}

/* A promised buffer: unusable until fulfilled (or with its error once
 * broken); its extension bytes start zeroed and are left alone. */
static void test_promised_buffer(void) {
  tpuc_client* c = tpuc_test_client();
  int64_t dims[1] = {4};
  float v[4] = {1, 2, 3, 4}, r[4] = {0};
  tpuc_buffer* p = NULL;
  TPUC_CHECK_OK(tpuc_buffer_promise(c, 0, TPUC_DTYPE_F32, dims, 1, &p));
  unsigned char* ext = tpuc_buffer_ext(p);
  for (int i = 0; i < TPUC_BUFFER_EXT_BYTES; i++) TPUC_CHECK(ext[i] == 0);
  memset(ext, 0xAB, TPUC_BUFFER_EXT_BYTES);
  TPUC_CHECK(tpuc_buffer_byte_size(p) == sizeof v);
  TPUC_CHECK(!tpuc_buffer_is_deleted(p));
  TPUC_CHECK_ERROR(tpuc_buffer_to_host(p, r, sizeof r),
                   TPUC_FAILED_PRECONDITION, "no value yet");
  tpuc_event* ev = NULL;
  TPUC_CHECK_ERROR(tpuc_buffer_ready_event(p, &ev), TPUC_FAILED_PRECONDITION,
                   "no value yet");
  tpuc_buffer* val = tpuc_test_buffer(TPUC_DTYPE_F32, dims, 1, v);
  TPUC_CHECK(val != NULL);
  tpuc_buffer_fulfill(p, val); /* consumes val */
  TPUC_CHECK_OK(tpuc_buffer_check_value(p));
  TPUC_CHECK_OK(tpuc_buffer_to_host(p, r, sizeof r));
  TPUC_CHECK(memcmp(r, v, sizeof v) == 0);
  TPUC_CHECK(((unsigned char*)tpuc_buffer_ext(p))[7] == 0xAB);
  tpuc_buffer_release(p);

  TPUC_CHECK_OK(tpuc_buffer_promise(c, 0, TPUC_DTYPE_F32, dims, 1, &p));
  tpuc_buffer_break(p, TPUC_ABORTED, "the producer gave up");
  TPUC_CHECK_ERROR(tpuc_buffer_to_host(p, r, sizeof r), TPUC_ABORTED,
                   "the producer gave up");
  tpuc_buffer_release(p);
  TPUC_CHECK_ERROR(tpuc_buffer_promise(c, 0, TPUC_DTYPE_F32, dims, -1, &p),
                   TPUC_INVALID_ARGUMENT, "rank");
  TPUC_CHECK_ERROR(tpuc_buffer_check_value(NULL), TPUC_INVALID_ARGUMENT,
                   "NULL");
}

TPUC_TEST_MAIN(TPUC_TEST(test_roundtrip_every_dtype),
               TPUC_TEST(test_float_formats),
               TPUC_TEST(test_byte_strides_transposed),
               TPUC_TEST(test_scalar_and_empty),
               TPUC_TEST(test_async_read_and_events),
               TPUC_TEST(test_event_callback), TPUC_TEST(test_bad_arguments),
               TPUC_TEST(test_large_transfer), TPUC_TEST(test_promised_buffer))
