/* Client and devices: one PJRT client over a loaded plugin. */
#ifndef TPUC_CLIENT_H_
#define TPUC_CLIENT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpuc/plugin.h"
#include "tpuc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tpuc_client tpuc_client;

typedef struct tpuc_client_options {
  /* CPU plugin only: number of devices to create (0: plugin default). */
  int cpu_device_count;
  /* Compile cache folder; NULL: $TPUC_CACHE_DIR, else the user's cache
   * directory (~/.cache/tpuc). */
  const char* cache_dir;
  /* true: no on-disk compile cache (in-memory only). */
  bool disable_disk_cache;
} tpuc_client_options;

/* `options` may be NULL for defaults. */
tpuc_status* tpuc_client_create(tpuc_plugin* plugin,
                                const tpuc_client_options* options,
                                tpuc_client** out);
/* Waits for outstanding work, then destroys the client. Buffers and
 * executables of this client must be released before. */
void tpuc_client_destroy(tpuc_client* client);

/* Platform name ("cpu", "cuda", "tpu") and version; strings live as long as
 * the client. */
tpuc_status* tpuc_client_platform(tpuc_client* client, const char** name,
                                  const char** version);
tpuc_status* tpuc_client_plugin(tpuc_client* client, tpuc_plugin** plugin);

tpuc_status* tpuc_client_device_count(tpuc_client* client, int* count);

typedef struct tpuc_device_info {
  int index; /* position among addressable devices */
  int id;    /* PJRT global device id */
  int local_hardware_id;
  const char* kind; /* e.g. "cpu", "NVIDIA H200"; lives with the client */
  const char* description; /* plugin's ToString */
} tpuc_device_info;
tpuc_status* tpuc_client_device_info(tpuc_client* client, int device,
                                     tpuc_device_info* out);

typedef struct tpuc_memory_stats {
  bool available; /* false: the plugin does not report statistics */
  int64_t bytes_in_use;
  int64_t peak_bytes_in_use;
  int64_t bytes_limit; /* -1 if unknown */
  int64_t num_allocs;  /* -1 if unknown */
} tpuc_memory_stats;
/* Plugins without memory statistics give available=false, not an error. */
tpuc_status* tpuc_client_memory_stats(tpuc_client* client, int device,
                                      tpuc_memory_stats* out);

/* Calls `fn(client, user_data)` when the client is being destroyed, before
 * its executables go (layers above keep per-client caches this way). Each
 * (fn, user_data) pair is registered once; later registrations are
 * ignored. */
typedef void (*tpuc_client_destroy_fn)(tpuc_client* client, void* user_data);
tpuc_status* tpuc_client_on_destroy(tpuc_client* client,
                                    tpuc_client_destroy_fn fn, void* user_data);

/* Waits for every execution and transfer issued so far on this client.
 * Returns the first error raised by asynchronous work since the previous
 * synchronize, naming the program that caused it; the error is then
 * cleared, and the client stays usable. */
tpuc_status* tpuc_client_synchronize(tpuc_client* client);

/* A mark in the client's stream of work: everything issued so far (what a
 * PyTorch event records). tpuc_client_mark_done says, without blocking,
 * whether all of it has finished. */
tpuc_status* tpuc_client_mark(tpuc_client* client, uint64_t* mark);
tpuc_status* tpuc_client_mark_done(tpuc_client* client, uint64_t mark,
                                   bool* done);

#ifdef __cplusplus
}
#endif
#endif /* TPUC_CLIENT_H_ */
