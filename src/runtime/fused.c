/* Eager modes and the fused mode's deferred op graph (tpuc/eager.h).
 *
 * In fused mode an op call does not run: program.c hands its per-call
 * program (StableHLO text, compiled through the cache as in strict mode),
 * its input buffers and its output types to fz_record, which appends a node
 * to the open segment of the device and returns lazy output buffers
 * (tpuc/buffer.h). A segment runs as ONE program, composed from the nodes'
 * programs (each becomes a private function of the module, @main calls them
 * in order), when something needs one of its values, on flush, at a size
 * limit, or when the op sequence starts repeating (a training step). Only
 * results that something still holds become program outputs. The composed
 * program is found by a fingerprint of the segment (the nodes' program
 * keys, how they are wired, which results are live), never of values, so a
 * repeated step compiles once and replays. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/fingerprint.h"
#include "common/thread.h"
#include "hlo/hlo_internal.h"
#include "runtime/fused_internal.h"
#include "runtime/runtime_internal.h"
#include "tpuc/eager.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

/* ------------------------------- modes ---------------------------------- */

static atomic_int g_mode = -1; /* -1: not read from the environment yet */
static _Thread_local int t_override = -1;

int tpuc_eager_mode_parse(const char* name) {
  if (name == NULL) return -1;
  if (strcmp(name, "debug") == 0) return TPUC_EAGER_DEBUG;
  if (strcmp(name, "strict") == 0) return TPUC_EAGER_STRICT;
  if (strcmp(name, "fused") == 0) return TPUC_EAGER_FUSED;
  return -1;
}

const char* tpuc_eager_mode_name(tpuc_eager_mode m) {
  switch (m) {
    case TPUC_EAGER_DEBUG: return "debug";
    case TPUC_EAGER_STRICT: return "strict";
    case TPUC_EAGER_FUSED: return "fused";
  }
  return "?";
}

/* The default mode when TPUC_EAGER_MODE is not set (README explains why). */
#define DEFAULT_MODE TPUC_EAGER_FUSED

tpuc_eager_mode tpuc_eager_mode_global(void) {
  int m = atomic_load(&g_mode);
  if (m >= 0) return (tpuc_eager_mode)m;
  int from_env = tpuc_eager_mode_parse(getenv("TPUC_EAGER_MODE"));
  const char* blocking = getenv("TPUC_LAUNCH_BLOCKING");
  if (from_env < 0 && blocking != NULL && strcmp(blocking, "1") == 0)
    from_env = TPUC_EAGER_DEBUG;
  if (from_env < 0) from_env = DEFAULT_MODE;
  int expected = -1;
  atomic_compare_exchange_strong(&g_mode, &expected, from_env);
  return (tpuc_eager_mode)atomic_load(&g_mode);
}

static _Atomic(tpuc_eager_inherited_fn) g_inherited; /* zero: none */

void tpuc_eager_set_inherited(tpuc_eager_inherited_fn fn) {
  atomic_store(&g_inherited, fn);
}

tpuc_eager_mode tpuc_eager_mode_current(void) {
  if (t_override >= 0) return (tpuc_eager_mode)t_override;
  tpuc_eager_inherited_fn fn = atomic_load(&g_inherited);
  if (fn != NULL) {
    int m = fn();
    if (m >= TPUC_EAGER_DEBUG && m <= TPUC_EAGER_FUSED)
      return (tpuc_eager_mode)m;
  }
  return tpuc_eager_mode_global();
}

int tpuc_eager_thread_override(void) { return t_override; }

static bool valid_mode(int m) {
  return m == TPUC_EAGER_DEBUG || m == TPUC_EAGER_STRICT ||
         m == TPUC_EAGER_FUSED;
}

tpuc_status* tpuc_eager_set_global(tpuc_eager_mode mode) {
  if (!valid_mode((int)mode))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "eager mode must be debug, strict or fused");
  tpuc_eager_mode before = tpuc_eager_mode_global();
  atomic_store(&g_mode, (int)mode);
  if (before == TPUC_EAGER_FUSED && mode != TPUC_EAGER_FUSED)
    return tpuc_fused_flush(NULL, TPUC_FUSED_MODE);
  return NULL;
}

tpuc_status* tpuc_eager_set_thread_override(int mode) {
  if (mode != -1 && !valid_mode(mode))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "eager mode must be debug, strict or fused");
  bool was_fused = tpuc_eager_mode_current() == TPUC_EAGER_FUSED;
  t_override = mode;
  if (was_fused && tpuc_eager_mode_current() != TPUC_EAGER_FUSED)
    return tpuc_fused_flush(NULL, TPUC_FUSED_MODE);
  return NULL;
}

const char* tpuc_fused_reason_name(tpuc_fused_reason r) {
  switch (r) {
    case TPUC_FUSED_VALUE: return "value needed";
    case TPUC_FUSED_SYNC: return "synchronize";
    case TPUC_FUSED_LIMIT: return "size limit";
    case TPUC_FUSED_REPEAT: return "repeated op sequence";
    case TPUC_FUSED_MODE: return "mode change";
    case TPUC_FUSED_CHECK: return "argument check";
    case TPUC_FUSED_COLLECTIVE: return "collective";
    default: return "?";
  }
}

/* --------------------------- program texts ------------------------------ */

struct fz_text {
  atomic_int refs;
  tpuc_fingerprint fp;
  char* text;
  size_t len;
};

fz_text* fz_text_make(char* text, size_t len, tpuc_fingerprint fp) {
  fz_text* t = calloc(1, sizeof *t);
  if (t == NULL) {
    free(text);
    return NULL;
  }
  atomic_init(&t->refs, 1);
  t->fp = fp;
  t->text = text;
  t->len = len;
  return t;
}

void fz_text_retain(fz_text* t) {
  if (t) atomic_fetch_add(&t->refs, 1);
}

void fz_text_release(fz_text* t) {
  if (t == NULL || atomic_fetch_sub(&t->refs, 1) != 1) return;
  free(t->text);
  free(t);
}

/* A program text of its own for `text` (len bytes), or NULL (no memory). */
static fz_text* text_copy(const char* text, size_t len) {
  char* copy = malloc(len + 1);
  if (copy == NULL) return NULL;
  memcpy(copy, text, len);
  copy[len] = '\0';
  tpuc_fingerprint zero = {0, 0};
  return fz_text_make(copy, len, tpuc_fingerprint_bytes(zero, text, len));
}

const char* fz_text_str(const fz_text* t, size_t* len) {
  if (len) *len = t ? t->len : 0;
  return t ? t->text : NULL;
}

/* ------------------------------ segments -------------------------------- */

/* Lazy tags: node index * FZ_TAG + output index. */
#define FZ_TAG 16

typedef struct {
  fz_text* prog;
  const char* name;
  uint32_t nin, nout;
  tpuc_buffer* in[FZ_MAX_IN]; /* retained */
  bool internal[FZ_MAX_IN];   /* produced by an earlier node of the segment */
  tpuc_buffer* out[FZ_MAX_OUT]; /* lazy; the segment holds one reference */
  uint32_t uses[FZ_MAX_OUT];    /* inputs of later nodes that read it */
  bool has_check;               /* the last output is the argument check */
  tpuc_code check_code;
  const char* check_msg;
} fz_node;

typedef struct fz_seg {
  tpuc_client* client;
  int device;
  fz_node* nodes;
  size_t n, cap;
  tpuc_fingerprint fp; /* of the nodes' programs and their wiring */
  /* Where each window of FZ_WINDOW consecutive op programs last ended
   * (hash -> n), to find where the op sequence starts over. */
  uint64_t* win_hash;
  uint32_t* win_end;
  size_t win_cap;
  /* A graph capture (fz_capture_start): nothing is cut for a repeat, the
   * size limit or an argument check; any run of the segment meanwhile
   * (a value needed on the host, a synchronize) breaks the capture. */
  bool capturing;
  bool broken;
  char broke[160];
  int saved_override; /* the thread's mode override before the capture */
  /* Random ops' generator draws recorded during the capture. */
  tpuc_buffer** rng_bufs;
  uint64_t (*rng_vals)[2];
  size_t nrng, rng_cap;
  /* Taken out of the open segments with a collective as its last node,
   * while its rank waits for the other ranks (tpuc_fused_group_run): a
   * read of its values waits on g_group_cv. */
  bool in_group;
} fz_seg;

/* All fused state is under one recursive lock (a segment's run may need the
 * value of another device's segment). */
static pthread_mutex_t g_mu;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

#define FZ_MAX_OPEN 16
static fz_seg* g_open[FZ_MAX_OPEN];
static size_t g_nopen;
/* Statistics, the event log, the segment program table and the pending
 * error are shared with the background thread, under their own lock: a
 * leaf, never held while waiting for anything. */
static pthread_mutex_t g_smu = PTHREAD_MUTEX_INITIALIZER;
/* An error of a segment that ran without anybody waiting for it: reported
 * at the next flush. */
static tpuc_status* g_pending_error;

static tpuc_fused_stats g_stats;
#define FZ_EVENTS 256
static tpuc_fused_event g_events[FZ_EVENTS];
static size_t g_nevents; /* total ever logged */

static void slock(void) { pthread_mutex_lock(&g_smu); }
static void sunlock(void) { pthread_mutex_unlock(&g_smu); }

static void jobs_atfork_prepare(void);
static void jobs_atfork_parent(void);
static void jobs_atfork_child(void);

static void init_once(void) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&g_mu, &a);
  pthread_mutexattr_destroy(&a);
  pthread_atfork(jobs_atfork_prepare, jobs_atfork_parent, jobs_atfork_child);
}

/* How many times the calling thread holds g_mu. */
static _Thread_local int t_depth;

static void lock(void) {
  pthread_once(&g_once, init_once);
  pthread_mutex_lock(&g_mu);
  t_depth++;
}
static void unlock(void) {
  t_depth--;
  pthread_mutex_unlock(&g_mu);
}

/* Signalled (with g_mu) when a segment leaves a collective. */
static pthread_cond_t g_group_cv = PTHREAD_COND_INITIALIZER;

static size_t max_ops(void) {
  static size_t n = 0;
  if (n == 0) n = tpuc_env_size("TPUC_FUSED_MAX_OPS", 4096, 2);
  return n;
}

/* The shortest op sequence counted as a repeat (a step). */
static size_t min_period(void) {
  static size_t n = 0;
  if (n == 0) n = tpuc_env_size("TPUC_FUSED_MIN_PERIOD", 16, 2);
  return n;
}
#define FZ_WINDOW 4

/* A segment is compiled as one program once it recurs like a loop's body:
 * at its fuse_after()-th run that followed its run before within
 * fuse_near() segments (the first run counts), or at its
 * FZ_FAR_RUNS * fuse_after()-th run however far apart its runs were. Its
 * runs before that go op by op, each op by its own program, the one strict
 * mode runs. Those programs are few and shared (every layer of a model, every
 * segment that contains the op at those shapes), where a segment's program
 * serves that segment alone and costs more to compile than its ops' own
 * programs do together (hundreds of its op-by-op runs on XLA's CPU
 * compiler). So code that runs once (a test, a first step, a shape seen
 * once) pays for no program it will not run again, and neither does code
 * that recurs only at long intervals: each step of a `generate` whose cache
 * grows is a new shape, so its segments recur only with the next call,
 * a hundred segments later. Read at each use: a test may change them.
 * The counts are per process and never look at the compile cache, so a
 * run's results do not depend on what an earlier process left there.
 *
 * A small segment (every value it makes at most FZ_SMALL_BYTES) gains
 * little from its program: it saves the op-by-op run's dispatch, about 30
 * us per op per run on XLA's CPU plugin, against about 6 ms per op to
 * compile (a tiny BERT forward: op by op 5-10 ms, its programs 2.7 ms,
 * compiling them 0.9 s), so it pays for itself after a hundred runs or
 * more. Such segments (a test's tiny models, a decoding step) are compiled
 * at their FZ_SMALL_AFTER-th near run when TPUC_FUSE_AFTER is not set;
 * TPUC_FUSE_AFTER set applies to every segment. */
