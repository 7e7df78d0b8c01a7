/* libtpuc: PyTorch's `tpu` device runtime over the PJRT C API. */
#ifndef TPUC_TPUC_H_
#define TPUC_TPUC_H_

#include "tpuc/buffer.h"
#include "tpuc/collective.h"
#include "tpuc/client.h"
#include "tpuc/dtype.h"
#include "tpuc/eager.h"
#include "tpuc/event.h"
#include "tpuc/executable.h"
#include "tpuc/fallback.h"
#include "tpuc/graph.h"
#include "tpuc/group.h"
#include "tpuc/hlo.h"
#include "tpuc/lazy.h"
#include "tpuc/ops.h"
#include "tpuc/plugin.h"
#include "tpuc/status.h"
#include "tpuc/storage.h"

#endif /* TPUC_TPUC_H_ */
