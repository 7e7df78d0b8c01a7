/* Indexing, shape ops and fills: cat, index_select, embedding, gather,
 * scatter (and its reductions), index_add/copy/fill, advanced indexing
 * (index.Tensor, index_put_), masked_fill, flip, roll, tril/triu,
 * constant_pad_nd, repeat.
 *
 * Indices are read as s64. XLA clamps out-of-range gather/scatter indices,
 * PyTorch raises: every lowering that takes indices adds an argument check
 * (c->has_check) that is true when one is out of range. Where the CPU's
 * message names the offending index ("index 7 is out of bounds for
 * dimension 0 with size 4"), the check fails with UNIMPLEMENTED: the call
 * then runs on the CPU, which raises its own exact error. The same check
 * sends data-dependent cases that XLA leaves unspecified to the CPU:
 * duplicate indices of a non-accumulating scatter (the CPU's last write
 * wins), a Scalar fill value that overflows the dtype (the CPU raises). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_internal.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

typedef tpuc_hlo_value V;

/* Check code for "let the CPU run this call and say what is wrong". */
#define CPU_DECIDES TPUC_UNIMPLEMENTED

/* ------------------------------ helpers -------------------------------- */

static int64_t numel_of(const tpuc_hlo_type* t) {
  return tpuc_hlo_type_num_elements(t);
}

static bool is_index_dtype(tpuc_dtype d) {
  return d == TPUC_DTYPE_S64 || d == TPUC_DTYPE_S32;
}

static tpuc_status* type_of(op_ctx* c, V x, tpuc_hlo_type* t) {
  return tpuc_hlo_value_type(c->fn, x, t);
}

static tpuc_status* convert(op_ctx* c, V x, tpuc_dtype dt, V* out) {
  tpuc_hlo_type t;
  TRY(type_of(c, x, &t));
  if (t.dtype == dt) {
    *out = x;
    return NULL;
  }
  return tpuc_hlo_convert(c->fn, x, dt, out);
}

/* x compared with the constant k (broadcast to x's shape). */
static tpuc_status* cmp_const(op_ctx* c, V x, tpuc_hlo_compare_dir dir,
                              double k, V* out) {
  tpuc_hlo_type t;
  TRY(type_of(c, x, &t));
  V kv;
  TRY(op_const(c, t.dtype, k, &t, &kv));
  return tpuc_hlo_compare(c->fn, dir, x, kv, out);
}

/* Adds `bad` (rank-0 i1) to the call's argument check. Checks of two
 * different codes together leave the verdict to the CPU. */
static tpuc_status* add_check(op_ctx* c, V bad, tpuc_code code,
                              const char* msg) {
  if (!c->has_check) {
    c->has_check = true;
    c->check = bad;
    c->check_code = code;
    c->check_msg = msg;
    return NULL;
  }
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, c->check, bad, &c->check));
  if (c->check_code != code) {
    c->check_code = CPU_DECIDES;
    c->check_msg = "bad arguments: the CPU decides";
  }
  return NULL;
}

/* `x` (type t) broadcast to `dims` (numpy rules; the caller checked that
 * the shapes broadcast). */
static tpuc_status* bcast_to(op_ctx* c, V x, const tpuc_hlo_type* t,
                             const int64_t* dims, int rank, V* out) {
  bool same = t->rank == rank;
  for (int d = 0; same && d < rank; d++) same = t->dims[d] == dims[d];
  if (same) {
    *out = x;
    return NULL;
  }
  int64_t kept[TPUC_MAX_RANK], map[TPUC_MAX_RANK];
  int nk = 0, shift = rank - t->rank;
  for (int d = 0; d < t->rank; d++) {
    if (t->dims[d] == 1 && dims[d + shift] != 1) continue;
    kept[nk] = t->dims[d];
    map[nk] = d + shift;
    nk++;
  }
  if (nk != t->rank) TRY(tpuc_hlo_reshape(c->fn, x, kept, nk, &x));
  return tpuc_hlo_broadcast_in_dim(c->fn, x, dims, rank, map, out);
}

/* True when shape `t` broadcasts to `dims` (numpy rules, one way). */
static bool broadcasts_to(const tpuc_hlo_type* t, const int64_t* dims,
                          int rank) {
  if (t->rank > rank) return false;
  int shift = rank - t->rank;
  for (int d = 0; d < t->rank; d++)
    if (t->dims[d] != 1 && t->dims[d] != dims[d + shift]) return false;
  return true;
}

/* Merges shape t into the broadcast shape (dims, *rank); false when the
 * two do not broadcast. */
static bool broadcast_merge(int64_t* dims, int* rank, const tpuc_hlo_type* t) {
  if (t->rank > *rank) {
    int shift = t->rank - *rank;
    for (int d = *rank - 1; d >= 0; d--) dims[d + shift] = dims[d];
    for (int d = 0; d < shift; d++) dims[d] = 1;
    *rank = t->rank;
  }
  for (int d = 0; d < t->rank; d++) {
    int od = *rank - t->rank + d;
    int64_t a = dims[od], b = t->dims[d];
    if (a == b || b == 1) continue;
    if (a != 1) return false;
    dims[od] = b;
  }
  return true;
}

/* An index tensor x (integer dtype) as s64, negatives wrapped by `size`
 * when `wrap`; *bad (rank-0 i1) is true when an entry is outside
 * [-size, size) (wrap) or [0, size). */
static tpuc_status* norm_index(op_ctx* c, V x, int64_t size, bool wrap, V* out,
                               V* bad) {
  TRY(convert(c, x, TPUC_DTYPE_S64, &x));
  V lt, ge, b;
  TRY(cmp_const(c, x, TPUC_HLO_LT, wrap ? (double)-size : 0.0, &lt));
  TRY(cmp_const(c, x, TPUC_HLO_GE, (double)size, &ge));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, lt, ge, &b));
  TRY(op_any_true(c, b, bad));
  if (!wrap) {
    *out = x;
    return NULL;
  }
  tpuc_hlo_type t;
  TRY(type_of(c, x, &t));
  V neg, sz, up;
  TRY(cmp_const(c, x, TPUC_HLO_LT, 0, &neg));
  TRY(op_const(c, TPUC_DTYPE_S64, (double)size, &t, &sz));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, x, sz, &up));
  return tpuc_hlo_select(c->fn, neg, up, x, out);
}

/* Range of an integer dtype as doubles. */
static void int_range(tpuc_dtype d, double* lo, double* hi) {
  int bits = (int)tpuc_dtype_size(d) * 8;
  if (tpuc_dtype_is_unsigned_int(d)) {
    *hi = ldexp(1.0, bits) - 1;
    *lo = 0;
  } else {
    *hi = ldexp(1.0, bits - 1) - 1;
    *lo = -ldexp(1.0, bits - 1);
  }
}

/* *bad (rank-0 i1, or -1 when it can never be) is true when the fill
 * value `v` (rank 0, of dtype `vd`) cannot be converted to `dt` without
 * overflow, as c10's checked conversion of a Scalar says: bool takes
 * anything; floats take non-finite values and finite ones within the
 * range; integers their range (floats must compare within it, so NaN
 * and inf overflow), where unsigned ones take ints in [-max, max]
 * (negative ones wrap). */
static tpuc_status* value_overflow(op_ctx* c, V v, tpuc_dtype vd, tpuc_dtype dt,
                                   V* bad) {
  *bad = -1;
  if (dt == TPUC_DTYPE_PRED || vd == TPUC_DTYPE_PRED) return NULL;
  if (tpuc_dtype_is_complex(vd)) {
    /* A complex value: complex128 (or its own dtype) takes any; the rest
     * the CPU checks. */
    if (dt == TPUC_DTYPE_C128 || dt == vd) return NULL;
    return op_unimpl("complex fill value: the CPU checks it");
  }
  /* A real value into a complex dtype: the range of its components. */
  if (dt == TPUC_DTYPE_C64) dt = TPUC_DTYPE_F32;
  if (dt == TPUC_DTYPE_C128) dt = TPUC_DTYPE_F64;
  bool vfloat = tpuc_dtype_is_float(vd);
  tpuc_dtype wide = vfloat ? TPUC_DTYPE_F64 : TPUC_DTYPE_S64;
  if (!vfloat &&
      (dt == TPUC_DTYPE_S64 || dt == TPUC_DTYPE_F64 || dt == TPUC_DTYPE_F32 ||
       dt == TPUC_DTYPE_BF16 || dt == TPUC_DTYPE_U64))
    return NULL; /* every int64 fits (u64: wraps like the CPU) */
  if (tpuc_dtype_is_unsigned_int(vd) && dt != TPUC_DTYPE_F16 &&
      !(tpuc_dtype_is_signed_int(dt) || tpuc_dtype_is_unsigned_int(dt)))
    return NULL;
  TRY(convert(c, v, wide, &v));
  double lo, hi;
  V a, b;
  if (tpuc_dtype_is_float(dt)) {
    if (dt == TPUC_DTYPE_F64) return NULL;
    hi = tpuc_dtype_max_finite(dt);
    lo = -hi;
    if (!vfloat) {
      V l, h;
      TRY(cmp_const(c, v, TPUC_HLO_LT, lo, &l));
      TRY(cmp_const(c, v, TPUC_HLO_GT, hi, &h));
      return tpuc_hlo_binary(c->fn, TPUC_HLO_OR, l, h, bad);
    }
    V fin, l, h, out;
    TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_IS_FINITE, v, &fin));
    TRY(cmp_const(c, v, TPUC_HLO_LT, lo, &l));
    TRY(cmp_const(c, v, TPUC_HLO_GT, hi, &h));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, l, h, &out));
    return tpuc_hlo_binary(c->fn, TPUC_HLO_AND, fin, out, bad);
  }
  int_range(dt, &lo, &hi);
  if (tpuc_dtype_is_unsigned_int(dt)) lo = vfloat ? 0 : -hi;
  if (vfloat) {
    /* !(v >= lo && v <= hi): NaN fails both */
    TRY(cmp_const(c, v, TPUC_HLO_GE, lo, &a));
    TRY(cmp_const(c, v, TPUC_HLO_LE, hi, &b));
    V ok;
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, a, b, &ok));
    return tpuc_hlo_unary(c->fn, TPUC_HLO_NOT, ok, bad);
  }
  TRY(cmp_const(c, v, TPUC_HLO_LT, lo, &a));
  TRY(cmp_const(c, v, TPUC_HLO_GT, hi, &b));
  return tpuc_hlo_binary(c->fn, TPUC_HLO_OR, a, b, bad);
}

/* The fill value of argument i (a Scalar, or a 0-d tensor) as a rank-0
 * `dt`, with the CPU's overflow check added to the call. */
static tpuc_status* fill_value(op_ctx* c, int i, tpuc_dtype dt, V* out) {
  if (!op_is_value(c, i) || c->types[i].rank != 0)
    return op_unimpl("expected a scalar fill value");
  tpuc_dtype vd = c->types[i].dtype;
  if (c->args[i].kind == TPUC_OP_ARG_SCALAR &&
      c->args[i].scalar == TPUC_SCALAR_BOOL)
    vd = TPUC_DTYPE_PRED;
  V bad;
  TRY(value_overflow(c, c->vals[i], vd, dt, &bad));
  if (bad >= 0)
    TRY(add_check(c, bad, CPU_DECIDES,
                  "value cannot be converted without "
                  "overflow"));
  return op_scalar(c, i, dt, NULL, out);
}

/* s64[ishape..., rank]: the full coordinates, in an operand of rank
 * `rank`, of the elements that gather/scatter along `dim` address: entry
 * d of the last dim is `idx` (s64 of shape ishape) where d == dim, else
 * the position along d. */
static tpuc_status* dim_coords(op_ctx* c, V idx, const tpuc_hlo_type* ishape,
                               int64_t dim, V* out) {
  int rank = ishape->rank;
  tpuc_hlo_type t = *ishape;
  t.dtype = TPUC_DTYPE_S64;
  int64_t shp[TPUC_MAX_RANK + 1];
  memcpy(shp, t.dims, sizeof(int64_t) * (size_t)rank);
  shp[rank] = 1;
  V parts[TPUC_MAX_RANK];
  for (int d = 0; d < rank; d++) {
    V v = idx;
    if (d != dim) TRY(tpuc_hlo_iota(c->fn, &t, d, &v));
    TRY(tpuc_hlo_reshape(c->fn, v, shp, rank + 1, &parts[d]));
  }
  return tpuc_hlo_concatenate(c->fn, parts, (size_t)rank, rank, out);
}

/* A scatter body (acc, upd) -> op(acc, upd), or upd when op < 0. */
static tpuc_status* scatter_body(op_ctx* c, tpuc_dtype dt, int op,
                                 tpuc_hlo_fn** out) {
  if (op >= 0)
    return tpuc_hlo_region_binary(c->module, dt, (tpuc_hlo_binary_op)op, out);
  tpuc_hlo_type two[2] = {tpuc_hlo_type_scalar(dt), tpuc_hlo_type_scalar(dt)};
  tpuc_hlo_fn* body = NULL;
  V upd;
  TRY(tpuc_hlo_region_create(c->module, two, 2, &body));
  TRY(tpuc_hlo_get_arg(body, 1, &upd));
  TRY(tpuc_hlo_return(body, &upd, 1));
  *out = body;
  return NULL;
}

/* Point scatter: `updates` (shape of coords without its last dim) into
 * `x` at full coordinates `coords` (s64[..., rank]) combined with `op`
 * (a binary op, or -1: replace). */
static tpuc_status* scatter_points(op_ctx* c, V x, V coords, V updates, int op,
                                   V* out) {
  tpuc_hlo_type xt, ct;
  TRY(type_of(c, x, &xt));
  TRY(type_of(c, coords, &ct));
  int64_t all[TPUC_MAX_RANK];
  for (int d = 0; d < xt.rank; d++) all[d] = d;
  tpuc_hlo_scatter_dims s;
  memset(&s, 0, sizeof s);
  s.inserted_window_dims = all;
  s.num_inserted_window_dims = (size_t)xt.rank;
  s.scatter_dims_to_operand_dims = all;
  s.num_scatter_dims_to_operand_dims = (size_t)xt.rank;
  s.index_vector_dim = ct.rank - 1;
  tpuc_hlo_fn* body = NULL;
  TRY(scatter_body(c, xt.dtype, op, &body));
  return tpuc_hlo_scatter(c->fn, &x, 1, coords, &updates, &s, body, out);
}

