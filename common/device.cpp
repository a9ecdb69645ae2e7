#include "common/device.h"

#include <cstdlib>

#include "common/error.h"

namespace pretrain {

void require_device(const std::string& device) {
  if (device == "cpu") return;
  if (device.rfind("cuda", 0) != 0) throw UsageError(cat("unknown device '", device, "': expected cpu, cuda or cuda:N"));
  int index = 0;
  if (device.size() > 4) {
    if (device[4] != ':') throw UsageError(cat("unknown device '", device, "': expected cpu, cuda or cuda:N"));
    char* end = nullptr;
    long v = std::strtol(device.c_str() + 5, &end, 10);
    if (*end || end == device.c_str() + 5 || v < 0) throw UsageError(cat("bad device index in '", device, "'"));
    index = static_cast<int>(v);
  }
  DeviceReport r = query_devices();
  if (!r.built_with_cuda) throw Error(cat("--device ", device, ": this binary was ", r.reason));
  if (r.gpus.empty()) throw Error(cat("--device ", device, ": no usable GPU here (", r.reason, ")"));
  if (index >= static_cast<int>(r.gpus.size()))
    throw Error(cat("--device ", device, ": only ", r.gpus.size(), " GPU(s) here"));
}

}  // namespace pretrain
