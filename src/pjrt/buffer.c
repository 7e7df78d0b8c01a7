/* Device buffers: host <-> device transfers and reference counting. */
#include <stdlib.h>
#include <string.h>

#include "pjrt/internal.h"

PJRT_Buffer_Type tpuc_pjrt_buffer_type(tpuc_dtype d) {
  switch (d) {
    case TPUC_DTYPE_PRED:
      return PJRT_Buffer_Type_PRED;
    case TPUC_DTYPE_S8:
      return PJRT_Buffer_Type_S8;
    case TPUC_DTYPE_S16:
      return PJRT_Buffer_Type_S16;
    case TPUC_DTYPE_S32:
      return PJRT_Buffer_Type_S32;
    case TPUC_DTYPE_S64:
      return PJRT_Buffer_Type_S64;
    case TPUC_DTYPE_U8:
      return PJRT_Buffer_Type_U8;
    case TPUC_DTYPE_U16:
      return PJRT_Buffer_Type_U16;
    case TPUC_DTYPE_U32:
      return PJRT_Buffer_Type_U32;
    case TPUC_DTYPE_U64:
      return PJRT_Buffer_Type_U64;
    case TPUC_DTYPE_F16:
      return PJRT_Buffer_Type_F16;
    case TPUC_DTYPE_BF16:
      return PJRT_Buffer_Type_BF16;
    case TPUC_DTYPE_F32:
      return PJRT_Buffer_Type_F32;
    case TPUC_DTYPE_F64:
      return PJRT_Buffer_Type_F64;
    case TPUC_DTYPE_C64:
      return PJRT_Buffer_Type_C64;
    case TPUC_DTYPE_C128:
      return PJRT_Buffer_Type_C128;
    case TPUC_DTYPE_F8E5M2:
      return PJRT_Buffer_Type_F8E5M2;
    case TPUC_DTYPE_F8E4M3FN:
      return PJRT_Buffer_Type_F8E4M3FN;
    case TPUC_DTYPE_F8E5M2FNUZ:
      return PJRT_Buffer_Type_F8E5M2FNUZ;
    case TPUC_DTYPE_F8E4M3FNUZ:
      return PJRT_Buffer_Type_F8E4M3FNUZ;
    default:
      return PJRT_Buffer_Type_INVALID;
  }
}

/* Element count of a shape; -1 on overflow. */
static int64_t shape_elements(const int64_t* dims, int rank) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] != 0 && n > INT64_MAX / dims[i]) return -1;
    n *= dims[i];
  }
  return n;
}

/* Checks what every buffer constructor takes: client, out, device, dtype,
 * shape. Sets *out to NULL and *elements to the element count. */
static tpuc_status* check_new_buffer(tpuc_client* client, int device,
                                     tpuc_dtype dtype, const int64_t* dims,
                                     int rank, tpuc_buffer** out,
                                     int64_t* elements) {
  if (client == NULL || out == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "client or out is NULL");
  *out = NULL;
  TPUC_RETURN_IF_ERROR(tpuc_client_check_device(client, device));
  if (!tpuc_dtype_is_valid(dtype))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "invalid dtype %d",
                            (int)dtype);
  if (rank < 0 || rank > TPUC_MAX_RANK)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "rank %d out of range [0, %d]", rank,
                            TPUC_MAX_RANK);
  if (rank > 0 && dims == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "dims is NULL for rank %d",
                            rank);
  for (int i = 0; i < rank; i++)
    if (dims[i] < 0)
      return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                              "dimension %d is negative (%lld)", i,
                              (long long)dims[i]);
  int64_t n = shape_elements(dims, rank);
  if (n < 0 || (uint64_t)n > SIZE_MAX / tpuc_dtype_size(dtype))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "shape is too large (element count overflows)");
  *elements = n;
  return NULL;
}

