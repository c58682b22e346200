/* group.h - XOR delta, sign rotation and byte grouping fused in one pass. */
#ifndef LMC_GROUP_H
#define LMC_GROUP_H

#include <stddef.h>
#include <stdint.h>

/* Splits n values of w bytes (w in 1,2,4,8) from src into w streams of n
 * bytes at dst + k*n. With ref, each value is XORed with ref's value first.
 * With rotated, each value is rotated left by one bit (sign to bit 0). */
void lmc_group(uint8_t* dst, const uint8_t* src, const uint8_t* ref, size_t n, unsigned w, int rotated);

/* Picks the layout (0 byte-grouped, 1 sign-rotated) with the smaller order-0
 * entropy of its streams, estimated on a sample of the n values. */
int lmc_choose_layout(const uint8_t* src, const uint8_t* ref, size_t n, unsigned w);

#endif
