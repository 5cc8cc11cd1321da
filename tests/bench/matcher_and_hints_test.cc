// Unit tests of two pieces the workloads stand on: the approximate matcher (against a plain
// dynamic-programming edit distance) and the manual-hint window (against a recording stand-in
// for the tipfs ioctls, decoding the exact bytes a mount would receive).
#include <gtest/gtest.h>
#include <tipfs/hint.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "bench/workloads/approximate_matcher.h"
#include "bench/workloads/bench_common.h"
#include "bench/workloads/hint_window.h"

namespace tipfs::bench {
namespace {

// Sellers' algorithm: the least edit distance between the pattern and any substring of text.
int BestSubstringDistance(const std::string& pattern, const std::string& text) {
  const size_t m = pattern.size();
  std::vector<int> column(m + 1);
  for (size_t i = 0; i <= m; ++i) column[i] = static_cast<int>(i);
  int best = column[m];
  for (char c : text) {
    int diagonal = column[0];  // D[i-1][j-1]
    column[0] = 0;             // a match may start anywhere
    for (size_t i = 1; i <= m; ++i) {
      int up = column[i];  // D[i][j-1]
      column[i] =
          std::min({column[i] + 1, column[i - 1] + 1, diagonal + (pattern[i - 1] == c ? 0 : 1)});
      diagonal = up;
    }
    best = std::min(best, column[m]);
  }
  return best;
}

TEST(ApproximateMatcherTest, AgreesWithEditDistanceOnRandomStrings) {
  Rng rng(42);
  int matches = 0;
  for (int trial = 0; trial < 30000; ++trial) {
    std::string pattern, text;
    for (uint64_t n = 1 + rng.Below(10); n > 0; --n) pattern.push_back('a' + rng.Below(3));
    for (uint64_t n = rng.Below(30); n > 0; --n) text.push_back('a' + rng.Below(3));
    int errors = static_cast<int>(rng.Below(4));
    Result<ApproximateMatcher> matcher = ApproximateMatcher::Create(pattern, errors);
    ASSERT_TRUE(matcher.ok());
    bool expected = BestSubstringDistance(pattern, text) <= errors;
    ASSERT_EQ(matcher->Matches(text), expected)
        << "pattern '" << pattern << "' text '" << text << "' k=" << errors;
    matches += expected;
  }
  EXPECT_GT(matches, 3000);  // both outcomes are exercised
  EXPECT_LT(matches, 27000);
}

TEST(ApproximateMatcherTest, FindsEditsOfALongPatternInsideALine) {
  Result<ApproximateMatcher> m = ApproximateMatcher::Create("CGXJER22GH", 2);
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->Matches("some words CGXJER22GH more"));
  EXPECT_TRUE(m->Matches("some words CGxJER2GH more"));     // substitution + deletion
  EXPECT_TRUE(m->Matches("some words CGXJqER22GaH more"));  // two insertions
  EXPECT_FALSE(m->Matches("some words CGxJEr2bGH more"));   // three substitutions
  EXPECT_FALSE(m->Matches(""));
  EXPECT_FALSE(ApproximateMatcher::Create("", 1).ok());
  EXPECT_FALSE(ApproximateMatcher::Create(std::string(64, 'a'), 1).ok());
}

// Decodes what HintWindow sends, as a tipfs mount would, and optionally refuses like one.
class RecordingMount {
 public:
  struct Hint {
    int fd;  // -1 for path hints
    std::string path;
    uint64_t offset, length;
  };

  HintWindow::IoctlCall Call() {
    return [this](int fd, unsigned long request, void* argument) {
      return Handle(fd, request, argument);
    };
  }

  int query_errno = 0;  // what TIPFS_IOC_QUERY fails with (0: answers)
  uint64_t reported_cap = 0;
  uint64_t enforced_cap = 0;  // refuse with ENOSPC past this many outstanding bytes (0: never)
  std::string refused_path;   // refuse hints naming this path with ENOENT
  int hint_errno = 0;         // fail every hint call with this errno (0: accept)

  std::vector<Hint> hints;
  std::vector<uint32_t> call_sizes;
  uint64_t outstanding = 0;
  uint64_t refusals = 0;

 private:
  int Refuse(int err) {
    ++refusals;
    errno = err;
    return -1;
  }

