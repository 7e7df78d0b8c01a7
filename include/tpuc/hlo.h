/* tpuc StableHLO program builder.
 *
 * Builds a module with one entry function `@main` over typed SSA values and
 * prints it as MLIR text (ops in generic form) that a PJRT plugin compiles.
 * Every emitter infers its result type(s) from its operands and validates
 * them; bad input returns TPUC_INVALID_ARGUMENT naming the op and the
 * problem, and leaves the module unchanged.
 *
 *   tpuc_hlo_module* m;  tpuc_hlo_fn* fn;  tpuc_hlo_value x, y;
 *   tpuc_hlo_module_create("add_one", &m);
 *   tpuc_hlo_main(m, &fn);
 *   tpuc_hlo_type t = tpuc_hlo_type_make(TPUC_DTYPE_F32, (int64_t[]){2}, 1);
 *   tpuc_hlo_arg(fn, &t, &x);
 *   tpuc_hlo_unary(fn, TPUC_HLO_EXP, x, &y);
 *   tpuc_hlo_return(fn, &y, 1);
 *   tpuc_hlo_module_print(m, &text, &len);    (free(text) afterwards)
 *   tpuc_hlo_module_destroy(m);
 *
 * Bodies. A `tpuc_hlo_fn` is a body that ops are emitted into: either @main
 * or a region (the body of reduce, sort, while, ...). A region is created
 * with its block argument types, filled with ops, closed with
 * tpuc_hlo_return, then attached to exactly one op. Values belong to the
 * body they were created in and may only be used there (a region cannot
 * capture values of an enclosing body; pass them as operands instead). A
 * body is sealed by tpuc_hlo_return: nothing can be emitted into it after.
 * The module owns every body; regions that are never attached are simply
 * not printed. */
#ifndef TPUC_HLO_H_
#define TPUC_HLO_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpuc/buffer.h" /* TPUC_MAX_RANK */
#include "tpuc/dtype.h"
#include "tpuc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tpuc_hlo_module tpuc_hlo_module;
typedef struct tpuc_hlo_fn tpuc_hlo_fn;
/* An SSA value: an id unique within its module. */
typedef int32_t tpuc_hlo_value;

/* A ranked tensor type with static dims (same layout as tpuc_value_type). */
typedef struct tpuc_hlo_type {
  tpuc_dtype dtype;
  int rank;
  int64_t dims[TPUC_MAX_RANK];
} tpuc_hlo_type;

/* Builds a type. A rank outside [0, TPUC_MAX_RANK] or NULL dims with a
 * positive rank gives a type that every emitter rejects. */
tpuc_hlo_type tpuc_hlo_type_make(tpuc_dtype dtype, const int64_t* dims,
                                 int rank);
/* Rank-0 type of `dtype`. */
tpuc_hlo_type tpuc_hlo_type_scalar(tpuc_dtype dtype);
int64_t tpuc_hlo_type_num_elements(const tpuc_hlo_type* type);
bool tpuc_hlo_type_equal(const tpuc_hlo_type* a, const tpuc_hlo_type* b);

/* ---- module, bodies, values -------------------------------------------- */

/* `name` (an identifier: letters, digits, '_', '.', '$'; NULL means
 * "tpuc") becomes `module @name`. */
tpuc_status* tpuc_hlo_module_create(const char* name, tpuc_hlo_module** out);
void tpuc_hlo_module_destroy(tpuc_hlo_module* module);

/* The entry function @main (created on first call, the same afterwards). */
tpuc_status* tpuc_hlo_main(tpuc_hlo_module* module, tpuc_hlo_fn** out);
/* Appends an argument to @main. */
tpuc_status* tpuc_hlo_arg(tpuc_hlo_fn* fn, const tpuc_hlo_type* type,
                          tpuc_hlo_value* out);
/* Declares that @main argument `arg` may be donated to result
 * `output_index` (printed as {tf.aliasing_output = K : i32}). Checked
 * against the result types when the module is printed. -1 removes it. */
tpuc_status* tpuc_hlo_arg_alias(tpuc_hlo_fn* fn, tpuc_hlo_value arg,
                                int output_index);

