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
      xla::Recorded::check_one_program(list());
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
    SYSTOLIC_CHECK(xla::Recorded::run_replicas(list()),
                   "xla: a buffer of the recorded step was freed since it was recorded (record it again)");
  }

 private:
  std::vector<xla::Recorded*> list() const {
    std::vector<xla::Recorded*> out;
    for (auto& p : programs_) out.push_back(p.get());
    return out;
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
