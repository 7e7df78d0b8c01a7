/* Ops whose result shapes depend on the data: nonzero, masked_select,
 * unique (_unique2, _unique, unique_dim), unique_consecutive and bincount.
 * They run in two programs (program.c): phase 1 counts the selected
 * elements on the device and the host waits for that count; phase 2,
 * compiled per count, builds the result. The selected positions come from
 * one stable sort of the flat positions, keyed so selected ones come
 * first in order. */
#include <math.h>
#include <string.h>

#include "ops/ops_internal.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

/* Number of true elements of the i1 array `mask` (any shape): s64 rank 0. */
static tpuc_status* count_true(op_ctx* c, tpuc_hlo_value mask,
                               const tpuc_hlo_type* shape,
                               tpuc_hlo_value* out) {
  tpuc_hlo_value m, zero;
  TRY(tpuc_hlo_convert(c->fn, mask, TPUC_DTYPE_S64, &m));
  TRY(op_const(c, TPUC_DTYPE_S64, 0, NULL, &zero));
  int64_t dims[TPUC_MAX_RANK];
  for (int d = 0; d < shape->rank; d++) dims[d] = d;
  if (shape->rank == 0) {
    *out = m;
    return NULL;
  }
  tpuc_hlo_fn* add = NULL;
  TRY(tpuc_hlo_region_binary(c->module, TPUC_DTYPE_S64, TPUC_HLO_ADD, &add));
  return tpuc_hlo_reduce(c->fn, &m, &zero, 1, dims, (size_t)shape->rank, add,
                         out);
}

/* The flat (row-major) positions of the first `n` true elements of `mask`
 * (shape `shape`), in order: s64[n]. */
static tpuc_status* true_positions(op_ctx* c, tpuc_hlo_value mask,
                                   const tpuc_hlo_type* shape, int64_t n,
                                   tpuc_hlo_value* out) {
  int64_t total = tpuc_hlo_type_num_elements(shape);
  tpuc_hlo_type ft = tpuc_hlo_type_make(TPUC_DTYPE_S64, &total, 1);
  tpuc_hlo_value flat, iota, shifted, big, key, sorted;
  TRY(tpuc_hlo_reshape(c->fn, mask, &total, 1, &flat));
  TRY(tpuc_hlo_iota(c->fn, &ft, 0, &iota));
  TRY(op_const(c, TPUC_DTYPE_S64, (double)total, &ft, &big));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, iota, big, &shifted));
  /* Selected positions keep their index, the others move past the end. */
  TRY(tpuc_hlo_select(c->fn, flat, iota, shifted, &key));
  tpuc_dtype kd = TPUC_DTYPE_S64;
  tpuc_hlo_fn* less = NULL;
  TRY(tpuc_hlo_region_compare(c->module, &kd, 1, TPUC_HLO_LT, &less));
  TRY(tpuc_hlo_sort(c->fn, &key, 1, 0, true, less, &sorted));
  int64_t start = 0;
  return tpuc_hlo_slice(c->fn, sorted, &start, &n, NULL, out);
}

/* nonzero(self) -> s64[n, rank]: the coordinates of the nonzero elements
 * in row-major order. */
static tpuc_status* lower_nonzero(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  tpuc_hlo_type shape = c->types[0];
  /* complex: nonzero when either part is (NE compares both) */
  tpuc_hlo_value zero, mask;
  TRY(op_const(c, shape.dtype, 0, &shape, &zero));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_NE, c->vals[0], zero, &mask));
  c->nouts = 1;
  if (c->phase == 1) return count_true(c, mask, &shape, &c->outs[0]);
  int64_t n = c->dyn[0];
  int rank = shape.rank;
  int64_t out_dims[2] = {n, rank};
  if (rank == 0 || n == 0) {
    tpuc_hlo_type ot = tpuc_hlo_type_make(TPUC_DTYPE_S64, out_dims, 2);
    return op_const(c, TPUC_DTYPE_S64, 0, &ot, &c->outs[0]);
  }
  tpuc_hlo_value pos;
  TRY(true_positions(c, mask, &shape, n, &pos));
  /* Coordinate d = (pos / stride_d) % size_d. */
  tpuc_hlo_type nt = tpuc_hlo_type_make(TPUC_DTYPE_S64, &n, 1);
  tpuc_hlo_value cols[TPUC_MAX_RANK];
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; d--) {
    tpuc_hlo_value st, sz, q, r;
    TRY(op_const(c, TPUC_DTYPE_S64, (double)stride, &nt, &st));
    TRY(op_const(c, TPUC_DTYPE_S64, (double)shape.dims[d], &nt, &sz));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, pos, st, &q));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_REM, q, sz, &r));
    int64_t col[2] = {n, 1};
    TRY(tpuc_hlo_reshape(c->fn, r, col, 2, &cols[d]));
    stride *= shape.dims[d];
  }
  return tpuc_hlo_concatenate(c->fn, cols, (size_t)rank, 1, &c->outs[0]);
}

