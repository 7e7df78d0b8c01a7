/* StableHLO builder: dot_general and convolution. */
#include <stdlib.h>
#include <string.h>

#include "hlo_internal.h"

static bool numeric(tpuc_dtype d) {
  return hlo_is_int(d) || tpuc_dtype_is_float(d) || tpuc_dtype_is_complex(d);
}

/* A result dtype override: a float at least as wide as the float operand. */
static tpuc_status* result_dtype(const char* name, tpuc_dtype in,
                                 tpuc_dtype want, tpuc_dtype* out) {
  *out = in;
  if (want == TPUC_DTYPE_INVALID || want == in) return NULL;
  if (!tpuc_dtype_is_float(in) || !tpuc_dtype_is_float(want) ||
      tpuc_dtype_size(want) < tpuc_dtype_size(in))
    return hlo_error(name, "result dtype %s not allowed for %s operands",
                     tpuc_dtype_mlir_name(want), tpuc_dtype_mlir_name(in));
  *out = want;
  return NULL;
}

static void dims_field(hlo_sb* sb, bool* first, const char* name,
                       const int64_t* v, size_t n) {
  if (n == 0) return;
  hlo_sb_printf(sb, "%s%s = ", *first ? "" : ", ", name);
  hlo_sb_i64_list(sb, v, n);
  *first = false;
}

tpuc_status* tpuc_hlo_dot_general(tpuc_hlo_fn* fn, tpuc_hlo_value lhs,
                                  tpuc_hlo_value rhs,
                                  const tpuc_hlo_dot_dims* dims,
                                  tpuc_hlo_value* out) {
  const char* name = "stablehlo.dot_general";
  if (out == NULL || dims == NULL)
    return hlo_error(name, "out or dims is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  tpuc_hlo_type a, b;
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "lhs", lhs, &a));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "rhs", rhs, &b));
  if (a.dtype != b.dtype)
    return hlo_error(name, "lhs dtype %s differs from rhs dtype %s",
                     tpuc_dtype_mlir_name(a.dtype),
                     tpuc_dtype_mlir_name(b.dtype));
  if (!numeric(a.dtype))
    return hlo_error(name, "dtype %s is not numeric",
                     tpuc_dtype_mlir_name(a.dtype));
  char sa[TPUC_MAX_RANK] = {0}, sb_[TPUC_MAX_RANK] = {0};
  TPUC_RETURN_IF_ERROR(hlo_check_dims(name, "lhs_batching_dimensions",
                                      dims->lhs_batch, dims->num_batch, a.rank,
                                      false, sa));
  TPUC_RETURN_IF_ERROR(hlo_check_dims(name, "rhs_batching_dimensions",
                                      dims->rhs_batch, dims->num_batch, b.rank,
                                      false, sb_));
  TPUC_RETURN_IF_ERROR(
      hlo_check_dims(name, "lhs_contracting_dimensions", dims->lhs_contracting,
                     dims->num_contracting, a.rank, false, sa));
  TPUC_RETURN_IF_ERROR(
      hlo_check_dims(name, "rhs_contracting_dimensions", dims->rhs_contracting,
                     dims->num_contracting, b.rank, false, sb_));
  for (size_t i = 0; i < dims->num_batch; ++i)
    if (a.dims[dims->lhs_batch[i]] != b.dims[dims->rhs_batch[i]])
      return hlo_error(name, "batching dim %zu: lhs size %lld != rhs size %lld",
                       i, (long long)a.dims[dims->lhs_batch[i]],
                       (long long)b.dims[dims->rhs_batch[i]]);
  for (size_t i = 0; i < dims->num_contracting; ++i)
    if (a.dims[dims->lhs_contracting[i]] != b.dims[dims->rhs_contracting[i]])
      return hlo_error(name,
                       "contracting dim %zu: lhs size %lld != rhs size %lld", i,
                       (long long)a.dims[dims->lhs_contracting[i]],
                       (long long)b.dims[dims->rhs_contracting[i]]);
  tpuc_hlo_type r;
  memset(&r, 0, sizeof r);
  TPUC_RETURN_IF_ERROR(
      result_dtype(name, a.dtype, dims->result_dtype, &r.dtype));
  for (size_t i = 0; i < dims->num_batch; ++i)
    r.dims[r.rank++] = a.dims[dims->lhs_batch[i]];
  for (int d = 0; d < a.rank; ++d)
    if (!sa[d]) r.dims[r.rank++] = a.dims[d];
  for (int d = 0; d < b.rank; ++d) {
    if (sb_[d]) continue;
    if (r.rank >= TPUC_MAX_RANK)
      return hlo_error(name, "result rank exceeds %d", TPUC_MAX_RANK);
    r.dims[r.rank++] = b.dims[d];
  }
  hlo_sb sb = {0};
  bool first = true;
  hlo_sb_append(&sb, "dot_dimension_numbers = #stablehlo.dot<", 39);
  dims_field(&sb, &first, "lhs_batching_dimensions", dims->lhs_batch,
             dims->num_batch);
  dims_field(&sb, &first, "rhs_batching_dimensions", dims->rhs_batch,
             dims->num_batch);
  dims_field(&sb, &first, "lhs_contracting_dimensions", dims->lhs_contracting,
             dims->num_contracting);
  dims_field(&sb, &first, "rhs_contracting_dimensions", dims->rhs_contracting,
             dims->num_contracting);
  hlo_sb_append(&sb, ">", 1);
  if (dims->precision != TPUC_HLO_PRECISION_DEFAULT) {
    if (dims->precision != TPUC_HLO_PRECISION_HIGH &&
        dims->precision != TPUC_HLO_PRECISION_HIGHEST) {
      hlo_sb_free(&sb);
      return hlo_error(name, "invalid precision %d", (int)dims->precision);
    }
    const char* p =
        dims->precision == TPUC_HLO_PRECISION_HIGH ? "HIGH" : "HIGHEST";
    hlo_sb_printf(&sb,
                  ", precision_config = [#stablehlo<precision %s>, "
                  "#stablehlo<precision %s>]",
                  p, p);
  }
  tpuc_hlo_value ops[2] = {lhs, rhs};
  return hlo_emit1(fn, name, ops, 2, &r, &sb, out);
}

