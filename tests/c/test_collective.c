/* Collectives across the devices of one process: replicated programs, the
 * collective programs of every kind against host-computed results, the
 * in-process group's meeting (threads as ranks), differing calls, a rank
 * that never comes (timeout), point-to-point messages, buffers filled later
 * from the host, and the programs ranks offer with a collective (fused
 * mode). */
#include <pthread.h>

#include "runtime/runtime_internal.h"
#include "tpuc_test.h"

static tpuc_buffer* on_device(int device, tpuc_dtype dtype, int64_t n,
                              const void* data) {
  tpuc_buffer* b = NULL;
  tpuc_status* st = tpuc_buffer_from_host(tpuc_test_client(), device, dtype, &n,
                                          1, data, NULL, &b);
  if (st != NULL) {
    fprintf(stderr, "on_device: %s\n", tpuc_status_message(st));
    tpuc_status_free(st);
  }
  return b;
}

/* A sum all_reduce of `count` f32 over two ranks. */
static tpuc_collective sum_f32(int64_t count) {
  return (tpuc_collective){.kind = TPUC_COLLECTIVE_ALL_REDUCE,
                           .ranks = 2,
                           .dtype = TPUC_DTYPE_F32,
                           .count = count,
                           .value_type = TPUC_DTYPE_F32};
}

/* ---- one rank per thread ------------------------------------------------ */

typedef struct rank_call {
  const char* key;
  int rank;
  tpuc_collective c;
  tpuc_buffer* in;
  int64_t timeout_ms;
  bool skip; /* this rank never calls (the others time out) */
  tpuc_buffer* out;
  tpuc_code code;
  char msg[512];
} rank_call;

/* A rank's end: its outcome in *code and msg; the status, the group
 * handle and the program text are released. */
static void* rank_done(tpuc_status* st, tpuc_code* code, char* msg,
                       size_t cap, tpuc_group* g, char* text) {
  free(text);
  *code = st ? tpuc_status_code(st) : TPUC_OK;
  snprintf(msg, cap, "%s", st ? tpuc_status_message(st) : "");
  tpuc_status_free(st);
  tpuc_group_leave(g);
  return NULL;
}

static void* rank_main(void* p) {
  rank_call* r = p;
  tpuc_group* g = NULL;
  tpuc_status* st = tpuc_group_join(tpuc_test_client(), r->key, r->c.ranks,
                                    r->rank, r->rank, &g);
  char* text = NULL;
  size_t len = 0;
  tpuc_dtype ot;
  int64_t oc;
  if (st == NULL && r->in != NULL)
    st = tpuc_collective_program(&r->c, &text, &len, &ot, &oc);
  char what[96];
  tpuc_collective_describe(&r->c, what, sizeof what);
  if (st == NULL && !r->skip)
    st = tpuc_group_run(g, text, len, what, r->in, r->timeout_ms,
                        r->in ? &r->out : NULL);
  return rank_done(st, &r->code, r->msg, sizeof r->msg, g, text);
}

/* Runs `c` on two ranks (devices 0 and 1) with inputs a and b. */
static void run2(const char* key, const tpuc_collective* c, tpuc_buffer* a,
                 tpuc_buffer* b, rank_call out[2]) {
  pthread_t t[2];
  for (int r = 0; r < 2; r++) {
    memset(&out[r], 0, sizeof out[r]);
    out[r].key = key;
    out[r].rank = r;
    out[r].c = *c;
    out[r].in = r ? b : a;
    out[r].timeout_ms = 20000;
    pthread_create(&t[r], NULL, rank_main, &out[r]);
  }
  for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
}

/* Runs `c` on devices 0 and 1 with the inputs `a` and `b` (n values of
 * `type` each), which it uploads and releases. */
static void run_pair(const char* key, const tpuc_collective* c, tpuc_dtype type,
                     int64_t n, const void* a, const void* b,
                     rank_call out[2]) {
  tpuc_buffer* x = on_device(0, type, n, a);
  tpuc_buffer* y = on_device(1, type, n, b);
  run2(key, c, x, y, out);
  tpuc_buffer_release(x);
  tpuc_buffer_release(y);
}

static void release2(rank_call r[2]) {
  for (int i = 0; i < 2; i++) tpuc_buffer_release(r[i].out);
}

