/* Two-tier compile cache.
 *
 * Key: the program text plus the encoded compile options; its 128-bit
 * fingerprint indexes both tiers and the full key is compared on every hit,
 * so a fingerprint collision can only cost a compile, never return the
 * wrong executable.
 *
 * Memory tier: open-addressing hash table of executables (each holds one
 * reference).
 * Disk tier: <dir>/<plugin fingerprint>/<key fingerprint>.tpx, one
 * serialized executable per file:
 *   "TPUCEXE1" | u64 key_len | u64 payload_len | u64 payload_fp.lo |
 *   u64 payload_fp.hi | key bytes | payload bytes
 * Written to a temporary file and renamed into place (atomic); a per-entry
 * flock serializes processes compiling the same program so the second one
 * loads what the first wrote. An entry that fails any check (magic, sizes,
 * key, checksum, deserialization) is counted as corrupt, removed, and the
 * program is compiled again.
 *
 * Prefetch: <key fingerprint>.next names the program that was loaded or
 * compiled next after this one (a 24-byte record: "TPUCNXT1", the
 * fingerprint). A process that loads or compiles a program hands its chain
 * of successors to a background thread, which deserializes them into the
 * memory tier ahead of their use. The first program a client loads or
 * compiles is recorded as the successor of the all-zero fingerprint
 * (<32 zeros>.next), and a new client starts loading that chain as soon as
 * it is created, while the process is still building its model: a warm
 * process's first step then finds its programs loaded (or waits for the one
 * being loaded). A prefetched entry's first use counts as a disk hit.
 * The records are hints, last writer wins: workloads sharing a folder can
 * point a chain at programs the other does not use, which costs a load on
 * the background thread, never a wrong result.
 * TPUC_CACHE_PREFETCH=0 turns it off.
 *
 * Compiling ahead: a caller that knows the programs it is about to ask for
 * (fused mode's op-by-op run of a segment) hands them to helper threads
 * (tpuc_cache_ahead_start), which compile or load them into the memory
 * tier in parallel while the caller goes through them in order: a program
 * a helper has under way is waited for, one no helper took yet the caller
 * compiles itself. An entry a helper made counts as its miss or disk hit
 * when made; its first request records it in the successor chain. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/thread.h"
#include "pjrt/internal.h"
#include "runtime/runtime_internal.h"

#define MAGIC "TPUCEXE1"
#define HEADER_BYTES (8 + 4 * 8)

typedef struct {
  tpuc_fingerprint fp;
  char* key; /* program text + options */
  size_t key_len;
  tpuc_executable* exe;
  bool prefetched; /* loaded ahead, not asked for yet */
  /* Compiled or loaded by a helper thread (tpuc_cache_ahead_start), not
   * asked for yet: the tpuc_cache_source it got, else -1. */
  int8_t ahead;
} cache_entry;

struct tpuc_cache {
  tpuc_client* client;
  pthread_mutex_t mu;
  cache_entry* slots;
  size_t cap, count;
  char* dir; /* NULL: no disk tier */
  tpuc_cache_stats stats;
  /* Programs being compiled or loaded now, by fingerprint: a second
   * request for one of them waits for it (`settled`) instead of compiling
   * it again. */
  tpuc_fingerprint* busy;
  size_t nbusy, busy_cap;
  pthread_cond_t settled;
  /* The program loaded or compiled last (its successor is recorded); the
   * all-zero fingerprint (PF_START) before the first one. */
  tpuc_fingerprint last;
  bool prefetch; /* disk tier present and TPUC_CACHE_PREFETCH != 0 */
  bool pf_dead;  /* being destroyed (under g_pf_mu) */
};

static void pf_forget(tpuc_cache* k);

/* ------------------------------ helpers -------------------------------- */

static int mkdirs(const char* path) {
  char buf[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) return -1;
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] == '/' || buf[i] == '\0') {
      char saved = buf[i];
      buf[i] = '\0';
      if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
      buf[i] = saved;
    }
  }
  return 0;
}

static char* default_cache_root(void) {
  const char* env = getenv("TPUC_CACHE_DIR");
  if (env && env[0]) return strdup(env);
  char buf[4096];
  const char* xdg = getenv("XDG_CACHE_HOME");
  const char* home = getenv("HOME");
  if (xdg && xdg[0])
    snprintf(buf, sizeof buf, "%s/tpuc", xdg);
  else if (home && home[0])
    snprintf(buf, sizeof buf, "%s/.cache/tpuc", home);
  else
    return NULL;
  return strdup(buf);
}

/* The environment variables a plugin reads its compiler settings from: XLA's
 * plugins parse XLA_FLAGS when the client starts, libtpu LIBTPU_INIT_ARGS.
 * A program compiled under other settings (fast math, another dot library)
 * is another program, so they are part of the cache's identity. */
static const char* const compiler_env[] = {"XLA_FLAGS", "LIBTPU_INIT_ARGS"};

/* Identifies the plugin build, platform and compiler settings, so entries
 * written by another plugin (or version), or compiled under other settings,
 * are never loaded. */
static tpuc_fingerprint plugin_fingerprint(tpuc_client* c) {
  char id[1024];
  struct stat st;
  bool have = stat(c->plugin->info.path, &st) == 0;
  long long size = have ? (long long)st.st_size : -1;
  long long mtime = have ? (long long)st.st_mtime : 0;
  int n = snprintf(id, sizeof id, "%s|%s|%d.%d|%s|%lld|%lld|%zu",
                   c->platform_name, c->platform_version,
                   c->plugin->info.api_major, c->plugin->info.api_minor,
                   c->plugin->info.xla_version, size, mtime, c->num_devices);
  tpuc_fingerprint zero = {0, 0};
  tpuc_fingerprint fp = tpuc_fingerprint_bytes(zero, id, (size_t)n);
  for (size_t i = 0; i < sizeof compiler_env / sizeof compiler_env[0]; i++) {
    const char* v = getenv(compiler_env[i]);
    /* Unset and empty are the same settings, and keep the folder that
     * caches written before these variables counted still use. */
    if (v == NULL || v[0] == '\0') continue;
    fp = tpuc_fingerprint_bytes(fp, compiler_env[i], strlen(compiler_env[i]));
    fp = tpuc_fingerprint_bytes(fp, "=", 1);
    /* With its NUL: an environment string holds none, so no two settings
     * hash the same bytes. */
    fp = tpuc_fingerprint_bytes(fp, v, strlen(v) + 1);
  }
  return fp;
}

