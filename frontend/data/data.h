// kiln::data: data sets, samplers, collation, the DataLoader and the device
// prefetcher (docs/data.md). Included by frontend/kiln.h.
#pragma once

#include "frontend/data/collate.h"              // IWYU pragma: export
#include "frontend/data/csv_dataset.h"          // IWYU pragma: export
#include "frontend/data/data_loader.h"          // IWYU pragma: export
#include "frontend/data/dataset.h"              // IWYU pragma: export
#include "frontend/data/device_prefetcher.h"    // IWYU pragma: export
#include "frontend/data/distributed_sampler.h"  // IWYU pragma: export
#include "frontend/data/example.h"              // IWYU pragma: export
#include "frontend/data/sampler.h"              // IWYU pragma: export
