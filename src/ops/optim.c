/* Fused optimizer steps (torch.optim's fused=True): one program per
 * parameter updates the parameter and its state in place. The binding
 * walks the tensor lists of _fused_adam_ / _fused_adamw_ and calls
 * tpuc::adam_step for each parameter. */
#include "ops/ops_internal.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

typedef struct {
  op_ctx* c;
  tpuc_status* st;
  tpuc_hlo_type shape; /* the parameter's shape, compute dtype */
} em;

static tpuc_hlo_value bin(em* e, tpuc_hlo_binary_op op, tpuc_hlo_value a,
                          tpuc_hlo_value b) {
  tpuc_hlo_value out = -1;
  if (e->st == NULL) e->st = tpuc_hlo_binary(e->c->fn, op, a, b, &out);
  return out;
}

static tpuc_hlo_value un(em* e, tpuc_hlo_unary_op op, tpuc_hlo_value a) {
  tpuc_hlo_value out = -1;
  if (e->st == NULL) e->st = tpuc_hlo_unary(e->c->fn, op, a, &out);
  return out;
}

/* Argument i as a value of the compute dtype broadcast to the parameter's
 * shape (a tensor of that shape, or a scalar / 0-d tensor). */
static tpuc_hlo_value arg(em* e, int i) {
  tpuc_hlo_value out = -1;
  if (e->st != NULL) return out;
  if (op_is_tensor(e->c, i) && e->c->types[i].rank > 0)
    e->st = op_operand(e->c, i, e->shape.dtype, &e->shape, &out);
  else
    e->st = op_scalar(e->c, i, e->shape.dtype, &e->shape, &out);
  return out;
}

static tpuc_hlo_value cst(em* e, double v) {
  tpuc_hlo_value out = -1;
  if (e->st == NULL) e->st = op_const(e->c, e->shape.dtype, v, &e->shape, &out);
  return out;
}

static tpuc_status* step_results(em* e, int fi, tpuc_hlo_value* news,
                                 const int* srcs, size_t n);

/* adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq?, step, lr,
 *           beta1, beta2, weight_decay, eps, amsgrad, maximize,
 *           grad_scale?, found_inf?, adamw)
 * -> param, exp_avg, exp_avg_sq [, max_exp_avg_sq] [, grad]: PyTorch's
 * Adam / AdamW update with the step already counted, the gradient
 * unscaled by grad_scale (and written back, as the fused kernels do), and
 * nothing changed where found_inf is set. */
