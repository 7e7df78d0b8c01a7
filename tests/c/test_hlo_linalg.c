/* StableHLO builder: dot_general and convolution run on the CPU plugin
 * against host results. */
#include <stdint.h>

#include "tpuc/hlo.h"
#include "tpuc_test.h"

static uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static void test_dot_general(void) {
  /* batched matmul: a (2,3,4) x b (2,4,5) -> (2,3,5), plus a plain matmul
   * with rhs transposed: a[0] (3,4) x c (5,4) contracting (1,1) -> (3,5),
   * plus a bf16 x bf16 -> f32 dot of vectors. */
  float a[24], b[40];
  for (int i = 0; i < 24; ++i) a[i] = (float)(i % 7) - 3;
  for (int i = 0; i < 40; ++i) b[i] = (float)(i % 5) * 0.5f - 1;
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("dot", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type ta =
      tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){2, 3, 4}, 3);
  tpuc_hlo_type tb =
      tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){2, 4, 5}, 3);
  tpuc_hlo_type tc = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){5, 4}, 2);
  tpuc_hlo_type th = tpuc_hlo_type_make(TPUC_DTYPE_BF16, (int64_t[]){8}, 1);
  tpuc_hlo_value va, vb, vc, vh, a0, y[3];
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &ta, &va));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tb, &vb));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tc, &vc));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &th, &vh));
  tpuc_hlo_dot_dims d1 = {(int64_t[]){0},     (int64_t[]){0},         1,
                          (int64_t[]){2},     (int64_t[]){1},         1,
                          TPUC_DTYPE_INVALID, TPUC_HLO_PRECISION_HIGH};
  TPUC_CHECK_OK(tpuc_hlo_dot_general(fn, va, vb, &d1, &y[0]));
  TPUC_CHECK_OK(tpuc_hlo_slice(fn, va, (int64_t[]){0, 0, 0},
                               (int64_t[]){1, 3, 4}, NULL, &a0));
  TPUC_CHECK_OK(tpuc_hlo_reshape(fn, a0, (int64_t[]){3, 4}, 2, &a0));
  tpuc_hlo_dot_dims d2 = {NULL,
                          NULL,
                          0,
                          (int64_t[]){1},
                          (int64_t[]){1},
                          1,
                          TPUC_DTYPE_INVALID,
                          TPUC_HLO_PRECISION_DEFAULT};
  TPUC_CHECK_OK(tpuc_hlo_dot_general(fn, a0, vc, &d2, &y[1]));
  tpuc_hlo_dot_dims d3 = {NULL,
                          NULL,
                          0,
                          (int64_t[]){0},
                          (int64_t[]){0},
                          1,
                          TPUC_DTYPE_F32,
                          TPUC_HLO_PRECISION_HIGHEST};
  TPUC_CHECK_OK(tpuc_hlo_dot_general(fn, vh, vh, &d3, &y[2]));
  tpuc_hlo_type rt;
  TPUC_CHECK_OK(tpuc_hlo_value_type(fn, y[0], &rt));
  TPUC_CHECK(rt.rank == 3 && rt.dims[0] == 2 && rt.dims[1] == 3 &&
             rt.dims[2] == 5);
  TPUC_CHECK_OK(tpuc_hlo_value_type(fn, y[2], &rt));
  TPUC_CHECK(rt.rank == 0 && rt.dtype == TPUC_DTYPE_F32);
  TPUC_CHECK_OK(tpuc_hlo_return(fn, y, 3));
  uint16_t h[8];
  for (int i = 0; i < 8; ++i) h[i] = f32_to_bf16((float)i * 0.5f);
  tpuc_test_arg args[4] = {{TPUC_DTYPE_F32, 3, {2, 3, 4}, a},
                           {TPUC_DTYPE_F32, 3, {2, 4, 5}, b},
                           {TPUC_DTYPE_F32, 2, {5, 4}, b},
                           {TPUC_DTYPE_BF16, 1, {8}, h}};
  void* o[3];
  TPUC_CHECK_OK(tpuc_test_run_module(m, args, 4, o, 3));
  tpuc_hlo_module_destroy(m);
  int bad = 0;
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 5; ++j) {
        float s = 0;
        for (int k = 0; k < 4; ++k)
          s += a[(n * 3 + i) * 4 + k] * b[(n * 4 + k) * 5 + j];
        bad += fabsf(((float*)o[0])[(n * 3 + i) * 5 + j] - s) > 1e-4f;
      }
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      float s = 0;
      for (int k = 0; k < 4; ++k) s += a[i * 4 + k] * b[j * 4 + k];
      bad += fabsf(((float*)o[1])[i * 5 + j] - s) > 1e-4f;
    }
  float s = 0;
  for (int i = 0; i < 8; ++i) s += (i * 0.5f) * (i * 0.5f);
  bad += fabsf(*(float*)o[2] - s) > 1e-3f;
  tpuc_test_free_all(o, 3);
  TPUC_CHECK(bad == 0);
}

