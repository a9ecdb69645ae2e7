// Guards against damaged files that libhdf5 1.10 would crash on (see hdf5_guards.h).
#include "formats/hdf5_guards.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/error.h"
#include "formats/hdf5_chunks.h"

namespace pretrain::hdf5 {

// Validates the signature before handing the file to libhdf5, which trusts more than it should.
void check_hdf5_signature(const std::string& path) {
  static const uint8_t kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  MappedFile map(path);
  // The superblock is at 0 or, after a user block, at 512, 1024, 2048, …
  for (size_t at = 0; at + 8 <= map.size(); at = at ? at * 2 : 512)
    if (std::memcmp(map.data() + at, kSignature, 8) == 0) return;
  throw Error(Where::at_offset(path, 0), cat("not an HDF5 file: no HDF5 signature at byte 0 or 512·2^k (file is ",
                                             map.size(), " bytes)"));
}

// libhdf5 1.10 divides by the chunk dimensions of a layout message while it opens a dataset
// (H5D__chunk_set_info), so a chunk dimension of 0 in a damaged file kills the process with SIGFPE
// inside H5Dopen2, before any of our checks could run (found by fuzzing). It takes one dimension
// per axis of the dataspace, and 0 for an axis the layout message does not list (found by fuzzing
// on a lent machine: a layout of 0 dimensions for a rank-1 dataset). So before opening a dataset
// we read its object header ourselves (the first header chunk: where HDF5 puts the dataspace and
// layout messages) and refuse a chunked layout with a zero dimension or fewer dimensions than the
// dataspace's rank + 1 (the last is the element size). Continuation chunks are not followed; this
// is a guard against one known crash, not a second HDF5 parser. A header libhdf5 cannot describe
// is refused too: the guard could not vouch for what H5Dopen2 would decode from it.
void check_layout_dims(const std::string& path, const MappedFile& map, hid_t file, const char* name) {
  H5O_info_t info{};
  if (H5Oget_info_by_name2(file, name, &info, H5O_INFO_BASIC | H5O_INFO_HDR, H5P_DEFAULT) < 0)
    throw_hdf5(Where{path}, cat("cannot read the object header of dataset '", name, "': the file is damaged"));
  const uint8_t* base = map.data();
  uint64_t size = map.size(), at = info.addr;
  if (at == HADDR_UNDEF || at >= size) return;
  auto u16 = [&](uint64_t o) { return static_cast<uint32_t>(base[o] | base[o + 1] << 8); };
  auto u32 = [&](uint64_t o) { uint32_t v; std::memcpy(&v, base + o, 4); return v; };
  // The messages that matter, as (offset, length) of their data; length 0: not seen. A shared
  // dataspace message (flags bit 1) holds a reference, not the rank, so it is passed over.
  uint64_t space_at = 0, space_len = 0, layout_at = 0, layout_len = 0;
  auto note = [&](uint32_t type, uint32_t flags, uint64_t data, uint64_t len) {
    if (type == 1 && !(flags & 0x02) && !space_len) space_at = data, space_len = len;
    if (type == 8 && !layout_len) layout_at = data, layout_len = len;
  };
  if (info.hdr.version == 1 && at + 16 <= size) {  // prefix: version, 0, nmesgs, refcount, header size, pad
    uint64_t end = std::min<uint64_t>(size, at + 16 + u32(at + 8));
    for (uint64_t o = at + 16; o + 8 <= end;) {
      uint32_t type = u16(o), len = u16(o + 2);  // then flags, 3 reserved
      note(type, base[o + 4], o + 8, std::min<uint64_t>(len, end - (o + 8)));
      o += 8 + len;
    }
  } else if (info.hdr.version == 2 && at + 6 <= size && std::memcmp(base + at, "OHDR", 4) == 0) {
    uint8_t flags = base[at + 5];
    uint64_t o = at + 6 + ((flags & 0x20) ? 16 : 0) + ((flags & 0x10) ? 4 : 0);
    uint64_t width = uint64_t{1} << (flags & 3);
    if (o + width > size) return;
    uint64_t chunk0 = 0;
    std::memcpy(&chunk0, base + o, width);
    o += width;
    uint64_t end = std::min<uint64_t>(size, o + std::min<uint64_t>(chunk0, size));
    uint64_t msg_header = (flags & 0x04) ? 6 : 4;
    for (; o + msg_header <= end;) {
      uint32_t type = base[o], len = u16(o + 1);  // then flags (and a creation order)
      note(type, base[o + 3], o + msg_header, std::min<uint64_t>(len, end - (o + msg_header)));
      o += msg_header + len;
    }
  }
  if (layout_len < 3) return;
  const uint8_t* m = base + layout_at;
  uint64_t dims_at = 0, ndims = 0, width = 4;
  if ((m[0] == 1 || m[0] == 2) && m[2] == 2) {  // v1/v2: version, rank+1, class, 5 reserved, address
    ndims = m[1], dims_at = 8 + 8;
  } else if (m[0] == 3 && m[1] == 2) {  // v3: version, class, rank+1, address
    ndims = m[2], dims_at = 3 + 8;
  } else if (m[0] == 4 && m[1] == 2 && layout_len >= 5) {  // v4: version, class, flags, rank+1, width
    ndims = m[3], width = m[4], dims_at = 5;
  } else {
    return;  // not chunked
  }
  if (width < 1 || width > 8) return;
  // The dataspace message (v1 and v2) has its rank in byte 1; a chunked dataset has rank ≥ 1, the
  // rank assumed when the header's first chunk has no (unshared) dataspace message.
  uint64_t rank = space_len >= 2 ? std::max<uint64_t>(base[space_at + 1], 1) : 1;
  Where where = Where::at_offset(path, static_cast<int64_t>(layout_at));
  if (ndims < rank + 1)
    throw Error(where, cat("dataset '", name, "' has a chunked layout message of ", ndims, " dimensions for a dataspace of rank ",
                           rank, ", expected ", rank + 1, ": the file is damaged"));
  for (uint64_t d = 0; d < ndims && dims_at + (d + 1) * width <= layout_len; ++d) {
    uint64_t v = 0;
    std::memcpy(&v, m + dims_at + d * width, width);
    if (v == 0) throw Error(where, cat("dataset '", name, "' has a chunk dimension of 0 in its layout message: the file is damaged"));
  }
}

}  // namespace pretrain::hdf5
