// shard-tool stats' tables: the JSON of shard_stats() as a terminal shows it (Markdown tables, so
// a run pastes into notes as it is). The histograms themselves are scripts/plot_stats.py's.
#include <cstdio>
#include <ostream>

#include "common/log.h"
#include "formats/shard_stats.h"

namespace pretrain {

namespace {

using json = nlohmann::ordered_json;

// 1234567 → "1,234,567".
std::string grouped(uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string percent(double v) { return v == 0 ? "0%" : fixed(100.0 * v, v < 0.001 ? 4 : 2) + "%"; }

std::string count_or_dash(const json& j) { return j.is_number() ? grouped(j.get<uint64_t>()) : "—"; }

// Field `key` of `j` when it is there and not null.
const json* field(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

void row(std::ostream& out, const std::string& what, const std::string& value) {
  out << "| " << what << " | " << value << " |\n";
}

}  // namespace

void print_shard_stats(const json& s, std::ostream& out) {
  const double seconds = s.value("seconds", 0.0);
  const json& rate = s["rate"];
  const std::string layout = s.contains("layout") ? ", " + s["layout"].get<std::string>() : "";
  out << "shard-tool stats: " << s["input"].get<std::string>() << " (" << s["format"].get<std::string>() << layout
      << "; " << s["files"].get<uint64_t>() << " files, " << human_bytes(s["disk_bytes"].get<double>()) << ")\n"
      << "read in " << fixed(seconds, 3) << " s (after " << fixed(s.value("setup_seconds", 0.0), 3) << " s of setup) with "
      << s["threads"].get<int>() << " threads: "
      << human_bytes(rate["bytes_per_s"].get<double>()) << "/s, " << grouped(uint64_t(rate["records_per_s"].get<double>()))
      << " records/s";
  if (const json* t = field(rate, "tokens_per_s")) out << ", " << grouped(uint64_t(t->get<double>())) << " tokens/s";
  out << "\n\n| count | value |\n|---|---:|\n";
  const json& sources = s["sources"];
  for (const auto& [name, value] : s["counts"].items()) {
    std::string label = name;
    for (char& c : label) c = c == '_' ? ' ' : c;
    if (const json* src = field(sources, name.c_str()); src && src->get<std::string>().starts_with("manifest")) label += " (manifest)";
    row(out, label, count_or_dash(value));
  }
  if (const json* tok = field(s, "tokenizer")) {
    if (const json* kind = field(*tok, "kind")) row(out, "tokenizer", cat(kind->get<std::string>(), ", vocabulary ", grouped((*tok)["vocab_size"].get<uint64_t>())));
    if (const json* share = field(*tok, "unk_share"))
      row(out, "[UNK] share", cat(percent(share->get<double>()), " (", grouped((*tok)["unk_tokens"].get<uint64_t>()), " of the text tokens)"));
    if (const json* bpt = field(*tok, "bytes_per_token"))
      row(out, "bytes of text per token", cat(fixed(bpt->get<double>(), 3), " (", grouped((*tok)["text_bytes"].get<uint64_t>()), " bytes)"));
  }
  if (const json* b = field(s, "bert")) {
    if (const json* p = field(*b, "predictions_per_instance")) row(out, "predictions per instance", fixed(p->get<double>(), 2));
    if (const json* p = field(*b, "nsp_random_share")) row(out, "NSP: random next sentence", percent(p->get<double>()));
  }
  if (const json* d = field(s, "dedup")) {
    std::string kinds;
    for (const auto& [kind, n] : (*d)["by_kind"].items()) kinds += cat(kinds.empty() ? "" : ", ", kind, " ", grouped(n.get<uint64_t>()));
    row(out, "removed by dedup (report)", cat(grouped((*d)["removed"].get<uint64_t>()), " (", kinds, ") in ",
                                               grouped((*d)["clusters"].get<uint64_t>()), " clusters"));
    row(out, "duplicated share", cat(percent((*d)["duplicated_share"].get<double>()), " of the documents (",
                                      (*d)["basis"].get<std::string>() == "input" ? "removed ones found here: dedup's input"
                                                                                   : "none found here: dedup's output",
                                      ")"));
  }

  out << "\n| length | records | total | mean | min | max |\n|---|---:|---:|---:|---:|---:|\n";
  for (const auto& [name, h] : s["histograms"].items()) {
    std::string label = name;
    for (char& c : label) c = c == '_' ? ' ' : c;
    out << "| " << label << " | " << grouped(h["count"].get<uint64_t>()) << " | " << grouped(h["sum"].get<uint64_t>()) << " | "
        << (h["mean"].is_null() ? "—" : fixed(h["mean"].get<double>(), 1)) << " | " << count_or_dash(h["min"]) << " | "
        << count_or_dash(h["max"]) << " |\n";
  }

  if (const json* p = field(s, "padding")) {
    out << "\npadding: tokens a trainer computes per real token (scripts/bench/padding.py's definitions), "
        << grouped((*p)["real_tokens"].get<uint64_t>()) << " real tokens\n"
        << "| case | sequences | tokens computed | per real token | padding share | saves vs unbinned |\n"
        << "|---|---:|---:|---:|---:|---:|\n";
    for (const json& c : (*p)["cases"]) {
      out << "| " << c["label"].get<std::string>() << " | " << grouped(c["sequences"].get<uint64_t>()) << " | "
          << grouped(c["tokens_computed"].get<uint64_t>()) << " | "
          << (c["tokens_per_real_token"].is_null() ? "—" : fixed(c["tokens_per_real_token"].get<double>(), 3)) << " | "
          << (c["padding_share"].is_null() ? "—" : percent(c["padding_share"].get<double>())) << " | "
          << (c["saving_vs_unbinned"].is_null() ? "—" : percent(c["saving_vs_unbinned"].get<double>())) << " |\n";
    }
    out << "\nas stored, per sequence length\n| seq_len | rows | real tokens | padding share |\n|---:|---:|---:|---:|\n";
    for (const json& l : (*p)["per_seq_len"])
      out << "| " << l["seq_len"].get<int64_t>() << " | " << grouped(l["rows"].get<uint64_t>()) << " | "
          << grouped(l["real_tokens"].get<uint64_t>()) << " | "
          << (l["padding_share"].is_null() ? "—" : percent(l["padding_share"].get<double>())) << " |\n";
  }
  for (const json& note : s["notes"]) out << "\nnote: " << note.get<std::string>();
  if (!s["notes"].empty()) out << "\n";
}

}  // namespace pretrain
