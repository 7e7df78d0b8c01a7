/* Minimal test harness for the C tests: each test file is one executable
 * run by ctest. TPUC_CHECK* record a failure and return from the test;
 * TPUC_TEST_MAIN runs the listed tests and exits non-zero on any failure. */
#ifndef TPUC_TESTS_TPUC_TEST_H_
#define TPUC_TESTS_TPUC_TEST_H_

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpuc/tpuc.h"

extern int tpuc_test_failures;
extern int tpuc_test_skips;

/* Skips the current test with a reason (counted and printed). */
#define TPUC_SKIP(...)              \
  do {                              \
    fprintf(stdout, "  skipped: "); \
    fprintf(stdout, __VA_ARGS__);   \
    fprintf(stdout, "\n");          \
    tpuc_test_skips++;              \
    return;                         \
  } while (0)

#define TPUC_CHECK(cond)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      tpuc_test_failures++;                                                    \
      return;                                                                  \
    }                                                                          \
  } while (0)

/* Expects a NULL status; prints and frees it otherwise. */
#define TPUC_CHECK_OK(expr)                                              \
  do {                                                                   \
    tpuc_status* st_ = (expr);                                           \
    if (st_ != NULL) {                                                   \
      fprintf(stderr, "%s:%d: %s failed: [%s] %s\n", __FILE__, __LINE__, \
              #expr, tpuc_status_code_name(tpuc_status_code(st_)),       \
              tpuc_status_message(st_));                                 \
      tpuc_status_free(st_);                                             \
      tpuc_test_failures++;                                              \
      return;                                                            \
    }                                                                    \
  } while (0)

/* Expects an error with `code` whose message contains `substr` (may be
 * NULL). Frees the status. */
#define TPUC_CHECK_ERROR(expr, code, substr)                              \
  do {                                                                    \
    tpuc_status* st_ = (expr);                                            \
    if (st_ == NULL) {                                                    \
      fprintf(stderr, "%s:%d: %s succeeded, expected %s\n", __FILE__,     \
              __LINE__, #expr, tpuc_status_code_name(code));              \
      tpuc_test_failures++;                                               \
      return;                                                             \
    }                                                                     \
    if (tpuc_status_code(st_) != (code) ||                                \
        ((substr) != NULL && strstr(tpuc_status_message(st_),             \
                                    (substr) ? (substr) : "") == NULL)) { \
      fprintf(stderr, "%s:%d: %s: got [%s] %s, expected [%s] ~'%s'\n",    \
              __FILE__, __LINE__, #expr,                                  \
              tpuc_status_code_name(tpuc_status_code(st_)),               \
              tpuc_status_message(st_), tpuc_status_code_name(code),      \
              (substr) ? (substr) : "");                                  \
      tpuc_status_free(st_);                                              \
      tpuc_test_failures++;                                               \
      return;                                                             \
    }                                                                     \
    tpuc_status_free(st_);                                                \
  } while (0)

typedef void (*tpuc_test_fn)(void);
typedef struct {
  const char* name;
  tpuc_test_fn fn;
} tpuc_test_case;

/* Shared client for a test executable, created on first use with
 * `cpu_device_count` devices (CPU plugin) and an in-memory-only cache unless
 * the test asks otherwise. Destroyed by tpuc_test_run_all. */
tpuc_client* tpuc_test_client(void);

/* Number of devices of the shared client, and whether its plugin is a CPU
 * one (several tests assert CPU-plugin specifics). */
int tpuc_test_device_count(void);
int tpuc_test_is_cpu(void);

/* Compiles `mlir`, runs it on device 0 with `args`, synchronizes, and
 * stores outputs (caller releases them). Returns NULL status on success. */
tpuc_status* tpuc_test_run(const char* mlir, tpuc_buffer* const* args,
                           size_t num_args, tpuc_buffer** outs,
                           size_t num_outs);

/* Makes a buffer from dense host data on device 0. */
tpuc_buffer* tpuc_test_buffer(tpuc_dtype dtype, const int64_t* dims, int rank,
                              const void* data);

/* Copies a buffer to freshly malloc'ed host memory (NULL on failure). */
void* tpuc_test_to_host(tpuc_buffer* buffer);

/* A host array given to tpuc_test_run_module. */
typedef struct tpuc_test_arg {
  tpuc_dtype dtype;
  int rank;
  int64_t dims[4];
  const void* data;
} tpuc_test_arg;

/* Prints `m`, runs it on device 0 with host arguments and copies `nouts`
 * results to malloc'ed host memory (caller frees, e.g. with
 * tpuc_test_free_all). Prints the module on failure. */
tpuc_status* tpuc_test_run_module(tpuc_hlo_module* m, const tpuc_test_arg* args,
                                  size_t n, void** outs, size_t nouts);
void tpuc_test_free_all(void** p, size_t n);

int tpuc_test_run_all(const char* file, const tpuc_test_case* cases, size_t n);

#define TPUC_TEST_MAIN(...)                                     \
  int main(void) {                                              \
    static const tpuc_test_case cases_[] = {__VA_ARGS__};       \
    return tpuc_test_run_all(__FILE__, cases_,                  \
                             sizeof cases_ / sizeof cases_[0]); \
  }
#define TPUC_TEST(fn) \
  { #fn, fn }

#endif /* TPUC_TESTS_TPUC_TEST_H_ */
