/* StableHLO builder: modules, bodies (@main and regions), values, and the
 * op emission shared by every emitter. */
#include <stdlib.h>
#include <string.h>

#include "hlo_internal.h"

/* ---- types ------------------------------------------------------------- */

tpuc_hlo_type tpuc_hlo_type_make(tpuc_dtype dtype, const int64_t* dims,
                                 int rank) {
  tpuc_hlo_type t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  if (rank < 0 || rank > TPUC_MAX_RANK || (rank > 0 && dims == NULL)) {
    t.rank = -1;
    return t;
  }
  t.rank = rank;
  for (int i = 0; i < rank; ++i) t.dims[i] = dims[i];
  return t;
}

tpuc_hlo_type tpuc_hlo_type_scalar(tpuc_dtype dtype) {
  return tpuc_hlo_type_make(dtype, NULL, 0);
}

int64_t tpuc_hlo_type_num_elements(const tpuc_hlo_type* type) {
  if (type == NULL || type->rank < 0 || type->rank > TPUC_MAX_RANK) return -1;
  return hlo_num_elements(type->dims, type->rank);
}

bool tpuc_hlo_type_equal(const tpuc_hlo_type* a, const tpuc_hlo_type* b) {
  return a->dtype == b->dtype && hlo_same_shape(a, b);
}

bool hlo_same_shape(const tpuc_hlo_type* a, const tpuc_hlo_type* b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; ++i)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

int64_t hlo_num_elements(const int64_t* dims, int rank) {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] < 0) return -1;
    if (dims[i] != 0 && n > INT64_MAX / dims[i]) return -1;
    n *= dims[i];
  }
  return n;
}

int hlo_dtype_bits(tpuc_dtype dtype) {
  if (dtype == TPUC_DTYPE_PRED) return 1;
  return (int)tpuc_dtype_size(dtype) * 8;
}

bool hlo_is_int(tpuc_dtype dtype) {
  return tpuc_dtype_is_signed_int(dtype) || tpuc_dtype_is_unsigned_int(dtype);
}

/* ---- errors ------------------------------------------------------------ */

tpuc_status* hlo_error(const char* op, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return tpuc_status_make(TPUC_INVALID_ARGUMENT, "%s: %s", op, msg);
}

tpuc_status* hlo_oom(const char* op) {
  return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "%s: out of memory", op);
}

/* ---- checks ------------------------------------------------------------ */

tpuc_status* hlo_check_type(const char* op, const char* what,
                            const tpuc_hlo_type* type) {
  if (type == NULL) return hlo_error(op, "%s type is NULL", what);
  if (!tpuc_dtype_is_valid(type->dtype))
    return hlo_error(op, "%s has invalid dtype %d", what, (int)type->dtype);
  if (type->rank < 0 || type->rank > TPUC_MAX_RANK)
    return hlo_error(op, "%s has rank %d outside [0, %d]", what, type->rank,
                     TPUC_MAX_RANK);
  for (int i = 0; i < type->rank; ++i)
    if (type->dims[i] < 0)
      return hlo_error(op, "%s has negative dim %d (%lld)", what, i,
                       (long long)type->dims[i]);
  if (hlo_num_elements(type->dims, type->rank) < 0)
    return hlo_error(op, "%s has too many elements", what);
  return NULL;
}

tpuc_status* hlo_check_fn(const tpuc_hlo_fn* fn, const char* op) {
  if (fn == NULL) return hlo_error(op, "body is NULL");
  if (fn->sealed)
    return hlo_error(op, "body already returned; no ops can follow");
  return NULL;
}

tpuc_status* hlo_operand(const tpuc_hlo_fn* fn, const char* op,
                         const char* what, tpuc_hlo_value v,
                         tpuc_hlo_type* type) {
  if (fn == NULL) return hlo_error(op, "body is NULL");
  const tpuc_hlo_module* m = fn->module;
  if (v < 0 || (size_t)v >= m->num_values)
    return hlo_error(op, "%s is not a value of this module (id %d)", what,
                     (int)v);
  const hlo_value_rec* r = &m->values[v];
  if (r->body != fn)
    return hlo_error(op,
                     "%s (%%%d) belongs to another body; values are scoped to "
                     "the body that defines them",
                     what, (int)v);
  if (type) *type = r->type;
  return NULL;
}

