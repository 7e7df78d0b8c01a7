/* PJRT client: creation, devices, memory statistics, synchronization. */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt/internal.h"

static tpuc_status* oom(void) {
  return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
}

static tpuc_status* create_pjrt_client(tpuc_client* c,
                                       const tpuc_client_options* o) {
  const PJRT_Api* api = c->api;
  PJRT_NamedValue opts[1];
  size_t nopts = 0;
  memset(opts, 0, sizeof opts);
  int cpu = c->plugin->info.kind == TPUC_PLUGIN_KIND_CPU ||
            c->plugin->info.kind == TPUC_PLUGIN_KIND_EXPLICIT;
  if (o != NULL && o->cpu_device_count > 0 && cpu) {
    opts[0].struct_size = sizeof opts[0];
    opts[0].name = "cpu_device_count";
    opts[0].name_size = strlen(opts[0].name);
    opts[0].type = PJRT_NamedValue_kInt64;
    opts[0].int64_value = o->cpu_device_count;
    opts[0].value_size = 1;
    nopts = 1;
  }
  PJRT_Client_Create_Args args = {0};
  args.struct_size = sizeof args;
  args.create_options = nopts ? opts : NULL;
  args.num_options = nopts;
  PJRT_Error* err = api->PJRT_Client_Create(&args);
  if (err != NULL && nopts > 0 &&
      c->plugin->info.kind == TPUC_PLUGIN_KIND_EXPLICIT) {
    /* An explicitly named plugin may not be a CPU one: retry plainly. */
    tpuc_status_free(tpuc_pjrt_error(api, err, NULL));
    memset(&args, 0, sizeof args);
    args.struct_size = sizeof args;
    err = api->PJRT_Client_Create(&args);
  }
  if (err != NULL)
    return tpuc_pjrt_error(api, err, "creating a PJRT client with plugin %s",
                           c->plugin->info.path);
  c->pjrt = args.client;
  return NULL;
}

static tpuc_status* read_platform(tpuc_client* c) {
  const PJRT_Api* api = c->api;
  PJRT_Client_PlatformName_Args na = {0};
  na.struct_size = sizeof na;
  na.client = c->pjrt;
  TPUC_RETURN_IF_ERROR(tpuc_pjrt_error(api, api->PJRT_Client_PlatformName(&na),
                                       "reading the platform name"));
  c->platform_name = strndup(na.platform_name, na.platform_name_size);
  PJRT_Client_PlatformVersion_Args va = {0};
  va.struct_size = sizeof va;
  va.client = c->pjrt;
  TPUC_RETURN_IF_ERROR(tpuc_pjrt_error(api,
                                       api->PJRT_Client_PlatformVersion(&va),
                                       "reading the platform version"));
  c->platform_version = strndup(va.platform_version, va.platform_version_size);
  if (c->platform_name == NULL || c->platform_version == NULL) return oom();
  return NULL;
}