  int Handle(int fd, unsigned long request, void* argument) {
    if (request == TIPFS_IOC_QUERY) {
      if (query_errno != 0) return Refuse(query_errno);
      auto* query = static_cast<struct tipfs_query*>(argument);
      EXPECT_EQ(query->header.version, TIPFS_HINT_VERSION);
      query->stream_cap_bytes = reported_cap;
      return 0;
    }
    if (hint_errno != 0) return Refuse(hint_errno);
    std::vector<Hint> batch;
    const tipfs_hint_header* header = static_cast<const tipfs_hint_header*>(argument);
    EXPECT_EQ(header->version, TIPFS_HINT_VERSION);
    EXPECT_EQ(header->source, TIPFS_SOURCE_MANUAL);
    EXPECT_EQ(header->stream, TIPFS_STREAM_SELF);
    if (request == TIPFS_IOC_HINT_FD) {
      auto* request_fd = static_cast<const struct tipfs_hint_fd*>(argument);
      EXPECT_LE(header->count, TIPFS_FD_SEGMENTS_MAX);
      for (uint32_t i = 0; i < header->count; ++i) {
        batch.push_back({fd, "", request_fd->segments[i].offset, request_fd->segments[i].length});
      }
    } else if (request == TIPFS_IOC_HINT_PATHS) {
      auto* paths = static_cast<const struct tipfs_hint_paths*>(argument);
      EXPECT_LE(paths->bytes, TIPFS_PATH_RECORDS_BYTES);
      size_t at = 0;
      for (uint32_t i = 0; i < header->count; ++i) {
        struct tipfs_path_record record;
        std::memcpy(&record, paths->records + at, sizeof record);
        EXPECT_EQ(record.reserved, 0u);
        std::string path(paths->records + at + sizeof record, record.path_length);
        size_t padded = (record.path_length + 7) & ~size_t{7};
        for (size_t p = record.path_length; p < padded; ++p) {
          EXPECT_EQ(paths->records[at + sizeof record + p], 0) << "padding must be zero";
        }
        at += sizeof record + padded;
        batch.push_back({-1, path, record.offset, record.length});
      }
      EXPECT_EQ(at, paths->bytes);
    } else {
      ADD_FAILURE() << "unexpected ioctl request " << request;
      return Refuse(EINVAL);
    }
    uint64_t bytes = 0;
    for (const Hint& h : batch) {
      if (!refused_path.empty() && h.path == refused_path) return Refuse(ENOENT);
      bytes += h.length;
    }
    if (enforced_cap > 0 && outstanding + bytes > enforced_cap) return Refuse(ENOSPC);
    outstanding += bytes;
    call_sizes.push_back(header->count);
    hints.insert(hints.end(), batch.begin(), batch.end());
    return 0;
  }
};

TEST(HintWindowTest, OffTipfsTurnsItselfOffAndSendsNothingMore) {
  RecordingMount mount;
  mount.query_errno = ENOTTY;
  HintWindow window("test", 3, mount.Call());
  window.AddFd(3, 0, 4096);
  window.Disclose();
  EXPECT_FALSE(window.active());
  window.AddFd(3, 4096, 4096);
  window.Disclose();
  window.Consumed(8192);
  EXPECT_EQ(mount.refusals, 1u);  // only the query
  EXPECT_TRUE(mount.hints.empty());
}

TEST(HintWindowTest, FdSegmentsGoOutInOrderIn1020SegmentBatchesPerDescriptor) {
  RecordingMount mount;
  HintWindow window("test", 5, mount.Call());
  for (uint64_t i = 0; i < 2500; ++i) window.AddFd(5, i * 8192, 2048);
  window.AddFd(6, 0, 100);  // another descriptor: its own call
  window.Disclose();
  ASSERT_EQ(mount.call_sizes, (std::vector<uint32_t>{1020, 1020, 460, 1}));
  ASSERT_EQ(mount.hints.size(), 2501u);
  for (uint64_t i = 0; i < 2500; ++i) {
    EXPECT_EQ(mount.hints[i].fd, 5);
    EXPECT_EQ(mount.hints[i].offset, i * 8192);
    EXPECT_EQ(mount.hints[i].length, 2048u);
  }
  EXPECT_EQ(mount.hints.back().fd, 6);
}

TEST(HintWindowTest, PathRecordsArePackedAndPaddedWithinOneRequest) {
  RecordingMount mount;
  HintWindow window("test", 3, mount.Call());
  std::vector<std::string> paths;
  for (int i = 0; i < 700; ++i) {
    paths.push_back("/mnt/tipfs/dir" + std::to_string(i % 7) + "/" + std::string(i % 23, 'x') +
                    std::to_string(i));
    window.AddPath(paths.back(), i, 1000 + i);
  }
  window.Disclose();
  ASSERT_EQ(mount.hints.size(), paths.size());
  EXPECT_GT(mount.call_sizes.size(), 1u);  // 700 records do not fit 16000 bytes
  for (size_t i = 0; i < paths.size(); ++i) {
    EXPECT_EQ(mount.hints[i].path, paths[i]);
    EXPECT_EQ(mount.hints[i].offset, i);
    EXPECT_EQ(mount.hints[i].length, 1000 + i);
  }
}

TEST(HintWindowTest, StaysUnderTheReportedCapAndTopsUpAsReadsProgress) {
  RecordingMount mount;
  mount.reported_cap = 1 << 20;
  mount.enforced_cap = 1 << 20;
  HintWindow window("test", 3, mount.Call());
  const uint64_t item = 64 * 1024;
  for (int i = 0; i < 100; ++i) window.AddFd(3, i * item, item);
  window.Disclose();
  EXPECT_LE(mount.outstanding, (1u << 20) - (1u << 17));  // the 1/8 margin
  EXPECT_GT(mount.outstanding, 0u);
  for (int i = 0; i < 100; ++i) {  // the program reads item i
    ASSERT_GT(mount.hints.size(), static_cast<size_t>(i)) << "read " << i << " was not hinted";
    mount.outstanding -= item;
    window.Consumed(item);
  }
  EXPECT_EQ(mount.hints.size(), 100u);
  EXPECT_EQ(mount.refusals, 0u);
}

TEST(HintWindowTest, RetriesAfterACapRefusalWithoutLosingHints) {
  RecordingMount mount;
  mount.query_errno = EINVAL;  // an older daemon without the query: cap unknown
  mount.enforced_cap = 300 * 1024;
  HintWindow window("test", 3, mount.Call());
  const uint64_t item = 64 * 1024;
  for (int i = 0; i < 40; ++i) window.AddPath("/m/f" + std::to_string(i), 0, item);
  window.Disclose();
  for (int i = 0; i < 40; ++i) {
    ASSERT_GT(mount.hints.size(), static_cast<size_t>(i)) << "read " << i << " was not hinted";
    mount.outstanding -= item;
    window.Consumed(item);
  }
  ASSERT_EQ(mount.hints.size(), 40u);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(mount.hints[i].path, "/m/f" + std::to_string(i));
  EXPECT_GT(mount.refusals, 1u);  // the query and at least one cap refusal
  EXPECT_NE(window.Summary().find("dropped=0"), std::string::npos);
}

TEST(HintWindowTest, DropsOnlyTheHintTheFileSystemRejects) {
  RecordingMount mount;
  mount.refused_path = "/m/missing";
  HintWindow window("test", 3, mount.Call());
  window.AddPath("/m/a", 0, 10);
  window.AddPath("/m/missing", 0, 10);
  window.AddPath("/m/b", 0, 10);
  window.Disclose();
  ASSERT_EQ(mount.hints.size(), 2u);
  EXPECT_EQ(mount.hints[0].path, "/m/a");
  EXPECT_EQ(mount.hints[1].path, "/m/b");
  EXPECT_NE(window.Summary().find("dropped=1"), std::string::npos);
  EXPECT_TRUE(window.active());
}

TEST(HintWindowTest, HintCallsFailingWithEnottyAlsoTurnItOff) {
  RecordingMount mount;
  mount.hint_errno = ENOTTY;
  HintWindow window("test", 3, mount.Call());
  window.AddPath("/m/a", 0, 10);
  window.AddPath("/m/b", 0, 10);
  window.Disclose();
  EXPECT_FALSE(window.active());
  EXPECT_EQ(mount.refusals, 1u);
}

}  // namespace
}  // namespace tipfs::bench
