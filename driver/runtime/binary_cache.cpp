// File format: "AECLBIN1" | key (32 hex chars) | payload size (u64 LE) | payload hash (u64) |
// payload. Written to a temporary name and renamed, so readers never see a partial entry.
#include "runtime/binary_cache.h"

#include "support/env.h"
#include "support/hash.h"
#include "support/log.h"
#include "support/process.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>

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

std::optional<std::vector<unsigned char>> BinaryCache::load(const std::string& key) const {
  if (!enabled_ || key.size() != kKeyBytes) return std::nullopt;
  std::filesystem::path path = path_for(key);
  std::ifstream file(path, std::ios::binary);
  if (!file) return std::nullopt;
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(file)),
                                   std::istreambuf_iterator<char>());
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

void BinaryCache::store(const std::string& key, const std::vector<unsigned char>& binary) const {
  if (!enabled_ || key.size() != kKeyBytes || binary.empty()) return;
  std::error_code error;
  std::filesystem::create_directories(directory_, error);
  std::string header(kMagic, sizeof(kMagic));
  header += key;
  append_u64(header, binary.size());
  append_u64(header, Hasher().add(binary.data(), binary.size()).low());
  std::filesystem::path final_path = path_for(key);
  std::filesystem::path temp_path =
      directory_ / (key + ".tmp." + std::to_string(current_process_id()));
  {
    std::ofstream file(temp_path, std::ios::binary | std::ios::trunc);
    file.write(header.data(), static_cast<std::streamsize>(header.size()));
    file.write(reinterpret_cast<const char*>(binary.data()),
               static_cast<std::streamsize>(binary.size()));
    if (!file) {
      log().warn("cannot write the kernel cache entry {}; continuing without it",
                 temp_path.string());
      std::filesystem::remove(temp_path, error);
      return;
    }
  }
  std::filesystem::rename(temp_path, final_path, error);
  if (error) {
    log().warn("cannot store the kernel cache entry {}: {}", final_path.string(), error.message());
    std::filesystem::remove(temp_path, error);
  }
}

}  // namespace aethercl
