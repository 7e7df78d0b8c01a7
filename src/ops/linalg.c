/* Linear algebra: Cholesky factorizations, triangular solves, LU and the
 * ops built on them, Householder QR, and Jacobi eigh / SVD.
 *
 * f32, f64, complex64 and complex128 run here (the CPU has no
 * half-precision kernels for these); complex math takes conjugate
 * transposes where the real math transposes. Argument errors (bad
 * shapes, mixed dtypes) are left to the CPU through UNIMPLEMENTED, which
 * raises its own message. Matrices carry leading batch dims; operands
 * with different batch dims are broadcast (numpy rules) as the CPU does.
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

/* The element types the factorizations here take: f32, f64 and complex. */
static bool linalg_dtype(tpuc_dtype d) {
  return real_float(d) || tpuc_dtype_is_complex(d);
}

/* The real type of complex `d` (f32 for c64, f64 for c128); reals map to
 * themselves. */
static tpuc_dtype real_part_dtype(tpuc_dtype d) {
  if (d == TPUC_DTYPE_C64) return TPUC_DTYPE_F32;
  if (d == TPUC_DTYPE_C128) return TPUC_DTYPE_F64;
  return d;
}

/* conj(x) in body fn (x itself when real). */
static tpuc_status* conj_of(tpuc_hlo_fn* fn, V x, V* out) {
  tpuc_hlo_type t;
  TRY(tpuc_hlo_value_type(fn, x, &t));
  if (!tpuc_dtype_is_complex(t.dtype)) {
    *out = x;
    return NULL;
  }
  V re, im;
  TRY(tpuc_hlo_unary(fn, TPUC_HLO_REAL, x, &re));
  TRY(tpuc_hlo_unary(fn, TPUC_HLO_IMAG, x, &im));
  TRY(tpuc_hlo_unary(fn, TPUC_HLO_NEG, im, &im));
  return tpuc_hlo_binary(fn, TPUC_HLO_COMPLEX, re, im, out);
}

/* i1: every element of x (real or complex) is finite. */
static tpuc_status* finite_of(tpuc_hlo_fn* fn, V x, V* out) {
  tpuc_hlo_type t;
  TRY(tpuc_hlo_value_type(fn, x, &t));
  if (!tpuc_dtype_is_complex(t.dtype))
    return tpuc_hlo_unary(fn, TPUC_HLO_IS_FINITE, x, out);
  V re, im, fr, fi;
  TRY(tpuc_hlo_unary(fn, TPUC_HLO_REAL, x, &re));
  TRY(tpuc_hlo_unary(fn, TPUC_HLO_IMAG, x, &im));
  TRY(tpuc_hlo_unary(fn, TPUC_HLO_IS_FINITE, re, &fr));
  TRY(tpuc_hlo_unary(fn, TPUC_HLO_IS_FINITE, im, &fi));
  return tpuc_hlo_binary(fn, TPUC_HLO_AND, fr, fi, out);
}

/* Argument i is an f32/f64/complex tensor of rank >= 2 (a batch of
 * matrices); `square` also asks for square matrices. */
static bool is_matrix_arg(const op_ctx* c, int i, bool square) {
  if (!op_is_tensor(c, i)) return false;
  const tpuc_hlo_type* t = &c->types[i];
  if (!linalg_dtype(t->dtype) || t->rank < 2) return false;
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

/* The conjugate transpose x^H (x^T when real). */
static tpuc_status* mat_adjoint(op_ctx* c, V x, int rank, V* out) {
  V xt;
  TRY(mat_transpose(c, x, rank, &xt));
  return conj_of(c->fn, xt, out);
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

/* op(a) in trsm: a, a^T, or a^H (a^T for real a). */
#define OP_N TPUC_HLO_NO_TRANSPOSE
#define OP_T TPUC_HLO_TRANSPOSE
#define OP_H TPUC_HLO_ADJOINT

/* Triangular solve of op(a) x = b (left) or x op(a) = b, a and b with the
 * same batch dims; empty operands give b back (x is empty too). */
static tpuc_status* trsm(op_ctx* c, V a, V b, bool left, bool lower, bool unit,
                         tpuc_hlo_transpose_mode op, V* out) {
  tpuc_hlo_type tb;
  TRY(tpuc_hlo_value_type(c->fn, b, &tb));
  if (tpuc_hlo_type_num_elements(&tb) == 0) {
    *out = b;
    return NULL;
  }
  if (op == OP_H && !tpuc_dtype_is_complex(tb.dtype)) op = OP_T;
  return tpuc_hlo_triangular_solve(c->fn, a, b, left, lower, unit, op, out);
}

/* Solves (l l^H) x = b (upper: (u^H u) x = b), same batch dims, reading
 * only the given triangle of the factor. */
static tpuc_status* chol_solve(op_ctx* c, V f, V b, bool upper, V* out) {
  V y;
  TRY(trsm(c, f, b, true, !upper, false, upper ? OP_H : OP_N, &y));
  return trsm(c, f, y, true, !upper, false, upper ? OP_N : OP_H, out);
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
    return op_unimpl("cholesky: not a batch of square matrices");
  bool upper = false;
  TRY(bool_arg(c, 1, false, &upper));
  const tpuc_hlo_type t = c->types[0];
  V l;
  if (tpuc_hlo_type_num_elements(&t) == 0) {
    TRY(op_const(c, t.dtype, 0, &t, &l));
  } else {
    V a = c->vals[0];
    if (tpuc_dtype_is_complex(t.dtype)) {
      /* LAPACK reads only the real part of the diagonal */
      V re, zr, ar, lo, up, dg;
      tpuc_hlo_type rt = t;
      rt.dtype = real_part_dtype(t.dtype);
      TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_REAL, a, &re));
      TRY(op_const(c, rt.dtype, 0, &rt, &zr));
      TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_COMPLEX, re, zr, &ar));
      TRY(tri_mask(c, &t, true, &lo));
      TRY(tri_mask(c, &t, false, &up));
      TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, lo, up, &dg));
      TRY(tpuc_hlo_select(c->fn, dg, ar, a, &a));
    }
    TRY(tpuc_hlo_cholesky(c->fn, a, !upper, &l));
    TRY(keep_triangle(c, l, &t, !upper, &l));
    /* A failed pivot: a diagonal entry not > 0, or a NaN/inf anywhere. */
    V fin, pos, diag, ok, zero, bad, any, re = l;
    TRY(finite_of(c->fn, l, &fin));
    tpuc_hlo_type rt = t;
    rt.dtype = real_part_dtype(t.dtype);
    if (rt.dtype != t.dtype) TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_REAL, l, &re));
    TRY(op_const(c, rt.dtype, 0, &rt, &zero));
    TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_GT, re, zero, &pos));
    V lo, up;
    TRY(tri_mask(c, &t, true, &lo));
    TRY(tri_mask(c, &t, false, &up));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, lo, up, &diag));
    TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NOT, diag, &diag));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_OR, diag, pos, &ok));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, ok, fin, &ok));
    TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NOT, ok, &bad));
    TRY(op_any_true(c, bad, &any));
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
 * `ia` and right-hand side `ib`: both matrices of one dtype, a square,
 * b's solved dim matching a, batch dims broadcasting. Fills the broadcast
 * operands. */
static tpuc_status* solve_operands(op_ctx* c, int ia, int ib, bool left, V* a,
                                   V* b, tpuc_hlo_type* ta_out) {
  if (!is_matrix_arg(c, ia, true) || !is_matrix_arg(c, ib, false))
    return op_unimpl("solve: not float or complex matrices");
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
  return trsm(c, a, b, left, !upper, unit, OP_N, &c->outs[0]);
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
  TRY(trsm(c, a, b, true, !upper, unit, transpose ? OP_T : OP_N, &c->outs[0]));
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

/* cholesky_inverse(L, upper): (L L^H)^-1 (upper: (U^H U)^-1) by solving
 * against the identity; the result is made exactly Hermitian from its
 * lower triangle (a real diagonal), as the CPU's is. */
static tpuc_status* lower_cholesky_inverse(op_ctx* c, int param) {
  (void)param;
  if (!is_matrix_arg(c, 0, true))
    return op_unimpl("cholesky_inverse: not square matrices");
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
  TRY(mat_adjoint(c, x, t.rank, &xt));
  if (tpuc_dtype_is_complex(t.dtype)) {
    /* the diagonal of a Hermitian matrix is real */
    V re, zr, xr, diag;
    tpuc_hlo_type rt = t;
    rt.dtype = real_part_dtype(t.dtype);
    TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_REAL, x, &re));
    TRY(op_const(c, rt.dtype, 0, &rt, &zr));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_COMPLEX, re, zr, &xr));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, lo, up, &diag));
    TRY(tpuc_hlo_select(c->fn, diag, xr, x, &x));
  }
  c->nouts = 1;
  return tpuc_hlo_select(c->fn, lo, x, xt, &c->outs[0]);
}

/* --------------------------------- LU ----------------------------------- */

/* Rank-0 constant of `dtype` in body fn, broadcast to `t` when non-NULL. */
static tpuc_status* fconst(tpuc_hlo_fn* fn, tpuc_dtype dtype, double v,
                           const tpuc_hlo_type* t, V* out) {
  V x;
  if (tpuc_dtype_is_float(dtype) || tpuc_dtype_is_complex(dtype)) {
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
 * i?amax, which takes |re| + |im| of a complex value); the column below
 * it is scaled by the pivot's reciprocal (as LAPACK's getf2 does), and
 * the trailing block gets the rank-1 update. A
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
  tpuc_dtype rdt = real_part_dtype(dt);
  tpuc_hlo_type ct = tpuc_hlo_type_make(rdt, (int64_t[]){nb, m}, 2);
  tpuc_hlo_type cti = ct;
  cti.dtype = TPUC_DTYPE_S32;
  V col, absc, rows, jb, below, neg, mx, mxb, eq, big, cand, p;
  V st[3] = {zero_i, zero_i, j};
  TRY(tpuc_hlo_dynamic_slice(fn, a, st, (int64_t[]){nb, m, 1}, &col));
  TRY(tpuc_hlo_reshape(fn, col, ct.dims, 2, &col));
  if (rdt != dt) {
    V re, im;
    TRY(tpuc_hlo_unary(fn, TPUC_HLO_REAL, col, &re));
    TRY(tpuc_hlo_unary(fn, TPUC_HLO_IMAG, col, &im));
    TRY(tpuc_hlo_unary(fn, TPUC_HLO_ABS, re, &re));
    TRY(tpuc_hlo_unary(fn, TPUC_HLO_ABS, im, &im));
    TRY(tpuc_hlo_binary(fn, TPUC_HLO_ADD, re, im, &absc));
  } else {
    TRY(tpuc_hlo_unary(fn, TPUC_HLO_ABS, col, &absc));
  }
  TRY(tpuc_hlo_iota(fn, &cti, 1, &rows));
  TRY(fbcast(fn, j, 0, &cti, &jb));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_GE, rows, jb, &below));
  TRY(fconst(fn, rdt, -1, &ct, &neg));
  TRY(tpuc_hlo_select(fn, below, absc, neg, &absc));
  TRY(freduce(fn, mod, absc, rdt, TPUC_HLO_MAX, -1, 1, &mx));
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
  V fin, bad, any;
  TRY(finite_of(c->fn, r->lu, &fin));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NOT, fin, &bad));
  TRY(op_any_true(c, bad, &any));
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
  /* (complex A is factored as it is) */
  *transposed = arg_contiguous(c, i) && !tpuc_dtype_is_complex(t->dtype);
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
  TRY(op_any_true(c, pos, &any));
  return add_check(c, any, "singular matrix: the CPU decides");
}

