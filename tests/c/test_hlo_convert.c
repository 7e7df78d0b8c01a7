/* StableHLO builder: add over every dtype, convert round trips (with
 * host bf16/f16 conversions) and bitcast_convert, run on the CPU plugin. */
#include <stdint.h>

#include "tpuc/hlo.h"
#include "tpuc_test.h"

static uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static float f16_to_f32(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  float s = (h & 0x8000) ? -1.0f : 1.0f;
  if (e == 0) return s * ldexpf((float)m, -24);
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * ldexpf((float)(m | 1024), e - 25);
}

/* Exact for values representable in f16 (the tests use small integers and
 * halves). */
static uint16_t f32_to_f16(float f) {
  uint16_t s = signbit(f) ? 0x8000 : 0;
  float a = fabsf(f);
  if (a == 0) return s;
  int e;
  float m = frexpf(a, &e);
  int q = (int)lrintf(m * 2048.0f);
  return s | (uint16_t)(((e - 1 + 15) << 10) | (q - 1024));
}

/* Writes `v` (an integer small enough for every dtype) as dtype `d`. */
static void put(tpuc_dtype d, void* p, int k, double v) {
  switch (d) {
    case TPUC_DTYPE_PRED:
      ((uint8_t*)p)[k] = v != 0;
      break;
    case TPUC_DTYPE_S8:
      ((int8_t*)p)[k] = (int8_t)v;
      break;
    case TPUC_DTYPE_S16:
      ((int16_t*)p)[k] = (int16_t)v;
      break;
    case TPUC_DTYPE_S32:
      ((int32_t*)p)[k] = (int32_t)v;
      break;
    case TPUC_DTYPE_S64:
      ((int64_t*)p)[k] = (int64_t)v;
      break;
    case TPUC_DTYPE_U8:
      ((uint8_t*)p)[k] = (uint8_t)v;
      break;
    case TPUC_DTYPE_U16:
      ((uint16_t*)p)[k] = (uint16_t)v;
      break;
    case TPUC_DTYPE_U32:
      ((uint32_t*)p)[k] = (uint32_t)v;
      break;
    case TPUC_DTYPE_U64:
      ((uint64_t*)p)[k] = (uint64_t)v;
      break;
    case TPUC_DTYPE_F16:
      ((uint16_t*)p)[k] = f32_to_f16((float)v);
      break;
    case TPUC_DTYPE_BF16:
      ((uint16_t*)p)[k] = f32_to_bf16((float)v);
      break;
    case TPUC_DTYPE_F32:
      ((float*)p)[k] = (float)v;
      break;
    case TPUC_DTYPE_F64:
      ((double*)p)[k] = v;
      break;
    case TPUC_DTYPE_C64:
      ((float*)p)[2 * k] = (float)v;
      ((float*)p)[2 * k + 1] = (float)(v / 2);
      break;
    case TPUC_DTYPE_C128:
      ((double*)p)[2 * k] = v;
      ((double*)p)[2 * k + 1] = v / 2;
      break;
    default:
      break;
  }
}

static double get(tpuc_dtype d, const void* p, int k) {
  switch (d) {
    case TPUC_DTYPE_PRED:
      return ((const uint8_t*)p)[k];
    case TPUC_DTYPE_S8:
      return ((const int8_t*)p)[k];
    case TPUC_DTYPE_S16:
      return ((const int16_t*)p)[k];
    case TPUC_DTYPE_S32:
      return ((const int32_t*)p)[k];
    case TPUC_DTYPE_S64:
      return (double)((const int64_t*)p)[k];
    case TPUC_DTYPE_U8:
      return ((const uint8_t*)p)[k];
    case TPUC_DTYPE_U16:
      return ((const uint16_t*)p)[k];
    case TPUC_DTYPE_U32:
      return ((const uint32_t*)p)[k];
    case TPUC_DTYPE_U64:
      return (double)((const uint64_t*)p)[k];
    case TPUC_DTYPE_F16:
      return f16_to_f32(((const uint16_t*)p)[k]);
    case TPUC_DTYPE_BF16:
      return bf16_to_f32(((const uint16_t*)p)[k]);
    case TPUC_DTYPE_F32:
      return ((const float*)p)[k];
    case TPUC_DTYPE_F64:
      return ((const double*)p)[k];
    /* complex: real + 1000 * imag, enough to check both parts */
    case TPUC_DTYPE_C64:
      return ((const float*)p)[2 * k] + 1000.0 * ((const float*)p)[2 * k + 1];
    case TPUC_DTYPE_C128:
      return ((const double*)p)[2 * k] + 1000.0 * ((const double*)p)[2 * k + 1];
    default:
      return NAN;
  }
}

