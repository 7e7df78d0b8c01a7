/* Compile cache: memory tier, disk tier, corrupt and truncated entries,
 * two processes sharing one folder, clearing, statistics, prefetch. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/env.h"
#include "runtime/runtime_internal.h"
#include "tpuc_test.h"

#define NUM_PROGRAMS 12

/* Program k: x * k + k over f32[8]. */
static char* program(int k) {
  char* s = malloc(1024);
  if (s == NULL) return NULL;
  snprintf(s, 1024,
           "module @p%d {\n  func.func public @main(%%arg0: tensor<8xf32>) -> "
           "(tensor<8xf32>) {\n    %%0 = \"stablehlo.constant\"() {value = "
           "dense<%d.0> : tensor<8xf32>} : () -> tensor<8xf32>\n    %%1 = "
           "\"stablehlo.multiply\"(%%arg0, %%0) : (tensor<8xf32>, "
           "tensor<8xf32>) -> tensor<8xf32>\n    %%2 = \"stablehlo.add\"(%%1, "
           "%%0) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>\n    "
           "\"func.return\"(%%2) : (tensor<8xf32>) -> ()\n  }\n}\n",
           k, k);
  return s;
}

static char g_dir[256];

static tpuc_client* new_client(const char* dir) {
  tpuc_plugin* p = NULL;
  tpuc_client* c = NULL;
  tpuc_status* st = tpuc_plugin_load(NULL, NULL, 0, &p);
  tpuc_client_options o = {0};
  o.cpu_device_count = 1;
  o.cache_dir = dir;
  if (st == NULL) st = tpuc_client_create(p, &o, &c);
  if (st) {
    fprintf(stderr, "client: %s\n", tpuc_status_message(st));
    tpuc_status_free(st);
  }
  return c;
}

/* Compiles program k through the cache and checks its result. */
static int run_program(tpuc_client* c, int k, tpuc_cache_source* src) {
  char* text = program(k);
  tpuc_executable* e = NULL;
  tpuc_status* st = tpuc_compile(c, text, strlen(text), NULL, &e, src);
  free(text);
  float x[8], r[8];
  for (int i = 0; i < 8; i++) x[i] = (float)i;
  int64_t dims[1] = {8};
  tpuc_buffer *b = NULL, *out = NULL;
  if (st == NULL)
    st = tpuc_buffer_from_host(c, 0, TPUC_DTYPE_F32, dims, 1, x, NULL, &b);
  if (st == NULL) st = tpuc_execute(e, 0, &b, 1, NULL, &out, 1);
  if (st == NULL) st = tpuc_buffer_to_host(out, r, sizeof r);
  int ok = st == NULL;
  for (int i = 0; ok && i < 8; i++) ok = r[i] == (float)(i * k + k);
  if (st) fprintf(stderr, "program %d: %s\n", k, tpuc_status_message(st));
  tpuc_status_free(st);
  tpuc_buffer_release(b);
  tpuc_buffer_release(out);
  tpuc_executable_release(e);
  return ok;
}

static int count_entries(const char* dir, const char* suffix) {
  DIR* d = opendir(dir);
  if (d == NULL) return -1;
  int n = 0;
  struct dirent* ent;
  size_t sl = strlen(suffix);
  while ((ent = readdir(d)) != NULL) {
    size_t l = strlen(ent->d_name);
    if (l > sl && strcmp(ent->d_name + l - sl, suffix) == 0) n++;
  }
  closedir(d);
  return n;
}

