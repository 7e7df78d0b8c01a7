/* Compiled graphs: capture through the fused mode's recording, replay as
 * one execution (tpuc/graph.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "hlo/hlo_internal.h"
#include "runtime/fused_internal.h"
#include "runtime/graph_internal.h"

/* ------------------------------- stats ---------------------------------- */

static pthread_mutex_t g_smu = PTHREAD_MUTEX_INITIALIZER;
static tpuc_graph_stats g_stats;
static atomic_bool g_timing;

void tpuc_graph_set_timing(bool on) { atomic_store(&g_timing, on); }

void tpuc_graph_get_stats(tpuc_graph_stats* out) {
  pthread_mutex_lock(&g_smu);
  *out = g_stats;
  pthread_mutex_unlock(&g_smu);
}

void tpuc_graph_reset_stats(void) {
  pthread_mutex_lock(&g_smu);
  memset(&g_stats, 0, sizeof g_stats);
  pthread_mutex_unlock(&g_smu);
}

void graph_count_program(int source, double seconds) {
  pthread_mutex_lock(&g_smu);
  if (source == TPUC_CACHE_COMPILED) {
    g_stats.compiles++;
  } else {
    g_stats.cache_hits++;
    g_stats.disk_hits += source == TPUC_CACHE_DISK;
  }
  g_stats.compile_seconds += seconds;
  pthread_mutex_unlock(&g_smu);
}

void graph_count_record(bool loaded) {
  pthread_mutex_lock(&g_smu);
  if (loaded)
    g_stats.records_loaded++;
  else
    g_stats.records_saved++;
  pthread_mutex_unlock(&g_smu);
}

/* ------------------------------ capture --------------------------------- */

typedef struct {
  bool active;
  tpuc_client* client;
  int device;
  size_t nin;
  tpuc_view* in;
  long* alias_of;
  tpuc_buffer** begin; /* per input with alias_of < 0: its value */
  uint64_t seed, offset;
  uint64_t host_reads; /* tpuc_buffer_host_reads() at the start */
} g_capture;

static _Thread_local g_capture t_cap;

static void capture_reset(void) {
  for (size_t i = 0; i < t_cap.nin; i++)
    if (t_cap.begin != NULL && t_cap.begin[i] != NULL)
      tpuc_buffer_release(t_cap.begin[i]);
  free(t_cap.in);
  free(t_cap.alias_of);
  free(t_cap.begin);
  memset(&t_cap, 0, sizeof t_cap);
}

static tpuc_status* oom(void) {
  return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
}

/* The first input before i with i's storage, or -1. */
static long first_alias(const tpuc_view* in, size_t i) {
  for (size_t j = 0; j < i; j++)
    if (in[j].storage == in[i].storage) return (long)j;
  return -1;
}

static tpuc_status* check_inputs(tpuc_client* client, int device,
                                 const tpuc_view* in, size_t nin) {
  for (size_t i = 0; i < nin; i++) {
    if (in[i].storage == NULL)
      return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                              "graph input %zu has no storage", i);
    if (tpuc_storage_client(in[i].storage) != client ||
        tpuc_storage_device(in[i].storage) != device)
      return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                              "graph input %zu is on device %d, the graph "
                              "runs on %d",
                              i, tpuc_storage_device(in[i].storage), device);
    TPUC_RETURN_IF_ERROR(tpuc_view_check(&in[i]));
  }
  return NULL;
}

