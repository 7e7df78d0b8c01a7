/* Time for the runtime's statistics. */
#ifndef TPUC_SRC_COMMON_CLOCK_H_
#define TPUC_SRC_COMMON_CLOCK_H_

/* Monotonic clock in seconds. */
double tpuc_now_seconds(void);

#endif /* TPUC_SRC_COMMON_CLOCK_H_ */