/* masked_select(self, mask) -> self's dtype [n]: the elements of self
 * where mask is true, both broadcast together, in row-major order. */
static tpuc_status* lower_masked_select(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1) ||
      c->types[1].dtype != TPUC_DTYPE_PRED)
    return op_unimpl("unexpected arguments");
  int both[2] = {0, 1};
  tpuc_hlo_type shape;
  TRY(op_broadcast_shape(c, both, 2, &shape));
  tpuc_dtype dt = c->types[0].dtype;
  tpuc_hlo_value mask, x;
  TRY(op_operand(c, 1, TPUC_DTYPE_PRED, &shape, &mask));
  c->nouts = 1;
  if (c->phase == 1) return count_true(c, mask, &shape, &c->outs[0]);
  int64_t n = c->dyn[0];
  if (n == 0) {
    tpuc_hlo_type ot = tpuc_hlo_type_make(dt, &n, 1);
    return op_const(c, dt, 0, &ot, &c->outs[0]);
  }
  tpuc_hlo_type xs = shape;
  xs.dtype = dt;
  TRY(op_operand(c, 0, dt, &xs, &x));
  tpuc_hlo_value pos, flat, idx;
  TRY(true_positions(c, mask, &shape, n, &pos));
  int64_t total = tpuc_hlo_type_num_elements(&shape);
  TRY(tpuc_hlo_reshape(c->fn, x, &total, 1, &flat));
  int64_t idims[2] = {n, 1};
  TRY(tpuc_hlo_reshape(c->fn, pos, idims, 2, &idx));
  return op_gather_elements(c->fn, flat, idx, &c->outs[0]);
}

/* ------------------------------- unique -------------------------------- */

/* Inclusive prefix sums of the s64[n] `x` (Hillis-Steele: log2(n) shifted
 * adds, each a pad and an add). */
static tpuc_status* prefix_sum(op_ctx* c, tpuc_hlo_value x, int64_t n,
                               tpuc_hlo_value* out) {
  tpuc_hlo_value zero;
  TRY(op_const(c, TPUC_DTYPE_S64, 0, NULL, &zero));
  for (int64_t k = 1; k < n; k *= 2) {
    /* shifted[i] = x[i - k] (0 for i < k) */
    int64_t lo = k, hi = -k;
    tpuc_hlo_value shifted;
    TRY(tpuc_hlo_pad(c->fn, x, zero, &lo, &hi, NULL, &shifted));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, x, shifted, &x));
  }
  *out = x;
  return NULL;
}

/* A sort comparator on operand 0 of `n` operands of `dtypes`: ascending,
 * floats in total order (NaN last, as the CPU sorts them: the caller
 * makes every NaN positive first). */
static tpuc_status* ascending(op_ctx* c, const tpuc_dtype* dtypes, size_t n,
                              tpuc_hlo_fn** out) {
  if (!tpuc_dtype_is_float(dtypes[0]))
    return tpuc_hlo_region_compare(c->module, dtypes, n, TPUC_HLO_LT, out);
  tpuc_hlo_type ts[8];
  if (n > 4) return op_unimpl("too many sort operands");
  for (size_t i = 0; i < n; i++) {
    ts[2 * i] = tpuc_hlo_type_scalar(dtypes[i]);
    ts[2 * i + 1] = ts[2 * i];
  }
  tpuc_hlo_fn* f = NULL;
  tpuc_hlo_value a, b, lt;
  TRY(tpuc_hlo_region_create(c->module, ts, 2 * n, &f));
  TRY(tpuc_hlo_get_arg(f, 0, &a));
  TRY(tpuc_hlo_get_arg(f, 1, &b));
  TRY(tpuc_hlo_compare_totalorder(f, TPUC_HLO_LT, a, b, &lt));
  TRY(tpuc_hlo_return(f, &lt, 1));
  *out = f;
  return NULL;
}

