/* The generic native-op path: one program per call that reads each tensor
 * argument out of its storage, runs the op's lowering, and writes each
 * result as bytes; compiled through the cache and executed (tpuc/ops.h). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fingerprint.h"
#include "ops/ops_internal.h"
#include "tpuc/eager.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

/* A call records as one node of the runtime's segments. */
_Static_assert(2 * (OP_MAX_ARGS + OP_MAX_LIST + OP_MAX_OUTS) + 1 <= FZ_MAX_IN,
               "a call has more inputs than a recorded node takes");
_Static_assert(OP_MAX_OUTS + 1 <= FZ_MAX_OUT,
               "a call has more outputs than a recorded node takes");

static tpuc_status* unimpl(const char* why) {
  return tpuc_status_make(TPUC_UNIMPLEMENTED, "%s", why);
}

static int64_t numel(const int64_t* sizes, int rank) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= sizes[i];
  return n;
}

/* True when (sizes, strides) is row-major contiguous. */
static bool row_major(const tpuc_view* v) {
  int64_t expect = 1;
  for (int d = v->rank - 1; d >= 0; d--) {
    if (v->sizes[d] != 1 && v->strides[d] != expect) return false;
    expect *= v->sizes[d];
  }
  return true;
}

/* The real type of a complex dtype's components. */
static tpuc_dtype component_dtype(tpuc_dtype d) {
  return d == TPUC_DTYPE_C128 ? TPUC_DTYPE_F64 : TPUC_DTYPE_F32;
}

/* Storage values are kept in the element type of the tensor that wrote
 * them (f32[n] for a float tensor), so a program that reads and writes a
 * storage with its own dtype has no byte conversions: XLA's CPU backend
 * turns a value's bitcast to bytes into a loop over bytes that recomputes
 * the value once per byte. Bools and complex values are kept as bytes
 * (HLO has no bitcast from or to them), and so are values written from the
 * host or through another dtype's view. */
static bool typed_storage(tpuc_dtype d) {
  return d != TPUC_DTYPE_PRED && !tpuc_dtype_is_complex(d) &&
         tpuc_dtype_size(d) > 0;
}

/* The type of a storage's value as a program argument. */
static tpuc_hlo_type storage_type(tpuc_storage* s) {
  tpuc_dtype d = tpuc_storage_value_dtype(s);
  int64_t n = (int64_t)(tpuc_storage_nbytes(s) / tpuc_dtype_size(d));
  return tpuc_hlo_type_make(d, &n, 1);
}

/* The storage value (any element type) as u8[nbytes]. */
static tpuc_status* storage_bytes(tpuc_hlo_fn* fn, tpuc_hlo_value storage,
                                  tpuc_hlo_value* out) {
  tpuc_hlo_type t;
  TRY(tpuc_hlo_value_type(fn, storage, &t));
  if (t.dtype == TPUC_DTYPE_U8) {
    *out = storage;
    return NULL;
  }
  int64_t nbytes = tpuc_hlo_type_num_elements(&t) *
                   (int64_t)tpuc_dtype_size(t.dtype);
  tpuc_hlo_value b;
  TRY(tpuc_hlo_bitcast_convert(fn, storage, TPUC_DTYPE_U8, &b));
  if (tpuc_dtype_size(t.dtype) == 1) {
    *out = b;
    return NULL;
  }
  return tpuc_hlo_reshape(fn, b, &nbytes, 1, out);
}

/* The storage value as a flat array of v's dtype. */
static tpuc_status* storage_elements(tpuc_hlo_fn* fn, const tpuc_view* v,
                                     tpuc_hlo_value storage,
                                     tpuc_hlo_value* out, int64_t* count) {
  size_t es = tpuc_dtype_size(v->dtype);
  size_t nbytes = tpuc_storage_nbytes(v->storage);
  if (nbytes % es != 0)
    return unimpl("storage size is not a multiple of the element size");
  int64_t n = (int64_t)(nbytes / es);
  *count = n;
  tpuc_hlo_type have;
  TRY(tpuc_hlo_value_type(fn, storage, &have));
  if (have.dtype == v->dtype && typed_storage(v->dtype)) {
    *out = storage; /* already v's elements */
    return NULL;
  }
  TRY(storage_bytes(fn, storage, &storage));
  tpuc_hlo_value flat = storage;
  if (tpuc_dtype_is_complex(v->dtype)) {
    /* Bytes -> (real, imaginary) component pairs -> complex (HLO has no
     * bitcast to complex). */
    tpuc_dtype comp = component_dtype(v->dtype);
    int64_t shape[3] = {n, 2, (int64_t)es / 2};
    tpuc_hlo_value r, pairs, re, im;
    TRY(tpuc_hlo_reshape(fn, storage, shape, 3, &r));
    TRY(tpuc_hlo_bitcast_convert(fn, r, comp, &pairs));
    int64_t s0[2] = {0, 0}, l0[2] = {n, 1}, s1[2] = {0, 1}, l1[2] = {n, 2};
    TRY(tpuc_hlo_slice(fn, pairs, s0, l0, NULL, &re));
    TRY(tpuc_hlo_slice(fn, pairs, s1, l1, NULL, &im));
    TRY(tpuc_hlo_reshape(fn, re, &n, 1, &re));
    TRY(tpuc_hlo_reshape(fn, im, &n, 1, &im));
    return tpuc_hlo_binary(fn, TPUC_HLO_COMPLEX, re, im, out);
  }
  if (v->dtype == TPUC_DTYPE_PRED) {
    uint8_t zero = 0;
    tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_U8, &n, 1);
    tpuc_hlo_value z;
    TRY(tpuc_hlo_constant_splat(fn, &t, &zero, &z));
    TRY(tpuc_hlo_compare(fn, TPUC_HLO_NE, storage, z, &flat));
  } else if (es == 1) {
    if (v->dtype != TPUC_DTYPE_U8)
      TRY(tpuc_hlo_bitcast_convert(fn, storage, v->dtype, &flat));
  } else {
    int64_t shape[2] = {n, (int64_t)es};
    tpuc_hlo_value r;
    TRY(tpuc_hlo_reshape(fn, storage, shape, 2, &r));
    TRY(tpuc_hlo_bitcast_convert(fn, r, v->dtype, &flat));
  }
  *out = flat;
  return NULL;
}

/* Element indices of view `v` in its storage: s64[sizes..., 1] (the
 * trailing 1 is the index vector of gather/scatter). */
static tpuc_status* view_indices(tpuc_hlo_fn* fn, const tpuc_view* v,
                                 tpuc_hlo_value* out) {
  tpuc_hlo_type it = tpuc_hlo_type_make(TPUC_DTYPE_S64, v->sizes, v->rank);
  tpuc_hlo_value idx;
  TRY(tpuc_hlo_constant_splat(fn, &it, &v->offset, &idx));
  for (int d = 0; d < v->rank; d++) {
    if (v->sizes[d] == 1 || v->strides[d] == 0) continue;
    tpuc_hlo_value io, st, term;
    TRY(tpuc_hlo_iota(fn, &it, d, &io));
    TRY(tpuc_hlo_constant_splat(fn, &it, &v->strides[d], &st));
    TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, io, st, &term));
    TRY(tpuc_hlo_binary(fn, TPUC_HLO_ADD, idx, term, &idx));
  }
  int64_t ishape[TPUC_MAX_RANK + 1];
  memcpy(ishape, v->sizes, sizeof(int64_t) * (size_t)v->rank);
  ishape[v->rank] = 1;
  return tpuc_hlo_reshape(fn, idx, ishape, v->rank + 1, out);
}

/* The dims of `v` that move through its storage (size above 1, stride not
 * 0) in `order`, largest stride first (stable): their count, or -1 when a
 * stride is negative. */
static int moving_dims(const tpuc_view* v, int* order) {
  int k = 0;
  for (int d = 0; d < v->rank; d++) {
    if (v->sizes[d] == 1 || v->strides[d] == 0) continue;
    if (v->strides[d] < 0) return -1;
    int at = k++;
    while (at > 0 && v->strides[order[at - 1]] < v->strides[d]) {
      order[at] = order[at - 1];
      at--;
    }
    order[at] = d;
  }
  return k;
}

/* Views whose strides nest (transposes and permutations, narrowed and
 * step-sliced dims, expanded dims): sort the dims that move by stride,
 * largest first; when each stride is a multiple of the next and spans that
 * dim (s[i] % s[i+1] == 0, s[i] >= size[i+1] * s[i+1]), the view is a
 * corner of the storage from its offset reshaped to the box
 * [size0, s0/s1, ..., s(k-1)/sk, sk] of `len` elements. Returns k (the dims
 * that move, in `order`; 0: one element, len 1), or -1 when the view does
 * not nest (overlapping views, negative strides) or the rank is too
 * large. */
static int nest_box(const tpuc_view* v, int* order, int64_t* shape,
                    int64_t* len) {
  int k = moving_dims(v, order);
  if (k < 0) return -1;
  *len = 1;
  if (k == 0) return 0;
  if (k + 1 > TPUC_MAX_RANK) return -1;
  for (int i = 0; i + 1 < k; i++) {
    int64_t a = v->strides[order[i]], b = v->strides[order[i + 1]];
    if (a % b != 0 || a < v->sizes[order[i + 1]] * b) return -1;
  }
  shape[0] = v->sizes[order[0]];
  for (int i = 1; i < k; i++)
    shape[i] = v->strides[order[i - 1]] / v->strides[order[i]];
  shape[k] = v->strides[order[k - 1]];
  *len = shape[0] * v->strides[order[0]];
  return k;
}

/* The elements from a view's first to its last, inclusive (strides not
 * negative). */
static int64_t view_span(const tpuc_view* v) {
  int64_t span = 1;
  for (int d = 0; d < v->rank; d++)
    span += (v->sizes[d] - 1) * v->strides[d];
  return span;
}

/* Nested views that are read: the offsets this thread has read each
 * signature (dtype, sizes, strides, storage size) at, up to
 * READ_OFFSETS of them; past that many the signature's offset varies like
 * a loop's (a column read per iteration, a KV cache read per position)
 * and becomes an operand. GPT-2's q, k and v (three offsets of one
 * signature) stay constants. The table changes only in make_key (see
 * note_read_offset), so one call decides the same way throughout. */
#define READ_OFFSETS 8
#define READ_SLOTS 128
typedef struct {
  tpuc_fingerprint sig;
  int n; /* offsets seen; READ_OFFSETS + 1: it varies */
  int64_t offs[READ_OFFSETS];
} read_slot;
static _Thread_local read_slot t_reads[READ_SLOTS];

static tpuc_fingerprint view_signature(const tpuc_view* v) {
  size_t nbytes = tpuc_storage_nbytes(v->storage);
  tpuc_fingerprint f = {0x7265616421ull, (uint64_t)v->dtype};
  f = tpuc_fingerprint_bytes(f, v->sizes, sizeof(int64_t) * (size_t)v->rank);
  f = tpuc_fingerprint_bytes(f, v->strides, sizeof(int64_t) * (size_t)v->rank);
  return tpuc_fingerprint_bytes(f, &nbytes, sizeof nbytes);
}

static read_slot* read_slot_of(tpuc_fingerprint sig) {
  return &t_reads[sig.lo % READ_SLOTS];
}

/* A view with gaps whose strides nest, no expanded dims, and room in its
 * storage for more than one offset: its offset can be an operand. */
static bool nested_movable(const tpuc_view* v, int64_t n) {
  for (int d = 0; d < v->rank; d++)
    if (v->sizes[d] != 1 && v->strides[d] == 0) return false; /* expanded */
  int order[TPUC_MAX_RANK];
  int64_t shape[TPUC_MAX_RANK + 1], len;
  return nest_box(v, order, shape, &len) > 0 && view_span(v) < n;
}

