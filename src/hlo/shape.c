/* StableHLO builder: shape ops (broadcast_in_dim, reshape, transpose,
 * slice, dynamic_slice, dynamic_update_slice, concatenate, pad, reverse). */
#include <stdlib.h>
#include <string.h>

#include "hlo_internal.h"

static tpuc_status* check_shape(const char* op, const int64_t* shape, int rank,
                                tpuc_hlo_type* t, tpuc_dtype dtype) {
  if (rank < 0 || rank > TPUC_MAX_RANK)
    return hlo_error(op, "result rank %d outside [0, %d]", rank, TPUC_MAX_RANK);
  if (rank > 0 && shape == NULL) return hlo_error(op, "shape is NULL");
  *t = tpuc_hlo_type_make(dtype, shape, rank);
  return hlo_check_type(op, "result", t);
}

tpuc_status* tpuc_hlo_broadcast_in_dim(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                       const int64_t* shape, int rank,
                                       const int64_t* broadcast_dims,
                                       tpuc_hlo_value* out) {
  const char* name = "stablehlo.broadcast_in_dim";
  if (out == NULL) return hlo_error(name, "out is NULL");
  tpuc_hlo_type t, r;
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "operand", x, &t));
  TPUC_RETURN_IF_ERROR(check_shape(name, shape, rank, &r, t.dtype));
  if (t.rank > rank)
    return hlo_error(name, "operand rank %d exceeds result rank %d", t.rank,
                     rank);
  TPUC_RETURN_IF_ERROR(hlo_check_dims(name, "broadcast_dimensions",
                                      broadcast_dims, (size_t)t.rank, rank,
                                      false, NULL));
  for (int i = 0; i < t.rank; ++i) {
    int64_t d = r.dims[broadcast_dims[i]];
    if (t.dims[i] != 1 && t.dims[i] != d)
      return hlo_error(name,
                       "operand dim %d (size %lld) cannot broadcast to result "
                       "dim %lld (size %lld)",
                       i, (long long)t.dims[i], (long long)broadcast_dims[i],
                       (long long)d);
  }
  hlo_sb sb = {0};
  hlo_sb_i64_array_attr(&sb, "broadcast_dimensions", broadcast_dims,
                        (size_t)t.rank);
  return hlo_emit1(fn, name, &x, 1, &r, &sb, out);
}

tpuc_status* tpuc_hlo_reshape(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                              const int64_t* shape, int rank,
                              tpuc_hlo_value* out) {
  const char* name = "stablehlo.reshape";
  if (out == NULL) return hlo_error(name, "out is NULL");
  tpuc_hlo_type t, r;
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "operand", x, &t));
  TPUC_RETURN_IF_ERROR(check_shape(name, shape, rank, &r, t.dtype));
  int64_t a = tpuc_hlo_type_num_elements(&t);
  int64_t b = tpuc_hlo_type_num_elements(&r);
  if (a != b)
    return hlo_error(name, "operand has %lld elements, result shape has %lld",
                     (long long)a, (long long)b);
  return hlo_emit1(fn, name, &x, 1, &r, NULL, out);
}

/* XLA's CPU backend takes time exponential in a transpose's rank to emit
 * it (measured with the plugin of requirements.txt: 0.07 s at rank 4, 0.2 s
 * at 5, 4.6 s at 6, over 5 minutes at 8, whatever the sizes and even for a
 * swap of two dims). Transposes of rank TRANSPOSE_SPLIT_RANK or more are
 * therefore rewritten: size-1 dims dropped and runs of dims that stay
 * adjacent merged (reshapes around a smaller transpose); one that still
 * has that rank moves its dims into place one at a time, each move a
 * transpose of at most 4 merged dims behind an optimization barrier. */
#define TRANSPOSE_SPLIT_RANK 6

static tpuc_status* emit_transpose(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                   const tpuc_hlo_type* t, const int64_t* perm,
                                   tpuc_hlo_value* out) {
  tpuc_hlo_type r = *t;
  for (int i = 0; i < t->rank; ++i) r.dims[i] = t->dims[perm[i]];
  hlo_sb sb = {0};
  hlo_sb_i64_array_attr(&sb, "permutation", perm, (size_t)t->rank);
  return hlo_emit1(fn, "stablehlo.transpose", &x, 1, &r, &sb, out);
}

/* The transpose `perm` of `dims` with size-1 dims dropped and adjacent runs
 * merged: the operand's merged sizes in `mdims`, the permutation of them in
 * `mperm`, their number in *mrank. */
