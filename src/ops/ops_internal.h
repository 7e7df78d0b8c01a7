/* Private pieces of the native op layer (src/ops). */
#ifndef TPUC_SRC_OPS_OPS_INTERNAL_H_
#define TPUC_SRC_OPS_OPS_INTERNAL_H_

#include "common/fingerprint.h"
#include "runtime/fused_internal.h"
#include "tpuc/tpuc.h"

#define OP_MAX_ARGS 16
#define OP_MAX_OUTS TPUC_OP_MAX_RESULTS
/* Sizes a dynamic-shape op's first phase may compute. */
#define OP_MAX_DYN 4
/* Tensors in all Tensor[] arguments of one call, together. */
#define OP_MAX_LIST 64

/* "Scalar argument `arg` must lie in (lo, hi)" (each bound inclusive or
 * not; NaN bad unless nan_ok, infinities bad unless inf_ok), else the call
 * fails with code and msg. */
typedef struct op_host_check {
  int arg;
  double lo, hi;
  bool lo_incl, hi_incl;
  bool nan_ok, inf_ok;
  tpuc_code code;
  const char* msg;
} op_host_check;
#define OP_MAX_HOST_CHECKS 2

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
  /* TENSOR_LIST argument i: list_vals[i][k] / list_types[i][k] for entry k
   * (list_vals[i][k] is -1 for a None entry); list_len[i] entries. */
  tpuc_hlo_value* list_vals[OP_MAX_ARGS];
  tpuc_hlo_type* list_types[OP_MAX_ARGS];
  size_t list_len[OP_MAX_ARGS];
  /* Dynamic-shape ops (op_table_dynamic) run twice: phase 1 returns their
   * result sizes as rank-0 s64 values, phase 2 gets them in dyn[]. Other
   * ops run phase 0. */
  int phase;
  int64_t dyn[OP_MAX_DYN];
  /* Random ops: the rng state u64[2] (seed, counter), else -1. */
  bool random;
  tpuc_hlo_value rng;
  /* A small random call's counters drawn by a program of their count's
   * bucket (tpuc::random_words, shared by every call of that bucket): its
   * u32[2 * words_total] result, the two words of each counter side by
   * side, is an argument in place of `rng`, else -1. Draws take the
   * counters from it in order; words_used counts the counters drawn so far
   * (in every program), words_region is set by a draw inside a region (a
   * sampler's loop: such a call is never split). */
  tpuc_hlo_value words;
  int64_t words_total, words_used;
  bool words_region;
  tpuc_hlo_fn* main_fn;
  /* Internal: the u8 storage argument behind each tensor read. */
  tpuc_hlo_value storage_vals[OP_MAX_ARGS];
  tpuc_hlo_value list_storage[OP_MAX_LIST];
  tpuc_hlo_value list_pool[OP_MAX_LIST];
  tpuc_hlo_type list_pool_types[OP_MAX_LIST];
  size_t list_used;
  /* Results set by the lowering. */
  tpuc_hlo_value outs[OP_MAX_OUTS];
  size_t nouts;
  /* Optional argument check computed on the device (an index in range,
   * say): when has_check, `check` is a rank-0 i1 that is true when the
   * arguments are bad; the call then waits for it and fails with
   * check_code and check_msg (a static string) at this op, as the CPU
   * would. */
  bool has_check;
  tpuc_hlo_value check;
  tpuc_code check_code;
  const char* check_msg;
  /* Checks of a Python scalar argument's value, done on the host at every
   * call (op_host_check): no device round trip, so fused mode need not run
   * its segment to raise them. */
  op_host_check host_checks[OP_MAX_HOST_CHECKS];
  size_t n_host_checks;
} op_ctx;

typedef tpuc_status* (*op_lower_fn)(op_ctx* c, int param);

typedef struct op_entry {
  const char* name; /* "aten::add.Tensor" */
  op_lower_fn lower;
  int param; /* passed to `lower` (which binary op, say) */
} op_entry;