static void test_all_reduce_ops(void) {
  if (tpuc_test_device_count() < 2) TPUC_SKIP("needs two devices");
  const float a[4] = {1, -2, 3, 0.5f}, b[4] = {10, 20, -30, 4};
  struct {
    tpuc_reduce_op op;
    float want[4];
  } cases[] = {
      {TPUC_REDUCE_SUM, {11, 18, -27, 4.5f}},
      {TPUC_REDUCE_PRODUCT, {10, -40, -90, 2}},
      {TPUC_REDUCE_MIN, {1, -2, -30, 0.5f}},
      {TPUC_REDUCE_MAX, {10, 20, 3, 4}},
      {TPUC_REDUCE_AVG, {5.5f, 9, -13.5f, 2.25f}},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    tpuc_collective c = {.kind = TPUC_COLLECTIVE_ALL_REDUCE,
                         .op = cases[k].op,
                         .ranks = 2,
                         .dtype = TPUC_DTYPE_F32,
                         .count = 4,
                         .value_type = TPUC_DTYPE_F32};
    rank_call r[2];
    run_pair("ar", &c, TPUC_DTYPE_F32, 4, a, b, r);
    for (int i = 0; i < 2; i++) {
      if (r[i].code != TPUC_OK) fprintf(stderr, "rank %d: %s\n", i, r[i].msg);
      TPUC_CHECK(r[i].code == TPUC_OK && r[i].out != NULL);
      TPUC_CHECK(tpuc_buffer_device(r[i].out) == i);
      float* h = tpuc_test_to_host(r[i].out);
      int ok = h && memcmp(h, cases[k].want, sizeof cases[k].want) == 0;
      free(h);
      TPUC_CHECK(ok);
    }
    release2(r);
  }
}

/* Values kept as bytes (a storage's u8 value) are reduced as elements:
 * int32 bitwise ops and bools. */
static void test_all_reduce_bytes(void) {
  if (tpuc_test_device_count() < 2) TPUC_SKIP("needs two devices");
  const int32_t a[3] = {0x0F, -1, 6}, b[3] = {0x3C, 5, 3};
  tpuc_reduce_op ops[3] = {TPUC_REDUCE_BAND, TPUC_REDUCE_BOR, TPUC_REDUCE_BXOR};
  for (int k = 0; k < 3; k++) {
    tpuc_collective c = {.kind = TPUC_COLLECTIVE_ALL_REDUCE,
                         .op = ops[k],
                         .ranks = 2,
                         .dtype = TPUC_DTYPE_S32,
                         .count = 3,
                         .value_type = TPUC_DTYPE_U8};
    rank_call r[2];
    run_pair("bits", &c, TPUC_DTYPE_U8, 12, a, b, r);
    if (r[0].code != TPUC_OK) fprintf(stderr, "%s\n", r[0].msg);
    TPUC_CHECK(r[0].code == TPUC_OK && r[1].code == TPUC_OK);
    TPUC_CHECK(tpuc_buffer_dtype(r[1].out) == TPUC_DTYPE_S32);
    int32_t* h = tpuc_test_to_host(r[1].out);
    int ok = h != NULL;
    for (int i = 0; ok && i < 3; i++)
      ok = h[i] == (k == 0   ? (a[i] & b[i])
                    : k == 1 ? (a[i] | b[i])
                             : (a[i] ^ b[i]));
    free(h);
    release2(r);
    TPUC_CHECK(ok);
  }
  const uint8_t p[4] = {1, 0, 1, 0}, q[4] = {1, 1, 0, 0};
  tpuc_collective c = {.kind = TPUC_COLLECTIVE_ALL_REDUCE,
                       .op = TPUC_REDUCE_SUM,
                       .ranks = 2,
                       .dtype = TPUC_DTYPE_PRED,
                       .count = 4,
                       .value_type = TPUC_DTYPE_U8};
  rank_call r[2];
  run_pair("bool", &c, TPUC_DTYPE_U8, 4, p, q, r);
  TPUC_CHECK(r[0].code == TPUC_OK && r[0].out != NULL);
  TPUC_CHECK(tpuc_buffer_dtype(r[0].out) == TPUC_DTYPE_U8);
  uint8_t* h = tpuc_test_to_host(r[0].out);
  const uint8_t want[4] = {1, 1, 1, 0};
  int ok = h && memcmp(h, want, 4) == 0;
  free(h);
  release2(r);
  TPUC_CHECK(ok);
}

