/* StableHLO builder: elementwise ops (unary, binary, compare, select,
 * clamp, convert, bitcast_convert). */
#include <stdlib.h>
#include <string.h>

#include "hlo_internal.h"

/* Dtype classes accepted by an op. */
enum {
  K_PRED = 1,
  K_SINT = 2,
  K_UINT = 4,
  K_FLOAT = 8,
  K_COMPLEX = 16,
  K_INT = K_SINT | K_UINT,
  K_FC = K_FLOAT | K_COMPLEX,
  K_NUM = K_INT | K_FC,
  K_ALL = K_NUM | K_PRED,
};

static int dtype_class(tpuc_dtype d) {
  if (d == TPUC_DTYPE_PRED) return K_PRED;
  if (tpuc_dtype_is_signed_int(d)) return K_SINT;
  if (tpuc_dtype_is_unsigned_int(d)) return K_UINT;
  if (tpuc_dtype_is_float(d)) return K_FLOAT;
  if (tpuc_dtype_is_complex(d)) return K_COMPLEX;
  return 0;
}

static const char* class_names(int k) {
  switch (k) {
    case K_FC:
      return "float or complex";
    case K_FLOAT:
      return "float";
    case K_INT:
      return "integer";
    case K_INT | K_PRED:
      return "i1 or integer";
    case K_SINT | K_FC:
      return "signed integer, float or complex";
    case K_NUM:
      return "integer, float or complex";
    case K_INT | K_FLOAT:
      return "integer or float";
    default:
      return "any";
  }
}

static tpuc_dtype complex_part(tpuc_dtype d) {
  if (d == TPUC_DTYPE_C64) return TPUC_DTYPE_F32;
  if (d == TPUC_DTYPE_C128) return TPUC_DTYPE_F64;
  return d;
}

typedef struct {
  const char* name;
  int kinds;
} op_info;

static const op_info kUnary[TPUC_HLO_UNARY_COUNT_] = {
    [TPUC_HLO_ABS] = {"stablehlo.abs", K_SINT | K_FC},
    [TPUC_HLO_NEG] = {"stablehlo.negate", K_NUM},
    [TPUC_HLO_EXP] = {"stablehlo.exponential", K_FC},
    [TPUC_HLO_EXPM1] = {"stablehlo.exponential_minus_one", K_FC},
    [TPUC_HLO_LOG] = {"stablehlo.log", K_FC},
    [TPUC_HLO_LOG1P] = {"stablehlo.log_plus_one", K_FC},
    [TPUC_HLO_SQRT] = {"stablehlo.sqrt", K_FC},
    [TPUC_HLO_RSQRT] = {"stablehlo.rsqrt", K_FC},
    [TPUC_HLO_CBRT] = {"stablehlo.cbrt", K_FC},
    [TPUC_HLO_TANH] = {"stablehlo.tanh", K_FC},
    [TPUC_HLO_LOGISTIC] = {"stablehlo.logistic", K_FC},
    [TPUC_HLO_SINE] = {"stablehlo.sine", K_FC},
    [TPUC_HLO_COSINE] = {"stablehlo.cosine", K_FC},
    [TPUC_HLO_TAN] = {"stablehlo.tan", K_FC},
    [TPUC_HLO_FLOOR] = {"stablehlo.floor", K_FLOAT},
    [TPUC_HLO_CEIL] = {"stablehlo.ceil", K_FLOAT},
    [TPUC_HLO_ROUND_NEAREST_EVEN] = {"stablehlo.round_nearest_even", K_FLOAT},
    [TPUC_HLO_ROUND_NEAREST_AFZ] = {"stablehlo.round_nearest_afz", K_FLOAT},
    [TPUC_HLO_SIGN] = {"stablehlo.sign", K_SINT | K_FC},
    [TPUC_HLO_NOT] = {"stablehlo.not", K_INT | K_PRED},
    [TPUC_HLO_IS_FINITE] = {"stablehlo.is_finite", K_FLOAT},
    [TPUC_HLO_POPCNT] = {"stablehlo.popcnt", K_INT},
    [TPUC_HLO_CLZ] = {"stablehlo.count_leading_zeros", K_INT},
    [TPUC_HLO_REAL] = {"stablehlo.real", K_FC},
    [TPUC_HLO_IMAG] = {"stablehlo.imag", K_FC},
};