static void merge_transpose(const int64_t* dims, const int64_t* perm, int rank,
                            int64_t* mdims, int64_t* mperm, int* mrank) {
  int64_t q[TPUC_MAX_RANK], renum[TPUC_MAX_RANK];
  int k = 0, kept = 0;
  for (int d = 0; d < rank; ++d) renum[d] = dims[d] == 1 ? -1 : kept++;
  for (int i = 0; i < rank; ++i)
    if (renum[perm[i]] >= 0) q[k++] = renum[perm[i]];
  /* Groups of q: runs q[j], q[j] + 1, ...; first[g] their first entry. */
  int64_t first[TPUC_MAX_RANK], len[TPUC_MAX_RANK];
  int g = 0;
  for (int j = 0; j < k; ++j) {
    if (j > 0 && q[j] == q[j - 1] + 1) {
      len[g - 1]++;
    } else {
      first[g] = q[j];
      len[g] = 1;
      g++;
    }
  }
  /* The sizes of the kept dims, in operand order. */
  int64_t kd[TPUC_MAX_RANK];
  for (int d = 0; d < rank; ++d)
    if (renum[d] >= 0) kd[renum[d]] = dims[d];
  /* Operand order of the groups: rank of each group's first dim. */
  for (int a = 0; a < g; ++a) {
    int64_t pos = 0;
    for (int b = 0; b < g; ++b) pos += first[b] < first[a];
    mperm[a] = pos;
    int64_t size = 1;
    for (int64_t j = 0; j < len[a]; ++j) size *= kd[first[a] + j];
    mdims[pos] = size;
  }
  *mrank = g;
}

tpuc_status* tpuc_hlo_transpose(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                const int64_t* perm, tpuc_hlo_value* out) {
  const char* name = "stablehlo.transpose";
  if (out == NULL) return hlo_error(name, "out is NULL");
  tpuc_hlo_type t;
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "operand", x, &t));
  TPUC_RETURN_IF_ERROR(hlo_check_dims(name, "permutation", perm, (size_t)t.rank,
                                      t.rank, false, NULL));
  if (t.rank < TRANSPOSE_SPLIT_RANK) return emit_transpose(fn, x, &t, perm, out);
  int64_t mdims[TPUC_MAX_RANK], mperm[TPUC_MAX_RANK], rdims[TPUC_MAX_RANK];
  int m = 0;
  merge_transpose(t.dims, perm, t.rank, mdims, mperm, &m);
  for (int i = 0; i < t.rank; ++i) rdims[i] = t.dims[perm[i]];
  if (m < t.rank) {
    tpuc_hlo_value y;
    TPUC_RETURN_IF_ERROR(tpuc_hlo_reshape(fn, x, mdims, m, &y));
    if (m >= 2) TPUC_RETURN_IF_ERROR(tpuc_hlo_transpose(fn, y, mperm, &y));
    return tpuc_hlo_reshape(fn, y, rdims, t.rank, out);
  }
  /* Nothing merges: bring the operand dim of each result position p there,
   * moving it in front of the dims between (a transpose of 4 merged dims
   * at most). cur[j] is the operand dim now at position j. */
  int64_t cur[TPUC_MAX_RANK], mv[TPUC_MAX_RANK];
  for (int j = 0; j < t.rank; ++j) cur[j] = j;
  tpuc_hlo_value y = x;
  for (int p = 0; p < t.rank; ++p) {
    int i = p;
    while (cur[i] != perm[p]) i++;
    if (i == p) continue;
    int n = 0;
    for (int j = 0; j < p; ++j) mv[n++] = j;
    mv[n++] = i;
    for (int j = p; j < i; ++j) mv[n++] = j;
    for (int j = i + 1; j < t.rank; ++j) mv[n++] = j;
    TPUC_RETURN_IF_ERROR(tpuc_hlo_transpose(fn, y, mv, &y));
    /* XLA fuses a chain of moves back into one loop as slow to emit as
     * the transpose itself: each move is materialized. */
    tpuc_hlo_type yt;
    TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "operand", y, &yt));
    TPUC_RETURN_IF_ERROR(
        hlo_emit1(fn, "stablehlo.optimization_barrier", &y, 1, &yt, NULL, &y));
    int64_t moved = cur[i];
    memmove(&cur[p + 1], &cur[p], sizeof *cur * (size_t)(i - p));
    cur[p] = moved;
  }
  *out = y;
  return NULL;
}

