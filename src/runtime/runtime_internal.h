/* The runtime layer's own declarations (not public). */
#ifndef TPUC_SRC_RUNTIME_RUNTIME_INTERNAL_H_
#define TPUC_SRC_RUNTIME_RUNTIME_INTERNAL_H_

#include <stdint.h>

#include "common/fingerprint.h"
#include "tpuc/buffer.h"
#include "tpuc/client.h"
#include "tpuc/executable.h"
#include "tpuc/group.h"
#include "tpuc/status.h"

/* Compile cache (compile_cache.c): one per client, found by its client. */
typedef struct tpuc_cache tpuc_cache;
tpuc_status* tpuc_cache_create(tpuc_client* client,
                               const tpuc_client_options* options,
                               tpuc_cache** out);
void tpuc_cache_destroy(tpuc_cache* cache);
/* A new client: loads, in the background, the programs the last client on
 * the same cache folder started with (nothing without prefetch). */
void tpuc_cache_prefetch_start(tpuc_cache* cache);

/* Compiles (or loads from disk), on helper threads, programs (default
 * options) that the caller is about to ask for with tpuc_compile, in that
 * order: the ones not in the memory tier yet, each once. The caller then
 * asks for them as usual; a request for one a helper has under way waits
 * for it. `texts` and `lens` must stay valid until tpuc_cache_ahead_finish,
 * which stops the helpers taking programs and waits for those under way.
 * NULL (nothing started): fewer than two programs to compile, helpers
 * turned off (TPUC_COMPILE_THREADS=0, one CPU) or none could start. */
typedef struct tpuc_cache_ahead tpuc_cache_ahead;
tpuc_cache_ahead* tpuc_cache_ahead_start(tpuc_client* client,
                                         const char* const* texts,
                                         const size_t* lens, size_t n);
/* The caller is about to ask for texts[i]: until a helper has made it, the
 * calling thread makes the programs no helper took yet (instead of only
 * waiting). NULL `ahead`: nothing. */
void tpuc_cache_ahead_help(tpuc_cache_ahead* ahead, size_t i);
void tpuc_cache_ahead_finish(tpuc_cache_ahead* ahead);

/* In-process groups (group.c) in fused mode (fused.c): with its collective,
 * a rank may offer a program that does more, the ops its open segment
 * recorded with the collective as their last node. When every rank of the
 * group offers a program of the same key, that program runs across the
 * ranks (compiled for `size` replicas) instead of the collective alone;
 * when no rank offers one, the collective runs as tpuc_group_run runs it;
 * when only some do, or their keys differ, nothing runs: each rank then
 * runs its own ops and calls the collective again. */
typedef struct tpuc_group_offer {
  tpuc_fingerprint key; /* of the program and what its arguments are */
  const char* text;     /* the program, or NULL when `exe` is set */
  size_t len;
  tpuc_executable* exe; /* the program when the rank has it, else NULL;
                           after it ran: the program (a new reference) */
  tpuc_buffer* const* args;
  size_t nargs;
  const bool* donate; /* per argument (NULL: none): given to the output the
                         program aliases it to; the same on every rank */
  tpuc_buffer** outs; /* receives nouts results when it ran */
  size_t nouts;
  /* After it ran, on the rank that compiled or loaded the program: where
   * it came from (a tpuc_cache_source) and the seconds that took; -1 on
   * the others (set it to -1 before the call). */
  int source;
  double seconds;
} tpuc_group_offer;

enum {
  TPUC_GROUP_RAN_PLAIN = 0, /* the collective alone: *out is its result */
  TPUC_GROUP_RAN_OFFER = 1, /* the offered program: offer->outs */
  TPUC_GROUP_RAN_NONE = 2,  /* nothing (the ranks' offers differ) */
};

/* tpuc_group_run with an offer (NULL: none); *how says what ran. */
tpuc_status* tpuc_group_run_offer(tpuc_group* group, const char* text,
                                  size_t len, const char* what,
                                  tpuc_buffer* arg, tpuc_group_offer* offer,
                                  int64_t timeout_ms, tpuc_buffer** out,
                                  int* how);

#endif /* TPUC_SRC_RUNTIME_RUNTIME_INTERNAL_H_ */
