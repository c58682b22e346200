/*
 * prefetch.h - a helper thread of the CLI that maps the pages of its input
 * and reference files in just ahead of the coder, and hashes the reference.
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
 *
 * The reference's hash (the frame's proof of which reference a delta was
 * made against) needs every byte of it once. With a core to spare (lmc.c,
 * load_ref; otherwise the library's coding threads hash it between their
 * chunk jobs) the thread hashes the pages it
 * has just mapped in for the coder, while they are still mapped, and reads
 * (pread) only what the coder does not pass in order: the part behind the
 * coder's position that it skipped, and, once the result is asked for,
 * whatever is left.
 */
#ifndef LMC_PREFETCH_H
#define LMC_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

enum { PREFETCH_INPUT = 0, PREFETCH_REF = 1, PREFETCH_REGIONS = 2 };

/* Asks for [from, to) of the mapping at base (size bytes in all) to be
 * mapped in, replacing any earlier request for that region. Starts the
 * thread on first use; where it cannot start, does nothing. */
void prefetch_want(int region, const unsigned char* base, size_t size, size_t from, size_t to);

/* Around each of the caller's own drops (MADV_DONTNEED) of the region's
 * pages below upto (SIZE_MAX: all of them): dropping before, dropped after.
 * A step the thread mapped in while such a drop was under way is dropped
 * again (below upto) once done: a page mapped in after the caller dropped it
 * would otherwise stay, and the process's memory grow with every window
 * (decompressing an 8.6 GB keyframe from ext4 held 32-55 MB instead of
 * 16-19 MB before this existed). Neither waits for the thread. */
void prefetch_dropping(int region, size_t upto);
void prefetch_dropped(int region);

/* Forgets the region's mapping; returns once the thread no longer touches
 * it, so that the caller may unmap it. */
void prefetch_forget(int region);

/* Starts hashing (lmc_hash_*) the size bytes of the file fd, which the
 * thread owns from now on and closes. map: the same file mapped (the
 * PREFETCH_REF region's base), or NULL. 0, or -1 if the thread cannot run
 * (fd is then the caller's still). */
int prefetch_hash_start(int fd, const unsigned char* map, size_t size);

/* Waits for the hash started last. 0 and *hash; else an errno value, or
 * -1 if the file was shorter than size. */
int prefetch_hash_result(uint64_t* hash);

/* Abandons the hash in progress, if any; returns once the thread no longer
 * reads the file. */
void prefetch_hash_cancel(void);

#endif
