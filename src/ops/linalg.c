/* Linear algebra: Cholesky factorizations, triangular solves and the ops
 * built on them.
 *
 * Only real f32 / f64 run here (the CPU has no half-precision kernels for
 * these, complex stays on the CPU). Argument errors (bad shapes, mixed
 * dtypes) are left to the CPU through UNIMPLEMENTED, which raises its own
 * message. Matrices carry leading batch dims; operands with different
 * batch dims are broadcast (numpy rules) as the CPU does.
 *
 * A Cholesky factorization that fails (a pivot that is not positive or not
 * finite, the CPU's "leading minor of order k is not positive-definite")
 * is detected on the device: the call's argument check then fails with
 * UNIMPLEMENTED and the CPU reruns it, raising its own error or returning
 * LAPACK's partial factor and info > 0 (linalg_cholesky_ex). A call that
 * passes the check has info == 0 everywhere. */
#include <string.h>

#include "ops/ops_internal.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

typedef tpuc_hlo_value V;

/* Check code for "let the CPU run this call and say what happens". */
#define CPU_DECIDES TPUC_UNIMPLEMENTED

/* ------------------------------ helpers -------------------------------- */

static bool real_float(tpuc_dtype d) {
  return d == TPUC_DTYPE_F32 || d == TPUC_DTYPE_F64;
}

/* Argument i is a real f32/f64 tensor of rank >= 2 (a batch of matrices);
 * `square` also asks for square matrices. */
static bool is_matrix_arg(const op_ctx* c, int i, bool square) {
  if (!op_is_tensor(c, i)) return false;
  const tpuc_hlo_type* t = &c->types[i];
  if (!real_float(t->dtype) || t->rank < 2) return false;
  return !square || t->dims[t->rank - 1] == t->dims[t->rank - 2];
}

static tpuc_status* bool_arg(const op_ctx* c, int i, bool dflt, bool* out) {
  int64_t v = 0;
  TRY(op_int_arg(c, i, dflt ? 1 : 0, &v));
  *out = v != 0;
  return NULL;
}

/* Broadcast batch dims of matrix types a and b (numpy rules) into `batch`
 * (`nb` dims); false when they do not broadcast. */
static bool broadcast_batch(const tpuc_hlo_type* a, const tpuc_hlo_type* b,
                            int64_t* batch, int* nb) {
  int na = a->rank - 2, nbb = b->rank - 2;
  int n = na > nbb ? na : nbb;
  for (int k = 0; k < n; k++) {
    int ia = na - n + k, ib = nbb - n + k;
    int64_t da = ia >= 0 ? a->dims[ia] : 1;
    int64_t db = ib >= 0 ? b->dims[ib] : 1;
    if (da != db && da != 1 && db != 1) return false;
    batch[k] = da == 1 ? db : da;
  }
  *nb = n;
  return true;
}

/* Matrix x (type t) with its batch dims broadcast to `batch` (nb dims). */
static tpuc_status* to_batch(op_ctx* c, V x, const tpuc_hlo_type* t,
                             const int64_t* batch, int nb, V* out) {
  int64_t dims[TPUC_MAX_RANK], map[TPUC_MAX_RANK];
  for (int k = 0; k < nb; k++) dims[k] = batch[k];
  dims[nb] = t->dims[t->rank - 2];
  dims[nb + 1] = t->dims[t->rank - 1];
  int lead = t->rank - 2;
  for (int k = 0; k < t->rank; k++) map[k] = nb - lead + k;
  tpuc_hlo_type r = tpuc_hlo_type_make(t->dtype, dims, nb + 2);
  if (tpuc_hlo_type_equal(&r, t)) {
    *out = x;
    return NULL;
  }
  return tpuc_hlo_broadcast_in_dim(c->fn, x, dims, nb + 2, map, out);
}

/* i1 mask of type t's shape: true on the lower (col <= row) or upper
 * (col >= row) triangle, the diagonal included. */
static tpuc_status* tri_mask(op_ctx* c, const tpuc_hlo_type* t, bool lower,
                             V* out) {
  int64_t mn[2] = {t->dims[t->rank - 2], t->dims[t->rank - 1]};
  tpuc_hlo_type mt = tpuc_hlo_type_make(TPUC_DTYPE_S32, mn, 2);
  V row, col, keep;
  TRY(tpuc_hlo_iota(c->fn, &mt, 0, &row));
  TRY(tpuc_hlo_iota(c->fn, &mt, 1, &col));
  TRY(tpuc_hlo_compare(c->fn, lower ? TPUC_HLO_LE : TPUC_HLO_GE, col, row,
                       &keep));
  int64_t map[2] = {t->rank - 2, t->rank - 1};
  return tpuc_hlo_broadcast_in_dim(c->fn, keep, t->dims, t->rank, map, out);
}

/* x (type t) with the other triangle zeroed. */
static tpuc_status* keep_triangle(op_ctx* c, V x, const tpuc_hlo_type* t,
                                  bool lower, V* out) {
  V mask, zero;
  TRY(tri_mask(c, t, lower, &mask));
  TRY(op_const(c, t->dtype, 0, t, &zero));
  return tpuc_hlo_select(c->fn, mask, x, zero, out);
}

/* Swaps the last two dims of x (rank `rank`). */
static tpuc_status* mat_transpose(op_ctx* c, V x, int rank, V* out) {
  int64_t perm[TPUC_MAX_RANK];
  for (int k = 0; k < rank; k++) perm[k] = k;
  perm[rank - 2] = rank - 1;
  perm[rank - 1] = rank - 2;
  return tpuc_hlo_transpose(c->fn, x, perm, out);
}

/* Rank-0 i1: some element of the i1 tensor p (type t) is true. */
static tpuc_status* any_true(op_ctx* c, V p, const tpuc_hlo_type* t, V* out) {
  int64_t dims[TPUC_MAX_RANK];
  for (int d = 0; d < t->rank; d++) dims[d] = d;
  V init;
  TRY(op_const(c, TPUC_DTYPE_PRED, 0, NULL, &init));
  tpuc_hlo_fn* body = NULL;
  TRY(tpuc_hlo_region_binary(c->module, TPUC_DTYPE_PRED, TPUC_HLO_OR, &body));
  return tpuc_hlo_reduce(c->fn, &p, &init, 1, dims, (size_t)t->rank, body,
                         out);
}

/* Adds `bad` (rank-0 i1) to the call's argument check (CPU decides). */
static tpuc_status* add_check(op_ctx* c, V bad, const char* msg) {
  if (!c->has_check) {
    c->has_check = true;
    c->check = bad;
    c->check_code = CPU_DECIDES;
    c->check_msg = msg;
    return NULL;
  }
  return tpuc_hlo_binary(c->fn, TPUC_HLO_OR, c->check, bad, &c->check);
}

/* Triangular solve of op(a) x = b (left) or x op(a) = b, a and b with the
 * same batch dims; empty operands give b back (x is empty too). */
static tpuc_status* trsm(op_ctx* c, V a, V b, bool left, bool lower,
                         bool unit, bool transpose, V* out) {
  tpuc_hlo_type tb;
  TRY(tpuc_hlo_value_type(c->fn, b, &tb));
  if (tpuc_hlo_type_num_elements(&tb) == 0) {
    *out = b;
    return NULL;
  }
  return tpuc_hlo_triangular_solve(
      c->fn, a, b, left, lower, unit,
      transpose ? TPUC_HLO_TRANSPOSE : TPUC_HLO_NO_TRANSPOSE, out);
}

