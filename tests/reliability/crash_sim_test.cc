// Simulated power loss (in the style of SQLite's test6.c): a whole tipfs FileSystem over
// CrashDisks runs a seeded random workload (create, write, truncate, rename, unlink, fsync,
// fsyncdir, unlinked-but-open files) until a crash point: the Nth write, sync, truncate or remove
// that reaches any disk. At that instant every disk freezes (every later request fails with EIO)
// and the metadata store's durable state is captured; then each CrashDisk decides what of its
// unsynced writes reached the platter (none, all, a prefix, or torn 512-byte sectors).
//
// The metadata store (RocksDB) is modelled honestly: what survives a power loss is what its
// write-ahead log had on stable storage. MetaStore::Sync (fsync, fsyncdir) makes the log durable
// up to that point; records appended after it may survive as any prefix (a torn tail included),
// because the log is an append-only file. So the crash image of the store is a copy of its
// directory at the crash instant with the newest log file cut to a random length between its
// length at the last sync and its length at the crash. (RocksDB flushes memtables to table files
// only past 16 MiB of metadata, far above what one round writes; table files and the MANIFEST it
// syncs itself.)
//
// After each crash: reopen, reclaim orphans (FileSystem::Recover) and run the object pass of an
// unclean mount (fsck::RepairObjects), as the daemon does. Then:
//   - the namespace and every size equal the model's state after some operation at or after the
//     last sync (each operation is atomic and ordered);
//   - every file fsync'ed and not modified since has exactly its fsync'ed bytes;
//   - every other file holds only zeros or its own bytes at their own offsets (never another
//     file's, never shifted);
//   - fsck finds nothing: no leaked or over-long objects, link counts right, no orphans.
// The workload then continues on the recovered volume (extending files past a hole must read
// zeros there) until the next crash.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fsck/fsck.h"
#include "stripe/crash_disk.h"
#include "tests/support/volume_rig.h"
#include "util/mutex.h"

namespace tipfs::testing {
namespace {

namespace fs_std = std::filesystem;
using fusefs::Caller;
using meta::Ino;
using meta::kRootIno;
using stripe::CrashDisk;

constexpr uint32_t kDisks = 4;
constexpr uint32_t kStripeUnit = 16 * 1024;

// ---- crash point ------------------------------------------------------------------------------

// Counts the requests that change a disk (writes, syncs, truncates, removes) on all disks; the
// one that reaches zero is the crash: it and everything after it fail with EIO.
class CrashTrigger {
 public:
  void Arm(int64_t events, std::function<void()> on_crash) {
    MutexLock lock(&mu_);
    countdown_ = events;
    fired_ = false;
    on_crash_ = std::move(on_crash);
  }
  // True when this request must fail (the disks are frozen).
  bool Event() {
    MutexLock lock(&mu_);
    if (fired_) return true;
    if (countdown_ <= 0 || --countdown_ > 0) return false;
    fired_ = true;
    if (on_crash_) on_crash_();
    return true;
  }
  bool fired() const {
    MutexLock lock(&mu_);
    return fired_;
  }

 private:
  mutable Mutex mu_;
  int64_t countdown_ GUARDED_BY(mu_) = 0;  // 0: never
  bool fired_ GUARDED_BY(mu_) = false;
  std::function<void()> on_crash_ GUARDED_BY(mu_);
};

// Disk of one boot: a CrashDisk over the MemDisk, behind the crash trigger.
class GateDisk : public stripe::Disk {
 public:
  GateDisk(MemDisk* mem, CrashTrigger* trigger)
      : crash_(std::make_unique<CrashDisk>(std::make_unique<DiskRef>(mem))), trigger_(trigger) {}

  CrashDisk* crash_disk() { return crash_.get(); }

