/* Elementwise lowerings: binary arithmetic, comparisons, unary math, where.
 * PyTorch semantics: result_type promotion, numpy broadcasting, true
 * division, alpha. */
#include <math.h>

#include "ops/ops_internal.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

static bool is_value(const op_ctx* c, int i) {
  return (size_t)i < c->nargs && (c->args[i].kind == TPUC_OP_ARG_TENSOR ||
                                  c->args[i].kind == TPUC_OP_ARG_SCALAR);
}

/* self (op) other [* alpha]: param = tpuc_hlo_binary_op | flags. */
tpuc_status* op_lower_binary(op_ctx* c, int param) {
  tpuc_hlo_binary_op op = (tpuc_hlo_binary_op)(param & 0xff);
  if (!is_value(c, 0) || !is_value(c, 1))
    return tpuc_status_make(TPUC_UNIMPLEMENTED, "unexpected arguments");
  int which[2] = {0, 1};
  tpuc_dtype dt;
  TRY(op_result_type(c, which, 2, &dt));
  tpuc_dtype compute = dt;
  if ((param & OP_BINARY_TRUE_DIV) && !tpuc_dtype_is_float(dt) &&
      !tpuc_dtype_is_complex(dt))
    compute = c->opts->default_float;
  if ((param & OP_BINARY_INT_ONLY) &&
      (tpuc_dtype_is_float(dt) || tpuc_dtype_is_complex(dt)))
    return tpuc_status_make(TPUC_UNIMPLEMENTED, "bitwise op on floats: CPU");
  if ((param & OP_BINARY_FLOAT_ONLY) && !tpuc_dtype_is_float(dt))
    return tpuc_status_make(TPUC_UNIMPLEMENTED, "integer form runs on the CPU");
  /* (true division of bools computes in the default float) */
  if (dt == TPUC_DTYPE_PRED &&
      (op == TPUC_HLO_SUB ||
       (op == TPUC_HLO_DIV && !(param & OP_BINARY_TRUE_DIV))))
    return tpuc_status_make(TPUC_UNIMPLEMENTED,
                            "bool arithmetic runs on the CPU");
  tpuc_hlo_type shape;
  TRY(op_broadcast_shape(c, which, 2, &shape));
  shape.dtype = compute;
  tpuc_hlo_value a, b;
  TRY(op_operand(c, 0, compute, &shape, &a));
  TRY(op_operand(c, 1, compute, &shape, &b));
  if ((param & OP_BINARY_ALPHA) && is_value(c, 2)) {
    /* PyTorch refuses a float alpha for integral results: let the CPU say
     * so. */
    if (!tpuc_dtype_is_float(compute) &&
        c->args[2].kind == TPUC_OP_ARG_SCALAR &&
        c->args[2].scalar == TPUC_SCALAR_FLOAT)
      return tpuc_status_make(TPUC_UNIMPLEMENTED,
                              "float alpha, integral result");
    tpuc_hlo_value alpha;
    TRY(op_operand(c, 2, compute, &shape, &alpha));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, b, alpha, &b));
  }
  c->nouts = 1;
  return tpuc_hlo_binary(c->fn, op, a, b, &c->outs[0]);
}

tpuc_status* op_lower_compare(op_ctx* c, int param) {
  if (!is_value(c, 0) || !is_value(c, 1))
    return tpuc_status_make(TPUC_UNIMPLEMENTED, "unexpected arguments");
  int which[2] = {0, 1};
  tpuc_dtype dt;
  TRY(op_result_type(c, which, 2, &dt));
  tpuc_hlo_type shape;
  TRY(op_broadcast_shape(c, which, 2, &shape));
  tpuc_hlo_value a, b;
  TRY(op_operand(c, 0, dt, &shape, &a));
  TRY(op_operand(c, 1, dt, &shape, &b));
  c->nouts = 1;
  return tpuc_hlo_compare(c->fn, (tpuc_hlo_compare_dir)param, a, b,
                          &c->outs[0]);
}

