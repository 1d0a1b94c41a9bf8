/* clock.h: the monotonic clock (clock.c), for the session's profiled runs and the
 * worker pool's waits (exec.c). Not installed. */
#ifndef ERT_CLOCK_H_
#define ERT_CLOCK_H_

#include <stdint.h>

/* Monotonic clock in nanoseconds; 0 when the clock is unavailable. */
uint64_t ert_clock_ns(void);

#endif /* ERT_CLOCK_H_ */