static const op_info kBinary[TPUC_HLO_BINARY_COUNT_] = {
    [TPUC_HLO_ADD] = {"stablehlo.add", K_ALL},
    [TPUC_HLO_SUB] = {"stablehlo.subtract", K_NUM},
    [TPUC_HLO_MUL] = {"stablehlo.multiply", K_ALL},
    [TPUC_HLO_DIV] = {"stablehlo.divide", K_NUM},
    [TPUC_HLO_REM] = {"stablehlo.remainder", K_INT | K_FLOAT},
    [TPUC_HLO_POW] = {"stablehlo.power", K_NUM},
    [TPUC_HLO_MAX] = {"stablehlo.maximum", K_ALL},
    [TPUC_HLO_MIN] = {"stablehlo.minimum", K_ALL},
    [TPUC_HLO_AND] = {"stablehlo.and", K_INT | K_PRED},
    [TPUC_HLO_OR] = {"stablehlo.or", K_INT | K_PRED},
    [TPUC_HLO_XOR] = {"stablehlo.xor", K_INT | K_PRED},
    [TPUC_HLO_SHIFT_LEFT] = {"stablehlo.shift_left", K_INT},
    [TPUC_HLO_SHIFT_RIGHT_ARITHMETIC] = {"stablehlo.shift_right_arithmetic",
                                         K_INT},
    [TPUC_HLO_SHIFT_RIGHT_LOGICAL] = {"stablehlo.shift_right_logical", K_INT},
    [TPUC_HLO_ATAN2] = {"stablehlo.atan2", K_FC},
    [TPUC_HLO_COMPLEX] = {"stablehlo.complex", 0},
};

const char* tpuc_hlo_unary_name(tpuc_hlo_unary_op op) {
  if ((int)op < 0 || op >= TPUC_HLO_UNARY_COUNT_) return NULL;
  return kUnary[op].name;
}

const char* tpuc_hlo_binary_name(tpuc_hlo_binary_op op) {
  if ((int)op < 0 || op >= TPUC_HLO_BINARY_COUNT_) return NULL;
  return kBinary[op].name;
}

static tpuc_status* check_kind(const char* op, const char* what, tpuc_dtype d,
                               int kinds) {
  if (dtype_class(d) & kinds) return NULL;
  return hlo_error(op, "%s has dtype %s; expected %s", what,
                   tpuc_dtype_mlir_name(d), class_names(kinds));
}

tpuc_status* tpuc_hlo_unary(tpuc_hlo_fn* fn, tpuc_hlo_unary_op op,
                            tpuc_hlo_value x, tpuc_hlo_value* out) {
  if ((int)op < 0 || op >= TPUC_HLO_UNARY_COUNT_)
    return hlo_error("tpuc_hlo_unary", "unknown unary op %d", (int)op);
  const char* name = kUnary[op].name;
  if (out == NULL) return hlo_error(name, "out is NULL");
  tpuc_hlo_type t;
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "operand", x, &t));
  TPUC_RETURN_IF_ERROR(check_kind(name, "operand", t.dtype, kUnary[op].kinds));
  tpuc_hlo_type r = t;
  if (op == TPUC_HLO_IS_FINITE) r.dtype = TPUC_DTYPE_PRED;
  if (op == TPUC_HLO_ABS || op == TPUC_HLO_REAL || op == TPUC_HLO_IMAG)
    r.dtype = complex_part(t.dtype);
  return hlo_emit1(fn, name, &x, 1, &r, NULL, out);
}

/* Two operands of one type. */
static tpuc_status* same_types(const tpuc_hlo_fn* fn, const char* op,
                               tpuc_hlo_value a, tpuc_hlo_value b,
                               tpuc_hlo_type* ta) {
  tpuc_hlo_type tb;
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, op));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, op, "lhs", a, ta));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, op, "rhs", b, &tb));
  if (!tpuc_hlo_type_equal(ta, &tb)) {
    char s1[256], s2[256];
    return hlo_error(op, "operand types differ: %s vs %s",
                     hlo_type_str(ta, s1, sizeof s1),
                     hlo_type_str(&tb, s2, sizeof s2));
  }
  return NULL;
}

