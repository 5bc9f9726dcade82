"""Writes the large Keras files bench/load_time.sh loads: ResNet50 (weights=None, Keras's default 224x224x3 input
and 1000 classes, so its 25.6 M parameters are all there, random as Keras initialises them) as a Keras 3 legacy
full-model .h5, a .keras and a .weights.h5, with its config as resnet50.json (model.to_json()), into DIR (outside
the repository: about 100 MB each).

  /var/tmp/systolic-bench-venv/bin/python bench/make_load_files.py DIR
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
import keras  # noqa: E402


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    keras.utils.set_random_seed(1)
    model = keras.applications.ResNet50(weights=None)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.save(os.path.join(out, "resnet50.h5"))
    model.save(os.path.join(out, "resnet50.keras"))
    model.save_weights(os.path.join(out, "resnet50.weights.h5"))
    with open(os.path.join(out, "resnet50.json"), "w") as f:
        f.write(model.to_json())
    print(f"keras {keras.__version__}: {model.count_params()} parameters in {out}/resnet50.{{h5,keras,weights.h5,json}}")


if __name__ == "__main__":
    main()
