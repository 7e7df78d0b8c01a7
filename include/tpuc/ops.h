/* Native ops: PyTorch (ATen) ops lowered to StableHLO in C.
 *
 * The binding registers ONE generic boxed kernel for every name in the op
 * table and marshals each call into tpuc_op_run: tensors as views of their
 * storages, scalars as values. tpuc_op_run builds one program (read the
 * views out of their storages, type promotion, broadcasting, the op, write
 * the result bytes), compiles it through the cache (scalars are program
 * arguments, so `x * 0.5` and `x * 0.7` share an executable), runs it, and
 * returns each result as the value of a new contiguous tensor.
 * UNIMPLEMENTED means "not natively for these arguments": the caller runs
 * the op on the CPU instead. */
#ifndef TPUC_OPS_H_
#define TPUC_OPS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpuc/buffer.h"
#include "tpuc/client.h"
#include "tpuc/hlo.h"
#include "tpuc/storage.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tpuc_op_arg_kind {
  TPUC_OP_ARG_NONE = 0,
  TPUC_OP_ARG_TENSOR,   /* a tensor on the device: `view` */
  TPUC_OP_ARG_SCALAR,   /* a number (a Python scalar or a CPU 0-d tensor) */
  TPUC_OP_ARG_INT,      /* an int argument of the op (a dim, say): `i` */
  TPUC_OP_ARG_BOOL,     /* a bool argument of the op (keepdim): `i` */
  TPUC_OP_ARG_INT_LIST, /* an int[] argument (dims): `list`, `list_len` */
  TPUC_OP_ARG_DTYPE,    /* a dtype argument: `dtype` */
  /* A Tensor[] or Tensor?[] argument: `views`, `num_views`; an entry with
   * a NULL storage is a None of a Tensor?[] (index's indices, say). */
  TPUC_OP_ARG_TENSOR_LIST,
  TPUC_OP_ARG_STRING, /* a str argument (gelu's approximate): `str` */
} tpuc_op_arg_kind;

typedef enum tpuc_scalar_kind {
  TPUC_SCALAR_BOOL = 0,
  TPUC_SCALAR_INT,
  TPUC_SCALAR_FLOAT,
  TPUC_SCALAR_COMPLEX, /* `f` the real part, `f_im` the imaginary one */
} tpuc_scalar_kind;

typedef struct tpuc_op_arg {
  tpuc_op_arg_kind kind;
  tpuc_view view;          /* TENSOR */
  /* TENSOR: PyTorch's lazy conjugate / negative bits: the value is the
   * view's elements conjugated / negated. */
  bool conj, neg;
  tpuc_scalar_kind scalar; /* SCALAR */
  /* SCALAR: true when it came from a CPU 0-d tensor that is not a wrapped
   * Python number (it then promotes like a 0-d tensor of `scalar_dtype`). */
  bool scalar_is_tensor;
  tpuc_dtype scalar_dtype; /* SCALAR from a tensor: its dtype */
  double f;                /* SCALAR float (complex: real part) */
  double f_im;             /* SCALAR complex: imaginary part */
  int64_t i;               /* SCALAR int/bool, INT, BOOL */
  const int64_t* list;     /* INT_LIST (valid during the call) */
  size_t list_len;
  tpuc_dtype dtype; /* DTYPE */
  const tpuc_view* views; /* TENSOR_LIST (valid during the call) */
  size_t num_views;
  const char* str; /* STRING (valid during the call) */
} tpuc_op_arg;

#define TPUC_OP_MAX_RESULTS 8

typedef struct tpuc_op_result {
  tpuc_dtype dtype;
  int rank;
  int64_t sizes[TPUC_MAX_RANK];
  /* u8[numel * dtype size], row-major; caller releases. NULL for a
   * result the op leaves undefined (a gradient its output_mask omits). */
  tpuc_buffer* value;
  /* The result was written into options->write_to[k]: `value` is then the
   * new value of that view's storage (u8[storage bytes]), to be set with
   * tpuc_storage_set_value; dtype and sizes are the view's. A written
   * result without a value (zero_ of a never-written storage) leaves the
   * storage as it is. */
  bool written;
} tpuc_op_result;

typedef struct tpuc_op_options {
  tpuc_dtype default_float; /* torch.get_default_dtype() */
  /* torch.get_float32_matmul_precision(): "highest" (PyTorch's default)
   * is HIGHEST, "high" HIGH, "medium" DEFAULT. */
  tpuc_hlo_precision matmul_precision;
  /* In-place results (add_, the out= of an op on a view): where
   * write_to[k] is set, result k is converted to that view's dtype (PyTorch
   * casting rules: a float result does not go into an integer view), must
   * have the view's sizes, and is written through the view inside the same
   * program. */
  const tpuc_view* write_to[TPUC_OP_MAX_RESULTS];
  /* Random ops (tpuc_op_is_random): the generator's draw for this call,
   * (seed, counter); a value of the call, never part of the program key. */
  uint64_t rng[2];
} tpuc_op_options;

size_t tpuc_op_table_size(void);
/* Schema name of entry i, e.g. "aten::add.Tensor". */
const char* tpuc_op_table_name(size_t i);
/* Index of `name` in the table, or -1. */
int tpuc_op_find(const char* name);
/* True when op `index` draws random numbers: the caller then fills
 * options->rng from the op's generator (and advances it). */
bool tpuc_op_is_random(int index);

/* Runs op `index` on `device`. `results` has room for `max_results`. */
tpuc_status* tpuc_op_run(tpuc_client* client, int device, int index,
                         const tpuc_op_arg* args, size_t num_args,
                         const tpuc_op_options* options,
                         tpuc_op_result* results, size_t max_results,
                         size_t* num_results);

/* dst <- src on the device: src broadcast to dst's sizes and converted to
 * its dtype, written through dst's view (dst and src may share a storage;
 * src is read completely first). */
tpuc_status* tpuc_op_copy(tpuc_client* client, const tpuc_view* dst,
                          const tpuc_view* src);

/* PyTorch's canCast: may a `from` result be written into a `to` tensor? */
bool tpuc_can_cast(tpuc_dtype from, tpuc_dtype to);

/* Forgets the per-call programs remembered for `client` (all when NULL);
 * call before destroying a client that ran ops. */
void tpuc_op_cache_clear(tpuc_client* client);

/* PyTorch's type promotion of two dtypes (torch.promote_types);
 * TPUC_DTYPE_INVALID where PyTorch has none. */
tpuc_dtype tpuc_promote_types(tpuc_dtype a, tpuc_dtype b);

#ifdef __cplusplus
}
#endif
#endif /* TPUC_OPS_H_ */
