/* Compiling StableHLO text and executing it, with a two-tier compile cache
 * (in memory, then on disk) keyed by a fingerprint of the program text and
 * the compile options. */
#ifndef TPUC_EXECUTABLE_H_
#define TPUC_EXECUTABLE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpuc/buffer.h"
#include "tpuc/client.h"
#include "tpuc/dtype.h"
#include "tpuc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tpuc_executable tpuc_executable;

/* The most replicas a program is compiled for. */
#define TPUC_MAX_REPLICAS 64

typedef struct tpuc_compile_options {
  int num_replicas;   /* 0 means 1 */
  int num_partitions; /* 0 means 1 */
  /* With num_replicas > 1: the addressable device (index) each replica runs
   * on, num_replicas of them, all different; NULL: the plugin's default
   * assignment. Part of the compile cache's key. */
  const int* replica_devices;
} tpuc_compile_options;

typedef enum tpuc_cache_source {
  TPUC_CACHE_COMPILED = 0, /* compiled now (miss in both tiers) */
  TPUC_CACHE_MEMORY = 1,   /* found in memory */
  TPUC_CACHE_DISK = 2,     /* deserialized from the disk cache */
} tpuc_cache_source;

/* Compiles MLIR text (StableHLO) whose entry function is `@main`, through
 * the cache. `options` may be NULL. `source` may be NULL. The executable is
 * reference counted; release it with tpuc_executable_release. */
tpuc_status* tpuc_compile(tpuc_client* client, const char* mlir, size_t len,
                          const tpuc_compile_options* options,
                          tpuc_executable** out, tpuc_cache_source* source);

typedef struct tpuc_value_type {
  tpuc_dtype dtype;
  int rank;
  int64_t dims[TPUC_MAX_RANK];
} tpuc_value_type;

/* Signature of @main, read from the program text. */
size_t tpuc_executable_num_inputs(const tpuc_executable* exe);
size_t tpuc_executable_num_outputs(const tpuc_executable* exe);
const tpuc_value_type* tpuc_executable_input_type(const tpuc_executable* exe,
                                                  size_t i);
const tpuc_value_type* tpuc_executable_output_type(const tpuc_executable* exe,
                                                   size_t i);
/* Output index the program aliases input `i` to (tf.aliasing_output), or -1. */
int tpuc_executable_input_alias(const tpuc_executable* exe, size_t i);
/* A short name for messages: "main@<fingerprint prefix>". */
const char* tpuc_executable_name(const tpuc_executable* exe);

void tpuc_executable_retain(tpuc_executable* exe);
void tpuc_executable_release(tpuc_executable* exe);

/* Enqueues one execution on addressable device `device` and returns at once.
 * Argument count, dtypes and shapes are checked against the signature before
 * the plugin sees them. `donate` may be NULL; where donate[i] is true and the
 * program aliases input i to an output, the input's storage is reused for
 * that output and the input buffer becomes deleted. `outputs` receives
 * `num_outputs` new buffers (owned by the caller), valid as inputs to
 * further executions before they are ready. Errors of the asynchronous work
 * surface in tpuc_client_synchronize (and in reads of the outputs). */
tpuc_status* tpuc_execute(tpuc_executable* exe, int device,
                          tpuc_buffer* const* args, size_t num_args,
                          const bool* donate, tpuc_buffer** outputs,
                          size_t num_outputs);

/* Enqueues one execution of a program compiled for several replicas
 * (tpuc_compile_options.num_replicas > 1) on all of its devices at once:
 * `args` holds num_args buffers per replica, replica after replica (each
 * replica's on its own device), and `outputs` receives num_outputs new
 * buffers per replica the same way. Collective ops in the program
 * (all_reduce, all_gather, ...) run across the replicas. `donate` (may be
 * NULL) is per argument position, for every replica, as tpuc_execute's. */
tpuc_status* tpuc_execute_replicated(tpuc_executable* exe,
                                     tpuc_buffer* const* args, size_t num_args,
                                     const bool* donate, tpuc_buffer** outputs,
                                     size_t num_outputs);
/* The number of replicas `exe` runs as (1 for an ordinary program) and the
 * addressable device of replica `r`. */
size_t tpuc_executable_num_replicas(const tpuc_executable* exe);
int tpuc_executable_replica_device(const tpuc_executable* exe, size_t r);

typedef struct tpuc_cache_stats {
  uint64_t memory_hits;
  uint64_t disk_hits;
  uint64_t misses; /* compiled */
  uint64_t disk_writes;
  uint64_t disk_corrupt;  /* corrupt or truncated entries found and replaced */
  double compile_seconds; /* total time spent compiling (misses) */
  double load_seconds;    /* total time spent deserializing (disk hits) */
  uint64_t memory_entries;
  uint64_t disk_bytes_written;
  /* Requests that found their program being compiled or loaded by another
   * thread and waited for it instead of compiling it again. */
  uint64_t inflight_waits;
  /* Entries the prefetch thread loaded ahead of their use, the time it
   * spent on them, and how many were then used (each also a disk hit). */
  uint64_t prefetched;
  double prefetch_seconds;
  uint64_t prefetch_hits;
  /* Programs compiled or loaded by helper threads ahead of their first
   * request (each also counted as a miss or a disk hit). */
  uint64_t compiled_ahead;
} tpuc_cache_stats;

tpuc_status* tpuc_cache_get_stats(tpuc_client* client, tpuc_cache_stats* out);
/* Drops the in-memory tier (executables still referenced stay alive); with
 * `disk`, also removes this plugin's on-disk entries. */
tpuc_status* tpuc_cache_clear(tpuc_client* client, bool disk);
/* Records: small blobs kept in the disk tier beside the programs (a
 * compiled graph's recipe), under a key the caller makes; written
 * atomically, the whole key compared on every read, a corrupt record
 * removed. Without a disk tier, put stores nothing and get finds nothing;
 * *stored says whether the record was written (a failed write, such as a
 * full disk, is no error: the cache only loses the record). */
tpuc_status* tpuc_cache_record_put(tpuc_client* client, const char* key,
                                   size_t key_len, const void* data, size_t len,
                                   bool* stored);
/* *data (malloc'ed, the caller frees it) and *len; *data is NULL when no
 * record has that key. */
tpuc_status* tpuc_cache_record_get(tpuc_client* client, const char* key,
                                   size_t key_len, char** data, size_t* len);
/* Folder of this client's on-disk tier ("" when disabled). */
const char* tpuc_cache_dir(tpuc_client* client);

#ifdef __cplusplus
}
#endif
#endif /* TPUC_EXECUTABLE_H_ */
