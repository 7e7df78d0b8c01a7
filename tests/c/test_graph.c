/* Compiled graphs (tpuc/graph.h) without PyTorch: ops run through
 * tpuc_op_run during a capture become one program; replays on other
 * storages give the same results as the ops would, write inputs in place
 * (donating their old values), draw random numbers from the state they are
 * given, and a capture that needs a value on the host says why. */
#include "tpuc_test.h"

static tpuc_storage* f32_storage(const float* v, size_t n) {
  tpuc_storage* s = NULL;
  tpuc_status* st =
      tpuc_storage_create(tpuc_test_client(), 0, n * sizeof(float), &s);
  if (st == NULL && v != NULL)
    st = tpuc_storage_write(s, 0, n * sizeof(float), v);
  if (st) {
    fprintf(stderr, "%s\n", tpuc_status_message(st));
    tpuc_status_free(st);
  }
  return s;
}

static tpuc_view vec(tpuc_storage* s, int64_t n) {
  tpuc_view v;
  memset(&v, 0, sizeof v);
  v.storage = s;
  v.dtype = TPUC_DTYPE_F32;
  v.rank = 1;
  v.sizes[0] = n;
  v.strides[0] = 1;
  return v;
}

static const tpuc_op_options kOpts = {
    .default_float = TPUC_DTYPE_F32,
    .matmul_precision = TPUC_HLO_PRECISION_HIGHEST};

/* The graph: y = x * 3 (a new storage); w += y (in place). */
static tpuc_status* graph_body(tpuc_storage* w, tpuc_storage* x,
                               tpuc_storage* y) {
  tpuc_op_arg a[3];
  memset(a, 0, sizeof a);
  a[0].kind = TPUC_OP_ARG_TENSOR;
  a[0].view = vec(x, 4);
  a[1].kind = TPUC_OP_ARG_SCALAR;
  a[1].scalar = TPUC_SCALAR_FLOAT;
  a[1].f = 3.0;
  tpuc_op_result r[1];
  size_t n = 0;
  TPUC_RETURN_IF_ERROR(tpuc_op_run(tpuc_test_client(), 0,
                                   tpuc_op_find("aten::mul.Scalar"), a, 2,
                                   &kOpts, r, 1, &n));
  tpuc_status* st = tpuc_storage_set_value(y, r[0].value);
  tpuc_buffer_release(r[0].value);
  if (st != NULL) return st;
  a[0].view = vec(w, 4);
  a[1].kind = TPUC_OP_ARG_TENSOR;
  a[1].view = vec(y, 4);
  a[2].kind = TPUC_OP_ARG_SCALAR;
  a[2].scalar = TPUC_SCALAR_INT;
  a[2].i = 1;
  tpuc_op_options o = kOpts;
  o.write_to[0] = &a[0].view;
  TPUC_RETURN_IF_ERROR(tpuc_op_run(tpuc_test_client(), 0,
                                   tpuc_op_find("aten::add_.Tensor"), a, 3, &o,
                                   r, 1, &n));
  st = tpuc_storage_set_value(w, r[0].value);
  tpuc_buffer_release(r[0].value);
  return st;
}

/* s *= 1 on the device: its value is then kept as f32, not bytes. */
static tpuc_status* typed(tpuc_storage* s) {
  tpuc_op_arg a[2];
  memset(a, 0, sizeof a);
  a[0].kind = TPUC_OP_ARG_TENSOR;
  a[0].view = vec(s, 4);
  a[1].kind = TPUC_OP_ARG_SCALAR;
  a[1].scalar = TPUC_SCALAR_INT;
  a[1].i = 1;
  tpuc_op_options o = kOpts;
  o.write_to[0] = &a[0].view;
  tpuc_op_result r[1];
  size_t n = 0;
  TPUC_RETURN_IF_ERROR(tpuc_op_run(tpuc_test_client(), 0,
                                   tpuc_op_find("aten::mul_.Scalar"), a, 2, &o,
                                   r, 1, &n));
  tpuc_status* st = tpuc_storage_set_value(s, r[0].value);
  tpuc_buffer_release(r[0].value);
  return st;
}