/* The elements at full coordinates `coords` (s64[..., rank]) of x. */
static tpuc_status* gather_points(op_ctx* c, V x, V coords, V* out) {
  tpuc_hlo_type xt, ct;
  TRY(type_of(c, x, &xt));
  TRY(type_of(c, coords, &ct));
  int64_t all[TPUC_MAX_RANK], ones[TPUC_MAX_RANK];
  for (int d = 0; d < xt.rank; d++) {
    all[d] = d;
    ones[d] = 1;
  }
  tpuc_hlo_gather_dims g;
  memset(&g, 0, sizeof g);
  g.collapsed_slice_dims = all;
  g.num_collapsed_slice_dims = (size_t)xt.rank;
  g.start_index_map = all;
  g.num_start_index_map = (size_t)xt.rank;
  g.index_vector_dim = ct.rank - 1;
  return tpuc_hlo_gather(c->fn, x, coords, &g, ones, false, out);
}

/* Rank-0 i1: some point of `coords` (s64[..., rank] into a tensor of
 * dims `dims`) is addressed twice. */
static tpuc_status* has_duplicates(op_ctx* c, V coords, const int64_t* dims,
                                   int rank, V* out) {
  tpuc_hlo_type ct;
  TRY(type_of(c, coords, &ct));
  tpuc_hlo_type pts = ct, cnt = tpuc_hlo_type_make(TPUC_DTYPE_S32, dims, rank);
  pts.rank--;
  pts.dtype = TPUC_DTYPE_S32;
  V ones, zeros, counts, gt;
  TRY(op_const(c, TPUC_DTYPE_S32, 1, &pts, &ones));
  TRY(op_const(c, TPUC_DTYPE_S32, 0, &cnt, &zeros));
  TRY(scatter_points(c, zeros, coords, ones, TPUC_HLO_ADD, &counts));
  TRY(cmp_const(c, counts, TPUC_HLO_GT, 1, &gt));
  return op_any_true(c, gt, out);
}

/* op_wrap_dim, but a bad dim runs the call on the CPU, which raises its
 * own error (a lowering's error would carry the op name first). */
static tpuc_status* wrap_dim(int rank, int64_t dim, int64_t* out) {
  tpuc_status* st = op_wrap_dim(rank, dim, out);
  if (st == NULL) return NULL;
  tpuc_status_free(st);
  return op_unimpl("dim out of range: CPU raises");
}

/* Argument i's int, required. */
static tpuc_status* int_arg(op_ctx* c, int i, int64_t* out) {
  if (op_is_none(c, i)) return op_unimpl("missing int argument");
  return op_int_arg(c, i, 0, out);
}

/* A 0-d tensor as 1-D of one element (gather and scatter treat them so). */
static tpuc_status* as_nonempty(op_ctx* c, V x, tpuc_hlo_type* t, V* out) {
  *out = x;
  if (t->rank != 0) return NULL;
  t->rank = 1;
  t->dims[0] = 1;
  return tpuc_hlo_reshape(c->fn, x, t->dims, 1, out);
}

/* ------------------------------- cat ----------------------------------- */

/* cat(Tensor[] tensors, int dim): PyTorch skips 1-D empty tensors (the
 * legacy rule) but they still take part in the type promotion. */
static tpuc_status* lower_cat(op_ctx* c, int param) {
  (void)param;
  if (c->nargs < 1 || c->args[0].kind != TPUC_OP_ARG_TENSOR_LIST)
    return op_unimpl("unexpected arguments");
  size_t n = c->list_len[0];
  const V* vals = c->list_vals[0];
  const tpuc_hlo_type* types = c->list_types[0];
  if (n == 0) return op_unimpl("empty list: CPU raises");
  tpuc_dtype dt = TPUC_DTYPE_INVALID;
  int ref = -1;
  for (size_t k = 0; k < n; k++) {
    if (vals[k] < 0) return op_unimpl("None in a tensor list");
    if (types[k].rank == 0) return op_unimpl("0-d tensor: CPU raises");
    dt = k == 0 ? types[k].dtype : tpuc_promote_types(dt, types[k].dtype);
    if (dt == TPUC_DTYPE_INVALID) return op_unimpl("no promotion");
    bool skip = types[k].rank == 1 && types[k].dims[0] == 0;
    if (!skip && ref < 0) ref = (int)k;
  }
  if (ref < 0) return op_unimpl("only empty tensors");
  int64_t dim_arg = 0, dim = 0;
  TRY(op_int_arg(c, 1, 0, &dim_arg));
  const tpuc_hlo_type* rt = &types[ref];
  TRY(wrap_dim(rt->rank, dim_arg, &dim));
  V parts[OP_MAX_LIST];
  size_t np = 0;
  for (size_t k = 0; k < n; k++) {
    const tpuc_hlo_type* t = &types[k];
    if (t->rank == 1 && t->dims[0] == 0) continue;
    if (t->rank != rt->rank) return op_unimpl("rank mismatch: CPU raises");
    for (int d = 0; d < t->rank; d++)
      if (d != dim && t->dims[d] != rt->dims[d])
        return op_unimpl("size mismatch: CPU raises");
    TRY(convert(c, vals[k], dt, &parts[np]));
    np++;
  }
  c->nouts = 1;
  if (np == 1) {
    c->outs[0] = parts[0];
    return NULL;
  }
  return tpuc_hlo_concatenate(c->fn, parts, np, dim, &c->outs[0]);
}

/* ---------------------------- index_select ----------------------------- */

/* Gathers slices x[..., idx[j], ...] along `dim` (idx: s64[n], in range):
 * the result has x's dims with dim's size n. */
static tpuc_status* take_along(op_ctx* c, V x, const tpuc_hlo_type* xt,
                               int64_t dim, V idx, int64_t n, V* out) {
  int64_t shp[2] = {n, 1};
  V ix;
  TRY(tpuc_hlo_reshape(c->fn, idx, shp, 2, &ix));
  return op_take_along(c->fn, x, xt, dim, ix, out);
}

/* A result of all zeros of `dims` (an empty result has no elements). */
static tpuc_status* empty_result(op_ctx* c, tpuc_dtype dt, const int64_t* dims,
                                 int rank) {
  tpuc_hlo_type t = tpuc_hlo_type_make(dt, dims, rank);
  c->nouts = 1;
  return op_const(c, dt, 0, &t, &c->outs[0]);
}

/* index_select(self, dim, index): a 0-d or 1-D int32/int64 index; out of
 * range raises IndexError "index out of range in self". */
static tpuc_status* lower_index_select(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 2))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type st = c->types[0], it = c->types[2];
  if (!is_index_dtype(it.dtype) || it.rank > 1)
    return op_unimpl("index the CPU refuses");
  int64_t d0 = 0, dim = 0;
  TRY(int_arg(c, 1, &d0));
  TRY(wrap_dim(st.rank, d0, &dim));
  int64_t n = numel_of(&it);
  V idx, bad;
  if (st.rank == 0) {
    /* a scalar takes exactly one index, 0 */
    if (n != 1) return op_unimpl("scalar self: CPU raises");
    TRY(norm_index(c, c->vals[2], 1, false, &idx, &bad));
    TRY(add_check(c, bad, CPU_DECIDES, "index out of range in self"));
    c->nouts = 1;
    c->outs[0] = c->vals[0];
    return NULL;
  }
  tpuc_hlo_type rt = st;
  rt.dims[dim] = n;
  if (n == 0) return empty_result(c, st.dtype, rt.dims, rt.rank);
  if (st.dims[dim] == 0) return op_unimpl("indexing an empty dim: CPU raises");
  TRY(norm_index(c, c->vals[2], st.dims[dim], false, &idx, &bad));
  TRY(add_check(c, bad, CPU_DECIDES, "index out of range in self"));
  c->nouts = 1;
  return take_along(c, c->vals[0], &st, dim, idx, n, &c->outs[0]);
}

/* embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse):
 * weight[indices], out of range raises like index_select. */
static tpuc_status* lower_embedding(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type wt = c->types[0], it = c->types[1];
  if (wt.rank != 2 || !is_index_dtype(it.dtype) || it.rank + 1 > TPUC_MAX_RANK)
    return op_unimpl("weight not 2-D, or an index the CPU refuses");
  int64_t dims[TPUC_MAX_RANK];
  memcpy(dims, it.dims, sizeof(int64_t) * (size_t)it.rank);
  dims[it.rank] = wt.dims[1];
  int64_t n = numel_of(&it);
  if (n == 0) return empty_result(c, wt.dtype, dims, it.rank + 1);
  if (wt.dims[0] == 0) return op_unimpl("empty weight: CPU raises");
  V idx, bad;
  TRY(norm_index(c, c->vals[1], wt.dims[0], false, &idx, &bad));
  TRY(add_check(c, bad, CPU_DECIDES, "index out of range in self"));
  V flat, r;
  TRY(tpuc_hlo_reshape(c->fn, idx, &n, 1, &flat));
  TRY(take_along(c, c->vals[0], &wt, 0, flat, n, &r));
  c->nouts = 1;
  return tpuc_hlo_reshape(c->fn, r, dims, it.rank + 1, &c->outs[0]);
}

/* -------------------------------- gather ------------------------------- */

/* gather(self, dim, index): out[i][j] = self[index[i][j]][j] (dim 0). */
static tpuc_status* lower_gather(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 2))
    return op_unimpl("unexpected arguments");
  tpuc_hlo_type st = c->types[0], it = c->types[2];
  const tpuc_hlo_type rt = c->types[2];
  if (!is_index_dtype(it.dtype)) return op_unimpl("index dtype: CPU raises");
  int64_t d0 = 0, dim = 0;
  TRY(int_arg(c, 1, &d0));
  TRY(wrap_dim(st.rank, d0, &dim));
  V self, index;
  TRY(as_nonempty(c, c->vals[0], &st, &self));
  TRY(as_nonempty(c, c->vals[2], &it, &index));
  if (st.rank != it.rank || st.rank >= TPUC_MAX_RANK)
    return op_unimpl("rank mismatch: CPU raises");
  for (int d = 0; d < st.rank; d++)
    if (d != dim && it.dims[d] > st.dims[d])
      return op_unimpl("index larger than self: CPU raises");
  if (numel_of(&it) == 0) return empty_result(c, st.dtype, rt.dims, rt.rank);
  if (numel_of(&st) == 0) return op_unimpl("empty self: CPU raises");
  V idx, bad, coords, r;
  TRY(norm_index(c, index, st.dims[dim], false, &idx, &bad));
  TRY(add_check(c, bad, CPU_DECIDES, "index out of bounds"));
  TRY(dim_coords(c, idx, &it, dim, &coords));
  TRY(gather_points(c, self, coords, &r));
  c->nouts = 1;
  return tpuc_hlo_reshape(c->fn, r, rt.dims, rt.rank, &c->outs[0]);
}

/* ------------------------------- scatter ------------------------------- */

/* Which scatter: the source, and how updates combine. */
#define SC_SRC 1          /* scatter.src: src tensor, replace */
#define SC_VALUE 2        /* scatter.value: Scalar value, replace */
#define SC_REDUCE 3       /* scatter.reduce: src, reduce="add"/"multiply" */
#define SC_VALUE_REDUCE 4 /* scatter.value_reduce */
#define SC_ADD 5          /* scatter_add */
#define SC_REDUCE_TWO 6   /* scatter_reduce.two: sum/prod/mean/amax/amin */

#define RED_NONE 0
#define RED_SUM 1
#define RED_PROD 2
#define RED_MEAN 3
#define RED_AMAX 4
#define RED_AMIN 5

static int reduce_kind(const char* s, bool legacy) {
  if (s == NULL) return -1;
  if (legacy) {
    if (strcmp(s, "add") == 0) return RED_SUM;
    if (strcmp(s, "multiply") == 0) return RED_PROD;
    return -1;
  }
  if (strcmp(s, "sum") == 0) return RED_SUM;
  if (strcmp(s, "prod") == 0) return RED_PROD;
  if (strcmp(s, "mean") == 0) return RED_MEAN;
  if (strcmp(s, "amax") == 0) return RED_AMAX;
  if (strcmp(s, "amin") == 0) return RED_AMIN;
  return -1;
}

/* The identity of a reduction over `dt`, broadcast to `shape`. */
static tpuc_status* reduce_identity(op_ctx* c, int red, tpuc_dtype dt,
                                    const tpuc_hlo_type* shape, V* out) {
  if (red == RED_SUM || red == RED_MEAN) return op_const(c, dt, 0, shape, out);
  if (red == RED_PROD) return op_const(c, dt, 1, shape, out);
  bool max = red == RED_AMAX;
  if (dt == TPUC_DTYPE_PRED) return op_const(c, dt, max ? 0 : 1, shape, out);
  if (tpuc_dtype_is_float(dt))
    return op_const(c, dt, max ? -INFINITY : INFINITY, shape, out);
  V k;
  if (dt == TPUC_DTYPE_U64 && !max) {
    V m1;
    TRY(tpuc_hlo_constant_i64(c->fn, TPUC_DTYPE_S64, -1, &m1));
    TRY(tpuc_hlo_bitcast_convert(c->fn, m1, dt, &k));
  } else if (dt == TPUC_DTYPE_S64) {
    TRY(tpuc_hlo_constant_i64(c->fn, dt, max ? INT64_MIN : INT64_MAX, &k));
  } else {
    double lo, hi;
    int_range(dt, &lo, &hi);
    TRY(tpuc_hlo_constant_i64(c->fn, dt, (int64_t)(max ? lo : hi), &k));
  }
  if (shape == NULL || shape->rank == 0) {
    *out = k;
    return NULL;
  }
  return tpuc_hlo_broadcast_in_dim(c->fn, k, shape->dims, shape->rank, NULL,
                                   out);
}

