/* classify_c MODEL.h5 INPUT.f32: the C API predicts the float32 samples in INPUT.f32 (raw, channels last, as
 * many whole samples as the file holds); prints one line per sample: the class index and the outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <systolic/c_api.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: classify_c MODEL.h5 INPUT.f32\n");
    return 2;
  }
  systolic_model* model = NULL;
  if (systolic_model_load(argv[1], &model) != SYSTOLIC_OK) {
    fprintf(stderr, "classify_c: %s\n", systolic_last_error());
    return 1;
  }
  int64_t in[8], out[8];
  size_t in_rank = 0, out_rank = 0, in_each = 1, out_each = 1;
  if (systolic_model_input_shape(model, in, 8, &in_rank) != SYSTOLIC_OK ||
      systolic_model_output_shape(model, out, 8, &out_rank) != SYSTOLIC_OK) {
    fprintf(stderr, "classify_c: %s\n", systolic_last_error());
    systolic_model_free(model);
    return 1;
  }
  for (size_t i = 0; i < in_rank; ++i) in_each *= (size_t)in[i];
  for (size_t i = 0; i < out_rank; ++i) out_each *= (size_t)out[i];
  FILE* f = fopen(argv[2], "rb");
  if (!f) {
    fprintf(stderr, "classify_c: cannot open %s\n", argv[2]);
    systolic_model_free(model);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f);
  fseek(f, 0, SEEK_SET);
  size_t batch = (size_t)bytes / (in_each * sizeof(float));
  float* x = malloc(batch * in_each * sizeof(float) + 1);
  float* y = malloc(batch * out_each * sizeof(float) + 1);
  int status = 1;
  if (batch == 0 || !x || !y || fread(x, sizeof(float), batch * in_each, f) != batch * in_each) {
    fprintf(stderr, "classify_c: %s holds no whole sample of %zu floats\n", argv[2], in_each);
  } else if (systolic_model_predict(model, x, (int64_t)batch, y, batch * out_each) != SYSTOLIC_OK) {
    fprintf(stderr, "classify_c: %s\n", systolic_last_error());
  } else {
    for (size_t n = 0; n < batch; ++n) {
      const float* p = y + n * out_each;
      size_t best = 0;
      for (size_t k = 1; k < out_each; ++k)
        if (p[k] > p[best]) best = k;
      printf("class %zu:", best);
      for (size_t k = 0; k < out_each; ++k) printf(" %.9g", p[k]);
      printf("\n");
    }
    status = 0;
  }
  fclose(f);
  free(x);
  free(y);
  systolic_model_free(model);
  return status;
}
