/* The runtime layer's deferred op graph: fused segments, and the graph
 * captures of compiled graphs (fused.c, graph.c). One representation for
 * both: recorded nodes, each a per-call program with its input buffers and
 * output types. The op layer records into it; it knows no op. */
#ifndef TPUC_SRC_RUNTIME_FUSED_INTERNAL_H_
#define TPUC_SRC_RUNTIME_FUSED_INTERNAL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/fingerprint.h"
#include "tpuc/tpuc.h"

/* The most inputs and outputs one recorded node has (a call's tensor
 * arguments, Tensor[] entries and write targets, each with its view's
 * offset; its random key; its results and argument check). */
#define FZ_MAX_IN 177
#define FZ_MAX_OUT 9

/* ---- fused eager (fused.c) ---- */

/* Computes lazy `buffer`, whose owner was `owner` when asked (a segment:
 * runs it up to the producer; the background thread's token: waits for
 * that job). Called by tpuc_value_ensure (lazy.c). */
tpuc_status* fz_materialize(tpuc_buffer* buffer, void* owner);

/* A per-call program's text, shared by the program table and recorded
 * nodes (reference counted). fz_text_make takes over `text`. */
typedef struct fz_text fz_text;
fz_text* fz_text_make(char* text, size_t len, tpuc_fingerprint fp);
void fz_text_retain(fz_text* t);
void fz_text_release(fz_text* t);
const char* fz_text_str(const fz_text* t, size_t* len);
/* Records one call of a per-call program in the open segment of `device`:
 * its input buffers, its outputs' types (the argument check last when
 * has_check). Returns lazy buffers for the outputs before the check, which
 * the caller owns. UNIMPLEMENTED: run the call now instead. */
tpuc_status* fz_record(tpuc_client* client, int device, fz_text* prog,
                       const char* name, tpuc_buffer* const* in, size_t nin,
                       const tpuc_hlo_type* out_types, size_t nout,
                       bool has_check, tpuc_code check_code,
                       const char* check_msg, tpuc_buffer** outs);
/* A never-written storage that a recorded op reads: its zeros become a
 * node of the segment, so the composed program computes them where they
 * are used, instead of a fill that runs now and a buffer the program reads
 * back (an optimizer's first update of its zeros_like state). Nothing
 * changes when the segment cannot take the node. */
tpuc_status* fz_record_zeros(tpuc_client* client, int device,
                             tpuc_storage* storage);

/* ---- graph capture (fused.c, for graph.c) ---- */

/* Starts capturing what the calling thread records on `device` as one
 * graph: what was recorded before runs first; the thread records in fused
 * mode until fz_capture_finish. */
tpuc_status* fz_capture_start(tpuc_client* client, int device);
/* Whether the capture running on `device` has broken (something cut it:
 * a value needed on the host, an op run elsewhere). */
bool fz_capture_broken(tpuc_client* client, int device);
/* Breaks the capture running on `device` for `why`, unless it is broken. */
void fz_capture_break(tpuc_client* client, int device, const char* why);
/* A random op's generator draw recorded during a capture (the program
 * argument `buf` holds `vals`: seed, counter). */
void fz_capture_note_rng(tpuc_client* client, int device, tpuc_buffer* buf,
                         const uint64_t vals[2]);

typedef struct fz_captured {
  bool broken;   /* not one program: the ops ran as fused segments */
  char why[160]; /* ... because */
  size_t nops;
  char* text; /* @main(params) -> (results), no aliases */
  size_t len;
  tpuc_executable* exe; /* compiled from text */
  int source;           /* a tpuc_cache_source */
  double seconds;       /* compile or load time */
  size_t nparams;
  tpuc_buffer** params; /* retained: the distinct external buffers */
  bool* param_rng;      /* per parameter: a generator draw */
  uint64_t (*param_rng_vals)[2];
  size_t rng_draws;
  size_t nres;
  long* wanted_res; /* per wanted buffer: its result, or -1 (not computed
                       by the graph: an external buffer) */
  long check_any; /* the result that ORs every check, or -1 (none) */
  size_t nchecks; /* argument checks: result, error code and message */
  size_t* check_res;
  tpuc_code* check_code;
  const char** check_msg;
} fz_captured;

/* Ends the capture: the recording becomes one program whose results are
 * the `wanted` buffers computed in it (and the argument checks), compiled
 * through the cache and run once on the captured inputs, which fills the
 * wanted buffers. With `abandon`, or when the capture broke (a value was
 * needed on the host meanwhile, a result is held outside the graph),
 * everything runs as fused segments and out->broken says why. */
tpuc_status* fz_capture_finish(tpuc_client* client, int device,
                               tpuc_buffer* const* wanted, size_t nwanted,
                               bool abandon, fz_captured* out);
void fz_captured_free(fz_captured* c);

#endif /* TPUC_SRC_RUNTIME_FUSED_INTERNAL_H_ */
