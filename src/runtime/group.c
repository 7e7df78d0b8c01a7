/* In-process groups (include/tpuc/group.h): ranks that are threads of this
 * process meet here, and the last one to arrive compiles (through the
 * compile cache) and enqueues the replicated program for all of them. */
#include "tpuc/group.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/fingerprint.h"
#include "runtime/runtime_internal.h"
#include "tpuc/executable.h"
#include "tpuc/lazy.h"

#define GRP_WHAT 96

typedef struct grp_msg {
  struct grp_msg* next;
  int src, dst;
  int64_t tag;
  tpuc_buffer* value;
} grp_msg;

typedef struct grp_shared {
  struct grp_shared* next; /* registry */
  tpuc_client* client;
  char* key;
  int size;
  int members; /* handles not yet left */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int* devices; /* per rank, -1 until joined */
  /* The call being collected: generation, ranks arrived, and per rank its
   * program's fingerprint, description, argument and result. */
  uint64_t gen;
  bool running; /* every rank arrived: no more timeouts for this call */
  int arrived;
  bool* here;
  tpuc_fingerprint* fp;
  char (*what)[GRP_WHAT];
  tpuc_buffer** args;
  tpuc_buffer** outs;
  tpuc_group_offer** offer; /* per rank: its offer, or NULL */
  /* The outcome of the last finished call (valid until the next one
   * finishes, which needs every rank to have read it first). */
  tpuc_code code;
  char* message;
  int how; /* TPUC_GROUP_RAN_* */
  grp_msg* mail; /* sent, not yet received */
} grp_shared;

struct tpuc_group {
  grp_shared* shared;
  int rank;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static grp_shared* g_groups;

static void shared_free(grp_shared* s) {
  for (grp_msg* m = s->mail; m != NULL;) {
    grp_msg* next = m->next;
    tpuc_buffer_release(m->value);
    free(m);
    m = next;
  }
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s->key);
  free(s->devices);
  free(s->here);
  free(s->fp);
  free(s->what);
  free(s->args);
  free(s->outs);
  free(s->offer);
  free(s->message);
  free(s);
}

static grp_shared* shared_new(tpuc_client* client, const char* key, int size) {
  grp_shared* s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->client = client;
  s->size = size;
  s->key = strdup(key);
  s->devices = malloc(sizeof *s->devices * (size_t)size);
  s->here = calloc((size_t)size, sizeof *s->here);
  s->fp = calloc((size_t)size, sizeof *s->fp);
  s->what = calloc((size_t)size, sizeof *s->what);
  s->args = calloc((size_t)size, sizeof *s->args);
  s->outs = calloc((size_t)size, sizeof *s->outs);
  s->offer = calloc((size_t)size, sizeof *s->offer);
  pthread_mutex_init(&s->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (s->key == NULL || s->devices == NULL || s->here == NULL ||
      s->fp == NULL || s->what == NULL || s->args == NULL || s->outs == NULL ||
      s->offer == NULL) {
    shared_free(s);
    return NULL;
  }
  for (int r = 0; r < size; r++) s->devices[r] = -1;
  return s;
}

tpuc_status* tpuc_group_join(tpuc_client* client, const char* key, int size,
                             int rank, int device, tpuc_group** out) {
  if (client == NULL || key == NULL || out == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "client, key or out is NULL");
  *out = NULL;
  if (size < 1 || size > TPUC_MAX_REPLICAS || rank < 0 || rank >= size)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "rank %d of a group of %d (at most %d ranks)", rank,
                            size, TPUC_MAX_REPLICAS);
  int ndev = 0;
  TPUC_RETURN_IF_ERROR(tpuc_client_device_count(client, &ndev));
  if (device < 0 || device >= ndev)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "device %d: there are %d device(s)", device, ndev);
  tpuc_group* g = calloc(1, sizeof *g);
  if (g == NULL)
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  pthread_mutex_lock(&g_mu);
  grp_shared* s = g_groups;
  while (s != NULL && (s->client != client || strcmp(s->key, key) != 0))
    s = s->next;
  tpuc_status* st = NULL;
  if (s == NULL) {
    s = shared_new(client, key, size);
    if (s == NULL) {
      st = tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
    } else {
      s->next = g_groups;
      g_groups = s;
    }
  } else if (s->size != size) {
    st =
        tpuc_status_make(TPUC_INVALID_ARGUMENT,
                         "group %s has %d ranks, rank %d joins it as one of %d",
                         key, s->size, rank, size);
  }
  if (st == NULL) {
    pthread_mutex_lock(&s->mu);
    if (s->devices[rank] >= 0) {
      st =
          tpuc_status_make(TPUC_ALREADY_EXISTS,
                           "rank %d of group %s has joined already", rank, key);
    } else {
      for (int r = 0; r < size && st == NULL; r++)
        if (s->devices[r] == device)
          st = tpuc_status_make(TPUC_INVALID_ARGUMENT,
                                "ranks %d and %d of group %s would both drive "
                                "device %d; each rank needs its own device",
                                r, rank, key, device);
    }
    if (st == NULL) {
      s->devices[rank] = device;
      s->members++;
    }
    pthread_mutex_unlock(&s->mu);
  }
  pthread_mutex_unlock(&g_mu);
  if (st != NULL) {
    free(g);
    return st;
  }
  g->shared = s;
  g->rank = rank;
  *out = g;
  return NULL;
}

