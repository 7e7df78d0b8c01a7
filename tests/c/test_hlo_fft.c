/* StableHLO builder: fft (FFT, IFFT, RFFT, IRFFT) runs on the CPU plugin
 * against a host DFT. */
#include <complex.h>
#include <stdint.h>

#include "tpuc/hlo.h"
#include "tpuc_test.h"

/* In-place DFT of `x` (row-major, `dims`, `rank`) along `axis`:
 * y[k] = sum_j x[j] e^(sign 2 pi i j k / n), divided by n when `inverse`. */
static void host_dft_axis(double complex* x, const int64_t* dims, int rank,
                          int axis, int sign, int inverse) {
  int64_t n = dims[axis], inner = 1, outer = 1;
  for (int d = axis + 1; d < rank; ++d) inner *= dims[d];
  for (int d = 0; d < axis; ++d) outer *= dims[d];
  double complex tmp[64];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double complex* base = x + o * n * inner + i;
      for (int64_t k = 0; k < n; ++k) {
        double complex s = 0;
        for (int64_t j = 0; j < n; ++j)
          s += base[j * inner] *
               cexp(sign * 2.0 * M_PI * I * (double)(j * k % n) / (double)n);
        tmp[k] = inverse ? s / (double)n : s;
      }
      for (int64_t k = 0; k < n; ++k) base[k * inner] = tmp[k];
    }
}

/* A c64 FFT over the two trailing dims, a c128 IFFT over one dim, an f32
 * RFFT over two dims and an f64 IRFFT over one dim, in one module. */
static void test_fft_types(void) {
  const int64_t da[3] = {2, 3, 4}, db[2] = {2, 5}, dc[2] = {3, 6},
                dd[2] = {2, 5};
  float a[48];   /* c64 (2,3,4): (re, im) pairs */
  double b[20];  /* c128 (2,5) */
  float cr[18];  /* f32 (3,6) */
  double dv[20]; /* c128 (2,5): IRFFT length 8 */
  for (int i = 0; i < 48; ++i) a[i] = (float)((i * 7) % 11) - 5;
  for (int i = 0; i < 20; ++i) b[i] = (double)((i * 5) % 9) * 0.5 - 2;
  for (int i = 0; i < 18; ++i) cr[i] = (float)((i * 3) % 7) - 3;
  for (int i = 0; i < 20; ++i) dv[i] = (double)((i * 13) % 7) - 3;
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("fft", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type ta = tpuc_hlo_type_make(TPUC_DTYPE_C64, da, 3);
  tpuc_hlo_type tb = tpuc_hlo_type_make(TPUC_DTYPE_C128, db, 2);
  tpuc_hlo_type tc = tpuc_hlo_type_make(TPUC_DTYPE_F32, dc, 2);
  tpuc_hlo_type td = tpuc_hlo_type_make(TPUC_DTYPE_C128, dd, 2);
  tpuc_hlo_value va, vb, vc, vd, y[4];
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &ta, &va));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tb, &vb));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tc, &vc));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &td, &vd));
  TPUC_CHECK_OK(
      tpuc_hlo_fft(fn, va, TPUC_HLO_FFT_FFT, (int64_t[]){3, 4}, 2, &y[0]));
  TPUC_CHECK_OK(
      tpuc_hlo_fft(fn, vb, TPUC_HLO_FFT_IFFT, (int64_t[]){5}, 1, &y[1]));
  TPUC_CHECK_OK(
      tpuc_hlo_fft(fn, vc, TPUC_HLO_FFT_RFFT, (int64_t[]){3, 6}, 2, &y[2]));
  TPUC_CHECK_OK(
      tpuc_hlo_fft(fn, vd, TPUC_HLO_FFT_IRFFT, (int64_t[]){8}, 1, &y[3]));
  tpuc_hlo_type rt;
  TPUC_CHECK_OK(tpuc_hlo_value_type(fn, y[2], &rt));
  TPUC_CHECK(rt.dtype == TPUC_DTYPE_C64 && rt.rank == 2 && rt.dims[0] == 3 &&
             rt.dims[1] == 4);
  TPUC_CHECK_OK(tpuc_hlo_value_type(fn, y[3], &rt));
  TPUC_CHECK(rt.dtype == TPUC_DTYPE_F64 && rt.rank == 2 && rt.dims[0] == 2 &&
             rt.dims[1] == 8);
  TPUC_CHECK_OK(tpuc_hlo_return(fn, y, 4));
  tpuc_test_arg args[4] = {{TPUC_DTYPE_C64, 3, {2, 3, 4}, a},
                           {TPUC_DTYPE_C128, 2, {2, 5}, b},
                           {TPUC_DTYPE_F32, 2, {3, 6}, cr},
                           {TPUC_DTYPE_C128, 2, {2, 5}, dv}};
  void* o[4];
  TPUC_CHECK_OK(tpuc_test_run_module(m, args, 4, o, 4));
  tpuc_hlo_module_destroy(m);
  int bad = 0;
  double complex h[48];
  /* FFT over dims 1 and 2 of a. */
  for (int i = 0; i < 24; ++i) h[i] = a[2 * i] + I * a[2 * i + 1];
  host_dft_axis(h, da, 3, 1, -1, 0);
  host_dft_axis(h, da, 3, 2, -1, 0);
  const float* ya = o[0];
  for (int i = 0; i < 24; ++i)
    bad += cabs(ya[2 * i] + I * ya[2 * i + 1] - h[i]) > 1e-3;
  /* IFFT over dim 1 of b (divides by 5). */
  for (int i = 0; i < 10; ++i) h[i] = b[2 * i] + I * b[2 * i + 1];
  host_dft_axis(h, db, 2, 1, 1, 1);
  const double* yb = o[1];
  for (int i = 0; i < 10; ++i)
    bad += cabs(yb[2 * i] + I * yb[2 * i + 1] - h[i]) > 1e-12;
  /* RFFT over both dims of cr: the first 6/2 + 1 = 4 columns of the full
   * 2-D DFT. */
  for (int i = 0; i < 18; ++i) h[i] = cr[i];
  host_dft_axis(h, dc, 2, 0, -1, 0);
  host_dft_axis(h, dc, 2, 1, -1, 0);
  const float* yc = o[2];
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 4; ++k) {
      int j = r * 4 + k;
      bad += cabs(yc[2 * j] + I * yc[2 * j + 1] - h[r * 6 + k]) > 1e-3;
    }
  /* IRFFT of length 8 over dim 1 of dv: the Hermitian extension of the 5
   * given bins, inverse DFT, real part. */
  const int64_t dfull[2] = {2, 8};
  for (int r = 0; r < 2; ++r)
    for (int k = 0; k < 8; ++k) {
      int src = k <= 4 ? k : 8 - k;
      double complex v = dv[2 * (r * 5 + src)] + I * dv[2 * (r * 5 + src) + 1];
      h[r * 8 + k] = k <= 4 ? v : conj(v);
    }
  host_dft_axis(h, dfull, 2, 1, 1, 1);
  const double* yd = o[3];
  for (int i = 0; i < 16; ++i) bad += fabs(yd[i] - creal(h[i])) > 1e-12;
  tpuc_test_free_all(o, 4);
  TPUC_CHECK(bad == 0);
}

