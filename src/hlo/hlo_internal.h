/* Private structures of the StableHLO builder, shared by its sources. */
#ifndef TPUC_SRC_HLO_HLO_INTERNAL_H_
#define TPUC_SRC_HLO_HLO_INTERNAL_H_

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tpuc/hlo.h"

/* One value: the body it lives in and its type. `arg_index` is its
 * position among @main's arguments (printed %argN), -1 otherwise. */
typedef struct hlo_value_rec {
  tpuc_hlo_fn* body;
  tpuc_hlo_type type;
  int arg_index;
} hlo_value_rec;

typedef struct hlo_op {
  const char* name; /* static: "stablehlo.add" */
  tpuc_hlo_value* operands;
  size_t num_operands;
  tpuc_hlo_value first_result; /* results have consecutive ids */
  size_t num_results;
  char* attrs; /* "a = x, b = y" (owned) or NULL */
  tpuc_hlo_fn** regions;
  size_t num_regions;
} hlo_op;

struct tpuc_hlo_fn {
  tpuc_hlo_module* module;
  bool is_main;
  tpuc_hlo_value* args;
  int* arg_alias; /* main only: output index or -1 */
  size_t num_args, cap_args;
  hlo_op* ops;
  size_t num_ops, cap_ops;
  tpuc_hlo_value* rets;
  size_t num_rets;
  bool sealed;
  tpuc_hlo_fn* parent; /* body of the op it is attached to */
  bool attached;
};

struct tpuc_hlo_module {
  char* name;
  hlo_value_rec* values;
  size_t num_values, cap_values;
  tpuc_hlo_fn** fns;
  size_t num_fns, cap_fns;
  tpuc_hlo_fn* main;
};

/* ---- growable string --------------------------------------------------- */
typedef struct hlo_sb {
  char* data;
  size_t len, cap;
  bool oom;
} hlo_sb;

void hlo_sb_printf(hlo_sb* sb, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
void hlo_sb_append(hlo_sb* sb, const char* s, size_t n);
void hlo_sb_type(hlo_sb* sb, const tpuc_hlo_type* type);
/* "name = array<i64: a, b>" (", " prefix when sb is not empty). */
void hlo_sb_i64_array_attr(hlo_sb* sb, const char* name, const int64_t* v,
                           size_t n);
/* "[a, b]" */
void hlo_sb_i64_list(hlo_sb* sb, const int64_t* v, size_t n);
/* "name = dense<[[lo, hi], ...]> : tensor<Nx2xi64>" with ", " prefix. */
void hlo_sb_padding_attr(hlo_sb* sb, const int64_t* pairs, size_t n);
/* Hands over the string (NULL when empty); check `oom` first. */
char* hlo_sb_take(hlo_sb* sb);
void hlo_sb_free(hlo_sb* sb);

/* ---- errors ------------------------------------------------------------ */
tpuc_status* hlo_error(const char* op, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
tpuc_status* hlo_oom(const char* op);

/* ---- checks ------------------------------------------------------------ */
/* Checks a type given by the caller (valid dtype, rank, dims >= 0). */
tpuc_status* hlo_check_type(const char* op, const char* what,
                            const tpuc_hlo_type* type);
/* Looks up `v` as an operand of an op emitted into `fn`; fills its type. */
tpuc_status* hlo_operand(const tpuc_hlo_fn* fn, const char* op,
                         const char* what, tpuc_hlo_value v,
                         tpuc_hlo_type* type);
/* Body is open for emission. */
tpuc_status* hlo_check_fn(const tpuc_hlo_fn* fn, const char* op);
/* Region can be attached to an op emitted into `fn` (same module, sealed,
 * not yet attached, not an enclosing body of `fn`). */
tpuc_status* hlo_check_region(const tpuc_hlo_fn* fn, const char* op,
                              const char* what, const tpuc_hlo_fn* region);
const tpuc_hlo_type* hlo_region_arg_type(const tpuc_hlo_fn* region, size_t i);
const tpuc_hlo_type* hlo_region_ret_type(const tpuc_hlo_fn* region, size_t i);
/* Checks `dim` in [0, rank). */
tpuc_status* hlo_check_dim(const char* op, const char* what, int64_t dim,
                           int rank);
/* Checks a list of distinct dims in [0, rank); `seen` (rank entries) is
 * filled with 1 where a dim is listed (may be NULL). */
tpuc_status* hlo_check_dims(const char* op, const char* what,
                            const int64_t* dims, size_t n, int rank,
                            bool sorted, char* seen);
bool hlo_same_shape(const tpuc_hlo_type* a, const tpuc_hlo_type* b);
/* Writes "tensor<2x3xf32>" into the caller's `buf`; returns buf. */
const char* hlo_type_str(const tpuc_hlo_type* t, char* buf, size_t size);
int hlo_dtype_bits(tpuc_dtype dtype);
bool hlo_is_int(tpuc_dtype dtype); /* signed or unsigned, not i1 */
/* Product of dims, or -1 if it overflows int64. */
int64_t hlo_num_elements(const int64_t* dims, int rank);
/* Rank-0 type check for region args and returns. */
tpuc_status* hlo_check_scalar_region(const char* op, const char* what,
                                     const tpuc_hlo_fn* region,
                                     const tpuc_dtype* arg_dtypes,
                                     size_t num_args,
                                     const tpuc_dtype* ret_dtypes,
                                     size_t num_rets);

/* ---- emission ---------------------------------------------------------- */
/* Appends an op to `fn`. Operands must already be checked with
 * hlo_operand, regions with hlo_check_region. Takes `attrs` (malloc'ed or
 * NULL) in every case. Writes result ids to `results` (may be NULL when
 * num_results is 0). */
tpuc_status* hlo_emit(tpuc_hlo_fn* fn, const char* op,
                      const tpuc_hlo_value* operands, size_t num_operands,
                      const tpuc_hlo_type* result_types, size_t num_results,
                      char* attrs, tpuc_hlo_fn* const* regions,
                      size_t num_regions, tpuc_hlo_value* results);
/* hlo_emit for the common case of one result; takes an hlo_sb of attrs
 * (may be NULL) and frees it. */
tpuc_status* hlo_emit1(tpuc_hlo_fn* fn, const char* op,
                       const tpuc_hlo_value* operands, size_t num_operands,
                       const tpuc_hlo_type* result_type, hlo_sb* attrs,
                       tpuc_hlo_value* out);

#endif /* TPUC_SRC_HLO_HLO_INTERNAL_H_ */
