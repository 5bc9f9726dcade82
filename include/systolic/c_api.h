/* systolic's C API: load a Keras model and predict, from C, Rust, Go, Python (ctypes/cffi) or anything else
 * with a C ABI. Plain C11; link with -lsystolic (pkg-config systolic, or CMake's systolic::systolic).
 *
 *   systolic_model* m = NULL;
 *   if (systolic_model_load("model.h5", &m) != SYSTOLIC_OK) {
 *     fprintf(stderr, "%s\n", systolic_last_error());
 *     return 1;
 *   }
 *   int64_t in[8], out[8];
 *   size_t in_rank, out_rank;
 *   systolic_model_input_shape(m, in, 8, &in_rank);    // e.g. 32 32 3 (without the batch axis)
 *   systolic_model_output_shape(m, out, 8, &out_rank); // e.g. 10
 *   float probs[10];
 *   systolic_model_predict(m, pixels, 1, probs, 10);   // pixels: 1 x 32 x 32 x 3 floats, channels last
 *   systolic_model_free(m);
 *
 * A model of several inputs or outputs (Keras's functional API) is addressed by index: systolic_model_input_count,
 * systolic_model_input_name, systolic_model_input_shape_at, the same for outputs, and systolic_model_predict_many
 * with an array per input and per output.
 *
 * Every function that can fail returns a systolic_status; on failure, systolic_last_error() gives a one-line
 * message naming what is wrong (per thread, until that thread's next failing call). No C++ exception crosses
 * this boundary. A model handle may be used from several threads at once: concurrent predicts on one handle
 * are serialised (load one handle per thread to run them in parallel). Models compute on the CPU in float32.
 */
#ifndef SYSTOLIC_C_API_H
#define SYSTOLIC_C_API_H

#include <stddef.h>
#include <stdint.h>
#include <systolic/version.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum systolic_status {
  SYSTOLIC_OK = 0,
  SYSTOLIC_INVALID_ARGUMENT = 1, /* a null pointer, a batch < 1, an output buffer too small, ... */
  SYSTOLIC_FAILED = 2,           /* systolic refused: a missing or corrupt file, an unsupported layer, ... */
  SYSTOLIC_OUT_OF_MEMORY = 3,
  SYSTOLIC_INTERNAL_ERROR = 4 /* anything else; the message says what */
} systolic_status;

typedef struct systolic_model systolic_model; /* opaque */

/* The library's version, "0.1.0" (the header's is SYSTOLIC_VERSION_STRING, systolic/version.h). */
const char* systolic_version(void);

/* The message of this thread's last failed call ("" when none failed). Valid until this thread's next call. */
const char* systolic_last_error(void);

/* A Keras full-model file (keras.Model.save: .h5, or .keras where supported): architecture and weights. */
systolic_status systolic_model_load(const char* path, systolic_model** model);

/* A Keras model config (model.to_json(), a file) and its weights (.h5 or .weights.h5). */
systolic_status systolic_model_load_json(const char* config_path, const char* weights_path,
                                         systolic_model** model);

/* The shape of one sample of the model's input (or output), without the batch axis: `rank` dims are written
 * to dims[0..rank-1]. SYSTOLIC_INVALID_ARGUMENT when `capacity` < rank (rank is still set). */
systolic_status systolic_model_input_shape(const systolic_model* model, int64_t* dims, size_t capacity,
                                           size_t* rank);
systolic_status systolic_model_output_shape(const systolic_model* model, int64_t* dims, size_t capacity,
                                            size_t* rank);

/* Predicts `batch` samples of a model of one input and one output: `input` holds batch x (input shape) floats
 * (row-major, channels last), `output` receives batch x (output shape) floats; `output_count` is its size in
 * floats. A model of several inputs or outputs: SYSTOLIC_INVALID_ARGUMENT (use systolic_model_predict_many). */
systolic_status systolic_model_predict(systolic_model* model, const float* input, int64_t batch,
                                       float* output, size_t output_count);

/* How many inputs (outputs) the model has, in Keras's order (model.inputs, model.outputs); 0 for NULL. */
size_t systolic_model_input_count(const systolic_model* model);
size_t systolic_model_output_count(const systolic_model* model);
/* The name of input (output) i: its layer's name, the key of Keras's dict of inputs (outputs). NULL when i is out
 * of range. Valid while the model lives. */
const char* systolic_model_input_name(const systolic_model* model, size_t i);
const char* systolic_model_output_name(const systolic_model* model, size_t i);
/* The shape of one sample of input (output) i, as systolic_model_input_shape gives input 0's. */
systolic_status systolic_model_input_shape_at(const systolic_model* model, size_t i, int64_t* dims,
                                              size_t capacity, size_t* rank);
systolic_status systolic_model_output_shape_at(const systolic_model* model, size_t i, int64_t* dims,
                                               size_t capacity, size_t* rank);

/* Predicts `batch` samples of a model of any inputs and outputs: inputs[i] holds batch x (input i's shape)
 * floats, for each of the model's `input_count` inputs in order; outputs[k] receives batch x (output k's shape)
 * floats, output_counts[k] its size in floats, for each of its `output_count` outputs. */
systolic_status systolic_model_predict_many(systolic_model* model, const float* const* inputs,
                                            size_t input_count, int64_t batch, float* const* outputs,
                                            const size_t* output_counts, size_t output_count);

/* Frees a model (NULL is fine). */
void systolic_model_free(systolic_model* model);

#ifdef __cplusplus
}
#endif

#endif /* SYSTOLIC_C_API_H */
