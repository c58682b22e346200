/* analyze.h - `lmc analyze`: how checkpoints and their deltas evolve, per bit,
 * per byte group and per tensor class (programs/analyze.c). */
#ifndef LMC_PROGRAMS_ANALYZE_H
#define LMC_PROGRAMS_ANALYZE_H

/* argv[0] is "analyze". Returns the process exit status. */
int lmc_cmd_analyze(int argc, char** argv);

#endif
