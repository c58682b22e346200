/* error.h - size-or-error return values (internal). */
#ifndef LMC_ERROR_H
#define LMC_ERROR_H

#include <stddef.h>
#include "lmc.h"
#include "mem.h"

#define LMC_ERR(e) ((size_t)-(ptrdiff_t)(LMC_ERR_##e))
#define LMC_IS_ERR(r) ((r) > (size_t)-(ptrdiff_t)LMC_ERR_MAX_CODE)
#define LMC_RETURN_IF(cond, e) do { if (LMC_UNLIKELY(cond)) return LMC_ERR(e); } while (0)
#define LMC_FORWARD(r) do { size_t const lmc_r_ = (r); if (LMC_IS_ERR(lmc_r_)) return lmc_r_; } while (0)

#endif
