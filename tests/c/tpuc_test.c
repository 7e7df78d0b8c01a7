/* Shared pieces of the C test executables (see tpuc_test.h). */
#include "tpuc_test.h"

int tpuc_test_failures = 0;
int tpuc_test_skips = 0;
static tpuc_client* g_client = NULL;

tpuc_client* tpuc_test_client(void) {
  if (g_client != NULL) return g_client;
  tpuc_plugin* plugin = NULL;
  tpuc_status* st = tpuc_plugin_load(NULL, NULL, 0, &plugin);
  if (st == NULL) {
    tpuc_client_options o = {0};
    o.cpu_device_count = 2;
    st = tpuc_client_create(plugin, &o, &g_client);
  }
  if (st != NULL) {
    fprintf(stderr, "cannot create the test client: [%s] %s\n",
            tpuc_status_code_name(tpuc_status_code(st)),
            tpuc_status_message(st));
    tpuc_status_free(st);
    exit(2);
  }
  return g_client;
}

int tpuc_test_device_count(void) {
  int n = 0;
  tpuc_status* st = tpuc_client_device_count(tpuc_test_client(), &n);
  tpuc_status_free(st);
  return n;
}

int tpuc_test_is_cpu(void) {
  const char* name = NULL;
  tpuc_status* st = tpuc_client_platform(tpuc_test_client(), &name, NULL);
  tpuc_status_free(st);
  return name != NULL && strcmp(name, "cpu") == 0;
}

tpuc_status* tpuc_test_run(const char* mlir, tpuc_buffer* const* args,
                           size_t num_args, tpuc_buffer** outs,
                           size_t num_outs) {
  tpuc_client* c = tpuc_test_client();
  tpuc_executable* exe = NULL;
  TPUC_RETURN_IF_ERROR(tpuc_compile(c, mlir, strlen(mlir), NULL, &exe, NULL));
  tpuc_status* st = tpuc_execute(exe, 0, args, num_args, NULL, outs, num_outs);
  tpuc_executable_release(exe);
  if (st != NULL) return st;
  st = tpuc_client_synchronize(c);
  if (st != NULL)
    for (size_t i = 0; i < num_outs; i++) {
      tpuc_buffer_release(outs[i]);
      outs[i] = NULL;
    }
  return st;
}

tpuc_buffer* tpuc_test_buffer(tpuc_dtype dtype, const int64_t* dims, int rank,
                              const void* data) {
  tpuc_buffer* b = NULL;
  tpuc_status* st = tpuc_buffer_from_host(tpuc_test_client(), 0, dtype, dims,
                                          rank, data, NULL, &b);
  if (st != NULL) {
    fprintf(stderr, "tpuc_test_buffer: %s\n", tpuc_status_message(st));
    tpuc_status_free(st);
    return NULL;
  }
  return b;
}

void* tpuc_test_to_host(tpuc_buffer* b) {
  size_t n = tpuc_buffer_byte_size(b);
  void* p = malloc(n ? n : 1);
  if (p == NULL) return NULL;
  tpuc_status* st = tpuc_value_to_host(b, p, n); /* lazy or not */
  if (st != NULL) {
    fprintf(stderr, "tpuc_test_to_host: %s\n", tpuc_status_message(st));
    tpuc_status_free(st);
    free(p);
    return NULL;
  }
  return p;
}

tpuc_status* tpuc_test_run_module(tpuc_hlo_module* m, const tpuc_test_arg* args,
                                  size_t n, void** outs, size_t nouts) {
  char* text = NULL;
  for (size_t j = 0; j < nouts; ++j) outs[j] = NULL;
  TPUC_RETURN_IF_ERROR(tpuc_hlo_module_print(m, &text, NULL));
  tpuc_buffer* in[16] = {0};
  tpuc_buffer* out[64] = {0};
  tpuc_status* st = NULL;
  for (size_t i = 0; i < n && st == NULL; ++i) {
    in[i] = tpuc_test_buffer(args[i].dtype, args[i].dims, args[i].rank,
                             args[i].data);
    if (in[i] == NULL) st = tpuc_status_make(TPUC_INTERNAL, "arg %zu", i);
  }
  if (st == NULL) st = tpuc_test_run(text, in, n, out, nouts);
  for (size_t j = 0; j < nouts; ++j) {
    if (st == NULL) {
      outs[j] = tpuc_test_to_host(out[j]);
      if (outs[j] == NULL) st = tpuc_status_make(TPUC_INTERNAL, "out %zu", j);
    }
    tpuc_buffer_release(out[j]);
  }
  for (size_t i = 0; i < n; ++i) tpuc_buffer_release(in[i]);
  if (st != NULL) {
    fprintf(stderr, "---- module ----\n%s", text);
    for (size_t j = 0; j < nouts; ++j) {
      free(outs[j]);
      outs[j] = NULL;
    }
  }
  free(text);
  return st;
}

void tpuc_test_free_all(void** p, size_t n) {
  for (size_t i = 0; i < n; ++i) free(p[i]);
}

int tpuc_test_run_all(const char* file, const tpuc_test_case* cases, size_t n) {
  size_t failed = 0, skipped = 0;
  for (size_t i = 0; i < n; i++) {
    int before = tpuc_test_failures, skips_before = tpuc_test_skips;
    cases[i].fn();
    int ok = tpuc_test_failures == before;
    int skip = ok && tpuc_test_skips != skips_before;
    if (!ok) failed++;
    if (skip) skipped++;
    printf("[%s] %s\n", !ok ? "FAIL" : skip ? "SKIP" : "PASS", cases[i].name);
    fflush(stdout);
  }
  if (g_client != NULL) {
    tpuc_client_destroy(g_client);
    g_client = NULL;
  }
  printf("%s: %zu passed, %zu failed, %zu skipped\n", file,
         n - failed - skipped, failed, skipped);
  return failed ? 1 : 0;
}
