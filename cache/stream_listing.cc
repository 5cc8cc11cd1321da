// TipManager::ListStreams: the hint streams as `tipfs stats --streams` shows them.
#include <algorithm>

#include "cache/tip_manager.h"
#include "cache/tip_model.h"

namespace tipfs::cache {

std::vector<StreamSummary> TipManager::ListStreams() const {
  MutexLock lock(&mu_);
  MutexLock table_lock(buffers_->mu());
  std::vector<StreamSummary> out;
  for (const bool warmup : {false, true}) {
    for (const auto& [id, stream] : warmup ? warmups_ : streams_) {
      const HintStream& s = *stream;
      StreamSummary summary;
      summary.id = s.id();
      summary.owner = s.owner();
      summary.warmup = warmup;
      summary.shared = !warmup && IsShared(s.id());
      for (size_t i = 0; i < kHintSourceCount; ++i) {
        summary.outstanding_bytes[i] = s.outstanding_bytes(static_cast<HintSource>(i));
      }
      summary.segments_pending = s.segments_pending();
      summary.blocks_consumed = s.blocks_consumed;
      summary.blocks_prefetched = s.blocks_prefetched;
      summary.horizon = std::min(PrefetchHorizon(events_.MeanDiskNanos(), AppNanos(&s)),
                                 static_cast<double>(buffers_->capacity_blocks()));
      out.push_back(summary);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const StreamSummary& a, const StreamSummary& b) { return a.id < b.id; });
  return out;
}

}  // namespace tipfs::cache
