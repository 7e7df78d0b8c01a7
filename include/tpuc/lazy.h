/* Lazy values (fused eager, shared/DESIGN.md "Deferred op graph"): buffers
 * whose value a recorded segment will compute. The runtime layer owns
 * them; to the PJRT layer they are promised buffers (tpuc/buffer.h).
 *
 * A lazy value has a type at once. Anything that needs its value (a read,
 * an execution that takes it) first calls tpuc_value_ensure, which runs
 * what computes it. */
#ifndef TPUC_LAZY_H_
#define TPUC_LAZY_H_

#include <stddef.h>
#include <stdint.h>

#include "tpuc/buffer.h"
#include "tpuc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A new lazy value that `owner` (a recorded segment) will compute; `tag` is
 * the producer's position in it. */
tpuc_status* tpuc_lazy_create(tpuc_client* client, int device, tpuc_dtype dtype,
                              const int64_t* dims, int rank, void* owner,
                              int64_t tag, tpuc_buffer** out);
/* The segment that will compute the value (NULL once it has one, and for
 * any buffer that was never lazy) and the producer's tag in it. */
void* tpuc_lazy_owner(const tpuc_buffer* buffer);
int64_t tpuc_lazy_tag(const tpuc_buffer* buffer);
void tpuc_lazy_set_tag(tpuc_buffer* buffer, int64_t tag);
/* Hands a lazy value to another owner (the fused mode's background thread,
 * once its segment is submitted there), with a new tag. */
void tpuc_lazy_set_owner(tpuc_buffer* buffer, void* owner, int64_t tag);
/* Gives the lazy value the value of `value` (consumed), or marks it failed:
 * its uses then report `code` / `message`. Either way it has no owner. */
void tpuc_lazy_fill(tpuc_buffer* buffer, tpuc_buffer* value);
void tpuc_lazy_fail(tpuc_buffer* buffer, tpuc_code code, const char* message);
/* References held by submitted, not yet retired fused-mode work (on any
 * buffer, lazy or not). They are part of tpuc_buffer_refs; liveness and
 * donation decisions subtract them, so those decisions do not depend on
 * how far the background work got. */
int tpuc_lazy_holds(const tpuc_buffer* buffer);
void tpuc_lazy_add_holds(tpuc_buffer* buffer, int delta);

/* Computes the value of a lazy buffer now (nothing for others); the error
 * of a failed computation, or of a buffer with no value, otherwise. */
tpuc_status* tpuc_value_ensure(tpuc_buffer* buffer);
/* tpuc_value_ensure on each of `n` values (NULL entries skipped); the first
 * error names the value's position. */
tpuc_status* tpuc_values_ensure(tpuc_buffer* const* values, size_t n);
/* Copies a value the runtime produced (an op's result: lazy or not) to
 * dense row-major host memory: tpuc_value_ensure, then
 * tpuc_buffer_to_host. */
tpuc_status* tpuc_value_to_host(tpuc_buffer* value, void* dst, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* TPUC_LAZY_H_ */