/* Which cache belongs to which client (the PJRT layer's client knows
 * nothing of it). */
#define CACHE_CLIENTS 64
static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  tpuc_client* client;
  tpuc_cache* cache;
} g_reg[CACHE_CLIENTS];

static tpuc_cache* cache_of(tpuc_client* c) {
  tpuc_cache* k = NULL;
  pthread_mutex_lock(&g_reg_mu);
  for (size_t i = 0; i < CACHE_CLIENTS && k == NULL; i++)
    if (g_reg[i].client == c) k = g_reg[i].cache;
  pthread_mutex_unlock(&g_reg_mu);
  return k;
}

static bool cache_register(tpuc_client* c, tpuc_cache* k) {
  bool done = false;
  pthread_mutex_lock(&g_reg_mu);
  for (size_t i = 0; i < CACHE_CLIENTS && !done; i++)
    if (g_reg[i].client == NULL) {
      g_reg[i].client = c;
      g_reg[i].cache = k;
      done = true;
    }
  pthread_mutex_unlock(&g_reg_mu);
  return done;
}

static void cache_unregister(tpuc_cache* k) {
  pthread_mutex_lock(&g_reg_mu);
  for (size_t i = 0; i < CACHE_CLIENTS; i++)
    if (g_reg[i].cache == k) {
      g_reg[i].client = NULL;
      g_reg[i].cache = NULL;
    }
  pthread_mutex_unlock(&g_reg_mu);
}

tpuc_status* tpuc_cache_create(tpuc_client* c, const tpuc_client_options* o,
                               tpuc_cache** out) {
  tpuc_cache* k = calloc(1, sizeof *k);
  if (k == NULL)
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  if (!cache_register(c, k)) {
    free(k);
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED,
                            "more than %d clients with a compile cache",
                            CACHE_CLIENTS);
  }
  k->client = c;
  pthread_mutex_init(&k->mu, NULL);
  pthread_cond_init(&k->settled, NULL);
  if (o == NULL || !o->disable_disk_cache) {
    char* root =
        (o && o->cache_dir) ? strdup(o->cache_dir) : default_cache_root();
    if (root != NULL) {
      char hex[33];
      tpuc_fingerprint_hex(plugin_fingerprint(c), hex);
      size_t n = strlen(root) + 1 + 32 + 1;
      k->dir = malloc(n);
      if (k->dir) snprintf(k->dir, n, "%s/%s", root, hex);
      free(root);
      if (k->dir && mkdirs(k->dir) != 0) {
        /* An unwritable cache folder only disables the disk tier. */
        free(k->dir);
        k->dir = NULL;
      }
    }
  }
  const char* pf = getenv("TPUC_CACHE_PREFETCH");
  k->prefetch = k->dir != NULL && !(pf && strcmp(pf, "0") == 0);
  *out = k;
  return NULL;
}

void tpuc_cache_destroy(tpuc_cache* k) {
  if (k == NULL) return;
  cache_unregister(k);
  pf_forget(k);
  for (size_t i = 0; i < k->cap; i++) {
    if (k->slots[i].exe) {
      tpuc_executable_release(k->slots[i].exe);
      free(k->slots[i].key);
    }
  }
  free(k->slots);
  free(k->dir);
  free(k->busy);
  pthread_cond_destroy(&k->settled);
  pthread_mutex_destroy(&k->mu);
  free(k);
}

/* ---------------------------- memory tier ------------------------------ */

static cache_entry* mem_find(tpuc_cache* k, tpuc_fingerprint fp,
                             const char* key, size_t key_len) {
  if (k->cap == 0) return NULL;
  size_t mask = k->cap - 1;
  for (size_t i = (size_t)fp.lo & mask;; i = (i + 1) & mask) {
    cache_entry* e = &k->slots[i];
    if (e->exe == NULL) return NULL;
    if (tpuc_fingerprint_eq(e->fp, fp) && e->key_len == key_len &&
        memcmp(e->key, key, key_len) == 0)
      return e;
  }
}

/* By fingerprint only (the prefetcher has no key to compare). */
static bool mem_has_fp(tpuc_cache* k, tpuc_fingerprint fp) {
  if (k->cap == 0) return false;
  size_t mask = k->cap - 1;
  for (size_t i = (size_t)fp.lo & mask; k->slots[i].exe; i = (i + 1) & mask)
    if (tpuc_fingerprint_eq(k->slots[i].fp, fp)) return true;
  return false;
}

static int mem_grow(tpuc_cache* k) {
  size_t cap = k->cap ? k->cap * 2 : 64;
  cache_entry* ns = calloc(cap, sizeof *ns);
  if (ns == NULL) return 0;
  for (size_t i = 0; i < k->cap; i++) {
    if (k->slots[i].exe == NULL) continue;
    size_t j = (size_t)k->slots[i].fp.lo & (cap - 1);
    while (ns[j].exe) j = (j + 1) & (cap - 1);
    ns[j] = k->slots[i];
  }
  free(k->slots);
  k->slots = ns;
  k->cap = cap;
  return 1;
}

/* Executables the memory tier keeps alive at most. Each loaded executable
 * holds code mappings (XLA's CPU backend maps JIT code per executable), and
 * a process has a bounded number of mappings, so the tier starts over when
 * full; the disk tier brings an entry back in about a millisecond. */
#define MEM_TIER_MAX 1024

static void mem_reset(tpuc_cache* k) {
  for (size_t i = 0; i < k->cap; i++) {
    if (k->slots[i].exe) {
      tpuc_executable_release(k->slots[i].exe);
      free(k->slots[i].key);
    }
  }
  free(k->slots);
  k->slots = NULL;
  k->cap = k->count = 0;
}

