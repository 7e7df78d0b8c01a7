/* Encodes the few fields of xla.CompileOptionsProto tpuc sets, in protobuf
 * wire format, so no protobuf library is needed:
 *   CompileOptionsProto
 *     3: executable_build_options (ExecutableBuildOptionsProto)
 *          1: device_ordinal   (int64, -1 = unset)
 *          4: num_replicas     (int64)
 *          5: num_partitions   (int64)
 *          9: device_assignment (DeviceAssignmentProto)
 *               1: replica_count      (int32)
 *               2: computation_count  (int32)
 *               3: computation_devices (ComputationDevice), one per
 *                  partition: 1: replica_device_ids (repeated int64,
 *                  global device ids, one per replica)
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

static void put_bytes_field(sink* s, int field, const unsigned char* p,
                            size_t n) {
  put_varint(s, (uint64_t)field << 3 | 2); /* wire type 2: length-delimited */
  put_varint(s, n);
  for (size_t i = 0; i < n; i++) put_byte(s, p[i]);
}

size_t tpuc_encode_compile_options(tpuc_client* c,
                                   const tpuc_compile_options* o,
                                   unsigned char* out, size_t cap) {
  int replicas = (o && o->num_replicas > 0) ? o->num_replicas : 1;
  int partitions = (o && o->num_partitions > 0) ? o->num_partitions : 1;
  unsigned char build[64 + 16 * TPUC_MAX_REPLICAS];
  sink b = {build, 0, sizeof build};
  put_int_field(&b, 1, -1);
  put_int_field(&b, 4, replicas);
  put_int_field(&b, 5, partitions);
  if (o != NULL && o->replica_devices != NULL && replicas > 1 &&
      partitions == 1 && replicas <= TPUC_MAX_REPLICAS) {
    unsigned char ids[12 * TPUC_MAX_REPLICAS], comp[16 * TPUC_MAX_REPLICAS],
        assign[32 + 16 * TPUC_MAX_REPLICAS];
    sink d = {ids, 0, sizeof ids};
    for (int r = 0; r < replicas; r++)
      put_varint(&d, (uint64_t)(int64_t)c->device_ids[o->replica_devices[r]]);
    sink cd = {comp, 0, sizeof comp};
    put_bytes_field(&cd, 1, ids, d.n); /* packed repeated int64 */
    sink a = {assign, 0, sizeof assign};
    put_int_field(&a, 1, replicas);
    put_int_field(&a, 2, 1);
    put_bytes_field(&a, 3, comp, cd.n);
    put_bytes_field(&b, 9, assign, a.n);
  }
  sink s = {out, 0, cap};
  put_varint(&s, 3u << 3 | 2); /* wire type 2: length-delimited */
  put_varint(&s, b.n);
  for (size_t i = 0; i < b.n; i++) put_byte(&s, build[i]);
  if (replicas == 1 && partitions == 1) put_int_field(&s, 4, 1);
  return s.n;
}

tpuc_status* tpuc_check_compile_options(tpuc_client* c,
                                        const tpuc_compile_options* o) {
  if (o == NULL) return NULL;
  if (o->num_replicas < 0 || o->num_partitions < 0)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "num_replicas and num_partitions must be >= 0");
  if (o->num_replicas > TPUC_MAX_REPLICAS)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "at most %d replicas, got %d", TPUC_MAX_REPLICAS,
                            o->num_replicas);
  if (o->replica_devices == NULL) return NULL;
  if (o->num_partitions > 1)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "replica devices are for one partition only");
  for (int r = 0; r < o->num_replicas; r++) {
    TPUC_RETURN_IF_ERROR(tpuc_status_annotate(
        tpuc_client_check_device(c, o->replica_devices[r]), "replica %d", r));
    for (int q = 0; q < r; q++)
      if (o->replica_devices[q] == o->replica_devices[r])
        return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                                "replicas %d and %d are both on device %d", q,
                                r, o->replica_devices[r]);
  }
  return NULL;
}
