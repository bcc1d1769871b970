/* libm's functions that Swift's standard library lacks (pow), for the pure modules: the C library's math alone, no
 * system calls and no Glibc module. */
#include <math.h>
