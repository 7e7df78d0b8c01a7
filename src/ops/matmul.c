/* mm (2-D) and bmm (3-D, batch first): same dtype operands, as PyTorch. */
#include "ops/ops_internal.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

tpuc_status* op_lower_matmul(op_ctx* c, int batched) {
  if (c->nargs < 2 || c->args[0].kind != TPUC_OP_ARG_TENSOR ||
      c->args[1].kind != TPUC_OP_ARG_TENSOR)
    return tpuc_status_make(TPUC_UNIMPLEMENTED, "unexpected arguments");
  const tpuc_hlo_type* a = &c->types[0];
  const tpuc_hlo_type* b = &c->types[1];
  int rank = batched ? 3 : 2;
  const char* name = batched ? "bmm" : "mm";
  if (a->rank != rank || b->rank != rank)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "%s: both arguments must be %dD, got %dD and %dD",
                            name, rank, a->rank, b->rank);
  if (a->dtype != b->dtype)
    return tpuc_status_make(
        TPUC_INVALID_ARGUMENT,
        "%s: expected m1 and m2 to have the same dtype, but "
        "got: %s != %s",
        name, tpuc_dtype_mlir_name(a->dtype), tpuc_dtype_mlir_name(b->dtype));
  if (a->dtype == TPUC_DTYPE_PRED)
    return tpuc_status_make(TPUC_UNIMPLEMENTED,
                            "%s of this dtype runs on the CPU", name);
  int k = rank - 1;
  if (a->dims[k] != b->dims[k - 1] || (batched && a->dims[0] != b->dims[0]))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "%s: mat1 and mat2 shapes cannot be multiplied "
                            "(%lldx%lld and %lldx%lld)",
                            name, (long long)a->dims[k - 1],
                            (long long)a->dims[k], (long long)b->dims[k - 1],
                            (long long)b->dims[k]);
  int64_t lc = k, rc = k - 1, batch = 0;
  tpuc_hlo_dot_dims dd = {batched ? &batch : NULL,
                          batched ? &batch : NULL,
                          batched ? 1u : 0u,
                          &lc,
                          &rc,
                          1,
                          TPUC_DTYPE_INVALID,
                          (a->dtype == TPUC_DTYPE_F32 ||
                           a->dtype == TPUC_DTYPE_C64)
                              ? c->opts->matmul_precision
                              : TPUC_HLO_PRECISION_DEFAULT};
  c->nouts = 1;
  return tpuc_hlo_dot_general(c->fn, c->vals[0], c->vals[1], &dd, &c->outs[0]);
}

/* _scaled_mm(a, b, scale_a, scale_b, bias?, scale_result?, out_dtype?,
 * use_fast_accum): float8 a @ b computed in f32, times the two tensor-wide
 * f32 scales, plus bias, converted to out_dtype (a's dtype by default), as
 * the CPU computes it. Row-wise scales and a scale_result are the CPU's to
 * check and compute. */
tpuc_status* op_lower_scaled_mm(op_ctx* c, int param) {
  (void)param;
  if (c->nargs < 4 || !op_is_tensor(c, 0) || !op_is_tensor(c, 1) ||
      !op_is_tensor(c, 2) || !op_is_tensor(c, 3))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* a = &c->types[0];
  const tpuc_hlo_type* b = &c->types[1];
  if (a->rank != 2 || b->rank != 2 || !tpuc_dtype_is_float8(a->dtype) ||
      !tpuc_dtype_is_float8(b->dtype) || a->dims[1] != b->dims[0])
    return op_unimpl("the CPU checks these operands");
  for (int s = 2; s <= 3; s++)
    if (c->types[s].dtype != TPUC_DTYPE_F32 || c->types[s].rank > 2 ||
        tpuc_hlo_type_num_elements(&c->types[s]) != 1)
      return op_unimpl("row-wise scales run on the CPU");
  bool bias = c->nargs > 4 && !op_is_none(c, 4);
  if (bias && !op_is_tensor(c, 4)) return op_unimpl("unexpected bias");
  if (c->nargs > 5 && !op_is_none(c, 5))
    return op_unimpl("scale_result runs on the CPU");
  tpuc_dtype out = a->dtype;
  if (c->nargs > 6 && c->args[6].kind == TPUC_OP_ARG_DTYPE)
    out = c->args[6].dtype;
  if (!tpuc_dtype_is_float(out))
    return op_unimpl("this out_dtype runs on the CPU");
  int64_t dims[2] = {a->dims[0], b->dims[1]};
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_F32, dims, 2);
  if (bias) {
    const tpuc_hlo_type* bt = &c->types[4];
    if (bt->rank > 2 ||
        (bt->rank >= 1 && bt->dims[bt->rank - 1] != 1 &&
         bt->dims[bt->rank - 1] != dims[1]) ||
        (bt->rank == 2 && bt->dims[0] != 1 && bt->dims[0] != dims[0]))
      return op_unimpl("the CPU checks the bias");
  }
  tpuc_hlo_value a32, b32, y, sa, sb, bv;
  TRY(tpuc_hlo_convert(c->fn, c->vals[0], TPUC_DTYPE_F32, &a32));
  TRY(tpuc_hlo_convert(c->fn, c->vals[1], TPUC_DTYPE_F32, &b32));
  int64_t lc = 1, rc = 0;
  tpuc_hlo_dot_dims dd = {NULL, NULL, 0, &lc, &rc, 1, TPUC_DTYPE_INVALID,
                          c->opts->matmul_precision};
  TRY(tpuc_hlo_dot_general(c->fn, a32, b32, &dd, &y));
  TRY(op_operand(c, 2, TPUC_DTYPE_F32, &t, &sa));
  TRY(op_operand(c, 3, TPUC_DTYPE_F32, &t, &sb));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, y, sa, &y));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, y, sb, &y));
  if (bias) {
    TRY(op_operand(c, 4, TPUC_DTYPE_F32, &t, &bv));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, y, bv, &y));
  }
  c->nouts = 1;
  if (out == TPUC_DTYPE_F32) {
    c->outs[0] = y;
    return NULL;
  }
  return tpuc_hlo_convert(c->fn, y, out, &c->outs[0]);
}
