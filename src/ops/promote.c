/* PyTorch's type promotion (torch.promote_types, torch.result_type). */
#include "ops/ops_internal.h"

static int category(tpuc_dtype d) {
  if (d == TPUC_DTYPE_PRED) return 0;
  if (tpuc_dtype_is_signed_int(d) || tpuc_dtype_is_unsigned_int(d)) return 1;
  if (tpuc_dtype_is_float(d)) return 2;
  return 3;
}

static int int_bits(tpuc_dtype d) { return (int)tpuc_dtype_size(d) * 8; }

tpuc_dtype tpuc_promote_types(tpuc_dtype a, tpuc_dtype b) {
  if (!tpuc_dtype_is_valid(a) || !tpuc_dtype_is_valid(b))
    return TPUC_DTYPE_INVALID;
  if (a == b) return a;
  /* PyTorch promotes an 8-bit float with nothing but itself */
  if (tpuc_dtype_is_float8(a) || tpuc_dtype_is_float8(b))
    return TPUC_DTYPE_INVALID;
  if (a == TPUC_DTYPE_PRED) return b;
  if (b == TPUC_DTYPE_PRED) return a;
  int ca = category(a), cb = category(b);
  if (ca == 3 || cb == 3) {
    /* complex: wide enough for both components */
    bool wide = a == TPUC_DTYPE_C128 || b == TPUC_DTYPE_C128 ||
                a == TPUC_DTYPE_F64 || b == TPUC_DTYPE_F64;
    return wide ? TPUC_DTYPE_C128 : TPUC_DTYPE_C64;
  }
  if (ca == 2 && cb == 2) {
    if ((a == TPUC_DTYPE_F16 && b == TPUC_DTYPE_BF16) ||
        (a == TPUC_DTYPE_BF16 && b == TPUC_DTYPE_F16))
      return TPUC_DTYPE_F32;
    return tpuc_dtype_size(a) >= tpuc_dtype_size(b) ? a : b;
  }
  if (ca == 2) return a;
  if (cb == 2) return b;
  /* two integer types */
  bool ua = tpuc_dtype_is_unsigned_int(a), ub = tpuc_dtype_is_unsigned_int(b);
  if (ua == ub) return int_bits(a) >= int_bits(b) ? a : b;
  tpuc_dtype u = ua ? a : b, s = ua ? b : a;
  if (u != TPUC_DTYPE_U8) return TPUC_DTYPE_INVALID; /* as PyTorch */
  return int_bits(s) > 8 ? s : TPUC_DTYPE_S16;
}

/* PyTorch's combine_categories(higher, lower). */
static tpuc_dtype combine(tpuc_dtype higher, tpuc_dtype lower) {
  if (higher == TPUC_DTYPE_INVALID) return lower;
  if (lower == TPUC_DTYPE_INVALID) return higher;
  if (category(higher) == 3) return higher;
  if (category(lower) == 3) {
    /* the complex type of the float: complex32 for half (no tpu dtype),
     * none for bfloat16 (PyTorch raises): the CPU says */
    if (higher == TPUC_DTYPE_F16 || higher == TPUC_DTYPE_BF16)
      return TPUC_DTYPE_INVALID;
    if (category(higher) == 2)
      return higher == TPUC_DTYPE_F64 ? TPUC_DTYPE_C128 : TPUC_DTYPE_C64;
    return lower;
  }
  if (category(higher) == 2) return higher;
  if (higher == TPUC_DTYPE_PRED || category(lower) == 2)
    return tpuc_promote_types(higher, lower);
  return higher;
}

static tpuc_dtype promote_into(tpuc_dtype acc, tpuc_dtype d) {
  return acc == TPUC_DTYPE_INVALID ? d : tpuc_promote_types(acc, d);
}

tpuc_status* op_result_type(const op_ctx* c, const int* which, size_t n,
                            tpuc_dtype* out) {
  tpuc_dtype dim = TPUC_DTYPE_INVALID, zero = TPUC_DTYPE_INVALID,
             wrapped = TPUC_DTYPE_INVALID;
  for (size_t k = 0; k < n; k++) {
    const tpuc_op_arg* a = &c->args[which[k]];
    if (a->kind == TPUC_OP_ARG_TENSOR) {
      if (a->view.rank > 0)
        dim = promote_into(dim, a->view.dtype);
      else
        zero = promote_into(zero, a->view.dtype);
    } else if (a->kind == TPUC_OP_ARG_SCALAR) {
      if (a->scalar_is_tensor) {
        zero = promote_into(zero, a->scalar_dtype);
      } else {
        tpuc_dtype d =
            a->scalar == TPUC_SCALAR_COMPLEX
                ? (c->opts->default_float == TPUC_DTYPE_F64 ? TPUC_DTYPE_C128
                                                            : TPUC_DTYPE_C64)
            : a->scalar == TPUC_SCALAR_FLOAT ? c->opts->default_float
            : a->scalar == TPUC_SCALAR_INT   ? TPUC_DTYPE_S64
                                             : TPUC_DTYPE_PRED;
        wrapped = promote_into(wrapped, d);
      }
    }
  }
  tpuc_dtype r = combine(dim, combine(zero, wrapped));
  if (r == TPUC_DTYPE_INVALID) {
    /* PyTorch refuses to promote an 8-bit float with any other type */
    tpuc_dtype f8 = TPUC_DTYPE_INVALID, other = TPUC_DTYPE_INVALID;
    for (size_t k = 0; k < n; k++) {
      const tpuc_op_arg* a = &c->args[which[k]];
      tpuc_dtype d = a->kind == TPUC_OP_ARG_TENSOR ? a->view.dtype
                     : a->kind == TPUC_OP_ARG_SCALAR && a->scalar_is_tensor
                         ? a->scalar_dtype
                         : TPUC_DTYPE_INVALID;
      if (tpuc_dtype_is_float8(d) && f8 == TPUC_DTYPE_INVALID)
        f8 = d;
      else if (d != TPUC_DTYPE_INVALID && other == TPUC_DTYPE_INVALID)
        other = d;
    }
    if (f8 != TPUC_DTYPE_INVALID && other != TPUC_DTYPE_INVALID && f8 != other)
      return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                              "Promotion for Float8 Types is not supported, "
                              "attempted to promote %s and %s",
                              op_torch_dtype_name(f8),
                              op_torch_dtype_name(other));
    return tpuc_status_make(TPUC_UNIMPLEMENTED,
                            "no native type promotion for these operands");
  }
  *out = r;
  return NULL;
}