/* Host NCHW / OIHW convolution with stride, padding, lhs/rhs dilation and
 * feature groups. */
static void host_conv(const float* x, const int64_t* xd, const float* k,
                      const int64_t* kd, const int64_t* st, const int64_t* pad,
                      const int64_t* ld, const int64_t* rd, int64_t groups,
                      float* y, const int64_t* yd) {
  int64_t cin_g = kd[1], cout_g = kd[0] / groups;
  for (int64_t n = 0; n < yd[0]; ++n)
    for (int64_t o = 0; o < yd[1]; ++o)
      for (int64_t r = 0; r < yd[2]; ++r)
        for (int64_t c = 0; c < yd[3]; ++c) {
          double s = 0;
          int64_t g = o / cout_g;
          for (int64_t i = 0; i < cin_g; ++i)
            for (int64_t a = 0; a < kd[2]; ++a)
              for (int64_t b = 0; b < kd[3]; ++b) {
                int64_t pr = r * st[0] + a * rd[0] - pad[0];
                int64_t pc = c * st[1] + b * rd[1] - pad[2];
                if (pr < 0 || pc < 0 || pr % ld[0] || pc % ld[1]) continue;
                pr /= ld[0];
                pc /= ld[1];
                if (pr >= xd[2] || pc >= xd[3]) continue;
                s +=
                    x[((n * xd[1] + g * cin_g + i) * xd[2] + pr) * xd[3] + pc] *
                    k[((o * kd[1] + i) * kd[2] + a) * kd[3] + b];
              }
          y[((n * yd[1] + o) * yd[2] + r) * yd[3] + c] = (float)s;
        }
}

static void test_convolution_nchw(void) {
  const int64_t xd[4] = {2, 4, 5, 6}, kd[4] = {6, 2, 3, 2};
  float x[240], k[72];
  for (int i = 0; i < 240; ++i) x[i] = (float)((i * 7) % 11) - 5;
  for (int i = 0; i < 72; ++i) k[i] = (float)((i * 3) % 5) - 2;
  const int64_t st[2] = {2, 1}, pad[4] = {1, 2, 0, 1}, ld[2] = {1, 2},
                rd[2] = {2, 1};
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("conv", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type tx = tpuc_hlo_type_make(TPUC_DTYPE_F32, xd, 4);
  tpuc_hlo_type tk = tpuc_hlo_type_make(TPUC_DTYPE_F32, kd, 4);
  tpuc_hlo_value vx, vk, y;
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tx, &vx));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tk, &vk));
  tpuc_hlo_conv c;
  tpuc_hlo_conv_init_nchw(&c, 2);
  c.strides = st;
  c.padding = pad;
  c.lhs_dilation = ld;
  c.rhs_dilation = rd;
  c.feature_group_count = 2;
  TPUC_CHECK_OK(tpuc_hlo_convolution(fn, vx, vk, &c, &y));
  tpuc_hlo_type rt;
  TPUC_CHECK_OK(tpuc_hlo_value_type(fn, y, &rt));
  TPUC_CHECK_OK(tpuc_hlo_return(fn, &y, 1));
  /* rows: (5-1)*1+1 + 3 = 8, window (3-1)*2+1 = 5 -> (8-5)/2+1 = 2
   * cols: (6-1)*2+1 + 1 = 12, window 2 -> 11 */
  TPUC_CHECK(rt.dims[0] == 2 && rt.dims[1] == 6 && rt.dims[2] == 2 &&
             rt.dims[3] == 11);
  tpuc_test_arg args[2] = {{TPUC_DTYPE_F32, 4, {2, 4, 5, 6}, x},
                           {TPUC_DTYPE_F32, 4, {6, 2, 3, 2}, k}};
  void* o;
  TPUC_CHECK_OK(tpuc_test_run_module(m, args, 2, &o, 1));
  tpuc_hlo_module_destroy(m);
  float want[2 * 6 * 2 * 11];
  host_conv(x, xd, k, kd, st, pad, ld, rd, 2, want, rt.dims);
  int bad = 0;
  for (size_t i = 0; i < sizeof want / sizeof want[0]; ++i)
    bad += fabsf(((float*)o)[i] - want[i]) > 1e-3f;
  free(o);
  TPUC_CHECK(bad == 0);
}