tpuc_status* tpuc_hlo_slice(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                            const int64_t* start, const int64_t* limit,
                            const int64_t* strides, tpuc_hlo_value* out) {
  const char* name = "stablehlo.slice";
  if (out == NULL) return hlo_error(name, "out is NULL");
  tpuc_hlo_type t;
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "operand", x, &t));
  if (t.rank > 0 && (start == NULL || limit == NULL))
    return hlo_error(name, "start or limit is NULL");
  int64_t ones[TPUC_MAX_RANK];
  for (int i = 0; i < TPUC_MAX_RANK; ++i) ones[i] = 1;
  if (strides == NULL) strides = ones;
  tpuc_hlo_type r = t;
  for (int i = 0; i < t.rank; ++i) {
    if (start[i] < 0 || start[i] > limit[i] || limit[i] > t.dims[i])
      return hlo_error(name,
                       "dim %d: need 0 <= start (%lld) <= limit (%lld) <= size "
                       "(%lld)",
                       i, (long long)start[i], (long long)limit[i],
                       (long long)t.dims[i]);
    if (strides[i] <= 0)
      return hlo_error(name, "dim %d: stride %lld must be positive", i,
                       (long long)strides[i]);
    int64_t len = limit[i] - start[i];
    r.dims[i] = len == 0 ? 0 : (len - 1) / strides[i] + 1;
  }
  hlo_sb sb = {0};
  hlo_sb_i64_array_attr(&sb, "start_indices", start, (size_t)t.rank);
  hlo_sb_i64_array_attr(&sb, "limit_indices", limit, (size_t)t.rank);
  hlo_sb_i64_array_attr(&sb, "strides", strides, (size_t)t.rank);
  return hlo_emit1(fn, name, &x, 1, &r, &sb, out);
}

/* Operand list (x, [update,] starts...) with start index checks. */
static tpuc_status* start_operands(const tpuc_hlo_fn* fn, const char* name,
                                   const tpuc_hlo_value* starts, int rank,
                                   tpuc_hlo_value* ops) {
  if (rank > 0 && starts == NULL) return hlo_error(name, "starts is NULL");
  tpuc_dtype d = TPUC_DTYPE_INVALID;
  for (int i = 0; i < rank; ++i) {
    char what[48];
    tpuc_hlo_type s;
    snprintf(what, sizeof what, "start index %d", i);
    TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, what, starts[i], &s));
    if (s.rank != 0 || !hlo_is_int(s.dtype))
      return hlo_error(name, "%s must be a rank-0 integer tensor", what);
    if (i > 0 && s.dtype != d)
      return hlo_error(name, "start indices must share one dtype");
    d = s.dtype;
    ops[i] = starts[i];
  }
  return NULL;
}

tpuc_status* tpuc_hlo_dynamic_slice(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                    const tpuc_hlo_value* starts,
                                    const int64_t* sizes, tpuc_hlo_value* out) {
  const char* name = "stablehlo.dynamic_slice";
  if (out == NULL) return hlo_error(name, "out is NULL");
  tpuc_hlo_type t;
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "operand", x, &t));
  tpuc_hlo_value ops[TPUC_MAX_RANK + 1];
  ops[0] = x;
  TPUC_RETURN_IF_ERROR(start_operands(fn, name, starts, t.rank, ops + 1));
  if (t.rank > 0 && sizes == NULL) return hlo_error(name, "sizes is NULL");
  tpuc_hlo_type r = t;
  for (int i = 0; i < t.rank; ++i) {
    if (sizes[i] < 0 || sizes[i] > t.dims[i])
      return hlo_error(name, "dim %d: slice size %lld outside [0, %lld]", i,
                       (long long)sizes[i], (long long)t.dims[i]);
    r.dims[i] = sizes[i];
  }
  hlo_sb sb = {0};
  hlo_sb_i64_array_attr(&sb, "slice_sizes", sizes, (size_t)t.rank);
  return hlo_emit1(fn, name, ops, (size_t)t.rank + 1, &r, &sb, out);
}

tpuc_status* tpuc_hlo_dynamic_update_slice(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                           tpuc_hlo_value update,
                                           const tpuc_hlo_value* starts,
                                           tpuc_hlo_value* out) {
  const char* name = "stablehlo.dynamic_update_slice";
  if (out == NULL) return hlo_error(name, "out is NULL");
  tpuc_hlo_type t, u;
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "operand", x, &t));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "update", update, &u));
  if (u.dtype != t.dtype || u.rank != t.rank)
    return hlo_error(name, "update must have the operand's dtype and rank");
  for (int i = 0; i < t.rank; ++i)
    if (u.dims[i] > t.dims[i])
      return hlo_error(name, "dim %d: update size %lld exceeds operand %lld", i,
                       (long long)u.dims[i], (long long)t.dims[i]);
  tpuc_hlo_value ops[TPUC_MAX_RANK + 2];
  ops[0] = x;
  ops[1] = update;
  TPUC_RETURN_IF_ERROR(start_operands(fn, name, starts, t.rank, ops + 2));
  return hlo_emit1(fn, name, ops, (size_t)t.rank + 2, &t, NULL, out);
}