tpuc_status* op_lower_adam_step(op_ctx* c, int param) {
  (void)param;
  for (int i = 0; i < 4; i++)
    if (!op_is_tensor(c, i)) return op_unimpl("unexpected arguments");
  int64_t amsgrad = 0, maximize = 0, adamw = 0;
  TRY(op_int_arg(c, 11, 0, &amsgrad));
  TRY(op_int_arg(c, 12, 0, &maximize));
  TRY(op_int_arg(c, 15, 0, &adamw));
  if (amsgrad && !op_is_tensor(c, 4)) return op_unimpl("amsgrad without state");
  tpuc_dtype dt = c->types[0].dtype;
  if (!tpuc_dtype_is_float(dt)) return op_unimpl("non-float parameter");
  for (int i = 1; i < 4 + (int)amsgrad; i++)
    if (c->types[i].rank != c->types[0].rank) return op_unimpl("shapes");
  em e = {c, NULL, c->types[0]};
  e.shape.dtype = op_accumulation_dtype(dt);
  tpuc_hlo_value p = arg(&e, 0), g = arg(&e, 1), m = arg(&e, 2),
                 v = arg(&e, 3);
  tpuc_hlo_value step = arg(&e, 5), lr = arg(&e, 6), b1 = arg(&e, 7),
                 b2 = arg(&e, 8), wd = arg(&e, 9), eps = arg(&e, 10);
  tpuc_hlo_value one = cst(&e, 1.0);
  bool scaled = op_is_tensor(c, 13);
  if (scaled) g = bin(&e, TPUC_HLO_DIV, g, arg(&e, 13));
  tpuc_hlo_value g_used = maximize ? un(&e, TPUC_HLO_NEG, g) : g;
  if (adamw) {
    /* decoupled decay: p *= 1 - lr * wd */
    p = bin(&e, TPUC_HLO_MUL, p,
            bin(&e, TPUC_HLO_SUB, one, bin(&e, TPUC_HLO_MUL, lr, wd)));
  } else {
    g_used = bin(&e, TPUC_HLO_ADD, g_used, bin(&e, TPUC_HLO_MUL, wd, p));
  }
  /* m += (1 - b1) (g - m); v = b2 v + (1 - b2) g^2 */
  tpuc_hlo_value m2 =
      bin(&e, TPUC_HLO_ADD, m,
          bin(&e, TPUC_HLO_MUL, bin(&e, TPUC_HLO_SUB, one, b1),
              bin(&e, TPUC_HLO_SUB, g_used, m)));
  tpuc_hlo_value v2 =
      bin(&e, TPUC_HLO_ADD, bin(&e, TPUC_HLO_MUL, b2, v),
          bin(&e, TPUC_HLO_MUL, bin(&e, TPUC_HLO_SUB, one, b2),
              bin(&e, TPUC_HLO_MUL, g_used, g_used)));
  tpuc_hlo_value bc1 =
      bin(&e, TPUC_HLO_SUB, one, bin(&e, TPUC_HLO_POW, b1, step));
  tpuc_hlo_value bc2 =
      bin(&e, TPUC_HLO_SUB, one, bin(&e, TPUC_HLO_POW, b2, step));
  tpuc_hlo_value step_size = bin(&e, TPUC_HLO_DIV, lr, bc1);
  tpuc_hlo_value bc2_sqrt = un(&e, TPUC_HLO_SQRT, bc2);
  tpuc_hlo_value vmax = v2, vmax_new = -1;
  if (amsgrad) {
    vmax_new = bin(&e, TPUC_HLO_MAX, arg(&e, 4), v2);
    vmax = vmax_new;
  }
  tpuc_hlo_value denom =
      bin(&e, TPUC_HLO_ADD,
          bin(&e, TPUC_HLO_DIV, un(&e, TPUC_HLO_SQRT, vmax), bc2_sqrt), eps);
  tpuc_hlo_value p2 =
      bin(&e, TPUC_HLO_SUB, p,
          bin(&e, TPUC_HLO_MUL, step_size, bin(&e, TPUC_HLO_DIV, m2, denom)));
  TRY(e.st);
  tpuc_hlo_value news[5] = {p2, m2, v2, vmax_new, g};
  int srcs[5] = {0, 2, 3, 4, 1};
  size_t n = 3;
  if (amsgrad) n++;
  if (scaled) {
    news[n] = g;
    srcs[n] = 1;
    n++;
  }
  return step_results(&e, 14, news, srcs, n);
}

/* The results of a fused optimizer step: news[k] (compute dtype) is
 * written to argument srcs[k] in its dtype; where the found_inf argument
 * (index fi) is set, every tensor keeps its old value. */
static tpuc_status* step_results(em* e, int fi, tpuc_hlo_value* news,
                                 const int* srcs, size_t n) {
  op_ctx* c = e->c;
  if (op_is_tensor(c, fi)) {
    tpuc_hlo_value inf, zero, skip;
    TRY(op_scalar(c, fi, e->shape.dtype, &e->shape, &inf));
    TRY(op_const(c, e->shape.dtype, 0.0, &e->shape, &zero));
    TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_NE, inf, zero, &skip));
    for (size_t k = 0; k < n; k++) {
      tpuc_hlo_value old;
      TRY(op_operand(c, srcs[k], e->shape.dtype, &e->shape, &old));
      TRY(tpuc_hlo_select(c->fn, skip, old, news[k], &news[k]));
    }
  }
  c->nouts = n;
  for (size_t k = 0; k < n; k++)
    TRY(tpuc_hlo_convert(c->fn, news[k], c->types[srcs[k]].dtype, &c->outs[k]));
  return NULL;
}

/* Checks shared by the per-parameter steps: `ntensors` tensor arguments
 * from 0 of the parameter's rank, a float parameter. */
static tpuc_status* step_check(op_ctx* c, int ntensors) {
  for (int i = 0; i < ntensors; i++)
    if (!op_is_tensor(c, i)) return op_unimpl("unexpected arguments");
  if (!tpuc_dtype_is_float(c->types[0].dtype) ||
      tpuc_dtype_is_complex(c->types[0].dtype))
    return op_unimpl("non-float parameter");
  for (int i = 1; i < ntensors; i++)
    if (c->types[i].rank != c->types[0].rank) return op_unimpl("shapes");
  return NULL;
}

