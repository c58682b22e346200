/* ungroup.h - inverse of lmc_group: gather bytes, unrotate, undo the XOR. */
#ifndef LMC_UNGROUP_H
#define LMC_UNGROUP_H

#include <stddef.h>
#include <stdint.h>

void lmc_ungroup(uint8_t* dst, const uint8_t* streams, const uint8_t* ref, size_t n, unsigned w, int rotated);

/* The same from w streams anywhere (sp[k]: stream k's first byte): a RAW
 * block's bytes read where the payload has them. */
void lmc_ungroup_from(uint8_t* dst, const uint8_t* const* sp, const uint8_t* ref, size_t n, unsigned w, int rotated);

#endif