tpuc_status* op_lower_unary(op_ctx* c, int param) {
  if (c->nargs < 1 || c->args[0].kind != TPUC_OP_ARG_TENSOR)
    return tpuc_status_make(TPUC_UNIMPLEMENTED, "unexpected arguments");
  tpuc_dtype dt = c->types[0].dtype;
  if ((param & OP_UNARY_FLOAT) && !tpuc_dtype_is_float(dt) &&
      !tpuc_dtype_is_complex(dt))
    dt = c->opts->default_float;
  tpuc_hlo_type shape = c->types[0];
  shape.dtype = dt;
  tpuc_hlo_value x;
  TRY(op_operand(c, 0, dt, &shape, &x));
  c->nouts = 1;
  if (param & (OP_UNARY_RELU | OP_UNARY_RECIPROCAL)) {
    /* max(x, 0) or 1 / x, with the constant broadcast to x's shape. */
    bool relu = (param & OP_UNARY_RELU) != 0;
    if (dt == TPUC_DTYPE_PRED)
      return tpuc_status_make(TPUC_UNIMPLEMENTED, "bool runs on the CPU");
    tpuc_hlo_value k, kb;
    TRY(tpuc_hlo_constant_i64(c->fn, dt, relu ? 0 : 1, &k));
    int64_t none[1];
    TRY(tpuc_hlo_broadcast_in_dim(c->fn, k, shape.dims, shape.rank, none, &kb));
    if (relu) return tpuc_hlo_binary(c->fn, TPUC_HLO_MAX, x, kb, &c->outs[0]);
    return tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, kb, x, &c->outs[0]);
  }
  tpuc_hlo_unary_op op = (tpuc_hlo_unary_op)(param & 0xff);
  if ((param & OP_UNARY_INT_IDENTITY) && !tpuc_dtype_is_float(dt)) {
    c->outs[0] = x; /* floor/ceil/round of an integer is itself */
    return NULL;
  }
  if (param & OP_UNARY_INT_ONLY) {
    if (tpuc_dtype_is_float(dt) || tpuc_dtype_is_complex(dt))
      return tpuc_status_make(TPUC_UNIMPLEMENTED, "runs on the CPU for floats");
    return tpuc_hlo_unary(c->fn, op, x, &c->outs[0]);
  }
  /* sign of a bool is itself, of an unsigned int (x != 0); abs of an
   * unsigned int is itself. */
  if (op == TPUC_HLO_SIGN && dt == TPUC_DTYPE_PRED) {
    c->outs[0] = x;
    return NULL;
  }
  if (op == TPUC_HLO_SIGN && tpuc_dtype_is_unsigned_int(dt)) {
    tpuc_hlo_value zero, nz;
    TRY(op_const(c, dt, 0.0, &shape, &zero));
    TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_NE, x, zero, &nz));
    return tpuc_hlo_convert(c->fn, nz, dt, &c->outs[0]);
  }
  if (op == TPUC_HLO_ABS && tpuc_dtype_is_unsigned_int(dt)) {
    c->outs[0] = x;
    return NULL;
  }
  if (dt == TPUC_DTYPE_PRED)
    return tpuc_status_make(TPUC_UNIMPLEMENTED,
                            "runs on the CPU for this dtype");
  if (op == TPUC_HLO_SIGN && tpuc_dtype_is_float(dt)) {
    /* PyTorch's sign(NaN) is 0 (HLO's is NaN). */
    tpuc_hlo_value sg, nan, zero;
    TRY(tpuc_hlo_unary(c->fn, op, x, &sg));
    TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_NE, x, x, &nan));
    TRY(op_const(c, dt, 0.0, &shape, &zero));
    return tpuc_hlo_select(c->fn, nan, zero, sg, &c->outs[0]);
  }
  return tpuc_hlo_unary(c->fn, op, x, &c->outs[0]);
}

/* where(condition, self, other) */
tpuc_status* op_lower_where(op_ctx* c, int param) {
  (void)param;
  if (c->nargs < 3 || c->args[0].kind != TPUC_OP_ARG_TENSOR ||
      c->args[0].view.dtype != TPUC_DTYPE_PRED || !is_value(c, 1) ||
      !is_value(c, 2))
    return tpuc_status_make(TPUC_UNIMPLEMENTED, "unexpected arguments");
  int vals[2] = {1, 2}, all[3] = {0, 1, 2};
  tpuc_dtype dt;
  TRY(op_result_type(c, vals, 2, &dt));
  tpuc_hlo_type shape;
  TRY(op_broadcast_shape(c, all, 3, &shape));
  tpuc_hlo_value p, a, b;
  TRY(op_operand(c, 0, TPUC_DTYPE_PRED, &shape, &p));
  TRY(op_operand(c, 1, dt, &shape, &a));
  TRY(op_operand(c, 2, dt, &shape, &b));
  c->nouts = 1;
  return tpuc_hlo_select(c->fn, p, a, b, &c->outs[0]);
}

