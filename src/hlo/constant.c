/* StableHLO builder: constants (host bytes, splats, host-converted scalars),
 * iota, and the small region helpers built from them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hlo_internal.h"

static const char kHex[] = "0123456789ABCDEF";

/* `dense<"0x...">` of `n` raw bytes. */
static void hex_literal(hlo_sb* sb, const unsigned char* p, size_t n) {
  hlo_sb_append(sb, "dense<\"0x", 9);
  char buf[128];
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    buf[k++] = kHex[p[i] >> 4];
    buf[k++] = kHex[p[i] & 15];
    if (k == sizeof buf) {
      hlo_sb_append(sb, buf, k);
      k = 0;
    }
  }
  hlo_sb_append(sb, buf, k);
  hlo_sb_append(sb, "\">", 2);
}

/* Nested list of booleans following the shape, e.g. [[true], [false]]. */
static void bool_list(hlo_sb* sb, const unsigned char* p, const int64_t* dims,
                      int rank, size_t* pos) {
  if (rank == 0) {
    hlo_sb_printf(sb, "%s", p[*pos] ? "true" : "false");
    ++*pos;
    return;
  }
  hlo_sb_append(sb, "[", 1);
  for (int64_t i = 0; i < dims[0]; ++i) {
    if (i) hlo_sb_append(sb, ", ", 2);
    bool_list(sb, p, dims + 1, rank - 1, pos);
  }
  hlo_sb_append(sb, "]", 1);
}

/* Emits a constant; `splat` means `data` holds one element. */
static tpuc_status* emit_constant(tpuc_hlo_fn* fn, const tpuc_hlo_type* type,
                                  const void* data, bool splat,
                                  tpuc_hlo_value* out) {
  const char* name = "stablehlo.constant";
  int64_t n = tpuc_hlo_type_num_elements(type);
  size_t es = tpuc_dtype_size(type->dtype);
  hlo_sb sb = {0};
  hlo_sb_append(&sb, "value = ", 8);
  const unsigned char* p = data;
  if (n == 0) {
    hlo_sb_append(&sb, "dense<>", 7);
  } else if (type->dtype == TPUC_DTYPE_PRED) {
    if (splat || n == 1) {
      hlo_sb_printf(&sb, "dense<%s>", p[0] ? "true" : "false");
    } else {
      size_t pos = 0;
      hlo_sb_append(&sb, "dense<", 6);
      bool_list(&sb, p, type->dims, type->rank, &pos);
      hlo_sb_append(&sb, ">", 1);
    }
  } else {
    hex_literal(&sb, p, splat ? es : (size_t)n * es);
  }
  hlo_sb_append(&sb, " : ", 3);
  hlo_sb_type(&sb, type);
  return hlo_emit1(fn, name, NULL, 0, type, &sb, out);
}