void tpuc_group_leave(tpuc_group* g) {
  if (g == NULL) return;
  grp_shared* s = g->shared;
  pthread_mutex_lock(&g_mu);
  pthread_mutex_lock(&s->mu);
  s->devices[g->rank] = -1;
  bool last = --s->members == 0;
  pthread_mutex_unlock(&s->mu);
  if (last) {
    grp_shared** p = &g_groups;
    while (*p != s) p = &(*p)->next;
    *p = s->next;
  }
  pthread_mutex_unlock(&g_mu);
  if (last) shared_free(s);
  free(g);
}

int tpuc_group_size(const tpuc_group* g) { return g ? g->shared->size : 0; }
tpuc_client* tpuc_group_client(const tpuc_group* g) {
  return g ? g->shared->client : NULL;
}
int tpuc_group_rank(const tpuc_group* g) { return g ? g->rank : -1; }
int tpuc_group_device(const tpuc_group* g, int rank) {
  if (g == NULL || rank < 0 || rank >= g->shared->size) return -1;
  pthread_mutex_lock(&g->shared->mu);
  int d = g->shared->devices[rank];
  pthread_mutex_unlock(&g->shared->mu);
  return d;
}

static struct timespec deadline_after(int64_t ms) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  if (ms < 0) ms = 0;
  t.tv_sec += ms / 1000;
  t.tv_nsec += (ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec++;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}

/* `text` compiled (through the cache) for the group's devices, in rank
 * order. */
static tpuc_status* compile_for_group(grp_shared* s, const char* text,
                                      size_t len, tpuc_executable** exe,
                                      tpuc_cache_source* src) {
  tpuc_compile_options o = {.num_replicas = s->size,
                            .replica_devices = s->devices};
  if (s->size == 1) o.replica_devices = NULL;
  return tpuc_compile(s->client, text, len, &o, exe, src);
}

/* Enqueues `exe` on every rank's device once the `na` arguments of each
 * rank (rank after rank) have their values; `no` results per rank. */
static tpuc_status* execute_for_group(grp_shared* s, tpuc_executable* exe,
                                      tpuc_buffer** args, size_t na,
                                      const bool* donate, tpuc_buffer** outs,
                                      size_t no) {
  TPUC_RETURN_IF_ERROR(tpuc_values_ensure(args, (size_t)s->size * na));
  if (s->size == 1)
    return tpuc_execute(exe, s->devices[0], args, na, donate, outs, no);
  return tpuc_execute_replicated(exe, args, na, donate, outs, no);
}

