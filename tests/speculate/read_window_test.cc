// ReadWindow (speculate/read_window.h): the reads a program's stdio stream makes under libtipspec
// are those of a plain glibc stream: a seek into the bytes read last reads nothing, a read after a
// seek elsewhere starts at a multiple of the first read, and reads that go on grow to the capacity.
#include "speculate/read_window.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace tipfs::spec {
namespace {

constexpr size_t kFirst = 8192;
constexpr size_t kCapacity = 65536;

// A file of `size` bytes and the (offset, length) of every read the window made of it.
struct Rig {
  explicit Rig(size_t size, off64_t position = 0)
      : storage(kCapacity), window(storage.data(), kCapacity, kFirst, position) {
    for (size_t i = 0; i < size; ++i) file.push_back(static_cast<char>('a' + i * 7 % 26));
  }
  // Reads `size` bytes at the position; what came back.
  std::string Read(size_t size) {
    std::string out(size, '\0');
    const ssize_t n =
        window.Read(out.data(), size, [this](off64_t offset, char* into, size_t length) {
          reads.emplace_back(offset, length);
          if (offset >= static_cast<off64_t>(file.size())) return ssize_t{0};
          const size_t n = std::min(length, file.size() - static_cast<size_t>(offset));
          file.copy(into, n, static_cast<size_t>(offset));
          return static_cast<ssize_t>(n);
        });
    EXPECT_GE(n, 0);
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return out;
  }
  std::string Expect(size_t offset, size_t size) const { return file.substr(offset, size); }

  std::string file;
  std::vector<char> storage;
  ReadWindow window;
  std::vector<std::pair<off64_t, size_t>> reads;
};

TEST(ReadWindowTest, ASeekIntoTheLastReadReadsNothing) {
  Rig r(20000);
  r.window.Seek(100);
  EXPECT_EQ(r.Read(50), r.Expect(100, 50));
  r.window.Seek(8000);
  EXPECT_EQ(r.Read(500), r.Expect(8000, 192));  // up to the window's end
  EXPECT_EQ(r.window.position(), 8192);
  r.window.Seek(4000);
  EXPECT_EQ(r.Read(100), r.Expect(4000, 100));
  EXPECT_EQ(r.reads, (std::vector<std::pair<off64_t, size_t>>{{0, kFirst}}));
  // From the window's end the next read goes on, twice as long.
  r.window.Seek(8192);
  EXPECT_EQ(r.Read(10), r.Expect(8192, 10));
  EXPECT_EQ(r.reads, (std::vector<std::pair<off64_t, size_t>>{{0, kFirst}, {8192, 2 * kFirst}}));
}

TEST(ReadWindowTest, AReadAfterASeekElsewhereStartsAtAMultipleOfTheFirstRead) {
  Rig r(100000);
  r.window.Seek(50000);
  EXPECT_EQ(r.Read(10), r.Expect(50000, 10));
  r.window.Seek(20000);
  EXPECT_EQ(r.Read(10), r.Expect(20000, 10));
  EXPECT_EQ(r.reads, (std::vector<std::pair<off64_t, size_t>>{{49152, kFirst}, {16384, kFirst}}));
}

TEST(ReadWindowTest, ReadsThatGoOnDoubleUpToTheCapacityAndStopAtTheEnd) {
  Rig r(300000);
  std::string all;
  for (std::string piece = r.Read(kFirst); !piece.empty(); piece = r.Read(kFirst)) all += piece;
  EXPECT_EQ(all, r.file);
  std::vector<size_t> lengths;
  for (const auto& [offset, length] : r.reads) lengths.push_back(length);
  EXPECT_EQ(lengths, (std::vector<size_t>{8192, 16384, 32768, 65536, 65536, 65536, 65536, 8192}))
      << "the last read, short of its 65536 bytes, found the end";
  EXPECT_EQ(r.reads.back().first, 300000) << "the read after the end starts at the end";
}

TEST(ReadWindowTest, AFailedReadReturnsMinusOneAndLeavesTheWindow) {
  Rig r(20000);
  EXPECT_EQ(r.Read(10), r.Expect(0, 10));
  r.window.Seek(12000);
  std::string out(10, '\0');
  EXPECT_EQ(
      r.window.Read(out.data(), out.size(), [](off64_t, char*, size_t) { return ssize_t{-1}; }),
      -1);
  r.window.Seek(5);
  EXPECT_EQ(r.Read(10), r.Expect(5, 10));
  EXPECT_EQ(r.reads.size(), 1u);
}

TEST(ReadWindowTest, AStreamOpenedAtAnOffsetStartsThere) {
  Rig r(20000, 9000);
  EXPECT_EQ(r.Read(10), r.Expect(9000, 10));
  EXPECT_EQ(r.reads, (std::vector<std::pair<off64_t, size_t>>{{8192, kFirst}}));
}

}  // namespace
}  // namespace tipfs::spec
