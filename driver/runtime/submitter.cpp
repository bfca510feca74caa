// Submission thread: a single-producer single-consumer ring with spin-then-sleep waits on both
// sides (C++20 atomic wait/notify, futexes on Linux).
#include "runtime/submitter.h"

#include "support/log.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AETHERCL_PAUSE() _mm_pause()
#else
#define AETHERCL_PAUSE() ((void)0)
#endif

namespace aethercl {
namespace {

// How long an idle side spins before sleeping: long enough to span the gap between the calls of
// a training step (a few microseconds of Python each), short enough not to burn a core.
constexpr auto kSpin = std::chrono::microseconds(200);

template <typename Ready>
bool spin_until(Ready ready) {
  auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    AETHERCL_PAUSE();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) return false;
  }
}

}  // namespace

Submitter::Submitter(ErrorSink on_error, std::size_t capacity)
    : on_error_(std::move(on_error)), slots_(std::max<std::size_t>(capacity, 2)) {
  thread_ = std::thread([this] { run(); });
}

Submitter::~Submitter() {
  drain();
  stopping_.store(true, std::memory_order_seq_cst);
  wake_.fetch_add(1, std::memory_order_seq_cst);
  wake_.notify_all();
  thread_.join();
}

void Submitter::wait_for_room(std::uint64_t position) {
  if (position - done_.load(std::memory_order_acquire) < slots_.size()) return;
  // Full: wait for the thread to free a slot.
  auto has_room = [&] {
    return position - done_.load(std::memory_order_acquire) < slots_.size();
  };
  while (!spin_until(has_room)) {
    producer_waiting_.store(true, std::memory_order_seq_cst);
    std::uint64_t seen = done_.load(std::memory_order_seq_cst);
    if (position - seen >= slots_.size()) done_.wait(seen, std::memory_order_acquire);
    producer_waiting_.store(false, std::memory_order_relaxed);
  }
}

void Submitter::publish(std::uint64_t pushed) {
  pushed_.store(pushed, std::memory_order_seq_cst);
  if (thread_sleeping_.load(std::memory_order_seq_cst)) {
    wake_.fetch_add(1, std::memory_order_seq_cst);
    wake_.notify_one();
  }
}

void Submitter::push(Command&& command) {
  std::uint64_t position = pushed_.load(std::memory_order_relaxed);
  wait_for_room(position);
  slots_[position % slots_.size()] = std::move(command);
  publish(position + 1);
}

void Submitter::push_batch(const std::vector<Command>& commands, cl_command_queue queue) {
  std::size_t next = 0;
  while (next < commands.size()) {
    std::uint64_t position = pushed_.load(std::memory_order_relaxed);
    wait_for_room(position);
    std::uint64_t in_flight = position - done_.load(std::memory_order_acquire);
    std::size_t count = std::min<std::size_t>(slots_.size() - in_flight, commands.size() - next);
    for (std::size_t i = 0; i < count; ++i) {
      commands[next + i].copy_into(slots_[(position + i) % slots_.size()], queue);
    }
    publish(position + count);
    next += count;
  }
}

void Submitter::drain() {
  const std::uint64_t target = pushed_.load(std::memory_order_relaxed);
  auto reached = [&] { return done_.load(std::memory_order_acquire) >= target; };
  while (!spin_until(reached)) {
    producer_waiting_.store(true, std::memory_order_seq_cst);
    std::uint64_t seen = done_.load(std::memory_order_seq_cst);
    if (seen < target) done_.wait(seen, std::memory_order_acquire);
    producer_waiting_.store(false, std::memory_order_relaxed);
  }
}

void Submitter::flush_touched_queues() {
  for (cl_command_queue queue : touched_) clFlush(queue);
  touched_.clear();
}

void Submitter::run() {
  std::uint64_t next = 0;
  for (;;) {
    auto has_work = [&] { return pushed_.load(std::memory_order_acquire) > next; };
    if (!has_work()) {
      if (stopping_.load(std::memory_order_acquire)) return;
      if (!spin_until(has_work)) {
        // Sleep until push() or the destructor bumps wake_: the ticket is taken before the last
        // look at pushed_, so a push after that look always changes the ticket.
        std::uint32_t ticket = wake_.load(std::memory_order_seq_cst);
        thread_sleeping_.store(true, std::memory_order_seq_cst);
        if (pushed_.load(std::memory_order_seq_cst) == next &&
            !stopping_.load(std::memory_order_seq_cst)) {
          wake_.wait(ticket, std::memory_order_seq_cst);
        }
        thread_sleeping_.store(false, std::memory_order_relaxed);
        continue;
      }
    }
    Command& command = slots_[next % slots_.size()];
    try {
      execute(command, nullptr);
    } catch (const Error& error) {
      on_error_(command, error);
    } catch (const std::exception& error) {
      on_error_(command, Error(Status::kInternal, error.what()));
    }
    if (std::find(touched_.begin(), touched_.end(), command.queue) == touched_.end()) {
      touched_.push_back(command.queue);
    }
    command.wait_for.reset();  // before the slot is handed back
    ++next;
    // Caught up: flush what was enqueued (the device may not start queued work before a flush;
    // NVIDIA batches submissions). Done before publishing, so once the producer sees the ring
    // idle no queue pointer is left here (it may release a queue right after drain()).
    if (pushed_.load(std::memory_order_seq_cst) == next) flush_touched_queues();
    done_.store(next, std::memory_order_seq_cst);
    if (producer_waiting_.load(std::memory_order_seq_cst)) done_.notify_all();
  }
}

}  // namespace aethercl
