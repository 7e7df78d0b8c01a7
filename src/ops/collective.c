/* Collective programs (include/tpuc/collective.h): the input storage value
 * is read as the tensor's elements (or moved as it is, for collectives
 * that only move data), the collective runs across the replicas, and the
 * result is returned as a storage value. */
#include "tpuc/collective.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpuc/hlo.h"

const char* tpuc_reduce_op_name(tpuc_reduce_op op) {
  switch (op) {
    case TPUC_REDUCE_SUM:
      return "sum";
    case TPUC_REDUCE_PRODUCT:
      return "product";
    case TPUC_REDUCE_MIN:
      return "min";
    case TPUC_REDUCE_MAX:
      return "max";
    case TPUC_REDUCE_BAND:
      return "band";
    case TPUC_REDUCE_BOR:
      return "bor";
    case TPUC_REDUCE_BXOR:
      return "bxor";
    case TPUC_REDUCE_AVG:
      return "avg";
    default:
      return "?";
  }
}

static const char* kind_name(tpuc_collective_kind k) {
  switch (k) {
    case TPUC_COLLECTIVE_ALL_REDUCE:
      return "all_reduce";
    case TPUC_COLLECTIVE_ALL_GATHER:
      return "all_gather";
    case TPUC_COLLECTIVE_REDUCE_SCATTER:
      return "reduce_scatter";
    case TPUC_COLLECTIVE_ALL_TO_ALL:
      return "all_to_all";
    case TPUC_COLLECTIVE_BROADCAST:
      return "broadcast";
    default:
      return "?";
  }
}

static bool is_reduction(tpuc_collective_kind k) {
  return k == TPUC_COLLECTIVE_ALL_REDUCE || k == TPUC_COLLECTIVE_REDUCE_SCATTER;
}

void tpuc_collective_describe(const tpuc_collective* c, char* buf, size_t cap) {
  if (cap == 0) return;
  if (c == NULL) {
    buf[0] = '\0';
    return;
  }
  int n = snprintf(buf, cap, "%s", kind_name(c->kind));
  if (n >= 0 && (size_t)n < cap && is_reduction(c->kind))
    n +=
        snprintf(buf + n, cap - (size_t)n, " (%s)", tpuc_reduce_op_name(c->op));
  if (n >= 0 && (size_t)n < cap && c->kind == TPUC_COLLECTIVE_BROADCAST)
    n += snprintf(buf + n, cap - (size_t)n, " from rank %d", c->root);
  if (n >= 0 && (size_t)n < cap)
    snprintf(
        buf + n, cap - (size_t)n, " of %s[%lld] over %d ranks",
        tpuc_dtype_is_valid(c->dtype) ? tpuc_dtype_mlir_name(c->dtype) : "?",
        (long long)c->count, c->ranks);
}

/* The reducer's binary op for `op` over `dtype` (i1 for bool). */
static tpuc_status* reducer_op(tpuc_reduce_op op, tpuc_dtype dtype,
                               tpuc_hlo_binary_op* out) {
  bool pred = dtype == TPUC_DTYPE_PRED;
  bool integral =
      pred || (!tpuc_dtype_is_float(dtype) && !tpuc_dtype_is_complex(dtype));
  switch (op) {
    case TPUC_REDUCE_SUM:
    case TPUC_REDUCE_AVG:
      *out = pred ? TPUC_HLO_OR : TPUC_HLO_ADD;
      break;
    case TPUC_REDUCE_PRODUCT:
      *out = pred ? TPUC_HLO_AND : TPUC_HLO_MUL;
      break;
    case TPUC_REDUCE_MIN:
      *out = pred ? TPUC_HLO_AND : TPUC_HLO_MIN;
      break;
    case TPUC_REDUCE_MAX:
      *out = pred ? TPUC_HLO_OR : TPUC_HLO_MAX;
      break;
    case TPUC_REDUCE_BAND:
      *out = TPUC_HLO_AND;
      break;
    case TPUC_REDUCE_BOR:
      *out = TPUC_HLO_OR;
      break;
    case TPUC_REDUCE_BXOR:
      *out = TPUC_HLO_XOR;
      break;
    default:
      return tpuc_status_make(TPUC_INVALID_ARGUMENT, "unknown reduce op %d",
                              (int)op);
  }
  if ((op == TPUC_REDUCE_BAND || op == TPUC_REDUCE_BOR ||
       op == TPUC_REDUCE_BXOR) &&
      !integral)
    return tpuc_status_make(
        TPUC_INVALID_ARGUMENT, "reduce op %s is for integers and bool, not %s",
        tpuc_reduce_op_name(op), tpuc_dtype_mlir_name(dtype));
  return NULL;
}

/* x (flat, `from` elements holding `bytes` bytes) reinterpreted as `to`
 * elements. */
