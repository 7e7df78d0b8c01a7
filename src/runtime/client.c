/* tpuc_client_create (tpuc/client.h): the PJRT layer's client, and the
 * runtime's compile cache for it. The cache hangs on the client through
 * its destroy callbacks, so the PJRT layer knows nothing of it. */
#include "pjrt/internal.h"
#include "runtime/runtime_internal.h"

static void destroy_cache(tpuc_client* client, void* cache) {
  (void)client;
  tpuc_cache_destroy(cache);
}

tpuc_status* tpuc_client_create(tpuc_plugin* plugin,
                                const tpuc_client_options* options,
                                tpuc_client** out) {
  TPUC_RETURN_IF_ERROR(tpuc_pjrt_client_create(plugin, options, out));
  tpuc_cache* cache = NULL;
  tpuc_status* st = tpuc_cache_create(*out, options, &cache);
  /* Registered first, so it runs last: every other destroy callback
   * (fused segments, op programs) releases its executables before it. */
  if (st == NULL) {
    st = tpuc_client_on_destroy(*out, destroy_cache, cache);
    if (st != NULL) tpuc_cache_destroy(cache);
  }
  if (st != NULL) {
    tpuc_client_destroy(*out);
    *out = NULL;
    return st;
  }
  tpuc_cache_prefetch_start(cache);
  return NULL;
}
