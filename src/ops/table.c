/* The native op table: ATen schema names and their lowerings. Every entry
 * gets the binding's generic boxed kernel. A CompositeImplicitAutograd op
 * (conj_physical, say) is listed only where the CPU has a kernel of its
 * own too (silu_backward): elsewhere a backend kernel would replace the
 * decomposition that autograd differentiates
 * (tests/python/test_registration.py checks this). */
#include <pthread.h>
#include <stdlib.h>

#include "ops/ops_internal.h"

const op_entry op_table_core[] = {
    {"aten::add.Tensor", op_lower_binary, TPUC_HLO_ADD | OP_BINARY_ALPHA},
    {"aten::add_.Tensor", op_lower_binary, TPUC_HLO_ADD | OP_BINARY_ALPHA},
    {"aten::add.out", op_lower_binary, TPUC_HLO_ADD | OP_BINARY_ALPHA},
    {"aten::sub.Tensor", op_lower_binary, TPUC_HLO_SUB | OP_BINARY_ALPHA},
    {"aten::sub_.Tensor", op_lower_binary, TPUC_HLO_SUB | OP_BINARY_ALPHA},
    {"aten::sub.out", op_lower_binary, TPUC_HLO_SUB | OP_BINARY_ALPHA},
    {"aten::mul.Tensor", op_lower_binary, TPUC_HLO_MUL},
    {"aten::mul_.Tensor", op_lower_binary, TPUC_HLO_MUL},
    {"aten::mul.out", op_lower_binary, TPUC_HLO_MUL},
    {"aten::div.Tensor", op_lower_binary, TPUC_HLO_DIV | OP_BINARY_TRUE_DIV},
    {"aten::div_.Tensor", op_lower_binary, TPUC_HLO_DIV | OP_BINARY_TRUE_DIV},
    {"aten::div.out", op_lower_binary, TPUC_HLO_DIV | OP_BINARY_TRUE_DIV},
    {"aten::add.Scalar", op_lower_binary, TPUC_HLO_ADD | OP_BINARY_ALPHA},
    {"aten::add_.Scalar", op_lower_binary, TPUC_HLO_ADD | OP_BINARY_ALPHA},
    {"aten::add.Scalar_out", op_lower_binary, TPUC_HLO_ADD | OP_BINARY_ALPHA},
    {"aten::sub.Scalar", op_lower_binary, TPUC_HLO_SUB | OP_BINARY_ALPHA},
    {"aten::sub_.Scalar", op_lower_binary, TPUC_HLO_SUB | OP_BINARY_ALPHA},
    {"aten::sub.Scalar_out", op_lower_binary, TPUC_HLO_SUB | OP_BINARY_ALPHA},
    {"aten::mul.Scalar", op_lower_binary, TPUC_HLO_MUL},
    {"aten::mul_.Scalar", op_lower_binary, TPUC_HLO_MUL},
    {"aten::mul.Scalar_out", op_lower_binary, TPUC_HLO_MUL},
    {"aten::div.Scalar", op_lower_binary, TPUC_HLO_DIV | OP_BINARY_TRUE_DIV},
    {"aten::div_.Scalar", op_lower_binary, TPUC_HLO_DIV | OP_BINARY_TRUE_DIV},
    {"aten::div.Scalar_out", op_lower_binary, TPUC_HLO_DIV | OP_BINARY_TRUE_DIV},
    {"aten::maximum", op_lower_binary, TPUC_HLO_MAX},
    {"aten::maximum.out", op_lower_binary, TPUC_HLO_MAX},
    {"aten::minimum", op_lower_binary, TPUC_HLO_MIN},
    {"aten::minimum.out", op_lower_binary, TPUC_HLO_MIN},
    {"aten::eq.Tensor", op_lower_compare, TPUC_HLO_EQ},
    {"aten::eq_.Tensor", op_lower_compare, TPUC_HLO_EQ},
    {"aten::eq.Tensor_out", op_lower_compare, TPUC_HLO_EQ},
    {"aten::ne.Tensor", op_lower_compare, TPUC_HLO_NE},
    {"aten::ne_.Tensor", op_lower_compare, TPUC_HLO_NE},
    {"aten::ne.Tensor_out", op_lower_compare, TPUC_HLO_NE},
    {"aten::lt.Tensor", op_lower_compare, TPUC_HLO_LT},
    {"aten::lt_.Tensor", op_lower_compare, TPUC_HLO_LT},
    {"aten::lt.Tensor_out", op_lower_compare, TPUC_HLO_LT},
    {"aten::le.Tensor", op_lower_compare, TPUC_HLO_LE},
    {"aten::le_.Tensor", op_lower_compare, TPUC_HLO_LE},
    {"aten::le.Tensor_out", op_lower_compare, TPUC_HLO_LE},
    {"aten::gt.Tensor", op_lower_compare, TPUC_HLO_GT},
    {"aten::gt_.Tensor", op_lower_compare, TPUC_HLO_GT},
    {"aten::gt.Tensor_out", op_lower_compare, TPUC_HLO_GT},
    {"aten::ge.Tensor", op_lower_compare, TPUC_HLO_GE},
    {"aten::ge_.Tensor", op_lower_compare, TPUC_HLO_GE},
    {"aten::ge.Tensor_out", op_lower_compare, TPUC_HLO_GE},
    {"aten::eq.Scalar", op_lower_compare, TPUC_HLO_EQ},
    {"aten::eq_.Scalar", op_lower_compare, TPUC_HLO_EQ},
    {"aten::eq.Scalar_out", op_lower_compare, TPUC_HLO_EQ},
    {"aten::ne.Scalar", op_lower_compare, TPUC_HLO_NE},
    {"aten::ne_.Scalar", op_lower_compare, TPUC_HLO_NE},
    {"aten::ne.Scalar_out", op_lower_compare, TPUC_HLO_NE},
    {"aten::lt.Scalar", op_lower_compare, TPUC_HLO_LT},
    {"aten::lt_.Scalar", op_lower_compare, TPUC_HLO_LT},
    {"aten::lt.Scalar_out", op_lower_compare, TPUC_HLO_LT},
    {"aten::le.Scalar", op_lower_compare, TPUC_HLO_LE},
    {"aten::le_.Scalar", op_lower_compare, TPUC_HLO_LE},
    {"aten::le.Scalar_out", op_lower_compare, TPUC_HLO_LE},
    {"aten::gt.Scalar", op_lower_compare, TPUC_HLO_GT},
    {"aten::gt_.Scalar", op_lower_compare, TPUC_HLO_GT},
    {"aten::gt.Scalar_out", op_lower_compare, TPUC_HLO_GT},
    {"aten::ge.Scalar", op_lower_compare, TPUC_HLO_GE},
    {"aten::ge_.Scalar", op_lower_compare, TPUC_HLO_GE},
    {"aten::ge.Scalar_out", op_lower_compare, TPUC_HLO_GE},
    {"aten::neg", op_lower_unary, TPUC_HLO_NEG},
    {"aten::neg_", op_lower_unary, TPUC_HLO_NEG},
    {"aten::neg.out", op_lower_unary, TPUC_HLO_NEG},
    {"aten::abs", op_lower_unary, TPUC_HLO_ABS},
    {"aten::abs_", op_lower_unary, TPUC_HLO_ABS},
    {"aten::abs.out", op_lower_unary, TPUC_HLO_ABS},
    {"aten::exp", op_lower_unary, TPUC_HLO_EXP | OP_UNARY_FLOAT},
    {"aten::exp_", op_lower_unary, TPUC_HLO_EXP | OP_UNARY_FLOAT},
    {"aten::exp.out", op_lower_unary, TPUC_HLO_EXP | OP_UNARY_FLOAT},
    {"aten::log", op_lower_unary, TPUC_HLO_LOG | OP_UNARY_FLOAT},
    {"aten::log_", op_lower_unary, TPUC_HLO_LOG | OP_UNARY_FLOAT},
    {"aten::log.out", op_lower_unary, TPUC_HLO_LOG | OP_UNARY_FLOAT},
    {"aten::sqrt", op_lower_unary, TPUC_HLO_SQRT | OP_UNARY_FLOAT},
    {"aten::sqrt_", op_lower_unary, TPUC_HLO_SQRT | OP_UNARY_FLOAT},
    {"aten::sqrt.out", op_lower_unary, TPUC_HLO_SQRT | OP_UNARY_FLOAT},
    {"aten::rsqrt", op_lower_unary, TPUC_HLO_RSQRT | OP_UNARY_FLOAT},
    {"aten::rsqrt_", op_lower_unary, TPUC_HLO_RSQRT | OP_UNARY_FLOAT},
    {"aten::rsqrt.out", op_lower_unary, TPUC_HLO_RSQRT | OP_UNARY_FLOAT},
    {"aten::tanh", op_lower_unary, TPUC_HLO_TANH | OP_UNARY_FLOAT},
    {"aten::tanh_", op_lower_unary, TPUC_HLO_TANH | OP_UNARY_FLOAT},
    {"aten::tanh.out", op_lower_unary, TPUC_HLO_TANH | OP_UNARY_FLOAT},
    {"aten::sigmoid", op_lower_unary, TPUC_HLO_LOGISTIC | OP_UNARY_FLOAT},
    {"aten::sigmoid_", op_lower_unary, TPUC_HLO_LOGISTIC | OP_UNARY_FLOAT},
    {"aten::sigmoid.out", op_lower_unary, TPUC_HLO_LOGISTIC | OP_UNARY_FLOAT},
    {"aten::sin", op_lower_unary, TPUC_HLO_SINE | OP_UNARY_FLOAT},
    {"aten::sin_", op_lower_unary, TPUC_HLO_SINE | OP_UNARY_FLOAT},
    {"aten::sin.out", op_lower_unary, TPUC_HLO_SINE | OP_UNARY_FLOAT},
    {"aten::cos", op_lower_unary, TPUC_HLO_COSINE | OP_UNARY_FLOAT},
    {"aten::cos_", op_lower_unary, TPUC_HLO_COSINE | OP_UNARY_FLOAT},
    {"aten::cos.out", op_lower_unary, TPUC_HLO_COSINE | OP_UNARY_FLOAT},
    {"aten::relu", op_lower_unary, OP_UNARY_RELU},
    {"aten::relu_", op_lower_unary, OP_UNARY_RELU},
    {"aten::reciprocal", op_lower_unary, OP_UNARY_RECIPROCAL | OP_UNARY_FLOAT},
    {"aten::reciprocal_", op_lower_unary, OP_UNARY_RECIPROCAL | OP_UNARY_FLOAT},
    {"aten::reciprocal.out", op_lower_unary, OP_UNARY_RECIPROCAL | OP_UNARY_FLOAT},
    {"aten::expm1", op_lower_unary, TPUC_HLO_EXPM1 | OP_UNARY_FLOAT},
    {"aten::expm1_", op_lower_unary, TPUC_HLO_EXPM1 | OP_UNARY_FLOAT},
    {"aten::expm1.out", op_lower_unary, TPUC_HLO_EXPM1 | OP_UNARY_FLOAT},
    {"aten::log1p", op_lower_unary, TPUC_HLO_LOG1P | OP_UNARY_FLOAT},
    {"aten::log1p_", op_lower_unary, TPUC_HLO_LOG1P | OP_UNARY_FLOAT},
    {"aten::log1p.out", op_lower_unary, TPUC_HLO_LOG1P | OP_UNARY_FLOAT},
    {"aten::tan", op_lower_unary, TPUC_HLO_TAN | OP_UNARY_FLOAT},
    {"aten::tan_", op_lower_unary, TPUC_HLO_TAN | OP_UNARY_FLOAT},
    {"aten::tan.out", op_lower_unary, TPUC_HLO_TAN | OP_UNARY_FLOAT},
    {"aten::floor", op_lower_unary, TPUC_HLO_FLOOR | OP_UNARY_INT_IDENTITY},
    {"aten::floor_", op_lower_unary, TPUC_HLO_FLOOR | OP_UNARY_INT_IDENTITY},
    {"aten::floor.out", op_lower_unary, TPUC_HLO_FLOOR | OP_UNARY_INT_IDENTITY},
    {"aten::ceil", op_lower_unary, TPUC_HLO_CEIL | OP_UNARY_INT_IDENTITY},
    {"aten::ceil_", op_lower_unary, TPUC_HLO_CEIL | OP_UNARY_INT_IDENTITY},
    {"aten::ceil.out", op_lower_unary, TPUC_HLO_CEIL | OP_UNARY_INT_IDENTITY},
    {"aten::round", op_lower_unary,
     TPUC_HLO_ROUND_NEAREST_EVEN | OP_UNARY_INT_IDENTITY},
    {"aten::round_", op_lower_unary,
     TPUC_HLO_ROUND_NEAREST_EVEN | OP_UNARY_INT_IDENTITY},
    {"aten::round.out", op_lower_unary,
     TPUC_HLO_ROUND_NEAREST_EVEN | OP_UNARY_INT_IDENTITY},
    {"aten::sign", op_lower_unary, TPUC_HLO_SIGN},
    {"aten::sign_", op_lower_unary, TPUC_HLO_SIGN},
    {"aten::sign.out", op_lower_unary, TPUC_HLO_SIGN},
    {"aten::bitwise_not", op_lower_unary, TPUC_HLO_NOT | OP_UNARY_INT_ONLY},
    {"aten::bitwise_not_", op_lower_unary, TPUC_HLO_NOT | OP_UNARY_INT_ONLY},
    {"aten::bitwise_not.out", op_lower_unary, TPUC_HLO_NOT | OP_UNARY_INT_ONLY},
    {"aten::bitwise_and.Tensor", op_lower_binary,
     TPUC_HLO_AND | OP_BINARY_INT_ONLY},
    {"aten::bitwise_and_.Tensor", op_lower_binary,
     TPUC_HLO_AND | OP_BINARY_INT_ONLY},
    {"aten::bitwise_and.Tensor_out", op_lower_binary,
     TPUC_HLO_AND | OP_BINARY_INT_ONLY},
    {"aten::bitwise_or.Tensor", op_lower_binary,
     TPUC_HLO_OR | OP_BINARY_INT_ONLY},
    {"aten::bitwise_or_.Tensor", op_lower_binary,
     TPUC_HLO_OR | OP_BINARY_INT_ONLY},
    {"aten::bitwise_or.Tensor_out", op_lower_binary,
     TPUC_HLO_OR | OP_BINARY_INT_ONLY},
    {"aten::bitwise_xor.Tensor", op_lower_binary,
     TPUC_HLO_XOR | OP_BINARY_INT_ONLY},
    {"aten::bitwise_xor_.Tensor", op_lower_binary,
     TPUC_HLO_XOR | OP_BINARY_INT_ONLY},
    {"aten::bitwise_xor.Tensor_out", op_lower_binary,
     TPUC_HLO_XOR | OP_BINARY_INT_ONLY},
    {"aten::atan2", op_lower_binary, TPUC_HLO_ATAN2 | OP_BINARY_TRUE_DIV},
    {"aten::atan2_", op_lower_binary, TPUC_HLO_ATAN2 | OP_BINARY_TRUE_DIV},
    {"aten::atan2.out", op_lower_binary, TPUC_HLO_ATAN2 | OP_BINARY_TRUE_DIV},
    {"aten::where.self", op_lower_where, 0},
    {"aten::where.self_out", op_lower_where, 0},
    {"aten::sum", op_lower_reduce, OP_REDUCE_SUM},
    {"aten::sum.out", op_lower_reduce, OP_REDUCE_SUM},
    {"aten::sum.dim_IntList", op_lower_reduce, OP_REDUCE_SUM | OP_REDUCE_DIMS},
    {"aten::sum.IntList_out", op_lower_reduce, OP_REDUCE_SUM | OP_REDUCE_DIMS},
    {"aten::mean", op_lower_reduce, OP_REDUCE_MEAN},
    {"aten::mean.dtype_out", op_lower_reduce, OP_REDUCE_MEAN},
    {"aten::mean.dim", op_lower_reduce, OP_REDUCE_MEAN | OP_REDUCE_DIMS},
    {"aten::mean.out", op_lower_reduce, OP_REDUCE_MEAN | OP_REDUCE_DIMS},
    {"aten::amax", op_lower_reduce, OP_REDUCE_MAX | OP_REDUCE_DIMS},
    {"aten::amax.out", op_lower_reduce, OP_REDUCE_MAX | OP_REDUCE_DIMS},
    {"aten::amin", op_lower_reduce, OP_REDUCE_MIN | OP_REDUCE_DIMS},
    {"aten::amin.out", op_lower_reduce, OP_REDUCE_MIN | OP_REDUCE_DIMS},
    {"aten::_softmax", op_lower_softmax, 0},
    {"aten::_softmax.out", op_lower_softmax, 0},
    {"aten::_log_softmax", op_lower_softmax, 1},
    {"aten::_log_softmax.out", op_lower_softmax, 1},
    {"aten::mm", op_lower_matmul, 0},
    {"aten::mm.out", op_lower_matmul, 0},
    {"aten::_scaled_mm", op_lower_scaled_mm, 0},
    {"aten::_scaled_mm.out", op_lower_scaled_mm, 0},
    {"aten::bmm", op_lower_matmul, 1},
    {"aten::bmm.out", op_lower_matmul, 1},
    {"aten::fill_.Scalar", op_lower_fill, 0},
    {"aten::fill_.Tensor", op_lower_fill, 0},
    {"aten::fill.Scalar", op_lower_fill, 0},
    {"aten::fill.Tensor", op_lower_fill, 0},
    {"aten::zero_", op_lower_fill, 1},
    {"aten::native_dropout_backward", op_lower_dropout_backward, 0},
    {"aten::conj_physical_", op_lower_conj, 0},
    {"aten::conj_physical.out", op_lower_conj, 0},
    {"aten::_conj_physical", op_lower_conj, 0},
    {"aten::arange", op_lower_arange, 1},
    {"aten::arange.start", op_lower_arange, 2},
    {"aten::arange.start_step", op_lower_arange, 3},
    {"aten::linspace", op_lower_linspace, 0},
    {"aten::logspace", op_lower_linspace, 1},
    {"aten::complex", op_lower_complex, 0},
    {"aten::polar", op_lower_complex, 1},
    /* GradScaler's scale update (optim.c): scale and growth tracker both
     * written in place, scale returned. */
    {"aten::_amp_update_scale_", op_lower_amp_update_scale, 0},
    /* Internal (not registered with PyTorch): tpuc_op_copy, and the
     * per-parameter step of the fused optimizers (tpu_kernels.cpp). */
    {"tpuc::copy", op_lower_copy, 0},
    {"tpuc::adam_step", op_lower_adam_step, 0},
    {"tpuc::sgd_step", op_lower_sgd_step, 0},
    {"tpuc::adagrad_step", op_lower_adagrad_step, 0},
    /* GradScaler: the binding walks the gradient list of
     * _amp_foreach_non_finite_check_and_unscale_ (tpu_native.cpp). */
    {"tpuc::amp_unscale", op_lower_amp_unscale, 0},
    {NULL, NULL, 0},
};

