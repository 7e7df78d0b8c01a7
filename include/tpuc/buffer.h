/* Device buffers: immutable, reference-counted arrays on one device. */
#ifndef TPUC_BUFFER_H_
#define TPUC_BUFFER_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpuc/client.h"
#include "tpuc/dtype.h"
#include "tpuc/event.h"
#include "tpuc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most dimensions of a value: PyTorch's own limit for its iterators. */
#define TPUC_MAX_RANK 25

typedef struct tpuc_buffer tpuc_buffer;

/* Copies host memory to a new buffer on `device` (an addressable-device
 * index). `byte_strides` may be NULL for a dense row-major array; otherwise
 * one stride in bytes per dimension (any order, non-negative). The host
 * memory may be reused as soon as this returns. */
tpuc_status* tpuc_buffer_from_host(tpuc_client* client, int device,
                                   tpuc_dtype dtype, const int64_t* dims,
                                   int rank, const void* data,
                                   const int64_t* byte_strides,
                                   tpuc_buffer** out);

/* Creates a buffer of the given type whose value is an error (`code`,
 * `message`): every execution that consumes it fails asynchronously, its
 * outputs carry the error, and reading any of them reports it. This is how a
 * failure is propagated to work that depends on it. Needs a plugin with
 * asynchronous host-to-device transfers (PJRT C API 0.62+); UNIMPLEMENTED
 * otherwise. */
tpuc_status* tpuc_buffer_from_error(tpuc_client* client, int device,
                                    tpuc_dtype dtype, const int64_t* dims,
                                    int rank, tpuc_code code,
                                    const char* message, tpuc_buffer** out);

/* A buffer whose value is sent from the host later (PJRT's asynchronous
 * host-to-device transfer): the buffer exists at once and may be passed to
 * executions, which wait on the device for its value; reading it on the
 * host waits too. tpuc_transfer_fill sends the value (exactly the buffer's
 * byte size, dense row-major; the host memory may be reused when it
 * returns), tpuc_transfer_fail makes the value an error instead (as
 * tpuc_buffer_from_error). tpuc_transfer_free releases the handle; a
 * transfer freed before either fails its buffer (ABORTED). Needs PJRT C API
 * 0.62+; UNIMPLEMENTED otherwise. */
typedef struct tpuc_transfer tpuc_transfer;
tpuc_status* tpuc_transfer_create(tpuc_client* client, int device,
                                  tpuc_dtype dtype, const int64_t* dims,
                                  int rank, tpuc_transfer** transfer,
                                  tpuc_buffer** out);
tpuc_status* tpuc_transfer_fill(tpuc_transfer* transfer, const void* data,
                                size_t size);
tpuc_status* tpuc_transfer_fail(tpuc_transfer* transfer, tpuc_code code,
                                const char* message);
void tpuc_transfer_free(tpuc_transfer* transfer);

/* Copies the buffer to another device of its client (device to device where
 * the plugin can); the new buffer may not be ready yet. */
tpuc_status* tpuc_buffer_copy_to_device(tpuc_buffer* buffer, int device,
                                        tpuc_buffer** out);

/* Copies the buffer to dense row-major host memory and waits. `size` must
 * be exactly the buffer's byte size. */
tpuc_status* tpuc_buffer_to_host(tpuc_buffer* buffer, void* dst, size_t size);
/* Starts the copy; `dst` must stay valid until *done is ready. */
tpuc_status* tpuc_buffer_to_host_async(tpuc_buffer* buffer, void* dst,
                                       size_t size, tpuc_event** done);

/* How many device-to-host copies (either call above) the calling thread
 * has started. A graph capture compares it at its end with its start: a
 * value read on the host cannot be part of the program. */
uint64_t tpuc_buffer_host_reads(void);

/* Event that is ready when the buffer's value has been computed. */
tpuc_status* tpuc_buffer_ready_event(tpuc_buffer* buffer, tpuc_event** out);

tpuc_dtype tpuc_buffer_dtype(const tpuc_buffer* buffer);
int tpuc_buffer_rank(const tpuc_buffer* buffer);
const int64_t* tpuc_buffer_dims(const tpuc_buffer* buffer);
int64_t tpuc_buffer_num_elements(const tpuc_buffer* buffer);
size_t tpuc_buffer_byte_size(const tpuc_buffer* buffer);
int tpuc_buffer_device(const tpuc_buffer* buffer);
/* true once the buffer's storage was donated to an execution. */
bool tpuc_buffer_is_deleted(const tpuc_buffer* buffer);

void tpuc_buffer_retain(tpuc_buffer* buffer);
void tpuc_buffer_release(tpuc_buffer* buffer);
/* Current reference count (for liveness decisions of the fused mode). */
int tpuc_buffer_refs(const tpuc_buffer* buffer);

/* ---- Buffers valued later ----
 * A promised buffer has a type but no value yet: whoever created it gives it
 * one later (tpuc_buffer_fulfill) or reports why it has none
 * (tpuc_buffer_break). Until then, reading it or executing with it fails
 * with FAILED_PRECONDITION; after a break, with the given error. Which
 * computation will supply the value is the business of the layer above
 * (the runtime's lazy values, tpuc/lazy.h). */
tpuc_status* tpuc_buffer_promise(tpuc_client* client, int device,
                                 tpuc_dtype dtype, const int64_t* dims,
                                 int rank, tpuc_buffer** out);
/* Gives promised `buffer` the value of `value` (same type; takes over
 * value's device memory and consumes the reference). */
void tpuc_buffer_fulfill(tpuc_buffer* buffer, tpuc_buffer* value);
/* Marks promised `buffer` as failed: its uses report `code` / `message`. */
void tpuc_buffer_break(tpuc_buffer* buffer, tpuc_code code,
                       const char* message);
/* NULL when the buffer holds a value; else why it cannot be used yet (not
 * fulfilled, broken, NULL). */
tpuc_status* tpuc_buffer_check_value(const tpuc_buffer* buffer);

/* Bytes every buffer carries for the layer above (zeroed at creation,
 * freed with the buffer, never read here), so that layer can keep its own
 * per-value state without a side table. */
#define TPUC_BUFFER_EXT_BYTES 32
void* tpuc_buffer_ext(tpuc_buffer* buffer);

#ifdef __cplusplus
}
#endif
#endif /* TPUC_BUFFER_H_ */