/* A view whose offset is an operand of its program (an s64 input) rather
 * than a constant: a row-major block that is not its whole storage, and,
 * as a write target (`write`), a view whose strides nest (nest_box: a
 * column `x[:, i] = y`, a slice of a cache `c[:, :, p:p + 1] = k`, a
 * transposed block) with room in its storage for more than one offset
 * (expanded dims excluded). Loops over rows (`x[i]`, `x[i] = y`) and
 * writes to columns then share one program instead of compiling one per
 * offset. Nested views that are read keep constant offsets until their
 * signature has been read at more than READ_OFFSETS offsets (a GPT-2
 * training step reading its q, k and v, three offsets, through run-time
 * offsets measured 14 % slower: bench/README.md). Decided by what the key
 * holds (sizes, strides, dtype, storage size, role) and, for nested
 * reads, how many offsets this thread has read them at. */
static bool offset_operand(const tpuc_view* v, bool write) {
  if (v == NULL || v->storage == NULL) return false;
  int64_t count = numel(v->sizes, v->rank);
  size_t es = tpuc_dtype_size(v->dtype);
  if (count <= 0 || es == 0) return false;
  int64_t n = (int64_t)(tpuc_storage_nbytes(v->storage) / es);
  if (row_major(v)) return count < n;
  if (!nested_movable(v, n)) return false;
  if (write) return true;
  tpuc_fingerprint sig = view_signature(v);
  const read_slot* r = read_slot_of(sig);
  return r->sig.lo == sig.lo && r->sig.hi == sig.hi && r->n > READ_OFFSETS;
}

/* Notes the offset of a nested view that is read (make_key only). */
static void note_read_offset(const tpuc_view* v) {
  if (v == NULL || v->storage == NULL || row_major(v)) return;
  size_t es = tpuc_dtype_size(v->dtype);
  if (es == 0 || numel(v->sizes, v->rank) <= 0) return;
  if (!nested_movable(v, (int64_t)(tpuc_storage_nbytes(v->storage) / es)))
    return;
  tpuc_fingerprint sig = view_signature(v);
  read_slot* r = read_slot_of(sig);
  if (r->sig.lo != sig.lo || r->sig.hi != sig.hi) {
    r->sig = sig;
    r->n = 0;
  }
  if (r->n > READ_OFFSETS) return;
  for (int i = 0; i < r->n; i++)
    if (r->offs[i] == v->offset) return;
  if (r->n < READ_OFFSETS) r->offs[r->n] = v->offset;
  r->n++;
}

/* `flat` (n elements) with `hi` elements appended (never read). */
static tpuc_status* pad_tail(tpuc_hlo_fn* fn, tpuc_hlo_value flat, int64_t hi,
                             tpuc_hlo_value* out) {
  if (hi <= 0) {
    *out = flat;
    return NULL;
  }
  static const unsigned char zero[16] = {0};
  tpuc_hlo_type zt;
  tpuc_hlo_value z;
  TRY(tpuc_hlo_value_type(fn, flat, &zt));
  zt.rank = 0;
  TRY(tpuc_hlo_constant_splat(fn, &zt, zero, &z));
  int64_t lo = 0, in = 0;
  return tpuc_hlo_pad(fn, flat, z, &lo, &hi, &in, out);
}

/* Reads a view whose strides nest (nest_box) as a corner of its box:
 * slice, reshape, transpose back to the view's dim order, broadcast the
 * expanded dims. XLA fuses those into the consumer, where a gather would
 * compute an index per element. *done stays false for other views. */
static tpuc_status* read_nested(tpuc_hlo_fn* fn, const tpuc_view* v,
                                tpuc_hlo_value flat, int64_t n,
                                tpuc_hlo_value offset, tpuc_hlo_value* out,
                                bool* done) {
  int order[TPUC_MAX_RANK];
  int64_t shape[TPUC_MAX_RANK + 1], len;
  int k = nest_box(v, order, shape, &len);
  if (k < 0) return NULL;
  /* The last row's tail may run past the storage: pad (never read). */
  tpuc_hlo_value region;
  if (offset >= 0) {
    /* a run-time offset (offset_operand): padded for any offset */
    TRY(pad_tail(fn, flat, len - view_span(v), &region));
    TRY(tpuc_hlo_dynamic_slice(fn, region, &offset, &len, &region));
  } else {
    TRY(pad_tail(fn, flat, v->offset + len - n, &region));
    int64_t start = v->offset, limit = v->offset + len;
    TRY(tpuc_hlo_slice(fn, region, &start, &limit, NULL, &region));
  }
  if (k == 0) {
    /* One element, broadcast (an expanded scalar). */
    TRY(tpuc_hlo_reshape(fn, region, NULL, 0, &region));
    TRY(tpuc_hlo_broadcast_in_dim(fn, region, v->sizes, v->rank, NULL, out));
    *done = true;
    return NULL;
  }
  TRY(tpuc_hlo_reshape(fn, region, shape, k + 1, &region));
  int64_t s0[TPUC_MAX_RANK + 1] = {0}, l0[TPUC_MAX_RANK + 1];
  int64_t kept[TPUC_MAX_RANK];
  for (int i = 0; i < k; i++) l0[i] = kept[i] = v->sizes[order[i]];
  l0[k] = 1;
  TRY(tpuc_hlo_slice(fn, region, s0, l0, NULL, &region));
  TRY(tpuc_hlo_reshape(fn, region, kept, k, &region));
  /* Back to the view's order of the moving dims. */
  int64_t perm[TPUC_MAX_RANK];
  bool identity = true;
  int j = 0;
  for (int d = 0; d < v->rank; d++) {
    if (v->sizes[d] == 1 || v->strides[d] == 0) continue;
    int pos = 0;
    while (order[pos] != d) pos++;
    perm[j] = pos;
    identity &= pos == j;
    j++;
  }
  if (!identity) TRY(tpuc_hlo_transpose(fn, region, perm, &region));
  /* Then the view's shape, expanded dims broadcast. */
  int64_t bdims[TPUC_MAX_RANK];
  bool expanded = false;
  j = 0;
  for (int d = 0; d < v->rank; d++) {
    if (v->sizes[d] == 1 || v->strides[d] == 0) {
      expanded |= v->sizes[d] != 1;
      continue;
    }
    bdims[j++] = d;
  }
  if (expanded)
    TRY(tpuc_hlo_broadcast_in_dim(fn, region, v->sizes, v->rank, bdims,
                                  out));
  else
    TRY(tpuc_hlo_reshape(fn, region, v->sizes, v->rank, out));
  *done = true;
  return NULL;
}

/* Reads view `v` out of `storage` (a u8[nbytes] @main argument); `offset`
 * is its s64 offset operand (offset_operand: a row-major block or a
 * nested view), else -1. */
static tpuc_status* read_view(tpuc_hlo_fn* fn, const tpuc_view* v,
                              tpuc_hlo_value storage, tpuc_hlo_value offset,
                              tpuc_hlo_value* out) {
  tpuc_hlo_value flat;
  int64_t n = 0;
  TRY(storage_elements(fn, v, storage, &flat, &n));
  int64_t count = numel(v->sizes, v->rank);
  if (offset >= 0 && row_major(v)) {
    tpuc_hlo_value s;
    TRY(tpuc_hlo_dynamic_slice(fn, flat, &offset, &count, &s));
    return tpuc_hlo_reshape(fn, s, v->sizes, v->rank, out);
  }
  if (count == 0 || row_major(v)) {
    int64_t start = count == 0 ? 0 : v->offset, limit = start + count, one = 1;
    tpuc_hlo_value s;
    TRY(tpuc_hlo_slice(fn, flat, &start, &limit, &one, &s));
    return tpuc_hlo_reshape(fn, s, v->sizes, v->rank, out);
  }
  bool done = false;
  TRY(read_nested(fn, v, flat, n, offset, out, &done));
  if (done) return NULL;
  if (offset >= 0)
    return unimpl("a run-time offset for a view that does not nest");
  /* General strides: gather at offset + sum_d iota_d * stride_d. */
  tpuc_hlo_value idx2;
  TRY(view_indices(fn, v, &idx2));
  return op_gather_elements(fn, flat, idx2, out);
}

/* `x` (type `t`) as a storage value: flat, in its own element type where
 * storages keep that type (typed_storage), else as row-major bytes
 * u8[numel * size]. */
static tpuc_status* to_bytes(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                             const tpuc_hlo_type* t, tpuc_hlo_value* out) {
  int64_t n = tpuc_hlo_type_num_elements(t);
  size_t es = tpuc_dtype_size(t->dtype);
  tpuc_hlo_value flat;
  TRY(tpuc_hlo_reshape(fn, x, &n, 1, &flat));
  if (typed_storage(t->dtype)) {
    *out = flat;
    return NULL;
  }
  if (t->dtype == TPUC_DTYPE_PRED)
    return tpuc_hlo_convert(fn, flat, TPUC_DTYPE_U8, out);
  if (t->dtype == TPUC_DTYPE_U8) {
    *out = flat;
    return NULL;
  }
  if (tpuc_dtype_is_complex(t->dtype)) {
    /* complex -> (real, imaginary) pairs -> bytes */
    tpuc_hlo_value re, im, parts[2], pairs, b;
    int64_t col[2] = {n, 1};
    TRY(tpuc_hlo_unary(fn, TPUC_HLO_REAL, flat, &re));
    TRY(tpuc_hlo_unary(fn, TPUC_HLO_IMAG, flat, &im));
    TRY(tpuc_hlo_reshape(fn, re, col, 2, &parts[0]));
    TRY(tpuc_hlo_reshape(fn, im, col, 2, &parts[1]));
    TRY(tpuc_hlo_concatenate(fn, parts, 2, 1, &pairs));
    TRY(tpuc_hlo_bitcast_convert(fn, pairs, TPUC_DTYPE_U8, &b));
    int64_t total = n * (int64_t)es;
    return tpuc_hlo_reshape(fn, b, &total, 1, out);
  }
  tpuc_hlo_value b;
  TRY(tpuc_hlo_bitcast_convert(fn, flat, TPUC_DTYPE_U8, &b));
  if (es == 1) {
    *out = b;
    return NULL;
  }
  int64_t total = n * (int64_t)es;
  return tpuc_hlo_reshape(fn, b, &total, 1, out);
}

/* True when the view is the whole storage, densely, from its start. */
static bool whole_storage(const tpuc_view* v) {
  return v->offset == 0 && row_major(v) && v->dtype != TPUC_DTYPE_PRED &&
         (size_t)numel(v->sizes, v->rank) * tpuc_dtype_size(v->dtype) ==
             tpuc_storage_nbytes(v->storage);
}

/* A view that is a permutation of a dense block (a transpose or permute
 * of a contiguous tensor, what empty_like keeps for one): its dims in
 * storage order, largest stride first, size-1 dims last, in perm. */
static bool dense_permutation(const tpuc_view* v, int64_t* perm) {
  int order[TPUC_MAX_RANK];
  int k = moving_dims(v, order);
  if (k < 0) return false;
  int64_t expect = 1;
  for (int i = k - 1; i >= 0; i--) {
    if (v->strides[order[i]] != expect) return false;
    expect *= v->sizes[order[i]];
    perm[i] = order[i];
  }
  if (expect != numel(v->sizes, v->rank)) return false; /* expanded dims */
  for (int d = 0; d < v->rank; d++)
    if (v->sizes[d] == 1) perm[k++] = d;
  return true;
}

/* `flat` (n elements of v's dtype) with `value` written through v, a view
 * with gaps whose strides nest (nest_box, no expanded dims) at the run-time
 * offset `offset`: the box's region is read at the offset, its corner
 * updated, and the region written back, all in place for XLA. */