const op_entry* ops_entry(size_t i);
/* Scalar values a lowering specializes its program on (pow's exponent 2, 3,
 * 0.5, ...): a class that goes into the program key, 0 for any other value
 * (math.c). */
int op_scalar_class(const op_entry* e, const tpuc_op_arg* args, size_t nargs);
/* Entry i is in op_table_random (its calls take a generator state). */
bool ops_entry_is_random(size_t i);
/* Entry i is in op_table_dynamic (it runs in two phases). */
bool ops_entry_is_dynamic(size_t i);

/* The op table is the concatenation of one table per source file; each
 * ends with an entry whose name is NULL. */
extern const op_entry op_table_core[];  /* table.c */
extern const op_entry op_table_index[]; /* index.c: indexing, shapes, fill */
extern const op_entry op_table_nn[];    /* nn.c: norms, activations, conv */
extern const op_entry op_table_math[];  /* math.c: more math, scans, sort */
extern const op_entry op_table_random[]; /* random.c: device RNG */
extern const op_entry op_table_dynamic[]; /* dynamic.c: data-dependent shapes */
extern const op_entry op_table_special[]; /* special.c: special functions */
extern const op_entry op_table_fft[];     /* fft.c: FFTs */
extern const op_entry op_table_linalg[];  /* linalg.c: factorizations */
extern const op_entry op_table_moe[];     /* moe.c: grouped mm, histc */

/* Ops (base names, "acos" covers acos, acos_ and acos.out) whose lowerings
 * in each file are written for complex tensors too, reviewed one by one;
 * NULL-terminated. Any other op given a complex tensor runs on the CPU. */
extern const char* const op_complex_index[];
extern const char* const op_complex_nn[];
extern const char* const op_complex_math[];
extern const char* const op_complex_special[];
extern const char* const op_complex_linalg[];
extern const char* const op_complex_random[];

/* Fused segments and graph captures live in the runtime layer
 * (runtime/fused_internal.h): the op layer records into them. */

/* ---- helpers for lowerings ---- */

/* Adds a host check of scalar argument i (SCALAR kind); false when the
 * argument is not a host scalar (check it on the device then). */
bool op_host_check_add(op_ctx* c, int i, double lo, bool lo_incl, double hi,
                       bool hi_incl, tpuc_code code, const char* msg);
/* Adds c10's overflow check of a scalar converted to float dtype `dt`
 * (NaN passes; infinities pass where `dt` has them; finite values must lie
 * within its range); false when there is nothing to check on the host. */
bool op_host_check_float_fits(op_ctx* c, int i, tpuc_dtype dt);

/* PyTorch's ScalarType name of a dtype ("Float", "BFloat16"). */
const char* op_torch_dtype_name(tpuc_dtype d);
/* UNIMPLEMENTED: "run this call on the CPU" (printf-style reason). */
tpuc_status* op_unimpl(const char* why);
/* Argument i is a device tensor / a tensor or a scalar / absent (None or
 * past the end). */
bool op_is_tensor(const op_ctx* c, int i);
bool op_is_value(const op_ctx* c, int i);
bool op_is_none(const op_ctx* c, int i);
/* Argument i as an int (INT or BOOL kind), or `dflt` when it is None or
 * absent; UNIMPLEMENTED for any other kind. */
tpuc_status* op_int_arg(const op_ctx* c, int i, int64_t dflt, int64_t* out);
/* Argument i's string, or `dflt` when None/absent. */
const char* op_str_arg(const op_ctx* c, int i, const char* dflt);
/* Wraps `dim` into [0, rank) (rank 0 takes -1 and 0), or OUT_OF_RANGE with
 * PyTorch's message. */
tpuc_status* op_wrap_dim(int rank, int64_t dim, int64_t* out);
/* Half floats (f16, bf16) compute in f32, as the CPU kernels do. */
tpuc_dtype op_accumulation_dtype(tpuc_dtype d);
/* Rank-0 constant `v` of `dtype`, broadcast to `shape` when non-NULL. */
tpuc_status* op_const(op_ctx* c, tpuc_dtype dtype, double v,
                      const tpuc_hlo_type* shape, tpuc_hlo_value* out);