tpuc_status* tpuc_buffer_wrap(tpuc_client* client, PJRT_Buffer* pjrt,
                              int device, const tpuc_value_type* type,
                              tpuc_buffer** out) {
  tpuc_buffer* b = calloc(1, sizeof *b);
  if (b == NULL) {
    tpuc_pjrt_buffer_destroy(client->api, pjrt);
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  }
  atomic_init(&b->refs, 1);
  b->client = client;
  b->pjrt = pjrt;
  b->device = device;
  b->dtype = type->dtype;
  b->rank = type->rank;
  memcpy(b->dims, type->dims, sizeof(int64_t) * (size_t)type->rank);
  *out = b;
  return NULL;
}

tpuc_status* tpuc_buffer_from_host(tpuc_client* client, int device,
                                   tpuc_dtype dtype, const int64_t* dims,
                                   int rank, const void* data,
                                   const int64_t* byte_strides,
                                   tpuc_buffer** out) {
  int64_t n = 0;
  TPUC_RETURN_IF_ERROR(
      check_new_buffer(client, device, dtype, dims, rank, out, &n));
  for (int i = 0; byte_strides != NULL && i < rank; i++)
    if (byte_strides[i] < 0)
      return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                              "byte stride %d is negative (%lld)", i,
                              (long long)byte_strides[i]);
  if (n > 0 && data == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "data is NULL for a non-empty array");
  static const char kZero[16] = {0};
  const PJRT_Api* api = client->api;
  PJRT_Client_BufferFromHostBuffer_Args a = {0};
  a.struct_size = sizeof a;
  a.client = client->pjrt;
  a.data = data ? data : kZero;
  a.type = tpuc_pjrt_buffer_type(dtype);
  a.dims = dims;
  a.num_dims = (size_t)rank;
  a.byte_strides = byte_strides;
  a.num_byte_strides = byte_strides ? (size_t)rank : 0;
  a.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  a.device = client->devices[device];
  TPUC_RETURN_IF_ERROR(tpuc_pjrt_error(
      api, api->PJRT_Client_BufferFromHostBuffer(&a),
      "copying a %s array to device %d", tpuc_dtype_mlir_name(dtype), device));
  if (a.done_with_host_buffer != NULL) {
    PJRT_Event_Await_Args w = {0};
    w.struct_size = sizeof w;
    w.event = a.done_with_host_buffer;
    tpuc_status* st = tpuc_pjrt_error(api, api->PJRT_Event_Await(&w),
                                      "host-to-device transfer");
    tpuc_pjrt_event_destroy(api, a.done_with_host_buffer);
    if (st != NULL) {
      tpuc_pjrt_buffer_destroy(api, a.buffer);
      return st;
    }
  }
  tpuc_value_type t = {.dtype = dtype, .rank = rank};
  if (rank > 0) memcpy(t.dims, dims, sizeof(int64_t) * (size_t)rank);
  return tpuc_buffer_wrap(client, a.buffer, device, &t, out);
}

static tpuc_status* check_readable(tpuc_buffer* b, void* dst, size_t size) {
  if (b == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "buffer is NULL");
  TPUC_RETURN_IF_ERROR(tpuc_buffer_check_value(b));
  if (tpuc_buffer_is_deleted(b))
    return tpuc_status_make(TPUC_FAILED_PRECONDITION,
                            "buffer was donated to an execution and can no "
                            "longer be read");
  size_t need = tpuc_buffer_byte_size(b);
  if (size != need)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "destination holds %zu bytes, the buffer has %zu",
                            size, need);
  if (dst == NULL && need > 0)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "destination is NULL");
  return NULL;
}

static _Thread_local uint64_t t_host_reads;

uint64_t tpuc_buffer_host_reads(void) { return t_host_reads; }

