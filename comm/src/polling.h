// Waiting by polling, shared by the MPI and NCCL backends: every wait of a communicator polls its
// operation until a deadline, so that a dead peer becomes an error instead of a hang.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <thread>

namespace adgnn::detail {

using Clock = std::chrono::steady_clock;

// Polling back-off: busy for the first spins (short operations finish there), then yield for a
// couple of milliseconds, then sleep a twentieth of the time waited so far (20 us .. 1 ms), which
// bounds the added latency to ~5% while a long wait costs almost no CPU. Open MPI progresses
// non-blocking collectives only inside MPI calls, so the sleeps stay short; NCCL progresses on
// the GPU and in its own proxy threads.
inline void backoff(int64_t spin, Clock::duration waited) {
  using std::chrono::microseconds;
  if (spin < 64) return;
  if (waited < std::chrono::milliseconds(2)) {
    std::this_thread::yield();
    return;
  }
  const auto s = std::chrono::duration_cast<microseconds>(waited / 20);
  std::this_thread::sleep_for(std::clamp(s, microseconds(20), microseconds(1000)));
}

// now + seconds; never for an infinite timeout.
inline Clock::time_point deadline_after(double seconds) {
  if (!std::isfinite(seconds)) return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace adgnn::detail
