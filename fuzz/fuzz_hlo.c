/* libFuzzer target for the StableHLO builder: the input is read as a
 * sequence of builder calls with arbitrary operands, dims and attributes.
 * Every call must either succeed or return a status (never crash, leak or
 * read out of bounds), and whatever was built must print. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tpuc/hlo.h"

typedef struct {
  const uint8_t* p;
  size_t n;
} reader;

static uint8_t u8(reader* r) {
  if (r->n == 0) return 0;
  r->n--;
  return *r->p++;
}

/* Small signed numbers, biased to the range dims live in. */
static int64_t num(reader* r) { return (int64_t)(int8_t)u8(r) % 9; }

#define MAXV 64

typedef struct {
  tpuc_hlo_module* m;
  tpuc_hlo_fn* body; /* where ops go: @main or an open region */
  tpuc_hlo_fn* regions[8];
  int nregions;
  tpuc_hlo_value vals[MAXV];
  int nvals;
} state;

static tpuc_hlo_value pick(state* s, reader* r) {
  uint8_t b = u8(r);
  if (s->nvals == 0 || b == 255) return (tpuc_hlo_value)b - 3;
  return s->vals[b % s->nvals];
}

static void keep(state* s, tpuc_status* st, const tpuc_hlo_value* v, int n) {
  if (st != NULL) {
    if (tpuc_status_code(st) == TPUC_OK) abort();
    tpuc_status_free(st);
    return;
  }
  for (int i = 0; i < n && s->nvals < MAXV; ++i) s->vals[s->nvals++] = v[i];
}

static tpuc_hlo_type rand_type(reader* r) {
  int64_t dims[4];
  int rank = u8(r) % 5;
  for (int i = 0; i < rank; ++i) dims[i] = num(r);
  tpuc_dtype d = (tpuc_dtype)(u8(r) % (TPUC_DTYPE_COUNT_ + 1));
  return tpuc_hlo_type_make(d, dims, rank);
}

