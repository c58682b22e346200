/* detect.h - float runs in bytes of unknown layout (generic mode).
 *
 * A file lmc does not understand (a plain tensor dump, a numpy array, a
 * TensorFlow or legacy torch.save checkpoint, a stream too large to parse)
 * is coded byte-wise unless its bytes say otherwise. They often do: the
 * high byte of a bf16 or f32 value (sign and exponent) takes few values and
 * the low bytes many, so the byte statistics at each position modulo 2 or 4
 * show the width of the values and where they start. Only the encoder
 * guesses: each piece in a frame names its own width and dtype, so a wrong
 * guess costs ratio, never correctness. */
#ifndef LMC_DETECT_H
#define LMC_DETECT_H

#include <stddef.h>
#include <stdint.h>
#include "frame.h"

/* Pieces shorter than this are left as bytes: a sample of them says little. */
#define LMC_DETECT_MIN      4096
/* Windows of at least this many bytes get a width of their own. */
#define LMC_DETECT_WINDOW   (512u * 1024u)
/* A window whose guess differs from a neighbour's is looked at in this many
 * parts, and the change between two parts is found with probes of
 * LMC_DETECT_PROBE bytes (detect.c). */
#define LMC_DETECT_SUBS     8
#define LMC_DETECT_PROBE    (16u * 1024u)
/* At most this many windows a piece (longer pieces get longer windows); a
 * piece becomes at most one run a part, plus the bytes before the first
 * value. */
#define LMC_DETECT_MAX_WINDOWS 64
#define LMC_DETECT_MAX_SEGS (LMC_DETECT_MAX_WINDOWS * LMC_DETECT_SUBS + 2)
#define LMC_DETECT_MAX_OUT  (LMC_DETECT_MAX_SEGS + 1)

/* The layout guessed for len bytes at content offset off: values of `width`
 * bytes (1, 2 or 4) starting where the offset is `phase` modulo width, and
 * the dtype to record for them. ref: the reference bytes for the same
 * range (the piece is an XOR delta), or NULL. */
typedef struct { unsigned width, phase, dtype; } lmc_layout_guess;
lmc_layout_guess lmc_detect_layout(const uint8_t* src, const uint8_t* ref, size_t len, uint64_t off);

/* Splits piece `in` (bytes of unknown layout: src its content, ref the
 * reference at in->ref_off or NULL) into runs of guessed widths, written to
 * out (room for LMC_DETECT_MAX_OUT). Returns their number: 1 with a copy of
 * `in` when every window looks like bytes. */
size_t lmc_detect_split(const lmc_piece* in, const uint8_t* src, const uint8_t* ref, lmc_piece* out);

#endif