static const tpuc_dtype kAll[] = {
    TPUC_DTYPE_PRED, TPUC_DTYPE_S8,  TPUC_DTYPE_S16,  TPUC_DTYPE_S32,
    TPUC_DTYPE_S64,  TPUC_DTYPE_U8,  TPUC_DTYPE_U16,  TPUC_DTYPE_U32,
    TPUC_DTYPE_U64,  TPUC_DTYPE_F16, TPUC_DTYPE_BF16, TPUC_DTYPE_F32,
    TPUC_DTYPE_F64,  TPUC_DTYPE_C64, TPUC_DTYPE_C128};
enum { NALL = sizeof kAll / sizeof kAll[0] };

/* add over every dtype: x + y + constant(1) with the constant from
 * tpuc_hlo_constant_f64 broadcast to the shape. */
static void test_add_every_dtype(void) {
  for (size_t i = 0; i < NALL; ++i) {
    tpuc_dtype d = kAll[i];
    bool pred = d == TPUC_DTYPE_PRED;
    tpuc_hlo_module* m;
    tpuc_hlo_fn* fn;
    TPUC_CHECK_OK(tpuc_hlo_module_create("add_dtype", &m));
    TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
    int64_t dims[2] = {2, 3};
    tpuc_hlo_type t = tpuc_hlo_type_make(d, dims, 2);
    tpuc_hlo_value a, b, c, cb, s, y;
    TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &a));
    TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &b));
    TPUC_CHECK_OK(tpuc_hlo_constant_f64(fn, d, pred ? 0 : 1, &c));
    TPUC_CHECK_OK(tpuc_hlo_broadcast_in_dim(fn, c, dims, 2, NULL, &cb));
    TPUC_CHECK_OK(tpuc_hlo_binary(fn, TPUC_HLO_ADD, a, b, &s));
    TPUC_CHECK_OK(tpuc_hlo_binary(fn, TPUC_HLO_ADD, s, cb, &y));
    TPUC_CHECK_OK(tpuc_hlo_return(fn, &y, 1));
    unsigned char va[6 * 16], vb[6 * 16];
    for (int k = 0; k < 6; ++k) {
      put(d, va, k, pred ? (k & 1) : k + 1);
      put(d, vb, k, pred ? (k >> 1 & 1) : 2 * k);
    }
    tpuc_test_arg args[2] = {{d, 2, {2, 3}, va}, {d, 2, {2, 3}, vb}};
    void* o;
    TPUC_CHECK_OK(tpuc_test_run_module(m, args, 2, &o, 1));
    tpuc_hlo_module_destroy(m);
    int bad = 0;
    for (int k = 0; k < 6; ++k) {
      double want = pred ? (double)((k & 1) | (k >> 1 & 1))
                         : get(d, va, k) + get(d, vb, k) + 1;
      if (get(d, o, k) != want) {
        fprintf(stderr, "add %s [%d] = %g want %g\n", tpuc_dtype_mlir_name(d),
                k, get(d, o, k), want);
        bad++;
      }
    }
    free(o);
    TPUC_CHECK(bad == 0);
  }
}

/* convert f32 -> every dtype -> f32 (and i1 through its 0/1 semantics). */
static void test_convert_round_trips(void) {
  const float v[4] = {0, 1, 3, 100};
  for (size_t i = 0; i < NALL; ++i) {
    tpuc_dtype d = kAll[i];
    tpuc_hlo_module* m;
    tpuc_hlo_fn* fn;
    TPUC_CHECK_OK(tpuc_hlo_module_create("convert", &m));
    TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
    tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){4}, 1);
    tpuc_hlo_value x, c, y[2];
    TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &x));
    TPUC_CHECK_OK(tpuc_hlo_convert(fn, x, d, &y[0]));
    if (tpuc_dtype_is_complex(d)) {
      TPUC_CHECK_OK(tpuc_hlo_unary(fn, TPUC_HLO_REAL, y[0], &c));
      TPUC_CHECK_OK(tpuc_hlo_convert(fn, c, TPUC_DTYPE_F32, &y[1]));
    } else {
      TPUC_CHECK_OK(tpuc_hlo_convert(fn, y[0], TPUC_DTYPE_F32, &y[1]));
    }
    TPUC_CHECK_OK(tpuc_hlo_return(fn, y, 2));
    tpuc_test_arg a = {TPUC_DTYPE_F32, 1, {4}, v};
    void* o[2];
    TPUC_CHECK_OK(tpuc_test_run_module(m, &a, 1, o, 2));
    tpuc_hlo_module_destroy(m);
    int bad = 0;
    for (int k = 0; k < 4; ++k) {
      double want = d == TPUC_DTYPE_PRED ? (v[k] != 0) : v[k];
      double mid = get(d, o[0], k);
      if (d == TPUC_DTYPE_C64) mid = get(TPUC_DTYPE_F32, o[0], 2 * k);
      if (d == TPUC_DTYPE_C128) mid = get(TPUC_DTYPE_F64, o[0], 2 * k);
      bad += mid != want;
      bad += ((float*)o[1])[k] != want;
    }
    if (d == TPUC_DTYPE_BF16 || d == TPUC_DTYPE_F16) {
      /* the device's bits equal the host conversion */
      for (int k = 0; k < 4; ++k) {
        uint16_t h =
            d == TPUC_DTYPE_BF16 ? f32_to_bf16(v[k]) : f32_to_f16(v[k]);
        bad += ((uint16_t*)o[0])[k] != h;
      }
    }
    tpuc_test_free_all(o, 2);
    if (bad)
      fprintf(stderr, "convert via %s failed\n", tpuc_dtype_mlir_name(d));
    TPUC_CHECK(bad == 0);
  }
}