tpuc_status* tpuc_graph_capture_begin(tpuc_client* client, int device,
                                      const tpuc_view* inputs, size_t nin,
                                      uint64_t rng_seed, uint64_t rng_offset) {
  if (client == NULL || (nin > 0 && inputs == NULL))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "NULL argument to tpuc_graph_capture_begin");
  if (t_cap.active)
    return tpuc_status_make(TPUC_FAILED_PRECONDITION,
                            "this thread is already capturing a graph");
  TPUC_RETURN_IF_ERROR(check_inputs(client, device, inputs, nin));
  t_cap.in = malloc(sizeof *t_cap.in * (nin + 1));
  t_cap.alias_of = malloc(sizeof *t_cap.alias_of * (nin + 1));
  t_cap.begin = calloc(nin + 1, sizeof *t_cap.begin);
  if (t_cap.in == NULL || t_cap.alias_of == NULL || t_cap.begin == NULL) {
    capture_reset();
    return oom();
  }
  if (nin > 0) memcpy(t_cap.in, inputs, sizeof *t_cap.in * nin);
  t_cap.nin = nin;
  tpuc_status* st = fz_capture_start(client, device);
  if (st != NULL) {
    capture_reset();
    return st;
  }
  for (size_t i = 0; st == NULL && i < nin; i++) {
    t_cap.alias_of[i] = first_alias(inputs, i);
    if (t_cap.alias_of[i] < 0)
      st = tpuc_storage_value(inputs[i].storage, &t_cap.begin[i]);
  }
  t_cap.active = true;
  t_cap.client = client;
  t_cap.device = device;
  t_cap.seed = rng_seed;
  t_cap.offset = rng_offset;
  t_cap.host_reads = tpuc_buffer_host_reads();
  if (st != NULL) {
    fz_captured c;
    tpuc_status_free(fz_capture_finish(client, device, NULL, 0, true, &c));
    fz_captured_free(&c);
    capture_reset();
  }
  return st;
}

/* The canonical input whose value at the capture's start is `b`, or -1. */
static long begin_input(const tpuc_buffer* b) {
  for (size_t i = 0; i < t_cap.nin; i++)
    if (t_cap.begin[i] == b) return (long)i;
  return -1;
}

static void val_of_external(tpuc_buffer* b, g_val* v) {
  long i = begin_input(b);
  if (i >= 0) {
    v->kind = GV_INPUT;
    v->index = (size_t)i;
  } else {
    v->kind = GV_CONST;
    tpuc_buffer_retain(b);
    v->buf = b;
  }
}

static bool same_value_type(const tpuc_value_type* a,
                            const tpuc_value_type* b) {
  return a != NULL && b != NULL && a->dtype == b->dtype && a->rank == b->rank &&
         memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank) == 0;
}

void graph_free(tpuc_graph* g) {
  if (g == NULL) return;
  for (size_t p = 0; g->params != NULL && p < g->nparams; p++)
    if (g->params[p].buf != NULL) tpuc_buffer_release(g->params[p].buf);
  for (size_t j = 0; g->new_val != NULL && j < g->nnew; j++)
    if (g->new_val[j].buf != NULL) tpuc_buffer_release(g->new_val[j].buf);
  for (size_t u = 0; g->upd_val != NULL && u < g->nupd; u++)
    if (g->upd_val[u].buf != NULL) tpuc_buffer_release(g->upd_val[u].buf);
  for (size_t v = 0; v < g->nvar; v++) {
    free(g->var[v].mask);
    if (g->var[v].exe != NULL) tpuc_executable_release(g->var[v].exe);
  }
  free(g->in);
  free(g->params);
  free(g->outs);
  free(g->new_nbytes);
  free(g->new_val);
  free(g->upd_input);
  free(g->upd_val);
  free(g->cand);
  free(g->check_res);
  free(g->check_code);
  for (size_t k = 0; g->owns_msgs && g->check_msg != NULL && k < g->nchecks;
       k++)
    free((char*)g->check_msg[k]);
  free(g->check_msg);
  free(g->text);
  pthread_mutex_destroy(&g->mu);
  free(g);
}

void graph_input_of(const tpuc_view* v, long alias_of, tpuc_dtype value_dtype,
                    g_input* out) {
  out->dtype = v->dtype;
  out->rank = v->rank;
  memcpy(out->sizes, v->sizes, sizeof(int64_t) * (size_t)v->rank);
  memcpy(out->strides, v->strides, sizeof(int64_t) * (size_t)v->rank);
  out->offset = v->offset;
  out->nbytes = tpuc_storage_nbytes(v->storage);
  out->alias_of = alias_of;
  out->value_dtype = alias_of < 0 ? value_dtype : (tpuc_dtype)0;
}

/* Builds the graph from a finished capture; NULL with `why` when it cannot
 * be replayed. Takes the capture's text and executable. */
