/* store_cmd.h - `lmc store ...`: the snapshot store command (doc/store.md). */
#ifndef LMC_STORE_CMD_H
#define LMC_STORE_CMD_H

/* argv[0] is "store". Returns the process exit status (0 success, 1 error). */
int lmc_cmd_store(int argc, char** argv);

#endif
