/* workmem.h - the memory of a context's work buffers, on huge pages where
 * it is small enough. */
#ifndef LMC_WORKMEM_H
#define LMC_WORKMEM_H

#include <stddef.h>

/* A context's work buffers (per-thread workspaces, chunk output slots) are
 * allocated once and written by every chunk, so their first writes are the
 * cost of a short-lived context, such as one `lmc` command. Each new 4 KiB
 * page costs a fault: on the AMD EPYC (PVM) VM of 2026-12-03 about 11 us
 * (5 us more after madvise(MADV_POPULATE_WRITE) had mapped it in), against
 * about 0.1-0.3 us per 4 KiB on a transparent huge page. Work memory of at
 * most this size is therefore one 2 MiB-aligned block that asks for huge
 * pages; the whole of it may then become resident, which a context with
 * many threads (and so more memory than its chunks would touch) avoids by
 * staying on the allocator's pages. */
#define LMC_WORKMEM_HUGE_MAX ((size_t)32 << 20)

/* n bytes (n > 0) for work buffers, aligned to at least 64 bytes (2 MiB
 * on the huge-page path), zeroed, or NULL. On Linux fresh anonymous pages,
 * so that what is never written never becomes resident. Free with
 * lmc_workmem_free(p, n), the same n. */
void* lmc_workmem_alloc(size_t n);
void  lmc_workmem_free(void* p, size_t n);

/* Buffers carved out of one block are, to AddressSanitizer, one allocation:
 * under it the carvers leave LMC_WORKMEM_GAP bytes after each buffer and
 * poison them (with whatever the buffer's rounding left), so that a buffer
 * overrun is still reported. */
#if defined(__SANITIZE_ADDRESS__)
#  define LMC_WORKMEM_ASAN 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define LMC_WORKMEM_ASAN 1
#  endif
#endif
#if defined(LMC_WORKMEM_ASAN)
#  include <sanitizer/asan_interface.h>
#  define LMC_WORKMEM_GAP ((size_t)4096)
#  define LMC_WORKMEM_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#else
#  define LMC_WORKMEM_GAP ((size_t)0)
#  define LMC_WORKMEM_POISON(p, n) ((void)0)
#endif

#endif
