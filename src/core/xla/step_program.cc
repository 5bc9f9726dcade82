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
  bool captured() const override { return program_ != nullptr; }
  void reset() override { program_.reset(); }

  bool capture(const std::function<void()>& step, std::string& why) override {
    reset();
    try {
      xla::Trace trace;
      trace.drop_scratch_results();
      step();
      program_ = trace.finish();
    } catch (const std::exception& e) {
      why = e.what();
      program_.reset();
      return false;
    }
    return true;
  }

  void replay() override {
    SYSTOLIC_CHECK(program_->run(),
                   "xla: a buffer of the recorded step was freed since it was recorded (record it again)");
  }

 private:
  std::shared_ptr<xla::Recorded> program_;
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
