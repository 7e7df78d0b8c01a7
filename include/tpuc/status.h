/* tpuc status: every fallible public function returns a tpuc_status*.
 * NULL means success. A non-NULL status owns a code and a message and must be
 * released with tpuc_status_free (or handed on to a caller). */
#ifndef TPUC_STATUS_H_
#define TPUC_STATUS_H_

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Codes follow the canonical absl/gRPC numbering, which PJRT uses too. */
typedef enum tpuc_code {
  TPUC_OK = 0,
  TPUC_CANCELLED = 1,
  TPUC_UNKNOWN = 2,
  TPUC_INVALID_ARGUMENT = 3,
  TPUC_DEADLINE_EXCEEDED = 4,
  TPUC_NOT_FOUND = 5,
  TPUC_ALREADY_EXISTS = 6,
  TPUC_PERMISSION_DENIED = 7,
  TPUC_RESOURCE_EXHAUSTED = 8,
  TPUC_FAILED_PRECONDITION = 9,
  TPUC_ABORTED = 10,
  TPUC_OUT_OF_RANGE = 11,
  TPUC_UNIMPLEMENTED = 12,
  TPUC_INTERNAL = 13,
  TPUC_UNAVAILABLE = 14,
  TPUC_DATA_LOSS = 15,
  TPUC_UNAUTHENTICATED = 16,
} tpuc_code;

typedef struct tpuc_status tpuc_status;

/* Creates a status with a printf-style message. Never returns NULL for a
 * non-OK code (falls back to a static out-of-memory status). */
tpuc_status* tpuc_status_make(tpuc_code code, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
tpuc_status* tpuc_status_makev(tpuc_code code, const char* fmt, va_list ap);
/* Prefixes context to an existing status ("context: message"); returns it.
 * NULL in, NULL out. */
tpuc_status* tpuc_status_annotate(tpuc_status* status, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

tpuc_code tpuc_status_code(const tpuc_status* status);
/* "" for NULL. Valid until the status is freed. */
const char* tpuc_status_message(const tpuc_status* status);
/* Name of a code, e.g. "INVALID_ARGUMENT". */
const char* tpuc_status_code_name(tpuc_code code);
void tpuc_status_free(tpuc_status* status);

#define TPUC_RETURN_IF_ERROR(expr)         \
  do {                                     \
    tpuc_status* tpuc_st_ = (expr);        \
    if (tpuc_st_ != NULL) return tpuc_st_; \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif /* TPUC_STATUS_H_ */
