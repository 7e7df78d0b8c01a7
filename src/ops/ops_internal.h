/* Private pieces of the native op layer (src/ops). */
#ifndef TPUC_SRC_OPS_OPS_INTERNAL_H_
#define TPUC_SRC_OPS_OPS_INTERNAL_H_

#include "tpuc/tpuc.h"

#define OP_MAX_ARGS 16
#define OP_MAX_OUTS 4

/* One op call being lowered: its arguments as values of @main. */
typedef struct op_ctx {
  tpuc_hlo_module* module;
  tpuc_hlo_fn* fn;
  const tpuc_op_arg* args;
  size_t nargs;
  const tpuc_op_options* opts;
  /* Per argument: the value (a tensor read from its storage, or a rank-0
   * scalar of f64/i64), its type, and its promotion class. */
  tpuc_hlo_value vals[OP_MAX_ARGS];
  tpuc_hlo_type types[OP_MAX_ARGS];
  /* Results set by the lowering. */
  tpuc_hlo_value outs[OP_MAX_OUTS];
  size_t nouts;
} op_ctx;

typedef tpuc_status* (*op_lower_fn)(op_ctx* c, int param);

typedef struct op_entry {
  const char* name; /* "aten::add.Tensor" */
  op_lower_fn lower;
  int param; /* passed to `lower` (which binary op, say) */
} op_entry;

const op_entry* ops_entry(size_t i);

/* PyTorch result_type over the listed arguments (tensors and scalars). */
tpuc_status* op_result_type(const op_ctx* c, const int* which, size_t n,
                            tpuc_dtype* out);
/* The value of argument `i` converted to `dtype` and broadcast to `shape`
 * (numpy rules; the shape must be a broadcast of the argument's). */
tpuc_status* op_operand(op_ctx* c, int i, tpuc_dtype dtype,
                        const tpuc_hlo_type* shape, tpuc_hlo_value* out);
/* Broadcast shape of the listed tensor arguments (scalars are rank 0). */
tpuc_status* op_broadcast_shape(const op_ctx* c, const int* which, size_t n,
                                tpuc_hlo_type* out);

/* Lowerings (elementwise.c, matmul.c). */
tpuc_status* op_lower_binary(op_ctx* c, int param);
tpuc_status* op_lower_compare(op_ctx* c, int param);
tpuc_status* op_lower_unary(op_ctx* c, int param);
tpuc_status* op_lower_where(op_ctx* c, int param);
tpuc_status* op_lower_matmul(op_ctx* c, int param);
tpuc_status* op_lower_reduce(op_ctx* c, int param);
tpuc_status* op_lower_softmax(op_ctx* c, int log);

/* op_lower_reduce: which reduction, and whether argument 1 is a dim list. */
#define OP_REDUCE_SUM 1
#define OP_REDUCE_MEAN 2
#define OP_REDUCE_MAX 3
#define OP_REDUCE_MIN 4
#define OP_REDUCE_DIMS 0x100

/* Parameters of op_lower_binary / op_lower_unary beyond the HLO enums. */
#define OP_BINARY_TRUE_DIV 0x100    /* ints promote to the default float */
#define OP_BINARY_ALPHA 0x200       /* third argument multiplies the second */
#define OP_BINARY_INT_ONLY 0x400    /* bool/int operands only (bitwise ops) */
#define OP_BINARY_FLOAT_ONLY 0x800  /* float operands only (else the CPU) */
#define OP_UNARY_FLOAT 0x100        /* ints promote to the default float */
#define OP_UNARY_RELU 0x200         /* max(x, 0) */
#define OP_UNARY_RECIPROCAL 0x400   /* 1 / x */
#define OP_UNARY_INT_IDENTITY 0x800 /* rounding: ints and bools unchanged */
#define OP_UNARY_INT_ONLY 0x1000    /* bool/int only (bitwise_not) */

#endif /* TPUC_SRC_OPS_OPS_INTERNAL_H_ */