/* Creates a region body with `n` block arguments. */
tpuc_status* tpuc_hlo_region_create(tpuc_hlo_module* module,
                                    const tpuc_hlo_type* arg_types, size_t n,
                                    tpuc_hlo_fn** out);
size_t tpuc_hlo_num_args(const tpuc_hlo_fn* fn);
/* The i-th argument of a body (@main or a region). */
tpuc_status* tpuc_hlo_get_arg(const tpuc_hlo_fn* fn, size_t i,
                              tpuc_hlo_value* out);

/* Sets the body's results (func.return for @main, stablehlo.return for a
 * region) and seals it. Exactly once per body. */
tpuc_status* tpuc_hlo_return(tpuc_hlo_fn* fn, const tpuc_hlo_value* values,
                             size_t n);

/* Type of a value of body `fn`. */
tpuc_status* tpuc_hlo_value_type(const tpuc_hlo_fn* fn, tpuc_hlo_value value,
                                 tpuc_hlo_type* out);

/* Prints the module as MLIR text into a malloc'ed NUL-terminated string
 * (caller frees); `len` (may be NULL) receives strlen. @main must have
 * returned. */
tpuc_status* tpuc_hlo_module_print(const tpuc_hlo_module* module, char** text,
                                   size_t* len);

/* ---- elementwise -------------------------------------------------------- */

typedef enum tpuc_hlo_unary_op {
  TPUC_HLO_ABS = 0,  /* signed int, float, complex (complex -> real) */
  TPUC_HLO_NEG,      /* int, float, complex */
  TPUC_HLO_EXP,      /* float, complex: stablehlo.exponential */
  TPUC_HLO_EXPM1,    /* float, complex */
  TPUC_HLO_LOG,      /* float, complex */
  TPUC_HLO_LOG1P,    /* float, complex */
  TPUC_HLO_SQRT,     /* float, complex */
  TPUC_HLO_RSQRT,    /* float, complex */
  TPUC_HLO_CBRT,     /* float, complex */
  TPUC_HLO_TANH,     /* float, complex */
  TPUC_HLO_LOGISTIC, /* float, complex */
  TPUC_HLO_SINE,     /* float, complex */
  TPUC_HLO_COSINE,   /* float, complex */
  TPUC_HLO_TAN,      /* float, complex */
  TPUC_HLO_FLOOR,    /* float */
  TPUC_HLO_CEIL,     /* float */
  TPUC_HLO_ROUND_NEAREST_EVEN, /* float */
  TPUC_HLO_ROUND_NEAREST_AFZ,  /* float */
  TPUC_HLO_SIGN,               /* signed int, float, complex */
  TPUC_HLO_NOT,                /* i1, int */
  TPUC_HLO_IS_FINITE,          /* float -> i1 */
  TPUC_HLO_POPCNT,             /* int */
  TPUC_HLO_CLZ,                /* int: stablehlo.count_leading_zeros */
  TPUC_HLO_REAL,               /* float, complex -> real */
  TPUC_HLO_IMAG,               /* float, complex -> real */
  TPUC_HLO_UNARY_COUNT_
} tpuc_hlo_unary_op;

/* Operands of a binary op have identical types (no implicit broadcasting). */
typedef enum tpuc_hlo_binary_op {
  TPUC_HLO_ADD = 0,                /* all (i1: or) */
  TPUC_HLO_SUB,                    /* int, float, complex */
  TPUC_HLO_MUL,                    /* all (i1: and) */
  TPUC_HLO_DIV,                    /* int, float, complex */
  TPUC_HLO_REM,                    /* int, float */
  TPUC_HLO_POW,                    /* int, float, complex */
  TPUC_HLO_MAX,                    /* all */
  TPUC_HLO_MIN,                    /* all */
  TPUC_HLO_AND,                    /* i1, int */
  TPUC_HLO_OR,                     /* i1, int */
  TPUC_HLO_XOR,                    /* i1, int */
  TPUC_HLO_SHIFT_LEFT,             /* int */
  TPUC_HLO_SHIFT_RIGHT_ARITHMETIC, /* int */
  TPUC_HLO_SHIFT_RIGHT_LOGICAL,    /* int */
  TPUC_HLO_ATAN2,                  /* float, complex */
  TPUC_HLO_COMPLEX, /* f32 x f32 -> complex<f32>, f64 x f64 -> complex<f64> */
  TPUC_HLO_BINARY_COUNT_
} tpuc_hlo_binary_op;

