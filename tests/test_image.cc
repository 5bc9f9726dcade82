// The image module (PNG/JPEG/BMP decoding, TensorFlow's bilinear resize, upscaling, atomic PNG writes, model
// inputs from files and float batches) and image folders (Keras's image_dataset_from_directory): known
// values, round trips, bad files.
#include <gmock/gmock.h>
#include <stb_image_write.h>
#include <systolic/systolic.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "test_util.h"

using namespace systolic;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

using systolic::testing::error_of;
using systolic::testing::read_text;
using systolic::testing::TempDir;

namespace {

// A deterministic (h, w, c) uint8 image: smooth, so JPEG keeps it close.
Tensor pattern(std::int64_t h, std::int64_t w, std::int64_t c, int seed = 0) {
  Tensor t({h, w, c}, DType::uint8);
  for (std::int64_t y = 0; y < h; ++y)
    for (std::int64_t x = 0; x < w; ++x)
      for (std::int64_t k = 0; k < c; ++k)
        t.data<std::uint8_t>()[(y * w + x) * c + k] =
            std::uint8_t((y * 6 + x * 3 + k * 60 + seed * 17) % 256);
  return t;
}

std::vector<int> bytes(const Tensor& t) {
  const std::uint8_t* p = t.data<std::uint8_t>();
  return std::vector<int>(p, p + t.numel());
}

void write_bytes(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary).write(data.data(), std::streamsize(data.size()));
}

}  // namespace

TEST(Image, PngRoundTripRgbAndGrey) {
  TempDir dir;
  Tensor rgb = pattern(7, 5, 3), grey = pattern(4, 9, 1);
  image::write_png(dir.file("rgb.png"), rgb);
  image::write_png(dir.file("grey.png"), grey.reshape({4, 9}));  // (H, W) is accepted too
  Tensor a = image::read(dir.file("rgb.png"), 3);
  EXPECT_EQ(a.shape(), Shape({7, 5, 3}));
  EXPECT_EQ(bytes(a), bytes(rgb));
  Tensor b = image::read(dir.file("grey.png"), 1);
  EXPECT_EQ(b.shape(), Shape({4, 9, 1}));
  EXPECT_EQ(bytes(b), bytes(grey));
  // Grey read as RGB replicates the channel.
  Tensor c = image::read(dir.file("grey.png"), 3);
  ASSERT_EQ(c.shape(), Shape({4, 9, 3}));
  for (int k = 0; k < 3; ++k) EXPECT_EQ(c.data<std::uint8_t>()[5 * 3 + k], grey.data<std::uint8_t>()[5]);
  // The PNG signature, and no temporary file left beside it.
  EXPECT_EQ(read_text(dir.file("rgb.png")).substr(1, 3), "PNG");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator{}), 2);
}

TEST(Image, BmpExactAndJpegClose) {
  TempDir dir;
  Tensor img = pattern(16, 24, 3);
  ASSERT_TRUE(stbi_write_bmp(dir.file("a.bmp").c_str(), 24, 16, 3, img.data<std::uint8_t>()));
  ASSERT_TRUE(stbi_write_jpg(dir.file("a.JPG").c_str(), 24, 16, 3, img.data<std::uint8_t>(), 100));
  EXPECT_EQ(bytes(image::read(dir.file("a.bmp"), 3)), bytes(img));
  Tensor j = image::read(dir.file("a.JPG"), 3);
  ASSERT_EQ(j.shape(), Shape({16, 24, 3}));
  int worst = 0;
  for (std::int64_t i = 0; i < j.numel(); ++i)
    worst = std::max(worst, std::abs(int(j.data<std::uint8_t>()[i]) - int(img.data<std::uint8_t>()[i])));
  EXPECT_LE(worst, 12) << "JPEG at quality 100 of a smooth image";
}

