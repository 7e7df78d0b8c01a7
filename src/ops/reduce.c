/* Reductions: sum, mean, amax, amin over dims (PyTorch semantics: integral
 * sums are int64, half-precision floats accumulate in f32, mean needs a
 * floating result, an empty dim list means every dim, keepdim). */
#include <math.h>
#include <string.h>

#include "ops/ops_internal.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

/* A reduction body for max/min that keeps NaN (XLA's max/min reduction
 * on the CPU skips it; PyTorch's amax/amin propagate it). */
static tpuc_status* minmax_body(op_ctx* c, tpuc_dtype dt, bool max,
                                tpuc_hlo_fn** out) {
  tpuc_hlo_binary_op bop = max ? TPUC_HLO_MAX : TPUC_HLO_MIN;
  if (!tpuc_dtype_is_float(dt))
    return tpuc_hlo_region_binary(c->module, dt, bop, out);
  tpuc_hlo_type two[2] = {tpuc_hlo_type_scalar(dt), tpuc_hlo_type_scalar(dt)};
  tpuc_hlo_fn* b = NULL;
  TRY(tpuc_hlo_region_create(c->module, two, 2, &b));
  tpuc_hlo_value x, y, m, xn, yn;
  TRY(tpuc_hlo_get_arg(b, 0, &x));
  TRY(tpuc_hlo_get_arg(b, 1, &y));
  TRY(tpuc_hlo_binary(b, bop, x, y, &m));
  TRY(tpuc_hlo_compare(b, TPUC_HLO_NE, x, x, &xn));
  TRY(tpuc_hlo_select(b, xn, x, m, &m));
  TRY(tpuc_hlo_compare(b, TPUC_HLO_NE, y, y, &yn));
  TRY(tpuc_hlo_select(b, yn, y, m, &m));
  TRY(tpuc_hlo_return(b, &m, 1));
  *out = b;
  return NULL;
}

static tpuc_status* reduce_dims(const op_ctx* c, int has_dims, bool* reduce,
                                int64_t* count) {
  int rank = c->types[0].rank;
  const tpuc_op_arg* d = c->nargs > 1 ? &c->args[1] : NULL;
  bool all = !has_dims || d == NULL || d->kind == TPUC_OP_ARG_NONE ||
             (d->kind == TPUC_OP_ARG_INT_LIST && d->list_len == 0);
  if (!all && d->kind != TPUC_OP_ARG_INT_LIST)
    return tpuc_status_make(TPUC_UNIMPLEMENTED, "unexpected dim argument");
  for (int i = 0; i < rank; i++) reduce[i] = all;
  for (size_t k = 0; !all && k < d->list_len; k++) {
    int64_t dim = 0;
    TRY(op_wrap_dim(rank, d->list[k], &dim));
    if (rank == 0) continue;
    if (reduce[dim])
      return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                              "dim %lld appears multiple times in the list of "
                              "dims",
                              (long long)dim);
    reduce[dim] = true;
  }
  *count = 1;
  for (int i = 0; i < rank; i++)
    if (reduce[i]) *count *= c->types[0].dims[i];
  return NULL;
}

/* The identity of `op` over `dt` as a rank-0 constant. */
static tpuc_status* init_value(op_ctx* c, int op, tpuc_dtype dt,
                               tpuc_hlo_value* out) {
  if (op == OP_REDUCE_SUM || op == OP_REDUCE_MEAN)
    return tpuc_hlo_constant_i64(c->fn, dt, 0, out);
  bool max = op == OP_REDUCE_MAX;
  if (tpuc_dtype_is_float(dt))
    return tpuc_hlo_constant_f64(c->fn, dt, max ? -INFINITY : INFINITY, out);
  int bits = (int)tpuc_dtype_size(dt) * 8;
  if (tpuc_dtype_is_unsigned_int(dt)) {
    if (!max) {
      /* all ones of the width, built as a bitcast of -1 */
      tpuc_hlo_value m1;
      tpuc_dtype s = dt == TPUC_DTYPE_U8    ? TPUC_DTYPE_S8
                     : dt == TPUC_DTYPE_U16 ? TPUC_DTYPE_S16
                     : dt == TPUC_DTYPE_U32 ? TPUC_DTYPE_S32
                                            : TPUC_DTYPE_S64;
      TRY(tpuc_hlo_constant_i64(c->fn, s, -1, &m1));
      return tpuc_hlo_bitcast_convert(c->fn, m1, dt, out);
    }
    return tpuc_hlo_constant_i64(c->fn, dt, 0, out);
  }
  int64_t lim = bits == 64 ? INT64_MAX : (((int64_t)1 << (bits - 1)) - 1);
  return tpuc_hlo_constant_i64(c->fn, dt, max ? -lim - 1 : lim, out);
}

