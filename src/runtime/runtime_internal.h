/* The runtime layer's own declarations (not public). */
#ifndef TPUC_SRC_RUNTIME_RUNTIME_INTERNAL_H_
#define TPUC_SRC_RUNTIME_RUNTIME_INTERNAL_H_

#include "tpuc/client.h"
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

#endif /* TPUC_SRC_RUNTIME_RUNTIME_INTERNAL_H_ */
