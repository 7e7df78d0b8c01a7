/* 128-bit non-cryptographic fingerprint used as compile-cache key. */
#ifndef TPUC_SRC_COMMON_FINGERPRINT_H_
#define TPUC_SRC_COMMON_FINGERPRINT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tpuc_fingerprint {
  uint64_t lo, hi;
} tpuc_fingerprint;

/* Continues `seed` (use {0,0} to start) over `len` bytes. */
tpuc_fingerprint tpuc_fingerprint_bytes(tpuc_fingerprint seed, const void* data,
                                        size_t len);
static inline bool tpuc_fingerprint_eq(tpuc_fingerprint a, tpuc_fingerprint b) {
  return a.lo == b.lo && a.hi == b.hi;
}
/* 32 lowercase hex digits + NUL. */
void tpuc_fingerprint_hex(tpuc_fingerprint fp, char out[33]);

#endif /* TPUC_SRC_COMMON_FINGERPRINT_H_ */
