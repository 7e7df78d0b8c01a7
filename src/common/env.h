/* Sizes read from the environment (TPUC_FUSED_MAX_OPS, TPUC_COMPILE_THREADS,
 * ...), all read one way. */
#ifndef TPUC_SRC_COMMON_ENV_H_
#define TPUC_SRC_COMMON_ENV_H_

#include <stddef.h>

/* The variable `name` as a count: all of it decimal digits and at least
 * `lo`; `dflt` when it is unset, empty, or anything else ("abc", "2x",
 * "-1", a value below `lo`). */
size_t tpuc_env_size(const char* name, size_t dflt, size_t lo);

#endif /* TPUC_SRC_COMMON_ENV_H_ */
