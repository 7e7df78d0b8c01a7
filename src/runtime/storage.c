/* Storages (mutable byte arrays over immutable PJRT buffers) and views. */
#include "tpuc/storage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt/internal.h"
#include "tpuc/executable.h"

struct tpuc_storage {
  atomic_int refs;
  tpuc_client* client;
  int device;
  size_t nbytes;
  pthread_mutex_t mu; /* guards value */
  tpuc_buffer* value; /* u8[nbytes], NULL: never written (zeros) */
};

static void account(tpuc_client* c, int device, int64_t delta) {
  pthread_mutex_lock(&c->mu);
  c->storage_bytes[device] += delta;
  if (c->storage_bytes[device] > c->storage_peak[device])
    c->storage_peak[device] = c->storage_bytes[device];
  pthread_mutex_unlock(&c->mu);
}

tpuc_status* tpuc_storage_create(tpuc_client* client, int device, size_t nbytes,
                                 tpuc_storage** out) {
  if (out == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  TPUC_RETURN_IF_ERROR(tpuc_client_check_device(client, device));
  if (nbytes > (size_t)INT64_MAX)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "storage of %zu bytes is too large", nbytes);
  tpuc_storage* s = calloc(1, sizeof *s);
  if (s == NULL)
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  atomic_init(&s->refs, 1);
  s->client = client;
  s->device = device;
  s->nbytes = nbytes;
  pthread_mutex_init(&s->mu, NULL);
  account(client, device, (int64_t)nbytes);
  *out = s;
  return NULL;
}

void tpuc_storage_retain(tpuc_storage* s) {
  if (s) atomic_fetch_add(&s->refs, 1);
}

