/* tpuc_event over PJRT_Event. */
#include <stdlib.h>

#include "pjrt/internal.h"

tpuc_status* tpuc_event_wrap(const PJRT_Api* api, PJRT_Event* ev,
                             tpuc_event** out) {
  tpuc_event* e = malloc(sizeof *e);
  if (e == NULL) {
    tpuc_pjrt_event_destroy(api, ev);
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  }
  e->api = api;
  e->pjrt = ev;
  *out = e;
  return NULL;
}

tpuc_status* tpuc_event_await(tpuc_event* e) {
  if (e == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "event is NULL");
  PJRT_Event_Await_Args a = {0};
  a.struct_size = sizeof a;
  a.event = e->pjrt;
  return tpuc_pjrt_error(e->api, e->api->PJRT_Event_Await(&a), NULL);
}

tpuc_status* tpuc_event_is_ready(tpuc_event* e, bool* ready) {
  if (e == NULL || ready == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "event or ready is NULL");
  PJRT_Event_IsReady_Args a = {0};
  a.struct_size = sizeof a;
  a.event = e->pjrt;
  TPUC_RETURN_IF_ERROR(
      tpuc_pjrt_error(e->api, e->api->PJRT_Event_IsReady(&a), NULL));
  *ready = a.is_ready;
  return NULL;
}

typedef struct {
  const PJRT_Api* api;
  tpuc_event_callback cb;
  void* user;
} on_ready_ctx;

static void on_ready_trampoline(PJRT_Error* error, void* arg) {
  on_ready_ctx* ctx = arg;
  /* The callback owns `error`: convert it (which destroys it). */
  tpuc_status* st = tpuc_pjrt_error(ctx->api, error, NULL);
  tpuc_event_callback cb = ctx->cb;
  void* user = ctx->user;
  free(ctx);
  cb(st, user);
}

tpuc_status* tpuc_event_on_ready(tpuc_event* e, tpuc_event_callback callback,
                                 void* user_data) {
  if (e == NULL || callback == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "event or callback is NULL");
  on_ready_ctx* ctx = malloc(sizeof *ctx);
  if (ctx == NULL)
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  ctx->api = e->api;
  ctx->cb = callback;
  ctx->user = user_data;
  PJRT_Event_OnReady_Args a = {0};
  a.struct_size = sizeof a;
  a.event = e->pjrt;
  a.callback = on_ready_trampoline;
  a.user_arg = ctx;
  PJRT_Error* err = e->api->PJRT_Event_OnReady(&a);
  if (err != NULL) {
    free(ctx);
    return tpuc_pjrt_error(e->api, err, "registering an event callback");
  }
  return NULL;
}

void tpuc_event_destroy(tpuc_event* e) {
  if (e == NULL) return;
  tpuc_pjrt_event_destroy(e->api, e->pjrt);
  free(e);
}
