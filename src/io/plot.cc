// Training curves (plot.h): a small raster plotter on stb. Panels in a grid, each with a frame, "nice" ticks
// (1, 2, 5 x 10^k) and their labels, the curves as 2-pixel polylines with a dot per epoch, a legend and a title.
#include <stb_easy_font.h>
#include <systolic/error.h>
#include <systolic/image.h>
#include <systolic/plot.h>
#include <systolic/tensor.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <tuple>

namespace systolic::plot {

namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  std::stringstream ss(line);
  while (std::getline(ss, field, ',')) out.push_back(field);
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}

struct Rgb {
  unsigned char r, g, b;
};
const Rgb kBlack{0, 0, 0}, kGrid{225, 225, 225}, kTrain{31, 119, 180}, kVal{255, 127, 14}, kGrey{90, 90, 90};

class Canvas {
 public:
  Canvas(int w, int h) : w_(w), h_(h), px_(Tensor({h, w, 3}, DType::uint8)) {
    std::fill_n(px_.data<std::uint8_t>(), px_.numel(), 255);
  }
  void set(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
    std::uint8_t* p = px_.data<std::uint8_t>() + (std::int64_t(y) * w_ + x) * 3;
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
  }
  void rect(int x0, int y0, int x1, int y1, Rgb c) {  // filled, inclusive
    for (int y = y0; y <= y1; ++y)
      for (int x = x0; x <= x1; ++x) set(x, y, c);
  }
  void line(double x0, double y0, double x1, double y1, Rgb c, int thick) {
    int n = int(std::ceil(std::max(std::abs(x1 - x0), std::abs(y1 - y0)))) + 1;
    for (int i = 0; i <= n; ++i) {
      double t = double(i) / n;
      int x = int(std::lround(x0 + (x1 - x0) * t)), y = int(std::lround(y0 + (y1 - y0) * t));
      rect(x - thick / 2, y - thick / 2, x + (thick - 1) / 2, y + (thick - 1) / 2, c);
    }
  }
  // Text with stb_easy_font's quads, scaled; returns the width in pixels.
  static int text_width(const std::string& s, int scale) {
    return stb_easy_font_width(const_cast<char*>(s.c_str())) * scale;
  }
  void text(int x, int y, const std::string& s, Rgb c, int scale) {
    static char buffer[200000];
    int quads = stb_easy_font_print(0, 0, const_cast<char*>(s.c_str()), nullptr, buffer, sizeof(buffer));
    for (int q = 0; q < quads; ++q) {
      float* v = reinterpret_cast<float*>(buffer + q * 64);  // 4 vertices of 16 bytes: x, y, z, color
      int qx0 = int(v[0]), qy0 = int(v[1]), qx1 = int(v[8]), qy1 = int(v[9]);
      rect(x + qx0 * scale, y + qy0 * scale, x + qx1 * scale - 1, y + qy1 * scale - 1, c);
    }
  }
  const Tensor& pixels() const { return px_; }

 private:
  int w_, h_;
  Tensor px_;
};

// Ticks at multiples of 1, 2 or 5 x 10^k, about `count` of them, covering [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int count) {
  double span = hi - lo;
  double raw = span / count, mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  std::vector<double> out;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    out.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return out;
}

std::string tick_label(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

void panel(Canvas& c, int x0, int y0, int w, int h, const std::string& name, const std::vector<double>& epoch,
           const std::vector<double>* train, const std::vector<double>* val) {
  const int left = 62, right = 14, top = 34, bottom = 40;
  int px0 = x0 + left, px1 = x0 + w - right, py0 = y0 + top, py1 = y0 + h - bottom;
  double ylo = INFINITY, yhi = -INFINITY;
  for (auto* s : {train, val})
    if (s)
      for (double v : *s)
        if (std::isfinite(v)) ylo = std::min(ylo, v), yhi = std::max(yhi, v);
  if (!std::isfinite(ylo)) ylo = 0, yhi = 1;
  if (yhi - ylo <= 1e-12 * std::max(1.0, std::abs(yhi))) {
    // A constant (a learning rate that never changed): a band of 10% around it, so 0.001 reads as 0.001.
    double half = yhi != 0 ? std::abs(yhi) * 0.1 : 0.5;
    ylo -= half, yhi += half;
  }
  double pad = (yhi - ylo) * 0.05;
  ylo -= pad, yhi += pad;
  double xlo = epoch.front(), xhi = epoch.back();
  if (xhi - xlo < 1e-12) xlo -= 1, xhi += 1;
  auto X = [&](double e) { return px0 + (e - xlo) / (xhi - xlo) * (px1 - px0); };
  auto Y = [&](double v) { return py1 - (v - ylo) / (yhi - ylo) * (py1 - py0); };
  // Grid and ticks.
  for (double t : nice_ticks(ylo, yhi, 5)) {
    int y = int(std::lround(Y(t)));
    c.line(px0, y, px1, y, kGrid, 1);
    c.line(px0 - 5, y, px0, y, kBlack, 1);
    std::string s = tick_label(t);
    c.text(px0 - 8 - Canvas::text_width(s, 1), y - 3, s, kBlack, 1);
  }
  std::vector<double> xt = nice_ticks(xlo, xhi, std::min(8, std::max(1, int(xhi - xlo))));
  for (double t : xt) {
    if (std::abs(t - std::round(t)) > 1e-9) continue;  // whole epochs only
    int x = int(std::lround(X(t)));
    c.line(x, py0, x, py1, kGrid, 1);
    c.line(x, py1, x, py1 + 5, kBlack, 1);
    std::string s = tick_label(t);
    c.text(x - Canvas::text_width(s, 1) / 2, py1 + 9, s, kBlack, 1);
  }
  // Frame, axis label, title.
  c.line(px0, py0, px1, py0, kBlack, 1);
  c.line(px0, py1, px1, py1, kBlack, 1);
  c.line(px0, py0, px0, py1, kBlack, 1);
  c.line(px1, py0, px1, py1, kBlack, 1);
  c.text((px0 + px1) / 2 - Canvas::text_width("epoch", 1) / 2, py1 + 24, "epoch", kGrey, 1);
  c.text((px0 + px1) / 2 - Canvas::text_width(name, 2) / 2, y0 + 10, name, kBlack, 2);
  // Curves, then the legend.
  int legend_y = py0 + 8;
  for (auto [s, colour, label] : {std::tuple{train, kTrain, "train"}, std::tuple{val, kVal, "validation"}}) {
    // A column of NA alone (Keras's CSVLogger adds val_ columns for every key when there is no validation) is
    // no curve, and has no legend entry.
    if (!s || std::none_of(s->begin(), s->end(), [](double v) { return std::isfinite(v); })) continue;
    std::optional<std::pair<double, double>> last;
    for (std::size_t i = 0; i < s->size(); ++i) {
      if (!std::isfinite((*s)[i])) {
        last.reset();
        continue;
      }
      double x = X(epoch[i]), y = Y((*s)[i]);
      if (last) c.line(last->first, last->second, x, y, colour, 2);
      c.rect(int(x) - 2, int(y) - 2, int(x) + 2, int(y) + 2, colour);
      last = std::pair{x, y};
    }
    int lx = px1 - 100;
    c.line(lx, legend_y + 3, lx + 20, legend_y + 3, colour, 2);
    c.text(lx + 26, legend_y, label, kBlack, 1);
    legend_y += 14;
  }
}

}  // namespace