static tpuc_status* reinterpret(tpuc_hlo_fn* fn, tpuc_hlo_value x,
                                tpuc_dtype from, tpuc_dtype to, int64_t bytes,
                                tpuc_hlo_value* out) {
  size_t fs = tpuc_dtype_size(from), ts = tpuc_dtype_size(to);
  int64_t n = bytes / (int64_t)ts;
  if (from == to) {
    *out = x;
    return NULL;
  }
  if (fs == ts) return tpuc_hlo_bitcast_convert(fn, x, to, out);
  tpuc_hlo_value y;
  if (fs < ts) { /* [n * ts/fs] -> [n, ts/fs] -> [n] */
    int64_t d[2] = {n, (int64_t)(ts / fs)};
    TPUC_RETURN_IF_ERROR(tpuc_hlo_reshape(fn, x, d, 2, &y));
    return tpuc_hlo_bitcast_convert(fn, y, to, out);
  }
  /* [m] -> [m, fs/ts] -> [n] */
  TPUC_RETURN_IF_ERROR(tpuc_hlo_bitcast_convert(fn, x, to, &y));
  return tpuc_hlo_reshape(fn, y, &n, 1, out);
}

static tpuc_status* build(tpuc_hlo_module* m, const tpuc_collective* c,
                          tpuc_dtype* out_type, int64_t* out_count) {
  tpuc_hlo_fn* fn = NULL;
  TPUC_RETURN_IF_ERROR(tpuc_hlo_main(m, &fn));
  int64_t n = c->ranks, es = (int64_t)tpuc_dtype_size(c->dtype),
          vs = (int64_t)tpuc_dtype_size(c->value_type);
  int64_t bytes = c->count * es;
  tpuc_hlo_type at =
      tpuc_hlo_type_make(c->value_type, (int64_t[]){bytes / vs}, 1);
  tpuc_hlo_value x, y;
  TPUC_RETURN_IF_ERROR(tpuc_hlo_arg(fn, &at, &x));
  if (!is_reduction(c->kind)) {
    /* Moved as it is: whole elements of a unit type that divides them. */
    tpuc_dtype unit = (es % vs == 0) ? c->value_type : TPUC_DTYPE_U8;
    int64_t k = es / (int64_t)tpuc_dtype_size(unit);
    TPUC_RETURN_IF_ERROR(reinterpret(fn, x, c->value_type, unit, bytes, &x));
    int64_t d[3] = {c->count, k};
    TPUC_RETURN_IF_ERROR(tpuc_hlo_reshape(fn, x, d, 2, &x));
    int64_t total = c->count * k;
    if (c->kind == TPUC_COLLECTIVE_ALL_GATHER) {
      TPUC_RETURN_IF_ERROR(tpuc_hlo_all_gather(fn, x, 0, n, &y));
      total *= n;
    } else if (c->kind == TPUC_COLLECTIVE_ALL_TO_ALL) {
      TPUC_RETURN_IF_ERROR(tpuc_hlo_all_to_all(fn, x, 0, 0, n, &y));
    } else { /* BROADCAST: everyone's value, then the root's part */
      int64_t d3[3] = {1, c->count, k};
      TPUC_RETURN_IF_ERROR(tpuc_hlo_reshape(fn, x, d3, 3, &x));
      TPUC_RETURN_IF_ERROR(tpuc_hlo_all_gather(fn, x, 0, n, &x));
      int64_t lo[3] = {c->root, 0, 0}, hi[3] = {c->root + 1, c->count, k};
      TPUC_RETURN_IF_ERROR(tpuc_hlo_slice(fn, x, lo, hi, NULL, &y));
    }
    TPUC_RETURN_IF_ERROR(tpuc_hlo_reshape(fn, y, &total, 1, &y));
    *out_type = unit;
    *out_count = total;
    return tpuc_hlo_return(fn, &y, 1);
  }
  if (tpuc_dtype_is_complex(c->dtype))
    return tpuc_status_make(TPUC_UNIMPLEMENTED,
                            "no in-program reduction of complex values");
  bool pred = c->dtype == TPUC_DTYPE_PRED;
  tpuc_dtype elem = pred ? TPUC_DTYPE_U8 : c->dtype;
  TPUC_RETURN_IF_ERROR(reinterpret(fn, x, c->value_type, elem, bytes, &x));
  if (pred) {
    tpuc_hlo_value zero;
    TPUC_RETURN_IF_ERROR(tpuc_hlo_constant_i64(fn, TPUC_DTYPE_U8, 0, &zero));
    TPUC_RETURN_IF_ERROR(
        tpuc_hlo_broadcast_in_dim(fn, zero, &c->count, 1, NULL, &zero));
    TPUC_RETURN_IF_ERROR(tpuc_hlo_compare(fn, TPUC_HLO_NE, x, zero, &x));
  }
  tpuc_hlo_binary_op bop = TPUC_HLO_ADD;
  TPUC_RETURN_IF_ERROR(reducer_op(c->op, c->dtype, &bop));
  tpuc_hlo_fn* body = NULL;
  TPUC_RETURN_IF_ERROR(tpuc_hlo_region_binary(m, c->dtype, bop, &body));
  int64_t count = c->count;
  if (c->kind == TPUC_COLLECTIVE_REDUCE_SCATTER) count /= n;
  /* XLA's CPU backend reduces across replicas with add, multiply, min and
   * max only: bitwise ops and bools are reduced on each device from the
   * parts every replica receives (all_gather for all_reduce, all_to_all
   * for reduce_scatter), which any backend runs. */
  bool local =
      pred || bop == TPUC_HLO_AND || bop == TPUC_HLO_OR || bop == TPUC_HLO_XOR;
  if (!local && c->kind == TPUC_COLLECTIVE_ALL_REDUCE) {
    TPUC_RETURN_IF_ERROR(tpuc_hlo_all_reduce(fn, x, n, body, &y));
  } else if (!local) {
    TPUC_RETURN_IF_ERROR(tpuc_hlo_reduce_scatter(fn, x, 0, n, body, &y));
  } else {
    int64_t d[2] = {c->kind == TPUC_COLLECTIVE_ALL_REDUCE ? 1 : n, count};
    TPUC_RETURN_IF_ERROR(tpuc_hlo_reshape(fn, x, d, 2, &x));
    if (c->kind == TPUC_COLLECTIVE_ALL_REDUCE)
      TPUC_RETURN_IF_ERROR(tpuc_hlo_all_gather(fn, x, 0, n, &x));
    else
      TPUC_RETURN_IF_ERROR(tpuc_hlo_all_to_all(fn, x, 0, 0, n, &x));
    /* The identity: all ones for and, zeros for or and xor. */
    unsigned char ones[8];
    memset(ones, bop == TPUC_HLO_AND ? 0xFF : 0, sizeof ones);
    if (pred) ones[0] = bop == TPUC_HLO_AND;
    tpuc_hlo_type st = tpuc_hlo_type_scalar(c->dtype);
    tpuc_hlo_value init;
    TPUC_RETURN_IF_ERROR(tpuc_hlo_constant_splat(fn, &st, ones, &init));
    int64_t dim0 = 0;
    TPUC_RETURN_IF_ERROR(tpuc_hlo_reduce(fn, &x, &init, 1, &dim0, 1, body, &y));
  }
  if (c->op == TPUC_REDUCE_AVG && !pred) {
    tpuc_hlo_value d;
    TPUC_RETURN_IF_ERROR(tpuc_hlo_constant_i64(fn, c->dtype, n, &d));
    TPUC_RETURN_IF_ERROR(tpuc_hlo_broadcast_in_dim(fn, d, &count, 1, NULL, &d));
    TPUC_RETURN_IF_ERROR(tpuc_hlo_binary(fn, TPUC_HLO_DIV, y, d, &y));
  }
  if (pred) TPUC_RETURN_IF_ERROR(tpuc_hlo_convert(fn, y, TPUC_DTYPE_U8, &y));
  *out_type = elem;
  *out_count = count;
  return tpuc_hlo_return(fn, &y, 1);
}