typedef enum tpuc_hlo_compare_dir {
  TPUC_HLO_EQ = 0,
  TPUC_HLO_NE,
  TPUC_HLO_LT,
  TPUC_HLO_LE,
  TPUC_HLO_GT,
  TPUC_HLO_GE,
} tpuc_hlo_compare_dir;

/* MLIR op name of an op kind ("stablehlo.exponential"); NULL if invalid. */
const char* tpuc_hlo_unary_name(tpuc_hlo_unary_op op);
const char* tpuc_hlo_binary_name(tpuc_hlo_binary_op op);

tpuc_status* tpuc_hlo_unary(tpuc_hlo_fn* fn, tpuc_hlo_unary_op op,
                            tpuc_hlo_value x, tpuc_hlo_value* out);
tpuc_status* tpuc_hlo_binary(tpuc_hlo_fn* fn, tpuc_hlo_binary_op op,
                             tpuc_hlo_value a, tpuc_hlo_value b,
                             tpuc_hlo_value* out);
/* Result is i1 of the same shape. The comparison type follows the dtype:
 * FLOAT for float and complex (complex: EQ/NE only), SIGNED for signed
 * ints, UNSIGNED for unsigned ints and i1. */
tpuc_status* tpuc_hlo_compare(tpuc_hlo_fn* fn, tpuc_hlo_compare_dir dir,
                              tpuc_hlo_value a, tpuc_hlo_value b,
                              tpuc_hlo_value* out);
/* Same with comparison type TOTALORDER (float operands only). */
tpuc_status* tpuc_hlo_compare_totalorder(tpuc_hlo_fn* fn,
                                         tpuc_hlo_compare_dir dir,
                                         tpuc_hlo_value a, tpuc_hlo_value b,
                                         tpuc_hlo_value* out);
/* `pred` is i1, rank-0 or of the shape of the branches. */
tpuc_status* tpuc_hlo_select(tpuc_hlo_fn* fn, tpuc_hlo_value pred,
                             tpuc_hlo_value on_true, tpuc_hlo_value on_false,
                             tpuc_hlo_value* out);
/* `lo` / `hi` are rank-0 or of the operand's shape, of its dtype. */
tpuc_status* tpuc_hlo_clamp(tpuc_hlo_fn* fn, tpuc_hlo_value lo,
                            tpuc_hlo_value x, tpuc_hlo_value hi,
                            tpuc_hlo_value* out);
/* Element type conversion (complex -> real is rejected: use REAL). */
tpuc_status* tpuc_hlo_convert(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                              tpuc_dtype dtype, tpuc_hlo_value* out);
/* Reinterprets bits. Same width: same shape. Wider -> narrower: a trailing
 * dim of size ratio is added. Narrower -> wider: the trailing dim must be
 * the ratio and is removed. i1 and complex are rejected. */
tpuc_status* tpuc_hlo_bitcast_convert(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                      tpuc_dtype dtype, tpuc_hlo_value* out);

/* Convenience: a sealed region with two rank-0 `dtype` arguments returning
 * `op`(arg0, arg1); the usual body of reduce / reduce_window / scatter. */
tpuc_status* tpuc_hlo_region_binary(tpuc_hlo_module* module, tpuc_dtype dtype,
                                    tpuc_hlo_binary_op op, tpuc_hlo_fn** out);
/* Convenience: a sealed comparator region for sort over `n` operands of
 * `dtypes`, comparing operand 0 only with `dir` (LT: ascending). */
tpuc_status* tpuc_hlo_region_compare(tpuc_hlo_module* module,
                                     const tpuc_dtype* dtypes, size_t n,
                                     tpuc_hlo_compare_dir dir,
                                     tpuc_hlo_fn** out);

/* ---- constants and iota ------------------------------------------------ */

