/* Small helpers shared by the lowerings (ops_internal.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ops/ops_internal.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

tpuc_status* op_unimpl(const char* why) {
  return tpuc_status_make(TPUC_UNIMPLEMENTED, "%s", why);
}

bool op_is_tensor(const op_ctx* c, int i) {
  return i >= 0 && (size_t)i < c->nargs &&
         c->args[i].kind == TPUC_OP_ARG_TENSOR;
}

bool op_is_value(const op_ctx* c, int i) {
  return i >= 0 && (size_t)i < c->nargs &&
         (c->args[i].kind == TPUC_OP_ARG_TENSOR ||
          c->args[i].kind == TPUC_OP_ARG_SCALAR);
}

bool op_is_none(const op_ctx* c, int i) {
  return i < 0 || (size_t)i >= c->nargs ||
         c->args[i].kind == TPUC_OP_ARG_NONE;
}

tpuc_status* op_int_arg(const op_ctx* c, int i, int64_t dflt, int64_t* out) {
  if (op_is_none(c, i)) {
    *out = dflt;
    return NULL;
  }
  const tpuc_op_arg* a = &c->args[i];
  if (a->kind != TPUC_OP_ARG_INT && a->kind != TPUC_OP_ARG_BOOL)
    return op_unimpl("expected an int argument");
  *out = a->i;
  return NULL;
}

const char* op_str_arg(const op_ctx* c, int i, const char* dflt) {
  if (op_is_none(c, i) || c->args[i].kind != TPUC_OP_ARG_STRING) return dflt;
  return c->args[i].str;
}

tpuc_status* op_wrap_dim(int rank, int64_t dim, int64_t* out) {
  int64_t lo = rank == 0 ? -1 : -rank, hi = rank == 0 ? 0 : rank - 1;
  if (dim < lo || dim > hi)
    return tpuc_status_make(TPUC_OUT_OF_RANGE,
                            "Dimension out of range (expected to be in range "
                            "of [%lld, %lld], but got %lld)",
                            (long long)lo, (long long)hi, (long long)dim);
  *out = dim < 0 ? dim + (rank == 0 ? 1 : rank) : dim;
  return NULL;
}

tpuc_dtype op_accumulation_dtype(tpuc_dtype d) {
  bool narrow = d == TPUC_DTYPE_F16 || d == TPUC_DTYPE_BF16 ||
                tpuc_dtype_is_float8(d);
  return narrow ? TPUC_DTYPE_F32 : d;
}

static tpuc_status* splat(op_ctx* c, tpuc_hlo_value x,
                          const tpuc_hlo_type* shape, tpuc_hlo_value* out) {
  if (shape == NULL || shape->rank == 0) {
    *out = x;
    return NULL;
  }
  return tpuc_hlo_broadcast_in_dim(c->fn, x, shape->dims, shape->rank, NULL,
                                   out);
}

tpuc_status* op_const(op_ctx* c, tpuc_dtype dtype, double v,
                      const tpuc_hlo_type* shape, tpuc_hlo_value* out) {
  tpuc_hlo_value x;
  if (dtype == TPUC_DTYPE_PRED) {
    TRY(tpuc_hlo_constant_i64(c->fn, TPUC_DTYPE_U8, v != 0, &x));
    TRY(tpuc_hlo_convert(c->fn, x, TPUC_DTYPE_PRED, &x));
  } else if (tpuc_dtype_is_float(dtype) || tpuc_dtype_is_complex(dtype)) {
    TRY(tpuc_hlo_constant_f64(c->fn, dtype, v, &x));
  } else {
    TRY(tpuc_hlo_constant_i64(c->fn, dtype, (int64_t)v, &x));
  }
  return splat(c, x, shape, out);
}

tpuc_status* op_scalar(op_ctx* c, int i, tpuc_dtype dtype,
                       const tpuc_hlo_type* shape, tpuc_hlo_value* out) {
  if (i >= 0 && (size_t)i < c->nargs &&
      (c->args[i].kind == TPUC_OP_ARG_INT ||
       c->args[i].kind == TPUC_OP_ARG_BOOL)) {
    /* A static int (a SymInt such as ignore_index): a constant. */
    tpuc_hlo_value x;
    if (dtype == TPUC_DTYPE_PRED) {
      TRY(op_const(c, dtype, c->args[i].i != 0, NULL, &x));
    } else if (tpuc_dtype_is_float(dtype)) {
      TRY(tpuc_hlo_constant_f64(c->fn, dtype, (double)c->args[i].i, &x));
    } else {
      TRY(tpuc_hlo_constant_i64(c->fn, TPUC_DTYPE_S64, c->args[i].i, &x));
      if (dtype != TPUC_DTYPE_S64) TRY(tpuc_hlo_convert(c->fn, x, dtype, &x));
    }
    return splat(c, x, shape, out);
  }
  if (!op_is_value(c, i) || c->types[i].rank != 0)
    return op_unimpl("expected a scalar argument");
  if (c->args[i].kind == TPUC_OP_ARG_SCALAR &&
      c->args[i].scalar == TPUC_SCALAR_COMPLEX && !tpuc_dtype_is_complex(dtype))
    return op_unimpl("a complex scalar into a real result: the CPU says why");
  tpuc_hlo_value x = c->vals[i];
  if (c->types[i].dtype != dtype) TRY(tpuc_hlo_convert(c->fn, x, dtype, &x));
  return splat(c, x, shape, out);
}

