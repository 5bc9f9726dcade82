// classify MODEL.h5 IMAGE [RESCALE]: a Keras full-model file predicts one image (resized to its input); prints
// the class index and the probabilities, one line. Uses only the installed systolic (find_package).
#include <systolic/systolic.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: classify MODEL.h5 IMAGE [RESCALE]\n");
    return 2;
  }
  try {
    systolic::Model model = systolic::load_model(argv[1], {.compile = false});
    systolic::Shape in = model.inputs()[0].shape();
    systolic::Tensor image = systolic::image::read_resized(argv[2], in[0], in[1], static_cast<int>(in[2]));
    double rescale = argc > 3 ? std::stod(argv[3]) : 1.0;
    systolic::Tensor p = model.predict(systolic::image::to_float_batch({image}, rescale));
    const float* v = p.data<float>();
    int best = 0;
    for (int k = 1; k < p.dim(1); ++k)
      if (v[k] > v[best]) best = k;
    std::printf("class %d:", best);
    for (int k = 0; k < p.dim(1); ++k) std::printf(" %.9g", v[k]);
    std::printf("\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "classify: %s\n", e.what());
    return 1;
  }
  return 0;
}
