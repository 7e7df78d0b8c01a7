/* StableHLO builder: control flow (while, case) and rng_bit_generator run on
 * the CPU plugin against host results. */
#include <stdint.h>

#include "tpuc/hlo.h"
#include "tpuc_test.h"

/* while (i < n) { acc += x * i; i += 1 } with x a (3) vector. */
static void test_while(void) {
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("loop", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type ts = tpuc_hlo_type_scalar(TPUC_DTYPE_S32);
  tpuc_hlo_type tv = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){3}, 1);
  tpuc_hlo_value n, x, zero, acc0, outs[4];
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &ts, &n));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tv, &x));
  TPUC_CHECK_OK(tpuc_hlo_constant_i64(fn, TPUC_DTYPE_S32, 0, &zero));
  float z3[3] = {0, 0, 0};
  TPUC_CHECK_OK(tpuc_hlo_constant(fn, &tv, z3, sizeof z3, &acc0));
  tpuc_hlo_type carried[4] = {ts, ts, tv, tv};
  tpuc_hlo_fn *cond, *body;
  TPUC_CHECK_OK(tpuc_hlo_region_create(m, carried, 4, &cond));
  tpuc_hlo_value ci, cn, lt;
  TPUC_CHECK_OK(tpuc_hlo_get_arg(cond, 0, &ci));
  TPUC_CHECK_OK(tpuc_hlo_get_arg(cond, 1, &cn));
  TPUC_CHECK_OK(tpuc_hlo_compare(cond, TPUC_HLO_LT, ci, cn, &lt));
  TPUC_CHECK_OK(tpuc_hlo_return(cond, &lt, 1));
  TPUC_CHECK_OK(tpuc_hlo_region_create(m, carried, 4, &body));
  tpuc_hlo_value bi, bn, bx, bacc, one, fi, fib, prod, r[4];
  TPUC_CHECK_OK(tpuc_hlo_get_arg(body, 0, &bi));
  TPUC_CHECK_OK(tpuc_hlo_get_arg(body, 1, &bn));
  TPUC_CHECK_OK(tpuc_hlo_get_arg(body, 2, &bx));
  TPUC_CHECK_OK(tpuc_hlo_get_arg(body, 3, &bacc));
  TPUC_CHECK_OK(tpuc_hlo_constant_i64(body, TPUC_DTYPE_S32, 1, &one));
  TPUC_CHECK_OK(tpuc_hlo_convert(body, bi, TPUC_DTYPE_F32, &fi));
  TPUC_CHECK_OK(
      tpuc_hlo_broadcast_in_dim(body, fi, (int64_t[]){3}, 1, NULL, &fib));
  TPUC_CHECK_OK(tpuc_hlo_binary(body, TPUC_HLO_MUL, bx, fib, &prod));
  TPUC_CHECK_OK(tpuc_hlo_binary(body, TPUC_HLO_ADD, bi, one, &r[0]));
  r[1] = bn;
  r[2] = bx;
  TPUC_CHECK_OK(tpuc_hlo_binary(body, TPUC_HLO_ADD, bacc, prod, &r[3]));
  TPUC_CHECK_OK(tpuc_hlo_return(body, r, 4));
  tpuc_hlo_value inits[4] = {zero, n, x, acc0};
  TPUC_CHECK_OK(tpuc_hlo_while(fn, inits, 4, cond, body, outs));
  tpuc_hlo_value res[2] = {outs[0], outs[3]};
  TPUC_CHECK_OK(tpuc_hlo_return(fn, res, 2));
  const int32_t nv = 10;
  const float xv[3] = {1, -2, 0.5f};
  tpuc_test_arg args[2] = {{TPUC_DTYPE_S32, 0, {0}, &nv},
                           {TPUC_DTYPE_F32, 1, {3}, xv}};
  void* o[2];
  TPUC_CHECK_OK(tpuc_test_run_module(m, args, 2, o, 2));
  tpuc_hlo_module_destroy(m);
  int bad = *(int32_t*)o[0] != 10;
  for (int k = 0; k < 3; ++k) bad += ((float*)o[1])[k] != xv[k] * 45.0f;
  tpuc_test_free_all(o, 2);
  TPUC_CHECK(bad == 0);
}

