/* Asynchronous errors: a failure in work that already returned to the
 * caller surfaces at the next synchronize, naming the program, and the
 * client stays usable. */
#include "tpuc_test.h"

static const char kNeg[] =
    "module @neg {\n  func.func public @main(%arg0: tensor<3xf32>) -> "
    "(tensor<3xf32>) {\n    %0 = \"stablehlo.negate\"(%arg0) : "
    "(tensor<3xf32>) -> tensor<3xf32>\n    \"func.return\"(%0) : "
    "(tensor<3xf32>) -> ()\n  }\n}\n";

static void test_error_reported_at_synchronize(void) {
  tpuc_client* c = tpuc_test_client();
  TPUC_CHECK_OK(tpuc_client_synchronize(c));
  int64_t dims[1] = {3};
  tpuc_buffer* bad = NULL;
  TPUC_CHECK_OK(tpuc_buffer_from_error(
      c, 0, TPUC_DTYPE_F32, dims, 1, TPUC_INTERNAL, "injected failure", &bad));
  tpuc_executable* e = NULL;
  TPUC_CHECK_OK(tpuc_compile(c, kNeg, strlen(kNeg), NULL, &e, NULL));
  /* Enqueueing succeeds: the failure belongs to the asynchronous work. */
  tpuc_buffer* out = NULL;
  TPUC_CHECK_OK(tpuc_execute(e, 0, &bad, 1, NULL, &out, 1));
  /* A dependent execution is enqueued on a not-ready, failing input. */
  tpuc_buffer* out2 = NULL;
  TPUC_CHECK_OK(tpuc_execute(e, 0, &out, 1, NULL, &out2, 1));
  tpuc_status* st = tpuc_client_synchronize(c);
  TPUC_CHECK(st != NULL);
  const char* msg = tpuc_status_message(st);
  int names_program = strstr(msg, tpuc_executable_name(e)) != NULL;
  int carries_cause = strstr(msg, "injected failure") != NULL;
  if (!names_program || !carries_cause) fprintf(stderr, "got: %s\n", msg);
  tpuc_status_free(st);
  TPUC_CHECK(names_program && carries_cause);
  /* Reading an output of the failed work reports the same cause. */
  float r[3];
  TPUC_CHECK_ERROR(tpuc_buffer_to_host(out2, r, sizeof r), TPUC_INTERNAL,
                   "injected failure");
  /* The error was consumed: the next synchronize is clean, and the client
   * still runs programs. */
  TPUC_CHECK_OK(tpuc_client_synchronize(c));
  float v[3] = {1, -2, 3};
  tpuc_buffer* good = tpuc_test_buffer(TPUC_DTYPE_F32, dims, 1, v);
  tpuc_buffer* out3 = NULL;
  TPUC_CHECK_OK(tpuc_execute(e, 0, &good, 1, NULL, &out3, 1));
  TPUC_CHECK_OK(tpuc_client_synchronize(c));
  TPUC_CHECK_OK(tpuc_buffer_to_host(out3, r, sizeof r));
  TPUC_CHECK(r[0] == -1 && r[1] == 2 && r[2] == -3);
  tpuc_buffer_release(bad);
  tpuc_buffer_release(out);
  tpuc_buffer_release(out2);
  tpuc_buffer_release(good);
  tpuc_buffer_release(out3);
  tpuc_executable_release(e);
}

static void test_many_pending_then_sync(void) {
  /* More executions in flight than the tracker's first allocation. */
  tpuc_client* c = tpuc_test_client();
  tpuc_executable* e = NULL;
  TPUC_CHECK_OK(tpuc_compile(c, kNeg, strlen(kNeg), NULL, &e, NULL));
  float v[3] = {1, 2, 3};
  int64_t dims[1] = {3};
  tpuc_buffer* x = tpuc_test_buffer(TPUC_DTYPE_F32, dims, 1, v);
  tpuc_status* st = NULL;
  for (int i = 0; i < 500 && st == NULL; i++) {
    tpuc_buffer* next = NULL;
    st = tpuc_execute(e, 0, &x, 1, NULL, &next, 1);
    tpuc_buffer_release(x);
    x = next;
  }
  TPUC_CHECK_OK(st);
  TPUC_CHECK_OK(tpuc_client_synchronize(c));
  float r[3];
  TPUC_CHECK_OK(tpuc_buffer_to_host(x, r, sizeof r));
  TPUC_CHECK(r[0] == 1 && r[2] == 3); /* negated an even number of times */
  tpuc_buffer_release(x);
  tpuc_executable_release(e);
}

static void test_error_buffer_arguments(void) {
  tpuc_client* c = tpuc_test_client();
  int64_t dims[1] = {3};
  tpuc_buffer* b = NULL;
  TPUC_CHECK_ERROR(
      tpuc_buffer_from_error(c, 0, TPUC_DTYPE_F32, dims, 1, TPUC_OK, "x", &b),
      TPUC_INVALID_ARGUMENT, "non-OK");
  TPUC_CHECK_ERROR(tpuc_buffer_from_error(c, 99, TPUC_DTYPE_F32, dims, 1,
                                          TPUC_INTERNAL, "x", &b),
                   TPUC_INVALID_ARGUMENT, "out of range");
  TPUC_CHECK(b == NULL);
}

TPUC_TEST_MAIN(TPUC_TEST(test_error_reported_at_synchronize),
               TPUC_TEST(test_many_pending_then_sync),
               TPUC_TEST(test_error_buffer_arguments))
