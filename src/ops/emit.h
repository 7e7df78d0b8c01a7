/* A status-carrying emitter for lowerings that build long expressions:
 * every step is skipped once one has failed, and the first failure is kept
 * (em.st), so a formula reads as a formula and is checked once. */
#ifndef TPUC_SRC_OPS_EMIT_H_
#define TPUC_SRC_OPS_EMIT_H_

#include <string.h>

#include "ops/ops_internal.h"

typedef tpuc_hlo_value V;

typedef struct em {
  op_ctx* c;
  tpuc_hlo_fn* fn; /* the body the values belong to */
  tpuc_status* st; /* first failure */
} em;

static inline em em_of(op_ctx* c) {
  em e = {c, c->fn, NULL};
  return e;
}

static inline bool em_keep(em* e, tpuc_status* st) {
  if (st != NULL) {
    if (e->st == NULL)
      e->st = st;
    else
      tpuc_status_free(st);
  }
  return e->st == NULL;
}

static inline tpuc_hlo_type e_type(em* e, V x) {
  tpuc_hlo_type t;
  memset(&t, 0, sizeof t);
  if (e->st == NULL) em_keep(e, tpuc_hlo_value_type(e->fn, x, &t));
  return t;
}

static inline V e_bin(em* e, tpuc_hlo_binary_op op, V a, V b) {
  V r = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_binary(e->fn, op, a, b, &r));
  return r;
}

static inline V e_un(em* e, tpuc_hlo_unary_op op, V a) {
  V r = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_unary(e->fn, op, a, &r));
  return r;
}

static inline V e_cmp(em* e, tpuc_hlo_compare_dir dir, V a, V b) {
  V r = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_compare(e->fn, dir, a, b, &r));
  return r;
}

static inline V e_sel(em* e, V p, V a, V b) {
  V r = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_select(e->fn, p, a, b, &r));
  return r;
}

static inline V e_cvt(em* e, V x, tpuc_dtype dt) {
  if (e->st != NULL) return -1;
  if (e_type(e, x).dtype == dt) return x;
  V r = -1;
  em_keep(e, tpuc_hlo_convert(e->fn, x, dt, &r));
  return r;
}

/* Rank-0 value k broadcast to the shape of `like`. */
static inline V e_splat(em* e, V k, V like) {
  tpuc_hlo_type t = e_type(e, like);
  if (e->st != NULL || t.rank == 0) return k;
  V r = -1;
  em_keep(e, tpuc_hlo_broadcast_in_dim(e->fn, k, t.dims, t.rank, NULL, &r));
  return r;
}

static inline V e_reshape(em* e, V x, const int64_t* dims, int rank) {
  V r = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_reshape(e->fn, x, dims, rank, &r));
  return r;
}

/* The first failure of the emission, or NULL: a lowering's result. */
static inline tpuc_status* em_done(em* e) { return e->st; }

/* Rank-0 constant `v` of dtype `dt` (bools from v != 0; complex ones
 * with imaginary part 0). */
static inline V e_k0(em* e, tpuc_dtype dt, double v) {
  V k = -1;
  if (e->st != NULL) return -1;
  if (dt == TPUC_DTYPE_PRED) {
    V u = -1;
    em_keep(e, tpuc_hlo_constant_i64(e->fn, TPUC_DTYPE_U8, v != 0, &u));
    if (e->st == NULL) em_keep(e, tpuc_hlo_convert(e->fn, u, dt, &k));
  } else if (tpuc_dtype_is_float(dt) || tpuc_dtype_is_complex(dt)) {
    em_keep(e, tpuc_hlo_constant_f64(e->fn, dt, v, &k));
  } else {
    em_keep(e, tpuc_hlo_constant_i64(e->fn, dt, (int64_t)v, &k));
  }
  return k;
}

/* Constant `v` of dtype `dt`, with the shape of `like`. */
static inline V e_kd(em* e, tpuc_dtype dt, double v, V like) {
  return e_splat(e, e_k0(e, dt, v), like);
}

/* Constant `v` of the dtype and shape of `like`. */
static inline V e_k(em* e, V like, double v) {
  return e_kd(e, e_type(e, like).dtype, v, like);
}

/* x (computed in a wider dtype) rounded to `dt` and back, as the CPU's
 * per-operation rounding of half floats. */
static inline V e_rnd(em* e, V x, tpuc_dtype dt) {
  tpuc_dtype wide = e_type(e, x).dtype;
  if (wide == dt) return x;
  return e_cvt(e, e_cvt(e, x, dt), wide);
}

/* Shorthands for formulas written with an emitter named `e`. */
#define ADD(a, b) e_bin(e, TPUC_HLO_ADD, a, b)
#define SUB(a, b) e_bin(e, TPUC_HLO_SUB, a, b)
#define MUL(a, b) e_bin(e, TPUC_HLO_MUL, a, b)
#define DIV(a, b) e_bin(e, TPUC_HLO_DIV, a, b)
#define AND(a, b) e_bin(e, TPUC_HLO_AND, a, b)
#define OR(a, b) e_bin(e, TPUC_HLO_OR, a, b)
#define POW(a, b) e_bin(e, TPUC_HLO_POW, a, b)
#define EQ(a, b) e_cmp(e, TPUC_HLO_EQ, a, b)
#define NE(a, b) e_cmp(e, TPUC_HLO_NE, a, b)
#define LT(a, b) e_cmp(e, TPUC_HLO_LT, a, b)
#define LE(a, b) e_cmp(e, TPUC_HLO_LE, a, b)
#define GT(a, b) e_cmp(e, TPUC_HLO_GT, a, b)
#define GE(a, b) e_cmp(e, TPUC_HLO_GE, a, b)
#define SEL(p, a, b) e_sel(e, p, a, b)
#define K(like, v) e_k(e, like, v)
#define ABS(a) e_un(e, TPUC_HLO_ABS, a)
#define NEG(a) e_un(e, TPUC_HLO_NEG, a)
#define NOT(a) e_un(e, TPUC_HLO_NOT, a)
#define EXP(a) e_un(e, TPUC_HLO_EXP, a)
#define LOG(a) e_un(e, TPUC_HLO_LOG, a)
#define LOG1P(a) e_un(e, TPUC_HLO_LOG1P, a)
#define SQRT(a) e_un(e, TPUC_HLO_SQRT, a)
#define FLOOR(a) e_un(e, TPUC_HLO_FLOOR, a)
#define CEIL(a) e_un(e, TPUC_HLO_CEIL, a)
#define ISNAN(a) NE(a, a)

#endif /* TPUC_SRC_OPS_EMIT_H_ */