/* Inserts (the cache takes a reference). Failure to insert is harmless. */
static void mem_insert(tpuc_cache* k, tpuc_fingerprint fp, const char* key,
                       size_t key_len, tpuc_executable* exe, bool prefetched,
                       int ahead) {
  if (mem_find(k, fp, key, key_len) != NULL) return;
  if (k->count >= MEM_TIER_MAX) mem_reset(k);
  if ((k->count + 1) * 4 > k->cap * 3 && !mem_grow(k)) return;
  char* copy = malloc(key_len);
  if (copy == NULL) return;
  memcpy(copy, key, key_len);
  size_t j = (size_t)fp.lo & (k->cap - 1);
  while (k->slots[j].exe) j = (j + 1) & (k->cap - 1);
  tpuc_executable_retain(exe);
  k->slots[j] =
      (cache_entry){fp, copy, key_len, exe, prefetched, (int8_t)ahead};
  k->count++;
}

/* ----------------------------- disk tier ------------------------------- */

static void entry_path(tpuc_cache* k, tpuc_fingerprint fp, const char* suffix,
                       char* out, size_t cap) {
  char hex[33];
  tpuc_fingerprint_hex(fp, hex);
  snprintf(out, cap, "%s/%s%s", k->dir, hex, suffix);
}

static int read_file(const char* path, char** data, size_t* len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < 0) {
    close(fd);
    return 0;
  }
  size_t n = (size_t)st.st_size;
  char* buf = malloc(n ? n : 1);
  size_t got = 0;
  while (buf && got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (buf == NULL || got != n) {
    free(buf);
    return 0;
  }
  *data = buf;
  *len = n;
  return 1;
}

static uint64_t get_u64(const char* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* The key and payload of entry bytes `data` that pass the magic, size and
 * payload checksum checks; false otherwise. */
static bool entry_parse(const char* data, size_t len, const char* magic,
                        const char** key, size_t* key_len, const char** payload,
                        size_t* payload_len) {
  if (len < HEADER_BYTES || memcmp(data, magic, 8) != 0) return false;
  uint64_t klen = get_u64(data + 8), plen = get_u64(data + 16);
  if (klen > len || plen > len || HEADER_BYTES + klen + plen != len)
    return false;
  tpuc_fingerprint zero = {0, 0};
  tpuc_fingerprint pfp =
      tpuc_fingerprint_bytes(zero, data + HEADER_BYTES + klen, plen);
  if (pfp.lo != get_u64(data + 24) || pfp.hi != get_u64(data + 32))
    return false;
  *key = data + HEADER_BYTES;
  *key_len = klen;
  *payload = *key + klen;
  *payload_len = plen;
  return true;
}

/* 1: loaded; 0: no entry; -1: corrupt entry (removed). */
static int disk_load(tpuc_cache* k, tpuc_fingerprint fp, const char* key,
                     size_t key_len, PJRT_LoadedExecutable** out) {
  char path[4200];
  entry_path(k, fp, ".tpx", path, sizeof path);
  char* data = NULL;
  size_t len = 0;
  if (!read_file(path, &data, &len)) return 0;
  const char *ekey, *payload;
  size_t eklen, plen;
  bool ok = entry_parse(data, len, MAGIC, &ekey, &eklen, &payload, &plen) &&
            eklen == key_len && memcmp(ekey, key, key_len) == 0;
  if (ok) {
    tpuc_status* st = tpuc_pjrt_deserialize(k->client, payload, plen, out);
    ok = st == NULL;
    tpuc_status_free(st);
  }
  free(data);
  if (!ok) {
    unlink(path);
    return -1;
  }
  return 1;
}

static int write_all(int fd, const void* p, size_t n) {
  const char* c = p;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w <= 0) return 0;
    c += w;
    n -= (size_t)w;
  }
  return 1;
}

/* Writes entry `magic | sizes | key | payload` to `final_path` through a
 * temporary file renamed into place; the bytes written, or 0. */
static size_t write_entry(const char* final_path, const char* magic,
                          const char* key, size_t key_len, const void* payload,
                          size_t plen) {
  char tmp_path[4300];
  static atomic_uint counter;
  size_t written = 0;
  snprintf(tmp_path, sizeof tmp_path, "%s.%d.%u.tmp", final_path, (int)getpid(),
           atomic_fetch_add(&counter, 1));
  int fd = open(tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return 0;
  char header[HEADER_BYTES];
  tpuc_fingerprint zero = {0, 0};
  tpuc_fingerprint pfp = tpuc_fingerprint_bytes(zero, payload, plen);
  uint64_t fields[4] = {key_len, plen, pfp.lo, pfp.hi};
  memcpy(header, magic, 8);
  memcpy(header + 8, fields, sizeof fields);
  int ok = write_all(fd, header, sizeof header) &&
           write_all(fd, key, key_len) && write_all(fd, payload, plen) &&
           fsync(fd) == 0;
  ok = close(fd) == 0 && ok;
  if (ok && rename(tmp_path, final_path) == 0)
    written = HEADER_BYTES + key_len + plen;
  else
    unlink(tmp_path);
  return written;
}

/* Returns the bytes written (0 when nothing was stored). */
static size_t disk_store(tpuc_cache* k, tpuc_fingerprint fp, const char* key,
                         size_t key_len, PJRT_LoadedExecutable* exe) {
  char* payload = NULL;
  size_t plen = 0;
  tpuc_status* st = tpuc_pjrt_serialize(k->client, exe, &payload, &plen);
  if (st != NULL) { /* plugin cannot serialize: memory tier only */
    tpuc_status_free(st);
    return 0;
  }
  char final_path[4200];
  entry_path(k, fp, ".tpx", final_path, sizeof final_path);
  size_t written = write_entry(final_path, MAGIC, key, key_len, payload, plen);
  free(payload);
  return written;
}

/* ------------------------------ records -------------------------------- */

/* Records: small blobs that the runtime keeps beside the programs (a
 * compiled graph's recipe), <key fingerprint>.tpr, in the entry format
 * with magic "TPUCREC1"; the whole key is compared on every read. */
#define RECORD_MAGIC "TPUCREC1"

static void record_path(tpuc_cache* k, const char* key, size_t key_len,
                        char* out, size_t cap) {
  tpuc_fingerprint zero = {0, 0};
  entry_path(k, tpuc_fingerprint_bytes(zero, key, key_len), ".tpr", out, cap);
}

tpuc_status* tpuc_cache_record_put(tpuc_client* c, const char* key,
                                   size_t key_len, const void* data, size_t len,
                                   bool* stored) {
  if (c == NULL || stored == NULL || (key_len > 0 && key == NULL) ||
      (len > 0 && data == NULL))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "NULL argument to tpuc_cache_record_put");
  *stored = false;
  tpuc_cache* k = cache_of(c);
  if (k == NULL || k->dir == NULL) return NULL; /* no disk tier */
  char path[4200];
  record_path(k, key, key_len, path, sizeof path);
  size_t n = write_entry(path, RECORD_MAGIC, key, key_len, data, len);
  *stored = n > 0;
  if (n > 0) {
    pthread_mutex_lock(&k->mu);
    k->stats.disk_bytes_written += n;
    pthread_mutex_unlock(&k->mu);
  }
  return NULL;
}

