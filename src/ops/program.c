/* The generic native-op path: one program per call that reads each tensor
 * argument out of its storage, runs the op's lowering, and writes each
 * result as bytes; compiled through the cache and executed (tpuc/ops.h). */
#include <stdlib.h>
#include <string.h>

#include "ops/ops_internal.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

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

/* Reads view `v` out of `storage` (a u8[nbytes] @main argument). */
static tpuc_status* read_view(tpuc_hlo_fn* fn, const tpuc_view* v,
                              tpuc_hlo_value storage, tpuc_hlo_value* out) {
  size_t es = tpuc_dtype_size(v->dtype);
  size_t nbytes = tpuc_storage_nbytes(v->storage);
  if (nbytes % es != 0) return unimpl("storage size is not a multiple of the element size");
  if (tpuc_dtype_is_complex(v->dtype)) return unimpl("complex tensors run on the CPU");
  int64_t n = (int64_t)(nbytes / es);
  tpuc_hlo_value flat = storage;
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
  int64_t count = numel(v->sizes, v->rank);
  if (count == 0 || row_major(v)) {
    int64_t start = count == 0 ? 0 : v->offset, limit = start + count, one = 1;
    tpuc_hlo_value s;
    TRY(tpuc_hlo_slice(fn, flat, &start, &limit, &one, &s));
    return tpuc_hlo_reshape(fn, s, v->sizes, v->rank, out);
  }
  /* General strides: gather at offset + sum_d iota_d * stride_d. */
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
  tpuc_hlo_value idx2;
  TRY(tpuc_hlo_reshape(fn, idx, ishape, v->rank + 1, &idx2));
  int64_t collapsed = 0, map = 0, slice = 1;
  tpuc_hlo_gather_dims g;
  memset(&g, 0, sizeof g);
  g.collapsed_slice_dims = &collapsed;
  g.num_collapsed_slice_dims = 1;
  g.start_index_map = &map;
  g.num_start_index_map = 1;
  g.index_vector_dim = v->rank;
  return tpuc_hlo_gather(fn, flat, idx2, &g, &slice, false, out);
}