/* fill_(self, value) / zero_(self) (param 1): self's shape and dtype, every
 * element the value converted as PyTorch converts it. */
tpuc_status* op_lower_fill(op_ctx* c, int param) {
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  tpuc_hlo_type shape = c->types[0];
  tpuc_dtype dt = shape.dtype;
  c->nouts = 1;
  if (param == 1) return op_const(c, dt, 0, &shape, &c->outs[0]);
  if (!op_is_value(c, 1)) return op_unimpl("unexpected fill value");
  if (c->types[1].rank != 0)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "fill_ only supports 0-dimension value tensor but "
                            "got tensor with %d dimensions.",
                            c->types[1].rank);
  tpuc_dtype vt = c->types[1].dtype;
  if (tpuc_dtype_is_float(dt) && vt != TPUC_DTYPE_PRED)
    op_host_check_float_fits(c, 1, dt); /* a scalar: checked on the host */
  if (tpuc_dtype_is_float(vt) && !tpuc_dtype_is_float(dt) &&
      !tpuc_dtype_is_complex(dt) && dt != TPUC_DTYPE_PRED) {
    /* A float into an integer tensor must fit (NaN and inf do not), or the
     * CPU refuses it. */
    double lo, hi;
    int bits = (int)tpuc_dtype_size(dt) * 8;
    if (tpuc_dtype_is_unsigned_int(dt)) {
      lo = -1.0;
      hi = bits == 64 ? 18446744073709551616.0 : (double)((1ULL << bits));
    } else {
      lo = -((bits == 64) ? 9223372036854775808.0
                          : (double)(1ULL << (bits - 1))) - 1.0;
      hi = (bits == 64) ? 9223372036854775808.0 : (double)(1ULL << (bits - 1));
    }
    static const char kMsg[] =
        "value cannot be converted to the tensor's integer type without "
        "overflow";
    if (op_host_check_add(c, 1, lo, false, hi, false, TPUC_INVALID_ARGUMENT,
                          kMsg))
      return op_scalar(c, 1, dt, &shape, &c->outs[0]);
    tpuc_hlo_value v = c->vals[1], l, h, ok1, ok2, ok, bad;
    if (vt != TPUC_DTYPE_F64) TRY(tpuc_hlo_convert(c->fn, v, TPUC_DTYPE_F64, &v));
    TRY(op_const(c, TPUC_DTYPE_F64, lo, NULL, &l));
    TRY(op_const(c, TPUC_DTYPE_F64, hi, NULL, &h));
    TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_GT, v, l, &ok1));
    TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_LT, v, h, &ok2));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, ok1, ok2, &ok));
    TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NOT, ok, &bad));
    c->has_check = true;
    c->check = bad;
    c->check_code = TPUC_INVALID_ARGUMENT;
    c->check_msg = kMsg;
  }
  return op_scalar(c, 1, dt, &shape, &c->outs[0]);
}

/* The value of scalar argument i on the host (arange's values are part of
 * its program key). */
static double host_scalar(const op_ctx* c, int i, bool* is_float) {
  const tpuc_op_arg* a = &c->args[i];
  *is_float = a->scalar == TPUC_SCALAR_FLOAT;
  return *is_float ? a->f : (double)a->i;
}

/* arange(end) (param 1), arange.start(start, end) (param 2),
 * arange.start_step(start, end, step) (param 3), then dtype: start + i *
 * step for i < ceil((end - start) / step), computed in double (int64 for
 * integer results) and converted, as the CPU kernel does. */
