// The C API (include/systolic/c_api.h): a Model behind an opaque handle with a mutex; every entry point
// catches everything, so no exception crosses into C, and leaves its message in a thread-local string.
#include <systolic/c_api.h>
#include <systolic/systolic.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

struct systolic_model {
  systolic::Model model;
  std::vector<systolic::Shape> inputs, outputs;  // each sample's shape
  std::vector<std::string> input_names, output_names;
  std::mutex mutex;
};

namespace {

thread_local std::string last_error;

systolic_status failed(systolic_status status, std::string message) {
  last_error = std::move(message);
  return status;
}

// Runs f, turning exceptions into a status and last_error.
template <class F>
systolic_status guarded(const char* what, F&& f) {
  try {
    return f();
  } catch (const systolic::Error& e) {
    return failed(SYSTOLIC_FAILED, std::string(what) + ": " + e.what());
  } catch (const std::bad_alloc&) {
    return failed(SYSTOLIC_OUT_OF_MEMORY, std::string(what) + ": out of memory");
  } catch (const std::exception& e) {
    return failed(SYSTOLIC_INTERNAL_ERROR, std::string(what) + ": " + e.what());
  } catch (...) {
    return failed(SYSTOLIC_INTERNAL_ERROR, std::string(what) + ": unknown error");
  }
}

systolic_status wrap(systolic::Model model, systolic_model** out) {
  std::unique_ptr<systolic_model> m(new systolic_model{model, {}, {}, {}, model.output_names(), {}});
  for (const auto& t : model.inputs()) {
    m->inputs.push_back(t.shape());
    m->input_names.push_back(t.node()->layer->name());
  }
  for (const auto& t : model.outputs()) m->outputs.push_back(t.shape());
  *out = m.release();
  return SYSTOLIC_OK;
}

systolic_status shape_of(const char* what, const systolic_model* model, bool input, size_t i, int64_t* dims,
                         size_t capacity, size_t* rank) {
  if (!model || !rank || (!dims && capacity > 0))
    return failed(SYSTOLIC_INVALID_ARGUMENT, std::string(what) + ": model, dims and rank must not be NULL");
  const auto& shapes = input ? model->inputs : model->outputs;
  if (i >= shapes.size())
    return failed(SYSTOLIC_INVALID_ARGUMENT,
                  std::string(what) + ": the model has " + std::to_string(shapes.size()) +
                      (input ? " inputs" : " outputs") + ", no " + std::to_string(i));
  const systolic::Shape& shape = shapes[i];
  *rank = static_cast<size_t>(shape.rank());
  if (capacity < *rank)
    return failed(SYSTOLIC_INVALID_ARGUMENT, std::string(what) + ": the shape has " + std::to_string(*rank) +
                                                 " dims, room for " + std::to_string(capacity));
  for (size_t i = 0; i < *rank; ++i) dims[i] = shape[static_cast<int>(i)];
  return SYSTOLIC_OK;
}

// Predicts `batch` samples into the callers' arrays, one per input and output (the checks' messages start with
// `what`, the entry point called).
systolic_status run_predict(const std::string& what, systolic_model* model, const float* const* inputs,
                            size_t input_count, int64_t batch, float* const* outputs,
                            const size_t* output_counts, size_t output_count) {
  if (input_count != model->inputs.size() || output_count != model->outputs.size())
    return failed(SYSTOLIC_INVALID_ARGUMENT,
                  what + ": the model has " + std::to_string(model->inputs.size()) + " inputs and " +
                      std::to_string(model->outputs.size()) + " outputs; " +
                      (what == "systolic_model_predict" ? "use systolic_model_predict_many"
                                                        : "the call gives " + std::to_string(input_count) +
                                                              " and " + std::to_string(output_count)));
  if (batch < 1) return failed(SYSTOLIC_INVALID_ARGUMENT, what + ": batch " + std::to_string(batch) + " < 1");
  for (size_t i = 0; i < input_count; ++i) {
    if (!inputs[i])
      return failed(SYSTOLIC_INVALID_ARGUMENT, what + ": input '" + model->input_names[i] + "' is NULL");
    if (batch > (std::int64_t(1) << 40) / std::max<std::int64_t>(model->inputs[i].numel(), 1))
      return failed(SYSTOLIC_INVALID_ARGUMENT, what + ": batch " + std::to_string(batch) + " is too large");
  }
  for (size_t k = 0; k < output_count; ++k) {
    const std::int64_t need = batch * model->outputs[k].numel();
    if (!outputs[k])
      return failed(SYSTOLIC_INVALID_ARGUMENT, what + ": output '" + model->output_names[k] + "' is NULL");
    if (output_counts[k] < static_cast<size_t>(need))
      return failed(SYSTOLIC_INVALID_ARGUMENT, what + ": output '" + model->output_names[k] +
                                                   "' has room for " + std::to_string(output_counts[k]) +
                                                   " floats, the predictions need " + std::to_string(need));
  }
  return guarded(what.c_str(), [&] {
    systolic::Arrays x;
    for (size_t i = 0; i < input_count; ++i) {
      systolic::Tensor t(model->inputs[i].with_batch(batch), systolic::DType::float32);
      std::memcpy(t.data<float>(), inputs[i], static_cast<size_t>(t.numel()) * sizeof(float));
      x.push_back(t);
    }
    std::lock_guard<std::mutex> lock(model->mutex);
    std::vector<systolic::Tensor> y = model->model.predict_outputs(x);
    for (size_t k = 0; k < output_count; ++k) {
      systolic::Tensor out = y[k].to(systolic::DType::float32);
      std::memcpy(outputs[k], out.data<float>(), static_cast<size_t>(out.numel()) * sizeof(float));
    }
    return SYSTOLIC_OK;
  });
}

}  // namespace

