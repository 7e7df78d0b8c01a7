/* CPU fallback bookkeeping: which ops had no native lowering and ran on the
 * CPU instead, how often, and whether that is allowed. The binding asks
 * before running an op on the CPU; the report is a first-class output
 * (tpuc.fallback_report() in Python). */
#ifndef TPUC_FALLBACK_H_
#define TPUC_FALLBACK_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpuc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tpuc_fallback_mode {
  TPUC_FALLBACK_WARN = 0, /* run on CPU, warn once per op (default) */
  TPUC_FALLBACK_SILENT,   /* run on CPU, no warning */
  TPUC_FALLBACK_ERROR,    /* refuse: the op raises */
} tpuc_fallback_mode;

/* From $TPUC_FALLBACK ("warn", "silent", "error"); INVALID_ARGUMENT for any
 * other value. */
tpuc_status* tpuc_fallback_get_mode(tpuc_fallback_mode* mode);
/* Overrides the environment (tests, context managers). */
void tpuc_fallback_set_mode(tpuc_fallback_mode mode);

/* Counts one CPU run of `op` (e.g. "aten::cumsum"). *first is true the first
 * time this op is recorded since the last reset. */
tpuc_status* tpuc_fallback_record(const char* op, bool* first);

/* Snapshot of the counts, sorted by op name. Entries are valid until the
 * next record or reset. */
typedef struct tpuc_fallback_entry {
  const char* op;
  uint64_t count;
} tpuc_fallback_entry;
tpuc_status* tpuc_fallback_report(const tpuc_fallback_entry** entries,
                                  size_t* n);
void tpuc_fallback_reset(void);

#ifdef __cplusplus
}
#endif
#endif /* TPUC_FALLBACK_H_ */
