/* tpuc demo (the README's main job): load the PJRT plugin, print the
 * platform, build y = tanh(x @ w) with the StableHLO builder, compile, run it
 * on every device, and check the result against the host. Exits non-zero on
 * any error or mismatch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpuc/tpuc.h"

#define M 2
#define K 3
#define N 4

static int fail(tpuc_status* st, const char* what) {
  fprintf(stderr, "tpuc_demo: %s: [%s] %s\n", what,
          tpuc_status_code_name(tpuc_status_code(st)), tpuc_status_message(st));
  tpuc_status_free(st);
  return 1;
}

#define TRY(expr, what)                      \
  do {                                       \
    tpuc_status* st_ = (expr);               \
    if (st_ != NULL) return fail(st_, what); \
  } while (0)

/* Builds the program text of y = tanh(x @ w). */
static tpuc_status* build_program(char** text, size_t* len) {
  tpuc_hlo_module* m = NULL;
  TPUC_RETURN_IF_ERROR(tpuc_hlo_module_create("demo", &m));
  tpuc_hlo_fn* fn = NULL;
  tpuc_hlo_type xt = {TPUC_DTYPE_F32, 2, {M, K}};
  tpuc_hlo_type wt = {TPUC_DTYPE_F32, 2, {K, N}};
  tpuc_hlo_value x, w, xw, y;
  int64_t lc[1] = {1}, rc[1] = {0};
  tpuc_hlo_dot_dims dd = {
      NULL, NULL, 0, lc, rc, 1, TPUC_DTYPE_INVALID, TPUC_HLO_PRECISION_HIGHEST};
  tpuc_status* st = tpuc_hlo_main(m, &fn);
  if (!st) st = tpuc_hlo_arg(fn, &xt, &x);
  if (!st) st = tpuc_hlo_arg(fn, &wt, &w);
  if (!st) st = tpuc_hlo_dot_general(fn, x, w, &dd, &xw);
  if (!st) st = tpuc_hlo_unary(fn, TPUC_HLO_TANH, xw, &y);
  if (!st) st = tpuc_hlo_return(fn, &y, 1);
  if (!st) st = tpuc_hlo_module_print(m, text, len);
  tpuc_hlo_module_destroy(m);
  return st;
}

int main(void) {
  tpuc_plugin* plugin = NULL;
  TRY(tpuc_plugin_load(NULL, NULL, 0, &plugin), "loading a PJRT plugin");
  tpuc_plugin_info info;
  TRY(tpuc_plugin_get_info(plugin, &info), "plugin info");
  printf("plugin:   %s %s (%s)\n",
         info.package[0] ? info.package : "(explicit)", info.package_version,
         info.path);
  printf("          PJRT C API %d.%d, StableHLO %d.%d.%d (minimum %d.%d.%d)\n",
         info.api_major, info.api_minor, info.stablehlo_current[0],
         info.stablehlo_current[1], info.stablehlo_current[2],
         info.stablehlo_minimum[0], info.stablehlo_minimum[1],
         info.stablehlo_minimum[2]);
  tpuc_client_options o = {0};
  o.cpu_device_count = 2;
  tpuc_client* c = NULL;
  TRY(tpuc_client_create(plugin, &o, &c), "creating the client");
  const char *platform, *version;
  TRY(tpuc_client_platform(c, &platform, &version), "platform");
  int ndev = 0;
  TRY(tpuc_client_device_count(c, &ndev), "devices");
  printf("platform: %s (%s), %d device(s)\n", platform, version, ndev);

  char* text = NULL;
  size_t len = 0;
  TRY(build_program(&text, &len), "building the program");
  printf("program:\n%s", text);
  tpuc_executable* exe = NULL;
  tpuc_cache_source src;
  tpuc_status* st = tpuc_compile(c, text, len, NULL, &exe, &src);
  free(text);
  if (st) return fail(st, "compiling");
  static const char* kSource[] = {"compiled", "memory cache", "disk cache"};
  printf("compile:  %s (cache folder %s)\n", kSource[src], tpuc_cache_dir(c));

  float x[M * K], w[K * N], y[M * N], want[M * N];
  for (int i = 0; i < M * K; i++) x[i] = 0.25f * (float)(i - 2);
  for (int i = 0; i < K * N; i++) w[i] = 0.1f * (float)((i * 7) % 5 - 2);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double acc = 0;
      for (int k = 0; k < K; k++) acc += (double)x[i * K + k] * w[k * N + j];
      want[i * N + j] = (float)tanh(acc);
    }
  int64_t xd[2] = {M, K}, wd[2] = {K, N};
  int bad = 0;
  for (int d = 0; d < ndev; d++) {
    tpuc_buffer *bx = NULL, *bw = NULL, *by = NULL;
    TRY(tpuc_buffer_from_host(c, d, TPUC_DTYPE_F32, xd, 2, x, NULL, &bx), "x");
    TRY(tpuc_buffer_from_host(c, d, TPUC_DTYPE_F32, wd, 2, w, NULL, &bw), "w");
    tpuc_buffer* args[2] = {bx, bw};
    TRY(tpuc_execute(exe, d, args, 2, NULL, &by, 1), "executing");
    TRY(tpuc_client_synchronize(c), "synchronizing");
    TRY(tpuc_buffer_to_host(by, y, sizeof y), "reading the result");
    double err = 0;
    for (int i = 0; i < M * N; i++) err = fmax(err, fabs(y[i] - want[i]));
    printf(
        "device %d: y[0,:] = [%.5f %.5f %.5f %.5f]  max |y - host| = %.2e %s\n",
        d, y[0], y[1], y[2], y[3], err, err < 1e-5 ? "OK" : "MISMATCH");
    bad |= err >= 1e-5;
    tpuc_buffer_release(bx);
    tpuc_buffer_release(bw);
    tpuc_buffer_release(by);
  }
  tpuc_executable_release(exe);
  tpuc_cache_stats s;
  TRY(tpuc_cache_get_stats(c, &s), "cache stats");
  printf(
      "cache:    %llu compiled (%.1f ms), %llu disk hit(s), %llu memory "
      "hit(s)\n",
      (unsigned long long)s.misses, s.compile_seconds * 1e3,
      (unsigned long long)s.disk_hits, (unsigned long long)s.memory_hits);
  tpuc_client_destroy(c);
  printf("%s\n", bad ? "FAILED" : "demo OK");
  return bad;
}