tpuc_status* tpuc_buffer_to_host_async(tpuc_buffer* b, void* dst, size_t size,
                                       tpuc_event** done) {
  if (done == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "done is NULL");
  *done = NULL;
  TPUC_RETURN_IF_ERROR(check_readable(b, dst, size));
  t_host_reads++;
  const PJRT_Api* api = b->client->api;
  char scratch[16];
  PJRT_Buffer_ToHostBuffer_Args a = {0};
  a.struct_size = sizeof a;
  a.src = b->pjrt;
  a.dst = size ? dst : scratch;
  a.dst_size = size;
  TPUC_RETURN_IF_ERROR(tpuc_pjrt_error(api, api->PJRT_Buffer_ToHostBuffer(&a),
                                       "device-to-host transfer"));
  return tpuc_event_wrap(api, a.event, done);
}

/* On the CPU plugin a buffer's memory is host memory: once its value is
 * ready, a flat buffer is copied straight out of it (PJRT's ToHostBuffer
 * copied at 1.5 GB/s on the CI VM, where a memcpy runs at 10 or more). */
static bool read_in_place(tpuc_buffer* b) {
  return b != NULL && b->pjrt != NULL && b->rank <= 1 &&
         b->client->platform_name != NULL &&
         strcmp(b->client->platform_name, "cpu") == 0 &&
         TPUC_PJRT_HAS(b->client->api, PJRT_Buffer_UnsafePointer);
}

tpuc_status* tpuc_buffer_to_host(tpuc_buffer* b, void* dst, size_t size) {
  TPUC_RETURN_IF_ERROR(check_readable(b, dst, size));
  t_host_reads++;
  if (read_in_place(b)) {
    tpuc_event* ready = NULL;
    TPUC_RETURN_IF_ERROR(tpuc_buffer_ready_event(b, &ready));
    tpuc_status* st = tpuc_event_await(ready);
    tpuc_event_destroy(ready);
    if (st != NULL) return st;
    PJRT_Buffer_UnsafePointer_Args a = {0};
    a.struct_size = sizeof a;
    a.buffer = b->pjrt;
    st = tpuc_pjrt_error(b->client->api,
                         b->client->api->PJRT_Buffer_UnsafePointer(&a),
                         "the host address of a buffer");
    if (st == NULL && a.buffer_pointer != 0) {
      if (size > 0) memcpy(dst, (const void*)a.buffer_pointer, size);
      return NULL;
    }
    tpuc_status_free(st); /* fall back to the plugin's copy */
  }
  tpuc_event* ev = NULL;
  TPUC_RETURN_IF_ERROR(tpuc_buffer_to_host_async(b, dst, size, &ev));
  tpuc_status* st = tpuc_event_await(ev);
  tpuc_event_destroy(ev);
  return st;
}

tpuc_status* tpuc_buffer_ready_event(tpuc_buffer* b, tpuc_event** out) {
  if (b == NULL || out == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "buffer or out is NULL");
  TPUC_RETURN_IF_ERROR(tpuc_buffer_check_value(b));
  const PJRT_Api* api = b->client->api;
  PJRT_Buffer_ReadyEvent_Args a = {0};
  a.struct_size = sizeof a;
  a.buffer = b->pjrt;
  TPUC_RETURN_IF_ERROR(tpuc_pjrt_error(api, api->PJRT_Buffer_ReadyEvent(&a),
                                       "buffer ready event"));
  return tpuc_event_wrap(api, a.event, out);
}

tpuc_dtype tpuc_buffer_dtype(const tpuc_buffer* b) {
  return b ? b->dtype : TPUC_DTYPE_INVALID;
}
int tpuc_buffer_rank(const tpuc_buffer* b) { return b ? b->rank : 0; }
const int64_t* tpuc_buffer_dims(const tpuc_buffer* b) {
  return b ? b->dims : NULL;
}
int64_t tpuc_buffer_num_elements(const tpuc_buffer* b) {
  return b ? shape_elements(b->dims, b->rank) : 0;
}
size_t tpuc_buffer_byte_size(const tpuc_buffer* b) {
  return b ? (size_t)tpuc_buffer_num_elements(b) * tpuc_dtype_size(b->dtype)
           : 0;
}
int tpuc_buffer_device(const tpuc_buffer* b) { return b ? b->device : -1; }

