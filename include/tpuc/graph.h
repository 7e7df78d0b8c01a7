/* Compiled graphs (torch.compile, shared/DESIGN.md "Deferred op graph").
 *
 * A graph is captured by running it once through the eager kernels: the
 * thread records its ops in fused mode with nothing cutting the segment,
 * and the recording becomes ONE program. The graph remembers where each
 * argument of that program comes from (the value of an input's storage, a
 * constant of the graph, a draw of the device's generator), which results
 * are the storages of its outputs, and which are the new values of inputs
 * it wrote in place. A replay runs that program on new inputs with no op
 * dispatch: one execution, input storages whose old value nothing else
 * holds are donated to their new values, outputs come back as new
 * storages. A capture that cannot become one program (a value needed on
 * the host inside the graph, an op with no lowering) still computes its
 * results, as fused segments, and says why. */
#ifndef TPUC_GRAPH_H_
#define TPUC_GRAPH_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpuc/client.h"
#include "tpuc/status.h"
#include "tpuc/storage.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tpuc_graph tpuc_graph;

/* Starts capturing the ops the calling thread runs on `device`. `inputs`
 * are the graph's tensor inputs; (rng_seed, rng_offset) the state of the
 * device's default generator (its seed, and the offset its next draw
 * takes). One capture per device at a time. */
tpuc_status* tpuc_graph_capture_begin(tpuc_client* client, int device,
                                      const tpuc_view* inputs, size_t nin,
                                      uint64_t rng_seed, uint64_t rng_offset);

/* Whether the calling thread's capture on `device` can no longer be one
 * program (an op needed a value on the host or ran off the device). The
 * graph's code keeps running; tpuc_graph_capture_end says why. Checked
 * after each op, it finds the op that broke the capture. */
bool tpuc_graph_capture_broken(tpuc_client* client, int device);

/* Breaks the calling thread's capture, if it has one on `client`, for
 * `why` (the first reason stands): an op that ran off the device, whose
 * result replays could not recompute. */
void tpuc_graph_capture_break(tpuc_client* client, const char* why);

/* Ends the capture of the calling thread: `outputs` are the graph's tensor
 * outputs. The captured program runs once for this call, so the outputs
 * (and the inputs written in place) have their values either way. *out is
 * the graph, or NULL when it is not one program; then `why` says why.
 * With `abandon` (the graph's code raised), what was recorded runs as
 * fused segments and *out is NULL. */
tpuc_status* tpuc_graph_capture_end(tpuc_client* client, int device,
                                    const tpuc_view* outputs, size_t nout,
                                    bool abandon, tpuc_graph** out, char* why,
                                    size_t why_cap);

/* Where output i's storage comes from, and its view of it. */
typedef struct tpuc_graph_output {
  int input;   /* >= 0: the storage of input `input` */
  int storage; /* else: new storage `storage` of the replay */
  tpuc_dtype dtype;
  int rank;
  int64_t sizes[TPUC_MAX_RANK];
  int64_t strides[TPUC_MAX_RANK];
  int64_t offset;
} tpuc_graph_output;

size_t tpuc_graph_num_outputs(const tpuc_graph* g);
const tpuc_graph_output* tpuc_graph_output_at(const tpuc_graph* g, size_t i);
/* New storages a replay fills, and the size of each. */
size_t tpuc_graph_num_storages(const tpuc_graph* g);
size_t tpuc_graph_storage_nbytes(const tpuc_graph* g, size_t j);
/* Generator draws a replay takes (random ops in the graph). */
uint64_t tpuc_graph_rng_draws(const tpuc_graph* g);
/* Ops captured, program arguments and results. */
size_t tpuc_graph_num_ops(const tpuc_graph* g);

/* True when `inputs` look as the ones the graph was captured with: device,
 * dtypes, sizes, strides, offsets, storage sizes, the element type each
 * storage's value is kept in, and which inputs share a storage. */
bool tpuc_graph_matches(const tpuc_graph* g, const tpuc_view* inputs,
                        size_t nin);

/* Runs the graph on `inputs` (which must match). `storages` are the
 * tpuc_graph_num_storages() new storages of the outputs, created by the
 * caller with the sizes above: they receive their values. Inputs the graph
 * writes get their new values. The generator draws start at `rng_offset`
 * (the caller advances its generator by tpuc_graph_rng_draws). The
 * execution is asynchronous unless an op of the graph checks its
 * arguments on the device (an index in range): then it waits, and a bad
 * argument leaves every input as it was and reports the op's error;
 * UNIMPLEMENTED there means the CPU decides (run the call eagerly to get
 * PyTorch's own error). */
tpuc_status* tpuc_graph_replay(tpuc_graph* g, const tpuc_view* inputs,
                               size_t nin, tpuc_storage* const* storages,
                               size_t nstorages, uint64_t rng_seed,
                               uint64_t rng_offset);

void tpuc_graph_retain(tpuc_graph* g);
void tpuc_graph_release(tpuc_graph* g);

/* Records: a graph's recipe (where each program argument comes from, its
 * outputs and in-place updates, its checks, and its program text) kept in
 * the compile cache's disk tier, so a new process replays the graph
 * without capturing it again (its program is then loaded from the same
 * tier). The record's key is `key` (the caller's: what defines the graph's
 * code and the state its lowering reads) plus the device and the inputs'
 * signature (dtypes, sizes, strides, offsets, storage sizes, the element
 * types their values are kept in, aliasing). `extra` is kept with it for
 * the caller.
 *
 * Constants of the capture (scalar arguments, tensors made from host data)
 * are kept by value. Save: *saved is false (and nothing is written) for a
 * graph whose constants exceed 16 MiB, when the cache has no disk tier, or
 * when the write fails. */
tpuc_status* tpuc_graph_save(const tpuc_graph* g, const char* key,
                             size_t key_len, const void* extra,
                             size_t extra_len, bool* saved);
/* Load: *out is NULL when no record matches `inputs` on `device` (nothing
 * is recorded, or a record is corrupt or from another program format);
 * else a new graph (release it) and *extra (malloc'ed, the caller frees
 * it). The program is compiled or loaded through the compile cache. */
tpuc_status* tpuc_graph_load(tpuc_client* client, int device, const char* key,
                             size_t key_len, const tpuc_view* inputs,
                             size_t nin, tpuc_graph** out, char** extra,
                             size_t* extra_len);

typedef struct tpuc_graph_stats {
  uint64_t captures;         /* graphs captured as one program */
  uint64_t capture_failures; /* captures that were not one program */
  uint64_t replays;
  uint64_t ops_replayed;  /* ops of the replayed graphs, summed */
  uint64_t compiles;      /* programs compiled (captures, variants) */
  uint64_t cache_hits;    /* ... found in the compile cache instead */
  uint64_t disk_hits;     /* ... of which in its disk tier */
  uint64_t variants;      /* extra programs for another donation set */
  uint64_t donated;       /* input buffers given to their new values */
  double compile_seconds; /* compiling or loading graph programs */
  /* With timing on: seconds from each replay's execution until its
   * results were ready (the plugin's own time for the program). */
  double execute_seconds;
  uint64_t records_saved;  /* graph records written to the disk tier */
  uint64_t records_loaded; /* graphs loaded from records (no capture) */
} tpuc_graph_stats;

/* Timing (for benchmarks): each replay waits for its results and adds the
 * execution's time to execute_seconds. Off by default. */
void tpuc_graph_set_timing(bool on);

void tpuc_graph_get_stats(tpuc_graph_stats* out);
void tpuc_graph_reset_stats(void);

#ifdef __cplusplus
}
#endif
#endif /* TPUC_GRAPH_H_ */
