/* FFTs: _fft_r2c, _fft_c2r, _fft_c2c over stablehlo.fft. */
#include "ops/ops_internal.h"

#define TRY(expr) TPUC_RETURN_IF_ERROR(expr)

const op_entry op_table_fft[] = {
    {NULL, NULL, 0},
};