#define FZ_SMALL_BYTES (256 * 1024)
#define FZ_SMALL_AFTER 64
static size_t fuse_after_for(bool small) {
  size_t set = tpuc_env_size("TPUC_FUSE_AFTER", 0, 1); /* 0: unset or invalid */
  return set ? set : small ? FZ_SMALL_AFTER : 3;
}
static size_t fuse_after(void) { return fuse_after_for(false); }
static size_t fuse_near(void) {
  return tpuc_env_size("TPUC_FUSE_NEAR", 64, 1);
}
#define FZ_FAR_RUNS 4

/* Runs of each segment key so far that had no program (under g_mu): all
 * of them, those that came near the run before, and the segment count
 * (g_nsegs) at the last one. When the table is three quarters full it
 * starts over: a forgotten segment only runs op by op a few times more. */
#define FZ_SEEN_CAP 16384
typedef struct {
  tpuc_fingerprint key;
  uint32_t runs, near;
  uint64_t last;
} fz_seen;
static fz_seen g_seen[FZ_SEEN_CAP];
static size_t g_nseen;
static uint64_t g_nsegs; /* segments run so far (under g_mu) */

/* Counts one more run of segment `key` with no program; returns whether
 * this run compiles it. */
static bool fuse_now(tpuc_fingerprint key, size_t after) {
  if (after <= 1) return true;
  size_t mask = FZ_SEEN_CAP - 1, i = (size_t)key.lo & mask;
  for (; g_seen[i].runs != 0; i = (i + 1) & mask)
    if (tpuc_fingerprint_eq(g_seen[i].key, key)) {
      fz_seen* e = &g_seen[i];
      if (e->runs < UINT32_MAX) e->runs++;
      if (g_nsegs - e->last <= fuse_near() && e->near < UINT32_MAX) e->near++;
      e->last = g_nsegs;
      return e->near >= after || e->runs >= FZ_FAR_RUNS * after;
    }
  if (g_nseen * 4 >= FZ_SEEN_CAP * 3) {
    memset(g_seen, 0, sizeof g_seen);
    g_nseen = 0;
    i = (size_t)key.lo & mask;
  }
  g_seen[i] = (fz_seen){key, 1, 1, g_nsegs};
  g_nseen++;
  return false;
}

/* Whether every value nodes [0, n) make is small (fuse_after_for). */
static bool seg_small(const fz_seg* s, size_t n) {
  for (size_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < s->nodes[i].nout; k++)
      if (tpuc_buffer_byte_size(s->nodes[i].out[k]) > FZ_SMALL_BYTES)
        return false;
  return true;
}

static void on_client_destroy(tpuc_client* client, void* user);

static fz_seg* open_segment(tpuc_client* client, int device, bool create) {
  for (size_t i = 0; i < g_nopen; i++)
    if (g_open[i]->client == client && g_open[i]->device == device)
      return g_open[i];
  if (!create || g_nopen == FZ_MAX_OPEN) return NULL;
  tpuc_status* reg = tpuc_client_on_destroy(client, on_client_destroy, NULL);
  if (reg != NULL) {
    tpuc_status_free(reg);
    return NULL;
  }
  fz_seg* s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->client = client;
  s->device = device;
  g_open[g_nopen++] = s;
  return s;
}

static void node_clear(fz_node* nd) {
  for (uint32_t i = 0; i < nd->nin; i++) tpuc_buffer_release(nd->in[i]);
  for (uint32_t k = 0; k < nd->nout; k++) tpuc_buffer_release(nd->out[k]);
  fz_text_release(nd->prog);
  memset(nd, 0, sizeof *nd);
}

/* The running fingerprint over node i: its program and its wiring. */
static tpuc_fingerprint node_fp(tpuc_fingerprint fp, const fz_node* nd) {
  fp = tpuc_fingerprint_bytes(fp, &nd->prog->fp, sizeof nd->prog->fp);
  for (uint32_t i = 0; i < nd->nin; i++) {
    int64_t w = nd->internal[i] ? tpuc_lazy_tag(nd->in[i]) : -1;
    fp = tpuc_fingerprint_bytes(fp, &w, sizeof w);
  }
  return fp;
}

static void log_event(const tpuc_fused_event* e) {
  slock();
  g_events[g_nevents % FZ_EVENTS] = *e;
  g_nevents++;
  sunlock();
}

/* ------------------------- segment programs ----------------------------- */

/* Composed programs, by segment fingerprint. */
typedef struct {
  tpuc_fingerprint key;
  tpuc_client* client;
  tpuc_executable* exe;
} fz_prog;

#define FZ_PROGS_MAX 512
static fz_prog g_progs[FZ_PROGS_MAX];
static size_t g_nprogs;

/* What the last compiled segment of each op-name sequence looked like, to
 * say what changed when the same sequence compiles again. */
typedef struct {
  tpuc_fingerprint names;
  size_t n;
  tpuc_fingerprint* node_fps; /* per node: program fingerprint */
  tpuc_fingerprint key;
} fz_shape;
#define FZ_SHAPES 64
static fz_shape g_shapes[FZ_SHAPES];
static size_t g_nshapes;

static tpuc_executable* prog_lookup(tpuc_client* client,
                                    tpuc_fingerprint key) {
  tpuc_executable* exe = NULL;
  slock();
  for (size_t i = 0; i < g_nprogs && exe == NULL; i++)
    if (g_progs[i].client == client &&
        tpuc_fingerprint_eq(g_progs[i].key, key)) {
      tpuc_executable_retain(g_progs[i].exe);
      exe = g_progs[i].exe;
    }
  sunlock();
  return exe;
}

static void prog_remember(tpuc_client* client, tpuc_fingerprint key,
                          tpuc_executable* exe) {
  slock();
  size_t slot = g_nprogs < FZ_PROGS_MAX ? g_nprogs++
                                        : (size_t)(key.lo % FZ_PROGS_MAX);
  tpuc_executable* old = g_progs[slot].exe;
  tpuc_executable_retain(exe);
  g_progs[slot] = (fz_prog){key, client, exe};
  sunlock();
  if (old != NULL) tpuc_executable_release(old);
}

/* The program type of a (lazy) buffer, printed. */
static void sb_type(hlo_sb* b, const tpuc_buffer* buf) {
  tpuc_hlo_type t = tpuc_hlo_type_make(tpuc_buffer_dtype(buf),
                                       tpuc_buffer_dims(buf),
                                       tpuc_buffer_rank(buf));
  hlo_sb_type(b, &t);
}

/* The composed module of nodes [0, n) of `s`: externals in node order,
 * the live outputs (live[node * FZ_MAX_OUT + k]) returned in node order.
 * With `param_of`, external j is parameter param_of[j] of @main (externals
 * that are one buffer share a parameter; numbered in first-use order);
 * alias[] is then per parameter. */
/* Prints the reference to output k of node i. */
static void sb_ref(hlo_sb* b, const fz_seg* s, size_t i, uint32_t k) {
  if (s->nodes[i].nout == 1)
    hlo_sb_printf(b, "%%n%zu", i);
  else
    hlo_sb_printf(b, "%%n%zu#%u", i, k);
}

/* The first node with an argument check from node `from` on, or n. */
static size_t next_check(const fz_seg* s, size_t n, size_t from) {
  while (from < n && !s->nodes[from].has_check) from++;
  return from;
}

static tpuc_status* compose(const fz_seg* s, size_t n, const bool* live,
                            const int* alias, const size_t* param_of,
                            bool fold_checks, char** text, size_t* len) {
  hlo_sb b = {0};
  hlo_sb_append(&b, "module @tpuc_fused {\n", 21);
  static const char kHead[] = "  func.func public @main(";
  /* One private function per distinct node program. */
  for (size_t i = 0; i < n; i++) {
    const fz_text* t = s->nodes[i].prog;
    bool seen = false;
    for (size_t j = 0; j < i && !seen; j++)
      seen = tpuc_fingerprint_eq(s->nodes[j].prog->fp, t->fp);
    if (seen) continue;
    const char* at = strstr(t->text, kHead);
    size_t end = t->len;
    if (at == NULL || end < 2 || t->text[end - 2] != '}') {
      hlo_sb_free(&b);
      return tpuc_status_make(TPUC_INTERNAL, "unexpected program text of %s",
                              s->nodes[i].name);
    }
    char hex[33];
    tpuc_fingerprint_hex(t->fp, hex);
    hlo_sb_printf(&b, "  func.func private @p%s(", hex);
    const char* body = at + sizeof kHead - 1;
    hlo_sb_append(&b, body, (size_t)(t->text + end - 2 - body));
  }
  /* @main. */
  hlo_sb_append(&b, kHead, sizeof kHead - 1);
  size_t ext = 0, declared = 0;
  for (size_t i = 0; i < n; i++) {
    const fz_node* nd = &s->nodes[i];
    for (uint32_t a = 0; a < nd->nin; a++) {
      if (nd->internal[a]) continue;
      size_t p = param_of ? param_of[ext] : ext;
      ext++;
      if (p < declared) continue; /* a buffer already declared */
      hlo_sb_printf(&b, "%s%%e%zu: ", p ? ", " : "", p);
      sb_type(&b, nd->in[a]);
      if (alias != NULL && alias[p] >= 0)
        hlo_sb_printf(&b, " {tf.aliasing_output = %d : i32}", alias[p]);
      declared = p + 1;
    }
  }
  hlo_sb_append(&b, ") -> (", 6);
  size_t nret = 0;
  for (size_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < s->nodes[i].nout; k++) {
      if (!live[i * FZ_MAX_OUT + k]) continue;
      if (nret++) hlo_sb_append(&b, ", ", 2);
      sb_type(&b, s->nodes[i].out[k]);
    }
  /* With fold_checks, one more result: the OR of every argument check, so
   * a replay reads one flag instead of one per check. */
  size_t first_check = next_check(s, n, 0);
  if (fold_checks && first_check < n) {
    hlo_sb_append(&b, ", ", 2);
    sb_type(&b, s->nodes[first_check].out[s->nodes[first_check].nout - 1]);
  }
  hlo_sb_append(&b, ") {\n", 4);
  ext = 0;
  for (size_t i = 0; i < n; i++) {
    const fz_node* nd = &s->nodes[i];
    char hex[33];
    tpuc_fingerprint_hex(nd->prog->fp, hex);
    if (nd->nout == 1)
      hlo_sb_printf(&b, "    %%n%zu = func.call @p%s(", i, hex);
    else
      hlo_sb_printf(&b, "    %%n%zu:%u = func.call @p%s(", i, nd->nout, hex);
    for (uint32_t a = 0; a < nd->nin; a++) {
      if (a) hlo_sb_append(&b, ", ", 2);
      if (!nd->internal[a]) {
        hlo_sb_printf(&b, "%%e%zu", param_of ? param_of[ext] : ext);
        ext++;
        continue;
      }
      int64_t tag = tpuc_lazy_tag(nd->in[a]);
      size_t src = (size_t)(tag / FZ_TAG), k = (size_t)(tag % FZ_TAG);
      if (s->nodes[src].nout == 1)
        hlo_sb_printf(&b, "%%n%zu", src);
      else
        hlo_sb_printf(&b, "%%n%zu#%zu", src, k);
    }
    hlo_sb_append(&b, ") : (", 5);
    for (uint32_t a = 0; a < nd->nin; a++) {
      if (a) hlo_sb_append(&b, ", ", 2);
      sb_type(&b, nd->in[a]);
    }
    hlo_sb_append(&b, ") -> (", 6);
    for (uint32_t k = 0; k < nd->nout; k++) {
      if (k) hlo_sb_append(&b, ", ", 2);
      sb_type(&b, nd->out[k]);
    }
    hlo_sb_append(&b, ")\n", 2);
  }
  size_t folds = 0;
  if (fold_checks && first_check < n) {
    const fz_node* f = &s->nodes[first_check];
    for (size_t i = next_check(s, n, first_check + 1); i < n;
         i = next_check(s, n, i + 1)) {
      hlo_sb_printf(&b, "    %%chk%zu = stablehlo.or ", folds);
      if (folds == 0)
        sb_ref(&b, s, first_check, f->nout - 1);
      else
        hlo_sb_printf(&b, "%%chk%zu", folds - 1);
      hlo_sb_append(&b, ", ", 2);
      sb_ref(&b, s, i, s->nodes[i].nout - 1);
      hlo_sb_append(&b, " : ", 3);
      sb_type(&b, f->out[f->nout - 1]);
      hlo_sb_append(&b, "\n", 1);
      folds++;
    }
  }
  hlo_sb_append(&b, "    \"func.return\"(", 18);
  size_t r = 0;
  for (size_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < s->nodes[i].nout; k++) {
      if (!live[i * FZ_MAX_OUT + k]) continue;
      if (r++) hlo_sb_append(&b, ", ", 2);
      sb_ref(&b, s, i, k);
    }
  if (fold_checks && first_check < n) {
    hlo_sb_append(&b, ", ", 2);
    if (folds == 0)
      sb_ref(&b, s, first_check, s->nodes[first_check].nout - 1);
    else
      hlo_sb_printf(&b, "%%chk%zu", folds - 1);
  }
  hlo_sb_append(&b, ") : (", 5);
  r = 0;
  for (size_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < s->nodes[i].nout; k++) {
      if (!live[i * FZ_MAX_OUT + k]) continue;
      if (r++) hlo_sb_append(&b, ", ", 2);
      sb_type(&b, s->nodes[i].out[k]);
    }
  if (fold_checks && first_check < n) {
    hlo_sb_append(&b, ", ", 2);
    sb_type(&b, s->nodes[first_check].out[s->nodes[first_check].nout - 1]);
  }
  hlo_sb_append(&b, ") -> ()\n  }\n}\n", 14);
  if (b.oom) {
    hlo_sb_free(&b);
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  }
  *len = b.len;
  *text = hlo_sb_take(&b);
  return NULL;
}