/* Solves (l l^T) x = b (upper: (u^T u) x = b), same batch dims, reading
 * only the given triangle of the factor. */
static tpuc_status* chol_solve(op_ctx* c, V f, V b, bool upper, V* out) {
  V y;
  TRY(trsm(c, f, b, true, !upper, false, upper, &y));
  return trsm(c, f, y, true, !upper, false, !upper, out);
}

/* ------------------------------ cholesky -------------------------------- */

/* Factor of a batch of SPD matrices: linalg_cholesky_ex(self, *, upper,
 * check_errors) -> (L, info) when `ex`, else cholesky(self, upper) -> L.
 * Failed factorizations go to the CPU (see the top of the file).
 * linalg_cholesky is not in the table: it is CompositeImplicitAutograd
 * (a kernel of ours would bypass its autograd) and decomposes into
 * linalg_cholesky_ex(check_errors=True). */
static tpuc_status* lower_cholesky(op_ctx* c, int ex) {
  if (!is_matrix_arg(c, 0, true))
    return op_unimpl("cholesky: not a batch of real square matrices");
  bool upper = false;
  TRY(bool_arg(c, 1, false, &upper));
  const tpuc_hlo_type t = c->types[0];
  V l;
  if (tpuc_hlo_type_num_elements(&t) == 0) {
    TRY(op_const(c, t.dtype, 0, &t, &l));
  } else {
    TRY(tpuc_hlo_cholesky(c->fn, c->vals[0], !upper, &l));
    TRY(keep_triangle(c, l, &t, !upper, &l));
    /* A failed pivot: a diagonal entry not > 0, or a NaN/inf anywhere. */
    tpuc_hlo_type pt = t;
    pt.dtype = TPUC_DTYPE_PRED;
    V fin, pos, diag, ok, zero, bad, any;
    TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_IS_FINITE, l, &fin));
    TRY(op_const(c, t.dtype, 0, &t, &zero));
    TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_GT, l, zero, &pos));
    V lo, up;
    TRY(tri_mask(c, &t, true, &lo));
    TRY(tri_mask(c, &t, false, &up));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, lo, up, &diag));
    TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NOT, diag, &diag));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, diag, pos, &ok));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, ok, fin, &ok));
    TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NOT, ok, &bad));
    TRY(any_true(c, bad, &pt, &any));
    TRY(add_check(c, any, "cholesky: not positive-definite: the CPU decides"));
  }
  c->outs[0] = l;
  c->nouts = 1;
  if (ex) {
    tpuc_hlo_type it = tpuc_hlo_type_make(TPUC_DTYPE_S32, t.dims, t.rank - 2);
    TRY(op_const(c, TPUC_DTYPE_S32, 0, &it, &c->outs[1]));
    c->nouts = 2;
  }
  return NULL;
}

/* ------------------------- triangular solves ---------------------------- */

/* The shared shape checks of a triangular solve with coefficient argument
 * `ia` and right-hand side `ib`: both real matrices of one dtype, a square,
 * b's solved dim matching a, batch dims broadcasting. Fills the broadcast
 * operands. */
static tpuc_status* solve_operands(op_ctx* c, int ia, int ib, bool left,
                                   V* a, V* b, tpuc_hlo_type* ta_out) {
  if (!is_matrix_arg(c, ia, true) || !is_matrix_arg(c, ib, false))
    return op_unimpl("solve: not real matrices");
  const tpuc_hlo_type* ta = &c->types[ia];
  const tpuc_hlo_type* tb = &c->types[ib];
  if (ta->dtype != tb->dtype) return op_unimpl("solve: mixed dtypes");
  int64_t n = ta->dims[ta->rank - 1];
  if ((left ? tb->dims[tb->rank - 2] : tb->dims[tb->rank - 1]) != n)
    return op_unimpl("solve: incompatible shapes");
  int64_t batch[TPUC_MAX_RANK];
  int nb = 0;
  if (!broadcast_batch(ta, tb, batch, &nb) || nb + 2 > TPUC_MAX_RANK)
    return op_unimpl("solve: batch dims do not broadcast");
  TRY(to_batch(c, c->vals[ia], ta, batch, nb, a));
  TRY(to_batch(c, c->vals[ib], tb, batch, nb, b));
  return tpuc_hlo_value_type(c->fn, *a, ta_out);
}

/* linalg_solve_triangular(A, B, *, upper, left, unitriangular). */
static tpuc_status* lower_solve_triangular(op_ctx* c, int param) {
  (void)param;
  bool upper = false, left = true, unit = false;
  if (op_is_none(c, 2)) return op_unimpl("upper is required");
  TRY(bool_arg(c, 2, false, &upper));
  TRY(bool_arg(c, 3, true, &left));
  TRY(bool_arg(c, 4, false, &unit));
  V a, b;
  tpuc_hlo_type ta;
  TRY(solve_operands(c, 0, 1, left, &a, &b, &ta));
  c->nouts = 1;
  return trsm(c, a, b, left, !upper, unit, false, &c->outs[0]);
}

/* triangular_solve(b, A, upper, transpose, unitriangular) -> (solution,
 * cloned_coefficient): A's batch dims broadcast with b's. */
static tpuc_status* lower_triangular_solve(op_ctx* c, int param) {
  (void)param;
  bool upper = true, transpose = false, unit = false;
  TRY(bool_arg(c, 2, true, &upper));
  TRY(bool_arg(c, 3, false, &transpose));
  TRY(bool_arg(c, 4, false, &unit));
  V a, b;
  tpuc_hlo_type ta;
  TRY(solve_operands(c, 1, 0, true, &a, &b, &ta));
  TRY(trsm(c, a, b, true, !upper, unit, transpose, &c->outs[0]));
  c->outs[1] = a;
  c->nouts = 2;
  return NULL;
}

/* cholesky_solve(B, L, upper) and _cholesky_solve_helper(B, L, upper). */
static tpuc_status* lower_cholesky_solve(op_ctx* c, int param) {
  (void)param;
  bool upper = false;
  TRY(bool_arg(c, 2, false, &upper));
  V a, b;
  tpuc_hlo_type ta;
  TRY(solve_operands(c, 1, 0, true, &a, &b, &ta));
  c->nouts = 1;
  return chol_solve(c, a, b, upper, &c->outs[0]);
}

/* cholesky_inverse(L, upper): (L L^T)^-1 (upper: (U^T U)^-1) by solving
 * against the identity; the result is made exactly symmetric from its
 * lower triangle, as the CPU's is. */
static tpuc_status* lower_cholesky_inverse(op_ctx* c, int param) {
  (void)param;
  if (!is_matrix_arg(c, 0, true))
    return op_unimpl("cholesky_inverse: not real square matrices");
  bool upper = false;
  TRY(bool_arg(c, 1, false, &upper));
  const tpuc_hlo_type t = c->types[0];
  V eye, lo, up, one, zero, x, xt;
  TRY(tri_mask(c, &t, true, &lo));
  TRY(tri_mask(c, &t, false, &up));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, lo, up, &eye));
  TRY(op_const(c, t.dtype, 1, &t, &one));
  TRY(op_const(c, t.dtype, 0, &t, &zero));
  TRY(tpuc_hlo_select(c->fn, eye, one, zero, &eye));
  TRY(chol_solve(c, c->vals[0], eye, upper, &x));
  TRY(mat_transpose(c, x, t.rank, &xt));
  c->nouts = 1;
  return tpuc_hlo_select(c->fn, lo, x, xt, &c->outs[0]);
}

