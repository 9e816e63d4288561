// The CCCL the CUB variants were compiled against (the pinned wheel's, not the toolkit's), for
// the stack fingerprint: CCCL_VERSION as that translation unit saw it, major * 1000000 +
// minor * 1000 + patch. Defined in reduce_cub.cu, so only in a CUDA build.
#pragma once

namespace d9m::reduce {
int cccl_version_of_cub_variants();
}