/* Says what differs from the last segment with the same op names that
 * needed a program (in ev->changed); true when there is such a segment
 * with another key, i.e. compiling this one is a recompile. */
static bool note_recompile(const fz_seg* s, size_t n, tpuc_fingerprint key,
                           tpuc_fused_event* ev) {
  bool again = false;
  tpuc_fingerprint names = {0, 0};
  for (size_t i = 0; i < n; i++)
    names = tpuc_fingerprint_bytes(names, s->nodes[i].name,
                                   strlen(s->nodes[i].name));
  fz_shape* hit = NULL;
  for (size_t i = 0; i < g_nshapes && i < FZ_SHAPES; i++)
    if (tpuc_fingerprint_eq(g_shapes[i].names, names) && g_shapes[i].n == n)
      hit = &g_shapes[i];
  if (hit != NULL && !tpuc_fingerprint_eq(hit->key, key)) {
    again = true;
    size_t i = 0;
    while (i < n && tpuc_fingerprint_eq(hit->node_fps[i], s->nodes[i].prog->fp))
      i++;
    if (i < n)
      snprintf(ev->changed, sizeof ev->changed,
               "op %zu (%s): argument shapes, dtypes, layouts or options",
               i, s->nodes[i].name);
    else
      snprintf(ev->changed, sizeof ev->changed,
               "which results are live, or how the ops are wired");
  }
  if (hit == NULL) {
    hit = &g_shapes[g_nshapes % FZ_SHAPES];
    g_nshapes++;
    free(hit->node_fps);
    memset(hit, 0, sizeof *hit);
  }
  tpuc_fingerprint* fps = malloc(sizeof *fps * (n ? n : 1));
  if (fps == NULL) return again;
  for (size_t i = 0; i < n; i++) fps[i] = s->nodes[i].prog->fp;
  free(hit->node_fps);
  hit->names = names;
  hit->n = n;
  hit->node_fps = fps;
  hit->key = key;
  return again;
}

/* Counts a segment program obtained through the compile cache. */
static void account_program(tpuc_fused_event* ev, tpuc_cache_source src,
                            bool again) {
  ev->source = src == TPUC_CACHE_COMPILED ? 1
               : src == TPUC_CACHE_MEMORY ? 2
                                          : 3;
  slock();
  if (src == TPUC_CACHE_COMPILED) {
    g_stats.compiles++;
    g_stats.compile_seconds += ev->seconds;
    g_stats.recompiles += again;
  } else {
    g_stats.cache_hits++;
    if (src == TPUC_CACHE_DISK) g_stats.disk_hits++;
  }
  sunlock();
  if (src != TPUC_CACHE_COMPILED || !again) ev->changed[0] = '\0';
}

/* ------------------------- background thread ---------------------------- *
 * A segment that runs because of a step boundary or the size limit is not
 * waited for, so its program is compiled (or loaded) and run on a
 * background thread while the calling thread keeps recording. Its live
 * results get owner &g_job_owner and tag = the job's sequence number; a
 * reader waits for that job. Jobs run in submission order, so a job's
 * inputs from earlier jobs are ready when it runs. The background thread
 * takes neither g_mu nor any lock while it waits; a finished job is retired
 * (its references dropped) by a thread that holds g_mu. */

typedef struct fz_job {
  struct fz_job* next;
  uint64_t seq;
  tpuc_client* client;
  int device;
  tpuc_fingerprint key;
  char* text; /* the composed program, when exe is NULL */
  size_t len;
  bool again; /* compiling it is a recompile */
  tpuc_executable* exe;
  tpuc_buffer** args; /* retained, each holds + 1 */
  bool* donate;
  size_t nargs;
  tpuc_buffer** outs; /* lazy, retained, each holds + 1 */
  size_t nout;
  size_t nops;
  tpuc_fused_event ev;
} fz_job;

static char g_job_owner; /* the lazy owner of results a job computes */
static pthread_mutex_t g_jmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_jwork = PTHREAD_COND_INITIALIZER;
static pthread_cond_t g_jdone = PTHREAD_COND_INITIALIZER;
static fz_job *g_queue, *g_queue_tail; /* submitted, not started */
static fz_job* g_finished;             /* done, not retired */
static uint64_t g_submitted, g_completed;
static bool g_worker_running;

static bool background_enabled(void) {
  static int on = -1;
  if (on < 0) {
    const char* v = getenv("TPUC_FUSED_ASYNC");
    on = !(v != NULL && strcmp(v, "0") == 0);
  }
  return on;
}

/* Waits until job `seq` (and every job before it) is done. */
static void jobs_wait(uint64_t seq) {
  pthread_mutex_lock(&g_jmu);
  while (g_completed < seq) pthread_cond_wait(&g_jdone, &g_jmu);
  pthread_mutex_unlock(&g_jmu);
}

static void jobs_wait_all(void) {
  pthread_mutex_lock(&g_jmu);
  uint64_t last = g_submitted;
  pthread_mutex_unlock(&g_jmu);
  jobs_wait(last);
}

static void job_free(fz_job* j) {
  for (size_t i = 0; i < j->nargs; i++) {
    tpuc_lazy_add_holds(j->args[i], -1);
    tpuc_buffer_release(j->args[i]);
  }
  for (size_t i = 0; i < j->nout; i++) {
    tpuc_lazy_add_holds(j->outs[i], -1);
    tpuc_buffer_release(j->outs[i]);
  }
  if (j->exe != NULL) tpuc_executable_release(j->exe);
  free(j->text);
  free(j->args);
  free(j->donate);
  free(j->outs);
  free(j);
}

/* Under g_mu: drops the references of finished jobs. */
static void jobs_retire(void) {
  pthread_mutex_lock(&g_jmu);
  fz_job* j = g_finished;
  g_finished = NULL;
  pthread_mutex_unlock(&g_jmu);
  while (j != NULL) {
    fz_job* next = j->next;
    job_free(j);
    j = next;
  }
}

static void keep_error(tpuc_status* st);

/* The program of a segment: `*exe` when it came from the program table
 * (counted as a hit), else compiled or loaded through the compile cache
 * and remembered under `key`. */
static tpuc_status* segment_program(tpuc_client* client, tpuc_fingerprint key,
                                    const char* text, size_t len, bool again,
                                    tpuc_fused_event* ev,
                                    tpuc_executable** exe) {
  if (*exe != NULL) {
    ev->changed[0] = '\0';
    slock();
    g_stats.table_hits++;
    sunlock();
    return NULL;
  }
  tpuc_cache_source src = TPUC_CACHE_COMPILED;
  double t0 = tpuc_now_seconds();
  tpuc_status* st = tpuc_compile(client, text, len, NULL, exe, &src);
  ev->seconds = tpuc_now_seconds() - t0;
  if (st == NULL) {
    account_program(ev, src, again);
    prog_remember(client, key, *exe);
  } else if (getenv("TPUC_FUSED_DUMP") != NULL) {
    fprintf(stderr, "%.*s\n", (int)len, text);
  }
  return st;
}

/* Counts a segment that ran. */
static void account_run(size_t nops, size_t nout, const bool* donate,
                        size_t nargs) {
  size_t donated = 0;
  for (size_t i = 0; i < nargs; i++) donated += donate[i];
  slock();
  g_stats.segments++;
  g_stats.ops_run += nops;
  g_stats.outputs += nout;
  g_stats.donated += donated;
  sunlock();
}

/* On the background thread: compile or load the program, run it, fill or
 * fail the results. */
static void job_run(fz_job* j) {
  tpuc_status* st = NULL;
  tpuc_fused_event* ev = &j->ev;
  /* An earlier job may have compiled it since the segment was cut. */
  if (j->exe == NULL) j->exe = prog_lookup(j->client, j->key);
  st = segment_program(j->client, j->key, j->text, j->len, j->again, ev,
                       &j->exe);
  tpuc_buffer** real = calloc(j->nout ? j->nout : 1, sizeof *real);
  if (st == NULL && real == NULL)
    st = tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  if (st == NULL) st = tpuc_values_ensure(j->args, j->nargs);
  if (st == NULL)
    st = tpuc_execute(j->exe, j->device, j->args, j->nargs, j->donate, real,
                      j->nout);
  if (st == NULL) {
    for (size_t i = 0; i < j->nout; i++) tpuc_lazy_fill(j->outs[i], real[i]);
    account_run(j->nops, j->nout, j->donate, j->nargs);
  } else {
    st = tpuc_status_annotate(st, "fused segment of %zu ops from %s", j->nops,
                              ev->first_op);
    for (size_t i = 0; i < j->nout; i++)
      tpuc_lazy_fail(j->outs[i], tpuc_status_code(st),
                     tpuc_status_message(st));
    keep_error(st);
  }
  free(real);
  log_event(ev);
}

static void* worker_main(void* arg) {
  (void)arg;
  pthread_mutex_lock(&g_jmu);
  for (;;) {
    while (g_queue == NULL) pthread_cond_wait(&g_jwork, &g_jmu);
    fz_job* j = g_queue;
    g_queue = j->next;
    if (g_queue == NULL) g_queue_tail = NULL;
    pthread_mutex_unlock(&g_jmu);
    job_run(j);
    pthread_mutex_lock(&g_jmu);
    j->next = g_finished;
    g_finished = j;
    g_completed = j->seq;
    pthread_cond_broadcast(&g_jdone);
  }
  return NULL;
}

/* At exit the plugin is about to be unloaded (its static objects
 * destroyed): no job may be compiling or running in it. */
static void jobs_atexit(void) { jobs_wait_all(); }

/* Queues `j` (its outputs must already be handed to &g_job_owner with
 * j->seq); false when no background thread could be started. */