/* --------------------------------- LU ----------------------------------- */

/* Rank-0 constant of `dtype` in body fn, broadcast to `t` when non-NULL. */
static tpuc_status* fconst(tpuc_hlo_fn* fn, tpuc_dtype dtype, double v,
                           const tpuc_hlo_type* t, V* out) {
  V x;
  if (tpuc_dtype_is_float(dtype)) {
    TRY(tpuc_hlo_constant_f64(fn, dtype, v, &x));
  } else {
    TRY(tpuc_hlo_constant_i64(fn, dtype, (int64_t)v, &x));
  }
  if (t == NULL || t->rank == 0) {
    *out = x;
    return NULL;
  }
  return tpuc_hlo_broadcast_in_dim(fn, x, t->dims, t->rank, NULL, out);
}

/* x (rank-0, or of shape `from` = a prefix of t's dims) broadcast to t. */
static tpuc_status* fbcast(tpuc_hlo_fn* fn, V x, int from_rank,
                           const tpuc_hlo_type* t, V* out) {
  int64_t map[TPUC_MAX_RANK];
  for (int k = 0; k < from_rank; k++) map[k] = k;
  return tpuc_hlo_broadcast_in_dim(fn, x, t->dims, t->rank, map, out);
}

/* Reduces x over dim `dim` with `op` from `init`, in body fn. */
static tpuc_status* freduce(tpuc_hlo_fn* fn, tpuc_hlo_module* m, V x,
                            tpuc_dtype dt, tpuc_hlo_binary_op op, double init,
                            int64_t dim, V* out) {
  V i0;
  TRY(fconst(fn, dt, init, NULL, &i0));
  tpuc_hlo_fn* body = NULL;
  TRY(tpuc_hlo_region_binary(m, dt, op, &body));
  return tpuc_hlo_reduce(fn, &x, &i0, 1, &dim, 1, body, out);
}

/* Rows of x (nb, m, w) selected per batch: out[b, 0, :] = x[b, p[b], :],
 * p (nb) s32. Exact: a sum of one value and zeros. */
static tpuc_status* pick_row(tpuc_hlo_fn* fn, tpuc_hlo_module* m, V x,
                             const tpuc_hlo_type* t, V p, V* out) {
  tpuc_hlo_type it = *t;
  it.dtype = TPUC_DTYPE_S32;
  V rows, pb, eq, zero, sel, r;
  TRY(tpuc_hlo_iota(fn, &it, 1, &rows));
  TRY(fbcast(fn, p, 1, &it, &pb));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_EQ, rows, pb, &eq));
  TRY(fconst(fn, t->dtype, 0, t, &zero));
  TRY(tpuc_hlo_select(fn, eq, x, zero, &sel));
  TRY(freduce(fn, m, sel, t->dtype, TPUC_HLO_ADD, 0, 1, &r));
  return tpuc_hlo_reshape(fn, r, (int64_t[]){t->dims[0], 1, t->dims[2]}, 3,
                          out);
}

/* Swaps rows j (rank-0 s32) and p (nb) s32 of x (nb, m, w) per batch. */
static tpuc_status* swap_rows(tpuc_hlo_fn* fn, tpuc_hlo_module* m, V x,
                              const tpuc_hlo_type* t, V j, V p, V* out) {
  tpuc_hlo_type it = *t;
  it.dtype = TPUC_DTYPE_S32;
  V rows, jb, pb, isj, isp, rj, rp, bj, bp, y;
  TRY(tpuc_hlo_iota(fn, &it, 1, &rows));
  TRY(fbcast(fn, j, 0, &it, &jb));
  TRY(fbcast(fn, p, 1, &it, &pb));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_EQ, rows, jb, &isj));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_EQ, rows, pb, &isp));
  V zero;
  TRY(fconst(fn, TPUC_DTYPE_S32, 0, NULL, &zero));
  V st[3] = {zero, j, zero};
  TRY(tpuc_hlo_dynamic_slice(fn, x, st, (int64_t[]){t->dims[0], 1, t->dims[2]},
                             &rj));
  TRY(pick_row(fn, m, x, t, p, &rp));
  int64_t map[3] = {0, 1, 2};
  TRY(tpuc_hlo_broadcast_in_dim(fn, rj, t->dims, 3, map, &bj));
  TRY(tpuc_hlo_broadcast_in_dim(fn, rp, t->dims, 3, map, &bp));
  TRY(tpuc_hlo_select(fn, isp, bj, x, &y));
  return tpuc_hlo_select(fn, isj, bp, y, out);
}

/* One step of LU with partial pivoting on column j: the loop body over
 * (j, a (nb, m, n), perm (nb, m, 1) s32, piv (nb, k) s32, info (nb) s32).
 * The pivot is the first row of largest |value| at or below j (LAPACK's
 * i?amax); the column below it is scaled by the pivot's reciprocal (as
 * LAPACK's getf2 does), and the trailing block gets the rank-1 update. A
 * zero pivot leaves the column unscaled and sets info (first one, 1-based)
 * as LAPACK does. */
