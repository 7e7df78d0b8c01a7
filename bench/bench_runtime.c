/* Runtime benchmark (not a test): compile latency per cache tier, per-call
 * execution overhead, host<->device bandwidth. Writes
 * $TPUC_BENCH_RESULTS_DIR/runtime.json (default bench/results) and prints
 * the figures. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "tpuc/tpuc.h"

#ifndef TPUC_BENCH_RESULTS_DIR
#define TPUC_BENCH_RESULTS_DIR "bench/results"
#endif

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(tpuc_status* st, const char* what) {
  if (st == NULL) return;
  fprintf(stderr, "bench_runtime: %s: [%s] %s\n", what,
          tpuc_status_code_name(tpuc_status_code(st)), tpuc_status_message(st));
  exit(1);
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One-op program; `tag` changes the text (and so the cache key) only. */
static char* one_op(const char* tag) {
  char* s = malloc(512);
  snprintf(s, 512,
           "module @bench_%s {\n  func.func public @main(%%arg0: "
           "tensor<4xf32>, %%arg1: tensor<4xf32>) -> (tensor<4xf32>) {\n"
           "    %%0 = \"stablehlo.add\"(%%arg0, %%arg1) : (tensor<4xf32>, "
           "tensor<4xf32>) -> tensor<4xf32>\n    \"func.return\"(%%0) : "
           "(tensor<4xf32>) -> ()\n  }\n}\n",
           tag);
  return s;
}

static void machine_string(char* out, size_t cap) {
  struct utsname u;
  uname(&u);
  char model[256] = "unknown cpu";
  FILE* f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    while (fgets(line, sizeof line, f)) {
      if (strncmp(line, "model name", 10) == 0) {
        char* colon = strchr(line, ':');
        if (colon) {
          snprintf(model, sizeof model, "%s", colon + 2);
          model[strcspn(model, "\n")] = '\0';
        }
        break;
      }
    }
    fclose(f);
  }
  snprintf(out, cap, "%s %s, %s, %ld cores", u.sysname, u.machine, model,
           sysconf(_SC_NPROCESSORS_ONLN));
}

static void json_string(FILE* f, const char* key, const char* v, int comma) {
  fprintf(f, "  \"%s\": \"", key);
  for (const char* p = v; *p; p++) {
    if (*p == '"' || *p == '\\') fputc('\\', f);
    if ((unsigned char)*p >= 0x20) fputc(*p, f);
  }
  fprintf(f, "\"%s\n", comma ? "," : "");
}

