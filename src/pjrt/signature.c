/* Reads the signature of `func.func public @main(...) -> (...)` from MLIR
 * text: argument and result tensor types and tf.aliasing_output. The text
 * is the program tpuc compiles, so argument checks happen before the plugin
 * sees any buffer. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt/internal.h"

typedef struct {
  const char* p;
  const char* end;
} cursor;

static void skip_ws(cursor* c) {
  while (c->p < c->end && isspace((unsigned char)*c->p)) c->p++;
}

static int eat(cursor* c, const char* tok) {
  skip_ws(c);
  size_t n = strlen(tok);
  if ((size_t)(c->end - c->p) >= n && memcmp(c->p, tok, n) == 0) {
    c->p += n;
    return 1;
  }
  return 0;
}

/* Skips a balanced {...} group (attribute dictionary), strings included. */
static const char* skip_braces(cursor* c) {
  int depth = 0;
  const char* start = c->p;
  while (c->p < c->end) {
    char ch = *c->p++;
    if (ch == '"') {
      while (c->p < c->end && *c->p != '"') {
        if (*c->p == '\\') c->p++;
        c->p++;
      }
      c->p++;
    } else if (ch == '{') {
      depth++;
    } else if (ch == '}') {
      if (--depth == 0) return start;
    }
  }
  return NULL;
}

/* Parses tensor<AxBxT> (or tensor<T>). */
static int parse_tensor(cursor* c, tpuc_value_type* t) {
  if (!eat(c, "tensor<")) return 0;
  memset(t, 0, sizeof *t);
  for (;;) {
    const char* q = c->p;
    if (q < c->end && isdigit((unsigned char)*q)) {
      int64_t v = 0;
      while (q < c->end && isdigit((unsigned char)*q)) {
        if (v > (INT64_MAX - 9) / 10) return 0;
        v = v * 10 + (*q++ - '0');
      }
      if (q >= c->end || *q != 'x' || t->rank >= TPUC_MAX_RANK) return 0;
      t->dims[t->rank++] = v;
      c->p = q + 1;
      continue;
    }
    break;
  }
  /* Element type up to the matching '>'. */
  const char* s = c->p;
  int depth = 1;
  while (c->p < c->end && depth > 0) {
    if (*c->p == '<') depth++;
    if (*c->p == '>') depth--;
    if (depth > 0) c->p++;
  }
  if (c->p >= c->end) return 0;
  t->dtype = tpuc_dtype_from_mlir_name(s, (size_t)(c->p - s));
  c->p++; /* '>' */
  return t->dtype != TPUC_DTYPE_INVALID;
}

static int push(void** arr, size_t* n, size_t* cap, size_t elem) {
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 8;
    void* na = realloc(*arr, nc * elem);
    if (na == NULL) return 0;
    *arr = na;
    *cap = nc;
  }
  (*n)++;
  return 1;
}

static int parse_alias(const char* attrs, const char* end) {
  const char* key = "tf.aliasing_output";
  size_t kl = strlen(key);
  for (const char* p = attrs; p + kl < end; p++) {
    if (memcmp(p, key, kl) == 0) {
      p += kl;
      while (p < end && (isspace((unsigned char)*p) || *p == '=')) p++;
      int v = -1;
      while (p < end && isdigit((unsigned char)*p) && v < 100000000)
        v = (v < 0 ? 0 : v * 10) + (*p++ - '0');
      return v;
    }
  }
  return -1;
}

tpuc_status* tpuc_parse_main_signature(const char* text, size_t len,
                                       tpuc_value_type** inputs,
                                       size_t* num_inputs, int** input_alias,
                                       tpuc_value_type** outputs,
                                       size_t* num_outputs) {
  *inputs = *outputs = NULL;
  *input_alias = NULL;
  *num_inputs = *num_outputs = 0;
  const char* at = NULL;
  for (size_t i = 0; i + 6 <= len; i++) {
    if (memcmp(text + i, "@main(", 6) == 0) {
      at = text + i + 6;
      break;
    }
  }
  if (at == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "the program has no `func.func public @main(...)` "
                            "entry function");
  cursor c = {at, text + len};
  size_t cap_in = 0, cap_out = 0, cap_alias = 0, n_alias = 0;
  tpuc_status* bad = NULL;
  if (!eat(&c, ")")) {
    for (;;) {
      skip_ws(&c);
      if (!eat(&c, "%")) goto fail;
      while (c.p < c.end && (isalnum((unsigned char)*c.p) || *c.p == '_'))
        c.p++;
      if (!eat(&c, ":")) goto fail;
      if (!push((void**)inputs, num_inputs, &cap_in, sizeof **inputs) ||
          !push((void**)input_alias, &n_alias, &cap_alias, sizeof(int)))
        goto oom;
      if (!parse_tensor(&c, &(*inputs)[*num_inputs - 1])) goto fail;
      (*input_alias)[n_alias - 1] = -1;
      skip_ws(&c);
      if (c.p < c.end && *c.p == '{') {
        const char* s = skip_braces(&c);
        if (s == NULL) goto fail;
        (*input_alias)[n_alias - 1] = parse_alias(s, c.p);
      }
      if (eat(&c, ")")) break;
      if (!eat(&c, ",")) goto fail;
    }
  }
  if (eat(&c, "->")) {
    int paren = eat(&c, "(");
    if (!(paren && eat(&c, ")"))) {
      for (;;) {
        if (!push((void**)outputs, num_outputs, &cap_out, sizeof **outputs))
          goto oom;
        if (!parse_tensor(&c, &(*outputs)[*num_outputs - 1])) goto fail;
        skip_ws(&c);
        if (c.p < c.end && *c.p == '{' && skip_braces(&c) == NULL) goto fail;
        if (!paren) break;
        if (eat(&c, ")")) break;
        if (!eat(&c, ",")) goto fail;
      }
    }
  }
  for (size_t i = 0; i < *num_inputs; i++) {
    int a = (*input_alias)[i];
    if (a >= 0 && (size_t)a >= *num_outputs) {
      bad = tpuc_status_make(TPUC_INVALID_ARGUMENT,
                             "@main argument %zu aliases output %d, but there "
                             "are only %zu outputs",
                             i, a, *num_outputs);
      goto cleanup;
    }
  }
  return NULL;
fail : {
  /* The text need not be NUL-terminated: print at most what is left. */
  const char* at = c.p < c.end ? c.p : c.end;
  int shown = (int)(c.end - at < 40 ? c.end - at : 40);
  bad = tpuc_status_make(TPUC_INVALID_ARGUMENT,
                         "cannot read the signature of @main near \"%.*s\" "
                         "(tpuc supports static tensor types only)",
                         shown, at);
}
  goto cleanup;
oom:
  bad = tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
cleanup:
  free(*inputs);
  free(*outputs);
  free(*input_alias);
  *inputs = *outputs = NULL;
  *input_alias = NULL;
  *num_inputs = *num_outputs = 0;
  return bad;
}