/* Under s->mu, by the last rank to arrive (`me`), when every rank offered
 * a program of one key (tpuc_group_offer): compiles it for the ranks'
 * devices (unless a rank has it) and enqueues it with every rank's
 * arguments; each rank's results go to its offer. */
static tpuc_status* run_offers(grp_shared* s, int me) {
  tpuc_group_offer* o0 = s->offer[0];
  size_t na = o0->nargs, no = o0->nouts, n = (size_t)s->size;
  tpuc_executable* exe = NULL;
  const tpuc_group_offer* with_text = NULL;
  for (size_t r = 0; r < n; r++) {
    if (exe == NULL && s->offer[r]->exe != NULL) exe = s->offer[r]->exe;
    if (with_text == NULL && s->offer[r]->text != NULL)
      with_text = s->offer[r];
  }
  tpuc_status* st = NULL;
  if (exe != NULL) {
    tpuc_executable_retain(exe);
  } else if (with_text == NULL) {
    return tpuc_status_make(TPUC_INTERNAL, "no rank has the program");
  } else {
    /* The compile is the calling rank's; the others got it from it. */
    tpuc_cache_source src = TPUC_CACHE_COMPILED;
    double t0 = tpuc_now_seconds();
    TPUC_RETURN_IF_ERROR(
        compile_for_group(s, with_text->text, with_text->len, &exe, &src));
    s->offer[me]->source = (int)src;
    s->offer[me]->seconds = tpuc_now_seconds() - t0;
  }
  tpuc_buffer** args = malloc(sizeof *args * (n * na > 0 ? n * na : 1));
  tpuc_buffer** outs = calloc(n * no > 0 ? n * no : 1, sizeof *outs);
  if (args == NULL || outs == NULL)
    st = tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  for (size_t r = 0; st == NULL && r < n; r++)
    for (size_t i = 0; i < na; i++) args[r * na + i] = s->offer[r]->args[i];
  if (st == NULL)
    st = execute_for_group(s, exe, args, na, o0->donate, outs, no);
  for (size_t r = 0; st == NULL && r < n; r++) {
    for (size_t k = 0; k < no; k++) s->offer[r]->outs[k] = outs[r * no + k];
    tpuc_executable_retain(exe);
    if (s->offer[r]->exe != NULL) tpuc_executable_release(s->offer[r]->exe);
    s->offer[r]->exe = exe;
  }
  tpuc_executable_release(exe);
  free(args);
  free(outs);
  return st;
}

/* Whether every rank offered a program, all of one key and arity. */
static bool offers_agree(const grp_shared* s) {
  const tpuc_group_offer* o0 = s->offer[0];
  for (int r = 0; r < s->size; r++) {
    const tpuc_group_offer* o = s->offer[r];
    if (o == NULL || !tpuc_fingerprint_eq(o->key, o0->key) ||
        o->nargs != o0->nargs || o->nouts != o0->nouts ||
        (o->donate == NULL) != (o0->donate == NULL))
      return false;
    for (size_t i = 0; o->donate != NULL && i < o->nargs; i++)
      if (o->donate[i] != o0->donate[i]) return false;
  }
  return true;
}

/* Under s->mu, by the last rank to arrive: runs the ranks' offered program
 * when they agree on one, else (no offers) checks that the calls agree,
 * compiles and enqueues the collective; records the outcome. */
