/* PJRT plugin discovery, loading and version checks. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <glob.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pjrt/internal.h"

#ifndef TPUC_DEFAULT_SITE_DIRS
#define TPUC_DEFAULT_SITE_DIRS ""
#endif

static pthread_mutex_t g_plugins_mu = PTHREAD_MUTEX_INITIALIZER;
static tpuc_plugin* g_plugins = NULL;

tpuc_status* tpuc_pjrt_error(const PJRT_Api* api, PJRT_Error* error,
                             const char* fmt, ...) {
  if (error == NULL) return NULL;
  PJRT_Error_Message_Args margs = {0};
  margs.struct_size = sizeof margs;
  margs.error = error;
  api->PJRT_Error_Message(&margs);
  int code = TPUC_UNKNOWN;
  if (TPUC_PJRT_HAS(api, PJRT_Error_GetCode)) {
    PJRT_Error_GetCode_Args cargs = {0};
    cargs.struct_size = sizeof cargs;
    cargs.error = error;
    PJRT_Error* e2 = api->PJRT_Error_GetCode(&cargs);
    if (e2 == NULL) code = cargs.code;
  }
  char ctx[512] = "";
  if (fmt != NULL) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
  }
  if (code <= TPUC_OK || code > TPUC_UNAUTHENTICATED) code = TPUC_UNKNOWN;
  tpuc_status* st = tpuc_status_make(
      (tpuc_code)code, "%s%s%.*s", ctx, ctx[0] ? ": " : "",
      (int)margs.message_size, margs.message ? margs.message : "");
  PJRT_Error_Destroy_Args dargs = {0};
  dargs.struct_size = sizeof dargs;
  dargs.error = error;
  api->PJRT_Error_Destroy(&dargs);
  return st;
}

void tpuc_pjrt_buffer_destroy(const PJRT_Api* api, PJRT_Buffer* buffer) {
  if (buffer == NULL) return;
  PJRT_Buffer_Destroy_Args a = {0};
  a.struct_size = sizeof a;
  a.buffer = buffer;
  tpuc_status_free(tpuc_pjrt_error(api, api->PJRT_Buffer_Destroy(&a), NULL));
}

void tpuc_pjrt_event_destroy(const PJRT_Api* api, PJRT_Event* event) {
  if (event == NULL) return;
  PJRT_Event_Destroy_Args a = {0};
  a.struct_size = sizeof a;
  a.event = event;
  tpuc_status_free(tpuc_pjrt_error(api, api->PJRT_Event_Destroy(&a), NULL));
}

void tpuc_pjrt_unloaded_destroy(const PJRT_Api* api, PJRT_Executable* exe) {
  if (exe == NULL) return;
  PJRT_Executable_Destroy_Args a = {0};
  a.struct_size = sizeof a;
  a.executable = exe;
  tpuc_status_free(
      tpuc_pjrt_error(api, api->PJRT_Executable_Destroy(&a), NULL));
}

/* ----------------------------- discovery ------------------------------- */

typedef struct {
  const char* pattern; /* glob relative to a site-packages folder */
  const char* package;
  tpuc_plugin_kind kind;
  const char* dist_info; /* glob of the package's .dist-info folder */
} candidate;

/* Priority order: TPU, then CUDA, then CPU (see plugin.h). */
static const candidate kCandidates[] = {
    {"libtpu/libtpu*.so", "libtpu", TPUC_PLUGIN_KIND_TPU, "libtpu-*.dist-info"},
    {"jax_plugins/xla_cuda*/xla_cuda_plugin.so", "jax-cuda-pjrt",
     TPUC_PLUGIN_KIND_CUDA, "jax_cuda*_pjrt-*.dist-info"},
    {"xla_plugins/xla_cuda*/*.so", "xla-cuda-pjrt", TPUC_PLUGIN_KIND_CUDA,
     "xla_cuda*_pjrt-*.dist-info"},
    {"lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so", "lammps-jax-pjrt-cpu",
     TPUC_PLUGIN_KIND_CPU, "lammps_jax_pjrt_cpu-*.dist-info"},
    {"xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so", "xla-cpu-pjrt",
     TPUC_PLUGIN_KIND_CPU, "xla_cpu_pjrt-*.dist-info"},
    {"fastatomstruct_xla_cpu/libpjrt_cpu.so", "fastatomstruct-xla-cpu",
     TPUC_PLUGIN_KIND_CPU, "fastatomstruct_xla_cpu-*.dist-info"},
};

