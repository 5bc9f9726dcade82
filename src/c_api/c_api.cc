// The C API (include/systolic/c_api.h): a Model behind an opaque handle with a mutex; every entry point
// catches everything, so no exception crosses into C, and leaves its message in a thread-local string.
#include <systolic/c_api.h>
#include <systolic/systolic.h>

#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>

struct systolic_model {
  systolic::Model model;
  systolic::Shape input, output;
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

systolic_status wrap(const char* what, systolic::Model model, systolic_model** out) {
  if (model.inputs().size() != 1 || model.outputs().size() != 1)
    return failed(
        SYSTOLIC_FAILED,
        std::string(what) + ": the C API takes models with one input and one output (this one has " +
            std::to_string(model.inputs().size()) + " and " + std::to_string(model.outputs().size()) + ")");
  auto* m = new systolic_model{model, model.inputs()[0].shape(), model.outputs()[0].shape(), {}};
  *out = m;
  return SYSTOLIC_OK;
}

systolic_status shape_of(const char* what, const systolic_model* model, const systolic::Shape& shape,
                         int64_t* dims, size_t capacity, size_t* rank) {
  if (!model || !rank || (!dims && capacity > 0))
    return failed(SYSTOLIC_INVALID_ARGUMENT, std::string(what) + ": model, dims and rank must not be NULL");
  *rank = static_cast<size_t>(shape.rank());
  if (capacity < *rank)
    return failed(SYSTOLIC_INVALID_ARGUMENT, std::string(what) + ": the shape has " + std::to_string(*rank) +
                                                 " dims, room for " + std::to_string(capacity));
  for (size_t i = 0; i < *rank; ++i) dims[i] = shape[static_cast<int>(i)];
  return SYSTOLIC_OK;
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
  return guarded("systolic_model_load", [&] {
    return wrap("systolic_model_load", systolic::load_model(path, {.compile = false}), model);
  });
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
    return wrap("systolic_model_load_json", m, model);
  });
}

systolic_status systolic_model_input_shape(const systolic_model* model, int64_t* dims, size_t capacity,
                                           size_t* rank) {
  return shape_of("systolic_model_input_shape", model, model ? model->input : systolic::Shape{}, dims,
                  capacity, rank);
}

systolic_status systolic_model_output_shape(const systolic_model* model, int64_t* dims, size_t capacity,
                                            size_t* rank) {
  return shape_of("systolic_model_output_shape", model, model ? model->output : systolic::Shape{}, dims,
                  capacity, rank);
}

systolic_status systolic_model_predict(systolic_model* model, const float* input, int64_t batch,
                                       float* output, size_t output_count) {
  const char* what = "systolic_model_predict";
  if (!model || !input || !output)
    return failed(SYSTOLIC_INVALID_ARGUMENT,
                  std::string(what) + ": model, input and output must not be NULL");
  if (batch < 1)
    return failed(SYSTOLIC_INVALID_ARGUMENT, std::string(what) + ": batch " + std::to_string(batch) + " < 1");
  const std::int64_t in_each = model->input.numel(), out_each = model->output.numel();
  if (batch > (std::int64_t(1) << 40) / std::max<std::int64_t>(in_each, 1))
    return failed(SYSTOLIC_INVALID_ARGUMENT,
                  std::string(what) + ": batch " + std::to_string(batch) + " is too large");
  if (output_count < static_cast<size_t>(batch * out_each))
    return failed(SYSTOLIC_INVALID_ARGUMENT,
                  std::string(what) + ": output has room for " + std::to_string(output_count) +
                      " floats, the predictions need " + std::to_string(batch * out_each));
  return guarded(what, [&] {
    systolic::Tensor x(model->input.with_batch(batch), systolic::DType::float32);
    std::memcpy(x.data<float>(), input, static_cast<size_t>(batch * in_each) * sizeof(float));
    std::lock_guard<std::mutex> lock(model->mutex);
    systolic::Tensor y = model->model.predict(x).to(systolic::DType::float32);
    std::memcpy(output, y.data<float>(), static_cast<size_t>(batch * out_each) * sizeof(float));
    return SYSTOLIC_OK;
  });
}

void systolic_model_free(systolic_model* model) {
  delete model;
}

}  // extern "C"
