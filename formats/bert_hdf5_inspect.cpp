// shard-tool inspect for BERT shards: the shape read through BertShardReader, each dataset as
// h5py would describe it (dtype, shape, chunks, compression), then the first records.
#include "formats/bert_hdf5.h"

#include <hdf5.h>

#include <algorithm>
#include <ostream>
#include <string>

#include "common/error.h"
#include "formats/bert_hdf5_layout.h"
#include "formats/hdf5_chunks.h"

namespace pretrain {

using bert_hdf5::column_count;
using bert_hdf5::kColumns;
using hdf5::Hid;
using hdf5::numpy_dtype;
using hdf5::quiet_hdf5;
using hdf5::take_hdf5_errors;
using hdf5::throw_hdf5;

namespace {

std::string describe_dataset(hid_t file, const char* name) {
  Hid d(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  Hid type(H5Dget_type(d.get()), H5Tclose), space(H5Dget_space(d.get()), H5Sclose);
  Hid dcpl(H5Dget_create_plist(d.get()), H5Pclose);
  if (!type.valid() || !space.valid() || !dcpl.valid()) return "(cannot describe: " + take_hdf5_errors() + ")";
  auto tuple = [](const hsize_t* v, int n) {
    std::string s = "(";
    for (int i = 0; i < n; ++i) s += cat(i ? ", " : "", v[i]);
    return s + (n == 1 ? ",)" : ")");
  };
  hsize_t dims[H5S_MAX_RANK], chunk[H5S_MAX_RANK];
  int rank = H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  std::string text = cat("dtype=", numpy_dtype(type.get()), " shape=", tuple(dims, std::max(rank, 0)));
  switch (H5Pget_layout(dcpl.get())) {
    case H5D_CHUNKED: break;
    case H5D_COMPACT: return text + " layout=compact";
    case H5D_CONTIGUOUS: return text + " layout=contiguous";
    default: return text + " layout=other";
  }
  int chunk_rank = H5Pget_chunk(dcpl.get(), H5S_MAX_RANK, chunk);
  text += cat(" chunks=", tuple(chunk, std::max(chunk_rank, 0)));
  int filters = H5Pget_nfilters(dcpl.get());
  std::string compression = "none";
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0, values[8] = {};
    size_t nvalues = 8;
    H5Z_filter_t f = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nvalues, values, 0, nullptr, nullptr);
    std::string one = f == H5Z_FILTER_DEFLATE   ? cat("gzip level ", nvalues ? values[0] : 0)
                      : f == H5Z_FILTER_SHUFFLE ? std::string("shuffle")
                      : f == H5Z_FILTER_FLETCHER32 ? std::string("fletcher32")
                                                   : cat("filter ", f);
    compression = i == 0 ? one : compression + " + " + one;
  }
  return text + " compression=" + compression;
}

template <typename T>
std::string join(const T* v, int64_t n) {
  std::string s;
  for (int64_t i = 0; i < n; ++i) s += cat(i ? " " : "", static_cast<int>(v[i]));
  return s;
}

}  // namespace

void inspect_bert_shard(const std::string& path, std::ostream& out, int max_records) {
  BertShardReader reader(path);
  out << path << ": NVIDIA BERT HDF5 shard\n"
      << "  records " << reader.size() << ", seq_len " << reader.seq_len() << ", max_predictions "
      << reader.max_predictions() << (reader.max_pack() ? cat(", packed: up to ", reader.max_pack(), " instances per row") : "")
      << ", read path " << (reader.raw_chunk_path() ? "raw chunks" : "hyperslab") << "\n";
  {
    quiet_hdf5();
    Hid file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!file.valid()) throw_hdf5(Where{path}, "cannot open as HDF5");
    for (size_t c = 0; c < column_count(reader.max_pack()); ++c)
      out << "  " << kColumns[c].name << ": " << describe_dataset(file.get(), kColumns[c].name) << "\n";
  }
  int64_t n = std::min<int64_t>(std::max(max_records, 0), reader.size());
  BertBatch b;
  reader.read_range(0, n, b);
  const int64_t seq = b.seq_len, mp = b.max_predictions, pack = b.max_pack;
  for (int64_t i = 0; i < n; ++i) {
    const int8_t* mask = b.input_mask.data() + i * seq;
    int64_t tokens = std::count_if(mask, mask + seq, [](int8_t m) { return m != 0; });
    const int32_t* pos = b.masked_lm_positions.data() + i * mp;
    int64_t preds = mp;
    while (preds > 0 && pos[preds - 1] == 0) --preds;  // padding is 0 ([CLS] is never masked)
    out << "record " << i << ": tokens " << tokens << ", predictions " << preds << ", next_sentence_label "
        << static_cast<int>(b.next_sentence_labels[static_cast<size_t>(i)]) << "\n"
        << "  input_ids: " << join(b.input_ids.data() + i * seq, tokens) << "\n"
        << "  segment_ids: " << join(b.segment_ids.data() + i * seq, tokens) << "\n"
        << "  masked_lm_positions: " << join(pos, preds) << "\n"
        << "  masked_lm_ids: " << join(b.masked_lm_ids.data() + i * mp, preds) << "\n";
    if (pack == 0) continue;
    out << "  position_ids: " << join(b.position_ids.data() + i * seq, tokens) << "\n"
        << "  sequence_ids: " << join(b.sequence_ids.data() + i * seq, tokens) << "\n"
        << "  next_sentence_positions: " << join(b.next_sentence_positions.data() + i * pack, pack) << "\n"
        << "  packed_next_sentence_labels: " << join(b.packed_next_sentence_labels.data() + i * pack, pack) << "\n";
  }
}

}  // namespace pretrain