TrainingLog read_csv_log(const std::string& path) {
  std::ifstream in(path);
  SYSTOLIC_CHECK(in, "plot: cannot read {}", path);
  std::string line;
  SYSTOLIC_CHECK(std::getline(in, line), "plot: {} is empty (expected a CSV log with a header line)", path);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  auto header = split(line);
  SYSTOLIC_CHECK(!header.empty() && header[0] == "epoch",
                 "plot: {} line 1: the header must start with the column epoch (a CSVLogger file), got '{}'",
                 path, line);
  SYSTOLIC_CHECK(header.size() >= 2, "plot: {} line 1: no columns besides epoch", path);
  TrainingLog log;
  for (std::size_t i = 1; i < header.size(); ++i) log.columns.push_back({header[i], {}});
  for (int n = 2; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    auto f = split(line);
    SYSTOLIC_CHECK(f.size() == header.size(), "plot: {} line {}: {} fields, but the header has {}", path, n,
                   f.size(), header.size());
    for (std::size_t i = 0; i < f.size(); ++i) {
      double v = NAN;
      if (!(i > 0 && (f[i] == "NA" || f[i].empty()))) {
        std::size_t used = 0;
        try {
          v = std::stod(f[i], &used);
        } catch (const std::exception&) {
          used = 0;
        }
        SYSTOLIC_CHECK(used == f[i].size() && used > 0, "plot: {} line {}: '{}' in column {} is not a number",
                       path, n, f[i], header[i]);
      }
      if (i == 0)
        log.epoch.push_back(v);
      else
        log.columns[i - 1].second.push_back(v);
    }
  }
  SYSTOLIC_CHECK(!log.epoch.empty(), "plot: {} has a header but no rows", path);
  return log;
}

void plot_training_log(const TrainingLog& log, const std::string& title, const std::string& png_path,
                       int width, int height) {
  SYSTOLIC_CHECK(width >= 300 && height >= 300 && width <= 10000 && height <= 10000,
                 "plot: the image size must be 300 to 10000 pixels each way, got {}x{}", width, height);
  // Quantities: every column without the val_ prefix (and a val_ column with no training twin).
  std::vector<std::string> names;
  auto find = [&](const std::string& k) -> const std::vector<double>* {
    for (auto& [n, v] : log.columns)
      if (n == k) return &v;
    return nullptr;
  };
  for (auto& [n, v] : log.columns)
    if (!n.starts_with("val_") || !find(n.substr(4))) names.push_back(n);
  // loss first, as Keras's logs.
  std::stable_partition(names.begin(), names.end(), [](auto& n) { return n == "loss"; });
  int count = int(names.size());
  int cols = int(std::ceil(std::sqrt(double(count))));
  int rows = (count + cols - 1) / cols;
  const int title_h = 36;
  Canvas c(width, height);
  c.text(width / 2 - Canvas::text_width(title, 2) / 2, 10, title, kBlack, 2);
  int pw = width / cols, ph = (height - title_h) / rows;
  for (int i = 0; i < count; ++i) {
    const std::string& n = names[i];
    bool val_only = n.starts_with("val_") && !find(n.substr(4));
    const std::vector<double>* train = val_only ? nullptr : find(n);
    const std::vector<double>* val = val_only ? find(n) : find("val_" + n);
    panel(c, (i % cols) * pw, title_h + (i / cols) * ph, pw, ph, n, log.epoch, train, val);
  }
  image::write_png(png_path, c.pixels());
}

}  // namespace systolic::plot