tpuc_status* tpuc_hlo_concatenate(tpuc_hlo_fn* fn, const tpuc_hlo_value* xs,
                                  size_t n, int64_t dim, tpuc_hlo_value* out) {
  const char* name = "stablehlo.concatenate";
  if (out == NULL) return hlo_error(name, "out is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  if (n == 0 || xs == NULL) return hlo_error(name, "needs at least 1 input");
  tpuc_hlo_type r;
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "input 0", xs[0], &r));
  TPUC_RETURN_IF_ERROR(hlo_check_dim(name, "dimension", dim, r.rank));
  for (size_t i = 1; i < n; ++i) {
    char what[48];
    tpuc_hlo_type t;
    snprintf(what, sizeof what, "input %zu", i);
    TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, what, xs[i], &t));
    if (t.dtype != r.dtype || t.rank != r.rank)
      return hlo_error(name, "%s differs from input 0 in dtype or rank", what);
    for (int d = 0; d < r.rank; ++d)
      if (d != dim && t.dims[d] != r.dims[d])
        return hlo_error(name, "%s differs from input 0 in dim %d", what, d);
    if (r.dims[dim] > INT64_MAX - t.dims[dim])
      return hlo_error(name, "result too large");
    r.dims[dim] += t.dims[dim];
  }
  hlo_sb sb = {0};
  hlo_sb_printf(&sb, "dimension = %lld : i64", (long long)dim);
  return hlo_emit1(fn, name, xs, n, &r, &sb, out);
}

tpuc_status* tpuc_hlo_pad(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                          tpuc_hlo_value value, const int64_t* lo,
                          const int64_t* hi, const int64_t* interior,
                          tpuc_hlo_value* out) {
  const char* name = "stablehlo.pad";
  if (out == NULL) return hlo_error(name, "out is NULL");
  tpuc_hlo_type t, v;
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "operand", x, &t));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "padding value", value, &v));
  if (v.rank != 0 || v.dtype != t.dtype)
    return hlo_error(name, "padding value must be tensor<%s>",
                     tpuc_dtype_mlir_name(t.dtype));
  if (t.rank > 0 && (lo == NULL || hi == NULL))
    return hlo_error(name, "lo or hi is NULL");
  int64_t zeros[TPUC_MAX_RANK] = {0};
  if (interior == NULL) interior = zeros;
  tpuc_hlo_type r = t;
  for (int i = 0; i < t.rank; ++i) {
    if (interior[i] < 0)
      return hlo_error(name, "dim %d: interior padding %lld is negative", i,
                       (long long)interior[i]);
    const int64_t big = (int64_t)1 << 48;
    if (lo[i] < -big || lo[i] > big || hi[i] < -big || hi[i] > big ||
        interior[i] > big)
      return hlo_error(name, "dim %d: padding too large", i);
    int64_t n = t.dims[i];
    int64_t size = n + lo[i] + hi[i] + (n > 0 ? (n - 1) * interior[i] : 0);
    if (size < 0)
      return hlo_error(name, "dim %d: result size %lld is negative", i,
                       (long long)size);
    r.dims[i] = size;
  }
  hlo_sb sb = {0};
  hlo_sb_i64_array_attr(&sb, "edge_padding_low", lo, (size_t)t.rank);
  hlo_sb_i64_array_attr(&sb, "edge_padding_high", hi, (size_t)t.rank);
  hlo_sb_i64_array_attr(&sb, "interior_padding", interior, (size_t)t.rank);
  tpuc_hlo_value ops[2] = {x, value};
  return hlo_emit1(fn, name, ops, 2, &r, &sb, out);
}

tpuc_status* tpuc_hlo_reverse(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                              const int64_t* dims, size_t n,
                              tpuc_hlo_value* out) {
  const char* name = "stablehlo.reverse";
  if (out == NULL) return hlo_error(name, "out is NULL");
  tpuc_hlo_type t;
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "operand", x, &t));
  TPUC_RETURN_IF_ERROR(
      hlo_check_dims(name, "dimensions", dims, n, t.rank, false, NULL));
  hlo_sb sb = {0};
  hlo_sb_i64_array_attr(&sb, "dimensions", dims, n);
  return hlo_emit1(fn, name, &x, 1, &t, &sb, out);
}