void tpuc_storage_release(tpuc_storage* s) {
  if (s == NULL || atomic_fetch_sub(&s->refs, 1) != 1) return;
  account(s->client, s->device, -(int64_t)s->nbytes);
  tpuc_buffer_release(s->value);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

size_t tpuc_storage_nbytes(const tpuc_storage* s) { return s ? s->nbytes : 0; }
int tpuc_storage_device(const tpuc_storage* s) { return s ? s->device : -1; }
tpuc_client* tpuc_storage_client(const tpuc_storage* s) {
  return s ? s->client : NULL;
}

/* A new value from host bytes, kept as `dtype` elements (see
 * tpuc_storage_set_value). */
static tpuc_status* upload_as(tpuc_storage* s, const void* bytes,
                              tpuc_dtype dtype, tpuc_buffer** out) {
  size_t es = tpuc_dtype_size(dtype);
  if (dtype == TPUC_DTYPE_PRED || tpuc_dtype_is_complex(dtype) || es == 0 ||
      s->nbytes % es != 0)
    dtype = TPUC_DTYPE_U8, es = 1;
  int64_t dims[1] = {(int64_t)(s->nbytes / es)};
  return tpuc_buffer_from_host(s->client, s->device, dtype, dims, 1, bytes,
                               NULL, out);
}

static tpuc_status* upload(tpuc_storage* s, const void* bytes,
                           tpuc_buffer** out) {
  return upload_as(s, bytes, TPUC_DTYPE_U8, out);
}

/* Storages of at least this many bytes get their zeros from a fill on the
 * device: zeroed host memory copied over costs a page fault on each side
 * and a copy. */
#define DEVICE_ZEROS_MIN ((size_t)1 << 20)

/* The element type of the zeros a never-written storage gets: f32 where
 * the size allows (the default dtype, so most readers need no conversion
 * from bytes and run the program they run once the storage is written),
 * else bytes. */
static tpuc_dtype zeros_dtype(const tpuc_storage* s) {
  return s->nbytes > 0 && s->nbytes % 4 == 0 ? TPUC_DTYPE_F32 : TPUC_DTYPE_U8;
}

size_t tpuc_storage_zeros_program(const tpuc_storage* s, char* text,
                                  size_t cap, tpuc_dtype* dtype,
                                  int64_t* count) {
  if (s == NULL || s->nbytes == 0) return 0;
  bool f32 = zeros_dtype(s) == TPUC_DTYPE_F32;
  const char* ty = f32 ? "f32" : "ui8";
  size_t n = f32 ? s->nbytes / 4 : s->nbytes;
  int len = snprintf(
      text, cap,
      "module @tpuc_zeros {\n"
      "  func.func public @main() -> (tensor<%zux%s>) {\n"
      "    %%0 = \"stablehlo.constant\"() {value = dense<0%s> : tensor<%s>} : "
      "() -> tensor<%s>\n"
      "    %%1 = \"stablehlo.broadcast_in_dim\"(%%0) {broadcast_dimensions = "
      "array<i64>} : (tensor<%s>) -> tensor<%zux%s>\n"
      "    \"func.return\"(%%1) : (tensor<%zux%s>) -> ()\n"
      "  }\n}\n",
      n, ty, f32 ? ".0" : "", ty, ty, ty, n, ty, n, ty);
  if (len < 0 || (size_t)len >= cap) return 0;
  if (dtype != NULL) *dtype = zeros_dtype(s);
  if (count != NULL) *count = (int64_t)n;
  return (size_t)len;
}

static tpuc_status* device_zeros(tpuc_storage* s, tpuc_buffer** out) {
  char text[1024];
  size_t len = tpuc_storage_zeros_program(s, text, sizeof text, NULL, NULL);
  if (len == 0)
    return tpuc_status_make(TPUC_INTERNAL, "no zeros program for %zu bytes",
                            s->nbytes);
  tpuc_executable* exe = NULL;
  TPUC_RETURN_IF_ERROR(tpuc_compile(s->client, text, len, NULL, &exe, NULL));
  tpuc_status* st = tpuc_execute(exe, s->device, NULL, 0, NULL, out, 1);
  tpuc_executable_release(exe);
  return st;
}

tpuc_status* tpuc_storage_value(tpuc_storage* s, tpuc_buffer** out) {
  if (s == NULL || out == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "storage or out is NULL");
  pthread_mutex_lock(&s->mu);
  tpuc_status* st = NULL;
  if (s->value == NULL && s->nbytes >= DEVICE_ZEROS_MIN) {
    st = device_zeros(s, &s->value);
    if (st != NULL) { /* the host copy below still works */
      tpuc_status_free(st);
      st = NULL;
      s->value = NULL;
    }
  }
  if (s->value == NULL) {
    void* zeros = calloc(1, s->nbytes ? s->nbytes : 1);
    st = zeros ? upload_as(s, zeros, zeros_dtype(s), &s->value)
               : tpuc_status_make(TPUC_RESOURCE_EXHAUSTED,
                                  "out of host memory");
    free(zeros);
  }
  if (st == NULL) {
    tpuc_buffer_retain(s->value);
    *out = s->value;
  }
  pthread_mutex_unlock(&s->mu);
  return st;
}

tpuc_dtype tpuc_storage_value_dtype(tpuc_storage* s) {
  if (s == NULL) return TPUC_DTYPE_U8;
  pthread_mutex_lock(&s->mu);
  tpuc_dtype d = s->value ? tpuc_buffer_dtype(s->value) : zeros_dtype(s);
  pthread_mutex_unlock(&s->mu);
  return d;
}

bool tpuc_storage_is_unwritten(tpuc_storage* s) {
  if (s == NULL) return false;
  pthread_mutex_lock(&s->mu);
  bool none = s->value == NULL;
  pthread_mutex_unlock(&s->mu);
  return none;
}

static tpuc_status* set_value(tpuc_storage* s, tpuc_buffer* value,
                              bool only_unwritten) {
  if (s == NULL || value == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "storage or value is NULL");
  tpuc_dtype d = tpuc_buffer_dtype(value);
  if (tpuc_buffer_rank(value) != 1 || d == TPUC_DTYPE_PRED ||
      tpuc_dtype_is_complex(d) || tpuc_buffer_byte_size(value) != s->nbytes ||
      tpuc_buffer_device(value) != s->device)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "a storage value must be a flat array of %zu "
                            "bytes (u8[%zu], or of another integer or float "
                            "type) on device %d",
                            s->nbytes, s->nbytes, s->device);
  pthread_mutex_lock(&s->mu);
  tpuc_buffer* old = s->value;
  if (!only_unwritten || old == NULL) {
    tpuc_buffer_retain(value);
    s->value = value;
  } else {
    old = NULL;
  }
  pthread_mutex_unlock(&s->mu);
  tpuc_buffer_release(old);
  return NULL;
}

