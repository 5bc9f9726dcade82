// The communicator of XLA replicas (one process, its replicas on the devices of one PJRT plugin). Inside a step
// traced as one SPMD program (StepGraph::capture_replicas) the sum is a stablehlo.all_reduce of the program, which
// the plugin runs across its devices. Outside a trace (the eager steps of a batch whose shards differ in size, and
// the broadcasts and averages of weights) the replicas' values go through the host and the shared-memory sum of
// thread replicas.
#include <systolic/error.h>

#include "core/xla/trace.h"
#include "distribute/communicator.h"

namespace systolic::distribute {

namespace {

class XlaCommunicator final : public Communicator {
 public:
  XlaCommunicator(int replicas, double timeout_s) : host_(make_thread_communicator(replicas, timeout_s)) {}
  std::string name() const override { return "XLA all_reduce"; }
  int size() const override { return host_->size(); }
  int local_size() const override { return host_->local_size(); }

  void all_reduce_sum(Tensor& t, int local) override {
    SYSTOLIC_CHECK(t.device().is_xla(), "all-reduce over XLA replicas: replica {} holds its tensor on {}",
                   local, t.device().str());
    if (xla::Trace* trace = xla::Trace::current()) {
      SYSTOLIC_CHECK(trace->replicas() == size(),
                     "all-reduce over {} XLA replicas inside a program traced for {} replicas", size(),
                     trace->replicas());
      trace->write(t, trace->all_reduce_sum(trace->read(t)));
      return;
    }
    Tensor host = t.to(Device::cpu());
    host_->all_reduce_sum(host, local);
    t.copy_from(host);
  }
  void all_reduce_sum(std::vector<double>& v, int local) override { host_->all_reduce_sum(v, local); }
  void abort(const std::string& why) override { host_->abort(why); }

 private:
  std::unique_ptr<Communicator> host_;
};

}  // namespace

std::unique_ptr<Communicator> make_xla_communicator(int replicas, double timeout_s) {
  return std::make_unique<XlaCommunicator>(replicas, timeout_s);
}

}  // namespace systolic::distribute