void tpuc_hlo_conv_init_nchw(tpuc_hlo_conv* c, int num_spatial) {
  memset(c, 0, sizeof *c);
  if (num_spatial < 0) num_spatial = 0;
  if (num_spatial > TPUC_MAX_RANK - 2) num_spatial = TPUC_MAX_RANK - 2;
  c->num_spatial = num_spatial;
  c->input_batch_dim = 0;
  c->input_feature_dim = 1;
  c->kernel_output_feature_dim = 0;
  c->kernel_input_feature_dim = 1;
  c->output_batch_dim = 0;
  c->output_feature_dim = 1;
  for (int i = 0; i < num_spatial; ++i)
    c->input_spatial_dims[i] = c->kernel_spatial_dims[i] =
        c->output_spatial_dims[i] = 2 + i;
  c->feature_group_count = 1;
  c->batch_group_count = 1;
}

/* Checks that (a, b, spatial...) is a permutation of [0, rank). */
static tpuc_status* check_layout(const char* name, const char* what, int64_t a,
                                 int64_t b, const int64_t* sp, int ns) {
  int64_t all[TPUC_MAX_RANK];
  all[0] = a;
  all[1] = b;
  for (int i = 0; i < ns; ++i) all[2 + i] = sp[i];
  return hlo_check_dims(name, what, all, (size_t)ns + 2, ns + 2, false, NULL);
}

static tpuc_status* check_positive(const char* name, const char* what,
                                   const int64_t* v, int n) {
  for (int i = 0; v && i < n; ++i)
    if (v[i] <= 0 || v[i] > ((int64_t)1 << 40))
      return hlo_error(name, "%s[%d] = %lld must be positive", what, i,
                       (long long)v[i]);
  return NULL;
}

