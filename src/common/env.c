#include "common/env.h"

#include <errno.h>
#include <stdlib.h>

size_t tpuc_env_size(const char* name, size_t dflt, size_t lo) {
  const char* v = getenv(name);
  if (v == NULL || *v < '0' || *v > '9') return dflt; /* no sign, no space */
  char* end = NULL;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (*end != '\0' || errno == ERANGE || n < lo || n > (size_t)-1) return dflt;
  return (size_t)n;
}
