/* FFTs: _fft_r2c, _fft_c2r, _fft_c2c over stablehlo.fft.
 *
 * stablehlo.fft transforms the trailing 1 to 3 dims of its operand, so the
 * requested dims are transposed to the end (and back), in chunks of up to
 * three. PyTorch's kernels never normalize by themselves: the caller picks
 * `normalization` (0 none, 1 by 1/sqrt(n), 2 by 1/n, n the product of the
 * signal sizes) for either direction; XLA's IFFT and IRFFT divide by n,
 * which the scale here undoes. Calls the CPU rejects in its own way (empty
 * or repeated or negative dims, a c2r input of the wrong size, empty
 * tensors, half floats) run there. */
#include <math.h>

#include "ops/ops_internal.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

/* The dim list of argument 1: non-empty, distinct, in [0, rank) (PyTorch's
 * kernels take the wrapped dims of their public callers). */
static tpuc_status* fft_dims(const op_ctx* c, int64_t* dims, size_t* n) {
  if (c->nargs < 4 || !op_is_tensor(c, 0) ||
      c->args[1].kind != TPUC_OP_ARG_INT_LIST)
    return op_unimpl("unexpected fft arguments");
  const tpuc_hlo_type* t = &c->types[0];
  const tpuc_op_arg* a = &c->args[1];
  if (a->list_len == 0 || a->list_len > (size_t)t->rank)
    return op_unimpl("fft dims: the CPU reports the error");
  bool seen[TPUC_MAX_RANK] = {false};
  for (size_t k = 0; k < a->list_len; k++) {
    int64_t d = a->list[k];
    if (d < 0 || d >= t->rank || seen[d])
      return op_unimpl("fft dims: the CPU reports the error");
    seen[d] = true;
    dims[k] = d;
  }
  *n = a->list_len;
  /* Empty tensors: the CPU kernels fail or not depending on where the
   * zero is; let them say. */
  if (tpuc_hlo_type_num_elements(t) == 0)
    return op_unimpl("empty fft input: CPU");
  return NULL;
}

/* The `normalization` argument (2): 0 none, 1 by 1/sqrt(n), 2 by 1/n
 * (PyTorch's fft_norm_mode). */
static tpuc_status* fft_mode(const op_ctx* c, int64_t* mode) {
  TRY(op_int_arg(c, 2, 0, mode));
  if (*mode < 0 || *mode > 2) return op_unimpl("unknown fft normalization");
  return NULL;
}

/* The factor a forward transform of `count` points is multiplied by. */
static double forward_factor(int64_t mode, double count) {
  return mode == 0 ? 1.0 : mode == 1 ? 1.0 / sqrt(count) : 1.0 / count;
}

/* The same for an inverse one done by XLA, which already divided by
 * count (PyTorch's unnormalized inverse does not). */
static double inverse_factor(int64_t mode, double count) {
  return mode == 0 ? count : mode == 1 ? sqrt(count) : 1.0;
}

/* x * f (f a real factor; nothing when it is 1). */
static tpuc_status* fft_scale(op_ctx* c, tpuc_hlo_value x, double f,
                              tpuc_hlo_value* out) {
  *out = x;
  if (f == 1.0) return NULL;
  tpuc_hlo_type t;
  TRY(tpuc_hlo_value_type(c->fn, x, &t));
  tpuc_hlo_value k;
  TRY(op_const(c, t.dtype, f, &t, &k));
  return tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, x, k, out);
}

/* stablehlo.fft of `type` over dims `sel` (1 to 3, in this order, the
 * last one innermost) of x: those dims are moved to the end and back.
 * For IRFFT, `last_len` is the result's size along the last of them. */
static tpuc_status* fft_over(op_ctx* c, tpuc_hlo_value x,
                             tpuc_hlo_fft_type type, const int64_t* sel,
                             size_t n, int64_t last_len, tpuc_hlo_value* out) {
  tpuc_hlo_type t;
  TRY(tpuc_hlo_value_type(c->fn, x, &t));
  bool picked[TPUC_MAX_RANK] = {false};
  for (size_t k = 0; k < n; k++) picked[sel[k]] = true;
  int64_t perm[TPUC_MAX_RANK], inv[TPUC_MAX_RANK], len[3];
  int np = 0;
  for (int d = 0; d < t.rank; d++)
    if (!picked[d]) perm[np++] = d;
  for (size_t k = 0; k < n; k++) {
    perm[np++] = sel[k];
    len[k] = t.dims[sel[k]];
  }
  if (type == TPUC_HLO_FFT_IRFFT) len[n - 1] = last_len;
  bool identity = true;
  for (int d = 0; d < t.rank; d++) {
    inv[perm[d]] = d;
    identity = identity && perm[d] == d;
  }
  tpuc_hlo_value y = x;
  if (!identity) TRY(tpuc_hlo_transpose(c->fn, y, perm, &y));
  TRY(tpuc_hlo_fft(c->fn, y, type, len, n, &y));
  if (!identity) TRY(tpuc_hlo_transpose(c->fn, y, inv, &y));
  *out = y;
  return NULL;
}

/* Complex-to-complex transforms over dims[0..n), up to three at a time;
 * `count` gets the product of their sizes. */