tpuc_status* tpuc_collective_program(const tpuc_collective* c, char** text,
                                     size_t* len, tpuc_dtype* out_type,
                                     int64_t* out_count) {
  if (c == NULL || text == NULL || out_type == NULL || out_count == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "argument is NULL");
  *text = NULL;
  if (c->kind < 0 || c->kind >= TPUC_COLLECTIVE_KINDS)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "unknown collective %d",
                            (int)c->kind);
  if (c->ranks < 1 || c->count < 0 || !tpuc_dtype_is_valid(c->dtype) ||
      !tpuc_dtype_is_valid(c->value_type) || c->value_type == TPUC_DTYPE_PRED ||
      tpuc_dtype_is_complex(c->value_type))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "bad collective: %d ranks, %lld elements", c->ranks,
                            (long long)c->count);
  int64_t bytes = c->count * (int64_t)tpuc_dtype_size(c->dtype);
  if (bytes % (int64_t)tpuc_dtype_size(c->value_type) != 0)
    return tpuc_status_make(
        TPUC_INVALID_ARGUMENT, "%lld bytes are not whole %s values",
        (long long)bytes, tpuc_dtype_mlir_name(c->value_type));
  if (c->kind == TPUC_COLLECTIVE_BROADCAST &&
      (c->root < 0 || c->root >= c->ranks))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "root %d is not a rank of %d", c->root, c->ranks);
  if ((c->kind == TPUC_COLLECTIVE_REDUCE_SCATTER ||
       c->kind == TPUC_COLLECTIVE_ALL_TO_ALL) &&
      c->count % c->ranks != 0)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "%s: %lld elements do not split in %d equal parts",
                            kind_name(c->kind), (long long)c->count, c->ranks);
  tpuc_hlo_module* m = NULL;
  TPUC_RETURN_IF_ERROR(tpuc_hlo_module_create("tpuc_collective", &m));
  tpuc_status* st = build(m, c, out_type, out_count);
  if (st == NULL) st = tpuc_hlo_module_print(m, text, len);
  tpuc_hlo_module_destroy(m);
  return st;
}