static tpuc_status* lu_body(tpuc_hlo_module* mod, const tpuc_hlo_type* types,
                            tpuc_hlo_fn** out) {
  tpuc_hlo_fn* fn;
  TRY(tpuc_hlo_region_create(mod, types, 5, &fn));
  V j, a, perm, piv, info;
  TRY(tpuc_hlo_get_arg(fn, 0, &j));
  TRY(tpuc_hlo_get_arg(fn, 1, &a));
  TRY(tpuc_hlo_get_arg(fn, 2, &perm));
  TRY(tpuc_hlo_get_arg(fn, 3, &piv));
  TRY(tpuc_hlo_get_arg(fn, 4, &info));
  const tpuc_hlo_type* at = &types[1];
  const tpuc_hlo_type* pt = &types[2];
  tpuc_dtype dt = at->dtype;
  int64_t nb = at->dims[0], m = at->dims[1], n = at->dims[2];
  V zero_i, one_i;
  TRY(fconst(fn, TPUC_DTYPE_S32, 0, NULL, &zero_i));
  TRY(fconst(fn, TPUC_DTYPE_S32, 1, NULL, &one_i));
  /* |column j| with the rows above j masked to -1 */
  tpuc_hlo_type ct = tpuc_hlo_type_make(dt, (int64_t[]){nb, m}, 2);
  tpuc_hlo_type cti = ct;
  cti.dtype = TPUC_DTYPE_S32;
  V col, absc, rows, jb, below, neg, mx, mxb, eq, big, cand, p;
  V st[3] = {zero_i, zero_i, j};
  TRY(tpuc_hlo_dynamic_slice(fn, a, st, (int64_t[]){nb, m, 1}, &col));
  TRY(tpuc_hlo_reshape(fn, col, ct.dims, 2, &col));
  TRY(tpuc_hlo_unary(fn, TPUC_HLO_ABS, col, &absc));
  TRY(tpuc_hlo_iota(fn, &cti, 1, &rows));
  TRY(fbcast(fn, j, 0, &cti, &jb));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_GE, rows, jb, &below));
  TRY(fconst(fn, dt, -1, &ct, &neg));
  TRY(tpuc_hlo_select(fn, below, absc, neg, &absc));
  TRY(freduce(fn, mod, absc, dt, TPUC_HLO_MAX, -1, 1, &mx));
  TRY(fbcast(fn, mx, 1, &ct, &mxb));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_EQ, absc, mxb, &eq));
  TRY(fconst(fn, TPUC_DTYPE_S32, (double)m, &cti, &big));
  TRY(tpuc_hlo_select(fn, eq, rows, big, &cand));
  TRY(freduce(fn, mod, cand, TPUC_DTYPE_S32, TPUC_HLO_MIN, (double)m, 1, &p));
  /* no candidate (a NaN column): keep row j; the NaN check catches it */
  V pm, pbad, jv;
  tpuc_hlo_type bt = tpuc_hlo_type_make(TPUC_DTYPE_S32, &nb, 1);
  TRY(fconst(fn, TPUC_DTYPE_S32, (double)m, &bt, &pm));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_EQ, p, pm, &pbad));
  TRY(fbcast(fn, j, 0, &bt, &jv));
  TRY(tpuc_hlo_select(fn, pbad, jv, p, &p));
  /* pivots[:, j] = p + 1 */
  V ones, p1, p1r;
  TRY(fconst(fn, TPUC_DTYPE_S32, 1, &bt, &ones));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_ADD, p, ones, &p1));
  TRY(tpuc_hlo_reshape(fn, p1, (int64_t[]){nb, 1}, 2, &p1r));
  V st2[2] = {zero_i, j};
  TRY(tpuc_hlo_dynamic_update_slice(fn, piv, p1r, st2, &piv));
  /* swap rows j and p of a and perm */
  TRY(swap_rows(fn, mod, a, at, j, p, &a));
  TRY(swap_rows(fn, mod, perm, pt, j, p, &perm));
  /* pivot value and the scaled column */
  V pv, col2, zero_c, isz, recip, l, pvb;
  V st3[3] = {zero_i, j, j};
  TRY(tpuc_hlo_dynamic_slice(fn, a, st3, (int64_t[]){nb, 1, 1}, &pv));
  TRY(tpuc_hlo_dynamic_slice(fn, a, st, (int64_t[]){nb, m, 1}, &col2));
  tpuc_hlo_type pvt = tpuc_hlo_type_make(dt, (int64_t[]){nb, 1, 1}, 3);
  TRY(fconst(fn, dt, 0, &pvt, &zero_c));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_EQ, pv, zero_c, &isz));
  V one_c;
  TRY(fconst(fn, dt, 1, &pvt, &one_c));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_DIV, one_c, pv, &recip));
  TRY(tpuc_hlo_select(fn, isz, one_c, recip, &recip));
  tpuc_hlo_type colt = tpuc_hlo_type_make(dt, (int64_t[]){nb, m, 1}, 3);
  int64_t map3[3] = {0, 1, 2};
  TRY(tpuc_hlo_broadcast_in_dim(fn, recip, colt.dims, 3, map3, &pvb));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, col2, pvb, &l));
  /* info: first zero pivot */
  V isz1, inz, ji, setinfo;
  TRY(tpuc_hlo_reshape(fn, isz, &nb, 1, &isz1));
  V zb;
  TRY(fconst(fn, TPUC_DTYPE_S32, 0, &bt, &zb));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_EQ, info, zb, &inz));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_AND, isz1, inz, &setinfo));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_ADD, jv, ones, &ji));
  TRY(tpuc_hlo_select(fn, setinfo, ji, info, &info));
  /* rows > j of column j take l; the block (rows > j, cols > j) loses
   * l * u where u is row j */
  tpuc_hlo_type ait = *at;
  ait.dtype = TPUC_DTYPE_S32;
  V r3, c3, j3, rgt, cgt, ceq, lb, urow, ub, um, upd, lpos;
  TRY(tpuc_hlo_iota(fn, &ait, 1, &r3));
  TRY(tpuc_hlo_iota(fn, &ait, 2, &c3));
  TRY(fbcast(fn, j, 0, &ait, &j3));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_GT, r3, j3, &rgt));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_GT, c3, j3, &cgt));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_EQ, c3, j3, &ceq));
  TRY(tpuc_hlo_broadcast_in_dim(fn, l, at->dims, 3, map3, &lb));
  TRY(tpuc_hlo_dynamic_slice(fn, a, (V[]){zero_i, j, zero_i},
                             (int64_t[]){nb, 1, n}, &urow));
  TRY(tpuc_hlo_broadcast_in_dim(fn, urow, at->dims, 3, map3, &ub));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_AND, rgt, cgt, &um));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, lb, ub, &upd));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_SUB, a, upd, &upd));
  TRY(tpuc_hlo_select(fn, um, upd, a, &a));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_AND, rgt, ceq, &lpos));
  TRY(tpuc_hlo_select(fn, lpos, lb, a, &a));
  V jn;
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_ADD, j, one_i, &jn));
  V rets[5] = {jn, a, perm, piv, info};
  TRY(tpuc_hlo_return(fn, rets, 5));
  *out = fn;
  return NULL;
}

/* LU with partial pivoting of x (type t: batch..., m, n, real float):
 * lu (t), pivots (batch..., k) s32 1-based, perm (batch..., m) s32 (row
 * i of P^T A is row perm[i] of A), info (batch...) s32. */
typedef struct lu_result {
  V lu, piv, perm, info;
} lu_result;

