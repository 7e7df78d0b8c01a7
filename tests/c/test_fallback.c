/* CPU-fallback counters and the TPUC_FALLBACK policy. */
#define _GNU_SOURCE
#include <stdlib.h>

#include "tpuc_test.h"

static void test_counts_sorted_and_first(void) {
  tpuc_fallback_reset();
  bool first = false;
  TPUC_CHECK_OK(tpuc_fallback_record("aten::cumsum", &first));
  TPUC_CHECK(first);
  TPUC_CHECK_OK(tpuc_fallback_record("aten::cumsum", &first));
  TPUC_CHECK(!first);
  TPUC_CHECK_OK(tpuc_fallback_record("aten::abs", &first));
  TPUC_CHECK(first);
  const tpuc_fallback_entry* e = NULL;
  size_t n = 0;
  TPUC_CHECK_OK(tpuc_fallback_report(&e, &n));
  TPUC_CHECK(n == 2);
  TPUC_CHECK(strcmp(e[0].op, "aten::abs") == 0 && e[0].count == 1);
  TPUC_CHECK(strcmp(e[1].op, "aten::cumsum") == 0 && e[1].count == 2);
  tpuc_fallback_reset();
  TPUC_CHECK_OK(tpuc_fallback_report(&e, &n));
  TPUC_CHECK(n == 0);
  TPUC_CHECK_ERROR(tpuc_fallback_record(NULL, NULL), TPUC_INVALID_ARGUMENT,
                   NULL);
}

static void test_many_ops(void) {
  tpuc_fallback_reset();
  char name[32];
  for (int i = 199; i >= 0; i--) {
    snprintf(name, sizeof name, "aten::op%03d", i);
    TPUC_CHECK_OK(tpuc_fallback_record(name, NULL));
  }
  const tpuc_fallback_entry* e = NULL;
  size_t n = 0;
  TPUC_CHECK_OK(tpuc_fallback_report(&e, &n));
  TPUC_CHECK(n == 200);
  for (size_t i = 1; i < n; i++) TPUC_CHECK(strcmp(e[i - 1].op, e[i].op) < 0);
  tpuc_fallback_reset();
}

static void test_mode_from_environment(void) {
  tpuc_fallback_mode m;
  unsetenv("TPUC_FALLBACK");
  TPUC_CHECK_OK(tpuc_fallback_get_mode(&m));
  TPUC_CHECK(m == TPUC_FALLBACK_WARN);
  setenv("TPUC_FALLBACK", "error", 1);
  TPUC_CHECK_OK(tpuc_fallback_get_mode(&m));
  TPUC_CHECK(m == TPUC_FALLBACK_ERROR);
  setenv("TPUC_FALLBACK", "silent", 1);
  TPUC_CHECK_OK(tpuc_fallback_get_mode(&m));
  TPUC_CHECK(m == TPUC_FALLBACK_SILENT);
  setenv("TPUC_FALLBACK", "sometimes", 1);
  TPUC_CHECK_ERROR(tpuc_fallback_get_mode(&m), TPUC_INVALID_ARGUMENT,
                   "TPUC_FALLBACK=sometimes");
  unsetenv("TPUC_FALLBACK");
  tpuc_fallback_set_mode(TPUC_FALLBACK_ERROR);
  TPUC_CHECK_OK(tpuc_fallback_get_mode(&m));
  TPUC_CHECK(m == TPUC_FALLBACK_ERROR);
}

int main(void) {
  static const tpuc_test_case cases[] = {
      TPUC_TEST(test_counts_sorted_and_first), TPUC_TEST(test_many_ops),
      TPUC_TEST(test_mode_from_environment)};
  int rc = tpuc_test_run_all(__FILE__, cases, sizeof cases / sizeof cases[0]);
  tpuc_fallback_reset();
  return rc;
}