static void test_fft_validation(void) {
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("bad", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type tc =
      tpuc_hlo_type_make(TPUC_DTYPE_C64, (int64_t[]){2, 3, 4, 5}, 4);
  tpuc_hlo_type tr = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){4, 6}, 2);
  tpuc_hlo_type th = tpuc_hlo_type_make(TPUC_DTYPE_F16, (int64_t[]){8}, 1);
  tpuc_hlo_value c, r, h, y;
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tc, &c));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tr, &r));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &th, &h));
  TPUC_CHECK_ERROR(
      tpuc_hlo_fft(fn, c, TPUC_HLO_FFT_FFT, (int64_t[]){3, 4, 5, 6}, 4, &y),
      TPUC_INVALID_ARGUMENT, "1 to 3 entries");
  TPUC_CHECK_ERROR(tpuc_hlo_fft(fn, c, TPUC_HLO_FFT_FFT, NULL, 0, &y),
                   TPUC_INVALID_ARGUMENT, "1 to 3 entries");
  TPUC_CHECK_ERROR(
      tpuc_hlo_fft(fn, c, TPUC_HLO_FFT_FFT, (int64_t[]){3, 5}, 2, &y),
      TPUC_INVALID_ARGUMENT, "operand dim 2 has size 4, FFT expects 3");
  TPUC_CHECK_ERROR(tpuc_hlo_fft(fn, r, TPUC_HLO_FFT_FFT, (int64_t[]){6}, 1, &y),
                   TPUC_INVALID_ARGUMENT, "is not complex");
  TPUC_CHECK_ERROR(
      tpuc_hlo_fft(fn, c, TPUC_HLO_FFT_RFFT, (int64_t[]){5}, 1, &y),
      TPUC_INVALID_ARGUMENT, "not f32 or f64");
  TPUC_CHECK_ERROR(
      tpuc_hlo_fft(fn, h, TPUC_HLO_FFT_RFFT, (int64_t[]){8}, 1, &y),
      TPUC_INVALID_ARGUMENT, "not f32 or f64");
  /* IRFFT operand's last dim must be fft_length / 2 + 1. */
  TPUC_CHECK_ERROR(
      tpuc_hlo_fft(fn, c, TPUC_HLO_FFT_IRFFT, (int64_t[]){5}, 1, &y),
      TPUC_INVALID_ARGUMENT, "expects 3");
  TPUC_CHECK_ERROR(
      tpuc_hlo_fft(fn, c, (tpuc_hlo_fft_type)9, (int64_t[]){5}, 1, &y),
      TPUC_INVALID_ARGUMENT, "unknown fft_type");
  TPUC_CHECK_ERROR(
      tpuc_hlo_fft(fn, r, TPUC_HLO_FFT_RFFT, (int64_t[]){1, 4, 6}, 3, &y),
      TPUC_INVALID_ARGUMENT, "operand rank is 2");
  TPUC_CHECK_ERROR(
      tpuc_hlo_fft(fn, r, TPUC_HLO_FFT_RFFT, (int64_t[]){-6}, 1, &y),
      TPUC_INVALID_ARGUMENT, "out of range");
  /* The valid forms still type-check after the failures. */
  TPUC_CHECK_OK(
      tpuc_hlo_fft(fn, c, TPUC_HLO_FFT_IRFFT, (int64_t[]){4, 8}, 2, &y));
  tpuc_hlo_type rt;
  TPUC_CHECK_OK(tpuc_hlo_value_type(fn, y, &rt));
  TPUC_CHECK(rt.dtype == TPUC_DTYPE_F32 && rt.rank == 4 && rt.dims[2] == 4 &&
             rt.dims[3] == 8);
  tpuc_hlo_module_destroy(m);
}

TPUC_TEST_MAIN(TPUC_TEST(test_fft_types), TPUC_TEST(test_fft_validation))
