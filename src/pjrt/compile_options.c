/* Encodes the few fields of xla.CompileOptionsProto tpuc sets, in protobuf
 * wire format, so no protobuf library is needed:
 *   CompileOptionsProto
 *     3: executable_build_options (ExecutableBuildOptionsProto)
 *          1: device_ordinal   (int64, -1 = unset)
 *          4: num_replicas     (int64)
 *          5: num_partitions   (int64)
 *     4: compile_portable_executable (bool)
 * A portable executable (one replica, one partition) can run on any
 * addressable device, chosen at execute time. */
#include <string.h>

#include "pjrt/internal.h"

typedef struct {
  unsigned char* p;
  size_t n, cap;
} sink;

static void put_byte(sink* s, unsigned char b) {
  if (s->n < s->cap) s->p[s->n] = b;
  s->n++;
}

static void put_varint(sink* s, uint64_t v) {
  while (v >= 0x80) {
    put_byte(s, (unsigned char)(v | 0x80));
    v >>= 7;
  }
  put_byte(s, (unsigned char)v);
}

static void put_int_field(sink* s, int field, int64_t v) {
  put_varint(s, (uint64_t)field << 3 | 0); /* wire type 0: varint */
  put_varint(s, (uint64_t)v);
}

size_t tpuc_encode_compile_options(const tpuc_compile_options* o,
                                   unsigned char* out, size_t cap) {
  int replicas = (o && o->num_replicas > 0) ? o->num_replicas : 1;
  int partitions = (o && o->num_partitions > 0) ? o->num_partitions : 1;
  unsigned char build[64];
  sink b = {build, 0, sizeof build};
  put_int_field(&b, 1, -1);
  put_int_field(&b, 4, replicas);
  put_int_field(&b, 5, partitions);
  sink s = {out, 0, cap};
  put_varint(&s, 3u << 3 | 2); /* wire type 2: length-delimited */
  put_varint(&s, b.n);
  for (size_t i = 0; i < b.n; i++) put_byte(&s, build[i]);
  if (replicas == 1 && partitions == 1) put_int_field(&s, 4, 1);
  return s.n;
}