static const op_entry* const kTables[] = {
    op_table_core,    op_table_index,  op_table_nn,      op_table_math,
    op_table_special, op_table_fft,    op_table_linalg,  op_table_moe,
    op_table_random,  op_table_dynamic};

/* The tables flattened into one array of entries, built once: lookups by
 * index are O(1) on every op call. */
static const op_entry** g_flat = NULL;
static size_t g_flat_len = 0;
/* The flat index ranges of op_table_random and op_table_dynamic. */
static size_t g_random_lo = 0, g_random_hi = 0;
static size_t g_dynamic_lo = 0, g_dynamic_hi = 0;
static pthread_once_t g_flat_once = PTHREAD_ONCE_INIT;

static void flatten(void) {
  size_t n = 0;
  for (size_t t = 0; t < sizeof kTables / sizeof kTables[0]; t++)
    for (const op_entry* e = kTables[t]; e->name != NULL; e++) n++;
  const op_entry** flat = malloc((n ? n : 1) * sizeof *flat);
  if (flat == NULL) return; /* ops_entry then finds nothing: all on CPU */
  size_t i = 0;
  for (size_t t = 0; t < sizeof kTables / sizeof kTables[0]; t++) {
    if (kTables[t] == op_table_random) g_random_lo = i;
    if (kTables[t] == op_table_dynamic) g_dynamic_lo = i;
    for (const op_entry* e = kTables[t]; e->name != NULL; e++) flat[i++] = e;
    if (kTables[t] == op_table_random) g_random_hi = i;
    if (kTables[t] == op_table_dynamic) g_dynamic_hi = i;
  }
  g_flat = flat;
  g_flat_len = n;
}

const op_entry* ops_entry(size_t i) {
  pthread_once(&g_flat_once, flatten);
  return i < g_flat_len ? g_flat[i] : NULL;
}

bool ops_entry_is_random(size_t i) {
  pthread_once(&g_flat_once, flatten);
  return i >= g_random_lo && i < g_random_hi;
}

bool ops_entry_is_dynamic(size_t i) {
  pthread_once(&g_flat_once, flatten);
  return i >= g_dynamic_lo && i < g_dynamic_hi;
}
