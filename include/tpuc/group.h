/* In-process groups: ranks that live in one process as threads, each
 * driving its own device of one client, and run collectives as ONE
 * program compiled for all their devices (XLA's all_reduce, all_gather,
 * ... across replicas), so the data never leaves the devices. This is the
 * transport of torch.distributed's `tpu` backend when all ranks of a
 * process group are in this process (several chips of one host, the CPU
 * plugin's devices). */
#ifndef TPUC_GROUP_H_
#define TPUC_GROUP_H_

#include <stddef.h>
#include <stdint.h>

#include "tpuc/buffer.h"
#include "tpuc/client.h"
#include "tpuc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tpuc_group tpuc_group;

/* Joins the group named `key` (created by its first member) as `rank` of
 * `size`, on `device`. Every member uses the same client and its own
 * device. The handle is the member's; tpuc_group_leave releases it. */
tpuc_status* tpuc_group_join(tpuc_client* client, const char* key, int size,
                             int rank, int device, tpuc_group** out);
void tpuc_group_leave(tpuc_group* group);

int tpuc_group_size(const tpuc_group* group);
tpuc_client* tpuc_group_client(const tpuc_group* group);
int tpuc_group_rank(const tpuc_group* group);
/* The device of rank `rank` (-1 before that rank joined). */
int tpuc_group_device(const tpuc_group* group, int rank);

/* Runs one program across the group. Every rank calls it with the same
 * program `text` (an @main of one argument and one result, compiled here
 * for `size` replicas on the ranks' devices in rank order) and its own
 * `arg`, on its device; each gets its own result, which may not be ready
 * yet. The call returns when every rank has called and the program is
 * enqueued. `what` names the call for messages ("all_reduce of
 * f32[1024]"). With text NULL (and arg NULL) it is a barrier: the ranks
 * only meet.
 *   DEADLINE_EXCEEDED: not every rank called within `timeout_ms` (the
 *     message names the ranks that did not); the group stays usable.
 *   INVALID_ARGUMENT for every rank: the ranks' calls differ (the message
 *     lists each rank's `what`). */
tpuc_status* tpuc_group_run(tpuc_group* group, const char* text, size_t len,
                            const char* what, tpuc_buffer* arg,
                            int64_t timeout_ms, tpuc_buffer** out);

/* Point to point. The calling rank hands `value` to rank `dst` under
 * `tag` and returns at once; rank `dst` receives it (in send order per
 * (source, tag)) with tpuc_group_recv, copied to its device, waiting at
 * most `timeout_ms`. */
tpuc_status* tpuc_group_send(tpuc_group* group, int dst, int64_t tag,
                             tpuc_buffer* value);
tpuc_status* tpuc_group_recv(tpuc_group* group, int src, int64_t tag,
                             int64_t timeout_ms, tpuc_buffer** out);

#ifdef __cplusplus
}
#endif
#endif /* TPUC_GROUP_H_ */
