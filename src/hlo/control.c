/* StableHLO builder: control flow (while, case). */
#include <stdlib.h>
#include <string.h>

#include "hlo_internal.h"

#define HLO_MAX_CARRIED 256

tpuc_status* tpuc_hlo_while(tpuc_hlo_fn* fn, const tpuc_hlo_value* inits,
                            size_t n, tpuc_hlo_fn* cond, tpuc_hlo_fn* body,
                            tpuc_hlo_value* outs) {
  const char* name = "stablehlo.while";
  if (n > 0 && (outs == NULL || inits == NULL))
    return hlo_error(name, "inits or outs is NULL");
  if (n > HLO_MAX_CARRIED)
    return hlo_error(name, "too many loop values (%zu > %d)", n,
                     HLO_MAX_CARRIED);
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  tpuc_hlo_type types[HLO_MAX_CARRIED];
  for (size_t i = 0; i < n; ++i) {
    char what[48];
    snprintf(what, sizeof what, "operand %zu", i);
    TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, what, inits[i], &types[i]));
  }
  TPUC_RETURN_IF_ERROR(hlo_check_region(fn, name, "cond", cond));
  TPUC_RETURN_IF_ERROR(hlo_check_region(fn, name, "body", body));
  if (cond == body)
    return hlo_error(name, "cond and body must be distinct regions");
  const tpuc_hlo_fn* regions[2] = {cond, body};
  const char* names[2] = {"cond", "body"};
  for (int k = 0; k < 2; ++k) {
    const tpuc_hlo_fn* r = regions[k];
    if (r->num_args != n)
      return hlo_error(name, "%s region takes %zu arguments, expected %zu",
                       names[k], r->num_args, n);
    for (size_t i = 0; i < n; ++i)
      if (!tpuc_hlo_type_equal(hlo_region_arg_type(r, i), &types[i]))
        return hlo_error(name,
                         "%s region argument %zu type differs from operand %zu",
                         names[k], i, i);
  }
  if (cond->num_rets != 1 || hlo_region_ret_type(cond, 0)->rank != 0 ||
      hlo_region_ret_type(cond, 0)->dtype != TPUC_DTYPE_PRED)
    return hlo_error(name, "cond region must return one tensor<i1>");
  if (body->num_rets != n)
    return hlo_error(name, "body region returns %zu values, expected %zu",
                     body->num_rets, n);
  for (size_t i = 0; i < n; ++i)
    if (!tpuc_hlo_type_equal(hlo_region_ret_type(body, i), &types[i]))
      return hlo_error(name,
                       "body region result %zu type differs from "
                       "operand %zu",
                       i, i);
  tpuc_hlo_fn* rs[2] = {cond, body};
  return hlo_emit(fn, name, inits, n, types, n, NULL, rs, 2, outs);
}

tpuc_status* tpuc_hlo_case(tpuc_hlo_fn* fn, tpuc_hlo_value index,
                           tpuc_hlo_fn* const* branches, size_t num_branches,
                           tpuc_hlo_value* outs, size_t num_outs) {
  const char* name = "stablehlo.case";
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, name));
  if (num_branches == 0 || branches == NULL)
    return hlo_error(name, "needs at least one branch");
  if (num_outs > 0 && outs == NULL) return hlo_error(name, "outs is NULL");
  tpuc_hlo_type it;
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, name, "index", index, &it));
  if (it.rank != 0 || it.dtype != TPUC_DTYPE_S32)
    return hlo_error(name, "index must be tensor<i32>");
  for (size_t b = 0; b < num_branches; ++b) {
    char what[48];
    snprintf(what, sizeof what, "branch %zu", b);
    TPUC_RETURN_IF_ERROR(hlo_check_region(fn, name, what, branches[b]));
    for (size_t c = 0; c < b; ++c)
      if (branches[c] == branches[b])
        return hlo_error(name, "branch %zu repeats branch %zu", b, c);
    const tpuc_hlo_fn* r = branches[b];
    if (r->num_args != 0)
      return hlo_error(name, "%s takes arguments; branches take none", what);
    if (r->num_rets != num_outs)
      return hlo_error(name, "%s returns %zu values, expected %zu", what,
                       r->num_rets, num_outs);
    for (size_t i = 0; i < num_outs; ++i)
      if (!tpuc_hlo_type_equal(hlo_region_ret_type(r, i),
                               hlo_region_ret_type(branches[0], i)))
        return hlo_error(name, "%s result %zu type differs from branch 0", what,
                         i);
  }
  if (num_outs > HLO_MAX_CARRIED)
    return hlo_error(name, "too many results (%zu)", num_outs);
  tpuc_hlo_type types[HLO_MAX_CARRIED];
  for (size_t i = 0; i < num_outs; ++i)
    types[i] = *hlo_region_ret_type(branches[0], i);
  return hlo_emit(fn, name, &index, 1, types, num_outs, NULL, branches,
                  num_branches, outs);
}