typedef struct {
  char** dirs;
  size_t n, cap;
} dir_list;

static void dirs_add(dir_list* l, const char* d, size_t len) {
  if (len == 0) return;
  for (size_t i = 0; i < l->n; i++)
    if (strlen(l->dirs[i]) == len && memcmp(l->dirs[i], d, len) == 0) return;
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 8;
    char** nd = realloc(l->dirs, cap * sizeof *nd);
    if (nd == NULL) return;
    l->dirs = nd;
    l->cap = cap;
  }
  char* s = strndup(d, len);
  if (s != NULL) l->dirs[l->n++] = s;
}

static void dirs_add_pathlist(dir_list* l, const char* list) {
  if (list == NULL) return;
  const char* p = list;
  while (*p) {
    const char* e = strchr(p, ':');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    dirs_add(l, p, len);
    p += len;
    if (*p == ':') p++;
  }
}

static void dirs_add_glob(dir_list* l, const char* pattern) {
  glob_t g;
  if (glob(pattern, 0, NULL, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; i++)
      dirs_add(l, g.gl_pathv[i], strlen(g.gl_pathv[i]));
  }
  globfree(&g);
}

static void dirs_free(dir_list* l) {
  for (size_t i = 0; i < l->n; i++) free(l->dirs[i]);
  free(l->dirs);
}

static void collect_dirs(dir_list* l, const char* const* site_dirs,
                         size_t num_site_dirs) {
  for (size_t i = 0; i < num_site_dirs; i++)
    if (site_dirs[i]) dirs_add(l, site_dirs[i], strlen(site_dirs[i]));
  dirs_add_pathlist(l, getenv("TPUC_SITE_PACKAGES"));
  const char* venv = getenv("VIRTUAL_ENV");
  if (venv != NULL && venv[0]) {
    char pat[4096];
    snprintf(pat, sizeof pat, "%s/lib/python3*/site-packages", venv);
    dirs_add_glob(l, pat);
  }
  dirs_add_pathlist(l, TPUC_DEFAULT_SITE_DIRS);
}

static int is_file(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

tpuc_status* tpuc_plugin_discover(const char* const* site_dirs,
                                  size_t num_site_dirs, char** path_out,
                                  tpuc_plugin_kind* kind_out) {
  if (path_out == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "path_out is NULL");
  *path_out = NULL;
  const char* explicit_path = getenv("TPUC_PJRT_PLUGIN");
  if (explicit_path != NULL && explicit_path[0]) {
    if (!is_file(explicit_path))
      return tpuc_status_make(
          TPUC_NOT_FOUND,
          "TPUC_PJRT_PLUGIN=%s: no such file; point it at a PJRT plugin "
          "shared object, or unset it to use an installed plugin package",
          explicit_path);
    *path_out = strdup(explicit_path);
    if (kind_out) *kind_out = TPUC_PLUGIN_KIND_EXPLICIT;
    return *path_out ? NULL
                     : tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "strdup");
  }
  dir_list dirs = {0};
  collect_dirs(&dirs, site_dirs, num_site_dirs);
  tpuc_status* st = NULL;
  for (size_t c = 0;
       c < sizeof kCandidates / sizeof kCandidates[0] && *path_out == NULL;
       c++) {
    for (size_t d = 0; d < dirs.n && *path_out == NULL; d++) {
      char pat[4096];
      snprintf(pat, sizeof pat, "%s/%s", dirs.dirs[d], kCandidates[c].pattern);
      glob_t g;
      if (glob(pat, 0, NULL, &g) == 0 && g.gl_pathc > 0) {
        *path_out = strdup(g.gl_pathv[0]);
        if (kind_out) *kind_out = kCandidates[c].kind;
      }
      globfree(&g);
    }
  }
  if (*path_out == NULL) {
    char searched[2048] = "";
    size_t used = 0;
    for (size_t d = 0; d < dirs.n && used < sizeof searched - 8; d++)
      used += (size_t)snprintf(searched + used, sizeof searched - used, "%s%s",
                               d ? ", " : "", dirs.dirs[d]);
    st = tpuc_status_make(
        TPUC_NOT_FOUND,
        "no PJRT plugin found (searched site-packages: %s). Install one: "
        "`pip install lammps-jax-pjrt-cpu==0.11.2` (CPU), `libtpu` (Cloud "
        "TPU) or `jax-cuda13-pjrt` (NVIDIA GPU), or set "
        "TPUC_PJRT_PLUGIN=/path/to/plugin.so",
        dirs.n ? searched : "none");
  }
  dirs_free(&dirs);
  return st;
}

