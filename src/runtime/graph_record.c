/* Compiled graphs' records in the compile cache's disk tier (tpuc/graph.h):
 * a new process replays a graph it has seen before without capturing it.
 *
 * A record is the graph's recipe, little-endian u64 fields in order:
 *   "TPUCGR01" | nops nin nparams nres nout nnew nupd ncand nchecks
 *   check_any rng_draws | inputs | params | outputs | new storages |
 *   updates | donation candidates | checks | text | extra
 * A constant of the capture (a scalar argument, a tensor the graph made
 * from host data) is kept as its dtype, dims and bytes, up to
 * RECORD_MAX_CONST_BYTES in all, and uploaded again at the load.
 * Its cache key is the caller's key, the device and the inputs' signature
 * (sig_append: what tpuc_graph_matches compares), so a record is found only
 * for inputs its graph takes; the loaded graph is matched again anyway. A
 * record that does not parse is ignored (the graph is captured again and
 * the record rewritten). */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "hlo/hlo_internal.h"
#include "runtime/graph_internal.h"
#include "tpuc/lazy.h"

#define RECORD_MAGIC "TPUCGR01"
#define RECORD_KEY_MAGIC "tpuc graph record 1\n"
#define RECORD_MAX_CONST_BYTES ((size_t)16 << 20)

/* ------------------------------- writing -------------------------------- */

static void put_u64(hlo_sb* b, uint64_t v) {
  hlo_sb_append(b, (const char*)&v, sizeof v);
}

static void put_i64(hlo_sb* b, int64_t v) { put_u64(b, (uint64_t)v); }

static void put_bytes(hlo_sb* b, const void* p, size_t n) {
  put_u64(b, n);
  if (n > 0) hlo_sb_append(b, p, n);
}

static void put_dims(hlo_sb* b, int rank, const int64_t* sizes,
                     const int64_t* strides) {
  put_i64(b, rank);
  for (int d = 0; d < rank; d++) put_i64(b, sizes[d]);
  for (int d = 0; d < rank; d++) put_i64(b, strides[d]);
}

/* The part of a record's key that its inputs make: one g_input each. */
static void sig_append(hlo_sb* b, int device, const g_input* in, size_t nin) {
  put_i64(b, device);
  put_u64(b, nin);
  for (size_t i = 0; i < nin; i++) {
    const g_input* gi = &in[i];
    put_i64(b, gi->dtype);
    put_dims(b, gi->rank, gi->sizes, gi->strides);
    put_i64(b, gi->offset);
    put_u64(b, gi->nbytes);
    put_i64(b, gi->alias_of);
    put_i64(b, gi->alias_of < 0 ? (int64_t)gi->value_dtype : -1);
  }
}

static void key_begin(hlo_sb* b, const char* key, size_t key_len) {
  hlo_sb_append(b, RECORD_KEY_MAGIC, sizeof RECORD_KEY_MAGIC - 1);
  put_bytes(b, key, key_len);
}

/* A constant: dtype, dims, bytes. */
static tpuc_status* put_const(hlo_sb* b, tpuc_buffer* c) {
  size_t n = tpuc_buffer_byte_size(c);
  char* host = malloc(n ? n : 1);
  if (host == NULL)
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  tpuc_status* st = tpuc_value_to_host(c, host, n);
  if (st == NULL) {
    int rank = tpuc_buffer_rank(c);
    put_i64(b, tpuc_buffer_dtype(c));
    put_i64(b, rank);
    for (int d = 0; d < rank; d++) put_i64(b, tpuc_buffer_dims(c)[d]);
    put_bytes(b, host, n);
  }
  free(host);
  return st;
}

static tpuc_status* put_val(hlo_sb* b, const g_val* v) {
  put_i64(b, v->kind);
  put_u64(b, v->index);
  return v->kind == GV_CONST ? put_const(b, v->buf) : NULL;
}

