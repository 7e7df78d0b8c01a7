/* StableHLO builder: gather and scatter. */
#include <stdlib.h>
#include <string.h>

#include "hlo_internal.h"

#define HLO_MAX_SCATTER 32

static void list_field(hlo_sb* sb, const char* name, const int64_t* v,
                       size_t n) {
  hlo_sb_printf(sb, "%s = ", name);
  hlo_sb_i64_list(sb, v, n);
  hlo_sb_append(sb, ", ", 2);
}

/* Shared checks of the index operand: integer dtype, index_vector_dim in
 * [0, rank], the index vector size; `batch` gets the indices' batch dims
 * (all dims but index_vector_dim) and nbatch their count. */
static tpuc_status* check_indices(const char* name, const tpuc_hlo_type* ix,
                                  int64_t index_vector_dim, size_t map_len,
                                  int64_t* batch, int* nbatch) {
  if (!hlo_is_int(ix->dtype))
    return hlo_error(name, "indices dtype %s is not an integer",
                     tpuc_dtype_mlir_name(ix->dtype));
  if (index_vector_dim < 0 || index_vector_dim > ix->rank)
    return hlo_error(name, "index_vector_dim %lld outside [0, %d]",
                     (long long)index_vector_dim, ix->rank);
  int64_t vec = index_vector_dim == ix->rank ? 1 : ix->dims[index_vector_dim];
  if ((int64_t)map_len != vec)
    return hlo_error(name,
                     "index vector size %lld differs from the %zu entries of "
                     "the index map",
                     (long long)vec, map_len);
  *nbatch = 0;
  for (int d = 0; d < ix->rank; ++d)
    if (d != index_vector_dim) batch[(*nbatch)++] = ix->dims[d];
  return NULL;
}

/* Checks operand/indices batching dims lists (same length, sizes equal). */
static tpuc_status* check_batching(const char* name, const tpuc_hlo_type* op,
                                   const int64_t* op_dims, size_t n_op,
                                   const tpuc_hlo_type* ix,
                                   const int64_t* ix_dims, size_t n_ix,
                                   int64_t index_vector_dim, char* op_seen) {
  if (n_op != n_ix)
    return hlo_error(name, "operand and indices batching dims differ in count");
  TPUC_RETURN_IF_ERROR(hlo_check_dims(name, "operand batching dims", op_dims,
                                      n_op, op->rank, true, op_seen));
  TPUC_RETURN_IF_ERROR(hlo_check_dims(name, "indices batching dims", ix_dims,
                                      n_ix, ix->rank, false, NULL));
  for (size_t i = 0; i < n_ix; ++i) {
    if (ix_dims[i] == index_vector_dim)
      return hlo_error(name, "indices batching dim is the index_vector_dim");
    if (op->dims[op_dims[i]] != ix->dims[ix_dims[i]])
      return hlo_error(name, "batching dim %zu sizes differ", i);
  }
  return NULL;
}

