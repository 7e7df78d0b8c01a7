/* StableHLO builder: the string builder and printing a module as MLIR text
 * (pretty module/func header, ops in generic form). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo_internal.h"

/* ---- string builder ---------------------------------------------------- */

static bool sb_reserve(hlo_sb* sb, size_t extra) {
  if (sb->oom) return false;
  size_t need = sb->len + extra + 1;
  if (need <= sb->cap) return true;
  size_t n = sb->cap ? sb->cap * 2 : 256;
  while (n < need) n *= 2;
  char* p = realloc(sb->data, n);
  if (p == NULL) {
    sb->oom = true;
    return false;
  }
  sb->data = p;
  sb->cap = n;
  return true;
}

void hlo_sb_append(hlo_sb* sb, const char* s, size_t n) {
  if (!sb_reserve(sb, n)) return;
  memcpy(sb->data + sb->len, s, n);
  sb->len += n;
  sb->data[sb->len] = '\0';
}

void hlo_sb_printf(hlo_sb* sb, const char* fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    sb->oom = true;
    return;
  }
  if ((size_t)n < sizeof small) {
    hlo_sb_append(sb, small, (size_t)n);
    return;
  }
  if (!sb_reserve(sb, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  sb->len += (size_t)n;
}

void hlo_sb_type(hlo_sb* sb, const tpuc_hlo_type* t) {
  hlo_sb_append(sb, "tensor<", 7);
  for (int i = 0; i < t->rank; ++i)
    hlo_sb_printf(sb, "%" PRId64 "x", t->dims[i]);
  const char* e = tpuc_dtype_mlir_name(t->dtype);
  hlo_sb_append(sb, e, strlen(e));
  hlo_sb_append(sb, ">", 1);
}

void hlo_sb_i64_list(hlo_sb* sb, const int64_t* v, size_t n) {
  hlo_sb_append(sb, "[", 1);
  for (size_t i = 0; i < n; ++i)
    hlo_sb_printf(sb, "%s%" PRId64, i ? ", " : "", v[i]);
  hlo_sb_append(sb, "]", 1);
}

static void attr_sep(hlo_sb* sb) {
  if (sb->len > 0) hlo_sb_append(sb, ", ", 2);
}

void hlo_sb_i64_array_attr(hlo_sb* sb, const char* name, const int64_t* v,
                           size_t n) {
  attr_sep(sb);
  hlo_sb_printf(sb, "%s = array<i64", name);
  for (size_t i = 0; i < n; ++i)
    hlo_sb_printf(sb, "%s%" PRId64, i ? ", " : ": ", v[i]);
  hlo_sb_append(sb, ">", 1);
}

void hlo_sb_padding_attr(hlo_sb* sb, const int64_t* pairs, size_t n) {
  attr_sep(sb);
  hlo_sb_append(sb, "padding = dense<", 16);
  if (n == 0) {
    hlo_sb_append(sb, "0> : tensor<0x2xi64>", 20);
    return;
  }
  hlo_sb_append(sb, "[", 1);
  for (size_t i = 0; i < n; ++i)
    hlo_sb_printf(sb, "%s[%" PRId64 ", %" PRId64 "]", i ? ", " : "",
                  pairs ? pairs[2 * i] : 0, pairs ? pairs[2 * i + 1] : 0);
  hlo_sb_printf(sb, "]> : tensor<%zux2xi64>", n);
}

char* hlo_sb_take(hlo_sb* sb) {
  char* p = sb->data;
  sb->data = NULL;
  sb->len = sb->cap = 0;
  return p;
}

void hlo_sb_free(hlo_sb* sb) {
  free(sb->data);
  sb->data = NULL;
  sb->len = sb->cap = 0;
}

const char* hlo_type_str(const tpuc_hlo_type* t, char* buf, size_t size) {
  size_t n = (size_t)snprintf(buf, size, "tensor<");
  for (int i = 0; i < t->rank && n < size; ++i)
    n += (size_t)snprintf(buf + n, size - n, "%" PRId64 "x", t->dims[i]);
  if (n < size)
    snprintf(buf + n, size - n, "%s>", tpuc_dtype_mlir_name(t->dtype));
  return buf;
}

/* ---- module printing --------------------------------------------------- */

static void print_value(hlo_sb* sb, const tpuc_hlo_module* m,
                        tpuc_hlo_value v) {
  int a = m->values[v].arg_index;
  if (a >= 0)
    hlo_sb_printf(sb, "%%arg%d", a);
  else
    hlo_sb_printf(sb, "%%%d", (int)v);
}

static void indent(hlo_sb* sb, int depth) {
  for (int i = 0; i < depth; ++i) hlo_sb_append(sb, "  ", 2);
}

static void print_type_of(hlo_sb* sb, const tpuc_hlo_module* m,
                          tpuc_hlo_value v) {
  hlo_sb_type(sb, &m->values[v].type);
}

static void print_body(hlo_sb* sb, const tpuc_hlo_fn* fn, int depth);

static void print_op(hlo_sb* sb, const tpuc_hlo_module* m, const hlo_op* o,
                     int depth) {
  indent(sb, depth);
  for (size_t i = 0; i < o->num_results; ++i) {
    if (i) hlo_sb_append(sb, ", ", 2);
    print_value(sb, m, o->first_result + (tpuc_hlo_value)i);
  }
  if (o->num_results) hlo_sb_append(sb, " = ", 3);
  hlo_sb_printf(sb, "\"%s\"(", o->name);
  for (size_t i = 0; i < o->num_operands; ++i) {
    if (i) hlo_sb_append(sb, ", ", 2);
    print_value(sb, m, o->operands[i]);
  }
  hlo_sb_append(sb, ")", 1);
  if (o->num_regions) {
    hlo_sb_append(sb, " (", 2);
    for (size_t i = 0; i < o->num_regions; ++i) {
      if (i) hlo_sb_append(sb, ", ", 2);
      hlo_sb_append(sb, "{\n", 2);
      print_body(sb, o->regions[i], depth + 1);
      indent(sb, depth);
      hlo_sb_append(sb, "}", 1);
    }
    hlo_sb_append(sb, ")", 1);
  }
  if (o->attrs && o->attrs[0]) hlo_sb_printf(sb, " {%s}", o->attrs);
  hlo_sb_append(sb, " : (", 4);
  for (size_t i = 0; i < o->num_operands; ++i) {
    if (i) hlo_sb_append(sb, ", ", 2);
    print_type_of(sb, m, o->operands[i]);
  }
  hlo_sb_append(sb, ") -> ", 5);
  if (o->num_results != 1) hlo_sb_append(sb, "(", 1);
  for (size_t i = 0; i < o->num_results; ++i) {
    if (i) hlo_sb_append(sb, ", ", 2);
    print_type_of(sb, m, o->first_result + (tpuc_hlo_value)i);
  }
  if (o->num_results != 1) hlo_sb_append(sb, ")", 1);
  hlo_sb_append(sb, "\n", 1);
}

static void print_return(hlo_sb* sb, const tpuc_hlo_fn* fn, int depth) {
  const tpuc_hlo_module* m = fn->module;
  indent(sb, depth);
  hlo_sb_printf(sb, "\"%s\"(",
                fn->is_main ? "func.return" : "stablehlo.return");
  for (size_t i = 0; i < fn->num_rets; ++i) {
    if (i) hlo_sb_append(sb, ", ", 2);
    print_value(sb, m, fn->rets[i]);
  }
  hlo_sb_append(sb, ") : (", 5);
  for (size_t i = 0; i < fn->num_rets; ++i) {
    if (i) hlo_sb_append(sb, ", ", 2);
    print_type_of(sb, m, fn->rets[i]);
  }
  hlo_sb_append(sb, ") -> ()\n", 8);
}

/* Region body: block label with typed arguments, ops, stablehlo.return. */
static void print_body(hlo_sb* sb, const tpuc_hlo_fn* fn, int depth) {
  const tpuc_hlo_module* m = fn->module;
  if (!fn->is_main && fn->num_args > 0) {
    indent(sb, depth - 1);
    hlo_sb_append(sb, "^bb0(", 5);
    for (size_t i = 0; i < fn->num_args; ++i) {
      if (i) hlo_sb_append(sb, ", ", 2);
      print_value(sb, m, fn->args[i]);
      hlo_sb_append(sb, ": ", 2);
      print_type_of(sb, m, fn->args[i]);
    }
    hlo_sb_append(sb, "):\n", 3);
  }
  for (size_t i = 0; i < fn->num_ops; ++i) print_op(sb, m, &fn->ops[i], depth);
  print_return(sb, fn, depth);
}

tpuc_status* tpuc_hlo_module_print(const tpuc_hlo_module* m, char** text,
                                   size_t* len) {
  const char* op = "tpuc_hlo_module_print";
  if (m == NULL || text == NULL) return hlo_error(op, "module or text is NULL");
  *text = NULL;
  if (len) *len = 0;
  const tpuc_hlo_fn* fn = m->main;
  if (fn == NULL) return hlo_error(op, "module has no @main (tpuc_hlo_main)");
  if (!fn->sealed)
    return hlo_error(op, "@main has no return (call tpuc_hlo_return)");
  for (size_t i = 0; i < fn->num_args; ++i) {
    int k = fn->arg_alias[i];
    if (k < 0) continue;
    if ((size_t)k >= fn->num_rets)
      return hlo_error(op, "argument %zu aliases output %d but @main has %zu",
                       i, k, fn->num_rets);
    if (!tpuc_hlo_type_equal(&m->values[fn->args[i]].type,
                             &m->values[fn->rets[k]].type))
      return hlo_error(op, "argument %zu aliases output %d of another type", i,
                       k);
  }
  hlo_sb sb = {0};
  hlo_sb_printf(&sb, "module @%s {\n  func.func public @main(", m->name);
  for (size_t i = 0; i < fn->num_args; ++i) {
    if (i) hlo_sb_append(&sb, ", ", 2);
    print_value(&sb, m, fn->args[i]);
    hlo_sb_append(&sb, ": ", 2);
    print_type_of(&sb, m, fn->args[i]);
    if (fn->arg_alias[i] >= 0)
      hlo_sb_printf(&sb, " {tf.aliasing_output = %d : i32}", fn->arg_alias[i]);
  }
  hlo_sb_append(&sb, ") -> (", 6);
  for (size_t i = 0; i < fn->num_rets; ++i) {
    if (i) hlo_sb_append(&sb, ", ", 2);
    print_type_of(&sb, m, fn->rets[i]);
  }
  hlo_sb_append(&sb, ") {\n", 4);
  print_body(&sb, fn, 2);
  hlo_sb_append(&sb, "  }\n}\n", 6);
  if (sb.oom) {
    hlo_sb_free(&sb);
    return hlo_oom(op);
  }
  if (len) *len = sb.len;
  *text = hlo_sb_take(&sb);
  return NULL;
}