static tpuc_status* read_devices(tpuc_client* c) {
  const PJRT_Api* api = c->api;
  PJRT_Client_AddressableDevices_Args da = {0};
  da.struct_size = sizeof da;
  da.client = c->pjrt;
  TPUC_RETURN_IF_ERROR(tpuc_pjrt_error(api,
                                       api->PJRT_Client_AddressableDevices(&da),
                                       "listing addressable devices"));
  size_t n = da.num_addressable_devices;
  if (n == 0)
    return tpuc_status_make(TPUC_UNAVAILABLE,
                            "PJRT plugin %s reports no addressable device",
                            c->plugin->info.path);
  c->devices = calloc(n, sizeof *c->devices);
  c->device_kinds = calloc(n, sizeof *c->device_kinds);
  c->device_descriptions = calloc(n, sizeof *c->device_descriptions);
  c->device_ids = calloc(n, sizeof *c->device_ids);
  c->device_hw_ids = calloc(n, sizeof *c->device_hw_ids);
  c->storage_bytes = calloc(n, sizeof *c->storage_bytes);
  c->storage_peak = calloc(n, sizeof *c->storage_peak);
  if (!c->devices || !c->device_kinds || !c->device_descriptions ||
      !c->device_ids || !c->device_hw_ids || !c->storage_bytes ||
      !c->storage_peak)
    return oom();
  c->num_devices = n;
  for (size_t i = 0; i < n; i++) {
    c->devices[i] = da.addressable_devices[i];
    PJRT_Device_GetDescription_Args ga = {0};
    ga.struct_size = sizeof ga;
    ga.device = c->devices[i];
    TPUC_RETURN_IF_ERROR(tpuc_pjrt_error(
        api, api->PJRT_Device_GetDescription(&ga), "describing device %zu", i));
    PJRT_DeviceDescription_Id_Args ia = {0};
    ia.struct_size = sizeof ia;
    ia.device_description = ga.device_description;
    TPUC_RETURN_IF_ERROR(tpuc_pjrt_error(
        api, api->PJRT_DeviceDescription_Id(&ia), "reading device %zu id", i));
    c->device_ids[i] = ia.id;
    PJRT_DeviceDescription_Kind_Args ka = {0};
    ka.struct_size = sizeof ka;
    ka.device_description = ga.device_description;
    TPUC_RETURN_IF_ERROR(tpuc_pjrt_error(api,
                                         api->PJRT_DeviceDescription_Kind(&ka),
                                         "reading device %zu kind", i));
    c->device_kinds[i] = strndup(ka.device_kind, ka.device_kind_size);
    if (TPUC_PJRT_HAS(api, PJRT_DeviceDescription_ToString)) {
      PJRT_DeviceDescription_ToString_Args ta = {0};
      ta.struct_size = sizeof ta;
      ta.device_description = ga.device_description;
      PJRT_Error* e = api->PJRT_DeviceDescription_ToString(&ta);
      if (e == NULL)
        c->device_descriptions[i] = strndup(ta.to_string, ta.to_string_size);
      else
        tpuc_status_free(tpuc_pjrt_error(api, e, NULL));
    }
    if (c->device_descriptions[i] == NULL)
      c->device_descriptions[i] =
          strdup(c->device_kinds[i] ? c->device_kinds[i] : "");
    c->device_hw_ids[i] = -1;
    if (TPUC_PJRT_HAS(api, PJRT_Device_LocalHardwareId)) {
      PJRT_Device_LocalHardwareId_Args ha = {0};
      ha.struct_size = sizeof ha;
      ha.device = c->devices[i];
      PJRT_Error* e = api->PJRT_Device_LocalHardwareId(&ha);
      if (e == NULL)
        c->device_hw_ids[i] = ha.local_hardware_id;
      else
        tpuc_status_free(tpuc_pjrt_error(api, e, NULL));
    }
    if (c->device_kinds[i] == NULL || c->device_descriptions[i] == NULL)
      return oom();
  }
  return NULL;
}

tpuc_status* tpuc_pjrt_client_create(tpuc_plugin* plugin,
                                     const tpuc_client_options* options,
                                     tpuc_client** out) {
  if (plugin == NULL || out == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "plugin or out is NULL");
  *out = NULL;
  if (options != NULL && options->cpu_device_count < 0)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "cpu_device_count must be >= 0, got %d",
                            options->cpu_device_count);
  tpuc_client* c = calloc(1, sizeof *c);
  if (c == NULL) return oom();
  c->plugin = plugin;
  c->api = plugin->api;
  pthread_mutex_init(&c->mu, NULL);
  tpuc_status* st = create_pjrt_client(c, options);
  if (st == NULL) st = read_platform(c);
  if (st == NULL) st = read_devices(c);
  if (st != NULL) {
    tpuc_client_destroy(c);
    return st;
  }
  *out = c;
  return NULL;
}

tpuc_status* tpuc_client_on_destroy(tpuc_client* c, tpuc_client_destroy_fn fn,
                                    void* user) {
  if (c == NULL || fn == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "client or fn is NULL");
  tpuc_status* st = NULL;
  pthread_mutex_lock(&c->mu);
  bool known = false;
  for (size_t i = 0; i < c->num_on_destroy; i++)
    known |= c->on_destroy[i].fn == fn && c->on_destroy[i].user == user;
  if (!known) {
    if (c->num_on_destroy == sizeof c->on_destroy / sizeof c->on_destroy[0]) {
      st = tpuc_status_make(TPUC_RESOURCE_EXHAUSTED,
                            "too many client destroy callbacks");
    } else {
      c->on_destroy[c->num_on_destroy].fn = fn;
      c->on_destroy[c->num_on_destroy].user = user;
      c->num_on_destroy++;
    }
  }
  pthread_mutex_unlock(&c->mu);
  return st;
}

