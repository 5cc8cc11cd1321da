// Disk model specs: every documented form parses to the right numbers, prints back canonically,
// and each class of bad input is refused with a one-line message naming it.
#include "stripe/emulation/disk_model_config.h"

#include <gtest/gtest.h>

#include <string>

#include "util/clock.h"

namespace tipfs::stripe {
namespace {

constexpr int64_t kMs = kNanosPerMilli;
constexpr int64_t kUs = kNanosPerMicro;

DiskModelConfig Parse(const std::string& spec) {
  Result<DiskModelConfig> c = ParseDiskModelSpec(spec);
  EXPECT_TRUE(c.ok()) << spec << ": " << c.status().ToString();
  return c.ok() ? *c : DiskModelConfig{};
}

TEST(DiskModelSpecTest, ProfilesCarryTheirDocumentedNumbers) {
  EXPECT_EQ(DiskProfileNames(),
            (std::vector<std::string_view>{"hp-c2247", "hdd", "ssd", "nvme", "none"}));
  DiskModelConfig paper = Parse("hp-c2247");
  EXPECT_EQ(paper.PositioningNanos(), 10 * kMs + 5'555'556);  // about 15 ms, as the paper says
  EXPECT_EQ(paper.bandwidth, 3.5e6);
  EXPECT_EQ(paper.queue, QueuePolicy::kClook);
  DiskModelConfig hdd = Parse("hdd");
  EXPECT_EQ(hdd.PositioningNanos(), 8'500'000 + 4'166'667);
  EXPECT_EQ(hdd.bandwidth, 180e6);
  DiskModelConfig ssd = Parse("ssd");
  EXPECT_EQ(ssd.PositioningNanos(), 90 * kUs);
  EXPECT_EQ(ssd.bandwidth, 560e6);
  DiskModelConfig nvme = Parse("nvme");
  EXPECT_EQ(nvme.PositioningNanos(), 20 * kUs);
  EXPECT_EQ(nvme.bandwidth, 3e9);
  DiskModelConfig none = Parse("none");
  EXPECT_FALSE(none.ModelsService());
  EXPECT_TRUE(hdd.ModelsService());
  for (const DiskModelConfig& c : {paper, hdd, ssd, nvme, none}) {
    EXPECT_EQ(c.latency_ns, 0);
    EXPECT_EQ(c.overhead_ns, 0);
    EXPECT_EQ(c.gap_ns, 0);
    EXPECT_EQ(c.slowdown, 1.0);
    EXPECT_TRUE(c.demand_first);
  }
}

TEST(DiskModelSpecTest, AcceptsEveryDocumentedForm) {
  DiskModelConfig c =
      Parse("hdd,L=2ms,o=50us,g=1.5ms,G=25ns,slowdown=2,queue=fifo,demand_first=off");
  EXPECT_EQ(c.profile, "hdd");
  EXPECT_EQ(c.latency_ns, 2 * kMs);
  EXPECT_EQ(c.overhead_ns, 50 * kUs);
  EXPECT_EQ(c.gap_ns, 1500 * kUs);
  EXPECT_EQ(c.bandwidth, 40e6);
  EXPECT_EQ(c.PerByteNanos(), 25.0);
  EXPECT_EQ(c.slowdown, 2.0);
  EXPECT_EQ(c.queue, QueuePolicy::kFifo);
  EXPECT_FALSE(c.demand_first);

  // G per byte, with or without "/B", is the same knob as a bandwidth.
  EXPECT_EQ(Parse("hdd,G=25ns/B").bandwidth, 40e6);
  EXPECT_EQ(Parse("hdd,bw=40MB/s").bandwidth, 40e6);
  EXPECT_EQ(Parse("hdd,bw=40MiB/s").bandwidth, 40.0 * 1024 * 1024);
  EXPECT_EQ(Parse("hdd,bw=512KiB/s").bandwidth, 512.0 * 1024);
  EXPECT_EQ(Parse("hdd,bw=2.5GB/s").bandwidth, 2.5e9);
  EXPECT_EQ(Parse("hdd,bw=800kB/s").bandwidth, 800e3);
  EXPECT_EQ(Parse("hdd,bw=800KB/s").bandwidth, 800e3);
  EXPECT_EQ(Parse("hdd,bw=20000B/s").bandwidth, 20000);
  EXPECT_EQ(Parse("hdd,G=0").bandwidth, 0);
  EXPECT_EQ(Parse("hdd,G=2us").TransferNanos(4000), 8 * kMs);

  // Every time unit, fractions, exponents, a bare zero, the micro sign.
  EXPECT_EQ(Parse("none,L=7ns").latency_ns, 7);
  EXPECT_EQ(Parse("none,L=7us").latency_ns, 7 * kUs);
  EXPECT_EQ(Parse("none,L=7\xC2\xB5s").latency_ns, 7 * kUs);
  EXPECT_EQ(Parse("none,L=0.25s").latency_ns, 250 * kMs);
  EXPECT_EQ(Parse("none,L=1e3us").latency_ns, kMs);
  EXPECT_EQ(Parse("none,L=0").latency_ns, 0);
  EXPECT_EQ(Parse("none,slowdown=2.5x").slowdown, 2.5);
  EXPECT_EQ(Parse("none,slowdown=0.5").slowdown, 0.5);

  // Mechanism overrides.
  EXPECT_EQ(Parse("hdd,access=15ms").PositioningNanos(), 15 * kMs);
  EXPECT_EQ(Parse("hdd,seek=5ms,rpm=10000").PositioningNanos(), 5 * kMs + 3 * kMs);
  EXPECT_EQ(Parse("ssd,seek=1ms").PositioningNanos(), kMs);  // replaces the SSD's access time
  EXPECT_EQ(Parse("hdd,rpm=0").PositioningNanos(), 8'500'000);
  EXPECT_EQ(Parse("hdd,queue=clook").queue, QueuePolicy::kClook);
  EXPECT_EQ(Parse("ssd,queue=clook").queue, QueuePolicy::kClook);

  // Spaces around items, keys and values are ignored.
  EXPECT_EQ(Parse(" hdd , L = 2ms ").latency_ns, 2 * kMs);
}

TEST(DiskModelSpecTest, PrintsBackCanonically) {
  EXPECT_EQ(DiskModelSpec(Parse("hdd")), "hdd");
  EXPECT_EQ(DiskModelSpec(Parse("hdd,slowdown=2,L=2000us,G=25ns")),
            "hdd,bw=40MB/s,L=2ms,slowdown=2");
  EXPECT_EQ(DiskModelSpec(Parse("ssd,o=1.5us,g=0.25s,queue=clook,demand_first=off")),
            "ssd,o=1.5us,g=250ms,queue=clook,demand_first=off");
  EXPECT_EQ(DiskModelSpec(Parse("hp-c2247,access=20ms")), "hp-c2247,access=20ms");
  EXPECT_EQ(DiskModelSpec(Parse("ssd,seek=1ms")), "ssd,seek=1ms,rpm=0");
  EXPECT_EQ(DiskModelSpec(Parse("hdd,G=0")), "hdd,G=0");
  for (const char* spec :
       {"hp-c2247", "hdd,access=15ms,bw=40MiB/s", "ssd,seek=1ms,rpm=5400", "nvme,G=0.3ns",
        "none,slowdown=3", "hdd,L=1.234567ms,o=3ns,g=17us,bw=123.456kB/s", "hdd,bw=20000B/s",
        "hdd,seek=9ms,rpm=7199.5,queue=fifo"}) {
    DiskModelConfig c = Parse(spec);
    Result<DiskModelConfig> back = ParseDiskModelSpec(DiskModelSpec(c));
    ASSERT_TRUE(back.ok()) << spec << " -> " << DiskModelSpec(c);
    EXPECT_EQ(*back, c) << spec << " -> " << DiskModelSpec(c);
  }
}

TEST(DiskModelSpecTest, FormatsDurationsInTheLargestExactUnit) {
  EXPECT_EQ(FormatDuration(0), "0");
  EXPECT_EQ(FormatDuration(1), "1ns");
  EXPECT_EQ(FormatDuration(1500), "1.5us");
  EXPECT_EQ(FormatDuration(2'500'000), "2.5ms");
  EXPECT_EQ(FormatDuration(90 * kUs), "90us");
  EXPECT_EQ(FormatDuration(10 * kNanosPerSecond), "10s");
}

TEST(DiskModelSpecTest, DescribesTheModelForPeople) {
  std::string hdd = DescribeDiskModel(Parse("hdd,L=2ms"));
  EXPECT_NE(hdd.find("random access 12.7 ms"), std::string::npos) << hdd;
  EXPECT_NE(hdd.find("7200 rpm"), std::string::npos) << hdd;
  EXPECT_NE(hdd.find("180 MB/s"), std::string::npos) << hdd;
  EXPECT_NE(hdd.find("L 2 ms"), std::string::npos) << hdd;
  EXPECT_NE(DescribeDiskModel(Parse("none")).find("real timing"), std::string::npos);
}

struct BadSpec {
  const char* spec;
  const char* message;  // the whole expected message
};

class DiskModelSpecErrorTest : public ::testing::TestWithParam<BadSpec> {};

TEST_P(DiskModelSpecErrorTest, RefusedWithOneLineNamingTheProblem) {
  Result<DiskModelConfig> c = ParseDiskModelSpec(GetParam().spec);
  ASSERT_FALSE(c.ok()) << GetParam().spec;
  EXPECT_EQ(c.error(), EINVAL);
  EXPECT_EQ(c.status().message(), GetParam().message);
  EXPECT_EQ(c.status().message().find('\n'), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    EveryClass, DiskModelSpecErrorTest,
    ::testing::Values(
        BadSpec{"floppy",
                "unknown disk profile 'floppy' (accepted: hp-c2247, hdd, ssd, nvme, none)"},
        BadSpec{"",
                "disk model '': empty item; expected PROFILE[,key=value...] with PROFILE one "
                "of hp-c2247, hdd, ssd, nvme, none"},
        BadSpec{"hdd,,L=1ms",
                "disk model 'hdd,,L=1ms': empty item; expected "
                "PROFILE[,key=value...] with PROFILE one of hp-c2247, hdd, ssd, "
                "nvme, none"},
        BadSpec{"L=1ms",
                "disk model 'L=1ms': must start with a profile (hp-c2247, hdd, ssd, "
                "nvme, none)"},
        BadSpec{"hdd,foo=1",
                "foo=1: unknown key 'foo' (accepted: access, seek, rpm, bw, G, L, "
                "o, g, slowdown, queue, demand_first, hold)"},
        BadSpec{"hdd,fast",
                "fast: expected key=value (keys: access, seek, rpm, bw, G, L, o, g, "
                "slowdown, queue, demand_first, hold)"},
        BadSpec{"hdd,L=", "L=: missing value"},
        BadSpec{"hdd,L=2", "L=2: missing unit (accepted: ns, us, ms, s)"},
        BadSpec{"hdd,L=2xs", "L=2xs: unknown unit 'xs' (accepted: ns, us, ms, s)"},
        BadSpec{"hdd,o=abc",
                "o=abc: not a number; expected a time such as 2ms (units: ns, us, ms, s)"},
        BadSpec{"hdd,g=nanms",
                "g=nanms: not a number; expected a time such as 2ms (units: ns, us, ms, s)"},
        BadSpec{"hdd,L=-1ms",
                "L=-1ms: negative; expected a time such as 2ms (units: ns, us, ms, s)"},
        BadSpec{"hdd,L=11s", "L=11s: too large (at most 10s per request)"},
        BadSpec{"hdd,access=1e6s", "access=1e6s: too large (at most 10s per request)"},
        BadSpec{"hdd,G=1ms", "G=1ms: too large (at most 100us per byte)"},
        BadSpec{"hdd,G=25", "G=25: missing unit (accepted: ns, us, ms, s)"},
        BadSpec{"hdd,bw=40",
                "bw=40: missing unit (accepted: B/s, kB/s, KB/s, MB/s, GB/s, KiB/s, "
                "MiB/s, GiB/s)"},
        BadSpec{"hdd,bw=40Mbit/s",
                "bw=40Mbit/s: unknown unit 'Mbit/s' (accepted: B/s, kB/s, "
                "KB/s, MB/s, GB/s, KiB/s, MiB/s, GiB/s)"},
        BadSpec{"hdd,bw=0MB/s", "bw=0MB/s: too small (at least 10kB/s; G=0 for no cost)"},
        BadSpec{"hdd,bw=-5MB/s",
                "bw=-5MB/s: negative; expected a rate such as 40MB/s "
                "(accepted: B/s, kB/s, KB/s, MB/s, GB/s, KiB/s, MiB/s, GiB/s)"},
        BadSpec{"hdd,bw=5TB/s",
                "bw=5TB/s: unknown unit 'TB/s' (accepted: B/s, kB/s, KB/s, MB/s, "
                "GB/s, KiB/s, MiB/s, GiB/s)"},
        BadSpec{"hdd,bw=5000GB/s", "bw=5000GB/s: too large (at most 1000GB/s)"},
        BadSpec{"hdd,slowdown=5000", "slowdown=5000: too large; expected 0 < K <= 1000"},
        BadSpec{"hdd,slowdown=0", "slowdown=0: must be positive; expected 0 < K <= 1000"},
        BadSpec{"hdd,slowdown=-2", "slowdown=-2: must be positive; expected 0 < K <= 1000"},
        BadSpec{"hdd,slowdown=fast",
                "slowdown=fast: not a number; expected a factor K with 0 < K <= 1000"},
        BadSpec{"hdd,rpm=500", "rpm=500: out of range; expected 0 (solid state) or 1000 to 30000"},
        BadSpec{"hdd,queue=sstf", "queue=sstf: unknown queue policy (accepted: fifo, clook)"},
        BadSpec{"hdd,demand_first=maybe", "demand_first=maybe: expected on or off"},
        BadSpec{"hdd,L=1ms,L=2ms", "L=2ms: L given twice"},
        BadSpec{"hdd,seek=5ms,access=9ms", "access=9ms: give either access or seek/rpm, not both"},
        BadSpec{"hdd,access=9ms,rpm=5400", "rpm=5400: give either access or seek/rpm, not both"},
        BadSpec{"hdd,bw=40MB/s,G=25ns",
                "G=25ns: bw and G are the same knob (G = 1/bw); give one"}));

TEST(DiskModelSpecTest, RunTimeUpdatesApplyKeysToTheCurrentModel) {
  DiskModelConfig base = Parse("hdd,L=1ms");
  Result<DiskModelConfig> updated = UpdateDiskModelSpec(base, "slowdown=3,g=2ms");
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_EQ(updated->profile, "hdd");
  EXPECT_EQ(updated->latency_ns, kMs);  // kept
  EXPECT_EQ(updated->slowdown, 3.0);
  EXPECT_EQ(updated->gap_ns, 2 * kMs);
  EXPECT_EQ(DiskModelSpec(*updated), "hdd,L=1ms,g=2ms,slowdown=3");

  // A spec that names a profile replaces everything.
  updated = UpdateDiskModelSpec(base, "ssd,o=1us");
  ASSERT_TRUE(updated.ok());
  EXPECT_EQ(DiskModelSpec(*updated), "ssd,o=1us");

  updated = UpdateDiskModelSpec(base, "L=-3ms");
  ASSERT_FALSE(updated.ok());
  EXPECT_EQ(updated.status().message(),
            "L=-3ms: negative; expected a time such as 2ms (units: ns, us, ms, s)");
}

}  // namespace
}  // namespace tipfs::stripe