/* sgd_step(param, grad, momentum_buffer?, lr, weight_decay, momentum,
 *          dampening, nesterov, maximize, is_first_step, grad_scale?,
 *          found_inf?, momentum != 0, weight_decay != 0) -> param
 *          [, momentum_buffer] [, grad]: one
 * parameter of _fused_sgd_, PyTorch's SGD update (the gradient unscaled
 * by grad_scale and written back; nothing changed where found_inf is set).
 * On the first step the buffer is the gradient. Whether momentum and
 * weight decay apply are flags (part of the program's key; their values
 * are operands), as the CPU skips them when 0 (0 * inf would be NaN). */
tpuc_status* op_lower_sgd_step(op_ctx* c, int param) {
  (void)param;
  bool has_buf = op_is_tensor(c, 2);
  TRY(step_check(c, has_buf ? 3 : 2));
  int64_t nesterov = 0, maximize = 0, first = 0, momentum = 0, decay = 0;
  TRY(op_int_arg(c, 7, 0, &nesterov));
  TRY(op_int_arg(c, 8, 0, &maximize));
  TRY(op_int_arg(c, 9, 0, &first));
  TRY(op_int_arg(c, 12, 0, &momentum));
  TRY(op_int_arg(c, 13, 0, &decay));
  if (momentum && !has_buf) return op_unimpl("momentum without buffer");
  em e = {c, NULL, c->types[0]};
  e.shape.dtype = op_accumulation_dtype(c->types[0].dtype);
  tpuc_hlo_value p = arg(&e, 0), g = arg(&e, 1), lr = arg(&e, 3),
                 wd = arg(&e, 4);
  bool scaled = op_is_tensor(c, 10);
  if (scaled) g = bin(&e, TPUC_HLO_DIV, g, arg(&e, 10));
  tpuc_hlo_value d = maximize ? un(&e, TPUC_HLO_NEG, g) : g;
  if (decay) d = bin(&e, TPUC_HLO_ADD, d, bin(&e, TPUC_HLO_MUL, p, wd));
  tpuc_hlo_value buf = -1;
  if (momentum) {
    tpuc_hlo_value mom = arg(&e, 5), one = cst(&e, 1.0);
    if (first) {
      buf = d;
    } else {
      buf = bin(&e, TPUC_HLO_ADD, bin(&e, TPUC_HLO_MUL, arg(&e, 2), mom),
                bin(&e, TPUC_HLO_MUL, d,
                    bin(&e, TPUC_HLO_SUB, one, arg(&e, 6))));
    }
    d = nesterov ? bin(&e, TPUC_HLO_ADD, d, bin(&e, TPUC_HLO_MUL, buf, mom))
                 : buf;
  }
  tpuc_hlo_value p2 = bin(&e, TPUC_HLO_SUB, p, bin(&e, TPUC_HLO_MUL, d, lr));
  TRY(e.st);
  tpuc_hlo_value news[3] = {p2, buf, g};
  int srcs[3] = {0, 2, 1};
  size_t n = 1;
  if (momentum) n++;
  if (scaled) {
    news[n] = g;
    srcs[n] = 1;
    n++;
  }
  return step_results(&e, 11, news, srcs, n);
}

/* adagrad_step(param, grad, state_sum, step, lr, lr_decay, weight_decay,
 *              eps, maximize, grad_scale?, found_inf?, weight_decay != 0)
 *              -> param,
 * state_sum [, grad]: one parameter of _fused_adagrad_ (the step already
 * counted): sum += g^2; param -= lr / (1 + (step - 1) lr_decay) * g /
 * (sqrt(sum) + eps). */