static tpuc_status* lu_factor(op_ctx* c, V x, const tpuc_hlo_type* t,
                              lu_result* r) {
  int nbd = t->rank - 2;
  int64_t m = t->dims[nbd], n = t->dims[nbd + 1], k = m < n ? m : n;
  int64_t nb = 1;
  for (int d = 0; d < nbd; d++) nb *= t->dims[d];
  int64_t pdims[TPUC_MAX_RANK], mdims[TPUC_MAX_RANK];
  memcpy(pdims, t->dims, sizeof(int64_t) * (size_t)nbd);
  memcpy(mdims, t->dims, sizeof(int64_t) * (size_t)nbd);
  pdims[nbd] = k;
  mdims[nbd] = m;
  tpuc_hlo_type pt = tpuc_hlo_type_make(TPUC_DTYPE_S32, pdims, nbd + 1);
  tpuc_hlo_type mt = tpuc_hlo_type_make(TPUC_DTYPE_S32, mdims, nbd + 1);
  tpuc_hlo_type it = tpuc_hlo_type_make(TPUC_DTYPE_S32, t->dims, nbd);
  if (tpuc_hlo_type_num_elements(t) == 0) {
    r->lu = x;
    TRY(tpuc_hlo_iota(c->fn, &pt, nbd, &r->piv));
    V one;
    TRY(op_const(c, TPUC_DTYPE_S32, 1, &pt, &one));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, r->piv, one, &r->piv));
    TRY(tpuc_hlo_iota(c->fn, &mt, nbd, &r->perm));
    return op_const(c, TPUC_DTYPE_S32, 0, &it, &r->info);
  }
  tpuc_hlo_type types[5];
  types[0] = tpuc_hlo_type_scalar(TPUC_DTYPE_S32);
  types[1] = tpuc_hlo_type_make(t->dtype, (int64_t[]){nb, m, n}, 3);
  types[2] = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){nb, m, 1}, 3);
  types[3] = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){nb, k}, 2);
  types[4] = tpuc_hlo_type_make(TPUC_DTYPE_S32, &nb, 1);
  V init[5], outs[5];
  TRY(op_const(c, TPUC_DTYPE_S32, 0, NULL, &init[0]));
  TRY(tpuc_hlo_reshape(c->fn, x, types[1].dims, 3, &init[1]));
  TRY(tpuc_hlo_iota(c->fn, &types[2], 1, &init[2]));
  TRY(op_const(c, TPUC_DTYPE_S32, 0, &types[3], &init[3]));
  TRY(op_const(c, TPUC_DTYPE_S32, 0, &types[4], &init[4]));
  /* cond: j < k */
  tpuc_hlo_fn *cond, *body;
  TRY(tpuc_hlo_region_create(c->module, types, 5, &cond));
  V j, kk, lt;
  TRY(tpuc_hlo_get_arg(cond, 0, &j));
  TRY(fconst(cond, TPUC_DTYPE_S32, (double)k, NULL, &kk));
  TRY(tpuc_hlo_compare(cond, TPUC_HLO_LT, j, kk, &lt));
  TRY(tpuc_hlo_return(cond, &lt, 1));
  TRY(lu_body(c->module, types, &body));
  TRY(tpuc_hlo_while(c->fn, init, 5, cond, body, outs));
  TRY(tpuc_hlo_reshape(c->fn, outs[1], t->dims, t->rank, &r->lu));
  TRY(tpuc_hlo_reshape(c->fn, outs[3], pt.dims, pt.rank, &r->piv));
  TRY(tpuc_hlo_reshape(c->fn, outs[2], mt.dims, mt.rank, &r->perm));
  TRY(tpuc_hlo_reshape(c->fn, outs[4], it.dims, it.rank, &r->info));
  /* a NaN or inf anywhere in the factor: the CPU decides */
  tpuc_hlo_type bt = *t;
  bt.dtype = TPUC_DTYPE_PRED;
  V fin, bad, any;
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_IS_FINITE, r->lu, &fin));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NOT, fin, &bad));
  TRY(any_true(c, bad, &bt, &any));
  return add_check(c, any, "lu: non-finite values: the CPU decides");
}

/* PyTorch's is_contiguous() of tensor argument i: the CPU's det and
 * slogdet factor A^T instead of A when A is contiguous (and their
 * backward formulas rely on which one it was). */
static bool arg_contiguous(const op_ctx* c, int i) {
  const tpuc_view* v = &c->args[i].view;
  int64_t expected = 1;
  for (int d = 0; d < v->rank; d++)
    if (v->sizes[d] == 0) return true;
  for (int d = v->rank - 1; d >= 0; d--) {
    if (v->sizes[d] == 1) continue;
    if (v->strides[d] != expected) return false;
    expected *= v->sizes[d];
  }
  return true;
}

/* LU of argument i (square), or of its transpose where the CPU factors
 * the transpose (a contiguous A); *transposed says which. */
static tpuc_status* lu_factor_arg(op_ctx* c, int i, lu_result* r,
                                  bool* transposed) {
  const tpuc_hlo_type* t = &c->types[i];
  V x = c->vals[i];
  *transposed = arg_contiguous(c, i);
  if (*transposed) TRY(mat_transpose(c, x, t->rank, &x));
  return lu_factor(c, x, t, r);
}

/* Adds "some info > 0" to the call's check (the CPU then raises or
 * returns its own partial results). */
static tpuc_status* check_info(op_ctx* c, V info, const tpuc_hlo_type* t) {
  tpuc_hlo_type it = tpuc_hlo_type_make(TPUC_DTYPE_S32, t->dims, t->rank - 2);
  V zero, pos, any;
  TRY(op_const(c, TPUC_DTYPE_S32, 0, &it, &zero));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_GT, info, zero, &pos));
  it.dtype = TPUC_DTYPE_PRED;
  TRY(any_true(c, pos, &it, &any));
  return add_check(c, any, "singular matrix: the CPU decides");
}

/* linalg_lu_factor_ex(A, *, pivot, check_errors) -> (LU, pivots, info). */
static tpuc_status* lower_lu_factor_ex(op_ctx* c, int param) {
  (void)param;
  if (!is_matrix_arg(c, 0, false)) return op_unimpl("lu: not real matrices");
  bool pivot = true, check = false;
  TRY(bool_arg(c, 1, true, &pivot));
  TRY(bool_arg(c, 2, false, &check));
  if (!pivot) return op_unimpl("lu without pivoting: the CPU raises");
  lu_result r;
  TRY(lu_factor(c, c->vals[0], &c->types[0], &r));
  if (check) TRY(check_info(c, r.info, &c->types[0]));
  c->outs[0] = r.lu;
  c->outs[1] = r.piv;
  c->outs[2] = r.info;
  c->nouts = 3;
  return NULL;
}

/* Permutation matrix q (type t's batch, m x m, of t's dtype) with
 * q[i, r] = (perm[i] == r); perm (batch..., m) s32. q @ B is P^T B. */
static tpuc_status* perm_matrix(op_ctx* c, V perm, const tpuc_hlo_type* t,
                                int64_t m, V* out) {
  int nbd = t->rank - 2;
  int64_t dims[TPUC_MAX_RANK], map[TPUC_MAX_RANK];
  memcpy(dims, t->dims, sizeof(int64_t) * (size_t)nbd);
  dims[nbd] = m;
  dims[nbd + 1] = m;
  for (int d = 0; d <= nbd; d++) map[d] = d;
  tpuc_hlo_type it = tpuc_hlo_type_make(TPUC_DTYPE_S32, dims, nbd + 2);
  tpuc_hlo_type ft = it;
  ft.dtype = t->dtype;
  V pb, cols, eq, one, zero;
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, perm, dims, nbd + 2, map, &pb));
  TRY(tpuc_hlo_iota(c->fn, &it, nbd + 1, &cols));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_EQ, pb, cols, &eq));
  TRY(op_const(c, t->dtype, 1, &ft, &one));
  TRY(op_const(c, t->dtype, 0, &ft, &zero));
  return tpuc_hlo_select(c->fn, eq, one, zero, out);
}

/* Batched q @ b (trans: q^T @ b) at full precision; exact for a
 * permutation q and finite b. */
static tpuc_status* bmm(op_ctx* c, V q, V b, int rank, bool trans, V* out) {
  int64_t batch[TPUC_MAX_RANK];
  for (int d = 0; d < rank - 2; d++) batch[d] = d;
  int64_t lc = trans ? rank - 2 : rank - 1, rc = rank - 2;
  tpuc_hlo_dot_dims dd = {batch, batch, (size_t)(rank - 2),
                          &lc,   &rc,   1,
                          TPUC_DTYPE_INVALID, TPUC_HLO_PRECISION_HIGHEST};
  return tpuc_hlo_dot_general(c->fn, q, b, &dd, out);
}

