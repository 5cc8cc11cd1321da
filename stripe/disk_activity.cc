#include "stripe/disk_activity.h"

#include <algorithm>

#include "util/timeline.h"

namespace tipfs::stripe {
namespace {

TimelineActivity ActivityOf(DiskRequest::Kind kind, DiskRequest::Purpose purpose) {
  if (kind != DiskRequest::Kind::kRead) return TimelineActivity::kWrite;
  switch (purpose) {
    case DiskRequest::Purpose::kDemand:
      return TimelineActivity::kDemand;
    case DiskRequest::Purpose::kReadahead:
      return TimelineActivity::kReadahead;
    case DiskRequest::Purpose::kHinted:
      return TimelineActivity::kHinted;
    case DiskRequest::Purpose::kSpeculative:
      return TimelineActivity::kSpeculative;
  }
  return TimelineActivity::kDemand;
}

}  // namespace

const char* PurposeName(DiskRequest::Purpose purpose) {
  switch (purpose) {
    case DiskRequest::Purpose::kDemand:
      return "demand";
    case DiskRequest::Purpose::kReadahead:
      return "readahead";
    case DiskRequest::Purpose::kHinted:
      return "hinted";
    case DiskRequest::Purpose::kSpeculative:
      return "speculative";
  }
  return "demand";
}

DiskActivity::DiskActivity(uint32_t disks, Clock* clock, Statistics* statistics)
    : clock_(clock), statistics_(statistics), created_ns_(clock->NowNanos()) {
  for (uint32_t i = 0; i < disks; ++i) {
    disks_.push_back(std::make_unique<PerDisk>());
    disks_.back()->last_change_ns = created_ns_;
  }
}

std::unique_ptr<Disk> DiskActivity::Wrap(std::unique_ptr<Disk> disk, uint32_t index) {
  return std::make_unique<ActivityRecordingDisk>(std::move(disk), index, this);
}

void DiskActivity::AdvanceLocked(PerDisk& d, int64_t now) {
  const int64_t dt = std::max<int64_t>(0, now - d.last_change_ns);
  if (d.stats.outstanding > 0) d.stats.busy_ns += dt;
  d.stats.outstanding_ns += dt * d.stats.outstanding;
  d.last_change_ns = std::max(d.last_change_ns, now);
}

int64_t DiskActivity::Submitted(uint32_t disk, const DiskRequest& request) {
  const int64_t now = clock_->NowNanos();
  PerDisk& d = *disks_[disk];
  {
    MutexLock lock(&d.mu);
    AdvanceLocked(d, now);
    ++d.stats.outstanding;
    d.stats.max_outstanding = std::max(d.stats.max_outstanding, d.stats.outstanding);
  }
  switch (request.kind) {
    case DiskRequest::Kind::kRead:
      RecordTick(statistics_, DISK_READ_OPS);
      RecordTick(statistics_, DISK_READ_BYTES, request.length);
      break;
    case DiskRequest::Kind::kWrite:
      RecordTick(statistics_, DISK_WRITE_OPS);
      RecordTick(statistics_, DISK_WRITE_BYTES, request.length);
      break;
    case DiskRequest::Kind::kSync:
      RecordTick(statistics_, DISK_SYNC_OPS);
      break;
  }
  return now;
}

void DiskActivity::Completed(uint32_t disk, DiskRequest::Kind kind, DiskRequest::Purpose purpose,
                             int64_t submitted_ns, uint64_t bytes, bool ok) {
  const int64_t now = clock_->NowNanos();
  PerDisk& d = *disks_[disk];
  {
    MutexLock lock(&d.mu);
    AdvanceLocked(d, now);
    if (d.stats.outstanding > 0) --d.stats.outstanding;
    ++d.stats.completed;
    if (!ok) ++d.stats.errors;
    d.stats.response_ns += now - submitted_ns;
    switch (kind) {
      case DiskRequest::Kind::kRead: {
        ++d.stats.reads;
        d.stats.bytes_read += bytes;
        const size_t p = static_cast<size_t>(purpose);
        ++d.stats.reads_by_purpose[p];
        d.stats.bytes_by_purpose[p] += bytes;
        break;
      }
      case DiskRequest::Kind::kWrite:
        ++d.stats.writes;
        d.stats.bytes_written += bytes;
        break;
      case DiskRequest::Kind::kSync:
        ++d.stats.syncs;
        break;
    }
  }
  TimelineEvent event;
  event.start_ns = submitted_ns;
  event.end_ns = now;
  event.bytes = static_cast<uint32_t>(std::min<uint64_t>(bytes, UINT32_MAX));
  event.who = disk;
  event.activity = ActivityOf(kind, purpose);
  TimelineRecorder::Global()->Record(event);
}

std::vector<DiskActivityStats> DiskActivity::Stats() const {
  const int64_t now = clock_->NowNanos();
  std::vector<DiskActivityStats> out;
  for (const auto& d : disks_) {
    MutexLock lock(&d->mu);
    DiskActivityStats s = d->stats;
    // Up to now, without moving the board's own state (Stats is const).
    const int64_t dt = std::max<int64_t>(0, now - d->last_change_ns);
    if (s.outstanding > 0) s.busy_ns += dt;
    s.outstanding_ns += dt * s.outstanding;
    s.elapsed_ns = now - created_ns_;
    out.push_back(s);
  }
  return out;
}

void ActivityRecordingDisk::Submit(DiskRequest request) {
  const int64_t submitted = board_->Submitted(index_, request);
  const DiskRequest::Kind kind = request.kind;
  const DiskRequest::Purpose purpose = request.purpose;
  DiskActivity* board = board_;
  const uint32_t index = index_;
  request.done = [board, index, kind, purpose, submitted,
                  done = std::move(request.done)](Result<uint64_t> result) {
    board->Completed(index, kind, purpose, submitted, result.ok() ? *result : 0, result.ok());
    done(std::move(result));
  };
  inner_->Submit(std::move(request));
}

}  // namespace tipfs::stripe
