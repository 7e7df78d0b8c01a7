/* Element type table: sizes, MLIR spellings and float layouts. */
#include "tpuc/dtype.h"

#include <math.h>
#include <string.h>

typedef struct {
  const char* mlir;
  size_t size;
  tpuc_float_format fmt; /* real floats; exponent_bits 0 for others */
} dtype_row;

#define IEEE TPUC_FLOAT_IEEE
#define FN TPUC_FLOAT_FN
#define FNUZ TPUC_FLOAT_FNUZ
#define NONE {0, 0, 0, IEEE} /* not a real float */

static const dtype_row kRows[TPUC_DTYPE_COUNT_] = {
    [TPUC_DTYPE_INVALID] = {"invalid", 0, NONE},
    [TPUC_DTYPE_PRED] = {"i1", 1, NONE},
    [TPUC_DTYPE_S8] = {"i8", 1, NONE},
    [TPUC_DTYPE_S16] = {"i16", 2, NONE},
    [TPUC_DTYPE_S32] = {"i32", 4, NONE},
    [TPUC_DTYPE_S64] = {"i64", 8, NONE},
    [TPUC_DTYPE_U8] = {"ui8", 1, NONE},
    [TPUC_DTYPE_U16] = {"ui16", 2, NONE},
    [TPUC_DTYPE_U32] = {"ui32", 4, NONE},
    [TPUC_DTYPE_U64] = {"ui64", 8, NONE},
    [TPUC_DTYPE_F16] = {"f16", 2, {5, 10, 15, IEEE}},
    [TPUC_DTYPE_BF16] = {"bf16", 2, {8, 7, 127, IEEE}},
    [TPUC_DTYPE_F32] = {"f32", 4, {8, 23, 127, IEEE}},
    [TPUC_DTYPE_F64] = {"f64", 8, {11, 52, 1023, IEEE}},
    [TPUC_DTYPE_C64] = {"complex<f32>", 8, NONE},
    [TPUC_DTYPE_C128] = {"complex<f64>", 16, NONE},
    [TPUC_DTYPE_F8E5M2] = {"f8E5M2", 1, {5, 2, 15, IEEE}},
    [TPUC_DTYPE_F8E4M3FN] = {"f8E4M3FN", 1, {4, 3, 7, FN}},
    [TPUC_DTYPE_F8E5M2FNUZ] = {"f8E5M2FNUZ", 1, {5, 2, 16, FNUZ}},
    [TPUC_DTYPE_F8E4M3FNUZ] = {"f8E4M3FNUZ", 1, {4, 3, 8, FNUZ}},
};

#undef IEEE
#undef FN
#undef FNUZ
#undef NONE

int tpuc_dtype_is_valid(tpuc_dtype d) {
  return d > TPUC_DTYPE_INVALID && d < TPUC_DTYPE_COUNT_;
}

size_t tpuc_dtype_size(tpuc_dtype d) {
  return tpuc_dtype_is_valid(d) ? kRows[d].size : 0;
}

const char* tpuc_dtype_mlir_name(tpuc_dtype d) {
  return tpuc_dtype_is_valid(d) ? kRows[d].mlir : "invalid";
}

tpuc_dtype tpuc_dtype_from_mlir_name(const char* name, size_t len) {
  if (name == NULL) return TPUC_DTYPE_INVALID;
  for (int d = TPUC_DTYPE_PRED; d < TPUC_DTYPE_COUNT_; d++) {
    if (strlen(kRows[d].mlir) == len && memcmp(kRows[d].mlir, name, len) == 0)
      return (tpuc_dtype)d;
  }
  return TPUC_DTYPE_INVALID;
}

int tpuc_dtype_is_float(tpuc_dtype d) {
  return tpuc_dtype_is_valid(d) && kRows[d].fmt.exponent_bits > 0;
}

int tpuc_dtype_is_float8(tpuc_dtype d) {
  return tpuc_dtype_is_float(d) && kRows[d].size == 1;
}

int tpuc_dtype_float_format(tpuc_dtype d, tpuc_float_format* out) {
  if (!tpuc_dtype_is_float(d)) return 0;
  if (out != NULL) *out = kRows[d].fmt;
  return 1;
}

double tpuc_dtype_max_finite(tpuc_dtype d) {
  tpuc_float_format f;
  if (!tpuc_dtype_float_format(d, &f)) return INFINITY;
  /* IEEE keeps the all-ones exponent for infinities and NaNs; FN and FNUZ
   * use it for numbers, FN all but its all-ones mantissa (its NaN). */
  int top = (1 << f.exponent_bits) - 1;
  int biased = f.kind == TPUC_FLOAT_IEEE ? top - 1 : top;
  int lost = f.kind == TPUC_FLOAT_FN ? 1 : 0; /* mantissa codes not numbers */
  double mantissa = 2.0 - ldexp(1.0 + lost, -f.mantissa_bits);
  return ldexp(mantissa, biased - f.bias);
}

int tpuc_dtype_is_complex(tpuc_dtype d) {
  return d == TPUC_DTYPE_C64 || d == TPUC_DTYPE_C128;
}

int tpuc_dtype_is_signed_int(tpuc_dtype d) {
  return d == TPUC_DTYPE_S8 || d == TPUC_DTYPE_S16 || d == TPUC_DTYPE_S32 ||
         d == TPUC_DTYPE_S64;
}

int tpuc_dtype_is_unsigned_int(tpuc_dtype d) {
  return d == TPUC_DTYPE_U8 || d == TPUC_DTYPE_U16 || d == TPUC_DTYPE_U32 ||
         d == TPUC_DTYPE_U64;
}
