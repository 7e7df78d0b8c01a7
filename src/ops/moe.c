/* The ops of mixture-of-experts layers: grouped matrix products
 * (_grouped_mm, which transformers' default "grouped_mm" experts call) and
 * histograms (histc, with which they count the tokens of each expert, on
 * integer expert ids as CUDA takes them).
 *
 * _grouped_mm's groups are data: `offs` (int32, cumulative ends) says
 * where each group's rows (or columns, or contraction slice) end, and the
 * program is the same for any split. XLA's compilers for CPUs and GPUs have
 * no ragged dot, so it is lowered in one of two ways, whichever multiplies
 * fewer rows: densely (every group's product over all rows, masked to each
 * row's own group: G times the ragged product's work, fine for few groups
 * or rows), or tiled (the ragged dimension cut into tiles of 64 and at the
 * group ends; each piece is one tile times one group's matrix, masked and
 * added back: (M/64 + G) tiles of work). Rows past offs[G-1] come out zero
 * (the CPU and CUDA leave them unwritten). */
#include <math.h>
#include <string.h>

#include "ops/emit.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

static V m_const(em* e, tpuc_dtype dt, double v, const tpuc_hlo_type* shape) {
  V r = -1;
  if (e->st == NULL) em_keep(e, op_const(e->c, dt, v, shape, &r));
  return r;
}

static V m_bcast(em* e, V x, const int64_t* dims, int rank,
                 const int64_t* map) {
  V r = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_broadcast_in_dim(e->fn, x, dims, rank, map, &r));
  return r;
}

/* x reduced with `op` over `dim`, from the rank-0 `init`. */
static V m_reduce(em* e, V x, int64_t dim, tpuc_hlo_binary_op op, V init) {
  tpuc_dtype dt = e_type(e, x).dtype;
  tpuc_hlo_fn* body = NULL;
  V r = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_region_binary(e->c->module, dt, op, &body));
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_reduce(e->fn, &x, &init, 1, &dim, 1, body, &r));
  return r;
}

static V m_sum(em* e, V x, int64_t dim) {
  return m_reduce(e, x, dim, TPUC_HLO_ADD,
                  m_const(e, e_type(e, x).dtype, 0, NULL));
}

/* ------------------------------ _grouped_mm ------------------------------ */

/* Per group g of `offs` (s32[G]) and position p in [0, n): true when p lies
 * in [offs[g-1], offs[g]) (offs[-1] = 0), as a pred [G, n]. */
static V group_mask(em* e, V offs, int64_t groups, int64_t n) {
  int64_t gn[2] = {groups, n}, g1 = groups - 1, zero = 0;
  V ends = offs, starts;
  V z = m_const(e, TPUC_DTYPE_S32, 0, &(tpuc_hlo_type){TPUC_DTYPE_S32, 1, {1}});
  if (groups > 1) {
    V head = -1, parts[2];
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_slice(e->fn, offs, &zero, &g1, NULL, &head));
    parts[0] = z;
    parts[1] = head;
    starts = -1;
    if (e->st == NULL)
      em_keep(e, tpuc_hlo_concatenate(e->fn, parts, 2, 0, &starts));
  } else {
    starts = z;
  }
  V pos = -1;
  tpuc_hlo_type pt = tpuc_hlo_type_make(TPUC_DTYPE_S32, gn, 2);
  if (e->st == NULL) em_keep(e, tpuc_hlo_iota(e->fn, &pt, 1, &pos));
  V s = m_bcast(e, starts, gn, 2, &zero), t = m_bcast(e, ends, gn, 2, &zero);
  return AND(GE(pos, s), LT(pos, t));
}

/* Rows per tile of the tiled lowering. */
#define GROUPED_TILE 64

/* The tiled lowering of a ragged dimension of length `len` split by `offs`
 * (s32[G]): the dimension cut at every multiple of `tile` and at every
 * group end gives P = nb + G segments (some empty), each inside one tile
 * and one group. Per segment p: its tile (s64[P, 1]) and a mask over the
 * tile's positions, pred[P, tile], true where the position is in the
 * segment and in a group (positions past offs[G-1] are in none); its group
 * (s64[P], clamped to [0, G) for gathers). */