/* Rank-0 i1: two of the updates `upd` (dtype dt) written at the same
 * point of `coords` (into a tensor of `dims`) differ in their bits, so
 * which one a scatter keeps matters (the CPU keeps the last). Duplicates
 * that write equal values (a repetition penalty writing back each token's
 * score) leave one result whatever the order. Complex values: any
 * duplicate counts. */
static tpuc_status* conflicting_writes(op_ctx* c, V coords, V upd,
                                       tpuc_dtype dt, const int64_t* dims,
                                       int rank, V* out) {
  tpuc_dtype bd = dt;
  if (tpuc_dtype_is_complex(dt)) return has_duplicates(c, coords, dims, rank, out);
  if (dt == TPUC_DTYPE_PRED) bd = TPUC_DTYPE_S8;
  if (tpuc_dtype_is_float(dt))
    bd = tpuc_dtype_size(dt) == 2   ? TPUC_DTYPE_S16
         : tpuc_dtype_size(dt) == 4 ? TPUC_DTYPE_S32
                                    : TPUC_DTYPE_S64;
  V bits = upd;
  if (bd != dt) {
    if (dt == TPUC_DTYPE_PRED)
      TRY(tpuc_hlo_convert(c->fn, upd, bd, &bits));
    else
      TRY(tpuc_hlo_bitcast_convert(c->fn, upd, bd, &bits));
  }
  tpuc_hlo_type t = tpuc_hlo_type_make(bd, dims, rank);
  V lo, hi, mx, mn, gmx, gmn, ne;
  TRY(reduce_identity(c, RED_AMAX, bd, &t, &lo));
  TRY(reduce_identity(c, RED_AMIN, bd, &t, &hi));
  TRY(scatter_points(c, lo, coords, bits, TPUC_HLO_MAX, &mx));
  TRY(scatter_points(c, hi, coords, bits, TPUC_HLO_MIN, &mn));
  TRY(gather_points(c, mx, coords, &gmx));
  TRY(gather_points(c, mn, coords, &gmn));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_NE, gmx, gmn, &ne));
  return op_any_true(c, ne, out);
}

/* Floor division of integers by a positive divisor (HLO divides toward
 * zero). */
static tpuc_status* floor_div_pos(op_ctx* c, V a, V b, V* out) {
  tpuc_hlo_type t;
  TRY(type_of(c, a, &t));
  V q, r;
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, a, b, &q));
  if (tpuc_dtype_is_unsigned_int(t.dtype)) {
    *out = q;
    return NULL;
  }
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_REM, a, b, &r));
  V neg, one, qm;
  TRY(cmp_const(c, r, TPUC_HLO_LT, 0, &neg));
  TRY(op_const(c, t.dtype, 1, &t, &one));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, q, one, &qm));
  return tpuc_hlo_select(c->fn, neg, qm, q, out);
}

/* scatter / scatter_add / scatter_reduce (param: SC_*), in-place and out=
 * forms alike: (self, dim, index, src or value, [reduce], [include_self]).
 */
static tpuc_status* lower_scatter(op_ctx* c, int param) {
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 2) || !op_is_value(c, 3))
    return op_unimpl("unexpected arguments");
  tpuc_hlo_type st = c->types[0], it = c->types[2];
  const tpuc_hlo_type self_t = c->types[0];
  bool value = param == SC_VALUE || param == SC_VALUE_REDUCE;
  int red = RED_NONE;
  bool include_self = true;
  if (param == SC_ADD) red = RED_SUM;
  if (param == SC_REDUCE || param == SC_VALUE_REDUCE)
    red = reduce_kind(op_str_arg(c, 4, NULL), true);
  if (param == SC_REDUCE_TWO) {
    red = reduce_kind(op_str_arg(c, 4, NULL), false);
    int64_t inc = 1;
    TRY(op_int_arg(c, 5, 1, &inc));
    include_self = inc != 0;
  }
  if (red < 0) return op_unimpl("unknown reduction: CPU raises");
  tpuc_dtype dt = st.dtype;
  if (!is_index_dtype(it.dtype)) return op_unimpl("index dtype: CPU raises");
  if (red == RED_MEAN && dt == TPUC_DTYPE_PRED)
    return op_unimpl("bool mean: CPU");
  int64_t d0 = 0, dim = 0;
  TRY(int_arg(c, 1, &d0));
  TRY(wrap_dim(st.rank, d0, &dim));
  V self, index, src = -1;
  TRY(as_nonempty(c, c->vals[0], &st, &self));
  TRY(as_nonempty(c, c->vals[2], &it, &index));
  if (st.rank != it.rank || st.rank >= TPUC_MAX_RANK)
    return op_unimpl("rank mismatch: CPU raises");
  tpuc_hlo_type srt = c->types[3];
  if (!value) {
    if (!op_is_tensor(c, 3) || srt.dtype != dt)
      return op_unimpl("src dtype: CPU raises");
    TRY(as_nonempty(c, c->vals[3], &srt, &src));
    if (srt.rank != st.rank) return op_unimpl("src rank: CPU raises");
    for (int d = 0; d < st.rank; d++)
      if (it.dims[d] > srt.dims[d]) return op_unimpl("index larger than src");
  }
  for (int d = 0; d < st.rank; d++)
    if (d != dim && it.dims[d] > st.dims[d])
      return op_unimpl("index larger than self: CPU raises");
  c->nouts = 1;
  if (numel_of(&it) == 0) {
    c->outs[0] = c->vals[0];
    return NULL;
  }
  if (numel_of(&st) == 0) return op_unimpl("empty self: CPU raises");
  V idx, bad, coords, upd;
  TRY(norm_index(c, index, st.dims[dim], false, &idx, &bad));
  TRY(add_check(c, bad, CPU_DECIDES, "index out of bounds"));
  TRY(dim_coords(c, idx, &it, dim, &coords));
  tpuc_hlo_type ut = it;
  ut.dtype = dt;
  if (value) {
    V v;
    TRY(fill_value(c, 3, dt, &v));
    TRY(tpuc_hlo_broadcast_in_dim(c->fn, v, ut.dims, ut.rank, NULL, &upd));
  } else {
    int64_t zero[TPUC_MAX_RANK] = {0};
    upd = src;
    bool whole = true;
    for (int d = 0; d < st.rank; d++) whole &= it.dims[d] == srt.dims[d];
    if (!whole) TRY(tpuc_hlo_slice(c->fn, upd, zero, it.dims, NULL, &upd));
  }
  V base = self, r;
  if (red == RED_NONE) {
    if (!value) {
      V dup;
      TRY(conflicting_writes(c, coords, upd, dt, st.dims, st.rank, &dup));
      TRY(add_check(c, dup, CPU_DECIDES, "duplicate indices"));
    }
    TRY(scatter_points(c, base, coords, upd, -1, &r));
    return tpuc_hlo_reshape(c->fn, r, self_t.dims, self_t.rank, &c->outs[0]);
  }
  /* Number of updates per element, for include_self=False and mean. */
  V count = -1;
  if (!include_self || red == RED_MEAN) {
    tpuc_hlo_type cnt = st;
    V ones, zeros;
    TRY(op_const(c, dt, 1, &ut, &ones));
    TRY(op_const(c, dt, 0, &cnt, &zeros));
    TRY(scatter_points(c, zeros, coords, ones, TPUC_HLO_ADD, &count));
  }
  if (!include_self) {
    V hit, ident;
    TRY(cmp_const(c, count, TPUC_HLO_NE, 0, &hit));
    TRY(reduce_identity(c, red, dt, &st, &ident));
    TRY(tpuc_hlo_select(c->fn, hit, ident, base, &base));
  }
  int op = red == RED_PROD   ? TPUC_HLO_MUL
           : red == RED_AMAX ? TPUC_HLO_MAX
           : red == RED_AMIN ? TPUC_HLO_MIN
                             : TPUC_HLO_ADD;
  /* half floats accumulate in f32 and round once, as the CPU's kernels */
  tpuc_dtype acc = op_accumulation_dtype(dt);
  TRY(convert(c, base, acc, &base));
  TRY(convert(c, upd, acc, &upd));
  TRY(scatter_points(c, base, coords, upd, op, &r));
  TRY(convert(c, r, dt, &r));
  if (red == RED_MEAN) {
    /* the CPU divides by the count (plus one for self), in self's dtype,
     * flooring for integers; untouched elements divide by 1 */
    V one, zero, n;
    TRY(op_const(c, dt, 1, &st, &one));
    if (include_self) {
      TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, count, one, &n));
    } else {
      TRY(cmp_const(c, count, TPUC_HLO_EQ, 0, &zero));
      TRY(tpuc_hlo_select(c->fn, zero, one, count, &n));
    }
    if (tpuc_dtype_is_float(dt))
      TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, r, n, &r));
    else
      TRY(floor_div_pos(c, r, n, &r));
  }
  return tpuc_hlo_reshape(c->fn, r, self_t.dims, self_t.rank, &c->outs[0]);
}

/* ------------------------- index_add/copy/fill ------------------------- */

/* Window scatter along `dim`: `src` (x's dims with dim's size n) into x
 * at rows idx (s64[n], in range), combined with `op` (-1: replace). */
static tpuc_status* scatter_rows(op_ctx* c, V x, int64_t dim, V idx, int64_t n,
                                 V src, int op, V* out) {
  tpuc_hlo_type xt;
  TRY(type_of(c, x, &xt));
  int64_t shp[2] = {n, 1};
  V ix;
  TRY(tpuc_hlo_reshape(c->fn, idx, shp, 2, &ix));
  int64_t win[TPUC_MAX_RANK];
  size_t nw = 0;
  for (int d = 0; d < xt.rank; d++)
    if (d != dim) win[nw++] = d;
  tpuc_hlo_scatter_dims s;
  memset(&s, 0, sizeof s);
  s.update_window_dims = win;
  s.num_update_window_dims = nw;
  s.inserted_window_dims = &dim;
  s.num_inserted_window_dims = 1;
  s.scatter_dims_to_operand_dims = &dim;
  s.num_scatter_dims_to_operand_dims = 1;
  s.index_vector_dim = 1;
  tpuc_hlo_fn* body = NULL;
  TRY(scatter_body(c, xt.dtype, op, &body));
  return tpuc_hlo_scatter(c->fn, &x, 1, ix, &src, &s, body, out);
}

#define IX_ADD 1
#define IX_COPY 2

/* index_add(self, dim, index, source, alpha) / index_copy(self, dim,
 * index, source): source has self's dims with dim's size index.numel(). */
static tpuc_status* lower_index_add_copy(op_ctx* c, int param) {
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 2) || !op_is_tensor(c, 3))
    return op_unimpl("unexpected arguments");
  tpuc_hlo_type st = c->types[0], it = c->types[2], srt = c->types[3];
  const tpuc_hlo_type self_t = c->types[0];
  if (!is_index_dtype(it.dtype) || it.rank > 1 || srt.dtype != st.dtype)
    return op_unimpl("arguments the CPU refuses");
  int64_t d0 = 0, dim = 0;
  TRY(int_arg(c, 1, &d0));
  TRY(wrap_dim(st.rank, d0, &dim));
  V self, src;
  TRY(as_nonempty(c, c->vals[0], &st, &self));
  TRY(as_nonempty(c, c->vals[3], &srt, &src));
  int64_t n = numel_of(&it);
  if (srt.rank != st.rank) return op_unimpl("source rank: CPU raises");
  for (int d = 0; d < st.rank; d++)
    if (srt.dims[d] != (d == dim ? n : st.dims[d]))
      return op_unimpl("source shape: CPU raises");
  tpuc_dtype dt = st.dtype;
  bool alpha = param == IX_ADD && op_is_value(c, 4);
  if (alpha && c->args[4].kind == TPUC_OP_ARG_SCALAR &&
      c->args[4].scalar == TPUC_SCALAR_FLOAT && !tpuc_dtype_is_float(dt) &&
      !tpuc_dtype_is_complex(dt))
    return op_unimpl("float alpha, integral self: CPU raises");
  c->nouts = 1;
  if (n == 0) {
    c->outs[0] = c->vals[0];
    return NULL;
  }
  if (st.dims[dim] == 0) return op_unimpl("empty dim: CPU raises");
  V idx, bad, r;
  TRY(norm_index(c, c->vals[2], st.dims[dim], false, &idx, &bad));
  TRY(add_check(c, bad, CPU_DECIDES, "index out of bounds"));
  if (it.rank == 0) TRY(tpuc_hlo_reshape(c->fn, idx, &n, 1, &idx));
  if (param == IX_COPY) {
    /* duplicate rows: the CPU's last write wins; let it run those */
    int64_t shp[2] = {n, 1};
    V coords, dup;
    TRY(tpuc_hlo_reshape(c->fn, idx, shp, 2, &coords));
    TRY(has_duplicates(c, coords, &st.dims[dim], 1, &dup));
    TRY(add_check(c, dup, CPU_DECIDES, "duplicate indices"));
    TRY(scatter_rows(c, self, dim, idx, n, src, -1, &r));
    return tpuc_hlo_reshape(c->fn, r, self_t.dims, self_t.rank, &c->outs[0]);
  }
  /* self + alpha * source (for bool, self | (source & alpha)). Half
   * floats round like the CPU: a 1-D self adds element by element in the
   * dtype, more dims accumulate in f32 and round once; with an alpha
   * other than 1 the CPU rounds alpha * source and every sum, which XLA
   * does not keep (it fuses the conversions away): the CPU runs those. */
  tpuc_dtype acc = op_accumulation_dtype(dt);
  V x = self, s = src;
  if (acc != dt) {
    if (alpha) {
      V not_one;
      TRY(cmp_const(c, c->vals[4], TPUC_HLO_NE, 1, &not_one));
      TRY(add_check(c, not_one, CPU_DECIDES, "half index_add with alpha"));
    }
    if (st.rank > 1) {
      TRY(convert(c, self, acc, &x));
      TRY(convert(c, src, acc, &s));
    }
  } else if (alpha) {
    V a;
    TRY(op_scalar(c, 4, dt, &srt, &a));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, s, a, &s));
  }
  TRY(scatter_rows(c, x, dim, idx, n, s, TPUC_HLO_ADD, &r));
  TRY(convert(c, r, dt, &r));
  return tpuc_hlo_reshape(c->fn, r, self_t.dims, self_t.rank, &c->outs[0]);
}