int main(void) {
  tpuc_plugin* plugin = NULL;
  die(tpuc_plugin_load(NULL, NULL, 0, &plugin), "loading the plugin");
  tpuc_plugin_info info;
  die(tpuc_plugin_get_info(plugin, &info), "plugin info");
  char cache_dir[256];
  snprintf(cache_dir, sizeof cache_dir, "/tmp/tpuc-bench-cache-%d",
           (int)getpid());
  tpuc_client_options o = {0};
  o.cache_dir = cache_dir;
  tpuc_client* c = NULL;
  die(tpuc_client_create(plugin, &o, &c), "creating the client");
  const char *platform, *pversion;
  die(tpuc_client_platform(c, &platform, &pversion), "platform");
  tpuc_device_info dev;
  die(tpuc_client_device_info(c, 0, &dev), "device");

  /* Compile: cold (new key each time), then disk hit for the same keys. */
  enum { NCOMP = 9 };
  double cold[NCOMP], disk[NCOMP];
  char tag[64];
  for (int i = 0; i < NCOMP; i++) {
    snprintf(tag, sizeof tag, "%d_%d", (int)getpid(), i);
    char* text = one_op(tag);
    tpuc_executable* e = NULL;
    tpuc_cache_source src;
    double t0 = now();
    die(tpuc_compile(c, text, strlen(text), NULL, &e, &src), "cold compile");
    cold[i] = (now() - t0) * 1e3;
    if (src != TPUC_CACHE_COMPILED)
      die(tpuc_status_make(TPUC_INTERNAL, "cold compile was a hit"), "cold");
    tpuc_executable_release(e);
    free(text);
  }
  die(tpuc_cache_clear(c, false), "clearing the memory tier");
  for (int i = 0; i < NCOMP; i++) {
    snprintf(tag, sizeof tag, "%d_%d", (int)getpid(), i);
    char* text = one_op(tag);
    tpuc_executable* e = NULL;
    tpuc_cache_source src;
    double t0 = now();
    die(tpuc_compile(c, text, strlen(text), NULL, &e, &src),
        "disk-hit compile");
    disk[i] = (now() - t0) * 1e3;
    if (src != TPUC_CACHE_DISK)
      die(tpuc_status_make(TPUC_INTERNAL, "expected a disk hit (got %d)",
                           (int)src),
          "disk");
    tpuc_executable_release(e);
    free(text);
  }
  double compile_cold_ms = median(cold, NCOMP);
  double compile_disk_ms = median(disk, NCOMP);

  /* In-memory hit. */
  char* text = one_op("hot");
  tpuc_executable* exe = NULL;
  die(tpuc_compile(c, text, strlen(text), NULL, &exe, NULL), "compile");
  const int NHIT = 200000;
  double t0 = now();
  for (int i = 0; i < NHIT; i++) {
    tpuc_executable* e = NULL;
    die(tpuc_compile(c, text, strlen(text), NULL, &e, NULL), "hit");
    tpuc_executable_release(e);
  }
  double cache_hit_us = (now() - t0) / NHIT * 1e6;

  /* Execution overhead on tiny inputs. */
  float a[4] = {1, 2, 3, 4};
  int64_t dims[1] = {4};
  tpuc_buffer *x = NULL, *y = NULL;
  die(tpuc_buffer_from_host(c, 0, TPUC_DTYPE_F32, dims, 1, a, NULL, &x), "h2d");
  die(tpuc_buffer_from_host(c, 0, TPUC_DTYPE_F32, dims, 1, a, NULL, &y), "h2d");
  tpuc_buffer* args[2] = {x, y};
  for (int i = 0; i < 1000; i++) { /* warm up */
    tpuc_buffer* out = NULL;
    die(tpuc_execute(exe, 0, args, 2, NULL, &out, 1), "execute");
    tpuc_buffer_release(out);
  }
  die(tpuc_client_synchronize(c), "sync");
  enum { NROUND = 15, PER = 2000 };
  double enq[NROUND], e2e[NROUND];
  for (int r = 0; r < NROUND; r++) {
    double t = 0;
    for (int i = 0; i < PER; i++) {
      tpuc_buffer* out = NULL;
      double s = now();
      die(tpuc_execute(exe, 0, args, 2, NULL, &out, 1), "execute");
      t += now() - s;
      tpuc_buffer_release(out);
    }
    enq[r] = t / PER * 1e6;
    die(tpuc_client_synchronize(c), "sync");
    double s = now();
    for (int i = 0; i < PER / 4; i++) {
      tpuc_buffer* out = NULL;
      die(tpuc_execute(exe, 0, args, 2, NULL, &out, 1), "execute");
      tpuc_event* ev = NULL;
      die(tpuc_buffer_ready_event(out, &ev), "ready");
      die(tpuc_event_await(ev), "await");
      tpuc_event_destroy(ev);
      tpuc_buffer_release(out);
    }
    e2e[r] = (now() - s) / (PER / 4) * 1e6;
    die(tpuc_client_synchronize(c), "sync");
  }
  double enqueue_us = median(enq, NROUND);
  double execute_e2e_us = median(e2e, NROUND);
  tpuc_buffer_release(x);
  tpuc_buffer_release(y);
  tpuc_executable_release(exe);
  free(text);

  /* Bandwidth, 1 MiB .. 256 MiB, best of 5. */
  const int sizes_mib[] = {1, 4, 16, 64, 256};
  const int NS = sizeof sizes_mib / sizeof sizes_mib[0];
  double h2d[8], d2h[8];
  for (int s = 0; s < NS; s++) {
    size_t bytes = (size_t)sizes_mib[s] << 20;
    unsigned char* host = malloc(bytes);
    unsigned char* back = malloc(bytes);
    if (!host || !back)
      die(tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "host memory"), "alloc");
    memset(host, 1, bytes);
    memset(back, 0, bytes);
    int64_t n[1] = {(int64_t)(bytes / 4)};
    double best_h = 1e30, best_d = 1e30;
    for (int rep = 0; rep < 5; rep++) {
      tpuc_buffer* b = NULL;
      double t = now();
      die(tpuc_buffer_from_host(c, 0, TPUC_DTYPE_F32, n, 1, host, NULL, &b),
          "h2d");
      tpuc_event* ev = NULL;
      die(tpuc_buffer_ready_event(b, &ev), "ready");
      die(tpuc_event_await(ev), "await");
      tpuc_event_destroy(ev);
      double th = now() - t;
      t = now();
      die(tpuc_buffer_to_host(b, back, bytes), "d2h");
      double td = now() - t;
      tpuc_buffer_release(b);
      if (th < best_h) best_h = th;
      if (td < best_d) best_d = td;
    }
    if (memcmp(host, back, bytes) != 0)
      die(tpuc_status_make(TPUC_DATA_LOSS, "round trip differs"), "bandwidth");
    h2d[s] = (double)bytes / best_h / 1e9;
    d2h[s] = (double)bytes / best_d / 1e9;
    free(host);
    free(back);
  }

  char machine[512];
  machine_string(machine, sizeof machine);
  const char* dir = getenv("TPUC_BENCH_RESULTS_DIR");
  if (dir == NULL || !dir[0]) dir = TPUC_BENCH_RESULTS_DIR;
  char path[1024];
  snprintf(path, sizeof path, "%s/runtime.json", dir);
  FILE* f = fopen(path, "w");
  if (f == NULL)
    die(tpuc_status_make(TPUC_PERMISSION_DENIED, "cannot write %s", path),
        "json");
  char plugin_desc[1024], device_desc[512];
  snprintf(plugin_desc, sizeof plugin_desc,
           "%s (%s, PJRT C API %d.%d, StableHLO %d.%d.%d)",
           info.package[0] ? info.package : info.path, info.path,
           info.api_major, info.api_minor, info.stablehlo_current[0],
           info.stablehlo_current[1], info.stablehlo_current[2]);
  snprintf(device_desc, sizeof device_desc, "%s %s: %s", platform, pversion,
           dev.kind);
  time_t tnow = time(NULL);
  char date[64];
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&tnow));
  fprintf(f, "{\n");
  json_string(f, "benchmark", "runtime", 1);
  json_string(f, "date", date, 1);
  json_string(f, "machine", machine, 1);
  json_string(f, "device", device_desc, 1);
  json_string(f, "plugin", plugin_desc, 1);
  json_string(f, "plugin_version", info.package_version, 1);
  fprintf(f, "  \"cache_hit_us\": %.4f,\n", cache_hit_us);
  fprintf(f, "  \"enqueue_us\": %.3f,\n", enqueue_us);
  fprintf(f, "  \"execute_e2e_us\": %.3f,\n", execute_e2e_us);
  fprintf(f, "  \"compile_cold_ms\": %.3f,\n", compile_cold_ms);
  fprintf(f, "  \"compile_disk_hit_ms\": %.3f,\n", compile_disk_ms);
  fprintf(f, "  \"compile_disk_hit_ratio\": %.4f,\n",
          compile_disk_ms / compile_cold_ms);
  for (int s = 0; s < NS; s++)
    fprintf(f, "  \"h2d_gbps_%dmib\": %.3f,\n  \"d2h_gbps_%dmib\": %.3f,\n",
            sizes_mib[s], h2d[s], sizes_mib[s], d2h[s]);
  fprintf(f,
          "  \"targets\": {\"cache_hit_us_max\": 2, \"enqueue_us_max\": 15, "
          "\"compile_disk_hit_ratio_max\": 0.1}\n}\n");
  fclose(f);
  printf("bench_runtime (%s; %s)\n", machine, plugin_desc);
  printf("  cache hit (memory)    %10.3f us   (target < 2)\n", cache_hit_us);
  printf("  enqueue, cached op    %10.3f us   (target < 15)\n", enqueue_us);
  printf("  execute end-to-end    %10.3f us\n", execute_e2e_us);
  printf("  compile cold          %10.3f ms\n", compile_cold_ms);
  printf(
      "  compile disk hit      %10.3f ms   (%.1f%% of cold; target < 10%%)\n",
      compile_disk_ms, 100 * compile_disk_ms / compile_cold_ms);
  for (int s = 0; s < NS; s++)
    printf("  %4d MiB  h2d %7.2f GB/s   d2h %7.2f GB/s\n", sizes_mib[s], h2d[s],
           d2h[s]);
  printf("wrote %s\n", path);
  tpuc_client_destroy(c);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
  if (system(cmd) != 0) return 1;
  return 0;
}