/* linalg_lu_factor_ex(A, *, pivot, check_errors) -> (LU, pivots, info). */
static tpuc_status* lower_lu_factor_ex(op_ctx* c, int param) {
  (void)param;
  if (!is_matrix_arg(c, 0, false)) return op_unimpl("lu: not matrices");
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
  tpuc_hlo_dot_dims dd = {
      batch, batch, (size_t)(rank - 2), &lc,
      &rc,   1,     TPUC_DTYPE_INVALID, TPUC_HLO_PRECISION_HIGHEST};
  return tpuc_hlo_dot_general(c->fn, q, b, &dd, out);
}

/* Solves A x = b (adjoint: A^H x = b) from A's LU factor and row
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
    TRY(trsm(c, lu, y, true, true, true, OP_N, &z));
    return trsm(c, lu, z, true, false, false, OP_N, out);
  }
  TRY(trsm(c, lu, b, true, false, false, OP_H, &y));
  TRY(trsm(c, lu, y, true, true, true, OP_H, &z));
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
  if (!is_matrix_arg(c, 0, false)) return op_unimpl("lu: not matrices");
  bool pivot = true;
  TRY(bool_arg(c, 1, true, &pivot));
  if (!pivot) return op_unimpl("lu without pivoting: the CPU raises");
  lu_result r;
  TRY(lu_factor(c, c->vals[0], &c->types[0], &r));
  return lu_unpack_core(c, r.lu, r.perm, &c->types[0]);
}

/* Row permutation (batch..., m, 1) s32 from LAPACK pivots (batch..., k),
 * applying the swaps in order; pivots out of [1, m] go to the CPU. */
static tpuc_status* perm_from_pivots(op_ctx* c, V piv, const tpuc_hlo_type* pt,
                                     int64_t m, V* out) {
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
  TRY(op_any_true(c, bad, &any));
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
  TRY(tpuc_hlo_dynamic_slice(body, pv, (V[]){zero, j}, (int64_t[]){nb, 1}, &p));
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

/* x A = b is A^H x^H = b^H (x A^H = b is A x^H = b^H): right-side solves
 * swap `adjoint` and take the conjugate transposes of b and the result. */
static tpuc_status* lu_solve_sided(op_ctx* c, V lu, V q, V b, int rank,
                                   bool left, bool adjoint, V* out) {
  if (left) return lu_solve_core(c, lu, q, b, rank, adjoint, out);
  V bt, x;
  TRY(mat_adjoint(c, b, rank, &bt));
  TRY(lu_solve_core(c, lu, q, bt, rank, !adjoint, &x));
  return mat_adjoint(c, x, rank, out);
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
 * parts not asked for are empty (shape [0]) tensors, as on the CPU. */
static tpuc_status* lower_lu_unpack(op_ctx* c, int param) {
  (void)param;
  bool data = true, pivs = true;
  TRY(bool_arg(c, 2, true, &data));
  TRY(bool_arg(c, 3, true, &pivs));
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
  if (tpuc_hlo_type_num_elements(&lt) == 0 || !pivs) {
    /* (pivots not unpacked are not read, nor checked) */
    int64_t dims[TPUC_MAX_RANK];
    memcpy(dims, lt.dims, sizeof dims);
    tpuc_hlo_type mt = tpuc_hlo_type_make(TPUC_DTYPE_S32, dims, nbd + 1);
    TRY(tpuc_hlo_iota(c->fn, &mt, nbd, &perm));
  } else {
    TRY(perm_from_pivots(c, c->vals[1], &pt, m, &perm));
  }
  TRY(lu_unpack_core(c, c->vals[0], perm, &lt));
  int64_t zero = 0;
  tpuc_hlo_type et = tpuc_hlo_type_make(lt.dtype, &zero, 1);
  if (!pivs) TRY(op_const(c, lt.dtype, 0, &et, &c->outs[0]));
  if (!data) {
    TRY(op_const(c, lt.dtype, 0, &et, &c->outs[1]));
    TRY(op_const(c, lt.dtype, 0, &et, &c->outs[2]));
  }
  return NULL;
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
  if (!is_matrix_arg(c, 0, true)) return op_unimpl("det: not square matrices");
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
  TRY(last_reduce(c, lg, real_part_dtype(t.dtype), t.rank - 1, TPUC_HLO_ADD, 0,
                  &c->outs[1]));
  c->outs[2] = r.lu;
  c->outs[3] = r.piv;
  c->nouts = 4;
  return NULL;
}

/* linalg_inv_ex(A, *, check_errors) -> (inverse, info): a singular A
 * (info > 0) goes to the CPU. */
static tpuc_status* lower_inv_ex(op_ctx* c, int param) {
  (void)param;
  if (!is_matrix_arg(c, 0, true)) return op_unimpl("inv: not square matrices");
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
 * info). B is a batch of vectors when it is rank 1 or has A's shape
 * without its last dim (PyTorch's rule); batch dims broadcast. A is
 * factored as it is (the CPU's solve does not factor A^T: its backward
 * solves with that LU); a singular A goes to the CPU. */
static tpuc_status* lower_solve_ex(op_ctx* c, int param) {
  (void)param;
  bool left = true;
  TRY(bool_arg(c, 2, true, &left));
  if (!is_matrix_arg(c, 0, true) || !op_is_tensor(c, 1))
    return op_unimpl("solve: not matrices");
  const tpuc_hlo_type t = c->types[0];
  tpuc_hlo_type tb = c->types[1];
  if (t.dtype != tb.dtype || tb.rank < 1)
    return op_unimpl("solve: mixed dtypes or a scalar B");
  bool vec = tb.rank == 1;
  if (tb.rank == t.rank - 1) {
    vec = true;
    for (int d = 0; d < tb.rank; d++)
      if (tb.dims[d] != t.dims[d]) vec = false;
  }
  if (vec && !left) return op_unimpl("solve: vector B with left=False");
  V b = c->vals[1];
  if (vec) {
    tb.dims[tb.rank++] = 1;
    TRY(tpuc_hlo_reshape(c->fn, b, tb.dims, tb.rank, &b));
  }
  if (tb.rank < 2) return op_unimpl("solve: B is not a matrix");
  int64_t n = t.dims[t.rank - 1];
  if ((left ? tb.dims[tb.rank - 2] : tb.dims[tb.rank - 1]) != n)
    return op_unimpl("solve: incompatible shapes");
  int64_t batch[TPUC_MAX_RANK];
  int nb = 0;
  if (!broadcast_batch(&t, &tb, batch, &nb) || nb + 2 > TPUC_MAX_RANK)
    return op_unimpl("solve: batch dims do not broadcast");
  lu_result r;
  TRY(lu_factor(c, c->vals[0], &t, &r));
  TRY(check_info(c, r.info, &t));
  V q, lub, qb, bb, x;
  TRY(perm_matrix(c, r.perm, &t, n, &q));
  TRY(to_batch(c, r.lu, &t, batch, nb, &lub));
  TRY(to_batch(c, q, &t, batch, nb, &qb));
  TRY(to_batch(c, b, &tb, batch, nb, &bb));
  TRY(lu_solve_sided(c, lub, qb, bb, nb + 2, left, false, &x));
  if (vec) {
    tpuc_hlo_type xt;
    TRY(tpuc_hlo_value_type(c->fn, x, &xt));
    TRY(tpuc_hlo_reshape(c->fn, x, xt.dims, xt.rank - 1, &x));
  }
  c->outs[0] = x;
  c->outs[1] = r.lu;
  c->outs[2] = r.piv;
  c->outs[3] = r.info;
  c->nouts = 4;
  return NULL;
}

/* ------------------------- Jacobi eigensolvers --------------------------- */

/* Hermitian eigendecomposition (_linalg_eigh) and SVD (_linalg_svd) by
 * cyclic Jacobi rotations in stablehlo while loops: sweeps over all
 * pairs (p, q), p < q, each applying the unitary rotation that zeroes
 * entry (p, q) of the Hermitian matrix at hand (A itself for eigh; the
 * Gram matrix A^H A of the columns for the one-sided SVD), until the
 * off-diagonal part is negligible. Eigenvectors and singular vectors are
 * unique only up to a sign (a phase when complex), which differs from
 * LAPACK's; the values match to rounding. Each rotation is O(n) work on
 * two rows / columns, a sweep O(n^3); large matrices go to the CPU. */

/* Largest matrix dim run here. */
#define JACOBI_MAX_DIM 32
/* Sweeps at most (convergence is quadratic: a few sweeps suffice). */
#define JACOBI_MAX_SWEEPS 30

/* x (nb, 1, 1) broadcast to type t (nb, r, c). */
static tpuc_status* jb(tpuc_hlo_fn* fn, V x, const tpuc_hlo_type* t, V* out) {
  int64_t map[3] = {0, 1, 2};
  return tpuc_hlo_broadcast_in_dim(fn, x, t->dims, 3, map, out);
}

/* The rotation zeroing the (p, q) entry of the Hermitian 2x2 block
 * [[app, apq], [conj(apq), aqq]] (app, aqq real (nb, 1, 1) of rdt; apq
 * (nb, 1, 1) of dt): with apq = r e^{i phi}, tan(angle) t from
 * theta = (aqq - app) / 2r (the smaller root), c = 1 / sqrt(1 + t^2),
 * s = t c; the rotation is U = [[c, w], [-conj(w), c]] with
 * w = s e^{i phi}. c and w come back in dt. */
static tpuc_status* jacobi_rotation(tpuc_hlo_fn* fn, V app, V aqq, V apq,
                                    tpuc_dtype dt, V* c_out, V* w_out) {
  tpuc_dtype rdt = real_part_dtype(dt);
  tpuc_hlo_type st;
  TRY(tpuc_hlo_value_type(fn, app, &st));
  V r, zero, one, two, isz, rs, th, ath, sq, t, neg, tn, c, s, ph, w;
  TRY(tpuc_hlo_unary(fn, TPUC_HLO_ABS, apq, &r));
  TRY(fconst(fn, rdt, 0, &st, &zero));
  TRY(fconst(fn, rdt, 1, &st, &one));
  TRY(fconst(fn, rdt, 2, &st, &two));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_EQ, r, zero, &isz));
  TRY(tpuc_hlo_select(fn, isz, one, r, &rs));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_SUB, aqq, app, &th));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, two, rs, &t));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_DIV, th, t, &th));
  TRY(tpuc_hlo_unary(fn, TPUC_HLO_ABS, th, &ath));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, th, th, &sq));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_ADD, sq, one, &sq));
  TRY(tpuc_hlo_unary(fn, TPUC_HLO_SQRT, sq, &sq));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_ADD, ath, sq, &t));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_DIV, one, t, &t));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_LT, th, zero, &neg));
  TRY(tpuc_hlo_unary(fn, TPUC_HLO_NEG, t, &tn));
  TRY(tpuc_hlo_select(fn, neg, tn, t, &t));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, t, t, &c));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_ADD, c, one, &c));
  TRY(tpuc_hlo_unary(fn, TPUC_HLO_SQRT, c, &c));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_DIV, one, c, &c));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, t, c, &s));
  TRY(tpuc_hlo_select(fn, isz, one, c, &c));
  TRY(tpuc_hlo_select(fn, isz, zero, s, &s));
  if (rdt != dt) {
    V rsc, sc;
    TRY(tpuc_hlo_convert(fn, rs, dt, &rsc));
    TRY(tpuc_hlo_binary(fn, TPUC_HLO_DIV, apq, rsc, &ph));
    TRY(tpuc_hlo_convert(fn, s, dt, &sc));
    TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, sc, ph, &w));
    TRY(tpuc_hlo_convert(fn, c, dt, c_out));
  } else {
    TRY(tpuc_hlo_unary(fn, TPUC_HLO_SIGN, apq, &ph));
    TRY(tpuc_hlo_select(fn, isz, one, ph, &ph));
    TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, s, ph, &w));
    *c_out = c;
  }
  *w_out = w;
  return NULL;
}