/* For s64[n] indices `idx`: *keep (i1[n]) is true where an index is not
 * padding_idx `pad`, and *safe is idx with padding entries sent to row 0
 * (a padding index may be out of range; its row adds nothing). */
static tpuc_status* padding_kept(op_ctx* c, V idx, int64_t n, int64_t pad,
                                 V* keep, V* safe) {
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_S64, &n, 1);
  V z;
  TRY(cmp_const(c, idx, TPUC_HLO_NE, (double)pad, keep));
  TRY(op_const(c, TPUC_DTYPE_S64, 0, &t, &z));
  return tpuc_hlo_select(c->fn, *keep, idx, z, safe);
}

/* embedding_dense_backward(grad_output, indices, num_weights,
 * padding_idx, scale_grad_by_freq): the rows of grad_output summed into
 * [num_weights, D] at their indices, in order (the CPU adds them one by
 * one), skipping padding_idx; scale_grad_by_freq divides each row by the
 * count of its index. */
static tpuc_status* lower_embedding_backward(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type gt = c->types[0], it = c->types[1];
  int64_t nw = 0, pad = -1, scale = 0;
  TRY(int_arg(c, 2, &nw));
  TRY(op_int_arg(c, 3, -1, &pad));
  TRY(op_int_arg(c, 4, 0, &scale));
  tpuc_dtype dt = gt.dtype;
  if (!is_index_dtype(it.dtype) || !tpuc_dtype_is_float(dt) || gt.rank < 1 ||
      nw < 0)
    return op_unimpl("arguments the CPU refuses");
  /* scaled rows round the product into each half-float sum: CPU */
  if (scale && op_accumulation_dtype(dt) != dt)
    return op_unimpl("half scale_grad_by_freq: CPU");
  int64_t n = numel_of(&it), d = gt.dims[gt.rank - 1];
  if (numel_of(&gt) != n * d) return op_unimpl("grad shape: CPU raises");
  int64_t out_dims[2] = {nw, d}, gdims[2] = {n, d};
  tpuc_hlo_type ot = tpuc_hlo_type_make(dt, out_dims, 2);
  tpuc_hlo_type rt = tpuc_hlo_type_make(dt, gdims, 2);
  if (n == 0 || nw == 0 || d == 0) {
    if (n > 0 && nw == 0) return op_unimpl("no weights: CPU decides");
    return empty_result(c, dt, out_dims, 2);
  }
  V idx, safe, g, keep, bad, zeros, r;
  TRY(tpuc_hlo_reshape(c->fn, c->vals[1], &n, 1, &idx));
  TRY(convert(c, idx, TPUC_DTYPE_S64, &idx));
  TRY(tpuc_hlo_reshape(c->fn, c->vals[0], gdims, 2, &g));
  /* rows at padding_idx add nothing; the others must be in range */
  TRY(padding_kept(c, idx, n, pad, &keep, &safe));
  {
    V lt, ge, out, any;
    TRY(cmp_const(c, idx, TPUC_HLO_LT, 0, &lt));
    TRY(cmp_const(c, idx, TPUC_HLO_GE, (double)nw, &ge));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, lt, ge, &out));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, out, keep, &any));
    TRY(op_any_true(c, any, &bad));
    TRY(add_check(c, bad, CPU_DECIDES, "index out of range"));
  }
  if (scale) {
    /* each row times 1 / (count of its index) */
    tpuc_hlo_type ct = tpuc_hlo_type_make(TPUC_DTYPE_F64, &nw, 1);
    tpuc_hlo_type pt = tpuc_hlo_type_make(TPUC_DTYPE_F64, &n, 1);
    V cz, ones, counts, cnt, s, sb;
    int64_t shp[2] = {n, 1};
    V coords;
    TRY(tpuc_hlo_reshape(c->fn, idx, shp, 2, &coords));
    TRY(op_const(c, TPUC_DTYPE_F64, 0, &ct, &cz));
    TRY(op_const(c, TPUC_DTYPE_F64, 1, &pt, &ones));
    TRY(scatter_points(c, cz, coords, ones, TPUC_HLO_ADD, &counts));
    TRY(take_along(c, counts, &ct, 0, idx, n, &cnt));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, ones, cnt, &s));
    TRY(convert(c, s, dt, &s));
    int64_t zero = 0;
    TRY(tpuc_hlo_broadcast_in_dim(c->fn, s, gdims, 2, &zero, &sb));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, g, sb, &g));
  }
  V gz, mask;
  int64_t zero = 0;
  TRY(op_const(c, dt, 0, &rt, &gz));
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, keep, gdims, 2, &zero, &mask));
  TRY(tpuc_hlo_select(c->fn, mask, g, gz, &g));
  TRY(op_const(c, dt, 0, &ot, &zeros));
  TRY(scatter_rows(c, zeros, 0, safe, n, g, TPUC_HLO_ADD, &r));
  c->nouts = 1;
  c->outs[0] = r;
  return NULL;
}

/* index_fill(self, dim, index, value): rows index (negatives wrap) of dim
 * set to the value (a Scalar or a 0-d tensor). */
static tpuc_status* lower_index_fill(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 2))
    return op_unimpl("unexpected arguments");
  tpuc_hlo_type st = c->types[0], it = c->types[2];
  const tpuc_hlo_type self_t = c->types[0];
  if (!is_index_dtype(it.dtype) || it.rank > 1)
    return op_unimpl("arguments the CPU refuses");
  int64_t d0 = 0, dim = 0;
  TRY(int_arg(c, 1, &d0));
  TRY(wrap_dim(st.rank, d0, &dim));
  V self;
  TRY(as_nonempty(c, c->vals[0], &st, &self));
  tpuc_dtype dt = st.dtype;
  V v;
  TRY(fill_value(c, 3, dt, &v));
  int64_t n = numel_of(&it), size = st.dims[dim];
  c->nouts = 1;
  if (n == 0) {
    c->outs[0] = c->vals[0];
    return NULL;
  }
  if (size == 0) return op_unimpl("empty dim: CPU raises");
  V idx, bad;
  TRY(norm_index(c, c->vals[2], size, true, &idx, &bad));
  TRY(add_check(c, bad, CPU_DECIDES, "index out of bounds"));
  if (it.rank == 0) TRY(tpuc_hlo_reshape(c->fn, idx, &n, 1, &idx));
  /* a row mask along dim: ones scattered into zeros */
  tpuc_hlo_type mt = tpuc_hlo_type_make(TPUC_DTYPE_PRED, &size, 1);
  tpuc_hlo_type ot = tpuc_hlo_type_make(TPUC_DTYPE_PRED, &n, 1);
  V zeros, ones, rows, mask, vb, r;
  TRY(op_const(c, TPUC_DTYPE_PRED, 0, &mt, &zeros));
  TRY(op_const(c, TPUC_DTYPE_PRED, 1, &ot, &ones));
  int64_t shp[2] = {n, 1};
  V coords;
  TRY(tpuc_hlo_reshape(c->fn, idx, shp, 2, &coords));
  TRY(scatter_points(c, zeros, coords, ones, -1, &rows));
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, rows, st.dims, st.rank, &dim, &mask));
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, v, st.dims, st.rank, NULL, &vb));
  TRY(tpuc_hlo_select(c->fn, mask, vb, self, &r));
  return tpuc_hlo_reshape(c->fn, r, self_t.dims, self_t.rank, &c->outs[0]);
}

/* --------------------------- advanced indexing ------------------------- */

/* self[indices] with a Tensor?[] of int32/int64 tensors and Nones. */
typedef struct {
  int k;                       /* indexed self dims */
  int64_t dims[TPUC_MAX_RANK]; /* which, ascending */
  int nb;                      /* rank of the broadcast index shape */
  int64_t b[TPUC_MAX_RANK];    /* broadcast index shape */
  tpuc_hlo_type result;        /* shape of self[indices] */
  int64_t offs[TPUC_MAX_RANK]; /* result positions of the other dims */
  int noffs;
  int64_t slice[TPUC_MAX_RANK]; /* gather slice sizes */
  V coords;                     /* s64[b..., k], wrapped */
  int64_t count;                /* elements of b */
} adv_index;

/* Works out the indexing of self (argument si) by the Tensor?[] argument
 * li: PyTorch puts the broadcast index dims where the indexed dims were
 * when those are adjacent, else first. Adds the range check. */
static tpuc_status* adv_prepare(op_ctx* c, int si, int li, adv_index* a) {
  const tpuc_hlo_type* st = &c->types[si];
  if (c->args[li].kind != TPUC_OP_ARG_TENSOR_LIST)
    return op_unimpl("unexpected arguments");
  size_t n = c->list_len[li];
  if (n > (size_t)st->rank) return op_unimpl("too many indices: CPU raises");
  memset(a, 0, sizeof *a);
  int first = -1, last = -1;
  for (size_t e = 0; e < n; e++) {
    if (c->list_vals[li][e] < 0) continue;
    const tpuc_hlo_type* t = &c->list_types[li][e];
    if (!is_index_dtype(t->dtype))
      return op_unimpl("mask or non-integer index: CPU");
    if (!broadcast_merge(a->b, &a->nb, t))
      return op_unimpl("indices do not broadcast: CPU raises");
    if (first < 0) first = (int)e;
    last = (int)e;
    a->dims[a->k++] = (int64_t)e;
  }
  if (a->k == 0) return op_unimpl("no index tensors");
  bool adjacent = last - first + 1 == a->k;
  int rank = st->rank, rr = a->nb + rank - a->k;
  if (rr > TPUC_MAX_RANK || a->nb + 1 > TPUC_MAX_RANK)
    return op_unimpl("result rank too large");
  a->result.dtype = st->dtype;
  a->result.rank = rr;
  int pos = adjacent ? first : 0;
  for (int j = 0; j < a->nb; j++) a->result.dims[pos + j] = a->b[j];
  a->count = 1;
  for (int j = 0; j < a->nb; j++) a->count *= a->b[j];
  int other = 0;
  for (int d = 0; d < rank; d++) {
    bool indexed = false;
    for (int j = 0; j < a->k; j++) indexed |= a->dims[j] == d;
    a->slice[d] = indexed ? 1 : st->dims[d];
    if (indexed) {
      if (st->dims[d] == 0 && a->count > 0)
        return op_unimpl("indexing an empty dim: CPU raises");
      continue;
    }
    int p = adjacent ? (d < first ? d : d - a->k + a->nb) : a->nb + other;
    other++;
    a->result.dims[p] = st->dims[d];
    a->offs[a->noffs++] = p;
  }
  if (a->count == 0) return NULL;
  int64_t shp[TPUC_MAX_RANK + 1];
  memcpy(shp, a->b, sizeof(int64_t) * (size_t)a->nb);
  shp[a->nb] = 1;
  V parts[TPUC_MAX_RANK];
  V bad = -1;
  for (int j = 0; j < a->k; j++) {
    size_t e = (size_t)a->dims[j];
    V x, b1;
    TRY(bcast_to(c, c->list_vals[li][e], &c->list_types[li][e], a->b, a->nb,
                 &x));
    TRY(norm_index(c, x, st->dims[a->dims[j]], true, &x, &b1));
    if (bad < 0)
      bad = b1;
    else
      TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, bad, b1, &bad));
    TRY(tpuc_hlo_reshape(c->fn, x, shp, a->nb + 1, &parts[j]));
  }
  TRY(add_check(c, bad, CPU_DECIDES, "index out of bounds"));
  if (a->k == 1) {
    a->coords = parts[0];
    return NULL;
  }
  return tpuc_hlo_concatenate(c->fn, parts, (size_t)a->k, a->nb, &a->coords);
}

/* index.Tensor(self, indices) */
static tpuc_status* lower_index(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  adv_index a;
  TRY(adv_prepare(c, 0, 1, &a));
  if (a.count == 0 || numel_of(&a.result) == 0)
    return empty_result(c, a.result.dtype, a.result.dims, a.result.rank);
  tpuc_hlo_gather_dims g;
  memset(&g, 0, sizeof g);
  g.offset_dims = a.offs;
  g.num_offset_dims = (size_t)a.noffs;
  g.collapsed_slice_dims = a.dims;
  g.num_collapsed_slice_dims = (size_t)a.k;
  g.start_index_map = a.dims;
  g.num_start_index_map = (size_t)a.k;
  g.index_vector_dim = a.nb;
  c->nouts = 1;
  return tpuc_hlo_gather(c->fn, c->vals[0], a.coords, &g, a.slice, false,
                         &c->outs[0]);
}

/* self[mask] = values (index_put_ with one bool mask): the mask covers
 * the self dims from its position on; its true elements are a dim of
 * data-dependent size in self[mask], which values must broadcast along
 * (size 1 or absent there). */
