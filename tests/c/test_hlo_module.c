/* StableHLO builder: module structure, exact printing, argument aliasing
 * (donation), and misuse errors. */
#include <stdint.h>

#include "tpuc/hlo.h"
#include "tpuc_test.h"

static void test_print_exact(void) {
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("add_one", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_fn* again;
  TPUC_CHECK_OK(tpuc_hlo_main(m, &again));
  TPUC_CHECK(again == fn);
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){2}, 1);
  tpuc_hlo_value x, one, b, y;
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &x));
  TPUC_CHECK_OK(tpuc_hlo_constant_f64(fn, TPUC_DTYPE_F32, 1.0, &one));
  TPUC_CHECK_OK(
      tpuc_hlo_broadcast_in_dim(fn, one, (int64_t[]){2}, 1, NULL, &b));
  TPUC_CHECK_OK(tpuc_hlo_binary(fn, TPUC_HLO_ADD, x, b, &y));
  TPUC_CHECK_OK(tpuc_hlo_return(fn, &y, 1));
  TPUC_CHECK_OK(tpuc_hlo_arg_alias(fn, x, 0));
  TPUC_CHECK(tpuc_hlo_num_args(fn) == 1);
  char* text;
  size_t len;
  TPUC_CHECK_OK(tpuc_hlo_module_print(m, &text, &len));
  const char* want =
      "module @add_one {\n"
      "  func.func public @main(%arg0: tensor<2xf32> {tf.aliasing_output = 0 "
      ": i32}) -> (tensor<2xf32>) {\n"
      "    %1 = \"stablehlo.constant\"() {value = dense<\"0x0000803F\"> : "
      "tensor<f32>} : () -> tensor<f32>\n"
      "    %2 = \"stablehlo.broadcast_in_dim\"(%1) {broadcast_dimensions = "
      "array<i64>} : (tensor<f32>) -> tensor<2xf32>\n"
      "    %3 = \"stablehlo.add\"(%arg0, %2) : (tensor<2xf32>, tensor<2xf32>) "
      "-> tensor<2xf32>\n"
      "    \"func.return\"(%3) : (tensor<2xf32>) -> ()\n"
      "  }\n"
      "}\n";
  if (strcmp(text, want) != 0) fprintf(stderr, "got:\n%s", text);
  TPUC_CHECK(strcmp(text, want) == 0);
  TPUC_CHECK(len == strlen(want));
  /* the program compiles with the alias and runs */
  tpuc_executable* exe = NULL;
  tpuc_status* st =
      tpuc_compile(tpuc_test_client(), text, len, NULL, &exe, NULL);
  free(text);
  if (st != NULL) tpuc_hlo_module_destroy(m);
  TPUC_CHECK_OK(st);
  int alias = tpuc_executable_input_alias(exe, 0);
  tpuc_executable_release(exe);
  if (alias != 0) tpuc_hlo_module_destroy(m);
  TPUC_CHECK(alias == 0);
  const float v[2] = {1, 2};
  tpuc_test_arg a = {TPUC_DTYPE_F32, 1, {2}, v};
  void* o;
  st = tpuc_test_run_module(m, &a, 1, &o, 1);
  tpuc_hlo_module_destroy(m);
  TPUC_CHECK_OK(st);
  int bad = ((float*)o)[0] != 2 || ((float*)o)[1] != 3;
  free(o);
  TPUC_CHECK(bad == 0);
}

/* A region nested in a region nested in @main prints with nested braces
 * and runs: reduce whose body calls reduce over a broadcast (silly but
 * legal), inside a while body. */
