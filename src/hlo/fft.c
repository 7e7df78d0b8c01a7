/* StableHLO builder: fft (FFT, IFFT, RFFT, IRFFT over the trailing dims). */
#include <string.h>

#include "hlo_internal.h"

/* The complex dtype whose components are `real`, or INVALID. */
static tpuc_dtype complex_of(tpuc_dtype real) {
  if (real == TPUC_DTYPE_F32) return TPUC_DTYPE_C64;
  if (real == TPUC_DTYPE_F64) return TPUC_DTYPE_C128;
  return TPUC_DTYPE_INVALID;
}

/* The component dtype of a complex dtype, or INVALID. */
static tpuc_dtype real_of(tpuc_dtype cplx) {
  if (cplx == TPUC_DTYPE_C64) return TPUC_DTYPE_F32;
  if (cplx == TPUC_DTYPE_C128) return TPUC_DTYPE_F64;
  return TPUC_DTYPE_INVALID;
}

/* The size of the halved last dim of RFFT's result / IRFFT's operand for
 * a transform of length `len` (0 stays 0, as the spec says). */
static int64_t half_len(int64_t len) { return len == 0 ? 0 : len / 2 + 1; }

tpuc_status* tpuc_hlo_fft(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                          tpuc_hlo_fft_type type, const int64_t* fft_length,
                          size_t n, tpuc_hlo_value* out) {
  const char* name = "stablehlo.fft";
  if (out == NULL) return hlo_error(name, "out is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  const char* tname;
  switch (type) {
    case TPUC_HLO_FFT_FFT:
      tname = "FFT";
      break;
    case TPUC_HLO_FFT_IFFT:
      tname = "IFFT";
      break;
    case TPUC_HLO_FFT_RFFT:
      tname = "RFFT";
      break;
    case TPUC_HLO_FFT_IRFFT:
      tname = "IRFFT";
      break;
    default:
      return hlo_error(name, "unknown fft_type %d", (int)type);
  }
  tpuc_hlo_type t;
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "operand", x, &t));
  if (n < 1 || n > 3)
    return hlo_error(name, "fft_length must have 1 to 3 entries, got %zu", n);
  if (fft_length == NULL) return hlo_error(name, "fft_length is NULL");
  if ((int)n > t.rank)
    return hlo_error(name, "fft_length has %zu entries but operand rank is %d",
                     n, t.rank);
  for (size_t i = 0; i < n; ++i)
    if (fft_length[i] < 0 || fft_length[i] > ((int64_t)1 << 40))
      return hlo_error(name, "fft_length[%zu] = %lld out of range", i,
                       (long long)fft_length[i]);
  /* The operand's dtype by type: complex for FFT / IFFT / IRFFT, f32 or
   * f64 for RFFT. */
  tpuc_hlo_type r = t;
  if (type == TPUC_HLO_FFT_RFFT) {
    r.dtype = complex_of(t.dtype);
    if (r.dtype == TPUC_DTYPE_INVALID)
      return hlo_error(name, "RFFT operand dtype %s is not f32 or f64",
                       tpuc_dtype_mlir_name(t.dtype));
  } else {
    tpuc_dtype re = real_of(t.dtype);
    if (re == TPUC_DTYPE_INVALID)
      return hlo_error(name, "%s operand dtype %s is not complex", tname,
                       tpuc_dtype_mlir_name(t.dtype));
    if (type == TPUC_HLO_FFT_IRFFT) r.dtype = re;
  }
  /* Trailing dims: equal to fft_length, except the last one of RFFT's
   * result and of IRFFT's operand, which is halved. */
  int first = t.rank - (int)n;
  for (size_t i = 0; i < n; ++i) {
    int d = first + (int)i;
    int64_t want = fft_length[i];
    bool last = i + 1 == n;
    if (last && type == TPUC_HLO_FFT_IRFFT) want = half_len(fft_length[i]);
    if (t.dims[d] != want)
      return hlo_error(name,
                       "operand dim %d has size %lld, %s expects %lld from "
                       "fft_length",
                       d, (long long)t.dims[d], tname, (long long)want);
    if (last && type == TPUC_HLO_FFT_RFFT) r.dims[d] = half_len(want);
    if (last && type == TPUC_HLO_FFT_IRFFT) r.dims[d] = fft_length[i];
  }
  hlo_sb sb = {0};
  hlo_sb_i64_array_attr(&sb, "fft_length", fft_length, n);
  hlo_sb_printf(&sb, ", fft_type = #stablehlo<fft_type %s>", tname);
  return hlo_emit1(fn, name, &x, 1, &r, &sb, out);
}
