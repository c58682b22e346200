/* cpuplace.h - keeps the command's helper threads off its coding thread's core. */
#ifndef LMC_CPUPLACE_H
#define LMC_CPUPLACE_H

#include <pthread.h>

/* With one coding thread and at least two cores allowed: binds the calling
 * (coding) thread to the core it runs on, and makes cpuplace_attr give the
 * helper threads (prefetch, reader, writer) the other allowed cores.
 * Otherwise nothing: with a coding thread on every core the helpers share
 * the cores with them anyway, and the library's coding threads, which inherit
 * the caller's cores, must not be bound to one.
 *
 * Why: on the AMD EPYC (PVM) VM of 2026-12-03, whose cores share no cache
 * that the kernel knows of, a woken helper was placed on the core of the
 * thread that woke it, the coder, and ran there (preempting it) for 2-4 ms
 * while the other core idled (sched_switch trace of decompressing a 6.6 MB
 * bf16 delta at -T1: 6 of its 13 ms). Medians of alternated runs, -T1,
 * tmpfs, unbound -> bound: 6.6 MB bf16 delta compression 25.0 -> 21.0 ms,
 * decompression 23.0 -> 19.7; 26.6 MB optimizer delta 66.8 -> 50.1 and
 * 52.4 -> 50.1; 213 MB raw bf16 delta 236 -> 211 and 233 -> 218. Binding
 * only the helpers (the coder free to move onto their core) gave 22.5,
 * 23.6 and 52.8 ms on the first three. */
void cpuplace_setup(int coding_threads);
/* Initialises an attribute object for a helper thread (destroy it after
 * use), with the helpers' cores where cpuplace_setup chose them. 0, or -1
 * (nothing initialised: create the thread with default attributes). */
int cpuplace_attr(pthread_attr_t* a);

#endif