static void test_nested_regions(void) {
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("nested", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type ts = tpuc_hlo_type_scalar(TPUC_DTYPE_F32);
  tpuc_hlo_type tv = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){3}, 1);
  tpuc_hlo_value x, zero, y;
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &tv, &x));
  TPUC_CHECK_OK(tpuc_hlo_constant_f64(fn, TPUC_DTYPE_F32, 0, &zero));
  /* outer body: (a, b) -> sum(broadcast(a + b, [2])) / 2 == a + b */
  tpuc_hlo_type st2[2] = {ts, ts};
  tpuc_hlo_fn* outer;
  TPUC_CHECK_OK(tpuc_hlo_region_create(m, st2, 2, &outer));
  tpuc_hlo_value a, b, s, bs, z, r, two, h;
  TPUC_CHECK_OK(tpuc_hlo_get_arg(outer, 0, &a));
  TPUC_CHECK_OK(tpuc_hlo_get_arg(outer, 1, &b));
  TPUC_CHECK_OK(tpuc_hlo_binary(outer, TPUC_HLO_ADD, a, b, &s));
  TPUC_CHECK_OK(
      tpuc_hlo_broadcast_in_dim(outer, s, (int64_t[]){2}, 1, NULL, &bs));
  TPUC_CHECK_OK(tpuc_hlo_constant_f64(outer, TPUC_DTYPE_F32, 0, &z));
  tpuc_hlo_fn* inner;
  TPUC_CHECK_OK(
      tpuc_hlo_region_binary(m, TPUC_DTYPE_F32, TPUC_HLO_ADD, &inner));
  /* a region cannot be attached inside itself */
  TPUC_CHECK_ERROR(
      tpuc_hlo_reduce(outer, &bs, &z, 1, (int64_t[]){0}, 1, outer, &r),
      TPUC_INVALID_ARGUMENT, NULL);
  TPUC_CHECK_OK(
      tpuc_hlo_reduce(outer, &bs, &z, 1, (int64_t[]){0}, 1, inner, &r));
  TPUC_CHECK_OK(tpuc_hlo_constant_f64(outer, TPUC_DTYPE_F32, 2, &two));
  TPUC_CHECK_OK(tpuc_hlo_binary(outer, TPUC_HLO_DIV, r, two, &h));
  TPUC_CHECK_OK(tpuc_hlo_return(outer, &h, 1));
  TPUC_CHECK_OK(
      tpuc_hlo_reduce(fn, &x, &zero, 1, (int64_t[]){0}, 1, outer, &y));
  TPUC_CHECK_OK(tpuc_hlo_return(fn, &y, 1));
  char* text;
  TPUC_CHECK_OK(tpuc_hlo_module_print(m, &text, NULL));
  /* two levels of regions: the inner block label is indented further */
  bool nested = strstr(text, "\n    ^bb0(") && strstr(text, "\n      ^bb0(");
  free(text);
  if (!nested) tpuc_hlo_module_destroy(m);
  TPUC_CHECK(nested);
  const float v[3] = {1.5f, 2, -4};
  tpuc_test_arg arg = {TPUC_DTYPE_F32, 1, {3}, v};
  void* o;
  tpuc_status* st = tpuc_test_run_module(m, &arg, 1, &o, 1);
  tpuc_hlo_module_destroy(m);
  TPUC_CHECK_OK(st);
  int bad = *(float*)o != -0.5f;
  free(o);
  TPUC_CHECK(bad == 0);
}

