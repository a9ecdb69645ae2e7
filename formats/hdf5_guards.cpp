// Guards against damaged files that libhdf5 1.10 would crash on (see hdf5_guards.h).
#include "formats/hdf5_guards.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

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

namespace {

// Where libhdf5's addresses start in the file (after the user block), how wide they are, and the
// K of its chunk B-trees (2K entries per node).
struct AddressSpace {
  uint64_t origin = 0;
  size_t offset_bytes = 8, length_bytes = 8;
  unsigned chunk_btree_k = 0;
  unsigned shared_message_indexes = 0;  // 0: the file has no shared-message table
};

AddressSpace address_space(const std::string& path, hid_t file) {
  Hid fcpl = checked(H5Fget_create_plist(file), H5Pclose, Where{path}, "cannot read the file's creation properties");
  hsize_t userblock = 0;
  AddressSpace a;
  if (H5Pget_userblock(fcpl.get(), &userblock) < 0 || H5Pget_sizes(fcpl.get(), &a.offset_bytes, &a.length_bytes) < 0 ||
      H5Pget_istore_k(fcpl.get(), &a.chunk_btree_k) < 0 || H5Pget_shared_mesg_nindexes(fcpl.get(), &a.shared_message_indexes) < 0)
    throw_hdf5(Where{path}, "cannot read the file's creation properties");
  a.origin = userblock;
  return a;
}

// The little-endian unsigned integer of `width` (1 to 8) bytes at `at`.
uint64_t read_uint(const uint8_t* at, size_t width) {
  uint64_t v = 0;
  for (size_t i = width; i-- > 0;) v = v << 8 | at[i];
  return v;
}

// Calls note(type, flags, data offset, data length) for each message in the first chunk of the
// object header at file offset `at` of `version` (1, or 2 with its "OHDR" signature); lengths are
// cut to the chunk and the file. Continuation chunks are not followed: the guards look for
// messages HDF5 writes into the first chunk.
template <class Note>
void for_each_message(const MappedFile& map, uint64_t at, unsigned version, Note note) {
  const uint8_t* base = map.data();
  const uint64_t size = map.size();
  auto u16 = [&](uint64_t o) { return static_cast<uint32_t>(base[o] | base[o + 1] << 8); };
  if (version == 1 && at < size && size - at >= 16) {  // prefix: version, 0, nmesgs, refcount, header size, pad
    uint64_t end = std::min<uint64_t>(size, at + 16 + read_uint(base + at + 8, 4));
    for (uint64_t o = at + 16; o + 8 <= end;) {
      uint32_t type = u16(o), len = u16(o + 2);  // then flags, 3 reserved
      note(type, base[o + 4], o + 8, std::min<uint64_t>(len, end - (o + 8)));
      o += 8 + len;
    }
  } else if (version == 2 && at < size && size - at >= 6 && std::memcmp(base + at, "OHDR", 4) == 0) {
    uint8_t flags = base[at + 5];
    uint64_t o = at + 6 + ((flags & 0x20) ? 16 : 0) + ((flags & 0x10) ? 4 : 0);
    uint64_t width = uint64_t{1} << (flags & 3);
    if (o + width > size) return;
    uint64_t chunk0 = read_uint(base + o, width);
    o += width;
    uint64_t end = std::min<uint64_t>(size, o + std::min<uint64_t>(chunk0, size));
    uint64_t msg_header = (flags & 0x04) ? 6 : 4;
    for (; o + msg_header <= end;) {
      uint32_t type = base[o], len = u16(o + 1);  // then flags (and a creation order)
      note(type, base[o + 3], o + msg_header, std::min<uint64_t>(len, end - (o + msg_header)));
      o += msg_header + len;
    }
  }
}

}  // namespace

