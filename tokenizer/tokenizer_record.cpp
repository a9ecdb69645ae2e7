#include "tokenizer/tokenizer_record.h"

#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"

namespace pretrain {

std::string find_recorded_file(const std::string& given, const std::string& manifest_path) {
  if (given.empty() || file_exists(given)) return given;
  const std::string beside = path_join(dir_name(manifest_path), given);
  return file_exists(beside) ? beside : "";
}

std::unique_ptr<Tokenizer> load_recorded_tokenizer(const TokenizerInfo& record, const std::string& manifest_path,
                                                   std::vector<std::string>* paths) {
  if (!record.record_error.empty())
    throw Error(Where{manifest_path}, cat("the tokenizer record cannot be read (", record.record_error, ")"));
  if (!record.has_record()) throw Error(Where{manifest_path}, "the manifest names no tokenizer files");
  std::vector<std::string> found;
  for (const TokenizerFile& f : record.files) {
    const std::string path = find_recorded_file(f.path, manifest_path);
    if (path.empty())
      throw Error(Where{manifest_path}, cat("the tokenizer that made the shards (", f.role, " '", f.path,
                                            "') cannot be found, as given or beside the manifest"));
    const uint64_t bytes = file_size(path);
    if (bytes != f.bytes)
      throw Error(cat(path, " has changed since it made the shards (", bytes, " bytes, ", manifest_path, " says ",
                      f.bytes, ")"));
    if (const std::string sum = hex64(xxh3_file(path)); sum != f.xxh3)
      throw Error(cat(path, " has changed since it made the shards (xxh3 ", sum, ", ", manifest_path, " says ",
                      f.xxh3, ")"));
    found.push_back(path);
  }
  std::unique_ptr<Tokenizer> tok = load_tokenizer(found.front(), tokenizer_options_from_json(record.options, manifest_path));
  // The same files in the same roles (a BPE vocabulary finds its merges by name).
  const TokenizerInfo loaded = tok->info();
  bool same = loaded.kind == record.kind && loaded.vocab_hash == record.vocab_hash && loaded.files.size() == record.files.size();
  for (size_t i = 0; same && i < record.files.size(); ++i) same = loaded.files[i].role == record.files[i].role;
  if (!same)
    throw Error(Where{tok->source()}, cat("is not the tokenizer that made the shards (", loaded.kind, " ", loaded.vocab_hash,
                                          ", ", manifest_path, " says ", record.kind, " ", record.vocab_hash, ")"));
  if (paths) *paths = std::move(found);
  return tok;
}

}  // namespace pretrain