/* The flat elements of argument 0 as sort keys: bool as u8, floats with
 * every NaN made the positive quiet NaN. *kd gets the key dtype. */
static tpuc_status* flat_keys(op_ctx* c, int64_t n, tpuc_hlo_value* out,
                              tpuc_dtype* kd) {
  tpuc_dtype dt = c->types[0].dtype;
  tpuc_hlo_value x;
  TRY(tpuc_hlo_reshape(c->fn, c->vals[0], &n, 1, &x));
  *kd = dt;
  if (dt == TPUC_DTYPE_PRED) {
    *kd = TPUC_DTYPE_U8;
    return tpuc_hlo_convert(c->fn, x, TPUC_DTYPE_U8, out);
  }
  if (tpuc_dtype_is_float(dt)) {
    tpuc_hlo_type t = tpuc_hlo_type_make(dt, &n, 1);
    tpuc_hlo_value isnan, nan;
    TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_NE, x, x, &isnan));
    TRY(op_const(c, dt, NAN, &t, &nan));
    return tpuc_hlo_select(c->fn, isnan, nan, x, out);
  }
  *out = x;
  return NULL;
}

/* b[i]: element i of the s[n] `x` starts a run (i == 0 or x[i] !=
 * x[i - 1]; NaNs never equal, so each starts its own, as on the CPU).
 * Returns i1[n]. */
static tpuc_status* run_starts(op_ctx* c, tpuc_hlo_value x, int64_t n,
                               tpuc_hlo_value* out) {
  tpuc_hlo_value first, prev, cur, ne;
  int64_t one = 1, zero = 0, last = n - 1;
  tpuc_hlo_type t1 = tpuc_hlo_type_make(TPUC_DTYPE_PRED, &one, 1);
  TRY(op_const(c, TPUC_DTYPE_PRED, 1, &t1, &first));
  if (n == 1) {
    *out = first;
    return NULL;
  }
  TRY(tpuc_hlo_slice(c->fn, x, &zero, &last, NULL, &prev));
  TRY(tpuc_hlo_slice(c->fn, x, &one, &n, NULL, &cur));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_NE, cur, prev, &ne));
  tpuc_hlo_value parts[2] = {first, ne};
  return tpuc_hlo_concatenate(c->fn, parts, 2, 0, out);
}

/* An empty s64[0] (a result the flags leave out). */
static tpuc_status* empty_s64(op_ctx* c, tpuc_hlo_value* out) {
  int64_t zero = 0;
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_S64, &zero, 1);
  return op_const(c, TPUC_DTYPE_S64, 0, &t, out);
}

/* The most elements a slice of unique_dim may have: its lexicographic
 * sort takes one stable sort per element. */
#define UNIQUE_DIM_MAX_SLICE 32

/* Scatters the s64[n] `g` to the positions `perm` (a permutation of
 * 0..n-1): out[perm[i]] = g[i]. */
static tpuc_status* unpermute(op_ctx* c, tpuc_hlo_value g, tpuc_hlo_value perm,
                              int64_t n, tpuc_hlo_value* out) {
  tpuc_hlo_type two[2] = {tpuc_hlo_type_scalar(TPUC_DTYPE_S64),
                          tpuc_hlo_type_scalar(TPUC_DTYPE_S64)};
  tpuc_hlo_type gt = tpuc_hlo_type_make(TPUC_DTYPE_S64, &n, 1);
  tpuc_hlo_fn* body = NULL;
  tpuc_hlo_value upd, zeros, at;
  TRY(tpuc_hlo_region_create(c->module, two, 2, &body));
  TRY(tpuc_hlo_get_arg(body, 1, &upd));
  TRY(tpuc_hlo_return(body, &upd, 1));
  int64_t pdims[2] = {n, 1};
  TRY(tpuc_hlo_reshape(c->fn, perm, pdims, 2, &at));
  TRY(op_const(c, TPUC_DTYPE_S64, 0, &gt, &zeros));
  return op_scatter_first(c->fn, zeros, at, g, body, true, out);
}