/* Runs first, before this process creates any client, so fork is safe. */
static void test_two_processes_share_a_folder(void) {
  pid_t kids[2];
  for (int i = 0; i < 2; i++) {
    kids[i] = fork();
    TPUC_CHECK(kids[i] >= 0);
    if (kids[i] == 0) {
      tpuc_client* c = new_client(g_dir);
      int ok = c != NULL;
      /* The two children walk the programs in opposite orders. */
      for (int j = 0; ok && j < NUM_PROGRAMS; j++)
        ok = run_program(c, i == 0 ? j + 1 : NUM_PROGRAMS - j, NULL);
      tpuc_client_destroy(c);
      _exit(ok ? 0 : 1);
    }
  }
  for (int i = 0; i < 2; i++) {
    int status = 0;
    TPUC_CHECK(waitpid(kids[i], &status, 0) == kids[i]);
    TPUC_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  /* One entry per program, no temporary file left behind. */
  tpuc_client* c = new_client(g_dir);
  TPUC_CHECK(c != NULL);
  const char* sub = tpuc_cache_dir(c);
  TPUC_CHECK(count_entries(sub, ".tpx") == NUM_PROGRAMS);
  TPUC_CHECK(count_entries(sub, ".tmp") == 0);
  /* A third process finds every program on disk. */
  int ok = 1;
  for (int k = 1; ok && k <= NUM_PROGRAMS; k++) {
    tpuc_cache_source src = TPUC_CACHE_COMPILED;
    ok = run_program(c, k, &src) && src == TPUC_CACHE_DISK;
  }
  tpuc_cache_stats s;
  TPUC_CHECK_OK(tpuc_cache_get_stats(c, &s));
  tpuc_client_destroy(c);
  TPUC_CHECK(ok);
  TPUC_CHECK(s.disk_hits == NUM_PROGRAMS && s.misses == 0);
}

static void test_memory_then_disk_tiers(void) {
  tpuc_client* c = new_client(g_dir);
  TPUC_CHECK(c != NULL);
  TPUC_CHECK_OK(tpuc_cache_clear(c, true));
  TPUC_CHECK(count_entries(tpuc_cache_dir(c), ".tpx") == 0);
  TPUC_CHECK(count_entries(tpuc_cache_dir(c), ".lock") == 0);
  tpuc_cache_source src;
  TPUC_CHECK(run_program(c, 100, &src) && src == TPUC_CACHE_COMPILED);
  TPUC_CHECK(run_program(c, 100, &src) && src == TPUC_CACHE_MEMORY);
  TPUC_CHECK_OK(tpuc_cache_clear(c, false));
  TPUC_CHECK(run_program(c, 100, &src) && src == TPUC_CACHE_DISK);
  TPUC_CHECK(run_program(c, 100, &src) && src == TPUC_CACHE_MEMORY);
  tpuc_cache_stats s;
  TPUC_CHECK_OK(tpuc_cache_get_stats(c, &s));
  TPUC_CHECK(s.misses == 1 && s.memory_hits == 2 && s.disk_hits == 1);
  TPUC_CHECK(s.disk_writes == 1 && s.disk_bytes_written > 0);
  TPUC_CHECK(s.compile_seconds > 0 && s.memory_entries == 1);
  /* Compile options are part of the key. */
  char* text = program(100);
  tpuc_executable* e = NULL;
  tpuc_compile_options o = {.num_replicas = 1, .num_partitions = 1};
  TPUC_CHECK_OK(tpuc_compile(c, text, strlen(text), &o, &e, &src));
  TPUC_CHECK(src == TPUC_CACHE_MEMORY); /* explicit 1/1 equals the default */
  tpuc_executable_release(e);
  free(text);
  tpuc_client_destroy(c);
}

/* Damages the single entry of program k in `sub` with `damage`. */
static int damage_entry(const char* sub, int truncate_it) {
  DIR* d = opendir(sub);
  if (d == NULL) return 0;
  struct dirent* ent;
  int done = 0;
  while (!done && (ent = readdir(d)) != NULL) {
    size_t l = strlen(ent->d_name);
    if (l <= 4 || strcmp(ent->d_name + l - 4, ".tpx") != 0) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", sub, ent->d_name);
    struct stat st;
    if (stat(path, &st) != 0) continue;
    if (truncate_it) {
      done = truncate(path, st.st_size / 2) == 0;
    } else {
      int fd = open(path, O_WRONLY);
      if (fd < 0) continue;
      /* Flip bytes in the middle of the payload. */
      char junk[64];
      memset(junk, 0x5a, sizeof junk);
      done = pwrite(fd, junk, sizeof junk, st.st_size - 200) == sizeof junk;
      close(fd);
    }
  }
  closedir(d);
  return done;
}

static void corrupt_case(int truncate_it) {
  tpuc_client* c = new_client(g_dir);
  TPUC_CHECK(c != NULL);
  TPUC_CHECK_OK(tpuc_cache_clear(c, true));
  tpuc_cache_source src;
  TPUC_CHECK(run_program(c, 7, &src) && src == TPUC_CACHE_COMPILED);
  TPUC_CHECK(damage_entry(tpuc_cache_dir(c), truncate_it));
  TPUC_CHECK_OK(tpuc_cache_clear(c, false));
  /* Detected, recompiled, result still right, entry rewritten. */
  TPUC_CHECK(run_program(c, 7, &src) && src == TPUC_CACHE_COMPILED);
  tpuc_cache_stats s;
  TPUC_CHECK_OK(tpuc_cache_get_stats(c, &s));
  TPUC_CHECK(s.disk_corrupt == 1);
  TPUC_CHECK_OK(tpuc_cache_clear(c, false));
  TPUC_CHECK(run_program(c, 7, &src) && src == TPUC_CACHE_DISK);
  tpuc_client_destroy(c);
}

static void test_corrupt_entry_recompiled(void) { corrupt_case(0); }
static void test_truncated_entry_recompiled(void) { corrupt_case(1); }

static tpuc_client* memory_only_client(void);

/* Records: a blob under a key, found only by that whole key; a damaged one
 * is dropped; clearing the disk tier removes them; none without a disk. */
static void test_records(void) {
  tpuc_client* c = new_client(g_dir);
  TPUC_CHECK(c != NULL);
  TPUC_CHECK_OK(tpuc_cache_clear(c, true));
  static const char key[] = "graph A", data[] = "recipe of graph A";
  bool stored = false;
  TPUC_CHECK_OK(
      tpuc_cache_record_put(c, key, sizeof key, data, sizeof data, &stored));
  TPUC_CHECK(stored && count_entries(tpuc_cache_dir(c), ".tpr") == 1);
  char* got = NULL;
  size_t len = 0;
  TPUC_CHECK_OK(tpuc_cache_record_get(c, key, sizeof key, &got, &len));
  TPUC_CHECK(got != NULL && len == sizeof data && memcmp(got, data, len) == 0);
  free(got);
  TPUC_CHECK_OK(tpuc_cache_record_get(c, "graph B", 8, &got, &len));
  TPUC_CHECK(got == NULL && len == 0);
  /* A key that is a prefix of another is another key. */
  TPUC_CHECK_OK(tpuc_cache_record_get(c, key, sizeof key - 1, &got, &len));
  TPUC_CHECK(got == NULL);
  /* Damaged: not returned, and removed. */
  DIR* d = opendir(tpuc_cache_dir(c));
  struct dirent* ent;
  int damaged = 0;
  while (d != NULL && (ent = readdir(d)) != NULL) {
    size_t l = strlen(ent->d_name);
    if (l <= 4 || strcmp(ent->d_name + l - 4, ".tpr") != 0) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", tpuc_cache_dir(c), ent->d_name);
    int fd = open(path, O_WRONLY);
    damaged = fd >= 0 && pwrite(fd, "X", 1, 60) == 1;
    if (fd >= 0) close(fd);
  }
  if (d != NULL) closedir(d);
  TPUC_CHECK(damaged);
  TPUC_CHECK_OK(tpuc_cache_record_get(c, key, sizeof key, &got, &len));
  TPUC_CHECK(got == NULL);
  TPUC_CHECK(count_entries(tpuc_cache_dir(c), ".tpr") == 0);
  TPUC_CHECK_OK(
      tpuc_cache_record_put(c, key, sizeof key, data, sizeof data, &stored));
  TPUC_CHECK_OK(tpuc_cache_clear(c, true));
  TPUC_CHECK(count_entries(tpuc_cache_dir(c), ".tpr") == 0);
  tpuc_client_destroy(c);
  /* No disk tier: nothing stored, nothing found. */
  c = memory_only_client();
  TPUC_CHECK(c != NULL);
  TPUC_CHECK_OK(
      tpuc_cache_record_put(c, key, sizeof key, data, sizeof data, &stored));
  TPUC_CHECK(!stored);
  TPUC_CHECK_OK(tpuc_cache_record_get(c, key, sizeof key, &got, &len));
  TPUC_CHECK(got == NULL);
  TPUC_CHECK_ERROR(tpuc_cache_record_get(c, key, sizeof key, NULL, &len),
                   TPUC_INVALID_ARGUMENT, "NULL");
  tpuc_client_destroy(c);
}

/* A client whose cache has no disk tier (NULL, said why, on failure). */
static tpuc_client* memory_only_client(void) {
  tpuc_plugin* p = NULL;
  tpuc_client* c = NULL;
  tpuc_status* st = tpuc_plugin_load(NULL, NULL, 0, &p);
  tpuc_client_options o = {0};
  o.disable_disk_cache = true;
  if (st == NULL) st = tpuc_client_create(p, &o, &c);
  if (st) {
    fprintf(stderr, "client: %s\n", tpuc_status_message(st));
    tpuc_status_free(st);
  }
  return c;
}

static void test_disk_disabled(void) {
  tpuc_client* c = memory_only_client();
  TPUC_CHECK(c != NULL);
  TPUC_CHECK(strcmp(tpuc_cache_dir(c), "") == 0);
  tpuc_cache_source src;
  int ok = run_program(c, 3, &src) && src == TPUC_CACHE_COMPILED;
  TPUC_CHECK_OK(tpuc_cache_clear(c, true));
  ok = ok && run_program(c, 3, &src) && src == TPUC_CACHE_COMPILED;
  tpuc_client_destroy(c);
  TPUC_CHECK(ok);
}

/* Threads that ask for the same program at once: one compiles it, the
 * others wait for that compile (no disk tier here to serialize them). */
#define RACERS 4
typedef struct {
  tpuc_client* c;
  pthread_barrier_t* start;
  int ok;
} racer;

static void* race(void* arg) {
  racer* r = arg;
  pthread_barrier_wait(r->start);
  tpuc_cache_source src;
  r->ok = run_program(r->c, 11, &src);
  return NULL;
}

static void test_concurrent_requests_compile_once(void) {
  tpuc_client* c = memory_only_client();
  TPUC_CHECK(c != NULL);
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, RACERS);
  racer r[RACERS];
  pthread_t t[RACERS];
  for (int i = 0; i < RACERS; i++) {
    r[i] = (racer){c, &start, 0};
    pthread_create(&t[i], NULL, race, &r[i]);
  }
  for (int i = 0; i < RACERS; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&start);
  tpuc_cache_stats s;
  TPUC_CHECK_OK(tpuc_cache_get_stats(c, &s));
  for (int i = 0; i < RACERS; i++) TPUC_CHECK(r[i].ok);
  TPUC_CHECK(s.misses == 1);
  TPUC_CHECK(s.memory_hits == RACERS - 1);
  TPUC_CHECK(s.inflight_waits <= RACERS - 1);
  tpuc_client_destroy(c);
}