tpuc_status* tpuc_graph_save(const tpuc_graph* g, const char* key,
                             size_t key_len, const void* extra,
                             size_t extra_len, bool* saved) {
  if (g == NULL || saved == NULL || (key_len > 0 && key == NULL) ||
      (extra_len > 0 && extra == NULL))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "NULL argument to tpuc_graph_save");
  *saved = false;
  size_t const_bytes = 0;
  for (size_t p = 0; p < g->nparams; p++)
    if (g->params[p].kind == GP_CONST)
      const_bytes += tpuc_buffer_byte_size(g->params[p].buf);
  for (size_t j = 0; j < g->nnew; j++)
    if (g->new_val[j].kind == GV_CONST)
      const_bytes += tpuc_buffer_byte_size(g->new_val[j].buf);
  for (size_t u = 0; u < g->nupd; u++)
    if (g->upd_val[u].kind == GV_CONST)
      const_bytes += tpuc_buffer_byte_size(g->upd_val[u].buf);
  if (const_bytes > RECORD_MAX_CONST_BYTES) return NULL;
  if (tpuc_cache_dir(g->client)[0] == '\0') return NULL;

  hlo_sb r = {0};
  hlo_sb_append(&r, RECORD_MAGIC, 8);
  put_u64(&r, g->nops);
  put_u64(&r, g->nin);
  put_u64(&r, g->nparams);
  put_u64(&r, g->nres);
  put_u64(&r, g->nout);
  put_u64(&r, g->nnew);
  put_u64(&r, g->nupd);
  put_u64(&r, g->ncand);
  put_u64(&r, g->nchecks);
  put_i64(&r, g->check_any);
  put_u64(&r, g->rng_draws);
  for (size_t i = 0; i < g->nin; i++) {
    const g_input* gi = &g->in[i];
    put_i64(&r, gi->dtype);
    put_dims(&r, gi->rank, gi->sizes, gi->strides);
    put_i64(&r, gi->offset);
    put_u64(&r, gi->nbytes);
    put_i64(&r, gi->value_dtype);
    put_i64(&r, gi->alias_of);
  }
  tpuc_status* st = NULL;
  for (size_t p = 0; st == NULL && p < g->nparams; p++) {
    put_i64(&r, g->params[p].kind);
    put_u64(&r, g->params[p].input);
    put_u64(&r, g->params[p].delta);
    if (g->params[p].kind == GP_CONST) st = put_const(&r, g->params[p].buf);
  }
  for (size_t k = 0; k < g->nout; k++) {
    const tpuc_graph_output* o = &g->outs[k];
    put_i64(&r, o->input);
    put_i64(&r, o->storage);
    put_i64(&r, o->dtype);
    put_dims(&r, o->rank, o->sizes, o->strides);
    put_i64(&r, o->offset);
  }
  for (size_t j = 0; st == NULL && j < g->nnew; j++) {
    put_u64(&r, g->new_nbytes[j]);
    st = put_val(&r, &g->new_val[j]);
  }
  for (size_t u = 0; st == NULL && u < g->nupd; u++) {
    put_u64(&r, g->upd_input[u]);
    st = put_val(&r, &g->upd_val[u]);
  }
  for (size_t c = 0; c < g->ncand; c++) {
    put_u64(&r, g->cand[c].param);
    put_u64(&r, g->cand[c].result);
  }
  for (size_t k = 0; k < g->nchecks; k++) {
    const char* msg = g->check_msg[k] != NULL ? g->check_msg[k] : "";
    put_u64(&r, g->check_res[k]);
    put_i64(&r, g->check_code[k]);
    put_bytes(&r, msg, strlen(msg));
  }
  put_bytes(&r, g->text, g->len);
  put_bytes(&r, extra, extra_len);

  hlo_sb k = {0};
  key_begin(&k, key, key_len);
  sig_append(&k, g->device, g->in, g->nin);
  if (st == NULL && (r.oom || k.oom))
    st = tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  if (st == NULL)
    st = tpuc_cache_record_put(g->client, k.data, k.len, r.data, r.len, saved);
  if (st == NULL && *saved) graph_count_record(false);
  hlo_sb_free(&r);
  hlo_sb_free(&k);
  return st;
}

/* ------------------------------- reading -------------------------------- */

typedef struct {
  const char* p;
  size_t left;
  bool bad;
} reader;

static uint64_t get_u64(reader* r) {
  uint64_t v = 0;
  if (r->bad || r->left < sizeof v) {
    r->bad = true;
    return 0;
  }
  memcpy(&v, r->p, sizeof v);
  r->p += sizeof v;
  r->left -= sizeof v;
  return v;
}