static void test_capture_and_replay(void) {
  const float wv[4] = {1, 2, 3, 4}, xv[4] = {10, 20, 30, 40};
  tpuc_storage* w = f32_storage(wv, 4);
  tpuc_storage* x = f32_storage(xv, 4);
  tpuc_storage* y = f32_storage(NULL, 4);
  TPUC_CHECK_OK(typed(w));
  tpuc_view in[2] = {vec(w, 4), vec(x, 4)};
  tpuc_graph_reset_stats();
  TPUC_CHECK_OK(tpuc_graph_capture_begin(tpuc_test_client(), 0, in, 2, 1, 0));
  /* A second capture on this thread is refused. */
  TPUC_CHECK_ERROR(tpuc_graph_capture_begin(tpuc_test_client(), 0, in, 2, 1, 0),
                   TPUC_FAILED_PRECONDITION, "already capturing");
  TPUC_CHECK_OK(graph_body(w, x, y));
  tpuc_view out[1] = {vec(y, 4)};
  tpuc_graph* g = NULL;
  char why[256];
  TPUC_CHECK_OK(tpuc_graph_capture_end(tpuc_test_client(), 0, out, 1, false, &g,
                                       why, sizeof why));
  TPUC_CHECK(g != NULL);
  TPUC_CHECK(tpuc_graph_num_ops(g) == 2);
  TPUC_CHECK(tpuc_graph_num_outputs(g) == 1 && tpuc_graph_num_storages(g) == 1);
  TPUC_CHECK(tpuc_graph_storage_nbytes(g, 0) == 16);
  TPUC_CHECK(tpuc_graph_output_at(g, 0)->input == -1);
  float got[4];
  /* The capture's own run computed this call's values. */
  TPUC_CHECK_OK(tpuc_storage_read(y, 0, sizeof got, got));
  TPUC_CHECK(got[0] == 30 && got[3] == 120);
  TPUC_CHECK_OK(tpuc_storage_read(w, 0, sizeof got, got));
  TPUC_CHECK(got[0] == 31 && got[3] == 124);
  /* Replay on other storages: one execution, w2 written in place. */
  const float w2v[4] = {0, 0, 0, 1}, x2v[4] = {1, 2, 3, 4};
  tpuc_storage* w2 = f32_storage(w2v, 4);
  tpuc_storage* x2 = f32_storage(x2v, 4);
  tpuc_storage* y2 = f32_storage(NULL, 4);
  tpuc_view in2[2] = {vec(w2, 4), vec(x2, 4)};
  /* w2's value is bytes (a host write), the program reads f32: another
   * signature until a device op writes it. */
  TPUC_CHECK(!tpuc_graph_matches(g, in2, 2));
  TPUC_CHECK_OK(typed(w2));
  TPUC_CHECK(tpuc_graph_matches(g, in2, 2));
  tpuc_graph_stats s;
  for (int k = 0; k < 3; k++) {
    TPUC_CHECK_OK(tpuc_graph_replay(g, in2, 2, &y2, 1, 1, 0));
    /* From the second replay on, w2's old value is held by its storage
     * alone (the first one's was the host write's). The donating variant
     * is compiled when it is asked for a second time: the first time, the
     * variant without donation runs and nothing is compiled. */
    tpuc_graph_get_stats(&s);
    TPUC_CHECK(k < 2 ? s.donated == 0 && s.variants == 0 : s.donated >= 1);
  }
  TPUC_CHECK(s.variants == 1);
  TPUC_CHECK_OK(tpuc_storage_read(y2, 0, sizeof got, got));
  TPUC_CHECK(got[0] == 3 && got[3] == 12);
  TPUC_CHECK_OK(tpuc_storage_read(w2, 0, sizeof got, got));
  TPUC_CHECK(got[0] == 9 && got[3] == 37);
  TPUC_CHECK(s.captures == 1 && s.replays == 3);
  /* Other inputs: no match, and a replay is refused. */
  tpuc_storage* big = f32_storage(NULL, 8);
  tpuc_view in3[2] = {vec(big, 8), vec(x2, 4)};
  TPUC_CHECK(!tpuc_graph_matches(g, in3, 2));
  TPUC_CHECK_ERROR(tpuc_graph_replay(g, in3, 2, &y2, 1, 1, 0),
                   TPUC_FAILED_PRECONDITION, "do not match");
  /* Two inputs that share a storage where the capture had two. */
  tpuc_view same[2] = {vec(x2, 4), vec(x2, 4)};
  TPUC_CHECK(!tpuc_graph_matches(g, same, 2));
  tpuc_graph_release(g);
  tpuc_storage_release(big);
  tpuc_storage_release(w);
  tpuc_storage_release(x);
  tpuc_storage_release(y);
  tpuc_storage_release(w2);
  tpuc_storage_release(x2);
  tpuc_storage_release(y2);
}