static tpuc_status* write_nested(tpuc_hlo_fn* fn, const tpuc_view* v,
                                 tpuc_hlo_value flat, int64_t n,
                                 tpuc_hlo_value offset, tpuc_hlo_value value,
                                 tpuc_hlo_value* out) {
  int order[TPUC_MAX_RANK];
  int64_t shape[TPUC_MAX_RANK + 1], len;
  int k = nest_box(v, order, shape, &len);
  if (k <= 0) return unimpl("a run-time offset for a view that does not nest");
  int64_t pad = len - view_span(v);
  tpuc_hlo_value padded, region;
  TRY(pad_tail(fn, flat, pad, &padded));
  TRY(tpuc_hlo_dynamic_slice(fn, padded, &offset, &len, &region));
  TRY(tpuc_hlo_reshape(fn, region, shape, k + 1, &region));
  /* The value's moving dims in storage order, then the box's trailing 1.
   * Size-1 dims are dropped before the transpose (see write_view). */
  int64_t moving[TPUC_MAX_RANK], corner[TPUC_MAX_RANK + 1];
  int64_t perm[TPUC_MAX_RANK];
  int at[TPUC_MAX_RANK], j = 0;
  for (int d = 0; d < v->rank; d++)
    if (v->sizes[d] != 1) at[d] = j, moving[j++] = v->sizes[d];
  bool identity = true;
  for (int i = 0; i < k; i++) {
    perm[i] = at[order[i]];
    identity &= perm[i] == i;
    corner[i] = v->sizes[order[i]];
  }
  corner[k] = 1;
  TRY(tpuc_hlo_reshape(fn, value, moving, k, &value));
  if (!identity) TRY(tpuc_hlo_transpose(fn, value, perm, &value));
  TRY(tpuc_hlo_reshape(fn, value, corner, k + 1, &value));
  int64_t zero = 0;
  tpuc_hlo_type st = tpuc_hlo_type_scalar(TPUC_DTYPE_S64);
  tpuc_hlo_value z, zeros[TPUC_MAX_RANK + 1];
  TRY(tpuc_hlo_constant_splat(fn, &st, &zero, &z));
  for (int i = 0; i <= k; i++) zeros[i] = z;
  TRY(tpuc_hlo_dynamic_update_slice(fn, region, value, zeros, &region));
  TRY(tpuc_hlo_reshape(fn, region, &len, 1, &region));
  TRY(tpuc_hlo_dynamic_update_slice(fn, padded, region, &offset, &padded));
  if (pad <= 0) {
    *out = padded;
    return NULL;
  }
  int64_t start = 0;
  return tpuc_hlo_slice(fn, padded, &start, &n, NULL, out);
}

/* The storage value (u8, or -1 when the view covers it all) with `value`
 * (v's dtype and sizes) written through view `v`: new u8 bytes. `offset`
 * is v's s64 offset operand (offset_operand), else -1. A dense
 * view is written as its block, transposed into storage order, so only
 * other views (overlapping or with gaps) scatter: XLA's CPU compiler can
 * take minutes over a scatter of many dims. */
static tpuc_status* write_view(tpuc_hlo_module* m, tpuc_hlo_fn* fn,
                               tpuc_hlo_value storage, const tpuc_view* v,
                               tpuc_hlo_value offset, tpuc_hlo_value value,
                               tpuc_hlo_value* out) {
  tpuc_hlo_type vt = tpuc_hlo_type_make(v->dtype, v->sizes, v->rank);
  if (storage < 0) return to_bytes(fn, value, &vt, out);
  int64_t count = numel(v->sizes, v->rank);
  if (count == 0) {
    *out = storage;
    return NULL;
  }
  tpuc_hlo_value flat;
  int64_t n = 0;
  TRY(storage_elements(fn, v, storage, &flat, &n));
  tpuc_hlo_value updated;
  int64_t perm[TPUC_MAX_RANK];
  bool dense = dense_permutation(v, perm);
  if (dense && !row_major(v)) {
    /* Size-1 dims are dropped first: XLA's CPU compiler loops forever over
     * a transpose of a reshape that only adds size-1 dims to a transpose
     * (what a read of the same layout produces). */
    int64_t sq[TPUC_MAX_RANK], at[TPUC_MAX_RANK], sperm[TPUC_MAX_RANK];
    int k = 0;
    for (int d = 0; d < v->rank; d++)
      if (v->sizes[d] != 1) at[d] = k, sq[k++] = v->sizes[d];
    for (int i = 0; i < k; i++) sperm[i] = at[perm[i]];
    TRY(tpuc_hlo_reshape(fn, value, sq, k, &value));
    TRY(tpuc_hlo_transpose(fn, value, sperm, &value));
  }
  if (offset >= 0 && dense) {
    /* offset_operand(v): a dense block at a run-time offset */
    TRY(tpuc_hlo_reshape(fn, value, &count, 1, &value));
    TRY(tpuc_hlo_dynamic_update_slice(fn, flat, value, &offset, &updated));
  } else if (offset >= 0) {
    TRY(write_nested(fn, v, flat, n, offset, value, &updated));
  } else if (dense) {
    tpuc_hlo_value parts[3];
    int64_t zero = 0, off = v->offset, end = v->offset + count;
    TRY(tpuc_hlo_slice(fn, flat, &zero, &off, NULL, &parts[0]));
    TRY(tpuc_hlo_reshape(fn, value, &count, 1, &parts[1]));
    TRY(tpuc_hlo_slice(fn, flat, &end, &n, NULL, &parts[2]));
    TRY(tpuc_hlo_concatenate(fn, parts, 3, 0, &updated));
  } else {
    tpuc_hlo_value idx;
    TRY(view_indices(fn, v, &idx));
    tpuc_hlo_type two[2] = {tpuc_hlo_type_scalar(v->dtype),
                            tpuc_hlo_type_scalar(v->dtype)};
    tpuc_hlo_fn* body = NULL;
    tpuc_hlo_value upd;
    TRY(tpuc_hlo_region_create(m, two, 2, &body));
    TRY(tpuc_hlo_get_arg(body, 1, &upd));
    TRY(tpuc_hlo_return(body, &upd, 1));
    int64_t inserted = 0, map = 0;
    tpuc_hlo_scatter_dims d;
    memset(&d, 0, sizeof d);
    d.inserted_window_dims = &inserted;
    d.num_inserted_window_dims = 1;
    d.scatter_dims_to_operand_dims = &map;
    d.num_scatter_dims_to_operand_dims = 1;
    d.index_vector_dim = v->rank;
    TRY(tpuc_hlo_scatter(fn, &flat, 1, idx, &value, &d, body, &updated));
  }
  tpuc_hlo_type ft = tpuc_hlo_type_make(v->dtype, &n, 1);
  return to_bytes(fn, updated, &ft, out);
}

/* Where the storage value that write target k is written into comes from
 * (the same answer when building the program and collecting its inputs). */
typedef enum {
  WSRC_NONE = 0, /* the target covers its whole storage */
  WSRC_ARG,      /* tensor argument `index` reads that storage */
  WSRC_LIST,     /* entry `index` of the flattened Tensor[] arguments */
  WSRC_TARGET,   /* an earlier target `index` wrote that storage */
  WSRC_INPUT,    /* an extra program input, the `index`-th */
} wsrc_kind;

typedef struct {
  wsrc_kind kind;
  int index;
} wsrc;

static wsrc write_source(const tpuc_op_arg* args, size_t nargs,
                         const tpuc_op_options* o, size_t k) {
  const tpuc_view* t = o->write_to[k];
  wsrc w = {WSRC_NONE, 0};
  int extra = 0;
  for (size_t j = 0; j < k; j++) {
    if (o->write_to[j] == NULL) continue;
    if (o->write_to[j]->storage == t->storage) w = (wsrc){WSRC_TARGET, (int)j};
    wsrc e = write_source(args, nargs, o, j);
    if (e.kind == WSRC_INPUT) extra++;
  }
  if (w.kind == WSRC_TARGET) return w;
  if (whole_storage(t)) return w;
  int flat = 0;
  for (size_t i = 0; i < nargs; i++) {
    if (args[i].kind == TPUC_OP_ARG_TENSOR &&
        args[i].view.storage == t->storage)
      return (wsrc){WSRC_ARG, (int)i};
    if (args[i].kind == TPUC_OP_ARG_TENSOR_LIST) {
      for (size_t e = 0; e < args[i].num_views; e++, flat++)
        if (args[i].views[e].storage == t->storage)
          return (wsrc){WSRC_LIST, flat};
    }
  }
  return (wsrc){WSRC_INPUT, extra};
}

const char* op_torch_dtype_name(tpuc_dtype d) {
  switch (d) {
    case TPUC_DTYPE_PRED: return "Bool";
    case TPUC_DTYPE_S8: return "Char";
    case TPUC_DTYPE_S16: return "Short";
    case TPUC_DTYPE_S32: return "Int";
    case TPUC_DTYPE_S64: return "Long";
    case TPUC_DTYPE_U8: return "Byte";
    case TPUC_DTYPE_U16: return "UInt16";
    case TPUC_DTYPE_U32: return "UInt32";
    case TPUC_DTYPE_U64: return "UInt64";
    case TPUC_DTYPE_F16: return "Half";
    case TPUC_DTYPE_BF16: return "BFloat16";
    case TPUC_DTYPE_F32: return "Float";
    case TPUC_DTYPE_F64: return "Double";
    case TPUC_DTYPE_C64: return "ComplexFloat";
    case TPUC_DTYPE_C128: return "ComplexDouble";
    case TPUC_DTYPE_F8E5M2: return "Float8_e5m2";
    case TPUC_DTYPE_F8E4M3FN: return "Float8_e4m3fn";
    case TPUC_DTYPE_F8E5M2FNUZ: return "Float8_e5m2fnuz";
    case TPUC_DTYPE_F8E4M3FNUZ: return "Float8_e4m3fnuz";
    default: return "?";
  }
}

bool tpuc_can_cast(tpuc_dtype from, tpuc_dtype to) {
  if (tpuc_dtype_is_complex(from) && !tpuc_dtype_is_complex(to)) return false;
  if (tpuc_dtype_is_float(from) &&
      !(tpuc_dtype_is_float(to) || tpuc_dtype_is_complex(to)))
    return false;
  if (from != TPUC_DTYPE_PRED && to == TPUC_DTYPE_PRED) return false;
  return true;
}

static void shape_text(const int64_t* d, int rank, char* buf, size_t cap) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < rank && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, i ? ", %lld" : "%lld",
                          (long long)d[i]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
}

tpuc_status* op_broadcast_shape(const op_ctx* c, const int* which, size_t n,
                                tpuc_hlo_type* out) {
  memset(out, 0, sizeof *out);
  for (size_t k = 0; k < n; k++) {
    const tpuc_hlo_type* t = &c->types[which[k]];
    if (t->rank > out->rank) {
      int shift = t->rank - out->rank;
      for (int d = out->rank - 1; d >= 0; d--)
        out->dims[d + shift] = out->dims[d];
      for (int d = 0; d < shift; d++) out->dims[d] = 1;
      out->rank = t->rank;
    }
    for (int d = 0; d < t->rank; d++) {
      int od = out->rank - t->rank + d;
      int64_t a = out->dims[od], b = t->dims[d];
      if (a == b || b == 1) continue;
      if (a == 1) {
        out->dims[od] = b;
        continue;
      }
      return tpuc_status_make(
          TPUC_INVALID_ARGUMENT,
          "The size of tensor a (%lld) must match the size "
          "of tensor b (%lld) at non-singleton dimension %d",
          (long long)a, (long long)b, od);
    }
  }
  return NULL;
}