static void run_call(grp_shared* s, int me, const char* text, size_t len) {
  tpuc_status* st = NULL;
  bool any_offer = false;
  for (int r = 0; r < s->size; r++) any_offer |= s->offer[r] != NULL;
  s->how = TPUC_GROUP_RAN_PLAIN;
  bool same = true;
  for (int r = 1; r < s->size; r++)
    same &= tpuc_fingerprint_eq(s->fp[r], s->fp[0]);
  if (any_offer) {
    s->how = TPUC_GROUP_RAN_NONE;
    if (same && offers_agree(s)) {
      s->how = TPUC_GROUP_RAN_OFFER;
      st = run_offers(s, me);
    }
  } else if (!same) {
    size_t cap = (size_t)s->size * (GRP_WHAT + 16) + 64, n = 0;
    char* msg = malloc(cap);
    if (msg != NULL) {
      n += (size_t)snprintf(msg, cap, "the ranks' calls differ:");
      for (int r = 0; r < s->size && n < cap; r++)
        n += (size_t)snprintf(msg + n, cap - n, "%s rank %d: %s", r ? ";" : "",
                              r, s->what[r]);
    }
    st = tpuc_status_make(TPUC_INVALID_ARGUMENT, "%s",
                          msg ? msg : "the ranks' calls differ");
    free(msg);
  } else if (text != NULL) {
    tpuc_executable* exe = NULL;
    st = compile_for_group(s, text, len, &exe, NULL);
    if (st == NULL)
      st = execute_for_group(s, exe, s->args, 1, NULL, s->outs, 1);
    tpuc_executable_release(exe);
  }
  free(s->message);
  s->message = NULL;
  s->code = TPUC_OK;
  if (st != NULL) {
    s->code = tpuc_status_code(st);
    s->message = strdup(tpuc_status_message(st));
    tpuc_status_free(st);
    for (int r = 0; r < s->size; r++) s->outs[r] = NULL;
  }
  for (int r = 0; r < s->size; r++) {
    tpuc_buffer_release(s->args[r]);
    s->args[r] = NULL;
    s->offer[r] = NULL;
    s->here[r] = false;
  }
  s->arrived = 0;
  s->running = false;
  s->gen++;
  pthread_cond_broadcast(&s->cv);
}

tpuc_status* tpuc_group_run_offer(tpuc_group* g, const char* text, size_t len,
                                  const char* what, tpuc_buffer* arg,
                                  tpuc_group_offer* offer, int64_t timeout_ms,
                                  tpuc_buffer** out, int* how) {
  if (g == NULL || how == NULL ||
      (text != NULL && (arg == NULL || (out == NULL && offer == NULL))) ||
      (offer != NULL && text == NULL))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "group, argument or out is NULL");
  if (out != NULL) *out = NULL;
  *how = TPUC_GROUP_RAN_PLAIN;
  grp_shared* s = g->shared;
  int me = g->rank;
  tpuc_fingerprint zero = {0, 0};
  pthread_mutex_lock(&s->mu);
  uint64_t gen = s->gen;
  s->here[me] = true;
  s->fp[me] = text ? tpuc_fingerprint_bytes(zero, text, len) : zero;
  snprintf(s->what[me], GRP_WHAT, "%s", what ? what : "barrier");
  if (arg != NULL) tpuc_buffer_retain(arg);
  s->args[me] = arg;
  s->outs[me] = NULL;
  s->offer[me] = offer;
  if (++s->arrived == s->size) {
    s->running = true;
    run_call(s, me, text, len);
  } else {
    struct timespec until = deadline_after(timeout_ms);
    while (s->gen == gen) {
      if (s->running) {
        pthread_cond_wait(&s->cv, &s->mu);
        continue;
      }
      if (pthread_cond_timedwait(&s->cv, &s->mu, &until) != ETIMEDOUT) continue;
      if (s->gen != gen || s->running) continue;
      /* Give up: withdraw from the call and name who is missing. */
      char missing[256];
      size_t n = 0;
      missing[0] = '\0';
      for (int r = 0; r < s->size && n < sizeof missing; r++)
        if (!s->here[r])
          n += (size_t)snprintf(missing + n, sizeof missing - n, "%s%d",
                                n ? ", " : "", r);
      s->here[me] = false;
      s->arrived--;
      tpuc_buffer_release(s->args[me]);
      s->args[me] = NULL;
      s->offer[me] = NULL;
      char mine[GRP_WHAT];
      snprintf(mine, sizeof mine, "%s", s->what[me]);
      pthread_mutex_unlock(&s->mu);
      return tpuc_status_make(TPUC_DEADLINE_EXCEEDED,
                              "rank %d waited %.1f s for %s, and rank(s) %s "
                              "of group %s did not call it",
                              me, (double)timeout_ms / 1000.0, mine, missing,
                              s->key);
    }
  }
  tpuc_status* st = NULL;
  *how = s->how;
  if (s->code != TPUC_OK) {
    st = tpuc_status_make(s->code, "%s", s->message ? s->message : "failed");
  } else if (out != NULL && s->how == TPUC_GROUP_RAN_PLAIN) {
    *out = s->outs[me];
    s->outs[me] = NULL;
  }
  pthread_mutex_unlock(&s->mu);
  return st;
}