tpuc_status* op_lower_reduce(op_ctx* c, int param) {
  int op = param & 0xff;
  int has_dims = (param & OP_REDUCE_DIMS) != 0;
  if (c->nargs < 1 || c->args[0].kind != TPUC_OP_ARG_TENSOR)
    return tpuc_status_make(TPUC_UNIMPLEMENTED, "unexpected arguments");
  const tpuc_hlo_type in = c->types[0];
  /* Complex tensors sum and average like reals; they have no max/min. */
  if (tpuc_dtype_is_complex(in.dtype) &&
      (op == OP_REDUCE_MAX || op == OP_REDUCE_MIN))
    return tpuc_status_make(TPUC_UNIMPLEMENTED, "complex amax/amin: CPU");
  /* Optional dtype argument: last for sum/mean. */
  tpuc_dtype want = TPUC_DTYPE_INVALID;
  const tpuc_op_arg* last = &c->args[c->nargs - 1];
  if ((op == OP_REDUCE_SUM || op == OP_REDUCE_MEAN) && c->nargs > 1 &&
      last->kind == TPUC_OP_ARG_DTYPE)
    want = last->dtype;
  tpuc_dtype result;
  if (op == OP_REDUCE_MAX || op == OP_REDUCE_MIN) {
    result = in.dtype;
  } else if (want != TPUC_DTYPE_INVALID) {
    result = want;
  } else if (op == OP_REDUCE_SUM && !tpuc_dtype_is_float(in.dtype) &&
             !tpuc_dtype_is_complex(in.dtype)) {
    result = TPUC_DTYPE_S64;
  } else {
    result = in.dtype;
  }
  if (op == OP_REDUCE_MEAN && !tpuc_dtype_is_float(result) &&
      !tpuc_dtype_is_complex(result))
    return tpuc_status_make(
        TPUC_INVALID_ARGUMENT,
        "mean(): could not infer output dtype. Input dtype must be either a "
        "floating point or complex dtype. Got: %s",
        tpuc_dtype_mlir_name(result));
  if (tpuc_dtype_is_complex(result) != tpuc_dtype_is_complex(in.dtype))
    return tpuc_status_make(TPUC_UNIMPLEMENTED,
                            "complex <-> real reductions: CPU");
  bool reduce[TPUC_MAX_RANK];
  int64_t count = 1;
  TRY(reduce_dims(c, has_dims, reduce, &count));
  if (count == 0 && (op == OP_REDUCE_MAX || op == OP_REDUCE_MIN))
    return tpuc_status_make(TPUC_UNIMPLEMENTED,
                            "empty amax/amin: CPU says why");
  bool keepdim = has_dims && c->nargs > 2 &&
                 (c->args[2].kind == TPUC_OP_ARG_BOOL) && c->args[2].i != 0;
  tpuc_dtype acc = op_accumulation_dtype(result);
  /* bool amax/amin: any/all, computed on u8 */
  if (result == TPUC_DTYPE_PRED) acc = TPUC_DTYPE_U8;
  tpuc_hlo_value x = c->vals[0];
  if (want != TPUC_DTYPE_INVALID && in.dtype != want)
    TRY(tpuc_hlo_convert(c->fn, x, want, &x));
  tpuc_hlo_type xt;
  TRY(tpuc_hlo_value_type(c->fn, x, &xt));
  if (xt.dtype != acc) TRY(tpuc_hlo_convert(c->fn, x, acc, &x));
  int64_t dims[TPUC_MAX_RANK], kept[TPUC_MAX_RANK];
  size_t nd = 0;
  int nk = 0;
  for (int i = 0; i < in.rank; i++) {
    if (reduce[i]) {
      dims[nd++] = i;
      kept[nk++] = 1;
    } else {
      kept[nk++] = in.dims[i];
    }
  }
  tpuc_hlo_value init, r;
  TRY(init_value(c, op, acc, &init));
  tpuc_hlo_fn* body = NULL;
  if (op == OP_REDUCE_MAX || op == OP_REDUCE_MIN)
    TRY(minmax_body(c, acc, op == OP_REDUCE_MAX, &body));
  else
    TRY(tpuc_hlo_region_binary(c->module, acc, TPUC_HLO_ADD, &body));
  TRY(tpuc_hlo_reduce(c->fn, &x, &init, 1, dims, nd, body, &r));
  if (op == OP_REDUCE_MEAN) {
    tpuc_hlo_type rt;
    TRY(tpuc_hlo_value_type(c->fn, r, &rt));
    tpuc_hlo_value n, nb;
    TRY(tpuc_hlo_constant_f64(c->fn, acc, (double)count, &n));
    int64_t none[1];
    TRY(tpuc_hlo_broadcast_in_dim(c->fn, n, rt.dims, rt.rank, none, &nb));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, r, nb, &r));
  }
  if (acc != result) TRY(tpuc_hlo_convert(c->fn, r, result, &r));
  if (keepdim) TRY(tpuc_hlo_reshape(c->fn, r, kept, nk, &r));
  c->outs[0] = r;
  c->nouts = 1;
  return NULL;
}

