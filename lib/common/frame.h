/* frame.h - constants of the frame format shared by encoder and decoder (doc/format.md). */
#ifndef LMC_FRAME_H
#define LMC_FRAME_H

#include <stdint.h>

#define LMC_MAGIC          0x434D4C89u  /* bytes 89 4C 4D 43 */
#define LMC_FOOTER_MAGIC   0x434D4C8Fu  /* bytes 8F 4C 4D 43 */
#define LMC_HDR_SIZE       40
#define LMC_CHUNK_HDR_SIZE 16
#define LMC_SEEK_ENTRY     12
#define LMC_FOOTER_SIZE    32
#define LMC_END_MARKER     4

#define LMC_FLAG_REF       0x01
#define LMC_FLAG_SIZE      0x02
#define LMC_FLAGS_KNOWN    0x03

#define LMC_CHUNK_LOG_MIN  20
#define LMC_CHUNK_LOG_MAX  26
#define LMC_CHUNK_LOG_DEFAULT 20

#define LMC_PIECE_HDR      8
#define LMC_PIECE_XOR      0x01
#define LMC_PIECE_LAYOUT_SHIFT 1
#define LMC_PIECE_LAYOUT_MASK  0x06
#define LMC_PIECE_FLAGS_KNOWN  0x07
#define LMC_LAYOUT_GROUPED 0
#define LMC_LAYOUT_ROTATED 1

#define LMC_MIN_PIECE      64     /* shorter container runs are merged into width-1 pieces */
#define LMC_MERGE_PIECE    16384  /* shorter runs join a like neighbour (up to one block's worth) */

/* Largest chunk a frame with this chunk_log may hold, and its payload limit. */
static inline uint64_t lmc_chunk_max_content(unsigned chunk_log) { return ((uint64_t)1 << chunk_log) + 8; }
static inline uint64_t lmc_chunk_payload_limit(uint64_t content) { return content + (content >> 15) + 64; }

/* A piece of a chunk as the encoder plans it. */
typedef struct {
    uint64_t off;       /* content offset */
    uint32_t len;
    uint8_t  width;
    uint8_t  dtype;
    uint8_t  xor_ref;
    uint8_t  float_like; /* layout choice is worth trying */
    uint8_t  detect;     /* bytes of unknown layout: the chunk encoder guesses widths (detect.h) */
    uint32_t row;        /* values per row of its tensor (last dimension), 0 unknown */
    uint64_t ref_off;
} lmc_piece;

#endif