tpuc_status* op_lower_adagrad_step(op_ctx* c, int param) {
  (void)param;
  TRY(step_check(c, 3));
  if (!op_is_tensor(c, 3)) return op_unimpl("unexpected arguments");
  int64_t maximize = 0, use_wd = 0;
  TRY(op_int_arg(c, 8, 0, &maximize));
  TRY(op_int_arg(c, 11, 0, &use_wd));
  em e = {c, NULL, c->types[0]};
  e.shape.dtype = op_accumulation_dtype(c->types[0].dtype);
  tpuc_hlo_value p = arg(&e, 0), g = arg(&e, 1), sum = arg(&e, 2),
                 step = arg(&e, 3), lr = arg(&e, 4), decay = arg(&e, 5),
                 wd = arg(&e, 6), eps = arg(&e, 7), one = cst(&e, 1.0);
  bool scaled = op_is_tensor(c, 9);
  if (scaled) g = bin(&e, TPUC_HLO_DIV, g, arg(&e, 9));
  tpuc_hlo_value d = maximize ? un(&e, TPUC_HLO_NEG, g) : g;
  if (use_wd) d = bin(&e, TPUC_HLO_ADD, d, bin(&e, TPUC_HLO_MUL, p, wd));
  tpuc_hlo_value clr = bin(
      &e, TPUC_HLO_DIV, lr,
      bin(&e, TPUC_HLO_ADD, one,
          bin(&e, TPUC_HLO_MUL, bin(&e, TPUC_HLO_SUB, step, one), decay)));
  tpuc_hlo_value sum2 = bin(&e, TPUC_HLO_ADD, sum, bin(&e, TPUC_HLO_MUL, d, d));
  tpuc_hlo_value std = bin(&e, TPUC_HLO_ADD, un(&e, TPUC_HLO_SQRT, sum2), eps);
  tpuc_hlo_value p2 = bin(&e, TPUC_HLO_SUB, p,
                          bin(&e, TPUC_HLO_MUL, clr, bin(&e, TPUC_HLO_DIV, d, std)));
  TRY(e.st);
  tpuc_hlo_value news[3] = {p2, sum2, g};
  int srcs[3] = {0, 2, 1};
  return step_results(&e, 10, news, srcs, scaled ? 3 : 2);
}

/* Rank-0 i1: some element of `x` is NaN or infinite. */
static tpuc_status* any_nonfinite(op_ctx* c, tpuc_hlo_value x,
                                  tpuc_hlo_value* out) {
  tpuc_hlo_value fin, bad;
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_IS_FINITE, x, &fin));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_NOT, fin, &bad));
  return op_any_true(c, bad, out);
}

static bool is_one_element(const tpuc_hlo_type* t) {
  for (int d = 0; d < t->rank; d++)
    if (t->dims[d] != 1) return false;
  return true;
}

/* The one element of tensor argument i (any rank), converted to `dtype`
 * and broadcast to `shape` (rank 0 when NULL). */
static tpuc_status* one_value(op_ctx* c, int i, tpuc_dtype dtype,
                              const tpuc_hlo_type* shape, tpuc_hlo_value* out) {
  tpuc_hlo_type t = c->types[i];
  t.dtype = dtype;
  tpuc_hlo_value v;
  TRY(op_operand(c, i, dtype, &t, &v));
  if (t.rank > 0) TRY(tpuc_hlo_reshape(c->fn, v, NULL, 0, &v));
  if (shape == NULL || shape->rank == 0) {
    *out = v;
    return NULL;
  }
  return tpuc_hlo_broadcast_in_dim(c->fn, v, shape->dims, shape->rank, NULL,
                                   out);
}

/* amp_unscale(grad, found_inf, inv_scale) -> grad, found_inf: one tensor
 * of GradScaler's _amp_foreach_non_finite_check_and_unscale_ (the binding
 * walks the list). found_inf becomes 1 where grad has a NaN or an infinity
 * (it is never cleared); grad is multiplied by inv_scale in the CPU's
 * compute dtype (f32 for half floats), and left as it is when inv_scale is
 * 1, as the CPU and CUDA kernels do. */
tpuc_status* op_lower_amp_unscale(op_ctx* c, int param) {
  (void)param;
  for (int i = 0; i < 3; i++)
    if (!op_is_tensor(c, i)) return op_unimpl("unexpected arguments");
  tpuc_dtype dt = c->types[0].dtype;
  if (!tpuc_dtype_is_float(dt) || tpuc_dtype_is_complex(dt))
    return op_unimpl("non-float gradient");
  if (c->types[1].dtype != TPUC_DTYPE_F32 ||
      c->types[2].dtype != TPUC_DTYPE_F32 || !is_one_element(&c->types[1]) ||
      !is_one_element(&c->types[2]))
    return op_unimpl("found_inf and inv_scale must be one-element f32");
  tpuc_hlo_type shape = c->types[0];
  shape.dtype = op_accumulation_dtype(dt);
  tpuc_hlo_value g, inv, one, is_one, scaled, bad, fi, fi_one, fi_new;
  TRY(op_operand(c, 0, shape.dtype, &shape, &g));
  TRY(any_nonfinite(c, g, &bad));
  TRY(one_value(c, 2, shape.dtype, &shape, &inv));
  TRY(op_const(c, shape.dtype, 1.0, &shape, &one));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_EQ, inv, one, &is_one));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, g, inv, &scaled));
  TRY(tpuc_hlo_select(c->fn, is_one, g, scaled, &scaled));
  TRY(tpuc_hlo_convert(c->fn, scaled, dt, &c->outs[0]));
  tpuc_hlo_type ft = c->types[1];
  TRY(op_operand(c, 1, TPUC_DTYPE_F32, &ft, &fi));
  TRY(op_const(c, TPUC_DTYPE_F32, 1.0, &ft, &fi_one));
  if (ft.rank > 0)
    TRY(tpuc_hlo_broadcast_in_dim(c->fn, bad, ft.dims, ft.rank, NULL, &bad));
  TRY(tpuc_hlo_select(c->fn, bad, fi_one, fi, &fi_new));
  c->outs[1] = fi_new;
  c->nouts = 2;
  return NULL;
}