static tpuc_status* fft_c2c_dims(op_ctx* c, tpuc_hlo_value x, bool forward,
                                 const int64_t* dims, size_t n,
                                 tpuc_hlo_value* out, double* count) {
  tpuc_hlo_type t;
  TRY(tpuc_hlo_value_type(c->fn, x, &t));
  *count = 1.0;
  for (size_t k = 0; k < n; k++) *count *= (double)t.dims[dims[k]];
  tpuc_hlo_fft_type type = forward ? TPUC_HLO_FFT_FFT : TPUC_HLO_FFT_IFFT;
  for (size_t k = 0; k < n; k += 3) {
    size_t m = n - k < 3 ? n - k : 3;
    TRY(fft_over(c, x, type, dims + k, m, 0, &x));
  }
  *out = x;
  return NULL;
}

static bool is_complex_io(tpuc_dtype d) {
  return d == TPUC_DTYPE_C64 || d == TPUC_DTYPE_C128;
}

/* _fft_c2c(self, dim[], normalization, forward) */
static tpuc_status* lower_c2c(op_ctx* c, int param) {
  (void)param;
  int64_t dims[TPUC_MAX_RANK];
  size_t n = 0;
  TRY(fft_dims(c, dims, &n));
  if (!is_complex_io(c->types[0].dtype))
    return op_unimpl("_fft_c2c of this dtype: CPU");
  int64_t forward = 1, mode = 0;
  TRY(op_int_arg(c, 3, 1, &forward));
  TRY(fft_mode(c, &mode));
  tpuc_hlo_value y;
  double count;
  TRY(fft_c2c_dims(c, c->vals[0], forward != 0, dims, n, &y, &count));
  double f =
      forward ? forward_factor(mode, count) : inverse_factor(mode, count);
  TRY(fft_scale(c, y, f, &y));
  c->outs[0] = y;
  c->nouts = 1;
  return NULL;
}

/* _fft_r2c(self, dim[], normalization, onesided): the last listed dim is
 * halved (n/2 + 1 bins) when onesided; otherwise the full spectrum, as a
 * complex-to-complex transform of the real input. */
static tpuc_status* lower_r2c(op_ctx* c, int param) {
  (void)param;
  int64_t dims[TPUC_MAX_RANK];
  size_t n = 0;
  TRY(fft_dims(c, dims, &n));
  tpuc_dtype dt = c->types[0].dtype;
  if (dt != TPUC_DTYPE_F32 && dt != TPUC_DTYPE_F64)
    return op_unimpl("_fft_r2c of this dtype: CPU");
  int64_t onesided = 1, mode = 0;
  TRY(op_int_arg(c, 3, 1, &onesided));
  TRY(fft_mode(c, &mode));
  tpuc_hlo_value y;
  double count = 1.0;
  if (!onesided) {
    tpuc_dtype cd = dt == TPUC_DTYPE_F32 ? TPUC_DTYPE_C64 : TPUC_DTYPE_C128;
    TRY(tpuc_hlo_convert(c->fn, c->vals[0], cd, &y));
    TRY(fft_c2c_dims(c, y, true, dims, n, &y, &count));
  } else {
    /* RFFT over the last (up to) three dims, then forward c2c over the
     * rest: the real-to-complex step must come first. */
    size_t m = n < 3 ? n : 3;
    for (size_t k = n - m; k < n; k++)
      count *= (double)c->types[0].dims[dims[k]];
    TRY(fft_over(c, c->vals[0], TPUC_HLO_FFT_RFFT, dims + n - m, m, 0, &y));
    double rest;
    TRY(fft_c2c_dims(c, y, true, dims, n - m, &y, &rest));
    count *= rest;
  }
  TRY(fft_scale(c, y, forward_factor(mode, count), &y));
  c->outs[0] = y;
  c->nouts = 1;
  return NULL;
}

/* _fft_c2r(self, dim[], normalization, last_dim_size): inverse c2c over
 * all but the last listed dim, then IRFFT with the last (up to three)
 * dims; the input's last listed dim holds last_dim_size/2 + 1 bins. */
static tpuc_status* lower_c2r(op_ctx* c, int param) {
  (void)param;
  int64_t dims[TPUC_MAX_RANK];
  size_t n = 0;
  TRY(fft_dims(c, dims, &n));
  const tpuc_hlo_type* t = &c->types[0];
  if (!is_complex_io(t->dtype)) return op_unimpl("_fft_c2r of this dtype: CPU");
  int64_t last = 0, mode = 0;
  TRY(op_int_arg(c, 3, 0, &last));
  TRY(fft_mode(c, &mode));
  if (last < 1 || t->dims[dims[n - 1]] != last / 2 + 1)
    return op_unimpl("_fft_c2r sizes: the CPU reports the error");
  size_t m = n < 3 ? n : 3;
  tpuc_hlo_value y;
  double count;
  /* The leading inverse c2c steps: XLA's IFFT divides by their sizes. */
  TRY(fft_c2c_dims(c, c->vals[0], false, dims, n - m, &y, &count));
  for (size_t k = n - m; k + 1 < n; k++) count *= (double)t->dims[dims[k]];
  count *= (double)last;
  TRY(fft_over(c, y, TPUC_HLO_FFT_IRFFT, dims + n - m, m, last, &y));
  TRY(fft_scale(c, y, inverse_factor(mode, count), &y));
  c->outs[0] = y;
  c->nouts = 1;
  return NULL;
}

const op_entry op_table_fft[] = {
    {"aten::_fft_r2c", lower_r2c, 0},
    {"aten::_fft_r2c.out", lower_r2c, 0},
    {"aten::_fft_c2r", lower_c2r, 0},
    {"aten::_fft_c2r.out", lower_c2r, 0},
    {"aten::_fft_c2c", lower_c2c, 0},
    {"aten::_fft_c2c.out", lower_c2c, 0},
    {NULL, NULL, 0},
};