/* Solves A x = b (adjoint: A^T x = b) from A's LU factor and row
 * permutation matrix q (P^T), same batch dims as b. */
static tpuc_status* lu_solve_core(op_ctx* c, V lu, V q, V b, int rank,
                                  bool adjoint, V* out) {
  tpuc_hlo_type tb;
  TRY(tpuc_hlo_value_type(c->fn, b, &tb));
  if (tpuc_hlo_type_num_elements(&tb) == 0) {
    *out = b;
    return NULL;
  }
  V y, z;
  if (!adjoint) {
    TRY(bmm(c, q, b, rank, false, &y));
    TRY(trsm(c, lu, y, true, true, true, false, &z));
    return trsm(c, lu, z, true, false, false, false, out);
  }
  TRY(trsm(c, lu, b, true, false, false, true, &y));
  TRY(trsm(c, lu, y, true, true, true, true, &z));
  return bmm(c, q, z, rank, true, out);
}

/* (P, L, U) from a factor lu (type t) and its row permutation perm
 * (batch..., m) s32: A = P L U, L (m x k) unit lower, U (k x n) upper. */
static tpuc_status* lu_unpack_core(op_ctx* c, V lu, V perm,
                                   const tpuc_hlo_type* tp) {
  const tpuc_hlo_type t = *tp;
  int nbd = t.rank - 2;
  int64_t m = t.dims[nbd], n = t.dims[nbd + 1], k = m < n ? m : n;
  V q;
  TRY(perm_matrix(c, perm, &t, m, &q));
  TRY(mat_transpose(c, q, t.rank, &c->outs[0]));
  int64_t lo[TPUC_MAX_RANK] = {0}, hl[TPUC_MAX_RANK], hu[TPUC_MAX_RANK];
  memcpy(hl, t.dims, sizeof hl);
  memcpy(hu, t.dims, sizeof hu);
  hl[nbd + 1] = k;
  hu[nbd] = k;
  V l, u, eye, one;
  TRY(tpuc_hlo_slice(c->fn, lu, lo, hl, NULL, &l));
  TRY(tpuc_hlo_slice(c->fn, lu, lo, hu, NULL, &u));
  tpuc_hlo_type lt = tpuc_hlo_type_make(t.dtype, hl, t.rank);
  tpuc_hlo_type ut = tpuc_hlo_type_make(t.dtype, hu, t.rank);
  /* L: strictly lower part plus ones on the diagonal */
  V slo, up;
  TRY(tri_mask(c, &lt, true, &slo));
  TRY(tri_mask(c, &lt, false, &up));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, slo, up, &eye));
  TRY(keep_triangle(c, l, &lt, true, &l));
  TRY(op_const(c, t.dtype, 1, &lt, &one));
  TRY(tpuc_hlo_select(c->fn, eye, one, l, &c->outs[1]));
  TRY(keep_triangle(c, u, &ut, false, &c->outs[2]));
  c->nouts = 3;
  return NULL;
}

/* linalg_lu(A, *, pivot) -> (P, L, U). */
static tpuc_status* lower_lu(op_ctx* c, int param) {
  (void)param;
  if (!is_matrix_arg(c, 0, false)) return op_unimpl("lu: not real matrices");
  bool pivot = true;
  TRY(bool_arg(c, 1, true, &pivot));
  if (!pivot) return op_unimpl("lu without pivoting: the CPU raises");
  lu_result r;
  TRY(lu_factor(c, c->vals[0], &c->types[0], &r));
  return lu_unpack_core(c, r.lu, r.perm, &c->types[0]);
}

/* Row permutation (batch..., m, 1) s32 from LAPACK pivots (batch..., k),
 * applying the swaps in order; pivots out of [1, m] go to the CPU. */
static tpuc_status* perm_from_pivots(op_ctx* c, V piv,
                                     const tpuc_hlo_type* pt, int64_t m,
                                     V* out) {
  int nbd = pt->rank - 1;
  int64_t k = pt->dims[nbd], nb = 1;
  for (int d = 0; d < nbd; d++) nb *= pt->dims[d];
  /* the range check */
  V lo, hi, blo, bhi, bad, any;
  TRY(op_const(c, TPUC_DTYPE_S32, 1, pt, &lo));
  TRY(op_const(c, TPUC_DTYPE_S32, (double)m, pt, &hi));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_LT, piv, lo, &blo));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_GT, piv, hi, &bhi));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, blo, bhi, &bad));
  tpuc_hlo_type bt = *pt;
  bt.dtype = TPUC_DTYPE_PRED;
  TRY(any_true(c, bad, &bt, &any));
  TRY(add_check(c, any, "pivots out of range: the CPU decides"));
  tpuc_hlo_type types[3];
  types[0] = tpuc_hlo_type_scalar(TPUC_DTYPE_S32);
  types[1] = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){nb, m, 1}, 3);
  types[2] = tpuc_hlo_type_make(TPUC_DTYPE_S32, (int64_t[]){nb, k}, 2);
  V init[3], outs[3];
  TRY(op_const(c, TPUC_DTYPE_S32, 0, NULL, &init[0]));
  TRY(tpuc_hlo_iota(c->fn, &types[1], 1, &init[1]));
  TRY(tpuc_hlo_reshape(c->fn, piv, types[2].dims, 2, &init[2]));
  tpuc_hlo_fn *cond, *body;
  V j, kk, lt;
  TRY(tpuc_hlo_region_create(c->module, types, 3, &cond));
  TRY(tpuc_hlo_get_arg(cond, 0, &j));
  TRY(fconst(cond, TPUC_DTYPE_S32, (double)k, NULL, &kk));
  TRY(tpuc_hlo_compare(cond, TPUC_HLO_LT, j, kk, &lt));
  TRY(tpuc_hlo_return(cond, &lt, 1));
  TRY(tpuc_hlo_region_create(c->module, types, 3, &body));
  V perm, pv, zero, one, p, pone, jn;
  TRY(tpuc_hlo_get_arg(body, 0, &j));
  TRY(tpuc_hlo_get_arg(body, 1, &perm));
  TRY(tpuc_hlo_get_arg(body, 2, &pv));
  TRY(fconst(body, TPUC_DTYPE_S32, 0, NULL, &zero));
  TRY(fconst(body, TPUC_DTYPE_S32, 1, NULL, &one));
  TRY(tpuc_hlo_dynamic_slice(body, pv, (V[]){zero, j}, (int64_t[]){nb, 1},
                             &p));
  TRY(tpuc_hlo_reshape(body, p, &nb, 1, &p));
  tpuc_hlo_type b1 = tpuc_hlo_type_make(TPUC_DTYPE_S32, &nb, 1);
  TRY(fconst(body, TPUC_DTYPE_S32, 1, &b1, &pone));
  TRY(tpuc_hlo_binary(body, TPUC_HLO_SUB, p, pone, &p));
  TRY(swap_rows(body, c->module, perm, &types[1], j, p, &perm));
  TRY(tpuc_hlo_binary(body, TPUC_HLO_ADD, j, one, &jn));
  V rets[3] = {jn, perm, pv};
  TRY(tpuc_hlo_return(body, rets, 3));
  TRY(tpuc_hlo_while(c->fn, init, 3, cond, body, outs));
  int64_t dims[TPUC_MAX_RANK];
  memcpy(dims, pt->dims, sizeof(int64_t) * (size_t)nbd);
  dims[nbd] = m;
  return tpuc_hlo_reshape(c->fn, outs[1], dims, nbd + 1, out);
}