tpuc_status* op_operand(op_ctx* c, int i, tpuc_dtype dtype,
                        const tpuc_hlo_type* shape, tpuc_hlo_value* out) {
  tpuc_hlo_value v = c->vals[i];
  const tpuc_hlo_type* t = &c->types[i];
  if (c->args[i].kind == TPUC_OP_ARG_SCALAR &&
      c->args[i].scalar == TPUC_SCALAR_COMPLEX && !tpuc_dtype_is_complex(dtype))
    return unimpl("a complex scalar into a real result: the CPU says why");
  if (t->dtype != dtype) TRY(tpuc_hlo_convert(c->fn, v, dtype, &v));
  if (t->rank == shape->rank) {
    bool same = true;
    for (int d = 0; d < t->rank; d++) same &= t->dims[d] == shape->dims[d];
    if (same) {
      *out = v;
      return NULL;
    }
  }
  /* Drop size-1 dims that broadcast, then broadcast_in_dim. */
  int64_t kept[TPUC_MAX_RANK], map[TPUC_MAX_RANK];
  int nk = 0, shift = shape->rank - t->rank;
  for (int d = 0; d < t->rank; d++) {
    if (t->dims[d] == 1 && shape->dims[d + shift] != 1) continue;
    kept[nk] = t->dims[d];
    map[nk] = d + shift;
    nk++;
  }
  if (nk != t->rank) TRY(tpuc_hlo_reshape(c->fn, v, kept, nk, &v));
  return tpuc_hlo_broadcast_in_dim(c->fn, v, shape->dims, shape->rank, map,
                                   out);
}

/* ------------------------------- table --------------------------------- */

size_t tpuc_op_table_size(void) {
  size_t n = 0;
  while (ops_entry(n) != NULL) n++;
  return n;
}

const char* tpuc_op_table_name(size_t i) {
  const op_entry* e = ops_entry(i);
  return e ? e->name : NULL;
}

bool tpuc_op_is_random(int index) {
  return index >= 0 && ops_entry_is_random((size_t)index);
}

int tpuc_op_find(const char* name) {
  for (size_t i = 0; name && ops_entry(i) != NULL; i++)
    if (strcmp(ops_entry(i)->name, name) == 0) return (int)i;
  return -1;
}

/* ------------------------- per-call program cache ------------------------ */

/* Calls with the same op, argument kinds, dtypes, shapes, strides, offsets
 * and storage sizes (never scalar values) run the same program: the
 * executable is remembered per such key, so repeated calls skip building
 * and printing the module. */
typedef struct {
  char* key;
  size_t key_len;
  tpuc_fingerprint fp;
  tpuc_client* client;
  tpuc_executable* exe;
  fz_text* text; /* the program, for fused segments */
  size_t nouts;
  tpuc_hlo_type out_types[OP_MAX_OUTS];
  /* The program's outputs (bytes of the defined results, the check). */
  tpuc_hlo_type exec_types[OP_MAX_OUTS + 1];
  op_host_check host_checks[OP_MAX_HOST_CHECKS];
  size_t n_host_checks;
  /* The program has one more output: the lowering's argument check. */
  bool has_check;
  tpuc_code check_code;
  const char* check_msg;
  /* A random call's counters come from tpuc::random_words of this count
   * (draw_words), 0 when from the generator state; `calls` counts the
   * calls that ran it so (words_hot). */
  int64_t words;
  uint32_t calls;
} prog_entry;

static pthread_mutex_t g_prog_mu = PTHREAD_MUTEX_INITIALIZER;
static prog_entry* g_progs = NULL;
static size_t g_progs_cap = 0, g_progs_count = 0;

typedef struct {
  char buf[2048];
  size_t len;
  bool overflow;
} keybuf;

static void key_put(keybuf* k, const void* p, size_t n) {
  if (k->len + n > sizeof k->buf) {
    k->overflow = true;
    return;
  }
  memcpy(k->buf + k->len, p, n);
  k->len += n;
}

static void key_view(keybuf* k, const tpuc_view* v, bool write) {
  bool none = v->storage == NULL;
  key_put(k, &none, sizeof none);
  if (none) return;
  size_t nbytes = tpuc_storage_nbytes(v->storage);
  key_put(k, &v->dtype, sizeof v->dtype);
  key_put(k, &v->rank, sizeof v->rank);
  key_put(k, v->sizes, sizeof(int64_t) * (size_t)v->rank);
  key_put(k, v->strides, sizeof(int64_t) * (size_t)v->rank);
  bool operand = offset_operand(v, write);
  key_put(k, &operand, sizeof operand);
  if (!operand) key_put(k, &v->offset, sizeof v->offset);
  key_put(k, &nbytes, sizeof nbytes);
  tpuc_dtype held = tpuc_storage_value_dtype(v->storage);
  key_put(k, &held, sizeof held);
}

/* Ops whose result shape depends on their scalars' values (arange's
 * length), or whose range checks and edges are read on the host (histc's
 * min and max): those values are part of the program key. */
static bool scalar_keyed(int index) {
  const op_entry* e = index >= 0 ? ops_entry((size_t)index) : NULL;
  return e != NULL && (strncmp(e->name, "aten::arange", 12) == 0 ||
                       strncmp(e->name, "aten::histc", 11) == 0);
}

static void make_key(int index, const tpuc_op_arg* args, size_t nargs,
                     const tpuc_op_options* o, keybuf* k) {
  k->len = 0;
  k->overflow = false;
  key_put(k, &index, sizeof index);
  int cls = op_scalar_class(index >= 0 ? ops_entry((size_t)index) : NULL,
                            args, nargs);
  key_put(k, &cls, sizeof cls);
  if (scalar_keyed(index))
    for (size_t i = 0; i < nargs; i++)
      if (args[i].kind == TPUC_OP_ARG_SCALAR) {
        key_put(k, &args[i].f, sizeof args[i].f);
        key_put(k, &args[i].i, sizeof args[i].i);
      }
  key_put(k, &o->default_float, sizeof o->default_float);
  key_put(k, &o->matmul_precision, sizeof o->matmul_precision);
  /* Every read view's offset first, so the decisions below (and the
   * call's later ones) see one table. */
  for (size_t i = 0; i < nargs; i++) {
    if (args[i].kind == TPUC_OP_ARG_TENSOR) note_read_offset(&args[i].view);
    if (args[i].kind == TPUC_OP_ARG_TENSOR_LIST)
      for (size_t e = 0; e < args[i].num_views; e++)
        note_read_offset(&args[i].views[e]);
  }
  for (size_t i = 0; i < nargs; i++) {
    const tpuc_op_arg* a = &args[i];
    key_put(k, &a->kind, sizeof a->kind);
    if (a->kind == TPUC_OP_ARG_TENSOR) {
      key_view(k, &a->view, false);
      key_put(k, &a->conj, sizeof a->conj);
      key_put(k, &a->neg, sizeof a->neg);
    } else if (a->kind == TPUC_OP_ARG_SCALAR) {
      key_put(k, &a->scalar, sizeof a->scalar);
      key_put(k, &a->scalar_is_tensor, sizeof a->scalar_is_tensor);
      key_put(k, &a->scalar_dtype, sizeof a->scalar_dtype);
    } else if (a->kind == TPUC_OP_ARG_INT || a->kind == TPUC_OP_ARG_BOOL) {
      key_put(k, &a->i, sizeof a->i);
    } else if (a->kind == TPUC_OP_ARG_INT_LIST) {
      key_put(k, &a->list_len, sizeof a->list_len);
      key_put(k, a->list, sizeof(int64_t) * a->list_len);
    } else if (a->kind == TPUC_OP_ARG_DTYPE) {
      key_put(k, &a->dtype, sizeof a->dtype);
    } else if (a->kind == TPUC_OP_ARG_STRING) {
      size_t n = a->str ? strlen(a->str) : 0;
      key_put(k, &n, sizeof n);
      key_put(k, a->str, n);
    } else if (a->kind == TPUC_OP_ARG_TENSOR_LIST) {
      key_put(k, &a->num_views, sizeof a->num_views);
      for (size_t e = 0; e < a->num_views; e++)
        key_view(k, &a->views[e], false);
    }
  }
  for (size_t r = 0; r < OP_MAX_OUTS; r++) {
    bool has = o->write_to[r] != NULL;
    key_put(k, &has, sizeof has);
    if (!has) continue;
    key_view(k, o->write_to[r], true);
    wsrc w = write_source(args, nargs, o, r);
    key_put(k, &w, sizeof w);
  }
}

/* The entry of `k`, or NULL; the caller holds g_prog_mu. */
static prog_entry* prog_slot(tpuc_client* client, const keybuf* k,
                             tpuc_fingerprint fp) {
  if (g_progs_cap == 0) return NULL;
  size_t mask = g_progs_cap - 1;
  for (size_t i = (size_t)fp.lo & mask; g_progs[i].key; i = (i + 1) & mask) {
    prog_entry* e = &g_progs[i];
    if (tpuc_fingerprint_eq(e->fp, fp) && e->client == client &&
        e->key_len == k->len && memcmp(e->key, k->buf, k->len) == 0)
      return e;
  }
  return NULL;
}

/* Finds the entry; returns it with its executable retained, or NULL. */
static prog_entry* prog_find(tpuc_client* client, const keybuf* k,
                             tpuc_fingerprint fp, prog_entry* copy) {
  pthread_mutex_lock(&g_prog_mu);
  prog_entry* e = prog_slot(client, k, fp);
  if (e != NULL) {
    *copy = *e;
    tpuc_executable_retain(e->exe);
    fz_text_retain(e->text);
  }
  pthread_mutex_unlock(&g_prog_mu);
  return e != NULL ? copy : NULL;
}

static void on_client_destroy(tpuc_client* client, void* user) {
  (void)user;
  tpuc_op_cache_clear(client);
}

/* The most per-call programs remembered; past it the table starts over
 * (a forgotten program comes back from the compile cache's disk tier in
 * about a millisecond). Bounded because every loaded executable holds
 * memory and code mappings (a process has at most vm.max_map_count). */
#define OP_PROGRAM_CACHE_MAX 2048

/* Gives the entry of `k` the executable compiled for it later (an entry
 * recorded in fused mode has none until a call runs by itself). */
static void prog_set_exe(tpuc_client* client, const keybuf* k,
                         tpuc_fingerprint fp, tpuc_executable* exe) {
  pthread_mutex_lock(&g_prog_mu);
  prog_entry* e = prog_slot(client, k, fp);
  if (e != NULL && e->exe == NULL) {
    tpuc_executable_retain(exe);
    e->exe = exe;
  }
  pthread_mutex_unlock(&g_prog_mu);
}

/* Counts a call of `k`'s program that took its counters from
 * tpuc::random_words; true for the call that makes it hot (words_hot). */
static bool prog_words_call(tpuc_client* client, const keybuf* k,
                            tpuc_fingerprint fp, uint32_t hot) {
  pthread_mutex_lock(&g_prog_mu);
  prog_entry* e = prog_slot(client, k, fp);
  bool now = e != NULL && e->words > 0 && ++e->calls == hot;
  pthread_mutex_unlock(&g_prog_mu);
  return now;
}

/* The entry of `k` draws its counters itself from now on: `exe` and
 * `text` (the program that does) replace its own. */
static void prog_unsplit(tpuc_client* client, const keybuf* k,
                         tpuc_fingerprint fp, tpuc_executable* exe,
                         fz_text* text) {
  tpuc_executable* old_exe = NULL;
  fz_text* old_text = NULL;
  pthread_mutex_lock(&g_prog_mu);
  prog_entry* e = prog_slot(client, k, fp);
  if (e != NULL) {
    old_exe = e->exe;
    old_text = e->text;
    tpuc_executable_retain(exe);
    fz_text_retain(text);
    e->exe = exe;
    e->text = text;
    e->words = 0;
  }
  pthread_mutex_unlock(&g_prog_mu);
  if (old_exe != NULL) tpuc_executable_release(old_exe);
  fz_text_release(old_text);
}

