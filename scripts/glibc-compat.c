/* The arm64 package is compiled with Debian 13's Swift runtime, which was built against glibc 2.41 and calls the
 * C23 names of three parsing functions (__isoc23_strtol, __isoc23_strtoll, __isoc23_sscanf, new in glibc 2.38).
 * Linked against bookworm's glibc 2.36 (scripts/sysroot.sh), the binary gets them from here instead: each forwards to
 * the function it is the C23 version of. The two differ only in C23's 0b/0B binary prefix, which none of the runtime's
 * callers (environment variables, /proc files, format strings of its own) is given. build-deb.sh checks with readelf
 * that the binary needs no symbol version bookworm's libraries lack. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

long __isoc23_strtol(const char *s, char **end, int base);
long long __isoc23_strtoll(const char *s, char **end, int base);
int __isoc23_sscanf(const char *s, const char *format, ...);

long __isoc23_strtol(const char *s, char **end, int base) { return strtol(s, end, base); }
long long __isoc23_strtoll(const char *s, char **end, int base) { return strtoll(s, end, base); }

int __isoc23_sscanf(const char *s, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    int n = vsscanf(s, format, ap);
    va_end(ap);
    return n;
}
