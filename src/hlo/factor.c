/* StableHLO builder: matrix factorizations (cholesky, triangular_solve). */
#include <stdlib.h>
#include <string.h>

#include "hlo_internal.h"

/* Floats and complex: the element types the factorization ops take. */
static bool factor_dtype(tpuc_dtype d) {
  return tpuc_dtype_is_float(d) || tpuc_dtype_is_complex(d);
}

tpuc_status* tpuc_hlo_cholesky(tpuc_hlo_fn* fn, tpuc_hlo_value a, bool lower,
                               tpuc_hlo_value* out) {
  const char* name = "stablehlo.cholesky";
  if (out == NULL) return hlo_error(name, "out is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  tpuc_hlo_type t;
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "a", a, &t));
  if (!factor_dtype(t.dtype))
    return hlo_error(name, "dtype %s is not float or complex",
                     tpuc_dtype_mlir_name(t.dtype));
  if (t.rank < 2 || t.dims[t.rank - 1] != t.dims[t.rank - 2])
    return hlo_error(name, "a must be a batch of square matrices");
  hlo_sb sb = {0};
  hlo_sb_printf(&sb, "lower = %s", lower ? "true" : "false");
  return hlo_emit1(fn, name, &a, 1, &t, &sb, out);
}

tpuc_status* tpuc_hlo_triangular_solve(tpuc_hlo_fn* fn, tpuc_hlo_value a,
                                       tpuc_hlo_value b, bool left_side,
                                       bool lower, bool unit_diagonal,
                                       tpuc_hlo_transpose_mode transpose_a,
                                       tpuc_hlo_value* out) {
  const char* name = "stablehlo.triangular_solve";
  if (out == NULL) return hlo_error(name, "out is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  tpuc_hlo_type ta, tb;
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "a", a, &ta));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "b", b, &tb));
  if (ta.dtype != tb.dtype)
    return hlo_error(name, "a dtype %s differs from b dtype %s",
                     tpuc_dtype_mlir_name(ta.dtype),
                     tpuc_dtype_mlir_name(tb.dtype));
  if (!factor_dtype(ta.dtype))
    return hlo_error(name, "dtype %s is not float or complex",
                     tpuc_dtype_mlir_name(ta.dtype));
  if (ta.rank < 2 || ta.dims[ta.rank - 1] != ta.dims[ta.rank - 2])
    return hlo_error(name, "a must be a batch of square matrices");
  if (tb.rank != ta.rank)
    return hlo_error(name, "a has rank %d, b has rank %d", ta.rank, tb.rank);
  for (int d = 0; d < ta.rank - 2; ++d)
    if (ta.dims[d] != tb.dims[d])
      return hlo_error(name, "batch dim %d: a size %lld != b size %lld", d,
                       (long long)ta.dims[d], (long long)tb.dims[d]);
  int64_t n = ta.dims[ta.rank - 1];
  int64_t k = left_side ? tb.dims[tb.rank - 2] : tb.dims[tb.rank - 1];
  if (k != n)
    return hlo_error(name, "b's %s dim is %lld, a is %lldx%lld",
                     left_side ? "row" : "column", (long long)k, (long long)n,
                     (long long)n);
  const char* tr;
  switch (transpose_a) {
    case TPUC_HLO_NO_TRANSPOSE:
      tr = "NO_TRANSPOSE";
      break;
    case TPUC_HLO_TRANSPOSE:
      tr = "TRANSPOSE";
      break;
    case TPUC_HLO_ADJOINT:
      tr = "ADJOINT";
      break;
    default:
      return hlo_error(name, "invalid transpose_a %d", (int)transpose_a);
  }
  hlo_sb sb = {0};
  hlo_sb_printf(&sb,
                "left_side = %s, lower = %s, transpose_a = "
                "#stablehlo<transpose %s>, unit_diagonal = %s",
                left_side ? "true" : "false", lower ? "true" : "false", tr,
                unit_diagonal ? "true" : "false");
  tpuc_hlo_value ops[2] = {a, b};
  return hlo_emit1(fn, name, ops, 2, &tb, &sb, out);
}
