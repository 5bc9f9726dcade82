// Training curves: `systolic plot LOG.csv -o curves.png` draws a CSVLogger file (callbacks.h) as one panel per
// quantity (loss, then each metric), the training curve and, where the log has val_<key>, the validation curve,
// each panel with axes, ticks, a legend and a title. Drawn with Debian's stb (stb_easy_font for text,
// stb_image_write for the PNG); the PNG is written atomically.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace systolic::plot {

// A CSVLogger file: the epoch column and one column per log key (NA or empty cells are NaN).
struct TrainingLog {
  std::vector<double> epoch;
  std::vector<std::pair<std::string, std::vector<double>>> columns;  // in the file's order
};

// Reads a CSV log (separator ","); Error naming the file and line for a missing header, no epoch column, a row
// with the wrong number of fields, a value that is not a number, or no rows.
TrainingLog read_csv_log(const std::string& path);

// Draws the log to a PNG of width x height (each at least 300).
void plot_training_log(const TrainingLog& log, const std::string& title, const std::string& png_path,
                       int width, int height);

}  // namespace systolic::plot