/* Rows `idx` (s64[m]) of the [s, r] matrix `x`: [m, r]. */
static tpuc_status* take_rows(op_ctx* c, tpuc_hlo_value x, tpuc_hlo_value idx,
                              int64_t m, tpuc_hlo_value* out) {
  int64_t id[2] = {m, 1};
  tpuc_hlo_type xt;
  TRY(tpuc_hlo_value_type(c->fn, x, &xt));
  tpuc_hlo_value ix;
  TRY(tpuc_hlo_reshape(c->fn, idx, id, 2, &ix));
  return op_take_along(c->fn, x, &xt, 0, ix, out);
}

/* unique_dim(self, dim, sorted, ...) (consecutive false) and
 * unique_dim_consecutive(self, dim, ...) / unique_consecutive(..., dim)
 * (consecutive true): the distinct slices of self along dim (runs of
 * equal consecutive slices, or all of them in lexicographic order), the
 * slice index of each (s64[size]) and the counts; the dim forms always
 * return all three. Slices sort by a stable sort per element, last
 * element first. */
static tpuc_status* unique_slices(op_ctx* c, int64_t dim_arg,
                                  bool consecutive) {
  const tpuc_hlo_type st = c->types[0];
  tpuc_dtype dt = st.dtype;
  if (st.rank == 0 || tpuc_dtype_is_complex(dt))
    return op_unimpl("unique over a dim of a 0-d or complex tensor: CPU");
  int64_t dim = 0;
  tpuc_status* bad = op_wrap_dim(st.rank, dim_arg, &dim);
  if (bad != NULL) {
    /* the CPU raises its own message (ours would carry the op name) */
    tpuc_status_free(bad);
    return op_unimpl("dim out of range: CPU raises");
  }
  int64_t n = tpuc_hlo_type_num_elements(&st);
  if (n == 0) return op_unimpl("empty unique over a dim: CPU");
  int64_t s = st.dims[dim], r = n / s;
  if (!consecutive && r > UNIQUE_DIM_MAX_SLICE)
    return op_unimpl("unique_dim of long slices: CPU");
  /* x2 = self with dim moved first, as [s, r] */
  int64_t perm[TPUC_MAX_RANK], inv[TPUC_MAX_RANK], moved[TPUC_MAX_RANK];
  perm[0] = dim;
  for (int d = 0, k = 1; d < st.rank; d++)
    if (d != dim) perm[k++] = d;
  for (int d = 0; d < st.rank; d++) {
    inv[perm[d]] = d;
    moved[d] = st.dims[perm[d]];
  }
  tpuc_hlo_value x, x2;
  TRY(tpuc_hlo_transpose(c->fn, c->vals[0], perm, &x));
  int64_t d2[2] = {s, r};
  TRY(tpuc_hlo_reshape(c->fn, x, d2, 2, &x2));
  tpuc_dtype kd = dt == TPUC_DTYPE_PRED ? TPUC_DTYPE_U8 : dt;
  if (kd != dt) TRY(tpuc_hlo_convert(c->fn, x2, kd, &x2));
  tpuc_hlo_type st1 = tpuc_hlo_type_make(TPUC_DTYPE_S64, &s, 1);
  tpuc_hlo_value order = -1, xs = x2;
  if (!consecutive) {
    if (tpuc_dtype_is_float(dt)) {
      /* the CPU's comparisons leave NaNs' order unspecified */
      tpuc_hlo_value nan, any;
      TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_NE, x2, x2, &nan));
      TRY(tpuc_hlo_convert(c->fn, nan, TPUC_DTYPE_S64, &nan));
      tpuc_hlo_type nt2 = tpuc_hlo_type_make(TPUC_DTYPE_S64, d2, 2);
      TRY(count_true(c, nan, &nt2, &any));
      tpuc_hlo_value zero;
      TRY(op_const(c, TPUC_DTYPE_S64, 0, NULL, &zero));
      TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_GT, any, zero, &c->check));
      c->has_check = true;
      c->check_code = TPUC_UNIMPLEMENTED;
      c->check_msg = "unique_dim with NaN: the CPU decides";
    }
    /* lexicographic order: stable sorts by each element, last first */
    TRY(tpuc_hlo_iota(c->fn, &st1, 0, &order));
    tpuc_dtype dts[2] = {kd, TPUC_DTYPE_S64};
    for (int64_t j = r - 1; j >= 0; j--) {
      tpuc_hlo_value col, key, ins[2], outs[2];
      tpuc_hlo_fn* less = NULL; /* a region belongs to one sort */
      TRY(tpuc_hlo_region_compare(c->module, dts, 2, TPUC_HLO_LT, &less));
      int64_t start[2] = {0, j}, lim[2] = {s, j + 1};
      TRY(tpuc_hlo_slice(c->fn, x2, start, lim, NULL, &col));
      TRY(tpuc_hlo_reshape(c->fn, col, &s, 1, &col));
      int64_t id[2] = {s, 1};
      tpuc_hlo_value ix;
      TRY(tpuc_hlo_reshape(c->fn, order, id, 2, &ix));
      TRY(op_gather_elements(c->fn, col, ix, &key));
      ins[0] = key;
      ins[1] = order;
      TRY(tpuc_hlo_sort(c->fn, ins, 2, 0, true, less, outs));
      order = outs[1];
    }
    TRY(take_rows(c, x2, order, s, &xs));
  }
  /* a slice starts a run when some element differs from the previous */
  tpuc_hlo_value starts;
  {
    tpuc_hlo_value first, prev, cur, ne, any;
    int64_t one = 1;
    tpuc_hlo_type t1 = tpuc_hlo_type_make(TPUC_DTYPE_PRED, &one, 1);
    TRY(op_const(c, TPUC_DTYPE_PRED, 1, &t1, &first));
    if (s == 1) {
      starts = first;
    } else {
      int64_t a0[2] = {0, 0}, a1[2] = {s - 1, r}, b0[2] = {1, 0};
      TRY(tpuc_hlo_slice(c->fn, xs, a0, a1, NULL, &prev));
      TRY(tpuc_hlo_slice(c->fn, xs, b0, d2, NULL, &cur));
      TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_NE, cur, prev, &ne));
      tpuc_hlo_fn* orr = NULL;
      tpuc_hlo_value f;
      int64_t rd = 1;
      TRY(tpuc_hlo_region_binary(c->module, TPUC_DTYPE_PRED, TPUC_HLO_OR,
                                 &orr));
      TRY(op_const(c, TPUC_DTYPE_PRED, 0, NULL, &f));
      TRY(tpuc_hlo_reduce(c->fn, &ne, &f, 1, &rd, 1, orr, &any));
      tpuc_hlo_value parts[2] = {first, any};
      TRY(tpuc_hlo_concatenate(c->fn, parts, 2, 0, &starts));
    }
  }
  tpuc_hlo_type pt = tpuc_hlo_type_make(TPUC_DTYPE_PRED, &s, 1);
  c->nouts = 1;
  if (c->phase == 1) return count_true(c, starts, &pt, &c->outs[0]);
  int64_t u = c->dyn[0];
  c->nouts = 3;
  tpuc_hlo_value pos, vals, g, one;
  TRY(true_positions(c, starts, &pt, u, &pos));
  TRY(take_rows(c, xs, pos, u, &vals));
  if (kd != dt) TRY(tpuc_hlo_convert(c->fn, vals, dt, &vals));
  moved[0] = u;
  TRY(tpuc_hlo_reshape(c->fn, vals, moved, st.rank, &vals));
  TRY(tpuc_hlo_transpose(c->fn, vals, inv, &c->outs[0]));
  TRY(tpuc_hlo_convert(c->fn, starts, TPUC_DTYPE_S64, &g));
  TRY(prefix_sum(c, g, s, &g));
  TRY(op_const(c, TPUC_DTYPE_S64, 1, &st1, &one));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, g, one, &g));
  if (consecutive)
    c->outs[1] = g;
  else
    TRY(unpermute(c, g, order, s, &c->outs[1]));
  {
    tpuc_hlo_value next, end, parts[2];
    int64_t o = 1, len = 1;
    tpuc_hlo_type et = tpuc_hlo_type_make(TPUC_DTYPE_S64, &len, 1);
    TRY(op_const(c, TPUC_DTYPE_S64, (double)s, &et, &end));
    TRY(tpuc_hlo_slice(c->fn, pos, &o, &u, NULL, &next));
    parts[0] = next;
    parts[1] = end;
    TRY(tpuc_hlo_concatenate(c->fn, parts, 2, 0, &next));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, next, pos, &c->outs[2]));
  }
  return NULL;
}

