// File format: "AECLBIN1" | key (32 hex chars) | payload size (u64 LE) | payload hash (u64) |
// payload. Written to a temporary name and renamed, so readers never see a partial entry.
#include "runtime/binary_cache.h"

#include "support/env.h"
#include "support/hash.h"
#include "support/log.h"
#include "support/process.h"

#ifndef _WIN32
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <system_error>

namespace aethercl {
namespace {

constexpr char kMagic[8] = {'A', 'E', 'C', 'L', 'B', 'I', 'N', '1'};
constexpr std::size_t kKeyBytes = 32;
constexpr std::size_t kHeaderBytes = sizeof(kMagic) + kKeyBytes + 8 + 8;

std::uint64_t read_u64(const unsigned char* bytes) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

void append_u64(std::string& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// The whole file at path; nullopt when there is none (a plain miss). Throws std::runtime_error
// with the reason when something by that name exists but cannot be read as a regular file: the
// open never blocks (O_NONBLOCK: a FIFO), and directories, devices and sockets are refused.
#ifdef _WIN32
// Windows has no FIFOs to block on: refuse anything that is not a regular file, then read it.
std::optional<std::vector<unsigned char>> read_entry(const std::filesystem::path& path) {
  std::error_code error;
  auto status = std::filesystem::status(path, error);
  if (error || status.type() == std::filesystem::file_type::not_found) return std::nullopt;
  if (status.type() != std::filesystem::file_type::regular) {
    throw std::runtime_error("not a regular file");
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error("open failed");
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(file)),
                                   std::istreambuf_iterator<char>());
  if (file.bad()) throw std::runtime_error("read failed");
  if (bytes.size() > BinaryCache::kMaxEntryBytes) throw std::runtime_error("larger than any entry");
  return bytes;
}
#else
std::optional<std::vector<unsigned char>> read_entry(const std::filesystem::path& path) {
  auto failure = [](const char* what) {
    return std::runtime_error(fmt::format("{}: {}", what, std::generic_category().message(errno)));
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    throw failure("open failed");
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) throw failure("fstat failed");
  if (!S_ISREG(info.st_mode)) throw std::runtime_error("not a regular file");
  if (static_cast<std::uint64_t>(info.st_size) > BinaryCache::kMaxEntryBytes) {
    throw std::runtime_error(fmt::format("{} bytes, more than any entry", info.st_size));
  }
  // st_size is a hint only (files under /proc report 0): read until end of file.
  std::vector<unsigned char> bytes(static_cast<std::size_t>(info.st_size) + 1);
  std::size_t filled = 0;
  for (;;) {
    if (filled == bytes.size()) {
      if (bytes.size() > BinaryCache::kMaxEntryBytes) {
        throw std::runtime_error("larger than any entry");
      }
      bytes.resize(bytes.size() * 2 + 4096);
    }
    ssize_t got = ::read(fd, bytes.data() + filled, bytes.size() - filled);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw failure("read failed");
    if (got == 0) break;
    filled += static_cast<std::size_t>(got);
  }
  bytes.resize(filled);
  return bytes;
}
#endif

// Logs a cache failure: a warning the first time flag is seen clear in this process, debug after.
template <typename... Args>
void report_once(std::atomic<bool>& flag, fmt::format_string<Args...> format, Args&&... args) {
  try {
    std::string text = fmt::format(format, std::forward<Args>(args)...);
    if (!flag.exchange(true)) {
      log().warn("{} (the cache is only an optimisation; later failures like this are logged at "
                 "debug level)", text);
    } else {
      log().debug("{}", text);
    }
  } catch (...) {
  }
}

std::atomic<bool> read_warned{false};
std::atomic<bool> write_warned{false};

// The payload of a complete entry for key; a damaged one is deleted and reported (a miss).
std::optional<std::vector<unsigned char>> check_entry(const std::filesystem::path& path,
                                                     const std::string& key,
                                                     std::vector<unsigned char> bytes) {
  auto reject = [&](const char* why) -> std::optional<std::vector<unsigned char>> {
    log().warn("kernel cache entry {} is {}; rebuilding it", path.string(), why);
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    return std::nullopt;
  };
  if (bytes.size() < kHeaderBytes) return reject("truncated");
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) return reject("not a cache entry");
  if (std::memcmp(bytes.data() + sizeof(kMagic), key.data(), kKeyBytes) != 0) {
    return reject("for another key");
  }
  std::uint64_t size = read_u64(bytes.data() + sizeof(kMagic) + kKeyBytes);
  std::uint64_t hash = read_u64(bytes.data() + sizeof(kMagic) + kKeyBytes + 8);
  if (size != bytes.size() - kHeaderBytes) return reject("truncated");
  std::vector<unsigned char> payload(bytes.begin() + kHeaderBytes, bytes.end());
  if (Hasher().add(payload.data(), payload.size()).low() != hash) return reject("corrupt");
  return payload;
}

// Writes a complete entry under a temporary name and renames it into place; throws on failure.
void write_entry(const std::filesystem::path& directory, const std::filesystem::path& final_path,
                 const std::string& key, const std::vector<unsigned char>& binary) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) throw std::runtime_error("cannot create the directory: " + error.message());
  std::string header(kMagic, sizeof(kMagic));
  header += key;
  append_u64(header, binary.size());
  append_u64(header, Hasher().add(binary.data(), binary.size()).low());
  static std::atomic<unsigned> sequence{0};  // two devices of one model share keys
  std::filesystem::path temp_path =
      directory / fmt::format("{}.tmp.{}.{}", key, current_process_id(), ++sequence);
  {
    std::ofstream file(temp_path, std::ios::binary | std::ios::trunc);
    file.write(header.data(), static_cast<std::streamsize>(header.size()));
    file.write(reinterpret_cast<const char*>(binary.data()),
               static_cast<std::streamsize>(binary.size()));
    file.close();
    if (!file) {
      std::filesystem::remove(temp_path, error);
      throw std::runtime_error("writing " + temp_path.filename().string() + " failed");
    }
  }
  std::filesystem::rename(temp_path, final_path, error);
  if (error) {
    std::string reason = error.message();
    std::filesystem::remove(temp_path, error);
    throw std::runtime_error("renaming the new entry into place failed: " + reason);
  }
}

}  // namespace