static int64_t get_i64(reader* r) { return (int64_t)get_u64(r); }

static tpuc_dtype get_dtype(reader* r) {
  int64_t d = get_i64(r);
  if (d < 0 || d >= TPUC_DTYPE_COUNT_) r->bad = true;
  return r->bad ? (tpuc_dtype)0 : (tpuc_dtype)d;
}

/* A count of items of at least `min_bytes` each that the rest can hold. */
static size_t get_count(reader* r, size_t min_bytes) {
  uint64_t n = get_u64(r);
  if (min_bytes > 0 && n > r->left / min_bytes) r->bad = true;
  return r->bad ? 0 : (size_t)n;
}

static const char* get_bytes(reader* r, size_t* n) {
  *n = get_count(r, 1);
  if (r->bad) return NULL;
  const char* at = r->p;
  r->p += *n;
  r->left -= *n;
  return at;
}

static void get_dims(reader* r, int* rank, int64_t* sizes, int64_t* strides) {
  int64_t k = get_i64(r);
  if (k < 0 || k > TPUC_MAX_RANK) {
    r->bad = true;
    return;
  }
  *rank = (int)k;
  for (int d = 0; d < *rank; d++) sizes[d] = get_i64(r);
  for (int d = 0; d < *rank; d++) strides[d] = get_i64(r);
}

/* A constant, uploaded to `device`; NULL when the record is bad (or, with
 * *st, when the upload failed). */
static tpuc_buffer* get_const(reader* r, tpuc_client* client, int device,
                              tpuc_status** st) {
  tpuc_dtype dtype = get_dtype(r);
  int64_t rank = get_i64(r);
  int64_t dims[TPUC_MAX_RANK] = {0};
  if (rank < 0 || rank > TPUC_MAX_RANK) r->bad = true;
  int64_t count = 1;
  for (int64_t d = 0; !r->bad && d < rank; d++) {
    dims[d] = get_i64(r);
    if (dims[d] < 0 || (dims[d] > 0 && count > INT64_MAX / dims[d]))
      r->bad = true;
    else
      count *= dims[d];
  }
  size_t n = 0;
  const char* data = get_bytes(r, &n);
  if (r->bad || n != (size_t)count * tpuc_dtype_size(dtype)) {
    r->bad = true;
    return NULL;
  }
  tpuc_buffer* b = NULL;
  *st = tpuc_buffer_from_host(client, device, dtype, dims, (int)rank, data,
                              NULL, &b);
  return b;
}

static tpuc_status* get_val(reader* r, g_val* v, size_t nres, size_t nin,
                            tpuc_client* client, int device) {
  int64_t kind = get_i64(r);
  v->index = get_u64(r);
  tpuc_status* st = NULL;
  if (kind == GV_RESULT)
    r->bad |= v->index >= nres;
  else if (kind == GV_INPUT)
    r->bad |= v->index >= nin;
  else if (kind == GV_CONST)
    v->buf = get_const(r, client, device, &st);
  else
    r->bad = true;
  v->kind = (gv_kind)kind;
  return st;
}

/* The graph in record `data`, or NULL when it does not parse (or *st, when
 * a constant's upload failed). */
