#pragma once
// The row tile of a kernel compiled for a Residence (device/row/row_config.hpp).
#include <type_traits>

#include "fusekit/device/row/reread_row_tile.cuh"
#include "fusekit/device/row/row_tile.cuh"
#include "fusekit/device/row/shared_row_tile.cuh"

namespace fusekit::device {

template <Residence kResidence, class T, class Config>
using TileOf = std::conditional_t<
    kResidence == Residence::Shared, SharedRowTile<T, Config>,
    std::conditional_t<kResidence == Residence::Reread, RereadRowTile<T, Config>, RowTile<T, Config>>>;

}  // namespace fusekit::device
