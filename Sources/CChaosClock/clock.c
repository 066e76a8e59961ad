#include "CChaosClock.h"
#include <sys/timex.h>

int chaos_clock_status(long *esterror_us) {
    struct timex state = {0};  // modes 0: read only
    int result = adjtimex(&state);
    if (result < 0) return -1;
    *esterror_us = state.esterror;
    return (result == TIME_ERROR || (state.status & STA_UNSYNC)) ? 1 : 0;
}