static tpuc_status* mask_put(op_ctx* c, bool accumulate) {
  const tpuc_hlo_type st = c->types[0], vt = c->types[2];
  size_t n = c->list_len[1];
  int pos = -1;
  for (size_t e = 0; e < n; e++) {
    if (c->list_vals[1][e] < 0) continue;
    if (pos >= 0) return op_unimpl("a mask with other indices: CPU");
    pos = (int)e;
  }
  const tpuc_hlo_type* mt = &c->list_types[1][pos];
  if (mt->dtype != TPUC_DTYPE_PRED || pos + mt->rank > st.rank ||
      vt.dtype != st.dtype)
    return op_unimpl("a mask put the CPU runs");
  for (int d = 0; d < mt->rank; d++)
    if (mt->dims[d] != st.dims[pos + d])
      return op_unimpl("mask shape mismatch: CPU raises");
  /* self[mask] has dims: self[:pos], the true count, self[pos+mrank:] */
  int post = st.rank - pos - mt->rank, rr = pos + 1 + post;
  if (vt.rank > rr) return op_unimpl("values rank: CPU raises");
  int64_t kept[TPUC_MAX_RANK], map[TPUC_MAX_RANK];
  int nk = 0;
  for (int d = 0; d < vt.rank; d++) {
    int p = rr - vt.rank + d; /* position in self[mask] */
    if (p == pos) {
      if (vt.dims[d] != 1) return op_unimpl("values along the mask: CPU");
      continue;
    }
    int sd = p < pos ? p : p - 1 + mt->rank; /* the self dim */
    if (vt.dims[d] != 1 && vt.dims[d] != st.dims[sd])
      return op_unimpl("values do not broadcast: CPU raises");
    kept[nk] = vt.dims[d];
    map[nk++] = sd;
  }
  int64_t mmap[TPUC_MAX_RANK];
  for (int d = 0; d < mt->rank; d++) mmap[d] = pos + d;
  V mask, v, vb, put;
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, c->list_vals[1][pos], st.dims, st.rank,
                                mmap, &mask));
  TRY(tpuc_hlo_reshape(c->fn, c->vals[2], kept, nk, &v));
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, v, st.dims, st.rank, map, &vb));
  put = vb;
  if (accumulate) {
    tpuc_dtype acc = op_accumulation_dtype(st.dtype);
    V x, y;
    TRY(convert(c, c->vals[0], acc, &x));
    TRY(convert(c, vb, acc, &y));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, x, y, &put));
    TRY(convert(c, put, st.dtype, &put));
  }
  c->nouts = 1;
  return tpuc_hlo_select(c->fn, mask, put, c->vals[0], &c->outs[0]);
}

/* index_put(self, indices, values, accumulate[, unsafe]) */
static tpuc_status* lower_index_put(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 2) ||
      c->args[1].kind != TPUC_OP_ARG_TENSOR_LIST)
    return op_unimpl("unexpected arguments");
  int64_t acc_arg = 0;
  TRY(op_int_arg(c, 3, 0, &acc_arg));
  bool accumulate = acc_arg != 0;
  for (size_t e = 0; e < c->list_len[1]; e++)
    if (c->list_vals[1][e] >= 0 && c->list_types[1][e].dtype == TPUC_DTYPE_PRED)
      return mask_put(c, accumulate);
  const tpuc_hlo_type st = c->types[0], vt = c->types[2];
  if (vt.dtype != st.dtype) return op_unimpl("dtype mismatch: CPU raises");
  adv_index a;
  TRY(adv_prepare(c, 0, 1, &a));
  if (!broadcasts_to(&vt, a.result.dims, a.result.rank))
    return op_unimpl("values do not broadcast: CPU raises");
  c->nouts = 1;
  if (a.count == 0 || numel_of(&a.result) == 0) {
    c->outs[0] = c->vals[0];
    return NULL;
  }
  V upd;
  TRY(bcast_to(c, c->vals[2], &vt, a.result.dims, a.result.rank, &upd));
  if (!accumulate && numel_of(&vt) > 1) {
    /* duplicate index tuples with different values: the CPU decides */
    int64_t sizes[TPUC_MAX_RANK];
    for (int j = 0; j < a.k; j++) sizes[j] = st.dims[a.dims[j]];
    V dup;
    TRY(has_duplicates(c, a.coords, sizes, a.k, &dup));
    TRY(add_check(c, dup, CPU_DECIDES, "duplicate indices"));
  }
  tpuc_hlo_scatter_dims s;
  memset(&s, 0, sizeof s);
  s.update_window_dims = a.offs;
  s.num_update_window_dims = (size_t)a.noffs;
  s.inserted_window_dims = a.dims;
  s.num_inserted_window_dims = (size_t)a.k;
  s.scatter_dims_to_operand_dims = a.dims;
  s.num_scatter_dims_to_operand_dims = (size_t)a.k;
  s.index_vector_dim = a.nb;
  tpuc_hlo_fn* body = NULL;
  TRY(scatter_body(c, st.dtype, accumulate ? TPUC_HLO_ADD : -1, &body));
  V x = c->vals[0];
  return tpuc_hlo_scatter(c->fn, &x, 1, a.coords, &upd, &s, body, &c->outs[0]);
}

/* ------------------------------ masked_fill ---------------------------- */

/* masked_fill(self, mask, value): the result has the broadcast shape of
 * self and mask (in place: self's, checked by the write). */
static tpuc_status* lower_masked_fill(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1))
    return op_unimpl("unexpected arguments");
  if (c->types[1].dtype != TPUC_DTYPE_PRED)
    return op_unimpl("non-bool mask: CPU raises");
  tpuc_dtype dt = c->types[0].dtype;
  V v, vb, x, m;
  TRY(fill_value(c, 2, dt, &v));
  int which[2] = {0, 1};
  tpuc_hlo_type shape;
  TRY(op_broadcast_shape(c, which, 2, &shape));
  shape.dtype = dt;
  TRY(op_operand(c, 0, dt, &shape, &x));
  TRY(op_operand(c, 1, TPUC_DTYPE_PRED, &shape, &m));
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, v, shape.dims, shape.rank, NULL, &vb));
  c->nouts = 1;
  return tpuc_hlo_select(c->fn, m, vb, x, &c->outs[0]);
}

/* ---------------------------- masked_scatter --------------------------- */

/* Inclusive prefix sums of the s64[n] `x` (Hillis-Steele: log2(n)
 * shifted adds). */
static tpuc_status* prefix_sum(op_ctx* c, V x, int64_t n, V* out) {
  V zero;
  TRY(op_const(c, TPUC_DTYPE_S64, 0, NULL, &zero));
  for (int64_t k = 1; k < n; k *= 2) {
    int64_t lo = k, hi = -k; /* shifted[i] = x[i - k], 0 before */
    V shifted;
    TRY(tpuc_hlo_pad(c->fn, x, zero, &lo, &hi, NULL, &shifted));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, x, shifted, &x));
  }
  *out = x;
  return NULL;
}

/* masked_scatter(self, mask, source) (param 0, and its out= form; the
 * result has the broadcast shape of self and mask) / masked_scatter_
 * (param 1: mask broadcast to self): the true elements of the mask, in
 * row-major order, take the consecutive elements of the flattened
 * source. A source shorter than the count of true elements raises. */
static tpuc_status* lower_masked_scatter(op_ctx* c, int param) {
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1) || !op_is_tensor(c, 2))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type st = c->types[0], mt = c->types[1], srt = c->types[2];
  if (mt.dtype != TPUC_DTYPE_PRED || srt.dtype != st.dtype)
    return op_unimpl("mask or source dtype: CPU raises");
  int64_t dims[TPUC_MAX_RANK];
  int rank = 0;
  if (!broadcast_merge(dims, &rank, &st) || !broadcast_merge(dims, &rank, &mt))
    return op_unimpl("shapes do not broadcast: CPU raises");
  if (param == 1 && !broadcasts_to(&mt, st.dims, st.rank))
    return op_unimpl("mask does not expand to self: CPU raises");
  if (param == 1) {
    rank = st.rank;
    memcpy(dims, st.dims, sizeof(int64_t) * (size_t)rank);
  }
  tpuc_hlo_type rt = tpuc_hlo_type_make(st.dtype, dims, rank);
  int64_t n = numel_of(&rt), ns = numel_of(&srt);
  V x, m;
  TRY(bcast_to(c, c->vals[0], &st, dims, rank, &x));
  TRY(bcast_to(c, c->vals[1], &mt, dims, rank, &m));
  c->nouts = 1;
  if (n == 0) return empty_result(c, st.dtype, dims, rank);
  V flat_m, count, pos, bad, kv;
  TRY(tpuc_hlo_reshape(c->fn, m, &n, 1, &flat_m));
  TRY(convert(c, flat_m, TPUC_DTYPE_S64, &count));
  TRY(prefix_sum(c, count, n, &pos));
  /* the count of true elements is the last prefix sum */
  {
    int64_t last = n - 1;
    V total;
    TRY(tpuc_hlo_slice(c->fn, pos, &last, &n, NULL, &total));
    TRY(tpuc_hlo_reshape(c->fn, total, NULL, 0, &total));
    TRY(op_const(c, TPUC_DTYPE_S64, (double)ns, NULL, &kv));
    TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_GT, total, kv, &bad));
    TRY(add_check(c, bad, TPUC_INVALID_ARGUMENT,
                  "Number of elements of source < number of ones in mask"));
  }
  if (ns == 0) {
    c->outs[0] = x;
    return NULL;
  }
  /* element i takes source[pos[i] - 1] (clamped: false elements keep
   * self and may point anywhere) */
  V one, lo, hi, src, idx, taken, r;
  tpuc_hlo_type pt = tpuc_hlo_type_make(TPUC_DTYPE_S64, &n, 1);
  TRY(op_const(c, TPUC_DTYPE_S64, 1, &pt, &one));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, pos, one, &pos));
  TRY(op_const(c, TPUC_DTYPE_S64, 0, NULL, &lo));
  TRY(op_const(c, TPUC_DTYPE_S64, (double)(ns - 1), NULL, &hi));
  TRY(tpuc_hlo_clamp(c->fn, lo, pos, hi, &pos));
  TRY(tpuc_hlo_reshape(c->fn, c->vals[2], &ns, 1, &src));
  int64_t idims[2] = {n, 1};
  TRY(tpuc_hlo_reshape(c->fn, pos, idims, 2, &idx));
  TRY(op_gather_elements(c->fn, src, idx, &taken));
  TRY(tpuc_hlo_reshape(c->fn, taken, dims, rank, &taken));
  TRY(tpuc_hlo_select(c->fn, m, taken, x, &r));
  c->outs[0] = r;
  return NULL;
}

/* ------------------------------ shape ops ------------------------------ */

/* ----------------------------- embedding_bag ---------------------------- */

#define EB_SUM 0
#define EB_MEAN 1
#define EB_MAX 2

/* x (rank 1, s64 or i1) as a [n, 1] column for row scatters and takes. */
static tpuc_status* col_of(op_ctx* c, V x, int64_t n, V* out) {
  int64_t shp[2] = {n, 1};
  return tpuc_hlo_reshape(c->fn, x, shp, 2, out);
}

/* A [rows, d] value from the per-row [rows] value v (v's entry per row). */
static tpuc_status* rows_bcast(op_ctx* c, V v, int64_t rows, int64_t d,
                               V* out) {
  int64_t dims[2] = {rows, d}, zero = 0;
  return tpuc_hlo_broadcast_in_dim(c->fn, v, dims, 2, &zero, out);
}

/* Bag of each of the n indices (s64[n]) from the first `nb` offsets
 * (s64): the count of bag starts at or before it, less one. */
static tpuc_status* offset_to_bag(op_ctx* c, V offs, int64_t nb, int64_t n,
                                  V* out) {
  int64_t n1 = n + 1, lo = 0, hi = nb, one = 1;
  tpuc_hlo_type ct = tpuc_hlo_type_make(TPUC_DTYPE_S64, &n1, 1);
  tpuc_hlo_type pt = tpuc_hlo_type_make(TPUC_DTYPE_S64, &nb, 1);
  V starts, zeros, ones, coords, counts, sums, k;
  TRY(tpuc_hlo_slice(c->fn, offs, &lo, &hi, &one, &starts));
  TRY(col_of(c, starts, nb, &coords));
  TRY(op_const(c, TPUC_DTYPE_S64, 0, &ct, &zeros));
  TRY(op_const(c, TPUC_DTYPE_S64, 1, &pt, &ones));
  TRY(scatter_points(c, zeros, coords, ones, TPUC_HLO_ADD, &counts));
  TRY(prefix_sum(c, counts, n1, &sums));
  hi = n;
  TRY(tpuc_hlo_slice(c->fn, sums, &lo, &hi, &one, &sums));
  tpuc_hlo_type st = tpuc_hlo_type_make(TPUC_DTYPE_S64, &n, 1);
  TRY(op_const(c, TPUC_DTYPE_S64, 1, &st, &k));
  return tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, sums, k, out);
}

/* Per bag ([nb] s64), the count of the true entries of `keep` (i1[n])
 * whose bag is `bag` (s64[n]). */
static tpuc_status* bag_counts(op_ctx* c, V keep, V bag, int64_t n,
                               int64_t nb, V* out) {
  tpuc_hlo_type bt = tpuc_hlo_type_make(TPUC_DTYPE_S64, &nb, 1);
  V k, zeros, coords;
  TRY(convert(c, keep, TPUC_DTYPE_S64, &k));
  TRY(op_const(c, TPUC_DTYPE_S64, 0, &bt, &zeros));
  TRY(col_of(c, bag, n, &coords));
  return scatter_points(c, zeros, coords, k, TPUC_HLO_ADD, out);
}

/* _embedding_bag / _embedding_bag_forward_only (param 1)(weight, indices,
 * offsets, scale_grad_by_freq, mode, sparse, per_sample_weights?,
 * include_last_offset, padding_idx) -> (output, offset2bag, bag_size,
 * max_indices), as the CPU's kernel: bag b holds indices[offsets[b] :
 * offsets[b + 1]] (the last one to the end); entries equal to padding_idx
 * count for nothing; sum (times per_sample_weights), mean (over the bag's
 * other entries; an empty bag is 0) or max per feature (an empty bag is 0,
 * max_indices the first index that holds the max). bag_size counts each
 * bag's entries; in sum mode it is zeros (the CPU zeroes it), and
 * max_indices is bag_size except in max mode. offset2bag is always
 * computed (the CPU leaves it empty on its fast sum path, and its backward
 * recomputes an empty one). Bad indices or offsets, and a NaN in max mode
 * (the CPU's first-greater scan skips a later NaN), go to the CPU. */