bool tpuc_buffer_is_deleted(const tpuc_buffer* b) {
  if (b == NULL) return true;
  if (b->pjrt == NULL) return false; /* promised or broken: never donated */
  PJRT_Buffer_IsDeleted_Args a = {0};
  a.struct_size = sizeof a;
  a.buffer = b->pjrt;
  PJRT_Error* e = b->client->api->PJRT_Buffer_IsDeleted(&a);
  if (e != NULL) {
    tpuc_status_free(tpuc_pjrt_error(b->client->api, e, NULL));
    return false;
  }
  return a.is_deleted;
}

void tpuc_buffer_retain(tpuc_buffer* b) {
  if (b) atomic_fetch_add(&b->refs, 1);
}

void tpuc_buffer_release(tpuc_buffer* b) {
  if (b == NULL || atomic_fetch_sub(&b->refs, 1) != 1) return;
  if (b->pjrt != NULL) tpuc_pjrt_buffer_destroy(b->client->api, b->pjrt);
  free(b->error_msg);
  free(b);
}

int tpuc_buffer_refs(const tpuc_buffer* b) {
  return b ? atomic_load(&((tpuc_buffer*)b)->refs) : 0;
}

/* ---------------------------- promised buffers ---------------------------- */

tpuc_status* tpuc_buffer_promise(tpuc_client* client, int device,
                                 tpuc_dtype dtype, const int64_t* dims,
                                 int rank, tpuc_buffer** out) {
  int64_t n = 0;
  TPUC_RETURN_IF_ERROR(
      check_new_buffer(client, device, dtype, dims, rank, out, &n));
  tpuc_buffer* b = calloc(1, sizeof *b);
  if (b == NULL)
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  atomic_init(&b->refs, 1);
  b->client = client;
  b->device = device;
  b->dtype = dtype;
  b->rank = rank;
  if (rank > 0) memcpy(b->dims, dims, sizeof(int64_t) * (size_t)rank);
  *out = b;
  return NULL;
}

void tpuc_buffer_fulfill(tpuc_buffer* b, tpuc_buffer* value) {
  b->pjrt = value->pjrt;
  value->pjrt = NULL;
  tpuc_buffer_release(value);
}

void tpuc_buffer_break(tpuc_buffer* b, tpuc_code code, const char* message) {
  b->error_code = code;
  free(b->error_msg);
  b->error_msg = strdup(message ? message : "the buffer's producer failed");
}

tpuc_status* tpuc_buffer_check_value(const tpuc_buffer* b) {
  if (b == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "buffer is NULL");
  if (b->pjrt != NULL) return NULL;
  if (b->error_msg != NULL)
    return tpuc_status_make(b->error_code ? b->error_code : TPUC_INTERNAL, "%s",
                            b->error_msg);
  return tpuc_status_make(TPUC_FAILED_PRECONDITION,
                          "the buffer has no value yet (its producer has not "
                          "run)");
}

void* tpuc_buffer_ext(tpuc_buffer* b) { return b ? b->ext : NULL; }

/* ------------------- buffers filled later from the host ------------------ */

struct tpuc_transfer {
  tpuc_client* client;
  PJRT_AsyncHostToDeviceTransferManager* manager;
  size_t nbytes;
  bool done; /* filled or failed */
};