static void segments(em* e, V offs, int64_t groups, int64_t len,
                     int64_t tile, int64_t nb, V* tile_idx, V* mask,
                     V* group) {
  int64_t p = nb + groups, zero = 0, one = 1, pg[2] = {p, groups};
  int64_t pt[2] = {p, tile};
  tpuc_hlo_type nbt = tpuc_hlo_type_make(TPUC_DTYPE_S64, &nb, 1);
  tpuc_hlo_type gt = tpuc_hlo_type_make(TPUC_DTYPE_S64, &groups, 1);
  V ends = e_cvt(e, offs, TPUC_DTYPE_S64);
  ends = e_bin(e, TPUC_HLO_MAX, ends, m_const(e, TPUC_DTYPE_S64, 0, &gt));
  ends = e_bin(e, TPUC_HLO_MIN, ends, m_const(e, TPUC_DTYPE_S64, (double)len, &gt));
  V starts = -1, cuts[2], bp = -1, sorted = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_iota(e->fn, &nbt, 0, &starts));
  cuts[0] = MUL(starts, m_const(e, TPUC_DTYPE_S64, (double)tile, &nbt));
  cuts[1] = ends;
  if (e->st == NULL) em_keep(e, tpuc_hlo_concatenate(e->fn, cuts, 2, 0, &bp));
  tpuc_dtype kd = TPUC_DTYPE_S64;
  tpuc_hlo_fn* less = NULL;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_region_compare(e->c->module, &kd, 1, TPUC_HLO_LT, &less));
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_sort(e->fn, &bp, 1, 0, false, less, &sorted));
  /* segment p is [sorted[p], sorted[p + 1]), the last ends at len */
  V next = -1, tail[2], seg_end = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_slice(e->fn, sorted, &one, &p, NULL, &next));
  tail[0] = next;
  tail[1] = m_const(e, TPUC_DTYPE_S64, (double)len,
                    &(tpuc_hlo_type){TPUC_DTYPE_S64, 1, {1}});
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_concatenate(e->fn, tail, 2, 0, &seg_end));
  tpuc_hlo_type ptt = tpuc_hlo_type_make(TPUC_DTYPE_S64, &p, 1);
  V t = DIV(sorted, m_const(e, TPUC_DTYPE_S64, (double)tile, &ptt));
  t = e_bin(e, TPUC_HLO_MIN, t, m_const(e, TPUC_DTYPE_S64, (double)(nb - 1), &ptt));
  int64_t col[2] = {p, 1};
  *tile_idx = e_reshape(e, t, col, 2);
  /* group of the segment: the number of group ends at or before its start */
  V sb = m_bcast(e, sorted, pg, 2, &zero), eb = m_bcast(e, ends, pg, 2, &one);
  V g = m_sum(e, e_cvt(e, LE(eb, sb), TPUC_DTYPE_S64), 1);
  V in_group = LT(g, m_const(e, TPUC_DTYPE_S64, (double)groups, &ptt));
  *group = e_bin(e, TPUC_HLO_MIN, g,
                 m_const(e, TPUC_DTYPE_S64, (double)(groups - 1), &ptt));
  tpuc_hlo_type ptt2 = tpuc_hlo_type_make(TPUC_DTYPE_S64, pt, 2);
  V pos = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_iota(e->fn, &ptt2, 1, &pos));
  pos = ADD(pos, MUL(m_bcast(e, t, pt, 2, &zero),
                     m_const(e, TPUC_DTYPE_S64, (double)tile, &ptt2)));
  *mask = AND(AND(GE(pos, m_bcast(e, sorted, pt, 2, &zero)),
                  LT(pos, m_bcast(e, seg_end, pt, 2, &zero))),
              m_bcast(e, in_group, pt, 2, &zero));
}

