/* workmem.c - see workmem.h. */
#include "workmem.h"

#include <stdlib.h>
#if defined(__linux__)
#  include <sys/mman.h>
#endif

#define HUGE_PAGE ((size_t)2 << 20)

void* lmc_workmem_alloc(size_t n)
{
    void* p = NULL;
    if (n == 0) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (n <= LMC_WORKMEM_HUGE_MAX) {
        size_t const whole = (n + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
        if (posix_memalign(&p, HUGE_PAGE, whole) != 0) return NULL;
        /* advice only: where huge pages are off this is aligned memory */
        (void)madvise(p, whole, MADV_HUGEPAGE);
        return p;
    }
#endif
    if (posix_memalign(&p, 64, n) != 0) return NULL;
    return p;
}

void lmc_workmem_free(void* p, size_t n)
{
#if defined(LMC_WORKMEM_ASAN)
    if (p) ASAN_UNPOISON_MEMORY_REGION(p, n);   /* the carvers' gaps */
#else
    (void)n;
#endif
    free(p);
}