tpuc_status* tpuc_transfer_create(tpuc_client* client, int device,
                                  tpuc_dtype dtype, const int64_t* dims,
                                  int rank, tpuc_transfer** transfer,
                                  tpuc_buffer** out) {
  int64_t n = 0;
  if (transfer == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "transfer is NULL");
  *transfer = NULL;
  TPUC_RETURN_IF_ERROR(
      check_new_buffer(client, device, dtype, dims, rank, out, &n));
  const PJRT_Api* api = client->api;
  TPUC_REQUIRE_FN(api, PJRT_Device_DefaultMemory);
  TPUC_REQUIRE_FN(api, PJRT_Client_CreateBuffersForAsyncHostToDevice);
  TPUC_REQUIRE_FN(api, PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer);
  TPUC_REQUIRE_FN(api, PJRT_AsyncHostToDeviceTransferManager_TransferData);
  TPUC_REQUIRE_FN(api, PJRT_AsyncHostToDeviceTransferManager_SetBufferError);
  TPUC_REQUIRE_FN(api, PJRT_AsyncHostToDeviceTransferManager_Destroy);
  tpuc_transfer* t = calloc(1, sizeof *t);
  if (t == NULL)
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  t->client = client;
  t->nbytes = (size_t)n * tpuc_dtype_size(dtype);
  PJRT_Device_DefaultMemory_Args ma = {0};
  ma.struct_size = sizeof ma;
  ma.device = client->devices[device];
  tpuc_status* st =
      tpuc_pjrt_error(api, api->PJRT_Device_DefaultMemory(&ma),
                      "default memory of device %d", device);
  PJRT_ShapeSpec spec = {0};
  spec.struct_size = sizeof spec;
  spec.dims = dims;
  spec.num_dims = (size_t)rank;
  spec.element_type = tpuc_pjrt_buffer_type(dtype);
  PJRT_Client_CreateBuffersForAsyncHostToDevice_Args ca = {0};
  ca.struct_size = sizeof ca;
  ca.client = client->pjrt;
  ca.shape_specs = &spec;
  ca.num_shape_specs = 1;
  ca.memory = ma.memory;
  if (st == NULL)
    st = tpuc_pjrt_error(
        api, api->PJRT_Client_CreateBuffersForAsyncHostToDevice(&ca),
        "creating a buffer filled later from the host");
  if (st != NULL) {
    free(t);
    return st;
  }
  t->manager = ca.transfer_manager;
  PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args ra = {0};
  ra.struct_size = sizeof ra;
  ra.transfer_manager = t->manager;
  ra.buffer_index = 0;
  st = tpuc_pjrt_error(
      api, api->PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer(&ra),
      "creating a buffer filled later from the host");
  tpuc_value_type ty = {.dtype = dtype, .rank = rank};
  if (rank > 0) memcpy(ty.dims, dims, sizeof(int64_t) * (size_t)rank);
  if (st == NULL) st = tpuc_buffer_wrap(client, ra.buffer_out, device, &ty, out);
  if (st != NULL) {
    t->done = true; /* nothing to fail: there is no buffer */
    tpuc_transfer_free(t);
    return st;
  }
  *transfer = t;
  return NULL;
}

tpuc_status* tpuc_transfer_fill(tpuc_transfer* t, const void* data,
                                size_t size) {
  if (t == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "transfer is NULL");
  if (t->done)
    return tpuc_status_make(TPUC_FAILED_PRECONDITION,
                            "the transfer was already filled or failed");
  if (size != t->nbytes || (size > 0 && data == NULL))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "a transfer takes exactly %zu bytes, got %zu",
                            t->nbytes, size);
  static const char kZero[16] = {0};
  const PJRT_Api* api = t->client->api;
  PJRT_AsyncHostToDeviceTransferManager_TransferData_Args a = {0};
  a.struct_size = sizeof a;
  a.transfer_manager = t->manager;
  a.buffer_index = 0;
  a.data = size ? data : kZero;
  a.offset = 0;
  a.transfer_size = (int64_t)size;
  a.is_last_transfer = true;
  TPUC_RETURN_IF_ERROR(tpuc_pjrt_error(
      api, api->PJRT_AsyncHostToDeviceTransferManager_TransferData(&a),
      "host-to-device transfer of %zu bytes", size));
  t->done = true;
  tpuc_status* st = NULL;
  if (a.done_with_h2d_transfer != NULL) {
    /* The host memory is the caller's again once the copy is done. */
    PJRT_Event_Await_Args w = {0};
    w.struct_size = sizeof w;
    w.event = a.done_with_h2d_transfer;
    st = tpuc_pjrt_error(api, api->PJRT_Event_Await(&w),
                         "host-to-device transfer");
    tpuc_pjrt_event_destroy(api, a.done_with_h2d_transfer);
  }
  return st;
}