  void Submit(stripe::DiskRequest request) override {
    if (request.kind != stripe::DiskRequest::Kind::kRead && trigger_->Event()) {
      return request.done(Frozen());
    }
    crash_->Submit(std::move(request));
  }
  Status Truncate(stripe::ObjectId object, uint64_t size) override {
    return trigger_->Event() ? Frozen() : crash_->Truncate(object, size);
  }
  Status Remove(stripe::ObjectId object) override {
    return trigger_->Event() ? Frozen() : crash_->Remove(object);
  }
  Result<stripe::ObjectInfo> Stat(stripe::ObjectId object) override { return crash_->Stat(object); }
  Status ListObjects(std::vector<stripe::ObjectId>* out) override {
    return crash_->ListObjects(out);
  }
  Result<stripe::DiskUsage> Usage() override { return crash_->Usage(); }
  Status SyncAll() override { return trigger_->Event() ? Frozen() : crash_->SyncAll(); }
  std::string name() const override { return crash_->name(); }

 private:
  static Status Frozen() { return Status::IOError("simulated power loss"); }
  std::unique_ptr<CrashDisk> crash_;
  CrashTrigger* trigger_;
};

// ---- the metadata store's durable state -------------------------------------------------------

struct LogPosition {
  std::string file;  // newest write-ahead log (*.log)
  uint64_t length = 0;
};

LogPosition NewestLog(const std::string& dir) {
  LogPosition newest;
  uint64_t number = 0;
  for (const auto& entry : fs_std::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 5 || name.substr(name.size() - 4) != ".log") continue;
    const uint64_t n = std::stoull(name.substr(0, name.size() - 4));
    if (newest.file.empty() || n > number) {
      number = n;
      newest.file = name;
      newest.length = entry.file_size();
    }
  }
  return newest;
}

// The store directory's files (but the write-ahead logs) with their sizes.
std::map<std::string, uint64_t> StoreFiles(const std::string& dir) {
  std::map<std::string, uint64_t> files;
  std::error_code ec;
  for (const auto& entry : fs_std::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 4 && name.substr(name.size() - 4) == ".log") continue;
    std::error_code size_ec;
    const uint64_t size = entry.file_size(size_ec);
    if (!size_ec) files[name] = size;
  }
  return files;
}

// Copies the store directory as a power loss at this instant would leave it (see the file
// comment). RocksDB's background threads may flush or compact meanwhile; a copy during which any
// file but the log changed is made again. Returns how many unsynced log bytes survived.
uint64_t CaptureStoreImage(const std::string& dir, const std::string& image,
                           const LogPosition& synced, std::mt19937_64* rng) {
  const LogPosition now = NewestLog(dir);
  const uint64_t durable = now.file == synced.file ? synced.length : 0;
  const uint64_t keep =
      durable + (now.length > durable ? (*rng)() % (now.length - durable + 1) : 0);
  for (int attempt = 0;; ++attempt) {
    fs_std::remove_all(image);
    fs_std::create_directories(image);
    const std::map<std::string, uint64_t> before = StoreFiles(dir);
    bool complete = true;
    for (const auto& entry : fs_std::directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      const std::string name = entry.path().filename().string();
      std::error_code ec;
      fs_std::copy_file(entry.path(), image + "/" + name, ec);
      complete &= !ec;
      if (name == now.file) fs_std::resize_file(image + "/" + name, keep);
    }
    if (complete && StoreFiles(dir) == before) break;
    if (attempt == 100) {
      ADD_FAILURE() << "the store kept changing while it was copied";
      break;
    }
  }
  return keep - durable;
}

// ---- the model --------------------------------------------------------------------------------

// Every 8-byte word a file ever holds names the file, a write generation and its own position,
// so any byte found anywhere can be told apart: this file's or another's, in place or shifted.
uint64_t WordOf(Ino ino, uint32_t generation, uint64_t index) {
  return 0xA500000000000000ull | ((ino & 0xFFFFF) << 36) | (uint64_t{generation & 0xFFF} << 24) |
         (index & 0xFFFFFF);
}
bool IsOwnWord(uint64_t word, Ino ino, uint64_t index) {
  return word == 0 || ((word >> 56) == 0xA5 && ((word >> 36) & 0xFFFFF) == (ino & 0xFFFFF) &&
                       (word & 0xFFFFFF) == (index & 0xFFFFFF));
}

// What a crash must preserve of the namespace: every name and the size of what it names.
struct Snapshot {
  std::map<std::string, Ino> names;
  std::map<Ino, uint64_t> sizes;
  bool operator==(const Snapshot& o) const { return names == o.names && sizes == o.sizes; }
  std::string ToString() const {
    std::string out;
    for (const auto& [name, ino] : names) {
      out += name + "=" + std::to_string(ino) + ":" + std::to_string(sizes.at(ino)) + " ";
    }
    return out;
  }
};