tpuc_status* tpuc_hlo_binary(tpuc_hlo_fn* fn, tpuc_hlo_binary_op op,
                             tpuc_hlo_value a, tpuc_hlo_value b,
                             tpuc_hlo_value* out) {
  if ((int)op < 0 || op >= TPUC_HLO_BINARY_COUNT_)
    return hlo_error("tpuc_hlo_binary", "unknown binary op %d", (int)op);
  const char* name = kBinary[op].name;
  if (out == NULL) return hlo_error(name, "out is NULL");
  tpuc_hlo_type t;
  TPUC_RETURN_IF_ERROR(same_types(fn, name, a, b, &t));
  tpuc_hlo_type r = t;
  if (op == TPUC_HLO_COMPLEX) {
    if (t.dtype == TPUC_DTYPE_F32)
      r.dtype = TPUC_DTYPE_C64;
    else if (t.dtype == TPUC_DTYPE_F64)
      r.dtype = TPUC_DTYPE_C128;
    else
      return hlo_error(name, "operands have dtype %s; expected f32 or f64",
                       tpuc_dtype_mlir_name(t.dtype));
  } else {
    TPUC_RETURN_IF_ERROR(
        check_kind(name, "operands", t.dtype, kBinary[op].kinds));
  }
  tpuc_hlo_value ops[2] = {a, b};
  return hlo_emit1(fn, name, ops, 2, &r, NULL, out);
}

static const char* const kDirNames[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};

static tpuc_status* compare(tpuc_hlo_fn* fn, tpuc_hlo_compare_dir dir,
                            bool total, tpuc_hlo_value a, tpuc_hlo_value b,
                            tpuc_hlo_value* out) {
  const char* name = "stablehlo.compare";
  if (out == NULL) return hlo_error(name, "out is NULL");
  if ((int)dir < 0 || dir > TPUC_HLO_GE)
    return hlo_error(name, "unknown comparison direction %d", (int)dir);
  tpuc_hlo_type t;
  TPUC_RETURN_IF_ERROR(same_types(fn, name, a, b, &t));
  const char* type;
  int k = dtype_class(t.dtype);
  if (total) {
    if (k != K_FLOAT)
      return hlo_error(name, "TOTALORDER needs float operands, got %s",
                       tpuc_dtype_mlir_name(t.dtype));
    type = "TOTALORDER";
  } else if (k == K_FLOAT || k == K_COMPLEX) {
    if (k == K_COMPLEX && dir != TPUC_HLO_EQ && dir != TPUC_HLO_NE)
      return hlo_error(name, "complex operands support only EQ and NE");
    type = "FLOAT";
  } else if (k == K_SINT) {
    type = "SIGNED";
  } else {
    type = "UNSIGNED";
  }
  hlo_sb sb = {0};
  hlo_sb_printf(&sb,
                "comparison_direction = #stablehlo<comparison_direction %s>, "
                "compare_type = #stablehlo<comparison_type %s>",
                kDirNames[dir], type);
  tpuc_hlo_type r = t;
  r.dtype = TPUC_DTYPE_PRED;
  tpuc_hlo_value ops[2] = {a, b};
  return hlo_emit1(fn, name, ops, 2, &r, &sb, out);
}

tpuc_status* tpuc_hlo_compare(tpuc_hlo_fn* fn, tpuc_hlo_compare_dir dir,
                              tpuc_hlo_value a, tpuc_hlo_value b,
                              tpuc_hlo_value* out) {
  return compare(fn, dir, false, a, b, out);
}

tpuc_status* tpuc_hlo_compare_totalorder(tpuc_hlo_fn* fn,
                                         tpuc_hlo_compare_dir dir,
                                         tpuc_hlo_value a, tpuc_hlo_value b,
                                         tpuc_hlo_value* out) {
  return compare(fn, dir, true, a, b, out);
}

tpuc_status* tpuc_hlo_select(tpuc_hlo_fn* fn, tpuc_hlo_value pred,
                             tpuc_hlo_value on_true, tpuc_hlo_value on_false,
                             tpuc_hlo_value* out) {
  const char* name = "stablehlo.select";
  if (out == NULL) return hlo_error(name, "out is NULL");
  tpuc_hlo_type tp, t;
  TPUC_RETURN_IF_ERROR(same_types(fn, name, on_true, on_false, &t));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "pred", pred, &tp));
  if (tp.dtype != TPUC_DTYPE_PRED)
    return hlo_error(name, "pred has dtype %s; expected i1",
                     tpuc_dtype_mlir_name(tp.dtype));
  if (tp.rank != 0 && !hlo_same_shape(&tp, &t))
    return hlo_error(name,
                     "pred must be rank-0 or have the shape of the branches");
  tpuc_hlo_value ops[3] = {pred, on_true, on_false};
  return hlo_emit1(fn, name, ops, 3, &t, NULL, out);
}