tpuc_status* tpuc_transfer_fail(tpuc_transfer* t, tpuc_code code,
                                const char* message) {
  if (t == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "transfer is NULL");
  if (code == TPUC_OK)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "a failed transfer needs a non-OK code");
  if (t->done)
    return tpuc_status_make(TPUC_FAILED_PRECONDITION,
                            "the transfer was already filled or failed");
  const char* msg = message ? message : "";
  const PJRT_Api* api = t->client->api;
  PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args ea = {0};
  ea.struct_size = sizeof ea;
  ea.transfer_manager = t->manager;
  ea.buffer_index = 0;
  ea.error_code = (int)code;
  ea.error_message = msg;
  ea.error_message_size = strlen(msg);
  TPUC_RETURN_IF_ERROR(tpuc_pjrt_error(
      api, api->PJRT_AsyncHostToDeviceTransferManager_SetBufferError(&ea),
      "setting the error of a buffer"));
  t->done = true;
  return NULL;
}

void tpuc_transfer_free(tpuc_transfer* t) {
  if (t == NULL) return;
  if (!t->done)
    tpuc_status_free(tpuc_transfer_fail(
        t, TPUC_ABORTED, "the value of this buffer was never sent"));
  const PJRT_Api* api = t->client->api;
  if (t->manager != NULL) {
    PJRT_AsyncHostToDeviceTransferManager_Destroy_Args da = {0};
    da.struct_size = sizeof da;
    da.transfer_manager = t->manager;
    tpuc_status_free(tpuc_pjrt_error(
        api, api->PJRT_AsyncHostToDeviceTransferManager_Destroy(&da), NULL));
  }
  free(t);
}

tpuc_status* tpuc_buffer_from_error(tpuc_client* client, int device,
                                    tpuc_dtype dtype, const int64_t* dims,
                                    int rank, tpuc_code code,
                                    const char* message, tpuc_buffer** out) {
  if (code == TPUC_OK) {
    if (out != NULL) *out = NULL;
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "an error buffer needs a non-OK code");
  }
  tpuc_transfer* t = NULL;
  TPUC_RETURN_IF_ERROR(
      tpuc_transfer_create(client, device, dtype, dims, rank, &t, out));
  tpuc_status* st = tpuc_transfer_fail(t, code, message);
  tpuc_transfer_free(t);
  if (st != NULL) {
    tpuc_buffer_release(*out);
    *out = NULL;
  }
  return st;
}

tpuc_status* tpuc_buffer_copy_to_device(tpuc_buffer* b, int device,
                                        tpuc_buffer** out) {
  if (b == NULL || out == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "buffer or out is NULL");
  *out = NULL;
  TPUC_RETURN_IF_ERROR(tpuc_client_check_device(b->client, device));
  TPUC_RETURN_IF_ERROR(tpuc_buffer_check_value(b));
  if (tpuc_buffer_is_deleted(b))
    return tpuc_status_make(TPUC_FAILED_PRECONDITION,
                            "the buffer was donated and can no longer be "
                            "used");
  const PJRT_Api* api = b->client->api;
  TPUC_REQUIRE_FN(api, PJRT_Buffer_CopyToDevice);
  PJRT_Buffer_CopyToDevice_Args a = {0};
  a.struct_size = sizeof a;
  a.buffer = b->pjrt;
  a.dst_device = b->client->devices[device];
  TPUC_RETURN_IF_ERROR(tpuc_pjrt_error(
      api, api->PJRT_Buffer_CopyToDevice(&a),
      "copying a buffer from device %d to device %d", b->device, device));
  tpuc_value_type t = {.dtype = b->dtype, .rank = b->rank};
  memcpy(t.dims, b->dims, sizeof(int64_t) * (size_t)b->rank);
  return tpuc_buffer_wrap(b->client, a.dst_buffer, device, &t, out);
}
