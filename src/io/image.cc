// Image decoding and PNG writing through stb (the one place its implementations are compiled) and JPEG
// decoding through libjpeg-turbo, TensorFlow's bilinear resize, nearest-neighbour upscaling.
#include <systolic/image.h>

#include <csetjmp>
#include <cstdio>  // before jpeglib.h, which uses FILE and size_t
#include <cstdlib>

// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include "io/files.h"

#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_HDR
#define STBI_NO_LINEAR
#define STBI_FAILURE_USERMSG
// JPEG goes to libjpeg-turbo: Debian's stb_image reads out of bounds in stbi__jpeg_decode_block on damaged
// files (the image fuzz harness segfaults it), and TensorFlow decodes JPEG with libjpeg-turbo too.
#define STBI_NO_JPEG
#include <stb_image.h>
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

namespace systolic::image {

namespace {

void check_channels(int channels, const std::string& name) {
  SYSTOLIC_CHECK(channels == 1 || channels == 3,
                 "{}: {} channels requested; images decode to 1 (grey) or 3 (RGB)", name, channels);
}

// (H, W) -> (H, W, 1); checks rank.
Tensor as_hwc(const Tensor& image, const char* what) {
  SYSTOLIC_CHECK(image.defined() && (image.rank() == 2 || image.rank() == 3),
                 "{}: expected an image of shape (H, W, C) or (H, W), got {}", what,
                 image.defined() ? image.shape().str() : std::string("an empty tensor"));
  return image.rank() == 2 ? image.reshape({image.dim(0), image.dim(1), 1}) : image;
}

// libjpeg reports errors through error_exit, which must not return: it jumps back to decode_jpeg_raw's setjmp.
struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  bool truncated;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_error_exit(j_common_ptr info) {
  auto* e = reinterpret_cast<JpegErrors*>(info->err);
  (*info->err->format_message)(info, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings are not printed; a truncated file (libjpeg fills the rest with grey) is an error, as in TensorFlow.
void jpeg_emit_message(j_common_ptr info, int level) {
  if (level < 0 && info->err->msg_code == JWRN_JPEG_EOF)
    reinterpret_cast<JpegErrors*>(info->err)->truncated = true;
}

// Plain C state only between setjmp and longjmp (no destructors skipped): pixels malloc'ed into *out.
// Returns false with `message` set on any error.
bool decode_jpeg_raw(const unsigned char* data, std::size_t size, int channels, unsigned char** out,
                     int* width, int* height, char* message) {
  jpeg_decompress_struct info;
  JpegErrors errors;
  unsigned char* volatile pixels = nullptr;
  info.err = jpeg_std_error(&errors.mgr);
  errors.mgr.error_exit = jpeg_error_exit;
  errors.mgr.emit_message = jpeg_emit_message;
  errors.truncated = false;
  errors.message[0] = 0;
  if (setjmp(errors.jump)) {
    jpeg_destroy_decompress(&info);
    std::free(pixels);
    std::snprintf(message, JMSG_LENGTH_MAX, "%s", errors.message);
    return false;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, data, static_cast<unsigned long>(size));
  jpeg_read_header(&info, TRUE);
  if (std::uint64_t(info.image_width) * info.image_height > (std::uint64_t(1) << 28)) {
    std::snprintf(message, JMSG_LENGTH_MAX, "%ux%u pixels is too large", info.image_width, info.image_height);
    jpeg_destroy_decompress(&info);
    return false;
  }
  info.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&info);
  const std::size_t row = std::size_t(info.output_width) * info.output_components;
  pixels = static_cast<unsigned char*>(std::malloc(row * info.output_height + 1));
  if (!pixels) {
    std::snprintf(message, JMSG_LENGTH_MAX, "out of memory");
    jpeg_destroy_decompress(&info);
    return false;
  }
  while (info.output_scanline < info.output_height) {
    JSAMPROW line = pixels + row * info.output_scanline;
    jpeg_read_scanlines(&info, &line, 1);
  }
  jpeg_finish_decompress(&info);
  *width = static_cast<int>(info.output_width);
  *height = static_cast<int>(info.output_height);
  jpeg_destroy_decompress(&info);
  if (errors.truncated) {
    std::free(pixels);
    std::snprintf(message, JMSG_LENGTH_MAX, "premature end of JPEG data");
    return false;
  }
  *out = pixels;
  return true;
}

}  // namespace

Tensor decode(const void* data, std::size_t size, int channels, const std::string& name) {
  check_channels(channels, name);
  SYSTOLIC_CHECK(size > 0, "{}: empty file, not an image", name);
  SYSTOLIC_CHECK(size < (std::size_t(1) << 31), "{}: {} bytes is too large for an image file", name, size);
  const auto* bytes = static_cast<const unsigned char*>(data);
  if (size >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) {  // JPEG (SOI, then a marker)
    unsigned char* pixels = nullptr;
    int w = 0, h = 0;
    char message[JMSG_LENGTH_MAX];
    if (!decode_jpeg_raw(bytes, size, channels, &pixels, &w, &h, message))
      fail("{}: corrupt or truncated JPEG image ({})", name, message);
    Tensor t({h, w, channels}, DType::uint8);
    std::memcpy(t.data<std::uint8_t>(), pixels, t.nbytes());
    std::free(pixels);
    return t;
  }
  int w = 0, h = 0, c = 0;
  if (!stbi_info_from_memory(static_cast<const stbi_uc*>(data), static_cast<int>(size), &w, &h, &c))
    fail("{}: not a PNG, JPEG, BMP or GIF image ({})", name,
         stbi_failure_reason() ? stbi_failure_reason() : "unknown");
  SYSTOLIC_CHECK(std::int64_t(w) * h <= (std::int64_t(1) << 28), "{}: {}x{} pixels is too large", name, w, h);
  // BMP is uncompressed: a header claiming more pixels than the file holds would have stb decode (and this
  // allocate) up to 2^28 pixels of nothing from a few bytes. Bits per pixel: bytes 28-29, little-endian.
  const auto* b = static_cast<const unsigned char*>(data);
  if (size >= 30 && b[0] == 'B' && b[1] == 'M') {
    std::int64_t bits = std::max(1, b[28] | (b[29] << 8));
    std::int64_t need = (std::int64_t(w) * h * bits + 7) / 8;
    SYSTOLIC_CHECK(need <= std::int64_t(size),
                   "{}: truncated BMP: {}x{} pixels at {} bits need {} bytes, the file has {}", name, w, h,
                   bits, need, size);
  }
  stbi_uc* pixels =
      stbi_load_from_memory(static_cast<const stbi_uc*>(data), static_cast<int>(size), &w, &h, &c, channels);
  if (!pixels)
    fail("{}: corrupt or truncated image ({})", name,
         stbi_failure_reason() ? stbi_failure_reason() : "unknown");
  Tensor t({h, w, channels}, DType::uint8);
  std::memcpy(t.data<std::uint8_t>(), pixels, t.nbytes());
  stbi_image_free(pixels);
  return t;
}

Tensor read(const std::string& path, int channels) {
  check_channels(channels, path);
  std::vector<char> bytes = io::read_file(path);
  return decode(bytes.data(), bytes.size(), channels, path);
}

Tensor read_resized(const std::string& path, std::int64_t height, std::int64_t width, int channels) {
  Tensor image = read(path, channels);
  if (image.dim(0) != height || image.dim(1) != width) image = resize(image, height, width);
  return image;
}

Tensor to_channels(const Tensor& image_in, int channels) {
  Tensor image = as_hwc(image_in, "image::to_channels");
  check_channels(channels, "image::to_channels");
  SYSTOLIC_CHECK(image.dtype() == DType::uint8, "image::to_channels: expected uint8, got {}",
                 dtype_name(image.dtype()));
  const std::int64_t C = image.dim(2), n = image.dim(0) * image.dim(1);
  SYSTOLIC_CHECK(C == 1 || C == 3, "image::to_channels: images have 1 or 3 channels, got {}", C);
  if (C == channels) return image;
  Tensor out({image.dim(0), image.dim(1), channels}, DType::uint8);
  const std::uint8_t* in = image.data<std::uint8_t>();
  std::uint8_t* o = out.data<std::uint8_t>();
  for (std::int64_t i = 0; i < n; ++i)
    if (channels == 3)
      o[3 * i] = o[3 * i + 1] = o[3 * i + 2] = in[i];
    else
      o[i] = static_cast<std::uint8_t>((77 * in[3 * i] + 150 * in[3 * i + 1] + 29 * in[3 * i + 2]) >> 8);
  return out;
}

Tensor resize_batch(const Tensor& batch, std::int64_t height, std::int64_t width, int channels,
                    const std::string& what) {
  SYSTOLIC_CHECK(batch.defined() && batch.rank() == 4 && batch.dtype() == DType::uint8,
                 "{}: expected uint8 images (N, H, W, C), got {} {}", what,
                 batch.defined() ? dtype_name(batch.dtype()) : "nothing",
                 batch.defined() ? batch.shape().str() : "");
  SYSTOLIC_CHECK(height > 0 && width > 0, "{}: target size {}x{} must be positive", what, height, width);
  check_channels(channels, what);
  const std::int64_t N = batch.dim(0);
  if (batch.dim(1) == height && batch.dim(2) == width && batch.dim(3) == channels) return batch;
  Tensor out({N, height, width, channels}, DType::uint8);
  const std::int64_t each = height * width * channels;
  for (std::int64_t i = 0; i < N; ++i) {
    Tensor image = to_channels(batch.slice(i, i + 1).reshape(batch.shape().without_batch()), channels);
    if (image.dim(0) != height || image.dim(1) != width) image = resize(image, height, width);
    std::memcpy(out.data<std::uint8_t>() + i * each, image.data<std::uint8_t>(),
                static_cast<std::size_t>(each));
  }
  return out;
}

Tensor to_float_batch(const std::vector<Tensor>& images, double scale) {
  SYSTOLIC_CHECK(!images.empty(), "image::to_float_batch: no images");
  const Shape& shape = images[0].shape();
  Tensor batch(shape.with_batch(static_cast<std::int64_t>(images.size())), DType::float32);
  float* out = batch.data<float>();
  for (std::size_t i = 0; i < images.size(); ++i) {
    const Tensor& image = images[i];
    SYSTOLIC_CHECK(image.dtype() == DType::uint8 && image.shape() == shape,
                   "image::to_float_batch: image {} is {} {}, not uint8 {} as the first", i,
                   dtype_name(image.dtype()), image.shape().str(), shape.str());
    const std::uint8_t* p = image.data<std::uint8_t>();
    for (std::int64_t k = 0; k < image.numel(); ++k) *out++ = static_cast<float>(p[k] * scale);
  }
  return batch;
}

Tensor resize(const Tensor& image_in, std::int64_t height, std::int64_t width, DType dtype) {
  Tensor image = as_hwc(image_in, "image::resize");
  SYSTOLIC_CHECK(height > 0 && width > 0, "image::resize: target size {}x{} must be positive", height, width);
  SYSTOLIC_CHECK(dtype == DType::uint8 || dtype == DType::float32,
                 "image::resize: result dtype {} is not uint8 or float32", dtype_name(dtype));
  std::int64_t H = image.dim(0), W = image.dim(1), C = image.dim(2);
  SYSTOLIC_CHECK(H > 0 && W > 0 && C > 0, "image::resize: empty image {}", image.shape().str());
  Tensor src = image.dtype() == DType::float32 ? image : image.to(DType::float32);
  const float* in = src.data<float>();

  // TensorFlow's ResizeBilinear with half_pixel_centers: in = (out + 0.5) * scale - 0.5,
  // lower = max(floor, 0), upper = min(ceil, size - 1), lerp = in - floor(in).
  struct Tap {
    std::int64_t lo, hi;
    float t;
  };
  auto taps = [](std::int64_t out, std::int64_t in_size) {
    std::vector<Tap> v(static_cast<std::size_t>(out));
    float scale = float(in_size) / float(out);
    for (std::int64_t i = 0; i < out; ++i) {
      float p = (float(i) + 0.5f) * scale - 0.5f;
      float f = std::floor(p);
      v[i] = {std::max<std::int64_t>(std::int64_t(f), 0),
              std::min<std::int64_t>(std::int64_t(std::ceil(p)), in_size - 1), p - f};
    }
    return v;
  };
  auto ty = taps(height, H), tx = taps(width, W);
  Tensor out({height, width, C}, dtype);
  for (std::int64_t y = 0; y < height; ++y) {
    const float* top = in + ty[y].lo * W * C;
    const float* bottom = in + ty[y].hi * W * C;
    for (std::int64_t x = 0; x < width; ++x) {
      for (std::int64_t c = 0; c < C; ++c) {
        float tl = top[tx[x].lo * C + c], tr = top[tx[x].hi * C + c];
        float bl = bottom[tx[x].lo * C + c], br = bottom[tx[x].hi * C + c];
        float t = tl + (tr - tl) * tx[x].t;
        float b = bl + (br - bl) * tx[x].t;
        float v = t + (b - t) * ty[y].t;
        std::int64_t o = (y * width + x) * C + c;
        if (dtype == DType::float32)
          out.data<float>()[o] = v;
        else
          out.data<std::uint8_t>()[o] = static_cast<std::uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
    }
  }
  return image_in.rank() == 2 ? out.reshape({height, width}) : out;
}

Tensor upscale_nearest(const Tensor& image_in, int factor) {
  Tensor image = as_hwc(image_in, "image::upscale_nearest");
  SYSTOLIC_CHECK(factor >= 1 && factor <= 256, "image::upscale_nearest: factor {} is not 1 to 256", factor);
  SYSTOLIC_CHECK(image.dtype() == DType::uint8, "image::upscale_nearest: expected uint8, got {}",
                 dtype_name(image.dtype()));
  std::int64_t H = image.dim(0), W = image.dim(1), C = image.dim(2);
  Tensor out({H * factor, W * factor, C}, DType::uint8);
  const std::uint8_t* in = image.data<std::uint8_t>();
  std::uint8_t* o = out.data<std::uint8_t>();
  for (std::int64_t y = 0; y < H * factor; ++y)
    for (std::int64_t x = 0; x < W * factor; ++x)
      std::memcpy(o + (y * W * factor + x) * C, in + ((y / factor) * W + x / factor) * C,
                  static_cast<std::size_t>(C));
  return out;
}

void write_png(const std::string& path, const Tensor& image_in) {
  Tensor image = as_hwc(image_in, path.c_str());
  SYSTOLIC_CHECK(image.dtype() == DType::uint8, "{}: PNG needs uint8 pixels, got {}", path,
                 dtype_name(image.dtype()));
  std::int64_t H = image.dim(0), W = image.dim(1), C = image.dim(2);
  SYSTOLIC_CHECK(C == 1 || C == 3 || C == 4, "{}: PNG needs 1, 3 or 4 channels, got shape {}", path,
                 image.shape().str());
  SYSTOLIC_CHECK(H > 0 && W > 0 && H < (1 << 24) && W < (1 << 24), "{}: cannot write an image of shape {}",
                 path, image.shape().str());
  std::vector<char> png;
  auto sink = [](void* context, void* data, int size) {
    auto* v = static_cast<std::vector<char>*>(context);
    v->insert(v->end(), static_cast<char*>(data), static_cast<char*>(data) + size);
  };
  if (!stbi_write_png_to_func(sink, &png, int(W), int(H), int(C), image.data<std::uint8_t>(), int(W * C)))
    fail("{}: PNG encoding failed", path);
  io::write_file_atomic(path, png.data(), png.size());
}

std::string terminal_preview(const Tensor& image_in) {
  Tensor image = as_hwc(image_in, "image::terminal_preview");
  SYSTOLIC_CHECK(image.dtype() == DType::uint8, "image::terminal_preview: expected uint8, got {}",
                 dtype_name(image.dtype()));
  std::int64_t H = image.dim(0), W = image.dim(1), C = image.dim(2);
  const std::uint8_t* p = image.data<std::uint8_t>();
  auto rgb = [&](std::int64_t y, std::int64_t x) {
    const std::uint8_t* q = p + (y * W + x) * C;
    return C >= 3 ? std::array<int, 3>{q[0], q[1], q[2]} : std::array<int, 3>{q[0], q[0], q[0]};
  };
  std::string out;
  for (std::int64_t y = 0; y < H; y += 2) {
    for (std::int64_t x = 0; x < W; ++x) {
      auto t = rgb(y, x);
      if (y + 1 < H) {
        auto b = rgb(y + 1, x);
        out +=
            fmt::format("\x1b[38;2;{};{};{}m\x1b[48;2;{};{};{}m\u2580", t[0], t[1], t[2], b[0], b[1], b[2]);
      } else {
        out +=
            fmt::format("\x1b[38;2;{};{};{}m\x1b[49m\u2580", t[0], t[1], t[2]);  // odd height: no lower pixel
      }
    }
    out += "\x1b[0m\n";
  }
  return out;
}

bool has_image_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp" || ext == ".gif";
}

}  // namespace systolic::image