/* _softmax / _log_softmax(self, dim, half_to_float): computed in f32 for
 * half floats (as the CPU kernels), max-subtracted for stability. */
tpuc_status* op_lower_softmax(op_ctx* c, int log) {
  if (c->nargs < 3 || c->args[0].kind != TPUC_OP_ARG_TENSOR ||
      c->args[1].kind != TPUC_OP_ARG_INT)
    return tpuc_status_make(TPUC_UNIMPLEMENTED, "unexpected arguments");
  const tpuc_hlo_type in = c->types[0];
  if (!tpuc_dtype_is_float(in.dtype))
    return tpuc_status_make(TPUC_UNIMPLEMENTED, "non-float softmax: CPU");
  bool half_to_float = c->args[2].kind == TPUC_OP_ARG_BOOL && c->args[2].i;
  int rank = in.rank;
  int64_t dim = 0;
  TRY(op_wrap_dim(rank, c->args[1].i, &dim));
  tpuc_dtype acc = op_accumulation_dtype(in.dtype);
  tpuc_dtype result = half_to_float ? TPUC_DTYPE_F32 : in.dtype;
  tpuc_hlo_value x = c->vals[0];
  if (acc != in.dtype) TRY(tpuc_hlo_convert(c->fn, x, acc, &x));
  if (rank == 0) {
    /* softmax of a scalar is 1, log_softmax 0 */
    tpuc_hlo_value k;
    TRY(tpuc_hlo_constant_i64(c->fn, result, log ? 0 : 1, &k));
    c->outs[0] = k;
    c->nouts = 1;
    return NULL;
  }
  int64_t d = dim;
  int64_t bdims[TPUC_MAX_RANK];
  int nb = 0;
  for (int i = 0; i < rank; i++)
    if (i != d) bdims[nb++] = i;
  tpuc_hlo_value ninf, zero, mx, mxb, shifted, e, s, sb, out;
  tpuc_hlo_fn *max_body = NULL, *add_body = NULL;
  TRY(tpuc_hlo_constant_f64(c->fn, acc, -INFINITY, &ninf));
  TRY(tpuc_hlo_constant_f64(c->fn, acc, 0.0, &zero));
  TRY(tpuc_hlo_region_binary(c->module, acc, TPUC_HLO_MAX, &max_body));
  TRY(tpuc_hlo_region_binary(c->module, acc, TPUC_HLO_ADD, &add_body));
  TRY(tpuc_hlo_reduce(c->fn, &x, &ninf, 1, &d, 1, max_body, &mx));
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, mx, in.dims, rank, bdims, &mxb));
  /* Rows that are all -inf keep their NaN/-inf like the CPU: subtracting
   * -inf gives NaN there, as PyTorch does. */
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, x, mxb, &shifted));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_EXP, shifted, &e));
  TRY(tpuc_hlo_reduce(c->fn, &e, &zero, 1, &d, 1, add_body, &s));
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, s, in.dims, rank, bdims, &sb));
  if (log) {
    /* Over the last dim, the CPU's half-precision kernel keeps each row's
     * sum, then its log, in the input dtype (each rounded there) before
     * x - max - log(sum) rounds once; over other dims all of it is f32. */
    bool round_sum = acc != in.dtype && !half_to_float && d == rank - 1;
    tpuc_hlo_value ls;
    if (round_sum) {
      TRY(tpuc_hlo_convert(c->fn, sb, in.dtype, &sb));
      TRY(tpuc_hlo_convert(c->fn, sb, acc, &sb));
    }
    TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_LOG, sb, &ls));
    if (round_sum) {
      TRY(tpuc_hlo_convert(c->fn, ls, in.dtype, &ls));
      TRY(tpuc_hlo_convert(c->fn, ls, acc, &ls));
    }
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, shifted, ls, &out));
  } else {
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, e, sb, &out));
  }
  if (acc != result) TRY(tpuc_hlo_convert(c->fn, out, result, &out));
  c->outs[0] = out;
  c->nouts = 1;
  return NULL;
}
