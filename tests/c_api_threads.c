/* c_api_threads MODEL.h5 INPUTS.bin EXPECTED.bin: the C API from plain C11. Loads MODEL, predicts the float32
 * samples of INPUTS once (the serial result), then from 4 threads at once, 25 times each; every result must be
 * the serial one bit for bit, and the serial one must be EXPECTED (Keras's predictions, a fixture) to 1e-5.
 * Exit 0 when all holds; messages name what failed. A CTest test (tests/CMakeLists.txt). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systolic/c_api.h>

enum { kThreads = 4, kRepeats = 25 };

static systolic_model* model;
static float* inputs;
static float* serial;
static int64_t batch;
static size_t in_each, out_each;

static float* read_all(const char* path, size_t* count) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f);
  fseek(f, 0, SEEK_SET);
  float* data = malloc((size_t)bytes + 1);
  *count = (size_t)bytes / sizeof(float);
  if (!data || fread(data, sizeof(float), *count, f) != *count) {
    free(data);
    data = NULL;
  }
  fclose(f);
  return data;
}

static void* worker(void* arg) {
  (void)arg;
  size_t n = (size_t)batch * out_each;
  float* out = malloc(n * sizeof(float));
  long bad = 0;
  for (int r = 0; r < kRepeats && out; ++r) {
    if (systolic_model_predict(model, inputs, batch, out, n) != SYSTOLIC_OK) {
      fprintf(stderr, "c_api_threads: predict in a thread: %s\n", systolic_last_error());
      bad = 1;
      break;
    }
    if (memcmp(out, serial, n * sizeof(float)) != 0) {
      fprintf(stderr, "c_api_threads: a thread's predictions differ from the serial ones (repeat %d)\n", r);
      bad = 1;
      break;
    }
  }
  free(out);
  return (void*)bad;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: c_api_threads MODEL.h5 INPUTS.bin EXPECTED.bin\n");
    return 2;
  }
  if (systolic_model_load(argv[1], &model) != SYSTOLIC_OK) {
    fprintf(stderr, "c_api_threads: %s\n", systolic_last_error());
    return 1;
  }
  int64_t dims[8];
  size_t rank = 0, n_in = 0, n_expected = 0;
  in_each = out_each = 1;
  if (systolic_model_input_shape(model, dims, 8, &rank) != SYSTOLIC_OK) return 1;
  for (size_t i = 0; i < rank; ++i) in_each *= (size_t)dims[i];
  if (systolic_model_output_shape(model, dims, 8, &rank) != SYSTOLIC_OK) return 1;
  for (size_t i = 0; i < rank; ++i) out_each *= (size_t)dims[i];
  inputs = read_all(argv[2], &n_in);
  float* expected = read_all(argv[3], &n_expected);
  if (!inputs || !expected || n_in % in_each || n_expected != n_in / in_each * out_each) {
    fprintf(stderr, "c_api_threads: cannot read %s and %s as whole samples\n", argv[2], argv[3]);
    return 1;
  }
  batch = (int64_t)(n_in / in_each);
  serial = malloc(n_expected * sizeof(float));
  if (systolic_model_predict(model, inputs, batch, serial, n_expected) != SYSTOLIC_OK) {
    fprintf(stderr, "c_api_threads: %s\n", systolic_last_error());
    return 1;
  }
  int status = 0;
  for (size_t i = 0; i < n_expected; ++i)
    if (fabsf(serial[i] - expected[i]) > 1e-5f) {
      fprintf(stderr, "c_api_threads: value %zu is %g, Keras gives %g\n", i, serial[i], expected[i]);
      status = 1;
    }
  pthread_t threads[kThreads];
  for (int t = 0; t < kThreads; ++t) pthread_create(&threads[t], NULL, worker, NULL);
  for (int t = 0; t < kThreads; ++t) {
    void* bad = NULL;
    pthread_join(threads[t], &bad);
    if (bad) status = 1;
  }
  printf("c_api_threads: %lld samples, %d threads x %d predicts: %s\n", (long long)batch, kThreads, kRepeats,
         status ? "FAILED" : "OK");
  free(inputs);
  free(expected);
  free(serial);
  systolic_model_free(model);
  return status;
}