static tpuc_status* build_graph(fz_captured* c, const tpuc_view* outputs,
                                size_t nout, const long* out_input,
                                const long* out_new, tpuc_storage** news,
                                size_t nnew, tpuc_buffer** wanted,
                                const size_t* upd, size_t nupd,
                                tpuc_graph** out, char* why, size_t cap) {
  tpuc_graph* g = calloc(1, sizeof *g);
  if (g == NULL) return oom();
  atomic_init(&g->refs, 1);
  pthread_mutex_init(&g->mu, NULL);
  g->client = t_cap.client;
  g->device = t_cap.device;
  g->nops = c->nops;
  g->nin = t_cap.nin;
  g->nparams = c->nparams;
  g->nres = c->nres;
  g->nout = nout;
  g->nnew = nnew;
  g->nupd = nupd;
  g->nchecks = c->nchecks;
  g->check_any = c->check_any;
  g->rng_draws = c->rng_draws;
  g->in = calloc(g->nin + 1, sizeof *g->in);
  g->params = calloc(g->nparams + 1, sizeof *g->params);
  g->outs = calloc(nout + 1, sizeof *g->outs);
  g->new_nbytes = calloc(nnew + 1, sizeof *g->new_nbytes);
  g->new_val = calloc(nnew + 1, sizeof *g->new_val);
  g->upd_input = calloc(nupd + 1, sizeof *g->upd_input);
  g->upd_val = calloc(nupd + 1, sizeof *g->upd_val);
  g->cand = calloc(nupd + 1, sizeof *g->cand);
  g->check_res = calloc(g->nchecks + 1, sizeof *g->check_res);
  g->check_code = calloc(g->nchecks + 1, sizeof *g->check_code);
  g->check_msg = calloc(g->nchecks + 1, sizeof *g->check_msg);
  g->var[0].mask = calloc(nupd + 1, sizeof *g->var[0].mask);
  if (g->in == NULL || g->params == NULL || g->outs == NULL ||
      g->new_nbytes == NULL || g->new_val == NULL || g->upd_input == NULL ||
      g->upd_val == NULL || g->cand == NULL || g->check_res == NULL ||
      g->check_code == NULL || g->check_msg == NULL || g->var[0].mask == NULL) {
    free(g->var[0].mask);
    g->var[0].mask = NULL;
    graph_free(g);
    return oom();
  }
  for (size_t i = 0; i < g->nin; i++)
    graph_input_of(&t_cap.in[i], t_cap.alias_of[i],
                   t_cap.alias_of[i] < 0 ? tpuc_buffer_dtype(t_cap.begin[i])
                                         : TPUC_DTYPE_INVALID,
                   &g->in[i]);
  const char* unreplayable = NULL;
  for (size_t p = 0; p < g->nparams; p++) {
    g_param* gp = &g->params[p];
    tpuc_buffer* b = c->params[p];
    if (c->param_rng[p]) {
      uint64_t seed = c->param_rng_vals[p][0], ctr = c->param_rng_vals[p][1];
      uint64_t off = ctr >> 32;
      if (seed != t_cap.seed || (ctr & 0xFFFFFFFFu) != 0 ||
          off < t_cap.offset || off - t_cap.offset >= c->rng_draws)
        unreplayable =
            "a random op draws from another generator than the "
            "device's default one";
      gp->kind = GP_RNG;
      gp->delta = off - t_cap.offset;
      continue;
    }
    long i = begin_input(b);
    if (i >= 0) {
      gp->kind = GP_INPUT;
      gp->input = (size_t)i;
    } else {
      gp->kind = GP_CONST;
      tpuc_buffer_retain(b);
      gp->buf = b;
    }
  }
  for (size_t k = 0; k < nout; k++) {
    const tpuc_view* v = &outputs[k];
    tpuc_graph_output* o = &g->outs[k];
    o->input = (int)out_input[k];
    o->storage = (int)out_new[k];
    o->dtype = v->dtype;
    o->rank = v->rank;
    memcpy(o->sizes, v->sizes, sizeof(int64_t) * (size_t)v->rank);
    memcpy(o->strides, v->strides, sizeof(int64_t) * (size_t)v->rank);
    o->offset = v->offset;
  }
  for (size_t j = 0; j < nnew; j++) {
    g->new_nbytes[j] = tpuc_storage_nbytes(news[j]);
    if (c->wanted_res[j] >= 0) {
      g->new_val[j].kind = GV_RESULT;
      g->new_val[j].index = (size_t)c->wanted_res[j];
    } else {
      val_of_external(wanted[j], &g->new_val[j]);
    }
  }
  for (size_t u = 0; u < nupd; u++) {
    g->upd_input[u] = upd[u];
    long r = c->wanted_res[nnew + u];
    if (r >= 0) {
      g->upd_val[u].kind = GV_RESULT;
      g->upd_val[u].index = (size_t)r;
    } else {
      val_of_external(wanted[nnew + u], &g->upd_val[u]);
    }
    if (r < 0 || c->nchecks > 0) continue;
    /* Its old value may go to its new one where the program reads it. */
    for (size_t p = 0; p < g->nparams; p++) {
      if (g->params[p].kind != GP_INPUT || g->params[p].input != upd[u])
        continue;
      if (same_value_type(tpuc_executable_input_type(c->exe, p),
                          tpuc_executable_output_type(c->exe, (size_t)r)))
        g->cand[g->ncand++] = (g_cand){p, (size_t)r};
      break;
    }
  }
  for (size_t k = 0; k < g->nchecks; k++) {
    g->check_res[k] = c->check_res[k];
    g->check_code[k] = c->check_code[k];
    g->check_msg[k] = c->check_msg[k];
  }
  g->text = c->text;
  g->len = c->len;
  c->text = NULL;
  g->var[0].exe = c->exe;
  c->exe = NULL;
  g->nvar = 1;
  if (unreplayable != NULL) {
    snprintf(why, cap, "%s", unreplayable);
    graph_free(g);
    *out = NULL;
    return NULL;
  }
  *out = g;
  return NULL;
}

