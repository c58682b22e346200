/* cpuplace.c - see cpuplace.h. */
#define _GNU_SOURCE
#include "cpuplace.h"

#include <sched.h>

#if defined(__linux__) && defined(CPU_SETSIZE)
static int g_active = 0;
static cpu_set_t g_helpers;

void cpuplace_setup(int coding_threads)
{
    cpu_set_t allowed, mine;
    if (coding_threads != 1 || g_active) return;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || CPU_COUNT(&allowed) < 2) return;
    int const cpu = sched_getcpu();
    if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed)) return;
    CPU_ZERO(&mine);
    CPU_SET(cpu, &mine);
    if (sched_setaffinity(0, sizeof(mine), &mine) != 0) return;
    g_helpers = allowed;
    CPU_CLR(cpu, &g_helpers);
    g_active = 1;
}

int cpuplace_attr(pthread_attr_t* a)
{
    if (pthread_attr_init(a) != 0) return -1;
    if (g_active) (void)pthread_attr_setaffinity_np(a, sizeof(g_helpers), &g_helpers);
    return 0;
}
#else
void cpuplace_setup(int coding_threads) { (void)coding_threads; }
int cpuplace_attr(pthread_attr_t* a) { return pthread_attr_init(a) == 0 ? 0 : -1; }
#endif
