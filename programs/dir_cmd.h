/* dir_cmd.h - directory inputs of the main CLI: sharded checkpoints.
 *
 *   lmc [-r REFDIR] DIR        every regular file REL under DIR -> OUTDIR/REL.lmc,
 *                              a delta against REFDIR/REL when that file exists
 *   lmc -d [-r REFDIR] DIR.lmc every REL.lmc -> OUTDIR/REL, against REFDIR/REL
 *   lmc -t|-l DIR.lmc          test / list every REL.lmc
 *
 * The walk, the naming and the output directories live here; each file is
 * coded by the caller's per-file function (programs/lmc.c), so temp files,
 * -f, --rm, -T, --format and --dtype behave as for single files. */
#ifndef LMC_DIR_CMD_H
#define LMC_DIR_CMD_H

enum { LMC_DIR_COMPRESS, LMC_DIR_DECOMPRESS, LMC_DIR_TEST, LMC_DIR_LIST };

/* Codes one file. `in` the input; `out` the output path (NULL with test and
 * list); `ref` an existing reference file or NULL; `missing_ref` the
 * reference path looked for but not found (NULL when `ref` is set or there
 * is no REFDIR). Returns 0, or -1 after printing an error naming the file. */
typedef int (*lmc_dir_file_fn)(void* arg, const char* in, const char* out,
                               const char* ref, const char* missing_ref);

typedef struct {
    int mode;            /* LMC_DIR_* */
    const char* refdir;  /* -r REFDIR (uncompressed), or NULL */
    const char* outdir;  /* -o OUTDIR, or NULL for DIR.lmc / DIR without .lmc */
    int force;           /* -f: an existing output directory is written into */
    int verbose;
    int quiet;
    lmc_dir_file_fn file;
    void* arg;
} lmc_dir_job;

/* 1 when `path` is a directory (following symlinks), else 0. */
int lmc_dir_is_dir(const char* path);

/* Processes every file under `dir`, going on after a failed file.
 * Returns 0 when all succeeded, -1 otherwise (each failure already printed). */
int lmc_dir_run(const char* dir, const lmc_dir_job* job);

#endif
