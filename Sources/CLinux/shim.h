// glibc headers Swift's Glibc module leaves out: adjtimex(2) (is the clock synchronized) and getrandom(2).
#include <sys/timex.h>
#include <sys/random.h>