static void test_module_errors(void) {
  tpuc_hlo_module* m = NULL;
  TPUC_CHECK_ERROR(tpuc_hlo_module_create("9bad name", &m),
                   TPUC_INVALID_ARGUMENT, "not an identifier");
  TPUC_CHECK(m == NULL);
  TPUC_CHECK_OK(tpuc_hlo_module_create("m", &m));
  char* text = NULL;
  TPUC_CHECK_ERROR(tpuc_hlo_module_print(m, &text, NULL), TPUC_INVALID_ARGUMENT,
                   "no @main");
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  TPUC_CHECK_ERROR(tpuc_hlo_module_print(m, &text, NULL), TPUC_INVALID_ARGUMENT,
                   "no return");
  tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){2}, 1);
  tpuc_hlo_type ti = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){2}, 1);
  tpuc_hlo_value x, i, y;
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &x));
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &ti, &i));
  TPUC_CHECK_OK(tpuc_hlo_unary(fn, TPUC_HLO_NEG, x, &y));
  TPUC_CHECK_ERROR(tpuc_hlo_arg_alias(fn, y, 0), TPUC_INVALID_ARGUMENT,
                   "not an argument");
  TPUC_CHECK_OK(tpuc_hlo_arg_alias(fn, x, 0));
  TPUC_CHECK_ERROR(tpuc_hlo_arg_alias(fn, i, 0), TPUC_INVALID_ARGUMENT,
                   "already aliased");
  TPUC_CHECK_OK(tpuc_hlo_arg_alias(fn, i, 1));
  tpuc_hlo_value outs[2] = {y, x};
  TPUC_CHECK_OK(tpuc_hlo_return(fn, outs, 2));
  TPUC_CHECK_ERROR(tpuc_hlo_return(fn, outs, 2), TPUC_INVALID_ARGUMENT,
                   "already returned");
  TPUC_CHECK_ERROR(tpuc_hlo_module_print(m, &text, NULL), TPUC_INVALID_ARGUMENT,
                   "argument 1 aliases output 1 of another type");
  TPUC_CHECK_OK(tpuc_hlo_arg_alias(fn, i, -1));
  TPUC_CHECK_OK(tpuc_hlo_module_print(m, &text, NULL));
  TPUC_CHECK(strstr(text, "%arg1: tensor<2xi32>)") != NULL);
  free(text);
  /* a value of another module */
  tpuc_hlo_module* m2;
  tpuc_hlo_fn* fn2;
  TPUC_CHECK_OK(tpuc_hlo_module_create(NULL, &m2));
  TPUC_CHECK_OK(tpuc_hlo_main(m2, &fn2));
  TPUC_CHECK_ERROR(tpuc_hlo_unary(fn2, TPUC_HLO_NEG, x, &y),
                   TPUC_INVALID_ARGUMENT, "not a value of this module");
  tpuc_hlo_fn* r;
  TPUC_CHECK_OK(tpuc_hlo_region_binary(m, TPUC_DTYPE_F32, TPUC_HLO_ADD, &r));
  tpuc_hlo_value xz;
  tpuc_hlo_type tz = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){2}, 1);
  TPUC_CHECK_OK(tpuc_hlo_arg(fn2, &tz, &xz));
  tpuc_hlo_value z;
  TPUC_CHECK_OK(tpuc_hlo_constant_f64(fn2, TPUC_DTYPE_F32, 0, &z));
  TPUC_CHECK_ERROR(tpuc_hlo_reduce(fn2, &xz, &z, 1, (int64_t[]){0}, 1, r, &y),
                   TPUC_INVALID_ARGUMENT, "another module");
  TPUC_CHECK_ERROR(tpuc_hlo_value_type(fn2, -1, &t), TPUC_INVALID_ARGUMENT,
                   "not a value");
  TPUC_CHECK_ERROR(tpuc_hlo_region_create(m2, &ti, 1, NULL),
                   TPUC_INVALID_ARGUMENT, NULL);
  tpuc_hlo_type bad = tpuc_hlo_type_make((tpuc_dtype)0, NULL, 0);
  TPUC_CHECK_ERROR(tpuc_hlo_region_create(m2, &bad, 1, &r),
                   TPUC_INVALID_ARGUMENT, "argument 0 has invalid dtype");
  tpuc_hlo_module_destroy(m2);
  tpuc_hlo_module_destroy(m);
  tpuc_hlo_module_destroy(NULL);
}

/* A larger program: many ops in one module stay consistent and the printed
 * value ids are unique (a chain of 200 adds). */
static void test_long_chain(void) {
  tpuc_hlo_module* m;
  tpuc_hlo_fn* fn;
  TPUC_CHECK_OK(tpuc_hlo_module_create("chain", &m));
  TPUC_CHECK_OK(tpuc_hlo_main(m, &fn));
  tpuc_hlo_type t = tpuc_hlo_type_scalar(TPUC_DTYPE_S64);
  tpuc_hlo_value x, y;
  TPUC_CHECK_OK(tpuc_hlo_arg(fn, &t, &x));
  y = x;
  for (int k = 0; k < 200; ++k) {
    tpuc_hlo_value c;
    TPUC_CHECK_OK(tpuc_hlo_constant_i64(fn, TPUC_DTYPE_S64, k, &c));
    TPUC_CHECK_OK(tpuc_hlo_binary(fn, TPUC_HLO_ADD, y, c, &y));
  }
  TPUC_CHECK_OK(tpuc_hlo_return(fn, &y, 1));
  const int64_t v = 5;
  tpuc_test_arg a = {TPUC_DTYPE_S64, 0, {0}, &v};
  void* o;
  tpuc_status* st = tpuc_test_run_module(m, &a, 1, &o, 1);
  tpuc_hlo_module_destroy(m);
  TPUC_CHECK_OK(st);
  int bad = *(int64_t*)o != 5 + 199 * 200 / 2;
  free(o);
  TPUC_CHECK(bad == 0);
}

TPUC_TEST_MAIN(TPUC_TEST(test_print_exact), TPUC_TEST(test_nested_regions),
               TPUC_TEST(test_module_errors), TPUC_TEST(test_long_chain))