/* x_p' = c x_p + u x_q, x_q' = v x_p + c x_q for slices x_p, x_q of x
 * (type t, nb x r x cols) at `at_p` / `at_q` of shape `sz`, c/u/v of
 * shape (nb, 1, 1). Rows or columns, by the starts given. */
static tpuc_status* rotate_pair(tpuc_hlo_fn* fn, V x, const V* at_p,
                                const V* at_q, const int64_t* sz, V c, V u, V v,
                                V* out) {
  tpuc_hlo_type t;
  TRY(tpuc_hlo_value_type(fn, x, &t));
  tpuc_hlo_type pt = tpuc_hlo_type_make(t.dtype, sz, 3);
  V xp, xq, cb, ub, vb, a, b, np, nq;
  TRY(tpuc_hlo_dynamic_slice(fn, x, at_p, sz, &xp));
  TRY(tpuc_hlo_dynamic_slice(fn, x, at_q, sz, &xq));
  TRY(jb(fn, c, &pt, &cb));
  TRY(jb(fn, u, &pt, &ub));
  TRY(jb(fn, v, &pt, &vb));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, cb, xp, &a));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, ub, xq, &b));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_ADD, a, b, &np));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, vb, xp, &a));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, cb, xq, &b));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_ADD, a, b, &nq));
  TRY(tpuc_hlo_dynamic_update_slice(fn, x, np, at_p, &x));
  return tpuc_hlo_dynamic_update_slice(fn, x, nq, at_q, out);
}

/* Sum over dim 1 of x (nb, r, 1) in body fn: (nb, 1, 1). */
static tpuc_status* sum_rows(tpuc_hlo_fn* fn, tpuc_hlo_module* m, V x, V* out) {
  tpuc_hlo_type t;
  TRY(tpuc_hlo_value_type(fn, x, &t));
  V s;
  TRY(freduce(fn, m, x, t.dtype, TPUC_HLO_ADD, 0, 1, &s));
  return tpuc_hlo_reshape(fn, s, (int64_t[]){t.dims[0], 1, 1}, 3, out);
}

/* The inner loop body of one rotation: state (p, q, a, v), a (nb, M, N),
 * v (nb, N, N). eigh (svd false): a is Hermitian, rotated on both sides;
 * svd: a's columns are rotated (one-sided Jacobi on a^H a). Then (p, q)
 * steps to the next pair. */
static tpuc_status* jacobi_body(tpuc_hlo_module* mod,
                                const tpuc_hlo_type* types, bool svd,
                                tpuc_hlo_fn** out) {
  tpuc_hlo_fn* fn;
  TRY(tpuc_hlo_region_create(mod, types, 4, &fn));
  V p, q, a, v;
  TRY(tpuc_hlo_get_arg(fn, 0, &p));
  TRY(tpuc_hlo_get_arg(fn, 1, &q));
  TRY(tpuc_hlo_get_arg(fn, 2, &a));
  TRY(tpuc_hlo_get_arg(fn, 3, &v));
  const tpuc_hlo_type* at = &types[2];
  tpuc_dtype dt = at->dtype, rdt = real_part_dtype(dt);
  int64_t nb = at->dims[0], m = at->dims[1], n = at->dims[2];
  V z, app, aqq, apq;
  TRY(fconst(fn, TPUC_DTYPE_S32, 0, NULL, &z));
  V cp[3] = {z, z, p}, cq[3] = {z, z, q};
  int64_t csz[3] = {nb, m, 1};
  if (!svd) {
    int64_t one[3] = {nb, 1, 1};
    TRY(tpuc_hlo_dynamic_slice(fn, a, (V[]){z, p, p}, one, &app));
    TRY(tpuc_hlo_dynamic_slice(fn, a, (V[]){z, q, q}, one, &aqq));
    TRY(tpuc_hlo_dynamic_slice(fn, a, (V[]){z, p, q}, one, &apq));
    if (rdt != dt) {
      TRY(tpuc_hlo_unary(fn, TPUC_HLO_REAL, app, &app));
      TRY(tpuc_hlo_unary(fn, TPUC_HLO_REAL, aqq, &aqq));
    }
  } else {
    /* Gram entries of columns p and q */
    V xp, xq, xpc, sq;
    TRY(tpuc_hlo_dynamic_slice(fn, a, cp, csz, &xp));
    TRY(tpuc_hlo_dynamic_slice(fn, a, cq, csz, &xq));
    TRY(conj_of(fn, xp, &xpc));
    TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, xpc, xq, &sq));
    TRY(sum_rows(fn, mod, sq, &apq));
    TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, xpc, xp, &sq));
    if (rdt != dt) TRY(tpuc_hlo_unary(fn, TPUC_HLO_REAL, sq, &sq));
    TRY(sum_rows(fn, mod, sq, &app));
    TRY(conj_of(fn, xq, &xpc));
    TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, xpc, xq, &sq));
    if (rdt != dt) TRY(tpuc_hlo_unary(fn, TPUC_HLO_REAL, sq, &sq));
    TRY(sum_rows(fn, mod, sq, &aqq));
  }
  V c, w, wc, mw, mwc;
  TRY(jacobi_rotation(fn, app, aqq, apq, dt, &c, &w));
  TRY(conj_of(fn, w, &wc));
  TRY(tpuc_hlo_unary(fn, TPUC_HLO_NEG, w, &mw));
  TRY(tpuc_hlo_unary(fn, TPUC_HLO_NEG, wc, &mwc));
  /* a U: columns p' = c a_p - conj(w) a_q, q' = w a_p + c a_q */
  TRY(rotate_pair(fn, a, cp, cq, csz, c, mwc, w, &a));
  if (!svd) {
    /* U^H a: rows p' = c r_p - w r_q, q' = conj(w) r_p + c r_q */
    V rp[3] = {z, p, z}, rq[3] = {z, q, z};
    TRY(rotate_pair(fn, a, rp, rq, (int64_t[]){nb, 1, n}, c, mw, wc, &a));
  }
  TRY(rotate_pair(fn, v, cp, cq, (int64_t[]){nb, n, 1}, c, mwc, w, &v));
  /* next pair */
  V one, q1, nn, wrap, p1, p2;
  TRY(fconst(fn, TPUC_DTYPE_S32, 1, NULL, &one));
  TRY(fconst(fn, TPUC_DTYPE_S32, (double)n, NULL, &nn));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_ADD, q, one, &q1));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_EQ, q1, nn, &wrap));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_ADD, p, one, &p1));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_ADD, p1, one, &p2));
  TRY(tpuc_hlo_select(fn, wrap, p1, p, &p));
  TRY(tpuc_hlo_select(fn, wrap, p2, q1, &q));
  V rets[4] = {p, q, a, v};
  TRY(tpuc_hlo_return(fn, rets, 4));
  *out = fn;
  return NULL;
}

/* Batched x^H y (contracting dim 1 of both, nb x r x s), in body fn. */
static tpuc_status* bmm_h(tpuc_hlo_fn* fn, V x, V y, V* out) {
  V xc;
  TRY(conj_of(fn, x, &xc));
  int64_t b = 0, lc = 1, rc = 1;
  tpuc_hlo_dot_dims dd = {
      &b, &b, 1, &lc, &rc, 1, TPUC_DTYPE_INVALID, TPUC_HLO_PRECISION_HIGHEST};
  return tpuc_hlo_dot_general(fn, xc, y, &dd, out);
}

/* Batched x y (nb x r x s times nb x s x t), in body fn. */
static tpuc_status* bmm3(tpuc_hlo_fn* fn, V x, V y, V* out) {
  int64_t b = 0, lc = 2, rc = 1;
  tpuc_hlo_dot_dims dd = {
      &b, &b, 1, &lc, &rc, 1, TPUC_DTYPE_INVALID, TPUC_HLO_PRECISION_HIGHEST};
  return tpuc_hlo_dot_general(fn, x, y, &dd, out);
}

/* |x|^2 elementwise in the real dtype. */
static tpuc_status* abs2(tpuc_hlo_fn* fn, V x, V* out) {
  V xc, p;
  TRY(conj_of(fn, x, &xc));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, xc, x, &p));
  tpuc_hlo_type t;
  TRY(tpuc_hlo_value_type(fn, p, &t));
  if (tpuc_dtype_is_complex(t.dtype))
    return tpuc_hlo_unary(fn, TPUC_HLO_REAL, p, out);
  *out = p;
  return NULL;
}

/* Unit roundoff-scale tolerance of dtype d. */
static double jacobi_eps(tpuc_dtype d) {
  return real_part_dtype(d) == TPUC_DTYPE_F32 ? 0x1p-24 : 0x1p-53;
}

/* The sweep condition: sweeps left and some batch entry not converged.
 * eigh: the off-diagonal of a has squared norm > eps^2 |a|^2. svd: some
 * column pair has |a_p^H a_q|^2 > eps^2 |a_p|^2 |a_q|^2. */
