// Checks a file must pass before libhdf5 1.10 sees it (internal to formats/): that library trusts
// fields a damaged file can set, and some of them crash the process inside its own calls, before
// any check after the call could run. Each guard names the crash it prevents; none is a second
// HDF5 parser.
#pragma once
#include <hdf5.h>

#include <string>

#include "common/file.h"

namespace pretrain::hdf5 {

// Validates the signature before handing the file to libhdf5, which trusts more than it should.
// Throws Error naming the file when there is no HDF5 signature at byte 0 or 512 * 2^k.
void check_hdf5_signature(const std::string& path);

// Refuses (throws Error at the symbol table message's offset) a root group whose symbol table
// message, in the first chunk of its object header, names a B-tree or local heap that is not
// there, whole, inside the file; call it after H5Fopen and before any lookup by name.
// `map` is `path` mapped; `file` is it opened with H5Fopen.
void check_root_group(const std::string& path, const MappedFile& map, hid_t file);

// Refuses (throws Error at the layout message's offset) a chunked layout message with a chunk
// dimension of 0, or fewer dimensions than the dataspace's rank + 1, in dataset `name`'s first
// object header chunk; (throws Error at the node's offset) a chunk index B-tree (v1, layout
// versions 1-3) with a node that is not whole in the file, not a chunk node, not one level below
// its parent, or whose keys are out of order; (throws Error at the message's offset) a header
// message kept in a shared-message heap the file does not have; and (throws Error naming the file) a header libhdf5 cannot describe. Call it
// before H5Dopen2.
// `map` is `path` mapped; `file` is it opened with H5Fopen.
void check_chunked_layout(const std::string& path, const MappedFile& map, hid_t file, const char* name);

}  // namespace pretrain::hdf5