/* A value of the device read on the host since the capture began (an op
 * run on the CPU, a kernel that reads its argument's values): what the host
 * computed from it would be a constant of every replay. */
static void break_on_host_reads(void) {
  if (tpuc_buffer_host_reads() != t_cap.host_reads)
    fz_capture_break(t_cap.client, t_cap.device,
                     "a tpu value was read on the host during the capture");
}

bool tpuc_graph_capture_broken(tpuc_client* client, int device) {
  if (client == NULL || !t_cap.active || t_cap.client != client ||
      t_cap.device != device)
    return false;
  break_on_host_reads();
  return fz_capture_broken(client, device);
}

void tpuc_graph_capture_break(tpuc_client* client, const char* why) {
  if (client == NULL || !t_cap.active || t_cap.client != client) return;
  fz_capture_break(client, t_cap.device, why != NULL ? why : "broken");
}

tpuc_status* tpuc_graph_capture_end(tpuc_client* client, int device,
                                    const tpuc_view* outputs, size_t nout,
                                    bool abandon, tpuc_graph** out, char* why,
                                    size_t why_cap) {
  if (out == NULL || (nout > 0 && outputs == NULL))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "NULL argument to tpuc_graph_capture_end");
  *out = NULL;
  if (why != NULL && why_cap > 0) why[0] = '\0';
  if (!t_cap.active || t_cap.client != client || t_cap.device != device)
    return tpuc_status_make(TPUC_FAILED_PRECONDITION,
                            "no graph is being captured on device %d by this "
                            "thread",
                            device);
  break_on_host_reads();
  size_t nin = t_cap.nin;
  long* out_input = malloc(sizeof *out_input * (nout + 1));
  long* out_new = malloc(sizeof *out_new * (nout + 1));
  tpuc_storage** news = malloc(sizeof *news * (nout + 1));
  tpuc_buffer** wanted = calloc(nout + nin + 1, sizeof *wanted);
  size_t* upd = malloc(sizeof *upd * (nin + 1));
  tpuc_status* st = NULL;
  if (out_input == NULL || out_new == NULL || news == NULL || wanted == NULL ||
      upd == NULL)
    st = oom();
  size_t nnew = 0, nupd = 0;
  if (!abandon && st == NULL) st = check_inputs(client, device, outputs, nout);
  for (size_t k = 0; !abandon && st == NULL && k < nout; k++) {
    out_input[k] = out_new[k] = -1;
    for (size_t i = 0; i < nin && out_input[k] < 0; i++)
      if (t_cap.in[i].storage == outputs[k].storage)
        out_input[k] = t_cap.alias_of[i] >= 0 ? t_cap.alias_of[i] : (long)i;
    if (out_input[k] >= 0) continue;
    for (size_t j = 0; j < nnew && out_new[k] < 0; j++)
      if (news[j] == outputs[k].storage) out_new[k] = (long)j;
    if (out_new[k] >= 0) continue;
    out_new[k] = (long)nnew;
    news[nnew] = outputs[k].storage;
    st = tpuc_storage_value(outputs[k].storage, &wanted[nnew]);
    nnew++;
  }
  /* Inputs written in place: their storages hold new values. */
  for (size_t i = 0; !abandon && st == NULL && i < nin; i++) {
    if (t_cap.alias_of[i] >= 0) continue;
    tpuc_buffer* now = NULL;
    st = tpuc_storage_value(t_cap.in[i].storage, &now);
    if (st != NULL) break;
    if (now == t_cap.begin[i]) {
      tpuc_buffer_release(now);
      continue;
    }
    wanted[nnew + nupd] = now;
    upd[nupd++] = i;
  }
  fz_captured c;
  memset(&c, 0, sizeof c);
  bool give_up = abandon || st != NULL;
  tpuc_status* fin =
      fz_capture_finish(client, device, wanted, nnew + nupd, give_up, &c);
  if (st == NULL)
    st = fin;
  else
    tpuc_status_free(fin);
  if (st == NULL && c.broken) {
    if (why != NULL) snprintf(why, why_cap, "%s", c.why);
    pthread_mutex_lock(&g_smu);
    g_stats.capture_failures += !abandon;
    pthread_mutex_unlock(&g_smu);
  } else if (st == NULL) {
    graph_count_program(c.source, c.seconds);
    st = build_graph(&c, outputs, nout, out_input, out_new, news, nnew, wanted,
                     upd, nupd, out, why, why_cap);
    pthread_mutex_lock(&g_smu);
    if (*out != NULL)
      g_stats.captures++;
    else
      g_stats.capture_failures++;
    pthread_mutex_unlock(&g_smu);
  }
  fz_captured_free(&c);
  for (size_t w = 0; wanted != NULL && w < nout + nin; w++)
    if (wanted[w] != NULL) tpuc_buffer_release(wanted[w]);
  free(out_input);
  free(out_new);
  free(news);
  free(wanted);
  free(upd);
  capture_reset();
  return st;
}

