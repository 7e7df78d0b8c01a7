/* Compiling, (de)serializing and executing PJRT executables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt/internal.h"

tpuc_status* tpuc_pjrt_compile(tpuc_client* c, const char* mlir, size_t len,
                               const unsigned char* options, size_t options_len,
                               PJRT_LoadedExecutable** out) {
  PJRT_Program prog = {0};
  prog.struct_size = sizeof prog;
  prog.code = (char*)mlir; /* not written for compilation */
  prog.code_size = len;
  prog.format = "mlir";
  prog.format_size = 4;
  PJRT_Client_Compile_Args a = {0};
  a.struct_size = sizeof a;
  a.client = c->pjrt;
  a.program = &prog;
  a.compile_options = (const char*)options;
  a.compile_options_size = options_len;
  TPUC_RETURN_IF_ERROR(tpuc_pjrt_error(c->api, c->api->PJRT_Client_Compile(&a),
                                       "compiling the program"));
  *out = a.executable;
  return NULL;
}

void tpuc_pjrt_executable_destroy(tpuc_client* c, PJRT_LoadedExecutable* exe) {
  if (exe == NULL) return;
  PJRT_LoadedExecutable_Destroy_Args d = {0};
  d.struct_size = sizeof d;
  d.executable = exe;
  tpuc_status_free(
      tpuc_pjrt_error(c->api, c->api->PJRT_LoadedExecutable_Destroy(&d), NULL));
}

tpuc_status* tpuc_pjrt_serialize(tpuc_client* c, PJRT_LoadedExecutable* exe,
                                 char** bytes, size_t* len) {
  const PJRT_Api* api = c->api;
  TPUC_REQUIRE_FN(api, PJRT_LoadedExecutable_GetExecutable);
  TPUC_REQUIRE_FN(api, PJRT_Executable_Serialize);
  TPUC_REQUIRE_FN(api, PJRT_Executable_Destroy);
  PJRT_LoadedExecutable_GetExecutable_Args g = {0};
  g.struct_size = sizeof g;
  g.loaded_executable = exe;
  TPUC_RETURN_IF_ERROR(tpuc_pjrt_error(
      api, api->PJRT_LoadedExecutable_GetExecutable(&g), "serializing"));
  PJRT_Executable_Serialize_Args s = {0};
  s.struct_size = sizeof s;
  s.executable = g.executable;
  tpuc_status* st = tpuc_pjrt_error(api, api->PJRT_Executable_Serialize(&s),
                                    "serializing the executable");
  if (st == NULL) {
    *bytes = malloc(s.serialized_bytes_size ? s.serialized_bytes_size : 1);
    if (*bytes == NULL) {
      st = tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
    } else {
      memcpy(*bytes, s.serialized_bytes, s.serialized_bytes_size);
      *len = s.serialized_bytes_size;
    }
    if (s.serialized_executable_deleter != NULL)
      s.serialized_executable_deleter(s.serialized_executable);
  }
  tpuc_pjrt_unloaded_destroy(api, g.executable);
  return st;
}

tpuc_status* tpuc_pjrt_deserialize(tpuc_client* c, const char* bytes,
                                   size_t len, PJRT_LoadedExecutable** out) {
  TPUC_REQUIRE_FN(c->api, PJRT_Executable_DeserializeAndLoad);
  PJRT_Executable_DeserializeAndLoad_Args a = {0};
  a.struct_size = sizeof a;
  a.client = c->pjrt;
  a.serialized_executable = bytes;
  a.serialized_executable_size = len;
  TPUC_RETURN_IF_ERROR(
      tpuc_pjrt_error(c->api, c->api->PJRT_Executable_DeserializeAndLoad(&a),
                      "loading a cached executable"));
  *out = a.loaded_executable;
  return NULL;
}

/* ------------------------------ accessors ------------------------------ */

size_t tpuc_executable_num_inputs(const tpuc_executable* e) {
  return e ? e->num_inputs : 0;
}
size_t tpuc_executable_num_outputs(const tpuc_executable* e) {
  return e ? e->num_outputs : 0;
}
const tpuc_value_type* tpuc_executable_input_type(const tpuc_executable* e,
                                                  size_t i) {
  return (e && i < e->num_inputs) ? &e->inputs[i] : NULL;
}
const tpuc_value_type* tpuc_executable_output_type(const tpuc_executable* e,
                                                   size_t i) {
  return (e && i < e->num_outputs) ? &e->outputs[i] : NULL;
}
int tpuc_executable_input_alias(const tpuc_executable* e, size_t i) {
  return (e && i < e->num_inputs) ? e->input_alias[i] : -1;
}
const char* tpuc_executable_name(const tpuc_executable* e) {
  return e ? e->name : "";
}