tpuc_status* tpuc_hlo_clamp(tpuc_hlo_fn* fn, tpuc_hlo_value lo,
                            tpuc_hlo_value x, tpuc_hlo_value hi,
                            tpuc_hlo_value* out) {
  const char* name = "stablehlo.clamp";
  if (out == NULL) return hlo_error(name, "out is NULL");
  tpuc_hlo_type tl, t, th;
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "min", lo, &tl));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "operand", x, &t));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "max", hi, &th));
  TPUC_RETURN_IF_ERROR(
      check_kind(name, "operand", t.dtype, K_ALL & ~K_COMPLEX));
  const tpuc_hlo_type* bounds[2] = {&tl, &th};
  for (int i = 0; i < 2; ++i) {
    if (bounds[i]->dtype != t.dtype)
      return hlo_error(name, "%s dtype %s differs from operand dtype %s",
                       i ? "max" : "min",
                       tpuc_dtype_mlir_name(bounds[i]->dtype),
                       tpuc_dtype_mlir_name(t.dtype));
    if (bounds[i]->rank != 0 && !hlo_same_shape(bounds[i], &t))
      return hlo_error(name, "%s must be rank-0 or have the operand's shape",
                       i ? "max" : "min");
  }
  tpuc_hlo_value ops[3] = {lo, x, hi};
  return hlo_emit1(fn, name, ops, 3, &t, NULL, out);
}

tpuc_status* tpuc_hlo_convert(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                              tpuc_dtype dtype, tpuc_hlo_value* out) {
  const char* name = "stablehlo.convert";
  if (out == NULL) return hlo_error(name, "out is NULL");
  tpuc_hlo_type t;
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "operand", x, &t));
  if (!tpuc_dtype_is_valid(dtype))
    return hlo_error(name, "invalid target dtype %d", (int)dtype);
  if (tpuc_dtype_is_complex(t.dtype) && !tpuc_dtype_is_complex(dtype))
    return hlo_error(name,
                     "complex to %s is not supported; use real/imag first",
                     tpuc_dtype_mlir_name(dtype));
  tpuc_hlo_type r = t;
  r.dtype = dtype;
  return hlo_emit1(fn, name, &x, 1, &r, NULL, out);
}

tpuc_status* tpuc_hlo_bitcast_convert(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                      tpuc_dtype dtype, tpuc_hlo_value* out) {
  const char* name = "stablehlo.bitcast_convert";
  if (out == NULL) return hlo_error(name, "out is NULL");
  tpuc_hlo_type t;
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "operand", x, &t));
  if (!tpuc_dtype_is_valid(dtype))
    return hlo_error(name, "invalid target dtype %d", (int)dtype);
  int ka = dtype_class(t.dtype), kb = dtype_class(dtype);
  if ((ka | kb) & (K_PRED | K_COMPLEX))
    return hlo_error(name, "i1 and complex dtypes are not supported (%s -> %s)",
                     tpuc_dtype_mlir_name(t.dtype),
                     tpuc_dtype_mlir_name(dtype));
  int wa = hlo_dtype_bits(t.dtype), wb = hlo_dtype_bits(dtype);
  tpuc_hlo_type r = t;
  r.dtype = dtype;
  if (wa > wb) {
    if (t.rank >= TPUC_MAX_RANK)
      return hlo_error(name, "result rank would exceed %d", TPUC_MAX_RANK);
    r.dims[r.rank++] = wa / wb;
  } else if (wa < wb) {
    if (t.rank == 0 || t.dims[t.rank - 1] != wb / wa)
      return hlo_error(name, "%s -> %s needs a trailing operand dim of %d",
                       tpuc_dtype_mlir_name(t.dtype),
                       tpuc_dtype_mlir_name(dtype), wb / wa);
    r.rank--;
  }
  return hlo_emit1(fn, name, &x, 1, &r, NULL, out);
}
