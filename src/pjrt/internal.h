/* Private definitions shared by the PJRT layer (src/pjrt) and the runtime
 * (src/runtime). Not installed. */
#ifndef TPUC_SRC_PJRT_INTERNAL_H_
#define TPUC_SRC_PJRT_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>

#include "common/fingerprint.h"
#include "pjrt/pjrt_abi.h"
#include "tpuc/tpuc.h"

struct tpuc_plugin {
  const PJRT_Api* api;
  tpuc_plugin_info info; /* strings below are owned here */
  char* path;
  char* package;
  char xla_version[64];
  char package_version[64];
  tpuc_plugin* next; /* process-wide list of loaded plugins */
};


/* One execution whose completion has not been observed yet. */
typedef struct tpuc_pending {
  PJRT_Event* event;
  char program[48];
} tpuc_pending;

struct tpuc_client {
  tpuc_plugin* plugin;
  const PJRT_Api* api;
  PJRT_Client* pjrt;
  char* platform_name;
  char* platform_version;
  size_t num_devices;
  PJRT_Device** devices;
  char** device_kinds;
  char** device_descriptions;
  int* device_ids;
  int* device_hw_ids;

  pthread_mutex_t mu; /* guards the pending ring and async_error */
  tpuc_pending* pending;
  size_t pending_cap, pending_head, pending_count;
  /* Executions tracked so far, and those known finished (in order). */
  uint64_t issued, retired;
  tpuc_status* async_error;

  /* Destroy callbacks (guarded by mu). */
  struct {
    tpuc_client_destroy_fn fn;
    void* user;
  } on_destroy[8];
  size_t num_on_destroy;

  /* Bytes held by live storages, per device (guarded by mu). */
  int64_t* storage_bytes;
  int64_t* storage_peak;
};

struct tpuc_buffer {
  atomic_int refs;
  tpuc_client* client;
  /* NULL while a promised buffer has no value yet, and after its promise
   * was broken (error_msg then says why). */
  PJRT_Buffer* pjrt;
  tpuc_code error_code;
  char* error_msg;
  _Alignas(16) unsigned char ext[TPUC_BUFFER_EXT_BYTES];
  tpuc_dtype dtype;
  int rank;
  int device;
  int64_t dims[TPUC_MAX_RANK];
};

struct tpuc_event {
  const PJRT_Api* api;
  PJRT_Event* pjrt;
};

#define TPUC_EXE_NAME_LEN 48

struct tpuc_executable {
  atomic_int refs;
  tpuc_client* client;
  PJRT_LoadedExecutable* pjrt;
  size_t num_inputs, num_outputs;
  tpuc_value_type* inputs;
  tpuc_value_type* outputs;
  int* input_alias;
  /* A program compiled for several replicas: the addressable device of
   * each (num_replicas 1 and NULL for an ordinary program). */
  size_t num_replicas;
  int* replica_devices;
  char name[TPUC_EXE_NAME_LEN];
};

/* Converts (and destroys) a PJRT error; NULL in, NULL out. The message is
 * prefixed with the printf-style context. */
tpuc_status* tpuc_pjrt_error(const PJRT_Api* api, PJRT_Error* error,
                             const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Checks that the plugin has `slot` (a PJRT_Api member name). */
#define TPUC_REQUIRE_FN(api, slot)                                          \
  do {                                                                      \
    if (!TPUC_PJRT_HAS(api, slot))                                          \
      return tpuc_status_make(TPUC_UNIMPLEMENTED,                           \
                              "the loaded PJRT plugin does not provide %s", \
                              #slot);                                       \
  } while (0)

PJRT_Buffer_Type tpuc_pjrt_buffer_type(tpuc_dtype dtype);

/* Destroy PJRT objects, discarding any error (used on cleanup paths). */
void tpuc_pjrt_buffer_destroy(const PJRT_Api* api, PJRT_Buffer* buffer);
void tpuc_pjrt_event_destroy(const PJRT_Api* api, PJRT_Event* event);
void tpuc_pjrt_unloaded_destroy(const PJRT_Api* api, PJRT_Executable* exe);
tpuc_status* tpuc_event_wrap(const PJRT_Api* api, PJRT_Event* ev,
                             tpuc_event** out);

/* Wraps a PJRT buffer (takes ownership) with known metadata. */
tpuc_status* tpuc_buffer_wrap(tpuc_client* client, PJRT_Buffer* pjrt,
                              int device, const tpuc_value_type* type,
                              tpuc_buffer** out);

/* INVALID_ARGUMENT naming the platform's device count unless `device` is an
 * addressable-device index of `client`. */
tpuc_status* tpuc_client_check_device(tpuc_client* client, int device);

/* Records an in-flight execution for tpuc_client_synchronize. */
void tpuc_client_track(tpuc_client* client, PJRT_Event* done,
                       const char* program);

/* Signature of @main read from MLIR text. Returns INVALID_ARGUMENT if it
 * cannot be read. Arrays are malloc'ed. */
tpuc_status* tpuc_parse_main_signature(const char* text, size_t len,
                                       tpuc_value_type** inputs,
                                       size_t* num_inputs, int** input_alias,
                                       tpuc_value_type** outputs,
                                       size_t* num_outputs);

/* Serialized xla.CompileOptionsProto for `options`; writes at most `cap`
 * bytes and returns the length. */
size_t tpuc_encode_compile_options(tpuc_client* client,
                                   const tpuc_compile_options* options,
                                   unsigned char* out, size_t cap);
/* INVALID_ARGUMENT unless the options' counts and replica devices are
 * valid for `client`. */
tpuc_status* tpuc_check_compile_options(tpuc_client* client,
                                        const tpuc_compile_options* options);

/* The PJRT client alone: plugin client, platform, devices. The public
 * tpuc_client_create (runtime/client.c) adds the compile cache on top. */
tpuc_status* tpuc_pjrt_client_create(tpuc_plugin* plugin,
                                     const tpuc_client_options* options,
                                     tpuc_client** out);

/* Raw compile without the cache (pjrt/executable.c). */
tpuc_status* tpuc_pjrt_compile(tpuc_client* client, const char* mlir,
                               size_t len, const unsigned char* options,
                               size_t options_len, PJRT_LoadedExecutable** out);
tpuc_status* tpuc_pjrt_serialize(tpuc_client* client,
                                 PJRT_LoadedExecutable* exe, char** bytes,
                                 size_t* len);
tpuc_status* tpuc_pjrt_deserialize(tpuc_client* client, const char* bytes,
                                   size_t len, PJRT_LoadedExecutable** out);
void tpuc_pjrt_executable_destroy(tpuc_client* client,
                                  PJRT_LoadedExecutable* exe);
/* Fills exe->num_replicas and exe->replica_devices from the plugin's list
 * of the executable's addressable devices. */
tpuc_status* tpuc_pjrt_executable_replicas(tpuc_executable* exe);

#endif /* TPUC_SRC_PJRT_INTERNAL_H_ */