void tpuc_executable_retain(tpuc_executable* e) {
  if (e) atomic_fetch_add(&e->refs, 1);
}

void tpuc_executable_release(tpuc_executable* e) {
  if (e == NULL || atomic_fetch_sub(&e->refs, 1) != 1) return;
  tpuc_pjrt_executable_destroy(e->client, e->pjrt);
  free(e->inputs);
  free(e->outputs);
  free(e->input_alias);
  free(e->replica_devices);
  free(e);
}

size_t tpuc_executable_num_replicas(const tpuc_executable* e) {
  return e ? (e->num_replicas ? e->num_replicas : 1) : 0;
}

int tpuc_executable_replica_device(const tpuc_executable* e, size_t r) {
  if (e == NULL || r >= tpuc_executable_num_replicas(e)) return -1;
  return e->replica_devices ? e->replica_devices[r] : 0;
}

tpuc_status* tpuc_pjrt_executable_replicas(tpuc_executable* e) {
  tpuc_client* c = e->client;
  e->num_replicas = 1;
  if (!TPUC_PJRT_HAS(c->api, PJRT_LoadedExecutable_AddressableDevices))
    return NULL;
  PJRT_LoadedExecutable_AddressableDevices_Args a = {0};
  a.struct_size = sizeof a;
  a.executable = e->pjrt;
  TPUC_RETURN_IF_ERROR(tpuc_pjrt_error(
      c->api, c->api->PJRT_LoadedExecutable_AddressableDevices(&a),
      "the devices of program %s", e->name));
  if (a.num_addressable_devices <= 1) return NULL;
  e->replica_devices = malloc(sizeof(int) * a.num_addressable_devices);
  if (e->replica_devices == NULL)
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  for (size_t r = 0; r < a.num_addressable_devices; r++) {
    int idx = -1;
    for (size_t d = 0; d < c->num_devices; d++)
      if (c->devices[d] == a.addressable_devices[r]) idx = (int)d;
    if (idx < 0)
      return tpuc_status_make(TPUC_INTERNAL,
                              "program %s runs on a device the client does "
                              "not list",
                              e->name);
    e->replica_devices[r] = idx;
  }
  e->num_replicas = a.num_addressable_devices;
  return NULL;
}

/* ------------------------------ execution ------------------------------ */

static void format_type(const tpuc_value_type* t, char* out, size_t cap) {
  size_t n = (size_t)snprintf(out, cap, "%s[", tpuc_dtype_mlir_name(t->dtype));
  for (int i = 0; i < t->rank && n < cap; i++)
    n += (size_t)snprintf(out + n, cap - n, "%s%lld", i ? "," : "",
                          (long long)t->dims[i]);
  if (n < cap) snprintf(out + n, cap - n, "]");
}

static tpuc_status* check_args(tpuc_executable* e, int device,
                               tpuc_buffer* const* args, size_t num_args,
                               size_t num_outputs) {
  tpuc_client* c = e->client;
  TPUC_RETURN_IF_ERROR(tpuc_status_annotate(tpuc_client_check_device(c, device),
                                            "program %s", e->name));
  if (num_args != e->num_inputs)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "program %s takes %zu argument(s), got %zu",
                            e->name, e->num_inputs, num_args);
  if (num_outputs != e->num_outputs)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "program %s has %zu output(s), caller expects %zu",
                            e->name, e->num_outputs, num_outputs);
  for (size_t i = 0; i < num_args; i++) {
    const tpuc_buffer* b = args[i];
    if (b == NULL)
      return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                              "program %s: argument %zu is NULL", e->name, i);
    if (b->client != c)
      return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                              "program %s: argument %zu belongs to another "
                              "client",
                              e->name, i);
    if (b->device != device)
      return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                              "program %s runs on device %d but argument %zu "
                              "is on device %d",
                              e->name, device, i, b->device);
    const tpuc_value_type* t = &e->inputs[i];
    int same = b->dtype == t->dtype && b->rank == t->rank;
    for (int d = 0; same && d < t->rank; d++) same = b->dims[d] == t->dims[d];
    if (!same) {
      char want[256], got[256];
      tpuc_value_type bt = {.dtype = b->dtype, .rank = b->rank};
      memcpy(bt.dims, b->dims, sizeof(int64_t) * (size_t)b->rank);
      format_type(t, want, sizeof want);
      format_type(&bt, got, sizeof got);
      return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                              "program %s: argument %zu must be %s, got %s",
                              e->name, i, want, got);
    }
    if (tpuc_buffer_is_deleted(b))
      return tpuc_status_make(TPUC_FAILED_PRECONDITION,
                              "program %s: argument %zu was donated to an "
                              "earlier execution and can no longer be used",
                              e->name, i);
  }
  return NULL;
}

