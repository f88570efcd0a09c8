// SplitMix64's finaliser: a bijection of 64-bit integers with good avalanche, the hash behind
// every counter-based draw on the host (CSBM streams, the random split by node id, partition
// ids). Same bits on every machine.
#pragma once

#include <cstdint>

namespace adgnn {

constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace adgnn