tpuc_status* tpuc_storage_set_value(tpuc_storage* s, tpuc_buffer* value) {
  return set_value(s, value, false);
}

tpuc_status* tpuc_storage_set_zeros(tpuc_storage* s, tpuc_buffer* value) {
  return set_value(s, value, true);
}

static tpuc_status* check_range(const tpuc_storage* s, size_t offset,
                                size_t size) {
  if (s == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "storage is NULL");
  if (offset > s->nbytes || size > s->nbytes - offset)
    return tpuc_status_make(
        TPUC_OUT_OF_RANGE,
        "bytes [%zu, %zu) are outside a storage of %zu bytes", offset,
        offset + size, s->nbytes);
  return NULL;
}

/* Whole storage to a new host array (caller frees). */
static tpuc_status* read_all(tpuc_storage* s, unsigned char** out) {
  *out = malloc(s->nbytes ? s->nbytes : 1);
  if (*out == NULL)
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  tpuc_buffer* v = NULL;
  pthread_mutex_lock(&s->mu);
  if (s->value) {
    v = s->value;
    tpuc_buffer_retain(v);
  }
  pthread_mutex_unlock(&s->mu);
  tpuc_status* st = NULL;
  if (v == NULL) {
    memset(*out, 0, s->nbytes);
  } else {
    st = tpuc_value_to_host(v, *out, s->nbytes);
  }
  tpuc_buffer_release(v);
  if (st != NULL) {
    free(*out);
    *out = NULL;
  }
  return st;
}

static tpuc_status* write_all_as(tpuc_storage* s, const void* bytes,
                                 tpuc_dtype dtype) {
  tpuc_buffer* v = NULL;
  TPUC_RETURN_IF_ERROR(upload_as(s, bytes, dtype, &v));
  tpuc_status* st = tpuc_storage_set_value(s, v);
  tpuc_buffer_release(v);
  return st;
}

static tpuc_status* write_all(tpuc_storage* s, const void* bytes) {
  tpuc_buffer* v = NULL;
  TPUC_RETURN_IF_ERROR(upload(s, bytes, &v));
  tpuc_status* st = tpuc_storage_set_value(s, v);
  tpuc_buffer_release(v);
  return st;
}

tpuc_status* tpuc_storage_read(tpuc_storage* s, size_t offset, size_t size,
                               void* dst) {
  TPUC_RETURN_IF_ERROR(check_range(s, offset, size));
  if (size == 0) return NULL;
  unsigned char* all = NULL;
  TPUC_RETURN_IF_ERROR(read_all(s, &all));
  memcpy(dst, all + offset, size);
  free(all);
  return NULL;
}

tpuc_status* tpuc_storage_write(tpuc_storage* s, size_t offset, size_t size,
                                const void* src) {
  TPUC_RETURN_IF_ERROR(check_range(s, offset, size));
  if (size == 0) return NULL;
  if (offset == 0 && size == s->nbytes) return write_all(s, src);
  unsigned char* all = NULL;
  TPUC_RETURN_IF_ERROR(read_all(s, &all));
  memcpy(all + offset, src, size);
  tpuc_status* st = write_all(s, all);
  free(all);
  return st;
}

tpuc_status* tpuc_storage_resize(tpuc_storage* s, size_t nbytes) {
  if (s == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "storage is NULL");
  if (nbytes == s->nbytes) return NULL;
  unsigned char* all = NULL;
  TPUC_RETURN_IF_ERROR(read_all(s, &all));
  unsigned char* grown = realloc(all, nbytes ? nbytes : 1);
  if (grown == NULL) {
    free(all);
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  }
  if (nbytes > s->nbytes) memset(grown + s->nbytes, 0, nbytes - s->nbytes);
  int64_t dims[1] = {(int64_t)nbytes};
  tpuc_buffer* v = NULL;
  tpuc_status* st = tpuc_buffer_from_host(s->client, s->device, TPUC_DTYPE_U8,
                                          dims, 1, grown, NULL, &v);
  free(grown);
  if (st != NULL) return st;
  account(s->client, s->device, (int64_t)nbytes - (int64_t)s->nbytes);
  pthread_mutex_lock(&s->mu);
  tpuc_buffer* old = s->value;
  s->value = v;
  s->nbytes = nbytes;
  pthread_mutex_unlock(&s->mu);
  tpuc_buffer_release(old);
  return NULL;
}