// libhdf5 1.10 looks a name up in an old-style group through the symbol table message of the
// group's object header: a B-tree of symbol nodes whose names live in a local heap. It reads that
// heap without checking its address or size against the file, so a damaged root group kills the
// process inside H5Lexists or H5Dopen2 (SEGV: a null read in H5F__accum_read under
// H5HL_protect, found by fuzzing). So before the first lookup we read the root group's symbol
// table message ourselves and refuse a B-tree or local heap that is not where it says, whole,
// inside the file. A root group without one (new-style links) is left to libhdf5.
void check_root_group(const std::string& path, const MappedFile& map, hid_t file) {
  H5O_info_t info{};
  if (H5Oget_info2(file, &info, H5O_INFO_BASIC | H5O_INFO_HDR) < 0)
    throw_hdf5(Where{path}, "cannot read the object header of the root group: the file is damaged");
  const AddressSpace space = address_space(path, file);
  const uint64_t size = map.size(), width = space.offset_bytes, length = space.length_bytes;
  if (info.addr == HADDR_UNDEF || width < 1 || width > 8 || length < 1 || length > 8 || space.origin > size) return;
  uint64_t stab_at = 0, stab_len = 0;  // the symbol table message (type 17): B-tree address, heap address
  for_each_message(map, space.origin + info.addr, info.hdr.version, [&](uint32_t type, uint32_t, uint64_t data, uint64_t len) {
    if (type == 17 && !stab_len) stab_at = data, stab_len = len;
  });
  if (stab_len < 2 * width) return;
  const uint8_t* base = map.data();
  const uint64_t btree = read_uint(base + stab_at, width), heap = read_uint(base + stab_at + width, width);
  const uint64_t room = size - space.origin;  // bytes from address 0 to the end of the file
  Where where = Where::at_offset(path, static_cast<int64_t>(stab_at));
  auto damaged = [&](const std::string& what) {
    return Error(where, cat("the root group's symbol table message names ", what, ": the file is damaged"));
  };
  // A v1 B-tree node: "TREE", node type (0: group), level, entries used, left and right siblings.
  if (btree >= room || room - btree < 8 + 2 * width || std::memcmp(base + space.origin + btree, "TREE", 4) != 0 ||
      base[space.origin + btree + 4] != 0)
    throw damaged(cat("a B-tree at address ", btree, " where the ", size, "-byte file has no group B-tree node"));
  // A local heap: "HEAP", version 0, 3 reserved, data size, free-list offset, data address.
  if (heap >= room || room - heap < 8 + 2 * length + width || std::memcmp(base + space.origin + heap, "HEAP", 4) != 0)
    throw damaged(cat("a local heap at address ", heap, " where the ", size, "-byte file has none"));
  const uint64_t data_size = read_uint(base + space.origin + heap + 8, length);
  const uint64_t data_at = read_uint(base + space.origin + heap + 8 + 2 * length, width);
  if (data_at >= room || data_size > room - data_at)
    throw damaged(cat("a local heap whose ", data_size, " bytes of names at address ", data_at, " lie past the end of the ", size,
                      "-byte file"));
}