/* NHWC input, HWIO kernel, NHWC output (TensorFlow layout), and
 * batch_group_count = 2 (weight-gradient style) in NCHW. */
static void test_convolution_layouts(void) {
  const int64_t xd[4] = {1, 3, 3, 2}, kd[4] = {2, 2, 2, 3};
  float x[18], k[24];
  for (int i = 0; i < 18; ++i) x[i] = (float)i - 4;
  for (int i = 0; i < 24; ++i) k[i] = (float)(i % 4) - 1;
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("conv_nhwc", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type tx = tpuc_hlo_type_make(TPUC_DTYPE_F32, xd, 4);
  tpuc_hlo_type tk = tpuc_hlo_type_make(TPUC_DTYPE_F32, kd, 4);
  tpuc_hlo_type tb =
      tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){2, 1, 3}, 3);
  tpuc_hlo_type tbk =
      tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){4, 1, 2}, 3);
  tpuc_hlo_value vx, vk, vb, vbk, y[2];
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tx, &vx));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tk, &vk));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tb, &vb));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tbk, &vbk));
  tpuc_hlo_conv c;
  memset(&c, 0, sizeof c);
  c.num_spatial = 2;
  c.input_batch_dim = 0;
  c.input_feature_dim = 3;
  c.input_spatial_dims[0] = 1;
  c.input_spatial_dims[1] = 2;
  c.kernel_spatial_dims[0] = 0;
  c.kernel_spatial_dims[1] = 1;
  c.kernel_input_feature_dim = 2;
  c.kernel_output_feature_dim = 3;
  c.output_batch_dim = 0;
  c.output_feature_dim = 3;
  c.output_spatial_dims[0] = 1;
  c.output_spatial_dims[1] = 2;
  TPUC_CHECK_OK(tpuc_hlo_convolution(fn, vx, vk, &c, &y[0]));
  /* batch groups: input (N=2, C=1, W=3), kernel (O=4, I=1, W=2), bgc=2 ->
   * output (1, 4, 2); output feature o uses batch o / 2 */
  tpuc_hlo_conv c1;
  tpuc_hlo_conv_init_nchw(&c1, 1);
  c1.batch_group_count = 2;
  TPUC_CHECK_OK(tpuc_hlo_convolution(fn, vb, vbk, &c1, &y[1]));
  TPUC_CHECK_OK(tpuc_hlo_return(fn, y, 2));
  const float bx[6] = {1, 2, 3, 4, 5, 6};
  const float bk[8] = {1, 0, 0, 1, 1, 1, -1, 2};
  tpuc_test_arg args[4] = {{TPUC_DTYPE_F32, 4, {1, 3, 3, 2}, x},
                           {TPUC_DTYPE_F32, 4, {2, 2, 2, 3}, k},
                           {TPUC_DTYPE_F32, 3, {2, 1, 3}, bx},
                           {TPUC_DTYPE_F32, 3, {4, 1, 2}, bk}};
  void* o[2];
  TPUC_CHECK_OK(tpuc_test_run_module(m, args, 4, o, 2));
  tpuc_hlo_module_destroy(m);
  int bad = 0;
  for (int r = 0; r < 2; ++r)
    for (int cc = 0; cc < 2; ++cc)
      for (int oc = 0; oc < 3; ++oc) {
        float s = 0;
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b)
            for (int i = 0; i < 2; ++i)
              s += x[((r + a) * 3 + cc + b) * 2 + i] *
                   k[((a * 2 + b) * 2 + i) * 3 + oc];
        bad += fabsf(((float*)o[0])[(r * 2 + cc) * 3 + oc] - s) > 1e-4f;
      }
  for (int oc = 0; oc < 4; ++oc)
    for (int w = 0; w < 2; ++w) {
      int n = oc / 2;
      float s = bx[n * 3 + w] * bk[oc * 2] + bx[n * 3 + w + 1] * bk[oc * 2 + 1];
      bad += fabsf(((float*)o[1])[oc * 2 + w] - s) > 1e-4f;
    }
  tpuc_test_free_all(o, 2);
  TPUC_CHECK(bad == 0);
}

