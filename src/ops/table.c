/* The native op table: ATen schema names and their lowerings. Every entry
 * gets the binding's generic boxed kernel. */
#include "ops/ops_internal.h"

static const op_entry kOps[] = {
    {"aten::add.Tensor", op_lower_binary, TPUC_HLO_ADD | OP_BINARY_ALPHA},
    {"aten::sub.Tensor", op_lower_binary, TPUC_HLO_SUB | OP_BINARY_ALPHA},
    {"aten::mul.Tensor", op_lower_binary, TPUC_HLO_MUL},
    {"aten::div.Tensor", op_lower_binary, TPUC_HLO_DIV | OP_BINARY_TRUE_DIV},
    {"aten::add.Scalar", op_lower_binary, TPUC_HLO_ADD | OP_BINARY_ALPHA},
    {"aten::sub.Scalar", op_lower_binary, TPUC_HLO_SUB | OP_BINARY_ALPHA},
    {"aten::mul.Scalar", op_lower_binary, TPUC_HLO_MUL},
    {"aten::div.Scalar", op_lower_binary, TPUC_HLO_DIV | OP_BINARY_TRUE_DIV},
    {"aten::maximum", op_lower_binary, TPUC_HLO_MAX},
    {"aten::minimum", op_lower_binary, TPUC_HLO_MIN},
    {"aten::eq.Tensor", op_lower_compare, TPUC_HLO_EQ},
    {"aten::ne.Tensor", op_lower_compare, TPUC_HLO_NE},
    {"aten::lt.Tensor", op_lower_compare, TPUC_HLO_LT},
    {"aten::le.Tensor", op_lower_compare, TPUC_HLO_LE},
    {"aten::gt.Tensor", op_lower_compare, TPUC_HLO_GT},
    {"aten::ge.Tensor", op_lower_compare, TPUC_HLO_GE},
    {"aten::eq.Scalar", op_lower_compare, TPUC_HLO_EQ},
    {"aten::ne.Scalar", op_lower_compare, TPUC_HLO_NE},
    {"aten::lt.Scalar", op_lower_compare, TPUC_HLO_LT},
    {"aten::le.Scalar", op_lower_compare, TPUC_HLO_LE},
    {"aten::gt.Scalar", op_lower_compare, TPUC_HLO_GT},
    {"aten::ge.Scalar", op_lower_compare, TPUC_HLO_GE},
    {"aten::neg", op_lower_unary, TPUC_HLO_NEG},
    {"aten::abs", op_lower_unary, TPUC_HLO_ABS},
    {"aten::exp", op_lower_unary, TPUC_HLO_EXP | OP_UNARY_FLOAT},
    {"aten::log", op_lower_unary, TPUC_HLO_LOG | OP_UNARY_FLOAT},
    {"aten::sqrt", op_lower_unary, TPUC_HLO_SQRT | OP_UNARY_FLOAT},
    {"aten::rsqrt", op_lower_unary, TPUC_HLO_RSQRT | OP_UNARY_FLOAT},
    {"aten::tanh", op_lower_unary, TPUC_HLO_TANH | OP_UNARY_FLOAT},
    {"aten::sigmoid", op_lower_unary, TPUC_HLO_LOGISTIC | OP_UNARY_FLOAT},
    {"aten::sin", op_lower_unary, TPUC_HLO_SINE | OP_UNARY_FLOAT},
    {"aten::cos", op_lower_unary, TPUC_HLO_COSINE | OP_UNARY_FLOAT},
    {"aten::relu", op_lower_unary, OP_UNARY_RELU},
    {"aten::reciprocal", op_lower_unary, OP_UNARY_RECIPROCAL | OP_UNARY_FLOAT},
    {"aten::where.self", op_lower_where, 0},
    {"aten::mm", op_lower_matmul, 0},
    {"aten::bmm", op_lower_matmul, 1},
};

const op_entry* ops_entry(size_t i) {
  return i < sizeof kOps / sizeof kOps[0] ? &kOps[i] : NULL;
}