std::optional<std::filesystem::path> BinaryCache::default_directory() {
  if (auto dir = env::get(env::kCacheDir)) return std::filesystem::path(*dir);
  if (auto xdg = env::get("XDG_CACHE_HOME")) return std::filesystem::path(*xdg) / "aethercl";
  if (auto home = env::get("HOME")) return std::filesystem::path(*home) / ".cache" / "aethercl";
  return std::nullopt;
}

BinaryCache BinaryCache::from_environment() {
  auto directory = default_directory();
  return BinaryCache(directory.value_or(std::filesystem::path()),
                     directory && env::flag(env::kCache, true));
}

BinaryCache::BinaryCache(std::filesystem::path directory, bool enabled)
    : directory_(std::move(directory)), enabled_(enabled) {}

std::filesystem::path BinaryCache::path_for(const std::string& key) const {
  return directory_ / (key + ".bin");
}

std::optional<std::vector<unsigned char>> BinaryCache::load(const std::string& key) const noexcept {
  if (!enabled_ || key.size() != kKeyBytes) return std::nullopt;
  std::filesystem::path path;
  try {
    path = path_for(key);
    std::optional<std::vector<unsigned char>> bytes = read_entry(path);
    if (!bytes) return std::nullopt;
    return check_entry(path, key, std::move(*bytes));
  } catch (const std::exception& error) {
    report_once(read_warned, "kernel cache entry {} cannot be read ({}); building from source",
                path.string(), error.what());
  } catch (...) {
    report_once(read_warned, "kernel cache entry {} cannot be read ({}); building from source",
                path.string(), "unknown error");
  }
  return std::nullopt;
}

void BinaryCache::store(const std::string& key,
                        const std::vector<unsigned char>& binary) const noexcept {
  if (!enabled_ || key.size() != kKeyBytes || binary.empty()) return;
  std::filesystem::path final_path;
  try {
    final_path = path_for(key);
    write_entry(directory_, final_path, key, binary);
  } catch (const std::exception& error) {
    report_once(write_warned, "cannot store the kernel cache entry {} ({}); continuing without it",
                final_path.string(), error.what());
  } catch (...) {
    report_once(write_warned, "cannot store the kernel cache entry {} ({}); continuing without it",
                final_path.string(), "unknown error");
  }
}

}  // namespace aethercl