tpuc_status* tpuc_hlo_gather(tpuc_hlo_fn* fn, tpuc_hlo_value operand,
                             tpuc_hlo_value indices,
                             const tpuc_hlo_gather_dims* g,
                             const int64_t* slice_sizes,
                             bool indices_are_sorted, tpuc_hlo_value* out) {
  const char* name = "stablehlo.gather";
  if (out == NULL || g == NULL) return hlo_error(name, "out or dims is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  tpuc_hlo_type t, ix;
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "operand", operand, &t));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "start_indices", indices, &ix));
  if (t.rank > 0 && slice_sizes == NULL)
    return hlo_error(name, "slice_sizes is NULL");
  int64_t batch[TPUC_MAX_RANK];
  int nbatch;
  TPUC_RETURN_IF_ERROR(check_indices(name, &ix, g->index_vector_dim,
                                     g->num_start_index_map, batch, &nbatch));
  char seen[TPUC_MAX_RANK] = {0};
  TPUC_RETURN_IF_ERROR(
      hlo_check_dims(name, "collapsed_slice_dims", g->collapsed_slice_dims,
                     g->num_collapsed_slice_dims, t.rank, true, seen));
  TPUC_RETURN_IF_ERROR(check_batching(
      name, &t, g->operand_batching_dims, g->num_operand_batching_dims, &ix,
      g->start_indices_batching_dims, g->num_start_indices_batching_dims,
      g->index_vector_dim, seen));
  TPUC_RETURN_IF_ERROR(
      hlo_check_dims(name, "start_index_map", g->start_index_map,
                     g->num_start_index_map, t.rank, false, NULL));
  for (size_t i = 0; i < g->num_start_index_map; ++i)
    for (size_t j = 0; j < g->num_operand_batching_dims; ++j)
      if (g->start_index_map[i] == g->operand_batching_dims[j])
        return hlo_error(name, "start_index_map contains a batching dim");
  for (int d = 0; d < t.rank; ++d) {
    if (slice_sizes[d] < 0 || slice_sizes[d] > t.dims[d])
      return hlo_error(name, "slice_sizes[%d] = %lld outside [0, %lld]", d,
                       (long long)slice_sizes[d], (long long)t.dims[d]);
    if (seen[d] && slice_sizes[d] > 1)
      return hlo_error(name,
                       "slice_sizes[%d] must be 0 or 1 for a collapsed or "
                       "batching dim",
                       d);
  }
  size_t n_off = (size_t)t.rank - g->num_collapsed_slice_dims -
                 g->num_operand_batching_dims;
  if (g->num_offset_dims != n_off)
    return hlo_error(name, "offset_dims has %zu entries, expected %zu",
                     g->num_offset_dims, n_off);
  int rrank = (int)n_off + nbatch;
  if (rrank > TPUC_MAX_RANK)
    return hlo_error(name, "result rank exceeds %d", TPUC_MAX_RANK);
  char off_seen[TPUC_MAX_RANK] = {0};
  TPUC_RETURN_IF_ERROR(hlo_check_dims(name, "offset_dims", g->offset_dims,
                                      n_off, rrank, true, off_seen));
  tpuc_hlo_type r;
  memset(&r, 0, sizeof r);
  r.dtype = t.dtype;
  r.rank = rrank;
  int bi = 0, oi = 0;
  for (int d = 0; d < rrank; ++d) {
    if (off_seen[d]) {
      while (seen[oi]) ++oi;
      r.dims[d] = slice_sizes[oi++];
    } else {
      r.dims[d] = batch[bi++];
    }
  }
  hlo_sb sb = {0};
  hlo_sb_append(&sb, "dimension_numbers = #stablehlo.gather<", 38);
  list_field(&sb, "offset_dims", g->offset_dims, n_off);
  list_field(&sb, "collapsed_slice_dims", g->collapsed_slice_dims,
             g->num_collapsed_slice_dims);
  if (g->num_operand_batching_dims) {
    list_field(&sb, "operand_batching_dims", g->operand_batching_dims,
               g->num_operand_batching_dims);
    list_field(&sb, "start_indices_batching_dims",
               g->start_indices_batching_dims,
               g->num_start_indices_batching_dims);
  }
  list_field(&sb, "start_index_map", g->start_index_map,
             g->num_start_index_map);
  hlo_sb_printf(&sb, "index_vector_dim = %lld>",
                (long long)g->index_vector_dim);
  hlo_sb_printf(&sb, ", indices_are_sorted = %s",
                indices_are_sorted ? "true" : "false");
  hlo_sb_i64_array_attr(&sb, "slice_sizes", slice_sizes, (size_t)t.rank);
  tpuc_hlo_value ops[2] = {operand, indices};
  return hlo_emit1(fn, name, ops, 2, &r, &sb, out);
}