static void test_data_movement(void) {
  if (tpuc_test_device_count() < 2) TPUC_SKIP("needs two devices");
  /* int64 elements kept as f32 bits: moved exactly, as bytes. */
  const int64_t a[4] = {1, 2, 3, 4}, b[4] = {-5, 6, INT64_MAX, INT64_MIN};
  tpuc_collective_kind kinds[3] = {TPUC_COLLECTIVE_ALL_GATHER,
                                   TPUC_COLLECTIVE_ALL_TO_ALL,
                                   TPUC_COLLECTIVE_BROADCAST};
  for (int k = 0; k < 3; k++) {
    tpuc_collective c = {.kind = kinds[k],
                         .ranks = 2,
                         .root = 1,
                         .dtype = TPUC_DTYPE_S64,
                         .count = 4,
                         .value_type = TPUC_DTYPE_F32};
    rank_call r[2];
    run_pair("move", &c, TPUC_DTYPE_F32, 8, a, b, r);
    for (int i = 0; i < 2; i++) {
      TPUC_CHECK(r[i].code == TPUC_OK && r[i].out != NULL);
      int64_t* h = tpuc_test_to_host(r[i].out);
      int ok = h != NULL;
      if (k == 0) { /* a then b */
        ok = ok && tpuc_buffer_byte_size(r[i].out) == 64 &&
             memcmp(h, a, 32) == 0 && memcmp(h + 4, b, 32) == 0;
      } else if (k == 1) { /* rank i: part i of a, part i of b */
        ok = ok && memcmp(h, a + 2 * i, 16) == 0 &&
             memcmp(h + 2, b + 2 * i, 16) == 0;
      } else {
        ok = ok && memcmp(h, b, 32) == 0;
      }
      free(h);
      TPUC_CHECK(ok);
    }
    release2(r);
  }
}

static void test_reduce_scatter(void) {
  if (tpuc_test_device_count() < 2) TPUC_SKIP("needs two devices");
  const int32_t a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
  tpuc_collective c = {.kind = TPUC_COLLECTIVE_REDUCE_SCATTER,
                       .op = TPUC_REDUCE_AVG,
                       .ranks = 2,
                       .dtype = TPUC_DTYPE_S32,
                       .count = 4,
                       .value_type = TPUC_DTYPE_S32};
  rank_call r[2];
  run_pair("rs", &c, TPUC_DTYPE_S32, 4, a, b, r);
  const int32_t want[2][2] = {{5, 11}, {16, 22}}; /* truncated averages */
  for (int i = 0; i < 2; i++) {
    TPUC_CHECK(r[i].code == TPUC_OK && r[i].out != NULL);
    int32_t* h = tpuc_test_to_host(r[i].out);
    int ok = h && tpuc_buffer_num_elements(r[i].out) == 2 &&
             memcmp(h, want[i], 8) == 0;
    free(h);
    TPUC_CHECK(ok);
  }
  release2(r);
}

static void test_program_errors(void) {
  char* text = NULL;
  size_t len;
  tpuc_dtype ot;
  int64_t oc;
  tpuc_collective c = {.kind = TPUC_COLLECTIVE_ALL_REDUCE,
                       .op = TPUC_REDUCE_BXOR,
                       .ranks = 2,
                       .dtype = TPUC_DTYPE_F32,
                       .count = 4,
                       .value_type = TPUC_DTYPE_F32};
  TPUC_CHECK_ERROR(tpuc_collective_program(&c, &text, &len, &ot, &oc),
                   TPUC_INVALID_ARGUMENT, "integers and bool");
  c.op = TPUC_REDUCE_SUM;
  c.dtype = c.value_type = TPUC_DTYPE_C64;
  c.value_type = TPUC_DTYPE_U8;
  TPUC_CHECK_ERROR(tpuc_collective_program(&c, &text, &len, &ot, &oc),
                   TPUC_UNIMPLEMENTED, "complex");
  c.dtype = c.value_type = TPUC_DTYPE_F32;
  c.kind = TPUC_COLLECTIVE_REDUCE_SCATTER;
  c.count = 3;
  TPUC_CHECK_ERROR(tpuc_collective_program(&c, &text, &len, &ot, &oc),
                   TPUC_INVALID_ARGUMENT, "equal parts");
  c.kind = TPUC_COLLECTIVE_BROADCAST;
  c.root = 2;
  TPUC_CHECK_ERROR(tpuc_collective_program(&c, &text, &len, &ot, &oc),
                   TPUC_INVALID_ARGUMENT, "root 2");
  char what[96];
  c.kind = TPUC_COLLECTIVE_ALL_REDUCE;
  c.op = TPUC_REDUCE_MAX;
  c.count = 8;
  tpuc_collective_describe(&c, what, sizeof what);
  TPUC_CHECK(strcmp(what, "all_reduce (max) of f32[8] over 2 ranks") == 0);
}