tpuc_status* tpuc_cache_record_get(tpuc_client* c, const char* key,
                                   size_t key_len, char** data, size_t* len) {
  if (c == NULL || data == NULL || len == NULL || (key_len > 0 && key == NULL))
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "NULL argument to tpuc_cache_record_get");
  *data = NULL;
  *len = 0;
  tpuc_cache* k = cache_of(c);
  if (k == NULL || k->dir == NULL) return NULL;
  char path[4200];
  record_path(k, key, key_len, path, sizeof path);
  char* raw = NULL;
  size_t n = 0;
  if (!read_file(path, &raw, &n)) return NULL;
  const char *ekey, *payload;
  size_t eklen, plen;
  if (!entry_parse(raw, n, RECORD_MAGIC, &ekey, &eklen, &payload, &plen)) {
    unlink(path); /* corrupt or truncated: the next capture rewrites it */
    free(raw);
    return NULL;
  }
  if (eklen == key_len && memcmp(ekey, key, key_len) == 0) {
    *data = malloc(plen ? plen : 1);
    if (*data == NULL) {
      free(raw);
      return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
    }
    memcpy(*data, payload, plen);
    *len = plen;
  }
  free(raw);
  return NULL;
}

/* ------------------------------ compile -------------------------------- */

static tpuc_status* make_executable(tpuc_client* c, PJRT_LoadedExecutable* pj,
                                    const char* mlir, size_t len,
                                    tpuc_fingerprint fp,
                                    tpuc_executable** out) {
  tpuc_executable* e = calloc(1, sizeof *e);
  if (e == NULL) {
    tpuc_pjrt_executable_destroy(c, pj);
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  }
  atomic_init(&e->refs, 1);
  e->client = c;
  e->pjrt = pj;
  char hex[33];
  tpuc_fingerprint_hex(fp, hex);
  snprintf(e->name, sizeof e->name, "main@%.12s", hex);
  tpuc_status* st =
      tpuc_parse_main_signature(mlir, len, &e->inputs, &e->num_inputs,
                                &e->input_alias, &e->outputs, &e->num_outputs);
  if (st == NULL && TPUC_PJRT_HAS(c->api, PJRT_Executable_NumOutputs) &&
      TPUC_PJRT_HAS(c->api, PJRT_LoadedExecutable_GetExecutable)) {
    /* Cross-check the text's result count with the compiled program. */
    PJRT_LoadedExecutable_GetExecutable_Args g = {0};
    g.struct_size = sizeof g;
    g.loaded_executable = pj;
    st = tpuc_pjrt_error(c->api,
                         c->api->PJRT_LoadedExecutable_GetExecutable(&g), NULL);
    if (st == NULL) {
      PJRT_Executable_NumOutputs_Args n = {0};
      n.struct_size = sizeof n;
      n.executable = g.executable;
      st =
          tpuc_pjrt_error(c->api, c->api->PJRT_Executable_NumOutputs(&n), NULL);
      if (st == NULL && n.num_outputs != e->num_outputs)
        st = tpuc_status_make(TPUC_INVALID_ARGUMENT,
                              "@main declares %zu results but compiled to %zu "
                              "outputs (tuple results are not supported)",
                              e->num_outputs, n.num_outputs);
      tpuc_pjrt_unloaded_destroy(c->api, g.executable);
    }
  }
  if (st == NULL) st = tpuc_pjrt_executable_replicas(e);
  if (st != NULL) {
    tpuc_executable_release(e);
    return st;
  }
  *out = e;
  return NULL;
}

/* ------------------------- programs in flight --------------------------- */

static bool busy_has(const tpuc_cache* k, tpuc_fingerprint fp) {
  for (size_t i = 0; i < k->nbusy; i++)
    if (tpuc_fingerprint_eq(k->busy[i], fp)) return true;
  return false;
}

/* Under k->mu. False when out of memory: the caller compiles without
 * announcing it (correct, only not deduplicated). */
static bool busy_add(tpuc_cache* k, tpuc_fingerprint fp) {
  if (k->nbusy == k->busy_cap) {
    size_t cap = k->busy_cap ? k->busy_cap * 2 : 8;
    tpuc_fingerprint* b = realloc(k->busy, sizeof *b * cap);
    if (b == NULL) return false;
    k->busy = b;
    k->busy_cap = cap;
  }
  k->busy[k->nbusy++] = fp;
  return true;
}

/* Under k->mu: the program settled (compiled, loaded or failed). */
static void busy_remove(tpuc_cache* k, tpuc_fingerprint fp) {
  for (size_t i = 0; i < k->nbusy; i++)
    if (tpuc_fingerprint_eq(k->busy[i], fp)) {
      k->busy[i] = k->busy[--k->nbusy];
      break;
    }
  pthread_cond_broadcast(&k->settled);
}

