/* StableHLO builder: reductions with a region (reduce, reduce_window,
 * select_and_scatter). */
#include <stdlib.h>
#include <string.h>

#include "hlo_internal.h"

#define HLO_MAX_OPERANDS 64

/* Checks n same-shaped inputs and their rank-0 inits; fills dtypes (2n:
 * accumulators then elements, equal) and the first input's type. */
static tpuc_status* check_inputs(const tpuc_hlo_fn* fn, const char* name,
                                 const tpuc_hlo_value* inputs,
                                 const tpuc_hlo_value* inits, size_t n,
                                 tpuc_dtype* dtypes, tpuc_hlo_type* types) {
  if (n == 0 || inputs == NULL || inits == NULL)
    return hlo_error(name, "needs at least one input and init");
  if (n > HLO_MAX_OPERANDS)
    return hlo_error(name, "too many inputs (%zu > %d)", n, HLO_MAX_OPERANDS);
  for (size_t i = 0; i < n; ++i) {
    char what[48];
    tpuc_hlo_type t;
    snprintf(what, sizeof what, "input %zu", i);
    TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, what, inputs[i], &types[i]));
    if (i > 0 && !hlo_same_shape(&types[i], &types[0]))
      return hlo_error(name, "input %zu has a different shape than input 0", i);
    snprintf(what, sizeof what, "init %zu", i);
    TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, what, inits[i], &t));
    if (t.rank != 0 || t.dtype != types[i].dtype)
      return hlo_error(name, "init %zu must be tensor<%s>", i,
                       tpuc_dtype_mlir_name(types[i].dtype));
    dtypes[i] = dtypes[n + i] = types[i].dtype;
  }
  return NULL;
}

static tpuc_status* emit_multi(tpuc_hlo_fn* fn, const char* name,
                               const tpuc_hlo_value* a, size_t na,
                               const tpuc_hlo_value* b, size_t nb,
                               const tpuc_hlo_type* rtypes, size_t nr,
                               hlo_sb* sb, tpuc_hlo_fn* const* regions,
                               size_t nregions, tpuc_hlo_value* outs) {
  if (sb->oom) {
    hlo_sb_free(sb);
    return hlo_oom(name);
  }
  tpuc_hlo_value ops[2 * HLO_MAX_OPERANDS + 1];
  memcpy(ops, a, na * sizeof *ops);
  if (nb) memcpy(ops + na, b, nb * sizeof *ops);
  return hlo_emit(fn, name, ops, na + nb, rtypes, nr, hlo_sb_take(sb), regions,
                  nregions, outs);
}