namespace {

// libhdf5 1.10 walks a chunked dataset's index, a v1 B-tree, trusting each node's level: a root
// whose level byte was damaged (0 → 255) made it take chunk addresses for child nodes and die with
// SIGSEGV (a null read in H5F__accum_read under H5B_iterate, from H5Dget_chunk_info_by_coord;
// found by fuzzing). So every node is checked before libhdf5 reads one: whole inside the file,
// "TREE", node type 1 (raw data chunks), at most 2K entries, each child one level below its parent.
// The keys must be in order too. H5Dread finds a chunk by binary search over them, while
// H5Dget_chunk_info_by_coord (which our checks of a chunk's stored bytes use) took the first match:
// a damaged leaf listing chunk (0, 0) twice, the second time 26 bytes with gzip marked skipped,
// passed those checks through the first entry, then H5Dread took the second as a whole 64-byte
// chunk and copied past it (ASan: heap-buffer-overflow in H5VM_memcpyvv under H5D__scatgath_read;
// found by fuzzing). Keys are compared as libhdf5 compares them, each offset divided by its chunk
// dimension: strictly increasing within a node, and in [the parent's key that leads to the node,
// the parent's next key). The leaves' chunk addresses are ChunkFile::locate's to
// check. `root` is the address a v1-v3 chunked layout message gives; `dims` its ndims dimensions
// (rank + 1; the last is the element size), which size the keys; `space`'s offsets are 1 to 8
// bytes wide and its origin inside the file.
void check_chunk_btree(const std::string& path, const MappedFile& map, const AddressSpace& space, const char* name,
                       uint64_t root, const std::vector<uint64_t>& dims) {
  const uint64_t width = space.offset_bytes, two_k = 2 * uint64_t{space.chunk_btree_k}, ndims = dims.size();
  const uint64_t undefined = width == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * width)) - 1;  // all bits set
  if (root == undefined || two_k == 0) return;  // no chunk written
  // A node as libhdf5 allocates it: "TREE", type, level, entries used, two siblings, then 2K
  // children between 2K + 1 keys (chunk size, filter mask, an 8-byte offset per dimension).
  const uint64_t key = 8 + 8 * ndims, header = 8 + 2 * width, node_bytes = header + two_k * width + (two_k + 1) * key;
  const uint64_t room = map.size() - space.origin;  // bytes from address 0 to the end of the file
  using Scaled = std::vector<uint64_t>;  // a key's chunk coordinates; empty: no bound
  struct Node {
    uint64_t addr;
    int level;         // expected; -1 for the root, whose level is its own
    Scaled low, high;  // its keys lie in [low, high); empty: unbounded
  };
  auto damaged = [&](const Node& n, const std::string& what) {
    return Error(Where::at_offset(path, static_cast<int64_t>(std::min(space.origin + n.addr, uint64_t{map.size()}))),
                 cat("dataset '", name, "' has a chunk index (v1 B-tree) node at address ", n.addr,
                     n.level >= 0 ? cat(", expected at level ", n.level, ",") : std::string(", its root,"), " ", what,
                     ": the file is damaged"));
  };
  auto text = [](const Scaled& k) {
    std::string s = "(";
    for (size_t d = 0; d < k.size(); ++d) s += cat(d ? ", " : "", k[d]);
    return s + ")";
  };
  std::vector<Node> todo = {{root, -1, {}, {}}};
  for (uint64_t visits = 0; !todo.empty(); ++visits) {
    const Node n = std::move(todo.back());
    todo.pop_back();
    if (visits > room / node_bytes) throw damaged(n, "beyond the nodes the file has room for (the index has a cycle)");
    if (n.addr >= room || room - n.addr < node_bytes)
      throw damaged(n, cat("that is not a whole ", node_bytes, "-byte node inside the ", map.size(), "-byte file"));
    const uint8_t* at = map.data() + space.origin + n.addr;
    const int level = at[5];
    const uint64_t entries = read_uint(at + 6, 2);
    if (std::memcmp(at, "TREE", 4) != 0 || at[4] != 1)
      throw damaged(n, "that is not a chunk B-tree node (\"TREE\", node type 1)");
    if ((n.level >= 0 && level != n.level) || entries > two_k)
      throw damaged(n, cat("at level ", level, " with ", entries, " entries (at most ", two_k, ")"));
    std::vector<Scaled> keys(entries);
    for (uint64_t i = 0; i < entries; ++i) {
      const uint8_t* k = at + header + (key + width) * i + 8;
      for (uint64_t d = 0; d < ndims; ++d) keys[i].push_back(read_uint(k + 8 * d, 8) / dims[d]);
      if (i > 0 && !(keys[i - 1] < keys[i]))
        throw damaged(n, cat("whose entry ", i, " is chunk ", text(keys[i]), ", not after entry ", i - 1, "'s ", text(keys[i - 1])));
      if (i == 0 && !n.low.empty() && keys[0] < n.low)
        throw damaged(n, cat("whose first entry is chunk ", text(keys[0]), ", before its parent's key ", text(n.low)));
      if (!n.high.empty() && !(keys[i] < n.high))
        throw damaged(n, cat("whose entry ", i, " is chunk ", text(keys[i]), ", not before its parent's next key ", text(n.high)));
    }
    if (level > 0)
      for (uint64_t i = 0; i < entries; ++i)
        todo.push_back({read_uint(at + header + key * (i + 1) + width * i, width), level - 1, keys[i],
                        i + 1 < entries ? keys[i + 1] : n.high});
  }
}

}  // namespace