tpuc_status* hlo_check_region(const tpuc_hlo_fn* fn, const char* op,
                              const char* what, const tpuc_hlo_fn* region) {
  if (region == NULL) return hlo_error(op, "%s region is NULL", what);
  if (region->module != fn->module)
    return hlo_error(op, "%s region belongs to another module", what);
  if (region->is_main) return hlo_error(op, "%s region is @main", what);
  if (region->attached)
    return hlo_error(op, "%s region is already attached to an op", what);
  if (!region->sealed)
    return hlo_error(op, "%s region has no return (call tpuc_hlo_return)",
                     what);
  for (const tpuc_hlo_fn* p = fn; p != NULL; p = p->parent)
    if (p == region)
      return hlo_error(op, "%s region cannot be attached inside itself", what);
  return NULL;
}

const tpuc_hlo_type* hlo_region_arg_type(const tpuc_hlo_fn* region, size_t i) {
  return &region->module->values[region->args[i]].type;
}

const tpuc_hlo_type* hlo_region_ret_type(const tpuc_hlo_fn* region, size_t i) {
  return &region->module->values[region->rets[i]].type;
}

tpuc_status* hlo_check_scalar_region(const char* op, const char* what,
                                     const tpuc_hlo_fn* region,
                                     const tpuc_dtype* arg_dtypes,
                                     size_t num_args,
                                     const tpuc_dtype* ret_dtypes,
                                     size_t num_rets) {
  if (region->num_args != num_args)
    return hlo_error(op, "%s region takes %zu arguments, expected %zu", what,
                     region->num_args, num_args);
  for (size_t i = 0; i < num_args; ++i) {
    const tpuc_hlo_type* t = hlo_region_arg_type(region, i);
    if (t->rank != 0 || t->dtype != arg_dtypes[i])
      return hlo_error(op, "%s region argument %zu must be tensor<%s>", what, i,
                       tpuc_dtype_mlir_name(arg_dtypes[i]));
  }
  if (region->num_rets != num_rets)
    return hlo_error(op, "%s region returns %zu values, expected %zu", what,
                     region->num_rets, num_rets);
  for (size_t i = 0; i < num_rets; ++i) {
    const tpuc_hlo_type* t = hlo_region_ret_type(region, i);
    if (t->rank != 0 || t->dtype != ret_dtypes[i])
      return hlo_error(op, "%s region result %zu must be tensor<%s>", what, i,
                       tpuc_dtype_mlir_name(ret_dtypes[i]));
  }
  return NULL;
}

tpuc_status* hlo_check_dim(const char* op, const char* what, int64_t dim,
                           int rank) {
  if (dim < 0 || dim >= rank)
    return hlo_error(op, "%s %lld out of range for rank %d", what,
                     (long long)dim, rank);
  return NULL;
}

tpuc_status* hlo_check_dims(const char* op, const char* what,
                            const int64_t* dims, size_t n, int rank,
                            bool sorted, char* seen) {
  char local[TPUC_MAX_RANK] = {0};
  if (seen == NULL) seen = local;
  if (n > 0 && dims == NULL) return hlo_error(op, "%s is NULL", what);
  if (n > (size_t)rank)
    return hlo_error(op, "%s has %zu entries, more than rank %d", what, n,
                     rank);
  for (size_t i = 0; i < n; ++i) {
    TPUC_RETURN_IF_ERROR(hlo_check_dim(op, what, dims[i], rank));
    if (seen[dims[i]])
      return hlo_error(op, "%s repeats dim %lld", what, (long long)dims[i]);
    if (sorted && i > 0 && dims[i] < dims[i - 1])
      return hlo_error(op, "%s must be sorted", what);
    seen[dims[i]] = 1;
  }
  return NULL;
}