/* x zero-padded along `dim` to `to` entries. */
static V pad_to(em* e, V x, int dim, int64_t to) {
  tpuc_hlo_type t = e_type(e, x);
  if (e->st != NULL || t.dims[dim] == to) return x;
  int64_t lo[TPUC_MAX_RANK] = {0}, hi[TPUC_MAX_RANK] = {0};
  hi[dim] = to - t.dims[dim];
  V z = m_const(e, t.dtype, 0, NULL), r = -1;
  em_keep(e, tpuc_hlo_pad(e->fn, x, z, lo, hi, NULL, &r));
  return r;
}

static V take(em* e, V x, V idx) {
  tpuc_hlo_type t = e_type(e, x);
  V r = -1;
  if (e->st == NULL) em_keep(e, op_take_along(e->fn, x, &t, 0, idx, &r));
  return r;
}

/* Adds the [P, ...] updates into `into` at the first-dimension indices
 * idx (s64[P, 1]). */
static V scatter_add(em* e, V into, V idx, V upd) {
  tpuc_dtype dt = e_type(e, into).dtype;
  tpuc_hlo_fn* add = NULL;
  V r = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_region_binary(e->c->module, dt, TPUC_HLO_ADD, &add));
  if (e->st == NULL)
    em_keep(e, op_scatter_first(e->fn, into, idx, upd, add, false, &r));
  return r;
}

/* Tiled 2-D x 3-D: [M, K] x [G, K, N] with M split by offs. Each segment's
 * tile of rows times its group's matrix, masked to the segment's rows,
 * added into its tile of the result: (M/T + G) * T rows of products where
 * the dense lowering does G * M. */
static V grouped_rows_tiled(em* e, V x, V w, V offs, int64_t m, int64_t k,
                            int64_t groups, int64_t n, tpuc_dtype acc,
                            tpuc_hlo_precision prec) {
  int64_t tile = GROUPED_TILE, nb = (m + tile - 1) / tile, p = nb + groups;
  V tidx, mask, grp;
  segments(e, offs, groups, m, tile, nb, &tidx, &mask, &grp);
  int64_t xt3[3] = {nb, tile, k}, col[2] = {p, 1};
  V xb = take(e, e_reshape(e, pad_to(e, x, 0, nb * tile), xt3, 3), tidx);
  V wg = take(e, w, e_reshape(e, grp, col, 2)); /* [P, K, N] */
  int64_t batch = 0, lc = 2, rc = 1;
  tpuc_hlo_dot_dims dd = {&batch, &batch, 1, &lc, &rc, 1, acc, prec};
  V y = -1; /* [P, T, N] */
  if (e->st == NULL) em_keep(e, tpuc_hlo_dot_general(e->fn, xb, wg, &dd, &y));
  int64_t yd[3] = {p, tile, n}, mmap[2] = {0, 1};
  tpuc_hlo_type yt = tpuc_hlo_type_make(acc, yd, 3);
  y = SEL(m_bcast(e, mask, yd, 3, mmap), y, m_const(e, acc, 0, &yt));
  int64_t od[3] = {nb, tile, n};
  tpuc_hlo_type ot = tpuc_hlo_type_make(acc, od, 3);
  V out = scatter_add(e, m_const(e, acc, 0, &ot), tidx, y);
  int64_t flat[2] = {nb * tile, n}, z2[2] = {0, 0}, lim[2] = {m, n};
  out = e_reshape(e, out, flat, 2);
  V r = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_slice(e->fn, out, z2, lim, NULL, &r));
  return r;
}

/* Tiled 2-D x 2-D: [M, K] x [K, N] with K split by offs: each segment's
 * tile of the contraction, masked, gives a partial [M, N] added into its
 * group's result (a segment past the last group is all masked: it adds
 * zeros). */
