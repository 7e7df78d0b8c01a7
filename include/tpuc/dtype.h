/* Element types understood by tpuc, with their StableHLO spelling. */
#ifndef TPUC_DTYPE_H_
#define TPUC_DTYPE_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tpuc_dtype {
  TPUC_DTYPE_INVALID = 0,
  TPUC_DTYPE_PRED, /* i1, stored as one byte */
  TPUC_DTYPE_S8,
  TPUC_DTYPE_S16,
  TPUC_DTYPE_S32,
  TPUC_DTYPE_S64,
  TPUC_DTYPE_U8,
  TPUC_DTYPE_U16,
  TPUC_DTYPE_U32,
  TPUC_DTYPE_U64,
  TPUC_DTYPE_F16,
  TPUC_DTYPE_BF16,
  TPUC_DTYPE_F32,
  TPUC_DTYPE_F64,
  TPUC_DTYPE_C64,
  TPUC_DTYPE_C128,
  /* 8-bit floats (PyTorch's float8_*): e<exponent bits>m<mantissa bits>;
   * FN: finite only (no infinities, one NaN per sign); FNUZ: finite, no
   * negative zero, the NaN is 0x80. */
  TPUC_DTYPE_F8E5M2,
  TPUC_DTYPE_F8E4M3FN,
  TPUC_DTYPE_F8E5M2FNUZ,
  TPUC_DTYPE_F8E4M3FNUZ,
  TPUC_DTYPE_COUNT_
} tpuc_dtype;

/* Size of one element in bytes; 0 for an invalid dtype. */
size_t tpuc_dtype_size(tpuc_dtype dtype);
/* MLIR element type spelling: "i1", "i32", "ui8", "bf16", "complex<f32>".
 * "invalid" for an invalid dtype. */
const char* tpuc_dtype_mlir_name(tpuc_dtype dtype);
/* Parses an MLIR element type spelling; TPUC_DTYPE_INVALID if unknown.
 * `len` is the length of `name` (it need not be NUL-terminated). */
tpuc_dtype tpuc_dtype_from_mlir_name(const char* name, size_t len);
/* f16, bf16, f32, f64 and the 8-bit floats */
int tpuc_dtype_is_float(tpuc_dtype dtype);
int tpuc_dtype_is_float8(tpuc_dtype dtype);
int tpuc_dtype_is_complex(tpuc_dtype dtype); /* c64, c128 */
int tpuc_dtype_is_signed_int(tpuc_dtype dtype);
int tpuc_dtype_is_unsigned_int(tpuc_dtype dtype);
int tpuc_dtype_is_valid(tpuc_dtype dtype);

/* How a real float dtype spells what is not a finite number: IEEE (f16,
 * bf16, f32, f64, e5m2) has infinities and NaNs in its all-ones exponent;
 * FN (e4m3fn) has no infinities and its NaN is all ones; FNUZ has neither
 * infinities nor -0, and its one NaN is the sign bit alone (0x80). */
typedef enum {
  TPUC_FLOAT_IEEE,
  TPUC_FLOAT_FN,
  TPUC_FLOAT_FNUZ
} tpuc_float_kind;

typedef struct tpuc_float_format {
  int exponent_bits, mantissa_bits, bias;
  tpuc_float_kind kind;
} tpuc_float_format;

/* The layout of a real float dtype (tpuc_dtype_is_float); 0 for any other
 * dtype. */
int tpuc_dtype_float_format(tpuc_dtype dtype, tpuc_float_format* out);
/* The largest finite value of a real float dtype; INFINITY for others. */
double tpuc_dtype_max_finite(tpuc_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif /* TPUC_DTYPE_H_ */
