/* Neural-network ops: normalization, activations and their backwards, dropout, convolution, pooling, upsampling, padding. */
#include "ops/ops_internal.h"

const op_entry op_table_nn[] = {
    {NULL, NULL, 0},
};