/* Scalar argument i (SCALAR kind, a 0-d tensor, or a static INT/BOOL as
 * a constant) converted to `dtype`,
 * rank 0, broadcast to `shape` when non-NULL. */
tpuc_status* op_scalar(op_ctx* c, int i, tpuc_dtype dtype,
                       const tpuc_hlo_type* shape, tpuc_hlo_value* out);
/* flat[idx]: elements of the rank-1 `flat` at the s64 indices `idx`
 * (shape [batch..., 1], in range); the result has the batch shape. */
tpuc_status* op_gather_elements(tpuc_hlo_fn* fn, tpuc_hlo_value flat,
                                tpuc_hlo_value idx, tpuc_hlo_value* out);
/* `into` with `upd` combined by `body` into its slices along dim 0 at the
 * s64 indices `idx` (shape [batch..., 1]); upd is [batch..., into's other
 * dims...]. `unique`: no index repeats. */
tpuc_status* op_scatter_first(tpuc_hlo_fn* fn, tpuc_hlo_value into,
                              tpuc_hlo_value idx, tpuc_hlo_value upd,
                              tpuc_hlo_fn* body, bool unique,
                              tpuc_hlo_value* out);
/* x[..., idx[j], ...]: slices of `x` (type `xt`) along `dim` at the s64
 * indices `idx` (shape [m, 1], in range); dim's size becomes m. */
tpuc_status* op_take_along(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                           const tpuc_hlo_type* xt, int64_t dim,
                           tpuc_hlo_value idx, tpuc_hlo_value* out);
/* Rank-0 i1: some element of the i1 value p is true. */
tpuc_status* op_any_true(op_ctx* c, tpuc_hlo_value p, tpuc_hlo_value* out);
/* log|Gamma(x)| of f64 x (special.c). */
tpuc_status* op_lgamma_f64(op_ctx* c, tpuc_hlo_value x, tpuc_hlo_value* out);
/* Random ops: `count` independent draws of uniform u32 (or u64) bits with
 * `shape`, from c->rng. */
tpuc_status* op_random_bits(op_ctx* c, tpuc_dtype bits,
                            const tpuc_hlo_type* shape, tpuc_hlo_value* out);

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

/* Lowerings (elementwise.c, matmul.c, reduce.c). */
tpuc_status* op_lower_binary(op_ctx* c, int param);
tpuc_status* op_lower_compare(op_ctx* c, int param);
tpuc_status* op_lower_unary(op_ctx* c, int param);
tpuc_status* op_lower_where(op_ctx* c, int param);
tpuc_status* op_lower_matmul(op_ctx* c, int param);
tpuc_status* op_lower_scaled_mm(op_ctx* c, int param);
tpuc_status* op_lower_reduce(op_ctx* c, int param);
tpuc_status* op_lower_softmax(op_ctx* c, int log);
tpuc_status* op_lower_copy(op_ctx* c, int param); /* tpuc::copy */
tpuc_status* op_lower_fill(op_ctx* c, int param); /* fill_, zero_ */
tpuc_status* op_lower_dropout_backward(op_ctx* c, int param);
tpuc_status* op_lower_adam_step(op_ctx* c, int param); /* optim.c */
tpuc_status* op_lower_sgd_step(op_ctx* c, int param);
tpuc_status* op_lower_adagrad_step(op_ctx* c, int param);
tpuc_status* op_lower_amp_unscale(op_ctx* c, int param);
tpuc_status* op_lower_amp_update_scale(op_ctx* c, int param);
tpuc_status* op_lower_arange(op_ctx* c, int param);
tpuc_status* op_lower_linspace(op_ctx* c, int param);
tpuc_status* op_lower_complex(op_ctx* c, int param);
tpuc_status* op_lower_conj(op_ctx* c, int param);

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