static void test_convert_rounding_bf16(void) {
  /* values that are not exact in bf16 round to nearest even */
  const float v[4] = {1.00390625f, 1.01171875f, 3.14159265f, -1e-3f};
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("bf16", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){4}, 1);
  tpuc_hlo_value x, y;
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &x));
  TPUC_CHECK_OK(tpuc_hlo_convert(fn, x, TPUC_DTYPE_BF16, &y));
  TPUC_CHECK_OK(tpuc_hlo_return(fn, &y, 1));
  tpuc_test_arg a = {TPUC_DTYPE_F32, 1, {4}, v};
  void* o;
  TPUC_CHECK_OK(tpuc_test_run_module(m, &a, 1, &o, 1));
  tpuc_hlo_module_destroy(m);
  int bad = 0;
  for (int k = 0; k < 4; ++k) bad += ((uint16_t*)o)[k] != f32_to_bf16(v[k]);
  free(o);
  TPUC_CHECK(bad == 0);
}

static void test_bitcast_convert(void) {
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("bitcast", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type tf = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){2}, 1);
  tpuc_hlo_type tu = tpuc_hlo_type_make(TPUC_DTYPE_U8, (int64_t[]){3, 4}, 2);
  tpuc_hlo_value f, u, y[3];
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tf, &f));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tu, &u));
  TPUC_CHECK_OK(tpuc_hlo_bitcast_convert(fn, f, TPUC_DTYPE_S32, &y[0]));
  TPUC_CHECK_OK(tpuc_hlo_bitcast_convert(fn, f, TPUC_DTYPE_S8, &y[1]));
  TPUC_CHECK_OK(tpuc_hlo_bitcast_convert(fn, u, TPUC_DTYPE_U32, &y[2]));
  tpuc_hlo_type t;
  TPUC_CHECK_OK(tpuc_hlo_value_type(fn, y[1], &t));
  TPUC_CHECK(t.rank == 2 && t.dims[0] == 2 && t.dims[1] == 4);
  TPUC_CHECK_OK(tpuc_hlo_value_type(fn, y[2], &t));
  TPUC_CHECK(t.rank == 1 && t.dims[0] == 3);
  TPUC_CHECK_OK(tpuc_hlo_return(fn, y, 3));
  const float vf[2] = {1.5f, -2.0f};
  uint8_t vu[12];
  for (int k = 0; k < 12; ++k) vu[k] = (uint8_t)(k * 17 + 1);
  tpuc_test_arg args[2] = {{TPUC_DTYPE_F32, 1, {2}, vf},
                           {TPUC_DTYPE_U8, 2, {3, 4}, vu}};
  void* o[3];
  TPUC_CHECK_OK(tpuc_test_run_module(m, args, 2, o, 3));
  tpuc_hlo_module_destroy(m);
  int bad = memcmp(o[0], vf, 8) != 0;
  bad += memcmp(o[1], vf, 8) != 0; /* little-endian bytes */
  bad += memcmp(o[2], vu, 12) != 0;
  tpuc_test_free_all(o, 3);
  TPUC_CHECK(bad == 0);
}

TPUC_TEST_MAIN(TPUC_TEST(test_add_every_dtype),
               TPUC_TEST(test_convert_round_trips),
               TPUC_TEST(test_convert_rounding_bf16),
               TPUC_TEST(test_bitcast_convert))