tpuc_status* tpuc_hlo_convolution(tpuc_hlo_fn* fn, tpuc_hlo_value lhs,
                                  tpuc_hlo_value rhs, const tpuc_hlo_conv* c,
                                  tpuc_hlo_value* out) {
  const char* name = "stablehlo.convolution";
  if (out == NULL || c == NULL) return hlo_error(name, "out or conv is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  tpuc_hlo_type a, k;
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "lhs", lhs, &a));
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "rhs", rhs, &k));
  int ns = c->num_spatial;
  if (ns < 0 || ns > TPUC_MAX_RANK - 2)
    return hlo_error(name, "num_spatial %d out of range", ns);
  if (a.rank != ns + 2 || k.rank != ns + 2)
    return hlo_error(name, "lhs and rhs must have rank %d (num_spatial + 2)",
                     ns + 2);
  if (a.dtype != k.dtype)
    return hlo_error(name, "lhs dtype %s differs from rhs dtype %s",
                     tpuc_dtype_mlir_name(a.dtype),
                     tpuc_dtype_mlir_name(k.dtype));
  if (!numeric(a.dtype))
    return hlo_error(name, "dtype %s is not numeric",
                     tpuc_dtype_mlir_name(a.dtype));
  TPUC_RETURN_IF_ERROR(check_layout(name, "input dimensions",
                                    c->input_batch_dim, c->input_feature_dim,
                                    c->input_spatial_dims, ns));
  TPUC_RETURN_IF_ERROR(
      check_layout(name, "kernel dimensions", c->kernel_input_feature_dim,
                   c->kernel_output_feature_dim, c->kernel_spatial_dims, ns));
  TPUC_RETURN_IF_ERROR(check_layout(name, "output dimensions",
                                    c->output_batch_dim, c->output_feature_dim,
                                    c->output_spatial_dims, ns));
  TPUC_RETURN_IF_ERROR(check_positive(name, "window_strides", c->strides, ns));
  TPUC_RETURN_IF_ERROR(
      check_positive(name, "lhs_dilation", c->lhs_dilation, ns));
  TPUC_RETURN_IF_ERROR(
      check_positive(name, "rhs_dilation", c->rhs_dilation, ns));
  int64_t fgc = c->feature_group_count ? c->feature_group_count : 1;
  int64_t bgc = c->batch_group_count ? c->batch_group_count : 1;
  if (fgc <= 0 || bgc <= 0)
    return hlo_error(name, "group counts must be positive");
  if (fgc > 1 && bgc > 1)
    return hlo_error(name,
                     "feature_group_count and batch_group_count cannot both "
                     "exceed 1");
  int64_t in_batch = a.dims[c->input_batch_dim];
  int64_t in_feat = a.dims[c->input_feature_dim];
  int64_t k_in = k.dims[c->kernel_input_feature_dim];
  int64_t k_out = k.dims[c->kernel_output_feature_dim];
  if (in_feat % fgc != 0 || in_feat / fgc != k_in)
    return hlo_error(name,
                     "input features (%lld) must equal kernel input features "
                     "(%lld) * feature_group_count (%lld)",
                     (long long)in_feat, (long long)k_in, (long long)fgc);
  if (k_out % fgc != 0)
    return hlo_error(name,
                     "kernel output features (%lld) not divisible by "
                     "feature_group_count (%lld)",
                     (long long)k_out, (long long)fgc);
  if (in_batch % bgc != 0 || k_out % bgc != 0)
    return hlo_error(name,
                     "input batch (%lld) and kernel output features (%lld) "
                     "must be divisible by batch_group_count (%lld)",
                     (long long)in_batch, (long long)k_out, (long long)bgc);
  tpuc_hlo_type r;
  memset(&r, 0, sizeof r);
  r.dtype = a.dtype;
  r.rank = ns + 2;
  r.dims[c->output_batch_dim] = in_batch / bgc;
  r.dims[c->output_feature_dim] = k_out;
  const int64_t big = (int64_t)1 << 40;
  for (int i = 0; i < ns; ++i) {
    int64_t in = a.dims[c->input_spatial_dims[i]];
    int64_t win = k.dims[c->kernel_spatial_dims[i]];
    int64_t st = c->strides ? c->strides[i] : 1;
    int64_t ld = c->lhs_dilation ? c->lhs_dilation[i] : 1;
    int64_t rd = c->rhs_dilation ? c->rhs_dilation[i] : 1;
    int64_t lo = c->padding ? c->padding[2 * i] : 0;
    int64_t hi = c->padding ? c->padding[2 * i + 1] : 0;
    if (lo > big || lo < -big || hi > big || hi < -big)
      return hlo_error(name, "spatial dim %d: padding too large", i);
    int64_t dil_in = in == 0 ? 0 : (in - 1) * ld + 1;
    int64_t padded = dil_in + lo + hi;
    int64_t dil_win = win == 0 ? 0 : (win - 1) * rd + 1;
    if (padded < 0)
      return hlo_error(name, "spatial dim %d: padded input size is negative",
                       i);
    r.dims[c->output_spatial_dims[i]] =
        padded < dil_win ? 0 : (padded - dil_win) / st + 1;
  }
  hlo_sb sb = {0};
  hlo_sb_printf(&sb, "batch_group_count = %lld : i64", (long long)bgc);
  hlo_sb_printf(&sb,
                ", dimension_numbers = #stablehlo.conv<raw "
                "input_batch_dimension = %lld, input_feature_dimension = %lld, "
                "input_spatial_dimensions = ",
                (long long)c->input_batch_dim, (long long)c->input_feature_dim);
  hlo_sb_i64_list(&sb, c->input_spatial_dims, (size_t)ns);
  hlo_sb_printf(&sb,
                ", kernel_input_feature_dimension = %lld, "
                "kernel_output_feature_dimension = %lld, "
                "kernel_spatial_dimensions = ",
                (long long)c->kernel_input_feature_dim,
                (long long)c->kernel_output_feature_dim);
  hlo_sb_i64_list(&sb, c->kernel_spatial_dims, (size_t)ns);
  hlo_sb_printf(&sb,
                ", output_batch_dimension = %lld, output_feature_dimension = "
                "%lld, output_spatial_dimensions = ",
                (long long)c->output_batch_dim,
                (long long)c->output_feature_dim);
  hlo_sb_i64_list(&sb, c->output_spatial_dims, (size_t)ns);
  hlo_sb_printf(&sb, ">, feature_group_count = %lld : i64", (long long)fgc);
  if (c->lhs_dilation)
    hlo_sb_i64_array_attr(&sb, "lhs_dilation", c->lhs_dilation, (size_t)ns);
  if (c->padding) hlo_sb_padding_attr(&sb, c->padding, (size_t)ns);
  if (c->rhs_dilation)
    hlo_sb_i64_array_attr(&sb, "rhs_dilation", c->rhs_dilation, (size_t)ns);
  if (c->strides)
    hlo_sb_i64_array_attr(&sb, "window_strides", c->strides, (size_t)ns);
  tpuc_hlo_value ops[2] = {lhs, rhs};
  return hlo_emit1(fn, name, ops, 2, &r, &sb, out);
}