static tpuc_status* jacobi_cond(tpuc_hlo_module* mod,
                                const tpuc_hlo_type* types, bool svd,
                                tpuc_hlo_fn** out) {
  tpuc_hlo_fn* fn;
  TRY(tpuc_hlo_region_create(mod, types, 3, &fn));
  V k, a, kmax, more;
  TRY(tpuc_hlo_get_arg(fn, 0, &k));
  TRY(tpuc_hlo_get_arg(fn, 1, &a));
  const tpuc_hlo_type* at = &types[1];
  tpuc_dtype rdt = real_part_dtype(at->dtype);
  int64_t nb = at->dims[0], n = at->dims[2];
  double eps = jacobi_eps(at->dtype);
  V g = a;
  if (svd) TRY(bmm_h(fn, a, a, &g));
  tpuc_hlo_type gt = tpuc_hlo_type_make(rdt, (int64_t[]){nb, n, n}, 3);
  tpuc_hlo_type it = gt;
  it.dtype = TPUC_DTYPE_S32;
  V g2, ri, ci, offd, zero, bad;
  TRY(abs2(fn, g, &g2));
  TRY(tpuc_hlo_iota(fn, &it, 1, &ri));
  TRY(tpuc_hlo_iota(fn, &it, 2, &ci));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_NE, ri, ci, &offd));
  TRY(fconst(fn, rdt, 0, &gt, &zero));
  if (!svd) {
    V off, tot, s_off, s_tot, e2;
    TRY(tpuc_hlo_select(fn, offd, g2, zero, &off));
    int64_t dims[2] = {1, 2};
    V i0;
    TRY(fconst(fn, rdt, 0, NULL, &i0));
    tpuc_hlo_fn* add;
    TRY(tpuc_hlo_region_binary(mod, rdt, TPUC_HLO_ADD, &add));
    TRY(tpuc_hlo_reduce(fn, &off, &i0, 1, dims, 2, add, &s_off));
    TRY(tpuc_hlo_region_binary(mod, rdt, TPUC_HLO_ADD, &add));
    TRY(tpuc_hlo_reduce(fn, &g2, &i0, 1, dims, 2, add, &tot));
    tpuc_hlo_type bt = tpuc_hlo_type_make(rdt, &nb, 1);
    TRY(fconst(fn, rdt, eps * eps, &bt, &e2));
    TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, tot, e2, &s_tot));
    TRY(tpuc_hlo_compare(fn, TPUC_HLO_GT, s_off, s_tot, &bad));
    int64_t d0 = 0;
    V f;
    TRY(fconst(fn, TPUC_DTYPE_PRED, 0, NULL, &f));
    tpuc_hlo_fn* orr;
    TRY(tpuc_hlo_region_binary(mod, TPUC_DTYPE_PRED, TPUC_HLO_OR, &orr));
    TRY(tpuc_hlo_reduce(fn, &bad, &f, 1, &d0, 1, orr, &more));
  } else {
    /* diag products d_p d_q from the Gram diagonal */
    V dsel, d, dp, dq, prod, e2, lim, offv;
    TRY(tpuc_hlo_select(fn, offd, zero, g2, &dsel));
    TRY(freduce(fn, mod, dsel, rdt, TPUC_HLO_ADD, 0, 2, &d));
    TRY(tpuc_hlo_unary(fn, TPUC_HLO_SQRT, d, &d)); /* |a_p|^2 */
    int64_t m1[2] = {0, 1}, m2[2] = {0, 2};
    TRY(tpuc_hlo_broadcast_in_dim(fn, d, gt.dims, 3, m1, &dp));
    TRY(tpuc_hlo_broadcast_in_dim(fn, d, gt.dims, 3, m2, &dq));
    TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, dp, dq, &prod));
    TRY(fconst(fn, rdt, eps * eps, &gt, &e2));
    TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, prod, e2, &lim));
    TRY(tpuc_hlo_compare(fn, TPUC_HLO_GT, g2, lim, &bad));
    TRY(tpuc_hlo_binary(fn, TPUC_HLO_AND, bad, offd, &offv));
    int64_t dims[3] = {0, 1, 2};
    V f;
    TRY(fconst(fn, TPUC_DTYPE_PRED, 0, NULL, &f));
    tpuc_hlo_fn* orr;
    TRY(tpuc_hlo_region_binary(mod, TPUC_DTYPE_PRED, TPUC_HLO_OR, &orr));
    TRY(tpuc_hlo_reduce(fn, &offv, &f, 1, dims, 3, orr, &more));
  }
  TRY(fconst(fn, TPUC_DTYPE_S32, JACOBI_MAX_SWEEPS, NULL, &kmax));
  V lt;
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_LT, k, kmax, &lt));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_AND, lt, more, &more));
  TRY(tpuc_hlo_return(fn, &more, 1));
  *out = fn;
  return NULL;
}

/* Runs Jacobi sweeps on a (nb, M, N; N >= 2) from v = I: the rotated a
 * and the accumulated rotations v (nb, N, N). */
static tpuc_status* jacobi_run(op_ctx* c, V a, bool svd, V* a_out, V* v_out) {
  tpuc_hlo_type at;
  TRY(tpuc_hlo_value_type(c->fn, a, &at));
  int64_t nb = at.dims[0], n = at.dims[2];
  tpuc_hlo_type vt = tpuc_hlo_type_make(at.dtype, (int64_t[]){nb, n, n}, 3);
  V eye;
  {
    V lo, up, one, zero;
    TRY(tri_mask(c, &vt, true, &lo));
    TRY(tri_mask(c, &vt, false, &up));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, lo, up, &eye));
    TRY(op_const(c, at.dtype, 1, &vt, &one));
    TRY(op_const(c, at.dtype, 0, &vt, &zero));
    TRY(tpuc_hlo_select(c->fn, eye, one, zero, &eye));
  }
  /* outer loop: (sweep, a, v) */
  tpuc_hlo_type ot[3] = {tpuc_hlo_type_scalar(TPUC_DTYPE_S32), at, vt};
  tpuc_hlo_fn *ocond, *obody;
  TRY(jacobi_cond(c->module, ot, svd, &ocond));
  TRY(tpuc_hlo_region_create(c->module, ot, 3, &obody));
  V k, a1, v1;
  TRY(tpuc_hlo_get_arg(obody, 0, &k));
  TRY(tpuc_hlo_get_arg(obody, 1, &a1));
  TRY(tpuc_hlo_get_arg(obody, 2, &v1));
  /* inner loop over the pairs: (p, q, a, v) while p < n - 1 */
  tpuc_hlo_type it[4] = {tpuc_hlo_type_scalar(TPUC_DTYPE_S32),
                         tpuc_hlo_type_scalar(TPUC_DTYPE_S32), at, vt};
  tpuc_hlo_fn *icond, *ibody;
  TRY(tpuc_hlo_region_create(c->module, it, 4, &icond));
  {
    V p, lim, lt;
    TRY(tpuc_hlo_get_arg(icond, 0, &p));
    TRY(fconst(icond, TPUC_DTYPE_S32, (double)(n - 1), NULL, &lim));
    TRY(tpuc_hlo_compare(icond, TPUC_HLO_LT, p, lim, &lt));
    TRY(tpuc_hlo_return(icond, &lt, 1));
  }
  TRY(jacobi_body(c->module, it, svd, &ibody));
  V i0, i1, ins[4], outs[4];
  TRY(fconst(obody, TPUC_DTYPE_S32, 0, NULL, &i0));
  TRY(fconst(obody, TPUC_DTYPE_S32, 1, NULL, &i1));
  ins[0] = i0;
  ins[1] = i1;
  ins[2] = a1;
  ins[3] = v1;
  TRY(tpuc_hlo_while(obody, ins, 4, icond, ibody, outs));
  V k1;
  TRY(tpuc_hlo_binary(obody, TPUC_HLO_ADD, k, i1, &k1));
  V orets[3] = {k1, outs[2], outs[3]};
  TRY(tpuc_hlo_return(obody, orets, 3));
  V zero_s, oins[3], oouts[3];
  TRY(op_const(c, TPUC_DTYPE_S32, 0, NULL, &zero_s));
  oins[0] = zero_s;
  oins[1] = a;
  oins[2] = eye;
  TRY(tpuc_hlo_while(c->fn, oins, 3, ocond, obody, oouts));
  *a_out = oouts[1];
  *v_out = oouts[2];
  return NULL;
}

/* Sorts vals (nb, n) real along dim 1 (ascending, or descending) and
 * permutes the columns of each mats[i] (nb, r, n) alike. */
static tpuc_status* sort_columns(op_ctx* c, V vals, bool descending, V* mats,
                                 int nmats, V* sorted) {
  tpuc_hlo_type t;
  TRY(tpuc_hlo_value_type(c->fn, vals, &t));
  int64_t nb = t.dims[0], n = t.dims[1];
  tpuc_hlo_type it = t;
  it.dtype = TPUC_DTYPE_S32;
  V idx, ins[2], outs[2];
  TRY(tpuc_hlo_iota(c->fn, &it, 1, &idx));
  ins[0] = vals;
  ins[1] = idx;
  tpuc_dtype dts[2] = {t.dtype, TPUC_DTYPE_S32};
  tpuc_hlo_fn* cmp;
  TRY(tpuc_hlo_region_compare(c->module, dts, 2,
                              descending ? TPUC_HLO_GT : TPUC_HLO_LT, &cmp));
  TRY(tpuc_hlo_sort(c->fn, ins, 2, 1, true, cmp, outs));
  *sorted = outs[0];
  /* permutation matrix P[b, i, j] = (idx[b, j] == i): x P permutes */
  int64_t pd[3] = {nb, n, n}, map[2] = {0, 2};
  tpuc_hlo_type pit = tpuc_hlo_type_make(TPUC_DTYPE_S32, pd, 3);
  V ib, rows, eq;
  TRY(tpuc_hlo_broadcast_in_dim(c->fn, outs[1], pd, 3, map, &ib));
  TRY(tpuc_hlo_iota(c->fn, &pit, 1, &rows));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_EQ, ib, rows, &eq));
  for (int i = 0; i < nmats; i++) {
    tpuc_hlo_type mt;
    TRY(tpuc_hlo_value_type(c->fn, mats[i], &mt));
    tpuc_hlo_type ft = pit;
    ft.dtype = mt.dtype;
    V one, zero, pm;
    TRY(op_const(c, mt.dtype, 1, &ft, &one));
    TRY(op_const(c, mt.dtype, 0, &ft, &zero));
    TRY(tpuc_hlo_select(c->fn, eq, one, zero, &pm));
    TRY(bmm3(c->fn, mats[i], pm, &mats[i]));
  }
  return NULL;
}

/* Identity of type t (square last dims). */
static tpuc_status* identity(op_ctx* c, const tpuc_hlo_type* t, V* out) {
  V lo, up, eye, one, zero;
  TRY(tri_mask(c, t, true, &lo));
  TRY(tri_mask(c, t, false, &up));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, lo, up, &eye));
  TRY(op_const(c, t->dtype, 1, t, &one));
  TRY(op_const(c, t->dtype, 0, t, &zero));
  return tpuc_hlo_select(c->fn, eye, one, zero, out);
}