/* A constant of `type` from dense row-major host bytes (`size` must be
 * elements * dtype size; i1 takes one byte per element, nonzero = true). */
tpuc_status* tpuc_hlo_constant(tpuc_hlo_fn* fn, const tpuc_hlo_type* type,
                               const void* data, size_t size,
                               tpuc_hlo_value* out);
/* A constant of `type` with every element equal to the one element at
 * `element` (dtype size bytes). */
tpuc_status* tpuc_hlo_constant_splat(tpuc_hlo_fn* fn, const tpuc_hlo_type* type,
                                     const void* element, tpuc_hlo_value* out);
/* Rank-0 constants converted on the host. A value that the dtype cannot
 * hold (out-of-range integer, non-integral value for an integer dtype) is
 * rejected; floats round to nearest even. Complex gets a zero imaginary
 * part. */
tpuc_status* tpuc_hlo_constant_f64(tpuc_hlo_fn* fn, tpuc_dtype dtype,
                                   double value, tpuc_hlo_value* out);
tpuc_status* tpuc_hlo_constant_i64(tpuc_hlo_fn* fn, tpuc_dtype dtype,
                                   int64_t value, tpuc_hlo_value* out);
/* Values 0, 1, ... along `dim` of `type`. */
tpuc_status* tpuc_hlo_iota(tpuc_hlo_fn* fn, const tpuc_hlo_type* type,
                           int64_t dim, tpuc_hlo_value* out);

/* ---- shape ops ---------------------------------------------------------- */

/* Result has `shape` (rank `rank`); operand dim i maps to result dim
 * broadcast_dims[i] (rank of x entries, size equal or 1). */
tpuc_status* tpuc_hlo_broadcast_in_dim(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                       const int64_t* shape, int rank,
                                       const int64_t* broadcast_dims,
                                       tpuc_hlo_value* out);
tpuc_status* tpuc_hlo_reshape(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                              const int64_t* shape, int rank,
                              tpuc_hlo_value* out);
/* Result dim i is operand dim perm[i]. */
tpuc_status* tpuc_hlo_transpose(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                const int64_t* perm, tpuc_hlo_value* out);
/* One entry per dim each; `strides` NULL means 1. */
tpuc_status* tpuc_hlo_slice(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                            const int64_t* start, const int64_t* limit,
                            const int64_t* strides, tpuc_hlo_value* out);
/* `starts`: one rank-0 integer value per dim (all of one dtype). */
tpuc_status* tpuc_hlo_dynamic_slice(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                    const tpuc_hlo_value* starts,
                                    const int64_t* sizes, tpuc_hlo_value* out);
tpuc_status* tpuc_hlo_dynamic_update_slice(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                           tpuc_hlo_value update,
                                           const tpuc_hlo_value* starts,
                                           tpuc_hlo_value* out);
tpuc_status* tpuc_hlo_concatenate(tpuc_hlo_fn* fn, const tpuc_hlo_value* xs,
                                  size_t n, int64_t dim, tpuc_hlo_value* out);
/* `value` is rank-0 of x's dtype. `lo`/`hi` may be negative; `interior`
 * NULL means 0. */
tpuc_status* tpuc_hlo_pad(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                          tpuc_hlo_value value, const int64_t* lo,
                          const int64_t* hi, const int64_t* interior,
                          tpuc_hlo_value* out);
tpuc_status* tpuc_hlo_reverse(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                              const int64_t* dims, size_t n,
                              tpuc_hlo_value* out);

/* ---- collectives --------------------------------------------------------
 * For a program compiled for `replicas` replicas (tpuc_compile_options):
 * each op spans one replica group of all replicas, in order. */

/* Every replica gets `body` (a reducer of two rank-0 values of x's dtype)
 * folded over the replicas' x. */
tpuc_status* tpuc_hlo_all_reduce(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                 int64_t replicas, tpuc_hlo_fn* body,
                                 tpuc_hlo_value* out);
/* The replicas' x concatenated along `dim`, in replica order. */
tpuc_status* tpuc_hlo_all_gather(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                 int64_t dim, int64_t replicas,
                                 tpuc_hlo_value* out);