/* ------------------------------- replay --------------------------------- */

size_t tpuc_graph_num_outputs(const tpuc_graph* g) { return g ? g->nout : 0; }

const tpuc_graph_output* tpuc_graph_output_at(const tpuc_graph* g, size_t i) {
  return g != NULL && i < g->nout ? &g->outs[i] : NULL;
}

size_t tpuc_graph_num_storages(const tpuc_graph* g) { return g ? g->nnew : 0; }

size_t tpuc_graph_storage_nbytes(const tpuc_graph* g, size_t j) {
  return g != NULL && j < g->nnew ? g->new_nbytes[j] : 0;
}

uint64_t tpuc_graph_rng_draws(const tpuc_graph* g) {
  return g ? g->rng_draws : 0;
}

size_t tpuc_graph_num_ops(const tpuc_graph* g) { return g ? g->nops : 0; }

void tpuc_graph_retain(tpuc_graph* g) {
  if (g) atomic_fetch_add(&g->refs, 1);
}

void tpuc_graph_release(tpuc_graph* g) {
  if (g == NULL || atomic_fetch_sub(&g->refs, 1) != 1) return;
  graph_free(g);
}

/* True when two canonical inputs (distinct storages at the capture) share
 * a storage now. */
static bool new_aliasing(const tpuc_graph* g, const tpuc_view* in) {
  size_t cap = 16;
  while (cap < 2 * g->nin + 2) cap *= 2;
  const tpuc_storage* stack_keys[64];
  const tpuc_storage** keys =
      cap <= 64 ? stack_keys : calloc(cap, sizeof *keys);
  if (keys == NULL) return true;
  if (cap <= 64) memset(stack_keys, 0, sizeof stack_keys);
  bool dup = false;
  for (size_t i = 0; i < g->nin && !dup; i++) {
    if (g->in[i].alias_of >= 0) continue;
    const tpuc_storage* s = in[i].storage;
    size_t h =
        (size_t)(((uintptr_t)s >> 4) * 0x9E3779B97F4A7C15ULL) & (cap - 1);
    while (keys[h] != NULL && keys[h] != s) h = (h + 1) & (cap - 1);
    dup = keys[h] == s;
    keys[h] = s;
  }
  if (keys != stack_keys) free(keys);
  return dup;
}