static bool job_submit(fz_job* j) {
  static bool at_exit;
  pthread_mutex_lock(&g_jmu);
  if (!at_exit) at_exit = atexit(jobs_atexit) == 0;
  if (!g_worker_running) {
    g_worker_running = tpuc_thread_start_detached(worker_main);
    if (!g_worker_running) {
      pthread_mutex_unlock(&g_jmu);
      return false;
    }
  }
  j->next = NULL;
  if (g_queue_tail != NULL)
    g_queue_tail->next = j;
  else
    g_queue = j;
  g_queue_tail = j;
  pthread_cond_signal(&g_jwork);
  pthread_mutex_unlock(&g_jmu);
  return true;
}

/* The next job's sequence number (jobs are numbered from 1). */
static uint64_t job_next_seq(void) {
  pthread_mutex_lock(&g_jmu);
  uint64_t seq = ++g_submitted;
  pthread_mutex_unlock(&g_jmu);
  return seq;
}

/* fork: the child has no background thread; it starts a new one if it
 * needs one. Jobs in flight at the fork are lost to the child (its device
 * client is not usable after a fork anyway). */
static void jobs_atfork_prepare(void) {
  pthread_mutex_lock(&g_jmu);
  pthread_mutex_lock(&g_smu);
}
static void jobs_atfork_parent(void) {
  pthread_mutex_unlock(&g_smu);
  pthread_mutex_unlock(&g_jmu);
}
static void jobs_atfork_child(void) {
  pthread_mutex_unlock(&g_smu);
  pthread_mutex_unlock(&g_jmu);
  g_worker_running = false;
  g_queue = g_queue_tail = NULL;
  g_completed = g_submitted;
}

static void fail_outputs(fz_seg* s, size_t n, const tpuc_status* st) {
  for (size_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < s->nodes[i].nout; k++)
      if (tpuc_lazy_owner(s->nodes[i].out[k]) == s)
        tpuc_lazy_fail(s->nodes[i].out[k], tpuc_status_code(st),
                       tpuc_status_message(st));
}

static void windows_reset(fz_seg* s) {
  if (s->win_hash) memset(s->win_hash, 0, sizeof *s->win_hash * s->win_cap);
}

/* Whether two buffers have one dtype and shape. */
static bool same_type(const tpuc_buffer* a, const tpuc_buffer* b) {
  return tpuc_buffer_dtype(a) == tpuc_buffer_dtype(b) &&
         tpuc_buffer_rank(a) == tpuc_buffer_rank(b) &&
         memcmp(tpuc_buffer_dims(a), tpuc_buffer_dims(b),
                sizeof(int64_t) * (size_t)tpuc_buffer_rank(b)) == 0;
}

/* Whether the segment may give input b's memory to one of its results:
 * nothing but the segment holds it (its storage already has its new
 * value), and no other segment's run will read it. */
static bool donatable(tpuc_buffer* b) {
  void* owner = tpuc_lazy_owner(b);
  return (owner == NULL || owner == &g_job_owner) &&
         tpuc_buffer_refs(b) - tpuc_lazy_holds(b) == 1;
}

/* Chooses alias[j] (a live result's index, or -1) and donate[j] for the
 * segment's n nodes and their next external inputs args[].
 *
 * An input goes first to the first live result on the chain of its own
 * updates: the nodes whose first operand (an in-place op's self) is the
 * input, then that node's first result, and so on. Any other pairing of equal
 * types is correct, but a result written over another input's memory
 * while that input is still to be read makes XLA copy both (an
 * optimizer's step over many parameters of one shape: a copy of each).
 * Inputs left over go to the first free result of their type. */
static void pair_donations(const fz_seg* s, size_t n, const bool* live,
                           size_t nlive, tpuc_buffer** args, size_t next,
                           int* alias, bool* donate) {
  for (size_t j = 0; j < next; j++) alias[j] = -1;
  long* origin = malloc(sizeof *origin * (n ? n : 1));
  tpuc_buffer** out_bufs = calloc(nlive ? nlive : 1, sizeof *out_bufs);
  long* out_origin = malloc(sizeof *out_origin * (nlive ? nlive : 1));
  bool* taken = calloc(nlive ? nlive : 1, sizeof *taken);
  bool* ok = calloc(next ? next : 1, sizeof *ok);
  if (origin == NULL || out_bufs == NULL || out_origin == NULL ||
      taken == NULL || ok == NULL)
    goto done;
  size_t e = 0, r = 0;
  for (size_t i = 0; i < n; i++) {
    const fz_node* nd = &s->nodes[i];
    origin[i] = -1;
    for (uint32_t a = 0; a < nd->nin; a++) {
      if (nd->internal[a]) {
        if (a == 0) {
          int64_t tag = tpuc_lazy_tag(nd->in[0]);
          size_t src = (size_t)(tag / FZ_TAG);
          if (src < i && tag % FZ_TAG == 0) origin[i] = origin[src];
        }
        continue;
      }
      if (a == 0) origin[i] = (long)e;
      e++;
    }
    for (uint32_t k = 0; k < nd->nout; k++) {
      if (!live[i * FZ_MAX_OUT + k]) continue;
      out_bufs[r] = nd->out[k];
      out_origin[r] = k == 0 ? origin[i] : -1;
      r++;
    }
  }
  for (size_t j = 0; j < next; j++) ok[j] = donatable(args[j]);
  for (size_t q = 0; q < nlive; q++) {
    long j = out_origin[q];
    if (j < 0 || !ok[j] || alias[j] >= 0 || !same_type(out_bufs[q], args[j]))
      continue;
    taken[q] = true;
    alias[j] = (int)q;
    donate[j] = true;
  }
  for (size_t j = 0; j < next; j++) {
    if (!ok[j] || alias[j] >= 0) continue;
    for (size_t q = 0; q < nlive; q++) {
      if (taken[q] || !same_type(out_bufs[q], args[j])) continue;
      taken[q] = true;
      alias[j] = (int)q;
      donate[j] = true;
      break;
    }
  }
done:
  free(origin);
  free(out_bufs);
  free(out_origin);
  free(taken);
  free(ok);
}

/* The argument checks of the first n nodes, in op order, after they ran. */
static tpuc_status* read_checks(const fz_seg* s, size_t n) {
  tpuc_status* st = NULL;
  for (size_t i = 0; st == NULL && i < n; i++) {
    const fz_node* nd = &s->nodes[i];
    if (!nd->has_check) continue;
    uint8_t bad = 0;
    st = tpuc_buffer_to_host(nd->out[nd->nout - 1], &bad, 1);
    if (st == NULL && bad)
      st = tpuc_status_make(nd->check_code, "%s",
                            nd->check_msg ? nd->check_msg : "bad argument");
  }
  return st;
}

/* Runs the first n nodes one at a time, each by its own program through the
 * compile cache (fuse_after()). Nothing is donated. The live results get
 * their values; the others go as soon as the last node that reads them has
 * run. */
static tpuc_status* run_by_ops(fz_seg* s, size_t n, const bool* live) {
  tpuc_buffer** val = calloc(n * FZ_MAX_OUT, sizeof *val);
  uint32_t* left = calloc(n * FZ_MAX_OUT, sizeof *left);
  if (val == NULL || left == NULL) {
    free(val);
    free(left);
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  }
  /* The nodes' programs that are new compile on helper threads while the
   * nodes before them run (a first run is compile-bound). */
  const char** texts = malloc(sizeof *texts * (n ? n : 1));
  size_t* lens = malloc(sizeof *lens * (n ? n : 1));
  tpuc_cache_ahead* ahead = NULL;
  if (texts != NULL && lens != NULL) {
    for (size_t i = 0; i < n; i++) {
      texts[i] = s->nodes[i].prog->text;
      lens[i] = s->nodes[i].prog->len;
    }
    ahead = tpuc_cache_ahead_start(s->client, texts, lens, n);
  }
  tpuc_status* st = NULL;
  for (size_t i = 0; i < n; i++) {
    fz_node* nd = &s->nodes[i];
    for (uint32_t k = 0; k < nd->nout; k++)
      left[i * FZ_MAX_OUT + k] = nd->uses[k];
    for (uint32_t a = 0; st == NULL && a < nd->nin; a++)
      if (!nd->internal[a]) st = tpuc_value_ensure(nd->in[a]);
  }
  for (size_t i = 0; st == NULL && i < n; i++) {
    fz_node* nd = &s->nodes[i];
    tpuc_buffer* in[FZ_MAX_IN];
    for (uint32_t a = 0; a < nd->nin; a++) {
      int64_t tag = nd->internal[a] ? tpuc_lazy_tag(nd->in[a]) : -1;
      in[a] = tag < 0 ? nd->in[a]
                      : val[(size_t)(tag / FZ_TAG) * FZ_MAX_OUT + tag % FZ_TAG];
    }
    tpuc_executable* exe = NULL;
    tpuc_cache_ahead_help(ahead, i);
    st = tpuc_compile(s->client, nd->prog->text, nd->prog->len, NULL, &exe,
                      NULL);
    if (st == NULL)
      st = tpuc_execute(exe, s->device, in, nd->nin, NULL,
                        &val[i * FZ_MAX_OUT], nd->nout);
    if (exe != NULL) tpuc_executable_release(exe);
    if (st != NULL) {
      st = tpuc_status_annotate(st, "%s", nd->name);
      break;
    }
    for (uint32_t a = 0; a < nd->nin; a++) {
      if (!nd->internal[a]) continue;
      int64_t tag = tpuc_lazy_tag(nd->in[a]);
      size_t j = (size_t)(tag / FZ_TAG) * FZ_MAX_OUT + (size_t)(tag % FZ_TAG);
      if (--left[j] == 0 && !live[j]) {
        tpuc_buffer_release(val[j]);
        val[j] = NULL;
      }
    }
  }
  for (size_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < s->nodes[i].nout; k++) {
      size_t j = i * FZ_MAX_OUT + k;
      if (st == NULL && live[j]) {
        tpuc_lazy_fill(s->nodes[i].out[k], val[j]);
      } else if (val[j] != NULL) {
        tpuc_buffer_release(val[j]);
      }
    }
  tpuc_cache_ahead_finish(ahead);
  free(texts);
  free(lens);
  free(val);
  free(left);
  return st;
}

/* Marks the capture of `s` broken for a reason (a printf format); the
 * first reason stands. */
static void capture_broke(fz_seg* s, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void capture_broke(fz_seg* s, const char* fmt, ...) {
  if (s->broken) return;
  s->broken = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->broke, sizeof s->broke, fmt, ap);
  va_end(ap);
}

/* Marks which results of nodes [0, n) the run must hand out (live[node *
 * FZ_MAX_OUT + k]): argument checks, and results something holds beyond
 * the segment's own nodes. Returns how many; *any_check: some node has an
 * argument check. */
static size_t mark_live(const fz_seg* s, size_t n, bool* live,
                        bool* any_check) {
  size_t nlive = 0;
  *any_check = false;
  for (size_t i = 0; i < n; i++) {
    const fz_node* nd = &s->nodes[i];
    for (uint32_t k = 0; k < nd->nout; k++) {
      bool check = nd->has_check && k + 1 == nd->nout;
      bool l = check || tpuc_buffer_refs(nd->out[k]) > 1 + (int)nd->uses[k];
      live[i * FZ_MAX_OUT + k] = l;
      nlive += l;
      *any_check |= check;
    }
  }
  return nlive;
}

/* Whether an input given away may still be read by a segment on the
 * background thread that has not been enqueued yet. */
static bool gives_held(tpuc_buffer* const* args, const bool* donate,
                       size_t next) {
  for (size_t j = 0; j < next; j++)
    if (donate[j] && tpuc_lazy_holds(args[j]) > 0) return true;
  return false;
}

/* Runs nodes [0, n) of `s` as one program (or op by op, fuse_after()) and
 * removes them from the segment; the nodes after them stay recorded (their
 * inputs from the run ones become external). */