/* ------------------------------ prefetch -------------------------------- */

#define NEXT_MAGIC "TPUCNXT1"
#define NEXT_BYTES 24
/* Programs one chain loads ahead at most. */
#define PF_DEPTH 64
#define PF_QUEUE 64
/* The chain a client starts with: its first program is this one's
 * successor (no program has an all-zero fingerprint). */
static const tpuc_fingerprint PF_START = {0, 0};

/* 1 and *out: `fp`'s recorded successor; 0: none (or unreadable). */
static int read_next(tpuc_cache* k, tpuc_fingerprint fp,
                     tpuc_fingerprint* out) {
  char path[4200], buf[NEXT_BYTES];
  entry_path(k, fp, ".next", path, sizeof path);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  if (n != NEXT_BYTES || memcmp(buf, NEXT_MAGIC, 8) != 0) return 0;
  out->lo = get_u64(buf + 8);
  out->hi = get_u64(buf + 16);
  return 1;
}

/* Records `next` as `fp`'s successor unless it already is (a hint: written
 * to a temporary file and renamed, never synced). */
static void write_next(tpuc_cache* k, tpuc_fingerprint fp,
                       tpuc_fingerprint next) {
  tpuc_fingerprint old;
  if (read_next(k, fp, &old) && tpuc_fingerprint_eq(old, next)) return;
  char path[4200], tmp[4300], buf[NEXT_BYTES];
  entry_path(k, fp, ".next", path, sizeof path);
  static atomic_uint counter;
  snprintf(tmp, sizeof tmp, "%s.%d.%u.tmp", path, (int)getpid(),
           atomic_fetch_add(&counter, 1));
  memcpy(buf, NEXT_MAGIC, 8);
  memcpy(buf + 8, &next.lo, 8);
  memcpy(buf + 16, &next.hi, 8);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return;
  int ok = write_all(fd, buf, sizeof buf);
  ok = close(fd) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

/* Loads entry `fp` into the memory tier ahead of its use. True when it was
 * loaded now; false when it is already in memory, being compiled or loaded
 * by another thread, absent, or fails any check (the request that needs it
 * then finds and reports what is wrong with it). */
static bool pf_load(tpuc_cache* k, tpuc_fingerprint fp) {
  pthread_mutex_lock(&k->mu);
  bool announced = !mem_has_fp(k, fp) && !busy_has(k, fp) && busy_add(k, fp);
  pthread_mutex_unlock(&k->mu);
  if (!announced) return false;
  double t0 = tpuc_now_seconds();
  char path[4200];
  entry_path(k, fp, ".tpx", path, sizeof path);
  char* data = NULL;
  size_t len = 0, klen = 0, plen;
  const char *key = NULL, *payload;
  tpuc_executable* exe = NULL;
  bool ok = read_file(path, &data, &len) &&
            entry_parse(data, len, MAGIC, &key, &klen, &payload, &plen);
  if (ok) { /* the entry is the program its name says */
    tpuc_fingerprint zero = {0, 0};
    tpuc_fingerprint kfp = tpuc_fingerprint_bytes(zero, key, klen);
    ok = tpuc_fingerprint_eq(kfp, fp);
  }
  /* The key is the program text, a NUL, the encoded options. */
  const char* sep = ok ? memchr(key, '\0', klen) : NULL;
  if (sep != NULL) {
    PJRT_LoadedExecutable* pj = NULL;
    tpuc_status* st = tpuc_pjrt_deserialize(k->client, payload, plen, &pj);
    if (st == NULL)
      st = make_executable(k->client, pj, key, (size_t)(sep - key), fp, &exe);
    tpuc_status_free(st);
  }
  pthread_mutex_lock(&k->mu);
  if (exe != NULL) {
    mem_insert(k, fp, key, klen, exe, true, -1);
    k->stats.prefetched++;
    k->stats.prefetch_seconds += tpuc_now_seconds() - t0;
  }
  busy_remove(k, fp);
  pthread_mutex_unlock(&k->mu);
  free(data);
  if (exe != NULL) tpuc_executable_release(exe);
  return exe != NULL;
}

/* One background thread serves every cache: a queue of (cache, program)
 * whose successor chains it loads. g_pf_mu is never held while taking a
 * cache's lock. */
typedef struct {
  tpuc_cache* k;
  tpuc_fingerprint fp;
} pf_item;
static pthread_mutex_t g_pf_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_pf_cond = PTHREAD_COND_INITIALIZER;
static pthread_once_t g_pf_once = PTHREAD_ONCE_INIT;
static pf_item g_pf_q[PF_QUEUE];
static size_t g_pf_head, g_pf_n;
static tpuc_cache* g_pf_active; /* whose chain is being loaded */
static bool g_pf_running;
static bool g_pf_hold; /* a fork or the process exit is under way */

static bool pf_stopped(tpuc_cache* k) {
  pthread_mutex_lock(&g_pf_mu);
  bool stop = g_pf_hold || k->pf_dead;
  pthread_mutex_unlock(&g_pf_mu);
  return stop;
}

static void* pf_main(void* arg) {
  (void)arg;
  pthread_mutex_lock(&g_pf_mu);
  for (;;) {
    while (g_pf_n == 0 || g_pf_hold) pthread_cond_wait(&g_pf_cond, &g_pf_mu);
    pf_item it = g_pf_q[g_pf_head];
    g_pf_head = (g_pf_head + 1) % PF_QUEUE;
    g_pf_n--;
    g_pf_active = it.k;
    pthread_mutex_unlock(&g_pf_mu);
    tpuc_fingerprint fp = it.fp, next;
    for (int d = 0; d < PF_DEPTH && !pf_stopped(it.k); d++) {
      if (!read_next(it.k, fp, &next) || !pf_load(it.k, next)) break;
      fp = next;
    }
    pthread_mutex_lock(&g_pf_mu);
    g_pf_active = NULL;
    pthread_cond_broadcast(&g_pf_cond);
  }
  return NULL;
}

/* Waits until no chain is being loaded; under g_pf_mu. */
static void pf_quiesce(void) {
  g_pf_hold = true;
  g_pf_n = 0;
  while (g_pf_active != NULL) pthread_cond_wait(&g_pf_cond, &g_pf_mu);
}

/* A fork waits for the load under way, so the child inherits no cache lock
 * held and no program marked as being loaded. */
static void pf_atfork_prepare(void) {
  pthread_mutex_lock(&g_pf_mu);
  pf_quiesce();
}
static void pf_atfork_parent(void) {
  g_pf_hold = false;
  pthread_mutex_unlock(&g_pf_mu);
}
static void pf_atfork_child(void) {
  g_pf_hold = false;
  g_pf_running = false; /* the thread stayed in the parent */
  pthread_cond_init(&g_pf_cond, NULL);
  pthread_mutex_unlock(&g_pf_mu);
}
/* At exit the plugin is about to be unloaded: no load may be under way. */
static void pf_atexit(void) {
  pthread_mutex_lock(&g_pf_mu);
  pf_quiesce();
  pthread_mutex_unlock(&g_pf_mu);
}
static void pf_init(void) {
  pthread_atfork(pf_atfork_prepare, pf_atfork_parent, pf_atfork_child);
  atexit(pf_atexit);
}

/* Hands `fp`'s successors to the prefetch thread. Not under k->mu. */
static void pf_enqueue(tpuc_cache* k, tpuc_fingerprint fp) {
  if (!k->prefetch) return;
  pthread_once(&g_pf_once, pf_init);
  pthread_mutex_lock(&g_pf_mu);
  if (!g_pf_running && !g_pf_hold)
    g_pf_running = tpuc_thread_start_detached(pf_main);
  if (g_pf_running && !g_pf_hold && !k->pf_dead && g_pf_n < PF_QUEUE) {
    g_pf_q[(g_pf_head + g_pf_n) % PF_QUEUE] = (pf_item){k, fp};
    g_pf_n++;
    pthread_cond_broadcast(&g_pf_cond);
  }
  pthread_mutex_unlock(&g_pf_mu);
}

/* Cache `k` goes away: drops its queued chains, waits for the one under
 * way. */
static void pf_forget(tpuc_cache* k) {
  if (!k->prefetch) return;
  pthread_mutex_lock(&g_pf_mu);
  k->pf_dead = true;
  size_t kept = 0;
  for (size_t i = 0; i < g_pf_n; i++) {
    pf_item it = g_pf_q[(g_pf_head + i) % PF_QUEUE];
    if (it.k != k) g_pf_q[(g_pf_head + kept++) % PF_QUEUE] = it;
  }
  g_pf_n = kept;
  while (g_pf_active == k) pthread_cond_wait(&g_pf_cond, &g_pf_mu);
  pthread_mutex_unlock(&g_pf_mu);
}

/* Under k->mu: `fp` is loaded or compiled now (or a prefetched entry is
 * used for the first time). Returns in *prev the program that was before
 * it, whose successor the caller records once k->mu is released. */
static bool note_sequence(tpuc_cache* k, tpuc_fingerprint fp,
                          tpuc_fingerprint* prev) {
  bool changed = !tpuc_fingerprint_eq(k->last, fp);
  *prev = k->last;
  k->last = fp;
  return changed && k->prefetch;
}

void tpuc_cache_prefetch_start(tpuc_cache* k) {
  if (k != NULL) pf_enqueue(k, PF_START);
}

/* The cache key of a program: its text, a separator that cannot occur in
 * MLIR text, the encoded options. *key is `stack` when it fits (cap
 * bytes), else allocated. */
static tpuc_status* make_key(tpuc_client* c, const char* mlir, size_t len,
                             const tpuc_compile_options* options, char* stack,
                             size_t cap, char** key, size_t* key_len,
                             tpuc_fingerprint* fp) {
  TPUC_RETURN_IF_ERROR(tpuc_check_compile_options(c, options));
  unsigned char opts[64 + 16 * TPUC_MAX_REPLICAS];
  size_t opts_len = tpuc_encode_compile_options(c, options, opts, sizeof opts);
  *key_len = len + 1 + opts_len;
  *key = *key_len <= cap ? stack : malloc(*key_len);
  if (*key == NULL)
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of host memory");
  memcpy(*key, mlir, len);
  (*key)[len] = '\0';
  memcpy(*key + len + 1, opts, opts_len);
  tpuc_fingerprint zero = {0, 0};
  *fp = tpuc_fingerprint_bytes(zero, *key, *key_len);
  return NULL;
}

/* tpuc_compile; `ahead`: for a helper thread of tpuc_cache_ahead_start,
 * which only fills the memory tier: a program already there or under way
 * elsewhere is left alone, and its entry is marked so that the first
 * request counts it and records its place in the sequence instead. */
static tpuc_status* compile_impl(tpuc_client* c, const char* mlir, size_t len,
                                 const tpuc_compile_options* options,
                                 bool ahead, tpuc_executable** out,
                                 tpuc_cache_source* source) {
  if (c == NULL || mlir == NULL || out == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT,
                            "client, program text or out is NULL");
  *out = NULL;
  char key_stack[8192];
  char* key = NULL;
  size_t key_len = 0;
  tpuc_fingerprint fp;
  TPUC_RETURN_IF_ERROR(make_key(c, mlir, len, options, key_stack,
                                sizeof key_stack, &key, &key_len, &fp));
  tpuc_cache* k = cache_of(c);
  tpuc_status* st = NULL;

  pthread_mutex_lock(&k->mu);
  bool waited = false;
  for (;;) {
    cache_entry* hit = mem_find(k, fp, key, key_len);
    if (hit != NULL && ahead) {
      pthread_mutex_unlock(&k->mu);
      goto done;
    }
    if (hit != NULL) {
      /* A prefetched entry's first use is the disk hit it replaced; one a
       * helper compiled or loaded was counted by the helper. */
      bool loaded_ahead = hit->prefetched;
      int helper = hit->ahead;
      tpuc_fingerprint prev;
      bool record = false;
      if (loaded_ahead) {
        hit->prefetched = false;
        k->stats.disk_hits++;
        k->stats.prefetch_hits++;
        record = note_sequence(k, fp, &prev);
      } else if (helper >= 0) {
        hit->ahead = -1;
        record = note_sequence(k, fp, &prev);
      } else {
        k->stats.memory_hits++;
      }
      tpuc_executable_retain(hit->exe);
      *out = hit->exe;
      pthread_mutex_unlock(&k->mu);
      if (record) write_next(k, prev, fp);
      if (loaded_ahead || helper >= 0) pf_enqueue(k, fp);
      if (source)
        *source = loaded_ahead  ? TPUC_CACHE_DISK
                  : helper >= 0 ? (tpuc_cache_source)helper
                                : TPUC_CACHE_MEMORY;
      goto done;
    }
    /* Another thread compiles or loads this program: wait for it. If it
     * failed, this request tries again itself. */
    if (!busy_has(k, fp)) break;
    if (ahead) {
      pthread_mutex_unlock(&k->mu);
      goto done;
    }
    if (!waited) k->stats.inflight_waits++;
    waited = true;
    pthread_cond_wait(&k->settled, &k->mu);
  }
  bool announced = busy_add(k, fp);
  tpuc_fingerprint prev;
  bool record = !ahead && note_sequence(k, fp, &prev);
  if (ahead) k->stats.compiled_ahead++;
  pthread_mutex_unlock(&k->mu);
  if (record) write_next(k, prev, fp);
  /* What came after this program last time loads while this one does. */
  if (!ahead) pf_enqueue(k, fp);

  int lock_fd = -1;
  PJRT_LoadedExecutable* pj = NULL;
  tpuc_cache_source src = TPUC_CACHE_COMPILED;
  if (k->dir != NULL) {
    char lock_path[4200];
    entry_path(k, fp, ".lock", lock_path, sizeof lock_path);
    lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd >= 0) flock(lock_fd, LOCK_EX);
    double t0 = tpuc_now_seconds();
    int r = disk_load(k, fp, key, key_len, &pj);
    pthread_mutex_lock(&k->mu);
    if (r == 1) {
      k->stats.disk_hits++;
      k->stats.load_seconds += tpuc_now_seconds() - t0;
      src = TPUC_CACHE_DISK;
    } else if (r < 0) {
      k->stats.disk_corrupt++;
    }
    pthread_mutex_unlock(&k->mu);
  }
  if (pj == NULL) {
    double t0 = tpuc_now_seconds();
    st = tpuc_pjrt_compile(c, mlir, len, (const unsigned char*)key + len + 1,
                           key_len - len - 1, &pj);
    pthread_mutex_lock(&k->mu);
    k->stats.misses++;
    k->stats.compile_seconds += tpuc_now_seconds() - t0;
    pthread_mutex_unlock(&k->mu);
    if (st == NULL && k->dir != NULL) {
      size_t written = disk_store(k, fp, key, key_len, pj);
      pthread_mutex_lock(&k->mu);
      k->stats.disk_writes += written > 0;
      k->stats.disk_bytes_written += written;
      pthread_mutex_unlock(&k->mu);
    }
  }
  if (lock_fd >= 0) {
    flock(lock_fd, LOCK_UN);
    close(lock_fd);
  }
  if (st == NULL) st = make_executable(c, pj, mlir, len, fp, out);
  pthread_mutex_lock(&k->mu);
  if (st == NULL)
    mem_insert(k, fp, key, key_len, *out, false, ahead ? (int)src : -1);
  if (announced) busy_remove(k, fp);
  pthread_mutex_unlock(&k->mu);
  if (st == NULL && source) *source = src;
done:
  if (key != key_stack) free(key);
  return st;
}

