/* Compile and execute: signatures, argument checks, donation, chaining of
 * not-yet-ready outputs, several devices, error reporting. */
#include "tpuc_test.h"

static const char kAdd[] =
    "module @add {\n"
    "  func.func public @main(%arg0: tensor<4xf32> {tf.aliasing_output = 0 : "
    "i32}, %arg1: tensor<4xf32>) -> (tensor<4xf32>) {\n"
    "    %0 = \"stablehlo.add\"(%arg0, %arg1) : (tensor<4xf32>, "
    "tensor<4xf32>) -> tensor<4xf32>\n"
    "    \"func.return\"(%0) : (tensor<4xf32>) -> ()\n"
    "  }\n"
    "}\n";

static const char kTwoOut[] =
    "module @two {\n"
    "  func.func public @main(%arg0: tensor<2x3xi32>) -> (tensor<2x3xi32>, "
    "tensor<3x2xi32>) {\n"
    "    %0 = \"stablehlo.multiply\"(%arg0, %arg0) : (tensor<2x3xi32>, "
    "tensor<2x3xi32>) -> tensor<2x3xi32>\n"
    "    %1 = \"stablehlo.transpose\"(%arg0) {permutation = array<i64: 1, "
    "0>} : (tensor<2x3xi32>) -> tensor<3x2xi32>\n"
    "    \"func.return\"(%0, %1) : (tensor<2x3xi32>, tensor<3x2xi32>) -> ()\n"
    "  }\n"
    "}\n";

static tpuc_executable* compile(const char* text) {
  tpuc_executable* e = NULL;
  tpuc_status* st =
      tpuc_compile(tpuc_test_client(), text, strlen(text), NULL, &e, NULL);
  if (st) {
    fprintf(stderr, "compile: %s\n", tpuc_status_message(st));
    tpuc_status_free(st);
  }
  return e;
}

static void test_signature(void) {
  tpuc_executable* e = compile(kTwoOut);
  TPUC_CHECK(e != NULL);
  TPUC_CHECK(tpuc_executable_num_inputs(e) == 1);
  TPUC_CHECK(tpuc_executable_num_outputs(e) == 2);
  const tpuc_value_type* t = tpuc_executable_output_type(e, 1);
  TPUC_CHECK(t->dtype == TPUC_DTYPE_S32 && t->rank == 2 && t->dims[0] == 3);
  TPUC_CHECK(tpuc_executable_input_alias(e, 0) == -1);
  TPUC_CHECK(strncmp(tpuc_executable_name(e), "main@", 5) == 0);
  tpuc_executable_release(e);
  e = compile(kAdd);
  TPUC_CHECK(e != NULL);
  TPUC_CHECK(tpuc_executable_input_alias(e, 0) == 0);
  TPUC_CHECK(tpuc_executable_input_alias(e, 1) == -1);
  tpuc_executable_release(e);
}

static void test_multi_output(void) {
  int32_t x[6] = {1, 2, 3, 4, 5, 6};
  int64_t dims[2] = {2, 3};
  tpuc_buffer* in = tpuc_test_buffer(TPUC_DTYPE_S32, dims, 2, x);
  tpuc_buffer* outs[2] = {NULL, NULL};
  TPUC_CHECK_OK(tpuc_test_run(kTwoOut, &in, 1, outs, 2));
  int32_t* sq = tpuc_test_to_host(outs[0]);
  int32_t* tr = tpuc_test_to_host(outs[1]);
  int ok = sq && tr;
  for (int i = 0; ok && i < 6; i++) ok = sq[i] == x[i] * x[i];
  const int32_t want_t[6] = {1, 4, 2, 5, 3, 6};
  ok = ok && memcmp(tr, want_t, sizeof want_t) == 0;
  TPUC_CHECK(tpuc_buffer_dims(outs[1])[0] == 3);
  free(sq);
  free(tr);
  tpuc_buffer_release(in);
  tpuc_buffer_release(outs[0]);
  tpuc_buffer_release(outs[1]);
  TPUC_CHECK(ok);
}

/* Outputs feed the next execution before anyone waits on them. */
static void test_chain_without_waiting(void) {
  tpuc_client* c = tpuc_test_client();
  tpuc_executable* e = compile(kAdd);
  TPUC_CHECK(e != NULL);
  float one[4] = {1, 1, 1, 1}, zero[4] = {0};
  int64_t dims[1] = {4};
  tpuc_buffer* inc = tpuc_test_buffer(TPUC_DTYPE_F32, dims, 1, one);
  tpuc_buffer* acc = tpuc_test_buffer(TPUC_DTYPE_F32, dims, 1, zero);
  tpuc_status* st = NULL;
  for (int i = 0; i < 100 && st == NULL; i++) {
    tpuc_buffer* args[2] = {acc, inc};
    tpuc_buffer* next = NULL;
    st = tpuc_execute(e, 0, args, 2, NULL, &next, 1);
    tpuc_buffer_release(acc);
    acc = next;
  }
  TPUC_CHECK_OK(st);
  TPUC_CHECK_OK(tpuc_client_synchronize(c));
  float r[4];
  st = tpuc_buffer_to_host(acc, r, sizeof r);
  tpuc_buffer_release(acc);
  tpuc_buffer_release(inc);
  tpuc_executable_release(e);
  TPUC_CHECK_OK(st);
  TPUC_CHECK(r[0] == 100 && r[3] == 100);
}