/* all_reduce, then replica r keeps part r of `dim` (split in `replicas`). */
tpuc_status* tpuc_hlo_reduce_scatter(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                     int64_t dim, int64_t replicas,
                                     tpuc_hlo_fn* body, tpuc_hlo_value* out);
/* x is split in `replicas` parts along split_dim; replica r gets part r of
 * every replica, concatenated along concat_dim in replica order. */
tpuc_status* tpuc_hlo_all_to_all(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                 int64_t split_dim, int64_t concat_dim,
                                 int64_t replicas, tpuc_hlo_value* out);
/* Replica pairs[2i+1] gets the x of replica pairs[2i]; a replica no pair
 * targets gets zeros. */
tpuc_status* tpuc_hlo_collective_permute(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                         const int64_t* pairs, size_t npairs,
                                         int64_t replicas,
                                         tpuc_hlo_value* out);

/* ---- reductions --------------------------------------------------------- */

/* Reduces `n` same-shaped inputs over `dims` with inits (rank-0, one per
 * input) and `body`: args (acc_0..acc_{n-1}, x_0..x_{n-1}) all rank-0 of
 * the inputs' dtypes, returning n rank-0 values. `outs` gets n values. */
tpuc_status* tpuc_hlo_reduce(tpuc_hlo_fn* fn, const tpuc_hlo_value* inputs,
                             const tpuc_hlo_value* inits, size_t n,
                             const int64_t* dims, size_t num_dims,
                             tpuc_hlo_fn* body, tpuc_hlo_value* outs);

/* A window over every dim of an operand: arrays of rank entries; NULL
 * means all 1 (padding: all 0). `padding` holds (lo, hi) pairs. */
typedef struct tpuc_hlo_window {
  const int64_t* dims;
  const int64_t* strides;
  const int64_t* base_dilations;
  const int64_t* window_dilations;
  const int64_t* padding;
} tpuc_hlo_window;

tpuc_status* tpuc_hlo_reduce_window(tpuc_hlo_fn* fn,
                                    const tpuc_hlo_value* inputs,
                                    const tpuc_hlo_value* inits, size_t n,
                                    const tpuc_hlo_window* window,
                                    tpuc_hlo_fn* body, tpuc_hlo_value* outs);
/* `select`: (a, b) rank-0 of operand dtype -> rank-0 i1. `scatter`:
 * (a, b) rank-0 of source dtype -> rank-0. Dilations must be NULL. */
tpuc_status* tpuc_hlo_select_and_scatter(
    tpuc_hlo_fn* fn, tpuc_hlo_value operand, tpuc_hlo_value source,
    tpuc_hlo_value init, const tpuc_hlo_window* window, tpuc_hlo_fn* select,
    tpuc_hlo_fn* scatter, tpuc_hlo_value* out);

/* ---- linear algebra ----------------------------------------------------- */

/* Operand precision of dot_general (stablehlo precision_config): DEFAULT
 * lets the platform pick (TF32 or bf16 passes on GPUs and TPUs), HIGHEST is
 * full f32, as PyTorch's default float32 matmul precision. */
typedef enum tpuc_hlo_precision {
  TPUC_HLO_PRECISION_DEFAULT = 0,
  TPUC_HLO_PRECISION_HIGH,
  TPUC_HLO_PRECISION_HIGHEST,
} tpuc_hlo_precision;

typedef struct tpuc_hlo_dot_dims {
  const int64_t* lhs_batch;
  const int64_t* rhs_batch;
  size_t num_batch;
  const int64_t* lhs_contracting;
  const int64_t* rhs_contracting;
  size_t num_contracting;
  /* TPUC_DTYPE_INVALID: the operands' dtype. Otherwise a float dtype at
   * least as wide as float operands (e.g. bf16 x bf16 -> f32). */
  tpuc_dtype result_dtype;
  tpuc_hlo_precision precision; /* for both operands */
} tpuc_hlo_dot_dims;

/* Result dims: batch, lhs free dims, rhs free dims (each in order). */
tpuc_status* tpuc_hlo_dot_general(tpuc_hlo_fn* fn, tpuc_hlo_value lhs,
                                  tpuc_hlo_value rhs,
                                  const tpuc_hlo_dot_dims* dims,
                                  tpuc_hlo_value* out);

