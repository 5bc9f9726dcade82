// StepGraph's recorder on an XLA device: the step traced into one program (trace.h), compiled once, and run for
// every replayed step. Tracing runs nothing; the program reads the arrays the step reads (weights, optimizer slots,
// the batch's buffers, the step counter, the learning rate) as they are when it runs, and gives the arrays it writes
// their new buffers.
#include <systolic/error.h>

#include "core/step_graph.h"
#include "core/xla/trace.h"

namespace systolic {

namespace {

class XlaStep : public StepRecorder {
 public:
  bool captured() const override { return !programs_.empty(); }
  void reset() override { programs_.clear(); }

  bool capture(const std::function<void()>& step, std::string& why) override {
    return capture_replicas(
        1, [&](int) { step(); }, why);
  }

  // Replica r's trace on its own arrays, r = 0 .. replicas-1; compiling happens once (the texts are one program,
  // and compiled programs are cached by text).
  bool capture_replicas(int replicas, const std::function<void(int)>& step, std::string& why) override {
    reset();
    try {
      for (int r = 0; r < replicas; ++r) {
        xla::Trace trace(replicas, r);
        trace.drop_scratch_results();
        step(r);
        programs_.push_back(trace.finish());
      }
      if (replicas > 1) check_one_program();
    } catch (const std::exception& e) {
      why = e.what();
      reset();
      return false;
    }
    return true;
  }

  bool current() const override {
    for (auto& p : programs_)
      if (!p->current()) return false;
    return true;
  }

  void replay() override {
    std::vector<xla::Recorded*> list;
    for (auto& p : programs_) list.push_back(p.get());
    SYSTOLIC_CHECK(xla::Recorded::run_replicas(list),
                   "xla: a buffer of the recorded step was freed since it was recorded (record it again)");
  }

 private:
  void check_one_program() const {
    for (std::size_t r = 1; r < programs_.size(); ++r)
      if (programs_[r]->text() != programs_[0]->text())
        fail("xla: replica {} traced another program than replica 0 ({})", r,
             xla::Recorded::first_difference(programs_[0]->text(), programs_[r]->text()));
  }

  std::vector<std::shared_ptr<xla::Recorded>> programs_;
};

}  // namespace

void mark_step_scratch(const Tensor& t) {
  if (t.defined() && t.device().is_xla()) xla::array_of(t).array->set_scratch(true);
}

std::unique_ptr<StepRecorder> xla_step_recorder(Device device) {
  if (!device.is_xla()) return nullptr;
  return std::make_unique<XlaStep>();
}

}  // namespace systolic