/* The Hermitian matrix that x's `lower` (or upper) triangle stands for,
 * the diagonal's imaginary part dropped (LAPACK reads only that). */
static tpuc_status* hermitian_from(op_ctx* c, V x, const tpuc_hlo_type* t,
                                   bool lower, V* out) {
  V xt, keep, lo, up, diag, h;
  TRY(mat_adjoint(c, x, t->rank, &xt));
  TRY(tri_mask(c, t, true, &lo));
  TRY(tri_mask(c, t, false, &up));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_AND, lo, up, &diag));
  keep = lower ? lo : up;
  TRY(tpuc_hlo_select(c->fn, keep, x, xt, &h));
  if (tpuc_dtype_is_complex(t->dtype)) {
    V re, zr, xr;
    tpuc_hlo_type rt = *t;
    rt.dtype = real_part_dtype(t->dtype);
    TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_REAL, x, &re));
    TRY(op_const(c, rt.dtype, 0, &rt, &zr));
    TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_COMPLEX, re, zr, &xr));
    TRY(tpuc_hlo_select(c->fn, diag, xr, h, &h));
  }
  *out = h;
  return NULL;
}

/* Adds "x has a NaN or an infinity" to the call's check. */
static tpuc_status* check_finite(op_ctx* c, V x) {
  V fin, bad, any;
  TRY(finite_of(c->fn, x, &fin));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NOT, fin, &bad));
  TRY(op_any_true(c, bad, &any));
  return add_check(c, any, "non-finite input: the CPU decides");
}

/* Empty (shape [0]) tensor of dtype d: the outputs not computed. */
static tpuc_status* empty0(op_ctx* c, tpuc_dtype d, V* out) {
  int64_t zero = 0;
  tpuc_hlo_type et = tpuc_hlo_type_make(d, &zero, 1);
  return op_const(c, d, 0, &et, out);
}

/* _linalg_eigh(A, UPLO, compute_v) -> (eigenvalues ascending (real),
 * eigenvectors (columns; [0] when not computed)). */
static tpuc_status* lower_eigh(op_ctx* c, int param) {
  (void)param;
  if (!is_matrix_arg(c, 0, true)) return op_unimpl("eigh: not square");
  const char* uplo = op_str_arg(c, 1, "L");
  bool lower = strcmp(uplo, "L") == 0 || strcmp(uplo, "l") == 0;
  if (!lower && strcmp(uplo, "U") != 0 && strcmp(uplo, "u") != 0)
    return op_unimpl("eigh: bad UPLO: the CPU raises");
  bool vecs = true;
  TRY(bool_arg(c, 2, true, &vecs));
  const tpuc_hlo_type t = c->types[0];
  int nbd = t.rank - 2;
  int64_t n = t.dims[nbd], nb = 1;
  for (int d = 0; d < nbd; d++) nb *= t.dims[d];
  if (n > JACOBI_MAX_DIM) return op_unimpl("eigh: large matrix");
  /* complex64 stays on the CPU: composite ops' gradients built on its
   * eigenvectors (pinv(hermitian=True)) differ from the CPU's by more
   * than complex64's comparison tolerance, though no less accurate */
  if (t.dtype == TPUC_DTYPE_C64)
    return op_unimpl("eigh: complex64 (rounding differs from LAPACK)");
  tpuc_dtype rdt = real_part_dtype(t.dtype);
  tpuc_hlo_type et = tpuc_hlo_type_make(rdt, t.dims, nbd + 1);
  V w, v;
  if (nb == 0 || n == 0) {
    TRY(op_const(c, rdt, 0, &et, &w));
    TRY(op_const(c, t.dtype, 0, &t, &v));
  } else {
    V h;
    TRY(check_finite(c, c->vals[0]));
    TRY(hermitian_from(c, c->vals[0], &t, lower, &h));
    tpuc_hlo_type t3 = tpuc_hlo_type_make(t.dtype, (int64_t[]){nb, n, n}, 3);
    TRY(tpuc_hlo_reshape(c->fn, h, t3.dims, 3, &h));
    if (n > 1) {
      TRY(jacobi_run(c, h, false, &h, &v));
    } else {
      TRY(op_const(c, t.dtype, 1, &t3, &v));
    }
    V d;
    TRY(diag_of(c, h, &t3, &d));
    if (rdt != t.dtype) TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_REAL, d, &d));
    TRY(sort_columns(c, d, false, &v, 1, &w));
    TRY(tpuc_hlo_reshape(c->fn, w, et.dims, et.rank, &w));
    TRY(tpuc_hlo_reshape(c->fn, v, t.dims, t.rank, &v));
  }
  c->outs[0] = w;
  if (vecs) {
    c->outs[1] = v;
  } else {
    TRY(empty0(c, t.dtype, &c->outs[1]));
  }
  c->nouts = 2;
  return NULL;
}

/* Completes q (nb, M, K) whose columns are orthonormal or zero: each zero
 * column becomes the normalized residual (I - q q^H) e_i of the unit
 * vector e_i with the largest residual, orthogonalized twice; column by
 * column, so the result has orthonormal columns. */
static tpuc_status* complete_basis(op_ctx* c, V q, V* out) {
  tpuc_hlo_type qt;
  TRY(tpuc_hlo_value_type(c->fn, q, &qt));
  int64_t nb = qt.dims[0], m = qt.dims[1], k = qt.dims[2];
  tpuc_dtype dt = qt.dtype, rdt = real_part_dtype(dt);
  tpuc_hlo_type types[2] = {tpuc_hlo_type_scalar(TPUC_DTYPE_S32), qt};
  tpuc_hlo_fn *cond, *fn;
  TRY(tpuc_hlo_region_create(c->module, types, 2, &cond));
  {
    V j, kk, lt;
    TRY(tpuc_hlo_get_arg(cond, 0, &j));
    TRY(fconst(cond, TPUC_DTYPE_S32, (double)k, NULL, &kk));
    TRY(tpuc_hlo_compare(cond, TPUC_HLO_LT, j, kk, &lt));
    TRY(tpuc_hlo_return(cond, &lt, 1));
  }
  TRY(tpuc_hlo_region_create(c->module, types, 2, &fn));
  V j, x;
  TRY(tpuc_hlo_get_arg(fn, 0, &j));
  TRY(tpuc_hlo_get_arg(fn, 1, &x));
  tpuc_hlo_type mt = tpuc_hlo_type_make(dt, (int64_t[]){nb, m, m}, 3);
  tpuc_hlo_type mti = mt;
  mti.dtype = TPUC_DTYPE_S32;
  /* r = I - x x^H */
  V xh, g, ri, ci, eq, one, zero, eye, r;
  {
    int64_t perm[3] = {0, 2, 1};
    TRY(tpuc_hlo_transpose(fn, x, perm, &xh));
    TRY(conj_of(fn, xh, &xh));
  }
  TRY(bmm3(fn, x, xh, &g));
  TRY(tpuc_hlo_iota(fn, &mti, 1, &ri));
  TRY(tpuc_hlo_iota(fn, &mti, 2, &ci));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_EQ, ri, ci, &eq));
  TRY(fconst(fn, dt, 1, &mt, &one));
  TRY(fconst(fn, dt, 0, &mt, &zero));
  TRY(tpuc_hlo_select(fn, eq, one, zero, &eye));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_SUB, eye, g, &r));
  /* the column of largest norm (the first such) */
  V r2, nr, mx, mxb, isx, cols, big, cand, idx, oh, ohc, col;
  TRY(abs2(fn, r, &r2));
  TRY(freduce(fn, c->module, r2, rdt, TPUC_HLO_ADD, 0, 1, &nr)); /* nb,m */
  TRY(freduce(fn, c->module, nr, rdt, TPUC_HLO_MAX, -1, 1, &mx));
  tpuc_hlo_type nt = tpuc_hlo_type_make(rdt, (int64_t[]){nb, m}, 2);
  tpuc_hlo_type nti = nt;
  nti.dtype = TPUC_DTYPE_S32;
  TRY(fbcast(fn, mx, 1, &nt, &mxb));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_EQ, nr, mxb, &isx));
  TRY(tpuc_hlo_iota(fn, &nti, 1, &cols));
  TRY(fconst(fn, TPUC_DTYPE_S32, (double)m, &nti, &big));
  TRY(tpuc_hlo_select(fn, isx, cols, big, &cand));
  TRY(freduce(fn, c->module, cand, TPUC_DTYPE_S32, TPUC_HLO_MIN, (double)m, 1,
              &idx));
  V idxb, ohm, o1, o0;
  TRY(fbcast(fn, idx, 1, &nti, &idxb));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_EQ, cols, idxb, &ohm));
  tpuc_hlo_type nd = nt;
  nd.dtype = dt;
  TRY(fconst(fn, dt, 1, &nd, &o1));
  TRY(fconst(fn, dt, 0, &nd, &o0));
  TRY(tpuc_hlo_select(fn, ohm, o1, o0, &oh));
  TRY(tpuc_hlo_reshape(fn, oh, (int64_t[]){nb, m, 1}, 3, &ohc));
  TRY(bmm3(fn, r, ohc, &col)); /* nb, m, 1 */
  /* orthogonalize again and normalize */
  V proj, back, c2, nrm, nrmc, nrmb;
  TRY(bmm_h(fn, x, col, &proj)); /* nb, k, 1 */
  TRY(bmm3(fn, x, proj, &back));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_SUB, col, back, &col));
  TRY(abs2(fn, col, &c2));
  TRY(sum_rows(fn, c->module, c2, &nrm));
  TRY(tpuc_hlo_unary(fn, TPUC_HLO_SQRT, nrm, &nrm));
  if (rdt != dt) {
    TRY(tpuc_hlo_convert(fn, nrm, dt, &nrmc));
  } else {
    nrmc = nrm;
  }
  tpuc_hlo_type colt = tpuc_hlo_type_make(dt, (int64_t[]){nb, m, 1}, 3);
  TRY(jb(fn, nrmc, &colt, &nrmb));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_DIV, col, nrmb, &col));
  /* only a zero column j takes it */
  V z, xj, xj2, xn, half, filled, fb, nj, j1, onei;
  TRY(fconst(fn, TPUC_DTYPE_S32, 0, NULL, &z));
  V st[3] = {z, z, j};
  TRY(tpuc_hlo_dynamic_slice(fn, x, st, colt.dims, &xj));
  TRY(abs2(fn, xj, &xj2));
  TRY(sum_rows(fn, c->module, xj2, &xn));
  tpuc_hlo_type bt = tpuc_hlo_type_make(rdt, (int64_t[]){nb, 1, 1}, 3);
  TRY(fconst(fn, rdt, 0.5, &bt, &half));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_GT, xn, half, &filled));
  TRY(jb(fn, filled, &colt, &fb));
  TRY(tpuc_hlo_select(fn, fb, xj, col, &nj));
  TRY(tpuc_hlo_dynamic_update_slice(fn, x, nj, st, &x));
  TRY(fconst(fn, TPUC_DTYPE_S32, 1, NULL, &onei));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_ADD, j, onei, &j1));
  V rets[2] = {j1, x};
  TRY(tpuc_hlo_return(fn, rets, 2));
  V ins[2], outs[2];
  TRY(op_const(c, TPUC_DTYPE_S32, 0, NULL, &ins[0]));
  ins[1] = q;
  TRY(tpuc_hlo_while(c->fn, ins, 2, cond, fn, outs));
  *out = outs[1];
  return NULL;
}