/* x A = b is A^T x^T = b^T: right-side solves swap `adjoint` and
 * transpose b and the result. */
static tpuc_status* lu_solve_sided(op_ctx* c, V lu, V q, V b, int rank,
                                   bool left, bool adjoint, V* out) {
  if (left) return lu_solve_core(c, lu, q, b, rank, adjoint, out);
  V bt, x;
  TRY(mat_transpose(c, b, rank, &bt));
  TRY(lu_solve_core(c, lu, q, bt, rank, !adjoint, &x));
  return mat_transpose(c, x, rank, out);
}

/* linalg_lu_solve(LU, pivots, B, *, left, adjoint). */
static tpuc_status* lower_lu_solve(op_ctx* c, int param) {
  (void)param;
  bool left = true, adjoint = false;
  TRY(bool_arg(c, 3, true, &left));
  TRY(bool_arg(c, 4, false, &adjoint));
  if (!op_is_tensor(c, 1) || c->types[1].dtype != TPUC_DTYPE_S32)
    return op_unimpl("lu_solve: pivots not int32");
  const tpuc_hlo_type lt = c->types[0];
  const tpuc_hlo_type pt = c->types[1];
  if (!is_matrix_arg(c, 0, true) || pt.rank != lt.rank - 1)
    return op_unimpl("lu_solve: unexpected shapes");
  int64_t n = lt.dims[lt.rank - 1];
  for (int d = 0; d < pt.rank; d++)
    if (pt.dims[d] != (d == pt.rank - 1 ? n : lt.dims[d]))
      return op_unimpl("lu_solve: pivots shape");
  V a, b;
  tpuc_hlo_type ta;
  TRY(solve_operands(c, 0, 2, left, &a, &b, &ta));
  V perm, q;
  if (tpuc_hlo_type_num_elements(&pt) == 0) {
    int64_t dims[TPUC_MAX_RANK];
    memcpy(dims, pt.dims, sizeof dims);
    tpuc_hlo_type mt = tpuc_hlo_type_make(TPUC_DTYPE_S32, dims, pt.rank);
    TRY(tpuc_hlo_iota(c->fn, &mt, pt.rank - 1, &perm));
  } else {
    TRY(perm_from_pivots(c, c->vals[1], &pt, n, &perm));
  }
  /* perm as a (batch..., n, 1) matrix to share A's broadcast */
  int64_t pd[TPUC_MAX_RANK];
  memcpy(pd, pt.dims, sizeof pd);
  pd[pt.rank] = 1;
  tpuc_hlo_type pmt = tpuc_hlo_type_make(TPUC_DTYPE_S32, pd, pt.rank + 1);
  TRY(tpuc_hlo_reshape(c->fn, perm, pd, pt.rank + 1, &perm));
  TRY(to_batch(c, perm, &pmt, ta.dims, ta.rank - 2, &perm));
  TRY(tpuc_hlo_reshape(c->fn, perm, ta.dims, ta.rank - 1, &perm));
  TRY(perm_matrix(c, perm, &ta, n, &q));
  c->nouts = 1;
  return lu_solve_sided(c, a, q, b, ta.rank, left, adjoint, &c->outs[0]);
}

/* lu_unpack(LU, pivots, unpack_data, unpack_pivots) -> (P, L, U); the
 * partial unpackings (empty results) go to the CPU. */
static tpuc_status* lower_lu_unpack(op_ctx* c, int param) {
  (void)param;
  bool data = true, pivs = true;
  TRY(bool_arg(c, 2, true, &data));
  TRY(bool_arg(c, 3, true, &pivs));
  if (!data || !pivs) return op_unimpl("lu_unpack: partial unpacking");
  if (!is_matrix_arg(c, 0, false) || !op_is_tensor(c, 1) ||
      c->types[1].dtype != TPUC_DTYPE_S32)
    return op_unimpl("lu_unpack: unexpected arguments");
  const tpuc_hlo_type lt = c->types[0];
  const tpuc_hlo_type pt = c->types[1];
  int nbd = lt.rank - 2;
  int64_t m = lt.dims[nbd], n = lt.dims[nbd + 1], k = m < n ? m : n;
  if (pt.rank != lt.rank - 1 || pt.dims[nbd] != k)
    return op_unimpl("lu_unpack: pivots shape");
  for (int d = 0; d < nbd; d++)
    if (pt.dims[d] != lt.dims[d]) return op_unimpl("lu_unpack: batch dims");
  V perm;
  if (tpuc_hlo_type_num_elements(&lt) == 0) {
    int64_t dims[TPUC_MAX_RANK];
    memcpy(dims, lt.dims, sizeof dims);
    tpuc_hlo_type mt = tpuc_hlo_type_make(TPUC_DTYPE_S32, dims, nbd + 1);
    TRY(tpuc_hlo_iota(c->fn, &mt, nbd, &perm));
  } else {
    TRY(perm_from_pivots(c, c->vals[1], &pt, m, &perm));
  }
  return lu_unpack_core(c, c->vals[0], perm, &lt);
}

/* Diagonal (batch..., n) of square matrices x (type t). */
static tpuc_status* diag_of(op_ctx* c, V x, const tpuc_hlo_type* t, V* out) {
  V eye, lo, up, zero, sel;
  TRY(tri_mask(c, t, true, &lo));
  TRY(tri_mask(c, t, false, &up));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, lo, up, &eye));
  TRY(op_const(c, t->dtype, 0, t, &zero));
  TRY(tpuc_hlo_select(c->fn, eye, x, zero, &sel));
  int64_t dim = t->rank - 1;
  V init;
  TRY(op_const(c, t->dtype, 0, NULL, &init));
  tpuc_hlo_fn* body = NULL;
  TRY(tpuc_hlo_region_binary(c->module, t->dtype, TPUC_HLO_ADD, &body));
  return tpuc_hlo_reduce(c->fn, &sel, &init, 1, &dim, 1, body, out);
}

/* Product (or sum) over the last dim of x (rank `rank`). */
static tpuc_status* last_reduce(op_ctx* c, V x, tpuc_dtype dt, int rank,
                                tpuc_hlo_binary_op op, double init, V* out) {
  int64_t dim = rank - 1;
  V i0;
  TRY(op_const(c, dt, init, NULL, &i0));
  tpuc_hlo_fn* body = NULL;
  TRY(tpuc_hlo_region_binary(c->module, dt, op, &body));
  return tpuc_hlo_reduce(c->fn, &x, &i0, 1, &dim, 1, body, out);
}

/* Sign (+1 / -1, of dtype dt) of the permutation given by pivots
 * (batch..., k): -1 per pivot that is not its own index. */
static tpuc_status* pivots_sign(op_ctx* c, V piv, const tpuc_hlo_type* pt,
                                tpuc_dtype dt, V* out) {
  V idx, one, moved, m1, p1, f;
  TRY(tpuc_hlo_iota(c->fn, pt, pt->rank - 1, &idx));
  TRY(op_const(c, TPUC_DTYPE_S32, 1, pt, &one));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, idx, one, &idx));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_NE, piv, idx, &moved));
  tpuc_hlo_type ft = *pt;
  ft.dtype = dt;
  TRY(op_const(c, dt, -1, &ft, &m1));
  TRY(op_const(c, dt, 1, &ft, &p1));
  TRY(tpuc_hlo_select(c->fn, moved, m1, p1, &f));
  return last_reduce(c, f, dt, pt->rank, TPUC_HLO_MUL, 1, out);
}