static void test_linalg_validation(void) {
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("bad", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type ta = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){3, 4}, 2);
  tpuc_hlo_type ti = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){4, 5}, 2);
  tpuc_hlo_type t4 =
      tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){1, 3, 5, 5}, 4);
  tpuc_hlo_type tk =
      tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){2, 2, 3, 3}, 4);
  tpuc_hlo_value a, i, x, k, y;
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &ta, &a));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &ti, &i));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t4, &x));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tk, &k));
  tpuc_hlo_dot_dims d = {NULL,
                         NULL,
                         0,
                         (int64_t[]){1},
                         (int64_t[]){0},
                         1,
                         TPUC_DTYPE_INVALID,
                         TPUC_HLO_PRECISION_DEFAULT};
  TPUC_CHECK_ERROR(tpuc_hlo_dot_general(fn, a, i, &d, &y),
                   TPUC_INVALID_ARGUMENT, "stablehlo.dot_general: lhs dtype");
  tpuc_hlo_dot_dims d2 = {NULL,
                          NULL,
                          0,
                          (int64_t[]){0},
                          (int64_t[]){1},
                          1,
                          TPUC_DTYPE_INVALID,
                          TPUC_HLO_PRECISION_DEFAULT};
  TPUC_CHECK_ERROR(tpuc_hlo_dot_general(fn, a, a, &d2, &y),
                   TPUC_INVALID_ARGUMENT, "contracting dim 0: lhs size 3");
  tpuc_hlo_dot_dims d3 = {(int64_t[]){1},
                          (int64_t[]){1},
                          1,
                          (int64_t[]){1},
                          (int64_t[]){0},
                          1,
                          TPUC_DTYPE_INVALID,
                          TPUC_HLO_PRECISION_DEFAULT};
  TPUC_CHECK_ERROR(tpuc_hlo_dot_general(fn, a, a, &d3, &y),
                   TPUC_INVALID_ARGUMENT, "repeats dim");
  tpuc_hlo_dot_dims d4 = {NULL,
                          NULL,
                          0,
                          (int64_t[]){1},
                          (int64_t[]){1},
                          1,
                          TPUC_DTYPE_F16,
                          TPUC_HLO_PRECISION_DEFAULT};
  TPUC_CHECK_ERROR(tpuc_hlo_dot_general(fn, a, a, &d4, &y),
                   TPUC_INVALID_ARGUMENT, "result dtype f16");
  tpuc_hlo_conv c;
  tpuc_hlo_conv_init_nchw(&c, 2);
  TPUC_CHECK_ERROR(tpuc_hlo_convolution(fn, x, k, &c, &y),
                   TPUC_INVALID_ARGUMENT, "input features (3)");
  tpuc_hlo_conv_init_nchw(&c, 2);
  c.input_spatial_dims[1] = 2;
  TPUC_CHECK_ERROR(tpuc_hlo_convolution(fn, x, k, &c, &y),
                   TPUC_INVALID_ARGUMENT, "input dimensions repeats dim 2");
  tpuc_hlo_conv_init_nchw(&c, 1);
  TPUC_CHECK_ERROR(tpuc_hlo_convolution(fn, x, k, &c, &y),
                   TPUC_INVALID_ARGUMENT, "rank 3");
  tpuc_hlo_conv_init_nchw(&c, 2);
  c.feature_group_count = 3;
  c.strides = (int64_t[]){1, 0};
  TPUC_CHECK_ERROR(tpuc_hlo_convolution(fn, x, k, &c, &y),
                   TPUC_INVALID_ARGUMENT, "window_strides[1]");
  tpuc_hlo_module_destroy(m);
}

TPUC_TEST_MAIN(TPUC_TEST(test_dot_general), TPUC_TEST(test_convolution_nchw),
               TPUC_TEST(test_convolution_layouts),
               TPUC_TEST(test_linalg_validation))