static tpuc_status* lower_embedding_bag(op_ctx* c, int forward_only) {
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1) || !op_is_tensor(c, 2))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type wt = c->types[0], it = c->types[1], ot = c->types[2];
  int64_t mode = 0, last = 0, pad = -1;
  TRY(op_int_arg(c, 4, 0, &mode));
  TRY(op_int_arg(c, 7, 0, &last));
  TRY(op_int_arg(c, 8, -1, &pad));
  bool psw = !op_is_none(c, 6);
  tpuc_dtype dt = wt.dtype;
  if (wt.rank != 2 || it.rank != 1 || ot.rank != 1 ||
      !is_index_dtype(it.dtype) || !is_index_dtype(ot.dtype) ||
      !tpuc_dtype_is_float(dt) || mode < EB_SUM || mode > EB_MAX ||
      (psw && (mode != EB_SUM || !op_is_tensor(c, 6) ||
               c->types[6].rank != 1 || c->types[6].dtype != dt ||
               c->types[6].dims[0] != it.dims[0])))
    return op_unimpl("arguments the CPU refuses");
  int64_t n = it.dims[0], nofs = ot.dims[0], nb = nofs - (last ? 1 : 0);
  int64_t nw = wt.dims[0], d = wt.dims[1];
  if (nb < 1 || (n > 0 && nw == 0)) return op_unimpl("no bags: CPU decides");
  tpuc_dtype ix = (it.dtype == TPUC_DTYPE_S64 || ot.dtype == TPUC_DTYPE_S64)
                      ? TPUC_DTYPE_S64
                      : TPUC_DTYPE_S32;
  tpuc_dtype acc = op_accumulation_dtype(dt);
  int64_t out_dims[2] = {nb, d}, rdims[2] = {n, d};
  tpuc_hlo_type outt = tpuc_hlo_type_make(acc, out_dims, 2);
  tpuc_hlo_type bt = tpuc_hlo_type_make(TPUC_DTYPE_S64, &nb, 1);
  V offs, bad;
  /* offsets start at 0, never decrease and stay within the indices */
  TRY(convert(c, c->vals[2], TPUC_DTYPE_S64, &offs));
  {
    V first, lt, gt, b, down;
    int64_t lo = 0, hi = 1, one = 1;
    TRY(tpuc_hlo_slice(c->fn, offs, &lo, &hi, &one, &first));
    TRY(cmp_const(c, first, TPUC_HLO_NE, 0, &b));
    TRY(cmp_const(c, offs, TPUC_HLO_LT, 0, &lt));
    TRY(cmp_const(c, offs, TPUC_HLO_GT, (double)n, &gt));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, lt, gt, &lt));
    TRY(op_any_true(c, lt, &gt));
    TRY(op_any_true(c, b, &b));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, b, gt, &bad));
    if (nofs > 1) {
      V a0, a1;
      int64_t l0 = 0, h0 = nofs - 1, l1 = 1, h1 = nofs;
      TRY(tpuc_hlo_slice(c->fn, offs, &l0, &h0, &one, &a0));
      TRY(tpuc_hlo_slice(c->fn, offs, &l1, &h1, &one, &a1));
      TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_LT, a1, a0, &down));
      TRY(op_any_true(c, down, &down));
      TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, bad, down, &bad));
    }
    TRY(add_check(c, bad, CPU_DECIDES, "bad offsets"));
  }
  V out, o2b, bag_size, maxi;
  if (n == 0) {
    TRY(op_const(c, acc, 0, &outt, &out));
    int64_t zero = 0;
    tpuc_hlo_type et = tpuc_hlo_type_make(TPUC_DTYPE_S64, &zero, 1);
    TRY(op_const(c, TPUC_DTYPE_S64, 0, &et, &o2b));
    TRY(op_const(c, TPUC_DTYPE_S64, 0, &bt, &bag_size));
  } else {
    V idx, keep, safe, rows;
    TRY(norm_index(c, c->vals[1], nw, false, &idx, &bad));
    TRY(add_check(c, bad, CPU_DECIDES, "index out of range"));
    TRY(offset_to_bag(c, offs, nb, n, &o2b));
    TRY(padding_kept(c, idx, n, pad, &keep, &safe));
    TRY(take_along(c, c->vals[0], &wt, 0, safe, n, &rows));
    TRY(convert(c, rows, acc, &rows));
    if (psw) {
      V w, wb;
      TRY(convert(c, c->vals[6], acc, &w));
      TRY(rows_bcast(c, w, n, d, &wb));
      TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, rows, wb, &rows));
    }
    V mask, zr, init;
    tpuc_hlo_type rt = tpuc_hlo_type_make(acc, rdims, 2);
    TRY(rows_bcast(c, keep, n, d, &mask));
    TRY(bag_counts(c, keep, o2b, n, nb, &bag_size));
    if (mode != EB_MAX) {
      TRY(op_const(c, acc, 0, &rt, &zr));
      TRY(tpuc_hlo_select(c->fn, mask, rows, zr, &rows));
      TRY(op_const(c, acc, 0, &outt, &init));
      TRY(scatter_rows(c, init, 0, o2b, n, rows, TPUC_HLO_ADD, &out));
      if (mode == EB_MEAN) {
        V one, den, denb;
        TRY(op_const(c, TPUC_DTYPE_S64, 1, &bt, &one));
        TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MAX, bag_size, one, &den));
        TRY(convert(c, den, acc, &den));
        TRY(rows_bcast(c, den, nb, d, &denb));
        TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, out, denb, &out));
      }
    } else {
      /* NaN: the CPU's scan keeps the first value unless a later one is
       * greater, so a NaN after the first entry is skipped there */
      V nan, anynan, ninf, best, eq, pos, big, first, fz, empty, bz;
      TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_NE, rows, rows, &nan));
      TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, nan, mask, &nan));
      TRY(op_any_true(c, nan, &anynan));
      TRY(add_check(c, anynan, CPU_DECIDES, "NaN in a max bag"));
      TRY(op_const(c, acc, -INFINITY, &rt, &ninf));
      TRY(tpuc_hlo_select(c->fn, mask, rows, ninf, &rows));
      TRY(op_const(c, acc, -INFINITY, &outt, &init));
      TRY(scatter_rows(c, init, 0, o2b, n, rows, TPUC_HLO_MAX, &best));
      /* the first entry of each bag that holds its max, per feature */
      V bestr;
      TRY(take_along(c, best, &outt, 0, o2b, n, &bestr));
      TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_EQ, rows, bestr, &eq));
      TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, eq, mask, &eq));
      tpuc_hlo_type pt = tpuc_hlo_type_make(TPUC_DTYPE_S64, rdims, 2);
      tpuc_hlo_type bpt = tpuc_hlo_type_make(TPUC_DTYPE_S64, out_dims, 2);
      TRY(tpuc_hlo_iota(c->fn, &pt, 0, &pos));
      TRY(op_const(c, TPUC_DTYPE_S64, (double)n, &pt, &big));
      TRY(tpuc_hlo_select(c->fn, eq, pos, big, &pos));
      TRY(op_const(c, TPUC_DTYPE_S64, (double)n, &bpt, &init));
      TRY(scatter_rows(c, init, 0, o2b, n, pos, TPUC_HLO_MIN, &first));
      /* the index at that entry (0 for an empty bag) */
      V idxp, found, lim, zi, fc;
      int64_t lo = 0, hi = 1; /* idx with a 0 at position n */
      TRY(op_const(c, TPUC_DTYPE_S64, 0, NULL, &zi));
      TRY(tpuc_hlo_pad(c->fn, idx, zi, &lo, &hi, NULL, &idxp));
      int64_t cshape[3] = {nb, d, 1};
      TRY(tpuc_hlo_reshape(c->fn, first, cshape, 3, &fc));
      TRY(op_gather_elements(c->fn, idxp, fc, &maxi));
      TRY(op_const(c, TPUC_DTYPE_S64, (double)n, &bpt, &lim));
      TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_LT, first, lim, &found));
      TRY(op_const(c, TPUC_DTYPE_S64, 0, &bpt, &fz));
      TRY(tpuc_hlo_select(c->fn, found, maxi, fz, &maxi));
      TRY(cmp_const(c, bag_size, TPUC_HLO_EQ, 0, &empty));
      TRY(rows_bcast(c, empty, nb, d, &empty));
      TRY(op_const(c, acc, 0, &outt, &bz));
      TRY(tpuc_hlo_select(c->fn, empty, bz, best, &out));
    }
  }
  if (mode == EB_SUM) {
    /* the CPU zeroes it; offsets' shape on its no-grad path */
    int64_t bn = forward_only ? nofs : nb;
    tpuc_hlo_type zt = tpuc_hlo_type_make(TPUC_DTYPE_S64, &bn, 1);
    TRY(op_const(c, TPUC_DTYPE_S64, 0, &zt, &bag_size));
  }
  if (mode != EB_MAX) maxi = bag_size;
  else if (n == 0) {
    tpuc_hlo_type mt = tpuc_hlo_type_make(TPUC_DTYPE_S64, out_dims, 2);
    TRY(op_const(c, TPUC_DTYPE_S64, 0, &mt, &maxi));
  }
  TRY(convert(c, out, dt, &c->outs[0]));
  TRY(convert(c, o2b, ix, &c->outs[1]));
  TRY(convert(c, bag_size, ix, &c->outs[2]));
  TRY(convert(c, maxi, ix, &c->outs[3]));
  c->nouts = 4;
  return NULL;
}

/* _embedding_bag_dense_backward(grad, indices, offset2bag, bag_size,
 * maximum_indices, num_weights, scale_grad_by_freq, mode,
 * per_sample_weights?, padding_idx): sum and mean send each entry's bag
 * gradient (over the bag's size for mean, times its weight) to its row,
 * skipping padding_idx, each divided by its index's count with
 * scale_grad_by_freq; max sends each feature's gradient to the row that
 * held the max (non-empty bags). */
static tpuc_status* lower_embedding_bag_backward(op_ctx* c, int param) {
  /* argument positions: dense backward's, or (param 1) those of
   * _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size,
   * maximum_indices, num_weights, scale_grad_by_freq, mode, sparse,
   * per_sample_weights?, padding_idx) */
  const int A_O2B = param ? 3 : 2, A_BS = A_O2B + 1, A_MI = A_O2B + 2,
            A_NW = A_O2B + 3, A_SCALE = A_O2B + 4, A_MODE = A_O2B + 5,
            A_PSW = param ? 10 : 8, A_PAD = A_PSW + 1;
  for (int i = 0; i <= A_MI; i++)
    if (!op_is_tensor(c, i)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type gt = c->types[0], it = c->types[1];
  int64_t nw = 0, scale = 0, mode = 0, pad = -1, sparse = 0;
  TRY(int_arg(c, A_NW, &nw));
  TRY(op_int_arg(c, A_SCALE, 0, &scale));
  TRY(op_int_arg(c, A_MODE, 0, &mode));
  TRY(op_int_arg(c, A_PAD, -1, &pad));
  if (param) TRY(op_int_arg(c, 9, 0, &sparse));
  bool psw = !op_is_none(c, A_PSW);
  tpuc_dtype dt = gt.dtype;
  const tpuc_hlo_type* o2bt = &c->types[A_O2B];
  /* an empty offset2bag (the CPU's fast sum path): from the offsets */
  bool o2b_empty = param && o2bt->rank == 1 && o2bt->dims[0] == 0 &&
                   c->types[2].rank == 1 && is_index_dtype(c->types[2].dtype);
  if (sparse || gt.rank != 2 || it.rank != 1 || !is_index_dtype(it.dtype) ||
      !tpuc_dtype_is_float(dt) || mode < EB_SUM || mode > EB_MAX || nw < 0 ||
      o2bt->rank != 1 || (o2bt->dims[0] != it.dims[0] && !o2b_empty) ||
      c->types[A_BS].rank != 1 || c->types[A_BS].dims[0] < gt.dims[0] ||
      (psw && (!op_is_tensor(c, A_PSW) || c->types[A_PSW].rank != 1 ||
               c->types[A_PSW].dims[0] != it.dims[0])) ||
      (mode == EB_MAX && (scale || c->types[A_MI].rank != 2 ||
                          c->types[A_MI].dims[0] != gt.dims[0] ||
                          c->types[A_MI].dims[1] != gt.dims[1])))
    return op_unimpl("arguments the CPU decides");
  int64_t n = it.dims[0], nb = gt.dims[0], d = gt.dims[1];
  tpuc_dtype acc = op_accumulation_dtype(dt);
  int64_t wdims[2] = {nw, d}, rdims[2] = {n, d};
  tpuc_hlo_type wtt = tpuc_hlo_type_make(acc, wdims, 2);
  V g, zeros, r;
  TRY(convert(c, c->vals[0], acc, &g));
  TRY(op_const(c, acc, 0, &wtt, &zeros));
  if (n == 0 || nw == 0 || d == 0) {
    if (n > 0 && nw == 0) return op_unimpl("no weights: CPU decides");
    c->nouts = 1;
    return convert(c, zeros, dt, &c->outs[0]);
  }
  if (mode == EB_MAX) {
    /* coordinates (max_indices[b, f], f) of the bags that hold entries */
    V mi, bad, fi, coords, keep, kz, bs, bsz;
    int64_t cd[3] = {nb, d, 1};
    TRY(norm_index(c, c->vals[A_MI], nw, false, &mi, &bad));
    TRY(add_check(c, bad, CPU_DECIDES, "index out of range"));
    tpuc_hlo_type ft = tpuc_hlo_type_make(TPUC_DTYPE_S64, (int64_t[]){nb, d}, 2);
    TRY(tpuc_hlo_iota(c->fn, &ft, 1, &fi));
    V parts[2];
    TRY(tpuc_hlo_reshape(c->fn, mi, cd, 3, &parts[0]));
    TRY(tpuc_hlo_reshape(c->fn, fi, cd, 3, &parts[1]));
    TRY(tpuc_hlo_concatenate(c->fn, parts, 2, 2, &coords));
    int64_t lo = 0, hi = nb, one = 1;
    TRY(convert(c, c->vals[A_BS], TPUC_DTYPE_S64, &bs));
    TRY(tpuc_hlo_slice(c->fn, bs, &lo, &hi, &one, &bs));
    TRY(cmp_const(c, bs, TPUC_HLO_NE, 0, &keep));
    TRY(rows_bcast(c, keep, nb, d, &keep));
    tpuc_hlo_type gtt = tpuc_hlo_type_make(acc, (int64_t[]){nb, d}, 2);
    TRY(op_const(c, acc, 0, &gtt, &kz));
    TRY(tpuc_hlo_select(c->fn, keep, g, kz, &bsz));
    TRY(scatter_points(c, zeros, coords, bsz, TPUC_HLO_ADD, &r));
    c->nouts = 1;
    return convert(c, r, dt, &c->outs[0]);
  }
  V idx, bad, o2b, col, rows, keep, safe, mask, rz;
  TRY(norm_index(c, c->vals[1], nw, false, &idx, &bad));
  TRY(padding_kept(c, idx, n, pad, &keep, &safe));
  TRY(add_check(c, bad, CPU_DECIDES, "index out of range"));
  if (o2b_empty) {
    V offs;
    TRY(convert(c, c->vals[2], TPUC_DTYPE_S64, &offs));
    TRY(offset_to_bag(c, offs, c->types[2].dims[0], n, &o2b));
    TRY(norm_index(c, o2b, nb, false, &o2b, &bad));
  } else {
    TRY(norm_index(c, c->vals[A_O2B], nb, false, &o2b, &bad));
  }
  TRY(add_check(c, bad, CPU_DECIDES, "bad offset2bag"));
  tpuc_hlo_type gtt = tpuc_hlo_type_make(acc, (int64_t[]){nb, d}, 2);
  TRY(col_of(c, o2b, n, &col));
  TRY(op_take_along(c->fn, g, &gtt, 0, col, &rows));
  tpuc_hlo_type nt = tpuc_hlo_type_make(acc, &n, 1);
  if (mode == EB_MEAN) {
    /* times 1 / bag_size of the entry's bag */
    V bs, bsr, inv, one;
    TRY(convert(c, c->vals[A_BS], acc, &bs));
    TRY(op_gather_elements(c->fn, bs, col, &bsr));
    TRY(op_const(c, acc, 1, &nt, &one));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, one, bsr, &inv));
    TRY(rows_bcast(c, inv, n, d, &inv));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, rows, inv, &rows));
  }
  if (psw) {
    V w;
    TRY(convert(c, c->vals[A_PSW], acc, &w));
    TRY(rows_bcast(c, w, n, d, &w));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, rows, w, &rows));
  }
  if (scale) {
    /* each entry over the count of its index among all entries */
    tpuc_hlo_type ct = tpuc_hlo_type_make(acc, &nw, 1);
    V cz, ones, counts, cnt, icol, s, idxc;
    TRY(col_of(c, safe, n, &idxc));
    TRY(op_const(c, acc, 0, &ct, &cz));
    TRY(op_const(c, acc, 1, &nt, &ones));
    TRY(col_of(c, idx, n, &icol));
    TRY(scatter_points(c, cz, icol, ones, TPUC_HLO_ADD, &counts));
    TRY(op_gather_elements(c->fn, counts, idxc, &cnt));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, ones, cnt, &s));
    TRY(rows_bcast(c, s, n, d, &s));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, rows, s, &rows));
  }
  tpuc_hlo_type rt = tpuc_hlo_type_make(acc, rdims, 2);
  TRY(rows_bcast(c, keep, n, d, &mask));
  TRY(op_const(c, acc, 0, &rt, &rz));
  TRY(tpuc_hlo_select(c->fn, mask, rows, rz, &rows));
  TRY(scatter_rows(c, zeros, 0, safe, n, rows, TPUC_HLO_ADD, &r));
  c->nouts = 1;
  return convert(c, r, dt, &c->outs[0]);
}