bool tpuc_graph_matches(const tpuc_graph* g, const tpuc_view* in, size_t nin) {
  if (g == NULL || nin != g->nin || (nin > 0 && in == NULL)) return false;
  for (size_t i = 0; i < nin; i++) {
    const tpuc_view* v = &in[i];
    const g_input* gi = &g->in[i];
    if (v->storage == NULL || v->dtype != gi->dtype || v->rank != gi->rank ||
        v->offset != gi->offset ||
        memcmp(v->sizes, gi->sizes, sizeof(int64_t) * (size_t)v->rank) != 0 ||
        memcmp(v->strides, gi->strides, sizeof(int64_t) * (size_t)v->rank) !=
            0 ||
        tpuc_storage_nbytes(v->storage) != gi->nbytes ||
        tpuc_storage_device(v->storage) != g->device ||
        tpuc_storage_client(v->storage) != g->client)
      return false;
    if (gi->alias_of >= 0 && in[gi->alias_of].storage != v->storage)
      return false;
    /* The program reads the value in the element type it had (bytes after
     * a host write, the tensor's type after a device write). */
    if (gi->alias_of < 0 &&
        tpuc_storage_value_dtype(v->storage) != gi->value_dtype)
      return false;
  }
  /* A graph that writes its inputs read distinct storages as distinct. */
  return g->nupd == 0 || !new_aliasing(g, in);
}

/* The program text with `mask`'s donations as aliases: one pass over the
 * signature of @main, which declares %e0, %e1, ... in order. */
static tpuc_status* alias_text(const tpuc_graph* g, const bool* mask,
                               char** text, size_t* len) {
  int* alias = malloc(sizeof *alias * (g->nparams + 1));
  if (alias == NULL) return oom();
  for (size_t p = 0; p < g->nparams; p++) alias[p] = -1;
  for (size_t c = 0; c < g->ncand; c++)
    if (mask[c]) alias[g->cand[c].param] = (int)g->cand[c].result;
  static const char kHead[] = "func.func public @main(";
  const char* head = strstr(g->text, kHead);
  const char* sig_end = head ? strstr(head, ") -> (") : NULL;
  if (head == NULL || sig_end == NULL) {
    free(alias);
    return tpuc_status_make(TPUC_INTERNAL, "unexpected graph program text");
  }
  hlo_sb b = {0};
  const char* at = head + sizeof kHead - 1;
  hlo_sb_append(&b, g->text, (size_t)(at - g->text));
  size_t p = 0;
  while (at < sig_end) {
    /* One declaration: "%eP: TYPE" up to ", " or the end. */
    const char* end = at;
    int depth = 0;
    while (end < sig_end && !(depth == 0 && *end == ',')) {
      if (*end == '<') depth++;
      if (*end == '>') depth--;
      end++;
    }
    hlo_sb_append(&b, at, (size_t)(end - at));
    if (p < g->nparams && alias[p] >= 0)
      hlo_sb_printf(&b, " {tf.aliasing_output = %d : i32}", alias[p]);
    p++;
    at = end;
    if (at < sig_end) { /* the comma */
      hlo_sb_append(&b, at, 1);
      at++;
    }
  }
  hlo_sb_append(&b, sig_end, (size_t)(g->text + g->len - sig_end));
  free(alias);
  if (b.oom) {
    hlo_sb_free(&b);
    return oom();
  }
  *len = b.len;
  *text = hlo_sb_take(&b);
  return NULL;
}

/* Whether donation set `a` donates nothing that `b` does not. */
static bool mask_within(const bool* a, const bool* b, size_t n) {
  for (size_t c = 0; c < n; c++)
    if (a[c] && !b[c]) return false;
  return true;
}

/* The executable for donation set `mask`: its own, compiled the second
 * time the set is asked for; before that, the variant that donates the
 * most of it (the set without donation always exists), whose set is then
 * written to `mask`. */