void tpuc_client_destroy(tpuc_client* c) {
  if (c == NULL) return;
  if (c->pjrt != NULL) tpuc_status_free(tpuc_client_synchronize(c));
  for (size_t i = c->num_on_destroy; i > 0; i--)
    c->on_destroy[i - 1].fn(c, c->on_destroy[i - 1].user);
  if (c->pjrt != NULL) {
    PJRT_Client_Destroy_Args args = {0};
    args.struct_size = sizeof args;
    args.client = c->pjrt;
    tpuc_status_free(
        tpuc_pjrt_error(c->api, c->api->PJRT_Client_Destroy(&args), NULL));
  }
  for (size_t i = 0; i < c->num_devices; i++) {
    free(c->device_kinds[i]);
    free(c->device_descriptions[i]);
  }
  free(c->devices);
  free(c->device_kinds);
  free(c->device_descriptions);
  free(c->device_ids);
  free(c->device_hw_ids);
  free(c->storage_bytes);
  free(c->storage_peak);
  free(c->platform_name);
  free(c->platform_version);
  free(c->pending);
  tpuc_status_free(c->async_error);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

tpuc_status* tpuc_client_platform(tpuc_client* c, const char** name,
                                  const char** version) {
  if (c == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "client is NULL");
  if (name) *name = c->platform_name;
  if (version) *version = c->platform_version;
  return NULL;
}

tpuc_status* tpuc_client_plugin(tpuc_client* c, tpuc_plugin** plugin) {
  if (c == NULL || plugin == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "client or plugin is NULL");
  *plugin = c->plugin;
  return NULL;
}

tpuc_status* tpuc_client_device_count(tpuc_client* c, int* count) {
  if (c == NULL || count == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "client or count is NULL");
  *count = (int)c->num_devices;
  return NULL;
}

tpuc_status* tpuc_client_check_device(tpuc_client* c, int device) {
  if (c == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "client is NULL");
  if (device < 0 || (size_t)device >= c->num_devices)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "device index %d out of range: %s has %zu "
                            "addressable device(s)",
                            device, c->platform_name, c->num_devices);
  return NULL;
}

tpuc_status* tpuc_client_device_info(tpuc_client* c, int device,
                                     tpuc_device_info* out) {
  TPUC_RETURN_IF_ERROR(tpuc_client_check_device(c, device));
  if (out == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "out is NULL");
  out->index = device;
  out->id = c->device_ids[device];
  out->local_hardware_id = c->device_hw_ids[device];
  out->kind = c->device_kinds[device];
  out->description = c->device_descriptions[device];
  return NULL;
}

tpuc_status* tpuc_client_memory_stats(tpuc_client* c, int device,
                                      tpuc_memory_stats* out) {
  TPUC_RETURN_IF_ERROR(tpuc_client_check_device(c, device));
  if (out == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "out is NULL");
  memset(out, 0, sizeof *out);
  out->bytes_limit = -1;
  out->num_allocs = -1;
  if (!TPUC_PJRT_HAS(c->api, PJRT_Device_MemoryStats)) return NULL;
  PJRT_Device_MemoryStats_Args a = {0};
  a.struct_size = sizeof a;
  a.device = c->devices[device];
  PJRT_Error* e = c->api->PJRT_Device_MemoryStats(&a);
  if (e != NULL) {
    /* Plugins without statistics (the CPU one) answer UNIMPLEMENTED. */
    tpuc_status* st = tpuc_pjrt_error(c->api, e, "memory statistics");
    if (tpuc_status_code(st) == TPUC_UNIMPLEMENTED) {
      tpuc_status_free(st);
      return NULL;
    }
    return st;
  }
  out->available = true;
  out->bytes_in_use = a.bytes_in_use;
  out->peak_bytes_in_use =
      a.peak_bytes_in_use_is_set ? a.peak_bytes_in_use : a.bytes_in_use;
  out->bytes_limit = a.bytes_limit_is_set ? a.bytes_limit : -1;
  out->num_allocs = a.num_allocs_is_set ? a.num_allocs : -1;
  return NULL;
}

/* ------------------------- asynchronous errors ------------------------- */