tpuc_status* tpuc_hlo_constant(tpuc_hlo_fn* fn, const tpuc_hlo_type* type,
                               const void* data, size_t size,
                               tpuc_hlo_value* out) {
  const char* name = "stablehlo.constant";
  if (out == NULL) return hlo_error(name, "out is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  TPUC_RETURN_IF_ERROR(hlo_check_type(name, "result", type));
  int64_t n = tpuc_hlo_type_num_elements(type);
  size_t es = tpuc_dtype_size(type->dtype);
  if ((uint64_t)n > SIZE_MAX / es || size != (size_t)n * es)
    return hlo_error(name, "%zu bytes given for %lld elements of %s", size,
                     (long long)n, tpuc_dtype_mlir_name(type->dtype));
  if (size > 0 && data == NULL) return hlo_error(name, "data is NULL");
  return emit_constant(fn, type, data, false, out);
}

tpuc_status* tpuc_hlo_constant_splat(tpuc_hlo_fn* fn, const tpuc_hlo_type* type,
                                     const void* element, tpuc_hlo_value* out) {
  const char* name = "stablehlo.constant";
  if (out == NULL) return hlo_error(name, "out is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  TPUC_RETURN_IF_ERROR(hlo_check_type(name, "result", type));
  if (element == NULL) return hlo_error(name, "element is NULL");
  return emit_constant(fn, type, element, true, out);
}

/* ---- host conversions -------------------------------------------------- */

static uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static uint16_t f64_to_f16(double d) {
  uint16_t sign = signbit(d) ? 0x8000 : 0;
  double a = fabs(d);
  if (isnan(d)) return 0x7e00;
  if (a >= 65520.0) return sign | 0x7c00; /* rounds to infinity */
  if (a < 0x1p-14) {
    /* subnormal: units of 2^-24, round to nearest even */
    double q = nearbyint(a * 0x1p24);
    return sign | (uint16_t)q; /* q == 1024 gives the smallest normal */
  }
  int e;
  double m = frexp(a, &e);          /* a = m * 2^e, m in [0.5, 1) */
  double q = nearbyint(m * 2048.0); /* 11 significant bits */
  if (q >= 2048.0) {
    q /= 2;
    e++;
  }
  int exp = e - 1 + 15;
  return sign | (uint16_t)((exp << 10) | ((int)q - 1024));
}

/* Rounds to nearest even, as PyTorch's conversions do; a value beyond the
 * largest finite one becomes infinity (IEEE) or NaN (FN, FNUZ). */
static uint8_t f64_to_f8(double d, tpuc_float_format f) {
  int mbits = f.mantissa_bits;
  unsigned sign = signbit(d) ? 0x80u : 0u;
  unsigned nan = f.kind == TPUC_FLOAT_FNUZ ? 0x80u : 0x7fu;
  if (isnan(d)) return (uint8_t)nan;
  double a = fabs(d);
  int emin = 1 - f.bias; /* exponent of the smallest normal */
  unsigned code;
  if (a < ldexp(1.0, emin)) {
    /* subnormal: units of 2^(emin - mbits); reaching 2^mbits units gives
     * the smallest normal's code */
    code = (unsigned)nearbyint(ldexp(a, mbits - emin));
  } else if (isinf(a)) {
    code = 0xffu; /* past every finite code: handled below */
  } else {
    int e;
    double m = frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    e -= 1;
    double q = nearbyint(ldexp(m, mbits + 1)); /* mbits+1 significant */
    if (q >= ldexp(1.0, mbits + 1)) {
      q /= 2;
      e++;
    }
    long biased = (long)e + f.bias;
    code = biased > 0xff
               ? 0xffu
               : (unsigned)((biased << mbits) | ((unsigned)q - (1u << mbits)));
  }
  unsigned top = (1u << f.exponent_bits) - 1; /* all-ones exponent */
  unsigned max_code = 0x7fu; /* FNUZ: every code but 0x80 is a number */
  if (f.kind == TPUC_FLOAT_IEEE) max_code = (top << mbits) - 1;
  if (f.kind == TPUC_FLOAT_FN) max_code = (top << mbits) | ((1u << mbits) - 2);
  if (code > max_code)
    return (uint8_t)(f.kind == TPUC_FLOAT_IEEE ? sign | (top << mbits) : nan);
  if (code == 0 && f.kind == TPUC_FLOAT_FNUZ) return 0; /* no -0 */
  return (uint8_t)(sign | code);
}

static tpuc_status* encode_f64(const char* name, tpuc_dtype d, double v,
                               unsigned char* buf) {
  if (tpuc_dtype_is_float8(d)) {
    tpuc_float_format f;
    tpuc_dtype_float_format(d, &f);
    buf[0] = f64_to_f8(v, f);
    return NULL;
  }
  switch (d) {
    case TPUC_DTYPE_F64:
      memcpy(buf, &v, 8);
      return NULL;
    case TPUC_DTYPE_F32: {
      float f = (float)v;
      memcpy(buf, &f, 4);
      return NULL;
    }
    case TPUC_DTYPE_BF16: {
      /* through f32 can double-round; good enough for splat scalars */
      uint16_t h = f32_to_bf16((float)v);
      memcpy(buf, &h, 2);
      return NULL;
    }
    case TPUC_DTYPE_F16: {
      uint16_t h = f64_to_f16(v);
      memcpy(buf, &h, 2);
      return NULL;
    }
    case TPUC_DTYPE_C64: {
      float f[2] = {(float)v, 0.0f};
      memcpy(buf, f, 8);
      return NULL;
    }
    case TPUC_DTYPE_C128: {
      double f[2] = {v, 0.0};
      memcpy(buf, f, 16);
      return NULL;
    }
    default:
      break;
  }
  if (isnan(v) || v != trunc(v))
    return hlo_error(name, "%g is not an integer value for %s", v,
                     tpuc_dtype_mlir_name(d));
  if (d == TPUC_DTYPE_PRED) {
    if (v != 0 && v != 1) return hlo_error(name, "%g out of range for i1", v);
    buf[0] = v != 0;
    return NULL;
  }
  if (tpuc_dtype_is_unsigned_int(d)) {
    if (v < 0 || v >= 0x1p64)
      return hlo_error(name, "%g out of range for %s", v,
                       tpuc_dtype_mlir_name(d));
    uint64_t u = (uint64_t)v;
    size_t es = tpuc_dtype_size(d);
    if (es < 8 && u >> (es * 8))
      return hlo_error(name, "%g out of range for %s", v,
                       tpuc_dtype_mlir_name(d));
    for (size_t i = 0; i < es; ++i) buf[i] = (unsigned char)(u >> (8 * i));
    return NULL;
  }
  if (v < -0x1p63 || v >= 0x1p63)
    return hlo_error(name, "%g out of range for %s", v,
                     tpuc_dtype_mlir_name(d));
  int64_t s = (int64_t)v;
  size_t es = tpuc_dtype_size(d);
  if (es < 8) {
    int64_t lim = (int64_t)1 << (es * 8 - 1);
    if (s < -lim || s >= lim)
      return hlo_error(name, "%g out of range for %s", v,
                       tpuc_dtype_mlir_name(d));
  }
  uint64_t u = (uint64_t)s;
  for (size_t i = 0; i < es; ++i) buf[i] = (unsigned char)(u >> (8 * i));
  return NULL;
}

tpuc_status* tpuc_hlo_constant_f64(tpuc_hlo_fn* fn, tpuc_dtype dtype,
                                   double value, tpuc_hlo_value* out) {
  const char* name = "stablehlo.constant";
  if (out == NULL) return hlo_error(name, "out is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  if (!tpuc_dtype_is_valid(dtype))
    return hlo_error(name, "invalid dtype %d", (int)dtype);
  unsigned char buf[16];
  TPUC_RETURN_IF_ERROR(encode_f64(name, dtype, value, buf));
  tpuc_hlo_type t = tpuc_hlo_type_scalar(dtype);
  return emit_constant(fn, &t, buf, false, out);
}

tpuc_status* tpuc_hlo_constant_i64(tpuc_hlo_fn* fn, tpuc_dtype dtype,
                                   int64_t value, tpuc_hlo_value* out) {
  const char* name = "stablehlo.constant";
  if (out == NULL) return hlo_error(name, "out is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  if (!tpuc_dtype_is_valid(dtype))
    return hlo_error(name, "invalid dtype %d", (int)dtype);
  unsigned char buf[16];
  size_t es = tpuc_dtype_size(dtype);
  if (hlo_is_int(dtype) && es == 8) {
    if (tpuc_dtype_is_unsigned_int(dtype) && value < 0)
      return hlo_error(name, "%lld out of range for ui64", (long long)value);
    uint64_t u = (uint64_t)value; /* exact, beyond double precision */
    for (size_t i = 0; i < 8; ++i) buf[i] = (unsigned char)(u >> (8 * i));
  } else {
    TPUC_RETURN_IF_ERROR(encode_f64(name, dtype, (double)value, buf));
  }
  tpuc_hlo_type t = tpuc_hlo_type_scalar(dtype);
  return emit_constant(fn, &t, buf, false, out);
}

tpuc_status* tpuc_hlo_iota(tpuc_hlo_fn* fn, const tpuc_hlo_type* type,
                           int64_t dim, tpuc_hlo_value* out) {
  const char* name = "stablehlo.iota";
  if (out == NULL) return hlo_error(name, "out is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  TPUC_RETURN_IF_ERROR(hlo_check_type(name, "result", type));
  if (type->dtype == TPUC_DTYPE_PRED)
    return hlo_error(name, "i1 result is not supported");
  TPUC_RETURN_IF_ERROR(hlo_check_dim(name, "iota_dimension", dim, type->rank));
  hlo_sb sb = {0};
  hlo_sb_printf(&sb, "iota_dimension = %lld : i64", (long long)dim);
  return hlo_emit1(fn, name, NULL, 0, type, &sb, out);
}

/* ---- region helpers ---------------------------------------------------- */

tpuc_status* tpuc_hlo_region_binary(tpuc_hlo_module* module, tpuc_dtype dtype,
                                    tpuc_hlo_binary_op op, tpuc_hlo_fn** out) {
  if (out == NULL) return hlo_error("tpuc_hlo_region_binary", "out is NULL");
  tpuc_hlo_type t[2] = {tpuc_hlo_type_scalar(dtype),
                        tpuc_hlo_type_scalar(dtype)};
  tpuc_hlo_fn* r;
  TPUC_RETURN_IF_ERROR(tpuc_hlo_region_create(module, t, 2, &r));
  tpuc_hlo_value a, b, y;
  TPUC_RETURN_IF_ERROR(tpuc_hlo_get_arg(r, 0, &a));
  TPUC_RETURN_IF_ERROR(tpuc_hlo_get_arg(r, 1, &b));
  TPUC_RETURN_IF_ERROR(tpuc_hlo_binary(r, op, a, b, &y));
  TPUC_RETURN_IF_ERROR(tpuc_hlo_return(r, &y, 1));
  *out = r;
  return NULL;
}

tpuc_status* tpuc_hlo_region_compare(tpuc_hlo_module* module,
                                     const tpuc_dtype* dtypes, size_t n,
                                     tpuc_hlo_compare_dir dir,
                                     tpuc_hlo_fn** out) {
  const char* name = "tpuc_hlo_region_compare";
  if (out == NULL || dtypes == NULL || n == 0)
    return hlo_error(name, "needs out and at least one dtype");
  if (n > 1024) return hlo_error(name, "too many operands (%zu)", n);
  tpuc_hlo_type* t = malloc(2 * n * sizeof *t);
  if (t == NULL) return hlo_oom(name);
  for (size_t i = 0; i < n; ++i)
    t[2 * i] = t[2 * i + 1] = tpuc_hlo_type_scalar(dtypes[i]);
  tpuc_hlo_fn* r;
  tpuc_status* st = tpuc_hlo_region_create(module, t, 2 * n, &r);
  free(t);
  TPUC_RETURN_IF_ERROR(st);
  tpuc_hlo_value a, b, y;
  TPUC_RETURN_IF_ERROR(tpuc_hlo_get_arg(r, 0, &a));
  TPUC_RETURN_IF_ERROR(tpuc_hlo_get_arg(r, 1, &b));
  TPUC_RETURN_IF_ERROR(tpuc_hlo_compare(r, dir, a, b, &y));
  TPUC_RETURN_IF_ERROR(tpuc_hlo_return(r, &y, 1));
  *out = r;
  return NULL;
}