/* Ranks that call different collectives all get an error naming both
 * calls, and the group is usable afterwards. */
static void test_mismatch(void) {
  if (tpuc_test_device_count() < 2) TPUC_SKIP("needs two devices");
  const float a[8] = {0};
  tpuc_buffer* x = on_device(0, TPUC_DTYPE_F32, 4, a);
  tpuc_buffer* y = on_device(1, TPUC_DTYPE_F32, 8, a);
  rank_call r[2];
  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    memset(&r[i], 0, sizeof r[i]);
    r[i].key = "mismatch";
    r[i].rank = i;
    r[i].c = (tpuc_collective){.kind = TPUC_COLLECTIVE_ALL_REDUCE,
                               .ranks = 2,
                               .dtype = TPUC_DTYPE_F32,
                               .count = i ? 8 : 4,
                               .value_type = TPUC_DTYPE_F32};
    r[i].in = i ? y : x;
    r[i].timeout_ms = 20000;
    pthread_create(&t[i], NULL, rank_main, &r[i]);
  }
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++) {
    TPUC_CHECK(r[i].code == TPUC_INVALID_ARGUMENT);
    TPUC_CHECK(strstr(r[i].msg, "rank 0: all_reduce (sum) of f32[4]") != NULL);
    TPUC_CHECK(strstr(r[i].msg, "rank 1: all_reduce (sum) of f32[8]") != NULL);
    TPUC_CHECK(r[i].out == NULL);
  }
  tpuc_collective c = {.kind = TPUC_COLLECTIVE_ALL_REDUCE,
                       .ranks = 2,
                       .dtype = TPUC_DTYPE_F32,
                       .count = 4,
                       .value_type = TPUC_DTYPE_F32};
  tpuc_buffer* z = on_device(1, TPUC_DTYPE_F32, 4, a);
  run2("mismatch", &c, x, z, r);
  tpuc_buffer_release(x);
  tpuc_buffer_release(y);
  tpuc_buffer_release(z);
  TPUC_CHECK(r[0].code == TPUC_OK && r[1].code == TPUC_OK);
  release2(r);
}

/* A rank that never calls: the other gives up after its timeout, naming
 * it. */
static void test_timeout(void) {
  if (tpuc_test_device_count() < 2) TPUC_SKIP("needs two devices");
  const float a[4] = {0};
  tpuc_buffer* x = on_device(0, TPUC_DTYPE_F32, 4, a);
  rank_call r[2];
  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    memset(&r[i], 0, sizeof r[i]);
    r[i].key = "late";
    r[i].rank = i;
    r[i].c = (tpuc_collective){.kind = TPUC_COLLECTIVE_ALL_REDUCE,
                               .ranks = 2,
                               .dtype = TPUC_DTYPE_F32,
                               .count = 4,
                               .value_type = TPUC_DTYPE_F32};
    r[i].in = x;
    r[i].skip = i == 1;
    r[i].timeout_ms = 200;
    pthread_create(&t[i], NULL, rank_main, &r[i]);
  }
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  tpuc_buffer_release(x);
  TPUC_CHECK(r[0].code == TPUC_DEADLINE_EXCEEDED);
  TPUC_CHECK(strstr(r[0].msg, "rank(s) 1") != NULL);
  TPUC_CHECK(strstr(r[0].msg, "all_reduce (sum) of f32[4]") != NULL);
}

/* What ranks offer with a collective (tpuc_group_offer): a program that
 * adds its two arguments and all-reduces the sum, returning both; with
 * `give`, the first argument's memory goes to the first result. */
static size_t offered_text(bool give, char* buf, size_t cap) {
  int n = snprintf(
      buf, cap,
      "module @offered {\n"
      "  func.func public @main(%%a: tensor<4xf32>%s, %%b: tensor<4xf32>) -> "
      "(tensor<4xf32>, tensor<4xf32>) {\n"
      "    %%s = stablehlo.add %%a, %%b : tensor<4xf32>\n"
      "    %%r = \"stablehlo.all_reduce\"(%%s) ({\n"
      "    ^bb0(%%x: tensor<f32>, %%y: tensor<f32>):\n"
      "      %%z = stablehlo.add %%x, %%y : tensor<f32>\n"
      "      stablehlo.return %%z : tensor<f32>\n"
      "    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : "
      "(tensor<4xf32>) -> tensor<4xf32>\n"
      "    return %%s, %%r : tensor<4xf32>, tensor<4xf32>\n"
      "  }\n"
      "}\n",
      give ? " {tf.aliasing_output = 0 : i32}" : "");
  return n > 0 ? (size_t)n : 0;
}

