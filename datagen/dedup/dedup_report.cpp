#include "datagen/dedup/dedup_report.h"

#include <nlohmann/json.hpp>

namespace pretrain {

namespace {

void describe(nlohmann::ordered_json& j, const ReportDocument& d) {
  j["index"] = d.index;
  j["id"] = d.id;
  j["source"] = d.source;
  j["file"] = d.file;
  j["record"] = d.record;
}

}  // namespace

std::string report_line(const RemovedDocument& doc) {
  nlohmann::ordered_json j;
  describe(j, doc.removed);
  j["cluster"] = doc.kept.index;
  j["kind"] = doc.exact ? "exact" : "near";
  if (doc.jaccard) j["jaccard"] = *doc.jaccard;
  else j["jaccard"] = nullptr;
  nlohmann::ordered_json kept;
  describe(kept, doc.kept);
  j["kept"] = std::move(kept);
  // Ids and paths are UTF-8 (the reader repairs them); replace keeps dump() from throwing anyway.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace pretrain
