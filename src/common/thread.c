#include "common/thread.h"

#include <pthread.h>

bool tpuc_thread_start_detached(void* (*fn)(void*)) {
  pthread_t t;
  pthread_attr_t a;
  if (pthread_attr_init(&a) != 0) return false;
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  bool ok = pthread_create(&t, &a, fn, NULL) == 0;
  pthread_attr_destroy(&a);
  return ok;
}