static void test_unwritable_folder_falls_back(void) {
  /* A cache folder that cannot be created only disables the disk tier. */
  tpuc_client* c = new_client("/proc/tpuc-cannot-exist");
  TPUC_CHECK(c != NULL);
  TPUC_CHECK(strcmp(tpuc_cache_dir(c), "") == 0);
  tpuc_cache_source src;
  int ok = run_program(c, 4, &src);
  tpuc_client_destroy(c);
  TPUC_CHECK(ok);
}

/* Waits (up to 60 s) until client `c` has loaded `n` programs ahead. */
static void wait_prefetched(tpuc_client* c, uint64_t n, tpuc_cache_stats* s) {
  for (int i = 0; i < 6000; i++) {
    TPUC_CHECK_OK(tpuc_cache_get_stats(c, s));
    if (s->prefetched >= n) break;
    usleep(10000);
  }
}

/* A new client loads, before it is asked for anything, the programs the
 * last client on its folder started with; a client that loads a program
 * finds the programs that followed it last time loaded ahead. Each counts
 * as a disk hit. */
static void test_prefetch_loads_successors(void) {
  enum { FIRST = 21, N = 8, OTHER = 40 };
  tpuc_client* c = new_client(g_dir);
  TPUC_CHECK(c != NULL);
  TPUC_CHECK_OK(tpuc_cache_clear(c, true));
  tpuc_client_destroy(c);
  c = new_client(g_dir);
  TPUC_CHECK(c != NULL);
  tpuc_cache_source src;
  for (int k = FIRST; k < FIRST + N; k++)
    TPUC_CHECK(run_program(c, k, &src) && src == TPUC_CACHE_COMPILED);
  /* Each program but the last has a successor, and the first is the
   * successor of the client's start. */
  TPUC_CHECK(count_entries(tpuc_cache_dir(c), ".next") == N);
  tpuc_client_destroy(c);

  /* The whole chain is loaded without a request. */
  c = new_client(g_dir);
  TPUC_CHECK(c != NULL);
  tpuc_cache_stats s = {0};
  wait_prefetched(c, N, &s);
  TPUC_CHECK(s.prefetched == N && s.prefetch_seconds > 0);
  TPUC_CHECK(s.disk_hits == 0 && s.misses == 0 && s.prefetch_hits == 0);
  for (int k = FIRST; k < FIRST + N; k++)
    TPUC_CHECK(run_program(c, k, &src) && src == TPUC_CACHE_DISK);
  TPUC_CHECK_OK(tpuc_cache_get_stats(c, &s));
  TPUC_CHECK(s.disk_hits == N && s.prefetch_hits == N);
  TPUC_CHECK(s.misses == 0 && s.memory_hits == 0);
  /* Used again: plain memory hits. */
  TPUC_CHECK(run_program(c, FIRST + 1, &src) && src == TPUC_CACHE_MEMORY);
  tpuc_client_destroy(c);

  /* A client that starts with another program records that one as its
   * start; the chain of FIRST still loads when FIRST is loaded. */
  c = new_client(g_dir);
  TPUC_CHECK(c != NULL);
  TPUC_CHECK(run_program(c, OTHER, &src) && src == TPUC_CACHE_COMPILED);
  tpuc_client_destroy(c);
  c = new_client(g_dir);
  TPUC_CHECK(c != NULL);
  wait_prefetched(c, 1, &s);
  TPUC_CHECK(s.prefetched == 1);
  TPUC_CHECK(run_program(c, OTHER, &src) && src == TPUC_CACHE_DISK);
  TPUC_CHECK(run_program(c, FIRST, &src) && src == TPUC_CACHE_DISK);
  wait_prefetched(c, N, &s);
  TPUC_CHECK(s.prefetched == N && s.prefetch_hits == 1 && s.disk_hits == 2);
  for (int k = FIRST + 1; k < FIRST + N; k++)
    TPUC_CHECK(run_program(c, k, &src) && src == TPUC_CACHE_DISK);
  TPUC_CHECK_OK(tpuc_cache_get_stats(c, &s));
  TPUC_CHECK(s.disk_hits == N + 1 && s.prefetch_hits == N && s.misses == 0);
  tpuc_client_destroy(c);

  /* A client destroyed while its successors load: no hang, no crash, and
   * the next client still finds every entry. */
  c = new_client(g_dir);
  TPUC_CHECK(c != NULL);
  TPUC_CHECK(run_program(c, FIRST, &src) && src == TPUC_CACHE_DISK);
  tpuc_client_destroy(c);

  /* TPUC_CACHE_PREFETCH=0: nothing is loaded ahead. */
  setenv("TPUC_CACHE_PREFETCH", "0", 1);
  c = new_client(g_dir);
  unsetenv("TPUC_CACHE_PREFETCH");
  TPUC_CHECK(c != NULL);
  for (int k = FIRST; k < FIRST + N; k++)
    TPUC_CHECK(run_program(c, k, &src) && src == TPUC_CACHE_DISK);
  TPUC_CHECK_OK(tpuc_cache_get_stats(c, &s));
  TPUC_CHECK(s.prefetched == 0 && s.prefetch_hits == 0 && s.disk_hits == N);
  tpuc_client_destroy(c);
}