#define TPUC_STACK_ARGS 32

tpuc_status* tpuc_execute(tpuc_executable* e, int device,
                          tpuc_buffer* const* args, size_t num_args,
                          const bool* donate, tpuc_buffer** outputs,
                          size_t num_outputs) {
  if (e == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "executable is NULL");
  if ((num_args > 0 && args == NULL) || (num_outputs > 0 && outputs == NULL))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "args or outputs is NULL");
  if (e->replica_devices != NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "program %s is compiled for %zu replicas: run it "
                            "with tpuc_execute_replicated",
                            e->name, e->num_replicas);
  TPUC_RETURN_IF_ERROR(check_args(e, device, args, num_args, num_outputs));
  for (size_t i = 0; i < num_args; i++)
    TPUC_RETURN_IF_ERROR(tpuc_status_annotate(tpuc_buffer_check_value(args[i]),
                                              "argument %zu", i));
  tpuc_client* c = e->client;
  const PJRT_Api* api = c->api;

  PJRT_Buffer* in_stack[TPUC_STACK_ARGS];
  PJRT_Buffer* out_stack[TPUC_STACK_ARGS];
  int64_t keep_stack[TPUC_STACK_ARGS];
  PJRT_Buffer** in = in_stack;
  PJRT_Buffer** out = out_stack;
  int64_t* keep = keep_stack;
  if (num_args > TPUC_STACK_ARGS) {
    in = malloc(num_args * sizeof *in);
    keep = malloc(num_args * sizeof *keep);
  }
  if (num_outputs > TPUC_STACK_ARGS) out = malloc(num_outputs * sizeof *out);
  tpuc_status* st = NULL;
  if (in == NULL || out == NULL || keep == NULL) {
    st = tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
    goto done;
  }
  size_t num_keep = 0;
  for (size_t i = 0; i < num_args; i++) {
    in[i] = args[i]->pjrt;
    if (donate == NULL || !donate[i] || e->input_alias[i] < 0)
      keep[num_keep++] = (int64_t)i;
  }
  PJRT_ExecuteOptions opts = {0};
  opts.struct_size = sizeof opts;
  opts.non_donatable_input_indices = keep;
  opts.num_non_donatable_input_indices = num_keep;
  PJRT_Buffer* const* arg_lists[1] = {in};
  PJRT_Buffer** out_lists[1] = {out};
  PJRT_Event* done_events[1] = {NULL};
  PJRT_LoadedExecutable_Execute_Args a = {0};
  a.struct_size = sizeof a;
  a.executable = e->pjrt;
  a.options = &opts;
  a.argument_lists = arg_lists;
  a.num_devices = 1;
  a.num_args = num_args;
  a.output_lists = out_lists;
  a.device_complete_events = done_events;
  a.execute_device = c->devices[device];
  st = tpuc_pjrt_error(api, api->PJRT_LoadedExecutable_Execute(&a),
                       "executing program %s", e->name);
  if (st != NULL) goto done;
  size_t made = 0;
  for (; made < num_outputs; made++) {
    st = tpuc_buffer_wrap(c, out[made], device, &e->outputs[made],
                          &outputs[made]);
    if (st != NULL) break;
  }
  if (st != NULL) {
    for (size_t i = 0; i < made; i++) tpuc_buffer_release(outputs[i]);
    for (size_t i = made + 1; i < num_outputs; i++) {
      tpuc_pjrt_buffer_destroy(api, out[i]);
    }
  }
  if (done_events[0] != NULL) tpuc_client_track(c, done_events[0], e->name);
