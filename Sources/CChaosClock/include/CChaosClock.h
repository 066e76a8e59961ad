#ifndef CCHAOS_CLOCK_H
#define CCHAOS_CLOCK_H

/// The kernel's clock discipline (adjtimex, read only): 0 when synchronised (NTP), 1 when not, -1 when it cannot
/// say. `esterror_us` receives the estimated error in microseconds.
int chaos_clock_status(long *esterror_us);

#endif
