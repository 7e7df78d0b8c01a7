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
