/* Plugin discovery, loading, version attributes and refusal messages. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>

#include "tpuc_test.h"

static void test_discover_finds_cpu_plugin(void) {
  char* path = NULL;
  tpuc_plugin_kind kind;
  TPUC_CHECK_OK(tpuc_plugin_discover(NULL, 0, &path, &kind));
  TPUC_CHECK(path != NULL);
  TPUC_CHECK(access(path, R_OK) == 0);
  free(path);
}

static void test_load_reads_versions(void) {
  tpuc_plugin* p = NULL;
  TPUC_CHECK_OK(tpuc_plugin_load(NULL, NULL, 0, &p));
  tpuc_plugin_info info;
  TPUC_CHECK_OK(tpuc_plugin_get_info(p, &info));
  TPUC_CHECK(info.api_major == 0);
  TPUC_CHECK(info.api_minor >= TPUC_PJRT_MIN_API_MINOR);
  TPUC_CHECK(info.api_struct_size > 0);
  TPUC_CHECK(info.stablehlo_current[0] >= 1);
  TPUC_CHECK(info.xla_version[0] != '\0');
  /* Loading again returns the same process-wide object. */
  tpuc_plugin* q = NULL;
  TPUC_CHECK_OK(tpuc_plugin_load(info.path, NULL, 0, &q));
  TPUC_CHECK(p == q);
}

static void test_explicit_env_missing_file(void) {
  char* saved =
      getenv("TPUC_PJRT_PLUGIN") ? strdup(getenv("TPUC_PJRT_PLUGIN")) : NULL;
  setenv("TPUC_PJRT_PLUGIN", "/nonexistent/libplugin.so", 1);
  char* path = NULL;
  tpuc_status* st = tpuc_plugin_discover(NULL, 0, &path, NULL);
  if (saved) {
    setenv("TPUC_PJRT_PLUGIN", saved, 1);
    free(saved);
  } else {
    unsetenv("TPUC_PJRT_PLUGIN");
  }
  TPUC_CHECK_ERROR(st, TPUC_NOT_FOUND, "/nonexistent/libplugin.so");
}

static void test_not_a_plugin(void) {
  /* libc is a shared object without GetPjrtApi. */
  tpuc_plugin* p = NULL;
  TPUC_CHECK_ERROR(
      tpuc_plugin_load("/lib/x86_64-linux-gnu/libm.so.6", NULL, 0, &p),
      TPUC_FAILED_PRECONDITION, "GetPjrtApi");
  TPUC_CHECK(p == NULL);
}

static void test_not_loadable(void) {
  char tmpl[] = "/tmp/tpuc-bogus-XXXXXX";
  int fd = mkstemp(tmpl);
  TPUC_CHECK(fd >= 0);
  TPUC_CHECK(write(fd, "not an ELF file", 15) == 15);
  close(fd);
  tpuc_plugin* p = NULL;
  tpuc_status* st = tpuc_plugin_load(tmpl, NULL, 0, &p);
  unlink(tmpl);
  TPUC_CHECK_ERROR(st, TPUC_FAILED_PRECONDITION, "cannot load PJRT plugin");
}

static void test_missing_file(void) {
  tpuc_plugin* p = NULL;
  TPUC_CHECK_ERROR(tpuc_plugin_load("/nonexistent/x.so", NULL, 0, &p),
                   TPUC_NOT_FOUND, "no such file");
}

static void test_nothing_found_names_install(void) {
  /* Point every search source at an empty folder. */
  char* saved_plugin =
      getenv("TPUC_PJRT_PLUGIN") ? strdup(getenv("TPUC_PJRT_PLUGIN")) : NULL;
  unsetenv("TPUC_PJRT_PLUGIN");
  char* saved_venv =
      getenv("VIRTUAL_ENV") ? strdup(getenv("VIRTUAL_ENV")) : NULL;
  unsetenv("VIRTUAL_ENV");
  char* saved_site = getenv("TPUC_SITE_PACKAGES")
                         ? strdup(getenv("TPUC_SITE_PACKAGES"))
                         : NULL;
  unsetenv("TPUC_SITE_PACKAGES");
  /* The compiled-in folder is still searched, so only check the message
   * when it is empty too; otherwise check that discovery uses it. */
  char* path = NULL;
  tpuc_status* st = tpuc_plugin_discover(NULL, 0, &path, NULL);
  if (saved_plugin) setenv("TPUC_PJRT_PLUGIN", saved_plugin, 1);
  if (saved_venv) setenv("VIRTUAL_ENV", saved_venv, 1);
  if (saved_site) setenv("TPUC_SITE_PACKAGES", saved_site, 1);
  free(saved_plugin);
  free(saved_venv);
  free(saved_site);
  if (st != NULL) {
    TPUC_CHECK_ERROR(st, TPUC_NOT_FOUND, "pip install");
  } else {
    TPUC_CHECK(path != NULL);
    free(path);
  }
}

static void test_site_dirs_argument(void) {
  /* A caller-given folder holding no plugin does not break discovery. */
  const char* dirs[] = {"/nonexistent-site-packages"};
  char* path = NULL;
  TPUC_CHECK_OK(tpuc_plugin_discover(dirs, 1, &path, NULL));
  free(path);
}

static void test_old_api_refused(void) {
  tpuc_plugin* p = NULL;
  TPUC_CHECK_ERROR(tpuc_plugin_load(TPUC_FAKE_OLD_PLUGIN, NULL, 0, &p),
                   TPUC_FAILED_PRECONDITION, "implements PJRT C API 0.10");
  TPUC_CHECK(p == NULL);
  /* The real plugin still loads afterwards. */
  TPUC_CHECK_OK(tpuc_plugin_load(NULL, NULL, 0, &p));
}

static void test_bad_args(void) {
  TPUC_CHECK_ERROR(tpuc_plugin_discover(NULL, 0, NULL, NULL),
                   TPUC_INVALID_ARGUMENT, NULL);
  TPUC_CHECK_ERROR(tpuc_plugin_load(NULL, NULL, 0, NULL), TPUC_INVALID_ARGUMENT,
                   NULL);
  TPUC_CHECK_ERROR(tpuc_plugin_get_info(NULL, NULL), TPUC_INVALID_ARGUMENT,
                   NULL);
}

TPUC_TEST_MAIN(TPUC_TEST(test_discover_finds_cpu_plugin),
               TPUC_TEST(test_load_reads_versions),
               TPUC_TEST(test_explicit_env_missing_file),
               TPUC_TEST(test_not_a_plugin), TPUC_TEST(test_not_loadable),
               TPUC_TEST(test_missing_file),
               TPUC_TEST(test_nothing_found_names_install),
               TPUC_TEST(test_site_dirs_argument),
               TPUC_TEST(test_old_api_refused), TPUC_TEST(test_bad_args))