static V grouped_contraction_tiled(em* e, V x, V w, V offs, int64_t m,
                                   int64_t k, int64_t groups, int64_t n,
                                   tpuc_dtype dt, tpuc_dtype acc,
                                   tpuc_hlo_precision prec) {
  int64_t tile = GROUPED_TILE, nb = (k + tile - 1) / tile, p = nb + groups;
  V tidx, mask, grp;
  segments(e, offs, groups, k, tile, nb, &tidx, &mask, &grp);
  int64_t a3[3] = {m, nb, tile}, perm[3] = {1, 0, 2}, b3[3] = {nb, tile, n};
  V xa = e_reshape(e, pad_to(e, x, 1, nb * tile), a3, 3), xt = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_transpose(e->fn, xa, perm, &xt));
  V xb = take(e, xt, tidx);                                   /* [P, M, T] */
  V wb = take(e, e_reshape(e, pad_to(e, w, 0, nb * tile), b3, 3), tidx);
  int64_t xd[3] = {p, m, tile}, mmap[2] = {0, 2};
  tpuc_hlo_type xz = tpuc_hlo_type_make(dt, xd, 3);
  xb = SEL(m_bcast(e, mask, xd, 3, mmap), xb, m_const(e, dt, 0, &xz));
  int64_t batch = 0, lc = 2, rc = 1;
  tpuc_hlo_dot_dims dd = {&batch, &batch, 1, &lc, &rc, 1, acc, prec};
  V y = -1; /* [P, M, N] */
  if (e->st == NULL) em_keep(e, tpuc_hlo_dot_general(e->fn, xb, wb, &dd, &y));
  int64_t od[3] = {groups, m, n}, col[2] = {p, 1};
  tpuc_hlo_type ot = tpuc_hlo_type_make(acc, od, 3);
  /* Masked-out segments add zeros to their (clamped) group. */
  return scatter_add(e, m_const(e, acc, 0, &ot), e_reshape(e, grp, col, 2), y);
}

/* The dense lowering of a 3-D operand against a split 2-D one: y = x . w
 * (contracting x's lc with w's rc; y of shape ydims, the group dimension
 * ydims[gdim]), each position kept where the mask of its group holds
 * (the [G, len] mask broadcast to y by `map`), summed over the groups. */
static V dense_keep(em* e, V x, V w, int64_t lc, int64_t rc, V offs,
                    const int64_t* ydims, const int64_t* map, int64_t gdim,
                    tpuc_dtype acc, tpuc_hlo_precision prec) {
  tpuc_hlo_dot_dims dd = {NULL, NULL, 0, &lc, &rc, 1, acc, prec};
  V y = -1;
  if (e->st == NULL) em_keep(e, tpuc_hlo_dot_general(e->fn, x, w, &dd, &y));
  V mask = group_mask(e, offs, ydims[gdim], ydims[map[1]]);
  V mk = m_bcast(e, mask, ydims, 3, map);
  tpuc_hlo_type yt = tpuc_hlo_type_make(acc, ydims, 3);
  return m_sum(e, SEL(mk, y, m_const(e, acc, 0, &yt)), gdim);
}

/* PyTorch's C++ name of a dtype in "expected m1 and m2 ..." messages. */
static const char* cpp_dtype_name(tpuc_dtype d) {
  switch (d) {
    case TPUC_DTYPE_F32: return "float";
    case TPUC_DTYPE_F64: return "double";
    case TPUC_DTYPE_F16: return "c10::Half";
    case TPUC_DTYPE_BF16: return "c10::BFloat16";
    default: return op_torch_dtype_name(d);
  }
}

static bool grouped_dtype_ok(tpuc_dtype d) {
  return d == TPUC_DTYPE_F32 || d == TPUC_DTYPE_F16 || d == TPUC_DTYPE_BF16;
}

#define BAD(...) tpuc_status_make(TPUC_INVALID_ARGUMENT, __VA_ARGS__)

/* _grouped_mm(self, mat2, offs=None, bias=None, out_dtype=None):
 *   2-D x 3-D: offs splits self's rows, group g times mat2[g];
 *   3-D x 2-D: offs splits mat2's columns, self[g] times them;
 *   2-D x 2-D: offs splits the contraction: out[g] = a[:, Kg] @ b[Kg, :];
 *   3-D x 3-D: bmm (no offs).
 * Checks and messages in the CPU kernel's order. */