static void test_host_read_breaks_the_capture(void) {
  const float xv[4] = {1, 2, 3, 4};
  tpuc_storage* x = f32_storage(xv, 4);
  tpuc_storage* y = f32_storage(NULL, 4);
  tpuc_storage* w = f32_storage(NULL, 4);
  tpuc_view in[2] = {vec(w, 4), vec(x, 4)};
  TPUC_CHECK_OK(tpuc_graph_capture_begin(tpuc_test_client(), 0, in, 2, 1, 0));
  TPUC_CHECK_OK(graph_body(w, x, y));
  float got[4];
  TPUC_CHECK_OK(tpuc_storage_read(y, 0, sizeof got, got)); /* a host read */
  TPUC_CHECK(got[1] == 6);
  tpuc_view out[1] = {vec(y, 4)};
  tpuc_graph* g = NULL;
  char why[256];
  TPUC_CHECK_OK(tpuc_graph_capture_end(tpuc_test_client(), 0, out, 1, false, &g,
                                       why, sizeof why));
  TPUC_CHECK(g == NULL);
  TPUC_CHECK(strstr(why, "value needed") != NULL);
  /* The results are right all the same. */
  TPUC_CHECK_OK(tpuc_storage_read(w, 0, sizeof got, got));
  TPUC_CHECK(got[0] == 3 && got[3] == 12);
  /* An abandoned capture runs what it recorded. */
  TPUC_CHECK_OK(tpuc_graph_capture_begin(tpuc_test_client(), 0, in, 2, 1, 0));
  TPUC_CHECK_OK(graph_body(w, x, y));
  TPUC_CHECK_OK(tpuc_graph_capture_end(tpuc_test_client(), 0, NULL, 0, true, &g,
                                       why, sizeof why));
  TPUC_CHECK(g == NULL);
  TPUC_CHECK_OK(tpuc_storage_read(w, 0, sizeof got, got));
  TPUC_CHECK(got[0] == 6 && got[3] == 24);
  TPUC_CHECK_ERROR(tpuc_graph_capture_end(tpuc_test_client(), 0, NULL, 0, false,
                                          &g, why, sizeof why),
                   TPUC_FAILED_PRECONDITION, "no graph");
  tpuc_storage_release(x);
  tpuc_storage_release(y);
  tpuc_storage_release(w);
}

/* Reading an input on the host flushes nothing (its value is real), yet
 * what the host computes from it would be a constant of every replay: the
 * capture breaks all the same. So does an explicit break, whose reason
 * stands. */
static void test_host_read_of_an_input_breaks_the_capture(void) {
  const float xv[4] = {1, 2, 3, 4};
  tpuc_storage* x = f32_storage(xv, 4);
  tpuc_storage* y = f32_storage(NULL, 4);
  tpuc_storage* w = f32_storage(NULL, 4);
  tpuc_view in[2] = {vec(w, 4), vec(x, 4)};
  float got[4];
  tpuc_view out[1] = {vec(y, 4)};
  tpuc_graph* g = NULL;
  char why[256];
  TPUC_CHECK_OK(tpuc_graph_capture_begin(tpuc_test_client(), 0, in, 2, 1, 0));
  TPUC_CHECK(!tpuc_graph_capture_broken(tpuc_test_client(), 0));
  TPUC_CHECK_OK(tpuc_storage_read(x, 0, sizeof got, got));
  TPUC_CHECK(got[2] == 3);
  TPUC_CHECK(tpuc_graph_capture_broken(tpuc_test_client(), 0));
  TPUC_CHECK(!tpuc_graph_capture_broken(tpuc_test_client(), 1));
  TPUC_CHECK_OK(graph_body(w, x, y));
  TPUC_CHECK_OK(tpuc_graph_capture_end(tpuc_test_client(), 0, out, 1, false, &g,
                                       why, sizeof why));
  TPUC_CHECK(g == NULL);
  TPUC_CHECK(strstr(why, "read on the host") != NULL);
  TPUC_CHECK_OK(tpuc_storage_read(y, 0, sizeof got, got));
  TPUC_CHECK(got[0] == 3 && got[3] == 12);

  TPUC_CHECK_OK(tpuc_graph_capture_begin(tpuc_test_client(), 0, in, 2, 1, 0));
  TPUC_CHECK_OK(graph_body(w, x, y));
  tpuc_graph_capture_break(tpuc_test_client(), "op X ran elsewhere");
  tpuc_graph_capture_break(tpuc_test_client(), "a later reason");
  TPUC_CHECK(tpuc_graph_capture_broken(tpuc_test_client(), 0));
  TPUC_CHECK_OK(tpuc_graph_capture_end(tpuc_test_client(), 0, out, 1, false, &g,
                                       why, sizeof why));
  TPUC_CHECK(g == NULL && strcmp(why, "op X ran elsewhere") == 0);
  /* No capture: nothing to break, nothing broken. */
  tpuc_graph_capture_break(tpuc_test_client(), "ignored");
  TPUC_CHECK(!tpuc_graph_capture_broken(tpuc_test_client(), 0));
  tpuc_storage_release(x);
  tpuc_storage_release(y);
  tpuc_storage_release(w);
}