typedef struct offer_call {
  int rank;
  bool offer;     /* offers the program (else calls the collective) */
  bool give;      /* gives away its first argument (offered_text) */
  uint64_t key;   /* the offer's key */
  bool again;     /* after nothing ran, calls the collective alone */
  tpuc_buffer* a; /* the offer's arguments, and the collective's */
  tpuc_buffer* b;
  int how;
  tpuc_code code;
  char msg[256];
  tpuc_buffer* outs[2]; /* the offer's results */
  tpuc_buffer* out;     /* the collective's */
  tpuc_executable* exe;
} offer_call;

static void* offer_main(void* p) {
  offer_call* r = p;
  tpuc_group* g = NULL;
  tpuc_collective c = sum_f32(4);
  char* text = NULL;
  size_t len = 0;
  tpuc_dtype ot;
  int64_t oc;
  tpuc_status* st =
      tpuc_group_join(tpuc_test_client(), "offers", 2, r->rank, r->rank, &g);
  if (st == NULL) st = tpuc_collective_program(&c, &text, &len, &ot, &oc);
  r->how = -1;
  if (st == NULL && r->offer) {
    tpuc_buffer* args[2] = {r->a, r->b};
    static const bool give[2] = {true, false};
    char prog[1024];
    tpuc_group_offer o = {.key = {r->key, 7},
                          .text = prog,
                          .len = offered_text(r->give, prog, sizeof prog),
                          .args = args,
                          .nargs = 2,
                          .donate = r->give ? give : NULL,
                          .outs = r->outs,
                          .nouts = 2,
                          .source = -1};
    st = tpuc_group_run_offer(g, text, len, "all_reduce", r->a, &o, 20000,
                              NULL, &r->how);
    r->exe = o.exe;
    if (st == NULL && r->how == TPUC_GROUP_RAN_NONE && r->again)
      st = tpuc_group_run(g, text, len, "all_reduce", r->a, 20000, &r->out);
  } else if (st == NULL) {
    st = tpuc_group_run(g, text, len, "all_reduce", r->a, 20000, &r->out);
  }
  return rank_done(st, &r->code, r->msg, sizeof r->msg, g, text);
}

static void offers2(offer_call r[2], const float* a, const float* b) {
  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    r[i].rank = i;
    r[i].a = on_device(i, TPUC_DTYPE_F32, 4, a + 4 * i);
    r[i].b = on_device(i, TPUC_DTYPE_F32, 4, b + 4 * i);
    pthread_create(&t[i], NULL, offer_main, &r[i]);
  }
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
}

static void offers_free(offer_call r[2]) {
  for (int i = 0; i < 2; i++) {
    tpuc_buffer_release(r[i].a);
    tpuc_buffer_release(r[i].b);
    tpuc_buffer_release(r[i].outs[0]);
    tpuc_buffer_release(r[i].outs[1]);
    tpuc_buffer_release(r[i].out);
    if (r[i].exe != NULL) tpuc_executable_release(r[i].exe);
  }
}

/* Whether `b` holds the 4 floats `want`. */
static bool holds(tpuc_buffer* b, const float* want) {
  float* h = b ? tpuc_test_to_host(b) : NULL;
  bool ok = h != NULL && memcmp(h, want, 4 * sizeof *want) == 0;
  free(h);
  return ok;
}

/* Ranks that offer one program run it across their devices; ranks whose
 * offers differ, or where one rank offers nothing, run nothing and then
 * meet again for the collective alone. */