static tpuc_status* lower_grouped_mm(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0) || !op_is_tensor(c, 1))
    return op_unimpl("unexpected arguments");
  const tpuc_hlo_type a = c->types[0], b = c->types[1];
  if (!grouped_dtype_ok(a.dtype))
    return BAD("Expected mat_a to be Float32, BFloat16 or Float16 matrix, "
               "got %s", op_torch_dtype_name(a.dtype));
  if (!grouped_dtype_ok(b.dtype))
    return BAD("Expected mat_b to be Float32, BFloat16 or Float16 matrix, "
               "got %s", op_torch_dtype_name(b.dtype));
  if (a.rank != 2 && a.rank != 3) return BAD("mat_a has to be 2 or 3d");
  if (b.rank != 2 && b.rank != 3) return BAD("mat_b has to be 2 or 3d");
  bool a2 = a.rank == 2, b2 = b.rank == 2;
  if ((!a2 || !b2) && a.dims[a.rank - 1] != b.dims[b.rank - 2])
    return BAD("contraction dimension of mat_a and mat_b must match");
  bool has_offs = op_is_tensor(c, 2);
  if (!has_offs && !op_is_none(c, 2)) return op_unimpl("unexpected offs");
  if (has_offs != (a2 || b2))
    return BAD("Have to provide offsets if there is a 2d matrix, or no "
               "offset if both matrices are 3d");
  if (has_offs) {
    if (c->types[2].rank != 1) return BAD("offs has to be 1D");
    if (c->types[2].dtype != TPUC_DTYPE_S32)
      return BAD("Offsets have to be int32");
  }
  if (!op_is_none(c, 3)) return BAD("Bias not supported yet");
  if (c->nargs > 4 && c->args[4].kind == TPUC_OP_ARG_DTYPE &&
      c->args[4].dtype != a.dtype)
    return BAD("Grouped gemm output dtype must match `mat_a` dtype");
  int64_t groups = has_offs ? c->types[2].dims[0] : 0;
  if (a2 != b2 && groups != (a2 ? b.dims[0] : a.dims[0]))
    return BAD("matrix batch sizes have to match");
  if (!a2 && !b2 && a.dims[0] != b.dims[0])
    return BAD("batched dimension has to match");
  if (a.dtype != b.dtype)
    return BAD("expected m1 and m2 to have the same dtype, but got: %s != %s",
               cpp_dtype_name(a.dtype), cpp_dtype_name(b.dtype));

  tpuc_dtype dt = a.dtype, acc = op_accumulation_dtype(dt);
  tpuc_hlo_precision prec = dt == TPUC_DTYPE_F32
                                ? c->opts->matmul_precision
                                : TPUC_HLO_PRECISION_DEFAULT;
  em ee = em_of(c), *e = &ee;
  V x = c->vals[0], w = c->vals[1], r = -1;
  if (!a2 && !b2) {
    int64_t batch = 0, lc = 2, rc = 1;
    tpuc_hlo_dot_dims dd = {&batch, &batch, 1, &lc, &rc, 1, acc, prec};
    if (e->st == NULL) em_keep(e, tpuc_hlo_dot_general(e->fn, x, w, &dd, &r));
  } else if (a2 && !b2 &&
             (a.dims[0] / GROUPED_TILE + 1 + groups) * GROUPED_TILE <
                 groups * a.dims[0]) {
    r = grouped_rows_tiled(e, x, w, c->vals[2], a.dims[0], a.dims[1], groups,
                           b.dims[2], acc, prec);
  } else if (a2 && !b2) {
    /* [M, K] x [G, K, N]: y[M, G, N], keep each row's own group. */
    int64_t ydims[3] = {a.dims[0], groups, b.dims[2]}, map[2] = {1, 0};
    r = dense_keep(e, x, w, 1, 1, c->vals[2], ydims, map, 1, acc, prec);
  } else if (!a2 && b2) {
    /* [G, M, K] x [K, N]: y[G, M, N], keep each column's own group. */
    int64_t ydims[3] = {groups, a.dims[1], b.dims[1]}, map[2] = {0, 2};
    r = dense_keep(e, x, w, 2, 0, c->vals[2], ydims, map, 0, acc, prec);
  } else {
    /* [M, K1] x [K2, N]: offs splits the contraction; a part of one
     * operand past the other's length is never in a group the CPU can
     * compute, so both are cut to the shorter. */
    int64_t m = a.dims[0], n = b.dims[1];
    int64_t k = a.dims[1] < b.dims[0] ? a.dims[1] : b.dims[0];
    int64_t zero2[2] = {0, 0}, alim[2] = {m, k}, blim[2] = {k, n};
    if (k != a.dims[1] && e->st == NULL)
      em_keep(e, tpuc_hlo_slice(e->fn, x, zero2, alim, NULL, &x));
    if (k != b.dims[0] && e->st == NULL)
      em_keep(e, tpuc_hlo_slice(e->fn, w, zero2, blim, NULL, &w));
    if ((k / GROUPED_TILE + 1 + groups) * GROUPED_TILE < groups * k) {
      r = grouped_contraction_tiled(e, x, w, c->vals[2], m, k, groups, n, dt,
                                    acc, prec);
      c->outs[0] = e_cvt(e, r, dt);
      c->nouts = 1;
      return e->st;
    }
    V mask = group_mask(e, c->vals[2], groups, k); /* [G, K] */
    int64_t xdims[3] = {groups, m, k}, mmap[2] = {0, 2}, xmap[2] = {1, 2};
    V mk = m_bcast(e, mask, xdims, 3, mmap);
    V xb = m_bcast(e, x, xdims, 3, xmap);
    tpuc_hlo_type xt = tpuc_hlo_type_make(dt, xdims, 3);
    V xm = SEL(mk, xb, m_const(e, dt, 0, &xt));
    int64_t lc = 2, rc = 0;
    tpuc_hlo_dot_dims dd = {NULL, NULL, 0, &lc, &rc, 1, acc, prec};
    if (e->st == NULL) em_keep(e, tpuc_hlo_dot_general(e->fn, xm, w, &dd, &r));
  }
  c->outs[0] = e_cvt(e, r, dt);
  c->nouts = 1;
  return e->st;
}