static void prog_insert(tpuc_client* client, const keybuf* k,
                        tpuc_fingerprint fp, tpuc_executable* exe,
                        fz_text* text, size_t nouts,
                        const tpuc_hlo_type* types,
                        const tpuc_hlo_type* exec_types, const op_ctx* c) {
  pthread_mutex_lock(&g_prog_mu);
  if (g_progs_count >= OP_PROGRAM_CACHE_MAX) {
    prog_entry* old = g_progs;
    size_t cap = g_progs_cap;
    g_progs = NULL;
    g_progs_cap = g_progs_count = 0;
    pthread_mutex_unlock(&g_prog_mu);
    for (size_t i = 0; i < cap; i++) {
      if (old[i].key == NULL) continue;
      tpuc_executable_release(old[i].exe);
      fz_text_release(old[i].text);
      free(old[i].key);
    }
    free(old);
    pthread_mutex_lock(&g_prog_mu);
  }
  if ((g_progs_count + 1) * 2 > g_progs_cap) {
    size_t cap = g_progs_cap ? g_progs_cap * 2 : 256;
    prog_entry* grown = calloc(cap, sizeof *grown);
    if (grown == NULL) {
      pthread_mutex_unlock(&g_prog_mu);
      return;
    }
    for (size_t i = 0; i < g_progs_cap; i++) {
      if (g_progs[i].key == NULL) continue;
      size_t j = (size_t)g_progs[i].fp.lo & (cap - 1);
      while (grown[j].key) j = (j + 1) & (cap - 1);
      grown[j] = g_progs[i];
    }
    free(g_progs);
    g_progs = grown;
    g_progs_cap = cap;
  }
  char* key = malloc(k->len);
  if (key != NULL) {
    memcpy(key, k->buf, k->len);
    size_t j = (size_t)fp.lo & (g_progs_cap - 1);
    while (g_progs[j].key) j = (j + 1) & (g_progs_cap - 1);
    prog_entry* e = &g_progs[j];
    e->key = key;
    e->key_len = k->len;
    e->fp = fp;
    e->client = client;
    e->exe = exe;
    tpuc_executable_retain(exe);
    e->text = text;
    fz_text_retain(text);
    e->nouts = nouts;
    memcpy(e->out_types, types, sizeof(tpuc_hlo_type) * nouts);
    memcpy(e->exec_types, exec_types, sizeof e->exec_types);
    e->has_check = c->has_check;
    memcpy(e->host_checks, c->host_checks, sizeof e->host_checks);
    e->n_host_checks = c->n_host_checks;
    e->check_code = c->check_code;
    e->check_msg = c->check_msg;
    e->words = c->words_total;
    e->calls = 0;
    g_progs_count++;
  }
  pthread_mutex_unlock(&g_prog_mu);
}

static void scalar_cache_clear(tpuc_client* client);

void tpuc_op_cache_clear(tpuc_client* client) {
  scalar_cache_clear(client);
  /* Move the surviving entries into a fresh table under the lock; release
   * the removed ones after it. */
  pthread_mutex_lock(&g_prog_mu);
  prog_entry* old = g_progs;
  size_t cap = g_progs_cap;
  prog_entry* kept = cap ? calloc(cap, sizeof *kept) : NULL;
  prog_entry* gone = cap ? calloc(cap, sizeof *gone) : NULL;
  size_t nkept = 0, ngone = 0;
  if (cap && (kept == NULL || gone == NULL)) {
    /* No memory to sort them out: forget everything. */
    free(kept);
    kept = NULL;
    free(gone);
    gone = old;
    ngone = cap;
    g_progs = NULL;
    g_progs_cap = g_progs_count = 0;
  } else {
    for (size_t i = 0; i < cap; i++) {
      if (old[i].key == NULL) continue;
      if (client != NULL && old[i].client != client) {
        size_t j = (size_t)old[i].fp.lo & (cap - 1);
        while (kept[j].key) j = (j + 1) & (cap - 1);
        kept[j] = old[i];
        nkept++;
      } else {
        gone[ngone++] = old[i];
      }
    }
    g_progs = kept;
    g_progs_cap = kept ? cap : 0;
    g_progs_count = nkept;
    free(old);
  }
  pthread_mutex_unlock(&g_prog_mu);
  for (size_t i = 0; i < ngone; i++) {
    if (gone[i].key == NULL) continue;
    tpuc_executable_release(gone[i].exe);
    fz_text_release(gone[i].text);
    free(gone[i].key);
  }
  free(gone);
}

/* --------------------------------- run --------------------------------- */

typedef struct {
  tpuc_buffer* in[2 * (OP_MAX_ARGS + OP_MAX_LIST + OP_MAX_OUTS) + 1];
  size_t nin;
} run_inputs;

static tpuc_status* collect_view(const tpuc_view* v, size_t i, int device,
                                 run_inputs* r) {
  TRY(tpuc_view_check(v));
  if (tpuc_storage_device(v->storage) != device)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "argument %zu is on device %d, the op runs on %d",
                            i, tpuc_storage_device(v->storage), device);
  if (tpuc_storage_is_unwritten(v->storage) &&
      tpuc_eager_mode_current() == TPUC_EAGER_FUSED)
    TRY(fz_record_zeros(tpuc_storage_client(v->storage), device, v->storage));
  TRY(tpuc_storage_value(v->storage, &r->in[r->nin]));
  r->nin++;
  return NULL;
}

static void release_inputs(run_inputs* r) {
  for (size_t i = 0; i < r->nin; i++) tpuc_buffer_release(r->in[i]);
  r->nin = 0;
}

/* Scalar arguments as device buffers, remembered by (client, device,
 * kind, bits): buffers are immutable, so `x * 0.5` on every step reuses one
 * instead of a host-to-device transfer per call. A small direct-mapped
 * table; a collision just replaces the entry. */
#define SCALAR_CACHE_SIZE 64

static void on_client_destroy(tpuc_client* client, void* user);

typedef struct {
  tpuc_client* client;
  int device;
  bool is_float;
  uint64_t bits;
  tpuc_buffer* buffer;
} scalar_entry;

static pthread_mutex_t g_scalar_mu = PTHREAD_MUTEX_INITIALIZER;
static scalar_entry g_scalars[SCALAR_CACHE_SIZE];

static tpuc_status* scalar_buffer(tpuc_client* client, int device,
                                  bool is_float, const void* value,
                                  tpuc_buffer** out) {
  uint64_t bits = 0;
  memcpy(&bits, value, 8);
  size_t slot = (size_t)((bits * 0x9E3779B97F4A7C15ULL) >> 58) ^
                (size_t)(is_float ? 1 : 0) ^ (size_t)device;
  slot %= SCALAR_CACHE_SIZE;
  pthread_mutex_lock(&g_scalar_mu);
  scalar_entry* e = &g_scalars[slot];
  if (e->buffer != NULL && e->client == client && e->device == device &&
      e->is_float == is_float && e->bits == bits) {
    tpuc_buffer_retain(e->buffer);
    *out = e->buffer;
    pthread_mutex_unlock(&g_scalar_mu);
    return NULL;
  }
  pthread_mutex_unlock(&g_scalar_mu);
  tpuc_buffer* b = NULL;
  TRY(tpuc_buffer_from_host(client, device,
                            is_float ? TPUC_DTYPE_F64 : TPUC_DTYPE_S64, NULL,
                            0, value, NULL, &b));
  /* Remember it only if the cache will hear of the client's destruction. */
  tpuc_status* reg = tpuc_client_on_destroy(client, on_client_destroy, NULL);
  if (reg != NULL) {
    tpuc_status_free(reg);
    *out = b;
    return NULL;
  }
  tpuc_buffer* old = NULL;
  pthread_mutex_lock(&g_scalar_mu);
  old = e->buffer;
  e->client = client;
  e->device = device;
  e->is_float = is_float;
  e->bits = bits;
  e->buffer = b;
  tpuc_buffer_retain(b);
  pthread_mutex_unlock(&g_scalar_mu);
  if (old != NULL) tpuc_buffer_release(old);
  *out = b;
  return NULL;
}

/* Forgets the scalar buffers of `client` (all when NULL). */
static void scalar_cache_clear(tpuc_client* client) {
  tpuc_buffer* gone[SCALAR_CACHE_SIZE];
  size_t n = 0;
  pthread_mutex_lock(&g_scalar_mu);
  for (size_t i = 0; i < SCALAR_CACHE_SIZE; i++) {
    scalar_entry* e = &g_scalars[i];
    if (e->buffer == NULL || (client != NULL && e->client != client)) continue;
    gone[n++] = e->buffer;
    memset(e, 0, sizeof *e);
  }
  pthread_mutex_unlock(&g_scalar_mu);
  for (size_t i = 0; i < n; i++) tpuc_buffer_release(gone[i]);
}

/* View v's offset as an s64 input, where it is an operand of the program
 * (offset_operand). */
static tpuc_status* collect_offset(const tpuc_view* v, bool write,
                                   tpuc_client* client, int device,
                                   run_inputs* r) {
  if (!offset_operand(v, write)) return NULL;
  TRY(scalar_buffer(client, device, false, &v->offset, &r->in[r->nin]));
  r->nin++;
  return NULL;
}

/* The buffers the program takes for argument `a`: its storage's value (and
 * its view's offset, offset_operand), or the scalar as a rank-0 f64/i64
 * buffer. */
static tpuc_status* collect_input(const tpuc_op_arg* a, size_t i,
                                  tpuc_client* client, int device,
                                  run_inputs* r) {
  if (a->kind == TPUC_OP_ARG_TENSOR) {
    TRY(collect_view(&a->view, i, device, r));
    TRY(collect_offset(&a->view, false, client, device, r));
  } else if (a->kind == TPUC_OP_ARG_TENSOR_LIST) {
    for (size_t e = 0; e < a->num_views; e++)
      if (a->views[e].storage != NULL) {
        TRY(collect_view(&a->views[e], i, device, r));
        TRY(collect_offset(&a->views[e], false, client, device, r));
      }
  } else if (a->kind == TPUC_OP_ARG_SCALAR &&
             a->scalar == TPUC_SCALAR_COMPLEX) {
    /* (rare: not cached) */
    double v[2] = {a->f, a->f_im};
    TRY(tpuc_buffer_from_host(client, device, TPUC_DTYPE_C128, NULL, 0, v,
                              NULL, &r->in[r->nin]));
    r->nin++;
  } else if (a->kind == TPUC_OP_ARG_SCALAR) {
    bool is_float = a->scalar == TPUC_SCALAR_FLOAT;
    TRY(scalar_buffer(client, device, is_float,
                      is_float ? (const void*)&a->f : (const void*)&a->i,
                      &r->in[r->nin]));
    r->nin++;
  }
  return NULL;
}

/* Declares view v's offset operand (offset_operand), else sets -1. */
static tpuc_status* declare_offset(tpuc_hlo_fn* fn, const tpuc_view* v,
                                   bool write, tpuc_hlo_value* out) {
  *out = -1;
  if (!offset_operand(v, write)) return NULL;
  tpuc_hlo_type t = tpuc_hlo_type_scalar(TPUC_DTYPE_S64);
  return tpuc_hlo_arg(fn, &t, out);
}