static void test_offers(void) {
  if (tpuc_test_device_count() < 2) TPUC_SKIP("needs two devices");
  const float a[8] = {1, 2, 3, 4, 10, 20, 30, 40};
  const float b[8] = {0.5f, 0, -1, 2, 1, 1, 1, 1};
  const float sums[8] = {1.5f, 2, 2, 6, 11, 21, 31, 41};
  const float all[4] = {12.5f, 23, 33, 47}; /* sums of both ranks */
  const float plain[4] = {11, 22, 33, 44};  /* a of both ranks */
  /* Every rank offers the same key: the program ran. */
  offer_call r[2];
  memset(r, 0, sizeof r);
  r[0].offer = r[1].offer = true;
  r[0].key = r[1].key = 1;
  offers2(r, a, b);
  for (int i = 0; i < 2; i++) {
    if (r[i].code != TPUC_OK) fprintf(stderr, "rank %d: %s\n", i, r[i].msg);
    TPUC_CHECK(r[i].code == TPUC_OK && r[i].how == TPUC_GROUP_RAN_OFFER);
    TPUC_CHECK(holds(r[i].outs[0], sums + 4 * i));
    TPUC_CHECK(holds(r[i].outs[1], all));
    TPUC_CHECK(r[i].exe != NULL && tpuc_executable_num_replicas(r[i].exe) == 2);
  }
  offers_free(r);
  /* Different keys: nothing ran; each then runs the collective alone. */
  memset(r, 0, sizeof r);
  r[0].offer = r[1].offer = true;
  r[0].key = 1;
  r[1].key = 2;
  r[0].again = r[1].again = true;
  offers2(r, a, b);
  for (int i = 0; i < 2; i++) {
    TPUC_CHECK(r[i].code == TPUC_OK && r[i].how == TPUC_GROUP_RAN_NONE);
    TPUC_CHECK(r[i].outs[0] == NULL && r[i].outs[1] == NULL);
    TPUC_CHECK(holds(r[i].out, plain));
  }
  offers_free(r);
  /* Rank 1 offers nothing (another mode): the same. */
  memset(r, 0, sizeof r);
  r[0].offer = true;
  r[0].key = 1;
  r[0].again = true;
  offers2(r, a, b);
  TPUC_CHECK(r[0].code == TPUC_OK && r[0].how == TPUC_GROUP_RAN_NONE);
  TPUC_CHECK(r[1].code == TPUC_OK);
  for (int i = 0; i < 2; i++) TPUC_CHECK(holds(r[i].out, plain));
  offers_free(r);
  /* Both give their first argument to the first result: it ran, and that
   * argument is gone. */
  memset(r, 0, sizeof r);
  r[0].offer = r[1].offer = r[0].give = r[1].give = true;
  r[0].key = r[1].key = 3;
  offers2(r, a, b);
  for (int i = 0; i < 2; i++) {
    TPUC_CHECK(r[i].code == TPUC_OK && r[i].how == TPUC_GROUP_RAN_OFFER);
    TPUC_CHECK(holds(r[i].outs[0], sums + 4 * i));
    TPUC_CHECK(holds(r[i].outs[1], all));
    TPUC_CHECK(tpuc_buffer_is_deleted(r[i].a) && !tpuc_buffer_is_deleted(r[i].b));
  }
  offers_free(r);
  /* One key, but only one rank gives its argument: nothing ran. */
  memset(r, 0, sizeof r);
  r[0].offer = r[1].offer = r[0].give = true;
  r[0].key = r[1].key = 3;
  r[0].again = r[1].again = true;
  offers2(r, a, b);
  for (int i = 0; i < 2; i++) {
    TPUC_CHECK(r[i].code == TPUC_OK && r[i].how == TPUC_GROUP_RAN_NONE);
    TPUC_CHECK(!tpuc_buffer_is_deleted(r[i].a) && holds(r[i].out, plain));
  }
  offers_free(r);
}

static void test_join_errors(void) {
  if (tpuc_test_device_count() < 2) TPUC_SKIP("needs two devices");
  tpuc_client* c = tpuc_test_client();
  tpuc_group *g = NULL, *h = NULL;
  TPUC_CHECK_ERROR(tpuc_group_join(c, "j", 2, 2, 0, &g), TPUC_INVALID_ARGUMENT,
                   "rank 2 of a group of 2");
  TPUC_CHECK_ERROR(tpuc_group_join(c, "j", 2, 0, 9, &g), TPUC_INVALID_ARGUMENT,
                   "device 9");
  TPUC_CHECK_OK(tpuc_group_join(c, "j", 2, 0, 0, &g));
  TPUC_CHECK_ERROR(tpuc_group_join(c, "j", 2, 1, 0, &h), TPUC_INVALID_ARGUMENT,
                   "its own device");
  TPUC_CHECK_ERROR(tpuc_group_join(c, "j", 2, 0, 1, &h), TPUC_ALREADY_EXISTS,
                   NULL);
  TPUC_CHECK_ERROR(tpuc_group_join(c, "j", 3, 1, 1, &h), TPUC_INVALID_ARGUMENT,
                   "has 2 ranks");
  TPUC_CHECK(tpuc_group_size(g) == 2 && tpuc_group_rank(g) == 0);
  TPUC_CHECK(tpuc_group_device(g, 0) == 0 && tpuc_group_device(g, 1) == -1);
  tpuc_group_leave(g);
  /* The last member gone, the key is free for a new group. */
  TPUC_CHECK_OK(tpuc_group_join(c, "j", 3, 1, 1, &h));
  tpuc_group_leave(h);
}

