// systolic: Keras-style neural networks in C++. One include for the whole public API.
#pragma once

#include <systolic/backup_and_restore.h>
#include <systolic/callbacks.h>
#include <systolic/datasets.h>
#include <systolic/device.h>
#include <systolic/distribute.h>
#include <systolic/dtype.h>
#include <systolic/error.h>
#include <systolic/image.h>
#include <systolic/layer.h>
#include <systolic/layers.h>
#include <systolic/log.h>
#include <systolic/losses.h>
#include <systolic/metrics.h>
#include <systolic/model.h>
#include <systolic/models.h>
#include <systolic/ops.h>
#include <systolic/optimizers.h>
#include <systolic/pipeline.h>
#include <systolic/plot.h>
#include <systolic/random.h>
#include <systolic/saving.h>
#include <systolic/shape.h>
#include <systolic/system.h>
#include <systolic/tensor.h>
#include <systolic/version.h>