tpuc_status* tpuc_compile(tpuc_client* c, const char* mlir, size_t len,
                          const tpuc_compile_options* options,
                          tpuc_executable** out, tpuc_cache_source* source) {
  return compile_impl(c, mlir, len, options, false, out, source);
}

/* --------------------------- compiling ahead ---------------------------- */

/* Helper threads a tpuc_cache_ahead_start may use at most, whatever the
 * machine (each holds a compiler's working memory). */
#define AHEAD_MAX_THREADS 16
/* Programs one call hands to its helpers at most: the memory tier starts
 * over at MEM_TIER_MAX entries, which must not drop programs compiled for
 * the caller before it asks for them. */
#define AHEAD_MAX_PROGRAMS 256

struct tpuc_cache_ahead {
  tpuc_client* client;
  const char* const* texts;
  const size_t* lens;
  size_t* todo; /* indices into texts, in the caller's order */
  size_t n;
  /* Per text: the todo entry that makes its program, or SIZE_MAX (in
   * memory or under way elsewhere already). */
  size_t* item_of;
  atomic_bool* done; /* per todo entry: settled */
  atomic_size_t next;
  atomic_bool stop;
  pthread_t threads[AHEAD_MAX_THREADS];
  int nthreads;
};

/* TPUC_COMPILE_THREADS, else one fewer than the CPUs this process may run
 * on (the caller compiles too). */
