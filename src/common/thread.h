/* Background threads of the runtime. */
#ifndef TPUC_SRC_COMMON_THREAD_H_
#define TPUC_SRC_COMMON_THREAD_H_

#include <stdbool.h>

/* Starts `fn(NULL)` on a new detached thread; false when none could be
 * started. */
bool tpuc_thread_start_detached(void* (*fn)(void*));

#endif /* TPUC_SRC_COMMON_THREAD_H_ */
