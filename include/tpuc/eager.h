/* Eager execution modes (shared/DESIGN.md, "Deferred op graph").
 *
 * Every native op call becomes a node. What happens next is the mode:
 *   DEBUG   run the op's program and wait for it: errors are reported at
 *           the failing op (PyTorch's CUDA_LAUNCH_BLOCKING).
 *   STRICT  run the op's program asynchronously and return at once.
 *   FUSED   record the node; a segment of recorded nodes runs later as ONE
 *           program, when a value is needed (a host read, a data-dependent
 *           shape, an execution outside the segment), on synchronize, at a
 *           size limit, or when a repeated op sequence (a training step) is
 *           detected. Results nothing holds are never computed.
 * The mode is global, with a per-thread override. */
#ifndef TPUC_EAGER_H_
#define TPUC_EAGER_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpuc/buffer.h"
#include "tpuc/client.h"
#include "tpuc/group.h"
#include "tpuc/hlo.h"
#include "tpuc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tpuc_eager_mode {
  TPUC_EAGER_DEBUG = 0,
  TPUC_EAGER_STRICT = 1,
  TPUC_EAGER_FUSED = 2,
} tpuc_eager_mode;

/* The mode of the calling thread: its override, else the global mode. */
tpuc_eager_mode tpuc_eager_mode_current(void);
tpuc_eager_mode tpuc_eager_mode_global(void);
/* Sets the global mode. Leaving FUSED runs what was recorded. */
tpuc_status* tpuc_eager_set_global(tpuc_eager_mode mode);
/* The calling thread's override (-1: none, follow the global mode). */
int tpuc_eager_thread_override(void);
tpuc_status* tpuc_eager_set_thread_override(int mode);
/* Where a thread without an override of its own finds one it inherited
 * (-1: none): the PyTorch binding reads the thread-local state PyTorch
 * carries into its autograd threads, so a backward pass runs in the mode
 * of the thread that started it. NULL: no inheritance. */
typedef int (*tpuc_eager_inherited_fn)(void);
void tpuc_eager_set_inherited(tpuc_eager_inherited_fn fn);
/* Parses "debug" / "strict" / "fused"; -1 for anything else. */
int tpuc_eager_mode_parse(const char* name);
const char* tpuc_eager_mode_name(tpuc_eager_mode mode);

/* Why a fused segment ran. */
typedef enum tpuc_fused_reason {
  TPUC_FUSED_VALUE = 0,   /* a value was needed (read, dependent execution) */
  TPUC_FUSED_SYNC,        /* synchronize (device, stream, event), save */
  TPUC_FUSED_LIMIT,       /* the segment reached TPUC_FUSED_MAX_OPS */
  TPUC_FUSED_REPEAT,      /* a repeated op sequence (a step) was detected */
  TPUC_FUSED_MODE,        /* the mode changed, or the process is ending */
  TPUC_FUSED_CHECK,       /* an op checks its arguments on the device */
  TPUC_FUSED_COLLECTIVE,  /* a collective reads a value (not waited for) */
  TPUC_FUSED_REASONS,
} tpuc_fused_reason;

const char* tpuc_fused_reason_name(tpuc_fused_reason reason);

/* Runs everything recorded for `client` (all clients when NULL) and waits
 * for it; reports an error of a recorded op that was not reported yet. */
tpuc_status* tpuc_fused_flush(tpuc_client* client, tpuc_fused_reason reason);
/* tpuc_fused_flush of what `device` recorded (-1: every device); what the
 * background thread has is waited for all the same. */
tpuc_status* tpuc_fused_flush_device(tpuc_client* client, int device,
                                     tpuc_fused_reason reason);

/* Starts what is recorded for `device` of `client` without waiting for
 * it: the segment is cut there (a step-boundary cut: compiled and run on
 * the background thread where it must be compiled), so the values it
 * computes become real buffers that any thread can wait for. Errors of the
 * run surface at the next flush. */
tpuc_status* tpuc_fused_cut(tpuc_client* client, int device,
                            tpuc_fused_reason reason);

/* tpuc_group_run (tpuc/group.h) for the calling rank, with what it
 * recorded: in fused mode, when `arg` is a value the rank's open segment
 * computes, the segment and the collective (program `text`, result type
 * `out_type`) run as ONE program across the ranks, if every rank's
 * segment is the same and has recurred as a segment must before it is
 * compiled (TPUC_FUSE_AFTER); else the segment is cut and the collective
 * runs alone. Errors as tpuc_group_run's. */
tpuc_status* tpuc_fused_group_run(tpuc_group* group, const char* text,
                                  size_t len, const tpuc_hlo_type* out_type,
                                  const char* what, tpuc_buffer* arg,
                                  int64_t timeout_ms, tpuc_buffer** out);

typedef struct tpuc_fused_stats {
  uint64_t ops_recorded;
  uint64_t segments;         /* segments that ran */
  uint64_t segments_dropped; /* segments with no live result: not run */
  uint64_t ops_run;          /* ops in the segments that ran */
  uint64_t outputs;          /* results materialized */
  uint64_t compiles;         /* segment programs compiled */
  uint64_t table_hits;       /* segment programs found in the program table */
  uint64_t cache_hits;       /* ... not there, found in the compile cache */
  uint64_t disk_hits;        /* ... of which in its disk tier */
  uint64_t recompiles;       /* compiles of an op sequence seen before */
  uint64_t donated;          /* inputs whose memory an output reused */
  uint64_t background;       /* segments compiled and run on the background
                                thread (step boundaries, size limit) */
  uint64_t by_ops;           /* segments run op by op: their first runs
                                (TPUC_FUSE_AFTER) */
  uint64_t fuse_after;       /* the run of a segment from which it is
                                compiled (TPUC_FUSE_AFTER, read now) */
  uint64_t fuse_after_small; /* ... of a segment whose values are all
                                small (64 unless TPUC_FUSE_AFTER is set) */
  uint64_t small_compiled;   /* small segments that reached it (their
                                program compiled or found) */
  uint64_t group_segments;   /* segments run with a collective as one
                                program across a group's ranks (each
                                rank counts its own) */
  double compile_seconds;
  uint64_t by_reason[TPUC_FUSED_REASONS];
} tpuc_fused_stats;

void tpuc_fused_get_stats(tpuc_fused_stats* out);
/* Segments handed to the background thread that have not finished (does
 * not wait). */
uint64_t tpuc_fused_pending(void);
void tpuc_fused_reset_stats(void);

#define TPUC_FUSED_SOURCE_BY_OPS 4

/* One segment that ran or was dropped (the most recent ones are kept). */
typedef struct tpuc_fused_event {
  tpuc_fused_reason reason;
  uint32_t ops;
  uint32_t outputs;
  bool dropped;
  /* 0: program table hit, 1: compiled, 2: compile-cache memory tier,
   * 3: compile-cache disk tier, TPUC_FUSED_SOURCE_BY_OPS: run op by op. */
  int source;
  double seconds; /* compile or load time */
  bool background; /* compiled and run on the background thread */
  char first_op[64];
  char last_op[64]; /* for an argument check: the op that checks */
  /* For a compile of an op sequence that ran before with another key:
   * what changed. */
  char changed[160];
} tpuc_fused_event;

/* Copies up to `cap` of the most recent events, oldest first. */
size_t tpuc_fused_events(tpuc_fused_event* out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* TPUC_EAGER_H_ */