/* Takes the finished front entry; called with c->mu held. */
static void retire_front(tpuc_client* c, PJRT_Error* err) {
  tpuc_pending* p = &c->pending[c->pending_head];
  if (err != NULL) {
    tpuc_status* st = tpuc_pjrt_error(c->api, err,
                                      "asynchronous execution of program %s "
                                      "failed",
                                      p->program);
    if (c->async_error == NULL)
      c->async_error = st;
    else
      tpuc_status_free(st);
  }
  tpuc_pjrt_event_destroy(c->api, p->event);
  c->pending_head = (c->pending_head + 1) % c->pending_cap;
  c->pending_count--;
  c->retired++;
}

/* Retires finished executions at the front without blocking. */
static void reap_ready(tpuc_client* c) {
  while (c->pending_count > 0) {
    tpuc_pending* p = &c->pending[c->pending_head];
    PJRT_Event_IsReady_Args r = {0};
    r.struct_size = sizeof r;
    r.event = p->event;
    PJRT_Error* e = c->api->PJRT_Event_IsReady(&r);
    if (e != NULL) {
      retire_front(c, e);
      continue;
    }
    if (!r.is_ready) break;
    PJRT_Event_Error_Args ea = {0};
    ea.struct_size = sizeof ea;
    ea.event = p->event;
    retire_front(c, c->api->PJRT_Event_Error(&ea));
  }
}

#define TPUC_MAX_PENDING 4096

void tpuc_client_track(tpuc_client* c, PJRT_Event* done, const char* program) {
  pthread_mutex_lock(&c->mu);
  reap_ready(c);
  if (c->pending_count == TPUC_MAX_PENDING) {
    /* Back-pressure: wait for the oldest instead of growing without bound. */
    PJRT_Event_Await_Args a = {0};
    a.struct_size = sizeof a;
    a.event = c->pending[c->pending_head].event;
    retire_front(c, c->api->PJRT_Event_Await(&a));
  }
  if (c->pending_count == c->pending_cap) {
    size_t cap = c->pending_cap ? c->pending_cap * 2 : 64;
    tpuc_pending* np = malloc(cap * sizeof *np);
    if (np == NULL) {
      /* Cannot track: wait for this one now so no error is lost. */
      PJRT_Event_Await_Args a = {0};
      a.struct_size = sizeof a;
      a.event = done;
      PJRT_Error* e = c->api->PJRT_Event_Await(&a);
      if (e != NULL && c->async_error == NULL)
        c->async_error = tpuc_pjrt_error(c->api, e, "program %s", program);
      else if (e != NULL)
        tpuc_status_free(tpuc_pjrt_error(c->api, e, NULL));
      tpuc_pjrt_event_destroy(c->api, done);
      c->issued++;
      c->retired++;
      pthread_mutex_unlock(&c->mu);
      return;
    }
    for (size_t i = 0; i < c->pending_count; i++)
      np[i] = c->pending[(c->pending_head + i) % c->pending_cap];
    free(c->pending);
    c->pending = np;
    c->pending_cap = cap;
    c->pending_head = 0;
  }
  tpuc_pending* slot =
      &c->pending[(c->pending_head + c->pending_count) % c->pending_cap];
  slot->event = done;
  snprintf(slot->program, sizeof slot->program, "%s", program);
  c->pending_count++;
  c->issued++;
  pthread_mutex_unlock(&c->mu);
}

tpuc_status* tpuc_client_mark(tpuc_client* c, uint64_t* mark) {
  if (c == NULL || mark == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "NULL argument");
  pthread_mutex_lock(&c->mu);
  *mark = c->issued;
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

tpuc_status* tpuc_client_mark_done(tpuc_client* c, uint64_t mark, bool* done) {
  if (c == NULL || done == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "NULL argument");
  pthread_mutex_lock(&c->mu);
  reap_ready(c);
  *done = c->retired >= mark;
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

tpuc_status* tpuc_client_synchronize(tpuc_client* c) {
  if (c == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "client is NULL");
  pthread_mutex_lock(&c->mu);
  while (c->pending_count > 0) {
    PJRT_Event_Await_Args a = {0};
    a.struct_size = sizeof a;
    a.event = c->pending[c->pending_head].event;
    retire_front(c, c->api->PJRT_Event_Await(&a));
  }
  tpuc_status* st = c->async_error;
  c->async_error = NULL;
  pthread_mutex_unlock(&c->mu);
  return st;
}