/* Declares argument i as @main arguments and reads its value. */
static tpuc_status* declare_arg(op_ctx* c, size_t i) {
  const tpuc_op_arg* a = &c->args[i];
  if (a->kind == TPUC_OP_ARG_TENSOR) {
    TRY(tpuc_view_check(&a->view));
    tpuc_hlo_type st = storage_type(a->view.storage);
    tpuc_hlo_value sv;
    TRY(tpuc_hlo_arg(c->fn, &st, &sv));
    c->storage_vals[i] = sv;
    tpuc_hlo_value off;
    TRY(declare_offset(c->fn, &a->view, false, &off));
    TRY(read_view(c->fn, &a->view, sv, off, &c->vals[i]));
    if (a->conj && tpuc_dtype_is_complex(a->view.dtype)) {
      tpuc_hlo_value re, im;
      TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_REAL, c->vals[i], &re));
      TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_IMAG, c->vals[i], &im));
      TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NEG, im, &im));
      TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_COMPLEX, re, im, &c->vals[i]));
    }
    if (a->neg) {
      if (a->view.dtype == TPUC_DTYPE_PRED) return unimpl("negative bool");
      TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NEG, c->vals[i], &c->vals[i]));
    }
    c->types[i] =
        tpuc_hlo_type_make(a->view.dtype, a->view.sizes, a->view.rank);
  } else if (a->kind == TPUC_OP_ARG_SCALAR) {
    bool is_float = a->scalar == TPUC_SCALAR_FLOAT;
    tpuc_hlo_type st = tpuc_hlo_type_scalar(
        a->scalar == TPUC_SCALAR_COMPLEX ? TPUC_DTYPE_C128
        : is_float                      ? TPUC_DTYPE_F64
                                        : TPUC_DTYPE_S64);
    TRY(tpuc_hlo_arg(c->fn, &st, &c->vals[i]));
    c->types[i] = st;
  } else if (a->kind == TPUC_OP_ARG_TENSOR_LIST) {
    if (c->list_used + a->num_views > OP_MAX_LIST)
      return unimpl("too many tensors in list arguments");
    c->vals[i] = -1;
    c->list_vals[i] = &c->list_pool[c->list_used];
    c->list_types[i] = &c->list_pool_types[c->list_used];
    c->list_len[i] = a->num_views;
    for (size_t e = 0; e < a->num_views; e++) {
      const tpuc_view* v = &a->views[e];
      size_t slot = c->list_used++;
      c->list_pool[slot] = -1;
      c->list_storage[slot] = -1;
      memset(&c->list_pool_types[slot], 0, sizeof c->list_pool_types[slot]);
      if (v->storage == NULL) continue;
      TRY(tpuc_view_check(v));
      tpuc_hlo_type st = storage_type(v->storage);
      TRY(tpuc_hlo_arg(c->fn, &st, &c->list_storage[slot]));
      tpuc_hlo_value off;
      TRY(declare_offset(c->fn, v, false, &off));
      TRY(read_view(c->fn, v, c->list_storage[slot], off,
                    &c->list_pool[slot]));
      c->list_pool_types[slot] = tpuc_hlo_type_make(v->dtype, v->sizes,
                                                    v->rank);
    }
  } else {
    c->vals[i] = -1;
  }
  return NULL;
}

/* Ops whose lowerings are written for complex tensors too (reviewed one
 * by one); any other op with a complex tensor runs on the CPU. */
static bool complex_ok(const char* name) {
  static const char* const kBases[] = {
      "add",    "add_",   "sub",      "sub_",  "mul",       "mul_",
      "div",    "div_",   "neg",      "neg_",  "exp",       "exp_",
      "log",    "log_",   "sqrt",     "sqrt_", "tanh",      "tanh_",
      "sin",    "sin_",   "cos",      "cos_",  "where",     "sum",
      "mean",   "mm",     "bmm",      "fill",  "fill_",     "zero_",
      "cat",    "flip",   "roll",     "tril",  "tril_",     "triu",
      "triu_",  "repeat", "eq",       "ne",    "reciprocal", "reciprocal_",
      "copy",   "index_select", "gather", "constant_pad_nd",
      "_fft_r2c", "_fft_c2r", "_fft_c2c", "conj_physical", "conj_physical_",
      "_conj_physical", "abs", "rsqrt", "rsqrt_", "sgn", "sgn_",
      "index_add", "index_add_", "index_copy", "index_copy_",
      "index_fill", "index_fill_", "scatter_add",
      "scatter_add_", "index_put", "index_put_", "_index_put_impl_",
      "masked_fill", "masked_fill_", "index", "cumsum", "cumsum_",
      "cumprod", "cumprod_", "addmm", "addmm_", "addmv", "addmv_", "mv",
      "dot", "vdot", "baddbmm", "baddbmm_", "linalg_vector_norm",
      "complex", "polar"};
  const char* base = strstr(name, "::");
  base = base ? base + 2 : name;
  size_t len = strcspn(base, ".");
  for (size_t i = 0; i < sizeof kBases / sizeof kBases[0]; i++)
    if (strlen(kBases[i]) == len && strncmp(kBases[i], base, len) == 0)
      return true;
  /* Each op file lists its own complex-ready ops. */
  const char* const* const kFiles[] = {op_complex_index, op_complex_nn,
                                       op_complex_math, op_complex_special,
                                       op_complex_linalg, op_complex_random};
  for (size_t f = 0; f < sizeof kFiles / sizeof kFiles[0]; f++)
    for (const char* const* n = kFiles[f]; *n != NULL; n++)
      if (strlen(*n) == len && strncmp(*n, base, len) == 0) return true;
  return false;
}

static bool view_complex(const tpuc_view* v) {
  return v != NULL && v->storage != NULL && tpuc_dtype_is_complex(v->dtype);
}

/* True when the call holds a complex tensor (argument or write target) or
 * a complex scalar. */
static bool call_has_complex(const op_ctx* c) {
  for (size_t i = 0; i < c->nargs; i++) {
    const tpuc_op_arg* a = &c->args[i];
    if (a->kind == TPUC_OP_ARG_TENSOR && view_complex(&a->view)) return true;
    if (a->kind == TPUC_OP_ARG_SCALAR && a->scalar == TPUC_SCALAR_COMPLEX)
      return true;
    if (a->kind == TPUC_OP_ARG_TENSOR_LIST)
      for (size_t k = 0; k < a->num_views; k++)
        if (view_complex(&a->views[k])) return true;
  }
  for (size_t k = 0; k < OP_MAX_OUTS; k++)
    if (view_complex(c->opts->write_to[k])) return true;
  return false;
}

/* Builds, prints and compiles the program of one call. */
static tpuc_status* build_program(tpuc_client* client, const op_entry* e,
                                  op_ctx* c, tpuc_fingerprint fp,
                                  bool compile, tpuc_executable** exe,
                                  fz_text** kept, tpuc_hlo_type* out_types,
                                  tpuc_hlo_type* exec_types) {
  if (call_has_complex(c) && !complex_ok(e->name))
    return unimpl("complex tensors run on the CPU for this op");
  tpuc_hlo_module* m = NULL;
  TRY(tpuc_hlo_module_create("tpuc_op", &m));
  c->module = m;
  tpuc_status* st = tpuc_hlo_main(m, &c->fn);
  c->main_fn = c->fn;
  c->rng = -1;
  c->words = -1;
  c->words_used = 0;
  c->words_region = false;
  if (st == NULL && c->random && c->words_total > 0) {
    int64_t n = 2 * c->words_total;
    tpuc_hlo_type wt = tpuc_hlo_type_make(TPUC_DTYPE_U32, &n, 1);
    st = tpuc_hlo_arg(c->fn, &wt, &c->words);
  } else if (st == NULL && c->random) {
    int64_t two = 2;
    tpuc_hlo_type rt = tpuc_hlo_type_make(TPUC_DTYPE_U64, &two, 1);
    st = tpuc_hlo_arg(c->fn, &rt, &c->rng);
  }
  for (size_t i = 0; st == NULL && i < c->nargs; i++) st = declare_arg(c, i);
  if (st == NULL) st = e->lower(c, e->param);
  if (st == NULL && (c->nouts == 0 || c->nouts > OP_MAX_OUTS))
    st = tpuc_status_make(TPUC_INTERNAL, "%s produced %zu results", e->name,
                          c->nouts);
  tpuc_hlo_value bytes[OP_MAX_OUTS + 1], written_bytes[OP_MAX_OUTS];
  /* Extra inputs: storages of write targets no argument reads, and the
   * targets' offsets (offset_operand). */
  tpuc_hlo_value extra[OP_MAX_OUTS], target_offset[OP_MAX_OUTS];
  for (size_t k = 0; st == NULL && k < OP_MAX_OUTS; k++) {
    target_offset[k] = -1;
    if (c->opts->write_to[k] == NULL) continue;
    if (k >= c->nouts) {
      st = tpuc_status_make(TPUC_INTERNAL, "%s has no result %zu to write",
                            e->name, k);
      break;
    }
    wsrc w = write_source(c->args, c->nargs, c->opts, k);
    if (w.kind == WSRC_INPUT) {
      tpuc_hlo_type ut = storage_type(c->opts->write_to[k]->storage);
      st = tpuc_hlo_arg(c->fn, &ut, &extra[w.index]);
    }
    if (st == NULL)
      st = declare_offset(c->fn, c->opts->write_to[k], true,
                          &target_offset[k]);
  }
  size_t nret = 0;
  for (size_t k = 0; st == NULL && k < c->nouts; k++) {
    const tpuc_view* t = c->opts->write_to[k];
    if (c->outs[k] < 0) {
      /* An undefined result (a gradient output_mask leaves out). */
      if (t != NULL)
        st = tpuc_status_make(TPUC_INTERNAL, "%s: undefined result %zu is "
                              "written", e->name, k);
      out_types[k].rank = -1;
      continue;
    }
    st = tpuc_hlo_value_type(c->fn, c->outs[k], &out_types[k]);
    if (st == NULL && tpuc_dtype_is_complex(out_types[k].dtype) &&
        !complex_ok(e->name)) {
      st = unimpl("complex results run on the CPU");
      break;
    }
    if (st != NULL || t == NULL) {
      if (st == NULL)
        st = to_bytes(c->fn, c->outs[k], &out_types[k], &bytes[nret++]);
      continue;
    }
    const tpuc_hlo_type* rt = &out_types[k];
    if (!tpuc_can_cast(rt->dtype, t->dtype)) {
      st = tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "result type %s can't be cast to the desired "
                            "output type %s",
                            op_torch_dtype_name(rt->dtype),
                            op_torch_dtype_name(t->dtype));
      break;
    }
    bool same = rt->rank == t->rank;
    for (int d = 0; same && d < t->rank; d++) same = rt->dims[d] == t->sizes[d];
    if (!same) {
      char a[160], b[160];
      shape_text(t->sizes, t->rank, a, sizeof a);
      shape_text(rt->dims, rt->rank, b, sizeof b);
      st = tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "output with shape %s doesn't match the broadcast "
                            "shape %s",
                            a, b);
      break;
    }
    tpuc_hlo_value v = c->outs[k];
    if (rt->dtype != t->dtype) st = tpuc_hlo_convert(c->fn, v, t->dtype, &v);
    wsrc w = write_source(c->args, c->nargs, c->opts, k);
    tpuc_hlo_value base = w.kind == WSRC_ARG      ? c->storage_vals[w.index]
                          : w.kind == WSRC_LIST   ? c->list_storage[w.index]
                          : w.kind == WSRC_TARGET ? written_bytes[w.index]
                          : w.kind == WSRC_INPUT  ? extra[w.index]
                                                  : -1;
    if (st == NULL)
      st = write_view(m, c->fn, base, t, target_offset[k], v, &bytes[nret]);
    written_bytes[k] = bytes[nret++];
    out_types[k] = tpuc_hlo_type_make(t->dtype, t->sizes, t->rank);
  }
  if (st == NULL && c->has_check) {
    tpuc_hlo_type pt = tpuc_hlo_type_scalar(TPUC_DTYPE_PRED);
    st = to_bytes(c->fn, c->check, &pt, &bytes[nret]);
    nret++;
  }
  for (size_t k = 0; st == NULL && k < nret; k++)
    st = tpuc_hlo_value_type(c->fn, bytes[k], &exec_types[k]);
  if (st == NULL) st = tpuc_hlo_return(c->fn, bytes, nret);
  char* text = NULL;
  size_t len = 0;
  if (st == NULL) st = tpuc_hlo_module_print(m, &text, &len);
  tpuc_hlo_module_destroy(m);
  /* Fused mode only needs the text: the call runs inside a segment. */
  if (st == NULL && compile)
    st = tpuc_compile(client, text, len, NULL, exe, NULL);
  if (st != NULL) {
    free(text);
    return st;
  }
  *kept = fz_text_make(text, len, fp);
  return NULL;
}

/* Random calls of up to WORDS_MAX counters take them from a program of
 * their count's bucket (a power of two from WORDS_MIN): new shapes of
 * random ops (a test's model inits, dropout at each activation size)
 * compile Threefry once per bucket instead of once per shape, and a shape's
 * own program (the draws' transforms) compiles in a fraction of the time.
 * The numbers are the same either way: counter k gives the same words
 * whichever program computes it. Larger calls keep one program: their
 * compile is small next to their run, which the split would slow. */