static tpuc_status* variant(tpuc_graph* g, bool* mask, tpuc_executable** exe) {
  pthread_mutex_lock(&g->mu);
  for (size_t v = 0; v < g->nvar; v++)
    if (memcmp(g->var[v].mask, mask, sizeof *mask * g->ncand) == 0) {
      tpuc_executable_retain(g->var[v].exe);
      *exe = g->var[v].exe;
      pthread_mutex_unlock(&g->mu);
      return NULL;
    }
  tpuc_fingerprint zero = {0, 0};
  uint64_t fp = tpuc_fingerprint_bytes(zero, mask, sizeof *mask * g->ncand).lo;
  bool seen = false;
  for (size_t i = 0; i < g->nseen && i < GRAPH_MAX_VARIANTS && !seen; i++)
    seen = g->seen[i] == fp;
  if (!seen) {
    g->seen[g->nseen++ % GRAPH_MAX_VARIANTS] = fp;
    long best = -1;
    size_t most = 0;
    for (size_t v = 0; v < g->nvar; v++) {
      if (!mask_within(g->var[v].mask, mask, g->ncand)) continue;
      size_t n = 0;
      for (size_t c = 0; c < g->ncand; c++) n += g->var[v].mask[c];
      if (best < 0 || n > most) {
        best = (long)v;
        most = n;
      }
    }
    if (best >= 0) {
      memcpy(mask, g->var[best].mask, sizeof *mask * g->ncand);
      tpuc_executable_retain(g->var[best].exe);
      *exe = g->var[best].exe;
      pthread_mutex_unlock(&g->mu);
      return NULL;
    }
  }
  pthread_mutex_unlock(&g->mu);
  char* text = NULL;
  size_t len = 0;
  TPUC_RETURN_IF_ERROR(alias_text(g, mask, &text, &len));
  tpuc_cache_source src = TPUC_CACHE_COMPILED;
  double t0 = tpuc_now_seconds();
  tpuc_status* st = tpuc_compile(g->client, text, len, NULL, exe, &src);
  free(text);
  if (st != NULL) return st;
  graph_count_program((int)src, tpuc_now_seconds() - t0);
  bool* copy = malloc(sizeof *copy * (g->ncand + 1));
  if (copy == NULL) return NULL; /* usable, just not remembered */
  memcpy(copy, mask, sizeof *mask * g->ncand);
  pthread_mutex_lock(&g->mu);
  size_t slot = GRAPH_MAX_VARIANTS - 1; /* full: the last one is replaced */
  if (g->nvar < GRAPH_MAX_VARIANTS) {
    slot = g->nvar++;
  } else {
    free(g->var[slot].mask);
    tpuc_executable_release(g->var[slot].exe);
  }
  g->var[slot].mask = copy;
  tpuc_executable_retain(*exe);
  g->var[slot].exe = *exe;
  pthread_mutex_unlock(&g->mu);
  pthread_mutex_lock(&g_smu);
  g_stats.variants++;
  pthread_mutex_unlock(&g_smu);
  return NULL;
}

static tpuc_buffer* value_of(const g_val* v, tpuc_buffer** vals,
                             tpuc_buffer** outs) {
  switch (v->kind) {
    case GV_RESULT:
      return outs[v->index];
    case GV_INPUT:
      return vals[v->index];
    case GV_CONST:
      return v->buf;
  }
  return NULL;
}

