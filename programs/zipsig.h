/*
 * zipsig.h - whether a file starts as a zip, the container of torch.save
 * archives. A zip's directory is at its end, so the library parses one in
 * place only from a buffer holding the whole file: the command and
 * `lmc analyze` map such an input instead of reading it in windows (which
 * would make the library stage the whole file first).
 */
#ifndef LMC_ZIPSIG_H
#define LMC_ZIPSIG_H

#include <unistd.h>

/* 1 if the first bytes of the file open as fd are a zip local header. */
static inline int fd_starts_zip(int fd)
{
    unsigned char m[4];
    return pread(fd, m, sizeof m, 0) == (ssize_t)sizeof m && m[0] == 'P' && m[1] == 'K' && m[2] == 3 && m[3] == 4;
}

#endif