tpuc_status* tpuc_storage_bytes(tpuc_client* c, int device, int64_t* in_use,
                                int64_t* peak) {
  TPUC_RETURN_IF_ERROR(tpuc_client_check_device(c, device));
  pthread_mutex_lock(&c->mu);
  if (in_use) *in_use = c->storage_bytes[device];
  if (peak) *peak = c->storage_peak[device];
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

tpuc_status* tpuc_storage_reset_peak(tpuc_client* c, int device) {
  TPUC_RETURN_IF_ERROR(tpuc_client_check_device(c, device));
  pthread_mutex_lock(&c->mu);
  c->storage_peak[device] = c->storage_bytes[device];
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

/* ------------------------------- views --------------------------------- */

static int64_t view_elements(const tpuc_view* v) {
  int64_t n = 1;
  for (int i = 0; i < v->rank; i++) n *= v->sizes[i];
  return n;
}

tpuc_status* tpuc_view_check(const tpuc_view* v) {
  if (v == NULL || v->storage == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "view or storage is NULL");
  if (!tpuc_dtype_is_valid(v->dtype))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "invalid dtype %d",
                            (int)v->dtype);
  if (v->rank < 0 || v->rank > TPUC_MAX_RANK)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "rank %d out of range",
                            v->rank);
  int64_t lo = v->offset, hi = v->offset;
  for (int i = 0; i < v->rank; i++) {
    if (v->sizes[i] < 0)
      return tpuc_status_make(TPUC_INVALID_ARGUMENT, "size %d is negative", i);
    if (v->sizes[i] == 0) return NULL; /* empty: touches nothing */
    int64_t span = (v->sizes[i] - 1) * v->strides[i];
    if (span < 0)
      lo += span;
    else
      hi += span;
  }
  int64_t es = (int64_t)tpuc_dtype_size(v->dtype);
  if (lo < 0 || (hi + 1) * es > (int64_t)v->storage->nbytes)
    return tpuc_status_make(
        TPUC_OUT_OF_RANGE,
        "view of elements [%lld, %lld] (%s) is outside a storage of %zu bytes",
        (long long)lo, (long long)hi, tpuc_dtype_mlir_name(v->dtype),
        v->storage->nbytes);
  return NULL;
}

/* Calls fn(element byte offset in storage, element index) in row-major order.
 */
typedef void (*visit_fn)(void* ctx, int64_t byte_off, int64_t index);
static void visit(const tpuc_view* v, visit_fn fn, void* ctx) {
  int64_t n = view_elements(v);
  if (n == 0) return;
  int64_t es = (int64_t)tpuc_dtype_size(v->dtype);
  int64_t idx[TPUC_MAX_RANK] = {0};
  int64_t off = v->offset;
  for (int64_t k = 0; k < n; k++) {
    fn(ctx, off * es, k);
    for (int d = v->rank - 1; d >= 0; d--) {
      if (++idx[d] < v->sizes[d]) {
        off += v->strides[d];
        break;
      }
      off -= (v->sizes[d] - 1) * v->strides[d];
      idx[d] = 0;
    }
  }
}

typedef struct {
  unsigned char* storage;
  unsigned char* dense;
  size_t es;
} copy_ctx;

static void gather_one(void* p, int64_t off, int64_t k) {
  copy_ctx* c = p;
  memcpy(c->dense + (size_t)k * c->es, c->storage + off, c->es);
}

static void scatter_one(void* p, int64_t off, int64_t k) {
  copy_ctx* c = p;
  memcpy(c->storage + off, c->dense + (size_t)k * c->es, c->es);
}

