/* StableHLO builder: collectives across the replicas of a program compiled
 * for several devices (all_reduce, all_gather, reduce_scatter, all_to_all,
 * collective_permute). Every op here spans one replica group holding all
 * `replicas` replicas, in order. */
#include <inttypes.h>

#include "hlo_internal.h"
#include "tpuc/executable.h" /* TPUC_MAX_REPLICAS */

/* "replica_groups = dense<[[0, 1, ..]]> : tensor<1xNxi64>" */
static void groups_attr(hlo_sb* sb, int64_t replicas) {
  if (sb->len) hlo_sb_append(sb, ", ", 2);
  hlo_sb_append(sb, "replica_groups = dense<[[", 25);
  for (int64_t r = 0; r < replicas; ++r)
    hlo_sb_printf(sb, "%s%" PRId64, r ? ", " : "", r);
  hlo_sb_printf(sb, "]]> : tensor<1x%" PRId64 "xi64>", replicas);
}

static tpuc_status* check_common(tpuc_hlo_fn* fn, const char* name,
                                 tpuc_hlo_value x, int64_t replicas,
                                 tpuc_hlo_value* out, tpuc_hlo_type* t) {
  if (out == NULL) return hlo_error(name, "out is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "operand", x, t));
  if (replicas < 1 || replicas > TPUC_MAX_REPLICAS)
    return hlo_error(name, "replicas must be in [1, %d], got %" PRId64,
                     TPUC_MAX_REPLICAS, replicas);
  return NULL;
}

/* The reducer `body` takes two rank-0 values of x's dtype and returns one. */
static tpuc_status* check_reducer(tpuc_hlo_fn* fn, const char* name,
                                  tpuc_hlo_fn* body, tpuc_dtype dtype) {
  TPUC_RETURN_IF_ERROR(hlo_check_region(fn, name, "body", body));
  tpuc_dtype d[2] = {dtype, dtype};
  return hlo_check_scalar_region(name, "body", body, d, 2, d, 1);
}

tpuc_status* tpuc_hlo_all_reduce(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                 int64_t replicas, tpuc_hlo_fn* body,
                                 tpuc_hlo_value* out) {
  const char* name = "stablehlo.all_reduce";
  tpuc_hlo_type t;
  TPUC_RETURN_IF_ERROR(check_common(fn, name, x, replicas, out, &t));
  TPUC_RETURN_IF_ERROR(check_reducer(fn, name, body, t.dtype));
  hlo_sb sb = {0};
  groups_attr(&sb, replicas);
  if (sb.oom) {
    hlo_sb_free(&sb);
    return hlo_oom(name);
  }
  return hlo_emit(fn, name, &x, 1, &t, 1, hlo_sb_take(&sb), &body, 1, out);
}

tpuc_status* tpuc_hlo_all_gather(tpuc_hlo_fn* fn, tpuc_hlo_value x, int64_t dim,
                                 int64_t replicas, tpuc_hlo_value* out) {
  const char* name = "stablehlo.all_gather";
  tpuc_hlo_type t;
  TPUC_RETURN_IF_ERROR(check_common(fn, name, x, replicas, out, &t));
  TPUC_RETURN_IF_ERROR(hlo_check_dim(name, "all_gather_dim", dim, t.rank));
  if (t.dims[dim] > INT64_MAX / replicas)
    return hlo_error(name, "result is too large");
  t.dims[dim] *= replicas;
  hlo_sb sb = {0};
  hlo_sb_printf(&sb, "all_gather_dim = %" PRId64 " : i64", dim);
  groups_attr(&sb, replicas);
  return hlo_emit1(fn, name, &x, 1, &t, &sb, out);
}

tpuc_status* tpuc_hlo_reduce_scatter(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                     int64_t dim, int64_t replicas,
                                     tpuc_hlo_fn* body, tpuc_hlo_value* out) {
  const char* name = "stablehlo.reduce_scatter";
  tpuc_hlo_type t;
  TPUC_RETURN_IF_ERROR(check_common(fn, name, x, replicas, out, &t));
  TPUC_RETURN_IF_ERROR(hlo_check_dim(name, "scatter_dimension", dim, t.rank));
  if (t.dims[dim] % replicas != 0)
    return hlo_error(name,
                     "scatter dimension of size %" PRId64
                     " does not split into %" PRId64 " parts",
                     t.dims[dim], replicas);
  TPUC_RETURN_IF_ERROR(check_reducer(fn, name, body, t.dtype));
  t.dims[dim] /= replicas;
  hlo_sb sb = {0};
  hlo_sb_printf(&sb, "scatter_dimension = %" PRId64 " : i64", dim);
  groups_attr(&sb, replicas);
  if (sb.oom) {
    hlo_sb_free(&sb);
    return hlo_oom(name);
  }
  return hlo_emit(fn, name, &x, 1, &t, 1, hlo_sb_take(&sb), &body, 1, out);
}

tpuc_status* tpuc_hlo_all_to_all(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                 int64_t split_dim, int64_t concat_dim,
                                 int64_t replicas, tpuc_hlo_value* out) {
  const char* name = "stablehlo.all_to_all";
  tpuc_hlo_type t;
  TPUC_RETURN_IF_ERROR(check_common(fn, name, x, replicas, out, &t));
  TPUC_RETURN_IF_ERROR(
      hlo_check_dim(name, "split_dimension", split_dim, t.rank));
  TPUC_RETURN_IF_ERROR(
      hlo_check_dim(name, "concat_dimension", concat_dim, t.rank));
  if (t.dims[split_dim] % replicas != 0)
    return hlo_error(name,
                     "split dimension of size %" PRId64
                     " does not split into %" PRId64 " parts",
                     t.dims[split_dim], replicas);
  t.dims[split_dim] /= replicas;
  t.dims[concat_dim] *= replicas;
  hlo_sb sb = {0};
  hlo_sb_printf(&sb,
                "split_dimension = %" PRId64
                " : i64, concat_dimension = %" PRId64
                " : i64, split_count = %" PRId64 " : i64",
                split_dim, concat_dim, replicas);
  groups_attr(&sb, replicas);
  return hlo_emit1(fn, name, &x, 1, &t, &sb, out);
}

tpuc_status* tpuc_hlo_collective_permute(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                         const int64_t* pairs, size_t npairs,
                                         int64_t replicas,
                                         tpuc_hlo_value* out) {
  const char* name = "stablehlo.collective_permute";
  tpuc_hlo_type t;
  TPUC_RETURN_IF_ERROR(check_common(fn, name, x, replicas, out, &t));
  if (npairs == 0 || pairs == NULL)
    return hlo_error(name, "needs at least one (source, target) pair");
  for (size_t i = 0; i < npairs; ++i) {
    for (int k = 0; k < 2; ++k)
      if (pairs[2 * i + k] < 0 || pairs[2 * i + k] >= replicas)
        return hlo_error(name,
                         "pair %zu names replica %" PRId64
                         ", outside [0, %" PRId64 ")",
                         i, pairs[2 * i + k], replicas);
    for (size_t j = 0; j < i; ++j)
      if (pairs[2 * j] == pairs[2 * i] || pairs[2 * j + 1] == pairs[2 * i + 1])
        return hlo_error(name, "pairs %zu and %zu share a source or a target",
                         j, i);
  }
  hlo_sb sb = {0};
  hlo_sb_append(&sb, "source_target_pairs = dense<[", 29);
  for (size_t i = 0; i < npairs; ++i)
    hlo_sb_printf(&sb, "%s[%" PRId64 ", %" PRId64 "]", i ? ", " : "",
                  pairs[2 * i], pairs[2 * i + 1]);
  hlo_sb_printf(&sb, "]> : tensor<%zux2xi64>", npairs);
  return hlo_emit1(fn, name, &x, 1, &t, &sb, out);
}