tpuc_status* tpuc_graph_replay(tpuc_graph* g, const tpuc_view* in, size_t nin,
                               tpuc_storage* const* storages, size_t nstorages,
                               uint64_t rng_seed, uint64_t rng_offset) {
  if (g == NULL || (nin > 0 && in == NULL) ||
      (nstorages > 0 && storages == NULL))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "NULL argument to tpuc_graph_replay");
  if (!tpuc_graph_matches(g, in, nin))
    return tpuc_status_make(TPUC_FAILED_PRECONDITION,
                            "the inputs do not match the captured graph");
  if (nstorages != g->nnew)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "the graph fills %zu storages, %zu given", g->nnew,
                            nstorages);
  for (size_t j = 0; j < nstorages; j++)
    if (storages[j] == NULL ||
        tpuc_storage_nbytes(storages[j]) != g->new_nbytes[j] ||
        tpuc_storage_device(storages[j]) != g->device)
      return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                              "output storage %zu: wrong size or device", j);
  tpuc_buffer** vals = calloc(nin + 1, sizeof *vals);
  tpuc_buffer** args = calloc(g->nparams + 1, sizeof *args);
  tpuc_buffer** rngs = calloc(g->nparams + 1, sizeof *rngs);
  bool* donate = calloc(g->nparams + 1, sizeof *donate);
  bool* mask = calloc(g->ncand + 1, sizeof *mask);
  tpuc_buffer** outs = calloc(g->nres + 1, sizeof *outs);
  tpuc_status* st = NULL;
  if (vals == NULL || args == NULL || rngs == NULL || donate == NULL ||
      mask == NULL || outs == NULL)
    st = oom();
  for (size_t i = 0; st == NULL && i < nin; i++)
    if (g->in[i].alias_of < 0) st = tpuc_storage_value(in[i].storage, &vals[i]);
  for (size_t p = 0; st == NULL && p < g->nparams; p++) {
    const g_param* gp = &g->params[p];
    if (gp->kind == GP_INPUT) {
      args[p] = vals[gp->input];
    } else if (gp->kind == GP_CONST) {
      args[p] = gp->buf;
    } else {
      uint64_t v[2] = {rng_seed, (rng_offset + gp->delta) << 32};
      int64_t two = 2;
      st = tpuc_buffer_from_host(g->client, g->device, TPUC_DTYPE_U64, &two, 1,
                                 v, NULL, &rngs[p]);
      args[p] = rngs[p];
    }
  }
  /* An input's old value that only its storage (and this call) holds goes
   * to its new value (as far as the variant that runs donates). */
  for (size_t c = 0; st == NULL && c < g->ncand; c++) {
    tpuc_buffer* b = args[g->cand[c].param];
    mask[c] = tpuc_buffer_refs(b) - tpuc_lazy_holds(b) == 2 &&
              tpuc_lazy_owner(b) == NULL;
  }
  tpuc_executable* exe = NULL;
  if (st == NULL) st = variant(g, mask, &exe);
  size_t ndonated = 0;
  for (size_t c = 0; st == NULL && c < g->ncand; c++) {
    donate[g->cand[c].param] = mask[c];
    ndonated += mask[c];
  }
  bool timing = atomic_load(&g_timing);
  double t0 = timing ? tpuc_now_seconds() : 0;
  if (st == NULL) st = tpuc_values_ensure(args, g->nparams);
  if (st == NULL)
    st = tpuc_execute(exe, g->device, args, g->nparams, donate, outs, g->nres);
  if (exe != NULL) tpuc_executable_release(exe);
  /* Timing: the execution and its wait, the plugin's time for the graph. */
  for (size_t r = 0; timing && st == NULL && r < g->nres; r++) {
    tpuc_event* ev = NULL;
    st = tpuc_buffer_ready_event(outs[r], &ev);
    if (st == NULL) st = tpuc_event_await(ev);
    if (ev != NULL) tpuc_event_destroy(ev);
  }
  if (timing && st == NULL) {
    double dt = tpuc_now_seconds() - t0;
    pthread_mutex_lock(&g_smu);
    g_stats.execute_seconds += dt;
    pthread_mutex_unlock(&g_smu);
  }
  /* Argument checks first: a bad argument leaves the inputs as they were
   * (a graph with checks donates nothing). */
  bool any = g->nchecks > 0;
  if (st == NULL && any && g->check_any >= 0) { /* one read for all */
    uint8_t bad = 0;
    st = tpuc_buffer_to_host(outs[g->check_any], &bad, 1);
    any = bad != 0;
  }
  for (size_t k = 0; st == NULL && any && k < g->nchecks; k++) {
    uint8_t bad = 0;
    st = tpuc_buffer_to_host(outs[g->check_res[k]], &bad, 1);
    if (st == NULL && bad)
      st = tpuc_status_make(g->check_code[k], "%s", g->check_msg[k]);
  }
  for (size_t j = 0; st == NULL && j < g->nnew; j++)
    st = tpuc_storage_set_value(storages[j],
                                value_of(&g->new_val[j], vals, outs));
  for (size_t u = 0; st == NULL && u < g->nupd; u++)
    st = tpuc_storage_set_value(in[g->upd_input[u]].storage,
                                value_of(&g->upd_val[u], vals, outs));
  if (st == NULL) {
    pthread_mutex_lock(&g_smu);
    g_stats.replays++;
    g_stats.ops_replayed += g->nops;
    g_stats.donated += ndonated;
    pthread_mutex_unlock(&g_smu);
  }
  for (size_t r = 0; outs != NULL && r < g->nres; r++)
    if (outs[r] != NULL) tpuc_buffer_release(outs[r]);
  for (size_t i = 0; vals != NULL && i < nin; i++)
    if (vals[i] != NULL) tpuc_buffer_release(vals[i]);
  for (size_t p = 0; rngs != NULL && p < g->nparams; p++)
    if (rngs[p] != NULL) tpuc_buffer_release(rngs[p]);
  free(vals);
  free(args);
  free(rngs);
  free(donate);
  free(mask);
  free(outs);
  return st;
}