/* _linalg_svd(A, full_matrices, compute_uv, *, driver) -> (U, S, Vh):
 * one-sided Jacobi on A (or A^H when A is wide), so W = A or A^H is
 * M x N with M >= N; W V = [w_1 .. w_N] with orthogonal columns; S is
 * their norms (sorted descending), U_W their directions, completed to an
 * orthonormal basis where S is zero or full matrices are asked for. */
static tpuc_status* lower_svd(op_ctx* c, int param) {
  (void)param;
  if (!is_matrix_arg(c, 0, false)) return op_unimpl("svd: not matrices");
  bool full = false, uv = true;
  TRY(bool_arg(c, 1, false, &full));
  TRY(bool_arg(c, 2, true, &uv));
  if (!op_is_none(c, 3)) return op_unimpl("svd: a driver (CUDA only)");
  const tpuc_hlo_type t = c->types[0];
  int nbd = t.rank - 2;
  int64_t m = t.dims[nbd], n = t.dims[nbd + 1], k = m < n ? m : n, nb = 1;
  for (int d = 0; d < nbd; d++) nb *= t.dims[d];
  if (m > JACOBI_MAX_DIM || n > JACOBI_MAX_DIM)
    return op_unimpl("svd: large matrix");
  tpuc_dtype dt = t.dtype, rdt = real_part_dtype(dt);
  /* Single precision stays on the CPU: quantities such as cond() =
   * s_max / s_min carry LAPACK's own rounding error (eps * cond), and
   * the Jacobi values, though as accurate, differ from them by more than
   * float32's comparison tolerance at moderately ill-conditioned inputs. */
  if (rdt == TPUC_DTYPE_F32)
    return op_unimpl("svd: single precision (rounding differs from LAPACK)");
  int64_t dims[TPUC_MAX_RANK];
  memcpy(dims, t.dims, sizeof dims);
  dims[nbd] = k;
  tpuc_hlo_type st = tpuc_hlo_type_make(rdt, dims, nbd + 1);
  dims[nbd] = m;
  dims[nbd + 1] = full ? m : k;
  tpuc_hlo_type ut = tpuc_hlo_type_make(dt, dims, nbd + 2);
  dims[nbd] = full ? n : k;
  dims[nbd + 1] = n;
  tpuc_hlo_type vt = tpuc_hlo_type_make(dt, dims, nbd + 2);
  V u, s, vh;
  if (tpuc_hlo_type_num_elements(&t) == 0) {
    TRY(op_const(c, rdt, 0, &st, &s));
    if (uv) {
      TRY(identity(c, &ut, &u));
      TRY(identity(c, &vt, &vh));
    }
  } else {
    TRY(check_finite(c, c->vals[0]));
    bool wide = m < n;
    int64_t M = wide ? n : m, N = wide ? m : n;
    V w;
    TRY(tpuc_hlo_reshape(c->fn, c->vals[0], (int64_t[]){nb, m, n}, 3, &w));
    if (wide) TRY(mat_adjoint(c, w, 3, &w));
    tpuc_hlo_type wt = tpuc_hlo_type_make(dt, (int64_t[]){nb, M, N}, 3);
    V v;
    if (N > 1) {
      TRY(jacobi_run(c, w, true, &w, &v));
    } else {
      tpuc_hlo_type v1 = tpuc_hlo_type_make(dt, (int64_t[]){nb, 1, 1}, 3);
      TRY(op_const(c, dt, 1, &v1, &v));
    }
    /* singular values: the column norms */
    V w2, sig;
    TRY(abs2(c->fn, w, &w2));
    int64_t d1 = 1;
    V i0;
    TRY(op_const(c, rdt, 0, NULL, &i0));
    tpuc_hlo_fn* add;
    TRY(tpuc_hlo_region_binary(c->module, rdt, TPUC_HLO_ADD, &add));
    TRY(tpuc_hlo_reduce(c->fn, &w2, &i0, 1, &d1, 1, add, &sig));
    TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_SQRT, sig, &sig)); /* nb, N */
    V mats[2] = {w, v};
    TRY(sort_columns(c, sig, true, mats, uv ? 2 : 0, &sig));
    TRY(tpuc_hlo_reshape(c->fn, sig, st.dims, st.rank, &s));
    if (uv) {
      /* U_W = w_j / s_j, zero where s_j is zero */
      V sb, sbc, zs, isz, q, zq, one;
      int64_t map[2] = {0, 2};
      tpuc_hlo_type rt = tpuc_hlo_type_make(rdt, wt.dims, 3);
      TRY(tpuc_hlo_broadcast_in_dim(c->fn, sig, wt.dims, 3, map, &sb));
      TRY(op_const(c, rdt, 0, &rt, &zs));
      TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_EQ, sb, zs, &isz));
      TRY(op_const(c, rdt, 1, &rt, &one));
      TRY(tpuc_hlo_select(c->fn, isz, one, sb, &sb));
      sbc = sb;
      if (rdt != dt) TRY(tpuc_hlo_convert(c->fn, sb, dt, &sbc));
      TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_DIV, mats[0], sbc, &q));
      TRY(op_const(c, dt, 0, &wt, &zq));
      TRY(tpuc_hlo_select(c->fn, isz, zq, q, &q));
      /* full: pad with zero columns to M x M */
      if (full && M > N) {
        V zpad;
        TRY(op_const(c, dt, 0, NULL, &zpad));
        int64_t lo[3] = {0, 0, 0}, hi[3] = {0, 0, M - N}, in[3] = {0, 0, 0};
        TRY(tpuc_hlo_pad(c->fn, q, zpad, lo, hi, in, &q));
      }
      TRY(complete_basis(c, q, &q));
      V vh2;
      if (!wide) {
        TRY(tpuc_hlo_reshape(c->fn, q, ut.dims, ut.rank, &u));
        TRY(mat_adjoint(c, mats[1], 3, &vh2));
        TRY(tpuc_hlo_reshape(c->fn, vh2, vt.dims, vt.rank, &vh));
      } else {
        TRY(tpuc_hlo_reshape(c->fn, mats[1], ut.dims, ut.rank, &u));
        TRY(mat_adjoint(c, q, 3, &vh2));
        TRY(tpuc_hlo_reshape(c->fn, vh2, vt.dims, vt.rank, &vh));
      }
    }
  }
  if (!uv) {
    TRY(empty0(c, dt, &u));
    TRY(empty0(c, dt, &vh));
  }
  c->outs[0] = u;
  c->outs[1] = s;
  c->outs[2] = vh;
  c->nouts = 3;
  return NULL;
}

/* ---------------------------- Householder QR ---------------------------- */

/* QR as LAPACK's geqrf / orgqr (ungqr) / ormqr (unmqr) define it: column j
 * gets the reflector H_j = I - tau_j v_j v_j^H (v_j[j] = 1, zero above,
 * stored below the diagonal) of LAPACK's ?larfg: beta = -sign(re alpha)
 * |(alpha, x)|, tau = (beta - alpha) / beta (complex: ((beta - re) / beta,
 * -im / beta)), v = x / (alpha - beta); tau = 0 when x is zero and alpha
 * real. H_j^H is applied to the trailing columns (geqr2), and
 * Q = H_0 H_1 ... H_{k-1}. */

/* x (nb, m) in body fn with v_j's pattern: rows > j kept, row j one,
 * rows < j zero. */
static tpuc_status* reflector_vec(tpuc_hlo_fn* fn, V x, V j, V* out) {
  tpuc_hlo_type t;
  TRY(tpuc_hlo_value_type(fn, x, &t));
  tpuc_hlo_type it = t;
  it.dtype = TPUC_DTYPE_S32;
  V rows, jb2, below, at, one, zero, y;
  TRY(tpuc_hlo_iota(fn, &it, 1, &rows));
  TRY(fbcast(fn, j, 0, &it, &jb2));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_GT, rows, jb2, &below));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_EQ, rows, jb2, &at));
  TRY(fconst(fn, t.dtype, 1, &t, &one));
  TRY(fconst(fn, t.dtype, 0, &t, &zero));
  TRY(tpuc_hlo_select(fn, at, one, zero, &y));
  return tpuc_hlo_select(fn, below, x, y, out);
}

/* x - s v (v^H x) for x (nb, m, c), v (nb, m), s (nb): a reflector
 * applied from the left, in body fn. */
static tpuc_status* apply_reflector(tpuc_hlo_fn* fn, V x, V v, V s, V* out) {
  tpuc_hlo_type xt;
  TRY(tpuc_hlo_value_type(fn, x, &xt));
  int64_t nb = xt.dims[0], m = xt.dims[1];
  V v3, w, sw, upd;
  TRY(tpuc_hlo_reshape(fn, v, (int64_t[]){nb, m, 1}, 3, &v3));
  TRY(bmm_h(fn, v3, x, &w)); /* nb, 1, c */
  tpuc_hlo_type wt;
  TRY(tpuc_hlo_value_type(fn, w, &wt));
  V sb;
  TRY(tpuc_hlo_reshape(fn, s, (int64_t[]){nb, 1, 1}, 3, &sb));
  TRY(jb(fn, sb, &wt, &sb));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, sb, w, &sw));
  TRY(bmm3(fn, v3, sw, &upd)); /* nb, m, c */
  return tpuc_hlo_binary(fn, TPUC_HLO_SUB, x, upd, out);
}

/* geqrf of a (nb, m, n; m, n > 0): the factor (R on and above the
 * diagonal, the reflectors below) and tau (nb, k). */