tpuc_status* op_any_true(op_ctx* c, tpuc_hlo_value p, tpuc_hlo_value* out) {
  tpuc_hlo_type t;
  TRY(tpuc_hlo_value_type(c->fn, p, &t));
  if (t.rank == 0) {
    *out = p;
    return NULL;
  }
  int64_t dims[TPUC_MAX_RANK];
  for (int d = 0; d < t.rank; d++) dims[d] = d;
  tpuc_hlo_value init;
  TRY(op_const(c, TPUC_DTYPE_PRED, 0, NULL, &init));
  tpuc_hlo_fn* body = NULL;
  TRY(tpuc_hlo_region_binary(c->module, TPUC_DTYPE_PRED, TPUC_HLO_OR, &body));
  return tpuc_hlo_reduce(c->fn, &p, &init, 1, dims, (size_t)t.rank, body, out);
}

tpuc_status* op_scatter_first(tpuc_hlo_fn* fn, tpuc_hlo_value into,
                              tpuc_hlo_value idx, tpuc_hlo_value upd,
                              tpuc_hlo_fn* body, bool unique,
                              tpuc_hlo_value* out) {
  tpuc_hlo_type t, it;
  TRY(tpuc_hlo_value_type(fn, into, &t));
  TRY(tpuc_hlo_value_type(fn, idx, &it));
  int64_t win[TPUC_MAX_RANK], inserted = 0, map = 0;
  for (int d = 1; d < t.rank; d++) win[d - 1] = it.rank + d - 2;
  tpuc_hlo_scatter_dims sd;
  memset(&sd, 0, sizeof sd);
  sd.update_window_dims = win;
  sd.num_update_window_dims = (size_t)(t.rank - 1);
  sd.inserted_window_dims = &inserted;
  sd.num_inserted_window_dims = 1;
  sd.scatter_dims_to_operand_dims = &map;
  sd.num_scatter_dims_to_operand_dims = 1;
  sd.index_vector_dim = it.rank - 1;
  sd.unique_indices = unique;
  return tpuc_hlo_scatter(fn, &into, 1, idx, &upd, &sd, body, out);
}

tpuc_status* op_gather_elements(tpuc_hlo_fn* fn, tpuc_hlo_value flat,
                                tpuc_hlo_value idx, tpuc_hlo_value* out) {
  tpuc_hlo_type it;
  TRY(tpuc_hlo_value_type(fn, idx, &it));
  int64_t zero = 0, one = 1;
  tpuc_hlo_gather_dims g;
  memset(&g, 0, sizeof g);
  g.collapsed_slice_dims = &zero;
  g.num_collapsed_slice_dims = 1;
  g.start_index_map = &zero;
  g.num_start_index_map = 1;
  g.index_vector_dim = it.rank - 1;
  return tpuc_hlo_gather(fn, flat, idx, &g, &one, false, out);
}

tpuc_status* op_take_along(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                           const tpuc_hlo_type* xt, int64_t dim,
                           tpuc_hlo_value idx, tpuc_hlo_value* out) {
  int64_t offs[TPUC_MAX_RANK], slice[TPUC_MAX_RANK];
  size_t no = 0;
  for (int d = 0; d < xt->rank; d++) {
    slice[d] = d == dim ? 1 : xt->dims[d];
    if (d != dim) offs[no++] = d;
  }
  tpuc_hlo_gather_dims g;
  memset(&g, 0, sizeof g);
  g.offset_dims = offs;
  g.num_offset_dims = no;
  g.collapsed_slice_dims = &dim;
  g.num_collapsed_slice_dims = 1;
  g.start_index_map = &dim;
  g.num_start_index_map = 1;
  g.index_vector_dim = 1;
  return tpuc_hlo_gather(fn, x, idx, &g, slice, false, out);
}

bool op_host_check_add(op_ctx* c, int i, double lo, bool lo_incl, double hi,
                       bool hi_incl, tpuc_code code, const char* msg) {
  if (i < 0 || (size_t)i >= c->nargs || c->args[i].kind != TPUC_OP_ARG_SCALAR ||
      c->args[i].scalar == TPUC_SCALAR_COMPLEX ||
      c->n_host_checks == OP_MAX_HOST_CHECKS)
    return false;
  c->host_checks[c->n_host_checks++] =
      (op_host_check){i, lo, hi, lo_incl, hi_incl, false, false, code, msg};
  return true;
}

/* c10's message, which names the C++ type. */
static const char* overflow_message(tpuc_dtype dt) {
  switch (dt) {
    case TPUC_DTYPE_F16:
      return "value cannot be converted to type c10::Half without overflow";
    case TPUC_DTYPE_BF16:
      return "value cannot be converted to type c10::BFloat16 without "
             "overflow";
    case TPUC_DTYPE_F32:
      return "value cannot be converted to type float without overflow";
    case TPUC_DTYPE_F8E5M2:
      return "value cannot be converted to type c10::Float8_e5m2 without "
             "overflow";
    case TPUC_DTYPE_F8E4M3FN:
      return "value cannot be converted to type c10::Float8_e4m3fn without "
             "overflow";
    case TPUC_DTYPE_F8E5M2FNUZ:
      return "value cannot be converted to type c10::Float8_e5m2fnuz "
             "without overflow";
    case TPUC_DTYPE_F8E4M3FNUZ:
      return "value cannot be converted to type c10::Float8_e4m3fnuz "
             "without overflow";
    default:
      return NULL;
  }
}

bool op_host_check_float_fits(op_ctx* c, int i, tpuc_dtype dt) {
  const char* msg = overflow_message(dt);
  if (msg == NULL) return false; /* f64 holds any double */
  double m = tpuc_dtype_max_finite(dt);
  if (!op_host_check_add(c, i, -m, true, m, true, TPUC_INVALID_ARGUMENT, msg))
    return false;
  op_host_check* h = &c->host_checks[c->n_host_checks - 1];
  h->nan_ok = true;
  tpuc_float_format f;
  h->inf_ok = tpuc_dtype_float_format(dt, &f) && f.kind == TPUC_FLOAT_IEEE;
  return true;
}