/* ------------------------------ loading -------------------------------- */

/* Finds which package a plugin path belongs to and that package's
 * installed version (from its .dist-info folder name). */
static const char* package_for_path(const char* path, tpuc_plugin_kind* kind,
                                    char* version, size_t version_cap) {
  version[0] = '\0';
  for (size_t c = 0; c < sizeof kCandidates / sizeof kCandidates[0]; c++) {
    /* The candidate's pattern up to its first wildcard must appear in the
     * path as a folder prefix ("/xla_plugins/xla_cuda", "/libtpu/libtpu"). */
    char prefix[128];
    snprintf(prefix, sizeof prefix, "/%s", kCandidates[c].pattern);
    char* star = strchr(prefix, '*');
    if (star) *star = '\0';
    const char* at = strstr(path, prefix);
    if (at == NULL) continue;
    if (kind) *kind = kCandidates[c].kind;
    char pat[4096];
    snprintf(pat, sizeof pat, "%.*s/%s", (int)(at - path), path,
             kCandidates[c].dist_info);
    glob_t g;
    if (glob(pat, 0, NULL, &g) == 0 && g.gl_pathc > 0) {
      /* ".../name-1.2.3.dist-info" -> "1.2.3" */
      const char* base = strrchr(g.gl_pathv[0], '/');
      base = base ? base + 1 : g.gl_pathv[0];
      const char* dash = strchr(base, '-');
      const char* end = strstr(base, ".dist-info");
      if (dash && end && end > dash)
        snprintf(version, version_cap, "%.*s", (int)(end - dash - 1), dash + 1);
    }
    globfree(&g);
    return kCandidates[c].package;
  }
  return "";
}

/* Quiets XLA/TSL logging on stderr unless TPUC_LOG_LEVEL asks for it.
 * TPUC_LOG_LEVEL=0..3 maps onto TF_CPP_MIN_LOG_LEVEL (0: info and up,
 * 3: fatal only); unset means 3. An explicit TF_CPP_MIN_LOG_LEVEL wins. */
static void configure_plugin_logging(void) {
  const char* lvl = getenv("TPUC_LOG_LEVEL");
  const char* v =
      (lvl && lvl[0] >= '0' && lvl[0] <= '3' && !lvl[1]) ? lvl : "3";
  setenv("TF_CPP_MIN_LOG_LEVEL", v, 0);
  setenv("GLOG_minloglevel", v, 0);
}

static const char* kRequiredSlots[] = {
    "PJRT_Error_Destroy",
    "PJRT_Error_Message",
    "PJRT_Plugin_Initialize",
    "PJRT_Event_Destroy",
    "PJRT_Event_IsReady",
    "PJRT_Event_Error",
    "PJRT_Event_Await",
    "PJRT_Event_OnReady",
    "PJRT_Client_Create",
    "PJRT_Client_Destroy",
    "PJRT_Client_PlatformName",
    "PJRT_Client_PlatformVersion",
    "PJRT_Client_AddressableDevices",
    "PJRT_Client_Compile",
    "PJRT_Client_BufferFromHostBuffer",
    "PJRT_Device_GetDescription",
    "PJRT_DeviceDescription_Id",
    "PJRT_DeviceDescription_Kind",
    "PJRT_LoadedExecutable_Destroy",
    "PJRT_LoadedExecutable_Execute",
    "PJRT_Buffer_Destroy",
    "PJRT_Buffer_ToHostBuffer",
    "PJRT_Buffer_ReadyEvent",
    "PJRT_Buffer_IsDeleted",
};

