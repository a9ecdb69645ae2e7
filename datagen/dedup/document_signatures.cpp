#include "datagen/dedup/document_signatures.h"

#include <tbb/parallel_pipeline.h>

#include <memory>
#include <vector>

#include "common/cli.h"
#include "common/error.h"
#include "common/progress.h"
#include "datagen/dedup/shingles.h"
#include "formats/doc_shards.h"

namespace pretrain {

namespace {

constexpr size_t kBatchDocuments = 64;

struct Batch {
  std::vector<Document> docs;
  std::vector<DocSignature> signatures;
  uint64_t bytes_read = 0;  // the reader's position after this batch
};

}  // namespace

DocSignature sign_document(const Document& doc, const SignOptions& options, const MinhashFunctions& functions) {
  DocSignature s;
  s.id = doc.id;
  s.exact = exact_hash(doc.text, options.exact);
  if (!options.near) return s;
  thread_local std::string simplified;
  thread_local std::vector<uint64_t> shingles;
  simplify_for_shingles(doc.text, simplified);
  shingle_hashes(simplified, options.minhash.ngram, shingles);
  if (shingles.empty()) return s;
  s.has_minhash = true;
  s.signature.resize(static_cast<size_t>(functions.size()));
  functions.signature(shingles, s.signature.data());
  s.band_keys.resize(static_cast<size_t>(options.minhash.bands));
  for (int b = 0; b < options.minhash.bands; ++b) s.band_keys[b] = band_key(s.signature.data(), b, options.minhash.rows);
  return s;
}

uint64_t sign_input_file(const DedupInputFile& file, uint64_t key, const SignOptions& options,
                         const std::string& out_path, Progress* progress) {
  const MinhashFunctions functions(options.minhash);
  SignatureFileBuilder builder(key, options.minhash.hashes(), options.minhash.bands);
  DocReader reader(file.path);
  FirstError error;
  uint64_t reported = 0;
  const size_t tokens = static_cast<size_t>(2 * max_threads());
  tbb::parallel_pipeline(
      tokens,
      tbb::make_filter<void, std::shared_ptr<Batch>>(
          tbb::filter_mode::serial_in_order,
          [&](tbb::flow_control& fc) -> std::shared_ptr<Batch> {
            auto batch = std::make_shared<Batch>();
            if (error.failed()) {
              fc.stop();
              return nullptr;
            }
            error.keep([&] {
              Document doc;
              while (batch->docs.size() < kBatchDocuments && reader.next(doc)) batch->docs.push_back(std::move(doc));
              batch->bytes_read = reader.bytes_read();
            });
            if (batch->docs.empty()) {
              fc.stop();
              return nullptr;
            }
            return batch;
          }) &
          tbb::make_filter<std::shared_ptr<Batch>, std::shared_ptr<Batch>>(
              tbb::filter_mode::parallel,
              [&](std::shared_ptr<Batch> batch) {
                if (!batch || error.failed()) return batch;
                error.keep([&] {
                  batch->signatures.reserve(batch->docs.size());
                  for (const Document& doc : batch->docs) batch->signatures.push_back(sign_document(doc, options, functions));
                });
                return batch;
              }) &
          tbb::make_filter<std::shared_ptr<Batch>, void>(tbb::filter_mode::serial_in_order,
                                                         [&](std::shared_ptr<Batch> batch) {
                                                           if (!batch || error.failed()) return;
                                                           for (const DocSignature& s : batch->signatures) builder.add(s);
                                                           if (progress) progress->add(batch->bytes_read - reported);
                                                           reported = batch->bytes_read;
                                                         }));
  error.rethrow();
  if (file.expected_records >= 0 && builder.documents() != static_cast<uint64_t>(file.expected_records))
    throw Error(Where{file.path}, cat("expected ", file.expected_records, " documents (manifest), found ", builder.documents()));
  if (progress && file.bytes > reported) progress->add(file.bytes - reported);
  builder.write(out_path);
  return builder.documents();
}

}  // namespace pretrain
