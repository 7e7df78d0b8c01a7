/* Events: completion of asynchronous work (a transfer or an execution). */
#ifndef TPUC_EVENT_H_
#define TPUC_EVENT_H_

#include <stdbool.h>

#include "tpuc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tpuc_event tpuc_event;

/* Blocks until the event is ready; returns the work's error, if any. The
 * event stays valid and can be awaited again. */
tpuc_status* tpuc_event_await(tpuc_event* event);
tpuc_status* tpuc_event_is_ready(tpuc_event* event, bool* ready);

/* Calls `callback` once when the event is ready, possibly on another thread
 * or immediately on this one. The callback owns `status` (NULL on success). */
typedef void (*tpuc_event_callback)(tpuc_status* status, void* user_data);
tpuc_status* tpuc_event_on_ready(tpuc_event* event,
                                 tpuc_event_callback callback, void* user_data);

/* Releases the event. Safe while the work is still running. */
void tpuc_event_destroy(tpuc_event* event);

#ifdef __cplusplus
}
#endif
#endif /* TPUC_EVENT_H_ */