static tpuc_status* geqrf_core(op_ctx* c, V a, V* a_out, V* tau_out) {
  tpuc_hlo_type at;
  TRY(tpuc_hlo_value_type(c->fn, a, &at));
  int64_t nb = at.dims[0], m = at.dims[1], n = at.dims[2];
  int64_t k = m < n ? m : n;
  tpuc_dtype dt = at.dtype, rdt = real_part_dtype(dt);
  tpuc_hlo_type tt = tpuc_hlo_type_make(dt, (int64_t[]){nb, k}, 2);
  tpuc_hlo_type types[3] = {tpuc_hlo_type_scalar(TPUC_DTYPE_S32), at, tt};
  tpuc_hlo_fn *cond, *fn;
  TRY(tpuc_hlo_region_create(c->module, types, 3, &cond));
  {
    V j, kk, lt;
    TRY(tpuc_hlo_get_arg(cond, 0, &j));
    TRY(fconst(cond, TPUC_DTYPE_S32, (double)k, NULL, &kk));
    TRY(tpuc_hlo_compare(cond, TPUC_HLO_LT, j, kk, &lt));
    TRY(tpuc_hlo_return(cond, &lt, 1));
  }
  TRY(tpuc_hlo_region_create(c->module, types, 3, &fn));
  V j, x, tau;
  TRY(tpuc_hlo_get_arg(fn, 0, &j));
  TRY(tpuc_hlo_get_arg(fn, 1, &x));
  TRY(tpuc_hlo_get_arg(fn, 2, &tau));
  V z;
  TRY(fconst(fn, TPUC_DTYPE_S32, 0, NULL, &z));
  tpuc_hlo_type ct = tpuc_hlo_type_make(dt, (int64_t[]){nb, m}, 2);
  tpuc_hlo_type cti = ct;
  cti.dtype = TPUC_DTYPE_S32;
  tpuc_hlo_type bt = tpuc_hlo_type_make(rdt, &nb, 1);
  V col, rows, jb2, below, zc, x2, x22, xn2, alpha;
  TRY(tpuc_hlo_dynamic_slice(fn, x, (V[]){z, z, j}, (int64_t[]){nb, m, 1},
                             &col));
  TRY(tpuc_hlo_reshape(fn, col, ct.dims, 2, &col));
  TRY(tpuc_hlo_iota(fn, &cti, 1, &rows));
  TRY(fbcast(fn, j, 0, &cti, &jb2));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_GT, rows, jb2, &below));
  TRY(fconst(fn, dt, 0, &ct, &zc));
  TRY(tpuc_hlo_select(fn, below, col, zc, &x2));
  TRY(abs2(fn, x2, &x22));
  TRY(freduce(fn, c->module, x22, rdt, TPUC_HLO_ADD, 0, 1, &xn2));
  TRY(tpuc_hlo_dynamic_slice(fn, x, (V[]){z, j, j}, (int64_t[]){nb, 1, 1},
                             &alpha));
  TRY(tpuc_hlo_reshape(fn, alpha, &nb, 1, &alpha));
  V ar = alpha, ai, zr, nrm, a2, i2, beta, nbeta, pos, trivial, xz, iz;
  TRY(fconst(fn, rdt, 0, &bt, &zr));
  ai = zr;
  if (rdt != dt) {
    TRY(tpuc_hlo_unary(fn, TPUC_HLO_REAL, alpha, &ar));
    TRY(tpuc_hlo_unary(fn, TPUC_HLO_IMAG, alpha, &ai));
  }
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, ar, ar, &a2));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, ai, ai, &i2));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_ADD, a2, i2, &nrm));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_ADD, nrm, xn2, &nrm));
  TRY(tpuc_hlo_unary(fn, TPUC_HLO_SQRT, nrm, &nrm));
  TRY(tpuc_hlo_unary(fn, TPUC_HLO_NEG, nrm, &nbeta));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_GE, ar, zr, &pos));
  TRY(tpuc_hlo_select(fn, pos, nbeta, nrm, &beta));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_EQ, xn2, zr, &xz));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_EQ, ai, zr, &iz));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_AND, xz, iz, &trivial));
  /* tau, the scale 1 / (alpha - beta) and the new diagonal */
  V one_r, bs, tr, ti, t, betac, amb, one_c, scale, zt, diag;
  TRY(fconst(fn, rdt, 1, &bt, &one_r));
  TRY(tpuc_hlo_select(fn, trivial, one_r, beta, &bs));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_SUB, bs, ar, &tr));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_DIV, tr, bs, &tr));
  if (rdt != dt) {
    TRY(tpuc_hlo_unary(fn, TPUC_HLO_NEG, ai, &ti));
    TRY(tpuc_hlo_binary(fn, TPUC_HLO_DIV, ti, bs, &ti));
    TRY(tpuc_hlo_binary(fn, TPUC_HLO_COMPLEX, tr, ti, &t));
    TRY(tpuc_hlo_convert(fn, beta, dt, &betac));
  } else {
    t = tr;
    betac = beta;
  }
  tpuc_hlo_type btc = bt;
  btc.dtype = dt;
  TRY(fconst(fn, dt, 0, &btc, &zt));
  TRY(tpuc_hlo_select(fn, trivial, zt, t, &t));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_SUB, alpha, betac, &amb));
  TRY(fconst(fn, dt, 1, &btc, &one_c));
  TRY(tpuc_hlo_select(fn, trivial, one_c, amb, &amb));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_DIV, one_c, amb, &scale));
  TRY(tpuc_hlo_select(fn, trivial, alpha, betac, &diag));
  /* v and the update of the trailing columns by H^H */
  V sb, v, tc, y, cols3, j3, right;
  TRY(fbcast(fn, scale, 1, &ct, &sb));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_MUL, x2, sb, &v));
  TRY(reflector_vec(fn, v, j, &v));
  TRY(conj_of(fn, t, &tc));
  TRY(apply_reflector(fn, x, v, tc, &y));
  tpuc_hlo_type it3 = at;
  it3.dtype = TPUC_DTYPE_S32;
  TRY(tpuc_hlo_iota(fn, &it3, 2, &cols3));
  TRY(fbcast(fn, j, 0, &it3, &j3));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_GT, cols3, j3, &right));
  TRY(tpuc_hlo_select(fn, right, y, x, &x));
  /* column j: the new diagonal and v below it */
  V db, ncol, isj;
  TRY(fbcast(fn, diag, 1, &ct, &db));
  TRY(tpuc_hlo_compare(fn, TPUC_HLO_EQ, rows, jb2, &isj));
  TRY(tpuc_hlo_select(fn, isj, db, col, &ncol));
  TRY(tpuc_hlo_select(fn, below, v, ncol, &ncol));
  TRY(tpuc_hlo_reshape(fn, ncol, (int64_t[]){nb, m, 1}, 3, &ncol));
  TRY(tpuc_hlo_dynamic_update_slice(fn, x, ncol, (V[]){z, z, j}, &x));
  V t2, onei, j1;
  TRY(tpuc_hlo_reshape(fn, t, (int64_t[]){nb, 1}, 2, &t2));
  TRY(tpuc_hlo_dynamic_update_slice(fn, tau, t2, (V[]){z, j}, &tau));
  TRY(fconst(fn, TPUC_DTYPE_S32, 1, NULL, &onei));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_ADD, j, onei, &j1));
  V rets[3] = {j1, x, tau};
  TRY(tpuc_hlo_return(fn, rets, 3));
  V ins[3], outs[3];
  TRY(op_const(c, TPUC_DTYPE_S32, 0, NULL, &ins[0]));
  ins[1] = a;
  TRY(op_const(c, dt, 0, &tt, &ins[2]));
  TRY(tpuc_hlo_while(c->fn, ins, 3, cond, fn, outs));
  *a_out = outs[1];
  *tau_out = outs[2];
  return NULL;
}

/* H_0 H_1 ... H_{k-1} x (conj: H_{k-1}^H ... H_0^H x) from reflectors
 * refl (nb, m, >= k) and tau (nb, k), x (nb, m, c). */
static tpuc_status* apply_q(op_ctx* c, V refl, V tau, V x, bool adjoint,
                            V* out) {
  tpuc_hlo_type rt, tt, xt;
  TRY(tpuc_hlo_value_type(c->fn, refl, &rt));
  TRY(tpuc_hlo_value_type(c->fn, tau, &tt));
  TRY(tpuc_hlo_value_type(c->fn, x, &xt));
  int64_t nb = rt.dims[0], m = rt.dims[1], k = tt.dims[1];
  if (k == 0 || tpuc_hlo_type_num_elements(&xt) == 0) {
    *out = x;
    return NULL;
  }
  tpuc_hlo_type types[4] = {tpuc_hlo_type_scalar(TPUC_DTYPE_S32), xt, rt, tt};
  tpuc_hlo_fn *cond, *fn;
  /* Q x applies H_{k-1} first (j from k-1 down); Q^H x applies H_0^H
   * first (j up from 0). */
  TRY(tpuc_hlo_region_create(c->module, types, 4, &cond));
  {
    V j, lim, ok;
    TRY(tpuc_hlo_get_arg(cond, 0, &j));
    if (adjoint) {
      TRY(fconst(cond, TPUC_DTYPE_S32, (double)k, NULL, &lim));
      TRY(tpuc_hlo_compare(cond, TPUC_HLO_LT, j, lim, &ok));
    } else {
      TRY(fconst(cond, TPUC_DTYPE_S32, 0, NULL, &lim));
      TRY(tpuc_hlo_compare(cond, TPUC_HLO_GE, j, lim, &ok));
    }
    TRY(tpuc_hlo_return(cond, &ok, 1));
  }
  TRY(tpuc_hlo_region_create(c->module, types, 4, &fn));
  V j, y, r, ta, z, v, s, step, jn;
  TRY(tpuc_hlo_get_arg(fn, 0, &j));
  TRY(tpuc_hlo_get_arg(fn, 1, &y));
  TRY(tpuc_hlo_get_arg(fn, 2, &r));
  TRY(tpuc_hlo_get_arg(fn, 3, &ta));
  TRY(fconst(fn, TPUC_DTYPE_S32, 0, NULL, &z));
  TRY(tpuc_hlo_dynamic_slice(fn, r, (V[]){z, z, j}, (int64_t[]){nb, m, 1}, &v));
  TRY(tpuc_hlo_reshape(fn, v, (int64_t[]){nb, m}, 2, &v));
  TRY(reflector_vec(fn, v, j, &v));
  TRY(tpuc_hlo_dynamic_slice(fn, ta, (V[]){z, j}, (int64_t[]){nb, 1}, &s));
  TRY(tpuc_hlo_reshape(fn, s, &nb, 1, &s));
  if (adjoint) TRY(conj_of(fn, s, &s));
  TRY(apply_reflector(fn, y, v, s, &y));
  TRY(fconst(fn, TPUC_DTYPE_S32, adjoint ? 1 : -1, NULL, &step));
  TRY(tpuc_hlo_binary(fn, TPUC_HLO_ADD, j, step, &jn));
  V rets[4] = {jn, y, r, ta};
  TRY(tpuc_hlo_return(fn, rets, 4));
  V ins[4], outs[4];
  TRY(op_const(c, TPUC_DTYPE_S32, adjoint ? 0 : (double)(k - 1), NULL,
               &ins[0]));
  ins[1] = x;
  ins[2] = refl;
  ins[3] = tau;
  TRY(tpuc_hlo_while(c->fn, ins, 4, cond, fn, outs));
  *out = outs[1];
  return NULL;
}

/* The first `cols` columns of the m x m identity, batched (nb). */
static tpuc_status* eye_cols(op_ctx* c, tpuc_dtype dt, int64_t nb, int64_t m,
                             int64_t cols, V* out) {
  tpuc_hlo_type t = tpuc_hlo_type_make(dt, (int64_t[]){nb, m, cols}, 3);
  return identity(c, &t, out);
}