TEST(Image, RealCifarSamplePng) {
  std::string data = systolic::testing::shared_data_dir();
  if (data.empty()) GTEST_SKIP() << "../shared/data is absent";
  Tensor img = image::read(data + "/cifar10-sample/111.png", 3);
  EXPECT_EQ(img.shape(), Shape({32, 32, 3}));
  EXPECT_EQ(img.dtype(), DType::uint8);
  Tensor grey = image::read(data + "/cifar10-sample/111.png", 1);
  EXPECT_EQ(grey.shape(), Shape({32, 32, 1}));
}

TEST(Image, BadFilesNameTheFile) {
  TempDir dir;
  write_bytes(dir.file("text.png"), "this is not an image at all, just some text");
  EXPECT_THAT(error_of([&] { image::read(dir.file("text.png")); }), HasSubstr(dir.file("text.png")));
  EXPECT_THAT(error_of([&] { image::read(dir.file("text.png")); }), HasSubstr("not a PNG, JPEG, BMP"));
  write_bytes(dir.file("empty.png"), "");
  EXPECT_THAT(error_of([&] { image::read(dir.file("empty.png")); }), HasSubstr("empty"));
  EXPECT_THAT(error_of([&] { image::read(dir.file("missing.png")); }), HasSubstr("no such file"));
  // A PNG cut in half: header fine, data missing.
  image::write_png(dir.file("full.png"), pattern(64, 64, 3));
  std::string png = read_text(dir.file("full.png"));
  write_bytes(dir.file("half.png"), png.substr(0, png.size() / 2));
  std::string msg = error_of([&] { image::read(dir.file("half.png")); });
  EXPECT_THAT(msg, HasSubstr(dir.file("half.png")));
  EXPECT_THAT(msg, HasSubstr("corrupt or truncated"));
  EXPECT_THAT(error_of([&] { image::read(dir.file("full.png"), 2); }), HasSubstr("2 channels"));
  // Writing into a folder that does not exist names the path.
  EXPECT_THAT(error_of([&] { image::write_png(dir.file("no/such/dir/x.png"), pattern(2, 2, 3)); }),
              HasSubstr("no/such/dir/x.png"));
  EXPECT_THAT(error_of([&] {
                image::write_png(dir.file("f.png"), Tensor::zeros({2, 2, 3}));
              }),
              HasSubstr("uint8"));
}

TEST(Image, ResizeMatchesTensorFlowBilinear) {
  // tf.image.resize([[0, 100]], (1, 4), "bilinear") = [0, 25, 75, 100] (half-pixel centres, edges clamped).
  Tensor row = Tensor::from_vector<std::uint8_t>({0, 100}, {1, 2, 1});
  EXPECT_EQ(image::resize(row, 1, 4, DType::float32).to_doubles(), (std::vector<double>{0, 25, 75, 100}));
  // Downscaling 4 -> 2 without antialias averages the two middle-sampled neighbours:
  // [10, 30, 50, 70] -> [20, 60].
  Tensor four = Tensor::from_vector<std::uint8_t>({10, 30, 50, 70}, {1, 4, 1});
  EXPECT_EQ(image::resize(four, 1, 2, DType::float32).to_doubles(), (std::vector<double>{20, 60}));
  // 2x2 -> 3x3: the centre is the mean of the four; uint8 results round to nearest.
  Tensor sq = Tensor::from_vector<std::uint8_t>({0, 10, 20, 31}, {2, 2, 1});
  auto f = image::resize(sq, 3, 3, DType::float32).to_doubles();
  EXPECT_NEAR(f[4], 15.25, 1e-5);
  EXPECT_NEAR(f[0], 0.0, 1e-5);  // p = -1/6: both taps on the corner
  auto u = image::resize(sq, 3, 3).to_doubles();
  EXPECT_EQ(u[4], 15);
  // Same size: unchanged.
  Tensor img = pattern(5, 6, 3);
  EXPECT_EQ(bytes(image::resize(img, 5, 6)), bytes(img));
  EXPECT_EQ(image::resize(img, 10, 3).shape(), Shape({10, 3, 3}));
  EXPECT_THAT(error_of([&] { image::resize(img, 0, 3); }), HasSubstr("positive"));
}