typedef struct tpuc_hlo_conv {
  int num_spatial; /* operand ranks are num_spatial + 2 */
  int64_t input_batch_dim, input_feature_dim;
  int64_t input_spatial_dims[TPUC_MAX_RANK];
  int64_t kernel_input_feature_dim, kernel_output_feature_dim;
  int64_t kernel_spatial_dims[TPUC_MAX_RANK];
  int64_t output_batch_dim, output_feature_dim;
  int64_t output_spatial_dims[TPUC_MAX_RANK];
  /* Per spatial dim; NULL means 1 (padding: 0; pairs (lo, hi)). */
  const int64_t* strides;
  const int64_t* padding;
  const int64_t* lhs_dilation;
  const int64_t* rhs_dilation;
  int64_t feature_group_count; /* 0 means 1 */
  int64_t batch_group_count;   /* 0 means 1 */
} tpuc_hlo_conv;

/* Fills `conv` for NC<spatial> input, OI<spatial> kernel, NC<spatial>
 * output (PyTorch layout) with defaults otherwise. */
void tpuc_hlo_conv_init_nchw(tpuc_hlo_conv* conv, int num_spatial);

tpuc_status* tpuc_hlo_convolution(tpuc_hlo_fn* fn, tpuc_hlo_value lhs,
                                  tpuc_hlo_value rhs, const tpuc_hlo_conv* conv,
                                  tpuc_hlo_value* out);

/* ---- fft ---------------------------------------------------------------- */

typedef enum tpuc_hlo_fft_type {
  TPUC_HLO_FFT_FFT = 0, /* complex -> complex, forward */
  TPUC_HLO_FFT_IFFT,    /* complex -> complex, inverse (divides by n) */
  TPUC_HLO_FFT_RFFT,    /* f32/f64 -> complex, last dim len/2 + 1 */
  TPUC_HLO_FFT_IRFFT,   /* complex -> f32/f64 (divides by n) */
} tpuc_hlo_fft_type;

/* stablehlo.fft over the trailing `n` (1 to 3) dims of `x`, whose sizes
 * are `fft_length` (for IRFFT the operand's last dim is
 * fft_length[n-1]/2 + 1 and the result's is fft_length[n-1]). */
tpuc_status* tpuc_hlo_fft(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                          tpuc_hlo_fft_type type, const int64_t* fft_length,
                          size_t n, tpuc_hlo_value* out);

/* ---- gather / scatter --------------------------------------------------- */

typedef struct tpuc_hlo_gather_dims {
  const int64_t* offset_dims;
  size_t num_offset_dims;
  const int64_t* collapsed_slice_dims;
  size_t num_collapsed_slice_dims;
  const int64_t* operand_batching_dims;
  size_t num_operand_batching_dims;
  const int64_t* start_indices_batching_dims;
  size_t num_start_indices_batching_dims;
  const int64_t* start_index_map;
  size_t num_start_index_map;
  int64_t index_vector_dim;
} tpuc_hlo_gather_dims;

/* `slice_sizes`: one per operand dim. */
tpuc_status* tpuc_hlo_gather(tpuc_hlo_fn* fn, tpuc_hlo_value operand,
                             tpuc_hlo_value indices,
                             const tpuc_hlo_gather_dims* dims,
                             const int64_t* slice_sizes,
                             bool indices_are_sorted, tpuc_hlo_value* out);

typedef struct tpuc_hlo_scatter_dims {
  const int64_t* update_window_dims;
  size_t num_update_window_dims;
  const int64_t* inserted_window_dims;
  size_t num_inserted_window_dims;
  const int64_t* input_batching_dims;
  size_t num_input_batching_dims;
  const int64_t* scatter_indices_batching_dims;
  size_t num_scatter_indices_batching_dims;
  const int64_t* scatter_dims_to_operand_dims;
  size_t num_scatter_dims_to_operand_dims;
  int64_t index_vector_dim;
  bool indices_are_sorted;
  bool unique_indices;
} tpuc_hlo_scatter_dims;