static tpuc_hlo_fn* pick_region(state* s, reader* r) {
  if (s->nregions == 0) return NULL;
  return s->regions[u8(r) % s->nregions];
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  reader r = {data, size};
  state s;
  memset(&s, 0, sizeof s);
  if (tpuc_hlo_module_create("fuzz", &s.m) != NULL) abort();
  tpuc_hlo_fn* main_fn;
  if (tpuc_hlo_main(s.m, &main_fn) != NULL) abort();
  s.body = main_fn;
  int steps = 0;
  while (r.n > 0 && steps++ < 200) {
    uint8_t op = u8(&r);
    tpuc_hlo_value out[4];
    /* every list the API reads holds up to TPUC_MAX_RANK (pairs: twice) */
    int64_t a[TPUC_MAX_RANK], b[TPUC_MAX_RANK], c[2 * TPUC_MAX_RANK + 4];
    for (int i = 0; i < 4; ++i) a[i] = num(&r), b[i] = num(&r);
    for (int i = 0; i < 8; ++i) c[i] = num(&r);
    for (int i = 4; i < TPUC_MAX_RANK; ++i) a[i] = b[i] = a[i % 4];
    for (int i = 8; i < 2 * TPUC_MAX_RANK + 4; ++i) c[i] = c[i % 8];
    tpuc_hlo_type t = rand_type(&r);
    tpuc_hlo_value x = pick(&s, &r), y = pick(&s, &r), z = pick(&s, &r);
    tpuc_hlo_value xs[TPUC_MAX_RANK];
    for (int i = 0; i < TPUC_MAX_RANK; ++i)
      xs[i] = i % 3 ? (i % 3 == 1 ? y : z) : x;
    tpuc_status* st = NULL;
    int nout = 1;
    switch (op % 24) {
      case 0:
        st = tpuc_hlo_arg(s.body, &t, &out[0]);
        break;
      case 1:
        st = tpuc_hlo_unary(s.body, (tpuc_hlo_unary_op)(u8(&r) % 27), x,
                            &out[0]);
        break;
      case 2:
        st = tpuc_hlo_binary(s.body, (tpuc_hlo_binary_op)(u8(&r) % 18), x, y,
                             &out[0]);
        break;
      case 3:
        st = tpuc_hlo_compare(s.body, (tpuc_hlo_compare_dir)(u8(&r) % 7), x, y,
                              &out[0]);
        break;
      case 4:
        st = tpuc_hlo_select(s.body, x, y, z, &out[0]);
        break;
      case 5:
        st = tpuc_hlo_convert(s.body, x, t.dtype, &out[0]);
        break;
      case 6:
        st = tpuc_hlo_bitcast_convert(s.body, x, t.dtype, &out[0]);
        break;
      case 7: {
        uint8_t buf[64] = {0};
        int64_t ne = tpuc_hlo_type_num_elements(&t);
        size_t es = tpuc_dtype_size(t.dtype);
        size_t sz = ne >= 0 && es && (size_t)ne * es <= sizeof buf
                        ? (size_t)ne * es
                        : u8(&r) % 64;
        st = tpuc_hlo_constant(s.body, &t, buf, sz, &out[0]);
        break;
      }
      case 8:
        st = tpuc_hlo_iota(s.body, &t, a[0], &out[0]);
        break;
      case 9:
        st = tpuc_hlo_broadcast_in_dim(s.body, x, t.dims, t.rank, a, &out[0]);
        break;
      case 10:
        st = tpuc_hlo_reshape(s.body, x, t.dims, t.rank, &out[0]);
        break;
      case 11:
        st = tpuc_hlo_transpose(s.body, x, a, &out[0]);
        break;
      case 12:
        st = tpuc_hlo_slice(s.body, x, a, b, u8(&r) & 1 ? c : NULL, &out[0]);
        break;
      case 13:
        st = tpuc_hlo_pad(s.body, x, y, a, b, u8(&r) & 1 ? c : NULL, &out[0]);
        break;
      case 14:
        st = tpuc_hlo_concatenate(s.body, xs, 1 + u8(&r) % 3, a[0], &out[0]);
        break;
      case 15:
        st = tpuc_hlo_dynamic_slice(s.body, x, xs, a, &out[0]);
        break;
      case 16: {
        tpuc_hlo_dot_dims d = {a,
                               b,
                               u8(&r) % 3,
                               c,
                               c + 4,
                               u8(&r) % 3,
                               (tpuc_dtype)(u8(&r) % 4),
                               (tpuc_hlo_precision)(u8(&r) % 4)};
        st = tpuc_hlo_dot_general(s.body, x, y, &d, &out[0]);
        break;
      }
      case 17: {
        tpuc_hlo_conv cv;
        tpuc_hlo_conv_init_nchw(&cv, u8(&r) % 3);
        cv.feature_group_count = num(&r);
        cv.padding = u8(&r) & 1 ? c : NULL;
        cv.strides = u8(&r) & 1 ? a : NULL;
        st = tpuc_hlo_convolution(s.body, x, y, &cv, &out[0]);
        break;
      }
      case 18: {
        /* open a region with scalar args; ops go into it until returned */
        if (s.body != main_fn || s.nregions == 8) break;
        tpuc_hlo_type ts[2] = {tpuc_hlo_type_scalar(t.dtype),
                               tpuc_hlo_type_scalar(t.dtype)};
        tpuc_hlo_fn* rg;
        st = tpuc_hlo_region_create(s.m, ts, u8(&r) % 3, &rg);
        nout = 0;
        if (st == NULL) {
          s.regions[s.nregions++] = rg;
          s.body = rg;
          s.nvals = 0;
          for (size_t i = 0; i < tpuc_hlo_num_args(rg); ++i)
            if (tpuc_hlo_get_arg(rg, i, &out[0]) == NULL)
              s.vals[s.nvals++] = out[0];
        }
        break;
      }
      case 19:
        if (s.body == main_fn) break;
        st = tpuc_hlo_return(s.body, xs, u8(&r) % 3);
        nout = 0;
        if (st == NULL) {
          s.body = main_fn;
          s.nvals = 0; /* main's values are forgotten; ids stay invalid */
        }
        break;
      case 20:
        st = tpuc_hlo_reduce(s.body, &x, &y, 1, a, u8(&r) % 3,
                             pick_region(&s, &r), &out[0]);
        break;
      case 21: {
        tpuc_hlo_window w = {a, u8(&r) & 1 ? b : NULL, NULL, NULL,
                             u8(&r) & 1 ? c : NULL};
        st = tpuc_hlo_reduce_window(s.body, &x, &y, 1, &w, pick_region(&s, &r),
                                    &out[0]);
        break;
      }
      case 22:
        st = tpuc_hlo_sort(s.body, xs, 1 + u8(&r) % 2, a[0], true,
                           pick_region(&s, &r), out);
        nout = 0;
        break;
      case 23: {
        tpuc_hlo_gather_dims g = {0};
        g.offset_dims = a;
        g.num_offset_dims = u8(&r) % 3;
        g.collapsed_slice_dims = b;
        g.num_collapsed_slice_dims = u8(&r) % 3;
        g.start_index_map = c;
        g.num_start_index_map = u8(&r) % 3;
        g.index_vector_dim = num(&r);
        st = tpuc_hlo_gather(s.body, x, y, &g, c + 4, false, &out[0]);
        break;
      }
    }
    keep(&s, st, out, nout);
  }
  if (s.body != main_fn) {
    tpuc_status* st = tpuc_hlo_return(s.body, NULL, 0);
    if (st != NULL) abort();
    s.body = main_fn;
  }
  tpuc_status* st = tpuc_hlo_return(main_fn, s.vals, (size_t)(s.nvals % 3));
  if (st != NULL) tpuc_status_free(st);
  char* text = NULL;
  st = tpuc_hlo_module_print(s.m, &text, NULL);
  if (st == NULL) {
    if (text == NULL || strncmp(text, "module @fuzz {", 14) != 0) abort();
    free(text);
  } else {
    tpuc_status_free(st);
  }
  tpuc_hlo_module_destroy(s.m);
  return 0;
}