static tpuc_status* run_prefix(fz_seg* s, size_t n, tpuc_fused_reason why) {
  if (n == 0) return NULL;
  if (s->capturing)
    capture_broke(s, "%s at %s (op %zu of the graph)",
                  tpuc_fused_reason_name(why), s->nodes[n - 1].name, n - 1);
  /* Later nodes that read results of the ones that run: those results
   * become external inputs of theirs, and so live outputs here. */
  for (size_t i = n; i < s->n; i++) {
    fz_node* nd = &s->nodes[i];
    for (uint32_t a = 0; a < nd->nin; a++) {
      if (!nd->internal[a]) continue;
      int64_t tag = tpuc_lazy_tag(nd->in[a]);
      size_t src = (size_t)(tag / FZ_TAG);
      if (src >= n) continue;
      nd->internal[a] = false;
      s->nodes[src].uses[tag % FZ_TAG]--;
    }
  }
  bool* live = calloc(n * FZ_MAX_OUT, sizeof *live);
  if (live == NULL)
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  bool any_check = false;
  size_t nlive = mark_live(s, n, live, &any_check);
  tpuc_fused_event ev;
  memset(&ev, 0, sizeof ev);
  ev.reason = why;
  ev.ops = (uint32_t)n;
  ev.outputs = (uint32_t)nlive;
  snprintf(ev.first_op, sizeof ev.first_op, "%s", s->nodes[0].name);
  snprintf(ev.last_op, sizeof ev.last_op, "%s", s->nodes[n - 1].name);
  slock();
  g_stats.by_reason[why]++;
  if (nlive == 0) g_stats.segments_dropped++;
  sunlock();
  tpuc_status* st = NULL;
  bool submitted = false;
  if (nlive == 0) {
    ev.dropped = true;
  } else {
    size_t next = 0;
    for (size_t i = 0; i < n; i++)
      for (uint32_t a = 0; a < s->nodes[i].nin; a++)
        next += !s->nodes[i].internal[a];
    tpuc_buffer** args = malloc(sizeof *args * (next ? next : 1));
    int* alias = malloc(sizeof *alias * (next ? next : 1));
    bool* donate = calloc(next ? next : 1, sizeof *donate);
    tpuc_buffer** outs = calloc(nlive, sizeof *outs);
    if (args == NULL || alias == NULL || donate == NULL || outs == NULL) {
      free(args);
      free(alias);
      free(donate);
      free(outs);
      free(live);
      return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
    }
    size_t e = 0;
    for (size_t i = 0; i < n; i++)
      for (uint32_t a = 0; a < s->nodes[i].nin; a++)
        if (!s->nodes[i].internal[a]) args[e++] = s->nodes[i].in[a];
    /* Whole-storage in-place updates: an input nothing else holds any more
     * (its storage already has the new value) gives its memory to a live
     * output of its type -- first to the one its own updates lead to. */
    pair_donations(s, n, live, nlive, args, next, alias, donate);
    tpuc_fingerprint key = {0, 0};
    for (size_t i = 0; i < n; i++) key = node_fp(key, &s->nodes[i]);
    key = tpuc_fingerprint_bytes(key, live, n * FZ_MAX_OUT * sizeof *live);
    key = tpuc_fingerprint_bytes(key, alias, next * sizeof *alias);
    tpuc_executable* exe = prog_lookup(s->client, key);
    /* The first runs of a segment go op by op, whatever the compile cache
     * holds: which program computes a result (and so its rounding) must not
     * depend on what an earlier process compiled. A graph capture stays one
     * program. */
    g_nsegs++;
    bool by_ops = false;
    if (exe == NULL && !s->capturing) {
      bool small = seg_small(s, n);
      by_ops = !fuse_now(key, fuse_after_for(small));
      if (small && !by_ops) {
        slock();
        g_stats.small_compiled++;
        sunlock();
      }
    }
    /* A step boundary or the size limit: nobody waits for the results, so
     * the program is compiled and run in the background -- when it is not
     * in the program table yet, or when an input is still being computed
     * there (jobs run in order). */
    bool pending_in = false;
    for (size_t j = 0; j < next; j++)
      pending_in |= tpuc_lazy_owner(args[j]) == &g_job_owner;
    bool background = !by_ops && !any_check && background_enabled() &&
                      (why == TPUC_FUSED_REPEAT || why == TPUC_FUSED_LIMIT ||
                       why == TPUC_FUSED_COLLECTIVE) &&
                      (exe == NULL || pending_in);
    char* text = NULL;
    size_t len = 0;
    bool again = false;
    if (exe == NULL && !by_ops) {
      again = note_recompile(s, n, key, &ev);
      st = compose(s, n, live, alias, NULL, false, &text, &len);
    }
    /* Inputs another device's segment computes are run first: the
     * background thread never runs recorded segments. */
    for (size_t j = 0; background && st == NULL && j < next; j++) {
      void* o = tpuc_lazy_owner(args[j]);
      if (o != NULL && o != &g_job_owner) st = tpuc_value_ensure(args[j]);
    }
    fz_job* job = NULL;
    if (background && st == NULL) {
      job = calloc(1, sizeof *job);
      if (job != NULL) {
        job->args = malloc(sizeof *job->args * (next ? next : 1));
        job->donate = malloc(sizeof *job->donate * (next ? next : 1));
        job->outs = malloc(sizeof *job->outs * nlive);
        if (job->args == NULL || job->donate == NULL || job->outs == NULL) {
          free(job->args);
          free(job->donate);
          free(job->outs);
          free(job);
          job = NULL;
        }
      }
    }
    if (job != NULL) {
      job->seq = job_next_seq();
      job->client = s->client;
      job->device = s->device;
      job->key = key;
      job->text = text;
      job->len = len;
      job->again = again;
      job->exe = exe;
      job->nargs = next;
      job->nops = n;
      job->nout = nlive;
      job->ev = ev;
      job->ev.background = true;
      text = NULL;
      exe = NULL;
      for (size_t j = 0; j < next; j++) {
        job->args[j] = args[j];
        job->donate[j] = donate[j];
        tpuc_buffer_retain(args[j]);
        tpuc_lazy_add_holds(args[j], 1);
      }
      size_t r = 0;
      for (size_t i = 0; i < n; i++)
        for (uint32_t k = 0; k < s->nodes[i].nout; k++) {
          if (!live[i * FZ_MAX_OUT + k]) continue;
          tpuc_buffer* o = s->nodes[i].out[k];
          tpuc_buffer_retain(o);
          tpuc_lazy_add_holds(o, 1);
          tpuc_lazy_set_owner(o, &g_job_owner, (int64_t)job->seq);
          job->outs[r++] = o;
        }
      slock();
      g_stats.background++;
      sunlock();
      submitted = true;
      if (!job_submit(job)) {
        /* No thread: run it here, as the thread would. */
        job_run(job);
        pthread_mutex_lock(&g_jmu);
        g_completed = job->seq;
        pthread_cond_broadcast(&g_jdone);
        pthread_mutex_unlock(&g_jmu);
        job_free(job);
      }
    }
    if (by_ops) {
      ev.source = TPUC_FUSED_SOURCE_BY_OPS;
      st = run_by_ops(s, n, live);
      if (st != NULL)
        st = tpuc_status_annotate(st, "fused segment of %zu ops from %s, op by op",
                                  n, s->nodes[0].name);
      if (st == NULL) {
        account_run(n, nlive, donate, 0);
        slock();
        g_stats.by_ops++;
        sunlock();
        if (any_check) st = read_checks(s, n);
      }
    } else if (st == NULL && job == NULL) {
      st = segment_program(s->client, key, text, len, again, &ev, &exe);
      /* An input given away here may still be read by a segment on the
       * background thread that has not been enqueued yet: let those go
       * first (PJRT orders a donation after the reads already enqueued). */
      if (gives_held(args, donate, next)) jobs_wait_all();
      if (st == NULL) st = tpuc_values_ensure(args, next);
      if (st == NULL)
        st = tpuc_execute(exe, s->device, args, next, donate, outs, nlive);
      if (st != NULL)
        st = tpuc_status_annotate(st, "fused segment of %zu ops from %s", n,
                                  s->nodes[0].name);
      if (st == NULL) {
        account_run(n, nlive, donate, next);
        size_t r = 0;
        for (size_t i = 0; i < n; i++)
          for (uint32_t k = 0; k < s->nodes[i].nout; k++)
            if (live[i * FZ_MAX_OUT + k])
              tpuc_lazy_fill(s->nodes[i].out[k], outs[r++]);
        if (any_check) st = read_checks(s, n);
      }
    }
    if (exe != NULL) tpuc_executable_release(exe);
    free(text);
    free(args);
    free(alias);
    free(donate);
    free(outs);
  }
  if (!submitted) log_event(&ev);
  if (st != NULL) fail_outputs(s, n, st);
  /* Results nothing holds are released with their nodes; the later nodes
   * move to the front and are retagged. */
  for (size_t i = 0; i < n; i++) node_clear(&s->nodes[i]);
  memmove(s->nodes, s->nodes + n, sizeof *s->nodes * (s->n - n));
  s->n -= n;
  s->fp = (tpuc_fingerprint){0, 0};
  for (size_t i = 0; i < s->n; i++) {
    for (uint32_t k = 0; k < s->nodes[i].nout; k++)
      tpuc_lazy_set_tag(s->nodes[i].out[k],
                               (int64_t)(i * FZ_TAG + k));
    s->fp = node_fp(s->fp, &s->nodes[i]);
  }
  free(live);
  windows_reset(s);
  return st;
}

tpuc_status* fz_materialize(tpuc_buffer* b, void* owner) {
  /* A job's result: wait for the job (without g_mu, so the background
   * thread itself can ask for results of earlier jobs). */
  if (owner != &g_job_owner) {
    lock();
    tpuc_status* st = NULL;
    void* o = tpuc_lazy_owner(b);
    /* Made by a segment whose rank waits in a collective: wait for it, if
     * this thread can let go of the fused state meanwhile. */
    while (o != NULL && o != &g_job_owner && ((fz_seg*)o)->in_group) {
      if (t_depth > 1) {
        unlock();
        return tpuc_status_make(
            TPUC_FAILED_PRECONDITION,
            "a value computed with a collective that its rank is waiting "
            "in was needed while running other ops; read it after the "
            "collective, or on the rank's own thread");
      }
      pthread_cond_wait(&g_group_cv, &g_mu);
      o = tpuc_lazy_owner(b);
    }
    if (o != NULL && o != &g_job_owner) {
      fz_seg* s = o;
      /* Everything up to the producer runs; later nodes stay recorded. */
      size_t upto = (size_t)(tpuc_lazy_tag(b) / FZ_TAG) + 1;
      if (upto > s->n) upto = s->n;
      st = run_prefix(s, upto, TPUC_FUSED_VALUE);
    }
    unlock();
    if (st != NULL) return st;
  }
  if (tpuc_lazy_owner(b) == &g_job_owner)
    jobs_wait((uint64_t)tpuc_lazy_tag(b));
  return NULL;
}

tpuc_status* tpuc_fused_flush(tpuc_client* client, tpuc_fused_reason why) {
  return tpuc_fused_flush_device(client, -1, why);
}

tpuc_status* tpuc_fused_flush_device(tpuc_client* client, int device,
                                     tpuc_fused_reason why) {
  lock();
  tpuc_status* st = NULL;
  for (size_t i = 0; i < g_nopen; i++) {
    fz_seg* s = g_open[i];
    if (client != NULL && s->client != client) continue;
    if (device >= 0 && s->device != device) continue;
    tpuc_status* e = run_prefix(s, s->n, why);
    if (st == NULL)
      st = e;
    else
      tpuc_status_free(e);
  }
  /* And whatever the background thread still has. */
  jobs_wait_all();
  jobs_retire();
  slock();
  if (st == NULL && g_pending_error != NULL) {
    st = g_pending_error;
    g_pending_error = NULL;
  }
  sunlock();
  unlock();
  return st;
}

tpuc_status* tpuc_fused_cut(tpuc_client* client, int device,
                            tpuc_fused_reason why) {
  lock();
  jobs_retire();
  for (size_t i = 0; i < g_nopen; i++) {
    fz_seg* s = g_open[i];
    if (s->client != client || s->device != device || s->n == 0) continue;
    keep_error(run_prefix(s, s->n, why));
    windows_reset(s);
  }
  unlock();
  return NULL;
}

