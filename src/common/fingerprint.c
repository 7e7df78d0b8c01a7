/* Two 64-bit multiply-rotate lanes over 8-byte words, finalized with a
 * murmur-style avalanche. Fast (a few GB/s) and good enough for cache keys;
 * the caches also compare the full key text, so a collision can never
 * return a wrong executable. */
#include "common/fingerprint.h"

#include <string.h>

static inline uint64_t rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

static inline uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

tpuc_fingerprint tpuc_fingerprint_bytes(tpuc_fingerprint seed, const void* data,
                                        size_t len) {
  const unsigned char* p = data;
  uint64_t a = seed.lo ^ 0x9e3779b97f4a7c15ULL;
  uint64_t b = seed.hi ^ 0xc2b2ae3d27d4eb4fULL;
  size_t i = 0;
  for (; i + 16 <= len; i += 16) {
    uint64_t w0, w1;
    memcpy(&w0, p + i, 8);
    memcpy(&w1, p + i + 8, 8);
    a = rotl(a ^ (w0 * 0x87c37b91114253d5ULL), 31) * 0x4cf5ad432745937fULL;
    b = rotl(b ^ (w1 * 0x4cf5ad432745937fULL), 33) * 0x87c37b91114253d5ULL;
    a += b;
    b += a;
  }
  unsigned char tail[16] = {0};
  memcpy(tail, p + i, len - i);
  uint64_t t0, t1;
  memcpy(&t0, tail, 8);
  memcpy(&t1, tail + 8, 8);
  a ^= t0 * 0x87c37b91114253d5ULL;
  b ^= t1 * 0x4cf5ad432745937fULL;
  a ^= (uint64_t)len;
  b ^= (uint64_t)len * 0x9e3779b97f4a7c15ULL;
  a += b;
  b += a;
  tpuc_fingerprint out = {mix(a), mix(b ^ rotl(a, 17))};
  return out;
}

void tpuc_fingerprint_hex(tpuc_fingerprint fp, char out[33]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[i] = digits[(fp.hi >> (60 - 4 * i)) & 15];
    out[16 + i] = digits[(fp.lo >> (60 - 4 * i)) & 15];
  }
  out[32] = '\0';
}