static void test_donation(void) {
  tpuc_executable* e = compile(kAdd);
  TPUC_CHECK(e != NULL);
  float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
  int64_t dims[1] = {4};
  tpuc_buffer* ba = tpuc_test_buffer(TPUC_DTYPE_F32, dims, 1, a);
  tpuc_buffer* bb = tpuc_test_buffer(TPUC_DTYPE_F32, dims, 1, b);
  tpuc_buffer* args[2] = {ba, bb};
  bool donate[2] = {true, true}; /* arg 1 has no alias: stays alive */
  tpuc_buffer* out = NULL;
  TPUC_CHECK_OK(tpuc_execute(e, 0, args, 2, donate, &out, 1));
  TPUC_CHECK(tpuc_buffer_is_deleted(ba));
  TPUC_CHECK(!tpuc_buffer_is_deleted(bb));
  float r[4];
  TPUC_CHECK_OK(tpuc_buffer_to_host(out, r, sizeof r));
  TPUC_CHECK(r[0] == 11 && r[3] == 44);
  /* Using or reading a donated buffer is refused clearly. */
  tpuc_buffer* out2 = NULL;
  TPUC_CHECK_ERROR(tpuc_execute(e, 0, args, 2, NULL, &out2, 1),
                   TPUC_FAILED_PRECONDITION, "donated");
  TPUC_CHECK_ERROR(tpuc_buffer_to_host(ba, r, sizeof r),
                   TPUC_FAILED_PRECONDITION, "donated");
  /* Without donation the input survives. */
  tpuc_buffer* args2[2] = {out, bb};
  TPUC_CHECK_OK(tpuc_execute(e, 0, args2, 2, NULL, &out2, 1));
  TPUC_CHECK(!tpuc_buffer_is_deleted(out));
  TPUC_CHECK_OK(tpuc_buffer_to_host(out2, r, sizeof r));
  TPUC_CHECK(r[0] == 21);
  tpuc_buffer_release(ba);
  tpuc_buffer_release(bb);
  tpuc_buffer_release(out);
  tpuc_buffer_release(out2);
  tpuc_executable_release(e);
}

static void test_second_device(void) {
  if (tpuc_test_device_count() < 2) TPUC_SKIP("the platform has one device");
  tpuc_client* c = tpuc_test_client();
  tpuc_executable* e = compile(kAdd);
  TPUC_CHECK(e != NULL);
  float a[4] = {1, 2, 3, 4};
  int64_t dims[1] = {4};
  tpuc_buffer *b0 = NULL, *b1 = NULL, *out = NULL;
  TPUC_CHECK_OK(
      tpuc_buffer_from_host(c, 1, TPUC_DTYPE_F32, dims, 1, a, NULL, &b1));
  TPUC_CHECK_OK(
      tpuc_buffer_from_host(c, 0, TPUC_DTYPE_F32, dims, 1, a, NULL, &b0));
  tpuc_buffer* args[2] = {b1, b1};
  TPUC_CHECK_OK(tpuc_execute(e, 1, args, 2, NULL, &out, 1));
  TPUC_CHECK(tpuc_buffer_device(out) == 1);
  float r[4];
  TPUC_CHECK_OK(tpuc_buffer_to_host(out, r, sizeof r));
  TPUC_CHECK(r[2] == 6);
  tpuc_buffer* mixed[2] = {b0, b1};
  tpuc_buffer* out2 = NULL;
  TPUC_CHECK_ERROR(tpuc_execute(e, 1, mixed, 2, NULL, &out2, 1),
                   TPUC_INVALID_ARGUMENT, "argument 0 is on device 0");
  TPUC_CHECK_ERROR(tpuc_execute(e, 9, mixed, 2, NULL, &out2, 1),
                   TPUC_INVALID_ARGUMENT, "out of range");
  tpuc_buffer_release(b0);
  tpuc_buffer_release(b1);
  tpuc_buffer_release(out);
  tpuc_executable_release(e);
}

