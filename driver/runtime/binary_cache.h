// On-disk cache of built program binaries. Entries are self-checking: a truncated or corrupt file
// is ignored (and deleted) so the program is rebuilt from source. The cache is an optimisation,
// never a point of failure: an entry that cannot be read (a directory, FIFO or device by that
// name, an I/O error) is a miss, and a failed write is skipped; the first read failure and the
// first write failure of the process are logged as warnings, later ones at debug level.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace aethercl {

class BinaryCache {
 public:
  // Location: AETHERCL_CACHE_DIR, else $XDG_CACHE_HOME/aethercl, else ~/.cache/aethercl.
  // AETHERCL_CACHE=0 disables it.
  static BinaryCache from_environment();
  // That location (AETHERCL_CACHE does not matter), or nullopt when none of the variables is set.
  static std::optional<std::filesystem::path> default_directory();
  BinaryCache(std::filesystem::path directory, bool enabled);

  bool enabled() const { return enabled_; }
  const std::filesystem::path& directory() const { return directory_; }

  // The payload of a valid entry; nullopt for a miss, whatever went wrong. Never blocks on a
  // FIFO, never reads more than kMaxEntryBytes.
  std::optional<std::vector<unsigned char>> load(const std::string& key) const noexcept;
  // Best effort: a cache that cannot be written is logged and otherwise ignored.
  void store(const std::string& key, const std::vector<unsigned char>& binary) const noexcept;

  // Larger files are not read (no program binary comes near it).
  static constexpr std::uint64_t kMaxEntryBytes = 256ull << 20;
  std::filesystem::path path_for(const std::string& key) const;

 private:
  std::filesystem::path directory_;
  bool enabled_;
};

}  // namespace aethercl