/* ------------------- a collective as a segment's node -------------------
 * A rank of an in-process group (tpuc/group.h) in fused mode calls a
 * collective on a value its open segment computes: the segment, with the
 * collective appended as its last node, is offered to the group as ONE
 * program (tpuc_group_offer). When every rank offers the same one, it runs
 * across the ranks' devices: the ops before the collective and the
 * collective are one executable, and values only the collective reads are
 * never materialized. Otherwise (ranks that recorded different ops, a rank
 * in another mode, a segment that has not recurred often enough to be
 * compiled, as for any segment) each rank runs its segment as a cut and
 * the collective alone. While its rank waits for the others, the segment
 * is out of the open segments (a flush by another thread does not run it
 * on one device) and a read of its values from another thread waits. */

static tpuc_status* add_node(fz_seg* s, fz_text* prog, const char* name,
                             tpuc_buffer* const* in, size_t nin,
                             const tpuc_hlo_type* out_types, size_t nout,
                             bool has_check, tpuc_code check_code,
                             const char* check_msg);

/* Drops the last node of `s` (a collective that did not run): its output
 * is failed (nothing holds it but the caller) and its input's producer
 * loses a use. */
static void drop_last_node(fz_seg* s) {
  fz_node* nd = &s->nodes[s->n - 1];
  for (uint32_t a = 0; a < nd->nin; a++) {
    if (!nd->internal[a]) continue;
    int64_t tag = tpuc_lazy_tag(nd->in[a]);
    s->nodes[tag / FZ_TAG].uses[tag % FZ_TAG]--;
  }
  for (uint32_t k = 0; k < nd->nout; k++)
    if (tpuc_lazy_owner(nd->out[k]) == s)
      tpuc_lazy_fail(nd->out[k], TPUC_CANCELLED, "the collective did not run");
  node_clear(nd);
  s->n--;
  s->fp = (tpuc_fingerprint){0, 0};
  for (size_t i = 0; i < s->n; i++) s->fp = node_fp(s->fp, &s->nodes[i]);
}

static void seg_free(fz_seg* d) {
  for (size_t i = 0; i < d->n; i++) node_clear(&d->nodes[i]);
  free(d->nodes);
  free(d->win_hash);
  free(d->win_end);
  free(d);
}

tpuc_status* tpuc_fused_group_run(tpuc_group* g, const char* text, size_t len,
                                  const tpuc_hlo_type* out_type,
                                  const char* what, tpuc_buffer* arg,
                                  int64_t timeout_ms, tpuc_buffer** out) {
  if (g == NULL || text == NULL || out_type == NULL || arg == NULL ||
      out == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "group, program, argument or out is NULL");
  *out = NULL;
  tpuc_client* client = tpuc_group_client(g);
  int rank = tpuc_group_rank(g), size = tpuc_group_size(g);
  int device = tpuc_group_device(g, rank);
  if (tpuc_eager_mode_current() != TPUC_EAGER_FUSED)
    return tpuc_group_run(g, text, len, what, arg, timeout_ms, out);
  const char* env = getenv("TPUC_FUSED_COLLECTIVES");
  bool off = env != NULL && strcmp(env, "0") == 0;
  lock();
  jobs_retire();
  fz_seg* s = open_segment(client, device, false);
  bool offer_it = !off && s != NULL && !s->capturing && s->n > 0 &&
                  s->n < max_ops() && tpuc_lazy_owner(arg) == s;
  for (size_t i = 0; offer_it && i < s->n; i++)
    offer_it = !s->nodes[i].has_check;
  /* The segment's inputs must not wait for another segment meanwhile
   * (another rank's, which may be waiting in this very collective). */
  for (size_t i = 0; offer_it && i < s->n; i++)
    for (uint32_t a = 0; offer_it && a < s->nodes[i].nin; a++) {
      void* o = tpuc_lazy_owner(s->nodes[i].in[a]);
      offer_it = s->nodes[i].internal[a] || o == NULL || o == &g_job_owner;
    }
  tpuc_buffer* mine = NULL; /* the collective's result, lazy */
  if (offer_it) {
    fz_text* prog = text_copy(text, len);
    tpuc_status* st = prog == NULL ? tpuc_status_make(TPUC_RESOURCE_EXHAUSTED,
                                                      "out of host memory")
                                   : add_node(s, prog, "collective", &arg, 1,
                                              out_type, 1, false, TPUC_OK, NULL);
    if (prog != NULL) fz_text_release(prog);
    offer_it = st == NULL;
    tpuc_status_free(st);
  }
  size_t n = offer_it ? s->n : 0, nlive = 0, next = 0;
  bool* live = NULL;
  tpuc_buffer** args = NULL;
  int* alias = NULL;
  bool* donate = NULL;
  tpuc_buffer** outs = NULL;
  fz_seg* d = NULL;
  char* ptext = NULL;
  size_t plen = 0;
  tpuc_group_offer offer;
  memset(&offer, 0, sizeof offer);
  tpuc_fingerprint key = {0, 0};
  if (offer_it) {
    mine = s->nodes[n - 1].out[0];
    tpuc_buffer_retain(mine);
    for (size_t i = 0; i < n; i++)
      for (uint32_t a = 0; a < s->nodes[i].nin; a++)
        next += !s->nodes[i].internal[a];
    live = calloc(n * FZ_MAX_OUT, sizeof *live);
    args = malloc(sizeof *args * (next ? next : 1));
    alias = malloc(sizeof *alias * (next ? next : 1));
    donate = calloc(next ? next : 1, sizeof *donate);
    offer_it = live != NULL && args != NULL && alias != NULL && donate != NULL;
  }
  if (offer_it) {
    bool any_check; /* none: a node with a check is never offered */
    nlive = mark_live(s, n, live, &any_check);
    size_t e = 0;
    for (size_t i = 0; i < n; i++)
      for (uint32_t a = 0; a < s->nodes[i].nin; a++)
        if (!s->nodes[i].internal[a]) args[e++] = s->nodes[i].in[a];
    /* In-place updates give their inputs' memory to their results, as in
     * any segment (on this VM, fresh result memory costs more than the
     * collective saves). */
    pair_donations(s, n, live, nlive, args, next, alias, donate);
    /* The key: the ops and their wiring, the live results, the inputs
     * given to results, the devices. */
    key = tpuc_fingerprint_bytes(s->fp, live, n * FZ_MAX_OUT * sizeof *live);
    key = tpuc_fingerprint_bytes(key, alias, next * sizeof *alias);
    for (int r = 0; r < size; r++) {
      int dv = tpuc_group_device(g, r);
      key = tpuc_fingerprint_bytes(key, &dv, sizeof dv);
    }
    /* Compiled as any segment is, once it recurs (counted per rank). */
    offer.exe = prog_lookup(client, key);
    if (offer.exe == NULL) {
      g_nsegs++;
      tpuc_fingerprint per_rank =
          tpuc_fingerprint_bytes(key, &rank, sizeof rank);
      offer_it = fuse_now(per_rank, fuse_after_for(seg_small(s, n)));
    }
  }
  if (offer_it) {
    outs = calloc(nlive, sizeof *outs);
    d = calloc(1, sizeof *d);
    offer_it = outs != NULL && d != NULL;
  }
  if (offer_it && offer.exe == NULL) {
    tpuc_status* st = compose(s, n, live, alias, NULL, false, &ptext, &plen);
    offer_it = st == NULL;
    tpuc_status_free(st);
  }
  if (!offer_it) {
    /* The collective alone, after what the segment recorded. */
    if (mine != NULL) {
      drop_last_node(s);
      tpuc_buffer_release(mine);
    }
    if (offer.exe != NULL) tpuc_executable_release(offer.exe);
    free(live);
    free(args);
    free(alias);
    free(donate);
    free(outs);
    free(d);
    if (s != NULL && s->n > 0)
      keep_error(run_prefix(s, s->n, TPUC_FUSED_COLLECTIVE));
    unlock();
    return tpuc_group_run(g, text, len, what, arg, timeout_ms, out);
  }
  /* Take the segment out of the open ones while the rank waits. */
  bool had_exe = offer.exe != NULL;
  d->client = s->client;
  d->device = s->device;
  d->nodes = s->nodes;
  d->n = s->n;
  d->cap = s->cap;
  d->fp = s->fp;
  d->in_group = true;
  s->nodes = NULL;
  s->n = s->cap = 0;
  s->fp = (tpuc_fingerprint){0, 0};
  windows_reset(s);
  for (size_t i = 0; i < n; i++) {
    fz_node* nd = &d->nodes[i];
    for (uint32_t k = 0; k < nd->nout; k++)
      tpuc_lazy_set_owner(nd->out[k], d, (int64_t)(i * FZ_TAG + k));
  }
  bool wait_jobs = gives_held(args, donate, next);
  offer.key = key;
  offer.text = ptext;
  offer.len = plen;
  offer.args = args;
  offer.nargs = next;
  offer.donate = donate;
  offer.outs = outs;
  offer.nouts = nlive;
  offer.source = -1;
  unlock();
  /* An input given away may still be read by a segment on the background
   * thread not enqueued yet: those go first (as in run_prefix). */
  if (wait_jobs) jobs_wait_all();

  int how = TPUC_GROUP_RAN_PLAIN;
  tpuc_status* st = tpuc_group_run_offer(g, text, len, what, arg, &offer, timeout_ms, NULL,
                            &how);

  lock();
  d->in_group = false;
  bool ran = st == NULL && how == TPUC_GROUP_RAN_OFFER;
  tpuc_fused_event ev;
  memset(&ev, 0, sizeof ev);
  if (ran) {
    size_t r = 0;
    for (size_t i = 0; i < n; i++)
      for (uint32_t k = 0; k < d->nodes[i].nout; k++) {
        tpuc_buffer* o = d->nodes[i].out[k];
        if (live[i * FZ_MAX_OUT + k]) {
          tpuc_lazy_fill(o, outs[r++]);
        } else if (tpuc_lazy_owner(o) == d &&
                   tpuc_buffer_refs(o) > 1 + (int)d->nodes[i].uses[k]) {
          /* Taken by another thread while the rank waited. */
          tpuc_lazy_fail(o, TPUC_FAILED_PRECONDITION,
                         "a result of ops run with a collective, taken "
                         "from another thread while its rank waited");
        }
      }
    if (!had_exe && offer.exe != NULL) prog_remember(client, key, offer.exe);
    ev.reason = TPUC_FUSED_COLLECTIVE;
    ev.ops = (uint32_t)n;
    ev.outputs = (uint32_t)nlive;
    ev.seconds = offer.seconds;
    /* Counted where the program was compiled or loaded (the rank that
     * came last); the others had it from the group. */
    if (!had_exe && offer.source >= 0)
      account_program(&ev, (tpuc_cache_source)offer.source, false);
    snprintf(ev.first_op, sizeof ev.first_op, "%s", d->nodes[0].name);
    snprintf(ev.last_op, sizeof ev.last_op, "%s", d->nodes[n - 1].name);
    slock();
    g_stats.segments++;
    g_stats.ops_run += n;
    g_stats.outputs += nlive;
    g_stats.by_reason[TPUC_FUSED_COLLECTIVE]++;
    g_stats.group_segments++;
    sunlock();
    log_event(&ev);
    *out = mine;
    mine = NULL;
  } else {
    /* Nothing ran (the offers differ) or the call failed: the rank's own
     * ops run as a cut, then (when nothing failed) the collective alone. */
    drop_last_node(d);
    keep_error(run_prefix(d, d->n, TPUC_FUSED_COLLECTIVE));
  }
  if (offer.exe != NULL) tpuc_executable_release(offer.exe);
  seg_free(d);
  pthread_cond_broadcast(&g_group_cv);
  unlock();
  if (mine != NULL) tpuc_buffer_release(mine);
  free(ptext);
  free(args);
  free(alias);
  free(donate);
  free(outs);
  free(live);
  if (st == NULL && !ran)
    return tpuc_group_run(g, text, len, what, arg, timeout_ms, out);
  return st;
}