/* ---- module and bodies ------------------------------------------------- */

static bool valid_identifier(const char* s) {
  if (s[0] == '\0') return false;
  for (const char* p = s; *p; ++p) {
    char c = *p;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              c == '.' || c == '$' || (p != s && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

tpuc_status* tpuc_hlo_module_create(const char* name, tpuc_hlo_module** out) {
  const char* op = "tpuc_hlo_module_create";
  if (out == NULL) return hlo_error(op, "out is NULL");
  *out = NULL;
  if (name == NULL) name = "tpuc";
  if (!valid_identifier(name))
    return hlo_error(op, "module name '%s' is not an identifier", name);
  tpuc_hlo_module* m = calloc(1, sizeof *m);
  if (m == NULL) return hlo_oom(op);
  m->name = malloc(strlen(name) + 1);
  if (m->name == NULL) {
    free(m);
    return hlo_oom(op);
  }
  strcpy(m->name, name);
  *out = m;
  return NULL;
}

static void free_fn(tpuc_hlo_fn* fn) {
  for (size_t i = 0; i < fn->num_ops; ++i) {
    free(fn->ops[i].operands);
    free(fn->ops[i].attrs);
    free(fn->ops[i].regions);
  }
  free(fn->ops);
  free(fn->args);
  free(fn->arg_alias);
  free(fn->rets);
  free(fn);
}

void tpuc_hlo_module_destroy(tpuc_hlo_module* module) {
  if (module == NULL) return;
  for (size_t i = 0; i < module->num_fns; ++i) free_fn(module->fns[i]);
  free(module->fns);
  free(module->values);
  free(module->name);
  free(module);
}

static bool grow(void** p, size_t* cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t n = *cap ? *cap * 2 : 8;
  while (n < need) n *= 2;
  void* q = realloc(*p, n * elem);
  if (q == NULL) return false;
  *p = q;
  *cap = n;
  return true;
}

static tpuc_status* new_fn(tpuc_hlo_module* m, const char* op,
                           tpuc_hlo_fn** out) {
  if (!grow((void**)&m->fns, &m->cap_fns, m->num_fns + 1, sizeof *m->fns))
    return hlo_oom(op);
  tpuc_hlo_fn* fn = calloc(1, sizeof *fn);
  if (fn == NULL) return hlo_oom(op);
  fn->module = m;
  m->fns[m->num_fns++] = fn;
  *out = fn;
  return NULL;
}

/* Reserves `n` new value ids in `fn`; returns the first. */
static tpuc_status* new_values(tpuc_hlo_fn* fn, const char* op,
                               const tpuc_hlo_type* types, size_t n,
                               tpuc_hlo_value* first) {
  tpuc_hlo_module* m = fn->module;
  if (m->num_values + n > (size_t)INT32_MAX)
    return hlo_error(op, "too many values in module");
  if (!grow((void**)&m->values, &m->cap_values, m->num_values + n,
            sizeof *m->values))
    return hlo_oom(op);
  *first = (tpuc_hlo_value)m->num_values;
  for (size_t i = 0; i < n; ++i) {
    hlo_value_rec* r = &m->values[m->num_values + i];
    r->body = fn;
    r->type = types[i];
    r->arg_index = -1;
  }
  m->num_values += n;
  return NULL;
}

tpuc_status* tpuc_hlo_main(tpuc_hlo_module* module, tpuc_hlo_fn** out) {
  const char* op = "tpuc_hlo_main";
  if (module == NULL || out == NULL)
    return hlo_error(op, "module or out is NULL");
  if (module->main == NULL) {
    TPUC_RETURN_IF_ERROR(new_fn(module, op, &module->main));
    module->main->is_main = true;
  }
  *out = module->main;
  return NULL;
}

static tpuc_status* add_arg(tpuc_hlo_fn* fn, const char* op,
                            const tpuc_hlo_type* type, tpuc_hlo_value* out) {
  if (!grow((void**)&fn->args, &fn->cap_args, fn->num_args + 1,
            sizeof *fn->args))
    return hlo_oom(op);
  if (fn->is_main) {
    size_t cap = fn->cap_args;
    int* a = realloc(fn->arg_alias, cap * sizeof *a);
    if (a == NULL) return hlo_oom(op);
    fn->arg_alias = a;
  }
  tpuc_hlo_value v;
  TPUC_RETURN_IF_ERROR(new_values(fn, op, type, 1, &v));
  if (fn->is_main) {
    fn->module->values[v].arg_index = (int)fn->num_args;
    fn->arg_alias[fn->num_args] = -1;
  }
  fn->args[fn->num_args++] = v;
  if (out) *out = v;
  return NULL;
}

tpuc_status* tpuc_hlo_arg(tpuc_hlo_fn* fn, const tpuc_hlo_type* type,
                          tpuc_hlo_value* out) {
  const char* op = "tpuc_hlo_arg";
  if (fn == NULL || out == NULL) return hlo_error(op, "fn or out is NULL");
  if (!fn->is_main)
    return hlo_error(op,
                     "arguments can only be added to @main (region arguments "
                     "are fixed at tpuc_hlo_region_create)");
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, op));
  TPUC_RETURN_IF_ERROR(hlo_check_type(op, "argument", type));
  return add_arg(fn, op, type, out);
}

tpuc_status* tpuc_hlo_arg_alias(tpuc_hlo_fn* fn, tpuc_hlo_value arg,
                                int output_index) {
  const char* op = "tpuc_hlo_arg_alias";
  if (fn == NULL || !fn->is_main)
    return hlo_error(op, "aliasing applies to @main arguments only");
  TPUC_RETURN_IF_ERROR(hlo_operand(fn, op, "argument", arg, NULL));
  int idx = fn->module->values[arg].arg_index;
  if (idx < 0) return hlo_error(op, "value %%%d is not an argument", arg);
  if (output_index < -1)
    return hlo_error(op, "output index %d is negative", output_index);
  if (output_index >= 0) {
    for (size_t i = 0; i < fn->num_args; ++i)
      if ((int)i != idx && fn->arg_alias[i] == output_index)
        return hlo_error(op, "output %d is already aliased to argument %zu",
                         output_index, i);
  }
  fn->arg_alias[idx] = output_index;
  return NULL;
}

tpuc_status* tpuc_hlo_region_create(tpuc_hlo_module* module,
                                    const tpuc_hlo_type* arg_types, size_t n,
                                    tpuc_hlo_fn** out) {
  const char* op = "tpuc_hlo_region_create";
  if (module == NULL || out == NULL)
    return hlo_error(op, "module or out is NULL");
  *out = NULL;
  if (n > 0 && arg_types == NULL) return hlo_error(op, "arg_types is NULL");
  for (size_t i = 0; i < n; ++i) {
    char what[48];
    snprintf(what, sizeof what, "argument %zu", i);
    TPUC_RETURN_IF_ERROR(hlo_check_type(op, what, &arg_types[i]));
  }
  tpuc_hlo_fn* fn;
  TPUC_RETURN_IF_ERROR(new_fn(module, op, &fn));
  for (size_t i = 0; i < n; ++i)
    TPUC_RETURN_IF_ERROR(add_arg(fn, op, &arg_types[i], NULL));
  *out = fn;
  return NULL;
}

size_t tpuc_hlo_num_args(const tpuc_hlo_fn* fn) {
  return fn ? fn->num_args : 0;
}

tpuc_status* tpuc_hlo_get_arg(const tpuc_hlo_fn* fn, size_t i,
                              tpuc_hlo_value* out) {
  const char* op = "tpuc_hlo_get_arg";
  if (fn == NULL || out == NULL) return hlo_error(op, "fn or out is NULL");
  if (i >= fn->num_args)
    return hlo_error(op, "argument %zu out of range (body has %zu)", i,
                     fn->num_args);
  *out = fn->args[i];
  return NULL;
}

tpuc_status* tpuc_hlo_return(tpuc_hlo_fn* fn, const tpuc_hlo_value* values,
                             size_t n) {
  const char* op = fn && fn->is_main ? "func.return" : "stablehlo.return";
  TPUC_RETURN_IF_ERROR(hlo_check_fn(fn, op));
  if (n > 0 && values == NULL) return hlo_error(op, "values is NULL");
  for (size_t i = 0; i < n; ++i) {
    char what[48];
    snprintf(what, sizeof what, "result %zu", i);
    TPUC_RETURN_IF_ERROR(hlo_operand(fn, op, what, values[i], NULL));
  }
  tpuc_hlo_value* r = malloc((n ? n : 1) * sizeof *r);
  if (r == NULL) return hlo_oom(op);
  if (n) memcpy(r, values, n * sizeof *r);
  fn->rets = r;
  fn->num_rets = n;
  fn->sealed = true;
  return NULL;
}

tpuc_status* tpuc_hlo_value_type(const tpuc_hlo_fn* fn, tpuc_hlo_value value,
                                 tpuc_hlo_type* out) {
  if (out == NULL) return hlo_error("tpuc_hlo_value_type", "out is NULL");
  return hlo_operand(fn, "tpuc_hlo_value_type", "value", value, out);
}

/* ---- emission ---------------------------------------------------------- */

tpuc_status* hlo_emit(tpuc_hlo_fn* fn, const char* op,
                      const tpuc_hlo_value* operands, size_t num_operands,
                      const tpuc_hlo_type* result_types, size_t num_results,
                      char* attrs, tpuc_hlo_fn* const* regions,
                      size_t num_regions, tpuc_hlo_value* results) {
  tpuc_status* st = hlo_check_fn(fn, op);
  if (st) goto fail;
  if (!grow((void**)&fn->ops, &fn->cap_ops, fn->num_ops + 1, sizeof *fn->ops)) {
    st = hlo_oom(op);
    goto fail;
  }
  hlo_op o;
  memset(&o, 0, sizeof o);
  o.name = op;
  o.num_operands = num_operands;
  o.num_regions = num_regions;
  o.operands = malloc((num_operands ? num_operands : 1) * sizeof *o.operands);
  o.regions = malloc((num_regions ? num_regions : 1) * sizeof *o.regions);
  if (o.operands == NULL || o.regions == NULL) {
    free(o.operands);
    free(o.regions);
    st = hlo_oom(op);
    goto fail;
  }
  if (num_operands)
    memcpy(o.operands, operands, num_operands * sizeof(int32_t));
  for (size_t i = 0; i < num_regions; ++i) o.regions[i] = regions[i];
  st = new_values(fn, op, result_types, num_results, &o.first_result);
  if (st) {
    free(o.operands);
    free(o.regions);
    goto fail;
  }
  o.num_results = num_results;
  o.attrs = attrs;
  fn->ops[fn->num_ops++] = o;
  for (size_t i = 0; i < num_regions; ++i) {
    regions[i]->attached = true;
    regions[i]->parent = fn;
  }
  for (size_t i = 0; i < num_results; ++i)
    results[i] = o.first_result + (tpuc_hlo_value)i;
  return NULL;
fail:
  free(attrs);
  return st;
}

tpuc_status* hlo_emit1(tpuc_hlo_fn* fn, const char* op,
                       const tpuc_hlo_value* operands, size_t num_operands,
                       const tpuc_hlo_type* result_type, hlo_sb* attrs,
                       tpuc_hlo_value* out) {
  char* a = NULL;
  if (attrs != NULL) {
    if (attrs->oom) {
      hlo_sb_free(attrs);
      return hlo_oom(op);
    }
    a = hlo_sb_take(attrs);
  }
  return hlo_emit(fn, op, operands, num_operands, result_type, 1, a, NULL, 0,
                  out);
}