/* Row-major bytes of `x` (type `t`) as u8[numel * size]. */
static tpuc_status* to_bytes(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                             const tpuc_hlo_type* t, tpuc_hlo_value* out) {
  int64_t n = tpuc_hlo_type_num_elements(t);
  size_t es = tpuc_dtype_size(t->dtype);
  tpuc_hlo_value flat;
  TRY(tpuc_hlo_reshape(fn, x, &n, 1, &flat));
  if (t->dtype == TPUC_DTYPE_PRED)
    return tpuc_hlo_convert(fn, flat, TPUC_DTYPE_U8, out);
  if (t->dtype == TPUC_DTYPE_U8) {
    *out = flat;
    return NULL;
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

tpuc_status* op_broadcast_shape(const op_ctx* c, const int* which, size_t n,
                                tpuc_hlo_type* out) {
  memset(out, 0, sizeof *out);
  for (size_t k = 0; k < n; k++) {
    const tpuc_hlo_type* t = &c->types[which[k]];
    if (t->rank > out->rank) {
      int shift = t->rank - out->rank;
      for (int d = out->rank - 1; d >= 0; d--) out->dims[d + shift] = out->dims[d];
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
      return tpuc_status_make(TPUC_INVALID_ARGUMENT,
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
  return tpuc_hlo_broadcast_in_dim(c->fn, v, shape->dims, shape->rank, map, out);
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

int tpuc_op_find(const char* name) {
  for (size_t i = 0; name && ops_entry(i) != NULL; i++)
    if (strcmp(ops_entry(i)->name, name) == 0) return (int)i;
  return -1;
}

/* --------------------------------- run --------------------------------- */

typedef struct {
  tpuc_buffer* in[OP_MAX_ARGS];
  size_t nin;
} run_inputs;

static void release_inputs(run_inputs* r) {
  for (size_t i = 0; i < r->nin; i++) tpuc_buffer_release(r->in[i]);
  r->nin = 0;
}

/* Declares argument i of the op as @main arguments; collects their buffers. */
static tpuc_status* bind_arg(op_ctx* c, tpuc_client* client, int device,
                             size_t i, run_inputs* r) {
  const tpuc_op_arg* a = &c->args[i];
  if (a->kind == TPUC_OP_ARG_TENSOR) {
    TRY(tpuc_view_check(&a->view));
    if (tpuc_storage_device(a->view.storage) != device)
      return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                              "argument %zu is on device %d, the op runs on %d",
                              i, tpuc_storage_device(a->view.storage), device);
    int64_t nbytes = (int64_t)tpuc_storage_nbytes(a->view.storage);
    tpuc_hlo_type st = tpuc_hlo_type_make(TPUC_DTYPE_U8, &nbytes, 1);
    tpuc_hlo_value sv;
    TRY(tpuc_hlo_arg(c->fn, &st, &sv));
    TRY(read_view(c->fn, &a->view, sv, &c->vals[i]));
    c->types[i] = tpuc_hlo_type_make(a->view.dtype, a->view.sizes, a->view.rank);
    TRY(tpuc_storage_value(a->view.storage, &r->in[r->nin]));
    r->nin++;
  } else if (a->kind == TPUC_OP_ARG_SCALAR) {
    bool is_float = a->scalar == TPUC_SCALAR_FLOAT;
    tpuc_dtype d = is_float ? TPUC_DTYPE_F64 : TPUC_DTYPE_S64;
    tpuc_hlo_type st = tpuc_hlo_type_scalar(d);
    TRY(tpuc_hlo_arg(c->fn, &st, &c->vals[i]));
    c->types[i] = st;
    if (!is_float && a->scalar == TPUC_SCALAR_BOOL) c->types[i].dtype = TPUC_DTYPE_S64;
    TRY(tpuc_buffer_from_host(client, device, d, NULL, 0,
                              is_float ? (const void*)&a->f : (const void*)&a->i,
                              NULL, &r->in[r->nin]));
    r->nin++;
  } else {
    c->vals[i] = -1;
  }
  return NULL;
}

static tpuc_status* build_and_run(tpuc_client* client, int device,
                                  const op_entry* e, op_ctx* c,
                                  tpuc_op_result* results, size_t max_results,
                                  size_t* num_results) {
  tpuc_hlo_module* m = NULL;
  TRY(tpuc_hlo_module_create("tpuc_op", &m));
  run_inputs r = {{0}, 0};
  tpuc_status* st = tpuc_hlo_main(m, &c->fn);
  for (size_t i = 0; st == NULL && i < c->nargs; i++)
    st = bind_arg(c, client, device, i, &r);
  if (st == NULL) st = e->lower(c, e->param);
  if (st == NULL && (c->nouts == 0 || c->nouts > max_results))
    st = tpuc_status_make(TPUC_INTERNAL, "%s produced %zu results", e->name,
                          c->nouts);
  tpuc_hlo_type out_types[OP_MAX_OUTS];
  tpuc_hlo_value bytes[OP_MAX_OUTS];
  for (size_t k = 0; st == NULL && k < c->nouts; k++) {
    st = tpuc_hlo_value_type(c->fn, c->outs[k], &out_types[k]);
    if (st == NULL) st = to_bytes(c->fn, c->outs[k], &out_types[k], &bytes[k]);
  }
  if (st == NULL) st = tpuc_hlo_return(c->fn, bytes, c->nouts);
  char* text = NULL;
  size_t len = 0;
  if (st == NULL) st = tpuc_hlo_module_print(m, &text, &len);
  tpuc_hlo_module_destroy(m);
  tpuc_executable* exe = NULL;
  if (st == NULL) st = tpuc_compile(client, text, len, NULL, &exe, NULL);
  free(text);
  tpuc_buffer* outs[OP_MAX_OUTS] = {0};
  if (st == NULL)
    st = tpuc_execute(exe, device, r.in, r.nin, NULL, outs, c->nouts);
  tpuc_executable_release(exe);
  release_inputs(&r);
  if (st != NULL) return tpuc_status_annotate(st, "%s", e->name);
  for (size_t k = 0; k < c->nouts; k++) {
    results[k].dtype = out_types[k].dtype;
    results[k].rank = out_types[k].rank;
    memcpy(results[k].sizes, out_types[k].dims,
           sizeof(int64_t) * (size_t)out_types[k].rank);
    results[k].value = outs[k];
  }
  *num_results = c->nouts;
  return NULL;
}

tpuc_status* tpuc_op_run(tpuc_client* client, int device, int index,
                         const tpuc_op_arg* args, size_t num_args,
                         const tpuc_op_options* options,
                         tpuc_op_result* results, size_t max_results,
                         size_t* num_results) {
  if (client == NULL || args == NULL || results == NULL || num_results == NULL ||
      options == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "NULL argument to tpuc_op_run");
  *num_results = 0;
  const op_entry* e = index >= 0 ? ops_entry((size_t)index) : NULL;
  if (e == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "no op %d in the table", index);
  if (num_args > OP_MAX_ARGS)
    return unimpl("too many arguments for the native path");
  op_ctx c;
  memset(&c, 0, sizeof c);
  c.args = args;
  c.nargs = num_args;
  c.opts = options;
  return build_and_run(client, device, e, &c, results, max_results,
                       num_results);
}
