// dedup's stage 1: every document of one input file → its exact hash, shingles, MinHash signature
// and band keys (signature_file.h), in parallel and in input order. The documents are read in
// batches by one thread (decompression and JSON), signed on oneTBB workers, and collected in order,
// so the file written is the same at any --threads.
#pragma once
#include <cstdint>
#include <string>

#include "datagen/dedup/dedup_inputs.h"
#include "datagen/dedup/exact_hash.h"
#include "datagen/dedup/minhash.h"
#include "datagen/dedup/signature_file.h"
#include "formats/doc_json.h"

namespace pretrain {

class Progress;

struct SignOptions {
  ExactOptions exact;
  MinhashOptions minhash;
  bool near = true;  // false: exact hashes only (no shingles or signatures)
};

// One document's signatures. `scratch` strings are reused between calls.
DocSignature sign_document(const Document& doc, const SignOptions& options, const MinhashFunctions& functions);

// Signs every document of `file` and writes the signature file at `out_path` (temp name, then
// rename), stamped with `key`. Throws Error naming the file and line of a bad record, or the file
// when its record count differs from its manifest's. Returns the documents signed.
uint64_t sign_input_file(const DedupInputFile& file, uint64_t key, const SignOptions& options,
                         const std::string& out_path, Progress* progress = nullptr);

}  // namespace pretrain