/* Compiling ahead (fused mode's op-by-op runs): helper threads make the
 * listed programs that are new, each once, while the caller asks for them
 * in order; each request gets what a plain request would (first use: where
 * the program came from; then the memory tier), and the counts are a plain
 * sequence's. A program that fails to compile fails its request. */
#define AHEAD_FIRST 40
static void test_compile_ahead(void) {
  setenv("TPUC_COMPILE_THREADS", "0", 1);
  tpuc_client* c = new_client(g_dir);
  TPUC_CHECK(c != NULL);
  TPUC_CHECK_OK(tpuc_cache_clear(c, true));
  tpuc_cache_source src;
  TPUC_CHECK(run_program(c, AHEAD_FIRST, &src) && src == TPUC_CACHE_COMPILED);
  /* New programs 41-44, 42 twice, 40 already in memory, and one that does
   * not compile. */
  static const int order[] = {41, 42, 40, 42, 43, -1, 44};
  enum { N = sizeof order / sizeof order[0] };
  char* texts[N];
  size_t lens[N];
  for (int i = 0; i < N; i++) {
    texts[i] = order[i] < 0 ? strdup("module { func.func @main( }")
                            : program(order[i]);
    lens[i] = strlen(texts[i]);
  }
  /* Turned off: nothing starts. */
  TPUC_CHECK(tpuc_cache_ahead_start(c, (const char* const*)texts, lens, N) ==
             NULL);
  setenv("TPUC_COMPILE_THREADS", "2", 1);
  tpuc_cache_stats before, s;
  TPUC_CHECK_OK(tpuc_cache_get_stats(c, &before));
  tpuc_cache_ahead* a =
      tpuc_cache_ahead_start(c, (const char* const*)texts, lens, N);
  unsetenv("TPUC_COMPILE_THREADS");
  TPUC_CHECK(a != NULL);
  bool ok = true;
  for (int i = 0; i < N; i++) {
    tpuc_cache_ahead_help(a, (size_t)i);
    tpuc_executable* e = NULL;
    tpuc_status* st = tpuc_compile(c, texts[i], lens[i], NULL, &e, &src);
    if (order[i] < 0) {
      ok &= st != NULL && e == NULL;
    } else {
      bool first = order[i] != AHEAD_FIRST && !(order[i] == 42 && i == 3);
      ok &= st == NULL &&
            src == (first ? TPUC_CACHE_COMPILED : TPUC_CACHE_MEMORY);
    }
    tpuc_status_free(st);
    if (e != NULL) tpuc_executable_release(e);
  }
  tpuc_cache_ahead_finish(a);
  TPUC_CHECK(ok);
  TPUC_CHECK_OK(tpuc_cache_get_stats(c, &s));
  /* 41-44 compiled once each; the failing program tried by a helper and
   * again by its request. */
  TPUC_CHECK(s.memory_hits - before.memory_hits == 2);
  TPUC_CHECK(s.misses - before.misses >= 5 && s.misses - before.misses <= 6);
  TPUC_CHECK(s.compiled_ahead - before.compiled_ahead >= 1);
  for (int k = 41; k <= 44; k++)
    TPUC_CHECK(run_program(c, k, &src) && src == TPUC_CACHE_MEMORY);
  tpuc_client_destroy(c);

  /* A new process's helpers load the programs from the disk tier: the
   * first uses are disk hits, one per program. */
  setenv("TPUC_CACHE_PREFETCH", "0", 1);
  setenv("TPUC_COMPILE_THREADS", "3", 1);
  c = new_client(g_dir);
  unsetenv("TPUC_CACHE_PREFETCH");
  TPUC_CHECK(c != NULL);
  a = tpuc_cache_ahead_start(c, (const char* const*)texts, lens, 2);
  unsetenv("TPUC_COMPILE_THREADS");
  TPUC_CHECK(a != NULL);
  for (int i = 0; i < 2; i++) {
    tpuc_cache_ahead_help(a, (size_t)i);
    tpuc_executable* e = NULL;
    TPUC_CHECK_OK(tpuc_compile(c, texts[i], lens[i], NULL, &e, &src));
    tpuc_executable_release(e);
    TPUC_CHECK(src == TPUC_CACHE_DISK);
  }
  tpuc_cache_ahead_finish(a);
  TPUC_CHECK_OK(tpuc_cache_get_stats(c, &s));
  TPUC_CHECK(s.disk_hits == 2 && s.misses == 0 && s.memory_hits == 0);

  /* A value that is not a count is the default, as an unset one: helpers
   * start exactly when they do without it (one fewer than the CPUs). */
  static const char* const odd[] = {"abc", "-1", "2x"};
  cpu_set_t cpus;
  bool helpers =
      sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) > 1;
  for (int v = 0; v < (int)(sizeof odd / sizeof odd[0]); v++) {
    char* fresh[2] = {program(70 + 2 * v), program(71 + 2 * v)};
    size_t flen[2] = {strlen(fresh[0]), strlen(fresh[1])};
    setenv("TPUC_COMPILE_THREADS", odd[v], 1);
    a = tpuc_cache_ahead_start(c, (const char* const*)fresh, flen, 2);
    unsetenv("TPUC_COMPILE_THREADS");
    TPUC_CHECK((a != NULL) == helpers);
    tpuc_cache_ahead_finish(a);
    free(fresh[0]);
    free(fresh[1]);
  }
  tpuc_client_destroy(c);
  for (int i = 0; i < N; i++) free(texts[i]);
}