tpuc_status* tpuc_hlo_scatter(tpuc_hlo_fn* fn, const tpuc_hlo_value* inputs,
                              size_t n, tpuc_hlo_value indices,
                              const tpuc_hlo_value* updates,
                              const tpuc_hlo_scatter_dims* s, tpuc_hlo_fn* body,
                              tpuc_hlo_value* outs) {
  const char* name = "stablehlo.scatter";
  if (outs == NULL || s == NULL) return hlo_error(name, "outs or dims is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  if (n == 0 || inputs == NULL || updates == NULL)
    return hlo_error(name, "needs at least one input and update");
  if (n > HLO_MAX_SCATTER)
    return hlo_error(name, "too many inputs (%zu > %d)", n, HLO_MAX_SCATTER);
  tpuc_hlo_type types[HLO_MAX_SCATTER], ut[HLO_MAX_SCATTER], ix;
  tpuc_dtype dtypes[2 * HLO_MAX_SCATTER];
  for (size_t i = 0; i < n; ++i) {
    char what[48];
    snprintf(what, sizeof what, "input %zu", i);
    TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, what, inputs[i], &types[i]));
    snprintf(what, sizeof what, "update %zu", i);
    TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, what, updates[i], &ut[i]));
    if (!hlo_same_shape(&types[i], &types[0]) ||
        !hlo_same_shape(&ut[i], &ut[0]))
      return hlo_error(name, "inputs (and updates) must share one shape");
    if (ut[i].dtype != types[i].dtype)
      return hlo_error(name, "update %zu dtype differs from input %zu", i, i);
    dtypes[i] = dtypes[n + i] = types[i].dtype;
  }
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "scatter_indices", indices, &ix));
  const tpuc_hlo_type* t = &types[0];
  const tpuc_hlo_type* u = &ut[0];
  int64_t batch[TPUC_MAX_RANK];
  int nbatch;
  TPUC_RETURN_IF_ERROR(check_indices(name, &ix, s->index_vector_dim,
                                     s->num_scatter_dims_to_operand_dims, batch,
                                     &nbatch));
  char seen[TPUC_MAX_RANK] = {0};
  TPUC_RETURN_IF_ERROR(
      hlo_check_dims(name, "inserted_window_dims", s->inserted_window_dims,
                     s->num_inserted_window_dims, t->rank, true, seen));
  TPUC_RETURN_IF_ERROR(check_batching(
      name, t, s->input_batching_dims, s->num_input_batching_dims, &ix,
      s->scatter_indices_batching_dims, s->num_scatter_indices_batching_dims,
      s->index_vector_dim, seen));
  TPUC_RETURN_IF_ERROR(hlo_check_dims(
      name, "scatter_dims_to_operand_dims", s->scatter_dims_to_operand_dims,
      s->num_scatter_dims_to_operand_dims, t->rank, false, NULL));
  size_t n_win = (size_t)t->rank - s->num_inserted_window_dims -
                 s->num_input_batching_dims;
  if (s->num_update_window_dims != n_win)
    return hlo_error(name, "update_window_dims has %zu entries, expected %zu",
                     s->num_update_window_dims, n_win);
  if (u->rank != (int)n_win + nbatch)
    return hlo_error(name, "updates rank %d, expected %d", u->rank,
                     (int)n_win + nbatch);
  char win_seen[TPUC_MAX_RANK] = {0};
  TPUC_RETURN_IF_ERROR(hlo_check_dims(name, "update_window_dims",
                                      s->update_window_dims, n_win, u->rank,
                                      true, win_seen));
  int bi = 0, oi = 0;
  for (int d = 0; d < u->rank; ++d) {
    if (win_seen[d]) {
      while (seen[oi]) ++oi;
      if (u->dims[d] > t->dims[oi])
        return hlo_error(name,
                         "updates dim %d (%lld) exceeds operand dim %d (%lld)",
                         d, (long long)u->dims[d], oi, (long long)t->dims[oi]);
      ++oi;
    } else {
      if (u->dims[d] != batch[bi])
        return hlo_error(name,
                         "updates dim %d (%lld) must match the indices' batch "
                         "dim (%lld)",
                         d, (long long)u->dims[d], (long long)batch[bi]);
      ++bi;
    }
  }
  TPUC_RETURN_IF_ERROR(hlo_check_region(fn, name, "body", body));
  TPUC_RETURN_IF_ERROR(
      hlo_check_scalar_region(name, "body", body, dtypes, 2 * n, dtypes, n));
  hlo_sb sb = {0};
  hlo_sb_printf(&sb, "indices_are_sorted = %s, ",
                s->indices_are_sorted ? "true" : "false");
  hlo_sb_append(&sb, "scatter_dimension_numbers = #stablehlo.scatter<", 47);
  list_field(&sb, "update_window_dims", s->update_window_dims, n_win);
  list_field(&sb, "inserted_window_dims", s->inserted_window_dims,
             s->num_inserted_window_dims);
  if (s->num_input_batching_dims) {
    list_field(&sb, "input_batching_dims", s->input_batching_dims,
               s->num_input_batching_dims);
    list_field(&sb, "scatter_indices_batching_dims",
               s->scatter_indices_batching_dims,
               s->num_scatter_indices_batching_dims);
  }
  list_field(&sb, "scatter_dims_to_operand_dims",
             s->scatter_dims_to_operand_dims,
             s->num_scatter_dims_to_operand_dims);
  hlo_sb_printf(&sb, "index_vector_dim = %lld>, unique_indices = %s",
                (long long)s->index_vector_dim,
                s->unique_indices ? "true" : "false");
  if (sb.oom) {
    hlo_sb_free(&sb);
    return hlo_oom(name);
  }
  tpuc_hlo_value ops[2 * HLO_MAX_SCATTER + 1];
  memcpy(ops, inputs, n * sizeof *ops);
  ops[n] = indices;
  memcpy(ops + n + 1, updates, n * sizeof *ops);
  return hlo_emit(fn, name, ops, 2 * n + 1, types, n, hlo_sb_take(&sb), &body,
                  1, outs);
}
