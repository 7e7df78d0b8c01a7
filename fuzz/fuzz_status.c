/* libFuzzer target for the status paths: reading @main's signature from
 * arbitrary program text (what tpuc_compile does before any argument check)
 * and building, annotating and freeing statuses with arbitrary messages. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* text = (const char*)data;
  tpuc_value_type *in = NULL, *out = NULL;
  int* alias = NULL;
  size_t nin = 0, nout = 0;
  tpuc_status* st =
      tpuc_parse_main_signature(text, size, &in, &nin, &alias, &out, &nout);
  if (st == NULL) {
    /* On success every type is valid and every alias names an output. */
    for (size_t i = 0; i < nin; i++) {
      if (!tpuc_dtype_is_valid(in[i].dtype) || in[i].rank > TPUC_MAX_RANK)
        abort();
      if (alias[i] >= 0 && (size_t)alias[i] >= nout) abort();
    }
    for (size_t i = 0; i < nout; i++)
      if (!tpuc_dtype_is_valid(out[i].dtype)) abort();
    free(in);
    free(out);
    free(alias);
  } else {
    if (in || out || alias || nin || nout) abort();
    if (tpuc_status_code(st) == TPUC_OK) abort();
    st = tpuc_status_annotate(st, "ctx %.*s", (int)(size < 32 ? size : 32),
                              text);
    if (strlen(tpuc_status_message(st)) == 0) abort();
    tpuc_status_free(st);
  }
  /* Messages carrying arbitrary bytes (including '%') are data, not format. */
  char* msg = malloc(size + 1);
  if (msg == NULL) return 0;
  memcpy(msg, data, size);
  msg[size] = '\0';
  tpuc_status* s2 = tpuc_status_make((tpuc_code)(size % 17), "%s", msg);
  if ((size % 17) == 0 ? s2 != NULL : s2 == NULL) abort();
  tpuc_status_free(s2);
  free(msg);
  return 0;
}