static int ahead_threads(void) {
  size_t n = tpuc_env_size("TPUC_COMPILE_THREADS", SIZE_MAX, 0);
  if (n == SIZE_MAX) {
    cpu_set_t set;
    n = sched_getaffinity(0, sizeof set, &set) == 0
            ? (size_t)CPU_COUNT(&set) - 1
            : 0;
  }
  return n > AHEAD_MAX_THREADS ? AHEAD_MAX_THREADS : (int)n;
}

/* Takes the next todo entry and makes its program; false when none is
 * left. */
static bool ahead_one(tpuc_cache_ahead* a) {
  if (atomic_load(&a->stop)) return false;
  size_t i = atomic_fetch_add(&a->next, 1);
  if (i >= a->n) return false;
  size_t t = a->todo[i];
  tpuc_executable* exe = NULL;
  /* A failure is the caller's to report: its own request compiles the
   * program again and gets the error. */
  tpuc_status_free(
      compile_impl(a->client, a->texts[t], a->lens[t], NULL, true, &exe, NULL));
  if (exe != NULL) tpuc_executable_release(exe);
  atomic_store(&a->done[i], true);
  return true;
}

static void* ahead_main(void* arg) {
  tpuc_cache_ahead* a = arg;
  while (ahead_one(a)) {
  }
  return NULL;
}