/* Every TPUC_ count is read by tpuc_env_size: all digits and at least the
 * least value, else the default. */
static void test_env_sizes(void) {
  static const struct {
    const char* v;
    size_t want;
  } cases[] = {{NULL, 7}, {"", 7},   {"12", 12}, {"2", 2},   {"1", 7},
               {"0", 7},  {"2x", 7}, {"-1", 7},  {" 3", 7},  {"+3", 7},
               {"abc", 7}, {"99999999999999999999999", 7}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (cases[i].v == NULL)
      unsetenv("TPUC_TEST_SIZE");
    else
      setenv("TPUC_TEST_SIZE", cases[i].v, 1);
    size_t got = tpuc_env_size("TPUC_TEST_SIZE", 7, 2);
    if (got != cases[i].want)
      fprintf(stderr, "TPUC_TEST_SIZE=%s: %zu, want %zu\n",
              cases[i].v ? cases[i].v : "(unset)", got, cases[i].want);
    TPUC_CHECK(got == cases[i].want);
  }
  unsetenv("TPUC_TEST_SIZE");
}

int main(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/tpuc-cache-test-%d", (int)getpid());
  static const tpuc_test_case cases[] = {
      TPUC_TEST(test_two_processes_share_a_folder),
      TPUC_TEST(test_memory_then_disk_tiers),
      TPUC_TEST(test_corrupt_entry_recompiled),
      TPUC_TEST(test_truncated_entry_recompiled),
      TPUC_TEST(test_disk_disabled),
      TPUC_TEST(test_concurrent_requests_compile_once),
      TPUC_TEST(test_unwritable_folder_falls_back),
      TPUC_TEST(test_prefetch_loads_successors),
      TPUC_TEST(test_records),
      TPUC_TEST(test_compile_ahead),
      TPUC_TEST(test_env_sizes),
  };
  int rc = tpuc_test_run_all(__FILE__, cases, sizeof cases / sizeof cases[0]);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  if (system(cmd) != 0) rc = 1;
  return rc;
}
