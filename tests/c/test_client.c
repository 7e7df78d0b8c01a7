/* Client creation, devices, memory statistics, bad arguments. */
#include "tpuc_test.h"

static void test_platform_and_devices(void) {
  tpuc_client* c = tpuc_test_client();
  const char *name = NULL, *version = NULL;
  TPUC_CHECK_OK(tpuc_client_platform(c, &name, &version));
  TPUC_CHECK(strlen(name) > 0);
  TPUC_CHECK(version != NULL);
  int n = 0;
  TPUC_CHECK_OK(tpuc_client_device_count(c, &n));
  /* The harness asks the CPU plugin for two devices. */
  TPUC_CHECK(tpuc_test_is_cpu() ? n == 2 : n >= 1);
  for (int i = 0; i < n; i++) {
    tpuc_device_info info;
    TPUC_CHECK_OK(tpuc_client_device_info(c, i, &info));
    TPUC_CHECK(info.index == i);
    TPUC_CHECK(info.id >= 0);
    TPUC_CHECK(!tpuc_test_is_cpu() || strcmp(info.kind, "cpu") == 0);
    TPUC_CHECK(strlen(info.description) > 0);
  }
  tpuc_plugin* p = NULL;
  TPUC_CHECK_OK(tpuc_client_plugin(c, &p));
  TPUC_CHECK(p != NULL);
}

static void test_device_count_option(void) {
  if (!tpuc_test_is_cpu()) TPUC_SKIP("cpu_device_count is a CPU-plugin option");
  tpuc_plugin* p = NULL;
  TPUC_CHECK_OK(tpuc_plugin_load(NULL, NULL, 0, &p));
  for (int want = 1; want <= 4; want += 3) {
    tpuc_client_options o = {0};
    o.cpu_device_count = want;
    o.disable_disk_cache = true;
    tpuc_client* c = NULL;
    TPUC_CHECK_OK(tpuc_client_create(p, &o, &c));
    int n = 0;
    tpuc_status* st = tpuc_client_device_count(c, &n);
    tpuc_client_destroy(c);
    TPUC_CHECK_OK(st);
    TPUC_CHECK(n == want);
  }
}

static void test_memory_stats(void) {
  tpuc_client* c = tpuc_test_client();
  tpuc_memory_stats ms;
  TPUC_CHECK_OK(tpuc_client_memory_stats(c, 0, &ms));
  /* The CPU plugin reports none: that must read as "not available". */
  if (!ms.available) {
    TPUC_CHECK(ms.bytes_limit == -1);
  } else {
    TPUC_CHECK(ms.bytes_in_use >= 0);
    TPUC_CHECK(ms.peak_bytes_in_use >= ms.bytes_in_use);
  }
}

static void test_bad_device_index(void) {
  tpuc_client* c = tpuc_test_client();
  tpuc_device_info info;
  TPUC_CHECK_ERROR(tpuc_client_device_info(c, 7, &info), TPUC_INVALID_ARGUMENT,
                   "out of range");
  TPUC_CHECK_ERROR(tpuc_client_device_info(c, -1, &info), TPUC_INVALID_ARGUMENT,
                   "out of range");
  tpuc_memory_stats ms;
  TPUC_CHECK_ERROR(tpuc_client_memory_stats(c, 99, &ms), TPUC_INVALID_ARGUMENT,
                   "out of range");
}

static void test_bad_options(void) {
  tpuc_plugin* p = NULL;
  TPUC_CHECK_OK(tpuc_plugin_load(NULL, NULL, 0, &p));
  tpuc_client_options o = {0};
  o.cpu_device_count = -3;
  tpuc_client* c = NULL;
  TPUC_CHECK_ERROR(tpuc_client_create(p, &o, &c), TPUC_INVALID_ARGUMENT,
                   "cpu_device_count");
  TPUC_CHECK(c == NULL);
  TPUC_CHECK_ERROR(tpuc_client_create(NULL, NULL, &c), TPUC_INVALID_ARGUMENT,
                   NULL);
  TPUC_CHECK_ERROR(tpuc_client_synchronize(NULL), TPUC_INVALID_ARGUMENT, NULL);
}

static void test_status_helpers(void) {
  tpuc_status* st = tpuc_status_make(TPUC_NOT_FOUND, "thing %d", 42);
  st = tpuc_status_annotate(st, "while doing %s", "work");
  TPUC_CHECK(tpuc_status_code(st) == TPUC_NOT_FOUND);
  TPUC_CHECK(strcmp(tpuc_status_message(st), "while doing work: thing 42") ==
             0);
  tpuc_status_free(st);
  TPUC_CHECK(tpuc_status_make(TPUC_OK, "ignored") == NULL);
  TPUC_CHECK(tpuc_status_code(NULL) == TPUC_OK);
  TPUC_CHECK(strcmp(tpuc_status_message(NULL), "") == 0);
  TPUC_CHECK(strcmp(tpuc_status_code_name(TPUC_RESOURCE_EXHAUSTED),
                    "RESOURCE_EXHAUSTED") == 0);
  TPUC_CHECK(strcmp(tpuc_status_code_name((tpuc_code)99), "UNKNOWN_CODE") == 0);
  TPUC_CHECK(tpuc_status_annotate(NULL, "x") == NULL);
}

TPUC_TEST_MAIN(TPUC_TEST(test_platform_and_devices),
               TPUC_TEST(test_device_count_option),
               TPUC_TEST(test_memory_stats), TPUC_TEST(test_bad_device_index),
               TPUC_TEST(test_bad_options), TPUC_TEST(test_status_helpers))
