// Processes played by threads: a ProcessGroup whose P members are threads of the test, so that
// multi-process code runs under gtest without mpirun. Every collective is a rendezvous of all P.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "adgnn/process_group.h"
#include "fmt/format.h"

namespace fixtures {

class ThreadGroups {
 public:
  explicit ThreadGroups(int size)
      : size_(size), inbox_(static_cast<size_t>(size) * size), sums_(static_cast<size_t>(size)),
        errors_(static_cast<size_t>(size)) {}

  // Runs body(group) on `size` threads, one per member; rethrows the first exception.
  void run(const std::function<void(adgnn::ProcessGroup&)>& body) {
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> failed(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r)
      threads.emplace_back([&, r] {
        Member m(*this, r);
        try {
          body(m);
        } catch (...) {
          failed[r] = std::current_exception();
        }
      });
    for (auto& t : threads) t.join();
    for (auto& e : failed)
      if (e) std::rethrow_exception(e);
  }

 private:
  class Member final : public adgnn::ProcessGroup {
   public:
    Member(ThreadGroups& g, int rank) : g_(g), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return g_.size_; }
    std::vector<uint64_t> all_to_all(const std::vector<uint64_t>& send,
                                     const std::vector<int64_t>& counts) override {
      size_t at = 0;
      for (int p = 0; p < g_.size_; ++p) {
        g_.inbox_[static_cast<size_t>(p) * g_.size_ + rank_].assign(send.begin() + at, send.begin() + at + counts.at(p));
        at += static_cast<size_t>(counts[p]);
      }
      g_.wait();
      std::vector<uint64_t> got;
      for (int p = 0; p < g_.size_; ++p) {
        const auto& in = g_.inbox_[static_cast<size_t>(rank_) * g_.size_ + p];
        got.insert(got.end(), in.begin(), in.end());
      }
      g_.wait();
      return got;
    }
    void sum(std::vector<int64_t>& values) override {
      g_.sums_[rank_] = values;
      g_.wait();
      for (size_t i = 0; i < values.size(); ++i) {
        values[i] = 0;
        for (const auto& v : g_.sums_) values[i] += v.at(i);
      }
      g_.wait();
    }
    std::string first_error(const std::string& local_error) override {
      g_.errors_[rank_] = local_error;
      g_.wait();
      std::string first;
      for (int p = 0; p < g_.size_ && first.empty(); ++p)
        if (!g_.errors_[p].empty()) first = fmt::format("{} (process {})", g_.errors_[p], p);
      g_.wait();
      return first;
    }

   private:
    ThreadGroups& g_;
    int rank_;
  };

  // A reusable barrier.
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t gen = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != gen; });
    }
  }

  int size_;
  std::vector<std::vector<uint64_t>> inbox_;  // [to * size + from]
  std::vector<std::vector<int64_t>> sums_;
  std::vector<std::string> errors_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace fixtures