/* _amp_update_scale_(scale, growth_tracker, found_inf, growth_factor,
 * backoff_factor, growth_interval) -> scale, growth_tracker, both written
 * in place: after an overflow the scale backs off and the tracker resets;
 * after growth_interval clean steps in a row the scale grows (unless that
 * makes it infinite) and the tracker resets; otherwise the tracker counts.
 * The factors are applied in f32 (the CPU multiplies in f64 and rounds
 * once: the same for the default factors 2 and 0.5, powers of two). */
tpuc_status* op_lower_amp_update_scale(op_ctx* c, int param) {
  (void)param;
  for (int i = 0; i < 3; i++)
    if (!op_is_tensor(c, i)) return op_unimpl("unexpected arguments");
  const tpuc_hlo_type* st = &c->types[0];
  if (st->dtype != TPUC_DTYPE_F32 || c->types[1].dtype != TPUC_DTYPE_S32 ||
      c->types[2].dtype != TPUC_DTYPE_F32)
    return op_unimpl("dtypes");
  for (int i = 0; i < 3; i++)
    if (!is_one_element(&c->types[i]) || c->types[i].rank != st->rank)
      return op_unimpl("scale, growth_tracker and found_inf: one element, "
                       "the same rank");
  tpuc_hlo_type it = *st;
  it.dtype = TPUC_DTYPE_S32;
  tpuc_hlo_value s, gt, fi, zero_f, inf, grow, back, interval, one_i, zero_i;
  TRY(op_operand(c, 0, TPUC_DTYPE_F32, st, &s));
  TRY(op_operand(c, 1, TPUC_DTYPE_S32, &it, &gt));
  TRY(op_operand(c, 2, TPUC_DTYPE_F32, st, &fi));
  TRY(op_const(c, TPUC_DTYPE_F32, 0.0, st, &zero_f));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_NE, fi, zero_f, &inf));
  TRY(op_scalar(c, 3, TPUC_DTYPE_F32, st, &grow));
  TRY(op_scalar(c, 4, TPUC_DTYPE_F32, st, &back));
  TRY(op_scalar(c, 5, TPUC_DTYPE_S32, &it, &interval));
  TRY(op_const(c, TPUC_DTYPE_S32, 1.0, &it, &one_i));
  TRY(op_const(c, TPUC_DTYPE_S32, 0.0, &it, &zero_i));
  tpuc_hlo_value succ, now, grown, finite, keep, backed, s_out, t_clean, t_out;
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_ADD, gt, one_i, &succ));
  TRY(tpuc_hlo_compare(c->fn, TPUC_HLO_EQ, succ, interval, &now));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, s, grow, &grown));
  TRY(tpuc_hlo_unary(c->fn, TPUC_HLO_IS_FINITE, grown, &finite));
  TRY(tpuc_hlo_select(c->fn, finite, grown, s, &grown));
  TRY(tpuc_hlo_select(c->fn, now, grown, s, &keep));
  TRY(tpuc_hlo_binary(c->fn, TPUC_HLO_MUL, s, back, &backed));
  TRY(tpuc_hlo_select(c->fn, inf, backed, keep, &s_out));
  TRY(tpuc_hlo_select(c->fn, now, zero_i, succ, &t_clean));
  TRY(tpuc_hlo_select(c->fn, inf, zero_i, t_clean, &t_out));
  c->outs[0] = s_out;
  c->outs[1] = t_out;
  c->nouts = 2;
  return NULL;
}