typedef struct {
  tpuc_group* g;
  tpuc_buffer* got;
  tpuc_code code;
} recv_ctx;

static void* recv_main(void* p) {
  recv_ctx* r = p;
  tpuc_status* st = tpuc_group_recv(r->g, 0, 7, 20000, &r->got);
  r->code = st ? tpuc_status_code(st) : TPUC_OK;
  tpuc_status_free(st);
  return NULL;
}

static void test_send_recv(void) {
  if (tpuc_test_device_count() < 2) TPUC_SKIP("needs two devices");
  tpuc_client* c = tpuc_test_client();
  tpuc_group *g0 = NULL, *g1 = NULL;
  TPUC_CHECK_OK(tpuc_group_join(c, "p2p", 2, 0, 0, &g0));
  TPUC_CHECK_OK(tpuc_group_join(c, "p2p", 2, 1, 1, &g1));
  recv_ctx rc = {.g = g1};
  pthread_t t;
  pthread_create(&t, NULL, recv_main, &rc);
  const double v[3] = {1.5, -2.5, 3.25};
  tpuc_buffer* x = on_device(0, TPUC_DTYPE_F64, 3, v);
  tpuc_status* st = tpuc_group_send(g0, 1, 7, x);
  pthread_join(t, NULL);
  tpuc_buffer_release(x);
  TPUC_CHECK_OK(st);
  TPUC_CHECK(rc.code == TPUC_OK && rc.got != NULL);
  TPUC_CHECK(tpuc_buffer_device(rc.got) == 1);
  double* h = tpuc_test_to_host(rc.got);
  int ok = h && memcmp(h, v, sizeof v) == 0;
  free(h);
  tpuc_buffer_release(rc.got);
  TPUC_CHECK(ok);
  tpuc_buffer* none = NULL;
  TPUC_CHECK_ERROR(tpuc_group_recv(g1, 0, 8, 50, &none), TPUC_DEADLINE_EXCEEDED,
                   "tag 8");
  TPUC_CHECK_ERROR(tpuc_group_send(g0, 0, 1, x), TPUC_INVALID_ARGUMENT,
                   "cannot send");
  tpuc_group_leave(g0);
  tpuc_group_leave(g1);
}

/* A buffer used by an execution before its value is sent. */
static void test_transfer(void) {
  tpuc_client* c = tpuc_test_client();
  tpuc_status* st = NULL;
  static const char kTwice[] =
      "module @twice {\n"
      "  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>) {\n"
      "    %0 = \"stablehlo.add\"(%arg0, %arg0) : (tensor<3xf32>, "
      "tensor<3xf32>) -> tensor<3xf32>\n"
      "    \"func.return\"(%0) : (tensor<3xf32>) -> ()\n"
      "  }\n"
      "}\n";
  tpuc_executable* e = NULL;
  TPUC_CHECK_OK(tpuc_compile(c, kTwice, strlen(kTwice), NULL, &e, NULL));
  int64_t n = 3;
  tpuc_transfer* t = NULL;
  tpuc_buffer* b = NULL;
  TPUC_CHECK_OK(tpuc_transfer_create(c, 0, TPUC_DTYPE_F32, &n, 1, &t, &b));
  tpuc_buffer* out = NULL;
  TPUC_CHECK_OK(tpuc_execute(e, 0, &b, 1, NULL, &out, 1));
  const float v[3] = {1, 2, 3};
  TPUC_CHECK_ERROR(tpuc_transfer_fill(t, v, 8), TPUC_INVALID_ARGUMENT,
                   "exactly 12 bytes");
  TPUC_CHECK_OK(tpuc_transfer_fill(t, v, sizeof v));
  TPUC_CHECK_ERROR(tpuc_transfer_fill(t, v, sizeof v), TPUC_FAILED_PRECONDITION,
                   NULL);
  tpuc_transfer_free(t);
  float* h = tpuc_test_to_host(out);
  int ok = h && h[0] == 2 && h[1] == 4 && h[2] == 6;
  free(h);
  tpuc_buffer_release(out);
  tpuc_buffer_release(b);
  TPUC_CHECK(ok);
  /* A failed transfer fails what reads it; an abandoned one too. */
  TPUC_CHECK_OK(tpuc_transfer_create(c, 0, TPUC_DTYPE_F32, &n, 1, &t, &b));
  TPUC_CHECK_OK(tpuc_execute(e, 0, &b, 1, NULL, &out, 1));
  TPUC_CHECK_OK(tpuc_transfer_fail(t, TPUC_ABORTED, "peer went away"));
  tpuc_transfer_free(t);
  float tmp[3];
  /* The plugin reports a failed input of an execution as its own error,
   * with the input's message. */
  st = tpuc_buffer_to_host(out, tmp, sizeof tmp);
  TPUC_CHECK(st != NULL && strstr(tpuc_status_message(st), "peer went away"));
  tpuc_status_free(st);
  tpuc_buffer_release(out);
  tpuc_buffer_release(b);
  tpuc_status_free(tpuc_client_synchronize(c));
  TPUC_CHECK_OK(tpuc_transfer_create(c, 0, TPUC_DTYPE_F32, &n, 1, &t, &b));
  tpuc_transfer_free(t);
  TPUC_CHECK_ERROR(tpuc_buffer_to_host(b, tmp, sizeof tmp), TPUC_ABORTED,
                   "never sent");
  tpuc_buffer_release(b);
  tpuc_executable_release(e);
}