static tpuc_graph* parse(const char* data, size_t len, tpuc_client* client,
                         int device, const char** extra, size_t* extra_len,
                         bool* oom, tpuc_status** st) {
  reader r = {data, len, false};
  if (len < 8 || memcmp(data, RECORD_MAGIC, 8) != 0) return NULL;
  r.p += 8;
  r.left -= 8;
  tpuc_graph* g = calloc(1, sizeof *g);
  if (g == NULL) {
    *oom = true;
    return NULL;
  }
  atomic_init(&g->refs, 1);
  pthread_mutex_init(&g->mu, NULL);
  g->client = client;
  g->device = device;
  g->owns_msgs = true;
  g->nops = get_u64(&r);
  g->nin = get_count(&r, 8);
  g->nparams = get_count(&r, 8);
  g->nres = get_count(&r, 0);
  g->nout = get_count(&r, 8);
  g->nnew = get_count(&r, 8);
  g->nupd = get_count(&r, 8);
  size_t ncand = get_count(&r, 8);
  g->nchecks = get_count(&r, 8);
  g->check_any = (long)get_i64(&r);
  g->rng_draws = get_u64(&r);
  if (r.bad || ncand > g->nupd || g->nres > (size_t)1 << 24 ||
      g->check_any < -1 || g->check_any >= (long)g->nres) {
    graph_free(g);
    return NULL;
  }
  g->in = calloc(g->nin + 1, sizeof *g->in);
  g->params = calloc(g->nparams + 1, sizeof *g->params);
  g->outs = calloc(g->nout + 1, sizeof *g->outs);
  g->new_nbytes = calloc(g->nnew + 1, sizeof *g->new_nbytes);
  g->new_val = calloc(g->nnew + 1, sizeof *g->new_val);
  g->upd_input = calloc(g->nupd + 1, sizeof *g->upd_input);
  g->upd_val = calloc(g->nupd + 1, sizeof *g->upd_val);
  g->cand = calloc(g->nupd + 1, sizeof *g->cand);
  g->check_res = calloc(g->nchecks + 1, sizeof *g->check_res);
  g->check_code = calloc(g->nchecks + 1, sizeof *g->check_code);
  g->check_msg = calloc(g->nchecks + 1, sizeof *g->check_msg);
  if (g->in == NULL || g->params == NULL || g->outs == NULL ||
      g->new_nbytes == NULL || g->new_val == NULL || g->upd_input == NULL ||
      g->upd_val == NULL || g->cand == NULL || g->check_res == NULL ||
      g->check_code == NULL || g->check_msg == NULL) {
    *oom = true;
    graph_free(g);
    return NULL;
  }
  for (size_t i = 0; !r.bad && i < g->nin; i++) {
    g_input* gi = &g->in[i];
    gi->dtype = get_dtype(&r);
    get_dims(&r, &gi->rank, gi->sizes, gi->strides);
    gi->offset = get_i64(&r);
    gi->nbytes = get_u64(&r);
    gi->value_dtype = get_dtype(&r);
    gi->alias_of = (long)get_i64(&r);
    r.bad |= gi->alias_of >= (long)i || gi->alias_of < -1;
  }
  for (size_t p = 0; !r.bad && p < g->nparams; p++) {
    g_param* gp = &g->params[p];
    int64_t kind = get_i64(&r);
    gp->input = get_u64(&r);
    gp->delta = get_u64(&r);
    gp->kind = (gp_kind)kind;
    if (kind == GP_INPUT)
      r.bad |= gp->input >= g->nin || g->in[gp->input].alias_of >= 0;
    else if (kind == GP_RNG)
      r.bad |= gp->delta >= g->rng_draws;
    else if (kind == GP_CONST)
      gp->buf = get_const(&r, client, device, st);
    else
      r.bad = true;
    if (*st != NULL) break;
  }
  for (size_t k = 0; !r.bad && *st == NULL && k < g->nout; k++) {
    tpuc_graph_output* o = &g->outs[k];
    o->input = (int)get_i64(&r);
    o->storage = (int)get_i64(&r);
    o->dtype = get_dtype(&r);
    get_dims(&r, &o->rank, o->sizes, o->strides);
    o->offset = get_i64(&r);
    r.bad |= o->input >= (int)g->nin ||
             (o->input < 0 && (o->storage < 0 || o->storage >= (int)g->nnew));
  }
  for (size_t j = 0; !r.bad && *st == NULL && j < g->nnew; j++) {
    g->new_nbytes[j] = get_u64(&r);
    *st = get_val(&r, &g->new_val[j], g->nres, g->nin, client, device);
  }
  for (size_t u = 0; !r.bad && *st == NULL && u < g->nupd; u++) {
    g->upd_input[u] = get_u64(&r);
    *st = get_val(&r, &g->upd_val[u], g->nres, g->nin, client, device);
    r.bad |= g->upd_input[u] >= g->nin;
  }
  for (size_t c = 0; !r.bad && c < ncand; c++) {
    g->cand[c].param = get_u64(&r);
    g->cand[c].result = get_u64(&r);
    r.bad |= g->cand[c].param >= g->nparams || g->cand[c].result >= g->nres;
    g->ncand = c + 1;
  }
  for (size_t k = 0; !r.bad && k < g->nchecks; k++) {
    g->check_res[k] = get_u64(&r);
    g->check_code[k] = (tpuc_code)get_i64(&r);
    r.bad |= g->check_res[k] >= g->nres;
    size_t n = 0;
    const char* msg = get_bytes(&r, &n);
    if (r.bad) break;
    char* copy = malloc(n + 1);
    if (copy == NULL) {
      *oom = true;
      break;
    }
    memcpy(copy, msg, n);
    copy[n] = '\0';
    g->check_msg[k] = copy;
  }
  size_t tlen = 0;
  const char* text = r.bad ? NULL : get_bytes(&r, &tlen);
  if (!r.bad && !*oom) {
    g->text = malloc(tlen + 1);
    if (g->text == NULL) {
      *oom = true;
    } else {
      memcpy(g->text, text, tlen);
      g->text[tlen] = '\0';
      g->len = tlen;
    }
  }
  if (!r.bad && !*oom) *extra = get_bytes(&r, extra_len);
  if (r.bad || *oom || *st != NULL || r.left != 0) {
    graph_free(g);
    return NULL;
  }
  return g;
}