#define WORDS_MIN 256
#define WORDS_MAX 16384
/* Outside fused mode a call with its counters from the bucket's program
 * costs one more dispatch (about 65 us on the CPU plugin); at its 64th
 * such call its own program that draws them itself is compiled and takes
 * over (same numbers). Fused mode composes the two into its segment
 * program. */
#define WORDS_HOT 64

static int g_words_index = -1;
static pthread_once_t g_words_once = PTHREAD_ONCE_INIT;

static void find_words(void) {
  g_words_index = tpuc_op_find("tpuc::random_words");
}

static int words_index(void) {
  pthread_once(&g_words_once, find_words);
  return g_words_index;
}

/* The bucket of the counters call `proto` draws, or 0 when it keeps one
 * program (a draw inside a sampler's loop, none, or more than WORDS_MAX):
 * the call's program is built once without compiling to count them. */
static int64_t words_bucket(tpuc_client* client, const op_entry* e,
                            const op_ctx* proto, tpuc_fingerprint fp) {
  op_ctx* c = malloc(sizeof *c);
  if (c == NULL) return 0;
  *c = *proto;
  c->words_total = 0;
  tpuc_executable* exe = NULL;
  fz_text* text = NULL;
  tpuc_hlo_type out_types[OP_MAX_OUTS], exec_types[OP_MAX_OUTS + 1];
  tpuc_status* st = build_program(client, e, c, fp, false, &exe, &text,
                                  out_types, exec_types);
  fz_text_release(text);
  int64_t used = c->words_used, bucket = 0;
  bool region = c->words_region;
  free(c);
  if (st != NULL) {
    /* The real build reports it. */
    tpuc_status_free(st);
    return 0;
  }
  if (region || used <= 0 || used > WORDS_MAX) return 0;
  for (bucket = WORDS_MIN; bucket < used;) bucket *= 2;
  return bucket;
}

static tpuc_status* run_phase(tpuc_client* client, int device, int index,
                              const op_entry* e, const tpuc_op_arg* args,
                              size_t num_args, const tpuc_op_options* options,
                              int phase, const int64_t* dyn,
                              tpuc_op_result* results, size_t max_results,
                              size_t* num_results);

/* The u32[2 * n] words of n counters from the call's generator state
 * (tpuc::random_words), to stand in for the state as its first input. */
static tpuc_status* draw_words(tpuc_client* client, int device,
                               const tpuc_op_options* options, int64_t n,
                               tpuc_buffer** out) {
  int index = words_index();
  tpuc_op_arg a;
  memset(&a, 0, sizeof a);
  a.kind = TPUC_OP_ARG_INT;
  a.i = n;
  tpuc_op_options o = *options;
  memset(o.write_to, 0, sizeof o.write_to);
  tpuc_op_result r;
  size_t nr = 0;
  memset(&r, 0, sizeof r);
  TRY(run_phase(client, device, index, ops_entry((size_t)index), &a, 1, &o, 0,
                NULL, &r, 1, &nr));
  if (nr != 1 || r.value == NULL) {
    tpuc_buffer_release(r.value);
    return tpuc_status_make(TPUC_INTERNAL, "random_words gave no value");
  }
  *out = r.value;
  return NULL;
}

/* Compiles the call's program that draws its counters itself and gives it
 * to the call and to its entry (`*exe`, `*text`, `*words`), as WORDS_HOT
 * says; keeps the pair when that fails. */
static void unsplit(tpuc_client* client, const op_entry* e,
                    const tpuc_op_arg* args, size_t num_args,
                    const tpuc_op_options* options, const keybuf* key,
                    tpuc_fingerprint fp, const tpuc_hlo_type* exec_types,
                    tpuc_executable** exe, fz_text** text, int64_t* words) {
  op_ctx* c = calloc(1, sizeof *c);
  if (c == NULL) return;
  c->args = args;
  c->nargs = num_args;
  c->opts = options;
  c->random = true;
  tpuc_executable* one = NULL;
  fz_text* one_text = NULL;
  tpuc_hlo_type out_types[OP_MAX_OUTS], one_types[OP_MAX_OUTS + 1];
  tpuc_status* st = build_program(client, e, c, fp, true, &one, &one_text,
                                  out_types, one_types);
  /* The same outputs (the defined results, the check), as it must be. */
  size_t nexec = c->has_check ? 1 : 0;
  for (size_t k = 0; st == NULL && k < c->nouts; k++)
    nexec += out_types[k].rank >= 0;
  bool same = st == NULL;
  for (size_t k = 0; same && k < nexec; k++) {
    const tpuc_hlo_type *a = &one_types[k], *b = &exec_types[k];
    same = a->dtype == b->dtype && a->rank == b->rank &&
           memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank) == 0;
  }
  free(c);
  tpuc_status_free(st);
  if (!same) {
    if (one != NULL) tpuc_executable_release(one);
    fz_text_release(one_text);
    return;
  }
  prog_unsplit(client, key, fp, one, one_text);
  if (*exe != NULL) tpuc_executable_release(*exe);
  fz_text_release(*text);
  *exe = one;
  *text = one_text;
  *words = 0;
}

/* One program of a call: phase 0 for ordinary ops; dynamic-shape ops run
 * phase 1 (their sizes) and then phase 2 with those sizes in `dyn`. */
static tpuc_status* run_phase(tpuc_client* client, int device, int index,
                              const op_entry* e, const tpuc_op_arg* args,
                              size_t num_args, const tpuc_op_options* options,
                              int phase, const int64_t* dyn,
                              tpuc_op_result* results, size_t max_results,
                              size_t* num_results) {
  keybuf key;
  make_key(index, args, num_args, options, &key);
  key_put(&key, &phase, sizeof phase);
  if (phase == 2) key_put(&key, dyn, sizeof(int64_t) * OP_MAX_DYN);
  tpuc_fingerprint zero = {0, 0};
  tpuc_fingerprint fp = tpuc_fingerprint_bytes(zero, key.buf, key.len);
  prog_entry hit;
  tpuc_executable* exe = NULL;
  fz_text* text = NULL;
  size_t nouts = 0;
  tpuc_hlo_type out_types[OP_MAX_OUTS];
  tpuc_hlo_type exec_types[OP_MAX_OUTS + 1];
  bool has_check = false;
  tpuc_code check_code = TPUC_OK;
  const char* check_msg = NULL;
  tpuc_eager_mode mode = tpuc_eager_mode_current();
  op_host_check host_checks[OP_MAX_HOST_CHECKS];
  size_t n_host_checks = 0;
  int64_t words = 0;
  if (!key.overflow && prog_find(client, &key, fp, &hit) != NULL) {
    exe = hit.exe;
    words = hit.words;
    memcpy(host_checks, hit.host_checks, sizeof host_checks);
    n_host_checks = hit.n_host_checks;
    memcpy(exec_types, hit.exec_types, sizeof exec_types);
    text = hit.text;
    nouts = hit.nouts;
    memcpy(out_types, hit.out_types, sizeof(tpuc_hlo_type) * nouts);
    has_check = hit.has_check;
    check_code = hit.check_code;
    check_msg = hit.check_msg;
  } else {
    op_ctx c;
    memset(&c, 0, sizeof c);
    c.args = args;
    c.nargs = num_args;
    c.opts = options;
    c.random = tpuc_op_is_random(index);
    c.phase = phase;
    if (phase == 2) memcpy(c.dyn, dyn, sizeof c.dyn);
    if (c.random && phase == 0 && index != words_index())
      c.words_total = words_bucket(client, e, &c, fp);
    words = c.words_total;
    tpuc_status* st =
        build_program(client, e, &c, fp, mode != TPUC_EAGER_FUSED, &exe,
                      &text, out_types, exec_types);
    if (st != NULL) return tpuc_status_annotate(st, "%s", e->name);
    nouts = c.nouts;
    memcpy(host_checks, c.host_checks, sizeof host_checks);
    n_host_checks = c.n_host_checks;
    has_check = c.has_check;
    check_code = c.check_code;
    check_msg = c.check_msg;
    if (!key.overflow) {
      tpuc_status* reg =
          tpuc_client_on_destroy(client, on_client_destroy, NULL);
      if (reg == NULL)
        prog_insert(client, &key, fp, exe, text, nouts, out_types,
                    exec_types, &c);
      tpuc_status_free(reg);
    }
  }
  if (words > 0 && mode != TPUC_EAGER_FUSED && !key.overflow &&
      prog_words_call(client, &key, fp, WORDS_HOT))
    unsplit(client, e, args, num_args, options, &key, fp, exec_types, &exe,
            &text, &words);
  if (nouts > max_results) {
    if (exe != NULL) tpuc_executable_release(exe);
    fz_text_release(text);
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "%s has %zu results, room for %zu", e->name, nouts,
                            max_results);
  }
  /* Scalar-argument checks, on the host. */
  for (size_t k = 0; k < n_host_checks; k++) {
    const op_host_check* h = &host_checks[k];
    const tpuc_op_arg* a = &args[h->arg];
    double v = a->scalar == TPUC_SCALAR_FLOAT ? a->f : (double)a->i;
    bool ok = (h->lo_incl ? v >= h->lo : v > h->lo) &&
              (h->hi_incl ? v <= h->hi : v < h->hi);
    if (isnan(v)) ok = h->nan_ok;
    if (isinf(v) && h->inf_ok) ok = true;
    if (!ok) {
      if (exe != NULL) tpuc_executable_release(exe);
      fz_text_release(text);
      return tpuc_status_make(h->code, "%s", h->msg);
    }
  }
  run_inputs r = {{0}, 0};
  tpuc_status* st = NULL;
  if (tpuc_op_is_random(index) && words > 0) {
    st = draw_words(client, device, options, words, &r.in[r.nin]);
    if (st == NULL) r.nin++;
  } else if (tpuc_op_is_random(index)) {
    int64_t two = 2;
    st = tpuc_buffer_from_host(client, device, TPUC_DTYPE_U64, &two, 1,
                               options->rng, NULL, &r.in[r.nin]);
    if (st == NULL && mode == TPUC_EAGER_FUSED)
      fz_capture_note_rng(client, device, r.in[r.nin], options->rng);
    if (st == NULL) r.nin++;
  }
  for (size_t i = 0; st == NULL && i < num_args; i++)
    st = collect_input(&args[i], i, client, device, &r);
  for (size_t k = 0; st == NULL && k < OP_MAX_OUTS; k++) {
    if (options->write_to[k] == NULL) continue;
    if (write_source(args, num_args, options, k).kind == WSRC_INPUT)
      st = collect_view(options->write_to[k], num_args + k, device, &r);
    if (st == NULL)
      st = collect_offset(options->write_to[k], true, client, device, &r);
  }
  tpuc_buffer* outs[OP_MAX_OUTS + 1] = {0};
  size_t ndef = 0;
  for (size_t k = 0; k < nouts; k++) ndef += out_types[k].rank >= 0;
  size_t nexec = ndef + (has_check ? 1 : 0);
  bool recorded = false;
  if (st == NULL && mode == TPUC_EAGER_FUSED && text != NULL) {
    /* Fused: record the call; it runs later as part of a segment. */
    st = fz_record(client, device, text, e->name, r.in, r.nin, exec_types,
                   nexec, has_check, check_code, check_msg, outs);
    recorded = st == NULL;
    if (st != NULL && tpuc_status_code(st) == TPUC_UNIMPLEMENTED) {
      tpuc_status_free(st);
      st = NULL;
    } else if (st != NULL) {
      /* An argument check failed: PyTorch's message, as in strict mode. */
      if (exe != NULL) tpuc_executable_release(exe);
      fz_text_release(text);
      release_inputs(&r);
      return st;
    }
  }
  if (st == NULL && !recorded && exe == NULL) {
    /* A program first built in fused mode runs by itself now. */
    size_t len = 0;
    const char* t = fz_text_str(text, &len);
    st = t ? tpuc_compile(client, t, len, NULL, &exe, NULL)
           : tpuc_status_make(TPUC_INTERNAL, "program without text");
    if (st == NULL && !key.overflow) prog_set_exe(client, &key, fp, exe);
  }
  if (st == NULL && !recorded) st = tpuc_values_ensure(r.in, r.nin);
  if (st == NULL && !recorded)
    st = tpuc_execute(exe, device, r.in, r.nin, NULL, outs, nexec);
  if (st == NULL && !recorded && mode == TPUC_EAGER_DEBUG) {
    /* Debug: wait for the op, so its errors are reported here. */
    for (size_t k = 0; st == NULL && k < nexec; k++) {
      tpuc_event* ev = NULL;
      st = tpuc_buffer_ready_event(outs[k], &ev);
      if (st == NULL) st = tpuc_event_await(ev);
      if (ev != NULL) tpuc_event_destroy(ev);
    }
    if (st != NULL)
      for (size_t k = 0; k < nexec; k++) tpuc_buffer_release(outs[k]);
  }
  if (exe != NULL) tpuc_executable_release(exe);
  fz_text_release(text);
  release_inputs(&r);
  if (st != NULL) return tpuc_status_annotate(st, "%s", e->name);
  if (has_check && !recorded) {
    uint8_t bad = 0;
    st = tpuc_buffer_to_host(outs[ndef], &bad, 1);
    tpuc_buffer_release(outs[ndef]);
    if (st == NULL && bad)
      st = tpuc_status_make(check_code, "%s", check_msg ? check_msg : "bad argument");
    if (st != NULL) {
      for (size_t k = 0; k < ndef; k++) tpuc_buffer_release(outs[k]);
      return st;
    }
  }
  /* Undefined results take no program output: spread the outputs. */
  for (size_t k = nouts, j = ndef; k-- > 0;) {
    if (out_types[k].rank < 0) {
      outs[k] = NULL;
    } else {
      outs[k] = outs[--j];
    }
  }
  for (size_t k = 0; k < nouts; k++) {
    results[k].dtype = out_types[k].dtype;
    results[k].rank = out_types[k].rank < 0 ? 0 : out_types[k].rank;
    memcpy(results[k].sizes, out_types[k].dims,
           sizeof(int64_t) * (size_t)results[k].rank);
    results[k].value = outs[k];
    results[k].written = options->write_to[k] != NULL;
  }
  *num_results = nouts;
  return NULL;
}