tpuc_status* tpuc_group_run(tpuc_group* g, const char* text, size_t len,
                            const char* what, tpuc_buffer* arg,
                            int64_t timeout_ms, tpuc_buffer** out) {
  /* A rank that offered a program (fused mode) met this call: nothing
   * ran; it runs its own ops and comes again, alone, as this call does. */
  for (;;) {
    int how = TPUC_GROUP_RAN_PLAIN;
    tpuc_status* st = tpuc_group_run_offer(g, text, len, what, arg, NULL,
                                           timeout_ms, out, &how);
    if (st != NULL || how != TPUC_GROUP_RAN_NONE) return st;
  }
}

tpuc_status* tpuc_group_send(tpuc_group* g, int dst, int64_t tag,
                             tpuc_buffer* value) {
  if (g == NULL || value == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "group or value is NULL");
  grp_shared* s = g->shared;
  if (dst < 0 || dst >= s->size || dst == g->rank)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "rank %d cannot send to rank %d of a group of %d",
                            g->rank, dst, s->size);
  grp_msg* m = calloc(1, sizeof *m);
  if (m == NULL)
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  m->src = g->rank;
  m->dst = dst;
  m->tag = tag;
  tpuc_buffer_retain(value);
  m->value = value;
  pthread_mutex_lock(&s->mu);
  grp_msg** p = &s->mail;
  while (*p != NULL) p = &(*p)->next;
  *p = m;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

tpuc_status* tpuc_group_recv(tpuc_group* g, int src, int64_t tag,
                             int64_t timeout_ms, tpuc_buffer** out) {
  if (g == NULL || out == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "group or out is NULL");
  *out = NULL;
  grp_shared* s = g->shared;
  if (src < 0 || src >= s->size || src == g->rank)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "rank %d cannot receive from rank %d of a group "
                            "of %d",
                            g->rank, src, s->size);
  struct timespec until = deadline_after(timeout_ms);
  pthread_mutex_lock(&s->mu);
  grp_msg* m = NULL;
  for (;;) {
    grp_msg** p = &s->mail;
    while (*p != NULL &&
           !((*p)->src == src && (*p)->dst == g->rank && (*p)->tag == tag))
      p = &(*p)->next;
    if (*p != NULL) {
      m = *p;
      *p = m->next;
      break;
    }
    if (pthread_cond_timedwait(&s->cv, &s->mu, &until) == ETIMEDOUT) break;
  }
  int device = s->devices[g->rank];
  pthread_mutex_unlock(&s->mu);
  if (m == NULL)
    return tpuc_status_make(TPUC_DEADLINE_EXCEEDED,
                            "rank %d waited %.1f s for a message from rank %d "
                            "(tag %lld) of group %s",
                            g->rank, (double)timeout_ms / 1000.0, src,
                            (long long)tag, s->key);
  tpuc_status* st = NULL;
  if (tpuc_buffer_device(m->value) == device) {
    *out = m->value;
    m->value = NULL;
  } else {
    st = tpuc_value_ensure(m->value);
    if (st == NULL) st = tpuc_buffer_copy_to_device(m->value, device, out);
  }
  tpuc_buffer_release(m->value);
  free(m);
  return st;
}
