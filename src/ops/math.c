/* More math: unary functions, clamps, remainders, matrix-vector products, scans, arg reductions, sort and topk, statistics. */
#include "ops/ops_internal.h"

const op_entry op_table_math[] = {
    {NULL, NULL, 0},
};