/* `n` inputs and `n` updates; `body`: (acc_0.., upd_0..) rank-0 -> n
 * rank-0 values. `outs` gets n values of the inputs' types. */
tpuc_status* tpuc_hlo_scatter(tpuc_hlo_fn* fn, const tpuc_hlo_value* inputs,
                              size_t n, tpuc_hlo_value indices,
                              const tpuc_hlo_value* updates,
                              const tpuc_hlo_scatter_dims* dims,
                              tpuc_hlo_fn* body, tpuc_hlo_value* outs);

/* ---- sort, rng ---------------------------------------------------------- */

/* Sorts `n` same-shaped inputs along `dim` (negative counts from the end)
 * with `comparator`: (a_0, b_0, a_1, b_1, ...) rank-0 -> rank-0 i1. */
tpuc_status* tpuc_hlo_sort(tpuc_hlo_fn* fn, const tpuc_hlo_value* inputs,
                           size_t n, int64_t dim, bool is_stable,
                           tpuc_hlo_fn* comparator, tpuc_hlo_value* outs);

typedef enum tpuc_hlo_rng_algorithm {
  TPUC_HLO_RNG_DEFAULT = 0,
  TPUC_HLO_RNG_THREE_FRY,
  TPUC_HLO_RNG_PHILOX,
} tpuc_hlo_rng_algorithm;

/* `state`: ui64 rank-1, 2 elements (THREE_FRY, DEFAULT) or 2 or 3 (PHILOX).
 * `type`: an integer tensor type of random bits. */
tpuc_status* tpuc_hlo_rng_bit_generator(
    tpuc_hlo_fn* fn, tpuc_hlo_rng_algorithm algorithm, tpuc_hlo_value state,
    const tpuc_hlo_type* type, tpuc_hlo_value* new_state, tpuc_hlo_value* out);

/* ---- control flow ------------------------------------------------------- */

/* `cond`: args of the inits' types -> rank-0 i1. `body`: same args -> the
 * same types. `outs` gets n values. */
tpuc_status* tpuc_hlo_while(tpuc_hlo_fn* fn, const tpuc_hlo_value* inits,
                            size_t n, tpuc_hlo_fn* cond, tpuc_hlo_fn* body,
                            tpuc_hlo_value* outs);
/* Runs branches[index] (index: rank-0 i32; out of range runs the last).
 * Branches take no arguments and all return the same types; `outs` gets
 * `num_outs`, which must equal that count. */
tpuc_status* tpuc_hlo_case(tpuc_hlo_fn* fn, tpuc_hlo_value index,
                           tpuc_hlo_fn* const* branches, size_t num_branches,
                           tpuc_hlo_value* outs, size_t num_outs);

/* ---- factorizations (factor.c) ------------------------------------------ */

/* Cholesky factor of a batch (leading dims) of square float/complex
 * matrices; only the `lower` (or upper) triangle of `a` is read, the other
 * triangle of the result is unspecified. */
tpuc_status* tpuc_hlo_cholesky(tpuc_hlo_fn* fn, tpuc_hlo_value a, bool lower,
                               tpuc_hlo_value* out);

typedef enum tpuc_hlo_transpose {
  TPUC_HLO_NO_TRANSPOSE = 0,
  TPUC_HLO_TRANSPOSE,
  TPUC_HLO_ADJOINT,
} tpuc_hlo_transpose_mode;

/* Solves op(a) x = b (left_side) or x op(a) = b for x, `a` a batch of
 * square triangular matrices (only the `lower` / upper triangle is read;
 * unit_diagonal: the diagonal is taken as ones), `b` with the same batch
 * dims. The result has b's type. */
tpuc_status* tpuc_hlo_triangular_solve(tpuc_hlo_fn* fn, tpuc_hlo_value a,
                                       tpuc_hlo_value b, bool left_side,
                                       bool lower, bool unit_diagonal,
                                       tpuc_hlo_transpose_mode transpose_a,
                                       tpuc_hlo_value* out);

#ifdef __cplusplus
}
#endif
#endif /* TPUC_HLO_H_ */
