/* Indexing, shape ops and fills: gather/scatter/index, cat, flip, roll, triangles, arange, fill. */
#include "ops/ops_internal.h"

const op_entry op_table_index[] = {
    {NULL, NULL, 0},
};
