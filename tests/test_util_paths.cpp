// The configured paths of test_util.h, the only code that sees them as macros.
#include "test_util.h"

namespace pretrain::testing {

std::string source_dir() { return PRETRAIN_SOURCE_DIR; }
std::string build_dir() { return PRETRAIN_BUILD_DIR; }
std::string default_shared_data_dir() { return PRETRAIN_DEFAULT_SHARED_DATA; }

}  // namespace pretrain::testing
