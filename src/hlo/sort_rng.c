/* StableHLO builder: sort (comparator region) and rng_bit_generator. */
#include <stdlib.h>
#include <string.h>

#include "hlo_internal.h"

#define HLO_MAX_SORT 64

tpuc_status* tpuc_hlo_sort(tpuc_hlo_fn* fn, const tpuc_hlo_value* inputs,
                           size_t n, int64_t dim, bool is_stable,
                           tpuc_hlo_fn* comparator, tpuc_hlo_value* outs) {
  const char* name = "stablehlo.sort";
  if (outs == NULL) return hlo_error(name, "outs is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  if (n == 0 || inputs == NULL)
    return hlo_error(name, "needs at least one input");
  if (n > HLO_MAX_SORT)
    return hlo_error(name, "too many inputs (%zu > %d)", n, HLO_MAX_SORT);
  tpuc_hlo_type types[HLO_MAX_SORT];
  tpuc_dtype dtypes[2 * HLO_MAX_SORT];
  for (size_t i = 0; i < n; ++i) {
    char what[48];
    snprintf(what, sizeof what, "input %zu", i);
    TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, what, inputs[i], &types[i]));
    if (!hlo_same_shape(&types[i], &types[0]))
      return hlo_error(name, "input %zu has a different shape than input 0", i);
    dtypes[2 * i] = dtypes[2 * i + 1] = types[i].dtype;
  }
  int rank = types[0].rank;
  if (rank == 0) return hlo_error(name, "inputs must have rank >= 1");
  if (dim < -rank || dim >= rank)
    return hlo_error(name, "dimension %lld out of range for rank %d",
                     (long long)dim, rank);
  if (dim < 0) dim += rank;
  TPUC_RETURN_IF_ERROR(hlo_check_region(fn, name, "comparator", comparator));
  tpuc_dtype pred = TPUC_DTYPE_PRED;
  TPUC_RETURN_IF_ERROR(hlo_check_scalar_region(name, "comparator", comparator,
                                               dtypes, 2 * n, &pred, 1));
  hlo_sb sb = {0};
  hlo_sb_printf(&sb, "dimension = %lld : i64, is_stable = %s", (long long)dim,
                is_stable ? "true" : "false");
  if (sb.oom) {
    hlo_sb_free(&sb);
    return hlo_oom(name);
  }
  return hlo_emit(fn, name, inputs, n, types, n, hlo_sb_take(&sb), &comparator,
                  1, outs);
}

tpuc_status* tpuc_hlo_rng_bit_generator(
    tpuc_hlo_fn* fn, tpuc_hlo_rng_algorithm algorithm, tpuc_hlo_value state,
    const tpuc_hlo_type* type, tpuc_hlo_value* new_state, tpuc_hlo_value* out) {
  const char* name = "stablehlo.rng_bit_generator";
  if (new_state == NULL || out == NULL)
    return hlo_error(name, "new_state or out is NULL");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  const char* alg;
  switch (algorithm) {
    case TPUC_HLO_RNG_DEFAULT:
      alg = "DEFAULT";
      break;
    case TPUC_HLO_RNG_THREE_FRY:
      alg = "THREE_FRY";
      break;
    case TPUC_HLO_RNG_PHILOX:
      alg = "PHILOX";
      break;
    default:
      return hlo_error(name, "unknown algorithm %d", (int)algorithm);
  }
  tpuc_hlo_type st;
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "initial_state", state, &st));
  bool ok = st.dtype == TPUC_DTYPE_U64 && st.rank == 1 &&
            (st.dims[0] == 2 ||
             (algorithm == TPUC_HLO_RNG_PHILOX && st.dims[0] == 3));
  if (!ok)
    return hlo_error(
        name, "initial_state must be tensor<2xui64>%s for %s",
        algorithm == TPUC_HLO_RNG_PHILOX ? " or tensor<3xui64>" : "", alg);
  TPUC_RETURN_IF_ERROR(hlo_check_type(name, "output", type));
  if (!hlo_is_int(type->dtype))
    return hlo_error(name, "output dtype %s is not an integer",
                     tpuc_dtype_mlir_name(type->dtype));
  hlo_sb sb = {0};
  hlo_sb_printf(&sb, "rng_algorithm = #stablehlo<rng_algorithm %s>", alg);
  if (sb.oom) {
    hlo_sb_free(&sb);
    return hlo_oom(name);
  }
  tpuc_hlo_type rt[2] = {st, *type};
  tpuc_hlo_value res[2];
  TPUC_RETURN_IF_ERROR(
      hlo_emit(fn, name, &state, 1, rt, 2, hlo_sb_take(&sb), NULL, 0, res));
  *new_state = res[0];
  *out = res[1];
  return NULL;
}