tpuc_status* op_lower_arange(op_ctx* c, int param) {
  int nvals = param;
  for (int i = 0; i < nvals; i++)
    if (c->args[i].kind != TPUC_OP_ARG_SCALAR || c->args[i].scalar_is_tensor)
      return op_unimpl("unexpected arguments");
  bool f0 = false, f1 = false, f2 = false;
  double start = 0, end, step = 1;
  if (nvals == 1) {
    end = host_scalar(c, 0, &f1);
  } else {
    start = host_scalar(c, 0, &f0);
    end = host_scalar(c, 1, &f1);
    if (nvals == 3) step = host_scalar(c, 2, &f2);
  }
  tpuc_dtype dt = TPUC_DTYPE_INVALID;
  if (c->nargs > (size_t)nvals && c->args[nvals].kind == TPUC_OP_ARG_DTYPE)
    dt = c->args[nvals].dtype;
  if (dt == TPUC_DTYPE_INVALID)
    dt = (f0 || f1 || f2) ? c->opts->default_float : TPUC_DTYPE_S64;
  if (tpuc_dtype_is_complex(dt) || dt == TPUC_DTYPE_PRED)
    return op_unimpl("arange of this dtype: the CPU says what it does");
  if (step == 0)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "step must be nonzero");
  if (!(start == start && end == end && step == step) ||
      start - start != 0 || end - end != 0)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "unsupported range: %g -> %g", start, end);
  if ((step > 0 && end < start) || (step < 0 && end > start))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "upper bound and larger bound inconsistent with "
                            "step sign");
  double span = ceil((end - start) / step);
  if (span > 1e12) return op_unimpl("huge arange: the CPU");
  int64_t n = (int64_t)span;
  bool integral = !tpuc_dtype_is_float(dt);
  tpuc_dtype ct = integral ? TPUC_DTYPE_S64 : TPUC_DTYPE_F64;
  tpuc_hlo_type t = tpuc_hlo_type_make(ct, &n, 1);
  tpuc_hlo_value idx, st, sp, v;
  TRY(tpuc_hlo_iota(c->fn, &t, 0, &idx));
  if (integral && (f0 || f2)) return op_unimpl("float bounds, integer result");
  if (nvals == 1) {
    TRY(op_const(c, ct, 0, &t, &st));
  } else {
    TRY(op_scalar(c, 0, ct, &t, &st));
  }
  if (nvals == 3) {
    TRY(op_scalar(c, 2, ct, &t, &sp));
  } else {
    TRY(op_const(c, ct, 1, &t, &sp));
  }
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, idx, sp, &v));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, v, st, &v));
  c->nouts = 1;
  return tpuc_hlo_convert(c->fn, v, dt, &c->outs[0]);
}

/* linspace(start, end, steps, dtype) (param 0) and logspace(start, end,
 * steps, base, dtype) (param 1): element i of `steps` is start + step * i
 * in the first half and end - step * (steps - 1 - i) in the second, with
 * step = (end - start) / (steps - 1), as PyTorch's kernels compute it
 * (so both ends are exact: CUDA's formula; the CPU's vector loop uses
 * the first for whole vectors across the middle), and logspace raises
 * base to it. Floats compute in their own precision (f32 for half
 * floats). steps == 1 gives start (base ** start). */
