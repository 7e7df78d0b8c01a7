/* Ops whose result shapes depend on the data: nonzero, masked_select.
 * They run in two programs (program.c): phase 1 counts the selected
 * elements on the device and the host waits for that count; phase 2,
 * compiled per count, builds the result. The selected positions come from
 * one stable sort of the flat positions, keyed so selected ones come
 * first in order. */
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
  if (tpuc_dtype_is_complex(shape.dtype))
    return op_unimpl("complex nonzero: CPU");
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

const op_entry op_table_dynamic[] = {
    {"aten::nonzero", lower_nonzero, 0},
    {"aten::nonzero.out", lower_nonzero, 0},
    {"aten::masked_select", lower_masked_select, 0},
    {"aten::masked_select.out", lower_masked_select, 0},
    {NULL, NULL, 0},
};