/* _embedding_bag_per_sample_weights_backward(grad, weight, indices,
 * offsets, offset2bag, mode, padding_idx): sum mode only; each entry's
 * weight row dotted with its bag's gradient (0 at padding_idx). */
static tpuc_status* lower_embedding_bag_psw_backward(op_ctx* c, int param) {
  (void)param;
  for (int i = 0; i < 5; i++)
    if (!op_is_tensor(c, i)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type gt = c->types[0], wt = c->types[1], it = c->types[2];
  int64_t mode = 0, pad = -1;
  TRY(op_int_arg(c, 5, 0, &mode));
  TRY(op_int_arg(c, 6, -1, &pad));
  tpuc_dtype dt = gt.dtype;
  if (mode != EB_SUM || gt.rank != 2 || wt.rank != 2 || it.rank != 1 ||
      wt.dims[1] != gt.dims[1] || !is_index_dtype(it.dtype) ||
      !tpuc_dtype_is_float(dt) || wt.dtype != dt ||
      c->types[4].rank != 1 || c->types[4].dims[0] != it.dims[0])
    return op_unimpl("arguments the CPU decides");
  int64_t n = it.dims[0], nb = gt.dims[0], nw = wt.dims[0];
  tpuc_dtype acc = op_accumulation_dtype(dt);
  tpuc_hlo_type nt = tpuc_hlo_type_make(acc, &n, 1);
  if (n == 0) {
    c->nouts = 1;
    return op_const(c, dt, 0, &nt, &c->outs[0]);
  }
  if (nb == 0 || nw == 0) return op_unimpl("empty: CPU decides");
  V idx, bad, keep, o2b, safe, wr, gr, prod, sum, zs;
  TRY(norm_index(c, c->vals[2], nw, false, &idx, &bad));
  TRY(add_check(c, bad, CPU_DECIDES, "index out of range"));
  TRY(norm_index(c, c->vals[4], nb, false, &o2b, &bad));
  TRY(add_check(c, bad, CPU_DECIDES, "bad offset2bag"));
  TRY(padding_kept(c, idx, n, pad, &keep, &safe));
  V w, g;
  TRY(convert(c, c->vals[1], acc, &w));
  TRY(convert(c, c->vals[0], acc, &g));
  tpuc_hlo_type wat = tpuc_hlo_type_make(acc, wt.dims, 2);
  tpuc_hlo_type gat = tpuc_hlo_type_make(acc, gt.dims, 2);
  TRY(take_along(c, w, &wat, 0, safe, n, &wr));
  TRY(take_along(c, g, &gat, 0, o2b, n, &gr));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, wr, gr, &prod));
  {
    V init;
    tpuc_hlo_fn* body = NULL;
    int64_t one = 1;
    TRY(op_const(c, acc, 0, NULL, &init));
    TRY(tpuc_hlo_region_binary(c->module, acc, TPUC_HLO_ADD, &body));
    TRY(tpuc_hlo_reduce(c->fn, &prod, &init, 1, &one, 1, body, &sum));
  }
  TRY(op_const(c, acc, 0, &nt, &zs));
  TRY(tpuc_hlo_select(c->fn, keep, sum, zs, &sum));
  c->nouts = 1;
  return convert(c, sum, dt, &c->outs[0]);
}

/* flip(self, dims) */
static tpuc_status* lower_flip(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || c->args[1].kind != TPUC_OP_ARG_INT_LIST)
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type st = c->types[0];
  int64_t dims[TPUC_MAX_RANK];
  bool seen[TPUC_MAX_RANK] = {false};
  size_t nd = 0;
  if (c->args[1].list_len > (size_t)TPUC_MAX_RANK)
    return op_unimpl("too many dims");
  for (size_t k = 0; k < c->args[1].list_len; k++) {
    int64_t d = 0;
    TRY(wrap_dim(st.rank, c->args[1].list[k], &d));
    if (st.rank == 0) continue;
    if (seen[d]) return op_unimpl("repeated dim: CPU raises");
    seen[d] = true;
    dims[nd++] = d;
  }
  c->nouts = 1;
  if (nd == 0) {
    c->outs[0] = c->vals[0];
    return NULL;
  }
  return tpuc_hlo_reverse(c->fn, c->vals[0], dims, nd, &c->outs[0]);
}

/* x rolled by `shift` along dim d (of size n > 0). */
static tpuc_status* roll_dim(op_ctx* c, V x, const tpuc_hlo_type* t, int d,
                             int64_t shift, V* out) {
  int64_t n = t->dims[d];
  int64_t s = ((shift % n) + n) % n;
  if (s == 0) {
    *out = x;
    return NULL;
  }
  int64_t lo[TPUC_MAX_RANK] = {0}, hi[TPUC_MAX_RANK];
  memcpy(hi, t->dims, sizeof(int64_t) * (size_t)t->rank);
  V parts[2];
  lo[d] = n - s;
  TRY(tpuc_hlo_slice(c->fn, x, lo, hi, NULL, &parts[0]));
  lo[d] = 0;
  hi[d] = n - s;
  TRY(tpuc_hlo_slice(c->fn, x, lo, hi, NULL, &parts[1]));
  return tpuc_hlo_concatenate(c->fn, parts, 2, d, out);
}

/* roll(self, shifts, dims): no dims rolls the flattened tensor. */
static tpuc_status* lower_roll(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || c->args[1].kind != TPUC_OP_ARG_INT_LIST)
    return op_unimpl("unexpected arguments");
  const tpuc_op_arg* sh = &c->args[1];
  const int64_t* dl = NULL;
  size_t nd = 0;
  if (!op_is_none(c, 2)) {
    if (c->args[2].kind != TPUC_OP_ARG_INT_LIST)
      return op_unimpl("unexpected dims");
    dl = c->args[2].list;
    nd = c->args[2].list_len;
  }
  tpuc_hlo_type st = c->types[0];
  V x = c->vals[0];
  c->nouts = 1;
  if (nd == 0) {
    if (sh->list_len != 1) return op_unimpl("shifts without dims: CPU raises");
    int64_t n = numel_of(&st);
    if (n == 0) {
      c->outs[0] = x;
      return NULL;
    }
    tpuc_hlo_type ft = tpuc_hlo_type_make(st.dtype, &n, 1);
    V f, r;
    TRY(tpuc_hlo_reshape(c->fn, x, &n, 1, &f));
    TRY(roll_dim(c, f, &ft, 0, sh->list[0], &r));
    return tpuc_hlo_reshape(c->fn, r, st.dims, st.rank, &c->outs[0]);
  }
  if (nd != sh->list_len) return op_unimpl("shifts/dims mismatch: CPU raises");
  for (size_t k = 0; k < nd; k++) {
    int64_t d = 0;
    TRY(wrap_dim(st.rank, dl[k], &d));
    if (st.rank == 0 || st.dims[d] == 0) continue;
    TRY(roll_dim(c, x, &st, (int)d, sh->list[k], &x));
  }
  c->outs[0] = x;
  return NULL;
}

/* tril / triu(self, diagonal): param 0 keeps col - row <= diagonal, 1
 * keeps col - row >= diagonal, over the last two dims. */
static tpuc_status* lower_triangle(op_ctx* c, int upper) {
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type st = c->types[0];
  if (st.rank < 2) return op_unimpl("fewer than 2 dims: CPU raises");
  int64_t mn[2] = {st.dims[st.rank - 2], st.dims[st.rank - 1]};
  tpuc_hlo_type mt = tpuc_hlo_type_make(TPUC_DTYPE_S64, mn, 2);
  V diag;
  /* diagonal is a SymInt: a program argument when it comes as a scalar */
  if (op_is_value(c, 1)) {
    TRY(op_scalar(c, 1, TPUC_DTYPE_S64, &mt, &diag));
  } else {
    int64_t d = 0;
    TRY(op_int_arg(c, 1, 0, &d));
    TRY(op_const(c, TPUC_DTYPE_S64, (double)d, &mt, &diag));
  }
  V row, col, off, keep, mask, zero;
  TRY(tpuc_hlo_iota(c->fn, &mt, 0, &row));
  TRY(tpuc_hlo_iota(c->fn, &mt, 1, &col));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, col, row, &off));
  TRY(tpuc_hlo_compare(c->fn, upper ? TPUC_HLO_GE : TPUC_HLO_LE, off, diag,
                       &keep));
  int64_t map[2] = {st.rank - 2, st.rank - 1};
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, keep, st.dims, st.rank, map, &mask));
  TRY(op_const(c, st.dtype, 0, &st, &zero));
  c->nouts = 1;
  return tpuc_hlo_select(c->fn, mask, c->vals[0], zero, &c->outs[0]);
}

/* constant_pad_nd(self, pad, value): pad pairs from the last dim back;
 * negative pads crop. */
static tpuc_status* lower_pad(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || c->args[1].kind != TPUC_OP_ARG_INT_LIST)
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type st = c->types[0];
  const tpuc_op_arg* p = &c->args[1];
  if (p->list_len % 2 != 0 || p->list_len / 2 > (size_t)st.rank)
    return op_unimpl("bad pad length: CPU raises");
  int64_t lo[TPUC_MAX_RANK] = {0}, hi[TPUC_MAX_RANK] = {0};
  for (size_t k = 0; k < p->list_len / 2; k++) {
    int d = st.rank - 1 - (int)k;
    lo[d] = p->list[2 * k];
    hi[d] = p->list[2 * k + 1];
    int64_t size = st.dims[d] + lo[d] + hi[d];
    if (size < 0) return op_unimpl("negative size: CPU raises");
    /* cropping more than a side holds: the CPU's rule, let it decide */
    if (-lo[d] > st.dims[d] || -hi[d] > st.dims[d])
      return op_unimpl("crop larger than the dim");
  }
  V v;
  if (op_is_none(c, 2)) {
    TRY(op_const(c, st.dtype, 0, NULL, &v));
  } else {
    TRY(fill_value(c, 2, st.dtype, &v));
  }
  c->nouts = 1;
  return tpuc_hlo_pad(c->fn, c->vals[0], v, lo, hi, NULL, &c->outs[0]);
}

/* repeat(self, repeats): broadcast to [r0, s0, r1, s1, ...], then merge
 * each pair. */