void tpuc_cache_ahead_help(tpuc_cache_ahead* a, size_t i) {
  if (a == NULL || a->item_of[i] == SIZE_MAX) return;
  /* Waiting for a helper's program would leave this thread idle: it
   * makes the next programs nobody took meanwhile (or this one). */
  while (!atomic_load(&a->done[a->item_of[i]]) && ahead_one(a)) {
  }
}

tpuc_cache_ahead* tpuc_cache_ahead_start(tpuc_client* c,
                                         const char* const* texts,
                                         const size_t* lens, size_t n) {
  int threads = ahead_threads();
  tpuc_cache* k = c ? cache_of(c) : NULL;
  if (threads == 0 || k == NULL || n < 2) return NULL;
  tpuc_cache_ahead* a = calloc(1, sizeof *a);
  size_t* todo = malloc(sizeof *todo * n);
  size_t* item_of = malloc(sizeof *item_of * n);
  if (a == NULL || todo == NULL || item_of == NULL) {
    free(a);
    free(todo);
    free(item_of);
    return NULL;
  }
  /* The programs neither in memory nor under way, each once. */
  tpuc_fingerprint* seen = malloc(sizeof *seen * n);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) item_of[i] = SIZE_MAX;
  for (size_t i = 0; seen != NULL && i < n && m < AHEAD_MAX_PROGRAMS; i++) {
    char stack[8192];
    char* key = NULL;
    size_t key_len = 0;
    tpuc_fingerprint fp;
    tpuc_status* st = make_key(c, texts[i], lens[i], NULL, stack, sizeof stack,
                               &key, &key_len, &fp);
    if (st != NULL) {
      tpuc_status_free(st);
      continue;
    }
    bool dup = false;
    for (size_t j = 0; j < m && !dup; j++)
      if (tpuc_fingerprint_eq(seen[j], fp)) {
        item_of[i] = j;
        dup = true;
      }
    if (!dup) {
      pthread_mutex_lock(&k->mu);
      dup = mem_find(k, fp, key, key_len) != NULL || busy_has(k, fp);
      pthread_mutex_unlock(&k->mu);
    }
    if (!dup) {
      seen[m] = fp;
      item_of[i] = m;
      todo[m++] = i;
    }
    if (key != stack) free(key);
  }
  free(seen);
  /* One missing program the caller compiles itself as soon as it gets
   * there; a helper would only race it. */
  a->done = m < 2 ? NULL : calloc(m, sizeof *a->done);
  if (a->done == NULL) {
    free(todo);
    free(item_of);
    free(a);
    return NULL;
  }
  a->client = c;
  a->texts = texts;
  a->lens = lens;
  a->todo = todo;
  a->item_of = item_of;
  a->n = m;
  for (size_t j = 0; j < m; j++) atomic_init(&a->done[j], false);
  if ((size_t)threads > m) threads = (int)m;
  for (int t = 0; t < threads; t++)
    if (pthread_create(&a->threads[a->nthreads], NULL, ahead_main, a) == 0)
      a->nthreads++;
  if (a->nthreads == 0) {
    tpuc_cache_ahead_finish(a);
    return NULL;
  }
  return a;
}

void tpuc_cache_ahead_finish(tpuc_cache_ahead* a) {
  if (a == NULL) return;
  atomic_store(&a->stop, true);
  for (int t = 0; t < a->nthreads; t++) pthread_join(a->threads[t], NULL);
  free(a->todo);
  free(a->item_of);
  free(a->done);
  free(a);
}

/* ------------------------------- stats --------------------------------- */

tpuc_status* tpuc_cache_get_stats(tpuc_client* c, tpuc_cache_stats* out) {
  if (c == NULL || out == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "client or out is NULL");
  tpuc_cache* k = cache_of(c);
  if (k == NULL)
    return tpuc_status_make(TPUC_FAILED_PRECONDITION, "client has no cache");
  pthread_mutex_lock(&k->mu);
  *out = k->stats;
  out->memory_entries = k->count;
  pthread_mutex_unlock(&k->mu);
  return NULL;
}

tpuc_status* tpuc_cache_clear(tpuc_client* c, bool disk) {
  if (c == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "client is NULL");
  tpuc_cache* k = cache_of(c);
  pthread_mutex_lock(&k->mu);
  mem_reset(k);
  tpuc_status* st = NULL;
  if (disk && k->dir != NULL) {
    DIR* d = opendir(k->dir);
    if (d == NULL) {
      st = tpuc_status_make(TPUC_INTERNAL, "cannot open cache folder %s",
                            k->dir);
    } else {
      struct dirent* ent;
      while ((ent = readdir(d)) != NULL) {
        size_t n = strlen(ent->d_name);
        /* Entries and their lock files (a process still holding a removed
         * lock only loses the compile-once guarantee, never correctness). */
        if ((n > 4 && strcmp(ent->d_name + n - 4, ".tpx") == 0) ||
            (n > 4 && strcmp(ent->d_name + n - 4, ".tpr") == 0) ||
            (n > 5 && strcmp(ent->d_name + n - 5, ".next") == 0) ||
            (n > 5 && strcmp(ent->d_name + n - 5, ".lock") == 0)) {
          char p[4400];
          snprintf(p, sizeof p, "%s/%s", k->dir, ent->d_name);
          unlink(p);
        }
      }
      closedir(d);
    }
  }
  pthread_mutex_unlock(&k->mu);
  return st;
}

const char* tpuc_cache_dir(tpuc_client* c) {
  tpuc_cache* k = c ? cache_of(c) : NULL;
  return (k && k->dir) ? k->dir : "";
}
