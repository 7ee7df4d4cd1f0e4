/* device_open.h: turning a --device string ("sim", "sim:rtx5090", "sim:24GiB", "host", "cuda:0") and an
 * optional --capacity into a device. */
#ifndef OOMLAB_DEVICE_OPEN_H
#define OOMLAB_DEVICE_OPEN_H

#include "device/device.h"
#include "util/err.h"

/* capacity 0 = the spec's own (profile or size); otherwise the total the device reports. */
struct device *device_open(const char *spec, uint64_t capacity, struct err *e);

#endif