/* unique_dim(self, dim, sorted, return_inverse, return_counts) (param 0)
 * / unique_dim_consecutive(self, dim, return_inverse, return_counts)
 * (param 1). */
static tpuc_status* lower_unique_dim(op_ctx* c, int param) {
  if (!op_is_tensor(c, 0) || op_is_none(c, 1))
    return op_unimpl("unexpected arguments");
  int64_t dim = 0;
  TRY(op_int_arg(c, 1, 0, &dim));
  return unique_slices(c, dim, param == 1);
}

/* _unique2(self, sorted, return_inverse, return_counts) (param 0; the CPU
 * always sorts), unique_consecutive(self, return_inverse, return_counts,
 * dim=None) (param 1) and _unique(self, sorted, return_inverse) (param 2,
 * no counts: two results): the distinct values (of runs, for
 * unique_consecutive) of the flattened self, the index of each element's
 * value (self's shape) and the count of each value. Phase 1 counts the
 * runs of the (sorted) elements. */
static tpuc_status* lower_unique(op_ctx* c, int param) {
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  bool consecutive = param == 1, two = param == 2;
  int fi = consecutive ? 1 : 2;
  int64_t inv = 0, cnt = 0;
  TRY(op_int_arg(c, fi, 0, &inv));
  if (!two) TRY(op_int_arg(c, fi + 1, 0, &cnt));
  if (consecutive && !op_is_none(c, 3)) {
    int64_t dim = 0;
    TRY(op_int_arg(c, 3, 0, &dim));
    return unique_slices(c, dim, true);
  }
  const tpuc_hlo_type st = c->types[0];
  tpuc_dtype dt = st.dtype;
  if (tpuc_dtype_is_complex(dt)) return op_unimpl("complex unique: CPU");
  int64_t n = tpuc_hlo_type_num_elements(&st);
  if (n == 0) {
    c->nouts = 1;
    if (c->phase == 1) return op_const(c, TPUC_DTYPE_S64, 0, NULL, &c->outs[0]);
    c->nouts = two ? 2 : 3;
    tpuc_hlo_type vt = tpuc_hlo_type_make(dt, &n, 1);
    tpuc_hlo_type it = st;
    it.dtype = TPUC_DTYPE_S64;
    TRY(op_const(c, dt, 0, &vt, &c->outs[0]));
    if (inv)
      TRY(op_const(c, TPUC_DTYPE_S64, 0, &it, &c->outs[1]));
    else
      TRY(empty_s64(c, &c->outs[1]));
    return two ? NULL : empty_s64(c, &c->outs[2]);
  }
  tpuc_dtype kd;
  tpuc_hlo_value keys, sorted, perm = -1, starts;
  TRY(flat_keys(c, n, &keys, &kd));
  if (consecutive) {
    sorted = keys;
  } else {
    /* stable, so equal values keep their order (the CPU's inverse of
     * NaNs follows it) */
    tpuc_hlo_type nt = tpuc_hlo_type_make(TPUC_DTYPE_S64, &n, 1);
    tpuc_hlo_value iota, ins[2], outs[2];
    TRY(tpuc_hlo_iota(c->fn, &nt, 0, &iota));
    tpuc_dtype dts[2] = {kd, TPUC_DTYPE_S64};
    tpuc_hlo_fn* less = NULL;
    TRY(ascending(c, dts, 2, &less));
    ins[0] = keys;
    ins[1] = iota;
    TRY(tpuc_hlo_sort(c->fn, ins, 2, 0, true, less, outs));
    sorted = outs[0];
    perm = outs[1];
  }
  TRY(run_starts(c, sorted, n, &starts));
  tpuc_hlo_type nt = tpuc_hlo_type_make(TPUC_DTYPE_PRED, &n, 1);
  c->nouts = 1;
  if (c->phase == 1) return count_true(c, starts, &nt, &c->outs[0]);
  int64_t u = c->dyn[0];
  c->nouts = two ? 2 : 3;
  /* the positions (in sorted order) where runs start: s64[u] */
  tpuc_hlo_value pos, idx, vals;
  TRY(true_positions(c, starts, &nt, u, &pos));
  int64_t idims[2] = {u, 1};
  TRY(tpuc_hlo_reshape(c->fn, pos, idims, 2, &idx));
  TRY(op_gather_elements(c->fn, sorted, idx, &vals));
  TRY(tpuc_hlo_convert(c->fn, vals, dt, &c->outs[0]));
  if (inv) {
    /* run number of each sorted element, put back at its position */
    tpuc_hlo_value s64, g, one, it;
    tpuc_hlo_type gt = tpuc_hlo_type_make(TPUC_DTYPE_S64, &n, 1);
    TRY(tpuc_hlo_convert(c->fn, starts, TPUC_DTYPE_S64, &s64));
    TRY(prefix_sum(c, s64, n, &g));
    TRY(op_const(c, TPUC_DTYPE_S64, 1, &gt, &one));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, g, one, &g));
    it = g;
    /* inverse[perm[i]] = g[i] */
    if (!consecutive) TRY(unpermute(c, g, perm, n, &it));
    TRY(tpuc_hlo_reshape(c->fn, it, st.dims, st.rank, &c->outs[1]));
  } else {
    TRY(empty_s64(c, &c->outs[1]));
  }
  if (two) return NULL;
  if (cnt) {
    /* the next run's start (n after the last) minus this one's */
    tpuc_hlo_value next, end, parts[2];
    int64_t one = 1, len = 1;
    tpuc_hlo_type et = tpuc_hlo_type_make(TPUC_DTYPE_S64, &len, 1);
    TRY(op_const(c, TPUC_DTYPE_S64, (double)n, &et, &end));
    TRY(tpuc_hlo_slice(c->fn, pos, &one, &u, NULL, &next));
    parts[0] = next;
    parts[1] = end;
    TRY(tpuc_hlo_concatenate(c->fn, parts, 2, 0, &next));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, next, pos, &c->outs[2]));
  } else {
    TRY(empty_s64(c, &c->outs[2]));
  }
  return NULL;
}