/* zero_ of a whole storage that was never written. */
static bool zero_of_unwritten(const op_entry* e, const tpuc_op_options* o) {
  const tpuc_view* t = o->write_to[0];
  return t != NULL && t->storage != NULL &&
         strcmp(e->name, "aten::zero_") == 0 && whole_storage(t) &&
         tpuc_storage_is_unwritten(t->storage);
}

/* cat of more tensors than one program takes (OP_MAX_LIST; FSDP2 joins
 * every parameter's gradient chunks in one call): each group of them is
 * joined by its own program, then the groups' results are (promotion and
 * sizes come out the same either way). */
static tpuc_status* run_long_cat(tpuc_client* client, int device, int index,
                                 const tpuc_op_arg* args, size_t num_args,
                                 const tpuc_op_options* options,
                                 tpuc_op_result* results, size_t max_results,
                                 size_t* num_results) {
  int cat = tpuc_op_find("aten::cat");
  size_t n = args[0].num_views;
  size_t ngroups = (n + OP_MAX_LIST - 1) / OP_MAX_LIST;
  tpuc_op_arg* sub = malloc(sizeof *sub * num_args);
  tpuc_storage** parts = calloc(ngroups, sizeof *parts);
  tpuc_view* views = calloc(ngroups, sizeof *views);
  tpuc_status* st = NULL;
  if (sub == NULL || parts == NULL || views == NULL || cat < 0)
    st = tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  tpuc_op_options functional = *options;
  memset(functional.write_to, 0, sizeof functional.write_to);
  for (size_t g = 0; st == NULL && g < ngroups; g++) {
    memcpy(sub, args, sizeof *sub * num_args);
    sub[0].views = args[0].views + g * OP_MAX_LIST;
    sub[0].num_views = n - g * OP_MAX_LIST < OP_MAX_LIST ? n - g * OP_MAX_LIST
                                                          : OP_MAX_LIST;
    tpuc_op_result r;
    size_t nr = 0;
    memset(&r, 0, sizeof r);
    st = tpuc_op_run(client, device, cat, sub, num_args > 2 ? 2 : num_args,
                     &functional, &r, 1, &nr);
    if (st == NULL && (nr != 1 || r.value == NULL))
      st = unimpl("a group of the list gave no value");
    if (st == NULL)
      st = tpuc_storage_create(client, device,
                               tpuc_buffer_byte_size(r.value), &parts[g]);
    if (st == NULL) st = tpuc_storage_set_value(parts[g], r.value);
    tpuc_buffer_release(r.value);
    if (st == NULL) {
      views[g].storage = parts[g];
      views[g].dtype = r.dtype;
      views[g].rank = r.rank;
      int64_t stride = 1;
      for (int d = r.rank - 1; d >= 0; d--) {
        views[g].sizes[d] = r.sizes[d];
        views[g].strides[d] = stride;
        stride *= r.sizes[d];
      }
    }
  }
  if (st == NULL) {
    memcpy(sub, args, sizeof *sub * num_args);
    sub[0].views = views;
    sub[0].num_views = ngroups;
    st = tpuc_op_run(client, device, index, sub, num_args, options, results,
                     max_results, num_results);
  }
  for (size_t g = 0; parts != NULL && g < ngroups; g++)
    tpuc_storage_release(parts[g]);
  free(sub);
  free(parts);
  free(views);
  return st;
}

tpuc_status* tpuc_op_run(tpuc_client* client, int device, int index,
                         const tpuc_op_arg* args, size_t num_args,
                         const tpuc_op_options* options,
                         tpuc_op_result* results, size_t max_results,
                         size_t* num_results) {
  if (client == NULL || args == NULL || results == NULL ||
      num_results == NULL || options == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "NULL argument to tpuc_op_run");
  *num_results = 0;
  const op_entry* e = index >= 0 ? ops_entry((size_t)index) : NULL;
  if (e == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "no op %d in the table",
                            index);
  if (num_args > OP_MAX_ARGS)
    return unimpl("too many arguments for the native path");
  if (num_args >= 1 && args[0].kind == TPUC_OP_ARG_TENSOR_LIST &&
      args[0].num_views > OP_MAX_LIST &&
      (strcmp(e->name, "aten::cat") == 0 ||
       strcmp(e->name, "aten::cat.out") == 0))
    return run_long_cat(client, device, index, args, num_args, options,
                        results, max_results, num_results);
  if (zero_of_unwritten(e, options)) {
    /* The storage already reads as zeros: nothing to run or store (the
     * caller leaves a written result without a value as it is). An
     * optimizer's zeros_like state then costs nothing until its first
     * update reads it. */
    const tpuc_view* t = options->write_to[0];
    if (max_results < 1)
      return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                              "%s has 1 result, room for 0", e->name);
    memset(&results[0], 0, sizeof results[0]);
    results[0].dtype = t->dtype;
    results[0].rank = t->rank;
    memcpy(results[0].sizes, t->sizes, sizeof(int64_t) * (size_t)t->rank);
    results[0].written = true;
    *num_results = 1;
    return NULL;
  }
  if (!ops_entry_is_dynamic((size_t)index))
    return run_phase(client, device, index, e, args, num_args, options, 0,
                     NULL, results, max_results, num_results);
  /* Data-dependent shapes (nonzero, masked_select, unique): phase 1
   * computes the sizes as rank-0 integers, which the host waits for;
   * phase 2 builds the results with those sizes (part of its key). */
  tpuc_op_options sizing = *options;
  memset(sizing.write_to, 0, sizeof sizing.write_to);
  tpuc_op_result sizes[OP_MAX_DYN];
  size_t nsizes = 0;
  TRY(run_phase(client, device, index, e, args, num_args, &sizing, 1, NULL,
                sizes, OP_MAX_DYN, &nsizes));
  int64_t dyn[OP_MAX_DYN] = {0};
  tpuc_status* st = NULL;
  for (size_t k = 0; k < nsizes; k++) {
    if (st == NULL && (sizes[k].rank != 0 || sizes[k].dtype != TPUC_DTYPE_S64))
      st = tpuc_status_make(TPUC_INTERNAL, "%s: sizes must be rank-0 s64",
                            e->name);
    if (st == NULL) st = tpuc_value_to_host(sizes[k].value, &dyn[k], 8);
    tpuc_buffer_release(sizes[k].value);
  }
  if (st != NULL) return tpuc_status_annotate(st, "%s", e->name);
  return run_phase(client, device, index, e, args, num_args, options, 2, dyn,
                   results, max_results, num_results);
}

/* ------------------------------ device copy ----------------------------- */

tpuc_status* op_lower_copy(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || c->nargs < 2 ||
      c->args[1].kind != TPUC_OP_ARG_INT_LIST)
    return unimpl("unexpected arguments");
  tpuc_hlo_type shape;
  memset(&shape, 0, sizeof shape);
  shape.rank = (int)c->args[1].list_len;
  shape.dtype = c->types[0].dtype;
  if (c->nargs > 2 && c->args[2].kind == TPUC_OP_ARG_DTYPE)
    shape.dtype = c->args[2].dtype;
  for (int d = 0; d < shape.rank; d++) shape.dims[d] = c->args[1].list[d];
  c->nouts = 1;
  tpuc_dtype from = c->types[0].dtype;
  if (tpuc_dtype_is_float(from) && !tpuc_dtype_is_float(shape.dtype) &&
      !tpuc_dtype_is_complex(shape.dtype) && shape.dtype != TPUC_DTYPE_PRED &&
      shape.dtype != TPUC_DTYPE_S64) {
    /* The CPU converts a float to a narrow integer through int64 (so -2.5
     * becomes 254 in uint8); XLA's convert would saturate. */
    tpuc_hlo_type wide = shape;
    wide.dtype = TPUC_DTYPE_S64;
    tpuc_hlo_value w;
    TRY(op_operand(c, 0, TPUC_DTYPE_S64, &wide, &w));
    return tpuc_hlo_convert(c->fn, w, shape.dtype, &c->outs[0]);
  }
  return op_operand(c, 0, shape.dtype, &shape, &c->outs[0]);
}

tpuc_status* tpuc_op_copy(tpuc_client* client, const tpuc_view* dst,
                          const tpuc_view* src) {
  if (client == NULL || dst == NULL || src == NULL || dst->storage == NULL ||
      src->storage == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "NULL argument to tpuc_op_copy");
  TRY(tpuc_view_check(dst));
  TRY(tpuc_view_check(src));
  if (numel(dst->sizes, dst->rank) == 0) return NULL;
  if (tpuc_dtype_is_complex(src->dtype) && !tpuc_dtype_is_complex(dst->dtype))
    return unimpl("complex to real copies take the host path");
  static int index = -2;
  if (index == -2) index = tpuc_op_find("tpuc::copy");
  tpuc_op_arg args[3];
  memset(args, 0, sizeof args);
  args[0].kind = TPUC_OP_ARG_TENSOR;
  args[0].view = *src;
  args[1].kind = TPUC_OP_ARG_INT_LIST;
  args[1].list = dst->sizes;
  args[1].list_len = (size_t)dst->rank;
  tpuc_op_options o;
  memset(&o, 0, sizeof o);
  o.default_float = TPUC_DTYPE_F32;
  o.write_to[0] = dst;
  tpuc_op_result r;
  size_t n = 0;
  /* copy_ casts freely (a float into an int tensor truncates): the
   * lowering converts, so the write sees its own dtype. */
  args[2].kind = TPUC_OP_ARG_DTYPE;
  args[2].dtype = dst->dtype;
  TRY(tpuc_op_run(client, tpuc_storage_device(dst->storage), index, args, 3,
                  &o, &r, 1, &n));
  tpuc_status* st = tpuc_storage_set_value(dst->storage, r.value);
  tpuc_buffer_release(r.value);
  return st;
}
