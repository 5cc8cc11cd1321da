// ReadPredictor without a child or a mount: which kept read answers a read without data, how it is
// padded, and what is kept when a site's slots are full.
#include <gtest/gtest.h>
#include <sys/uio.h>

#include <memory>
#include <string>

#include "speculate/read_predictor.h"

namespace tipfs::spec {
namespace {

constexpr uint64_t kSite = 0x1234;

class ReadPredictorTest : public ::testing::Test {
 protected:
  void Remember(uint64_t site, const std::string& bytes) {
    struct iovec iov = {const_cast<char*>(bytes.data()), bytes.size()};
    predictor_->Remember(site, 0, 0, &iov, 1, bytes.size());
  }
  // What a read of `length` bytes at `site` gets, or "(none)".
  std::string Predict(uint64_t site, size_t length) {
    std::string out(length, '?');
    struct iovec iov = {out.data(), out.size()};
    return predictor_->Fill(site, 0, 0, &iov, 1, length) ? out : "(none)";
  }
  // 2 MiB: not on the stack.
  std::unique_ptr<ReadPredictor> predictor_ = std::make_unique<ReadPredictor>();
};

TEST_F(ReadPredictorTest, TheLongestKeptReadThatFitsIsPaddedToTheLength) {
  Remember(kSite, "{\"a\": 1}");
  Remember(kSite, "{\"a\": [1, 2, 3]}");
  // Text is padded with newlines (whitespace to a JSON parser).
  EXPECT_EQ(Predict(kSite, 20), std::string("{\"a\": [1, 2, 3]}") + "\n\n\n\n");
  EXPECT_EQ(Predict(kSite, 12), std::string("{\"a\": 1}") + "\n\n\n\n");
  EXPECT_EQ(Predict(kSite, 8), "{\"a\": 1}");
  EXPECT_EQ(Predict(kSite, 7), "(none)") << "a kept read longer than the read was cut";
  EXPECT_EQ(Predict(kSite + 1, 20), "(none)") << "another site's read was used";
  EXPECT_FALSE(predictor_->CanFill(kSite, 0, 0, 0));
}

TEST_F(ReadPredictorTest, AFullSiteKeepsItsShortestReadAndDropsTheOldest) {
  Remember(kSite, std::string(10, 's'));  // the shortest, and the oldest
  for (int i = 0; i < ReadPredictor::kReadsPerSite; ++i) {
    Remember(kSite, std::string(100 + i, static_cast<char>('a' + i)));
  }
  EXPECT_EQ(Predict(kSite, 50).substr(0, 10), std::string(10, 's'))
      << "the shortest read was dropped";
  EXPECT_EQ(Predict(kSite, 100), std::string(10, 's') + std::string(90, '\n'))
      << "the oldest of the longer reads is still kept";
  EXPECT_EQ(Predict(kSite, 101), std::string(101, 'b'));
}

TEST_F(ReadPredictorTest, ANewSiteTakesTheOneRememberedLongestAgo) {
  for (int s = 1; s <= ReadPredictor::kSites; ++s) Remember(s, "site " + std::to_string(s));
  Remember(1, "site 1 again");  // site 2 is now the least recently remembered
  Remember(99, "site 99");
  EXPECT_FALSE(predictor_->Keeps(2));
  EXPECT_TRUE(predictor_->Keeps(1));
  EXPECT_TRUE(predictor_->Keeps(3));
  EXPECT_EQ(Predict(99, 7), "site 99");
  EXPECT_EQ(Predict(1, 12), "site 1 again");
}

TEST_F(ReadPredictorTest, OnlyTheFirstBytesOfALongReadAreKept) {
  Remember(kSite, std::string(ReadPredictor::kMaxBytes + 100, 'x'));
  EXPECT_EQ(Predict(kSite, ReadPredictor::kMaxBytes - 1), "(none)");
  std::string p = Predict(kSite, ReadPredictor::kMaxBytes + 100);
  EXPECT_EQ(p.substr(0, ReadPredictor::kMaxBytes), std::string(ReadPredictor::kMaxBytes, 'x'));
  EXPECT_EQ(p.substr(ReadPredictor::kMaxBytes), std::string(100, '\n'));
}

// A read of a whole file gets a whole other file kept at the site, at that file's own length:
// the longest whole one shorter than the read (so the read shows the end of the file), never a
// piece of a file, and nothing when every whole file kept is too long.
TEST_F(ReadPredictorTest, AWholeFileIsAnsweredWithTheLongestWholeFileShorterThanTheRead) {
  auto remember = [&](const std::string& bytes, bool whole) {
    struct iovec iov = {const_cast<char*>(bytes.data()), bytes.size()};
    predictor_->Remember(kSite, 0, 0, &iov, 1, bytes.size(), whole);
  };
  remember("HDR 5 abcde", true);
  remember("HDR 8 abcdefgh", true);
  remember("HDR 12 a piece of a file", false);
  std::string out(20, '?');
  struct iovec iov = {out.data(), out.size()};
  EXPECT_EQ(predictor_->WholeFits(kSite, 20), 14u);
  ASSERT_EQ(predictor_->FillWhole(kSite, &iov, 1, 20), 14u);
  EXPECT_EQ(out, "HDR 8 abcdefgh??????") << "the rest of the buffer was written";
  EXPECT_EQ(predictor_->WholeFits(kSite, 14), 11u) << "a file as long as the read would not end";
  EXPECT_EQ(predictor_->WholeFits(kSite, 11), 0u);
  EXPECT_EQ(predictor_->FillWhole(kSite, &iov, 1, 11), 0u);
  EXPECT_EQ(predictor_->WholeFits(kSite + 1, 20), 0u) << "another site's file was used";
  // The padded prediction still has every kept read to choose from.
  EXPECT_EQ(Predict(kSite, 24), "HDR 12 a piece of a file");
}

TEST_F(ReadPredictorTest, AFileLongerThanWhatIsKeptIsNoWholeFile) {
  const std::string big(ReadPredictor::kMaxBytes + 1, 'x');
  struct iovec iov = {const_cast<char*>(big.data()), big.size()};
  predictor_->Remember(kSite, 0, 0, &iov, 1, big.size(), /*whole=*/true);
  EXPECT_EQ(predictor_->WholeFits(kSite, big.size() + 1), 0u);
}

// Binary is repeated, not padded with zeros: a table of fixed-size records read at this site
// stays a table of the kept read's records (a linker's relocations, whose zero entries name symbol
// 0 and are rejected). A read kept only in part (longer than kMaxBytes) is padded with zeros: its
// records' size is not known.
TEST_F(ReadPredictorTest, BinaryIsRepeatedToTheLengthAcrossSeveralBuffers) {
  Remember(kSite, std::string("R1\0\x02", 4));
  char a[3];
  char b[7];
  struct iovec iov[2] = {{a, sizeof(a)}, {b, sizeof(b)}};
  ASSERT_TRUE(predictor_->Fill(kSite, 0, 0, iov, 2, 10));
  EXPECT_EQ(std::string(a, 3) + std::string(b, 7), std::string("R1\0\x02R1\0\x02R1", 10));
  const std::string big = std::string(1, '\0') + std::string(ReadPredictor::kMaxBytes + 9, 'x');
  Remember(kSite + 1, big);
  std::string p = Predict(kSite + 1, ReadPredictor::kMaxBytes + 10);
  EXPECT_EQ(p.substr(ReadPredictor::kMaxBytes), std::string(10, '\0'));
}

// One site may read several kinds of table from each file in turn (a linker's relocations for
// .text, .data and .debug, from one call): the n-th read of a file there is answered only with a
// kept n-th read, whose records point where the n-th table's do. Reads past kOrdinals - 1 share
// the last ordinal.
TEST_F(ReadPredictorTest, AReadIsAnsweredOnlyWithAKeptReadOfItsOrdinal) {
  auto remember = [&](uint32_t ordinal, const std::string& bytes) {
    struct iovec iov = {const_cast<char*>(bytes.data()), bytes.size()};
    predictor_->Remember(kSite, ordinal, 0, &iov, 1, bytes.size());
  };
  auto predict = [&](uint32_t ordinal, size_t length) {
    std::string out(length, '?');
    struct iovec iov = {out.data(), out.size()};
    return predictor_->Fill(kSite, ordinal, 0, &iov, 1, length) ? out : "(none)";
  };
  remember(0, "first table, 0\n");
  remember(1, "second, 1\n");
  EXPECT_EQ(predict(1, 15), "second, 1\n\n\n\n\n\n")
      << "the longer kept read of ordinal 0 was used";
  EXPECT_EQ(predict(0, 15), "first table, 0\n");
  EXPECT_EQ(predict(0, 12), "(none)") << "a kept read of another ordinal stood in";
  EXPECT_FALSE(predictor_->CanFill(kSite, 2, 0, 100));
  remember(7, "later\n");
  EXPECT_EQ(predict(ReadPredictor::kOrdinals - 1, 6), "later\n");
  EXPECT_EQ(predict(ReadPredictor::kOrdinals + 5, 6), "later\n");
}

// When the slots are full, the shortest read of each ordinal stays (it fits the most reads of
// that ordinal), and the oldest of the others makes room.
TEST_F(ReadPredictorTest, AFullSiteKeepsTheShortestReadOfEachOrdinal) {
  auto remember = [&](uint32_t ordinal, const std::string& bytes) {
    struct iovec iov = {const_cast<char*>(bytes.data()), bytes.size()};
    predictor_->Remember(kSite, ordinal, 0, &iov, 1, bytes.size());
  };
  remember(0, std::string(10, 'a'));  // the shortest of ordinal 0, and the oldest
  remember(1, std::string(20, 'b'));  // the shortest of ordinal 1
  for (int i = 0; i < ReadPredictor::kReadsPerSite; ++i) {
    remember(0, std::string(100 + i, static_cast<char>('c' + i)));
  }
  EXPECT_EQ(Predict(kSite, 50), std::string(10, 'a') + std::string(40, '\n'))
      << "ordinal 0's shortest read was dropped";
  EXPECT_TRUE(predictor_->CanFill(kSite, 1, 0, 50)) << "ordinal 1's only read was dropped";
  EXPECT_EQ(Predict(kSite, 101), std::string(10, 'a') + std::string(91, '\n'))
      << "the two oldest longer reads are still kept";
  EXPECT_EQ(Predict(kSite, 102), std::string(102, 'e'));
}

// A kept read stands for a read of a file no smaller than the one it came from: a smaller
// object's relocations name fewer symbols and lie within smaller sections, a larger one's may not.
// An unknown ordinal (a description the program had open at the fork) is answered by none.
TEST_F(ReadPredictorTest, AKeptReadStandsOnlyForReadsOfFilesNoSmallerThanItsOwn) {
  const std::string table("\x01\0\0\0", 4);
  struct iovec kept = {const_cast<char*>(table.data()), table.size()};
  predictor_->Remember(kSite, 0, /*file_size=*/1000, &kept, 1, table.size());
  EXPECT_FALSE(predictor_->CanFill(kSite, 0, 999, 8)) << "a larger file's read stood in";
  EXPECT_TRUE(predictor_->CanFill(kSite, 0, 1000, 8));
  EXPECT_TRUE(predictor_->CanFill(kSite, 0, 5000, 8));
  EXPECT_FALSE(predictor_->CanFill(kSite, ReadPredictor::kUnknownOrdinal, 5000, 8));
}

}  // namespace
}  // namespace tipfs::spec
