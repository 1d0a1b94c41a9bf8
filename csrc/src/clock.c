/* clock.c: the monotonic clock behind edgert_session_run_profiled and the worker pool's
 * waits, kept apart so that the POSIX feature macro it needs applies to this file only. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "clock.h"

uint64_t ert_clock_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
