// glibc headers Swift's Glibc module leaves out: adjtimex(2) (is the clock synchronized) and getrandom(2); and
// prctl(2), variadic in C, so wrapped for the one call beacond makes.
#include <sys/timex.h>
#include <sys/random.h>
#include <sys/prctl.h>

static inline int beacond_prctl_not_dumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }
#include <sys/timerfd.h>