tpuc_status* tpuc_graph_load(tpuc_client* client, int device, const char* key,
                             size_t key_len, const tpuc_view* inputs,
                             size_t nin, tpuc_graph** out, char** extra,
                             size_t* extra_len) {
  if (client == NULL || out == NULL || extra == NULL || extra_len == NULL ||
      (nin > 0 && inputs == NULL) || (key_len > 0 && key == NULL))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "NULL argument to tpuc_graph_load");
  *out = NULL;
  *extra = NULL;
  *extra_len = 0;
  if (tpuc_cache_dir(client)[0] == '\0') return NULL;
  for (size_t i = 0; i < nin; i++)
    if (inputs[i].storage == NULL || inputs[i].rank < 0 ||
        inputs[i].rank > TPUC_MAX_RANK)
      return NULL; /* not a signature any graph was captured with */
  g_input* sig = calloc(nin + 1, sizeof *sig);
  if (sig == NULL)
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  for (size_t i = 0; i < nin; i++) {
    long alias_of = -1;
    for (size_t j = 0; j < i && alias_of < 0; j++)
      if (inputs[j].storage == inputs[i].storage) alias_of = (long)j;
    graph_input_of(&inputs[i], alias_of,
                   alias_of < 0 ? tpuc_storage_value_dtype(inputs[i].storage)
                                : TPUC_DTYPE_INVALID,
                   &sig[i]);
  }
  hlo_sb k = {0};
  key_begin(&k, key, key_len);
  sig_append(&k, device, sig, nin);
  free(sig);
  if (k.oom) {
    hlo_sb_free(&k);
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  }
  char* data = NULL;
  size_t len = 0;
  tpuc_status* st = tpuc_cache_record_get(client, k.data, k.len, &data, &len);
  hlo_sb_free(&k);
  if (st != NULL || data == NULL) return st;
  const char* ex = NULL;
  size_t exlen = 0;
  bool oom = false;
  tpuc_graph* g = parse(data, len, client, device, &ex, &exlen, &oom, &st);
  bool ok =
      st == NULL && !oom && g != NULL && tpuc_graph_matches(g, inputs, nin);
  /* The program, as the capture compiled it (no donation). */
  if (ok) {
    g->var[0].mask = calloc(g->ncand + 1, sizeof *g->var[0].mask);
    oom = g->var[0].mask == NULL;
  }
  if (ok && !oom) {
    g->nvar = 1;
    tpuc_cache_source src = TPUC_CACHE_COMPILED;
    double t0 = tpuc_now_seconds();
    st = tpuc_compile(client, g->text, g->len, NULL, &g->var[0].exe, &src);
    if (st == NULL) graph_count_program((int)src, tpuc_now_seconds() - t0);
  }
  if (ok && !oom && st == NULL) {
    *extra = malloc(exlen + 1);
    oom = *extra == NULL;
    if (!oom && exlen > 0) memcpy(*extra, ex, exlen);
    *extra_len = oom ? 0 : exlen;
  }
  free(data);
  if (st == NULL && oom)
    st = tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  if (!ok || st != NULL) {
    graph_free(g);
    free(*extra);
    *extra = NULL;
    *extra_len = 0;
    return st;
  }
  graph_count_record(true);
  *out = g;
  return NULL;
}