/* Row-major contiguous (at any offset): its elements are one byte range. */
static int is_contiguous_range(const tpuc_view* v) {
  int64_t expect = 1;
  for (int d = v->rank - 1; d >= 0; d--) {
    if (v->sizes[d] != 1 && v->strides[d] != expect) return 0;
    expect *= v->sizes[d];
  }
  return 1;
}

static int is_whole_storage(const tpuc_view* v) {
  if (v->offset != 0) return 0;
  int64_t expect = 1;
  for (int d = v->rank - 1; d >= 0; d--) {
    if (v->sizes[d] != 1 && v->strides[d] != expect) return 0;
    expect *= v->sizes[d];
  }
  return (size_t)expect * tpuc_dtype_size(v->dtype) == v->storage->nbytes;
}

tpuc_status* tpuc_view_to_host(const tpuc_view* v, void* dst, size_t size) {
  TPUC_RETURN_IF_ERROR(tpuc_view_check(v));
  size_t need = (size_t)view_elements(v) * tpuc_dtype_size(v->dtype);
  if (size != need)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "destination holds %zu bytes, the view has %zu",
                            size, need);
  if (need == 0) return NULL;
  if (is_whole_storage(v)) {
    /* The storage's bytes are the view's: straight from the value. */
    tpuc_buffer* value = NULL;
    pthread_mutex_lock(&v->storage->mu);
    if (v->storage->value) {
      value = v->storage->value;
      tpuc_buffer_retain(value);
    }
    pthread_mutex_unlock(&v->storage->mu);
    if (value == NULL) {
      memset(dst, 0, need);
      return NULL;
    }
    tpuc_status* st = tpuc_value_to_host(value, dst, need);
    tpuc_buffer_release(value);
    return st;
  }
  unsigned char* all = NULL;
  TPUC_RETURN_IF_ERROR(read_all(v->storage, &all));
  size_t es = tpuc_dtype_size(v->dtype);
  if (is_contiguous_range(v)) {
    memcpy(dst, all + (size_t)v->offset * es, need);
  } else {
    copy_ctx c = {all, dst, es};
    visit(v, gather_one, &c);
  }
  free(all);
  return NULL;
}

tpuc_status* tpuc_view_from_host(const tpuc_view* v, const void* src,
                                 size_t size) {
  TPUC_RETURN_IF_ERROR(tpuc_view_check(v));
  size_t need = (size_t)view_elements(v) * tpuc_dtype_size(v->dtype);
  if (size != need)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "source holds %zu bytes, the view has %zu", size,
                            need);
  if (need == 0) return NULL;
  if (is_whole_storage(v)) return write_all_as(v->storage, src, v->dtype);
  unsigned char* all = NULL;
  TPUC_RETURN_IF_ERROR(read_all(v->storage, &all));
  size_t es = tpuc_dtype_size(v->dtype);
  if (is_contiguous_range(v)) {
    memcpy(all + (size_t)v->offset * es, src, need);
  } else {
    copy_ctx c = {all, (unsigned char*)src, es};
    visit(v, scatter_one, &c);
  }
  tpuc_status* st = write_all(v->storage, all);
  free(all);
  return st;
}

tpuc_status* tpuc_view_copy(const tpuc_view* dst, const tpuc_view* src) {
  TPUC_RETURN_IF_ERROR(tpuc_view_check(dst));
  TPUC_RETURN_IF_ERROR(tpuc_view_check(src));
  if (dst->dtype != src->dtype || dst->rank != src->rank)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "copy needs the same dtype and rank");
  for (int i = 0; i < dst->rank; i++)
    if (dst->sizes[i] != src->sizes[i])
      return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                              "copy needs the same sizes (dimension %d: %lld "
                              "vs %lld)",
                              i, (long long)dst->sizes[i],
                              (long long)src->sizes[i]);
  size_t n = (size_t)view_elements(src) * tpuc_dtype_size(src->dtype);
  void* tmp = malloc(n ? n : 1);
  if (tmp == NULL)
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  tpuc_status* st = tpuc_view_to_host(src, tmp, n);
  if (st == NULL) st = tpuc_view_from_host(dst, tmp, n);
  free(tmp);
  return st;
}