TEST(Image, UpscaleNearest) {
  Tensor img = Tensor::from_vector<std::uint8_t>({1, 2, 3, 4}, {2, 2, 1});
  Tensor up = image::upscale_nearest(img, 2);
  ASSERT_EQ(up.shape(), Shape({4, 4, 1}));
  EXPECT_EQ(bytes(up), (std::vector<int>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  EXPECT_THAT(error_of([&] { image::upscale_nearest(img, 0); }), HasSubstr("factor 0"));
}

// -----------------------------------------------------------------------------------------------------------
// Image folders.

TEST(Image, TerminalPreviewHalfBlocks) {
  // 3 rows x 2 columns, RGB: rows 0 and 1 share a text line (upper pixel = foreground, lower = background);
  // the odd last row has no lower pixel, so its background is the terminal's default (49).
  Tensor rgb({3, 2, 3}, DType::uint8);
  for (int i = 0; i < 18; ++i) rgb.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(10 * i);
  EXPECT_EQ(
      image::terminal_preview(rgb),
      "\x1b[38;2;0;10;20m\x1b[48;2;60;70;80m\u2580\x1b[38;2;30;40;50m\x1b[48;2;90;100;110m\u2580\x1b[0m\n"
      "\x1b[38;2;120;130;140m\x1b[49m\u2580\x1b[38;2;150;160;170m\x1b[49m\u2580\x1b[0m\n");
  // Grey (H, W) images show as grey.
  Tensor grey({2, 1}, DType::uint8);
  grey.data<std::uint8_t>()[0] = 7, grey.data<std::uint8_t>()[1] = 200;
  EXPECT_EQ(image::terminal_preview(grey), "\x1b[38;2;7;7;7m\x1b[48;2;200;200;200m\u2580\x1b[0m\n");
  EXPECT_THAT(error_of([] {
                image::terminal_preview(Tensor({2, 2, 3}, DType::float32));
              }),
              HasSubstr("uint8"));
}

TEST(ImageFolder, PngJpegBmpClassesSortedAndResized) {
  TempDir dir;
  fs::create_directories(dir.path() / "zebra");
  fs::create_directories(dir.path() / "ant" / "nested");
  fs::create_directories(dir.path() / "cat");
  image::write_png((dir.path() / "zebra" / "b.png").string(), pattern(10, 12, 3, 1));
  image::write_png((dir.path() / "zebra" / "a.png").string(), pattern(8, 8, 3, 2));
  Tensor jpg = pattern(20, 16, 3, 3);
  ASSERT_TRUE(stbi_write_jpg((dir.path() / "ant" / "nested" / "x.jpeg").string().c_str(), 16, 20, 3,
                             jpg.data<std::uint8_t>(), 95));
  Tensor bmp = pattern(8, 8, 3, 4);
  ASSERT_TRUE(
      stbi_write_bmp((dir.path() / "cat" / "c.bmp").string().c_str(), 8, 8, 3, bmp.data<std::uint8_t>()));
  write_bytes((dir.path() / "cat" / "notes.txt").string(), "ignored: not an image extension");

  std::vector<std::string> names;
  auto s = datasets::image_dataset_from_directory(dir.path().string(), {.height = 8, .width = 8}, &names);
  EXPECT_EQ(names, (std::vector<std::string>{"ant", "cat", "zebra"}));
  ASSERT_EQ(s.x.shape(), Shape({4, 8, 8, 3}));
  ASSERT_EQ(s.y.shape(), Shape({4}));
  EXPECT_EQ(bytes(s.y), (std::vector<int>{0, 1, 2, 2}));
  // Class by class, files sorted: zebra/a.png (8x8, unchanged) is sample 2; cat/c.bmp is sample 1.
  EXPECT_EQ(bytes(s.x.slice(2, 3).reshape({8, 8, 3})), bytes(pattern(8, 8, 3, 2)));
  EXPECT_EQ(bytes(s.x.slice(1, 2).reshape({8, 8, 3})), bytes(bmp));
  EXPECT_EQ(bytes(s.x.slice(3, 4).reshape({8, 8, 3})), bytes(image::resize(pattern(10, 12, 3, 1), 8, 8)));

  // Grayscale, the first image's size, and a limit.
  auto g = datasets::image_dataset_from_directory(dir.path().string(), {.channels = 1, .limit = 2});
  EXPECT_EQ(g.x.shape(), Shape({2, 20, 16, 1}));
}

TEST(ImageFolder, Errors) {
  TempDir dir;
  EXPECT_THAT(error_of([&] { datasets::image_dataset_from_directory(dir.file("nope"), {}); }),
              HasSubstr("no such folder"));
  EXPECT_THAT(error_of([&] { datasets::image_dataset_from_directory(dir.path().string(), {}); }),
              HasSubstr("no class subfolders"));
  fs::create_directories(dir.path() / "a");
  EXPECT_THAT(error_of([&] { datasets::image_dataset_from_directory(dir.path().string(), {}); }),
              HasSubstr("no images"));
  write_bytes((dir.path() / "a" / "broken.png").string(), "\x89PNG\r\n\x1a\n garbage");
  std::string msg = error_of([&] { datasets::image_dataset_from_directory(dir.path().string(), {}); });
  EXPECT_THAT(msg, HasSubstr("broken.png"));
}

TEST(ImageFolder, RealCifarSampleAsClassFolders) {
  std::string data = systolic::testing::shared_data_dir();
  if (data.empty()) GTEST_SKIP() << "../shared/data is absent";
  TempDir dir;
  std::ifstream csv(data + "/cifar10-sample/labels.csv");
  std::map<std::string, int> per_class;
  std::string line;
  std::getline(csv, line);  // header
  int n = 0;
  while (std::getline(csv, line)) {
    auto comma = line.find(',');
    if (comma == std::string::npos) continue;
    std::string file = line.substr(0, comma), label = line.substr(comma + 1);
    if (!file.empty() && file.find('.') == std::string::npos) file += ".png";
    while (!label.empty() && (label.back() == '\r' || label.back() == ' ')) label.pop_back();
    fs::create_directories(dir.path() / label);
    fs::create_symlink(fs::path(data) / "cifar10-sample" / file, dir.path() / label / file);
    ++per_class[label], ++n;
  }
  ASSERT_EQ(n, 200);
  std::vector<std::string> names;
  auto s = datasets::image_dataset_from_directory(dir.path().string(), {.height = 32, .width = 32}, &names);
  EXPECT_EQ(s.x.shape(), Shape({200, 32, 32, 3}));
  ASSERT_EQ(names.size(), per_class.size());
  std::vector<int> counts(names.size(), 0);
  for (std::int64_t i = 0; i < 200; ++i) ++counts[s.y.data<std::uint8_t>()[i]];
  for (std::size_t c = 0; c < names.size(); ++c) EXPECT_EQ(counts[c], per_class[names[c]]) << names[c];
}

TEST(Image, ReadResizedToAModelsInput) {
  TempDir dir;
  image::write_png(dir.file("big.png"), pattern(20, 16, 3, 5));
  image::write_png(dir.file("fits.png"), pattern(8, 8, 3, 6));
  EXPECT_EQ(bytes(image::read_resized(dir.file("big.png"), 8, 8, 3)),
            bytes(image::resize(pattern(20, 16, 3, 5), 8, 8)));
  EXPECT_EQ(bytes(image::read_resized(dir.file("fits.png"), 8, 8, 3)), bytes(pattern(8, 8, 3, 6)));
  Tensor grey = image::read_resized(dir.file("big.png"), 10, 4, 1);
  EXPECT_EQ(grey.shape(), Shape({10, 4, 1}));
  EXPECT_EQ(bytes(grey), bytes(image::resize(image::read(dir.file("big.png"), 1), 10, 4)));
  EXPECT_THAT(error_of([&] { image::read_resized(dir.file("nope.png"), 8, 8, 3); }), HasSubstr("nope.png"));
}

TEST(Image, ToFloatBatchScalesEveryPixel) {
  Tensor a = pattern(3, 2, 1, 1), b = pattern(3, 2, 1, 2);
  Tensor raw = image::to_float_batch({a, b});
  ASSERT_EQ(raw.shape(), Shape({2, 3, 2, 1}));
  ASSERT_EQ(raw.dtype(), DType::float32);
  std::vector<double> want;
  for (const Tensor& t : {a, b})
    for (int v : bytes(t)) want.push_back(v);
  EXPECT_EQ(raw.to_doubles(), want);
  Tensor scaled = image::to_float_batch({b}, 1.0 / 255);
  for (std::size_t i = 0; i < 6; ++i)
    EXPECT_EQ(scaled.data<float>()[i], static_cast<float>(b.data<std::uint8_t>()[i] * (1.0 / 255)));
  EXPECT_THAT(error_of([&] { image::to_float_batch({a, pattern(2, 3, 1)}); }), HasSubstr("image 1"));
  EXPECT_THAT(error_of([&] { image::to_float_batch({}); }), HasSubstr("no images"));
}

// Channel conversion as read() converts decoded files: grey replicated, RGB to stb's luma, exact; a batch is
// converted, then resized image by image.
TEST(Image, ToChannelsAndResizeBatch) {
  TempDir dir;
  Tensor rgb = pattern(6, 7, 3, 2);
  image::write_png(dir.file("rgb.png"), rgb);
  EXPECT_EQ(bytes(image::to_channels(rgb, 1)), bytes(image::read(dir.file("rgb.png"), 1)));
  Tensor px({1, 1, 3}, DType::uint8);
  px.data<std::uint8_t>()[0] = 255, px.data<std::uint8_t>()[1] = 10, px.data<std::uint8_t>()[2] = 200;
  EXPECT_EQ(bytes(image::to_channels(px, 1)), std::vector<int>{(77 * 255 + 150 * 10 + 29 * 200) >> 8});
  Tensor grey = pattern(4, 5, 1, 3);
  Tensor g3 = image::to_channels(grey, 3);
  ASSERT_EQ(g3.shape(), Shape({4, 5, 3}));
  for (std::int64_t i = 0; i < 20; ++i)
    for (int k = 0; k < 3; ++k) EXPECT_EQ(g3.data<std::uint8_t>()[3 * i + k], grey.data<std::uint8_t>()[i]);
  EXPECT_TRUE(image::to_channels(rgb, 3).shares_storage_with(rgb));

  Tensor batch({2, 4, 5, 1}, DType::uint8);
  std::memcpy(batch.data<std::uint8_t>(), grey.raw_data(), 20);
  std::memcpy(batch.data<std::uint8_t>() + 20, pattern(4, 5, 1, 9).raw_data(), 20);
  Tensor big = image::resize_batch(batch, 9, 11, 3, "test batch");
  ASSERT_EQ(big.shape(), Shape({2, 9, 11, 3}));
  std::vector<int> want = bytes(image::resize(image::to_channels(grey, 3), 9, 11));
  for (int v : bytes(image::resize(image::to_channels(pattern(4, 5, 1, 9), 3), 9, 11))) want.push_back(v);
  EXPECT_EQ(bytes(big), want);
  EXPECT_TRUE(image::resize_batch(batch, 4, 5, 1, "same").shares_storage_with(batch));
  EXPECT_THAT(error_of([&] { image::resize_batch(batch, 9, 11, 2, "test batch"); }), HasSubstr("2 channels"));
  EXPECT_THAT(error_of([&] { image::resize_batch(grey, 9, 11, 3, "test batch"); }), HasSubstr("test batch"));
}