/* A segment's error that nobody waits for is kept for the next flush. */
static void keep_error(tpuc_status* st) {
  if (st == NULL) return;
  slock();
  if (g_pending_error == NULL) {
    g_pending_error = st;
    st = NULL;
  }
  sunlock();
  tpuc_status_free(st);
}

/* The hash of the FZ_WINDOW op programs ending at node n (exclusive). */
static uint64_t window_hash(const fz_seg* s, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ULL;
  for (size_t i = n - FZ_WINDOW; i < n; i++)
    h = (h ^ s->nodes[i].prog->fp.lo) * 0x100000001B3ULL + (h >> 29);
  return h ? h : 1;
}

/* True when the last FZ_WINDOW ops already occurred at least
 * min_period() ops earlier in the segment: the op sequence (a step) has
 * started over, and everything before this window is one period (after
 * any preamble). Remembers the window otherwise. A window that recurs
 * sooner keeps its first end: a loop whose body is shorter than
 * min_period() (a row written per iteration) is cut every few bodies, at
 * the first multiple of its period from min_period() on, instead of
 * growing to the size limit (a program of thousands of ops that XLA takes
 * minutes to compile). */
static bool repeats(fz_seg* s) {
  size_t n = s->n;
  if (n < FZ_WINDOW) return false;
  if (s->win_cap < 2 * max_ops() + 2) {
    size_t cap = 16;
    while (cap < 2 * max_ops() + 2) cap *= 2;
    uint64_t* h = calloc(cap, sizeof *h);
    uint32_t* e = calloc(cap, sizeof *e);
    if (h == NULL || e == NULL) {
      free(h);
      free(e);
      return false;
    }
    free(s->win_hash);
    free(s->win_end);
    s->win_hash = h;
    s->win_end = e;
    s->win_cap = cap;
  }
  uint64_t h = window_hash(s, n);
  size_t mask = s->win_cap - 1, i = (size_t)(h * 0x9E3779B97F4A7C15ULL) & mask;
  for (; s->win_hash[i] != 0; i = (i + 1) & mask) {
    if (s->win_hash[i] != h) continue;
    return n - s->win_end[i] >= min_period();
  }
  s->win_hash[i] = h;
  s->win_end[i] = (uint32_t)n;
  return false;
}

/* Appends a node to `s` (under g_mu): its lazy outputs, its inputs
 * (retained; those an earlier node makes are wired to it). */
static tpuc_status* add_node(fz_seg* s, fz_text* prog, const char* name,
                             tpuc_buffer* const* in, size_t nin,
                             const tpuc_hlo_type* out_types, size_t nout,
                             bool has_check, tpuc_code check_code,
                             const char* check_msg) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    fz_node* grown = realloc(s->nodes, sizeof *grown * cap);
    if (grown == NULL)
      return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
    s->nodes = grown;
    s->cap = cap;
  }
  size_t idx = s->n;
  fz_node* nd = &s->nodes[idx];
  memset(nd, 0, sizeof *nd);
  tpuc_status* st = NULL;
  for (size_t k = 0; st == NULL && k < nout; k++) {
    st = tpuc_lazy_create(s->client, s->device, out_types[k].dtype,
                          out_types[k].dims, out_types[k].rank, s,
                          (int64_t)(idx * FZ_TAG + k), &nd->out[k]);
    if (st == NULL) nd->nout++;
  }
  if (st != NULL) {
    node_clear(nd);
    return st;
  }
  for (size_t a = 0; a < nin; a++) {
    nd->in[a] = in[a];
    tpuc_buffer_retain(in[a]);
    nd->internal[a] = tpuc_lazy_owner(in[a]) == s;
    if (nd->internal[a]) {
      int64_t tag = tpuc_lazy_tag(in[a]);
      s->nodes[tag / FZ_TAG].uses[tag % FZ_TAG]++;
    }
  }
  nd->nin = (uint32_t)nin;
  fz_text_retain(prog);
  nd->prog = prog;
  nd->name = name;
  nd->has_check = has_check;
  nd->check_code = check_code;
  nd->check_msg = check_msg;
  s->fp = node_fp(s->fp, nd);
  s->n++;
  slock();
  g_stats.ops_recorded++;
  sunlock();
  return NULL;
}

tpuc_status* fz_record(tpuc_client* client, int device, fz_text* prog,
                       const char* name, tpuc_buffer* const* in, size_t nin,
                       const tpuc_hlo_type* out_types, size_t nout,
                       bool has_check, tpuc_code check_code,
                       const char* check_msg, tpuc_buffer** outs) {
  if (nin > FZ_MAX_IN || nout == 0 || nout > FZ_MAX_OUT || prog == NULL)
    return tpuc_status_make(TPUC_UNIMPLEMENTED, "not recordable");
  lock();
  jobs_retire();
  fz_seg* s = open_segment(client, device, true);
  if (s == NULL) {
    unlock();
    return tpuc_status_make(TPUC_UNIMPLEMENTED, "no segment");
  }
  /* A value whose computation failed fails this op now, instead of the
   * whole segment it would join. */
  for (size_t a = 0; a < nin; a++) {
    if (tpuc_lazy_owner(in[a]) != NULL) continue;
    tpuc_status* bad = tpuc_value_ensure(in[a]);
    if (bad != NULL) {
      unlock();
      return bad;
    }
  }
  tpuc_status* st = add_node(s, prog, name, in, nin, out_types, nout,
                             has_check, check_code, check_msg);
  if (st != NULL) {
    unlock();
    return st;
  }
  fz_node* nd = &s->nodes[s->n - 1];
  size_t ret = nout - (has_check ? 1 : 0);
  for (size_t k = 0; k < ret; k++) {
    tpuc_buffer_retain(nd->out[k]);
    outs[k] = nd->out[k];
  }
  /* An op with an argument check on the device (an index in range) runs
   * now, with everything before it, so a bad argument fails here, at the
   * op, with PyTorch's error. */
  if (s->capturing) {
    /* A capture keeps everything in one program (argument checks are
     * read after it runs). */
    unlock();
    return NULL;
  }
  if (has_check) {
    st = run_prefix(s, s->n, TPUC_FUSED_CHECK);
    if (st != NULL) {
      for (size_t k = 0; k < ret; k++) {
        tpuc_buffer_release(outs[k]);
        outs[k] = NULL;
      }
      unlock();
      return st;
    }
  }
  /* A step boundary or the size limit: run what came before. Errors of
   * that run surface at the next flush (asynchronous, like strict mode). */
  if (repeats(s)) {
    keep_error(run_prefix(s, s->n - FZ_WINDOW, TPUC_FUSED_REPEAT));
    windows_reset(s);
    repeats(s); /* the window that starts the new segment */
  } else if (s->n >= max_ops()) {
    keep_error(run_prefix(s, s->n, TPUC_FUSED_LIMIT));
    windows_reset(s);
  }
  unlock();
  return NULL;
}

tpuc_status* fz_record_zeros(tpuc_client* client, int device,
                             tpuc_storage* storage) {
  char buf[1024];
  tpuc_dtype dtype = TPUC_DTYPE_U8;
  int64_t count = 0;
  size_t len =
      tpuc_storage_zeros_program(storage, buf, sizeof buf, &dtype, &count);
  if (len == 0) return NULL;
  fz_text* prog = text_copy(buf, len);
  if (prog == NULL)
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  tpuc_hlo_type type = tpuc_hlo_type_make(dtype, &count, 1);
  tpuc_buffer* out = NULL;
  tpuc_status* st = fz_record(client, device, prog, "zeros", NULL, 0, &type, 1,
                              false, TPUC_OK, NULL, &out);
  fz_text_release(prog);
  if (st != NULL && tpuc_status_code(st) == TPUC_UNIMPLEMENTED) {
    tpuc_status_free(st); /* the storage fills itself when read */
    return NULL;
  }
  if (st == NULL) st = tpuc_storage_set_zeros(storage, out);
  tpuc_buffer_release(out);
  return st;
}

/* ------------------------------ capture ---------------------------------
 * A compiled graph (graph.c) is captured by running it once through the
 * eager kernels with the segment of its device in capture mode: the ops
 * are recorded as usual, nothing cuts the segment, and at the end the
 * whole recording becomes ONE program whose outputs are exactly the values
 * the graph hands out. */

tpuc_status* fz_capture_start(tpuc_client* client, int device) {
  lock();
  jobs_retire();
  fz_seg* s = open_segment(client, device, true);
  tpuc_status* st = NULL;
  if (s == NULL)
    st = tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "no fused segment for "
                          "device %d", device);
  else if (s->capturing)
    st = tpuc_status_make(TPUC_FAILED_PRECONDITION,
                          "a graph is already being captured on device %d",
                          device);
  /* What was recorded before the graph runs first, by itself. */
  if (st == NULL) st = run_prefix(s, s->n, TPUC_FUSED_SYNC);
  if (st == NULL) {
    s->capturing = true;
    s->broken = false;
    s->broke[0] = '\0';
    s->saved_override = t_override;
    t_override = TPUC_EAGER_FUSED;
  }
  unlock();
  return st;
}

void fz_capture_break(tpuc_client* client, int device, const char* why) {
  lock();
  fz_seg* s = open_segment(client, device, false);
  if (s != NULL && s->capturing) capture_broke(s, "%s", why);
  unlock();
}

bool fz_capture_broken(tpuc_client* client, int device) {
  lock();
  fz_seg* s = open_segment(client, device, false);
  bool broken = s != NULL && s->capturing && s->broken;
  unlock();
  return broken;
}

void fz_capture_note_rng(tpuc_client* client, int device, tpuc_buffer* buf,
                         const uint64_t vals[2]) {
  lock();
  fz_seg* s = open_segment(client, device, false);
  if (s != NULL && s->capturing) {
    if (s->nrng == s->rng_cap) {
      size_t cap = s->rng_cap ? 2 * s->rng_cap : 16;
      tpuc_buffer** b = realloc(s->rng_bufs, sizeof *b * cap);
      if (b != NULL) s->rng_bufs = b;
      uint64_t(*v)[2] = realloc(s->rng_vals, sizeof *v * cap);
      if (v != NULL) s->rng_vals = v;
      if (b != NULL && v != NULL) s->rng_cap = cap;
    }
    if (s->nrng < s->rng_cap) {
      tpuc_buffer_retain(buf);
      s->rng_bufs[s->nrng] = buf;
      s->rng_vals[s->nrng][0] = vals[0];
      s->rng_vals[s->nrng][1] = vals[1];
      s->nrng++;
    } else {
      capture_broke(s, "out of host memory");
    }
  }
  unlock();
}

void fz_captured_free(fz_captured* c) {
  if (c == NULL) return;
  for (size_t i = 0; i < c->nparams; i++) tpuc_buffer_release(c->params[i]);
  free(c->params);
  free(c->param_rng);
  free(c->param_rng_vals);
  free(c->wanted_res);
  free(c->check_res);
  free(c->check_code);
  free(c->check_msg);
  free(c->text);
  if (c->exe != NULL) tpuc_executable_release(c->exe);
  memset(c, 0, sizeof *c);
}

/* Pointer hash set: index of `b` in the first-seen order, inserting it. */
static size_t ptr_slot(tpuc_buffer* const* keys, size_t mask,
                       const tpuc_buffer* b) {
  size_t h = (size_t)(((uintptr_t)b >> 4) * 0x9E3779B97F4A7C15ULL) & mask;
  while (keys[h] != NULL && keys[h] != b) h = (h + 1) & mask;
  return h;
}

static void capture_clear(fz_seg* s) {
  for (size_t i = 0; i < s->n; i++) node_clear(&s->nodes[i]);
  s->n = 0;
  s->fp = (tpuc_fingerprint){0, 0};
  for (size_t i = 0; i < s->nrng; i++) tpuc_buffer_release(s->rng_bufs[i]);
  s->nrng = 0;
  windows_reset(s);
}

