/* Special functions and miscellaneous ops: gamma-family functions, special_*
 * functions, cross products, take/put, reductions into an index. */
#include "ops/ops_internal.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

const op_entry op_table_special[] = {
    {NULL, NULL, 0},
};
