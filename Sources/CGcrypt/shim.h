// libgcrypt (Debian: libgcrypt20, already in every process that links libsystemd0 on Debian 12) for AES-128 (Eddystone-EID)
// and AES-CCM (BTHome). gcry_control is variadic, which Swift cannot call: the two calls go through here.
#include <gcrypt.h>

/// libgcrypt must be initialized once before use: the version check, then "initialization finished". A process where
/// something else (libsystemd) initialized it already is left as it is. Returns 0, or -1 when the library is older
/// than 1.8.
static inline int beacond_gcrypt_initialize(void) {
    if (gcry_control(GCRYCTL_INITIALIZATION_FINISHED_P)) {
        return gcry_check_version("1.8.0") ? 0 : -1;
    }
    if (!gcry_check_version("1.8.0")) return -1;
    // No secure memory pool: the keys live in beacond's own buffers, excluded from core dumps by the caller.
    gcry_control(GCRYCTL_DISABLE_SECMEM, 0);
    gcry_control(GCRYCTL_INITIALIZATION_FINISHED, 0);
    return 0;
}