tpuc_status* fz_capture_finish(tpuc_client* client, int device,
                               tpuc_buffer* const* wanted, size_t nwanted,
                               bool abandon, fz_captured* out) {
  memset(out, 0, sizeof *out);
  lock();
  fz_seg* s = open_segment(client, device, false);
  if (s == NULL || !s->capturing) {
    unlock();
    return tpuc_status_make(TPUC_FAILED_PRECONDITION,
                            "no graph is being captured on device %d", device);
  }
  s->capturing = false;
  t_override = s->saved_override;
  size_t n = s->n;
  out->nops = n;
  bool* live = calloc(n * FZ_MAX_OUT + 1, sizeof *live);
  tpuc_status* st = NULL;
  if (live == NULL) {
    s->broken = true;
    snprintf(s->broke, sizeof s->broke, "out of host memory");
  }
  if (abandon) capture_broke(s, "the graph raised an error");
  for (size_t w = 0; !s->broken && w < nwanted; w++) {
    if (tpuc_lazy_owner(wanted[w]) != s) continue;
    int64_t tag = tpuc_lazy_tag(wanted[w]);
    live[(size_t)(tag / FZ_TAG) * FZ_MAX_OUT + (size_t)(tag % FZ_TAG)] = true;
  }
  /* A result something outside the graph still holds (neither an output
   * nor an input's new value) would never be computed by replays. */
  for (size_t i = 0; !s->broken && i < n; i++) {
    fz_node* nd = &s->nodes[i];
    for (uint32_t k = 0; k < nd->nout; k++) {
      if (nd->has_check && k + 1 == nd->nout) {
        live[i * FZ_MAX_OUT + k] = true;
        continue;
      }
      if (live[i * FZ_MAX_OUT + k]) continue;
      if (tpuc_buffer_refs(nd->out[k]) > 1 + (int)nd->uses[k]) {
        capture_broke(s,
                      "a result of %s (op %zu) is held outside the graph's "
                      "outputs",
                      nd->name, i);
      }
    }
  }
  if (s->broken) {
    out->broken = true;
    snprintf(out->why, sizeof out->why, "%s", s->broke);
    s->broken = false;
    for (size_t i = 0; i < s->nrng; i++) tpuc_buffer_release(s->rng_bufs[i]);
    s->nrng = 0;
    /* Everything recorded runs as ordinary fused segments. */
    st = run_prefix(s, s->n, TPUC_FUSED_SYNC);
    free(live);
    unlock();
    return st;
  }
  /* Parameters: the distinct external buffers, in first-use order. */
  size_t next = 0;
  for (size_t i = 0; i < n; i++)
    for (uint32_t a = 0; a < s->nodes[i].nin; a++)
      next += !s->nodes[i].internal[a];
  size_t cap = 16;
  while (cap < 2 * next + 2) cap *= 2;
  tpuc_buffer** keys = calloc(cap, sizeof *keys);
  size_t* idx = calloc(cap, sizeof *idx);
  size_t* param_of = calloc(next + 1, sizeof *param_of);
  out->params = calloc(next + 1, sizeof *out->params);
  size_t nres = 0;
  for (size_t q = 0; q < n * FZ_MAX_OUT; q++) nres += live[q];
  size_t* res_of = calloc(n * FZ_MAX_OUT + 1, sizeof *res_of);
  /* + 1: the folded argument checks, where there are any (compose). */
  tpuc_buffer** outs = calloc(nres + 2, sizeof *outs);
  out->wanted_res = malloc(sizeof *out->wanted_res * (nwanted + 1));
  if (keys == NULL || idx == NULL || param_of == NULL || out->params == NULL ||
      res_of == NULL || outs == NULL || out->wanted_res == NULL)
    st = tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  size_t e = 0;
  for (size_t i = 0; st == NULL && i < n; i++)
    for (uint32_t a = 0; a < s->nodes[i].nin; a++) {
      if (s->nodes[i].internal[a]) continue;
      tpuc_buffer* b = s->nodes[i].in[a];
      size_t h = ptr_slot(keys, cap - 1, b);
      if (keys[h] == NULL) {
        keys[h] = b;
        idx[h] = out->nparams;
        tpuc_buffer_retain(b);
        out->params[out->nparams++] = b;
      }
      param_of[e++] = idx[h];
    }
  /* Which parameters are random ops' generator draws. */
  if (st == NULL) {
    out->param_rng = calloc(out->nparams + 1, sizeof *out->param_rng);
    out->param_rng_vals =
        calloc(out->nparams + 1, sizeof *out->param_rng_vals);
    if (out->param_rng == NULL || out->param_rng_vals == NULL)
      st = tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  }
  for (size_t r = 0; st == NULL && r < s->nrng; r++) {
    size_t h = ptr_slot(keys, cap - 1, s->rng_bufs[r]);
    if (keys[h] == NULL) continue; /* not read by the program */
    out->param_rng[idx[h]] = true;
    out->param_rng_vals[idx[h]][0] = s->rng_vals[r][0];
    out->param_rng_vals[idx[h]][1] = s->rng_vals[r][1];
    out->rng_draws++;
  }
  size_t r = 0;
  for (size_t q = 0; q < n * FZ_MAX_OUT; q++)
    if (live[q]) res_of[q] = r++;
  out->nres = nres;
  for (size_t w = 0; st == NULL && w < nwanted; w++) {
    out->wanted_res[w] = -1;
    if (tpuc_lazy_owner(wanted[w]) != s) continue;
    int64_t tag = tpuc_lazy_tag(wanted[w]);
    out->wanted_res[w] =
        (long)res_of[(size_t)(tag / FZ_TAG) * FZ_MAX_OUT + (size_t)(tag % FZ_TAG)];
  }
  size_t nchecks = 0;
  for (size_t i = 0; i < n; i++) nchecks += s->nodes[i].has_check;
  if (st == NULL && nchecks > 0) {
    out->check_res = malloc(sizeof *out->check_res * nchecks);
    out->check_code = malloc(sizeof *out->check_code * nchecks);
    out->check_msg = malloc(sizeof *out->check_msg * nchecks);
    if (out->check_res == NULL || out->check_code == NULL ||
        out->check_msg == NULL)
      st = tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
    for (size_t i = 0; st == NULL && i < n; i++) {
      fz_node* nd = &s->nodes[i];
      if (!nd->has_check) continue;
      out->check_res[out->nchecks] = res_of[i * FZ_MAX_OUT + nd->nout - 1];
      out->check_code[out->nchecks] = nd->check_code;
      out->check_msg[out->nchecks] = nd->check_msg ? nd->check_msg
                                                   : "bad argument";
      out->nchecks++;
    }
  }
  if (st == NULL && nres == 0)
    st = tpuc_status_make(TPUC_UNIMPLEMENTED, "the graph computes nothing");
  /* The folded checks come last (compose with fold_checks). */
  out->check_any = -1;
  if (nchecks > 0) {
    out->check_any = (long)nres;
    out->nres = nres + 1;
  }
  if (st == NULL)
    st = compose(s, n, live, NULL, param_of, true, &out->text, &out->len);
  if (st == NULL) {
    tpuc_cache_source src = TPUC_CACHE_COMPILED;
    double t0 = tpuc_now_seconds();
    st = tpuc_compile(client, out->text, out->len, NULL, &out->exe, &src);
    out->seconds = tpuc_now_seconds() - t0;
    out->source = (int)src;
    if (st != NULL && getenv("TPUC_FUSED_DUMP") != NULL)
      fprintf(stderr, "%.*s\n", (int)out->len, out->text);
  }
  if (st == NULL) st = tpuc_values_ensure(out->params, out->nparams);
  if (st == NULL)
    st = tpuc_execute(out->exe, device, out->params, out->nparams, NULL, outs,
                      out->nres);
  if (st != NULL) {
    st = tpuc_status_annotate(st, "graph of %zu ops from %s", n,
                              n ? s->nodes[0].name : "?");
    fail_outputs(s, n, st);
  } else {
    r = 0;
    for (size_t i = 0; i < n; i++)
      for (uint32_t k = 0; k < s->nodes[i].nout; k++)
        if (live[i * FZ_MAX_OUT + k])
          tpuc_lazy_fill(s->nodes[i].out[k], outs[r++]);
    if (out->check_any >= 0) tpuc_buffer_release(outs[out->check_any]);
    /* Dead results: nothing reads them (checked above). */
    tpuc_status* dead = tpuc_status_make(TPUC_INTERNAL, "not computed");
    fail_outputs(s, n, dead);
    tpuc_status_free(dead);
  }
  /* The argument checks of this first run, in op order. */
  for (size_t c = 0; st == NULL && c < out->nchecks; c++) {
    size_t i = 0, seen = 0;
    for (; i < n; i++)
      if (s->nodes[i].has_check && seen++ == c) break;
    uint8_t bad = 0;
    fz_node* nd = &s->nodes[i];
    st = tpuc_buffer_to_host(nd->out[nd->nout - 1], &bad, 1);
    if (st == NULL && bad)
      st = tpuc_status_make(out->check_code[c], "%s", out->check_msg[c]);
  }
  capture_clear(s);
  free(keys);
  free(idx);
  free(param_of);
  free(res_of);
  free(outs);
  free(live);
  unlock();
  if (st != NULL) fz_captured_free(out);
  return st;
}

static void on_client_destroy(tpuc_client* client, void* user) {
  (void)user;
  lock();
  /* The background thread finishes what it has for this client first. */
  jobs_wait_all();
  jobs_retire();
  for (size_t i = 0; i < g_nopen;) {
    fz_seg* s = g_open[i];
    if (s->client != client) {
      i++;
      continue;
    }
    /* The client is going away: nothing will compute these results. */
    tpuc_status* gone = tpuc_status_make(TPUC_FAILED_PRECONDITION,
                                         "the device client was destroyed");
    fail_outputs(s, s->n, gone);
    tpuc_status_free(gone);
    for (size_t k = 0; k < s->n; k++) node_clear(&s->nodes[k]);
    free(s->nodes);
    free(s->win_hash);
    free(s->win_end);
    for (size_t k = 0; k < s->nrng; k++) tpuc_buffer_release(s->rng_bufs[k]);
    free(s->rng_bufs);
    free(s->rng_vals);
    free(s);
    g_open[i] = g_open[--g_nopen];
  }
  slock();
  for (size_t i = 0; i < g_nprogs; i++)
    if (g_progs[i].client == client && g_progs[i].exe != NULL) {
      tpuc_executable_release(g_progs[i].exe);
      g_progs[i].exe = NULL;
      g_progs[i].client = NULL;
      g_progs[i].key = (tpuc_fingerprint){0, 0};
    }
  sunlock();
  unlock();
}

/* The figures include the background thread's work submitted so far: they
 * wait for it (not for what is still recorded). */
void tpuc_fused_get_stats(tpuc_fused_stats* out) {
  jobs_wait_all();
  slock();
  *out = g_stats;
  sunlock();
  out->fuse_after = fuse_after();
  out->fuse_after_small = fuse_after_for(true);
}

uint64_t tpuc_fused_pending(void) {
  pthread_mutex_lock(&g_jmu);
  uint64_t n = g_submitted - g_completed;
  pthread_mutex_unlock(&g_jmu);
  return n;
}

void tpuc_fused_reset_stats(void) {
  jobs_wait_all();
  slock();
  memset(&g_stats, 0, sizeof g_stats);
  g_nevents = 0;
  sunlock();
}

size_t tpuc_fused_events(tpuc_fused_event* out, size_t cap) {
  jobs_wait_all();
  slock();
  size_t have = g_nevents < FZ_EVENTS ? g_nevents : FZ_EVENTS;
  size_t n = have < cap ? have : cap;
  for (size_t i = 0; i < n; i++)
    out[i] = g_events[(g_nevents - n + i) % FZ_EVENTS];
  sunlock();
  return n;
}