/* --------------------------------- histc --------------------------------- */

/* x's neighbour toward -inf (down) or +inf, in x's float dtype. */
static V next_float(em* e, V x, bool down) {
  tpuc_hlo_type t = e_type(e, x);
  tpuc_dtype it = tpuc_dtype_size(t.dtype) == 8   ? TPUC_DTYPE_S64
                  : tpuc_dtype_size(t.dtype) == 4 ? TPUC_DTYPE_S32
                                                  : TPUC_DTYPE_S16;
  V bits = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_bitcast_convert(e->fn, x, it, &bits));
  /* Away from zero when moving in x's sign direction, else toward it. */
  V neg = LT(bits, m_const(e, it, 0, NULL));
  V away = down ? neg : NOT(neg);
  V one = m_const(e, it, 1, NULL);
  V moved = SEL(away, ADD(bits, one), SUB(bits, one));
  V r = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_bitcast_convert(e->fn, moved, t.dtype, &r));
  /* From zero: the smallest subnormal of the wanted sign. */
  V tiny = -1;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_bitcast_convert(e->fn, one, t.dtype, &tiny));
  V from_zero = down ? NEG(tiny) : tiny;
  return SEL(EQ(x, m_const(e, t.dtype, 0, NULL)), from_zero, r);
}

/* histc(self, bins, min, max): counts of self's elements in `bins` equal
 * bins over [min, max] (the data's range when min == max; widened when
 * that is one value), elements outside or NaN not counted, the last bin
 * closed. Floats as the CPU: bin = (x - lo) * bins / (hi - lo) in x's
 * dtype, edges rounded to it. Integers (which the CPU refuses) as CUDA:
 * the same in int64 arithmetic, the range truncated to the dtype, counts
 * in the input dtype. min and max are part of the program key. */