/* Batch size of type t without its last `inner` dims. */
static int64_t batch_count(const tpuc_hlo_type* t, int inner) {
  int64_t nb = 1;
  for (int d = 0; d < t->rank - inner; d++) nb *= t->dims[d];
  return nb;
}

/* geqrf(A) -> (a, tau). */
static tpuc_status* lower_geqrf(op_ctx* c, int param) {
  (void)param;
  if (!is_matrix_arg(c, 0, false)) return op_unimpl("geqrf: not matrices");
  const tpuc_hlo_type t = c->types[0];
  int nbd = t.rank - 2;
  int64_t m = t.dims[nbd], n = t.dims[nbd + 1], k = m < n ? m : n;
  int64_t nb = batch_count(&t, 2);
  int64_t dims[TPUC_MAX_RANK];
  memcpy(dims, t.dims, sizeof dims);
  dims[nbd] = k;
  tpuc_hlo_type taut = tpuc_hlo_type_make(t.dtype, dims, nbd + 1);
  if (tpuc_hlo_type_num_elements(&t) == 0) {
    c->outs[0] = c->vals[0];
    TRY(op_const(c, t.dtype, 0, &taut, &c->outs[1]));
  } else {
    V a, f, tau;
    TRY(check_finite(c, c->vals[0]));
    TRY(tpuc_hlo_reshape(c->fn, c->vals[0], (int64_t[]){nb, m, n}, 3, &a));
    TRY(geqrf_core(c, a, &f, &tau));
    TRY(tpuc_hlo_reshape(c->fn, f, t.dims, t.rank, &c->outs[0]));
    TRY(tpuc_hlo_reshape(c->fn, tau, taut.dims, taut.rank, &c->outs[1]));
  }
  c->nouts = 2;
  return NULL;
}

/* linalg_qr(A, mode) -> (Q, R): mode "reduced" (Q m x k, R k x n),
 * "complete" (Q m x m, R m x n) or "r" (Q empty, R k x n). */
static tpuc_status* lower_qr(op_ctx* c, int param) {
  (void)param;
  if (!is_matrix_arg(c, 0, false)) return op_unimpl("qr: not matrices");
  const char* mode = op_str_arg(c, 1, "reduced");
  bool complete = strcmp(mode, "complete") == 0;
  bool ronly = strcmp(mode, "r") == 0;
  if (!complete && !ronly && strcmp(mode, "reduced") != 0)
    return op_unimpl("qr: unknown mode: the CPU raises");
  const tpuc_hlo_type t = c->types[0];
  tpuc_dtype dt = t.dtype;
  int nbd = t.rank - 2;
  int64_t m = t.dims[nbd], n = t.dims[nbd + 1], k = m < n ? m : n;
  int64_t nb = batch_count(&t, 2);
  int64_t qc = complete ? m : k, rr = complete ? m : k;
  int64_t dims[TPUC_MAX_RANK];
  memcpy(dims, t.dims, sizeof dims);
  dims[nbd + 1] = qc;
  tpuc_hlo_type qt = tpuc_hlo_type_make(dt, dims, nbd + 2);
  dims[nbd] = rr;
  dims[nbd + 1] = n;
  tpuc_hlo_type rt = tpuc_hlo_type_make(dt, dims, nbd + 2);
  V q = -1, r;
  if (tpuc_hlo_type_num_elements(&t) == 0) {
    TRY(op_const(c, dt, 0, &rt, &r));
    if (!ronly) TRY(identity(c, &qt, &q));
  } else {
    V a, f, tau;
    TRY(check_finite(c, c->vals[0]));
    TRY(tpuc_hlo_reshape(c->fn, c->vals[0], (int64_t[]){nb, m, n}, 3, &a));
    TRY(geqrf_core(c, a, &f, &tau));
    /* R: the upper triangle of the first rr rows */
    V fr;
    tpuc_hlo_type frt = tpuc_hlo_type_make(dt, (int64_t[]){nb, rr, n}, 3);
    TRY(tpuc_hlo_slice(c->fn, f, (int64_t[]){0, 0, 0}, frt.dims, NULL, &fr));
    TRY(keep_triangle(c, fr, &frt, false, &fr));
    TRY(tpuc_hlo_reshape(c->fn, fr, rt.dims, rt.rank, &r));
    if (!ronly) {
      V e;
      TRY(eye_cols(c, dt, nb, m, qc, &e));
      TRY(apply_q(c, f, tau, e, false, &q));
      TRY(tpuc_hlo_reshape(c->fn, q, qt.dims, qt.rank, &q));
    }
  }
  if (ronly) TRY(empty0(c, dt, &q));
  c->outs[0] = q;
  c->outs[1] = r;
  c->nouts = 2;
  return NULL;
}

/* linalg_householder_product(A (m x n), tau (k)): the first n columns of
 * H_0 ... H_{k-1}; batch dims must match (else the CPU decides). */
static tpuc_status* lower_householder_product(op_ctx* c, int param) {
  (void)param;
  if (!is_matrix_arg(c, 0, false) || !op_is_tensor(c, 1))
    return op_unimpl("householder_product: not matrices");
  const tpuc_hlo_type t = c->types[0];
  const tpuc_hlo_type tt = c->types[1];
  int nbd = t.rank - 2;
  int64_t m = t.dims[nbd], n = t.dims[nbd + 1];
  if (tt.dtype != t.dtype || tt.rank != t.rank - 1 || m < n || tt.dims[nbd] > n)
    return op_unimpl("householder_product: shapes: the CPU decides");
  for (int d = 0; d < nbd; d++)
    if (tt.dims[d] != t.dims[d])
      return op_unimpl("householder_product: batch dims");
  int64_t nb = batch_count(&t, 2), k = tt.dims[nbd];
  V out;
  if (tpuc_hlo_type_num_elements(&t) == 0) {
    TRY(identity(c, &t, &out));
  } else {
    V a, tau, e;
    TRY(tpuc_hlo_reshape(c->fn, c->vals[0], (int64_t[]){nb, m, n}, 3, &a));
    TRY(tpuc_hlo_reshape(c->fn, c->vals[1], (int64_t[]){nb, k}, 2, &tau));
    TRY(eye_cols(c, t.dtype, nb, m, n, &e));
    TRY(apply_q(c, a, tau, e, false, &out));
    TRY(tpuc_hlo_reshape(c->fn, out, t.dims, t.rank, &out));
  }
  c->outs[0] = out;
  c->nouts = 1;
  return NULL;
}

/* ormqr(A (mn x n), tau (k), C, left, transpose): op(Q) C (left) or
 * C op(Q), Q = H_0 ... H_{k-1} (mn x mn), op(Q) = Q^H when transpose;
 * batch dims must match. C op(Q) = (op(Q)^H C^H)^H. */
static tpuc_status* lower_ormqr(op_ctx* c, int param) {
  (void)param;
  bool left = true, trans = false;
  TRY(bool_arg(c, 3, true, &left));
  TRY(bool_arg(c, 4, false, &trans));
  if (!is_matrix_arg(c, 0, false) || !op_is_tensor(c, 1) ||
      !is_matrix_arg(c, 2, false))
    return op_unimpl("ormqr: not matrices");
  const tpuc_hlo_type t = c->types[0];
  const tpuc_hlo_type tt = c->types[1];
  const tpuc_hlo_type ct = c->types[2];
  int nbd = t.rank - 2;
  int64_t mn = t.dims[nbd], n = t.dims[nbd + 1];
  if (tt.dtype != t.dtype || ct.dtype != t.dtype || tt.rank != t.rank - 1 ||
      ct.rank != t.rank || tt.dims[nbd] > n || tt.dims[nbd] > mn ||
      ct.dims[left ? nbd : nbd + 1] != mn)
    return op_unimpl("ormqr: shapes: the CPU decides");
  for (int d = 0; d < nbd; d++)
    if (tt.dims[d] != t.dims[d] || ct.dims[d] != t.dims[d])
      return op_unimpl("ormqr: batch dims");
  int64_t nb = batch_count(&t, 2), k = tt.dims[nbd];
  int64_t cr = ct.dims[nbd], cc = ct.dims[nbd + 1];
  V out;
  if (tpuc_hlo_type_num_elements(&ct) == 0 || k == 0) {
    out = c->vals[2];
  } else {
    V a, tau, x;
    TRY(tpuc_hlo_reshape(c->fn, c->vals[0], (int64_t[]){nb, mn, n}, 3, &a));
    TRY(tpuc_hlo_reshape(c->fn, c->vals[1], (int64_t[]){nb, k}, 2, &tau));
    TRY(tpuc_hlo_reshape(c->fn, c->vals[2], (int64_t[]){nb, cr, cc}, 3, &x));
    if (left) {
      TRY(apply_q(c, a, tau, x, trans, &out));
    } else {
      TRY(mat_adjoint(c, x, 3, &x));
      TRY(apply_q(c, a, tau, x, !trans, &out));
      TRY(mat_adjoint(c, out, 3, &out));
    }
    TRY(tpuc_hlo_reshape(c->fn, out, ct.dims, ct.rank, &out));
  }
  c->outs[0] = out;
  c->nouts = 1;
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
    {"aten::_linalg_eigh", lower_eigh, 0},
    {"aten::_linalg_eigh.eigenvalues", lower_eigh, 0},
    {"aten::_linalg_svd", lower_svd, 0},
    {"aten::_linalg_svd.U", lower_svd, 0},
    {"aten::geqrf", lower_geqrf, 0},
    {"aten::geqrf.a", lower_geqrf, 0},
    {"aten::linalg_qr", lower_qr, 0},
    {"aten::linalg_qr.out", lower_qr, 0},
    {"aten::linalg_householder_product", lower_householder_product, 0},
    {"aten::linalg_householder_product.out", lower_householder_product, 0},
    {"aten::ormqr", lower_ormqr, 0},
    {"aten::ormqr.out", lower_ormqr, 0},
    {NULL, NULL, 0},
};

/* Complex-ready ops of this file (ops_internal.h). */
const char* const op_complex_linalg[] = {"linalg_cholesky_ex",
                                         "cholesky",
                                         "linalg_solve_triangular",
                                         "triangular_solve",
                                         "cholesky_solve",
                                         "_cholesky_solve_helper",
                                         "cholesky_inverse",
                                         "linalg_lu_factor_ex",
                                         "linalg_lu",
                                         "linalg_lu_solve",
                                         "_linalg_det",
                                         "_linalg_slogdet",
                                         "linalg_inv_ex",
                                         "_linalg_solve_ex",
                                         "lu_unpack",
                                         "_linalg_eigh",
                                         "_linalg_svd",
                                         "geqrf",
                                         "linalg_qr",
                                         "linalg_householder_product",
                                         "ormqr",
                                         NULL};
