// device.h for builds without CUDA.
#include "common/device.h"

namespace pretrain {

DeviceReport query_devices() { return DeviceReport{false, {}, "built without CUDA (PRETRAIN_CUDA=OFF)"}; }

}  // namespace pretrain
