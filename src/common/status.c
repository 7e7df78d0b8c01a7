/* tpuc_status: heap-allocated code + message; NULL means OK. */
#include "tpuc/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tpuc_status {
  tpuc_code code;
  char* message;
  int is_static;
};

/* Returned when the status itself cannot be allocated. */
static tpuc_status g_oom_status = {TPUC_RESOURCE_EXHAUSTED,
                                   "out of host memory creating a status", 1};

static char* vformat(const char* fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) n = 0;
  char* s = malloc((size_t)n + 1);
  if (s == NULL) return NULL;
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  return s;
}

tpuc_status* tpuc_status_makev(tpuc_code code, const char* fmt, va_list ap) {
  if (code == TPUC_OK) return NULL;
  tpuc_status* s = malloc(sizeof *s);
  if (s == NULL) return &g_oom_status;
  s->code = code;
  s->is_static = 0;
  s->message = vformat(fmt ? fmt : "", ap);
  if (s->message == NULL) {
    free(s);
    return &g_oom_status;
  }
  return s;
}

tpuc_status* tpuc_status_make(tpuc_code code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tpuc_status* s = tpuc_status_makev(code, fmt, ap);
  va_end(ap);
  return s;
}

tpuc_status* tpuc_status_annotate(tpuc_status* status, const char* fmt, ...) {
  if (status == NULL || status->is_static) return status;
  va_list ap;
  va_start(ap, fmt);
  char* prefix = vformat(fmt, ap);
  va_end(ap);
  if (prefix == NULL) return status;
  size_t lp = strlen(prefix), lm = strlen(status->message);
  char* joined = malloc(lp + 2 + lm + 1);
  if (joined != NULL) {
    memcpy(joined, prefix, lp);
    memcpy(joined + lp, ": ", 2);
    memcpy(joined + lp + 2, status->message, lm + 1);
    free(status->message);
    status->message = joined;
  }
  free(prefix);
  return status;
}

tpuc_code tpuc_status_code(const tpuc_status* status) {
  return status ? status->code : TPUC_OK;
}

const char* tpuc_status_message(const tpuc_status* status) {
  return status ? status->message : "";
}

const char* tpuc_status_code_name(tpuc_code code) {
  static const char* const names[] = {"OK",
                                      "CANCELLED",
                                      "UNKNOWN",
                                      "INVALID_ARGUMENT",
                                      "DEADLINE_EXCEEDED",
                                      "NOT_FOUND",
                                      "ALREADY_EXISTS",
                                      "PERMISSION_DENIED",
                                      "RESOURCE_EXHAUSTED",
                                      "FAILED_PRECONDITION",
                                      "ABORTED",
                                      "OUT_OF_RANGE",
                                      "UNIMPLEMENTED",
                                      "INTERNAL",
                                      "UNAVAILABLE",
                                      "DATA_LOSS",
                                      "UNAUTHENTICATED"};
  if ((int)code < 0 || (size_t)code >= sizeof names / sizeof names[0])
    return "UNKNOWN_CODE";
  return names[code];
}

void tpuc_status_free(tpuc_status* status) {
  if (status == NULL || status->is_static) return;
  free(status->message);
  free(status);
}
