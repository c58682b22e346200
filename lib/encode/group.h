/* group.h - XOR delta, sign rotation and byte grouping fused in one pass. */
#ifndef LMC_GROUP_H
#define LMC_GROUP_H

#include <stddef.h>
#include <stdint.h>

/* Splits n values of w bytes (w in 1,2,4,8) from src into w streams of n
 * bytes at dst + k*n. With ref, each value is XORed with ref's value first.
 * With rotated, each value is rotated left by one bit (sign to bit 0). */
void lmc_group(uint8_t* dst, const uint8_t* src, const uint8_t* ref, size_t n, unsigned w, int rotated);

#define LMC_CODING_ROT 1u   /* sign-rotated layout */
#define LMC_CODING_XOR 2u   /* XOR against the reference */

/* Picks how to code n values of w bytes: with or without the XOR against ref
 * (when ref is given) and, for floats, grouped or sign-rotated; by the order-0
 * entropy of the resulting streams on a sample. Returns LMC_CODING_* bits. */
unsigned lmc_choose_coding(const uint8_t* src, const uint8_t* ref, size_t n, unsigned w, int float_like);

#endif