/* _linalg_det(A) -> (det, LU, pivots) when param 0; _linalg_slogdet(A)
 * -> (sign, logabsdet, LU, pivots) when param 1. */
static tpuc_status* lower_det(op_ctx* c, int slog) {
  if (!is_matrix_arg(c, 0, true)) return op_unimpl("det: not real square");
  const tpuc_hlo_type t = c->types[0];
  lu_result r;
  bool tr = false;
  TRY(lu_factor_arg(c, 0, &r, &tr));
  tpuc_hlo_type pt;
  TRY(tpuc_hlo_value_type(c->fn, r.piv, &pt));
  V d, psign;
  TRY(diag_of(c, r.lu, &t, &d));
  TRY(pivots_sign(c, r.piv, &pt, t.dtype, &psign));
  if (!slog) {
    V prod;
    TRY(last_reduce(c, d, t.dtype, t.rank - 1, TPUC_HLO_MUL, 1, &prod));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, psign, prod, &c->outs[0]));
    c->outs[1] = r.lu;
    c->outs[2] = r.piv;
    c->nouts = 3;
    return NULL;
  }
  V sg, sprod, ab, lg;
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_SIGN, d, &sg));
  TRY(last_reduce(c, sg, t.dtype, t.rank - 1, TPUC_HLO_MUL, 1, &sprod));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, sprod, psign, &c->outs[0]));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_ABS, d, &ab));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_LOG, ab, &lg));
  TRY(last_reduce(c, lg, t.dtype, t.rank - 1, TPUC_HLO_ADD, 0, &c->outs[1]));
  c->outs[2] = r.lu;
  c->outs[3] = r.piv;
  c->nouts = 4;
  return NULL;
}

/* linalg_inv_ex(A, *, check_errors) -> (inverse, info): a singular A
 * (info > 0) goes to the CPU. */
static tpuc_status* lower_inv_ex(op_ctx* c, int param) {
  (void)param;
  if (!is_matrix_arg(c, 0, true)) return op_unimpl("inv: not real square");
  const tpuc_hlo_type t = c->types[0];
  int64_t n = t.dims[t.rank - 1];
  lu_result r;
  TRY(lu_factor(c, c->vals[0], &t, &r));
  TRY(check_info(c, r.info, &t));
  V q, eye, lo, up, one, zero;
  TRY(perm_matrix(c, r.perm, &t, n, &q));
  TRY(tri_mask(c, &t, true, &lo));
  TRY(tri_mask(c, &t, false, &up));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, lo, up, &eye));
  TRY(op_const(c, t.dtype, 1, &t, &one));
  TRY(op_const(c, t.dtype, 0, &t, &zero));
  TRY(tpuc_hlo_select(c->fn, eye, one, zero, &eye));
  TRY(lu_solve_core(c, r.lu, q, eye, t.rank, false, &c->outs[0]));
  c->outs[1] = r.info;
  c->nouts = 2;
  return NULL;
}

/* _linalg_solve_ex(A, B, *, left, check_errors) -> (result, LU, pivots,
 * info): matrix right-hand sides with A's batch dims only (vector cases
 * and broadcasting go to the CPU); a singular A goes to the CPU. */
static tpuc_status* lower_solve_ex(op_ctx* c, int param) {
  (void)param;
  bool left = true;
  TRY(bool_arg(c, 2, true, &left));
  if (!is_matrix_arg(c, 0, true) || !is_matrix_arg(c, 1, false))
    return op_unimpl("solve: not real matrices");
  const tpuc_hlo_type t = c->types[0];
  const tpuc_hlo_type tb = c->types[1];
  if (tb.rank != t.rank || t.dtype != tb.dtype)
    return op_unimpl("solve: vector or broadcast case");
  for (int d = 0; d < t.rank - 2; d++)
    if (t.dims[d] != tb.dims[d]) return op_unimpl("solve: broadcast case");
  int64_t n = t.dims[t.rank - 1];
  if ((left ? tb.dims[tb.rank - 2] : tb.dims[tb.rank - 1]) != n)
    return op_unimpl("solve: incompatible shapes");
  /* unlike det, the CPU's solve factors A itself (its backward solves
   * with that LU) */
  lu_result r;
  TRY(lu_factor(c, c->vals[0], &t, &r));
  TRY(check_info(c, r.info, &t));
  V q;
  TRY(perm_matrix(c, r.perm, &t, n, &q));
  TRY(lu_solve_sided(c, r.lu, q, c->vals[1], t.rank, left, false,
                     &c->outs[0]));
  c->outs[1] = r.lu;
  c->outs[2] = r.piv;
  c->outs[3] = r.info;
  c->nouts = 4;
  return NULL;
}

const op_entry op_table_linalg[] = {
    {"aten::linalg_cholesky_ex", lower_cholesky, 1},
    {"aten::linalg_cholesky_ex.L", lower_cholesky, 1},
    {"aten::cholesky", lower_cholesky, 0},
    {"aten::cholesky.out", lower_cholesky, 0},
    {"aten::linalg_solve_triangular", lower_solve_triangular, 0},
    {"aten::linalg_solve_triangular.out", lower_solve_triangular, 0},
    {"aten::triangular_solve", lower_triangular_solve, 0},
    {"aten::triangular_solve.X", lower_triangular_solve, 0},
    {"aten::cholesky_solve", lower_cholesky_solve, 0},
    {"aten::cholesky_solve.out", lower_cholesky_solve, 0},
    {"aten::_cholesky_solve_helper", lower_cholesky_solve, 0},
    {"aten::cholesky_inverse", lower_cholesky_inverse, 0},
    {"aten::cholesky_inverse.out", lower_cholesky_inverse, 0},
    {"aten::linalg_lu_factor_ex", lower_lu_factor_ex, 0},
    {"aten::linalg_lu_factor_ex.out", lower_lu_factor_ex, 0},
    {"aten::linalg_lu", lower_lu, 0},
    {"aten::linalg_lu.out", lower_lu, 0},
    {"aten::linalg_lu_solve", lower_lu_solve, 0},
    {"aten::linalg_lu_solve.out", lower_lu_solve, 0},
    {"aten::_linalg_det", lower_det, 0},
    {"aten::_linalg_det.result", lower_det, 0},
    {"aten::_linalg_slogdet", lower_det, 1},
    {"aten::_linalg_slogdet.sign", lower_det, 1},
    {"aten::linalg_inv_ex", lower_inv_ex, 0},
    {"aten::linalg_inv_ex.inverse", lower_inv_ex, 0},
    {"aten::_linalg_solve_ex", lower_solve_ex, 0},
    {"aten::_linalg_solve_ex.result", lower_solve_ex, 0},
    {"aten::lu_unpack", lower_lu_unpack, 0},
    {"aten::lu_unpack.out", lower_lu_unpack, 0},
    {NULL, NULL, 0},
};

/* Complex-ready ops of this file (ops_internal.h). */
const char* const op_complex_linalg[] = {NULL};