done:
  if (in != in_stack) free(in);
  if (keep != keep_stack) free(keep);
  if (out != out_stack) free(out);
  return st;
}

tpuc_status* tpuc_execute_replicated(tpuc_executable* e,
                                     tpuc_buffer* const* args, size_t num_args,
                                     const bool* donate, tpuc_buffer** outputs,
                                     size_t num_outputs) {
  if (e == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "executable is NULL");
  size_t n = tpuc_executable_num_replicas(e);
  if (n < 2 || e->replica_devices == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "program %s is not compiled for several replicas",
                            e->name);
  if ((num_args > 0 && args == NULL) || (num_outputs > 0 && outputs == NULL))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "args or outputs is NULL");
  for (size_t r = 0; r < n; r++)
    TPUC_RETURN_IF_ERROR(tpuc_status_annotate(
        check_args(e, e->replica_devices[r], args + r * num_args, num_args,
                   num_outputs),
        "replica %zu", r));
  for (size_t i = 0; i < n * num_args; i++)
    TPUC_RETURN_IF_ERROR(tpuc_status_annotate(
        tpuc_buffer_check_value(args[i]), "replica %zu, argument %zu",
        i / (num_args ? num_args : 1), i % (num_args ? num_args : 1)));
  tpuc_client* c = e->client;
  const PJRT_Api* api = c->api;
  PJRT_Buffer** in = malloc(sizeof *in * (n * num_args + 1));
  PJRT_Buffer** out = calloc(n * num_outputs + 1, sizeof *out);
  PJRT_Buffer* const** arg_lists = malloc(sizeof *arg_lists * n);
  PJRT_Buffer*** out_lists = malloc(sizeof *out_lists * n);
  PJRT_Event** done = calloc(n, sizeof *done);
  int64_t* keep = malloc(sizeof *keep * (num_args + 1));
  tpuc_status* st = NULL;
  if (in == NULL || out == NULL || arg_lists == NULL || out_lists == NULL ||
      done == NULL || keep == NULL) {
    st = tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
    goto done;
  }
  for (size_t i = 0; i < n * num_args; i++) in[i] = args[i]->pjrt;
  for (size_t r = 0; r < n; r++) {
    arg_lists[r] = in + r * num_args;
    out_lists[r] = out + r * num_outputs;
  }
  /* The inputs given to an output, the same for every replica. */
  size_t num_keep = 0;
  for (size_t i = 0; i < num_args; i++)
    if (donate == NULL || !donate[i] || e->input_alias[i] < 0)
      keep[num_keep++] = (int64_t)i;
  PJRT_ExecuteOptions opts = {0};
  opts.struct_size = sizeof opts;
  opts.non_donatable_input_indices = keep;
  opts.num_non_donatable_input_indices = num_keep;
  PJRT_LoadedExecutable_Execute_Args a = {0};
  a.struct_size = sizeof a;
  a.executable = e->pjrt;
  a.options = &opts;
  a.argument_lists = (PJRT_Buffer* const* const*)arg_lists;
  a.num_devices = n;
  a.num_args = num_args;
  a.output_lists = out_lists;
  a.device_complete_events = done;
  a.execute_device = NULL;
  st = tpuc_pjrt_error(api, api->PJRT_LoadedExecutable_Execute(&a),
                       "executing program %s on %zu replicas", e->name, n);
  if (st != NULL) goto done;
  size_t made = 0;
  for (; made < n * num_outputs; made++) {
    size_t r = made / num_outputs, k = made % num_outputs;
    st = tpuc_buffer_wrap(c, out[made], e->replica_devices[r], &e->outputs[k],
                          &outputs[made]);
    if (st != NULL) break;
  }
  if (st != NULL) {
    for (size_t i = 0; i < made; i++) tpuc_buffer_release(outputs[i]);
    for (size_t i = made + 1; i < n * num_outputs; i++)
      tpuc_pjrt_buffer_destroy(api, out[i]);
  }
  for (size_t r = 0; r < n; r++)
    if (done[r] != NULL) tpuc_client_track(c, done[r], e->name);
done:
  free(in);
  free(out);
  free(arg_lists);
  free(out_lists);
  free(done);
  free(keep);
  return st;
}