static void test_replicated_errors(void) {
  if (tpuc_test_device_count() < 2) TPUC_SKIP("needs two devices");
  tpuc_client* c = tpuc_test_client();
  tpuc_collective col = sum_f32(2);
  char* text = NULL;
  size_t len;
  tpuc_dtype ot;
  int64_t oc;
  TPUC_CHECK_OK(tpuc_collective_program(&col, &text, &len, &ot, &oc));
  int same[2] = {1, 1}, bad[2] = {0, 5}, devs[2] = {1, 0};
  tpuc_compile_options o = {.num_replicas = 2, .replica_devices = same};
  tpuc_executable* e = NULL;
  tpuc_status* st = tpuc_compile(c, text, len, &o, &e, NULL);
  TPUC_CHECK(st != NULL && strstr(tpuc_status_message(st), "both on device"));
  tpuc_status_free(st);
  o.replica_devices = bad;
  st = tpuc_compile(c, text, len, &o, &e, NULL);
  TPUC_CHECK(st != NULL && tpuc_status_code(st) == TPUC_INVALID_ARGUMENT);
  tpuc_status_free(st);
  o.replica_devices = devs;
  st = tpuc_compile(c, text, len, &o, &e, NULL);
  free(text);
  TPUC_CHECK_OK(st);
  TPUC_CHECK(tpuc_executable_num_replicas(e) == 2);
  TPUC_CHECK(tpuc_executable_replica_device(e, 0) == 1);
  const float v[2] = {1, 2};
  tpuc_buffer* args[2] = {on_device(1, TPUC_DTYPE_F32, 2, v),
                          on_device(1, TPUC_DTYPE_F32, 2, v)};
  tpuc_buffer* outs[2] = {NULL, NULL};
  /* Replica 1 runs on device 0, so its argument must be there. */
  TPUC_CHECK_ERROR(tpuc_execute_replicated(e, args, 1, NULL, outs, 1),
                   TPUC_INVALID_ARGUMENT, "replica 1");
  TPUC_CHECK_ERROR(tpuc_execute(e, 1, args, 1, NULL, outs, 1),
                   TPUC_INVALID_ARGUMENT, "tpuc_execute_replicated");
  tpuc_buffer_release(args[1]);
  args[1] = on_device(0, TPUC_DTYPE_F32, 2, v);
  TPUC_CHECK_OK(tpuc_execute_replicated(e, args, 1, NULL, outs, 1));
  float* h = tpuc_test_to_host(outs[1]);
  int ok = h && h[0] == 2 && h[1] == 4 && tpuc_buffer_device(outs[1]) == 0;
  free(h);
  for (int i = 0; i < 2; i++) {
    tpuc_buffer_release(args[i]);
    tpuc_buffer_release(outs[i]);
  }
  tpuc_executable_release(e);
  TPUC_CHECK(ok);
}

TPUC_TEST_MAIN(TPUC_TEST(test_all_reduce_ops), TPUC_TEST(test_all_reduce_bytes),
               TPUC_TEST(test_data_movement), TPUC_TEST(test_reduce_scatter),
               TPUC_TEST(test_program_errors), TPUC_TEST(test_mismatch),
               TPUC_TEST(test_timeout), TPUC_TEST(test_offers),
               TPUC_TEST(test_join_errors),
               TPUC_TEST(test_send_recv), TPUC_TEST(test_transfer),
               TPUC_TEST(test_replicated_errors))