static void test_argument_checks(void) {
  tpuc_executable* e = compile(kAdd);
  TPUC_CHECK(e != NULL);
  float a[6] = {0};
  int64_t d4[1] = {4}, d6[1] = {6};
  tpuc_buffer* f4 = tpuc_test_buffer(TPUC_DTYPE_F32, d4, 1, a);
  tpuc_buffer* f6 = tpuc_test_buffer(TPUC_DTYPE_F32, d6, 1, a);
  tpuc_buffer* i4 = tpuc_test_buffer(TPUC_DTYPE_S32, d4, 1, a);
  tpuc_buffer* out = NULL;
  tpuc_buffer* one[1] = {f4};
  TPUC_CHECK_ERROR(tpuc_execute(e, 0, one, 1, NULL, &out, 1),
                   TPUC_INVALID_ARGUMENT, "takes 2 argument(s), got 1");
  tpuc_buffer* shape[2] = {f4, f6};
  TPUC_CHECK_ERROR(tpuc_execute(e, 0, shape, 2, NULL, &out, 1),
                   TPUC_INVALID_ARGUMENT,
                   "argument 1 must be f32[4], got f32[6]");
  tpuc_buffer* dtype[2] = {i4, f4};
  TPUC_CHECK_ERROR(tpuc_execute(e, 0, dtype, 2, NULL, &out, 1),
                   TPUC_INVALID_ARGUMENT,
                   "argument 0 must be f32[4], got i32[4]");
  tpuc_buffer* nul[2] = {f4, NULL};
  TPUC_CHECK_ERROR(tpuc_execute(e, 0, nul, 2, NULL, &out, 1),
                   TPUC_INVALID_ARGUMENT, "argument 1 is NULL");
  tpuc_buffer* ok[2] = {f4, f4};
  tpuc_buffer* outs[2];
  TPUC_CHECK_ERROR(tpuc_execute(e, 0, ok, 2, NULL, outs, 2),
                   TPUC_INVALID_ARGUMENT, "has 1 output(s)");
  TPUC_CHECK(out == NULL);
  /* Still usable afterwards. */
  TPUC_CHECK_OK(tpuc_execute(e, 0, ok, 2, NULL, &out, 1));
  tpuc_buffer_release(out);
  tpuc_buffer_release(f4);
  tpuc_buffer_release(f6);
  tpuc_buffer_release(i4);
  tpuc_executable_release(e);
}

static void test_malformed_program(void) {
  tpuc_client* c = tpuc_test_client();
  tpuc_executable* e = NULL;
  const char* bad =
      "module @m {\n  func.func public @main() -> () {\n"
      "    \"stablehlo.nonsense\"() : () -> ()\n";
  tpuc_status* st = tpuc_compile(c, bad, strlen(bad), NULL, &e, NULL);
  TPUC_CHECK(st != NULL);
  /* The plugin's parser message comes through. */
  TPUC_CHECK(strstr(tpuc_status_message(st), "error") != NULL);
  tpuc_status_free(st);
  TPUC_CHECK(e == NULL);
  const char* nomain =
      "module @m {\n  func.func public @other(%a: tensor<f32>) -> "
      "(tensor<f32>) {\n    \"func.return\"(%a) : (tensor<f32>) -> ()\n  "
      "}\n}\n";
  st = tpuc_compile(c, nomain, strlen(nomain), NULL, &e, NULL);
  TPUC_CHECK(st != NULL);
  tpuc_status_free(st);
  TPUC_CHECK_ERROR(tpuc_compile(c, NULL, 0, NULL, &e, NULL),
                   TPUC_INVALID_ARGUMENT, NULL);
  tpuc_compile_options o = {.num_replicas = -1};
  TPUC_CHECK_ERROR(tpuc_compile(c, kAdd, strlen(kAdd), &o, &e, NULL),
                   TPUC_INVALID_ARGUMENT, "num_replicas");
  /* The client keeps working. */
  e = compile(kAdd);
  TPUC_CHECK(e != NULL);
  tpuc_executable_release(e);
}

static void test_out_of_memory_reported(void) {
  const char* huge =
      "module @huge {\n  func.func public @main(%arg0: tensor<f32>) -> "
      "(tensor<100000000000xf32>) {\n    %0 = \"stablehlo.broadcast_in_dim\""
      "(%arg0) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> "
      "tensor<100000000000xf32>\n    \"func.return\"(%0) : "
      "(tensor<100000000000xf32>) -> ()\n  }\n}\n";
  tpuc_executable* e = compile(huge);
  TPUC_CHECK(e != NULL);
  float x = 1;
  tpuc_buffer* b = tpuc_test_buffer(TPUC_DTYPE_F32, NULL, 0, &x);
  tpuc_buffer* out = NULL;
  tpuc_status* st = tpuc_execute(e, 0, &b, 1, NULL, &out, 1);
  if (st == NULL) st = tpuc_client_synchronize(tpuc_test_client());
  tpuc_buffer_release(out);
  tpuc_buffer_release(b);
  tpuc_executable_release(e);
  TPUC_CHECK_ERROR(st, TPUC_RESOURCE_EXHAUSTED, "memory");
  TPUC_CHECK_OK(tpuc_client_synchronize(tpuc_test_client()));
}

TPUC_TEST_MAIN(TPUC_TEST(test_signature), TPUC_TEST(test_multi_output),
               TPUC_TEST(test_chain_without_waiting), TPUC_TEST(test_donation),
               TPUC_TEST(test_second_device), TPUC_TEST(test_argument_checks),
               TPUC_TEST(test_malformed_program),
               TPUC_TEST(test_out_of_memory_reported))
