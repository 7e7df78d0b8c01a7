/* CPU-fallback counters and policy (see tpuc/fallback.h). */
#define _GNU_SOURCE
#include "tpuc/fallback.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static tpuc_fallback_entry* g_entries = NULL; /* sorted by op */
static size_t g_count = 0, g_cap = 0;
static int g_mode_override = -1;

tpuc_status* tpuc_fallback_get_mode(tpuc_fallback_mode* mode) {
  if (mode == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "mode is NULL");
  if (g_mode_override >= 0) {
    *mode = (tpuc_fallback_mode)g_mode_override;
    return NULL;
  }
  const char* v = getenv("TPUC_FALLBACK");
  if (v == NULL || v[0] == '\0' || strcmp(v, "warn") == 0) {
    *mode = TPUC_FALLBACK_WARN;
  } else if (strcmp(v, "silent") == 0) {
    *mode = TPUC_FALLBACK_SILENT;
  } else if (strcmp(v, "error") == 0) {
    *mode = TPUC_FALLBACK_ERROR;
  } else {
    *mode = TPUC_FALLBACK_WARN;
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "TPUC_FALLBACK=%s: expected warn, silent or error",
                            v);
  }
  return NULL;
}

void tpuc_fallback_set_mode(tpuc_fallback_mode mode) {
  g_mode_override = (int)mode;
}

/* Index of `op` or of where it would be inserted. */
static size_t find(const char* op, int* found) {
  size_t lo = 0, hi = g_count;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = strcmp(g_entries[mid].op, op);
    if (c == 0) {
      *found = 1;
      return mid;
    }
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  *found = 0;
  return lo;
}

tpuc_status* tpuc_fallback_record(const char* op, bool* first) {
  if (op == NULL) return tpuc_status_make(TPUC_INVALID_ARGUMENT, "op is NULL");
  pthread_mutex_lock(&g_mu);
  int found = 0;
  size_t i = find(op, &found);
  tpuc_status* st = NULL;
  if (found) {
    g_entries[i].count++;
  } else {
    char* name = strdup(op);
    if (name == NULL) {
      st = tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
    } else if (g_count == g_cap) {
      size_t cap = g_cap ? g_cap * 2 : 64;
      tpuc_fallback_entry* e = realloc(g_entries, cap * sizeof *e);
      if (e == NULL) {
        free(name);
        st = tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
      } else {
        g_entries = e;
        g_cap = cap;
      }
    }
    if (st == NULL) {
      memmove(&g_entries[i + 1], &g_entries[i],
              (g_count - i) * sizeof *g_entries);
      g_entries[i].op = name;
      g_entries[i].count = 1;
      g_count++;
    }
  }
  pthread_mutex_unlock(&g_mu);
  if (first) *first = !found;
  return st;
}

tpuc_status* tpuc_fallback_report(const tpuc_fallback_entry** entries,
                                  size_t* n) {
  if (entries == NULL || n == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "entries or n is NULL");
  pthread_mutex_lock(&g_mu);
  *entries = g_entries;
  *n = g_count;
  pthread_mutex_unlock(&g_mu);
  return NULL;
}

void tpuc_fallback_reset(void) {
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_count; i++) free((char*)g_entries[i].op);
  free(g_entries);
  g_entries = NULL;
  g_count = g_cap = 0;
  pthread_mutex_unlock(&g_mu);
}