struct FileModel {
  std::string data;     // the file's bytes as the file system last acknowledged them
  bool strict = false;  // fsync'ed, and not changed since
  std::string durable;  // the bytes at that fsync
};

struct Model {
  std::map<std::string, Ino> names;
  std::map<Ino, FileModel> files;  // linked files and open unlinked ones
  std::vector<Ino> open_unlinked;

  Snapshot Snap() const {
    Snapshot s;
    s.names = names;
    for (const auto& [name, ino] : names) s.sizes[ino] = files.at(ino).data.size();
    return s;
  }
  bool Linked(Ino ino) const {
    for (const auto& [name, i] : names) {
      if (i == ino) return true;
    }
    return false;
  }
  void DropIfGone(Ino ino) {
    if (Linked(ino)) return;
    for (Ino open : open_unlinked) {
      if (open == ino) return;
    }
    files.erase(ino);
  }
};

// ---- the test ---------------------------------------------------------------------------------

class CrashSimulation {
 public:
  explicit CrashSimulation(uint64_t seed) : rng_(seed), seed_(seed) {
    meta::MetaStoreOptions options;
    options.after_sync = [this] {
      // A sync after the crash instant never happened: the power was gone.
      if (trigger_.fired()) return;
      synced_ = NewestLog(rig_.meta_path());
      synced_in_op_ = true;
    };
    // Every boot after the first follows a power loss: the log may end in a torn record.
    options.after_unclean_shutdown = true;
    rig_.set_store_options(std::move(options));
  }

  void Run(int rounds) {
    ASSERT_TRUE(Boot().ok());
    // The tree's directories exist (and are durable) before the first crash.
    ASSERT_TRUE(fs()->MakeNode(Caller{}, kRootIno, "d0", S_IFDIR | 0755, 0).ok());
    ASSERT_TRUE(fs()->SyncAll().ok());
    MarkSynced();
    for (int round = 0; round < rounds && !::testing::Test::HasFailure(); ++round) {
      RunUntilCrash(round);
      CrashAndReboot();
      Verify(round);
    }
    rig_.Close();
  }

  uint64_t crashes() const { return crashes_; }
  uint64_t ops() const { return ops_; }
  uint64_t unsynced_log_bytes_kept() const { return unsynced_log_bytes_kept_; }

 private:
  fusefs::FileSystem* fs() { return rig_.fs(); }

  Status Boot() {
    gates_.clear();
    Status st = rig_.Open([this](MemDisk* mem, uint32_t) {
      auto gate = std::make_unique<GateDisk>(mem, &trigger_);
      gates_.push_back(gate.get());
      return gate;
    });
    if (!st.ok()) return st;
    synced_ = NewestLog(rig_.meta_path());  // opening flushed what the log held
    TIPFS_RETURN_IF_ERROR(fs()->Recover());
    fsck::CheckResult objects = fsck::RepairObjects(rig_.volume(), rig_.meta());
    if (!objects.error.ok()) return objects.error;
    for (const fsck::Problem& p : objects.problems) {
      if (!p.repaired) return Status::Corruption("object repair failed: " + p.Line());
    }
    repaired_objects_ += objects.problems.size();
    return Status::OK();
  }

  // The model's current state is durable: no earlier state can come back.
  void MarkSynced() {
    trace_.clear();
    history_.clear();
    history_.push_back(model_.Snap());
    synced_in_op_ = false;
  }

  std::string PickName() {
    static const char* kNames[] = {"f0", "f1", "f2", "f3", "f4", "f5", "d0/f0", "d0/f1", "d0/f2"};
    return kNames[rng_() % (sizeof(kNames) / sizeof(kNames[0]))];
  }
  std::optional<std::string> PickExisting() {
    if (model_.names.empty()) return std::nullopt;
    auto it = model_.names.begin();
    std::advance(it, rng_() % model_.names.size());
    return it->first;
  }
  Result<std::pair<Ino, std::string>> Split(const std::string& path) {
    if (path.rfind("d0/", 0) != 0) return std::make_pair(kRootIno, path);
    auto dir = fs()->Lookup(kRootIno, "d0");
    if (!dir.ok()) return dir.status();
    return std::make_pair(dir->ino, path.substr(3));
  }
  uint64_t Aligned(uint64_t limit) { return (rng_() % (limit / 8 + 1)) * 8; }