extern "C" {

const char* systolic_version(void) {
  return SYSTOLIC_VERSION_STRING;
}

const char* systolic_last_error(void) {
  return last_error.c_str();
}

systolic_status systolic_model_load(const char* path, systolic_model** model) {
  if (!path || !model)
    return failed(SYSTOLIC_INVALID_ARGUMENT, "systolic_model_load: path and model must not be NULL");
  *model = nullptr;
  return guarded("systolic_model_load",
                 [&] { return wrap(systolic::load_model(path, {.compile = false}), model); });
}

systolic_status systolic_model_load_json(const char* config_path, const char* weights_path,
                                         systolic_model** model) {
  if (!config_path || !weights_path || !model)
    return failed(SYSTOLIC_INVALID_ARGUMENT,
                  "systolic_model_load_json: config_path, weights_path and model must not be NULL");
  *model = nullptr;
  return guarded("systolic_model_load_json", [&] {
    systolic::Model m = systolic::model_from_json_file(config_path);
    m.load_weights(weights_path);
    return wrap(m, model);
  });
}

systolic_status systolic_model_input_shape(const systolic_model* model, int64_t* dims, size_t capacity,
                                           size_t* rank) {
  return shape_of("systolic_model_input_shape", model, true, 0, dims, capacity, rank);
}

systolic_status systolic_model_output_shape(const systolic_model* model, int64_t* dims, size_t capacity,
                                            size_t* rank) {
  return shape_of("systolic_model_output_shape", model, false, 0, dims, capacity, rank);
}

systolic_status systolic_model_input_shape_at(const systolic_model* model, size_t i, int64_t* dims,
                                              size_t capacity, size_t* rank) {
  return shape_of("systolic_model_input_shape_at", model, true, i, dims, capacity, rank);
}

systolic_status systolic_model_output_shape_at(const systolic_model* model, size_t i, int64_t* dims,
                                               size_t capacity, size_t* rank) {
  return shape_of("systolic_model_output_shape_at", model, false, i, dims, capacity, rank);
}

size_t systolic_model_input_count(const systolic_model* model) {
  return model ? model->inputs.size() : 0;
}

size_t systolic_model_output_count(const systolic_model* model) {
  return model ? model->outputs.size() : 0;
}

const char* systolic_model_input_name(const systolic_model* model, size_t i) {
  return model && i < model->input_names.size() ? model->input_names[i].c_str() : nullptr;
}

const char* systolic_model_output_name(const systolic_model* model, size_t i) {
  return model && i < model->output_names.size() ? model->output_names[i].c_str() : nullptr;
}

systolic_status systolic_model_predict_many(systolic_model* model, const float* const* inputs,
                                            size_t input_count, int64_t batch, float* const* outputs,
                                            const size_t* output_counts, size_t output_count) {
  if (!model || !inputs || !outputs || !output_counts)
    return failed(SYSTOLIC_INVALID_ARGUMENT,
                  "systolic_model_predict_many: model, inputs, outputs and output_counts must not be NULL");
  return run_predict("systolic_model_predict_many", model, inputs, input_count, batch, outputs, output_counts,
                     output_count);
}

systolic_status systolic_model_predict(systolic_model* model, const float* input, int64_t batch,
                                       float* output, size_t output_count) {
  if (!model || !input || !output)
    return failed(SYSTOLIC_INVALID_ARGUMENT,
                  "systolic_model_predict: model, input and output must not be NULL");
  const float* inputs[] = {input};
  float* outputs[] = {output};
  const size_t counts[] = {output_count};
  return run_predict("systolic_model_predict", model, inputs, 1, batch, outputs, counts, 1);
}

void systolic_model_free(systolic_model* model) {
  delete model;
}

}  // extern "C"