// libhdf5 1.10 divides by the chunk dimensions of a layout message while it opens a dataset
// (H5D__chunk_set_info), so a chunk dimension of 0 in a damaged file kills the process with SIGFPE
// inside H5Dopen2, before any of our checks could run (found by fuzzing). It takes one dimension
// per axis of the dataspace, and 0 for an axis the layout message does not list (found by fuzzing
// on a lent machine: a layout of 0 dimensions for a rank-1 dataset). So before opening a dataset
// we read its object header ourselves (the first header chunk: where HDF5 puts the dataspace and
// layout messages) and refuse a chunked layout with a zero dimension or fewer dimensions than the
// dataspace's rank + 1 (the last is the element size), then check its chunk index's B-tree
// (check_chunk_btree). These are guards against known crashes, not a second HDF5 parser. A header
// libhdf5 cannot describe is refused too: the guard could not vouch for what H5Dopen2 would decode
// from it.
void check_chunked_layout(const std::string& path, const MappedFile& map, hid_t file, const char* name) {
  H5O_info_t info{};
  if (H5Oget_info_by_name2(file, name, &info, H5O_INFO_BASIC | H5O_INFO_HDR, H5P_DEFAULT) < 0)
    throw_hdf5(Where{path}, cat("cannot read the object header of dataset '", name, "': the file is damaged"));
  const AddressSpace space = address_space(path, file);
  const uint64_t origin = space.origin;
  if (info.addr == HADDR_UNDEF || origin > map.size() || info.addr >= map.size() - origin) return;
  const uint8_t* base = map.data();
  // The messages that matter, as (offset, length) of their data; length 0: not seen. A shared
  // dataspace message (flags bit 1) holds a reference, not the rank, so it is passed over.
  uint64_t space_at = 0, space_len = 0, layout_at = 0, layout_len = 0;
  uint64_t in_heap_at = 0, in_heap_type = 0;  // the first message kept in the shared-message heap
  for_each_message(map, origin + info.addr, info.hdr.version, [&](uint32_t type, uint32_t flags, uint64_t data, uint64_t len) {
    if (type == 1 && !(flags & 0x02) && !space_len) space_at = data, space_len = len;
    if (type == 8 && !layout_len) layout_at = data, layout_len = len;
    // A shared message (flags bit 1) of version 2 or 3 says where it lives in its second byte;
    // 1 is the shared-message heap.
    if ((flags & 0x02) && len >= 2 && (base[data] == 2 || base[data] == 3) && base[data + 1] == 1 && !in_heap_at)
      in_heap_at = data, in_heap_type = type;
  });
  // libhdf5 1.10 decodes such a message through the file's shared-message table without asking
  // whether the file has one: a dataset header claiming one in a file without made it read from
  // an undefined address (SIGSEGV: a null read in H5F__accum_read under H5SM_get_fheap_addr, from
  // H5Dopen2; found by fuzzing). h5py and our writer never create that table.
  if (in_heap_at && space.shared_message_indexes == 0)
    throw Error(Where::at_offset(path, static_cast<int64_t>(in_heap_at)),
                cat("dataset '", name, "' has a header message (type ", in_heap_type,
                    ") kept in the shared-message heap of a file that has none: the file is damaged"));
  if (layout_len < 3) return;
  const uint8_t* m = base + layout_at;
  uint64_t dims_at = 0, ndims = 0, width = 4, btree_at = 0;  // btree_at: the index's address in m; 0: none of ours
  if ((m[0] == 1 || m[0] == 2) && m[2] == 2) {  // v1/v2: version, rank+1, class, 5 reserved, address
    ndims = m[1], btree_at = 8, dims_at = 8 + space.offset_bytes;
  } else if (m[0] == 3 && m[1] == 2) {  // v3: version, class, rank+1, address
    ndims = m[2], btree_at = 3, dims_at = 3 + space.offset_bytes;
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
  std::vector<uint64_t> dims;
  for (uint64_t d = 0; d < ndims && dims_at + (d + 1) * width <= layout_len; ++d) {
    dims.push_back(read_uint(m + dims_at + d * width, width));
    if (dims.back() == 0)
      throw Error(where, cat("dataset '", name, "' has a chunk dimension of 0 in its layout message: the file is damaged"));
  }
  if (btree_at && dims.size() == ndims && btree_at + space.offset_bytes <= layout_len && space.offset_bytes >= 1 && space.offset_bytes <= 8)
    check_chunk_btree(path, map, space, name, read_uint(m + btree_at, space.offset_bytes), dims);
}

}  // namespace pretrain::hdf5
