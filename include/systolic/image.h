// Images: decode PNG/JPEG/BMP (and GIF, first frame) files, resize, write PNG. Built on Debian's stb
// (stb_image, stb_image_write) and libjpeg-turbo (JPEG, as TensorFlow decodes it); every image is a uint8 Tensor (H, W, C), channels_last, C = 1 (grey) or
// 3 (RGB).
//
//   Tensor img = image::read("frog.png", 3);  // uint8 (H, W, 3); 1 for grey; errors name the file
//   Tensor small = image::resize(img, 32, 32);  // bilinear, no antialias (image_dataset_from_directory's)
//   image::write_png("big.png", image::upscale_nearest(small, 8));  // atomic: temp file + rename
//
// resize follows tf.image.resize(method="bilinear", antialias=False): half-pixel centres, edge pixels
// clamped, the same for up- and down-scaling (stb_image_resize filters when downscaling, which Keras does
// not, so it is not used). With dtype float32 the values are TensorFlow's; with uint8 (the default) they are
// rounded to nearest. JPEG is decoded by libjpeg-turbo with its defaults (as tf.io.decode_jpeg); a truncated
// JPEG is an error.
#pragma once

#include <systolic/tensor.h>

#include <cstddef>
#include <string>
#include <vector>

namespace systolic::image {

// Decodes an image file into uint8 (H, W, channels); channels 1 (luma: stb's ITU-R 601 weights, libjpeg's
// for JPEG) or 3 (RGB;
// grey images are replicated, alpha dropped). Throws Error naming the file when it is missing, not an image,
// truncated or corrupt.
Tensor read(const std::string& path, int channels = 3);
// The same from bytes in memory; `name` appears in error messages.
Tensor decode(const void* data, std::size_t size, int channels, const std::string& name);

// Bilinear resize of (H, W, C) (or (H, W)) uint8 or float32 to (height, width, C); result in `dtype`
// (uint8: rounded to nearest and clamped to 0-255; float32: TensorFlow's values).
Tensor resize(const Tensor& image, std::int64_t height, std::int64_t width, DType dtype = DType::uint8);

// uint8 (H, W, C) with C 1 or 3 as `channels` (1 or 3): grey replicated to RGB, RGB to luma with read()'s
// weights (stb's ITU-R 601: (77 R + 150 G + 29 B) >> 8). The same tensor when C is `channels` already.
Tensor to_channels(const Tensor& image, int channels);

// A batch of uint8 images (N, H, W, C) as (N, height, width, channels): to_channels, then resize (bilinear,
// rounded). The same tensor when it has that shape already. `what` names the batch in errors.
Tensor resize_batch(const Tensor& batch, std::int64_t height, std::int64_t width, int channels,
                    const std::string& what);

// An image file as a model's input of (height, width, channels): decoded to `channels` (read) and, when its
// size differs, resized bilinearly (resize). uint8.
Tensor read_resized(const std::string& path, std::int64_t height, std::int64_t width, int channels);

// uint8 images of one shape (H, W, C) as one float32 batch (N, H, W, C) of pixel * scale (1: the raw 0-255
// values, as the seed feeds them; 1/255: values in [0, 1]). Errors name the image that does not fit.
Tensor to_float_batch(const std::vector<Tensor>& images, double scale = 1.0);

// Nearest-neighbour upscaling by an integer factor >= 1: (H, W, C) -> (H*factor, W*factor, C).
Tensor upscale_nearest(const Tensor& image, int factor);

// Writes uint8 (H, W, C) with C in {1, 3, 4} (or (H, W)) as PNG, atomically (a temp file beside `path`,
// then rename). Throws Error naming the path when it cannot be written.
void write_png(const std::string& path, const Tensor& image);

// A colour preview of uint8 (H, W, C) (or (H, W)) for a terminal: two pixel rows per text row (the upper half
// block, foreground = upper pixel, background = lower), 24-bit ANSI colours, one line per row pair, each
// ending in a colour reset. Callers print it only when the stream is a terminal (isatty).
std::string terminal_preview(const Tensor& image);

// Extensions image folders accept (lower case, with the dot), as Keras's image_dataset_from_directory.
bool has_image_extension(const std::string& path);

}  // namespace systolic::image