tpuc_status* op_lower_linspace(op_ctx* c, int param) {
  int di = param ? 4 : 3;
  for (int i = 0; i < 2; i++)
    if (c->args[i].kind != TPUC_OP_ARG_SCALAR || c->args[i].scalar_is_tensor)
      return op_unimpl("unexpected arguments");
  int64_t n = 0;
  TRY(op_int_arg(c, 2, 0, &n));
  if (n < 0)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "number of steps must be non-negative");
  tpuc_dtype dt = TPUC_DTYPE_INVALID;
  if (c->nargs > (size_t)di && c->args[di].kind == TPUC_OP_ARG_DTYPE)
    dt = c->args[di].dtype;
  if (dt == TPUC_DTYPE_INVALID) dt = c->opts->default_float;
  if (!tpuc_dtype_is_float(dt) || tpuc_dtype_is_float8(dt))
    /* Integer results: c10 converts each bound with its own wrapping and
     * overflow rules (-3 becomes 253 in uint8, -3.5 raises), read on the
     * host; the CPU applies them. */
    return op_unimpl("this dtype: the CPU says what it does");
  /* c10's overflow error for a bound the dtype cannot hold. */
  op_host_check_float_fits(c, 0, dt);
  op_host_check_float_fits(c, 1, dt);
  tpuc_dtype ct = dt == TPUC_DTYPE_F64 ? TPUC_DTYPE_F64 : TPUC_DTYPE_F32;
  tpuc_hlo_type t = tpuc_hlo_type_make(ct, &n, 1);
  tpuc_hlo_value start, end, v;
  /* The ends rounded to the result's dtype first, as the kernels do. */
  TRY(op_scalar(c, 0, dt, &t, &start));
  TRY(op_scalar(c, 1, dt, &t, &end));
  TRY(tpuc_hlo_convert(c->fn, start, ct, &start));
  TRY(tpuc_hlo_convert(c->fn, end, ct, &end));
  if (n <= 1) {
    v = start;
  } else {
    tpuc_hlo_type it = tpuc_hlo_type_make(TPUC_DTYPE_S64, &n, 1);
    tpuc_hlo_value idx, rev, lo_i, hi_i, denom, step, half, first, lo, hi;
    TRY(tpuc_hlo_iota(c->fn, &it, 0, &idx));
    TRY(op_const(c, TPUC_DTYPE_S64, (double)(n - 1), &it, &rev));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, rev, idx, &rev));
    TRY(tpuc_hlo_convert(c->fn, idx, ct, &lo_i));
    TRY(tpuc_hlo_convert(c->fn, rev, ct, &hi_i));
    TRY(op_const(c, ct, (double)(n - 1), &t, &denom));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, end, start, &step));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, step, denom, &step));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, step, lo_i, &lo));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, start, lo, &lo));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, step, hi_i, &hi));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_SUB, end, hi, &hi));
    TRY(op_const(c, TPUC_DTYPE_S64, (double)(n / 2), &it, &half));
    TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_LT, idx, half, &first));
    TRY(tpuc_hlo_select(c->fn, first, lo, hi, &v));
  }
  if (param) {
    tpuc_hlo_value base;
    TRY(op_scalar(c, 3, ct, &t, &base));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_POW, base, v, &v));
  }
  c->nouts = 1;
  return tpuc_hlo_convert(c->fn, v, dt, &c->outs[0]);
}

/* complex(real, imag) (param 0) and polar(abs, angle) (param 1): a
 * complex tensor from two real ones of the same float dtype (f32 or f64;
 * the CPU says why for others), broadcast together; polar is abs *
 * (cos(angle) + i sin(angle)). */
tpuc_status* op_lower_complex(op_ctx* c, int param) {
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1))
    return op_unimpl("unexpected arguments");
  tpuc_dtype dt = c->types[0].dtype;
  if ((dt != TPUC_DTYPE_F32 && dt != TPUC_DTYPE_F64) ||
      c->types[1].dtype != dt)
    return op_unimpl("complex of these dtypes: the CPU says why");
  static const int which[2] = {0, 1};
  tpuc_hlo_type shape;
  TRY(op_broadcast_shape(c, which, 2, &shape));
  shape.dtype = dt;
  tpuc_hlo_value a, b;
  TRY(op_operand(c, 0, dt, &shape, &a));
  TRY(op_operand(c, 1, dt, &shape, &b));
  if (param) {
    tpuc_hlo_value cs, sn;
    TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_COSINE, b, &cs));
    TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_SINE, b, &sn));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, a, sn, &b));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, a, cs, &a));
  }
  c->nouts = 1;
  return tpuc_hlo_binary(c->fn, TPUC_HLO_COMPLEX, a, b, &c->outs[0]);
}

/* conj_physical / _conj_physical: complex conjugate (reals unchanged). */
tpuc_status* op_lower_conj(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  c->nouts = 1;
  tpuc_hlo_value x = c->vals[0];
  if (!tpuc_dtype_is_complex(c->types[0].dtype)) {
    c->outs[0] = x;
    return NULL;
  }
  tpuc_hlo_value re, im;
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_REAL, x, &re));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_IMAG, x, &im));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NEG, im, &im));
  return tpuc_hlo_binary(c->fn, TPUC_HLO_COMPLEX, re, im, &c->outs[0]);
}
