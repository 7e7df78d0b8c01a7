/* Collective programs: torch.distributed's collectives as ONE StableHLO
 * program across the devices of an in-process group (tpuc/group.h runs
 * it). A rank's input and output are flat storage values (a tensor's
 * bytes, kept as its element type or as u8 bytes, see tpuc/storage.h), so
 * a program reads and writes exactly what a storage holds. */
#ifndef TPUC_COLLECTIVE_H_
#define TPUC_COLLECTIVE_H_

#include <stddef.h>
#include <stdint.h>

#include "tpuc/dtype.h"
#include "tpuc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tpuc_collective_kind {
  /* out[count] = reduce over ranks of in[count] */
  TPUC_COLLECTIVE_ALL_REDUCE = 0,
  /* out[ranks * count] = the ranks' in[count], in rank order */
  TPUC_COLLECTIVE_ALL_GATHER,
  /* out[count / ranks] = part `rank` of the reduction of in[count] */
  TPUC_COLLECTIVE_REDUCE_SCATTER,
  /* out[count]: part r of rank s's in[count] becomes part s of rank r's
   * out (count split in `ranks` equal parts) */
  TPUC_COLLECTIVE_ALL_TO_ALL,
  /* out[count] = in[count] of rank `root` */
  TPUC_COLLECTIVE_BROADCAST,
  TPUC_COLLECTIVE_KINDS,
} tpuc_collective_kind;

typedef enum tpuc_reduce_op {
  TPUC_REDUCE_SUM = 0,
  TPUC_REDUCE_PRODUCT,
  TPUC_REDUCE_MIN,
  TPUC_REDUCE_MAX,
  TPUC_REDUCE_BAND, /* integers and bool */
  TPUC_REDUCE_BOR,
  TPUC_REDUCE_BXOR,
  TPUC_REDUCE_AVG, /* the sum divided by the number of ranks (integers:
                      truncated) */
  TPUC_REDUCE_OPS,
} tpuc_reduce_op;

typedef struct tpuc_collective {
  tpuc_collective_kind kind;
  tpuc_reduce_op op; /* ALL_REDUCE, REDUCE_SCATTER */
  int ranks;
  int root;              /* BROADCAST */
  tpuc_dtype dtype;      /* the tensor's element type */
  int64_t count;         /* elements of a rank's input */
  tpuc_dtype value_type; /* the type the input value is kept in: dtype, or
                            another type of whole elements' bytes (u8) */
} tpuc_collective;

/* The program: @main(value_type[count * dtype size / value_type size]) ->
 * (out_type[out_count]), where out_type is the type the result is kept in
 * (dtype; u8 bytes for bool and complex, which a storage does not keep as
 * elements). INVALID_ARGUMENT for arguments that do not fit together (a
 * bitwise op on floats, a count that does not split in `ranks`);
 * UNIMPLEMENTED for what has no program (a reduction of complex values):
 * the caller then uses another transport. */
tpuc_status* tpuc_collective_program(const tpuc_collective* c, char** text,
                                     size_t* len, tpuc_dtype* out_type,
                                     int64_t* out_count);
/* "all_reduce (sum) of f32[1024] over 4 ranks", for messages. */
void tpuc_collective_describe(const tpuc_collective* c, char* buf, size_t cap);
const char* tpuc_reduce_op_name(tpuc_reduce_op op);

#ifdef __cplusplus
}
#endif
#endif /* TPUC_COLLECTIVE_H_ */