/* bincount(self, weights=None, minlength=0): counts (or summed weights) of
 * each value of a 1-D non-negative integer tensor; max(minlength,
 * max(self) + 1) bins, which phase 1 finds (and checks for negative
 * values: the CPU's error). Counts are int64; float weights sum in their
 * dtype, other weights in float64, as the CPU. */
static tpuc_status* lower_bincount(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type xt = c->types[0];
  if (tpuc_dtype_is_float(xt.dtype) || tpuc_dtype_is_complex(xt.dtype) ||
      xt.dtype == TPUC_DTYPE_PRED)
    return op_unimpl("bincount of this dtype: the CPU says why");
  static const char kBadInput[] =
      "bincount only supports 1-d non-negative integral inputs.";
  if (xt.rank != 1)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "%s", kBadInput);
  bool has_w = op_is_tensor(c, 1);
  if (!has_w && !op_is_none(c, 1)) return op_unimpl("unexpected weights");
  int64_t minlength = 0;
  TRY(op_int_arg(c, 2, 0, &minlength));
  if (minlength < 0)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "minlength should be >= 0");
  int64_t n = xt.dims[0];
  if (has_w) {
    const tpuc_hlo_type wt = c->types[1];
    if (wt.rank != 1 || wt.dims[0] != n)
      return tpuc_status_make(TPUC_INVALID_ARGUMENT, "weights should be 1-d "
                              "and have the same length as input");
    if (tpuc_dtype_is_complex(wt.dtype))
      return op_unimpl("complex weights: the CPU says why");
  }
  c->nouts = 1;
  tpuc_hlo_value x;
  TRY(tpuc_hlo_convert(c->fn, c->vals[0], TPUC_DTYPE_S64, &x));
  tpuc_hlo_type nt = tpuc_hlo_type_make(TPUC_DTYPE_S64, &n, 1);
  if (c->phase == 1) {
    tpuc_hlo_value init, top, one, len, minl, zero, neg, lows;
    TRY(op_const(c, TPUC_DTYPE_S64, -1, NULL, &init));
    tpuc_hlo_fn* mx = NULL, *mn = NULL;
    TRY(tpuc_hlo_region_binary(c->module, TPUC_DTYPE_S64, TPUC_HLO_MAX, &mx));
    int64_t d0 = 0;
    TRY(tpuc_hlo_reduce(c->fn, &x, &init, 1, &d0, 1, mx, &top));
    TRY(op_const(c, TPUC_DTYPE_S64, 1, NULL, &one));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, top, one, &len));
    TRY(op_const(c, TPUC_DTYPE_S64, (double)minlength, NULL, &minl));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MAX, len, minl, &c->outs[0]));
    /* A negative value: the CPU's error, raised at this op. */
    TRY(op_const(c, TPUC_DTYPE_S64, 0, NULL, &zero));
    TRY(tpuc_hlo_region_binary(c->module, TPUC_DTYPE_S64, TPUC_HLO_MIN, &mn));
    TRY(tpuc_hlo_reduce(c->fn, &x, &zero, 1, &d0, 1, mn, &lows));
    TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_LT, lows, zero, &neg));
    c->has_check = true;
    c->check = neg;
    c->check_code = TPUC_INVALID_ARGUMENT;
    c->check_msg = kBadInput;
    return NULL;
  }
  int64_t bins = c->dyn[0];
  tpuc_dtype od = TPUC_DTYPE_S64;
  if (has_w)
    od = c->types[1].dtype == TPUC_DTYPE_F32 ? TPUC_DTYPE_F32 : TPUC_DTYPE_F64;
  tpuc_hlo_type ot = tpuc_hlo_type_make(od, &bins, 1);
  tpuc_hlo_value zeros, upd, idx;
  TRY(op_const(c, od, 0, &ot, &zeros));
  if (n == 0 || bins == 0) {
    c->outs[0] = zeros;
    return NULL;
  }
  if (has_w) {
    TRY(tpuc_hlo_convert(c->fn, c->vals[1], od, &upd));
  } else {
    TRY(op_const(c, od, 1, &nt, &upd));
  }
  int64_t col[2] = {n, 1};
  TRY(tpuc_hlo_reshape(c->fn, x, col, 2, &idx));
  tpuc_hlo_fn* add = NULL;
  TRY(tpuc_hlo_region_binary(c->module, od, TPUC_HLO_ADD, &add));
  return op_scatter_first(c->fn, zeros, idx, upd, add, false, &c->outs[0]);
}

const op_entry op_table_dynamic[] = {
    {"aten::bincount", lower_bincount, 0},
    {"aten::nonzero", lower_nonzero, 0},
    {"aten::nonzero.out", lower_nonzero, 0},
    {"aten::masked_select", lower_masked_select, 0},
    {"aten::masked_select.out", lower_masked_select, 0},
    {"aten::_unique2", lower_unique, 0},
    {"aten::_unique2.out", lower_unique, 0},
    {"aten::unique_consecutive", lower_unique, 1},
    {"aten::unique_consecutive.out", lower_unique, 1},
    {"aten::unique_dim", lower_unique_dim, 0},
    {"aten::unique_dim.out", lower_unique_dim, 0},
    {"aten::unique_dim_consecutive", lower_unique_dim, 1},
    {"aten::unique_dim_consecutive.out", lower_unique_dim, 1},
    {"aten::_unique", lower_unique, 2},
    {"aten::_unique.out", lower_unique, 2},
    {NULL, NULL, 0},
};