  // One random operation. Returns false once the crash has happened (the operation failed).
  bool Step() {
    if (trigger_.fired()) return false;
    Model next = model_;
    Status st;
    const int dice = static_cast<int>(rng_() % 100);
    if (dice < 10) {  // create
      const std::string path = PickName();
      if (model_.names.count(path) != 0) return true;
      auto where = Split(path);
      if (!where.ok()) return Fail(where.status());
      auto opened = fs()->Create(Caller{}, where->first, where->second, 0644, O_RDWR);
      if (!opened.ok()) return Fail(opened.status());
      trace_.push_back("create " + path + "=" + std::to_string(opened->inode.ino));
      (void)fs()->Release(opened->inode.ino);
      next.names[path] = opened->inode.ino;
      next.files[opened->inode.ino] = FileModel{};
    } else if (dice < 40) {  // write, possibly past the end (a hole)
      auto path = PickExisting();
      if (!path) return true;
      const Ino ino = model_.names.at(*path);
      FileModel& f = next.files[ino];
      const uint64_t offset = Aligned(f.data.size() + 96 * 1024);
      const uint64_t length = 8 + Aligned(120 * 1024);
      const uint32_t generation = ++generation_;
      std::string bytes(length, '\0');
      for (uint64_t i = 0; i < length / 8; ++i) {
        const uint64_t word = WordOf(ino, generation, offset / 8 + i);
        std::memcpy(bytes.data() + i * 8, &word, 8);
      }
      if (f.data.size() < offset + length) f.data.resize(offset + length, '\0');
      f.data.replace(offset, length, bytes);
      f.strict = false;
      auto opened = fs()->Open(ino, O_RDWR);
      if (!opened.ok()) return Fail(opened.status());
      trace_.push_back("write " + *path + " [" + std::to_string(offset) + "," +
                       std::to_string(offset + length) + ")");
      auto n = fs()->Write(ino, offset, bytes.data(), bytes.size());
      (void)fs()->Release(ino);
      if (!n.ok()) return Crashed(next, n.status());
    } else if (dice < 50) {  // truncate, down or up
      auto path = PickExisting();
      if (!path) return true;
      const Ino ino = model_.names.at(*path);
      FileModel& f = next.files[ino];
      const uint64_t size = Aligned(f.data.size() + 64 * 1024);
      f.data.resize(size, '\0');
      f.strict = false;
      meta::AttrChange change;
      change.size = size;
      change.now = meta::Time::Now();
      trace_.push_back("truncate " + *path + " " + std::to_string(size));
      auto r = fs()->SetAttr(ino, change);
      if (!r.ok()) return Crashed(next, r.status());
    } else if (dice < 60) {  // rename, maybe over an existing name
      auto from = PickExisting();
      const std::string to = PickName();
      if (!from || *from == to) return true;
      const Ino ino = model_.names.at(*from);
      std::optional<Ino> replaced;
      if (auto it = next.names.find(to); it != next.names.end()) replaced = it->second;
      next.names.erase(*from);
      next.names[to] = ino;
      if (replaced) next.DropIfGone(*replaced);
      auto a = Split(*from), b = Split(to);
      if (!a.ok() || !b.ok()) return Fail(a.ok() ? b.status() : a.status());
      trace_.push_back("rename " + *from + " " + to);
      st = fs()->Rename(a->first, a->second, b->first, b->second, 0);
      if (!st.ok()) return Crashed(next, st);
    } else if (dice < 68) {  // unlink
      auto path = PickExisting();
      if (!path) return true;
      const Ino ino = model_.names.at(*path);
      next.names.erase(*path);
      next.DropIfGone(ino);
      auto where = Split(*path);
      if (!where.ok()) return Fail(where.status());
      trace_.push_back("unlink " + *path);
      st = fs()->Unlink(where->first, where->second);
      if (!st.ok()) return Crashed(next, st);
    } else if (dice < 83) {  // fsync one file: its data, and all metadata
      auto path = PickExisting();
      if (!path) return true;
      const Ino ino = model_.names.at(*path);
      auto opened = fs()->Open(ino, O_RDWR);
      if (!opened.ok()) return Fail(opened.status());
      trace_.push_back("fsync " + *path);
      st = fs()->Fsync(ino, rng_() & 1);
      (void)fs()->Release(ino);
      if (!st.ok() || trigger_.fired()) return Crashed(next, st);
      FileModel& f = next.files[ino];
      f.strict = true;
      f.durable = f.data;
      model_ = std::move(next);
      MarkSynced();
      ++ops_;
      return true;
    } else if (dice < 88) {  // fsyncdir: metadata only
      trace_.push_back("fsyncdir");
      st = fs()->SyncAll();
      if (!st.ok() || trigger_.fired()) return Crashed(next, st);
      model_ = std::move(next);
      MarkSynced();
      ++ops_;
      return true;
    } else if (dice < 94) {  // a file unlinked while open, written after the unlink
      if (model_.open_unlinked.size() >= 3) return true;
      const std::string name = "tmp" + std::to_string(++tmp_serial_);
      auto opened = fs()->Create(Caller{}, kRootIno, name, 0644, O_RDWR);
      if (!opened.ok()) return Fail(opened.status());
      const Ino ino = opened->inode.ino;
      next.files[ino] = FileModel{};
      next.names[name] = ino;
      history_.push_back(next.Snap());  // created, not yet unlinked: a state of its own
      next.names.erase(name);
      next.open_unlinked.push_back(ino);
      trace_.push_back("open+unlink " + name + "=" + std::to_string(ino));
      st = fs()->Unlink(kRootIno, name);
      if (!st.ok()) return Crashed(next, st);
      std::string bytes(40'000, '\0');
      const uint32_t generation = ++generation_;
      for (uint64_t i = 0; i < bytes.size() / 8; ++i) {
        const uint64_t word = WordOf(ino, generation, i);
        std::memcpy(bytes.data() + i * 8, &word, 8);
      }
      auto n = fs()->Write(ino, 0, bytes.data(), bytes.size());
      if (!n.ok()) return Crashed(next, n.status());
      next.files[ino].data = bytes;
    } else {  // last close of an unlinked file: its space goes
      if (model_.open_unlinked.empty()) return true;
      const Ino ino = model_.open_unlinked.back();
      next.open_unlinked.pop_back();
      next.files.erase(ino);
      trace_.push_back("last close " + std::to_string(ino));
      st = fs()->Release(ino);
      if (!st.ok()) return Crashed(next, st);
    }
    // An operation that touched no disk after the crash instant, or ignored a failed request
    // (a release): the power was gone, so it counts as interrupted.
    if (trigger_.fired()) return Crashed(next, Status::IOError("after the crash"));
    model_ = std::move(next);
    if (synced_in_op_) {
      MarkSynced();
    } else {
      history_.push_back(model_.Snap());
    }
    ++ops_;
    return true;
  }

  bool Crashed(const Model& would_be, const Status& st) {
    if (!trigger_.fired()) return Fail(st);
    trace_.push_back("CRASH");
    // The failed operation may have committed metadata before the disk froze, and some of its
    // data may have reached the disks: the files it changed are no longer exactly known.
    if (synced_in_op_) {
      // The operation synced the store after its metadata change (an unlink or a rename over a
      // file syncs before it frees the data): that change is durable.
      history_.clear();
      synced_in_op_ = false;
    }
    history_.push_back(would_be.Snap());
    for (auto& [ino, f] : model_.files) {
      auto changed = would_be.files.find(ino);
      if (changed != would_be.files.end() && !changed->second.strict) f.strict = false;
    }
    return false;
  }
  bool Fail(const Status& st) {
    if (trigger_.fired()) return false;
    ADD_FAILURE() << "seed " << seed_ << ": operation failed without a crash: " << st.ToString();
    return false;
  }

  void RunUntilCrash(int round) {
    const int64_t events = 1 + static_cast<int64_t>(rng_() % 80);
    trigger_.Arm(events, [this] {
      unsynced_log_bytes_kept_ += CaptureStoreImage(rig_.meta_path(), image_path(), synced_, &rng_);
    });
    for (int i = 0; i < 400 && Step(); ++i) {
    }
    if (!trigger_.fired()) {
      // The workload ended first: crash now, at whatever the next disk change is.
      trigger_.Arm(1, [this] {
        unsynced_log_bytes_kept_ +=
            CaptureStoreImage(rig_.meta_path(), image_path(), synced_, &rng_);
      });
      (void)trigger_.Event();
    }
    (void)round;
  }

  std::string image_path() const { return rig_.dir().Sub("crash-image"); }

  void CrashAndReboot() {
    ++crashes_;
    // Release the handles the crash interrupted (the daemon's memory is gone anyway).
    rig_.StopFileSystem();
    static const CrashDisk::CrashMode kModes[] = {
        CrashDisk::CrashMode::kDropAll, CrashDisk::CrashMode::kKeepAll,
        CrashDisk::CrashMode::kRandomPrefix, CrashDisk::CrashMode::kTear};
    for (GateDisk* gate : gates_) {
      CrashDisk::CrashOptions options;
      options.mode = kModes[rng_() % 4];
      options.seed = rng_();
      ASSERT_TRUE(gate->crash_disk()->Crash(options).ok());
    }
    rig_.Close();
    fs_std::remove_all(rig_.meta_path());
    fs_std::rename(image_path(), rig_.meta_path());
    trigger_.Arm(0, nullptr);
    Status st = Boot();
    ASSERT_TRUE(st.ok()) << "seed " << seed_ << ": reboot after a crash: " << st.ToString();
  }

  std::string ReadAll(Ino ino, uint64_t size) {
    std::string out(size, '\0');
    auto n = fs()->Read(cache::ReadContext{}, ino, 0, size, out.data());
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    out.resize(n.ok() ? *n : 0);
    return out;
  }

  static std::string FirstDifference(const std::string& got, const std::string& want) {
    for (size_t i = 0; i < std::min(got.size(), want.size()); i += 8) {
      if (got.compare(i, 8, want, i, 8) != 0) {
        uint64_t g = 0, w = 0;
        std::memcpy(&g, got.data() + i, std::min<size_t>(8, got.size() - i));
        std::memcpy(&w, want.data() + i, std::min<size_t>(8, want.size() - i));
        char text[128];
        std::snprintf(text, sizeof(text), " (first at byte %zu: %016llx, expected %016llx)", i,
                      static_cast<unsigned long long>(g), static_cast<unsigned long long>(w));
        return text;
      }
    }
    return "";
  }
  std::string Trace() const {
    std::string out;
    for (const std::string& op : trace_) out += op + "; ";
    return out;
  }

  Snapshot Recovered() {
    Snapshot s;
    auto list = [&](Ino dir, const std::string& prefix) {
      auto entries = fs()->ListDir(dir);
      EXPECT_TRUE(entries.ok()) << entries.status().ToString();
      if (!entries.ok()) return;
      for (const meta::DirEntry& e : *entries) {
        if (prefix.empty() && e.name == "d0") continue;
        s.names[prefix + e.name] = e.ino;
        auto inode = fs()->GetAttr(e.ino);
        EXPECT_TRUE(inode.ok());
        if (inode.ok()) s.sizes[e.ino] = inode->size;
      }
    };
    list(kRootIno, "");
    auto d0 = fs()->Lookup(kRootIno, "d0");
    EXPECT_TRUE(d0.ok()) << "seed " << seed_ << ": d0 lost";
    if (d0.ok()) list(d0->ino, "d0/");
    return s;
  }

  void Verify(int round) {
    if (::testing::Test::HasFailure()) return;
    const std::string where = "seed " + std::to_string(seed_) + " round " + std::to_string(round);
    const Snapshot actual = Recovered();
    bool matched = false;
    for (const Snapshot& s : history_) matched |= s == actual;
    EXPECT_TRUE(matched) << where << ": the recovered namespace is no state at or after the last "
                         << "sync.\n  recovered:   " << actual.ToString()
                         << "\n  last synced: " << history_.front().ToString()
                         << "\n  at crash:    " << history_.back().ToString();
    Model rebased;
    rebased.names = actual.names;
    for (const auto& [name, ino] : actual.names) {
      const std::string bytes = ReadAll(ino, actual.sizes.at(ino));
      auto known = model_.files.find(ino);
      if (known != model_.files.end() && known->second.strict) {
        EXPECT_TRUE(bytes == known->second.durable)
            << where << ": " << name << " (inode " << ino << ") was fsync'ed with "
            << known->second.durable.size() << " bytes and not changed since, but reads back "
            << bytes.size() << " bytes that differ" << FirstDifference(bytes, known->second.durable)
            << "\n  operations since the last sync: " << Trace();
      } else {
        for (uint64_t i = 0; i + 8 <= bytes.size(); i += 8) {
          uint64_t word;
          std::memcpy(&word, bytes.data() + i, 8);
          if (!IsOwnWord(word, ino, i / 8)) {
            ADD_FAILURE() << where << ": " << name << " (inode " << ino << ") holds a word at " << i
                          << " that is neither zero nor its own: " << std::hex << word;
            break;
          }
        }
      }
      FileModel f;
      f.data = bytes;
      f.strict = true;
      f.durable = bytes;
      rebased.files[ino] = std::move(f);
    }
    fsck::CheckOptions options;
    fsck::CheckResult check = fsck::CheckVolume(rig_.volume(), rig_.meta(), options);
    std::string lines;
    for (const fsck::Problem& p : check.problems) lines += p.Line() + "\n";
    EXPECT_EQ(check.ExitCode(), 0) << where << ": fsck after recovery:\n" << lines;
    model_ = std::move(rebased);
    // Everything the recovered volume holds is on stable storage now: the CrashDisks applied
    // what survived, and opening the store flushed what its log held.
    MarkSynced();
  }

  std::mt19937_64 rng_;
  const uint64_t seed_;
  VolumeRig rig_{kDisks, kStripeUnit};
  CrashTrigger trigger_;
  std::vector<GateDisk*> gates_;  // owned by the rig's volume
  LogPosition synced_;            // the store's log as far as it is durable
  bool synced_in_op_ = false;     // the store synced during the current operation
  Model model_;
  std::vector<Snapshot> history_;   // states from the last sync on
  std::vector<std::string> trace_;  // operations from the last sync on
  uint32_t generation_ = 0;
  uint32_t tmp_serial_ = 0;
  uint64_t crashes_ = 0, ops_ = 0, repaired_objects_ = 0, unsynced_log_bytes_kept_ = 0;
};

#ifndef TIPFS_CRASH_SEEDS
#define TIPFS_CRASH_SEEDS 30  // the long run builds with 500
#endif

TEST(CrashSimulationTest, FsyncedDataAndMetadataSurviveSimulatedPowerLoss) {
  // Durability of the store is modelled (see the file comment), so its real fsyncs prove nothing
  // here and cost milliseconds each on a disk: keep its directory in memory when possible.
  if (std::getenv("TMPDIR") == nullptr && access("/dev/shm", W_OK) == 0) {
    setenv("TMPDIR", "/dev/shm", 0);
  }
  uint64_t crashes = 0, ops = 0, kept = 0;
  const char* env_seeds = std::getenv("TIPFS_CRASH_SEEDS");
  const uint64_t seeds =
      env_seeds != nullptr ? std::strtoull(env_seeds, nullptr, 10) : uint64_t{TIPFS_CRASH_SEEDS};
  for (uint64_t seed = 1; seed <= seeds && !::testing::Test::HasFailure(); ++seed) {
    CrashSimulation sim(seed);
    sim.Run(/*rounds=*/6);
    crashes += sim.crashes();
    ops += sim.ops();
    kept += sim.unsynced_log_bytes_kept();
  }
  std::printf("%llu simulated crashes after %llu operations; %llu unsynced log bytes survived\n",
              static_cast<unsigned long long>(crashes), static_cast<unsigned long long>(ops),
              static_cast<unsigned long long>(kept));
  EXPECT_GT(kept, 0u);  // the store's torn-tail case was exercised
}

}  // namespace
}  // namespace tipfs::testing