static tpuc_status* lower_histc(op_ctx* c, int param) {
  (void)param;
  if (!op_is_tensor(c, 0)) return op_unimpl("unexpected arguments");
  tpuc_hlo_type xt = c->types[0];
  tpuc_dtype dt = xt.dtype;
  if (dt == TPUC_DTYPE_PRED || tpuc_dtype_is_complex(dt))
    return op_unimpl("histc of this dtype: CPU says why");
  bool flt = tpuc_dtype_is_float(dt);
  int64_t bins = 100;
  TRY(op_int_arg(c, 1, 100, &bins));
  if (bins <= 0)
    return BAD("torch.histogram(): bins must be > 0, but got %lld for "
               "dimension 0", (long long)bins);
  double lo_h = 0, hi_h = 0;
  for (int i = 2; i <= 3; i++) {
    if (c->nargs <= (size_t)i || c->args[i].kind != TPUC_OP_ARG_SCALAR)
      continue;
    const tpuc_op_arg* s = &c->args[i];
    double v = s->scalar == TPUC_SCALAR_FLOAT ? s->f : (double)s->i;
    if (i == 2) lo_h = v; else hi_h = v;
  }
  if (c->nargs > 4 && c->args[4].kind == TPUC_OP_ARG_TENSOR &&
      c->args[4].view.dtype != dt && flt)
    return BAD("torch.histogram: input tensor and hist tensor should have "
               "the same dtype, but got input %s and hist %s",
               cpp_dtype_name(dt), cpp_dtype_name(c->args[4].view.dtype));
  int64_t n = tpuc_hlo_type_num_elements(&xt);
  bool from_data = lo_h == hi_h && n > 0;
  if (!from_data) {
    if (!flt) {
      lo_h = trunc(lo_h);
      hi_h = trunc(hi_h);
    }
    if (lo_h == hi_h) {
      lo_h -= 1;
      hi_h += 1;
    }
    if (!isfinite(lo_h) || !isfinite(hi_h))
      return BAD("torch.histc: range of [%g, %g] is not finite", lo_h, hi_h);
    if (!(lo_h < hi_h)) return BAD("torch.histc: max must be larger than min");
  }
  /* Floats compute in their dtype (half floats in f32, rounded after each
   * step as the CPU's Half arithmetic); integers in s64. */
  tpuc_dtype ct = flt ? op_accumulation_dtype(dt) : TPUC_DTYPE_S64;
  em ee = em_of(c), *e = &ee;
  V x = e_reshape(e, c->vals[0], &n, 1);
  V xc = e_cvt(e, x, ct);
  tpuc_hlo_type nt = tpuc_hlo_type_make(ct, &n, 1);
  V lo, hi;
  if (from_data) {
    /* The data's min and max (NaN propagates: the check below raises). */
    V init_lo = -1, init_hi = -1;
    if (flt) {
      init_lo = m_const(e, ct, INFINITY, NULL);
      init_hi = m_const(e, ct, -INFINITY, NULL);
    } else if (e->st == NULL) {
      em_keep(e, tpuc_hlo_constant_i64(e->fn, ct, INT64_MAX, &init_lo));
      if (e->st == NULL)
        em_keep(e, tpuc_hlo_constant_i64(e->fn, ct, INT64_MIN, &init_hi));
    }
    lo = m_reduce(e, xc, 0, TPUC_HLO_MIN, init_lo);
    hi = m_reduce(e, xc, 0, TPUC_HLO_MAX, init_hi);
    if (flt) {
      /* NaN anywhere: min/max reduce bodies drop it; count it instead. */
      V nan = m_sum(e, e_cvt(e, NE(xc, xc), TPUC_DTYPE_S32), 0);
      V has_nan = GT(nan, m_const(e, TPUC_DTYPE_S32, 0, NULL));
      V qn = m_const(e, ct, NAN, NULL);
      lo = SEL(has_nan, qn, lo);
      hi = SEL(has_nan, qn, hi);
    }
    /* One value: widen by one (floats: at least to the neighbours in the
     * input dtype, as the CPU). */
    V same = EQ(lo, hi), one = m_const(e, ct, 1, NULL);
    V wlo = SUB(lo, one), whi = ADD(hi, one);
    if (flt && ct == dt && (dt == TPUC_DTYPE_F32 || dt == TPUC_DTYPE_F64)) {
      V nd = next_float(e, lo, true), nu = next_float(e, hi, false);
      wlo = e_bin(e, TPUC_HLO_MIN, wlo, nd);
      whi = e_bin(e, TPUC_HLO_MAX, whi, nu);
    }
    lo = SEL(same, wlo, lo);
    hi = SEL(same, whi, hi);
    if (flt) {
      /* A non-finite range: the CPU raises, with the values in its
       * message (the check reruns the call there). */
      V inf = m_const(e, ct, INFINITY, NULL);
      V bad = OR(OR(NE(lo, lo), NE(hi, hi)),
                 OR(EQ(ABS(lo), inf), EQ(ABS(hi), inf)));
      if (e->st == NULL) {
        c->has_check = true;
        c->check = bad;
        c->check_code = TPUC_UNIMPLEMENTED;
        c->check_msg = "torch.histc: range is not finite";
      }
    }
  } else {
    lo = m_const(e, ct, lo_h, NULL);
    hi = m_const(e, ct, hi_h, NULL);
  }
  /* The outer edges in the input dtype, as the CPU's linspace gives. */
  if (flt && ct != dt) {
    lo = e_cvt(e, e_cvt(e, lo, dt), ct);
    hi = e_cvt(e, e_cvt(e, hi, dt), ct);
  }
  V lob = m_bcast(e, lo, &n, 1, NULL), hib = m_bcast(e, hi, &n, 1, NULL);
  V in = AND(GE(xc, lob), LE(xc, hib));
  V pos;
  if (flt) {
    V nb = m_const(e, ct, (double)bins, &nt);
    V d = SUB(xc, lob), w = SUB(hib, lob);
    if (ct != dt) {
      /* Half floats: each step rounded to the dtype. */
      d = e_cvt(e, e_cvt(e, d, dt), ct);
      w = e_cvt(e, e_cvt(e, w, dt), ct);
      nb = e_cvt(e, e_cvt(e, nb, dt), ct);
    }
    V q = MUL(d, nb);
    if (ct != dt) q = e_cvt(e, e_cvt(e, q, dt), ct);
    q = DIV(q, w);
    if (ct != dt) q = e_cvt(e, e_cvt(e, q, dt), ct);
    /* Out-of-range and NaN elements are masked below; keep them finite. */
    q = SEL(in, q, m_const(e, ct, 0, &nt));
    pos = e_cvt(e, q, TPUC_DTYPE_S64);
  } else {
    V nb = m_const(e, ct, (double)bins, &nt);
    V q = MUL(SUB(xc, lob), nb);
    V w = SUB(hib, lob);
    pos = DIV(SEL(in, q, m_const(e, ct, 0, &nt)), w);
  }
  tpuc_hlo_type st = tpuc_hlo_type_make(TPUC_DTYPE_S64, &n, 1);
  V last = m_const(e, TPUC_DTYPE_S64, (double)(bins - 1), &st);
  pos = e_bin(e, TPUC_HLO_MIN, pos, last);
  /* Elements not counted go to an extra bin that is cut off. */
  pos = SEL(in, pos, m_const(e, TPUC_DTYPE_S64, (double)bins, &st));
  int64_t col[2] = {n, 1};
  V idx = e_reshape(e, pos, col, 2);
  int64_t nb1 = bins + 1;
  tpuc_hlo_type ht = tpuc_hlo_type_make(TPUC_DTYPE_S64, &nb1, 1);
  V zeros = m_const(e, TPUC_DTYPE_S64, 0, &ht);
  V ones = m_const(e, TPUC_DTYPE_S64, 1, &st);
  V counts = n == 0 ? zeros : scatter_add(e, zeros, idx, ones), cut = -1;
  int64_t start = 0;
  if (e->st == NULL)
    em_keep(e, tpuc_hlo_slice(e->fn, counts, &start, &bins, NULL, &cut));
  c->outs[0] = e_cvt(e, cut, dt);
  c->nouts = 1;
  return e->st;
}

const op_entry op_table_moe[] = {
    {"aten::_grouped_mm", lower_grouped_mm, 0},
    {"aten::histc", lower_histc, 0},
    {"aten::histc.out", lower_histc, 0},
    {NULL, NULL, 0},
};