static tpuc_status* lower_repeat(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || c->args[1].kind != TPUC_OP_ARG_INT_LIST)
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type st = c->types[0];
  const tpuc_op_arg* r = &c->args[1];
  int m = (int)r->list_len;
  if (m < st.rank || 2 * m > TPUC_MAX_RANK)
    return op_unimpl("repeats shorter than the rank: CPU raises");
  int64_t big[TPUC_MAX_RANK], out[TPUC_MAX_RANK], map[TPUC_MAX_RANK];
  int shift = m - st.rank;
  for (int j = 0; j < m; j++) {
    if (r->list[j] < 0) return op_unimpl("negative repeat: CPU raises");
    int64_t s = j < shift ? 1 : st.dims[j - shift];
    big[2 * j] = r->list[j];
    big[2 * j + 1] = s;
    out[j] = r->list[j] * s;
  }
  for (int d = 0; d < st.rank; d++) map[d] = 2 * (d + shift) + 1;
  V b;
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, c->vals[0], big, 2 * m, map, &b));
  c->nouts = 1;
  return tpuc_hlo_reshape(c->fn, b, out, m, &c->outs[0]);
}

/* Row i's columns [*lo, *hi] of a lower (upper: upper) triangle of `col`
 * columns with diagonal offset `off`; returns their count. */
static int64_t tri_row(int64_t i, int64_t col, int64_t off, int upper,
                       int64_t* lo, int64_t* hi) {
  *lo = upper ? i + off : 0;
  *hi = upper ? col - 1 : i + off;
  if (*lo < 0) *lo = 0;
  if (*hi > col - 1) *hi = col - 1;
  return *hi >= *lo ? *hi - *lo + 1 : 0;
}

/* tril_indices / triu_indices(row, col, offset, dtype): the [2, K]
 * coordinates (row-major) of the entries with j - i <= offset (tril) or
 * >= offset (triu), computed here (their count and order depend on the
 * sizes only) and a program constant. */
static tpuc_status* lower_tri_indices(op_ctx* c, int upper) {
  int64_t row = 0, col = 0, off = 0;
  TRY(int_arg(c, 0, &row));
  TRY(int_arg(c, 1, &col));
  if (!op_is_none(c, 2)) TRY(int_arg(c, 2, &off));
  tpuc_dtype dt = TPUC_DTYPE_S64;
  if (c->nargs > 3 && c->args[3].kind == TPUC_OP_ARG_DTYPE) dt = c->args[3].dtype;
  if (dt != TPUC_DTYPE_S64 && dt != TPUC_DTYPE_S32)
    return op_unimpl("tril/triu_indices of this dtype: CPU says why");
  if (row < 0 || col < 0)
    return op_unimpl("negative size: CPU says why");
  int64_t k = 0, lo, hi;
  for (int64_t i = 0; i < row; i++) k += tri_row(i, col, off, upper, &lo, &hi);
  if (k > (1 << 22)) return op_unimpl("large tril/triu_indices: CPU");
  int64_t* v = malloc(sizeof(int64_t) * (size_t)(2 * k + 1));
  if (v == NULL) return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  int64_t q = 0;
  for (int64_t i = 0; i < row; i++) {
    tri_row(i, col, off, upper, &lo, &hi);
    for (int64_t j = lo; j <= hi; j++, q++) {
      v[q] = i;
      v[k + q] = j;
    }
  }
  int64_t d[2] = {2, k};
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_S64, d, 2);
  V r;
  tpuc_status* st =
      tpuc_hlo_constant(c->fn, &t, v, sizeof(int64_t) * (size_t)(2 * k), &r);
  free(v);
  TRY(st);
  c->nouts = 1;
  return tpuc_hlo_convert(c->fn, r, dt, &c->outs[0]);
}

/* eye.out(n, out) / eye.m_out(n, m, out): true on the diagonal of an
 * [n, m] bool result, which the write into `out` casts to out's dtype
 * (bool casts to every dtype, so this holds for all of them). */
static tpuc_status* lower_eye(op_ctx* c, int with_m) {
  int64_t n = 0, m = 0;
  TRY(int_arg(c, 0, &n));
  if (with_m) TRY(int_arg(c, 1, &m));
  else m = n;
  if (n < 0)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "n must be greater or equal to 0, got %lld",
                            (long long)n);
  if (m < 0)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "m must be greater or equal to 0, got %lld",
                            (long long)m);
  int64_t d[2] = {n, m};
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_S64, d, 2);
  V r, k;
  TRY(tpuc_hlo_iota(c->fn, &t, 0, &r));
  TRY(tpuc_hlo_iota(c->fn, &t, 1, &k));
  c->nouts = 1;
  return tpuc_hlo_compare(c->fn, TPUC_HLO_EQ, r, k, &c->outs[0]);
}

/* -------------------------------- table -------------------------------- */

/* unfold_backward(grad, input_sizes, dim, size, step): the gradient of
 * x.unfold(dim, size, step): window i's element j adds to position
 * i * step + j of `dim` (windows overlap when step < size). The windows
 * are laid out along `dim` first and scattered in one add. */
static tpuc_status* lower_unfold_backward(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || c->args[1].kind != TPUC_OP_ARG_INT_LIST)
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* g = &c->types[0];
  int rank = (int)c->args[1].list_len;
  int64_t dim = 0, size = 0, step = 0;
  TRY(op_int_arg(c, 2, 0, &dim));
  TRY(op_int_arg(c, 3, 0, &size));
  TRY(op_int_arg(c, 4, 0, &step));
  if (rank == 0 && g->rank == 1 && g->dims[0] == 1 && size == 1 && step >= 1) {
    /* a 0-d input unfolds as [1]: its one window is the input */
    TRY(tpuc_hlo_reshape(c->fn, c->vals[0], NULL, 0, &c->outs[0]));
    c->nouts = 1;
    return NULL;
  }
  if (rank == 0) rank = 1;
  if (g->rank != rank + 1 || dim < 0 || dim >= rank || size < 1 || step < 1 ||
      g->dims[rank] != size)
    return op_unimpl("unfold_backward: unusual arguments");
  int64_t L = c->args[1].list_len ? c->args[1].list[dim] : 1;
  int64_t n = g->dims[dim];
  if (n < 1 || (n - 1) * step + size > L)
    return op_unimpl("unfold_backward: windows outside the input");
  tpuc_dtype dt = g->dtype;
  if (dt == TPUC_DTYPE_PRED) return op_unimpl("bool gradient");
  /* grad [pre, n, post, size] -> [n, size, pre, post] -> [n*size, rest] */
  int64_t perm[TPUC_MAX_RANK + 1], rest[TPUC_MAX_RANK], nrest = 0;
  int k = 0;
  perm[k++] = dim;
  perm[k++] = rank;
  for (int d = 0; d < rank; d++)
    if (d != dim) {
      perm[k++] = d;
      rest[nrest++] = g->dims[d];
    }
  tpuc_hlo_value x, idx, into;
  TRY(tpuc_hlo_transpose(c->fn, c->vals[0], perm, &x));
  int64_t flat[TPUC_MAX_RANK + 1];
  flat[0] = n * size;
  for (int d = 0; d < nrest; d++) flat[d + 1] = rest[d];
  TRY(tpuc_hlo_reshape(c->fn, x, flat, (int)nrest + 1, &x));
  /* index of (i, j) = i * step + j, as [n*size, 1] */
  int64_t ij[2] = {n, size};
  tpuc_hlo_type it = tpuc_hlo_type_make(TPUC_DTYPE_S64, ij, 2);
  tpuc_hlo_value i, j, st;
  TRY(tpuc_hlo_iota(c->fn, &it, 0, &i));
  TRY(tpuc_hlo_iota(c->fn, &it, 1, &j));
  TRY(op_const(c, TPUC_DTYPE_S64, (double)step, &it, &st));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, i, st, &i));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, i, j, &idx));
  int64_t col[2] = {n * size, 1};
  TRY(tpuc_hlo_reshape(c->fn, idx, col, 2, &idx));
  int64_t odims[TPUC_MAX_RANK + 1];
  odims[0] = L;
  for (int d = 0; d < nrest; d++) odims[d + 1] = rest[d];
  tpuc_hlo_type ot = tpuc_hlo_type_make(dt, odims, (int)nrest + 1);
  TRY(op_const(c, dt, 0.0, &ot, &into));
  tpuc_hlo_fn* body = NULL;
  TRY(tpuc_hlo_region_binary(c->module, dt, TPUC_HLO_ADD, &body));
  TRY(op_scatter_first(c->fn, into, idx, x, body, false, &x));
  /* [L, rest] -> the input's dim order */
  int64_t back[TPUC_MAX_RANK];
  for (int d = 0, r = 1; d < rank; d++) back[d] = d == dim ? 0 : r++;
  TRY(tpuc_hlo_transpose(c->fn, x, back, &x));
  if (c->args[1].list_len == 0) {
    TRY(tpuc_hlo_reshape(c->fn, x, NULL, 0, &x));
  }
  c->outs[0] = x;
  c->nouts = 1;
  return NULL;
}

const op_entry op_table_index[] = {
    {"aten::unfold_backward", lower_unfold_backward, 0},
    {"aten::eye.out", lower_eye, 0},
    {"aten::tril_indices", lower_tri_indices, 0},
    {"aten::triu_indices", lower_tri_indices, 1},
    {"aten::eye.m_out", lower_eye, 1},
    {"aten::cat", lower_cat, 0},
    {"aten::cat.out", lower_cat, 0},
    {"aten::index_select", lower_index_select, 0},
    {"aten::index_select.out", lower_index_select, 0},
    {"aten::embedding", lower_embedding, 0},
    {"aten::embedding_dense_backward", lower_embedding_backward, 0},
    {"aten::embedding_dense_backward.out", lower_embedding_backward, 0},
    {"aten::_embedding_bag", lower_embedding_bag, 0},
    {"aten::_embedding_bag_forward_only", lower_embedding_bag, 1},
    {"aten::_embedding_bag_dense_backward", lower_embedding_bag_backward, 0},
    {"aten::_embedding_bag_backward", lower_embedding_bag_backward, 1},
    {"aten::_embedding_bag_per_sample_weights_backward",
     lower_embedding_bag_psw_backward, 0},
    {"aten::gather", lower_gather, 0},
    {"aten::gather.out", lower_gather, 0},
    {"aten::scatter.src", lower_scatter, SC_SRC},
    {"aten::scatter_.src", lower_scatter, SC_SRC},
    {"aten::scatter.src_out", lower_scatter, SC_SRC},
    {"aten::scatter.value", lower_scatter, SC_VALUE},
    {"aten::scatter_.value", lower_scatter, SC_VALUE},
    {"aten::scatter.value_out", lower_scatter, SC_VALUE},
    {"aten::scatter.reduce", lower_scatter, SC_REDUCE},
    {"aten::scatter_.reduce", lower_scatter, SC_REDUCE},
    {"aten::scatter.reduce_out", lower_scatter, SC_REDUCE},
    {"aten::scatter.value_reduce", lower_scatter, SC_VALUE_REDUCE},
    {"aten::scatter_.value_reduce", lower_scatter, SC_VALUE_REDUCE},
    {"aten::scatter.value_reduce_out", lower_scatter, SC_VALUE_REDUCE},
    {"aten::scatter_add", lower_scatter, SC_ADD},
    {"aten::scatter_add_", lower_scatter, SC_ADD},
    {"aten::scatter_add.out", lower_scatter, SC_ADD},
    {"aten::scatter_reduce.two", lower_scatter, SC_REDUCE_TWO},
    {"aten::scatter_reduce_.two", lower_scatter, SC_REDUCE_TWO},
    {"aten::scatter_reduce.two_out", lower_scatter, SC_REDUCE_TWO},
    {"aten::index_add", lower_index_add_copy, IX_ADD},
    {"aten::index_add_", lower_index_add_copy, IX_ADD},
    {"aten::index_add.out", lower_index_add_copy, IX_ADD},
    {"aten::index_copy", lower_index_add_copy, IX_COPY},
    {"aten::index_copy_", lower_index_add_copy, IX_COPY},
    {"aten::index_copy.out", lower_index_add_copy, IX_COPY},
    {"aten::index_fill.int_Scalar", lower_index_fill, 0},
    {"aten::index_fill_.int_Scalar", lower_index_fill, 0},
    {"aten::index_fill.int_Scalar_out", lower_index_fill, 0},
    {"aten::index_fill.int_Tensor", lower_index_fill, 0},
    {"aten::index_fill_.int_Tensor", lower_index_fill, 0},
    {"aten::index_fill.int_Tensor_out", lower_index_fill, 0},
    {"aten::index.Tensor", lower_index, 0},
    {"aten::index.Tensor_out", lower_index, 0},
    {"aten::index_put", lower_index_put, 0},
    {"aten::index_put_", lower_index_put, 0},
    {"aten::index_put.out", lower_index_put, 0},
    {"aten::_index_put_impl_", lower_index_put, 0},
    {"aten::masked_fill.Scalar", lower_masked_fill, 0},
    {"aten::masked_fill_.Scalar", lower_masked_fill, 0},
    {"aten::masked_fill.Scalar_out", lower_masked_fill, 0},
    {"aten::masked_fill.Tensor", lower_masked_fill, 0},
    {"aten::masked_fill_.Tensor", lower_masked_fill, 0},
    {"aten::masked_fill.Tensor_out", lower_masked_fill, 0},
    {"aten::masked_scatter", lower_masked_scatter, 0},
    {"aten::masked_scatter.out", lower_masked_scatter, 0},
    {"aten::masked_scatter_", lower_masked_scatter, 1},
    {"aten::flip", lower_flip, 0},
    {"aten::flip.out", lower_flip, 0},
    {"aten::roll", lower_roll, 0},
    {"aten::roll.out", lower_roll, 0},
    {"aten::tril", lower_triangle, 0},
    {"aten::tril_", lower_triangle, 0},
    {"aten::tril.out", lower_triangle, 0},
    {"aten::triu", lower_triangle, 1},
    {"aten::triu_", lower_triangle, 1},
    {"aten::triu.out", lower_triangle, 1},
    {"aten::constant_pad_nd", lower_pad, 0},
    {"aten::constant_pad_nd.out", lower_pad, 0},
    {"aten::repeat", lower_repeat, 0},
    {"aten::repeat.out", lower_repeat, 0},
    {NULL, NULL, 0},
};

/* Complex-ready ops of this file (ops_internal.h). */
const char* const op_complex_index[] = {"scatter",         "scatter_",
                                        "masked_scatter",  "masked_scatter_",
                                        "unfold_backward", NULL};
