// Chrome-trace collection from OpenCL profiling events.
#include "runtime/tracer.h"

#include "runtime/device_info.h"
#include "support/error.h"
#include "support/log.h"

#include <algorithm>
#include <fstream>

namespace aethercl {
namespace {

// Bounded memory: past this many unresolved events, record() waits for the oldest to finish.
constexpr std::size_t kMaxPending = 1 << 16;

}  // namespace

Tracer& Tracer::instance() {
  static Tracer* tracer = new Tracer();  // never destroyed: events must not outlive the ICD
  return *tracer;
}

void Tracer::start(std::string path) {
  std::lock_guard lock(mutex_);
  if (active_) fail(Status::kInvalidArgument, "tracing is already on (writing {})", path_);
  if (path.empty()) fail(Status::kInvalidArgument, "the trace path is empty");
  path_ = std::move(path);
  pending_.clear();
  records_.clear();
  totals_.clear();
  active_ = true;
}

void Tracer::record(int device_index, cl_event event, std::string name, const char* category,
                    const char* api, std::uint64_t bytes) {
  // Without a reference of its own (the runtime refused one) the command is not timed.
  if (!active() || event == nullptr || clRetainEvent(event) != CL_SUCCESS) return;
  std::lock_guard lock(mutex_);
  pending_.push_back(Pending{device_index, cl::Event(event), std::move(name), category, api, bytes});
  if (pending_.size() >= kMaxPending) collect_locked(true);
}

void Tracer::collect() {
  std::lock_guard lock(mutex_);
  collect_locked(false);
}

void Tracer::collect_locked(bool wait) {
  std::vector<Pending> still_pending;
  for (Pending& pending : pending_) {
    cl_int status = CL_COMPLETE;
    clGetEventInfo(pending.event.get(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status,
                   nullptr);
    if (status > CL_COMPLETE && wait) {
      cl_event event = pending.event.get();
      clWaitForEvents(1, &event);
      status = CL_COMPLETE;
    }
    if (status > CL_COMPLETE) {
      still_pending.push_back(std::move(pending));
      continue;
    }
    if (status < 0) continue;  // failed commands are reported by the device, not traced
    cl_ulong start = 0;
    cl_ulong end = 0;
    if (clGetEventProfilingInfo(pending.event.get(), CL_PROFILING_COMMAND_START, sizeof(start),
                                &start, nullptr) != CL_SUCCESS ||
        clGetEventProfilingInfo(pending.event.get(), CL_PROFILING_COMMAND_END, sizeof(end), &end,
                                nullptr) != CL_SUCCESS) {
      continue;
    }
    Totals& totals = totals_[pending.name];
    ++totals.count;
    totals.total_ns += end >= start ? end - start : 0;
    totals.bytes += pending.bytes;
    records_.push_back(Record{pending.device_index, std::move(pending.name), pending.category,
                              pending.api, pending.bytes, start, end});
  }
  pending_ = std::move(still_pending);
}

std::string Tracer::summary_text_locked() const {
  std::vector<std::pair<std::string, Totals>> rows(totals_.begin(), totals_.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.total_ns > b.second.total_ns; });
  std::uint64_t all_ns = 0;
  for (const auto& row : rows) all_ns += row.second.total_ns;
  std::string text = fmt::format("{:<36} {:>9} {:>12} {:>10} {:>7}\n", "kernel / transfer",
                                 "calls", "total ms", "mean us", "share");
  for (const auto& [name, totals] : rows) {
    text += fmt::format("{:<36} {:>9} {:>12.3f} {:>10.2f} {:>6.1f}%\n", name, totals.count,
                        totals.total_ns / 1e6, totals.total_ns / 1e3 / totals.count,
                        all_ns ? 100.0 * totals.total_ns / all_ns : 0.0);
  }
  return text;
}

std::string Tracer::summary_json() {
  std::lock_guard lock(mutex_);
  collect_locked(false);
  std::string rows;
  for (const auto& [name, totals] : totals_) {
    rows += fmt::format("{}{{\"name\": \"{}\", \"calls\": {}, \"total_ns\": {}, \"bytes\": {}}}",
                        rows.empty() ? "" : ", ", json_escape(name), totals.count,
                        totals.total_ns, totals.bytes);
  }
  return fmt::format("{{\"active\": {}, \"pending\": {}, \"kernels\": [{}]}}", active(),
                     pending_.size(), rows);
}

std::string Tracer::stop() {
  std::lock_guard lock(mutex_);
  if (!active_) fail(Status::kInvalidArgument, "tracing is not on");
  active_ = false;
  collect_locked(true);
  std::uint64_t origin = UINT64_MAX;
  for (const Record& record : records_) origin = std::min(origin, record.start_ns);
  std::ofstream file(path_, std::ios::trunc);
  file << "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n";
  bool first = true;
  for (const Record& record : records_) {
    file << (first ? "" : ",\n")
         << fmt::format(
                "{{\"name\": \"{}\", \"cat\": \"{}\", \"ph\": \"X\", \"pid\": {}, \"tid\": 0, "
                "\"ts\": {:.3f}, \"dur\": {:.3f}, \"args\": {{\"api\": \"{}\", \"bytes\": {}}}}}",
                json_escape(record.name), record.category, record.device_index,
                (record.start_ns - origin) / 1e3, (record.end_ns - record.start_ns) / 1e3,
                record.api, record.bytes);
    first = false;
  }
  file << "\n]}\n";
  std::string path = path_;
  if (!file) fail(Status::kDeviceError, "cannot write the trace file {}", path);
  std::string summary = summary_text_locked();
  records_.clear();
  totals_.clear();
  return summary;
}

}  // namespace aethercl