/* case(index) { x + 1 | x * 2 | reduce-sum(x) broadcast } */
static tpuc_status* build_case(tpuc_hlo_module** out) {
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_RETURN_IF_ERROR(tpuc_hlo_module_create("branches", &m));
  *out = m;
  TPUC_RETURN_IF_ERROR(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type ti = tpuc_hlo_type_scalar(TPUC_DTYPE_S32);
  tpuc_hlo_type tv = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){4}, 1);
  tpuc_hlo_value idx, x, y[2];
  TPUC_RETURN_IF_ERROR(tpuc_hlo_arg(fn, &ti, &idx));
  TPUC_RETURN_IF_ERROR(tpuc_hlo_arg(fn, &tv, &x));
  /* branches take no arguments and cannot capture x: each one computes
   * from a constant of its own */
  tpuc_hlo_fn* br[3];
  const float c[4] = {1, 2, 3, 4};
  for (int b = 0; b < 3; ++b) {
    TPUC_RETURN_IF_ERROR(tpuc_hlo_region_create(m, NULL, 0, &br[b]));
    tpuc_hlo_value k, r, tag;
    TPUC_RETURN_IF_ERROR(tpuc_hlo_constant(br[b], &tv, c, sizeof c, &k));
    if (b == 0) {
      tpuc_hlo_value one;
      TPUC_RETURN_IF_ERROR(
          tpuc_hlo_constant_f64(br[b], TPUC_DTYPE_F32, 1, &one));
      TPUC_RETURN_IF_ERROR(
          tpuc_hlo_broadcast_in_dim(br[b], one, (int64_t[]){4}, 1, NULL, &one));
      TPUC_RETURN_IF_ERROR(tpuc_hlo_binary(br[b], TPUC_HLO_ADD, k, one, &r));
    } else if (b == 1) {
      TPUC_RETURN_IF_ERROR(tpuc_hlo_binary(br[b], TPUC_HLO_MUL, k, k, &r));
    } else {
      tpuc_hlo_value zero;
      tpuc_hlo_fn* add;
      TPUC_RETURN_IF_ERROR(
          tpuc_hlo_constant_f64(br[b], TPUC_DTYPE_F32, 0, &zero));
      TPUC_RETURN_IF_ERROR(
          tpuc_hlo_region_binary(m, TPUC_DTYPE_F32, TPUC_HLO_ADD, &add));
      TPUC_RETURN_IF_ERROR(
          tpuc_hlo_reduce(br[b], &k, &zero, 1, (int64_t[]){0}, 1, add, &r));
      TPUC_RETURN_IF_ERROR(
          tpuc_hlo_broadcast_in_dim(br[b], r, (int64_t[]){4}, 1, NULL, &r));
    }
    TPUC_RETURN_IF_ERROR(tpuc_hlo_constant_i64(br[b], TPUC_DTYPE_S32, b, &tag));
    tpuc_hlo_value rr[2] = {r, tag};
    TPUC_RETURN_IF_ERROR(tpuc_hlo_return(br[b], rr, 2));
  }
  TPUC_RETURN_IF_ERROR(tpuc_hlo_case(fn, idx, br, 3, y, 2));
  /* x + branch result, to use the argument */
  tpuc_hlo_value s;
  TPUC_RETURN_IF_ERROR(tpuc_hlo_binary(fn, TPUC_HLO_ADD, x, y[0], &s));
  tpuc_hlo_value res[2] = {s, y[1]};
  return tpuc_hlo_return(fn, res, 2);
}

static void test_case(void) {
  tpuc_hlo_module* m = NULL;
  tpuc_status* st = build_case(&m);
  if (st != NULL) tpuc_hlo_module_destroy(m);
  TPUC_CHECK_OK(st);
  const float x[4] = {10, 20, 30, 40};
  const int32_t idxs[4] = {0, 1, 2, 7};
  int bad = 0;
  for (int t = 0; t < 4; ++t) {
    tpuc_test_arg args[2] = {{TPUC_DTYPE_S32, 0, {0}, &idxs[t]},
                             {TPUC_DTYPE_F32, 1, {4}, x}};
    void* o[2];
    st = tpuc_test_run_module(m, args, 2, o, 2);
    if (st != NULL) tpuc_hlo_module_destroy(m);
    TPUC_CHECK_OK(st);
    int b = idxs[t] > 2 ? 2 : idxs[t]; /* out of range runs the last */
    bad += *(int32_t*)o[1] != b;
    for (int k = 0; k < 4; ++k) {
      float c = (float)(k + 1);
      float want = x[k] + (b == 0 ? c + 1 : b == 1 ? c * c : 10);
      bad += ((float*)o[0])[k] != want;
    }
    tpuc_test_free_all(o, 2);
  }
  tpuc_hlo_module_destroy(m);
  TPUC_CHECK(bad == 0);
}

