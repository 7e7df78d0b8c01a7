/* Lazy values: the runtime's per-buffer state of fused eager (who computes
 * the value, the producer's tag, references held by submitted work), kept
 * in the bytes each buffer carries for this layer. */
#include "tpuc/lazy.h"

#include <stdatomic.h>

#include "runtime/fused_internal.h"

typedef struct lazy_state {
  void* _Atomic owner;
  int64_t tag;
  atomic_int holds;
} lazy_state;

_Static_assert(sizeof(lazy_state) <= TPUC_BUFFER_EXT_BYTES,
               "a buffer's extension bytes hold the lazy state");

static lazy_state* state(const tpuc_buffer* b) {
  return (lazy_state*)tpuc_buffer_ext((tpuc_buffer*)b);
}

tpuc_status* tpuc_lazy_create(tpuc_client* client, int device, tpuc_dtype dtype,
                              const int64_t* dims, int rank, void* owner,
                              int64_t tag, tpuc_buffer** out) {
  TPUC_RETURN_IF_ERROR(
      tpuc_buffer_promise(client, device, dtype, dims, rank, out));
  lazy_state* l = state(*out);
  l->tag = tag;
  atomic_init(&l->holds, 0);
  atomic_init(&l->owner, owner);
  return NULL;
}

void* tpuc_lazy_owner(const tpuc_buffer* b) {
  return b ? atomic_load(&state(b)->owner) : NULL;
}

int64_t tpuc_lazy_tag(const tpuc_buffer* b) { return b ? state(b)->tag : -1; }

void tpuc_lazy_set_tag(tpuc_buffer* b, int64_t tag) {
  if (b) state(b)->tag = tag;
}

void tpuc_lazy_set_owner(tpuc_buffer* b, void* owner, int64_t tag) {
  if (b == NULL) return;
  state(b)->tag = tag; /* before the owner: a reader of the owner sees it */
  atomic_store(&state(b)->owner, owner);
}

void tpuc_lazy_fill(tpuc_buffer* b, tpuc_buffer* value) {
  tpuc_buffer_fulfill(b, value);
  atomic_store(&state(b)->owner, NULL); /* after the value: see ensure */
}

void tpuc_lazy_fail(tpuc_buffer* b, tpuc_code code, const char* message) {
  tpuc_buffer_break(b, code, message ? message : "the fused segment failed");
  atomic_store(&state(b)->owner, NULL);
}

int tpuc_lazy_holds(const tpuc_buffer* b) {
  return b ? atomic_load(&state(b)->holds) : 0;
}

void tpuc_lazy_add_holds(tpuc_buffer* b, int delta) {
  if (b) atomic_fetch_add(&state(b)->holds, delta);
}

tpuc_status* tpuc_value_ensure(tpuc_buffer* b) {
  if (b == NULL) return NULL;
  void* owner = atomic_load(&state(b)->owner);
  if (owner != NULL) {
    TPUC_RETURN_IF_ERROR(fz_materialize(b, owner));
    if (atomic_load(&state(b)->owner) != NULL)
      return tpuc_status_make(TPUC_INTERNAL, "a lazy value was not computed");
  }
  return tpuc_buffer_check_value(b);
}

tpuc_status* tpuc_value_to_host(tpuc_buffer* v, void* dst, size_t size) {
  TPUC_RETURN_IF_ERROR(tpuc_value_ensure(v));
  return tpuc_buffer_to_host(v, dst, size);
}

tpuc_status* tpuc_values_ensure(tpuc_buffer* const* v, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (v[i] != NULL)
      TPUC_RETURN_IF_ERROR(
          tpuc_status_annotate(tpuc_value_ensure(v[i]), "argument %zu", i));
  return NULL;
}
