// Recorded and replayed draws (Note [Replayed draws] in frontend/draw_replay.h).
#include "frontend/draw_replay.h"

#include "runtime/error.h"

namespace kiln::detail {

namespace {
thread_local DrawRecording* recording = nullptr;
thread_local DrawReplay* replay = nullptr;
}  // namespace

Draw draw(std::string_view op, Device device, const std::function<Draw()>& fresh) {
  Draw d;
  if (DrawReplay* r = replay) {
    KILN_CHECK(r->next_ < r->draws_.size(),
               "{}: the recomputation made more random draws than the forward ({} made {}, then {} drew again on {}); "
               "the function must draw the same way each time it runs",
               r->who_, r->who_, r->draws_.size(), op, device.str());
    d = r->draws_[r->next_++];
    KILN_CHECK(d.at(0).device() == device,
               "{}: the recomputation's draw {} of {} is on {}, the forward's was on {}; the function must draw the "
               "same way each time it runs",
               r->who_, r->next_, op, device.str(), d.at(0).device().str());
  } else {
    d = fresh();
  }
  if (DrawRecording* rec = recording) rec->draws_.push_back(d);
  return d;
}

DrawRecording::DrawRecording() : outer_(recording) { recording = this; }
DrawRecording::~DrawRecording() { recording = outer_; }

DrawReplay::DrawReplay(const std::vector<Draw>& draws, std::string who)
    : draws_(draws), who_(std::move(who)), outer_(replay) {
  replay = this;
}
DrawReplay::~DrawReplay() { replay = outer_; }

void DrawReplay::finish() const {
  KILN_CHECK(next_ == draws_.size(),
             "{}: the recomputation made {} random draws, the forward made {}; the function must draw the same way "
             "each time it runs",
             who_, next_, draws_.size());
}

}  // namespace kiln::detail
