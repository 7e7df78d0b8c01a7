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

#endif /* TPUC_SRC_RUNTIME_RUNTIME_INTERNAL_H_ */
