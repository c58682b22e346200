/*
 * prefetch.h - a helper thread of the CLI that maps the pages of its input
 * and reference files in just ahead of the coder.
 *
 * Why: the CLI codes straight from read-only file mappings. Where the page
 * cache holds small pages (tmpfs, and file systems without large folios),
 * every 4 KiB page the coder touches first costs it a page fault: on the
 * 2-core VM of bench/ about 1.9 us a page, 90 ms of a 200 MB reference that
 * the decoder needed 175 ms to decode. Mapping the same pages in with
 * MADV_POPULATE_READ costs about 1 us a page and, done by this thread, none
 * of the coder's time. Nothing here is needed for correctness: a page the
 * thread has not reached yet is faulted in by the coder as before.
 *
 * The CLI says, before each library call, which byte range of each mapping
 * the call will read (prefetch_want); the thread maps in that range only,
 * so the process's memory stays what the call touches anyway (the CLI drops
 * pages behind, see map_release and ref_release in lmc.c).
 */
#ifndef LMC_PREFETCH_H
#define LMC_PREFETCH_H

#include <stddef.h>

enum { PREFETCH_INPUT = 0, PREFETCH_REF = 1, PREFETCH_REGIONS = 2 };

/* Asks for [from, to) of the mapping at base (size bytes in all) to be
 * mapped in, replacing any earlier request for that region. Starts the
 * thread on first use; where it cannot start, does nothing. */
void prefetch_want(int region, const unsigned char* base, size_t size, size_t from, size_t to);

/* Forgets the region's mapping; returns once the thread no longer touches
 * it, so that the caller may unmap it. */
void prefetch_forget(int region);

#endif