static int slot_present(const PJRT_Api* api, const char* name) {
#define SLOT(n) \
  if (strcmp(name, #n) == 0) return TPUC_PJRT_HAS(api, n);
  SLOT(PJRT_Error_Destroy)
  SLOT(PJRT_Error_Message)
  SLOT(PJRT_Plugin_Initialize)
  SLOT(PJRT_Event_Destroy)
  SLOT(PJRT_Event_IsReady)
  SLOT(PJRT_Event_Error)
  SLOT(PJRT_Event_Await)
  SLOT(PJRT_Event_OnReady)
  SLOT(PJRT_Client_Create)
  SLOT(PJRT_Client_Destroy)
  SLOT(PJRT_Client_PlatformName)
  SLOT(PJRT_Client_PlatformVersion)
  SLOT(PJRT_Client_AddressableDevices)
  SLOT(PJRT_Client_Compile)
  SLOT(PJRT_Client_BufferFromHostBuffer)
  SLOT(PJRT_Device_GetDescription)
  SLOT(PJRT_DeviceDescription_Id)
  SLOT(PJRT_DeviceDescription_Kind)
  SLOT(PJRT_LoadedExecutable_Destroy)
  SLOT(PJRT_LoadedExecutable_Execute)
  SLOT(PJRT_Buffer_Destroy)
  SLOT(PJRT_Buffer_ToHostBuffer)
  SLOT(PJRT_Buffer_ReadyEvent)
  SLOT(PJRT_Buffer_IsDeleted)
#undef SLOT
  return 0;
}

static void read_attributes(tpuc_plugin* p) {
  const PJRT_Api* api = p->api;
  if (!TPUC_PJRT_HAS(api, PJRT_Plugin_Attributes)) return;
  PJRT_Plugin_Attributes_Args args = {0};
  args.struct_size = sizeof args;
  PJRT_Error* err = api->PJRT_Plugin_Attributes(&args);
  if (err != NULL) {
    tpuc_status_free(tpuc_pjrt_error(api, err, NULL));
    return;
  }
  for (size_t i = 0; i < args.num_attributes; i++) {
    const PJRT_NamedValue* v = &args.attributes[i];
    size_t nl = v->name_size;
    if (nl == strlen("xla_version") && !memcmp(v->name, "xla_version", nl)) {
      if (v->type == PJRT_NamedValue_kInt64)
        snprintf(p->xla_version, sizeof p->xla_version, "%lld",
                 (long long)v->int64_value);
      else if (v->type == PJRT_NamedValue_kString)
        snprintf(p->xla_version, sizeof p->xla_version, "%.*s",
                 (int)v->value_size, v->string_value);
    }
    int* dst = NULL;
    if (nl == strlen("stablehlo_current_version") &&
        !memcmp(v->name, "stablehlo_current_version", nl))
      dst = p->info.stablehlo_current;
    if (nl == strlen("stablehlo_minimum_version") &&
        !memcmp(v->name, "stablehlo_minimum_version", nl))
      dst = p->info.stablehlo_minimum;
    if (dst != NULL && v->type == PJRT_NamedValue_kInt64List) {
      for (size_t k = 0; k < 3 && k < v->value_size; k++)
        dst[k] = (int)v->int64_array_value[k];
    }
  }
}

static tpuc_status* load_path(const char* path, tpuc_plugin** out) {
  char* real = realpath(path, NULL);
  if (real == NULL)
    return tpuc_status_make(TPUC_NOT_FOUND, "PJRT plugin %s: no such file",
                            path);
  for (tpuc_plugin* p = g_plugins; p; p = p->next) {
    if (strcmp(p->path, real) == 0) {
      free(real);
      *out = p;
      return NULL;
    }
  }
  configure_plugin_logging();
  dlerror();
  /* RTLD_LOCAL keeps the plugin's symbols (a full XLA) private. The handle
   * is never closed: PJRT plugins do not support being unloaded. */
  void* handle = dlopen(real, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    const char* why = dlerror();
    tpuc_status* st = tpuc_status_make(TPUC_FAILED_PRECONDITION,
                                       "cannot load PJRT plugin %s: %s", real,
                                       why ? why : "unknown dlopen error");
    free(real);
    return st;
  }
  typedef const PJRT_Api* (*get_api_fn)(void);
  get_api_fn get_api = (get_api_fn)dlsym(handle, "GetPjrtApi");
  if (get_api == NULL) {
    tpuc_status* st = tpuc_status_make(
        TPUC_FAILED_PRECONDITION,
        "%s is not a PJRT plugin (it has no GetPjrtApi symbol)", real);
    free(real);
    return st;
  }
  const PJRT_Api* api = get_api();
  if (api == NULL ||
      api->struct_size < offsetof(PJRT_Api, PJRT_Error_Destroy)) {
    tpuc_status* st =
        tpuc_status_make(TPUC_FAILED_PRECONDITION,
                         "PJRT plugin %s returned an invalid API table", real);
    free(real);
    return st;
  }
  int major = api->pjrt_api_version.major_version;
  int minor = api->pjrt_api_version.minor_version;
  if (major != 0 || minor < TPUC_PJRT_MIN_API_MINOR) {
    tpuc_status* st = tpuc_status_make(
        TPUC_FAILED_PRECONDITION,
        "PJRT plugin %s implements PJRT C API %d.%d; tpuc drives 0.%d and "
        "newer 0.x versions. Install a newer plugin (for the CPU: "
        "`pip install lammps-jax-pjrt-cpu==0.11.2`)",
        real, major, minor, TPUC_PJRT_MIN_API_MINOR);
    free(real);
    return st;
  }
  for (size_t i = 0; i < sizeof kRequiredSlots / sizeof kRequiredSlots[0];
       i++) {
    if (!slot_present(api, kRequiredSlots[i])) {
      tpuc_status* st = tpuc_status_make(
          TPUC_FAILED_PRECONDITION,
          "PJRT plugin %s (API %d.%d) lacks %s, which tpuc needs", real, major,
          minor, kRequiredSlots[i]);
      free(real);
      return st;
    }
  }
  tpuc_plugin* p = calloc(1, sizeof *p);
  if (p == NULL) {
    free(real);
    return tpuc_status_make(TPUC_RESOURCE_EXHAUSTED, "out of memory");
  }
  p->api = api;
  p->path = real;
  tpuc_plugin_kind kind = TPUC_PLUGIN_KIND_EXPLICIT;
  p->package = strdup(package_for_path(real, &kind, p->package_version,
                                       sizeof p->package_version));
  read_attributes(p);
  if (p->info.stablehlo_current[0] != 0 &&
      p->info.stablehlo_current[0] < TPUC_MIN_STABLEHLO_MAJOR) {
    tpuc_status* st = tpuc_status_make(
        TPUC_FAILED_PRECONDITION,
        "PJRT plugin %s accepts StableHLO up to %d.%d.%d; tpuc emits "
        "StableHLO %d.x. Install a newer plugin",
        real, p->info.stablehlo_current[0], p->info.stablehlo_current[1],
        p->info.stablehlo_current[2], TPUC_MIN_STABLEHLO_MAJOR);
    free(p->package);
    free(p->path);
    free(p);
    return st;
  }
  PJRT_Plugin_Initialize_Args iargs = {0};
  iargs.struct_size = sizeof iargs;
  tpuc_status* st = tpuc_pjrt_error(api, api->PJRT_Plugin_Initialize(&iargs),
                                    "initializing PJRT plugin %s", real);
  if (st != NULL) {
    free(p->package);
    free(p->path);
    free(p);
    return st;
  }
  p->info.path = p->path;
  p->info.package = p->package ? p->package : "";
  p->info.kind = kind;
  p->info.api_major = major;
  p->info.api_minor = minor;
  p->info.api_struct_size = api->struct_size;
  p->info.xla_version = p->xla_version;
  p->info.package_version = p->package_version;
  p->next = g_plugins;
  g_plugins = p;
  *out = p;
  return NULL;
}

tpuc_status* tpuc_plugin_load(const char* path, const char* const* site_dirs,
                              size_t num_site_dirs, tpuc_plugin** out) {
  if (out == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  char* found = NULL;
  if (path == NULL) {
    TPUC_RETURN_IF_ERROR(
        tpuc_plugin_discover(site_dirs, num_site_dirs, &found, NULL));
    path = found;
  }
  pthread_mutex_lock(&g_plugins_mu);
  tpuc_status* st = load_path(path, out);
  pthread_mutex_unlock(&g_plugins_mu);
  free(found);
  return st;
}

tpuc_status* tpuc_plugin_get_info(const tpuc_plugin* plugin,
                                  tpuc_plugin_info* out) {
  if (plugin == NULL || out == NULL)
    return tpuc_status_make(TPUC_INVALID_ARGUMENT, "plugin or out is NULL");
  *out = plugin->info;
  return NULL;
}