static void test_rng_bit_generator(void) {
  const tpuc_hlo_rng_algorithm algs[3] = {
      TPUC_HLO_RNG_DEFAULT, TPUC_HLO_RNG_THREE_FRY, TPUC_HLO_RNG_PHILOX};
  for (int a = 0; a < 3; ++a) {
    int64_t sn = algs[a] == TPUC_HLO_RNG_PHILOX ? 3 : 2;
    tpuc_hlo_module* m;
    tpuc_hlo_fn* fn;
    TPUC_CHECK_OK(tpuc_hlo_module_create("rng", &m));
    TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
    tpuc_hlo_type ts = tpuc_hlo_type_make(TPUC_DTYPE_U64, &sn, 1);
    tpuc_hlo_type t32 =
        tpuc_hlo_type_make(TPUC_DTYPE_U32, (int64_t[]){4, 64}, 2);
    tpuc_hlo_type t64 = tpuc_hlo_type_make(TPUC_DTYPE_U64, (int64_t[]){16}, 1);
    tpuc_hlo_value s, y[4];
    TPUC_CHECK_OK(tpuc_hlo_arg(fn, &ts, &s));
    TPUC_CHECK_OK(
        tpuc_hlo_rng_bit_generator(fn, algs[a], s, &t32, &y[0], &y[1]));
    /* the same state again gives the same bits; the new state gives others */
    TPUC_CHECK_OK(
        tpuc_hlo_rng_bit_generator(fn, algs[a], s, &t32, &y[2], &y[3]));
    tpuc_hlo_value ns2, b64;
    TPUC_CHECK_OK(
        tpuc_hlo_rng_bit_generator(fn, algs[a], y[0], &t64, &ns2, &b64));
    tpuc_hlo_value res[4] = {y[0], y[1], y[3], b64};
    TPUC_CHECK_OK(tpuc_hlo_return(fn, res, 4));
    const uint64_t seed[3] = {42, 7, 0};
    tpuc_test_arg arg = {TPUC_DTYPE_U64, 1, {sn}, seed};
    void* o[4];
    TPUC_CHECK_OK(tpuc_test_run_module(m, &arg, 1, o, 4));
    tpuc_hlo_module_destroy(m);
    int bad = memcmp(o[1], o[2], 4 * 64 * 4) != 0;
    bad += memcmp(o[0], seed, (size_t)sn * 8) == 0; /* state advanced */
    /* bits look random: about half of them set */
    int ones = 0;
    for (int k = 0; k < 256; ++k)
      ones += __builtin_popcount(((uint32_t*)o[1])[k]);
    bad += ones < 3500 || ones > 4700;
    int distinct = 0;
    for (int k = 1; k < 16; ++k)
      distinct += ((uint64_t*)o[3])[k] != ((uint64_t*)o[3])[0];
    bad += distinct != 15;
    tpuc_test_free_all(o, 4);
    if (bad) fprintf(stderr, "rng algorithm %d failed\n", a);
    TPUC_CHECK(bad == 0);
  }
}

static void test_control_validation(void) {
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("bad", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type ts = tpuc_hlo_type_scalar(TPUC_DTYPE_S32);
  tpuc_hlo_type tf = tpuc_hlo_type_scalar(TPUC_DTYPE_F32);
  tpuc_hlo_value i, f, y[2];
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &ts, &i));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tf, &f));
  tpuc_hlo_fn *cond, *body, *nb;
  /* cond returning i32 */
  TPUC_CHECK_OK(tpuc_hlo_region_create(m, &ts, 1, &cond));
  tpuc_hlo_value a;
  TPUC_CHECK_OK(tpuc_hlo_get_arg(cond, 0, &a));
  TPUC_CHECK_OK(tpuc_hlo_return(cond, &a, 1));
  TPUC_CHECK_OK(tpuc_hlo_region_create(m, &ts, 1, &body));
  TPUC_CHECK_OK(tpuc_hlo_get_arg(body, 0, &a));
  TPUC_CHECK_OK(tpuc_hlo_return(body, &a, 1));
  TPUC_CHECK_ERROR(tpuc_hlo_while(fn, &i, 1, cond, body, y),
                   TPUC_INVALID_ARGUMENT, "cond region must return one");
  TPUC_CHECK_ERROR(tpuc_hlo_while(fn, &f, 1, body, body, y),
                   TPUC_INVALID_ARGUMENT, "distinct");
  TPUC_CHECK_ERROR(tpuc_hlo_case(fn, f, &body, 1, y, 1), TPUC_INVALID_ARGUMENT,
                   "index must be tensor<i32>");
  TPUC_CHECK_ERROR(tpuc_hlo_case(fn, i, &body, 1, y, 1), TPUC_INVALID_ARGUMENT,
                   "branches take none");
  TPUC_CHECK_OK(tpuc_hlo_region_create(m, NULL, 0, &nb));
  TPUC_CHECK_ERROR(tpuc_hlo_get_arg(nb, 0, &a), TPUC_INVALID_ARGUMENT,
                   "out of range");
  tpuc_hlo_value c;
  TPUC_CHECK_OK(tpuc_hlo_constant_f64(nb, TPUC_DTYPE_F32, 1, &c));
  TPUC_CHECK_OK(tpuc_hlo_return(nb, &c, 1));
  TPUC_CHECK_ERROR(tpuc_hlo_case(fn, i, &nb, 1, y, 2), TPUC_INVALID_ARGUMENT,
                   "expected 2");
  tpuc_hlo_type t32 = tpuc_hlo_type_make(TPUC_DTYPE_U32, (int64_t[]){4}, 1);
  TPUC_CHECK_ERROR(tpuc_hlo_rng_bit_generator(fn, TPUC_HLO_RNG_THREE_FRY, i,
                                              &t32, &y[0], &y[1]),
                   TPUC_INVALID_ARGUMENT, "tensor<2xui64>");
  tpuc_hlo_module_destroy(m);
}

TPUC_TEST_MAIN(TPUC_TEST(test_while), TPUC_TEST(test_case),
               TPUC_TEST(test_rng_bit_generator),
               TPUC_TEST(test_control_validation))