/* uniform_ of a storage, with the generator state the capture gives it. */
static void test_random_draws_follow_the_replay_state(void) {
  tpuc_storage* s = f32_storage(NULL, 64);
  tpuc_storage* out = f32_storage(NULL, 64);
  tpuc_view in[1] = {vec(s, 64)};
  TPUC_CHECK_OK(tpuc_graph_capture_begin(tpuc_test_client(), 0, in, 1, 42, 5));
  tpuc_op_arg a;
  memset(&a, 0, sizeof a);
  a.kind = TPUC_OP_ARG_TENSOR;
  a.view = vec(s, 64);
  tpuc_op_options o = kOpts;
  o.rng[0] = 42;
  o.rng[1] = (uint64_t)5 << 32;
  tpuc_op_result r[1];
  size_t n = 0;
  TPUC_CHECK_OK(tpuc_op_run(tpuc_test_client(), 0,
                            tpuc_op_find("aten::uniform_"), &a, 1, &o, r, 1,
                            &n));
  TPUC_CHECK_OK(tpuc_storage_set_value(out, r[0].value));
  tpuc_buffer_release(r[0].value);
  tpuc_view ov[1] = {vec(out, 64)};
  tpuc_graph* g = NULL;
  char why[256];
  TPUC_CHECK_OK(tpuc_graph_capture_end(tpuc_test_client(), 0, ov, 1, false, &g,
                                       why, sizeof why));
  TPUC_CHECK(g != NULL);
  TPUC_CHECK(tpuc_graph_rng_draws(g) == 1);
  float captured[64], same[64], other[64];
  TPUC_CHECK_OK(tpuc_storage_read(out, 0, sizeof captured, captured));
  tpuc_storage* o1 = f32_storage(NULL, 64);
  tpuc_storage* o2 = f32_storage(NULL, 64);
  TPUC_CHECK_OK(tpuc_graph_replay(g, in, 1, &o1, 1, 42, 5));
  TPUC_CHECK_OK(tpuc_graph_replay(g, in, 1, &o2, 1, 42, 6));
  TPUC_CHECK_OK(tpuc_storage_read(o1, 0, sizeof same, same));
  TPUC_CHECK_OK(tpuc_storage_read(o2, 0, sizeof other, other));
  TPUC_CHECK(memcmp(captured, same, sizeof same) == 0);
  TPUC_CHECK(memcmp(captured, other, sizeof other) != 0);
  tpuc_graph_release(g);
  tpuc_storage_release(s);
  tpuc_storage_release(out);
  tpuc_storage_release(o1);
  tpuc_storage_release(o2);
}

static void test_bad_arguments(void) {
  tpuc_graph* g = NULL;
  TPUC_CHECK_ERROR(tpuc_graph_capture_begin(NULL, 0, NULL, 0, 0, 0),
                   TPUC_INVALID_ARGUMENT, NULL);
  TPUC_CHECK_ERROR(tpuc_graph_capture_end(tpuc_test_client(), 0, NULL, 0, false,
                                          &g, NULL, 0),
                   TPUC_FAILED_PRECONDITION, NULL);
  TPUC_CHECK_ERROR(tpuc_graph_replay(NULL, NULL, 0, NULL, 0, 0, 0),
                   TPUC_INVALID_ARGUMENT, NULL);
  tpuc_view none;
  memset(&none, 0, sizeof none);
  TPUC_CHECK_ERROR(
      tpuc_graph_capture_begin(tpuc_test_client(), 0, &none, 1, 0, 0),
      TPUC_INVALID_ARGUMENT, "no storage");
  TPUC_CHECK(!tpuc_graph_matches(NULL, NULL, 0));
}

TPUC_TEST_MAIN(TPUC_TEST(test_capture_and_replay),
               TPUC_TEST(test_host_read_breaks_the_capture),
               TPUC_TEST(test_host_read_of_an_input_breaks_the_capture),
               TPUC_TEST(test_random_draws_follow_the_replay_state),
               TPUC_TEST(test_bad_arguments))
