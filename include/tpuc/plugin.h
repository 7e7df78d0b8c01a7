/* PJRT plugin discovery and loading.
 *
 * Search order (first match wins):
 *   1. $TPUC_PJRT_PLUGIN=/path/to/plugin.so
 *   2. libtpu        (site-packages/libtpu/libtpu.so)
 *   3. XLA CUDA      (jax-cudaN-pjrt: jax_plugins/xla_cudaN/xla_cuda_plugin.so,
 *                     xla-cudaN-pjrt: xla_plugins/xla_cudaN_pjrt/NAME.so)
 *   4. XLA CPU       (lammps-jax-pjrt-cpu, then xla-cpu-pjrt,
 *                     then fastatomstruct-xla-cpu)
 * Site-packages folders searched: those passed in by the caller, then
 * $TPUC_SITE_PACKAGES (':'-separated), then $VIRTUAL_ENV's, then the folder
 * compiled in at build time (the project's virtual environment).
 *
 * A loaded plugin is process-wide and never unloaded (PJRT plugins do not
 * support dlclose). */
#ifndef TPUC_PLUGIN_H_
#define TPUC_PLUGIN_H_

#include <stdbool.h>
#include <stddef.h>

#include "tpuc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tpuc_plugin tpuc_plugin;

typedef enum tpuc_plugin_kind {
  TPUC_PLUGIN_KIND_EXPLICIT = 0, /* named by TPUC_PJRT_PLUGIN or a path */
  TPUC_PLUGIN_KIND_TPU,
  TPUC_PLUGIN_KIND_CUDA,
  TPUC_PLUGIN_KIND_CPU,
} tpuc_plugin_kind;

typedef struct tpuc_plugin_info {
  const char* path;            /* absolute path of the shared object */
  const char* package;         /* PyPI package it came from, or "" */
  const char* package_version; /* that package's version, or "" */
  tpuc_plugin_kind kind;
  int api_major; /* PJRT C API version the plugin implements */
  int api_minor;
  size_t api_struct_size;   /* sizeof the plugin's PJRT_Api */
  const char* xla_version;  /* plugin attribute, "" if absent */
  int stablehlo_current[3]; /* plugin attribute, zeros if absent */
  int stablehlo_minimum[3];
} tpuc_plugin_info;

/* Finds the plugin that would be loaded, without loading it. `site_dirs` may
 * be NULL. On success *path_out is a malloc'ed string the caller frees. */
tpuc_status* tpuc_plugin_discover(const char* const* site_dirs,
                                  size_t num_site_dirs, char** path_out,
                                  tpuc_plugin_kind* kind_out);

/* Loads the plugin at `path`, or the discovered one when `path` is NULL.
 * Loading the same path twice returns the same object. Checks the API
 * version and the functions tpuc needs; refuses clearly otherwise. */
tpuc_status* tpuc_plugin_load(const char* path, const char* const* site_dirs,
                              size_t num_site_dirs, tpuc_plugin** out);

/* Strings in the info live as long as the process. */
tpuc_status* tpuc_plugin_get_info(const tpuc_plugin* plugin,
                                  tpuc_plugin_info* out);

/* Lowest PJRT C API minor version tpuc drives: from 0.57 on the function
 * table has the order src/pjrt/pjrt_abi.h declares. */
#define TPUC_PJRT_MIN_API_MINOR 57
/* Lowest StableHLO version tpuc's program builder emits for. */
#define TPUC_MIN_STABLEHLO_MAJOR 1

#ifdef __cplusplus
}
#endif
#endif /* TPUC_PLUGIN_H_ */