tpuc_status* tpuc_hlo_reduce(tpuc_hlo_fn* fn, const tpuc_hlo_value* inputs,
                             const tpuc_hlo_value* inits, size_t n,
                             const int64_t* dims, size_t num_dims,
                             tpuc_hlo_fn* body, tpuc_hlo_value* outs) {
  const char* name = "stablehlo.reduce";
  if (outs == NULL) return hlo_error(name, "outs is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  tpuc_dtype dtypes[2 * HLO_MAX_OPERANDS];
  tpuc_hlo_type types[HLO_MAX_OPERANDS];
  TPUC_RETURN_IF_ERROR(check_inputs(fn, name, inputs, inits, n, dtypes, types));
  char seen[TPUC_MAX_RANK] = {0};
  TPUC_RETURN_IF_ERROR(hlo_check_dims(name, "dimensions", dims, num_dims,
                                      types[0].rank, false, seen));
  TPUC_RETURN_IF_ERROR(hlo_check_region(fn, name, "body", body));
  TPUC_RETURN_IF_ERROR(
      hlo_check_scalar_region(name, "body", body, dtypes, 2 * n, dtypes, n));
  tpuc_hlo_type rtypes[HLO_MAX_OPERANDS];
  for (size_t i = 0; i < n; ++i) {
    tpuc_hlo_type r = types[i];
    r.rank = 0;
    for (int d = 0; d < types[i].rank; ++d)
      if (!seen[d]) r.dims[r.rank++] = types[i].dims[d];
    rtypes[i] = r;
  }
  hlo_sb sb = {0};
  hlo_sb_i64_array_attr(&sb, "dimensions", dims, num_dims);
  return emit_multi(fn, name, inputs, n, inits, n, rtypes, n, &sb, &body, 1,
                    outs);
}

/* Output size of one windowed dim; -1 if the window does not fit. */
static int64_t window_out(int64_t in, int64_t win, int64_t stride,
                          int64_t base_dil, int64_t win_dil, int64_t lo,
                          int64_t hi) {
  int64_t dilated = in == 0 ? 0 : (in - 1) * base_dil + 1;
  int64_t padded = dilated + lo + hi;
  int64_t wd = win == 0 ? 0 : (win - 1) * win_dil + 1;
  if (padded < 0) return -1;
  if (padded < wd) return 0;
  return (padded - wd) / stride + 1;
}

/* Validates `w` for `rank` dims and computes the windowed shape. */
static tpuc_status* check_window(const char* name, const tpuc_hlo_window* w,
                                 const tpuc_hlo_type* in, bool dilations,
                                 tpuc_hlo_type* r) {
  if (w == NULL || (in->rank > 0 && w->dims == NULL))
    return hlo_error(name, "window dims are NULL");
  if (!dilations && (w->base_dilations || w->window_dilations))
    return hlo_error(name, "dilations are not supported");
  *r = *in;
  const int64_t big = (int64_t)1 << 40;
  for (int i = 0; i < in->rank; ++i) {
    int64_t win = w->dims[i];
    int64_t st = w->strides ? w->strides[i] : 1;
    int64_t bd = w->base_dilations ? w->base_dilations[i] : 1;
    int64_t wdl = w->window_dilations ? w->window_dilations[i] : 1;
    int64_t lo = w->padding ? w->padding[2 * i] : 0;
    int64_t hi = w->padding ? w->padding[2 * i + 1] : 0;
    if (win <= 0 || st <= 0 || bd <= 0 || wdl <= 0)
      return hlo_error(name,
                       "dim %d: window size, stride and dilations must be "
                       "positive",
                       i);
    if (win > big || st > big || bd > big || wdl > big || lo > big ||
        hi > big || lo < -big || hi < -big)
      return hlo_error(name, "dim %d: window parameters too large", i);
    int64_t o = window_out(in->dims[i], win, st, bd, wdl, lo, hi);
    if (o < 0) return hlo_error(name, "dim %d: padded size is negative", i);
    r->dims[i] = o;
  }
  return NULL;
}

static void window_attrs(hlo_sb* sb, const tpuc_hlo_window* w, int rank,
                         bool dilations) {
  size_t n = (size_t)rank;
  hlo_sb_i64_array_attr(sb, "window_dimensions", w->dims, n);
  if (w->strides) hlo_sb_i64_array_attr(sb, "window_strides", w->strides, n);
  if (dilations && w->base_dilations)
    hlo_sb_i64_array_attr(sb, "base_dilations", w->base_dilations, n);
  if (dilations && w->window_dilations)
    hlo_sb_i64_array_attr(sb, "window_dilations", w->window_dilations, n);
  if (w->padding) hlo_sb_padding_attr(sb, w->padding, n);
}

tpuc_status* tpuc_hlo_reduce_window(tpuc_hlo_fn* fn,
                                    const tpuc_hlo_value* inputs,
                                    const tpuc_hlo_value* inits, size_t n,
                                    const tpuc_hlo_window* window,
                                    tpuc_hlo_fn* body, tpuc_hlo_value* outs) {
  const char* name = "stablehlo.reduce_window";
  if (outs == NULL) return hlo_error(name, "outs is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  tpuc_dtype dtypes[2 * HLO_MAX_OPERANDS];
  tpuc_hlo_type types[HLO_MAX_OPERANDS];
  TPUC_RETURN_IF_ERROR(check_inputs(fn, name, inputs, inits, n, dtypes, types));
  tpuc_hlo_type shape;
  TPUC_RETURN_IF_ERROR(check_window(name, window, &types[0], true, &shape));
  TPUC_RETURN_IF_ERROR(hlo_check_region(fn, name, "body", body));
  TPUC_RETURN_IF_ERROR(
      hlo_check_scalar_region(name, "body", body, dtypes, 2 * n, dtypes, n));
  tpuc_hlo_type rtypes[HLO_MAX_OPERANDS];
  for (size_t i = 0; i < n; ++i) {
    rtypes[i] = shape;
    rtypes[i].dtype = types[i].dtype;
  }
  hlo_sb sb = {0};
  window_attrs(&sb, window, shape.rank, true);
  return emit_multi(fn, name, inputs, n, inits, n, rtypes, n, &sb, &body, 1,
                    outs);
}

tpuc_status* tpuc_hlo_select_and_scatter(
    tpuc_hlo_fn* fn, tpuc_hlo_value operand, tpuc_hlo_value source,
    tpuc_hlo_value init, const tpuc_hlo_window* window, tpuc_hlo_fn* select,
    tpuc_hlo_fn* scatter, tpuc_hlo_value* out) {
  const char* name = "stablehlo.select_and_scatter";
  if (out == NULL) return hlo_error(name, "out is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  tpuc_hlo_type t, s, i0, shape;
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "operand", operand, &t));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "source", source, &s));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "init", init, &i0));
  TPUC_RETURN_IF_ERROR(check_window(name, window, &t, false, &shape));
  if (!hlo_same_shape(&s, &shape)) {
    char a[256];
    shape.dtype = s.dtype;
    return hlo_error(name, "source must have the windowed shape %s",
                     hlo_type_str(&shape, a, sizeof a));
  }
  if (i0.rank != 0 || i0.dtype != s.dtype)
    return hlo_error(name, "init must be tensor<%s>",
                     tpuc_dtype_mlir_name(s.dtype));
  TPUC_RETURN_IF_ERROR(hlo_check_region(fn, name, "select", select));
  TPUC_RETURN_IF_ERROR(hlo_check_region(fn, name, "scatter", scatter));
  if (select == scatter)
    return hlo_error(name, "select and scatter must be distinct regions");
  tpuc_dtype sel_args[2] = {t.dtype, t.dtype}, pred = TPUC_DTYPE_PRED;
  TPUC_RETURN_IF_ERROR(
      hlo_check_scalar_region(name, "select", select, sel_args, 2, &pred, 1));
  tpuc_dtype sc_args[2] = {s.dtype, s.dtype};
  TPUC_RETURN_IF_ERROR(hlo_check_scalar_region(name, "scatter", scatter,
                                               sc_args, 2, sc_args, 1));
  hlo_sb sb = {0};
  window_attrs(&sb, window, t.rank, false);
  tpuc_hlo_value ops[3] = {operand, source, init};
  tpuc_hlo_fn* regions[2] = {select, scatter};
  tpuc_hlo_type r = t;
  r.dtype = s.dtype;
  return emit_multi(fn, name, ops, 3, NULL, 0, &r, 1, &sb, regions, 2, out);
}
