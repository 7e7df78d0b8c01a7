/* A compiled graph's parts, shared by its capture and replay (graph.c)
 * and its records in the disk cache (graph_record.c). */
#ifndef TPUC_SRC_RUNTIME_GRAPH_INTERNAL_H_
#define TPUC_SRC_RUNTIME_GRAPH_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "tpuc/executable.h"
#include "tpuc/graph.h"

/* Where a program argument comes from at a replay. */
typedef enum { GP_INPUT, GP_CONST, GP_RNG } gp_kind;
typedef struct {
  gp_kind kind;
  size_t input;     /* GP_INPUT: the input whose storage value it is */
  tpuc_buffer* buf; /* GP_CONST: retained */
  uint64_t delta;   /* GP_RNG: the draw's offset from the first one */
} g_param;

/* Where a value the graph hands out (an output storage, an input's new
 * value) comes from. */
typedef enum { GV_RESULT, GV_INPUT, GV_CONST } gv_kind;
typedef struct {
  gv_kind kind;
  size_t index;     /* GV_RESULT: result; GV_INPUT: input (its old value) */
  tpuc_buffer* buf; /* GV_CONST: retained */
} g_val;

typedef struct {
  tpuc_dtype dtype;
  int rank;
  int64_t sizes[TPUC_MAX_RANK];
  int64_t strides[TPUC_MAX_RANK];
  int64_t offset;
  size_t nbytes;
  tpuc_dtype value_dtype; /* the element type of the storage's value */
  long alias_of;          /* the first input with the same storage, or -1 */
} g_input;

/* An input whose old value may be given to its new one (a result). */
typedef struct {
  size_t param, result;
} g_cand;

#define GRAPH_MAX_VARIANTS 8
typedef struct {
  bool* mask; /* per candidate: donated */
  tpuc_executable* exe;
} g_variant;

struct tpuc_graph {
  atomic_int refs;
  tpuc_client* client;
  int device;
  size_t nops;
  size_t nin;
  g_input* in;
  size_t nparams;
  g_param* params;
  size_t nres;
  size_t nout;
  tpuc_graph_output* outs;
  size_t nnew;
  size_t* new_nbytes;
  g_val* new_val;
  size_t nupd;
  size_t* upd_input;
  g_val* upd_val;
  size_t ncand;
  g_cand* cand;
  long check_any; /* the result that ORs the checks (-1: none) */
  size_t nchecks;
  size_t* check_res;
  tpuc_code* check_code;
  const char** check_msg;
  uint64_t rng_draws;
  bool owns_msgs; /* check_msg strings are the graph's (a loaded record) */
  char* text;     /* the program without aliases, for donation variants */
  size_t len;
  pthread_mutex_t mu;
  g_variant var[GRAPH_MAX_VARIANTS];
  /* Donation sets asked for once and not compiled (fingerprints, replaced
   * in turn): a set is compiled the second time it is asked for; the
   * first time, the variant that donates the most of it runs. A first
   * step's transient set (a buffer still held elsewhere) then costs no
   * compile. */
  uint64_t seen[GRAPH_MAX_VARIANTS];
  size_t nseen;
  size_t nvar;
};

/* An input's signature: view `v`, the first input before it with its
 * storage (or -1), and the element type its storage's value is kept in
 * (read only when alias_of < 0). */
void graph_input_of(const tpuc_view* v, long alias_of, tpuc_dtype value_dtype,
                    g_input* out);

/* Frees a graph whose references are gone (or that was never handed out). */
void graph_free(tpuc_graph* g);

/* Counts a graph program compiled or found in the compile cache. */
void graph_count_program(int source, double seconds);

/* Counts a graph record saved or loaded. */
void graph_count_record(bool loaded);

#endif /* TPUC_SRC_RUNTIME_GRAPH_INTERNAL_H_ */
