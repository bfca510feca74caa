// The submission thread of a device (docs/ARCHITECTURE.md decision 15): callers record commands
// in a bounded ring and return; one thread per device executes them in order. Used where
// enqueueing is expensive for the caller (NVIDIA: microseconds per clEnqueueNDRangeKernel).
//
// Contract: push() and drain() are called with the owning device's mutex held (one producer at a
// time). The thread never takes that mutex; everything a queued command refers to (queues, cl_mem,
// kernels, host memory) stays valid until drain() has returned, which is what the device ensures
// before releasing any of it. Commands that fail to enqueue are handed to on_error (the device
// reports them at its next synchronising call) and the thread carries on.
#pragma once

#include "runtime/command.h"
#include "support/error.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace aethercl {

class Submitter {
 public:
  using ErrorSink = std::function<void(const Command&, const Error&)>;

  explicit Submitter(ErrorSink on_error, std::size_t capacity = 1024);
  Submitter(const Submitter&) = delete;
  Submitter& operator=(const Submitter&) = delete;
  // Executes what is queued, then stops the thread.
  ~Submitter();

  // Queues a command; waits for a free slot when the ring is full.
  void push(Command&& command);
  // Queues copies of commands, each on queue, in order, publishing them together (one wake-up of
  // the thread; more only when the ring fills): a graph's replay.
  void push_batch(const std::vector<Command>& commands, cl_command_queue queue);
  // Returns once every pushed command has been enqueued (and its queue flushed).
  void drain();
  // No command is waiting or executing.
  bool idle() const {
    return done_.load(std::memory_order_acquire) == pushed_.load(std::memory_order_relaxed);
  }
  std::uint64_t commands_executed() const { return done_.load(std::memory_order_relaxed); }

 private:
  void run();
  // Waits until the slot at position is free.
  void wait_for_room(std::uint64_t position);
  void publish(std::uint64_t pushed);
  void flush_touched_queues();

  ErrorSink on_error_;
  std::vector<Command> slots_;
  std::atomic<std::uint64_t> pushed_{0};  // written by the producer
  std::atomic<std::uint64_t> done_{0};    // written by the thread
  std::atomic<bool> stopping_{false};
  std::atomic<bool> thread_sleeping_{false};
  std::atomic<std::uint32_t> wake_{0};  // bumped to wake the sleeping thread
  std::atomic<bool> producer_waiting_{false};
  std::vector<cl_command_queue> touched_;  // queues enqueued to since the last flush (thread only)
  std::thread thread_;
};

}  // namespace aethercl
