/* Storages and views: PyTorch's mutable, shared memory over immutable PJRT
 * buffers (shared/DESIGN.md, "Storage and views").
 *
 * A storage is a reference-counted byte array of fixed size on one device.
 * Its current value is a flat PJRT buffer of nbytes bytes (or none yet,
 * which reads as zeros): u8[nbytes], or the element type of the tensor
 * that last wrote it all (f32[nbytes / 4]). Writing computes a new value and swaps it in, so every
 * view of the storage sees the write. A view is (storage, dtype, sizes,
 * strides, offset) in elements, exactly as a PyTorch tensor describes
 * itself. */
#ifndef TPUC_STORAGE_H_
#define TPUC_STORAGE_H_

#include <stddef.h>
#include <stdint.h>

#include "tpuc/buffer.h"
#include "tpuc/client.h"
#include "tpuc/dtype.h"
#include "tpuc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tpuc_storage tpuc_storage;

tpuc_status* tpuc_storage_create(tpuc_client* client, int device, size_t nbytes,
                                 tpuc_storage** out);
void tpuc_storage_retain(tpuc_storage* storage);
void tpuc_storage_release(tpuc_storage* storage);

size_t tpuc_storage_nbytes(const tpuc_storage* storage);
int tpuc_storage_device(const tpuc_storage* storage);
tpuc_client* tpuc_storage_client(const tpuc_storage* storage);

/* The current value, a flat buffer of nbytes (see
 * tpuc_storage_value_dtype) the caller releases; a storage never written
 * gets zeros here, filled on the device from 1 MiB up. */
tpuc_status* tpuc_storage_value(tpuc_storage* storage, tpuc_buffer** out);
/* The element type the current value is kept in (for a storage never
 * written: the type of the zeros tpuc_storage_value will give it, f32 when
 * its size is a multiple of 4 bytes, else u8). */
tpuc_dtype tpuc_storage_value_dtype(tpuc_storage* storage);
/* True when the storage was never written (it reads as zeros). */
bool tpuc_storage_is_unwritten(tpuc_storage* storage);
/* Replaces the value with `value` (a flat array of any element type,
 * exactly nbytes long, on the storage's device; a new reference is
 * taken). */
tpuc_status* tpuc_storage_set_value(tpuc_storage* storage, tpuc_buffer* value);

/* Gives a never-written storage `value` (as tpuc_storage_set_value), unless
 * something was written to it meanwhile; then the call changes nothing. */
tpuc_status* tpuc_storage_set_zeros(tpuc_storage* storage, tpuc_buffer* value);
/* The program that computes a never-written storage's zeros: StableHLO
 * text of a @main without arguments that returns `count` elements of
 * `dtype` (see tpuc_storage_value_dtype), written to `text`. Returns its
 * length, 0 for an empty storage or when it does not fit `cap`. */
size_t tpuc_storage_zeros_program(const tpuc_storage* storage, char* text,
                                  size_t cap, tpuc_dtype* dtype,
                                  int64_t* count);

/* Byte-range reads and writes; a write of the whole storage uploads
 * directly, a partial one reads, patches and uploads the whole value. */
tpuc_status* tpuc_storage_read(tpuc_storage* storage, size_t offset,
                               size_t size, void* dst);
tpuc_status* tpuc_storage_write(tpuc_storage* storage, size_t offset,
                                size_t size, const void* src);
/* Grows or shrinks the storage, keeping the common prefix of its bytes. */
tpuc_status* tpuc_storage_resize(tpuc_storage* storage, size_t nbytes);

/* Bytes held by live storages of `device`: now and at the peak (since the
 * last reset). */
tpuc_status* tpuc_storage_bytes(tpuc_client* client, int device,
                                int64_t* in_use, int64_t* peak);
tpuc_status* tpuc_storage_reset_peak(tpuc_client* client, int device);

typedef struct tpuc_view {
  tpuc_storage* storage;
  tpuc_dtype dtype;
  int rank;
  int64_t sizes[TPUC_MAX_RANK];
  int64_t strides[TPUC_MAX_RANK]; /* in elements, may be 0 (broadcast) */
  int64_t offset;                 /* in elements */
} tpuc_view;

/* Checks that the view lies inside its storage. */
tpuc_status* tpuc_view_check(const tpuc_view* view);
/* Reads the view's elements into dense row-major host memory of
 * `size` bytes (= elements * dtype size). */
tpuc_status* tpuc_view_to_host(const tpuc_view* view, void* dst, size_t size);
/* Writes dense row-major host data into the view's elements. Where views
 * overlap (strides of 0), the last element written wins, as on the CPU. */
tpuc_status* tpuc_view_from_host(const tpuc_view* view, const void* src,
                                 size_t size);
/* dst <- src element by element; same dtype and sizes; the two may share a
 * storage (the source is read completely first). */
tpuc_status* tpuc_view_copy(const tpuc_view* dst, const tpuc_view* src);

#ifdef __cplusplus
}
#endif
#endif /* TPUC_STORAGE_H_ */
